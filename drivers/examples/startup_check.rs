//! Start-up that runs through failures (R31), checked from every rank: used by
//! `tests/startup.rs` and `make startup-sweep` with `rtrun --kill R@T` / `--stop R@T`
//! landing anywhere in start-up.
//!
//! `rtrun -n N startup_check`: every rank `init`s (which must succeed at every survivor,
//! whatever rank failed when), then, until one round succeeds everywhere: `validate` the
//! world (the same failed group at every member), `allreduce` the sum of `rank + 1` over
//! the members, and `agree` on whether every member's allreduce succeeded (a failure
//! during the round makes everyone go round again). The successful sum must be the sum
//! over the members outside the validated failed group. Each rank then prints
//!
//! `startup_check: ok rank R of N at_init=[..] failed=[..] sum=S rounds=K init_ms=I init_end_unix_ms=E`
//!
//! where `at_init` is `group_failed()` right after `init` (the start-up failures this
//! rank's world already held) and `failed` the validated group of the successful round.
//! Any check that fails prints `startup_check: FAILED ...` on stderr and exits 3.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

use runthrough::ErrorMode;

#[path = "common/survivors.rs"]
mod survivors;

fn fail(what: &str) -> ! {
    eprintln!("startup_check: FAILED {what}");
    std::process::exit(3);
}

fn main() {
    let t0 = Instant::now();
    let rt = runthrough::init().unwrap_or_else(|e| fail(&format!("init: {e}")));
    let init_ms = t0.elapsed().as_millis();
    let init_end = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis());
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    let at_init = world.group_failed().world_ranks();
    if at_init.contains(&me) {
        fail(&format!("rank {me}: its own rank is in group_failed() {at_init:?}"));
    }
    let check = |failed: &[usize]| {
        (!at_init.iter().all(|r| failed.contains(r)))
            .then(|| format!("validate {failed:?} misses a start-up failure of {at_init:?}"))
    };
    let survivors::Round { failed, sum, rounds } = survivors::until_agreed("startup_check", &world, check, fail);
    println!(
        "startup_check: ok rank {me} of {n} at_init={at_init:?} failed={failed:?} sum={sum} rounds={rounds} \
         init_ms={init_ms} init_end_unix_ms={init_end}"
    );
    if let Err(e) = rt.finalize() {
        fail(&format!("rank {me}: finalize: {e}"));
    }
}
