//! One-sided communication over the in-process simulation: the protocol of
//! `runthrough_engine::rma` with every engine progressed by hand, so each interleaving
//! is deterministic. Windows on the world communicator of 3 or 4 engines; records of at
//! most 1000 data bytes (the test config's stream chunk), so long operations travel in
//! several records.

mod common;

use std::sync::Arc;

use common::*;
use runthrough_engine::handle::rma::{control_request, fetch_in, Fetch, Target};
use runthrough_engine::handle::scope;
use runthrough_engine::rma::mem::WinMemory;
use runthrough_engine::rma::{AccOp, Elem};

fn windows(n: u32, bytes: usize) -> (SimHub, Vec<BiasedMutex<Engine>>) {
    let (hub, e) = job(n, 64, 256);
    let group: Arc<[Rank]> = (0..n).map(Rank).collect();
    for x in &e {
        x.lock().win_register(CTX, group.clone(), WinMemory::zeroed(bytes)).unwrap();
    }
    (hub, e)
}

fn local(e: &[BiasedMutex<Engine>], r: usize) -> Vec<u8> {
    e[r].lock().win_local(CTX, |b| b.to_vec()).unwrap()
}

/// A get-like operation from engine `from` into a fresh buffer of `len` bytes, finished
/// by progressing `e`.
fn fetch(
    e: &[BiasedMutex<Engine>],
    from: usize,
    at: Target,
    what: Fetch<'_>,
    len: usize,
) -> (Result<Status, Error>, Vec<u8>) {
    let mut buf = vec![0u8; len];
    let r = scope(|s| {
        let mut r = fetch_in(s, &e[from], at, what, &mut buf);
        finish(e, &mut r)
    });
    (r, buf)
}

fn flush(e: &[BiasedMutex<Engine>], from: usize, to: u32) -> Result<Status, Error> {
    let mut r = control_request(&e[from], |x| x.rma_flush(CTX, to));
    finish(e, &mut r)
}

#[test]
fn puts_land_in_issue_order_and_a_flush_completes_them() {
    let (_hub, e) = windows(3, 4096);
    let data = pattern_bytes(2500, 7);
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 100 }, &data).unwrap();
    // A later put over part of the first wins: applied in issue order.
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 100 }, &[9; 10]).unwrap();
    flush(&e, 1, 0).unwrap();
    let m = local(&e, 0);
    assert_eq!(&m[100..110], &[9; 10]);
    assert_eq!(&m[110..2600], &data[10..]);
    assert!(m[..100].iter().chain(&m[2600..]).all(|&b| b == 0), "nothing outside the put's range");
    // A put to itself is applied in the call.
    e[2].lock().rma_put(Target { ctx: CTX, rank: 2, disp: 0 }, &[5; 4]).unwrap();
    assert_eq!(&local(&e, 2)[..4], &[5; 4]);
    // Outside the target's window: refused at the origin when it is its own window.
    assert!(e[0].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 4090 }, &[1; 8]).is_err());
}

#[test]
fn gets_of_several_records_and_of_oneself() {
    let (_hub, e) = windows(3, 4096);
    let data = pattern_bytes(3000, 3);
    e[2].lock().win_local(CTX, |b| b[500..3500].copy_from_slice(&data)).unwrap();
    let at = Target { ctx: CTX, rank: 2, disp: 500 };
    let (r, buf) = fetch(&e, 0, at, Fetch::Get, 3000);
    assert_eq!(r.unwrap().len, 3000);
    assert_eq!(buf, data);
    let (r, mine) = fetch(&e, 2, at, Fetch::Get, 10);
    r.unwrap();
    assert_eq!(mine, data[..10]);
    // Past the end of the target's window: the target refuses, the get errs.
    let (r, _) = fetch(&e, 0, Target { ctx: CTX, rank: 2, disp: 4092 }, Fetch::Get, 8);
    assert!(matches!(r, Err(Error::InvalidArg(_))), "{r:?}");
}

#[test]
fn accumulates_from_every_origin_at_once_sum_element_by_element() {
    let (_hub, e) = windows(4, 8 * 300);
    let add: Vec<u8> = (0..300u64).flat_map(|i| (i + 1).to_ne_bytes()).collect();
    for round in 0..5 {
        for x in &e {
            x.lock().rma_acc(Target { ctx: CTX, rank: 3, disp: 0 }, AccOp::Sum, Elem::U64, &add).unwrap();
        }
        if round % 2 == 0 {
            pump(&e, 3);
        }
    }
    for o in 0..4 {
        flush(&e, o, 3).unwrap();
    }
    let m = local(&e, 3);
    for (i, c) in m.chunks_exact(8).enumerate() {
        assert_eq!(u64::from_ne_bytes(c.try_into().unwrap()), 20 * (i as u64 + 1), "element {i}");
    }
}

#[test]
fn fetch_and_op_and_compare_and_swap() {
    let (_hub, e) = windows(3, 64);
    e[0].lock().win_local(CTX, |b| b[8..16].copy_from_slice(&10i64.to_ne_bytes())).unwrap();
    let i64_of = |v: Vec<u8>| i64::from_ne_bytes(v.try_into().unwrap());
    let at = Target { ctx: CTX, rank: 0, disp: 8 };
    let one = 5i64.to_ne_bytes();
    let (r, old) = fetch(&e, 1, at, Fetch::Acc { op: AccOp::Sum, elem: Elem::I64, origin: &one }, 8);
    r.unwrap();
    assert_eq!(i64_of(old), 10);
    let (cmp, new) = (15i64.to_ne_bytes(), 99i64.to_ne_bytes());
    let (r, was) = fetch(&e, 2, at, Fetch::Cas { elem: Elem::I64, compare: &cmp, new: &new }, 8);
    r.unwrap();
    assert_eq!(i64_of(was), 15);
    // A compare that fails leaves the target alone.
    let (r, again) = fetch(&e, 1, at, Fetch::Cas { elem: Elem::I64, compare: &cmp, new: &one }, 8);
    r.unwrap();
    assert_eq!(i64_of(again), 99);
    // NoOp: a read.
    let (r, read) = fetch(&e, 2, at, Fetch::Acc { op: AccOp::NoOp, elem: Elem::I64, origin: &[] }, 8);
    r.unwrap();
    assert_eq!(i64_of(read), 99);
}

#[test]
fn exclusive_locks_queue_and_shared_ones_share() {
    let (_hub, e) = windows(4, 16);
    let mut a = control_request(&e[1], |x| x.rma_lock(CTX, 0, true));
    finish(&e, &mut a).unwrap();
    let mut b = control_request(&e[2], |x| x.rma_lock(CTX, 0, false));
    let mut c = control_request(&e[3], |x| x.rma_lock(CTX, 0, false));
    pump(&e, 20);
    assert!(!b.is_complete() && !c.is_complete(), "shared locks wait for the exclusive holder");
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 0 }, &[1; 4]).unwrap();
    let mut u = control_request(&e[1], |x| x.rma_unlock(CTX, 0));
    finish(&e, &mut u).unwrap();
    assert_eq!(&local(&e, 0)[..4], &[1; 4], "the holder's put is applied when its unlock completes");
    finish(&e, &mut b).unwrap();
    finish(&e, &mut c).unwrap();
    // The target itself waits for the shared holders too.
    let mut own = control_request(&e[0], |x| x.rma_lock(CTX, 0, true));
    pump(&e, 20);
    assert!(!own.is_complete());
    for o in [2usize, 3] {
        let mut u = control_request(&e[o], |x| x.rma_unlock(CTX, 0));
        finish(&e, &mut u).unwrap();
    }
    finish(&e, &mut own).unwrap();
    let mut u = control_request(&e[0], |x| x.rma_unlock(CTX, 0));
    finish(&e, &mut u).unwrap();
    // An unlock of a lock not held errs.
    let mut bad = control_request(&e[2], |x| x.rma_unlock(CTX, 0));
    assert!(finish(&e, &mut bad).is_err());
}

#[test]
fn a_dead_holder_s_lock_is_released() {
    let (hub, e) = windows(3, 16);
    let mut a = control_request(&e[1], |x| x.rma_lock(CTX, 0, true));
    finish(&e, &mut a).unwrap();
    let mut b = control_request(&e[2], |x| x.rma_lock(CTX, 0, true));
    pump(&e, 20);
    assert!(!b.is_complete());
    hub.kill(Rank(1));
    e[0].lock().fail_peer(Rank(1));
    finish(&e, &mut b).unwrap();
}

#[test]
fn a_failed_target_fails_what_waits_for_it_and_what_comes_after() {
    let (hub, e) = windows(3, 4096);
    let mut buf = vec![0u8; 2000];
    scope(|s| {
        let mut r = fetch_in(s, &e[0], Target { ctx: CTX, rank: 2, disp: 0 }, Fetch::Get, &mut buf);
        let mut f = control_request(&e[0], |x| x.rma_flush(CTX, 2));
        hub.kill(Rank(2));
        e[0].lock().fail_peer(Rank(2));
        assert_eq!(finish(&e[..2], &mut r), Err(Error::RankFailStop { rank: 2 }));
        assert_eq!(finish(&e[..2], &mut f), Err(Error::RankFailStop { rank: 2 }));
    });
    assert_eq!(e[0].lock().rma_put(Target { ctx: CTX, rank: 2, disp: 0 }, &[1]), Err(Error::RankFailStop { rank: 2 }));
    let mut l = control_request(&e[0], |x| x.rma_lock(CTX, 2, false));
    assert_eq!(finish(&e[..2], &mut l), Err(Error::RankFailStop { rank: 2 }));
}

#[test]
fn nothing_is_written_once_the_writer_is_known_failed() {
    let (_hub, e) = windows(3, 64);
    // What arrived before the failure is known is applied (the drain of `fail_peer`,
    // R11); what comes after is dropped (R35): a rank declared failed that still runs.
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 0 }, &[7; 8]).unwrap();
    pump(&e, 5);
    e[0].lock().fail_peer(Rank(1));
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 8 }, &[8; 8]).unwrap();
    e[1].lock().rma_acc(Target { ctx: CTX, rank: 0, disp: 0 }, AccOp::Sum, Elem::U8, &[1; 8]).unwrap();
    pump(&e, 10);
    let m = local(&e, 0);
    assert_eq!(&m[..8], &[7; 8]);
    assert!(m[8..].iter().all(|&b| b == 0), "{m:?}");
}

#[test]
fn post_and_complete_notices_are_counted() {
    let (_hub, e) = windows(3, 8);
    e[0].lock().rma_post(CTX, 1).unwrap();
    pump(&e, 5);
    assert!(e[1].lock().rma_take_post(CTX, 0));
    assert!(!e[1].lock().rma_take_post(CTX, 0), "taken once");
    e[1].lock().rma_put(Target { ctx: CTX, rank: 0, disp: 0 }, &[3; 8]).unwrap();
    e[1].lock().rma_complete(CTX, 0).unwrap();
    pump(&e, 5);
    assert!(e[0].lock().rma_take_complete(CTX, 1));
    assert_eq!(local(&e, 0), vec![3; 8], "a complete arrives behind the operations before it");
}
