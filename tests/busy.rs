//! Busy is not dead: ranks that are runnable but starved of a core, or computing or
//! sleeping without MPI calls, are never declared failed, however late their heartbeats;
//! a stopped rank still is. The detector runs with its default settings (no test override
//! of its timeout), the machine loaded to 8x its cores by spinning processes
//! ([`common::Load`]); one rank is throttled off the CPU by a cgroup
//! ([`common::CpuThrottle`]: 5 ms of every second), so its heartbeats stop for most of
//! each second while its ring observer runs on time — the case the launcher's view of the
//! process (under `rtrun`) and the pidfd peer watch (without a witness) must refute.
//!
//! The only skip: no writable CPU cgroup here (not root, no cgroup filesystem), skip
//! `cgroup-cpu` ([`common::skip()`]: a failure unless `RT_EXPECTED_SKIPS` names it).

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env, stderr, CpuThrottle, Load};

const LIMIT: Duration = Duration::from_secs(300);
/// The runtime's own detector timeout, not the harness's 0.5 s.
const DEFAULT_FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "");

/// The `busy_check` lines of `out`: one per survivor, each naming `failed`.
fn check_lines(out: &str, n: u32, failed: &[u32]) {
    let lines: Vec<&str> = out.lines().filter(|l| l.starts_with("busy_check: ok")).collect();
    assert_eq!(lines.len(), n as usize - failed.len(), "one ok line per survivor\n{out}");
    for l in lines {
        assert!(l.contains(&format!("failed={failed:?}")), "{l}\n{out}");
    }
}

/// Rank 1 of 4 throttled to 5 ms of CPU a second, beside 16 spinning processes, for 10 s
/// without MPI calls; with the launcher as witness, then without one (`RT_WITNESS=0`: the
/// shared-memory peers' own view of its process). Nobody is failed. (Before the launcher
/// and the peers looked at the suspect's process, rank 1 was "declared failed by the
/// others (unresponsive)" within its first throttled second.)
#[test]
fn a_rank_throttled_off_the_cpu_is_not_failed() {
    let throttle = match CpuThrottle::new(Duration::from_millis(5), Duration::from_secs(1)) {
        Ok(t) => t,
        Err(why) => {
            common::skip("cgroup-cpu", &why);
            return;
        }
    };
    let cg = throttle.dir().to_string_lossy().into_owned();
    let prog = example("busy_check");
    let _load = Load::start(8);
    for witness in ["", "0"] {
        let env = [DEFAULT_FT, ("RT_WITNESS", witness), ("BUSY_CHECK_CGROUP", cg.as_str())];
        let o = run_env(&["-n", "4", prog.to_str().unwrap(), "10", "1"], &env, LIMIT);
        let out = ok(&o);
        check_lines(&out, 4, &[]);
        assert!(!stderr(&o).contains("declared failed"), "RT_WITNESS={witness:?}: {}", stderr(&o));
    }
}

/// 4 ranks on 2 cores beside 16 spinning processes: two ranks compute and two sleep for
/// 30 s without an MPI call, then validate the world: nobody failed, every rank ends
/// clean.
#[test]
fn ranks_computing_30s_under_8x_load_lose_nobody() {
    let _load = Load::start(8);
    let prog = example("busy_check");
    let o = run_env(&["-n", "4", prog.to_str().unwrap(), "30"], &[DEFAULT_FT], LIMIT);
    let out = ok(&o);
    check_lines(&out, 4, &[]);
    assert!(!stderr(&o).contains("declared failed"), "{}", stderr(&o));
}

/// Under the same load a rank SIGSTOPped while the others compute is still excluded,
/// with the launcher as witness and without one: the survivors validate a failed group
/// of exactly [1], and rank 1 ends abnormally.
#[test]
fn a_stopped_rank_under_8x_load_is_still_excluded() {
    let _load = Load::start(8);
    let prog = example("busy_check");
    for witness in ["", "0"] {
        let env = [DEFAULT_FT, ("RT_WITNESS", witness)];
        let o = run_env(&["-n", "4", "--stop", "1@2s", prog.to_str().unwrap(), "6"], &env, LIMIT);
        let out = ok_failed(&o, &[1]);
        check_lines(&out, 4, &[1]);
    }
}
