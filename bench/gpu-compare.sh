#!/usr/bin/env bash
# Side-by-side GPU timings of several rscc binaries or settings, in one run
# on one machine (the way to compare kernel versions: these machines vary
# by a few percent between loans).
#
#   bench/gpu-compare.sh NAME=BIN[,VAR=VALUE...] ...
#   e.g. bench/gpu-compare.sh old=/tmp/rscc-old new=target/release/rscc \
#          new-u8=target/release/rscc,RSCC_NVRTC_OPTIONS=-DUNROLL=8
#
# For each configuration (the built-in ring at N = 8 with 4, 16 and 32
# channels, N = 16 at 64 KiB, and the dgx-h100 (three ops), ring8 and
# dgx-h100x2 schedules) it runs every variant in turn (f32 sum, virtual ranks, 5
# timed launches after 2 warm-ups), then prints one row per configuration
# and size: each variant's time in µs and %roof ((N+1)·S / t over the copy
# bandwidth that run measured), and each variant's speed-up over the first.
# JSON: every run's report under $OUT/gpu-compare (or a temporary
# directory) and the table as compare.json there.
set -uo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { sed -n 2,18p "$0"; exit 2; }
. bench/nvrtc.sh

RES=${OUT:-$(mktemp -d)}/gpu-compare
mkdir -p "$RES"
names=()
for v in "$@"; do names+=("${v%%=*}"); done

# config NAME ARGS...: every variant on one configuration.
config() {
  local cname=$1; shift
  for spec in "${VARIANTS[@]}"; do
    local vname=${spec%%=*} rest=${spec#*=}
    local bin=${rest%%,*} envs=()
    [ "$rest" != "$bin" ] && IFS=, read -ra envs <<<"${rest#*,}"
    local t0=$SECONDS
    env "${envs[@]}" timeout 120 "$bin" run "$@" --backend cuda --gpu-mode virtual --json \
      --iters 5 --warmup 2 >"$RES/$cname@$vname.json" 2>"$RES/$cname@$vname.err"
    echo "  $cname @ $vname: rc $? ($((SECONDS - t0)) s)" >&2
  done
}
VARIANTS=("$@")

config ring8-ch4 --builtin ring --ranks 8 --channels 4 --sizes 64K,16M,1G
config ring8-ch32-t64K --builtin ring --ranks 8 --channels 32 --tile 64K --sizes 16M,1G
config ring8-ch16-t128K-s4 --builtin ring --ranks 8 --channels 16 --tile 128K --slots 4 --sizes 16M,1G
config dgx-h100-rs schedules/dgx-h100/rs.xml --sizes 64K,16M,1G
config ring8-rs schedules/ring8/rs.xml --sizes 4K,64K,16M
config dgx-h100-ag schedules/dgx-h100/ag.xml --sizes 64K,16M
config dgx-h100-ar schedules/dgx-h100/ar.xml --sizes 64K,16M
config ring16-ch4 --builtin ring --ranks 16 --channels 4 --sizes 64K
config dgx-h100x2-rs schedules/dgx-h100x2/rs.xml --sizes 64K,16M

python3 - "$RES" "${names[@]}" <<'PY'
import json, os, sys
res, names = sys.argv[1], sys.argv[2:]
cells = {}
for f in sorted(os.listdir(res)):
    if "@" not in f or not f.endswith(".json"):
        continue
    cname, vname = f[:-5].split("@")
    try:
        rep = json.load(open(os.path.join(res, f)))
    except Exception:
        continue
    for r in rep["rows"]:
        cells.setdefault((cname, r["size_bytes"]), {})[vname] = (r["time_us"], r.get("membw_frac"))
hdr = f"{'configuration':24} {'size':>10}" + "".join(f" {n[:14]:>14}" for n in names) + "".join(
    f" {('x ' + n)[:10]:>10}" for n in names[1:])
print(hdr)
table = []
for (cname, size), v in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
    row = {"config": cname, "size": size}
    line = f"{cname[:24]:24} {size:>10}"
    for n in names:
        t, fr = v.get(n, (None, None))
        row[n] = {"time_us": t, "roof": fr}
        line += f" {'-':>14}" if t is None else f" {t:>8.1f}{'' if fr is None else ' %3.0f%%' % (100 * fr):>6}"
    base = v.get(names[0], (None,))[0]
    for n in names[1:]:
        t = v.get(n, (None,))[0]
        x = base / t if base and t else None
        row["x_" + n] = x
        line += f" {'-' if x is None else '%.2f' % x:>10}"
    print(line)
    table.append(row)
json.dump(table, open(os.path.join(res, "compare.json"), "w"), indent=1)
PY
echo "results in $RES" >&2
