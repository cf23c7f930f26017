#!/usr/bin/env bash
# Run mpi4py's test suite module by module against the libmpi_abi.so.1 in DIR.
#
#   abi/mpi4py/run.sh --lib DIR --launcher CMD -n N [--timeout S] [--out OUTDIR]
#                     [--venv VENV] [modules...]
#
# CMD is the launcher without -n (e.g. bench/venvs/mpich/bin/mpiexec, or target/release/rtrun);
# each module runs as `CMD -n N python rank_runner.py ...` with LD_LIBRARY_PATH=DIR, under a
# per-module timeout (default 120 s). Modules default to every test/test_*.py. Prints a header
# (the library actually loaded, from /proc/self/maps, and its version) and one line per module:
#
#   module pass fail skip error [note]
#
# Per-test outcomes are merged over ranks: a test is an error if it errored on any rank, else a
# fail if it failed on any rank, else skip if skipped on rank 0 (or any rank), else pass
# (expected failures count as skip, unexpected successes as fail). A rank that left no result
# (crash, abort, hang/timeout) adds 1 error and a note (TIMEOUT / rc=..., missing ranks).
# Logs: OUTDIR (default bench/out/mpi4py/<lib-name>-n<N>) holds each rank's unittest -v log.
# VENV: the venv abi/mpi4py/build.sh built mpi4py into (default bench/venvs/mpi4py-abi; its
# MPI4PY_VENV), with the test suite in VENV/mpi4py-test.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=$root/bench/venvs/mpi4py-abi
lib= launcher= np= timeout_s=120 out=
mods=()
while [ $# -gt 0 ]; do
  case "$1" in
    --lib) lib=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    -n|--np) np=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --venv) venv=$2; shift 2 ;;
    -h|--help) sed -n 2,20p "$0"; exit 0 ;;
    *) mods+=("${1%.py}"); shift ;;
  esac
done
[ -n "$lib" ] && [ -n "$launcher" ] && [ -n "$np" ] || { sed -n 2,20p "$0" >&2; exit 2; }
testdir=$venv/mpi4py-test
lib=$(cd "$lib" && pwd)
[ -e "$lib/libmpi_abi.so.1" ] || { echo "run.sh: no $lib/libmpi_abi.so.1" >&2; exit 2; }
[ -x "$venv/bin/python" ] && [ -d "$testdir" ] || { echo "run.sh: run abi/mpi4py/build.sh first" >&2; exit 2; }
if [ ${#mods[@]} -eq 0 ]; then
  for f in "$testdir"/test_*.py; do mods+=("$(basename "${f%.py}")"); done
fi
[ -n "$out" ] || out=$root/bench/out/mpi4py/$(basename "$(dirname "$lib")")-n$np
mkdir -p "$out"
out=$(cd "$out" && pwd)

export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PYTHONUNBUFFERED=1
export PYTHONPATH=$testdir${PYTHONPATH:+:$PYTHONPATH}  # spawned children (test_util_pool, futures) import test modules
export PYTHONDONTWRITEBYTECODE=1
py=$venv/bin/python
read -r -a launch <<< "$launcher"

# Which libmpi_abi.so.1 is really loaded? (With MPICH's wrapper the extension has no
# RPATH/RUNPATH: build.sh strips it; LD_LIBRARY_PATH decides. Another wrapper's DT_RUNPATH
# is kept, and LD_LIBRARY_PATH overrides it.)
probe=$(timeout -k 5 60 "${launch[@]}" -n 1 "$py" -c '
from mpi4py import MPI
lib = [l.split()[-1] for l in open("/proc/self/maps") if "libmpi_abi" in l][0]
import os
print(os.path.realpath(lib), "|", MPI.Get_library_version().splitlines()[0].strip(), "| MPI", MPI.Get_version(), "| ABI", MPI.Get_abi_version() if hasattr(MPI, "Get_abi_version") else "?")
' 2>&1 | tail -1)
echo "# library: $probe"
want=$(realpath "$lib/libmpi_abi.so.1")
case "$probe" in
  "$want "*) ;;
  *) echo "# WARNING: expected $want to be loaded" ;;
esac
echo "# launcher: $launcher -n $np   timeout: ${timeout_s}s   logs: $out"
printf '%-24s %5s %5s %5s %5s\n' "# module" pass fail skip error

for m in "${mods[@]}"; do
  rm -f "$out/$m".rank*.json "$out/$m".rank*.log
  t0=$(date +%s)
  timeout -k 10 "$timeout_s" "${launch[@]}" -n "$np" "$py" "$here/rank_runner.py" "$testdir" "$m" "$out" \
    > "$out/$m.stdout" 2>&1
  rc=$?
  # ranks that outlived their launcher (e.g. hydra puts each rank in its own process group,
  # so timeout's group kill misses them): kill them by pid, matched on this run's exact args
  left=$(pgrep -f "rank_runner.py $testdir $m $out\$" || true)
  [ -n "$left" ] && { kill -9 $left 2>/dev/null || true; [ $rc = 0 ] && rc=125; }
  t1=$(date +%s)
  "$py" - "$out" "$m" "$np" "$rc" "$((t1 - t0))" <<'EOF'
import json, os, sys
out, m, np, rc, secs = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
ranks = {}
for r in range(np):
    p = os.path.join(out, f"{m}.rank{r}.json")
    if os.path.exists(p):
        with open(p) as f:
            ranks[r] = json.load(f)["tests"]
order = {"error": 4, "fail": 3, "xpass": 3, "skip": 1, "xfail": 1, "pass": 0}
merged = {}
for r, tests in ranks.items():
    for t, s in tests.items():
        if order[s] > order.get(merged.get(t), -1):
            merged[t] = s
c = {"pass": 0, "fail": 0, "skip": 0, "error": 0}
for s in merged.values():
    c[{"xfail": "skip", "xpass": "fail"}.get(s, s)] += 1
missing = [r for r in range(np) if r not in ranks]
notes = []
if missing:
    c["error"] += 1
    notes.append("missing rank(s) " + ",".join(map(str, missing)))
if rc == 124 or rc == 137:
    notes.append("TIMEOUT")
elif rc == 125:
    notes.append("stray ranks killed")
elif rc != 0:
    notes.append(f"rc={rc}")
notes.append(f"{secs}s")
print(f"{m:<24} {c['pass']:5d} {c['fail']:5d} {c['skip']:5d} {c['error']:5d}  {' '.join(notes)}")
EOF
done
