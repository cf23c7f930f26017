//! Memory registration (`fi_mr_reg`) honouring the provider's mr_mode bits (T1).
//!
//! Parts:
//! - [`MrMode`]: the `domain_attr->mr_mode` bits, with legacy `FI_MR_BASIC`/`SCALABLE`
//!   mapped to their modern equivalents, and [`MrMode::policy`] → [`MrPolicy`], the
//!   decisions each bit implies:
//!   `FI_MR_LOCAL` → local buffers need a descriptor ([`MrDesc`]) on every operation;
//!   `FI_MR_VIRT_ADDR` → the remote address is the virtual address, else the offset in the region;
//!   `FI_MR_PROV_KEY` → the provider picks keys, else we request unique ones per domain;
//!   `FI_MR_ALLOCATED` → only real allocated memory (never empty or NULL ranges);
//!   `FI_MR_ENDPOINT` → the MR is bound to an endpoint (`fi_mr_bind`) and enabled (cxi).
//!   Bits this crate cannot honour (`RAW`, `MMU_NOTIFY`, `RMA_EVENT`, `HMEM`, `COLLECTIVE`)
//!   are refused, and never advertised in hints.
//! - [`MemoryRegion`]: one registration, closed on drop (after any endpoint it is bound to
//!   has not yet been closed: it holds an `Arc<Endpoint>`).
//! - [`RemoteAccess`] / [`RemoteKey`]: what a peer needs to `fi_read` a registered range.
//!
//! The value types ([`MrMode`], [`MrPolicy`], [`Access`], [`MrDesc`], [`RemoteAccess`],
//! [`RemoteKey`]) are defined in the lower `mr_attr` module, which the info, domain and
//! endpoint modules use without depending on this one, and re-exported here.

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::error::{fi_call, Error, Result};
use crate::ffi;
pub use crate::mr_attr::{Access, MrDesc, MrMode, MrPolicy, RemoteAccess, RemoteKey};

/// One registered memory range.
pub struct MemoryRegion {
    raw: NonNull<ffi::fid_mr>,
    addr: usize,
    len: usize,
    policy: MrPolicy,
    domain: Arc<Domain>,
    ep: Option<Arc<Endpoint>>,
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr))
            .field("len", &self.len)
            .field("key", &self.key())
            .finish_non_exhaustive()
    }
}

// SAFETY: FI_THREAD_SAFE is always requested; the handle is an owned pointer and the
// registered memory is only described (address/length), never accessed, by this type.
unsafe impl Send for MemoryRegion {}
// SAFETY: see `Send`.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Register `len` bytes at `addr` with `access` rights, following the domain's mr_mode:
    /// requested key when the provider does not choose keys, and — under `FI_MR_ENDPOINT` —
    /// `fi_mr_bind` to `ep` then `fi_mr_enable`.
    ///
    /// # Safety
    /// `addr..addr+len` must be valid memory that stays allocated (not freed or unmapped)
    /// for as long as this region is open, including while peers may access it remotely.
    ///
    /// # Errors
    /// [`Error::InvalidArg`] for an empty range or a missing endpoint under `FI_MR_ENDPOINT`,
    /// [`Error::Unsupported`] for mr_mode bits we cannot honour, else the provider's code.
    pub unsafe fn register(
        domain: &Arc<Domain>,
        ep: Option<&Arc<Endpoint>>,
        addr: *const u8,
        len: usize,
        access: Access,
    ) -> Result<MemoryRegion> {
        let policy = domain.mr_mode().policy()?;
        if addr.is_null() || len == 0 {
            return Err(Error::InvalidArg("empty or NULL memory range"));
        }
        let bind_ep = match (policy.bind_endpoint, ep) {
            (true, None) => return Err(Error::InvalidArg("FI_MR_ENDPOINT domains need an endpoint to bind")),
            (true, Some(e)) => Some(Arc::clone(e)),
            (false, _) => None,
        };
        let requested_key = if policy.prov_key { 0 } else { domain.next_requested_key() };
        let mut out: *mut ffi::fid_mr = ptr::null_mut();
        // SAFETY: the domain is open; the caller guarantees the memory range.
        let ret = unsafe { ffi::mr_reg(domain.as_ptr(), addr.cast(), len, access.0, requested_key, 0, &mut out) };
        fi_call!("fi_mr_reg", ret)?;
        let raw = NonNull::new(out).ok_or(Error::Unsupported("fi_mr_reg returned NULL"))?;
        let mr = MemoryRegion { raw, addr: addr as usize, len, policy, domain: Arc::clone(domain), ep: bind_ep };
        if let Some(e) = &mr.ep {
            // SAFETY: MR and endpoint are open.
            fi_call!("fi_mr_bind", unsafe { ffi::bind(mr.as_fid(), e.as_fid(), 0) })?;
            // SAFETY: the MR is open and bound.
            fi_call!("fi_mr_enable", unsafe { ffi::enable(mr.as_fid()) })?;
        }
        Ok(mr)
    }

    /// Start address of the registered range.
    pub fn addr(&self) -> *const u8 {
        self.addr as *const u8
    }

    /// Length of the registered range.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never true: empty ranges are refused).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether `addr..addr+len` lies inside this registration.
    pub fn covers(&self, addr: *const u8, len: usize) -> bool {
        let a = addr as usize;
        a >= self.addr && a.checked_add(len).is_some_and(|end| end <= self.addr + self.len)
    }

    /// `fi_mr_desc`.
    pub fn desc(&self) -> MrDesc {
        // SAFETY: the MR is open; mem_desc is a plain field.
        MrDesc(unsafe { (*self.raw.as_ptr()).mem_desc } as usize)
    }

    /// `fi_mr_key` (read after enable, as `FI_MR_ENDPOINT` providers assign it then).
    pub fn key(&self) -> RemoteKey {
        // SAFETY: the MR is open; key is a plain field.
        RemoteKey(unsafe { (*self.raw.as_ptr()).key })
    }

    /// What a peer needs to read `len` bytes starting at `addr` (inside this region).
    ///
    /// # Errors
    /// [`Error::InvalidArg`] if the range is not covered.
    pub fn remote_access(&self, addr: *const u8, len: usize) -> Result<RemoteAccess> {
        if !self.covers(addr, len) {
            return Err(Error::InvalidArg("range outside the registration"));
        }
        let offset = addr as usize - self.addr;
        let remote = if self.policy.virt_addr { addr as u64 } else { offset as u64 };
        Ok(RemoteAccess { addr: remote, key: self.key(), len: len as u64 })
    }

    /// The mr_mode decisions this region was registered under.
    pub fn policy(&self) -> MrPolicy {
        self.policy
    }

    /// The domain.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    fn as_fid(&self) -> *mut ffi::fid {
        // SAFETY: `fid` is the first member of an open fid_mr.
        unsafe { &mut (*self.raw.as_ptr()).fid }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: we own the fid; the endpoint it may be bound to is still open (we hold it).
        let ret = unsafe { ffi::close(self.as_fid()) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(mr) failed");
        }
    }
}
