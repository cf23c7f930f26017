//! Typed errors of the shared-memory transport.
//!
//! Each variant says who is to blame and how far the damage reaches, so the engine can map
//! it to its own error classes in one place without looking at message strings:
//!
//! - local environment / configuration: [`Error::Io`], [`Error::InvalidArgument`],
//!   [`Error::RankOutOfRange`], [`Error::BadBindPolicy`], [`Error::Affinity`],
//!   [`Error::Numa`], [`Error::CmaDenied`];
//! - the segment (or the peer that writes into it) is corrupt or incompatible:
//!   [`Error::BadSegment`], [`Error::Version`] (see [`Error::is_corruption`]);
//! - the peer: [`Error::PeerGone`], [`Error::BadAddress`] (see [`Error::is_peer_fault`]);
//! - the caller asked for too much: [`Error::TooLarge`];
//! - bounded waiting expired: [`Error::Timeout`].

use std::io;

/// Everything that can go wrong in `runthrough-shm`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed. `op` names the call (e.g. `"shm_open"`); match on
    /// `source.kind()` for details (e.g. `AlreadyExists` when creating a name that is in use).
    #[error("{op} failed: {source}")]
    Io {
        /// The operation (system call) that failed.
        op: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The segment or a record in it is malformed; the string says what is wrong.
    #[error("bad shared-memory segment: {0}")]
    BadSegment(&'static str),
    /// The segment was created by an incompatible version of this crate.
    #[error("shared-memory segment version {found}, expected {expected}")]
    Version {
        /// Version found in the segment header.
        found: u32,
        /// Version this build understands.
        expected: u32,
    },
    /// A bounded wait expired; the string says what was awaited.
    #[error("timed out waiting for {0}")]
    Timeout(&'static str),
    /// `process_vm_readv` was refused (EPERM): different user, Yama `ptrace_scope`, or a
    /// seccomp policy. Callers fall back to a pipelined copy.
    #[error("single-copy (CMA) read denied by the kernel (EPERM)")]
    CmaDenied,
    /// The peer process no longer exists (ESRCH).
    #[error("peer process {pid} is gone")]
    PeerGone {
        /// The peer's process id.
        pid: i32,
    },
    /// The peer's advertised address range is not (entirely) mapped in the peer (EFAULT).
    #[error("bad remote address for single-copy read")]
    BadAddress,
    /// A record is larger than the ring accepts.
    #[error("record of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Requested length.
        len: usize,
        /// Largest allowed length.
        max: usize,
    },
    /// NUMA topology or placement problem.
    #[error("NUMA: {0}")]
    Numa(String),
    /// A caller-supplied argument is invalid; the string says which and why.
    #[error("invalid argument: {0}")]
    InvalidArgument(&'static str),
    /// A rank is not below the segment's rank count.
    #[error("rank {rank} out of range (segment has {nranks} ranks)")]
    RankOutOfRange {
        /// The offending rank.
        rank: u32,
        /// Number of ranks in the segment.
        nranks: u32,
    },
    /// An unknown `--bind-to` policy string.
    #[error("unknown binding policy {0:?} (expected none, core or numa)")]
    BadBindPolicy(String),
    /// Setting the CPU affinity failed; the string says what.
    #[error("CPU affinity: {0}")]
    Affinity(&'static str),
}

impl Error {
    /// Wraps the current `errno` as [`Error::Io`].
    pub(crate) fn last_os(op: &'static str) -> Error {
        Error::Io { op, source: io::Error::last_os_error() }
    }

    /// True when the error points at the peer process (dead, or advertising bad memory).
    pub fn is_peer_fault(&self) -> bool {
        matches!(self, Error::PeerGone { .. } | Error::BadAddress)
    }

    /// True when shared memory holds something this build cannot trust (corrupt or
    /// incompatible segment / record). The whole segment should be considered lost.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::BadSegment(_) | Error::Version { .. })
    }
}
