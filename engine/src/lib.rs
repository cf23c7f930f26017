//! The runthrough progress engine (docs/ARCHITECTURE.md §1–§2).
//!
//! It owns the I/O and the matching semantics; `shm` and `fabric` only move bytes, `ft`
//! only decides. Parts:
//! - [`types`]: newtypes (`Rank`, `Tag`, `ContextId`, `ReqId`, ...);
//! - [`error`]: the one [`Error`] type, its [`Scope`] and MPI class mapping (R1);
//! - [`wire`]: header codec, validated on decode; [`note`]: engine notices (departure);
//! - [`transport`]: the byte-level [`transport::Transport`] trait and its adapters;
//! - [`matching`]: posted / unexpected queues with wildcards, non-overtaking;
//! - [`request`]: requests, their slab, [`Status`];
//! - [`engine`]: the [`Engine`]: eager and rendezvous protocols, progress, failures;
//! - [`handle`]: request scopes, borrowing and owned request handles (sound whatever
//!   handles leak, R30), waiting with spin-then-yield;
//! - [`coll`]: collectives over point-to-point with the run-through rules (R17–R21);
//!   what the engine keeps of them (the shared-memory collective area, a collective's
//!   view of its communicator) is in `coll_state`, below both;
//! - `rounds`: collectives as schedules of rounds ([`Plan`]), below the two kinds of
//!   nonblocking collective: [`icoll`], on the caller's buffers, and the engine's own
//!   ([`Engine::start_schedule`], advanced by every progress call) (R21).
//!
//! It never aborts the process and never panics on remote input: malformed records are
//! counted and dropped, a peer's failure completes requests in error.
#![deny(unsafe_code)]

mod buf;
pub mod coll;
mod coll_state;
mod comms;
pub mod engine;
pub mod error;
pub mod failed_set;
pub mod handle;
pub mod icoll;
pub mod lock;
pub mod matching;
pub mod note;
pub mod request;
pub mod rma;
mod rounds;
pub mod transport;
pub mod types;
pub mod wire;

pub use engine::{Config, Detached, Ended, Engine, Over, Pulse, Scheduled, SendCombine, Stats, FREED_DECIDED_KEEP};
pub use error::{Class, Error, Scope};
pub use failed_set::FailedSet;
pub use handle::{
    irecv, irecv_unscoped, isend, isend_unscoped, isend_unscoped_seq, issend_unscoped, recv, scope, send, sendrecv,
    wait_all, wait_all_in, wait_any, OwnedRequest, Request, RequestScope, Waiter,
};
pub use request::Status;
pub use rounds::Plan;
pub use types::{ContextId, Rank, RemoteRegion, ReqId, SendTarget, Seq, Tag, TAG_UB};
