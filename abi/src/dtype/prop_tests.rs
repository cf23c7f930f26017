//! Property tests of the datatype engine against a scalar model.
//!
//! Every constructor is exercised with small random arguments (negative strides and
//! displacements included, and constructors nested two deep) through the `MPI_Type_*`
//! entry points. An independent model computes the type map of each type straight from
//! its definition (MPI-4.1 5.1) as a list of (offset, basic size), with its bounds; the
//! tests then check that MPI_Pack copies exactly those bytes in type-map order, that
//! MPI_Unpack puts them back and touches nothing else, and that the size, extent, true
//! extent, pack size and element count queries agree with the model.
//!
//! Bounds follow the rules the library documents (MPI-4.1 5.1.6, 5.1.7): a block of copies
//! of a type spans the copies' `[lb, ub)`; bounds of types made with
//! MPI_Type_create_resized (markers) win over the data; an unmarked struct's extent is
//! padded to its largest basic alignment (the "epsilon" of 5.1.6); subarray and darray
//! span the whole array from 0.

use std::ffi::c_int;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::*;
use crate::types::{Handle, MPI_Count};

/// The predefined types the generated types are built from.
#[derive(Debug, Clone, Copy)]
enum Base {
    Char,
    Short,
    Int,
    Double,
    ShortInt,
    DoubleInt,
    DoubleComplex,
    LongDouble,
}

impl Base {
    fn handle(self) -> Handle {
        match self {
            Base::Char => MPI_CHAR,
            Base::Short => MPI_SHORT,
            Base::Int => MPI_INT,
            Base::Double => MPI_DOUBLE,
            Base::ShortInt => MPI_SHORT_INT,
            Base::DoubleInt => MPI_DOUBLE_INT,
            Base::DoubleComplex => MPI_C_DOUBLE_COMPLEX,
            Base::LongDouble => MPI_LONG_DOUBLE,
        }
    }

    /// The type map, extent and alignment of the C type (x86-64, LP64): the pair types are
    /// the C structs `{short; int}` and `{double; int}` (MPI-4.1 6.9.4).
    fn model(self) -> Model {
        let (map, ext, align): (Vec<(isize, usize)>, isize, usize) = match self {
            Base::Char => (vec![(0, 1)], 1, 1),
            Base::Short => (vec![(0, 2)], 2, 2),
            Base::Int => (vec![(0, 4)], 4, 4),
            Base::Double => (vec![(0, 8)], 8, 8),
            Base::ShortInt => (vec![(0, 2), (4, 4)], 8, 4),
            Base::DoubleInt => (vec![(0, 8), (8, 4)], 16, 8),
            Base::DoubleComplex => (vec![(0, 16)], 16, 8),
            Base::LongDouble => (vec![(0, 16)], 16, 16),
        };
        Model { map, lb: 0, ub: ext, marked: false, align }
    }
}

/// A datatype as the program would construct it.
#[derive(Debug, Clone)]
enum Ty {
    Base(Base),
    Contiguous {
        n: usize,
        old: Box<Ty>,
        large: bool,
    },
    /// MPI_Type_vector (`bytes`: MPI_Type_create_hvector, the stride in bytes).
    Vector {
        count: usize,
        bl: usize,
        stride: isize,
        bytes: bool,
        old: Box<Ty>,
        large: bool,
    },
    /// MPI_Type_indexed (`bytes`: MPI_Type_create_hindexed): `(blocklength, displacement)`.
    Indexed {
        blocks: Vec<(usize, isize)>,
        bytes: bool,
        old: Box<Ty>,
        large: bool,
    },
    /// MPI_Type_create_indexed_block (`bytes`: MPI_Type_create_hindexed_block).
    IndexedBlock {
        bl: usize,
        disps: Vec<isize>,
        bytes: bool,
        old: Box<Ty>,
        large: bool,
    },
    /// MPI_Type_create_struct: `(blocklength, displacement, type)`.
    Struct {
        blocks: Vec<(usize, isize, Ty)>,
        large: bool,
    },
    Resized {
        lb: isize,
        extent: isize,
        old: Box<Ty>,
        large: bool,
    },
    /// `(size, subsize, start)` per dimension.
    Subarray {
        dims: Vec<(usize, usize, usize)>,
        fortran: bool,
        old: Box<Ty>,
        large: bool,
    },
    /// `(gsize, distrib, darg, psize)` per dimension; `rank` of the process grid.
    Darray {
        rank: usize,
        dims: Vec<(usize, c_int, c_int, usize)>,
        fortran: bool,
        old: Box<Ty>,
        large: bool,
    },
    Dup(Box<Ty>),
}

/// What the model knows of a type.
#[derive(Debug, Clone)]
struct Model {
    /// The type map: (offset, bytes) of each basic entry, in order.
    map: Vec<(isize, usize)>,
    lb: isize,
    ub: isize,
    /// Whether the bounds are explicit markers (resized, or made of a resized type).
    marked: bool,
    align: usize,
}

impl Model {
    fn extent(&self) -> isize {
        self.ub - self.lb
    }

    fn size(&self) -> usize {
        self.map.iter().map(|e| e.1).sum()
    }

    /// The true bounds: those of the data alone (MPI-4.1 5.1.8); `(0, 0)` for no data.
    fn true_bounds(&self) -> (isize, isize) {
        let lo = self.map.iter().map(|e| e.0).min();
        let hi = self.map.iter().map(|e| e.0 + e.1 as isize).max();
        lo.zip(hi).unwrap_or((0, 0))
    }
}

/// The general constructor every other one is a case of: blocks of `n` copies of a type
/// at a byte displacement, the copies one extent apart (MPI-4.1 5.1.2, struct).
fn blocks(items: &[(isize, usize, &Model)], is_struct: bool) -> Model {
    fn widen(acc: &mut Option<(isize, isize)>, b: (isize, isize)) {
        *acc = Some(acc.map_or(b, |(lo, hi)| (lo.min(b.0), hi.max(b.1))));
    }
    let mut map = Vec::new();
    let (mut all, mut marked, mut align) = (None, None, 1);
    for &(d, n, m) in items {
        for k in 0..n {
            let at = d + k as isize * m.extent();
            map.extend(m.map.iter().map(|&(o, s)| (at + o, s)));
            widen(&mut all, (at + m.lb, at + m.ub));
            if m.marked {
                widen(&mut marked, (at + m.lb, at + m.ub));
            }
        }
        if n > 0 {
            align = align.max(m.align);
        }
    }
    let (lb, mut ub) = marked.or(all).unwrap_or((0, 0));
    if is_struct && marked.is_none() {
        let a = align as isize;
        while (ub - lb) % a != 0 {
            ub += 1;
        }
    }
    Model { map, lb, ub, marked: marked.is_some(), align }
}

/// An array of `old` of `sizes` (C or Fortran order) with the elements at index lists
/// `idx` (one per dimension, increasing), in type-map order (the fastest dimension last
/// in C, first in Fortran); bounds 0 and the whole array (MPI-4.1 5.1.3, 5.1.4).
fn array(old: &Model, sizes: &[usize], idx: &[Vec<usize>], fortran: bool) -> Model {
    let n = sizes.len();
    // Dimensions from the slowest varying to the fastest, and each one's stride.
    let dims: Vec<usize> = if fortran { (0..n).rev().collect() } else { (0..n).collect() };
    let stride = |d: usize| -> usize {
        if fortran {
            sizes[..d].iter().product()
        } else {
            sizes[d + 1..].iter().product()
        }
    };
    let mut linear = vec![0usize];
    for &d in &dims {
        linear = linear.iter().flat_map(|&l| idx[d].iter().map(move |&i| l + i * stride(d))).collect();
    }
    let ext = old.extent();
    let map = linear.iter().flat_map(|&l| old.map.iter().map(move |&(o, s)| (l as isize * ext + o, s))).collect();
    let total: usize = sizes.iter().product();
    Model { map, lb: 0, ub: total as isize * ext, marked: true, align: old.align }
}

/// The indices of one dimension of `g` that grid coordinate `c` of `p` owns (MPI-4.1
/// 5.1.4): a block of `darg` (default `ceil(g / p)`), or every `p`-th run of `darg`
/// (default 1), or all of them.
fn owned(g: usize, distrib: c_int, darg: c_int, p: usize, c: usize) -> Vec<usize> {
    match distrib {
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG { g.div_ceil(p) } else { darg as usize };
            (0..g).filter(|&i| i / b == c).collect()
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let k = if darg == MPI_DISTRIBUTE_DFLT_DARG { 1 } else { darg as usize };
            (0..g).filter(|&i| (i / k) % p == c).collect()
        }
        _ => (0..g).collect(),
    }
}

fn model(ty: &Ty) -> Model {
    match ty {
        Ty::Base(b) => b.model(),
        Ty::Contiguous { n, old, .. } => blocks(&[(0, *n, &model(old))], false),
        Ty::Vector { count, bl, stride, bytes, old, .. } => {
            let o = model(old);
            let step = if *bytes { *stride } else { stride * o.extent() };
            let items: Vec<_> = (0..*count).map(|j| (j as isize * step, *bl, &o)).collect();
            blocks(&items, false)
        }
        Ty::Indexed { blocks: b, bytes, old, .. } => {
            let o = model(old);
            let unit = if *bytes { 1 } else { o.extent() };
            let items: Vec<_> = b.iter().map(|&(n, d)| (d * unit, n, &o)).collect();
            blocks(&items, false)
        }
        Ty::IndexedBlock { bl, disps, bytes, old, .. } => {
            let o = model(old);
            let unit = if *bytes { 1 } else { o.extent() };
            let items: Vec<_> = disps.iter().map(|&d| (d * unit, *bl, &o)).collect();
            blocks(&items, false)
        }
        Ty::Struct { blocks: b, .. } => {
            let ms: Vec<Model> = b.iter().map(|(_, _, t)| model(t)).collect();
            let items: Vec<_> = b.iter().zip(&ms).map(|(&(n, d, _), m)| (d, n, m)).collect();
            blocks(&items, true)
        }
        Ty::Resized { lb, extent, old, .. } => Model { lb: *lb, ub: lb + extent, marked: true, ..model(old) },
        Ty::Subarray { dims, fortran, old, .. } => {
            let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let idx: Vec<Vec<usize>> = dims.iter().map(|&(_, sub, st)| (st..st + sub).collect()).collect();
            array(&model(old), &sizes, &idx, *fortran)
        }
        Ty::Darray { rank, dims, fortran, old, .. } => {
            // The process grid is row-major whatever the array's order.
            let mut coords = vec![0; dims.len()];
            let mut r = *rank;
            for (c, d) in coords.iter_mut().zip(dims).rev() {
                *c = r % d.3;
                r /= d.3;
            }
            let sizes: Vec<usize> = dims.iter().map(|d| d.0).collect();
            let idx: Vec<Vec<usize>> =
                dims.iter().zip(&coords).map(|(&(g, ds, da, p), &c)| owned(g, ds, da, p, c)).collect();
            array(&model(old), &sizes, &idx, *fortran)
        }
        Ty::Dup(old) => model(old),
    }
}

// ---------------------------------------------------------------------------------------
// Building the types through the entry points

fn free(h: Handle) -> Result<(), TestCaseError> {
    if !(0x200..0x300).contains(&h) {
        let mut h = h;
        // SAFETY: in/out argument.
        prop_assert_eq!(unsafe { MPI_Type_free(&mut h) }, MPI_SUCCESS);
        prop_assert_eq!(h, MPI_DATATYPE_NULL);
    }
    Ok(())
}

fn ints<T: Copy, U: TryFrom<T>>(v: &[T]) -> Vec<U>
where
    U::Error: std::fmt::Debug,
{
    v.iter().map(|&x| U::try_from(x).expect("small")).collect()
}

/// Makes `ty` with the library's constructors; the types it is made of are freed as soon
/// as it exists (a derived type keeps what it was built from, MPI-4.1 5.1.10).
fn build(ty: &Ty) -> Result<Handle, TestCaseError> {
    let mut out: Handle = MPI_DATATYPE_NULL;
    let o = &mut out;
    // SAFETY (every call below): arrays of the lengths passed, and an output argument.
    let (rc, made) = unsafe {
        match ty {
            Ty::Base(b) => return Ok(b.handle()),
            Ty::Contiguous { n, old, large } => {
                let t = build(old)?;
                let rc = if *large {
                    MPI_Type_contiguous_c(*n as MPI_Count, t, o)
                } else {
                    MPI_Type_contiguous(*n as c_int, t, o)
                };
                (rc, vec![t])
            }
            Ty::Vector { count, bl, stride, bytes, old, large } => {
                let t = build(old)?;
                let (c, b, s) = (*count as MPI_Count, *bl as MPI_Count, *stride as MPI_Count);
                let rc = match (bytes, large) {
                    (false, false) => MPI_Type_vector(c as c_int, b as c_int, s as c_int, t, o),
                    (false, true) => MPI_Type_vector_c(c, b, s, t, o),
                    (true, false) => MPI_Type_create_hvector(c as c_int, b as c_int, *stride, t, o),
                    (true, true) => MPI_Type_create_hvector_c(c, b, s, t, o),
                };
                (rc, vec![t])
            }
            Ty::Indexed { blocks, bytes, old, large } => {
                let t = build(old)?;
                let n = blocks.len();
                let bl: Vec<usize> = blocks.iter().map(|b| b.0).collect();
                let dp: Vec<isize> = blocks.iter().map(|b| b.1).collect();
                let (bl_c, dp_c): (Vec<MPI_Count>, Vec<MPI_Count>) = (ints(&bl), ints(&dp));
                let bl_i: Vec<c_int> = ints(&bl);
                let rc = match (bytes, large) {
                    (false, false) => {
                        let dp_i: Vec<c_int> = ints(&dp);
                        MPI_Type_indexed(n as c_int, bl_i.as_ptr(), dp_i.as_ptr(), t, o)
                    }
                    (false, true) => MPI_Type_indexed_c(n as MPI_Count, bl_c.as_ptr(), dp_c.as_ptr(), t, o),
                    (true, false) => MPI_Type_create_hindexed(n as c_int, bl_i.as_ptr(), dp.as_ptr(), t, o),
                    (true, true) => MPI_Type_create_hindexed_c(n as MPI_Count, bl_c.as_ptr(), dp_c.as_ptr(), t, o),
                };
                (rc, vec![t])
            }
            Ty::IndexedBlock { bl, disps, bytes, old, large } => {
                let t = build(old)?;
                let n = disps.len();
                let dp_c: Vec<MPI_Count> = ints(disps);
                let rc = match (bytes, large) {
                    (false, false) => {
                        let dp_i: Vec<c_int> = ints(disps);
                        MPI_Type_create_indexed_block(n as c_int, *bl as c_int, dp_i.as_ptr(), t, o)
                    }
                    (false, true) => {
                        MPI_Type_create_indexed_block_c(n as MPI_Count, *bl as MPI_Count, dp_c.as_ptr(), t, o)
                    }
                    (true, false) => MPI_Type_create_hindexed_block(n as c_int, *bl as c_int, disps.as_ptr(), t, o),
                    (true, true) => {
                        MPI_Type_create_hindexed_block_c(n as MPI_Count, *bl as MPI_Count, dp_c.as_ptr(), t, o)
                    }
                };
                (rc, vec![t])
            }
            Ty::Struct { blocks, large } => {
                let types = blocks.iter().map(|b| build(&b.2)).collect::<Result<Vec<_>, _>>()?;
                let n = blocks.len();
                let bl: Vec<usize> = blocks.iter().map(|b| b.0).collect();
                let dp: Vec<isize> = blocks.iter().map(|b| b.1).collect();
                let rc = if *large {
                    let (bl_c, dp_c): (Vec<MPI_Count>, Vec<MPI_Count>) = (ints(&bl), ints(&dp));
                    MPI_Type_create_struct_c(n as MPI_Count, bl_c.as_ptr(), dp_c.as_ptr(), types.as_ptr(), o)
                } else {
                    let bl_i: Vec<c_int> = ints(&bl);
                    MPI_Type_create_struct(n as c_int, bl_i.as_ptr(), dp.as_ptr(), types.as_ptr(), o)
                };
                (rc, types)
            }
            Ty::Resized { lb, extent, old, large } => {
                let t = build(old)?;
                let rc = if *large {
                    MPI_Type_create_resized_c(t, *lb as MPI_Count, *extent as MPI_Count, o)
                } else {
                    MPI_Type_create_resized(t, *lb, *extent, o)
                };
                (rc, vec![t])
            }
            Ty::Subarray { dims, fortran, old, large } => {
                let t = build(old)?;
                let order = if *fortran { MPI_ORDER_FORTRAN } else { MPI_ORDER_C };
                let n = dims.len() as c_int;
                let cols: [Vec<usize>; 3] = [
                    dims.iter().map(|d| d.0).collect(),
                    dims.iter().map(|d| d.1).collect(),
                    dims.iter().map(|d| d.2).collect(),
                ];
                let rc = if *large {
                    let [a, b, c]: [Vec<MPI_Count>; 3] = cols.map(|v| ints(&v));
                    MPI_Type_create_subarray_c(n, a.as_ptr(), b.as_ptr(), c.as_ptr(), order, t, o)
                } else {
                    let [a, b, c]: [Vec<c_int>; 3] = cols.map(|v| ints(&v));
                    MPI_Type_create_subarray(n, a.as_ptr(), b.as_ptr(), c.as_ptr(), order, t, o)
                };
                (rc, vec![t])
            }
            Ty::Darray { rank, dims, fortran, old, large } => {
                let t = build(old)?;
                let order = if *fortran { MPI_ORDER_FORTRAN } else { MPI_ORDER_C };
                let n = dims.len() as c_int;
                let size: usize = dims.iter().map(|d| d.3).product();
                let gs: Vec<usize> = dims.iter().map(|d| d.0).collect();
                let ds: Vec<c_int> = dims.iter().map(|d| d.1).collect();
                let da: Vec<c_int> = dims.iter().map(|d| d.2).collect();
                let ps: Vec<c_int> = dims.iter().map(|d| d.3 as c_int).collect();
                let (size, rank) = (size as c_int, *rank as c_int);
                let rc = if *large {
                    let g: Vec<MPI_Count> = ints(&gs);
                    let (g, d, a, p) = (g.as_ptr(), ds.as_ptr(), da.as_ptr(), ps.as_ptr());
                    MPI_Type_create_darray_c(size, rank, n, g, d, a, p, order, t, o)
                } else {
                    let g: Vec<c_int> = ints(&gs);
                    let (g, d, a, p) = (g.as_ptr(), ds.as_ptr(), da.as_ptr(), ps.as_ptr());
                    MPI_Type_create_darray(size, rank, n, g, d, a, p, order, t, o)
                };
                (rc, vec![t])
            }
            Ty::Dup(old) => {
                let t = build(old)?;
                (MPI_Type_dup(t, o), vec![t])
            }
        }
    };
    prop_assert_eq!(rc, MPI_SUCCESS, "constructing {:?}", ty);
    for t in made {
        free(t)?;
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// The checks

/// `n` pseudo-random bytes (splitmix64).
fn noise(mut seed: u64, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Room around the data that pack must not read into and unpack must not write.
const PAD: usize = 24;

/// Builds `ty` and checks the queries, MPI_Pack and MPI_Unpack of `count` elements (at
/// position `pos0` of the pack buffer) against the model.
fn check(ty: &Ty, count: usize, seed: u64, pos0: usize) -> Result<(), TestCaseError> {
    let m = model(ty);
    let h = build(ty)?;
    // SAFETY: in/out argument.
    prop_assert_eq!(unsafe { MPI_Type_commit(&mut { h }) }, MPI_SUCCESS);
    let r = check_type(h, &m, count, seed, pos0);
    free(h)?;
    r
}

fn check_type(h: Handle, m: &Model, count: usize, seed: u64, pos0: usize) -> Result<(), TestCaseError> {
    let size = m.size();
    let (tlb, tub) = m.true_bounds();
    let (mut s, mut lb, mut ext, mut tlb_got, mut text_got, mut ps) = (0, 0, 0, 0, 0, 0);
    // SAFETY: output arguments.
    unsafe {
        prop_assert_eq!(MPI_Type_size(h, &mut s), MPI_SUCCESS);
        prop_assert_eq!(MPI_Type_get_extent(h, &mut lb, &mut ext), MPI_SUCCESS);
        prop_assert_eq!(MPI_Type_get_true_extent(h, &mut tlb_got, &mut text_got), MPI_SUCCESS);
        prop_assert_eq!(MPI_Pack_size(count as c_int, h, MPI_COMM_WORLD, &mut ps), MPI_SUCCESS);
    }
    prop_assert_eq!(s as usize, size, "MPI_Type_size");
    prop_assert_eq!((lb, ext), (m.lb, m.extent()), "MPI_Type_get_extent (lb, extent)");
    prop_assert_eq!((tlb_got, text_got), (tlb, tub - tlb), "MPI_Type_get_true_extent");
    prop_assert!(ps as usize >= count * size, "MPI_Pack_size {} < {}", ps, count * size);
    let Some(t) = lookup(h) else { return Err(TestCaseError::fail("no type behind the handle")) };
    let want = (count * m.map.len()) as i64;
    prop_assert_eq!(elements(&t, (count * size) as i64), Some(want), "basic elements");

    // The program's buffer: `count` elements one extent apart, with room around them.
    let runs: Vec<(isize, usize)> = (0..count as isize)
        .flat_map(|i| m.map.iter().map(move |&(o, s)| (i * m.extent() + o, s)))
        .filter(|r| r.1 > 0)
        .collect();
    let lo = runs.iter().map(|r| r.0).min().unwrap_or(0).min(0);
    let hi = runs.iter().map(|r| r.0 + r.1 as isize).max().unwrap_or(0).max(0);
    let len = (hi - lo) as usize + 2 * PAD;
    let origin = PAD as isize - lo;
    let at = |off: isize| (origin + off) as usize;
    let src = noise(seed, len);
    let reference: Vec<u8> = runs.iter().flat_map(|&(o, s)| src[at(o)..at(o) + s].iter().copied()).collect();
    prop_assert_eq!(reference.len(), count * size);

    // MPI_Pack at position pos0 of a buffer of just the room MPI_Pack_size asked for.
    let outsize = pos0 + ps as usize;
    let mut packed = vec![0xa5u8; outsize];
    let mut pos = pos0 as c_int;
    // SAFETY: `origin` is inside `src` and the type's data within it; `outsize` bytes.
    let rc = unsafe {
        MPI_Pack(
            src.as_ptr().offset(origin).cast(),
            count as c_int,
            h,
            packed.as_mut_ptr().cast(),
            outsize as c_int,
            &mut pos,
            MPI_COMM_WORLD,
        )
    };
    prop_assert_eq!(rc, MPI_SUCCESS);
    prop_assert_eq!(pos as usize, pos0 + count * size, "position after MPI_Pack");
    prop_assert!(packed[..pos0].iter().all(|&b| b == 0xa5), "MPI_Pack wrote before its position");
    prop_assert!(packed[pos as usize..].iter().all(|&b| b == 0xa5), "MPI_Pack wrote past its data");
    prop_assert_eq!(&packed[pos0..pos as usize], &reference[..], "packed bytes against the type map");

    // MPI_Unpack into a buffer of other bytes.
    let mut dst = noise(!seed, len);
    let before = dst.clone();
    let mut pos = pos0 as c_int;
    // SAFETY: as above.
    let rc = unsafe {
        MPI_Unpack(
            packed.as_ptr().cast(),
            outsize as c_int,
            &mut pos,
            dst.as_mut_ptr().offset(origin).cast(),
            count as c_int,
            h,
            MPI_COMM_WORLD,
        )
    };
    prop_assert_eq!(rc, MPI_SUCCESS);
    prop_assert_eq!(pos as usize, pos0 + count * size, "position after MPI_Unpack");
    let mut covered = vec![0u32; len];
    for &(o, s) in &runs {
        for c in &mut covered[at(o)..at(o) + s] {
            *c += 1;
        }
    }
    // A receive whose type map has overlapping entries is erroneous (MPI-4.1 5.1): then only
    // the bytes it does not cover are checked.
    let overlap = covered.iter().any(|&c| c > 1);
    for i in 0..len {
        if covered[i] == 0 {
            prop_assert_eq!(dst[i], before[i], "MPI_Unpack wrote byte {} outside the type map", i as isize - origin);
        } else if !overlap {
            prop_assert_eq!(dst[i], src[i], "byte {} not round-tripped", i as isize - origin);
        }
    }
    if !overlap && !runs.is_empty() {
        STATS.with(|s| s.set((s.get().0 + 1, s.get().1)));
    }
    STATS.with(|s| s.set((s.get().0, s.get().1 + 1)));
    Ok(())
}

thread_local! {
    /// (cases with data whose type map does not overlap, so that unpack was checked byte
    /// for byte; all cases) of the running property.
    static STATS: std::cell::Cell<(usize, usize)> = const { std::cell::Cell::new((0, 0)) };
}

// ---------------------------------------------------------------------------------------
// Strategies

fn base() -> impl Strategy<Value = Ty> {
    prop_oneof![
        Just(Base::Char),
        Just(Base::Short),
        Just(Base::Int),
        Just(Base::Double),
        Just(Base::ShortInt),
        Just(Base::DoubleInt),
        Just(Base::DoubleComplex),
        Just(Base::LongDouble),
    ]
    .prop_map(Ty::Base)
}

#[derive(Debug, Clone, Copy)]
enum Ctor {
    Contiguous,
    Vector,
    Hvector,
    Indexed,
    Hindexed,
    IndexedBlock,
    HindexedBlock,
    Struct,
    Resized,
    Subarray,
    Darray,
    Dup,
}

const CTORS: [Ctor; 12] = [
    Ctor::Contiguous,
    Ctor::Vector,
    Ctor::Hvector,
    Ctor::Indexed,
    Ctor::Hindexed,
    Ctor::IndexedBlock,
    Ctor::HindexedBlock,
    Ctor::Struct,
    Ctor::Resized,
    Ctor::Subarray,
    Ctor::Darray,
    Ctor::Dup,
];

/// One dimension of a darray: `(gsize, distrib, darg, psize)`.
fn darray_dim() -> impl Strategy<Value = (usize, c_int, c_int, usize)> {
    (1usize..=7, 1usize..=3, 0..3, 0..4).prop_map(|(g, p, kind, a)| {
        let a = a as c_int;
        match kind {
            // Undistributed: a grid of one process in this dimension.
            0 => (g, MPI_DISTRIBUTE_NONE, MPI_DISTRIBUTE_DFLT_DARG, 1),
            // Blocks: the default, or one at least ceil(g / p) long.
            1 if a == 0 => (g, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_DFLT_DARG, p),
            1 => (g, MPI_DISTRIBUTE_BLOCK, (g.div_ceil(p) as c_int) + a - 1, p),
            // Cyclic: the default (1), or blocks of 1 to 3.
            _ if a == 0 => (g, MPI_DISTRIBUTE_CYCLIC, MPI_DISTRIBUTE_DFLT_DARG, p),
            _ => (g, MPI_DISTRIBUTE_CYCLIC, a, p),
        }
    })
}

/// A count or blocklength up to `max`, now and then 0.
fn n(max: usize) -> BoxedStrategy<usize> {
    prop_oneof![1 => Just(0usize), 9 => 1..=max].boxed()
}

/// A list of one to `max` values, now and then empty.
fn list<S: Strategy + 'static>(s: S, max: usize) -> BoxedStrategy<Vec<S::Value>> {
    (prop::collection::vec(s, 1..=max), prop::bool::weighted(0.1))
        .prop_map(|(v, empty)| if empty { Vec::new() } else { v })
        .boxed()
}

/// The bytes the data of `bl` copies of `o` one extent apart spans (at least 1).
fn span(o: &Model, bl: usize) -> isize {
    let (lo, hi) = o.true_bounds();
    ((hi - lo) + (bl.max(1) as isize - 1) * o.extent().abs()).max(1)
}

/// `bytes` in extents of `o`, rounded up (1 where the extent is not positive).
fn in_extents(bytes: isize, o: &Model) -> isize {
    let e = o.extent();
    if e > 0 {
        (bytes + e - 1) / e
    } else {
        1
    }
}

/// How strides and displacements are drawn: mostly spaced by the blocks' span (plus a
/// jitter), so that the type map does not overlap and unpack can be checked byte for
/// byte; else small raw values, overlaps included.
#[derive(Debug, Clone)]
struct Spacing {
    spaced: bool,
    /// Distinct block slots in a random order (negative ones included).
    slots: Vec<isize>,
    jitter: isize,
    negative: bool,
}

fn spacing() -> impl Strategy<Value = Spacing> {
    (prop::bool::weighted(0.85), Just((-4isize..=4).collect::<Vec<_>>()).prop_shuffle(), 0isize..=3, any::<bool>())
        .prop_map(|(spaced, slots, jitter, negative)| Spacing { spaced, slots, jitter, negative })
}

impl Spacing {
    /// A stride of `step` units past the span, downwards when `negative`.
    fn stride(&self, step: isize) -> isize {
        let s = step + self.jitter;
        if self.negative {
            -s
        } else {
            s
        }
    }
}

/// Types made by constructor `c` of types from `inner`.
fn ctor(c: Ctor, inner: BoxedStrategy<Ty>) -> BoxedStrategy<Ty> {
    let b = || inner.clone().prop_map(Box::new);
    let large = any::<bool>;
    match c {
        Ctor::Contiguous => (n(4), b(), large()).prop_map(|(n, old, large)| Ty::Contiguous { n, old, large }).boxed(),
        Ctor::Vector | Ctor::Hvector => {
            let bytes = matches!(c, Ctor::Hvector);
            let raw = if bytes { -40isize..=40 } else { -4isize..=4 };
            (n(3), n(3), raw, spacing(), b(), large())
                .prop_map(move |(count, bl, raw, sp, old, large)| {
                    let o = model(&old);
                    let stride = match (sp.spaced, bytes) {
                        (false, _) => raw,
                        (true, true) => sp.stride(span(&o, bl)),
                        (true, false) => sp.stride(in_extents(span(&o, bl), &o)),
                    };
                    Ty::Vector { count, bl, stride, bytes, old, large }
                })
                .boxed()
        }
        Ctor::Indexed | Ctor::Hindexed => {
            let bytes = matches!(c, Ctor::Hindexed);
            let raw = if bytes { -40isize..=40 } else { -6isize..=6 };
            (list((n(3), raw), 4), spacing(), b(), large())
                .prop_map(move |(mut blocks, sp, old, large)| {
                    if sp.spaced {
                        let o = model(&old);
                        let widest = span(&o, blocks.iter().map(|b| b.0).max().unwrap_or(1));
                        let unit = if bytes { widest } else { in_extents(widest, &o) } + sp.jitter;
                        for (b, slot) in blocks.iter_mut().zip(&sp.slots) {
                            b.1 = slot * unit;
                        }
                    }
                    Ty::Indexed { blocks, bytes, old, large }
                })
                .boxed()
        }
        Ctor::IndexedBlock | Ctor::HindexedBlock => {
            let bytes = matches!(c, Ctor::HindexedBlock);
            let raw = if bytes { -40isize..=40 } else { -6isize..=6 };
            (n(3), list(raw, 4), spacing(), b(), large())
                .prop_map(move |(bl, mut disps, sp, old, large)| {
                    if sp.spaced {
                        let o = model(&old);
                        let unit = if bytes { span(&o, bl) } else { in_extents(span(&o, bl), &o) } + sp.jitter;
                        for (d, slot) in disps.iter_mut().zip(&sp.slots) {
                            *d = slot * unit;
                        }
                    }
                    Ty::IndexedBlock { bl, disps, bytes, old, large }
                })
                .boxed()
        }
        Ctor::Struct => (list((n(3), -40isize..=40, inner.clone()), 3), spacing(), large())
            .prop_map(|(mut blocks, sp, large)| {
                if sp.spaced {
                    let unit = blocks.iter().map(|b| span(&model(&b.2), b.0)).max().unwrap_or(1) + sp.jitter;
                    for (b, slot) in blocks.iter_mut().zip(&sp.slots) {
                        b.1 = slot * unit;
                    }
                }
                Ty::Struct { blocks, large }
            })
            .boxed(),
        Ctor::Resized => (-24isize..=24, -24isize..=48, spacing(), b(), large())
            .prop_map(|(lb, raw, sp, old, large)| {
                // Spaced: an extent past the data, up or down, so that copies do not overlap.
                let extent = if sp.spaced { sp.stride(span(&model(&old), 1)) } else { raw };
                Ty::Resized { lb, extent, old, large }
            })
            .boxed(),
        Ctor::Subarray => {
            let dim = (1usize..=4)
                .prop_flat_map(|s| (Just(s), 1..=s))
                .prop_flat_map(|(s, sub)| (Just(s), Just(sub), 0..=s - sub));
            (prop::collection::vec(dim, 1..=3), any::<bool>(), b(), large())
                .prop_map(|(dims, fortran, old, large)| Ty::Subarray { dims, fortran, old, large })
                .boxed()
        }
        Ctor::Darray => (prop::collection::vec(darray_dim(), 1..=3), any::<bool>(), b(), large())
            .prop_flat_map(|(dims, fortran, old, large)| {
                let size: usize = dims.iter().map(|d| d.3).product();
                (0..size).prop_map(move |rank| Ty::Darray {
                    rank,
                    dims: dims.clone(),
                    fortran,
                    old: old.clone(),
                    large,
                })
            })
            .boxed(),
        Ctor::Dup => b().prop_map(Ty::Dup).boxed(),
    }
}

/// A predefined type or one constructor over one (the inner level of a depth-2 type).
fn inner() -> BoxedStrategy<Ty> {
    let one: Vec<BoxedStrategy<Ty>> = CTORS.iter().map(|&c| ctor(c, base().boxed())).collect();
    prop_oneof![1 => base(), 3 => proptest::strategy::Union::new(one)].boxed()
}

/// Types made by `c`, nested two deep, with an element count, a seed for the data and a
/// starting pack position.
fn case(c: Ctor) -> impl Strategy<Value = (Ty, usize, u64, usize)> {
    (ctor(c, inner()), n(3), any::<u64>(), 0usize..=5)
}

fn run(c: Ctor) {
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64));
    STATS.with(|s| s.set((0, 0)));
    let r = runner.run(&case(c), |(ty, count, seed, pos0)| check(&ty, count, seed, pos0));
    if let Err(e) = r {
        panic!("{c:?}: {e}");
    }
    let (exact, all) = STATS.with(|s| s.get());
    // Most cases must have a type map without overlap, so that unpack is checked whole.
    assert!(exact * 4 >= all, "{c:?}: only {exact} of {all} cases were checked byte for byte");
}

#[test]
fn contiguous_packs_as_its_type_map() {
    run(Ctor::Contiguous);
}

#[test]
fn vector_packs_as_its_type_map() {
    run(Ctor::Vector);
}

#[test]
fn hvector_packs_as_its_type_map() {
    run(Ctor::Hvector);
}

#[test]
fn indexed_packs_as_its_type_map() {
    run(Ctor::Indexed);
}

#[test]
fn hindexed_packs_as_its_type_map() {
    run(Ctor::Hindexed);
}

#[test]
fn indexed_block_packs_as_its_type_map() {
    run(Ctor::IndexedBlock);
}

#[test]
fn hindexed_block_packs_as_its_type_map() {
    run(Ctor::HindexedBlock);
}

#[test]
fn struct_packs_as_its_type_map() {
    run(Ctor::Struct);
}

#[test]
fn resized_packs_as_its_type_map() {
    run(Ctor::Resized);
}

#[test]
fn subarray_packs_as_its_type_map() {
    run(Ctor::Subarray);
}

#[test]
fn darray_packs_as_its_type_map() {
    run(Ctor::Darray);
}

#[test]
fn dup_packs_as_its_type_map() {
    run(Ctor::Dup);
}
