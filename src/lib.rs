//! runthrough: fault-tolerant message passing over shared memory (and libfabric).
//!
//! The facade is thin: [`init`] bootstraps the process (under `rtrun`, or as a
//! singleton) and returns a [`Runtime`] whose [`Runtime::world`] communicator sends and
//! receives typed buffers ([`Pod`] types or raw bytes).
//!
//! ```no_run
//! let rt = runthrough::init()?;
//! let world = rt.world();
//! let (rank, size) = (world.rank(), world.size());
//! let mut token = [0u64];
//! if rank == 0 {
//!     world.send(&[41u64], 1 % size, 0)?;
//!     world.recv(&mut token, size - 1, 0)?;
//! } else {
//!     world.recv(&mut token, rank - 1, 0)?;
//!     token[0] += 1;
//!     world.send(&token, (rank + 1) % size, 0)?;
//! }
//! rt.finalize()?;
//! # Ok::<(), runthrough::Error>(())
//! ```
//!
//! Nonblocking operations run inside a request scope ([`scope`]), like threads inside
//! `std::thread::scope`: their buffers stay borrowed until the scope ends, and the scope
//! settles every request started in it before it returns.
//!
//! ```no_run
//! # let rt = runthrough::init()?;
//! # let world = rt.world();
//! let (mut inbox, outbox) = ([0u64; 4], [7u64; 4]);
//! let peer = (world.rank() + 1) % world.size();
//! runthrough::scope(|s| {
//!     let r = world.irecv(s, &mut inbox, runthrough::ANY_SOURCE, 3)?;
//!     let q = world.isend(s, &outbox, peer, 3)?;
//!     q.wait()?;
//!     r.wait()
//! })?;
//! assert_eq!(inbox, [7; 4]); // the borrow ended with the scope
//! // A request that must outlive any scope owns its buffer and hands it back:
//! let r = world.irecv_owned(vec![0u64; 4], runthrough::ANY_SOURCE, 4)?;
//! let (buf, status) = r.wait();
//! # let _ = (buf, status);
//! # Ok::<(), runthrough::Error>(())
//! ```
//!
//! Parts: [`runtime`] (init, finalize, the fatal scope), [`comm`] (communicators, error
//! modes, point-to-point), [`request`] (nonblocking requests: scoped and owned),
//! [`coll`] (collectives and reduction operators), [`group`] (process groups).
//!
//! # Safety
//!
//! This crate has no `unsafe` code (`#![forbid(unsafe_code)]`), and no safe program can
//! make the engine read or write memory the program does not own, whatever handles it
//! leaks (R30; `mem::forget`, `ManuallyDrop`, `Rc` cycles included). The argument:
//!
//! 1. A pending request makes the engine, a peer (CMA) or a NIC (RMA) access the
//!    request's buffer until the request settles. Safety never rests on a handle's
//!    `Drop`, because Rust does not promise that `Drop` runs.
//! 2. Every request that borrows a buffer ([`Comm::isend`], [`Comm::irecv`],
//!    [`Comm::ibarrier`], [`Comm::ibcast`], [`Comm::ireduce`], [`Comm::iallreduce`]) is
//!    started through a [`RequestScope`] and borrows the buffer (and the communicator)
//!    for the scope's lifetime `'scope`. That lifetime is chosen by [`scope`], not by the
//!    caller, and lasts until [`scope`] returns, so the borrow checker keeps the buffer
//!    alive and unaliased for as long as the scope exists, whatever happens to the
//!    handle. A handle cannot outlive the scope: its type names `'scope`, which no type
//!    outside the closure can name (`tests/ui/*.rs` shows each way out failing to
//!    compile).
//! 3. [`scope`] itself (not a destructor the caller could skip) settles every request
//!    started in the scope after the closure returns or unwinds: it finds them by the
//!    scope's token in the engine's request slab, cancels unmatched receives and
//!    progresses the rest to completion. Only then does the borrow end.
//! 4. [`OwnedRequest`]s take their `Vec<T>` apart and rebuild it only once the request
//!    settled; a leaked handle leaks the vector, so memory the engine may still touch is
//!    never freed or reused.
//! 5. Blocking calls start and settle their request within the call; no handle reaches
//!    the caller. [`Comm::ivalidate`]'s request holds no buffer.
//!
//! What leaking still costs is not memory safety: a leaked nonblocking collective is
//! abandoned at the scope's end (its receives cancelled), so the other members may fail
//! or wait for its part, as in MPI a request never completed is erroneous. The audit of
//! the other places where safety could rest on `Drop` or on a caller is in
//! `docs/SOUNDNESS.md`; `tests/leak.rs` leaks every kind of request and checks that
//! reallocated memory stays untouched (shared memory and libfabric tcp).
//!
//! Errors are [`Error`] values (R1); under the default [`ErrorMode::ErrorsAreFatal`] an
//! error aborts the processes of the communicator's group (R3), under
//! [`ErrorMode::ErrorsReturn`] it is returned.
#![forbid(unsafe_code)]

mod boot;
mod bootstrap;
pub mod coll;
pub mod comm;
pub mod config;
pub mod file;
pub mod group;
mod intercoll;
mod intercomm;
mod neighbor;
pub use neighbor::{NeighborKind, NeighborRequest, PersistentNeighbor};
mod peer_entry;
pub mod raw;
pub mod request;
pub mod runtime;
pub mod sched;
mod shared;
pub mod topo;
mod topo_create;
pub mod win;
mod witness;

pub use bytemuck::Pod;
pub use coll::{CollRequest, LocF32, LocF64, LocI32, LocI64, Op, Reduce};
pub use comm::{AgreeRequest, Comm, ErrorMode, Source, TagSel, ValidateRequest, ANY_SOURCE, ANY_TAG};
pub use config::Config;
pub use file::{Amode, File, FileError, FileResult, Hints, Whence};
pub use group::{Group, GroupOrder};
pub use intercoll::InterRoot;
pub use intercomm::{InterComm, InterDupRequest};
pub use request::{wait_all, wait_any, OwnedRequest, Request};
pub use runthrough_engine::handle::{scope, RequestScope};
pub use runthrough_engine::rma::AccOp;
pub use runthrough_engine::{Class, Error, Scope, Status, TAG_UB};
pub use runthrough_engine::{Plan, SendCombine};
pub use runtime::{init, init_with, FatalScope, Runtime, SpawnApp, SpawnError};
pub use sched::{AgreeTicket, Decided, DupRequest, OwnedColl, Reserved};
pub use topo::{dims_create, Cart, DistGraph, Graph, Neighborhood, Topology};
pub use win::{LockKind, RmaElem, Window};
