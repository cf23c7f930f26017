//! Busy is not dead, checked from every rank: used by `tests/busy.rs` on a machine loaded
//! far beyond its cores.
//!
//! `rtrun -n N busy_check SECS [STARVED]`: every rank `init`s (rank `STARVED`, if given,
//! then moves itself into the CPU cgroup named by `BUSY_CHECK_CGROUP`, which the harness
//! throttled: runnable, but held off the CPU for most of every period, while its ring
//! observer runs on time), then makes no MPI call for `SECS` seconds (default 30) — even
//! ranks compute (spin on the CPU), odd ranks sleep — then,
//! until one round succeeds everywhere, `validate`s the world, `allreduce`s the sum of
//! `rank + 1` over the members and `agree`s on whether every member's allreduce
//! succeeded. The sum must be that over the members outside the validated failed group.
//! Each rank then prints
//!
//! `busy_check: ok rank R of N failed=[..] sum=S rounds=K`
//!
//! Any check that fails prints `busy_check: FAILED ...` on stderr and exits 3.

use std::time::{Duration, Instant};

use runthrough::ErrorMode;

#[path = "common/survivors.rs"]
mod survivors;

fn fail(what: &str) -> ! {
    eprintln!("busy_check: FAILED {what}");
    std::process::exit(3);
}

/// Spins for `d`, doing work the optimiser cannot drop.
fn compute(d: Duration) -> u64 {
    let t0 = Instant::now();
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    while t0.elapsed() < d {
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
    }
    std::hint::black_box(x)
}

/// Moves this process into the CPU cgroup `dir` (its path from `BUSY_CHECK_CGROUP`, made
/// and throttled by the test harness): from then on it is runnable but held off the CPU
/// most of the time, its progress thread with it.
fn starve_self() {
    let dir = std::env::var("BUSY_CHECK_CGROUP").unwrap_or_else(|_| fail("STARVED given without BUSY_CHECK_CGROUP"));
    let procs = std::path::Path::new(&dir).join("cgroup.procs");
    std::fs::write(&procs, std::process::id().to_string())
        .unwrap_or_else(|e| fail(&format!("{}: {e}", procs.display())));
}

fn main() {
    let secs: f64 = std::env::args().nth(1).map_or(30.0, |s| s.parse().unwrap_or_else(|_| fail("SECS: a number")));
    let rt = runthrough::init().unwrap_or_else(|e| fail(&format!("init: {e}")));
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    let starved: Option<usize> = std::env::args().nth(2).map(|s| s.parse().unwrap_or_else(|_| fail("STARVED: a rank")));
    if starved == Some(me) {
        starve_self();
    }
    let busy = Duration::from_secs_f64(secs);
    if me % 2 == 0 {
        compute(busy);
    } else {
        std::thread::sleep(busy);
    }
    let survivors::Round { failed, sum, rounds } = survivors::until_agreed("busy_check", &world, |_| None, fail);
    println!("busy_check: ok rank {me} of {n} failed={failed:?} sum={sum} rounds={rounds}");
    if let Err(e) = rt.finalize() {
        fail(&format!("rank {me}: finalize: {e}"));
    }
}
