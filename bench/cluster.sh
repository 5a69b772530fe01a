#!/usr/bin/env bash
# Cluster scale: `rscc synth -o DIR/` (auto) on rail-optimised DGX-H100 and
# DGX-A100 fabrics of H hosts, and beside it the reference algorithms
# (ALGOS, default: `ring`, the flat ring; `hier-ring`, a ring inside each
# host then a ring of hosts per rail; `hier-halving`, recursive halving on
# each rail). Prints bound % per size (each size scored with the file that
# serves it), the simulated time at 1 KiB, synthesis time, peak RSS and the
# size of the files written, and per fabric the sizes (synth's report, 1 KiB
# – 1 GiB, and 4 GiB simulated from the file that serves it) where a
# reference is faster than auto; writes JSON.
#
#   bench/cluster.sh [RSCC_BIN] [OUT.json]     # HOSTS="4 32 64" KINDS=dgx-h100
#
# MAX_TBS=N passes `--max-tbs N` to auto (default: synth's budget, half
# the SMs; 132 gives an H100's whole GPU). NCCL_NODES="4 8 16 32 64 128"
# (the default; empty skips it) also prints hier-ring's predicted busbw at
# 4 GiB per rank on that many DGX-H100 nodes beside the reduce-scatter busbw
# NCCL's ring reached on H100 clusters of those sizes (NVIDIA/nccl#1229).
#
# docs/benchmarks.md "Cluster scale" has the figures.
set -euo pipefail
bin=${1:-target/release/rscc}
out=${2:-bench/results/cluster.json}
hosts=${HOSTS:-4 32 64 128}
kinds=${KINDS:-dgx-h100 dgx-a100}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$(dirname "$out")"
: > "$tmp/rows"
for kind in $kinds; do
  for h in $hosts; do
    topo="$tmp/$kind-$h.json"
    "$bin" topo generate "$kind" --hosts "$h" -o "$topo" 2> /dev/null
    for algo in ${ALGOS:-auto ring hier-ring hier-halving}; do
      rm -rf "$tmp/dir" "$tmp/one.xml"
      # auto writes a file per size band; a single algorithm one file.
      if [ "$algo" = auto ]; then
        dest="$tmp/dir"; args=(synth --topo "$topo" -o "$tmp/dir/" ${MAX_TBS:+--max-tbs "$MAX_TBS"})
      else
        dest="$tmp/one.xml"; args=(synth --topo "$topo" --algo "$algo" -o "$dest")
      fi
      /usr/bin/time -f "%e %M" -o "$tmp/time" timeout 1800 "$bin" "${args[@]}" > "$tmp/log" 2>&1 || true
      # time(1) writes "Command exited with non-zero status N" first when
      # the run fails (a reference that does not fit the budget): its
      # figures are on the last line.
      read -r secs rss < <(tail -n 1 "$tmp/time") || { secs=-1; rss=0; }
      cells=$(awk '$1 ~ /^[0-9]+$/ && NF >= 5 {printf "%s:%s:%s ", $1, $4, $2}' "$tmp/log")
      # synth's report stops at 1 GiB: 4 GiB simulated from the file that
      # serves it (auto: the band whose range holds it).
      big=4294967296
      file=$dest
      if [ "$algo" = auto ]; then
        file=$(ls "$dest"/rs-*.xml 2> /dev/null | awk -F- -v s=$big '{max=$NF; sub(/\.xml$/, "", max); min=$(NF-1); if (min + 0 <= s + 0 && (max == "inf" || max + 0 >= s + 0)) print}' | head -n 1)
      fi
      if [ -n "$file" ] && [ -f "$file" ]; then
        cells+=$("$bin" simulate "$file" --topo "$topo" --sizes "$big" 2>/dev/null | awk -v s=$big '$1 == s {printf "%s:%.1f:%s ", s, 100 * $8, $4}')
      fi
      bytes=$(du -sb "$dest" 2> /dev/null | cut -f1) || bytes=0
      algos=$({ grep -o '^[^ ]*\.xml: [a-z0-9-]*' "$tmp/log" || true; } | awk '{print $2}' | sort -u | paste -sd, -)
      grep -q '^error: ' "$tmp/log" && algos="does-not-fit"
      echo "$kind $h $algo $secs $rss ${bytes:-0} ${algos:--} $cells" >> "$tmp/rows"
    done
  done
done
python3 - "$tmp/rows" "$out" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    kind, h, algo, secs, rss, nbytes, algos, *cells = line.split()
    sizes = {}
    for c in cells:
        s, pct, t = c.split(":")
        sizes[s] = {"bound_pct": None if pct == "-" else float(pct), "time_us": float(t)}
    rows.append({"kind": kind, "hosts": int(h), "gpus": None, "algo": algo, "synth_s": float(secs),
                 "peak_rss_mb": int(rss) // 1024, "bytes_written": int(nbytes), "algorithms": algos,
                 "sizes": sizes})
cols = [("1024", "1 KiB"), ("1048576", "1 MiB"), ("16777216", "16 MiB"), ("1073741824", "1 GiB")]
print("| fabric | hosts | algo | 1 KiB µs | " + " | ".join(n + " %" for _, n in cols[1:]) + " | synth s | RSS MB | MB written | picked |")
print("|---|---|---|---|" + "---|" * (len(cols) - 1) + "---|---|---|---|")
for r in rows:
    sz = r["sizes"]
    t1k = sz.get("1024", {}).get("time_us")
    cell = lambda s: "-" if sz.get(s, {}).get("bound_pct") is None else f"{sz[s]['bound_pct']:.1f}"
    print(f"| {r['kind']} | {r['hosts']} | {r['algo']} | {'-' if t1k is None else f'{t1k:.1f}'} | "
          + " | ".join(cell(s) for s, _ in cols[1:])
          + f" | {r['synth_s']:.1f} | {r['peak_rss_mb']} | {r['bytes_written'] / 1e6:.1f} | {r['algorithms']} |")
# Sizes where a reference algorithm that fits is faster than auto.
for r in rows:
    if r["algo"] != "auto":
        continue
    for x in rows:
        if x["kind"] != r["kind"] or x["hosts"] != r["hosts"] or x["algo"] == "auto":
            continue
        slower = [s for s, c in x["sizes"].items()
                  if s in r["sizes"] and c["time_us"] < r["sizes"][s]["time_us"] * (1 - 1e-9)]
        if slower:
            print(f"{r['kind']} x{r['hosts']}: {x['algo']} is faster than auto at {', '.join(slower)} B")
json.dump(rows, open(sys.argv[2], "w"), indent=1)
PY
nodes=${NCCL_NODES-4 8 16 32 64 128}
if [ -n "$nodes" ]; then
  echo
  echo "| nodes × 8 H100 | hier-ring predicted busbw at 4 GiB (GB/s) | NCCL ring, measured (nccl#1229) | prediction / measured |"
  echo "|---|---|---|---|"
  for h in $nodes; do
    case $h in 4) nccl=360;; 8) nccl=345;; 16) nccl=320;; 32) nccl=300;; 64) nccl=280;; 128) nccl=260;; *) nccl=;; esac
    topo="$tmp/nccl-$h.json"
    "$bin" topo generate dgx-h100 --hosts "$h" -o "$topo" 2> /dev/null
    if "$bin" synth --topo "$topo" --algo hier-ring -o "$tmp/hr.xml" > /dev/null 2>&1; then
      bus=$("$bin" simulate "$tmp/hr.xml" --topo "$topo" --sizes 4G 2>&1 | awk '$1 == 4294967296 {print $6}')
    else
      bus=-
    fi
    ratio=$(awk -v b="$bus" -v m="$nccl" 'BEGIN { if (b == "-" || m == "") print "-"; else printf "%.2f", b / m }')
    echo "| $h | $bus | ${nccl:--} | $ratio |"
  done
fi
