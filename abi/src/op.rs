//! Reduction operations: every predefined one on the types MPI allows it on, and user
//! operations (MPI_Op_create).

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use crate::consts::*;
use crate::count::small_count;
use crate::dtype::{Basic, DtRef, Dtype, PairKind};
use crate::handles::{Kind, Table};
use crate::raise::raise_on;
use crate::types::{FnPtr, Handle, MPI_Count};

extern "C" {
    // src/ldouble.c: long double reductions (acc = inc op acc over n packed elements).
    fn rt_ldouble_op(op: c_int, acc: *mut u8, inc: *const u8, n: usize);
    fn rt_cldouble_op(op: c_int, acc: *mut u8, inc: *const u8, n: usize);
    fn rt_ldouble_int_op(op: c_int, acc: *mut u8, inc: *const u8, n: usize);
}

type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut Handle);
type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut MPI_Count, *mut Handle);

/// A user function: `MPI_User_function` or the large-count `MPI_User_function_c`.
#[derive(Debug, Clone, Copy)]
enum UserFunc {
    Int(UserFn),
    Large(UserFnC),
}

/// A user operation.
#[derive(Debug)]
pub(crate) struct UserOp {
    f: UserFunc,
    commute: bool,
}

impl UserOp {
    /// Calls the function on `n` elements.
    unsafe fn call(&self, inv: *mut c_void, inout: *mut c_void, n: usize, dt: &mut Handle) {
        // SAFETY: the program's operation on `n` elements of `dt` (MPI contract).
        unsafe {
            match self.f {
                UserFunc::Int(f) => {
                    let mut len = n as c_int;
                    f(inv, inout, &mut len, dt)
                }
                UserFunc::Large(f) => {
                    let mut len = n as MPI_Count;
                    f(inv, inout, &mut len, dt)
                }
            }
        }
    }
}

pub(crate) static OPS: Table<UserOp> = Table::new(Kind::Op);

/// An operation ready to combine packed elements of one datatype.
#[derive(Clone)]
pub(crate) enum Combine {
    Predefined(c_int, Basic),
    User(Arc<UserOp>, Handle, Arc<Dtype>),
}

/// The user operation behind `op`, if it is one (taken when a nonblocking collective
/// starts, so that freeing the handle does not take it from the operation).
pub(crate) fn user_op(op: Handle) -> Option<Arc<UserOp>> {
    OPS.get(op)
}

/// Checks that `op` applies to `t` and returns how to combine packed data.
pub(crate) fn resolve(op: Handle, dt: Handle, t: &DtRef) -> Result<Combine, c_int> {
    resolve_held(None, op, dt, t)
}

/// [`resolve`], with `held`, the user operation taken for `op` when the collective
/// started, used first.
pub(crate) fn resolve_held(held: Option<Arc<UserOp>>, op: Handle, dt: Handle, t: &DtRef) -> Result<Combine, c_int> {
    if let Some(u) = held.or_else(|| OPS.get(op)) {
        return Ok(Combine::User(u, dt, t.clone().into_arc()));
    }
    let code = match op {
        MPI_SUM | MPI_MIN | MPI_MAX | MPI_PROD | MPI_BAND | MPI_BOR | MPI_BXOR | MPI_LAND | MPI_LOR | MPI_LXOR
        | MPI_MINLOC | MPI_MAXLOC | MPI_REPLACE | MPI_NO_OP => op as c_int,
        _ => return Err(MPI_ERR_OP),
    };
    let b = t.basic.ok_or(MPI_ERR_OP)?;
    if !allowed(code, b) {
        return Err(MPI_ERR_OP);
    }
    Ok(Combine::Predefined(code, b))
}

/// Whether predefined operation `op` applies to elements of `b` (MPI-4.1 6.9.2).
pub(crate) fn applies(op: Handle, b: Basic) -> bool {
    allowed(op as c_int, b)
}

fn allowed(op: c_int, b: Basic) -> bool {
    use Basic::*;
    let int = matches!(b, I8 | U8 | I16 | U16 | I32 | U32 | I64 | U64 | I128);
    let float = matches!(b, F32 | F64);
    let complex = matches!(b, CF32 | CF64);
    match op as Handle {
        MPI_REPLACE | MPI_NO_OP => true,
        MPI_SUM | MPI_PROD => int || float || complex || matches!(b, LongDouble | CLongDouble),
        MPI_MIN | MPI_MAX => int || float || b == LongDouble,
        MPI_LAND | MPI_LOR | MPI_LXOR => int || b == Bool,
        MPI_BAND | MPI_BOR | MPI_BXOR => int || b == Byte,
        MPI_MINLOC | MPI_MAXLOC => matches!(b, Pair(_)),
        _ => false,
    }
}

impl Combine {
    /// Bytes of one packed element.
    pub(crate) fn elem(&self) -> usize {
        match self {
            Combine::Predefined(_, b) => b.size(),
            Combine::User(_, _, t) => t.size.max(1),
        }
    }

    /// Whether the operation may be applied in any order: every predefined one, and a
    /// user operation created as commutative.
    pub(crate) fn commutative(&self) -> bool {
        match self {
            Combine::Predefined(..) => true,
            Combine::User(u, _, _) => u.commute,
        }
    }

    /// `acc = incoming op acc`, element by element (MPI's `inoutvec = invec op inoutvec`).
    pub(crate) fn apply(&self, acc: &mut [u8], incoming: &[u8]) {
        match self {
            Combine::Predefined(op, b) => predefined(*op, *b, acc, incoming),
            Combine::User(u, h, t) => user(u, *h, t, acc, incoming),
        }
    }
}

macro_rules! num {
    ($t:ty, $op:expr, $acc:expr, $inc:expr, $int:tt) => {{
        const S: usize = std::mem::size_of::<$t>();
        // Aligned buffers (the usual case): typed slices, which the compiler vectorizes.
        // SAFETY: `align_to` only yields a middle part of whole, aligned `$t` values, and
        // every bit pattern is a valid value of these integer and float types.
        let (pa, ma, sa) = unsafe { $acc.align_to_mut::<$t>() };
        // SAFETY: as above.
        let (pb, mb, sb) = unsafe { $inc.align_to::<$t>() };
        if pa.is_empty() && sa.is_empty() && pb.is_empty() && sb.is_empty() {
            // One loop per operation, so each vectorizes.
            macro_rules! each {
                (|$x:ident, $y:ident| $e:expr) => {
                    for (xr, &$y) in ma.iter_mut().zip(mb.iter()) {
                        let $x = *xr;
                        *xr = $e;
                    }
                };
            }
            num!(@fast $t, $op, each, $int);
            return;
        }
        for (a, b) in $acc.chunks_exact_mut(S).zip($inc.chunks_exact(S)) {
            let x = <$t>::from_ne_bytes(a.try_into().unwrap_or_default());
            let y = <$t>::from_ne_bytes(b.try_into().unwrap_or_default());
            let r: $t = num!(@op $t, $op, y, x, $int);
            a.copy_from_slice(&r.to_ne_bytes());
        }
    }};
    (@fast $t:ty, $op:expr, $each:ident, int) => {
        match $op as Handle {
            MPI_SUM => $each!(|x, y| y.wrapping_add(x)),
            MPI_PROD => $each!(|x, y| y.wrapping_mul(x)),
            MPI_MIN => $each!(|x, y| y.min(x)),
            MPI_MAX => $each!(|x, y| y.max(x)),
            MPI_BAND => $each!(|x, y| y & x),
            MPI_BOR => $each!(|x, y| y | x),
            MPI_BXOR => $each!(|x, y| y ^ x),
            _ => $each!(|x, y| num!(@op $t, $op, y, x, int)),
        }
    };
    (@fast $t:ty, $op:expr, $each:ident, float) => {
        match $op as Handle {
            MPI_SUM => $each!(|x, y| y + x),
            MPI_PROD => $each!(|x, y| y * x),
            MPI_MIN => $each!(|x, y| y.min(x)),
            MPI_MAX => $each!(|x, y| y.max(x)),
            _ => $each!(|x, y| num!(@op $t, $op, y, x, float)),
        }
    };
    (@op $t:ty, $op:expr, $y:ident, $x:ident, int) => {
        match $op as Handle {
            MPI_SUM => $y.wrapping_add($x),
            MPI_PROD => $y.wrapping_mul($x),
            MPI_MIN => $y.min($x),
            MPI_MAX => $y.max($x),
            MPI_LAND => ((($y != 0) && ($x != 0)) as u8) as $t,
            MPI_LOR => ((($y != 0) || ($x != 0)) as u8) as $t,
            MPI_LXOR => ((($y != 0) != ($x != 0)) as u8) as $t,
            MPI_BAND => $y & $x,
            MPI_BOR => $y | $x,
            MPI_BXOR => $y ^ $x,
            MPI_REPLACE => $y,
            _ => $x,
        }
    };
    (@op $t:ty, $op:expr, $y:ident, $x:ident, float) => {
        match $op as Handle {
            MPI_SUM => $y + $x,
            MPI_PROD => $y * $x,
            MPI_MIN => $y.min($x),
            MPI_MAX => $y.max($x),
            MPI_REPLACE => $y,
            _ => $x,
        }
    };
}

macro_rules! complex {
    ($t:ty, $op:expr, $acc:expr, $inc:expr) => {{
        const S: usize = std::mem::size_of::<$t>();
        for (a, b) in $acc.chunks_exact_mut(2 * S).zip($inc.chunks_exact(2 * S)) {
            let g = |s: &[u8], i: usize| <$t>::from_ne_bytes(s[i * S..(i + 1) * S].try_into().unwrap_or_default());
            let (xr, xi, yr, yi) = (g(a, 0), g(a, 1), g(b, 0), g(b, 1));
            let (rr, ri) = match $op as Handle {
                MPI_SUM => (yr + xr, yi + xi),
                MPI_PROD => (yr * xr - yi * xi, yr * xi + yi * xr),
                MPI_REPLACE => (yr, yi),
                _ => (xr, xi),
            };
            a[..S].copy_from_slice(&rr.to_ne_bytes());
            a[S..].copy_from_slice(&ri.to_ne_bytes());
        }
    }};
}

macro_rules! pair {
    ($v:ty, $i:ty, $op:expr, $acc:expr, $inc:expr) => {{
        const V: usize = std::mem::size_of::<$v>();
        const I: usize = std::mem::size_of::<$i>();
        for (a, b) in $acc.chunks_exact_mut(V + I).zip($inc.chunks_exact(V + I)) {
            let xv = <$v>::from_ne_bytes(a[..V].try_into().unwrap_or_default());
            let yv = <$v>::from_ne_bytes(b[..V].try_into().unwrap_or_default());
            let xi = <$i>::from_ne_bytes(a[V..].try_into().unwrap_or_default());
            let yi = <$i>::from_ne_bytes(b[V..].try_into().unwrap_or_default());
            let take_y = match $op as Handle {
                MPI_MINLOC => yv < xv || (yv == xv && yi < xi),
                MPI_MAXLOC => yv > xv || (yv == xv && yi < xi),
                MPI_REPLACE => true,
                _ => false,
            };
            if take_y {
                a.copy_from_slice(b);
            }
        }
    }};
}

pub(crate) fn predefined(op: c_int, b: Basic, acc: &mut [u8], inc: &[u8]) {
    use Basic::*;
    if op as Handle == MPI_NO_OP {
        return;
    }
    match b {
        I8 => num!(i8, op, acc, inc, int),
        U8 | Byte => num!(u8, op, acc, inc, int),
        Bool => num!(u8, op, acc, inc, int),
        I16 => num!(i16, op, acc, inc, int),
        U16 => num!(u16, op, acc, inc, int),
        I32 => num!(i32, op, acc, inc, int),
        U32 => num!(u32, op, acc, inc, int),
        I64 => num!(i64, op, acc, inc, int),
        U64 => num!(u64, op, acc, inc, int),
        I128 => num!(i128, op, acc, inc, int),
        F32 => num!(f32, op, acc, inc, float),
        F64 => num!(f64, op, acc, inc, float),
        CF32 => complex!(f32, op, acc, inc),
        CF64 => complex!(f64, op, acc, inc),
        Pair(PairKind::FloatInt) => pair!(f32, i32, op, acc, inc),
        Pair(PairKind::DoubleInt) => pair!(f64, i32, op, acc, inc),
        Pair(PairKind::LongInt) => pair!(i64, i32, op, acc, inc),
        Pair(PairKind::TwoInt) => pair!(i32, i32, op, acc, inc),
        Pair(PairKind::ShortInt) => pair!(i16, i32, op, acc, inc),
        Pair(PairKind::TwoFloat) => pair!(f32, f32, op, acc, inc),
        Pair(PairKind::TwoDouble) => pair!(f64, f64, op, acc, inc),
        // SAFETY (the three calls below): C loops over `n` packed elements of both
        // slices, whose lengths are whole multiples of the element size (chunked so).
        LongDouble => unsafe { rt_ldouble_op(op, acc.as_mut_ptr(), inc.as_ptr(), acc.len().min(inc.len()) / 16) },
        CLongDouble => unsafe { rt_cldouble_op(op, acc.as_mut_ptr(), inc.as_ptr(), acc.len().min(inc.len()) / 32) },
        Pair(PairKind::LongDoubleInt) => unsafe {
            rt_ldouble_int_op(op, acc.as_mut_ptr(), inc.as_ptr(), acc.len().min(inc.len()) / 20)
        },
        Opaque(_) => {
            if op as Handle == MPI_REPLACE {
                acc.copy_from_slice(inc);
            }
        }
    }
}

fn user(u: &UserOp, h: Handle, t: &Dtype, acc: &mut [u8], inc: &[u8]) {
    let size = t.size.max(1);
    let n = acc.len() / size;
    let mut dt = h;
    if t.contiguous() {
        // Packed is the program's own layout.
        let mut input = inc.to_vec();
        // SAFETY: the program's operation on `n` elements of `dt` (MPI contract).
        unsafe { u.call(input.as_mut_ptr().cast(), acc.as_mut_ptr().cast(), n, &mut dt) };
        return;
    }
    // Unpack both into native layout, combine, pack back.
    let ext = t.extent();
    let shift = (-t.true_lb.min(0)) as usize;
    let total = shift + ((n as isize - 1).max(0) * ext + t.true_ub).max(0) as usize;
    let (mut a, mut b) = (vec![0u8; total], vec![0u8; total]);
    // SAFETY: the scratch buffers hold `n` elements of `t` from offset `shift`.
    unsafe {
        crate::dtype::unpack_from(acc, a.as_mut_ptr().add(shift), n, t);
        crate::dtype::unpack_from(inc, b.as_mut_ptr().add(shift), n, t);
        u.call(b.as_mut_ptr().add(shift).cast(), a.as_mut_ptr().add(shift).cast(), n, &mut dt);
        let mut out = Vec::with_capacity(acc.len());
        crate::dtype::pack_into(a.as_ptr().add(shift), n, t, &mut out);
        acc.copy_from_slice(&out);
    }
}

pub(crate) unsafe fn MPI_Op_create(user_fn: FnPtr, commute: c_int, op: *mut Handle) -> c_int {
    if user_fn.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: the program passes an MPI_User_function (MPI contract).
    let f: UserFn = unsafe { std::mem::transmute::<FnPtr, UserFn>(user_fn) };
    // SAFETY: output argument.
    unsafe { *op = OPS.insert(Arc::new(UserOp { f: UserFunc::Int(f), commute: commute != 0 })) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Op_create_c(user_fn: FnPtr, commute: c_int, op: *mut Handle) -> c_int {
    if user_fn.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: the program passes an MPI_User_function_c (MPI contract).
    let f: UserFnC = unsafe { std::mem::transmute::<FnPtr, UserFnC>(user_fn) };
    // SAFETY: output argument.
    unsafe { *op = OPS.insert(Arc::new(UserOp { f: UserFunc::Large(f), commute: commute != 0 })) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Op_free(op: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    if OPS.remove(unsafe { *op }).is_none() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_OP);
    }
    // SAFETY: in/out argument.
    unsafe { *op = MPI_OP_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Op_commutative(op: Handle, commute: *mut c_int) -> c_int {
    let c = match OPS.get(op) {
        Some(u) => u.commute,
        None if (MPI_SUM..=MPI_NO_OP).contains(&op) && op != MPI_OP_NULL => true,
        None => return raise_on(MPI_COMM_WORLD, MPI_ERR_OP),
    };
    // SAFETY: output argument.
    unsafe { *commute = c as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: Handle,
    op: Handle,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    let c = match resolve(op, datatype, &t) {
        Ok(c) => c,
        Err(e) => return raise_on(MPI_COMM_WORLD, e),
    };
    let n = count.max(0) as usize;
    let (mut a, mut b) = (Vec::new(), Vec::new());
    // SAFETY: the program's buffers of `count` elements (MPI contract).
    unsafe {
        crate::dtype::pack_into(inoutbuf.cast(), n, &t, &mut a);
        crate::dtype::pack_into(inbuf.cast(), n, &t, &mut b);
        c.apply(&mut a, &b);
        crate::dtype::unpack_from(&a, inoutbuf.cast(), n, &t);
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    op: Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { MPI_Reduce_local(inbuf, inoutbuf, small_count!(count), datatype, op) }
}

#[cfg(test)]
mod prop_tests;
