//! Synchronization of one-sided communication (MPI-4.1 12.5): fence, passive-target locks
//! and flushes, and the post/start/complete/wait/test epochs, each the facade's call of
//! the same name (`src/win.rs` describes what they wait for and how they fail).
//!
//! Assertions (`MPI_MODE_*`) are checked and otherwise ignored: every call does its whole
//! work, which every assertion allows. Operations are complete locally when issued (a put
//! or accumulate copies its data out, a get returns with its data), so the local flushes
//! have nothing to wait for. A group names its members by world rank; the window's ranks
//! of a post or start are their positions among the window's members (`MPI_ERR_GROUP`
//! for a process that is none).

use std::ffi::c_int;

use runthrough::LockKind;

use super::{fail, on_win, on_win_quick, refuse, target_rank};
use crate::consts::*;
use crate::types::Handle;
use crate::winobj::WinObj;

/// Every assertion a synchronization call may carry.
const MODES: c_int = MPI_MODE_NOCHECK | MPI_MODE_NOPRECEDE | MPI_MODE_NOPUT | MPI_MODE_NOSTORE | MPI_MODE_NOSUCCEED;

fn check_assert(assert: c_int) -> Result<(), c_int> {
    if assert & !MODES != 0 {
        return Err(refuse(MPI_ERR_ASSERT, format!("assertion {assert:#x} has bits no MPI_MODE_ constant has")));
    }
    Ok(())
}

/// The window ranks of group `group`'s members.
fn members(w: &WinObj, group: Handle) -> Result<Vec<usize>, c_int> {
    let g = crate::group::lookup(group).ok_or(MPI_ERR_GROUP)?;
    g.ranks
        .iter()
        .map(|r| {
            w.world.iter().position(|m| m == r).ok_or_else(|| {
                refuse(MPI_ERR_GROUP, format!("process {r} of MPI_COMM_WORLD is not a member of the window"))
            })
        })
        .collect()
}

pub(crate) unsafe fn MPI_Win_fence(assert: c_int, win: Handle) -> c_int {
    on_win(win, |_, w| {
        check_assert(assert)?;
        w.fence().map_err(fail)
    })
}

pub(crate) unsafe fn MPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: Handle) -> c_int {
    on_win(win, |_, w| {
        check_assert(assert)?;
        let kind = match lock_type {
            MPI_LOCK_SHARED => LockKind::Shared,
            MPI_LOCK_EXCLUSIVE => LockKind::Exclusive,
            t => return Err(refuse(MPI_ERR_LOCKTYPE, format!("lock type {t}"))),
        };
        match target_rank(w, rank)? {
            Some(r) => w.lock(kind, r).map_err(fail),
            None => Ok(()),
        }
    })
}

pub(crate) unsafe fn MPI_Win_unlock(rank: c_int, win: Handle) -> c_int {
    on_win(win, |_, w| match target_rank(w, rank)? {
        Some(r) => w.unlock(r).map_err(fail),
        None => Ok(()),
    })
}

pub(crate) unsafe fn MPI_Win_lock_all(assert: c_int, win: Handle) -> c_int {
    on_win(win, |_, w| {
        check_assert(assert)?;
        w.lock_all().map_err(fail)
    })
}

pub(crate) unsafe fn MPI_Win_unlock_all(win: Handle) -> c_int {
    on_win(win, |_, w| w.unlock_all().map_err(fail))
}

pub(crate) unsafe fn MPI_Win_flush(rank: c_int, win: Handle) -> c_int {
    if let Some(rc) = super::fast::flush(rank, win) {
        return rc;
    }
    on_win_quick(win, |_, w| match target_rank(w, rank)? {
        Some(r) => w.flush(r).map_err(fail),
        None => Ok(()),
    })
}

pub(crate) unsafe fn MPI_Win_flush_all(win: Handle) -> c_int {
    on_win(win, |_, w| w.flush_all().map_err(fail))
}

pub(crate) unsafe fn MPI_Win_flush_local(rank: c_int, win: Handle) -> c_int {
    on_win(win, |_, w| match target_rank(w, rank)? {
        Some(r) => w.flush_local(r).map_err(fail),
        None => Ok(()),
    })
}

/// Every operation is complete locally when its call returns: nothing to wait for.
pub(crate) unsafe fn MPI_Win_flush_local_all(win: Handle) -> c_int {
    on_win(win, |_, _| Ok(()))
}

pub(crate) unsafe fn MPI_Win_sync(win: Handle) -> c_int {
    on_win(win, |_, w| w.sync().map_err(fail))
}

pub(crate) unsafe fn MPI_Win_post(group: Handle, assert: c_int, win: Handle) -> c_int {
    on_win(win, |o, w| {
        check_assert(assert)?;
        let origins = members(o, group)?;
        w.post(&origins).map_err(fail)
    })
}

pub(crate) unsafe fn MPI_Win_start(group: Handle, assert: c_int, win: Handle) -> c_int {
    on_win(win, |o, w| {
        check_assert(assert)?;
        let targets = members(o, group)?;
        w.start(&targets).map_err(fail)
    })
}

pub(crate) unsafe fn MPI_Win_complete(win: Handle) -> c_int {
    on_win(win, |_, w| w.complete().map_err(fail))
}

pub(crate) unsafe fn MPI_Win_wait(win: Handle) -> c_int {
    on_win(win, |_, w| w.wait().map_err(fail))
}

pub(crate) unsafe fn MPI_Win_test(win: Handle, flag: *mut c_int) -> c_int {
    on_win(win, |_, w| {
        if flag.is_null() {
            return Err(MPI_ERR_ARG);
        }
        let done = w.test().map_err(fail)?;
        // SAFETY: output argument.
        unsafe { *flag = c_int::from(done) };
        Ok(())
    })
}
