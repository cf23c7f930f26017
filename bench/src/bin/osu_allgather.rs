//! `osu_allgather` for runthrough: the average latency of an allgather of SIZE bytes
//! from every rank, as in the OSU Micro-Benchmarks (see `runthrough_bench::run_coll`
//! for the method).
//!
//! Run as `rtrun -n N osu_allgather [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0
//! prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<u8>(Collective::Allgather, |world, send, recv| world.allgather(send, recv))
}
