//! One-sided communication (MPI-4.1 chapter 12) with the run-through rules R34–R37: a
//! [`Window`] exposes memory of every member to the others' `put`, `get`, accumulates
//! and atomics, within the synchronization of fence, post/start/complete/wait or locks.
//!
//! The engine carries the operations (`runthrough_engine::rma` documents the protocol):
//! the target applies them when its engine runs — its own MPI calls, or the runtime's
//! progress thread while it computes — so passive-target access needs nothing from the
//! target's program. The window's memory belongs to the engine while the window exists:
//! a window leaked with `mem::forget` leaks its memory, it is never freed under a
//! writer (R30). The program reaches its own part with [`Window::with_local`],
//! [`Window::read_local`] and [`Window::write_local`], which are exclusive of every
//! operation being applied (the engine lock), so a local load never sees half an
//! element of an accumulate.
//!
//! **Completion.** [`Window::put`] and [`Window::accumulate`] return once their data is
//! copied out (local completion); the target has it after the next [`Window::flush`],
//! unlock, complete or fence. [`Window::get`], [`Window::get_accumulate`],
//! [`Window::fetch_and_op`] and [`Window::compare_and_swap`] block until their result is
//! in; [`Window::rget`] is the request form (inside a request scope).
//!
//! **Failures** (seeds/000 §17.11, R34–R37):
//! - creation is collective over a collectively active communicator and uniform: it
//!   succeeds everywhere or errs everywhere (an agreement ends it);
//! - an operation on a target known failed errs with `RankFailStop` at the call; one in
//!   flight when its target fails errs at its completion (a get at its return, a put at
//!   the next flush, unlock, complete or fence to that target);
//! - a target drops every operation from an origin it knows failed, and releases the
//!   locks that origin held or waited for: no origin waits for a dead holder;
//! - [`Window::fence`] ends with a barrier of the window's members, which errs while an
//!   unrecognized failure exists ([`Window::validate`] recognizes them); [`Window::wait`]
//!   and [`Window::complete`] err when a member of the epoch failed, and the epoch ends;
//! - [`Window::free`] completes despite failures.
//!
//! What memory holds after a failure: an origin's get buffer is undefined after the get
//! erred; a target's memory holds, of a put or accumulate whose origin died while it
//! was in flight, either nothing or a prefix of its records, each applied whole (never
//! bytes outside the operation's range).

use std::marker::PhantomData;
use std::sync::Mutex;

pub use runthrough_engine::handle::rma::Fetch;
use runthrough_engine::handle::rma::{control, fetch, fetch_in};
pub use runthrough_engine::rma::mem::WinMemory;
pub use runthrough_engine::rma::{AccOp, Elem, Target};
use runthrough_engine::RequestScope;

mod create;

use create::{Backing, Segment};

use crate::comm::Comm;
use crate::group::Group;
use crate::request::Request;
use crate::{Error, Pod};

/// Element types of accumulates and atomics (the basic types the predefined operators
/// reduce).
pub trait RmaElem: Pod {
    /// The engine's name of the type.
    const ELEM: Elem;
}

macro_rules! rma_elem {
    ($($t:ty => $e:ident),*) => {$(impl RmaElem for $t { const ELEM: Elem = Elem::$e; })*};
}
rma_elem!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);

/// The kind of a passive-target lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockKind {
    /// `MPI_LOCK_SHARED`: with other shared holders.
    Shared,
    /// `MPI_LOCK_EXCLUSIVE`: alone.
    Exclusive,
}

/// What the window's member tracks of its epochs.
#[derive(Debug, Default)]
struct Epochs {
    /// Targets this process issued operations to since their last completion.
    touched: Vec<bool>,
    /// The access group of a post/start/complete/wait epoch (`start`), if open.
    access: Option<Vec<usize>>,
    /// The exposure group (`post`), if open.
    exposure: Option<Vec<usize>>,
    /// Targets locked by `lock_all`.
    all_locked: bool,
}

/// A window of elements `T` at every member of a communicator.
#[derive(Debug)]
pub struct Window<T: Pod> {
    /// The window's own communicator (a duplicate: its context names the window).
    comm: Comm,
    /// Bytes each member exposes.
    bytes: Vec<usize>,
    /// Each member's displacement unit, in bytes (the element size of a typed window).
    units: Vec<usize>,
    epochs: Mutex<Epochs>,
    /// The node's segment, when the window's memory lives in one (`create.rs`).
    seg: Option<Segment>,
    /// A dynamic window: operations name absolute addresses of attached memory.
    dynamic: bool,
    freed: bool,
    _t: PhantomData<T>,
}

impl Comm {
    /// Creates a window of `len` zeroed elements at this process (`MPI_Win_allocate`);
    /// collective, each member giving its own length.
    pub fn win_allocate<T: Pod>(&self, len: usize) -> Result<Window<T>, Error> {
        let bytes = len.checked_mul(std::mem::size_of::<T>()).ok_or(Error::InvalidArg("window too large"))?;
        Window::create_on(self, Backing::Allocate(bytes), std::mem::size_of::<T>())
    }

    /// Creates a byte window of `bytes` zeroed bytes with displacement unit `disp_unit`
    /// at this process (`MPI_Win_allocate`); [`Window::local_base`] is their address.
    pub fn win_allocate_bytes(&self, bytes: usize, disp_unit: usize) -> Result<Window<u8>, Error> {
        if disp_unit == 0 {
            return Err(self.check_error(Error::InvalidArg("displacement unit 0")));
        }
        Window::create_on(self, Backing::Allocate(bytes), disp_unit)
    }

    /// Creates a byte window whose members' memory is one segment every member maps
    /// (`MPI_Win_allocate_shared`): each member's `bytes` right after the previous
    /// member's; [`Window::shared_query`] gives any member's part. Every member must be
    /// on one host (else `Error::Unsupported` everywhere).
    pub fn win_allocate_shared(&self, bytes: usize, disp_unit: usize) -> Result<Window<u8>, Error> {
        if disp_unit == 0 {
            return Err(self.check_error(Error::InvalidArg("displacement unit 0")));
        }
        Window::create_on(self, Backing::Shared(bytes), disp_unit)
    }

    /// Creates a byte window exposing `mem` with displacement unit `disp_unit` bytes at
    /// this process (each member its own): the C interface's `MPI_Win_create` and
    /// `MPI_Win_allocate` (`WinMemory::external` wraps the program's memory).
    pub fn win_with_memory(&self, mem: WinMemory, disp_unit: usize) -> Result<Window<u8>, Error> {
        if disp_unit == 0 {
            return Err(self.check_error(Error::InvalidArg("displacement unit 0")));
        }
        Window::create_on(self, Backing::Given(mem), disp_unit)
    }

    /// Creates a dynamic byte window (`MPI_Win_create_dynamic`): no memory until each
    /// member attaches some ([`Window::attach`]); operations name the absolute address
    /// of the target's attached memory as displacement (unit 1).
    pub fn win_create_dynamic(&self) -> Result<Window<u8>, Error> {
        Window::create_on(self, Backing::Dynamic, 1)
    }

    /// Creates a window exposing `mem` (`MPI_Win_create`); collective. The window owns
    /// the elements until [`Window::free`] hands them back.
    pub fn win_create<T: Pod>(&self, mem: Vec<T>) -> Result<Window<T>, Error> {
        let mem = WinMemory::from_bytes(bytemuck::cast_slice(&mem));
        Window::create_on(self, Backing::Given(mem), std::mem::size_of::<T>())
    }
}

impl<T: Pod> Window<T> {
    fn eng(&self) -> &runthrough_engine::lock::BiasedMutex<runthrough_engine::Engine> {
        &self.comm.inner.shared.engine
    }

    fn epochs(&self) -> std::sync::MutexGuard<'_, Epochs> {
        self.epochs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The window's rank of this process.
    pub fn rank(&self) -> usize {
        self.comm.rank()
    }

    /// The number of members.
    pub fn size(&self) -> usize {
        self.comm.size()
    }

    /// The elements `rank` exposes (its bytes over the element size).
    pub fn len_of(&self, rank: usize) -> usize {
        self.bytes.get(rank).copied().unwrap_or(0) / std::mem::size_of::<T>().max(1)
    }

    /// The bytes `rank` exposes and its displacement unit.
    pub fn extent_of(&self, rank: usize) -> Option<(usize, usize)> {
        Some((*self.bytes.get(rank)?, *self.units.get(rank)?))
    }

    /// The address of this process's window memory (`MPI_WIN_BASE`), valid until the
    /// window is dropped.
    pub fn local_base(&self) -> *mut u8 {
        self.eng().lock().win_base(self.comm.inner.ctx).map_or(std::ptr::null_mut(), |(p, _)| p)
    }

    /// Attaches `mem` to this process's part of a dynamic window (`MPI_Win_attach`) and
    /// returns its address: the displacement other members name to reach it. The window
    /// owns the memory until [`Window::detach`] hands it back (or the window is freed).
    pub fn attach(&self, mem: WinMemory) -> Result<usize, Error> {
        let at = mem.base() as usize;
        let r = self.eng().lock().win_attach(self.comm.inner.ctx, mem);
        self.comm.check(r).map(|()| at)
    }

    /// Detaches the memory attached at address `at` (`MPI_Win_detach`) and hands it
    /// back. Operations issued later that name it are refused at the target.
    pub fn detach(&self, at: usize) -> Result<WinMemory, Error> {
        let r = self.eng().lock().win_detach(self.comm.inner.ctx, at as *const u8);
        self.comm.check(r)
    }

    /// Whether this is a dynamic window (operations name absolute addresses).
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// Member `rank`'s memory as this process maps it — address, bytes and displacement
    /// unit — when it lies in a segment this process maps (`MPI_Win_shared_query`: every
    /// member of a shared window; the members of this node of an allocated window).
    /// Loads and stores through the address follow MPI's rules for window memory (the
    /// unified model); the address stays valid until the window is dropped.
    pub fn shared_query(&self, rank: usize) -> Option<(*mut u8, usize, usize)> {
        let seg = self.seg.as_ref()?;
        let (off, bytes) = (*seg.parts.get(rank)?)?;
        Some((seg.map.ptr().wrapping_add(off), bytes, self.units[rank]))
    }

    /// Sets the error mode of the window's operations (default: its communicator's).
    pub fn set_error_mode(&self, mode: crate::ErrorMode) {
        self.comm.set_error_mode(mode);
    }

    /// The engine the window's operations run on, for the C interface's request forms.
    pub fn engine(&self) -> &std::sync::Arc<runthrough_engine::lock::BiasedMutex<runthrough_engine::Engine>> {
        &self.comm.inner.shared.engine
    }

    /// The members (`MPI_Win_get_group`).
    pub fn group(&self) -> Group {
        self.comm.group()
    }

    /// The failed members this process knows of (`MPIX_Win_get_failed`, R37).
    pub fn group_failed(&self) -> Group {
        self.comm.group_failed()
    }

    /// Recognizes every failed member uniformly and re-enables the window's collective
    /// synchronization (fence, free): `MPIX_Win_validate` (R37). Returns the failed group,
    /// the same at every member.
    pub fn validate(&self) -> Result<Group, Error> {
        self.comm.validate()
    }

    /// [`Window::validate`] as a request (`MPIX_Win_ivalidate`): its `wait` gives the
    /// failed group.
    pub fn ivalidate(&self) -> Result<crate::ValidateRequest<'_>, Error> {
        self.comm.ivalidate()
    }

    /// [`Window::ivalidate`] as a ticket that borrows nothing (for requests that must
    /// outlive a borrow: the C interface's `MPIX_Iwin_validate`); poll it with
    /// [`Window::poll_ticket`].
    pub fn ivalidate_ticket(&self) -> Result<crate::AgreeTicket, Error> {
        self.comm.ivalidate_ticket()
    }

    /// Progresses; once the ticket's agreement decided, the failed group (a validate's
    /// decision applied here). Once only: `None` before and after.
    pub fn poll_ticket(&self, t: &mut crate::AgreeTicket) -> Option<crate::Decided> {
        self.comm.poll_ticket(t)
    }

    /// The byte target of element `disp` at `rank`, checked against its window.
    fn target(&self, rank: usize, disp: usize, len: usize) -> Result<Target, Error> {
        self.target_bytes(rank, disp, len * std::mem::size_of::<T>())
    }

    /// The target of displacement `disp` (in `rank`'s displacement units) for `len`
    /// bytes, checked against `rank`'s window: what an operation of the C interface
    /// names.
    pub fn target_bytes(&self, rank: usize, disp: usize, len: usize) -> Result<Target, Error> {
        let size = self.bytes.len();
        if rank >= size {
            return Err(Error::InvalidRank { rank: rank as i64, size: size as u32 });
        }
        if self.dynamic {
            // An address of the target's attached memory, which the target checks.
            disp.checked_add(len).ok_or(Error::InvalidArg("operation past the end of memory"))?;
            return Ok(Target { ctx: self.comm.inner.ctx, rank: rank as u32, disp: disp as u64 });
        }
        let start = disp.checked_mul(self.units[rank]);
        if start.and_then(|s| s.checked_add(len)).is_none_or(|end| end > self.bytes[rank]) {
            return Err(Error::InvalidArg("operation outside the target's window"));
        }
        Ok(Target { ctx: self.comm.inner.ctx, rank: rank as u32, disp: start.unwrap_or(0) as u64 })
    }

    /// Marks `rank` as a target of operations to complete at the next flush or fence
    /// (the C interface's request forms, which start operations themselves).
    pub fn touch(&self, rank: usize) {
        if let Some(t) = self.epochs().touched.get_mut(rank) {
            *t = true;
        }
    }

    /// Runs `f` on this process's part of the window, exclusive of every operation this
    /// process's engine applies to it (short work: the engine waits meanwhile). Members
    /// on this node that reach the window directly (an allocated window's segment) are
    /// not held off: as MPI says, the program must not access what an operation in
    /// progress updates.
    pub fn with_local<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> Result<R, Error> {
        let r = self.eng().lock().win_local(self.comm.inner.ctx, |b| {
            bytemuck::try_cast_slice_mut::<u8, T>(b)
                .map(f)
                .map_err(|_| Error::ApiMisuse("window memory misaligned for T"))
        });
        self.comm.check(r.unwrap_or(Err(Error::ApiMisuse("window freed"))))
    }

    /// Copies elements `[offset, offset + out.len())` of this process's part to `out`.
    pub fn read_local(&self, offset: usize, out: &mut [T]) -> Result<(), Error> {
        self.with_local(|m| m.get(offset..offset + out.len()).map(|s| out.copy_from_slice(s)))?
            .ok_or(Error::InvalidArg("read outside the local window"))
    }

    /// Copies `data` to elements `[offset, offset + data.len())` of this process's part.
    pub fn write_local(&self, offset: usize, data: &[T]) -> Result<(), Error> {
        self.with_local(|m| m.get_mut(offset..offset + data.len()).map(|s| s.copy_from_slice(data)))?
            .ok_or(Error::InvalidArg("write outside the local window"))
    }

    /// Puts `data` at element `disp` of `target`'s window (`MPI_Put`).
    pub fn put(&self, data: &[T], target: usize, disp: usize) -> Result<(), Error> {
        self.put_to(self.target(target, disp, data.len()), bytemuck::cast_slice(data))
    }

    /// The direct access to `rank` (a member on this node whose memory is mapped here).
    #[inline]
    fn direct(&self, rank: u32) -> Option<&runthrough_engine::rma::direct::DirectWin> {
        self.seg.as_ref().map(|s| &*s.direct).filter(|d| d.reaches(rank))
    }

    /// Puts `data` at `at` (checked), marking its target for the next flush.
    fn put_to(&self, at: Result<Target, Error>, data: &[u8]) -> Result<(), Error> {
        if let Ok(Some(r)) = at.as_ref().map(|t| self.direct(t.rank).and_then(|d| d.put(t.rank, t.disp, data))) {
            return self.comm.check(r);
        }
        let r = at.and_then(|at| {
            self.touch(at.rank as usize);
            self.eng().lock().rma_put(at, data)
        });
        self.comm.check(r)
    }

    /// Accumulates `data` (elements `elem`) at `at` (checked) with `op`.
    fn acc_to(&self, at: Result<Target, Error>, op: AccOp, elem: Elem, data: &[u8]) -> Result<(), Error> {
        let direct = |t: &Target| self.direct(t.rank).and_then(|d| d.accumulate(t.rank, t.disp, op, elem, data, None));
        if let Ok(Some(r)) = at.as_ref().map(direct) {
            return self.comm.check(r);
        }
        let r = at.and_then(|at| {
            self.touch(at.rank as usize);
            self.eng().lock().rma_acc(at, op, elem, data)
        });
        self.comm.check(r)
    }

    /// A blocking get-like operation at `at` (checked) into `result`.
    fn fetch_from(&self, at: Result<Target, Error>, what: Fetch<'_>, result: &mut [u8]) -> Result<(), Error> {
        if let Some(d) = at.as_ref().ok().and_then(|t| self.direct(t.rank)) {
            let t = at.as_ref().map_or(0, |t| t.rank);
            let disp = at.as_ref().map_or(0, |t| t.disp);
            let r = match what {
                Fetch::Get => d.get(t, disp, result),
                Fetch::Acc { op, elem, origin } => d.accumulate(t, disp, op, elem, origin, Some(result)),
                Fetch::Cas { elem, compare, new } => d.compare_and_swap(t, disp, elem, compare, new, result),
            };
            if let Some(r) = r {
                return self.comm.check(r);
            }
        }
        let r = at.and_then(|at| fetch(self.eng(), at, what, result).map(drop));
        self.comm.check(r)
    }

    /// Reads `buf.len()` elements at `disp` of `target`'s window into `buf`
    /// (`MPI_Get` completed at once).
    pub fn get(&self, buf: &mut [T], target: usize, disp: usize) -> Result<(), Error> {
        self.fetch_from(self.target(target, disp, buf.len()), Fetch::Get, bytemuck::cast_slice_mut(buf))
    }

    /// `MPI_Rget`: a get whose request is waited for later, within the request scope
    /// `s` (which borrows `buf` until it ends and settles the request whatever happens).
    pub fn rget<'s>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        buf: &'s mut [T],
        target: usize,
        disp: usize,
    ) -> Result<Request<'s>, Error> {
        let at = self.comm.check(self.target(target, disp, buf.len()))?;
        let inner = fetch_in(s, self.eng(), at, Fetch::Get, bytemuck::cast_slice_mut(buf));
        Ok(Request { inner, comm: &self.comm })
    }

    /// `MPI_Rput`: a put whose request completes when `data` may be reused — at once,
    /// since a put copies its data out at the call (remote completion is still the
    /// next flush, unlock, complete or fence).
    pub fn rput(&self, data: &[T], target: usize, disp: usize) -> Result<Request<'_>, Error> {
        self.put(data, target, disp)?;
        let ctx = self.comm.inner.ctx;
        let inner = runthrough_engine::handle::rma::control_request(self.eng(), |e| e.rma_done(ctx, target as u32));
        Ok(Request { inner, comm: &self.comm })
    }

    /// Flushes every target this process issued operations to, then waits at a barrier
    /// of the members (`MPI_Win_fence`): every operation of the epoch is complete at its
    /// target when it returns. Errs (after the barrier) if a flush did, and while an
    /// unrecognized failure exists (R36).
    pub fn fence(&self) -> Result<(), Error> {
        let flushed = self.flush_all_inner();
        // Direct stores (members on this node) are ordered before the barrier's.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let r = self.comm.barrier();
        self.comm.check(flushed.and(r))
    }

    /// Completes at `target` every operation this process issued to it (`MPI_Win_flush`).
    pub fn flush(&self, target: usize) -> Result<(), Error> {
        let r = self.flush_one(target);
        self.comm.check(r)
    }

    fn flush_one(&self, target: usize) -> Result<(), Error> {
        // A member reached directly may still have records of this process's to wait for
        // (an accumulate of an extension element when the window spans nodes).
        let records = self.epochs().touched.get_mut(target).is_some_and(std::mem::take);
        if !records {
            if let Some(r) = self.direct(target as u32).and_then(|d| d.flush(target as u32)) {
                return r;
            }
        }
        let ctx = self.comm.inner.ctx;
        control(self.eng(), |e| e.rma_flush(ctx, target as u32)).map(drop)
    }

    /// [`Window::flush`] of every target this process issued operations to
    /// (`MPI_Win_flush_all`); the first error is returned, every flush is done.
    pub fn flush_all(&self) -> Result<(), Error> {
        let r = self.flush_all_inner();
        self.comm.check(r)
    }

    fn flush_all_inner(&self) -> Result<(), Error> {
        let touched: Vec<usize> =
            self.epochs().touched.iter().enumerate().filter(|(_, t)| **t).map(|(i, _)| i).collect();
        let mut first = Ok(());
        for t in touched {
            let r = self.flush_one(t);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// `MPI_Win_flush_local`: operations are complete locally when issued here, so
    /// this only checks the target.
    pub fn flush_local(&self, target: usize) -> Result<(), Error> {
        let r = self.target(target, 0, 0).map(drop);
        self.comm.check(r)
    }

    /// `MPI_Win_sync`: the window has one copy (the unified model), nothing to do.
    pub fn sync(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Locks `target`'s window (`MPI_Win_lock`): returns once granted (shared holders
    /// together, an exclusive one alone), or errs if `target` fails first.
    pub fn lock(&self, kind: LockKind, target: usize) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        let r = self.target(target, 0, 0).and_then(|_| match self.node_locks() {
            Some(d) => self.lock_direct(d, target as u32, kind == LockKind::Exclusive),
            None => control(self.eng(), |e| e.rma_lock(ctx, target as u32, kind == LockKind::Exclusive)).map(drop),
        });
        self.comm.check(r)
    }

    /// The direct access of a window whose members are all on this node (its locks are
    /// words in the segment), shared: what a caller keeps for its own fast path (the C
    /// interface's puts, gets, atomics and flushes). Every operation on such a window is
    /// applied at its call, so a flush of any member is a memory fence; the mapping lives
    /// as long as the caller keeps this.
    pub fn node_access(&self) -> Option<std::sync::Arc<runthrough_engine::rma::direct::DirectWin>> {
        self.seg.as_ref().map(|s| s.direct.clone()).filter(|d| d.has_locks())
    }

    /// Applies the window's error mode to `e`, an error of an operation done through
    /// [`Window::node_access`] (as this window's own operations do).
    pub fn check_error(&self, e: Error) -> Error {
        self.comm.check_error(e)
    }

    /// The direct access of a window whose members are all on this node: its locks are
    /// words in the segment.
    fn node_locks(&self) -> Option<&runthrough_engine::rma::direct::DirectWin> {
        self.seg.as_ref().map(|s| &*s.direct).filter(|d| d.has_locks())
    }

    /// Takes `target`'s lock in the segment: attempts until held, snoozing between
    /// them (the progress thread meanwhile runs the failure detector, whose verdicts
    /// release dead holders' locks and end the wait on a dead target).
    fn lock_direct(
        &self,
        d: &runthrough_engine::rma::direct::DirectWin,
        target: u32,
        exclusive: bool,
    ) -> Result<(), Error> {
        use runthrough_engine::rma::direct::Attempt;
        let me = self.rank() as u32;
        let mut waiter = self.comm.inner.shared.waiter();
        let mut tries = 0u32;
        while d.try_lock(target, me, exclusive)? == Attempt::Wait {
            tries = tries.wrapping_add(1);
            if tries.is_multiple_of(256) {
                self.eng().lock().progress();
            }
            waiter.snooze();
        }
        Ok(())
    }

    /// Unlocks `target`'s window (`MPI_Win_unlock`): every operation this process issued
    /// to it is complete there when it returns.
    pub fn unlock(&self, target: usize) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        if let Some(t) = self.epochs().touched.get_mut(target) {
            *t = false;
        }
        let r = self.target(target, 0, 0).and_then(|_| match self.node_locks() {
            Some(d) => d.unlock(target as u32, self.rank() as u32),
            None => control(self.eng(), |e| e.rma_unlock(ctx, target as u32)).map(drop),
        });
        self.comm.check(r)
    }

    /// Shared locks on every member (`MPI_Win_lock_all`). Failed members are skipped
    /// (R36: recognized failures are excluded); a member that fails meanwhile makes it
    /// err with the others still locked, as `unlock_all` then releases.
    pub fn lock_all(&self) -> Result<(), Error> {
        let mut first = Ok(());
        for t in self.live_members() {
            let ctx = self.comm.inner.ctx;
            let r = match self.node_locks() {
                Some(d) => self.lock_direct(d, t as u32, false),
                None => control(self.eng(), |e| e.rma_lock(ctx, t as u32, false)).map(drop),
            };
            if first.is_ok() {
                first = r;
            }
        }
        self.epochs().all_locked = true;
        self.comm.check(first)
    }

    /// Releases [`Window::lock_all`]'s locks (`MPI_Win_unlock_all`).
    pub fn unlock_all(&self) -> Result<(), Error> {
        let mut first = Ok(());
        for t in self.live_members() {
            let ctx = self.comm.inner.ctx;
            let r = match self.node_locks() {
                Some(d) => d.unlock(t as u32, self.rank() as u32),
                None => control(self.eng(), |e| e.rma_unlock(ctx, t as u32)).map(drop),
            };
            if first.is_ok() {
                first = r;
            }
        }
        let mut ep = self.epochs();
        ep.all_locked = false;
        ep.touched.iter_mut().for_each(|t| *t = false);
        drop(ep);
        self.comm.check(first)
    }

    fn live_members(&self) -> Vec<usize> {
        let failed = self.comm.inner.shared.engine.lock().failed_in(self.comm.inner.ctx);
        (0..self.size()).filter(|r| !failed.contains(&(*r as u32))).collect()
    }

    /// Exposes this window to the origins `group` (window ranks) (`MPI_Win_post`).
    pub fn post(&self, group: &[usize]) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        let r = (|| {
            let mut ep = self.epochs();
            if ep.exposure.is_some() {
                return Err(Error::ApiMisuse("post while an exposure epoch is open"));
            }
            ep.exposure = Some(group.to_vec());
            drop(ep);
            let mut first = Ok(());
            for &o in group {
                let r = self.target(o, 0, 0).and_then(|_| self.eng().lock().rma_post(ctx, o as u32));
                if first.is_ok() {
                    first = r;
                }
            }
            first
        })();
        self.comm.check(r)
    }

    /// Starts an access epoch to the targets `group` (`MPI_Win_start`): returns once
    /// each has posted, or errs if one fails first.
    pub fn start(&self, group: &[usize]) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        let r = (|| {
            if self.epochs().access.is_some() {
                return Err(Error::ApiMisuse("start while an access epoch is open"));
            }
            for &t in group {
                self.target(t, 0, 0)?;
            }
            self.epochs().access = Some(group.to_vec());
            self.await_each(group, |e, t| e.rma_take_post(ctx, t))
        })();
        self.comm.check(r)
    }

    /// Ends the access epoch (`MPI_Win_complete`): tells each target of `start` that
    /// this origin is done, behind its operations. Errs if a target failed during the
    /// epoch; the epoch ends anyway.
    pub fn complete(&self) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        let r = (|| {
            let group = self.epochs().access.take().ok_or(Error::ApiMisuse("complete without start"))?;
            let mut first = Ok(());
            for t in group {
                let r = self.eng().lock().rma_complete(ctx, t as u32);
                if first.is_ok() {
                    first = r;
                }
                if let Some(x) = self.epochs().touched.get_mut(t) {
                    *x = false;
                }
            }
            first
        })();
        self.comm.check(r)
    }

    /// Ends the exposure epoch (`MPI_Win_wait`): returns once every origin of `post`
    /// completed its access; errs if one failed first (the epoch ends anyway).
    pub fn wait(&self) -> Result<(), Error> {
        let ctx = self.comm.inner.ctx;
        let r = (|| {
            let group = self.epochs().exposure.take().ok_or(Error::ApiMisuse("wait without post"))?;
            self.await_each(&group, |e, o| e.rma_take_complete(ctx, o))
        })();
        self.comm.check(r)
    }

    /// `MPI_Win_test`: `Ok(true)` and the exposure epoch ends if every origin completed,
    /// else `Ok(false)` (nothing taken).
    pub fn test(&self) -> Result<bool, Error> {
        let ctx = self.comm.inner.ctx;
        let r = (|| {
            let group = self.epochs().exposure.clone().ok_or(Error::ApiMisuse("test without post"))?;
            let mut e = self.eng().lock();
            e.progress();
            // Taken only when every origin's notice is there: a false leaves them.
            let ready = group.iter().all(|&o| e.rma_has_complete(ctx, o as u32));
            if ready {
                for &o in &group {
                    e.rma_take_complete(ctx, o as u32);
                }
                drop(e);
                self.epochs().exposure = None;
            }
            Ok(ready)
        })();
        self.comm.check(r)
    }

    /// Waits until `take` succeeds for every member of `group` (a notice from each), or
    /// one of them fails (`RankFailStop` naming it; the rest are still waited for).
    fn await_each(
        &self,
        group: &[usize],
        take: impl Fn(&mut runthrough_engine::Engine, u32) -> bool,
    ) -> Result<(), Error> {
        let mut left: Vec<usize> = group.to_vec();
        let mut err = None;
        let mut waiter = self.comm.inner.shared.waiter();
        while !left.is_empty() {
            {
                let mut e = self.eng().lock();
                e.progress();
                let failed = e.failed_in(self.comm.inner.ctx);
                left.retain(|&m| {
                    if take(&mut e, m as u32) {
                        return false;
                    }
                    if failed.contains(&(m as u32)) {
                        err.get_or_insert(Error::RankFailStop { rank: m as u32 });
                        return false;
                    }
                    true
                });
            }
            if !left.is_empty() {
                waiter.snooze();
            }
        }
        err.map_or(Ok(()), Err)
    }

    /// Frees the window (`MPI_Win_free`): collective; every operation on it is complete
    /// everywhere first (a barrier of the members, which proceeds past failed ones). Hands
    /// back this process's elements. Completes despite failures: the memory is returned
    /// even when the barrier erred (the error is returned with it).
    pub fn free(mut self) -> (Vec<T>, Result<(), Error>) {
        let flushed = self.flush_all_inner();
        let barrier = self.comm.barrier();
        self.freed = true;
        let mem = self.eng().lock().win_free(self.comm.inner.ctx);
        let data = mem.map(|m| bytemuck::pod_collect_to_vec(m.bytes())).unwrap_or_default();
        (data, self.comm.check(flushed.and(barrier)))
    }
}

impl<T: RmaElem> Window<T> {
    /// Accumulates `data` into `target`'s window at `disp` with `op`
    /// (`MPI_Accumulate`): element-wise atomic, ordered with this origin's other
    /// accumulates to the same target.
    pub fn accumulate(&self, data: &[T], target: usize, disp: usize, op: AccOp) -> Result<(), Error> {
        self.acc_to(self.target(target, disp, data.len()), op, T::ELEM, bytemuck::cast_slice(data))
    }

    /// `MPI_Get_accumulate`: `result` receives the target's elements as they were, and
    /// `data` is accumulated into them with `op` (`NoOp`: a read), atomically.
    pub fn get_accumulate(
        &self,
        data: &[T],
        result: &mut [T],
        target: usize,
        disp: usize,
        op: AccOp,
    ) -> Result<(), Error> {
        let what = Fetch::Acc { op, elem: T::ELEM, origin: bytemuck::cast_slice(data) };
        self.fetch_from(self.target(target, disp, result.len()), what, bytemuck::cast_slice_mut(result))
    }

    /// `MPI_Raccumulate`: an accumulate whose request completes when `data` may be
    /// reused (at once, as [`Window::rput`]).
    pub fn raccumulate(&self, data: &[T], target: usize, disp: usize, op: AccOp) -> Result<Request<'_>, Error> {
        self.accumulate(data, target, disp, op)?;
        let ctx = self.comm.inner.ctx;
        let inner = runthrough_engine::handle::rma::control_request(self.eng(), |e| e.rma_done(ctx, target as u32));
        Ok(Request { inner, comm: &self.comm })
    }

    /// `MPI_Rget_accumulate`: [`Window::get_accumulate`] whose request is waited for
    /// later, within the request scope `s` (which borrows `result` until it ends).
    pub fn rget_accumulate<'s>(
        &'s self,
        s: &'s RequestScope<'s, '_>,
        data: &[T],
        result: &'s mut [T],
        target: usize,
        disp: usize,
        op: AccOp,
    ) -> Result<Request<'s>, Error> {
        let at = self.comm.check(self.target(target, disp, result.len()))?;
        let what = Fetch::Acc { op, elem: T::ELEM, origin: bytemuck::cast_slice(data) };
        let inner = fetch_in(s, self.eng(), at, what, bytemuck::cast_slice_mut(result));
        Ok(Request { inner, comm: &self.comm })
    }

    /// `MPI_Fetch_and_op`: the target's element before `op` with `value`.
    pub fn fetch_and_op(&self, value: T, target: usize, disp: usize, op: AccOp) -> Result<T, Error> {
        let mut out = [value];
        self.get_accumulate(&[value], &mut out, target, disp, op)?;
        Ok(out[0])
    }

    /// `MPI_Compare_and_swap`: the target's element; it became `new` if it equalled
    /// `compare` (bitwise).
    pub fn compare_and_swap(&self, compare: T, new: T, target: usize, disp: usize) -> Result<T, Error> {
        let mut out = [compare];
        let what = Fetch::Cas { elem: T::ELEM, compare: bytemuck::bytes_of(&compare), new: bytemuck::bytes_of(&new) };
        self.fetch_from(self.target(target, disp, 1), what, bytemuck::cast_slice_mut(&mut out))?;
        Ok(out[0])
    }
}

impl Window<u8> {
    /// Puts `data` at `at` (from [`Window::target_bytes`]): the C interface's contiguous
    /// `MPI_Put`, direct to a member on this node.
    pub fn put_target(&self, at: Target, data: &[u8]) -> Result<(), Error> {
        self.put_to(Ok(at), data)
    }

    /// Accumulates `data` (elements `elem`) at `at` with `op`.
    pub fn accumulate_target(&self, at: Target, op: AccOp, elem: Elem, data: &[u8]) -> Result<(), Error> {
        self.acc_to(Ok(at), op, elem, data)
    }

    /// A blocking get, get-accumulate or compare-and-swap at `at` into `result`.
    pub fn fetch_target(&self, at: Target, what: Fetch<'_>, result: &mut [u8]) -> Result<(), Error> {
        self.fetch_from(Ok(at), what, result)
    }

    /// [`Window::put`] at displacement `disp` in `target`'s units.
    pub fn put_at(&self, data: &[u8], target: usize, disp: usize) -> Result<(), Error> {
        self.put_to(self.target_bytes(target, disp, data.len()), data)
    }

    /// [`Window::get`] at displacement `disp` in `target`'s units.
    pub fn get_at(&self, buf: &mut [u8], target: usize, disp: usize) -> Result<(), Error> {
        self.fetch_from(self.target_bytes(target, disp, buf.len()), Fetch::Get, buf)
    }

    /// [`Window::accumulate`] of elements `elem` given as bytes, at displacement `disp`
    /// in `target`'s units.
    pub fn accumulate_at(&self, data: &[u8], elem: Elem, target: usize, disp: usize, op: AccOp) -> Result<(), Error> {
        self.acc_to(self.target_bytes(target, disp, data.len()), op, elem, data)
    }

    /// [`Window::get_accumulate`] of elements `elem` given as bytes.
    pub fn get_accumulate_at(
        &self,
        data: &[u8],
        result: &mut [u8],
        elem: Elem,
        target: usize,
        disp: usize,
        op: AccOp,
    ) -> Result<(), Error> {
        self.fetch_from(self.target_bytes(target, disp, result.len()), Fetch::Acc { op, elem, origin: data }, result)
    }

    /// [`Window::compare_and_swap`] of one element `elem` given as bytes.
    pub fn compare_and_swap_at(
        &self,
        compare: &[u8],
        new: &[u8],
        result: &mut [u8],
        elem: Elem,
        target: usize,
        disp: usize,
    ) -> Result<(), Error> {
        self.fetch_from(self.target_bytes(target, disp, elem.size()), Fetch::Cas { elem, compare, new }, result)
    }
}

impl<T: Pod> Drop for Window<T> {
    /// A window dropped without [`Window::free`] is freed here alone: operations that
    /// reach it later are refused.
    fn drop(&mut self) {
        if !self.freed {
            self.eng().lock().win_free(self.comm.inner.ctx);
        }
    }
}
