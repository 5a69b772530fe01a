#!/usr/bin/env bash
# Where the cuda backend's large-message time goes (issue 7's roofline goal):
# the built-in ring on N virtual ranks of one GPU at 1 GiB per rank, swept
# over channels (threadblocks per rank), tile (FIFO slot size) and slots
# (FIFO depth); each row's %roof is (N+1)*S / t over the device copy
# bandwidth measured in the same run. With RSCC_NCU=1 and ncu on the PATH,
# one configuration is also profiled for DRAM bytes and L2 hit rate (does
# FIFO traffic stay in L2?).
#   bench/gpu-roofline.sh [N]      (RSCC_BIN: prebuilt binary; OUT: where
#                                   the JSON goes)
set -uo pipefail
cd "$(dirname "$0")/.."
N=${1:-8}
# NVRTC on LD_LIBRARY_PATH (exit 2 when it cannot be found).
. bench/nvrtc.sh
BIN=${RSCC_BIN:-target/release/rscc}
[ -x "$BIN" ] || cargo build --release --quiet --bin rscc || exit 2
RES=${OUT:-$(mktemp -d)}/gpu-roofline
mkdir -p "$RES"
# channels:tile:slots
CONFIGS=${RSCC_CONFIGS:-"16:256K:2 16:64K:4 16:128K:4 16:256K:4 32:64K:2 32:64K:4 32:32K:4 32:16K:8 32:128K:2"}
membw=""
printf '%-16s %4s %8s %6s %8s %10s %9s %7s\n' config N tile slots threads "time(us)" "busbw" "%roof"
for c in $CONFIGS; do
  IFS=: read -r ch tile slots <<<"$c"
  tag="ring$N-ch$ch-t$tile-s$slots"
  mb=(--no-membw)
  [ -z "$membw" ] && mb=()
  if ! timeout 120 "$BIN" run --builtin ring --ranks "$N" --channels "$ch" --tile "$tile" \
      --slots "$slots" --sizes 1G --iters 5 --warmup 2 --backend cuda --json "${mb[@]}" \
      >"$RES/$tag.json" 2>"$RES/$tag.err"; then
    printf '%-16s FAILED: %s\n' "$tag" "$(head -c 300 "$RES/$tag.err")"
    continue
  fi
  read -r thr t bw bwm <<<"$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1])); row = r["rows"][-1]
print(r["threads"], row["time_us"], row["busbw_gbps"], r.get("membw_gbps") or 0)' "$RES/$tag.json")"
  [ -z "$membw" ] && membw=$bwm
  python3 -c '
import sys
tag, n, tile, slots, thr, t, bw, membw = sys.argv[1:]
n = int(n); t = float(t); membw = float(membw)
roof = (n + 1) * (1 << 30) / (t * 1e-6) / 1e9 / membw
print(f"{tag:16} {n:>4} {tile:>8} {slots:>6} {thr:>8} {t:>10.1f} {float(bw):>9.1f} {100*roof:>6.0f}%")' \
    "ch$ch" "$N" "$tile" "$slots" "$thr" "$t" "$bw" "$membw"
done
echo "device copy bandwidth: $membw GB/s (read + write)"
if [ "${RSCC_NCU:-0}" = 1 ] && command -v ncu >/dev/null; then
  echo "== ncu: ring$N, 32 channels, tile 64K, 2 slots, 256 MiB per rank, one launch"
  timeout 150 ncu --clock-control none -k rscc_run -c 1 \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,sm__throughput.avg.pct_of_peak_sustained_elapsed \
    "$BIN" run --builtin ring --ranks "$N" --channels 32 --tile 64K --slots 2 --sizes 256M \
    --iters 1 --warmup 0 --backend cuda --no-membw 2>&1 | grep -E "rscc_run|duration|dram__|lts__|sm__|==ERR|error" | head -20
fi
