#!/usr/bin/env bash
# Two rscc binaries side by side on one op: for every shipped topology,
# every real dump, generated fabrics (`rscc topo generate random --seed
# 1..SEEDS`) and rail-optimised clusters (HOSTS_A100 × DGX-A100,
# HOSTS_H100 × DGX-H100), `rscc synth --op OP --sizes 1K:4G -o DIR/ --json`
# with each binary, one after the other. Prints, per input, the bound % of
# each size band's file at 1 KiB, 64 KiB, 1 MiB, 16 MiB, 256 MiB and 1 GiB
# and the synthesis wall time of each binary, marks the rows where a cell
# moved by more than 0.5 %, then counts cells better / worse. Writes JSON.
#
#   bench/ops-compare.sh OLD_BIN NEW_BIN [OUT.json]
#   OP=allgather SEEDS=12 HOSTS_A100="4 16" HOSTS_H100="8 32" (defaults)
set -euo pipefail
old=${1:?old binary}
new=${2:?new binary}
out=${3:-bench/results/ops-compare.json}
op=${OP:-allgather}
dumps=${DUMPS:-../shared/topologies-real}
[ -d "$dumps" ] || dumps=tests/data/real
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
inputs=(topologies/*.json)
for f in "$dumps"/{nccl-xml,nvidia-smi-topo,rccl-xml,rocm-smi-topo}/*; do
  [ -f "$f" ] && inputs+=("$f")
done
for s in $(seq 1 "${SEEDS:-12}"); do
  "$new" topo generate random --seed "$s" -o "$tmp/random-$s.json" 2> /dev/null
  inputs+=("$tmp/random-$s.json")
done
for h in ${HOSTS_A100-4 16}; do
  "$new" topo generate dgx-a100 --hosts "$h" -o "$tmp/dgx-a100x$h.json" 2> /dev/null
  inputs+=("$tmp/dgx-a100x$h.json")
done
for h in ${HOSTS_H100-8 32}; do
  "$new" topo generate dgx-h100 --hosts "$h" -o "$tmp/dgx-h100x$h.json" 2> /dev/null
  inputs+=("$tmp/dgx-h100x$h.json")
done
: > "$tmp/rows"
k=0
for f in "${inputs[@]}"; do
  k=$((k + 1))
  for which in old new; do
    bin=$old
    [ "$which" = new ] && bin=$new
    rm -rf "$tmp/dir"
    t0=$(date +%s.%N)
    if "$bin" synth --topo "$f" --op "$op" --sizes 1K:4G -o "$tmp/dir/" --json \
      > "$tmp/$k-$which.json" 2> /dev/null; then
      t1=$(date +%s.%N)
      echo "$k $which $(echo "$t1 - $t0" | bc) $f" >> "$tmp/rows"
    else
      echo "$k $which fail $f" >> "$tmp/rows"
    fi
  done
done
python3 - "$tmp" "$out" "$op" <<'PY'
import json, os, sys
tmp, out, op = sys.argv[1], sys.argv[2], sys.argv[3]
sizes = [1 << 10, 64 << 10, 1 << 20, 16 << 20, 256 << 20, 1 << 30]
runs = {}
for line in open(os.path.join(tmp, "rows")):
    k, which, t, f = line.split(maxsplit=3)
    runs.setdefault(k, {"input": f.strip()})[which] = t
res, better, worse, cells = [], 0, 0, 0
print(f"op {op}: bound % at 1K 64K 1M 16M 256M 1G (old / new), synthesis s (old / new)")
print("| input | old | new | synth s old / new | moved |")
print("|---|---|---|---|---|")
for k in sorted(runs, key=int):
    r = runs[k]
    name = os.path.basename(r["input"])
    if name.startswith("random-") or name.startswith("dgx-a100x") or name.startswith("dgx-h100x"):
        name = name.removesuffix(".json")
    if r.get("old") == "fail" or r.get("new") == "fail":
        print(f"| {name} | fail: old {r.get('old')} new {r.get('new')} | | | |")
        res.append({"input": name, "failed": True})
        continue
    pct = {}
    for which in ("old", "new"):
        t = {x["size_bytes"]: x for x in json.load(open(os.path.join(tmp, f"{k}-{which}.json")))["table"]}
        # No bound (a machine the bound does not cover): nan.
        pct[which] = [100 * (t[s]["bound_ratio"] or float("nan")) for s in sizes]
    moved = []
    for s, a, b in zip(sizes, pct["old"], pct["new"]):
        cells += 1
        if b > a * 1.005:
            better += 1
            moved.append(f"+{s}")
        elif b < a / 1.005:
            worse += 1
            moved.append(f"-{s}")
    fmt = lambda v: " ".join(f"{x:.1f}" for x in v)
    print(f"| {name} | {fmt(pct['old'])} | {fmt(pct['new'])} | {float(r['old']):.2f} / {float(r['new']):.2f} | {' '.join(moved)} |")
    res.append({"input": name, "sizes": sizes, "old_pct": pct["old"], "new_pct": pct["new"],
                "old_s": float(r["old"]), "new_s": float(r["new"])})
t_old = sum(x["old_s"] for x in res if "old_s" in x)
t_new = sum(x["new_s"] for x in res if "new_s" in x)
print(f"\n{cells} cells: {better} better, {worse} worse by more than 0.5 %; synthesis {t_old:.1f} s old, {t_new:.1f} s new ({t_new / t_old:.2f}x)")
json.dump({"op": op, "rows": res, "better": better, "worse": worse, "cells": cells,
           "synth_s_old": t_old, "synth_s_new": t_new}, open(out, "w"), indent=1)
PY
