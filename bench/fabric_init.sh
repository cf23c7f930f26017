#!/usr/bin/env bash
# fabric_init.sh - what loading Debian's libfabric costs a process (start-up time).
#
# A job over the fabric opens libfabric in every rank. This measures that cost alone,
# with libfabric's own `fi_info -p tcp` (load the library, fi_getinfo for tcp, exit):
#   1. one process: wall, user and system time, median (min–max) of RUNS runs;
#   2. N processes at once (default 8, as an 8-rank job on this host): the wall time
#      until the last exits — the floor of any 8-rank job whose ranks all open the
#      fabric, before any communication;
#   3. with strace (when installed): where the time goes — the sleeps of the
#      libinfinipath constructor (a TSC calibration: usleep(125) until 100 ms passed)
#      and the reads of /proc/kallsyms by the verbs provider's initialisation, which
#      fi_getinfo runs whatever FI_PROVIDER says.
#
#   bench/fabric_init.sh [--runs N] [--procs N]    (defaults 7 and 8)
set -euo pipefail

prog=fabric_init.sh
# shellcheck source=bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
runs=7
procs=8
while [[ $# -gt 0 ]]; do
    case "$1" in
        --runs) runs=${2:?}; shift ;;
        --procs) procs=${2:?}; shift ;;
        -h | --help) show_help ;;
        *) die "unknown option '$1' (see --help)" ;;
    esac
    shift
done
command -v fi_info >/dev/null || die "fi_info not found (libfabric-bin; ci-containers/install-deps.sh)"

now() { date +%s.%N; }
export FI_TCP_IFACE=lo
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
TIMEFORMAT='%R %U %S'
for ((r = 1; r <= runs; r++)); do
    { time fi_info -p tcp >/dev/null 2>&1; } 2>>"$out/one"
    start=$(now)
    for ((p = 0; p < procs; p++)); do fi_info -p tcp >/dev/null 2>&1 & done
    wait
    echo "$(now) $start" | awk '{ printf "%.3f\n", $1 - $2 }' >>"$out/many"
done

cell() { median_min_max %.3f | awk '{ printf "%s (%s–%s)", $1, $2, $3 }'; }
echo "### libfabric's start-up cost per process ($(date -u +%Y-%m-%d-%H%M%S))"
echo
echo "libfabric $(fi_info --version 2>/dev/null | awk '/libfabric:/ { print $2 }'), $(nproc) CPUs;"
echo "median (min–max) of $runs runs, seconds; \`bash bench/fabric_init.sh --runs $runs --procs $procs\`."
echo
echo "| measure | seconds |"
echo "|---|---:|"
echo "| \`fi_info -p tcp\`, one process: wall | $(awk '{ print $1 }' "$out/one" | cell) |"
echo "| … user CPU | $(awk '{ print $2 }' "$out/one" | cell) |"
echo "| … system CPU | $(awk '{ print $3 }' "$out/one" | cell) |"
echo "| $procs processes at once: wall until the last exits | $(cell <"$out/many") |"
if command -v strace >/dev/null; then
    strace -f -o "$out/trace" -e trace=clock_nanosleep,openat fi_info -p tcp >/dev/null 2>&1 || true
    sleeps=$(grep -c 'clock_nanosleep' "$out/trace" || true)
    kall=$(grep -c '"/proc/kallsyms"' "$out/trace" || true)
    echo
    echo "strace of one \`fi_info -p tcp\`: $sleeps sleeps (clock_nanosleep), $kall opens of /proc/kallsyms."
fi
