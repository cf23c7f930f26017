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

/// Copies `name` into the program's `MPI_MAX_PORT_NAME` buffer.
///
/// # Safety
/// `out` holds `MPI_MAX_PORT_NAME` bytes (MPI contract).
unsafe fn put_port(name: &str, out: *mut c_char) {
    let n = name.len().min(MPI_MAX_PORT_NAME as usize - 1);
    // SAFETY: within the caller's buffer; NUL-terminated.
    unsafe {
        std::ptr::copy_nonoverlapping(name.as_ptr().cast::<c_char>(), out, n);
        *out.add(n) = 0;
    }
}

pub(crate) unsafe fn MPI_Open_port(info: Handle, port_name: *mut c_char) -> c_int {
    if port_name.is_null() || (info != MPI_INFO_NULL && !crate::info::exists(info)) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    match crate::rt::with_runtime(|rt| rt.open_port()) {
        Some(Ok(name)) => {
            // SAFETY: MPI_MAX_PORT_NAME bytes (MPI contract).
            unsafe { put_port(&name, port_name) };
            MPI_SUCCESS
        }
        Some(Err(e)) => raise_error(MPI_COMM_WORLD, &e),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}

pub(crate) unsafe fn MPI_Close_port(port_name: *const c_char) -> c_int {
    // SAFETY: NUL-terminated (MPI contract).
    let Some(name) = (unsafe { string(port_name) }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG) };
    match crate::rt::with_runtime(|rt| rt.close_port(&name)) {
        Some(Ok(())) => MPI_SUCCESS,
        Some(Err(_)) => raise_on(MPI_COMM_WORLD, MPI_ERR_PORT),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}

/// `MPI_Comm_accept` and `MPI_Comm_connect`: the facade's `Runtime::accept`/`connect`
/// (uniform under failures, R40); the port name matters at the root only.
///
/// # Safety
/// `port_name` is null or NUL-terminated at the root; `newcomm` is writable.
unsafe fn establish(accept: bool, port_name: *const c_char, root: c_int, comm: Handle, newcomm: *mut Handle) -> c_int {
    if newcomm.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { *newcomm = MPI_COMM_NULL };
    let (c, at_root) = match spawning(comm, root) {
        Ok(x) => x,
        Err(rc) => return rc,
    };
    // SAFETY: NUL-terminated at the root (MPI contract); others' is not read.
    let name = if at_root { unsafe { string(port_name) }.unwrap_or_default() } else { String::new() };
    let r = crate::rt::with_runtime(|rt| match accept {
        true => rt.accept(&name, &c.comm, root as usize),
        false => rt.connect(&name, &c.comm, root as usize),
    });
    match r {
        Some(Ok(ic)) => {
            // SAFETY: output argument.
            unsafe { *newcomm = COMMS.insert(CommObj::new_inter(ic, *c.errhandler.lock())) };
            MPI_SUCCESS
        }
        // Nobody accepting, or not a port: MPI_ERR_PORT.
        Some(Err(runthrough::Error::Spawn(_))) if !accept => raise_on(comm, MPI_ERR_PORT),
        Some(Err(e)) => raise_error(comm, &e),
        None => raise_on(comm, MPI_ERR_OTHER),
    }
}

pub(crate) unsafe fn MPI_Comm_accept(
    port_name: *const c_char,
    info: Handle,
    root: c_int,
    comm: Handle,
    newcomm: *mut Handle,
) -> c_int {
    let _ = info;
    // SAFETY: forwarded arguments.
    unsafe { establish(true, port_name, root, comm, newcomm) }
}

pub(crate) unsafe fn MPI_Comm_connect(
    port_name: *const c_char,
    info: Handle,
    root: c_int,
    comm: Handle,
    newcomm: *mut Handle,
) -> c_int {
    let _ = info;
    // SAFETY: forwarded arguments.
    unsafe { establish(false, port_name, root, comm, newcomm) }
}

/// `MPI_Comm_join`: both ends open a port and swap the names over the socket `fd`; the
/// end whose name sorts first accepts, the other connects (on `MPI_COMM_SELF`); each
/// closes its own port. After an error the socket's state is undefined (§17.10.1).
pub(crate) unsafe fn MPI_Comm_join(fd: c_int, intercomm: *mut Handle) -> c_int {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    if intercomm.is_null() || fd < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { *intercomm = MPI_COMM_NULL };
    let Some(Ok(mine)) = crate::rt::with_runtime(|rt| rt.open_port()) else {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER);
    };
    // SAFETY: the program's connected socket, borrowed: never closed here.
    let mut sock = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut theirs = [0u8; MPI_MAX_PORT_NAME as usize];
    let mut padded = [0u8; MPI_MAX_PORT_NAME as usize];
    padded[..mine.len()].copy_from_slice(mine.as_bytes());
    if sock.write_all(&padded).and_then(|()| sock.read_exact(&mut theirs)).is_err() {
        let _ = crate::rt::with_runtime(|rt| rt.close_port(&mine));
        return raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER);
    }
    let end = theirs.iter().position(|&b| b == 0).unwrap_or(theirs.len());
    let theirs = String::from_utf8_lossy(&theirs[..end]).into_owned();
    let r = crate::rt::with_runtime(|rt| {
        let solo = rt.comm_self();
        match mine < theirs {
            true => rt.accept(&mine, &solo, 0),
            false => rt.connect(&theirs, &solo, 0),
        }
    });
    let _ = crate::rt::with_runtime(|rt| rt.close_port(&mine));
    match r {
        Some(Ok(ic)) => {
            // SAFETY: output argument.
            unsafe { *intercomm = COMMS.insert(CommObj::new_inter(ic, MPI_ERRORS_RETURN)) };
            MPI_SUCCESS
        }
        Some(Err(e)) => raise_error(MPI_COMM_WORLD, &e),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}

/// The name service calls: `service` (and `port`) as strings, or `MPI_ERR_ARG`.
///
/// # Safety
/// Both are null or NUL-terminated.
unsafe fn service_args(service: *const c_char, port: *const c_char) -> Result<(String, Option<String>), c_int> {
    // SAFETY: caller's contract.
    let s = unsafe { string(service) }.filter(|s| !s.is_empty()).ok_or(MPI_ERR_ARG)?;
    // SAFETY: caller's contract.
    Ok((s, unsafe { string(port) }))
}

pub(crate) unsafe fn MPI_Publish_name(service_name: *const c_char, info: Handle, port_name: *const c_char) -> c_int {
    let _ = info;
    // SAFETY: NUL-terminated (MPI contract).
    let (service, Some(port)) = (match unsafe { service_args(service_name, port_name) } {
        Ok(x) => x,
        Err(rc) => return raise_on(MPI_COMM_WORLD, rc),
    }) else {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    };
    match crate::rt::with_runtime(|rt| rt.publish_name(&service, &port)) {
        Some(Ok(())) => MPI_SUCCESS,
        Some(Err(runthrough::Error::InvalidArg(_))) => raise_on(MPI_COMM_WORLD, MPI_ERR_SERVICE),
        Some(Err(e)) => raise_error(MPI_COMM_WORLD, &e),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}

pub(crate) unsafe fn MPI_Lookup_name(service_name: *const c_char, info: Handle, port_name: *mut c_char) -> c_int {
    let _ = info;
    // SAFETY: NUL-terminated (MPI contract).
    let service = match unsafe { service_args(service_name, std::ptr::null()) } {
        Ok((s, _)) if !port_name.is_null() => s,
        Ok(_) => return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
        Err(rc) => return raise_on(MPI_COMM_WORLD, rc),
    };
    match crate::rt::with_runtime(|rt| rt.lookup_name(&service)) {
        Some(Ok(Some(port))) => {
            // SAFETY: MPI_MAX_PORT_NAME bytes (MPI contract).
            unsafe { put_port(&port, port_name) };
            MPI_SUCCESS
        }
        Some(Ok(None)) => raise_on(MPI_COMM_WORLD, MPI_ERR_NAME),
        Some(Err(e)) => raise_error(MPI_COMM_WORLD, &e),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}

pub(crate) unsafe fn MPI_Unpublish_name(service_name: *const c_char, info: Handle, port_name: *const c_char) -> c_int {
    let _ = (info, port_name);
    // SAFETY: NUL-terminated (MPI contract).
    let service = match unsafe { service_args(service_name, std::ptr::null()) } {
        Ok((s, _)) => s,
        Err(rc) => return raise_on(MPI_COMM_WORLD, rc),
    };
    match crate::rt::with_runtime(|rt| rt.unpublish_name(&service)) {
        Some(Ok(())) => MPI_SUCCESS,
        Some(Err(runthrough::Error::InvalidArg(_))) => raise_on(MPI_COMM_WORLD, MPI_ERR_SERVICE),
        Some(Err(e)) => raise_error(MPI_COMM_WORLD, &e),
        None => raise_on(MPI_COMM_WORLD, MPI_ERR_OTHER),
    }
}
