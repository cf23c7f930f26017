//! Raw libfabric FFI, shaped like a `-sys` crate so it can be split out later.
//!
//! Parts:
//! - [`bindings`]: bindgen output, committed as `ffi/bindings.rs` (generated from the
//!   libfabric 1.17 headers by `make bindings`, `tools/gen-bindings`, which also works
//!   against 2.x, `fi_profile.h` included only when present; a test there fails while the
//!   file is stale), so building needs neither libclang nor `libfabric-dev`.
//! - The header-`static inline` calls (`fi_close`, `fi_domain`, `fi_tsend`, `fi_cq_read`, …)
//!   re-expressed in Rust through the fid ops tables, with no C shim. A missing (NULL) ops
//!   entry returns `-FI_ENOSYS`, as libfabric's own `fi_no_*` stubs do.
//! - Constants the bindings cannot express (`FI_ADDR_UNSPEC`, `FI_VERSION`), typed `u64`
//!   capability and mode constants.
//! - [`lib`]: the run-time loader, failing with its own [`LoadError`] (the crate's `Error`
//!   converts it), so that this module depends on nothing above it. Turning negative
//!   returns into typed errors (`fi_call!`) is the `error` module's job.
//!
//! Every function here is `unsafe`: it dereferences raw fid pointers that the caller must
//! keep open. The safe RAII owners live in the sibling modules.
#![deny(unsafe_op_in_unsafe_fn)]

use std::os::raw::{c_char, c_int, c_void};

#[allow(
    non_camel_case_types,
    non_upper_case_globals,
    non_snake_case,
    dead_code,
    unreachable_pub,
    missing_docs,
    missing_debug_implementations,
    clippy::all,
    clippy::pedantic,
    unsafe_op_in_unsafe_fn
)]
pub(crate) mod bindings {
    include!("bindings.rs");
}

pub(crate) use bindings::*;

/// The library loaded at run time (not linked, so that a process that never opens a
/// fabric does not run libfabric's dependencies' initialisers: Debian's libfabric pulls in
/// libinfinipath and libpsm2, whose constructors calibrate a clock for 0.2 s in every
/// process that loads them).
const LIBFABRIC: &str = "libfabric.so.1";

static LIB: std::sync::OnceLock<Result<FabricLib, String>> = std::sync::OnceLock::new();

/// Why `libfabric.so.1` could not be loaded: the message names the library and the
/// loader's reason. Becomes `Error::Load` (through `From`) in the callers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadError(pub(crate) String);

/// `libfabric.so.1`, loaded on first use (a fabric being opened) and kept for the
/// process's life; the error names the library when it cannot be loaded.
pub(crate) fn lib() -> Result<&'static FabricLib, LoadError> {
    LIB.get_or_init(|| {
        // SAFETY: loading the library runs its and its dependencies' initialisers, which
        // take no arguments; `FabricLib::new` resolves every symbol with the signature of
        // the headers its bindings were generated from (libfabric keeps its ABI within 1.x).
        unsafe { FabricLib::new(LIBFABRIC) }.map_err(|e| format!("cannot load {LIBFABRIC}: {e}"))
    })
    .as_ref()
    .map_err(|e| LoadError(e.clone()))
}

/// `fi_getinfo` of the loaded library (`-FI_ENOSYS` when it cannot be loaded; callers
/// check [`lib`] first to report why).
///
/// # Safety
/// As `fi_getinfo(3)`: valid strings or NULL, `hints` valid or NULL, `info` writable.
pub(crate) unsafe fn fi_getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const fi_info,
    info: *mut *mut fi_info,
) -> c_int {
    match lib() {
        // SAFETY: forwarded (function contract).
        Ok(l) => unsafe { l.fi_getinfo(version, node, service, flags, hints, info) },
        Err(_) => ENOSYS,
    }
}

/// `fi_freeinfo` of the loaded library (nothing to free when it was never loaded).
///
/// # Safety
/// `info` came from `fi_getinfo`/`fi_dupinfo` and is not used again.
pub(crate) unsafe fn fi_freeinfo(info: *mut fi_info) {
    if let Ok(l) = lib() {
        // SAFETY: forwarded (function contract).
        unsafe { l.fi_freeinfo(info) }
    }
}

/// `fi_dupinfo` of the loaded library (NULL when it cannot be loaded).
///
/// # Safety
/// `info` valid or NULL.
pub(crate) unsafe fn fi_dupinfo(info: *const fi_info) -> *mut fi_info {
    match lib() {
        // SAFETY: forwarded (function contract).
        Ok(l) => unsafe { l.fi_dupinfo(info) },
        Err(_) => std::ptr::null_mut(),
    }
}

/// `fi_fabric` of the loaded library.
///
/// # Safety
/// As `fi_fabric(3)`: `attr` from a live info, `fabric` writable.
pub(crate) unsafe fn fi_fabric(attr: *mut fi_fabric_attr, fabric: *mut *mut fid_fabric, context: *mut c_void) -> c_int {
    match lib() {
        // SAFETY: forwarded (function contract).
        Ok(l) => unsafe { l.fi_fabric(attr, fabric, context) },
        Err(_) => ENOSYS,
    }
}

/// `fi_version()` of the loaded library, `None` when it cannot be loaded.
pub(crate) fn fi_version() -> Option<u32> {
    // SAFETY: fi_version takes no arguments and has no preconditions.
    lib().ok().map(|l| unsafe { l.fi_version() })
}

/// `FI_ADDR_UNSPEC`: `((uint64_t) -1)` in the header, which bindgen cannot evaluate.
pub(crate) const ADDR_UNSPEC: u64 = u64::MAX;

/// `FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)` of the headers we were built with.
pub(crate) const API_VERSION: u32 = (FI_MAJOR_VERSION << 16) | FI_MINOR_VERSION;

/// Capability bits as `u64` (bindgen types the small ones `u32`).
pub(crate) mod caps {
    use super::bindings as b;
    pub(crate) const MSG: u64 = b::FI_MSG as u64;
    pub(crate) const RMA: u64 = b::FI_RMA as u64;
    pub(crate) const TAGGED: u64 = b::FI_TAGGED as u64;
    pub(crate) const READ: u64 = b::FI_READ as u64;
    pub(crate) const WRITE: u64 = b::FI_WRITE as u64;
    pub(crate) const RECV: u64 = b::FI_RECV as u64;
    pub(crate) const SEND: u64 = b::FI_SEND as u64;
    pub(crate) const TRANSMIT: u64 = b::FI_TRANSMIT as u64;
    pub(crate) const REMOTE_READ: u64 = b::FI_REMOTE_READ as u64;
    pub(crate) const REMOTE_WRITE: u64 = b::FI_REMOTE_WRITE as u64;
    pub(crate) const SOURCE: u64 = b::FI_SOURCE;
}

const ENOSYS: c_int = -(FI_ENOSYS as c_int);

/// `fi_strerror(errnum)` as an owned string (`errnum` positive).
pub(crate) fn strerror(errnum: i32) -> String {
    let Ok(l) = lib() else {
        return std::io::Error::from_raw_os_error(errnum).to_string();
    };
    // SAFETY: fi_strerror accepts any int and returns a pointer to a static, NUL-terminated
    // string (its own table or libc's strerror text), never NULL in practice; NULL is handled.
    unsafe {
        let p = l.fi_strerror(errnum);
        if p.is_null() {
            return format!("unknown error {errnum}");
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// `fi_close(fid)`.
///
/// # Safety
/// `f` must be an open fid that is not used again after this call.
pub(crate) unsafe fn close(f: *mut fid) -> c_int {
    // SAFETY: caller guarantees `f` is an open fid, so its ops table is valid.
    unsafe {
        match (*(*f).ops).close {
            Some(close) => close(f),
            None => ENOSYS,
        }
    }
}

/// `fi_control(fid, FI_ENABLE, NULL)` (`fi_enable` / `fi_mr_enable`).
///
/// # Safety
/// `f` must be an open fid.
pub(crate) unsafe fn enable(f: *mut fid) -> c_int {
    // SAFETY: caller guarantees `f` is open.
    unsafe {
        match (*(*f).ops).control {
            Some(control) => control(f, FI_ENABLE as c_int, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_ep_bind` / `fi_mr_bind`: `fid->ops->bind(fid, bfid, flags)`.
///
/// # Safety
/// `f` and `bfid` must be open fids.
pub(crate) unsafe fn bind(f: *mut fid, bfid: *mut fid, flags: u64) -> c_int {
    // SAFETY: caller guarantees both fids are open.
    unsafe {
        match (*(*f).ops).bind {
            Some(bind) => bind(f, bfid, flags),
            None => ENOSYS,
        }
    }
}

/// `fi_domain(fabric, info, &domain, NULL)`.
///
/// # Safety
/// `fabric` open, `info` a valid fi_info, `out` writable.
pub(crate) unsafe fn domain(fabric: *mut fid_fabric, info: *mut fi_info, out: *mut *mut fid_domain) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*fabric).ops).domain {
            Some(f) => f(fabric, info, out, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_av_open(domain, attr, &av, NULL)`.
///
/// # Safety
/// `dom` open, `attr` valid, `out` writable.
pub(crate) unsafe fn av_open(dom: *mut fid_domain, attr: *mut fi_av_attr, out: *mut *mut fid_av) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*dom).ops).av_open {
            Some(f) => f(dom, attr, out, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_cq_open(domain, attr, &cq, NULL)`.
///
/// # Safety
/// `dom` open, `attr` valid, `out` writable.
pub(crate) unsafe fn cq_open(dom: *mut fid_domain, attr: *mut fi_cq_attr, out: *mut *mut fid_cq) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*dom).ops).cq_open {
            Some(f) => f(dom, attr, out, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_endpoint(domain, info, &ep, NULL)`.
///
/// # Safety
/// `dom` open, `info` valid, `out` writable.
pub(crate) unsafe fn endpoint(dom: *mut fid_domain, info: *mut fi_info, out: *mut *mut fid_ep) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*dom).ops).endpoint {
            Some(f) => f(dom, info, out, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_mr_reg(domain, buf, len, access, 0, requested_key, flags, &mr, NULL)`.
///
/// # Safety
/// `dom` open, `buf..buf+len` valid memory for as long as the MR stays open, `out` writable.
pub(crate) unsafe fn mr_reg(
    dom: *mut fid_domain,
    buf: *const c_void,
    len: usize,
    access: u64,
    requested_key: u64,
    flags: u64,
    out: *mut *mut fid_mr,
) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*dom).mr).reg {
            Some(f) => f(&mut (*dom).fid, buf, len, access, 0, requested_key, flags, out, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_getname(&ep->fid, addr, &len)`.
///
/// # Safety
/// `ep` open, `addr` writable for `*len` bytes.
pub(crate) unsafe fn getname(ep: *mut fid_ep, addr: *mut c_void, len: *mut usize) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).cm).getname {
            Some(f) => f(&mut (*ep).fid, addr, len),
            None => ENOSYS,
        }
    }
}

/// `fi_av_insert(av, addr, count, fi_addr, 0, NULL)`.
///
/// # Safety
/// `av` open, `addr` holds `count` provider addresses, `out` writable for `count` entries.
pub(crate) unsafe fn av_insert(av: *mut fid_av, addr: *const c_void, count: usize, out: *mut u64) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*av).ops).insert {
            Some(f) => f(av, addr, count, out, 0, std::ptr::null_mut()),
            None => ENOSYS,
        }
    }
}

/// `fi_av_remove(av, fi_addr, count, 0)`.
///
/// # Safety
/// `av` open, `addrs` readable for `count` entries.
pub(crate) unsafe fn av_remove(av: *mut fid_av, addrs: *mut u64, count: usize) -> c_int {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*av).ops).remove {
            Some(f) => f(av, addrs, count, 0),
            None => ENOSYS,
        }
    }
}

/// `fi_cq_read(cq, buf, count)`.
///
/// # Safety
/// `cq` open, `buf` writable for `count` entries of the CQ's format.
pub(crate) unsafe fn cq_read(cq: *mut fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*cq).ops).read {
            Some(f) => f(cq, buf, count),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_cq_readerr(cq, buf, 0)`.
///
/// # Safety
/// `cq` open, `buf` a writable, zero-initialised error entry.
pub(crate) unsafe fn cq_readerr(cq: *mut fid_cq, buf: *mut fi_cq_err_entry) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*cq).ops).readerr {
            Some(f) => f(cq, buf, 0),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_cq_strerror(cq, prov_errno, err_data, buf, len)`; NULL when unsupported.
///
/// # Safety
/// `cq` open, `err_data` as returned by the last `fi_cq_readerr`, `buf` writable for `len`.
pub(crate) unsafe fn cq_strerror(
    cq: *mut fid_cq,
    prov_errno: c_int,
    err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*cq).ops).strerror {
            Some(f) => f(cq, prov_errno, err_data, buf, len),
            None => std::ptr::null(),
        }
    }
}

/// `fi_tsend(ep, buf, len, desc, dest, tag, ctx)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` stays valid until the completion is read.
pub(crate) unsafe fn tsend(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: u64,
    tag: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).tagged).send {
            Some(f) => f(ep, buf, len, desc, dest, tag, ctx),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_tinject(ep, buf, len, dest, tag)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` readable for the duration of the call.
pub(crate) unsafe fn tinject(ep: *mut fid_ep, buf: *const c_void, len: usize, dest: u64, tag: u64) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).tagged).inject {
            Some(f) => f(ep, buf, len, dest, tag),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_trecv(ep, buf, len, desc, src, tag, ignore, ctx)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` stays valid and unaliased until the completion is read.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn trecv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: u64,
    tag: u64,
    ignore: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).tagged).recv {
            Some(f) => f(ep, buf, len, desc, src, tag, ignore, ctx),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_send(ep, buf, len, desc, dest, ctx)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` stays valid until the completion is read.
pub(crate) unsafe fn send(
    ep: *mut fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    dest: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).msg).send {
            Some(f) => f(ep, buf, len, desc, dest, ctx),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_inject(ep, buf, len, dest)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` readable for the duration of the call.
pub(crate) unsafe fn inject(ep: *mut fid_ep, buf: *const c_void, len: usize, dest: u64) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).msg).inject {
            Some(f) => f(ep, buf, len, dest),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_recv(ep, buf, len, desc, src, ctx)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` stays valid and unaliased until the completion is read.
pub(crate) unsafe fn recv(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).msg).recv {
            Some(f) => f(ep, buf, len, desc, src, ctx),
            None => ENOSYS as isize,
        }
    }
}

/// `fi_read(ep, buf, len, desc, src, addr, key, ctx)`.
///
/// # Safety
/// `ep` open; `buf..buf+len` stays valid and unaliased until the completion is read.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn read(
    ep: *mut fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: u64,
    addr: u64,
    key: u64,
    ctx: *mut c_void,
) -> isize {
    // SAFETY: caller guarantees validity of all pointers.
    unsafe {
        match (*(*ep).rma).read {
            Some(f) => f(ep, buf, len, desc, src, addr, key, ctx),
            None => ENOSYS as isize,
        }
    }
}
