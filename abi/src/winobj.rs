//! A window as the C layer sees it (`MPI_Win`), its memory, and the table of the
//! program's window handles. The calls on windows are `win.rs`'s; raising an error through
//! a window's handler is `raise.rs`'s, which finds the handler here.

use std::ffi::c_int;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use runthrough::Window;
use runthrough_engine::rma::direct::DirectWin;

use crate::commobj::CommObj;
use crate::handles::{Kind, Table};
use crate::types::{Handle, MPI_Aint};

/// Each member's memory as a process reaches it: address, bytes, displacement unit.
pub(crate) type MemberMem = Vec<(usize, usize, MPI_Aint)>;

/// A window.
pub(crate) struct WinObj {
    /// The window; `None` once `MPI_Win_free` took it (under the write lock, which waits
    /// for the calls running on it).
    pub(crate) win: RwLock<Option<Window<u8>>>,
    /// Its fast path (`win/fast.rs`), when every member shares this node.
    pub(crate) fast: Option<Arc<FastWin>>,
    /// World ranks of the members, by window rank.
    pub(crate) world: Vec<u32>,
    pub(crate) errhandler: Mutex<Handle>,
    /// Its attributes (`keyval.rs`; the calls are `win.rs`'s).
    pub(crate) attrs: Mutex<crate::keyval::Attrs>,
    pub(crate) name: Mutex<String>,
    /// The hints the program gave (creation and `MPI_Win_set_info`).
    pub(crate) info: Mutex<Vec<(String, String)>>,
    /// The predefined attributes' values (`MPI_WIN_BASE` is `base` itself; the others
    /// are read through their addresses, which live as long as the object).
    pub(crate) base: usize,
    pub(crate) size: MPI_Aint,
    pub(crate) disp_unit: c_int,
    pub(crate) flavor: c_int,
    pub(crate) model: c_int,
    /// Each member's memory as this process reaches it (address, bytes, displacement
    /// unit): every member's for a shared window, else this process's alone.
    pub(crate) shared: MemberMem,
    /// The communicator it was created on (`MPI_ERRORS_ABORT` aborts its group).
    pub(crate) parent: Arc<CommObj>,
}

// SAFETY: the attribute values are opaque words the program stores and reads back; the
// library never dereferences them.
unsafe impl Send for WinObj {}
// SAFETY: as above; every other field is Sync.
unsafe impl Sync for WinObj {}

pub(crate) static WINS: Table<WinObj> = Table::new(Kind::Win);

/// Whether a window still has error handler `h`.
pub(crate) fn uses_errhandler(h: Handle) -> bool {
    WINS.all().iter().any(|(_, w)| *w.errhandler.lock() == h)
}

/// A window's fast path (`win/fast.rs`): its node access and every member's extent.
pub(crate) struct FastWin {
    pub(crate) direct: Arc<DirectWin>,
    /// Bytes and displacement unit of each member, by window rank.
    extents: Box<[(usize, usize)]>,
}

impl FastWin {
    /// The fast path of `w`, if its members all share this node.
    pub(crate) fn of(w: &runthrough::Window<u8>) -> Option<Arc<FastWin>> {
        let direct = w.node_access()?;
        let extents = (0..w.size()).map(|r| w.extent_of(r).unwrap_or((0, 1))).collect();
        Some(Arc::new(FastWin { direct, extents }))
    }

    /// The byte offset of `len` bytes at displacement `disp` of `rank`'s window, if
    /// they lie inside it.
    #[inline]
    pub(crate) fn offset(&self, rank: c_int, disp: MPI_Aint, len: usize) -> Option<(u32, u64)> {
        let rank = u32::try_from(rank).ok()?;
        let &(bytes, unit) = self.extents.get(rank as usize)?;
        let off = usize::try_from(disp).ok()?.checked_mul(unit)?;
        (off.checked_add(len)? <= bytes).then_some((rank, off as u64))
    }
}
