//! Every collective against a serial reference, on 1 to 8 ranks (real processes), with
//! odd vector lengths and long ones (ring allreduce), every root, on the world and on a
//! duplicate (`drivers/examples/coll_check.rs`).

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run, run_env, RankStatus};

#[test]
fn collectives_match_serial_reference_1_to_8_ranks() {
    let prog = example("coll_check");
    for n in 1..=8 {
        let out =
            ok(&run(&["-n", &n.to_string(), prog.to_str().unwrap(), &(n * 7).to_string()], Duration::from_secs(120)));
        assert!(out.contains(&format!("coll_check: ok ranks={n}")), "{out}");
    }
    // The tree algorithms for short vectors (binomial bcast/reduce, recursive-doubling
    // allreduce with its odd-count fold) that larger jobs use.
    for n in [3, 5, 6, 8] {
        let args = ["-n", &n.to_string(), prog.to_str().unwrap(), &(n * 3).to_string()].map(String::from);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(&run_env(&args, &[("RT_COLL_FLAT_MAX", "0")], Duration::from_secs(120)));
        assert!(out.contains(&format!("coll_check: ok ranks={n}")), "{out}");
    }
    // Long reductions through bulk buffers smaller than the vector (piece by piece; the
    // default bulk buffer holds the 160 KB vectors whole).
    for n in [3, 8] {
        let args = ["-n", &n.to_string(), prog.to_str().unwrap(), &(n * 9).to_string()].map(String::from);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(&run_env(&args, &[("RT_COLL_BULK", "16384")], Duration::from_secs(120)));
        assert!(out.contains(&format!("coll_check: ok ranks={n}")), "{out}");
    }
    // Short collectives go through the shared-memory slots by default; the message
    // algorithms they replace (flat, direct exchange, doubling) still serve other
    // communicators and transports.
    for n in [2, 3, 5, 8] {
        let args = ["-n", &n.to_string(), prog.to_str().unwrap(), &(n * 5).to_string()].map(String::from);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = ok(&run_env(&args, &[("RT_COLL_SHM", "0")], Duration::from_secs(120)));
        assert!(out.contains(&format!("coll_check: ok ranks={n}")), "{out}");
    }
}

#[test]
fn kill_inside_message_collectives_and_message_validate_survivors_finish() {
    // The kill loop again with shared-memory collectives and the register agreement
    // switched off (RT_COLL_SHM=0): the short collectives run over messages and validate
    // runs the message agreement (ft::agree), as on communicators spanning hosts.
    let prog = example("barrier_recovery");
    let ops = ["barrier", "bcast", "reduce", "allreduce", "allgather", "alltoall", "validate", "split"];
    for (i, op) in ops.iter().enumerate() {
        let (n, victim) = if i % 2 == 0 { (4, 2) } else { (5, 3) };
        let ranks = n.to_string();
        let victim_s = victim.to_string();
        let args = ["-n", ranks.as_str(), prog.to_str().unwrap(), victim_s.as_str(), "20", op];
        let out = ok_failed(&run_env(&args, &[("RT_COLL_SHM", "0")], Duration::from_secs(30)), &[victim]);
        let done = out.matches(&format!("done 20 iterations, failed [{victim}]")).count();
        assert_eq!(done, n - 1, "{op}: every survivor finishes and sees the same failed group:\n{out}");
    }
}

#[test]
fn kill_inside_every_collective_and_validate_survivors_finish() {
    // Run-through Example 17.6 generalised: a loop of one collective + validate, the victim
    // SIGKILLs itself halfway; every survivor finishes all iterations and all agree on
    // the failed group (R17, R18, R19, R20; R21 for the nonblocking ones and ivalidate).
    let prog = example("barrier_recovery");
    let ops = [
        "barrier",
        "bcast",
        "reduce",
        "allreduce",
        "allreduce-long",
        "allreduce-mid",
        "reduce-long",
        "bcast-long",
        "allgather-long",
        "alltoall-long",
        "dup",
        "split",
        "create",
        "gather",
        "scatter",
        "allgather",
        "alltoall",
        "scan",
        "exscan",
        "validate",
        "gatherv",
        "allgatherv",
        "alltoallv",
        "reduce_scatter",
        "ibarrier",
        "ibcast",
        "ireduce",
        "iallreduce",
        "ivalidate",
        "alltoall-short",
        "alltoall-pulled",
    ];
    for (i, op) in ops.iter().enumerate() {
        let (n, victim) = if i % 2 == 0 { (4, 1) } else { (5, 4) };
        let ranks = n.to_string();
        let victim_s = victim.to_string();
        let args = ["-n", ranks.as_str(), prog.to_str().unwrap(), victim_s.as_str(), "20", op];
        let out = ok_failed(&run(&args, Duration::from_secs(30)), &[victim]);
        let done = out.matches(&format!("done 20 iterations, failed [{victim}]")).count();
        assert_eq!(done, n - 1, "{op}: every survivor finishes and sees the same failed group:\n{out}");
    }
}

#[test]
fn exscan_recovery_prints_the_seed_values() {
    // Run-through Example 17.8 with 5 ranks sending rank+1.
    let prog = example("exscan_recovery");
    let out = ok_failed(&run(&["-n", "5", prog.to_str().unwrap(), "2"], Duration::from_secs(60)), &[2]);
    for line in ["Rank 1) Received 1", "Rank 3) Received 3", "Rank 4) Received 7"] {
        assert!(out.contains(line), "{line} in\n{out}");
    }
    assert!(!out.contains("Rank 0) Received"), "rank 0 is first: undefined result, nothing printed");
    let out = ok_failed(&run(&["-n", "5", prog.to_str().unwrap(), "2,0"], Duration::from_secs(60)), &[2, 0]);
    for line in ["Rank 3) Received 2", "Rank 4) Received 6"] {
        assert!(out.contains(line), "{line} in\n{out}");
    }
    assert!(!out.contains("Rank 1) Received"), "rank 1 is first now");
}

#[test]
fn split_retry_is_uniform_and_yields_the_live_members() {
    // R24: the failed split fails everywhere, validate, retry succeeds everywhere.
    let prog = example("split_retry");
    let out = ok_failed(&run(&["-n", "5", prog.to_str().unwrap(), "2"], Duration::from_secs(60)), &[2]);
    assert_eq!(out.matches(" of 4 after 2 tries, sum of old ranks 8").count(), 4, "{out}");
    let out = ok(&run(&["-n", "4", prog.to_str().unwrap()], Duration::from_secs(60)));
    assert_eq!(out.matches(" of 4 after 1 tries, sum of old ranks 6").count(), 4, "{out}");
    // The same with MPI_Comm_create from the group of the members not known failed.
    let out = ok_failed(&run(&["-n", "5", prog.to_str().unwrap(), "2", "create"], Duration::from_secs(60)), &[2]);
    assert_eq!(out.matches(" of 4 after 2 tries, sum of old ranks 8").count(), 4, "{out}");
    let out = ok(&run(&["-n", "4", prog.to_str().unwrap(), "none", "create"], Duration::from_secs(60)));
    assert_eq!(out.matches(" of 4 after 1 tries, sum of old ranks 6").count(), 4, "{out}");
}

#[test]
fn bcast_recovery_blocks_redo_after_a_failure() {
    // Run-through Example 17.7: every survivor redoes the block the kill interrupted and
    // ends with the last broadcast value (9 + size - 1).
    let prog = example("bcast_recovery");
    let out = ok_failed(&run(&["-n", "5", prog.to_str().unwrap(), "3"], Duration::from_secs(60)), &[3]);
    assert_eq!(out.matches("failed [3], last value 13, blocks redone 1").count(), 4, "{out}");
}

/// The kill loop with the victim dying part-way through its own part of a collective:
/// inside its first combine of a reduction (it has a contribution in hand and owes
/// results). It must end by that SIGKILL (exit 4 means it left the collective alive);
/// every survivor finishes and agrees on the failed group. Over shared memory and over
/// messages.
#[test]
fn kill_part_way_through_a_members_part_of_a_collective() {
    let prog = example("barrier_recovery");
    // (op, environment, ranks, victim): the victim combines something in each (a
    // binomial-tree leaf of a message reduce would not).
    const MESSAGES: &[(&str, &str)] = &[("RT_COLL_SHM", "0")];
    let cases = [
        ("allreduce", &[][..], 4u32, 2u32),
        ("allreduce-mid", &[], 5, 3),
        ("allreduce-long", &[], 4, 2),
        ("reduce-long", &[], 5, 3),
        // Two members: the bulk-buffer allreduce, and the pipelined reduce, where only
        // the root combines.
        ("allreduce-long", &[], 2, 1),
        ("reduce-long", &[], 2, 0),
        ("allreduce-long", MESSAGES, 4, 2),
        ("reduce-long", MESSAGES, 4, 2),
    ];
    for (op, env, n, victim) in cases {
        let (ranks, victim_s) = (n.to_string(), victim.to_string());
        let args = ["-n", ranks.as_str(), prog.to_str().unwrap(), victim_s.as_str(), "20", op, "inside"];
        let o = run_env(&args, env, Duration::from_secs(30));
        let out = ok_failed(&o, &[victim]);
        assert_eq!(o.rank(victim).status, RankStatus::Signaled(9), "{op} {env:?}: died inside the collective");
        let done = out.matches(&format!("done 20 iterations, failed [{victim}]")).count();
        assert_eq!(done, n as usize - 1, "{op} {env:?}: every survivor finishes:\n{out}");
    }
}

/// Rooted collectives with a non-zero root, live (the failed member is excluded, every
/// collective after the validate succeeds) or the victim itself (R20: every rooted
/// collective after the failure is recognised fails, at every survivor). Each survivor
/// checks its own results and exits 3 otherwise; the harness checks every rank's end.
#[test]
fn kill_loop_with_a_non_zero_root_live_or_failed() {
    let prog = example("barrier_recovery");
    let ops = ["bcast", "reduce", "gather", "scatter", "gatherv", "ibcast", "ireduce", "bcast-long", "reduce-long"];
    for (i, op) in ops.iter().enumerate() {
        let n = if i % 2 == 0 { 4u32 } else { 5 };
        let victim = n - 1;
        for root in [2, victim] {
            let (ranks, victim_s, root_s) = (n.to_string(), victim.to_string(), root.to_string());
            let args = ["-n", ranks.as_str(), prog.to_str().unwrap(), victim_s.as_str(), "20", op, root_s.as_str()];
            let out = ok_failed(&run(&args, Duration::from_secs(30)), &[victim]);
            let done = out.matches(&format!("done 20 iterations, failed [{victim}]")).count();
            assert_eq!(done, n as usize - 1, "{op} root {root}: every survivor finishes:\n{out}");
        }
    }
}

/// Long collectives of two members, each with a core (through the bulk buffers: a reduce
/// pipelined from the non-root to the root, broadcasts piped part by part, 800 KB
/// broadcasts through a ring in the root's bulk buffer; allgathers and alltoalls of 32 KB
/// blocks pulled in place by CMA) with a kill between
/// two of them: the survivor gets the failure, validates and
/// finishes, with the root live or the victim (then every later rooted one fails, R20).
#[test]
fn two_member_long_collectives_survive_a_kill() {
    let prog = example("barrier_recovery");
    let cases = [
        ("reduce-long", "0"),
        ("reduce-long", "1"),
        ("allreduce-long", "0"),
        ("bcast-long", "0"),
        ("bcast-long", "1"),
        ("bcast-ring", "0"),
        ("bcast-ring", "1"),
        ("allgather-long", "0"),
        ("alltoall-long", "0"),
    ];
    for (op, root) in cases {
        let args = ["-n", "2", prog.to_str().unwrap(), "1", "20", op, root];
        let out = ok_failed(&run(&args, Duration::from_secs(30)), &[1]);
        assert_eq!(
            out.matches("done 20 iterations, failed [1]").count(),
            1,
            "{op} root {root}: the survivor finishes:\n{out}"
        );
    }
}

/// R25 (`dup` and `create` copy the recognised failed set: active at once, a collective
/// succeeds over the survivors) and R26 (freeing pre-failure and new communicators
/// completes within a bound despite the failure), checked at every survivor by
/// `drivers/examples/comm_lifecycle.rs`.
#[test]
fn r25_copies_keep_the_recognised_set_and_r26_free_completes() {
    let prog = example("comm_lifecycle");
    for n in [3u32, 5] {
        let o = run(&["-n", &n.to_string(), prog.to_str().unwrap()], Duration::from_secs(60));
        let out = ok_failed(&o, &[n - 1]);
        for r in 0..n - 1 {
            assert!(out.contains(&format!("comm_lifecycle: ok rank {r}\n")), "rank {r}: {out}");
        }
    }
}
