//! Collectives the engine owns (`Engine::start_schedule`) over sim engines: every plan
//! moves the right bytes to the right place, advanced only by progress calls (no test or
//! wait of the collective itself); a recognised failure is skipped (R20) and a root that
//! failed is reported; a member failing mid-collective ends it in `RankFailStop` at the
//! others (R17, R21); collectives at reserved tags match by reservation order whatever
//! order they start in (persistent collectives, MPI-4.1 6.13).

mod common;
use common::*;

use std::ops::Range;
use std::sync::Arc;

use runthrough_engine::{Over, Plan, Scheduled, SendCombine};

const N: usize = 5;

fn over(r: usize, n: usize) -> Over {
    Over { ctx: CTX, group: (0..n as u32).map(Rank).collect::<Arc<[Rank]>>(), me: r as u32 }
}

fn add() -> Option<SendCombine> {
    Some(Box::new(|acc: &mut [u8], x: &[u8]| acc.iter_mut().zip(x).for_each(|(a, b)| *a = a.wrapping_add(*b))))
}

/// Starts `plan(r)` over `arena(r)` at each rank in `ranks`; progresses every engine
/// until all ended; returns each one's outcome and arena.
fn run(
    e: &[BiasedMutex<Engine>],
    ranks: &[usize],
    plan: impl Fn(usize) -> Plan,
    arena: impl Fn(usize) -> Vec<u8>,
    reduces: bool,
) -> Vec<(Result<(), Error>, Vec<u8>)> {
    let outs: Vec<Arc<Scheduled>> = ranks
        .iter()
        .map(|&r| {
            let op = if reduces { add() } else { None };
            e[r].lock().start_schedule(&over(r, e.len()), &plan(r), arena(r), op, None).expect("started")
        })
        .collect();
    for _ in 0..100_000 {
        if outs.iter().all(|o| o.is_done()) {
            break;
        }
        pump(e, 1);
    }
    outs.iter().map(|o| o.take().expect("ended")).collect()
}

fn blocks(lens: &[usize]) -> Vec<Range<usize>> {
    let mut at = 0;
    lens.iter()
        .map(|l| {
            let r = at..at + l;
            at += l;
            r
        })
        .collect()
}

#[test]
fn every_plan_moves_the_right_bytes() {
    let (_hub, e) = job(N as u32, 64, 64);
    let all: Vec<usize> = (0..N).collect();
    // Broadcast of 100 bytes (two eager chunks) from rank 3.
    let data = pattern_bytes(100, 7);
    let out = run(
        &e,
        &all,
        |_| Plan::Bcast { root: 3, len: 100 },
        |r| if r == 3 { data.clone() } else { vec![0; 100] },
        false,
    );
    for (r, (res, a)) in out.iter().enumerate() {
        assert!(res.is_ok() && a[..100] == data[..], "bcast at {r}: {res:?}");
    }
    // Reduce to rank 2 and allreduce of 70 bytes: each byte the sum of (rank + 1).
    let total = (1..=N as u8).sum::<u8>();
    let out = run(&e, &all, |_| Plan::Reduce { root: 2, len: 70 }, |r| vec![r as u8 + 1; 70], true);
    assert!(out[2].0.is_ok() && out[2].1[..70].iter().all(|&x| x == total), "reduce at the root");
    let out = run(&e, &all, |_| Plan::Allreduce { len: 70 }, |r| vec![r as u8 + 1; 70], true);
    assert!(out.iter().all(|(res, a)| res.is_ok() && a[..70].iter().all(|&x| x == total)), "allreduce");
    // Gatherv to rank 1: rank j's block is j + 1 bytes of value 10 j.
    let b = blocks(&[1, 2, 3, 4, 5]);
    let out = run(
        &e,
        &all,
        |_| Plan::Gatherv { root: 1, blocks: b.clone() },
        |r| {
            let mut a = vec![0u8; 15];
            a[b[r].clone()].fill(10 * r as u8);
            a
        },
        false,
    );
    for (j, bj) in b.iter().enumerate() {
        assert!(out[1].1[bj.clone()].iter().all(|&x| x == 10 * j as u8), "gatherv block {j}: {:?}", out[1].1);
    }
    // Scatterv from rank 4 and allgatherv: every block lands where its rank says.
    let out = run(
        &e,
        &all,
        |_| Plan::Scatterv { root: 4, blocks: b.clone() },
        |r| if r == 4 { (0..15).map(|i| i as u8).collect() } else { vec![0; 15] },
        false,
    );
    for (r, (_, a)) in out.iter().enumerate() {
        let want: Vec<u8> = b[r].clone().map(|i| i as u8).collect();
        assert_eq!(a[b[r].clone()], want[..], "scatterv at {r}");
    }
    let out = run(
        &e,
        &all,
        |_| Plan::Allgatherv { blocks: b.clone() },
        |r| {
            let mut a = vec![0u8; 15];
            a[b[r].clone()].fill(r as u8 + 100);
            a
        },
        false,
    );
    for (r, (_, a)) in out.iter().enumerate() {
        for (j, bj) in b.iter().enumerate() {
            assert!(a[bj.clone()].iter().all(|&x| x == j as u8 + 100), "allgatherv at {r} block {j}");
        }
    }
    // Alltoallv: what i sends j is (i + j) % 4 + 1 bytes of value 16 i + j (80 bytes: a
    // two-chunk block for none, but many pairs in one round).
    let len = |i: usize, j: usize| (i + j) % 4 + 1;
    let out = run(
        &e,
        &all,
        |r| {
            let s = blocks(&(0..N).map(|j| len(r, j)).collect::<Vec<_>>());
            let end = s.last().unwrap().end;
            let rv: Vec<Range<usize>> = blocks(&(0..N).map(|j| len(j, r)).collect::<Vec<_>>())
                .into_iter()
                .map(|x| x.start + end..x.end + end)
                .collect();
            Plan::Alltoallv { sends: s, recvs: rv }
        },
        |r| {
            let mut a = Vec::new();
            for j in 0..N {
                a.extend(std::iter::repeat_n(16 * r as u8 + j as u8, len(r, j)));
            }
            let n = a.len();
            a.resize(n + (0..N).map(|j| len(j, r)).sum::<usize>(), 0);
            // Its own block is the caller's to copy.
            let own: Vec<u8> = std::iter::repeat_n(16 * r as u8 + r as u8, len(r, r)).collect();
            let at = n + (0..r).map(|j| len(j, r)).sum::<usize>();
            a[at..at + own.len()].copy_from_slice(&own);
            a
        },
        false,
    );
    for (r, (res, a)) in out.iter().enumerate() {
        assert!(res.is_ok());
        let mut at = (0..N).map(|j| len(r, j)).sum::<usize>();
        for i in 0..N {
            assert!(a[at..at + len(i, r)].iter().all(|&x| x == 16 * i as u8 + r as u8), "alltoallv at {r} from {i}");
            at += len(i, r);
        }
    }
    // Reduce-scatter of 5 blocks of 8 bytes: block r of the sum at rank r.
    let rs = blocks(&[8; N]);
    let out = run(&e, &all, |_| Plan::ReduceScatter { len: 40, blocks: rs.clone() }, |r| vec![r as u8 + 1; 40], true);
    for (r, (_, a)) in out.iter().enumerate() {
        assert!(a[rs[r].clone()].iter().all(|&x| x == total), "reduce-scatter at {r}");
    }
    // Scans: inclusive and exclusive prefix sums of (rank + 1).
    let out = run(&e, &all, |_| Plan::Scan { len: 9 }, |r| vec![r as u8 + 1; 9], true);
    for (r, (_, a)) in out.iter().enumerate() {
        let want = (1..=r as u8 + 1).sum::<u8>();
        assert!(a[..9].iter().all(|&x| x == want), "scan at {r}: {:?}", &a[..9]);
    }
    let out = run(&e, &all, |_| Plan::Exscan { len: 9 }, |r| [vec![r as u8 + 1; 9], vec![0; 9]].concat(), true);
    for (r, (_, a)) in out.iter().enumerate().skip(1) {
        let want = (1..=r as u8).sum::<u8>();
        assert!(a[9..18].iter().all(|&x| x == want), "exscan at {r}: {:?}", &a[9..18]);
    }
}

#[test]
fn a_recognised_failure_is_skipped_and_a_failed_root_reported() {
    let (_hub, e) = job(N as u32, 64, 64);
    for eng in &e {
        let mut g = eng.lock();
        if g.rank() != Rank(2) {
            g.fail_peer(Rank(2));
            g.validate_commit(CTX, &[2]);
        }
    }
    let live = [0usize, 1, 3, 4];
    let b = blocks(&[3; N]);
    let out = run(
        &e,
        &live,
        |_| Plan::Allgatherv { blocks: b.clone() },
        |r| {
            let mut a = vec![0xee; 15];
            a[b[r].clone()].fill(r as u8);
            a
        },
        false,
    );
    for (k, (res, a)) in out.iter().enumerate() {
        assert!(res.is_ok(), "{res:?}");
        for j in live {
            assert!(a[b[j].clone()].iter().all(|&x| x == j as u8), "at {} block {j}", live[k]);
        }
        assert!(a[b[2].clone()].iter().all(|&x| x == 0xee), "the failed member's block is left alone");
    }
    let out = run(&e, &live, |_| Plan::Bcast { root: 2, len: 4 }, |_| vec![0; 4], false);
    assert!(out.iter().all(|(res, _)| *res == Err(Error::RankFailStop { rank: 2 })), "{out:?}");
}

#[test]
fn a_member_failing_mid_collective_ends_it_in_error_at_the_others() {
    let (_hub, e) = job(N as u32, 64, 64);
    // Rank 0 (the root) never starts; the others learn it failed while they wait.
    let outs: Vec<Arc<Scheduled>> = (1..N)
        .map(|r| {
            e[r].lock().start_schedule(&over(r, N), &Plan::Bcast { root: 0, len: 8 }, vec![0; 8], None, None).unwrap()
        })
        .collect();
    pump(&e[1..], 50);
    assert!(outs.iter().all(|o| !o.is_done()), "nothing ends before the failure is known");
    for eng in &e[1..] {
        eng.lock().fail_peer(Rank(0));
    }
    pump(&e[1..], 50);
    for o in &outs {
        let (res, _) = o.take().expect("ended by progress alone");
        assert_eq!(res, Err(Error::RankFailStop { rank: 0 }));
    }
}

#[test]
fn reserved_tags_match_by_reservation_order_whatever_the_start_order() {
    let (_hub, e) = job(N as u32, 64, 64);
    let tags: Vec<_> = e
        .iter()
        .map(|g| {
            let mut g = g.lock();
            (g.coll_reserve(CTX).unwrap(), g.coll_reserve(CTX).unwrap())
        })
        .collect();
    let mut outs = Vec::new();
    for (r, eng) in e.iter().enumerate() {
        let mut g = eng.lock();
        let (a, b) = tags[r];
        // A: an allreduce of (rank + 1); B: a broadcast of 42 from rank 0.
        let start_a = |g: &mut Engine| {
            g.start_schedule(&over(r, N), &Plan::Allreduce { len: 4 }, vec![r as u8 + 1; 4], add(), Some(a)).unwrap()
        };
        let start_b = |g: &mut Engine| {
            g.start_schedule(
                &over(r, N),
                &Plan::Bcast { root: 0, len: 4 },
                vec![if r == 0 { 42 } else { 0 }; 4],
                None,
                Some(b),
            )
            .unwrap()
        };
        let (oa, ob) = if r % 2 == 1 {
            let ob = start_b(&mut g);
            (start_a(&mut g), ob)
        } else {
            let oa = start_a(&mut g);
            (oa, start_b(&mut g))
        };
        outs.push((oa, ob));
    }
    for _ in 0..10_000 {
        if outs.iter().all(|(a, b)| a.is_done() && b.is_done()) {
            break;
        }
        pump(&e, 1);
    }
    let total = (1..=N as u8).sum::<u8>();
    for (r, (a, b)) in outs.iter().enumerate() {
        let (ra, xa) = a.take().expect("A ended");
        let (rb, xb) = b.take().expect("B ended");
        assert!(ra.is_ok() && xa[..4].iter().all(|&x| x == total), "A at {r}: {:?}", &xa[..4]);
        assert!(rb.is_ok() && xb[..4].iter().all(|&x| x == 42), "B at {r}: {:?}", &xb[..4]);
    }
}

#[test]
fn a_layout_outside_the_arena_is_refused() {
    let (_hub, e) = job(2, 64, 64);
    let r = e[0].lock().start_schedule(&over(0, 2), &Plan::Bcast { root: 0, len: 9 }, vec![0; 8], None, None);
    assert!(matches!(r, Err(Error::InvalidArg(_))), "{r:?}");
    let r = e[0].lock().start_schedule(&over(0, 2), &Plan::Allreduce { len: 8 }, vec![0; 8], None, None);
    assert!(matches!(r, Err(Error::InvalidArg(_))), "a reduction without an operator: {r:?}");
}
