//! Losing a whole host in the detector simulator (R42: node loss in one timeout).
//!
//! A job of `n` ranks placed by slot on hosts of `per_host` ranks (host `h` holds ranks
//! `h·per_host ..`); one host, picked at random, loses all its ranks at the same instant.
//! [`node_loss_run`] runs the ring detector on that job either in rank order (the ring
//! the detector used before [`Ring::interleaving`]) or interleaved, and measures at every
//! survivor when it knew *every* rank of the host failed, and how far apart the first
//! and the last of them arrived there (the host's loss reaches the application as one
//! event when that spread is short). [`node_loss_row`] gives the rows of the table in
//! `bench/RESULTS.md` (`cargo run --release -p runthrough-ft --example ft_node_loss_table`).

use std::time::Duration;

use crate::ring::Ring;
use crate::sim::{Sim, SimConfig, SplitMix64};
use crate::time::Time;

/// The outcome of one host's loss.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLossRun {
    /// Slowest survivor: when it knew every rank of the host failed, from the crash.
    pub all_known_after: Duration,
    /// Largest spread at one survivor between learning the host's first and last rank.
    pub spread: Duration,
    /// Notices sent in the run, divided by the job's size.
    pub notices_per_rank: f64,
    /// Every survivor learnt every rank of the host, and nobody was falsely suspected.
    pub complete: bool,
}

/// Hosts of `per_host` ranks placed by slot: the host of each of `n` ranks.
pub fn by_slot(n: u32, per_host: u32) -> Vec<u32> {
    (0..n).map(|r| r / per_host.max(1)).collect()
}

/// One run: `n` ranks by slot on hosts of `per_host`, the ring interleaved or in rank
/// order, one random host crashing at a random time in `[20, 30)` ms; the simulation
/// runs until every survivor knows the host's every rank (or `limit` after the crash).
///
/// # Panics
/// If `per_host` does not divide `n` or there is a single host (nobody would survive).
pub fn node_loss_run(cfg: SimConfig, per_host: u32, interleave: bool, limit: Duration) -> NodeLossRun {
    let n = cfg.n;
    assert!(per_host > 0 && n.is_multiple_of(per_host) && n / per_host > 1, "{n} ranks on hosts of {per_host}");
    let hosts = by_slot(n, per_host);
    let ring = if interleave { Ring::interleaving(&hosts) } else { Ring::RankOrder };
    let mut pick = SplitMix64::new(cfg.seed ^ 0x0bad_5eed);
    let host = pick.range(0, u64::from(n / per_host) - 1) as u32;
    let crash = Time::from_nanos(pick.range(20_000_000, 29_999_999));
    let dead: Vec<u32> = (host * per_host..(host + 1) * per_host).collect();
    let mut sim = Sim::on_ring(cfg, ring);
    for &r in &dead {
        sim.crash_at(r, crash);
    }
    // Advance in steps of one timeout until every survivor knows every dead rank.
    let step = cfg.detector.timeout();
    let mut t = crash;
    loop {
        t += step;
        sim.run_until(t);
        let known = dead.iter().all(|&r| sim.detection(r).is_some_and(|d| d.learnt_by == d.survivors));
        if known || t - crash >= limit {
            break;
        }
    }
    let mut run = NodeLossRun {
        all_known_after: Duration::ZERO,
        spread: Duration::ZERO,
        notices_per_rank: sim.stats().notices as f64 / f64::from(n),
        complete: sim.false_suspicions().is_empty(),
    };
    for s in sim.survivors() {
        let mut first = Time::from_nanos(u64::MAX);
        let mut last = Time::ZERO;
        for &r in &dead {
            match sim.record(r).and_then(|rec| rec.learnt[s as usize]) {
                Some(l) => {
                    first = first.min(l.at);
                    last = last.max(l.at);
                }
                None => run.complete = false,
            }
        }
        if last >= first {
            run.all_known_after = run.all_known_after.max(last - crash);
            run.spread = run.spread.max(last - first);
        }
    }
    run
}

/// One row of the node-loss table: the worst of `runs` seeds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeLossRow {
    /// Job size.
    pub n: u32,
    /// Ranks a host.
    pub per_host: u32,
    /// Interleaved ring (else rank order).
    pub interleaved: bool,
    /// Seeds run.
    pub runs: u32,
    /// The worst run's [`NodeLossRun::all_known_after`].
    pub all_known_after: Duration,
    /// The worst run's [`NodeLossRun::spread`].
    pub spread: Duration,
    /// Mean notices per rank.
    pub notices_per_rank: f64,
    /// Every run complete.
    pub complete: bool,
}

impl NodeLossRow {
    /// The markdown header matching [`NodeLossRow::markdown`].
    pub fn markdown_header() -> &'static str {
        "| n | ranks / host | ring | runs | all of the host known everywhere (ms, worst) | in timeouts δ | \
         spread at one survivor (ms, worst) | notices / rank | complete |\n\
         |---:|---:|:---|---:|---:|---:|---:|---:|:---:|"
    }

    /// This row as markdown, with δ for the timeouts column.
    pub fn markdown(&self, delta: Duration) -> String {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        format!(
            "| {} | {} | {} | {} | {:.1} | {:.2} | {:.1} | {:.1} | {} |",
            self.n,
            self.per_host,
            if self.interleaved { "interleaved" } else { "rank order" },
            self.runs,
            ms(self.all_known_after),
            self.all_known_after.as_secs_f64() / delta.as_secs_f64(),
            ms(self.spread),
            self.notices_per_rank,
            if self.complete { "yes" } else { "NO" }
        )
    }
}

/// The worst of [`node_loss_run`] over seeds `base_seed..base_seed + runs` with
/// [`SimConfig::new`] (η = 10 ms, δ = 100 ms, delays 5–50 µs).
pub fn node_loss_row(n: u32, per_host: u32, interleaved: bool, runs: u32, base_seed: u64) -> NodeLossRow {
    let mut row = NodeLossRow {
        n,
        per_host,
        interleaved,
        runs,
        all_known_after: Duration::ZERO,
        spread: Duration::ZERO,
        notices_per_rank: 0.0,
        complete: true,
    };
    for seed in base_seed..base_seed + u64::from(runs) {
        let cfg = SimConfig::new(n, seed);
        let limit = cfg.detector.timeout() * (per_host + 2);
        let r = node_loss_run(cfg, per_host, interleaved, limit);
        row.all_known_after = row.all_known_after.max(r.all_known_after);
        row.spread = row.spread.max(r.spread);
        row.notices_per_rank += r.notices_per_rank / f64::from(runs.max(1));
        row.complete &= r.complete;
    }
    row
}
