//! A deterministic simulator for the agreement ([`crate::agree`]) with crashes injected
//! at every step, and the checker of its properties.
//!
//! Parts: [`AgreeSimConfig`] (participants, delays, detection delay, seed), [`AgreeSim`]
//! (one [`Agreement`] per participant on a virtual clock, a heap of timed events, a
//! [`SplitMix64`], and a crash schedule: at a time, after the k-th message sent, right
//! after deciding, or before the agreement), [`AgreeRun`] (what a run measured, returned
//! by [`AgreeSim::check`]), and [`agree_table`] (the markdown table for
//! `bench/RESULTS.md`).
//!
//! Model: each participant enters at a random time in `[0, start_jitter]`; messages to a
//! participant that has not entered yet wait for it. A message leaves its sender after a
//! per-message send overhead (serialised per sender, so a coordinator's fan-out of `n`
//! messages takes `n` overheads) and arrives after a delay uniform in
//! `[delay_min, delay_max]` (so messages are reordered). A crashed participant stops
//! sending and receiving; its messages in flight are still delivered. The detector is
//! modelled as perfect: each crash is reported to every other participant after a delay
//! uniform in `[notify_min, notify_max]`; a participant not yet entered gets it in its
//! initial failed set. Rounds are the length of the longest causal message chain ending at
//! a decision. Same seed, same run.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use crate::agree::{Agreement, Decision, Input, Participants};
use crate::agree_msg::AgreeMsg;
use crate::agree_tree::DEFAULT_FANOUT;
use crate::sim::{Ev, SplitMix64};
use crate::time::Time;

/// Parameters of a simulated agreement.
#[derive(Debug, Clone, Copy)]
pub struct AgreeSimConfig {
    /// Number of participants.
    pub n: u32,
    /// Shortest message delay.
    pub delay_min: Duration,
    /// Longest message delay.
    pub delay_max: Duration,
    /// Shortest time from a crash to its report at a participant.
    pub notify_min: Duration,
    /// Longest time from a crash to its report at a participant.
    pub notify_max: Duration,
    /// Participants enter in `[0, start_jitter]`.
    pub start_jitter: Duration,
    /// Time a sender spends per message sent (serialised per sender).
    pub send_overhead: Duration,
    /// Participant `i` is job rank `3·(n − 1 − i) + 1` instead of `i`, to exercise the
    /// rank ↔ index mapping.
    pub scramble_ranks: bool,
    /// Encode and decode every message, checking the round trip.
    pub check_codec: bool,
    /// Fan-out of the agreement tree ([`crate::agree_tree`]).
    pub fanout: u32,
    /// Seed of every random choice.
    pub seed: u64,
}

impl AgreeSimConfig {
    /// `n` participants; delays 5–50 µs, detection 1–2 ms, entry within 20 µs, 100 ns per
    /// message sent; ranks scrambled and codec checked when `n ≤ 4096`; the default
    /// fan-out ([`DEFAULT_FANOUT`]).
    pub fn new(n: u32, seed: u64) -> Self {
        AgreeSimConfig {
            n,
            delay_min: Duration::from_micros(5),
            delay_max: Duration::from_micros(50),
            notify_min: Duration::from_millis(1),
            notify_max: Duration::from_millis(2),
            start_jitter: Duration::from_micros(20),
            send_overhead: Duration::from_nanos(100),
            scramble_ranks: n <= 4096,
            check_codec: n <= 4096,
            fanout: DEFAULT_FANOUT,
            seed,
        }
    }
}

#[derive(Debug)]
enum Status {
    Waiting { inbox: Vec<(u32, AgreeMsg, u32)>, known: Vec<u32> },
    Running,
    Crashed,
}

#[derive(Debug)]
struct Proc {
    status: Status,
    agreement: Option<Agreement>,
    input: Input,
    entry_failed: Vec<u32>,
    depth: u32,
    sends: u32,
    received: u32,
    crash_after_sends: Option<u32>,
    crash_after_decision: bool,
    crashed_at: Option<Time>,
    next_free: Time,
    decision: Option<(Decision, Time, u32)>,
}

#[derive(Debug)]
enum Kind {
    Start { p: u32 },
    Deliver { from: u32, to: u32, msg: AgreeMsg, depth: u32 },
    Notify { to: u32, failed: u32 },
    Crash { p: u32 },
}

/// What a checked run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct AgreeRun {
    /// Participants.
    pub n: u32,
    /// Participants that never crashed.
    pub survivors: u32,
    /// Participants that decided (survivors and crashed ones).
    pub decided: u32,
    /// The decision.
    pub decision: Decision,
    /// Messages sent in total.
    pub messages: u64,
    /// Most messages sent by one participant.
    pub max_sent_by_one: u32,
    /// Most messages received by one participant (while running).
    pub max_received_by_one: u32,
    /// Longest causal message chain ending at a survivor's decision.
    pub rounds: u32,
    /// Latest decision of a survivor, from time zero.
    pub latency: Duration,
}

/// A simulated agreement among `n` participants. See the [module docs](self).
#[derive(Debug)]
pub struct AgreeSim {
    cfg: AgreeSimConfig,
    parts: Arc<Participants>,
    now: Time,
    rng: SplitMix64,
    procs: Vec<Proc>,
    heap: BinaryHeap<Reverse<Ev<Kind>>>,
    seq: u64,
    messages: u64,
    dropped: u64,
    buf: Vec<u8>,
}

impl AgreeSim {
    /// Participants `0..n` enter at random times; inputs are random: each participant
    /// contributes a flag of all ones, or all ones but one bit; a random `max` word; and
    /// (half of them) up to 4 signals drawn from a small set (ranks below
    /// `min(n, 6) + 2`, codes in `-1..=1`: at most 24 distinct, so that contributions
    /// overlap and values stay small at large `n`). The inputs come from their own generator, so the
    /// schedule of a seed (entry times, delays) does not depend on them.
    ///
    /// # Panics
    /// If `cfg.n` is zero.
    pub fn new(cfg: AgreeSimConfig) -> AgreeSim {
        assert!(cfg.n > 0, "an agreement needs at least one participant");
        let ranks: Vec<u32> =
            (0..cfg.n).map(|i| if cfg.scramble_ranks { 3 * (cfg.n - 1 - i) + 1 } else { i }).collect();
        let parts = Arc::new(Participants::new(ranks).expect("distinct ranks").with_fanout(cfg.fanout));
        let mut rng = SplitMix64::new(cfg.seed);
        let mut sim = AgreeSim {
            cfg,
            parts,
            now: Time::ZERO,
            rng: rng.clone(),
            procs: Vec::with_capacity(cfg.n as usize),
            heap: BinaryHeap::new(),
            seq: 0,
            messages: 0,
            dropped: 0,
            buf: Vec::new(),
        };
        let mut values = SplitMix64::new(cfg.seed ^ 0x5157_a15e_0000_0000);
        for p in 0..cfg.n {
            let r = rng.next_u64();
            let flag = if r & 1 == 0 { u32::MAX } else { !(1u32 << ((r >> 1) % 32)) };
            let v = values.next_u64();
            // Small words half the time (ties are likely), any word otherwise.
            let max = if v & 1 == 0 { (v >> 1) as u32 % 8 } else { (v >> 32) as u32 };
            let count = if values.next_u64() & 1 == 0 { 0 } else { 1 + values.next_u64() % 4 };
            let signals = (0..count)
                .map(|_| {
                    let s = values.next_u64();
                    (s % u64::from(cfg.n.min(6) + 2), ((s >> 32) % 3) as i32 - 1)
                })
                .collect();
            sim.procs.push(Proc {
                status: Status::Waiting { inbox: Vec::new(), known: Vec::new() },
                agreement: None,
                input: Input { flag, max, signals },
                entry_failed: Vec::new(),
                depth: 0,
                sends: 0,
                received: 0,
                crash_after_sends: None,
                crash_after_decision: false,
                crashed_at: None,
                next_free: Time::ZERO,
                decision: None,
            });
            let start = Time::ZERO + rng.duration(Duration::ZERO, cfg.start_jitter);
            sim.push(start, Kind::Start { p });
        }
        sim.rng = SplitMix64::new(rng.next_u64());
        sim
    }

    /// The participants (job ranks in index order).
    pub fn participants(&self) -> &Arc<Participants> {
        &self.parts
    }

    fn push(&mut self, at: Time, kind: Kind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev { at, seq: self.seq, kind }));
    }

    /// Crashes participant `p` (an index) at `at`.
    pub fn crash_at(&mut self, p: u32, at: Time) {
        self.push(at, Kind::Crash { p });
    }

    /// Crashes participant `p` when it is about to send its message number `k + 1`: it
    /// sends `k` messages, then crashes (`k = 0`: before sending anything). If it sends
    /// fewer than `k + 1` messages in all, it never crashes this way.
    pub fn crash_after_sends(&mut self, p: u32, k: u32) {
        self.procs[p as usize].crash_after_sends = Some(k);
    }

    /// Crashes participant `p` right after it decides, before it sends anything more
    /// (for the coordinator: before a single commit leaves).
    pub fn crash_after_decision(&mut self, p: u32) {
        self.procs[p as usize].crash_after_decision = true;
    }

    /// Participant `p` failed before the agreement: each other participant knows it at
    /// entry with probability ½, and is told after a detection delay otherwise.
    pub fn failed_before(&mut self, p: u32) {
        let pr = &mut self.procs[p as usize];
        if pr.crashed_at.is_some() {
            return;
        }
        pr.status = Status::Crashed;
        pr.crashed_at = Some(Time::ZERO);
        let rank = self.parts.ranks()[p as usize];
        for q in 0..self.cfg.n {
            if q == p {
                continue;
            }
            if self.rng.next_u64() & 1 == 0 {
                if let Status::Waiting { known, .. } = &mut self.procs[q as usize].status {
                    known.push(rank);
                }
            } else {
                let at = Time::ZERO + self.rng.duration(self.cfg.notify_min, self.cfg.notify_max);
                self.push(at, Kind::Notify { to: q, failed: p });
            }
        }
    }

    fn crash(&mut self, p: u32) {
        let pr = &mut self.procs[p as usize];
        if matches!(pr.status, Status::Crashed) {
            return;
        }
        pr.status = Status::Crashed;
        pr.crashed_at = Some(self.now);
        for q in 0..self.cfg.n {
            if q != p {
                let at = self.now + self.rng.duration(self.cfg.notify_min, self.cfg.notify_max);
                self.push(at, Kind::Notify { to: q, failed: p });
            }
        }
    }

    /// Crashes participant `p` at a step drawn from `rng`: after one of its first
    /// `sends` sends, right after deciding, at a time in `[0, before]`, or before the
    /// agreement (each a quarter of the time); returns the plan entry (`p@send3`,
    /// `p@decide`, `p@<time>`, `p@before`) for failure messages.
    pub fn crash_randomly(&mut self, p: u32, rng: &mut SplitMix64, sends: u32, before: Duration) -> String {
        match rng.range(0, 3) {
            0 => {
                let k = rng.range(0, u64::from(sends)) as u32;
                self.crash_after_sends(p, k);
                format!("{p}@send{k}")
            }
            1 => {
                self.crash_after_decision(p);
                format!("{p}@decide")
            }
            2 => {
                let t = Time::from_nanos(rng.range(0, u64::try_from(before.as_nanos()).unwrap_or(u64::MAX)));
                self.crash_at(p, t);
                format!("{p}@{t}")
            }
            _ => {
                self.failed_before(p);
                format!("{p}@before")
            }
        }
    }

    /// Runs until no event is left (the agreement has no timers, so this terminates).
    pub fn run(&mut self) {
        while let Some(Reverse(ev)) = self.heap.pop() {
            self.now = self.now.max(ev.at);
            self.process(ev.kind);
        }
    }

    fn process(&mut self, kind: Kind) {
        let now = self.now;
        match kind {
            Kind::Start { p } => {
                let pr = &mut self.procs[p as usize];
                let Status::Waiting { inbox, known } = std::mem::replace(&mut pr.status, Status::Running) else {
                    return;
                };
                let me = self.parts.ranks()[p as usize];
                pr.entry_failed = known;
                pr.entry_failed.sort_unstable();
                pr.entry_failed.dedup();
                let input = pr.input.clone();
                pr.agreement =
                    Some(Agreement::with_input(self.parts.clone(), me, 0xa9ee, input, &pr.entry_failed, now));
                self.after(p);
                for (from, msg, depth) in inbox {
                    self.deliver(from, p, msg, depth);
                }
            }
            Kind::Deliver { from, to, msg, depth } => self.deliver(from, to, msg, depth),
            Kind::Notify { to, failed } => {
                let rank = self.parts.ranks()[failed as usize];
                let pr = &mut self.procs[to as usize];
                match &mut pr.status {
                    Status::Waiting { known, .. } => known.push(rank),
                    Status::Running => {
                        if let Some(a) = pr.agreement.as_mut() {
                            a.handle_failure(rank, now);
                        }
                        self.after(to);
                    }
                    Status::Crashed => {}
                }
            }
            Kind::Crash { p } => self.crash(p),
        }
    }

    fn deliver(&mut self, from: u32, to: u32, msg: AgreeMsg, depth: u32) {
        let now = self.now;
        let from_rank = self.parts.ranks()[from as usize];
        let pr = &mut self.procs[to as usize];
        match &mut pr.status {
            Status::Waiting { inbox, .. } => inbox.push((from, msg, depth)),
            Status::Running => {
                pr.received += 1;
                pr.depth = pr.depth.max(depth);
                if let Some(a) = pr.agreement.as_mut() {
                    a.handle_message(from_rank, msg, now);
                }
                self.after(to);
            }
            Status::Crashed => self.dropped += 1,
        }
    }

    /// Drains `p`'s decision and transmits, applying its crash schedule.
    fn after(&mut self, p: u32) {
        let now = self.now;
        let pi = p as usize;
        let Some(a) = self.procs[pi].agreement.as_mut() else { return };
        if let Some(d) = a.poll_decision() {
            let pr = &mut self.procs[pi];
            pr.decision = Some((d, now, pr.depth));
            if pr.crash_after_decision {
                self.crash(p);
            }
        }
        loop {
            let pr = &mut self.procs[pi];
            let Some((to_rank, msg)) = pr.agreement.as_mut().and_then(Agreement::poll_transmit) else { break };
            if !matches!(pr.status, Status::Running) {
                continue;
            }
            if pr.crash_after_sends == Some(pr.sends) {
                self.crash(p);
                continue;
            }
            pr.sends += 1;
            let depth = pr.depth + 1;
            let depart = pr.next_free.max(now) + self.cfg.send_overhead;
            pr.next_free = depart;
            let to = self.parts.index_of(to_rank).expect("agreement sends only to participants");
            assert_ne!(to, p, "agreement sent to itself");
            if self.cfg.check_codec {
                self.buf.clear();
                msg.encode(&mut self.buf);
                assert_eq!(self.buf.len(), msg.encoded_len());
                assert_eq!(AgreeMsg::decode(&self.buf).as_ref(), Ok(&msg), "codec round trip");
            }
            self.messages += 1;
            let at = depart + self.rng.duration(self.cfg.delay_min, self.cfg.delay_max);
            self.push(at, Kind::Deliver { from: p, to, msg, depth });
        }
    }

    /// Messages that reached a crashed participant.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Whether participant `p` never crashed.
    pub fn is_survivor(&self, p: u32) -> bool {
        self.procs[p as usize].crashed_at.is_none()
    }

    /// Participant `p`'s decision, if it decided.
    pub fn decision(&self, p: u32) -> Option<&Decision> {
        self.procs[p as usize].decision.as_ref().map(|(d, _, _)| d)
    }

    /// Checks, after [`AgreeSim::run`]:
    /// - *termination*: every survivor decided;
    /// - *uniform agreement*: every participant that decided, crashed or not, decided the
    ///   same;
    /// - *validity*: the flag is the AND of the flags of some set of participants that
    ///   contains every participant that decided (hence every survivor); the max is some
    ///   participant's word and at least the word of every participant that decided;
    ///   the signals are sorted without duplicates, each contributed by some participant,
    ///   and include every signal of every participant that decided; the failed set
    ///   contains only crashed participants and every failure any decider knew at entry.
    ///
    /// # Errors
    /// A description of the first violated property.
    pub fn check(&self) -> Result<AgreeRun, String> {
        let n = self.cfg.n;
        let mut decision: Option<&Decision> = None;
        let mut run = AgreeRun {
            n,
            survivors: 0,
            decided: 0,
            decision: Decision::default(),
            messages: self.messages,
            max_sent_by_one: 0,
            max_received_by_one: 0,
            rounds: 0,
            latency: Duration::ZERO,
        };
        for (p, pr) in self.procs.iter().enumerate() {
            run.max_sent_by_one = run.max_sent_by_one.max(pr.sends);
            run.max_received_by_one = run.max_received_by_one.max(pr.received);
            let survivor = pr.crashed_at.is_none();
            run.survivors += u32::from(survivor);
            let Some((d, at, depth)) = &pr.decision else {
                if survivor {
                    return Err(format!("termination: survivor {p} did not decide"));
                }
                continue;
            };
            run.decided += 1;
            match decision {
                None => decision = Some(d),
                Some(first) if first != d => {
                    return Err(format!("uniform agreement: participant {p} decided {d:?}, another {first:?}"));
                }
                Some(_) => {}
            }
            if survivor {
                run.rounds = run.rounds.max(*depth);
                run.latency = run.latency.max(*at - Time::ZERO);
            }
        }
        let Some(d) = decision else {
            return if run.survivors == 0 { Ok(run) } else { Err("termination: nobody decided".into()) };
        };
        // Validity of the flag: every decider's flag covers it, and its zero bits are
        // explained by participants whose flags cover it.
        let mut and_of_covering = u32::MAX;
        for (p, pr) in self.procs.iter().enumerate() {
            let flag = pr.input.flag;
            if flag & d.flag == d.flag {
                and_of_covering &= flag;
            } else if pr.decision.is_some() {
                return Err(format!("validity: decider {p} contributed {flag:#x}, decided flag {:#x}", d.flag));
            }
        }
        if and_of_covering != d.flag {
            return Err(format!("validity: flag {:#x} is not an AND of contributions", d.flag));
        }
        // Validity of max and signals: the decided values are contributions (max: one
        // participant's word; signals: each one some participant's), and cover the
        // contribution of every decider (every survivor decides).
        if !self.procs.iter().any(|pr| pr.input.max == d.max) {
            return Err(format!("validity: max {} is nobody's contribution", d.max));
        }
        if d.signals.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("decision signals not sorted or duplicated: {:?}", d.signals));
        }
        if let Some(s) = d.signals.iter().find(|s| !self.procs.iter().any(|pr| pr.input.signals.contains(s))) {
            return Err(format!("validity: signal {s:?} was contributed by nobody"));
        }
        for (p, pr) in self.procs.iter().enumerate() {
            if pr.decision.is_none() {
                continue;
            }
            if pr.input.max > d.max {
                return Err(format!("validity: decider {p} contributed max {}, decided {}", pr.input.max, d.max));
            }
            if let Some(s) = pr.input.signals.iter().find(|s| d.signals.binary_search(s).is_err()) {
                return Err(format!("validity: decider {p} contributed signal {s:?}, decided {:?}", d.signals));
            }
        }
        if d.failed.windows(2).any(|w| w[0] >= w[1]) {
            return Err(format!("decision failed set not sorted: {:?}", d.failed));
        }
        for &r in &d.failed {
            let p = self.parts.index_of(r).ok_or_else(|| format!("validity: {r} is not a participant"))?;
            if self.procs[p as usize].crashed_at.is_none() {
                return Err(format!("validity: survivor {p} (rank {r}) decided failed"));
            }
        }
        for (p, pr) in self.procs.iter().enumerate() {
            if pr.decision.is_some() {
                if let Some(r) = pr.entry_failed.iter().find(|r| d.failed.binary_search(r).is_err()) {
                    return Err(format!("validity: decider {p} knew rank {r} failed at entry; decision {d:?}"));
                }
            }
        }
        run.decision = d.clone();
        Ok(run)
    }
}

/// One failure-free run, one with the coordinator (the tree's root) crashing half-way
/// through sending its proposals, and one with participant 1 (the root's first child, an
/// inner node when `n` exceeds the fan-out + 1) crashing after its report and half its
/// proposals, for `n` participants and `runs` seeds `base_seed..`; returns the row of
/// [`agree_table`].
///
/// # Panics
/// If a run violates a property (see [`AgreeSim::check`]).
pub fn agree_row(n: u32, runs: u32, base_seed: u64) -> String {
    let mut ff = Agg::default();
    let mut root = Agg::default();
    let mut inner = Agg::default();
    for seed in base_seed..base_seed + u64::from(runs.max(1)) {
        let cfg = AgreeSimConfig::new(n, seed);
        let mut sim = AgreeSim::new(cfg);
        sim.run();
        ff.add(&sim.check().unwrap_or_else(|e| panic!("n={n} seed={seed} failure-free: {e}")));
        if n > 1 {
            let mut sim = AgreeSim::new(cfg);
            sim.crash_after_sends(0, (n - 1).min(cfg.fanout) / 2);
            sim.run();
            root.add(&sim.check().unwrap_or_else(|e| panic!("n={n} seed={seed} coordinator crash: {e}")));
            let mut sim = AgreeSim::new(cfg);
            sim.crash_after_sends(1, 1 + cfg.fanout / 2);
            sim.run();
            inner.add(&sim.check().unwrap_or_else(|e| panic!("n={n} seed={seed} inner crash: {e}")));
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let crash = if n > 1 {
        format!("{} | {:.3} | {:.3}", root.max_sent, ms(root.latency_mean()), ms(inner.latency_mean()))
    } else {
        "– | – | –".to_string()
    };
    format!(
        "| {n} | {} | {:.2} | {} | {} | {} | {:.1} | {crash} |",
        runs.max(1),
        ff.per_process(n),
        ff.max_sent,
        ff.max_received,
        ff.rounds,
        us(ff.latency_mean())
    )
}

#[derive(Debug, Default)]
struct Agg {
    runs: u32,
    messages: u64,
    max_sent: u32,
    max_received: u32,
    rounds: u32,
    latency: Duration,
}

impl Agg {
    fn add(&mut self, r: &AgreeRun) {
        self.runs += 1;
        self.messages += r.messages;
        self.max_sent = self.max_sent.max(r.max_sent_by_one);
        self.max_received = self.max_received.max(r.max_received_by_one);
        self.rounds = self.rounds.max(r.rounds);
        self.latency += r.latency;
    }

    fn per_process(&self, n: u32) -> f64 {
        self.messages as f64 / f64::from(self.runs.max(1)) / f64::from(n)
    }

    fn latency_mean(&self) -> Duration {
        self.latency / self.runs.max(1)
    }
}

/// The agreement's cost table in markdown (header included): for each `(n, runs)`,
/// failure-free: messages per process, most sent and most received by one process,
/// rounds and mean simulated latency; with the coordinator crashing half-way through its
/// proposals: most sent by one and mean latency; with an inner node crashing: mean
/// latency ([`agree_row`]; model of [`AgreeSimConfig::new`]: delays 5–50 µs, 100 ns per message sent,
/// detection 1–2 ms).
///
/// # Panics
/// If a run violates a property (see [`AgreeSim::check`]).
pub fn agree_table(sizes: &[(u32, u32)], base_seed: u64) -> String {
    let mut out = String::from(
        "| n | runs | msgs / process | most sent by one | most received by one | rounds | latency (µs) | \
         most sent by one, root crash | latency, root crash (ms) | latency, inner crash (ms) |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &(n, runs) in sizes {
        let _ = writeln!(out, "{}", agree_row(n, runs, base_seed));
    }
    out
}
