//! Bootstrap clients for ranks a resource manager started (T3): [`pmix`] (the PMIx
//! client library, `libpmix.so.2`, loaded at run time) and [`pmi2`] (the PMI-2 wire
//! protocol over the `PMI_FD` socket, written in Rust, no C library).
//!
//! Both offer what a job's start-up needs: who am I (rank, size, ranks on this node),
//! put / fence / get of short values, abort, finalize; PMIx also reports processes of
//! the job that terminated ([`pmix::Pmix::take_terminated`]). This crate knows nothing of
//! MPI and never decides anything about failures: it reports them.
//!
//! All `unsafe` of the crate sits in `pmix.rs` (the FFI) and in two blocks of
//! `pmi2.rs` (checking and adopting the inherited descriptor); every block says why it is sound.

mod ffi;
pub mod pmi2;
pub mod pmix;

/// Why a bootstrap call failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The environment does not describe a job of this bootstrap (a variable missing or
    /// malformed).
    #[error("bad environment: {0}")]
    Env(String),
    /// `libpmix.so.2` could not be loaded.
    #[error("cannot load the PMIx library: {0}")]
    Load(String),
    /// A PMIx call returned an error status.
    #[error("{call}: {status} ({code})")]
    Pmix {
        /// The call.
        call: &'static str,
        /// `PMIx_Error_string` of the status.
        status: String,
        /// The status code.
        code: i32,
    },
    /// The PMI-2 server answered with a non-zero `rc`.
    #[error("PMI-2 {cmd}: rc={rc} {msg}")]
    Pmi2 {
        /// The command.
        cmd: String,
        /// The server's return code.
        rc: i32,
        /// The server's error message, if any.
        msg: String,
    },
    /// The peer sent bytes that are not a well-formed message.
    #[error("protocol: {0}")]
    Protocol(String),
    /// A key was not found.
    #[error("key {0:?} not found")]
    NotFound(String),
    /// A key or value too long, or with characters the protocol cannot carry.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// The connection to the server failed.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}
