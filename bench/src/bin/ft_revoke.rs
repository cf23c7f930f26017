//! `ft_revoke`: how long from rank 0's `Comm::revoke` until every member knows?
//!
//! PENDING: written against the revoke API being added in parallel (`Comm::revoke`,
//! `Error::Revoked`); move it to `bench/src/bin/` after the merge.
//! `bench/ft_propagate.sh` skips its rows until the binary exists.
//!
//! Run as `rtrun -n N ft_revoke [-n REPS] [-x WARMUP]`, side by side with
//! `bench/c/ft_revoke.c` on Open MPI ULFM. Each repetition: `world.dup()`, a world
//! barrier; every rank but 0 blocks in a receive from rank 0 on the dup; rank 0 takes
//! the time and revokes the dup. Each other rank, once its receive fails with
//! `Error::Revoked`, sends a 1-int acknowledgement to rank 0 over the world; rank 0's
//! sample ends when it holds every acknowledgement (so it includes one message
//! latency). Then the dup is dropped. Rank 0 prints one `<rep> <us>` line per timed
//! repetition (default 200 after 10).

#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Instant;

use runthrough::{Comm, Error, ANY_SOURCE};
use runthrough_bench::samples::{print_samples, run_ft, SampleOptions};

const USAGE: &str = "usage: rtrun -n N ft_revoke [-n REPS] [-x WARMUP] [-h]\n\
\x20 -n REPS    timed repetitions (default 200)\n\
\x20 -x WARMUP  untimed repetitions first (default 10)\n";

/// The receive the other ranks block in (never sent).
const TAG: i32 = 1;
/// The acknowledgements, over the world.
const ACK_TAG: i32 = 2;

fn main() -> ExitCode {
    let defaults = SampleOptions { count: 200, warmup: 10, iters: 1, bare: false };
    run_ft("ft_revoke", USAGE, defaults, false, measure)
}

/// One repetition; rank 0's time in microseconds (0 elsewhere).
fn once(world: &Comm) -> Result<f64, String> {
    let dup = world.dup().map_err(|e| format!("dup: {e}"))?;
    world.barrier().map_err(|e| format!("barrier: {e}"))?;
    let mut x = [0i32; 1];
    let mut us = 0.0;
    if world.rank() == 0 {
        let t0 = Instant::now();
        dup.revoke();
        for _ in 1..world.size() {
            world.recv(&mut x, ANY_SOURCE, ACK_TAG).map_err(|e| format!("receiving an acknowledgement: {e}"))?;
        }
        us = t0.elapsed().as_secs_f64() * 1e6;
    } else {
        match dup.recv(&mut x, 0, TAG) {
            Err(Error::Revoked) => {}
            Err(e) => return Err(format!("receive on the revoked dup: {e}, not Revoked")),
            Ok(_) => return Err("a message arrived from rank 0".into()),
        }
        world.send(&x, 0, ACK_TAG).map_err(|e| format!("sending the acknowledgement: {e}"))?;
    }
    drop(dup);
    Ok(us)
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
        "# ft_revoke (runthrough): rank 0 revokes a dup; until every member's receive failed\n\
         # ranks {}, repetitions {}, warm-up {}; revoke to last acknowledgement on rank 0 (us)\n",
        world.size(),
        o.count,
        o.warmup
    );
    print_samples(&header, &us)
}
