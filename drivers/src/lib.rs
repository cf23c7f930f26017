//! The test drivers of runthrough's multi-process tests: each program in `examples/` is
//! run under `rtrun` by a test of the facade crate (`tests/*.rs`, through
//! `tests/common`'s `example(name)`), prints one line per rank and is checked there.
//! They live apart from the facade's own examples (`examples/` at the root: what a user
//! reads) so that the published crate carries only those. Nothing is published from
//! here.

use std::time::{Duration, Instant};

/// A driver step's outcome: the reason it failed, printed by the driver.
pub type R<T> = Result<T, String>;

/// `Err(why())` unless `cond`.
pub fn ensure(cond: bool, why: impl FnOnce() -> String) -> R<()> {
    if cond {
        Ok(())
    } else {
        Err(why())
    }
}

/// SIGKILLs this process (a real crash: no exit path runs).
pub fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

/// Waits (at most 30 s) until this process knows world rank `rank` failed.
pub fn until_failed(world: &runthrough::Comm, rank: usize) -> R<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !world.group_failed().world_ranks().contains(&rank) {
        ensure(Instant::now() < deadline, || format!("rank {rank}'s failure never became known"))?;
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}
