//! The plain value types of memory registration, below every module that passes them
//! around (info, domain, endpoint, the memory region itself, provider selection).
//!
//! Parts:
//! - [`MrMode`]: the `domain_attr->mr_mode` bits, with legacy `FI_MR_BASIC`/`SCALABLE`
//!   mapped to their modern equivalents, and [`MrMode::policy`] → [`MrPolicy`], the
//!   decisions each bit implies (see [`crate::mr`]).
//! - [`Access`]: the access rights of a registration.
//! - [`MrDesc`]: a local descriptor passed to operations under `FI_MR_LOCAL`.
//! - [`RemoteAccess`] / [`RemoteKey`]: what a peer needs to `fi_read` a registered range.
//!
//! All are re-exported from [`crate::mr`] and the crate root.

use std::fmt;

use crate::error::{Error, Result};
use crate::ffi::{self, caps};

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
pub struct MrDesc(pub(crate) usize);

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
