//! Cancelling sends (MPI_Cancel, MPI-4.1 3.8.4) with the `CancelSend`/`CancelAck`
//! notices (`note.rs`): the sender names its message by the sequence number it took to
//! the receiver; the receiver withdraws it if it still waits unmatched in its unexpected
//! queue and answers either way.

use std::collections::HashMap;

use super::{Engine, State, Unexp, UnexpEntry};
use crate::note::Note;
use crate::request::{Kind, Request};
use crate::types::{Rank, ReqId};

/// Cancels of sends asked of their receivers ([`Engine::cancel_send`]).
#[derive(Debug)]
pub(super) struct Cancels {
    /// By (peer, sequence number): the send request if it still had one, and the answer
    /// once it came.
    pub(super) asked: HashMap<(u32, u32), (Option<ReqId>, Option<bool>)>,
}

impl Cancels {
    pub(super) fn new() -> Self {
        Self { asked: HashMap::new() }
    }
}

impl Engine {
    /// The sequence number the next message to `peer` takes (0 for a rank out of range).
    pub(crate) fn send_seq(&self, peer: Rank) -> u32 {
        self.st.peers.get(peer.0 as usize).map_or(0, |p| p.send_seq)
    }

    /// MPI_Cancel of a send: asks `peer` to withdraw our message `seq` (whose send request
    /// is `sreq` if it still has one) if it has not matched it (`CancelSend`, `note.rs`).
    /// The answer is [`Engine::take_cancel_outcome`]'s. Nothing is asked of a failed or
    /// departed peer (the answer is then `false`).
    pub(crate) fn cancel_send(&mut self, peer: Rank, seq: u32, sreq: Option<ReqId>) {
        let Some(p) = self.st.peers.get(peer.0 as usize) else { return };
        if p.failed || p.departed || self.st.cancel.asked.contains_key(&(peer.0, seq)) {
            return;
        }
        self.st.cancel.asked.insert((peer.0, seq), (sreq, None));
        self.st.post_or_queue_note(peer, Note::CancelSend { seq });
    }

    /// The answer to [`Engine::cancel_send`] for message `seq` to `peer`, taken once:
    /// `Some(true)` withdrawn unmatched (it will never be received; a rendezvous send
    /// request has completed), `Some(false)` not (it is or will be received, or no cancel
    /// was asked, or the peer failed or departed meanwhile), `None` not answered yet.
    pub(crate) fn take_cancel_outcome(&mut self, peer: Rank, seq: u32) -> Option<bool> {
        let key = (peer.0, seq);
        let gone = self.st.peers.get(peer.0 as usize).is_none_or(|p| p.failed || p.departed);
        match self.st.cancel.asked.get(&key) {
            None => Some(false),
            Some((_, None)) if !gone => None,
            Some((_, answer)) => {
                let out = answer.unwrap_or(false);
                self.st.cancel.asked.remove(&key);
                Some(out)
            }
        }
    }
}

impl State {
    /// `peer` cancels its message `seq` (MPI_Cancel of a send, `note.rs`): withdrawn if it
    /// waits unmatched in the unexpected queue (its data dropped; a rendezvous is never
    /// pulled), and the answer goes back behind whatever is queued for `peer`. A message
    /// already matched, held out of order or not arrived yet is left alone: it is or will
    /// be received, which the answer `false` tells the sender.
    pub(super) fn withdraw(&mut self, peer: Rank, seq: u32) {
        let found = self.recv.unexpected.remove_where(|_, e| e.peer == peer && e.seq == seq);
        let cancelled = found.is_some();
        if let Some((_, UnexpEntry { data: Unexp::Eager(v), .. })) = found {
            self.recycle(v);
        }
        self.post_or_queue_note(peer, Note::CancelAck { seq, cancelled });
    }

    /// `peer` answered the cancel of our message `seq`: recorded for
    /// [`Engine::take_cancel_outcome`]. A withdrawn rendezvous will never be pulled: its
    /// send request completes now (its exposure withdrawn); an eager send completed when
    /// the transport took it.
    pub(super) fn cancel_answered(&mut self, peer: Rank, seq: u32, cancelled: bool) {
        let Some((sreq, answer)) = self.cancel.asked.get_mut(&(peer.0, seq)) else {
            return self.stray(peer, "cancel answer for no cancel");
        };
        *answer = Some(cancelled);
        let Some(sreq) = sreq.filter(|_| cancelled) else { return };
        if matches!(self.reqs.get(sreq), Some(Request { kind: Kind::Send { peer: p, .. }, outcome: None, .. }) if *p == peer)
        {
            let st = self.send_status(sreq);
            self.set_outcome(sreq, Ok(st));
        }
    }
}
