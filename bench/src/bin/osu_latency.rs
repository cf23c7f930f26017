//! `osu_latency` for runthrough: half the round-trip time of a blocking send/recv
//! ping-pong between ranks 0 and 1, as in the OSU Micro-Benchmarks.
//!
//! Run as `rtrun -n 2 osu_latency [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0
//! prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run, timed_loop, Test, DATA_TAG};

fn main() -> ExitCode {
    run(Test::Latency, |world, bufs, size, iterations| {
        let rank = world.rank();
        timed_loop(iterations, || {
            if rank == 0 {
                world.send(&bufs.send[..size], 1, DATA_TAG)?;
                world.recv(bufs.recv(size), 1, DATA_TAG)?;
            } else {
                world.recv(bufs.recv(size), 0, DATA_TAG)?;
                world.send(&bufs.send[..size], 0, DATA_TAG)?;
            }
            Ok(())
        })
    })
}
