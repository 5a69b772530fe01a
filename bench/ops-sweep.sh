#!/usr/bin/env bash
# The three ops at every size on fabrics nobody fitted rscc to:
# `rscc topo generate random --seed K` for K in FIRST .. FIRST+COUNT-1
# (defaults 1000 and 60: seeds no test or other bench draws), each op
# synthesized with `auto` over the default sizes (`rscc synth --op OP -o
# DIR/ --json`, 1 KiB … 4 GiB) and timed. Prints, per op, the 1 GiB
# distribution of the op's bound %, the least × ring over every size,
# and the synthesis time against the reduce-scatter's; per size, how
# often the allreduce is slower than the reduce-scatter followed by the
# allgather and the worst ratio. With ORACLE (the executor's checker of
# ../shared/tools/msccl-oracle) and ORACLE_RCCL (RCCL's), every file
# written is run through the one for its runtime (`--xcheck --strict`,
# RCCL's `--xcheck`) and the failures counted. Writes JSON.
#
#   [FIRST=1000] [COUNT=60] [ORACLE=… ORACLE_RCCL=…] bench/ops-sweep.sh [RSCC_BIN] [OUT.json]
#
# docs/benchmarks.md "Every size on fabrics nobody fitted".
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/ops-sweep.json}
first=${FIRST:-1000}
count=${COUNT:-60}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: > "$tmp/rows"
: > "$tmp/oracle"
for ((k = first; k < first + count; k++)); do
  "$bin" topo generate random --seed "$k" -o "$tmp/t.json" 2> /dev/null
  for op in reduce-scatter allgather allreduce; do
    rm -rf "$tmp/dir"
    start=$(date +%s.%N)
    if ! timeout 600 "$bin" synth --topo "$tmp/t.json" --op "$op" -o "$tmp/dir/" --json \
      > "$tmp/s.json" 2> /dev/null; then
      echo "$k $op FAIL" >> "$tmp/rows"
      continue
    fi
    end=$(date +%s.%N)
    echo "$k $op $(echo "$end - $start" | bc) $tmp/s-$k-$op.json" >> "$tmp/rows"
    cp "$tmp/s.json" "$tmp/s-$k-$op.json"
    if [ -n "${ORACLE:-}" ] && [ -n "${ORACLE_RCCL:-}" ]; then
      for f in "$tmp"/dir/*.xml; do
        if grep -q 'name="rscc_rccl' "$f"; then
          r=$("$ORACLE_RCCL" --xcheck "$f" 2>&1 | grep -c '^RESULT.*PASS' || true)
        else
          r=$("$ORACLE" --xcheck --strict "$f" 2>&1 | grep -c '^RESULT.*PASS' || true)
        fi
        echo "$k $op $(basename "$f") $r" >> "$tmp/oracle"
      done
    fi
  done
done
python3 - "$tmp/rows" "$tmp/oracle" "$out" <<'PY'
import json, sys, statistics
rows, oracle_file, out = sys.argv[1:]
ops = ["reduce-scatter", "allgather", "allreduce"]
fab, failed = {}, []
for line in open(rows):
    p = line.split()
    if p[2] == "FAIL":
        failed.append((int(p[0]), p[1]))
        continue
    table = json.load(open(p[3]))["table"]
    fab.setdefault(int(p[0]), {})[p[1]] = {
        "synth_s": float(p[2]),
        "cells": {str(c["size_bytes"]): {k: c[k] for k in ("schedule", "time_us", "bound_ratio", "vs_ring")}
                  for c in table},
    }
full = {k: v for k, v in fab.items() if len(v) == 3}
GIB = str(1 << 30)
print(f"{len(full)} fabrics (seeds {min(fab)}..{max(fab)}), {len(failed)} failed: {failed}")
print("| op | 1 GiB median % | p10 % | worst % | ≥ 97 % | least × ring | synth s (sum) | × RS's (median, worst) |")
print("|---|---|---|---|---|---|---|---|")
for op in ops:
    g = sorted(100 * v[op]["cells"][GIB]["bound_ratio"] for v in full.values())
    ring = min(c["vs_ring"] for v in full.values() for c in v[op]["cells"].values())
    t = sum(v[op]["synth_s"] for v in full.values())
    x = sorted(v[op]["synth_s"] / v["reduce-scatter"]["synth_s"] for v in full.values())
    print(f"| {op} | {statistics.median(g):.1f} | {g[len(g) // 10]:.1f} | {g[0]:.1f} | "
          f"{sum(y >= 97 for y in g)} | {ring:.3f} | {t:.1f} | {statistics.median(x):.2f}, {x[-1]:.2f} |")
print("| size | allreduce / (reduce-scatter + allgather) > 1 | worst | where |")
print("|---|---|---|---|")
sizes = sorted({int(s) for v in full.values() for s in v["allreduce"]["cells"]})
summary = {}
for s in sizes:
    r = []
    for k, v in full.items():
        c = {op: v[op]["cells"].get(str(s)) for op in ops}
        if all(c.values()):
            r.append((c["allreduce"]["time_us"] / (c["reduce-scatter"]["time_us"] + c["allgather"]["time_us"]), k))
    over = [x for x in r if x[0] > 1 + 1e-9]
    worst = max(r)
    summary[s] = {"fabrics": len(r), "slower": len(over), "worst": worst[0], "worst_seed": worst[1]}
    print(f"| {s} | {len(over)} of {len(r)} | {worst[0]:.3f} | seed {worst[1]} |")
checked = [l.split() for l in open(oracle_file)]
if checked:
    bad = [c[:3] for c in checked if c[3] != "1"]
    print(f"oracle: {len(checked) - len(bad)} of {len(checked)} files pass; failing: {bad}")
json.dump({"fabrics": full, "failed": failed, "allreduce_vs_halves": summary,
           "oracle": {"files": len(checked), "failing": [c[:3] for c in checked if c[3] != "1"]}},
          open(out, "w"), indent=1)
PY
echo "wrote $out" >&2
