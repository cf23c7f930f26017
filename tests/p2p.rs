//! Multi-process point-to-point tests through `rtrun` (real processes): shared memory,
//! and `--transport fabric` over the libfabric `tcp` and `sockets` providers on loopback
//! (2, 4 and 8 ranks, sizes up to 16 MiB, checksums and per-source order).

mod common;

use std::time::Duration;

use common::{example, ok, run, run_env, stderr, Cause};

const LIMIT: Duration = Duration::from_secs(120);

fn p2p(n: &str, args: &[&str], env: &[(&str, &str)]) {
    let prog = example("p2p_check");
    let mut a = vec!["-n", n, prog.to_str().unwrap()];
    a.extend_from_slice(args);
    let out = ok(&run_env(&a, env, LIMIT));
    assert!(out.contains(&format!("p2p_check: ok ranks={n}")), "{out}");
    let shm = out.split("shm=/").nth(1).expect("segment name printed").trim();
    assert!(!std::path::Path::new("/dev/shm").join(shm).exists(), "segment {shm} left behind");
}

/// The all-pairs check with every peer on libfabric `provider`; returns stdout.
fn p2p_fabric(provider: &str, n: &str, args: &[&str]) -> String {
    p2p_fabric_env(provider, n, args, &[])
}

/// As [`p2p_fabric`], with `env` added to the job's environment.
fn p2p_fabric_env(provider: &str, n: &str, args: &[&str], env: &[(&str, &str)]) -> String {
    let prog = example("p2p_check");
    let mut a = vec!["-n", n, "--transport", "fabric", "--provider", provider, prog.to_str().unwrap()];
    a.extend_from_slice(args);
    let out = ok(&run_env(&a, env, LIMIT));
    assert!(out.contains(&format!("p2p_check: ok ranks={n}")), "{out}");
    let fi_name = if provider == "tcp" { "tcp;ofi_rxm" } else { provider };
    assert!(out.contains(&format!("transport: libfabric {fi_name} on domain")), "{out}");
    assert!(!out.contains("shared memory"), "fabric forced for every peer: {out}");
    out
}

#[test]
fn fabric_tcp_all_pairs_2_ranks_up_to_16mib() {
    p2p_fabric("tcp", "2", &["10", "16777216", "21"]);
}

#[test]
fn fabric_tcp_all_pairs_4_ranks() {
    p2p_fabric("tcp", "4", &["8", "4194304", "22"]);
}

#[test]
fn fabric_tcp_all_pairs_8_ranks() {
    p2p_fabric("tcp", "8", &["4", "1048576", "23"]);
}

/// Over `tcp;ofi_rxm` the rank gives libfabric a bounded rxm receive pool (256 buffers,
/// `FI_OFI_RXM_MSG_RX_SIZE`) unless the user sized it: left unset, rxm takes 4096 shared
/// buffers of 16 KiB, 64 MiB that every rank allocates and clears at start-up
/// (bench/history/NOTEBOOK.md §0.17). A value the user set is passed through unchanged, and a
/// provider without rxm (sockets) is not told about it.
#[test]
fn fabric_tcp_bounds_the_rxm_receive_pool_unless_the_user_sized_it() {
    let out = p2p_fabric("tcp", "2", &["4", "1048576", "27"]);
    assert!(out.contains("ofi_rxm receive buffers 256;"), "{out}");
    let out = p2p_fabric_env("tcp", "2", &["4", "1048576", "28"], &[("FI_OFI_RXM_MSG_RX_SIZE", "48")]);
    assert!(out.contains("ofi_rxm receive buffers 48 (FI_OFI_RXM_MSG_RX_SIZE set);"), "{out}");
    let out = p2p_fabric("sockets", "2", &["2", "65536", "29"]);
    assert!(!out.contains("ofi_rxm receive buffers"), "{out}");
}

#[test]
fn fabric_sockets_all_pairs_2_ranks_up_to_16mib() {
    p2p_fabric("sockets", "2", &["10", "16777216", "24"]);
}

#[test]
fn fabric_sockets_all_pairs_4_ranks() {
    p2p_fabric("sockets", "4", &["8", "4194304", "25"]);
}

#[test]
fn fabric_sockets_all_pairs_8_ranks() {
    p2p_fabric("sockets", "8", &["4", "1048576", "26"]);
}

#[test]
fn all_pairs_random_sizes_2_ranks() {
    p2p("2", &["12"], &[]);
}

#[test]
fn all_pairs_random_sizes_4_ranks() {
    p2p("4", &["10"], &[]);
}

#[test]
fn all_pairs_random_sizes_8_ranks() {
    p2p("8", &["8"], &[]);
}

#[test]
fn all_pairs_without_cma_streams_rendezvous() {
    p2p("4", &["8", "1000000", "11"], &[("RT_SHM_CMA", "0")]);
}

#[test]
fn all_pairs_single_copy_for_every_rendezvous() {
    p2p("4", &["8", "2000000", "13"], &[("RT_CMA_MIN", "0")]);
}

#[test]
fn all_pairs_tiny_rings_and_eager_limit_back_pressure() {
    p2p("4", &["20", "200000", "5"], &[("RT_RING_BYTES", "4096"), ("RT_EAGER_LIMIT", "64")]);
}

#[test]
fn ring_example_2_4_8() {
    let prog = example("ring");
    for n in [2u64, 4, 8] {
        let out = ok(&run(&["-n", &n.to_string(), prog.to_str().unwrap(), "5"], LIMIT));
        let want = 5 * n * (n - 1) / 2;
        assert!(out.contains(&format!("final token {want}")), "n={n}: {out}");
    }
}

#[test]
fn bad_input_errors_self_sends_truncation_probe_dup() {
    let prog = example("error_check");
    for n in ["2", "3"] {
        let out = ok(&run(&["-n", n, prog.to_str().unwrap()], LIMIT));
        assert_eq!(out.matches("error_check: ok").count(), n.parse::<usize>().unwrap(), "{out}");
    }
}

#[test]
fn r3_errors_are_fatal_aborts_the_group_with_the_error_class() {
    let prog = example("error_check");
    let o = run(&["-n", "3", prog.to_str().unwrap(), "fatal"], LIMIT);
    assert_eq!(o.status.code(), Some(6), "MPI_ERR_RANK class as exit code; stderr: {}", stderr(&o));
    assert!(stderr(&o).contains("invalid rank 8"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("was not aborted"));
    // Every rank of the group was aborted: rank 1 asked (it exits or is killed first),
    // the others were killed by the launcher.
    o.assert_each("aborted with the error class", |r| r.cause == Cause::Abort(6) && r.is_abnormal());
}

#[test]
fn singleton_without_rtrun() {
    let o = std::process::Command::new(example("error_check")).output().expect("run singleton");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("error_check: ok rank 0"));
}

#[test]
fn r3_errors_are_fatal_on_a_sub_communicator_aborts_only_its_group() {
    let prog = example("error_check");
    let o = run(&["-n", "4", prog.to_str().unwrap(), "fatal-sub"], LIMIT);
    let out = common::stdout(&o);
    assert!(out.contains("error_check: survived rank 0") && out.contains("error_check: survived rank 2"), "{out}");
    assert!(stderr(&o).contains("aborting the communicator group"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("was not aborted"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(0), "R7: rank 0 finalized after the failures");
    o.assert_each("odd ranks aborted, even ranks clean", |r| {
        if r.rank % 2 == 1 {
            matches!(r.cause, Cause::Abort(_)) && r.is_abnormal()
        } else {
            r.is_clean()
        }
    });
}
