//! `ft_shrink`: `Comm::shrink` of the world after one rank was killed.
//!
//! PENDING: written against the shrink API being added in parallel (`Comm::shrink`);
//! move it to `bench/src/bin/` after the merge. `bench/ft_propagate.sh` skips its rows
//! until the binary exists.
//!
//! Run as `rtrun -n N ft_shrink`, side by side with `bench/c/ft_shrink.c` on Open MPI
//! ULFM; one job per sample (a killed rank cannot come back). Three world barriers,
//! then the last rank SIGKILLs itself (`kill -9` of its own pid: the bench crate has no
//! libc). Every survivor blocks in a receive from it until the receive fails with
//! `RankFailStop`, then joins an agreement on the world (as the C program's
//! `MPIX_Comm_agree`, so that all survivors start the shrink together), then times
//! `world.shrink()`. Rank 0 prints `0 <us>` (its own shrink time) and a comment with
//! the maximum over the survivors (sent to rank 0 over the shrunk communicator).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::{Duration, Instant};

use runthrough::{Comm, Error};
use runthrough_bench::samples::{print_samples, run_ft, SampleOptions};

const USAGE: &str = "usage: rtrun -n N ft_shrink [-h]\n";

/// The receive the survivors block in (never sent).
const TAG: i32 = 1;
/// Survivors' shrink times, to rank 0 of the shrunk communicator.
const RESULT_TAG: i32 = 2;

fn main() -> ExitCode {
    let defaults = SampleOptions { count: 1, warmup: 0, iters: 1, bare: false };
    run_ft("ft_shrink", USAGE, defaults, false, measure)
}

fn measure(world: &Comm, _: &SampleOptions) -> Result<(), String> {
    let (rank, size) = (world.rank(), world.size());
    if size < 3 {
        return Err("need at least 3 ranks".into());
    }
    let victim = size - 1;
    for _ in 0..3 {
        world.barrier().map_err(|e| format!("start barrier: {e}"))?;
    }
    if rank == victim {
        let _ = std::process::Command::new("kill").args(["-9", &std::process::id().to_string()]).status();
        loop {
            std::thread::sleep(Duration::from_secs(1));
        }
    }
    let mut never = [0u8; 1];
    match world.recv(&mut never, victim, TAG) {
        Err(Error::RankFailStop { .. }) => {}
        Err(e) => return Err(format!("receive from the victim: {e}, not RankFailStop")),
        Ok(_) => return Err("a message arrived from the victim".into()),
    }
    // Synchronise the survivors (its outcome, success or a failure report, is not
    // what is measured).
    let _ = world.agree(1);
    let t0 = Instant::now();
    let shrunk = world.shrink().map_err(|e| format!("shrink: {e}"))?;
    let us = t0.elapsed().as_secs_f64() * 1e6;
    if shrunk.size() != size - 1 {
        return Err(format!("the shrunk communicator has {} members, not {}", shrunk.size(), size - 1));
    }
    if shrunk.rank() != 0 {
        return shrunk.send(&[us], 0, RESULT_TAG).map_err(|e| format!("reporting to rank 0: {e}"));
    }
    let mut max = us;
    for r in 1..shrunk.size() {
        let mut t = [0f64];
        shrunk.recv(&mut t, r, RESULT_TAG).map_err(|e| format!("result of rank {r}: {e}"))?;
        max = max.max(t[0]);
    }
    let header = format!(
        "# ft_shrink (runthrough): shrink of the world after rank {victim} was killed\n\
         # ranks {size}; shrink time on rank 0 (us); max over the {} survivors: {max:.3}\n",
        size - 1
    );
    print_samples(&header, &[us])
}
