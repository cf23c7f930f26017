//! The runtime handle: the runthrough runtime both models share — started by MPI_Init or
//! by the first MPI_Session_init, finalized by the last of them to finish with it — and
//! each model's hold on it: the world model's state with MPI_COMM_WORLD and MPI_COMM_SELF,
//! and the live sessions. Here too the lookup of a communicator handle, which the
//! predefined ones make depend on that state, and what a failed start leaves. Above the
//! communicator objects (`commobj.rs`); below the raising of errors (`raise.rs`), which
//! finds its handlers here, and every family.

use std::ffi::c_int;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use crate::commobj::{CommObj, COMMS};
use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::types::Handle;

const NOT_INIT: u8 = 0;
const RUNNING: u8 = 1;
const FINALIZED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(NOT_INIT);
static RUNTIME: Mutex<Option<runthrough::Runtime>> = Mutex::new(None);
static WORLD: OnceLock<Arc<CommObj>> = OnceLock::new();
static SELF: OnceLock<Arc<CommObj>> = OnceLock::new();
/// The origin of `MPI_Wtime`: the runtime's start, or the first `MPI_Wtime` before it.
static EPOCH: OnceLock<Instant> = OnceLock::new();

/// MPI_COMM_WORLD while MPI is initialised.
pub(crate) fn world() -> Option<Arc<CommObj>> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| WORLD.get().cloned()).flatten()
}

/// MPI_COMM_WORLD while MPI is initialised, borrowed for the process's life.
#[inline(always)]
fn world_static() -> Option<&'static CommObj> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| WORLD.get().map(|a| &**a)).flatten()
}

/// MPI_COMM_SELF while MPI is initialised, borrowed for the process's life.
#[inline(always)]
fn self_static() -> Option<&'static CommObj> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| SELF.get().map(|a| &**a)).flatten()
}

/// MPI_COMM_SELF while MPI is initialised.
pub(crate) fn self_comm() -> Option<Arc<CommObj>> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| SELF.get().cloned()).flatten()
}

/// The runtime's own state, apart from the world model's [`STATE`]: started once, by
/// MPI_Init or by the first MPI_Session_init, and finalized once neither model uses it.
static RT_STATE: AtomicU8 = AtomicU8::new(NOT_INIT);

/// Polls a wait of the C interface makes before it yields: the engine's `spin_polls` once
/// the runtime started (4,000 with a core per rank, 16 when ranks outnumber cores,
/// `RT_SPIN_POLLS`).
static SPIN_POLLS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(200);

/// [`SPIN_POLLS`]'s value.
pub(crate) fn spin_polls() -> u32 {
    SPIN_POLLS.load(Ordering::Relaxed)
}
/// Serialises starting and finalizing the runtime (MPI_Init and MPI_Session_init may race).
static RT_LOCK: Mutex<()> = Mutex::new(());

/// The world communicator while the runtime runs, whether or not MPI_Init made it
/// MPI_COMM_WORLD (the sessions model builds on it: process set `mpi://WORLD`).
pub(crate) fn runtime_world() -> Option<Arc<CommObj>> {
    (RT_STATE.load(Ordering::Acquire) == RUNNING).then(|| WORLD.get().cloned()).flatten()
}

/// This process alone while the runtime runs (process set `mpi://SELF`).
pub(crate) fn runtime_self() -> Option<Arc<CommObj>> {
    (RT_STATE.load(Ordering::Acquire) == RUNNING).then(|| SELF.get().cloned()).flatten()
}

/// Whether the world model is initialised and not finalized (MPI_Init .. MPI_Finalize).
pub(crate) fn world_model_running() -> bool {
    STATE.load(Ordering::Acquire) == RUNNING
}

/// Whether MPI_Init ran (finalized or not: `MPI_Initialized`).
pub(crate) fn world_model_started() -> bool {
    STATE.load(Ordering::Acquire) != NOT_INIT
}

/// Whether MPI_Finalize ran (`MPI_Finalized`).
pub(crate) fn world_model_finalized() -> bool {
    STATE.load(Ordering::Acquire) == FINALIZED
}

/// MPI_Init has started the world model: MPI_COMM_WORLD and MPI_COMM_SELF are exposed.
pub(crate) fn set_world_model_running() {
    STATE.store(RUNNING, Ordering::Release);
}

/// MPI_Finalize has ended the world model.
pub(crate) fn set_world_model_finalized() {
    STATE.store(FINALIZED, Ordering::Release);
}

/// `MPI_Wtime`'s origin (the runtime's start, or now where it has not started).
pub(crate) fn epoch() -> Instant {
    *EPOCH.get_or_init(Instant::now)
}

/// The runtime failed to start (the launcher unreachable, R5): there is no world.
static INIT_FAILED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
/// The error handler the program set on MPI_COMM_WORLD or MPI_COMM_SELF after the runtime
/// failed to start (`MPI_ERRHANDLER_NULL`: none, the initial one applies).
static FAILED_INIT_EH: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(MPI_ERRHANDLER_NULL);

/// Whether `MPI_Init` (or the first `MPI_Session_init`) failed: `MPI_COMM_WORLD` and
/// `MPI_COMM_SELF` then name a world whose processes cannot be reached, every call on
/// them reports `MPIX_ERR_PROC_FAILED` through the handler set on them.
pub(crate) fn init_failed() -> bool {
    INIT_FAILED.load(Ordering::Acquire) && RT_STATE.load(Ordering::Acquire) != RUNNING
}

/// The handler of `MPI_COMM_WORLD`/`MPI_COMM_SELF` after a failed init.
pub(crate) fn failed_init_handler() -> Handle {
    match FAILED_INIT_EH.load(Ordering::Acquire) {
        MPI_ERRHANDLER_NULL => crate::err::initial_errhandler(),
        h => h,
    }
}

/// Sets the handler of `MPI_COMM_WORLD`/`MPI_COMM_SELF` after a failed init.
pub(crate) fn set_failed_init_handler(eh: Handle) {
    FAILED_INIT_EH.store(eh, Ordering::Release);
}

/// Starts the runtime unless it runs already: the transport, the world and self
/// communicators (exposed as MPI_COMM_WORLD and MPI_COMM_SELF only once MPI_Init ran;
/// they start with the initial error handler), then `warm_up` with the world's size (the
/// families above this that fill their tables at the start: `env::start_runtime`'s), all
/// before the runtime counts as running. `who` names the calling MPI function in a
/// failure's message. Returns an error class, not raised.
pub(crate) fn start_runtime(who: &str, warm_up: impl FnOnce(usize)) -> c_int {
    let _g = RT_LOCK.lock();
    match RT_STATE.load(Ordering::Acquire) {
        RUNNING => return MPI_SUCCESS,
        FINALIZED => {
            eprintln!("runthrough libmpi_abi: {who}: the runtime was finalized and cannot start again");
            return MPI_ERR_OTHER;
        }
        _ => {}
    }
    EPOCH.get_or_init(Instant::now);
    let rt = match runthrough::init() {
        Ok(rt) => rt,
        Err(e) => {
            // Seeds/000 17.5.2: an error, not an abort; MPI_COMM_WORLD and MPI_COMM_SELF
            // stay handles the program may set an error handler on, and every later call
            // on them reports MPI_ERR_PROC_FAILED (failed_init_handler).
            eprintln!("runthrough libmpi_abi: {who} failed: {e}");
            INIT_FAILED.store(true, Ordering::Release);
            return crate::err::code_of(&e);
        }
    };
    let eh = crate::err::initial_errhandler();
    let world = rt.world();
    // The waits of the C interface spin as the engine's own do (few polls when ranks
    // outnumber cores, so a rank that waits soon hands its core to the one it waits for).
    SPIN_POLLS.store(world.engine().lock().config().spin_polls, Ordering::Relaxed);
    let w = CommObj::new(world.clone(), eh, "MPI_COMM_WORLD");
    // MPI_COMM_SELF: this process alone, made locally (run-through chapter §17.5.2, R31:
    // ranks that failed during start-up are failed in the world, and init succeeds all the
    // same).
    let s = CommObj::new(rt.comm_self(), eh, "MPI_COMM_SELF");
    let size = w.size();
    if WORLD.set(w).is_err() || SELF.set(s).is_err() {
        return MPI_ERR_OTHER;
    }
    *RUNTIME.lock() = Some(rt);
    warm_up(size);
    RT_STATE.store(RUNNING, Ordering::Release);
    MPI_SUCCESS
}

/// Finalizes the runtime (once): tells the launcher, flushes, departs (R6: completes
/// normally even with failed peers). For the last of the two models to finish with it.
pub(crate) fn finalize_runtime(who: &str) -> c_int {
    let _g = RT_LOCK.lock();
    if RT_STATE.load(Ordering::Acquire) != RUNNING {
        return MPI_SUCCESS;
    }
    RT_STATE.store(FINALIZED, Ordering::Release);
    let rt = RUNTIME.lock().take();
    if let Some(Err(e)) = rt.map(|rt| rt.finalize()) {
        eprintln!("runthrough libmpi_abi: {who}: {e}");
    }
    MPI_SUCCESS
}

/// Runs `f` with the runtime while it runs (spawning, the parent): `None` otherwise.
/// Holds the runtime's lock for the call.
pub(crate) fn with_runtime<R>(f: impl FnOnce(&runthrough::Runtime) -> R) -> Option<R> {
    if RT_STATE.load(Ordering::Acquire) != RUNNING {
        return None;
    }
    RUNTIME.lock().as_ref().map(f)
}

/// The communicator of handle `h`, or the error class for a bad handle.
pub(crate) fn lookup(h: Handle) -> Result<Arc<CommObj>, c_int> {
    match h {
        // MPI_Init failed (run-through chapter §17.5.2): the world's processes cannot be reached.
        MPI_COMM_WORLD | MPI_COMM_SELF if init_failed() => Err(MPIX_ERR_PROC_FAILED),
        MPI_COMM_WORLD => world().ok_or(MPI_ERR_COMM),
        MPI_COMM_SELF => self_comm().ok_or(MPI_ERR_COMM),
        _ => COMMS.get(h).ok_or(MPI_ERR_COMM),
    }
}

/// MPI_COMM_WORLD or MPI_COMM_SELF without touching a reference count (the hot paths).
#[inline(always)]
pub(crate) fn lookup_static(h: Handle) -> Option<&'static CommObj> {
    match h {
        MPI_COMM_WORLD => world_static(),
        MPI_COMM_SELF => self_static(),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------
// The sessions model's hold: the live sessions (the calls are `session.rs`'s)

/// A session.
#[derive(Debug)]
pub(crate) struct SessionObj {
    pub(crate) errhandler: Mutex<Handle>,
    /// The thread support level it provides (its `thread_level`).
    pub(crate) thread_level: c_int,
}

pub(crate) static SESSIONS: Table<SessionObj> = Table::new(Kind::Session);

/// The number of live sessions.
pub(crate) fn live() -> usize {
    SESSIONS.all().len()
}

/// Whether a live session has error handler `h`.
pub(crate) fn uses_errhandler(h: Handle) -> bool {
    SESSIONS.all().iter().any(|(_, s)| *s.errhandler.lock() == h)
}

/// Flushes every C output stream of the process (stdout is fully buffered into a pipe)
/// before an abort, whose launcher kills the group's processes, this one included: what
/// the program printed before `MPI_Abort` or a fatal error reaches the job's output.
pub(crate) fn flush_c_output() {
    // SAFETY: fflush(NULL) flushes every open output stream; no pointer is dereferenced.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}
