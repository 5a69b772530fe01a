#!/usr/bin/env bash
# Side by side on this machine, float32 sum reduce-scatter: Open MPI's and
# MPICH's MPI_Reduce_scatter_block (bench/mpi_rs.c, one process per rank)
# against `rscc run` (the CPU executor, all ranks in one process, its
# threadblocks as tasks on one worker thread per core) with two schedules:
# the built-in ring and the schedule synthesis picks for the cpu-shm
# topology of N ranks (`rscc topo generate cpu-shm --gpus N`, the
# generator of topologies/cpu-shm.json, then `rscc run --topo`). N = 2, 4,
# 8 and 16 ranks (16 oversubscribes a small machine's cores for MPI; rscc's
# pool stays at one worker per core). Beside them, the hand-written floor
# bench/direct_rs.c (plain C, one thread per core, only the minimum memory
# traffic): what this machine's memory lets any reduce-scatter reach.
#
# Usage: bench/mpi-compare.sh [OUT.json]     (from the repository root)
# Env:   RANKS="2 4 8 16"  SIZES="4096 65536 1048576 16777216 268435456"
#        SKIP_INSTALL=1 (both MPIs already installed)
#
# Times are nccl-tests' (mean per call; MPI: max over ranks). Each rscc run
# and the C floor also measure memory bandwidth B (STREAM-like a += b on
# every core, the same pass) in the same process, right before and right
# after the timed calls (their mean: a shared machine's B moves with its
# neighbours' load); %roof = (N+1)·S / t / B, with each one's own B, the
# minimum memory traffic of a reduce-scatter (read every input once, write
# every output once).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-bench/results/mpi-compare.json}
RANKS=${RANKS:-"2 4 8 16"}
SIZES=${SIZES:-"4096 65536 1048576 16777216 268435456"}
mkdir -p "$(dirname "$OUT")" target/bench

if [ -z "${SKIP_INSTALL:-}" ] && ! { command -v mpicc.openmpi && command -v mpicc.mpich; } >/dev/null; then
    export DEBIAN_FRONTEND=noninteractive
    SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq openmpi-bin libopenmpi-dev mpich libmpich-dev >/dev/null
fi
mpicc.openmpi -O2 -o target/bench/mpi_rs_openmpi bench/mpi_rs.c
mpicc.mpich -O2 -o target/bench/mpi_rs_mpich bench/mpi_rs.c
cc -O3 -march=native -pthread -o target/bench/direct_rs bench/direct_rs.c
cargo build --release -q
RSCC=target/release/rscc
OMPI_VER=$(mpirun.openmpi --version 2>&1 | head -1)
MPICH_VER=$(mpichversion 2>/dev/null | sed -n 's/^MPICH Version:[[:space:]]*//p' | head -1)

iters_for() { # size -> "iters warmup"
    if [ "$1" -le 1048576 ]; then echo "50 5"; elif [ "$1" -le 16777216 ]; then echo "10 2"; else echo "2 1"; fi
}

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
for n in $RANKS; do
    "$RSCC" topo generate cpu-shm --gpus "$n" -o "$TMP/shm$n.json" >/dev/null
    for s in $SIZES; do
        read -r it wu < <(iters_for "$s")
        mpirun.openmpi --oversubscribe --allow-run-as-root -np "$n" target/bench/mpi_rs_openmpi "$s" "$it" "$wu" \
            > "$TMP/ompi_${n}_${s}.txt"
        mpirun.mpich -np "$n" target/bench/mpi_rs_mpich "$s" "$it" "$wu" > "$TMP/mpich_${n}_${s}.txt"
        target/bench/direct_rs "$n" "$s" "$it" "$wu" > "$TMP/c_${n}_${s}.txt"
        "$RSCC" run --builtin ring --ranks "$n" --sizes "$s" --iters "$it" --warmup "$wu" \
            --check --json > "$TMP/ring_${n}_${s}.json"
        "$RSCC" run --topo "$TMP/shm$n.json" --op reduce-scatter --sizes "$s" \
            --iters "$it" --warmup "$wu" --check --json > "$TMP/synth_${n}_${s}.json"
    done
done

python3 - "$TMP" "$OUT" "$RANKS" "$SIZES" "$OMPI_VER" "$MPICH_VER" <<'PY'
import json, sys, os
tmp, out, ranks, sizes, ompi_ver, mpich_ver = sys.argv[1:7]
ranks, sizes = ranks.split(), sizes.split()
def human(b):
    b = int(b)
    return f"{b >> 20} MiB" if b >= 1 << 20 else f"{b >> 10} KiB"
def mpi(kind, n, s):
    m = open(f"{tmp}/{kind}_{n}_{s}.txt").read().split()
    return float(m[2]), m[3]
def c_floor(n, s):
    m = open(f"{tmp}/c_{n}_{s}.txt").read().split()
    return float(m[2]), m[3], float(m[4])
rows = []
print(f"Open MPI: {ompi_ver}; MPICH: {mpich_ver}; cores: {os.cpu_count()}")
print("| N | size/rank | Open MPI (µs) | MPICH (µs) | C floor (µs) | rscc ring (µs) | rscc synth (µs) | synth pick | rscc best vs best MPI | rscc best vs C floor | B C / ring / synth (GB/s) | C %roof | ring %roof | synth %roof | check |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for n in ranks:
    for s in sizes:
        N = int(n)
        ompi_us, ompi_ok = mpi("ompi", n, s)
        mpich_us, mpich_ok = mpi("mpich", n, s)
        c_us, c_ok, c_bw = c_floor(n, s)
        ring = json.load(open(f"{tmp}/ring_{n}_{s}.json"))
        syn = json.load(open(f"{tmp}/synth_{n}_{s}.json"))
        rr, sr = ring["rows"][0], syn["rows"][0]
        S = rr["size_bytes"]
        best_mpi = min(ompi_us, mpich_us)
        best_rscc = min(rr["time_us"], sr["time_us"])
        c_roof = (N + 1) * S / (c_us * 1e-6) / (c_bw * 1e9) if c_bw else 0.0
        rec = dict(ranks=N, size_bytes=S,
                   openmpi_time_us=ompi_us, openmpi_check=ompi_ok,
                   mpich_time_us=mpich_us, mpich_check=mpich_ok,
                   c_floor_time_us=c_us, c_floor_check=c_ok, c_floor_roof_frac=c_roof,
                   c_floor_membw_gbps=c_bw, synth_membw_gbps=sr["membw_gbps"],
                   speedup_vs_c_floor=c_us / best_rscc,
                   ring_time_us=rr["time_us"], ring_correct=rr["correct"], ring_roof_frac=rr["membw_frac"],
                   ring_membw_gbps=rr["membw_gbps"],
                   synth_name=syn["name"], synth_time_us=sr["time_us"], synth_correct=sr["correct"],
                   synth_roof_frac=sr["membw_frac"], synth_size_bytes=sr["size_bytes"],
                   speedup_vs_best_mpi=best_mpi / best_rscc, workers=ring["threads"])
        rows.append(rec)
        ok = all([ompi_ok == "ok", mpich_ok == "ok", c_ok == "ok", rr["correct"], sr["correct"]])
        print(f"| {N} | {human(S)} | {ompi_us:.1f} | {mpich_us:.1f} | {c_us:.1f} | {rr['time_us']:.1f} | {sr['time_us']:.1f} | "
              f"{syn['name']} | {rec['speedup_vs_best_mpi']:.2f}× | {rec['speedup_vs_c_floor']:.2f}× | "
              f"{c_bw:.1f} / {rr['membw_gbps']:.1f} / {sr['membw_gbps']:.1f} | "
              f"{100*c_roof:.0f}% | {100*rr['membw_frac']:.0f}% | {100*sr['membw_frac']:.0f}% | {'ok' if ok else 'WRONG'} |")
json.dump(dict(openmpi=ompi_ver, mpich=mpich_ver, cores=os.cpu_count(), rows=rows), open(out, "w"), indent=2)
print(f"\nwrote {out}")
PY
