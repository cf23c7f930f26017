//! `init_barrier`: the start-up benchmark's job (`bench/startup.sh`). Initialises
//! runthrough, enters one barrier on the world communicator and finalizes; the
//! launcher's wall time for the whole job is the start-up figure. Rank 0 prints one
//! line, so a run that did not complete is told apart from one that did.
//!
//! Run as `rtrun -n N init_barrier`.

#![forbid(unsafe_code)]

use std::process::ExitCode;

fn main() -> ExitCode {
    let rt = match runthrough::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("init_barrier: init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let world = rt.world();
    if let Err(e) = world.barrier() {
        eprintln!("init_barrier: rank {}: barrier failed: {e}", world.rank());
        return ExitCode::FAILURE;
    }
    if world.rank() == 0 {
        println!("init_barrier: {} ranks ok", world.size());
    }
    drop(world);
    match rt.finalize() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("init_barrier: finalize failed: {e}");
            ExitCode::FAILURE
        }
    }
}
