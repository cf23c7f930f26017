//! One-sided communication in the engine (see [`crate::rma`] for the protocol): the
//! windows this process exposes, the origin side of every operation, and the target side
//! that applies what arrives.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::{Engine, Outgoing, State};
use crate::buf::RawBufMut;
use crate::error::Error;
use crate::request::{Kind, Request, Status};
use crate::rma::mem::WinMemory;
use crate::rma::{accumulate, check_acc, AccOp, Elem, RmaMsg, Target, MAX_RMA_HEADER};
use crate::transport::{Posted, Transport, TransportError};
use crate::types::{ContextId, Rank, ReqId, Seq};
use crate::wire::{Header, MAX_HEADER_BYTES};

/// The windows of this process, by their communicator's context.
#[derive(Debug, Default)]
pub(super) struct Windows {
    wins: HashMap<u32, Win>,
}

#[derive(Debug)]
struct Win {
    mem: WinMemory,
    /// World rank of each member, by window rank.
    group: Arc<[Rank]>,
    lock: WinLock,
    /// `Post` notices received from each member (it exposed its window to this origin).
    posts: Vec<u32>,
    /// `Complete` notices received from each member (its access epoch here ended).
    completes: Vec<u32>,
}

/// A window's lock at its target: shared holders together, an exclusive one alone,
/// waiters served first come first served.
#[derive(Debug, Default)]
struct WinLock {
    exclusive: Option<u32>,
    shared: Vec<u32>,
    waiting: VecDeque<(u32, u64, bool)>,
}

impl WinLock {
    fn free_for(&self, exclusive: bool) -> bool {
        self.exclusive.is_none() && (!exclusive || self.shared.is_empty())
    }

    fn take(&mut self, origin: u32, exclusive: bool) {
        if exclusive {
            self.exclusive = Some(origin);
        } else {
            self.shared.push(origin);
        }
    }

    /// Releases one lock `origin` holds; `false` if it held none.
    fn release(&mut self, origin: u32) -> bool {
        if self.exclusive == Some(origin) {
            self.exclusive = None;
            return true;
        }
        match self.shared.iter().position(|&o| o == origin) {
            Some(i) => {
                self.shared.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// The waiters that may have the lock now, in order (removed from the queue).
    fn grant_next(&mut self, out: &mut Vec<(u32, u64)>) {
        while let Some(&(origin, token, exclusive)) = self.waiting.front() {
            if !self.free_for(exclusive) {
                break;
            }
            self.waiting.pop_front();
            self.take(origin, exclusive);
            out.push((origin, token));
        }
    }
}

impl Win {
    fn rank_of(&self, peer: Rank) -> Option<u32> {
        self.group.iter().position(|&r| r == peer).map(|i| i as u32)
    }

    /// The window's bytes `[disp, disp + len)`, if inside it.
    fn range(&mut self, disp: u64, len: usize) -> Option<&mut [u8]> {
        let start = usize::try_from(disp).ok()?;
        let end = start.checked_add(len)?;
        self.mem.bytes_mut().get_mut(start..end)
    }
}

impl Engine {
    /// Registers the window of communicator `ctx` (its point-to-point context) with
    /// `group` (the world rank of each window rank) exposing `mem`. Call it at every
    /// member before any member may issue an operation on it (the facade does, before
    /// the exchange that ends window creation).
    pub fn win_register(&mut self, ctx: ContextId, group: Arc<[Rank]>, mem: WinMemory) -> Result<(), Error> {
        let w = &mut self.st.rma.wins;
        if w.contains_key(&ctx.0) {
            return Err(Error::ApiMisuse("a window already exists on this communicator"));
        }
        let n = group.len();
        w.insert(ctx.0, Win { mem, group, lock: WinLock::default(), posts: vec![0; n], completes: vec![0; n] });
        Ok(())
    }

    /// Removes the window of `ctx` and hands back its memory. Operations that arrive
    /// later are dropped.
    pub fn win_free(&mut self, ctx: ContextId) -> Option<WinMemory> {
        self.st.rma.wins.remove(&ctx.0).map(|w| w.mem)
    }

    /// Runs `f` on this process's own window memory (local load and store), exclusive
    /// of every one-sided operation (they are applied under the same lock).
    pub fn win_local<R>(&mut self, ctx: ContextId, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        self.st.rma.wins.get_mut(&ctx.0).map(|w| f(w.mem.bytes_mut()))
    }

    /// The first byte and size of this process's window memory (`MPI_WIN_BASE`).
    pub fn win_base(&self, ctx: ContextId) -> Option<(*mut u8, usize)> {
        self.st.rma.wins.get(&ctx.0).map(|w| (w.mem.base(), w.mem.len()))
    }

    /// Puts `data` at byte `disp` of `target`'s window. Complete locally at return (the
    /// bytes were copied); remotely once a flush, unlock, complete or fence follows.
    pub fn rma_put(&mut self, at: Target, data: &[u8]) -> Result<(), Error> {
        let Target { ctx, rank: target, disp } = at;
        let peer = self.st.rma_target(ctx, target)?;
        if peer == self.st.me {
            let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no such window"))?;
            let dst = w.range(disp, data.len()).ok_or(Error::InvalidArg("put outside the target's window"))?;
            dst.copy_from_slice(data);
            return Ok(());
        }
        let chunk = self.st.send.chunk;
        let mut off = 0;
        loop {
            let end = (off + chunk).min(data.len());
            let msg = RmaMsg::Put { win: ctx.0, disp: disp + off as u64, data: &data[off..end] };
            self.rma_send(peer, &msg);
            off = end;
            if off >= data.len() {
                return Ok(());
            }
        }
    }

    /// Accumulates `data` (elements `elem`) into `target`'s window at byte `disp` with
    /// `op`: element-wise atomic with every other operation on the window.
    pub fn rma_acc(&mut self, at: Target, op: AccOp, elem: Elem, data: &[u8]) -> Result<(), Error> {
        let Target { ctx, rank: target, disp } = at;
        check_acc(op, elem).map_err(|_| Error::InvalidArg("operation not defined on the element type"))?;
        if !data.len().is_multiple_of(elem.size()) {
            return Err(Error::InvalidArg("accumulate of a partial element"));
        }
        let peer = self.st.rma_target(ctx, target)?;
        if peer == self.st.me {
            let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no such window"))?;
            let dst = w.range(disp, data.len()).ok_or(Error::InvalidArg("accumulate outside the target's window"))?;
            return accumulate(op, elem, dst, data).map_err(|_| Error::InvalidArg("accumulate"));
        }
        let chunk = (self.st.send.chunk / elem.size()).max(1) * elem.size();
        let mut off = 0;
        loop {
            let end = (off + chunk).min(data.len());
            let msg = RmaMsg::Acc { win: ctx.0, disp: disp + off as u64, op, elem, data: &data[off..end] };
            self.rma_send(peer, &msg);
            off = end;
            if off >= data.len() {
                return Ok(());
            }
        }
    }

    /// Starts a get of `buf.len()` bytes at byte `disp` of `target`'s window into `buf`.
    pub(crate) fn rma_get(&mut self, at: Target, mut buf: RawBufMut) -> ReqId {
        let Target { ctx, rank: target, disp } = at;
        let len = buf.len();
        let (req, peer) = match self.rma_start(ctx, target, buf) {
            Ok(x) => x,
            Err(id) => return id,
        };
        if peer == self.st.me {
            buf = self.rma_take_buf(req);
            let out = match self.st.rma.wins.get_mut(&ctx.0).and_then(|w| w.range(disp, len)) {
                Some(src) => {
                    buf.as_mut_slice().copy_from_slice(src);
                    Ok(Status { source: target as usize, tag: 0, len })
                }
                None => Err(Error::InvalidArg("get outside the target's window")),
            };
            self.st.set_outcome(req, out);
            return req;
        }
        self.rma_send(peer, &RmaMsg::Get { win: ctx.0, token: req.to_wire(), disp, len: len as u64 });
        req
    }

    /// Starts a get-accumulate: `result` receives the target's elements at `disp` as
    /// they were, and `origin` is accumulated into them with `op` (`NoOp`: a read),
    /// element-wise atomically. `result` and `origin` have the same length.
    pub(crate) fn rma_get_acc(&mut self, at: Target, op: AccOp, elem: Elem, origin: &[u8], result: RawBufMut) -> ReqId {
        let Target { ctx, rank: target, disp } = at;
        let len = result.len();
        let bad = (!len.is_multiple_of(elem.size()) || (op != AccOp::NoOp && origin.len() != len))
            .then_some("get-accumulate buffers differ or hold partial elements")
            .or_else(|| check_acc(op, elem).err().map(|_| "operation not defined on the element type"));
        let (req, peer) = match self.rma_start(ctx, target, result) {
            Ok(x) => x,
            Err(id) => return id,
        };
        if let Some(why) = bad {
            self.st.set_outcome(req, Err(Error::InvalidArg(why)));
            return req;
        }
        if peer == self.st.me {
            let mut buf = self.rma_take_buf(req);
            let out = match self.st.rma.wins.get_mut(&ctx.0).and_then(|w| w.range(disp, len)) {
                Some(dst) => {
                    buf.as_mut_slice().copy_from_slice(dst);
                    if op != AccOp::NoOp {
                        let _ = accumulate(op, elem, dst, origin);
                    }
                    Ok(Status { source: target as usize, tag: 0, len })
                }
                None => Err(Error::InvalidArg("get-accumulate outside the target's window")),
            };
            self.st.set_outcome(req, out);
            return req;
        }
        let token = req.to_wire();
        if op == AccOp::NoOp {
            // A read: one `Get`, answered in chunks.
            self.rma_send(peer, &RmaMsg::Get { win: ctx.0, token, disp, len: len as u64 });
            return req;
        }
        let chunk = (self.st.send.chunk / elem.size()).max(1) * elem.size();
        let mut off = 0;
        while off < len {
            let end = (off + chunk).min(len);
            let (d, roff, data) = (disp + off as u64, off as u64, &origin[off..end]);
            self.rma_send(peer, &RmaMsg::GetAcc { win: ctx.0, token, disp: d, roff, op, elem, data });
            off = end;
        }
        req
    }

    /// Starts a compare-and-swap of one element at `disp`: the target's element goes
    /// to `result`, and becomes `new` if it equalled `compare`.
    pub(crate) fn rma_cas(&mut self, at: Target, elem: Elem, compare: &[u8], new: &[u8], result: RawBufMut) -> ReqId {
        let Target { ctx, rank: target, disp } = at;
        let n = elem.size();
        let bad = compare.len() != n || new.len() != n || result.len() != n;
        let (req, peer) = match self.rma_start(ctx, target, result) {
            Ok(x) => x,
            Err(id) => return id,
        };
        if bad {
            self.st.set_outcome(req, Err(Error::InvalidArg("compare-and-swap of other than one element")));
            return req;
        }
        if peer == self.st.me {
            let mut buf = self.rma_take_buf(req);
            let out = match self.st.rma.wins.get_mut(&ctx.0).and_then(|w| w.range(disp, n)) {
                Some(dst) => {
                    buf.as_mut_slice().copy_from_slice(dst);
                    if dst == compare {
                        dst.copy_from_slice(new);
                    }
                    Ok(Status { source: target as usize, tag: 0, len: n })
                }
                None => Err(Error::InvalidArg("compare-and-swap outside the target's window")),
            };
            self.st.set_outcome(req, out);
            return req;
        }
        let mut both = [0u8; 16];
        both[..n].copy_from_slice(compare);
        both[n..2 * n].copy_from_slice(new);
        self.rma_send(peer, &RmaMsg::Cas { win: ctx.0, token: req.to_wire(), disp, elem, data: &both[..2 * n] });
        req
    }

    /// Starts a flush to `target`: completes once the target applied every operation
    /// this process issued to it before.
    pub fn rma_flush(&mut self, ctx: ContextId, target: u32) -> ReqId {
        self.rma_control(ctx, target, |win, token| RmaMsg::Flush { win, token }, |_, _, _| Some(Ok(())))
    }

    /// Starts acquiring `target`'s window lock (shared or exclusive): completes when
    /// granted, or with `RankFailStop` if the target fails first.
    pub fn rma_lock(&mut self, ctx: ContextId, target: u32, exclusive: bool) -> ReqId {
        self.rma_control(
            ctx,
            target,
            |win, token| RmaMsg::Lock { win, token, exclusive },
            |w: &mut Win, me: u32, token: u64| {
                if w.lock.free_for(exclusive) && w.lock.waiting.is_empty() {
                    w.lock.take(me, exclusive);
                    Some(Ok(()))
                } else {
                    w.lock.waiting.push_back((me, token, exclusive));
                    None
                }
            },
        )
    }

    /// Starts releasing `target`'s window lock: completes once the target applied every
    /// operation this process issued to it and released the lock.
    pub fn rma_unlock(&mut self, ctx: ContextId, target: u32) -> ReqId {
        let req = self.rma_control(
            ctx,
            target,
            |win, token| RmaMsg::Unlock { win, token },
            |w: &mut Win, me: u32, _| {
                Some(if w.lock.release(me) { Ok(()) } else { Err(Error::ApiMisuse("unlock of a lock not held")) })
            },
        );
        // A local release may let a waiter in.
        self.st.rma_grant(ctx.0);
        req
    }

    /// Tells `origin` that this process's window is exposed to it (`MPI_Win_post`).
    pub fn rma_post(&mut self, ctx: ContextId, origin: u32) -> Result<(), Error> {
        self.rma_notice(ctx, origin, RmaMsg::Post { win: ctx.0 })
    }

    /// Tells `target` that this process's access epoch to it ended (`MPI_Win_complete`),
    /// behind every operation this process issued to it.
    pub fn rma_complete(&mut self, ctx: ContextId, target: u32) -> Result<(), Error> {
        self.rma_notice(ctx, target, RmaMsg::Complete { win: ctx.0 })
    }

    /// Takes one `Post` from `target` if it arrived (`MPI_Win_start`).
    pub fn rma_take_post(&mut self, ctx: ContextId, target: u32) -> bool {
        take_one(self.st.rma.wins.get_mut(&ctx.0).and_then(|w| w.posts.get_mut(target as usize)))
    }

    /// Takes one `Complete` from `origin` if it arrived (`MPI_Win_wait`/`test`).
    pub fn rma_take_complete(&mut self, ctx: ContextId, origin: u32) -> bool {
        take_one(self.st.rma.wins.get_mut(&ctx.0).and_then(|w| w.completes.get_mut(origin as usize)))
    }

    /// Whether a `Complete` from `origin` is there to take.
    pub fn rma_has_complete(&self, ctx: ContextId, origin: u32) -> bool {
        self.st.rma.wins.get(&ctx.0).and_then(|w| w.completes.get(origin as usize)).is_some_and(|&n| n > 0)
    }

    fn rma_notice(&mut self, ctx: ContextId, to: u32, msg: RmaMsg<'_>) -> Result<(), Error> {
        let peer = self.st.rma_target(ctx, to)?;
        if peer == self.st.me {
            self.st.on_rma_msg(peer, msg);
        } else {
            self.rma_send(peer, &msg);
        }
        Ok(())
    }

    /// A request with no data (flush, lock, unlock): sent as `msg`, or applied at once
    /// by `local` when the target is this process (`None`: it completes later).
    fn rma_control(
        &mut self,
        ctx: ContextId,
        target: u32,
        msg: impl FnOnce(u32, u64) -> RmaMsg<'static>,
        local: impl FnOnce(&mut Win, u32, u64) -> Option<Result<(), Error>>,
    ) -> ReqId {
        let (req, peer) = match self.rma_start(ctx, target, RawBufMut::empty()) {
            Ok(x) => x,
            Err(id) => return id,
        };
        if peer == self.st.me {
            let done = self.st.rma.wins.get_mut(&ctx.0).and_then(|w| local(w, target, req.to_wire()));
            if let Some(r) = done {
                self.st.set_outcome(req, r.map(|()| Status { source: target as usize, tag: 0, len: 0 }));
            }
            return req;
        }
        self.rma_send(peer, &msg(ctx.0, req.to_wire()));
        req
    }

    /// A request for an operation on `target` (its window rank), or the id of one that
    /// already failed (unknown window, bad rank, failed target).
    fn rma_start(&mut self, ctx: ContextId, target: u32, buf: RawBufMut) -> Result<(ReqId, Rank), ReqId> {
        let (peer, err) = match self.st.rma_target(ctx, target) {
            Ok(p) => (p, None),
            Err(e) => (Rank(u32::MAX), Some(e)),
        };
        let req =
            self.st.reqs.insert(Request { kind: Kind::Rma { peer, rank: target, buf, got: 0 }, outcome: None, ctx });
        match err {
            Some(e) => {
                self.st.set_outcome(req, Err(e));
                Err(req)
            }
            None => Ok((req, peer)),
        }
    }

    /// The buffer of request `req` (to fill it at once), replaced by an empty view.
    fn rma_take_buf(&mut self, req: ReqId) -> RawBufMut {
        match self.st.reqs.get_mut(req) {
            Some(Request { kind: Kind::Rma { buf, .. }, .. }) => std::mem::replace(buf, RawBufMut::empty()),
            _ => RawBufMut::empty(),
        }
    }

    /// Sends `msg` to `peer` behind everything queued for it, taking the next sequence
    /// number: straight to the transport when nothing is queued and it takes the record
    /// (no allocation), else queued with a copy.
    fn rma_send(&mut self, peer: Rank, msg: &RmaMsg<'_>) {
        let Engine { transport, st } = self;
        let p = &mut st.peers[peer.0 as usize];
        let seq = Seq(p.send_seq);
        p.send_seq = p.send_seq.wrapping_add(1);
        let mut rh = [0u8; MAX_RMA_HEADER];
        let rn = msg.encode_header(&mut rh);
        if p.pending.is_empty() {
            let mut hb = [0u8; MAX_HEADER_BYTES];
            let n = Header::Rma { seq }.encode(&mut hb);
            hb[n..n + rn].copy_from_slice(&rh[..rn]);
            match transport.try_send(peer, &hb[..n + rn], msg.data()) {
                Ok(Posted::Done | Posted::InFlight(_)) => return,
                Err(TransportError::Busy) => {}
                Err(e) => {
                    tracing::debug!(peer = peer.0, error = %e, "one-sided record not sent");
                    st.fail.newly_failed.push(peer);
                    return;
                }
            }
        }
        let mut rec = st.send.pool.pop().unwrap_or_default();
        rec.extend_from_slice(&rh[..rn]);
        rec.extend_from_slice(msg.data());
        st.queue(peer, Outgoing::Rma { seq, rec });
    }
}

fn take_one(n: Option<&mut u32>) -> bool {
    match n {
        Some(n) if *n > 0 => {
            *n -= 1;
            true
        }
        _ => false,
    }
}

impl State {
    /// The world rank of window rank `target`, checked: the window exists here, the rank
    /// is a member, and it is not known failed.
    fn rma_target(&self, ctx: ContextId, target: u32) -> Result<Rank, Error> {
        let w = self.rma.wins.get(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        let peer = *w
            .group
            .get(target as usize)
            .ok_or(Error::InvalidRank { rank: target as i64, size: w.group.len() as u32 })?;
        if self.peers[peer.0 as usize].failed {
            return Err(Error::RankFailStop { rank: target });
        }
        Ok(peer)
    }

    /// A one-sided record from `peer` (its turn in the sequence).
    pub(super) fn on_rma(&mut self, peer: Rank, payload: &[u8]) {
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

    fn on_rma_msg(&mut self, peer: Rank, m: RmaMsg<'_>) {
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
            RmaMsg::Put { disp, data, .. } => match w.range(disp, data.len()) {
                Some(dst) => dst.copy_from_slice(data),
                None => self.stray(peer, "put outside the window"),
            },
            RmaMsg::Acc { disp, op, elem, data, .. } => {
                if w.range(disp, data.len()).is_none_or(|dst| accumulate(op, elem, dst, data).is_err()) {
                    self.stray(peer, "accumulate outside the window or of a bad type");
                }
            }
            RmaMsg::Get { token, disp, len, .. } => {
                let chunk = self.send.chunk;
                let Some(src) = usize::try_from(len).ok().and_then(|l| w.range(disp, l)) else {
                    return self.rma_answer(peer, RmaMsg::Done { token, refused: true });
                };
                // Copies out before answering: the replies are queued (sent at the next
                // flush, behind what is queued for the origin).
                let mut at = 0;
                let mut recs = Vec::new();
                while at < src.len() || at == 0 {
                    let end = (at + chunk).min(src.len());
                    let mut rec = self.send.pool.pop().unwrap_or_default();
                    let mut rh = [0u8; MAX_RMA_HEADER];
                    let rn = RmaMsg::Reply { token, offset: at as u64, data: &[] }.encode_header(&mut rh);
                    rec.extend_from_slice(&rh[..rn]);
                    rec.extend_from_slice(&src[at..end]);
                    recs.push(rec);
                    at = end;
                    if at >= src.len() {
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
                match w.range(disp, data.len()) {
                    Some(dst) if check_acc(op, elem).is_ok() && data.len().is_multiple_of(elem.size()) => {
                        rec.extend_from_slice(&rh[..rn]);
                        rec.extend_from_slice(dst);
                        let _ = accumulate(op, elem, dst, data);
                        self.rma_queue(peer, rec);
                    }
                    _ => {
                        self.recycle(rec);
                        self.rma_answer(peer, RmaMsg::Done { token, refused: true });
                    }
                }
            }
            RmaMsg::Cas { token, disp, elem, data, .. } => {
                let n = elem.size();
                match w.range(disp, n) {
                    Some(dst) if data.len() == 2 * n => {
                        let mut rec = self.send.pool.pop().unwrap_or_default();
                        let mut rh = [0u8; MAX_RMA_HEADER];
                        let rn = RmaMsg::Reply { token, offset: 0, data: &[] }.encode_header(&mut rh);
                        rec.extend_from_slice(&rh[..rn]);
                        rec.extend_from_slice(dst);
                        if dst == &data[..n] {
                            dst.copy_from_slice(&data[n..]);
                        }
                        self.rma_queue(peer, rec);
                    }
                    _ => self.rma_answer(peer, RmaMsg::Done { token, refused: true }),
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
    fn rma_grant(&mut self, win: u32) {
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
    pub(super) fn rma_peer_failed(&mut self, peer: Rank) {
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
