//! The libfabric adapter with two transports (or two engines) in one process, pinned to
//! loopback, over `tcp;ofi_rxm` and `sockets` (T1): eager records
//! (inject and bounce paths, self included), back-pressure (`Busy` once the credit window
//! is spent, sends resume after the receiver drains), a stalled peer surfacing as
//! `PeerError`, malformed frames dropped and counted, and whole engines running eager and
//! RMA-read rendezvous traffic, including a flood of unexpected messages. A provider that
//! is not present here is skipped as `provider-tcp` / `provider-sockets`
//! (`tests/common/skip.rs`: a failure unless `RT_EXPECTED_SKIPS` names it).

#[path = "../../tests/common/skip.rs"]
mod skip;

use runthrough_engine::SendTarget;
use std::sync::Once;
use std::time::{Duration, Instant};

use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::fabric::{FabricConfig, FabricTransport, Hints, Provider, ProviderRequest};
use runthrough_engine::transport::{AnyTransport, Event, Posted, Transport, TransportError};
use runthrough_engine::types::OpId;
use runthrough_engine::{irecv, isend, scope, Config, ContextId, Engine, Error, Rank, Request, Tag};

const CTX: ContextId = ContextId(0);
const LIMIT: Duration = Duration::from_secs(30);

fn pin_loopback() {
    static ONCE: Once = Once::new();
    // Set once, before any libfabric call of this test process.
    ONCE.call_once(|| {
        std::env::set_var("FI_TCP_IFACE", "lo");
        std::env::set_var("FI_SOCKETS_IFACE", "lo");
    });
}

/// `n` connected transports on `p`, or `None` when the provider is absent.
fn open(p: Provider, n: u32, cfg: FabricConfig) -> Option<Vec<FabricTransport>> {
    pin_loopback();
    let mut ts = Vec::new();
    for r in 0..n {
        match FabricTransport::open(ProviderRequest::Only(p), &Hints::default().loopback(), Rank(r), n, cfg) {
            Ok(t) => ts.push(t),
            Err(e) if e.to_string().contains("no libfabric provider") => {
                skip::skip(&skip::provider(p.fi_name()), &format!("provider {p} not present: {e}"));
                return None;
            }
            Err(e) => panic!("open {p}: {e}"),
        }
    }
    let addrs: Vec<Vec<u8>> = ts.iter().map(|t| t.address().unwrap()).collect();
    for t in &mut ts {
        t.connect(&addrs).unwrap();
    }
    Some(ts)
}

/// What a poll delivered, owned.
#[derive(Debug, PartialEq, Eq)]
enum Got {
    Rec(u32, Vec<u8>),
    Read(u64, Vec<u8>),
    PeerError(u32),
}

fn poll(t: &mut FabricTransport, out: &mut Vec<Got>) -> usize {
    t.poll(64, |ev| {
        out.push(match ev {
            Event::Received { peer, bytes } => Got::Rec(peer.0, bytes.to_vec()),
            Event::ReadDone { op, data } => Got::Read(op.0, data.to_vec()),
            Event::PeerError { peer, .. } => Got::PeerError(peer.0),
            Event::Sent(_) => return,
        })
    })
}

/// Polls every transport until `done(received by each)` or the deadline.
fn drive(ts: &mut [FabricTransport], done: impl FnMut(&[Vec<Got>]) -> bool) -> Vec<Vec<Got>> {
    let mut got: Vec<Vec<Got>> = ts.iter().map(|_| Vec::new()).collect();
    drive_into(ts, &mut got, done);
    got
}

/// As [`drive`], adding to what `got` already holds.
fn drive_into(ts: &mut [FabricTransport], got: &mut [Vec<Got>], mut done: impl FnMut(&[Vec<Got>]) -> bool) {
    let deadline = Instant::now() + LIMIT;
    while !done(got) {
        for (t, g) in ts.iter_mut().zip(got.iter_mut()) {
            poll(t, g);
        }
        assert!(Instant::now() < deadline, "timed out; got {:?}", summary(got));
        std::thread::yield_now();
    }
}

fn summary(got: &[Vec<Got>]) -> Vec<Vec<String>> {
    got.iter()
        .map(|g| {
            g.iter()
                .map(|x| match x {
                    Got::Rec(p, b) => format!("rec from {p}: {} bytes", b.len()),
                    other => format!("{other:?}"),
                })
                .collect()
        })
        .collect()
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

/// Sends, polling every transport into `got` while the sender is busy (the first sends
/// over `tcp;ofi_rxm` are busy until the connection is up).
fn send_retry(ts: &mut [FabricTransport], from: usize, to: u32, h: &[u8], p: &[u8], got: &mut [Vec<Got>]) {
    let deadline = Instant::now() + LIMIT;
    loop {
        match ts[from].try_send(Rank(to), h, p) {
            Ok(_) => return,
            Err(TransportError::Busy) => {
                for (t, g) in ts.iter_mut().zip(got.iter_mut()) {
                    poll(t, g);
                }
                assert!(Instant::now() < deadline, "send stayed busy");
            }
            Err(e) => panic!("send: {e}"),
        }
    }
}

fn eager_records(p: Provider) {
    let Some(mut ts) = open(p, 2, FabricConfig::default()) else { return };
    let max = ts[0].caps().max_record;
    assert_eq!(max, FabricConfig::default().bounce_bytes - 8);
    assert!(ts[0].caps().rma_read);
    // Tiny (inject), medium and largest records, to the peer and to self.
    let sizes = [0usize, 8, 40, 1000, 20_000, max - 16];
    let mut got = vec![Vec::new(), Vec::new()];
    for (i, &len) in sizes.iter().enumerate() {
        let payload = pattern(len, i as u8);
        send_retry(&mut ts, 0, 1, &[i as u8; 16], &payload, &mut got);
        send_retry(&mut ts, 0, 0, b"self", &payload, &mut got);
    }
    assert!(matches!(ts[0].try_send(Rank(1), &[0; 16], &vec![0; max]), Err(TransportError::TooLarge { .. })));
    let n = sizes.len();
    drive_into(&mut ts, &mut got, |g| g[1].len() == n && g[0].len() == n);
    for (i, &len) in sizes.iter().enumerate() {
        let mut want = vec![i as u8; 16];
        want.extend(pattern(len, i as u8));
        assert_eq!(got[1][i], Got::Rec(0, want), "record {i} of {len} bytes");
        let mut own = b"self".to_vec();
        own.extend(pattern(len, i as u8));
        assert_eq!(got[0][i], Got::Rec(0, own), "self record {i}");
    }
    assert!(ts[0].stats().injects >= 2, "{:?}", ts[0].stats());
    assert!(ts[0].stats().bounced >= 4, "{:?}", ts[0].stats());
    assert_eq!(ts[1].stats().malformed, 0);
}

/// A 4-byte record header numbering user records: its first byte is no protocol
/// control kind (`wire::is_control`), so the record counts against the credit window.
fn user_header(n: u32) -> [u8; 4] {
    let h = ((n << 8) | 0xee).to_le_bytes();
    assert!(!runthrough_engine::wire::is_control(&h));
    h
}

fn back_pressure(p: Provider) {
    let cfg = FabricConfig { credits: 8, ..FabricConfig::default() };
    let Some(mut ts) = open(p, 2, cfg) else { return };
    let window = ts[0].window();
    assert_eq!(window, 8);
    // Connect first: tcp;ofi_rxm's handshake needs the receiver's progress. The hello
    // spends one credit that usually stays owed (below the half-window return threshold).
    let mut got = vec![Vec::new(), Vec::new()];
    send_retry(&mut ts, 0, 1, b"hello", b"", &mut got);
    drive_into(&mut ts, &mut got, |g| !g[1].is_empty());
    // The receiver does not poll: the sender can put exactly the rest of its window in flight.
    let mut sent = 0u32;
    let payload = vec![7u8; 3000];
    let mut sink = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        match ts[0].try_send(Rank(1), &user_header(sent), &payload) {
            Ok(Posted::Done) => sent += 1,
            Ok(other) => panic!("{other:?}"),
            Err(TransportError::Busy) => {}
            Err(e) => panic!("{e}"),
        }
        poll(&mut ts[0], &mut sink);
        assert!(sent <= window, "sent past the credit window");
    }
    // The hello's credit may or may not have come back yet (the receiver returns owed
    // credits once half a window is owed, or piggybacked): one window, less at most that
    // one credit, fits before Busy.
    assert!(sent == window || sent == window - 1, "one window fits before Busy: sent {sent} of {window}");
    assert!(ts[0].stats().busy >= 1);
    // Busy persists while the receiver is silent.
    for _ in 0..100 {
        poll(&mut ts[0], &mut sink);
    }
    assert!(matches!(ts[0].try_send(Rank(1), &[0; 4], &payload), Err(TransportError::Busy)));
    // Protocol control (here a failure-detector record) still passes: it has a reserve.
    let ft = [6u8, 1, 0, 0];
    assert!(runthrough_engine::wire::is_control(&ft));
    assert_eq!(ts[0].try_send(Rank(1), &ft, b"hb"), Ok(Posted::Done));
    assert!(sink.is_empty(), "{sink:?}");
    // Once the receiver drains, credits come back and 3 more windows go through.
    let total = window * 4;
    let mut got: Vec<u32> = Vec::new();
    let deadline = Instant::now() + LIMIT;
    while got.len() < total as usize {
        if sent < total {
            match ts[0].try_send(Rank(1), &user_header(sent), &payload) {
                Ok(_) => sent += 1,
                Err(TransportError::Busy) => {}
                Err(e) => panic!("{e}"),
            }
        }
        let mut g = Vec::new();
        poll(&mut ts[1], &mut g);
        poll(&mut ts[0], &mut sink);
        for x in g {
            let Got::Rec(0, b) = x else { panic!("{x:?}") };
            if b.len() == 6 {
                continue; // the control record
            }
            got.push(u32::from_le_bytes(b[..4].try_into().unwrap()) >> 8);
        }
        assert!(Instant::now() < deadline, "credits never came back: got {}", got.len());
    }
    let mut sorted = got.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..total).collect::<Vec<_>>());
    assert!(ts[1].stats().credit_frames >= 1 || ts[1].stats().injects > 0, "{:?}", ts[1].stats());
    assert!(sink.is_empty(), "{sink:?}");
}

fn stalled_peer_is_reported(p: Provider) {
    let cfg = FabricConfig { credits: 4, stall: Duration::from_millis(300), ..FabricConfig::default() };
    let Some(mut ts) = open(p, 2, cfg) else { return };
    let mut sink = Vec::new();
    let start = Instant::now();
    // Rank 1 never polls: rank 0's sends turn busy, then past the bound a PeerError.
    while !sink.contains(&Got::PeerError(1)) {
        let _ = ts[0].try_send(Rank(1), b"hdr", &[1; 100]);
        poll(&mut ts[0], &mut sink);
        assert!(start.elapsed() < Duration::from_secs(10), "no stall reported: {sink:?}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(start.elapsed() >= Duration::from_millis(300));
    assert_eq!(ts[0].stats().stalls, 1);
    // Reported once per episode.
    for _ in 0..20 {
        poll(&mut ts[0], &mut sink);
    }
    assert_eq!(sink.iter().filter(|g| **g == Got::PeerError(1)).count(), 1);
}

fn malformed_frames_are_dropped(p: Provider) {
    let Some(mut ts) = open(p, 2, FabricConfig::default()) else { return };
    let mut got = vec![Vec::new(), Vec::new()];
    // Connect first (tcp;ofi_rxm connects on the first send).
    send_retry(&mut ts, 0, 1, b"hello", b"", &mut got);
    drive_into(&mut ts, &mut got, |g| !g[1].is_empty());
    let bad: [&[u8]; 3] = [b"garbage that is long enough", b"short", &[0xF7, 1, 0, 0, 9, 0, 0, 0, 1, 2, 3]];
    for b in bad {
        let deadline = Instant::now() + LIMIT;
        while let Err(e) = ts[0].send_unframed(Rank(1), b) {
            assert!(matches!(e, TransportError::Busy) && Instant::now() < deadline, "{e}");
            poll(&mut ts[0], &mut got[0]);
        }
    }
    send_retry(&mut ts, 0, 1, b"valid", b"!", &mut got);
    drive_into(&mut ts, &mut got, |g| g[1].len() >= 2);
    assert_eq!(got[1], vec![Got::Rec(0, b"hello".to_vec()), Got::Rec(0, b"valid!".to_vec())]);
    assert_eq!(ts[1].stats().malformed, 3, "{:?}", ts[1].stats());
    // The buffers were reposted: traffic keeps flowing well past the pool size.
    for i in 0..200u32 {
        send_retry(&mut ts, 0, 1, &i.to_le_bytes(), &[], &mut got);
    }
    drive_into(&mut ts, &mut got, |g| g[1].len() >= 202);
    assert_eq!(got[1].len(), 202);
}

fn rma_read(p: Provider) {
    let Some(mut ts) = open(p, 2, FabricConfig::default()) else { return };
    let src = pattern(3 << 20, 5);
    let region = ts[0].expose(Rank(1), src.as_ptr() as u64, src.len()).unwrap();
    let mut dst = vec![0u8; src.len()];
    let posted = ts[1].rma_read(Rank(0), region, &mut dst, OpId(77));
    assert_eq!(posted, Ok(Posted::InFlight(OpId(77))));
    let got = drive(&mut ts, |g| g[1].iter().any(|x| matches!(x, Got::Read(77, _))));
    assert_eq!(got[1].len(), 1);
    let Got::Read(77, data) = &got[1][0] else { panic!("expected the read: {:?}", summary(&got)) };
    assert!(*data == src, "read data differs");
    // R30: an asynchronous read lands in the transport's memory, never in `local`, so a
    // receive failed while its read is in flight can hand its buffer back at once.
    assert!(dst.iter().all(|&b| b == 0), "the transport wrote the caller's buffer");
    ts[0].unexpose(region);
    assert!(!ts[0].owns(&region));
}

/// Two engines on fabric transports.
fn engines(p: Provider, cfg: FabricConfig, ecfg: Config) -> Option<Vec<BiasedMutex<Engine>>> {
    let ts = open(p, 2, cfg)?;
    let world = [Rank(0), Rank(1)];
    Some(
        ts.into_iter()
            .enumerate()
            .map(|(r, t)| {
                let mut e = Engine::new(Rank(r as u32), 2, AnyTransport::Fabric(Box::new(t)), ecfg);
                e.register_comm(CTX, &world);
                BiasedMutex::new(e)
            })
            .collect(),
    )
}

fn finish(engines: &[BiasedMutex<Engine>], reqs: &mut Vec<Request<'_>>) {
    let deadline = Instant::now() + LIMIT;
    while !reqs.is_empty() {
        for e in engines {
            e.lock().progress();
        }
        let mut i = 0;
        while i < reqs.len() {
            match reqs[i].test() {
                Ok(Some(_)) => {
                    drop(reqs.swap_remove(i));
                }
                Ok(None) => i += 1,
                Err(e) => panic!("request failed: {e}"),
            }
        }
        assert!(Instant::now() < deadline, "{} requests did not complete", reqs.len());
    }
}

/// The engine settings of these tests: small eager records, every rendezvous read.
fn engine_config() -> Config {
    Config {
        eager_limit: 4096,
        spin_polls: 0,
        stream_chunk: 64 * 1024,
        rma_min: 0,
        cma_min: 0,
        cma_choose: false,
        oversubscribed: false,
    }
}

fn engine_traffic(p: Provider) {
    let ecfg = engine_config();
    let Some(e) = engines(p, FabricConfig { credits: 4, ..FabricConfig::default() }, ecfg) else { return };
    // A flood of unexpected eager messages (many windows), then rendezvous of 1 and 5 MiB
    // pulled by RMA read, received after the sends started.
    let n_small = 300usize;
    let small: Vec<Vec<u8>> = (0..n_small).map(|i| pattern(i * 7 % 3000, i as u8)).collect();
    let big: Vec<Vec<u8>> = [1usize << 20, 5 << 20].iter().map(|&l| pattern(l, 9)).collect();
    let mut small_out: Vec<Vec<u8>> = small.iter().map(|m| vec![0u8; m.len()]).collect();
    let mut big_out: Vec<Vec<u8>> = big.iter().map(|m| vec![0u8; m.len()]).collect();
    scope(|s| {
        let mut sends = Vec::new();
        for (i, m) in small.iter().enumerate() {
            sends.push(isend(s, &e[0], SendTarget { ctx: CTX, src: 0, dest: 1, peer: Rank(1), tag: Tag(i as i32) }, m));
        }
        for (i, m) in big.iter().enumerate() {
            sends.push(isend(
                s,
                &e[0],
                SendTarget { ctx: CTX, src: 0, dest: 1, peer: Rank(1), tag: Tag(10_000 + i as i32) },
                m,
            ));
        }
        let deadline = Instant::now() + LIMIT;
        while e[1].lock().stats().unexpected < 10 {
            e[0].lock().progress();
            e[1].lock().progress();
            assert!(Instant::now() < deadline, "nothing arrived");
        }
        let mut recvs = Vec::new();
        for (i, b) in small_out.iter_mut().enumerate() {
            recvs.push(irecv(s, &e[1], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(i as i32)) }, Some(Rank(0)), b));
        }
        for (i, b) in big_out.iter_mut().enumerate() {
            let pat = Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(10_000 + i as i32)) };
            recvs.push(irecv(s, &e[1], pat, Some(Rank(0)), b));
        }
        finish(&e, &mut recvs);
        finish(&e, &mut sends);
    });
    assert_eq!(small_out, small);
    assert!(big_out == big, "rendezvous data differs");
    // Both were read in 256 KiB chunks, each its own read (4 + 20).
    let reads = e[1].lock().fabric_stats().map_or(0, |f| f.reads);
    assert!(reads >= 24, "chunked reads: {reads}");
    // A chunked rendezvous into a shorter buffer: only what fits is written (the chunk
    // that straddles the end in part), and the receive reports the truncation.
    let long = pattern((1 << 20) + 100, 4);
    let mut short = vec![0xEEu8; 600 * 1024 + 16];
    let posted = 600 * 1024;
    let out = scope(|s| {
        let tx = isend(s, &e[0], SendTarget { ctx: CTX, src: 0, dest: 1, peer: Rank(1), tag: Tag(20_000) }, &long);
        let pat = Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(20_000)) };
        let mut reqs = vec![irecv(s, &e[1], pat, Some(Rank(0)), &mut short[..posted])];
        let deadline = Instant::now() + LIMIT;
        loop {
            e[0].lock().progress();
            e[1].lock().progress();
            if let Some(out) = reqs[0].test().transpose() {
                reqs.clear();
                let mut tx = vec![tx];
                finish(&e, &mut tx);
                return out;
            }
            assert!(Instant::now() < deadline, "truncated rendezvous did not complete");
        }
    });
    assert_eq!(out, Err(Error::Truncate { posted, arrived: long.len() }));
    assert!(short[..posted] == long[..posted], "the part that fits arrived");
    assert!(short[posted..].iter().all(|&b| b == 0xEE), "nothing written past the posted buffer");
    let st = e[1].lock().stats();
    assert_eq!(st.pulled, 3, "{st:?}");
    assert!(st.unexpected > 0, "{st:?}");
    assert_eq!(st.malformed, 0);
}

#[test]
fn tcp_eager_records() {
    eager_records(Provider::Tcp);
}
#[test]
fn sockets_eager_records() {
    eager_records(Provider::Sockets);
}
#[test]
fn tcp_back_pressure() {
    back_pressure(Provider::Tcp);
}
#[test]
fn sockets_back_pressure() {
    back_pressure(Provider::Sockets);
}
#[test]
fn tcp_stalled_peer_is_reported() {
    stalled_peer_is_reported(Provider::Tcp);
}
#[test]
fn sockets_stalled_peer_is_reported() {
    stalled_peer_is_reported(Provider::Sockets);
}
#[test]
fn tcp_malformed_frames_are_dropped() {
    malformed_frames_are_dropped(Provider::Tcp);
}
#[test]
fn sockets_malformed_frames_are_dropped() {
    malformed_frames_are_dropped(Provider::Sockets);
}
#[test]
fn tcp_rma_read() {
    rma_read(Provider::Tcp);
}
#[test]
fn sockets_rma_read() {
    rma_read(Provider::Sockets);
}
#[test]
fn tcp_engines_eager_flood_and_rendezvous() {
    engine_traffic(Provider::Tcp);
}
#[test]
fn sockets_engines_eager_flood_and_rendezvous() {
    engine_traffic(Provider::Sockets);
}

/// R30: a receive whose RMA read is in flight when its peer is declared failed completes
/// with `RankFailStop` and hands its buffer back at once; when the provider finishes the
/// read later (the peer was alive after all), nothing is written into that buffer.
///
/// The failure must be declared while the read is in flight. A provider with its own
/// progress thread (sockets) can finish the read inside the very progress call that posted
/// it; then there was no read in flight to fail, and the scenario is run again on a fresh
/// pair of engines (at most 20 times; it must happen at least once).
fn failed_read_never_writes_the_buffer(p: Provider) {
    for _ in 0..20 {
        match failed_read_attempt(p) {
            Some(true) | None => return,
            Some(false) => continue,
        }
    }
    panic!("{p:?}: the read completed before the failure could be declared in 20 of 20 attempts");
}

/// One run of [`failed_read_never_writes_the_buffer`]: `Some(true)` when the failure was
/// declared with the read in flight and every check held, `Some(false)` when the read had
/// already completed, `None` when the provider is not available here.
fn failed_read_attempt(p: Provider) -> Option<bool> {
    use runthrough_engine::handle::{irecv_unscoped, isend_unscoped};
    let ecfg = engine_config();
    let e = engines(p, FabricConfig::default(), ecfg)?;
    let src = pattern(4 << 20, 3);
    let mut dst = vec![0u8; src.len()];
    // SAFETY: both requests are settled (taken or dropped) before their buffers are used
    // again, and neither is leaked.
    let mut s =
        unsafe { isend_unscoped(&e[0], SendTarget { ctx: CTX, src: 0, dest: 1, peer: Rank(1), tag: Tag(1) }, &src) };
    // SAFETY: as above.
    let mut r = unsafe {
        irecv_unscoped(&e[1], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(1)) }, Some(Rank(0)), &mut dst)
    };
    // The RTS reaches the receiver, which posts its read. The failure is declared under
    // the same hold of the receiver's engine lock as the progress that posted the read,
    // so the engine cannot have seen the read's completion yet (providers with their own
    // progress thread, like sockets, may serve the read at once).
    let deadline = Instant::now() + LIMIT;
    let mut stray = false;
    let mut raced = false;
    loop {
        e[0].lock().progress();
        let mut g = e[1].lock();
        g.progress();
        if g.stats().unexpected > 0 || deadline < Instant::now() {
            stray = true;
            break;
        }
        if g.fabric_stats().is_some_and(|s| s.reads > 0) {
            // Completed already in that same progress call: nothing in flight to fail.
            raced = g.stats().pulled > 0;
            if !raced {
                g.fail_peer(Rank(0));
                // `fail_peer` first drains what the transport already delivered: the
                // provider's own thread (sockets) may have finished every read since
                // that progress call, and then the receive completed before the
                // failure (seen once in CI on a 2-core Intel host). No read was in
                // flight to fail: run the scenario again, as above.
                raced = g.stats().pulled > 0;
            }
            break;
        }
    }
    if raced && !stray {
        // Settle both requests (the receive is done; the send waits for its FIN).
        let got = r.test();
        drop(r);
        let until = Instant::now() + LIMIT;
        let mut sent = s.test();
        while sent.as_ref().is_ok_and(|v| v.is_none()) && Instant::now() < until {
            e[0].lock().progress();
            e[1].lock().progress();
            std::thread::yield_now();
            sent = s.test();
        }
        if !matches!(sent, Ok(Some(_))) {
            e[0].lock().fail_peer(Rank(1));
        }
        drop(s);
        assert!(matches!(got, Ok(Some(_))), "{p:?}: a completed read must complete the receive: {got:?}");
        return Some(false);
    }
    let failed = r.test();
    drop(r);
    dst.fill(0x11);
    // Now let the sender serve the read; the receiver drains whatever comes.
    let until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < until {
        e[0].lock().progress();
        e[1].lock().progress();
        std::thread::yield_now();
    }
    let untouched = dst.iter().all(|&b| b == 0x11);
    let pulled = e[1].lock().stats().pulled;
    // The sender never gets a FIN (its peer gave up); fail it there too to settle, before
    // any assertion can unwind with the send pending.
    e[0].lock().fail_peer(Rank(1));
    let sent = s.test();
    drop(s);
    assert!(!stray, "the RTS went to the unexpected queue or never came");
    assert_eq!(failed, Err(runthrough_engine::Error::RankFailStop { rank: 0 }));
    assert!(untouched, "the late read wrote into the released buffer");
    assert_eq!(pulled, 0, "the failed receive counted a pull");
    assert!(matches!(sent, Err(runthrough_engine::Error::RankFailStop { rank: 1 })), "{sent:?}");
    Some(true)
}

#[test]
fn tcp_failed_read_never_writes_the_buffer() {
    failed_read_never_writes_the_buffer(Provider::Tcp);
}

#[test]
fn sockets_failed_read_never_writes_the_buffer() {
    failed_read_never_writes_the_buffer(Provider::Sockets);
}
