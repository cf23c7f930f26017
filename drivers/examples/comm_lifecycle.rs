//! Communicator life cycle under failure (used by `tests/coll.rs`): R25 (`dup` and
//! `create` copy the recognised failed set) and R26 (freeing completes despite failures).
//!
//! `rtrun -n N comm_lifecycle` (N ≥ 3): the last rank (the victim) SIGKILLs itself after
//! a barrier. Before that every rank made `PRE` duplicates of the world. Each survivor:
//! 1. sees the failure (a receive from the victim on a pre-failure duplicate completes
//!    with `RankFailStop`), validates the world: the recognised set is `[victim]`;
//! 2. R25: `dup` of the world, and `create` from the world's group, are collectively
//!    active at once (`collectives_enabled`), with the victim in `group_failed()`, and an
//!    allreduce on each succeeds over the survivors without any validate of its own —
//!    without the copied set they would be inactive (R18) and fail with `RankFailStop`;
//!    their `validate` returns `[victim]`;
//! 3. R26: frees every pre-failure duplicate (inactive: the failure is not recognised on
//!    them) and the new communicators, each within [`FREE_BOUND`], then the world still
//!    works (an allreduce over the survivors).
//!
//! Any check that does not hold exits 3 with a message; each survivor prints
//! `comm_lifecycle: ok rank R`.

use std::time::{Duration, Instant};

use runthrough::{Comm, Error, ErrorMode, Op};

/// Duplicates made before the failure.
const PRE: usize = 16;
/// Longest a free may take.
const FREE_BOUND: Duration = Duration::from_millis(500);

fn fail(what: &str) -> ! {
    eprintln!("comm_lifecycle: {what}");
    std::process::exit(3);
}

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

/// The sum of the survivors' ranks, by an allreduce on `c`.
fn survivor_sum(c: &Comm, what: &str) -> u64 {
    let mut out = [0u64];
    if let Err(e) = c.allreduce(&[c.rank() as u64], &mut out, Op::Sum) {
        fail(&format!("{what}: allreduce failed: {e:?}"));
    }
    out[0]
}

fn timed_free(c: Comm, what: &str) {
    let t = Instant::now();
    c.free();
    if t.elapsed() > FREE_BOUND {
        fail(&format!("R26: freeing {what} took {:?}", t.elapsed()));
    }
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    if n < 3 {
        fail("needs at least 3 ranks");
    }
    let victim = n - 1;
    let pre: Vec<Comm> = (0..PRE).map(|_| world.dup()).collect::<Result<_, _>>()?;
    world.barrier()?;
    if me == victim {
        die();
    }
    // 1. The failure, seen on a pre-failure duplicate, then recognised on the world.
    let mut b = [0u8; 8];
    let seen = runthrough::scope(|s| pre[0].irecv(s, &mut b, victim, 5)?.wait());
    match seen {
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        other => fail(&format!("receive from the victim: {other:?}")),
    }
    let failed = world.validate()?.world_ranks();
    if failed != vec![victim] {
        fail(&format!("validate: {failed:?}"));
    }
    let want: u64 = (0..victim as u64).sum();

    // 2. R25: the copies start with the recognised set.
    let dup = world.dup()?;
    let created = world.create(&world.group())?.unwrap_or_else(|| fail("create: no communicator for a member"));
    for (c, what) in [(&dup, "dup"), (&created, "create")] {
        if !c.collectives_enabled() {
            fail(&format!("R25: {what} of a validated world is collectively inactive"));
        }
        if c.group_failed().world_ranks() != vec![victim] {
            fail(&format!("R25: {what}: group_failed {:?}", c.group_failed().world_ranks()));
        }
        let got = survivor_sum(c, what);
        if got != want {
            fail(&format!("R25: {what}: allreduce gave {got}, want {want}"));
        }
        let v = c.validate()?.world_ranks();
        if v != vec![victim] {
            fail(&format!("R25: {what}: validate gave {v:?}"));
        }
    }
    // The pre-failure duplicates did not recognise the failure: inactive (R18).
    if pre[1].collectives_enabled() {
        fail("a duplicate made before the failure is active without a validate");
    }

    // 3. R26: freeing completes whatever failed.
    for (i, c) in pre.into_iter().enumerate() {
        timed_free(c, &format!("pre-failure duplicate {i}"));
    }
    timed_free(dup, "the dup");
    timed_free(created, "the created communicator");
    let got = survivor_sum(&world, "world after the frees");
    if got != want {
        fail(&format!("world after the frees: allreduce gave {got}, want {want}"));
    }
    println!("comm_lifecycle: ok rank {me}");
    rt.finalize()
}
