//! Multi-host runs (`rtrun --host`) on hosts made inside this machine: three network
//! namespaces `rt-h0..rt-h2` joined by the bridge `rtbr0` (10.77.0.1; hosts at
//! 10.77.0.11..13), made by `ci-containers/netns-cluster.sh`. No traffic leaves the
//! machine. `rtrun --host rt-h0=10.77.0.11,... --launch-agent 'ip netns exec {host}'
//! --kv-addr 10.77.0.1` starts each rank in its namespace: same-host peers use shared
//! memory, the others libfabric over the veths (tcp and sockets providers).
//!
//! The only allowed skip: when this machine cannot create network namespaces (not root,
//! no `ip`, no netns support), each test skips as `netns` and returns (`common::skip`: a
//! failure unless `RT_EXPECTED_SKIPS` names it, as in CI, where namespaces work). The
//! cluster is brought up by the first test that needs it and torn down by a guard when
//! the last one ends, also when a test fails.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env, stderr};

const LIMIT: Duration = Duration::from_secs(60);
const HOSTS: &str = "rt-h0=10.77.0.11,rt-h1=10.77.0.12,rt-h2=10.77.0.13";
const AGENT: &str = "ip netns exec {host}";
const KV_ADDR: &str = "10.77.0.1";
/// The three "hosts" share this machine's cores (2 in CI, with other work): a generous
/// detector timeout keeps a descheduled rank from being taken for a hung one. These tests
/// check placement, routing and data; the launcher reports the killed rank's exit.
const FT_TIMEOUT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "10000");

/// This test binary's cluster (see `common::netns`).
fn cluster() -> Option<common::netns::Cluster> {
    common::netns::cluster(None)
}

/// Bytes received by the bridge port of host `i` (traffic its namespace sent).
fn bridge_port_rx(i: usize) -> u64 {
    std::fs::read_to_string(format!("/sys/class/net/rtb-h{i}/statistics/rx_bytes"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// Asserts no shared-memory object of the job whose rank 0 printed `shm=/rt-<jobid>-h0`
/// is left in /dev/shm.
fn assert_segments_gone(out: &str) {
    let shm = out.split("shm=/").nth(1).expect("segment name printed").trim();
    let job = shm.strip_suffix("-h0").unwrap_or(shm);
    let left: Vec<String> = common::rt_segments().into_iter().filter(|n| n.starts_with(job)).collect();
    assert!(left.is_empty(), "segments of {job} left behind: {left:?}");
}

/// `rtrun -n N` over the three namespaces with `provider`; returns rank 0's output.
fn p2p_on_cluster(provider: &str, n: usize, extra: &[&str], args: &[&str]) -> String {
    let prog = example("p2p_check");
    let ranks = n.to_string();
    let mut a = vec!["-n", &ranks, "--host", HOSTS, "--launch-agent", AGENT, "--kv-addr", KV_ADDR];
    a.extend_from_slice(&["--provider", provider]);
    a.extend_from_slice(extra);
    a.push(prog.to_str().unwrap());
    a.extend_from_slice(args);
    let before: Vec<u64> = (0..3).map(bridge_port_rx).collect();
    let out = ok(&run_env(&a, &[FT_TIMEOUT], LIMIT));
    assert!(out.contains(&format!("p2p_check: ok ranks={n}")), "{out}");
    // Rank 0 runs in rt-h0 and binds its endpoint to the veth address given by --host.
    assert!(out.contains("fabric address 10.77.0.11 on rtn-h0"), "{out}");
    let fi_name = if provider == "tcp" { "tcp;ofi_rxm" } else { provider };
    assert!(out.contains(&format!("libfabric {fi_name} on domain rtn-h0")), "{out}");
    let same_host = n.div_ceil(3);
    assert!(out.contains(&format!("shared memory to {same_host} of {n} ranks")), "{out}");
    assert!(out.contains(&format!("to {} of {n} ranks; ", n - same_host)), "{out}");
    // Every host sent through its bridge port: the data crossed the veths.
    for (i, b) in before.iter().enumerate() {
        let sent = bridge_port_rx(i) - b;
        assert!(sent > 64 << 10, "host rt-h{i} sent only {sent} bytes through the bridge");
    }
    assert_segments_gone(&out);
    out
}

#[test]
fn tcp_all_pairs_3_and_6_ranks_on_3_hosts() {
    let Some(_cluster) = cluster() else { return };
    p2p_on_cluster("tcp", 3, &[], &["10", "4194304", "31"]);
    p2p_on_cluster("tcp", 6, &[], &["8", "2097152", "32"]);
}

#[test]
fn sockets_all_pairs_3_and_6_ranks_on_3_hosts() {
    let Some(_cluster) = cluster() else { return };
    p2p_on_cluster("sockets", 3, &[], &["10", "4194304", "33"]);
    // Filled by slot: ranks 0,1 on rt-h0, 2,3 on rt-h1, 4,5 on rt-h2.
    p2p_on_cluster("sockets", 6, &["--map-by", "slot"], &["8", "2097152", "34"]);
}

/// The victim (rank 5, on rt-h2 by round-robin placement) SIGKILLs itself while every
/// survivor — on all three hosts, rank 0 on rt-h0 — blocks receiving from it: each must
/// get `RankFailStop { rank: 5 }`, then the survivors' own stream still arrives in order.
#[test]
fn fail_stop_across_hosts_blocked_recv_6_ranks() {
    let Some(_cluster) = cluster() else { return };
    let prog = example("ft_check");
    let a = [
        "-n",
        "6",
        "--host",
        HOSTS,
        "--launch-agent",
        AGENT,
        "--kv-addr",
        KV_ADDR,
        "--provider",
        "tcp",
        "--tag-output",
        prog.to_str().unwrap(),
        "blocked-recv",
    ];
    let o = run_env(&a, &[FT_TIMEOUT], LIMIT);
    let out = ok_failed(&o, &[5]);
    for r in 0..5 {
        assert!(out.contains(&format!("[{r}] ft_check: ok rank {r} blocked-recv")), "rank {r}: {out}");
    }
    assert!(!out.contains("[5] ft_check: ok"), "{out}");
    assert_eq!(o.status.code(), Some(0), "rank 0 finalized: {}", stderr(&o));
}

/// Named hosts without a launch agent are simulated on this machine (no namespaces
/// needed): per-host shared memory, loopback fabric between the "hosts".
#[test]
fn simulated_hosts_without_agent_use_shm_per_host_and_loopback_fabric() {
    let prog = example("p2p_check");
    let o = run_env(
        &["-n", "4", "--host", "a,b", "--provider", "tcp", prog.to_str().unwrap(), "8", "1048576", "35"],
        &[FT_TIMEOUT],
        LIMIT,
    );
    let out = ok(&o);
    assert!(out.contains("p2p_check: ok ranks=4"), "{out}");
    assert!(out.contains("fabric address 127.0.0.1 on lo"), "{out}");
    assert!(out.contains("shared memory to 2 of 4 ranks"), "{out}");
    assert!(out.contains("libfabric tcp;ofi_rxm on domain lo"), "{out}");
    assert_segments_gone(&out);
}

/// Across hosts, the job secret reaches each rank on its standard input, never in a
/// command line (`ip netns exec`'s words are world-readable in `/proc/PID/cmdline`) or an
/// environment: while the ranks run on three hosts, no process on the machine shows it,
/// and the ranks authenticated with it (they fenced through the key-value service).
#[test]
fn job_secret_in_no_command_line_or_environment_across_hosts() {
    use std::io::BufRead as _;
    let Some(_cluster) = cluster() else { return };
    let mut child = std::process::Command::new(common::rtrun())
        .args(["-n", "3", "--host", HOSTS, "--launch-agent", AGENT, "--kv-addr", KV_ADDR, "--tag-output"])
        .arg(common::rt_testprog())
        .args(["secret", "3000"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn rtrun");
    let (tx, rx) = std::sync::mpsc::channel();
    let out = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for l in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let mut secrets = Vec::new();
    while secrets.len() < 3 {
        let Ok(l) = rx.recv_timeout(LIMIT) else {
            let _ = child.kill();
            panic!("no secret lines from 3 ranks: {secrets:?}, {}", stderr(&child.wait_with_output().unwrap()));
        };
        if let Some(s) = l.split_whitespace().skip_while(|w| *w != "secret").nth(1) {
            secrets.push(s.to_owned());
        }
    }
    assert!(secrets.iter().all(|s| s.len() == 64 && *s == secrets[0]), "{secrets:?}");
    let mut looked = 0;
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        if e.file_name().to_string_lossy().parse::<u32>().is_err() {
            continue;
        }
        for f in ["cmdline", "environ"] {
            let Ok(b) = std::fs::read(e.path().join(f)) else { continue };
            looked += 1;
            let hit = b.windows(64).any(|w| w == secrets[0].as_bytes());
            assert!(!hit, "{}/{f} shows the job secret", e.path().display());
        }
    }
    assert!(looked > 10, "read only {looked} /proc files");
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

/// Accept/connect between two jobs on different hosts (R40): a job of 2 accepting
/// (`abi/c/connect_check.c server`) and a job of 3 connecting (`client`), each under its
/// own `rtrun` with its own hosts, over tcp — first on disjoint hosts (rt-h0 against
/// rt-h1 and rt-h2), then sharing rt-h1. The port is the accepting launcher's service on
/// the bridge (`--kv-addr`); messages both ways, a merge and an allreduce over both jobs,
/// disconnect and close, every rank of both jobs checked, and the traffic crossed the
/// accepting host's veth.
#[test]
fn two_jobs_on_different_hosts_connect_through_a_port() {
    let Some(_cluster) = cluster() else { return };
    let prog = common::abi_program("abi/c/connect_check.c");
    let lib = common::abi_lib().to_string_lossy().into_owned();
    let env = [FT_TIMEOUT, ("LD_LIBRARY_PATH", lib.as_str())];
    let layouts = [
        ("rt-h0=10.77.0.11", "rt-h1=10.77.0.12,rt-h2=10.77.0.13"),
        ("rt-h0=10.77.0.11,rt-h1=10.77.0.12", "rt-h1=10.77.0.12,rt-h2=10.77.0.13"),
    ];
    for (i, (server_hosts, client_hosts)) in layouts.into_iter().enumerate() {
        let file = std::env::temp_dir().join(format!("rt-port-hosts-{}-{i}", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let job = |n: &str, hosts: &str, role: &str| {
            let mut c = std::process::Command::new(common::rtrun());
            c.args(["-n", n, "--host", hosts, "--launch-agent", AGENT, "--kv-addr", KV_ADDR, "--provider", "tcp"]);
            c.arg(&prog).arg(role).arg(&file).envs(env);
            c.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
            c.spawn().expect("start rtrun")
        };
        let before = bridge_port_rx(0);
        let server = job("2", server_hosts, "server");
        let client = job("3", client_hosts, "client");
        let outputs = [(server, 2), (client, 3)].map(|(mut child, n)| {
            let start = std::time::Instant::now();
            while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(120) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            (child.wait_with_output().unwrap(), n)
        });
        let port = std::fs::read_to_string(&file).unwrap_or_default();
        let _ = std::fs::remove_file(&file);
        assert!(port.starts_with(&format!("rtport/{KV_ADDR}:")), "port {port:?}");
        for ((o, n), role) in outputs.iter().zip(["server", "client"]) {
            let out = String::from_utf8_lossy(&o.stdout);
            assert!(o.status.success(), "{role} job, hosts {layouts:?}[{i}]:\n{out}\n{}", stderr(o));
            for r in 0..*n {
                assert!(out.contains(&format!("connect_check: rank {r} ok (")), "{role} rank {r} [{i}]:\n{out}");
            }
            assert!(!out.contains("FAILED"), "{role} [{i}]:\n{out}");
        }
        let sent = bridge_port_rx(0) - before;
        assert!(sent > 4 << 10, "rt-h0 sent only {sent} bytes through the bridge");
    }
}
