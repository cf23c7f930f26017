//! Inter-communicators with real processes (issue 33 item 3, R39), through the Rust API:
//! `drivers/examples/intercomm.rs` — two non-contiguous groups of unequal sizes, led by
//! their local rank 1 over the world: shapes, point-to-point, every collective value by
//! value, merge in both orders, dup and split; with a dead process recognised before
//! creation (counted by `remote_size`, skipped by collectives, held by merge) and not
//! recognised (creation errs everywhere, then succeeds after validate); a process killed
//! at a random moment of a loop of creations and of merges — a leader or not — with every
//! survivor's first failing iteration compared (uniform creation); a death in a run of
//! collectives. Shared memory and libfabric tcp. The C interface's are `tests/abi.rs`'s.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(150);
/// A generous detector timeout: a busy 2-core machine's scheduling is no failure.
const FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "3000");
const FABRIC: [&str; 4] = ["--transport", "fabric", "--provider", "tcp"];

/// Runs MODE; returns each survivor's "ok" line tail.
fn run(n: u32, mode: &str, victim: Option<u32>, transport: &[&str]) -> Vec<String> {
    let prog = example("intercomm");
    let ranks = n.to_string();
    let v = victim.map(|v| v.to_string()).unwrap_or_default();
    let mut a = vec!["-n", &ranks];
    a.extend_from_slice(transport);
    a.extend([prog.to_str().unwrap(), mode]);
    if victim.is_some() {
        a.push(&v);
    }
    let o = run_env(&a, &[FT], LIMIT);
    let dead = match (mode, victim) {
        ("plain", _) => None,
        (_, Some(v)) => Some(v),
        _ => Some(n - 1),
    };
    let out = match dead {
        None => ok(&o),
        Some(d) => ok_failed(&o, &[d]),
    };
    assert!(!out.contains("FAILED"), "{n} ranks {mode} {transport:?}:\n{out}");
    (0..n)
        .filter(|&r| Some(r) != dead)
        .map(|r| {
            let head = format!("intercomm: ok rank {r} {mode} ");
            let line = out.lines().find(|l| l.starts_with(&head));
            line.unwrap_or_else(|| panic!("rank {r}, {n} ranks {mode} {transport:?}:\n{out}"))[head.len()..].to_string()
        })
        .collect()
}

#[test]
fn non_contiguous_groups_with_leaders_not_rank_0_talk_and_merge() {
    run(6, "plain", None, &[]);
    run(5, "plain", None, &[]);
    run(7, "plain", None, &FABRIC);
}

#[test]
fn a_recognized_dead_process_is_counted_skipped_and_merged() {
    run(6, "recognized", None, &[]);
    run(7, "recognized", None, &FABRIC);
}

#[test]
fn an_unrecognized_dead_process_fails_creation_at_every_survivor() {
    run(6, "unrecognized", None, &[]);
    run(5, "unrecognized", None, &FABRIC);
}

/// Kills inside loops of creations and merges: a leader of either side (world 2 leads B,
/// world 3 leads A) and a plain member. Every survivor's first failing iteration must be
/// the same: nobody got an inter-communicator (or merge) the others did not.
#[test]
fn kills_inside_creation_and_merge_leave_a_uniform_outcome() {
    for (mode, victim, transport) in [
        ("kill_create", 3, &[][..]),
        ("kill_create", 2, &[][..]),
        ("kill_create", 4, &[][..]),
        ("kill_merge", 3, &[][..]),
        ("kill_merge", 5, &[][..]),
        ("kill_create", 2, &FABRIC[..]),
        ("kill_merge", 4, &FABRIC[..]),
    ] {
        let tails = run(6, mode, Some(victim), transport);
        assert!(tails.iter().all(|t| t == &tails[0]), "{mode} victim {victim} {transport:?}: {tails:?}");
    }
}

#[test]
fn a_death_in_a_run_of_collectives_stops_every_survivor() {
    run(6, "coll_mid", None, &[]);
    run(6, "coll_mid", None, &FABRIC);
}
