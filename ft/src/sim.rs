//! A deterministic cluster simulator for the detector (the quinn-proto `tests/util.rs`
//! `Pair` idea, scaled to a whole job).
//!
//! Parts: [`SimConfig`] (job size, detector parameters, delay range, seed), [`Sim`] (one
//! [`Detector`] per rank, a virtual clock, a [`BinaryHeap`] of timed events, a
//! [`SplitMix64`] for per-message delays, and a schedule of crashes, stops/resumes and local
//! evidence), the measurements ([`FailureRecord`], [`Learnt`], [`Detection`], [`SimStats`])
//! and [`scaling_table`], which produces the `n = 8 … 65,536` table for `bench/RESULTS.md`.
//!
//! Model: messages between running ranks are delivered after a delay drawn uniformly from
//! `[delay_min, delay_max]` (so they may be reordered). A crashed rank stops sending and
//! receiving; messages already in flight from it are still delivered. A stopped rank
//! (SIGSTOP) processes nothing: messages to it wait, and on resume it first services its
//! (overdue) timers, then the waiting messages — the order least favourable to accuracy.
//! A rank that gets [`FtEvent::Excluded`] exits. Same seed, same run.

use std::cmp::{Ordering, Reverse};
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

use crate::detector::{Config, Detector};
use crate::event::FtEvent;
use crate::msg::Msg;
use crate::ring::Ring;
use crate::time::Time;

/// Sebastiano Vigna's SplitMix64: a tiny, seedable, good-enough PRNG.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi` (`lo` if `hi < lo`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        lo + self.next_u64() % (span + 1)
    }

    /// Uniform duration in `lo..=hi`, at nanosecond resolution.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let ns = |d: Duration| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.range(ns(lo), ns(hi)))
    }
}

/// Parameters of a simulated job.
#[derive(Debug, Clone, Copy)]
pub struct SimConfig {
    /// Number of ranks.
    pub n: u32,
    /// Detector parameters, the same on every rank.
    pub detector: Config,
    /// Shortest message delay.
    pub delay_min: Duration,
    /// Longest message delay.
    pub delay_max: Duration,
    /// Seed of the delay generator.
    pub seed: u64,
}

impl SimConfig {
    /// `n` ranks, default detector (η = 10 ms, δ = 100 ms), cluster-like delays of
    /// 5–50 µs.
    pub fn new(n: u32, seed: u64) -> Self {
        SimConfig {
            n,
            detector: Config::default(),
            delay_min: Duration::from_micros(5),
            delay_max: Duration::from_micros(50),
            seed,
        }
    }

    /// The same with delays drawn from `min..=max`.
    pub fn with_delays(mut self, min: Duration, max: Duration) -> Self {
        self.delay_min = min;
        self.delay_max = max;
        self
    }

    /// The same with detector parameters `detector`.
    pub fn with_detector(mut self, detector: Config) -> Self {
        self.detector = detector;
        self
    }
}

/// When and how a rank learnt of a failure: its first [`FtEvent::Failed`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learnt {
    /// Virtual time of the event.
    pub at: Time,
    /// Overlay hops of the notice copy that brought it (0: declared here).
    pub hops: u16,
}

/// Everything measured about one declared rank.
#[derive(Debug, Clone)]
pub struct FailureRecord {
    /// The declared rank.
    pub rank: u32,
    /// When it crashed or was stopped; `None` if it was running when first declared
    /// (a false suspicion).
    pub failed_at: Option<Time>,
    /// When the first rank declared it (timeout or local evidence).
    pub declared_at: Option<Time>,
    /// Per rank: when it learnt the failure.
    pub learnt: Vec<Option<Learnt>>,
}

/// Detection of one failure as seen by the survivors.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Detection {
    /// Survivors (ranks never crashed, stopped or excluded).
    pub survivors: u32,
    /// Survivors that learnt the failure.
    pub learnt_by: u32,
    /// First declaration − failure time.
    pub declared_after: Duration,
    /// Fastest survivor: learnt − failure time.
    pub min: Duration,
    /// Mean over the survivors that learnt.
    pub avg: Duration,
    /// Slowest survivor.
    pub max: Duration,
    /// Slowest survivor: learnt − first declaration (the broadcast's time).
    pub propagation_max: Duration,
    /// Most hops of a first-arriving copy. With unequal delays a longer path can win
    /// the race, so this may exceed the overlay's diameter; the time bound rests on the
    /// shortest path (see [`crate::detector`]).
    pub hops_max: u16,
}

/// Message counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Heartbeats sent.
    pub heartbeats: u64,
    /// Notices sent.
    pub notices: u64,
    /// Messages that reached a crashed or exited rank.
    pub dropped: u64,
}

#[derive(Debug)]
enum Status {
    Running,
    Crashed,
    Stopped { waiting: Vec<(u32, Msg)> },
    Exited,
}

#[derive(Debug)]
enum Kind {
    Deliver { from: u32, to: u32, msg: Msg },
    Timer { rank: u32, generation: u32 },
    Crash { rank: u32 },
    Stop { rank: u32 },
    Resume { rank: u32 },
    LocalEvidence { observer: u32, rank: u32 },
}

/// A scheduled simulator event, ordered by time then insertion (deterministic ties).
/// Shared by the detector and agreement simulators.
#[derive(Debug)]
pub(crate) struct Ev<K> {
    pub(crate) at: Time,
    pub(crate) seq: u64,
    pub(crate) kind: K,
}

impl<K> PartialEq for Ev<K> {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl<K> Eq for Ev<K> {}
impl<K> PartialOrd for Ev<K> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<K> Ord for Ev<K> {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// A simulated job: `n` detectors on one virtual clock. See the [module docs](self).
#[derive(Debug)]
pub struct Sim {
    cfg: SimConfig,
    now: Time,
    rng: SplitMix64,
    dets: Vec<Detector>,
    status: Vec<Status>,
    down_since: Vec<Option<Time>>,
    excluded_at: Vec<Option<Time>>,
    generation: Vec<u32>,
    scheduled: Vec<Option<Time>>,
    heap: BinaryHeap<Reverse<Ev<Kind>>>,
    seq: u64,
    /// Ranks that crash part-way through the burst of sends after their first failure
    /// event: rank → sends allowed (armed), and whether the burst has begun.
    midway: HashMap<u32, (usize, bool)>,
    records: Vec<FailureRecord>,
    record_of: HashMap<u32, usize>,
    stats: SimStats,
}

impl Sim {
    /// A job of `cfg.n` ranks whose detectors start at time zero.
    ///
    /// # Panics
    /// If `cfg.n` is zero.
    pub fn new(cfg: SimConfig) -> Sim {
        Sim::on_ring(cfg, Ring::RankOrder)
    }

    /// [`Sim::new`] with every detector on `ring` ([`Detector::on_ring`]).
    ///
    /// # Panics
    /// If `cfg.n` is zero or `ring` does not order `cfg.n` ranks.
    pub fn on_ring(cfg: SimConfig, ring: Ring) -> Sim {
        assert!(cfg.n > 0, "a job has at least one rank");
        let n = cfg.n as usize;
        let mut sim = Sim {
            cfg,
            now: Time::ZERO,
            rng: SplitMix64::new(cfg.seed),
            dets: (0..cfg.n).map(|r| Detector::on_ring(r, cfg.n, cfg.detector, Time::ZERO, ring.clone())).collect(),
            status: (0..n).map(|_| Status::Running).collect(),
            down_since: vec![None; n],
            excluded_at: vec![None; n],
            generation: vec![0; n],
            scheduled: vec![None; n],
            heap: BinaryHeap::new(),
            seq: 0,
            midway: HashMap::new(),
            records: Vec::new(),
            record_of: HashMap::new(),
            stats: SimStats::default(),
        };
        for r in 0..cfg.n {
            sim.after(r, None);
        }
        sim
    }

    fn push(&mut self, at: Time, kind: Kind) {
        self.seq += 1;
        self.heap.push(Reverse(Ev { at, seq: self.seq, kind }));
    }

    /// Crashes `rank` at `at` (fail-stop: it never sends or receives again).
    pub fn crash_at(&mut self, rank: u32, at: Time) {
        self.push(at, Kind::Crash { rank });
    }

    /// Crashes `rank` in the middle of the burst of messages it sends right after its
    /// first failure event (while it forwards that notice): it sends `after_sends` of them
    /// (or the whole burst, if shorter), then crashes.
    pub fn crash_while_forwarding(&mut self, rank: u32, after_sends: usize) {
        self.midway.insert(rank, (after_sends, false));
    }

    /// Stops `rank` (SIGSTOP) at `at`, and resumes it (SIGCONT) at `resume_at` if given.
    pub fn stop_at(&mut self, rank: u32, at: Time, resume_at: Option<Time>) {
        self.push(at, Kind::Stop { rank });
        if let Some(r) = resume_at {
            self.push(r, Kind::Resume { rank });
        }
    }

    /// At `at`, `observer` gets local evidence (a CQ error, a dead shm peer) that `rank`
    /// failed.
    pub fn local_failure_at(&mut self, observer: u32, rank: u32, at: Time) {
        self.push(at, Kind::LocalEvidence { observer, rank });
    }

    /// Runs every event up to and including `end`; the clock then reads `end`.
    pub fn run_until(&mut self, end: Time) {
        while self.heap.peek().is_some_and(|Reverse(e)| e.at <= end) {
            let Some(Reverse(ev)) = self.heap.pop() else { break };
            self.now = self.now.max(ev.at);
            self.process(ev.kind);
        }
        self.now = self.now.max(end);
    }

    fn process(&mut self, kind: Kind) {
        let now = self.now;
        match kind {
            Kind::Deliver { from, to, msg } => self.deliver(from, to, msg),
            Kind::Timer { rank, generation } => {
                let r = rank as usize;
                if generation == self.generation[r] && matches!(self.status[r], Status::Running) {
                    self.scheduled[r] = None;
                    self.dets[r].handle_timeout(now);
                    self.after(rank, None);
                }
            }
            Kind::Crash { rank } => {
                let r = rank as usize;
                if matches!(self.status[r], Status::Running | Status::Stopped { .. }) {
                    self.status[r] = Status::Crashed;
                    self.down_since[r].get_or_insert(now);
                }
            }
            Kind::Stop { rank } => {
                let r = rank as usize;
                if matches!(self.status[r], Status::Running) {
                    self.status[r] = Status::Stopped { waiting: Vec::new() };
                    self.down_since[r].get_or_insert(now);
                }
            }
            Kind::Resume { rank } => {
                let r = rank as usize;
                if let Status::Stopped { waiting } = std::mem::replace(&mut self.status[r], Status::Running) {
                    self.generation[r] += 1;
                    self.scheduled[r] = None;
                    if self.dets[r].poll_timeout().is_some_and(|t| t <= now) {
                        self.dets[r].handle_timeout(now);
                    }
                    self.after(rank, None);
                    for (from, msg) in waiting {
                        self.deliver(from, rank, msg);
                    }
                }
            }
            Kind::LocalEvidence { observer, rank } => {
                if matches!(self.status[observer as usize], Status::Running) {
                    self.dets[observer as usize].handle_local_failure(rank, now);
                    self.after(observer, None);
                }
            }
        }
    }

    fn deliver(&mut self, from: u32, to: u32, msg: Msg) {
        let t = to as usize;
        match &mut self.status[t] {
            Status::Running => {
                self.dets[t].handle_message(from, msg, self.now);
                self.after(to, Some(msg));
            }
            Status::Stopped { waiting } => waiting.push((from, msg)),
            Status::Crashed | Status::Exited => self.stats.dropped += 1,
        }
    }

    fn record_index(&mut self, rank: u32) -> usize {
        if let Some(&i) = self.record_of.get(&rank) {
            return i;
        }
        let n = self.cfg.n as usize;
        self.records.push(FailureRecord {
            rank,
            failed_at: self.down_since.get(rank as usize).copied().flatten(),
            declared_at: None,
            learnt: vec![None; n],
        });
        self.record_of.insert(rank, self.records.len() - 1);
        self.records.len() - 1
    }

    /// Drains `rank`'s events and transmits after it handled `cause` (a message) or a
    /// timer / local evidence (`None`), and re-arms its timer.
    fn after(&mut self, rank: u32, cause: Option<Msg>) {
        let r = rank as usize;
        let now = self.now;
        let mut failed_event = false;
        while let Some(ev) = self.dets[r].poll_event() {
            match ev {
                FtEvent::Failed { rank: x, .. } => {
                    failed_event = true;
                    let hops = match cause {
                        Some(Msg::Notice { failed, hops }) if failed == x => hops,
                        _ => 0,
                    };
                    let i = self.record_index(x);
                    let rec = &mut self.records[i];
                    rec.learnt[r].get_or_insert(Learnt { at: now, hops });
                    if hops == 0 {
                        rec.declared_at.get_or_insert(now);
                    }
                }
                FtEvent::Excluded => {
                    self.status[r] = Status::Exited;
                    self.excluded_at[r].get_or_insert(now);
                    self.down_since[r].get_or_insert(now);
                }
                // The simulated detectors run without a witness.
                FtEvent::Suspected { .. } => {}
            }
        }
        let mut budget = None;
        if failed_event {
            if let Some((sends, begun)) = self.midway.get_mut(&rank) {
                if !*begun {
                    *begun = true;
                    budget = Some(*sends);
                }
            }
        }
        while let Some((to, msg)) = self.dets[r].poll_transmit() {
            if !matches!(self.status[r], Status::Running) {
                continue;
            }
            if let Some(b) = budget.as_mut() {
                if *b == 0 {
                    self.status[r] = Status::Crashed;
                    self.down_since[r].get_or_insert(now);
                    continue;
                }
                *b -= 1;
            }
            match msg {
                Msg::Heartbeat => self.stats.heartbeats += 1,
                Msg::Notice { .. } => self.stats.notices += 1,
            }
            let delay = self.rng.duration(self.cfg.delay_min, self.cfg.delay_max);
            self.push(now + delay, Kind::Deliver { from: rank, to, msg });
        }
        if budget.is_some() && matches!(self.status[r], Status::Running) {
            // The burst was shorter than the budget: crash at its end.
            self.status[r] = Status::Crashed;
            self.down_since[r].get_or_insert(now);
        }
        if !matches!(self.status[r], Status::Running) {
            self.generation[r] += 1;
            self.scheduled[r] = None;
            return;
        }
        let next = self.dets[r].poll_timeout();
        if next != self.scheduled[r] {
            self.generation[r] += 1;
            self.scheduled[r] = next;
            if let Some(t) = next {
                let generation = self.generation[r];
                self.push(t.max(now), Kind::Timer { rank, generation });
            }
        }
    }

    /// The virtual clock.
    pub fn now(&self) -> Time {
        self.now
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Rank `rank`'s detector.
    ///
    /// # Panics
    /// If `rank` is outside the job.
    pub fn detector(&self, rank: u32) -> &Detector {
        &self.dets[rank as usize]
    }

    /// Whether `rank` was never crashed, stopped or excluded.
    pub fn is_survivor(&self, rank: u32) -> bool {
        self.down_since.get(rank as usize).is_some_and(Option::is_none)
    }

    /// The ranks never crashed, stopped or excluded.
    pub fn survivors(&self) -> Vec<u32> {
        (0..self.cfg.n).filter(|&r| self.is_survivor(r)).collect()
    }

    /// When `rank` got [`FtEvent::Excluded`].
    pub fn excluded_at(&self, rank: u32) -> Option<Time> {
        self.excluded_at.get(rank as usize).copied().flatten()
    }

    /// When `rank` crashed, stopped or was excluded (the first of these).
    pub fn down_since(&self, rank: u32) -> Option<Time> {
        self.down_since.get(rank as usize).copied().flatten()
    }

    /// One record per rank declared failed anywhere, in order of first declaration.
    pub fn records(&self) -> &[FailureRecord] {
        &self.records
    }

    /// The record of `rank`, if it was declared failed.
    pub fn record(&self, rank: u32) -> Option<&FailureRecord> {
        self.record_of.get(&rank).map(|&i| &self.records[i])
    }

    /// Ranks declared failed while they were running (false suspicions).
    pub fn false_suspicions(&self) -> Vec<u32> {
        self.records.iter().filter(|r| r.failed_at.is_none()).map(|r| r.rank).collect()
    }

    /// Message counts.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// Detection of `rank`'s failure by the survivors; `None` if it never failed or was
    /// never declared.
    pub fn detection(&self, rank: u32) -> Option<Detection> {
        let rec = self.record(rank)?;
        let failed_at = rec.failed_at?;
        let declared_at = rec.declared_at?;
        let survivors = self.survivors();
        let mut d = Detection {
            survivors: survivors.len() as u32,
            learnt_by: 0,
            declared_after: declared_at - failed_at,
            min: Duration::MAX,
            avg: Duration::ZERO,
            max: Duration::ZERO,
            propagation_max: Duration::ZERO,
            hops_max: 0,
        };
        let mut sum = 0u128;
        for &s in &survivors {
            let Some(l) = rec.learnt[s as usize] else { continue };
            let t = l.at - failed_at;
            d.learnt_by += 1;
            sum += t.as_nanos();
            d.min = d.min.min(t);
            d.max = d.max.max(t);
            d.propagation_max = d.propagation_max.max(l.at - declared_at);
            d.hops_max = d.hops_max.max(l.hops);
        }
        if d.learnt_by > 0 {
            d.avg = Duration::from_nanos((sum / u128::from(d.learnt_by)) as u64);
        } else {
            d.min = Duration::ZERO;
        }
        Some(d)
    }
}

/// ⌈log2 n⌉ (0 for n ≤ 1).
pub fn ceil_log2(n: u32) -> u32 {
    if n <= 1 {
        0
    } else {
        32 - (n - 1).leading_zeros()
    }
}

/// One row of the scaling table: one crash per run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalingRow {
    /// Job size.
    pub n: u32,
    /// Runs (seeds) with random delays.
    pub runs: u32,
    /// ⌈log2 n⌉ + 1, the hop bound.
    pub hop_bound: u32,
    /// Most hops of a first-arriving copy in the run with equal delays, where the first
    /// copy travels a shortest overlay path.
    pub hops_equal_delays: u16,
    /// Most hops of a first-arriving copy over the random-delay runs (a longer path may
    /// win the race).
    pub hops_random_delays: u16,
    /// Fastest survivor over the random-delay runs: learnt − crash.
    pub detect_min: Duration,
    /// Mean over survivors and random-delay runs.
    pub detect_avg: Duration,
    /// Slowest survivor over the random-delay runs.
    pub detect_max: Duration,
    /// Slowest broadcast (learnt − first declaration) over the random-delay runs.
    pub propagation_max: Duration,
    /// `propagation_max` in units of the longest message delay: the hops it is worth.
    pub propagation_in_max_delays: f64,
    /// Notices sent per random-delay run, divided by n.
    pub notices_per_rank: f64,
    /// Whether every survivor learnt the crash in every run and nobody was falsely suspected.
    pub complete: bool,
}

impl ScalingRow {
    /// The markdown table header matching [`ScalingRow::markdown`].
    pub fn markdown_header() -> &'static str {
        "| n | runs | hops max, equal delays | hops max, random delays | ⌈log2 n⌉+1 | detect min (ms) | \
         detect avg (ms) | detect max (ms) | broadcast max (ms) | broadcast max / d_max | notices / rank | \
         complete |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---:|"
    }

    /// This row as a markdown table row.
    pub fn markdown(&self) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "| {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {:.1} | {:.1} | {} |",
            self.n,
            self.runs,
            self.hops_equal_delays,
            self.hops_random_delays,
            self.hop_bound,
            ms(self.detect_min),
            ms(self.detect_avg),
            ms(self.detect_max),
            ms(self.propagation_max),
            self.propagation_in_max_delays,
            self.notices_per_rank,
            if self.complete { "yes" } else { "NO" }
        )
    }
}

/// One crash of a random rank at a random time in `[20, 30)` ms, run until
/// crash + δ + η + 5 ms; returns the simulator afterwards and the victim.
pub fn one_crash_run(cfg: SimConfig) -> (Sim, u32) {
    let mut pick = SplitMix64::new(cfg.seed ^ 0x5eed_cafe);
    let victim = pick.range(0, u64::from(cfg.n) - 1) as u32;
    let crash = Time::from_nanos(pick.range(20_000_000, 29_999_999));
    let mut sim = Sim::new(cfg);
    sim.crash_at(victim, crash);
    sim.run_until(crash + cfg.detector.timeout() + cfg.detector.period() + Duration::from_millis(5));
    (sim, victim)
}

/// Runs [`one_crash_run`] for `n` ranks on `runs` seeds `base_seed..` with
/// [`SimConfig::new`] (η = 10 ms, δ = 100 ms, delays 5–50 µs), plus one run with every
/// delay 50 µs for the hop count of shortest paths. Returns the aggregated row.
pub fn scaling_row(n: u32, runs: u32, base_seed: u64) -> ScalingRow {
    let mut row = ScalingRow {
        n,
        runs,
        hop_bound: ceil_log2(n) + 1,
        hops_equal_delays: 0,
        hops_random_delays: 0,
        detect_min: Duration::MAX,
        detect_avg: Duration::ZERO,
        detect_max: Duration::ZERO,
        propagation_max: Duration::ZERO,
        propagation_in_max_delays: 0.0,
        notices_per_rank: 0.0,
        complete: true,
    };
    let equal = Duration::from_micros(50);
    let (sim, victim) = one_crash_run(SimConfig::new(n, base_seed).with_delays(equal, equal));
    match sim.detection(victim) {
        Some(d) => {
            row.complete &= d.learnt_by == d.survivors && sim.false_suspicions().is_empty();
            row.hops_equal_delays = d.hops_max;
        }
        None => row.complete = n == 1,
    }
    let mut sum = 0u128;
    let mut count = 0u128;
    let mut notices = 0u64;
    let mut d_max = Duration::ZERO;
    for seed in base_seed..base_seed + u64::from(runs) {
        let cfg = SimConfig::new(n, seed);
        d_max = cfg.delay_max;
        let (sim, victim) = one_crash_run(cfg);
        notices += sim.stats().notices;
        row.complete &= sim.false_suspicions().is_empty();
        match sim.detection(victim) {
            Some(d) => {
                row.complete &= d.learnt_by == d.survivors;
                row.hops_random_delays = row.hops_random_delays.max(d.hops_max);
                row.detect_min = row.detect_min.min(d.min);
                row.detect_max = row.detect_max.max(d.max);
                row.propagation_max = row.propagation_max.max(d.propagation_max);
                sum += d.avg.as_nanos() * u128::from(d.learnt_by);
                count += u128::from(d.learnt_by);
            }
            None => row.complete = n == 1,
        }
    }
    match sum.checked_div(count) {
        Some(avg) => row.detect_avg = Duration::from_nanos(avg as u64),
        None => row.detect_min = Duration::ZERO,
    }
    if !d_max.is_zero() {
        row.propagation_in_max_delays = row.propagation_max.as_secs_f64() / d_max.as_secs_f64();
    }
    row.notices_per_rank = notices as f64 / f64::from(runs.max(1)) / f64::from(n);
    row
}

/// [`scaling_row`] for each `(n, runs)`, as a markdown table (header included).
pub fn scaling_table(sizes: &[(u32, u32)], base_seed: u64) -> String {
    let mut out = String::from(ScalingRow::markdown_header());
    for &(n, runs) in sizes {
        out.push('\n');
        out.push_str(&scaling_row(n, runs, base_seed).markdown());
    }
    out.push('\n');
    out
}
