//! Process topologies with real processes (issue 33 item 1, R38), through the Rust API:
//! `drivers/examples/topo_fault.rs` — every query checked against MPI's definitions with
//! no failure, then with a dead process the survivors recognized (it is in every new
//! communicator as a recognized failure and contributes no distributed-graph edge) and
//! with one they did not (creation errs at every survivor, then succeeds after
//! `validate`), and neighbourhood collectives on a grid — block by block, and with a
//! neighbour dead (an error until the grid is validated, then its blocks untouched), and
//! with a rank dying in the middle of a run of them — on shared memory and over libfabric
//! tcp. The C interface's topologies are
//! `tests/abi.rs`'s `topologies_pass_on_shared_memory_and_tcp`.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(120);
/// A generous detector timeout: a busy 2-core machine's scheduling is no failure.
const FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "3000");
const FABRIC: [&str; 4] = ["--transport", "fabric", "--provider", "tcp"];

fn run(n: u32, mode: &str, transport: &[&str]) {
    let prog = example("topo_fault");
    let ranks = n.to_string();
    let mut a = vec!["-n", &ranks];
    a.extend_from_slice(transport);
    a.extend([prog.to_str().unwrap(), mode]);
    let o = run_env(&a, &[FT], LIMIT);
    let (out, survivors) = if mode == "plain" { (ok(&o), n) } else { (ok_failed(&o, &[n - 1]), n - 1) };
    for r in 0..survivors {
        let want = format!("topo_fault: ok rank {r} {mode}");
        assert!(out.lines().any(|l| l == want), "rank {r}, {n} ranks {mode} {transport:?}:\n{out}");
    }
    assert!(!out.contains("FAILED"), "{out}");
}

#[test]
fn grids_graphs_and_distributed_graphs_answer_as_mpi_says() {
    run(4, "plain", &[]);
    run(6, "plain", &[]);
    run(4, "plain", &FABRIC);
}

#[test]
fn a_recognized_dead_process_stays_in_new_topologies() {
    run(4, "recognized", &[]);
    run(6, "recognized", &FABRIC);
}

#[test]
fn neighbourhood_collectives_err_on_an_unrecognized_failure_then_skip_it() {
    run(4, "neighbor", &[]);
    run(6, "neighbor", &FABRIC);
}

/// A rank dies in the middle of a run of neighbourhood collectives: every survivor, its
/// neighbours and the others alike, ends the run with `RankFailStop` (none hangs waiting
/// for a live neighbour that stopped exchanging), validates and exchanges again.
#[test]
fn a_rank_dying_between_neighbourhood_collectives_stops_every_survivor() {
    run(6, "neighbor_mid", &[]);
    run(8, "neighbor_mid", &[]);
    run(6, "neighbor_mid", &FABRIC);
}

#[test]
fn an_unrecognized_dead_process_fails_creation_everywhere() {
    run(4, "unrecognized", &[]);
    run(4, "unrecognized", &FABRIC);
}
