//! One-sided communication when processes die (R34–R37), for tests/rma.rs: a rank
//! SIGKILLs itself at a chosen point of an epoch, and every survivor must end in bounded
//! time with the documented outcome, then validate the window (the same failed group
//! everywhere) and go on using it.
//!
//! `rtrun -n N rma_fault MODE` (N ≥ 3); every survivor prints
//! `rma_fault: ok rank R MODE failed=[..]` or `rma_fault: rank R MODE FAILED: why`:
//! - `holder`: rank 1 dies holding an exclusive lock on rank 0; the other origins get
//!   the lock (released by rank 0 once it knows), increment a counter under it, and the
//!   counter is right;
//! - `target_lock`: rank 0 dies while every other rank holds a shared lock on it; their
//!   put or unlock to it errs with `RankFailStop`, then they validate and use the window
//!   among themselves;
//! - `target_fence`: the last rank dies inside a fence epoch; the survivors' fence errs,
//!   validate recognizes it, the next fence succeeds and every put between survivors
//!   landed;
//! - `origin_pscw`: rank 1 dies inside its access epoch to rank 0; rank 0's `wait` errs
//!   naming it, while rank 2's operations of the same epoch are applied;
//! - `origin_put`: rank 1 dies right after issuing a long put (many records) to rank 0,
//!   with no flush; rank 0's memory around the put's range is untouched, and the range
//!   holds a prefix of the put's data then untouched elements.

use std::time::{Duration, Instant};

use runthrough::{Comm, Error, ErrorMode, LockKind, Window};

const SENTINEL: u64 = 0x5e57_1e57_5e57_1e57;

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

type R<T> = Result<T, String>;

fn e(what: &'static str) -> impl Fn(Error) -> String {
    move |err| format!("{what}: {err}")
}

/// Waits (bounded) until this process knows `rank` failed.
fn until_failed(w: &Window<u64>, rank: usize) -> R<()> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !w.group_failed().world_ranks().contains(&rank) {
        if Instant::now() > deadline {
            return Err(format!("rank {rank}'s failure never became known"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Validates the window: with `validate`, or in the modes that name it with `ivalidate`
/// and its wait (at every rank: a nonblocking collective matches only its own kind).
fn validated(w: &Window<u64>) -> R<Vec<u32>> {
    let nonblocking =
        std::env::args().nth(1).is_some_and(|m| matches!(m.as_str(), "target_fence" | "origin_pscw" | "origin_put"));
    let g = if nonblocking {
        w.ivalidate().map_err(e("ivalidate"))?.wait().map_err(e("ivalidate wait"))?
    } else {
        w.validate().map_err(e("validate"))?
    };
    // Windows on the world: world ranks are window ranks.
    Ok(g.world_ranks().into_iter().map(|r| r as u32).collect())
}

fn holder(world: &Comm, w: &Window<u64>) -> R<Vec<u32>> {
    let me = world.rank();
    if me == 1 {
        w.lock(LockKind::Exclusive, 0).map_err(e("lock"))?;
        // Tell the others the lock is held, then die holding it.
        world.barrier().map_err(e("barrier"))?;
        die();
    }
    world.barrier().map_err(e("barrier"))?;
    let m = 20;
    for _ in 0..m {
        if me == 0 {
            break;
        }
        w.lock(LockKind::Exclusive, 0).map_err(e("lock after the holder died"))?;
        let mut c = [0u64];
        w.get(&mut c, 0, 0).map_err(e("get"))?;
        w.put(&[c[0] + 1], 0, 0).map_err(e("put"))?;
        w.unlock(0).map_err(e("unlock"))?;
    }
    until_failed(w, 1)?;
    let failed = validated(w)?;
    w.fence().map_err(e("fence after validate"))?;
    if me == 0 {
        let mut c = [0u64];
        w.read_local(0, &mut c).map_err(e("read"))?;
        let want = (m * (world.size() - 2)) as u64;
        if c[0] != want {
            return Err(format!("counter {} want {want}", c[0]));
        }
    }
    Ok(failed)
}

fn target_lock(world: &Comm, w: &Window<u64>) -> R<Vec<u32>> {
    let me = world.rank();
    if me != 0 {
        w.lock(LockKind::Shared, 0).map_err(e("lock"))?;
    }
    world.barrier().map_err(e("barrier"))?;
    if me == 0 {
        die();
    }
    until_failed(w, 0)?;
    let put = w.put(&[me as u64], 0, me);
    let unlock = w.unlock(0);
    match (put, unlock) {
        (Err(Error::RankFailStop { rank: 0 }), Err(Error::RankFailStop { rank: 0 })) => {}
        other => return Err(format!("put and unlock to the dead target: {other:?}")),
    }
    let failed = validated(w)?;
    survivors_use(world, w, &failed)?;
    Ok(failed)
}

fn target_fence(world: &Comm, w: &Window<u64>) -> R<Vec<u32>> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    w.fence().map_err(e("fence"))?;
    w.put(&[100 + me as u64], (me + 1) % n, me).map_err(e("put"))?;
    if me == victim {
        die();
    }
    until_failed(w, victim)?;
    match w.fence() {
        Err(Error::RankFailStop { .. }) => {}
        other => return Err(format!("fence with an unrecognized failure: {other:?}")),
    }
    let failed = validated(w)?;
    w.fence().map_err(e("fence after validate"))?;
    let prev = (me + n - 1) % n;
    let mut got = [0u64];
    w.read_local(prev, &mut got).map_err(e("read"))?;
    if prev != victim && got[0] != 100 + prev as u64 {
        return Err(format!("put of live rank {prev} lost: {}", got[0]));
    }
    survivors_use(world, w, &failed)?;
    Ok(failed)
}

fn origin_pscw(world: &Comm, w: &Window<u64>) -> R<Vec<u32>> {
    let (me, n) = (world.rank(), world.size());
    let origins: Vec<usize> = (1..n).collect();
    match me {
        0 => {
            w.post(&origins).map_err(e("post"))?;
            match w.wait() {
                Err(Error::RankFailStop { rank: 1 }) => {}
                other => return Err(format!("wait with a dead origin: {other:?}")),
            }
            let mut v = vec![0u64; n];
            w.read_local(0, &mut v).map_err(e("read"))?;
            if (2..n).any(|o| v[o] != 7 * o as u64) {
                return Err(format!("live origins' puts: {v:?}"));
            }
        }
        1 => {
            w.start(&[0]).map_err(e("start"))?;
            die();
        }
        _ => {
            w.start(&[0]).map_err(e("start"))?;
            w.put(&[7 * me as u64], 0, me).map_err(e("put"))?;
            w.complete().map_err(e("complete"))?;
        }
    }
    until_failed(w, 1)?;
    let failed = validated(w)?;
    survivors_use(world, w, &failed)?;
    Ok(failed)
}

fn origin_put(world: &Comm, w: &Window<u64>, k: usize) -> R<Vec<u32>> {
    let me = world.rank();
    let (lo, hi) = (64, 64 + k);
    if me == 0 {
        w.with_local(|m| m.iter_mut().for_each(|x| *x = SENTINEL)).map_err(e("local"))?;
    }
    world.barrier().map_err(e("barrier"))?;
    if me == 1 {
        let data: Vec<u64> = (0..k as u64).map(|i| i + 1).collect();
        w.lock(LockKind::Shared, 0).map_err(e("lock"))?;
        w.put(&data, 0, lo).map_err(e("put"))?;
        die();
    }
    until_failed(w, 1)?;
    if me == 0 {
        let mut m = vec![0u64; w.len_of(0)];
        w.read_local(0, &mut m).map_err(e("read"))?;
        if m[..lo].iter().chain(&m[hi..]).any(|&x| x != SENTINEL) {
            return Err("memory outside the dead origin's put changed".into());
        }
        let landed = m[lo..hi].iter().take_while(|&&x| x != SENTINEL).count();
        if m[lo..lo + landed].iter().enumerate().any(|(i, &x)| x != i as u64 + 1)
            || m[lo + landed..hi].iter().any(|&x| x != SENTINEL)
        {
            return Err(format!("the put's range is not a prefix of its data ({landed} landed)"));
        }
        println!("rma_fault: rank 0 origin_put: {landed} of {k} elements of the dead origin's put landed");
    }
    let failed = validated(w)?;
    survivors_use(world, w, &failed)?;
    Ok(failed)
}

/// After validate: a fence epoch among the survivors (each puts to the next live rank).
fn survivors_use(world: &Comm, w: &Window<u64>, failed: &[u32]) -> R<()> {
    let (me, n) = (world.rank(), world.size());
    let live: Vec<usize> = (0..n).filter(|r| !failed.contains(&(*r as u32))).collect();
    let i = live.iter().position(|&r| r == me).ok_or("a survivor not live")?;
    let next = live[(i + 1) % live.len()];
    let prev = live[(i + live.len() - 1) % live.len()];
    w.fence().map_err(e("fence"))?;
    w.put(&[5000 + me as u64], next, n + me).map_err(e("put among survivors"))?;
    w.fence().map_err(e("fence"))?;
    let mut got = [0u64];
    w.read_local(n + prev, &mut got).map_err(e("read"))?;
    if got[0] != 5000 + prev as u64 {
        return Err(format!("survivors' put from {prev}: {}", got[0]));
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    let k = 40_000;
    let w: Window<u64> = world.win_allocate(2 * n + 64 + k)?;
    let r = match mode.as_str() {
        "holder" => holder(&world, &w),
        "target_lock" => target_lock(&world, &w),
        "target_fence" => target_fence(&world, &w),
        "origin_pscw" => origin_pscw(&world, &w),
        "origin_put" => origin_put(&world, &w, k),
        other => Err(format!("unknown mode {other:?}")),
    };
    match r {
        Ok(failed) => println!("rma_fault: ok rank {me} {mode} failed={failed:?}"),
        Err(why) => {
            println!("rma_fault: rank {me} {mode} FAILED: {why}");
            std::process::exit(1);
        }
    }
    let (_, freed) = w.free();
    if let Err(err) = freed {
        println!("rma_fault: rank {me} {mode} free erred: {err}");
    }
    rt.finalize()
}
