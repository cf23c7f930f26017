//! A process that never opens a fabric does not load libfabric (start-up time).
//!
//! Debian's `libfabric.so.1` depends on `libinfinipath` and `libpsm2`, whose initialisers
//! calibrate a clock for about 0.2 s in every process that loads them: linked, they cost
//! every rank of a shared-memory job 0.2 s before `main`. `runthrough-fabric` loads the
//! library at run time instead, when a fabric is first opened. This test binary links
//! the whole runthrough crate; it checks its own address space before and after a
//! shared-memory-only use of the crate, then that opening the library maps it.

use std::fs;

fn mapped(lib: &str) -> bool {
    fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps").contains(lib)
}

#[test]
fn libfabric_is_loaded_only_when_a_fabric_is_opened() {
    for lib in ["libfabric.so", "libpsm2.so", "libinfinipath.so"] {
        assert!(!mapped(lib), "{lib} is mapped at start: it must be loaded at run time, not linked");
    }
    // Opening the library on purpose maps it (and says which version it is).
    let (major, minor) = runthrough_fabric::runtime_version().expect("libfabric.so.1 loads");
    assert!((major, minor) >= (1, 17), "libfabric {major}.{minor}");
    assert!(mapped("libfabric.so"), "runtime_version() loaded libfabric.so.1");
}
