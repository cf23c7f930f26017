//! The ULFM recovery loop (R29): an iterative computation that loses a rank, revokes,
//! shrinks, and finishes on the survivors with the right result.
//!
//! `rtrun -n 6 --kill 3@300ms ulfm_shrink` — the job sums f(k) = (k·k) mod 1,000,003
//! for k < 4,000 in 40 blocks; block b is shared out over the current communicator
//! (member r takes the k ≡ r mod size) and combined with an allreduce; a block takes
//! about 20 ms, so the kill lands mid-run. When an allreduce fails (a member died, or
//! another member revoked), each survivor revokes, shrinks, and agrees with the others
//! on how many blocks everyone has (the minimum: blocks some members finished and others
//! did not are redone). Each survivor prints
//! `ulfm_shrink: rank R of S result X` (S = 5 after one kill) and checks X against the
//! serial sum. A kill that lands during start-up (as over tcp, whose start-up is
//! slower) is handled the same way: the world then starts with a failed member, and the
//! computation starts on its shrunk copy.

use std::time::Duration;

use runthrough::{Comm, Error, ErrorMode, Op};

const ITEMS: u64 = 4000;
const BLOCKS: u64 = 40;

fn f(k: u64) -> u64 {
    (k * k) % 1_000_003
}

fn block_share(comm: &Comm, b: u64) -> u64 {
    let per = ITEMS / BLOCKS;
    let (me, size) = (comm.rank() as u64, comm.size() as u64);
    (b * per..(b + 1) * per).filter(|k| k % size == me).map(f).sum()
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    // A rank killed during start-up (R31) leaves a world with a failed member, which
    // dup refuses (R23): start from the shrunk world then.
    let mut comm = match world.dup() {
        Ok(c) => c,
        Err(_) => world.shrink()?,
    };
    drop(world);
    let mut sums: Vec<u64> = Vec::new();
    while (sums.len() as u64) < BLOCKS {
        let b = sums.len() as u64;
        std::thread::sleep(Duration::from_millis(20));
        let mut total = [0u64];
        match comm.allreduce(&[block_share(&comm, b)], &mut total, Op::Sum) {
            Ok(()) => sums.push(total[0]),
            Err(Error::RankFailStop { .. } | Error::Revoked | Error::InStatus { .. }) => {
                // Recover: make every member stop using the old communicator, drop the
                // dead, and agree on the blocks everyone has.
                comm.revoke();
                comm = comm.shrink()?;
                let mut done = [0u64];
                comm.allreduce(&[sums.len() as u64], &mut done, Op::Min)?;
                sums.truncate(done[0] as usize);
            }
            Err(e) => return Err(e),
        }
    }
    let result: u64 = sums.iter().sum();
    let expected: u64 = (0..ITEMS).map(f).sum();
    if result != expected {
        eprintln!("ulfm_shrink: rank {} result {result}, expected {expected}", comm.rank());
        std::process::exit(3);
    }
    println!("ulfm_shrink: rank {} of {} result {result}", comm.rank(), comm.size());
    drop(comm);
    rt.finalize()
}
