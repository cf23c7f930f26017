//! Sending: starting a send (sequence number, eager or rendezvous), posting work to the
//! transport, and the per-peer pending queues that keep what a busy transport refused
//! in order, so nothing overtakes.

use super::{choice_bucket, Engine, Outgoing, State, POOL_KEEP};
use crate::buf::RawBuf;
use crate::comms::Broken;
use crate::error::Error;
use crate::note::{Note, MAX_NOTE_BYTES};
use crate::request::{Kind, Request, SendPhase, Status};
use crate::transport::{AnyTransport, Posted, Transport, TransportError};
use crate::types::{Rank, RemoteRegion, ReqId, SendTarget, Seq};
use crate::wire::{Envelope, Header, MAX_HEADER_BYTES};

/// What sending keeps between calls: the limits taken from the transport, the work queued behind a busy transport, buffers for reuse, and exposures to withdraw.
#[derive(Debug)]
pub(super) struct Sending {
    /// Largest eager payload: the configured limit within a record.
    pub(super) eager_max: usize,
    /// Fragment of a streamed rendezvous.
    pub(super) chunk: usize,
    /// Work items in the peers' pending queues, all peers together.
    pub(super) queued: usize,
    /// Unexpected-payload buffers kept for reuse.
    pub(super) pool: Vec<Vec<u8>>,
    /// Exposures of finished sends, withdrawn at the next progress.
    pub(super) unexpose: Vec<RemoteRegion>,
}

impl Sending {
    pub(super) fn new(eager_max: usize, chunk: usize) -> Self {
        Self { eager_max, chunk, queued: 0, pool: Vec::new(), unexpose: Vec::new() }
    }
}

impl Engine {
    /// Starts sending `buf` to `peer` (world rank) on context `ctx`, as rank `src` of the
    /// communicator to its rank `dest`. Never blocks; an error is reported at completion.
    pub(crate) fn start_send(&mut self, to: SendTarget, buf: RawBuf) -> ReqId {
        self.start_send_mode(to, buf, false)
    }

    /// The small-message path: sends `buf` at once when it is an eager message and the
    /// transport takes it now, with no request slot. Returns the send's status then (the
    /// send is complete: the transport copied `buf`), or `None` when the general path
    /// ([`Engine::start_send`]) must run: a rendezvous size, a peer with queued work (its
    /// order must hold), a failed peer, a communicator with a notice (R27–R29), a busy
    /// or failing transport. Nothing was sent and no sequence number taken then.
    #[inline]
    pub(crate) fn try_send_now(&mut self, to: SendTarget, buf: &[u8]) -> Option<Status> {
        let SendTarget { ctx, src, dest, peer, tag } = to;
        let Engine { transport, st } = self;
        if buf.len() > st.send.eager_max || st.cs.comm_notices {
            return None;
        }
        let p = st.peers.get_mut(peer.0 as usize)?;
        if p.failed || !p.pending.is_empty() {
            return None;
        }
        let header = Header::Eager { env: Envelope { ctx, src, tag, seq: Seq(p.send_seq) }, len: buf.len() as u32 };
        let mut hb = [0u8; MAX_HEADER_BYTES];
        let n = header.encode(&mut hb);
        match transport.try_send(peer, &hb[..n], buf) {
            Ok(Posted::Done) | Ok(Posted::InFlight(_)) => {
                p.send_seq = p.send_seq.wrapping_add(1);
                Some(Status { source: dest as usize, tag: tag.0, len: buf.len() })
            }
            Err(_) => None,
        }
    }

    /// [`Engine::start_send`], or with `sync` a synchronous-mode send (MPI_Ssend): it
    /// always takes the rendezvous path, so it completes only once the receiver matched
    /// it and took the data.
    pub(crate) fn start_send_mode(&mut self, to: SendTarget, buf: RawBuf, sync: bool) -> ReqId {
        let SendTarget { ctx, src, dest, peer, tag } = to;
        let Engine { transport, st } = self;
        let len = buf.len();
        let phase = SendPhase::AwaitingTransport;
        let req = st.reqs.insert(Request {
            kind: Kind::Send { peer, dest, tag: tag.0, buf, phase, region: None },
            outcome: None,
            ctx,
        });
        // Revoked/corrupted (R28, R29) or resolving (R27) communicators: one flag read
        // on the hot path while none exists.
        if st.cs.comm_notices && st.comm_takes(ctx, req) {
            return req;
        }
        let p = &mut st.peers[peer.0 as usize];
        if p.failed {
            st.set_outcome(req, Err(Error::RankFailStop { rank: dest }));
            return req;
        }
        let env = Envelope { ctx, src, tag, seq: Seq(p.send_seq) };
        p.send_seq = p.send_seq.wrapping_add(1);
        let header = if len <= st.send.eager_max && !sync {
            Header::Eager { env, len: len as u32 }
        } else {
            // Without an exposure the receiver cannot pull and asks for a stream instead.
            let region = transport.expose(peer, buf.addr(), len).unwrap_or(RemoteRegion {
                addr: buf.addr(),
                len: len as u64,
                key: 0,
            });
            if let Some(Request { kind: Kind::Send { region: r, .. }, .. }) = st.reqs.get_mut(req) {
                *r = Some(region);
            }
            let c = &st.rdv.choice[choice_bucket(len as u64)];
            let pull = (st.cfg.cma_choose && c.decided()).then(|| c.pull());
            Header::Rts { env, len: len as u64, sreq: req, region, pull }
        };
        let out = Outgoing::Msg { req, header };
        if st.peers[peer.0 as usize].pending.is_empty() {
            if let Some(out) = st.try_post(transport, peer, out) {
                st.peers[peer.0 as usize].pending.push_back(out);
                st.send.queued += 1;
            }
        } else {
            st.peers[peer.0 as usize].pending.push_back(out);
            st.send.queued += 1;
        }
        req
    }
}

impl State {
    /// Tries to hand `out` to the transport. Returns it back when the transport is busy
    /// (or only partly took a stream).
    pub(super) fn try_post(&mut self, t: &mut AnyTransport, peer: Rank, out: Outgoing) -> Option<Outgoing> {
        let mut hb = [0u8; MAX_HEADER_BYTES];
        match out {
            Outgoing::Msg { req, header } => {
                let n = header.encode(&mut hb);
                let (payload, eager) = match (&header, self.reqs.get(req)) {
                    (Header::Eager { .. }, Some(Request { kind: Kind::Send { buf, .. }, .. })) => (*buf, true),
                    (_, Some(_)) => (RawBuf::empty(), false),
                    (_, None) => return None,
                };
                match t.try_send(peer, &hb[..n], payload.as_slice()) {
                    Ok(Posted::Done) | Ok(Posted::InFlight(_)) => {
                        if eager {
                            let st = self.send_status(req);
                            self.set_outcome(req, Ok(st));
                        } else if let Some(Request { kind: Kind::Send { phase, .. }, .. }) = self.reqs.get_mut(req) {
                            *phase = SendPhase::AwaitingFinOrCts;
                        }
                        None
                    }
                    Err(TransportError::Busy) => Some(Outgoing::Msg { req, header }),
                    Err(e) => {
                        self.send_failed(peer, req, e);
                        None
                    }
                }
            }
            Outgoing::Ctrl(header) => {
                let n = header.encode(&mut hb);
                (!self.send_control(t, peer, &hb[..n], &[])).then_some(Outgoing::Ctrl(header))
            }
            Outgoing::Note(note) => {
                let n = Header::Note.encode(&mut hb);
                let mut nb = [0u8; MAX_NOTE_BYTES];
                let len = note.encode(&mut nb);
                (!self.send_control(t, peer, &hb[..n], &nb[..len])).then_some(Outgoing::Note(note))
            }
            Outgoing::Rma { seq, rec } => {
                let n = Header::Rma { seq }.encode(&mut hb);
                match t.try_send(peer, &hb[..n], &rec) {
                    Err(TransportError::Busy) => Some(Outgoing::Rma { seq, rec }),
                    Ok(_) => {
                        self.recycle(rec);
                        None
                    }
                    Err(e) => {
                        tracing::debug!(peer = peer.0, error = %e, "one-sided record not sent");
                        self.fail.newly_failed.push(peer);
                        self.recycle(rec);
                        None
                    }
                }
            }
            Outgoing::Agree(bytes) => {
                let n = Header::Agree.encode(&mut hb);
                match t.try_send(peer, &hb[..n], &bytes) {
                    Err(TransportError::Busy) => Some(Outgoing::Agree(bytes)),
                    _ => None,
                }
            }
            Outgoing::Ft(msg) => {
                let n = Header::Ft.encode(&mut hb);
                let ft = self.fail.ft.as_mut()?;
                ft.scratch.clear();
                msg.encode(&mut ft.scratch);
                match t.try_send(peer, &hb[..n], &ft.scratch) {
                    Err(TransportError::Busy) => Some(Outgoing::Ft(msg)),
                    _ => None,
                }
            }
            Outgoing::Stream { sreq, rreq, mut offset } => {
                let buf = match self.reqs.get(sreq) {
                    Some(Request { kind: Kind::Send { buf, .. }, outcome: None, .. }) => *buf,
                    _ => return None,
                };
                let data = buf.as_slice();
                while (offset as usize) < data.len() {
                    let end = (offset as usize + self.send.chunk).min(data.len());
                    let n = Header::Data { rreq, offset }.encode(&mut hb);
                    match t.try_send(peer, &hb[..n], &data[offset as usize..end]) {
                        Ok(_) => offset = end as u64,
                        Err(TransportError::Busy) => return Some(Outgoing::Stream { sreq, rreq, offset }),
                        Err(e) => {
                            self.send_failed(peer, sreq, e);
                            return None;
                        }
                    }
                }
                let st = self.send_status(sreq);
                self.set_outcome(sreq, Ok(st));
                self.stats.streamed += 1;
                None
            }
        }
    }

    /// Sends a reliable control record (no user data); `false` when the transport is
    /// busy. A transport error fails the peer.
    pub(super) fn send_control(&mut self, t: &mut AnyTransport, peer: Rank, header: &[u8], payload: &[u8]) -> bool {
        match t.try_send(peer, header, payload) {
            Ok(_) => true,
            Err(TransportError::Busy) => false,
            Err(e) => {
                tracing::debug!(peer = peer.0, error = %e, "control record not sent");
                self.fail.newly_failed.push(peer);
                true
            }
        }
    }

    pub(super) fn send_status(&self, req: ReqId) -> Status {
        match self.reqs.get(req) {
            Some(Request { kind: Kind::Send { dest, tag, buf, .. }, .. }) => {
                Status { source: *dest as usize, tag: *tag, len: buf.len() }
            }
            _ => Status { source: 0, tag: 0, len: 0 },
        }
    }

    pub(super) fn send_failed(&mut self, peer: Rank, req: ReqId, e: TransportError) {
        let dest = match self.reqs.get(req) {
            Some(Request { kind: Kind::Send { dest, .. }, .. }) => *dest,
            _ => peer.0,
        };
        let err = match e {
            TransportError::Peer { .. } => {
                self.fail.newly_failed.push(peer);
                Error::RankFailStop { rank: dest }
            }
            other => Error::Transport(other.to_string()),
        };
        self.set_outcome(req, Err(err));
    }

    /// Retries every peer's queued work in order, stopping at the first busy entry.
    pub(super) fn flush(&mut self, t: &mut AnyTransport) {
        for i in 0..self.peers.len() {
            while let Some(out) = self.peers[i].pending.pop_front() {
                self.send.queued -= 1;
                if let Some(back) = self.try_post(t, Rank(i as u32), out) {
                    self.peers[i].pending.push_front(back);
                    self.send.queued += 1;
                    break;
                }
            }
        }
    }

    /// Posts `out` behind whatever is queued for `peer` (queues it when the transport
    /// is busy): for reliable messages whose order with the peer's data matters.
    pub(super) fn post_or_queue(&mut self, t: &mut AnyTransport, peer: Rank, out: Outgoing) {
        let out = if self.peers[peer.0 as usize].pending.is_empty() { self.try_post(t, peer, out) } else { Some(out) };
        if let Some(back) = out {
            self.queue(peer, back);
        }
    }

    pub(super) fn queue(&mut self, peer: Rank, out: Outgoing) {
        self.peers[peer.0 as usize].pending.push_back(out);
        self.send.queued += 1;
    }

    /// Queues a notice for `peer` (sent at the next flush, behind its queued work).
    pub(super) fn post_or_queue_note(&mut self, peer: Rank, note: Note) {
        if !self.peers[peer.0 as usize].failed {
            self.queue(peer, Outgoing::Note(note));
        }
    }

    pub(super) fn recycle(&mut self, mut v: Vec<u8>) {
        if self.send.pool.len() < POOL_KEEP {
            v.clear();
            self.send.pool.push(v);
        }
    }

    /// `peer` dropped our rendezvous `sreq` unmatched: the send completes with its
    /// communicator's error.
    pub(super) fn discarded(&mut self, peer: Rank, sreq: ReqId) {
        let ctx = match self.reqs.get(sreq) {
            Some(Request { kind: Kind::Send { peer: p, .. }, outcome: None, ctx }) if *p == peer => *ctx,
            _ => return self.stray(peer, "discard for no waiting send"),
        };
        let err = self.comms.get(ctx).and_then(|c| c.broken).map_or(Error::Revoked, Broken::error);
        self.set_outcome(sreq, Err(err));
    }
}
