//! Micro bench of the SPSC cell ring: one push + one pop (single thread) per iteration,
//! for 8, 64 and 1024-byte records (an 8-byte header plus the rest as body).
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use runthrough_shm::ring::channel;

fn push_pop(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_push_pop");
    for size in [8usize, 64, 1024] {
        let (mut tx, mut rx) = channel(1 << 16);
        let head = [0xA5u8; 8];
        let body = vec![0x5Au8; size - head.len()];
        g.throughput(Throughput::Bytes(size as u64));
        g.bench_with_input(BenchmarkId::from_parameter(size), &size, |b, _| {
            b.iter(|| {
                tx.try_push(black_box(&head), black_box(&body)).expect("ring has room");
                let rec = rx.peek().expect("record").expect("valid");
                black_box(rec[0]);
                rx.pop();
            })
        });
    }
    g.finish();
}

criterion_group!(benches, push_pop);
criterion_main!(benches);
