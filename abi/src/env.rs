//! Start-up and shut-down, thread levels, time, versions, processor name, abort.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use parking_lot::Mutex;

use crate::comm::CommObj;
use crate::consts::*;
use crate::err::{put_string, raise_on};
use crate::types::{FnPtr, Handle};

const NOT_INIT: u8 = 0;
const RUNNING: u8 = 1;
const FINALIZED: u8 = 2;

static STATE: AtomicU8 = AtomicU8::new(NOT_INIT);
static RUNTIME: Mutex<Option<runthrough::Runtime>> = Mutex::new(None);
static WORLD: OnceLock<Arc<CommObj>> = OnceLock::new();
static SELF: OnceLock<Arc<CommObj>> = OnceLock::new();
static EPOCH: OnceLock<Instant> = OnceLock::new();
static MAIN_THREAD: OnceLock<std::thread::ThreadId> = OnceLock::new();
static THREAD_LEVEL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// MPI_COMM_WORLD while MPI is initialised.
pub(crate) fn world() -> Option<Arc<CommObj>> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| WORLD.get().cloned()).flatten()
}

/// MPI_COMM_WORLD while MPI is initialised, borrowed for the process's life.
#[inline(always)]
pub(crate) fn world_static() -> Option<&'static CommObj> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| WORLD.get().map(|a| &**a)).flatten()
}

/// MPI_COMM_SELF while MPI is initialised, borrowed for the process's life.
#[inline(always)]
pub(crate) fn self_static() -> Option<&'static CommObj> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| SELF.get().map(|a| &**a)).flatten()
}

/// MPI_COMM_SELF while MPI is initialised.
pub(crate) fn self_comm() -> Option<Arc<CommObj>> {
    (STATE.load(Ordering::Acquire) == RUNNING).then(|| SELF.get().cloned()).flatten()
}

/// The runtime's own state, apart from the world model's [`STATE`]: started once, by
/// MPI_Init or by the first MPI_Session_init, and finalized once neither model uses it.
static RT_STATE: AtomicU8 = AtomicU8::new(NOT_INIT);
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

/// Starts the runtime unless it runs already: the transport, the world and self
/// communicators (exposed as MPI_COMM_WORLD and MPI_COMM_SELF only once MPI_Init ran;
/// they start with the initial error handler) and the predefined datatypes. `who` names
/// the calling MPI function in a failure's message. Returns an error class, not raised.
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
        MPI_ERRHANDLER_NULL => crate::info::initial_errhandler(),
        h => h,
    }
}

/// Sets the handler of `MPI_COMM_WORLD`/`MPI_COMM_SELF` after a failed init.
pub(crate) fn set_failed_init_handler(eh: Handle) {
    FAILED_INIT_EH.store(eh, Ordering::Release);
}

pub(crate) fn start_runtime(who: &str) -> c_int {
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
    let eh = crate::info::initial_errhandler();
    let world = rt.world();
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
    crate::dtype::init_predefined();
    crate::info::env_started(size);
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

fn start(required: c_int) -> c_int {
    if STATE.load(Ordering::Acquire) != NOT_INIT {
        eprintln!("runthrough libmpi_abi: MPI_Init called twice (or after MPI_Finalize)");
        return MPI_ERR_OTHER;
    }
    let rc = start_runtime("MPI_Init");
    if rc != MPI_SUCCESS {
        return rc;
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    THREAD_LEVEL.store(required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE), Ordering::Relaxed);
    STATE.store(RUNNING, Ordering::Release);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    start(MPI_THREAD_SINGLE)
}

pub(crate) unsafe fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    let rc = start(required);
    if !provided.is_null() {
        // Every level up to MPI_THREAD_MULTIPLE is provided.
        let p = if required > MPI_THREAD_MULTIPLE { MPI_THREAD_MULTIPLE } else { required.max(MPI_THREAD_SINGLE) };
        // SAFETY: output argument.
        unsafe { *provided = p };
    }
    rc
}

pub(crate) unsafe fn MPI_Finalize() -> c_int {
    if STATE.load(Ordering::Acquire) != RUNNING {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER);
    }
    // Attributes on MPI_COMM_SELF are deleted first (MPI 5, 11.2.4).
    if let Some(s) = self_comm() {
        crate::comm::delete_attrs(&s, MPI_COMM_SELF);
    }
    // Then MPI_COMM_WORLD's (as MPICH: their delete callbacks run while MPI still works).
    if let Some(w) = world() {
        crate::comm::delete_attrs(&w, MPI_COMM_WORLD);
    }
    // The nonblocking collectives still running end first (the other members count on
    // this one's part).
    for (_, c) in crate::comm::COMMS.all() {
        c.comm.settle_owned();
    }
    STATE.store(FINALIZED, Ordering::Release);
    if crate::session::live() > 0 {
        // The sessions model still uses the runtime: the last MPI_Session_finalize ends it.
        return MPI_SUCCESS;
    }
    // R6: finalize completes normally even with failed peers.
    finalize_runtime("MPI_Finalize")
}

pub(crate) unsafe fn MPI_Initialized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *flag = (STATE.load(Ordering::Acquire) != NOT_INIT) as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Finalized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *flag = (STATE.load(Ordering::Acquire) == FINALIZED) as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *provided = THREAD_LEVEL.load(Ordering::Relaxed) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    let main = MAIN_THREAD.get().map_or(true, |t| *t == std::thread::current().id());
    // SAFETY: output argument.
    unsafe { *flag = main as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Wtime() -> f64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}

pub(crate) unsafe fn MPI_Wtick() -> f64 {
    1e-9
}

pub(crate) unsafe fn MPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
    // SAFETY: output arguments.
    unsafe {
        *version = MPI_VERSION;
        *subversion = MPI_SUBVERSION;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Abi_get_version(abi_major: *mut c_int, abi_minor: *mut c_int) -> c_int {
    // SAFETY: output arguments.
    unsafe {
        *abi_major = MPI_ABI_VERSION;
        *abi_minor = MPI_ABI_SUBVERSION;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Abi_get_info(info: *mut Handle) -> c_int {
    // SAFETY: output argument.
    let rc = unsafe { crate::info::MPI_Info_create(info) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    // SAFETY: the info just created.
    let h = unsafe { *info };
    for (k, v) in [
        ("mpi_aint_size", "8"),
        ("mpi_count_size", "8"),
        ("mpi_offset_size", "8"),
        ("mpi_implementation", "runthrough"),
    ] {
        let k = std::ffi::CString::new(k).unwrap_or_default();
        let v = std::ffi::CString::new(v).unwrap_or_default();
        // SAFETY: valid C strings.
        unsafe { crate::info::MPI_Info_set(h, k.as_ptr(), v.as_ptr()) };
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_hw_resource_info(hw_info: *mut Handle) -> c_int {
    // SAFETY: output argument.
    unsafe { crate::info::MPI_Info_create(hw_info) }
}

pub(crate) unsafe fn MPI_Abi_get_fortran_info(info: *mut Handle) -> c_int {
    // No Fortran bindings: MPI_INFO_NULL (MPI 5, 20.3.3).
    // SAFETY: output argument.
    unsafe { *info = MPI_INFO_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
    let s = format!(
        "runthrough {} (MPI {}.{} standard ABI {}.{}, fault tolerant: ULFM MPIX_ calls and run-through stabilization)",
        env!("CARGO_PKG_VERSION"),
        MPI_VERSION,
        MPI_SUBVERSION,
        MPI_ABI_VERSION,
        MPI_ABI_SUBVERSION
    );
    // SAFETY: MPI_MAX_LIBRARY_VERSION_STRING bytes (MPI contract).
    unsafe { put_string(&s, version, MPI_MAX_LIBRARY_VERSION_STRING as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let n = if rc == 0 { buf.iter().position(|&b| b == 0).unwrap_or(buf.len()) } else { 0 };
    let s = String::from_utf8_lossy(&buf[..n]).into_owned();
    // SAFETY: MPI_MAX_PROCESSOR_NAME bytes (MPI contract).
    unsafe { put_string(&s, name, MPI_MAX_PROCESSOR_NAME as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Abort(comm: Handle, errorcode: c_int) -> c_int {
    let code = if errorcode == 0 { 1 } else { errorcode };
    // Sessions only (no MPI_COMM_WORLD): the runtime's world, so the job still aborts.
    match crate::comm::lookup(comm).ok().or_else(world).or_else(runtime_world) {
        Some(c) => c.comm.abort(code),
        None => std::process::exit(code & 0xff),
    }
}

pub(crate) unsafe fn MPI_Pcontrol(level: c_int) -> c_int {
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Aint_add(base: isize, disp: isize) -> isize {
    base.wrapping_add(disp)
}

pub(crate) unsafe fn MPI_Aint_diff(addr1: isize, addr2: isize) -> isize {
    addr1.wrapping_sub(addr2)
}

pub(crate) unsafe fn MPI_Get_address(location: *const std::ffi::c_void, address: *mut isize) -> c_int {
    // SAFETY: output argument.
    unsafe { *address = location as isize };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Alloc_mem(size: isize, info: Handle, baseptr: *mut std::ffi::c_void) -> c_int {
    if size < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: malloc; the result is stored through the program's pointer-to-pointer.
    unsafe {
        let p = libc::malloc(size.max(1) as usize);
        if p.is_null() {
            return raise_on(MPI_COMM_WORLD, MPI_ERR_NO_MEM);
        }
        *baseptr.cast::<*mut std::ffi::c_void>() = p;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Free_mem(base: *mut std::ffi::c_void) -> c_int {
    // SAFETY: memory from MPI_Alloc_mem (malloc) or null (MPI contract).
    unsafe { libc::free(base) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Comm_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Errhandler_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Errhandler_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_File_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_File_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Group_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Group_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Info_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Info_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Message_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Message_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Op_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Op_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Request_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Request_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Session_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Session_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Type_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Type_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

pub(crate) unsafe fn MPI_Win_toint(h: Handle) -> c_int {
    h as c_int
}

pub(crate) unsafe fn MPI_Win_fromint(i: c_int) -> Handle {
    i as u32 as Handle
}

/// Unused callback type kept for the generated signatures.
#[allow(dead_code)]
type Unused = FnPtr;
