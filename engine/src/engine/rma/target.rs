//! The target side of one-sided communication: applying the records that arrive
//! (puts, accumulates, gets and their answers, locks and notices) to this process's
//! windows, with the same element-wise atomics as an origin on the node uses
//! (`crate::rma::direct`), and releasing what a failed origin held.

use super::{Kind, Request, Status, MAX_RMA_HEADER};
use crate::engine::{Outgoing, State};
use crate::error::Error;
use crate::rma::{check_acc, RmaMsg};
use crate::types::{Rank, ReqId, Seq};

impl State {
    /// A one-sided record from `peer` (its turn in the sequence).
    pub(in crate::engine) fn on_rma(&mut self, peer: Rank, payload: &[u8]) {
        if self.peers[peer.0 as usize].failed {
            // Nothing is written once its writer is known failed (R35).
            return;
        }
        match RmaMsg::decode(payload) {
            Ok(m) => self.on_rma_msg(peer, m),
            Err(e) => {
                self.stats.malformed += 1;
                tracing::warn!(peer = peer.0, error = %e, "dropping malformed one-sided message");
            }
        }
    }

    pub(super) fn on_rma_msg(&mut self, peer: Rank, m: RmaMsg<'_>) {
        match m {
            RmaMsg::Reply { token, offset, data } => return self.rma_reply(peer, token, offset, data),
            RmaMsg::Done { token, refused } => return self.rma_done(peer, token, refused),
            _ => {}
        }
        let win = match m {
            RmaMsg::Put { win, .. }
            | RmaMsg::Get { win, .. }
            | RmaMsg::Acc { win, .. }
            | RmaMsg::GetAcc { win, .. }
            | RmaMsg::Cas { win, .. }
            | RmaMsg::Flush { win, .. }
            | RmaMsg::Lock { win, .. }
            | RmaMsg::Unlock { win, .. }
            | RmaMsg::Post { win }
            | RmaMsg::Complete { win } => win,
            RmaMsg::Reply { .. } | RmaMsg::Done { .. } => return,
        };
        let Some(w) = self.rma.wins.get_mut(&win) else {
            // A window freed here (or never made): answer what waits for an answer.
            if let RmaMsg::Get { token, .. }
            | RmaMsg::GetAcc { token, .. }
            | RmaMsg::Cas { token, .. }
            | RmaMsg::Flush { token, .. }
            | RmaMsg::Lock { token, .. }
            | RmaMsg::Unlock { token, .. } = m
            {
                self.rma_answer(peer, RmaMsg::Done { token, refused: true });
            }
            return self.stray(peer, "one-sided operation on no window");
        };
        let Some(origin) = w.rank_of(peer) else { return self.stray(peer, "one-sided operation from a non-member") };
        match m {
            RmaMsg::Put { disp, data, .. } => {
                if !w.local(disp, data.len()).is_some_and(|(r, off)| r.write(off, data)) {
                    self.stray(peer, "put outside the window");
                }
            }
            RmaMsg::Acc { disp, op, elem, data, .. } => {
                let at = w.local(disp, data.len());
                if at.is_none_or(|(r, off)| r.accumulate(off, op, elem, data, None).is_err()) {
                    self.stray(peer, "accumulate outside the window or of a bad type");
                }
            }
            RmaMsg::Get { token, disp, len, .. } => {
                let chunk = self.send.chunk;
                let Some((region, base, len)) =
                    usize::try_from(len).ok().and_then(|l| w.local(disp, l).map(|(r, off)| (r, off, l)))
                else {
                    return self.rma_answer(peer, RmaMsg::Done { token, refused: true });
                };
                // Copies out before answering: the replies are queued (sent at the next
                // flush, behind what is queued for the origin).
                let mut at = 0;
                let mut recs = Vec::new();
                loop {
                    let end = (at + chunk).min(len);
                    let mut rec = self.send.pool.pop().unwrap_or_default();
                    let mut rh = [0u8; MAX_RMA_HEADER];
                    let rn = RmaMsg::Reply { token, offset: at as u64, data: &[] }.encode_header(&mut rh);
                    rec.extend_from_slice(&rh[..rn]);
                    rec.resize(rn + end - at, 0);
                    region.read(base + at as u64, &mut rec[rn..]);
                    recs.push(rec);
                    at = end;
                    if at >= len {
                        break;
                    }
                }
                for rec in recs {
                    self.rma_queue(peer, rec);
                }
            }
            RmaMsg::GetAcc { token, disp, roff, op, elem, data, .. } => {
                let mut rec = self.send.pool.pop().unwrap_or_default();
                let mut rh = [0u8; MAX_RMA_HEADER];
                let rn = RmaMsg::Reply { token, offset: roff, data: &[] }.encode_header(&mut rh);
                rec.extend_from_slice(&rh[..rn]);
                rec.resize(rn + data.len(), 0);
                let applied = check_acc(op, elem).is_ok()
                    && w.local(disp, data.len())
                        .is_some_and(|(r, off)| r.accumulate(off, op, elem, data, Some(&mut rec[rn..])).is_ok());
                match applied {
                    true => self.rma_queue(peer, rec),
                    false => {
                        self.recycle(rec);
                        self.rma_answer(peer, RmaMsg::Done { token, refused: true });
                    }
                }
            }
            RmaMsg::Cas { token, disp, elem, data, .. } => {
                let n = elem.size();
                let mut rec = self.send.pool.pop().unwrap_or_default();
                let mut rh = [0u8; MAX_RMA_HEADER];
                let rn = RmaMsg::Reply { token, offset: 0, data: &[] }.encode_header(&mut rh);
                rec.extend_from_slice(&rh[..rn]);
                rec.resize(rn + n, 0);
                let swapped = data.len() == 2 * n
                    && w.local(disp, n).is_some_and(|(r, off)| {
                        r.compare_and_swap(off, elem, &data[..n], &data[n..], &mut rec[rn..]).is_ok()
                    });
                if swapped {
                    self.rma_queue(peer, rec);
                } else {
                    self.recycle(rec);
                    self.rma_answer(peer, RmaMsg::Done { token, refused: true });
                }
            }
            RmaMsg::Flush { token, .. } => self.rma_answer(peer, RmaMsg::Done { token, refused: false }),
            RmaMsg::Lock { token, exclusive, .. } => {
                w.lock.waiting.push_back((origin, token, exclusive));
                self.rma_grant(win);
            }
            RmaMsg::Unlock { token, .. } => {
                let held = w.lock.release(origin);
                self.rma_answer(peer, RmaMsg::Done { token, refused: !held });
                self.rma_grant(win);
            }
            RmaMsg::Post { .. } => w.posts[origin as usize] += 1,
            RmaMsg::Complete { .. } => w.completes[origin as usize] += 1,
            RmaMsg::Reply { .. } | RmaMsg::Done { .. } => {}
        }
    }

    /// Grants window `win`'s lock to the waiters that may have it now.
    pub(super) fn rma_grant(&mut self, win: u32) {
        let mut granted = Vec::new();
        let Some(w) = self.rma.wins.get_mut(&win) else { return };
        w.lock.grant_next(&mut granted);
        let group = w.group.clone();
        for (origin, token) in granted {
            let peer = group[origin as usize];
            if peer == self.me {
                let id = ReqId::from_wire(token);
                self.set_outcome(id, Ok(Status { source: origin as usize, tag: 0, len: 0 }));
            } else {
                self.rma_answer(peer, RmaMsg::Done { token, refused: false });
            }
        }
    }

    /// Queues an answer (`Done`) to `peer`.
    fn rma_answer(&mut self, peer: Rank, msg: RmaMsg<'_>) {
        let mut rec = self.send.pool.pop().unwrap_or_default();
        let mut rh = [0u8; MAX_RMA_HEADER];
        let rn = msg.encode_header(&mut rh);
        rec.extend_from_slice(&rh[..rn]);
        self.rma_queue(peer, rec);
    }

    /// Queues the encoded message `rec` for `peer` with the next sequence number (sent
    /// at the next flush of the pending queues).
    fn rma_queue(&mut self, peer: Rank, rec: Vec<u8>) {
        if self.peers[peer.0 as usize].failed {
            return self.recycle(rec);
        }
        let p = &mut self.peers[peer.0 as usize];
        let seq = Seq(p.send_seq);
        p.send_seq = p.send_seq.wrapping_add(1);
        self.queue(peer, Outgoing::Rma { seq, rec });
    }

    /// Bytes of a get's answer: into the request's buffer at `offset`.
    fn rma_reply(&mut self, peer: Rank, token: u64, offset: u64, data: &[u8]) {
        let id = ReqId::from_wire(token);
        let Some(Request { kind: Kind::Rma { peer: p, rank, buf, got }, outcome: None, .. }) = self.reqs.get_mut(id)
        else {
            return self.stray(peer, "one-sided reply for no waiting request");
        };
        if *p != peer {
            return self.stray(peer, "one-sided reply from another peer");
        }
        let (rank, total) = (*rank, buf.len());
        let Some(dst) =
            usize::try_from(offset).ok().and_then(|o| buf.as_mut_slice().get_mut(o..o.checked_add(data.len())?))
        else {
            return self.stray(peer, "one-sided reply outside its buffer");
        };
        dst.copy_from_slice(data);
        *got += data.len() as u64;
        if *got >= total as u64 {
            self.set_outcome(id, Ok(Status { source: rank as usize, tag: 0, len: total }));
        }
    }

    /// A flush, lock or unlock answered, or an operation refused.
    fn rma_done(&mut self, peer: Rank, token: u64, refused: bool) {
        let id = ReqId::from_wire(token);
        let Some(Request { kind: Kind::Rma { peer: p, rank, buf, .. }, outcome: None, .. }) = self.reqs.get(id) else {
            return self.stray(peer, "one-sided answer for no waiting request");
        };
        if *p != peer {
            return self.stray(peer, "one-sided answer from another peer");
        }
        let out = if refused {
            Err(Error::InvalidArg("the target refused the operation (outside its window, or no window)"))
        } else {
            Ok(Status { source: *rank as usize, tag: 0, len: buf.len() })
        };
        self.set_outcome(id, out);
    }

    /// `peer` failed: the locks it held or waited for at this process's windows are
    /// released (R36: no origin waits for a dead holder).
    pub(in crate::engine) fn rma_peer_failed(&mut self, peer: Rank) {
        let wins: Vec<u32> = self.rma.wins.keys().copied().collect();
        for win in wins {
            let Some(w) = self.rma.wins.get_mut(&win) else { continue };
            let Some(origin) = w.rank_of(peer) else { continue };
            while w.lock.release(origin) {}
            w.lock.waiting.retain(|&(o, _, _)| o != origin);
            self.rma_grant(win);
        }
    }
}
