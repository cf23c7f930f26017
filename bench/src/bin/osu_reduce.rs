//! `osu_reduce` for runthrough: the average latency of a sum of SIZE/4 `f32`s to rank
//! 0, as in the OSU Micro-Benchmarks (see `runthrough_bench::run_coll` for the method).
//!
//! Run as `rtrun -n N osu_reduce [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0 prints
//! the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough::Op;
use runthrough_bench::{run_coll, Collective};

fn main() -> ExitCode {
    run_coll::<f32>(Collective::Reduce, |world, send, recv| world.reduce(send, recv, Op::Sum, 0))
}
