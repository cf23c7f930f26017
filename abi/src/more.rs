//! The large-count (`_c`) forms of point-to-point, datatype, pack and operation calls,
//! and the smaller families: files (opened and closed with their error handlers, no
//! I/O), topology queries, request status queries. Sessions are in `session.rs`,
//! buffered sends and their buffers in `bsend.rs`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::err::raise_on;
use crate::handles::{Kind, Table};
use crate::types::{FnPtr, Handle, MPI_Aint, MPI_Count, MPI_Status};

fn small(n: MPI_Count) -> Result<c_int, c_int> {
    c_int::try_from(n).map_err(|_| MPI_ERR_COUNT)
}

macro_rules! small {
    ($n:expr) => {
        match small($n) {
            Ok(v) => v,
            Err(e) => return raise_on(MPI_COMM_WORLD, e),
        }
    };
}

/// `n` entries of a C array of 64-bit values as `T`.
unsafe fn wide<T: TryFrom<i64>>(p: *const i64, n: MPI_Count) -> Result<Vec<T>, c_int> {
    // SAFETY: forwarded array (MPI contract).
    unsafe { crate::dtype::slice(p, small(n)?) }.iter().map(|&v| T::try_from(v).map_err(|_| MPI_ERR_COUNT)).collect()
}

macro_rules! wide {
    ($p:expr, $n:expr) => {
        // SAFETY: the program's array of $n entries.
        match unsafe { wide($p, $n) } {
            Ok(v) => v,
            Err(e) => return raise_on(MPI_COMM_WORLD, e),
        }
    };
}

// ---- point-to-point ------------------------------------------------------------------

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
    unsafe { crate::p2p::MPI_Send_init(buf, small!(count), datatype, dest, tag, comm, request) }
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
    unsafe { crate::p2p::MPI_Send_init(buf, small!(count), datatype, dest, tag, comm, request) }
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
    unsafe { crate::p2p::MPI_Send_init(buf, small!(count), datatype, dest, tag, comm, request) }
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
    unsafe { crate::p2p::MPI_Recv_init(buf, small!(count), datatype, source, tag, comm, request) }
}
pub(crate) unsafe fn MPI_Mrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    message: *mut Handle,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Mrecv(buf, small!(count), datatype, message, status) }
}
pub(crate) unsafe fn MPI_Imrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    message: *mut Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::p2p::MPI_Imrecv(buf, small!(count), datatype, message, request) }
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
            small!(sendcount),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            small!(recvcount),
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
        crate::p2p::MPI_Sendrecv_replace(buf, small!(count), datatype, dest, sendtag, source, recvtag, comm, status)
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
            small!(sendcount),
            sendtype,
            dest,
            sendtag,
            recvbuf,
            small!(recvcount),
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
        crate::p2p::MPI_Isendrecv_replace(buf, small!(count), datatype, dest, sendtag, source, recvtag, comm, request)
    }
}

// ---- datatypes -----------------------------------------------------------------------

pub(crate) unsafe fn MPI_Type_contiguous_c(count: MPI_Count, oldtype: Handle, newtype: *mut Handle) -> c_int {
    match c_int::try_from(count) {
        // SAFETY: forwarded.
        Ok(n) => unsafe { crate::dtype::MPI_Type_contiguous(n, oldtype, newtype) },
        // SAFETY: forwarded.
        Err(_) => unsafe { crate::dtype::contiguous_large(count, oldtype, newtype) },
    }
}
pub(crate) unsafe fn MPI_Type_vector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_vector_c(count, blocklength, stride, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hvector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hvector_c(count, blocklength, stride, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_indexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_indexed_c(count, array_of_blocklengths, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hindexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hindexed_c(count, array_of_blocklengths, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_indexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_indexed_block_c(count, blocklength, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hindexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hindexed_block_c(count, blocklength, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_struct_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    array_of_types: *const Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::type_struct_c(count, array_of_blocklengths, array_of_displacements, array_of_types, newtype)
    }
}
pub(crate) unsafe fn MPI_Type_create_resized_c(
    oldtype: Handle,
    lb: MPI_Count,
    extent: MPI_Count,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::MPI_Type_create_resized(oldtype, lb as isize, extent as isize, newtype) }
}
pub(crate) unsafe fn MPI_Type_get_envelope_c(
    datatype: Handle,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *num_integers = t.ints.len() as MPI_Count;
        *num_addresses = t.aints.len() as MPI_Count;
        *num_large_counts = t.large.len() as MPI_Count;
        *num_datatypes = t.types.len() as MPI_Count;
        *combiner = t.combiner;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_contents_c(
    datatype: Handle,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut Handle,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    if (max_large_counts as usize) < t.large.len() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: an array of max_large_counts entries (MPI contract), checked above.
    unsafe { std::ptr::copy_nonoverlapping(t.large.as_ptr(), array_of_large_counts, t.large.len()) };
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_get_contents(
            datatype,
            small!(max_integers),
            small!(max_addresses),
            small!(max_datatypes),
            array_of_integers,
            array_of_addresses,
            array_of_datatypes,
        )
    }
}

pub(crate) unsafe fn MPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut Handle) -> c_int {
    let t = match (typeclass, size) {
        (MPI_TYPECLASS_INTEGER, 1) => MPI_INTEGER1,
        (MPI_TYPECLASS_INTEGER, 2) => MPI_INTEGER2,
        (MPI_TYPECLASS_INTEGER, 4) => MPI_INTEGER4,
        (MPI_TYPECLASS_INTEGER, 8) => MPI_INTEGER8,
        (MPI_TYPECLASS_INTEGER, 16) => MPI_INTEGER16,
        (MPI_TYPECLASS_REAL, 2) => MPI_REAL2,
        (MPI_TYPECLASS_REAL, 4) => MPI_REAL4,
        (MPI_TYPECLASS_REAL, 8) => MPI_REAL8,
        (MPI_TYPECLASS_REAL, 16) => MPI_REAL16,
        (MPI_TYPECLASS_COMPLEX, 4) => MPI_COMPLEX4,
        (MPI_TYPECLASS_COMPLEX, 8) => MPI_COMPLEX8,
        (MPI_TYPECLASS_COMPLEX, 16) => MPI_COMPLEX16,
        (MPI_TYPECLASS_COMPLEX, 32) => MPI_COMPLEX32,
        _ => return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
    };
    // SAFETY: output argument.
    unsafe { *datatype = t };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = small!(unsafe { *position });
    // SAFETY: forwarded.
    let rc =
        unsafe { crate::dtype::MPI_Pack(inbuf, small!(incount), datatype, outbuf, small!(outsize), &mut pos, comm) };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}
pub(crate) unsafe fn MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = small!(unsafe { *position });
    // SAFETY: forwarded.
    let rc =
        unsafe { crate::dtype::MPI_Unpack(inbuf, small!(insize), &mut pos, outbuf, small!(outcount), datatype, comm) };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}
pub(crate) unsafe fn MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: Handle,
    comm: Handle,
    size: *mut MPI_Count,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = incount.max(0) * t.size as MPI_Count };
    MPI_SUCCESS
}
pub(crate) unsafe fn MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    op: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::op::MPI_Reduce_local(inbuf, inoutbuf, small!(count), datatype, op) }
}

// ---- topology and process-model queries ----------------------------------------------

pub(crate) unsafe fn MPI_Topo_test(comm: Handle, status: *mut c_int) -> c_int {
    let _c = crate::comm::comm!(comm);
    // SAFETY: output argument.
    unsafe { *status = MPI_UNDEFINED };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_get_parent(parent: *mut Handle) -> c_int {
    // SAFETY: output argument.
    unsafe { *parent = MPI_COMM_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_idup_with_info(
    comm: Handle,
    info: Handle,
    newcomm: *mut Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::comm::MPI_Comm_idup(comm, newcomm, request) }
}

// ---- request status queries ----------------------------------------------------------

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
                crate::types::put_status(status, st);
            }
            return MPI_SUCCESS;
        }
    }
    // SAFETY: output arguments.
    unsafe {
        *indx = MPI_UNDEFINED;
        *flag = (!active) as c_int;
        if !active {
            crate::types::put_status(status, MPI_Status::empty());
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

// ---- files: open and close with error handlers (no reads or writes) ------------------

/// An open file.
#[derive(Debug)]
pub(crate) struct FileObj {
    path: std::path::PathBuf,
    fd: c_int,
    delete_on_close: bool,
    errhandler: Mutex<Handle>,
}

pub(crate) static FILES: Table<FileObj> = Table::new(Kind::File);

/// The default error handler of files (MPI_FILE_NULL's), MPI_ERRORS_RETURN at start.
static FILE_DEFAULT_EH: Mutex<Handle> = Mutex::new(MPI_ERRORS_RETURN);

pub(crate) unsafe fn MPI_File_open(
    comm: Handle,
    filename: *const c_char,
    amode: c_int,
    info: Handle,
    fh: *mut Handle,
) -> c_int {
    let _c = crate::comm::comm!(comm);
    // SAFETY: C string.
    let path = std::path::PathBuf::from(unsafe { CStr::from_ptr(filename) }.to_string_lossy().into_owned());
    let mut flags = if amode & MPI_MODE_RDWR != 0 {
        libc::O_RDWR
    } else if amode & MPI_MODE_WRONLY != 0 {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    if amode & MPI_MODE_CREATE != 0 {
        flags |= libc::O_CREAT;
    }
    if amode & MPI_MODE_EXCL != 0 {
        flags |= libc::O_EXCL;
    }
    let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: a C string path; plain open(2).
    let fd = unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd < 0 {
        let eh = *FILE_DEFAULT_EH.lock();
        return crate::err::invoke(eh, MPI_FILE_NULL, MPI_ERR_NO_SUCH_FILE);
    }
    let f = FileObj {
        path,
        fd,
        delete_on_close: amode & MPI_MODE_DELETE_ON_CLOSE != 0,
        errhandler: Mutex::new(*FILE_DEFAULT_EH.lock()),
    };
    // SAFETY: output argument.
    unsafe { *fh = FILES.insert(Arc::new(f)) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_close(fh: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let Some(f) = FILES.remove(unsafe { *fh }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE) };
    // SAFETY: the descriptor this file owns.
    unsafe { libc::close(f.fd) };
    if f.delete_on_close {
        let _ = std::fs::remove_file(&f.path);
    }
    // SAFETY: in/out argument.
    unsafe { *fh = MPI_FILE_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_create_errhandler(file_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::err::MPI_Comm_create_errhandler(file_errhandler_fn, errhandler) }
}

pub(crate) unsafe fn MPI_File_set_errhandler(file: Handle, errhandler: Handle) -> c_int {
    if file == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock() = errhandler;
        return MPI_SUCCESS;
    }
    let Some(f) = FILES.get(file) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE) };
    *f.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_get_errhandler(file: Handle, errhandler: *mut Handle) -> c_int {
    let eh = if file == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock()
    } else {
        match FILES.get(file) {
            Some(f) => *f.errhandler.lock(),
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE),
        }
    };
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_call_errhandler(fh: Handle, errorcode: c_int) -> c_int {
    let eh = if fh == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock()
    } else {
        match FILES.get(fh) {
            Some(f) => *f.errhandler.lock(),
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE),
        }
    };
    let rc = crate::err::invoke(eh, fh, errorcode);
    if crate::err::fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}

// ---- external32: big-endian, native sizes -------------------------------------------

/// Converts packed data of `count` elements of `t` between native and big-endian byte
/// order in place (its own inverse): every leaf element is reversed.
fn swap_packed(buf: &mut [u8], count: usize, t: &crate::dtype::Dtype) {
    if cfg!(target_endian = "big") {
        return;
    }
    let mut pos = 0;
    for _ in 0..count {
        for s in &t.segs {
            let unit = s.esize.max(1);
            let end = (pos + s.len).min(buf.len());
            for chunk in buf[pos..end].chunks_mut(unit) {
                chunk.reverse();
            }
            pos = end;
        }
    }
}

unsafe fn datarep_ok(datarep: *const c_char) -> bool {
    // SAFETY: C string (MPI contract).
    !datarep.is_null() && unsafe { CStr::from_ptr(datarep) }.to_bytes() == b"external32"
}

pub(crate) unsafe fn MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: Handle,
    size: *mut MPI_Aint,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    // SAFETY: output argument.
    unsafe { *size = incount.max(0) as MPI_Aint * t.size as MPI_Aint };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: Handle,
    size: *mut MPI_Count,
) -> c_int {
    let mut s: MPI_Aint = 0;
    // SAFETY: forwarded; output argument.
    unsafe {
        let rc = MPI_Pack_external_size(datarep, small!(incount), datatype, &mut s);
        *size = s as MPI_Count;
        rc
    }
}

pub(crate) unsafe fn MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    let n = incount.max(0) as usize;
    // SAFETY: in/out argument.
    let pos = unsafe { *position }.max(0) as usize;
    if pos + n * t.size > outsize.max(0) as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TRUNCATE);
    }
    let mut tmp = Vec::new();
    // SAFETY: the program's buffers (MPI contract); room checked above.
    unsafe {
        crate::dtype::pack_into(inbuf.cast(), n, &t, &mut tmp);
        swap_packed(&mut tmp, n, &t);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), outbuf.cast::<u8>().add(pos), tmp.len());
        *position = (pos + tmp.len()) as MPI_Aint;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: Handle,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    let n = outcount.max(0) as usize;
    // SAFETY: in/out argument.
    let pos = unsafe { *position }.max(0) as usize;
    let need = n * t.size;
    if pos + need > insize.max(0) as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TRUNCATE);
    }
    // SAFETY: the program's buffers; size checked above.
    unsafe {
        let mut tmp = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), need).to_vec();
        swap_packed(&mut tmp, n, &t);
        crate::dtype::unpack_from(&tmp, outbuf.cast(), n, &t);
        *position = (pos + need) as MPI_Aint;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = unsafe { *position } as MPI_Aint;
    // SAFETY: forwarded.
    let rc =
        unsafe { MPI_Pack_external(datarep, inbuf, small!(incount), datatype, outbuf, outsize as MPI_Aint, &mut pos) };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}

pub(crate) unsafe fn MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = unsafe { *position } as MPI_Aint;
    // SAFETY: forwarded.
    let rc = unsafe {
        MPI_Unpack_external(datarep, inbuf, insize as MPI_Aint, &mut pos, outbuf, small!(outcount), datatype)
    };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}

pub(crate) unsafe fn MPI_Type_create_subarray_c(
    ndims: c_int,
    array_of_sizes: *const MPI_Count,
    array_of_subsizes: *const MPI_Count,
    array_of_starts: *const MPI_Count,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let n = ndims as MPI_Count;
    let a: Vec<c_int> = wide!(array_of_sizes, n);
    let b: Vec<c_int> = wide!(array_of_subsizes, n);
    let c: Vec<c_int> = wide!(array_of_starts, n);
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_create_subarray(ndims, a.as_ptr(), b.as_ptr(), c.as_ptr(), order, oldtype, newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const MPI_Count,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let g: Vec<c_int> = wide!(array_of_gsizes, ndims as MPI_Count);
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_create_darray(
            size,
            rank,
            ndims,
            g.as_ptr(),
            array_of_distribs,
            array_of_dargs,
            array_of_psizes,
            order,
            oldtype,
            newtype,
        )
    }
}
