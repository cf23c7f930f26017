//! Stall detection: "would block" that persists for a peer becomes a signal (T-FD).
//!
//! libfabric 1.17's `tcp;ofi_rxm` never reports a SIGKILLed peer: sends to it return
//! `-FI_EAGAIN` forever and posted operations stay pending. [`StallTracker`] turns that
//! into data: the owner reports each `Busy` ([`StallTracker::handle_busy`]) and each sign of
//! progress ([`StallTracker::handle_progress`]) per peer, with the time passed in; once a
//! peer has been waiting longer than the bound, [`StallTracker::poll_stall`] yields one
//! [`Stall`] for it (once per episode). Pure logic: no clock, no I/O. The engine feeds
//! stalls to the failure detector as suspicion evidence; it is not proof of death.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

/// A peer that has made no progress for longer than the bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stall<P> {
    /// The stalled peer.
    pub peer: P,
    /// How long it had been waiting when reported.
    pub waited: Duration,
}

#[derive(Debug, Clone, Copy)]
struct Waiting {
    since: Instant,
    reported: bool,
}

/// Per-peer "busy persisted past a bound" tracker.
#[derive(Debug, Clone)]
pub struct StallTracker<P> {
    bound: Duration,
    waiting: HashMap<P, Waiting>,
}

impl<P: Copy + Eq + Hash> StallTracker<P> {
    /// A tracker reporting peers stuck for longer than `bound`.
    pub fn new(bound: Duration) -> Self {
        StallTracker { bound, waiting: HashMap::new() }
    }

    /// The configured bound.
    pub fn bound(&self) -> Duration {
        self.bound
    }

    /// A post to `peer` returned `Busy` (or an operation to it is outstanding) at `now`.
    /// Starts the episode if none is running; an ongoing one keeps its start.
    pub fn handle_busy(&mut self, peer: P, now: Instant) {
        self.waiting.entry(peer).or_insert(Waiting { since: now, reported: false });
    }

    /// Something for `peer` completed or a post succeeded: the episode ends.
    pub fn handle_progress(&mut self, peer: P) {
        self.waiting.remove(&peer);
    }

    /// Stop tracking `peer` (it was declared failed or removed).
    pub fn forget(&mut self, peer: P) {
        self.waiting.remove(&peer);
    }

    /// The next peer whose episode has exceeded the bound at `now`, reported once.
    pub fn poll_stall(&mut self, now: Instant) -> Option<Stall<P>> {
        let bound = self.bound;
        let (peer, w) =
            self.waiting.iter_mut().find(|(_, w)| !w.reported && now.saturating_duration_since(w.since) > bound)?;
        w.reported = true;
        Some(Stall { peer: *peer, waited: now.saturating_duration_since(w.since) })
    }

    /// The earliest instant at which [`StallTracker::poll_stall`] could report something.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.waiting.values().filter(|w| !w.reported).map(|w| w.since + self.bound).min()
    }

    /// Whether `peer` is currently in a waiting episode.
    pub fn is_waiting(&self, peer: P) -> bool {
        self.waiting.contains_key(&peer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUND: Duration = Duration::from_millis(100);

    #[test]
    fn busy_past_bound_reports_once() {
        let t0 = Instant::now();
        let mut t = StallTracker::new(BOUND);
        t.handle_busy(7u32, t0);
        t.handle_busy(7, t0 + Duration::from_millis(60)); // keeps the first start
        assert_eq!(t.poll_stall(t0 + Duration::from_millis(100)), None, "not past the bound yet");
        assert_eq!(t.poll_timeout(), Some(t0 + BOUND));
        let s = t.poll_stall(t0 + Duration::from_millis(101)).unwrap();
        assert_eq!(s.peer, 7);
        assert_eq!(s.waited, Duration::from_millis(101));
        assert_eq!(t.poll_stall(t0 + Duration::from_secs(10)), None, "reported once per episode");
        assert_eq!(t.poll_timeout(), None);
        assert!(t.is_waiting(7));
    }

    #[test]
    fn progress_resets_the_episode() {
        let t0 = Instant::now();
        let mut t = StallTracker::new(BOUND);
        t.handle_busy(1u32, t0);
        t.handle_progress(1);
        t.handle_busy(1, t0 + Duration::from_millis(90));
        assert_eq!(t.poll_stall(t0 + Duration::from_millis(150)), None);
        assert!(t.poll_stall(t0 + Duration::from_millis(191)).is_some());
        // A new episode after progress can report again.
        t.handle_progress(1);
        t.handle_busy(1, t0 + Duration::from_millis(200));
        assert!(t.poll_stall(t0 + Duration::from_millis(301)).is_some());
    }

    #[test]
    fn peers_are_independent() {
        let t0 = Instant::now();
        let mut t = StallTracker::new(BOUND);
        t.handle_busy(1u32, t0);
        t.handle_busy(2u32, t0 + Duration::from_millis(50));
        assert_eq!(t.poll_stall(t0 + Duration::from_millis(120)).map(|s| s.peer), Some(1));
        assert_eq!(t.poll_stall(t0 + Duration::from_millis(120)), None);
        assert_eq!(t.poll_stall(t0 + Duration::from_millis(151)).map(|s| s.peer), Some(2));
        t.forget(1);
        assert!(!t.is_waiting(1));
    }
}
