//! `MPI_Win_allocate_shared` (MPI-4.1 12.2.3): one memory segment mapped by every member
//! of a host, each member's part right after the previous member's (contiguous, the
//! default), so that a member loads and stores the others' parts directly
//! (`MPI_Win_shared_query`) as well as through one-sided operations. The facade makes it
//! (`Comm::win_allocate_shared`, `src/win/create.rs`): a POSIX shared memory object
//! created by the first member, opened by the others, unlinked once every member mapped
//! it, each step ending with an agreement of the members (uniform, as window creation
//! is). Members on different hosts cannot share memory: the call then fails at every
//! member with `MPI_ERR_RMA_SHARED`.

use std::ffi::{c_int, c_void};

use crate::types::{Handle, MPI_Aint};

use super::create_allocated;

/// `MPI_Win_allocate_shared` and its `_c` form.
///
/// # Safety
/// `baseptr` is a `void **` and `win` writable (MPI contract).
pub(super) unsafe fn win_allocate_shared(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { create_allocated(comm, size, disp_unit, info, true, baseptr, win) }
}
