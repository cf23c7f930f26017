//! Peer-exit evidence check (used by `tests/pidfd.rs`): the last rank (the victim) leaves
//! the job, and every survivor times how long it takes to learn it.
//!
//! `rtrun -n N exit_check MODE` (N ≥ 3) with MODE
//! - `kill`: the victim SIGKILLs itself. Survivors must see `RankFailStop` naming it, find
//!   it in `group_failed()` and wildcards disabled (R8, R13).
//! - `finalize`: the victim finalizes and exits cleanly. Survivors' receive from it
//!   completes with `RankFailStop` (it can never be matched) once its exit is known, but
//!   it is a departure, not a failure: `group_failed()` stays empty and wildcards stay
//!   enabled.
//!
//! Just before leaving, the victim sends each survivor its wall-clock time; a survivor
//! prints `exit_check: ok rank R MODE detect_ms=D`, D being the time from that stamp to
//! the failed receive (it includes the spawn of `kill`, so it bounds the detection
//! latency from above). Survivors then pass messages around their own ring, losing none.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runthrough::{Comm, Error, ErrorMode};

const STAMP: i32 = 1;
const NEVER: i32 = 2;
const RING: i32 = 3;

fn fail(what: &str) -> ! {
    eprintln!("exit_check: {what}");
    std::process::exit(3);
}

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
}

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

/// Survivors pass `count` numbered messages around their ring.
fn survivor_ring(world: &Comm, survivors: usize, count: u64) -> Result<(), Error> {
    let me = world.rank();
    let (next, prev) = ((me + 1) % survivors, (me + survivors - 1) % survivors);
    for i in 0..count {
        let out = [i, me as u64];
        let mut m = [0u64; 2];
        runthrough::scope(|s| {
            let req = world.isend(s, &out, next, RING)?;
            world.recv(&mut m, prev, RING)?;
            req.wait()
        })?;
        if m != [i, prev as u64] {
            fail(&format!("rank {me}: ring message {i} from {prev} wrong: {m:?}"));
        }
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| fail("usage: exit_check kill|finalize"));
    if mode != "kill" && mode != "finalize" {
        fail(&format!("unknown mode {mode}"));
    }
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    if n < 3 {
        fail("needs at least 3 ranks");
    }
    let (victim, survivors) = (n - 1, n - 1);
    match world.barrier() {
        Ok(()) => {}
        // Over a network transport a fast victim may fail a survivor's barrier (R17).
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        Err(e) => return Err(e),
    }
    if me == victim {
        let stamp = [now_ns()];
        for p in 0..survivors {
            world.send(&stamp, p, STAMP)?;
        }
        if mode == "kill" {
            die();
        }
        return rt.finalize();
    }
    let mut stamp = [0u64];
    world.recv(&mut stamp, victim, STAMP)?;
    match world.recv(&mut [0u8; 8], victim, NEVER) {
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        other => fail(&format!("rank {me}: receive from the victim: expected RankFailStop, got {other:?}")),
    }
    let detect_ms = now_ns().saturating_sub(stamp[0]) as f64 / 1e6;
    let failed = world.group_failed().world_ranks();
    let wildcards = world.any_source_enabled();
    match mode.as_str() {
        "kill" if failed != vec![victim] || wildcards => {
            fail(&format!("rank {me}: after a kill: failed group {failed:?}, wildcards enabled {wildcards}"))
        }
        "finalize" if !failed.is_empty() || !wildcards => fail(&format!(
            "rank {me}: a clean exit was taken for a failure: failed group {failed:?}, wildcards enabled {wildcards}"
        )),
        _ => {}
    }
    survivor_ring(&world, survivors, 50)?;
    println!("exit_check: ok rank {me} {mode} detect_ms={detect_ms:.1} failed={failed:?}");
    rt.finalize()
}
