//! Shared harness of the multi-process tests: the cargo-built `rtrun` and example
//! programs, run as real processes with a hard timeout.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// An example program of the facade crate, built once per test run.
pub(crate) fn example(name: &str) -> PathBuf {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| cargo_build(&["-p", "runthrough", "--examples"]));
    let p = bin_dir().join("examples").join(name);
    assert!(p.exists(), "example {name} not built at {}", p.display());
    p
}

/// Runs `rtrun ARGS` with extra environment, killing it after `limit`. Jobs of one test
/// binary run one at a time: on 2 cores, concurrent jobs of 8 ranks each would starve
/// each other's progress threads and turn timing into noise.
pub(crate) fn run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    match try_run_env(args, env, limit) {
        Ok(o) => o,
        Err(msg) => panic!("{msg}"),
    }
}

/// As [`run_env`], but a job that exceeds `limit` is killed and reported as `Err`.
pub(crate) fn try_run_env(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Result<Output, String> {
    static ONE_JOB: Mutex<()> = Mutex::new(());
    let _turn = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let mut cmd = Command::new(rtrun());
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
    // Test machines run other work too (CI, builds): a detector timeout of 0.5 s keeps a
    // descheduled rank from being taken for a hung one. Tests may override it.
    cmd.env("RT_FT_TIMEOUT_MS", "500");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn rtrun");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait rtrun").is_some() {
            return Ok(child.wait_with_output().expect("collect output"));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
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
pub(crate) fn run(args: &[&str], limit: Duration) -> Output {
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

/// Asserts a successful run and returns its stdout.
pub(crate) fn ok(o: &Output) -> String {
    assert!(o.status.success(), "job failed: {:?}\nstdout:\n{}\nstderr:\n{}", o.status, stdout(o), stderr(o));
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
