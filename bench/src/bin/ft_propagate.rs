//! `ft_propagate`: the measurement of Engwer et al. 2018 (their Figure 2) on runthrough:
//! duplicate the world, propagate an error from rank 0, clean up; the time of each
//! repetition on rank 0.
//!
//! PENDING: written against the error-propagation API being added in parallel
//! (`Comm::signal_error`, `Error::Propagated`); move it to `bench/src/bin/` after the
//! merge. `bench/ft_propagate.sh` skips its rows until the binary exists.
//!
//! Run as `rtrun -n N ft_propagate [-n REPS] [-x WARMUP]`, side by side with
//! `bench/c/ft_propagate.c` on Open MPI ULFM (revoke + agree + shrink + the (rank,
//! code) list, the paper's ULFM path). One repetition:
//!   1. `world.dup()` (the dup inherits the world's `ErrorsReturn`);
//!   2. rank 0 calls `signal_error(666)`, which returns once the propagation is agreed
//!      with `Error::Propagated([(0, 666)])`; every other rank is blocked in a receive
//!      from rank 0 on the dup, which fails with the same `Error::Propagated` list;
//!   3. the dup is dropped.
//!
//! As in the C program, a world barrier precedes each repetition and another follows
//! the dup (so that rank 0 signals only once every rank holds the dup: Open MPI 5.0.11
//! crashes otherwise); neither is timed, a sample is (dup) + (signal .. drop). Rank 0
//! prints one `<rep> <us>` line per timed repetition (default 1000 after 10).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use runthrough::{Comm, Error};
use runthrough_bench::samples::{print_samples, run_ft, SampleOptions};

const USAGE: &str = "usage: rtrun -n N ft_propagate [-n REPS] [-x WARMUP] [-h]\n\
\x20 -n REPS    timed repetitions (default 1000)\n\
\x20 -x WARMUP  untimed repetitions first (default 10)\n\
\x20 --bare     accepted for the C program's sake (signal_error always returns the list)\n";

/// The receive the other ranks block in (never sent).
const TAG: i32 = 666;
/// The error code rank 0 signals (Engwer et al.'s example).
const CODE: i32 = 666;

fn main() -> ExitCode {
    let defaults = SampleOptions { count: 1000, warmup: 10, iters: 1, bare: false };
    run_ft("ft_propagate", USAGE, defaults, true, measure)
}

/// Checks the propagated list: exactly rank 0 with [`CODE`].
fn check(e: Error, what: &str) -> Result<(), String> {
    match e {
        Error::Propagated(list) if list == [(0, CODE)] => Ok(()),
        Error::Propagated(list) => Err(format!("{what}: wrong list {list:?}, not [(0, {CODE})]")),
        e => Err(format!("{what}: {e}, not Propagated")),
    }
}

/// One repetition; its time in microseconds.
fn once(world: &Comm) -> Result<f64, String> {
    world.barrier().map_err(|e| format!("barrier: {e}"))?;
    let t0 = Instant::now();
    let dup = world.dup().map_err(|e| format!("dup: {e}"))?;
    let dup_time = t0.elapsed();
    // Untimed: every rank holds the dup before rank 0 signals.
    world.barrier().map_err(|e| format!("barrier: {e}"))?;
    let t1 = Instant::now();
    if world.rank() == 0 {
        check(dup.signal_error(CODE), "signal_error")?;
    } else {
        let mut never = [0u8; 1];
        match dup.recv(&mut never, 0, TAG) {
            Ok(_) => return Err("a message arrived from rank 0".into()),
            Err(e) => check(e, "receive from rank 0")?,
        }
    }
    drop(dup);
    Ok((dup_time + t1.elapsed()).as_secs_f64() * 1e6)
}

fn measure(world: &Comm, o: &SampleOptions) -> Result<(), String> {
    for _ in 0..o.warmup {
        once(world)?;
    }
    let us = (0..o.count).map(|_| once(world)).collect::<Result<Vec<f64>, String>>()?;
    if world.rank() != 0 {
        return Ok(());
    }
    let header = format!(
        "# ft_propagate (runthrough): dup, signal_error(666) from rank 0, drop\n\
         # ranks {}, repetitions {}, warm-up {}; time per repetition on rank 0 (us)\n",
        world.size(),
        o.count,
        o.warmup
    );
    print_samples(&header, &us)
}
