//! Nonblocking collectives (R21): a collective compiled into a schedule of rounds that
//! `test` and `wait` advance.
//!
//! A round posts receives and sends (collective data is eager, chunked to the eager
//! limit, like the blocking collectives of [`crate::coll`]); when all of them have
//! completed, its reductions are applied and the next round is posted. The schedules are
//! a dissemination barrier, binomial broadcast and reduce, and reduce + broadcast for
//! allreduce (the blocking allreduce of short vectors uses recursive doubling instead).
//! A nonblocking collective matches the same nonblocking collective at the other
//! members; it does not match a blocking one (MPI forbids mixing them too).
//!
//! Run-through rules: a communicator that is collectively inactive when the collective
//! starts gives a request that completes at once with `RankFailStop` (R21: errors are
//! reported at completion); a failure while it runs fails its receives (R17) and the
//! request completes with that error after cancelling what it still has posted.
//!
//! Rounds advance only inside `test` / `wait` / `poll` (the progress thread moves the
//! bytes of a posted round, not the schedule), as in MPI libraries without asynchronous
//! progress; a pending future is woken when an operation of its posted round completes,
//! so its next poll advances the schedule.
//!
//! This module is allowed `unsafe` (like `handle`): posted requests hold raw views of the
//! user's buffer, borrowed for the lifetime `'a` of the request scope the collective was
//! started in, and of the request's own scratch buffer, which is allocated once and never
//! resized. Invariant: while a round is posted, the request touches neither buffer's
//! posted ranges; every posted operation is tagged with the scope's token, so the scope
//! settles (completes or cancels) it before the user's buffer can go away even if the
//! handle was leaked (`handle`'s safety argument); a leaked handle leaks its scratch
//! too, so that one never goes away. `Drop` completes the collective when it does run
//! (the other members count on this one's part); a leaked collective is abandoned by the
//! scope (its posted receives cancelled), which is memory-safe but leaves the other
//! members to fail or wait, as MPI says of a request never completed.
#![allow(unsafe_code)]

use std::future::Future;
use std::marker::PhantomData;
use std::ops::Range;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::lock::BiasedMutex;

use crate::buf::{RawBuf, RawBufMut};
use crate::coll::CollView;
use crate::engine::Engine;
use crate::error::Error;
use crate::handle::{RequestScope, ScopeRef, Waiter};
use crate::matching::Pattern;
use crate::types::{ContextId, Rank, ReqId, SendTarget};

/// A byte range of the user's buffer or of the request's scratch.
#[derive(Debug, Clone)]
enum Loc {
    User(Range<usize>),
    Own(Range<usize>),
}

/// One round: everything in it is posted at once; reductions run when it completes.
#[derive(Debug, Default)]
struct Round {
    recvs: Vec<(usize, Loc)>,
    sends: Vec<(usize, Loc)>,
    /// `(accumulator, incoming)` pairs, applied in order.
    combine: Vec<(Loc, Loc)>,
}

/// An element-wise reduction of `incoming` into `acc` owned by a nonblocking collective.
pub type BoxedCombine<'f> = Box<dyn Fn(&mut [u8], &[u8]) + 'f>;

/// Which collective to compile.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// Dissemination barrier.
    Barrier,
    /// Binomial broadcast of the user buffer from local rank `root`.
    Bcast {
        /// Local rank of the root.
        root: u32,
    },
    /// Binomial reduce into local rank `root`: the accumulator (the user buffer, or a
    /// copy of `contribution` when one is given) holds this member's contribution at the
    /// start and, at the root, the result at the end.
    Reduce {
        /// Local rank of the root.
        root: u32,
    },
    /// Reduce to the first participant, then broadcast: everyone gets the result in the
    /// user buffer (which holds the contribution at the start).
    Allreduce,
}

/// The communicator a nonblocking collective runs on.
#[derive(Debug, Clone, Copy)]
pub struct Members<'a> {
    /// The engine.
    pub eng: &'a BiasedMutex<Engine>,
    /// The communicator's point-to-point context.
    pub ctx: ContextId,
    /// Its members' world ranks, by local rank.
    pub group: &'a [Rank],
    /// This process's local rank.
    pub me: u32,
}

/// A nonblocking collective in progress on buffers borrowed for `'a`.
#[must_use = "a collective request does nothing unless waited on or tested"]
pub struct ICollRequest<'a> {
    eng: &'a BiasedMutex<Engine>,
    group: &'a [Rank],
    ctx: ContextId,
    tag: crate::types::Tag,
    alive: std::sync::Arc<[u32]>,
    me: usize,
    chunk: usize,
    user: (*mut u8, usize),
    // Scratch: written only through `own_ptr` once created (never resized or borrowed).
    own: Vec<u8>,
    own_ptr: *mut u8,
    op: Option<BoxedCombine<'a>>,
    rounds: Vec<Round>,
    next: usize,
    posted: Vec<ReqId>,
    outcome: Option<Result<(), Error>>,
    /// The scope owning the posted operations; `None` once the handle counted itself
    /// settled.
    scope: Option<ScopeRef<'a>>,
    token: u32,
    _user: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for ICollRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ICollRequest")
            .field("ctx", &self.ctx)
            .field("round", &self.next)
            .field("rounds", &self.rounds.len())
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl<'a> ICollRequest<'a> {
    /// Starts collective `kind` on communicator `on` over `user` with reduction `op` (reductions only). A reduce with
    /// a `contribution` accumulates into a private copy of it instead of `user` (for
    /// members other than the root, whose result is not kept). A collectively inactive
    /// communicator gives a request already completed in error (R21).
    ///
    /// # Errors
    /// `ApiMisuse` when this process is not a live member, `InvalidArg` for a reduction
    /// without an operator.
    pub fn start(
        s: &'a RequestScope<'a, '_>,
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        let scope = s.enter(on.eng);
        Self::start_in(Some(scope), on, kind, user, contribution, op)
    }

    /// [`ICollRequest::start`] outside any scope (the engine-level escape hatch of
    /// `handle::isend_unscoped`).
    ///
    /// # Safety
    /// The request must settle — `wait`, `test` until it returns `Ok(true)` or an error,
    /// or the handle dropped (not leaked) — before the borrow of `user` ends.
    pub unsafe fn start_unscoped(
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        Self::start_in(None, on, kind, user, contribution, op)
    }

    fn start_in(
        scope: Option<ScopeRef<'a>>,
        on: Members<'a>,
        kind: Kind,
        user: &'a mut [u8],
        contribution: Option<&[u8]>,
        op: Option<BoxedCombine<'a>>,
    ) -> Result<Self, Error> {
        let Members { eng, ctx, group, me } = on;
        let begun = {
            let mut e = eng.lock();
            e.coll_begin(ctx).map(|v| (v, e.eager_limit().max(1)))
        };
        let user_raw = (user.as_mut_ptr(), user.len());
        let mut r = ICollRequest {
            eng,
            group,
            ctx,
            tag: crate::types::Tag(0),
            alive: std::sync::Arc::from([]),
            me: 0,
            chunk: 1,
            user: user_raw,
            own: Vec::new(),
            own_ptr: std::ptr::null_mut(),
            op,
            rounds: Vec::new(),
            next: 0,
            posted: Vec::new(),
            outcome: None,
            scope,
            token: scope.map_or(0, |s| s.token),
            _user: PhantomData,
        };
        let (view, chunk): (CollView, usize) = match begun {
            Ok(v) => v,
            Err(e @ Error::RankFailStop { .. }) => {
                r.outcome = Some(Err(e));
                return Ok(r);
            }
            Err(e) => {
                r.outcome = Some(Ok(()));
                return Err(e);
            }
        };
        let Some(vme) = view.alive.iter().position(|&x| x == me) else {
            r.outcome = Some(Ok(()));
            return Err(Error::ApiMisuse("collective by a non-member"));
        };
        (r.ctx, r.tag, r.alive, r.me, r.chunk) = (view.ctx, view.tag, view.alive, vme, chunk);
        let len = contribution.map_or(r.user.1, <[u8]>::len);
        let acc = if contribution.is_some() { Loc::Own(0..len) } else { Loc::User(0..len) };
        let base = if contribution.is_some() { len } else { 0 };
        let vroot = |root: u32| r.alive.iter().position(|&x| x == root).ok_or(Error::RankFailStop { rank: root });
        let compiled = match kind {
            Kind::Barrier => Ok(barrier(r.alive.len(), vme)),
            Kind::Bcast { root } => vroot(root).map(|v| bcast(r.alive.len(), vme, v, len)),
            Kind::Reduce { root } => vroot(root).map(|v| reduce(r.alive.len(), vme, v, &acc, base)),
            Kind::Allreduce => {
                let (mut rounds, own) = reduce(r.alive.len(), vme, 0, &acc, base);
                rounds.extend(bcast(r.alive.len(), vme, 0, len).0);
                Ok((rounds, own))
            }
        };
        if matches!(kind, Kind::Reduce { .. } | Kind::Allreduce) && r.op.is_none() {
            r.outcome = Some(Ok(()));
            return Err(Error::InvalidArg("reduction without an operator"));
        }
        match compiled {
            Ok((rounds, own)) => {
                r.rounds = rounds;
                r.own = vec![0; own.max(base)];
                if let Some(c) = contribution {
                    r.own[..len].copy_from_slice(c);
                }
                r.own_ptr = r.own.as_mut_ptr();
                let mut e = eng.lock();
                r.post_next(&mut e);
            }
            Err(e) => r.outcome = Some(Err(e)),
        }
        Ok(r)
    }

    /// The bytes of `loc`, for reading.
    ///
    /// # Safety
    /// No posted receive may write `loc` while the slice lives.
    unsafe fn bytes(&self, loc: &Loc) -> &[u8] {
        let (base, range) = match loc {
            Loc::User(r) => (self.user.0, r.clone()),
            Loc::Own(r) => (self.own_ptr, r.clone()),
        };
        if range.is_empty() {
            return &[];
        }
        // SAFETY: `range` lies inside the buffer (schedules are compiled for its length);
        // the buffer is alive for `'a` (user) or as long as `self` (scratch, never
        // resized); the caller guarantees no concurrent writer.
        unsafe { std::slice::from_raw_parts(base.add(range.start), range.len()) }
    }

    /// The bytes of `loc`, for writing.
    ///
    /// # Safety
    /// Nothing else may access `loc` while the slice lives.
    #[allow(clippy::mut_from_ref)]
    unsafe fn bytes_mut(&self, loc: &Loc) -> &mut [u8] {
        let (base, range) = match loc {
            Loc::User(r) => (self.user.0, r.clone()),
            Loc::Own(r) => (self.own_ptr, r.clone()),
        };
        if range.is_empty() {
            return &mut [];
        }
        // SAFETY: as in `bytes`; exclusivity is the caller's guarantee (the schedule never
        // gives one round two writers of a range, nor a writer and a reader).
        unsafe { std::slice::from_raw_parts_mut(base.add(range.start), range.len()) }
    }

    /// Posts round `self.next` (or finishes when there is none).
    fn post_next(&mut self, e: &mut Engine) {
        let Some(round) = self.rounds.get(self.next) else {
            self.outcome = Some(Ok(()));
            return;
        };
        let mut posted = std::mem::take(&mut self.posted);
        for (v, loc) in &round.recvs {
            let src = self.alive[*v];
            let pattern = Pattern { ctx: self.ctx, src: Some(src), tag: Some(self.tag) };
            let peer = Some(self.group[src as usize]);
            // SAFETY: the round's receive ranges are disjoint from each other and from its
            // send ranges, and nothing else touches them until the round completed or
            // was cancelled (module invariant).
            let whole = unsafe { self.bytes_mut(loc) };
            if whole.is_empty() {
                // SAFETY: an empty view; nothing is ever written through it.
                posted.push(e.start_recv(pattern, peer, unsafe { RawBufMut::new(whole) }));
            }
            for c in whole.chunks_mut(self.chunk) {
                // SAFETY: as above, for this chunk.
                posted.push(e.start_recv(pattern, peer, unsafe { RawBufMut::new(c) }));
            }
            for &id in &posted {
                e.set_scope(id, self.token);
            }
        }
        let me = self.alive[self.me];
        for (v, loc) in &round.sends {
            let dst = self.alive[*v];
            let peer = self.group[dst as usize];
            // SAFETY: send ranges are only read while the round is posted (module invariant).
            let whole = unsafe { self.bytes(loc) };
            if whole.is_empty() {
                posted.push(e.start_send(
                    SendTarget { ctx: self.ctx, src: me, dest: dst, peer, tag: self.tag },
                    RawBuf::empty(),
                ));
            }
            for c in whole.chunks(self.chunk) {
                // SAFETY: as above, for this chunk.
                posted.push(
                    e.start_send(SendTarget { ctx: self.ctx, src: me, dest: dst, peer, tag: self.tag }, unsafe {
                        RawBuf::new(c)
                    }),
                );
            }
        }
        for &id in &posted {
            e.set_scope(id, self.token);
        }
        self.posted = posted;
    }

    /// Advances the schedule as far as completed rounds allow. Returns whether done.
    fn advance(&mut self, e: &mut Engine) -> bool {
        loop {
            if self.outcome.is_some() {
                // After an error, wait for what could not be cancelled.
                self.posted.retain(|&id| !e.release(id));
                return self.posted.is_empty();
            }
            if !self.posted.iter().all(|&id| e.is_complete(id)) {
                // A round in which something already failed need not wait for the rest.
                let failed = self.posted.iter().position(|&id| e.has_failed(id));
                let Some(i) = failed else { return false };
                let id = self.posted.swap_remove(i);
                if let Some(Err(err)) = e.take_if_complete(id) {
                    self.outcome = Some(Err(err));
                }
                continue;
            }
            let mut first = Ok(());
            for id in self.posted.drain(..) {
                if let Some(Err(err)) = e.take_if_complete(id) {
                    if first.is_ok() {
                        first = Err(err);
                    }
                }
            }
            if let Err(err) = first {
                self.outcome = Some(Err(err));
                return true;
            }
            let round = &self.rounds[self.next];
            if let Some(op) = &self.op {
                for (acc, inc) in &round.combine {
                    // SAFETY: the round completed, so nothing is posted on any range; the
                    // schedule never combines a range into itself.
                    let (a, x) = unsafe { (self.bytes_mut(acc), self.bytes(inc)) };
                    op(a, x);
                }
            }
            self.next += 1;
            self.post_next(e);
        }
    }

    /// Makes progress; returns the outcome once the collective has completed (then
    /// `Ok(true)`, or its error), else `Ok(false)`.
    ///
    /// # Errors
    /// The collective's error (`RankFailStop` when a participant failed, R17/R21).
    pub fn test(&mut self) -> Result<bool, Error> {
        let done = {
            let mut e = self.eng.lock();
            e.progress();
            self.advance(&mut e)
        };
        self.finish(done)
    }

    /// The outcome of [`ICollRequest::test`] once `advance` returned `done`.
    fn finish(&mut self, done: bool) -> Result<bool, Error> {
        if !done {
            return Ok(false);
        }
        self.scope = None;
        match self.outcome.take() {
            Some(Ok(())) | None => {
                self.outcome = Some(Ok(()));
                Ok(true)
            }
            Some(Err(err)) => {
                self.outcome = Some(Ok(()));
                Err(err)
            }
        }
    }

    /// Blocks until the collective completes.
    ///
    /// # Errors
    /// As [`ICollRequest::test`].
    pub fn wait(mut self) -> Result<(), Error> {
        let mut waiter = Waiter::new(self.eng.lock().config().spin_polls);
        loop {
            if self.test()? {
                return Ok(());
            }
            waiter.snooze();
        }
    }
}

/// A nonblocking collective is a future of its outcome (as `handle::Request`'s
/// `Future`). Its rounds advance when it is polled; a pending poll registers the task's
/// waker with every operation of the posted round, so the task is woken (by the
/// runtime's progress thread or another poll) as soon as one of them completes, in
/// success or in error, and the next poll advances the schedule. Polling it again after
/// it returned gives `Ok(())`, as `test` does.
impl Future for ICollRequest<'_> {
    type Output = Result<(), Error>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let done = crate::handle::with_engine_polled(this.eng, |e| {
            let done = this.advance(e);
            if !done {
                // Only on what is still pending: a completed operation would wake the
                // task at once, and the round cannot advance before the rest completes.
                for &id in &this.posted {
                    if !e.is_complete(id) {
                        e.register_waker(id, cx.waker());
                    }
                }
            }
            done
        });
        match this.finish(done) {
            Ok(false) => Poll::Pending,
            Ok(true) => Poll::Ready(Ok(())),
            Err(err) => Poll::Ready(Err(err)),
        }
    }
}

impl Drop for ICollRequest<'_> {
    /// Completes the collective (errors are dropped): the other members wait for this
    /// one's part, so abandoning it would leave them waiting; it ends as soon as the
    /// collective completes or fails (R17 bounds that by the failure detector).
    fn drop(&mut self) {
        if self.outcome.is_none() || !self.posted.is_empty() {
            let mut waiter = Waiter::new(self.eng.lock().config().spin_polls);
            while let Ok(false) = self.test() {
                waiter.snooze();
            }
        }
        self.scope = None;
    }
}

/// Dissemination barrier rounds.
fn barrier(n: usize, me: usize) -> (Vec<Round>, usize) {
    let mut rounds = Vec::new();
    let mut k = 1;
    while k < n {
        rounds.push(Round {
            recvs: vec![((me + n - k) % n, Loc::User(0..0))],
            sends: vec![((me + k) % n, Loc::User(0..0))],
            combine: Vec::new(),
        });
        k <<= 1;
    }
    (rounds, 0)
}

/// Binomial broadcast of the user buffer (`len` bytes) from v-rank `vroot`.
fn bcast(n: usize, me: usize, vroot: usize, len: usize) -> (Vec<Round>, usize) {
    let (parent, children) = crate::coll::bcast_tree(n, me, vroot);
    let mut rounds = Vec::new();
    if let Some(p) = parent {
        rounds.push(Round { recvs: vec![(p, Loc::User(0..len))], ..Round::default() });
    }
    if !children.is_empty() {
        let sends = children.into_iter().map(|c| (c, Loc::User(0..len))).collect();
        rounds.push(Round { sends, ..Round::default() });
    }
    (rounds, 0)
}

/// Binomial reduce of `acc` into v-rank `vroot`: all children's vectors arrive at once
/// into scratch (from byte `base` on), then are combined in the blocking algorithm's
/// order, then the result goes to the parent. Returns the rounds and the scratch length.
fn reduce(n: usize, me: usize, vroot: usize, acc: &Loc, base: usize) -> (Vec<Round>, usize) {
    let len = match acc {
        Loc::User(r) | Loc::Own(r) => r.len(),
    };
    let (parent, children) = crate::coll::bcast_tree(n, me, vroot);
    let mut gather = Round::default();
    // Nearest subtree first, as the blocking reduce combines.
    for (k, &c) in children.iter().rev().enumerate() {
        let tmp = Loc::Own(base + k * len..base + (k + 1) * len);
        gather.recvs.push((c, tmp.clone()));
        gather.combine.push((acc.clone(), tmp));
    }
    let own = base + gather.recvs.len() * len;
    let mut rounds = Vec::new();
    if !gather.recvs.is_empty() {
        rounds.push(gather);
    }
    if let Some(p) = parent {
        rounds.push(Round { sends: vec![(p, acc.clone())], ..Round::default() });
    }
    (rounds, own)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every send of a schedule set has exactly one matching receive, in the same
    /// position of the peers' round sequences relative order (no deadlock): simulate the
    /// rounds of all members with message counters.
    fn runs_to_completion(build: impl Fn(usize) -> Vec<Round>, n: usize) -> bool {
        let mut scheds: Vec<Vec<Round>> = (0..n).map(&build).collect();
        let mut at = vec![0usize; n];
        // in-flight[(from, to)] = count of sends not yet received.
        let mut inflight = std::collections::HashMap::<(usize, usize), usize>::new();
        let mut sent = vec![false; n];
        for _ in 0..10 * n * n + 10 {
            let mut moved = false;
            for m in 0..n {
                let Some(r) = scheds[m].get_mut(at[m]) else { continue };
                if !sent[m] {
                    for (to, _) in &r.sends {
                        *inflight.entry((m, *to)).or_default() += 1;
                    }
                    sent[m] = true;
                    moved = true;
                }
                let ready = r.recvs.iter().all(|(from, _)| inflight.get(&(*from, m)).copied().unwrap_or(0) > 0);
                if ready {
                    for (from, _) in &r.recvs {
                        *inflight.get_mut(&(*from, m)).unwrap() -= 1;
                    }
                    at[m] += 1;
                    sent[m] = false;
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }
        (0..n).all(|m| at[m] == scheds[m].len()) && inflight.values().all(|&c| c == 0)
    }

    #[test]
    fn schedules_complete_for_every_size_and_root() {
        for n in 1..=9 {
            assert!(runs_to_completion(|m| barrier(n, m).0, n), "barrier n={n}");
            for root in 0..n {
                assert!(runs_to_completion(|m| bcast(n, m, root, 8).0, n), "bcast n={n} root={root}");
                assert!(
                    runs_to_completion(|m| reduce(n, m, root, &Loc::User(0..8), 0).0, n),
                    "reduce n={n} root={root}"
                );
            }
            let all = |m: usize| {
                let mut r = reduce(n, m, 0, &Loc::User(0..8), 0).0;
                r.extend(bcast(n, m, 0, 8).0);
                r
            };
            assert!(runs_to_completion(all, n), "allreduce n={n}");
        }
    }

    #[test]
    fn reduce_uses_scratch_per_child() {
        // v-rank 0 of 8 has children 1, 2, 4: three scratch vectors, no send.
        let (rounds, own) = reduce(8, 0, 0, &Loc::User(0..16), 0);
        assert_eq!(own, 48);
        assert_eq!(rounds.len(), 1);
        assert_eq!(rounds[0].recvs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 4]);
        // A leaf only sends.
        let (rounds, own) = reduce(8, 7, 0, &Loc::Own(0..16), 16);
        assert_eq!((rounds.len(), own), (1, 16));
        assert_eq!(rounds[0].sends[0].0, 6);
    }
}
