"""ULFM through the MPI-5 ABI from mpi4py: survive a killed rank.

    rtrun -n 4 --kill 2@1s python ulfm_after_kill.py          # the launcher kills a rank
    rtrun -n 4 python ulfm_after_kill.py --die 2               # rank 2 SIGKILLs itself

Every rank runs a loop of ring exchanges (Sendrecv) and Allreduce on a duplicate of
COMM_WORLD with MPI.ERRORS_RETURN. When a peer dies, a survivor gets MPI.Exception with
error class MPI.ERR_PROC_FAILED (or ERR_PROC_FAILED_PENDING) and revokes the communicator;
the others then see MPI.ERR_REVOKED. All survivors then: Get_failed/Ack_failed on the
revoked communicator, Shrink it, Agree on the shrunk one (bitwise AND), check it has
size - nfailed members and that an Allreduce over it gives the sum of the survivors'
world ranks, and print `ulfm_after_kill: ok rank R size S` (R = world rank, S = size of the
shrunk communicator). Exit status 0 on success, 1 on a failed check (after printing
`ulfm_after_kill: FAIL rank R: why`), 2 when no failure was seen before --timeout.

Needs runthrough's libmpi_abi.so.1 (MPICH's has no ULFM: there Revoke raises
NotImplementedError). mpi4py must be built with abi/mpi4py/pympi_ulfm.h (build.sh).
"""
import argparse
import array
import os
import signal
import sys
import time

from mpi4py import MPI

FAILED = (MPI.ERR_PROC_FAILED, MPI.ERR_PROC_FAILED_PENDING)


def parse():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--die", type=int, default=None, metavar="RANK",
                   help="this world rank kills itself (SIGKILL) at iteration --die-at")
    p.add_argument("--die-at", type=int, default=3, metavar="IT",
                   help="iteration at which --die RANK kills itself (default 3)")
    p.add_argument("--expect-failed", type=int, default=1, metavar="K",
                   help="number of ranks expected to die (default 1)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="give up when no failure is seen within S seconds (default 60)")
    p.add_argument("--interval", type=float, default=0.01, metavar="S",
                   help="sleep between iterations (default 0.01 s)")
    return p.parse_args()


def fail(rank, why):
    print(f"ulfm_after_kill: FAIL rank {rank}: {why}", flush=True)
    sys.stdout.flush()
    os._exit(1)  # do not Finalize: the job is already broken


def main():
    args = parse()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    if size < 2:
        fail(rank, "needs at least 2 ranks")
    if args.die is not None and not 0 <= args.die < size:
        fail(rank, f"--die {args.die} out of range")

    comm = world.Dup()
    comm.Set_errhandler(MPI.ERRORS_RETURN)
    if comm.Is_revoked():
        fail(rank, "fresh communicator reports revoked")

    right, left = (rank + 1) % size, (rank - 1) % size
    sbuf = bytearray(8)
    rbuf = bytearray(8)
    t0 = time.monotonic()
    it = 0
    seen = None
    while True:
        if args.die == rank and it == args.die_at:
            print(f"ulfm_after_kill: rank {rank} kills itself at iteration {it}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            sbuf[:] = it.to_bytes(8, "little")
            comm.Sendrecv(sbuf, right, 7, rbuf, left, 7)
            if int.from_bytes(rbuf, "little") != it:
                fail(rank, f"ring exchange: got {int.from_bytes(rbuf, 'little')} at iteration {it}")
            # The buffer form: MPI_Allreduce on `comm` itself, which a revocation interrupts
            # (the object form runs on mpi4py's hidden duplicate of `comm`).
            one, tot = array.array("i", [1]), array.array("i", [0])
            comm.Allreduce(one, tot, op=MPI.SUM)
            total = tot[0]
            if total != size:
                fail(rank, f"allreduce before failure gave {total}, not {size}")
        except MPI.Exception as exc:
            seen = exc.Get_error_class()
            if seen in FAILED:
                comm.Revoke()  # make every other survivor leave its pending operation
            elif seen != MPI.ERR_REVOKED:
                fail(rank, f"unexpected error class {seen}: {exc.Get_error_string()}")
            break
        it += 1
        if time.monotonic() - t0 > args.timeout:
            print(f"ulfm_after_kill: NO FAILURE rank {rank} after {it} iterations", flush=True)
            sys.exit(2)
        if args.interval:
            time.sleep(args.interval)

    if not comm.Is_revoked():
        fail(rank, f"communicator not revoked after error class {seen} (Revoke called: "
                   f"{seen in FAILED})")
    # the revoked communicator: local failure queries still work
    failed_group = comm.Get_failed()
    nfailed_known = failed_group.Get_size()
    failed_group.Free()
    nacked = comm.Ack_failed()
    if nacked < 0 or nacked > size:
        fail(rank, f"Ack_failed returned {nacked}")

    shrunk = comm.Shrink()
    shrunk.Set_errhandler(MPI.ERRORS_RETURN)
    nsize, nrank = shrunk.Get_size(), shrunk.Get_rank()
    if nsize != size - args.expect_failed:
        fail(rank, f"shrunk size {nsize}, expected {size - args.expect_failed}")

    # who survived, in world ranks
    wgroup, sgroup = world.Get_group(), shrunk.Get_group()
    survivors = MPI.Group.Translate_ranks(sgroup, list(range(nsize)), wgroup)
    dead = sorted(set(range(size)) - set(survivors))
    wgroup.Free()
    sgroup.Free()
    if args.die is not None and dead != [args.die]:
        fail(rank, f"dead ranks {dead}, expected [{args.die}]")
    if rank in dead:
        fail(rank, "a dead rank is running")

    # Agree: bitwise AND over the survivors; the first survivor contributes 0b01
    flag = 0b01 if nrank == 0 else 0b11
    agreed = shrunk.Agree(flag)
    if agreed != 0b01:
        fail(rank, f"Agree gave {agreed:#b}, expected 0b1")
    if shrunk.Agree(1) != 1:
        fail(rank, "Agree(1) over the survivors is not 1")

    total = shrunk.allreduce(rank, op=MPI.SUM)
    want = sum(survivors)
    if total != want:
        fail(rank, f"allreduce over the shrunk communicator gave {total}, expected {want}")
    ibuf, obuf = array.array("i", [rank, 1]), array.array("i", [0, 0])
    shrunk.Allreduce([ibuf, MPI.INT], [obuf, MPI.INT], op=MPI.SUM)  # buffer path too
    if list(obuf) != [want, nsize]:
        fail(rank, f"Allreduce(MPI.INT) over the shrunk communicator gave {list(obuf)}")
    shrunk.Barrier()

    print(f"ulfm_after_kill: ok rank {rank} size {nsize}"
          f" (shrunk rank {nrank}; first error class {seen}; failed known {nfailed_known},"
          f" acked {nacked}; dead {dead})", flush=True)
    shrunk.Free()
    comm.Free()


if __name__ == "__main__":
    main()
