//! Busy is not dead: ranks that are runnable but starved of a core, or computing or
//! sleeping without MPI calls, are never declared failed, however late their heartbeats;
//! a stopped rank still is. Run with the machine loaded to 8× its cores by spinning
//! processes ([`common::Load`]) and the detector's default settings (no test override of
//! its timeout).

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env, stderr, Load};

const LIMIT: Duration = Duration::from_secs(300);
/// The runtime's own detector timeout, not the harness's 0.5 s.
const DEFAULT_FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "");

/// The `busy_check` lines of `out`, one per rank, each checked to name `failed`.
fn check_lines(out: &str, n: u32, failed: &str) {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("busy_check: ok")).collect();
    let survivors = (0..n).filter(|r| !failed.contains(&r.to_string())).count();
    assert_eq!(lines.len(), survivors, "one ok line per survivor\n{out}");
    for l in lines {
        assert!(l.contains(&format!("failed={failed}")), "{l}\n{out}");
    }
}

/// 4 ranks on 2 cores beside 16 spinning processes: two ranks compute and two sleep for
/// 30 s without an MPI call, then validate the world: nobody failed, every rank ends
/// clean.
#[test]
fn ranks_computing_30s_under_8x_load_lose_nobody() {
    let load = Load::start(8);
    let prog = example("busy_check");
    let o = run_env(&["-n", "4", prog.to_str().unwrap(), "30"], &[DEFAULT_FT], LIMIT);
    drop(load);
    let out = ok(&o);
    check_lines(&out, 4, "[]");
    assert!(!stderr(&o).contains("declared failed"), "{}", stderr(&o));
}

/// Under the same load a rank SIGSTOPped while the others compute is still excluded:
/// the survivors validate a failed group of exactly [1], and rank 1 ends abnormally.
#[test]
fn a_stopped_rank_under_8x_load_is_still_excluded() {
    let load = Load::start(8);
    let prog = example("busy_check");
    let o = run_env(&["-n", "4", "--stop", "1@2s", prog.to_str().unwrap(), "6"], &[DEFAULT_FT], LIMIT);
    println!("load: {} spinning processes", load.len());
    drop(load);
    let out = ok_failed(&o, &[1]);
    check_lines(&out, 4, "[1]");
}
