//! Micro benches of the agreement: one failure-free agreement among 8 and 1024
//! processes, all state machines in memory, messages shuttled through a queue (and
//! through the byte codec).

// `criterion_group!` generates an undocumented `pub fn benches`.
#![allow(missing_docs)]

use std::collections::VecDeque;
use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use runthrough_ft::{AgreeMsg, Agreement, Participants, Time};

/// Runs one agreement to completion; returns the number of messages.
fn agree_once(parts: &Arc<Participants>, instance: u64, wire: &mut Vec<u8>) -> usize {
    let n = parts.len();
    let mut all: Vec<Agreement> =
        (0..n).map(|r| Agreement::new(parts.clone(), r, instance, !0 ^ (r & 1), &[], Time::ZERO)).collect();
    let mut queue = VecDeque::new();
    let mut messages = 0;
    for (r, a) in all.iter_mut().enumerate() {
        while let Some((to, m)) = a.poll_transmit() {
            queue.push_back((r as u32, to, m));
        }
    }
    while let Some((from, to, m)) = queue.pop_front() {
        messages += 1;
        wire.clear();
        m.encode(wire);
        let m = AgreeMsg::decode(wire).expect("own encoding");
        let a = &mut all[to as usize];
        a.handle_message(from, m, Time::ZERO);
        while let Some((next, m)) = a.poll_transmit() {
            queue.push_back((to, next, m));
        }
    }
    for a in &mut all {
        black_box(a.poll_decision().expect("decided"));
    }
    messages
}

fn failure_free(c: &mut Criterion) {
    let mut wire = Vec::new();
    for n in [8u32, 1024] {
        let parts = Arc::new(Participants::world(n));
        let mut instance = 0;
        c.bench_function(&format!("agree/failure_free/n={n}"), |b| {
            b.iter(|| {
                instance += 1;
                black_box(agree_once(&parts, instance, &mut wire))
            })
        });
    }
}

criterion_group!(benches, failure_free);
criterion_main!(benches);
