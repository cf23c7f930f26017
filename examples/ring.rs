//! A token travels around all ranks: rank 0 starts it at 0, every rank adds its rank,
//! and rank 0 prints the final value (the sum 0 + 1 + ... + (n-1)).
//!
//! `rtrun -n 4 target/release/examples/ring [laps]`

fn main() -> Result<(), runthrough::Error> {
    let laps: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1);
    let rt = runthrough::init()?;
    let world = rt.world();
    let (rank, size) = (world.rank(), world.size());
    if rank == 0 {
        println!("ring: rank 0: {}", rt.describe());
    }
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    let mut token = [0u64];
    for lap in 0..laps {
        if rank == 0 {
            world.send(&token, next, 0)?;
            world.recv(&mut token, prev, 0)?;
        } else {
            world.recv(&mut token, prev, 0)?;
            token[0] += rank as u64;
            world.send(&token, next, 0)?;
        }
        if rank == 0 && lap + 1 == laps {
            println!("ring: {size} ranks, {laps} lap(s), final token {}", token[0]);
        }
    }
    rt.finalize()
}
