//! Start-up that runs through failures (R31): `rtrun --kill R@T` and `--stop R@T` with T
//! swept over start-up, on shared memory, libfabric tcp and three network-namespace
//! hosts, at 4 and 8 ranks (6 on the hosts), the victim rank 0 or another. Every rank but
//! the victim must print the `ok` line of `drivers/examples/startup_check.rs` (init succeeded, a
//! validate and an allreduce over the survivors gave the right sum), all with the same
//! validated failed group, naming no rank but the victim; the job exits 0. A fault at
//! T = 0 lands before the victim could join the first start-up fence, so every survivor's
//! world must already hold it failed when `init` returns.
//!
//! Each configuration first runs without a fault to measure when `init` ends (from the
//! spawn of `rtrun` to the last rank's return), and sweeps T from 0 to 100 ms past that.
//! By default (`cargo test`, `make test`) T steps by 60 ms from an offset that rotates
//! with the clock (0, 20 or 40 ms), the victim and the fault alternating; with
//! `RT_STARTUP_SWEEP=full` (`make startup-sweep`) T steps by 20 ms and every point runs
//! both faults on both victims. Each configuration prints `sweep: CONFIG runs=.. lost=..
//! job_ms min/median/max=..` and fails if any job was lost (any check above not met, or
//! the job exceeding its time limit); every lost job is listed with its output.
//!
//! `startup_failures_through_the_abi_*` run the C twin (`abi/c/startup_check.c`, MPI_Init,
//! MPI_Comm_set_errhandler, MPIX_Comm_validate, MPI_Allreduce, MPIX_Comm_agree) on
//! `libmpi_abi.so.1` under the same sweep and checks.
//!
//! The only allowed skip: the namespace configuration skips as `netns` where this machine
//! cannot create network namespaces (as `tests/multihost.rs`; `common::skip`: a failure
//! unless `RT_EXPECTED_SKIPS` names it).

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{example, try_run_env};

const LIMIT: Duration = Duration::from_secs(60);
/// The hosts: namespaces `rs-h0..rs-h2` on bridge `rsbr0`, 10.78.0.0/24 — a cluster of
/// this test's own (`NETNS_TAG=rs NETNS_NET=10.78.0`), so it never shares one that
/// `tests/multihost.rs` (or another run) brings up and down.
const HOSTS: &str = "rs-h0=10.78.0.11,rs-h1=10.78.0.12,rs-h2=10.78.0.13";
const AGENT: &str = "ip netns exec {host}";
const KV_ADDR: &str = "10.78.0.1";
/// How far past the measured end of start-up the sweep goes.
const PAST_INIT: u128 = 100;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    Kill,
    Stop,
}

impl Fault {
    fn flag(self) -> &'static str {
        match self {
            Fault::Kill => "--kill",
            Fault::Stop => "--stop",
        }
    }
}

/// One configuration: name, ranks, extra `rtrun` options, the non-0 victim, and whether
/// the program is the C twin through the standard ABI (`abi/c/startup_check.c` on
/// `libmpi_abi.so.1`) instead of the Rust example.
struct Config {
    name: &'static str,
    ranks: usize,
    opts: Vec<&'static str>,
    other_victim: usize,
    abi: bool,
}

fn unix_ms() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis())
}

/// A parsed `ok` line.
#[derive(Debug)]
struct OkLine {
    rank: usize,
    at_init: String,
    failed: String,
    init_end: u128,
}

fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(key)? + key.len();
    let rest = &line[at..];
    if rest.starts_with('[') {
        rest.find(']').map(|e| &rest[..=e])
    } else {
        Some(rest.split_whitespace().next().unwrap_or(""))
    }
}

fn ok_lines(out: &str, n: usize) -> Vec<OkLine> {
    let mut v = Vec::new();
    for line in out.lines().filter(|l| l.starts_with("startup_check: ok rank ")) {
        let rank = field(line, "ok rank ").and_then(|s| s.parse().ok()).unwrap_or(usize::MAX);
        if field(line, " of ").and_then(|s| s.parse::<usize>().ok()) != Some(n) {
            continue;
        }
        v.push(OkLine {
            rank,
            at_init: field(line, "at_init=").unwrap_or("?").to_owned(),
            failed: field(line, "failed=").unwrap_or("?").to_owned(),
            init_end: field(line, "init_end_unix_ms=").and_then(|s| s.parse().ok()).unwrap_or(0),
        });
    }
    v
}

/// Runs one job; `Ok(job time)` when every check of the module doc holds, else `Err`
/// with the reason and the job's output.
fn run_case(cfg: &Config, fault: Option<(Fault, usize, u128)>) -> Result<(Duration, u128), String> {
    let prog = if cfg.abi { common::abi_program("abi/c/startup_check.c") } else { example("startup_check") };
    let lib = common::abi_lib().to_string_lossy().into_owned();
    let env: Vec<(&str, &str)> = if cfg.abi { vec![("LD_LIBRARY_PATH", lib.as_str())] } else { vec![] };
    common::rtrun(); // built before the clock starts
    let ranks = cfg.ranks.to_string();
    let spec = fault.map(|(_, v, t)| format!("{v}@{t}ms"));
    let mut args = vec!["-n", ranks.as_str()];
    args.extend(cfg.opts.iter().copied());
    if let (Some((f, _, _)), Some(s)) = (fault, spec.as_deref()) {
        args.extend([f.flag(), s]);
    }
    args.push(prog.to_str().unwrap());
    let spawned = unix_ms();
    let t0 = Instant::now();
    let o = try_run_env(&args, &env, LIMIT)?;
    let took = t0.elapsed();
    let out = common::stdout(&o);
    let err = common::stderr(&o);
    let show = |why: String| format!("{why}\nargs {args:?}\nstdout:\n{out}\nstderr:\n{err}");
    if o.status.code() != Some(0) {
        return Err(show(format!("job exit status {:?}", o.status)));
    }
    if err.contains("panicked") || err.contains("FAILED") {
        return Err(show("a rank panicked or failed a check".into()));
    }
    let lines = ok_lines(&out, cfg.ranks);
    let victim = fault.map(|(_, v, _)| v);
    for r in (0..cfg.ranks).filter(|&r| Some(r) != victim) {
        let n = lines.iter().filter(|l| l.rank == r).count();
        if n != 1 {
            return Err(show(format!("survivor rank {r} printed {n} ok lines, want 1")));
        }
    }
    let allowed = |s: &str| s == "[]" || victim.is_some_and(|v| s == format!("[{v}]"));
    let survivors: Vec<&OkLine> = lines.iter().filter(|l| Some(l.rank) != victim).collect();
    for l in &survivors {
        if !allowed(&l.at_init) || !allowed(&l.failed) {
            return Err(show(format!("rank {} names a rank other than the victim failed: {l:?}", l.rank)));
        }
        if l.failed != survivors[0].failed {
            return Err(show(format!("validated groups differ: {l:?} vs {:?}", survivors[0])));
        }
    }
    if let Some((_, v, 0)) = fault {
        // Before the victim could join the first fence: in every survivor's world at init.
        if let Some(l) = survivors.iter().find(|l| l.at_init != format!("[{v}]")) {
            return Err(show(format!("fault at 0 ms: rank {} started without the victim failed: {l:?}", l.rank)));
        }
    }
    let init_end = lines.iter().map(|l| l.init_end.saturating_sub(spawned)).max().unwrap_or(0);
    Ok((took, init_end))
}

fn full() -> bool {
    std::env::var("RT_STARTUP_SWEEP").is_ok_and(|v| v == "full")
}

/// The sweep of the module doc over one configuration.
fn sweep(cfg: &Config) {
    // When start-up ends here: the slowest of three fault-free jobs.
    let mut end = 0;
    for _ in 0..3 {
        match run_case(cfg, None) {
            Ok((_, e)) => end = end.max(e),
            Err(why) => panic!("{}: the fault-free job fails: {why}", cfg.name),
        }
    }
    let last = end + PAST_INIT;
    let (step, offset) = if full() { (20, 0) } else { (60, (unix_ms() / 1000 % 3) * 20) };
    let mut cases = Vec::new();
    for (i, t) in (offset..=last).step_by(step as usize).enumerate() {
        if full() {
            for f in [Fault::Kill, Fault::Stop] {
                for v in [0, cfg.other_victim] {
                    cases.push((f, v, t));
                }
            }
        } else {
            let f = if i % 2 == 0 { Fault::Kill } else { Fault::Stop };
            let v = if (i / 2) % 2 == 0 { cfg.other_victim } else { 0 };
            cases.push((f, v, t));
        }
    }
    if !full() {
        // Both faults on both victims at least once, and T = 0 for each fault.
        for (f, v, t) in [(Fault::Kill, 0, 0), (Fault::Stop, cfg.other_victim, 0)] {
            if !cases.contains(&(f, v, t)) {
                cases.push((f, v, t));
            }
        }
    }
    let mut times = Vec::new();
    let mut lost = Vec::new();
    for &(f, v, t) in &cases {
        match run_case(cfg, Some((f, v, t))) {
            Ok((took, _)) => times.push(took.as_millis()),
            Err(why) => lost.push(format!("{} {v}@{t}ms: {why}", f.flag())),
        }
    }
    times.sort_unstable();
    let pick = |q: usize| times.get(q * times.len().saturating_sub(1) / 2).copied().unwrap_or(0);
    println!(
        "sweep: {} init_end_ms={end} T=0..={last} step {step} offset {offset} runs={} lost={} job_ms min/median/max={}/{}/{}",
        cfg.name,
        cases.len(),
        lost.len(),
        pick(0),
        pick(1),
        pick(2)
    );
    assert!(lost.is_empty(), "{}: {} of {} jobs lost:\n{}", cfg.name, lost.len(), cases.len(), lost.join("\n\n"));
}

#[test]
fn startup_failures_shm_4_ranks() {
    sweep(&Config { name: "shm-4", ranks: 4, opts: vec![], other_victim: 2, abi: false });
}

#[test]
fn startup_failures_shm_8_ranks_oversubscribed() {
    sweep(&Config { name: "shm-8", ranks: 8, opts: vec![], other_victim: 5, abi: false });
}

#[test]
fn startup_failures_fabric_tcp_4_ranks() {
    let opts = vec!["--transport", "fabric", "--provider", "tcp"];
    sweep(&Config { name: "fabric-tcp-4", ranks: 4, opts, other_victim: 3, abi: false });
}

#[test]
fn startup_failures_fabric_tcp_8_ranks_oversubscribed() {
    let opts = vec!["--transport", "fabric", "--provider", "tcp"];
    sweep(&Config { name: "fabric-tcp-8", ranks: 8, opts, other_victim: 6, abi: false });
}

/// The same through the standard ABI, a C program: every survivor's `MPI_Init` returns
/// success with the victim already failed where it failed first, and
/// `MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN)` works (run-through §17.5.2).
#[test]
fn startup_failures_through_the_abi_shm_4_ranks() {
    sweep(&Config { name: "abi-shm-4", ranks: 4, opts: vec![], other_victim: 2, abi: true });
}

/// Six ranks on three namespace hosts (two per host: shared memory within a host,
/// libfabric tcp between them). Victim 1 creates its host's segment, so its failure
/// makes rank 4 create one instead; victim 0 does the same on rank 0's host.
#[test]
fn startup_failures_3_netns_hosts_6_ranks() {
    let Some(_cluster) = cluster() else { return };
    let opts = vec!["--host", HOSTS, "--launch-agent", AGENT, "--kv-addr", KV_ADDR, "--provider", "tcp"];
    sweep(&Config { name: "netns-3-hosts-6", ranks: 6, opts, other_victim: 1, abi: false });
}

/// This test binary's cluster (see `common::netns`).
fn cluster() -> Option<common::netns::Cluster> {
    common::netns::cluster(Some(("rs", "10.78.0")))
}

/// A rank slower to start than the others is not taken for failed (R31, R32): rank 2
/// waits five detector timeouts after the last start-up fence before its detector starts
/// (`RT_TEST_LATE_START`), its start-up heartbeat running. Rank 3's detector, started
/// already, suspects it; the launcher, which still hears from rank 2, refuses the claim
/// (`Starting`) and rank 3 observes it afresh. Every rank prints its `ok` line with
/// nobody failed, on shared memory and over libfabric tcp.
#[test]
fn a_rank_slow_to_start_its_detector_is_not_taken_for_failed() {
    let prog = example("startup_check");
    for opts in [vec![], vec!["--transport", "fabric", "--provider", "tcp"]] {
        let mut args = vec!["-n", "4"];
        args.extend(opts.iter().copied());
        args.push(prog.to_str().unwrap());
        let env = [("RT_FT_TIMEOUT_MS", "300"), ("RT_TEST_LATE_START", "2:1500")];
        let o = try_run_env(&args, &env, LIMIT).unwrap_or_else(|e| panic!("{e}"));
        let out = common::stdout(&o);
        let err = common::stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{opts:?}\nstdout:\n{out}\nstderr:\n{err}");
        let lines = ok_lines(&out, 4);
        for r in 0..4 {
            let l: Vec<&OkLine> = lines.iter().filter(|l| l.rank == r).collect();
            assert_eq!(l.len(), 1, "{opts:?}: rank {r}'s ok line\nstdout:\n{out}\nstderr:\n{err}");
            assert_eq!((l[0].at_init.as_str(), l[0].failed.as_str()), ("[]", "[]"), "{opts:?}: rank {r}\n{out}\n{err}");
        }
    }
}
