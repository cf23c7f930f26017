//! The committed bindings are what the installed headers give: each file of
//! [`Binding::ALL`] is regenerated into a string and compared byte for byte with the
//! committed one. A stale file fails with its first differing line and the command that
//! regenerates it.
//!
//! Without a library's headers (pkg-config does not find it) the check of that file is
//! skipped as `bindgen-headers` (`tests/common/skip.rs`: a failure unless
//! `RT_EXPECTED_SKIPS` names it; CI installs the headers, ci-containers/install-deps.sh).
//! Without libclang, bindgen panics and the test fails, saying so.

#[path = "../../../tests/common/skip.rs"]
#[allow(dead_code)]
mod skip;

use runthrough_gen_bindings::{first_difference, workspace_root, Binding, Error, REGENERATE};

#[test]
fn the_committed_bindings_are_what_the_installed_headers_give() {
    let mut stale = String::new();
    for b in Binding::ALL {
        let path = workspace_root().join(b.path());
        let committed = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let generated = match b.generate() {
            Ok(g) => g,
            Err(Error::Headers(why)) => {
                skip::skip("bindgen-headers", &format!("{} not checked: {why}", b.path()));
                continue;
            }
            Err(e) => panic!("{}: {e}", b.path()),
        };
        if let Some((line, was, now)) = first_difference(&committed, &generated) {
            let show = |l: Option<String>| l.map_or_else(|| "(end of file)".to_owned(), |l| format!("{l:?}"));
            stale += &format!(
                "{} is stale: it differs from what the installed {} headers give, first at line {line}:\n  \
                 committed: {}\n  generated: {}\n",
                b.path(),
                b.name(),
                show(was),
                show(now)
            );
        }
    }
    assert!(stale.is_empty(), "{stale}Regenerate with: {REGENERATE}");
}
