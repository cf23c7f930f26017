//! In-flight operation table: context tokens are slab indices that remember the peer.
//!
//! libfabric 1.x error entries do not say which peer an operation addressed. [`OpSlab`]
//! hands out the [`OpContext`] for each posted operation and maps completions back to
//! `(peer, payload)`, filling [`CqError::peer`](crate::CqError) — so every error entry is
//! attributed — and lets the owner fail every operation of a dead peer at once
//! ([`OpSlab::drain_peer`]). Contexts are never 0 (NULL), since some providers treat a NULL
//! context specially.

use std::fmt;

use crate::addr::FiAddr;
use crate::cq::{CqEvent, OpContext};

/// A slab of in-flight operations, each remembered with its peer and a payload `T`.
pub struct OpSlab<T> {
    slots: Vec<Option<(FiAddr, T)>>,
    free: Vec<usize>,
    live: usize,
}

impl<T> fmt::Debug for OpSlab<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpSlab").field("live", &self.live).field("capacity", &self.slots.len()).finish()
    }
}

impl<T> Default for OpSlab<T> {
    fn default() -> Self {
        OpSlab { slots: Vec::new(), free: Vec::new(), live: 0 }
    }
}

impl<T> OpSlab<T> {
    /// An empty slab.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remember an operation addressed to `peer`; pass the returned context to the post.
    pub fn insert(&mut self, peer: FiAddr, payload: T) -> OpContext {
        let idx = match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some((peer, payload));
                i
            }
            None => {
                self.slots.push(Some((peer, payload)));
                self.slots.len() - 1
            }
        };
        self.live += 1;
        OpContext(idx + 1)
    }

    /// Forget an operation whose post failed (so no completion will come).
    pub fn cancel(&mut self, ctx: OpContext) -> Option<(FiAddr, T)> {
        self.take(ctx)
    }

    /// Match a completion event to its operation, attribute the peer to error entries,
    /// and release the slot.
    pub fn complete(&mut self, ev: &mut CqEvent) -> Option<(FiAddr, T)> {
        let rec = self.take(ev.context())?;
        if let CqEvent::Failed(e) = ev {
            e.peer = Some(rec.0);
        }
        Some(rec)
    }

    /// Remove and return every operation addressed to `peer` (to fail them when it dies).
    pub fn drain_peer(&mut self, peer: FiAddr) -> Vec<(OpContext, T)> {
        let mut out = Vec::new();
        for i in 0..self.slots.len() {
            if matches!(self.slots[i], Some((p, _)) if p == peer) {
                if let Some((_, t)) = self.take(OpContext(i + 1)) {
                    out.push((OpContext(i + 1), t));
                }
            }
        }
        out
    }

    /// Number of operations outstanding to `peer`.
    pub fn outstanding(&self, peer: FiAddr) -> usize {
        self.slots.iter().filter(|s| matches!(s, Some((p, _)) if *p == peer)).count()
    }

    /// Total operations in flight.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    fn take(&mut self, ctx: OpContext) -> Option<(FiAddr, T)> {
        let idx = ctx.0.checked_sub(1)?;
        let rec = self.slots.get_mut(idx)?.take()?;
        self.free.push(idx);
        self.live -= 1;
        Some(rec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cq::{CompFlags, CqError};
    use crate::error::ErrorCode;

    #[test]
    fn error_entries_get_their_peer() {
        let mut s = OpSlab::new();
        let a = s.insert(FiAddr(1), "send");
        let b = s.insert(FiAddr(2), "recv");
        assert_ne!(a.0, 0);
        let mut ev = CqEvent::Failed(CqError {
            context: b,
            flags: CompFlags::default(),
            err: ErrorCode::ECONNRESET,
            prov_errno: 0,
            prov_message: String::new(),
            len: 0,
            olen: 0,
            tag: 0,
            peer: None,
        });
        assert_eq!(s.complete(&mut ev), Some((FiAddr(2), "recv")));
        let CqEvent::Failed(e) = &ev else { unreachable!() };
        assert_eq!(e.peer, Some(FiAddr(2)));
        // Unknown / already completed contexts are ignored.
        assert_eq!(s.complete(&mut ev), None);
        assert_eq!(s.len(), 1);
        let c = s.insert(FiAddr(1), "rma");
        assert_eq!(c, b, "slots are reused");
        assert_eq!(s.outstanding(FiAddr(1)), 2);
        let drained = s.drain_peer(FiAddr(1));
        assert_eq!(drained.len(), 2);
        assert!(drained.contains(&(a, "send")));
        assert!(s.is_empty());
        assert_eq!(s.cancel(OpContext(0)), None);
    }
}
