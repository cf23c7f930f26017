//! R30: every way a borrowed buffer or a request could escape its request scope is a
//! compile error (`tests/ui/*.rs`, each with the compiler's message in `*.stderr`).
//! Regenerate the messages after a toolchain change with `TRYBUILD=overwrite`.

#[test]
fn borrows_cannot_escape_a_request_scope() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
