//! Receiving: starting a receive (matching the unexpected queue or posting), and what
//! the transport delivers — records decoded in place, put back in send order by their
//! sequence numbers, matched against posted receives (payloads copied straight from the
//! ring into the user's buffer) or queued as unexpected in pooled buffers.

use crate::matching::{PostedQueue, UnexpectedQueue};
use runthrough_ft::{AgreeMsg, Msg};

use super::{Engine, Pull, State, Unexp, UnexpEntry, EARLY_AGREE_KEEP};
use crate::buf::RawBufMut;
use crate::error::Error;
use crate::matching::{Arrival, Pattern};
use crate::note::Note;
use crate::request::{Kind, RecvPhase, Request, Status};
use crate::types::{ContextId, Rank, ReqId};
use crate::wire::{Envelope, Header};

/// The matching queues: receives posted and waiting, messages arrived and unmatched.
#[derive(Debug)]
pub(super) struct Receiving {
    /// Receives posted and not matched yet.
    pub(super) posted: PostedQueue<ReqId>,
    /// Messages arrived before a receive matched them.
    pub(super) unexpected: UnexpectedQueue<UnexpEntry>,
}

impl Receiving {
    pub(super) fn new() -> Self {
        Self { posted: PostedQueue::default(), unexpected: UnexpectedQueue::default() }
    }
}

impl Engine {
    /// Starts a receive into `buf` for `pattern`; `peer` is the world rank of a specific
    /// source (`None` for ANY_SOURCE).
    pub(crate) fn start_recv(&mut self, pattern: Pattern, peer: Option<Rank>, buf: RawBufMut) -> ReqId {
        let req = self.st.reqs.insert(Request {
            kind: Kind::Recv { peer, buf, phase: RecvPhase::AwaitingMatch },
            outcome: None,
            ctx: pattern.ctx,
        });
        if self.st.cs.comm_notices && self.st.comm_takes(pattern.ctx, req) {
            return req;
        }
        let comm = self.st.comms.get(pattern.ctx);
        // R17/R18: a collective receive on a communicator made inactive by a failure fails
        // at once. A collective that began just before the failure became known posts its
        // receives after `fail_peer` failed the pending ones; members that learnt of the
        // failure first skip the collective, so those receives would wait forever.
        if pattern.ctx.is_coll() {
            if let Some(c) = comm.filter(|c| !c.active) {
                let rank =
                    self.st.fail.failures.in_order().iter().rev().find_map(|w| c.local_rank(Rank(*w))).unwrap_or(0);
                self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
                return req;
            }
        }
        // R12: a source whose receive already failed fails every later matching receive.
        if let (Some(s), Some(c)) = (pattern.src, comm) {
            if c.is_poisoned(s) {
                self.st.set_outcome(req, Err(Error::RankFailStop { rank: s }));
                return req;
            }
        }
        let found = match comm {
            Some(c) => self.st.recv.unexpected.take_match_where(&pattern, |a, _| !c.is_poisoned(a.src)),
            None => self.st.recv.unexpected.take_match(&pattern),
        };
        // R11 / R13: buffered messages are delivered first, also to a disabled wildcard.
        if let Some((a, e)) = found {
            match e.data {
                Unexp::Eager(data) => {
                    self.st.deliver_eager(req, &a, &data);
                    self.st.recycle(data);
                }
                Unexp::Rts { len, sreq, region, pull: hint } => {
                    let pull = Pull { rreq: req, peer: e.peer, src: a.src, tag: a.tag.0, len, sreq, region, hint };
                    let Engine { transport, st } = self;
                    st.pull(transport, pull);
                    st.flush(transport);
                }
            }
            return req;
        }
        if let Some(p) = peer {
            if self.st.peers[p.0 as usize].failed {
                let rank = pattern.src.unwrap_or(p.0);
                self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
                if let Some(c) = self.st.comms.get_mut(pattern.ctx) {
                    c.poison(rank);
                }
                return req;
            }
        } else if let Some(rank) = self.st.wildcard_blocker(pattern.ctx) {
            self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
            return req;
        }
        self.st.recv.posted.post(pattern, req);
        req
    }

    /// The small-message path of a receive: when nothing stands in the way (no pending
    /// communicator notice, a point-to-point context, a source whose receives need not
    /// fail), takes the earliest buffered message `pattern` matches if it is an eager one
    /// that fits `buf`, copies it and returns its status — no request slot, nothing
    /// posted. `None`: start the receive as usual ([`Engine::start_recv`]), which sees
    /// the queue as this left it. (It does not poll the transport first: a poll per
    /// receive cost `osu_bw` 8 B about a fifth, 2 ranks, three interleaved runs.)
    pub(crate) fn try_recv_now(&mut self, pattern: &Pattern, buf: &mut RawBufMut) -> Option<Status> {
        if self.st.cs.comm_notices || pattern.ctx.is_coll() {
            return None;
        }
        if self.st.recv.unexpected.is_empty() {
            return None;
        }
        let st = &mut self.st;
        let comm = st.comms.get(pattern.ctx);
        if pattern.src.is_some_and(|s| comm.is_some_and(|c| c.is_poisoned(s))) {
            return None;
        }
        let fits = |e: &UnexpEntry| matches!(&e.data, Unexp::Eager(d) if d.len() <= buf.len());
        let (a, e) =
            st.recv.unexpected.take_first_match_if(pattern, |a| comm.is_none_or(|c| !c.is_poisoned(a.src)), fits)?;
        let Unexp::Eager(data) = e.data else { unreachable!("only an eager message is taken") };
        buf.as_mut_slice()[..data.len()].copy_from_slice(&data);
        let status = Status { source: a.src as usize, tag: a.tag.0, len: data.len() };
        st.recycle(data);
        Some(status)
    }

    /// Finds the earliest buffered message matching `pattern` without receiving it.
    pub fn probe_unexpected(&self, pattern: &Pattern) -> Option<Status> {
        self.st.recv.unexpected.peek_match(pattern).map(|(a, e)| Status {
            source: a.src as usize,
            tag: a.tag.0,
            len: match &e.data {
                Unexp::Eager(d) => d.len(),
                Unexp::Rts { len, .. } => *len as usize,
            },
        })
    }
}

impl State {
    pub(super) fn on_record(&mut self, peer: Rank, bytes: &[u8]) {
        let Some(p) = self.peers.get_mut(peer.0 as usize) else { return };
        if let Some(ft) = self.fail.ft.as_mut() {
            if ft.observed == Some(peer.0) {
                ft.observed_spoke = true;
            }
        }
        // The common record first: an in-order eager message (no `Header` built).
        if let Some((env, payload)) = crate::wire::decode_eager(bytes) {
            if env.seq.0 == p.recv_seq {
                p.recv_seq = p.recv_seq.wrapping_add(1);
                let held = !p.held.is_empty();
                self.on_eager(peer, env, payload);
                if held {
                    self.release_held(peer);
                }
                return;
            }
        }
        let (h, payload) = match Header::decode(bytes) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                tracing::warn!(peer = peer.0, error = %e, "dropping malformed record");
                return;
            }
        };
        if let Header::Agree = h {
            match AgreeMsg::decode(payload) {
                Ok(m) => {
                    let now = self.agree.now();
                    match self.agree.running.iter_mut().find(|(_, a)| a.instance() == m.instance()) {
                        Some((_, a)) => {
                            a.handle_message(peer.0, m, now);
                            self.agree.dirty = true;
                        }
                        None if self.agree.early.len() < EARLY_AGREE_KEEP => self.agree.early.push((peer, m)),
                        None => tracing::warn!(peer = peer.0, "dropping agreement message: too many early ones"),
                    }
                }
                Err(e) => {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, error = %e, "dropping malformed agreement message");
                }
            }
            return;
        }
        if let Header::Note = h {
            match Note::decode(payload) {
                // Behind every message the peer sent before (one ordered channel).
                Ok(Note::Bye) if !p.failed => self.dep.byes.push(peer),
                Ok(Note::ByeAck) => p.awaiting_bye_ack = false,
                Ok(n @ (Note::Revoke { .. } | Note::Corrupt { .. } | Note::Signal { .. } | Note::Mark { .. })) => {
                    self.dep.notes_in.push((peer, n))
                }
                Ok(Note::Discard { sreq }) => self.discarded(peer, ReqId::from_wire(sreq)),
                Ok(Note::CancelSend { seq }) if !p.failed => self.withdraw(peer, seq),
                Ok(Note::CancelAck { seq, cancelled }) => self.cancel_answered(peer, seq, cancelled),
                Ok(_) => {}
                Err(e) => {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, error = %e, "dropping malformed notice");
                }
            }
            return;
        }
        if let Header::Ft = h {
            if let Some(ft) = self.fail.ft.as_mut() {
                match Msg::decode(payload) {
                    Ok(m) => {
                        let now = ft.now();
                        ft.det.handle_message(peer.0, m, now);
                        ft.dirty = true;
                    }
                    Err(e) => {
                        self.stats.malformed += 1;
                        tracing::warn!(peer = peer.0, error = %e, "dropping malformed ft message");
                    }
                }
            }
            return;
        }
        let seq = match h {
            Header::Eager { env, .. } | Header::Rts { env, .. } => Some(env.seq.0),
            Header::Rma { seq } => Some(seq.0),
            _ => None,
        };
        match seq {
            Some(s) if s != p.recv_seq => {
                if s.wrapping_sub(p.recv_seq) < u32::MAX / 2 {
                    p.held.insert(s, bytes.to_vec());
                } else {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, seq = s, "dropping duplicate or stale message");
                }
            }
            Some(_) => {
                p.recv_seq = p.recv_seq.wrapping_add(1);
                self.on_matched(peer, h, payload);
                self.release_held(peer);
            }
            // A failed peer's late protocol traffic refers to requests already failed.
            None if p.failed => {}
            None => self.on_protocol(peer, h, payload),
        }
    }

    pub(super) fn release_held(&mut self, peer: Rank) {
        loop {
            let p = &mut self.peers[peer.0 as usize];
            if p.held.is_empty() {
                return;
            }
            let Some(rec) = p.held.remove(&p.recv_seq) else { return };
            p.recv_seq = p.recv_seq.wrapping_add(1);
            if let Ok((h, payload)) = Header::decode(&rec) {
                self.on_matched(peer, h, payload);
            }
        }
    }

    /// Whether messages on `ctx` are dropped on arrival: its communicator is broken (a
    /// flag read while no communicator ever was).
    #[inline]
    pub(super) fn drops_arrivals(&self, ctx: ContextId) -> bool {
        self.cs.comm_notices && self.comms.get(ctx).is_some_and(|c| c.broken.is_some())
    }

    /// An eager message taken in order from `peer`: to the earliest matching posted
    /// receive, else to the unexpected queue.
    #[inline]
    pub(super) fn on_eager(&mut self, peer: Rank, env: Envelope, payload: &[u8]) {
        if self.drops_arrivals(env.ctx) {
            return;
        }
        let a = Arrival { ctx: env.ctx, src: env.src, tag: env.tag };
        if let Some((_, rreq)) = self.recv.posted.take_match(&a) {
            self.deliver_eager(rreq, &a, payload);
        } else {
            let mut v = self.send.pool.pop().unwrap_or_default();
            v.extend_from_slice(payload);
            self.stats.unexpected += 1;
            self.recv.unexpected.push(a, UnexpEntry { peer, data: Unexp::Eager(v), seq: env.seq.0 });
        }
    }

    pub(super) fn on_matched(&mut self, peer: Rank, h: Header, payload: &[u8]) {
        match h {
            Header::Eager { env, .. } => self.on_eager(peer, env, payload),
            Header::Rma { .. } => self.on_rma(peer, payload),
            Header::Rts { env, sreq, .. } if self.drops_arrivals(env.ctx) => {
                self.post_or_queue_note(peer, Note::Discard { sreq: sreq.to_wire() });
            }
            Header::Rts { env, len, sreq, region, pull: hint } => {
                let a = Arrival { ctx: env.ctx, src: env.src, tag: env.tag };
                if let Some((_, rreq)) = self.recv.posted.take_match(&a) {
                    self.rdv.pulls.push(Pull { rreq, peer, src: env.src, tag: env.tag.0, len, sreq, region, hint });
                } else {
                    self.stats.unexpected += 1;
                    let data = Unexp::Rts { len, sreq, region, pull: hint };
                    self.recv.unexpected.push(a, UnexpEntry { peer, data, seq: env.seq.0 });
                }
            }
            _ => {}
        }
    }

    pub(super) fn deliver_eager(&mut self, rreq: ReqId, a: &Arrival, payload: &[u8]) {
        let Some(Request { kind: Kind::Recv { buf, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else { return };
        let n = payload.len().min(buf.len());
        buf.as_mut_slice()[..n].copy_from_slice(&payload[..n]);
        *outcome = Some(if payload.len() > buf.len() {
            Err(Error::Truncate { posted: buf.len(), arrived: payload.len() })
        } else {
            Ok(Status { source: a.src as usize, tag: a.tag.0, len: payload.len() })
        });
    }

    pub(super) fn stray(&mut self, peer: Rank, what: &'static str) {
        self.stats.stray += 1;
        tracing::warn!(peer = peer.0, what, "dropping stray protocol header");
    }

    /// Drops a buffered message of a broken communicator; a rendezvous is answered with
    /// `Discard` so its sender completes (and withdraws its exposure).
    pub(super) fn drop_unexpected(&mut self, e: UnexpEntry) {
        match e.data {
            Unexp::Eager(v) => self.recycle(v),
            Unexp::Rts { sreq, .. } => self.post_or_queue_note(e.peer, Note::Discard { sreq: sreq.to_wire() }),
        }
    }
}
