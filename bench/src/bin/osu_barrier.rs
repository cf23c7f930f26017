//! `osu_barrier` for runthrough: the average latency of a barrier, back to back, as in
//! the OSU Micro-Benchmarks (see `runthrough_bench::run_coll` for the method).
//!
//! Run as `rtrun -n N osu_barrier [-i ITERS] [-x WARMUP]`; rank 0 prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<u8>(Collective::Barrier, |world, _, _| world.barrier())
}
