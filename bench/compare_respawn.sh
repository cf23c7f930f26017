#!/usr/bin/env bash
# compare_respawn.sh - recovery by respawning (R40) beside Open MPI 5 with ULFM:
# abi/c/respawn.c built against the standard ABI (gcc with abi/include, linked to
# runthrough's libmpi_abi.so.1: MPICH's mpicc_abi links MPICH's, which has no ULFM calls;
# run under rtrun) and with Open MPI's mpicc (run by `mpirun --with-ft ulfm`), run interleaved
# (runthrough shm, runthrough tcp, Open MPI, runthrough shm, ...) RUNS times.
#
#   bench/compare_respawn.sh [--runs N] [--ranks N] [--victim R@STEP] [--rt-lib DIR]
#
# Each run: a ring of RANKS blocks (default 6); rank R SIGKILLs itself before step STEP
# (default 3@200: ~0.8 s in, RESPAWN_KILL); the survivors revoke, shrink, spawn one
# replacement, merge, split, roll back and finish (the result checked against a serial
# run). Two times per run: *kill to computing*, from the victim's wall clock just before
# its SIGKILL to the replacement's at its first step (both processes on this host), and
# *recovery*, from the first error rank 0 saw to its next step. Open MPI: `--mca pml ob1
# --mca btl sm,self,tcp` with tcp on loopback (sm alone cannot reach spawned processes),
# oversubscribed, unbound, yielding when idle. Prints one table, median (min-max) in ms,
# and the ratio Open MPI / runthrough (> 1: runthrough recovers sooner); merges the medians
# into bench/data/respawn.csv.
#
# Environment: RT_BENCH_VENVS, CARGO_TARGET_DIR, OPAL_PREFIX, RT_BENCH_TIMEOUT (seconds
# per run, default 120), RTRUN.
set -euo pipefail

prog=compare_respawn.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
run_timeout=${RT_BENCH_TIMEOUT:-120}
runs=7 ranks=6 victim=3@200
rt_lib=$target/release/abi-lib
rtrun=${RTRUN:-$target/release/rtrun}
while [[ $# -gt 0 ]]; do
    case $1 in
    --runs) runs=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --victim) victim=$2; shift 2 ;;
    --rt-lib) rt_lib=$2; shift 2 ;;
    -h | --help) show_help ;;
    *) die "unknown argument $1" ;;
    esac
done

reference_mpis
[[ -e $rt_lib/libmpi_abi.so.1 ]] || die "no $rt_lib/libmpi_abi.so.1 (make abi)"
[[ -x $rtrun ]] || die "no $rtrun (cargo build --release -p runthrough-launch)"

build=$target/respawn-c
mkdir -p "$build"
src=$root/abi/c/respawn.c
if [[ ! -x $build/respawn_openmpi || $src -nt $build/respawn_openmpi ]]; then
    log "building $build/respawn_openmpi"
    "$ompi/bin/mpicc" -O2 -o "$build/respawn_openmpi" "$src"
fi
if [[ ! -x $build/respawn_abi || $src -nt $build/respawn_abi ]]; then
    log "building $build/respawn_abi"
    gcc -O2 -pthread -I"$root/abi/include" -o "$build/respawn_abi" "$src" -L"$rt_lib" -l:libmpi_abi.so.1
fi

run_one() { # config
    case $1 in
    rt-shm) RESPAWN_KILL=$victim LD_LIBRARY_PATH=$rt_lib timeout "$run_timeout" "$rtrun" -n "$ranks" \
        "$build/respawn_abi" ;;
    rt-tcp) RESPAWN_KILL=$victim LD_LIBRARY_PATH=$rt_lib timeout "$run_timeout" "$rtrun" -n "$ranks" \
        --transport fabric --provider tcp "$build/respawn_abi" ;;
    ompi) RESPAWN_KILL=$victim timeout -s KILL "$run_timeout" "$ompi/bin/mpirun" --allow-run-as-root \
        --with-ft ulfm -np "$ranks" --oversubscribe --bind-to none --mca mpi_yield_when_idle 1 --mca pml ob1 \
        --mca btl sm,self,tcp --mca btl_tcp_if_include lo -x RESPAWN_KILL "$build/respawn_openmpi" ;;
    esac
}

raw=$root/bench/out/raw/respawn-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$raw"
provenance
log "host $bench_host, commit $bench_commit, $ranks ranks, victim $victim, $runs runs; raw outputs in $raw"
configs=(rt-shm rt-tcp ompi)
for ((i = 1; i <= runs; i++)); do
    for c in "${configs[@]}"; do
        f=$raw/$c-$i.txt
        run_one "$c" >"$f" 2>&1 || log "$c run $i: exit $?"
        grep -q "matches the serial run" "$f" || log "$c run $i: no correct result (see $f)"
    done
done

# Per run: kill-to-computing and recovery in ms.
times() { # file -> "kill recovery"
    awk '/killed at/ { k = $NF } /replacement computing at/ { c = $NF }
         /recovered in/ { for (i = 1; i <= NF; i++) if ($i == "in") r = $(i + 1) }
         END { if (k && c) printf "%.1f %s\n", (c - k) * 1000, r ? r : "nan" }' "$1"
}
rows=$raw/rows.csv
: >"$rows"
printf '\n%-8s %-26s %-26s\n' config "kill to computing (ms)" "recovery (ms)"
declare -A med
for c in "${configs[@]}"; do
    k=() r=()
    for ((i = 1; i <= runs; i++)); do
        read -r a b < <(times "$raw/$c-$i.txt") || continue
        k+=("$a") r+=("$b")
    done
    km= rm=nan
    read -r km kl kh kn < <(printf '%s\n' "${k[@]}" | median_min_max %.1f) || true
    [[ -n $km ]] || { log "$c: no timings"; continue; }
    read -r rm rl rh _ < <(printf '%s\n' "${r[@]}" | grep -v nan | median_min_max %.1f) || true
    med[$c]=$km
    printf '%-8s %-26s %-26s\n' "$c" "$km ($kl-$kh) n=$kn" "$rm (${rl:-}-${rh:-})"
    echo "respawn_kill_to_computing,$ranks,0,${c%%-*},${c#*-},$km,$kl,$kh,ms" >>"$rows"
    [[ $rm != nan ]] && echo "respawn_recovery,$ranks,0,${c%%-*},${c#*-},$rm,$rl,$rh,ms" >>"$rows"
done
if [[ -n ${med[ompi]:-} && -n ${med[rt-shm]:-} ]]; then
    awk -v o="${med[ompi]}" -v s="${med[rt-shm]}" -v t="${med[rt-tcp]:-0}" 'BEGIN {
        printf "\nOpen MPI / runthrough, kill to computing: shm %.2fx", o / s
        if (t > 0) printf ", tcp %.2fx", o / t
        printf "\n" }'
fi
merge_csv "$root/bench/data/respawn.csv" "$rows" 0 1 3 4
