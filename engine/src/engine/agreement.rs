//! Agreement driving: the engine's side of `validate`, `agree` and the error resolutions
//! (R12, R27). It owns [`Agreements`] — the instances this process takes part in and the
//! messages of instances it has not entered yet (a process may enter late) — starts
//! instances, and services them from the progress loop: feeds them failures and
//! messages, sends what they produce, and keeps their decisions for the callers.

use std::collections::HashMap;
use std::time::Instant;

use runthrough_ft::{AgreeMsg, Agreement, Decision, Participants, Time};

use super::{Engine, Outgoing, State};
use crate::comms::Comms;
use crate::error::Error;
use crate::transport::AnyTransport;
use crate::types::{ContextId, Rank};

/// Agreements (validate, agree) this process takes part in, and messages for instances
/// it has not entered yet (a process may enter late).
#[derive(Debug, Default)]
pub(super) struct Agreements {
    pub(super) running: Vec<(ContextId, Agreement)>,
    pub(super) early: Vec<(Rank, AgreeMsg)>,
    pub(super) origin: Option<Instant>,
    /// An agreement took input since its output was last drained (so progress only
    /// services agreements when there can be something to send).
    pub(super) dirty: bool,
    /// Decided instances in `running` after the last pruning: `agree_service` prunes
    /// again only when an instance decided since.
    pub(super) decided_after_pruning: usize,
}

/// Messages kept for agreements not entered yet, at most.
pub(super) const EARLY_AGREE_KEEP: usize = 4096;

/// Decided agreements of freed communicators kept to answer late members, at most (a
/// member whose tree relay or coordinator died re-sends to a process that may have
/// freed the communicator already; bench/RESULTS.md §10b: unbounded, a dup/signal/free
/// loop held thousands and every agreement message paid for them).
pub const FREED_DECIDED_KEEP: usize = 64;

/// The agreement sequence bit of error resolutions (R27): their own series per
/// communicator, beside the validates, agrees and creations the user calls.
pub(super) const RESOLUTION_SERIES: u32 = 1 << 31;

/// The series bit of agreement instance `inst` (user calls or error resolutions).
fn series(inst: u64) -> u32 {
    inst as u32 & RESOLUTION_SERIES
}

impl Agreements {
    pub(super) fn now(&mut self) -> Time {
        Time::from_duration(self.origin.get_or_insert_with(Instant::now).elapsed())
    }
}

impl Engine {
    /// Enters the agreement number `seq` on the communicator of `ctx` (run-through
    /// chapter §17.7.4, R19, R29): every live member contributes `flag` (ANDed) and the failures
    /// it knows; all decide the same flag and failed set. Returns the instance id.
    pub fn agree_start(&mut self, ctx: ContextId, group: &[Rank], seq: u32, flag: u32) -> Result<u64, Error> {
        self.agree_start_input(ctx, group, seq, runthrough_ft::Input::flag(flag))
    }

    /// [`Engine::agree_start`] with every agreed input: also a word whose maximum is
    /// decided and signals whose union is. Agreements whose `seq` has the top bit set
    /// form a separate series (error resolutions, R27), numbered on their own.
    pub fn agree_start_input(
        &mut self,
        ctx: ContextId,
        group: &[Rank],
        seq: u32,
        input: runthrough_ft::Input,
    ) -> Result<u64, Error> {
        if !group.contains(&self.st.me) {
            return Err(Error::ApiMisuse("agreement by a non-member"));
        }
        let participants =
            Participants::new(group.iter().map(|r| r.0).collect()).map_err(|_| Error::InvalidArg("agreement group"))?;
        let instance = (u64::from(ctx.p2p().0) << 32) | u64::from(seq);
        let known: Vec<u32> = group.iter().map(|r| r.0).filter(|r| self.st.fail.failures.contains(*r)).collect();
        let now = self.st.agree.now();
        // `with_input` takes the job rank (it finds the participant index itself).
        let mut a =
            Agreement::with_input(std::sync::Arc::new(participants), self.st.me.0, instance, input, &known, now);
        let (early, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.st.agree.early).into_iter().partition(|(_, m)| m.instance() == instance);
        self.st.agree.early = rest;
        for (from, m) in early {
            a.handle_message(from.0, m, now);
        }
        // What older agreements still have to say goes out first (a coordinator that
        // just decided has its commits still to send).
        self.agree_service();
        // An instance of this series numbered at or above this one belongs to a freed
        // communicator whose context this one reuses: it must not answer for this one.
        self.st.agree.running.retain(|(c, x)| {
            !Comms::same_comm(*c, ctx) || series(x.instance()) != series(instance) || x.instance() < instance
        });
        self.st.agree.running.push((ctx, a));
        self.agree_service();
        Ok(instance)
    }

    /// How many agreement instances this process holds (running, or decided and kept to
    /// answer late members): bounded by the live communicators' series plus
    /// [`FREED_DECIDED_KEEP`] however many communicators were created and freed.
    pub fn agreements_held(&self) -> usize {
        self.st.agree.running.len()
    }

    /// The decision of agreement `instance`, once reached (then it is final).
    pub fn agree_decision(&self, instance: u64) -> Option<Decision> {
        self.st.agree.running.iter().find(|(_, a)| a.instance() == instance).and_then(|(_, a)| a.decision().cloned())
    }

    /// Sends what the agreements want sent, then forgets every decided agreement
    /// behind a newer decided one of its communicator's series, and the oldest decided
    /// ones of freed communicators beyond [`FREED_DECIDED_KEEP`].
    pub(super) fn agree_service(&mut self) {
        let Engine { transport, st } = self;
        st.agree.dirty = false;
        // A decided instance keeps answering (late reports, a new parent or coordinator
        // after a failure: ft::agree) until a newer one of the same series decides: that
        // one covered a report from every live member, each sent only after deciding
        // the older one, so nobody alive can need the older one any more. Dropping it
        // when the newer one merely starts could strand a member whose relay died.
        // Only when an instance decided since the last pruning (this runs at every
        // agreement message): one pass to find each series' newest decision, one to prune.
        let decided_now = st.agree.running.iter().filter(|(_, a)| a.decision().is_some()).count();
        if decided_now == st.agree.decided_after_pruning {
            return Self::agree_send(transport, st);
        }
        let mut newest: HashMap<(u32, u32), u64> = HashMap::new();
        for (c, a) in &st.agree.running {
            if a.decision().is_some() {
                let e = newest.entry((c.p2p().0, series(a.instance()))).or_insert(0);
                *e = (*e).max(a.instance());
            }
        }
        st.agree.running.retain(|(c, a)| {
            newest.get(&(c.p2p().0, series(a.instance()))).is_none_or(|&newest| newest <= a.instance())
        });
        // A freed communicator never decides a newer instance: its decided ones stay
        // for late members, the most recent FREED_DECIDED_KEEP of them (oldest first in
        // `running`), so a program that dups and frees in a loop holds a bounded number.
        let freed = |c: &ContextId, a: &Agreement| a.decision().is_some() && st.comms.get(c.p2p()).is_none();
        let mut excess =
            st.agree.running.iter().filter(|(c, a)| freed(c, a)).count().saturating_sub(FREED_DECIDED_KEEP);
        if excess > 0 {
            st.agree.running.retain(|(c, a)| {
                let drop = excess > 0 && freed(c, a);
                excess -= usize::from(drop);
                !drop
            });
        }
        st.agree.decided_after_pruning = st.agree.running.iter().filter(|(_, a)| a.decision().is_some()).count();
        Self::agree_send(transport, st);
    }

    /// Sends what the agreements want sent.
    fn agree_send(transport: &mut AnyTransport, st: &mut State) {
        let mut out = Vec::new();
        for (_, a) in &mut st.agree.running {
            while let Some((to, m)) = a.poll_transmit() {
                out.push((Rank(to), m));
            }
        }
        for (to, m) in out {
            if to.0 as usize >= st.peers.len() || st.peers[to.0 as usize].failed {
                continue;
            }
            let mut bytes = Vec::with_capacity(m.encoded_len());
            m.encode(&mut bytes);
            if st.peers[to.0 as usize].pending.is_empty() {
                if let Some(back) = st.try_post(transport, to, Outgoing::Agree(bytes)) {
                    st.queue(to, back);
                }
            } else {
                st.queue(to, Outgoing::Agree(bytes));
            }
        }
    }
}
