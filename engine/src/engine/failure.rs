//! Failure handling: the failure detector as the engine drives it ([`Ft`]: heartbeats,
//! verdicts, exclusion), suspects handed to a witness (R32), and what a failure does
//! to the engine's work: `fail_peer` completes every request touching the failed rank
//! with `RankFailStop` and discards its protocol work, from outside the protocols (R9,
//! R17), after draining what the transport still held from it.

use runthrough_ft::failure_set::FailureSet;
use std::sync::atomic::Ordering;
use std::time::Instant;

use runthrough_ft::ring::Ring;
use runthrough_ft::{Detector, FtEvent, Msg, Time};

use super::{Engine, Outgoing, State};
use crate::comms::Comms;
use crate::error::Error;
use crate::request::{Kind, RecvPhase};
use crate::transport::Transport;
use crate::types::{ContextId, Rank};

/// What the engine knows of failures: the detector, the failed set, the peers failed since the last poll, and suspects waiting for the witness.
#[derive(Debug)]
pub(super) struct Failures {
    /// The failure detector, once enabled.
    pub(super) ft: Option<Ft>,
    /// The ranks known failed.
    pub(super) failures: FailureSet,
    /// Peers failed since the last poll, to be handled by `fail_peer`.
    pub(super) newly_failed: Vec<Rank>,
    /// Witnessed mode (R32): the detector's verdicts and the transports' evidence wait in
    /// `suspects` for the witness (the launcher) before they fail a peer.
    pub(super) witnessed: bool,
    /// Ranks suspected and not yet handed to the witness ([`Engine::take_suspects`]).
    pub(super) suspects: Vec<Rank>,
}

impl Failures {
    pub(super) fn new(size: u32) -> Self {
        Self {
            ft: None,
            failures: FailureSet::new(size),
            newly_failed: Vec::new(),
            witnessed: false,
            suspects: Vec::new(),
        }
    }
}

/// The failure detector as the engine drives it (docs/ARCHITECTURE.md §3).
#[derive(Debug)]
pub(super) struct Ft {
    pub(super) det: Detector,
    pub(super) origin: Instant,
    pub(super) excluded: bool,
    pub(super) scratch: Vec<u8>,
    /// A message was handled since the detector's output was last drained.
    pub(super) dirty: bool,
    /// The rank the detector observes (cached), and whether any record arrived from it
    /// since the last tick: traffic proves liveness as well as a heartbeat does, and
    /// heartbeats can be crowded out by a busy transport.
    pub(super) observed: Option<u32>,
    pub(super) observed_spoke: bool,
}

impl Ft {
    pub(super) fn now(&self) -> Time {
        Time::from_duration(self.origin.elapsed())
    }
}

/// Transport drains before a peer is declared failed (each drains up to all records).
pub(super) const DRAIN_ROUNDS: usize = 64;

impl Engine {
    /// Starts the ring failure detector with `cfg` on `ring` (the same at every rank;
    /// [`Ring::interleaving`] of the ranks' hosts, so a dead host is found in one
    /// timeout) — call once every rank is up: all start their timeout windows now.
    ///
    /// # Panics
    /// If `ring` orders another number of ranks than the job's (a programming error).
    pub fn enable_ft(&mut self, cfg: runthrough_ft::Config, ring: Ring) {
        let mut det = Detector::on_ring(self.st.me.0, self.size(), cfg, Time::ZERO, ring);
        det.set_witnessed(self.st.fail.witnessed);
        self.st.fail.ft = Some(Ft {
            observed: det.observing(),
            det,
            origin: Instant::now(),
            excluded: false,
            scratch: Vec::new(),
            dirty: false,
            observed_spoke: false,
        });
        self.ft_service();
    }

    /// Witnessed mode (R32, partitions): from now on a rank the detector finds silent,
    /// or the fabric reports in error, is not failed here but handed to the witness: the
    /// runtime collects it with [`Engine::take_suspects`], asks the launcher, and fails
    /// it with [`Engine::fail_peer`] once the launcher confirmed (the launcher takes the
    /// first of two contradicting claims and excludes the other claimant). Evidence that
    /// is certain stays direct: the launcher's own notices and a shared-memory peer's
    /// process exit (its pidfd) call [`Engine::fail_peer`] themselves.
    pub fn set_witnessed(&mut self, on: bool) {
        self.st.fail.witnessed = on;
        if let Some(ft) = self.st.fail.ft.as_mut() {
            ft.det.set_witnessed(on);
        }
    }

    /// The ranks suspected since the last call (witnessed mode), each once while it is
    /// neither failed nor confirmed.
    pub fn take_suspects(&mut self) -> Vec<Rank> {
        std::mem::take(&mut self.st.fail.suspects)
    }

    /// The witness refused the suspicion of `peer` (R31, R32: the launcher still hears
    /// from it during its start-up): the detector drops it and gives `peer` a fresh
    /// window, after which, silent still, it is suspected again.
    pub fn refute_suspect(&mut self, peer: Rank) {
        if let Some(ft) = self.st.fail.ft.as_mut() {
            let now = ft.now();
            ft.det.handle_refuted(peer.0, now);
        }
        self.ft_service();
    }

    /// Whether the detector runs.
    pub fn ft_enabled(&self) -> bool {
        self.st.fail.ft.is_some()
    }

    /// Whether the others declared this process failed (it must stop, never rejoin).
    pub fn is_excluded(&self) -> bool {
        self.st.fail.ft.as_ref().is_some_and(|f| f.excluded)
    }

    /// Drives the detector's clock: expired timers, heartbeats and notices to send,
    /// failures to apply. Called periodically by the runtime's progress thread.
    pub fn ft_tick(&mut self) {
        if let Some(ft) = self.st.fail.ft.as_mut() {
            let now = ft.now();
            if std::mem::take(&mut ft.observed_spoke) {
                if let Some(p) = ft.observed {
                    ft.det.handle_message(p, Msg::Heartbeat, now);
                }
            }
            if ft.det.poll_timeout().is_some_and(|t| t <= now) {
                ft.det.handle_timeout(now);
            }
        }
        self.ft_service();
    }

    /// Sends what the detector wants sent and applies what it decided.
    pub(super) fn ft_service(&mut self) {
        loop {
            let Engine { transport, st } = self;
            let Some(ft) = st.fail.ft.as_mut() else { return };
            ft.dirty = false;
            ft.observed = ft.det.observing();
            let mut failed = Vec::new();
            let mut suspected = Vec::new();
            while let Some(ev) = ft.det.poll_event() {
                match ev {
                    // Departing: see `begin_departure`; the verdict only ends the wait.
                    FtEvent::Failed { rank, .. } if st.dep.departing => {
                        if let Some(p) = st.peers.get_mut(rank as usize) {
                            p.awaiting_bye_ack = false;
                        }
                    }
                    FtEvent::Failed { rank, .. } => failed.push(Rank(rank)),
                    FtEvent::Suspected { rank } if !st.dep.departing => suspected.push(Rank(rank)),
                    FtEvent::Excluded => {
                        ft.excluded = true;
                        st.pulse.attention.store(true, Ordering::Relaxed);
                        tracing::warn!("this rank was declared failed by the others: excluded");
                    }
                    _ => {}
                }
            }
            for r in suspected {
                st.suspect(r);
            }
            let Some(ft) = st.fail.ft.as_mut() else { return };
            let mut out = Vec::new();
            while let Some((to, msg)) = ft.det.poll_transmit() {
                out.push((Rank(to), msg));
            }
            for (to, msg) in out {
                if to.0 >= st.peers.len() as u32
                    || st.peers[to.0 as usize].failed && !matches!(msg, Msg::Notice { .. })
                    || st.dep.departing && matches!(msg, Msg::Notice { .. })
                {
                    continue;
                }
                let queued = !st.peers[to.0 as usize].pending.is_empty();
                let dead = st.peers[to.0 as usize].failed;
                match (msg, queued) {
                    // Best effort to a failed peer (it may be hung and learn it was
                    // excluded): never queued, as a dead peer's transport may stay busy
                    // forever (fabric credits) and finalize would wait on it.
                    (Msg::Notice { .. }, _) if dead => {
                        let _ = st.try_post(transport, to, Outgoing::Ft(msg));
                    }
                    (Msg::Notice { .. }, true) => st.queue(to, Outgoing::Ft(msg)),
                    (Msg::Notice { .. }, false) => {
                        if let Some(back) = st.try_post(transport, to, Outgoing::Ft(msg)) {
                            st.queue(to, back);
                        }
                    }
                    // Heartbeats are periodic: one lost to a busy transport is replaced.
                    (_, _) => {
                        let _ = st.try_post(transport, to, Outgoing::Ft(msg));
                    }
                }
            }
            if failed.is_empty() {
                return;
            }
            for r in failed {
                self.fail_peer(r);
            }
        }
    }

    /// World ranks known failed, in the order they became known.
    pub fn failed_ranks(&self) -> &[u32] {
        self.st.fail.failures.in_order()
    }

    /// Hands every record the transports hold to the engine (bounded).
    pub(super) fn drain(&mut self) {
        let Engine { transport, st } = self;
        for _ in 0..DRAIN_ROUNDS {
            let n = transport.poll(usize::MAX, |ev| st.on_event(ev));
            st.run_pulls(transport, false);
            if n == 0 {
                break;
            }
        }
    }

    pub(super) fn after_failures(&mut self) {
        let others = self.st.take_newly_failed();
        for p in others {
            self.fail_peer(p);
        }
        let Engine { transport, st } = self;
        if st.send.queued > 0 {
            st.flush(transport);
        }
    }

    /// Marks `peer` failed and completes every request touching it with `RankFailStop`;
    /// its queued protocol work is discarded. First the transport is drained, so every
    /// message the peer sent before it died (or finalized) is matched or buffered and is
    /// still delivered (R11). Idempotent.
    pub fn fail_peer(&mut self, peer: Rank) {
        if self.is_failed(peer) || peer.0 >= self.size() {
            return;
        }
        self.drain();
        self.st.fail_peer(peer);
        if let Some(ft) = self.st.fail.ft.as_mut() {
            let now = ft.now();
            ft.det.handle_local_failure(peer.0, now);
        }
        let now = self.st.agree.now();
        for (_, a) in &mut self.st.agree.running {
            a.handle_failure(peer.0, now);
        }
        self.st.agree.dirty |= !self.st.agree.running.is_empty();
        self.pass_notes_past(peer);
        self.after_failures();
        // Sends the failure completed withdraw their exposure now, not at a later
        // progress: their buffers may be the user's again once released (R30).
        let Engine { transport, st } = self;
        for region in st.send.unexpose.drain(..) {
            transport.unexpose(region);
        }
    }
}

impl State {
    /// Records a suspicion for the witness (R32), once per rank not already failed.
    pub(super) fn suspect(&mut self, peer: Rank) {
        let known = self.peers.get(peer.0 as usize).is_none_or(|p| p.failed);
        if !known && !self.fail.suspects.contains(&peer) {
            tracing::debug!(peer = peer.0, "suspected: asking the witness");
            self.fail.suspects.push(peer);
            self.pulse.attention.store(true, Ordering::Relaxed);
        }
    }

    /// The peers the transports found in error since the last call; in witnessed mode
    /// (R32) they become suspicions instead (a fabric error may be a partition).
    pub(super) fn take_newly_failed(&mut self) -> Vec<Rank> {
        let v = std::mem::take(&mut self.fail.newly_failed);
        if !self.fail.witnessed {
            return v;
        }
        for p in v {
            self.suspect(p);
        }
        Vec::new()
    }

    /// The failed member a wildcard receive on `ctx` reports while wildcards are
    /// disabled (R13): the most recent failure among the communicator's members.
    pub(super) fn wildcard_blocker(&self, ctx: ContextId) -> Option<u32> {
        let c = self.comms.get(ctx)?;
        if !c.wildcard_disabled {
            return None;
        }
        self.fail.failures.in_order().iter().rev().find_map(|w| c.local_rank(Rank(*w)))
    }

    pub(super) fn fail_peer(&mut self, peer: Rank) {
        let Some(p) = self.peers.get_mut(peer.0 as usize) else { return };
        if p.failed {
            return;
        }
        p.failed = true;
        self.failed_set.insert(peer);
        let departed = p.departed;
        if !departed {
            self.fail.failures.insert(peer.0);
        }
        p.held.clear();
        let dropped = p.pending.len();
        p.pending.clear();
        // Its reads in flight may never report (their receives fail below).
        self.rdv.reads.retain(|_, r| r.peer != peer);
        self.send.queued -= dropped;
        tracing::debug!(peer = peer.0, "failing requests of failed peer");
        // R13: every communicator containing the failed rank disables its wildcards.
        let containing = if departed { Vec::new() } else { self.comms.containing(peer) };
        // A failure a validate already recognised (the agreement told us before the
        // detector did) changes nothing collectively: the other members carry on with
        // the communicator active, so deactivating it here would make this member skip
        // a collective they wait in.
        let mut fresh = Vec::with_capacity(containing.len());
        for &(ctx, local) in &containing {
            if let Some(c) = self.comms.get_mut(ctx) {
                c.wildcard_disabled = true;
                if !c.recognized.contains(&local) {
                    // R18: collectively inactive until validated.
                    c.active = false;
                    if let (Some(slot), Some(sc)) = (c.shm_slot, &self.cs.shm_coll) {
                        sc.set_state(slot, false, false);
                    }
                    fresh.push((ctx, local));
                }
            }
        }
        // After the states: a collective that sees the new generation also sees them.
        if let Some(sc) = &self.cs.shm_coll {
            sc.note_failure();
        }
        // R17: receives of collectives in progress on those communicators fail, so no
        // member waits for one that gave up (collective data travels eagerly, so no
        // sender waits on a receiver).
        for (ctx, local) in &fresh {
            let coll = ctx.coll();
            while let Some((_, id)) = self.recv.posted.remove_where(|pat, _| pat.ctx == coll) {
                self.set_outcome(id, Err(Error::RankFailStop { rank: *local }));
            }
        }
        for id in self.reqs.ids() {
            let Some(r) = self.reqs.get(id) else { continue };
            if r.outcome.is_some() {
                continue;
            }
            let rank = match &r.kind {
                Kind::Send { peer: p, dest, .. } if *p == peer => Some(*dest),
                Kind::Recv { phase: RecvPhase::AwaitingData { peer: p, src, .. }, .. } if *p == peer => Some(*src),
                Kind::Recv { phase: RecvPhase::AwaitingRead { peer: p, src, .. }, .. } if *p == peer => Some(*src),
                Kind::Recv { peer: Some(p), phase: RecvPhase::AwaitingMatch, .. } if *p == peer => {
                    let posted = self.recv.posted.remove_where(|_, x| *x == id);
                    posted.map(|(pat, _)| {
                        let rank = pat.src.unwrap_or(peer.0);
                        if let Some(c) = self.comms.get_mut(pat.ctx) {
                            c.poison(rank);
                        }
                        rank
                    })
                }
                Kind::Rma { peer: p, rank, .. } if *p == peer => Some(*rank),
                Kind::Recv { peer: None, phase: RecvPhase::AwaitingMatch, .. } => {
                    let hit = containing.iter().find_map(|(ctx, local)| {
                        self.recv
                            .posted
                            .remove_where(|pat, x| *x == id && Comms::same_comm(pat.ctx, *ctx))
                            .map(|_| *local)
                    });
                    hit
                }
                _ => None,
            };
            if let Some(rank) = rank {
                self.set_outcome(id, Err(Error::RankFailStop { rank }));
            }
        }
        self.rma_peer_failed(peer);
    }
}
