//! R8 and R9 with real process failures: `drivers/examples/group_check.rs` kills two of six
//! ranks, one after the other, and every survivor checks `group_failed()` and the group
//! operations (size, union, intersection, difference, translate_ranks, compare, free)
//! with the failed members on the world, a duplicate and a split half made before the
//! failures, then communicates through the survivors' group.

mod common;

use std::time::Duration;

use common::{example, ok_failed, run};

fn group_check(opts: &[&str]) {
    let prog = example("group_check");
    let mut args = vec!["-n", "6"];
    args.extend_from_slice(opts);
    args.push(prog.to_str().unwrap());
    let o = run(&args, Duration::from_secs(60));
    let out = ok_failed(&o, &[3, 4]);
    for r in [0, 1, 2, 5] {
        assert!(
            out.contains(&format!("group_check: ok rank {r} failed=[3, 4] alive=[0, 1, 2, 5]")),
            "rank {r} did not report: {out}"
        );
    }
    assert_eq!(out.matches("group_check: ok").count(), 4, "only survivors report: {out}");
    assert_eq!(o.status.code(), Some(0), "R7: rank 0 finalized, so the job exits with its code");
}

#[test]
fn r9_group_operations_with_killed_members() {
    group_check(&[]);
}

#[test]
fn r9_group_operations_with_killed_members_fabric_tcp() {
    group_check(&["--transport", "fabric", "--provider", "tcp"]);
}
