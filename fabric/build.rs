//! Generates the libfabric FFI with bindgen against the headers pkg-config finds.
//!
//! The header set is probed, not assumed: `fi_profile.h` (libfabric ≥ 2.0) and the other
//! optional headers are included only when present, so the same build works against
//! Debian 12's 1.17 and against 2.x installs.

use std::env;
use std::path::{Path, PathBuf};

/// The exported libfabric functions runthrough calls (everything else goes through the
/// fid ops tables), loaded from `libfabric.so.1` at run time.
const FUNCTIONS: &str = "fi_getinfo|fi_freeinfo|fi_dupinfo|fi_fabric|fi_strerror|fi_version";

/// Headers always present since libfabric 1.x.
const REQUIRED: &[&str] = &[
    "rdma/fabric.h",
    "rdma/fi_errno.h",
    "rdma/fi_domain.h",
    "rdma/fi_endpoint.h",
    "rdma/fi_cm.h",
    "rdma/fi_eq.h",
    "rdma/fi_tagged.h",
    "rdma/fi_rma.h",
];

/// Headers included only when the installed libfabric ships them.
const OPTIONAL: &[&str] = &["rdma/fi_ext.h", "rdma/fi_profile.h"];

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    // Headers only: libfabric.so.1 is loaded at run time, when a fabric transport is
    // opened (`ffi::lib`), not linked. Debian's libfabric pulls in libinfinipath and
    // libpsm2, whose constructors calibrate a clock for 0.2 s in every process that
    // loads them; a shared-memory job must not pay that at start-up.
    let lib = pkg_config::Config::new()
        .atleast_version("1.17")
        .cargo_metadata(false)
        .probe("libfabric")
        .expect("libfabric >= 1.17 not found by pkg-config (install libfabric-dev)");

    let mut search: Vec<PathBuf> = lib.include_paths.clone();
    search.push(PathBuf::from("/usr/local/include"));
    search.push(PathBuf::from("/usr/include"));
    let find = |h: &str| search.iter().map(|d| d.join(h)).find(|p| p.exists());

    let mut wrapper = String::from("#include <stddef.h>\n#include <stdint.h>\n");
    for h in REQUIRED {
        let path = find(h).unwrap_or_else(|| panic!("libfabric header {h} not found in {search:?}"));
        println!("cargo:rerun-if-changed={}", path.display());
        wrapper.push_str(&format!("#include <{h}>\n"));
    }
    for h in OPTIONAL {
        if let Some(path) = find(h) {
            println!("cargo:rerun-if-changed={}", path.display());
            wrapper.push_str(&format!("#include <{h}>\n"));
        }
    }

    let mut builder = bindgen::Builder::default()
        .header_contents("runthrough_fabric_wrapper.h", &wrapper)
        .allowlist_function(FUNCTIONS)
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*|fi_.*")
        // `fi_getinfo` and friends are real symbols, reached through the `FabricLib`
        // table `libloading` fills; the static inline wrappers are reached through the
        // ops tables in `ffi/mod.rs`, so bindgen must not emit declarations for them.
        .generate_inline_functions(false)
        .dynamic_library_name("FabricLib")
        .dynamic_link_require_all(true)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false)
        .wrap_unsafe_ops(true)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().expect("bindgen failed on the libfabric headers");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings.write_to_file(out.join("bindings.rs")).expect("write bindings.rs");

    // Tell the crate which optional headers it was built with.
    println!("cargo:rustc-check-cfg=cfg(fi_profile_h)");
    if find("rdma/fi_profile.h").is_some_and(|p| Path::new(&p).exists()) {
        println!("cargo:rustc-cfg=fi_profile_h");
    }
}
