#!/usr/bin/env bash
# Check that the mpi4py build (build.sh + pympi_ulfm.h) routes Comm.Revoke/Is_revoked/Agree/
# Iagree/Shrink/Get_failed/Ack_failed to MPIX_* when the loaded library has them, and falls
# back to mpi4py's stock behaviour when it does not -- using MPICH's libmpi_abi.so.1 plus an
# LD_PRELOADed stub library that defines the MPIX_ functions with recognisable results.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
mpich=${MPICH_VENV:-$root/bench/venvs/mpich}
py=$root/bench/venvs/mpi4py-abi/bin/python
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/shim.c" <<'C'
#include <mpi.h>
#include <stdio.h>
int MPIX_Comm_revoke(MPI_Comm c) { (void)c; fprintf(stderr, "shim: MPIX_Comm_revoke\n"); return MPI_SUCCESS; }
int MPIX_Comm_agree(MPI_Comm c, int *flag) { (void)c; fprintf(stderr, "shim: MPIX_Comm_agree(%d)\n", *flag); *flag = 42; return MPI_SUCCESS; }
int MPIX_Comm_shrink(MPI_Comm c, MPI_Comm *n) { fprintf(stderr, "shim: MPIX_Comm_shrink\n"); return MPI_Comm_dup(c, n); }
int MPIX_Comm_is_revoked(MPI_Comm c, int *f) { (void)c; *f = 7; return MPI_SUCCESS; }
int MPIX_Comm_get_failed(MPI_Comm c, MPI_Group *g) { return MPI_Comm_group(c, g); }
int MPIX_Comm_ack_failed(MPI_Comm c, int n, int *a) { (void)c; *a = n + 1000; return MPI_SUCCESS; }
int MPIX_Comm_iagree(MPI_Comm c, int *flag, MPI_Request *r) { *flag = 43; return MPI_Ibarrier(c, r); }
C
cat > "$tmp/t.py" <<'PY'
from mpi4py import MPI
c = MPI.COMM_WORLD
print("classes", MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING, MPI.ERR_REVOKED)
try:
    c.Revoke(); print("revoke ok")
except NotImplementedError:
    print("revoke NotImplementedError")
print("is_revoked", c.Is_revoked())
print("agree", c.Agree(1))
s = c.Shrink(); print("shrink size", s.Get_size()); s.Free()
g = c.Get_failed(); print("get_failed size", g.Get_size()); g.Free()
print("ack", c.Ack_failed(3))
import array
f = array.array('i', [1]); r = c.Iagree(f); r.Wait(); print("iagree", f[0])
PY
"$mpich/bin/mpicc_abi" -shared -fPIC -o "$tmp/libshim.so" "$tmp/shim.c"
with=$(LD_LIBRARY_PATH=$mpich/lib LD_PRELOAD=$tmp/libshim.so "$py" "$tmp/t.py" 2>/dev/null)
without=$(LD_LIBRARY_PATH=$mpich/lib "$py" "$tmp/t.py" 2>/dev/null)
want_with='classes 101 102 103
revoke ok
is_revoked True
agree 42
shrink size 1
get_failed size 1
ack 1003
iagree 43'
want_without='classes 101 102 103
revoke NotImplementedError
is_revoked False
agree 1
shrink size 1
get_failed size 0
ack 0
iagree 1'
ok=0
[ "$with" = "$want_with" ] || { echo "with MPIX_ stubs:"; echo "$with"; ok=1; }
[ "$without" = "$want_without" ] || { echo "without MPIX_ (stock fallbacks):"; echo "$without"; ok=1; }
[ $ok = 0 ] && echo "check_ulfm_plumbing: ok (MPIX_ calls used when present, stock fallbacks otherwise)"
exit $ok
