//! Typed collectives of the facade: argument checks, the reduction operators, and the
//! error mode, over the engine's byte-level collectives (`runthrough_engine::coll`, which
//! documents the algorithms and the run-through rules R17–R21).

use runthrough_engine::coll::Coll;

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
                    _ => return Err(Error::InvalidArg("bitwise reduction of floating-point data")),
                }
                Ok(())
            }
        }
    )*};
}
reduce_float!(f32, f64);

/// Checks that `op` applies to `T` before any communication (so every rank fails alike).
fn check_op<T: Reduce>(op: Op) -> Result<(), Error> {
    T::reduce(op, &mut [], &[])
}

/// The byte-level combiner for `T` and `op` (checked with `check_op` first). The
/// engine's scratch buffers are byte vectors, so either side may be unaligned for `T`:
/// then the elements are copied to aligned storage first.
fn combiner<T: Reduce>(op: Op) -> impl Fn(&mut [u8], &[u8]) {
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
            Ok(a) => {
                let _ = T::reduce(op, a, x);
            }
            Err(_) => {
                let mut a = bytemuck::allocation::pod_collect_to_vec::<u8, T>(acc);
                let _ = T::reduce(op, &mut a, x);
                acc.copy_from_slice(bytemuck::cast_slice(&a));
            }
        }
    }
}

fn bytes_mut<T: Pod>(b: &mut [T]) -> &mut [u8] {
    bytemuck::cast_slice_mut(b)
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
        Coll::begin(&self.inner.shared.engine, self.inner.ctx, self.members(), self.rank() as u32)
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
        let r = self.coll().and_then(|c| c.barrier());
        self.check(r)
    }

    /// Broadcasts `buf` from `root` to every member.
    pub fn bcast<T: Pod>(&self, buf: &mut [T], root: usize) -> Result<(), Error> {
        let r = self.root(root).and_then(|root| self.coll()?.bcast(root, bytes_mut(buf)));
        self.check(r)
    }

    /// Reduces `send` over the live members into `recv` at `root` (`recv` is ignored
    /// elsewhere and may be empty there).
    pub fn reduce<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op, root: usize) -> Result<(), Error> {
        let r = (|| {
            let root = self.root(root)?;
            check_op::<T>(op)?;
            let mut acc = send.to_vec();
            self.coll()?.reduce(root, bytes_mut(&mut acc), &combiner::<T>(op))?;
            if self.rank() == root as usize {
                same_len(send.len(), recv.len())?;
                recv.copy_from_slice(&acc);
            }
            Ok(())
        })();
        self.check(r)
    }

    /// Reduces `send` over the live members; every member gets the result in `recv`.
    pub fn allreduce<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            check_op::<T>(op)?;
            recv.copy_from_slice(send);
            self.coll()?.allreduce(bytes_mut(recv), std::mem::size_of::<T>(), &combiner::<T>(op))
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
            self.coll()?.allgather(bytemuck::cast_slice(send), bytes_mut(recv))
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
            self.coll()?.alltoall(bytemuck::cast_slice(send), bytes_mut(recv))
        })();
        self.check(r)
    }

    /// Inclusive prefix reduction over the live members in rank order.
    pub fn scan<T: Reduce>(&self, send: &[T], recv: &mut [T], op: Op) -> Result<(), Error> {
        let r = (|| {
            same_len(send.len(), recv.len())?;
            check_op::<T>(op)?;
            recv.copy_from_slice(send);
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
            self.coll()?.exscan(bytes_mut(recv), &combiner::<T>(op))
        })();
        self.check(r)
    }

    /// Whether collectives may run (false after a member's failure until `validate`).
    pub fn collectives_enabled(&self) -> bool {
        self.inner.shared.engine.lock().collectives_enabled(self.inner.ctx)
    }
}
