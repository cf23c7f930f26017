//! Attribute caching (MPI-4.1 7.7): the calls on the keyvals and attributes of
//! communicators and datatypes, the deprecated MPI-1 forms, and the predefined attributes
//! of MPI_COMM_WORLD (MPI-4.1 9.1.2). The keyvals and the attributes themselves, with
//! their callbacks, are `keyval.rs`'s.

use std::ffi::{c_int, c_void};
use std::sync::atomic::Ordering;

use crate::comm::comm;
use crate::consts::*;
use crate::dtype::dtype;
use crate::keyval::{self, create_keyval, Object};
use crate::raise::raise_on;
use crate::types::{FnPtr, Handle};

/// Frees the keyval at `k` (the attributes still holding it keep it) and sets it to
/// MPI_KEYVAL_INVALID.
unsafe fn free_keyval(kind: Object, k: *mut c_int) -> c_int {
    // SAFETY: in/out argument.
    let id = unsafe { *k };
    if !keyval::free_keyval(kind, id) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
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
static ATTR_APPNUM: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The value (a pointer to an `int`) of predefined attribute `k`; `Some(None)` for one
/// this implementation does not set.
fn predefined(k: c_int) -> Option<Option<*const c_int>> {
    Some(Some(match k {
        MPI_TAG_UB => &ATTR_TAG_UB.0,
        MPI_IO => &ATTR_IO.0,
        MPI_HOST => &ATTR_HOST.0,
        MPI_WTIME_IS_GLOBAL => &ATTR_WTIME_GLOBAL.0,
        MPIX_FT => &ATTR_FT.0,
        // Set in spawned processes only (their program's index).
        MPI_APPNUM => match crate::rt::with_runtime(|rt| rt.appnum()).flatten() {
            Some(n) => {
                ATTR_APPNUM.store(n as c_int, Ordering::Relaxed);
                ATTR_APPNUM.as_ptr().cast_const()
            }
            None => return Some(None),
        },
        MPI_LASTUSEDCODE => {
            ATTR_LASTUSED.store(crate::err::last_used_code(), Ordering::Relaxed);
            ATTR_LASTUSED.as_ptr().cast_const()
        }
        MPI_UNIVERSE_SIZE => {
            // rtrun's universe (--universe), else the world's size.
            let u = crate::rt::with_runtime(|rt| rt.universe_size()).flatten().map(|u| u as c_int);
            let u = u.unwrap_or_else(|| crate::rt::runtime_world().map_or(1, |w| w.size() as c_int));
            ATTR_UNIVERSE.store(u, Ordering::Relaxed);
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
        None => match keyval::keyval(comm_keyval, Object::Comm) {
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
    raise_on(comm, keyval::set(&c.attrs, comm, Object::Comm, comm_keyval, attribute_val))
}

pub(crate) unsafe fn MPI_Comm_delete_attr(comm: Handle, comm_keyval: c_int) -> c_int {
    let c = comm!(comm);
    raise_on(comm, keyval::delete(&c.attrs, comm, Object::Comm, comm_keyval))
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
    raise_on(MPI_COMM_WORLD, keyval::set(&t.attrs, datatype, Object::Type, type_keyval, attribute_val))
}

pub(crate) unsafe fn MPI_Type_get_attr(
    datatype: Handle,
    type_keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    let t = dtype!(datatype);
    if let Err(e) = keyval::keyval(type_keyval, Object::Type) {
        return raise_on(MPI_COMM_WORLD, e);
    }
    let v = t.attrs.lock().get(type_keyval);
    // SAFETY: output arguments.
    unsafe { put(v, attribute_val, flag) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_delete_attr(datatype: Handle, type_keyval: c_int) -> c_int {
    let t = dtype!(datatype);
    raise_on(MPI_COMM_WORLD, keyval::delete(&t.attrs, datatype, Object::Type, type_keyval))
}
