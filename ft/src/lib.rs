//! Sans-IO fault-tolerance state machines for runthrough.
//!
//! This crate never performs I/O, never reads a clock and starts no threads: time and
//! messages are passed in, actions come out (docs/ARCHITECTURE.md §1 and §5; protocol cores
//! as state machines, after quinn-proto). It is std only and free of `unsafe`.
//!
//! Parts:
//! - [`time`]: [`Time`], the opaque instant the caller passes in.
//! - [`failure_set`]: the per-job set of failed ranks, with epochs (T-FD).
//! - [`msg`]: the detector's messages ([`Msg`]) and their byte codec.
//! - [`event`]: [`FtEvent`], what the engine learns (`Failed`, `Excluded`).
//! - [`detector`]: the ring heartbeat failure detector (after Open MPI's
//!   `comm_ft_detector.c` and Bosilca et al., SC'16) with reliable broadcast of failure
//!   notices over a binomial-graph overlay of ⌈log2 n⌉ diameter, and exclusion of wrongly
//!   suspected ranks.
//! - [`sim`]: a deterministic single-threaded cluster simulator (virtual clock, seeded
//!   message delays, crashes, stop/resume) used by the tests and the benchmarks.
//! - [`agree`]: the fault-tolerant uniform agreement ([`Agreement`]) behind `validate`
//!   (R19), `agree` (R29) and uniform communicator creation (R24): a coordinator-based
//!   three-phase commit with coordinator replacement and Paxos-style ballots over the
//!   perfect failure detector, its messages merged along a k-ary tree (after ULFM's ERA,
//!   Herault et al., SC'15; ballots after Lamport, "Paxos made simple").
//! - [`agree_tree`]: the shape of that tree (contiguous-range subtrees, live parents and
//!   children around failed nodes, coverage).
//! - [`agree_msg`]: the agreement's messages ([`AgreeMsg`]) and their byte codec.
//! - [`agree_sim`]: a deterministic simulator of one agreement with crashes injected at
//!   every step, the checker of uniform agreement, validity and termination, and
//!   [`agree_sim::agree_table`].
//! - [`notice`]: where a revoke or corrupt notice goes on a communicator's overlay
//!   (fingers, ring-successor handover), and its simulator.
//!
//! Driving a [`Detector`] (the engine's loop, in outline):
//!
//! ```
//! use runthrough_ft::{Config, Detector, FtEvent, Msg, Time};
//!
//! let mut det = Detector::new(0, 4, Config::default(), Time::ZERO);
//! let mut wire = Vec::new();
//! while let Some((to, msg)) = det.poll_transmit() {
//!     wire.clear();
//!     msg.encode(&mut wire); // the engine sends `wire` to `to` in its FT header
//!     assert_eq!((to, Msg::decode(&wire)), (1, Ok(Msg::Heartbeat)));
//! }
//! // Later: feed received messages and expired timers, then drain events.
//! det.handle_local_failure(2, Time::from_nanos(1_000));
//! assert_eq!(det.poll_event(), Some(FtEvent::Failed { rank: 2, epoch: 1 }));
//! assert!(det.poll_timeout().is_some());
//! ```
//!
//! Driving an [`Agreement`] (one per validate / agree / creation; see [`agree`]):
//!
//! ```
//! use std::sync::Arc;
//! use runthrough_ft::{AgreeMsg, Agreement, Decision, Participants, Time};
//!
//! let comm = Arc::new(Participants::new(vec![0, 1]).unwrap());
//! let mut a = [0, 1].map(|r| Agreement::new(comm.clone(), r, 7, 0b11 >> r, &[], Time::ZERO));
//! let mut wire = Vec::new();
//! // Shuttle messages (the engine sends `wire` in its FT header) until nothing moves.
//! let mut moved = true;
//! while moved {
//!     moved = false;
//!     for from in 0..2 {
//!         while let Some((to, msg)) = a[from].poll_transmit() {
//!             wire.clear();
//!             msg.encode(&mut wire);
//!             a[to as usize].handle_message(from as u32, AgreeMsg::decode(&wire).unwrap(), Time::ZERO);
//!             moved = true;
//!         }
//!     }
//! }
//! let want = Decision { flag: 0b01, max: 0, failed: vec![], signals: vec![] };
//! assert_eq!((a[0].poll_decision(), a[1].poll_decision()), (Some(want.clone()), Some(want)));
//! // A detector's `FtEvent::Failed { rank, .. }` goes to `a.handle_failure(rank, now)`.
//! ```
#![forbid(unsafe_code)]

pub mod agree;
pub mod agree_msg;
pub mod agree_sim;
pub mod agree_tree;
pub mod detector;
pub mod event;
pub mod failure_set;
pub mod msg;
pub mod node_loss;
pub mod notice;
pub mod reg_agree;
pub mod ring;
pub mod sim;
pub mod time;
mod timer;
#[cfg(test)]
mod untrusted;

pub use agree::{AgreeState, Agreement, Decision, Input, Participants, ParticipantsError};
pub use agree_msg::{AgreeMsg, Prior, SignalId, Value};
pub use detector::{Config, ConfigError, Detector, DEFAULT_HB_PERIOD, DEFAULT_HB_TIMEOUT};
pub use event::FtEvent;
pub use failure_set::FailureSet;
pub use msg::{DecodeError, Msg};
pub use time::Time;
