#!/usr/bin/env bash
# A coverage-guided campaign on one fuzz target (src/fuzz.rs) with AFL++,
# on the stable toolchain through cargo-afl (installed when missing).
#
#   bench/fuzz.sh TARGET SECONDS       # e.g. bench/fuzz.sh msccl-xml 600
#   bench/fuzz.sh list                 # the targets
#   MINIMIZE=1 bench/fuzz.sh TARGET S  # then fold the queue into the corpus
#   FUZZ_BIN=PATH bench/fuzz.sh …      # use a driver built before
#   EXECS=10000000 bench/fuzz.sh T S   # stop at 10^7 executions or S seconds
#
# Starts from fuzz/corpus/<corpus>/, writes AFL's state to
# target/fuzz/<TARGET>/ (FUZZ_OUT to change) and prints one table row:
# executions, executions per second, edges covered, crashes, hangs; the
# same as JSON in bench/results/fuzz-<TARGET>.json. A crash or hang is a
# finding: replay it with `fuzz/target/release/rscc-fuzz TARGET FILE`,
# fix it, and keep the file in fuzz/regressions/<TARGET>/ (the tests
# replay every one). Limits: one allocation above 1 GiB aborts (the
# driver's allocator), 2 GiB of address space in all (-m), and a time
# limit per input (-t) of 1 s for the readers, 5 s for verify and run.
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: bench/fuzz.sh TARGET SECONDS | list}
# FUZZ_BIN: an instrumented driver built before (skips the build).
bin=${FUZZ_BIN:-fuzz/target/release/rscc-fuzz}

if ! command -v cargo-afl > /dev/null; then
  cargo install --locked cargo-afl
fi
if [ -z "${FUZZ_BIN:-}" ]; then
  cargo afl config --build > /dev/null 2>&1 || true
  (cd fuzz && cargo afl build --release --quiet)
fi

if [ "$target" = list ]; then
  "$bin" 2>&1 | sed 's/.*targets: //' | tr ',' '\n' | sed 's/^ //'
  exit 0
fi
secs=${2:?usage: bench/fuzz.sh TARGET SECONDS}
corpus=$(case "$target" in
  topo-json|nccl-xml|nvidia-smi|rocm-smi|msccl-xml) echo "$target" ;;
  verify|run) echo msccl-xml ;;
  *) echo "unknown target $target (bench/fuzz.sh list)" >&2; exit 2 ;;
esac)
case "$target" in verify|run) tmo=5000 ;; *) tmo=1000 ;; esac
out=${FUZZ_OUT:-target/fuzz}/$target
rm -rf "$out"
mkdir -p "$out" bench/results
dict=()
stop=()
[ -n "${EXECS:-}" ] && stop=(-E "$EXECS")
[ -f "fuzz/dict/$corpus.dict" ] && dict=(-x "fuzz/dict/$corpus.dict")

AFL_NO_UI=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
AFL_NO_AFFINITY=${AFL_NO_AFFINITY:-1} AFL_SKIP_CRASHES=0 \
  cargo afl fuzz -i "fuzz/corpus/$corpus" -o "$out" -V "$secs" "${stop[@]}" -t "$tmo" -m 2048 \
    "${dict[@]}" -- "$bin" "$target" > "$out/afl.log" 2>&1 || {
  tail -30 "$out/afl.log" >&2
  exit 1
}

python3 - "$out/default/fuzzer_stats" "$target" "bench/results/fuzz-$target.json" <<'PY'
import json, sys
stats = {}
for line in open(sys.argv[1]):
    k, _, v = line.partition(":")
    stats[k.strip()] = v.strip()
row = {
    "target": sys.argv[2],
    "seconds": int(stats["run_time"]),
    "execs": int(stats["execs_done"]),
    "execs_per_sec": round(int(stats["execs_done"]) / max(1, int(stats["run_time"]))),
    "edges_found": int(stats["edges_found"]),
    "total_edges": int(stats["total_edges"]),
    "coverage_pct": float(stats["bitmap_cvg"].rstrip("%")),
    "corpus": int(stats["corpus_count"]),
    "crashes": int(stats["saved_crashes"]),
    "hangs": int(stats["saved_hangs"]),
    "peak_rss_mb": int(stats.get("peak_rss_mb", 0)),
}
print("| target | s | executions | exec/s | edges | crashes | hangs |")
print("|---|---|---|---|---|---|---|")
print(f"| {row['target']} | {row['seconds']} | {row['execs']} | {row['execs_per_sec']} | "
      f"{row['edges_found']} / {row['total_edges']} | {row['crashes']} | {row['hangs']} |")
json.dump(row, open(sys.argv[3], "w"), indent=1)
PY
ls "$out"/default/crashes/id* "$out"/default/hangs/id* 2> /dev/null | sed 's/^/finding: /' || true

if [ "${MINIMIZE:-0}" = 1 ]; then
  rm -rf "$out/cmin"
  AFL_SKIP_CPUFREQ=1 cargo afl cmin -i "$out/default/queue" -o "$out/cmin" -t "$tmo" -m 2048 \
    -- "$bin" "$target" > "$out/cmin.log" 2>&1
  n=0
  for f in "$out"/cmin/*; do
    h=$(sha1sum "$f" | cut -c1-12)
    [ -e "fuzz/corpus/$corpus/q-$h" ] || { cp "$f" "fuzz/corpus/$corpus/q-$h"; n=$((n + 1)); }
  done
  echo "corpus: $n inputs added to fuzz/corpus/$corpus"
fi
