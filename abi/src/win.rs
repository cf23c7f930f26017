//! One-sided communication (MPI-4.1 chapter 12) through the C interface, over the
//! facade's byte window `runthrough::Window<u8>` (`src/win.rs`; the protocol is the
//! engine's, `engine/src/rma.rs`).
//!
//! Parts:
//! - this file: creating windows (`MPI_Win_create`, `MPI_Win_allocate` and their `_c`
//!   forms), freeing them, their attributes (the predefined `MPI_WIN_BASE`,
//!   `MPI_WIN_SIZE`, `MPI_WIN_DISP_UNIT`, `MPI_WIN_CREATE_FLAVOR`, `MPI_WIN_MODEL` and
//!   the program's keyvals), names, info hints, error handlers, group,
//!   `MPI_Win_shared_query`, and the run-through calls `MPIX_Win_validate` and
//!   `MPIX_Win_get_failed` (`abi/include/mpi-ext.h`);
//! - `win/shared.rs`: `MPI_Win_allocate_shared`, one mapping shared by the members of a
//!   host;
//! - `win/sync.rs`: fence, locks, flushes, post/start/complete/wait/test;
//! - `win/ops.rs`: put, get, the accumulates and atomics, and their request forms.
//!
//! The memory a window exposes is always the program's view of it: the program's own for
//! `MPI_Win_create`, memory allocated here for `MPI_Win_allocate` (kept by the window
//! object until after the window is freed, since the program loads and stores through
//! the base pointer it was given), a shared mapping for `MPI_Win_allocate_shared`. The
//! memory model is `MPI_WIN_UNIFIED`: the window has one copy, which the engine writes
//! under its lock when it applies an operation.
//!
//! A window's error handler is `MPI_ERRORS_ARE_FATAL` at creation (MPI-4.1 9.3); errors of
//! its operations and of its requests go through it (`raise.rs` finds it by handle).
//!
//! Dynamic windows (`MPI_Win_create_dynamic`) expose what `MPI_Win_attach` attaches; their
//! operations name absolute addresses (`MPI_Get_address`), which the target resolves.
//!
//! Refused: `MPI_Win_allocate_shared` across hosts (`MPI_ERR_RMA_SHARED`).

use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use runthrough::win::WinMemory;
use runthrough::Window;

use crate::commobj::CommObj;
use crate::consts::*;
use crate::err::{put_string, set_detail};
use crate::keyval::{self, create_keyval, Object};
use crate::raise::{raise_on, raise_with};
use crate::types::{FnPtr, Handle, MPI_Aint};
use crate::winobj::{WinObj, WINS};

mod ext;
mod fast;
mod ops;
mod shared;
mod sync;
pub(crate) use ops::*;
pub(crate) use sync::*;

/// `let w = win!(h);`: the window object, or `MPI_ERR_WIN` through `MPI_COMM_WORLD`.
macro_rules! win {
    ($h:expr) => {
        match crate::winobj::WINS.get($h) {
            Some(w) => w,
            None => return crate::raise::raise_on(crate::consts::MPI_COMM_WORLD, crate::consts::MPI_ERR_WIN),
        }
    };
}

/// Runs `f` on the window of handle `h` and raises the class it returns through the
/// window's handler. The window is held by a read lock meanwhile, so `MPI_Win_free` (which
/// takes it) waits for the calls running on it; the lock is released before a handler
/// runs.
pub(crate) fn on_win(h: Handle, f: impl FnOnce(&WinObj, &Window<u8>) -> Result<(), c_int>) -> c_int {
    let Some(w) = WINS.get(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_WIN) };
    let g = w.win.read();
    let Some(win) = g.as_ref() else { return raise_on(MPI_COMM_WORLD, MPI_ERR_WIN) };
    let r = f(&w, win);
    drop(g);
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(code) => raise_on(h, code),
    }
}

/// [`on_win`] for the calls that wait for no other thread of this process (puts,
/// accumulates, gets, atomics, flushes: at most a round trip to a target, which its
/// engine answers): the handle table stays read-locked during the call instead of the
/// window being referenced (one atomic pair fewer on the hot path). Calls that can wait
/// for other threads (synchronization, creation, free) use [`on_win`], so a thread
/// creating a window never waits behind them.
pub(crate) fn on_win_quick(h: Handle, f: impl FnOnce(&WinObj, &Window<u8>) -> Result<(), c_int>) -> c_int {
    let r = WINS.with(h, |w| {
        let g = w.win.read();
        g.as_ref().map(|win| f(w, win))
    });
    match r.flatten() {
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_WIN),
        Some(Ok(())) => MPI_SUCCESS,
        Some(Err(code)) => raise_on(h, code),
    }
}

/// The class of runthrough error `e` from a one-sided call; its message is kept for a
/// fatal handler.
pub(crate) fn fail(e: runthrough::Error) -> c_int {
    set_detail(e.to_string());
    crate::err::rma_code_of(&e)
}

/// Class `code` with the message `why` (printed by a fatal handler).
pub(crate) fn refuse(code: c_int, why: String) -> c_int {
    set_detail(why);
    code
}

/// A target rank of the program: `None` for `MPI_PROC_NULL`, else the window rank.
pub(crate) fn target_rank(win: &Window<u8>, rank: c_int) -> Result<Option<usize>, c_int> {
    match rank {
        MPI_PROC_NULL => Ok(None),
        r if r >= 0 && (r as usize) < win.size() => Ok(Some(r as usize)),
        _ => Err(MPI_ERR_RANK),
    }
}

// ---------------------------------------------------------------------------------------
// Creation and free

/// What a new window exposes at this process.
enum Exposed {
    /// The program's `size` bytes at `base` (`MPI_Win_create`).
    Program(*mut u8, usize),
    /// `size` bytes allocated by the library (`MPI_Win_allocate`): in the node's
    /// segment when other members share this node.
    Allocate(usize),
    /// `size` bytes of the segment every member maps (`MPI_Win_allocate_shared`).
    Shared(usize),
    /// No memory until the program attaches some (`MPI_Win_create_dynamic`).
    Dynamic,
}

/// The checks every creation makes of its size and displacement unit.
fn check_extent(size: MPI_Aint, disp_unit: MPI_Aint) -> Result<(usize, usize), c_int> {
    if size < 0 {
        return Err(refuse(MPI_ERR_SIZE, format!("window size {size} is negative")));
    }
    if disp_unit <= 0 {
        return Err(refuse(MPI_ERR_DISP, format!("displacement unit {disp_unit} is not positive")));
    }
    Ok((size as usize, disp_unit as usize))
}

/// Creates the window exposing `e` with displacement unit `disp_unit` over
/// communicator `comm` (collective, uniform: it is created everywhere or errs
/// everywhere), writes its handle to `win` and returns the address of this process's
/// memory.
///
/// # Safety
/// For `Exposed::Program`, the program's memory is valid until the window is freed (MPI's
/// contract); `win` is writable.
unsafe fn create(
    c: &Arc<CommObj>,
    comm: Handle,
    info: Handle,
    e: Exposed,
    disp_unit: usize,
    win: *mut Handle,
) -> Result<*mut u8, c_int> {
    ext::register();
    let (made, flavor) = match e {
        Exposed::Program(base, size) => {
            // SAFETY: valid until the window is freed (function contract).
            let mem = unsafe { WinMemory::external(base, size) };
            (c.comm.win_with_memory(mem, disp_unit), MPI_WIN_FLAVOR_CREATE)
        }
        Exposed::Allocate(size) => (c.comm.win_allocate_bytes(size, disp_unit), MPI_WIN_FLAVOR_ALLOCATE),
        Exposed::Shared(size) => (c.comm.win_allocate_shared(size, disp_unit), MPI_WIN_FLAVOR_SHARED),
        Exposed::Dynamic => (c.comm.win_create_dynamic(), MPI_WIN_FLAVOR_DYNAMIC),
    };
    let w = match made {
        Ok(w) => w,
        Err(runthrough::Error::Unsupported(why)) if flavor == MPI_WIN_FLAVOR_SHARED => {
            let why =
                format!("MPI_Win_allocate_shared: {why} (split the communicator with MPI_COMM_TYPE_SHARED first)");
            return Err(raise_on(comm, refuse(MPI_ERR_RMA_SHARED, why)));
        }
        Err(err) => return Err(crate::raise::raise_error(comm, &err)),
    };
    w.set_error_mode(runthrough::ErrorMode::ErrorsReturn);
    let world: Vec<u32> = w.group().world_ranks().into_iter().map(|r| r as u32).collect();
    let rank = w.rank();
    // A dynamic window's base is MPI_BOTTOM: its displacements are addresses.
    let base = if w.is_dynamic() { std::ptr::null_mut() } else { w.local_base() };
    let size = w.extent_of(rank).map_or(0, |e| e.0);
    // Every member's memory this process maps (its node's, for allocated windows), and
    // its own always.
    let mut shared: crate::winobj::MemberMem = (0..world.len())
        .map(|r| w.shared_query(r).map_or((0, 0, 1), |(p, b, u)| (p as usize, b, u as MPI_Aint)))
        .collect();
    shared[rank] = (base as usize, size, disp_unit as MPI_Aint);
    let obj = WinObj {
        fast: crate::winobj::FastWin::of(&w),
        win: RwLock::new(Some(w)),
        world,
        errhandler: Mutex::new(MPI_ERRORS_ARE_FATAL),
        attrs: Mutex::default(),
        name: Mutex::new(String::new()),
        info: Mutex::new(crate::info::entries(info)),
        base: base as usize,
        size: size as MPI_Aint,
        disp_unit: c_int::try_from(disp_unit).unwrap_or(c_int::MAX),
        flavor,
        model: MPI_WIN_UNIFIED,
        shared,
        parent: c.clone(),
    };
    // SAFETY: output argument (function contract).
    unsafe { *win = WINS.insert(Arc::new(obj)) };
    Ok(base)
}

/// [`create`] of memory the library allocates, its address written to `baseptr`.
///
/// # Safety
/// `baseptr` is a `void **` and `win` writable (MPI contract).
unsafe fn create_allocated(
    comm: Handle,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    shared: bool,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    let (c, size, disp_unit) = match creation(comm, size, disp_unit) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if win.is_null() || baseptr.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    let e = if shared { Exposed::Shared(size) } else { Exposed::Allocate(size) };
    // SAFETY: library memory; `win` checked.
    match unsafe { create(&c, comm, info, e, disp_unit, win) } {
        Ok(base) => {
            // SAFETY: `baseptr` is a `void **` (MPI contract).
            unsafe { *baseptr.cast::<*mut c_void>() = base.cast() };
            MPI_SUCCESS
        }
        Err(code) => code,
    }
}

/// What every window constructor checks first: an intracommunicator (else the error
/// goes to MPI_COMM_WORLD's handler) and a valid size and displacement unit (else to the
/// communicator's). `Err` holds the code the handler returned.
pub(crate) fn creation(
    comm: Handle,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
) -> Result<(Arc<CommObj>, usize, usize), c_int> {
    let c = intra(comm).map_err(|e| raise_on(MPI_COMM_WORLD, e))?;
    let (size, disp_unit) = check_extent(size, disp_unit).map_err(|e| raise_on(comm, e))?;
    Ok((c, size, disp_unit))
}

/// The communicator of a creation call, refusing intercommunicators.
fn intra(comm: Handle) -> Result<Arc<CommObj>, c_int> {
    let c = crate::rt::lookup(comm)?;
    if c.inter.is_some() {
        return Err(refuse(MPI_ERR_COMM, "a window needs an intracommunicator".into()));
    }
    Ok(c)
}

unsafe fn win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> c_int {
    let (c, size, disp_unit) = match creation(comm, size, disp_unit) {
        Ok(x) => x,
        Err(code) => return code,
    };
    if win.is_null() || (size > 0 && base.is_null()) {
        return raise_on(comm, if win.is_null() { MPI_ERR_ARG } else { MPI_ERR_BASE });
    }
    // SAFETY: the program's memory, valid until MPI_Win_free (MPI's contract).
    match unsafe { create(&c, comm, info, Exposed::Program(base.cast(), size), disp_unit, win) } {
        Ok(_) => MPI_SUCCESS,
        Err(code) => code,
    }
}

pub(crate) unsafe fn MPI_Win_create(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: c_int,
    info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { win_create(base, size, disp_unit as MPI_Aint, info, comm, win) }
}

pub(crate) unsafe fn MPI_Win_create_c(
    base: *mut c_void,
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { win_create(base, size, disp_unit, info, comm, win) }
}

/// `MPI_Win_allocate`: `size` zeroed bytes allocated by the library (in the node's
/// segment when other members share this node: they then load and store it directly)
/// and kept until the window object goes; their address goes to `baseptr`.
unsafe fn win_allocate(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { create_allocated(comm, size, disp_unit, info, false, baseptr, win) }
}

pub(crate) unsafe fn MPI_Win_allocate(
    size: MPI_Aint,
    disp_unit: c_int,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { win_allocate(size, disp_unit as MPI_Aint, info, comm, baseptr, win) }
}

pub(crate) unsafe fn MPI_Win_allocate_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { win_allocate(size, disp_unit, info, comm, baseptr, win) }
}

pub(crate) unsafe fn MPI_Win_allocate_shared(
    size: MPI_Aint,
    disp_unit: c_int,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { shared::win_allocate_shared(size, disp_unit as MPI_Aint, info, comm, baseptr, win) }
}

pub(crate) unsafe fn MPI_Win_allocate_shared_c(
    size: MPI_Aint,
    disp_unit: MPI_Aint,
    info: Handle,
    comm: Handle,
    baseptr: *mut c_void,
    win: *mut Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    unsafe { shared::win_allocate_shared(size, disp_unit, info, comm, baseptr, win) }
}

pub(crate) unsafe fn MPI_Win_create_dynamic(info: Handle, comm: Handle, win: *mut Handle) -> c_int {
    let c = match intra(comm) {
        Ok(c) => c,
        Err(code) => return raise_on(MPI_COMM_WORLD, code),
    };
    if win.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: no memory is exposed at creation; `win` checked.
    match unsafe { create(&c, comm, info, Exposed::Dynamic, 1, win) } {
        Ok(_) => MPI_SUCCESS,
        Err(code) => code,
    }
}

/// `MPI_Win_attach`: `size` bytes at `base`, the program's until `MPI_Win_detach` (MPI's
/// contract), reachable by the other members at address `base`. Attaching no byte does
/// nothing; memory overlapping memory attached before is refused (`MPI_ERR_ARG`).
pub(crate) unsafe fn MPI_Win_attach(win: Handle, base: *mut c_void, size: MPI_Aint) -> c_int {
    on_win(win, |_, w| {
        if size < 0 {
            return Err(refuse(MPI_ERR_SIZE, format!("MPI_Win_attach: size {size} is negative")));
        }
        if !w.is_dynamic() {
            return Err(refuse(MPI_ERR_RMA_FLAVOR, "MPI_Win_attach: the window is not dynamic".into()));
        }
        if size == 0 {
            return Ok(());
        }
        if base.is_null() {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: the program's memory, valid until it is detached or the window freed
        // (MPI's contract for MPI_Win_attach).
        let mem = unsafe { WinMemory::external(base.cast(), size as usize) };
        w.attach(mem).map(drop).map_err(|e| crate::err::rma_code_of(&e))
    })
}

/// `MPI_Win_detach`: the memory attached at `base` is no longer reachable; operations
/// that name it later are refused at the target.
pub(crate) unsafe fn MPI_Win_detach(win: Handle, base: *const c_void) -> c_int {
    on_win(win, |_, w| {
        if !w.is_dynamic() {
            return Err(refuse(MPI_ERR_RMA_FLAVOR, "MPI_Win_detach: the window is not dynamic".into()));
        }
        w.detach(base as usize).map(drop).map_err(|e| crate::err::rma_code_of(&e))
    })
}

/// Collective: every operation on the window is complete everywhere first (the facade's
/// `Window::free`: flushes, then a barrier of the members, which completes despite
/// failures); the attributes' delete callbacks run before, while the window is still
/// whole; the memory allocated for it goes after.
pub(crate) unsafe fn MPI_Win_free(win: *mut Handle) -> c_int {
    if win.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: in/out argument.
    let h = unsafe { *win };
    let w = win!(h);
    let rc = keyval::delete_all(&w.attrs, h);
    if rc != MPI_SUCCESS {
        return raise_on(h, rc);
    }
    fast::forget();
    let Some(window) = w.win.write().take() else { return raise_on(MPI_COMM_WORLD, MPI_ERR_WIN) };
    let (_bytes, r) = window.free();
    WINS.remove(h);
    // SAFETY: in/out argument.
    unsafe { *win = MPI_WIN_NULL };
    match r {
        Ok(()) => MPI_SUCCESS,
        // The handle is gone: its handler is called with it all the same.
        Err(e) => raise_with(*w.errhandler.lock(), h, fail(e), Some(w.parent.clone())),
    }
}

// ---------------------------------------------------------------------------------------
// Attributes

pub(crate) unsafe fn MPI_Win_create_keyval(
    win_copy_attr_fn: FnPtr,
    win_delete_attr_fn: FnPtr,
    win_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    if win_keyval.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { create_keyval(Object::Win, win_copy_attr_fn, win_delete_attr_fn, win_keyval, extra_state) }
}

pub(crate) unsafe fn MPI_Win_free_keyval(win_keyval: *mut c_int) -> c_int {
    // SAFETY: in/out argument.
    let id = unsafe { *win_keyval };
    if !keyval::free_keyval(Object::Win, id) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
    // SAFETY: in/out argument.
    unsafe { *win_keyval = MPI_KEYVAL_INVALID };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_get_attr(
    win: Handle,
    win_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let w = win!(win);
    // The predefined attributes: the base itself, the others through their addresses
    // (in the object, which lives as long as the window).
    let v = match win_keyval {
        MPI_WIN_BASE => Some(w.base as *mut c_void),
        MPI_WIN_SIZE => Some((&w.size as *const MPI_Aint).cast_mut().cast()),
        MPI_WIN_DISP_UNIT => Some((&w.disp_unit as *const c_int).cast_mut().cast()),
        MPI_WIN_CREATE_FLAVOR => Some((&w.flavor as *const c_int).cast_mut().cast()),
        MPI_WIN_MODEL => Some((&w.model as *const c_int).cast_mut().cast()),
        k => match keyval::keyval(k, Object::Win) {
            Ok(_) => w.attrs.lock().get(k),
            Err(e) => return raise_on(win, e),
        },
    };
    // SAFETY: output arguments (the value is written where `attribute_val` points).
    unsafe {
        match v {
            Some(v) => {
                *attribute_val.cast::<*mut c_void>() = v;
                *flag = 1;
            }
            None => *flag = 0,
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_set_attr(win: Handle, win_keyval: c_int, attribute_val: *mut c_void) -> c_int {
    let w = win!(win);
    raise_on(win, keyval::set(&w.attrs, win, Object::Win, win_keyval, attribute_val))
}

pub(crate) unsafe fn MPI_Win_delete_attr(win: Handle, win_keyval: c_int) -> c_int {
    let w = win!(win);
    raise_on(win, keyval::delete(&w.attrs, win, Object::Win, win_keyval))
}

// ---------------------------------------------------------------------------------------
// Names, info, group

pub(crate) unsafe fn MPI_Win_set_name(win: Handle, win_name: *const c_char) -> c_int {
    let w = win!(win);
    if win_name.is_null() {
        return raise_on(win, MPI_ERR_ARG);
    }
    // SAFETY: NUL-terminated string (MPI contract).
    *w.name.lock() = unsafe { std::ffi::CStr::from_ptr(win_name) }.to_string_lossy().into_owned();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_get_name(win: Handle, win_name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let name = if win == MPI_WIN_NULL {
        "MPI_WIN_NULL".to_string()
    } else {
        let w = win!(win);
        let n = w.name.lock().clone();
        n
    };
    // SAFETY: MPI_MAX_OBJECT_NAME bytes (MPI contract).
    unsafe { put_string(&name, win_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    MPI_SUCCESS
}

/// The hints every window reports (what this implementation does whatever is asked):
/// locks exist, accumulates are ordered in every way, any operation may be mixed.
const DEFAULT_HINTS: [(&str, &str); 3] =
    [("no_locks", "false"), ("accumulate_ordering", "rar,raw,war,waw"), ("accumulate_ops", "same_op_no_op")];

pub(crate) unsafe fn MPI_Win_set_info(win: Handle, info: Handle) -> c_int {
    let w = win!(win);
    if info != MPI_INFO_NULL && !crate::info::exists(info) {
        return raise_on(win, MPI_ERR_INFO);
    }
    let mut kv = w.info.lock();
    for (k, v) in crate::info::entries(info) {
        match kv.iter_mut().find(|(x, _)| *x == k) {
            Some(e) => e.1 = v,
            None => kv.push((k, v)),
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_get_info(win: Handle, info_used: *mut Handle) -> c_int {
    let w = win!(win);
    if info_used.is_null() {
        return raise_on(win, MPI_ERR_ARG);
    }
    let given = w.info.lock().clone();
    let mut kv: Vec<(String, String)> = DEFAULT_HINTS
        .iter()
        .filter(|(k, _)| !given.iter().any(|(g, _)| g == k))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    kv.extend(given);
    // SAFETY: output argument.
    unsafe { *info_used = crate::info::new_info(kv) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_get_group(win: Handle, group: *mut Handle) -> c_int {
    let w = win!(win);
    if group.is_null() {
        return raise_on(win, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { *group = crate::group::new_group(w.world.clone()) };
    MPI_SUCCESS
}

/// MPI-4.1 12.2.3, for every flavor: a member's memory where this process can load and
/// store it (every member's of a shared window, this process's own of any other), else
/// size 0 and a null base. `MPI_PROC_NULL` asks for the lowest member whose size is not
/// 0 (which this process may not reach).
unsafe fn shared_query(
    win: Handle,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: &mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    let w = win!(win);
    let entry = match rank {
        MPI_PROC_NULL => {
            let g = w.win.read();
            let first = g.as_ref().and_then(|win| (0..win.size()).find(|&r| win.extent_of(r).is_some_and(|e| e.0 > 0)));
            first.map_or((0, 0, 1), |r| w.shared[r])
        }
        r if r >= 0 && (r as usize) < w.shared.len() => w.shared[r as usize],
        _ => return raise_on(win, MPI_ERR_RANK),
    };
    let (addr, bytes, unit) = entry;
    if size.is_null() || baseptr.is_null() {
        return raise_on(win, MPI_ERR_ARG);
    }
    // SAFETY: output arguments; `baseptr` is a `void **` (MPI contract).
    unsafe {
        *size = bytes as MPI_Aint;
        *baseptr.cast::<*mut c_void>() = addr as *mut c_void;
    }
    *disp_unit = unit;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_shared_query(
    win: Handle,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    let mut unit = 0;
    // SAFETY: forwarded program arguments.
    let rc = unsafe { shared_query(win, rank, size, &mut unit, baseptr) };
    if rc == MPI_SUCCESS && !disp_unit.is_null() {
        // SAFETY: output argument.
        unsafe { *disp_unit = c_int::try_from(unit).unwrap_or(c_int::MAX) };
    }
    rc
}

pub(crate) unsafe fn MPI_Win_shared_query_c(
    win: Handle,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    let mut unit = 0;
    // SAFETY: forwarded program arguments.
    let rc = unsafe { shared_query(win, rank, size, &mut unit, baseptr) };
    if rc == MPI_SUCCESS && !disp_unit.is_null() {
        // SAFETY: output argument.
        unsafe { *disp_unit = unit };
    }
    rc
}

// ---------------------------------------------------------------------------------------
// Error handlers

pub(crate) unsafe fn MPI_Win_create_errhandler(win_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    // SAFETY: the same function shape as a communicator's handler (a pointer to the
    // object's handle and one to the code); forwarded.
    unsafe { crate::raise::MPI_Comm_create_errhandler(win_errhandler_fn, errhandler) }
}

pub(crate) unsafe fn MPI_Win_set_errhandler(win: Handle, errhandler: Handle) -> c_int {
    let w = win!(win);
    if !crate::err::valid_errhandler(errhandler) {
        return raise_on(win, MPI_ERR_ARG);
    }
    *w.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_get_errhandler(win: Handle, errhandler: *mut Handle) -> c_int {
    let w = win!(win);
    let eh = *w.errhandler.lock();
    crate::err::errhandler_ref(eh);
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Win_call_errhandler(win: Handle, errorcode: c_int) -> c_int {
    let _w = win!(win);
    let rc = raise_on(win, errorcode);
    // A fatal handler aborts in the guard, which acts on a failed call only.
    if crate::raise::fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}

// ---------------------------------------------------------------------------------------
// Run-through (draft chapter 17, R37; abi/include/mpi-ext.h)

fn group_handle(g: &runthrough::Group) -> Handle {
    crate::group::new_group(g.world_ranks().into_iter().map(|r| r as u32).collect())
}

/// Recognizes every failed member uniformly and re-enables the window's collective
/// synchronization (fence, free); `failed` receives the failed members, the same at every
/// member (the window's `MPIX_Comm_validate`).
pub(crate) unsafe fn MPIX_Win_validate(win: Handle, failed: *mut Handle) -> c_int {
    on_win(win, |_, w| {
        let g = w.validate().map_err(fail)?;
        if !failed.is_null() {
            // SAFETY: output argument.
            unsafe { *failed = group_handle(&g) };
        }
        Ok(())
    })
}

/// `MPIX_Win_validate` as a request: its completion writes the failed group to `failed`.
pub(crate) unsafe fn MPIX_Iwin_validate(win: Handle, failed: *mut Handle, request: *mut Handle) -> c_int {
    if request.is_null() {
        return raise_on(win, MPI_ERR_ARG);
    }
    let Some(w) = WINS.get(win) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_WIN) };
    let ticket = match w.win.read().as_ref().map(Window::ivalidate_ticket) {
        Some(Ok(t)) => t,
        Some(Err(e)) => return raise_on(win, fail(e)),
        None => return raise_on(MPI_COMM_WORLD, MPI_ERR_WIN),
    };
    let (mut ticket, out) = (ticket, crate::types::SendPtr(failed.cast()));
    let poll = move || {
        let out = &out;
        let g = w.win.read();
        let Some(x) = g.as_ref() else {
            // Freed under the request: an erroneous program; end it with an error.
            return Some((crate::types::MPI_Status::empty(), MPI_ERR_WIN));
        };
        let err = match x.poll_ticket(&mut ticket)? {
            runthrough::Decided::Validate(grp) => {
                if !out.0.is_null() {
                    // SAFETY: the program keeps `failed` valid until the request completes.
                    unsafe { *out.0.cast::<Handle>() = group_handle(&grp) };
                }
                MPI_SUCCESS
            }
            runthrough::Decided::Agree { .. } => MPI_ERR_INTERN,
        };
        Some((crate::types::MPI_Status::empty(), err))
    };
    // SAFETY: output argument (checked non-null above).
    unsafe { *request = crate::req::new_active(win, crate::req::Active::Polled(Box::new(poll))) };
    MPI_SUCCESS
}

/// The failed members this process knows of (local).
pub(crate) unsafe fn MPIX_Win_get_failed(win: Handle, failed: *mut Handle) -> c_int {
    on_win(win, |_, w| {
        if failed.is_null() {
            return Err(MPI_ERR_ARG);
        }
        // SAFETY: output argument.
        unsafe { *failed = group_handle(&w.group_failed()) };
        Ok(())
    })
}
