//! Peer addresses as libfabric hands them out: [`FiAddr`], an opaque `fi_addr_t`.
//!
//! A plain value type, below both the address vector that produces it ([`crate::av`]) and
//! the errors that name the peer an operation addressed ([`crate::error`]).

use std::fmt;

use crate::ffi;

/// A peer address in an address vector (`fi_addr_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FiAddr(pub u64);

impl FiAddr {
    /// `FI_ADDR_UNSPEC`: any source (for receives).
    pub const UNSPEC: FiAddr = FiAddr(ffi::ADDR_UNSPEC);
}

impl fmt::Display for FiAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if *self == FiAddr::UNSPEC {
            f.write_str("fi_addr#unspec")
        } else {
            write!(f, "fi_addr#{}", self.0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display() {
        assert_eq!(FiAddr(4).to_string(), "fi_addr#4");
        assert_eq!(FiAddr::UNSPEC.to_string(), "fi_addr#unspec");
    }
}
