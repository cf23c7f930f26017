//! Simulations of the fault-tolerant agreement (R19, R24, R29): uniform agreement,
//! validity and termination with crashes injected at every step — before, while and after
//! each message a participant sends, the coordinator's crash, cascading coordinator
//! crashes, crashes right after deciding, failures before the agreement — for n = 1..=16
//! over many seeds, and failure-free / one-crash runs at n = 256 … 65,536.

use std::time::Duration;

use runthrough_ft::agree_sim::{agree_table, AgreeRun, AgreeSim, AgreeSimConfig};
use runthrough_ft::sim::SplitMix64;
use runthrough_ft::Time;

fn run(sim: &mut AgreeSim, ctx: &str) -> AgreeRun {
    sim.run();
    sim.check().unwrap_or_else(|e| panic!("{ctx}: {e}"))
}

/// Messages a participant sends in a failure-free run (to bound the crash points).
fn sends_bound(n: u32) -> u32 {
    2 * n + 4
}

#[test]
fn failure_free_costs_four_messages_per_process_and_four_rounds() {
    for n in 1..=16u32 {
        for seed in 0..40 {
            let cfg = AgreeSimConfig::new(n, seed);
            let mut sim = AgreeSim::new(cfg);
            let r = run(&mut sim, &format!("n={n} seed={seed}"));
            assert_eq!(r.survivors, n);
            assert_eq!(r.decided, n);
            assert_eq!(r.messages, 4 * u64::from(n - 1), "n={n}");
            assert_eq!(r.rounds, if n == 1 { 0 } else { 4 });
            assert_eq!(r.max_sent_by_one, 2 * (n - 1));
            assert!(r.decision.failed.is_empty());
            assert_eq!(sim.dropped(), 0);
        }
    }
}

#[test]
fn one_crash_at_every_send_of_every_participant() {
    for n in 1..=16u32 {
        let victims: Vec<u32> = if n <= 8 { (0..n).collect() } else { vec![0, 1, 2, n / 2, n - 2, n - 1] };
        for &v in &victims {
            for k in 0..=sends_bound(n) {
                for seed in 0..3 {
                    let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed * 1000 + u64::from(k)));
                    sim.crash_after_sends(v, k);
                    let ctx = format!("n={n} victim={v} after {k} sends seed={seed}");
                    let r = run(&mut sim, &ctx);
                    if !sim.is_survivor(v) {
                        assert_eq!(r.survivors, n - 1, "{ctx}");
                    }
                }
            }
            for seed in 0..5 {
                let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
                sim.crash_after_decision(v);
                let ctx = format!("n={n} victim={v} after deciding seed={seed}");
                let r = run(&mut sim, &ctx);
                assert_eq!(r.decided, n, "{ctx}: the victim decided before crashing");
            }
        }
    }
}

#[test]
fn coordinator_decides_and_crashes_before_any_commit_leaves() {
    for n in 2..=16u32 {
        for seed in 0..20 {
            let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
            sim.crash_after_decision(0);
            let ctx = format!("n={n} seed={seed}");
            let r = run(&mut sim, &ctx);
            assert!(!sim.is_survivor(0));
            // The crashed coordinator's decision is the survivors' (checked by `check`),
            // and its value was adopted, not recomputed: nobody knew 0 failed at entry,
            // so the failed set is empty although 0 is dead by the decision.
            assert_eq!(sim.decision(0), Some(&r.decision), "{ctx}");
            assert!(r.decision.failed.is_empty(), "{ctx}: {:?}", r.decision);
        }
    }
}

#[test]
fn cascading_coordinator_crashes_at_random_steps() {
    let mut rng = SplitMix64::new(0xc0ffee);
    for n in 2..=16u32 {
        for seed in 0..150 {
            let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
            // The first `m` coordinators crash, each at a random step of its own.
            let m = 1 + rng.range(0, u64::from(n - 1)) as u32;
            let mut plan = Vec::new();
            for p in 0..m {
                plan.push(sim.crash_randomly(p, &mut rng, sends_bound(n), Duration::from_nanos(5_000_000)));
            }
            run(&mut sim, &format!("n={n} seed={seed} plan={plan:?}"));
        }
    }
}

#[test]
fn random_crash_storms_including_all_but_one_and_all() {
    let mut rng = SplitMix64::new(7);
    for seed in 0..3000u64 {
        let n = 1 + (seed % 16) as u32;
        let mut cfg = AgreeSimConfig::new(n, seed);
        if seed % 3 == 0 {
            // Detection faster than messages: reports race proposals.
            cfg.notify_min = Duration::from_micros(1);
            cfg.notify_max = Duration::from_micros(60);
        }
        let mut sim = AgreeSim::new(cfg);
        let crashes = rng.range(0, u64::from(n)) as u32;
        let mut plan = Vec::new();
        for _ in 0..crashes {
            let p = rng.range(0, u64::from(n - 1)) as u32;
            match rng.range(0, 3) {
                0 => {
                    let k = rng.range(0, u64::from(sends_bound(n))) as u32;
                    sim.crash_after_sends(p, k);
                    plan.push(format!("{p}@send{k}"));
                }
                1 => {
                    sim.crash_after_decision(p);
                    plan.push(format!("{p}@decide"));
                }
                _ => {
                    let t = Time::from_nanos(rng.range(0, 3_000_000));
                    sim.crash_at(p, t);
                    plan.push(format!("{p}@{t}"));
                }
            }
        }
        if seed % 5 == 0 {
            let p = rng.range(0, u64::from(n - 1)) as u32;
            sim.failed_before(p);
            plan.push(format!("{p}@before"));
        }
        run(&mut sim, &format!("n={n} seed={seed} plan={plan:?}"));
    }
}

#[test]
fn failures_known_at_entry_are_in_the_decision() {
    for n in 3..=16u32 {
        for seed in 0..30 {
            let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
            sim.failed_before(n - 1);
            sim.failed_before(0);
            let r = run(&mut sim, &format!("n={n} seed={seed}"));
            assert_eq!(r.survivors, n - 2);
            let ranks = sim.participants().ranks();
            let mut want = vec![ranks[0], ranks[n as usize - 1]];
            want.sort_unstable();
            // Both failed before anyone entered; the coordinator that proposes (1) knows
            // them by then or counts them as failed when it stops waiting for them.
            assert_eq!(r.decision.failed, want, "n={n} seed={seed}");
        }
    }
}

#[test]
fn large_n_failure_free_and_with_crashes() {
    for (n, seeds) in [(256u32, 4u64), (4096, 2), (65_536, 1)] {
        for seed in 0..seeds {
            let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
            let r = run(&mut sim, &format!("n={n} seed={seed}"));
            // A tree of fan-out 32: depth 2 at 256, 3 at 4096, 4 at 65,536.
            let depth = [(256, 2), (4096, 3), (65_536, 4)].iter().find(|(m, _)| *m == n).unwrap().1;
            assert_eq!((r.decided, r.rounds, r.messages), (n, 4 * depth, 4 * u64::from(n - 1)));
            assert!(r.max_sent_by_one <= 66 && r.max_received_by_one <= 66, "{r:?}");
            println!(
                "n={n} failure-free: {} msgs ({:.2}/process), {} rounds, {:?}",
                r.messages,
                r.messages as f64 / f64::from(n),
                r.rounds,
                r.latency
            );

            // The coordinator dies half-way through its proposals (to its 32 children);
            // a random other rank dies after its first send.
            let mut sim = AgreeSim::new(AgreeSimConfig::new(n, seed));
            sim.crash_after_sends(0, 16);
            sim.crash_after_sends(1 + (seed as u32 * 7919) % (n - 1), 1);
            let r = run(&mut sim, &format!("n={n} seed={seed} two crashes"));
            assert_eq!(r.survivors, n - 2);
            println!(
                "n={n} coordinator + 1 crash: {} msgs ({:.2}/process), {} rounds, {:?}",
                r.messages,
                r.messages as f64 / f64::from(n),
                r.rounds,
                r.latency
            );
        }
    }
}

#[test]
fn table_has_a_row_per_size() {
    let t = agree_table(&[(1, 1), (8, 3), (64, 2)], 1);
    assert_eq!(t.lines().count(), 2 + 3);
    assert!(t.lines().nth(3).unwrap().starts_with("| 8 | 3 | 3.50 | 14 | 14 | 4 |"), "{t}");
}
