//! Nonblocking collectives the engine owns (R21): a schedule of rounds
//! (`crate::rounds`) over a byte arena it owns, advanced by every [`Engine::progress`]
//! call — the application's waits, any other MPI call's progress, the runtime's
//! progress thread — so a collective moves on while its caller is blocked elsewhere or
//! computing, with no thread of its own. This is what a library that translates another
//! API (the standard ABI) starts for `MPI_I*` and persistent collectives: it lays the
//! program's data out in the arena, starts the schedule, and takes the arena back with
//! the outcome from [`Scheduled::take`].
//!
//! Safety of the raw views the schedule posts: the arena is a `Vec` the schedule owns,
//! sized once before the first round is posted and never resized; the schedule (and so
//! the arena) is dropped only once nothing it posted is pending; every range of its
//! plan is checked to lie inside the arena at the start.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::Engine;
use crate::buf::{RawBuf, RawBufMut};
use crate::coll_state::CollView;
use crate::error::Error;
use crate::matching::Pattern;
use crate::rounds::{Begun, Bufs, Combine, Ops, Plan, Runner};
use crate::types::{ContextId, Rank, ReqId, SendTarget, Tag};

/// An element-wise reduction `acc = incoming op acc` a schedule applies; it may run on
/// any thread that progresses the engine.
pub type SendCombine = Box<dyn Fn(&mut [u8], &[u8]) + Send>;

/// A schedule's outcome and its arena, given back when it ended.
pub type Ended = (Result<(), Error>, Vec<u8>);

/// The outcome of a schedule the engine owns: set once, when it ended.
#[derive(Debug, Default)]
pub struct Scheduled {
    done: AtomicBool,
    out: Mutex<Option<Ended>>,
}

impl Scheduled {
    /// Whether the schedule ended (its outcome may have been taken already).
    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// The outcome and the arena, once ended (once: later calls give `None`).
    pub fn take(&self) -> Option<Ended> {
        if !self.is_done() {
            return None;
        }
        self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take()
    }

    fn set(&self, outcome: Result<(), Error>, arena: Vec<u8>) {
        *self.out.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((outcome, arena));
        self.done.store(true, Ordering::Release);
    }
}

/// A schedule in progress and what it owns.
pub(super) struct Owned {
    run: Runner,
    /// Sized before the first post, never resized: the runner's posted views point in.
    arena: Vec<u8>,
    op: Option<SendCombine>,
    out: Arc<Scheduled>,
    /// The program's send and receive areas, for an exchange over them
    /// ([`Engine::start_exchange`]) instead of the arena.
    ext: Option<Areas>,
}

/// The program's send area (read) and receive area (written) of an exchange.
#[derive(Clone, Copy)]
struct Areas {
    send: *const u8,
    recv: *mut u8,
}

// SAFETY: plain addresses of the program's buffers, used only by the engine (behind its
// lock) while the schedule runs; the caller of `start_exchange` keeps them alive and
// untouched until the schedule ended, whichever thread progresses it.
unsafe impl Send for Areas {}

impl Owned {
    fn bufs(&mut self) -> Bufs {
        if let Some(a) = self.ext {
            return Bufs { user: a.recv, own: a.recv, src: a.send };
        }
        let p = self.arena.as_mut_ptr();
        Bufs { user: p, own: p, src: p }
    }
}

/// The schedules in progress.
#[derive(Default)]
pub(super) struct Schedules {
    pub(super) list: Vec<Owned>,
}

impl std::fmt::Debug for Schedules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedules").field("running", &self.list.len()).finish()
    }
}

/// The communicator a schedule runs on.
#[derive(Debug, Clone)]
pub struct Over {
    /// The communicator's point-to-point context.
    pub ctx: ContextId,
    /// Its members' world ranks, by local rank.
    pub group: Arc<[Rank]>,
    /// This process's local rank.
    pub me: u32,
}

impl Engine {
    /// Takes the next collective tag of the communicator of `ctx` for a collective that
    /// starts later, maybe many times (a persistent one): collectives take tags in call
    /// order at every member, so reserving at initialisation matches persistent
    /// collectives by initialisation order (MPI-4.1 6.13), whatever order they start in.
    ///
    /// # Errors
    /// As [`Engine::coll_begin`].
    pub fn coll_reserve(&mut self, ctx: ContextId) -> Result<Tag, Error> {
        self.coll_begin(ctx).map(|v| v.tag)
    }

    /// Starts collective `plan` on communicator `on` over `arena`, which holds this
    /// member's data as the plan lays it out; `op` for the plans that reduce; `tag` a
    /// tag from [`Engine::coll_reserve`], or `None` for the communicator's next. The
    /// arena is extended for the schedule's scratch. It advances in every progress call;
    /// the returned [`Scheduled`] gives the outcome and the arena back. A collectively
    /// inactive communicator gives one that ended already in error (R21).
    ///
    /// # Errors
    /// `ApiMisuse` when this process is not a live member, `InvalidArg` when a range
    /// of the plan lies outside the arena or its blocks do not match the communicator,
    /// or a reduction comes without an operator.
    pub fn start_schedule(
        &mut self,
        on: &Over,
        plan: &Plan,
        mut arena: Vec<u8>,
        op: Option<SendCombine>,
        tag: Option<Tag>,
    ) -> Result<Arc<Scheduled>, Error> {
        if Runner::extent(plan) > arena.len() {
            return Err(Error::InvalidArg("a collective's layout lies outside its buffer"));
        }
        if plan.reduces() && op.is_none() {
            return Err(Error::InvalidArg("reduction without an operator"));
        }
        let base = arena.len();
        let (begun, own) = Runner::begin(self, on.ctx, on.group.clone(), on.me, plan, tag, base);
        let run = match begun {
            Begun::Run(r) => r,
            Begun::Refused(e) => return Err(e),
        };
        arena.resize(own.max(base), 0);
        let out = Arc::new(Scheduled::default());
        let mut s = Owned { run, arena, op, out: out.clone(), ext: None };
        let bufs = s.bufs();
        // SAFETY: every range of the plan lies inside the arena (checked above), the
        // scratch after `base` was added before this first post, and the arena is never
        // resized nor dropped while the runner has operations posted (module doc).
        unsafe { s.run.post_next(self, bufs) };
        if !self.advance_one(&mut s) {
            self.st.sched.list.push(s);
        }
        Ok(out)
    }

    /// Starts neighbourhood exchange `plan` ([`Plan::Neighbor`]) on communicator `on`
    /// straight between the program's buffers: its send ranges are bytes of `send`, its
    /// receive ranges bytes of `recv` (no arena, no copy in or out: a block moves once,
    /// by the transport). Otherwise as [`Engine::start_schedule`]; the arena given back
    /// is empty.
    ///
    /// # Safety
    /// `send` is readable for `send_len` bytes and `recv` writable for `recv_len` bytes;
    /// both stay alive, and nothing writes `send` or touches `recv`, until the returned
    /// [`Scheduled`] is done (a C program's contract for a nonblocking collective's
    /// buffers). The receive ranges do not overlap each other or the send ranges.
    ///
    /// # Errors
    /// As [`Engine::start_schedule`]; `InvalidArg` for another plan or a range outside
    /// its area.
    pub unsafe fn start_exchange(
        &mut self,
        on: &Over,
        plan: &Plan,
        send: (*const u8, usize),
        recv: (*mut u8, usize),
        tag: Option<Tag>,
    ) -> Result<Arc<Scheduled>, Error> {
        let Plan::Neighbor { sends, recvs } = plan else {
            return Err(Error::InvalidArg("only a neighbourhood exchange runs over the program's buffers"));
        };
        let inside =
            |b: &[(u32, std::ops::Range<usize>)], len: usize| b.iter().all(|(_, r)| r.start <= r.end && r.end <= len);
        if !inside(sends, send.1) || !inside(recvs, recv.1) {
            return Err(Error::InvalidArg("a collective's layout lies outside its buffer"));
        }
        let (begun, _) = Runner::begin(self, on.ctx, on.group.clone(), on.me, plan, tag, 0);
        let run = match begun {
            Begun::Run(r) => r,
            Begun::Refused(e) => return Err(e),
        };
        let out = Arc::new(Scheduled::default());
        let ext = Some(Areas { send: send.0, recv: recv.0 });
        let mut s = Owned { run, arena: Vec::new(), op: None, out: out.clone(), ext };
        let bufs = s.bufs();
        // SAFETY: every range lies inside its area (checked above), which the caller
        // keeps alive and to the schedule until it ended (function contract); a
        // neighbourhood exchange uses no scratch.
        unsafe { s.run.post_next(self, bufs) };
        if !self.advance_one(&mut s) {
            self.st.sched.list.push(s);
        }
        Ok(out)
    }

    /// Schedules still running.
    pub fn schedules_running(&self) -> usize {
        self.st.sched.list.len()
    }

    /// Schedules still running on the communicator of `ctx`.
    pub fn schedules_on(&self, ctx: ContextId) -> usize {
        self.st.sched.list.iter().filter(|s| s.run.ctx() == ctx.coll()).count()
    }

    /// Advances every schedule (progress calls this when there are some).
    pub(super) fn advance_schedules(&mut self) {
        let mut list = std::mem::take(&mut self.st.sched.list);
        list.retain_mut(|s| !self.advance_one(s));
        // Schedules started while advancing (none today) come after.
        list.append(&mut self.st.sched.list);
        self.st.sched.list = list;
    }

    /// Advances `s`; when it ended, hands its outcome and arena over. Returns whether it
    /// ended.
    fn advance_one(&mut self, s: &mut Owned) -> bool {
        let bufs = s.bufs();
        // SAFETY: as in `start_schedule`: the arena (or the program's areas, as in
        // `start_exchange`) outlives everything posted.
        let done = unsafe { s.run.advance(self, bufs, s.op.as_deref().map(|f| f as Combine<'_>)) };
        if done {
            let outcome = s.run.outcome.take().unwrap_or(Ok(()));
            s.out.set(outcome, std::mem::take(&mut s.arena));
        }
        done
    }
}

impl Ops for Engine {
    fn begin(&mut self, ctx: ContextId, tag: Option<Tag>) -> Result<CollView, Error> {
        self.coll_begin_at(ctx, tag)
    }

    fn eager(&self) -> usize {
        self.eager_limit()
    }

    fn recv(&mut self, pattern: Pattern, peer: Option<Rank>, buf: RawBufMut) -> ReqId {
        self.start_recv(pattern, peer, buf)
    }

    fn send(&mut self, to: SendTarget, buf: RawBuf) -> ReqId {
        self.start_send(to, buf)
    }

    fn scope(&mut self, req: ReqId, token: u32) {
        self.set_scope(req, token);
    }

    fn complete(&self, req: ReqId) -> bool {
        self.is_complete(req)
    }

    fn failed(&self, req: ReqId) -> bool {
        self.has_failed(req)
    }

    fn take(&mut self, req: ReqId) -> Option<Result<(), Error>> {
        self.take_if_complete(req).map(|r| r.map(|_| ()))
    }

    fn release(&mut self, req: ReqId) -> bool {
        Engine::release(self, req)
    }
}
