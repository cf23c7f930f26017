//! `MPI_Win_allocate_shared` (MPI-4.1 12.2.3): one memory segment mapped by every member
//! of a host, each member's part right after the previous member's (contiguous, the
//! default), so that a member loads and stores the others' parts directly
//! (`MPI_Win_shared_query`) as well as through one-sided operations.
//!
//! The segment is a POSIX shared memory object (`shm_open`) named after the first
//! member's process and a counter, created by the first member with `O_EXCL` and mode
//! 0600, opened by the others, and unlinked by the first member once every member mapped
//! it: it leaves no name behind once the window exists, and its pages go when the last
//! mapping does. A communicator of one process maps anonymous memory instead. Members on
//! different hosts cannot share memory: the call then fails at every member with
//! `MPI_ERR_RMA_SHARED`. Each step ends with an agreement of the members (uniform, as
//! window creation is): every member maps the segment, or none keeps it.

use std::ffi::{c_int, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::commobj::CommObj;
use crate::consts::*;
use crate::raise::raise_on;
use crate::types::{Handle, MPI_Aint};
use crate::winobj::{Mapping, MemberMem, WinMem};

use super::{create, creation, refuse, Exposed};

/// Names this process's segments apart.
static SEGMENTS: AtomicU64 = AtomicU64::new(0);

/// Maps `len` bytes (at least one page) of the open shared memory object `fd`, or of
/// anonymous shared memory when `fd` is `None`.
fn map(fd: Option<c_int>, len: usize) -> Option<Mapping> {
    let len = len.max(1);
    let (flags, fd) = match fd {
        Some(fd) => (libc::MAP_SHARED, fd),
        None => (libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1),
    };
    // SAFETY: a new mapping chosen by the kernel; no existing memory is touched.
    let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
    (p != libc::MAP_FAILED).then(|| Mapping { base: p.cast(), len })
}

/// Creates (`create`) or opens the segment `name` of `len` bytes and maps it.
fn open_segment(name: &CString, len: usize, create: bool) -> Option<Mapping> {
    let flags = if create { libc::O_RDWR | libc::O_CREAT | libc::O_EXCL } else { libc::O_RDWR };
    // SAFETY: a NUL-terminated name; plain shm_open(3).
    let fd = unsafe { libc::shm_open(name.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return None;
    }
    // SAFETY: the descriptor just opened.
    let sized = !create || unsafe { libc::ftruncate(fd, len.max(1) as libc::off_t) } == 0;
    let m = if sized { map(Some(fd), len) } else { None };
    // SAFETY: the descriptor just opened; the mapping stays valid after it is closed.
    unsafe { libc::close(fd) };
    m
}

fn unlink(name: &CString) {
    // SAFETY: a NUL-terminated name; plain shm_unlink(3).
    unsafe { libc::shm_unlink(name.as_ptr()) };
}

/// Whether every member's `ok` holds (an agreement: the same answer everywhere, or an
/// error where a member failed).
fn all_ok(c: &CommObj, ok: bool) -> Result<bool, c_int> {
    c.comm.agree(i32::from(ok)).map(|v| v == 1).map_err(|e| crate::err::code_of(&e))
}

/// The mapping every member shares and each member's (offset, size, displacement unit)
/// in it, or the class every member returns.
fn share(c: &CommObj, size: usize, disp_unit: usize) -> Result<(Mapping, MemberMem), c_int> {
    let n = c.size();
    if n == 1 {
        let m = map(None, size).ok_or_else(|| refuse(MPI_ERR_NO_MEM, format!("cannot map {size} bytes")))?;
        return Ok((m, vec![(0, size, disp_unit as MPI_Aint)]));
    }
    // Every member's size, unit and host; the first member's name for the segment.
    let mine = [size as u64, disp_unit as u64, crate::comm::node_color() as u64, std::process::id() as u64, {
        SEGMENTS.fetch_add(1, Ordering::Relaxed)
    }];
    let mut all = vec![0u64; 5 * n];
    c.comm.allgather(&mine, &mut all).map_err(|e| crate::err::code_of(&e))?;
    let row = |r: usize| &all[5 * r..5 * r + 5];
    if (1..n).any(|r| row(r)[2] != row(0)[2]) {
        return Err(refuse(
            MPI_ERR_RMA_SHARED,
            "MPI_Win_allocate_shared: the members are on different hosts (split the communicator with \
             MPI_COMM_TYPE_SHARED first)"
                .into(),
        ));
    }
    let mut parts = Vec::with_capacity(n);
    let mut total = 0usize;
    for r in 0..n {
        let bytes = row(r)[0] as usize;
        parts.push((total, bytes, row(r)[1] as MPI_Aint));
        total = total.checked_add(bytes).ok_or(MPI_ERR_SIZE)?;
    }
    let name = CString::new(format!("/runthrough-win-{}-{}", row(0)[3], row(0)[4])).map_err(|_| MPI_ERR_INTERN)?;
    let first = c.rank == 0;
    let created = if first {
        let m = open_segment(&name, total, true);
        if m.is_none() {
            unlink(&name);
        }
        m
    } else {
        None
    };
    match all_ok(c, !first || created.is_some()) {
        Ok(true) => {}
        r => {
            if created.is_some() {
                unlink(&name);
            }
            return Err(refuse(
                r.err().unwrap_or(MPI_ERR_NO_MEM),
                format!("MPI_Win_allocate_shared: cannot create a shared segment of {total} bytes"),
            ));
        }
    }
    let m = if first { created } else { open_segment(&name, total, false) };
    let mapped = all_ok(c, m.is_some());
    if first {
        // Every member that could map it has: the name goes now (the pages stay).
        unlink(&name);
    }
    match (mapped, m) {
        (Ok(true), Some(m)) => Ok((m, parts)),
        (r, _) => Err(refuse(
            r.err().unwrap_or(MPI_ERR_RMA_SHARED),
            format!("MPI_Win_allocate_shared: a member cannot map the shared segment of {total} bytes"),
        )),
    }
}

/// `MPI_Win_allocate_shared` and its `_c` form.
///
/// # Safety
/// `baseptr` is a `void **` and `win` writable (MPI contract).
pub(super) unsafe fn win_allocate_shared(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    let (c, size, disp_unit) = match creation(comm, size, disp_unit) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if win.is_null() || baseptr.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    let (m, parts) = match share(&c, size, disp_unit) {
        Ok(x) => x,
        Err(e) => return raise_on(comm, e),
    };
    let at = m.base as usize;
    let shared: MemberMem = parts.iter().map(|&(off, bytes, unit)| (at + off, bytes, unit)).collect();
    let base = shared[c.rank].0 as *mut u8;
    let e = Exposed { mem: WinMem::Shared(m), base, size, disp_unit, flavor: MPI_WIN_FLAVOR_SHARED, shared };
    // SAFETY: `base` is this member's part of the mapping, which the window object keeps
    // past the window; `win` checked.
    let rc = unsafe { create(&c, comm, info, e, win) };
    if rc == MPI_SUCCESS {
        // SAFETY: `baseptr` is a `void **` (MPI contract).
        unsafe { *baseptr.cast::<*mut c_void>() = base.cast() };
    }
    rc
}
