//! The large-count (`_c`) forms of the point-to-point calls: counts converted
//! (`crate::count`), then the `int` forms of `p2p.rs`.

use std::ffi::{c_int, c_void};

use crate::count::small_count;
use crate::types::{Handle, MPI_Count, MPI_Status};

pub(crate) unsafe fn MPI_Send_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Send_init(buf, small_count!(count), datatype, dest, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Ssend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Send_init(buf, small_count!(count), datatype, dest, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Rsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Send_init(buf, small_count!(count), datatype, dest, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Recv_init_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    source: c_int,
    tag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Recv_init(buf, small_count!(count), datatype, source, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Mrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Mrecv(buf, small_count!(count), datatype, message, status) }
}
pub(crate) unsafe fn MPI_Imrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    message: *mut Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Imrecv(buf, small_count!(count), datatype, message, request) }
}
pub(crate) unsafe fn MPI_Sendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::p2p::MPI_Sendrecv(
            sendbuf,
            small_count!(sendcount),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            small_count!(recvcount),
            recvtype,
            source,
            recvtag,
            comm,
            status,
        )
    }
}
pub(crate) unsafe fn MPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::p2p::MPI_Sendrecv_replace(
            buf,
            small_count!(count),
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            status,
        )
    }
}

pub(crate) unsafe fn MPI_Isendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: Handle,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: Handle,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::p2p::MPI_Isendrecv(
            sendbuf,
            small_count!(sendcount),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            small_count!(recvcount),
            recvtype,
            source,
            recvtag,
            comm,
            request,
        )
    }
}
pub(crate) unsafe fn MPI_Isendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::p2p::MPI_Isendrecv_replace(
            buf,
            small_count!(count),
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
            request,
        )
    }
}
