#!/usr/bin/env bash
# ft_detect.sh - failure-detection latency of runthrough over configurations.
#
# Runs target/release/ft_detect (bench/src/bin/ft_detect.rs) as one rtrun job per
# repetition (a failed rank cannot be reused), for every combination of
#   mode:     kill (the victim SIGKILLs itself: the launcher's exit notice or the
#             detector, whichever is first) and stop (it SIGSTOPs itself: only the
#             in-band ring detector can tell),
#   ranks:    4 and 8,
#   timeout:  the default (100 ms x oversubscription factor; the table shows the
#             effective value) and --ft-timeout 500ms; the period stays at 10 ms,
# rotating the victim over ranks 1..N-1. Each row aggregates its jobs: the minimum of
# the survivors' detection latencies, their mean, and their maximum. The table is
# printed and written to bench/out/ft_detect-<date>.md, raw job outputs go to
# bench/out/raw/ft_detect-<date>/.
#
# Environment: CARGO_TARGET_DIR (default <workspace>/target), RT_BENCH_TIMEOUT
# (seconds per job, default 60).

set -euo pipefail

usage() {
    cat <<EOF
usage: bench/ft_detect.sh [-r REPS] [--ranks "4 8"] [--modes "kill stop"] [--timeouts "default 500ms"] [--no-build]
  -r REPS        jobs (failures) per row (default 5)
  --ranks LIST   job sizes (default "4 8")
  --modes LIST   failure modes, kill and/or stop (default "kill stop")
  --timeouts L   detector timeouts: "default" (rtrun's) or durations for --ft-timeout
                 (default "default 500ms")
  --period D     detector period for every row (default: rtrun's, 10 ms)
  --no-build     do not run cargo; use the existing binaries
  -h, --help     this help
EOF
}

prog=ft_detect.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
job_timeout=${RT_BENCH_TIMEOUT:-60}

reps=5
ranks_list="4 8"
modes="kill stop"
timeouts="default 500ms"
period=""
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        -r | --reps | --ranks | --modes | --timeouts | --period)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            case "$1" in
                -r | --reps) reps=$2 ;;
                --ranks) ranks_list=$2 ;;
                --modes) modes=$2 ;;
                --timeouts) timeouts=$2 ;;
                --period) period=$2 ;;
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
for n in $ranks_list; do
    [[ "$n" =~ ^[0-9]+$ && $n -ge 2 ]] || die "bad rank count '$n' (at least 2)"
done
for m in $modes; do
    [[ $m == kill || $m == stop ]] || die "bad mode '$m' (kill or stop)"
done

if [[ $build -eq 1 ]]; then
    log "building (cargo build --release -p runthrough-bench -p runthrough-launch)"
    (cd "$root" && cargo build --release -p runthrough-bench -p runthrough-launch) >&2 ||
        die "build failed"
fi
rtrun=$target/release/rtrun
prog=$target/release/ft_detect
[[ -x "$rtrun" && -x "$prog" ]] || die "missing $rtrun or $prog (build first)"

stamp=$(date +%Y-%m-%d-%H%M%S)
outdir=$here/out
rawdir=$outdir/raw/ft_detect-$stamp
mkdir -p "$rawdir"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

# One configuration: REPS jobs, then one aggregated row (or a row of n/a).
row() { # mode ranks timeout
    local mode=$1 n=$2 to=$3 rep victim out ft_opts=()
    [[ -n "$period" ]] && ft_opts+=(--ft-period "$period")
    [[ $to != default ]] && ft_opts+=(--ft-timeout "$to")
    for ((rep = 1; rep <= reps; rep++)); do
        victim=$((1 + (rep - 1) % (n - 1)))
        out=$rawdir/$mode-n$n-$to-$rep.txt
        log "mode $mode, $n ranks, timeout $to: job $rep/$reps (victim $victim)"
        # rtrun's own exit status reflects the failure (R7); the row is what counts.
        timeout "$((job_timeout + 10))" "$rtrun" -n "$n" "${ft_opts[@]}" --timeout "${job_timeout}s" \
            -- "$prog" --mode "$mode" -v "$victim" >"$out" 2>"$out.err" || true
        grep -q '^[0-9]' "$out" || log "job failed (see $out.err)"
    done
    # Rows: ranks period timeout min avg max. Aggregate over the jobs.
    cat "$rawdir/$mode-n$n-$to-"*.txt | awk -v n="$n" '
        $1 ~ /^[0-9]+$/ && NF == 6 {
            k++; p = $2; t = $3; s += $5
            if (k == 1 || $4 < lo) lo = $4
            if (k == 1 || $6 > hi) hi = $6
        }
        END {
            if (k == 0) { printf "%-7s%12s%13s%16s%16s%16s\n", n, "n/a", "n/a", "n/a", "n/a", "n/a"; exit }
            printf "%-7s%12.2f%13.2f%16.2f%16.2f%16.2f\n", n, p, t, lo, s / k, hi
        }'
}

report=$outdir/ft_detect-$stamp.md
{
    echo "# runthrough failure detection (ft_detect), $stamp"
    echo "# $reps jobs per row, the victim rotating over ranks 1..N-1; min/avg/max over all survivors."
    echo "# Host: $(nproc) CPUs, Linux $(uname -r); load average before: $load_before."
    for mode in $modes; do
        echo
        if [[ $mode == kill ]]; then
            echo "# Mode kill: the victim SIGKILLs itself (launcher exit notice or detector, whichever first)"
        else
            echo "# Mode stop: the victim SIGSTOPs itself (hung, not exited: only the ring detector can tell)"
        fi
        echo "# Ranks  Period(ms)  Timeout(ms)  Detect-min(ms)  Detect-avg(ms)  Detect-max(ms)"
        for to in $timeouts; do
            for n in $ranks_list; do
                row "$mode" "$n" "$to"
            done
        done
    done
    echo
    echo "# Load average after: $(cut -d' ' -f1-3 /proc/loadavg). Raw output: bench/out/raw/ft_detect-$stamp/"
} | tee "$report"
log "wrote $report"
