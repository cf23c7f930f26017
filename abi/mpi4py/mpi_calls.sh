#!/usr/bin/env bash
# Which MPI functions does mpi4py call from the libmpi_abi.so.1 in DIR, per test module?
#
#   abi/mpi4py/mpi_calls.sh --lib DIR --launcher CMD -n N [--out OUTDIR] [import|MODULE...]
#
# Loads mpi4py.MPI with RTLD_LAZY (sys.setdlopenflags) so that the dynamic linker binds a
# function only when it is first called, and records the bindings with LD_DEBUG=bindings.
# "import" (the default) means `from mpi4py import MPI` plus normal exit (Finalize).
# Prints, per module, the sorted list of MPI_/MPIX_ functions bound (union over ranks).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
venv=$root/bench/venvs/mpi4py-abi
testdir=$venv/mpi4py-test
lib= launcher= np=1 out=
mods=()
while [ $# -gt 0 ]; do
  case "$1" in
    --lib) lib=$2; shift 2 ;;
    --launcher) launcher=$2; shift 2 ;;
    -n) np=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) mods+=("${1%.py}"); shift ;;
  esac
done
[ -n "$lib" ] && [ -n "$launcher" ] || { sed -n 2,9p "$0" >&2; exit 2; }
[ ${#mods[@]} -gt 0 ] || mods=(import)
[ -n "$out" ] || out=$root/bench/out/mpi4py/calls-n$np
mkdir -p "$out"
out=$(cd "$out" && pwd)
read -r -a launch <<< "$launcher"
export LD_LIBRARY_PATH=$(cd "$lib" && pwd)
export PYTHONPATH=$testdir
unset LD_BIND_NOW
for m in "${mods[@]}"; do
  rm -f "$out/$m".bind.*
  if [ "$m" = import ]; then
    code='import os, sys; sys.setdlopenflags(os.RTLD_LAZY); from mpi4py import MPI'
  else
    code="import os, sys, runpy; sys.setdlopenflags(os.RTLD_LAZY); sys.argv=['rank_runner', '$testdir', '$m', '$out']; runpy.run_path('$here/rank_runner.py', run_name='__main__')"
  fi
  LD_DEBUG=bindings LD_DEBUG_OUTPUT="$out/$m.bind" timeout -k 5 180 \
    "${launch[@]}" -n "$np" "$venv/bin/python" -c "$code" > "$out/$m.calls.stdout" 2>&1
  fns=$(cat "$out/$m".bind.* 2>/dev/null | grep 'mpi4py/MPI\.' | grep 'libmpi_abi' \
        | grep -o "symbol \`[A-Za-z_0-9]*'" | sed "s/symbol \`//;s/'//" | grep -E '^P?MPIX?_' | sort -u)
  rm -f "$out/$m".bind.*
  echo "$fns" > "$out/$m.calls"
  echo "$m ($(echo "$fns" | grep -c .)): $(echo $fns)"
done
