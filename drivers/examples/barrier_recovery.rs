//! Example 17.6 of the run-through chapter, ported: a loop of barriers where a process may
//! fail. After each barrier every process validates: the validate is uniform, so all see
//! the same failed group and know whether a new failure happened, though the barrier itself
//! may have succeeded at some and failed at others.
//!
//! `rtrun -n 4 barrier_recovery [VICTIM] [ITERS] [OP]`: the victim SIGKILLs itself
//! halfway. OP (default `barrier`) picks the collective of the loop, so the same recovery
//! is exercised with a kill inside every algorithm: `barrier`, `bcast`, `reduce`,
//! `allreduce` (short: recursive doubling), `allreduce-mid` (32 KB: reduce + bcast),
//! `allreduce-long` (direct reduce-scatter + allgather on up to 8 members, else ring),
//! `reduce-long`, `bcast-long` (pulled in place by CMA on one node), `bcast-ring` (800 KB:
//! through a ring in the root's bulk buffer when every member has a core),
//! `allgather-long` and `alltoall-long` (32 KB blocks: pulled in place by CMA when every
//! member has a core), `alltoall-short` (1 KB blocks: through the bulk buffers in one
//! piece when ranks outnumber cores), `alltoall-pulled` (128 KB blocks: pulled in place
//! by CMA also when ranks outnumber cores), `dup`, `split`, `create`, `gather`, `scatter`, `allgather`,
//! `alltoall`, `scan`, `exscan`, `gatherv`, `allgatherv`, `alltoallv`, `reduce_scatter`,
//! the nonblocking `ibarrier`, `ibcast`, `ireduce`, `iallreduce`, or `validate` /
//! `ivalidate` (nothing but the validate, blocking or nonblocking: the victim dies
//! between two of them, so the kill lands inside the agreement).
//! Prints `barrier_recovery: rank r done ITERS iterations, failed [..]` per survivor.
//!
//! Further words after OP: a number is the ROOT of the rooted collectives (default 0;
//! it may be the victim: then every collective after the failure is recognised must
//! fail, R20); `inside` makes the victim die part-way through its own part of the
//! collective instead of before it: the reductions (`allreduce`, `allreduce-mid`,
//! `allreduce-long`, `reduce`, `reduce-long`) then run with a user operation, and the
//! victim SIGKILLs itself inside its first combine (it has received a contribution and
//! owes results). A victim that leaves that collective alive exits 4 instead (the kill
//! missed its target; the test sees it in the rank's end).
//!
//! Each survivor checks the iterations after the failure is recognised: with a live
//! root every collective there succeeds; with the victim as root every rooted one fails.
//! Otherwise it exits 3.

use std::sync::atomic::{AtomicUsize, Ordering};

use runthrough::{Comm, Error, ErrorMode, GroupOrder, Op};

fn die() -> ! {
    let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
    std::thread::sleep(std::time::Duration::from_secs(10));
    unreachable!("SIGKILL did not arrive");
}

/// Sum with a user operation that SIGKILLs this process inside its `die_at`-th call
/// (never if `die_at` is 0).
fn sum_or_die(die_at: usize) -> impl Fn(&mut [u64], &[u64]) {
    let calls = AtomicUsize::new(0);
    move |acc, x| {
        if calls.fetch_add(1, Ordering::Relaxed) + 1 == die_at {
            die();
        }
        for (a, b) in acc.iter_mut().zip(x) {
            *a = a.wrapping_add(*b);
        }
    }
}

/// Whether `op` has a root.
fn rooted(op: &str) -> bool {
    matches!(
        op,
        "bcast"
            | "bcast-long"
            | "bcast-ring"
            | "reduce"
            | "reduce-long"
            | "gather"
            | "scatter"
            | "gatherv"
            | "ibcast"
            | "ireduce"
    )
}

/// One collective of the loop; `die_at` > 0 makes a reduction's combine kill this
/// process at its `die_at`-th call.
fn step(comm: &Comm, op: &str, root: usize, die_at: usize) -> Result<(), Error> {
    let n = comm.size();
    let me = comm.rank() as u64;
    let small = [me; 4];
    let long = vec![me; 40_000];
    match op {
        "barrier" => comm.barrier(),
        "bcast" => comm.bcast(&mut [me; 16], root),
        "bcast-long" => {
            // The root sends its rank: a broadcast that succeeds delivered it whole.
            let mut b = long.clone();
            comm.bcast(&mut b, root)?;
            assert!(b.iter().all(|&x| x == root as u64), "bcast-long delivered wrong data");
            Ok(())
        }
        "bcast-ring" => {
            let mut b = vec![me; 100_000];
            comm.bcast(&mut b, root)?;
            assert!(b.iter().all(|&x| x == root as u64), "bcast-ring delivered wrong data");
            Ok(())
        }
        "reduce" if die_at > 0 => comm.reduce_with(&small, &mut [0; 4], root, sum_or_die(die_at)),
        "reduce" => comm.reduce(&small, &mut [0; 4], Op::Sum, root),
        "allreduce" if die_at > 0 => comm.allreduce_with(&small, &mut [0; 4], sum_or_die(die_at)),
        "allreduce" => comm.allreduce(&small, &mut [0; 4], Op::Sum),
        "allreduce-long" if die_at > 0 => comm.allreduce_with(&long, &mut vec![0; long.len()], sum_or_die(die_at)),
        "allreduce-long" => {
            // Every slice is combined by another member: a success is whole (one value
            // everywhere, some member's rank).
            let mut out = vec![u64::MAX; long.len()];
            comm.allreduce(&long, &mut out, Op::Max)?;
            assert!(out.iter().all(|&x| x == out[0]) && out[0] < n as u64, "allreduce-long torn: {}", out[0]);
            Ok(())
        }
        "reduce-long" if die_at > 0 => comm.reduce_with(&long, &mut vec![0; long.len()], root, sum_or_die(die_at)),
        "reduce-long" => {
            let mut out = vec![u64::MAX; long.len()];
            comm.reduce(&long, &mut out, Op::Sum, root)?;
            let whole = out.iter().all(|&x| x == out[0]) && out[0] < (n * n) as u64;
            assert!(comm.rank() != root || whole, "reduce-long torn at the root: {}", out[0]);
            Ok(())
        }
        "allreduce-mid" if die_at > 0 => comm.allreduce_with(&long[..4000], &mut vec![0; 4000], sum_or_die(die_at)),
        "allreduce-mid" => comm.allreduce(&long[..4000], &mut vec![0; 4000], Op::Min),
        // Creation under failure (R23, R24): the new communicator is used and freed.
        "dup" => comm.dup().and_then(|c| c.barrier()),
        "split" => comm.split(Some((me % 2) as u32), 0).map(drop),
        "create" => comm.create(&comm.group()).map(drop),
        "gather" => comm.gather(&small, &mut vec![0; 4 * n], root),
        "scatter" => comm.scatter(&vec![me; 4 * n], &mut [0; 4], root),
        "allgather" => comm.allgather(&small, &mut vec![0; 4 * n]),
        "allgather-long" => comm.allgather(&long[..4000], &mut vec![0; 4000 * n]),
        "alltoall" => comm.alltoall(&vec![me; 4 * n], &mut vec![0; 4 * n]),
        "alltoall-long" => comm.alltoall(&vec![me; 4000 * n], &mut vec![0; 4000 * n]),
        "alltoall-short" => comm.alltoall(&vec![me; 128 * n], &mut vec![0; 128 * n]),
        "alltoall-pulled" => comm.alltoall(&vec![me; 16_000 * n], &mut vec![0; 16_000 * n]),
        "scan" => comm.scan(&small, &mut [0; 4], Op::Sum),
        "exscan" => comm.exscan(&small, &mut [0; 4], Op::Sum).map(|_| ()),
        "gatherv" => {
            comm.gatherv(&small, &mut vec![0; 4 * n], &[4].repeat(n), &(0..n).map(|i| 4 * i).collect::<Vec<_>>(), root)
        }
        "allgatherv" => {
            comm.allgatherv(&small, &mut vec![0; 4 * n], &[4].repeat(n), &(0..n).map(|i| 4 * i).collect::<Vec<_>>())
        }
        "alltoallv" => {
            let (c, d) = ([4].repeat(n), (0..n).map(|i| 4 * i).collect::<Vec<_>>());
            comm.alltoallv(&vec![me; 4 * n], &c, &d, &mut vec![0; 4 * n], &c, &d)
        }
        "reduce_scatter" => comm.reduce_scatter(&vec![me; 4 * n], &mut [0; 4], &[4].repeat(n), Op::Sum),
        "ibarrier" => runthrough::scope(|s| comm.ibarrier(s)?.wait()),
        "ibcast" => {
            let mut b = [me; 16];
            runthrough::scope(|s| comm.ibcast(s, &mut b, root)?.wait())
        }
        "ireduce" => {
            let mut out = [0; 4];
            runthrough::scope(|s| comm.ireduce(s, &small, &mut out, Op::Sum, root)?.wait())
        }
        "iallreduce" => {
            // Two in flight, completed in the opposite order.
            let (mut a, mut b) = ([0; 4], [0; 4]);
            runthrough::scope(|s| {
                let ra = comm.iallreduce(s, &small, &mut a, Op::Sum)?;
                let rb = comm.iallreduce(s, &small, &mut b, Op::Max)?;
                let second = rb.wait();
                ra.wait().and(second)
            })
        }
        "validate" | "ivalidate" => Ok(()),
        other => {
            eprintln!("barrier_recovery: unknown op {other}");
            std::process::exit(2);
        }
    }
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let victim: Option<usize> = args.get(1).and_then(|a| a.parse().ok());
    let iters: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(50);
    let op = args.get(3).map_or("barrier", String::as_str);
    let inside = args.iter().skip(4).any(|a| a == "inside");
    let root: usize = args.iter().skip(4).find_map(|a| a.parse().ok()).unwrap_or(0);
    let rt = runthrough::init()?;
    let comm = rt.world();
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let rank = comm.rank();
    let mut failed = comm.validate()?;
    let mut errors = 0;
    // The first iteration that begins with the victim recognised as failed.
    let mut recognised_from: Option<usize> = None;
    for i in 0..iters {
        let dying = Some(rank) == victim && i == iters / 2;
        if dying && !inside {
            die();
        }
        let r = step(&comm, op, root, if dying { 1 } else { 0 });
        if dying {
            eprintln!("barrier_recovery: rank {rank} left {op} alive: the kill inside it missed");
            std::process::exit(4);
        }
        if let Some(from) = recognised_from.filter(|&f| i >= f) {
            // R20: a failed root is an error; with a live root the failed member is
            // excluded and the collective succeeds.
            let root_failed = rooted(op) && failed.world_ranks().contains(&root);
            if r.is_ok() == root_failed {
                eprintln!(
                    "barrier_recovery: rank {rank} iteration {i} ({} after the failure was recognised in \
                     iteration {from}): {op} root {root} returned {r:?}",
                    i - from
                );
                std::process::exit(3);
            }
        }
        if r.is_err() {
            errors += 1;
        }
        let now = if op == "ivalidate" {
            // R21: the agreement runs while this member polls.
            let mut req = comm.ivalidate()?;
            loop {
                if let Some(g) = req.test()? {
                    break g;
                }
                std::thread::yield_now();
            }
        } else {
            comm.validate()?
        };
        if now.compare(&failed) != GroupOrder::Ident {
            // A new failure: every survivor learns it in this same iteration.
            failed = now;
            recognised_from = Some(i + 1);
        }
    }
    println!(
        "barrier_recovery: rank {rank} done {iters} iterations, failed {:?}, barrier errors {errors}",
        failed.world_ranks()
    );
    rt.finalize()
}
