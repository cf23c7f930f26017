//! One-sided communication (MPI-4.1 chapter 12; run-through rules R34–R37): windows, the
//! operations on them, and the messages that carry them.
//!
//! **How an operation travels.** Every operation is an engine record of kind `Rma`
//! ([`crate::wire::Header::Rma`]) that takes the next sequence number to its target, as
//! a two-sided message does, so the target applies a peer's operations in the order they
//! were issued on every transport (shared memory and libfabric alike; a record that
//! arrives ahead of its turn waits in the same hold as a message). The target applies a
//! record when its engine reads it — in the application's own MPI calls or in the
//! runtime's progress thread, so passive-target operations proceed while the target
//! computes and calls nothing. Applying happens under the engine lock, which is also
//! what local access to a window takes ([`crate::Engine::win_local`]): an accumulate is
//! element-wise atomic with respect to every other operation and local access.
//!
//! **Completion.** A put or accumulate is complete at the origin when the call returns
//! (its bytes were copied into a record or a queued buffer). Remote completion is a round
//! trip: a `Flush` (or `Unlock`) travels behind the origin's operations to that target
//! and its `Done` comes back once the target applied them all. A get, get-accumulate or
//! compare-and-swap completes when its `Reply` bytes have arrived.
//!
//! **Synchronization.** Locks are queued at the target (`Lock`, granted by `Done`;
//! shared locks together, exclusive alone, first come first served). Post/start/
//! complete/wait use `Post` and `Complete` notices (a `Complete` travels behind the
//! origin's operations, so once a target has every origin's `Complete` their operations
//! are applied). Fence is the facade's: remote completion to every target, then a
//! barrier.
//!
//! **Failures (R35, R36).** An operation on a target known failed fails at the call; a
//! pending get, flush, lock or unlock completes with `RankFailStop` when its target
//! fails. A target drops every record from an origin once it knows the origin failed,
//! and releases the locks a failed origin held or waited for (another origin never waits
//! for a dead holder). A put from an origin that dies mid-operation may have reached the
//! target in part: only the bytes of its own range, record by record (each record is
//! applied whole or not at all).
//!
//! | op | message  | fields after the op byte                                       |
//! |----|----------|----------------------------------------------------------------|
//! | 1  | Put      | win u32, disp u64; data follows                                |
//! | 2  | Get      | win u32, token u64, disp u64, len u64                          |
//! | 3  | Reply    | token u64, offset u64; data follows                            |
//! | 4  | Acc      | win u32, disp u64, op u8, elem u8; data follows                |
//! | 5  | GetAcc   | win u32, token u64, disp u64, roff u64, op u8, elem u8; data   |
//! | 6  | Cas      | win u32, token u64, disp u64, elem u8; compare, then new value |
//! | 7  | Flush    | win u32, token u64                                             |
//! | 8  | Done     | token u64, status u8 (0 done, 1 refused)                       |
//! | 9  | Lock     | win u32, token u64, exclusive u8                               |
//! | 10 | Unlock   | win u32, token u64                                             |
//! | 11 | Post     | win u32                                                        |
//! | 12 | Complete | win u32                                                        |
//!
//! These are bytes another process wrote: decoding checks every length and never panics
//! (docs/UNTRUSTED.md); a target also checks every range against its window.

pub mod direct;
pub mod mem;

use std::fmt;

use crate::types::ContextId;

/// Where an operation goes: window `ctx`, window rank `rank`, byte displacement `disp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// The window's communicator (its point-to-point context).
    pub ctx: ContextId,
    /// The target's window rank.
    pub rank: u32,
    /// The byte displacement in the target's window.
    pub disp: u64,
}

/// A predefined accumulate operation (MPI-4.1 §12.3.4): the reduction operators that
/// apply to plain element types, `MPI_REPLACE` and `MPI_NO_OP`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AccOp {
    /// `MPI_SUM` (integers wrap).
    Sum,
    /// `MPI_PROD` (integers wrap).
    Prod,
    /// `MPI_MAX`.
    Max,
    /// `MPI_MIN`.
    Min,
    /// `MPI_BAND` (integers).
    BitAnd,
    /// `MPI_BOR` (integers).
    BitOr,
    /// `MPI_BXOR` (integers).
    BitXor,
    /// `MPI_LAND` (integers): nonzero is true, the result is 1 or 0.
    LogicalAnd,
    /// `MPI_LOR` (integers).
    LogicalOr,
    /// `MPI_LXOR` (integers).
    LogicalXor,
    /// `MPI_REPLACE`: the target takes the origin's value.
    Replace,
    /// `MPI_NO_OP`: the target is left as it is (a get-accumulate reads it).
    NoOp,
}

const ACC_OPS: [AccOp; 12] = [
    AccOp::Sum,
    AccOp::Prod,
    AccOp::Max,
    AccOp::Min,
    AccOp::BitAnd,
    AccOp::BitOr,
    AccOp::BitXor,
    AccOp::LogicalAnd,
    AccOp::LogicalOr,
    AccOp::LogicalXor,
    AccOp::Replace,
    AccOp::NoOp,
];

impl AccOp {
    fn code(self) -> u8 {
        ACC_OPS.iter().position(|o| *o == self).map_or(0, |i| i as u8)
    }

    fn from_code(c: u8) -> Option<AccOp> {
        ACC_OPS.get(c as usize).copied()
    }

    /// Whether the operation is defined on floating-point elements.
    pub fn applies_to_floats(self) -> bool {
        matches!(self, AccOp::Sum | AccOp::Prod | AccOp::Max | AccOp::Min | AccOp::Replace | AccOp::NoOp)
    }
}

/// The element type of an accumulate: the basic types of MPI-4.1 §12.3.4 that the
/// predefined operators reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Elem {
    /// `int8_t`, `signed char`.
    I8,
    /// `uint8_t`, `unsigned char`, `MPI_BYTE` (bitwise operators, replace).
    U8,
    /// `int16_t`.
    I16,
    /// `uint16_t`.
    U16,
    /// `int32_t`, `int`.
    I32,
    /// `uint32_t`.
    U32,
    /// `int64_t`, `long`.
    I64,
    /// `uint64_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// A type and operation the layer above applies ([`register_ext`]): the C
    /// interface's `long double`, complex products and `MINLOC`/`MAXLOC` pairs. The code
    /// (below 128) names both; the operation the message carries is ignored.
    Ext(u8),
}

/// What the layer above applies for the [`Elem::Ext`] codes it defines: each code's
/// element size (0: not a code) and `target = target op origin` over whole elements
/// (`false` if it cannot).
#[derive(Debug, Clone, Copy)]
pub struct ExtOps {
    /// Bytes of one element of a code, 0 for an unknown code.
    pub size: fn(u8) -> usize,
    /// Applies a code's operation element by element.
    pub apply: fn(u8, &mut [u8], &[u8]) -> bool,
}

static EXT: std::sync::OnceLock<ExtOps> = std::sync::OnceLock::new();

/// Registers the [`Elem::Ext`] codes (once per process; later calls are ignored). Every
/// process of a job registers the same (they run the same library).
pub fn register_ext(ops: ExtOps) {
    let _ = EXT.set(ops);
}

fn ext_size(c: u8) -> usize {
    EXT.get().map_or(0, |e| (e.size)(c))
}

const ELEMS: [Elem; 10] =
    [Elem::I8, Elem::U8, Elem::I16, Elem::U16, Elem::I32, Elem::U32, Elem::I64, Elem::U64, Elem::F32, Elem::F64];

impl Elem {
    /// Bytes of one element (at least 1: an unregistered extension code counts 1, and
    /// nothing applies it).
    pub fn size(self) -> usize {
        match self {
            Elem::I8 | Elem::U8 => 1,
            Elem::I16 | Elem::U16 => 2,
            Elem::I32 | Elem::U32 | Elem::F32 => 4,
            Elem::I64 | Elem::U64 | Elem::F64 => 8,
            Elem::Ext(c) => ext_size(c).max(1),
        }
    }

    /// Whether the CPU's atomics can apply it (every type but the extensions).
    pub fn is_native(self) -> bool {
        !matches!(self, Elem::Ext(_))
    }

    fn code(self) -> u8 {
        match self {
            Elem::Ext(c) => 0x80 | (c & 0x7f),
            e => ELEMS.iter().position(|x| *x == e).map_or(0, |i| i as u8),
        }
    }

    fn from_code(c: u8) -> Option<Elem> {
        if c & 0x80 != 0 {
            return (ext_size(c & 0x7f) > 0).then_some(Elem::Ext(c & 0x7f));
        }
        ELEMS.get(c as usize).copied()
    }

    fn is_float(self) -> bool {
        matches!(self, Elem::F32 | Elem::F64)
    }
}

/// Why an accumulate cannot be applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccError {
    /// The operation is not defined on the element type (a bitwise or logical operator
    /// on floating point).
    OpType(AccOp, Elem),
    /// The lengths are not the same whole number of elements.
    Length,
}

impl fmt::Display for AccError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AccError::OpType(op, e) => write!(f, "{op:?} is not defined on {e:?}"),
            AccError::Length => f.write_str("accumulate lengths differ or are not whole elements"),
        }
    }
}

/// Checks that `op` applies to `elem` (MPI-4.1 §6.9.2's table, as for reductions).
pub fn check_acc(op: AccOp, elem: Elem) -> Result<(), AccError> {
    if elem.is_float() && !op.applies_to_floats() {
        return Err(AccError::OpType(op, elem));
    }
    Ok(())
}

/// `a op b` on one element given as its bits (native byte order, in the low bytes):
/// the element-wise step of every accumulate, applied atomically by [`direct`].
pub(crate) fn combine(op: AccOp, elem: Elem, a: u64, b: u64) -> u64 {
    macro_rules! int {
        ($t:ty, $u:ty) => {{
            let (x, y) = (a as $u as $t, b as $u as $t);
            let r: $t = match op {
                AccOp::Sum => x.wrapping_add(y),
                AccOp::Prod => x.wrapping_mul(y),
                AccOp::Max => x.max(y),
                AccOp::Min => x.min(y),
                AccOp::BitAnd => x & y,
                AccOp::BitOr => x | y,
                AccOp::BitXor => x ^ y,
                AccOp::LogicalAnd => ((x != 0) && (y != 0)) as $t,
                AccOp::LogicalOr => ((x != 0) || (y != 0)) as $t,
                AccOp::LogicalXor => ((x != 0) != (y != 0)) as $t,
                AccOp::Replace => y,
                AccOp::NoOp => x,
            };
            r as $u as u64
        }};
    }
    macro_rules! float {
        ($t:ty, $u:ty) => {{
            let (x, y) = (<$t>::from_bits(a as $u), <$t>::from_bits(b as $u));
            let r = match op {
                AccOp::Sum => x + y,
                AccOp::Prod => x * y,
                AccOp::Max => x.max(y),
                AccOp::Min => x.min(y),
                AccOp::Replace => y,
                _ => x,
            };
            r.to_bits() as u64
        }};
    }
    match elem {
        Elem::I8 => int!(i8, u8),
        Elem::U8 => int!(u8, u8),
        Elem::I16 => int!(i16, u16),
        Elem::U16 => int!(u16, u16),
        Elem::I32 => int!(i32, u32),
        Elem::U32 => int!(u32, u32),
        Elem::I64 => int!(i64, u64),
        Elem::U64 => int!(u64, u64),
        Elem::F32 => float!(f32, u32),
        Elem::F64 => float!(f64, u64),
        // Never combined element-wise: `direct` applies extensions whole, under a lock.
        Elem::Ext(_) => a,
    }
}

/// The bits of the element in `b` (1, 2, 4 or 8 bytes, native order).
pub(crate) fn bits_of(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    let n = b.len().min(8);
    if cfg!(target_endian = "little") {
        w[..n].copy_from_slice(&b[..n]);
        u64::from_le_bytes(w)
    } else {
        w[8 - n..].copy_from_slice(&b[..n]);
        u64::from_be_bytes(w)
    }
}

/// Writes the low `out.len()` bytes of `bits` to `out` (native order).
pub(crate) fn bits_to(bits: u64, out: &mut [u8]) {
    let n = out.len().min(8);
    if cfg!(target_endian = "little") {
        out[..n].copy_from_slice(&bits.to_le_bytes()[..n]);
    } else {
        out[..n].copy_from_slice(&bits.to_be_bytes()[8 - n..]);
    }
}

/// `target[i] = target[i] op origin[i]` element by element (native byte order: both sides
/// of a window share one architecture in this implementation). One loop per operation
/// and type, so the compiler vectorizes it.
pub fn accumulate(op: AccOp, elem: Elem, target: &mut [u8], origin: &[u8]) -> Result<(), AccError> {
    check_acc(op, elem)?;
    if target.len() != origin.len() || !target.len().is_multiple_of(elem.size()) {
        return Err(AccError::Length);
    }
    macro_rules! each {
        ($t:ty, $f:expr) => {{
            const N: usize = std::mem::size_of::<$t>();
            let f = $f;
            let aligned = |p: *const u8| p.align_offset(std::mem::align_of::<$t>()) == 0;
            if aligned(target.as_ptr()) && aligned(origin.as_ptr()) {
                // Both aligned (the usual case): a loop over typed slices, vectorized.
                let t: &mut [$t] = bytemuck::cast_slice_mut(target);
                let o: &[$t] = bytemuck::cast_slice(origin);
                t.iter_mut().zip(o).for_each(|(a, &b)| *a = f(*a, b));
            } else {
                for (t, o) in target.chunks_exact_mut(N).zip(origin.chunks_exact(N)) {
                    let a = <$t>::from_ne_bytes(t.try_into().unwrap_or([0; N]));
                    let b = <$t>::from_ne_bytes(o.try_into().unwrap_or([0; N]));
                    t.copy_from_slice(&f(a, b).to_ne_bytes());
                }
            }
        }};
    }
    macro_rules! int {
        ($t:ty) => {
            match op {
                AccOp::Sum => each!($t, |a: $t, b: $t| a.wrapping_add(b)),
                AccOp::Prod => each!($t, |a: $t, b: $t| a.wrapping_mul(b)),
                AccOp::Max => each!($t, |a: $t, b: $t| a.max(b)),
                AccOp::Min => each!($t, |a: $t, b: $t| a.min(b)),
                AccOp::BitAnd => each!($t, |a: $t, b: $t| a & b),
                AccOp::BitOr => each!($t, |a: $t, b: $t| a | b),
                AccOp::BitXor => each!($t, |a: $t, b: $t| a ^ b),
                AccOp::LogicalAnd => each!($t, |a: $t, b: $t| ((a != 0) && (b != 0)) as $t),
                AccOp::LogicalOr => each!($t, |a: $t, b: $t| ((a != 0) || (b != 0)) as $t),
                AccOp::LogicalXor => each!($t, |a: $t, b: $t| ((a != 0) != (b != 0)) as $t),
                AccOp::Replace => target.copy_from_slice(origin),
                AccOp::NoOp => {}
            }
        };
    }
    macro_rules! float {
        ($t:ty) => {
            match op {
                AccOp::Sum => each!($t, |a: $t, b: $t| a + b),
                AccOp::Prod => each!($t, |a: $t, b: $t| a * b),
                AccOp::Max => each!($t, |a: $t, b: $t| a.max(b)),
                AccOp::Min => each!($t, |a: $t, b: $t| a.min(b)),
                AccOp::Replace => target.copy_from_slice(origin),
                _ => {}
            }
        };
    }
    match elem {
        Elem::I8 => int!(i8),
        Elem::U8 => int!(u8),
        Elem::I16 => int!(i16),
        Elem::U16 => int!(u16),
        Elem::I32 => int!(i32),
        Elem::U32 => int!(u32),
        Elem::I64 => int!(i64),
        Elem::U64 => int!(u64),
        Elem::F32 => float!(f32),
        Elem::F64 => float!(f64),
        Elem::Ext(c) => {
            let applied = op == AccOp::NoOp
                || (op == AccOp::Replace && {
                    target.copy_from_slice(origin);
                    true
                })
                || EXT.get().is_some_and(|e| (e.apply)(c, target, origin));
            if !applied {
                return Err(AccError::OpType(op, elem));
            }
        }
    }
    Ok(())
}

/// Largest encoded message header (the bytes before the data), in bytes.
pub(crate) const MAX_RMA_HEADER: usize = 32;

const OP_PUT: u8 = 1;
const OP_GET: u8 = 2;
const OP_REPLY: u8 = 3;
const OP_ACC: u8 = 4;
const OP_GET_ACC: u8 = 5;
const OP_CAS: u8 = 6;
const OP_FLUSH: u8 = 7;
const OP_DONE: u8 = 8;
const OP_LOCK: u8 = 9;
const OP_UNLOCK: u8 = 10;
const OP_POST: u8 = 11;
const OP_COMPLETE: u8 = 12;

/// A one-sided message; `data` borrows the bytes that follow its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RmaMsg<'a> {
    Put { win: u32, disp: u64, data: &'a [u8] },
    Get { win: u32, token: u64, disp: u64, len: u64 },
    Reply { token: u64, offset: u64, data: &'a [u8] },
    Acc { win: u32, disp: u64, op: AccOp, elem: Elem, data: &'a [u8] },
    GetAcc { win: u32, token: u64, disp: u64, roff: u64, op: AccOp, elem: Elem, data: &'a [u8] },
    Cas { win: u32, token: u64, disp: u64, elem: Elem, data: &'a [u8] },
    Flush { win: u32, token: u64 },
    Done { token: u64, refused: bool },
    Lock { win: u32, token: u64, exclusive: bool },
    Unlock { win: u32, token: u64 },
    Post { win: u32 },
    Complete { win: u32 },
}

/// Why bytes are not a one-sided message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RmaWireError {
    #[error("truncated one-sided message: {have} bytes, need {need}")]
    Truncated { have: usize, need: usize },
    #[error("unknown one-sided message {0}")]
    UnknownOp(u8),
    #[error("unknown accumulate operation {0} or element type {1}")]
    AccCode(u8, u8),
    #[error("one-sided message {0} with {1} trailing bytes")]
    Trailing(u8, usize),
    #[error("flag byte {0}: not 0 or 1")]
    Flag(u8),
}

impl<'a> RmaMsg<'a> {
    /// The bytes after the fields: data that the sender passes as the record's payload.
    pub(crate) fn data(&self) -> &'a [u8] {
        match *self {
            RmaMsg::Put { data, .. }
            | RmaMsg::Reply { data, .. }
            | RmaMsg::Acc { data, .. }
            | RmaMsg::GetAcc { data, .. }
            | RmaMsg::Cas { data, .. } => data,
            _ => &[],
        }
    }

    /// Encodes the fields (not the data) into `out`; returns their length.
    pub(crate) fn encode_header(&self, out: &mut [u8; MAX_RMA_HEADER]) -> usize {
        let mut w = Writer { out, at: 0 };
        match *self {
            RmaMsg::Put { win, disp, .. } => {
                w.u8(OP_PUT);
                w.u32(win);
                w.u64(disp);
            }
            RmaMsg::Get { win, token, disp, len } => {
                w.u8(OP_GET);
                w.u32(win);
                w.u64(token);
                w.u64(disp);
                w.u64(len);
            }
            RmaMsg::Reply { token, offset, .. } => {
                w.u8(OP_REPLY);
                w.u64(token);
                w.u64(offset);
            }
            RmaMsg::Acc { win, disp, op, elem, .. } => {
                w.u8(OP_ACC);
                w.u32(win);
                w.u64(disp);
                w.u8(op.code());
                w.u8(elem.code());
            }
            RmaMsg::GetAcc { win, token, disp, roff, op, elem, .. } => {
                w.u8(OP_GET_ACC);
                w.u32(win);
                w.u64(token);
                w.u64(disp);
                w.u64(roff);
                w.u8(op.code());
                w.u8(elem.code());
            }
            RmaMsg::Cas { win, token, disp, elem, .. } => {
                w.u8(OP_CAS);
                w.u32(win);
                w.u64(token);
                w.u64(disp);
                w.u8(elem.code());
            }
            RmaMsg::Flush { win, token } | RmaMsg::Unlock { win, token } => {
                w.u8(if matches!(self, RmaMsg::Flush { .. }) { OP_FLUSH } else { OP_UNLOCK });
                w.u32(win);
                w.u64(token);
            }
            RmaMsg::Done { token, refused } => {
                w.u8(OP_DONE);
                w.u64(token);
                w.u8(refused.into());
            }
            RmaMsg::Lock { win, token, exclusive } => {
                w.u8(OP_LOCK);
                w.u32(win);
                w.u64(token);
                w.u8(exclusive.into());
            }
            RmaMsg::Post { win } | RmaMsg::Complete { win } => {
                w.u8(if matches!(self, RmaMsg::Post { .. }) { OP_POST } else { OP_COMPLETE });
                w.u32(win);
            }
        }
        w.at
    }

    /// Decodes a message (fields, then its data).
    pub(crate) fn decode(b: &'a [u8]) -> Result<RmaMsg<'a>, RmaWireError> {
        let mut r = Reader { b, at: 0 };
        let op = r.u8()?;
        let acc = |o: u8, e: u8| match (AccOp::from_code(o), Elem::from_code(e)) {
            (Some(o), Some(e)) => Ok((o, e)),
            _ => Err(RmaWireError::AccCode(o, e)),
        };
        let m = match op {
            OP_PUT => RmaMsg::Put { win: r.u32()?, disp: r.u64()?, data: r.rest() },
            OP_GET => RmaMsg::Get { win: r.u32()?, token: r.u64()?, disp: r.u64()?, len: r.u64()? },
            OP_REPLY => RmaMsg::Reply { token: r.u64()?, offset: r.u64()?, data: r.rest() },
            OP_ACC => {
                let (win, disp) = (r.u32()?, r.u64()?);
                let (op, elem) = acc(r.u8()?, r.u8()?)?;
                RmaMsg::Acc { win, disp, op, elem, data: r.rest() }
            }
            OP_GET_ACC => {
                let (win, token, disp, roff) = (r.u32()?, r.u64()?, r.u64()?, r.u64()?);
                let (op, elem) = acc(r.u8()?, r.u8()?)?;
                RmaMsg::GetAcc { win, token, disp, roff, op, elem, data: r.rest() }
            }
            OP_CAS => {
                let (win, token, disp) = (r.u32()?, r.u64()?, r.u64()?);
                let e = r.u8()?;
                let elem = Elem::from_code(e).ok_or(RmaWireError::AccCode(0, e))?;
                RmaMsg::Cas { win, token, disp, elem, data: r.rest() }
            }
            OP_FLUSH => RmaMsg::Flush { win: r.u32()?, token: r.u64()? },
            OP_DONE => RmaMsg::Done { token: r.u64()?, refused: r.flag()? },
            OP_LOCK => RmaMsg::Lock { win: r.u32()?, token: r.u64()?, exclusive: r.flag()? },
            OP_UNLOCK => RmaMsg::Unlock { win: r.u32()?, token: r.u64()? },
            OP_POST => RmaMsg::Post { win: r.u32()? },
            OP_COMPLETE => RmaMsg::Complete { win: r.u32()? },
            other => return Err(RmaWireError::UnknownOp(other)),
        };
        if m.data().is_empty() && r.at != b.len() {
            return Err(RmaWireError::Trailing(op, b.len() - r.at));
        }
        Ok(m)
    }
}

struct Writer<'o> {
    out: &'o mut [u8; MAX_RMA_HEADER],
    at: usize,
}

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.out[self.at] = v;
        self.at += 1;
    }
    fn u32(&mut self, v: u32) {
        self.out[self.at..self.at + 4].copy_from_slice(&v.to_le_bytes());
        self.at += 4;
    }
    fn u64(&mut self, v: u64) {
        self.out[self.at..self.at + 8].copy_from_slice(&v.to_le_bytes());
        self.at += 8;
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], RmaWireError> {
        let end = self.at + n;
        let s = self.b.get(self.at..end).ok_or(RmaWireError::Truncated { have: self.b.len(), need: end })?;
        self.at = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, RmaWireError> {
        Ok(self.take(1)?[0])
    }
    fn flag(&mut self) -> Result<bool, RmaWireError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(RmaWireError::Flag(b)),
        }
    }
    fn u32(&mut self) -> Result<u32, RmaWireError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4 bytes")))
    }
    fn u64(&mut self) -> Result<u64, RmaWireError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8 bytes")))
    }
    fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.at..];
        self.at = self.b.len();
        s
    }
}

#[cfg(test)]
mod tests;
