//! `osu_alltoall` for runthrough: the average latency of an all-to-all of SIZE bytes
//! per pair of ranks, as in the OSU Micro-Benchmarks (see `runthrough_bench::run_coll`
//! for the method).
//!
//! Run as `rtrun -n N osu_alltoall [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0
//! prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<u8>(Collective::Alltoall, |world, send, recv| world.alltoall(send, recv))
}
