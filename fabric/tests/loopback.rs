//! Loopback data tests per provider (T1): two endpoints in one process, each with its own
//! fabric and domain, pinned to 127.0.0.1. Tagged send/recv (small and 1 MiB), tagged and
//! untagged inject, untagged send/recv, and an RMA read of a registered buffer. A provider
//! that is not present is skipped (`common::skip`: a failure unless `RT_EXPECTED_SKIPS`
//! names it).

mod common;

use std::time::Duration;

use common::{drive, open_node, pattern, post_retry, Node};
use runthrough_fabric::{Access, CqEvent, FiAddr, MemoryRegion, MrCache, OpContext, Provider};

const TIMEOUT: Duration = Duration::from_secs(20);
const MIB: usize = 1 << 20;

fn connect(a: &Node, b: &Node) -> (FiAddr, FiAddr) {
    let b_at_a = a.av.insert(&b.ep.name().unwrap()).unwrap();
    let a_at_b = b.av.insert(&a.ep.name().unwrap()).unwrap();
    (b_at_a, a_at_b)
}

fn done_ctx(events: &[CqEvent], ctx: OpContext) -> bool {
    events.iter().any(|e| match e {
        CqEvent::Done(d) => d.context == ctx,
        CqEvent::Failed(f) => panic!("operation failed: {f}"),
    })
}

fn tagged(p: Provider, len: usize) {
    // Buffers are declared before the nodes so that they outlive the endpoints even on panic.
    let data = pattern(len, 3);
    let mut rx = vec![0u8; len];
    let Some(a) = open_node(p) else { return };
    let Some(b) = open_node(p) else { return };
    let (b_addr, _) = connect(&a, &b);
    let (send_ctx, recv_ctx) = (OpContext(1), OpContext(2));
    // SAFETY: `rx` and `data` outlive the endpoints (declared before them).
    unsafe {
        post_retry(&[&a, &b], || b.ep.trecv(&mut rx, None, FiAddr::UNSPEC, 0x77, 0, recv_ctx));
        post_retry(&[&a, &b], || a.ep.tsend(&data, None, b_addr, 0x77, send_ctx));
    }
    let seen = drive(&[&a, &b], TIMEOUT, |s| done_ctx(&s[0], send_ctx) && done_ctx(&s[1], recv_ctx));
    let CqEvent::Done(r) = seen[1].iter().find(|e| e.context() == recv_ctx).unwrap() else { unreachable!() };
    assert_eq!((r.len, r.tag), (len, 0x77));
    assert!(r.flags.is_recv() && r.flags.is_tagged());
    assert!(rx == data, "payload mismatch for {len} bytes over {p}");
    drop((a, b));
}

fn inject(p: Provider) {
    let mut rx = vec![0u8; 64];
    let mut rx2 = vec![0u8; 64];
    let Some(a) = open_node(p) else { return };
    let Some(b) = open_node(p) else { return };
    let (b_addr, _) = connect(&a, &b);
    let n = a.sel.inject_bytes.min(32);
    let data = pattern(n, 9);
    // SAFETY: the receive buffers outlive the completions waited for below.
    unsafe {
        post_retry(&[&a, &b], || b.ep.trecv(&mut rx, None, FiAddr::UNSPEC, 5, 0, OpContext(10)));
        post_retry(&[&a, &b], || b.ep.recv(&mut rx2, None, FiAddr::UNSPEC, OpContext(11)));
    }
    post_retry(&[&a, &b], || a.ep.tinject(&data, b_addr, 5));
    post_retry(&[&a, &b], || a.ep.inject(&data[..n / 2], b_addr));
    let seen = drive(&[&a, &b], TIMEOUT, |s| done_ctx(&s[1], OpContext(10)) && done_ctx(&s[1], OpContext(11)));
    // Injects generate no completion at the sender.
    assert!(seen[0].is_empty(), "inject produced completions: {:?}", seen[0]);
    assert_eq!(&rx[..n], &data[..]);
    assert_eq!(&rx2[..n / 2], &data[..n / 2]);
    drop((a, b));
}

fn msg_send_recv(p: Provider) {
    let data = pattern(4000, 1);
    let mut rx = vec![0u8; 4096];
    let Some(a) = open_node(p) else { return };
    let Some(b) = open_node(p) else { return };
    let (b_addr, _) = connect(&a, &b);
    // SAFETY: buffers outlive the completions waited for below.
    unsafe {
        post_retry(&[&a, &b], || b.ep.recv(&mut rx, None, FiAddr::UNSPEC, OpContext(21)));
        post_retry(&[&a, &b], || a.ep.send(&data, None, b_addr, OpContext(20)));
    }
    let seen = drive(&[&a, &b], TIMEOUT, |s| done_ctx(&s[0], OpContext(20)) && done_ctx(&s[1], OpContext(21)));
    let CqEvent::Done(r) = &seen[1][0] else { unreachable!() };
    assert_eq!(r.len, 4000);
    assert!(!r.flags.is_tagged());
    assert_eq!(&rx[..4000], &data[..]);
    drop((a, b));
}

fn rma_read(p: Provider) {
    // `a` exposes a 1 MiB buffer through its registration cache; `b` pulls it (rendezvous).
    let exposed = pattern(MIB, 42);
    let mut dst = vec![0u8; MIB];
    let Some(a) = open_node(p) else { return };
    let Some(b) = open_node(p) else { return };
    let (_, a_at_b) = connect(&a, &b);
    let mut cache = MrCache::new(&a.domain, Some(&a.ep), Access::REMOTE_READ | Access::SEND, 4);
    // SAFETY: `exposed` outlives the cache and every handle (dropped explicitly below).
    let src_mr = unsafe { cache.get(exposed.as_ptr(), exposed.len()) }.unwrap();
    // A second half read through a sub-range of the same registration (cache hit).
    // SAFETY: as above.
    let sub = unsafe { cache.get(exposed.as_ptr().wrapping_add(MIB / 2), MIB / 2) }.unwrap();
    assert_eq!(cache.stats().hits, 1);
    let whole = src_mr.remote_access(exposed.as_ptr(), MIB).unwrap();
    let half = sub.remote_access(exposed.as_ptr().wrapping_add(MIB / 2), MIB / 2).unwrap();
    // SAFETY: `dst` outlives the local region and the reads waited for below.
    let dst_mr =
        unsafe { MemoryRegion::register(&b.domain, Some(&b.ep), dst.as_ptr(), dst.len(), Access::READ) }.unwrap();
    let desc = b.sel.mr.local_desc.then(|| dst_mr.desc());
    let (first, second) = dst.split_at_mut(MIB / 2);
    // SAFETY: both halves outlive the completions waited for below.
    unsafe {
        post_retry(&[&a, &b], || b.ep.read(first, desc, a_at_b, whole, OpContext(31)));
        post_retry(&[&a, &b], || b.ep.read(second, desc, a_at_b, half, OpContext(32)));
    }
    let seen = drive(&[&a, &b], TIMEOUT, |s| done_ctx(&s[1], OpContext(31)) && done_ctx(&s[1], OpContext(32)));
    for e in &seen[1] {
        let CqEvent::Done(d) = e else { unreachable!() };
        assert!(d.flags.is_read(), "{d:?}");
    }
    assert!(dst[..MIB / 2] == exposed[..MIB / 2], "first half");
    assert!(dst[MIB / 2..] == exposed[MIB / 2..], "second half");
    drop((dst_mr, src_mr, sub, cache, a, b));
}

#[test]
fn tcp_tagged_small() {
    tagged(Provider::Tcp, 13);
}
#[test]
fn tcp_tagged_1mib() {
    tagged(Provider::Tcp, MIB);
}
#[test]
fn tcp_inject() {
    inject(Provider::Tcp);
}
#[test]
fn tcp_msg_send_recv() {
    msg_send_recv(Provider::Tcp);
}
#[test]
fn tcp_rma_read() {
    rma_read(Provider::Tcp);
}
#[test]
fn sockets_tagged_small() {
    tagged(Provider::Sockets, 13);
}
#[test]
fn sockets_tagged_1mib() {
    tagged(Provider::Sockets, MIB);
}
#[test]
fn sockets_inject() {
    inject(Provider::Sockets);
}
#[test]
fn sockets_msg_send_recv() {
    msg_send_recv(Provider::Sockets);
}
#[test]
fn sockets_rma_read() {
    rma_read(Provider::Sockets);
}
