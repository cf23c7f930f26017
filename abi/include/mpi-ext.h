/*
 * runthrough's extensions to the MPI-5 standard ABI (mpi_abi.h), in the spelling Open MPI 5
 * gives its ULFM extension (`mpi-ext.h`, MPIX_ prefix) plus the run-through stabilization
 * calls of the MPI Forum's draft fault-tolerance chapter (chapter 17), which had
 * MPI_ names there and carry the MPIX_ prefix here because they are not in any standard.
 *
 * Include it after <mpi.h> (built with -DMPI_ABI, as mpicc_abi does) or <mpi_abi.h>.
 * The functions live in runthrough's libmpi_abi.so.1 only: a program that calls them does
 * not load on another implementation's libmpi_abi.so.1 (test with
 * `#ifdef RUNTHROUGH_MPI_EXT` or resolve them weakly).
 *
 * Error classes: implementation-specific classes sit above the standard's last class
 * (MPI_ERR_ABI = 62) and below MPI_ERR_LASTCODE; the values are MPICH's ULFM numbers, the
 * same the Rust API's `Class::code()` returns.
 */
#ifndef RUNTHROUGH_MPI_EXT_H
#define RUNTHROUGH_MPI_EXT_H

#if !defined(MPI_ABI_VERSION)
#include <mpi_abi.h>
#endif

#if defined(__cplusplus)
extern "C" {
#endif

#define RUNTHROUGH_MPI_EXT 1

/* ULFM (Open MPI 5 names) */
#define MPIX_ERR_PROC_FAILED          101
#define MPIX_ERR_PROC_FAILED_PENDING  102
#define MPIX_ERR_REVOKED              103
/* Run-through stabilization (draft chapter 17, 17.5.1): the same class as MPIX_ERR_PROC_FAILED. */
#define MPIX_ERR_RANK_FAIL_STOP       MPIX_ERR_PROC_FAILED

/* The unprefixed names Open MPI 5's mpi-ext.h also gives (ULFM programs written for it use
 * them), unless another header defined them first. */
#ifndef MPI_ERR_PROC_FAILED
#define MPI_ERR_PROC_FAILED           MPIX_ERR_PROC_FAILED
#endif
#ifndef MPI_ERR_PROC_FAILED_PENDING
#define MPI_ERR_PROC_FAILED_PENDING   MPIX_ERR_PROC_FAILED_PENDING
#endif
#ifndef MPI_ERR_REVOKED
#define MPI_ERR_REVOKED               MPIX_ERR_REVOKED
#endif

/* Predefined attribute of MPI_COMM_WORLD, as Open MPI 5's MPI_FT / MPIX_FT: its value,
 * an int, is 1 — this library runs through process failures. */
#define MPIX_FT                       600
#ifndef MPI_FT
#define MPI_FT                        MPIX_FT
#endif

int MPIX_Comm_revoke(MPI_Comm comm);
int MPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int MPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int MPIX_Comm_agree(MPI_Comm comm, int *flag);
int MPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);
int MPIX_Comm_failure_ack(MPI_Comm comm);
int MPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
int MPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int MPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);

/* Run-through stabilization (draft chapter 17, sections 17.4-17.7) */
int MPIX_Comm_validate(MPI_Comm comm, MPI_Group *failed);
int MPIX_Icomm_validate(MPI_Comm comm, MPI_Group *failed, MPI_Request *request);
int MPIX_Comm_group_failed(MPI_Comm comm, MPI_Group *failed);
int MPIX_Comm_reenable_any_source(MPI_Comm comm, MPI_Group *failed);
int MPIX_Comm_collectives_enabled(MPI_Comm comm, int *active);

/* Run-through stabilization of windows (draft chapter 17, R37): recognize every failed
 * member uniformly and re-enable fence and free (collective; `failed` receives the failed
 * members, the same group at every member; MPIX_Iwin_validate: the same as a request), and
 * the failed members this process knows of (local). */
int MPIX_Win_validate(MPI_Win win, MPI_Group *failed);
int MPIX_Iwin_validate(MPI_Win win, MPI_Group *failed, MPI_Request *request);
int MPIX_Win_get_failed(MPI_Win win, MPI_Group *failed);

/* Run-through stabilization of files (draft chapter 17, sections 17.4.3 and 17.12, R41):
 * recognize every failed member of the file's group uniformly and re-enable the file's
 * collectives (MPI_File_close errs until then; MPIX_Ifile_validate: the same as a
 * request), whether the file is collectively active, and the failed members this process
 * knows of (local). */
int MPIX_File_validate(MPI_File fh, MPI_Group *failed);
int MPIX_Ifile_validate(MPI_File fh, MPI_Group *failed, MPI_Request *request);
int MPIX_File_collectives_enabled(MPI_File fh, int *active);
int MPIX_File_get_failed(MPI_File fh, MPI_Group *failed);

/* The profiling names */
int PMPIX_Comm_revoke(MPI_Comm comm);
int PMPIX_Comm_is_revoked(MPI_Comm comm, int *flag);
int PMPIX_Comm_shrink(MPI_Comm comm, MPI_Comm *newcomm);
int PMPIX_Comm_agree(MPI_Comm comm, int *flag);
int PMPIX_Comm_iagree(MPI_Comm comm, int *flag, MPI_Request *request);
int PMPIX_Comm_failure_ack(MPI_Comm comm);
int PMPIX_Comm_failure_get_acked(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_ack_failed(MPI_Comm comm, int num_to_ack, int *num_acked);
int PMPIX_Comm_get_failed(MPI_Comm comm, MPI_Group *failedgrp);
int PMPIX_Comm_validate(MPI_Comm comm, MPI_Group *failed);
int PMPIX_Icomm_validate(MPI_Comm comm, MPI_Group *failed, MPI_Request *request);
int PMPIX_Comm_group_failed(MPI_Comm comm, MPI_Group *failed);
int PMPIX_Comm_reenable_any_source(MPI_Comm comm, MPI_Group *failed);
int PMPIX_Comm_collectives_enabled(MPI_Comm comm, int *active);
int PMPIX_Win_validate(MPI_Win win, MPI_Group *failed);
int PMPIX_Iwin_validate(MPI_Win win, MPI_Group *failed, MPI_Request *request);
int PMPIX_Win_get_failed(MPI_Win win, MPI_Group *failed);
int PMPIX_File_validate(MPI_File fh, MPI_Group *failed);
int PMPIX_Ifile_validate(MPI_File fh, MPI_Group *failed, MPI_Request *request);
int PMPIX_File_collectives_enabled(MPI_File fh, int *active);
int PMPIX_File_get_failed(MPI_File fh, MPI_Group *failed);

#if defined(__cplusplus)
}
#endif

#endif /* RUNTHROUGH_MPI_EXT_H */
