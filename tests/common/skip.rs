//! Skips that cannot pass unseen. A test whose checks need something this machine may
//! lack (Docker, network namespaces, a CPU cgroup, Slurm, a libfabric provider) calls
//! [`skip`] instead of returning quietly: a skipped test proves nothing, so where the
//! skip was not expected it must fail rather than look like a pass.
//!
//! - `RT_SKIP_LOG=FILE`: every skip appends one line `WHAT<TAB>BINARY::TEST<TAB>WHY`
//!   (`.ci/run` prints them after `make test`, whatever its result).
//! - `RT_EXPECTED_SKIPS=NAME,NAME...` (commas or newlines; `*` for any): a skip whose name
//!   is not listed panics. `.ci/run` sets it from `.ci/expected-skips`; set but empty, no
//!   skip passes. Unset (`cargo test` by hand), every skip passes with its printed line.
//!
//! The names: `netns`, `docker`, `cluster-full`, `cgroup-cpu`, `slurm`, `slurm-pmix`,
//! `slurm-pmi2`, `provider-tcp`, `provider-sockets`, `bindgen-headers`.
//!
//! This file is also compiled into `engine/tests/fabric.rs`, `fabric/tests/common` and
//! `tools/gen-bindings/tests/stale.rs` (`#[path]`), so one rule covers every crate's
//! tests; it uses only `std`.

use std::io::Write;

/// The test calling this skips its checks because `what` (a short stable name, listed
/// above) is missing here, for the reason `why`. Prints `skipped: WHAT: WHY`, records it
/// in `RT_SKIP_LOG`, and panics unless the skip is expected (see the module docs); the
/// caller returns after it.
pub(crate) fn skip(what: &str, why: &str) {
    let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
    println!("skipped: {what}: {why}");
    let test = test_name();
    if let Some(log) = std::env::var_os("RT_SKIP_LOG") {
        // One `write` per line on an O_APPEND file: lines of test processes running side
        // by side do not interleave.
        let line = format!("{what}\t{test}\t{why}\n");
        let wrote = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = wrote {
            panic!("skipped: {what}: {why}; and RT_SKIP_LOG={log:?} cannot be written: {e}");
        }
    }
    if let Ok(expected) = std::env::var("RT_EXPECTED_SKIPS") {
        let listed = expected.split([',', '\n']).map(str::trim).any(|e| e == what || e == "*");
        assert!(
            listed,
            "{test} skipped its checks ({what}: {why}), and this machine is not expected to \
             skip them: RT_EXPECTED_SKIPS={expected:?} does not name `{what}`. Provide what \
             is missing, or add `{what}` to RT_EXPECTED_SKIPS (in CI: a line with the reason \
             in .ci/expected-skips)."
        );
    }
}

/// The skip name of libfabric provider `fi_name` missing here: `provider-tcp` for
/// `tcp;ofi_rxm`, `provider-sockets`.
pub(crate) fn provider(fi_name: &str) -> String {
    format!("provider-{}", fi_name.split(';').next().unwrap_or(fi_name))
}

/// `BINARY::TEST`: the test binary without cargo's hash, and the test (libtest names
/// each test's thread after it).
fn test_name() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe.as_deref().and_then(|p| p.file_stem()).map(|s| s.to_string_lossy().into_owned());
    let stem = stem.unwrap_or_else(|| "?".into());
    let binary = match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => name.to_owned(),
        _ => stem,
    };
    match std::thread::current().name() {
        Some(t) if t != "main" => format!("{binary}::{t}"),
        _ => binary,
    }
}
