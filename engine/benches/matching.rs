//! Matching cost: posting a receive and matching an arrival, with short and long queues.
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion};
use runthrough_engine::matching::{Arrival, Pattern, PostedQueue, UnexpectedQueue};
use runthrough_engine::{ContextId, Tag};

fn bench(c: &mut Criterion) {
    let ctx = ContextId(0);
    let mut g = c.benchmark_group("matching");
    for depth in [0usize, 8, 64] {
        g.bench_with_input(BenchmarkId::new("posted_hit_after", depth), &depth, |b, &depth| {
            let mut q = PostedQueue::default();
            for i in 0..depth {
                q.post(Pattern { ctx, src: Some(1), tag: Some(Tag(1000 + i as i32)) }, i);
            }
            let a = Arrival { ctx, src: 1, tag: Tag(7) };
            b.iter(|| {
                q.post(Pattern { ctx, src: None, tag: Some(Tag(7)) }, usize::MAX);
                black_box(q.take_match(black_box(&a)))
            })
        });
        g.bench_with_input(BenchmarkId::new("unexpected_hit_after", depth), &depth, |b, &depth| {
            let mut q = UnexpectedQueue::default();
            for i in 0..depth {
                q.push(Arrival { ctx, src: 2, tag: Tag(i as i32) }, i);
            }
            let p = Pattern { ctx, src: Some(1), tag: None };
            b.iter(|| {
                q.push(Arrival { ctx, src: 1, tag: Tag(5) }, usize::MAX);
                black_box(q.take_match(black_box(&p)))
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
