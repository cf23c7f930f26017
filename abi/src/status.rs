//! The statuses the header's sentinels make — the empty status and that of an operation
//! with `MPI_PROC_NULL` — and the writes of a status to the program, which honour
//! `MPI_STATUS(ES)_IGNORE`. Apart from `types.rs` (the C layout), which the constants are
//! typed with.

use crate::consts::{MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_PROC_NULL, MPI_SUCCESS};
use crate::types::MPI_Status;

impl MPI_Status {
    /// The empty status (inactive and null requests): source MPI_ANY_SOURCE, tag
    /// MPI_ANY_TAG, count 0.
    pub fn empty() -> Self {
        MPI_Status::new(MPI_ANY_SOURCE, MPI_ANY_TAG, 0)
    }

    /// The status of an operation with MPI_PROC_NULL: source MPI_PROC_NULL, tag
    /// MPI_ANY_TAG, count 0.
    pub fn proc_null() -> Self {
        MPI_Status::new(MPI_PROC_NULL, MPI_ANY_TAG, 0)
    }
}

/// Writes `s` to `dst` unless it is `MPI_STATUS_IGNORE` (null), all but its `MPI_ERROR`
/// field: single-completion calls leave that untouched (MPI-4.1 3.2.5), which
/// multi-threaded programs that check it rely on — except in an empty status, whose
/// error field is part of what makes it empty.
///
/// # Safety
/// `dst` is null or points to a writable `MPI_Status`.
pub(crate) unsafe fn put_status(dst: *mut MPI_Status, s: MPI_Status) {
    if !dst.is_null() {
        // SAFETY: non-null and writable (function contract); fields written one by one,
        // nothing read.
        unsafe {
            std::ptr::addr_of_mut!((*dst).MPI_SOURCE).write(s.MPI_SOURCE);
            std::ptr::addr_of_mut!((*dst).MPI_TAG).write(s.MPI_TAG);
            std::ptr::addr_of_mut!((*dst).MPI_internal).write(s.MPI_internal);
            // An empty status (a null or inactive request) is all of it: source
            // MPI_ANY_SOURCE, tag MPI_ANY_TAG and error MPI_SUCCESS (MPI-4.1 3.7.3).
            if s.MPI_SOURCE == MPI_ANY_SOURCE && s.MPI_TAG == MPI_ANY_TAG {
                std::ptr::addr_of_mut!((*dst).MPI_ERROR).write(MPI_SUCCESS);
            }
        }
    }
}

/// Writes `s` to `dst` unless it is null (`MPI_STATUS(ES)_IGNORE`), its `MPI_ERROR` field
/// included: the statuses of the multiple-completion calls (`MPI_Waitall`,
/// `MPI_Waitsome`, `MPI_Testall`, `MPI_Testsome`), the only calls that set it.
///
/// # Safety
/// `dst` is null or points to a writable `MPI_Status`.
pub(crate) unsafe fn put_status_with_error(dst: *mut MPI_Status, s: MPI_Status) {
    if !dst.is_null() {
        // SAFETY: non-null and writable (function contract).
        unsafe { dst.write(s) }
    }
}
