//! Shared-memory transport of runthrough: moves byte records between the processes of one
//! job on one node. It knows nothing of MPI (docs/ARCHITECTURE.md §1; T2).
//!
//! Parts:
//! - [`segment`]: the per-job POSIX shm segment (0600, versioned header, one ring per
//!   ordered rank pair, inbound regions page-aligned for NUMA placement);
//! - [`ring`]: lock-free SPSC record rings of 64-byte cells with the flag in the data's
//!   cache line ("fastbox"), plus a heap-backed [`ring::channel`] for tests and benches;
//! - [`collarea`]: the segment's collective area (per-rank sequence words and small data
//!   buffers) for shared-memory collectives and the register agreement;
//! - [`winseg`]: the shared memory one-sided windows of a node live in ([`winseg::WinMap`]);
//! - [`cma`]: single-copy reads from a peer's memory (`process_vm_readv`);
//! - [`liveness`]: peer-exit watch with pidfds ([`PeerWatch`]), departures told apart
//!   from failures by the segment's [`segment::Departures`] marks;
//! - [`numa`]: hwloc topology and placement results;
//! - [`pin`]: core / NUMA-node binding policies;
//! - [`error`]: the typed [`Error`].
//!
//! Limits are data: [`RingTx::max_record`], [`Layout`], [`segment::MAX_RANKS`]. "Would
//! block" is [`PushError::Full`] (a normal outcome, retried by the caller) and "nothing to
//! read" is `None`. Unsafe code lives only in `segment.rs`, `collarea.rs`, `ring.rs`, `cma.rs`,
//! `winseg.rs` and `liveness.rs`.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod cma;
pub mod collarea;
pub mod error;
pub mod liveness;
mod mapping;
pub mod numa;
pub mod pin;
pub mod ring;
pub mod segment;
pub mod winseg;

pub use error::Error;
pub use liveness::{PeerExit, PeerWatch};
pub use ring::{Full, PushError, RingRx, RingTx};
pub use segment::{Layout, Segment};
