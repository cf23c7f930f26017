//! Every collective against a serial reference, on 1 to 8 ranks (real processes), with
//! odd vector lengths and long ones (ring allreduce), every root, on the world and on a
//! duplicate (`examples/coll_check.rs`).

mod common;

use std::time::Duration;

use common::{example, ok, run};

#[test]
fn collectives_match_serial_reference_1_to_8_ranks() {
    let prog = example("coll_check");
    for n in 1..=8 {
        let out =
            ok(&run(&["-n", &n.to_string(), prog.to_str().unwrap(), &(n * 7).to_string()], Duration::from_secs(120)));
        assert!(out.contains(&format!("coll_check: ok ranks={n}")), "{out}");
    }
}
