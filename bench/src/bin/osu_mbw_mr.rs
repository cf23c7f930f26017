//! `osu_mbw_mr` for runthrough: OSU's multi-pair bandwidth and message rate. With `n`
//! ranks, rank `r < n/2` sends windows of 64 non-blocking messages to rank `r + n/2`,
//! which receives them into 64 posted receives and answers each window with a 1-byte
//! acknowledgement; every pair runs at once. The row is the sum over the pairs: MB/s
//! and messages per second, as in the OSU Micro-Benchmarks.
//!
//! Run as `rtrun -n 2P osu_mbw_mr [-m [MIN:]MAX] [-i ITERS] [-x WARMUP]` for P pairs;
//! rank 0 prints the table.

#![forbid(unsafe_code)]

use std::process::ExitCode;

use runthrough_bench::{run, timed_loop, Test, ACK_TAG, DATA_TAG, WINDOW_SIZE};

fn main() -> ExitCode {
    run(Test::MessageRate, |world, bufs, size, iterations| {
        let (rank, pairs) = (world.rank(), world.size() / 2);
        timed_loop(iterations, || {
            if rank < pairs {
                let peer = rank + pairs;
                runthrough::scope(|s| {
                    let mut reqs = Vec::with_capacity(WINDOW_SIZE);
                    for _ in 0..WINDOW_SIZE {
                        reqs.push(world.isend(s, &bufs.send[..size], peer, DATA_TAG)?);
                    }
                    runthrough::wait_all(&mut reqs)
                })?;
                world.recv(&mut bufs.ack[..], peer, ACK_TAG)?;
            } else {
                let peer = rank - pairs;
                runthrough::scope(|s| {
                    let mut reqs = Vec::with_capacity(WINDOW_SIZE);
                    for slot in bufs.recv_slots(size, WINDOW_SIZE) {
                        reqs.push(world.irecv(s, slot, peer, DATA_TAG)?);
                    }
                    runthrough::wait_all(&mut reqs)
                })?;
                world.send(&bufs.ack[..], peer, ACK_TAG)?;
            }
            Ok(())
        })
    })
}
