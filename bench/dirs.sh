#!/usr/bin/env bash
# Directory coverage (issue: loaded means used): per shipped topology,
# `rscc synth --topo T --op OP -o DIR/` for reduce-scatter, allgather and
# allreduce into one directory, then `rscc verify DIR/ --json` (RCCL's
# selection for the AMD machine, whose files are RCCL's). Per topology and
# op: calls of the sweep served, files, and the fall-through files
# (`OP.k1-*`, `ar.k1.fused-*`) with the calls they take. Prints a table and
# writes JSON.
#
#   bench/dirs.sh [RSCC_BIN] [OUT.json]
#
# (docs/benchmarks.md "Directory coverage".)
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/dirs.json}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
for t in topologies/*.json; do
  name=$(basename "$t" .json)
  for op in reduce-scatter allgather allreduce; do
    "$bin" synth --topo "$t" --op "$op" -o "$tmp/$name/" > /dev/null 2>&1
  done
  rt=executor
  if ls "$tmp/$name/" | grep -q -- '-rccl-'; then rt=rccl; fi
  "$bin" verify "$tmp/$name/" --runtime "$rt" --json > "$tmp/$name.json"
done
python3 - "$tmp" "$out" <<'PY'
import json, sys, os, glob
tmp, out = sys.argv[1], sys.argv[2]
rows = []
print("| topology | runtime | op | calls served | files | fall-through files | calls they take |")
print("|---|---|---|---|---|---|---|")
for path in sorted(glob.glob(os.path.join(tmp, "*.json"))):
    name = os.path.basename(path)[:-5]
    v = json.load(open(path))
    for g in v["groups"]:
        short = {"reduce-scatter": "rs", "allgather": "ag", "allreduce": "ar"}[g["op"]]
        per = g["per_file"]
        k1 = [f for f in per if f[0].startswith(short + ".k1")]
        taken = sum(f[1] for f in k1)
        row = {
            "topology": name, "runtime": v["runtime"], "op": g["op"], "ranks": g["ranks"],
            "calls": g["calls"], "served": g["served"], "files": len(per),
            "fall_through_files": [f[0] for f in k1], "fall_through_calls": taken,
            "ambiguous": len(g["ambiguous"]),
        }
        rows.append(row)
        print(f"| {name} | {v['runtime']} | {g['op']} | {g['served']} / {g['calls']} | {len(per)} | {len(k1)} | {taken} |")
json.dump(rows, open(out, "w"), indent=1)
print(f"\nwrote {out}")
PY
