//! Typed errors of the fabric layer (T1, docs/REQUIREMENTS.md).
//!
//! Parts:
//! - [`ErrorCode`]: a positive libfabric errno (`FI_E*`, which reuse the libc values below
//!   256) with its name, its `fi_strerror` text, and [`ErrorCode::is_peer_failure`], the one
//!   place that says which codes mean "the peer is gone".
//! - [`Error`]: what a call returns. `Busy` is `-FI_EAGAIN` (a normal "retry later", never a
//!   failure); `Call` carries the failing function, the code and the peer where known.
//! - `fi_call!` and its target `check`: the single mapping from raw returns to [`Error`].
//!
//! Completion-queue error entries are not `Error`s: they are data read from the queue
//! ([`crate::CqError`]), so that reading them never interrupts the other completions.

use std::fmt;

use crate::addr::FiAddr;
use crate::ffi;

/// A libfabric error code, stored positive (libfabric returns it negated).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// `FI_ENOENT`: sockets' answer for a send to a peer whose connection is gone.
    pub const ENOENT: ErrorCode = ErrorCode(ffi::FI_ENOENT as i32);
    /// `FI_EIO`.
    pub const EIO: ErrorCode = ErrorCode(ffi::FI_EIO as i32);
    /// `FI_EAGAIN`: resources temporarily unavailable (surfaced as [`Error::Busy`]).
    pub const EAGAIN: ErrorCode = ErrorCode(ffi::FI_EAGAIN as i32);
    /// `FI_ENOMEM`.
    pub const ENOMEM: ErrorCode = ErrorCode(ffi::FI_ENOMEM as i32);
    /// `FI_EINVAL`.
    pub const EINVAL: ErrorCode = ErrorCode(ffi::FI_EINVAL as i32);
    /// `FI_ENOSYS`: the provider lacks the operation.
    pub const ENOSYS: ErrorCode = ErrorCode(ffi::FI_ENOSYS as i32);
    /// `FI_ENODATA`: `fi_getinfo` found nothing.
    pub const ENODATA: ErrorCode = ErrorCode(ffi::FI_ENODATA as i32);
    /// `FI_EMSGSIZE`.
    pub const EMSGSIZE: ErrorCode = ErrorCode(ffi::FI_EMSGSIZE as i32);
    /// `FI_ECONNABORTED`.
    pub const ECONNABORTED: ErrorCode = ErrorCode(ffi::FI_ECONNABORTED as i32);
    /// `FI_ECONNRESET`.
    pub const ECONNRESET: ErrorCode = ErrorCode(ffi::FI_ECONNRESET as i32);
    /// `FI_ENOTCONN`.
    pub const ENOTCONN: ErrorCode = ErrorCode(ffi::FI_ENOTCONN as i32);
    /// `FI_ECONNREFUSED`.
    pub const ECONNREFUSED: ErrorCode = ErrorCode(ffi::FI_ECONNREFUSED as i32);
    /// `FI_EHOSTDOWN`.
    pub const EHOSTDOWN: ErrorCode = ErrorCode(ffi::FI_EHOSTDOWN as i32);
    /// `FI_EHOSTUNREACH`.
    pub const EHOSTUNREACH: ErrorCode = ErrorCode(ffi::FI_EHOSTUNREACH as i32);
    /// `FI_ETIMEDOUT`.
    pub const ETIMEDOUT: ErrorCode = ErrorCode(ffi::FI_ETIMEDOUT as i32);
    /// `FI_ECANCELED`: the operation was cancelled (e.g. endpoint closed).
    pub const ECANCELED: ErrorCode = ErrorCode(ffi::FI_ECANCELED as i32);
    /// `FI_EOTHER`: unspecified provider error (see the provider message).
    pub const EOTHER: ErrorCode = ErrorCode(ffi::FI_EOTHER as i32);
    /// `FI_ETOOSMALL`.
    pub const ETOOSMALL: ErrorCode = ErrorCode(ffi::FI_ETOOSMALL as i32);
    /// `FI_EAVAIL`: an error entry is waiting on the queue.
    pub const EAVAIL: ErrorCode = ErrorCode(ffi::FI_EAVAIL as i32);
    /// `FI_ETRUNC`: the receive buffer was too small.
    pub const ETRUNC: ErrorCode = ErrorCode(ffi::FI_ETRUNC as i32);
    /// `FI_EREMOTEIO`.
    pub const EREMOTEIO: ErrorCode = ErrorCode(ffi::FI_EREMOTEIO as i32);

    /// The positive code.
    pub fn raw(self) -> i32 {
        self.0
    }

    /// The `FI_*` name of well-known codes, for logs and reports.
    pub fn name(self) -> Option<&'static str> {
        const NAMES: &[(ErrorCode, &str)] = &[
            (ErrorCode::ENOENT, "FI_ENOENT"),
            (ErrorCode::EIO, "FI_EIO"),
            (ErrorCode::EAGAIN, "FI_EAGAIN"),
            (ErrorCode::ENOMEM, "FI_ENOMEM"),
            (ErrorCode::EINVAL, "FI_EINVAL"),
            (ErrorCode::ENOSYS, "FI_ENOSYS"),
            (ErrorCode::ENODATA, "FI_ENODATA"),
            (ErrorCode::EMSGSIZE, "FI_EMSGSIZE"),
            (ErrorCode::ECONNABORTED, "FI_ECONNABORTED"),
            (ErrorCode::ECONNRESET, "FI_ECONNRESET"),
            (ErrorCode::ENOTCONN, "FI_ENOTCONN"),
            (ErrorCode::ECONNREFUSED, "FI_ECONNREFUSED"),
            (ErrorCode::EHOSTDOWN, "FI_EHOSTDOWN"),
            (ErrorCode::EHOSTUNREACH, "FI_EHOSTUNREACH"),
            (ErrorCode::ETIMEDOUT, "FI_ETIMEDOUT"),
            (ErrorCode::ECANCELED, "FI_ECANCELED"),
            (ErrorCode::EREMOTEIO, "FI_EREMOTEIO"),
            (ErrorCode::EOTHER, "FI_EOTHER"),
            (ErrorCode::ETOOSMALL, "FI_ETOOSMALL"),
            (ErrorCode::EAVAIL, "FI_EAVAIL"),
            (ErrorCode::ETRUNC, "FI_ETRUNC"),
        ];
        NAMES.iter().find(|(c, _)| *c == self).map(|(_, n)| *n)
    }

    /// `fi_strerror` of this code.
    pub fn message(self) -> String {
        ffi::strerror(self.0)
    }

    /// Whether this code, seen on an operation with a peer, means the peer (or the path to
    /// it) is gone: the codes below, among them `FI_ENOENT`, which `sockets` returns on sends to a
    /// peer whose connection was torn down.
    pub fn is_peer_failure(self) -> bool {
        matches!(
            self,
            ErrorCode::ENOTCONN
                | ErrorCode::EHOSTUNREACH
                | ErrorCode::ECONNRESET
                | ErrorCode::ECONNABORTED
                | ErrorCode::ECONNREFUSED
                | ErrorCode::EHOSTDOWN
                | ErrorCode::EREMOTEIO
                | ErrorCode::EIO
                | ErrorCode::ENOENT
                | ErrorCode::ETIMEDOUT
        )
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}({})", self.0),
            None => write!(f, "ErrorCode({})", self.0),
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({}): {}", self.0, self.message()),
            None => write!(f, "error {}: {}", self.0, self.message()),
        }
    }
}

/// Errors returned by fabric calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// `-FI_EAGAIN`: no resources right now. Retry after progressing the completion queue;
    /// feed persistent `Busy` for a peer to a [`crate::StallTracker`].
    #[error("resources temporarily unavailable; progress and retry")]
    Busy,
    /// A libfabric call failed.
    #[error("{op} failed{}: {code}", peer.map(|p| format!(" for peer {p}")).unwrap_or_default())]
    Call {
        /// The libfabric function, e.g. `"fi_tsend"`.
        op: &'static str,
        /// The (positive) error code.
        code: ErrorCode,
        /// The peer the operation addressed, when there was one.
        peer: Option<FiAddr>,
    },
    /// No provider matched the request.
    #[error("no libfabric provider matches: {0}")]
    NoProvider(String),
    /// The provider lacks something this crate needs.
    #[error("unsupported by the provider: {0}")]
    Unsupported(&'static str),
    /// An argument was rejected before calling libfabric.
    #[error("invalid argument: {0}")]
    InvalidArg(&'static str),
    /// `libfabric.so.1` could not be loaded (it is loaded when a fabric is first opened).
    #[error("{0}")]
    Load(String),
}

impl From<ffi::LoadError> for Error {
    fn from(e: ffi::LoadError) -> Error {
        Error::Load(e.0)
    }
}

impl Error {
    /// The libfabric code, if this error came from a call.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Busy => Some(ErrorCode::EAGAIN),
            Error::Call { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// The peer the failed operation addressed, if known.
    pub fn peer(&self) -> Option<FiAddr> {
        match self {
            Error::Call { peer, .. } => *peer,
            _ => None,
        }
    }

    /// Whether this error says the addressed peer is gone (see [`ErrorCode::is_peer_failure`]).
    pub fn is_peer_failure(&self) -> bool {
        matches!(self, Error::Call { code, peer: Some(_), .. } if code.is_peer_failure())
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Maps a raw return (negative fi errno on failure) to a result; the target of `fi_call!`.
pub(crate) fn check(op: &'static str, peer: Option<FiAddr>, ret: isize) -> Result<isize> {
    if ret >= 0 {
        Ok(ret)
    } else if ret == -(ffi::FI_EAGAIN as isize) {
        Err(Error::Busy)
    } else {
        let code = ErrorCode(i32::try_from(-ret).unwrap_or(i32::MAX));
        Err(Error::Call { op, code, peer })
    }
}

/// Turns a raw libfabric return into `Result<_, Error>`: negative fi errno → [`Error`], with
/// `-FI_EAGAIN` → [`Error::Busy`]; non-negative values pass through as `isize`.
///
/// `fi_call!("fi_tsend", expr)` or `fi_call!("fi_tsend", peer, expr)` to attach the peer.
macro_rules! fi_call {
    ($op:expr, $call:expr) => {
        $crate::error::check($op, None, ($call) as isize)
    };
    ($op:expr, $peer:expr, $call:expr) => {
        $crate::error::check($op, $peer, ($call) as isize)
    };
}
pub(crate) use fi_call;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_returns_map_to_typed_errors() {
        assert_eq!(check("fi_x", None, 0), Ok(0));
        assert_eq!(check("fi_x", None, 7), Ok(7));
        assert_eq!(check("fi_x", None, -(ffi::FI_EAGAIN as isize)), Err(Error::Busy));
        let e = check("fi_tsend", Some(FiAddr(3)), -(ffi::FI_ENOENT as isize)).unwrap_err();
        assert_eq!(e, Error::Call { op: "fi_tsend", code: ErrorCode::ENOENT, peer: Some(FiAddr(3)) });
        assert!(e.is_peer_failure());
        assert_eq!(e.peer(), Some(FiAddr(3)));
    }

    #[test]
    fn fi_strerror_texts_are_decoded() {
        // libfabric's own table for codes >= 256, libc's strerror below.
        assert!(ErrorCode::EAVAIL.message().to_lowercase().contains("error available"), "{}", ErrorCode::EAVAIL);
        assert!(ErrorCode::ETRUNC.message().to_lowercase().contains("truncat"), "{}", ErrorCode::ETRUNC);
        assert!(ErrorCode::ECONNRESET.message().to_lowercase().contains("reset"));
        assert!(
            ErrorCode::EAGAIN.message().to_lowercase().contains("try again")
                || ErrorCode::EAGAIN.message().to_lowercase().contains("unavailable")
        );
        let shown = ErrorCode::ENOENT.to_string();
        assert!(shown.starts_with("FI_ENOENT (2): "), "{shown}");
        assert_eq!(format!("{:?}", ErrorCode::EOTHER), "FI_EOTHER(256)");
        assert_eq!(ErrorCode(9999).name(), None);
        assert!(!ErrorCode(9999).message().is_empty());
    }

    #[test]
    fn peer_failure_classification() {
        for c in [ErrorCode::ENOTCONN, ErrorCode::EHOSTUNREACH, ErrorCode::ECONNRESET, ErrorCode::ECONNABORTED] {
            assert!(c.is_peer_failure(), "{c:?}");
        }
        for c in [ErrorCode::EAGAIN, ErrorCode::ETRUNC, ErrorCode::ECANCELED, ErrorCode::EINVAL] {
            assert!(!c.is_peer_failure(), "{c:?}");
        }
        let no_peer = Error::Call { op: "fi_cq_open", code: ErrorCode::EIO, peer: None };
        assert!(!no_peer.is_peer_failure());
        let shown = Error::Call { op: "fi_tsend", code: ErrorCode::ENOENT, peer: Some(FiAddr(1)) }.to_string();
        assert!(shown.starts_with("fi_tsend failed for peer fi_addr#1: FI_ENOENT"), "{shown}");
    }
}
