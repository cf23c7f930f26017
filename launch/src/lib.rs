//! `runthrough-launch`: the `rtrun` launcher and the authenticated key-value bootstrap
//! service (docs/ARCHITECTURE.md §1, §6; T3).
//!
//! Parts:
//! - [`env`](mod@env): the `RT_*` environment `rtrun` hands to every rank, parsed into [`env::JobEnv`].
//! - [`client`]: the blocking client a rank uses to talk to the launcher (put / get / fence /
//!   finalized / abort / exited).
//! - [`server`]: the key-value service `rtrun` runs on `127.0.0.1` (also usable in-process).
//! - [`wire`]: the framed binary protocol between the two; [`spawn`]: what a spawning
//!   rank asks the launcher for, and its answer (R40).
//! - [`hosts`]: multi-host placement (`--host`, `--map-by`, `--launch-agent`), and
//!   [`net`]: which interface of this host holds an address (for a rank's fabric endpoint).
//! - [`cli`], [`job`], [`outcome`]: the launcher itself — argument parsing, spawning and
//!   supervising ranks (fault injection with `--kill`, `--timeout`, signals), and the
//!   job exit-code rule R7.
//! - [`report`]: what `rtrun` says about each rank after the job (phase, signal or exit
//!   code, fault injected): the stderr lines and the `--outcome-file` records.
//! - [`error`]: the typed [`Error`] of the client and server.
//!
//! What it never does: it never kills surviving ranks because one rank died (runthrough
//! is fault tolerant; only an explicit abort request, R3, kills ranks), never binds its
//! service to anything but loopback or an explicitly given private address (`--kv-addr`), and never prints from the client or server code.
//!
//! All `unsafe` code (signal handlers, `prctl`, `shm_unlink`) lives in one private module,
//! `sys`, with a `// SAFETY:` note per block; everything else is safe Rust
//! (`unsafe_code` is denied crate-wide and allowed only there).

#![deny(unsafe_code)]

pub mod cli;
pub mod client;
pub mod env;
pub mod error;
pub mod hosts;
pub mod job;
pub mod logging;
pub mod net;
pub mod outcome;
pub mod report;
pub mod server;
pub mod spawn;
mod sys;
pub mod tunables;
pub mod wire;

pub use client::{Client, Verdict};
pub use env::JobEnv;
pub use error::Error;
pub use server::Server;
