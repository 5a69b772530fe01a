#!/usr/bin/env bash
# What RCCL's reduced step set costs: on every AMD machine (the MI300X
# generator's and every RCCL XML and rocm-smi dump in
# ../shared/topologies-real, imported), each op synthesized for RCCL
# (`--runtime rccl`: s, r, re, cpy only, local passes charged against the
# GPU's memory) and for the fused executor set, side by side in one run:
# the RCCL time over the fused time and the RCCL schedule's share of the
# op's bound, at 1 MiB, 16 MiB and 1 GiB. Prints a table and writes JSON.
#
#   bench/rccl.sh [RSCC_BIN] [OUT.json]
#
# (docs/benchmarks.md "RCCL".)
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/rccl.json}
real=${RSCC_REAL:-../shared/topologies-real}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
cp topologies/mi300x.json "$tmp/mi300x.json"
for f in "$real"/rccl-xml/*.xml "$real"/rocm-smi-topo/*.txt; do
  [ -e "$f" ] || continue
  n=$(basename "$f"); n=${n%.*}
  "$bin" topo import "$f" -o "$tmp/$n.json" > /dev/null 2>&1 || echo "skipped (import failed): $f" >&2
done
for t in "$tmp"/*.json; do
  n=$(basename "$t" .json)
  for op in reduce-scatter allgather allreduce; do
    for rt in executor rccl; do
      "$bin" synth --topo "$t" --op "$op" --runtime "$rt" --sizes 1K:4G \
        -o "$tmp/out-$n-$op-$rt/" --json > "$tmp/$n.$op.$rt.json" 2> /dev/null \
        || echo "{}" > "$tmp/$n.$op.$rt.json"
    done
  done
done
python3 - "$tmp" "$out" <<'PY'
import json, sys, os, glob
tmp, out = sys.argv[1], sys.argv[2]
ops = ["reduce-scatter", "allgather", "allreduce"]
sizes = [1 << 20, 16 << 20, 1 << 30]
names = sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(tmp, "*.json"))
               if os.path.basename(p).count(".") == 1)
res = {}
print("| machine | op | RCCL / fused at 1 MiB | 16 MiB | 1 GiB | % of bound at 1 GiB: RCCL | fused |")
print("|---|---|---|---|---|---|---|")
for n in names:
    for op in ops:
        t = {}
        for rt in ["executor", "rccl"]:
            d = json.load(open(os.path.join(tmp, f"{n}.{op}.{rt}.json")))
            t[rt] = {r["size_bytes"]: r for r in d.get("table", [])}
        if not t["executor"] or not t["rccl"]:
            print(f"| {n} | {op} | no schedule | | | | |")
            continue
        ratio = [t["rccl"][s]["time_us"] / t["executor"][s]["time_us"] for s in sizes]
        bound = 100 * t["rccl"][1 << 30]["bound_ratio"]
        fused = 100 * t["executor"][1 << 30]["bound_ratio"]
        res.setdefault(n, {})[op] = {"rccl_over_fused": dict(zip(["1M", "16M", "1G"], ratio)),
                                    "rccl_bound_pct_1g": bound, "fused_bound_pct_1g": fused}
        print(f"| {n} | {op} | {ratio[0]:.3f} | {ratio[1]:.3f} | {ratio[2]:.3f} | {bound:.1f} | {fused:.1f} |")
json.dump(res, open(out, "w"), indent=1)
print(f"wrote {out}", file=sys.stderr)
PY
