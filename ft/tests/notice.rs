//! Simulations of revoke/corrupt notices over the overlay (R42, `ft::notice`): with a
//! crash at any send of any member for n ≤ 64, random crash storms, and runs at 2^12
//! with ⌈log2 n⌉ forwarders crashing; every survivor gets the notice whenever any does.

use runthrough_ft::notice::{run_checked, NoticeSim, NoticeSimConfig};
use runthrough_ft::sim::SplitMix64;

#[test]
fn one_crash_at_every_send_of_every_member_up_to_64() {
    for n in 2..=64u32 {
        let log = n.next_power_of_two().trailing_zeros();
        for v in 0..n {
            for k in 0..=log + 1 {
                let mut sim = NoticeSim::new(NoticeSimConfig::new(n, u64::from(n * 100 + v * 7 + k)));
                sim.crash_after_sends(v, k);
                sim.run();
                let r = sim.check().unwrap_or_else(|e| panic!("n={n} victim={v} after {k} sends: {e}"));
                // The origin crashing before its first send loses the notice; otherwise
                // everyone alive has it.
                if !(v == 0 && k == 0) {
                    assert_eq!(r.reached, r.survivors, "n={n} victim={v} k={k}");
                }
            }
        }
    }
}

#[test]
fn random_crash_storms() {
    let mut rng = SplitMix64::new(0x0b5e);
    for seed in 0..3000u64 {
        let n = 2 + (seed % 63) as u32;
        let mut sim = NoticeSim::new(NoticeSimConfig::new(n, seed));
        let crashes = rng.range(1, u64::from(n - 1));
        let mut plan = Vec::new();
        for _ in 0..crashes {
            let v = rng.range(0, u64::from(n - 1)) as u32;
            let k = rng.range(0, 6) as u32;
            sim.crash_after_sends(v, k);
            plan.push((v, k));
        }
        sim.run();
        sim.check().unwrap_or_else(|e| panic!("n={n} seed={seed} plan={plan:?}: {e}"));
    }
}

#[test]
fn forwarders_crashing_at_4096_cost_little() {
    let n = 1 << 12;
    for crashes in [0, 1, 12] {
        let r = run_checked(n, 5, crashes);
        assert_eq!(r.reached, r.survivors, "crashes={crashes}");
        assert!(r.max_sent <= 12 + 2, "crashes={crashes}: {r:?}");
        assert!(r.max_received <= 40, "crashes={crashes}: {r:?}");
    }
}
