//! Info objects: ordered key/value strings.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::err::put_string;
use crate::handles::{Kind, Table};
use crate::raise::raise_on;
use crate::types::Handle;

#[derive(Debug, Default)]
pub(crate) struct InfoObj {
    pub(crate) kv: Mutex<Vec<(String, String)>>,
}

pub(crate) static INFOS: Table<InfoObj> = Table::new(Kind::Info);
static ENV: std::sync::OnceLock<Arc<InfoObj>> = std::sync::OnceLock::new();

fn lookup(h: Handle) -> Option<Arc<InfoObj>> {
    if h == MPI_INFO_ENV {
        return Some(env_info());
    }
    INFOS.get(h)
}

// ---- the environment: MPI_INFO_ENV (MPI-4.1 11.4; the initial error handler is `err.rs`'s) ----

/// This process's command line: the program, then its arguments (from the kernel, so
/// also where MPI_Init had no argc/argv and in the sessions model).
fn command_line() -> Vec<String> {
    let b = std::fs::read("/proc/self/cmdline").unwrap_or_default();
    // Each argument ends with a NUL (empty arguments included).
    match b.strip_suffix(&[0]) {
        Some(args) => args.split(|&c| c == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect(),
        None => Vec::new(),
    }
}

/// The number of processes before the runtime starts: what the launcher said.
fn launch_size() -> String {
    ["RT_SIZE", "PMI_SIZE", "SLURM_NTASKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|s| s.trim().parse::<u32>().is_ok_and(|n| n > 0)))
        .map_or_else(|| "1".to_string(), |s| s.trim().to_string())
}

/// The keys of MPI_INFO_ENV (MPI-4.1 11.4), with `cmd` as the command line.
fn env_pairs(cmd: &[String]) -> Vec<(String, String)> {
    let mut host = [0u8; 256];
    // SAFETY: gethostname writes at most host.len() bytes.
    let rc = unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len()) };
    let n = if rc == 0 { host.iter().position(|&b| b == 0).unwrap_or(host.len()) } else { 0 };
    let wdir = std::env::current_dir().map(|d| d.to_string_lossy().into_owned()).unwrap_or_default();
    let size = launch_size();
    vec![
        ("command".into(), cmd.first().cloned().unwrap_or_default()),
        ("argv".into(), cmd.get(1..).unwrap_or_default().join(" ")),
        ("maxprocs".into(), size.clone()),
        // No range of sizes to choose from: exactly maxprocs.
        ("soft".into(), size),
        ("host".into(), String::from_utf8_lossy(&host[..n]).into_owned()),
        ("arch".into(), std::env::consts::ARCH.into()),
        ("wdir".into(), wdir),
        // No launcher file of further information.
        ("file".into(), String::new()),
        // No level asked for at start-up: MPI_Init's, MPI_THREAD_SINGLE.
        ("thread_level".into(), "MPI_THREAD_SINGLE".into()),
        ("mpi_initial_errhandler".into(), crate::err::initial_errhandler_name().into()),
    ]
}

/// MPI_INFO_ENV, made on first use.
fn env_info() -> Arc<InfoObj> {
    ENV.get_or_init(|| Arc::new(InfoObj { kv: Mutex::new(env_pairs(&command_line())) })).clone()
}

/// The runtime started with `size` processes: MPI_INFO_ENV's `maxprocs` and `soft` say so.
pub(crate) fn env_started(size: usize) {
    let e = env_info();
    let mut g = e.kv.lock();
    for (k, v) in g.iter_mut() {
        if k == "maxprocs" || k == "soft" {
            *v = size.to_string();
        }
    }
}

/// A new info object with MPI_INFO_ENV's keys, the command line from `argc`/`argv` where
/// given (MPI-4.1 11.4; callable before initialisation).
pub(crate) unsafe fn MPI_Info_create_env(argc: c_int, argv: *mut *mut c_char, info: *mut Handle) -> c_int {
    if info.is_null() {
        return raise_on(MPI_COMM_SELF, MPI_ERR_ARG);
    }
    let cmd: Vec<String> = if argv.is_null() || argc <= 0 {
        command_line()
    } else {
        (0..argc as usize)
            // SAFETY: argc entries (MPI contract).
            .map(|i| unsafe { *argv.add(i) })
            .take_while(|p| !p.is_null())
            // SAFETY: NUL-terminated C strings (MPI contract).
            .map(|p| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
            .collect()
    };
    let mut kv = env_pairs(&cmd);
    // After start-up, the same values as MPI_INFO_ENV (maxprocs included).
    let now = env_info().kv.lock().clone();
    for (k, v) in kv.iter_mut() {
        if k == "maxprocs" || k == "soft" {
            if let Some((_, n)) = now.iter().find(|(x, _)| x == k) {
                v.clone_from(n);
            }
        }
    }
    // SAFETY: output argument.
    unsafe { *info = INFOS.insert(Arc::new(InfoObj { kv: Mutex::new(kv) })) };
    MPI_SUCCESS
}

macro_rules! info {
    ($h:expr) => {
        match lookup($h) {
            Some(i) => i,
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO),
        }
    };
}

unsafe fn cstr(p: *const c_char) -> Option<String> {
    // SAFETY: NUL-terminated or null (MPI contract).
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
}

pub(crate) unsafe fn MPI_Info_create(info: *mut Handle) -> c_int {
    // SAFETY: output argument.
    unsafe { *info = INFOS.insert(Arc::new(InfoObj::default())) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_free(info: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    if INFOS.remove(unsafe { *info }).is_none() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO);
    }
    // SAFETY: in/out argument.
    unsafe { *info = MPI_INFO_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_dup(info: Handle, newinfo: *mut Handle) -> c_int {
    let i = info!(info);
    let kv = i.kv.lock().clone();
    // SAFETY: output argument.
    unsafe { *newinfo = INFOS.insert(Arc::new(InfoObj { kv: Mutex::new(kv) })) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_set(info: Handle, key: *const c_char, value: *const c_char) -> c_int {
    let i = info!(info);
    // SAFETY: C strings (MPI contract).
    let (Some(k), Some(v)) = (unsafe { cstr(key) }, unsafe { cstr(value) }) else {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY);
    };
    if k.is_empty() || k.len() >= MPI_MAX_INFO_KEY as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY);
    }
    if v.len() >= MPI_MAX_INFO_VAL as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_VALUE);
    }
    let mut g = i.kv.lock();
    match g.iter_mut().find(|(x, _)| *x == k) {
        Some(e) => e.1 = v,
        None => g.push((k, v)),
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_delete(info: Handle, key: *const c_char) -> c_int {
    let i = info!(info);
    // SAFETY: C string.
    let Some(k) = (unsafe { cstr(key) }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY) };
    let mut g = i.kv.lock();
    let n = g.len();
    g.retain(|(x, _)| *x != k);
    if g.len() == n {
        drop(g);
        return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_NOKEY);
    }
    MPI_SUCCESS
}

fn get(i: &InfoObj, k: &str) -> Option<String> {
    i.kv.lock().iter().find(|(x, _)| x == k).map(|(_, v)| v.clone())
}

pub(crate) unsafe fn MPI_Info_get_string(
    info: Handle,
    key: *const c_char,
    buflen: *mut c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let i = info!(info);
    // SAFETY: C string.
    let Some(k) = (unsafe { cstr(key) }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY) };
    match get(&i, &k) {
        Some(v) => {
            // SAFETY: in/out length, buffer of that many bytes (MPI contract).
            unsafe {
                let room = *buflen;
                if room > 0 {
                    put_string(&v, value, room as usize, std::ptr::null_mut());
                }
                *buflen = v.len() as c_int + 1;
                *flag = 1;
            }
        }
        // SAFETY: output argument.
        None => unsafe { *flag = 0 },
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_get(
    info: Handle,
    key: *const c_char,
    valuelen: c_int,
    value: *mut c_char,
    flag: *mut c_int,
) -> c_int {
    let i = info!(info);
    // SAFETY: C string.
    let Some(k) = (unsafe { cstr(key) }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY) };
    match get(&i, &k) {
        // SAFETY: valuelen + 1 bytes (MPI contract).
        Some(v) => unsafe {
            put_string(&v, value, valuelen as usize + 1, std::ptr::null_mut());
            *flag = 1;
        },
        // SAFETY: output argument.
        None => unsafe { *flag = 0 },
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_get_valuelen(
    info: Handle,
    key: *const c_char,
    valuelen: *mut c_int,
    flag: *mut c_int,
) -> c_int {
    let i = info!(info);
    // SAFETY: C string.
    let Some(k) = (unsafe { cstr(key) }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_INFO_KEY) };
    match get(&i, &k) {
        // SAFETY: output arguments.
        Some(v) => unsafe {
            *valuelen = v.len() as c_int;
            *flag = 1;
        },
        // SAFETY: output argument.
        None => unsafe { *flag = 0 },
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_get_nkeys(info: Handle, nkeys: *mut c_int) -> c_int {
    let i = info!(info);
    // SAFETY: output argument.
    unsafe { *nkeys = i.kv.lock().len() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Info_get_nthkey(info: Handle, n: c_int, key: *mut c_char) -> c_int {
    let i = info!(info);
    let k = i.kv.lock().get(n.max(0) as usize).map(|(k, _)| k.clone());
    match k {
        Some(k) if n >= 0 => {
            // SAFETY: MPI_MAX_INFO_KEY bytes (MPI contract).
            unsafe { put_string(&k, key, MPI_MAX_INFO_KEY as usize, std::ptr::null_mut()) };
            MPI_SUCCESS
        }
        _ => raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
    }
}

/// Whether `h` is a live info object (MPI_INFO_ENV included).
pub(crate) fn exists(h: Handle) -> bool {
    lookup(h).is_some()
}

/// A new info object holding `kv`, in that order.
pub(crate) fn new_info(kv: Vec<(String, String)>) -> Handle {
    INFOS.insert(Arc::new(InfoObj { kv: Mutex::new(kv) }))
}

/// The value of `key` in info object `h` (none for MPI_INFO_NULL or a bad handle).
pub(crate) fn value(h: Handle, key: &str) -> Option<String> {
    let i = lookup(h)?;
    get(&i, key)
}

/// Every key and value of info object `h`, in order (none for MPI_INFO_NULL or a bad
/// handle).
pub(crate) fn entries(h: Handle) -> Vec<(String, String)> {
    lookup(h).map(|i| i.kv.lock().clone()).unwrap_or_default()
}
