//! A derived datatype from its constituents: the layout of its blocks, its bounds (MPI-4.1
//! 5.1.2, 5.1.6, 5.1.7) and what a reduction sees in it.
//!
//! Every constructor is blocks of `n` copies of a type, the copies one extent apart, at a
//! displacement, and a vector is `count` such blocks at a stride. The bounds of a block are
//! the min/max over its copies: with a negative extent the copies go downwards. A type made
//! with MPI_Type_create_resized carries explicit bound markers, and a type built from it
//! too: then its bounds are those of the markers only, and a struct is not padded.

use std::ffi::c_int;

use super::layout::{Builder, Layout};
use super::predef::Basic;
use super::Dtype;
use crate::consts::*;

/// `(lo, hi)` of one copy spread over `n` copies `stride` bytes apart; `None` on
/// overflow.
pub(crate) fn spread(b: (isize, isize), n: usize, stride: isize) -> Option<(isize, isize)> {
    let span = isize::try_from(n.saturating_sub(1)).ok()?.checked_mul(stride)?;
    Some((b.0.checked_add(span.min(0))?, b.1.checked_add(span.max(0))?))
}

fn shift(b: (isize, isize), d: isize) -> Option<(isize, isize)> {
    Some((b.0.checked_add(d)?, b.1.checked_add(d)?))
}

fn widen(acc: &mut Option<(isize, isize)>, b: (isize, isize)) {
    *acc = Some(match *acc {
        None => b,
        Some((lo, hi)) => (lo.min(b.0), hi.max(b.1)),
    });
}

/// The bounds, true bounds and layout of a derived type, accumulated block by block.
#[derive(Default)]
pub(crate) struct Acc {
    layout: Builder,
    bounds: Option<(isize, isize)>,
    marked: Option<(isize, isize)>,
    true_bounds: Option<(isize, isize)>,
    basic: Option<Option<Basic>>,
    align: usize,
    overflow: bool,
}

impl Acc {
    /// Adds `n` copies of `t` at byte displacement `d`, one extent apart.
    pub(crate) fn block(&mut self, n: usize, d: isize, t: &Dtype) {
        self.blocks(1, 0, n, d, t);
    }

    /// Adds `count` blocks `stride` bytes apart from byte displacement `d`, each of `bl`
    /// copies of `t` one extent apart (a vector).
    pub(crate) fn blocks(&mut self, count: usize, stride: isize, bl: usize, d: isize, t: &Dtype) {
        if count == 0 || bl == 0 {
            return;
        }
        let ext = t.extent();
        let one = if bl == 1 {
            t.segs.clone()
        } else {
            let mut b = Builder::default();
            b.copies(0, bl, ext, &t.segs);
            match b.finish() {
                Some(l) => l,
                None => {
                    self.overflow = true;
                    return;
                }
            }
        };
        self.layout.copies(d, count, stride, &one);
        let place =
            |b: (isize, isize)| spread(b, bl, ext).and_then(|b| spread(b, count, stride)).and_then(|b| shift(b, d));
        match place((t.lb, t.ub)) {
            Some(b) => {
                widen(&mut self.bounds, b);
                if t.marked {
                    widen(&mut self.marked, b);
                }
            }
            None => self.overflow = true,
        }
        if t.size > 0 {
            match place((t.true_lb, t.true_ub)) {
                Some(b) => widen(&mut self.true_bounds, b),
                None => self.overflow = true,
            }
        }
        self.basic = Some(match self.basic {
            None => t.basic,
            Some(b) if b == t.basic => b,
            Some(_) => None,
        });
        self.align = self.align.max(t.align);
    }

    /// Adds a layout made elsewhere (subarray, darray), its true bounds and its basic
    /// type's `t`.
    pub(crate) fn layout(&mut self, l: &Layout, true_bounds: (isize, isize), t: &Dtype) {
        self.layout.copies(0, 1, 0, l);
        if l.size() > 0 {
            widen(&mut self.true_bounds, true_bounds);
        }
        self.basic = Some(t.basic);
        self.align = self.align.max(t.align);
    }

    /// The type (without its envelope); `MPI_ERR_COUNT` when a size or bound overflows.
    /// A struct's extent is padded to its largest alignment, as C pads a struct, unless
    /// its bounds come from markers.
    pub(crate) fn finish(self, is_struct: bool) -> Result<Dtype, c_int> {
        let segs = self.layout.finish().filter(|_| !self.overflow).ok_or(MPI_ERR_COUNT)?;
        let (lb, mut ub) = self.marked.or(self.bounds).unwrap_or((0, 0));
        let (true_lb, true_ub) = self.true_bounds.unwrap_or((0, 0));
        let align = self.align.max(1);
        if is_struct && self.marked.is_none() {
            let ext = ub - lb;
            let a = align as isize;
            if ext.rem_euclid(a) != 0 {
                ub += a - ext.rem_euclid(a);
            }
        }
        let mut d = Dtype::derived(segs, self.basic.flatten(), align);
        (d.lb, d.ub, d.true_lb, d.true_ub) = (lb, ub, true_lb, true_ub);
        d.marked = self.marked.is_some();
        Ok(d)
    }
}

/// The layout of an n-dimensional array of `t` selected by index lists, one per
/// dimension from the slowest varying to the fastest, `strides[k]` elements of `t` apart in
/// dimension `k`; and its true bounds. Consecutive indices become one strided part, so the
/// description grows with the number of index runs, not with the array.
pub(crate) fn grid(t: &Dtype, idx: &[Vec<usize>], strides: &[isize]) -> Option<(Layout, (isize, isize))> {
    let ext = t.extent();
    let mut l = t.segs.clone();
    let mut tb = (t.true_lb, t.true_ub);
    for k in (0..idx.len()).rev() {
        let s = strides[k].checked_mul(ext)?;
        let mut b = Builder::default();
        let ix = &idx[k];
        let mut i = 0;
        while i < ix.len() {
            let mut j = i + 1;
            while j < ix.len() && ix[j] == ix[j - 1] + 1 {
                j += 1;
            }
            b.copies((ix[i] as isize).checked_mul(s)?, j - i, s, &l);
            i = j;
        }
        l = b.finish()?;
        let (first, last) = (*ix.first()? as isize, *ix.last()? as isize);
        let (a, z) = (first.checked_mul(s)?, last.checked_mul(s)?);
        tb = (tb.0.checked_add(a.min(z))?, tb.1.checked_add(a.max(z))?);
    }
    Some((l, tb))
}

/// The global indices of one dimension owned by grid coordinate `c` of `p` processes.
pub(crate) fn darray_indices(g: usize, distrib: c_int, darg: c_int, p: usize, c: usize) -> Result<Vec<usize>, c_int> {
    match distrib {
        MPI_DISTRIBUTE_NONE => {
            if p != 1 {
                return Err(MPI_ERR_ARG);
            }
            Ok((0..g).collect())
        }
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG { g.div_ceil(p.max(1)) } else { darg.max(0) as usize };
            if b * p < g || b == 0 && g > 0 {
                return Err(MPI_ERR_ARG);
            }
            Ok((c * b..((c + 1) * b).min(g)).collect())
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let k = if darg == MPI_DISTRIBUTE_DFLT_DARG { 1 } else { darg.max(1) as usize };
            Ok((0..g).filter(|i| (i / k) % p == c).collect())
        }
        _ => Err(MPI_ERR_ARG),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::{lookup, MPI_Type_create_darray, MPI_Type_create_subarray};
    use crate::types::Handle;

    fn resized(t: &Dtype, lb: isize, extent: isize) -> Dtype {
        let mut d = Dtype::derived(t.segs.clone(), t.basic, t.align);
        (d.lb, d.ub, d.true_lb, d.true_ub, d.marked) = (lb, lb + extent, t.true_lb, t.true_ub, true);
        d
    }

    fn int() -> std::sync::Arc<Dtype> {
        lookup(MPI_INT).unwrap().into_arc()
    }

    #[test]
    fn copies_of_a_negative_extent_go_downwards() {
        // contiguous(3, resized(int, lb 6, extent -9)): lb -12, extent 9 (MPI-4.1 5.1.7).
        let r = resized(&int(), 6, -9);
        let mut a = Acc::default();
        a.block(3, 0, &r);
        let t = a.finish(false).unwrap();
        assert_eq!((t.lb, t.extent()), (-12, 9));
        assert_eq!((t.true_lb, t.true_ub), (-18, 4));
        let offs: Vec<isize> = (&t.segs).into_iter().map(|s| s.off).collect();
        assert_eq!(offs, vec![0, -9, -18]);
    }

    #[test]
    fn vector_with_negative_stride() {
        // vector(3, 2, -4) of int: blocks at 0, -16, -32 bytes.
        let mut a = Acc::default();
        a.blocks(3, -16, 2, 0, &int());
        let t = a.finish(false).unwrap();
        assert_eq!((t.lb, t.ub), (-32, 8));
        assert_eq!(t.size, 24);
        let runs: Vec<(isize, usize)> = (&t.segs).into_iter().map(|s| (s.off, s.len)).collect();
        assert_eq!(runs, vec![(0, 8), (-16, 8), (-32, 8)]);
    }

    #[test]
    fn a_struct_of_marked_types_is_not_padded() {
        let r = resized(&int(), 6, -9);
        let mut a = Acc::default();
        a.block(3, 0, &r);
        let t = a.finish(true).unwrap();
        assert_eq!((t.lb, t.extent()), (-12, 9));
        // Without markers: {int at 0, char at 4} is padded to 8.
        let mut a = Acc::default();
        a.block(1, 0, &int());
        a.block(1, 4, &lookup(MPI_CHAR).unwrap());
        let t = a.finish(true).unwrap();
        assert_eq!((t.lb, t.extent(), t.size), (0, 8, 5));
        // Markers win over the data: struct {resized(int, lb 6, extent -9), int at 100}.
        let mut a = Acc::default();
        a.block(1, 0, &r);
        a.block(1, 100, &int());
        let t = a.finish(true).unwrap();
        assert_eq!((t.lb, t.ub), (6, -3));
        assert_eq!((t.true_lb, t.true_ub), (0, 104));
    }

    #[test]
    fn a_huge_vector_is_one_part() {
        let mut a = Acc::default();
        a.blocks((i32::MAX / 2) as usize, 8, 1, 0, &int());
        let t = a.finish(false).unwrap();
        assert_eq!(t.size, 4 * (i32::MAX / 2) as usize);
        assert_eq!(t.segs.parts().len(), 1);
        assert_eq!(t.extent(), ((i32::MAX / 2 - 1) as isize) * 8 + 4);
    }

    #[test]
    fn grid_merges_consecutive_indices() {
        // Rows 1..3 and 5 of a 6x10 int array, columns 2..5.
        let idx = vec![vec![1, 2, 5], vec![2, 3, 4]];
        let (l, tb) = grid(&int(), &idx, &[10, 1]).unwrap();
        let runs: Vec<(isize, usize)> = (&l).into_iter().map(|s| (s.off, s.len)).collect();
        assert_eq!(runs, vec![(48, 12), (88, 12), (208, 12)]);
        assert_eq!(tb, (48, 220));
    }

    fn runs(h: Handle) -> Vec<(isize, usize)> {
        (&lookup(h).unwrap().segs).into_iter().map(|s| (s.off, s.len)).collect()
    }

    #[test]
    fn subarrays_in_both_orders() {
        let (sizes, sub, starts) = ([4, 5], [2, 3], [1, 1]);
        let mut h = 0;
        // SAFETY: arrays of 2 entries; output argument.
        let rc = unsafe {
            MPI_Type_create_subarray(2, sizes.as_ptr(), sub.as_ptr(), starts.as_ptr(), MPI_ORDER_C, MPI_INT, &mut h)
        };
        assert_eq!(rc, MPI_SUCCESS);
        assert_eq!(runs(h), vec![(24, 12), (44, 12)]);
        let t = lookup(h).unwrap();
        assert_eq!((t.lb, t.extent(), t.true_lb, t.true_ub, t.size), (0, 80, 24, 56, 24));
        // SAFETY: as above.
        let rc = unsafe {
            MPI_Type_create_subarray(
                2,
                sizes.as_ptr(),
                sub.as_ptr(),
                starts.as_ptr(),
                MPI_ORDER_FORTRAN,
                MPI_INT,
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        assert_eq!(runs(h), vec![(20, 8), (36, 8), (52, 8)]);
    }

    #[test]
    fn a_cyclic_darray_is_a_few_strided_parts() {
        // 6x8 ints, cyclic over 2x2 processes: rank 3 owns rows 1, 3, 5 and columns 1, 3, 5, 7.
        let (gs, ds, da, ps) = ([6, 8], [MPI_DISTRIBUTE_CYCLIC; 2], [1, 1], [2, 2]);
        let mut h = 0;
        // SAFETY: arrays of 2 entries; output argument.
        let rc = unsafe {
            MPI_Type_create_darray(
                4,
                3,
                2,
                gs.as_ptr(),
                ds.as_ptr(),
                da.as_ptr(),
                ps.as_ptr(),
                MPI_ORDER_C,
                MPI_INT,
                &mut h,
            )
        };
        assert_eq!(rc, MPI_SUCCESS);
        let want: Vec<(isize, usize)> =
            [1, 3, 5].iter().flat_map(|r| [1, 3, 5, 7].map(move |c| ((r * 8 + c) * 4, 4))).collect();
        assert_eq!(runs(h), want);
        let t = lookup(h).unwrap();
        assert_eq!((t.lb, t.extent(), t.size), (0, 192, 48));
        assert_eq!(t.segs.parts().len(), 3);
    }

    #[test]
    fn contiguous_types_stay_contiguous() {
        crate::dtype::init_predefined();
        for h in [MPI_INT, MPI_DOUBLE, MPI_2INT, MPI_FLOAT_INT, MPI_C_DOUBLE_COMPLEX] {
            assert!(lookup(h).unwrap().contiguous(), "{h:#x}");
        }
        assert_eq!(crate::dtype::contiguous_predefined_size(MPI_INT), Some(4));
        assert!(!lookup(MPI_DOUBLE_INT).unwrap().contiguous());
        assert_eq!(crate::dtype::contiguous_predefined_size(MPI_DOUBLE_INT), None);
        // contiguous(1000, int), and a struct {double, int, int} with no gap.
        let mut a = Acc::default();
        a.block(1000, 0, &int());
        let t = a.finish(false).unwrap();
        assert!(t.contiguous() && t.segs.parts().len() == 1);
        let mut a = Acc::default();
        a.block(1, 0, &lookup(MPI_DOUBLE).unwrap());
        a.block(2, 8, &int());
        let t = a.finish(true).unwrap();
        assert!(t.contiguous());
        assert_eq!(t.segs.elems(), 3);
        // Not contiguous: out of order, a gap, a resized extent.
        let mut a = Acc::default();
        a.block(1, 4, &int());
        a.block(1, 0, &int());
        assert!(!a.finish(true).unwrap().contiguous());
        assert!(!resized(&int(), 0, 8).contiguous());
        assert!(resized(&int(), -4, 4).contiguous());
    }
}
