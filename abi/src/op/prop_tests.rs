//! Property tests of the predefined reductions against a scalar reference.
//!
//! For every predefined operation and every predefined type MPI-4.1 6.9.2 defines it on
//! (and MPI_REPLACE and MPI_NO_OP on every type, as the accumulate functions use them),
//! random vectors are reduced by MPI_Reduce_local (in the program's layout) and by the
//! combiner the collectives use (on packed data, misaligned too), and compared with a
//! reference computed element by element here: integers wrap as C's unsigned arithmetic
//! does (signed values are drawn so as not to overflow), floating point is compared bit
//! for bit (the same single operation per element), C's long double is checked through
//! values exact in both it and `f64`, and MINLOC/MAXLOC keep the lower index on a tie. The
//! pairs MPI does not define are refused with MPI_ERR_OP.

use std::ffi::c_int;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

use super::*;
use crate::dtype::lookup;

/// What one field of an element holds (x86-64, LP64).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Val {
    /// A signed integer of this many bytes.
    I(usize),
    /// An unsigned integer of this many bytes.
    U(usize),
    F32,
    F64,
    /// C's long double: x87 extended precision, 10 bytes of 16.
    Ld,
    C32,
    C64,
    CLd,
    Bool,
    /// Bytes no arithmetic applies to.
    Raw(usize),
}

impl Val {
    const fn size(self) -> usize {
        match self {
            Val::I(n) | Val::U(n) | Val::Raw(n) => n,
            Val::F32 => 4,
            Val::F64 | Val::C32 => 8,
            Val::Ld | Val::C64 => 16,
            Val::CLd => 32,
            Val::Bool => 1,
        }
    }
}

/// The type groups of MPI-4.1 6.9.2.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    CInt,
    FInt,
    /// MPI_AINT, MPI_OFFSET, MPI_COUNT.
    Multi,
    Float,
    CLogical,
    FLogical,
    Complex,
    Byte,
    /// The MINLOC/MAXLOC pair types.
    Pair,
    /// Types no reduction but MPI_REPLACE / MPI_NO_OP is checked on: characters, packed
    /// data, and the Fortran types the library has no arithmetic for.
    Other,
}

/// A predefined type: its fields (offset, value) and extent in the program's memory.
#[derive(Debug)]
struct Ty {
    h: Handle,
    name: &'static str,
    class: Class,
    fields: &'static [(usize, Val)],
    ext: usize,
}

macro_rules! ty {
    ($h:ident, $class:ident, $v:expr) => {
        Ty { h: $h, name: stringify!($h), class: Class::$class, fields: &[(0, $v)], ext: $v.size() }
    };
    ($h:ident, $v:expr, $ioff:expr, $i:expr, $ext:expr) => {
        Ty { h: $h, name: stringify!($h), class: Class::Pair, fields: &[(0, $v), ($ioff, $i)], ext: $ext }
    };
}

use Val::*;

const TYPES: &[Ty] = &[
    ty!(MPI_INT, CInt, I(4)),
    ty!(MPI_LONG, CInt, I(8)),
    ty!(MPI_SHORT, CInt, I(2)),
    ty!(MPI_UNSIGNED_SHORT, CInt, U(2)),
    ty!(MPI_UNSIGNED, CInt, U(4)),
    ty!(MPI_UNSIGNED_LONG, CInt, U(8)),
    ty!(MPI_LONG_LONG, CInt, I(8)),
    ty!(MPI_UNSIGNED_LONG_LONG, CInt, U(8)),
    ty!(MPI_SIGNED_CHAR, CInt, I(1)),
    ty!(MPI_UNSIGNED_CHAR, CInt, U(1)),
    ty!(MPI_INT8_T, CInt, I(1)),
    ty!(MPI_INT16_T, CInt, I(2)),
    ty!(MPI_INT32_T, CInt, I(4)),
    ty!(MPI_INT64_T, CInt, I(8)),
    ty!(MPI_UINT8_T, CInt, U(1)),
    ty!(MPI_UINT16_T, CInt, U(2)),
    ty!(MPI_UINT32_T, CInt, U(4)),
    ty!(MPI_UINT64_T, CInt, U(8)),
    ty!(MPI_INTEGER, FInt, I(4)),
    ty!(MPI_INTEGER1, FInt, I(1)),
    ty!(MPI_INTEGER2, FInt, I(2)),
    ty!(MPI_INTEGER4, FInt, I(4)),
    ty!(MPI_INTEGER8, FInt, I(8)),
    ty!(MPI_INTEGER16, FInt, I(16)),
    ty!(MPI_AINT, Multi, I(8)),
    ty!(MPI_OFFSET, Multi, I(8)),
    ty!(MPI_COUNT, Multi, I(8)),
    ty!(MPI_FLOAT, Float, F32),
    ty!(MPI_DOUBLE, Float, F64),
    ty!(MPI_LONG_DOUBLE, Float, Ld),
    ty!(MPI_REAL, Float, F32),
    ty!(MPI_DOUBLE_PRECISION, Float, F64),
    ty!(MPI_REAL4, Float, F32),
    ty!(MPI_REAL8, Float, F64),
    ty!(MPI_C_BOOL, CLogical, Bool),
    ty!(MPI_CXX_BOOL, CLogical, Bool),
    ty!(MPI_LOGICAL, FLogical, I(4)),
    ty!(MPI_C_FLOAT_COMPLEX, Complex, C32),
    ty!(MPI_C_DOUBLE_COMPLEX, Complex, C64),
    ty!(MPI_C_LONG_DOUBLE_COMPLEX, Complex, CLd),
    ty!(MPI_CXX_FLOAT_COMPLEX, Complex, C32),
    ty!(MPI_CXX_DOUBLE_COMPLEX, Complex, C64),
    ty!(MPI_CXX_LONG_DOUBLE_COMPLEX, Complex, CLd),
    ty!(MPI_COMPLEX, Complex, C32),
    ty!(MPI_DOUBLE_COMPLEX, Complex, C64),
    ty!(MPI_COMPLEX8, Complex, C32),
    ty!(MPI_COMPLEX16, Complex, C64),
    ty!(MPI_BYTE, Byte, U(1)),
    // The C structs {value; int} and the Fortran pairs (MPI-4.1 6.9.4).
    ty!(MPI_FLOAT_INT, F32, 4, I(4), 8),
    ty!(MPI_DOUBLE_INT, F64, 8, I(4), 16),
    ty!(MPI_LONG_INT, I(8), 8, I(4), 16),
    ty!(MPI_2INT, I(4), 4, I(4), 8),
    ty!(MPI_SHORT_INT, I(2), 4, I(4), 8),
    ty!(MPI_LONG_DOUBLE_INT, Ld, 16, I(4), 32),
    ty!(MPI_2REAL, F32, 4, F32, 8),
    ty!(MPI_2DOUBLE_PRECISION, F64, 8, F64, 16),
    ty!(MPI_2INTEGER, I(4), 4, I(4), 8),
    ty!(MPI_CHAR, Other, Raw(1)),
    ty!(MPI_WCHAR, Other, Raw(4)),
    ty!(MPI_PACKED, Other, Raw(1)),
    ty!(MPI_CHARACTER, Other, Raw(1)),
    ty!(MPI_LOGICAL1, Other, Raw(1)),
    ty!(MPI_LOGICAL2, Other, Raw(2)),
    ty!(MPI_LOGICAL4, Other, Raw(4)),
    ty!(MPI_LOGICAL8, Other, Raw(8)),
    ty!(MPI_LOGICAL16, Other, Raw(16)),
    ty!(MPI_REAL2, Other, Raw(2)),
    ty!(MPI_REAL16, Other, Raw(16)),
    ty!(MPI_COMPLEX4, Other, Raw(4)),
    ty!(MPI_COMPLEX32, Other, Raw(32)),
];

const OPS: &[(Handle, &str)] = &[
    (MPI_MAX, "MPI_MAX"),
    (MPI_MIN, "MPI_MIN"),
    (MPI_SUM, "MPI_SUM"),
    (MPI_PROD, "MPI_PROD"),
    (MPI_LAND, "MPI_LAND"),
    (MPI_BAND, "MPI_BAND"),
    (MPI_LOR, "MPI_LOR"),
    (MPI_BOR, "MPI_BOR"),
    (MPI_LXOR, "MPI_LXOR"),
    (MPI_BXOR, "MPI_BXOR"),
    (MPI_MINLOC, "MPI_MINLOC"),
    (MPI_MAXLOC, "MPI_MAXLOC"),
    (MPI_REPLACE, "MPI_REPLACE"),
    (MPI_NO_OP, "MPI_NO_OP"),
];

/// Whether MPI-4.1 6.9.2 defines `op` on the types of `class` (MPI_REPLACE and MPI_NO_OP:
/// on every type, in the accumulate functions, 12.3.4).
fn defined(op: Handle, class: Class) -> bool {
    use Class::*;
    match op {
        MPI_MAX | MPI_MIN => matches!(class, CInt | FInt | Float | Multi),
        MPI_SUM | MPI_PROD => matches!(class, CInt | FInt | Float | Complex | Multi),
        MPI_LAND | MPI_LOR | MPI_LXOR => matches!(class, CInt | CLogical | FLogical),
        MPI_BAND | MPI_BOR | MPI_BXOR => matches!(class, CInt | FInt | Byte | Multi),
        MPI_MINLOC | MPI_MAXLOC => class == Pair,
        _ => true,
    }
}

/// The undefined pairs the library accepts, with C's meaning, because it tells types
/// apart only by what is in them: the logical operations on the other integers, and the
/// integer ones on Fortran LOGICAL (an `int`). MPI does not require detecting them.
fn accepted(op: Handle, class: Class) -> bool {
    let logical = matches!(op, MPI_LAND | MPI_LOR | MPI_LXOR);
    (logical && matches!(class, Class::FInt | Class::Multi))
        || (class == Class::FLogical
            && matches!(op, MPI_MAX | MPI_MIN | MPI_SUM | MPI_PROD | MPI_BAND | MPI_BOR | MPI_BXOR))
}

// ---------------------------------------------------------------------------------------
// Values

/// `v` as C's long double on x86-64: the 10 bytes of x87 extended precision (`v` normal
/// or zero).
fn ld(v: f64) -> [u8; 10] {
    let bits = v.to_bits();
    let sign = ((bits >> 63) as u16) << 15;
    let mut out = [0u8; 10];
    if v != 0.0 {
        let exp = ((bits >> 52) & 0x7ff) as i32;
        assert!(exp != 0 && exp != 0x7ff, "{v} is not a normal number");
        let mant = (1u64 << 63) | ((bits & ((1 << 52) - 1)) << 11);
        out[..8].copy_from_slice(&mant.to_le_bytes());
        out[8..].copy_from_slice(&(sign | (exp - 1023 + 16383) as u16).to_le_bytes());
    } else {
        out[8..].copy_from_slice(&sign.to_le_bytes());
    }
    out
}

/// The value of an x87 long double with at most 53 significant bits.
fn ld_value(b: &[u8]) -> f64 {
    let mant = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
    let se = u16::from_le_bytes([b[8], b[9]]);
    let v = mant as f64 * 2f64.powi((se & 0x7fff) as i32 - 16383 - 63);
    if se >> 15 == 1 {
        -v
    } else {
        v
    }
}

fn int(v: Val, b: &[u8]) -> i128 {
    let mut w = [0u8; 16];
    w[..b.len()].copy_from_slice(b);
    let u = i128::from_le_bytes(w);
    match v {
        // Sign-extend.
        Val::I(n) => (u << (128 - 8 * n)) >> (128 - 8 * n),
        _ => u,
    }
}

fn put_int(v: Val, x: i128, b: &mut [u8]) {
    let n = v.size();
    b.copy_from_slice(&x.to_le_bytes()[..n]);
}

fn f32_at(b: &[u8]) -> f32 {
    f32::from_le_bytes(b[..4].try_into().unwrap_or_default())
}

fn f64_at(b: &[u8]) -> f64 {
    f64::from_le_bytes(b[..8].try_into().unwrap_or_default())
}

/// A finite float for arithmetic: NaN and infinities become small numbers, -0 becomes +0
/// (MIN and MAX of +0 and -0 may return either), and with `bound`, large values small.
fn tame(x: f64, bound: f64) -> f64 {
    if !x.is_finite() || x.abs() > bound {
        (x.to_bits() % 1000) as f64 - 500.0
    } else if x == 0.0 {
        0.0
    } else {
        x
    }
}

/// An `f64` with at most 16 significant bits and a small exponent: its sums and products
/// are exact in `f64` and long double alike.
fn small_exact(b: &[u8]) -> f64 {
    let v = i16::from_le_bytes([b[0], b[1]]) as f64 / (1u32 << (b[2] % 9)) as f64;
    if v == 0.0 {
        0.0
    } else {
        v
    }
}

/// Which part of an element a field is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    Scalar,
    /// A MINLOC/MAXLOC value: drawn from a few, so that ties happen.
    PairValue,
    PairIndex,
}

/// Makes the random bytes `b` of a field a value the reference can check under `op`.
fn sanitize(v: Val, role: Role, op: Handle, b: &mut [u8]) {
    match v {
        Val::I(n) => {
            let bits = 8 * n as u32;
            let x = int(v, b);
            let x = match (role, op) {
                (Role::PairValue, _) => x % 4,
                // Sums of two values of half the range do not overflow, nor products of
                // values below the square root of a quarter of it.
                (_, MPI_SUM) => x >> 1,
                (_, MPI_PROD) => x % (1i128 << (bits / 2 - 1)),
                _ => x,
            };
            put_int(v, x, b);
        }
        Val::Bool => b[0] &= 1,
        Val::F32 => {
            let x = match role {
                Role::Scalar => tame(f32_at(b) as f64, f32::MAX as f64) as f32,
                _ => (b[0] % 5) as f32 - 2.0,
            };
            b.copy_from_slice(&x.to_le_bytes());
        }
        Val::F64 => {
            let x = match role {
                Role::Scalar => tame(f64_at(b), f64::MAX),
                _ => (b[0] % 5) as f64 - 2.0,
            };
            b.copy_from_slice(&x.to_le_bytes());
        }
        Val::C32 => {
            for p in b.chunks_exact_mut(4) {
                p.copy_from_slice(&(tame(f32_at(p) as f64, 1e15) as f32).to_le_bytes());
            }
        }
        Val::C64 => {
            for p in b.chunks_exact_mut(8) {
                p.copy_from_slice(&tame(f64_at(p), 1e150).to_le_bytes());
            }
        }
        // Bytes 10..16 of each long double are padding: left random.
        Val::Ld => {
            let x = if role == Role::PairValue { (b[0] % 5) as f64 - 2.0 } else { small_exact(b) };
            b[..10].copy_from_slice(&ld(x));
        }
        Val::CLd => {
            for p in b.chunks_exact_mut(16) {
                let x = small_exact(p);
                p[..10].copy_from_slice(&ld(x));
            }
        }
        Val::U(_) | Val::Raw(_) => {}
    }
}

/// Which bytes of a field hold its value (not a long double's padding).
fn significant(v: Val, i: usize) -> bool {
    match v {
        Val::Ld => i < 10,
        Val::CLd => i % 16 < 10,
        _ => true,
    }
}

/// The reference `y op x` of one scalar field (`x` the accumulated, `y` the incoming).
fn scalar(v: Val, op: Handle, x: &[u8], y: &[u8], out: &mut [u8]) -> Result<(), TestCaseError> {
    if op == MPI_REPLACE {
        out.copy_from_slice(y);
        return Ok(());
    }
    if op == MPI_NO_OP {
        out.copy_from_slice(x);
        return Ok(());
    }
    let logical = |a: bool, b: bool| match op {
        MPI_LAND => a && b,
        MPI_LOR => a || b,
        _ => a != b,
    };
    match v {
        Val::I(_) | Val::U(_) | Val::Bool => {
            let (a, b) = (int(v, x), int(v, y));
            let r = match op {
                MPI_SUM | MPI_PROD if matches!(v, Val::I(_)) => {
                    let r = if op == MPI_SUM { b.checked_add(a) } else { b.checked_mul(a) };
                    let r = r.ok_or_else(|| TestCaseError::fail("sanitizing let a value overflow"))?;
                    let bits = 8 * v.size() as u32;
                    prop_assert!(bits == 128 || (r >> (bits - 1) == 0 || r >> (bits - 1) == -1), "{r} overflows {v:?}");
                    r
                }
                // Unsigned: modulo 2^bits (the low bytes of the wrapped 128-bit result).
                MPI_SUM => (b as u128).wrapping_add(a as u128) as i128,
                MPI_PROD => (b as u128).wrapping_mul(a as u128) as i128,
                MPI_MIN => {
                    if b < a {
                        b
                    } else {
                        a
                    }
                }
                MPI_MAX => {
                    if b > a {
                        b
                    } else {
                        a
                    }
                }
                MPI_LAND | MPI_LOR | MPI_LXOR => logical(b != 0, a != 0) as i128,
                MPI_BAND => b & a,
                MPI_BOR => b | a,
                MPI_BXOR => b ^ a,
                _ => return Err(TestCaseError::fail(format!("no reference for {op:#x} on {v:?}"))),
            };
            put_int(v, r, out);
        }
        Val::F32 => {
            let (a, b) = (f32_at(x), f32_at(y));
            let r =
                float(op, a as f64, b as f64, |p, q| (p as f32 + q as f32) as f64, |p, q| (p as f32 * q as f32) as f64);
            out.copy_from_slice(&(r? as f32).to_le_bytes());
        }
        Val::F64 => {
            let r = float(op, f64_at(x), f64_at(y), |p, q| p + q, |p, q| p * q)?;
            out.copy_from_slice(&r.to_le_bytes());
        }
        Val::Ld => {
            let r = float(op, ld_value(x), ld_value(y), |p, q| p + q, |p, q| p * q)?;
            out[..10].copy_from_slice(&ld(r));
        }
        Val::C32 => {
            let g = |s: &[u8], i: usize| f32_at(&s[4 * i..]);
            let (r, i) = complex(op, (g(x, 0), g(x, 1)), (g(y, 0), g(y, 1)))?;
            out[..4].copy_from_slice(&r.to_le_bytes());
            out[4..].copy_from_slice(&i.to_le_bytes());
        }
        Val::C64 => {
            let g = |s: &[u8], i: usize| f64_at(&s[8 * i..]);
            let (r, i) = complex(op, (g(x, 0), g(x, 1)), (g(y, 0), g(y, 1)))?;
            out[..8].copy_from_slice(&r.to_le_bytes());
            out[8..].copy_from_slice(&i.to_le_bytes());
        }
        Val::CLd => {
            let g = |s: &[u8], i: usize| ld_value(&s[16 * i..]);
            let (r, i) = complex(op, (g(x, 0), g(x, 1)), (g(y, 0), g(y, 1)))?;
            out[..10].copy_from_slice(&ld(r));
            out[16..26].copy_from_slice(&ld(i));
        }
        Val::Raw(_) => return Err(TestCaseError::fail(format!("no reference for {op:#x} on raw bytes"))),
    }
    Ok(())
}

/// `b op a` on floating point (`add` and `mul` in the field's own precision).
fn float(
    op: Handle,
    a: f64,
    b: f64,
    add: impl Fn(f64, f64) -> f64,
    mul: impl Fn(f64, f64) -> f64,
) -> Result<f64, TestCaseError> {
    Ok(match op {
        MPI_SUM => add(b, a),
        MPI_PROD => mul(b, a),
        MPI_MIN => {
            if b < a {
                b
            } else {
                a
            }
        }
        MPI_MAX => {
            if b > a {
                b
            } else {
                a
            }
        }
        _ => return Err(TestCaseError::fail(format!("no float reference for {op:#x}"))),
    })
}

/// `y op x` on complex numbers (real, imaginary): C's product on finite values.
fn complex<T>(op: Handle, x: (T, T), y: (T, T)) -> Result<(T, T), TestCaseError>
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Sub<Output = T> + std::ops::Mul<Output = T>,
{
    Ok(match op {
        MPI_SUM => (y.0 + x.0, y.1 + x.1),
        MPI_PROD => (y.0 * x.0 - y.1 * x.1, y.0 * x.1 + y.1 * x.0),
        _ => return Err(TestCaseError::fail(format!("no complex reference for {op:#x}"))),
    })
}

/// A pair field as a number (indices and the values drawn are exact in `f64`).
fn num(v: Val, b: &[u8]) -> f64 {
    match v {
        Val::F32 => f32_at(b) as f64,
        Val::F64 => f64_at(b),
        Val::Ld => ld_value(b),
        _ => int(v, b) as f64,
    }
}

/// The reference `y op x` of one element of `t` (program layout): `out` starts as `x`.
fn element(t: &Ty, op: Handle, x: &[u8], y: &[u8], out: &mut [u8]) -> Result<(), TestCaseError> {
    out.copy_from_slice(x);
    if t.class != Class::Pair || op == MPI_REPLACE || op == MPI_NO_OP {
        for &(off, v) in t.fields {
            let r = off..off + v.size();
            scalar(v, op, &x[r.clone()], &y[r.clone()], &mut out[r])?;
        }
        return Ok(());
    }
    let [(_, v), (ioff, iv)] = t.fields else { return Err(TestCaseError::fail("not a pair")) };
    let (vs, is) = (0..v.size(), *ioff..ioff + iv.size());
    let (xv, yv) = (num(*v, &x[vs.clone()]), num(*v, &y[vs.clone()]));
    let (xi, yi) = (num(*iv, &x[is.clone()]), num(*iv, &y[is.clone()]));
    // MPI-4.1 6.9.4: the lesser (MINLOC) or greater (MAXLOC) value with its index; on a
    // tie, the lower index.
    let y_wins = if op == MPI_MINLOC { yv < xv } else { yv > xv };
    if y_wins {
        out[vs.clone()].copy_from_slice(&y[vs]);
        out[is.clone()].copy_from_slice(&y[is]);
    } else if yv == xv && yi < xi {
        out[is.clone()].copy_from_slice(&y[is]);
    }
    Ok(())
}

/// The packed form of `n` elements of `t` in program layout: the fields back to back.
fn pack(t: &Ty, prog: &[u8], n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|e| t.fields.iter().flat_map(move |&(off, v)| &prog[e * t.ext + off..][..v.size()]))
        .copied()
        .collect()
}

/// Which bytes of `n` elements of `t` (program layout) hold values.
fn mask(t: &Ty, n: usize) -> Vec<bool> {
    let mut m = vec![true; n * t.ext];
    for e in 0..n {
        for &(off, v) in t.fields {
            for i in 0..v.size() {
                m[e * t.ext + off + i] = significant(v, i);
            }
        }
    }
    m
}

fn same(got: &[u8], want: &[u8], mask: &[bool]) -> bool {
    got.len() == want.len() && (0..got.len()).all(|i| !mask[i] || got[i] == want[i])
}

// ---------------------------------------------------------------------------------------
// The properties

/// Elements per vector, at most.
const N: usize = 9;

/// Checks `op` on `t` for `n` elements made of the random bytes `ra` (accumulated) and
/// `rb` (incoming): through MPI_Reduce_local (not for MPI_REPLACE / MPI_NO_OP, which only
/// the accumulate functions take) and through the combiner on packed data at offsets
/// `mis` of their buffers.
fn check(t: &Ty, op: Handle, n: usize, ra: &[u8], rb: &[u8], mis: (usize, usize)) -> Result<(), TestCaseError> {
    let len = n * t.ext;
    let (mut a, mut b) = (ra[..len].to_vec(), rb[..len].to_vec());
    for e in 0..n {
        for (k, &(off, v)) in t.fields.iter().enumerate() {
            let role = match (t.class, k) {
                (Class::Pair, 0) => Role::PairValue,
                (Class::Pair, _) => Role::PairIndex,
                _ => Role::Scalar,
            };
            let r = e * t.ext + off..e * t.ext + off + v.size();
            sanitize(v, role, op, &mut a[r.clone()]);
            sanitize(v, role, op, &mut b[r]);
        }
    }
    let mut want = vec![0u8; len];
    for e in 0..n {
        let r = e * t.ext..(e + 1) * t.ext;
        element(t, op, &a[r.clone()], &b[r.clone()], &mut want[r])?;
    }
    let m = mask(t, n);
    let Some(dt) = lookup(t.h) else { return Err(TestCaseError::fail("no such type")) };

    if op != MPI_REPLACE && op != MPI_NO_OP {
        let mut got = a.clone();
        // SAFETY: `n` elements of the type in both buffers.
        let rc = unsafe { MPI_Reduce_local(b.as_ptr().cast(), got.as_mut_ptr().cast(), n as c_int, t.h, op) };
        prop_assert_eq!(rc, MPI_SUCCESS);
        prop_assert!(
            same(&got, &want, &m),
            "MPI_Reduce_local: got {:02x?}\nwant {:02x?}\nof {:02x?}\nand {:02x?}",
            got,
            want,
            a,
            b
        );
    }

    let c = resolve(op, t.h, &dt).map_err(|e| TestCaseError::fail(format!("refused with {e}")))?;
    let (pa, pb) = (pack(t, &a, n), pack(t, &b, n));
    prop_assert_eq!(c.elem(), t.fields.iter().map(|f| f.1.size()).sum::<usize>(), "packed element size");
    let mut acc = vec![0u8; pa.len() + 16];
    let mut inc = vec![0u8; pb.len() + 16];
    acc[mis.0..mis.0 + pa.len()].copy_from_slice(&pa);
    inc[mis.1..mis.1 + pb.len()].copy_from_slice(&pb);
    c.apply(&mut acc[mis.0..mis.0 + pa.len()], &inc[mis.1..mis.1 + pb.len()]);
    let (pw, pm) = (pack(t, &want, n), pack_mask(t, &m, n));
    prop_assert!(
        same(&acc[mis.0..mis.0 + pa.len()], &pw, &pm),
        "packed: got {:02x?}\nwant {:02x?}",
        &acc[mis.0..mis.0 + pa.len()],
        pw
    );
    prop_assert!(acc[..mis.0].iter().chain(&acc[mis.0 + pa.len()..]).all(|&x| x == 0), "wrote outside the elements");
    Ok(())
}

fn pack_mask(t: &Ty, m: &[bool], n: usize) -> Vec<bool> {
    (0..n).flat_map(|e| t.fields.iter().flat_map(move |&(off, v)| &m[e * t.ext + off..][..v.size()])).copied().collect()
}

fn inputs() -> impl Strategy<Value = (usize, Vec<u8>, Vec<u8>, (usize, usize))> {
    let bytes = || prop::collection::vec(any::<u8>(), N * 32);
    (0..=N, bytes(), bytes(), (0usize..8, 0usize..8))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Every operation on every type MPI defines it on (and the undefined pairs the
    /// library accepts) equals the scalar reference.
    #[test]
    fn every_defined_reduction_matches_the_scalar_reference((n, ra, rb, mis) in inputs()) {
        for &(op, op_name) in OPS {
            if op == MPI_REPLACE || op == MPI_NO_OP {
                continue;
            }
            for t in TYPES.iter().filter(|t| defined(op, t.class) || accepted(op, t.class)) {
                if t.class == Class::Other {
                    continue;
                }
                check(t, op, n, &ra, &rb, mis).map_err(|e| TestCaseError::fail(format!("{op_name} on {}: {e}", t.name)))?;
            }
        }
    }

    /// MPI_REPLACE takes the incoming element and MPI_NO_OP keeps the accumulated one, on
    /// every type (the accumulate functions, MPI-4.1 12.3.4).
    #[test]
    fn replace_and_no_op_on_every_type((n, ra, rb, mis) in inputs()) {
        for (op, op_name) in [(MPI_REPLACE, "MPI_REPLACE"), (MPI_NO_OP, "MPI_NO_OP")] {
            for t in TYPES {
                check(t, op, n, &ra, &rb, mis).map_err(|e| TestCaseError::fail(format!("{op_name} on {}: {e}", t.name)))?;
            }
        }
    }
}

/// The pairs MPI-4.1 6.9.2 does not define are refused with MPI_ERR_OP, and leave the
/// buffer alone; so is an operation handle that is none.
#[test]
fn undefined_reductions_are_refused() {
    let mut refused = 0;
    for &(op, op_name) in OPS {
        for t in TYPES.iter().filter(|t| t.class != Class::Other) {
            if defined(op, t.class) || accepted(op, t.class) {
                continue;
            }
            let dt = lookup(t.h).unwrap_or_else(|| panic!("{}", t.name));
            assert_eq!(resolve(op, t.h, &dt).err(), Some(MPI_ERR_OP), "{op_name} on {}", t.name);
            let (inb, mut inout) = (vec![1u8; 2 * t.ext], vec![7u8; 2 * t.ext]);
            // SAFETY: two elements of the type in both buffers.
            let rc = unsafe { MPI_Reduce_local(inb.as_ptr().cast(), inout.as_mut_ptr().cast(), 2, t.h, op) };
            assert_eq!(rc, MPI_ERR_OP, "MPI_Reduce_local: {op_name} on {}", t.name);
            assert!(inout.iter().all(|&x| x == 7), "{op_name} on {} changed the buffer", t.name);
            refused += 1;
        }
    }
    assert!(refused > 200, "only {refused} undefined pairs");
    let dt = lookup(MPI_INT).expect("MPI_INT");
    for op in [MPI_OP_NULL, 0x25, MPI_NO_OP + 1] {
        assert_eq!(resolve(op, MPI_INT, &dt).err(), Some(MPI_ERR_OP), "op {op:#x}");
    }
}
