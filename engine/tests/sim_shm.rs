//! The shared-memory collectives over engines of one process sharing a real segment's
//! collective area (split from `sim.rs`; helpers in `common/mod.rs`).

mod common;
use common::*;

/// The shared-memory collectives (`coll::shm`) over engines of one process sharing a
/// real segment's collective area: an allreduce loop agrees with the serial sum; a
/// member that never arrives leaves the others waiting only until their engines learn of
/// its failure (R17: `RankFailStop` naming it, no hang); the communicator is then
/// inactive (R18), and after the validate's commit the survivors' collectives skip the
/// failed member (R20) in a new epoch.
/// A segment of `n` ranks with bulk buffers of `bulk_bytes` (0: none), named after
/// `tag` and already unlinked.
fn shm_segment(tag: &str, n: u32, bulk_bytes: u32) -> runthrough_shm::Segment {
    use runthrough_shm::{Layout, Segment};
    let name = format!("/rt-sim-{tag}-{}", std::process::id());
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, Layout { nranks: n, ring_bytes: 4096, bulk_bytes }).unwrap();
    Segment::unlink(&name).unwrap();
    seg
}

/// Gives every engine shared-memory collectives over `seg` (pulling by CMA from `pid`
/// from `cma_min` bytes, if given) and registers `CTX` on `world` again, now with a
/// slot; returns each engine's [`runthrough_engine::coll::ShmColl`].
fn enable_shm(
    engines: &[BiasedMutex<Engine>],
    seg: &runthrough_shm::Segment,
    world: &[Rank],
    cma: Option<(i32, usize)>,
) -> Vec<std::sync::Arc<runthrough_engine::coll::ShmColl>> {
    let n = engines.len();
    for (r, e) in engines.iter().enumerate() {
        let mut e = e.lock();
        let coll = runthrough_engine::coll::ShmColl::new(seg.coll_area().unwrap(), Rank(r as u32), vec![true; n]);
        e.enable_shm_coll(match cma {
            Some((pid, min)) => coll.with_cma(vec![pid; n], min),
            None => coll,
        });
        e.register_comm(CTX, world);
    }
    engines.iter().map(|e| e.lock().shm_coll().unwrap()).collect()
}

/// Longest a test waits for another thread to reach a point it can observe.
const REACH_LIMIT: std::time::Duration = std::time::Duration::from_secs(20);
/// How long a thread that waits on something that does not happen is watched, to see
/// it really waits (an observation window, not a synchronisation).
const STILL_WAITING: std::time::Duration = std::time::Duration::from_millis(50);

/// Waits until `cond` holds (polling, at most [`REACH_LIMIT`]); panics naming `what`.
fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + REACH_LIMIT;
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "{what}: not reached within {REACH_LIMIT:?}");
        std::thread::yield_now();
    }
}

/// Asserts that none of `handles` finishes during [`STILL_WAITING`].
fn assert_still_waiting<T>(what: &str, handles: &[&std::thread::ScopedJoinHandle<'_, T>]) {
    let end = std::time::Instant::now() + STILL_WAITING;
    while std::time::Instant::now() < end {
        assert!(handles.iter().all(|h| !h.is_finished()), "{what}");
        std::thread::yield_now();
    }
}

/// The last member stops arriving: `call` at every other member waits until its
/// engine is told of the failure, then fails with `RankFailStop` naming it; the
/// communicator stays inactive until the survivors validate it (which they then do).
/// `entered(r)` is member `r`'s entered word: the failure is announced only once every
/// other member has entered the collective (its word moved), so they are waiting on
/// the victim, not yet to start.
fn last_member_fails_while_the_others_wait<T: Send>(
    engines: &[BiasedMutex<Engine>],
    entered: impl Fn(u32) -> u64,
    call: impl Fn(usize) -> Result<T, Error> + Sync,
) {
    let victim = engines.len() - 1;
    let call = &call;
    let before: Vec<u64> = (0..victim as u32).map(&entered).collect();
    std::thread::scope(|s| {
        let waiting: Vec<_> = (0..victim).map(|r| s.spawn(move || call(r))).collect();
        for (r, &was) in before.iter().enumerate() {
            wait_until(&format!("member {r} enters the collective"), || entered(r as u32) > was);
        }
        assert_still_waiting(&format!("nobody finishes without rank {victim}"), &waiting.iter().collect::<Vec<_>>());
        for e in &engines[..victim] {
            e.lock().fail_peer(Rank(victim as u32));
        }
        for h in waiting {
            assert!(matches!(h.join().unwrap(), Err(Error::RankFailStop { rank }) if rank as usize == victim));
        }
    });
    let again = call(0);
    assert!(matches!(again, Err(Error::RankFailStop { rank }) if rank as usize == victim), "inactive until validated");
    for e in &engines[..victim] {
        e.lock().validate_commit(CTX, &[victim as u32]);
    }
}

/// The byte `k` of the block member `from` sends to `to` in iteration `i` of the exchange
/// tests (`to` 9: the one block of a broadcast or an allgather).
fn xbyte(from: usize, to: usize, i: u64, k: usize) -> u8 {
    (from * 31 + to * 7 + i as usize * 13 + k % 251) as u8
}

/// Whether the first `live` blocks of `recv` are those each member sent to `to` in
/// iteration `i` ([`xbyte`]); a failed member's block is left as it was.
fn blocks_right(recv: &[u8], block: usize, live: usize, to: usize, i: u64) -> bool {
    recv.chunks(block).take(live).enumerate().all(|(v, b)| b.iter().enumerate().all(|(k, &x)| x == xbyte(v, to, i, k)))
}

/// Member `r`'s alltoall of iteration `i` over `n` members, [`xbyte`] blocks of `block`
/// bytes: whether the blocks of the first `live` members arrived right ([`blocks_right`]).
fn xalltoall_right(
    c: &runthrough_engine::coll::Coll<'_>,
    r: usize,
    i: u64,
    block: usize,
    n: usize,
    live: usize,
) -> Result<bool, Error> {
    let send: Vec<u8> = (0..block * n).map(|k| xbyte(r, k / block, i, k % block)).collect();
    let mut recv = vec![0u8; block * n];
    c.alltoall(&send, &mut recv)?;
    Ok(blocks_right(&recv, block, live, r, i))
}

/// Runs iterations `iters` of a collective on members `0..members`, one thread each;
/// `right(r, i)` runs member `r`'s iteration `i` and says whether its result was right.
/// Returns, by member, the iterations that were not.
fn wrong_iterations(
    members: usize,
    iters: std::ops::Range<u64>,
    right: impl Fn(usize, u64) -> bool + Sync,
) -> Vec<Vec<u64>> {
    let right = &right;
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..members)
            .map(|r| {
                let iters = iters.clone();
                s.spawn(move || iters.filter(|&i| !right(r, i)).collect())
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn long_reductions_through_bulk_buffers_stop_at_a_failure_and_resume_after_validate() {
    use runthrough_engine::coll::Coll;

    // 4 members, bulk buffers of 8 KiB: a 32 KiB vector (4096 u64) goes in 4 pieces.
    let n = 4u32;
    let len = 4096usize;
    let (_hub, engines) = job(n, 64, 4096);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment("bulk", n, 8192);
    let areas = enable_shm(&engines, &seg, &world, None);
    let sum = |acc: &mut [u8], x: &[u8]| {
        for (a, b) in acc.chunks_exact_mut(8).zip(x.chunks_exact(8)) {
            let s = u64::from_le_bytes((&*a).try_into().unwrap()) + u64::from_le_bytes(b.try_into().unwrap());
            a.copy_from_slice(&s.to_le_bytes());
        }
    };
    let input = |r: usize, i: u64| -> Vec<u8> {
        (0..len as u64).flat_map(|j| (r as u64 * 1000 + j + i).to_le_bytes()).collect()
    };
    // Allreduce on even iterations, reduce to local rank 1 on odd ones (in place, or
    // from a read-only contribution into a buffer of garbage when i % 4 >= 2); the
    // result at every member that gets one, else `None`.
    let step = |r: usize, i: u64| -> Result<Option<Vec<u64>>, Error> {
        let c = Coll::begin(&engines[r], CTX, &world, r as u32, Some(&*areas[r]))?;
        let mut b = input(r, i);
        let gets = i.is_multiple_of(2) || r == 1;
        if i % 4 >= 2 {
            // From a read-only contribution, the result into another buffer.
            let send = b.clone();
            let root = (!i.is_multiple_of(2)).then_some(1);
            b.fill(0xee);
            c.reduce_from(root, &send, gets.then_some(&mut b[..]), 8, &sum).expect("through the bulk buffers")?;
        } else if i.is_multiple_of(2) {
            c.allreduce(&mut b, 8, &sum)?;
        } else {
            c.reduce(1, &mut b, 8, &sum)?;
        }
        Ok(gets.then(|| b.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect()))
    };
    let want = |members: &[usize], i: u64| -> Vec<u64> {
        (0..len as u64).map(|j| members.iter().map(|&r| r as u64 * 1000 + j + i).sum()).collect()
    };
    let run = |members: &[usize], iters: std::ops::Range<u64>| {
        std::thread::scope(|s| {
            for &r in members {
                let iters = iters.clone();
                s.spawn(move || {
                    for i in iters {
                        if let Some(got) = step(r, i).unwrap() {
                            assert!(got == want(members, i), "rank {r} iteration {i}: wrong result");
                        }
                    }
                });
            }
        });
    };
    run(&[0, 1, 2, 3], 0..40);
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire);
    assert!((0..n).all(|r| entered(r) == 40 * 4), "every call went through the bulk buffers in 4 pieces");
    // Rank 3 stops arriving.
    last_member_fails_while_the_others_wait(&engines, entered, |r| step(r, 40));
    // The three survivors, with no contribution of rank 3 (R20), in a new epoch.
    run(&[0, 1, 2], 42..82);
    assert!((0..3).all(|r| entered(r) == (1 << 32) + 40 * 4), "a new epoch, still through the bulk buffers");
}

#[test]
fn two_member_long_reduce_pipelines_through_the_bulk_buffer_in_order_and_stops_at_a_failure() {
    use runthrough_engine::coll::Coll;

    // 2 members, bulk buffers of 64 KiB: a 96 KiB vector (12288 u64) goes in 2 pieces,
    // each in parts. The operation is not commutative (acc = 3 acc + x), so a result
    // combined in the wrong order is caught.
    let n = 2u32;
    let len = 12288usize;
    let (_hub, engines) = job(n, 64, 4096);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment("pair", n, 64 * 1024);
    let areas = enable_shm(&engines, &seg, &world, None);
    let op = |acc: &mut [u8], x: &[u8]| {
        for (a, b) in acc.chunks_exact_mut(8).zip(x.chunks_exact(8)) {
            let a0 = u64::from_le_bytes((&*a).try_into().unwrap());
            let s = a0.wrapping_mul(3).wrapping_add(u64::from_le_bytes(b.try_into().unwrap()));
            a.copy_from_slice(&s.to_le_bytes());
        }
    };
    let value = |r: u64, j: u64, i: u64| r * 1_000_003 + j * 7 + i;
    let input =
        |r: usize, i: u64| -> Vec<u8> { (0..len as u64).flat_map(|j| value(r as u64, j, i).to_le_bytes()).collect() };
    // Iteration i: reduce to local rank i % 3 (2: an allreduce), in place on even
    // multiples of 3 and from a read-only contribution (`reduce_from`) on odd ones; the
    // result where there is one.
    let step = |r: usize, i: u64| -> Result<Option<Vec<u64>>, Error> {
        let c = Coll::begin(&engines[r], CTX, &world, r as u32, Some(&*areas[r]))?;
        let mut b = input(r, i);
        let root = (i % 3) as usize;
        let gets = root == 2 || r == root;
        if (i / 3).is_multiple_of(2) {
            if root == 2 {
                c.allreduce(&mut b, 8, &op)?;
            } else {
                c.reduce(root as u32, &mut b, 8, &op)?;
            }
        } else {
            let send = b.clone();
            b.fill(0xee);
            let root = (root < 2).then_some(root as u32);
            c.reduce_from(root, &send, gets.then_some(&mut b[..]), 8, &op).expect("through the bulk buffers")?;
        }
        Ok(gets.then(|| b.chunks_exact(8).map(|w| u64::from_le_bytes(w.try_into().unwrap())).collect()))
    };
    let want = |i: u64| -> Vec<u64> {
        (0..len as u64).map(|j| value(0, j, i).wrapping_mul(3).wrapping_add(value(1, j, i))).collect()
    };
    // Each member records its wrong results and goes on (a member that stopped would
    // leave the other waiting); they are checked once both are done.
    let wrong: Vec<Vec<u64>> = std::thread::scope(|s| {
        let members: Vec<_> = (0..n as usize)
            .map(|r| {
                s.spawn(move || (0..60).filter(|&i| step(r, i).unwrap().is_some_and(|got| got != want(i))).collect())
            })
            .collect();
        members.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(
        wrong.iter().all(Vec::is_empty),
        "wrong results (iterations by rank; root = iteration % 3, 2: allreduce): {wrong:?}"
    );
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire);
    assert!((0..n).all(|r| entered(r) == 60 * 2), "every call went through the bulk buffers in 2 pieces");
    // Rank 1 stops arriving: the root, waiting for its parts, gets its failure.
    last_member_fails_while_the_others_wait(&engines, entered, |r| {
        let c = Coll::begin(&engines[r], CTX, &world, r as u32, Some(&*areas[r]))?;
        c.reduce(0, &mut input(r, 60), 8, &op)
    });
}

#[test]
fn long_bcast_allgather_alltoall_pipe_through_bulk_buffers_and_stop_at_a_failure() {
    piped_collectives(false, 96 * 1024, 24 * 1024);
}

#[test]
fn long_bcast_allgather_pipe_through_bulk_buffers_when_ranks_outnumber_cores() {
    piped_collectives(true, 96 * 1024, 24 * 1024);
}

/// Bulk buffers of 1 MiB, broadcasts of 1 MiB + 4 KiB: the 1 MiB piece goes through the
/// ring of 256 KiB at the start of the root's bulk buffer (the root waits for both
/// readers before it reuses a part), the 4 KiB one linearly. Every byte is checked over
/// 15 broadcasts from each root in turn; then the last member stops arriving at a
/// broadcast from rank 0, whose root waits on the ring for it and fails with its failure,
/// as does the other reader.
#[test]
fn long_bcasts_go_through_a_ring_in_the_root_s_bulk_buffer_and_stop_at_a_failure() {
    piped_collectives_in(false, 1 << 20, (1 << 20) + 4096, 24 * 1024, 45);
}

/// Contributions the slots do not carry (more than `COLL_DATA`, 1 KiB) but under the
/// bulk minimum of reductions pipe too when every member has a core: a 3 KiB broadcast
/// and allgather block, alltoall blocks of 1 KiB (3 KiB a member), each in one piece.
#[test]
fn mid_size_bcast_allgather_alltoall_pipe_through_bulk_buffers_and_stop_at_a_failure() {
    piped_collectives(false, 3 * 1024, 1024);
}

/// 3 members, bulk buffers of 64 KiB: a broadcast or allgather block of `long` bytes
/// goes in pieces of at most 64 KiB (96 KiB: 2); alltoall blocks of `block` bytes (the
/// two for the others fit a buffer) pipe too unless ranks outnumber cores (then they go
/// by messages). Every byte is checked, then a member stops arriving.
fn piped_collectives(oversubscribed: bool, long: usize, block: usize) {
    piped_collectives_in(oversubscribed, 64 * 1024, long, block, 46);
}

/// [`piped_collectives`] with bulk buffers of `bulk` bytes; the last member stops
/// arriving at iteration `fail_at` (46: an allgather; 45: a broadcast from rank 0).
fn piped_collectives_in(oversubscribed: bool, bulk: usize, long: usize, block: usize, fail_at: u64) {
    use runthrough_engine::coll::Coll;

    let n = 3u32;
    let pieces = long.div_ceil(bulk) as u64;
    let (_hub, engines) = job_with(n, 64, 4096, oversubscribed);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let name = format!("piped-{}-{long}", if oversubscribed { "over" } else { "cores" });
    let seg = shm_segment(&name, n, bulk as u32);
    let areas = enable_shm(&engines, &seg, &world, None);
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire);
    // Bytes that name their source, destination, iteration and offset.
    let byte = xbyte;
    // Iteration i: bcast from i % 3, allgather, alltoall, in turn; the wrong results.
    let step = |r: usize, i: u64| -> Result<bool, Error> {
        let c = Coll::begin(&engines[r], CTX, &world, r as u32, Some(&*areas[r]))?;
        Ok(match i % 3 {
            0 => {
                let root = (i / 3 % 3) as usize;
                let mut b: Vec<u8> = (0..long).map(|k| if r == root { byte(root, 9, i, k) } else { 0 }).collect();
                c.bcast(root as u32, &mut b)?;
                b.iter().enumerate().all(|(k, &x)| x == byte(root, 9, i, k))
            }
            1 => {
                let send: Vec<u8> = (0..long).map(|k| byte(r, 9, i, k)).collect();
                let mut recv = vec![0u8; long * n as usize];
                c.allgather(&send, &mut recv)?;
                recv.chunks(long).enumerate().all(|(v, b)| b.iter().enumerate().all(|(k, &x)| x == byte(v, 9, i, k)))
            }
            _ => xalltoall_right(&c, r, i, block, n as usize, n as usize)?,
        })
    };
    let wrong = wrong_iterations(n as usize, 0..45, |r, i| step(r, i).unwrap());
    assert!(
        wrong.iter().all(Vec::is_empty),
        "wrong results (iterations by rank; i % 3: bcast, allgather, alltoall): {wrong:?}"
    );
    // 15 of each: broadcasts and allgathers in `pieces`, alltoalls in one (or none).
    let want = 15 * pieces + 15 * pieces + if oversubscribed { 0 } else { 15 };
    assert!(
        (0..n).all(|r| entered(r) == want),
        "every call but oversubscribed alltoalls went through the bulk buffers"
    );
    // Rank 2 stops arriving: the others wait for its parts (an allgather) or its ring
    // progress (the root of a broadcast through a ring) and get its failure.
    last_member_fails_while_the_others_wait(&engines, entered, |r| step(r, fail_at));
}

/// When every member has a core and CMA works, long allgathers and alltoalls pull in
/// place (`Coll::pulled_exchange`): each member exposes its whole send buffer and pulls
/// its part of every other's, one copy a byte. 3 members, 24 KiB blocks, pulled from
/// 4 KiB: every byte of 30 calls (allgather and alltoall in turn) is checked, each call
/// was described in the line words (the exposed length: a block for an allgather, three
/// for an alltoall), not piped through bulk buffers (there are none here, so without
/// the pulled path they would go by messages and enter no shared-memory collective);
/// then the last member stops arriving and the others, which exposed their buffers and
/// wait for its own, fail with its failure (R17), and resume after the validate.
#[test]
fn long_allgather_alltoall_pull_in_place_when_every_member_has_a_core_and_stop_at_a_failure() {
    pulled_exchanges(false, 24 * 1024);
}

/// When ranks outnumber cores, alltoalls of at least 16 KiB a block per member are pulled
/// in place too (allgathers are not: they pipe through bulk buffers or go by messages).
/// 3 members, 48 KiB blocks: as the test above with only alltoalls. Without the path the
/// calls go by messages and enter no shared-memory collective, so the test fails.
#[test]
fn long_alltoall_pulls_in_place_when_ranks_outnumber_cores_and_stops_at_a_failure() {
    pulled_exchanges(true, 48 * 1024);
}

/// The pulled-exchange checks of the two tests above: every iteration an alltoall when
/// `oversubscribed`, else an allgather (even) and an alltoall (odd) in turn.
fn pulled_exchanges(oversubscribed: bool, block: usize) {
    use runthrough_engine::coll::Coll;
    use std::sync::atomic::Ordering;

    let n = 3u32;
    let (_hub, engines) = job_with(n, 64, 4096, oversubscribed);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment(if oversubscribed { "pulledx-over" } else { "pulledx" }, n, 0);
    let areas = enable_shm(&engines, &seg, &world, Some((std::process::id() as i32, 4096)));
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(Ordering::Acquire);
    let byte = xbyte;
    let (engines, world, areas) = (&engines, &world, &areas);
    // Iteration i: an allgather when even (unless oversubscribed), else an alltoall;
    // whether the blocks of the first `live` members were right (a failed member's block
    // is left as it was).
    let step = move |r: usize, i: u64, live: usize| -> Result<bool, Error> {
        let c = Coll::begin(&engines[r], CTX, world, r as u32, Some(&*areas[r]))?;
        if oversubscribed || !i.is_multiple_of(2) {
            return xalltoall_right(&c, r, i, block, n as usize, live);
        }
        let send: Vec<u8> = (0..block).map(|k| byte(r, 9, i, k)).collect();
        let mut recv = vec![0u8; block * n as usize];
        c.allgather(&send, &mut recv)?;
        Ok(blocks_right(&recv, block, live, 9, i))
    };
    let wrong = wrong_iterations(n as usize, 0..30, |r, i| step(r, i, n as usize).unwrap());
    assert!(wrong.iter().all(Vec::is_empty), "wrong results (iterations by rank): {wrong:?}");
    assert!((0..n).all(|r| entered(r) == 30), "every call went through shared memory");
    let lens: Vec<u64> = (0..n)
        .flat_map(|r| (0..4).map(move |k| (r, k)))
        .map(|(r, k)| area.line_word(r, 0, k, 2).load(Ordering::Acquire))
        .collect();
    assert!(lens.contains(&(3 * block as u64)), "exposed lengths {lens:?}");
    assert!(oversubscribed || lens.contains(&(block as u64)), "exposed lengths {lens:?}");
    last_member_fails_while_the_others_wait(engines, entered, |r| step(r, 30, n as usize));
    // After the validate the two survivors exchange pulled in place again.
    let wrong = wrong_iterations(2, 31..41, |r, i| step(r, i, 2).unwrap());
    assert!(wrong.iter().all(Vec::is_empty), "wrong results after the validate: {wrong:?}");
    assert!((0..2).all(|r| entered(r) == (1 << 32) + 10), "a new epoch after the validate");
}

/// When ranks outnumber cores (the engines oversubscribed), a short alltoall (a 1 KiB
/// block for each of 4 members: more than the slots carry) goes through the bulk buffers
/// in one piece, not through messages: every byte of 20 calls lands, each call enters
/// shared memory (it fails without the path: the messages enter nothing); then the last
/// member stops arriving, the others fail with its failure (R17) and resume after the
/// validate.
#[test]
fn short_alltoall_goes_through_the_bulk_buffers_when_ranks_outnumber_cores_and_stops_at_a_failure() {
    use runthrough_engine::coll::Coll;
    use std::sync::atomic::Ordering;

    let n = 4u32;
    let block = 1024;
    let (_hub, engines) = job_with(n, 64, 4096, true);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment("shortx", n, 16384);
    let areas = enable_shm(&engines, &seg, &world, None);
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(Ordering::Acquire);
    let (engines, world, areas) = (&engines, &world, &areas);
    // Whether the blocks of the first `live` members were right.
    let step = move |r: usize, i: u64, live: usize| -> Result<bool, Error> {
        let c = Coll::begin(&engines[r], CTX, world, r as u32, Some(&*areas[r]))?;
        xalltoall_right(&c, r, i, block, n as usize, live)
    };
    let wrong = wrong_iterations(n as usize, 0..20, |r, i| step(r, i, n as usize).unwrap());
    assert!(wrong.iter().all(Vec::is_empty), "wrong results (iterations by rank): {wrong:?}");
    assert!((0..n).all(|r| entered(r) == 20), "every call went through shared memory");
    last_member_fails_while_the_others_wait(engines, entered, |r| step(r, 20, n as usize));
    let wrong = wrong_iterations(3, 21..31, |r, i| step(r, i, 3).unwrap());
    assert!(wrong.iter().all(Vec::is_empty), "wrong results after the validate: {wrong:?}");
}

#[test]
fn shared_memory_collectives_stop_at_a_failure_and_resume_after_validate() {
    use runthrough_engine::coll::Coll;

    let n = 3u32;
    let (_hub, engines) = job(n, 64, 4096);
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment("shmcoll", n, 0);
    let areas = enable_shm(&engines, &seg, &world, None);
    let sum = |acc: &mut [u8], x: &[u8]| {
        let s = u64::from_le_bytes(acc[..8].try_into().unwrap()) + u64::from_le_bytes(x[..8].try_into().unwrap());
        acc[..8].copy_from_slice(&s.to_le_bytes());
    };
    let allreduce = |r: usize, v: u64| -> Result<u64, Error> {
        let c = Coll::begin(&engines[r], CTX, &world, r as u32, Some(&*areas[r]))?;
        let mut b = v.to_le_bytes();
        c.allreduce(&mut b, 8, &sum)?;
        Ok(u64::from_le_bytes(b))
    };
    std::thread::scope(|s| {
        for r in 0..n as usize {
            s.spawn(move || {
                for i in 0..200u64 {
                    assert_eq!(allreduce(r, r as u64 + i).unwrap(), 3 * i + 3, "rank {r} iteration {i}");
                }
            });
        }
    });
    // They went through the slots (slot 0, context 0), not messages.
    let area = seg.coll_area().unwrap();
    let entered = |r: u32| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire);
    assert!((0..n).all(|r| entered(r) == 200), "every member entered 200 shared-memory collectives");
    // Rank 2 stops arriving; 0 and 1 wait until their engines are told it failed.
    last_member_fails_while_the_others_wait(&engines, entered, |r| allreduce(r, 1));
    std::thread::scope(|s| {
        for r in 0..2usize {
            s.spawn(move || {
                for i in 0..200u64 {
                    assert_eq!(allreduce(r, r as u64 + i).unwrap(), 2 * i + 1, "rank {r} iteration {i} after validate");
                }
            });
        }
    });
    assert!((0..2).all(|r| entered(r) == (1 << 32) + 200), "a new epoch after the validate");
    assert_eq!(entered(2), 200, "the failed member's slot is not touched");

    // The register agreement over the same slots (validate's fast path): rank 2 never
    // votes; 0 and 1 decide once their engines know it failed, the same failed group
    // (world ranks) and the AND of their flags; then a failure-free instance.
    let agree = |r: usize, flag: u32| {
        let slot = engines[r].lock().shm_slot_of(CTX).expect("slot");
        runthrough_engine::coll::shm_agreement(&engines[r], CTX, &world, r as u32, flag, &areas[r], slot).unwrap()
    };
    std::thread::scope(|s| {
        let h: Vec<_> = [(0, 0b110), (1, 0b011)].map(|(r, f)| s.spawn(move || agree(r, f))).into();
        for d in h.into_iter().map(|h| h.join().unwrap()) {
            assert_eq!((d.flag, d.failed), (0b010, vec![2]));
        }
    });
}

/// The long shared-memory path (contributions pulled in place by CMA) over a real
/// segment, the threads' own process standing in for every member: broadcasts arrive
/// intact and go through the line descriptors; a root that gives up
/// (a member failed) withdraws its buffer before the caller gets it back, so a member
/// that pulls it afterwards — even though the bytes are readable and already rewritten
/// — gets `RankFailStop` once it learns of the failure, never the rewritten bytes
/// (R17: no hang, no wrong data); a root never returns while a member may still pull.
#[test]
fn long_collectives_pull_in_place_and_never_deliver_a_withdrawn_buffer() {
    use runthrough_engine::coll::Coll;

    let n = 4u32;
    let len = 64 * 1024;
    let (_hub, engines) = job_with(n, 64, 4096, true); // the long path is for ranks > cores
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let seg = shm_segment("shmlong", n, 0);
    let pid = std::process::id() as i32;
    let areas = enable_shm(&engines, &seg, &world, Some((pid, 4096)));
    let (engines, world, areas) = (&engines, &world, &areas);
    let bcast = |r: usize, root: u32, buf: &mut [u8]| -> Result<(), Error> {
        Coll::begin(&engines[r], CTX, world, r as u32, Some(&*areas[r]))?.bcast(root, buf)
    };
    std::thread::scope(|s| {
        for r in 0..n as usize {
            s.spawn(move || {
                for i in 0..30u8 {
                    let root = u32::from(i) % n;
                    let want = pattern_bytes(len, i);
                    let mut b = if root as usize == r { want.clone() } else { vec![0; len] };
                    bcast(r, root, &mut b).unwrap();
                    assert!(b == want, "rank {r} broadcast {i}");
                }
            });
        }
    });
    // They were described in the lines (length word), not copied into the slots.
    let area = seg.coll_area().unwrap();
    assert!((0..4).any(|k| area.line_word(0, 0, k, 2).load(std::sync::atomic::Ordering::Acquire) == len as u64));
    assert!((0..n).all(|r| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire) == 30));

    // Rank 3 never arrives: the root waits for its pull until told it failed; rank 1
    // (which pulled) succeeds, the root fails.
    let data = pattern_bytes(len, 7);
    std::thread::scope(|s| {
        let root = s.spawn(|| bcast(0, 0, &mut data.clone()));
        let mut b1 = vec![0; len];
        let mut b2 = vec![0; len];
        let (r1, r2) = std::thread::scope(|t| {
            let h1 = t.spawn(|| bcast(1, 0, &mut b1));
            let h2 = t.spawn(|| bcast(2, 0, &mut b2));
            (h1.join().unwrap(), h2.join().unwrap())
        });
        assert!(r1.is_ok() && r2.is_ok() && b1 == data && b2 == data);
        // Ranks 1 and 2 pulled, so the root has exposed its buffer: it now waits.
        assert_still_waiting("the root waits for rank 3's pull", &[&root]);
        for e in &engines[..3] {
            e.lock().fail_peer(Rank(3));
        }
        assert!(matches!(root.join().unwrap(), Err(Error::RankFailStop { rank: 3 })));
    });
    for e in &engines[..3] {
        e.lock().validate_commit(CTX, &[3]);
    }
    // In the new epoch the root exposes, then gives up when rank 2 fails (only its
    // engine knows yet) and rewrites its buffer; rank 1 pulls the rewritten bytes
    // afterwards but must not deliver them.
    let mut root_buf = pattern_bytes(len, 9);
    let entered = |r: u32| area.entered(r, 0).load(std::sync::atomic::Ordering::Acquire);
    let root_before = entered(0);
    std::thread::scope(|s| {
        let h = s.spawn(|| bcast(0, 0, &mut root_buf));
        // The failure comes once the root has entered (and exposed): it gives up then.
        wait_until("the root enters the broadcast", || entered(0) > root_before);
        engines[0].lock().fail_peer(Rank(2));
        assert!(matches!(h.join().unwrap(), Err(Error::RankFailStop { rank: 2 })));
    });
    root_buf.iter_mut().for_each(|b| *b = 0xEE);
    let one_before = entered(1);
    std::thread::scope(|s| {
        let mut b1 = vec![0; len];
        let h = s.spawn(|| bcast(1, 0, &mut b1).map(|()| b1));
        wait_until("rank 1 enters the broadcast", || entered(1) > one_before);
        assert_still_waiting("rank 1 waits to learn why the root withdrew", &[&h]);
        engines[1].lock().fail_peer(Rank(2));
        assert!(matches!(h.join().unwrap(), Err(Error::RankFailStop { rank: 2 })), "never the rewritten buffer");
    });
    drop(root_buf);
}

/// The small-message path: an eager send the transport takes at once completes when it
/// starts, with no request slot; once the transport is busy the send queues (a slot) and
/// every later send to that peer queues behind it, so order holds (R13's base).
#[test]
fn receives_of_messages_already_here_complete_at_once_in_order() {
    let (_hub, e) = job(2, 64, 256);
    let live = |r: usize| e[r].lock().live_requests();
    // Three eager messages, a rendezvous (longer than the eager limit), one more eager.
    let small: Vec<Vec<u8>> = (0..3).map(|i| pattern_bytes(16 + i, i as u8)).collect();
    let long = pattern_bytes(1000, 7);
    let last = pattern_bytes(40, 9);
    let mut sends: Vec<Request<'_>> = small.iter().map(|m| send(&e, 0, 1, 4, m)).collect();
    sends.push(send(&e, 0, 1, 4, &long));
    sends.push(send(&e, 0, 1, 5, &last));
    // Rank 1 polls them in before posting anything: the first receive finds its message
    // buffered and completes at once, with no request slot.
    pump(&e, 3);
    let mut out = vec![0u8; 64];
    let mut r = recv(&e, 1, Some(0), Some(4), &mut out);
    assert_eq!(live(1), 0, "no request slot for a message already here");
    assert!(r.is_active(), "its outcome is there to take");
    let st = r.test().unwrap().expect("complete at once");
    drop(r);
    assert_eq!((st.source, st.tag, &out[..st.len]), (0, 4, &small[0][..]));
    // A receive too short for the next one does not take the shortcut: the usual path
    // reports the truncation (and writes only what fits).
    let mut short = vec![0u8; 8];
    let mut r = recv(&e, 1, Some(0), Some(4), &mut short);
    assert!(matches!(finish(&e, &mut r), Err(Error::Truncate { posted: 8, arrived: 17 })));
    drop(r);
    assert_eq!(short, small[1][..8]);
    let mut out = vec![0u8; 64];
    let mut r = recv(&e, 1, Some(0), Some(4), &mut out);
    let st = r.test().unwrap().expect("complete at once");
    drop(r);
    assert_eq!(&out[..st.len], &small[2][..]);
    // The earliest match of a wildcard tag is the rendezvous: it is not skipped for the
    // later eager message; it takes a slot and completes through the protocol.
    let mut big = vec![0u8; 1000];
    let mut r = recv(&e, 1, Some(0), None, &mut big);
    assert_eq!(live(1), 1, "a rendezvous takes a request slot");
    let st = finish(&e, &mut r).unwrap();
    drop(r);
    assert_eq!((st.tag, st.len), (4, 1000));
    assert_eq!(big, long);
    let mut out = vec![0u8; 64];
    let mut r = recv(&e, 1, None, None, &mut out);
    let st = finish(&e, &mut r).unwrap();
    drop(r);
    assert_eq!((st.tag, &out[..st.len]), (5, &last[..]));
    // Nothing here: the receive is posted (a slot) and completes when a message comes.
    let mut out = vec![0u8; 64];
    let mut r = recv(&e, 1, Some(0), Some(6), &mut out);
    assert_eq!(live(1), 1, "a receive with nothing to take is posted");
    let mut s = send(&e, 0, 1, 6, &last);
    finish(&e, &mut s).unwrap();
    assert_eq!(finish(&e, &mut r).unwrap().len, 40);
    drop(r);
    for mut s in sends {
        finish(&e, &mut s).unwrap();
    }
    assert_eq!((live(0), live(1)), (0, 0));
}

#[test]
fn small_sends_complete_at_once_and_queue_in_order_when_busy() {
    // Two records fit between the engines before the receiver drains them.
    let (_hub, e) = job(2, 2, 256);
    let msgs: Vec<Vec<u8>> = (0..5).map(|i| pattern_bytes(8 + i, i as u8)).collect();
    let mut reqs = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        reqs.push(send(&e, 0, 1, 9, m));
        let live = e[0].lock().live_requests();
        // The first two went straight into the transport; the third found it full and
        // took a slot; the fourth and fifth queue behind it.
        assert_eq!(live, i.saturating_sub(1), "request slots after send {i}");
    }
    assert!(reqs.iter().all(Request::is_active), "every handle has an outcome to take");
    let first = reqs.remove(0).wait().unwrap();
    assert_eq!(first, Status { source: 1, tag: 9, len: 8 }, "a completed send's status");
    let mut got = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let mut out = vec![0u8; 64];
        let mut r = recv(&e, 1, Some(0), Some(9), &mut out);
        let st = finish(&e, &mut r).unwrap();
        drop(r);
        assert_eq!(st.len, m.len(), "message {i} arrived in send order");
        got.push(out[..st.len].to_vec());
    }
    assert_eq!(got, msgs, "every message once, in order, intact");
    for mut r in reqs {
        finish(&e, &mut r).unwrap();
    }
    assert_eq!(e[0].lock().live_requests(), 0);
    assert_eq!(e[1].lock().live_requests(), 0);
}
