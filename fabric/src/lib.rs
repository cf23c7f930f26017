//! Safe wrapper over the system libfabric for runthrough (T1, docs/REQUIREMENTS.md).
//!
//! This crate moves bytes between RDM endpoints and reports peer errors; it knows nothing
//! of MPI (no ranks, communicators or matching rules). What it never does: hide a
//! completion-queue error entry, retry in a loop, or read a clock — "would block" is
//! [`Error::Busy`], and turning persistent `Busy` into a signal is the [`StallTracker`]'s
//! job, driven with the caller's time.
//!
//! Parts (one concept per module):
//! - `ffi` (private): bindgen output generated from the libfabric headers and committed
//!   (`make bindings`; building needs no headers), the run-time loader and the
//!   header-inline calls re-expressed through the fid ops tables. It depends on no other
//!   module of the crate.
//! - [`error`]: typed [`Error`] / [`ErrorCode`] with `fi_strerror` texts, and `fi_call!`,
//!   the one mapping from raw returns to [`Error`].
//! - `addr` and `mr_attr` (private, re-exported from [`av`], [`mr`] and here): the plain
//!   value types that several wrappers pass around — [`FiAddr`]; [`MrMode`], [`MrPolicy`],
//!   [`Access`], [`MrDesc`], [`RemoteAccess`], [`RemoteKey`].
//! - [`info`]: `fi_getinfo` with [`Hints`], [`InfoList`], [`Info`], [`InfoAttrs`].
//! - [`fabric`], [`domain`], [`av`], [`cq`], [`ep`], [`mr`]: one RAII owner per fid,
//!   closed exactly once; children hold an `Arc` of their parent (domain → fabric,
//!   AV/CQ → domain, endpoint → domain + AV + CQ, endpoint-bound MR → endpoint), so any
//!   drop order of user handles is safe.
//! - [`mr_cache`]: registration cache with explicit invalidation.
//! - [`provider`]: run-time provider choice `auto|tcp|sockets|verbs|cxi` (pure logic).
//! - [`ops`]: in-flight operation slab that attributes CQ errors to their peer.
//! - [`stall`]: per-peer "busy past a bound" detection.
//!
//! The modules are layered, with no import circle between them (checked by the
//! workspace's `tests/layering.rs`). From the bottom up: `ffi`; `addr`; `error`; `mr_attr`;
//! `info`; `fabric`; `domain`; `av`, `cq`; `ep`; `mr`; `mr_cache`, `ops`, `provider`,
//! `stall` — each names only modules listed before it.
//!
//! Thread safety: hints always request `FI_THREAD_SAFE`, so every handle is `Send + Sync`.

mod addr;
mod ffi;
mod mr_attr;

pub mod av;
pub mod cq;
pub mod domain;
pub mod ep;
pub mod error;
pub mod fabric;
pub mod info;
pub mod mr;
pub mod mr_cache;
pub mod ops;
pub mod provider;
pub mod stall;

pub use av::{AddressVector, EpAddr, FiAddr};
pub use cq::{CompFlags, CompletionQueue, CqEntry, CqError, CqEvent, OpContext};
pub use domain::Domain;
pub use ep::Endpoint;
pub use error::{Error, ErrorCode, Result};
pub use fabric::Fabric;
pub use info::{Hints, Info, InfoAttrs, InfoList, InfoRef};
pub use mr::{Access, MemoryRegion, MrDesc, MrMode, MrPolicy, RemoteAccess, RemoteKey};
pub use mr_cache::{CacheStats, MrCache, RegCache, Registrar};
pub use ops::OpSlab;
pub use provider::{select, Provider, ProviderRequest, SelectError, Selection};
pub use stall::{Stall, StallTracker};

/// The libfabric runtime version (`fi_version()`), as `(major, minor)`; loads
/// `libfabric.so.1` if it is not loaded yet.
///
/// # Errors
/// [`Error::Load`] when the library cannot be loaded.
pub fn runtime_version() -> Result<(u32, u32), Error> {
    ffi::lib()?;
    let v = ffi::fi_version().unwrap_or(0);
    Ok((v >> 16, v & 0xffff))
}

/// The libfabric version of the headers this crate's bindings were generated from, as
/// `(major, minor)`.
pub fn header_version() -> (u32, u32) {
    (ffi::FI_MAJOR_VERSION, ffi::FI_MINOR_VERSION)
}
