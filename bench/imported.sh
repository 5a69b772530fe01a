#!/usr/bin/env bash
# Bound % per size band for every real topology dump: `rscc synth -o DIR/`
# on each file in ../shared/topologies-real (or DUMPS; tests/data/real
# when neither exists), the `bound%`
# column of the per-band table it prints (each size scored with the file
# that serves it). Prints a table and writes JSON.
#
#   bench/imported.sh [RSCC_BIN] [OUT.json]
#
# Run it with two binaries side by side to compare (docs/benchmarks.md
# "Imported machines"). HOSTS=H replicates each dump to H hosts first
# (`rscc topo import F --hosts H`; dumps the importer cannot replicate,
# such as one without NICs, get no row). OP=allgather|allreduce
# synthesizes that op instead of the reduce-scatter. The JSON also holds
# each size's time, for comparing binaries whose bounds differ (a route
# rule that routes more links changes the cut bound).
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/imported.json}
dumps=${DUMPS:-../shared/topologies-real}
# A clone without ../shared: the copies the tests use.
[ -d "$dumps" ] || dumps=tests/data/real
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: > "$tmp/rows"
for f in "$dumps"/{nccl-xml,nvidia-smi-topo,rccl-xml,rocm-smi-topo}/*; do
  [ -f "$f" ] || continue
  rm -rf "$tmp/dir"
  topo=$f
  if [ -n "${HOSTS:-}" ]; then
    topo=$tmp/topo.json
    "$bin" topo import "$f" --hosts "$HOSTS" -o "$topo" > /dev/null 2>&1 || continue
  fi
  row=$(timeout 300 "$bin" synth --topo "$topo" --op "${OP:-reduce-scatter}" -o "$tmp/dir/" 2>&1 |
        awk '$1 ~ /^[0-9]+$/ && NF >= 5 {printf "%s:%s:%s ", $1, $4, $2}') || true
  echo "$(basename "$f") $row" >> "$tmp/rows"
done
python3 - "$tmp/rows" "$out" <<'PY'
import json, sys
rows, times = {}, {}
for line in open(sys.argv[1]):
    name, *cells = line.split()
    cells = [c.split(":") for c in cells]
    rows[name] = {k: (None if v == "-" else float(v)) for k, v, _ in cells}
    times[name] = {k: float(t) for k, _, t in cells}
sizes = ["65536", "1048576", "16777216", "1073741824"]
print("| dump | 64 KiB | 1 MiB | 16 MiB | 1 GiB |")
print("|---|---|---|---|---|")
for name, r in rows.items():
    cell = lambda s: "-" if r.get(s) is None else f"{r[s]:.1f}"
    print(f"| {name} | " + " | ".join(cell(s) for s in sizes) + " |")
json.dump({"bound_pct": rows, "time_us": times}, open(sys.argv[2], "w"), indent=1)
PY
echo "wrote $out" >&2
