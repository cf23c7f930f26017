//! Failure-free cost of the fault-tolerant operations next to a plain collective, on the
//! same ranks in one run: `validate` (the uniform agreement), `split` (exchange +
//! agreement, then the new communicator is dropped), `agree`, and an 8-byte `allreduce`.
//! Each operation is timed alone, followed by an untimed barrier, averaged over ranks.
//!
//! `rtrun -n N target/release/ft_validate [-i ITERS] [-x WARMUP]`; rank 0 prints an
//! OSU-style table: `# Operation  Ranks  Avg Latency(us)`.

use std::time::Instant;

use runthrough::{Comm, Error, Op};
use runthrough_bench::{op_latency_us, Iterations};

fn time(world: &Comm, it: Iterations, mut op: impl FnMut() -> Result<(), Error>) -> Result<f64, Error> {
    let mut total = 0.0;
    for i in 0..it.warmup + it.timed {
        world.barrier()?;
        let t0 = Instant::now();
        op()?;
        if i >= it.warmup {
            total += t0.elapsed().as_secs_f64();
        }
    }
    let mine = [op_latency_us(std::time::Duration::from_secs_f64(total), it.timed)];
    let mut sum = [0.0f64];
    world.allreduce(&mine, &mut sum, Op::Sum)?;
    Ok(sum[0] / world.size() as f64)
}

fn arg(args: &[String], flag: &str, default: usize) -> usize {
    args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("usage: rtrun -n N ft_validate [-i ITERS] [-x WARMUP]");
        return Ok(());
    }
    let it = Iterations { timed: arg(&args, "-i", 1000), warmup: arg(&args, "-x", 100) };
    let rt = runthrough::init()?;
    let world = rt.world();
    let validate = time(&world, it, || world.validate().map(|_| ()))?;
    let split = time(&world, it, || world.split(Some(0), 0).map(|_| ()))?;
    let agree = time(&world, it, || world.agree(1).map(|_| ()))?;
    let allreduce = time(&world, it, || world.allreduce(&[1u64], &mut [0u64], Op::Sum))?;
    if world.rank() == 0 {
        println!("# runthrough fault-tolerance operations, failure-free ({} ranks)", world.size());
        println!("# Operation        Ranks    Avg Latency(us)");
        for (name, v) in [("validate", validate), ("split", split), ("agree", agree), ("allreduce-8B", allreduce)] {
            println!("{name:<16}{:>7}{v:>19.2}", world.size());
        }
    }
    rt.finalize()
}
