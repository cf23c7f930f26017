//! Checks of the ULFM calls and corrupted communicators (R28, R29), used by
//! `tests/ulfm.rs`. `rtrun -n N ulfm_check MODE` (N ≥ 3); every rank that passes prints
//! `ulfm_check: ok rank R MODE ...`, any wrong outcome exits 3 with a message.
//!
//! - `revoke`: on a dup of the world, every rank but 0 blocks receiving from rank 0,
//!   which revokes instead of sending. Every blocked receive fails with `Revoked`, every
//!   rank sees `is_revoked()`, later sends and receives and collectives fail with
//!   `Revoked`, but `agree` and `iagree` still decide (the AND of the ranks' flags) and the world
//!   is untouched.
//! - `revoke-kill`: the last rank revokes and SIGKILLs itself at once, while the others
//!   block receiving from it. Each survivor's receive fails (`Revoked`, or
//!   `RankFailStop` if the failure was known first); the survivors then agree on the
//!   world whether any of them saw the revocation, and if one did every one must.
//! - `revoke-relay-kill`: as `revoke-kill`, and rank 0 — the revoker's ring successor
//!   and first relay on the notice's overlay — SIGKILLs itself at about the same time
//!   (before, while or after it passes the notice on); the survivors must still be
//!   uniform.
//! - `corrupt`: rank 1 panics while holding the dup (its handle drops during
//!   unwinding); every other rank, blocked receiving from rank 1, gets `CommCorrupted`,
//!   and the next operation on the dup too — never `RankFailStop`, though rank 1 dies.
//! - `ack`: the last rank SIGKILLs itself; the survivors' wildcard receives fail
//!   (R13), `get_failed()` names it, `ack_failed` acknowledges it and wildcard
//!   receives work again; then a new failure-free message arrives through a wildcard.
//! - `signal-kill`: the last rank signals an error and is SIGKILLed a few milliseconds
//!   later, mid-propagation, while the others block receiving from it. Each survivor's
//!   receive fails (`Propagated` naming it, or `RankFailStop` if the death was known
//!   first); if any survivor caught the signal, every survivor does (at its next
//!   operation at the latest) — checked by two agreements over the world.
//! - `signal-relay-kill`: as `signal-kill`, and rank 0 — the signaller's ring successor
//!   and first relay of the signal on the communicator's overlay — SIGKILLs itself at
//!   about the same time (before, while or after it passes the signal on); the
//!   survivors must still be uniform.
//! - `signal-failed`: the last rank SIGKILLs itself first; once every survivor knows it
//!   failed, rank 0 signals while the others block receiving from rank 0: every survivor
//!   gets `Propagated([(0, 5)])` (a failed member is no obstacle), and afterwards the
//!   survivors still talk on the communicator.
//! - `signal-in-collective`: every rank but 1 blocks in a barrier on the dup; rank 1
//!   signals instead of joining it: every barrier fails with `Propagated([(1, 9)])` (an
//!   error resolution overtakes a pending collective, also on shared memory's lock-free
//!   path, R27), then a barrier and an allreduce on the dup succeed.
//! - `shrink`: the last rank SIGKILLs itself; the survivors revoke the world's dup,
//!   shrink it, and run an allreduce on the new communicator of the N-1 survivors.

use std::time::{Duration, Instant};

use runthrough::{Comm, Error, ErrorMode, Op, ANY_SOURCE};

fn fail(what: &str) -> ! {
    eprintln!("ulfm_check: {what}");
    std::process::exit(3);
}

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

fn expect_err<T: std::fmt::Debug>(me: usize, what: &str, r: Result<T, Error>, ok: impl Fn(&Error) -> bool) -> Error {
    match r {
        Err(e) if ok(&e) => e,
        other => fail(&format!("rank {me}: {what}: unexpected {other:?}")),
    }
}

fn revoke(world: &Comm) -> Result<String, Error> {
    let me = world.rank();
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    if me == 0 {
        // Let the others block first (not required: a revoke reaches later calls too).
        std::thread::sleep(Duration::from_millis(100));
        comm.revoke();
    } else {
        let mut b = [0u8; 8];
        expect_err(me, "blocked receive", comm.recv(&mut b, 0usize, 7), |e| *e == Error::Revoked);
    }
    if !comm.is_revoked() {
        fail(&format!("rank {me}: not revoked"));
    }
    let peer = (me + 1) % world.size();
    expect_err(me, "send after revoke", comm.send(&[1u8], peer, 1), |e| *e == Error::Revoked);
    let mut b = [0u8; 1];
    expect_err(me, "recv after revoke", comm.recv(&mut b, peer, 1), |e| *e == Error::Revoked);
    expect_err(me, "barrier after revoke", comm.barrier(), |e| *e == Error::Revoked);
    let mut x = [0u64];
    expect_err(me, "allreduce after revoke", comm.allreduce(&[1u64], &mut x, Op::Sum), |e| *e == Error::Revoked);
    expect_err(me, "dup after revoke", comm.dup(), |e| *e == Error::Revoked);
    // agree still works on a revoked communicator: the AND of every rank's flag.
    let flag = if me == 1 { 0b110 } else { 0b111 };
    let agreed = comm.agree(flag)?;
    if agreed != 0b110 {
        fail(&format!("rank {me}: agree on the revoked comm gave {agreed:#b}"));
    }
    let pending = comm.iagree(if me == 0 { 0b011 } else { 0b111 })?;
    let nonblocking = pending.wait()?;
    if nonblocking != 0b011 {
        fail(&format!("rank {me}: iagree on the revoked comm gave {nonblocking:#b}"));
    }
    // The world is untouched.
    let mut sum = [0u64];
    world.allreduce(&[me as u64], &mut sum, Op::Sum)?;
    let n = world.size() as u64;
    if sum[0] != n * (n - 1) / 2 {
        fail(&format!("rank {me}: world allreduce after the revoke gave {}", sum[0]));
    }
    Ok(format!("agreed={agreed:#b}"))
}

fn revoke_kill(world: &Comm, relay_dies: bool) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    if relay_dies && me == 0 {
        // Around the revocation: the revoker sleeps 100 ms, then revokes.
        let jitter = u64::from(std::process::id() % 5);
        std::thread::sleep(Duration::from_millis(98 + jitter));
        die();
    }
    if me == victim {
        std::thread::sleep(Duration::from_millis(100));
        comm.revoke();
        die();
    }
    let mut b = [0u8; 8];
    let e = expect_err(me, "receive from the revoker", comm.recv(&mut b, victim, 7), |e| {
        matches!(e, Error::Revoked | Error::RankFailStop { .. })
    });
    // The notice is flooded: if any survivor got it, every survivor gets it. Wait for it
    // a bounded time, then agree over the world whether anyone saw it.
    let deadline = Instant::now() + Duration::from_secs(2);
    while !comm.is_revoked() && e == Error::Revoked && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let seen = i32::from(comm.is_revoked());
    let all_saw = world.agree(seen)?; // AND: 1 iff every survivor saw it
    let none_saw = world.agree(1 - seen)?; // AND of the negation: 1 iff none did
    if all_saw == 0 && none_saw == 0 {
        // Some saw it and some not yet: wait for the flood, then everyone must have it.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !comm.is_revoked() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !comm.is_revoked() {
            fail(&format!("rank {me}: another survivor saw the revocation, this one never did"));
        }
    }
    Ok(format!("first={} revoked={}", if e == Error::Revoked { "revoked" } else { "failed" }, comm.is_revoked()))
}

fn signal_kill(world: &Comm, relay_dies: bool) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    // A survivor still in this barrier when the signal comes catches it here.
    let in_barrier = comm.barrier().err();
    if relay_dies && me == 0 {
        // Around the signal: the signaller signals as it leaves the barrier.
        let jitter = u64::from(std::process::id() % 4);
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(jitter));
            die();
        });
    }
    if me == victim {
        std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(1));
            die();
        });
        // Whether the resolution completes before the kill lands or not, this rank dies.
        let _ = comm.signal_error(99);
        std::thread::sleep(Duration::from_secs(10));
        fail(&format!("rank {me}: SIGKILL did not arrive"));
    }
    let mut b = [0u8; 8];
    let first = match in_barrier {
        Some(e) => e,
        None => comm.recv(&mut b, victim, 7).err().unwrap_or(Error::ApiMisuse("the victim sent nothing")),
    };
    if !matches!(first, Error::Propagated(_) | Error::RankFailStop { .. }) {
        fail(&format!("rank {me}: first outcome {first:?}"));
    }
    let want = vec![(victim as u32, 99)];
    let mut saw = match &first {
        Error::Propagated(l) if *l == want => true,
        Error::Propagated(l) => fail(&format!("rank {me}: caught {l:?}")),
        _ => false,
    };
    // The resolution runs among the survivors whether or not this one waits on the
    // communicator: give it a moment, then the next operation delivers it if it is owed.
    std::thread::sleep(Duration::from_millis(200));
    match comm.agree(1) {
        Err(Error::Propagated(l)) if l == want && !saw => saw = true,
        Ok(1) => {}
        other => fail(&format!("rank {me}: agree after the signal gave {other:?}")),
    }
    let all = world.agree(i32::from(saw))?;
    let none = world.agree(i32::from(!saw))?;
    if all == 0 && none == 0 {
        fail(&format!("rank {me}: survivors disagree on whether the signal arrived (saw={saw})"));
    }
    Ok(format!("caught={saw}"))
}

fn signal_failed(world: &Comm) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    comm.barrier()?;
    if me == victim {
        die();
    }
    let mut b = [0u8; 8];
    expect_err(me, "receive from the dead rank", comm.recv(&mut b, victim, 7), |e| {
        *e == Error::RankFailStop { rank: victim as u32 }
    });
    if me == 0 {
        std::thread::sleep(Duration::from_millis(50));
        let e = comm.signal_error(5);
        if e != Error::Propagated(vec![(0, 5)]) {
            fail(&format!("rank {me}: signal_error gave {e:?}"));
        }
    } else {
        expect_err(me, "receive from the signaller", comm.recv(&mut b, 0usize, 7), |e| {
            *e == Error::Propagated(vec![(0, 5)])
        });
    }
    // Afterwards: the survivors pass a token on the same communicator.
    let survivors = n - 1;
    let (next, prev) = ((me + 1) % survivors, (me + survivors - 1) % survivors);
    let token = [me as u64];
    let mut got = [0u64];
    comm.sendrecv(&token, next, 8, &mut got, prev, 8)?;
    if got[0] != prev as u64 {
        fail(&format!("rank {me}: token {got:?} from {prev}"));
    }
    Ok("caught=[(0, 5)]".into())
}

fn signal_in_collective(world: &Comm) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let want = Error::Propagated(vec![(1, 9)]);
    if me == 1 {
        // The others are inside the barrier by now (shared memory: its lock-free path).
        std::thread::sleep(Duration::from_millis(100));
        let e = comm.signal_error(9);
        if e != want {
            fail(&format!("rank {me}: signal_error gave {e:?}"));
        }
    } else {
        expect_err(me, "barrier overtaken by a signal", comm.barrier(), |e| *e == want);
    }
    // Used as before: nothing left armed, and no collective matches one begun before.
    comm.barrier()?;
    let mut sum = [0u64];
    comm.allreduce(&[me as u64], &mut sum, Op::Sum)?;
    if sum[0] != (n * (n - 1) / 2) as u64 {
        fail(&format!("rank {me}: allreduce after the signal gave {sum:?}"));
    }
    Ok("caught=[(1, 9)]".into())
}

fn corrupt(world: &Comm) -> Result<String, Error> {
    let me = world.rank();
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    if me == 1 {
        std::thread::sleep(Duration::from_millis(100));
        // The handle drops while this thread unwinds: the dup is corrupted (R28).
        let _held = comm;
        panic!("ulfm_check: rank 1 panics on purpose while holding the communicator");
    }
    let mut b = [0u8; 8];
    expect_err(me, "receive from the panicking rank", comm.recv(&mut b, 1usize, 7), |e| *e == Error::CommCorrupted);
    let peer = if me == 0 { 2 } else { 0 };
    expect_err(me, "send after corruption", comm.send(&[1u8], peer, 1), |e| *e == Error::CommCorrupted);
    expect_err(me, "barrier after corruption", comm.barrier(), |e| *e == Error::CommCorrupted);
    expect_err(me, "agree after corruption", comm.agree(1), |e| *e == Error::CommCorrupted);
    Ok("corrupted".into())
}

fn ack(world: &Comm) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    world.barrier()?;
    if me == victim {
        die();
    }
    let mut b = [0u64; 1];
    expect_err(me, "wildcard receive after the failure", world.recv(&mut b, ANY_SOURCE, 5), |e| {
        *e == Error::RankFailStop { rank: victim as u32 }
    });
    let failed = world.get_failed();
    if failed.size() != 1 {
        fail(&format!("rank {me}: get_failed has {} members", failed.size()));
    }
    if world.ack_failed(0) != 0 || world.any_source_enabled() {
        fail(&format!("rank {me}: acknowledging nothing re-enabled wildcards"));
    }
    if world.ack_failed(usize::MAX) != 1 || !world.any_source_enabled() {
        fail(&format!("rank {me}: ack_failed did not acknowledge the one failure"));
    }
    // Survivors pass a token around their ring through wildcard receives.
    let survivors = n - 1;
    let next = (me + 1) % survivors;
    let token = [me as u64 + 100];
    runthrough::scope(|s| {
        let r = world.isend(s, &token, next, 6)?;
        let st = world.recv(&mut b, ANY_SOURCE, 6)?;
        r.wait()?;
        let prev = (me + survivors - 1) % survivors;
        if st.source != prev || b[0] != prev as u64 + 100 {
            fail(&format!("rank {me}: wildcard got {:?} from {}", b, st.source));
        }
        Ok::<_, Error>(())
    })?;
    Ok("acked=1".into())
}

fn shrink(world: &Comm) -> Result<String, Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    let comm = world.dup()?;
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    comm.barrier()?;
    if me == victim {
        die();
    }
    let mut x = [0u64];
    let first = comm.allreduce(&[1u64], &mut x, Op::Sum);
    if let Err(e) = &first {
        if !matches!(e, Error::RankFailStop { .. } | Error::Revoked) {
            fail(&format!("rank {me}: allreduce over the failure gave {e:?}"));
        }
    }
    comm.revoke();
    let small = comm.shrink()?;
    if small.size() != n - 1 || small.rank() != me {
        fail(&format!("rank {me}: shrink gave rank {} of {}", small.rank(), small.size()));
    }
    let mut sum = [0u64];
    small.allreduce(&[me as u64 + 1], &mut sum, Op::Sum)?;
    let m = (n - 1) as u64;
    if sum[0] != m * (m + 1) / 2 {
        fail(&format!("rank {me}: allreduce on the shrunk comm gave {}", sum[0]));
    }
    Ok(format!("size={} sum={}", small.size(), sum[0]))
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| fail("usage: ulfm_check MODE"));
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    if world.size() < 3 {
        fail("needs at least 3 ranks");
    }
    let detail = match mode.as_str() {
        "revoke" => revoke(&world)?,
        "revoke-kill" => revoke_kill(&world, false)?,
        "revoke-relay-kill" => revoke_kill(&world, true)?,
        "corrupt" => corrupt(&world)?,
        "signal-kill" => signal_kill(&world, false)?,
        "signal-relay-kill" => signal_kill(&world, true)?,
        "signal-failed" => signal_failed(&world)?,
        "signal-in-collective" => signal_in_collective(&world)?,
        "ack" => ack(&world)?,
        "shrink" => shrink(&world)?,
        m => fail(&format!("unknown mode {m}")),
    };
    println!("ulfm_check: ok rank {} {mode} {detail}", world.rank());
    drop(world);
    rt.finalize()
}
