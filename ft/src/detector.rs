//! The ring failure detector with reliable broadcast of failure notices (T-FD).
//!
//! Parts: [`Config`] (period η, timeout δ), [`Detector`] (one per rank; a sans-IO state
//! machine driven by [`Detector::handle_message`], [`Detector::handle_timeout`] and
//! [`Detector::handle_local_failure`], drained with [`Detector::poll_transmit`],
//! [`Detector::poll_timeout`] and [`Detector::poll_event`]).
//!
//! # Algorithm
//!
//! **Ring heartbeats** (after Open MPI's `ompi/communicator/ft/comm_ft_detector.c`;
//! Bosilca et al., "Failure detection and propagation in HPC systems", SC'16). Ranks form
//! a ring `0 → 1 → … → n-1 → 0`. Every rank sends a [`Msg::Heartbeat`] to its *successor*
//! (the next rank not known failed) every η, and *observes* its *predecessor* (the previous
//! rank not known failed): a heartbeat re-arms a deadline δ ahead; when the deadline
//! passes, the predecessor is declared failed and the rank observes the next alive
//! predecessor, with a fresh window δ. When a rank's successor changes it sends a heartbeat
//! at once, so the new observer hears from it promptly. Failure-free cost: one heartbeat
//! per rank per η, nothing else.
//!
//! **Reliable broadcast of notices.** A declared failure (or local evidence, see
//! [`Detector::handle_local_failure`]) becomes a [`Msg::Notice`]. The declaring rank and
//! every rank that sees a notice *for the first time* forward it to all their *fingers*:
//! for `i = 0, 1, …` while `2^i < n`, the first rank not known failed at clockwise
//! distance ≥ `2^i` (or, when that rank is already a finger, the next one after it, which
//! keeps every finger of the plain definition). This is a binomial-graph / hypercube-like overlay:
//! with failures known, a target at distance `d` is reached by taking the highest set bit
//! of the remaining distance at each hop, and the remaining distance loses its top bit
//! each hop, so every alive rank is at most ⌈log2 n⌉ hops from the origin. Because
//! every first-time receiver forwards to *all* its fingers (not just a tree's children),
//! a forwarder that dies mid-broadcast only removes the paths through it; the others
//! remain (the redundancy costs `n·log2 n` messages per failure, `log2 n` per rank).
//!
//! Two more rules make delivery complete even when a forwarder's targets die unnoticed:
//! 1. *New predecessor.* When a rank starts observing `p`, it sends `p` the notice of every
//!    failed rank between `p` and itself. So `p` learns at once that its successor changed
//!    and starts heartbeating (otherwise `p` would be wrongly suspected).
//! 2. *New successor.* When a rank's successor changes to `s`, it sends `s` every notice it
//!    knows.
//!
//! *Completeness argument.* Fail-stop, finitely many failures, reliable channels between
//! alive ranks. Let alive rank `a` hold notice `N`. It sent `N` to its successor `x` in
//! its view. If `x` is alive, `x` holds `N`. Otherwise `x` is dead; the alive rank `b`
//! following `a` observes down through the dead ranks between `a` and `b`, declaring each
//! after δ, and when it reaches `a` rule 1 gives `a` every failure between `a` and `b`, so
//! `a`'s successor becomes `b` and rule 2 sends `N` to `b`. By induction `N` travels the
//! ring of alive ranks, so every alive rank learns every notice that any alive rank holds;
//! the declaring rank holds its own notice, and every crash is eventually declared by its
//! alive successor on the ring. Messages from a rank known failed are dropped (answered
//! with that rank's notice), so a wrongly suspected rank cannot spread stale claims once
//! its peers know, and learns that it was excluded.
//!
//! *Accuracy conditions.* With message delays in `[d_min, d_max]`: steady state needs
//! `η + (d_max − d_min) < δ`; after an observer moves on (rule 1 then the new
//! predecessor's immediate heartbeat, a round trip) it needs `2·d_max < δ`.
//!
//! *Detection time.* A crash at `t` is declared by its observer no later than
//! `t + d_max + δ` (the last heartbeat sent before the crash arrives by `t + d_max`) and no
//! earlier than `t − η + d_min + δ`; every alive rank then learns within
//! `⌈log2 n⌉` overlay hops when no other rank on the way died unnoticed.
//!
//! **Exclusion** (T-FD): a rank that receives a notice naming itself emits
//! [`FtEvent::Excluded`] and goes inert; it never rejoins. A rank that finds its own timers
//! serviced later than `(δ − η) / 2` assumes that *it* was stalled (e.g. SIGSTOP), not its
//! predecessor: it gives the predecessor a fresh window and heartbeats at once instead of
//! declaring it (effective for δ ≥ 3η), so that a resumed rank learns of its exclusion
//! before it can accuse anybody.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::event::FtEvent;
use crate::failure_set::FailureSet;
use crate::msg::Msg;
use crate::ring::Ring;
use crate::time::Time;
use crate::timer::{Timer, TimerTable};

/// Default heartbeat period η, suited to a cluster.
pub const DEFAULT_HB_PERIOD: Duration = Duration::from_millis(10);
/// Default heartbeat timeout δ, suited to a cluster.
pub const DEFAULT_HB_TIMEOUT: Duration = Duration::from_millis(100);

/// Detector parameters: heartbeat period η and timeout δ (δ > η > 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    period: Duration,
    timeout: Duration,
}

impl Config {
    /// Validated parameters.
    ///
    /// # Errors
    /// [`ConfigError`] if `period` is zero or `timeout` is not longer than `period`.
    pub fn new(period: Duration, timeout: Duration) -> Result<Config, ConfigError> {
        if period.is_zero() {
            return Err(ConfigError::ZeroPeriod);
        }
        if timeout <= period {
            return Err(ConfigError::TimeoutNotAbovePeriod { period, timeout });
        }
        Ok(Config { period, timeout })
    }

    /// Heartbeat period η.
    pub fn period(&self) -> Duration {
        self.period
    }

    /// Heartbeat timeout δ.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How late a timer may be serviced before the detector assumes it was itself stalled:
    /// `(δ − η) / 2`.
    pub fn stall_threshold(&self) -> Duration {
        (self.timeout - self.period) / 2
    }
}

impl Default for Config {
    /// η = [`DEFAULT_HB_PERIOD`], δ = [`DEFAULT_HB_TIMEOUT`].
    fn default() -> Self {
        Config { period: DEFAULT_HB_PERIOD, timeout: DEFAULT_HB_TIMEOUT }
    }
}

/// Invalid detector parameters (a local configuration mistake).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// The heartbeat period is zero.
    ZeroPeriod,
    /// The timeout must be longer than the period.
    TimeoutNotAbovePeriod {
        /// The period given.
        period: Duration,
        /// The timeout given.
        timeout: Duration,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::ZeroPeriod => write!(f, "heartbeat period must be positive"),
            ConfigError::TimeoutNotAbovePeriod { period, timeout } => {
                write!(f, "heartbeat timeout {timeout:?} must be longer than the period {period:?}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Successor,
    Predecessor,
}

/// The failure detector of one rank in a job of `n` ranks. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Detector {
    me: u32,
    n: u32,
    cfg: Config,
    failed: FailureSet,
    /// Hop count at which each failure was learnt, aligned with `failed.in_order()`
    /// (0 when declared here).
    hops: Vec<u16>,
    observing: Option<u32>,
    successor: Option<u32>,
    excluded: bool,
    /// Witnessed mode (R32): a silent predecessor is reported as [`FtEvent::Suspected`]
    /// instead of being declared here.
    witnessed: bool,
    /// The suspect reported and not yet confirmed (witnessed mode).
    suspect: Option<u32>,
    timers: TimerTable,
    transmits: VecDeque<(u32, Msg)>,
    events: VecDeque<FtEvent>,
    /// Reused buffer for finger lists.
    scratch: Vec<u32>,
    /// The ring's order ([`crate::ring`]): "distance", "predecessor", "successor" and
    /// the fingers are taken in ring positions.
    ring: Ring,
    /// This rank's ring position.
    pos: u32,
}

impl Detector {
    /// The detector of rank `me` in a job of `n` ranks, starting at `now`: it heartbeats
    /// its successor at once and gives its predecessor a window of δ.
    ///
    /// # Panics
    /// If `me >= n` (a local programming error, never remote input).
    pub fn new(me: u32, n: u32, cfg: Config, now: Time) -> Detector {
        Detector::on_ring(me, n, cfg, now, Ring::RankOrder)
    }

    /// [`Detector::new`] on a ring in `ring`'s order instead of rank order (every rank of
    /// the job must be given the same ring; [`Ring::interleaving`] puts a host's ranks
    /// apart, so a dead host is one timeout, not one per rank).
    ///
    /// # Panics
    /// If `me >= n`, or `ring` does not order `n` ranks (local programming errors).
    pub fn on_ring(me: u32, n: u32, cfg: Config, now: Time, ring: Ring) -> Detector {
        assert!(me < n, "rank {me} outside a job of {n} ranks");
        assert!(ring.fits(n), "a ring of another size than the job's {n} ranks");
        let mut d = Detector {
            me,
            n,
            cfg,
            failed: FailureSet::new(n),
            hops: Vec::new(),
            observing: None,
            successor: None,
            excluded: false,
            witnessed: false,
            suspect: None,
            timers: TimerTable::default(),
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            scratch: Vec::new(),
            pos: ring.position(me),
            ring,
        };
        d.observing = d.ring_neighbour(Direction::Predecessor);
        d.successor = d.ring_neighbour(Direction::Successor);
        if d.observing.is_some() {
            d.timers.set(Timer::Observe, now + cfg.timeout);
        }
        d.send_heartbeat(now);
        d
    }

    /// This rank.
    pub fn me(&self) -> u32 {
        self.me
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.n
    }

    /// The parameters.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Witnessed mode (R32, partitions): when the observed predecessor's window passes,
    /// the detector reports [`FtEvent::Suspected`] and waits for the engine to confirm
    /// the verdict with [`Detector::handle_local_failure`] (after the witness agreed)
    /// instead of declaring it failed and broadcasting by itself. A rank cut off from
    /// the witness therefore never declares anyone: the side of a partition without the
    /// witness cannot continue with a failure set of its own.
    pub fn set_witnessed(&mut self, on: bool) {
        self.witnessed = on;
    }

    /// The witness refused the suspicion of `rank` (R31, R32: the launcher still hears
    /// from it while it starts; it is slow, not failed). The suspicion is dropped and, if
    /// this rank still observes it, its window starts afresh (δ from `now`); when that
    /// window passes in silence it is suspected, and reported, again. Ignored for a rank
    /// that is not the current suspect.
    pub fn handle_refuted(&mut self, rank: u32, now: Time) {
        if self.excluded || self.suspect != Some(rank) {
            return;
        }
        self.suspect = None;
        if self.observing == Some(rank) {
            self.timers.set(Timer::Observe, now + self.cfg.timeout);
        }
    }

    /// The rank reported [`FtEvent::Suspected`] and not yet confirmed or learnt failed.
    pub fn suspect(&self) -> Option<u32> {
        self.suspect.filter(|&r| !self.failed.contains(r))
    }

    /// Ranks known failed here, with the epoch.
    pub fn failed(&self) -> &FailureSet {
        &self.failed
    }

    /// The predecessor whose heartbeats this rank watches; `None` when every other rank
    /// is known failed or this rank was excluded.
    pub fn observing(&self) -> Option<u32> {
        if self.excluded {
            None
        } else {
            self.observing
        }
    }

    /// The successor this rank heartbeats; `None` when every other rank is known failed
    /// or this rank was excluded.
    pub fn successor(&self) -> Option<u32> {
        if self.excluded {
            None
        } else {
            self.successor
        }
    }

    /// Whether this rank learnt that it was declared failed ([`FtEvent::Excluded`]).
    pub fn is_excluded(&self) -> bool {
        self.excluded
    }

    /// Handles a message from `from` received at `now`. Messages from ranks outside the
    /// job or from this rank are ignored; messages from a rank known failed are dropped
    /// and answered with its notice.
    pub fn handle_message(&mut self, from: u32, msg: Msg, now: Time) {
        if self.excluded || from >= self.n || from == self.me {
            return;
        }
        if self.failed.contains(from) {
            let hops = self.hops_of(from).saturating_add(1);
            self.transmits.push_back((from, Msg::Notice { failed: from, hops }));
            return;
        }
        match msg {
            Msg::Heartbeat => {
                if self.observing == Some(from) {
                    self.timers.set(Timer::Observe, now + self.cfg.timeout);
                }
            }
            Msg::Notice { failed, hops } => self.learn(failed, hops, now, false),
        }
    }

    /// Handles expired timers at `now`: sends the periodic heartbeat and declares the
    /// observed predecessor failed if its window passed. Harmless to call early.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.excluded {
            return;
        }
        let Some(due) = self.timers.next_timeout() else { return };
        if due > now {
            return;
        }
        if now - due > self.cfg.stall_threshold() {
            // This rank was not running (stopped, descheduled): the silence it saw says
            // nothing about its predecessor. Fresh window; tell the successor we live.
            if self.observing.is_some() {
                self.timers.set(Timer::Observe, now + self.cfg.timeout);
            }
            self.send_heartbeat(now);
            return;
        }
        if self.timers.is_expired(Timer::Heartbeat, now) {
            self.send_heartbeat(now);
        }
        if self.timers.is_expired(Timer::Observe, now) {
            self.timers.stop(Timer::Observe);
            if let Some(p) = self.observing {
                if self.witnessed {
                    // Heartbeats to the successor go on; the window re-arms only when
                    // the verdict (ours or another's) moves the observer on.
                    if self.suspect != Some(p) {
                        self.suspect = Some(p);
                        self.events.push_back(FtEvent::Suspected { rank: p });
                    }
                } else {
                    self.learn(p, 0, now, true);
                }
            }
        }
    }

    /// Local evidence that `rank` failed (a completion-queue error, shm peer death, the
    /// launcher's notice): declared and broadcast like a heartbeat timeout. Ignored for
    /// ranks outside the job, for this rank, and for ranks already known failed.
    pub fn handle_local_failure(&mut self, rank: u32, now: Time) {
        if self.excluded || rank >= self.n || rank == self.me {
            return;
        }
        self.learn(rank, 0, now, true);
    }

    /// The next message to send: `(destination rank, message)`.
    pub fn poll_transmit(&mut self) -> Option<(u32, Msg)> {
        self.transmits.pop_front()
    }

    /// When [`Detector::handle_timeout`] should be called next; `None` when inert.
    pub fn poll_timeout(&self) -> Option<Time> {
        if self.excluded {
            None
        } else {
            self.timers.next_timeout()
        }
    }

    /// The next event for the engine.
    pub fn poll_event(&mut self) -> Option<FtEvent> {
        self.events.pop_front()
    }

    fn hops_of(&self, rank: u32) -> u16 {
        self.failed.in_order().iter().position(|&r| r == rank).map_or(0, |i| self.hops[i])
    }

    fn send_heartbeat(&mut self, now: Time) {
        match self.successor {
            Some(s) => {
                self.transmits.push_back((s, Msg::Heartbeat));
                self.timers.set(Timer::Heartbeat, now + self.cfg.period);
            }
            None => self.timers.stop(Timer::Heartbeat),
        }
    }

    /// Rank at clockwise ring distance `off` (may be ≥ n only transiently; reduced mod n).
    fn at(&self, off: u64) -> u32 {
        self.ring.rank_at(((u64::from(self.pos) + off) % u64::from(self.n)) as u32)
    }

    /// Clockwise ring distance from rank `from` to rank `to`.
    fn distance(&self, from: u32, to: u32) -> u64 {
        let n = u64::from(self.n);
        (u64::from(self.ring.position(to)) + n - u64::from(self.ring.position(from))) % n
    }

    fn ring_neighbour(&self, dir: Direction) -> Option<u32> {
        let n = u64::from(self.n);
        (1..n)
            .map(|k| match dir {
                Direction::Successor => self.at(k),
                Direction::Predecessor => self.at(n - k),
            })
            .find(|&r| !self.failed.contains(r))
    }

    /// Fills `out` with the fingers: for each `2^i < n`, the first rank not known failed
    /// at clockwise distance ≥ `2^i` and beyond the previous finger, nearest first.
    fn fingers(&self, out: &mut Vec<u32>) {
        out.clear();
        let n = u64::from(self.n);
        let mut last = 0u64;
        let mut step = 1u64;
        while step < n {
            let mut off = step.max(last + 1);
            while off < n && self.failed.contains(self.at(off)) {
                off += 1;
            }
            if off >= n {
                break;
            }
            out.push(self.at(off));
            last = off;
            step *= 2;
        }
    }

    fn exclude(&mut self) {
        self.excluded = true;
        self.timers.stop_all();
        self.transmits.clear();
        self.events.push_back(FtEvent::Excluded);
    }

    /// Records that `rank` failed (learnt with `hops`, or declared here) and does
    /// everything that follows: event, broadcast, new neighbours.
    fn learn(&mut self, rank: u32, hops: u16, now: Time, declared_here: bool) {
        if self.excluded || rank >= self.n {
            return;
        }
        if rank == self.me {
            self.exclude();
            return;
        }
        if !self.failed.insert(rank) {
            return;
        }
        self.hops.push(hops);
        self.events.push_back(FtEvent::Failed { rank, epoch: self.failed.epoch() });
        if declared_here {
            // Tell the suspect, so a wrongly suspected rank excludes itself.
            self.transmits.push_back((rank, Msg::Notice { failed: rank, hops: 1 }));
        }
        let forward = Msg::Notice { failed: rank, hops: hops.saturating_add(1) };
        let mut fingers = std::mem::take(&mut self.scratch);
        self.fingers(&mut fingers);
        self.transmits.extend(fingers.iter().map(|&f| (f, forward)));
        self.scratch = fingers;

        let pred = self.ring_neighbour(Direction::Predecessor);
        if pred != self.observing {
            self.observing = pred;
            match pred {
                Some(p) => {
                    self.timers.set(Timer::Observe, now + self.cfg.timeout);
                    // Rule 1: every failure between p and me, so p heartbeats me now.
                    let span = self.distance(p, self.me);
                    for (&x, &h) in self.failed.in_order().iter().zip(&self.hops) {
                        let dist = self.distance(p, x);
                        if dist > 0 && dist < span {
                            self.transmits.push_back((p, Msg::Notice { failed: x, hops: h.saturating_add(1) }));
                        }
                    }
                }
                None => self.timers.stop(Timer::Observe),
            }
        }

        let succ = self.ring_neighbour(Direction::Successor);
        if succ != self.successor {
            self.successor = succ;
            self.send_heartbeat(now);
            if let Some(s) = succ {
                // Rule 2: whatever the dead successor may not have passed on.
                for (&x, &h) in self.failed.in_order().iter().zip(&self.hops) {
                    if x != rank {
                        self.transmits.push_back((s, Msg::Notice { failed: x, hops: h.saturating_add(1) }));
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Time {
        Time::from_nanos(v * 1_000_000)
    }

    fn drain(d: &mut Detector) -> Vec<(u32, Msg)> {
        std::iter::from_fn(|| d.poll_transmit()).collect()
    }

    #[test]
    fn config_is_validated() {
        assert_eq!(Config::new(Duration::ZERO, Duration::from_millis(1)), Err(ConfigError::ZeroPeriod));
        assert!(Config::new(Duration::from_millis(10), Duration::from_millis(10)).is_err());
        let c = Config::new(Duration::from_millis(10), Duration::from_millis(100)).unwrap();
        assert_eq!(c, Config::default());
        assert_eq!(c.stall_threshold(), Duration::from_millis(45));
    }

    #[test]
    fn on_a_permuted_ring_neighbours_and_fingers_follow_ring_positions() {
        // Three hosts of four ranks placed by slot: the ring deals them out.
        let hosts: Vec<u32> = (0..12).map(|r| r / 4).collect();
        let ring = Ring::interleaving(&hosts);
        // Ring: 0 4 8 1 5 9 2 6 10 3 7 11.
        let mut d = Detector::on_ring(5, 12, Config::default(), ms(0), ring);
        assert_eq!(d.observing(), Some(1));
        assert_eq!(d.successor(), Some(9));
        assert_eq!(drain(&mut d), vec![(9, Msg::Heartbeat)]);
        // Rank 1 is declared (local evidence): the observer moves on to 8 and tells it
        // that 1 failed (rule 1); the fingers, at ring distances 1, 2, 4 and 8 from rank
        // 5's position 4, are 9, 2, 10 and 0.
        d.handle_local_failure(1, ms(1));
        assert_eq!(d.observing(), Some(8));
        let out = drain(&mut d);
        for f in [9, 2, 10, 0] {
            assert!(out.contains(&(f, Msg::Notice { failed: 1, hops: 1 })), "finger {f}: {out:?}");
        }
        assert!(out.contains(&(8, Msg::Notice { failed: 1, hops: 1 })), "new predecessor: {out:?}");
    }

    #[test]
    fn heartbeats_successor_and_observes_predecessor() {
        let mut d = Detector::new(0, 4, Config::default(), ms(0));
        assert_eq!(d.observing(), Some(3));
        assert_eq!(d.successor(), Some(1));
        assert_eq!(drain(&mut d), vec![(1, Msg::Heartbeat)]);
        assert_eq!(d.poll_timeout(), Some(ms(10)));
        d.handle_timeout(ms(10));
        assert_eq!(drain(&mut d), vec![(1, Msg::Heartbeat)]);
        // Heartbeats from the predecessor keep it alive; others do not count.
        for t in (20..200).step_by(10) {
            d.handle_message(3, Msg::Heartbeat, ms(t));
            d.handle_timeout(ms(t));
        }
        assert!(d.poll_event().is_none());
        for t in (200..=290).step_by(10) {
            if t == 250 {
                d.handle_message(2, Msg::Heartbeat, ms(t));
            }
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.poll_event(), Some(FtEvent::Failed { rank: 3, epoch: 1 }));
        assert_eq!(d.observing(), Some(2));
        let out = drain(&mut d);
        assert!(out.contains(&(3, Msg::Notice { failed: 3, hops: 1 })), "suspect told");
        assert!(out.contains(&(1, Msg::Notice { failed: 3, hops: 1 })), "finger 1");
        assert!(out.contains(&(2, Msg::Notice { failed: 3, hops: 1 })), "finger 2 / new predecessor");
    }

    #[test]
    fn witnessed_mode_reports_a_suspect_and_declares_only_when_confirmed() {
        let mut d = Detector::new(0, 4, Config::default(), ms(0));
        d.set_witnessed(true);
        drain(&mut d);
        // Rank 3 falls silent: one Suspected event, no notice to anyone, heartbeats go on.
        for t in (10..=400).step_by(10) {
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.poll_event(), Some(FtEvent::Suspected { rank: 3 }));
        assert_eq!(d.poll_event(), None, "reported once");
        assert_eq!(d.suspect(), Some(3));
        let out = drain(&mut d);
        assert!(out.iter().all(|(to, m)| *to == 1 && *m == Msg::Heartbeat), "only heartbeats: {out:?}");
        assert!(d.failed().is_empty());
        assert_eq!(d.observing(), Some(3), "still observing the suspect");
        // The witness confirmed: declared and broadcast as without a witness.
        d.handle_local_failure(3, ms(410));
        assert_eq!(d.poll_event(), Some(FtEvent::Failed { rank: 3, epoch: 1 }));
        assert_eq!(d.suspect(), None);
        assert_eq!(d.observing(), Some(2));
        let out = drain(&mut d);
        assert!(out.contains(&(3, Msg::Notice { failed: 3, hops: 1 })));
        assert!(out.contains(&(2, Msg::Notice { failed: 3, hops: 1 })));
        // The next silent predecessor is suspected in turn, after a fresh window.
        for t in (420..=700).step_by(10) {
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.poll_event(), Some(FtEvent::Suspected { rank: 2 }));
    }

    #[test]
    fn a_refuted_suspicion_gives_the_suspect_a_fresh_window_then_is_reported_again() {
        let cfg = Config::default();
        let mut d = Detector::new(0, 4, cfg, ms(0));
        d.set_witnessed(true);
        drain(&mut d);
        let mut t = 0;
        while d.poll_event().is_none() {
            t += 10;
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.suspect(), Some(3));
        // Refusals of other ranks change nothing.
        d.handle_refuted(2, ms(t));
        assert_eq!(d.suspect(), Some(3));
        // The witness refused: no suspect, nobody failed, a fresh window of δ.
        d.handle_refuted(3, ms(t));
        assert_eq!(d.suspect(), None);
        assert!(d.failed().is_empty());
        assert_eq!(d.observing(), Some(3));
        let fresh = t + cfg.timeout().as_millis() as u64;
        while t + 10 < fresh {
            t += 10;
            d.handle_timeout(ms(t));
            assert_eq!(d.poll_event(), None, "suspected again at {t} ms, inside the fresh window");
        }
        // A heartbeat inside the window re-arms it as usual.
        d.handle_message(3, Msg::Heartbeat, ms(t));
        let quiet = t + cfg.timeout().as_millis() as u64;
        while t + 10 < quiet {
            t += 10;
            d.handle_timeout(ms(t));
            assert_eq!(d.poll_event(), None, "suspected at {t} ms despite the heartbeat");
        }
        // Silent for a whole window again: suspected and reported once more.
        for _ in 0..3 {
            t += 10;
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.poll_event(), Some(FtEvent::Suspected { rank: 3 }));
        assert_eq!(d.suspect(), Some(3));
    }

    #[test]
    fn fingers_skip_failed_ranks() {
        let mut d = Detector::new(0, 16, Config::default(), ms(0));
        let mut f = Vec::new();
        d.fingers(&mut f);
        assert_eq!(f, vec![1, 2, 4, 8]);
        for r in [1, 2, 3, 8] {
            d.handle_local_failure(r, ms(1));
        }
        d.fingers(&mut f);
        assert_eq!(f, vec![4, 5, 6, 9]);
        assert_eq!(d.successor(), Some(4));
    }

    #[test]
    fn notice_naming_me_excludes_and_goes_inert() {
        let mut d = Detector::new(2, 4, Config::default(), ms(0));
        drain(&mut d);
        d.handle_message(1, Msg::Notice { failed: 2, hops: 3 }, ms(5));
        assert_eq!(d.poll_event(), Some(FtEvent::Excluded));
        assert!(d.is_excluded());
        assert_eq!(d.poll_timeout(), None);
        assert_eq!(d.observing(), None);
        d.handle_timeout(ms(500));
        d.handle_local_failure(1, ms(500));
        d.handle_message(1, Msg::Notice { failed: 3, hops: 1 }, ms(500));
        assert!(d.poll_transmit().is_none());
        assert!(d.poll_event().is_none());
    }

    #[test]
    fn garbage_input_is_ignored() {
        let mut d = Detector::new(0, 4, Config::default(), ms(0));
        drain(&mut d);
        d.handle_message(9, Msg::Heartbeat, ms(1));
        d.handle_message(0, Msg::Notice { failed: 1, hops: 1 }, ms(1));
        d.handle_message(1, Msg::Notice { failed: u32::MAX, hops: u16::MAX }, ms(1));
        d.handle_local_failure(77, ms(1));
        d.handle_local_failure(0, ms(1));
        assert!(d.poll_event().is_none());
        assert!(d.poll_transmit().is_none());
        d.handle_message(1, Msg::Notice { failed: 2, hops: u16::MAX }, ms(1));
        assert_eq!(d.poll_event(), Some(FtEvent::Failed { rank: 2, epoch: 1 }));
    }

    #[test]
    fn messages_from_failed_ranks_are_answered_with_their_notice() {
        let mut d = Detector::new(0, 4, Config::default(), ms(0));
        d.handle_local_failure(2, ms(1));
        drain(&mut d);
        d.handle_message(2, Msg::Notice { failed: 1, hops: 1 }, ms(2));
        assert_eq!(drain(&mut d), vec![(2, Msg::Notice { failed: 2, hops: 1 })]);
        assert!(!d.failed().contains(1), "claims of a failed rank are dropped");
    }

    #[test]
    fn stalled_rank_does_not_accuse_its_predecessor() {
        let mut d = Detector::new(1, 4, Config::default(), ms(0));
        drain(&mut d);
        // Frozen from 0 to 400 ms: all timers are far overdue.
        d.handle_timeout(ms(400));
        assert!(d.poll_event().is_none());
        assert_eq!(drain(&mut d), vec![(2, Msg::Heartbeat)]);
        assert_eq!(d.poll_timeout(), Some(ms(410)));
        // The fresh window runs out normally.
        for t in (410..=500).step_by(10) {
            d.handle_timeout(ms(t));
        }
        assert_eq!(d.poll_event(), Some(FtEvent::Failed { rank: 0, epoch: 1 }));
    }

    #[test]
    fn new_successor_gets_heartbeat_and_all_notices() {
        let mut d = Detector::new(0, 8, Config::default(), ms(0));
        d.handle_message(5, Msg::Notice { failed: 6, hops: 2 }, ms(1));
        drain(&mut d);
        d.handle_message(4, Msg::Notice { failed: 1, hops: 4 }, ms(2));
        let out = drain(&mut d);
        assert!(out.contains(&(2, Msg::Heartbeat)));
        assert!(out.contains(&(2, Msg::Notice { failed: 6, hops: 3 })));
        assert!(out.contains(&(2, Msg::Notice { failed: 1, hops: 5 })));
    }

    #[test]
    fn alone_in_the_job() {
        let mut d = Detector::new(0, 1, Config::default(), ms(0));
        assert_eq!((d.observing(), d.successor(), d.poll_timeout()), (None, None, None));
        assert!(d.poll_transmit().is_none());
        let mut d = Detector::new(0, 2, Config::default(), ms(0));
        d.handle_local_failure(1, ms(1));
        assert_eq!((d.observing(), d.successor(), d.poll_timeout()), (None, None, None));
    }
}
