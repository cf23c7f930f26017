//! Fault injection with real processes: a rank SIGKILLs itself at a chosen point (before
//! sending, mid eager stream, during a rendezvous on either side, while a survivor blocks
//! on it, under a pending ANY_SOURCE receive, inside wait_all over mixed peers). Every
//! survivor must finish in bounded time with `RankFailStop` naming the victim, and the
//! survivors' own message stream must arrive complete, once, in order (checked by
//! `drivers/examples/ft_check.rs`). Failures reach the survivors through the launcher's notice
//! that the victim exited (the ring detector adds hung processes).

mod common;

use std::time::Duration;

use common::{example, ok_failed, run, Cause, Phase, RankStatus};

const MODES: [&str; 10] = [
    "before-send",
    "eager",
    "rndv-send",
    "rndv-recv",
    "blocked-recv",
    "any-source",
    "waitall",
    "sendrecv",
    "poison",
    "hang",
];

fn matrix(n: usize) {
    matrix_with(n, &[]);
}

/// The kill matrix with extra `rtrun` options (e.g. the transport).
fn matrix_with(n: usize, opts: &[&str]) {
    let prog = example("ft_check");
    for mode in MODES {
        let ranks = n.to_string();
        let mut args = vec!["-n", ranks.as_str()];
        args.extend_from_slice(opts);
        args.extend([prog.to_str().unwrap(), mode]);
        let o = run(&args, Duration::from_secs(60));
        let out = ok_failed(&o, &[n as u32 - 1]);
        assert_eq!(out.matches("ft_check: ok").count(), n - 1, "{mode}: every survivor reports: {out}");
        assert_eq!(o.status.code(), Some(0), "R7: rank 0 finalized, so the job exits with its code");
    }
}

#[test]
fn kill_matrix_4_ranks() {
    matrix(4);
}

/// Start-up kills (R31): the victim (the last rank) SIGKILLed or SIGSTOPped by `rtrun`
/// at each of `times` (ms after launch), landing anywhere in start-up; `ft_check
/// startup` makes a victim that still gets through `init` die at once. Every survivor
/// must start, see `RankFailStop` from the victim, and pass its own message stream; the
/// job exits 0. (`tests/startup.rs` sweeps start-up finely, victim 0 included.)
fn startup_matrix(n: usize, opts: &[&str], times: &[u64]) {
    let prog = example("ft_check");
    let victim = n - 1;
    for fault in ["--kill", "--stop"] {
        for t in times {
            let ranks = n.to_string();
            let spec = format!("{victim}@{t}ms");
            let mut args = vec!["-n", ranks.as_str()];
            args.extend_from_slice(opts);
            args.extend([fault, spec.as_str(), prog.to_str().unwrap(), "startup"]);
            let o = run(&args, Duration::from_secs(60));
            let out = ok_failed(&o, &[victim as u32]);
            for r in 0..victim {
                assert!(out.contains(&format!("ft_check: ok rank {r} startup")), "{fault} {spec}: rank {r}: {out}");
            }
            assert_eq!(out.matches("ft_check: ok").count(), n - 1, "{fault} {spec}: {out}");
        }
    }
}

#[test]
fn startup_kill_matrix_4_ranks() {
    startup_matrix(4, &[], &[0, 40, 80, 120, 160, 200, 260]);
}

#[test]
fn startup_kill_matrix_4_ranks_fabric_tcp() {
    startup_matrix(4, &["--transport", "fabric", "--provider", "tcp"], &[0, 100, 200, 300, 400, 500, 600, 750]);
}

#[test]
fn startup_kill_matrix_8_ranks_oversubscribed() {
    startup_matrix(8, &[], &[0, 60, 120, 180, 240, 300]);
}

/// The same matrix with every peer on libfabric `tcp;ofi_rxm`, which never reports a
/// SIGKILLed peer itself: survivors learn it from the launcher / detector, and the fabric
/// transport must not hang them (sends to the dead peer stay busy and are discarded).
#[test]
fn kill_matrix_4_ranks_fabric_tcp() {
    matrix_with(4, &["--transport", "fabric", "--provider", "tcp"]);
}

#[test]
fn kill_matrix_8_ranks_oversubscribed() {
    matrix(8);
}

#[test]
fn manager_worker_survives_two_kills() {
    let prog = example("manager_worker");
    let o = run(
        &["-n", "6", "--kill", "2@300ms", "--kill", "4@700ms", prog.to_str().unwrap(), "500"],
        Duration::from_secs(60),
    );
    let out = ok_failed(&o, &[2, 4]);
    // The runtime told the launcher init completed: the kill at 700 ms lands after init
    // (the one at 300 ms is close to the end of start-up on a busy machine).
    for r in [2, 4] {
        assert_eq!((o.rank(r).status, o.rank(r).cause), (RankStatus::Signaled(9), Cause::Injected));
    }
    assert_eq!(o.rank(4).phase, Phase::Running);
    let err = common::stderr(&o);
    let end = "killed by SIGKILL, after init, before finalize (fault injected)";
    assert!(err.lines().any(|l| l.starts_with("rtrun: rank 4 on host ") && l.ends_with(end)), "{err}");
    assert!(out.contains("total 5208312500 (correct)"), "{out}");
    assert!(out.contains("failed ranks [2, 4]"), "{out}");
}

#[test]
fn r14_reenable_any_source_from_several_threads() {
    // Run-through Example 17.5: three receiving threads, two workers killed mid-stream.
    // 1000 messages 2 ms apart: the workers stream for about 2 s, well past the second
    // kill (with 400 the job could end before 900 ms once start-up no longer paid
    // libfabric's 0.2 s initialisers).
    let prog = example("reenable_threads");
    let o = run(
        &["-n", "6", "--kill", "2@600ms", "--kill", "4@900ms", prog.to_str().unwrap(), "3", "1000"],
        Duration::from_secs(60),
    );
    let out = ok_failed(&o, &[2, 4]);
    assert!(out.contains("reenable_threads: ok threads=3"), "{out}");
    assert!(out.contains("failed=[2, 4] reenables=2") || out.contains("failed=[2, 4] reenables=1"), "{out}");
}

#[test]
fn hung_worker_is_detected_by_the_ring_and_excluded_when_resumed() {
    // SIGSTOP: the process does not exit, so only the in-band detector can tell. It is
    // resumed later and must find itself excluded and stop, never rejoin.
    let prog = example("manager_worker");
    let o = run(
        &["-n", "6", "--stop", "3@400ms", "--cont", "3@1500ms", prog.to_str().unwrap(), "1000"],
        Duration::from_secs(60),
    );
    let out = ok_failed(&o, &[3]);
    // Excluded, it exits by itself (code 75) once resumed.
    assert_eq!(
        (o.rank(3).status, o.rank(3).phase, o.rank(3).cause),
        (RankStatus::Exited(75), Phase::Running, Cause::Injected)
    );
    assert!(out.contains("(correct), failed ranks [3]"), "{out}");
    assert!(common::stderr(&o).contains("rank 3 was declared failed by the others"), "{}", common::stderr(&o));
}

#[test]
fn r5_r31_rank_killed_before_the_bootstrap_fence_leaves_every_survivor_running() {
    // Formerly every rank's init() failed ("rank 2 exited before reaching the fence").
    // Now the survivors start with rank 2 already failed in their world (R31).
    let prog = example("startup_check");
    let o = run(&["-n", "4", "--kill", "2@0ms", prog.to_str().unwrap()], Duration::from_secs(60));
    let out = ok_failed(&o, &[2]);
    for r in [0, 1, 3] {
        assert!(out.contains(&format!("startup_check: ok rank {r} of 4 at_init=[2] failed=[2] sum=7 ")), "{out}");
    }
}

#[test]
fn r5_init_returns_an_error_when_the_launcher_is_gone() {
    // A rank whose launcher is unreachable: init() returns Error::Init (the program
    // prints it and exits 3), it neither panics nor aborts nor hangs.
    let prog = example("startup_check");
    let o = common::as_orphan_rank(&mut std::process::Command::new(prog)).output().expect("run startup_check");
    let err = common::stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("FAILED init: ") && err.contains("bootstrap connect"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
