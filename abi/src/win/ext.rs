//! One-sided accumulates of the types no CPU atomic applies: C's `long double` (sum,
//! product, min, max), `long double _Complex` and the complex products, and the
//! `MINLOC`/`MAXLOC` pairs. The engine carries them as extension elements
//! (`runthrough_engine::rma::Elem::Ext`): a code naming the operation and the type, which
//! the target applies with this library's reductions (`op.rs`, `ldouble.c`), registered
//! with the engine before the first window exists ([`register`]). The engine applies
//! them under a lock (the accumulate lock of a window whose members share a node, else
//! the target engine's, every such accumulate travelling as a record), so they are
//! element-wise atomic as MPI asks.
//!
//! `MPI_SHORT_INT` is refused: its packed element (2 + 4 bytes) is not contiguous in the
//! target's memory (the `int` starts at byte 4), and an accumulate is applied run by run.

use std::ffi::c_int;

use runthrough::win::Elem;
use runthrough_engine::rma::{register_ext, ExtOps};

use crate::consts::*;
use crate::dtype::{Basic, PairKind};
use crate::types::Handle;

/// Every code: the operation and the type.
const CODES: [(Handle, Basic); 22] = [
    (MPI_SUM, Basic::LongDouble),
    (MPI_PROD, Basic::LongDouble),
    (MPI_MIN, Basic::LongDouble),
    (MPI_MAX, Basic::LongDouble),
    (MPI_SUM, Basic::CLongDouble),
    (MPI_PROD, Basic::CLongDouble),
    (MPI_PROD, Basic::CF32),
    (MPI_PROD, Basic::CF64),
    (MPI_MINLOC, Basic::Pair(PairKind::FloatInt)),
    (MPI_MAXLOC, Basic::Pair(PairKind::FloatInt)),
    (MPI_MINLOC, Basic::Pair(PairKind::DoubleInt)),
    (MPI_MAXLOC, Basic::Pair(PairKind::DoubleInt)),
    (MPI_MINLOC, Basic::Pair(PairKind::LongInt)),
    (MPI_MAXLOC, Basic::Pair(PairKind::LongInt)),
    (MPI_MINLOC, Basic::Pair(PairKind::TwoInt)),
    (MPI_MAXLOC, Basic::Pair(PairKind::TwoInt)),
    (MPI_MINLOC, Basic::Pair(PairKind::TwoFloat)),
    (MPI_MAXLOC, Basic::Pair(PairKind::TwoFloat)),
    (MPI_MINLOC, Basic::Pair(PairKind::TwoDouble)),
    (MPI_MAXLOC, Basic::Pair(PairKind::TwoDouble)),
    (MPI_MINLOC, Basic::Pair(PairKind::LongDoubleInt)),
    (MPI_MAXLOC, Basic::Pair(PairKind::LongDoubleInt)),
];

fn size(c: u8) -> usize {
    CODES.get(c as usize).map_or(0, |&(_, b)| b.size())
}

fn apply(c: u8, target: &mut [u8], origin: &[u8]) -> bool {
    let Some(&(op, b)) = CODES.get(c as usize) else { return false };
    if target.len() != origin.len() || !target.len().is_multiple_of(b.size()) {
        return false;
    }
    crate::op::predefined(op as c_int, b, target, origin);
    true
}

/// Registers the codes with the engine (idempotent).
pub(crate) fn register() {
    register_ext(ExtOps { size, apply });
}

/// The extension element of operation `op` on `b`, if it is one.
pub(crate) fn elem_of(op: Handle, b: Basic) -> Option<Elem> {
    CODES.iter().position(|&(o, t)| o == op && t == b).map(|i| Elem::Ext(i as u8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_applies_its_reduction() {
        // MAXLOC on (double, int): the larger value, ties to the smaller index.
        let pair = |v: f64, i: i32| [v.to_ne_bytes().as_slice(), &i.to_ne_bytes()].concat();
        let Some(Elem::Ext(c)) = elem_of(MPI_MAXLOC, Basic::Pair(PairKind::DoubleInt)) else { panic!("no code") };
        assert_eq!(size(c), 12);
        let mut t = [pair(1.0, 5), pair(3.0, 9)].concat();
        assert!(apply(c, &mut t, &[pair(2.0, 1), pair(3.0, 2)].concat()));
        assert_eq!(t, [pair(2.0, 1), pair(3.0, 2)].concat());
        assert!(!apply(c, &mut t[..11], &[0; 11]), "partial elements are refused");
        assert!(elem_of(MPI_MINLOC, Basic::Pair(PairKind::ShortInt)).is_none());
        assert!(elem_of(MPI_SUM, Basic::I32).is_none(), "native types are the engine's");
        assert_eq!(size(200), 0);
        // A complex product: (1 + 2i)(3 + 4i) = -5 + 10i.
        let Some(Elem::Ext(c)) = elem_of(MPI_PROD, Basic::CF64) else { panic!("no code") };
        let z = |re: f64, im: f64| [re.to_ne_bytes(), im.to_ne_bytes()].concat();
        let mut t = z(1.0, 2.0);
        assert!(apply(c, &mut t, &z(3.0, 4.0)));
        assert_eq!(t, z(-5.0, 10.0));
    }
}
