//! Helpers of the engine tests over the in-process `SimTransport` (`sim.rs`,
//! `sim_shm.rs`, `sim_sched.rs`): several engines in one thread, each progressed
//! explicitly, so every interleaving is deterministic.
#![allow(dead_code, unreachable_pub, unused_imports)]

pub use runthrough_engine::handle::{irecv_unscoped, isend_unscoped};
pub use runthrough_engine::lock::BiasedMutex;
pub use runthrough_engine::matching::Pattern;
pub use runthrough_engine::transport::sim::SimHub;
pub use runthrough_engine::transport::{AnyTransport, Transport};
pub use runthrough_engine::SendTarget;
pub use runthrough_engine::{Config, ContextId, Engine, Error, Rank, Request, Status, Tag, FREED_DECIDED_KEEP};

pub const CTX: ContextId = ContextId(0);
/// A communicator of world ranks 1.. (its rank i is world rank i + 1).
pub const SUB: ContextId = ContextId(2);

pub fn job(n: u32, capacity: usize, eager: usize) -> (SimHub, Vec<BiasedMutex<Engine>>) {
    job_with(n, capacity, eager, false)
}

/// [`job`], telling the engines whether ranks outnumber cores.
pub fn job_with(n: u32, capacity: usize, eager: usize, oversubscribed: bool) -> (SimHub, Vec<BiasedMutex<Engine>>) {
    let hub = SimHub::new(n, capacity, 4096);
    let cfg = Config {
        eager_limit: eager,
        spin_polls: 0,
        stream_chunk: 1000,
        rma_min: 0,
        cma_min: 0,
        cma_choose: false,
        oversubscribed,
    };
    let world: Vec<Rank> = (0..n).map(Rank).collect();
    let engines = (0..n)
        .map(|r| {
            let mut e = Engine::new(Rank(r), n, AnyTransport::Sim(hub.endpoint(Rank(r))), cfg);
            e.register_comm(CTX, &world);
            e.register_comm(SUB, &world[1..]);
            BiasedMutex::new(e)
        })
        .collect();
    (hub, engines)
}

pub fn pat(src: Option<u32>, tag: Option<i32>) -> Pattern {
    Pattern { ctx: CTX, src, tag: tag.map(Tag) }
}

// The tests drive several engines in one thread, so they use the engine's unscoped
// requests; every request below is finished or dropped (never leaked) before its buffer
// is used again, which is the contract of `isend_unscoped` / `irecv_unscoped`.

pub fn send<'a>(e: &'a [BiasedMutex<Engine>], from: u32, to: u32, tag: i32, buf: &'a [u8]) -> Request<'a> {
    // SAFETY: see above: the tests settle every request before touching its buffer.
    unsafe {
        isend_unscoped(
            &e[from as usize],
            SendTarget { ctx: CTX, src: from, dest: to, peer: Rank(to), tag: Tag(tag) },
            buf,
        )
    }
}

pub fn recv<'a>(
    e: &'a [BiasedMutex<Engine>],
    at: u32,
    src: Option<u32>,
    tag: Option<i32>,
    buf: &'a mut [u8],
) -> Request<'a> {
    // SAFETY: as in `send`.
    unsafe { irecv_unscoped(&e[at as usize], pat(src, tag), src.map(Rank), buf) }
}

/// Starts a nonblocking collective outside any scope.
pub fn icoll<'a>(
    on: runthrough_engine::icoll::Members<'a>,
    kind: runthrough_engine::icoll::Kind,
    user: &'a mut [u8],
    op: Option<runthrough_engine::icoll::BoxedCombine<'a>>,
) -> runthrough_engine::icoll::ICollRequest<'a> {
    // SAFETY: as in `send`: every collective is finished or dropped before its buffer is
    // read again.
    unsafe { runthrough_engine::icoll::ICollRequest::start_unscoped(on, kind, user, None, op) }.unwrap()
}

/// Progresses every engine until `req` completes (bounded).
pub fn finish(engines: &[BiasedMutex<Engine>], req: &mut Request<'_>) -> Result<Status, Error> {
    for _ in 0..100_000 {
        for e in engines {
            e.lock().progress();
        }
        if let Some(st) = req.test()? {
            return Ok(st);
        }
    }
    panic!("request did not complete");
}

pub fn pump(engines: &[BiasedMutex<Engine>], rounds: usize) {
    for _ in 0..rounds {
        for e in engines {
            e.lock().progress();
        }
    }
}

pub fn pattern_bytes(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}
