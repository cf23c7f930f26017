//! The shared library's soname is the standard ABI's library name, `libmpi_abi.so.1`, so a
//! program linked against any implementation's `libmpi_abi.so.1` loads this one when it
//! comes first on `LD_LIBRARY_PATH`. It also compiles the long double reductions.
fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpi_abi.so.1");
    println!("cargo:rerun-if-changed=build.rs");
    // Reductions on long double, which Rust has no type for (src/ldouble.c).
    println!("cargo:rerun-if-changed=src/ldouble.c");
    cc::Build::new().file("src/ldouble.c").warnings(true).compile("rt_ldouble");
}
