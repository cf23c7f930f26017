//! The survivors' round shared by `startup_check` and `busy_check`: until one round
//! succeeds everywhere, `validate` the world (the same failed group at every member),
//! `allreduce` the sum of `rank + 1` over the members and `agree` on whether every
//! member's allreduce succeeded; then check the sum against the validated failed group.

use runthrough::{Comm, Op};

/// Rounds before giving up.
const MAX_ROUNDS: u32 = 20;

/// What a successful round gave: the validated failed group (world ranks), the sum, and
/// how many rounds it took.
pub(crate) struct Round {
    pub(crate) failed: Vec<usize>,
    pub(crate) sum: u64,
    pub(crate) rounds: u32,
}

/// Runs rounds on `world` until one succeeds everywhere; `check(failed)` may reject a
/// validated group (it returns why). Every problem goes to `fail`, which does not return;
/// `name` prefixes the retry lines on stderr.
pub(crate) fn until_agreed(
    name: &str,
    world: &Comm,
    check: impl Fn(&[usize]) -> Option<String>,
    fail: fn(&str) -> !,
) -> Round {
    let (me, n) = (world.rank(), world.size());
    let mut rounds = 0;
    let (failed, sum) = loop {
        rounds += 1;
        if rounds > MAX_ROUNDS {
            fail(&format!("rank {me}: no successful round in {MAX_ROUNDS}"));
        }
        let failed = match world.validate() {
            Ok(g) => g.world_ranks(),
            Err(e) => {
                eprintln!("{name}: rank {me} round {rounds}: validate: {e}; again");
                continue;
            }
        };
        if failed.contains(&me) {
            fail(&format!("rank {me}: validate names this rank failed: {failed:?}"));
        }
        if let Some(why) = check(&failed) {
            fail(&format!("rank {me}: {why}"));
        }
        let mut out = [0u64];
        let res = world.allreduce(&[me as u64 + 1], &mut out, Op::Sum);
        match world.agree(i32::from(res.is_ok())) {
            Ok(1) => break (failed, out[0]),
            Ok(_) => {}
            Err(e) => eprintln!("{name}: rank {me} round {rounds}: agree: {e}; again"),
        }
    };
    let expected: u64 = (0..n).filter(|r| !failed.contains(r)).map(|r| r as u64 + 1).sum();
    if sum != expected {
        fail(&format!("rank {me}: allreduce over the survivors gave {sum}, expected {expected} (failed {failed:?})"));
    }
    Round { failed, sum, rounds }
}
