//! Shared-memory peer death seen through pidfds (T-FD "local evidence"), with the other
//! sources of evidence shut out: `RT_LAUNCHER_NOTICES=0` stops
//! the progress thread from asking the launcher which ranks exited, and a 60 s detector
//! timeout keeps the ring detector from declaring anything during the test. What is left
//! is the pidfd of each shared-memory peer, polled every progress tick, and the
//! segment's departure marks that tell a clean exit from a failure.
//!
//! A control run with the watch off too (`RT_PIDFD=0`) and a 3 s detector timeout shows
//! that the launcher really is silent then: the failure is only seen when the detector
//! times out.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

/// Only the pidfd watch can tell: no launcher notices, a detector that never fires.
const PIDFD_ONLY: [(&str, &str); 2] = [("RT_LAUNCHER_NOTICES", "0"), ("RT_FT_TIMEOUT_MS", "60000")];

/// Survivors must learn of the exit well within this (the detector would take 60 s).
const PIDFD_BOUND_MS: f64 = 1000.0;

/// The `detect_ms=` values the survivors printed.
fn detect_times(out: &str) -> Vec<f64> {
    out.lines()
        .filter_map(|l| l.split("detect_ms=").nth(1))
        .map(|v| v.split_whitespace().next().unwrap_or("").parse::<f64>().expect("detect_ms value"))
        .collect()
}

#[test]
fn sigkilled_shm_peer_is_failed_through_its_pidfd() {
    let prog = example("exit_check");
    for n in ["4", "8"] {
        let o = run_env(&["-n", n, prog.to_str().unwrap(), "kill"], &PIDFD_ONLY, Duration::from_secs(60));
        let out = ok_failed(&o, &[n.parse::<u32>().unwrap() - 1]);
        let times = detect_times(&out);
        let survivors = n.parse::<usize>().unwrap() - 1;
        assert_eq!(times.len(), survivors, "every survivor reports: {out}");
        assert_eq!(out.matches(&format!("failed=[{survivors}]")).count(), survivors, "{out}");
        let worst = times.iter().copied().fold(0.0, f64::max);
        assert!(worst < PIDFD_BOUND_MS, "-n {n}: detection took {worst} ms: {out}");
        eprintln!("pidfd detection, -n {n}: {times:?} ms");
    }
}

#[test]
fn clean_finalize_of_a_peer_is_a_departure_not_a_failure() {
    let prog = example("exit_check");
    let o = run_env(&["-n", "4", prog.to_str().unwrap(), "finalize"], &PIDFD_ONLY, Duration::from_secs(60));
    let out = ok(&o);
    // Each survivor saw the exit (its receive from the departed rank completed) and
    // found the failed group empty and wildcards enabled (checked in the example).
    assert_eq!(out.matches("exit_check: ok").count(), 3, "{out}");
    assert_eq!(out.matches("failed=[]").count(), 3, "{out}");
    let worst = detect_times(&out).into_iter().fold(0.0, f64::max);
    assert!(worst < PIDFD_BOUND_MS + 1000.0, "departure seen after {worst} ms: {out}");
}

/// The fault-injection modes of `drivers/examples/ft_check.rs` whose victim dies without a
/// rendezvous in flight (so neither CMA `ESRCH` nor a hung-process detector can be the
/// evidence), with only the pidfd watch on.
#[test]
fn kill_matrix_modes_with_only_the_pidfd_watch() {
    let prog = example("ft_check");
    for mode in ["before-send", "eager", "blocked-recv", "any-source", "waitall", "sendrecv", "poison"] {
        let o = run_env(&["-n", "4", prog.to_str().unwrap(), mode], &PIDFD_ONLY, Duration::from_secs(60));
        let out = ok_failed(&o, &[3]);
        assert_eq!(out.matches("ft_check: ok").count(), 3, "{mode}: every survivor reports: {out}");
        let worst = detect_times(&out).into_iter().fold(0.0, f64::max);
        assert!(worst < PIDFD_BOUND_MS, "{mode}: detection took {worst} ms: {out}");
    }
}

#[test]
fn control_without_the_watch_only_the_detector_sees_the_kill() {
    let prog = example("exit_check");
    let env = [("RT_LAUNCHER_NOTICES", "0"), ("RT_PIDFD", "0"), ("RT_FT_TIMEOUT_MS", "3000")];
    let o = run_env(&["-n", "4", prog.to_str().unwrap(), "kill"], &env, Duration::from_secs(60));
    let out = ok_failed(&o, &[3]);
    let times = detect_times(&out);
    assert_eq!(times.len(), 3, "{out}");
    // Neither the launcher nor the pidfds told: the ring detector's timeout did.
    assert!(times.iter().all(|&t| t >= 2500.0), "failure seen before the detector timeout: {times:?}");
}
