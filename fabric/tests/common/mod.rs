//! Shared helpers of the fabric integration tests: loopback pinning, opening a node,
//! driving completion queues with a hard deadline.
//!
//! A test whose provider is not present here skips as `provider-tcp` / `provider-sockets`
//! through [`skip()`] (the workspace's one skip rule, `tests/common/skip.rs`: a failure
//! unless `RT_EXPECTED_SKIPS` names it).
#![allow(dead_code, unreachable_pub)]

#[path = "../../../tests/common/skip.rs"]
pub(crate) mod skip;
pub(crate) use skip::skip;

use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

use runthrough_fabric::provider::open_selected;
use runthrough_fabric::{
    AddressVector, CompletionQueue, CqEvent, Domain, Endpoint, Error, Hints, Provider, ProviderRequest, Selection,
};

/// Pin tcp and sockets to the loopback interface, before any libfabric call in this process
/// (and in children, which inherit the environment).
pub fn pin_loopback() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Set once, before any thread of this process calls into libfabric.
        std::env::set_var("FI_TCP_IFACE", "lo");
        std::env::set_var("FI_SOCKETS_IFACE", "lo");
    });
}

/// One endpoint with its own fabric, domain, AV and CQ.
pub struct Node {
    pub sel: Selection,
    pub domain: Arc<Domain>,
    pub av: Arc<AddressVector>,
    pub cq: Arc<CompletionQueue>,
    pub ep: Arc<Endpoint>,
}

/// Open a node on `provider` pinned to 127.0.0.1, or `None` after [`skip()`] when the
/// provider is not present here.
pub fn open_node(provider: Provider) -> Option<Node> {
    pin_loopback();
    let (info, sel) = match open_selected(ProviderRequest::Only(provider), &Hints::default().loopback()) {
        Ok(x) => x,
        Err(Error::NoProvider(why)) => {
            skip(&skip::provider(provider.fi_name()), &format!("provider {provider} not present: {why}"));
            return None;
        }
        Err(e) => panic!("fi_getinfo for {provider}: {e}"),
    };
    let domain = Domain::open_info(info).expect("open fabric+domain");
    let av = AddressVector::open(&domain, 16).expect("av");
    let cq = CompletionQueue::open(&domain, 256).expect("cq");
    let ep = Endpoint::open(&domain, &av, &cq).expect("endpoint");
    Some(Node { sel, domain, av, cq, ep })
}

/// Poll every node's CQ until `done(events)` or the deadline; events accumulate in the
/// returned vectors (one per node). Panics on timeout with what was seen.
pub fn drive(nodes: &[&Node], timeout: Duration, mut done: impl FnMut(&[Vec<CqEvent>]) -> bool) -> Vec<Vec<CqEvent>> {
    let deadline = Instant::now() + timeout;
    let mut seen: Vec<Vec<CqEvent>> = nodes.iter().map(|_| Vec::new()).collect();
    loop {
        for (n, out) in nodes.iter().zip(seen.iter_mut()) {
            n.cq.read(out, 64).expect("cq read");
        }
        if done(&seen) {
            return seen;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?}; completions so far: {seen:?}");
        std::thread::yield_now();
    }
}

/// Retry `post` while it returns `Busy`, progressing the nodes' CQs (bounded).
pub fn post_retry(nodes: &[&Node], mut post: impl FnMut() -> runthrough_fabric::Result<()>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut sink = Vec::new();
    loop {
        match post() {
            Ok(()) => return,
            Err(Error::Busy) if Instant::now() < deadline => {
                for n in nodes {
                    n.cq.read(&mut sink, 64).expect("cq read");
                }
                assert!(
                    sink.iter().all(|e| matches!(e, CqEvent::Done(_))),
                    "unexpected error while retrying: {sink:?}"
                );
            }
            Err(e) => panic!("post failed: {e}"),
        }
    }
}

/// A deterministic test pattern.
pub fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}
