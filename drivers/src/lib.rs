//! The test drivers of runthrough's multi-process tests: each program in `examples/` is
//! run under `rtrun` by a test of the facade crate (`tests/*.rs`, through
//! `tests/common`'s `example(name)`), prints one line per rank and is checked there.
//! They live apart from the facade's own examples (`examples/` at the root: what a user
//! reads) so that the published crate carries only those. Nothing is published from
//! here.
