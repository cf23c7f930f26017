//! Dead peers, per provider (T-FD: providers are not trusted to report them).
//!
//! The parent opens an endpoint, re-executes this test binary as a child process
//! (`RT_FABRIC_DEAD_PEER_CHILD=<provider>`) that opens its own endpoint, and exchanges
//! addresses with it over the child's stdin/stdout. After a hello message proves the path
//! works, the parent posts a receive from the child and a 1 MiB send to it (the child never
//! posts a matching receive, so the send stays in flight), SIGKILLs the child, and records
//! for a bounded window everything `fabric` surfaces: completion-queue error entries
//! (attributed to the peer through `OpSlab`), errors returned by new posts to the peer
//! (`Error::Call` carrying the peer), completions of operations that cannot have been
//! delivered, and `Busy` that persists past the stall bound (`StallTracker` → `Stall`).
//! The stall clock is fed by the probes themselves: each `Busy` starts (or continues) an
//! episode and each accepted probe ends it, so a provider that keeps accepting sends to
//! the dead peer never produces a stall — the dead peer then went unnoticed and the test
//! fails. The control [`unkilled_peer_gives_no_signal`] runs the same observation against
//! a live child and requires no signal at all, so the observation cannot pass on its own.
//!
//! The test asserts that SOME signal (error entry, post error or stall) is surfaced within
//! the bound and prints what it was. It never hangs: reads from the child are bounded, the
//! observation window is bounded, and a watchdog aborts the process if closing the
//! endpoint blocks. A pending receive that never completes is expected (libfabric 1.17
//! `tcp;ofi_rxm`): the failure detector (`ft`) is what turns the stall into
//! RankFailStop; until then the stall is the signal.
//!
//! A provider not present here is skipped (`common::skip`: a failure unless
//! `RT_EXPECTED_SKIPS` names `provider-tcp` / `provider-sockets`).

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use common::{open_node, pin_loopback, post_retry};
use runthrough_fabric::{CqEvent, EpAddr, Error, FiAddr, OpContext, OpSlab, Provider, Stall, StallTracker};

const CHILD_ENV: &str = "RT_FABRIC_DEAD_PEER_CHILD";
const MIB: usize = 1 << 20;
/// Busy (or no progress) for this long surfaces a stall.
const STALL_BOUND: Duration = Duration::from_secs(2);
/// The whole observation window after the kill; a signal must appear within it.
const OBSERVE: Duration = Duration::from_secs(8);
/// Keep recording this long after the first signal, to report what else shows up.
const LINGER: Duration = Duration::from_millis(1500);
/// Hard limit for the whole test, enforced by a watchdog that aborts the process.
const HARD_TIMEOUT: Duration = Duration::from_secs(60);

const TAG_HELLO: u64 = 1;
const TAG_NEVER: u64 = 2;
const TAG_BIG: u64 = 3;
const TAG_PROBE: u64 = 4;
static PROBE: [u8; 8] = *b"probe!!!";

/// The child's role; a no-op unless started by the parent with `CHILD_ENV` set.
#[test]
fn dead_peer_child() {
    let Ok(name) = std::env::var(CHILD_ENV) else { return };
    let provider = runthrough_fabric::Provider::from_fi_name(&name).expect("provider name");
    let hello = *b"hello from child";
    let node = open_node(provider).expect("provider present in child");
    let mut out = std::io::stdout().lock();
    writeln!(out, "ADDR {}", node.ep.name().unwrap().to_hex()).unwrap();
    out.flush().unwrap();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).unwrap();
    let parent = node.av.insert(&EpAddr::from_hex(&line).unwrap()).unwrap();
    // SAFETY: `hello` lives until the process is killed (the loop below never ends on its own).
    post_retry(&[&node], || unsafe { node.ep.tsend(&hello, None, parent, TAG_HELLO, OpContext(1)) });
    writeln!(out, "READY").unwrap();
    out.flush().unwrap();
    // Progress forever without posting a receive for the big send; the parent kills us.
    let mut sink = Vec::new();
    let deadline = Instant::now() + HARD_TIMEOUT;
    while Instant::now() < deadline {
        sink.clear();
        let _ = node.cq.read(&mut sink, 16);
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// What the parent saw after the kill, in order, with the time since the kill.
#[derive(Debug)]
#[allow(dead_code)] // fields are read through `Debug` in the printed report
enum Observation {
    CqError { at: Duration, what: String, peer_failure: bool },
    Completed { at: Duration, what: &'static str, len: usize },
    PostError { at: Duration, err: String },
    Stall { at: Duration, stall: Stall<FiAddr> },
    Probes { accepted: u64, busy: u64 },
}

impl Observation {
    fn is_signal(&self) -> bool {
        matches!(self, Observation::CqError { .. } | Observation::PostError { .. } | Observation::Stall { .. })
    }
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn watchdog(name: &'static str) {
    std::thread::spawn(move || {
        std::thread::sleep(HARD_TIMEOUT);
        eprintln!("{name}: hard timeout of {HARD_TIMEOUT:?} exceeded; aborting instead of hanging");
        std::process::abort();
    });
}

fn spawn_child(provider: Provider) -> (ChildGuard, mpsc::Receiver<String>) {
    pin_loopback();
    let exe = std::env::current_exe().unwrap();
    let child = Command::new(exe)
        .args(["--exact", "dead_peer_child", "--nocapture", "--test-threads=1", "-q"])
        .env(CHILD_ENV, provider.fi_name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn child");
    let mut guard = ChildGuard(child);
    let stdout = guard.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (guard, rx)
}

fn expect_line(rx: &mpsc::Receiver<String>, prefix: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|e| panic!("child did not say {prefix}: {e}"));
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.trim().to_owned();
        }
    }
}

fn describe(peer: FiAddr, slab: &mut OpSlab<&'static str>, ev: &mut CqEvent, t: Duration) -> Observation {
    let rec = slab.complete(ev);
    match ev {
        CqEvent::Failed(e) => {
            assert_eq!(e.peer, Some(peer), "error entry attributed to the dead peer: {e}");
            let op = rec.map_or("?", |r| r.1);
            Observation::CqError { at: t, what: format!("{op}: {e}"), peer_failure: e.is_peer_failure() }
        }
        CqEvent::Done(d) => Observation::Completed { at: t, what: rec.map_or("?", |r| r.1), len: d.len },
    }
}

fn dead_peer(provider: Provider) {
    observe_peer(provider, true);
}

/// Runs the scenario; kills the child unless `kill` is false (the control). Returns
/// whether some signal for the peer was surfaced.
fn observe_peer(provider: Provider, kill: bool) -> Option<bool> {
    watchdog("dead_peer");
    let big = vec![0x5au8; MIB];
    let mut never = vec![0u8; 64];
    let mut hello = vec![0u8; 64];
    let node = open_node(provider)?;
    let (child, lines) = spawn_child(provider);
    let child_addr = EpAddr::from_hex(&expect_line(&lines, "ADDR ")).unwrap();
    let peer = node.av.insert(&child_addr).unwrap();
    let mut stdin = child.0.stdin.as_ref().unwrap();
    writeln!(stdin, "{}", node.ep.name().unwrap().to_hex()).unwrap();
    let mut slab: OpSlab<&'static str> = OpSlab::new();

    // Hello from the child proves the path works before anything dies.
    let hello_ctx = slab.insert(peer, "hello-recv");
    // SAFETY: `hello` is declared before `node`, so it outlives the endpoint.
    post_retry(&[&node], || unsafe { node.ep.trecv(&mut hello, None, peer, TAG_HELLO, 0, hello_ctx) });
    // Progress while the child connects and sends (rxm needs both sides progressing).
    common::drive(&[&node], Duration::from_secs(20), |s| s[0].iter().any(|e| e.context() == hello_ctx));
    expect_line(&lines, "READY");
    let mut evs = Vec::new();
    slab.cancel(hello_ctx);

    // A receive the child will never satisfy, and a 1 MiB send it will never receive.
    let never_ctx = slab.insert(peer, "posted-recv");
    let big_ctx = slab.insert(peer, "1MiB-send");
    // SAFETY: `never` and `big` are declared before `node`, so they outlive the endpoint.
    unsafe {
        post_retry(&[&node], || node.ep.trecv(&mut never, None, peer, TAG_NEVER, 0, never_ctx));
        post_retry(&[&node], || node.ep.tsend(&big, None, peer, TAG_BIG, big_ctx));
    }
    // Let the transfer get under way, then kill the child mid-transfer.
    let warm = Instant::now() + Duration::from_millis(200);
    let mut pre_kill = Vec::new();
    while Instant::now() < warm {
        node.cq.read(&mut evs, 16).unwrap();
        for mut ev in evs.drain(..) {
            pre_kill.push(describe(peer, &mut slab, &mut ev, Duration::ZERO));
        }
    }
    let mut child = child;
    if kill {
        child.0.kill().expect("SIGKILL child");
        child.0.wait().expect("reap child");
    }
    let killed = Instant::now();

    let mut obs: Vec<Observation> = Vec::new();
    // Fed only by what the probes meet: Busy starts or continues an episode, an accepted
    // probe ends it. Nothing is assumed stalled because the test killed the peer.
    let mut tracker = StallTracker::new(STALL_BOUND);
    let mut busy_probes = 0u64;
    let mut ok_probes = 0u64;
    let mut next_probe = killed;
    let mut first_signal: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let t = now - killed;
        evs.clear();
        match node.cq.read(&mut evs, 16) {
            Ok(_) => {}
            Err(e) => obs.push(Observation::PostError { at: t, err: format!("fi_cq_read: {e}") }),
        }
        for mut ev in evs.drain(..) {
            obs.push(describe(peer, &mut slab, &mut ev, t));
        }
        if now >= next_probe {
            next_probe = now + Duration::from_millis(20);
            let ctx = slab.insert(peer, "probe-send");
            // SAFETY: PROBE is a static: valid forever.
            match unsafe { node.ep.tsend(&PROBE, None, peer, TAG_PROBE, ctx) } {
                Ok(()) => {
                    ok_probes += 1;
                    tracker.handle_progress(peer);
                }
                Err(Error::Busy) => {
                    slab.cancel(ctx);
                    busy_probes += 1;
                    tracker.handle_busy(peer, now);
                }
                Err(e) => {
                    slab.cancel(ctx);
                    assert_eq!(e.peer(), Some(peer), "post errors carry the peer: {e}");
                    // Report each distinct post error once.
                    let err = e.to_string();
                    if !obs.iter().any(|o| matches!(o, Observation::PostError { err: x, .. } if *x == err)) {
                        obs.push(Observation::PostError { at: t, err });
                    }
                }
            }
        }
        if let Some(stall) = tracker.poll_stall(now) {
            obs.push(Observation::Stall { at: t, stall });
        }
        if first_signal.is_none() && obs.iter().any(Observation::is_signal) {
            first_signal = Some(now);
        }
        let observe = if kill { OBSERVE } else { CONTROL_OBSERVE };
        if first_signal.is_some_and(|f| now - f > LINGER) || t > observe {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    obs.push(Observation::Probes { accepted: ok_probes, busy: busy_probes });

    let what = if kill { "dead peer" } else { "live peer (control)" };
    println!("== {what} over {provider} (stall bound {STALL_BOUND:?}) ==");
    for o in &pre_kill {
        println!("  before kill: {o:?}");
    }
    for o in &obs {
        println!("  {o:?}");
    }
    let still: Vec<_> = ["posted-recv", "1MiB-send"]
        .into_iter()
        .filter(|w| {
            !obs.iter().chain(&pre_kill).any(|o| {
                matches!(o, Observation::Completed { what, .. } if what == w)
                    || matches!(o, Observation::CqError { what, .. } if what.starts_with(w))
            })
        })
        .collect();
    println!("  still pending at the end: {still:?} (outstanding ops to peer: {})", slab.outstanding(peer));
    let signal = obs.iter().find(|o| o.is_signal());
    if kill {
        assert!(signal.is_some(), "the dead peer went unnoticed for {OBSERVE:?}: {obs:?}");
        println!("  first signal: {:?}", signal.unwrap());
    }
    // Closing the endpoint with operations still pending must not hang (watchdog-bounded).
    let close_start = Instant::now();
    drop(node);
    println!("  endpoint closed in {:?}", close_start.elapsed());
    drop((big, never, hello));
    drop(child);
    Some(signal.is_some())
}

/// How long the control watches a live peer (longer than the stall bound).
const CONTROL_OBSERVE: Duration = Duration::from_secs(4);

#[test]
fn dead_peer_tcp() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    dead_peer(Provider::Tcp);
}

#[test]
fn dead_peer_sockets() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    dead_peer(Provider::Sockets);
}

/// The control: the same observation against a live child (never killed) surfaces no
/// signal, so a signal in the tests above comes from the death, not from the harness.
#[test]
fn unkilled_peer_gives_no_signal() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    for provider in [Provider::Tcp, Provider::Sockets] {
        if let Some(signalled) = observe_peer(provider, false) {
            assert!(!signalled, "{provider}: a signal for a live peer");
        }
    }
}
