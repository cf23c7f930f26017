#!/usr/bin/env bash
# compare_abi.sh - the same binaries on two MPIs through the MPI-5 standard ABI:
# MPICH 5.0.2's libmpi_abi.so.1 and runthrough's, side by side in one table.
#
# Builds bench/c/osu_pt2pt.c, osu_coll.c, ft_detect.c and abi/c/*.c ONCE with the MPICH
# wheel's mpicc_abi (-DMPI_ABI: <mpi.h> is mpi_abi.h; abi/include gives mpi-ext.h) into
# BUILD (default target/abi-c/), then runs each binary
#   - on MPICH:      LD_LIBRARY_PATH=$MPICH/lib  mpiexec -iface lo -n 2 -bind-to core BIN ...
#   - on runthrough: LD_LIBRARY_PATH=RT_LIB      rtrun -n 2 --bind-to core BIN ...
# interleaved run by run (MPICH, runthrough, native, MPICH, runthrough, native, ...), RUNS
# times, and prints one table: median (min-max) per cell, the ratio runthrough/MPICH, and
# for the OSU rows the native Rust programs (target/release/osu_latency, osu_bw, ...) on
# runthrough with the ratio ABI/native. The binaries are linked with DT_RUNPATH (mpicc_abi
# passes -Wl,--enable-new-dtags), which LD_LIBRARY_PATH overrides; the script checks that
# no DT_RPATH is present, that `ldd` resolves libmpi_abi.so.1 into the directory of each
# column before running it, and that every binary's sha256 is the same before each run
# (printed under the table).
#
# The abi/c programs (run-through chapter examples 17.5-17.8, manager_worker) are correctness rows:
# a cell is how many runs ended with every rank's "ok" line and exit 0 (`ok 3/3`), with
# the median wall time. They run failure-free on both MPIs (--ft-ranks N ranks, default
# 4), and on runthrough also with one of their own ranks killed (-k), which MPICH's
# library cannot serve (no MPIX_ symbols: the programs print "unsupported on this MPI" and
# exit 77). ft_detect's row is the average detection time (ms) of a SIGKILLed rank.
#
# When runthrough's library is missing, its columns say so and the MPICH column still runs.
# Raw outputs go to bench/out/raw/abi-<date>/, the table also to bench/out/compare_abi-<date>.md.
#
# Environment: RT_BENCH_VENVS (venv cache, default bench/venvs), CARGO_TARGET_DIR,
# RT_BENCH_BIND (core|none, default core), RT_BENCH_TIMEOUT (seconds per run, default 120).

set -euo pipefail

usage() {
    cat <<EOF
usage: bench/compare_abi.sh [--runs N] [--rt-lib DIR] [--build-dir DIR] [--ft-ranks N]
                            [--quick] [--no-native] [--no-ft] [--only-build]
  --runs N        runs per cell, interleaved; the median and min-max are reported (default 3)
  --rt-lib DIR    directory holding runthrough's libmpi_abi.so.1
                  (default \$target/release/abi-lib)
  --build-dir DIR where the C binaries go (default \$target/abi-c)
  --ft-ranks N    ranks of the abi/c correctness rows (default 4; the kill rows need >= 3)
  --quick         fewer iterations per measurement
  --no-native     no native Rust column
  --no-ft         skip ft_detect and the abi/c correctness rows
  --only-build    build, check the link (readelf/nm) and stop
  -h, --help      this help
EOF
}

prog=compare_abi.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venvs=${RT_BENCH_VENVS:-$here/venvs}
bind=${RT_BENCH_BIND:-core}
run_timeout=${RT_BENCH_TIMEOUT:-120}
mpich=$venvs/mpich

runs=3
rt_lib=$target/release/abi-lib
build_dir=$target/abi-c
ft_ranks=4
quick=0
native=1
ft=1
only_build=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs | --rt-lib | --build-dir | --ft-ranks)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            case "$1" in
                --runs) runs=$2 ;;
                --rt-lib) rt_lib=$2 ;;
                --build-dir) build_dir=$2 ;;
                --ft-ranks) ft_ranks=$2 ;;
            esac
            shift
            ;;
        --runs=*) runs=${1#--runs=} ;;
        --rt-lib=*) rt_lib=${1#--rt-lib=} ;;
        --build-dir=*) build_dir=${1#--build-dir=} ;;
        --ft-ranks=*) ft_ranks=${1#--ft-ranks=} ;;
        --quick) quick=1 ;;
        --no-native) native=0 ;;
        --no-ft) ft=0 ;;
        --only-build) only_build=1 ;;
        -h | --help)
            usage
            exit 0
            ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
    shift
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
[[ "$ft_ranks" =~ ^[1-9][0-9]*$ && $ft_ranks -ge 2 ]] || { usage >&2; exit 2; }
case "$bind" in
    core | none) ;;
    *) die "RT_BENCH_BIND must be core or none, not '$bind'" ;;
esac
rt_lib=$(realpath -m "$rt_lib")
build_dir=$(realpath -m "$build_dir")

[[ -x $mpich/bin/mpicc_abi && -e $mpich/lib/libmpi_abi.so.1 ]] ||
    die "no MPICH wheel with mpicc_abi in $mpich (bench/compare.sh installs mpich==5.0.2 there)"

# ---------------------------------------------------------------------------
# Build once with mpicc_abi.

mkdir -p "$build_dir"
cflags=(-O2 -Wall -Wextra -Werror -I "$root/abi/include")
build() { # name source [extra flags]
    local bin=$build_dir/$1 src=$2 dep newer=0
    shift 2
    for dep in "$src" "$(dirname "$src")"/*.h "$root/abi/include/mpi-ext.h" "$mpich/bin/mpicc_abi"; do
        [[ -e $dep && $dep -nt $bin ]] && newer=1
    done
    if [[ ! -x $bin || $newer -eq 1 ]]; then
        log "building $bin"
        "$mpich/bin/mpicc_abi" "${cflags[@]}" "$@" -o "$bin" "$src"
    fi
    # DT_RPATH would beat LD_LIBRARY_PATH and pin the binary to MPICH's library.
    if readelf -d "$bin" | grep -q '(RPATH)'; then
        die "$bin has DT_RPATH: LD_LIBRARY_PATH cannot choose the library (link with -Wl,--enable-new-dtags)"
    fi
}
osu_progs=(osu_pt2pt osu_coll)
ex_progs=(ex17_5_reenable ex17_6_barrier ex17_7_bcast ex17_8_exscan manager_worker)
for p in "${osu_progs[@]}" ft_detect; do
    build "$p" "$here/c/$p.c"
done
for p in "${ex_progs[@]}"; do
    build "$p" "$root/abi/c/$p.c" -pthread
done
all_bins=("${osu_progs[@]}" ft_detect "${ex_progs[@]}")
declare -A sha
for p in "${all_bins[@]}"; do
    sha[$p]=$(sha256sum "$build_dir/$p" | cut -d' ' -f1)
done
if [[ $only_build -eq 1 ]]; then
    for p in "${all_bins[@]}"; do
        printf '%-16s %s  %s\n' "$p" "${sha[$p]}" "$(readelf -d "$build_dir/$p" | grep -o 'R[UN]*PATH.*' | tr -s ' ')"
        printf '%-16s MPI symbols: %s\n' "" "$(nm -u "$build_dir/$p" | awk '$2 ~ /^P?MPIX?_/ { printf "%s%s ", $2, ($1 == "w" ? "(weak)" : "") }')"
    done
    exit 0
fi

# ---------------------------------------------------------------------------
# Libraries: a column runs only when ldd resolves libmpi_abi.so.1 into its directory.

resolves_to() { # libdir bin -> prints the path ldd resolves libmpi_abi.so.1 to
    env LD_LIBRARY_PATH="$1" ldd "$2" 2>/dev/null | awk '$1 == "libmpi_abi.so.1" { print $3 }'
}
have_mpich=1
got=$(resolves_to "$mpich/lib" "$build_dir/osu_pt2pt")
[[ $(realpath -m "$got") == $(realpath -m "$mpich/lib/libmpi_abi.so.1") ]] || {
    log "MPICH: libmpi_abi.so.1 resolves to '$got', not $mpich/lib"
    have_mpich=0
}
have_rt=1
rt_why=""
rtrun=$target/release/rtrun
if [[ ! -e $rt_lib/libmpi_abi.so.1 ]]; then
    have_rt=0
    rt_why="library not built (expected at $rt_lib/libmpi_abi.so.1)"
elif [[ ! -x $rtrun ]]; then
    have_rt=0
    rt_why="no launcher at $rtrun"
else
    got=$(resolves_to "$rt_lib" "$build_dir/osu_pt2pt")
    if [[ $(realpath -m "$got") != $(realpath -m "$rt_lib/libmpi_abi.so.1") ]]; then
        have_rt=0
        rt_why="libmpi_abi.so.1 resolves to '$got', not into $rt_lib"
    fi
fi
[[ $have_rt -eq 1 ]] || log "runthrough: $rt_why"
have_native=$native
if [[ $native -eq 1 ]]; then
    for b in rtrun osu_latency osu_bw osu_barrier osu_bcast osu_allreduce osu_alltoall ft_detect; do
        [[ -x $target/release/$b ]] || have_native=0
    done
    [[ $have_native -eq 1 ]] || log "native runthrough binaries missing under $target/release; no native column"
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load_before%% *}" 'BEGIN { exit !(l > 0.5) }'; then
    log "warning: load average is $load_before; other processes will skew the numbers"
fi
stamp=$(date +%Y-%m-%d-%H%M%S)
outdir=$here/out
rawdir=$outdir/raw/abi-$stamp
mkdir -p "$rawdir"

# ---------------------------------------------------------------------------
# Rows. Each: id | label | kind | ranks | binary + args (C) | native Rust program + args.
# kind: lat/bw/coll (OSU output, value at SIZE), ft (ft_detect's avg column),
# check (abi/c program: count of ok runs), checkkill (runthrough only, a rank killed).

if [[ $quick -eq 1 ]]; then
    lat_it="-i 2000 -x 200" bw_it="-i 20 -x 2" coll_it="-i 100 -x 10"
else
    # 8 B latency: 100 000 round trips a run (about 40 ms), not OSU's 10 000 (4 ms): the
    # figure is printed to 0.01 us, and the ABI/native ratio is a few per cent.
    lat_it="-i 100000 -x 10000" bw_it="-i 100 -x 10" coll_it="-i 1000 -x 100"
fi
mw_tasks=200
[[ $quick -eq 1 ]] && mw_tasks=100
rows=(
    "lat8|osu latency 8 B (us)|lat|2|osu_pt2pt latency -m 8:8 $lat_it|osu_latency -m 8:8 $lat_it"
    "bw1m|osu bw 1 MiB (MB/s)|bw|2|osu_pt2pt bw -m 1048576:1048576 $bw_it -d|osu_bw -m 1048576:1048576 $bw_it"
    "barrier|osu barrier (us)|coll|2|osu_coll barrier $coll_it|osu_barrier $coll_it"
    "bcast8|osu bcast 8 B (us)|coll|2|osu_coll bcast -m 8:8 $coll_it|osu_bcast -m 8:8 $coll_it"
    "allred8|osu allreduce 8 B (us)|coll|2|osu_coll allreduce -m 8:8 $coll_it|osu_allreduce -m 8:8 $coll_it"
    "allred64k|osu allreduce 64 KiB (us)|coll|2|osu_coll allreduce -m 65536:65536 $coll_it|osu_allreduce -m 65536:65536 $coll_it"
    "a2a8|osu alltoall 8 B (us)|coll|2|osu_coll alltoall -m 8:8 $coll_it|osu_alltoall -m 8:8 $coll_it"
)
if [[ $ft -eq 1 ]]; then
    k=$((ft_ranks - 1))
    rows+=(
        "ftdetect|ft_detect kill, avg detection (ms)|ft|2|ft_detect -d 5|ft_detect"
        "ex175|ex17_5_reenable 3 thr (ok runs)|check|$ft_ranks|ex17_5_reenable 3 100|"
        "ex176|ex17_6_barrier (ok runs)|check|$ft_ranks|ex17_6_barrier - 50|"
        "ex177|ex17_7_bcast (ok runs)|check|$ft_ranks|ex17_7_bcast|"
        "ex178|ex17_8_exscan (ok runs)|check|$ft_ranks|ex17_8_exscan|"
        "mw|manager_worker $mw_tasks (ok runs)|check|$ft_ranks|manager_worker $mw_tasks|"
        "ex175k|ex17_5_reenable -k $k@30 (ok runs)|checkkill|$ft_ranks|ex17_5_reenable 3 100 -k $k@30|"
        "ex176k|ex17_6_barrier -k $k (ok runs)|checkkill|$ft_ranks|ex17_6_barrier $k 50|"
        "ex177k|ex17_7_bcast -k $k (ok runs)|checkkill|$ft_ranks|ex17_7_bcast $k|"
        "ex178k|ex17_8_exscan -k $k (ok runs)|checkkill|$ft_ranks|ex17_8_exscan $k|"
        "mwk|manager_worker -k $k@10 (ok runs)|checkkill|$ft_ranks|manager_worker $mw_tasks -k $k@10|"
    )
fi

cpus=$(nproc)
# Binding options for N ranks (bound to cores when they fit, as compare.sh).
set_launch_opts() { # nranks
    mpich_bind=()
    rt_bind=()
    if [[ $bind == core && $1 -le $cpus ]]; then
        mpich_bind=(-bind-to core)
        rt_bind=(--bind-to core)
    elif [[ $bind == core ]]; then
        mpich_bind=(-bind-to none)
        rt_bind=(--bind-to none)
    fi
    return 0
}

# Runs one cell: impl (mpich|rt|native), ranks, kind, program + args. Output to stdout.
run_one() { # impl np kind prog args...
    local impl=$1 np=$2 kind=$3 p=$4 extra=()
    shift 4
    set_launch_opts "$np"
    # MPICH ends the whole job when a rank dies unless told not to (ft_detect).
    [[ $kind == ft ]] && extra=(-disable-auto-cleanup)
    case "$impl" in
        mpich)
            timeout "$run_timeout" env \
                UCX_NET_DEVICES=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo \
                LD_LIBRARY_PATH="$mpich/lib" \
                "$mpich/bin/mpiexec" -iface lo -n "$np" "${mpich_bind[@]}" "${extra[@]}" \
                "$build_dir/$p" "$@"
            ;;
        rt)
            timeout "$run_timeout" env LD_LIBRARY_PATH="$rt_lib" \
                "$rtrun" -n "$np" "${rt_bind[@]}" --timeout "${run_timeout}s" -- "$build_dir/$p" "$@"
            ;;
        native)
            timeout "$run_timeout" "$rtrun" -n "$np" "${rt_bind[@]}" --timeout "${run_timeout}s" \
                -- "$target/release/$p" "$@"
            ;;
    esac
}

# The value of one raw output: OSU row at size, ft_detect's avg, or "ok" / "fail" / "unsupported".
value_of() { # kind file ok-lines-expected size
    local kind=$1 f=$2 size=$4
    case "$kind" in
        lat | bw | coll)
            if [[ -z $size ]]; then # barrier: one value
                awk '$1 !~ /^#/ && NF == 1 && $1 ~ /^[0-9.]+$/ { print $1; exit }' "$f"
            else
                awk -v s="$size" '$1 == s && NF == 2 { print $2; exit }' "$f"
            fi
            ;;
        ft) awk '$1 !~ /^#/ && NF == 6 && $4 ~ /^[0-9.]+$/ { print $5; exit }' "$f" ;;
        check | checkkill)
            local rc ok bad uns
            rc=$(cat "$f.rc")
            # Distinct ranks with an ok line (a job of singletons prints "rank 0" N times).
            ok=$(grep -o ': rank [0-9]* ok' "$f" | sort -u | wc -l || true)
            bad=$(grep -c ': rank [0-9]* FAILED' "$f" || true)
            uns=$(grep -c 'unsupported on this MPI' "$f" || true)
            if [[ $uns -gt 0 ]]; then
                echo unsupported
            elif [[ $rc -eq 0 && $bad -eq 0 && $ok -ge $3 ]]; then
                echo ok
            else
                echo "fail"
            fi
            ;;
    esac
}

impls=(mpich rt native)
for ((r = 1; r <= runs; r++)); do
    for row in "${rows[@]}"; do
        IFS='|' read -r id label kind np cprog nprog <<<"$row"
        for impl in "${impls[@]}"; do
            out=$rawdir/$id-$impl-$r.txt
            case "$impl" in
                mpich) [[ $have_mpich -eq 1 && $kind != checkkill ]] || continue ;;
                rt) [[ $have_rt -eq 1 ]] || continue ;;
                native) [[ $have_native -eq 1 && -n $nprog ]] || continue ;;
            esac
            if [[ $impl == native ]]; then
                read -r -a args <<<"$nprog"
            else
                read -r -a args <<<"$cprog"
                # The same binary on both MPIs: its hash must not change between runs.
                now=$(sha256sum "$build_dir/${args[0]}" | cut -d' ' -f1)
                [[ $now == "${sha[${args[0]}]}" ]] || die "${args[0]} changed between runs"
            fi
            log "$label: $impl run $r/$runs"
            t0=$(date +%s.%N)
            set +e
            run_one "$impl" "$np" "$kind" "${args[@]}" >"$out" 2>"$out.err"
            echo $? >"$out.rc"
            set -e
            t1=$(date +%s.%N)
            awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f\n", b - a }' >"$out.time"
            nok=$np
            [[ $kind == checkkill ]] && nok=$((np - 1))
            v=$(value_of "$kind" "$out" "$nok" "$(sed -n 's/.*-m \([0-9]*\):.*/\1/p' <<<"$cprog")")
            [[ -n $v ]] || log "$label: $impl run $r gave no value (exit $(cat "$out.rc"); see $out.err)"
            echo "$v" >"$out.val"
        done
    done
done

# ---------------------------------------------------------------------------
# Report.

# "median (min-max)" over the runs of one cell, or "" when none gave a number.
stat_of() { # id impl -> sets med and cell
    local vals n
    vals=$(for ((r = 1; r <= runs; r++)); do cat "$rawdir/$1-$2-$r.txt.val" 2>/dev/null || true; done |
        grep -E '^[0-9.]+$' | sort -g || true)
    med="" cell=""
    [[ -n $vals ]] || return 0
    n=$(wc -l <<<"$vals")
    med=$(awk -v n="$n" '{ v[NR] = $1 } END { if (n % 2) printf "%.2f", v[(n + 1) / 2]; else printf "%.2f", (v[n / 2] + v[n / 2 + 1]) / 2 }' <<<"$vals")
    if [[ $n -gt 1 ]]; then
        cell="$med ($(head -1 <<<"$vals")–$(tail -1 <<<"$vals"))"
    else
        cell=$med
    fi
}

# "ok 3/3 (0.84 s)" over the runs of a correctness cell.
check_of() { # id impl
    local ok=0 uns=0 n=0 v times med
    for ((r = 1; r <= runs; r++)); do
        [[ -e $rawdir/$1-$2-$r.txt.val ]] || continue
        v=$(cat "$rawdir/$1-$2-$r.txt.val")
        n=$((n + 1))
        [[ $v == ok ]] && ok=$((ok + 1))
        [[ $v == unsupported ]] && uns=$((uns + 1))
    done
    [[ $n -gt 0 ]] || { echo ""; return 0; }
    times=$(for ((r = 1; r <= runs; r++)); do cat "$rawdir/$1-$2-$r.txt.time" 2>/dev/null || true; done | sort -g)
    med=$(awk '{ v[NR] = $1 } END { printf "%.2f", v[int((NR + 1) / 2)] }' <<<"$times")
    if [[ $uns -eq $n ]]; then
        echo "unsupported"
    else
        echo "ok $ok/$n$([[ $((n - ok - uns)) -gt 0 ]] && echo ", failed $((n - ok - uns))")$([[ $uns -gt 0 ]] && echo ", unsupported $uns") (${med} s)"
    fi
}

ratio() { # a b kind -> a/b (for bw: higher is better, still a/b)
    [[ -n $1 && -n $2 ]] || { echo "-"; return 0; }
    awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
}

na_rt="n/a"
[[ $have_rt -eq 1 ]] || na_rt="not built"
report=$outdir/compare_abi-$stamp.md
{
    echo "# Same binaries on two MPIs through the MPI-5 ABI ($stamp)"
    echo
    echo "Host $(hostname), $cpus CPUs, load before $load_before; $runs run(s) per cell, interleaved;"
    echo "median (min–max). Built once with \`$mpich/bin/mpicc_abi ${cflags[*]}\` into $build_dir."
    echo "MPICH: LD_LIBRARY_PATH=$mpich/lib, mpiexec -iface lo -n N -bind-to core."
    if [[ $have_rt -eq 1 ]]; then
        echo "runthrough: LD_LIBRARY_PATH=$rt_lib, rtrun -n N --bind-to core."
    else
        echo "runthrough: $rt_why"
    fi
    echo "Ratios: runthrough / MPICH and ABI / native (for bandwidth higher is better, for the rest lower)."
    echo
    echo "| program / metric | ranks | MPICH (ABI) | runthrough (ABI) | rt/MPICH | runthrough native | ABI/native |"
    echo "|---|---|---|---|---|---|---|"
    for row in "${rows[@]}"; do
        IFS='|' read -r id label kind np cprog nprog <<<"$row"
        case "$kind" in
            check | checkkill)
                a=$(check_of "$id" mpich)
                b=$(check_of "$id" rt)
                [[ $kind == checkkill ]] && a="(not run: needs MPIX_)"
                [[ -n $a ]] || a="n/a"
                [[ -n $b ]] || b=$na_rt
                echo "| $label | $np | $a | $b | - | - | - |"
                ;;
            *)
                stat_of "$id" mpich
                a=$med ac=${cell:-n/a}
                stat_of "$id" rt
                b=$med bc=${cell:-$na_rt}
                stat_of "$id" native
                c=$med cc=${cell:-n/a}
                [[ -n $nprog ]] || cc="-"
                echo "| $label | $np | $ac | $bc | $(ratio "$b" "$a") | $cc | $(ratio "$b" "$c") |"
                ;;
        esac
    done
    echo
    echo "Binaries (sha256, identical for every run of both MPIs):"
    echo
    for p in "${all_bins[@]}"; do
        echo "    ${sha[$p]}  $build_dir/$p"
    done
    echo
    echo "Raw outputs: $rawdir"
} | tee "$report"
log "written to $report"
