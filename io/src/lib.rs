//! MPI-IO's file layer (MPI-4.1 chapter 14) over POSIX files, with no MPI knowledge: the
//! facade's `File` puts the communicator, the collectives and the failure rules on top.
//!
//! Parts:
//! - [`amode`]: the access modes and their legal combinations (`MPI_ERR_AMODE`);
//! - [`view`]: a file view (displacement, etype, the filetype's runs tiled by its extent)
//!   mapping a position of the view's data stream to file byte ranges;
//! - [`posix`]: one process's open file — reads and writes through a view (reads sieved:
//!   nearby pieces read in one request), size, preallocation, sync, atomic-mode locks;
//! - [`shared`]: the shared file pointer, kept in a side file under a lock, so it
//!   survives the death of any process (the kernel drops a dead holder's lock);
//! - [`domain`]: collective buffering's file domains (which aggregator writes which bytes).
//!
//! Errors carry the MPI error class they map to ([`Class`]); the facade maps them to
//! MPI's codes in one place.

pub mod amode;
pub mod domain;
pub mod posix;
pub mod shared;
pub mod view;

pub use amode::Amode;
pub use posix::PosixFile;
pub use shared::SharedPointer;
pub use view::View;

/// The I/O error classes of MPI-4.1 §14.7 (and the general ones files produce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Class {
    /// `MPI_ERR_AMODE`: an illegal access-mode combination.
    Amode,
    /// `MPI_ERR_NO_SUCH_FILE`.
    NoSuchFile,
    /// `MPI_ERR_FILE_EXISTS` (`MODE_CREATE | MODE_EXCL` on an existing file).
    FileExists,
    /// `MPI_ERR_ACCESS`: permission denied, or an access the mode forbids.
    Access,
    /// `MPI_ERR_READ_ONLY`: a read-only file system.
    ReadOnly,
    /// `MPI_ERR_NO_SPACE`.
    NoSpace,
    /// `MPI_ERR_QUOTA`.
    Quota,
    /// `MPI_ERR_FILE_IN_USE`.
    FileInUse,
    /// `MPI_ERR_BAD_FILE`: an invalid file name.
    BadFile,
    /// `MPI_ERR_IO`: any other I/O error.
    Io,
    /// `MPI_ERR_ARG`: a bad argument (negative offset, a view the etype does not divide).
    Arg,
    /// `MPI_ERR_UNSUPPORTED_DATAREP`.
    UnsupportedDatarep,
    /// `MPI_ERR_UNSUPPORTED_OPERATION` (e.g. explicit offsets on a sequential file).
    Unsupported,
}

/// An I/O error: its class and what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{class:?}: {what}")]
pub struct Error {
    /// The MPI error class.
    pub class: Class,
    /// What failed, for the message.
    pub what: String,
}

impl Error {
    /// An error of `class`.
    pub fn new(class: Class, what: impl Into<String>) -> Error {
        Error { class, what: what.into() }
    }

    /// The error of a failed system call on `path` (`doing` says which).
    pub fn os(e: &std::io::Error, doing: &str, path: &std::path::Path) -> Error {
        let class = match e.raw_os_error() {
            Some(libc::ENOENT) => Class::NoSuchFile,
            Some(libc::EEXIST) => Class::FileExists,
            Some(libc::EACCES) | Some(libc::EPERM) => Class::Access,
            Some(libc::EROFS) => Class::ReadOnly,
            Some(libc::ENOSPC) | Some(libc::EFBIG) => Class::NoSpace,
            Some(libc::EDQUOT) => Class::Quota,
            Some(libc::EBUSY) | Some(libc::ETXTBSY) => Class::FileInUse,
            Some(libc::ENAMETOOLONG) | Some(libc::ENOTDIR) | Some(libc::EISDIR) | Some(libc::ELOOP) => Class::BadFile,
            _ => Class::Io,
        };
        Error::new(class, format!("{doing} {}: {e}", path.display()))
    }
}

/// The result of this crate's calls.
pub type Result<T> = std::result::Result<T, Error>;
