#!/usr/bin/env bash
# Zero-copy sends on the CPU executor, side by side in one run: for each op,
# the ring and the direct (all-to-all) schedule that `rscc synth --chunks 1`
# writes for the N-rank cpu-shm topology (one chunk per shard, as `rscc run
# --topo` synthesizes for the CPU), each with zero-copy sends (the default)
# and with --no-zero-copy, float32 sum, --check. Prints one row per op, N
# and size with each time (the best of REPS alternated runs), the
# speed-ups, and for reduce-scatter %roof = (N+1)·S / t / B (B: the memory
# bandwidth each run measures first, median); writes the table as JSON.
#
# Usage: bench/zero-copy.sh [OUT.json]   (from the repository root)
# Env:   OPS="reduce-scatter allgather allreduce"  RANKS="4 8"
#        SIZES="65536 16777216 268435456"  REPS=3
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/zero-copy.json}
OPS=${OPS:-"reduce-scatter allgather allreduce"}
RANKS=${RANKS:-"4 8"}
SIZES=${SIZES:-"65536 16777216 268435456"}
REPS=${REPS:-3}
cargo build --release -q --bin rscc
RSCC=target/release/rscc
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
iters_for() { # size -> "iters warmup"
    if [ "$1" -le 1048576 ]; then echo "50 5"; elif [ "$1" -le 16777216 ]; then echo "10 2"; else echo "2 1"; fi
}
for n in $RANKS; do
    "$RSCC" topo generate cpu-shm --gpus "$n" -o "$TMP/shm$n.json" >/dev/null
    for op in $OPS; do
        for a in ring direct; do
            "$RSCC" synth --topo "$TMP/shm$n.json" --op "$op" --algo "$a" --chunks 1 \
                -o "$TMP/$op-$a$n.xml" >/dev/null
        done
        for s in $SIZES; do
            read -r it wu < <(iters_for "$s")
            for rep in $(seq "$REPS"); do
                for a in ring direct; do
                    for z in zc copy; do
                        flag=(); [ "$z" = copy ] && flag=(--no-zero-copy)
                        "$RSCC" run "$TMP/$op-$a$n.xml" --sizes "$s" --iters "$it" --warmup "$wu" \
                            --check --json "${flag[@]}" 2>/dev/null \
                            > "$TMP/r_${op}_${n}_${s}_${a}_${z}_$rep.json"
                    done
                done
            done
        done
    done
done
python3 - "$TMP" "$OUT" "$OPS" "$RANKS" "$SIZES" "$REPS" <<'PY'
import json, sys
tmp, out = sys.argv[1], sys.argv[2]
ops, ranks, sizes = sys.argv[3].split(), sys.argv[4].split(), sys.argv[5].split()
reps = int(sys.argv[6])
rows = []
print(f"{'op':>14} {'N':>3} {'size':>10} | {'ring':>10} {'ring copy':>10} {'direct':>10} {'dir copy':>10} | "
      f"{'x ring':>7} {'x direct':>8} | {'B GB/s':>7} {'ring %':>6} {'dir %':>6} | wrong")
for op in ops:
    for n in ranks:
        for s in sizes:
            t, bw, wrong = {}, [], 0
            for a in ("ring", "direct"):
                for z in ("zc", "copy"):
                    best = None
                    for rep in range(1, reps + 1):
                        r = json.load(open(f"{tmp}/r_{op}_{n}_{s}_{a}_{z}_{rep}.json"))
                        row = r["rows"][0]
                        wrong += row.get("wrong") or 0
                        if r.get("membw_gbps"):
                            bw.append(r["membw_gbps"])
                        best = row["time_us"] if best is None else min(best, row["time_us"])
                    t[a, z] = best
            B = sorted(bw)[len(bw) // 2]
            def roof(us):
                if op != "reduce-scatter":
                    return "-"
                return "%.0f%%" % (100 * (int(n) + 1) * int(s) / (us * 1e3) / B)
            e = dict(op=op, ranks=int(n), size=int(s), membw_gbps=B, wrong=wrong,
                     **{f"{a}_{z}_us": v for (a, z), v in t.items()})
            rows.append(e)
            print(f"{op:>14} {n:>3} {s:>10} | {t['ring','zc']:>10.1f} {t['ring','copy']:>10.1f} "
                  f"{t['direct','zc']:>10.1f} {t['direct','copy']:>10.1f} | "
                  f"{t['ring','copy']/t['ring','zc']:>7.2f} {t['direct','copy']/t['direct','zc']:>8.2f} | "
                  f"{B:>7.1f} {roof(t['ring','zc']):>6} {roof(t['direct','zc']):>6} | {wrong}")
json.dump(rows, open(out, "w"), indent=1)
print(f"wrote {out}")
PY
