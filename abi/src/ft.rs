//! Fault tolerance through the ABI: ULFM's calls with Open MPI 5's MPIX_ names and the
//! run-through stabilization calls of the MPI Forum's draft chapter 17 (declared in
//! `abi/include/mpi-ext.h`).

use std::ffi::c_int;
use std::sync::atomic::Ordering;

use crate::comm::comm;
use crate::consts::*;
use crate::group::new_group;
use crate::raise::{raise_error, raise_on};
use crate::req::Active;
use crate::types::{Handle, MPI_Status, SendPtr};
use runthrough::Decided;

fn group_of(g: &runthrough::Group) -> Handle {
    new_group(g.world_ranks().into_iter().map(|r| r as u32).collect())
}

pub(crate) unsafe fn MPIX_Comm_revoke(comm: Handle) -> c_int {
    let c = comm!(comm);
    match &c.inter {
        Some(i) => i.ic.revoke(),
        None => c.comm.revoke(),
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_is_revoked(comm: Handle, flag: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *flag = c.comm.is_revoked() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_shrink(comm: Handle, newcomm: *mut Handle) -> c_int {
    let c = comm!(comm);
    let shrunk = match &c.inter {
        // An intercommunicator shrinks both its groups to the survivors.
        Some(i) => {
            i.ic.shrink()
                .map(|s| crate::commobj::COMMS.insert(crate::commobj::CommObj::new_inter(s, *c.errhandler.lock())))
        }
        None => c.comm.shrink().map(|s| crate::comm::register_plain(&c, s)),
    };
    match shrunk {
        Ok(h) => {
            // SAFETY: output argument.
            unsafe { *newcomm = h };
            MPI_SUCCESS
        }
        Err(e) => raise_error(comm, &e),
    }
}

/// Whether the agreement decided on a failed member this process has not acknowledged
/// (`MPIX_Comm_failure_ack` / `MPIX_Comm_ack_failed`): ULFM's `MPIX_Comm_agree` then
/// returns `MPIX_ERR_PROC_FAILED`, the agreed flag set all the same.
fn unacknowledged(c: &crate::commobj::CommObj, agreed_failed: &[usize]) -> bool {
    let acked = c.comm.ack_failed(0);
    let known = c.comm.get_failed().world_ranks();
    let acked = &known[..acked.min(known.len())];
    agreed_failed.iter().any(|f| !acked.contains(f))
}

/// ULFM's agreement: the bitwise AND of the live members' flags, uniform; it returns
/// `MPIX_ERR_PROC_FAILED` (flag set) where a failed member it decided on was not
/// acknowledged here (as Open MPI's ULFM compares its agreed failed group with the
/// acknowledged one).
pub(crate) unsafe fn MPIX_Comm_agree(comm: Handle, flag: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: in/out argument.
    match c.comm.agree_failed(unsafe { *flag }) {
        Ok((v, failed)) => {
            // SAFETY: in/out argument.
            unsafe { *flag = v };
            if unacknowledged(&c, &failed) {
                return raise_on(comm, MPIX_ERR_PROC_FAILED);
            }
            MPI_SUCCESS
        }
        Err(e) => raise_error(comm, &e),
    }
}

pub(crate) unsafe fn MPIX_Comm_iagree(comm: Handle, flag: *mut c_int, request: *mut Handle) -> c_int {
    let c = comm!(comm);
    let f = SendPtr(flag.cast());
    // SAFETY: in/out argument, read now (the program's value at the call).
    let mut ticket = match c.comm.iagree_ticket(unsafe { *flag }) {
        Ok(t) => t,
        Err(e) => return raise_error(comm, &e),
    };
    let poll = move || {
        let f = f;
        let err = match c.comm.poll_ticket(&mut ticket)? {
            Decided::Agree { flag: v, failed } => {
                // SAFETY: the program keeps `flag` valid until the request completes.
                unsafe { *f.0.cast::<c_int>() = v };
                if unacknowledged(&c, &failed) {
                    MPIX_ERR_PROC_FAILED
                } else {
                    MPI_SUCCESS
                }
            }
            Decided::Validate(_) => MPI_ERR_INTERN,
        };
        Some((MPI_Status::empty(), err))
    };
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, Active::Polled(Box::new(poll))) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_get_failed(comm: Handle, failedgrp: *mut Handle) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *failedgrp = group_of(&c.comm.get_failed()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_ack_failed(comm: Handle, num_to_ack: c_int, num_acked: *mut c_int) -> c_int {
    let c = comm!(comm);
    let n = c.comm.ack_failed(num_to_ack.max(0) as usize);
    // SAFETY: output argument.
    unsafe { *num_acked = n as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_failure_ack(comm: Handle) -> c_int {
    let c = comm!(comm);
    let failed = c.comm.get_failed();
    c.comm.ack_failed(failed.size());
    *c.acked.lock() = failed.world_ranks().into_iter().map(|r| r as u32).collect();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_failure_get_acked(comm: Handle, failedgrp: *mut Handle) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *failedgrp = new_group(c.acked.lock().clone()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_validate(comm: Handle, failed: *mut Handle) -> c_int {
    let c = comm!(comm);
    // Its nonblocking collectives end before the validate's cut.
    c.comm.settle_owned();
    match c.comm.validate() {
        Ok(g) => {
            if let Some(i) = &c.inter {
                i.ic.validated(&g);
            }
            // SAFETY: output argument.
            unsafe { *failed = group_of(&g) };
            MPI_SUCCESS
        }
        Err(e) => raise_error(comm, &e),
    }
}

pub(crate) unsafe fn MPIX_Icomm_validate(comm: Handle, failed: *mut Handle, request: *mut Handle) -> c_int {
    let c = comm!(comm);
    let out = SendPtr(failed.cast());
    let mut ticket = match c.comm.ivalidate_ticket() {
        Ok(t) => t,
        Err(e) => return raise_error(comm, &e),
    };
    let poll = move || {
        let out = out;
        let err = match c.comm.poll_ticket(&mut ticket)? {
            Decided::Validate(g) => {
                if let Some(i) = &c.inter {
                    i.ic.validated(&g);
                }
                // SAFETY: the program keeps `failed` valid until the request completes.
                unsafe { *out.0.cast::<Handle>() = group_of(&g) };
                MPI_SUCCESS
            }
            Decided::Agree { .. } => MPI_ERR_INTERN,
        };
        Some((MPI_Status::empty(), err))
    };
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, Active::Polled(Box::new(poll))) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_group_failed(comm: Handle, failed: *mut Handle) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *failed = group_of(&c.comm.group_failed()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_reenable_any_source(comm: Handle, failed: *mut Handle) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *failed = group_of(&c.comm.reenable_any_source()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_Comm_collectives_enabled(comm: Handle, active: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *active = c.comm.collectives_enabled() as c_int };
    MPI_SUCCESS
}

/// Unused import guard (the status type appears in the generated signatures only).
#[allow(dead_code)]
fn _unused(_: MPI_Status) {
    let _ = Ordering::Relaxed;
    let _ = raise_on;
}
