#!/usr/bin/env bash
# Allgather and allreduce on machines nobody fitted rscc to: COUNT
# generated fabrics (`rscc topo generate random --seed 1..COUNT`) and the
# nccl-xml and rccl-xml dumps of ../shared/topologies-real (DUMPS), each
# op synthesized with `auto` at 1 GiB (`rscc synth --op OP --sizes 1G`),
# its file run with `rscc run --check` at 4 KiB. Prints the summary and
# writes JSON (per machine and op: % of the op's bound, time, correct).
#
#   bench/ops-fabrics.sh [RSCC_BIN] [OUT.json]
#
# (docs/benchmarks.md "Allgather and allreduce".)
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/ops-fabrics.json}
count=${COUNT:-12}
dumps=${DUMPS:-../shared/topologies-real}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")" "$tmp/fab"
for s in $(seq 1 "$count"); do
  "$bin" topo generate random --seed "$s" -o "$tmp/fab/random$s.json"
done
: > "$tmp/rows"
for f in "$tmp"/fab/*.json "$dumps"/{nccl-xml,rccl-xml}/*; do
  [ -f "$f" ] || continue
  for op in reduce-scatter allgather allreduce; do
    row=$(timeout 300 "$bin" synth --topo "$f" --op "$op" --sizes 1G -o "$tmp/s.xml" 2>&1 |
          awk '$1 == "1073741824" {print $4, $2}') || continue
    [ -n "$row" ] || continue
    ok=1
    if [ "$op" != reduce-scatter ]; then
      timeout 120 "$bin" run "$tmp/s.xml" --sizes 4K --iters 1 --warmup 0 --check --no-membw \
        > /dev/null 2>&1 || ok=0
    fi
    echo "$(basename "$f") $op $row $ok" >> "$tmp/rows"
  done
done
python3 - "$tmp/rows" "$out" <<'PY'
import json, sys, statistics
rows = {}
for line in open(sys.argv[1]):
    name, op, pct, t, ok = line.split()
    if pct == "-":  # no bound (a single GPU)
        continue
    rows.setdefault(name, {})[op] = {"bound_pct": float(pct), "time_us": float(t), "correct": ok == "1"}
full = {n: r for n, r in rows.items() if len(r) == 3}
print("| op | machines | median % | worst % | ≥ 97 % | ≥ 90 % | correct |")
print("|---|---|---|---|---|---|---|")
for op in ["reduce-scatter", "allgather", "allreduce"]:
    v = [r[op]["bound_pct"] for r in full.values()]
    c = sum(r[op]["correct"] for r in full.values())
    print(f"| {op} | {len(v)} | {statistics.median(v):.1f} | {min(v):.1f} | {sum(x >= 97 for x in v)} | {sum(x >= 90 for x in v)} | {c} |")
ratio = [r["allreduce"]["time_us"] / (r["reduce-scatter"]["time_us"] + r["allgather"]["time_us"]) for r in full.values()]
print(f"allreduce / (reduce-scatter + allgather) at 1 GiB: median {statistics.median(ratio):.3f}, worst {max(ratio):.3f}")
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
echo "wrote $out" >&2
