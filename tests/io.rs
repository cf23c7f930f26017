//! MPI-IO in Rust with real processes (R41): the checkpoint/restart example
//! (`examples/checkpoint.rs`) without a failure, and losing a rank — the leader that
//! writes the commit record, and another — at several points of its run, on shared
//! memory and over libfabric's tcp provider. Every survivor must end with the serial
//! result (the example checks it element by element and exits non-zero otherwise), all
//! from the same checkpoint, and at least one run must restart from a checkpoint it read
//! back over the shrunk decomposition.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(120);
/// A generous detector timeout: a busy 2-core machine's scheduling is no failure.
const FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "3000");
const FABRIC: [&str; 4] = ["--transport", "fabric", "--provider", "tcp"];

/// The serial result's checksum (the example's `result`).
fn expected() -> u64 {
    const G: usize = 1200;
    const P: u64 = 1_000_000_007;
    let mut x: Vec<u64> = (0..G as u64).collect();
    for t in 0..120u64 {
        x = (0..G).map(|i| (x[(i + G - 1) % G] + 2 * x[i] + x[(i + 1) % G] + t) % P).collect();
    }
    x.iter().fold(0, |a, v| (a + v) % P)
}

#[test]
fn the_checkpoint_example_runs_without_a_failure() {
    let prog = example("checkpoint");
    let out = ok(&run_env(&["-n", "4", prog.to_str().unwrap()], &[FT], LIMIT));
    for r in 0..4 {
        let line = format!("checkpoint: rank {r} of 4 result {} restarts 0 from step -", expected());
        assert!(out.lines().any(|l| l == line), "no `{line}`:\n{out}");
    }
}

/// The job runs about 1.3 s on shared memory (120 steps of 10 ms, a checkpoint every
/// 10): the kills land early, in the middle and late; over tcp start-up is slower.
#[test]
fn the_checkpoint_example_restarts_from_its_last_checkpoint_after_a_kill() {
    let sum = expected();
    let mut read_back = false;
    for (n, kill, transport) in
        [(4, "2@400ms", &[][..]), (4, "0@700ms", &[][..]), (4, "3@1000ms", &[][..]), (3, "1@900ms", &FABRIC[..])]
    {
        let prog = example("checkpoint");
        let ns = n.to_string();
        let mut a = vec!["-n", &ns, "--kill", kill];
        a.extend_from_slice(transport);
        a.push(prog.to_str().unwrap());
        let victim: u32 = kill[..1].parse().expect("a rank");
        let out = ok_failed(&run_env(&a, &[FT], LIMIT), &[victim]);
        let mut steps = Vec::new();
        for r in 0..n - 1 {
            let prefix = format!("checkpoint: rank {r} of {} result {sum} restarts ", n - 1);
            let line = out
                .lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("{kill} {transport:?}: rank {r} has no `{prefix}…`:\n{out}"));
            steps.push(line[prefix.len()..].to_string());
        }
        // Every survivor restarted from the same checkpoint ("1 from step 0": none was
        // written yet), or none restarted because the kill landed while the job was still
        // opening its file (a slow start on a loaded machine: "0 from step -").
        assert!(steps.windows(2).all(|w| w[0] == w[1]), "{kill}: restarts {steps:?}\n{out}");
        if steps[0] != "0 from step -" {
            let step: u64 = steps[0]
                .strip_prefix("1 from step ")
                .and_then(|s| s.parse().ok())
                .unwrap_or_else(|| panic!("{kill}: {steps:?}\n{out}"));
            assert!(step.is_multiple_of(10) && step < 120, "{kill}: {steps:?}\n{out}");
            read_back |= step > 0;
        }
    }
    assert!(read_back, "no run restarted from a checkpoint it read back");
}
