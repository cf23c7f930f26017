//! Request status queries that do not free the requests (`MPI_Request_get_status_all`,
//! `_any`, `_some`).

use std::ffi::c_int;

use crate::consts::*;
use crate::types::{Handle, MPI_Status};

pub(crate) unsafe fn MPI_Request_get_status_all(
    count: c_int,
    array_of_requests: *const Handle,
    flag: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let n = count.max(0) as usize;
    let mut all = true;
    let mut sts = vec![MPI_Status::empty(); n];
    for i in 0..n {
        let mut f = 0;
        // SAFETY: the program's array of `count` requests.
        let rc = unsafe { crate::req::MPI_Request_get_status(*array_of_requests.add(i), &mut f, &mut sts[i]) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        all &= f != 0;
    }
    // SAFETY: output arguments.
    unsafe {
        *flag = all as c_int;
        if all && !array_of_statuses.is_null() {
            std::ptr::copy_nonoverlapping(sts.as_ptr(), array_of_statuses, n);
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Request_get_status_any(
    count: c_int,
    array_of_requests: *const Handle,
    indx: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let mut active = false;
    for i in 0..count.max(0) as usize {
        // SAFETY: the program's array of `count` requests.
        let h = unsafe { *array_of_requests.add(i) };
        if h == MPI_REQUEST_NULL {
            continue;
        }
        active = true;
        let mut f = 0;
        let mut st = MPI_Status::empty();
        // SAFETY: the library's own outputs.
        let rc = unsafe { crate::req::MPI_Request_get_status(h, &mut f, &mut st) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if f != 0 {
            // SAFETY: output arguments.
            unsafe {
                *indx = i as c_int;
                *flag = 1;
                crate::status::put_status(status, st);
            }
            return MPI_SUCCESS;
        }
    }
    // SAFETY: output arguments.
    unsafe {
        *indx = MPI_UNDEFINED;
        *flag = (!active) as c_int;
        if !active {
            crate::status::put_status(status, MPI_Status::empty());
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Request_get_status_some(
    incount: c_int,
    array_of_requests: *const Handle,
    outcount: *mut c_int,
    array_of_indices: *mut c_int,
    array_of_statuses: *mut MPI_Status,
) -> c_int {
    let mut got = 0usize;
    let mut active = false;
    for i in 0..incount.max(0) as usize {
        // SAFETY: the program's array of `incount` requests.
        let h = unsafe { *array_of_requests.add(i) };
        if h == MPI_REQUEST_NULL {
            continue;
        }
        active = true;
        let mut f = 0;
        let mut st = MPI_Status::empty();
        // SAFETY: the library's own outputs.
        let rc = unsafe { crate::req::MPI_Request_get_status(h, &mut f, &mut st) };
        if rc != MPI_SUCCESS {
            return rc;
        }
        if f != 0 {
            // SAFETY: output arrays of incount entries.
            unsafe {
                *array_of_indices.add(got) = i as c_int;
                if !array_of_statuses.is_null() {
                    *array_of_statuses.add(got) = st;
                }
            }
            got += 1;
        }
    }
    // SAFETY: output argument.
    unsafe { *outcount = if active { got as c_int } else { MPI_UNDEFINED } };
    MPI_SUCCESS
}
