//! Large counts (`MPI_Count`) where the implementation takes a C `int`: the `_c` forms
//! convert their counts and arrays here, and answer `MPI_ERR_COUNT` for what does not
//! fit. Also the reading of the program's C arrays of a given count.

use std::ffi::c_int;

use crate::consts::*;
use crate::types::MPI_Count;

/// `n` as a C `int`, or `MPI_ERR_COUNT`.
pub(crate) fn small(n: MPI_Count) -> Result<c_int, c_int> {
    c_int::try_from(n).map_err(|_| MPI_ERR_COUNT)
}

/// [`small`], returning its error through `MPI_COMM_WORLD`'s handler from the calling
/// function.
macro_rules! small_count {
    ($n:expr) => {
        match $crate::count::small($n) {
            Ok(v) => v,
            Err(e) => return $crate::raise::raise_on($crate::consts::MPI_COMM_WORLD, e),
        }
    };
}
pub(crate) use small_count;

/// Reads `n` values of a C array (empty for a null pointer).
///
/// # Safety
/// `p` is null or points to `n` readable values (the MPI contract of the array argument).
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    // SAFETY: forwarded (function contract).
    unsafe { slice_c(p, n as MPI_Count) }
}

/// [`slice`] with a large count.
///
/// # Safety
/// As [`slice`].
pub(crate) unsafe fn slice_c<'a, T>(p: *const T, n: MPI_Count) -> &'a [T] {
    if p.is_null() || n <= 0 {
        &[]
    } else {
        // SAFETY: an array of n values (MPI contract).
        unsafe { std::slice::from_raw_parts(p, n as usize) }
    }
}

/// `n` entries of a C array of 64-bit values as `T`.
///
/// # Safety
/// `p` points to `n` readable values (the MPI contract of the array argument).
pub(crate) unsafe fn wide<T: TryFrom<i64>>(p: *const i64, n: MPI_Count) -> Result<Vec<T>, c_int> {
    // SAFETY: forwarded array (MPI contract).
    unsafe { slice(p, small(n)?) }.iter().map(|&v| T::try_from(v).map_err(|_| MPI_ERR_COUNT)).collect()
}

/// [`wide`], returning its error through `MPI_COMM_WORLD`'s handler from the calling
/// function.
macro_rules! wide_count {
    ($p:expr, $n:expr) => {
        // SAFETY: the program's array of $n entries.
        match unsafe { $crate::count::wide($p, $n) } {
            Ok(v) => v,
            Err(e) => return $crate::raise::raise_on($crate::consts::MPI_COMM_WORLD, e),
        }
    };
}
pub(crate) use wide_count;
