//! Requests are futures (`examples/async_ring.rs`): a ring driven by `.await` under a
//! small executor that parks until woken — so every `.await` completes only because the
//! runtime (its progress thread, or another poll) woke it — on shared memory and over
//! libfabric tcp, 2 and 4 ranks; and a pending `.await` on a receive from a rank that
//! is SIGKILLed resolves to `RankFailStop` naming it.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(120);
const ROUNDS: usize = 12;

fn async_ring(n: usize, extra: &[&str]) {
    let prog = example("async_ring");
    let ns = n.to_string();
    let rounds = ROUNDS.to_string();
    let mut a = vec!["-n", ns.as_str()];
    a.extend_from_slice(extra);
    a.extend_from_slice(&[prog.to_str().unwrap(), "ring", rounds.as_str()]);
    let out = ok(&run_env(&a, &[("RT_FT_TIMEOUT_MS", "3000")], LIMIT));
    for r in 0..n {
        let prefix = format!("async_ring: rank {r} ok rounds={ROUNDS} polls=");
        let polls: usize = out
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("rank {r} did not report ok:\n{out}"))
            .trim()
            .parse()
            .expect("polls=N");
        // A future is polled again only when woken: a few wakes per round, not a busy
        // loop of wakes (a waker registered on an already completed operation).
        assert!(polls <= 10 * (ROUNDS + 3), "rank {r}: {polls} polls for {ROUNDS} rounds\n{out}");
    }
}

#[test]
fn async_ring_shm_2_ranks() {
    async_ring(2, &[]);
}

#[test]
fn async_ring_shm_4_ranks() {
    async_ring(4, &[]);
}

#[test]
fn async_ring_fabric_tcp_2_ranks() {
    async_ring(2, &["--transport", "fabric", "--provider", "tcp"]);
}

#[test]
fn async_ring_fabric_tcp_4_ranks() {
    async_ring(4, &["--transport", "fabric", "--provider", "tcp"]);
}

fn killed_peer(n: u32, extra: &[&str]) {
    let prog = example("async_ring");
    let ns = n.to_string();
    let mut a = vec!["-n", ns.as_str()];
    a.extend_from_slice(extra);
    a.extend_from_slice(&[prog.to_str().unwrap(), "kill"]);
    let victim = n - 1;
    let out = ok_failed(&run_env(&a, &[], LIMIT), &[victim]);
    for r in 0..victim {
        let line = format!("async_ring: rank {r} failstop victim={victim} polls=");
        assert!(out.lines().any(|l| l.starts_with(&line)), "rank {r} did not see the failure:\n{out}");
    }
}

#[test]
fn pending_await_on_a_killed_peer_resolves_to_rank_fail_stop_shm() {
    killed_peer(3, &[]);
}

#[test]
fn pending_await_on_a_killed_peer_resolves_to_rank_fail_stop_fabric_tcp() {
    killed_peer(3, &["--transport", "fabric", "--provider", "tcp"]);
}
