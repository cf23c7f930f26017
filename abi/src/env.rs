//! The world model's start-up and shut-down (MPI_Init, MPI_Finalize), thread levels,
//! time, versions, processor name, abort. The runtime itself, MPI_COMM_WORLD and
//! MPI_COMM_SELF are `rt.rs`'s.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;

use crate::consts::*;
use crate::err::put_string;
use crate::raise::raise_on;
use crate::rt::{runtime_world, self_comm, world};
use crate::types::{FnPtr, Handle};

static MAIN_THREAD: OnceLock<std::thread::ThreadId> = OnceLock::new();
static THREAD_LEVEL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// Starts the runtime unless it runs already (`rt::start_runtime`), with the predefined
/// datatypes and MPI_INFO_ENV's sizes filled in before it counts as running. For MPI_Init
/// and MPI_Session_init. Returns an error class, not raised.
pub(crate) fn start_runtime(who: &str) -> c_int {
    crate::rt::start_runtime(who, |size| {
        crate::dtype::init_predefined();
        crate::info::env_started(size);
    })
}

fn start(required: c_int) -> c_int {
    if crate::rt::world_model_started() {
        eprintln!("runthrough libmpi_abi: MPI_Init called twice (or after MPI_Finalize)");
        return MPI_ERR_OTHER;
    }
    let rc = start_runtime("MPI_Init");
    if rc != MPI_SUCCESS {
        return rc;
    }
    let _ = MAIN_THREAD.set(std::thread::current().id());
    THREAD_LEVEL.store(required.clamp(MPI_THREAD_SINGLE, MPI_THREAD_MULTIPLE), Ordering::Relaxed);
    crate::rt::set_world_model_running();
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
    if !crate::rt::world_model_running() {
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
    for (_, c) in crate::commobj::COMMS.all() {
        c.comm.settle_owned();
    }
    crate::rt::set_world_model_finalized();
    if crate::rt::live() > 0 {
        // The sessions model still uses the runtime: the last MPI_Session_finalize ends it.
        return MPI_SUCCESS;
    }
    // R6: finalize completes normally even with failed peers.
    crate::rt::finalize_runtime("MPI_Finalize")
}

pub(crate) unsafe fn MPI_Initialized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *flag = crate::rt::world_model_started() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Finalized(flag: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *flag = crate::rt::world_model_finalized() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Query_thread(provided: *mut c_int) -> c_int {
    // SAFETY: output argument.
    unsafe { *provided = THREAD_LEVEL.load(Ordering::Relaxed) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Is_thread_main(flag: *mut c_int) -> c_int {
    let main = MAIN_THREAD.get().is_none_or(|t| *t == std::thread::current().id());
    // SAFETY: output argument.
    unsafe { *flag = main as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Wtime() -> f64 {
    crate::rt::epoch().elapsed().as_secs_f64()
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
    // The reason the program printed just before reaches the job's output.
    crate::rt::flush_c_output();
    // Sessions only (no MPI_COMM_WORLD): the runtime's world, so the job still aborts.
    match crate::rt::lookup(comm).ok().or_else(world).or_else(runtime_world) {
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
