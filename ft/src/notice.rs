//! Communicator notices over a logarithmic overlay (R42): where the engine sends a
//! revoke or corrupt notice, and a simulator that checks it reaches every live member
//! while forwarders crash.
//!
//! Members are the positions `0..n` of a communicator. A member that learns a notice
//! for the first time sends it to its *fingers*: the first live member at or after each
//! of the positions `me + 1, me + 2, me + 4, …` (mod n) — at most ⌈log2 n⌉, the first
//! being its live *ring successor* ([`fingers`]). When its ring successor fails, a
//! holder sends the notice to the new one ([`successor_was`], [`successor`]). So a
//! notice held by a live member always reaches its live successor, hence — around the
//! ring — every live member, whichever forwarders die; without failures it arrives in
//! about log2 n hops (Chord's fingers), with ⌈log2 n⌉ messages sent and about as many
//! received by each member, instead of n − 1 sent by each forwarder of a flood.
//!
//! [`NoticeSim`] runs exactly these functions on a virtual clock with the agreement
//! simulator's model (random delays, per-message send overhead, a perfect detector with
//! a detection delay) and crashes injected at any send; [`NoticeSim::check`] asserts
//! that every survivor got the notice when any survivor did, and measures.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::time::Duration;

use crate::sim::{Ev, SplitMix64};
use crate::time::Time;

/// Appends to `out` the fingers of position `me` among `n`: the first position at or
/// after `me + 2^i` (mod n) for which `live` holds, for each `2^i < n`, without
/// repeats and never `me`.
pub fn fingers(n: usize, me: usize, live: impl Fn(usize) -> bool, out: &mut Vec<usize>) {
    let mut step = 1;
    while step < n {
        if let Some(to) = first_live(n, me, me + step, &live) {
            if !out.contains(&to) {
                out.push(to);
            }
        }
        step *= 2;
    }
}

/// The live ring successor of `me` among `n` positions, if any other is live.
pub fn successor(n: usize, me: usize, live: impl Fn(usize) -> bool) -> Option<usize> {
    first_live(n, me, me + 1, &live)
}

/// Whether `dead` was `me`'s ring successor: every position strictly between them is
/// not `live` (`live` is asked about the others only).
pub fn successor_was(n: usize, me: usize, dead: usize, live: impl Fn(usize) -> bool) -> bool {
    (1..n).map(|i| (me + i) % n).find(|&at| at == dead || live(at)) == Some(dead)
}

/// The first position at or after `from` (mod n) that is `live`, walking forward and
/// stopping before `me`.
fn first_live(n: usize, me: usize, from: usize, live: &impl Fn(usize) -> bool) -> Option<usize> {
    (0..n).map(|i| (from + i) % n).take_while(|&at| at != me).find(|&at| live(at))
}

/// Parameters of a simulated notice.
#[derive(Debug, Clone, Copy)]
pub struct NoticeSimConfig {
    /// Members.
    pub n: u32,
    /// Shortest and longest message delay.
    pub delay: (Duration, Duration),
    /// Shortest and longest time from a crash to its report at a member.
    pub notify: (Duration, Duration),
    /// Time a sender spends per message sent (serialised per sender).
    pub send_overhead: Duration,
    /// Seed of every random choice.
    pub seed: u64,
}

impl NoticeSimConfig {
    /// The agreement simulator's model: delays 5–50 µs, detection 1–2 ms, 100 ns per
    /// message sent.
    pub fn new(n: u32, seed: u64) -> Self {
        NoticeSimConfig {
            n,
            delay: (Duration::from_micros(5), Duration::from_micros(50)),
            notify: (Duration::from_millis(1), Duration::from_millis(2)),
            send_overhead: Duration::from_nanos(100),
            seed,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    Deliver { to: u32 },
    Notify { to: u32, failed: u32 },
}

#[derive(Debug, Clone, Default)]
struct Member {
    crashed: bool,
    /// Failed members this one knows, ascending.
    known: Vec<u32>,
    got_at: Option<Time>,
    sent: u32,
    received: u32,
    crash_after_sends: Option<u32>,
    next_free: Time,
}

/// What a checked notice run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct NoticeRun {
    /// Members that never crashed.
    pub survivors: u32,
    /// Survivors that got the notice.
    pub reached: u32,
    /// Messages sent in total.
    pub messages: u64,
    /// Most messages sent by one member.
    pub max_sent: u32,
    /// Most messages received by one member.
    pub max_received: u32,
    /// Last survivor's receipt, from the origin's send.
    pub latency: Duration,
}

/// One notice, first held by member 0 at time zero, spread over `n` members with
/// crashes. See the [module docs](self).
#[derive(Debug)]
pub struct NoticeSim {
    cfg: NoticeSimConfig,
    now: Time,
    rng: SplitMix64,
    members: Vec<Member>,
    heap: BinaryHeap<Reverse<Ev<Kind>>>,
    seq: u64,
    messages: u64,
}

impl NoticeSim {
    /// A notice among `cfg.n` members (at least 1), held by member 0.
    pub fn new(cfg: NoticeSimConfig) -> NoticeSim {
        assert!(cfg.n > 0, "a notice needs a member");
        NoticeSim {
            cfg,
            now: Time::ZERO,
            rng: SplitMix64::new(cfg.seed),
            members: vec![Member::default(); cfg.n as usize],
            heap: BinaryHeap::new(),
            seq: 0,
            messages: 0,
        }
    }

    /// Member `p` crashes when about to send its message number `k + 1` (`k = 0`: before
    /// sending anything); never if it sends fewer.
    pub fn crash_after_sends(&mut self, p: u32, k: u32) {
        self.members[p as usize].crash_after_sends = Some(k);
    }

    fn push(&mut self, at: Time, kind: Kind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev { at, seq: self.seq, kind }));
    }

    fn crash(&mut self, p: u32) {
        let m = &mut self.members[p as usize];
        if m.crashed {
            return;
        }
        m.crashed = true;
        for q in 0..self.cfg.n {
            if q != p {
                let at = self.now + self.rng.duration(self.cfg.notify.0, self.cfg.notify.1);
                self.push(at, Kind::Notify { to: q, failed: p });
            }
        }
    }

    fn send(&mut self, from: u32, to: usize) {
        let m = &mut self.members[from as usize];
        if m.crashed {
            return;
        }
        if m.crash_after_sends == Some(m.sent) {
            self.crash(from);
            return;
        }
        m.sent += 1;
        let depart = m.next_free.max(self.now) + self.cfg.send_overhead;
        m.next_free = depart;
        self.messages += 1;
        let at = depart + self.rng.duration(self.cfg.delay.0, self.cfg.delay.1);
        self.push(at, Kind::Deliver { to: to as u32 });
    }

    /// Member `p` got the notice for the first time: it forwards it to its fingers.
    fn forward(&mut self, p: u32) {
        let n = self.cfg.n as usize;
        let mut to = Vec::new();
        let known = &self.members[p as usize].known;
        fingers(n, p as usize, |q| known.binary_search(&(q as u32)).is_err(), &mut to);
        for q in to {
            self.send(p, q);
        }
    }

    /// Runs until no event is left.
    pub fn run(&mut self) {
        self.members[0].got_at = Some(Time::ZERO);
        self.forward(0);
        let n = self.cfg.n as usize;
        while let Some(Reverse(ev)) = self.heap.pop() {
            self.now = self.now.max(ev.at);
            match ev.kind {
                Kind::Deliver { to } => {
                    let m = &mut self.members[to as usize];
                    if m.crashed {
                        continue;
                    }
                    m.received += 1;
                    if m.got_at.is_none() {
                        m.got_at = Some(self.now);
                        self.forward(to);
                    }
                }
                Kind::Notify { to, failed } => {
                    let m = &mut self.members[to as usize];
                    if m.crashed {
                        continue;
                    }
                    let Err(at) = m.known.binary_search(&failed) else { continue };
                    m.known.insert(at, failed);
                    if m.got_at.is_none() {
                        continue;
                    }
                    let known = &m.known;
                    let live = |q: usize| known.binary_search(&(q as u32)).is_err();
                    if successor_was(n, to as usize, failed as usize, live) {
                        if let Some(next) = successor(n, to as usize, live) {
                            self.send(to, next);
                        }
                    }
                }
            }
        }
    }

    /// Checks, after [`NoticeSim::run`], that every survivor got the notice if any
    /// survivor did (a notice whose every holder died may vanish), and measures.
    ///
    /// # Errors
    /// Which survivor missed it.
    pub fn check(&self) -> Result<NoticeRun, String> {
        let mut r = NoticeRun {
            survivors: 0,
            reached: 0,
            messages: self.messages,
            max_sent: 0,
            max_received: 0,
            latency: Duration::ZERO,
        };
        for m in &self.members {
            r.max_sent = r.max_sent.max(m.sent);
            r.max_received = r.max_received.max(m.received);
            if !m.crashed {
                r.survivors += 1;
                if let Some(t) = m.got_at {
                    r.reached += 1;
                    r.latency = r.latency.max(t - Time::ZERO);
                }
            }
        }
        if r.reached > 0 && r.reached < r.survivors {
            let p = self.members.iter().position(|m| !m.crashed && m.got_at.is_none()).unwrap_or(0);
            return Err(format!("survivor {p} never got the notice ({} of {} did)", r.reached, r.survivors));
        }
        Ok(r)
    }
}

/// The notice's cost table in markdown (header included): for each `n`, failure-free,
/// then with 1 and with ⌈log2 n⌉ forwarders crashing (the origin's first fingers, each
/// after passing the notice to one finger): most sent and received by one member and the
/// last survivor's arrival.
///
/// # Panics
/// If a run loses the notice at a survivor.
pub fn notice_table(sizes: &[u32], seed: u64) -> String {
    let mut out = String::from(
        "| n | msgs / member | most sent by one | most received by one | arrival (µs) | \
         arrival, 1 forwarder crashes (µs) | arrival, log2 n forwarders crash (µs) |\n\
         |---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &n in sizes {
        let ff = run_checked(n, seed, 0);
        let one = run_checked(n, seed, 1);
        let log = run_checked(n, seed, n.max(2).next_power_of_two().trailing_zeros());
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let _ = writeln!(
            out,
            "| {n} | {:.2} | {} | {} | {:.1} | {:.1} | {:.1} |",
            ff.messages as f64 / f64::from(n),
            ff.max_sent,
            ff.max_received,
            us(ff.latency),
            us(one.latency),
            us(log.latency)
        );
    }
    out
}

/// A run of `n` members where the origin's first `crashes` fingers (positions 1, 2, 4,
/// …) crash after passing the notice to one finger of their own.
///
/// # Panics
/// If the run loses the notice at a survivor.
pub fn run_checked(n: u32, seed: u64, crashes: u32) -> NoticeRun {
    let mut sim = NoticeSim::new(NoticeSimConfig::new(n, seed));
    for i in 0..crashes.min(31) {
        let p = 1u32 << i;
        if p < n {
            sim.crash_after_sends(p, 1);
        }
    }
    sim.run();
    sim.check().unwrap_or_else(|e| panic!("n={n} seed={seed} crashes={crashes}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingers_and_successors_skip_the_dead() {
        let mut out = Vec::new();
        fingers(8, 7, |_| true, &mut out);
        assert_eq!(out, vec![0, 1, 3]);
        out.clear();
        fingers(8, 7, |q| q != 0 && q != 3, &mut out);
        assert_eq!(out, vec![1, 4]);
        out.clear();
        fingers(1, 0, |_| true, &mut out);
        assert!(out.is_empty());
        assert_eq!(successor(5, 4, |q| q > 2), Some(3));
        assert_eq!(successor(3, 1, |_| false), None);
        assert!(successor_was(8, 6, 1, |q| q != 7 && q != 0));
        assert!(!successor_was(8, 6, 1, |q| q != 7));
    }

    #[test]
    fn a_notice_reaches_everyone_with_log_n_messages_a_member() {
        for n in [1u32, 2, 3, 7, 64, 1000] {
            let r = run_checked(n, 3, 0);
            assert_eq!((r.reached, r.survivors), (n, n));
            let log = n.next_power_of_two().trailing_zeros();
            assert!(r.max_sent <= log, "n={n}: {r:?}");
        }
    }
}
