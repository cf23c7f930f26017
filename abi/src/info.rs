//! Info objects: ordered key/value strings.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::err::{put_string, raise_on};
use crate::handles::{Kind, Table};
use crate::types::Handle;

#[derive(Debug, Default)]
pub(crate) struct InfoObj {
    pub(crate) kv: Mutex<Vec<(String, String)>>,
}

pub(crate) static INFOS: Table<InfoObj> = Table::new(Kind::Info);
static ENV: std::sync::OnceLock<Arc<InfoObj>> = std::sync::OnceLock::new();

fn lookup(h: Handle) -> Option<Arc<InfoObj>> {
    if h == MPI_INFO_ENV {
        return Some(ENV.get_or_init(Default::default).clone());
    }
    INFOS.get(h)
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

/// The value of `key` in info object `h` (none for MPI_INFO_NULL or a bad handle).
pub(crate) fn value(h: Handle, key: &str) -> Option<String> {
    let i = lookup(h)?;
    get(&i, key)
}
