//! Ping-pong between ranks 0 and 1 for a few sizes; prints the half round-trip time.
//! Other ranks idle. `rtrun -n 2 target/release/examples/pingpong`

use std::time::Instant;

fn main() -> Result<(), runthrough::Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    if world.size() < 2 {
        eprintln!("pingpong needs at least 2 ranks");
        std::process::exit(2);
    }
    let rank = world.rank();
    let iters = 1000;
    let mut buf = vec![0u8; 1 << 20];
    for size in [0usize, 8, 1024, 65536, 1 << 20] {
        let msg = &mut buf[..size];
        world.barrier()?;
        let t0 = Instant::now();
        for i in 0..iters {
            match rank {
                0 => {
                    msg.iter_mut().for_each(|b| *b = i as u8);
                    world.send(msg, 1, 1)?;
                    world.recv(msg, 1, 1)?;
                    assert!(msg.iter().all(|&b| b == (i as u8).wrapping_add(1)), "pong carries ping + 1");
                }
                1 => {
                    world.recv(msg, 0, 1)?;
                    msg.iter_mut().for_each(|b| *b = b.wrapping_add(1));
                    world.send(msg, 0, 1)?;
                }
                _ => break,
            }
        }
        if rank == 0 {
            let us = t0.elapsed().as_secs_f64() * 1e6 / (2.0 * iters as f64);
            println!("pingpong {size:>8} B  {us:>10.2} us");
        }
    }
    rt.finalize()
}
