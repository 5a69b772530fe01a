#!/usr/bin/env bash
# One-command GPU check of the cuda backend; 242 s and 172 correctness
# runs on one H200 with the shipped schedules of all three ops:
#   1. builds rscc (release) unless RSCC_BIN names a prebuilt binary;
#   2. a smoke run (ring, 8 ranks, --check); if it fails, its error (and
#      compute-sanitizer's memcheck of a 2-rank run, when installed) and
#      exit 1 without the grid;
#   3. correctness grid in virtual-ranks mode: N = 2, 8, 16; every cuda
#      dtype (f32 f64 f16 bf16 i32, sum; f32 also prod max min); sizes
#      4 KiB .. 16 MiB checked for every schedule, 256 MiB and 1 GiB checked
#      for the N = 2 and N = 8 rings; schedules: every schedules/*/*.xml whose
#      ngpus is N, plus the built-in ring and all-pairs for that N;
#   4. performance: f32 sum, 64 KiB / 16 MiB per rank (and 1 GiB for the
#      rings, with a channels x tile sweep for 8 ranks, and the dgx-h100 /
#      dgx-h100x2 schedules; dgx-h100 rs/ag and ring8 ag once more with
#      --no-zero-copy), busbw and the
#      fraction of the memory-traffic roofline (N+1)*S/t over the device copy
#      bandwidth measured in the same run (`rscc run` measures it first);
#   5. prints one line per correctness run and one table row per
#      performance size; writes every run's JSON and summary.json under
#      $OUT when set.
# Exit code: 0 all correct, 1 some run wrong or failed.
set -uo pipefail
cd "$(dirname "$0")/.."

# NVRTC on LD_LIBRARY_PATH (exit 2 when it cannot be found).
. bench/nvrtc.sh

BIN=${RSCC_BIN:-}
if [ -z "$BIN" ]; then
  cargo build --release --quiet --bin rscc || { echo "gpu-check: build failed" >&2; exit 2; }
  BIN=target/release/rscc
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

RES=${OUT:-$(mktemp -d)}/gpu-check
mkdir -p "$RES"
fail=0
declare -a ROWS=()

# run TAG ARGS...: one rscc run, JSON kept; records OK/WRONG/FAIL.
run() {
  local tag=$1; shift
  local t0=$SECONDS
  timeout 120 "$BIN" run "$@" --backend cuda --gpu-mode virtual --json >"$RES/$tag.json" 2>"$RES/$tag.err"
  local rc=$?
  local st=OK
  [ $rc -eq 1 ] && st=WRONG
  [ $rc -ne 0 ] && [ $rc -ne 1 ] && st="FAIL($rc)"
  [ $rc -ne 0 ] && { fail=1; head -c 600 "$RES/$tag.err" >&2; }
  ROWS+=("$tag $st $((SECONDS - t0))s")
  echo "  $tag: $st ($((SECONDS - t0)) s)" >&2
}

sched_for() {  # schedules/*/*.xml and schedules/*/extra/*.xml with ngpus=$1
  for f in schedules/*/*.xml schedules/*/extra/*.xml; do
    grep -q "ngpus=\"$1\"" "$f" && echo "$f"
  done
}

sched_name() {  # schedules/dgx-h100/rs.xml -> dgx-h100-rs
  local n=${1#schedules/}; n=${n%.xml}; n=${n//extra\//}; echo "${n//\//-}"
}

# Smoke test first: when the simplest schedule fails there is no point in
# running the grid; show why (and what compute-sanitizer says, if present).
echo "== smoke (ring, 8 ranks, f32 sum, 4 KiB and 1 MiB)" >&2
run smoke-ring8 --builtin ring --ranks 8 --sizes 4K,1M --iters 1 --warmup 0 --check --no-membw
if [ $fail -ne 0 ]; then
  cat "$RES/smoke-ring8.err" >&2
  if command -v compute-sanitizer >/dev/null; then
    timeout 120 compute-sanitizer --tool memcheck "$BIN" run --builtin ring --ranks 2 \
      --sizes 4K --iters 1 --warmup 0 --check --no-membw --backend cuda 2>&1 | tail -40 >&2
  fi
  echo "gpu-check: smoke test failed; grid skipped (results in $RES)" >&2
  exit 1
fi

echo "== correctness (virtual ranks, --check)" >&2
for n in 2 8 16; do
  srcs=("builtin:ring" "builtin:allpairs")
  for f in $(sched_for $n); do srcs+=("$f"); done
  for s in "${srcs[@]}"; do
    if [[ $s == builtin:* ]]; then
      src=(--builtin "${s#builtin:}" --ranks "$n"); name="${s#builtin:}$n"
    else
      src=("$s"); name=$(sched_name "$s")
    fi
    for dt in f32 f64 f16 bf16 i32; do
      run "check-$name-$dt-sum" "${src[@]}" --dtype $dt --redop sum \
        --sizes 4K,64K,1M,16M --iters 1 --warmup 0 --check --no-membw
    done
    if [[ $s == builtin:ring ]]; then
      for op in prod max min; do
        run "check-$name-f32-$op" "${src[@]}" --dtype f32 --redop $op \
          --sizes 4K,1M --iters 1 --warmup 0 --check --no-membw
      done
      [ "$n" -le 8 ] && run "check-$name-f32-big" "${src[@]}" --dtype f32 \
        --sizes 256M,1G --iters 1 --warmup 0 --check --no-membw
    fi
  done
done

echo "== performance (f32 sum, busbw vs device copy bandwidth)" >&2
for n in 2 8 16; do
  run "perf-ring$n" --builtin ring --ranks $n --channels 4 --sizes 64K,16M,1G --iters 5 --warmup 2
  # Channels = threadblocks per rank (how many SMs the ring keeps busy)
  # and tile = FIFO slot size (whether all slots stay in L2).
  if [ "$n" -eq 8 ]; then
    for ch in 8 16 32; do
      for tile in 64K 256K; do
        run "perf-ring8-ch$ch-t$tile" --builtin ring --ranks 8 --channels $ch --tile $tile \
          --sizes 64K,16M,1G --iters 5 --warmup 2
      done
    done
  fi
  for f in $(sched_for $n); do
    # 1 GiB per rank only for the H100 systems' schedules (host-side input
    # generation of N GiB dominates the run time).
    case "$f" in
      */dgx-h100/rs.xml|*/dgx-h100x2/rs.xml) sz=64K,16M,1G ;;
      *) sz=64K,16M ;;
    esac
    run "perf-$(sched_name "$f")" "$f" --sizes $sz --iters 5 --warmup 2
    # Zero-copy sends against every send copied, side by side, where they
    # apply most (direct reduce-scatter, allgather forwards).
    case "$f" in
      */dgx-h100/rs.xml|*/dgx-h100/ag.xml|*/ring8/ag.xml)
        run "perf-$(sched_name "$f")-copied" "$f" --sizes $sz --iters 5 --warmup 2 --no-zero-copy ;;
    esac
  done
done

python3 - "$RES" <<'PY' || { echo "(python3 missing: raw JSON in $RES)"; }
import json, os, sys
res = sys.argv[1]
rows, summary = [], []
for f in sorted(os.listdir(res)):
    if not f.endswith(".json") or f == "summary.json":
        continue
    try:
        rep = json.load(open(os.path.join(res, f)))
    except Exception:
        summary.append({"run": f[:-5], "status": "FAIL"}); continue
    for r in rep["rows"]:
        e = dict(run=f[:-5], ranks=rep["ranks"], dtype=rep["dtype"], redop=rep["redop"],
                 size=r["size_bytes"], time_us=r["time_us"], busbw=r["busbw_gbps"],
                 membw=rep.get("membw_gbps"), frac=r.get("membw_frac"), wrong=r.get("wrong"))
        rows.append(e); summary.append(e)
# Correctness: one line per run (sizes checked, wrong elements).
checks = {}
for e in rows:
    if e["run"].startswith(("check-", "smoke-")):
        c = checks.setdefault(e["run"], [e["ranks"], e["dtype"], e["redop"], [], 0])
        c[3].append(e["size"]); c[4] += e["wrong"] or 0
print(f"{'correctness run':40} {'N':>3} {'type':>6} {'op':>4} {'sizes':>30} {'#wrong':>7}")
for k, (nr, dt, op, sz, w) in checks.items():
    sizes = ",".join(str(s >> 10) + "K" for s in sz)
    print(f"{k[:40]:40} {nr:>3} {dt:>6} {op:>4} {sizes[-30:]:>30} {w:>7}")
print()
print(f"{'performance run':30} {'N':>3} {'size':>11} {'time(us)':>10} {'busbw':>8} {'copyBW':>8} {'%roof':>6}")
for e in rows:
    if not e["run"].startswith("perf-"):
        continue
    print(f"{e['run'][:30]:30} {e['ranks']:>3} {e['size']:>11} {e['time_us']:>10.1f} "
          f"{e['busbw']:>8.1f} {(e['membw'] or 0):>8.0f} {('%.0f%%' % (100*e['frac'])) if e['frac'] else '-':>6}")
json.dump(summary, open(os.path.join(res, "summary.json"), "w"), indent=1)
PY
printf '%s\n' "${ROWS[@]}" >"$RES/status.txt"
grep -v " OK " "$RES/status.txt" | sed 's/^/not ok: /' >&2
echo "results in $RES (took $SECONDS s)" >&2
exit $fail
