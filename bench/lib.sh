# Shared helpers of the bench scripts (sourced; set `prog` first).
# shellcheck shell=bash

die() {
    echo "$prog: $*" >&2
    exit 1
}

# Prints the calling script's header comment (its usage) and exits: for -h / --help.
show_help() {
    sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 0
}

log() {
    echo "$prog: $*" >&2
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck disable=SC2034  # used by the scripts that source this file
target=${CARGO_TARGET_DIR:-$root/target}

# "median min max count" of the numbers on stdin, one per line, each printed with FMT
# (default %.2f); nothing when there are none.
median_min_max() { # [fmt]
    sort -g | awk -v f="${1:-%.2f}" '{ v[NR] = $1 } END {
        if (!NR) exit
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf f " " f " " f " %d", m, v[1], v[NR], NR }'
}

# Merges the rows of ROWS (CSV without a header, the columns of bench/data/*.csv) into
# the data file FILE: the rows of FILE that share the values of the KEY columns
# (numbers 0..8) with a new row are replaced; the result is sorted and written with the
# header. The data `make plots` draws.
merge_csv() { # file rows key-columns...
    mkdir -p "$(dirname "$1")"
    python3 - "$@" <<'PY'
import csv, sys
path, new, keys = sys.argv[1], sys.argv[2], [int(k) for k in sys.argv[3:]]
header = ["test", "ranks", "size", "impl", "config", "median", "min", "max", "unit"]
with open(new, newline="", encoding="utf-8") as f:
    fresh = [r for r in csv.reader(f) if r]
key = lambda r: tuple(r[k] for k in keys)
replaced = {key(r) for r in fresh}
try:
    with open(path, newline="", encoding="utf-8") as f:
        old = [r for r in list(csv.reader(f))[1:] if r and key(r) not in replaced]
except FileNotFoundError:
    old = []
order = ["latency", "bw", "bibw", "mbw_mr", "barrier", "bcast", "reduce", "allreduce",
         "allgather", "alltoall", "detect_kill", "detect_stop", "startup"]
rank = lambda t: order.index(t) if t in order else len(order)
rows = sorted(old + fresh, key=lambda r: (r[4], rank(r[0]), int(r[1]), int(r[2]), r[3]))
with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
PY
}
