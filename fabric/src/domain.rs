//! The domain handle (`fi_domain`): the NIC/interface, owner of AVs, CQs, endpoints and MRs.
//!
//! Parts: [`Domain`], holding an `Arc<Fabric>` so the fabric outlives it, plus the
//! requested-key counter used when the provider does not pick MR keys (no `FI_MR_PROV_KEY`).

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{fi_call, Result};
use crate::fabric::Fabric;
use crate::ffi;
use crate::info::Info;
use crate::mr_attr::MrMode;

/// An open `fid_domain`.
pub struct Domain {
    raw: NonNull<ffi::fid_domain>,
    fabric: Arc<Fabric>,
    next_key: AtomicU64,
}

impl fmt::Debug for Domain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Domain").field("name", &self.info().attrs().domain).finish_non_exhaustive()
    }
}

// SAFETY: FI_THREAD_SAFE is always requested (see `info`); the handle is an owned pointer.
unsafe impl Send for Domain {}
// SAFETY: see `Send`; the key counter is atomic.
unsafe impl Sync for Domain {}

impl Domain {
    /// `fi_domain(fabric, info, &domain, NULL)` with the fabric's info.
    ///
    /// # Errors
    /// The provider's failure code.
    pub fn open(fabric: &Arc<Fabric>) -> Result<Arc<Domain>> {
        let mut out: *mut ffi::fid_domain = ptr::null_mut();
        // SAFETY: the fabric is open (we hold an Arc) and its info is valid.
        fi_call!("fi_domain", unsafe { ffi::domain(fabric.as_ptr(), fabric.info().as_ptr(), &mut out) })?;
        let raw = NonNull::new(out).ok_or(crate::Error::Unsupported("fi_domain returned NULL"))?;
        tracing::debug!(domain = %fabric.info().attrs().domain, "domain opened");
        Ok(Arc::new(Domain { raw, fabric: Arc::clone(fabric), next_key: AtomicU64::new(1) }))
    }

    /// Open fabric then domain from one info entry.
    ///
    /// # Errors
    /// As [`Fabric::open`] and [`Domain::open`].
    pub fn open_info(info: Arc<Info>) -> Result<Arc<Domain>> {
        Domain::open(&Fabric::open(info)?)
    }

    /// The parent fabric.
    pub fn fabric(&self) -> &Arc<Fabric> {
        &self.fabric
    }

    /// The info this domain was opened from.
    pub fn info(&self) -> &Arc<Info> {
        self.fabric.info()
    }

    /// The mr_mode bits the provider requires for this domain.
    pub fn mr_mode(&self) -> MrMode {
        self.info().attrs().mr_mode
    }

    /// A fresh requested key for `fi_mr_reg` (used when the provider does not choose keys).
    pub(crate) fn next_requested_key(&self) -> u64 {
        self.next_key.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fid_domain {
        self.raw.as_ptr()
    }
}

impl Drop for Domain {
    fn drop(&mut self) {
        // SAFETY: we own the fid; every child holds an Arc<Domain>, so none is open now.
        let ret = unsafe { ffi::close(&mut (*self.raw.as_ptr()).fid) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(domain) failed");
        }
    }
}
