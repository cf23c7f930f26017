#!/usr/bin/env bash
# Runs a command with this machine loaded by other work: FACTOR x cores processes spinning
# on the CPU for the whole run (what a shared CI runner or an oversubscribed node does to
# a job), stopped when the command ends, whatever happened. Exit status: the command's.
#
#   bash ci-containers/loaded.sh 8 make test      # 16 spinners on 2 cores
set -euo pipefail
factor=${1:?usage: loaded.sh FACTOR COMMAND...}
shift
n=$(( factor * $(nproc) ))
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null || true; wait "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT INT TERM
for _ in $(seq "$n"); do
  sh -c 'while :; do :; done' &
  pids+=($!)
done
echo "loaded.sh: $n spinning processes on $(nproc) cores; running: $*" >&2
start=$(date +%s)
set +e
"$@"
rc=$?
set -e
echo "loaded.sh: exit $rc after $(( $(date +%s) - start )) s (load average: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
exit $rc
