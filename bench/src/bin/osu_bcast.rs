//! `osu_bcast` for runthrough: the average latency of a broadcast of SIZE bytes from
//! rank 0, as in the OSU Micro-Benchmarks (see `runthrough_bench::run_coll` for the
//! method).
//!
//! Run as `rtrun -n N osu_bcast [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0 prints
//! the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<u8>(Collective::Bcast, |world, _, recv| world.bcast(recv, 0))
}
