/*
 * pympi_ulfm.h -- force-included (CFLAGS="-include .../pympi_ulfm.h") into the build of
 * mpi4py 4.1.x against the MPI-5 standard ABI (MPI4PY_BUILD_MPIABI=1, mpicc_abi), so that
 * mpi4py's ULFM layer (src/lib-mpi/mpiulfm.h) calls runthrough's MPIX_ functions
 * (abi/include/mpi-ext.h) instead of its non-fault-tolerant fallbacks -- without patching
 * mpi4py's sources.
 *
 * How it works:
 *  - mpiulfm.h only enables ULFM for Open MPI / MPICH headers. Defining
 *    PyMPI_HAVE_MPIX_<name> here makes it `#define MPI_<name> MPIX_<name>` and skip its
 *    fallback; PyMPI_HAVE_MPIX_ERR_* makes MPI.ERR_PROC_FAILED etc. the MPIX_ values.
 *  - In standard-ABI mode mpi4py would then reference MPIX_* strongly, and the module would
 *    not load on MPICH's libmpi_abi.so.1 (which lacks them). So every MPIX_ function is
 *    declared weak here, and MPIX_<name>(...) is a function-like macro that calls the real
 *    symbol when the loaded libmpi_abi.so.1 provides it and otherwise does exactly what
 *    mpi4py's own fallback in mpiulfm.h does (Revoke -> NotImplementedError, Shrink -> dup,
 *    Agree -> allreduce(BAND), Is_revoked -> false, Get_failed -> empty group,
 *    Ack_failed -> 0, Iagree -> iallreduce(BAND)). One build runs on both MPIs.
 *  - This file is included before <Python.h>, so it includes nothing: handle types are
 *    spelled as mpi_abi.h's incomplete struct pointers (MPI_Comm == struct MPI_ABI_Comm *),
 *    and the fallback bodies are macros that expand at the call site, where mpi_abi.h and
 *    mpi4py's helpers are in scope. abi/mpi4py/build.sh checks these declarations and the
 *    error-class values against abi/include/mpi-ext.h before building.
 *  - MPIX_Comm_ishrink is not provided by runthrough: mpi4py keeps its idup fallback.
 */
#ifndef RUNTHROUGH_PYMPI_ULFM_H
#define RUNTHROUGH_PYMPI_ULFM_H

#if defined(__cplusplus)
extern "C" {
#endif

/* error classes: must equal abi/include/mpi-ext.h (checked by build.sh) */
#ifndef MPIX_ERR_PROC_FAILED
#define MPIX_ERR_PROC_FAILED          101
#endif
#ifndef MPIX_ERR_PROC_FAILED_PENDING
#define MPIX_ERR_PROC_FAILED_PENDING  102
#endif
#ifndef MPIX_ERR_REVOKED
#define MPIX_ERR_REVOKED              103
#endif

#define PyMPI_HAVE_MPIX_ERR_REVOKED 1
#define PyMPI_HAVE_MPIX_ERR_PROC_FAILED 1
#define PyMPI_HAVE_MPIX_ERR_PROC_FAILED_PENDING 1
#define PyMPI_HAVE_MPIX_Comm_revoke 1
#define PyMPI_HAVE_MPIX_Comm_is_revoked 1
#define PyMPI_HAVE_MPIX_Comm_agree 1
#define PyMPI_HAVE_MPIX_Comm_iagree 1
#define PyMPI_HAVE_MPIX_Comm_shrink 1
#define PyMPI_HAVE_MPIX_Comm_get_failed 1
#define PyMPI_HAVE_MPIX_Comm_ack_failed 1

struct MPI_ABI_Comm;
struct MPI_ABI_Group;
struct MPI_ABI_Request;

int MPIX_Comm_revoke(struct MPI_ABI_Comm *comm);
int MPIX_Comm_is_revoked(struct MPI_ABI_Comm *comm, int *flag);
int MPIX_Comm_shrink(struct MPI_ABI_Comm *comm, struct MPI_ABI_Comm **newcomm);
int MPIX_Comm_agree(struct MPI_ABI_Comm *comm, int *flag);
int MPIX_Comm_iagree(struct MPI_ABI_Comm *comm, int *flag, struct MPI_ABI_Request **request);
int MPIX_Comm_ack_failed(struct MPI_ABI_Comm *comm, int num_to_ack, int *num_acked);
int MPIX_Comm_get_failed(struct MPI_ABI_Comm *comm, struct MPI_ABI_Group **failedgrp);

#pragma weak MPIX_Comm_revoke
#pragma weak MPIX_Comm_is_revoked
#pragma weak MPIX_Comm_shrink
#pragma weak MPIX_Comm_agree
#pragma weak MPIX_Comm_iagree
#pragma weak MPIX_Comm_ack_failed
#pragma weak MPIX_Comm_get_failed

#define PyMPIRT_HAVE(fn) (&(fn) != 0)

/* (fn)(...) -- the parenthesized name is not a macro invocation: calls the weak symbol */

#define MPIX_Comm_revoke(comm) \
  (PyMPIRT_HAVE(MPIX_Comm_revoke) ? (MPIX_Comm_revoke)(comm) \
   : PyMPI_UNAVAILABLE("MPI_Comm_revoke", (comm)))

#define MPIX_Comm_is_revoked(comm, flag) \
  (PyMPIRT_HAVE(MPIX_Comm_is_revoked) ? (MPIX_Comm_is_revoked)((comm), (flag)) : \
   __extension__ ({ \
     int *pyrt_p_ = (flag); \
     int pyrt_d_, pyrt_e_ = MPI_Comm_test_inter((comm), &pyrt_d_); \
     if (pyrt_e_ == MPI_SUCCESS) { \
       if (!pyrt_p_) { \
         (void) MPI_Comm_call_errhandler((comm), MPI_ERR_ARG); pyrt_e_ = MPI_ERR_ARG; \
       } else { *pyrt_p_ = 0; } \
     } \
     pyrt_e_; }))

#define MPIX_Comm_get_failed(comm, group) \
  (PyMPIRT_HAVE(MPIX_Comm_get_failed) ? (MPIX_Comm_get_failed)((comm), (group)) : \
   __extension__ ({ \
     MPI_Group *pyrt_p_ = (group); \
     int pyrt_d_, pyrt_e_ = MPI_Comm_test_inter((comm), &pyrt_d_); \
     if (pyrt_e_ == MPI_SUCCESS) { \
       if (!pyrt_p_) { \
         (void) MPI_Comm_call_errhandler((comm), MPI_ERR_ARG); pyrt_e_ = MPI_ERR_ARG; \
       } else { \
         pyrt_e_ = MPI_Group_union(MPI_GROUP_EMPTY, MPI_GROUP_EMPTY, pyrt_p_); \
       } \
     } \
     pyrt_e_; }))

#define MPIX_Comm_ack_failed(comm, num_to_ack, num_acked) \
  (PyMPIRT_HAVE(MPIX_Comm_ack_failed) ? \
   (MPIX_Comm_ack_failed)((comm), (num_to_ack), (num_acked)) : \
   __extension__ ({ \
     int *pyrt_p_ = (num_acked); \
     int pyrt_d_, pyrt_e_ = MPI_Comm_test_inter((comm), &pyrt_d_); \
     (void) (num_to_ack); \
     if (pyrt_e_ == MPI_SUCCESS) { \
       if (!pyrt_p_) { \
         (void) MPI_Comm_call_errhandler((comm), MPI_ERR_ARG); pyrt_e_ = MPI_ERR_ARG; \
       } else { *pyrt_p_ = 0; } \
     } \
     pyrt_e_; }))

#define MPIX_Comm_agree(comm, flag) \
  (PyMPIRT_HAVE(MPIX_Comm_agree) ? (MPIX_Comm_agree)((comm), (flag)) : \
   __extension__ ({ \
     int *pyrt_p_ = (flag); int pyrt_b_ = pyrt_p_ ? *pyrt_p_ : 0; \
     MPI_Allreduce_c(&pyrt_b_, pyrt_p_, 1, MPI_INT, MPI_BAND, (comm)); }))

/* fallback: the 4-byte send buffer must outlive the request; it is leaked (MPICH only;
   mpi4py's own fallback frees it through a communicator attribute). */
#define MPIX_Comm_iagree(comm, flag, request) \
  (PyMPIRT_HAVE(MPIX_Comm_iagree) ? (MPIX_Comm_iagree)((comm), (flag), (request)) : \
   __extension__ ({ \
     int *pyrt_p_ = (flag); \
     int *pyrt_b_ = (int *) PyMPI_MALLOC(sizeof(int)); \
     int pyrt_e_ = MPI_ERR_NO_MEM; \
     if (pyrt_b_) { \
       *pyrt_b_ = pyrt_p_ ? *pyrt_p_ : 0; \
       pyrt_e_ = MPI_Iallreduce_c(pyrt_b_, pyrt_p_, 1, MPI_INT, MPI_BAND, (comm), (request)); \
     } \
     pyrt_e_; }))

#define MPIX_Comm_shrink(comm, newcomm) \
  (PyMPIRT_HAVE(MPIX_Comm_shrink) ? (MPIX_Comm_shrink)((comm), (newcomm)) \
   : MPI_Comm_dup((comm), (newcomm)))

#if defined(__cplusplus)
}
#endif

#endif /* RUNTHROUGH_PYMPI_ULFM_H */
