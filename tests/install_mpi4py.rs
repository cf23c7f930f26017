//! mpi4py's standard-ABI build against an installed runthrough, with no MPICH (issue 37):
//! the tests' build is installed with `scripts/install.sh` into a fresh prefix under the
//! target directory; `abi/mpi4py/build.sh` builds mpi4py 4.1.1 from its PyPI sdist with
//! the installed `bin/mpicc` (`MPI4PY_MPICC`: MPICH's venv is neither made nor used) and
//! the installed forced header `share/runthrough/pympi_ulfm.h`, into a venv beside the
//! prefix; the extension must load the installed `libmpi_abi.so.1` through its run path
//! alone. Then `abi/mpi4py/run.sh` runs mpi4py's `test_p2p_buf` and `test_ulfm` at 2 ranks
//! under the installed `bin/mpiexec`: every test passes on both ranks, none errs, and
//! `test_ulfm` skips none (its ULFM calls are compiled in).
//!
//! The prefix is installed afresh each run at the same path, so the venv stays valid and
//! `build.sh`'s stamp skips the rebuild (first run: a few minutes, pip fetching the sdist,
//! setuptools, Cython and numpy from PyPI; then seconds). Needs PyPI the first time, as
//! `make abi-test` and `tests/abi.rs` do: not skipped.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use common::*;

/// mpi4py's build from its sdist: at most `pip install` on 2 busy cores.
const BUILD: Duration = Duration::from_secs(1500);
const SHORT: Duration = Duration::from_secs(120);
/// Both modules under `run.sh` (300 s each at most, plus its library probe).
const TESTS: Duration = Duration::from_secs(700);
const MODULES: [&str; 2] = ["test_p2p_buf", "test_ulfm"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `cmd`, asserts it succeeded, returns its stdout and stderr.
fn run_ok(cmd: &mut Command, limit: Duration) -> String {
    let what = format!("{cmd:?}");
    let o = output_within(cmd, limit);
    let text = format!("stdout:\n{}\nstderr:\n{}", stdout(&o), stderr(&o));
    assert!(o.status.success(), "{what}: {}\n{text}", o.status);
    text
}

/// A command with the environment of a machine without MPICH, as far as this process can
/// make it: `prefix/bin` first on `PATH` (so `mpicc` and `mpiexec` are runthrough's), and
/// none of the variables that would point a build or a run at another MPI.
fn clean(program: impl AsRef<std::ffi::OsStr>, prefix: &Path) -> Command {
    let mut cmd = Command::new(program);
    let path = std::env::var_os("PATH").unwrap_or_default();
    let dirs = std::iter::once(prefix.join("bin")).chain(std::env::split_paths(&path));
    cmd.env("PATH", std::env::join_paths(dirs).expect("PATH"));
    for v in [
        "LD_LIBRARY_PATH",
        "LD_PRELOAD",
        "LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "PKG_CONFIG_PATH",
        "CC",
        "MPICC",
        "RT_CC",
        "RT_MPI_WRAPPER_ACTIVE",
        "MPICH_VENV",
        "MPI4PY_BUILD_MPICC",
        "MPI4PY_BUILD_MPICFG",
        "MPI4PY_BUILD_CONFIGURE",
        "MPI4PY_ABI_HEADER_DIR",
        "MPI4PY_ULFM_HEADER",
        "MPI4PY_SDIST",
        "FORCE",
        "PYTHONPATH",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

/// One module's line of `abi/mpi4py/run.sh` (`module pass fail skip error [note]`):
/// (pass, fail, skip, error).
fn module_counts(out: &str, module: &str) -> Option<(u32, u32, u32, u32)> {
    let line = out.lines().find(|l| l.split_whitespace().next() == Some(module))?;
    let n: Vec<u32> = line.split_whitespace().skip(1).take(4).filter_map(|w| w.parse().ok()).collect();
    (n.len() == 4).then(|| (n[0], n[1], n[2], n[3]))
}

#[test]
fn mpi4py_builds_against_the_installed_tree_without_mpich_and_passes_p2p_and_ulfm_at_2_ranks() {
    let (target, profile) = install_build();
    let work = target.join("mpi4py-installed");
    let prefix = work.join("prefix");
    let venv = work.join("venv");
    let out_dir = work.join("out");
    let mpich_venv = root().join("bench/venvs/mpich");
    let had_mpich_venv = mpich_venv.exists();

    // 1. A fresh install of the tests' build.
    let _ = std::fs::remove_dir_all(&prefix);
    std::fs::create_dir_all(&work).expect("work directory");
    let t = Instant::now();
    run_ok(
        Command::new("bash")
            .arg(root().join("scripts/install.sh"))
            .arg("install")
            .env("PREFIX", &prefix)
            .env("PROFILE", &profile)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("DESTDIR"),
        SHORT,
    );
    let prefix = prefix.canonicalize().expect("installed prefix");
    let lib = prefix.join("lib/libmpi_abi.so.1");
    assert!(lib.is_file(), "no {}", lib.display());
    println!("install: {:.1} s", t.elapsed().as_secs_f64());

    // 2. mpi4py with the installed mpicc and forced header (cached by build.sh's stamp).
    let t = Instant::now();
    let log = run_ok(
        clean("bash", &prefix)
            .arg(root().join("abi/mpi4py/build.sh"))
            .env("MPI4PY_MPICC", prefix.join("bin/mpicc"))
            .env("MPI4PY_VENV", &venv),
        BUILD,
    );
    println!("build.sh: {:.1} s\n{log}", t.elapsed().as_secs_f64());
    let want = format!(
        "build.sh: compiler {}, headers {}, forced header {}",
        prefix.join("bin/mpicc").display(),
        prefix.join("include").display(),
        prefix.join("share/runthrough/pympi_ulfm.h").display()
    );
    assert!(log.contains(&want), "build.sh did not use the installed tree ({want}):\n{log}");
    assert_eq!(mpich_venv.exists(), had_mpich_venv, "build.sh made {}:\n{log}", mpich_venv.display());

    // 3. The extension loads the installed library by its run path (no LD_LIBRARY_PATH),
    // and no other MPI library.
    let site = run_ok(
        clean(venv.join("bin/python"), &prefix)
            .args(["-c", "import sysconfig; print(sysconfig.get_paths()['platlib'])"]),
        SHORT,
    );
    let site = PathBuf::from(site.lines().nth(1).expect("platlib line").trim());
    let sos: Vec<PathBuf> = std::fs::read_dir(site.join("mpi4py"))
        .unwrap_or_else(|e| panic!("{}: {e}", site.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("MPI") && name.ends_with(".so")
        })
        .collect();
    assert!(!sos.is_empty(), "no MPI*.so in {}/mpi4py", site.display());
    for so in &sos {
        let elf = run_ok(Command::new("readelf").arg("-d").arg(so), SHORT);
        assert!(elf.contains("Shared library: [libmpi_abi.so.1]"), "{} needs no libmpi_abi.so.1:\n{elf}", so.display());
        let libdir = prefix.join("lib");
        let runpath = elf.lines().find(|l| l.contains("(RUNPATH)") || l.contains("(RPATH)"));
        let dirs = runpath.and_then(|l| l.split_once('[')).map_or("", |(_, d)| d.trim_end().trim_end_matches(']'));
        assert!(
            dirs.split(':').any(|d| Path::new(d) == libdir),
            "{} has no run path to {}:\n{elf}",
            so.display(),
            libdir.display()
        );
        let ldd = run_ok(clean("ldd", &prefix).arg(so), SHORT);
        let want = format!("libmpi_abi.so.1 => {} ", lib.display());
        assert!(ldd.contains(&want), "{} does not load {want}:\n{ldd}", so.display());
        for other in ["libmpi.so", "libmpich", "libmpi_abi.so.1 => not found"] {
            assert!(!ldd.contains(other), "{} loads {other}:\n{ldd}", so.display());
        }
    }

    // 4. mpi4py's test modules at 2 ranks under the installed mpiexec.
    let t = Instant::now();
    let text = run_ok(
        clean("bash", &prefix)
            .arg(root().join("abi/mpi4py/run.sh"))
            .arg("--venv")
            .arg(&venv)
            .arg("--lib")
            .arg(prefix.join("lib"))
            .arg("--launcher")
            .arg(prefix.join("bin/mpiexec"))
            .args(["-n", "2", "--timeout", "300", "--out"])
            .arg(&out_dir)
            .args(MODULES)
            .env("RT_FT_TIMEOUT_MS", "500"),
        TESTS,
    );
    println!("run.sh: {:.1} s\n{text}", t.elapsed().as_secs_f64());
    let loaded = format!("# library: {} | ", lib.display());
    assert!(text.contains(&loaded) && text.contains("runthrough"), "not the installed library ({loaded}):\n{text}");
    assert!(!text.contains("WARNING"), "{text}");
    for m in MODULES {
        let (pass, fail, skip, error) = module_counts(&text, m).unwrap_or_else(|| panic!("no line for {m}:\n{text}"));
        assert!(pass > 0 && fail == 0 && error == 0, "{m}: {pass} pass, {fail} fail, {error} error\n{text}");
        if m == "test_ulfm" {
            assert_eq!(skip, 0, "test_ulfm skipped tests: mpi4py built without its ULFM calls?\n{text}");
        }
    }

    // 5. The temporary prefix goes (the venv and the sdist stay, for the next run).
    run_ok(
        Command::new("bash")
            .arg(root().join("scripts/install.sh"))
            .arg("uninstall")
            .env("PREFIX", &prefix)
            .env("PROFILE", &profile)
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("DESTDIR"),
        SHORT,
    );
    assert!(!prefix.exists(), "uninstall left {}", prefix.display());
}
