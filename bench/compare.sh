#!/usr/bin/env bash
# Two rscc binaries side by side: for every shipped topology and every
# real dump, `rscc synth -o DIR/` (auto, one file per size band) with each
# binary, interleaved, RUNS times; prints the median wall time of each and
# their ratio, and whether the two wrote byte-identical band directories.
# Writes JSON. A refactor that must not change behaviour shows "same" in
# every row and ratios within noise.
#
#   bench/compare.sh OLD_BIN NEW_BIN [OUT.json]     (RUNS=3 by default)
#
# HOSTS=H: the real dumps only, each replicated to H hosts first
# (`rscc topo import F --hosts H`, NICs joined rail-optimised, with
# NEW_BIN), as bench/imported.sh does; dumps that import refuses are left
# out.
set -euo pipefail
old=${1:?old binary}
new=${2:?new binary}
out=${3:-bench/results/compare.json}
runs=${RUNS:-3}
dumps=${DUMPS:-../shared/topologies-real}
[ -d "$dumps" ] || dumps=tests/data/real
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: > "$tmp/rows"
inputs=()
[ -n "${HOSTS:-}" ] || inputs=(topologies/*.json)
for f in "$dumps"/{nccl-xml,nvidia-smi-topo,rccl-xml,rocm-smi-topo}/*; do
  [ -f "$f" ] || continue
  if [ -n "${HOSTS:-}" ]; then
    r="$tmp/$(basename "$f")-x$HOSTS.json"
    "$new" topo import "$f" --hosts "$HOSTS" -o "$r" >/dev/null 2>&1 && inputs+=("$r")
  else
    inputs+=("$f")
  fi
done
# Wall seconds of one synth run into directory $3 (or "fail").
one() {
  local bin=$1 f=$2 dir=$3 t0 t1
  rm -rf "$dir"
  t0=$(date +%s.%N)
  if ! timeout 300 "$bin" synth --topo "$f" -o "$dir/" >/dev/null 2>&1; then
    echo fail
    return
  fi
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc
}
for f in "${inputs[@]}"; do
  to=() tn=()
  for _ in $(seq "$runs"); do
    to+=("$(one "$old" "$f" "$tmp/old")")
    tn+=("$(one "$new" "$f" "$tmp/new")")
  done
  if [ "${to[0]}" = fail ] || [ "${tn[0]}" = fail ]; then
    same=$([ "${to[0]}" = "${tn[0]}" ] && echo both-refuse || echo DIFFERENT)
  elif diff -r "$tmp/old" "$tmp/new" >/dev/null; then
    same=same
  else
    same=DIFFERENT
  fi
  echo "$(basename "$f") $same ${to[*]} / ${tn[*]}" >> "$tmp/rows"
done
python3 - "$tmp/rows" "$out" <<'PY'
import json, statistics, sys
rows = []
for line in open(sys.argv[1]):
    name, same, rest = line.split(" ", 2)
    a, b = rest.split(" / ")
    med = lambda xs: None if "fail" in xs else statistics.median(float(x) for x in xs.split())
    rows.append({"input": name, "output": same, "old_s": med(a), "new_s": med(b)})
print("| input | output | old (s) | new (s) | new/old |")
print("|---|---|---|---|---|")
for r in rows:
    o, n = r["old_s"], r["new_s"]
    ratio = "-" if o is None or n is None or o == 0 else f"{n / o:.2f}"
    fmt = lambda x: "-" if x is None else f"{x:.3f}"
    print(f"| {r['input']} | {r['output']} | {fmt(o)} | {fmt(n)} | {ratio} |")
ok = [r for r in rows if r["old_s"] and r["new_s"]]
if ok:
    tot_o = sum(r["old_s"] for r in ok)
    tot_n = sum(r["new_s"] for r in ok)
    print(f"\ntotal over {len(ok)} inputs: old {tot_o:.2f} s, new {tot_n:.2f} s, new/old {tot_n / tot_o:.3f}; "
          f"{sum(r['output'] == 'same' for r in rows)} same, {sum(r['output'] == 'DIFFERENT' for r in rows)} different, "
          f"{sum(r['output'] == 'both-refuse' for r in rows)} refused by both")
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
