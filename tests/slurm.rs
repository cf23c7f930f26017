//! Ranks started by Slurm without `rtrun` (T3): `srun --mpi=pmix` (PMIx client
//! library) and `srun --mpi=pmi2` (PMI-2 wire protocol), on a Slurm of this host
//! (`ci-containers/slurm-local.sh up`; see `docs/SLURM.md`).
//!
//! Each test runs only when `srun` works and `sinfo` shows a responding node, and skips
//! as `slurm` otherwise, or as `slurm-pmix` / `slurm-pmi2` when srun lacks that plugin
//! (`common::skip`: a failure unless `RT_EXPECTED_SKIPS` names it; CI's host runs no
//! Slurm, so `.ci/expected-skips` lists `slurm`). The checks read every rank's output
//! (`srun --label` prefixes each line with its task's rank), not only srun's exit code.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Longest a job may take before the test kills it.
const JOB_LIMIT: Duration = Duration::from_secs(90);
/// One srun job at a time (2 cores).
static SERIAL: Mutex<()> = Mutex::new(());

/// Why Slurm cannot run `--mpi=MPI` jobs here, if it cannot: the skip's name (`slurm`,
/// or `slurm-MPI` for a Slurm without that plugin) and the reason (the cluster is asked
/// once per test run: a `sinfo` without a controller takes seconds to give up).
fn unavailable(mpi: &str) -> Option<(String, String)> {
    static CLUSTER: OnceLock<Option<String>> = OnceLock::new();
    if let Some(why) = CLUSTER.get_or_init(cluster_unavailable) {
        return Some(("slurm".into(), why.clone()));
    }
    match Command::new("srun").arg("--mpi=list").output() {
        Err(e) => Some(("slurm".into(), format!("no srun ({e})"))),
        Ok(o) => {
            let list = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            (!list.lines().any(|l| l.trim() == mpi))
                .then(|| (format!("slurm-{mpi}"), format!("srun has no --mpi={mpi} plugin")))
        }
    }
}

/// Why `sinfo` shows no node that can run jobs, if it does not.
fn cluster_unavailable() -> Option<String> {
    let sinfo = match Command::new("sinfo").args(["-h", "-o", "%t"]).output() {
        Err(e) => return Some(format!("no sinfo ({e})")),
        Ok(o) => o,
    };
    let states = String::from_utf8_lossy(&sinfo.stdout).to_string();
    if !sinfo.status.success() {
        return Some(format!("sinfo failed: {}", String::from_utf8_lossy(&sinfo.stderr).trim()));
    }
    if !states.lines().any(|s| matches!(s.trim().trim_end_matches(['*', '~', '#']), "idle" | "mix" | "alloc")) {
        return Some(format!("no responding node (sinfo states: {:?})", states.trim()));
    }
    None
}

macro_rules! require_slurm {
    ($mpi:expr) => {
        if let Some((what, why)) = unavailable($mpi) {
            common::skip(&what, &why);
            return;
        }
    };
}

/// Waits for `child` at most `limit`; on expiry interrupts srun twice (which cancels
/// the step), then kills it, and fails.
fn wait_limited(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let o = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = out.read_to_end(&mut s);
        s
    });
    let e = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err.read_to_end(&mut s);
        s
    });
    loop {
        if let Some(status) = child.try_wait().expect("wait for srun") {
            return Output { status, stdout: o.join().unwrap(), stderr: e.join().unwrap() };
        }
        if start.elapsed() > limit {
            for _ in 0..2 {
                let _ = Command::new("kill").args(["-INT", &child.id().to_string()]).status();
                std::thread::sleep(Duration::from_millis(300));
            }
            let _ = child.kill();
            let _ = child.wait();
            let (so, se) = (o.join().unwrap(), e.join().unwrap());
            panic!(
                "{what}: still running after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&so),
                String::from_utf8_lossy(&se)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `srun -n N --mpi=MPI --label -K0 PROGRAM ARGS`, tagged with `tag` in the tasks'
/// environment (so a test can find its tasks' processes).
fn srun(mpi: &str, n: u32, program: &Path, args: &[&str], tag: &str) -> Child {
    srun_env(mpi, n, program, args, tag, &[])
}

/// [`srun`] with extra environment for the tasks (srun passes its own on).
fn srun_env(mpi: &str, n: u32, program: &Path, args: &[&str], tag: &str, env: &[(&str, &str)]) -> Child {
    Command::new("srun")
        .args(["-n", &n.to_string(), &format!("--mpi={mpi}"), "--label", "--kill-on-bad-exit=0"])
        .arg("--overcommit")
        .arg(program)
        .args(args)
        .env("RT_SLURM_TEST_TAG", tag)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn srun")
}

/// The lines task `rank` printed (`srun --label`: `R: text`).
fn lines_of(out: &str, rank: u32) -> Vec<String> {
    let prefix = format!("{rank}: ");
    out.lines().filter_map(|l| l.trim_start().strip_prefix(&prefix).map(str::to_string)).collect()
}

/// Asserts that no segment of a Slurm-started job is left in `/dev/shm` (the host's
/// lowest rank unlinks it once every local rank attached).
fn assert_no_slurm_segments(mpi: &str) {
    let left: Vec<String> = common::rt_segments()
        .into_iter()
        .filter(|n| n.starts_with("rt-slurm.pmix.") || n.starts_with("rt-pmi2-"))
        .collect();
    assert!(left.is_empty(), "--mpi={mpi}: segments left in /dev/shm: {left:?}");
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Every rank of a 4-rank `startup_check` reports a full world, and `ring` carries its
/// token around it, started by `mpi`.
fn startup_and_ring(mpi: &str, started_by: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("{mpi}-{}", std::process::id());
    let o = wait_limited(srun(mpi, 4, &common::example("startup_check"), &[], &tag), JOB_LIMIT, "startup_check");
    let (out, err) = text(&o);
    assert!(o.status.success(), "srun --mpi={mpi} startup_check: {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    for r in 0..4 {
        let mine = lines_of(&out, r);
        let want = format!("startup_check: ok rank {r} of 4 at_init=[] failed=[] sum=10 ");
        assert!(
            mine.iter().any(|l| l.starts_with(&want)),
            "rank {r} under --mpi={mpi}: expected {want:?}, printed {mine:?}\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
    let o = wait_limited(srun(mpi, 4, &common::example("ring"), &["3"], &tag), JOB_LIMIT, "ring");
    let (out, err) = text(&o);
    assert!(o.status.success(), "srun --mpi={mpi} ring: {:?}\nstdout:\n{out}\nstderr:\n{err}", o.status);
    let rank0 = lines_of(&out, 0);
    assert!(rank0.iter().any(|l| l == "ring: 4 ranks, 3 lap(s), final token 18"), "ring rank 0: {rank0:?}\n{err}");
    assert!(rank0.iter().any(|l| l.contains(started_by)), "ring rank 0 not {started_by}: {rank0:?}");
    for r in 1..4 {
        assert!(lines_of(&out, r).is_empty(), "ring rank {r} printed {:?}", lines_of(&out, r));
    }
    assert!(!err.contains("error"), "srun --mpi={mpi} ring reported errors:\n{err}");
    assert_no_slurm_segments(mpi);
    // Every rank over libfabric (tcp on loopback): the endpoint addresses go through the
    // bootstrap's exchange (PMI-2: in hex).
    let fabric = [("RT_TRANSPORT", "fabric")];
    let o = wait_limited(srun_env(mpi, 4, &common::example("ring"), &["3"], &tag, &fabric), JOB_LIMIT, "ring");
    let (out, err) = text(&o);
    assert!(
        o.status.success(),
        "srun --mpi={mpi} ring over the fabric: {:?}\nstdout:\n{out}\nstderr:\n{err}",
        o.status
    );
    let rank0 = lines_of(&out, 0);
    assert!(
        rank0.iter().any(|l| l == "ring: 4 ranks, 3 lap(s), final token 18"),
        "fabric ring rank 0: {rank0:?}\n{err}"
    );
    assert!(
        rank0.iter().any(|l| l.contains("libfabric") && l.contains("to 4 of 4 ranks")),
        "not over libfabric: {rank0:?}"
    );
}

/// The pid of the task of rank `rank` of the job tagged `tag` (its environment says
/// `RT_SLURM_TEST_TAG=tag` and `SLURM_PROCID=rank`), once it runs `exe`.
fn task_pid(tag: &str, rank: u32, exe: &Path) -> Option<u32> {
    let want_tag = format!("RT_SLURM_TEST_TAG={tag}");
    let want_rank = format!("SLURM_PROCID={rank}");
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(env) = std::fs::read(entry.path().join("environ")) else { continue };
        let vars: Vec<&[u8]> = env.split(|&b| b == 0).collect();
        let has = |w: &str| vars.contains(&w.as_bytes());
        if has(&want_tag) && has(&want_rank) && std::fs::read_link(entry.path().join("exe")).ok()? == exe {
            return Some(pid);
        }
    }
    None
}

/// A worker is SIGKILLed mid-run: the manager re-issues its task and finishes every
/// task with the right total; every other task exits 0, only the victim is reported
/// killed by srun.
fn manager_worker_with_a_kill(mpi: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("{mpi}-mw-{}", std::process::id());
    let exe = common::example("manager_worker");
    let child = srun(mpi, 4, &exe, &["600"], &tag);
    let start = Instant::now();
    let victim = loop {
        if let Some(pid) = task_pid(&tag, 2, &exe) {
            break pid;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "rank 2 of the job never started");
        std::thread::sleep(Duration::from_millis(10));
    };
    // Mid-run: init takes well under a second here; 600 tasks of 10 ms on 3 workers ~2 s.
    std::thread::sleep(Duration::from_millis(900));
    let killed = Command::new("kill").args(["-KILL", &victim.to_string()]).status().expect("kill");
    assert!(killed.success(), "kill -9 {victim}");
    let o = wait_limited(child, JOB_LIMIT, "manager_worker");
    let (out, err) = text(&o);
    let manager = lines_of(&out, 0);
    assert!(
        manager.iter().any(|l| l.starts_with("manager_worker: 600 tasks done by 2 survivors")
            && l.contains("(correct), failed ranks [2]")),
        "--mpi={mpi}: manager printed {manager:?}\nstdout:\n{out}\nstderr:\n{err}"
    );
    // srun names each task that did not exit 0; only the victim may be among them.
    let bad: Vec<&str> = err.lines().filter(|l| l.contains(": task ") || l.contains("tasks ")).collect();
    assert!(
        bad.iter().all(|l| l.contains("task 2:") || l.contains("task 2 ")),
        "--mpi={mpi}: tasks other than rank 2 ended badly: {bad:?}\nstderr:\n{err}"
    );
    assert!(bad.iter().any(|l| l.contains("task 2")), "--mpi={mpi}: srun did not report the kill\n{err}");
    for r in [1, 3] {
        let mine = lines_of(&out, r);
        assert!(mine.is_empty(), "worker {r} printed {mine:?}");
    }
    assert_no_slurm_segments(mpi);
}

#[test]
fn pmix_startup_and_ring() {
    require_slurm!("pmix");
    startup_and_ring("pmix", "started by PMIx (namespace slurm.pmix.");
}

#[test]
fn pmi2_startup_and_ring() {
    require_slurm!("pmi2");
    startup_and_ring("pmi2", "started by PMI-2 (job ");
}

#[test]
fn pmix_manager_worker_survives_a_killed_worker() {
    require_slurm!("pmix");
    manager_worker_with_a_kill("pmix");
}

#[test]
fn pmi2_manager_worker_survives_a_killed_worker() {
    require_slurm!("pmi2");
    manager_worker_with_a_kill("pmi2");
}

/// `ErrorsAreFatal` at rank 1 aborts: the server (PMI-2 `abort`, or `scancel` for a
/// rank detached from PMIx) kills every task, rank 1 included, before any other rank
/// takes rank 1's end for a failure of its own.
fn abort_kills_the_step(mpi: &str) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let tag = format!("{mpi}-abort-{}", std::process::id());
    let o = wait_limited(srun(mpi, 3, &common::example("error_check"), &["fatal"], &tag), JOB_LIMIT, "error_check");
    let (out, err) = text(&o);
    assert!(!o.status.success(), "--mpi={mpi}: an aborted job exited 0\n{out}\n{err}");
    let all = format!("{out}{err}");
    assert!(
        lines_of(&all, 1).iter().any(|l| l.contains("fatal error: invalid rank 8")),
        "--mpi={mpi}: rank 1 did not report its error\n{all}"
    );
    for r in [0, 2] {
        let mine = lines_of(&all, r);
        assert!(!mine.iter().any(|l| l.contains("fatal error")), "--mpi={mpi}: rank {r} saw a failure: {mine:?}");
    }
    assert!(!err.contains("Exited with exit code"), "--mpi={mpi}: a task exited instead of being killed\n{err}");
    assert!(err.contains("Killed"), "--mpi={mpi}: srun reported no killed task\n{err}");
}

#[test]
fn pmix_abort_kills_the_step() {
    require_slurm!("pmix");
    abort_kills_the_step("pmix");
}

#[test]
fn pmi2_abort_kills_the_step() {
    require_slurm!("pmi2");
    abort_kills_the_step("pmi2");
}
