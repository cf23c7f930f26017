//! A real Slurm across container nodes (T3, T4):
//! `ci-containers/cluster.sh up 3 --slurm` with the prefix `sl` and the network
//! 10.81.0.0/24 (containers `slslurmctl`, `slnode1..3`; host names `slurmctl`,
//! `node1..3`), and `srun` / `sbatch` run inside `slnode1` by `docker exec`. See
//! docs/SLURM.md, "Slurm in containers".
//!
//! Runs only with `RT_CLUSTER_FULL=1` (`make cluster-test`); without it each test skips
//! as `cluster-full` (expected in CI's `make test`), and without Docker or when
//! `cluster.sh` cannot run here (exit 3) as `docker` (`common::skip`: each a failure
//! unless `RT_EXPECTED_SKIPS` names it).
//! The cluster is brought up once and torn down by the last test of the run (a test
//! that kills a node brings it up afresh for the next one). The checks read every rank's
//! output (`srun --label`), not only srun's exit code.

mod common;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Container name prefix and network of this test's cluster (another cluster may run
/// beside it with the default names).
const NAME: &str = "sl";
const NET: &str = "10.81.0";
/// Nodes, and ranks per job (2 per node).
const NODES: usize = 3;
const RANKS: usize = 6;
/// Longest a job may take before the test cancels it.
const JOB_LIMIT: Duration = Duration::from_secs(120);
/// Every test of this file (the last one to finish tears the cluster down).
const TESTS: &[&str] = &[
    "pmix_ring_on_3_nodes",
    "pmi2_ring_on_3_nodes",
    "pmix_manager_worker_survives_a_killed_task",
    "pmi2_manager_worker_survives_a_killed_task",
    "pmix_step_survives_a_killed_node",
    "pmi2_step_survives_a_killed_node",
    "sbatch_runs_a_pmi2_ring",
];

/// The cluster's state, shared by the tests of this run (one test at a time).
struct State {
    /// Why the cluster cannot run here, once known.
    skip: Option<String>,
    /// `cluster.sh up` succeeded and no node was killed since.
    up: bool,
    /// This run brought the cluster up at least once (and so takes it down).
    ever_up: bool,
}

static STATE: Mutex<State> = Mutex::new(State { skip: None, up: false, ever_up: false });
static FINISHED: AtomicUsize = AtomicUsize::new(0);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("ci-containers/cluster.sh")
}

/// The target directory of the tests (the example binaries are under it), mounted in
/// every container at the same path.
fn target_dir() -> PathBuf {
    let ring = common::example("ring");
    // <target>/<profile>/examples/ring
    ring.ancestors().nth(3).expect("target dir").to_path_buf()
}

/// `cluster.sh ARGS` with this test's names.
fn cluster_sh(args: &[&str]) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env("RT_CLUSTER_NAME", NAME)
        .env("RT_CLUSTER_NET", NET)
        .env("RT_CLUSTER_MOUNTS", target_dir())
        .output()
        .expect("run cluster.sh")
}

/// Brings the cluster up (again) if needed: `Err(reason)` to skip.
fn ensure_up(st: &mut State) -> Result<(), String> {
    if let Some(why) = &st.skip {
        return Err(why.clone());
    }
    if st.up {
        return Ok(());
    }
    match Command::new("docker").arg("info").output() {
        Err(e) => st.skip = Some(format!("no docker ({e})")),
        Ok(o) if !o.status.success() => st.skip = Some("the docker daemon does not answer".into()),
        Ok(_) => {}
    }
    if let Some(why) = &st.skip {
        return Err(why.clone());
    }
    let t0 = Instant::now();
    let o = cluster_sh(&["up", &NODES.to_string(), "--slurm"]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    match o.status.code() {
        Some(0) => {}
        Some(3) => {
            st.skip = Some(err.trim().to_string());
            return Err(err.trim().to_string());
        }
        _ => panic!("cluster.sh up {NODES} --slurm failed: {:?}\n{}\n{err}", o.status, common::stdout(&o)),
    }
    println!("cluster up in {:?}", t0.elapsed());
    st.up = true;
    st.ever_up = true;
    Ok(())
}

/// A test's hold on the cluster: serializes the tests, and the last test of the run
/// tears the cluster down when its hold ends (passed or panicked).
struct Hold {
    state: MutexGuard<'static, State>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        if FINISHED.fetch_add(1, Ordering::SeqCst) + 1 == tests_in_this_run() && self.state.ever_up {
            let o = cluster_sh(&["down"]);
            if !o.status.success() {
                eprintln!("cluster.sh down failed: {}", common::stderr(&o));
            }
            self.state.up = false;
        }
    }
}

/// How many tests of [`TESTS`] this run executes, from libtest's own arguments (name
/// filters, `--exact`, `--skip`): the last of them brings the cluster down.
fn tests_in_this_run() -> usize {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut filters = Vec::new();
    let mut skips = Vec::new();
    let exact = args.iter().any(|a| a == "--exact");
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--skip" => skips.extend(it.next().cloned()),
            "--test-threads" | "--format" | "--color" | "--logfile" | "-Z" | "--shuffle-seed" => {
                it.next();
            }
            s if s.starts_with('-') => {}
            s => filters.push(s.to_string()),
        }
    }
    let matches = |name: &str, f: &str| if exact { name == f } else { name.contains(f) };
    TESTS
        .iter()
        .filter(|t| filters.is_empty() || filters.iter().any(|f| matches(t, f)))
        .filter(|t| !skips.iter().any(|s| matches(t, s)))
        .count()
        .max(1)
}

/// The cluster, or `None` after [`common::skip()`] said why the test is skipped.
fn hold() -> Option<Hold> {
    let mut state = STATE.lock().unwrap_or_else(|p| p.into_inner());
    let gate = std::env::var("RT_CLUSTER_FULL").ok();
    let why = if gate.as_deref() != Some("1") {
        Some(("cluster-full", "set RT_CLUSTER_FULL=1 (make cluster-test)".to_string()))
    } else {
        ensure_up(&mut state).err().map(|why| ("docker", why))
    };
    let h = Hold { state };
    if let Some((what, why)) = why {
        // The hold ends first: it counts this test as finished (the last one takes the
        // cluster down) before an unexpected skip panics.
        drop(h);
        common::skip(what, &why);
        return None;
    }
    Some(h)
}

/// `docker exec [-i] slNODE ARGS`, piped.
fn exec(node: &str, args: &[&str]) -> Command {
    let mut c = Command::new("docker");
    c.args(["exec", "-i", &format!("{NAME}{node}")]).args(args);
    c.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    c
}

/// `srun -N 3 -n 6 --mpi=MPI --label -K0 EXTRA PROGRAM ARGS` started inside node1.
fn srun(mpi: &str, extra: &[&str], program: &Path, args: &[&str]) -> Child {
    let n = NODES.to_string();
    let r = RANKS.to_string();
    let mpi = format!("--mpi={mpi}");
    let mut a = vec!["srun", "-N", &n, "-n", &r, &mpi, "--label", "--kill-on-bad-exit=0"];
    a.extend_from_slice(extra);
    let p = program.to_str().expect("utf-8 path");
    a.push(p);
    a.extend_from_slice(args);
    exec("node1", &a).spawn().expect("spawn docker exec srun")
}

/// Lines of a stream, each with the time it was read.
type Timed = Vec<(Instant, String)>;

fn read_timed(r: impl Read + Send + 'static) -> std::thread::JoinHandle<Timed> {
    std::thread::spawn(move || {
        std::io::BufRead::lines(std::io::BufReader::new(r)).map_while(Result::ok).map(|l| (Instant::now(), l)).collect()
    })
}

fn join_text(lines: &Timed) -> Vec<u8> {
    lines.iter().flat_map(|(_, l)| format!("{l}\n").into_bytes()).collect()
}

/// Waits for `child` at most `limit`; on expiry cancels every job and fails. Returns
/// its status and its stdout and stderr lines, each with the time it came.
fn wait_timed(mut child: Child, limit: Duration, what: &str) -> (std::process::ExitStatus, Timed, Timed) {
    let start = Instant::now();
    let o = read_timed(child.stdout.take().expect("piped stdout"));
    let e = read_timed(child.stderr.take().expect("piped stderr"));
    loop {
        if let Some(status) = child.try_wait().expect("wait for docker exec") {
            return (status, o.join().unwrap(), e.join().unwrap());
        }
        if start.elapsed() > limit {
            let _ = exec("node1", &["scancel", "--signal=KILL", "-u", "root"]).output();
            let _ = child.kill();
            let _ = child.wait();
            let (so, se) = (o.join().unwrap(), e.join().unwrap());
            panic!(
                "{what}: still running after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&join_text(&so)),
                String::from_utf8_lossy(&join_text(&se))
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// [`wait_timed`] without the times.
fn wait_limited(child: Child, limit: Duration, what: &str) -> Output {
    let (status, o, e) = wait_timed(child, limit, what);
    Output { status, stdout: join_text(&o), stderr: join_text(&e) }
}

/// The lines task `rank` printed (`srun --label`: `R: text`).
fn lines_of(out: &str, rank: usize) -> Vec<String> {
    let prefix = format!("{rank}: ");
    out.lines().filter_map(|l| l.trim_start().strip_prefix(&prefix).map(str::to_string)).collect()
}

fn text(o: &Output) -> (String, String) {
    (common::stdout(o), common::stderr(o))
}

/// Rank 0's `ring` lines: 6 ranks, token 3 × 15, and the transports: ranks 0 and 1
/// share node1 (shared memory), the other 4 are on node2 and node3 (libfabric tcp).
fn assert_ring(out: &str, err: &str, laps: u64, started_by: &str) {
    let rank0 = lines_of(out, 0);
    let want = format!("ring: {RANKS} ranks, {laps} lap(s), final token {}", laps * 15);
    assert!(rank0.contains(&want), "ring rank 0: expected {want:?}, printed {rank0:?}\nstdout:\n{out}\nstderr:\n{err}");
    let describe = rank0.iter().find(|l| l.starts_with("ring: rank 0: ")).unwrap_or_else(|| panic!("{rank0:?}"));
    assert!(describe.contains(started_by), "ring rank 0 not {started_by}: {describe}");
    assert!(describe.contains("shared memory to 2 of 6 ranks"), "not shm to its node: {describe}");
    assert!(describe.contains("tcp") && describe.contains("to 4 of 6 ranks"), "not tcp to the others: {describe}");
    for r in 1..RANKS {
        assert!(lines_of(out, r).is_empty(), "ring rank {r} printed {:?}", lines_of(out, r));
    }
}

fn ring_on_3_nodes(mpi: &str, started_by: &str) {
    let Some(_hold) = hold() else { return };
    let o = wait_limited(srun(mpi, &[], &common::example("ring"), &["3"]), JOB_LIMIT, "ring");
    let (out, err) = text(&o);
    assert!(o.status.success(), "srun --mpi={mpi} ring: {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    assert_ring(&out, &err, 3, started_by);
    assert!(!err.contains("error"), "srun --mpi={mpi} ring reported errors:\n{err}");
    // srun placed 2 tasks on each node, in block order.
    let o = wait_limited(srun(mpi, &[], Path::new("/bin/hostname"), &[]), JOB_LIMIT, "hostname");
    let (out, _) = text(&o);
    for r in 0..RANKS {
        assert_eq!(lines_of(&out, r), [format!("node{}", r / 2 + 1)], "task {r} placement\n{out}");
    }
}

#[test]
fn pmix_ring_on_3_nodes() {
    ring_on_3_nodes("pmix", "started by PMIx (namespace slurm.pmix.");
}

#[test]
fn pmi2_ring_on_3_nodes() {
    ring_on_3_nodes("pmi2", "started by PMI-2 (job ");
}

/// The pid (inside its container) of the task of rank `rank` running `exe` on `node`.
fn task_pid(node: &str, rank: usize, exe: &Path) -> Option<u32> {
    let find = format!(
        "for p in $(pgrep -f '^{}'); do tr '\\0' '\\n' </proc/$p/environ | grep -qx SLURM_PROCID={rank} && echo $p; done",
        exe.display()
    );
    let o = exec(node, &["sh", "-c", &find]).output().ok()?;
    common::stdout(&o).lines().next().and_then(|l| l.trim().parse().ok())
}

/// Waits until rank `rank` runs `exe` on `node`; its pid there.
fn wait_task(node: &str, rank: usize, exe: &Path) -> u32 {
    let start = Instant::now();
    loop {
        if let Some(pid) = task_pid(node, rank, exe) {
            return pid;
        }
        assert!(start.elapsed() < Duration::from_secs(60), "rank {rank} never started on {node}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Rank 3 (node2's second task) is SIGKILLed mid-run: the manager re-issues its task
/// and finishes with the right total; only task 3 ended badly.
fn manager_worker_with_a_kill(mpi: &str) {
    let Some(_hold) = hold() else { return };
    let exe = common::example("manager_worker");
    let child = srun(mpi, &[], &exe, &["1500"]);
    let victim = wait_task("node2", 3, &exe);
    std::thread::sleep(Duration::from_millis(1500));
    let k = exec("node2", &["kill", "-KILL", &victim.to_string()]).output().expect("docker exec kill");
    assert!(k.status.success(), "kill -9 {victim} in {NAME}node2: {}", common::stderr(&k));
    let o = wait_limited(child, JOB_LIMIT, "manager_worker");
    let (out, err) = text(&o);
    let manager = lines_of(&out, 0);
    assert!(
        manager.iter().any(|l| l.starts_with("manager_worker: 1500 tasks done by 4 survivors")
            && l.contains("(correct), failed ranks [3]")),
        "--mpi={mpi}: manager printed {manager:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    for r in [1, 2, 4, 5] {
        assert!(lines_of(&out, r).is_empty(), "worker {r} printed {:?}\n{err}", lines_of(&out, r));
    }
    // srun names each task that did not exit 0: only task 3.
    let bad: Vec<&str> = err.lines().filter(|l| l.contains("srun: error:")).collect();
    assert!(bad.iter().any(|l| l.contains("task 3: Killed")), "--mpi={mpi}: srun did not report the kill\n{err}");
    assert!(bad.iter().all(|l| l.contains("task 3:")), "--mpi={mpi}: other tasks ended badly: {bad:?}\n{err}");
}

#[test]
fn pmix_manager_worker_survives_a_killed_task() {
    manager_worker_with_a_kill("pmix");
}

#[test]
fn pmi2_manager_worker_survives_a_killed_task() {
    manager_worker_with_a_kill("pmi2");
}

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_micros()
}

/// node3 (ranks 4 and 5) is killed whole (`docker kill`) under `srun --no-kill`: each
/// of the 4 survivors sees the failure itself within seconds, they agree on the failed
/// group [4, 5] and finish all their rounds after Slurm declared node3 failed (`Node
/// failure on node3`, some 15-30 s after the kill) without the step being cancelled.
fn step_survives_a_killed_node(mpi: &str) {
    let Some(mut hold) = hold() else { return };
    let exe = common::example("node_fault");
    // 5000 rounds 10 ms apart: ~55 s, longer than Slurm takes to declare the node dead.
    let child = srun(mpi, &["--no-kill"], &exe, &["5000", "10"]);
    wait_task("node3", 5, &exe);
    std::thread::sleep(Duration::from_millis(2000));
    // From here on the cluster needs bringing up again, whatever happens.
    hold.state.up = false;
    let killed_us = now_us();
    let killed = Instant::now();
    let k = Command::new("docker").args(["kill", &format!("{NAME}node3")]).output().expect("docker kill");
    assert!(k.status.success(), "docker kill {NAME}node3: {}", common::stderr(&k));
    let (status, out_lines, err_lines) = wait_timed(child, JOB_LIMIT, "node_fault");
    let ended = killed.elapsed();
    let (out, err) = (String::from_utf8_lossy(&join_text(&out_lines)).into_owned(), join_text(&err_lines));
    let err = String::from_utf8_lossy(&err).into_owned();
    let noticed =
        err_lines.iter().find(|(_, l)| l.contains("Node failure on node3")).map(|(t, _)| *t).unwrap_or_else(|| {
            panic!("--mpi={mpi}: srun never reported node3's failure\nstdout:\n{out}\nstderr:\n{err}")
        });
    assert!(!err.contains("CANCELLED"), "--mpi={mpi}: the step was cancelled\n{err}");
    assert!(status.success(), "--mpi={mpi}: srun {status:?}\nstdout:\n{out}\nstderr:\n{err}");
    let mut seen = Vec::new();
    for r in 0..4 {
        let prefix = format!("{r}: node_fault: ok rank {r} rounds=5000 failed=[4, 5] local=[4, 5] ");
        let (at, ok) = out_lines
            .iter()
            .find(|(_, l)| l.trim_start().starts_with(&prefix))
            .unwrap_or_else(|| panic!("--mpi={mpi}: no {prefix:?}\nstdout:\n{out}\nstderr:\n{err}"));
        assert!(*at > noticed, "--mpi={mpi}: survivor {r} ended before Slurm noticed the node failure\n{out}\n{err}");
        let us: u128 = ok
            .split_whitespace()
            .find_map(|w| w.strip_prefix("seen_us="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no seen_us in {ok:?}"));
        assert!(us > killed_us, "survivor {r} saw the failure before the kill: {ok}");
        let after = Duration::from_micros((us - killed_us) as u64);
        assert!(after < Duration::from_secs(5), "survivor {r} saw the failure only after {after:?}: {ok}");
        seen.push(after);
    }
    for r in [4, 5] {
        assert!(lines_of(&out, r).is_empty(), "rank {r} on the killed node printed {:?}", lines_of(&out, r));
    }
    println!(
        "--mpi={mpi}: node3 killed; survivors saw it after {seen:.2?}; srun reported it after {:.2?}, \
         ended after {ended:.2?}",
        noticed - killed
    );
}

#[test]
fn pmix_step_survives_a_killed_node() {
    step_survives_a_killed_node("pmix");
}

#[test]
fn pmi2_step_survives_a_killed_node() {
    step_survives_a_killed_node("pmi2");
}

/// `sbatch --wait -N 3 -n 6` of a script that runs `srun --mpi=pmi2 ring 2`: the job
/// ends COMPLETED (exit 0) and its output file (on node1, the batch host) holds every
/// rank's expected lines.
#[test]
fn sbatch_runs_a_pmi2_ring() {
    let Some(_hold) = hold() else { return };
    let ring = common::example("ring");
    let script = format!("#!/bin/sh\nhostname\nsrun --mpi=pmi2 --label --kill-on-bad-exit=0 {} 2\n", ring.display());
    let tag = std::process::id();
    let outfile = format!("/tmp/rt-sbatch-{tag}.out");
    let mut c = exec("node1", &["sbatch", "--wait", "--parsable", "-N", "3", "-n", "6", "-o", &outfile]);
    c.stdin(Stdio::piped());
    let mut child = c.spawn().expect("docker exec sbatch");
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("write the batch script");
    let o = wait_limited(child, JOB_LIMIT, "sbatch --wait");
    let (sout, serr) = text(&o);
    assert!(o.status.success(), "sbatch --wait: {:?}\n{sout}\n{serr}", o.status);
    assert!(sout.trim().parse::<u64>().is_ok(), "sbatch --parsable printed no job id: {sout:?}");
    let cat = exec("node1", &["cat", &outfile]).output().expect("cat the output file");
    let out = common::stdout(&cat);
    let _ = exec("node1", &["rm", "-f", &outfile]).output();
    assert!(cat.status.success(), "no output file {outfile} on node1: {}", common::stderr(&cat));
    assert_eq!(out.lines().next(), Some("node1"), "the batch script ran elsewhere:\n{out}");
    assert_ring(&out, "", 2, "started by PMI-2 (job ");
}
