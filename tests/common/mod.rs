//! Shared harness of the multi-process tests: the cargo-built `rtrun` and example
//! programs, run as real processes with a hard timeout.
//!
//! Every job runs with `rtrun --outcome-file`, and the checks look at every rank's end,
//! not only at the job's exit code (R7 gives rank 0's code, which hides any other rank's
//! failure): [`ok`] requires every rank to exit 0 after finalizing, [`ok_failed`] the same
//! of every rank but the listed victims, which must have ended abnormally.
//!
//! A test that cannot run here calls [`skip()`] (module [`mod@skip`]): recorded, and a
//! failure unless `RT_EXPECTED_SKIPS` names it.
#![allow(dead_code)]

pub(crate) mod netns;
pub(crate) mod skip;

pub(crate) use skip::skip;

use std::ops::Deref;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

#[allow(unused_imports)]
pub(crate) use runthrough_launch::outcome::RankStatus;
#[allow(unused_imports)]
pub(crate) use runthrough_launch::report::{Cause, Phase, RankReport};

/// A finished job: `rtrun`'s output and each rank's end (`--outcome-file`).
#[derive(Debug)]
pub(crate) struct Run {
    /// `rtrun`'s status and output.
    pub(crate) out: Output,
    /// One record per rank, by rank (empty if `rtrun` wrote none).
    pub(crate) ranks: Vec<RankReport>,
    /// The `-n` of the job.
    pub(crate) size: u32,
}

impl Deref for Run {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.out
    }
}

impl Run {
    /// The record of `rank`.
    pub(crate) fn rank(&self, rank: u32) -> &RankReport {
        self.ranks
            .iter()
            .find(|r| r.rank == rank)
            .unwrap_or_else(|| panic!("no record of rank {rank}\n{}", self.dump()))
    }

    /// Asserts that `rtrun` reported exactly ranks `0..size`.
    pub(crate) fn assert_all_reported(&self) {
        let got: Vec<u32> = self.ranks.iter().map(|r| r.rank).collect();
        assert_eq!(got, (0..self.size).collect::<Vec<_>>(), "one record per rank\n{}", self.dump());
    }

    /// Asserts `check` of every rank's record (`what` names the expectation).
    pub(crate) fn assert_each(&self, what: &str, check: impl Fn(&RankReport) -> bool) {
        self.assert_all_reported();
        for r in &self.ranks {
            assert!(check(r), "rank {}: expected {what}, got {r}\n{}", r.rank, self.dump());
        }
    }

    pub(crate) fn dump(&self) -> String {
        let records: Vec<String> = self.ranks.iter().map(RankReport::record).collect();
        format!(
            "status: {:?}\nranks:\n{}\nstdout:\n{}\nstderr:\n{}",
            self.out.status,
            records.join("\n"),
            stdout(&self.out),
            stderr(&self.out)
        )
    }
}

/// The `-n` value of an `rtrun` argument list.
fn job_size(args: &[&str]) -> u32 {
    let at = args.iter().position(|a| *a == "-n").expect("-n in the rtrun arguments");
    args[at + 1].parse().expect("-n value")
}

/// Directory of the binaries of the profile the tests were built with.
fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // <target>/<profile>/deps/<test>-<hash>
    exe.parent().and_then(|d| d.parent()).expect("profile dir").to_path_buf()
}

/// Builds `args` (a cargo build selection) once per test process, with the profile and
/// target directory of the tests themselves.
fn cargo_build(args: &[&str]) {
    let dir = bin_dir();
    let profile = dir.file_name().and_then(|s| s.to_str()).unwrap_or("debug").to_string();
    let target = dir.parent().expect("target dir").to_path_buf();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q"]).args(args).arg("--target-dir").arg(&target);
    if profile == "release" {
        cmd.arg("--release");
    }
    let st = cmd.status().expect("run cargo build");
    assert!(st.success(), "cargo build {args:?} failed");
}

/// The `rtrun` launcher, built once per test run.
pub(crate) fn rtrun() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| cargo_build(&["-p", "runthrough-launch", "--bin", "rtrun"]));
    bin_dir().join("rtrun")
}

/// The launcher's test rank program `rt-testprog` (its module doc lists its commands),
/// built once per test run.
pub(crate) fn rt_testprog() -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| cargo_build(&["-p", "runthrough-launch", "--bin", "rt-testprog"]));
    bin_dir().join("rt-testprog")
}

/// An example program of the facade crate (`examples/`) or a test driver
/// (`drivers/examples/`), built once per test run.
pub(crate) fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| cargo_build(&["-p", "runthrough", "-p", "runthrough-drivers", "--examples"]));
    let p = bin_dir().join("examples").join(name);
    assert!(p.exists(), "example {name} not built at {}", p.display());
    p
}

/// Runs `rtrun ARGS` with extra environment, killing it after `limit`. Jobs of one test
/// binary run one at a time: on 2 cores, concurrent jobs of 8 ranks each would starve
/// each other's progress threads and turn timing into noise.
pub(crate) fn run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Run {
    match try_run_env(args, env, limit) {
        Ok(o) => o,
        Err(msg) => panic!("{msg}"),
    }
}

/// As [`run_env`], but a job that exceeds `limit` is killed and reported as `Err`.
pub(crate) fn try_run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Result<Run, String> {
    static ONE_JOB: Mutex<()> = Mutex::new(());
    static JOBS: AtomicU32 = AtomicU32::new(0);
    let _turn = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let size = job_size(args);
    let outcome = std::env::temp_dir().join(format!(
        "rt-test-outcome-{}-{}",
        std::process::id(),
        JOBS.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&outcome);
    let mut cmd = Command::new(rtrun());
    cmd.arg("--outcome-file")
        .arg(&outcome)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .stdin(Stdio::null());
    // Test machines run other work too (CI, builds): a detector timeout of 0.5 s keeps a
    // descheduled rank from being taken for a hung one. Tests may override it, or remove
    // it with an empty value (the runtime's default then applies).
    cmd.env("RT_FT_TIMEOUT_MS", "500");
    for (k, v) in env {
        if v.is_empty() {
            cmd.env_remove(k);
        } else {
            cmd.env(k, v);
        }
    }
    let mut child = cmd.spawn().expect("spawn rtrun");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait rtrun").is_some() {
            let out = child.wait_with_output().expect("collect output");
            let records = std::fs::read_to_string(&outcome).unwrap_or_default();
            let _ = std::fs::remove_file(&outcome);
            let ranks = records
                .lines()
                .map(|l| RankReport::parse(l).unwrap_or_else(|| panic!("bad outcome record {l:?}")))
                .collect();
            return Ok(Run { out, ranks, size });
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
            let _ = std::fs::remove_file(&outcome);
            return Err(format!(
                "rtrun {args:?} exceeded {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `rtrun ARGS`, killing it after `limit`.
pub(crate) fn run(args: &[&str], limit: Duration) -> Run {
    run_env(args, &[], limit)
}

/// stdout as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Asserts a successful run in which every rank exited 0 after finalizing, and returns
/// its stdout.
pub(crate) fn ok(o: &Run) -> String {
    ok_failed(o, &[])
}

/// Asserts a successful run in which the ranks of `failed` ended abnormally (killed,
/// non-zero exit, exit without finalize) and every other rank exited 0 after
/// finalizing; returns its stdout.
pub(crate) fn ok_failed(o: &Run, failed: &[u32]) -> String {
    assert!(o.status.success(), "job failed\n{}", o.dump());
    o.assert_each(&format!("ranks {failed:?} abnormal, the others exit 0 after finalize"), |r| {
        if failed.contains(&r.rank) {
            r.is_abnormal()
        } else {
            r.is_clean()
        }
    });
    stdout(o)
}

/// Names of the runthrough segments currently in /dev/shm.
pub(crate) fn rt_segments() -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("rt-"))
                .collect()
        })
        .unwrap_or_default()
}

/// The directory holding `libmpi_abi.so.1` (the standard-ABI library of `abi/`), built
/// once per test run with the tests' profile and copied under its soname.
pub(crate) fn abi_lib() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            cargo_build(&["-p", "runthrough-abi"]);
            let dir = bin_dir().join("abi-lib");
            std::fs::create_dir_all(&dir).expect("abi-lib dir");
            std::fs::copy(bin_dir().join("libmpi_abi.so"), dir.join("libmpi_abi.so.1")).expect("copy libmpi_abi.so");
            dir
        })
        .clone()
}

/// Compiles the C program `src` (relative to the checkout) against the standard ABI header
/// in `abi/include` and [`abi_lib`]; returns the binary.
pub(crate) fn abi_program(src: &str) -> PathBuf {
    static LOCK: Mutex<()> = Mutex::new(());
    let _g = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let lib = abi_lib();
    let out_dir = bin_dir().join("abi-c");
    std::fs::create_dir_all(&out_dir).expect("abi-c dir");
    let name = std::path::Path::new(src).file_stem().and_then(|s| s.to_str()).expect("source name");
    let out = out_dir.join(name);
    let st = Command::new("gcc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-I"])
        .arg(root.join("abi/include"))
        .arg("-I")
        .arg(root.join("bench/c"))
        .arg("-o")
        .arg(&out)
        .arg(root.join(src))
        .arg("-L")
        .arg(&lib)
        .arg("-l:libmpi_abi.so.1")
        .status()
        .expect("run gcc");
    assert!(st.success(), "gcc {src} failed");
    out
}

/// Other work loading this machine: `factor` × its cores processes spinning on the CPU
/// for as long as the guard lives (killed and reaped on drop, also on panic). What a
/// shared CI runner or an oversubscribed node does to a job's ranks.
pub(crate) struct Load(Vec<std::process::Child>);

impl Load {
    pub(crate) fn start(factor: usize) -> Load {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        Load(
            (0..factor * cores)
                .map(|_| {
                    Command::new("sh")
                        .args(["-c", "while :; do :; done"])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .spawn()
                        .expect("spawn a spinning process")
                })
                .collect(),
        )
    }

    /// How many spinning processes.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A CPU cgroup that lets its processes run `quota` out of every `period` (cgroup v1's
/// `cpu.cfs_quota_us`, or v2's `cpu.max`): a process moved in is runnable but held off
/// the CPU for the rest of each period, as in a container with a CPU limit on a busy
/// node. Removed on drop (once its processes exited). `None`, with the reason, where
/// this machine has no writable CPU controller (not root, no cgroup filesystem).
pub(crate) struct CpuThrottle(PathBuf);

impl CpuThrottle {
    pub(crate) fn new(quota: Duration, period: Duration) -> Result<CpuThrottle, String> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let name = format!("rt-throttle-{}-{}", std::process::id(), SEQ.fetch_add(1, Ordering::Relaxed));
        let (q, p) = (quota.as_micros(), period.as_micros());
        let v1 = PathBuf::from("/sys/fs/cgroup/cpu");
        let v2 = PathBuf::from("/sys/fs/cgroup");
        let made = if v1.join("cpu.cfs_quota_us").exists() {
            let dir = v1.join(&name);
            std::fs::create_dir(&dir)
                .and_then(|_| std::fs::write(dir.join("cpu.cfs_period_us"), p.to_string()))
                .and_then(|_| std::fs::write(dir.join("cpu.cfs_quota_us"), q.to_string()))
                .map(|_| dir)
        } else if std::fs::read_to_string(v2.join("cgroup.controllers")).is_ok_and(|c| c.contains("cpu")) {
            let dir = v2.join(&name);
            let _ = std::fs::write(v2.join("cgroup.subtree_control"), "+cpu");
            std::fs::create_dir(&dir).and_then(|_| std::fs::write(dir.join("cpu.max"), format!("{q} {p}"))).map(|_| dir)
        } else {
            return Err("no cgroup CPU controller at /sys/fs/cgroup/cpu (v1) or /sys/fs/cgroup (v2)".into());
        };
        made.map(CpuThrottle).map_err(|e| format!("cannot make a throttled CPU cgroup: {e}"))
    }

    /// The cgroup's directory (a process joins by writing its pid to `cgroup.procs`).
    pub(crate) fn dir(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for CpuThrottle {
    fn drop(&mut self) {
        for _ in 0..100 {
            if std::fs::remove_dir(&self.0).is_ok() || !self.0.exists() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// `cmd` as rank 1 of a 2-rank job whose launcher is gone: the job's variables, with a
/// key-value address nobody listens on (R5: `init` must return an error, not abort).
pub(crate) fn as_orphan_rank(cmd: &mut Command) -> &mut Command {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port");
    cmd.env("RT_RANK", "1")
        .env("RT_SIZE", "2")
        .env("RT_LOCAL_RANK", "1")
        .env("RT_LOCAL_SIZE", "2")
        .env("RT_JOBID", "00000000deadbeef")
        .env("RT_KV_ADDR", closed.to_string())
        .env("RT_KV_SECRET", "00".repeat(32))
        .env("RT_SHM_NAME", "/rt-00000000deadbeef")
        .env("RT_NODE", "localhost")
        .env("RT_BIND", "none")
}

/// Every `.rs` file under `dir`, recursively (the source checks: `layering.rs`,
/// `tunables.rs`).
pub(crate) fn rust_files(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The build the tests run from, with `libmpi_abi.so` and `rtrun` built in it: (its
/// target directory, its profile), for the tests that install it.
pub(crate) fn install_build() -> (PathBuf, String) {
    abi_lib();
    let rtrun = rtrun();
    let dir = rtrun.parent().expect("profile directory");
    assert!(dir.join("libmpi_abi.so").is_file(), "no libmpi_abi.so in {}", dir.display());
    let profile = dir.file_name().and_then(|s| s.to_str()).expect("profile name").to_owned();
    (dir.parent().expect("target directory").to_path_buf(), profile)
}

/// Runs `cmd` to its end (standard input closed, both outputs read as they come),
/// killing it after `limit`.
pub(crate) fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    use std::io::Read;
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} exceeded {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    Output { status, stdout: out.join().expect("stdout reader"), stderr: err.join().expect("stderr reader") }
}
