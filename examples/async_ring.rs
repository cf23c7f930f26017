//! Requests are futures: a ring driven by `.await` under a small single-threaded
//! executor written here (no async runtime: `std::task::Wake` and thread parking).
//!
//! `rtrun -n N async_ring [ring [ROUNDS] | kill]`
//!
//! - `ring` (default, 10 rounds): in every round each rank awaits, together (a join of
//!   the two futures), a receive from its left neighbour and a send to its right one,
//!   and checks the value; then one round with owned requests (`irecv_owned` /
//!   `isend_owned` awaited together) and an `iallreduce` and an `ibarrier` awaited as
//!   futures. Each rank prints `async_ring: rank R ok rounds=K polls=P`.
//! - `kill` (N ≥ 2): every rank but the last awaits a receive from the last rank, which
//!   SIGKILLs itself after a while; the pending `.await` must resolve to
//!   `RankFailStop` naming it (woken by the progress thread, since the executor parks
//!   until woken). Survivors print `async_ring: rank R failstop victim=V polls=P`.
//!
//! The executor parks the thread whenever the future is pending and polls again only
//! when woken, so every `.await` here completes only because the runtime woke it.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::thread::Thread;
use std::time::Duration;

use runthrough::{Comm, Error, ErrorMode, Op};

const KILL_TAG: i32 = 7;
const OWNED_TAG: i32 = 1 << 20;

fn fail(what: &str) -> ! {
    eprintln!("async_ring: {what}");
    std::process::exit(3);
}

/// Wakes the thread blocked in [`block_on`].
struct Unpark {
    thread: Thread,
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.thread.unpark();
    }
}

/// Runs `fut` to completion on this thread, parking it while the future is pending;
/// returns the output and how many times the future was polled.
fn block_on<F: Future>(fut: F) -> (F::Output, u64) {
    let mut fut = pin!(fut);
    let unpark = Arc::new(Unpark { thread: std::thread::current(), woken: AtomicBool::new(false) });
    let waker = Waker::from(unpark.clone());
    let mut cx = Context::from_waker(&waker);
    let mut polls = 0;
    loop {
        polls += 1;
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return (out, polls);
        }
        while !unpark.woken.swap(false, Ordering::Acquire) {
            std::thread::park();
        }
    }
}

/// Awaits two futures concurrently.
async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(|cx| {
        if ra.is_none() {
            if let Poll::Ready(v) = a.as_mut().poll(cx) {
                ra = Some(v);
            }
        }
        if rb.is_none() {
            if let Poll::Ready(v) = b.as_mut().poll(cx) {
                rb = Some(v);
            }
        }
        match (ra.take(), rb.take()) {
            (Some(x), Some(y)) => Poll::Ready((x, y)),
            (x, y) => {
                (ra, rb) = (x, y);
                Poll::Pending
            }
        }
    })
    .await
}

fn value(rank: usize, round: usize) -> u64 {
    (rank as u64) << 32 | round as u64
}

fn ring(world: &Comm, rounds: usize) -> Result<u64, Error> {
    let (me, n) = (world.rank(), world.size());
    let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
    let mut polls = 0;
    for round in 0..rounds {
        let out = [value(me, round)];
        let mut got = [0u64];
        let (res, p) = runthrough::scope(|s| {
            block_on(async {
                let r = world.irecv(s, &mut got, prev, round as i32)?;
                let w = world.isend(s, &out, next, round as i32)?;
                let (r, w) = join(r, w).await;
                w?;
                r
            })
        });
        polls += p;
        let st = res?;
        if got[0] != value(prev, round) || st.source != prev || st.len != 8 {
            fail(&format!("rank {me} round {round}: got {:#x} from {} ({st:?})", got[0], st.source));
        }
    }
    // Owned requests are futures too: the buffers come back with the outcomes.
    let (res, p) = block_on(async {
        let r = world.irecv_owned(vec![0u32; 64], prev, OWNED_TAG)?;
        let w = world.isend_owned(vec![me as u32; 64], next, OWNED_TAG)?;
        Ok::<_, Error>(join(r, w).await)
    });
    polls += p;
    let ((rbuf, rres), (sbuf, sres)) = res?;
    sres?;
    rres?;
    if rbuf != vec![prev as u32; 64] || sbuf != vec![me as u32; 64] {
        fail(&format!("rank {me}: owned buffers wrong: {:?} / {:?}", &rbuf[..2], &sbuf[..2]));
    }
    // Collective requests: an allreduce and a barrier awaited as futures.
    let mut sum = [0u64];
    let (res, p) = runthrough::scope(|s| {
        block_on(async {
            world.iallreduce(s, &[me as u64 + 1], &mut sum, Op::Sum)?.await?;
            world.ibarrier(s)?.await
        })
    });
    polls += p;
    res?;
    let want = (n * (n + 1) / 2) as u64;
    if sum[0] != want {
        fail(&format!("rank {me}: iallreduce gave {} (want {want})", sum[0]));
    }
    Ok(polls)
}

fn kill(world: &Comm) -> Result<(), Error> {
    let (me, n) = (world.rank(), world.size());
    let victim = n - 1;
    if n < 2 {
        fail("kill needs at least 2 ranks");
    }
    match world.barrier() {
        Ok(()) => {}
        // Over a network transport a fast victim may fail a survivor's barrier (R17).
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        Err(e) => return Err(e),
    }
    if me == victim {
        // Give the survivors time to park on their pending futures.
        std::thread::sleep(Duration::from_millis(300));
        let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
        std::thread::sleep(Duration::from_secs(10));
        unreachable!("SIGKILL did not arrive");
    }
    let mut buf = [0u64];
    let (res, polls) = runthrough::scope(|s| block_on(async { world.irecv(s, &mut buf, victim, KILL_TAG)?.await }));
    match res {
        Err(Error::RankFailStop { rank }) if rank as usize == victim => {}
        other => fail(&format!("rank {me}: awaited receive from the victim: expected RankFailStop, got {other:?}")),
    }
    if polls < 2 {
        fail(&format!("rank {me}: the receive never was pending ({polls} polls)"));
    }
    println!("async_ring: rank {me} failstop victim={victim} polls={polls}");
    Ok(())
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "ring".into());
    let rt = runthrough::init()?;
    let world = rt.world();
    match mode.as_str() {
        "ring" => {
            let rounds = std::env::args().nth(2).and_then(|a| a.parse().ok()).unwrap_or(10);
            let polls = ring(&world, rounds)?;
            println!("async_ring: rank {} ok rounds={rounds} polls={polls}", world.rank());
        }
        "kill" => {
            world.set_error_mode(ErrorMode::ErrorsReturn);
            kill(&world)?;
        }
        other => fail(&format!("unknown mode {other} (ring [ROUNDS] | kill)")),
    }
    rt.finalize()
}
