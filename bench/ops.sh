#!/usr/bin/env bash
# Allgather and allreduce against their goals (issue: every op end to end),
# on every shipped topology: `rscc synth --op OP --sizes 1K:4G -o DIR/`
# for reduce-scatter, allgather and allreduce, each size scored with the
# band file that serves it. Per topology and op: % of the op's bound at
# 1 GiB, the least speed-up over the op's ring from 1 KiB to 4 GiB, the
# synthesis wall time and its ratio to reduce-scatter's; for allreduce
# also the largest ratio of its time to reduce-scatter's plus
# allgather's at one size. Prints a table and writes JSON.
#
#   bench/ops.sh [RSCC_BIN] [OUT.json]
#
# (docs/benchmarks.md "Allgather and allreduce".)
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/ops.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
for t in topologies/*.json; do
  name=$(basename "$t" .json)
  for op in reduce-scatter allgather allreduce; do
    s=$(date +%s.%N)
    "$bin" synth --topo "$t" --op "$op" --sizes 1K:4G -o "$tmp/$name-$op/" --json \
      > "$tmp/$name-$op.json"
    e=$(date +%s.%N)
    echo "$name $op $(echo "$e - $s" | bc)" >> "$tmp/times"
  done
done
python3 - "$tmp" "$out" <<'PY'
import json, sys, os
tmp, out = sys.argv[1], sys.argv[2]
times = {}
for line in open(os.path.join(tmp, "times")):
    name, op, t = line.split()
    times[(name, op)] = float(t)
names = sorted({n for n, _ in times})
ops = ["reduce-scatter", "allgather", "allreduce"]
res = {}
print("| topology | op | 1 GiB % of bound | least × ring (1 KiB–4 GiB) | worst AR / (RS + AG) | synth s | × RS's |")
print("|---|---|---|---|---|---|---|")
for n in names:
    tab = {op: {r["size_bytes"]: r for r in json.load(open(os.path.join(tmp, f"{n}-{op}.json")))["table"]}
           for op in ops}
    for op in ops:
        t = tab[op]
        gib = t[1 << 30]["bound_ratio"]
        least = min(r["vs_ring"] for r in t.values())
        worst = None
        if op == "allreduce":
            worst = max(t[s]["time_us"] / (tab["reduce-scatter"][s]["time_us"] + tab["allgather"][s]["time_us"])
                        for s in t)
        st = times[(n, op)]
        x = st / times[(n, "reduce-scatter")]
        res.setdefault(n, {})[op] = {"bound_pct_1g": 100 * gib, "least_vs_ring": least,
                                    "worst_ar_over_rs_plus_ag": worst, "synth_s": st, "synth_vs_rs": x}
        w = "-" if worst is None else f"{worst:.3f}"
        print(f"| {n} | {op} | {100 * gib:.1f} | {least:.3f} | {w} | {st:.2f} | {x:.2f} |")
json.dump(res, open(out, "w"), indent=1)
PY
echo "wrote $out" >&2
