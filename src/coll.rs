//! Typed collectives of the facade: argument checks, the reduction operators, and the
//! error mode, over the engine's byte-level collectives (`runthrough_engine::coll`, which
//! documents the algorithms and the run-through rules R17–R21).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use runthrough_engine::coll::Coll;
use runthrough_engine::icoll::{BoxedCombine, ICollRequest, Kind, Members};
use runthrough_engine::RequestScope;

use crate::comm::Comm;
use crate::{Error, Pod};

/// A predefined reduction operator (all commutative and associative).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Sum (MPI_SUM); integers wrap.
    Sum,
    /// Product (MPI_PROD); integers wrap.
    Prod,
    /// Minimum (MPI_MIN).
    Min,
    /// Maximum (MPI_MAX).
    Max,
    /// Bitwise and (MPI_BAND); integers only.
    BitAnd,
    /// Bitwise or (MPI_BOR); integers only.
    BitOr,
    /// Bitwise exclusive or (MPI_BXOR); integers only.
    BitXor,
    /// Logical and (MPI_LAND): nonzero is true, the result is 1 or 0; integers only.
    LogicalAnd,
    /// Logical or (MPI_LOR): nonzero is true, the result is 1 or 0; integers only.
    LogicalOr,
    /// The minimum value and the smallest index holding it (MPI_MINLOC); value-index
    /// pairs only ([`LocF64`], [`LocF32`], [`LocI32`], [`LocI64`]).
    MinLoc,
    /// The maximum value and the smallest index holding it (MPI_MAXLOC); value-index
    /// pairs only.
    MaxLoc,
}

/// Element types the predefined operators reduce.
pub trait Reduce: Pod {
    /// `acc[i] = acc[i] op x[i]`; `Err` if `op` does not apply to the type.
    fn reduce(op: Op, acc: &mut [Self], x: &[Self]) -> Result<(), Error>;
}

/// Element-wise `acc[i] = f(acc[i], x[i])`, monomorphised per operator so the loop
/// inlines and vectorises.
#[inline]
fn apply<T: Copy>(acc: &mut [T], x: &[T], f: impl Fn(T, T) -> T) {
    acc.iter_mut().zip(x).for_each(|(a, b)| *a = f(*a, *b));
}

macro_rules! reduce_int {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            fn reduce(op: Op, acc: &mut [Self], x: &[Self]) -> Result<(), Error> {
                match op {
                    Op::Sum => apply(acc, x, <$t>::wrapping_add),
                    Op::Prod => apply(acc, x, <$t>::wrapping_mul),
                    Op::Min => apply(acc, x, |a: $t, b: $t| a.min(b)),
                    Op::Max => apply(acc, x, |a: $t, b: $t| a.max(b)),
                    Op::BitAnd => apply(acc, x, |a: $t, b: $t| a & b),
                    Op::BitOr => apply(acc, x, |a: $t, b: $t| a | b),
                    Op::BitXor => apply(acc, x, |a: $t, b: $t| a ^ b),
                    Op::LogicalAnd => apply(acc, x, |a: $t, b: $t| <$t>::from(a != 0 && b != 0)),
                    Op::LogicalOr => apply(acc, x, |a: $t, b: $t| <$t>::from(a != 0 || b != 0)),
                    Op::MinLoc | Op::MaxLoc => return Err(Error::InvalidArg("MINLOC/MAXLOC of a plain number")),
                }
                Ok(())
            }
        }
    )*};
}
reduce_int!(u8, u16, u32, u64, i8, i16, i32, i64, usize, isize);

macro_rules! reduce_float {
    ($($t:ty),*) => {$(
        impl Reduce for $t {
            fn reduce(op: Op, acc: &mut [Self], x: &[Self]) -> Result<(), Error> {
                match op {
                    Op::Sum => apply(acc, x, |a: $t, b: $t| a + b),
                    Op::Prod => apply(acc, x, |a: $t, b: $t| a * b),
                    Op::Min => apply(acc, x, <$t>::min),
                    Op::Max => apply(acc, x, <$t>::max),
                    _ => return Err(Error::InvalidArg("bitwise or logical reduction of floating-point data")),
                }
                Ok(())
            }
        }
    )*};
}
reduce_float!(f32, f64);

macro_rules! loc_pair {
    ($($name:ident($v:ty, $i:ty, $mpi:literal)),*) => {$(
        #[doc = concat!("A value and its index for MINLOC / MAXLOC (", $mpi, ").")]
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq, Default, bytemuck::Pod, bytemuck::Zeroable)]
        pub struct $name {
            /// The value compared.
            pub value: $v,
            /// Its index (ties go to the smallest).
            pub index: $i,
        }

        impl Reduce for $name {
            fn reduce(op: Op, acc: &mut [Self], x: &[Self]) -> Result<(), Error> {
                let pick = |a: Self, b: Self, b_better: bool| {
                    if b_better || (a.value == b.value && b.index < a.index) { b } else { a }
                };
                match op {
                    Op::MinLoc => apply(acc, x, |a: Self, b: Self| pick(a, b, b.value < a.value)),
                    Op::MaxLoc => apply(acc, x, |a: Self, b: Self| pick(a, b, b.value > a.value)),
                    _ => return Err(Error::InvalidArg("value-index pairs reduce only with MINLOC / MAXLOC")),
                }
                Ok(())
            }
        }
    )*};
}
loc_pair!(
    LocF64(f64, i64, "MPI_DOUBLE_INT, 64-bit index"),
    LocF32(f32, i32, "MPI_FLOAT_INT"),
    LocI32(i32, i32, "MPI_2INT"),
    LocI64(i64, i64, "MPI_LONG_INT")
);

/// Checks that `op` applies to `T` before any communication (so every rank fails alike).
fn check_op<T: Reduce>(op: Op) -> Result<(), Error> {
    T::reduce(op, &mut [], &[])
}

/// The byte-level combiner for `T` and `op` (checked with `check_op` first).
fn combiner<T: Reduce>(op: Op) -> impl Fn(&mut [u8], &[u8]) {
    combiner_fn(move |acc: &mut [T], x: &[T]| {
        let _ = T::reduce(op, acc, x);
    })
}

/// The byte-level combiner for an element-wise user function `f(acc, incoming)`. The
/// engine's scratch buffers are byte vectors, so either side may be unaligned for `T`:
/// then the elements are copied to aligned storage first.
fn combiner_fn<T: Pod>(f: impl Fn(&mut [T], &[T])) -> impl Fn(&mut [u8], &[u8]) {
    move |acc: &mut [u8], x: &[u8]| {
        let x_owned;
        let x: &[T] = match bytemuck::try_cast_slice(x) {
            Ok(x) => x,
            Err(_) => {
                x_owned = bytemuck::allocation::pod_collect_to_vec::<u8, T>(x);
                &x_owned
            }
        };
        match bytemuck::try_cast_slice_mut::<u8, T>(acc) {
            Ok(a) => f(a, x),
            Err(_) => {
                let mut a = bytemuck::allocation::pod_collect_to_vec::<u8, T>(acc);
                f(&mut a, x);
                acc.copy_from_slice(bytemuck::cast_slice(&a));
            }
        }
    }
}

fn bytes_mut<T: Pod>(b: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(b)
}

thread_local! {
    /// A non-root's accumulator for reduce, kept between calls (16-byte aligned words,
    /// enough for every element type), so a reduce allocates nothing.
    static ACC: std::cell::RefCell<Vec<u128>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` on a copy of `src` in the thread's reusable accumulator.
fn with_acc<T: Pod, R>(src: &[T], f: impl FnOnce(&mut [T]) -> R) -> R {
    let bytes = std::mem::size_of_val(src);
    ACC.with(|cell| {
        let mut words = cell.take();
        if words.len() * 16 < bytes {
            words.resize(bytes.div_ceil(16), 0);
        }
        let acc: &mut [T] = bytemuck::cast_slice_mut(&mut bytemuck::cast_slice_mut::<u128, u8>(&mut words)[..bytes]);
        acc.copy_from_slice(src);
        let r = f(acc);
        cell.replace(words);
        r
    })
}

/// Whether [`normalize`] changes inputs of `op` (then a contribution cannot be read in
/// place).
fn normalizes(op: Op) -> bool {
    matches!(op, Op::LogicalAnd | Op::LogicalOr)
}

/// Logical operators give 1 or 0: inputs are made so first (a single member's result, or
/// a value no other combines with, is then normalised too).
fn normalize<T: Reduce>(op: Op, buf: &mut [T]) {
    if normalizes(op) {
        let copy = buf.to_vec();
        let _ = T::reduce(op, buf, &copy);
    }
}

/// Element counts or offsets in bytes.
fn in_bytes<T>(v: &[usize]) -> Vec<usize> {
    v.iter().map(|x| x.saturating_mul(std::mem::size_of::<T>())).collect()
}

fn same_len(a: usize, b: usize) -> Result<(), Error> {
    if a == b {
        Ok(())
    } else {
        Err(Error::InvalidArg("send and receive buffers differ in length"))
    }
}

impl Comm {
    fn coll(&self) -> Result<Coll<'_>, Error> {
        let shm = self.inner.shm.as_ref().map(|(c, _)| &**c);
        Coll::begin(&self.inner.shared.engine, self.inner.ctx, self.members(), self.rank() as u32, shm)
    }

    /// [`Comm::coll`] for a barrier, bcast, reduce, allreduce, allgather or alltoall in
    /// which each member contributes `bytes`: on a communicator with a shared-memory
    /// slot, collectively active and with no recognised failure, that collective runs
    /// in shared memory and starts without the engine lock.
    pub(crate) fn coll_short(&self, bytes: usize) -> Result<Coll<'_>, Error> {
        if let Some((c, slot)) = &self.inner.shm {
            if bytes <= runthrough_shm::collarea::COLL_DATA {
                let eng = &self.inner.shared.engine;
                if let Some(coll) = Coll::begin_shm(eng, self.inner.ctx, self.members(), self.rank() as u32, c, *slot) {
                    return Ok(coll);
                }
            }
        }
        self.coll()
    }

    /// [`Comm::coll`] for the byte-level collectives of [`crate::raw`].
    pub(crate) fn coll_any(&self) -> Result<Coll<'_>, Error> {
        self.coll()
    }

    pub(crate) fn coll_root(&self, root: usize) -> Result<u32, Error> {
        self.root(root)
    }

    fn root(&self, root: usize) -> Result<u32, Error> {
        if root < self.size() {
            Ok(root as u32)
        } else {
            Err(Error::InvalidRank { rank: root as i64, size: self.size() as u32 })
        }
    }

    /// Blocks until every live member has called it.
    pub fn barrier(&self) -> Result<(), Error> {
        let r = self.coll_short(0).and_then(|c| c.barrier());
        self.check(r)
    }

    /// Broadcasts `buf` from `root` to every member.
    pub fn bcast<T: Pod>(&self, buf: &mut [T], root: usize) -> Result<(), Error> {
        let r =
            self.root(root).and_then(|root| self.coll_short(std::mem::size_of_val(buf))?.bcast(root, bytes_mut(buf)));
        self.check(r)
    }

    /// Reduces `send` over the live members into `recv` at `root` (`recv` is ignored
    /// elsewhere and may be empty there).
    pub fn reduce<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op, root: usize) -> Result<(), Error> {
        let r = (|| {
            let root = self.root(root)?;
            check_op::<T>(op)?;
            let is_root = self.rank() == root as usize;
            if is_root {
                same_len(send.len(), recv.len())?;
            }
            let c = self.coll_short(std::mem::size_of_val(send))?;
            let (elem, f) = (std::mem::size_of::<T>(), combiner::<T>(op));
            if !normalizes(op) {
                // Long vectors on one node: read `send` in place, no accumulator copy.
                let out = is_root.then(|| bytes_mut(recv));
                if let Some(r) = c.reduce_from(Some(root), bytemuck::cast_slice(send), out, elem, &f) {
                    return r;
                }
            }
            let run = |acc: &mut [T]| {
                normalize(op, acc);
                c.reduce(root, bytes_mut(acc), elem, &f)
            };
            if is_root {
                // The root accumulates in place.
                same_len(send.len(), recv.len())?;
                recv.copy_from_slice(send);
                return run(recv);
            }
            with_acc(send, run)
        })();
        self.check(r)
    }

    /// Reduces `send` over the live members; every member gets the result in `recv`.
    pub fn allreduce<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            check_op::<T>(op)?;
            let c = self.coll_short(std::mem::size_of_val(send))?;
            let (elem, f) = (std::mem::size_of::<T>(), combiner::<T>(op));
            if !normalizes(op) {
                // Long vectors on one node: `send` read in place, no copy into `recv` first.
                if let Some(r) = c.reduce_from(None, bytemuck::cast_slice(send), Some(bytes_mut(recv)), elem, &f) {
                    return r;
                }
            }
            recv.copy_from_slice(send);
            normalize(op, recv);
            c.allreduce(bytes_mut(recv), elem, &f)
        })();
        self.check(r)
    }

    /// Gathers every member's `send` into `recv` at `root`, in rank order (`recv` holds
    /// size × `send.len()` elements there; ignored elsewhere). Segments of failed members
    /// are left unchanged (undefined, R20).
    pub fn gather<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<(), Error> {
        let r = (|| {
            let root_r = self.root(root)?;
            if self.rank() == root {
                same_len(recv.len(), send.len() * self.size())?;
            }
            self.coll()?.gather(root_r, bytemuck::cast_slice(send), bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Scatters `send` (size × `recv.len()` elements at `root`, rank order) so member i
    /// gets block i.
    pub fn scatter<T: Pod>(&self, send: &[T], recv: &mut [T], root: usize) -> Result<(), Error> {
        let r = (|| {
            let root_r = self.root(root)?;
            if self.rank() == root {
                same_len(send.len(), recv.len() * self.size())?;
            }
            self.coll()?.scatter(root_r, bytemuck::cast_slice(send), bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Every member gets every member's `send`, in rank order (`recv` = size × `send`).
    pub fn allgather<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let r = (|| {
            same_len(recv.len(), send.len() * self.size())?;
            self.coll_short(std::mem::size_of_val(send))?.allgather(bytemuck::cast_slice(send), bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Block j of `send` goes to member j; block i of `recv` comes from member i.
    pub fn alltoall<T: Pod>(&self, send: &[T], recv: &mut [T]) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            if !send.len().is_multiple_of(self.size()) {
                return Err(Error::InvalidArg("alltoall buffer is not size × block"));
            }
            self.coll_short(std::mem::size_of_val(send))?.alltoall(bytemuck::cast_slice(send), bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Inclusive prefix reduction over the live members in rank order.
    pub fn scan<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            check_op::<T>(op)?;
            recv.copy_from_slice(send);
            normalize(op, recv);
            self.coll()?.scan(bytes_mut(recv), &combiner::<T>(op))
        })();
        self.check(r)
    }

    /// Exclusive prefix reduction. Returns `false` on the first live member, whose `recv`
    /// is then undefined (R20: "process 0" is the first alive process).
    pub fn exscan<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<bool, Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            check_op::<T>(op)?;
            recv.copy_from_slice(send);
            normalize(op, recv);
            self.coll()?.exscan(bytes_mut(recv), &combiner::<T>(op))
        })();
        self.check(r)
    }

    /// Counts and displacements in bytes at the root; nothing elsewhere (they matter
    /// only there).
    fn root_layout<T>(&self, root: usize, counts: &[usize], displs: &[usize]) -> (Vec<usize>, Vec<usize>) {
        if self.rank() == root {
            (in_bytes::<T>(counts), in_bytes::<T>(displs))
        } else {
            (Vec::new(), Vec::new())
        }
    }

    /// Gathers member i's `send` into `recv[displs[i]..][..counts[i]]` at `root`
    /// (elements; MPI_Gatherv). `recv`, `counts` and `displs` matter only at the root;
    /// ranges of failed members are left unchanged (R20).
    pub fn gatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
        root: usize,
    ) -> Result<(), Error> {
        let r = (|| {
            let root_r = self.root(root)?;
            let (c, d) = self.root_layout::<T>(root, counts, displs);
            if self.rank() == root && counts.get(root) != Some(&send.len()) {
                return Err(Error::InvalidArg("gatherv: the root's count differs from its send length"));
            }
            self.coll()?.gatherv(root_r, bytemuck::cast_slice(send), bytes_mut(recv), &c, &d)
        })();
        self.check(r)
    }

    /// Scatters `send[displs[i]..][..counts[i]]` to member i (elements; MPI_Scatterv);
    /// `send`, `counts` and `displs` matter only at the root.
    pub fn scatterv<T: Pod>(
        &self,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [T],
        root: usize,
    ) -> Result<(), Error> {
        let r = (|| {
            let root_r = self.root(root)?;
            let (c, d) = self.root_layout::<T>(root, counts, displs);
            self.coll()?.scatterv(root_r, bytemuck::cast_slice(send), &c, &d, bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Every member gets member i's `send` in `recv[displs[i]..][..counts[i]]`
    /// (elements; MPI_Allgatherv).
    pub fn allgatherv<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), Error> {
        let r = (|| {
            if counts.get(self.rank()) != Some(&send.len()) {
                return Err(Error::InvalidArg("allgatherv: this member's count differs from its send length"));
            }
            let (c, d) = (in_bytes::<T>(counts), in_bytes::<T>(displs));
            self.coll()?.allgatherv(bytemuck::cast_slice(send), bytes_mut(recv), &c, &d)
        })();
        self.check(r)
    }

    /// Member j gets `send[sdispls[j]..][..scounts[j]]`; member i's block for this one
    /// lands in `recv[rdispls[i]..][..rcounts[i]]` (elements; MPI_Alltoallv).
    pub fn alltoallv<T: Pod>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(), Error> {
        let r = (|| {
            let (sc, sd) = (in_bytes::<T>(scounts), in_bytes::<T>(sdispls));
            let (rc, rd) = (in_bytes::<T>(rcounts), in_bytes::<T>(rdispls));
            self.coll()?.alltoallv(bytemuck::cast_slice(send), &sc, &sd, bytes_mut(recv), &rc, &rd)
        })();
        self.check(r)
    }

    /// Reduces `send` (the sum of `counts` elements) over the live members and gives
    /// member i the `counts[i]` elements of the result starting at the sum of the
    /// counts before it, in `recv` (MPI_Reduce_scatter; done as an allreduce, then each
    /// keeps its block). Blocks of failed members are computed but kept by nobody.
    pub fn reduce_scatter<T: Reduce>(&self, send: &[T], recv: &mut [T], counts: &[usize], op: Op) -> Result<(), Error> {
        let r = (|| {
            if counts.len() != self.size() || counts.iter().sum::<usize>() != send.len() {
                return Err(Error::InvalidArg(
                    "reduce_scatter: counts need one entry per member summing to the send length",
                ));
            }
            same_len(recv.len(), counts[self.rank()])?;
            check_op::<T>(op)?;
            let mut all = send.to_vec();
            normalize(op, &mut all);
            self.coll()?.allreduce(bytes_mut(&mut all), std::mem::size_of::<T>(), &combiner::<T>(op))?;
            let start: usize = counts[..self.rank()].iter().sum();
            recv.copy_from_slice(&all[start..start + recv.len()]);
            Ok(())
        })();
        self.check(r)
    }

    /// Reduces `send` into `recv` at `root` with a user operation `f(acc, incoming)`
    /// (element-wise over equal-length slices; it must be associative and commutative, and
    /// may call [`Comm::group_failed`], R25). `recv` is ignored except at the root.
    pub fn reduce_with<T: Pod>(
        &self,
        send: &[T],
        recv: &mut [T],
        root: usize,
        f: impl Fn(&mut [T], &[T]),
    ) -> Result<(), Error> {
        let r = (|| {
            let root = self.root(root)?;
            let mut acc = send.to_vec();
            self.coll()?.reduce(root, bytes_mut(&mut acc), std::mem::size_of::<T>(), &combiner_fn(f))?;
            if self.rank() == root as usize {
                same_len(send.len(), recv.len())?;
                recv.copy_from_slice(&acc);
            }
            Ok(())
        })();
        self.check(r)
    }

    /// Allreduce with a user operation (see [`Comm::reduce_with`]).
    pub fn allreduce_with<T: Pod>(&self, send: &[T], recv: &mut [T], f: impl Fn(&mut [T], &[T])) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            recv.copy_from_slice(send);
            self.coll()?.allreduce(bytes_mut(recv), std::mem::size_of::<T>(), &combiner_fn(f))
        })();
        self.check(r)
    }

    fn members_of(&self) -> Members<'_> {
        Members { eng: &self.inner.shared.engine, ctx: self.inner.ctx, group: self.members(), me: self.rank() as u32 }
    }

    fn istart<'s>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        kind: Kind,
        user: &'s mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'s>>,
    ) -> Result<CollRequest<'s>, Error> {
        let r = ICollRequest::start(s, self.members_of(), kind, user, contribution, op);
        self.check(r).map(|inner| CollRequest { inner, comm: self })
    }

    /// Starts a barrier (MPI_Ibarrier) in request scope `s`. Errors of the collective,
    /// including a communicator made inactive by a failure, are reported at completion
    /// (R21).
    pub fn ibarrier<'s>(&'s self, s: &'s RequestScope<'s, '_>) -> Result<CollRequest<'s>, Error> {
        self.istart(s, Kind::Barrier, &mut [], None, None)
    }

    /// Starts a broadcast of `buf` from `root` (MPI_Ibcast) in request scope `s`; `buf`
    /// stays borrowed until the scope ends.
    pub fn ibcast<'s, T: Pod>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        buf: &'s mut [T],
        root: usize,
    ) -> Result<CollRequest<'s>, Error> {
        let root = self.check(self.root(root))?;
        self.istart(s, Kind::Bcast { root }, bytes_mut(buf), None, None)
    }

    /// Starts a reduction of `send` (copied at the call) into `recv` at `root`
    /// (MPI_Ireduce) in request scope `s`; `recv` stays borrowed until the scope ends and
    /// is ignored except at the root.
    pub fn ireduce<'s, T: Reduce>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        send: &[T],
        recv: &'s mut [T],
        op: Op,
        root: usize,
    ) -> Result<CollRequest<'s>, Error> {
        let root = self.check(self.root(root).and_then(|r| check_op::<T>(op).map(|()| r)))?;
        let op_kind = op;
        let op: BoxedCombine<'s> = Box::new(combiner::<T>(op));
        if self.rank() == root as usize {
            self.check(same_len(send.len(), recv.len()))?;
            recv.copy_from_slice(send);
            normalize(op_kind, recv);
            self.istart(s, Kind::Reduce { root }, bytes_mut(recv), None, Some(op))
        } else {
            let mut mine = send.to_vec();
            normalize(op_kind, &mut mine);
            self.istart(s, Kind::Reduce { root }, &mut [], Some(bytemuck::cast_slice(&mine)), Some(op))
        }
    }

    /// Starts an allreduce of `send` (copied at the call) into `recv` (MPI_Iallreduce)
    /// in request scope `s`; `recv` stays borrowed until the scope ends.
    pub fn iallreduce<'s, T: Reduce>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        send: &[T],
        recv: &'s mut [T],
        op: Op,
    ) -> Result<CollRequest<'s>, Error> {
        self.check(same_len(send.len(), recv.len()).and_then(|()| check_op::<T>(op)))?;
        recv.copy_from_slice(send);
        normalize(op, recv);
        self.istart(s, Kind::Allreduce, bytes_mut(recv), None, Some(Box::new(combiner::<T>(op))))
    }

    /// Whether collectives may run (false after a member's failure until `validate`).
    pub fn collectives_enabled(&self) -> bool {
        self.inner.shared.engine.lock().collectives_enabled(self.inner.ctx)
    }
}

/// A nonblocking collective in progress (R21), started in a request scope: its buffers
/// stay borrowed until the scope ends, which settles it even if it is leaked; errors (a participant's failure, an inactive communicator) are reported
/// by `test` / `wait` through the communicator's error mode. Rounds of the collective
/// advance when it is tested or waited on; dropping it completes it first (blocking until
/// the other members took part or one failed), as the others wait for this one's part.
#[derive(Debug)]
#[must_use = "a collective request does nothing unless waited on or tested"]
pub struct CollRequest<'a> {
    inner: ICollRequest<'a>,
    comm: &'a Comm,
}

impl CollRequest<'_> {
    /// Blocks until the collective completes.
    pub fn wait(self) -> Result<(), Error> {
        let CollRequest { inner, comm } = self;
        comm.check(inner.wait())
    }

    /// Makes progress; `Ok(true)` once the collective has completed.
    pub fn test(&mut self) -> Result<bool, Error> {
        let r = self.inner.test();
        self.comm.check(r)
    }
}

/// A nonblocking collective is a future of its outcome (executor-agnostic, like
/// [`crate::Request`]'s `Future`): each poll advances its rounds, and a pending `.await`
/// is woken when an operation of the posted round completes (the runtime's progress
/// thread wakes it). Errors go through the communicator's error mode as for `wait`.
impl Future for CollRequest<'_> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let r = std::task::ready!(Pin::new(&mut self.inner).poll(cx));
        Poll::Ready(self.comm.check(r))
    }
}
