//! Cluster simulations of the ring detector (T-FD, docs/REQUIREMENTS.md): completeness, accuracy,
//! detection-time and hop bounds, crashes at every step, stop/resume exclusion, and the
//! scaling table n = 8 … 65,536.
//!
//! Bounds checked (η = period, δ = timeout, d = longest message delay, H = ⌈log2 n⌉):
//! - one crash at `c`: every survivor learns it in `[c + δ − η, c + δ + (H + 2)·d]`
//!   (the observer's last heartbeat arrives by `c + d`, so it declares by `c + δ + d`;
//!   the broadcast then needs at most `H + 1` overlay hops of at most `d` each). This is
//!   within T-FD's `δ + η + propagation` since `d < η`.
//! - `k` consecutive ring neighbours crashing together: declared one after the other, one
//!   fresh window each, so within `c + k·δ + (H + 2)·d`.
//! - with equal delays the first copy of a notice travels a shortest overlay path:
//!   hops ≤ H + 1.

use std::time::Duration;

use runthrough_ft::sim::{ceil_log2, one_crash_run, scaling_table, Sim, SimConfig, SplitMix64};
use runthrough_ft::{Config, FtEvent, Time};

fn ms(v: u64) -> Time {
    Time::from_nanos(v * 1_000_000)
}

const DELTA: Duration = runthrough_ft::DEFAULT_HB_TIMEOUT;
const ETA: Duration = runthrough_ft::DEFAULT_HB_PERIOD;

/// Every survivor knows every rank in `down` (and nothing else was declared).
fn assert_complete(sim: &Sim, down: &[u32], ctx: &str) {
    for s in sim.survivors() {
        let f = sim.detector(s).failed();
        for &d in down {
            assert!(f.contains(d), "{ctx}: survivor {s} does not know {d} failed");
        }
        assert_eq!(f.epoch() as usize, down.len(), "{ctx}: survivor {s} knows {:?}", f.in_order());
    }
    assert!(sim.false_suspicions().is_empty(), "{ctx}: false suspicions {:?}", sim.false_suspicions());
}

fn single_crash_bound(n: u32, d_max: Duration) -> Duration {
    DELTA + d_max * (ceil_log2(n) + 2)
}

#[test]
fn no_failure_costs_heartbeats_only() {
    let n = 32;
    let mut sim = Sim::new(SimConfig::new(n, 1));
    sim.run_until(ms(1000));
    let st = sim.stats();
    assert_eq!(st.notices, 0);
    assert!(sim.records().is_empty());
    // One heartbeat per rank per period (plus the one at start).
    assert_eq!(st.heartbeats, u64::from(n) * 101);
    for r in 0..n {
        assert_eq!(sim.detector(r).observing(), Some((r + n - 1) % n));
    }
}

#[test]
fn accuracy_in_steady_state_with_delays_up_to_timeout_minus_period() {
    // Jitter up to δ − η − 5 ms: consecutive heartbeats arrive at most 95 ms apart.
    let d_max = DELTA - ETA - Duration::from_millis(5);
    for seed in 0..40 {
        let n = [2, 3, 5, 8, 17][seed as usize % 5];
        let mut sim = Sim::new(SimConfig::new(n, seed).with_delays(Duration::ZERO, d_max));
        sim.run_until(ms(3000));
        assert!(sim.records().is_empty(), "seed {seed}: suspected {:?}", sim.false_suspicions());
    }
}

#[test]
fn single_crash_completeness_and_detection_bound() {
    for seed in 0..150 {
        let n = 2 + (seed as u32 * 7) % 60;
        let cfg = SimConfig::new(n, seed);
        let (sim, victim) = one_crash_run(cfg);
        let ctx = format!("n={n} seed={seed} victim={victim}");
        assert_complete(&sim, &[victim], &ctx);
        let d = sim.detection(victim).expect("declared");
        assert_eq!(d.learnt_by, n - 1, "{ctx}");
        assert!(d.min >= DELTA - ETA, "{ctx}: {d:?}");
        assert!(d.max <= single_crash_bound(n, cfg.delay_max), "{ctx}: {d:?}");
        assert!(d.max <= DELTA + ETA + cfg.delay_max * (ceil_log2(n) + 1), "{ctx}: {d:?}");
        assert!(d.propagation_max <= cfg.delay_max * (ceil_log2(n) + 1), "{ctx}: {d:?}");
    }
}

#[test]
fn hops_bounded_by_log2_n_plus_one_with_equal_delays() {
    let d = Duration::from_micros(50);
    for (i, n) in [2u32, 3, 7, 8, 9, 31, 64, 100, 257, 1000, 2048].into_iter().enumerate() {
        for seed in 0..4 {
            let cfg = SimConfig::new(n, seed + 10 * i as u64).with_delays(d, d);
            let (sim, victim) = one_crash_run(cfg);
            let det = sim.detection(victim).expect("declared");
            assert!(u32::from(det.hops_max) <= ceil_log2(n) + 1, "n={n}: {det:?}");
            assert!(det.propagation_max <= d * (ceil_log2(n) + 1), "n={n}: {det:?}");
        }
    }
}

#[test]
fn simultaneous_crashes() {
    for seed in 0..60 {
        let mut rng = SplitMix64::new(seed);
        let n = rng.range(4, 80) as u32;
        let k = rng.range(2, u64::from(n / 2)) as u32;
        let mut victims: Vec<u32> = Vec::new();
        while victims.len() < k as usize {
            let v = rng.range(0, u64::from(n) - 1) as u32;
            if !victims.contains(&v) {
                victims.push(v);
            }
        }
        let cfg = SimConfig::new(n, seed);
        let mut sim = Sim::new(cfg);
        let c = ms(20);
        for &v in &victims {
            sim.crash_at(v, c);
        }
        // Worst case: all victims consecutive on the ring.
        sim.run_until(c + DELTA * (k + 1) + ETA);
        let ctx = format!("n={n} seed={seed} victims={victims:?}");
        assert_complete(&sim, &victims, &ctx);
        for &v in &victims {
            let d = sim.detection(v).expect("declared");
            assert!(d.max <= DELTA * k + cfg.delay_max * (ceil_log2(n) + 2) * k, "{ctx}: {v}: {d:?}");
        }
    }
}

#[test]
fn consecutive_ring_neighbours_crash_together() {
    for (n, first, k) in [(8u32, 2u32, 3u32), (16, 14, 4), (64, 60, 7), (5, 0, 4), (100, 99, 2)] {
        let cfg = SimConfig::new(n, u64::from(n));
        let mut sim = Sim::new(cfg);
        let victims: Vec<u32> = (0..k).map(|i| (first + i) % n).collect();
        let c = ms(25);
        for &v in &victims {
            sim.crash_at(v, c);
        }
        sim.run_until(c + DELTA * (k + 1));
        let ctx = format!("n={n} victims={victims:?}");
        assert_complete(&sim, &victims, &ctx);
        for &v in &victims {
            let d = sim.detection(v).expect("declared");
            assert!(d.max <= DELTA * k + cfg.delay_max * (ceil_log2(n) + 2), "{ctx}: {v}: {d:?}");
        }
        let survivor_after = (first + k) % n;
        let expect = if k == n - 1 { None } else { Some((first + n - 1) % n) };
        assert_eq!(sim.detector(survivor_after).observing(), expect, "{ctx}");
    }
}

#[test]
fn crash_of_a_rank_while_it_forwards_a_notice() {
    for seed in 0..80u64 {
        let mut rng = SplitMix64::new(seed);
        let n = rng.range(4, 200) as u32;
        let victim = rng.range(0, u64::from(n) - 1) as u32;
        let mut forwarder = rng.range(0, u64::from(n) - 1) as u32;
        if forwarder == victim {
            forwarder = (victim + 1) % n; // the observer itself dies mid-broadcast
        }
        let sends = rng.range(0, u64::from(ceil_log2(n)) + 2) as usize;
        let cfg = SimConfig::new(n, seed);
        let mut sim = Sim::new(cfg);
        sim.crash_at(victim, ms(20));
        sim.crash_while_forwarding(forwarder, sends);
        sim.run_until(ms(20) + DELTA * 3 + ETA);
        let ctx = format!("n={n} seed={seed} victim={victim} forwarder={forwarder} sends={sends}");
        assert!(sim.down_since(forwarder).is_some(), "{ctx}: forwarder crashed");
        assert_complete(&sim, &[victim, forwarder], &ctx);
    }
}

#[test]
fn crashes_at_random_times_with_slow_network() {
    // Delays up to δ/2 − 10 ms: the accuracy condition after an observer moves on
    // (a round trip to the new predecessor) still holds.
    let d_max = DELTA / 2 - Duration::from_millis(10);
    for seed in 0..40 {
        let mut rng = SplitMix64::new(seed ^ 0xabc);
        let n = rng.range(3, 40) as u32;
        let k = rng.range(1, u64::from(n) - 1) as u32;
        let cfg = SimConfig::new(n, seed).with_delays(Duration::from_micros(10), d_max);
        let mut sim = Sim::new(cfg);
        let mut victims = Vec::new();
        while victims.len() < k as usize {
            let v = rng.range(0, u64::from(n) - 1) as u32;
            if !victims.contains(&v) {
                victims.push(v);
                sim.crash_at(v, Time::from_nanos(rng.range(1_000_000, 600_000_000)));
            }
        }
        sim.run_until(ms(600) + (DELTA + d_max * 3) * (k + 1) + d_max * (ceil_log2(n) + 2));
        assert_complete(&sim, &victims, &format!("n={n} seed={seed} victims={victims:?}"));
    }
}

#[test]
fn all_but_one_crash() {
    let n = 9;
    let mut sim = Sim::new(SimConfig::new(n, 3));
    let victims: Vec<u32> = (1..n).collect();
    for &v in &victims {
        sim.crash_at(v, ms(10 + 37 * u64::from(v)));
    }
    sim.run_until(ms(2000));
    assert_complete(&sim, &victims, "all but one");
    assert_eq!(sim.detector(0).observing(), None);
    assert_eq!(sim.detector(0).successor(), None);
    assert_eq!(sim.detector(0).poll_timeout(), None);
}

#[test]
fn local_evidence_enters_the_same_path_and_beats_the_timeout() {
    let n = 256;
    let cfg = SimConfig::new(n, 5);
    let mut sim = Sim::new(cfg);
    sim.crash_at(77, ms(30));
    sim.local_failure_at(200, 77, ms(31));
    sim.run_until(ms(31) + cfg.delay_max * (ceil_log2(n) + 1));
    assert_complete(&sim, &[77], "local evidence");
    let rec = sim.record(77).expect("declared");
    assert_eq!(rec.declared_at, Some(ms(31)));
    // The observer's later timeout finds it already known: no second event anywhere.
    sim.run_until(ms(300));
    assert_complete(&sim, &[77], "later timeout");
}

#[test]
fn wrongly_suspected_running_rank_is_excluded() {
    let mut sim = Sim::new(SimConfig::new(16, 9));
    sim.local_failure_at(3, 11, ms(40));
    sim.run_until(ms(400));
    assert!(sim.excluded_at(11).is_some(), "the suspect learns and stops");
    assert_eq!(sim.false_suspicions(), vec![11]);
    for s in sim.survivors() {
        assert!(sim.detector(s).failed().contains(11));
        assert_eq!(sim.detector(s).failed().epoch(), 1);
    }
}

#[test]
fn stopped_then_resumed_rank_is_excluded_and_stays_failed() {
    for (seed, resume) in [(1u64, 200u64), (2, 131), (3, 500), (4, 2000)] {
        let n = 16;
        let mut sim = Sim::new(SimConfig::new(n, seed));
        sim.stop_at(5, ms(20), Some(ms(resume)));
        sim.run_until(ms(resume + 500));
        let ctx = format!("resume at {resume} ms");
        let excluded = sim.excluded_at(5).unwrap_or_else(|| panic!("{ctx}: not excluded"));
        assert!(excluded >= ms(resume), "{ctx}");
        assert!(sim.detector(5).is_excluded());
        assert_complete(&sim, &[5], &ctx);
        let d = sim.detection(5).expect("declared");
        assert!(d.max <= single_crash_bound(n, sim.config().delay_max), "{ctx}: {d:?}");
        for s in sim.survivors() {
            assert_eq!(sim.detector(s).observing(), Some(if s == 6 { 4 } else { (s + n - 1) % n }));
        }
    }
}

#[test]
fn short_stop_is_not_a_failure() {
    let mut sim = Sim::new(SimConfig::new(8, 4));
    sim.stop_at(2, ms(20), Some(ms(20) + (DELTA - ETA * 4)));
    sim.run_until(ms(1000));
    assert!(sim.records().is_empty(), "{:?}", sim.false_suspicions());
    assert!(sim.excluded_at(2).is_none());
    assert!(!sim.detector(2).is_excluded());
}

#[test]
fn same_seed_same_run() {
    let run = || {
        let (sim, v) = one_crash_run(SimConfig::new(300, 42));
        (v, sim.stats(), sim.record(v).map(|r| r.learnt.clone()))
    };
    assert_eq!(run(), run());
}

#[test]
fn excluded_event_is_the_last_word() {
    let mut sim = Sim::new(SimConfig::new(4, 1));
    sim.stop_at(1, ms(10), Some(ms(300)));
    sim.run_until(ms(600));
    let det = sim.detector(1);
    assert!(det.is_excluded());
    assert_eq!(det.poll_timeout(), None);
    let mut d = det.clone();
    d.handle_timeout(ms(700));
    assert_eq!(d.poll_event(), None::<FtEvent>);
    assert!(d.poll_transmit().is_none());
}

#[test]
fn custom_detector_parameters() {
    let cfg = Config::new(Duration::from_millis(2), Duration::from_millis(15)).unwrap();
    let mut sim = Sim::new(SimConfig::new(40, 8).with_detector(cfg));
    sim.crash_at(13, ms(7));
    sim.run_until(ms(40));
    assert_complete(&sim, &[13], "η=2ms δ=15ms");
    let d = sim.detection(13).unwrap();
    assert!(d.max <= cfg.timeout() + sim.config().delay_max * (ceil_log2(40) + 2), "{d:?}");
}

#[test]
fn n_65536_one_crash_within_bounds() {
    let n = 65_536;
    let d = Duration::from_micros(50);
    let cfg = SimConfig::new(n, 2024).with_delays(d, d);
    let (sim, victim) = one_crash_run(cfg);
    let det = sim.detection(victim).expect("declared");
    assert_eq!(det.learnt_by, n - 1, "{det:?}");
    assert!(sim.false_suspicions().is_empty());
    assert!(u32::from(det.hops_max) <= ceil_log2(n) + 1, "{det:?}");
    assert!(det.min >= DELTA - ETA, "{det:?}");
    assert!(det.max <= single_crash_bound(n, d), "{det:?}");
    assert!(det.propagation_max <= d * (ceil_log2(n) + 1), "{det:?}");
}

#[test]
fn scaling_table_8_to_65536() {
    let sizes: Vec<(u32, u32)> = (3..=16).map(|k| (1u32 << k, if k <= 10 { 3 } else { 1 })).collect();
    let table = scaling_table(&sizes, 1);
    println!("{table}");
    assert!(!table.contains("| NO |"), "{table}");
}
