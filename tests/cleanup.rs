//! The job's shared-memory segment is gone after a normal exit and after a `--kill`ed job,
//! whenever the kill lands (before, during or after start-up). One test, so no other job
//! of this binary creates segments meanwhile.

mod common;

use std::time::Duration;

use common::{example, ok, rt_segments, run, Cause, RankStatus};

#[test]
fn segment_removed_after_normal_exit_and_after_kills() {
    let before = rt_segments();
    let prog = example("p2p_check");
    let prog = prog.to_str().unwrap();
    ok(&run(&["-n", "4", prog, "4"], Duration::from_secs(60)));
    for at in ["0ms", "2ms", "10ms", "40ms", "150ms"] {
        for victim in ["0", "2"] {
            let kill = format!("{victim}@{at}");
            // Without the failure detector survivors may block on the victim:
            // the timeout ends the job; what matters here is the cleanup.
            let o = run(&["-n", "4", "--timeout", "3", "--kill", &kill, prog, "200"], Duration::from_secs(30));
            assert!(!o.status.success(), "a killed job reports failure ({kill})");
            let v: u32 = victim.parse().unwrap();
            o.assert_each("the victim SIGKILLed by --kill", |r| {
                r.rank != v || (r.status == RankStatus::Signaled(9) && r.cause == Cause::Injected)
            });
            let now = rt_segments();
            let leaked: Vec<_> = now.iter().filter(|s| !before.contains(s)).collect();
            assert!(leaked.is_empty(), "segments left after --kill {kill}: {leaked:?}");
        }
    }
}
