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

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::error::{Error, Result};
use crate::ffi::{self, caps, fi_call};

/// `domain_attr->mr_mode` bits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct MrMode(u64);

impl MrMode {
    /// `FI_MR_LOCAL`: local buffers must be registered and their descriptor passed.
    pub const LOCAL: MrMode = MrMode(ffi::FI_MR_LOCAL as u64);
    /// `FI_MR_RAW`: keys larger than 64 bits (unsupported here).
    pub const RAW: MrMode = MrMode(ffi::FI_MR_RAW as u64);
    /// `FI_MR_VIRT_ADDR`: remote addresses are virtual addresses.
    pub const VIRT_ADDR: MrMode = MrMode(ffi::FI_MR_VIRT_ADDR as u64);
    /// `FI_MR_ALLOCATED`: only allocated memory may be registered.
    pub const ALLOCATED: MrMode = MrMode(ffi::FI_MR_ALLOCATED as u64);
    /// `FI_MR_PROV_KEY`: the provider chooses keys.
    pub const PROV_KEY: MrMode = MrMode(ffi::FI_MR_PROV_KEY as u64);
    /// `FI_MR_MMU_NOTIFY` (unsupported here).
    pub const MMU_NOTIFY: MrMode = MrMode(ffi::FI_MR_MMU_NOTIFY as u64);
    /// `FI_MR_RMA_EVENT` (unsupported here).
    pub const RMA_EVENT: MrMode = MrMode(ffi::FI_MR_RMA_EVENT as u64);
    /// `FI_MR_ENDPOINT`: MRs are bound to an endpoint and enabled.
    pub const ENDPOINT: MrMode = MrMode(ffi::FI_MR_ENDPOINT as u64);
    /// `FI_MR_HMEM` (device memory; unsupported here).
    pub const HMEM: MrMode = MrMode(ffi::FI_MR_HMEM as u64);
    /// `FI_MR_COLLECTIVE` (unsupported here).
    pub const COLLECTIVE: MrMode = MrMode(ffi::FI_MR_COLLECTIVE as u64);
    /// The bits this crate can honour, advertised in [`crate::Hints`].
    pub const SUPPORTED: MrMode =
        MrMode(Self::LOCAL.0 | Self::VIRT_ADDR.0 | Self::ALLOCATED.0 | Self::PROV_KEY.0 | Self::ENDPOINT.0);

    /// From raw bits; legacy `FI_MR_BASIC` (1) becomes `VIRT_ADDR|ALLOCATED|PROV_KEY` and
    /// `FI_MR_SCALABLE` (2) becomes no bits, as the libfabric man page defines them.
    pub fn from_bits(bits: u64) -> MrMode {
        match bits {
            b if b == ffi::FI_MR_BASIC as u64 => MrMode(Self::VIRT_ADDR.0 | Self::ALLOCATED.0 | Self::PROV_KEY.0),
            b if b == ffi::FI_MR_SCALABLE as u64 => MrMode(0),
            b => MrMode(b),
        }
    }

    /// The raw bits.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: MrMode) -> bool {
        self.0 & other.0 == other.0
    }

    /// Bits set here that this crate cannot honour.
    pub fn unsupported(self) -> MrMode {
        MrMode(self.0 & !Self::SUPPORTED.0)
    }

    /// What these bits require of us.
    ///
    /// # Errors
    /// [`Error::Unsupported`] if any bit outside [`MrMode::SUPPORTED`] is set.
    pub fn policy(self) -> Result<MrPolicy> {
        if self.unsupported() != MrMode(0) {
            return Err(Error::Unsupported("mr_mode bits beyond LOCAL|VIRT_ADDR|ALLOCATED|PROV_KEY|ENDPOINT"));
        }
        Ok(MrPolicy {
            local_desc: self.contains(Self::LOCAL),
            virt_addr: self.contains(Self::VIRT_ADDR),
            prov_key: self.contains(Self::PROV_KEY),
            allocated_only: self.contains(Self::ALLOCATED),
            bind_endpoint: self.contains(Self::ENDPOINT),
        })
    }
}

impl std::ops::BitOr for MrMode {
    type Output = MrMode;
    fn bitor(self, rhs: MrMode) -> MrMode {
        MrMode(self.0 | rhs.0)
    }
}

impl fmt::Debug for MrMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: &[(MrMode, &str)] = &[
            (MrMode::LOCAL, "LOCAL"),
            (MrMode::RAW, "RAW"),
            (MrMode::VIRT_ADDR, "VIRT_ADDR"),
            (MrMode::ALLOCATED, "ALLOCATED"),
            (MrMode::PROV_KEY, "PROV_KEY"),
            (MrMode::MMU_NOTIFY, "MMU_NOTIFY"),
            (MrMode::RMA_EVENT, "RMA_EVENT"),
            (MrMode::ENDPOINT, "ENDPOINT"),
            (MrMode::HMEM, "HMEM"),
            (MrMode::COLLECTIVE, "COLLECTIVE"),
        ];
        let names: Vec<&str> = NAMES.iter().filter(|(m, _)| self.contains(*m)).map(|(_, n)| *n).collect();
        write!(f, "MrMode[{}]", names.join("|"))
    }
}

/// The decisions implied by a domain's mr_mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrPolicy {
    /// `FI_MR_LOCAL`: pass a descriptor for local buffers (eager bounce buffers must be
    /// pre-registered; receive buffers of a rendezvous read too).
    pub local_desc: bool,
    /// `FI_MR_VIRT_ADDR`: advertise virtual addresses, else offsets from the region start.
    pub virt_addr: bool,
    /// `FI_MR_PROV_KEY`: read the key after registration, else request a unique one.
    pub prov_key: bool,
    /// `FI_MR_ALLOCATED`: register only allocated, non-empty memory.
    pub allocated_only: bool,
    /// `FI_MR_ENDPOINT`: bind every MR to the endpoint and enable it before use.
    pub bind_endpoint: bool,
}

/// Access rights of a registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access(pub u64);

impl Access {
    /// Local send source.
    pub const SEND: Access = Access(caps::SEND);
    /// Local receive target.
    pub const RECV: Access = Access(caps::RECV);
    /// Local target of an RMA read we initiate.
    pub const READ: Access = Access(caps::READ);
    /// Remote peers may read it (rendezvous source).
    pub const REMOTE_READ: Access = Access(caps::REMOTE_READ);
    /// Remote peers may write it.
    pub const REMOTE_WRITE: Access = Access(caps::REMOTE_WRITE);
    /// Local source of an RMA write.
    pub const WRITE: Access = Access(caps::WRITE);
    /// Everything the eager and rendezvous protocols need on a buffer.
    pub const ALL: Access = Access(caps::SEND | caps::RECV | caps::READ | caps::REMOTE_READ);
}

impl std::ops::BitOr for Access {
    type Output = Access;
    fn bitor(self, rhs: Access) -> Access {
        Access(self.0 | rhs.0)
    }
}

/// A local memory descriptor (`fi_mr_desc`), passed to operations under `FI_MR_LOCAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrDesc(usize);

impl MrDesc {
    pub(crate) fn as_ptr(self) -> *mut std::os::raw::c_void {
        self.0 as *mut std::os::raw::c_void
    }
}

/// A remote protection key (`fi_mr_key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RemoteKey(pub u64);

/// What a peer needs to RMA-read a registered range: the address in the provider's
/// convention (virtual address or offset, per `FI_MR_VIRT_ADDR`), the key and the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAccess {
    /// Remote address to pass to `fi_read`.
    pub addr: u64,
    /// Remote key.
    pub key: RemoteKey,
    /// Bytes readable from `addr`.
    pub len: u64,
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mr_mode_policy_per_bit() {
        assert_eq!(MrMode::from_bits(0).policy().unwrap(), MrPolicy::default());
        let verbs = MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY;
        let p = verbs.policy().unwrap();
        assert!(p.local_desc && p.virt_addr && p.allocated_only && p.prov_key && !p.bind_endpoint);
        let cxi = MrMode::ENDPOINT | MrMode::ALLOCATED | MrMode::PROV_KEY;
        let p = cxi.policy().unwrap();
        assert!(p.bind_endpoint && p.prov_key && !p.local_desc && !p.virt_addr);
        assert!((MrMode::LOCAL | MrMode::RAW).policy().is_err());
        assert!((MrMode::HMEM).policy().is_err());
        assert_eq!((MrMode::LOCAL | MrMode::RMA_EVENT).unsupported(), MrMode::RMA_EVENT);
    }

    #[test]
    fn legacy_mr_modes_map_to_bits() {
        let basic = MrMode::from_bits(ffi::FI_MR_BASIC as u64);
        assert_eq!(basic, MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY);
        assert_eq!(MrMode::from_bits(ffi::FI_MR_SCALABLE as u64), MrMode::default());
        assert_eq!(format!("{:?}", MrMode::LOCAL | MrMode::ENDPOINT), "MrMode[LOCAL|ENDPOINT]");
        assert!(MrMode::SUPPORTED.contains(MrMode::ENDPOINT));
        assert!(!MrMode::SUPPORTED.contains(MrMode::RAW));
    }
}
