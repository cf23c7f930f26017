//! Address vectors (`fi_av_open`, `FI_AV_TABLE`): peer address blobs in, [`FiAddr`] out.
//!
//! Parts: [`FiAddr`] (an opaque `fi_addr_t`, defined in the lower `addr` module and
//! re-exported here), [`EpAddr`] (an endpoint's raw name as returned by `fi_getname`, with a
//! hex form for bootstrap key-value exchange) and [`AddressVector`].

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

pub use crate::addr::FiAddr;
use crate::domain::Domain;
use crate::error::{fi_call, Error, Result};
use crate::ffi;

/// Bytes [`AddressVector::insert`] hands the provider for one address: the blob,
/// zero-padded. Above the largest address format libfabric defines (`sockaddr_in6` 28,
/// `sockaddr_ib` 48, `FI_ADDR_STR` up to its NUL) and `fi_getname`'s 256-byte buffer
/// minus a NUL.
const AV_ADDR_BYTES: usize = 256;

/// An endpoint's provider-specific address blob (`fi_getname`).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct EpAddr(pub Vec<u8>);

impl EpAddr {
    /// Lowercase hex, for text-based exchange (bootstrap KVS, pipes).
    pub fn to_hex(&self) -> String {
        self.0.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Parse [`EpAddr::to_hex`] output.
    ///
    /// # Errors
    /// [`Error::InvalidArg`] on odd length or non-hex characters.
    pub fn from_hex(s: &str) -> Result<EpAddr> {
        // Bytes, not `&str` slices: a multi-byte character must be an error, never a
        // slice off a character boundary (a panic).
        let s = s.trim().as_bytes();
        if s.len() & 1 == 1 {
            return Err(Error::InvalidArg("odd-length hex address"));
        }
        let nibble = |c: u8| (c as char).to_digit(16).ok_or(Error::InvalidArg("non-hex address"));
        s.chunks_exact(2)
            .map(|p| Ok((nibble(p[0])? << 4 | nibble(p[1])?) as u8))
            .collect::<Result<Vec<u8>>>()
            .map(EpAddr)
    }
}

impl fmt::Debug for EpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "EpAddr({})", self.to_hex())
    }
}

/// An open `fid_av` of type `FI_AV_TABLE`.
pub struct AddressVector {
    raw: NonNull<ffi::fid_av>,
    domain: Arc<Domain>,
}

impl fmt::Debug for AddressVector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AddressVector").field("domain", &self.domain).finish_non_exhaustive()
    }
}

// SAFETY: FI_THREAD_SAFE is always requested; the handle is an owned pointer.
unsafe impl Send for AddressVector {}
// SAFETY: see `Send`.
unsafe impl Sync for AddressVector {}

impl AddressVector {
    /// `fi_av_open` with room for about `count` peers.
    ///
    /// # Errors
    /// The provider's failure code.
    pub fn open(domain: &Arc<Domain>, count: usize) -> Result<Arc<AddressVector>> {
        let mut attr = ffi::fi_av_attr { type_: ffi::FI_AV_TABLE, count, ..Default::default() };
        let mut out: *mut ffi::fid_av = ptr::null_mut();
        // SAFETY: the domain is open; attr and out are valid for the call.
        fi_call!("fi_av_open", unsafe { ffi::av_open(domain.as_ptr(), &mut attr, &mut out) })?;
        let raw = NonNull::new(out).ok_or(Error::Unsupported("fi_av_open returned NULL"))?;
        Ok(Arc::new(AddressVector { raw, domain: Arc::clone(domain) }))
    }

    /// `fi_av_insert` one peer address.
    ///
    /// # Errors
    /// The provider's code, or `FI_EINVAL` if the address was not accepted.
    pub fn insert(&self, addr: &EpAddr) -> Result<FiAddr> {
        if addr.0.is_empty() {
            return Err(Error::InvalidArg("empty endpoint address"));
        }
        if addr.0.len() >= AV_ADDR_BYTES {
            return Err(Error::InvalidArg("endpoint address of 256 bytes or more"));
        }
        // The provider reads as many bytes as its address format says (a sockaddr's by the
        // family field inside the blob, a string up to its NUL), not `addr.0.len()`: the
        // blob comes from another process, so hand over a zero-padded copy that holds
        // whatever the provider may read.
        let mut padded = [0u8; AV_ADDR_BYTES];
        padded[..addr.0.len()].copy_from_slice(&addr.0);
        let mut out = ffi::ADDR_UNSPEC;
        // SAFETY: the AV is open; `padded` holds one provider address in AV_ADDR_BYTES
        // readable bytes (more than any address format libfabric defines, NUL-terminated);
        // `out` is one entry.
        let n =
            fi_call!("fi_av_insert", unsafe { ffi::av_insert(self.as_ptr(), padded.as_ptr().cast(), 1, &mut out) })?;
        if n != 1 || out == ffi::ADDR_UNSPEC {
            return Err(Error::Call { op: "fi_av_insert", code: crate::ErrorCode::EINVAL, peer: None });
        }
        Ok(FiAddr(out))
    }

    /// `fi_av_remove` one peer. Drain or discard its late traffic first (T-FD).
    ///
    /// # Errors
    /// The provider's failure code.
    pub fn remove(&self, peer: FiAddr) -> Result<()> {
        let mut a = peer.0;
        // SAFETY: the AV is open; `a` is one readable entry.
        fi_call!("fi_av_remove", Some(peer), unsafe { ffi::av_remove(self.as_ptr(), &mut a, 1) })?;
        Ok(())
    }

    /// The parent domain.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fid_av {
        self.raw.as_ptr()
    }

    pub(crate) fn as_fid(&self) -> *mut ffi::fid {
        // SAFETY: `fid` is the first member of an open fid_av.
        unsafe { &mut (*self.raw.as_ptr()).fid }
    }
}

impl Drop for AddressVector {
    fn drop(&mut self) {
        // SAFETY: we own the fid; endpoints bound to it hold an Arc, so none is open now.
        let ret = unsafe { ffi::close(self.as_fid()) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(av) failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_round_trip() {
        let a = EpAddr(vec![0, 1, 0xab, 0xff]);
        assert_eq!(a.to_hex(), "0001abff");
        assert_eq!(EpAddr::from_hex("0001abff\n").unwrap(), a);
        assert!(EpAddr::from_hex("abc").is_err());
        assert!(EpAddr::from_hex("zz").is_err());
        // Regression: a multi-byte character used to slice a `&str` off a character
        // boundary (a panic) instead of failing.
        assert!(EpAddr::from_hex("a\u{e9}b").is_err());
        assert!(EpAddr::from_hex("\u{e9}\u{e9}").is_err());
        assert!(EpAddr::from_hex("+1").is_err());
        assert_eq!(EpAddr::from_hex("ABcd").unwrap(), EpAddr(vec![0xab, 0xcd]));
    }
}
