#!/usr/bin/env bash
# compare_builds.sh - runthrough against another build of itself, interleaved run by run.
#
# usage: bench/compare_builds.sh BASE_TARGET_DIR [NEW_TARGET_DIR] [RUNS]
#
# Runs osu_latency at 8 B and osu_bw at 1 MiB (2 ranks, shared memory, --bind-to core)
# from BASE_TARGET_DIR/release and NEW_TARGET_DIR/release (default: this workspace's
# target), alternating A B A B ... RUNS times each (default 11), and prints each side's
# median with min-max and the ratio new/base of the medians. Used to check that a change
# keeps today's speed (within 2 %). Build both first (cargo build --release
# -p runthrough-bench --bins -p runthrough-launch). RT_BUILD_SPECS replaces the two
# measurements: comma-separated "TEST SIZE" pairs, TEST one of latency, bw, bibw, or
# allreduceN (osu_allreduce at N ranks, average latency)
# (e.g. RT_BUILD_SPECS="latency 65536,bw 65536,allreduce4 1024").
set -euo pipefail
base=${1:?usage: compare_builds.sh BASE_TARGET_DIR [NEW_TARGET_DIR] [RUNS]}
new=${2:-$(cd "$(dirname "$0")/.." && pwd)/target}
runs=${3:-11}

# Nothing fails in these runs: a generous detector timeout keeps a busy machine's
# scheduling from being taken for a hung rank (the same for both builds).
export RT_FT_TIMEOUT_MS=${RT_FT_TIMEOUT_MS:-5000}

one() { # target test size -> prints the figure (a failed run is retried, twice at most)
    local t=$1 test=$2 size=$3 opts v tries
    for tries in 1 2 3; do
        v=$(one_try "$t" "$test" "$size" || true)
        if [[ -n $v ]]; then
            echo "$v"
            return
        fi
        echo "compare_builds: $t osu_$test $size failed (try $tries)" >&2
    done
    echo "compare_builds: giving up on $t osu_$test $size" >&2
    exit 1
}

one_try() { # target test size
    local t=$1 test=$2 size=$3 opts
    case $test in
        latency) opts=(-m "$size:$size" -i 20000 -x 2000) ;;
        bw | bibw) opts=(-m "$size:$size" -i 200 -x 20) ;;
        allreduce*) opts=(-m "$size:$size" -i 5000 -x 500) ;;
    esac
    local n=2 prog=$test
    if [[ $test == allreduce* ]]; then n=${test#allreduce} prog=allreduce; fi
    # Ranks outnumbering cores cannot be bound one per core.
    local bind=core
    ((n > $(nproc))) && bind=none
    timeout 120 "$t/release/rtrun" -n "$n" --bind-to "$bind" --timeout 100s -- "$t/release/osu_$prog" "${opts[@]}" |
        awk -v s="$size" '$1 == s { print $2 }'
}

stats() { # values... -> "median min max"
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf "%.3f %.3f %.3f\n", m, v[1], v[NR] }'
}

echo "# compare_builds: base=$base new=$new runs=$runs ($(date -u +%FT%TZ), $(nproc) cpus)"
echo "| test | size | base median (min-max) | new median (min-max) | new/base |"
echo "|---|---|---|---|---|"
IFS=, read -r -a specs <<<"${RT_BUILD_SPECS:-latency 8,bw 1048576}"
for spec in "${specs[@]}"; do
    read -r test size <<<"$spec"
    a=() b=()
    for ((i = 0; i < runs; i++)); do
        a+=("$(one "$base" "$test" "$size")")
        b+=("$(one "$new" "$test" "$size")")
    done
    read -r am alo ahi <<<"$(stats "${a[@]}")"
    read -r bm blo bhi <<<"$(stats "${b[@]}")"
    ratio=$(awk -v x="$bm" -v y="$am" 'BEGIN { printf "%.3f", x / y }')
    unit=$([[ $test == latency || $test == allreduce* ]] && echo us || echo MB/s)
    echo "| osu_$test | $size | $am $unit ($alo-$ahi) | $bm $unit ($blo-$bhi) | $ratio |"
done
