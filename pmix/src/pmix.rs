//! A PMIx client over the system's `libpmix.so.2`, loaded at run time (so programs need
//! libpmix only when they run under PMIx): [`Pmix::init`] (`PMIx_Init` and the job's
//! facts: size, node-local rank and size, host name), [`Pmix::put`] (`PMIx_Put` +
//! `PMIx_Commit`), [`Pmix::fence`] (`PMIx_Fence` over the namespace with
//! `PMIX_COLLECT_DATA`), [`Pmix::get`] (`PMIx_Get` of a peer's key), [`Pmix::abort`],
//! [`Pmix::finalize`], and the terminated-process evidence of an event handler
//! ([`Pmix::take_terminated`]).
//!
//! FFI discipline (docs/ARCHITECTURE.md §5): the library table lives in a process-wide
//! `OnceLock` and is never unloaded (PMIx keeps a progress thread that runs library code
//! until the process ends); every value `PMIx_Get` returns is owned by a `Value` whose
//! drop calls `PMIx_Value_destruct` and frees it; the event handler runs inside
//! `catch_unwind` (a panic there would otherwise unwind into C) and only records ranks.

use std::ffi::{c_char, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use crate::ffi;
use crate::Error;

/// The library's file name (PMIx 2.x to 5.x keep this soname).
pub const LIBPMIX: &str = "libpmix.so.2";
/// Environment variable a PMIx server sets for its clients (the namespace).
pub const PMIX_NAMESPACE_ENV: &str = "PMIX_NAMESPACE";
/// Environment variable a PMIx server sets for its clients (the rank).
pub const PMIX_RANK_ENV: &str = "PMIX_RANK";
/// `PMIX_RANK_WILDCARD` (`UINT32_MAX-1` in `pmix_common.h`, a macro bindgen cannot evaluate).
const RANK_WILDCARD: u32 = u32::MAX - 1;
/// The events that say a process of the job is gone.
const TERMINATION_EVENTS: [ffi::pmix_status_t; 4] = [
    ffi::PMIX_ERR_PROC_TERM_WO_SYNC,
    ffi::PMIX_EVENT_PROC_TERMINATED,
    ffi::PMIX_ERR_PROC_ABORTED,
    ffi::PMIX_PROC_TERMINATED,
];

static LIB: OnceLock<ffi::PmixLib> = OnceLock::new();
/// What the event handler saw: (namespace, rank) of terminated processes, and whether
/// the connection to the server was lost.
static EVENTS: Mutex<Events> = Mutex::new(Events { terminated: Vec::new(), lost_server: false });

#[derive(Debug)]
struct Events {
    terminated: Vec<(String, u32)>,
    lost_server: bool,
}

fn lib() -> Result<&'static ffi::PmixLib, Error> {
    if let Some(l) = LIB.get() {
        return Ok(l);
    }
    // SAFETY: loading libpmix runs its constructors, which only initialise the library's
    // own state; every symbol bindgen declared is resolved now (`dynamic_link_require_all`)
    // with the signature of the installed header it was generated from.
    let l = unsafe { ffi::PmixLib::new(LIBPMIX) }.map_err(|e| Error::Load(e.to_string()))?;
    Ok(LIB.get_or_init(|| l))
}

/// Maps a PMIx status to `Ok` (`PMIX_SUCCESS`) or an [`Error::Pmix`] naming `call`.
fn check(call: &'static str, status: ffi::pmix_status_t) -> Result<(), Error> {
    if status == ffi::PMIX_SUCCESS as ffi::pmix_status_t {
        return Ok(());
    }
    let text = match LIB.get() {
        // SAFETY: `PMIx_Error_string` takes any status and returns a pointer to a static
        // NUL-terminated string (or NULL), which is copied at once.
        Some(l) => unsafe {
            let p = l.PMIx_Error_string(status);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        },
        None => String::new(),
    };
    Err(Error::Pmix { call, status: text, code: status })
}

/// A `pmix_value_t` returned by `PMIx_Get`: destructed and freed on drop.
struct Value(*mut ffi::pmix_value_t);

impl Value {
    fn get(&self) -> &ffi::pmix_value_t {
        // SAFETY: `PMIx_Get` returned a non-null pointer to a value it allocated for the
        // caller (checked non-null in `get_value`), which this wrapper owns until drop.
        unsafe { &*self.0 }
    }

    /// The value as an unsigned integer, whatever integer type it was stored with.
    fn as_u64(&self) -> Option<u64> {
        let v = self.get();
        let t = u32::from(v.type_);
        // SAFETY: each arm reads the union member that the type tag says is stored.
        unsafe {
            Some(match t {
                ffi::PMIX_UINT8 => u64::from(v.data.uint8),
                ffi::PMIX_UINT16 => u64::from(v.data.uint16),
                ffi::PMIX_UINT32 => u64::from(v.data.uint32),
                ffi::PMIX_UINT64 => v.data.uint64,
                ffi::PMIX_SIZE => v.data.size as u64,
                ffi::PMIX_INT => u64::try_from(v.data.integer).ok()?,
                ffi::PMIX_INT16 => u64::try_from(v.data.int16).ok()?,
                ffi::PMIX_INT32 => u64::try_from(v.data.int32).ok()?,
                ffi::PMIX_PROC_RANK => u64::from(v.data.rank),
                _ => return None,
            })
        }
    }

    /// The value as bytes: a byte object's, or a string's (without its NUL).
    fn as_bytes(&self) -> Option<Vec<u8>> {
        let v = self.get();
        let t = u32::from(v.type_);
        // SAFETY: each arm reads the union member the type tag names; a byte object's
        // `bytes` points to `size` bytes and a string is NUL-terminated, both owned by
        // the value (alive while `self` is), and copied out here.
        unsafe {
            match t {
                ffi::PMIX_BYTE_OBJECT => {
                    let bo = v.data.bo;
                    if bo.size == 0 {
                        Some(Vec::new())
                    } else if bo.bytes.is_null() {
                        None
                    } else {
                        Some(std::slice::from_raw_parts(bo.bytes.cast::<u8>(), bo.size).to_vec())
                    }
                }
                ffi::PMIX_STRING if !v.data.string.is_null() => Some(CStr::from_ptr(v.data.string).to_bytes().to_vec()),
                _ => None,
            }
        }
    }
}

impl Drop for Value {
    fn drop(&mut self) {
        if let Some(l) = LIB.get() {
            // SAFETY: the pointer came from `PMIx_Get` (allocated with malloc, as
            // `PMIX_VALUE_RELEASE` assumes) and is released exactly once, here.
            unsafe {
                l.PMIx_Value_destruct(self.0);
                libc::free(self.0.cast::<c_void>());
            }
        }
    }
}

/// A process's name in PMIx terms.
fn proc_name(nspace: &[c_char; 256], rank: u32) -> ffi::pmix_proc_t {
    ffi::pmix_proc_t { nspace: *nspace, rank }
}

/// A key as PMIx takes it: NUL-terminated, at most 511 bytes.
fn key(k: &str) -> Result<CString, Error> {
    if k.len() > 511 {
        return Err(Error::Invalid(format!("PMIx key {k:?} longer than 511 bytes")));
    }
    CString::new(k).map_err(|_| Error::Invalid(format!("PMIx key {k:?} holds a NUL")))
}

/// An initialised PMIx client (one per process). Drop finalizes.
#[derive(Debug)]
pub struct Pmix {
    me: u32,
    nspace: [c_char; 256],
    finalized: bool,
}

impl Pmix {
    /// Whether this process was started by a PMIx server (`PMIX_NAMESPACE` or
    /// `PMIX_RANK` set).
    pub fn in_env() -> bool {
        Pmix::in_vars(|v| std::env::var_os(v).is_some())
    }

    /// [`Pmix::in_env`] with `is_set` telling whether a variable is set.
    pub fn in_vars(is_set: impl Fn(&str) -> bool) -> bool {
        is_set(PMIX_NAMESPACE_ENV) || is_set(PMIX_RANK_ENV)
    }

    /// Loads the library, calls `PMIx_Init` and registers the termination event handler.
    ///
    /// # Errors
    /// [`Error::Load`] without `libpmix.so.2`; [`Error::Pmix`] when `PMIx_Init` fails
    /// (no server to connect to). A failed event registration is only logged: the
    /// caller's other failure evidence remains.
    pub fn init() -> Result<Pmix, Error> {
        let l = lib()?;
        let mut me = ffi::pmix_proc_t::default();
        // SAFETY: `me` is a valid out-parameter; no info array is passed.
        check("PMIx_Init", unsafe { l.PMIx_Init(&mut me, std::ptr::null_mut(), 0) })?;
        let p = Pmix { me: me.rank, nspace: me.nspace, finalized: false };
        let mut codes = TERMINATION_EVENTS;
        // SAFETY: `codes` outlives the call (PMIx copies it); the handler is an
        // `extern "C"` function with the `pmix_notification_fn_t` signature that never
        // unwinds; no completion callback, so the call blocks and returns the handler id
        // (>= 0) or an error.
        let rc = unsafe {
            l.PMIx_Register_event_handler(
                codes.as_mut_ptr(),
                codes.len(),
                std::ptr::null_mut(),
                0,
                Some(on_event),
                None,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            tracing::debug!(status = rc, "PMIx event handler not registered; no termination events");
        }
        let mut lost = [ffi::PMIX_ERR_LOST_CONNECTION];
        // SAFETY: as above.
        let rc = unsafe {
            l.PMIx_Register_event_handler(
                lost.as_mut_ptr(),
                1,
                std::ptr::null_mut(),
                0,
                Some(on_event),
                None,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            tracing::debug!(status = rc, "PMIx lost-connection handler not registered");
        }
        Ok(p)
    }

    /// This process's rank in its namespace.
    pub fn rank(&self) -> u32 {
        self.me
    }

    /// The namespace (Slurm: `slurm.pmix.JOBID.STEPID`), unique per job step.
    pub fn namespace(&self) -> String {
        let Some(end) = self.nspace.iter().position(|&c| c == 0) else { return String::new() };
        let bytes: Vec<u8> = self.nspace[..end].iter().map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    fn get_value(&self, rank: u32, k: &str, optional: bool) -> Result<Value, Error> {
        let l = lib()?;
        let proc_ = proc_name(&self.nspace, rank);
        let k = key(k)?;
        let mut out: *mut ffi::pmix_value_t = std::ptr::null_mut();
        let mut info = ffi::pmix_info_t::default();
        let n = if optional {
            set_info_flag(&mut info, ffi::PMIX_OPTIONAL);
            1
        } else {
            0
        };
        // SAFETY: `proc_`, `k` and `info` outlive the call; `out` is a valid
        // out-parameter that PMIx sets to a value it allocated (owned by `Value` below).
        check("PMIx_Get", unsafe { l.PMIx_Get(&proc_, k.as_ptr(), &info, n, &mut out) })?;
        if out.is_null() {
            return Err(Error::NotFound(k.to_string_lossy().into_owned()));
        }
        Ok(Value(out))
    }

    /// A job- or process-level integer (`PMIX_JOB_SIZE` with `rank` = `None`: the
    /// namespace's; `PMIX_LOCAL_RANK` with `Some(own rank)`).
    ///
    /// # Errors
    /// [`Error::Pmix`] when PMIx has no such key; [`Error::Protocol`] when it is no
    /// unsigned integer.
    pub fn get_u32(&self, rank: Option<u32>, k: &str) -> Result<u32, Error> {
        let v = self.get_value(rank.unwrap_or(RANK_WILDCARD), k, true)?;
        v.as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .ok_or_else(|| Error::Protocol(format!("PMIx {k}: not an unsigned 32-bit integer")))
    }

    /// A string-valued key of process `rank` (e.g. `PMIX_HOSTNAME`).
    ///
    /// # Errors
    /// As [`Pmix::get_u32`].
    pub fn get_string(&self, rank: u32, k: &str) -> Result<String, Error> {
        let v = self.get_value(rank, k, true)?;
        let b = v.as_bytes().ok_or_else(|| Error::Protocol(format!("PMIx {k}: not a string")))?;
        String::from_utf8(b).map_err(|_| Error::Protocol(format!("PMIx {k}: not UTF-8")))
    }

    /// The number of processes of the job (`PMIX_JOB_SIZE`).
    ///
    /// # Errors
    /// As [`Pmix::get_u32`].
    pub fn job_size(&self) -> Result<u32, Error> {
        self.get_u32(None, key_str(ffi::PMIX_JOB_SIZE))
    }

    /// This process's rank among the job's processes on its node (`PMIX_LOCAL_RANK`).
    ///
    /// # Errors
    /// As [`Pmix::get_u32`].
    pub fn local_rank(&self) -> Result<u32, Error> {
        self.get_u32(Some(self.me), key_str(ffi::PMIX_LOCAL_RANK))
    }

    /// The number of the job's processes on this node (`PMIX_LOCAL_SIZE`).
    ///
    /// # Errors
    /// As [`Pmix::get_u32`].
    pub fn local_size(&self) -> Result<u32, Error> {
        self.get_u32(None, key_str(ffi::PMIX_LOCAL_SIZE))
    }

    /// This process's host name (`PMIX_HOSTNAME`).
    ///
    /// # Errors
    /// As [`Pmix::get_string`].
    pub fn hostname(&self) -> Result<String, Error> {
        self.get_string(self.me, key_str(ffi::PMIX_HOSTNAME))
    }

    /// Publishes `k` = `value` (a byte object, global scope) and commits it; peers see it
    /// after the next [`Pmix::fence`].
    ///
    /// # Errors
    /// [`Error::Pmix`] from `PMIx_Put` or `PMIx_Commit`.
    pub fn put(&self, k: &str, value: &[u8]) -> Result<(), Error> {
        let l = lib()?;
        let k = key(k)?;
        let mut bytes = value.to_vec();
        let mut v = ffi::pmix_value_t { type_: ffi::PMIX_BYTE_OBJECT as ffi::pmix_data_type_t, ..Default::default() };
        v.data.bo = ffi::pmix_byte_object_t { bytes: bytes.as_mut_ptr().cast::<c_char>(), size: bytes.len() };
        // SAFETY: `k` and `v` (and the bytes it points to) outlive the call; PMIx copies
        // the value into its own store.
        check("PMIx_Put", unsafe { l.PMIx_Put(ffi::PMIX_GLOBAL as ffi::pmix_scope_t, k.as_ptr(), &mut v) })?;
        // SAFETY: no arguments; pushes this process's puts to its server.
        check("PMIx_Commit", unsafe { l.PMIx_Commit() })
    }

    /// Waits until every process of the namespace has entered the fence, collecting
    /// the data they put (`PMIX_COLLECT_DATA`).
    ///
    /// # Errors
    /// [`Error::Pmix`] from `PMIx_Fence` (e.g. a process of the job is gone).
    pub fn fence(&self) -> Result<(), Error> {
        let l = lib()?;
        let all = proc_name(&self.nspace, RANK_WILDCARD);
        let mut info = ffi::pmix_info_t::default();
        set_info_flag(&mut info, ffi::PMIX_COLLECT_DATA);
        // SAFETY: `all` and `info` outlive the blocking call.
        check("PMIx_Fence", unsafe { l.PMIx_Fence(&all, 1, &info, 1) })
    }

    /// The value process `rank` put under `k` (before the last fence).
    ///
    /// # Errors
    /// [`Error::Pmix`] when it is not found; [`Error::Protocol`] for a value that is no
    /// byte object.
    pub fn get(&self, rank: u32, k: &str) -> Result<Vec<u8>, Error> {
        let v = self.get_value(rank, k, false)?;
        v.as_bytes().ok_or_else(|| Error::Protocol(format!("PMIx {k} of rank {rank}: not a byte object")))
    }

    /// Ranks of this namespace that the server reported terminated since the last call
    /// (each once), and whether the connection to the server was lost.
    pub fn take_terminated(&self) -> (Vec<u32>, bool) {
        let ns = self.namespace();
        let mut ev = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
        let mut mine = Vec::new();
        ev.terminated.retain(|(n, r)| {
            if *n == ns {
                mine.push(*r);
                false
            } else {
                true
            }
        });
        (mine, ev.lost_server)
    }

    /// Asks the server to abort every process of the namespace with `status`.
    ///
    /// # Errors
    /// [`Error::Pmix`] when the server refuses (the caller exits anyway).
    pub fn abort(&self, status: i32, msg: &str) -> Result<(), Error> {
        let l = lib()?;
        let msg = CString::new(msg.replace('\0', " ")).unwrap_or_default();
        // SAFETY: `msg` outlives the call; no process list means the whole namespace.
        check("PMIx_Abort", unsafe { l.PMIx_Abort(status, msg.as_ptr(), std::ptr::null_mut(), 0) })
    }

    /// `PMIx_Finalize` (once; drop calls it too).
    ///
    /// # Errors
    /// [`Error::Pmix`] from `PMIx_Finalize`.
    pub fn finalize(&mut self) -> Result<(), Error> {
        if std::mem::replace(&mut self.finalized, true) {
            return Ok(());
        }
        let l = lib()?;
        // SAFETY: no info array; called once per successful `PMIx_Init`.
        check("PMIx_Finalize", unsafe { l.PMIx_Finalize(std::ptr::null(), 0) })
    }
}

impl Drop for Pmix {
    fn drop(&mut self) {
        if let Err(e) = self.finalize() {
            tracing::debug!(error = %e, "PMIx_Finalize on drop");
        }
    }
}

/// A bindgen key constant (`b"pmix.job.size\0"`) as `&str`.
fn key_str(k: &'static [u8]) -> &'static str {
    CStr::from_bytes_until_nul(k).ok().and_then(|c| c.to_str().ok()).unwrap_or_default()
}

/// Sets `info` to the boolean directive `k` = true (`k` a bindgen key constant).
fn set_info_flag(info: &mut ffi::pmix_info_t, k: &[u8]) {
    let k = CStr::from_bytes_until_nul(k).map(CStr::to_bytes).unwrap_or(k);
    for (d, s) in info.key.iter_mut().zip(k.iter().take(511)) {
        *d = *s as c_char;
    }
    info.value.type_ = ffi::PMIX_BOOL as ffi::pmix_data_type_t;
    info.value.data.flag = true;
}

/// The event handler PMIx calls (from its progress thread): records the affected
/// process, then tells PMIx the event is handled. Never unwinds.
unsafe extern "C" fn on_event(
    _id: usize,
    status: ffi::pmix_status_t,
    source: *const ffi::pmix_proc_t,
    info: *mut ffi::pmix_info_t,
    ninfo: usize,
    _results: *mut ffi::pmix_info_t,
    _nresults: usize,
    cbfunc: ffi::pmix_event_notification_cbfunc_fn_t,
    cbdata: *mut c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: PMIx passes `ninfo` valid infos (or NULL with 0) and a valid or NULL
        // source, all alive for the duration of the call; only copies are kept.
        let affected = unsafe { affected_proc(source, info, ninfo) };
        let mut ev = EVENTS.lock().unwrap_or_else(|e| e.into_inner());
        if status == ffi::PMIX_ERR_LOST_CONNECTION {
            ev.lost_server = true;
        } else if let Some(p) = affected {
            if !ev.terminated.contains(&p) {
                ev.terminated.push(p);
            }
        }
    }));
    if let Some(cb) = cbfunc {
        // SAFETY: the completion callback PMIx gave with this event, called once with its
        // own `cbdata`, no results and no further callback, as `pmix_common.h` asks.
        let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
            cb(ffi::PMIX_EVENT_ACTION_COMPLETE, std::ptr::null_mut(), 0, None, std::ptr::null_mut(), cbdata)
        }));
    }
}

/// The process an event is about: the `PMIX_EVENT_AFFECTED_PROC` info, else the source.
///
/// # Safety
/// `source` is NULL or valid; `info` points to `ninfo` valid infos (or `ninfo` is 0).
unsafe fn affected_proc(
    source: *const ffi::pmix_proc_t,
    info: *const ffi::pmix_info_t,
    ninfo: usize,
) -> Option<(String, u32)> {
    let name = |p: &ffi::pmix_proc_t| {
        let ns = &p.nspace;
        let end = ns.iter().position(|&c| c == 0)?;
        let bytes: Vec<u8> = ns[..end].iter().map(|&c| c as u8).collect();
        Some((String::from_utf8_lossy(&bytes).into_owned(), p.rank))
    };
    let want = CStr::from_bytes_until_nul(ffi::PMIX_EVENT_AFFECTED_PROC).ok()?.to_bytes();
    if !info.is_null() {
        // SAFETY: the caller's contract: `ninfo` valid infos.
        let infos = unsafe { std::slice::from_raw_parts(info, ninfo) };
        for i in infos {
            let kb: Vec<u8> = i.key.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            if kb == want && u32::from(i.value.type_) == ffi::PMIX_PROC {
                // SAFETY: the type tag says the union holds a `pmix_proc_t *`.
                let p = unsafe { i.value.data.proc_ };
                if !p.is_null() {
                    // SAFETY: non-null, owned by the info for the call's duration.
                    return name(unsafe { &*p });
                }
            }
        }
    }
    if source.is_null() {
        return None;
    }
    // SAFETY: non-null and valid per the caller's contract.
    name(unsafe { &*source })
}
