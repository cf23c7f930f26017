//! `osu_bibw` for runthrough: both ranks post a window of 64 receives and 64
//! non-blocking sends to each other, then wait for all of them; bi-directional
//! bandwidth in MB/s, as in the OSU Micro-Benchmarks.
//!
//! Run as `rtrun -n 2 osu_bibw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0
//! prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run, timed_loop, Test, DATA_TAG, WINDOW_SIZE};

fn main() -> ExitCode {
    run(Test::BiBandwidth, |world, bufs, size, iterations| {
        let peer = 1 - world.rank();
        timed_loop(iterations, || {
            runthrough::scope(|s| {
                let mut reqs = Vec::with_capacity(2 * WINDOW_SIZE);
                let (send, slots) = bufs.send_and_recv_slots(size, WINDOW_SIZE);
                for slot in slots {
                    reqs.push(world.irecv(s, slot, peer, DATA_TAG)?);
                }
                for _ in 0..WINDOW_SIZE {
                    reqs.push(world.isend(s, send, peer, DATA_TAG)?);
                }
                runthrough::wait_all(&mut reqs)
            })
        })
    })
}
