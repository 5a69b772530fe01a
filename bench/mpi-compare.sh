#!/usr/bin/env bash
# Side-by-side: Open MPI's MPI_Reduce_scatter_block (float32, sum) vs
# `rscc run` (CPU executor) with the ring schedule, N = 2, 4, 8 ranks on this
# machine, per-rank sizes 64 KiB, 1 MiB, 16 MiB, 128 MiB.
#
# Usage: bench/mpi-compare.sh [OUT.json]     (from the repository root)
# Env:   RANKS="2 4 8"  SIZES="65536 1048576 16777216 134217728"
#        SKIP_INSTALL=1 (Open MPI already installed)
#
# rscc's schedule is the built-in ring (`rscc run --builtin ring --ranks N`,
# the same Program as reference/msccl-xml.md §7.1 for N ranks): on a
# fully connected shared-memory machine it moves the minimum memory
# traffic, (N+1)·S per call, because partial sums travel through
# cache-resident FIFOs. Times are nccl-tests' (mean per call); the rscc
# run also measures memory bandwidth B (STREAM-like a += b) in the same
# process, and %roof = (N+1)·S / t / B.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/mpi-compare.json}
RANKS=${RANKS:-"2 4 8"}
SIZES=${SIZES:-"65536 1048576 16777216 134217728"}
mkdir -p "$(dirname "$OUT")" target/bench

if [ -z "${SKIP_INSTALL:-}" ] && ! command -v mpicc >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev >/dev/null
fi
mpicc -O2 -o target/bench/mpi_rs bench/mpi_rs.c
cargo build --release -q
RSCC=target/release/rscc

iters_for() { # size -> "iters warmup"
    if [ "$1" -le 1048576 ]; then echo "50 5"; elif [ "$1" -le 16777216 ]; then echo "10 2"; else echo "3 1"; fi
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for n in $RANKS; do
    for s in $SIZES; do
        read -r it wu < <(iters_for "$s")
        mpirun --oversubscribe --allow-run-as-root -np "$n" target/bench/mpi_rs "$s" "$it" "$wu" \
            > "$TMP/mpi_${n}_${s}.txt"
        "$RSCC" run --builtin ring --ranks "$n" --sizes "$s" --iters "$it" --warmup "$wu" \
            --check --json > "$TMP/rscc_${n}_${s}.json"
    done
done

python3 - "$TMP" "$OUT" "$RANKS" "$SIZES" <<'PY'
import json, sys
tmp, out, ranks, sizes = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4].split()
rows = []
def human(b):
    b = int(b)
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
print(f"| N | size/rank | MPI time (µs) | MPI busbw (GB/s) | rscc time (µs) | rscc busbw (GB/s) | rscc/MPI speed-up | mem BW B (GB/s) | rscc %roof | check |")
print("|---|---|---|---|---|---|---|---|---|---|")
for n in ranks:
    for s in sizes:
        m = open(f"{tmp}/mpi_{n}_{s}.txt").read().split()
        mpi_us = float(m[2])
        r = json.load(open(f"{tmp}/rscc_{n}_{s}.json"))
        row = r["rows"][0]
        N = int(n); S = row["size_bytes"]
        busbw = lambda t: S / (t * 1e-6) / 1e9 * (N - 1) / N
        rec = dict(ranks=N, size_bytes=S, mpi_time_us=mpi_us, mpi_busbw_gbps=busbw(mpi_us), mpi_check=m[3],
                   rscc_time_us=row["time_us"], rscc_busbw_gbps=row["busbw_gbps"], rscc_correct=row["correct"],
                   speedup=mpi_us / row["time_us"], membw_gbps=r["membw_gbps"], rscc_roof_frac=row["membw_frac"])
        rows.append(rec)
        print(f"| {N} | {human(S)} | {mpi_us:.1f} | {rec['mpi_busbw_gbps']:.2f} | {row['time_us']:.1f} | {row['busbw_gbps']:.2f} | "
              f"{rec['speedup']:.2f}× | {r['membw_gbps']:.1f} | {100*row['membw_frac']:.0f}% | MPI {m[3]}, rscc {'ok' if row['correct'] else 'WRONG'} |")
json.dump(rows, open(out, "w"), indent=2)
print(f"\nwrote {out}")
PY
