//! Bringing up the transports of one process: binding, the bootstrap exchange through
//! the launcher, the shared-memory segment and the engine (see [`crate::runtime`] for the
//! sequence and its guarantees).

use std::time::{Duration, Instant};

use runthrough_engine::engine::Config;
use runthrough_engine::transport::{shm::ShmTransport, AnyTransport};
use runthrough_engine::{Engine, Rank};
use runthrough_launch::client::Client;
use runthrough_launch::env::JobEnv;
use runthrough_shm::numa::Topology;
use runthrough_shm::pin::{self, BindPolicy};
use runthrough_shm::{Layout, Segment};

use crate::Error;

/// How long start-up waits for the other ranks.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);

/// A world of one process (no launcher): a private one-rank segment.
pub(crate) fn singleton(cfg: Config, ring_bytes: u32) -> Result<(Engine, String), Error> {
    let name = format!("/rt-single-{}-{:x}", std::process::id(), nonce());
    let seg = Segment::create(&name, Layout { nranks: 1, ring_bytes }).map_err(init_err("segment"))?;
    Segment::unlink(&name).map_err(init_err("segment unlink"))?;
    let t = ShmTransport::new(&seg, Rank(0), vec![std::process::id() as i32]).map_err(init_err("shm"))?;
    Ok((Engine::new(Rank(0), 1, AnyTransport::Shm(t), cfg), "singleton (no rtrun)".to_string()))
}

/// A rank started by `rtrun`: returns the engine, the launcher connection and a
/// description of the set-up.
pub(crate) fn boot(env: &JobEnv, cfg: Config, ring_bytes: u32) -> Result<(Engine, Client, String), Error> {
    if env.local_size != env.size {
        return Err(Error::Unsupported("ranks on several hosts need the fabric transport"));
    }
    let policy: BindPolicy = env.bind.parse().map_err(init_err("--bind-to"))?;
    let bound = match pin::bind(policy, env.local_rank as usize) {
        Ok(Some(core)) => format!("bound to core {core}"),
        Ok(None) => format!("not bound ({policy})"),
        Err(e) => {
            tracing::warn!(error = %e, "binding failed; running unbound");
            format!("binding failed: {e}")
        }
    };
    let mut client = Client::connect(env, BOOT_TIMEOUT).map_err(init_err("bootstrap connect"))?;
    client.put(&format!("pid/{}", env.rank), &std::process::id().to_le_bytes()).map_err(init_err("bootstrap put"))?;
    let layout = Layout { nranks: env.size, ring_bytes };
    let created = if env.rank == 0 {
        Some(Segment::create(&env.shm_name, layout).map_err(init_err("segment create"))?)
    } else {
        None
    };
    client.fence(BOOT_TIMEOUT).map_err(init_err("bootstrap fence"))?;
    let seg = match created {
        Some(s) => s,
        None => Segment::open(&env.shm_name, BOOT_TIMEOUT).map_err(init_err("segment open"))?,
    };
    let topo = Topology::detect();
    let placement = seg.place_inbound(env.rank, &topo);
    tracing::debug!(%placement, topology = %topo.describe(), "inbound rings placed");
    let about = format!("shared memory, {} ranks; {}; inbound rings: {placement}; {bound}", env.size, topo.describe());
    client.fence(BOOT_TIMEOUT).map_err(init_err("bootstrap fence"))?;
    if env.rank == 0 {
        Segment::unlink(&env.shm_name).map_err(init_err("segment unlink"))?;
    }
    let mut pids = Vec::with_capacity(env.size as usize);
    for r in 0..env.size {
        let v = client.get(&format!("pid/{r}"), BOOT_TIMEOUT).map_err(init_err("bootstrap get"))?;
        let b: [u8; 4] = v.as_slice().try_into().map_err(|_| Error::Init(format!("bad pid entry of rank {r}")))?;
        pids.push(u32::from_le_bytes(b) as i32);
    }
    let t = ShmTransport::new(&seg, Rank(env.rank), pids).map_err(init_err("shm"))?;
    Ok((Engine::new(Rank(env.rank), env.size, AnyTransport::Shm(t), cfg), client, about))
}

pub(crate) fn init_err<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Init(format!("{what}: {e}"))
}

fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(Instant::now().elapsed().as_nanos());
    h.finish()
}
