//! Departure (finalize, R6): the `Bye`/`ByeAck` handshake that tells peers this rank is
//! leaving rather than failing, and the communicator notices (revoke, corrupt, signals)
//! read from the wire, applied after each poll, or kept for communicators not created
//! yet.

use super::{Engine, Outgoing};
use crate::comms::Broken;
use crate::note::Note;
use crate::types::{ContextId, Rank};

/// Departure and the notices read from the wire.
#[derive(Debug)]
pub(super) struct Departure {
    /// This rank is finalizing (departure handshake sent): its detector no longer
    /// judges others (see [`Engine::begin_departure`]).
    pub(super) departing: bool,
    /// Peers whose `Bye` arrived and still has to be answered and applied.
    pub(super) byes: Vec<Rank>,
    /// Communicator notices read from the wire (with their sender), applied after the
    /// poll.
    pub(super) notes_in: Vec<(Rank, Note)>,
    /// Notices for communicators this process has not created yet (bounded).
    pub(super) early_notes: Vec<(Rank, Note)>,
}

impl Departure {
    pub(super) fn new() -> Self {
        Self { departing: false, byes: Vec::new(), notes_in: Vec::new(), early_notes: Vec::new() }
    }
}

/// Revoke/corrupt notices kept for communicators not created yet, at most.
pub(super) const EARLY_NOTES_KEEP: usize = 256;

impl Engine {
    /// Starts this rank's departure (finalize, R6): sends `Bye` to every live peer behind
    /// whatever is queued for it, and from now on the failure detector no longer judges
    /// others (peers that read the `Bye` stop heartbeating this rank; a verdict drawn
    /// from that silence would be false) — a verdict only ends the wait for that peer.
    /// Poll [`Engine::departure_pending`] with [`Engine::progress`] until it is 0.
    pub fn begin_departure(&mut self) {
        if self.st.dep.departing {
            return;
        }
        self.st.dep.departing = true;
        let me = self.st.me.0 as usize;
        for i in 0..self.st.peers.len() {
            if i == me || self.st.peers[i].failed {
                continue;
            }
            self.st.peers[i].awaiting_bye_ack = true;
            self.st.post_or_queue(&mut self.transport, Rank(i as u32), Outgoing::Note(Note::Bye));
        }
    }

    /// Live peers that have not answered this rank's `Bye` yet.
    pub fn departure_pending(&self) -> usize {
        self.st.peers.iter().filter(|p| p.awaiting_bye_ack && !p.failed).count()
    }

    /// Applies the communicator notices read (revoke, corrupt): outside the transport
    /// poll, as applying one sends (it is forwarded to every member).
    pub(super) fn apply_notes(&mut self) {
        for (from, n) in std::mem::take(&mut self.st.dep.notes_in) {
            let ctx = match n {
                Note::Revoke { ctx } | Note::Corrupt { ctx } | Note::Signal { ctx, .. } | Note::Mark { ctx, .. } => {
                    ContextId(ctx)
                }
                _ => continue,
            };
            if self.st.comms.get(ctx).is_some() {
                match n {
                    Note::Revoke { .. } => self.break_comm(ctx, Broken::Revoked),
                    Note::Corrupt { .. } => self.break_comm(ctx, Broken::Corrupted),
                    Note::Signal { id, code, .. } => self.learn_signal(ctx, id, code),
                    Note::Mark { epoch, .. } => self.mark_from(ctx, from, epoch),
                    _ => {}
                }
            } else if self.st.dep.early_notes.len() < EARLY_NOTES_KEEP && !self.st.dep.early_notes.contains(&(from, n))
            {
                self.st.dep.early_notes.push((from, n));
            }
        }
    }

    /// Answers the `Bye`s read: a `ByeAck` first (nothing is sent to a departed peer),
    /// then the departure is applied; a busy transport defers both to the next progress.
    pub(super) fn answer_byes(&mut self) {
        for peer in std::mem::take(&mut self.st.dep.byes) {
            if self.is_failed(peer) {
                continue;
            }
            let Engine { transport, st } = self;
            match st.try_post(transport, peer, Outgoing::Note(Note::ByeAck)) {
                Some(_) => st.dep.byes.push(peer),
                None => {
                    tracing::debug!(rank = peer.0, "peer said bye: departed");
                    self.peer_departed(peer);
                }
            }
        }
    }

    /// `peer` exited after finalizing: like [`Engine::fail_peer`] its pending operations
    /// complete with `RankFailStop` (they can never complete otherwise) and its messages
    /// are drained first, but it is not a failure: it does not join the failure set, does
    /// not disable wildcards (R13) and is not reported by `failed_in` (R8).
    pub fn peer_departed(&mut self, peer: Rank) {
        if self.is_failed(peer) || peer.0 >= self.size() {
            return;
        }
        self.drain();
        self.st.peers[peer.0 as usize].departed = true;
        self.st.fail_peer(peer);
        // It will never send again: an agreement still waiting for it stops waiting (it
        // decided every agreement it took part in before finalizing, so only one this
        // process joined late — e.g. after the others wrongly took it for failed — can be
        // waiting, and would otherwise wait forever).
        let now = self.st.agree.now();
        for (_, a) in &mut self.st.agree.running {
            a.handle_failure(peer.0, now);
        }
        self.st.agree.dirty |= !self.st.agree.running.is_empty();
        // A notice it would have passed on along the ring goes past it.
        self.pass_notes_past(peer);
        self.after_failures();
    }
}
