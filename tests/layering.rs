//! The modules of each crate are layered: no import circle between the top-level modules
//! of a crate (a module is `src/X.rs` with its folder `src/X/`; `X` imports `Y` when its
//! code, comments and tests left out, names `crate::Y`). A circle is reported with the
//! paths that make it, so whoever adds one sees where.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use common::rust_files;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The code of a Rust file without comments, string literals' content kept (a
/// `crate::` inside a string is rare and harmless) and without its `#[cfg(test)]` tail.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let l = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(l);
        out.push('\n');
    }
    match out.find("#[cfg(test)]") {
        Some(i) => out[..i].to_string(),
        None => out,
    }
}

/// Every `crate::NAME` in `code`.
fn crate_refs(code: &str) -> BTreeSet<String> {
    let mut refs = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + 7..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `runthrough_crate::`
        }
        let name: String = rest.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        if !name.is_empty() {
            refs.insert(name);
        }
    }
    refs
}

/// Module -> (imported module -> one file that imports it), for the crate in `src`.
fn graph(src: &Path) -> BTreeMap<String, BTreeMap<String, PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut g: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
    for f in &files {
        let rel = f.strip_prefix(src).expect("under src");
        let top = rel.iter().next().and_then(|s| s.to_str()).expect("a name").trim_end_matches(".rs").to_string();
        let stem = f.file_stem().and_then(|s| s.to_str()).unwrap_or("");
        if matches!(top.as_str(), "lib" | "main") || matches!(stem, "tests" | "prop_tests") {
            continue;
        }
        let text = std::fs::read_to_string(f).expect("read source");
        let deps = g.entry(top.clone()).or_default();
        for d in crate_refs(&code(&text)) {
            if d != top {
                deps.entry(d).or_insert_with(|| f.clone());
            }
        }
    }
    let mods: BTreeSet<String> = g.keys().cloned().collect();
    for deps in g.values_mut() {
        deps.retain(|d, _| mods.contains(d));
    }
    g
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(g: &BTreeMap<String, BTreeMap<String, PathBuf>>) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a BTreeMap<String, BTreeMap<String, PathBuf>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g[v].keys() {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = Vec::new();
            loop {
                let w = t.stack.pop().expect("on the stack");
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t =
        T { g, index: BTreeMap::new(), low: BTreeMap::new(), stack: Vec::new(), on: BTreeSet::new(), out: Vec::new() };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out
}

fn describe(g: &BTreeMap<String, BTreeMap<String, PathBuf>>, c: &[String]) -> String {
    let mut s = format!("circle {c:?}:\n");
    for a in c {
        for (b, f) in &g[a] {
            if c.contains(b) {
                s += &format!("  {a} -> {b} (e.g. {})\n", f.display());
            }
        }
    }
    s
}

#[test]
fn no_import_circle_between_the_modules_of_any_crate() {
    let mut report = String::new();
    for krate in [
        "src",
        "engine/src",
        "abi/src",
        "shm/src",
        "ft/src",
        "io/src",
        "launch/src",
        "pmix/src",
        "bench/src",
        "fabric/src",
    ] {
        let g = graph(&root().join(krate));
        assert!(g.len() > 1, "{krate}: no modules found");
        for c in circles(&g) {
            report += &format!("{krate}: {}", describe(&g, &c));
        }
    }
    assert!(report.is_empty(), "{report}");
}

#[test]
fn the_circle_finder_finds_circles_and_only_them() {
    let mk = |edges: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeMap<String, PathBuf>> = BTreeMap::new();
        for (a, b) in edges {
            g.entry(a.to_string()).or_default().insert(b.to_string(), PathBuf::from("x.rs"));
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert!(circles(&mk(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    assert_eq!(circles(&mk(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), vec![vec!["a", "b", "c"]]);
    assert_eq!(circles(&mk(&[("a", "b"), ("b", "a"), ("c", "d"), ("d", "c")])).len(), 2);
    let c = code(
        "use crate::x::Y; // crate::z\n/// crate::w\nfn f() { crate::v::g() }\n#[cfg(test)]\nmod t { use crate::u; }",
    );
    assert_eq!(crate_refs(&c), ["v", "x"].iter().map(|s| s.to_string()).collect());
    assert!(crate_refs("runthrough_crate::x").is_empty());
}
