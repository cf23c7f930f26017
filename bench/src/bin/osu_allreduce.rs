//! `osu_allreduce` for runthrough: the average latency of a sum of SIZE/4 `f32`s to
//! every rank, as in the OSU Micro-Benchmarks (see `runthrough_bench::run_coll` for the
//! method).
//!
//! Run as `rtrun -n N osu_allreduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0
//! prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough::Op;
use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<f32>(Collective::Allreduce, |world, send, recv| world.allreduce(send, recv, Op::Sum))
}
