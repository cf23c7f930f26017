//! Generates the PMIx FFI with bindgen against the `pmix.h` pkg-config finds.
//!
//! Nothing is linked: bindgen emits a struct of function pointers (`PmixLib`) that
//! `src/pmix.rs` fills by loading `libpmix.so.2` at run time, so runthrough programs need
//! libpmix only when they run under PMIx. Building needs the headers (`libpmix-dev`).

use std::env;
use std::path::PathBuf;

/// The PMIx calls runthrough makes.
const FUNCTIONS: &str = "PMIx_Init|PMIx_Finalize|PMIx_Abort|PMIx_Put|PMIx_Commit|PMIx_Fence|PMIx_Get|\
                         PMIx_Register_event_handler|PMIx_Value_destruct|PMIx_Error_string";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    let lib = pkg_config::Config::new()
        .atleast_version("4")
        .cargo_metadata(false)
        .probe("pmix")
        .expect("PMIx >= 4 headers not found by pkg-config (install libpmix-dev)");
    let mut builder = bindgen::Builder::default()
        .header_contents("runthrough_pmix_wrapper.h", "#include <pmix.h>\n")
        .allowlist_function(FUNCTIONS)
        .allowlist_type("pmix_.*")
        .allowlist_var("PMIX_.*")
        .dynamic_library_name("PmixLib")
        .dynamic_link_require_all(true)
        .derive_default(true)
        .derive_debug(false)
        .layout_tests(false)
        .wrap_unsafe_ops(true)
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &lib.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder.generate().expect("bindgen failed on pmix.h");
    let out = PathBuf::from(env::var("OUT_DIR").expect("OUT_DIR"));
    bindings.write_to_file(out.join("pmix_bindings.rs")).expect("write pmix_bindings.rs");
}
