//! Engine tests over the in-process `SimTransport`: several engines in one thread, each
//! progressed explicitly, so every interleaving is deterministic (helpers in
//! `common/mod.rs`; the shared-memory collective tests are `sim_shm.rs`).

mod common;
use common::*;

#[test]
fn eager_expected_and_unexpected() {
    let (_hub, e) = job(2, 64, 256);
    let a = pattern_bytes(100, 1);
    // Unexpected: sent before the receive is posted.
    let mut s = send(&e, 0, 1, 5, &a);
    finish(&e, &mut s).unwrap();
    pump(&e, 3);
    let mut out = vec![0u8; 100];
    let mut r = recv(&e, 1, Some(0), Some(5), &mut out);
    let st = finish(&e, &mut r).unwrap();
    drop(r);
    assert_eq!(st, Status { source: 0, tag: 5, len: 100 });
    assert_eq!(out, a);
    assert_eq!(e[1].lock().stats().unexpected, 1);
    // Expected: the receive is posted first.
    let mut out = vec![0u8; 100];
    let mut r = recv(&e, 1, None, None, &mut out);
    let mut s = send(&e, 0, 1, 6, &a[..10]);
    let st = finish(&e, &mut r).unwrap();
    finish(&e, &mut s).unwrap();
    drop(r);
    assert_eq!(st, Status { source: 0, tag: 6, len: 10 });
    assert_eq!(&out[..10], &a[..10]);
}

#[test]
fn truncation_is_reported_and_fills_what_fits() {
    let (_hub, e) = job(2, 64, 256);
    for len in [200usize, 3000] {
        // 200: eager; 3000: streamed rendezvous.
        let a = pattern_bytes(len, 9);
        let mut out = vec![0u8; 50];
        let mut r = recv(&e, 1, Some(0), Some(1), &mut out);
        let mut s = send(&e, 0, 1, 1, &a);
        assert_eq!(finish(&e, &mut r), Err(Error::Truncate { posted: 50, arrived: len }));
        finish(&e, &mut s).unwrap();
        drop(r);
        assert_eq!(&out[..], &a[..50]);
    }
}

#[test]
fn streamed_rendezvous_under_back_pressure() {
    // Tiny queues force Busy on nearly every fragment.
    let (_hub, e) = job(2, 2, 64);
    for len in [65usize, 999, 1000, 1001, 50_000] {
        let a = pattern_bytes(len, len as u8);
        let mut out = vec![0u8; len];
        let mut s = send(&e, 0, 1, 3, &a);
        pump(&e, 2);
        let mut r = recv(&e, 1, Some(0), Some(3), &mut out);
        let st = finish(&e, &mut r).unwrap();
        finish(&e, &mut s).unwrap();
        drop(r);
        assert_eq!(st.len, len);
        assert_eq!(out, a, "len {len}");
    }
    assert!(e[0].lock().stats().streamed >= 5);
}

#[test]
fn non_overtaking_across_eager_and_rendezvous_with_busy_transport() {
    let (_hub, e) = job(3, 3, 64);
    let msgs: Vec<Vec<u8>> = (0..40).map(|i| pattern_bytes((i * 37) % 300, i as u8)).collect();
    let mut sends: Vec<Request<'_>> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        sends.push(send(&e, 0, 2, (i % 3) as i32, m));
        sends.push(send(&e, 1, 2, 0, m));
    }
    let mut bufs: Vec<Vec<u8>> = (0..80).map(|_| vec![0u8; 300]).collect();
    let mut got: Vec<(usize, usize)> = Vec::new();
    for b in bufs.iter_mut() {
        let mut r = recv(&e, 2, None, None, b);
        let st = finish(&e, &mut r).unwrap();
        got.push((st.source, st.len));
    }
    for mut s in sends {
        finish(&e, &mut s).unwrap();
    }
    for src in 0..2 {
        let lens: Vec<usize> = got.iter().filter(|g| g.0 == src).map(|g| g.1).collect();
        let want: Vec<usize> = msgs.iter().map(Vec::len).collect();
        assert_eq!(lens, want, "messages from {src} arrived in send order");
    }
    for (i, b) in bufs.iter().enumerate() {
        let (src, len) = got[i];
        let n = got[..i].iter().filter(|g| g.0 == src).count();
        assert_eq!(&b[..len], &msgs[n][..], "content of message {n} from {src}");
    }
}

#[test]
fn dropping_a_pending_receive_cancels_it() {
    let (_hub, e) = job(2, 8, 256);
    {
        let mut out = vec![0u8; 8];
        let r = recv(&e, 1, Some(0), Some(4), &mut out);
        drop(r);
    }
    let a = pattern_bytes(8, 3);
    let mut s = send(&e, 0, 1, 4, &a);
    finish(&e, &mut s).unwrap();
    let mut out = vec![0u8; 8];
    let mut r = recv(&e, 1, Some(0), Some(4), &mut out);
    finish(&e, &mut r).unwrap();
    drop(r);
    assert_eq!(out, a, "the message went to the live receive, not the dropped one");
    assert_eq!(e[1].lock().live_requests(), 0);
}

#[test]
fn failed_peer_completes_requests_with_rank_fail_stop() {
    let (hub, e) = job(3, 8, 64);
    // A message from 0 already buffered at 2 before 0 fails (R11).
    let early = pattern_bytes(20, 7);
    let mut s = send(&e, 0, 2, 1, &early);
    finish(&e, &mut s).unwrap();
    pump(&e, 2);
    let mut pending_buf = vec![0u8; 20];
    let mut pending = recv(&e, 1, Some(0), None, &mut pending_buf);
    let big = pattern_bytes(5000, 1);
    let mut rndv = send(&e, 1, 0, 2, &big);
    pump(&e, 2);
    hub.kill(Rank(0));
    for eng in &e[1..] {
        eng.lock().fail_peer(Rank(0));
    }
    assert_eq!(finish(&e[1..], &mut pending), Err(Error::RankFailStop { rank: 0 }));
    assert_eq!(finish(&e[1..], &mut rndv), Err(Error::RankFailStop { rank: 0 }));
    let mut out = vec![0u8; 20];
    let mut r = recv(&e, 2, Some(0), None, &mut out);
    finish(&e[1..], &mut r).unwrap();
    drop(r);
    assert_eq!(out, early, "buffered message from the failed rank is still delivered");
    // New operations with the failed rank complete in error, at completion (R15).
    let mut out = vec![0u8; 4];
    let mut r = recv(&e, 2, Some(0), None, &mut out);
    assert_eq!(finish(&e[1..], &mut r), Err(Error::RankFailStop { rank: 0 }));
    let mut s = send(&e, 2, 0, 0, &early);
    assert_eq!(finish(&e[1..], &mut s), Err(Error::RankFailStop { rank: 0 }));
    // Survivors still talk.
    let mut out = vec![0u8; 20];
    let mut r = recv(&e, 2, Some(1), None, &mut out);
    let mut s = send(&e, 1, 2, 9, &early);
    finish(&e[1..], &mut s).unwrap();
    assert_eq!(finish(&e[1..], &mut r).unwrap().tag, 9);
}

#[test]
fn malformed_records_are_dropped_not_fatal() {
    let (hub, e) = job(2, 8, 64);
    let mut raw = hub.endpoint(Rank(0));
    raw.try_send(Rank(1), &[1, 1, 0, 0, 9], &[]).unwrap();
    raw.try_send(Rank(1), &[77, 1, 0, 0], &[]).unwrap();
    raw.try_send(Rank(1), &[4, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0], &[]).unwrap();
    pump(&e, 3);
    let st = e[1].lock().stats();
    assert_eq!(st.malformed, 2);
    assert_eq!(st.stray, 1, "a FIN for no request is dropped");
    let a = pattern_bytes(10, 2);
    let mut out = vec![0u8; 10];
    let mut r = recv(&e, 1, Some(0), None, &mut out);
    let mut s = send(&e, 0, 1, 0, &a);
    finish(&e, &mut s).unwrap();
    finish(&e, &mut r).unwrap();
    drop(r);
    assert_eq!(out, a);
}

#[test]
fn probe_sees_unexpected_without_consuming() {
    let (_hub, e) = job(2, 8, 64);
    let a = pattern_bytes(3000, 2);
    let mut s = send(&e, 0, 1, 8, &a);
    pump(&e, 3);
    let st = e[1].lock().probe_unexpected(&pat(None, Some(8)));
    assert_eq!(st, Some(Status { source: 0, tag: 8, len: 3000 }));
    assert_eq!(e[1].lock().probe_unexpected(&pat(None, Some(9))), None);
    let mut out = vec![0u8; 3000];
    let mut r = recv(&e, 1, None, Some(8), &mut out);
    finish(&e, &mut r).unwrap();
    finish(&e, &mut s).unwrap();
    drop(r);
    assert_eq!(out, a);
}

fn kill(hub: &SimHub, e: &[BiasedMutex<Engine>], victim: u32) {
    hub.kill(Rank(victim));
    for (i, eng) in e.iter().enumerate() {
        if i as u32 != victim {
            eng.lock().fail_peer(Rank(victim));
        }
    }
}

#[test]
fn r12_failed_source_poisons_later_receives() {
    let (hub, e) = job(3, 8, 64);
    // Rank 0 sends two messages to rank 2 and dies; both sit in 2's buffer.
    let (m1, m2) = (pattern_bytes(10, 1), pattern_bytes(10, 2));
    let mut s1 = send(&e, 0, 2, 1, &m1);
    let mut s2 = send(&e, 0, 2, 2, &m2);
    finish(&e, &mut s1).unwrap();
    finish(&e, &mut s2).unwrap();
    pump(&e, 3);
    kill(&hub, &e, 0);
    let live = &e[1..];
    // A receive from 0 that matches nothing buffered fails ...
    let mut out = vec![0u8; 10];
    let mut r = recv(&e, 2, Some(0), Some(3), &mut out);
    assert_eq!(finish(live, &mut r), Err(Error::RankFailStop { rank: 0 }));
    drop(r);
    // ... and from then on, a receive that would match 0 fails although m1 is buffered.
    let mut r = recv(&e, 2, Some(0), Some(1), &mut out);
    assert_eq!(finish(live, &mut r), Err(Error::RankFailStop { rank: 0 }));
    drop(r);
    assert_eq!(out, vec![0u8; 10], "the buffered message was not delivered");
}

#[test]
fn r11_buffered_message_of_failed_rank_delivered_before_any_failed_receive() {
    let (hub, e) = job(3, 8, 64);
    let m1 = pattern_bytes(10, 1);
    let mut s1 = send(&e, 0, 2, 1, &m1);
    finish(&e, &mut s1).unwrap();
    pump(&e, 3);
    kill(&hub, &e, 0);
    let mut out = vec![0u8; 10];
    let mut r = recv(&e, 2, Some(0), Some(1), &mut out);
    finish(&e[1..], &mut r).unwrap();
    drop(r);
    assert_eq!(out, m1);
}

#[test]
fn r13_failure_disables_wildcards_on_every_comm_containing_the_rank() {
    let (hub, e) = job(4, 8, 64);
    // Rank 3 has a pending wildcard receive on the world and one on SUB (ranks 1..).
    let mut wbuf = vec![0u8; 10];
    let mut sbuf = vec![0u8; 10];
    let mut w = recv(&e, 3, None, None, &mut wbuf);
    let mut sub = unsafe { irecv_unscoped(&e[3], Pattern { ctx: SUB, src: None, tag: None }, None, &mut sbuf) };
    pump(&e, 2);
    // Rank 0 (not in SUB) fails: only the world's wildcard fails.
    kill(&hub, &e, 0);
    let live = &e[1..];
    assert_eq!(finish(live, &mut w), Err(Error::RankFailStop { rank: 0 }));
    drop(w);
    assert!(sub.test().unwrap().is_none(), "SUB does not contain rank 0");
    assert!(!e[3].lock().any_source_enabled(CTX));
    assert!(e[3].lock().any_source_enabled(SUB));
    // A message from a live sender buffered before the wildcard is posted is delivered
    // first; then new wildcards fail at once.
    let m = pattern_bytes(10, 5);
    let mut s = send(&e, 1, 3, 7, &m);
    finish(live, &mut s).unwrap();
    pump(live, 3);
    let mut out = vec![0u8; 10];
    let mut r = recv(&e, 3, None, None, &mut out);
    assert_eq!(finish(live, &mut r).unwrap().source, 1);
    drop(r);
    assert_eq!(out, m);
    let mut r = recv(&e, 3, None, Some(7), &mut out);
    assert_eq!(finish(live, &mut r), Err(Error::RankFailStop { rank: 0 }));
    drop(r);
    // Specific receives from live ranks still work.
    let mut s = send(&e, 1, 3, 8, &m);
    let mut r = recv(&e, 3, Some(1), Some(8), &mut out);
    finish(live, &mut s).unwrap();
    finish(live, &mut r).unwrap();
    drop(r);
    // SUB's wildcard is still pending and gets a message from SUB rank 0 (world 1).
    let mut s =
        unsafe { isend_unscoped(&e[1], SendTarget { ctx: SUB, src: 0, dest: 2, peer: Rank(3), tag: Tag(4) }, &m) };
    finish(live, &mut s).unwrap();
    assert_eq!(finish(live, &mut sub).unwrap().source, 0);
}

#[test]
fn r14_reenable_any_source_returns_failed_group_and_next_failure_disables_again() {
    let (hub, e) = job(4, 8, 64);
    kill(&hub, &e, 0);
    let live = &e[1..];
    assert_eq!(e[3].lock().reenable_any_source(CTX), vec![0]);
    let m = pattern_bytes(4, 1);
    let mut out = vec![0u8; 4];
    let mut r = recv(&e, 3, None, None, &mut out);
    let mut s = send(&e, 2, 3, 1, &m);
    finish(live, &mut s).unwrap();
    assert_eq!(finish(live, &mut r).unwrap().source, 2, "wildcards work again");
    drop(r);
    // A pending wildcard is failed by the next failure, which disables them again.
    let mut r = recv(&e, 3, None, None, &mut out);
    kill(&hub, &e, 1);
    let live = &e[2..];
    assert_eq!(finish(live, &mut r), Err(Error::RankFailStop { rank: 1 }));
    drop(r);
    assert_eq!(e[3].lock().failed_in(CTX), vec![0, 1]);
    assert_eq!(e[3].lock().failed_in(SUB), vec![0], "SUB rank 0 is world rank 1");
    assert_eq!(e[3].lock().reenable_any_source(CTX), vec![0, 1]);
}

#[test]
fn departed_peer_fails_pending_operations_but_is_not_a_failure() {
    let (hub, e) = job(3, 8, 64);
    let m = pattern_bytes(10, 4);
    let mut s = send(&e, 0, 2, 1, &m);
    finish(&e, &mut s).unwrap();
    let mut out = vec![0u8; 10];
    let mut pending = recv(&e, 1, Some(0), Some(5), &mut out);
    let mut wbuf = vec![0u8; 10];
    let mut wild = recv(&e, 2, None, Some(6), &mut wbuf);
    hub.kill(Rank(0));
    for eng in &e[1..] {
        eng.lock().peer_departed(Rank(0));
    }
    let live = &e[1..];
    assert_eq!(finish(live, &mut pending), Err(Error::RankFailStop { rank: 0 }), "it can never complete");
    drop(pending);
    assert!(wild.test().unwrap().is_none(), "wildcards stay enabled: a departure is no failure");
    assert!(e[2].lock().any_source_enabled(CTX));
    assert!(e[2].lock().failed_in(CTX).is_empty());
    let mut r = recv(&e, 2, Some(0), Some(1), &mut out);
    finish(live, &mut r).unwrap();
    drop(r);
    assert_eq!(out, m, "what it sent before leaving is delivered");
    let mut s = send(&e, 1, 2, 6, &m);
    finish(live, &mut s).unwrap();
    assert_eq!(finish(live, &mut wild).unwrap().source, 1);
}

/// The departure handshake (R6, `engine::note`): a finalizing rank's `Bye` travels behind
/// its last messages; every peer answers and records a departure — no failure — before
/// the rank may go, so evidence its exit leaves later (a reset connection) changes nothing.
#[test]
fn departure_handshake_is_answered_by_every_peer_behind_the_last_messages() {
    let (hub, e) = job(3, 2, 64);
    let msgs: Vec<Vec<u8>> = (0..4).map(|i| pattern_bytes(40, i)).collect();
    let mut sends: Vec<Request<'_>> = msgs.iter().map(|m| send(&e, 0, 2, 1, m)).collect();
    let mut never = vec![0u8; 8];
    let mut pending = recv(&e, 1, Some(0), Some(5), &mut never);
    e[0].lock().begin_departure();
    assert_eq!(e[0].lock().departure_pending(), 2, "both peers are waited for");
    for _ in 0..10_000 {
        pump(&e, 1);
        if e[0].lock().departure_pending() == 0 {
            break;
        }
    }
    assert_eq!(e[0].lock().departure_pending(), 0, "every peer answered");
    for s in &mut sends {
        finish(&e[..1], s).unwrap();
    }
    drop(sends);
    for (r, eng) in e.iter().enumerate().skip(1) {
        let eng = eng.lock();
        assert!(eng.is_failed(Rank(0)), "rank {r} recorded the departure");
        assert!(eng.failed_in(CTX).is_empty(), "rank {r}: a departure is no failure");
        assert!(eng.any_source_enabled(CTX), "rank {r}: wildcards stay enabled");
    }
    let live = &e[1..];
    assert_eq!(finish(live, &mut pending), Err(Error::RankFailStop { rank: 0 }), "it can never complete");
    drop(pending);
    for m in &msgs {
        let mut got = vec![0u8; 40];
        let mut r = recv(&e, 2, Some(0), Some(1), &mut got);
        finish(live, &mut r).unwrap();
        drop(r);
        assert_eq!(&got, m, "what it sent before the Bye is delivered, in order");
    }
    // The process goes: evidence of the exit arriving now is about a departed rank.
    hub.kill(Rank(0));
    let mut s = send(&e, 1, 0, 1, &msgs[0]);
    assert_eq!(finish(live, &mut s), Err(Error::RankFailStop { rank: 0 }));
    drop(s);
    pump(live, 10);
    assert!(e[1].lock().failed_in(CTX).is_empty() && e[2].lock().failed_in(CTX).is_empty());
}

/// R29 revoke over sim engines: the notice floods to every member; a posted receive
/// fails with `Revoked`; a rendezvous the revoking receiver held unmatched is answered
/// with `Discard`, so its sender completes in error (never while the peer could still
/// pull it); messages on the revoked communicator are dropped, other communicators and
/// agreements go on.
#[test]
fn revoke_floods_fails_pending_work_and_discards_held_rendezvous() {
    let (_hub, e) = job(3, 8, 64);
    let big = pattern_bytes(1000, 3);
    let mut rdv = send(&e, 0, 1, 4, &big); // held unexpected at rank 1
    pump(&e, 20);
    assert!(rdv.test().unwrap().is_none(), "a rendezvous waits for its receiver");
    let mut b2 = vec![0u8; 8];
    let mut posted = recv(&e, 2, Some(0), Some(9), &mut b2);
    e[1].lock().revoke(CTX);
    pump(&e, 20);
    for r in 0..3 {
        assert!(e[r as usize].lock().is_revoked(CTX), "rank {r} learnt of the revocation");
        assert!(!e[r as usize].lock().is_revoked(SUB), "rank {r}: the other communicator is untouched");
    }
    assert_eq!(finish(&e, &mut rdv), Err(Error::Revoked), "the held rendezvous was discarded");
    assert_eq!(finish(&e, &mut posted), Err(Error::Revoked));
    drop((rdv, posted));
    let mut s = send(&e, 2, 0, 1, &big[..10]);
    assert_eq!(finish(&e, &mut s), Err(Error::Revoked), "later sends fail at once");
    drop(s);
    let mut b = vec![0u8; 10];
    let mut r = recv(&e, 0, Some(2), Some(1), &mut b);
    assert_eq!(finish(&e, &mut r), Err(Error::Revoked), "later receives too");
}

/// R27 over sim engines: two signals that cross (the second arrives after every member
/// entered the first resolution) are resolved in two rounds; every member gets each
/// list once (pending receive, then next operation), the same lists everywhere, and the
/// communicator works normally afterwards.
/// A program that creates a communicator, agrees on it and frees it, over and over
/// (dup, signal, free): every agreement decides the same everywhere, and each engine holds
/// a bounded number of decided instances of freed communicators (it held every one, and
/// each agreement message paid for all of them: bench/RESULTS.md §10b).
#[test]
fn agreements_of_freed_communicators_are_bounded() {
    let (_hub, e) = job(3, 8, 64);
    let world: Vec<Rank> = (0..3).map(Rank).collect();
    let rounds = 3 * FREED_DECIDED_KEEP as u32;
    for k in 0..rounds {
        let ctx = ContextId(1000 + 2 * k);
        let mut inst = Vec::new();
        for (r, eng) in e.iter().enumerate() {
            let mut eng = eng.lock();
            eng.register_comm(ctx, &world);
            inst.push(eng.agree_start(ctx, &world, 1, 0b111 ^ (1 << r)).unwrap());
        }
        let mut decided = vec![None; 3];
        for _ in 0..2000 {
            pump(&e, 1);
            for (r, eng) in e.iter().enumerate() {
                decided[r] = decided[r].clone().or_else(|| eng.lock().agree_decision(inst[r]));
            }
            if decided.iter().all(Option::is_some) {
                break;
            }
        }
        for d in &decided {
            assert_eq!(d.as_ref().map(|d| d.flag), Some(0), "round {k}: {decided:?}");
        }
        for eng in &e {
            eng.lock().free_comm(ctx);
        }
    }
    pump(&e, 5);
    for (r, eng) in e.iter().enumerate() {
        let held = eng.lock().agreements_held();
        assert!(held <= FREED_DECIDED_KEEP + 1, "rank {r} holds {held} agreements after {rounds} freed communicators");
    }
}

#[test]
fn crossed_signals_resolve_in_two_rounds_with_the_same_lists_everywhere() {
    let (_hub, e) = job(3, 8, 64);
    let mut b0 = vec![0u8; 8];
    let mut pending0 = recv(&e, 0, Some(2), Some(1), &mut b0);
    let id1 = e[1].lock().signal_error(CTX, 666).unwrap();
    pump(&e, 3);
    let id2 = e[2].lock().signal_error(CTX, 667).unwrap();
    let mut lists = vec![Vec::new(); 3];
    for _ in 0..2000 {
        pump(&e, 1);
        if e[1].lock().signal_resolved(CTX, id1).is_some() && e[2].lock().signal_resolved(CTX, id2).is_some() {
            break;
        }
    }
    assert!(e[1].lock().signal_resolved(CTX, id1).is_some(), "signal 1 resolved");
    assert!(e[2].lock().signal_resolved(CTX, id2).is_some(), "signal 2 resolved");
    pump(&e, 50);
    match finish(&e, &mut pending0) {
        Err(Error::Propagated(l)) => lists[0].push(l),
        other => panic!("pending receive got {other:?}"),
    }
    drop(pending0);
    for (r, eng) in e.iter().enumerate() {
        assert!(!eng.lock().is_resolving(CTX), "rank {r} still resolving");
    }
    let l0 = &lists[0][0];
    assert!(l0.contains(&(1, 666)), "{l0:?}");
    if !l0.contains(&(2, 667)) {
        // Crossed: the second round is armed for rank 0's next operation.
        assert_eq!(e[0].lock().take_armed(CTX), Some(vec![(2, 667)]));
    }
    // Afterwards the communicator works.
    let m = pattern_bytes(8, 1);
    let mut s = send(&e, 2, 0, 3, &m);
    let mut got = vec![0u8; 8];
    let mut r = recv(&e, 0, Some(2), Some(3), &mut got);
    finish(&e, &mut r).unwrap();
    finish(&e, &mut s).unwrap();
    drop((r, s));
    assert_eq!(got, m);
}

#[test]
fn failure_already_recognised_by_validate_keeps_collectives_enabled() {
    // The former R17 race: rank 2 learnt of rank 3's failure from the validate's decision
    // before its own detector reported it. When the detector does, the communicator must
    // stay collectively active (the others carry on with it) and a collective receive in
    // progress must not fail; a new failure still deactivates it.
    let (_hub, e) = job(4, 8, 64);
    for eng in &e[..3] {
        eng.lock().validate_commit(CTX, &[3]);
    }
    let coll = CTX.coll();
    let view = e[2].lock().coll_begin(CTX).unwrap();
    assert_eq!(&view.alive[..], &[0, 1, 2]);
    let mut buf = [0u8; 8];
    let mut r = unsafe {
        irecv_unscoped(&e[2], Pattern { ctx: coll, src: Some(0), tag: Some(view.tag) }, Some(Rank(0)), &mut buf)
    };
    e[2].lock().fail_peer(Rank(3));
    assert!(e[2].lock().collectives_enabled(CTX), "a recognised failure does not deactivate again");
    assert!(r.test().unwrap().is_none(), "the collective receive from a live member still waits");
    assert!(!e[2].lock().any_source_enabled(CTX), "R13 still applies when the failure becomes known");
    e[2].lock().fail_peer(Rank(1));
    assert!(!e[2].lock().collectives_enabled(CTX));
    assert_eq!(r.test(), Err(Error::RankFailStop { rank: 1 }));
}

#[test]
fn nonblocking_collectives_over_sim_engines() {
    use runthrough_engine::icoll::{ICollRequest, Kind, Members};
    let (_hub, e) = job(5, 64, 64);
    let world: Vec<Rank> = (0..5).map(Rank).collect();
    let sum = |acc: &mut [u8], x: &[u8]| acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.wrapping_add(*b));
    // Allreduce of 100 bytes (two eager chunks) with every member's value rank + 1.
    let mut bufs: Vec<Vec<u8>> = (0..5).map(|r| vec![r as u8 + 1; 100]).collect();
    let mut reqs: Vec<ICollRequest<'_>> = bufs
        .iter_mut()
        .enumerate()
        .map(|(r, b)| {
            icoll(
                Members { eng: &e[r], ctx: CTX, group: &world, me: r as u32 },
                Kind::Allreduce,
                b,
                Some(Box::new(sum)),
            )
        })
        .collect();
    let mut done = [false; 5];
    for _ in 0..10_000 {
        for (i, r) in reqs.iter_mut().enumerate() {
            done[i] |= r.test().unwrap();
        }
        if done.iter().all(|d| *d) {
            break;
        }
    }
    assert!(done.iter().all(|d| *d));
    drop(reqs);
    assert!(bufs.iter().all(|b| b.iter().all(|&x| x == 15)));
    // A failure while an ibcast from rank 0 runs: members not yet served fail (R17/R21).
    let mut bufs: Vec<Vec<u8>> = (0..5).map(|r| vec![if r == 0 { 9 } else { 0 }; 8]).collect();
    let mut reqs: Vec<ICollRequest<'_>> = bufs
        .iter_mut()
        .enumerate()
        .skip(1)
        .map(|(r, b)| {
            icoll(Members { eng: &e[r], ctx: CTX, group: &world, me: r as u32 }, Kind::Bcast { root: 0 }, b, None)
        })
        .collect();
    for eng in &e[1..] {
        eng.lock().fail_peer(Rank(0));
    }
    for r in &mut reqs {
        assert_eq!(r.test(), Err(Error::RankFailStop { rank: 0 }));
    }
    drop(reqs);
    // R21: on the now inactive communicator a nonblocking collective reports the failure
    // at completion, not at the call.
    let mut b = [0u8; 0];
    let mut r = icoll(Members { eng: &e[1], ctx: CTX, group: &world, me: 1 }, Kind::Barrier, &mut b, None);
    assert_eq!(r.test(), Err(Error::RankFailStop { rank: 0 }));
}
