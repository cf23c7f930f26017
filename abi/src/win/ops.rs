//! The operations of one-sided communication (MPI-4.1 12.3, 12.4): put, get, accumulate,
//! get-accumulate, fetch-and-op, compare-and-swap, the request forms (`MPI_Rput`,
//! `MPI_Rget`, `MPI_Raccumulate`, `MPI_Rget_accumulate`) and the `_c` large-count forms.
//!
//! **Datatypes.** The origin's data is any datatype: packed before it leaves (a contiguous
//! type is read in place), a result unpacked when it arrives (a contiguous one lands in
//! place). The target's datatype is split into its runs of bytes in the target's window
//! (the layout's walk, adjacent runs merged), one engine operation per run: a predefined
//! or contiguous type is one operation. An accumulate works on the target type's basic
//! element, which the origin's must be too: the engine reduces 8- to 64-bit integers,
//! `float` and `double` (`MPI_C_BOOL` and `MPI_BYTE` as bytes, a complex sum as the sum of
//! its parts); `MPI_REPLACE` and `MPI_NO_OP` apply to any type. Other operations
//! (`MPI_MINLOC`/`MPI_MAXLOC`, complex products, `long double`, user operations) are
//! refused with `MPI_ERR_OP`.
//!
//! **Completion.** A put or accumulate is complete locally when its call returns (the
//! engine copied its data): `MPI_Rput` and `MPI_Raccumulate` return a complete request. A
//! get, get-accumulate, fetch-and-op or compare-and-swap returns once its result is in;
//! `MPI_Rget` and `MPI_Rget_accumulate` start theirs as engine requests writing into the
//! program's buffer (or a staging buffer unpacked into it) and complete with them.
//!
//! `MPI_PROC_NULL` as target makes every operation a no-op (a complete request for the
//! request forms). Bytes outside the target's window are refused at the origin with
//! `MPI_ERR_RMA_RANGE`; errors go through the window's error handler.

use std::borrow::Cow;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

use runthrough::win::{AccOp, Elem, Target};
use runthrough::Window;
use runthrough_engine::handle::rma::{fetch_unscoped, Fetch};
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::Engine;

use super::{fail, on_win, on_win_quick, refuse, target_rank};
use crate::consts::*;
use crate::dtype::{Basic, DtRef, Dtype};
use crate::req::{Active, Outcome, Unpack};
use crate::types::{Handle, MPI_Aint, MPI_Count, MPI_Status, SendPtr};

/// The datatype `h` of a buffer of `count` elements (`MPI_DATATYPE_NULL` allowed for an
/// empty one).
fn dtype_of(h: Handle, count: MPI_Count) -> Result<DtRef, c_int> {
    if count < 0 {
        return Err(MPI_ERR_COUNT);
    }
    let h = if count == 0 && h == MPI_DATATYPE_NULL { MPI_BYTE } else { h };
    crate::dtype::lookup(h).ok_or(MPI_ERR_TYPE)
}

/// A buffer of the program: `count` elements of `t` at `addr`.
struct Buf {
    addr: *mut u8,
    count: usize,
    t: DtRef,
}

impl Buf {
    fn new(addr: *const c_void, count: MPI_Count, h: Handle) -> Result<Buf, c_int> {
        let t = dtype_of(h, count)?;
        let count = usize::try_from(count).map_err(|_| MPI_ERR_COUNT)?;
        Ok(Buf { addr: addr.cast_mut().cast(), count, t })
    }

    fn bytes(&self) -> usize {
        self.count * self.t.size
    }

    /// The packed bytes: the program's own when the type is contiguous.
    ///
    /// # Safety
    /// The buffer holds `count` elements of `t` (MPI contract), unchanged while the result
    /// lives.
    unsafe fn packed<'a>(&self) -> Cow<'a, [u8]> {
        let n = self.bytes();
        if n == 0 {
            return Cow::Borrowed(&[]);
        }
        if self.t.contiguous() {
            // SAFETY: `n` bytes of the program's buffer (function contract).
            return Cow::Borrowed(unsafe { std::slice::from_raw_parts(self.addr, n) });
        }
        let mut v = Vec::with_capacity(n);
        // SAFETY: the program's `count` elements (function contract).
        unsafe { crate::dtype::pack_into(self.addr, self.count, &self.t, &mut v) };
        Cow::Owned(v)
    }
}

/// The target side of an operation: the target (window and rank; displacement 0) and the
/// runs of bytes the operation covers in its window, in type-map order.
struct Runs {
    at: Target,
    runs: Vec<(u64, usize)>,
}

impl Runs {
    fn total(&self) -> usize {
        self.runs.iter().map(|r| r.1).sum()
    }

    fn at(&self, disp: u64) -> Target {
        Target { disp, ..self.at }
    }
}

/// The runs of `count` elements of `t` at displacement `disp` (in `rank`'s displacement
/// units) of `rank`'s window, each checked to lie inside it (`MPI_ERR_RMA_RANGE`; a
/// dynamic window's target checks its addresses).
fn target_runs(w: &Window<u8>, rank: usize, disp: MPI_Aint, count: MPI_Count, t: &Dtype) -> Result<Runs, c_int> {
    let count = usize::try_from(count).map_err(|_| MPI_ERR_COUNT)?;
    let at = w.target_bytes(rank, 0, 0).map_err(fail)?;
    let (bytes, unit) = w.extent_of(rank).ok_or(MPI_ERR_RANK)?;
    let base = disp as i128 * unit as i128;
    let mut runs: Vec<(i128, usize)> = Vec::new();
    let mut push = |off: i128, len: usize| {
        if len == 0 {
            return;
        }
        match runs.last_mut() {
            Some(last) if last.0 + last.1 as i128 == off => last.1 += len,
            _ => runs.push((off, len)),
        }
    };
    if t.contiguous() {
        push(base, count * t.size);
    } else {
        let ext = t.extent() as i128;
        for i in 0..count {
            let at = base + i as i128 * ext;
            t.segs.walk(0, &mut |off, len| {
                push(at + off as i128, len);
                true
            });
        }
    }
    // A dynamic window's displacements are addresses of memory attached at the target,
    // which checks them there.
    let bytes = if w.is_dynamic() { i128::MAX } else { bytes as i128 };
    runs.into_iter()
        .map(|(off, len)| {
            if off < 0 || off + len as i128 > bytes {
                return Err(refuse(
                    MPI_ERR_RMA_RANGE,
                    format!(
                        "target bytes {off}..{} are outside rank {rank}'s window of {bytes} bytes",
                        off + len as i128
                    ),
                ));
            }
            Ok((off as u64, len))
        })
        .collect::<Result<Vec<_>, c_int>>()
        .map(|runs| Runs { at, runs })
}

/// The target of `count` elements of `t` at `disp` of `rank`'s window when they are one
/// contiguous run (checked as [`target_runs`] does), with its length; `None` when `t` is
/// not contiguous. The fast path of the blocking operations: no allocation.
fn target_run(
    w: &Window<u8>,
    rank: usize,
    disp: MPI_Aint,
    count: MPI_Count,
    t: &Dtype,
) -> Result<Option<(Target, usize)>, c_int> {
    if !t.contiguous() {
        return Ok(None);
    }
    let count = usize::try_from(count).map_err(|_| MPI_ERR_COUNT)?;
    let len = count.checked_mul(t.size).ok_or(MPI_ERR_COUNT)?;
    let at = w.target_bytes(rank, 0, 0).map_err(fail)?;
    let (bytes, unit) = w.extent_of(rank).ok_or(MPI_ERR_RANK)?;
    let off = disp as i128 * unit as i128;
    let limit = if w.is_dynamic() { i128::MAX } else { bytes as i128 };
    if off < 0 || off + len as i128 > limit {
        let why =
            format!("target bytes {off}..{} are outside rank {rank}'s window of {bytes} bytes", off + len as i128);
        return Err(refuse(MPI_ERR_RMA_RANGE, why));
    }
    Ok(Some((Target { disp: off as u64, ..at }, len)))
}

fn same_size(what: &str, origin: usize, target: usize) -> Result<(), c_int> {
    if origin != target {
        return Err(refuse(MPI_ERR_ARG, format!("the {what} holds {origin} bytes, the target's datatype {target}")));
    }
    Ok(())
}

/// The engine's operation and element for MPI operation `op` on target datatype `t`,
/// whose origin datatype is `o` (not looked at for `MPI_NO_OP`). An operation on no data
/// (`empty`) needs a predefined operation only, as MPICH accepts.
pub(super) fn acc_of(op: Handle, o: &Dtype, t: &Dtype, empty: bool) -> Result<(AccOp, Elem), c_int> {
    let acc = match op {
        MPI_SUM => AccOp::Sum,
        MPI_PROD => AccOp::Prod,
        MPI_MAX => AccOp::Max,
        MPI_MIN => AccOp::Min,
        MPI_BAND => AccOp::BitAnd,
        MPI_BOR => AccOp::BitOr,
        MPI_BXOR => AccOp::BitXor,
        MPI_LAND => AccOp::LogicalAnd,
        MPI_LOR => AccOp::LogicalOr,
        MPI_LXOR => AccOp::LogicalXor,
        MPI_REPLACE => AccOp::Replace,
        MPI_NO_OP => AccOp::NoOp,
        // Carried as extension elements (`ext.rs`), whose code names the operation.
        MPI_MINLOC | MPI_MAXLOC => AccOp::Sum,
        _ => {
            return Err(refuse(
                MPI_ERR_OP,
                "a one-sided accumulate takes a predefined operation, MPI_REPLACE or MPI_NO_OP (MPI-4.1 12.3.4)".into(),
            ))
        }
    };
    if empty {
        return Ok((acc, Elem::U8));
    }
    let any_type = matches!(acc, AccOp::Replace | AccOp::NoOp);
    if let (Some(a), Some(b), false) = (o.basic, t.basic, acc == AccOp::NoOp) {
        if a != b {
            return Err(refuse(MPI_ERR_TYPE, format!("the origin holds {a:?}, the target {b:?}")));
        }
    }
    let Some(b) = t.basic else {
        if any_type {
            return Ok((acc, Elem::U8));
        }
        return Err(refuse(MPI_ERR_TYPE, "an accumulate's target type is made of more than one basic type".into()));
    };
    // Whether MPI defines the operation on the type (MPI-4.1 6.9.2, as for reductions).
    if !crate::op::applies(op, b) {
        return Err(MPI_ERR_OP);
    }
    let complex_ok = matches!(acc, AccOp::Sum | AccOp::Replace | AccOp::NoOp) && op != MPI_MINLOC && op != MPI_MAXLOC;
    let elem = match b {
        Basic::I8 => Elem::I8,
        Basic::U8 | Basic::Bool | Basic::Byte => Elem::U8,
        Basic::I16 => Elem::I16,
        Basic::U16 => Elem::U16,
        Basic::I32 => Elem::I32,
        Basic::U32 => Elem::U32,
        Basic::I64 => Elem::I64,
        Basic::U64 => Elem::U64,
        Basic::F32 => Elem::F32,
        Basic::F64 => Elem::F64,
        // A complex sum is the sum of the real parts and of the imaginary parts.
        Basic::CF32 if complex_ok => Elem::F32,
        Basic::CF64 if complex_ok => Elem::F64,
        _ if any_type => Elem::U8,
        other => match super::ext::elem_of(op, other) {
            Some(e) => e,
            None => {
                return Err(refuse(
                    MPI_ERR_OP,
                    format!(
                        "{op:#x} on {other:?} is not supported in one-sided accumulates (integers, float, double, \
                         long double, complex sums and products, MINLOC/MAXLOC on the pair types but \
                         MPI_SHORT_INT, and MPI_REPLACE/MPI_NO_OP on any type)"
                    ),
                ))
            }
        },
    };
    Ok((acc, elem))
}

/// What each run of a get-like operation does.
#[derive(Clone, Copy)]
enum What {
    Get,
    Acc(AccOp, Elem),
}

/// Get-like operations in flight, one per target run, writing into the program's
/// buffer (a contiguous type) or into a staging buffer unpacked into it once all are
/// done.
struct Fetches {
    /// Declared first: dropped (each settled) before the buffers they write and the
    /// engine they borrow.
    raws: Vec<runthrough_engine::Request<'static>>,
    err: c_int,
    unpack: Option<Unpack>,
    _eng: Arc<BiasedMutex<Engine>>,
}

impl Fetches {
    /// Starts `what` on every run of `r`, reading consecutive parts of `origin` (an
    /// accumulate's data) and writing consecutive parts of `res`.
    ///
    /// # Safety
    /// `res` stays valid and untouched by the program until the operations settle (MPI's
    /// contract for a nonblocking call's buffer; a blocking call waits for them).
    unsafe fn start(w: &Window<u8>, r: &Runs, what: What, origin: &[u8], res: &Buf) -> Fetches {
        let eng = w.engine().clone();
        // SAFETY: `eng` is kept in the result, which drops the requests borrowing it first.
        let e: &'static BiasedMutex<Engine> = unsafe { &*Arc::as_ptr(&eng) };
        let (dst, unpack) = if res.t.contiguous() {
            (res.addr, None)
        } else {
            let mut u = Unpack {
                tmp: vec![0u8; res.bytes()],
                buf: SendPtr(res.addr.cast()),
                count: res.count,
                t: res.t.clone().into_arc(),
            };
            (u.tmp.as_mut_ptr(), Some(u))
        };
        let mut raws = Vec::with_capacity(r.runs.len());
        let mut off = 0;
        for &(disp, len) in &r.runs {
            // SAFETY: disjoint parts of the result: the program's buffer (valid until the
            // requests settle, function contract) or the staging buffer, whose heap block
            // stays put inside the result, which drops the requests first.
            let part: &'static mut [u8] = unsafe { std::slice::from_raw_parts_mut(dst.add(off), len) };
            let f = match what {
                What::Get => Fetch::Get,
                What::Acc(op, elem) => {
                    let origin = if op == AccOp::NoOp { &[][..] } else { &origin[off..off + len] };
                    Fetch::Acc { op, elem, origin }
                }
            };
            // SAFETY: `part` stays valid until the request settles (above); the origin
            // bytes are copied out before this returns.
            raws.push(unsafe { fetch_unscoped(e, r.at(disp), f, part) });
            off += len;
        }
        Fetches { raws, err: MPI_SUCCESS, unpack, _eng: eng }
    }

    /// The outcome once every operation is done (the result then unpacked), else `None`.
    fn poll(&mut self) -> Option<Outcome> {
        let mut pending = false;
        for r in &mut self.raws {
            if !r.is_active() {
                continue;
            }
            match r.test() {
                Ok(Some(_)) => {}
                Ok(None) => pending = true,
                Err(e) => {
                    let code = fail(e);
                    if self.err == MPI_SUCCESS {
                        self.err = code;
                    }
                }
            }
        }
        if pending {
            return None;
        }
        self.unstage();
        Some((MPI_Status::empty(), self.err))
    }

    /// Waits for every operation; the first error's class.
    fn wait(mut self) -> Result<(), c_int> {
        for r in &mut self.raws {
            if r.is_active() {
                if let Err(e) = r.wait_in_place() {
                    let code = fail(e);
                    if self.err == MPI_SUCCESS {
                        self.err = code;
                    }
                }
            }
        }
        self.unstage();
        if self.err == MPI_SUCCESS {
            Ok(())
        } else {
            Err(self.err)
        }
    }

    /// Unpacks the staged result into the program's buffer (after success only: a
    /// failed get leaves the buffer undefined, MPI-4.1 12.3).
    fn unstage(&mut self) {
        if let (MPI_SUCCESS, Some(u)) = (self.err, self.unpack.take()) {
            // SAFETY: the program's result buffer, valid until completion (MPI contract).
            unsafe { crate::dtype::unpack_from(&u.tmp, u.buf.0.cast(), u.count, &u.t) };
        }
    }
}

/// Writes a complete request for an operation done at its call (or on `MPI_PROC_NULL`).
///
/// # Safety
/// `request` is writable.
unsafe fn done_request(win: Handle, request: *mut Handle) {
    // SAFETY: output argument (function contract).
    unsafe { *request = crate::req::new_active(win, Active::Done { status: MPI_Status::empty(), err: MPI_SUCCESS }) };
}

// ---------------------------------------------------------------------------------------
// Put and accumulate: complete locally at return

/// `MPI_Put` and `MPI_Accumulate` (`op` `None` for a put).
///
/// # Safety
/// The origin buffer holds `oc` elements of `odt` (MPI contract).
#[allow(clippy::too_many_arguments)]
unsafe fn put_acc(
    origin: *const c_void,
    oc: MPI_Count,
    odt: Handle,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: Handle,
    op: Option<Handle>,
    win: Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    if let Some(rc) = unsafe { super::fast::put_acc(origin, oc, odt, rank, disp, tc, tdt, op, win) } {
        return rc;
    }
    on_win_quick(win, |_, w| {
        let Some(rank) = target_rank(w, rank)? else { return Ok(()) };
        let o = Buf::new(origin, oc, odt)?;
        let tt = dtype_of(tdt, tc)?;
        if let (true, Some((at, len))) = (o.t.contiguous(), target_run(w, rank, disp, tc, &tt)?) {
            // One contiguous run at each end: the facade's byte operation (direct to a
            // member on this node).
            let acc = op.map(|op| acc_of(op, &o.t, &tt, len == 0)).transpose()?;
            // SAFETY: the program's origin buffer (function contract), read during this call.
            let data = unsafe { o.packed() };
            same_size("origin buffer", data.len(), len)?;
            return match acc {
                None => w.put_target(at, &data),
                Some((op, elem)) => w.accumulate_target(at, op, elem, &data),
            }
            .map_err(fail);
        }
        let r = target_runs(w, rank, disp, tc, &tt)?;
        let acc = op.map(|op| acc_of(op, &o.t, &tt, r.runs.is_empty())).transpose()?;
        // SAFETY: the program's origin buffer (function contract), read during this call.
        let data = unsafe { o.packed() };
        same_size("origin buffer", data.len(), r.total())?;
        w.touch(rank);
        let mut e = w.engine().lock();
        let mut off = 0;
        for &(d, len) in &r.runs {
            let part = &data[off..off + len];
            match acc {
                None => e.rma_put(r.at(d), part),
                Some((op, elem)) => e.rma_acc(r.at(d), op, elem, part),
            }
            .map_err(fail)?;
            off += len;
        }
        Ok(())
    })
}

pub(crate) unsafe fn MPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    // SAFETY: forwarded program arguments.
    unsafe { put_acc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, None, win) }
}

pub(crate) unsafe fn MPI_Put_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let (oc, tc) = (origin_count, target_count);
    // SAFETY: forwarded program arguments.
    unsafe { put_acc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, None, win) }
}

pub(crate) unsafe fn MPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    // SAFETY: forwarded program arguments.
    unsafe { put_acc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, Some(op), win) }
}

pub(crate) unsafe fn MPI_Accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
) -> c_int {
    let (oc, tc) = (origin_count, target_count);
    // SAFETY: forwarded program arguments.
    unsafe { put_acc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, Some(op), win) }
}

/// `MPI_Rput` / `MPI_Raccumulate`: the operation, then a complete request (it completed
/// locally at the call).
///
/// # Safety
/// As [`put_acc`]; `request` is writable.
#[allow(clippy::too_many_arguments)]
unsafe fn rput_racc(
    origin: *const c_void,
    oc: MPI_Count,
    odt: Handle,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: Handle,
    op: Option<Handle>,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    if request.is_null() {
        return crate::raise::raise_on(win, MPI_ERR_ARG);
    }
    // SAFETY: forwarded program arguments.
    let rc = unsafe { put_acc(origin, oc, odt, rank, disp, tc, tdt, op, win) };
    if rc == MPI_SUCCESS {
        // SAFETY: checked above.
        unsafe { done_request(win, request) };
    }
    rc
}

pub(crate) unsafe fn MPI_Rput(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    // SAFETY: forwarded program arguments.
    unsafe {
        rput_racc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, None, win, request)
    }
}

pub(crate) unsafe fn MPI_Rput_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let (oc, tc) = (origin_count, target_count);
    // SAFETY: forwarded program arguments.
    unsafe {
        rput_racc(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype, None, win, request)
    }
}

pub(crate) unsafe fn MPI_Raccumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    let (odt, tdt) = (origin_datatype, target_datatype);
    // SAFETY: forwarded program arguments.
    unsafe { rput_racc(origin_addr, oc, odt, target_rank, target_disp, tc, tdt, Some(op), win, request) }
}

pub(crate) unsafe fn MPI_Raccumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let (oc, tc) = (origin_count, target_count);
    let (odt, tdt) = (origin_datatype, target_datatype);
    // SAFETY: forwarded program arguments.
    unsafe { rput_racc(origin_addr, oc, odt, target_rank, target_disp, tc, tdt, Some(op), win, request) }
}

// ---------------------------------------------------------------------------------------
// Get and get-accumulate: complete when the result is in

/// The arguments of a get-like operation.
pub(super) struct GetArgs {
    pub(super) origin: *const c_void,
    pub(super) oc: MPI_Count,
    pub(super) odt: Handle,
    pub(super) result: *mut c_void,
    pub(super) rc: MPI_Count,
    pub(super) rdt: Handle,
    pub(super) rank: c_int,
    pub(super) disp: MPI_Aint,
    pub(super) tc: MPI_Count,
    pub(super) tdt: Handle,
    /// `None`: a get (no origin data).
    pub(super) op: Option<Handle>,
}

/// Starts a get-like operation; `None` for `MPI_PROC_NULL`.
///
/// # Safety
/// The program's buffers as MPI says (the origin read during the call, the result
/// written until the operation completes).
unsafe fn start_get(w: &Window<u8>, a: &GetArgs) -> Result<Option<Fetches>, c_int> {
    let Some(rank) = target_rank(w, a.rank)? else { return Ok(None) };
    let res = Buf::new(a.result, a.rc, a.rdt)?;
    let tt = dtype_of(a.tdt, a.tc)?;
    let r = target_runs(w, rank, a.disp, a.tc, &tt)?;
    same_size("result buffer", res.bytes(), r.total())?;
    let (what, data) = match a.op {
        None => (What::Get, Cow::Borrowed(&[][..])),
        Some(op) => {
            let o = Buf::new(a.origin, if op == MPI_NO_OP { 0 } else { a.oc }, a.odt)?;
            let (op, elem) = acc_of(op, &o.t, &tt, r.runs.is_empty())?;
            // SAFETY: the program's origin buffer, read during this call.
            let data = unsafe { o.packed() };
            if op != AccOp::NoOp {
                same_size("origin buffer", data.len(), r.total())?;
            }
            (What::Acc(op, elem), data)
        }
    };
    // SAFETY: the result buffer's validity is the caller's (function contract).
    Ok(Some(unsafe { Fetches::start(w, &r, what, &data, &res) }))
}

/// A blocking get-like operation whose result, origin and target are each one
/// contiguous run, done through the facade (direct to a member on this node; no
/// allocation); `None` for the other shapes.
///
/// # Safety
/// As [`start_get`].
unsafe fn get_contiguous(w: &Window<u8>, a: &GetArgs) -> Result<Option<Result<(), c_int>>, c_int> {
    let Some(rank) = target_rank(w, a.rank)? else { return Ok(Some(Ok(()))) };
    let res = Buf::new(a.result, a.rc, a.rdt)?;
    let tt = dtype_of(a.tdt, a.tc)?;
    if !res.t.contiguous() {
        return Ok(None);
    }
    let Some((at, len)) = target_run(w, rank, a.disp, a.tc, &tt)? else { return Ok(None) };
    same_size("result buffer", res.bytes(), len)?;
    if len == 0 {
        // Nothing to read: complete at once (the origin's type is still checked below
        // by the general path when there is data).
        return Ok(Some(Ok(())));
    }
    let (o, acc) = match a.op {
        None => (None, None),
        Some(op) => {
            let o = Buf::new(a.origin, if op == MPI_NO_OP { 0 } else { a.oc }, a.odt)?;
            if !o.t.contiguous() {
                return Ok(None);
            }
            let acc = acc_of(op, &o.t, &tt, len == 0)?;
            (Some(o), Some(acc))
        }
    };
    // SAFETY: the program's buffers, valid during this blocking call (function contract):
    // the origin read, the result written (`len` bytes, checked equal to its size).
    let data = o.as_ref().map(|o| unsafe { o.packed() });
    let result = if len == 0 {
        &mut [][..]
    } else {
        // SAFETY: as above.
        unsafe { std::slice::from_raw_parts_mut(res.addr, len) }
    };
    let what = match (acc, &data) {
        (Some((op, elem)), Some(d)) => {
            if op != AccOp::NoOp {
                same_size("origin buffer", d.len(), len)?;
            }
            Fetch::Acc { op, elem, origin: d }
        }
        _ => Fetch::Get,
    };
    Ok(Some(w.fetch_target(at, what, result).map_err(fail)))
}

/// A blocking get-like operation.
///
/// # Safety
/// As [`start_get`].
unsafe fn get_blocking(a: GetArgs, win: Handle) -> c_int {
    // SAFETY: forwarded program arguments.
    if let Some(rc) = unsafe { super::fast::get(&a, win) } {
        return rc;
    }
    on_win_quick(win, |_, w| {
        // SAFETY: forwarded (function contract); complete when it returns.
        if let Some(done) = unsafe { get_contiguous(w, &a)? } {
            return done;
        }
        // SAFETY: forwarded (function contract); waited for before returning.
        match unsafe { start_get(w, &a)? } {
            Some(f) => f.wait(),
            None => Ok(()),
        }
    })
}

/// A get-like operation as a request (`MPI_Rget`, `MPI_Rget_accumulate`).
///
/// # Safety
/// As [`start_get`]; `request` is writable.
unsafe fn get_request(a: GetArgs, win: Handle, request: *mut Handle) -> c_int {
    if request.is_null() {
        return crate::raise::raise_on(win, MPI_ERR_ARG);
    }
    on_win(win, |_, w| {
        // SAFETY: forwarded (function contract): the request owns the operations until
        // they settle, the program keeps the result buffer until it completes.
        let started = unsafe { start_get(w, &a)? };
        let active = match started {
            Some(mut f) => Active::Polled(Box::new(move || f.poll())),
            None => Active::Done { status: MPI_Status::empty(), err: MPI_SUCCESS },
        };
        // SAFETY: checked above.
        unsafe { *request = crate::req::new_active(win, active) };
        Ok(())
    })
}

fn get_args(
    result: *mut c_void,
    rc: MPI_Count,
    rdt: Handle,
    rank: c_int,
    disp: MPI_Aint,
    tc: MPI_Count,
    tdt: Handle,
) -> GetArgs {
    GetArgs { origin: std::ptr::null(), oc: 0, odt: MPI_DATATYPE_NULL, result, rc, rdt, rank, disp, tc, tdt, op: None }
}

pub(crate) unsafe fn MPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    let a = get_args(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype);
    // SAFETY: the program's buffer (MPI contract).
    unsafe { get_blocking(a, win) }
}

pub(crate) unsafe fn MPI_Get_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    win: Handle,
) -> c_int {
    let a =
        get_args(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype);
    // SAFETY: the program's buffer (MPI contract).
    unsafe { get_blocking(a, win) }
}

pub(crate) unsafe fn MPI_Rget(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let (oc, tc) = (origin_count as MPI_Count, target_count as MPI_Count);
    let a = get_args(origin_addr, oc, origin_datatype, target_rank, target_disp, tc, target_datatype);
    // SAFETY: the program's buffer, valid until the request completes (MPI contract).
    unsafe { get_request(a, win, request) }
}

pub(crate) unsafe fn MPI_Rget_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let a =
        get_args(origin_addr, origin_count, origin_datatype, target_rank, target_disp, target_count, target_datatype);
    // SAFETY: the program's buffer, valid until the request completes (MPI contract).
    unsafe { get_request(a, win, request) }
}

pub(crate) unsafe fn MPI_Get_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
) -> c_int {
    let a = GetArgs {
        origin: origin_addr,
        oc: origin_count as MPI_Count,
        odt: origin_datatype,
        result: result_addr,
        rc: result_count as MPI_Count,
        rdt: result_datatype,
        rank: target_rank,
        disp: target_disp,
        tc: target_count as MPI_Count,
        tdt: target_datatype,
        op: Some(op),
    };
    // SAFETY: the program's buffers (MPI contract).
    unsafe { get_blocking(a, win) }
}

pub(crate) unsafe fn MPI_Get_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
) -> c_int {
    let a = GetArgs {
        origin: origin_addr,
        oc: origin_count,
        odt: origin_datatype,
        result: result_addr,
        rc: result_count,
        rdt: result_datatype,
        rank: target_rank,
        disp: target_disp,
        tc: target_count,
        tdt: target_datatype,
        op: Some(op),
    };
    // SAFETY: the program's buffers (MPI contract).
    unsafe { get_blocking(a, win) }
}

pub(crate) unsafe fn MPI_Rget_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: Handle,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let a = GetArgs {
        origin: origin_addr,
        oc: origin_count as MPI_Count,
        odt: origin_datatype,
        result: result_addr,
        rc: result_count as MPI_Count,
        rdt: result_datatype,
        rank: target_rank,
        disp: target_disp,
        tc: target_count as MPI_Count,
        tdt: target_datatype,
        op: Some(op),
    };
    // SAFETY: the program's buffers, the result valid until the request completes.
    unsafe { get_request(a, win, request) }
}

pub(crate) unsafe fn MPI_Rget_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: Handle,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: Handle,
    op: Handle,
    win: Handle,
    request: *mut Handle,
) -> c_int {
    let a = GetArgs {
        origin: origin_addr,
        oc: origin_count,
        odt: origin_datatype,
        result: result_addr,
        rc: result_count,
        rdt: result_datatype,
        rank: target_rank,
        disp: target_disp,
        tc: target_count,
        tdt: target_datatype,
        op: Some(op),
    };
    // SAFETY: the program's buffers, the result valid until the request completes.
    unsafe { get_request(a, win, request) }
}

// ---------------------------------------------------------------------------------------
// Atomics on one element

/// The predefined datatype `h` of an atomic's element, which must be one.
fn element_type(h: Handle) -> Result<DtRef, c_int> {
    let t = crate::dtype::lookup(h).ok_or(MPI_ERR_TYPE)?;
    if !t.predefined {
        return Err(refuse(MPI_ERR_TYPE, "an atomic operation takes a predefined datatype".into()));
    }
    Ok(t)
}

pub(crate) unsafe fn MPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: Handle,
    win: Handle,
) -> c_int {
    if let Err(e) = element_type(datatype) {
        return crate::raise::raise_on(win, e);
    }
    let a = GetArgs {
        origin: origin_addr,
        oc: 1,
        odt: datatype,
        result: result_addr,
        rc: 1,
        rdt: datatype,
        rank: target_rank,
        disp: target_disp,
        tc: 1,
        tdt: datatype,
        op: Some(op),
    };
    // SAFETY: one element at each buffer (MPI contract).
    unsafe { get_blocking(a, win) }
}

/// The element of a compare-and-swap of `t`: integer, logical and byte elements only
/// (MPI-4.1 12.3.6).
pub(super) fn cas_elem(t: &Dtype) -> Result<Elem, c_int> {
    Ok(match t.basic {
        Some(Basic::I8) => Elem::I8,
        Some(Basic::U8 | Basic::Bool | Basic::Byte) => Elem::U8,
        Some(Basic::I16) => Elem::I16,
        Some(Basic::U16) => Elem::U16,
        Some(Basic::I32) => Elem::I32,
        Some(Basic::U32) => Elem::U32,
        Some(Basic::I64) => Elem::I64,
        Some(Basic::U64) => Elem::U64,
        other => {
            return Err(refuse(
                MPI_ERR_TYPE,
                format!("compare-and-swap of {other:?}: integer, logical and byte elements only"),
            ))
        }
    })
}

/// Compare-and-swap applies to integer, logical and byte elements (MPI-4.1 12.3.6).
pub(crate) unsafe fn MPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: Handle,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win: Handle,
) -> c_int {
    // SAFETY: forwarded program arguments.
    if let Some(rc) =
        unsafe { super::fast::cas(origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win) }
    {
        return rc;
    }
    on_win_quick(win, |_, w| {
        let t = element_type(datatype)?;
        let Some(rank) = super::target_rank(w, target_rank)? else { return Ok(()) };
        let elem = cas_elem(&t)?;
        let r = target_runs(w, rank, target_disp, 1, &t)?;
        let n = elem.size();
        // SAFETY: one element at each of the program's buffers (MPI contract), used during
        // this call only.
        let (new, compare, result) = unsafe {
            (
                std::slice::from_raw_parts(origin_addr.cast::<u8>(), n),
                std::slice::from_raw_parts(compare_addr.cast::<u8>(), n),
                std::slice::from_raw_parts_mut(result_addr.cast::<u8>(), n),
            )
        };
        let at = r.at(r.runs.first().map_or(0, |x| x.0));
        w.fetch_target(at, Fetch::Cas { elem, compare, new }, result).map_err(fail)
    })
}
