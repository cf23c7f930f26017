//! Typed errors of the bootstrap client and server.
//!
//! Who is to blame decides the variant: the environment (`MissingEnv`, `BadEnv`), the
//! local socket layer (`Io`), the other side of the protocol (`Protocol`, `Refused`,
//! `Disconnected`, `Server`), the job (`PeerExited`), or time (`Timeout`).

use std::io;

/// Errors of the bootstrap client, server and environment parsing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `RT_RANK` is set but another required `RT_*` variable is missing.
    #[error("environment variable {var} is not set")]
    MissingEnv {
        /// The missing variable.
        var: &'static str,
    },
    /// An `RT_*` variable is present but malformed.
    #[error("environment variable {var}={value:?} is invalid: {reason}")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its (lossily decoded) value.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A local socket operation failed.
    #[error("{op} failed: {source}")]
    Io {
        /// The operation (`"connect"`, `"read"`, `"write"`, `"bind"`, ...).
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The server closed the connection during the handshake: wrong secret, wrong
    /// protocol version or an out-of-range rank.
    #[error("the key-value service refused the connection (bad secret, version or rank)")]
    Refused,
    /// The server closed an authenticated connection.
    #[error("the key-value service closed the connection")]
    Disconnected,
    /// The operation did not complete within its timeout.
    #[error("timed out")]
    Timeout,
    /// A rank exited before reaching the fence, so the fence can never complete.
    #[error("rank {rank} exited before reaching the fence")]
    PeerExited {
        /// The lowest-numbered such rank.
        rank: u32,
    },
    /// The launcher excluded this rank during start-up (it was taken for hung, R31): it
    /// must stop, never rejoin.
    #[error("the launcher excluded this rank from the job (taken for hung during start-up)")]
    Excluded,
    /// A frame was malformed (bad tag, truncated field, trailing bytes, bad UTF-8).
    #[error("protocol error: {reason}")]
    Protocol {
        /// What was wrong.
        reason: &'static str,
    },
    /// A frame (or a frame about to be sent) exceeds [`crate::wire::MAX_FRAME_BYTES`].
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// The frame length.
        len: usize,
        /// The limit that applied.
        max: usize,
    },
    /// The server rejected a well-formed request (e.g. an abort naming a rank >= size).
    #[error("the key-value service rejected the request: {reason}")]
    Server {
        /// The server's explanation.
        reason: String,
    },
    /// A caller-supplied argument is invalid (e.g. an over-long key).
    #[error("invalid argument: {reason}")]
    InvalidArgument {
        /// What was wrong.
        reason: &'static str,
    },
}

impl Error {
    /// Wraps an I/O error, mapping socket timeouts to [`Error::Timeout`] and resets / EOF
    /// to [`Error::Disconnected`].
    pub(crate) fn io(op: &'static str, source: io::Error) -> Error {
        match source.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout,
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe
                if op != "connect" =>
            {
                Error::Disconnected
            }
            _ => Error::Io { op, source },
        }
    }
}
