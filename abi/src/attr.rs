//! Attribute caching (MPI-4.1 7.7): keyvals of communicators and datatypes, the values
//! attached to objects with their copy and delete callbacks, the deprecated MPI-1 forms,
//! and the predefined attributes of MPI_COMM_WORLD (MPI-4.1 9.1.2).
//!
//! An attribute holds its keyval: a keyval freed while attached stays alive for those
//! objects (its copy callback still runs at a dup, its delete callback at a free), as
//! MPI-4.1 7.7.2 says. An object's attributes are kept in the order they were set; a
//! freed object (and MPI_COMM_SELF at MPI_Finalize) deletes them in the reverse order,
//! as MPICH does. Callbacks run with no lock held: they may call attribute functions.

use std::collections::BTreeMap;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::comm::comm;
use crate::consts::*;
use crate::dtype::dtype;
use crate::err::raise_on;
use crate::types::{FnPtr, Handle};

/// `MPI_Comm_copy_attr_function`, `MPI_Type_copy_attr_function`, `MPI_Copy_function`.
type CopyFn = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function`, `MPI_Type_delete_attr_function`, `MPI_Delete_function`.
type DeleteFn = unsafe extern "C" fn(Handle, c_int, *mut c_void, *mut c_void) -> c_int;

/// The `*_NULL_COPY_FN` / `*_NULL_DELETE_FN` and `*_DUP_FN` values of the header.
const NULL_FN: usize = 0;
const DUP_FN: usize = 1;

/// What a keyval is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Object {
    Comm,
    Type,
}

/// A keyval: its callbacks and extra state.
#[derive(Debug)]
pub(crate) struct Keyval {
    id: c_int,
    kind: Object,
    copy: usize,
    delete: usize,
    extra: *mut c_void,
}
// SAFETY: the callbacks and the opaque extra-state word are only passed back to the
// program, never dereferenced here.
unsafe impl Send for Keyval {}
// SAFETY: as above; immutable.
unsafe impl Sync for Keyval {}

/// The keyvals the program has not freed, by number.
static KEYVALS: Mutex<BTreeMap<c_int, Arc<Keyval>>> = Mutex::new(BTreeMap::new());
/// Above the predefined keyvals (501..).
static NEXT_KEYVAL: AtomicI32 = AtomicI32::new(1000);

/// The live keyval `k` for objects of `kind`.
fn keyval(k: c_int, kind: Object) -> Result<Arc<Keyval>, c_int> {
    KEYVALS.lock().get(&k).filter(|kv| kv.kind == kind).cloned().ok_or(MPI_ERR_KEYVAL)
}

/// One attribute: its keyval (kept alive by it) and value.
#[derive(Debug, Clone)]
struct Attr {
    key: Arc<Keyval>,
    val: *mut c_void,
}

/// The attributes of one object, in the order they were set.
#[derive(Debug, Default)]
pub(crate) struct Attrs(Vec<Attr>);
// SAFETY: the values are opaque words the program stores and reads back; the library
// never dereferences them.
unsafe impl Send for Attrs {}

impl Attrs {
    fn get(&self, k: c_int) -> Option<*mut c_void> {
        self.0.iter().find(|a| a.key.id == k).map(|a| a.val)
    }
}

/// Runs the delete callback of `a` on object `h`.
fn call_delete(h: Handle, a: &Attr) -> c_int {
    match a.key.delete {
        NULL_FN => MPI_SUCCESS,
        f => {
            // SAFETY: a delete callback the program registered with this keyval.
            let f: DeleteFn = unsafe { std::mem::transmute::<usize, DeleteFn>(f) };
            // SAFETY: called as MPI prescribes.
            unsafe { f(h, a.key.id, a.val, a.key.extra) }
        }
    }
}

/// Sets attribute `k` of object `h`: a value it replaces is deleted first, and stays if
/// its delete callback fails.
fn set(attrs: &Mutex<Attrs>, h: Handle, kind: Object, k: c_int, val: *mut c_void) -> c_int {
    let key = match keyval(k, kind) {
        Ok(kv) => kv,
        Err(e) => return e,
    };
    let old = attrs.lock().0.iter().find(|a| a.key.id == k).cloned();
    if let Some(old) = old {
        let rc = call_delete(h, &old);
        if rc != MPI_SUCCESS {
            return rc;
        }
    }
    let mut g = attrs.lock();
    match g.0.iter_mut().find(|a| a.key.id == k) {
        Some(a) => a.val = val,
        None => g.0.push(Attr { key, val }),
    }
    MPI_SUCCESS
}

/// Deletes attribute `k` of object `h` (nothing to do when it is not set); it stays if
/// its delete callback fails.
fn delete(attrs: &Mutex<Attrs>, h: Handle, kind: Object, k: c_int) -> c_int {
    if let Err(e) = keyval(k, kind) {
        return e;
    }
    let Some(a) = attrs.lock().0.iter().find(|a| a.key.id == k).cloned() else { return MPI_SUCCESS };
    let rc = call_delete(h, &a);
    if rc == MPI_SUCCESS {
        attrs.lock().0.retain(|x| x.key.id != k);
    }
    rc
}

/// Deletes every attribute of object `h`, the last set first (a freed object); the first
/// failing delete callback's code, the others deleted all the same.
pub(crate) fn delete_all(attrs: &Mutex<Attrs>, h: Handle) -> c_int {
    let mut rc = MPI_SUCCESS;
    loop {
        let Some(a) = attrs.lock().0.pop() else { return rc };
        let r = call_delete(h, &a);
        if rc == MPI_SUCCESS {
            rc = r;
        }
    }
}

/// Copies the attributes of object `src` (handle `src_h`) to its duplicate `dst` as their
/// copy callbacks say. A failing callback's code is returned, after the attributes
/// copied so far were deleted again from `dst` (the caller frees it).
pub(crate) fn copy_all(src: &Mutex<Attrs>, src_h: Handle, dst: &Mutex<Attrs>, dst_h: Handle) -> Result<(), c_int> {
    let attrs: Vec<Attr> = src.lock().0.clone();
    for a in attrs {
        let val = match a.key.copy {
            NULL_FN => continue,
            DUP_FN => a.val,
            f => {
                // SAFETY: a copy callback the program registered with this keyval.
                let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(f) };
                let mut out: *mut c_void = std::ptr::null_mut();
                let mut flag: c_int = 0;
                let out_p = (&mut out as *mut *mut c_void).cast::<c_void>();
                // SAFETY: called as MPI prescribes; `out` and `flag` are ours.
                let rc = unsafe { f(src_h, a.key.id, a.key.extra, a.val, out_p, &mut flag) };
                if rc != MPI_SUCCESS {
                    delete_all(dst, dst_h);
                    return Err(rc);
                }
                if flag == 0 {
                    continue;
                }
                out
            }
        };
        dst.lock().0.push(Attr { key: a.key.clone(), val });
    }
    Ok(())
}

/// Registers a keyval; writes its number to `out`.
unsafe fn create_keyval(kind: Object, copy: FnPtr, delete: FnPtr, out: *mut c_int, extra: *mut c_void) -> c_int {
    let id = NEXT_KEYVAL.fetch_add(1, Ordering::Relaxed);
    let kv = Keyval { id, kind, copy: copy as usize, delete: delete as usize, extra };
    KEYVALS.lock().insert(id, Arc::new(kv));
    // SAFETY: output argument.
    unsafe { *out = id };
    MPI_SUCCESS
}

/// Frees the keyval at `k` (the attributes still holding it keep it) and sets it to
/// MPI_KEYVAL_INVALID.
unsafe fn free_keyval(kind: Object, k: *mut c_int) -> c_int {
    // SAFETY: in/out argument.
    let id = unsafe { *k };
    let mut g = KEYVALS.lock();
    if !g.get(&id).is_some_and(|kv| kv.kind == kind) {
        drop(g);
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
    g.remove(&id);
    drop(g);
    // SAFETY: in/out argument.
    unsafe { *k = MPI_KEYVAL_INVALID };
    MPI_SUCCESS
}

// ---------------------------------------------------------------------------------------
// Communicators

pub(crate) unsafe fn MPI_Comm_create_keyval(
    comm_copy_attr_fn: FnPtr,
    comm_delete_attr_fn: FnPtr,
    comm_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: output argument.
    unsafe { create_keyval(Object::Comm, comm_copy_attr_fn, comm_delete_attr_fn, comm_keyval, extra_state) }
}

pub(crate) unsafe fn MPI_Comm_free_keyval(comm_keyval: *mut c_int) -> c_int {
    // SAFETY: in/out argument.
    unsafe { free_keyval(Object::Comm, comm_keyval) }
}

/// The MPI-1 form of MPI_Comm_create_keyval (same callback signatures).
pub(crate) unsafe fn MPI_Keyval_create(
    copy_fn: FnPtr,
    delete_fn: FnPtr,
    keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_create_keyval(copy_fn, delete_fn, keyval, extra_state) }
}

pub(crate) unsafe fn MPI_Keyval_free(keyval: *mut c_int) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_free_keyval(keyval) }
}

struct Predef(c_int);
// SAFETY: immutable plain data exposed to C by address.
unsafe impl Sync for Predef {}
static ATTR_TAG_UB: Predef = Predef(runthrough::TAG_UB);
static ATTR_IO: Predef = Predef(MPI_ANY_SOURCE);
/// No host process (MPI-4.1 9.1.2 allows MPI_PROC_NULL).
static ATTR_HOST: Predef = Predef(MPI_PROC_NULL);
static ATTR_WTIME_GLOBAL: Predef = Predef(0);
/// `MPIX_FT` (mpi-ext.h, Open MPI 5's name): fault tolerance is on.
static ATTR_FT: Predef = Predef(1);
/// Values computed when read: atomics (an `int` in memory, as C reads it), so that two
/// threads reading the attribute at once write without a data race.
static ATTR_LASTUSED: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);
static ATTR_UNIVERSE: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The value (a pointer to an `int`) of predefined attribute `k`; `Some(None)` for one
/// this implementation does not set.
fn predefined(k: c_int) -> Option<Option<*const c_int>> {
    Some(Some(match k {
        MPI_TAG_UB => &ATTR_TAG_UB.0,
        MPI_IO => &ATTR_IO.0,
        MPI_HOST => &ATTR_HOST.0,
        MPI_WTIME_IS_GLOBAL => &ATTR_WTIME_GLOBAL.0,
        MPIX_FT => &ATTR_FT.0,
        // Not provided by this implementation.
        MPI_APPNUM => return Some(None),
        MPI_LASTUSEDCODE => {
            ATTR_LASTUSED.store(crate::err::last_used_code(), Ordering::Relaxed);
            ATTR_LASTUSED.as_ptr().cast_const()
        }
        MPI_UNIVERSE_SIZE => {
            ATTR_UNIVERSE.store(crate::env::runtime_world().map_or(1, |w| w.size() as c_int), Ordering::Relaxed);
            ATTR_UNIVERSE.as_ptr().cast_const()
        }
        _ => return None,
    }))
}

/// Writes an attribute lookup's result.
unsafe fn put(v: Option<*mut c_void>, attribute_val: *mut c_void, flag: *mut c_int) {
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
}

pub(crate) unsafe fn MPI_Comm_get_attr(
    comm: Handle,
    comm_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let c = comm!(comm);
    let v = match predefined(comm_keyval) {
        Some(p) => p.map(|p| p as *mut c_void),
        None => match keyval(comm_keyval, Object::Comm) {
            Ok(_) => c.attrs.lock().get(comm_keyval),
            Err(e) => return raise_on(comm, e),
        },
    };
    // SAFETY: output arguments.
    unsafe { put(v, attribute_val, flag) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_set_attr(comm: Handle, comm_keyval: c_int, attribute_val: *mut c_void) -> c_int {
    let c = comm!(comm);
    raise_on(comm, set(&c.attrs, comm, Object::Comm, comm_keyval, attribute_val))
}

pub(crate) unsafe fn MPI_Comm_delete_attr(comm: Handle, comm_keyval: c_int) -> c_int {
    let c = comm!(comm);
    raise_on(comm, delete(&c.attrs, comm, Object::Comm, comm_keyval))
}

pub(crate) unsafe fn MPI_Attr_get(comm: Handle, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_get_attr(comm, keyval, attribute_val, flag) }
}

pub(crate) unsafe fn MPI_Attr_put(comm: Handle, keyval: c_int, attribute_val: *mut c_void) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_set_attr(comm, keyval, attribute_val) }
}

pub(crate) unsafe fn MPI_Attr_delete(comm: Handle, keyval: c_int) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_delete_attr(comm, keyval) }
}

// ---------------------------------------------------------------------------------------
// Datatypes

pub(crate) unsafe fn MPI_Type_create_keyval(
    type_copy_attr_fn: FnPtr,
    type_delete_attr_fn: FnPtr,
    type_keyval: *mut c_int,
    extra_state: *mut c_void,
) -> c_int {
    // SAFETY: output argument.
    unsafe { create_keyval(Object::Type, type_copy_attr_fn, type_delete_attr_fn, type_keyval, extra_state) }
}

pub(crate) unsafe fn MPI_Type_free_keyval(type_keyval: *mut c_int) -> c_int {
    // SAFETY: in/out argument.
    unsafe { free_keyval(Object::Type, type_keyval) }
}

pub(crate) unsafe fn MPI_Type_set_attr(datatype: Handle, type_keyval: c_int, attribute_val: *mut c_void) -> c_int {
    let t = dtype!(datatype);
    raise_on(MPI_COMM_WORLD, set(&t.attrs, datatype, Object::Type, type_keyval, attribute_val))
}

pub(crate) unsafe fn MPI_Type_get_attr(
    datatype: Handle,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let t = dtype!(datatype);
    if let Err(e) = keyval(type_keyval, Object::Type) {
        return raise_on(MPI_COMM_WORLD, e);
    }
    let v = t.attrs.lock().get(type_keyval);
    // SAFETY: output arguments.
    unsafe { put(v, attribute_val, flag) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_delete_attr(datatype: Handle, type_keyval: c_int) -> c_int {
    let t = dtype!(datatype);
    raise_on(MPI_COMM_WORLD, delete(&t.attrs, datatype, Object::Type, type_keyval))
}
