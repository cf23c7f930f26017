//! Group operations with failed members, across real process failures (R8, R9; used by
//! `tests/group.rs`).
//!
//! `rtrun -n 6 group_check`: before any failure the world is split into odd and even
//! ranks and duplicated. Rank 3 SIGKILLs itself; once every survivor knows (each tells
//! rank 0), rank 0 lets rank 4 go, which SIGKILLs itself too. Each survivor then checks,
//! on the world, its duplicate and its half:
//! - `group_failed()` is `[3, 4]` in the order the failures became known (R8), `[3]` on
//!   the odd half, `[4]` on the even half;
//! - sizes count failed members; union / intersection / difference keep them;
//!   `translate_ranks` maps through them; `compare` gives Ident / Similar / Unequal;
//!   `incl` picks them (R9);
//! - the group of survivors (`group().difference(&group_failed())`) is usable: each
//!   survivor passes a message to the next one found through it.
//!
//! Each survivor prints `group_check: ok rank R failed=[3, 4] alive=[0, 1, 2, 5]`.

use std::time::Duration;

use runthrough::{Comm, Error, ErrorMode, Group, GroupOrder, ANY_TAG};

const N: usize = 6;
const FIRST: usize = 3;
const SECOND: usize = 4;
const TOLD: i32 = 1;
const GO: i32 = 2;
const PASS: i32 = 3;

fn fail(what: &str) -> ! {
    eprintln!("group_check: {what}");
    std::process::exit(3);
}

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

fn check<T: PartialEq + std::fmt::Debug>(me: usize, what: &str, got: T, want: T) {
    if got != want {
        fail(&format!("rank {me}: {what}: got {got:?}, expected {want:?}"));
    }
}

/// Blocks until `victim` is known failed here: a receive from it can only end in error.
fn await_failure(comm: &Comm, victim: usize) {
    match comm.recv(&mut [0u8; 1], victim, ANY_TAG) {
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        other => fail(&format!("rank {}: receive from {victim}: expected RankFailStop, got {other:?}", comm.rank())),
    }
}

/// The R9 operations on a communicator group `g` (world ranks `members`) with its
/// failed group `f` (world ranks `failed`, all members of `g`, in order).
fn check_ops(me: usize, name: &str, g: &Group, f: &Group, members: &[usize], failed: &[usize]) {
    let alive: Vec<usize> = members.iter().copied().filter(|r| !failed.contains(r)).collect();
    let failed_here: Vec<usize> = failed.iter().copied().filter(|r| members.contains(r)).collect();
    check(me, &format!("{name}: size counts failed members"), g.size(), members.len());
    check(me, &format!("{name}: failed size"), f.size(), failed.len());
    check(me, &format!("{name}: own rank"), g.rank(), members.iter().position(|&r| r == me));
    check(me, &format!("{name}: a survivor is not in the failed group"), f.rank(), None);
    let d = g.difference(f);
    check(me, &format!("{name}: difference"), d.world_ranks(), alive.clone());
    check(me, &format!("{name}: rank in the survivors"), d.rank(), alive.iter().position(|&r| r == me));
    check(me, &format!("{name}: intersection keeps failed members"), g.intersection(f).world_ranks(), failed_here);
    let mut u = failed.to_vec();
    u.extend(members.iter().copied().filter(|r| !failed.contains(r)));
    check(me, &format!("{name}: union keeps failed members"), f.union(g).world_ranks(), u.clone());
    // Every failed member is a member: adding them again changes nothing.
    check(me, &format!("{name}: union with the failed"), g.union(f).compare(g), GroupOrder::Ident);
    let all: Vec<usize> = (0..g.size()).collect();
    let want: Vec<Option<usize>> = members.iter().map(|w| failed.iter().position(|x| x == w)).collect();
    check(me, &format!("{name}: translate to the failed group"), g.translate_ranks(&all, f), want);
    let back: Vec<Option<usize>> = failed.iter().map(|w| members.iter().position(|x| x == w)).collect();
    let fall: Vec<usize> = (0..f.size()).collect();
    check(me, &format!("{name}: translate from the failed group"), f.translate_ranks(&fall, g), back);
    check(me, &format!("{name}: compare with itself"), g.compare(&g.clone()), GroupOrder::Ident);
    check(me, &format!("{name}: compare failed with itself"), f.compare(&f.clone()), GroupOrder::Ident);
    // Survivors then the failed, or the failed then the rest: the same members, in
    // the same order only when that is the communicator's order.
    let order = |v: &[usize]| if v == members { GroupOrder::Ident } else { GroupOrder::Similar };
    let alive_then_failed: Vec<usize> = alive.iter().chain(failed).copied().collect();
    check(me, &format!("{name}: survivors ∪ failed"), d.union(f).compare(g), order(&alive_then_failed));
    check(me, &format!("{name}: failed ∪ all"), f.union(g).compare(g), order(&u));
    let survivors_order = if failed.is_empty() { GroupOrder::Ident } else { GroupOrder::Unequal };
    check(me, &format!("{name}: compare with the survivors"), g.compare(&d), survivors_order);
    // Freeing a group (dropping it) always completes, failed members or not.
    drop(d);
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let me = world.rank();
    if world.size() != N {
        fail("run with -n 6");
    }
    let dup = world.dup()?;
    let half = world.split(Some((me % 2) as u32), me as i32)?.unwrap_or_else(|| fail("split gave no communicator"));
    dup.set_error_mode(ErrorMode::ErrorsReturn);
    half.set_error_mode(ErrorMode::ErrorsReturn);
    check(me, "no failure yet", world.group_failed().size(), 0);
    // Over a network transport the victim may die before its last barrier message left
    // its process, so a survivor's barrier may fail naming it (R17 allows it).
    match world.barrier() {
        Ok(()) => {}
        Err(Error::RankFailStop { rank }) if rank as usize == FIRST => {}
        Err(e) => return Err(e),
    }
    if me == FIRST {
        die();
    }
    await_failure(&world, FIRST);
    // Every survivor knows of the first failure before the second happens, so all learn
    // them in the same order.
    if me == 0 {
        for p in [1, 2, 4, 5] {
            world.recv(&mut [0u8; 1], p, TOLD)?;
        }
        world.send(&[1u8], SECOND, GO)?;
    } else {
        world.send(&[1u8], 0, TOLD)?;
    }
    if me == SECOND {
        world.recv(&mut [0u8; 1], 0, GO)?;
        die();
    }
    await_failure(&world, SECOND);
    await_failure(&dup, SECOND);

    let failed = [FIRST, SECOND];
    let f = world.group_failed();
    check(me, "world: failed group (R8)", f.world_ranks(), failed.to_vec());
    check(me, "dup: failed group (R8)", dup.group_failed().world_ranks(), failed.to_vec());
    // `incl` picks failed members like any other.
    check(me, "failed group reversed (incl)", f.incl(&[1, 0])?.compare(&f), GroupOrder::Similar);
    check(
        me,
        "failed members picked from the world (incl)",
        world.group().incl(&failed)?.compare(&f),
        GroupOrder::Ident,
    );
    let members: Vec<usize> = (0..N).collect();
    check_ops(me, "world", &world.group(), &f, &members, &failed);
    check_ops(me, "dup", &dup.group(), &dup.group_failed(), &members, &failed);
    // The half communicators: odd {1, 3, 5} lost 3, even {0, 2, 4} lost 4.
    let half_members: Vec<usize> = (me % 2..N).step_by(2).collect();
    let half_failed: Vec<usize> = failed.iter().copied().filter(|r| r % 2 == me % 2).collect();
    let hf = half.group_failed();
    check(me, "half: failed group (R8)", hf.world_ranks(), half_failed.clone());
    check_ops(me, "half", &half.group(), &hf, &half_members, &half_failed);
    // Across communicators: the world's failed group intersected with the half's group
    // is the half's failed group; translated into the half, the failed member's rank 1.
    check(me, "half ∩ world failed", half.group().intersection(&f).compare(&hf), GroupOrder::Ident);
    check(me, "world failed → half", f.translate_ranks(&[0, 1], &half.group()), {
        failed.iter().map(|w| half_members.iter().position(|x| x == w)).collect::<Vec<_>>()
    });

    // The survivors' group is usable for communication: pass a token to the next one.
    let alive = world.group().difference(&f);
    let pos = alive.rank().unwrap_or_else(|| fail("a survivor is not in the survivors' group"));
    let ranks = alive.world_ranks();
    let (next, prev) = (ranks[(pos + 1) % ranks.len()], ranks[(pos + ranks.len() - 1) % ranks.len()]);
    let token = [me as u64];
    let mut got = [0u64];
    runthrough::scope(|s| {
        let req = world.isend(s, &token, next, PASS)?;
        world.recv(&mut got, prev, PASS)?;
        req.wait()
    })?;
    check(me, "token from the previous survivor", got[0], prev as u64);
    println!("group_check: ok rank {me} failed={:?} alive={:?}", f.world_ranks(), ranks);
    rt.finalize()
}
