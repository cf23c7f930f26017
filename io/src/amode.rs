//! Access modes (MPI-4.1 §14.2.1): the bits, their legal combinations, and what they ask
//! of `open(2)`.

use crate::{Class, Error, Result};

/// An access mode: the `MPI_MODE_*` bits (the values of the standard ABI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Amode(pub u32);

impl Amode {
    /// `MPI_MODE_APPEND`.
    pub const APPEND: u32 = 1;
    /// `MPI_MODE_CREATE`.
    pub const CREATE: u32 = 2;
    /// `MPI_MODE_DELETE_ON_CLOSE`.
    pub const DELETE_ON_CLOSE: u32 = 4;
    /// `MPI_MODE_EXCL`.
    pub const EXCL: u32 = 8;
    /// `MPI_MODE_RDONLY`.
    pub const RDONLY: u32 = 16;
    /// `MPI_MODE_RDWR`.
    pub const RDWR: u32 = 32;
    /// `MPI_MODE_SEQUENTIAL`.
    pub const SEQUENTIAL: u32 = 64;
    /// `MPI_MODE_UNIQUE_OPEN`.
    pub const UNIQUE_OPEN: u32 = 128;
    /// `MPI_MODE_WRONLY`.
    pub const WRONLY: u32 = 256;
    const ALL: u32 = 511;

    /// Checks the combination: exactly one of RDONLY, RDWR, WRONLY; no CREATE or EXCL
    /// with RDONLY; no SEQUENTIAL with RDWR; no unknown bit (`MPI_ERR_AMODE`).
    pub fn check(self) -> Result<Amode> {
        let m = self.0;
        let access = [Self::RDONLY, Self::RDWR, Self::WRONLY].iter().filter(|&&b| m & b != 0).count();
        let why = if m & !Self::ALL != 0 {
            "unknown bits"
        } else if access != 1 {
            "exactly one of MPI_MODE_RDONLY, MPI_MODE_RDWR, MPI_MODE_WRONLY is required"
        } else if m & Self::RDONLY != 0 && m & (Self::CREATE | Self::EXCL) != 0 {
            "MPI_MODE_CREATE or MPI_MODE_EXCL with MPI_MODE_RDONLY"
        } else if m & Self::RDWR != 0 && m & Self::SEQUENTIAL != 0 {
            "MPI_MODE_SEQUENTIAL with MPI_MODE_RDWR"
        } else {
            return Ok(self);
        };
        Err(Error::new(Class::Amode, format!("access mode {m:#x}: {why}")))
    }

    /// Whether bit `b` is set.
    pub fn has(self, b: u32) -> bool {
        self.0 & b != 0
    }

    /// Whether the file may be read.
    pub fn readable(self) -> bool {
        !self.has(Self::WRONLY)
    }

    /// Whether the file may be written.
    pub fn writable(self) -> bool {
        !self.has(Self::RDONLY)
    }
}

#[cfg(test)]
mod tests {
    use super::Amode;

    #[test]
    fn the_illegal_combinations_are_refused() {
        for bad in [
            0,
            Amode::RDONLY | Amode::WRONLY,
            Amode::RDONLY | Amode::CREATE,
            Amode::RDONLY | Amode::EXCL,
            Amode::RDWR | Amode::SEQUENTIAL,
            Amode::RDWR | 1024,
        ] {
            assert_eq!(Amode(bad).check().unwrap_err().class, crate::Class::Amode, "{bad:#x}");
        }
        for good in [
            Amode::RDONLY,
            Amode::RDWR | Amode::CREATE | Amode::EXCL | Amode::DELETE_ON_CLOSE,
            Amode::WRONLY | Amode::SEQUENTIAL | Amode::APPEND,
            Amode::RDONLY | Amode::UNIQUE_OPEN | Amode::SEQUENTIAL,
        ] {
            assert!(Amode(good).check().is_ok(), "{good:#x}");
        }
    }
}
