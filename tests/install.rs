//! runthrough installed like an MPI (`make install`, `scripts/install.sh`), as a user meets
//! it: into a fresh prefix, then the installed `mpicc` builds `abi/c/hello.c` (MPI_Init,
//! rank, size, two MPI_Allreduce checks) and the installed `mpiexec -n 4` runs it, every
//! rank checked, with the installed `libmpi_abi.so.1` loaded through the run path alone
//! (no `LD_LIBRARY_PATH`); the same with `mpicxx` and with the flags of
//! `pkg-config --cflags --libs mpi-abi`; `mpicc -show` and friends; a copy of the tree
//! moved elsewhere still builds and runs; `uninstall` leaves no file. A second case
//! stages with `DESTDIR` through the Makefile's `install` and `uninstall` targets.
//!
//! It installs the build the tests run from (`PROFILE=debug` under `make test`), so no
//! extra release build is needed. `pkg-config` and `c++` are required (not skipped):
//! `ci-containers/install-deps.sh` installs them.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::*;

/// Every path the install puts under the prefix (as `scripts/install.sh` lists them).
const INSTALLED: [&str; 14] = [
    "bin/rtrun",
    "bin/mpiexec",
    "bin/mpicc",
    "bin/mpicxx",
    "lib/libmpi_abi.so.1",
    "lib/libmpi_abi.so",
    "include/mpi.h",
    "include/mpi_abi.h",
    "include/mpi-ext.h",
    "lib/pkgconfig/mpi-abi.pc",
    "lib/pkgconfig/mpi.pc",
    "share/man/man1/rtrun.1",
    "share/runthrough/pympi_ulfm.h",
    "share/runthrough/installed-dirs",
];

const COMPILE: Duration = Duration::from_secs(120);
const JOB: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let p = std::env::temp_dir().join(format!("rt-install-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("scratch directory");
        Scratch(p.canonicalize().expect("canonical scratch path"))
    }

    fn join(&self, p: &str) -> PathBuf {
        self.0.join(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `cmd`, asserts it succeeded, returns its stdout.
fn run_ok(cmd: &mut Command, limit: Duration) -> String {
    let what = format!("{cmd:?}");
    let o = output_within(cmd, limit);
    assert!(o.status.success(), "{what}: {}\nstdout:\n{}\nstderr:\n{}", o.status, stdout(&o), stderr(&o));
    stdout(&o)
}

/// `word` as the wrappers' `-show` prints it: single-quoted unless it is plain.
fn sh_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_@%+=:,./-".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

/// A command of an installed wrapper, without the variables that choose its compiler.
fn wrapper(prefix: &Path, name: &str) -> Command {
    let mut cmd = Command::new(prefix.join("bin").join(name));
    for v in ["CC", "CXX", "RT_CC", "RT_CXX", "RT_MPI_WRAPPER_ACTIVE"] {
        cmd.env_remove(v);
    }
    cmd
}

/// `scripts/install.sh ACTION` of the tests' build with `PREFIX=prefix` (and `DESTDIR`).
fn install_sh(action: &str, prefix: &Path, destdir: Option<&Path>) -> String {
    let (target, profile) = install_build();
    let mut cmd = Command::new("bash");
    cmd.arg(root().join("scripts/install.sh"))
        .arg(action)
        .env("PREFIX", prefix)
        .env("PROFILE", &profile)
        .env("CARGO_TARGET_DIR", &target);
    match destdir {
        Some(d) => cmd.env("DESTDIR", d),
        None => cmd.env_remove("DESTDIR"),
    };
    run_ok(&mut cmd, COMPILE)
}

/// `make -C ROOT TARGET PREFIX=prefix DESTDIR=destdir PROFILE=...` (without `deps`, which
/// `make test` ran).
fn make(target_name: &str, prefix: &Path, destdir: &Path) -> String {
    let (target, profile) = install_build();
    let mut cmd = Command::new("make");
    cmd.arg("-C")
        .arg(root())
        .args(["-o", "deps", target_name])
        .arg(format!("PREFIX={}", prefix.display()))
        .arg(format!("DESTDIR={}", destdir.display()))
        .arg(format!("PROFILE={profile}"))
        .env("CARGO_TARGET_DIR", &target);
    run_ok(&mut cmd, Duration::from_secs(600))
}

/// Every path under `dir` (files, links and directories), relative to it, sorted.
fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        for e in std::fs::read_dir(dir).expect("read_dir") {
            let e = e.expect("dir entry");
            let p = e.path();
            out.push(p.strip_prefix(base).expect("under base").to_string_lossy().into_owned());
            if e.file_type().expect("file type").is_dir() {
                walk(base, &p, out);
            }
        }
    }
    let mut out = Vec::new();
    if dir.exists() {
        walk(dir, dir, &mut out);
    }
    out.sort();
    out
}

fn same_bytes(a: &Path, b: &Path) {
    let (x, y) = (std::fs::read(a).expect("read"), std::fs::read(b).expect("read"));
    assert!(x == y, "{} differs from {}", a.display(), b.display());
}

fn executable(p: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())).permissions().mode();
    assert!(mode & 0o111 == 0o111, "{} is not executable by all (mode {mode:o})", p.display());
}

/// The installed tree at `dest` (DESTDIR + PREFIX) holds every file, as built, and names
/// `prefix` (PREFIX) where a file names a path.
fn check_tree(dest: &Path, prefix: &Path) {
    let (target, profile) = install_build();
    let build_dir = target.join(profile);
    for f in INSTALLED {
        assert!(std::fs::symlink_metadata(dest.join(f)).is_ok(), "{f} not installed in {}", dest.display());
    }
    assert_eq!(std::fs::read_link(dest.join("bin/mpiexec")).expect("mpiexec is a link"), Path::new("rtrun"));
    assert_eq!(
        std::fs::read_link(dest.join("lib/libmpi_abi.so")).expect("libmpi_abi.so is a link"),
        Path::new("libmpi_abi.so.1")
    );
    same_bytes(&dest.join("bin/rtrun"), &build_dir.join("rtrun"));
    same_bytes(&dest.join("lib/libmpi_abi.so.1"), &build_dir.join("libmpi_abi.so"));
    for h in ["mpi.h", "mpi_abi.h", "mpi-ext.h"] {
        same_bytes(&dest.join("include").join(h), &root().join("abi/include").join(h));
    }
    same_bytes(&dest.join("share/runthrough/pympi_ulfm.h"), &root().join("abi/mpi4py/pympi_ulfm.h"));
    for x in ["bin/rtrun", "bin/mpiexec", "bin/mpicc", "bin/mpicxx", "lib/libmpi_abi.so.1"] {
        executable(&dest.join(x));
    }
    let elf = run_ok(Command::new("readelf").arg("-d").arg(dest.join("lib/libmpi_abi.so.1")), COMPILE);
    assert!(elf.contains("Library soname: [libmpi_abi.so.1]"), "soname:\n{elf}");
    for pc in ["mpi-abi", "mpi"] {
        let text = std::fs::read_to_string(dest.join(format!("lib/pkgconfig/{pc}.pc"))).expect("pc file");
        assert!(text.lines().any(|l| l == format!("prefix={}", prefix.display())), "{pc}.pc:\n{text}");
        for key in ["Name:", "Version:", "Cflags: -I${includedir}", "Libs: -L${libdir}"] {
            assert!(text.contains(key), "{pc}.pc lacks {key}:\n{text}");
        }
    }

    // The man page: what the installed rtrun's `--generate-man` prints (from the clap
    // definition `--help` comes from), naming this version, with every option
    // `rtrun --help` lists, in roff (`-` as `\-`).
    let man_path = dest.join("share/man/man1/rtrun.1");
    let page = std::fs::read_to_string(&man_path).expect("man page");
    let generated = run_ok(Command::new(dest.join("bin/rtrun")).arg("--generate-man"), COMPILE);
    assert!(page == generated, "rtrun.1 is not what rtrun --generate-man prints:\n{page}");
    for part in [".TH RTRUN 1", ".SH SYNOPSIS", ".SH OPTIONS", ".SH ENVIRONMENT", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"]
    {
        assert!(page.contains(part), "no {part} in rtrun.1:\n{page}");
    }
    assert!(page.contains(&format!("\"runthrough {}\"", env!("CARGO_PKG_VERSION"))), "no version in rtrun.1:\n{page}");
    let help = run_ok(Command::new(dest.join("bin/rtrun")).arg("--help"), COMPILE);
    let mut options = 0;
    for line in help.lines() {
        let body = line.trim_start();
        if line.len() - body.len() > 6 || !body.starts_with('-') {
            continue;
        }
        let head = body.split("  ").next().unwrap_or(body);
        for opt in head.split_whitespace().filter(|w| w.starts_with('-')) {
            // `--info[=<markdown>]`: the option's name alone.
            let name = opt.trim_end_matches(',').split(['[', '=', '<']).next().unwrap_or(opt);
            let roff = name.replace('-', "\\-");
            assert!(
                page.contains(&format!("\\fB{roff}")) || page.contains(&format!(" {roff}")),
                "{opt} not in rtrun.1"
            );
            options += 1;
        }
    }
    assert!(options >= 10, "only {options} options found in rtrun --help:\n{help}");
    // `man -l` renders it (man-db: ci-containers/install-deps.sh installs it).
    let text = run_ok(Command::new("man").arg("-l").arg(&man_path).env("MANWIDTH", "100"), COMPILE);
    for want in ["SYNOPSIS", "rtrun -n N [options]", "--exit-status", "ENVIRONMENT", "EXIT STATUS"] {
        assert!(text.contains(want), "man -l rtrun.1 lacks {want:?}:\n{text}");
    }
}

/// Runs `PREFIX/bin/mpiexec --outcome-file F -n N PROG` in `cwd` with no `LD_LIBRARY_PATH`
/// (the program finds the library by its run path); asserts every rank exited 0 after
/// finalizing and printed its `hello:` line with the right sums and `lib` the
/// installed library; returns the job's stdout.
fn run_hello(prefix: &Path, n: u32, prog: &Path, cwd: &Path) -> String {
    static ONE_JOB: Mutex<()> = Mutex::new(());
    let _turn = ONE_JOB.lock().unwrap_or_else(|p| p.into_inner());
    let outcome = cwd.join(format!("outcome-{n}"));
    let out = output_within(
        Command::new(prefix.join("bin/mpiexec"))
            .arg("--outcome-file")
            .arg(&outcome)
            .args(["-n", &n.to_string()])
            .arg(prog)
            .current_dir(cwd)
            .env_remove("LD_LIBRARY_PATH")
            .env("RT_FT_TIMEOUT_MS", "500"),
        JOB,
    );
    let records = std::fs::read_to_string(&outcome).unwrap_or_default();
    let ranks = records.lines().map(|l| RankReport::parse(l).unwrap_or_else(|| panic!("bad record {l:?}"))).collect();
    let text = ok(&Run { out, ranks, size: n });
    let lib = prefix.join("lib/libmpi_abi.so.1").canonicalize().expect("installed library");
    let lines: Vec<&str> = text.lines().map(|l| l.trim_end_matches('\r')).filter(|l| l.starts_with("hello:")).collect();
    assert_eq!(lines.len(), n as usize, "one hello line per rank:\n{text}");
    for r in 0..n {
        let want = format!("hello: rank {r} of {n}, sum {}, max {}, lib {}: ok", n * (n + 1) / 2, n - 1, lib.display());
        assert_eq!(lines.iter().filter(|l| **l == want).count(), 1, "rank {r}: expected the line\n{want}\nin\n{text}");
    }
    text
}

/// The wrappers' `-show` family against `prefix`.
fn check_show(prefix: &Path) {
    let inc = sh_quote(&format!("-I{}/include", prefix.display()));
    let link = format!(
        "{} {} -lmpi_abi",
        sh_quote(&format!("-L{}/lib", prefix.display())),
        sh_quote(&format!("-Wl,-rpath,{}/lib", prefix.display()))
    );
    let show = |name: &str, args: &[&str], env: &[(&str, String)]| {
        let mut cmd = wrapper(prefix, name);
        cmd.args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        run_ok(&mut cmd, COMPILE).trim_end().to_owned()
    };
    assert_eq!(show("mpicc", &["-show", "hello.c", "-o", "hello"], &[]), format!("cc {inc} hello.c -o hello {link}"));
    assert_eq!(show("mpicc", &["hello.c", "-showme"], &[]), format!("cc {inc} hello.c {link}"));
    for no_link in ["-c", "-E", "-S", "-M", "-MM", "-fsyntax-only"] {
        assert_eq!(show("mpicc", &["-show", no_link, "hello.c"], &[]), format!("cc {inc} {no_link} hello.c"));
    }
    assert_eq!(show("mpicc", &["-showme:compile"], &[]), inc);
    assert_eq!(show("mpicc", &["--showme:link"], &[]), link);
    assert_eq!(show("mpicc", &["-compile_info"], &[]), format!("cc {inc}"));
    assert_eq!(show("mpicc", &["-link_info"], &[]), format!("cc {inc} {link}"));
    assert_eq!(show("mpicc", &["-showme:incdirs"], &[]), sh_quote(&format!("{}/include", prefix.display())));
    assert_eq!(show("mpicc", &["-showme:libdirs"], &[]), sh_quote(&format!("{}/lib", prefix.display())));
    assert_eq!(show("mpicc", &["-showme:libs"], &[]), "mpi_abi");
    assert_eq!(show("mpicxx", &["-show", "hello.cpp"], &[]), format!("c++ {inc} hello.cpp {link}"));
    // CC chooses the compiler, unless it is an MPI wrapper (CC=mpicc pip install ...).
    assert_eq!(show("mpicc", &["-show", "-c", "x.c"], &[("CC", "gcc".into())]), format!("gcc {inc} -c x.c"));
    let itself = prefix.join("bin/mpicc").display().to_string();
    assert_eq!(show("mpicc", &["-show", "-c", "x.c"], &[("CC", itself)]), format!("cc {inc} -c x.c"));
    assert_eq!(
        show("mpicxx", &["-show", "-c", "x.cpp"], &[("CXX", "mpicxx".into()), ("RT_CXX", "g++".into())]),
        format!("g++ {inc} -c x.cpp")
    );
    let version = show("mpicc", &["-showme:version"], &[]);
    assert!(version.contains(env!("CARGO_PKG_VERSION")), "{version}");
}

/// Compiles `abi/c/hello.c` with the wrapper `name` of `prefix` (as C++ with `mpicxx`) into
/// `dir`; returns the program.
fn build_hello(prefix: &Path, name: &str, dir: &Path) -> PathBuf {
    let src = if name == "mpicxx" {
        let cpp = dir.join("hello.cpp");
        std::fs::copy(root().join("abi/c/hello.c"), &cpp).expect("copy hello.c");
        cpp
    } else {
        root().join("abi/c/hello.c")
    };
    let prog = dir.join(format!("hello-{name}"));
    run_ok(wrapper(prefix, name).args(["-Wall", "-Wextra", "-Werror", "-o"]).arg(&prog).arg(&src), COMPILE);
    prog
}

/// The library `prog` loads, by `ldd` with no `LD_LIBRARY_PATH`: the installed one.
fn check_ldd(prog: &Path, prefix: &Path) {
    let out = run_ok(Command::new("ldd").arg(prog).env_remove("LD_LIBRARY_PATH"), COMPILE);
    let want = format!("libmpi_abi.so.1 => {}/lib/libmpi_abi.so.1 ", prefix.display());
    assert!(out.contains(&want), "{} does not load {want}:\n{out}", prog.display());
}

#[test]
fn install_builds_and_runs_mpi_programs_moves_and_uninstalls() {
    let scratch = Scratch::new("prefix");
    let prefix = scratch.join("prefix");
    let log = install_sh("install", &prefix, None);
    assert!(log.contains("runthrough") && log.contains("installed"), "{log}");
    check_tree(&prefix, &prefix);

    // mpiexec is rtrun.
    let help = |name: &str| run_ok(Command::new(prefix.join("bin").join(name)).arg("--help"), COMPILE);
    assert_eq!(help("mpiexec"), help("rtrun"), "mpiexec --help differs from rtrun --help");
    let bad = output_within(Command::new(prefix.join("bin/mpiexec")).arg("--no-such-option"), COMPILE);
    assert_eq!(bad.status.code(), Some(2), "mpiexec with a bad option: {bad:?}");

    check_show(&prefix);

    // The C program with mpicc, at 4 ranks; as C++ with mpicxx, at 2.
    let hello = build_hello(&prefix, "mpicc", &scratch.0);
    check_ldd(&hello, &prefix);
    run_hello(&prefix, 4, &hello, &scratch.0);
    let hellox = build_hello(&prefix, "mpicxx", &scratch.0);
    check_ldd(&hellox, &prefix);
    run_hello(&prefix, 2, &hellox, &scratch.0);

    // pkg-config's flags, and a program built with them alone.
    let pc_path = prefix.join("lib/pkgconfig");
    let p = prefix.display();
    let flags = format!("-I{p}/include -L{p}/lib -Wl,-rpath,{p}/lib -lmpi_abi");
    for module in ["mpi-abi", "mpi"] {
        let mut cmd = Command::new("pkg-config");
        cmd.args(["--cflags", "--libs", module]).env("PKG_CONFIG_PATH", &pc_path);
        let o = output_within(&mut cmd, COMPILE);
        assert!(o.status.success(), "pkg-config {module} (install-deps.sh installs pkg-config): {o:?}");
        assert_eq!(stdout(&o).trim(), flags, "pkg-config --cflags --libs {module}");
        let v =
            run_ok(Command::new("pkg-config").args(["--modversion", module]).env("PKG_CONFIG_PATH", &pc_path), COMPILE);
        assert_eq!(v.trim(), env!("CARGO_PKG_VERSION"));
    }
    let hello_pc = scratch.join("hello-pkg-config");
    run_ok(
        Command::new("cc")
            .args(["-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&hello_pc)
            .arg(root().join("abi/c/hello.c"))
            .args(flags.split_whitespace()),
        COMPILE,
    );
    run_hello(&prefix, 2, &hello_pc, &scratch.0);

    // A copy of the tree moved elsewhere (a path with a space) works on its own: the
    // original is uninstalled first.
    let moved = scratch.join("moved tree");
    run_ok(Command::new("cp").arg("-a").arg(&prefix).arg(&moved), COMPILE);

    let log = install_sh("uninstall", &prefix, None);
    assert!(log.contains("removed"), "{log}");
    assert!(!prefix.exists(), "uninstall left {:?} in {}", tree(&prefix), prefix.display());

    check_show(&moved);
    let hello_moved = build_hello(&moved, "mpicc", &scratch.0);
    check_ldd(&hello_moved, &moved);
    run_hello(&moved, 4, &hello_moved, &scratch.0);
}

#[test]
fn make_install_with_destdir_stages_the_tree_and_make_uninstall_removes_it() {
    let scratch = Scratch::new("destdir");
    let stage = scratch.join("stage");
    let prefix = PathBuf::from(format!("/opt/rt-install-test-{}", std::process::id()));
    assert!(!prefix.exists(), "{} exists already", prefix.display());
    let dest = PathBuf::from(format!("{}{}", stage.display(), prefix.display()));

    make("install", &prefix, &stage);
    assert!(!prefix.exists(), "make install with DESTDIR wrote into PREFIX {}", prefix.display());
    check_tree(&dest, &prefix);
    // Nothing installed names the staging directory.
    for f in INSTALLED.iter().filter(|f| !f.starts_with("bin/rtrun") && !f.starts_with("lib/libmpi_abi")) {
        if let Ok(text) = std::fs::read_to_string(dest.join(f)) {
            assert!(!text.contains(&stage.display().to_string()), "{f} names the DESTDIR {}", stage.display());
        }
    }
    // What the user put beside it stays, with its directory.
    std::fs::write(dest.join("bin/foreign-tool"), "#!/bin/sh\n").expect("foreign file");
    std::fs::write(dest.join("include/foreign.h"), "").expect("foreign file");

    make("uninstall", &prefix, &stage);
    assert_eq!(
        tree(&dest),
        ["bin", "bin/foreign-tool", "include", "include/foreign.h"],
        "left under {}",
        dest.display()
    );
    assert!(!prefix.exists());
}
