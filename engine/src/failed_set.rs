//! The peers known failed, shared without the engine lock: below `engine` (which fills
//! it) and `rma` (whose direct operations read it).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::types::Rank;

/// The peers known failed, readable without the engine lock (one bit per world rank,
/// set once, never cleared): what a one-sided operation on a same-node window checks
/// before it stores into a peer's memory (`crate::rma::direct::DirectWin`).
#[derive(Debug)]
pub struct FailedSet {
    bits: Box<[AtomicU64]>,
}

impl FailedSet {
    pub(crate) fn new(size: u32) -> FailedSet {
        FailedSet { bits: (0..(size as usize).div_ceil(64)).map(|_| AtomicU64::new(0)).collect() }
    }

    pub(crate) fn insert(&self, peer: Rank) {
        if let Some(w) = self.bits.get(peer.0 as usize / 64) {
            w.fetch_or(1 << (peer.0 % 64), Ordering::Release);
        }
    }

    /// Whether `peer` is known failed.
    #[inline]
    pub fn contains(&self, peer: Rank) -> bool {
        self.bits.get(peer.0 as usize / 64).is_some_and(|w| w.load(Ordering::Acquire) & (1 << (peer.0 % 64)) != 0)
    }
}
