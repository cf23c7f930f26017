//! The C interface's fast path for one-sided operations on a window whose members all
//! share this node: a put, get, accumulate, atomic or flush of predefined contiguous data
//! goes from the handle to a load, store or atomic on the mapped segment without taking a
//! lock or touching a reference count.
//!
//! Each thread remembers the last window it used ([`LAST`]): its handle, the generation
//! of window frees it was looked up in ([`FREES`], bumped by every `MPI_Win_free`), and
//! the window's shared [`DirectWin`]. A call whose handle and generation match uses it
//! at once; any other looks the handle up in the table (and remembers the result,
//! also that a window has no fast path). The remembered `DirectWin` keeps its mapping,
//! so a call racing a free on another thread (erroneous in MPI) still touches mapped
//! memory; `MPI_Win_free` forgets the calling thread's entry, another thread's is
//! replaced at its next window call.
//!
//! Every function returns `None` when the call is not of the fast kind (a derived
//! datatype, `MPI_PROC_NULL`, no data, a range outside the window, a target not reached
//! directly) and has then done nothing: the general path handles it, errors included.
//! An error of the direct operation itself (a failed target) is raised through the
//! window as the general path would.

use std::cell::RefCell;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::ops::{acc_of, cas_elem, GetArgs};
use super::{fail, on_win_quick};
use crate::consts::*;
use crate::dtype::{DtRef, Dtype};
use crate::types::{Handle, MPI_Aint, MPI_Count};
use crate::winobj::{FastWin, WINS};

/// Window frees so far: a remembered lookup from an older generation is stale.
static FREES: AtomicU64 = AtomicU64::new(0);

type Remembered = (Handle, u64, Option<Arc<FastWin>>);

thread_local! {
    /// The last window this thread used.
    static LAST: RefCell<Remembered> = const { RefCell::new((MPI_WIN_NULL, u64::MAX, None)) };
}

/// Called by `MPI_Win_free` before it takes the window: every thread's remembered
/// lookup is stale from now on, the calling thread's is dropped.
pub(crate) fn forget() {
    FREES.fetch_add(1, Ordering::AcqRel);
    // A thread being torn down has nothing to forget.
    let _ = LAST.try_with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            *c = (MPI_WIN_NULL, u64::MAX, None);
        }
    });
}

/// What a direct operation gave, small enough to pass in registers (an error, rare, is
/// boxed: the large `Result` copied through the layers here cost more than the copy).
type Done = Option<Result<(), Box<runthrough::Error>>>;

/// Runs `f` on window `h`'s fast path; `None` if it has none (or `f` declines).
#[inline]
fn with(h: Handle, f: impl FnOnce(&FastWin) -> Option<Result<(), runthrough::Error>>) -> Done {
    let generation = FREES.load(Ordering::Acquire);
    LAST.try_with(|c| {
        let mut c = c.try_borrow_mut().ok()?;
        if c.0 != h || c.1 != generation {
            let fast = WINS.with(h, |w| w.fast.clone())?;
            *c = (h, generation, fast);
        }
        Some(f(c.2.as_deref()?)?.map_err(Box::new))
    })
    .ok()
    .flatten()
}

/// The predefined datatype of handle `h` (borrowed: no reference count).
#[inline]
fn predefined(h: Handle) -> Option<&'static Dtype> {
    match crate::dtype::lookup(h)? {
        DtRef::Static(t) => Some(t),
        DtRef::Shared(_) => None,
    }
}

/// Bytes of `count` elements of `t`, if that is more than nothing.
#[inline]
fn bytes(count: MPI_Count, t: &Dtype) -> Option<usize> {
    usize::try_from(count).ok()?.checked_mul(t.size).filter(|&n| n > 0)
}

/// The C result of a direct operation: success, or its error through the window.
#[inline]
fn outcome(win: Handle, r: Result<(), Box<runthrough::Error>>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => failed(win, *e),
    }
}

#[cold]
#[inline(never)]
fn failed(win: Handle, e: runthrough::Error) -> c_int {
    on_win_quick(win, |_, w| Err(fail(w.check_error(e))))
}

/// `MPI_Put` and `MPI_Accumulate` (`op` `None` for a put).
///
/// # Safety
/// The origin buffer holds `oc` elements of `odt` (MPI contract).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) unsafe fn put_acc(
    origin: *const c_void,
    oc: MPI_Count,
    odt: Handle,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: Handle,
    op: Option<Handle>,
    win: Handle,
) -> Option<c_int> {
    let (ot, tt) = (predefined(odt)?, predefined(tdt)?);
    let len = bytes(tc, tt)?;
    if bytes(oc, ot)? != len {
        return None;
    }
    let acc = match op {
        None => None,
        Some(op) => Some(acc_of(op, ot, tt, false).ok()?),
    };
    // SAFETY: the program's origin buffer, `len` bytes (function contract), read during
    // this call.
    let data = unsafe { std::slice::from_raw_parts(origin.cast::<u8>(), len) };
    let r = with(win, |f| {
        let (rank, off) = f.offset(rank, disp, len)?;
        match acc {
            None => f.direct.put(rank, off, data),
            Some((op, elem)) => f.direct.accumulate(rank, off, op, elem, data, None),
        }
    })?;
    Some(outcome(win, r))
}

/// A blocking `MPI_Get`, `MPI_Get_accumulate` or `MPI_Fetch_and_op`.
///
/// # Safety
/// The buffers hold what their counts and datatypes say (MPI contract).
#[inline]
pub(super) unsafe fn get(a: &GetArgs, win: Handle) -> Option<c_int> {
    let (rt, tt) = (predefined(a.rdt)?, predefined(a.tdt)?);
    let len = bytes(a.tc, tt)?;
    if bytes(a.rc, rt)? != len {
        return None;
    }
    let (acc, data): (_, &[u8]) = match a.op {
        None => (None, &[]),
        Some(MPI_NO_OP) => (Some(acc_of(MPI_NO_OP, tt, tt, false).ok()?), &[]),
        Some(op) => {
            let ot = predefined(a.odt)?;
            if bytes(a.oc, ot)? != len {
                return None;
            }
            // SAFETY: the program's origin buffer, `len` bytes (function contract).
            (Some(acc_of(op, ot, tt, false).ok()?), unsafe { std::slice::from_raw_parts(a.origin.cast(), len) })
        }
    };
    // SAFETY: the program's result buffer, `len` bytes (function contract), written
    // during this call.
    let result = unsafe { std::slice::from_raw_parts_mut(a.result.cast::<u8>(), len) };
    let r = with(win, |f| {
        let (rank, off) = f.offset(a.rank, a.disp, len)?;
        match acc {
            None => f.direct.get(rank, off, result),
            Some((op, elem)) => f.direct.accumulate(rank, off, op, elem, data, Some(result)),
        }
    })?;
    Some(outcome(win, r))
}

/// `MPI_Compare_and_swap`.
///
/// # Safety
/// Each buffer holds one element of `dt` (MPI contract).
#[inline]
pub(super) unsafe fn cas(
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: Handle,
    rank: c_int,
    disp: MPI_Aint,
    win: Handle,
) -> Option<c_int> {
    let elem = cas_elem(predefined(dt)?).ok()?;
    let n = elem.size();
    // SAFETY: one element at each of the program's buffers (function contract), used
    // during this call only.
    let (new, compare, result) = unsafe {
        (
            std::slice::from_raw_parts(origin.cast::<u8>(), n),
            std::slice::from_raw_parts(compare.cast::<u8>(), n),
            std::slice::from_raw_parts_mut(result.cast::<u8>(), n),
        )
    };
    let r = with(win, |f| {
        let (rank, off) = f.offset(rank, disp, n)?;
        f.direct.compare_and_swap(rank, off, elem, compare, new, result)
    })?;
    Some(outcome(win, r))
}

/// `MPI_Win_flush`: every operation on the window was applied at its call, so a fence.
#[inline]
pub(super) fn flush(rank: c_int, win: Handle) -> Option<c_int> {
    let r = with(win, |f| f.direct.flush(u32::try_from(rank).ok()?))?;
    Some(outcome(win, r))
}
