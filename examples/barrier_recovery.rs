//! seeds/000 Example 17.6, ported: a loop of barriers where a process may fail. After
//! each barrier every process validates: the validate is uniform, so all see the same
//! failed group and know whether a new failure happened, though the barrier itself may
//! have succeeded at some and failed at others.
//!
//! `rtrun -n 4 barrier_recovery [VICTIM] [ITERS] [OP]`: the victim SIGKILLs itself
//! halfway. OP (default `barrier`) picks the collective of the loop, so the same recovery
//! is exercised with a kill inside every algorithm: `barrier`, `bcast`, `reduce`,
//! `allreduce` (short: recursive doubling), `allreduce-mid` (32 KB: reduce + bcast),
//! `allreduce-long` (direct reduce-scatter + allgather on up to 8 members, else ring),
//! `reduce-long`, `bcast-long` (pulled in place by CMA on one node), `allgather-long`, `dup`, `split`, `create`, `gather`, `scatter`,
//! `allgather`, `alltoall`, `scan`, `exscan`, `gatherv`, `allgatherv`, `alltoallv`,
//! `reduce_scatter`, the nonblocking `ibarrier`, `ibcast`, `ireduce`, `iallreduce`,
//! or `validate` / `ivalidate` (nothing but the validate, blocking or nonblocking: the
//! victim dies between two of them, so the kill lands inside the agreement).
//! Prints `barrier_recovery: rank r done ITERS iterations, failed [..]` per survivor.

use runthrough::{Comm, Error, ErrorMode, GroupOrder, Op};

/// One collective of the loop.
fn step(comm: &Comm, op: &str) -> Result<(), Error> {
    let n = comm.size();
    let me = comm.rank() as u64;
    let small = [me; 4];
    let long = vec![me; 40_000];
    match op {
        "barrier" => comm.barrier(),
        "bcast" => comm.bcast(&mut [me; 16], 0),
        "bcast-long" => {
            // Root 0 sends zeros: a broadcast that succeeds delivered them whole.
            let mut b = long.clone();
            comm.bcast(&mut b, 0)?;
            assert!(b.iter().all(|&x| x == 0), "bcast-long delivered wrong data");
            Ok(())
        }
        "reduce" => comm.reduce(&small, &mut [0; 4], Op::Sum, 0),
        "allreduce" => comm.allreduce(&small, &mut [0; 4], Op::Sum),
        "allreduce-long" => {
            // Every slice is combined by another member: a success is whole (one value
            // everywhere, some member's rank).
            let mut out = vec![u64::MAX; long.len()];
            comm.allreduce(&long, &mut out, Op::Max)?;
            assert!(out.iter().all(|&x| x == out[0]) && out[0] < n as u64, "allreduce-long torn: {}", out[0]);
            Ok(())
        }
        "reduce-long" => {
            let mut out = vec![u64::MAX; long.len()];
            comm.reduce(&long, &mut out, Op::Sum, 0)?;
            let whole = out.iter().all(|&x| x == out[0]) && out[0] < (n * n) as u64;
            assert!(comm.rank() != 0 || whole, "reduce-long torn at the root: {}", out[0]);
            Ok(())
        }
        "allreduce-mid" => comm.allreduce(&long[..4000], &mut vec![0; 4000], Op::Min),
        // Creation under failure (R23, R24): the new communicator is used and freed.
        "dup" => comm.dup().and_then(|c| c.barrier()),
        "split" => comm.split(Some((me % 2) as u32), 0).map(drop),
        "create" => comm.create(&comm.group()).map(drop),
        "gather" => comm.gather(&small, &mut vec![0; 4 * n], 0),
        "scatter" => comm.scatter(&vec![me; 4 * n], &mut [0; 4], 0),
        "allgather" => comm.allgather(&small, &mut vec![0; 4 * n]),
        "allgather-long" => comm.allgather(&long[..4000], &mut vec![0; 4000 * n]),
        "alltoall" => comm.alltoall(&vec![me; 4 * n], &mut vec![0; 4 * n]),
        "scan" => comm.scan(&small, &mut [0; 4], Op::Sum),
        "exscan" => comm.exscan(&small, &mut [0; 4], Op::Sum).map(|_| ()),
        "gatherv" => {
            comm.gatherv(&small, &mut vec![0; 4 * n], &[4].repeat(n), &(0..n).map(|i| 4 * i).collect::<Vec<_>>(), 0)
        }
        "allgatherv" => {
            comm.allgatherv(&small, &mut vec![0; 4 * n], &[4].repeat(n), &(0..n).map(|i| 4 * i).collect::<Vec<_>>())
        }
        "alltoallv" => {
            let (c, d) = ([4].repeat(n), (0..n).map(|i| 4 * i).collect::<Vec<_>>());
            comm.alltoallv(&vec![me; 4 * n], &c, &d, &mut vec![0; 4 * n], &c, &d)
        }
        "reduce_scatter" => comm.reduce_scatter(&vec![me; 4 * n], &mut [0; 4], &[4].repeat(n), Op::Sum),
        "ibarrier" => comm.ibarrier()?.wait(),
        "ibcast" => comm.ibcast(&mut [me; 16], 0)?.wait(),
        "ireduce" => comm.ireduce(&small, &mut [0; 4], Op::Sum, 0)?.wait(),
        "iallreduce" => {
            // Two in flight, completed in the opposite order.
            let (mut a, mut b) = ([0; 4], [0; 4]);
            let ra = comm.iallreduce(&small, &mut a, Op::Sum)?;
            let rb = comm.iallreduce(&small, &mut b, Op::Max)?;
            let second = rb.wait();
            ra.wait().and(second)
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
    let rt = runthrough::init()?;
    let comm = rt.world();
    comm.set_error_mode(ErrorMode::ErrorsReturn);
    let rank = comm.rank();
    let mut failed = comm.validate()?;
    let mut errors = 0;
    for i in 0..iters {
        if Some(rank) == victim && i == iters / 2 {
            let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
            std::thread::sleep(std::time::Duration::from_secs(10));
        }
        if step(&comm, op).is_err() {
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
        }
    }
    println!(
        "barrier_recovery: rank {rank} done {iters} iterations, failed {:?}, barrier errors {errors}",
        failed.world_ranks()
    );
    rt.finalize()
}
