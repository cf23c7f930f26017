//! Attribute storage (MPI-4.1 7.7): the keyvals with their copy and delete callbacks,
//! the attributes attached to a communicator or a datatype, and the callbacks run on them
//! at a set, a delete, a duplication and a free. The calls that reach them by handle are
//! `attr.rs`'s.
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

use crate::consts::*;
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
    Win,
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
pub(crate) fn keyval(k: c_int, kind: Object) -> Result<Arc<Keyval>, c_int> {
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
    pub(crate) fn get(&self, k: c_int) -> Option<*mut c_void> {
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
pub(crate) fn set(attrs: &Mutex<Attrs>, h: Handle, kind: Object, k: c_int, val: *mut c_void) -> c_int {
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
pub(crate) fn delete(attrs: &Mutex<Attrs>, h: Handle, kind: Object, k: c_int) -> c_int {
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
///
/// # Safety
/// `out` is writable.
pub(crate) unsafe fn create_keyval(
    kind: Object,
    copy: FnPtr,
    delete: FnPtr,
    out: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    let id = NEXT_KEYVAL.fetch_add(1, Ordering::Relaxed);
    let kv = Keyval { id, kind, copy: copy as usize, delete: delete as usize, extra };
    KEYVALS.lock().insert(id, Arc::new(kv));
    // SAFETY: output argument.
    unsafe { *out = id };
    MPI_SUCCESS
}

/// Frees keyval `id` of objects of `kind` (the attributes still holding it keep it);
/// `false` when it is no live keyval of that kind.
pub(crate) fn free_keyval(kind: Object, id: c_int) -> bool {
    let mut g = KEYVALS.lock();
    if !g.get(&id).is_some_and(|kv| kv.kind == kind) {
        return false;
    }
    g.remove(&id);
    true
}
