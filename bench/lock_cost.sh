#!/usr/bin/env bash
# lock_cost.sh - is the engine lock the cost of small messages? (issue 17, item 2)
#
# Builds the OSU binaries a second time from this commit with
# bench/experiments/unlocked-p2p.patch applied: the small-message send, the receive start
# and the wait reach the engine without its lock (`Mutex::data_ptr`). That is unsound in
# general, and this script makes it race-free: both variants run with the failure
# detector off and the progress thread parked (RT_FT=0, RT_WATCH_MS huge), so the
# benchmark's one thread is the only one touching the engine. Then it runs, interleaved
# run by run (locked, unlocked, locked, ...), on 2 ranks bound to cores:
#   osu_mbw_mr -m 8:8 (1 pair), osu_bw -m 8:8, osu_latency -m 8:8
# and prints the median (min–max) of each and the ratio unlocked / locked. A ratio near
# 1.0 means the lock is not what those figures pay for.
#
#   bench/lock_cost.sh [--runs N]      (default 7)
#
# Needs `cargo build --release -p runthrough-bench -p runthrough-launch` (the locked
# variant, and rtrun for both); builds the unlocked one in target/lock-cost.
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

tests=(mbw_mr bw latency)
for b in rtrun "${tests[@]/#/osu_}"; do
    [[ -x $target/release/$b ]] || die "missing $target/release/$b: build the workspace first"
done

# The unlocked variant: a worktree of HEAD with the patch, built in its own target dir.
tree=$(mktemp -d)
cleanup() {
    git -C "$root" worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"
}
trap cleanup EXIT
git -C "$root" worktree add --detach --force "$tree" HEAD >/dev/null 2>&1 || die "git worktree add failed"
git -C "$tree" apply "$here/experiments/unlocked-p2p.patch" || die "the patch does not apply to HEAD"
log "building the unlocked variant (target/lock-cost)"
CARGO_TARGET_DIR=$root/target/lock-cost cargo build --quiet --release --manifest-path "$tree/Cargo.toml" \
    -p runthrough-bench --bin osu_mbw_mr --bin osu_bw --bin osu_latency
unlocked=$root/target/lock-cost/release
locked=$target/release

# (median_min_max prints no newline, so `read` reports EOF: hence `|| true` below.)
# One run of variant $1's test $2; prints the 8 B figure (the last column of its row).
run_one() { # dir test
    local opts=(-m 8:8)
    [[ $2 == mbw_mr ]] && opts+=(-i 20000 -x 200)
    RT_FT=0 RT_WATCH_MS=100000000 timeout 60 "$target/release/rtrun" -n 2 --bind-to core \
        -- "$1/osu_$2" "${opts[@]}" 2>/dev/null | awk '$1 == 8 { v = $NF } END { if (v != "") print v }'
}

out=$(mktemp -d)
for ((r = 1; r <= runs; r++)); do
    log "run $r/$runs"
    for t in "${tests[@]}"; do
        run_one "$locked" "$t" >>"$out/$t.locked" || true
        run_one "$unlocked" "$t" >>"$out/$t.unlocked" || true
    done
done

echo "### The engine lock on the small-message path ($(date -u +%Y-%m-%d-%H%M%S))"
echo
echo "Median (min–max) of $runs runs, interleaved run by run, 2 ranks bound to cores,"
echo "RT_FT=0 RT_WATCH_MS=100000000 for both; \`bash bench/lock_cost.sh --runs $runs\`."
echo
echo "| 8 B | locked (main) | unlocked (patch) | unlocked / locked |"
echo "|---|---:|---:|---:|"
for t in "${tests[@]}"; do
    case $t in
        mbw_mr) what="osu_mbw_mr, 1 pair (million messages/s)" ;;
        bw) what="osu_bw (MB/s)" ;;
        latency) what="osu_latency (µs)" ;;
    esac
    # osu_mbw_mr's last column is messages/s: shown in millions.
    scale=1
    [[ $t == mbw_mr ]] && scale=1000000
    read -r lm lmin lmax _ < <(awk -v s=$scale '{ print $1 / s }' "$out/$t.locked" | median_min_max) || true
    read -r um umin umax _ < <(awk -v s=$scale '{ print $1 / s }' "$out/$t.unlocked" | median_min_max) || true
    ratio=$(awk -v a="$um" -v b="$lm" 'BEGIN { printf "%.2fx", a / b }')
    echo "| $what | $lm ($lmin–$lmax) | $um ($umin–$umax) | $ratio |"
done
rm -rf "$out"
