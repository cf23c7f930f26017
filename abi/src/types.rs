//! The C types of the standard ABI as Rust sees them.
#![allow(non_camel_case_types)]

use std::ffi::{c_int, c_void};

/// Every MPI handle (`MPI_Comm`, `MPI_Datatype`, ...) is a pointer-sized value; predefined
/// handles are the small integers of `mpi_abi.h`, the library's own are table indices
/// (see `handles.rs`), so `MPI_*_toint`/`fromint` are the identity.
pub type Handle = usize;
/// `MPI_Aint` (`intptr_t`).
pub type MPI_Aint = isize;
/// `MPI_Offset` (`int64_t`).
pub type MPI_Offset = i64;
/// `MPI_Count` (`int64_t`).
pub type MPI_Count = i64;
/// Any C function pointer argument (callbacks are cast to their type where they are used).
pub type FnPtr = *mut c_void;

/// `MPI_Status` exactly as `mpi_abi.h` lays it out. `MPI_internal` holds the received byte
/// count (0, 1: low and high halves) and the cancelled flag (2). The statuses the header's
/// sentinels make (`MPI_Status::empty`, `MPI_Status::proc_null`) and the writes of a status
/// to the program are `status.rs`'s, above the constants.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MPI_Status {
    /// Source rank.
    pub MPI_SOURCE: c_int,
    /// Tag.
    pub MPI_TAG: c_int,
    /// Error code (set by the multiple-completion calls).
    pub MPI_ERROR: c_int,
    /// Implementation fields.
    pub MPI_internal: [c_int; 5],
}

impl MPI_Status {
    /// A status for `bytes` received from `source` with `tag`.
    pub fn new(source: c_int, tag: c_int, bytes: usize) -> Self {
        let mut s = MPI_Status { MPI_SOURCE: source, MPI_TAG: tag, MPI_ERROR: 0, MPI_internal: [0; 5] };
        s.set_bytes(bytes as i64);
        s
    }

    /// Bytes received.
    pub fn bytes(&self) -> i64 {
        (self.MPI_internal[0] as u32 as i64) | ((self.MPI_internal[1] as i64) << 32)
    }

    /// Sets the byte count.
    pub fn set_bytes(&mut self, n: i64) {
        self.MPI_internal[0] = n as u32 as c_int;
        self.MPI_internal[1] = (n >> 32) as c_int;
    }

    /// Whether the operation was cancelled.
    pub fn cancelled(&self) -> bool {
        self.MPI_internal[2] != 0
    }

    /// Marks the operation cancelled or not.
    pub fn set_cancelled(&mut self, c: bool) {
        self.MPI_internal[2] = c as c_int;
    }
}

/// A raw pointer kept by a request that another thread may complete: the program guarantees
/// the memory stays valid until the request completes (MPI's rule for nonblocking calls).
#[derive(Debug, Clone, Copy)]
pub struct SendPtr(pub *mut c_void);
// SAFETY: the pointee is only touched by whoever runs the operation, while the program
// keeps it valid and untouched (the nonblocking-call contract); the pointer itself is
// plain data.
unsafe impl Send for SendPtr {}
// SAFETY: as above.
unsafe impl Sync for SendPtr {}
