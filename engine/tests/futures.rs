//! Requests as futures, over the in-process `SimTransport` (engines progressed
//! explicitly, as in `sim.rs`): a pending poll registers the task's waker with the
//! request; whoever next finds the outcome set (`Engine::take_wakers`, called by the
//! runtime's progress thread and by every poll) hands the waker back to be woken — on a
//! message's arrival and on a peer's failure alike.

use runthrough_engine::SendTarget;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use runthrough_engine::handle::{irecv, irecv_unscoped, isend_unscoped, scope};
use runthrough_engine::icoll::{ICollRequest, Kind, Members};
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::sim::SimHub;
use runthrough_engine::transport::AnyTransport;
use runthrough_engine::{Config, ContextId, Engine, Error, Rank, Request, Tag};

const CTX: ContextId = ContextId(0);

fn job(n: u32) -> (SimHub, Vec<BiasedMutex<Engine>>) {
    let hub = SimHub::new(n, 64, 4096);
    let cfg =
        Config { eager_limit: 64, spin_polls: 0, stream_chunk: 1000, rma_min: 0, cma_min: 0, ..Config::default() };
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let engines = (0..n)
        .map(|r| {
            let mut e = Engine::new(Rank(r), n, AnyTransport::Sim(hub.endpoint(Rank(r))), cfg);
            e.register_comm(CTX, &world);
            BiasedMutex::new(e)
        })
        .collect();
    (hub, engines)
}

fn pat(src: u32, tag: i32) -> Pattern {
    Pattern { ctx: CTX, src: Some(src), tag: Some(Tag(tag)) }
}

// Every unscoped request below is finished or dropped (never leaked) before its buffer
// is used again: the contract of `isend_unscoped` / `irecv_unscoped`.

fn send<'a>(e: &'a [BiasedMutex<Engine>], from: u32, to: u32, tag: i32, buf: &'a [u8]) -> Request<'a> {
    // SAFETY: see above.
    unsafe {
        isend_unscoped(
            &e[from as usize],
            SendTarget { ctx: CTX, src: from, dest: to, peer: Rank(to), tag: Tag(tag) },
            buf,
        )
    }
}

fn recv<'a>(e: &'a [BiasedMutex<Engine>], at: u32, src: u32, tag: i32, buf: &'a mut [u8]) -> Request<'a> {
    // SAFETY: as in `send`.
    unsafe { irecv_unscoped(&e[at as usize], pat(src, tag), Some(Rank(src)), buf) }
}

/// A waker that counts its wakes.
#[derive(Default)]
struct Count(AtomicUsize);

impl Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counter() -> (Arc<Count>, Waker) {
    let c = Arc::new(Count::default());
    let w = Waker::from(c.clone());
    (c, w)
}

fn wakes(c: &Count) -> usize {
    c.0.load(Ordering::SeqCst)
}

fn poll<F: Future + Unpin>(f: &mut F, w: &Waker) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(w))
}

/// What the progress thread does each tick: progress, then wake the completed futures.
fn tick(e: &BiasedMutex<Engine>) -> usize {
    let mut wakers = Vec::new();
    {
        let mut g = e.lock();
        g.progress();
        g.take_wakers(&mut wakers);
    }
    let n = wakers.len();
    wakers.into_iter().for_each(Waker::wake);
    n
}

#[test]
fn waker_of_a_pending_receive_is_woken_when_the_message_arrives() {
    let (_hub, e) = job(2);
    let (c, w) = counter();
    let mut buf = [0u8; 8];
    let mut r = recv(&e, 1, 0, 5, &mut buf);
    assert!(poll(&mut r, &w).is_pending());
    // Polled again with the same waker: registered once.
    assert!(poll(&mut r, &w).is_pending());
    assert_eq!(tick(&e[1]), 0, "nothing arrived: nobody to wake");
    assert_eq!(wakes(&c), 0);
    let data = *b"futures!";
    let mut s = send(&e, 0, 1, 5, &data);
    assert!(poll(&mut s, &w).is_ready(), "an eager send completes at once");
    assert_eq!(tick(&e[1]), 1, "the arrival completes the receive and hands back its waker");
    assert_eq!(wakes(&c), 1);
    assert_eq!(tick(&e[1]), 0, "woken once");
    match poll(&mut r, &w) {
        Poll::Ready(Ok(st)) => assert_eq!((st.source, st.tag, st.len), (0, 5, 8)),
        other => panic!("expected the receive's status, got {other:?}"),
    }
    assert!(!r.is_active());
    drop(r);
    assert_eq!(buf, data);
    // Polled after it returned: the outcome is gone.
    assert!(matches!(poll(&mut s, &w), Poll::Ready(Err(Error::ApiMisuse(_)))));
}

#[test]
fn waker_of_a_pending_receive_is_woken_by_a_peer_failure() {
    let (hub, e) = job(3);
    let (c, w) = counter();
    let mut buf = [0u8; 8];
    let mut r = recv(&e, 1, 2, 0, &mut buf);
    assert!(poll(&mut r, &w).is_pending());
    assert_eq!(tick(&e[1]), 0);
    hub.kill(Rank(2));
    e[1].lock().fail_peer(Rank(2));
    assert_eq!(tick(&e[1]), 1, "the failure completes the receive in error and hands back its waker");
    assert_eq!(wakes(&c), 1);
    assert!(matches!(poll(&mut r, &w), Poll::Ready(Err(Error::RankFailStop { rank: 2 }))));
}

#[test]
fn a_poll_wakes_the_other_futures_its_progress_completed() {
    let (_hub, e) = job(2);
    let ((ca, wa), (cb, wb)) = (counter(), counter());
    let (mut ba, mut bb) = ([0u8; 4], [0u8; 4]);
    let mut a = recv(&e, 1, 0, 1, &mut ba);
    let mut b = recv(&e, 1, 0, 2, &mut bb);
    assert!(poll(&mut a, &wa).is_pending());
    assert!(poll(&mut b, &wb).is_pending());
    let (da, db) = ([1u8; 4], [2u8; 4]);
    let (sa, sb) = (send(&e, 0, 1, 1, &da), send(&e, 0, 1, 2, &db));
    e[0].lock().progress();
    // Polling `a` progresses rank 1, which completes both receives: `b` is woken by it.
    assert!(matches!(poll(&mut a, &wa), Poll::Ready(Ok(_))));
    assert_eq!((wakes(&ca), wakes(&cb)), (0, 1));
    assert!(matches!(poll(&mut b, &wb), Poll::Ready(Ok(_))));
    drop((a, b, sa, sb));
    assert_eq!((ba, bb), (da, db));
}

#[test]
fn collective_futures_complete_when_polled_only_on_wakes() {
    let (hub, e) = job(4);
    let world: Vec<Rank> = (0..4).map(Rank).collect();
    let sum = |acc: &mut [u8], x: &[u8]| acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.wrapping_add(*b));
    let mut bufs: Vec<Vec<u8>> = (0..4).map(|r| vec![r as u8 + 1; 100]).collect();
    let mut reqs: Vec<ICollRequest<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(r, b)| {
            let on = Members { eng: &e[r], ctx: CTX, group: &world, me: r as u32 };
            // SAFETY: every collective is finished or dropped before its buffer is read.
            unsafe { ICollRequest::start_unscoped(on, Kind::Allreduce, b, None, Some(Box::new(sum))) }.unwrap()
        })
        .collect();
    let counters: Vec<(Arc<Count>, Waker)> = (0..4).map(|_| counter()).collect();
    let outs = drive(&e, &mut reqs, &counters);
    assert!(outs.iter().all(|o| *o == Some(Ok(()))), "a collective future was never woken: {outs:?}");
    drop(reqs);
    assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 10)));

    // A barrier pending at ranks 0..2 while rank 3 never joins: its failure wakes them
    // with the error.
    let mut empty: Vec<[u8; 0]> = vec![[]; 3];
    let mut reqs: Vec<ICollRequest<'_>> = empty
        .iter_mut()
        .enumerate()
        .map(|(r, b)| {
            let on = Members { eng: &e[r], ctx: CTX, group: &world, me: r as u32 };
            // SAFETY: as above.
            unsafe { ICollRequest::start_unscoped(on, Kind::Barrier, b, None, None) }.unwrap()
        })
        .collect();
    for _ in 0..3 {
        for (i, r) in reqs.iter_mut().enumerate() {
            assert!(poll(r, &counters[i].1).is_pending(), "the barrier cannot complete without rank 3");
        }
        for eng in &e[..3] {
            tick(eng);
        }
    }
    hub.kill(Rank(3));
    let before: Vec<usize> = counters.iter().map(|c| wakes(&c.0)).collect();
    for eng in &e[..3] {
        eng.lock().fail_peer(Rank(3));
        tick(eng);
    }
    // From now on each future is polled only when woken.
    let outs = drive(&e[..3], &mut reqs, &counters);
    for (i, out) in outs.iter().enumerate() {
        assert_eq!(*out, Some(Err(Error::RankFailStop { rank: 3 })), "rank {i}");
        assert!(wakes(&counters[i].0) > before[i], "rank {i}: completed without a wake");
    }
}

/// Polls every future once, then, until all are ready (bounded), ticks the engines and
/// polls a future only when its waker was woken since its last poll.
fn drive<F: Future + Unpin>(
    e: &[BiasedMutex<Engine>],
    reqs: &mut [F],
    counters: &[(Arc<Count>, Waker)],
) -> Vec<Option<F::Output>> {
    let mut outs: Vec<Option<F::Output>> = reqs.iter().map(|_| None).collect();
    let mut seen: Vec<usize> = counters.iter().map(|c| wakes(&c.0)).collect();
    for (i, r) in reqs.iter_mut().enumerate() {
        if let Poll::Ready(o) = poll(r, &counters[i].1) {
            outs[i] = Some(o);
        }
    }
    for _ in 0..10_000 {
        if outs.iter().all(Option::is_some) {
            break;
        }
        for eng in e {
            tick(eng);
        }
        for (i, r) in reqs.iter_mut().enumerate() {
            let now = wakes(&counters[i].0);
            if outs[i].is_some() || now == seen[i] {
                continue;
            }
            seen[i] = now;
            if let Poll::Ready(o) = poll(r, &counters[i].1) {
                outs[i] = Some(o);
            }
        }
    }
    outs
}

#[test]
fn a_leaked_future_is_settled_by_its_scope_and_its_waker_released() {
    let (_hub, e) = job(2);
    let (c, w) = counter();
    let mut buf = [0u8; 8];
    scope(|s| {
        let mut r = irecv(s, &e[1], pat(0, 9), Some(Rank(0)), &mut buf);
        assert!(poll(&mut r, &w).is_pending());
        std::mem::forget(r);
    });
    assert_eq!(e[1].lock().live_requests(), 0, "the scope cancelled the leaked receive");
    assert_eq!(Arc::strong_count(&c), 2, "the registered waker went with the request");
    let mut wakers = Vec::new();
    e[1].lock().take_wakers(&mut wakers);
    assert!(wakers.is_empty());
    // A message for it now finds no receive (it stays unexpected); the buffer is intact.
    let data = [7u8; 8];
    drop(send(&e, 0, 1, 9, &data));
    tick(&e[1]);
    assert_eq!(buf, [0u8; 8]);
    assert_eq!(wakes(&c), 0);
}
