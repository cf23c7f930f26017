//! Completion queues (`fi_cq_open`, `FI_CQ_FORMAT_TAGGED`) and their error entries (T1).
//!
//! Parts:
//! - [`OpContext`]: the token passed as an operation's context (a slab index, see
//!   [`crate::OpSlab`]), returned with its completion.
//! - [`CqEntry`] / [`CompFlags`]: a successful completion.
//! - [`CqError`]: an error entry read with `fi_cq_readerr` on `-FI_EAVAIL`, decoded (context,
//!   positive error code, provider errno, `fi_cq_strerror` text). Error entries are returned
//!   in the same stream as successes ([`CqEvent`]), so they are never dropped.
//! - [`CompletionQueue::read`]: drains up to `max` events into a caller's reused `Vec`.

use std::ffi::CStr;
use std::fmt;
use std::os::raw::c_char;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::addr::FiAddr;
use crate::domain::Domain;
use crate::error::{fi_call, Error, ErrorCode, Result};
use crate::ffi::{self, caps};

/// Entries fetched per `fi_cq_read` call.
const READ_BATCH: usize = 16;

/// The context token of an operation, echoed in its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpContext(pub usize);

impl OpContext {
    pub(crate) fn as_ptr(self) -> *mut std::os::raw::c_void {
        self.0 as *mut std::os::raw::c_void
    }
}

/// The `flags` of a completion (`FI_SEND`, `FI_RECV`, `FI_READ`, `FI_TAGGED`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompFlags(pub u64);

impl CompFlags {
    /// A send (msg or tagged) completed.
    pub fn is_send(self) -> bool {
        self.0 & caps::SEND != 0
    }
    /// A receive completed.
    pub fn is_recv(self) -> bool {
        self.0 & caps::RECV != 0
    }
    /// An RMA read completed.
    pub fn is_read(self) -> bool {
        self.0 & caps::READ != 0 && self.0 & caps::RMA != 0
    }
    /// A tagged operation.
    pub fn is_tagged(self) -> bool {
        self.0 & caps::TAGGED != 0
    }
    /// Short name of the operation kind, for reports.
    pub fn kind(self) -> &'static str {
        if self.is_read() {
            "rma-read"
        } else if self.is_recv() {
            "recv"
        } else if self.is_send() {
            "send"
        } else {
            "unknown"
        }
    }
}

/// A successful completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    /// The operation's context.
    pub context: OpContext,
    /// What completed.
    pub flags: CompFlags,
    /// Bytes received (receives); provider-defined otherwise.
    pub len: usize,
    /// The tag of a tagged receive.
    pub tag: u64,
    /// Remote CQ data, if any.
    pub data: u64,
}

/// A decoded completion-queue error entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CqError {
    /// The failed operation's context.
    pub context: OpContext,
    /// What failed (may be 0 if the provider did not say).
    pub flags: CompFlags,
    /// The error, positive (e.g. `FI_ECONNRESET`, `FI_ETRUNC`, `FI_ECANCELED`).
    pub err: ErrorCode,
    /// The provider-specific errno.
    pub prov_errno: i32,
    /// `fi_cq_strerror` of the provider errno (or `fi_strerror` of `err` as a fallback).
    pub prov_message: String,
    /// Length that was transferred, if any.
    pub len: usize,
    /// For `FI_ETRUNC`: the bytes that did not fit.
    pub olen: usize,
    /// The tag of a tagged operation.
    pub tag: u64,
    /// The peer, once attributed (see [`crate::OpSlab::complete`]); libfabric 1.x error
    /// entries do not carry it.
    pub peer: Option<FiAddr>,
}

impl CqError {
    /// Whether this error says the peer is gone (see [`ErrorCode::is_peer_failure`]).
    pub fn is_peer_failure(&self) -> bool {
        self.err.is_peer_failure()
    }
}

impl fmt::Display for CqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} op ctx={} failed: {} (prov_errno {}: {})",
            self.flags.kind(),
            self.context.0,
            self.err,
            self.prov_errno,
            self.prov_message
        )?;
        if let Some(p) = self.peer {
            write!(f, " peer {p}")?;
        }
        Ok(())
    }
}

/// One thing read from a completion queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CqEvent {
    /// An operation completed.
    Done(CqEntry),
    /// An operation failed.
    Failed(CqError),
}

impl CqEvent {
    /// The context of the operation this event is about.
    pub fn context(&self) -> OpContext {
        match self {
            CqEvent::Done(e) => e.context,
            CqEvent::Failed(e) => e.context,
        }
    }
}

/// An open `fid_cq` with the tagged entry format.
pub struct CompletionQueue {
    raw: NonNull<ffi::fid_cq>,
    domain: Arc<Domain>,
}

impl fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompletionQueue").field("domain", &self.domain).finish_non_exhaustive()
    }
}

// SAFETY: FI_THREAD_SAFE is always requested; the handle is an owned pointer.
unsafe impl Send for CompletionQueue {}
// SAFETY: see `Send`.
unsafe impl Sync for CompletionQueue {}

impl CompletionQueue {
    /// `fi_cq_open` with `size` entries (0: provider default), `FI_CQ_FORMAT_TAGGED`, no wait object.
    ///
    /// # Errors
    /// The provider's failure code.
    pub fn open(domain: &Arc<Domain>, size: usize) -> Result<Arc<CompletionQueue>> {
        let mut attr = ffi::fi_cq_attr {
            size,
            format: ffi::FI_CQ_FORMAT_TAGGED,
            wait_obj: ffi::FI_WAIT_NONE,
            ..Default::default()
        };
        let mut out: *mut ffi::fid_cq = ptr::null_mut();
        // SAFETY: the domain is open; attr and out are valid for the call.
        fi_call!("fi_cq_open", unsafe { ffi::cq_open(domain.as_ptr(), &mut attr, &mut out) })?;
        let raw = NonNull::new(out).ok_or(Error::Unsupported("fi_cq_open returned NULL"))?;
        Ok(Arc::new(CompletionQueue { raw, domain: Arc::clone(domain) }))
    }

    /// Read up to `max` events (successes and decoded error entries), appending to `out`.
    /// Returns how many were appended; 0 means the queue was empty. Also drives progress
    /// for providers with manual progress.
    ///
    /// # Errors
    /// A failure of `fi_cq_read`/`fi_cq_readerr` themselves (not of the operations).
    pub fn read(&self, out: &mut Vec<CqEvent>, max: usize) -> Result<usize> {
        let mut buf = [ffi::fi_cq_tagged_entry::default(); READ_BATCH];
        let mut total = 0;
        while total < max {
            let want = (max - total).min(READ_BATCH);
            // SAFETY: the CQ is open and `buf` holds `want` tagged entries (the CQ's format).
            let ret = unsafe { ffi::cq_read(self.as_ptr(), buf.as_mut_ptr().cast(), want) };
            if ret == -(ffi::FI_EAGAIN as isize) {
                break;
            }
            if ret == -(ffi::FI_EAVAIL as isize) {
                out.push(CqEvent::Failed(self.read_error()?));
                total += 1;
                continue;
            }
            let n = fi_call!("fi_cq_read", ret)? as usize;
            for e in &buf[..n] {
                out.push(CqEvent::Done(CqEntry {
                    context: OpContext(e.op_context as usize),
                    flags: CompFlags(e.flags),
                    len: e.len,
                    tag: e.tag,
                    data: e.data,
                }));
            }
            total += n;
            if n < want {
                break;
            }
        }
        Ok(total)
    }

    fn read_error(&self) -> Result<CqError> {
        let mut e = ffi::fi_cq_err_entry::default();
        // SAFETY: the CQ is open; `e` is zeroed, so err_data_size 0 asks the provider to point
        // err_data at its own buffer (valid until the next read, which we do not do before
        // decoding it below).
        let ret = unsafe { ffi::cq_readerr(self.as_ptr(), &mut e) };
        fi_call!("fi_cq_readerr", ret)?;
        let err = ErrorCode(e.err);
        let mut msg = [0 as c_char; 256];
        // SAFETY: the CQ is open, err_data comes from the readerr just done, msg is writable.
        let p = unsafe { ffi::cq_strerror(self.as_ptr(), e.prov_errno, e.err_data, msg.as_mut_ptr(), msg.len()) };
        let prov_message = if p.is_null() {
            err.message()
        } else {
            // SAFETY: providers return `msg` or a static string, NUL-terminated either way.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        };
        let decoded = CqError {
            context: OpContext(e.op_context as usize),
            flags: CompFlags(e.flags),
            err,
            prov_errno: e.prov_errno,
            prov_message,
            len: e.len,
            olen: e.olen,
            tag: e.tag,
            peer: None,
        };
        tracing::debug!(err = ?decoded.err, prov_errno = decoded.prov_errno, ctx = decoded.context.0, "cq error entry");
        Ok(decoded)
    }

    /// The parent domain.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fid_cq {
        self.raw.as_ptr()
    }

    pub(crate) fn as_fid(&self) -> *mut ffi::fid {
        // SAFETY: `fid` is the first member of an open fid_cq.
        unsafe { &mut (*self.raw.as_ptr()).fid }
    }
}

impl Drop for CompletionQueue {
    fn drop(&mut self) {
        // SAFETY: we own the fid; endpoints bound to it hold an Arc, so none is open now.
        let ret = unsafe { ffi::close(self.as_fid()) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(cq) failed");
        }
    }
}
