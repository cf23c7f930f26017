//! Two threads on two cores bounce one record back and forth through a pair of rings: the
//! rings' own one-way latency, without the engine (what bounds the engine's 8 B
//! `osu_latency` from below). `cargo run --release -p runthrough-shm --example
//! ring_pingpong -- [HEAD BODY [N]]`.
use std::time::Instant;

use runthrough_shm::ring::channel;

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).map(|a| a.parse().expect("number")).collect();
    let head_len = args.first().copied().unwrap_or(24);
    let body_len = args.get(1).copied().unwrap_or(8);
    let n = args.get(2).copied().unwrap_or(2_000_000);
    let (mut ping_tx, mut ping_rx) = channel(256 * 1024);
    let (mut pong_tx, mut pong_rx) = channel(256 * 1024);
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    let (c0, c1) = (cores.first().copied(), cores.get(1).copied());
    let head = vec![0xA5u8; head_len];
    let body = vec![0x5Au8; body_len];
    let (h2, b2) = (head.clone(), body.clone());
    let echo = std::thread::spawn(move || {
        if let Some(c) = c1 {
            core_affinity::set_for_current(c);
        }
        for _ in 0..n {
            loop {
                if let Some(Ok(_)) = ping_rx.peek() {
                    ping_rx.pop();
                    break;
                }
                std::hint::spin_loop();
            }
            while pong_tx.try_push(&h2, &b2).is_err() {
                std::hint::spin_loop();
            }
        }
    });
    if let Some(c) = c0 {
        core_affinity::set_for_current(c);
    }
    let t = Instant::now();
    for _ in 0..n {
        while ping_tx.try_push(&head, &body).is_err() {
            std::hint::spin_loop();
        }
        loop {
            if let Some(Ok(_)) = pong_rx.peek() {
                pong_rx.pop();
                break;
            }
            std::hint::spin_loop();
        }
    }
    let s = t.elapsed().as_secs_f64();
    echo.join().expect("echo");
    println!("head {head_len} body {body_len}: {:.3} us one way", s / n as f64 / 2.0 * 1e6);
}
