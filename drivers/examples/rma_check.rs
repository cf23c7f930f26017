//! One-sided communication checked at every rank (tests/rma.rs runs it on shared memory
//! and libfabric tcp, 2 to 8 ranks): every operation under every synchronization mode,
//! values checked element by element, short and long (several records) transfers.
//!
//! `rtrun -n N rma_check [elems]` prints `rma_check: rank R ok CASES` at every rank, or
//! `rma_check: rank R FAILED: why` and exits 1. Cases:
//! - put then get under fence, lock/unlock (shared), lock_all/flush, post/start/
//!   complete/wait: rank r puts a pattern of its own at element r·K of rank r+1 and reads
//!   back what rank r−1 put at rank r+1... each value checked;
//! - accumulate (u64 Sum, f64 Max, i32 BitXor, u8 Replace) from every rank at once into
//!   every rank, several rounds;
//! - fetch_and_op: every rank adds 1 to one counter M times; the old values every rank
//!   got are exactly 0..n·M once each (atomicity);
//! - compare_and_swap: every rank tries to claim one slot; one winner, seen by all;
//! - get_accumulate (Replace) swaps; NoOp reads;
//! - exclusive locks: every rank increments a counter with get + put (not atomic) under
//!   an exclusive lock M times; the counter ends at n·M only if the lock excludes;
//! - rget inside a request scope;
//! - a window over the program's vector (`win_create`) handed back by `free`;
//! - a shared window: every member's part contiguous and reachable (`shared_query`);
//! - a dynamic window: attach, operations by address, a refused address, detach;
//! - the request forms `rput`, `raccumulate`, `rget_accumulate`.
//!
//! The line each rank prints counts the members whose memory it maps (an allocated
//! window's node segment) and the puts and gets of the created window copied with CMA:
//! all members and 2 copies on shared memory, none over tcp.

use runthrough::{AccOp, Comm, Error, LockKind, Window};

type R<T> = Result<T, String>;

fn e(what: &str) -> impl Fn(Error) -> String + '_ {
    move |err| format!("{what}: {err}")
}

fn pattern(origin: usize, i: usize) -> u64 {
    (origin as u64 + 1) * 1_000_003 + i as u64 * 7
}

/// Rank r puts K elements at element r·K of rank r+1 (each sync mode), then gets back
/// what rank r−1 put at rank r+1... i.e. every rank checks its own window and a remote
/// read.
fn put_get(w: &Window<u64>, k: usize, mode: &str) -> R<()> {
    let (r, n) = (w.rank(), w.size());
    let (next, prev) = ((r + 1) % n, (r + n - 1) % n);
    let data: Vec<u64> = (0..k).map(|i| pattern(r, i)).collect();
    match mode {
        "fence" => {
            w.fence().map_err(e("fence"))?;
            w.put(&data, next, r * k).map_err(e("put"))?;
            w.fence().map_err(e("fence"))?;
        }
        "lock" => {
            w.lock(LockKind::Shared, next).map_err(e("lock"))?;
            w.put(&data, next, r * k).map_err(e("put"))?;
            w.unlock(next).map_err(e("unlock"))?;
            w.fence().map_err(e("fence"))?;
        }
        "lock_all" => {
            w.lock_all().map_err(e("lock_all"))?;
            w.put(&data, next, r * k).map_err(e("put"))?;
            w.flush(next).map_err(e("flush"))?;
            w.unlock_all().map_err(e("unlock_all"))?;
            w.fence().map_err(e("fence"))?;
        }
        "pscw" => {
            // Expose to prev (who puts here), access next.
            w.post(&[prev]).map_err(e("post"))?;
            w.start(&[next]).map_err(e("start"))?;
            w.put(&data, next, r * k).map_err(e("put"))?;
            w.complete().map_err(e("complete"))?;
            w.wait().map_err(e("wait"))?;
        }
        _ => return Err(format!("unknown mode {mode}")),
    }
    // What prev put here.
    let mut mine = vec![0u64; k];
    w.read_local(prev * k, &mut mine).map_err(e("read_local"))?;
    for (i, v) in mine.iter().enumerate() {
        if *v != pattern(prev, i) {
            return Err(format!("{mode}: element {i} from rank {prev} is {v}, want {}", pattern(prev, i)));
        }
    }
    // A remote read of what this rank put at next, in its own epoch.
    let mut back = vec![0u64; k];
    w.lock(LockKind::Shared, next).map_err(e("lock"))?;
    w.get(&mut back, next, r * k).map_err(e("get"))?;
    w.unlock(next).map_err(e("unlock"))?;
    if back != data {
        return Err(format!("{mode}: get of what I put at {next} differs"));
    }
    w.fence().map_err(e("fence"))?;
    // Clear for the next mode.
    w.write_local(prev * k, &vec![0u64; k]).map_err(e("write_local"))?;
    w.fence().map_err(e("fence"))
}

fn accumulates(world: &Comm, k: usize) -> R<()> {
    let n = world.size();
    let rounds = 3;
    let w: Window<u64> = world.win_allocate(k).map_err(e("win_allocate"))?;
    let wf: Window<f64> = world.win_allocate(k).map_err(e("win_allocate f64"))?;
    let wx: Window<i32> = world.win_allocate(k).map_err(e("win_allocate i32"))?;
    let add: Vec<u64> = (0..k as u64).map(|i| i + 1).collect();
    let me = world.rank();
    let fv: Vec<f64> = (0..k).map(|i| (me * k + i) as f64 * 0.5).collect();
    let xv: Vec<i32> = (0..k).map(|i| ((me + 1) * 7919 + i) as i32).collect();
    w.fence().map_err(e("fence"))?;
    wf.fence().map_err(e("fence"))?;
    wx.fence().map_err(e("fence"))?;
    for _ in 0..rounds {
        for t in 0..n {
            w.accumulate(&add, t, 0, AccOp::Sum).map_err(e("acc sum"))?;
            wf.accumulate(&fv, t, 0, AccOp::Max).map_err(e("acc max"))?;
        }
    }
    for t in 0..n {
        wx.accumulate(&xv, t, 0, AccOp::BitXor).map_err(e("acc xor"))?;
    }
    w.fence().map_err(e("fence"))?;
    wf.fence().map_err(e("fence"))?;
    wx.fence().map_err(e("fence"))?;
    let mut got = vec![0u64; k];
    w.read_local(0, &mut got).map_err(e("read"))?;
    for (i, v) in got.iter().enumerate() {
        let want = (n * rounds) as u64 * (i as u64 + 1);
        if *v != want {
            return Err(format!("acc sum element {i}: {v}, want {want}"));
        }
    }
    let mut gf = vec![0f64; k];
    wf.read_local(0, &mut gf).map_err(e("read"))?;
    for (i, v) in gf.iter().enumerate() {
        let want = ((n - 1) * k + i) as f64 * 0.5;
        if *v != want {
            return Err(format!("acc max element {i}: {v}, want {want}"));
        }
    }
    let mut gx = vec![0i32; k];
    wx.read_local(0, &mut gx).map_err(e("read"))?;
    for (i, v) in gx.iter().enumerate() {
        let want = (0..n).fold(0i32, |a, r| a ^ (((r + 1) * 7919 + i) as i32));
        if *v != want {
            return Err(format!("acc xor element {i}: {v}, want {want}"));
        }
    }
    // Replace: the last writer in issue order from one origin wins (after a fence: every
    // rank has read the sums).
    w.fence().map_err(e("fence"))?;
    if me == 0 {
        let wb: Vec<u64> = vec![9; k];
        w.accumulate(&wb, n - 1, 0, AccOp::Replace).map_err(e("acc replace"))?;
    }
    w.fence().map_err(e("fence"))?;
    if me == n - 1 {
        w.read_local(0, &mut got).map_err(e("read"))?;
        if got.iter().any(|&v| v != 9) {
            return Err("acc replace".into());
        }
    }
    for x in [w.free().1, wf.free().1, wx.free().1] {
        x.map_err(e("free"))?;
    }
    Ok(())
}

fn atomics(world: &Comm) -> R<()> {
    let (me, n) = (world.rank(), world.size());
    let m = 50;
    let w: Window<i64> = world.win_allocate(4).map_err(e("win_allocate"))?;
    w.write_local(1, &[-1]).map_err(e("write"))?;
    w.fence().map_err(e("fence"))?;
    let mut olds = Vec::with_capacity(m);
    for _ in 0..m {
        olds.push(w.fetch_and_op(1, 0, 0, AccOp::Sum).map_err(e("fetch_and_op"))?);
    }
    let mut all = vec![0i64; m * n];
    world.allgather(&olds, &mut all).map_err(e("allgather"))?;
    all.sort_unstable();
    if all.iter().enumerate().any(|(i, &v)| v != i as i64) {
        return Err(format!("fetch_and_op old values are not 0..{}: {:?}", m * n, &all[..all.len().min(20)]));
    }
    // Compare-and-swap: one winner claims slot 1 of rank n-1.
    let was = w.compare_and_swap(-1, me as i64, n - 1, 1).map_err(e("cas"))?;
    let won = i64::from(was == -1);
    let mut wins = vec![0i64; n];
    world.allgather(&[won], &mut wins).map_err(e("allgather"))?;
    if wins.iter().sum::<i64>() != 1 {
        return Err(format!("compare_and_swap winners: {wins:?}"));
    }
    let winner = wins.iter().position(|&x| x == 1).unwrap_or(usize::MAX) as i64;
    let read = w.fetch_and_op(0, n - 1, 1, AccOp::NoOp).map_err(e("no_op read"))?;
    if read != winner {
        return Err(format!("slot holds {read}, winner {winner}"));
    }
    w.fence().map_err(e("fence"))?;
    // Get-accumulate Replace: a swap at one's successor's slot 2.
    let next = (me + 1) % n;
    w.fence().map_err(e("fence"))?;
    let mut old = [0i64];
    w.get_accumulate(&[100 + me as i64], &mut old, next, 2, AccOp::Replace).map_err(e("get_acc"))?;
    w.fence().map_err(e("fence"))?;
    let mut here = [0i64];
    w.read_local(2, &mut here).map_err(e("read"))?;
    let prev = (me + n - 1) % n;
    if old[0] != 0 || here[0] != 100 + prev as i64 {
        return Err(format!("get_accumulate swap: old {} here {}", old[0], here[0]));
    }
    // Exclusive locks: non-atomic increments of rank 0's slot 3.
    for _ in 0..m {
        w.lock(LockKind::Exclusive, 0).map_err(e("lock excl"))?;
        let mut c = [0i64];
        w.get(&mut c, 0, 3).map_err(e("get"))?;
        w.put(&[c[0] + 1], 0, 3).map_err(e("put"))?;
        w.unlock(0).map_err(e("unlock"))?;
    }
    w.fence().map_err(e("fence"))?;
    if me == 0 {
        let mut c = [0i64];
        w.read_local(3, &mut c).map_err(e("read"))?;
        if c[0] != (m * n) as i64 {
            return Err(format!("exclusive-lock counter {} want {}", c[0], m * n));
        }
    }
    w.free().1.map_err(e("free"))
}

/// Returns the puts and gets copied with CMA (to members on this node).
fn created_and_rget(world: &Comm, k: usize) -> R<u64> {
    let (me, n) = (world.rank(), world.size());
    let mut mine: Vec<u32> = (0..k as u32).map(|i| i ^ (me as u32 * 0x9e37)).collect();
    let w = world.win_create(mine.clone()).map_err(e("win_create"))?;
    let copied = || w.engine().lock().stats().rma_copied;
    let before = copied();
    w.fence().map_err(e("fence"))?;
    let next = (me + 1) % n;
    let mut got = vec![0u32; k];
    runthrough::scope(|s| -> Result<(), Error> {
        let r = w.rget(s, &mut got, next, 0)?;
        r.wait().map(drop)
    })
    .map_err(e("rget"))?;
    let want: Vec<u32> = (0..k as u32).map(|i| i ^ (next as u32 * 0x9e37)).collect();
    if got != want {
        return Err("rget of a created window".into());
    }
    w.fence().map_err(e("fence"))?;
    w.put(&[0xdead_0000 + me as u32], next, k - 1).map_err(e("put"))?;
    w.fence().map_err(e("fence"))?;
    let copies = copied() - before;
    let (back, r) = w.free();
    r.map_err(e("free"))?;
    mine[k - 1] = 0xdead_0000 + ((me + n - 1) % n) as u32;
    if back != mine {
        return Err("free did not hand back the vector with the put".into());
    }
    Ok(copies)
}

/// A shared window (`win_allocate_shared`): every member's part, contiguous in rank
/// order, reachable from every member, and written by puts like any window.
fn shared_window(world: &Comm) -> R<()> {
    let (me, n) = (world.rank(), world.size());
    let w = world.win_allocate_shared(16, 8).map_err(e("win_allocate_shared"))?;
    let (base, _, _) = w.shared_query(0).ok_or("no part of rank 0")?;
    for r in 0..n {
        let (p, bytes, unit) = w.shared_query(r).ok_or("a member's part is missing")?;
        if p as usize != base as usize + 16 * r || bytes != 16 || unit != 8 {
            return Err(format!("rank {r}'s part: {p:?} {bytes} {unit}, rank 0's at {base:?}"));
        }
    }
    w.fence().map_err(e("fence"))?;
    w.put_at(&(me as u64 + 1).to_ne_bytes(), (me + 1) % n, 1).map_err(e("put"))?;
    w.fence().map_err(e("fence"))?;
    let mut got = [0u8; 8];
    w.get_at(&mut got, me, 1).map_err(e("get"))?;
    let want = ((me + n - 1) % n) as u64 + 1;
    if u64::from_ne_bytes(got) != want {
        return Err(format!("shared window: {} want {want}", u64::from_ne_bytes(got)));
    }
    w.free().1.map_err(e("free"))
}

/// A dynamic window: each member attaches 64 bytes, the others address them by the
/// address it published; a put, an accumulate from everyone and a get; a get at an
/// address nobody attached is refused; detach hands the bytes back.
fn dynamic_window(world: &Comm) -> R<()> {
    let (me, n) = (world.rank(), world.size());
    let w = world.win_create_dynamic().map_err(e("win_create_dynamic"))?;
    let at = w.attach(runthrough::win::WinMemory::from_bytes(&[0u8; 64])).map_err(e("attach"))?;
    let mut addrs = vec![0u64; n];
    world.allgather(&[at as u64], &mut addrs).map_err(e("allgather"))?;
    let next = (me + 1) % n;
    w.fence().map_err(e("fence"))?;
    w.put_at(&(me as u64 + 1).to_ne_bytes(), next, addrs[next] as usize + 8).map_err(e("put"))?;
    for (t, &addr) in addrs.iter().enumerate() {
        w.accumulate_at(&(me as u64 + 1).to_ne_bytes(), runthrough::win::Elem::U64, t, addr as usize + 16, AccOp::Sum)
            .map_err(e("accumulate"))?;
    }
    w.fence().map_err(e("fence"))?;
    let mut got = [0u8; 8];
    w.get_at(&mut got, next, addrs[next] as usize + 16).map_err(e("get"))?;
    let sum = (n * (n + 1) / 2) as u64;
    if u64::from_ne_bytes(got) != sum {
        return Err(format!("dynamic window: sum {} want {sum}", u64::from_ne_bytes(got)));
    }
    match w.get_at(&mut got, next, addrs[next] as usize + 64) {
        Err(Error::InvalidArg(_)) => {}
        other => return Err(format!("a get past the attached memory: {other:?}")),
    }
    w.fence().map_err(e("fence"))?;
    let mem = w.detach(at).map_err(e("detach"))?;
    let prev = ((me + n - 1) % n) as u64 + 1;
    if mem.bytes()[8..16] != prev.to_ne_bytes() || mem.bytes()[16..24] != sum.to_ne_bytes() {
        return Err(format!("detached memory: {:?}", &mem.bytes()[..24]));
    }
    w.free().1.map_err(e("free"))
}

/// The request forms: `rput`, `raccumulate` (complete at once) and `rget_accumulate`
/// (waited for in a scope), their values checked.
fn request_forms(world: &Comm) -> R<()> {
    let (me, n) = (world.rank(), world.size());
    let w: Window<u64> = world.win_allocate(2).map_err(e("win_allocate"))?;
    let next = (me + 1) % n;
    w.fence().map_err(e("fence"))?;
    w.rput(&[100 + me as u64], next, 0).map_err(e("rput"))?.wait().map_err(e("rput wait"))?;
    for t in 0..n {
        w.raccumulate(&[me as u64 + 1], t, 1, AccOp::Sum).map_err(e("raccumulate"))?.wait().map_err(e("wait"))?;
    }
    w.fence().map_err(e("fence"))?;
    let mut got = [0u64; 2];
    runthrough::scope(|s| -> Result<(), Error> {
        w.rget_accumulate(s, &[0, 0], &mut got, next, 0, AccOp::NoOp)?.wait().map(drop)
    })
    .map_err(e("rget_accumulate"))?;
    let sum = (n * (n + 1) / 2) as u64;
    if got != [100 + me as u64, sum] {
        return Err(format!("request forms: {got:?} want [{}, {sum}]", 100 + me));
    }
    w.fence().map_err(e("fence"))?;
    w.free().1.map_err(e("free"))
}

fn run(world: &Comm, k: usize) -> R<(usize, usize, u64)> {
    let n = world.size();
    let w: Window<u64> = world.win_allocate(n * k).map_err(e("win_allocate"))?;
    // The members whose memory this process maps (on one node over shared memory).
    let direct = (0..n).filter(|&r| w.shared_query(r).is_some_and(|(_, b, u)| b == n * k * 8 && u == 8)).count();
    let mut cases = 0;
    for mode in ["fence", "lock", "lock_all", "pscw"] {
        put_get(&w, k, mode)?;
        cases += 1;
    }
    w.free().1.map_err(e("free"))?;
    accumulates(world, k)?;
    atomics(world)?;
    let copies = created_and_rget(world, k)?;
    shared_window(world)?;
    dynamic_window(world)?;
    request_forms(world)?;
    Ok((cases + 6, direct, copies))
}

fn main() -> Result<(), Error> {
    let k: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(runthrough::ErrorMode::ErrorsReturn);
    let me = world.rank();
    match run(&world, k) {
        Ok((cases, direct, copies)) => {
            println!("rma_check: rank {me} ok {cases} cases, {k} elements, {direct} direct, {copies} by CMA")
        }
        Err(why) => {
            println!("rma_check: rank {me} FAILED: {why}");
            std::process::exit(1);
        }
    }
    rt.finalize()
}
