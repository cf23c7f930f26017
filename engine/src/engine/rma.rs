//! One-sided communication in the engine (see [`crate::rma`] for the protocol): the
//! windows this process exposes and the origin side of every operation; `target.rs` is
//! the target side that applies what arrives.
//!
//! An operation on a member whose memory this process maps (its own window, or a window
//! in the segment of its node: [`Engine::win_share`]) is applied at once with loads,
//! stores and atomics (`crate::rma::direct`): complete at its target when the call
//! returns, so a flush to that member is a memory fence. Every other member gets records.

mod target;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::{Engine, Outgoing, State};
use crate::buf::RawBufMut;
use crate::error::Error;
use crate::request::{Kind, Request, Status};
use runthrough_shm::cma;

use crate::rma::direct::{DirectError, DirectWin, Region};
use crate::rma::mem::WinMemory;
use crate::rma::{check_acc, AccOp, Elem, RmaMsg, Target, MAX_RMA_HEADER};
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
    /// This process's window rank.
    me: u32,
    /// The members on this node this process reaches directly (their memory mapped
    /// here; its own is `mem`).
    node: Option<Arc<DirectWin>>,
    /// Members on this node whose (created) window this process reaches with CMA:
    /// process id, address and bytes.
    cma: Vec<Option<(i32, u64, usize)>>,
    /// Members that have records of this process's that a flush must wait for.
    unflushed: Vec<bool>,
    /// A dynamic window's attached memory (`MPI_Win_attach`), addressed by absolute
    /// address; `None` for the other windows, addressed by offset in `mem`.
    attached: Option<Vec<WinMemory>>,
}

/// How an origin reaches bytes of a member's window.
enum Reach {
    /// Directly: the region and the offset in it.
    Direct(Region, u64),
    /// By records its engine applies.
    Records,
    /// Not at all: outside this process's own window.
    Outside,
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

    /// This process's memory holding `[disp, disp + len)` of the window, and the offset
    /// there: `mem` at `disp`, or for a dynamic window the attached memory holding the
    /// address `disp`; `None` when the range is not all inside it.
    fn local(&self, disp: u64, len: usize) -> Option<(Region, u64)> {
        let Some(list) = &self.attached else {
            let inside = disp.checked_add(len as u64).is_some_and(|end| end <= self.mem.len() as u64);
            return inside.then(|| (self.mem.region(), disp));
        };
        list.iter().find_map(|m| {
            let off = disp.checked_sub(m.base() as u64)?;
            (off.checked_add(len as u64)? <= m.len() as u64).then(|| (m.region(), off))
        })
    }

    /// How this process reaches `[disp, disp + len)` of window rank `target`.
    fn reach(&self, target: u32, disp: u64, len: usize) -> Reach {
        if target == self.me {
            return self.local(disp, len).map_or(Reach::Outside, |(r, o)| Reach::Direct(r, o));
        }
        Reach::Records
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
        let me = group.iter().position(|&r| r == self.st.me).ok_or(Error::ApiMisuse("not a member of the window"))?;
        let win = Win {
            mem,
            group,
            lock: WinLock::default(),
            posts: vec![0; n],
            completes: vec![0; n],
            me: me as u32,
            node: None,
            cma: vec![None; n],
            unflushed: vec![false; n],
            attached: None,
        };
        w.insert(ctx.0, win);
        Ok(())
    }

    /// Gives the window of `ctx` direct access to the members `node` reaches (their
    /// memory in this node's segment): operations on them are applied here from now on.
    /// Call it at every member before the agreement that ends window creation.
    pub fn win_share(&mut self, ctx: ContextId, node: Arc<DirectWin>) -> Result<(), Error> {
        let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        w.node = Some(node);
        Ok(())
    }

    /// Gives the window of `ctx` single-copy access (CMA) to members' memory on this
    /// node: `bases[r]` is window rank `r`'s address and bytes, as it published them.
    /// Puts and gets to those members are copies between the two processes from then on
    /// (accumulates still travel as records: the target applies them atomically). A
    /// member whose process this one may not reach (another node, CMA off) is skipped.
    pub fn win_reach_by_cma(&mut self, ctx: ContextId, bases: &[(u64, usize)]) -> Result<(), Error> {
        let pids: Vec<Option<i32>> = {
            let w = self.st.rma.wins.get(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
            w.group.iter().map(|&p| if p == self.st.me { None } else { self.transport.cma_pid(p) }).collect()
        };
        let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        for ((slot, pid), &(addr, len)) in w.cma.iter_mut().zip(pids).zip(bases) {
            *slot = pid.map(|pid| (pid, addr, len));
        }
        Ok(())
    }

    /// Makes the window of `ctx` dynamic (`MPI_Win_create_dynamic`): its memory is what
    /// [`Engine::win_attach`] attaches, addressed by absolute address.
    pub fn win_make_dynamic(&mut self, ctx: ContextId) -> Result<(), Error> {
        let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        w.attached.get_or_insert_with(Vec::new);
        Ok(())
    }

    /// Attaches `mem` to the dynamic window of `ctx` (`MPI_Win_attach`): operations
    /// whose address lies in it reach it until it is detached. Attached memory may not
    /// overlap memory attached before.
    pub fn win_attach(&mut self, ctx: ContextId, mem: WinMemory) -> Result<(), Error> {
        let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        let list = w.attached.as_mut().ok_or(Error::ApiMisuse("attach to a window that is not dynamic"))?;
        let (a, n) = (mem.base() as u64, mem.len() as u64);
        let overlaps = |m: &WinMemory| a < m.base() as u64 + m.len() as u64 && (m.base() as u64) < a + n.max(1);
        if list.iter().any(overlaps) {
            return Err(Error::InvalidArg("attached memory overlaps memory attached before"));
        }
        list.push(mem);
        Ok(())
    }

    /// Detaches the memory attached at `base` from the dynamic window of `ctx`
    /// (`MPI_Win_detach`) and hands it back.
    pub fn win_detach(&mut self, ctx: ContextId, base: *const u8) -> Result<WinMemory, Error> {
        let w = self.st.rma.wins.get_mut(&ctx.0).ok_or(Error::ApiMisuse("no window on this communicator"))?;
        let list = w.attached.as_mut().ok_or(Error::ApiMisuse("detach from a window that is not dynamic"))?;
        let i = list
            .iter()
            .position(|m| std::ptr::eq(m.base(), base))
            .ok_or(Error::InvalidArg("no memory attached there"))?;
        Ok(list.swap_remove(i))
    }

    /// Whether `peer`'s records travel through this node's shared memory (a window
    /// member there can be reached directly).
    pub fn shares_node_with(&self, peer: Rank) -> bool {
        self.transport.shares_memory_with(peer)
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
        if let Some(done) = self.st.rma_node(ctx).and_then(|d| d.put(target, disp, data)) {
            return done;
        }
        match self.st.rma_reach(ctx, target, disp, data.len()) {
            Reach::Direct(r, off) if r.write(off, data) => return Ok(()),
            Reach::Records => {}
            _ => return Err(Error::InvalidArg("put outside the target's window")),
        }
        if let Some(done) = self.st.rma_cma(ctx, target, disp, data.len(), |pid, at| cma::write(pid, at, data)) {
            return done;
        }
        self.st.rma_unflushed(ctx, target);
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
        if let Some(done) = self.st.rma_node(ctx).and_then(|d| d.accumulate(target, disp, op, elem, data, None)) {
            return done;
        }
        match self.st.rma_reach(ctx, target, disp, data.len()) {
            Reach::Direct(r, off) => {
                let me = target;
                let apply = || r.accumulate(off, op, elem, data, None);
                let out = match self.st.rma_node(ctx).filter(|d| d.locks_accumulates()) {
                    // Every member accumulates into this memory under its lock.
                    Some(d) => d.acc_locked(me, apply),
                    None => apply(),
                };
                return out.map_err(direct_error);
            }
            Reach::Records => {}
            Reach::Outside => return Err(direct_error(DirectError::Outside)),
        }
        self.st.rma_unflushed(ctx, target);
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
        if let Some(d) = self.st.rma_node(ctx).filter(|d| d.reaches(target)) {
            buf = self.rma_take_buf(req);
            let out = d.get(target, disp, buf.as_mut_slice()).unwrap_or(Err(Error::Unsupported("direct get")));
            self.st.set_outcome(req, out.map(|()| Status { source: target as usize, tag: 0, len }));
            return req;
        }
        if let Some(at) = self.st.rma_reach(ctx, target, disp, len).direct() {
            buf = self.rma_take_buf(req);
            let out = match at.is_some_and(|(r, off)| r.read(off, buf.as_mut_slice())) {
                true => Ok(Status { source: target as usize, tag: 0, len }),
                false => Err(Error::InvalidArg("get outside the target's window")),
            };
            self.st.set_outcome(req, out);
            return req;
        }
        if self.st.rma_by_cma(ctx, target) {
            buf = self.rma_take_buf(req);
            match self.st.rma_cma(ctx, target, disp, len, |pid, at| cma::read(pid, at, buf.as_mut_slice())) {
                Some(out) => {
                    self.st.set_outcome(req, out.map(|()| Status { source: target as usize, tag: 0, len }));
                    return req;
                }
                // CMA refused: the get travels as a record after all.
                None => self.rma_restore_buf(req, buf),
            }
        }
        self.st.rma_unflushed(ctx, target);
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
        if len == 0 {
            // Nothing to read or combine: complete (no record would answer it).
            self.st.set_outcome(req, Ok(Status { source: target as usize, tag: 0, len: 0 }));
            return req;
        }
        let direct = |d: &Arc<DirectWin>| d.reaches(target) && (elem.is_native() || d.locks_accumulates());
        if let Some(d) = self.st.rma_node(ctx).filter(direct) {
            let mut buf = self.rma_take_buf(req);
            let out = d.accumulate(target, disp, op, elem, origin, Some(buf.as_mut_slice()));
            let out = out.unwrap_or(Err(Error::Unsupported("direct get-accumulate")));
            self.st.set_outcome(req, out.map(|()| Status { source: target as usize, tag: 0, len }));
            return req;
        }
        if let Some(at) = self.st.rma_reach(ctx, target, disp, len).direct() {
            let mut buf = self.rma_take_buf(req);
            let out = at.ok_or(DirectError::Outside).and_then(|(r, off)| {
                let mut apply = || r.accumulate(off, op, elem, origin, Some(buf.as_mut_slice()));
                match self.st.rma_node(ctx).filter(|d| d.locks_accumulates()) {
                    Some(d) => d.acc_locked(target, apply),
                    None => apply(),
                }
            });
            self.st
                .set_outcome(req, out.map(|()| Status { source: target as usize, tag: 0, len }).map_err(direct_error));
            return req;
        }
        self.st.rma_unflushed(ctx, target);
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
        if let Some(d) = self.st.rma_node(ctx).filter(|d| d.reaches(target)) {
            let mut buf = self.rma_take_buf(req);
            let out = d.compare_and_swap(target, disp, elem, compare, new, buf.as_mut_slice());
            let out = out.unwrap_or(Err(Error::Unsupported("direct compare-and-swap")));
            self.st.set_outcome(req, out.map(|()| Status { source: target as usize, tag: 0, len: n }));
            return req;
        }
        if let Some(at) = self.st.rma_reach(ctx, target, disp, n).direct() {
            let mut buf = self.rma_take_buf(req);
            let out = at.ok_or(DirectError::Outside).and_then(|(r, off)| {
                let mut apply = || r.compare_and_swap(off, elem, compare, new, buf.as_mut_slice());
                match self.st.rma_node(ctx).filter(|d| d.locks_accumulates()) {
                    Some(d) => d.acc_locked(target, apply),
                    None => apply(),
                }
            });
            self.st.set_outcome(
                req,
                out.map(|()| Status { source: target as usize, tag: 0, len: n }).map_err(direct_error),
            );
            return req;
        }
        self.st.rma_unflushed(ctx, target);
        let mut both = [0u8; 16];
        both[..n].copy_from_slice(compare);
        both[n..2 * n].copy_from_slice(new);
        self.rma_send(peer, &RmaMsg::Cas { win: ctx.0, token: req.to_wire(), disp, elem, data: &both[..2 * n] });
        req
    }

    /// Starts a flush to `target`: completes once the target applied every operation
    /// this process issued to it before.
    pub fn rma_flush(&mut self, ctx: ContextId, target: u32) -> ReqId {
        let node = self.st.rma_node(ctx).is_some_and(|d| d.reaches(target));
        if node || self.st.rma_reach(ctx, target, 0, 0).direct().is_some() || !self.st.rma_take_unflushed(ctx, target) {
            // Applied at the call: a fence orders them before what this process does next.
            let (req, _) = match self.rma_start(ctx, target, RawBufMut::empty()) {
                Ok(x) => x,
                Err(id) => return id,
            };
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            self.st.set_outcome(req, Ok(Status { source: target as usize, tag: 0, len: 0 }));
            return req;
        }
        self.rma_control(ctx, target, |win, token| RmaMsg::Flush { win, token }, |_, _, _| Some(Ok(())))
    }

    /// A request already complete on `target` (the request form of an operation that
    /// completed at its call: `MPI_Rput`, `MPI_Raccumulate`); errs as the operation
    /// would on an unknown window, a bad rank or a failed target.
    pub fn rma_done(&mut self, ctx: ContextId, target: u32) -> ReqId {
        match self.rma_start(ctx, target, RawBufMut::empty()) {
            Ok((req, _)) => {
                self.st.set_outcome(req, Ok(Status { source: target as usize, tag: 0, len: 0 }));
                req
            }
            Err(id) => id,
        }
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
        self.st.rma_take_unflushed(ctx, target);
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

    /// Gives request `req` its buffer back (after [`Engine::rma_take_buf`]).
    fn rma_restore_buf(&mut self, req: ReqId, view: RawBufMut) {
        if let Some(Request { kind: Kind::Rma { buf, .. }, .. }) = self.st.reqs.get_mut(req) {
            *buf = view;
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

impl Reach {
    /// `None` for records; else the region and offset, `Some(None)` when outside.
    fn direct(self) -> Option<Option<(Region, u64)>> {
        match self {
            Reach::Direct(r, o) => Some(Some((r, o))),
            Reach::Outside => Some(None),
            Reach::Records => None,
        }
    }
}

/// The error of a direct operation the origin's checks let through.
fn direct_error(e: DirectError) -> Error {
    match e {
        DirectError::Outside => Error::InvalidArg("operation outside the target's window"),
        DirectError::Acc(_) => Error::InvalidArg("accumulate of a bad type or length"),
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

    /// The members of window `ctx` this process reaches directly, if any.
    fn rma_node(&self, ctx: ContextId) -> Option<Arc<DirectWin>> {
        self.rma.wins.get(&ctx.0)?.node.clone()
    }

    /// Runs `op` (a CMA copy) on `target`'s memory at `disp` for `len` bytes, if this
    /// process reaches `target` by CMA: `None` if not (records, or CMA refused by the
    /// kernel, which turns CMA off for the window), else the outcome (a target whose
    /// process is gone: `RankFailStop`).
    fn rma_cma(
        &mut self,
        ctx: ContextId,
        target: u32,
        disp: u64,
        len: usize,
        op: impl FnOnce(i32, u64) -> Result<(), runthrough_shm::Error>,
    ) -> Option<Result<(), Error>> {
        let w = self.rma.wins.get_mut(&ctx.0)?;
        let (pid, base, size) = (*w.cma.get(target as usize)?)?;
        if disp.checked_add(len as u64).is_none_or(|end| end > size as u64) {
            return Some(Err(Error::InvalidArg("operation outside the target's window")));
        }
        match op(pid, base + disp) {
            Ok(()) => {
                self.stats.rma_copied += 1;
                Some(Ok(()))
            }
            Err(runthrough_shm::Error::CmaDenied) => {
                tracing::debug!(target, "CMA refused: one-sided copies to this window travel as records");
                w.cma.iter_mut().for_each(|c| *c = None);
                None
            }
            Err(runthrough_shm::Error::PeerGone { .. }) => Some(Err(Error::RankFailStop { rank: target })),
            Err(_) => Some(Err(Error::InvalidArg("the target's window memory is not mapped"))),
        }
    }

    /// Whether this process reaches `target`'s memory by CMA.
    fn rma_by_cma(&self, ctx: ContextId, target: u32) -> bool {
        self.rma.wins.get(&ctx.0).and_then(|w| w.cma.get(target as usize)).is_some_and(Option::is_some)
    }

    /// Notes that records of this process to `target` await the next flush.
    fn rma_unflushed(&mut self, ctx: ContextId, target: u32) {
        if let Some(u) = self.rma.wins.get_mut(&ctx.0).and_then(|w| w.unflushed.get_mut(target as usize)) {
            *u = true;
        }
    }

    /// Whether records of this process to `target` await a flush (a round trip); clears
    /// the mark. Members not reached by CMA always answer `true`: only CMA and direct
    /// members complete operations at the call.
    fn rma_take_unflushed(&mut self, ctx: ContextId, target: u32) -> bool {
        let Some(w) = self.rma.wins.get_mut(&ctx.0) else { return true };
        let was = w.unflushed.get_mut(target as usize).is_none_or(std::mem::take);
        was || w.cma.get(target as usize).is_none_or(Option::is_none)
    }

    /// How this process reaches `[disp, disp + len)` of window rank `target`: directly
    /// (its own memory, or a same-node member's mapping: `win_share`) or by records.
    fn rma_reach(&self, ctx: ContextId, target: u32, disp: u64, len: usize) -> Reach {
        self.rma.wins.get(&ctx.0).map_or(Reach::Records, |w| w.reach(target, disp, len))
    }
}
