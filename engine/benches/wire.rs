//! Header encode/decode cost (the per-message codec on the hot path).
#![allow(missing_docs)]

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use runthrough_engine::wire::{Envelope, Header, MAX_HEADER_BYTES};
use runthrough_engine::{ContextId, RemoteRegion, ReqId, Seq, Tag};

fn bench(c: &mut Criterion) {
    let env = Envelope { ctx: ContextId(2), src: 3, tag: Tag(99), seq: Seq(12345) };
    let eager = Header::Eager { env, len: 8 };
    let rts = Header::Rts {
        env,
        len: 1 << 20,
        sreq: ReqId { index: 7, gen: 3 },
        region: RemoteRegion { addr: 0x7fff_1234_0000, len: 1 << 20, key: 0 },
        pull: Some(false),
    };
    let mut buf = [0u8; MAX_HEADER_BYTES];
    c.bench_function("wire/encode_eager", |b| b.iter(|| black_box(black_box(&eager).encode(&mut buf))));
    c.bench_function("wire/encode_rts", |b| b.iter(|| black_box(black_box(&rts).encode(&mut buf))));
    let mut rec = [0u8; MAX_HEADER_BYTES + 8];
    let n = eager.encode((&mut rec[..MAX_HEADER_BYTES]).try_into().unwrap());
    let rec = &rec[..n + 8];
    c.bench_function("wire/decode_eager", |b| b.iter(|| black_box(Header::decode(black_box(rec)).is_ok())));
}

criterion_group!(benches, bench);
criterion_main!(benches);
