#!/usr/bin/env bash
# ft_overhead.sh - failure-free cost of runthrough's failure detector.
#
# Runs osu_latency -m 8:8 (2 ranks) and osu_allreduce -m 8:8 (--ranks N, default 2)
# with the detector on (rtrun's defaults) and off (rtrun --no-ft), interleaved in one
# run (on/off order alternating between rounds so drift hits both alike), and
# reports the best (lowest) latency of each side over RUNS rounds and the relative
# overhead (on - off) / off. Target: <= 3 % at 8 B. Printed and written to
# bench/out/ft_overhead-<date>.md.
#
# Environment: CARGO_TARGET_DIR (default <workspace>/target), RT_BENCH_BIND
# (core|none, default core; none when ranks exceed CPUs), RT_BENCH_TIMEOUT (seconds
# per run, default 300).

set -euo pipefail

usage() {
    cat <<EOF
usage: bench/ft_overhead.sh [-r RUNS] [--ranks N] [-i ITERS] [-x WARMUP] [--no-build]
  -r RUNS      interleaved rounds, the best of each side is reported (default 5)
  --ranks N    ranks of osu_allreduce (default 2; osu_latency always runs on 2)
  -i ITERS     timed iterations per run (default: OSU's, 10000 / 1000)
  -x WARMUP    warm-up iterations per run (default: OSU's)
  --no-build   do not run cargo; use the existing binaries
  -h, --help   this help
EOF
}

prog=ft_overhead.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bind=${RT_BENCH_BIND:-core}
run_timeout=${RT_BENCH_TIMEOUT:-300}

runs=5
ranks=2
iter_opts=()
build=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        -r | --ranks | -i | -x)
            [[ $# -ge 2 ]] || { usage >&2; exit 2; }
            case "$1" in
                -r) runs=$2 ;;
                --ranks) ranks=$2 ;;
                -i | -x) iter_opts+=("$1" "$2") ;;
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
[[ "$runs" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
[[ "$ranks" =~ ^[0-9]+$ && $ranks -ge 2 ]] || { usage >&2; exit 2; }
case "$bind" in
    core | none) ;;
    *) die "RT_BENCH_BIND must be core or none, not '$bind'" ;;
esac

if [[ $build -eq 1 ]]; then
    log "building (cargo build --release -p runthrough-bench -p runthrough-launch)"
    (cd "$root" && cargo build --release -p runthrough-bench -p runthrough-launch) >&2 ||
        die "build failed"
fi
rtrun=$target/release/rtrun
for b in rtrun osu_latency osu_allreduce; do
    [[ -x "$target/release/$b" ]] || die "missing $target/release/$b (build first)"
done

stamp=$(date +%Y-%m-%d-%H%M%S)
outdir=$here/out
rawdir=$outdir/raw/ft_overhead-$stamp
mkdir -p "$rawdir"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
cpus=$(nproc)

# One run; prints the 8-byte latency (or nothing when the run failed).
measure() { # test ranks on|off round
    local t=$1 np=$2 ft=$3 out opts=()
    out=$rawdir/$t-n$np-$ft-$4.txt
    [[ $ft == off ]] && opts+=(--no-ft)
    if [[ $bind == core && $np -le $cpus ]]; then
        opts+=(--bind-to core)
    fi
    timeout "$((run_timeout + 10))" "$rtrun" -n "$np" "${opts[@]}" --timeout "${run_timeout}s" \
        -- "$target/release/osu_$t" -m 8:8 "${iter_opts[@]}" >"$out" 2>"$out.err" ||
        log "osu_$t ($ft, round $4) failed (see $out.err)"
    awk '$1 == 8 && NF == 2 { print $2 }' "$out"
}

declare -A best
for ((r = 1; r <= runs; r++)); do
    for t in latency allreduce; do
        np=2
        [[ $t == allreduce ]] && np=$ranks
        order=(on off)
        ((r % 2 == 0)) && order=(off on)
        for ft in "${order[@]}"; do
            log "round $r/$runs: osu_$t on $np ranks, detector $ft"
            v=$(measure "$t" "$np" "$ft" "$r")
            [[ -n "$v" ]] || continue
            key=$t-$ft
            if [[ -z "${best[$key]:-}" ]] || awk -v a="$v" -v b="${best[$key]}" 'BEGIN { exit !(a < b) }'; then
                best[$key]=$v
            fi
        done
    done
done

report=$outdir/ft_overhead-$stamp.md
{
    echo "# runthrough failure-detector overhead, $stamp"
    echo "# Best of $runs interleaved rounds, 8-byte latency in us; detector on = rtrun defaults, off = rtrun --no-ft."
    echo "# Host: $cpus CPUs, Linux $(uname -r); binding: $bind; load average before: $load_before."
    echo "# Test           Ranks    FT on(us)   FT off(us)   Overhead(%)"
    for t in latency allreduce; do
        np=2
        [[ $t == allreduce ]] && np=$ranks
        awk -v t="osu_$t" -v n="$np" -v on="${best[$t-on]:-}" -v off="${best[$t-off]:-}" 'BEGIN {
            ov = (on == "" || off == "" || off + 0 == 0) ? "n/a" : sprintf("%+.1f", (on - off) / off * 100)
            printf "%-17s%5s%13s%13s%14s\n", t, n, on == "" ? "n/a" : on, off == "" ? "n/a" : off, ov
        }'
    done
    echo "# Load average after: $(cut -d' ' -f1-3 /proc/loadavg). Raw output: bench/out/raw/ft_overhead-$stamp/"
} | tee "$report"
log "wrote $report"
