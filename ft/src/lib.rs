//! Sans-IO fault-tolerance state machines for runthrough.
//!
//! This crate never performs I/O and never reads a clock: time and messages are passed
//! in, actions come out (DESIGN §1, STYLE "Protocol cores are state machines").
//! Parts:
//! - [`failure_set`]: the per-job set of failed ranks, with epochs (DESIGN §3).
//!
//! The ring detector, failure-notice broadcast and agreement arrive with the
//! fault-tolerance issues.
#![forbid(unsafe_code)]

pub mod failure_set;
