//! Requests and the slab that owns them.
//!
//! A request is created by `isend`/`irecv`, may be completed by its protocol, by a
//! failure (`Engine::fail_peer`) or by a revoked context (`Engine::fail_context`), and is
//! freed when its outcome is taken. Ids carry a generation so a stale id from the wire
//! or a dropped handle never names a reused slot.

use std::fmt;
use std::task::Waker;

use crate::buf::{RawBuf, RawBufMut};
use crate::error::Error;
use crate::types::{Rank, ReqId};

/// What a completed receive (or send) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// Source rank in the communicator (for a send: the destination).
    pub source: usize,
    /// Tag of the message.
    pub tag: i32,
    /// Message length in bytes.
    pub len: usize,
}

/// Where a send is in its protocol (named after what it waits for).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SendPhase {
    /// Parked on the peer's pending queue (transport was busy).
    AwaitingTransport,
    /// Rendezvous: the RTS is out; waiting for FIN (pulled) or CTS (stream it).
    AwaitingFinOrCts,
    /// Streaming the data after a CTS.
    Streaming,
}

impl fmt::Display for SendPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Where a receive is in its protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
// Protocol states are named after what they wait for (house style), hence the prefix.
#[allow(clippy::enum_variant_names)]
pub(crate) enum RecvPhase {
    /// On the posted queue, waiting for a matching message.
    AwaitingMatch,
    /// Matched a rendezvous and started an RMA read; waiting for `ReadDone`.
    AwaitingRead {
        /// Sender (world rank).
        peer: Rank,
        /// Reads of the message's chunks still in flight.
        left: u32,
        /// The sender's request, to be finished with FIN.
        sreq: ReqId,
        /// Message length.
        total: u64,
        /// Source rank in the communicator.
        src: u32,
        /// Tag of the message.
        tag: i32,
    },
    /// Matched a streamed rendezvous; waiting for its data fragments.
    AwaitingData {
        /// Sender (world rank).
        peer: Rank,
        /// Bytes received so far.
        received: u64,
        /// Message length.
        total: u64,
        /// Envelope of the message, for the status.
        src: u32,
        /// Tag of the message.
        tag: i32,
        /// Its completion is a sample of `Config::cma_choose`'s measurement.
        timed: bool,
    },
}

#[derive(Debug)]
pub(crate) enum Kind {
    Send {
        peer: Rank,
        /// Destination rank in the communicator.
        dest: u32,
        tag: i32,
        buf: RawBuf,
        phase: SendPhase,
        /// The buffer's exposure to the peer (rendezvous), withdrawn at completion.
        region: Option<crate::types::RemoteRegion>,
    },
    Recv {
        /// Specific source's world rank, `None` for ANY_SOURCE.
        peer: Option<Rank>,
        buf: RawBufMut,
        phase: RecvPhase,
    },
    /// A one-sided operation waiting for its target's answer (a get's bytes, a flush,
    /// a lock): `buf` receives the bytes, `got` counts them.
    Rma {
        /// The target's world rank.
        peer: Rank,
        /// The target's window rank.
        rank: u32,
        buf: RawBufMut,
        got: u64,
    },
}

#[derive(Debug)]
pub(crate) struct Request {
    pub(crate) kind: Kind,
    pub(crate) outcome: Option<Result<Status, Error>>,
    /// The context the request is on (a revoked communicator fails its requests).
    pub(crate) ctx: crate::types::ContextId,
}

#[derive(Debug)]
struct Slot {
    gen: u32,
    /// The request scope that owns the request (`0`: none, an engine-internal request
    /// that its own code always settles).
    scope: u32,
    /// The waker of a future pending on the request (`None` unless one is polled: the
    /// blocking paths never touch it).
    waker: Option<Waker>,
    req: Option<Request>,
}

/// The request slab: allocation-free once warm.
#[derive(Debug, Default)]
pub(crate) struct Slab {
    slots: Vec<Slot>,
    free: Vec<u32>,
    /// Requests with a registered waker (empty, never allocated, unless futures are
    /// polled); [`Slab::take_wakers`] scans only these.
    waiting: Vec<ReqId>,
    /// Live requests owned by a request scope (so a scope's end looks for its own only
    /// when some exist).
    scoped: usize,
}

impl Slab {
    pub(crate) fn insert(&mut self, req: Request) -> ReqId {
        if let Some(index) = self.free.pop() {
            let s = &mut self.slots[index as usize];
            s.req = Some(req);
            s.scope = 0;
            ReqId { index, gen: s.gen }
        } else {
            let index = self.slots.len() as u32;
            self.slots.push(Slot { gen: 0, scope: 0, waker: None, req: Some(req) });
            ReqId { index, gen: 0 }
        }
    }

    pub(crate) fn get(&self, id: ReqId) -> Option<&Request> {
        let s = self.slots.get(id.index as usize)?;
        if s.gen != id.gen {
            return None;
        }
        s.req.as_ref()
    }

    pub(crate) fn get_mut(&mut self, id: ReqId) -> Option<&mut Request> {
        let s = self.slots.get_mut(id.index as usize)?;
        if s.gen != id.gen {
            return None;
        }
        s.req.as_mut()
    }

    pub(crate) fn remove(&mut self, id: ReqId) -> Option<Request> {
        let s = self.slots.get_mut(id.index as usize)?;
        if s.gen != id.gen || s.req.is_none() {
            return None;
        }
        s.gen = s.gen.wrapping_add(1);
        if s.scope != 0 {
            s.scope = 0;
            self.scoped -= 1;
        }
        if s.waker.is_some() {
            s.waker = None;
        }
        self.free.push(id.index);
        s.req.take()
    }

    /// Registers `waker` to be woken once `id` has an outcome (see `take_wakers`). A
    /// waker already registered is kept if it wakes the same task, else replaced.
    pub(crate) fn register_waker(&mut self, id: ReqId, waker: &Waker) {
        let Some(s) = self.slots.get_mut(id.index as usize).filter(|s| s.gen == id.gen && s.req.is_some()) else {
            return;
        };
        match &mut s.waker {
            Some(w) if w.will_wake(waker) => {}
            Some(w) => w.clone_from(waker),
            w @ None => {
                *w = Some(waker.clone());
                self.waiting.push(id);
            }
        }
    }

    /// Moves into `out` the wakers of requests that have an outcome now (or were freed),
    /// for the caller to wake once it released the engine lock. O(registered wakers):
    /// nothing when no future is pending.
    /// Whether some future waits on a request (a waker registered and not yet taken).
    pub(crate) fn has_wakers(&self) -> bool {
        !self.waiting.is_empty()
    }

    pub(crate) fn take_wakers(&mut self, out: &mut Vec<Waker>) {
        if self.waiting.is_empty() {
            return;
        }
        let slots = &mut self.slots;
        self.waiting.retain(|id| {
            let Some(s) = slots.get_mut(id.index as usize) else { return false };
            if s.gen != id.gen {
                // Freed: its waker went with it.
                return false;
            }
            match &s.req {
                Some(r) if r.outcome.is_none() => s.waker.is_some(),
                _ => {
                    out.extend(s.waker.take());
                    false
                }
            }
        });
    }

    /// Marks `id` as owned by request scope `scope` (see `handle::RequestScope`).
    pub(crate) fn set_scope(&mut self, id: ReqId, scope: u32) {
        if let Some(s) = self.slots.get_mut(id.index as usize).filter(|s| s.gen == id.gen && s.req.is_some()) {
            match (s.scope, scope) {
                (0, 0) => {}
                (0, _) => self.scoped += 1,
                (_, 0) => self.scoped -= 1,
                _ => {}
            }
            s.scope = scope;
        }
    }

    /// Whether any live request is owned by a request scope.
    pub(crate) fn has_scoped(&self) -> bool {
        self.scoped > 0
    }

    /// The number of slots (live or free), for [`Slab::scoped_at`].
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// The live request in slot `index` if request scope `scope` owns it (slow path: a
    /// scope ending with requests whose handles were leaked).
    pub(crate) fn scoped_at(&self, index: usize, scope: u32) -> Option<ReqId> {
        let s = self.slots.get(index)?;
        (s.req.is_some() && s.scope == scope).then_some(ReqId { index: index as u32, gen: s.gen })
    }

    /// Ids of every live request (slow path: failures, revocation).
    pub(crate) fn ids(&self) -> Vec<ReqId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.req.is_some())
            .map(|(i, s)| ReqId { index: i as u32, gen: s.gen })
            .collect()
    }

    pub(crate) fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> Request {
        Request {
            kind: Kind::Send {
                peer: Rank(0),
                dest: 0,
                tag: 0,
                buf: RawBuf::empty(),
                phase: SendPhase::AwaitingTransport,
                region: None,
            },
            outcome: None,
            ctx: crate::types::ContextId(0),
        }
    }

    #[test]
    fn stale_ids_never_name_a_reused_slot() {
        let mut s = Slab::default();
        let a = s.insert(req());
        assert!(s.remove(a).is_some());
        let b = s.insert(req());
        assert_eq!(a.index, b.index);
        assert!(s.get(a).is_none());
        assert!(s.remove(a).is_none());
        assert!(s.get(b).is_some());
        assert_eq!(s.live(), 1);
        assert_eq!(s.ids(), vec![b]);
    }
}
