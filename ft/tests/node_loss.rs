//! A whole host lost at once (R42): on the interleaved ring every survivor knows every
//! one of its ranks within two detector timeouts, as one event; in rank order (placement
//! by slot) the host takes a timeout a rank.

use std::time::Duration;

use runthrough_ft::node_loss::{node_loss_run, NodeLossRun};
use runthrough_ft::sim::SimConfig;

const DELTA: Duration = Duration::from_millis(100);
const ETA: Duration = Duration::from_millis(10);

fn run(n: u32, per_host: u32, interleave: bool, seed: u64) -> NodeLossRun {
    let cfg = SimConfig::new(n, seed);
    assert_eq!(cfg.detector.timeout(), DELTA);
    node_loss_run(cfg, per_host, interleave, DELTA * (per_host + 2))
}

#[test]
fn a_64_rank_host_is_known_everywhere_within_two_timeouts_on_the_interleaved_ring() {
    for seed in 1..=3 {
        let r = run(1024, 64, true, seed);
        assert!(r.complete, "seed {seed}: {r:?}");
        assert!(r.all_known_after <= 2 * DELTA, "seed {seed}: {r:?}");
        // One event: the host's ranks arrive within a heartbeat period of each other.
        assert!(r.spread <= ETA + Duration::from_millis(2), "seed {seed}: {r:?}");
    }
}

#[test]
fn in_rank_order_a_host_placed_by_slot_takes_a_timeout_a_rank() {
    let r = run(64, 8, false, 7);
    assert!(r.complete, "{r:?}");
    assert!(r.all_known_after >= 7 * DELTA, "{r:?}");
    assert!(r.spread >= 6 * DELTA, "{r:?}");
    let i = run(64, 8, true, 7);
    assert!(i.complete && i.all_known_after <= 2 * DELTA, "{i:?}");
}

#[test]
fn one_rank_a_host_is_the_same_on_either_ring() {
    let a = run(64, 1, false, 3);
    let b = run(64, 1, true, 3);
    assert_eq!(a, b);
    assert!(a.complete && a.all_known_after <= 2 * DELTA, "{a:?}");
}
