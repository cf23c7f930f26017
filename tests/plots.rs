//! `bench/plots.sh` (`make plots`): from a small fixture `shm.csv` (two implementations,
//! latency at three sizes, allreduce at two rank counts, both configs) and `detect.csv` it
//! writes exactly the expected SVGs, each well-formed-looking and naming every
//! implementation in its legend, plus a README.md listing them, and the same bytes on a
//! second run; a CSV with a wrong header stops it with a message naming the file.
//!
//! Needs gnuplot: without it these tests fail (run `bash ci-containers/install-deps.sh`,
//! which installs gnuplot-nox; CI does).

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread;
use std::time::{Duration, Instant};

const LIMIT: Duration = Duration::from_secs(120);
const IMPLS: &[&str] = &["runthrough", "Open MPI 5"];
const DETECT_IMPLS: &[&str] = &["runthrough", "Open MPI 5 ULFM"];
const HEADER: &str = "test,ranks,size,impl,config,median,min,max,unit";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(what: &str) -> TempDir {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "rt-plots-test-{}-{}-{what}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// gnuplot must be installed: a missing one fails the test, never skips it.
fn require_gnuplot() {
    match Command::new("gnuplot").arg("--version").output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "gnuplot --version failed ({}): {}; run `bash ci-containers/install-deps.sh` (gnuplot-nox)",
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!("gnuplot not found ({e}): run `bash ci-containers/install-deps.sh` (installs gnuplot-nox)"),
    }
}

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// `bash bench/plots.sh --data DATA --out OUT`, killed after `LIMIT`. Output goes to
/// files in `scratch` (no pipe to fill while waiting).
fn plots(data: &Path, out: &Path, scratch: &Path) -> Run {
    let (so, se) = (scratch.join("stdout"), scratch.join("stderr"));
    let mut child = Command::new("bash")
        .arg(root().join("bench/plots.sh"))
        .arg("--data")
        .arg(data)
        .arg("--out")
        .arg(out)
        .current_dir(root())
        .stdin(Stdio::null())
        .stdout(File::create(&so).expect("create stdout file"))
        .stderr(File::create(&se).expect("create stderr file"))
        .spawn()
        .expect("spawn bash bench/plots.sh");
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait for bench/plots.sh") {
            break s;
        }
        if start.elapsed() > LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("bench/plots.sh took more than {LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    Run {
        status,
        stdout: fs::read_to_string(so).expect("read stdout"),
        stderr: fs::read_to_string(se).expect("read stderr"),
    }
}

/// shm.csv: latency at 3 sizes (size 0 too, which the log axis leaves out) and allreduce
/// at 2 and 4 ranks, for both implementations and both configs.
fn shm_fixture() -> String {
    let mut csv = format!("{HEADER}\n");
    for (c, config) in ["defaults", "tuned"].into_iter().enumerate() {
        for (i, imp) in IMPLS.iter().enumerate() {
            let k = 1.0 + i as f64 * 0.3 + c as f64 * 0.1;
            for size in [0u64, 8, 1024, 65536] {
                let m = k * (0.2 + size as f64 / 8000.0);
                csv += &format!("latency,2,{size},{imp},{config},{m:.3},{:.3},{:.3},us\n", m * 0.9, m * 1.2);
            }
            for ranks in [2u32, 4] {
                for size in [8u64, 1024] {
                    let m = k * ranks as f64 * (0.5 + size as f64 / 1000.0);
                    csv +=
                        &format!("allreduce,{ranks},{size},{imp},{config},{m:.3},{:.3},{:.3},us\n", m * 0.9, m * 1.1);
                }
            }
        }
    }
    csv
}

/// detect.csv: both tests at 4 and 8 ranks for both implementations.
fn detect_fixture() -> String {
    let mut csv = format!("{HEADER}\n");
    for (t, test) in ["detect_kill", "detect_stop"].into_iter().enumerate() {
        for (i, imp) in DETECT_IMPLS.iter().enumerate() {
            for ranks in [4u32, 8] {
                let m = 10.0 * (1 + i + t) as f64 + ranks as f64;
                csv += &format!("{test},{ranks},0,{imp},defaults,{m},{},{},ms\n", m - 2.0, m + 5.0);
            }
        }
    }
    csv
}

fn svgs_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read the output dir")
        .map(|e| e.expect("dir entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".svg"))
        .collect();
    names.sort();
    names
}

#[test]
fn renders_the_expected_svgs_from_the_fixture() {
    require_gnuplot();
    let tmp = TempDir::new("ok");
    let data = tmp.0.join("data");
    fs::create_dir_all(&data).expect("create data dir");
    fs::write(data.join("shm.csv"), shm_fixture()).expect("write shm.csv");
    fs::write(data.join("detect.csv"), detect_fixture()).expect("write detect.csv");
    let out = tmp.0.join("plots");

    let run = plots(&data, &out, &tmp.0);
    assert!(run.status.success(), "bench/plots.sh failed ({}):\n{}\n{}", run.status, run.stdout, run.stderr);

    let mut expected: Vec<(String, &[&str])> = Vec::new();
    for config in ["defaults", "tuned"] {
        expected.push((format!("shm-latency-{config}.svg"), IMPLS));
        for ranks in [2, 4] {
            expected.push((format!("shm-allreduce-{ranks}ranks-{config}.svg"), IMPLS));
        }
    }
    expected.push(("detect-kill.svg".into(), DETECT_IMPLS));
    expected.push(("detect-stop.svg".into(), DETECT_IMPLS));
    let mut names: Vec<String> = expected.iter().map(|(n, _)| n.clone()).collect();
    names.sort();
    assert_eq!(svgs_in(&out), names, "the SVGs written\nstdout:\n{}\nstderr:\n{}", run.stdout, run.stderr);

    let readme = fs::read_to_string(out.join("README.md")).expect("README.md written");
    for (name, impls) in &expected {
        let svg = fs::read_to_string(out.join(name)).expect("read svg");
        assert!(svg.starts_with("<?xml") || svg.contains("<svg"), "{name} does not look like SVG");
        assert!(svg.trim_end().ends_with("</svg>"), "{name} does not end with </svg>");
        for imp in impls.iter() {
            assert!(svg.contains(*imp), "{name} has no legend entry {imp:?}");
        }
        assert!(!svg.contains(&*tmp.0.to_string_lossy()), "{name} holds the temp path");
        assert_eq!(
            run.stdout.lines().filter(|l| l.ends_with(&format!("/{name}")) && l.contains("wrote")).count(),
            1,
            "one line for {name} in:\n{}",
            run.stdout
        );
        let csv = if name.starts_with("detect") { "detect.csv" } else { "shm.csv" };
        let line = readme
            .lines()
            .find(|l| l.contains(&format!("({name})")))
            .unwrap_or_else(|| panic!("README.md does not list {name}:\n{readme}"));
        assert!(line.contains(csv), "README.md line of {name} does not name {csv}: {line}");
    }
    for missing in ["fabric.csv", "startup.csv"] {
        assert!(run.stderr.contains(missing), "no note on the missing {missing}:\n{}", run.stderr);
    }

    // Reproducible: a second run writes the same bytes.
    let again = tmp.0.join("again");
    let run2 = plots(&data, &again, &tmp.0);
    assert!(run2.status.success(), "second run failed ({}):\n{}", run2.status, run2.stderr);
    for name in names.iter().map(String::as_str).chain(["README.md"]) {
        let a = fs::read(out.join(name)).expect("read first");
        let b = fs::read(again.join(name)).expect("read second");
        assert!(a == b, "{name} differs between two runs on the same data");
    }
}

#[test]
fn a_wrong_header_fails_naming_the_file() {
    require_gnuplot();
    let tmp = TempDir::new("bad");
    let data = tmp.0.join("data");
    fs::create_dir_all(&data).expect("create data dir");
    fs::write(data.join("detect.csv"), detect_fixture()).expect("write detect.csv");
    fs::write(
        data.join("shm.csv"),
        "test,ranks,size,impl,config,median,min,max\nlatency,2,8,runthrough,defaults,1,1,1\n",
    )
    .expect("write shm.csv");
    let out = tmp.0.join("plots");

    let run = plots(&data, &out, &tmp.0);
    assert!(!run.status.success(), "bench/plots.sh accepted a wrong header:\n{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stderr.contains("shm.csv") && run.stderr.contains("header"),
        "the message does not name shm.csv and its header:\n{}",
        run.stderr
    );
}
