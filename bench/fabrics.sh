#!/usr/bin/env bash
# Bound % on generated fabrics: `rscc topo generate random --seed K` for
# K in FIRST .. FIRST+COUNT-1 (default 0 .. 199; another FIRST draws
# fabrics no choice in rscc was measured on), then `rscc synth -o DIR/` with each
# binary given (default target/release/rscc), side by side. Prints the
# distribution of the `bound%` column at 1 MiB, 16 MiB and 1 GiB per
# binary, the worst fabrics, and writes JSON. The last binary generates
# the fabrics (older ones may not have `random`). OP=allgather|allreduce
# synthesizes that op instead of the reduce-scatter.
#
#   [FIRST=0] COUNT=200 bench/fabrics.sh [OUT.json] [RSCC_BIN ...]
#
# docs/benchmarks.md "Generated fabrics".
set -euo pipefail
out=${1:-bench/results/fabrics.json}
shift || true
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/rscc)
count=${COUNT:-200}
first=${FIRST:-0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: > "$tmp/rows"
for ((k = first; k < first + count; k++)); do
  "${bins[-1]}" topo generate random --seed "$k" -o "$tmp/t.json" 2> /dev/null
  shape=$(grep -o 'shape [a-z]*' "$tmp/t.json" | head -1 | cut -d' ' -f2)
  ranks=$(grep -c '"kind": "gpu"' "$tmp/t.json" || true)
  for b in "${bins[@]}"; do
    rm -rf "$tmp/dir"
    start=$(date +%s.%N)
    row=$(timeout 300 "$b" synth --topo "$tmp/t.json" --op "${OP:-reduce-scatter}" -o "$tmp/dir/" 2>&1 |
          awk '$1 ~ /^[0-9]+$/ && NF >= 5 {printf "%s:%s ", $1, $4}') || true
    secs=$(echo "$(date +%s.%N) - $start" | bc)
    echo "$k $shape $ranks $b $secs $row" >> "$tmp/rows"
  done
done
python3 - "$tmp/rows" "$out" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    k, shape, ranks, b, secs, *cells = line.split()
    pct = {s: (None if v == "-" else float(v)) for s, v in (c.split(":") for c in cells)}
    rows.append(dict(seed=int(k), shape=shape, ranks=int(ranks), bin=b, seconds=float(secs), bound_pct=pct))
bins = list(dict.fromkeys(r["bin"] for r in rows))
sizes = [("1048576", "1 MiB"), ("16777216", "16 MiB"), ("1073741824", "1 GiB")]
print(f"{len(rows) // len(bins)} fabrics\n")
print("| binary | size | median | p10 | worst | ≥ 97 % | ≥ 90 % | ≥ 80 % | total s |")
print("|---|---|---|---|---|---|---|---|---|")
for b in bins:
    rs = [r for r in rows if r["bin"] == b]
    secs = sum(r["seconds"] for r in rs)
    for s, name in sizes:
        v = sorted(r["bound_pct"].get(s) or 0.0 for r in rs)
        n = len(v)
        q = lambda f: v[min(n - 1, int(f * n))]
        ge = lambda x: sum(1 for y in v if y >= x)
        print(f"| {b} | {name} | {q(0.5):.1f} | {q(0.1):.1f} | {v[0]:.1f} | {ge(97)} | {ge(90)} | {ge(80)} | {secs:.1f} |")
if len(bins) > 1:
    worse = [(r1, r2) for r1 in rows if r1["bin"] == bins[0] for r2 in rows
             if r2["bin"] == bins[-1] and r2["seed"] == r1["seed"]
             and any((r2["bound_pct"].get(s) or 0) < (r1["bound_pct"].get(s) or 0) - 0.5 for s, _ in sizes)]
    print(f"\nfabrics where {bins[-1]} is more than 0.5 points below {bins[0]} at some size: {len(worse)}")
    for r1, r2 in worse[:10]:
        print(f"  seed {r1['seed']} {r1['shape']}: " + ", ".join(f"{n} {r1['bound_pct'].get(s)} -> {r2['bound_pct'].get(s)}" for s, n in sizes))
last = [r for r in rows if r["bin"] == bins[-1]]
last.sort(key=lambda r: r["bound_pct"].get("1073741824") or 0)
print(f"\nworst at 1 GiB ({bins[-1]}):")
for r in last[:8]:
    print(f"  seed {r['seed']} {r['shape']} {r['ranks']} GPUs: {r['bound_pct'].get('1073741824')} %")
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
echo "wrote $out" >&2
