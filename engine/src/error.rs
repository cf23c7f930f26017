//! The one error type of runthrough (R1), and the single place where errors are mapped to
//! their blast radius ([`Scope`]) and to MPI error classes ([`Error::class`]).

use std::fmt;

/// Every error runthrough reports. MPI users will recognise the classes listed with
/// [`Error::class`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The peer of the operation has failed (`MPI_ERR_RANK_FAIL_STOP`).
    #[error("rank {rank} has failed")]
    RankFailStop {
        /// The failed rank, in the communicator of the operation.
        rank: u32,
    },
    /// The error is in the status (`MPI_ERR_IN_STATUS`, e.g. sendrecv with a failed peer).
    #[error("error in status (failed rank {rank})")]
    InStatus {
        /// The rank whose failure the status reports.
        rank: u32,
    },
    /// A message was larger than the receive buffer (`MPI_ERR_TRUNCATE`).
    #[error("message truncated: {arrived} bytes arrived for a {posted}-byte receive buffer")]
    Truncate {
        /// Size of the posted receive buffer in bytes.
        posted: usize,
        /// Size of the message in bytes.
        arrived: usize,
    },
    /// A rank outside `0..size` (`MPI_ERR_RANK`).
    #[error("invalid rank {rank} (communicator size {size})")]
    InvalidRank {
        /// The rank given.
        rank: i64,
        /// The communicator size.
        size: u32,
    },
    /// A tag outside `0..=TAG_UB`, or a wildcard where none is allowed (`MPI_ERR_TAG`).
    #[error("invalid tag {tag}")]
    InvalidTag {
        /// The tag given.
        tag: i32,
    },
    /// An invalid argument (`MPI_ERR_ARG`, `MPI_ERR_BUFFER`, `MPI_ERR_COUNT`).
    #[error("invalid argument: {0}")]
    InvalidArg(&'static str),
    /// Errors signalled by other ranks (R27), as (rank, code) pairs.
    #[error("error propagated from {0:?}")]
    Propagated(Vec<(u32, i32)>),
    /// The communicator was corrupted by a rank that panicked while using it (R28).
    #[error("communicator corrupted")]
    CommCorrupted,
    /// The communicator was revoked (R29).
    #[error("communicator revoked")]
    Revoked,
    /// The operation is not supported by this build or transport.
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
    /// The API was used in a way that cannot be right (a misuse, not a runtime fault).
    #[error("API misuse: {0}")]
    ApiMisuse(&'static str),
    /// A transport failed locally (not attributable to one peer).
    #[error("transport error: {0}")]
    Transport(String),
    /// Start-up failed (bootstrap service, shared-memory segment, ...): R5.
    #[error("initialisation failed: {0}")]
    Init(String),
    /// Spawned processes could not all be started, so none runs (`MPI_ERR_SPAWN`, R40).
    #[error("spawn failed: {0}")]
    Spawn(String),
}

/// How far the damage of an error reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Scope {
    /// Only this operation failed; retrying with other arguments can succeed.
    Operation,
    /// One peer is gone; communication with the others continues.
    Peer,
    /// The communicator cannot be used as before (revoked, corrupted, propagated error).
    Communicator,
    /// The process or job cannot continue communicating.
    Job,
}

/// MPI error classes, numbered as MPICH's `mpi.h` numbers them; `RankFailStop` (the
/// run-through draft's class) shares ULFM's `MPIX_ERR_PROC_FAILED` value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Class {
    Truncate,
    Rank,
    Tag,
    Arg,
    InStatus,
    Other,
    Intern,
    Unsupported,
    RankFailStop,
    ProcFailed,
    /// ULFM's `MPIX_ERR_PROC_FAILED_PENDING` (102): never produced by runthrough (a
    /// wildcard receive disabled by a failure completes with `RankFailStop`, R13, instead
    /// of staying pending); listed for the standard ABI's constant.
    ProcFailedPending,
    Revoked,
    /// `MPI_ERR_SPAWN`.
    Spawn,
}

impl Class {
    /// The integer error class as an MPI program would see it.
    pub fn code(self) -> i32 {
        match self {
            Class::Tag => 4,
            Class::Rank => 6,
            Class::Arg => 12,
            Class::Truncate => 14,
            Class::Other => 15,
            Class::Intern => 16,
            Class::InStatus => 17,
            Class::Unsupported => 52,
            // The draft's MPI_ERR_RANK_FAIL_STOP is ULFM's MPIX_ERR_PROC_FAILED.
            Class::RankFailStop | Class::ProcFailed => 101,
            Class::ProcFailedPending => 102,
            Class::Spawn => 42,
            Class::Revoked => 103,
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

impl Error {
    /// The blast radius of this error.
    pub fn scope(&self) -> Scope {
        match self {
            Error::Truncate { .. }
            | Error::InvalidRank { .. }
            | Error::InvalidTag { .. }
            | Error::InvalidArg(_)
            | Error::Unsupported(_)
            | Error::ApiMisuse(_)
            | Error::Spawn(_) => Scope::Operation,
            Error::RankFailStop { .. } | Error::InStatus { .. } => Scope::Peer,
            Error::Propagated(_) | Error::CommCorrupted | Error::Revoked => Scope::Communicator,
            Error::Transport(_) | Error::Init(_) => Scope::Job,
        }
    }

    /// The MPI error class of this error.
    pub fn class(&self) -> Class {
        match self {
            Error::RankFailStop { .. } => Class::RankFailStop,
            Error::InStatus { .. } => Class::InStatus,
            Error::Truncate { .. } => Class::Truncate,
            Error::InvalidRank { .. } => Class::Rank,
            Error::InvalidTag { .. } => Class::Tag,
            Error::InvalidArg(_) | Error::ApiMisuse(_) => Class::Arg,
            Error::Propagated(_) | Error::CommCorrupted => Class::Other,
            Error::Revoked => Class::Revoked,
            Error::Unsupported(_) => Class::Unsupported,
            Error::Transport(_) | Error::Init(_) => Class::Intern,
            Error::Spawn(_) => Class::Spawn,
        }
    }

    /// The process exit code used when this error aborts processes (R3): the MPI class,
    /// kept inside 1..=255.
    pub fn exit_code(&self) -> i32 {
        self.class().code().clamp(1, 255)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn r1_scopes_and_classes() {
        let e = Error::RankFailStop { rank: 3 };
        assert_eq!(e.scope(), Scope::Peer);
        assert_eq!(e.class(), Class::RankFailStop);
        assert_eq!(Error::Truncate { posted: 1, arrived: 2 }.class().code(), 14);
        assert_eq!(Error::Revoked.scope(), Scope::Communicator);
        assert!(e.to_string().contains("rank 3"));
        assert!((1..=255).contains(&Error::Init("x".into()).exit_code()));
        // ULFM's classes (R29): PROC_FAILED 101, PROC_FAILED_PENDING 102, REVOKED 103.
        assert_eq!(e.class().code(), 101);
        assert_eq!(Class::ProcFailedPending.code(), 102);
        assert_eq!(Error::Revoked.class().code(), 103);
        assert_eq!(Error::Propagated(vec![(1, 2)]).scope(), Scope::Communicator);
        assert_eq!(Error::CommCorrupted.scope(), Scope::Communicator);
    }
}
