//! The tunables table (`runthrough_launch::tunables`, `rtrun --info`): the README holds
//! exactly the table the code gives, and every `RT_*` variable the code reads is in it.

mod common;

use std::collections::BTreeSet;
use std::path::PathBuf;

use common::rust_files;
use runthrough_launch::tunables::{markdown, TUNABLES};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_readme_holds_the_generated_table() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("README.md");
    let start = "<!-- tunables: rtrun --info=markdown -->\n";
    let end = "<!-- end of tunables -->";
    let a = readme.find(start).expect("the README's tunables marker") + start.len();
    let b = readme[a..].find(end).expect("the README's end-of-tunables marker") + a;
    assert_eq!(
        &readme[a..b],
        markdown(),
        "README.md's tunables table is stale: replace it with `rtrun --info=markdown`"
    );
}

/// Every `"RT_NAME"` string literal of the libraries' and the launcher's code (tests,
/// whose `RT_TEST_*` switches are theirs, left out).
fn names_in_code() -> BTreeSet<String> {
    let mut files = Vec::new();
    for d in ["src", "engine/src", "shm/src", "fabric/src", "ft/src", "io/src", "launch/src", "pmix/src", "abi/src"] {
        rust_files(&root().join(d), &mut files);
    }
    let mut names = BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).expect("source");
        let code = text.split("#[cfg(test)]").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("\"RT_") {
            rest = &rest[i + 1..];
            let name: String =
                rest.chars().take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_').collect();
            // `"RT_"` alone is a prefix match (the variables rtrun forwards), not a name.
            if name.len() > 3 && rest[name.len()..].starts_with('"') && !name.starts_with("RT_TEST_") {
                names.insert(name);
            }
        }
    }
    names
}

#[test]
fn every_variable_the_code_reads_is_in_the_table() {
    let listed: BTreeSet<&str> = TUNABLES.iter().map(|t| t.name).collect();
    let missing: Vec<String> = names_in_code().into_iter().filter(|n| !listed.contains(n.as_str())).collect();
    assert!(missing.is_empty(), "read by the code but not in launch/src/tunables.rs: {missing:?}");
    assert!(listed.len() == TUNABLES.len(), "a variable is listed twice");
}
