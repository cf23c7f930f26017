//! Cancelling sends (MPI_Cancel, the `CancelSend`/`CancelAck` notices) over the
//! in-process `SimTransport`: several engines in one thread, progressed explicitly.

use runthrough_engine::handle::{irecv_unscoped, isend_unscoped_seq};
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::sim::SimHub;
use runthrough_engine::transport::AnyTransport;
use runthrough_engine::SendTarget;
use runthrough_engine::{Config, ContextId, Engine, Rank, Request, Tag};

const CTX: ContextId = ContextId(0);
/// Messages above this many bytes take the rendezvous.
const EAGER: usize = 256;

fn job(n: u32) -> (SimHub, Vec<BiasedMutex<Engine>>) {
    let hub = SimHub::new(n, 64, 4096);
    let cfg = Config {
        eager_limit: EAGER,
        spin_polls: 0,
        stream_chunk: 1000,
        rma_min: 0,
        cma_min: 0,
        cma_choose: false,
        oversubscribed: false,
    };
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

// Every request below is finished or dropped before its buffer is touched again (the
// contract of the unscoped calls).

fn send<'a>(
    e: &'a [BiasedMutex<Engine>],
    from: u32,
    to: u32,
    tag: i32,
    buf: &'a [u8],
    sync: bool,
) -> (Request<'a>, u32) {
    // SAFETY: see above.
    let (r, seq) = unsafe {
        isend_unscoped_seq(
            &e[from as usize],
            SendTarget { ctx: CTX, src: from, dest: to, peer: Rank(to), tag: Tag(tag) },
            buf,
            sync,
        )
    };
    (r, seq.expect("a send to a live peer takes a sequence number"))
}

fn recv<'a>(e: &'a [BiasedMutex<Engine>], at: u32, src: u32, tag: i32, buf: &'a mut [u8]) -> Request<'a> {
    let p = Pattern { ctx: CTX, src: Some(src), tag: Some(Tag(tag)) };
    // SAFETY: as in `send`.
    unsafe { irecv_unscoped(&e[at as usize], p, Some(Rank(src)), buf) }
}

fn pump(engines: &[BiasedMutex<Engine>], rounds: usize) {
    for _ in 0..rounds {
        for e in engines {
            e.lock().progress();
        }
    }
}

/// Progresses every engine until the sender has the receiver's answer to the cancel of
/// `r`'s message `seq` to `to`.
fn cancel(engines: &[BiasedMutex<Engine>], r: &mut Request<'_>, to: u32, seq: u32) -> bool {
    r.cancel_send(Rank(to), seq);
    for _ in 0..10_000 {
        pump(engines, 1);
        if let Some(c) = r.send_cancel_outcome(Rank(to), seq) {
            return c;
        }
    }
    panic!("the cancel was never answered");
}

fn bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed)).collect()
}

fn probe(e: &BiasedMutex<Engine>, src: u32, tag: i32) -> bool {
    e.lock().probe_unexpected(&Pattern { ctx: CTX, src: Some(src), tag: Some(Tag(tag)) }).is_some()
}

#[test]
fn an_unmatched_eager_send_is_withdrawn_and_later_messages_still_arrive() {
    let (_hub, e) = job(2);
    let a = bytes(40, 1);
    let b = bytes(40, 2);
    let (mut s, seq) = send(&e, 0, 1, 7, &a, false);
    pump(&e, 3);
    assert!(probe(&e[1], 0, 7), "the message waits unmatched at the receiver");
    assert!(cancel(&e, &mut s, 1, seq), "an unmatched eager message is withdrawn");
    assert!(!probe(&e[1], 0, 7), "the withdrawn message is gone from the receiver");
    assert!(s.test().is_ok());
    drop(s);
    // The next message with the same envelope is received, and in order after it another.
    let (mut s2, _) = send(&e, 0, 1, 7, &b, false);
    let mut out = vec![0u8; 40];
    let mut r = recv(&e, 1, 0, 7, &mut out);
    pump(&e, 5);
    assert!(r.test().unwrap().is_some());
    assert!(s2.test().is_ok());
    drop((r, s2));
    assert_eq!(out, b, "the receive got the message sent after the cancelled one");
}

#[test]
fn an_unmatched_rendezvous_or_synchronous_send_is_withdrawn_and_completes() {
    let (_hub, e) = job(2);
    for (len, sync) in [(5000, false), (8, true)] {
        let a = bytes(len, 3);
        let (mut s, seq) = send(&e, 0, 1, 9, &a, sync);
        pump(&e, 3);
        assert!(!s.is_complete(), "a rendezvous waits for its receiver");
        assert!(cancel(&e, &mut s, 1, seq), "an unmatched rendezvous is withdrawn ({len} bytes, sync {sync})");
        assert!(s.is_complete(), "the withdrawn send completed");
        assert!(s.test().unwrap().is_some());
        assert!(!probe(&e[1], 0, 9));
        drop(s);
    }
    assert_eq!(e[0].lock().live_requests(), 0);
}

#[test]
fn a_matched_send_is_not_withdrawn() {
    let (_hub, e) = job(2);
    for len in [40, 5000] {
        let a = bytes(len, 4);
        let mut out = vec![0u8; len];
        let mut r = recv(&e, 1, 0, 11, &mut out);
        let (mut s, seq) = send(&e, 0, 1, 11, &a, false);
        pump(&e, 5);
        assert!(!cancel(&e, &mut s, 1, seq), "a received message is not withdrawn ({len} bytes)");
        pump(&e, 5);
        assert!(r.test().unwrap().is_some());
        assert!(s.test().unwrap().is_some());
        drop((r, s));
        assert_eq!(out, a);
    }
}

#[test]
fn a_cancel_to_self_is_answered() {
    let (_hub, e) = job(1);
    let a = bytes(40, 5);
    let (mut s, seq) = send(&e, 0, 0, 3, &a, false);
    pump(&e, 3);
    assert!(cancel(&e, &mut s, 0, seq));
    assert!(!probe(&e[0], 0, 3));
    drop(s);
}
