//! bindgen output for `pmix.h` (types, constants, and the `PmixLib` table of the calls
//! runthrough makes, filled by `libloading`). Private: only `pmix.rs` uses it.
//!
//! Committed as `ffi/bindings.rs`, generated from the PMIx 4.2 headers by `make bindings`
//! (`tools/gen-bindings`, where a test fails while the file is stale), so building needs
//! neither libclang nor `libpmix-dev`.

#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case, dead_code, unreachable_pub)]
#![allow(missing_docs, missing_debug_implementations, clippy::all)]
// The generated loader (`PmixLib::new`) calls `Library::new` without its own block.
#![allow(unsafe_op_in_unsafe_fn)]

include!("ffi/bindings.rs");
