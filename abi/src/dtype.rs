//! Datatypes: the predefined ones, the derived constructors, sizes and extents, pack and
//! unpack.
//!
//! A datatype's data is described by its [`Layout`]: one element's runs of bytes as a
//! tree of strided repetitions whose size does not grow with the constructors' counts
//! (`dtype/layout.rs`), built with the bounds rules of MPI-4.1 5.1 (`dtype/build.rs`).
//! Sends of a contiguous type go straight from the program's buffer; any other layout is
//! packed into a temporary buffer first and unpacked on arrival. The `_c` constructors
//! take counts past `int` ([`type_vector_c`] and its siblings); their envelope holds the
//! `int` arguments when they fit, as the plain constructor's would, else large counts.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::count::{slice, slice_c};
use crate::err::put_string;
use crate::handles::{Kind, Table};
use crate::raise::raise_on;
use crate::types::{Handle, MPI_Count, MPI_Status};

mod build;
mod dtref;
mod external;
mod large;
mod layout;
mod predef;
#[cfg(test)]
mod prop_tests;
pub(crate) use external::*;
pub(crate) use large::*;

use build::Acc;
pub(crate) use dtref::DtRef;
pub(crate) use layout::Layout;
pub(crate) use predef::{contiguous_predefined_size, init_predefined, Basic, PairKind};

/// A datatype.
#[derive(Debug)]
pub(crate) struct Dtype {
    pub(crate) size: usize,
    pub(crate) lb: isize,
    pub(crate) ub: isize,
    pub(crate) true_lb: isize,
    pub(crate) true_ub: isize,
    /// One element's data (`for s in &t.segs` yields its runs in type-map order).
    pub(crate) segs: Layout,
    /// Whether the bounds are explicit markers (MPI_Type_create_resized, and any type
    /// built from one: MPI-4.1 5.1.7).
    pub(crate) marked: bool,
    /// The element every reduction works on, when the whole type is made of one.
    pub(crate) basic: Option<Basic>,
    /// Largest leaf alignment (struct extents are padded to it).
    pub(crate) align: usize,
    pub(crate) predefined: bool,
    pub(crate) committed: AtomicBool,
    pub(crate) name: Mutex<String>,
    pub(crate) combiner: c_int,
    pub(crate) ints: Vec<c_int>,
    pub(crate) aints: Vec<isize>,
    pub(crate) types: Vec<Handle>,
    /// The constituent types themselves (kept alive: a derived type outlives the handles
    /// it was built from, MPI 5, 5.1.10).
    pub(crate) type_objs: Vec<Arc<Dtype>>,
    /// Large counts of the constructor (the `_c` forms past `int`).
    pub(crate) large: Vec<MPI_Count>,
    /// Its attributes (MPI_Type_set_attr).
    pub(crate) attrs: Mutex<crate::keyval::Attrs>,
}

impl Dtype {
    pub(crate) fn extent(&self) -> isize {
        self.ub - self.lb
    }

    /// Whether `count` elements are `count * size` bytes from the buffer start.
    #[inline]
    pub(crate) fn contiguous(&self) -> bool {
        self.size == 0 || (self.segs.sequential() && self.extent() == self.size as isize)
    }

    /// A derived type of layout `segs`, bounds `0..size` until the constructor sets them.
    pub(crate) fn derived(segs: Layout, basic: Option<Basic>, align: usize) -> Dtype {
        let size = segs.size();
        Dtype {
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            segs,
            marked: false,
            basic,
            align,
            predefined: false,
            committed: AtomicBool::new(false),
            name: Mutex::new(String::new()),
            combiner: 0,
            ints: Vec::new(),
            aints: Vec::new(),
            types: Vec::new(),
            type_objs: Vec::new(),
            large: Vec::new(),
            attrs: Mutex::default(),
        }
    }

    /// A type with `t`'s layout and bounds (dup, resized, the F90 types).
    fn like(t: &Dtype) -> Dtype {
        let mut d = Dtype::derived(t.segs.clone(), t.basic, t.align);
        (d.lb, d.ub, d.true_lb, d.true_ub, d.marked) = (t.lb, t.ub, t.true_lb, t.true_ub, t.marked);
        d
    }
}

pub(crate) static TYPES: Table<Dtype> = Table::new(Kind::Datatype);

/// The datatype of handle `h`.
#[inline]
pub(crate) fn lookup(h: Handle) -> Option<DtRef> {
    if (0x200..0x300).contains(&h) {
        return predef::predefined(h).map(DtRef::Static);
    }
    TYPES.get(h).map(DtRef::Shared)
}

macro_rules! dtype {
    ($h:expr) => {
        match crate::dtype::lookup($h) {
            Some(d) => d,
            None => return crate::raise::raise_on(crate::consts::MPI_COMM_WORLD, crate::consts::MPI_ERR_TYPE),
        }
    };
}
pub(crate) use dtype;

/// `let x = world!(result);`: the value, or raise the error class on MPI_COMM_WORLD.
macro_rules! world {
    ($r:expr) => {
        match $r {
            Ok(v) => v,
            Err(e) => return raise_on(MPI_COMM_WORLD, e),
        }
    };
}

/// The arguments MPI_Type_get_contents returns.
#[derive(Default)]
struct Env {
    ints: Vec<c_int>,
    aints: Vec<isize>,
    large: Vec<MPI_Count>,
}

impl Env {
    fn ints(ints: Vec<c_int>) -> Env {
        Env { ints, ..Env::default() }
    }

    /// `int` arguments `ints` and address arguments `aints` when the ints fit (the plain
    /// constructor's envelope), else every argument as a large count (the `_c` form's).
    fn small_or_large(ints: &[MPI_Count], aints: &[MPI_Count]) -> Env {
        match ints.iter().map(|&v| c_int::try_from(v)).collect::<Result<Vec<_>, _>>() {
            Ok(i) => Env { ints: i, aints: aints.iter().map(|&a| a as isize).collect(), large: Vec::new() },
            Err(_) => Env { large: ints.iter().chain(aints).copied().collect(), ..Env::default() },
        }
    }
}

unsafe fn new_type(mut d: Dtype, combiner: c_int, env: Env, types: Vec<Handle>, out: *mut Handle) -> c_int {
    d.combiner = combiner;
    d.ints = env.ints;
    d.aints = env.aints;
    d.large = env.large;
    d.type_objs = types.iter().filter_map(|&h| lookup(h).map(DtRef::into_arc)).collect();
    d.types = types;
    // SAFETY: output argument.
    unsafe { *out = TYPES.insert(Arc::new(d)) };
    MPI_SUCCESS
}

/// A count argument: `MPI_ERR_COUNT` when negative or past the address space.
fn ucount(n: MPI_Count) -> Result<usize, c_int> {
    usize::try_from(n).ok().filter(|&n| isize::try_from(n).is_ok()).ok_or(MPI_ERR_COUNT)
}

/// A displacement or stride argument in bytes.
fn disp(n: MPI_Count) -> Result<isize, c_int> {
    isize::try_from(n).map_err(|_| MPI_ERR_ARG)
}

/// `n` elements of extent `ext` in bytes.
fn scaled(n: MPI_Count, ext: isize) -> Result<isize, c_int> {
    disp(n)?.checked_mul(ext).ok_or(MPI_ERR_COUNT)
}

// ---------------------------------------------------------------------------------------
// Constructors (each with its large-count form, which the `_c` functions call)

/// MPI_Type_contiguous with a large count.
pub(crate) unsafe fn contiguous_large(count: MPI_Count, oldtype: Handle, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    let n = world!(ucount(count));
    let mut a = Acc::default();
    a.block(n, 0, &t);
    let d = world!(a.finish(false));
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_CONTIGUOUS, Env::small_or_large(&[count], &[]), vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_contiguous(count: c_int, oldtype: Handle, newtype: *mut Handle) -> c_int {
    // SAFETY: forwarded.
    unsafe { contiguous_large(count as MPI_Count, oldtype, newtype) }
}

/// MPI_Type_vector (`bytes`: MPI_Type_create_hvector) with large counts.
unsafe fn strided(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    bytes: bool,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    let (n, bl) = (world!(ucount(count)), world!(ucount(blocklength)));
    let s = world!(if bytes { disp(stride) } else { scaled(stride, t.extent()) });
    let mut a = Acc::default();
    a.blocks(n, s, bl, 0, &t);
    let d = world!(a.finish(false));
    let (combiner, env) = if bytes {
        (MPI_COMBINER_HVECTOR, Env::small_or_large(&[count, blocklength], &[stride]))
    } else {
        (MPI_COMBINER_VECTOR, Env::small_or_large(&[count, blocklength, stride], &[]))
    };
    // SAFETY: output argument.
    unsafe { new_type(d, combiner, env, vec![oldtype], newtype) }
}

/// MPI_Type_vector_c.
pub(crate) unsafe fn type_vector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { strided(count, blocklength, stride, false, oldtype, newtype) }
}

/// MPI_Type_create_hvector_c.
pub(crate) unsafe fn type_hvector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { strided(count, blocklength, stride, true, oldtype, newtype) }
}

pub(crate) unsafe fn MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { type_vector_c(count as MPI_Count, blocklength as MPI_Count, stride as MPI_Count, oldtype, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { type_hvector_c(count as MPI_Count, blocklength as MPI_Count, stride as MPI_Count, oldtype, newtype) }
}

/// The indexed constructors with large counts: blocks of `bl[i]` elements (`bl[0]` for
/// all with `block`) at displacements `dp[i]` (bytes with `bytes`, else extents of the
/// old type).
unsafe fn indexed(
    count: MPI_Count,
    bl: &[MPI_Count],
    dp: &[MPI_Count],
    block: bool,
    bytes: bool,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    let n = world!(ucount(count));
    if dp.len() != n || bl.len() != if block { 1 } else { n } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let ext = t.extent();
    let mut a = Acc::default();
    for (i, &d) in dp.iter().enumerate() {
        let b = world!(ucount(bl[if block { 0 } else { i }]));
        let off = world!(if bytes { disp(d) } else { scaled(d, ext) });
        a.block(b, off, &t);
    }
    let d = world!(a.finish(false));
    let mut ints = vec![count];
    ints.extend_from_slice(bl);
    let (combiner, env) = match (block, bytes) {
        (false, false) => (MPI_COMBINER_INDEXED, Env::small_or_large(&[&ints[..], dp].concat(), &[])),
        (false, true) => (MPI_COMBINER_HINDEXED, Env::small_or_large(&ints, dp)),
        (true, false) => (MPI_COMBINER_INDEXED_BLOCK, Env::small_or_large(&[&ints[..], dp].concat(), &[])),
        (true, true) => (MPI_COMBINER_HINDEXED_BLOCK, Env::small_or_large(&ints, dp)),
    };
    // SAFETY: output argument.
    unsafe { new_type(d, combiner, env, vec![oldtype], newtype) }
}

/// Widens a C array of `n` values to large counts.
unsafe fn widen<T: Copy + Into<i64>>(p: *const T, n: c_int) -> Vec<MPI_Count> {
    // SAFETY: forwarded (function contract).
    unsafe { slice(p, n) }.iter().map(|&v| v.into()).collect()
}

pub(crate) unsafe fn MPI_Type_indexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let (bl, dp) = (widen(array_of_blocklengths, count), widen(array_of_displacements, count));
        type_indexed_c(count as MPI_Count, bl.as_ptr(), dp.as_ptr(), oldtype, newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let bl = widen(array_of_blocklengths, count);
        let dp: Vec<MPI_Count> = slice(array_of_displacements, count).iter().map(|&d| d as MPI_Count).collect();
        type_hindexed_c(count as MPI_Count, bl.as_ptr(), dp.as_ptr(), oldtype, newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: an array of count entries (MPI contract); output argument.
    unsafe {
        let dp = widen(array_of_displacements, count);
        type_indexed_block_c(count as MPI_Count, blocklength as MPI_Count, dp.as_ptr(), oldtype, newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: an array of count entries (MPI contract); output argument.
    unsafe {
        let dp: Vec<MPI_Count> = slice(array_of_displacements, count).iter().map(|&d| d as MPI_Count).collect();
        type_hindexed_block_c(count as MPI_Count, blocklength as MPI_Count, dp.as_ptr(), oldtype, newtype)
    }
}

/// MPI_Type_indexed_c.
pub(crate) unsafe fn type_indexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let (bl, dp) = (slice_c(array_of_blocklengths, count), slice_c(array_of_displacements, count));
        indexed(count, bl, dp, false, false, oldtype, newtype)
    }
}

/// MPI_Type_create_hindexed_c.
pub(crate) unsafe fn type_hindexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let (bl, dp) = (slice_c(array_of_blocklengths, count), slice_c(array_of_displacements, count));
        indexed(count, bl, dp, false, true, oldtype, newtype)
    }
}

/// MPI_Type_create_indexed_block_c.
pub(crate) unsafe fn type_indexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: an array of count entries (MPI contract); output argument.
    unsafe { indexed(count, &[blocklength], slice_c(array_of_displacements, count), true, false, oldtype, newtype) }
}

/// MPI_Type_create_hindexed_block_c.
pub(crate) unsafe fn type_hindexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: an array of count entries (MPI contract); output argument.
    unsafe { indexed(count, &[blocklength], slice_c(array_of_displacements, count), true, true, oldtype, newtype) }
}

/// MPI_Type_create_struct with large counts.
unsafe fn structure(
    count: MPI_Count,
    bl: &[MPI_Count],
    dp: &[MPI_Count],
    ty: &[Handle],
    newtype: *mut Handle,
) -> c_int {
    let n = world!(ucount(count));
    if bl.len() != n || dp.len() != n || ty.len() != n {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    let mut a = Acc::default();
    for i in 0..n {
        let t = dtype!(ty[i]);
        a.block(world!(ucount(bl[i])), world!(disp(dp[i])), &t);
    }
    let d = world!(a.finish(true));
    let mut ints = vec![count];
    ints.extend_from_slice(bl);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_STRUCT, Env::small_or_large(&ints, dp), ty.to_vec(), newtype) }
}

pub(crate) unsafe fn MPI_Type_create_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const isize,
    array_of_types: *const Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let bl = widen(array_of_blocklengths, count);
        let dp: Vec<MPI_Count> = slice(array_of_displacements, count).iter().map(|&d| d as MPI_Count).collect();
        type_struct_c(count as MPI_Count, bl.as_ptr(), dp.as_ptr(), array_of_types, newtype)
    }
}

/// MPI_Type_create_struct_c.
pub(crate) unsafe fn type_struct_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    array_of_types: *const Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries (MPI contract); output argument.
    unsafe {
        let (bl, dp) = (slice_c(array_of_blocklengths, count), slice_c(array_of_displacements, count));
        structure(count, bl, dp, slice_c(array_of_types, count), newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_resized(oldtype: Handle, lb: isize, extent: isize, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    let Some(ub) = lb.checked_add(extent) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG) };
    let mut d = Dtype::like(&t);
    (d.lb, d.ub, d.marked) = (lb, ub, true);
    // SAFETY: output argument.
    unsafe {
        let env = Env { aints: vec![lb, extent], ..Env::default() };
        new_type(d, MPI_COMBINER_RESIZED, env, vec![oldtype], newtype)
    }
}

pub(crate) unsafe fn MPI_Type_dup(oldtype: Handle, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    let d = Dtype::like(&t);
    d.committed.store(t.committed.load(Ordering::Relaxed), Ordering::Relaxed);
    // SAFETY: output argument.
    let rc = unsafe { new_type(d, MPI_COMBINER_DUP, Env::default(), vec![oldtype], newtype) };
    if rc != MPI_SUCCESS {
        return rc;
    }
    // The attributes, as their copy callbacks say; a failing callback fails the dup.
    // SAFETY: output argument, set above.
    let h = unsafe { *newtype };
    let Some(n) = TYPES.get(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_INTERN) };
    if let Err(e) = crate::keyval::copy_all(&t.attrs, oldtype, &n.attrs, h) {
        TYPES.remove(h);
        // SAFETY: output argument.
        unsafe { *newtype = MPI_DATATYPE_NULL };
        return raise_on(MPI_COMM_WORLD, e);
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_commit(datatype: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let t = dtype!(unsafe { *datatype });
    t.committed.store(true, Ordering::Relaxed);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_free(datatype: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *datatype };
    let t = match lookup(h) {
        Some(t) if !t.predefined => t,
        _ => return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE),
    };
    // The delete callbacks of its attributes run now (MPI-4.1 7.7.4).
    let rc = crate::keyval::delete_all(&t.attrs, h);
    TYPES.remove(h);
    // SAFETY: in/out argument.
    unsafe { *datatype = MPI_DATATYPE_NULL };
    raise_on(MPI_COMM_WORLD, rc)
}

// ---------------------------------------------------------------------------------------
// Queries

pub(crate) unsafe fn MPI_Type_size(datatype: Handle, size: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = if t.size > c_int::MAX as usize { MPI_UNDEFINED } else { t.size as c_int } };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_size_c(datatype: Handle, size: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = t.size as MPI_Count };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_size_x(datatype: Handle, size: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_size_c(datatype, size) }
}

pub(crate) unsafe fn MPI_Type_get_extent(datatype: Handle, lb: *mut isize, extent: *mut isize) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *lb = t.lb;
        *extent = t.extent();
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_extent_c(datatype: Handle, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *lb = t.lb as MPI_Count;
        *extent = t.extent() as MPI_Count;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_extent_x(datatype: Handle, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_get_extent_c(datatype, lb, extent) }
}

pub(crate) unsafe fn MPI_Type_get_true_extent(datatype: Handle, true_lb: *mut isize, true_extent: *mut isize) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *true_lb = t.true_lb;
        *true_extent = t.true_ub - t.true_lb;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_true_extent_c(
    datatype: Handle,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *true_lb = t.true_lb as MPI_Count;
        *true_extent = (t.true_ub - t.true_lb) as MPI_Count;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_true_extent_x(
    datatype: Handle,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_get_true_extent_c(datatype, true_lb, true_extent) }
}

pub(crate) unsafe fn MPI_Type_set_name(datatype: Handle, type_name: *const c_char) -> c_int {
    let t = dtype!(datatype);
    if type_name.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: C string.
    *t.name.lock() = unsafe { std::ffi::CStr::from_ptr(type_name) }.to_string_lossy().into_owned();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_name(datatype: Handle, type_name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let n = if datatype == MPI_DATATYPE_NULL {
        "MPI_DATATYPE_NULL".to_string()
    } else {
        let t = dtype!(datatype);
        let n = t.name.lock().clone();
        n
    };
    // SAFETY: MPI_MAX_OBJECT_NAME bytes.
    unsafe { put_string(&n, type_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_envelope(
    datatype: Handle,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    let t = dtype!(datatype);
    if !t.large.is_empty() {
        // Only MPI_Type_get_envelope_c can describe it.
        return raise_on(MPI_COMM_WORLD, MPI_ERR_VALUE_TOO_LARGE);
    }
    // SAFETY: output arguments.
    unsafe {
        *num_integers = t.ints.len() as c_int;
        *num_addresses = t.aints.len() as c_int;
        *num_datatypes = t.types.len() as c_int;
        *combiner = t.combiner;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_contents(
    datatype: Handle,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut isize,
    array_of_datatypes: *mut Handle,
) -> c_int {
    let t = dtype!(datatype);
    if t.combiner == MPI_COMBINER_NAMED {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE);
    }
    if (max_integers as usize) < t.ints.len()
        || (max_addresses as usize) < t.aints.len()
        || (max_datatypes as usize) < t.types.len()
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: arrays of the given sizes (MPI contract), checked above.
    unsafe {
        std::ptr::copy_nonoverlapping(t.ints.as_ptr(), array_of_integers, t.ints.len());
        std::ptr::copy_nonoverlapping(t.aints.as_ptr(), array_of_addresses, t.aints.len());
        for (i, &h) in t.types.iter().enumerate() {
            // Derived types come back as new handles to the same type (MPI 5, 5.1.13).
            let out = if (0x200..0x300).contains(&h) {
                h
            } else {
                match t.type_objs.get(i) {
                    Some(d) => TYPES.insert(d.clone()),
                    None => h,
                }
            };
            *array_of_datatypes.add(i) = out;
        }
    }
    MPI_SUCCESS
}

// ---------------------------------------------------------------------------------------
// Pack and unpack

/// Copies `count` elements of `t` at `buf` into `out` (appended), packed.
///
/// # Safety
/// `buf` holds `count` elements of `t` (the program's buffer).
pub(crate) unsafe fn pack_into(buf: *const u8, count: usize, t: &Dtype, out: &mut Vec<u8>) {
    let total = count * t.size;
    if total == 0 {
        return;
    }
    if t.contiguous() {
        // SAFETY: `total` bytes of the program's buffer (function contract).
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(buf, total) });
        return;
    }
    out.reserve(total);
    let start = out.len();
    // SAFETY: `total` bytes reserved past `start`.
    let mut dst = unsafe { out.as_mut_ptr().add(start) };
    let ext = t.extent();
    let mut base = 0isize;
    for _ in 0..count {
        t.segs.walk(base, &mut |off, len| {
            // SAFETY: a run of the program's element (function contract) into the
            // reserved room; the layout's runs add up to `t.size` bytes an element.
            unsafe {
                std::ptr::copy_nonoverlapping(buf.offset(off), dst, len);
                dst = dst.add(len);
            }
            true
        });
        base += ext;
    }
    // SAFETY: the `total` bytes past `start` were written above.
    unsafe { out.set_len(start + total) };
}

/// Copies packed bytes `src` into `count` elements of `t` at `buf`, stopping when `src`
/// runs out.
///
/// # Safety
/// `buf` holds `count` elements of `t`.
pub(crate) unsafe fn unpack_from(src: &[u8], buf: *mut u8, count: usize, t: &Dtype) {
    if t.contiguous() {
        let n = src.len().min(count * t.size);
        // SAFETY: `n` bytes of src into the program's `count` elements.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), buf, n) };
        return;
    }
    let ext = t.extent();
    let mut pos = 0;
    let mut base = 0isize;
    for _ in 0..count {
        if pos >= src.len() {
            return;
        }
        t.segs.walk(base, &mut |off, len| {
            let n = len.min(src.len() - pos);
            // SAFETY: inside the program's buffer (function contract); `n` bytes of src.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(pos), buf.offset(off), n) };
            pos += n;
            pos < src.len()
        });
        base += ext;
    }
}

/// The basic elements in `bytes` packed bytes of `t`; `None` (MPI_UNDEFINED) when they
/// end inside a basic element, as MPICH says. A pair type such as MPI_DOUBLE_INT holds
/// two (its type map is a struct of two basic types).
pub(crate) fn elements(t: &Dtype, bytes: i64) -> Option<i64> {
    let bytes = u64::try_from(bytes).ok()?;
    if t.size == 0 {
        return (bytes == 0).then_some(0);
    }
    let whole = (bytes / t.size as u64).checked_mul(t.segs.elems())?;
    let (part, left) = t.segs.partial_elements(bytes % t.size as u64);
    if left != 0 {
        return None;
    }
    i64::try_from(whole.checked_add(part)?).ok()
}

pub(crate) unsafe fn MPI_Pack(
    inbuf: *const std::ffi::c_void,
    incount: c_int,
    datatype: Handle,
    outbuf: *mut std::ffi::c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: Handle,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: in/out argument.
    let pos = unsafe { *position } as usize;
    let need = incount.max(0) as usize * t.size;
    if pos + need > outsize.max(0) as usize {
        return raise_on(comm, MPI_ERR_TRUNCATE);
    }
    let mut tmp = Vec::new();
    // SAFETY: the program's buffers (MPI contract); room checked above.
    unsafe {
        pack_into(inbuf.cast(), incount.max(0) as usize, &t, &mut tmp);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), outbuf.cast::<u8>().add(pos), tmp.len());
        *position = (pos + tmp.len()) as c_int;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Unpack(
    inbuf: *const std::ffi::c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut std::ffi::c_void,
    outcount: c_int,
    datatype: Handle,
    comm: Handle,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: in/out argument.
    let pos = unsafe { *position } as usize;
    let need = outcount.max(0) as usize * t.size;
    if pos + need > insize.max(0) as usize {
        return raise_on(comm, MPI_ERR_TRUNCATE);
    }
    // SAFETY: the program's buffers (MPI contract); size checked above.
    unsafe {
        let src = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), need);
        unpack_from(src, outbuf.cast(), outcount.max(0) as usize, &t);
        *position = (pos + need) as c_int;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_size(incount: c_int, datatype: Handle, comm: Handle, size: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = (incount.max(0) as usize * t.size) as c_int };
    MPI_SUCCESS
}

/// The whole elements of `t` in `bytes`; `None` (MPI_UNDEFINED) for a part of one.
fn whole_count(t: &Dtype, bytes: i64) -> Option<i64> {
    if t.size == 0 {
        // MPICH: 0 for nothing received, undefined otherwise.
        return (bytes == 0).then_some(0);
    }
    (bytes % t.size as i64 == 0).then(|| bytes / t.size as i64)
}

pub(crate) unsafe fn MPI_Get_count(status: *const MPI_Status, datatype: Handle, count: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    let c = whole_count(&t, bytes).and_then(|c| c_int::try_from(c).ok()).unwrap_or(MPI_UNDEFINED);
    // SAFETY: output argument.
    unsafe { *count = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_count_c(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    // SAFETY: output argument.
    unsafe { *count = whole_count(&t, bytes).unwrap_or(MPI_UNDEFINED as MPI_Count) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements(status: *const MPI_Status, datatype: Handle, count: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    let c = elements(&t, bytes).and_then(|c| c_int::try_from(c).ok()).unwrap_or(MPI_UNDEFINED);
    // SAFETY: output argument.
    unsafe { *count = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements_c(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    // SAFETY: output argument.
    unsafe { *count = elements(&t, bytes).unwrap_or(MPI_UNDEFINED as MPI_Count) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements_x(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Get_elements_c(status, datatype, count) }
}

pub(crate) unsafe fn MPI_Status_set_elements(status: *mut MPI_Status, datatype: Handle, count: c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    unsafe { (*status).set_bytes(count as i64 * t.size as i64) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_elements_c(status: *mut MPI_Status, datatype: Handle, count: MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    unsafe { (*status).set_bytes(count * t.size as i64) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).set_cancelled(flag != 0) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *flag = (*status).cancelled() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_elements_x(status: *mut MPI_Status, datatype: Handle, count: MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Status_set_elements_c(status, datatype, count) }
}

pub(crate) unsafe fn MPI_Status_set_source(status: *mut MPI_Status, source: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_SOURCE = source };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_tag(status: *mut MPI_Status, tag: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_TAG = tag };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_error(status: *mut MPI_Status, error: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_ERROR = error };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_source(status: *const MPI_Status, source: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *source = (*status).MPI_SOURCE };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_tag(status: *const MPI_Status, tag: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *tag = (*status).MPI_TAG };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_error(status: *const MPI_Status, error: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *error = (*status).MPI_ERROR };
    MPI_SUCCESS
}

/// The predefined pair type of `(value, index)` (MPI 4.1 `MPI_Type_get_value_index`).
pub(crate) unsafe fn MPI_Type_get_value_index(value_type: Handle, index_type: Handle, pair_type: *mut Handle) -> c_int {
    let t = match (value_type, index_type) {
        (MPI_FLOAT, MPI_INT) => MPI_FLOAT_INT,
        (MPI_DOUBLE, MPI_INT) => MPI_DOUBLE_INT,
        (MPI_LONG, MPI_INT) => MPI_LONG_INT,
        (MPI_INT, MPI_INT) => MPI_2INT,
        (MPI_SHORT, MPI_INT) => MPI_SHORT_INT,
        (MPI_LONG_DOUBLE, MPI_INT) => MPI_LONG_DOUBLE_INT,
        (MPI_REAL, MPI_REAL) => MPI_2REAL,
        (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION) => MPI_2DOUBLE_PRECISION,
        (MPI_INTEGER, MPI_INTEGER) => MPI_2INTEGER,
        _ if lookup(value_type).is_none() || lookup(index_type).is_none() => {
            return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE)
        }
        // A valid combination with no predefined pair type.
        _ => MPI_DATATYPE_NULL,
    };
    // SAFETY: output argument.
    unsafe { *pair_type = t };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_create_subarray(
    ndims: c_int,
    array_of_sizes: *const c_int,
    array_of_subsizes: *const c_int,
    array_of_starts: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of ndims entries (MPI contract).
    let (sz, sub, st) =
        unsafe { (slice(array_of_sizes, ndims), slice(array_of_subsizes, ndims), slice(array_of_starts, ndims)) };
    let n = sz.len();
    if ndims <= 0
        || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
        || (0..n).any(|i| sz[i] <= 0 || sub[i] <= 0 || st[i] < 0 || sub[i] as i64 + st[i] as i64 > sz[i] as i64)
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // Dimensions from the slowest to the fastest varying, each a run of indices.
    let dims: Vec<usize> = if order == MPI_ORDER_C { (0..n).collect() } else { (0..n).rev().collect() };
    let idx: Vec<Vec<usize>> =
        dims.iter().map(|&k| (st[k] as usize..st[k] as usize + sub[k] as usize).collect()).collect();
    // SAFETY: output argument.
    unsafe {
        array_type(
            &t,
            &dims,
            sz,
            &idx,
            MPI_COMBINER_SUBARRAY,
            subarray_ints(ndims, sz, sub, st, order),
            oldtype,
            newtype,
        )
    }
}

fn subarray_ints(ndims: c_int, sz: &[c_int], sub: &[c_int], st: &[c_int], order: c_int) -> Vec<c_int> {
    let mut ints = vec![ndims];
    ints.extend_from_slice(sz);
    ints.extend_from_slice(sub);
    ints.extend_from_slice(st);
    ints.push(order);
    ints
}

/// A subarray or darray: the elements of `t` at index lists `idx` (by dimension from the
/// slowest varying, `dims[k]` the array dimension of position `k`) of an array of sizes
/// `sizes`, resized to the whole array (lb 0, extent its size).
#[allow(clippy::too_many_arguments)]
unsafe fn array_type(
    t: &Dtype,
    dims: &[usize],
    sizes: &[c_int],
    idx: &[Vec<usize>],
    combiner: c_int,
    ints: Vec<c_int>,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let n = dims.len();
    let mut strides = vec![1isize; n];
    for k in (0..n.saturating_sub(1)).rev() {
        strides[k] = world!(strides[k + 1].checked_mul(sizes[dims[k + 1]] as isize).ok_or(MPI_ERR_COUNT));
    }
    let mut a = Acc::default();
    if idx.iter().all(|v| !v.is_empty()) {
        let Some((l, tb)) = build::grid(t, idx, &strides) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT) };
        a.layout(&l, tb, t);
    }
    let mut d = world!(a.finish(false));
    let total = sizes.iter().try_fold(1isize, |p, &s| p.checked_mul(s as isize));
    let Some(ub) = total.and_then(|n| n.checked_mul(t.extent())) else {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    };
    (d.lb, d.ub, d.marked) = (0, ub, true);
    // SAFETY: output argument.
    unsafe { new_type(d, combiner, Env::ints(ints), vec![oldtype], newtype) }
}

/// The predefined type of a Fortran `SELECTED_*_KIND(p, r)` (MPI_UNDEFINED: any).
fn f90_kind(p: c_int, r: c_int, choices: &[(c_int, c_int, Handle)]) -> Option<Handle> {
    choices.iter().find(|&&(pp, rr, _)| (p == MPI_UNDEFINED || p <= pp) && (r == MPI_UNDEFINED || r <= rr)).map(|c| c.2)
}

/// The type `MPI_Type_create_f90_*` returns for `(combiner, p, r)`: the predefined type
/// `base` under the F90 combiner, one handle per argument set.
unsafe fn f90(combiner: c_int, p: c_int, r: c_int, base: Option<Handle>, newtype: *mut Handle) -> c_int {
    static MADE: parking_lot::Mutex<Vec<(c_int, c_int, c_int, Handle)>> = parking_lot::Mutex::new(Vec::new());
    let Some(base) = base.and_then(lookup) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG) };
    let mut g = MADE.lock();
    let h = match g.iter().find(|e| (e.0, e.1, e.2) == (combiner, p, r)) {
        Some(e) => e.3,
        None => {
            let mut d = Dtype::like(&base);
            d.predefined = true;
            d.committed.store(true, Ordering::Relaxed);
            d.combiner = combiner;
            d.ints = if combiner == MPI_COMBINER_F90_INTEGER { vec![r] } else { vec![p, r] };
            let h = TYPES.insert(Arc::new(d));
            g.push((combiner, p, r, h));
            h
        }
    };
    // SAFETY: output argument.
    unsafe { *newtype = h };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(p, r, &[(6, 37, MPI_REAL4), (15, 307, MPI_REAL8)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_REAL, p, r, b, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(p, r, &[(6, 37, MPI_COMPLEX8), (15, 307, MPI_COMPLEX16)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_COMPLEX, p, r, b, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_f90_integer(r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(0, r, &[(0, 2, MPI_INTEGER1), (0, 4, MPI_INTEGER2), (0, 9, MPI_INTEGER4), (0, 18, MPI_INTEGER8)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_INTEGER, MPI_UNDEFINED, r, b, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of ndims entries (MPI contract).
    let (gs, ds, da, ps) = unsafe {
        (
            slice(array_of_gsizes, ndims),
            slice(array_of_distribs, ndims),
            slice(array_of_dargs, ndims),
            slice(array_of_psizes, ndims),
        )
    };
    let n = gs.len();
    if ndims <= 0
        || rank < 0
        || rank >= size
        || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
        || ps.iter().map(|&p| p as i64).product::<i64>() != size as i64
        || gs.iter().any(|&g| g <= 0)
        || ps.iter().any(|&p| p <= 0)
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // The process grid is row-major whatever the array order.
    let mut coords = vec![0usize; n];
    let mut r = rank as usize;
    for k in (0..n).rev() {
        coords[k] = r % ps[k] as usize;
        r /= ps[k] as usize;
    }
    let mut idx = Vec::with_capacity(n);
    for k in 0..n {
        match build::darray_indices(gs[k] as usize, ds[k], da[k], ps[k] as usize, coords[k]) {
            Ok(v) => idx.push(v),
            Err(e) => return raise_on(MPI_COMM_WORLD, e),
        }
    }
    // Dimensions from the slowest varying to the fastest, each with its indices.
    let dims: Vec<usize> = if order == MPI_ORDER_C { (0..n).collect() } else { (0..n).rev().collect() };
    let idx: Vec<Vec<usize>> = dims.iter().map(|&k| std::mem::take(&mut idx[k])).collect();
    let mut ints = vec![size, rank, ndims];
    for a in [gs, ds, da, ps] {
        ints.extend_from_slice(a);
    }
    ints.push(order);
    // SAFETY: output argument.
    unsafe { array_type(&t, &dims, gs, &idx, MPI_COMBINER_DARRAY, ints, oldtype, newtype) }
}
