//! Two threads on two cores stream records through one ring: the ring's own message
//! rate, without the engine (what bounds the engine's 8 B message rate from below). `cargo run --release -p runthrough-shm --example
//! ring_stream -- [HEAD BODY [N]]`.
use std::time::Instant;

use runthrough_shm::ring::channel;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("number")).collect();
    let head_len = args.first().copied().unwrap_or(24);
    let body_len = args.get(1).copied().unwrap_or(8);
    let n = args.get(2).copied().unwrap_or(20_000_000);
    let (mut tx, mut rx) = channel(256 * 1024);
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let c0 = cores.first().copied();
    let c1 = cores.get(1).copied();
    let head = vec![0xA5u8; head_len];
    let body = vec![0x5Au8; body_len];
    let t = Instant::now();
    let prod = std::thread::spawn(move || {
        if let Some(c) = c0 {
            core_affinity::set_for_current(c);
        }
        for _ in 0..n {
            while tx.try_push(&head, &body).is_err() {
                std::hint::spin_loop();
            }
        }
    });
    if let Some(c) = c1 {
        core_affinity::set_for_current(c);
    }
    let mut sum = 0u64;
    let mut got = 0;
    while got < n {
        if let Some(Ok(rec)) = rx.peek() {
            sum += u64::from(rec[rec.len() - 1]);
            rx.pop();
            got += 1;
        }
    }
    prod.join().expect("producer");
    let s = t.elapsed().as_secs_f64();
    println!("head {head_len} body {body_len}: {:.2} M rec/s (sum {sum})", n as f64 / s / 1e6);
}
