//! Communicator state as the engine sees it: registration and freeing, revoke and
//! corrupt (R20, R26), the failures a communicator has recognized and acknowledged
//! (R11, R13, R19), whether collectives may run (R21), and the shared-memory collective
//! area's slots. The state itself lives in [`crate::comms::Comms`]; this module is the
//! engine's entry points to it and the rule that new operations look at it
//! (`State::comm_takes`).

use std::sync::Arc;

use runthrough_ft::notice;

use super::{Engine, Outgoing, State};
use crate::coll_state::ShmColl;
use crate::comms::{Broken, Comms};
use crate::error::Error;
use crate::matching::{Arrival, Pattern};
use crate::note::Note;
use crate::types::{ContextId, Rank, ReqId, Tag};

/// The communicators' shared parts: the node's collective area, and whether any communicator has a state new operations must look at.
#[derive(Debug)]
pub(super) struct CommFlags {
    /// The node's collective area, when shared-memory collectives are on.
    pub(super) shm_coll: Option<Arc<ShmColl>>,
    /// Some communicator has had a signal (R27): resolutions are serviced.
    pub(super) propagating: bool,
    /// Some communicator was broken or has had a signal: new operations look at their
    /// communicator's state (`comm_takes`). Never reset: it costs a lookup, not more.
    pub(super) comm_notices: bool,
}

impl CommFlags {
    pub(super) fn new() -> Self {
        Self { shm_coll: None, propagating: false, comm_notices: false }
    }
}

/// Communicators of at most this many members (`RT_NOTICE_FLOOD_MAX`, default 64) get
/// their notices flooded (every member to every other, on first receipt) rather than
/// over the overlay: n − 1 sends a member is no burden there, and one hop beats log2 n
/// of them. The tests set it to 0 to run the overlay on a few processes.
fn flood_max() -> usize {
    static FLOOD: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FLOOD.get_or_init(|| std::env::var("RT_NOTICE_FLOOD_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(64))
}

/// The notice that breaks the communicator keyed by `key` so elsewhere.
fn broken_note(broken: Broken, key: ContextId) -> Note {
    match broken {
        Broken::Revoked => Note::Revoke { ctx: key.0 },
        Broken::Corrupted => Note::Corrupt { ctx: key.0 },
    }
}

impl Engine {
    /// Registers a communicator: its point-to-point context (even; the next one is its
    /// collective context) and its group in world ranks.
    pub fn register_comm(&mut self, ctx: ContextId, group: &[Rank]) {
        let slot = self.st.cs.shm_coll.as_ref().and_then(|s| s.slot_for(ctx, group));
        self.st.comms.register(ctx, group, slot);
        if let (Some(slot), Some(sc)) = (slot, &self.st.cs.shm_coll) {
            sc.set_state(slot, true, true);
        }
        // Members that revoked it, signalled on it or entered its resolution before this
        // process created it told us early: apply that now, in order.
        let mine = |n: &Note| match n {
            Note::Revoke { ctx: c }
            | Note::Corrupt { ctx: c }
            | Note::Signal { ctx: c, .. }
            | Note::Mark { ctx: c, .. } => Comms::same_comm(ContextId(*c), ctx),
            _ => false,
        };
        let (early, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.st.dep.early_notes).into_iter().partition(|(_, n)| mine(n));
        self.st.dep.early_notes = rest;
        if !early.is_empty() {
            self.st.dep.notes_in.extend(early);
            self.apply_notes();
        }
    }

    /// Revokes the communicator of `ctx` (ULFM's `MPIX_Comm_revoke`, R29): here and, by
    /// a notice every member forwards on first receipt (so it spreads although members
    /// fail while it does), at every live member. Every pending and later operation on it
    /// fails with [`Error::Revoked`]; agreements (agree, validate, shrink's) still run.
    pub fn revoke(&mut self, ctx: ContextId) {
        self.break_comm(ctx, Broken::Revoked);
    }

    /// Marks the communicator of `ctx` corrupted (R28: a member panicked while using
    /// it), spread like [`Engine::revoke`]: every pending and later operation on it, at
    /// every member, fails with [`Error::CommCorrupted`].
    pub fn corrupt(&mut self, ctx: ContextId) {
        self.break_comm(ctx, Broken::Corrupted);
    }

    /// The error every operation on the communicator of `ctx` now gets, if it is revoked
    /// or corrupted.
    pub fn comm_error(&self, ctx: ContextId) -> Option<Error> {
        self.st.comms.get(ctx).and_then(|c| c.broken).map(Broken::error)
    }

    /// Acknowledges the first `n` failures of the communicator of `ctx` in the order
    /// they became known (ULFM's `ack_failed`); returns how many are acknowledged. Once
    /// all known are, ANY_SOURCE receives are enabled again (R13, R14).
    pub fn ack_failed(&mut self, ctx: ContextId, n: usize) -> usize {
        let known = self.failed_in(ctx).len();
        let Some(c) = self.st.comms.get_mut(ctx) else { return 0 };
        c.acked = c.acked.max(n.min(known));
        if c.acked == known {
            c.wildcard_disabled = false;
        }
        c.acked
    }

    /// Whether the communicator of `ctx` is revoked (or corrupted).
    pub fn is_revoked(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_some_and(|c| c.broken.is_some())
    }

    /// Breaks the communicator of `ctx` here (first time only: a corruption also
    /// overrides a revocation) and forwards the notice along the communicator's overlay
    /// (R42): to the first live member at or after each of the positions `me + 1, me + 2,
    /// me + 4, …` (mod n, communicator order) — at most ⌈log2 n⌉ fingers, the first the
    /// live ring successor. Every member forwards on first receipt, and a holder passes it
    /// to its new ring successor when the old one fails ([`Engine::pass_notes_past`]): a
    /// notice held by any live member reaches every live member while forwarders die, in
    /// about log2 n hops, with at most ⌈log2 n⌉ messages a member (instead of n − 1).
    pub(super) fn break_comm(&mut self, ctx: ContextId, broken: Broken) {
        let key = ctx.p2p();
        let Some(c) = self.st.comms.get_mut(key) else { return };
        if c.broken == Some(broken) || c.broken == Some(Broken::Corrupted) {
            return;
        }
        c.broken = Some(broken);
        self.st.cs.comm_notices = true;
        self.st.stop_shm_collectives(key);
        tracing::debug!(ctx = key.0, ?broken, "communicator broken");
        let err = broken.error();
        let coll = key.coll();
        let on_comm = |c: ContextId| c == key || c == coll;
        // Posted receives fail; receives already pulling or streaming finish (their
        // sender keeps its buffer exposed until they do).
        while let Some((_, id)) = self.st.recv.posted.remove_where(|pat, _| on_comm(pat.ctx)) {
            self.st.set_outcome(id, Err(err.clone()));
        }
        // Buffered messages are dropped; a buffered rendezvous is answered with Discard.
        for pattern in [Pattern { ctx: key, src: None, tag: None }, Pattern { ctx: coll, src: None, tag: None }] {
            while let Some((_, e)) = self.st.recv.unexpected.take_match(&pattern) {
                self.st.drop_unexpected(e);
            }
        }
        let note = broken_note(broken, key);
        let Some(c) = self.st.comms.get(key) else { return };
        let group = c.group.clone();
        let Some(me) = group.iter().position(|r| *r == self.st.me) else { return };
        for at in self.st.notice_targets(&group, me) {
            self.st.post_or_queue(&mut self.transport, group[at], Outgoing::Note(note));
        }
    }

    /// Member `dead` failed: on every communicator where it was this process's live ring
    /// successor, what travels the overlay goes on to the new one — the communicator's
    /// revoke or corruption, and the signals known here and not yet resolved (R27) — so
    /// that it travels the ring past forwarders that died (see [`Engine::break_comm`]).
    pub(super) fn pass_notes_past(&mut self, dead: Rank) {
        let mut out = Vec::new();
        for (key, _) in self.st.comms.containing(dead) {
            let Some(c) = self.st.comms.get(key) else { continue };
            if c.broken.is_none() && c.prop.known.is_empty() {
                continue;
            }
            let group = &c.group;
            let Some(me) = group.iter().position(|r| *r == self.st.me) else { continue };
            let Some(dead_at) = group.iter().position(|r| *r == dead) else { continue };
            let live = |at: usize| self.st.is_live(group[at]);
            if !notice::successor_was(group.len(), me, dead_at, live) {
                continue;
            }
            let Some(next) = notice::successor(group.len(), me, live) else { continue };
            match c.broken {
                Some(broken) => out.push((group[next], broken_note(broken, key))),
                None => out.extend(
                    c.prop.known.iter().map(|&(id, code)| (group[next], Note::Signal { ctx: key.0, id, code })),
                ),
            }
        }
        for (to, note) in out {
            self.st.post_or_queue(&mut self.transport, to, Outgoing::Note(note));
        }
    }

    /// Turns on shared-memory collectives for communicators registered from now on
    /// whose members all share the segment ([`crate::coll::ShmColl`]). Every rank of the
    /// job must make the same choice.
    pub fn enable_shm_coll(&mut self, mut coll: crate::coll_state::ShmColl) {
        coll.tune(self.st.cfg.spin_polls, self.st.cfg.oversubscribed, self.st.send.eager_max.max(1));
        self.st.cs.shm_coll = Some(std::sync::Arc::new(coll));
    }

    /// The collective area, when shared-memory collectives are on (a communicator keeps
    /// it to start collectives without the engine lock).
    pub fn shm_coll(&self) -> Option<std::sync::Arc<crate::coll_state::ShmColl>> {
        self.st.cs.shm_coll.clone()
    }

    /// The slot of the communicator of `ctx` in the collective area, if it has one.
    pub fn shm_slot_of(&self, ctx: ContextId) -> Option<usize> {
        self.st.comms.get(ctx)?.shm_slot
    }

    /// `Ok` while the communicator of `ctx` is collectively active (R18), else the
    /// `RankFailStop` of a member failure it has not recognised.
    pub fn coll_check(&self, ctx: ContextId) -> Result<(), Error> {
        let Some(c) = self.st.comms.get(ctx) else {
            return Err(Error::ApiMisuse("collective on an unknown communicator"));
        };
        if let Some(b) = c.broken {
            return Err(b.error());
        }
        if !c.active {
            let rank = self.failed_in(ctx).into_iter().find(|r| !c.recognized.contains(r)).unwrap_or(0);
            return Err(Error::RankFailStop { rank });
        }
        Ok(())
    }

    /// Forgets a communicator (free completes whatever failed: R26).
    pub fn free_comm(&mut self, ctx: ContextId) {
        self.st.comms.remove(ctx);
    }

    /// Ranks of the communicator of `ctx` known failed here, in the order they became
    /// known (R8). Empty for an unknown context.
    pub fn failed_in(&self, ctx: ContextId) -> Vec<u32> {
        let Some(c) = self.st.comms.get(ctx) else { return Vec::new() };
        self.st.fail.failures.in_order().iter().filter_map(|w| c.local_rank(Rank(*w))).collect()
    }

    /// Whether ANY_SOURCE receives on the communicator of `ctx` are enabled (R13).
    pub fn any_source_enabled(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_none_or(|c| !c.wildcard_disabled)
    }

    /// Re-enables ANY_SOURCE receives on the communicator of `ctx` and returns its ranks
    /// known failed now (R14); the next new failure of a member disables them again.
    pub fn reenable_any_source(&mut self, ctx: ContextId) -> Vec<u32> {
        if let Some(c) = self.st.comms.get_mut(ctx) {
            c.wildcard_disabled = false;
        }
        self.failed_in(ctx)
    }

    /// Members of the communicator of `ctx` recognised failed by its last validate.
    pub fn recognized(&self, ctx: ContextId) -> Vec<u32> {
        self.st.comms.get(ctx).map(|c| c.recognized.clone()).unwrap_or_default()
    }

    /// Whether collectives may run on the communicator of `ctx` (R18).
    pub fn collectives_enabled(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_none_or(|c| c.active)
    }

    /// Begins a collective on the communicator of `ctx`: checks it is collectively
    /// active, draws the collective's tag and lists the participants (R18, R20).
    pub fn coll_begin(&mut self, ctx: ContextId) -> Result<crate::coll_state::CollView, Error> {
        self.coll_begin_at(ctx, None)
    }

    /// [`Engine::coll_begin`] for a collective whose tag was reserved before (`Some`: a
    /// persistent collective's, taken by [`Engine::coll_reserve`] when it was
    /// initialised, so that its starts, in whatever order they come, leave the sequence
    /// of the communicator's other collectives alone).
    pub fn coll_begin_at(&mut self, ctx: ContextId, tag: Option<Tag>) -> Result<crate::coll_state::CollView, Error> {
        self.coll_check(ctx)?;
        if let Some(list) = self.take_armed(ctx) {
            return Err(Error::Propagated(list));
        }
        let (spin, central) = (self.st.cfg.spin_polls, self.st.cfg.oversubscribed);
        let c = self.st.comms.get_mut(ctx).ok_or(Error::ApiMisuse("collective on an unknown communicator"))?;
        let tag = tag.unwrap_or_else(|| {
            let seq = c.coll_seq;
            c.coll_seq = c.coll_seq.wrapping_add(1);
            Tag((((c.epoch & 0x1ff) << 21) | (seq & 0x1f_ffff)) as i32)
        });
        let shm = match (c.shm_slot, &self.st.cs.shm_coll) {
            (Some(slot), Some(coll)) => Some(crate::coll_state::ShmPath { slot, gen: coll.fail_gen() }),
            _ => None,
        };
        Ok(crate::coll_state::CollView { ctx: ctx.coll(), tag, alive: c.alive.clone(), shm, spin, central })
    }

    /// Applies a validate's decision on the communicator of `ctx` (R19): `failed` (local
    /// ranks) are recognised and excluded from later collectives, a new epoch starts,
    /// and the communicator is active again unless a failure of a member outside
    /// `failed` is already known here (then the next validate recognises it).
    /// Messages of collectives begun before are discarded.
    pub fn validate_commit(&mut self, ctx: ContextId, failed: &[u32]) {
        let failed_here = self.failed_in(ctx);
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        let mut rec = failed.to_vec();
        rec.sort_unstable();
        rec.dedup();
        c.active = failed_here.iter().all(|r| rec.contains(r));
        let pristine = rec.is_empty();
        c.set_recognized(rec);
        c.epoch = c.epoch.wrapping_add(1);
        c.coll_seq = 0;
        if let (Some(slot), Some(sc)) = (c.shm_slot, &self.st.cs.shm_coll) {
            sc.new_epoch(slot, c.epoch);
            sc.set_state(slot, c.active, pristine);
        }
        let coll = ctx.coll();
        let epoch = c.epoch & 0x1ff;
        let stale = |a: &Arrival| a.ctx == coll && ((a.tag.0 as u32) >> 21) != epoch;
        while self
            .st
            .recv
            .unexpected
            .take_match_where(&Pattern { ctx: coll, src: None, tag: None }, |a, _| stale(a))
            .is_some()
        {}
    }
}

impl State {
    /// Whether `peer` is neither failed nor departed.
    /// Where a communicator notice (revoke, corrupt, signal) goes from member `me` of
    /// `group` when it first holds it: on up to [`flood_max`] members every other live
    /// member (one hop, where the overlay's log2 n hops each wait for a relay to be
    /// scheduled, slow when ranks outnumber cores); above, the
    /// overlay's ⌈log2 n⌉ fingers ([`notice::fingers`], R42). Either way the first is the
    /// live ring successor, which the handover of [`Engine::pass_notes_past`] relies on.
    pub(super) fn notice_targets(&self, group: &[Rank], me: usize) -> Vec<usize> {
        let n = group.len();
        let live = |at: usize| self.is_live(group[at]);
        let mut to = Vec::new();
        if n <= flood_max() {
            to.extend((1..n).map(|i| (me + i) % n).filter(|&at| live(at)));
        } else {
            notice::fingers(n, me, live, &mut to);
        }
        to
    }

    pub(super) fn is_live(&self, peer: Rank) -> bool {
        self.peers.get(peer.0 as usize).is_some_and(|p| !p.failed)
    }

    /// A new operation `req` on a revoked or corrupted communicator fails with its error;
    /// during a resolution (R27) it is parked (it fails with the resolution's list); once
    /// one completed with nothing pending, it fails with that list. Returns whether `req`
    /// was taken care of.
    pub(super) fn comm_takes(&mut self, ctx: ContextId, req: ReqId) -> bool {
        let Some(c) = self.comms.get_mut(ctx) else { return false };
        if let Some(b) = c.broken {
            self.set_outcome(req, Err(b.error()));
            return true;
        }
        if c.prop.running.is_some() {
            c.prop.parked.push(req);
            return true;
        }
        if let Some(list) = self.take_armed(ctx) {
            self.set_outcome(req, Err(Error::Propagated(list)));
            return true;
        }
        false
    }

    /// The undelivered propagated list of the communicator of `ctx`, taken (R27); its
    /// collectives may then start on the lock-free shared-memory path again.
    pub(super) fn take_armed(&mut self, ctx: ContextId) -> Option<Vec<(u32, i32)>> {
        let c = self.comms.get_mut(ctx)?;
        let list = c.prop.armed.take()?;
        if let (Some(slot), Some(sc)) = (c.shm_slot, &self.cs.shm_coll) {
            sc.set_state(slot, c.active, c.recognized.is_empty());
        }
        Some(list)
    }

    /// While the communicator of `ctx` holds an undelivered propagated list, its
    /// collectives start on the locked path, which delivers it (R27): the lock-free
    /// start ([`crate::coll::Coll::begin_shm`]) does not look at it.
    pub(super) fn hold_shm_fast_path(&self, ctx: ContextId) {
        if let (Some(c), Some(sc)) = (self.comms.get(ctx), &self.cs.shm_coll) {
            if let Some(slot) = c.shm_slot.filter(|_| c.prop.armed.is_some()) {
                sc.set_state(slot, c.active, false);
            }
        }
    }

    /// Members waiting in a shared-memory collective on the communicator of `ctx` stop
    /// waiting, and new ones take the locked path (broken or resolving communicator).
    pub(super) fn stop_shm_collectives(&self, ctx: ContextId) {
        if let (Some(slot), Some(sc)) = (self.comms.get(ctx).and_then(|c| c.shm_slot), &self.cs.shm_coll) {
            sc.set_state(slot, false, false);
            sc.note_failure();
        }
    }
}
