//! Micro benches of the detector: the failure-free cost of one heartbeat period, and the
//! cost of handling a failure notice (forwarding to the fingers).

// `criterion_group!` generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use runthrough_ft::{Config, Detector, Msg, Time};

fn one_period(c: &mut Criterion) {
    let cfg = Config::default();
    let period = cfg.period();
    let mut det = Detector::new(5, 64, cfg, Time::ZERO);
    while det.poll_transmit().is_some() {}
    let mut now = Time::ZERO;
    c.bench_function("detector/one_heartbeat_period", |b| {
        b.iter(|| {
            now += period;
            det.handle_message(4, Msg::Heartbeat, now);
            det.handle_timeout(now);
            while let Some(t) = det.poll_transmit() {
                black_box(t);
            }
            black_box(det.poll_timeout())
        })
    });
}

fn notice(c: &mut Criterion) {
    for n in [64u32, 65_536] {
        let base = Detector::new(0, n, Config::default(), Time::ZERO);
        c.bench_function(&format!("detector/handle_notice/n={n}"), |b| {
            b.iter_batched(
                || base.clone(),
                |mut det| {
                    det.handle_message(
                        1,
                        Msg::Notice { failed: n / 2, hops: 3 },
                        Time::from_duration(Duration::from_millis(1)),
                    );
                    while let Some(t) = det.poll_transmit() {
                        black_box(t);
                    }
                    black_box(det.poll_event())
                },
                BatchSize::SmallInput,
            )
        });
    }
}

fn codec(c: &mut Criterion) {
    let msg = Msg::Notice { failed: 12345, hops: 7 };
    let mut buf = Vec::with_capacity(Msg::MAX_ENCODED_LEN);
    c.bench_function("msg/encode_decode_notice", |b| {
        b.iter(|| {
            buf.clear();
            black_box(msg).encode(&mut buf);
            black_box(Msg::decode(&buf))
        })
    });
}

criterion_group!(benches, one_period, notice, codec);
criterion_main!(benches);
