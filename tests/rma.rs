//! One-sided communication with real processes (issue 32, R34–R37), on shared memory and
//! over libfabric tcp: `drivers/examples/rma_check.rs` (every operation under every
//! synchronization mode, values checked element by element at every rank, short and
//! long transfers, accumulate atomicity under contention from every rank) and
//! `drivers/examples/rma_fault.rs` (a rank SIGKILLed inside a lock, fence or post/start/
//! complete/wait epoch, holding an exclusive lock, or in the middle of a long put: every
//! survivor ends with the documented outcome and the same validated failed group; the
//! victim ends abnormally).

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(120);
/// A generous detector timeout: a busy 2-core machine's scheduling is no failure.
const FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "3000");
const FABRIC: [&str; 4] = ["--transport", "fabric", "--provider", "tcp"];

fn check(n: u32, elems: usize, transport: &[&str]) {
    let prog = example("rma_check");
    let (ranks, elems) = (n.to_string(), elems.to_string());
    let mut a = vec!["-n", &ranks];
    a.extend_from_slice(transport);
    a.extend([prog.to_str().unwrap(), &elems]);
    let out = ok(&run_env(&a, &[FT], LIMIT));
    // Over shared memory every member maps every member's allocated window (direct
    // access; a member alone allocates privately) and copies to and from a created one
    // with CMA (the rget and the put);
    // over tcp none does (records).
    let (direct, copies) = if transport.is_empty() && n > 1 { (n, 2) } else { (0, 0) };
    for r in 0..n {
        let want = format!("rma_check: rank {r} ok 10 cases, {elems} elements, {direct} direct, {copies} by CMA");
        assert!(out.lines().any(|l| l == want), "rank {r}, {n} ranks {transport:?}:\n{out}");
    }
}

#[test]
fn every_operation_and_synchronization_on_shared_memory() {
    check(1, 100, &[]);
    check(2, 1000, &[]);
    check(4, 20_000, &[]);
    check(8, 300, &[]);
}

#[test]
fn every_operation_and_synchronization_over_tcp() {
    check(2, 20_000, &FABRIC);
    check(4, 1000, &FABRIC);
}

fn fault(n: u32, mode: &str, victim: u32, transport: &[&str]) {
    let prog = example("rma_fault");
    let ranks = n.to_string();
    let mut a = vec!["-n", &ranks];
    a.extend_from_slice(transport);
    a.extend([prog.to_str().unwrap(), mode]);
    let out = ok_failed(&run_env(&a, &[FT], LIMIT), &[victim]);
    for r in (0..n).filter(|&r| r != victim) {
        let want = format!("rma_fault: ok rank {r} {mode} failed=[{victim}]");
        assert!(out.lines().any(|l| l == want), "{mode}, rank {r}, {transport:?}:\n{out}");
    }
}

#[test]
fn a_dead_exclusive_holder_s_lock_is_released() {
    fault(4, "holder", 1, &[]);
    fault(3, "holder", 1, &FABRIC);
}

#[test]
fn a_target_killed_in_a_lock_epoch() {
    fault(4, "target_lock", 0, &[]);
    fault(3, "target_lock", 0, &FABRIC);
}

#[test]
fn a_member_killed_in_a_fence_epoch() {
    fault(4, "target_fence", 3, &[]);
    fault(4, "target_fence", 3, &FABRIC);
}

#[test]
fn an_origin_killed_in_its_access_epoch() {
    fault(4, "origin_pscw", 1, &[]);
    fault(3, "origin_pscw", 1, &FABRIC);
}

#[test]
fn an_origin_killed_mid_put_leaves_the_target_s_other_memory_alone() {
    fault(3, "origin_put", 1, &[]);
    fault(3, "origin_put", 1, &FABRIC);
}
