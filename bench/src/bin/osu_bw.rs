//! `osu_bw` for runthrough: rank 0 sends a window of 64 non-blocking messages,
//! rank 1 receives them into 64 posted receives, then answers with a 1-byte
//! acknowledgement; bandwidth in MB/s, as in the OSU Micro-Benchmarks.
//!
//! Run as `rtrun -n 2 osu_bw [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]`; rank 0 prints
//! the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run, timed_loop, Test, ACK_TAG, DATA_TAG, WINDOW_SIZE};

fn main() -> ExitCode {
    run(Test::Bandwidth, |world, bufs, size, iterations| {
        let rank = world.rank();
        timed_loop(iterations, || {
            if rank == 0 {
                runthrough::scope(|s| {
                    let mut reqs = Vec::with_capacity(WINDOW_SIZE);
                    for _ in 0..WINDOW_SIZE {
                        reqs.push(world.isend(s, &bufs.send[..size], 1, DATA_TAG)?);
                    }
                    runthrough::wait_all(&mut reqs)
                })?;
                world.recv(&mut bufs.ack[..], 1, ACK_TAG)?;
            } else {
                runthrough::scope(|s| {
                    let mut reqs = Vec::with_capacity(WINDOW_SIZE);
                    for slot in bufs.recv_slots(size, WINDOW_SIZE) {
                        reqs.push(world.irecv(s, slot, 0, DATA_TAG)?);
                    }
                    runthrough::wait_all(&mut reqs)
                })?;
                world.send(&bufs.ack[..], 0, ACK_TAG)?;
            }
            Ok(())
        })
    })
}
