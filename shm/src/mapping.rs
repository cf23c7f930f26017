//! A shared mapping of a file (the segment, or one page of its header), unmapped when
//! its last owner drops. Below `segment` and `collarea`, which both hold one.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::Error;

/// A shared mapping, unmapped when the last owner (segment or ring handle) drops.
#[derive(Debug)]
pub(crate) struct Mapping {
    pub(crate) ptr: *mut u8,
    pub(crate) len: usize,
    /// Process-local claims: index `2 * ring + {0: tx, 1: rx}`.
    pub(crate) claims: Arc<[AtomicBool]>,
}

// SAFETY: the mapping is plain shared memory; all access to it goes through atomics (header,
// cursors, stamps) or the ring protocol's Release/Acquire hand-over, from any thread.
unsafe impl Send for Mapping {}
// SAFETY: see Send.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Maps `len` bytes of `fd` shared.
    pub(crate) fn map(fd: &OwnedFd, len: usize, prot: libc::c_int, claims: usize) -> Result<Mapping, Error> {
        // SAFETY: a fresh mapping (addr = NULL) of a valid fd; the kernel checks the rest.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_SHARED, fd.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(Error::last_os("mmap"));
        }
        Ok(Mapping { ptr: ptr.cast(), len, claims: (0..claims).map(|_| AtomicBool::new(false)).collect() })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: ptr/len come from a successful mmap and are unmapped exactly once, when
        // no handle (all hold an Arc of this) can touch the memory any more.
        if unsafe { libc::munmap(self.ptr.cast(), self.len) } != 0 {
            tracing::warn!(err = %io::Error::last_os_error(), "munmap of shm segment failed");
        }
    }
}
