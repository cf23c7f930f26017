//! Process creation (MPI-4.1 §11.8; run-through R40): `MPI_Comm_spawn`,
//! `MPI_Comm_spawn_multiple`, `MPI_Comm_get_parent` — a thin translation of the facade's
//! `Runtime::spawn_multiple` and `Runtime::parent` (the launcher starts the children;
//! all or none under failures). Info keys `host`, `wdir` and `path` are honoured, others
//! ignored. A failed spawn sets every entry of `array_of_errcodes` to `MPI_ERR_SPAWN`
//! (no child runs on: R40).

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use runthrough::SpawnApp;

use crate::commobj::{CommObj, COMMS, PARENT};
use crate::consts::*;
use crate::raise::{raise_error, raise_on};
use crate::types::Handle;

/// A C string, or `None` for a null pointer.
///
/// # Safety
/// `p` is null or NUL-terminated.
unsafe fn string(p: *const c_char) -> Option<String> {
    // SAFETY: caller's contract.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

/// The words of a NULL-terminated `argv` (none for `MPI_ARGV_NULL`).
///
/// # Safety
/// `argv` is null or a NULL-terminated array of NUL-terminated strings.
unsafe fn words(argv: *mut *mut c_char) -> Vec<String> {
    let mut v = Vec::new();
    if argv.is_null() {
        return v;
    }
    for i in 0.. {
        // SAFETY: within the NULL-terminated array (caller's contract).
        let p = unsafe { *argv.add(i) };
        // SAFETY: NUL-terminated (caller's contract).
        match unsafe { string(p) } {
            Some(s) => v.push(s),
            None => break,
        }
    }
    v
}

/// One program of a spawn as the root gives it.
///
/// # Safety
/// The pointers follow `MPI_Comm_spawn`'s contract.
unsafe fn app(
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: Handle,
) -> Result<SpawnApp, c_int> {
    // SAFETY: caller's contract.
    let program = unsafe { string(command) }.filter(|s| !s.is_empty()).ok_or(MPI_ERR_ARG)?;
    if maxprocs <= 0 {
        return Err(MPI_ERR_ARG);
    }
    if info != MPI_INFO_NULL && !crate::info::exists(info) {
        return Err(MPI_ERR_INFO);
    }
    let key = |k: &str| (info != MPI_INFO_NULL).then(|| crate::info::value(info, k)).flatten();
    Ok(SpawnApp {
        program,
        // SAFETY: caller's contract.
        args: unsafe { words(argv) },
        procs: maxprocs as u32,
        host: key("host"),
        wdir: key("wdir"),
        path: key("path"),
    })
}

/// Spawns `apps` (meaningful at the root only) from intra-communicator `comm`. Every
/// parent's `errcodes` get one code per child (the root's `maxprocs`, summed: `total` at
/// the root), as MPICH and Open MPI give them.
///
/// # Safety
/// `intercomm` is writable; `errcodes` is null or holds one entry per child.
unsafe fn spawn(
    comm: Handle,
    c: &Arc<CommObj>,
    root: c_int,
    apps: Result<Vec<SpawnApp>, c_int>,
    total: usize,
    intercomm: *mut Handle,
    errcodes: *mut c_int,
) -> c_int {
    let fill = |code: c_int, n: usize| {
        if !errcodes.is_null() {
            // SAFETY: one entry per child (MPI contract: the root's maxprocs summed).
            unsafe { std::slice::from_raw_parts_mut(errcodes, n) }.fill(code);
        }
    };
    // SAFETY: output argument.
    unsafe { *intercomm = MPI_COMM_NULL };
    // A bad argument at the root still takes part, as a spawn refused by the launcher,
    // so the others are not left waiting.
    let (apps, bad) = match apps {
        Ok(a) => (a, None),
        Err(code) => (Vec::new(), Some(code)),
    };
    let r = crate::rt::with_runtime(|rt| rt.spawn_multiple(&c.comm, root as usize, &apps));
    let Some(r) = r else { return raise_on(comm, MPI_ERR_OTHER) };
    match r {
        Ok(ic) => {
            fill(MPI_SUCCESS, ic.remote_size());
            // SAFETY: output argument.
            unsafe { *intercomm = COMMS.insert(CommObj::new_inter(ic, *c.errhandler.lock())) };
            MPI_SUCCESS
        }
        Err(e) => {
            fill(MPI_ERR_SPAWN, if e.codes.is_empty() { total } else { e.codes.len() });
            match bad {
                Some(code) if c.user_rank() == root as usize => raise_on(comm, code),
                _ => raise_error(comm, &e.error),
            }
        }
    }
}

/// The spawning communicator and whether this process is its root, after what every
/// member checks: an intra-communicator and a root inside it (else the raised code).
fn spawning(comm: Handle, root: c_int) -> Result<(Arc<CommObj>, bool), c_int> {
    let c = crate::rt::lookup(comm).map_err(|e| raise_on(MPI_COMM_WORLD, e))?;
    if c.inter.is_some() {
        return Err(raise_on(comm, MPI_ERR_COMM));
    }
    if root < 0 || root as usize >= c.size() {
        return Err(raise_on(comm, MPI_ERR_ROOT));
    }
    let at_root = c.user_rank() == root as usize;
    Ok((c, at_root))
}

pub(crate) unsafe fn MPI_Comm_spawn(
    command: *const c_char,
    argv: *mut *mut c_char,
    maxprocs: c_int,
    info: Handle,
    root: c_int,
    comm: Handle,
    intercomm: *mut Handle,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let (c, at_root) = match spawning(comm, root) {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    // SAFETY: the root's arguments follow the MPI contract; others' are not read.
    let apps = if at_root { unsafe { app(command, argv, maxprocs, info) }.map(|a| vec![a]) } else { Ok(Vec::new()) };
    let total = if at_root { maxprocs.max(0) as usize } else { 0 };
    // SAFETY: forwarded output arguments.
    unsafe { spawn(comm, &c, root, apps, total, intercomm, array_of_errcodes) }
}

pub(crate) unsafe fn MPI_Comm_spawn_multiple(
    count: c_int,
    array_of_commands: *mut *mut c_char,
    array_of_argv: *mut *mut *mut c_char,
    array_of_maxprocs: *const c_int,
    array_of_info: *const Handle,
    root: c_int,
    comm: Handle,
    intercomm: *mut Handle,
    array_of_errcodes: *mut c_int,
) -> c_int {
    let (c, at_root) = match spawning(comm, root) {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    let mut total = 0usize;
    let apps = if !at_root {
        Ok(Vec::new())
    } else if count <= 0 || array_of_commands.is_null() || array_of_maxprocs.is_null() {
        Err(MPI_ERR_ARG)
    } else {
        (0..count as usize)
            .map(|i| {
                // SAFETY: `count` entries each (MPI contract); MPI_ARGVS_NULL is null.
                unsafe {
                    let argv = if array_of_argv.is_null() { std::ptr::null_mut() } else { *array_of_argv.add(i) };
                    let info = if array_of_info.is_null() { MPI_INFO_NULL } else { *array_of_info.add(i) };
                    let n = *array_of_maxprocs.add(i);
                    total += n.max(0) as usize;
                    app(*array_of_commands.add(i), argv, n, info)
                }
            })
            .collect()
    };
    // SAFETY: forwarded output arguments.
    unsafe { spawn(comm, &c, root, apps, total, intercomm, array_of_errcodes) }
}

/// The inter-communicator to this process's parents, or `MPI_COMM_NULL` (not spawned,
/// or the program freed it); the same handle at every call.
pub(crate) unsafe fn MPI_Comm_get_parent(parent: *mut Handle) -> c_int {
    let mut p = PARENT.lock();
    let h = match *p {
        Some(h) => h,
        None => {
            let made = crate::rt::with_runtime(|rt| rt.parent()).flatten().map(|ic| {
                let eh = crate::rt::world().map_or(MPI_ERRORS_ARE_FATAL, |w| *w.errhandler.lock());
                let c = CommObj::new_inter(ic, eh);
                *c.name.lock() = "MPI_COMM_PARENT".into();
                COMMS.insert(c)
            });
            *p = Some(made);
            made
        }
    };
    // SAFETY: output argument.
    unsafe { *parent = h.unwrap_or(MPI_COMM_NULL) };
    MPI_SUCCESS
}
