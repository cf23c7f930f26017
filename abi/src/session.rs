//! The sessions model (MPI-4.1 11.3): sessions with or without MPI_Init, the two
//! predefined process sets `mpi://WORLD` and `mpi://SELF`, communicators made from their
//! groups, and errors raised on a session through its own error handler.
//!
//! The runtime starts with the first of MPI_Init and MPI_Session_init (`env.rs`,
//! `start_runtime`; the runtime handle and the table of live sessions are `rt.rs`'s) and
//! is shared by both models. It is finalized by the last of them to finish with it:
//! MPI_Finalize when no session is live, or else once the last session was finalized,
//! when the process then exits normally (exit status 0). A process may start new
//! sessions after finalizing all earlier ones (MPI-4.1 11.3.1), and one initialisation
//! per rank is all the launchers admit, so the runtime stays up until then.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::commobj::CommObj;
use crate::consts::*;
use crate::err::put_string;
use crate::raise::{raise_on, raise_with};
use crate::rt::{live, SessionObj, SESSIONS};
use crate::types::{FnPtr, Handle};

/// The process sets, in the order MPI_Session_get_nth_pset numbers them.
const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// The memory allocation kinds every session supports (MPI-4.1 11.4.3): memory from
/// the system allocator and from MPI_Alloc_mem.
const MEMORY_KINDS: &str = "mpi,system";

/// The thread levels under their info names.
const LEVELS: [(c_int, &str); 4] = [
    (MPI_THREAD_SINGLE, "MPI_THREAD_SINGLE"),
    (MPI_THREAD_FUNNELED, "MPI_THREAD_FUNNELED"),
    (MPI_THREAD_SERIALIZED, "MPI_THREAD_SERIALIZED"),
    (MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE"),
];

/// Raises `code` where no valid session is at hand: MPI_COMM_SELF's handler in the world
/// model, else the initial error handler (MPI-4.1 9.3).
fn no_session(code: c_int) -> c_int {
    raise_on(MPI_COMM_SELF, code)
}

/// Raises `code` on session `h` through its error handler; `MPI_ERRORS_ABORT` aborts this
/// process alone (MPI-4.1 9.3).
fn raise(h: Handle, s: &SessionObj, code: c_int) -> c_int {
    let eh = *s.errhandler.lock();
    raise_with(eh, h, code, crate::rt::runtime_self())
}

/// `let s = session!(h);`: the session, or return MPI_ERR_SESSION.
macro_rules! session {
    ($h:expr) => {
        match SESSIONS.get($h) {
            Some(s) => s,
            None => return no_session(MPI_ERR_SESSION),
        }
    };
}

/// The handler a call given `eh` uses: the initial one for MPI_ERRHANDLER_NULL.
fn handler_or_initial(eh: Handle) -> Handle {
    if eh == MPI_ERRHANDLER_NULL {
        crate::err::initial_errhandler()
    } else {
        eh
    }
}

/// A C string argument, or `None` for a null pointer.
unsafe fn c_string(p: *const c_char) -> Option<String> {
    // SAFETY: NUL-terminated or null (MPI contract).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

pub(crate) unsafe fn MPI_Session_init(info: Handle, errhandler: Handle, session: *mut Handle) -> c_int {
    let eh = handler_or_initial(errhandler);
    if !crate::err::valid_errhandler(eh) {
        return raise_with(crate::err::initial_errhandler(), MPI_SESSION_NULL, MPI_ERR_ERRHANDLER, None);
    }
    // Errors of the call itself go to the handler it was given (MPI-4.1 11.3.1).
    let fail = |code| raise_with(eh, MPI_SESSION_NULL, code, crate::rt::runtime_self());
    if session.is_null() {
        return fail(MPI_ERR_ARG);
    }
    if info != MPI_INFO_NULL && !crate::info::exists(info) {
        return fail(MPI_ERR_INFO);
    }
    let rc = crate::env::start_runtime("MPI_Session_init");
    if rc != MPI_SUCCESS {
        return fail(rc);
    }
    // Every level is provided; without a request, MPI_THREAD_MULTIPLE (MPI-4.1 11.3.1
    // advises against MPI_THREAD_SINGLE as the sessions' default).
    let asked = crate::info::value(info, "thread_level");
    let thread_level = asked
        .and_then(|v| LEVELS.iter().find(|(_, n)| n.eq_ignore_ascii_case(v.trim())).map(|&(l, _)| l))
        .unwrap_or(MPI_THREAD_MULTIPLE);
    let s = SessionObj { errhandler: Mutex::new(eh), thread_level };
    // SAFETY: output argument.
    unsafe { *session = SESSIONS.insert(Arc::new(s)) };
    finalize_at_exit();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_finalize(session: *mut Handle) -> c_int {
    if session.is_null() {
        return no_session(MPI_ERR_ARG);
    }
    // SAFETY: in/out argument.
    if SESSIONS.remove(unsafe { *session }).is_none() {
        return no_session(MPI_ERR_SESSION);
    }
    // SAFETY: in/out argument.
    unsafe { *session = MPI_SESSION_NULL };
    if live() == 0 && !crate::rt::world_model_running() {
        // Nothing uses the runtime any more: complete the nonblocking collectives still
        // running (as MPI_Finalize does); the runtime ends when the process exits.
        for (_, c) in crate::commobj::COMMS.all() {
            c.comm.settle_owned();
        }
    }
    MPI_SUCCESS
}

/// Arranges (once) for the runtime to be finalized when the process exits normally with
/// no session live and the world model not running: the launcher then counts this rank
/// as finalized although it never called MPI_Finalize. An abnormal exit (non-zero status:
/// an abort, an excluded rank) finalizes nothing, so the rank stays failed.
fn finalize_at_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a function of this library, which stays loaded to the end.
        #[cfg(target_env = "gnu")]
        let rc = unsafe { on_exit(exit_hook, std::ptr::null_mut()) };
        // SAFETY: as above.
        #[cfg(not(target_env = "gnu"))]
        let rc = unsafe { libc::atexit(exit_hook_plain) };
        if rc != 0 {
            eprintln!(
                "runthrough libmpi_abi: could not register finalize at exit; sessions-only ranks will not finalize"
            );
        }
    });
}

#[cfg(target_env = "gnu")]
extern "C" {
    /// glibc's `on_exit`: like `atexit`, with the exit status.
    fn on_exit(f: extern "C" fn(c_int, *mut c_void), arg: *mut c_void) -> c_int;
}

#[cfg(target_env = "gnu")]
extern "C" fn exit_hook(status: c_int, _arg: *mut c_void) {
    if status == 0 {
        finalize_idle();
    }
}

#[cfg(not(target_env = "gnu"))]
extern "C" fn exit_hook_plain() {
    finalize_idle();
}

/// Finalizes the runtime if neither model uses it (never unwinds: called from C).
fn finalize_idle() {
    let _ = std::panic::catch_unwind(|| {
        if live() == 0 && !crate::rt::world_model_running() && crate::rt::runtime_world().is_some() {
            crate::rt::finalize_runtime("MPI_Session_finalize");
        }
    });
}

pub(crate) unsafe fn MPI_Session_get_num_psets(session: Handle, info: Handle, npset_names: *mut c_int) -> c_int {
    let s = session!(session);
    if npset_names.is_null() {
        return raise(session, &s, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { *npset_names = PSETS.len() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_get_nth_pset(
    session: Handle,
    info: Handle,
    n: c_int,
    pset_len: *mut c_int,
    pset_name: *mut c_char,
) -> c_int {
    let s = session!(session);
    let Some(name) = usize::try_from(n).ok().and_then(|i| PSETS.get(i)) else {
        return raise(session, &s, MPI_ERR_ARG);
    };
    if pset_len.is_null() {
        return raise(session, &s, MPI_ERR_ARG);
    }
    // SAFETY: in/out length; a buffer of that many bytes when it is positive.
    unsafe {
        if *pset_len > 0 {
            put_string(name, pset_name, *pset_len as usize, std::ptr::null_mut());
        }
        *pset_len = name.len() as c_int + 1;
    }
    MPI_SUCCESS
}

/// The members of process set `name` (world ranks), while the runtime runs.
fn pset_ranks(name: &str) -> Option<Vec<u32>> {
    let w = crate::rt::runtime_world()?;
    match name {
        "mpi://WORLD" => Some(w.world.clone()),
        "mpi://SELF" => Some(vec![w.world[w.rank]]),
        _ => None,
    }
}

pub(crate) unsafe fn MPI_Group_from_session_pset(
    session: Handle,
    pset_name: *const c_char,
    newgroup: *mut Handle,
) -> c_int {
    let s = session!(session);
    // SAFETY: C string.
    let ranks = unsafe { c_string(pset_name) }.and_then(|n| pset_ranks(&n));
    match ranks {
        Some(r) if !newgroup.is_null() => {
            // SAFETY: output argument.
            unsafe { *newgroup = crate::group::new_group(r) };
            MPI_SUCCESS
        }
        _ => raise(session, &s, MPI_ERR_ARG),
    }
}

pub(crate) unsafe fn MPI_Session_get_pset_info(session: Handle, pset_name: *const c_char, info: *mut Handle) -> c_int {
    let s = session!(session);
    // SAFETY: C string.
    let ranks = unsafe { c_string(pset_name) }.and_then(|n| pset_ranks(&n));
    match ranks {
        Some(r) if !info.is_null() => {
            // SAFETY: output argument.
            unsafe { *info = crate::info::new_info(vec![("mpi_size".into(), r.len().to_string())]) };
            MPI_SUCCESS
        }
        _ => raise(session, &s, MPI_ERR_ARG),
    }
}

pub(crate) unsafe fn MPI_Session_get_info(session: Handle, info_used: *mut Handle) -> c_int {
    let s = session!(session);
    if info_used.is_null() {
        return raise(session, &s, MPI_ERR_ARG);
    }
    let level = LEVELS.iter().find(|(l, _)| *l == s.thread_level).map_or("MPI_THREAD_MULTIPLE", |&(_, n)| n);
    let kv = vec![
        ("thread_level".to_string(), level.to_string()),
        ("mpi_memory_alloc_kinds".to_string(), MEMORY_KINDS.to_string()),
    ];
    // SAFETY: output argument.
    unsafe { *info_used = crate::info::new_info(kv) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_create_errhandler(session_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    // SAFETY: forwarded (the same handler type, called with the object's handle).
    unsafe { crate::raise::MPI_Comm_create_errhandler(session_errhandler_fn, errhandler) }
}

pub(crate) unsafe fn MPI_Session_set_errhandler(session: Handle, errhandler: Handle) -> c_int {
    let s = session!(session);
    if !crate::err::valid_errhandler(errhandler) {
        return raise(session, &s, MPI_ERR_ARG);
    }
    *s.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_get_errhandler(session: Handle, errhandler: *mut Handle) -> c_int {
    let s = session!(session);
    if errhandler.is_null() {
        return raise(session, &s, MPI_ERR_ARG);
    }
    let eh = *s.errhandler.lock();
    crate::err::errhandler_ref(eh);
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Session_call_errhandler(session: Handle, errorcode: c_int) -> c_int {
    let s = session!(session);
    let rc = raise(session, &s, errorcode);
    // A fatal handler aborts in the guard, which acts on a failed call only.
    if crate::raise::fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_create_from_group(
    group: Handle,
    stringtag: *const c_char,
    info: Handle,
    errhandler: Handle,
    newcomm: *mut Handle,
) -> c_int {
    let eh = handler_or_initial(errhandler);
    if !crate::err::valid_errhandler(eh) {
        return raise_with(crate::err::initial_errhandler(), MPI_COMM_NULL, MPI_ERR_ERRHANDLER, None);
    }
    // Errors of the call go to the handler the new communicator would have had.
    let fail = |code, scope: Option<Arc<CommObj>>| raise_with(eh, MPI_COMM_NULL, code, scope);
    // SAFETY: C string.
    let tag = unsafe { c_string(stringtag) };
    if newcomm.is_null() || tag.as_ref().is_none_or(|t| t.len() >= MPI_MAX_STRINGTAG_LEN as usize) {
        return fail(MPI_ERR_ARG, None);
    }
    let Some(g) = crate::group::lookup(group) else { return fail(MPI_ERR_GROUP, None) };
    let (Some(w), Some(me)) = (crate::rt::runtime_world(), crate::rt::runtime_self()) else {
        // Neither MPI_Init nor a session started MPI.
        return fail(MPI_ERR_OTHER, None);
    };
    let mine = w.world[w.rank];
    if !g.ranks.contains(&mine) {
        return fail(MPI_ERR_GROUP, None);
    }
    let made = if g.ranks.len() == 1 {
        // This process alone (mpi://SELF): made locally.
        (me.comm.dup(), me)
    } else {
        // All of the world, in any order: collective over it. The string tag tells
        // concurrent creations apart only by their order (as in every rank's program).
        let mut asked = g.ranks.clone();
        asked.sort_unstable();
        let mut all = w.world.clone();
        all.sort_unstable();
        let c =
            if asked != all {
                // A proper subgroup: collective over its members only, told apart from other
                // creations by the string tag.
                let tag = tag.as_ref().map_or(0, |t| {
                    t.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
                });
                let locals: Vec<usize> = g.ranks.iter().filter_map(|x| w.world.iter().position(|y| y == x)).collect();
                w.comm.group().incl(&locals).and_then(|rg| w.comm.create_group(&rg, tag as i32)).and_then(|c| {
                    c.ok_or(runthrough::Error::InvalidArg("create_group: this process is not in the group"))
                })
            } else if g.ranks == w.world {
                w.comm.dup()
            } else {
                let locals: Vec<usize> = g.ranks.iter().filter_map(|x| w.world.iter().position(|y| y == x)).collect();
                w.comm
                    .group()
                    .incl(&locals)
                    .and_then(|rg| w.comm.create(&rg))
                    .and_then(|c| c.ok_or(runthrough::Error::InvalidArg("create: this process is not in the group")))
            };
        (c, w)
    };
    match made {
        (Ok(c), _) => {
            // SAFETY: output argument.
            unsafe { *newcomm = crate::commobj::COMMS.insert(CommObj::new(c, eh, "")) };
            MPI_SUCCESS
        }
        (Err(e), scope) => {
            crate::err::set_detail(e.to_string());
            fail(crate::err::code_of(&e), Some(scope))
        }
    }
}

/// MPI_Intercomm_create_from_groups (MPI-4.1 7.6.2): the local group's communicator as
/// [`MPI_Comm_create_from_group`] makes it, then the facade's `intercomm_create` over the
/// world as peer (every process of the job is in it), the string tag hashed into the
/// leaders' tag.
pub(crate) unsafe fn MPI_Intercomm_create_from_groups(
    local_group: Handle,
    local_leader: c_int,
    remote_group: Handle,
    remote_leader: c_int,
    stringtag: *const c_char,
    info: Handle,
    errhandler: Handle,
    newintercomm: *mut Handle,
) -> c_int {
    let eh = handler_or_initial(errhandler);
    let fail = |code| raise_with(eh, MPI_COMM_NULL, code, None);
    if newintercomm.is_null() {
        return fail(MPI_ERR_ARG);
    }
    let (Some(lg), Some(rg)) = (crate::group::lookup(local_group), crate::group::lookup(remote_group)) else {
        return fail(MPI_ERR_GROUP);
    };
    if local_leader < 0 || local_leader as usize >= lg.ranks.len() || remote_leader < 0 {
        return fail(MPI_ERR_RANK);
    }
    let Some(&remote_world) = rg.ranks.get(remote_leader as usize) else { return fail(MPI_ERR_RANK) };
    let Some(w) = crate::rt::runtime_world() else { return fail(MPI_ERR_OTHER) };
    let mut local_h = MPI_COMM_NULL;
    // SAFETY: forwarded arguments; `local_h` is ours.
    let rc = unsafe { MPI_Comm_create_from_group(local_group, stringtag, info, errhandler, &mut local_h) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    let Some(local) = crate::commobj::COMMS.get(local_h) else { return fail(MPI_ERR_INTERN) };
    crate::commobj::COMMS.remove(local_h);
    // SAFETY: C string (checked by the creation above).
    let tag = unsafe { c_string(stringtag) }
        .map_or(0, |t| t.bytes().fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193)))
        as i32
        & runthrough::TAG_UB;
    let Some(peer_rank) = w.world.iter().position(|&x| x == remote_world) else { return fail(MPI_ERR_RANK) };
    match local.comm.intercomm_create(local_leader as usize, Some(&w.comm), peer_rank, tag) {
        Ok(ic) => {
            // SAFETY: output argument.
            unsafe { *newintercomm = crate::commobj::COMMS.insert(CommObj::new_inter(ic, eh)) };
            MPI_SUCCESS
        }
        Err(e) => {
            crate::err::set_detail(e.to_string());
            fail(crate::err::code_of(&e))
        }
    }
}
