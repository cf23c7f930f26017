//! Nonblocking operations that keep no borrow of their communicator or buffers, for a
//! caller that outlives neither (the standard ABI's `MPI_I*` and persistent collectives,
//! `MPI_Comm_idup`, `MPIX_Comm_iagree`/`ivalidate`): no thread runs them.
//!
//! - [`OwnedColl`]: a collective the engine owns with its byte arena
//!   (`Engine::start_schedule`), advanced by every progress call of any thread — the
//!   caller's waits, its other calls, the runtime's progress thread.
//! - [`AgreeTicket`]: an agreement (iagree, ivalidate), which the engine runs anyway.
//! - [`DupRequest`]: a nonblocking dup: its exchange is an owned collective and its
//!   agreement is the engine's; the step between the two (claiming the context, entering
//!   the agreement) is taken by [`Comm::test_dup`].

use std::sync::Arc;

use runthrough_engine::{Over, Plan, Scheduled, SendCombine, Tag};

use crate::comm::{Claim, Comm, Entry, Verdict};
use crate::shared::Shared;
use crate::{Error, Group};

/// A collective tag reserved when a persistent collective is initialised
/// ([`Comm::reserve_collective`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserved(Tag);

/// A collective the engine owns with its buffer ([`Comm::start_owned`]).
#[derive(Debug)]
#[must_use = "an owned collective runs to its end; its outcome and buffer come from `test`"]
pub struct OwnedColl {
    out: Arc<Scheduled>,
    shared: Arc<Shared>,
}

impl OwnedColl {
    /// Progresses the engine once; once the collective ended, its outcome and the
    /// arena (once; `None` before and after). The error is the engine's: pass it through
    /// [`Comm::check_error`] for the communicator's view of it.
    pub fn test(&self) -> Option<(Result<(), Error>, Vec<u8>)> {
        if !self.out.is_done() {
            self.shared.engine.lock().progress();
        }
        self.out.take()
    }

    /// Whether the collective ended (without progressing).
    pub fn is_done(&self) -> bool {
        self.out.is_done()
    }
}

/// An agreement started for a caller that keeps no borrow of the communicator
/// ([`Comm::iagree_ticket`], [`Comm::ivalidate_ticket`]).
#[derive(Debug)]
pub struct AgreeTicket {
    instance: Option<u64>,
    validate: bool,
}

/// What an agreement of an [`AgreeTicket`] decided.
#[derive(Debug)]
pub enum Decided {
    /// An agree: the AND of the live members' flags, and the failed members it decided
    /// on (world ranks, ascending).
    Agree {
        /// The agreed value.
        flag: i32,
        /// The failed members (world ranks).
        failed: Vec<usize>,
    },
    /// A validate, applied here: the agreed failed group.
    Validate(Group),
}

/// What a creation's exchange and agreement gave: every member's entry (`None`: none
/// came) and the context chosen.
pub(crate) type Created = (Vec<Option<Entry>>, u32);

/// A nonblocking dup ([`Comm::idup`]; advanced by [`Comm::test_dup`]).
#[derive(Debug)]
#[must_use = "a dup request does nothing unless tested"]
pub struct DupRequest {
    step: DupStep,
    /// Context pairs the new communicator takes (1; an inter-communicator's 4).
    pairs: u32,
}

#[derive(Debug)]
enum DupStep {
    /// The exchange (an owned allgather) runs.
    Exchange { coll: OwnedColl, proposal: u32 },
    /// The agreement runs on the exchange's outcome.
    Agree { all: Vec<i32>, claim: Claim, instance: Option<u64> },
    /// Ended (its outcome taken).
    Ended,
}

impl Comm {
    /// The communicator as the engine's schedules see it.
    fn over(&self) -> Over {
        Over { ctx: self.inner.ctx, group: self.inner.group.clone(), me: self.inner.me }
    }

    /// Reserves the next collective tag of this communicator for a collective started
    /// later, maybe many times (a persistent collective, MPI-4.1 6.13: they match by
    /// initialisation order): collective in the sense that every member reserves at the
    /// same point of its sequence of collectives.
    ///
    /// # Errors
    /// Those of starting a collective here (revoked, not a member, ...).
    pub fn reserve_collective(&self) -> Result<Reserved, Error> {
        let r = self.inner.shared.engine.lock().coll_reserve(self.inner.ctx).map(Reserved);
        self.check(r)
    }

    /// Starts collective `plan` over `arena` (this member's data as the plan lays it
    /// out), combining with `op` where the plan reduces; at a reserved tag, or as the
    /// communicator's next collective. It runs without the caller, in every progress
    /// call; [`OwnedColl::test`] gives the outcome and the arena back. A collectively
    /// inactive communicator gives one that ended in error (R21).
    ///
    /// # Errors
    /// `InvalidArg` for a layout outside the arena or blocks that do not match the
    /// communicator, a reduction without an operator; `ApiMisuse` by a non-member.
    pub fn start_owned(
        &self,
        plan: &Plan,
        arena: Vec<u8>,
        op: Option<SendCombine>,
        at: Option<Reserved>,
    ) -> Result<OwnedColl, Error> {
        let r = self.inner.shared.engine.lock().start_schedule(&self.over(), plan, arena, op, at.map(|t| t.0));
        self.check(r).map(|out| OwnedColl { out, shared: self.inner.shared.clone() })
    }

    /// [`Comm::start_owned`] for a schedule `start` begins itself on the engine, given
    /// this communicator as the engine sees it and the tag to use (reserved, or `None`
    /// for the next): how a C interface starts an exchange straight between the
    /// program's buffers (`Engine::start_exchange`, an `unsafe` call that is the
    /// caller's to justify).
    ///
    /// # Errors
    /// `start`'s, and this communicator's state as for every collective.
    pub fn start_owned_by(
        &self,
        at: Option<Reserved>,
        start: impl FnOnce(&mut runthrough_engine::Engine, &Over, Option<Tag>) -> Result<Arc<Scheduled>, Error>,
    ) -> Result<OwnedColl, Error> {
        let r = start(&mut self.inner.shared.engine.lock(), &self.over(), at.map(|t| t.0));
        self.check(r).map(|out| OwnedColl { out, shared: self.inner.shared.clone() })
    }

    /// Waits, progressing the engine, until no collective the engine owns on this
    /// communicator runs (before it is freed or validated: their messages must not
    /// meet a later communicator's, nor cross the validate's cut).
    pub fn settle_owned(&self) {
        let mut waiter = self.waiter();
        loop {
            {
                let mut e = self.inner.shared.engine.lock();
                if e.schedules_on(self.inner.ctx) == 0 {
                    return;
                }
                e.progress();
            }
            waiter.snooze();
        }
    }

    /// [`Comm::iagree`] without a borrow of the communicator: poll it with
    /// [`Comm::poll_ticket`].
    ///
    /// # Errors
    /// As [`Comm::iagree`].
    pub fn iagree_ticket(&self, flag: i32) -> Result<AgreeTicket, Error> {
        let r = self.not_corrupted().and_then(|()| self.agreement_start(flag as u32));
        self.check(r).map(|i| AgreeTicket { instance: Some(i), validate: false })
    }

    /// [`Comm::ivalidate`] without a borrow of the communicator: poll it with
    /// [`Comm::poll_ticket`], which applies the decision.
    ///
    /// # Errors
    /// As [`Comm::ivalidate`].
    pub fn ivalidate_ticket(&self) -> Result<AgreeTicket, Error> {
        let r = self.usable().and_then(|()| self.agreement_start(u32::MAX));
        self.check(r).map(|i| AgreeTicket { instance: Some(i), validate: true })
    }

    /// Progresses; once the ticket's agreement decided, what it decided (a validate's
    /// decision applied here). Once only: `None` before and after.
    pub fn poll_ticket(&self, t: &mut AgreeTicket) -> Option<Decided> {
        let d = self.poll_agreement(&mut t.instance)?;
        Some(if t.validate {
            Decided::Validate(self.validate_apply(&d))
        } else {
            Decided::Agree { flag: d.flag as i32, failed: d.failed.iter().map(|&r| r as usize).collect() }
        })
    }

    /// Starts a dup that does not block (MPI_Comm_idup): the same protocol as
    /// [`Comm::dup`] (an exchange, then an agreement, R24), the exchange run by the
    /// engine, the agreement entered by [`Comm::test_dup`] once the exchange is done.
    ///
    /// # Errors
    /// Those of starting a collective here.
    pub fn idup(&self) -> Result<DupRequest, Error> {
        self.idup_pairs(1)
    }

    /// [`Comm::idup`] for a communicator that takes `pairs` context pairs (an
    /// inter-communicator's duplicate over its bridge).
    pub(crate) fn idup_pairs(&self, pairs: u32) -> Result<DupRequest, Error> {
        let step = self.dup_exchange()?;
        Ok(DupRequest { step, pairs })
    }

    fn dup_exchange(&self) -> Result<DupStep, Error> {
        let n = self.size();
        let proposal = self.inner.shared.ctx_proposal();
        let mut arena: Vec<u8> = [i32::MIN; 3].iter().cycle().take(3 * n).flat_map(|w| w.to_ne_bytes()).collect();
        let me = self.rank();
        for (k, w) in [0, me as i32, proposal as i32].iter().enumerate() {
            arena[12 * me + 4 * k..12 * me + 4 * k + 4].copy_from_slice(&w.to_ne_bytes());
        }
        let blocks = (0..n).map(|i| 12 * i..12 * i + 12).collect();
        let coll = self.start_owned(&Plan::Allgatherv { blocks }, arena, None, None)?;
        Ok(DupStep::Exchange { coll, proposal })
    }

    /// Advances `r`; the new communicator (or the error) once it ended, then `None`.
    pub fn test_dup(&self, r: &mut DupRequest) -> Option<Result<Comm, Error>> {
        self.test_dup_entries(r).map(|o| o.map(|(_, ctx)| self.dup_on(ctx)))
    }

    /// [`Comm::test_dup`]'s outcome before a communicator is made of it: every member's
    /// exchanged entry (`None`: none came; a dup's is (0, rank)) and the context chosen.
    pub(crate) fn test_dup_entries(&self, r: &mut DupRequest) -> Option<Result<Created, Error>> {
        loop {
            match &mut r.step {
                DupStep::Ended => return None,
                DupStep::Exchange { coll, proposal } => {
                    let (outcome, arena) = coll.test()?;
                    let all: Vec<i32> =
                        arena.chunks_exact(4).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]])).collect();
                    let claim = self.exchange_claim(&all, *proposal, outcome, r.pairs);
                    match self.agreement_start(claim.flag()) {
                        Ok(i) => r.step = DupStep::Agree { all, claim, instance: Some(i) },
                        Err(e) => {
                            let v = self.exchange_verdict(&all, claim, Err(e));
                            return self.dup_verdict(r, v);
                        }
                    }
                }
                DupStep::Agree { instance, .. } => {
                    let d = self.poll_agreement(instance)?;
                    let DupStep::Agree { all, claim, .. } = std::mem::replace(&mut r.step, DupStep::Ended) else {
                        return None;
                    };
                    let v = self.exchange_verdict(&all, claim, Ok(d));
                    if let Some(out) = self.dup_verdict(r, v) {
                        return Some(out);
                    }
                }
            }
        }
    }

    /// The outcome of a dup's verdict: `None` when it starts over (with a new exchange).
    fn dup_verdict(&self, r: &mut DupRequest, v: Verdict) -> Option<Result<Created, Error>> {
        r.step = DupStep::Ended;
        match v {
            Verdict::Retry => match self.dup_exchange() {
                Ok(step) => {
                    r.step = step;
                    None
                }
                Err(e) => Some(Err(self.check_error(e))),
            },
            Verdict::Fail(e) => Some(Err(self.check_error(e))),
            Verdict::Done(entries, ctx) => Some(Ok((entries, ctx))),
        }
    }
}
