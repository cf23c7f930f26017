//! The fabric handle (`fi_fabric`), root of the fid tree.
//!
//! Parts: [`Fabric`], opened from an [`Info`] it keeps alive; closed (`fi_close`) when the
//! last `Arc` goes — which is after every domain opened from it, since domains hold an
//! `Arc<Fabric>`.

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::error::{fi_call, Result};
use crate::ffi;
use crate::info::Info;

/// An open `fid_fabric`.
pub struct Fabric {
    raw: NonNull<ffi::fid_fabric>,
    info: Arc<Info>,
}

impl fmt::Debug for Fabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fabric").field("provider", &self.info.attrs().provider).finish_non_exhaustive()
    }
}

// SAFETY: the crate always requests FI_THREAD_SAFE, so libfabric objects may be used from
// any thread concurrently; the handle itself is an owned pointer.
unsafe impl Send for Fabric {}
// SAFETY: see `Send`.
unsafe impl Sync for Fabric {}

impl Fabric {
    /// `fi_fabric(info->fabric_attr, &fabric, NULL)`.
    ///
    /// # Errors
    /// The provider's failure code.
    pub fn open(info: Arc<Info>) -> Result<Arc<Fabric>> {
        let mut out: *mut ffi::fid_fabric = ptr::null_mut();
        // SAFETY: `info` is a valid fi_info whose fabric_attr libfabric filled in.
        fi_call!("fi_fabric", unsafe { ffi::fi_fabric((*info.as_ptr()).fabric_attr, &mut out, ptr::null_mut()) })?;
        let raw = NonNull::new(out).ok_or(crate::Error::Unsupported("fi_fabric returned NULL"))?;
        tracing::debug!(provider = %info.attrs().provider, fabric = %info.attrs().fabric, "fabric opened");
        Ok(Arc::new(Fabric { raw, info }))
    }

    /// The info this fabric was opened from.
    pub fn info(&self) -> &Arc<Info> {
        &self.info
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fid_fabric {
        self.raw.as_ptr()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        // SAFETY: we own the fid; every child holds an Arc<Fabric>, so none is open now.
        let ret = unsafe { ffi::close(&mut (*self.raw.as_ptr()).fid) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(fabric) failed");
        }
    }
}
