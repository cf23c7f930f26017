//! Records from a hostile or broken peer, fed to a real engine over the in-process
//! `SimTransport` (`docs/UNTRUSTED.md`): the engine drops what does not
//! decode or refers to nothing, never panics, and keeps serving the other peers. The
//! header decoder itself is fuzzed in `engine/src/wire/untrusted.rs`; this file covers
//! what the engine does with decoded fields (offsets, lengths, request ids, sequence
//! numbers, agreement and detector payloads).

use std::cell::RefCell;

use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::sim::{SimHub, SimTransport};
use runthrough_engine::transport::{AnyTransport, Event, Transport};
use runthrough_engine::types::RemoteRegion;
use runthrough_engine::wire::{Envelope, Header, MAX_HEADER_BYTES};
use runthrough_engine::{Config, ContextId, Engine, Rank, ReqId, Seq, Tag};
use runthrough_fuzz::Rng;

/// A receive outside any request scope (the tests drive engines by hand).
fn irecv<'a>(
    e: &'a BiasedMutex<Engine>,
    pattern: Pattern,
    peer: Option<Rank>,
    buf: &'a mut [u8],
) -> runthrough_engine::Request<'a> {
    // SAFETY: every receive of these tests is finished or dropped (never leaked) before
    // its buffer is read or freed.
    unsafe { runthrough_engine::handle::irecv_unscoped(e, pattern, peer, buf) }
}

#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

const CTX: ContextId = ContextId(0);

fn job() -> (SimHub, Vec<BiasedMutex<Engine>>) {
    let hub = SimHub::new(2, 1 << 20, 4096);
    let cfg =
        Config { eager_limit: 64, spin_polls: 0, stream_chunk: 1000, rma_min: 0, cma_min: 0, ..Config::default() };
    let world = [Rank(0), Rank(1)];
    let engines = (0..2)
        .map(|r| {
            let mut e = Engine::new(Rank(r), 2, AnyTransport::Sim(hub.endpoint(Rank(r))), cfg);
            e.register_comm(CTX, &world);
            BiasedMutex::new(e)
        })
        .collect();
    (hub, engines)
}

fn record(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut b = [0u8; MAX_HEADER_BYTES];
    let n = h.encode(&mut b);
    let mut v = b[..n].to_vec();
    v.extend_from_slice(payload);
    v
}

fn env(seq: u32, tag: i32) -> Envelope {
    Envelope { ctx: CTX, src: 0, tag: Tag(tag), seq: Seq(seq) }
}

/// The control records rank 1 sent to (fake) rank 0.
fn replies(raw: &mut SimTransport) -> Vec<Header> {
    let mut out = Vec::new();
    raw.poll(64, |ev| {
        if let Event::Received { bytes, .. } = ev {
            out.push(Header::decode(bytes).expect("the engine sends valid headers").0);
        }
    });
    out
}

/// A streamed rendezvous receive at rank 1 for which (fake) rank 0 announced `len`
/// bytes; returns the receive's id from the CTS rank 1 answered with.
fn streaming_receive(e: &[BiasedMutex<Engine>], raw: &mut SimTransport, seq: u32, len: u64) -> ReqId {
    let sreq = ReqId::from_wire(0x77);
    let region = RemoteRegion { addr: 0x1000, len, key: 0 };
    raw.try_send(Rank(1), &record(Header::Rts { env: env(seq, 5), len, sreq, region, pull: None }, &[]), &[]).unwrap();
    e[1].lock().progress();
    e[1].lock().progress();
    match replies(raw).as_slice() {
        [Header::Cts { sreq: s, rreq }] if *s == sreq => *rreq,
        other => panic!("expected one CTS, got {other:?}"),
    }
}

/// Regression: a DATA header whose `offset + payload` reaches 2^64 passed the saturating
/// bounds check against a hostile RTS length of 2^64 - 1 and then overflowed
/// (`offset as usize + len`: a panic in debug, a subtraction underflow and a panic on
/// the slice in release). Now it is a stray record, dropped.
#[test]
fn data_offset_overflow_is_dropped_not_a_panic() {
    let (hub, e) = job();
    let mut raw = hub.endpoint(Rank(0));
    let mut buf = vec![0u8; 256];
    let mut r = irecv(&e[1], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(5)) }, Some(Rank(0)), &mut buf);
    let rreq = streaming_receive(&e, &mut raw, 0, u64::MAX);
    let stray = e[1].lock().stats().stray;
    for offset in [u64::MAX - 1, u64::MAX, u64::MAX - 7] {
        raw.try_send(Rank(1), &record(Header::Data { rreq, offset }, &[0xee; 8]), &[]).unwrap();
        e[1].lock().progress();
    }
    assert_eq!(e[1].lock().stats().stray, stray + 3, "out-of-message data is dropped as stray");
    // Data inside the message still lands.
    raw.try_send(Rank(1), &record(Header::Data { rreq, offset: 4 }, b"real"), &[]).unwrap();
    e[1].lock().progress();
    assert!(r.test().unwrap().is_none(), "2^64 - 1 bytes announced, 4 arrived: still pending");
    // The rest never comes: the sender fails, the receive completes in error.
    hub.kill(Rank(0));
    e[1].lock().fail_peer(Rank(0));
    assert!(r.test().is_err());
    drop(r);
    assert_eq!(&buf[..8], b"\0\0\0\0real");
}

/// Valid records for rank 1's current state (sequence numbers it expects, the id of its
/// streaming receive), from which the fuzz cases are made.
fn seed_record(rng: &mut Rng, seq: u32, rreq: ReqId, out: &mut Vec<u8>) {
    let id = ReqId::from_wire(rng.next_u64());
    let rec = match rng.below(8) {
        0 => {
            let n = rng.below(64);
            let mut p = Vec::new();
            rng.fill(&mut p, n);
            record(Header::Eager { env: env(seq, rng.below(8) as i32), len: n as u32 }, &p)
        }
        1 => {
            let len = rng.extreme();
            record(
                Header::Rts {
                    env: env(seq, 6),
                    len,
                    sreq: id,
                    region: RemoteRegion { addr: 1, len, key: 0 },
                    pull: None,
                },
                &[],
            )
        }
        2 => {
            let mut p = Vec::new();
            let n = rng.below(32);
            rng.fill(&mut p, n);
            record(Header::Data { rreq: if rng.one_in(2) { rreq } else { id }, offset: rng.extreme() }, &p)
        }
        3 => record(Header::Cts { sreq: id, rreq }, &[]),
        4 => record(Header::Fin { sreq: id }, &[]),
        5 => {
            let mut m = Vec::new();
            runthrough_ft::Msg::Notice { failed: rng.extreme() as u32, hops: 1 }.encode(&mut m);
            record(Header::Ft, &m)
        }
        6 => {
            let mut m = Vec::new();
            let failed = if rng.one_in(2) { vec![] } else { vec![rng.extreme() as u32] };
            let signals = if rng.one_in(2) { vec![] } else { vec![(rng.extreme(), rng.extreme() as i32)] };
            let value = runthrough_ft::Value { flag: 1, max: rng.extreme() as u32, failed, signals };
            runthrough_ft::AgreeMsg::Commit { instance: rng.extreme(), value }.encode(&mut m);
            record(Header::Agree, &m)
        }
        _ => record(Header::Eager { env: env(seq.wrapping_add(rng.extreme() as u32), 1), len: 0 }, &[]),
    };
    out.extend_from_slice(&rec);
}

/// The `make fuzz` pass of the engine's handling of decoded records: every case is one
/// record from (fake) rank 0, then one progress of rank 1. Rank 1 is rebuilt every 4096
/// cases so queues of buffered garbage stay small. At the end a real message from rank 0
/// still arrives intact.
#[test]
fn fuzz_engine_record_handling() {
    struct Live {
        _hub: SimHub,
        e: Vec<BiasedMutex<Engine>>,
        raw: SimTransport,
        seq: u32,
        rreq: ReqId,
    }
    let live: RefCell<Option<Live>> = RefCell::new(None);
    let mut n = 0u64;
    runthrough_fuzz::run(
        "engine record handling (engine/src/engine.rs on_record over SimTransport)",
        |rng, out| {
            if n.is_multiple_of(4096) {
                let (hub, e) = job();
                let mut raw = hub.endpoint(Rank(0));
                // A receive streaming a long message, so DATA records meet a live request.
                let buf: &'static mut [u8] = Box::leak(vec![0u8; 128].into_boxed_slice());
                let r = irecv(&e[1], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(5)) }, Some(Rank(0)), buf);
                std::mem::forget(r);
                let rreq = streaming_receive(&e, &mut raw, 0, 1 << 20);
                *live.borrow_mut() = Some(Live { _hub: hub, e, raw, seq: 1, rreq });
            }
            n += 1;
            let l = live.borrow();
            let l = l.as_ref().unwrap();
            seed_record(rng, l.seq, l.rreq, out);
        },
        |b, _| {
            let mut l = live.borrow_mut();
            let l = l.as_mut().unwrap();
            let before = l.e[1].lock().stats();
            l.raw.try_send(Rank(1), b, &[]).unwrap();
            runthrough_fuzz::metered(16 << 20, || l.e[1].lock().progress());
            let after = l.e[1].lock().stats();
            // Each Eager/RTS delivered in order (the expected one and any held ones it
            // released) advances the sequence number; none matches a posted receive.
            l.seq = l.seq.wrapping_add((after.unexpected - before.unexpected) as u32);
            let _ = replies(&mut l.raw);
            after.malformed == before.malformed && after.stray == before.stray
        },
    );
    // Rank 1 still serves rank 0 after all that: a real message arrives intact.
    let mut l = live.borrow_mut().take().unwrap();
    let msg = record(Header::Eager { env: env(l.seq, 9), len: 5 }, b"alive");
    l.raw.try_send(Rank(1), &msg, &[]).unwrap();
    let mut out = [0u8; 5];
    let mut r = irecv(&l.e[1], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(9)) }, Some(Rank(0)), &mut out);
    l.e[1].lock().progress();
    let st = r.test().unwrap().expect("the message after the garbage arrives");
    drop(r);
    assert_eq!((st.len, &out), (5, b"alive"));
}
