//! `ft_agree`: failure-free latency of runthrough's fault-tolerant agreement
//! ([`Comm::agree`], ULFM's `MPIX_Comm_agree`).
//!
//! Run as `rtrun -n N ft_agree [-n BATCHES] [-i ITERS] [-x WARMUP]`, side by side with
//! `bench/c/ft_agree.c` on Open MPI ULFM (`bench/ft_propagate.sh`). WARMUP agreements
//! (default 100), then BATCHES (default 50) batches of ITERS (default 100) agreements on
//! the world, each batch started by a barrier. Every rank contributes all ones but one
//! bit (its rank's, modulo 31, cleared on odd iterations) and checks the result. Rank 0
//! prints one `<batch> <us>` line per batch: the batch's average time per agree.

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use runthrough::Comm;
use runthrough_bench::samples::{print_samples, run_ft, SampleOptions};

const USAGE: &str = "usage: rtrun -n N ft_agree [-n BATCHES] [-i ITERS] [-x WARMUP] [-h]\n\
\x20 -n BATCHES  timed batches (default 50)\n\
\x20 -i ITERS    agreements per batch (default 100)\n\
\x20 -x WARMUP   untimed agreements first (default 100)\n";

fn main() -> ExitCode {
    let defaults = SampleOptions { count: 50, warmup: 100, iters: 100, bare: false };
    run_ft("ft_agree", USAGE, defaults, false, measure)
}

/// One agreement of iteration `it`.
fn agree_once(world: &Comm, it: usize) -> Result<(), String> {
    let (rank, size) = (world.rank(), world.size());
    let (mut flag, mut want) = (!0i32, !0i32);
    if it % 2 == 1 {
        flag &= !(1 << (rank % 31));
        for r in 0..size {
            want &= !(1 << (r % 31));
        }
    }
    let got = world.agree(flag).map_err(|e| format!("agree: {e}"))?;
    if got != want {
        return Err(format!("agree returned {got:#x}, not {want:#x}"));
    }
    Ok(())
}

fn measure(world: &Comm, o: &SampleOptions) -> Result<(), String> {
    for it in 0..o.warmup {
        agree_once(world, it)?;
    }
    let mut us = Vec::with_capacity(o.count);
    for _ in 0..o.count {
        world.barrier().map_err(|e| format!("barrier: {e}"))?;
        let t0 = Instant::now();
        for it in 0..o.iters {
            agree_once(world, it)?;
        }
        us.push(t0.elapsed().as_secs_f64() * 1e6 / o.iters as f64);
    }
    if world.rank() != 0 {
        return Ok(());
    }
    let header = format!(
        "# ft_agree (runthrough): failure-free Comm::agree on the world\n\
         # ranks {}, {} batches of {}, warm-up {}; average per agree in each batch (us)\n",
        world.size(),
        o.count,
        o.iters,
        o.warmup
    );
    print_samples(&header, &us)
}
