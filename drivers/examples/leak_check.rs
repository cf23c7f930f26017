//! R30 at run time: every kind of request is leaked (`mem::forget`) while pending, its
//! memory is freed and reallocated, and the new allocation must stay untouched while the
//! peer's data arrives (the reproduction in docs/SOUNDNESS.md, for every request kind).
//!
//! Rank 0 is the holder that leaks, rank 1 its peer; further ranks take part in the
//! collectives only. Sizes: 64 KiB (eager when every rank shares the node, rendezvous
//! otherwise) and 1 MiB (rendezvous). Each rank prints `leak_check: ok rank R kinds=K
//! reused=U` (U: how often the allocator handed the freed address straight back, which
//! is the case the reproduction needs) or exits non-zero naming what failed.

use runthrough::{Comm, Error, ErrorMode, Op};

const HOLDER: usize = 0;
const PEER: usize = 1;

fn fail(what: &str) -> ! {
    eprintln!("leak_check: FAILED: {what}");
    std::process::exit(3)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// A fresh buffer of `len` bytes of 0xAA, and whether it sits where `old` was.
fn fresh(len: usize, old: usize) -> (Vec<u8>, bool) {
    let v = vec![0xAAu8; len];
    let same = v.as_ptr() as usize == old;
    (v, same)
}

fn untouched(what: &str, v: &[u8]) {
    if let Some(i) = v.iter().position(|&b| b != 0xAA) {
        fail(&format!("{what}: the reallocated buffer was written at byte {i} (0x{:02x})", v[i]));
    }
}

/// A receive leaked before its message was sent: the scope cancels it, so the message
/// later lands in neither the freed memory nor its reuse, and is still receivable.
fn leaked_irecv(world: &Comm, len: usize, tag: i32, reused: &mut usize) -> Result<(), Error> {
    let me = world.rank();
    if me == HOLDER {
        let mut v = vec![0u8; len];
        let addr = v.as_ptr() as usize;
        runthrough::scope(|s| {
            let r = world.irecv(s, &mut v, PEER, tag)?;
            std::mem::forget(r);
            Ok::<_, Error>(())
        })?;
        drop(v);
        let (mine, same) = fresh(len, addr);
        *reused += usize::from(same);
        world.barrier()?; // the peer sends after this
                          // Until the message shows as receivable (buffered, or its rendezvous header),
                          // look at the reallocated memory: a leaked receive that was not cancelled would
                          // take the message and write it there.
        let t0 = std::time::Instant::now();
        loop {
            untouched(&format!("irecv {len} (while the message arrives)"), &mine);
            if world.iprobe(PEER, tag)?.is_some() {
                break;
            }
            if t0.elapsed() > std::time::Duration::from_secs(10) {
                fail(&format!("irecv {len}: the message never became receivable (the leaked receive took it)"));
            }
            std::thread::yield_now();
        }
        let mut got = vec![0u8; len];
        world.recv(&mut got, PEER, tag)?;
        if got != pattern(len, tag as u8) {
            fail(&format!("irecv {len}: the message received after the leak differs"));
        }
        untouched(&format!("irecv {len}"), &mine);
    } else {
        world.barrier()?;
        if me == PEER {
            world.send(&pattern(len, tag as u8), HOLDER, tag)?;
        }
    }
    world.barrier()
}

/// A send leaked while pending: the scope completes it before returning, so what the
/// peer receives is the data as it was, whatever the holder does with the memory later.
fn leaked_isend(world: &Comm, len: usize, tag: i32, reused: &mut usize) -> Result<(), Error> {
    let me = world.rank();
    if me == HOLDER {
        let mut v = pattern(len, tag as u8);
        let addr = v.as_ptr() as usize;
        runthrough::scope(|s| {
            let r = world.isend(s, &v, PEER, tag)?;
            std::mem::forget(r);
            Ok::<_, Error>(())
        })?;
        v.fill(0xBB);
        drop(v);
        let (mine, same) = fresh(len, addr);
        *reused += usize::from(same);
        world.barrier()?;
        untouched(&format!("isend {len}"), &mine);
    } else {
        if me == PEER {
            let mut got = vec![0u8; len];
            world.recv(&mut got, HOLDER, tag)?;
            if got != pattern(len, tag as u8) {
                fail(&format!("isend {len}: the peer received other data than was sent"));
            }
        }
        world.barrier()?;
    }
    world.barrier()
}

/// Nonblocking collectives leaked by every member; the holder's part ends (its scope
/// closes) before the root (the peer) starts, so the data arrives after the cancel.
fn leaked_collective(world: &Comm, kind: &str, len: usize, reused: &mut usize) -> Result<(), Error> {
    const GO: i32 = 99;
    let me = world.rank();
    if me == PEER {
        world.recv(&mut [0u8; 1], HOLDER, GO)?;
    }
    let mut v = if me == PEER { pattern(len, 7) } else { vec![0u8; len] };
    let addr = v.as_ptr() as usize;
    let send = vec![1u64; len / 8];
    runthrough::scope(|s| {
        match kind {
            "ibcast" => std::mem::forget(world.ibcast(s, &mut v, PEER)?),
            "ireduce" => {
                let out: &mut [u64] = bytemuck_cast(&mut v);
                std::mem::forget(world.ireduce(s, &send, out, Op::Sum, HOLDER)?)
            }
            "iallreduce" => {
                let out: &mut [u64] = bytemuck_cast(&mut v);
                std::mem::forget(world.iallreduce(s, &send, out, Op::Sum)?)
            }
            "ibarrier" => std::mem::forget(world.ibarrier(s)?),
            _ => unreachable!(),
        }
        Ok::<_, Error>(())
    })?;
    if me == HOLDER {
        world.send(&[1u8], PEER, GO)?;
    }
    drop(v);
    let (mine, same) = fresh(len, addr);
    if me == HOLDER {
        *reused += usize::from(same);
    }
    // Give the abandoned collective's data every chance to arrive, then look.
    world.barrier()?;
    world.barrier()?;
    untouched(&format!("{kind} {len} at rank {me}"), &mine);
    Ok(())
}

fn bytemuck_cast(v: &mut [u8]) -> &mut [u64] {
    let n = v.len() / 8;
    let (head, body, _) = bytemuck::pod_align_to_mut::<u8, u64>(v);
    if !head.is_empty() {
        fail("a Vec<u8> of this size is not 8-byte aligned");
    }
    &mut body[..n]
}

/// Owned-buffer requests leaked: the vector leaks with the handle, so the engine's writes
/// (or reads) hit memory nobody else gets; a fresh allocation stays untouched.
fn leaked_owned(world: &Comm, len: usize, tag: i32) -> Result<(), Error> {
    let me = world.rank();
    if me == HOLDER {
        let r = world.irecv_owned(vec![0u8; len], PEER, tag)?;
        std::mem::forget(r);
        let s = world.isend_owned(pattern(len, tag as u8 ^ 1), PEER, tag + 1)?;
        std::mem::forget(s);
        let (mine, _) = fresh(len, 0);
        world.barrier()?;
        world.barrier()?;
        untouched(&format!("owned {len}"), &mine);
    } else {
        world.barrier()?;
        if me == PEER {
            world.send(&pattern(len, tag as u8), HOLDER, tag)?;
            let mut got = vec![0u8; len];
            world.recv(&mut got, HOLDER, tag + 1)?;
            if got != pattern(len, tag as u8 ^ 1) {
                fail(&format!("owned isend {len}: the peer received other data than was sent"));
            }
        }
        world.barrier()?;
    }
    world.barrier()
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    if world.size() < 2 {
        fail("needs at least 2 ranks");
    }
    let (mut kinds, mut reused) = (0, 0);
    for (i, len) in [64 << 10, 1 << 20].into_iter().enumerate() {
        let tag = 10 * i as i32;
        leaked_irecv(&world, len, tag + 1, &mut reused)?;
        leaked_isend(&world, len, tag + 2, &mut reused)?;
        for kind in ["ibcast", "ireduce", "iallreduce", "ibarrier"] {
            leaked_collective(&world, kind, len, &mut reused)?;
        }
        leaked_owned(&world, len, tag + 4)?;
        kinds += 7;
    }
    // The communicator still works after all that was abandoned.
    let mut sum = [0u64];
    world.allreduce(&[1u64], &mut sum, Op::Sum)?;
    if sum[0] != world.size() as u64 {
        fail(&format!("allreduce after the leaks gave {}", sum[0]));
    }
    println!("leak_check: ok rank {} kinds={kinds} reused={reused}", world.rank());
    rt.finalize()
}
