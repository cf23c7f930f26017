//! Error propagation (R27): `signal_error` spreads a signal to every member of a
//! communicator over its overlay (R42: ⌈log2 n⌉ fingers a member, handed to a new ring
//! successor when one fails, like a revoke), and every member enters the error
//! resolution — a cut of the communicator's traffic (`Mark` notices), then an agreement
//! on the list of signals — after which the operations parked behind it complete with
//! the agreed list.

use runthrough_ft::SignalId;

use super::{Engine, Outgoing, RESOLUTION_SERIES};
use crate::error::Error;
use crate::matching::Pattern;
use crate::note::Note;
use crate::types::{ContextId, Rank};

impl Engine {
    /// Signals `code` on the communicator of `ctx` (R27, Engwer et al.'s `signal_error`): the
    /// signal travels the communicator's overlay to every member (each forwards it on
    /// first receipt) and every member enters the error resolution: an agreement on the
    /// list of signals, behind a cut of the communicator's traffic. Returns the signal's id; poll
    /// [`Engine::signal_resolved`] with [`Engine::progress`].
    pub fn signal_error(&mut self, ctx: ContextId, code: i32) -> Result<SignalId, Error> {
        let me = self.st.me.0;
        let c = self.st.comms.get_mut(ctx).ok_or(Error::ApiMisuse("signal_error on an unknown communicator"))?;
        if let Some(b) = c.broken {
            return Err(b.error());
        }
        // Unique for 2^32 signals of each member on each communicator, in a job of any size.
        let id = (u64::from(c.prop.serial) << 32) | u64::from(me);
        c.prop.serial = c.prop.serial.wrapping_add(1);
        self.learn_signal(ctx, id, code);
        Ok(id)
    }

    /// Once the signal `id` of [`Engine::signal_error`] is resolved: the list the caller
    /// gets (communicator ranks and codes; it is also the delivery of the exception to
    /// the caller, so nothing stays armed for its next operation).
    pub fn signal_resolved(&mut self, ctx: ContextId, id: SignalId) -> Option<Vec<(u32, i32)>> {
        let c = self.st.comms.get_mut(ctx)?;
        if !c.prop.resolved.contains(&id) {
            return None;
        }
        Some(c.prop.armed.take().unwrap_or_else(|| c.prop.last.clone()))
    }

    /// Whether an error resolution runs on the communicator of `ctx` (R27): its
    /// operations are parked until it completes, then fail with `Propagated`.
    pub fn is_resolving(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_some_and(|c| c.prop.running.is_some())
    }

    /// The propagated list the next operation on the communicator of `ctx` fails with,
    /// taken (R27: each member gets the exception once, at its pending or next wait).
    pub fn take_armed(&mut self, ctx: ContextId) -> Option<Vec<(u32, i32)>> {
        self.st.take_armed(ctx)
    }

    /// Whether an error resolution overtook a shared-memory collective begun on the
    /// communicator of `ctx` in its collective epoch `epoch` (R27): one runs, or one
    /// completed since (it started a new epoch). Such a collective must fail with the
    /// resolution's list ([`Engine::overtaken_error`]), never complete by matching
    /// members' collectives begun after it.
    pub fn resolution_overtook(&self, ctx: ContextId, epoch: u32) -> bool {
        self.st.comms.get(ctx).is_some_and(|c| c.prop.running.is_some() || c.epoch != epoch)
    }

    /// The error of a collective [`Engine::resolution_overtook`], once no resolution runs:
    /// the undelivered list (taken: this is the member's pending wait), else the last
    /// delivered one. `None` while a resolution runs.
    pub fn overtaken_error(&mut self, ctx: ContextId) -> Option<Error> {
        if self.is_resolving(ctx) {
            return None;
        }
        let list = self.take_armed(ctx).or_else(|| self.last_propagated(ctx));
        Some(list.map_or(Error::ApiMisuse("a collective overlapped a validate of its communicator"), Error::Propagated))
    }

    /// The last propagated list delivered on the communicator of `ctx`.
    pub fn last_propagated(&self, ctx: ContextId) -> Option<Vec<(u32, i32)>> {
        self.st.comms.get(ctx).map(|c| c.prop.last.clone()).filter(|l| !l.is_empty())
    }

    /// A signal read or made here: a new one is forwarded along the communicator's
    /// overlay (the fingers of [`runthrough_ft::notice`], as a revoke) and starts (or
    /// joins) a resolution. It stays known here until a resolution decides it, and no
    /// resolution can decide without every live member, each of which enters only once it
    /// knows a signal: so while a live member lacks it, every holder still holds it, and
    /// the ring-successor handover ([`Engine::pass_notes_past`]) carries it past
    /// forwarders that died.
    pub(super) fn learn_signal(&mut self, ctx: ContextId, id: SignalId, code: i32) {
        let me = self.st.me;
        let key = ctx.p2p();
        let Some(c) = self.st.comms.get_mut(key) else { return };
        if c.broken.is_some() || c.prop.resolved.contains(&id) || c.prop.known.iter().any(|k| k.0 == id) {
            return;
        }
        c.prop.known.push((id, code));
        self.st.cs.propagating = true;
        self.st.cs.comm_notices = true;
        let group = c.group.clone();
        if let Some(at) = group.iter().position(|r| *r == me) {
            for x in self.st.notice_targets(&group, at) {
                let note = Note::Signal { ctx: key.0, id, code };
                self.st.post_or_queue(&mut self.transport, group[x], Outgoing::Note(note));
            }
        }
        self.enter_resolution(key);
    }

    /// Enters resolution `epoch + 1` of the communicator of `ctx` if signals wait and
    /// none runs: the mark (behind everything sent on it so far) goes to every member,
    /// the receives posted on it are parked, collectives stop, and the agreement on the
    /// signals starts.
    pub(super) fn enter_resolution(&mut self, ctx: ContextId) {
        let me = self.st.me;
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        if c.prop.running.is_some() || c.prop.known.is_empty() || c.broken.is_some() {
            return;
        }
        let epoch = c.prop.epoch + 1;
        let signals: Vec<(SignalId, i32)> = c.prop.known.clone();
        let group = c.group.clone();
        self.st.stop_shm_collectives(ctx);
        let coll = ctx.coll();
        let on_comm = |x: ContextId| x == ctx || x == coll;
        while let Some((_, id)) = self.st.recv.posted.remove_where(|pat, _| on_comm(pat.ctx)) {
            if let Some(c) = self.st.comms.get_mut(ctx) {
                c.prop.parked.push(id);
            }
        }
        for &peer in group.iter() {
            if peer != me && !self.st.peers[peer.0 as usize].failed {
                self.st.post_or_queue(&mut self.transport, peer, Outgoing::Note(Note::Mark { ctx: ctx.0, epoch }));
            }
        }
        let seq = RESOLUTION_SERIES | (epoch & !RESOLUTION_SERIES);
        let input = runthrough_ft::Input { flag: u32::MAX, max: 0, signals };
        match self.agree_start_input(ctx, &group, seq, input) {
            Ok(inst) => {
                if let Some(c) = self.st.comms.get_mut(ctx) {
                    c.prop.running = Some(inst);
                }
            }
            Err(e) => tracing::warn!(error = %e, "error resolution could not start"),
        }
    }

    /// `from` entered resolution `epoch` of the communicator of `ctx`: what it sent there
    /// before and this process did not match yet is dropped (a rendezvous is answered
    /// with `Discard`), and the mark counts towards completing the resolution.
    pub(super) fn mark_from(&mut self, ctx: ContextId, from: Rank, epoch: u32) {
        let key = ctx.p2p();
        let Some(c) = self.st.comms.get_mut(key) else { return };
        let Some(local) = c.local_rank(from) else { return };
        let m = &mut c.prop.marks[local as usize];
        *m = (*m).max(epoch);
        self.st.cs.propagating = true;
        for x in [key, key.coll()] {
            while let Some((_, e)) =
                self.st.recv.unexpected.take_match(&Pattern { ctx: x, src: Some(local), tag: None })
            {
                self.st.drop_unexpected(e);
            }
        }
    }

    /// Completes the resolutions whose agreement decided and whose marks all arrived.
    pub(super) fn resolutions_service(&mut self) {
        let mut any = false;
        let ctxs: Vec<ContextId> =
            self.st.comms.keys().filter(|&k| self.st.comms.get(k).is_some_and(|c| c.prop.running.is_some())).collect();
        for ctx in ctxs {
            any = true;
            let Some(c) = self.st.comms.get(ctx) else { continue };
            let Some(inst) = c.prop.running else { continue };
            if c.prop.decided.is_none() {
                let Some(d) = self.agree_decision(inst) else { continue };
                if let Some(c) = self.st.comms.get_mut(ctx) {
                    c.prop.decided = Some(d.signals);
                }
            }
            let c = self.st.comms.get(ctx).expect("present");
            let epoch = c.prop.epoch + 1;
            let me = self.st.me;
            let all_marks = c
                .group
                .iter()
                .enumerate()
                .all(|(i, r)| *r == me || self.st.peers[r.0 as usize].failed || c.prop.marks[i] >= epoch);
            if all_marks {
                self.complete_resolution(ctx);
            }
        }
        if !any {
            self.st.cs.propagating =
                self.st.comms.keys().any(|k| self.st.comms.get(k).is_some_and(|c| !c.prop.known.is_empty()));
        }
    }

    /// Delivers a completed resolution: every parked request fails with the list (or,
    /// with none, the next operation will), collectives start a new epoch, and the next
    /// resolution starts if signals arrived meanwhile.
    pub(super) fn complete_resolution(&mut self, ctx: ContextId) {
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        let decided = c.prop.decided.take().unwrap_or_default();
        c.prop.running = None;
        c.prop.epoch += 1;
        c.prop.resolved.extend(decided.iter().map(|s| s.0));
        let resolved = &c.prop.resolved;
        c.prop.known.retain(|k| !resolved.contains(&k.0));
        let mut list: Vec<(u32, i32)> =
            decided.iter().filter_map(|&(id, code)| c.local_rank(Rank(id as u32)).map(|l| (l, code))).collect();
        list.sort_unstable();
        let parked = std::mem::take(&mut c.prop.parked);
        let armed = parked.is_empty();
        if armed {
            // Undelivered lists accumulate: the next operation gets all of them at once.
            let armed = c.prop.armed.get_or_insert_with(Vec::new);
            armed.extend_from_slice(&list);
            armed.sort_unstable();
            armed.dedup();
        }
        c.prop.last = list.clone();
        tracing::debug!(ctx = ctx.0, ?list, parked = parked.len(), "error resolution complete");
        for id in parked {
            self.st.set_outcome(id, Err(Error::Propagated(list.clone())));
        }
        // Collectives begun before never match ones begun after (like a validate).
        let recognized = self.recognized(ctx);
        self.validate_commit(ctx, &recognized);
        if armed {
            // The next collective takes the locked path, which delivers the list.
            self.st.hold_shm_fast_path(ctx);
        }
        self.enter_resolution(ctx);
    }
}
