#!/usr/bin/env bash
# lock_cost.sh - what the engine lock costs small messages (biased against plain), measured
# in one binary.
#
# The engine lock is biased toward the thread that called init (engine/src/lock.rs): that
# thread enters with a store and a load, the progress thread and any other thread with
# the inner mutex and membarrier(2). RT_ENGINE_LOCK_BIAS=0 turns the bias off, so every
# thread takes the inner mutex (two atomic read-modify-writes a call, as a plain mutex).
# This script runs both, interleaved run by run (biased, plain, biased, ...), on 2 ranks
# bound to cores with the detector and the progress thread running as usual:
#   osu_mbw_mr -m 8:8 (1 pair), osu_bw -m 8:8, osu_latency -m 8:8,
#   osu_bw -m 1MiB, osu_bibw -m 4MiB (to show long messages do not pay for it)
# and prints the median (min–max) of each and the ratio biased / plain.
#
#   bench/lock_cost.sh [--runs N]      (default 7)
#
# Needs `cargo build --release -p runthrough-bench -p runthrough-launch`.
set -euo pipefail

prog=lock_cost.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
runs=7
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs=${2:?}; shift ;;
        -h | --help) show_help ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done

# test:size pairs
cases=(mbw_mr:8 bw:8 latency:8 bw:1048576 bibw:4194304)
for b in rtrun osu_mbw_mr osu_bw osu_latency osu_bibw; do
    [[ -x $target/release/$b ]] || die "missing $target/release/$b: build the workspace first"
done
# Nothing fails in these runs: a generous detector timeout keeps a busy host's
# scheduling from being taken for a hung rank (the same for both variants).
export RT_FT_TIMEOUT_MS=${RT_FT_TIMEOUT_MS:-5000}

# One run of test $2 at size $3 with RT_ENGINE_LOCK_BIAS=$1; prints its figure (the last
# column of the size's row).
run_one() { # bias test size
    local opts=(-m "$3:$3")
    case $2 in
        mbw_mr | bw) [[ $3 -le 64 ]] && opts+=(-i 20000 -x 1000) || opts+=(-i 200 -x 20) ;;
        latency) opts+=(-i 100000 -x 1000) ;;
        bibw) opts+=(-i 100 -x 10) ;;
    esac
    RT_ENGINE_LOCK_BIAS=$1 timeout 120 "$target/release/rtrun" -n 2 --bind-to core \
        -- "$target/release/osu_$2" "${opts[@]}" 2>/dev/null | awk -v s="$3" '$1 == s { v = $NF } END { if (v != "") print v }'
}

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for ((r = 1; r <= runs; r++)); do
    log "run $r/$runs"
    for c in "${cases[@]}"; do
        run_one 1 "${c%%:*}" "${c##*:}" >>"$out/$c.biased" || true
        run_one 0 "${c%%:*}" "${c##*:}" >>"$out/$c.plain" || true
    done
done

echo "### The engine lock, biased and plain ($(date -u +%Y-%m-%d-%H%M%S))"
echo
echo "Median (min–max) of $runs runs, interleaved run by run, 2 ranks bound to cores,"
echo "detector and progress thread on; \`bash bench/lock_cost.sh --runs $runs\`. Host: $(nproc) CPUs,"
echo "Linux $(uname -r); load average before: $load_before, after: $(cut -d' ' -f1-3 /proc/loadavg)."
echo
echo "| test | biased (default) | plain (RT_ENGINE_LOCK_BIAS=0) | biased / plain |"
echo "|---|---:|---:|---:|"
for c in "${cases[@]}"; do
    t=${c%%:*} size=${c##*:}
    case $t in
        mbw_mr) what="osu_mbw_mr $size B, 1 pair (million messages/s)" ;;
        latency) what="osu_latency $size B (µs)" ;;
        *) what="osu_$t $size B (MB/s)" ;;
    esac
    # osu_mbw_mr's last column is messages/s: shown in millions.
    scale=1
    [[ $t == mbw_mr ]] && scale=1000000
    # (median_min_max prints no newline, so `read` reports EOF: hence `|| true`.)
    read -r bm bmin bmax _ < <(awk -v s=$scale '{ print $1 / s }' "$out/$c.biased" | median_min_max) || true
    read -r pm pmin pmax _ < <(awk -v s=$scale '{ print $1 / s }' "$out/$c.plain" | median_min_max) || true
    ratio=$(awk -v a="${bm:-0}" -v b="${pm:-0}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "n/a" }')
    echo "| $what | ${bm:-n/a} (${bmin:-}–${bmax:-}) | ${pm:-n/a} (${pmin:-}–${pmax:-}) | $ratio |"
done
