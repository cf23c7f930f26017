//! Simulations of the agreement over small fan-outs (R42): the tree's relaying,
//! re-attachment of orphans to their nearest live ancestor and resending, with a crash
//! at every send of every participant for n ≤ 64, crashes right after deciding, cascading
//! coordinator and inner-node crashes, random crash storms, and randomized runs at 2^12.
//! Uniform agreement, validity and termination are checked by [`AgreeSim::check`].

use std::time::Duration;

use runthrough_ft::agree_sim::{AgreeRun, AgreeSim, AgreeSimConfig};
use runthrough_ft::agree_tree::Tree;
use runthrough_ft::sim::SplitMix64;
use runthrough_ft::Time;

fn cfg(n: u32, k: u32, seed: u64) -> AgreeSimConfig {
    let mut c = AgreeSimConfig::new(n, seed);
    c.fanout = k;
    c
}

fn run(sim: &mut AgreeSim, ctx: &str) -> AgreeRun {
    sim.run();
    sim.check().unwrap_or_else(|e| panic!("{ctx}: {e}"))
}

/// Depth of the tree over `0..n` at fan-out `k`.
fn depth(n: u32, k: u32) -> u32 {
    let t = Tree::new(0, n, k);
    (0..n)
        .map(|x| {
            let mut d = 0;
            let mut y = x;
            while let Some(p) = t.live_parent(y, |_| false) {
                d += 1;
                y = p;
            }
            d
        })
        .max()
        .unwrap_or(0)
}

#[test]
fn failure_free_costs_four_messages_per_process_and_four_rounds_a_level() {
    for k in [2, 3, 4] {
        for n in 1..=64u32 {
            for seed in 0..4 {
                let mut sim = AgreeSim::new(cfg(n, k, seed));
                let r = run(&mut sim, &format!("k={k} n={n} seed={seed}"));
                assert_eq!((r.survivors, r.decided), (n, n));
                assert_eq!(r.messages, 4 * u64::from(n - 1), "k={k} n={n}");
                assert_eq!(r.rounds, 4 * depth(n, k), "k={k} n={n}");
                assert!(r.max_sent_by_one <= 2 * k + 2, "k={k} n={n}: {}", r.max_sent_by_one);
                assert!(r.decision.failed.is_empty());
                assert_eq!(sim.dropped(), 0);
            }
        }
    }
}

#[test]
fn one_crash_at_every_send_of_every_participant_up_to_64() {
    for (k, top) in [(2u32, 64u32), (3, 40)] {
        for n in 2..=top {
            for v in 0..n {
                // A binary tree's inner node sends 2k + 2 messages failure-free; a few
                // more when it adopts orphans or re-reports.
                for s in 0..=2 * k + 4 {
                    let seed = u64::from(n * 1000 + v * 10 + s);
                    let mut sim = AgreeSim::new(cfg(n, k, seed));
                    sim.crash_after_sends(v, s);
                    let ctx = format!("k={k} n={n} victim={v} after {s} sends");
                    let r = run(&mut sim, &ctx);
                    if !sim.is_survivor(v) {
                        assert_eq!(r.survivors, n - 1, "{ctx}");
                    }
                }
                let mut sim = AgreeSim::new(cfg(n, k, u64::from(n + v)));
                sim.crash_after_decision(v);
                let ctx = format!("k={k} n={n} victim={v} after deciding");
                let r = run(&mut sim, &ctx);
                assert_eq!(r.decided, n, "{ctx}: the victim decided before crashing");
            }
        }
    }
}

#[test]
fn root_and_inner_nodes_crash_at_random_steps() {
    let mut rng = SplitMix64::new(0x7ee);
    for seed in 0..1500u64 {
        let k = 2 + (seed % 3) as u32;
        let n = 2 + (seed % 63) as u32;
        let mut c = cfg(n, k, seed);
        if seed % 4 == 0 {
            // Detection faster than messages: orphans re-attach while relays are on the way.
            c.notify_min = Duration::from_micros(1);
            c.notify_max = Duration::from_micros(60);
        }
        let mut sim = AgreeSim::new(c);
        // The root, the first inner nodes and random others, each at a random step.
        let mut victims = vec![0, 1, 1 + (n - 1) / k.min(n - 1)];
        for _ in 0..rng.range(0, 4) {
            victims.push(rng.range(0, u64::from(n)) as u32);
        }
        victims.retain(|&v| v < n);
        victims.sort_unstable();
        victims.dedup();
        if victims.len() as u32 == n && rng.range(0, 2) == 0 {
            victims.pop();
        }
        let mut plan = Vec::new();
        for &v in &victims {
            plan.push(sim.crash_randomly(v, &mut rng, 2 * k + 4, Duration::from_nanos(3_000_000)));
        }
        run(&mut sim, &format!("k={k} n={n} seed={seed} plan={plan:?}"));
    }
}

#[test]
fn randomized_runs_at_4096() {
    let n = 1 << 12;
    let mut rng = SplitMix64::new(0x4096);
    for seed in 0..6u64 {
        let k = [4, 32][seed as usize % 2];
        let mut sim = AgreeSim::new(cfg(n, k, seed));
        let mut plan = Vec::new();
        // The root at a random step, an inner node of the first level, and random others.
        sim.crash_after_sends(0, rng.range(0, u64::from(2 * k + 2)) as u32);
        plan.push("0".to_string());
        let inner = 1 + rng.range(0, u64::from(k)) as u32 * ((n - 1) / k);
        sim.crash_after_sends(inner, rng.range(0, u64::from(2 * k + 2)) as u32);
        plan.push(format!("{inner}"));
        for _ in 0..8 {
            let v = rng.range(2, u64::from(n)) as u32;
            sim.crash_at(v, Time::from_nanos(rng.range(0, 2_000_000)));
            plan.push(format!("{v}@t"));
        }
        let r = run(&mut sim, &format!("n={n} k={k} seed={seed} plan={plan:?}"));
        assert!(r.survivors >= n - 10);
        assert!(r.max_sent_by_one <= 8 * k, "k={k}: busiest sent {}", r.max_sent_by_one);
    }
}

#[test]
fn busiest_process_stays_bounded_as_n_grows() {
    for n in [64u32, 1024, 16_384] {
        let mut sim = AgreeSim::new(AgreeSimConfig::new(n, 1));
        let r = run(&mut sim, &format!("n={n}"));
        assert_eq!(r.messages, 4 * u64::from(n - 1));
        assert!(r.max_sent_by_one <= 66, "n={n}: {}", r.max_sent_by_one);
        assert_eq!(r.rounds, 4 * depth(n, 32));
    }
}
