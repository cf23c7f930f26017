//! Bringing up the transports of one process: binding, the bootstrap exchange through
//! the launcher (or a PMIx / PMI-2 server: [`crate::bootstrap`]), the shared-memory
//! segment, the libfabric endpoint and the engine (see [`crate::runtime`] for the
//! sequence and its guarantees). Entries are published as `NAME` of this rank and read
//! as `NAME` of rank `r` (under rtrun the key `NAME/r`).
//!
//! Transport choice (docs/ARCHITECTURE.md §2): `RT_TRANSPORT` = `auto` (default: shared
//! memory to ranks on this host, libfabric to the others), `shm` (shared memory only; one
//! host), or `fabric` (libfabric to every rank, this one included, even on one host: for
//! testing and benchmarking). `RT_PROVIDER` = `auto|tcp|sockets|verbs|cxi` picks the
//! libfabric provider. When every rank runs on this host, tcp and sockets are pinned to
//! loopback (`FI_TCP_IFACE=lo`, `FI_SOCKETS_IFACE=lo` unless set, before any libfabric
//! call, and the endpoint bound to 127.0.0.1). Endpoint addresses are exchanged through the
//! launcher's key-value service (`fi/{rank}`), then inserted in the address vector.
//!
//! Multi-host runs (`rtrun --host`): the endpoint binds to an explicit address of this host
//! ([`fabric_address`]), chosen in this order: `RT_FABRIC_ADDR` (set by `rtrun --host
//! NAME=IP`; it must be an address of one of this host's interfaces), else the first IPv4
//! address of interface `RT_FABRIC_IFACE`, else the first IPv4 address of the first
//! non-loopback interface that is up (inside a network namespace: its veth). The interface
//! holding it becomes `FI_TCP_IFACE` / `FI_SOCKETS_IFACE` (unless set) and the address the
//! `FI_SOURCE` node of the hints (tcp, sockets, auto), so the provider never picks another
//! interface (loopback, or a machine's `eth0` it was not given). Same-host peers use shared
//! memory: rtrun gives each host its own `RT_SHM_NAME`, created by the host's lowest rank.
//!
//! Start-up through failures (R31): the exchange runs through [`Exchange`], whose
//! fences are the launcher's fault-tolerant `Join`s (complete over the ranks not out,
//! and say which ranks are out, the same list at every rank). Sequence: publish `pid/`,
//! `host/`, `probe/` and `fi/` entries; fence 1; read the entries of the ranks not out
//! at fence 1 only (the others have none: their routes default to the fabric, or to the
//! segment without one, and nothing is ever sent to them); shared memory: the lowest
//! local rank not out creates the host's segment, fence 2, and if that creator is out
//! after it the next local rank creates a fresh one under `NAME.K` and all fence again;
//! everyone attaches; fence 3; the lowest local rank not out unlinks the name; CMA
//! probes of the local ranks not out, fence 4, answers combined over those not out. The
//! ranks out at the last fence go to the runtime, which fails them in the world. A
//! heartbeat thread with its own connection says `Alive` every detector period until
//! `init` is done, so the launcher tells a slow rank from a hung one. Told it was
//! excluded (by any reply), this process exits, never rejoining.
//!
//! Peer death on this host (T-FD local evidence): the pids every rank publishes
//! (`pid/{rank}`, also used for CMA) give each rank a pidfd per shared-memory peer
//! ([`Liveness`]; `RT_PIDFD=0` turns the watch off), and the segment's departure marks
//! tell a peer that finalized from one that failed. Where the kernel refuses pidfds the
//! watch is left out silently and the launcher's notices and the ring detector remain.

use std::collections::HashMap;
use std::str::FromStr;
use std::time::{Duration, Instant};

use runthrough_engine::engine::Config as EngineConfig;
use runthrough_engine::transport::fabric::{FabricConfig, FabricTransport, Hints, Provider, ProviderRequest};
use runthrough_engine::transport::multi::{MultiTransport, Route};
use runthrough_engine::transport::{shm::ShmTransport, AnyTransport};
use runthrough_engine::{Engine, Rank};
use runthrough_ft::ring::Ring;
use runthrough_launch::client::Client;
use runthrough_launch::env::{JobEnv, RT_FABRIC_ADDR, RT_FABRIC_IFACE};

use crate::bootstrap::{launch_err as kv_err, Bootstrap, JobInfo};
use crate::config::Config;
use runthrough_launch::net::{self, IfAddr};
use runthrough_shm::numa::Topology;
use runthrough_shm::pin::{self, BindPolicy};
use runthrough_shm::segment::Departures;
use runthrough_shm::{Layout, PeerWatch, Segment};

use crate::{peer_entry, Error};

/// How long start-up waits for the other ranks.
const BOOT_TIMEOUT: Duration = Duration::from_secs(60);
/// Environment variable choosing the transport (`auto|shm|fabric`).
pub(crate) const TRANSPORT_ENV: &str = "RT_TRANSPORT";
/// Environment variable bounding how long a peer's sends may stay busy before it is
/// reported failed (milliseconds; fabric only).
const STALL_ENV: &str = "RT_FABRIC_STALL_MS";
/// Environment variable that turns the pidfd peer watch off when `0`.
pub(crate) const PIDFD_ENV: &str = "RT_PIDFD";

/// What this process knows locally about its shared-memory peers' lives.
#[derive(Debug, Default)]
pub(crate) struct Liveness {
    /// pidfds of the shared-memory peers (none without shm, with `RT_PIDFD=0`, or where
    /// the kernel refuses pidfds).
    pub(crate) watch: Option<PeerWatch>,
    /// The segment's departure marks: this rank sets its own when it finalizes.
    pub(crate) departures: Option<Departures>,
}

/// Which transports carry the job's traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TransportMode {
    /// Shared memory on this host, libfabric to other hosts.
    #[default]
    Auto,
    /// Shared memory only.
    Shm,
    /// libfabric to every rank.
    Fabric,
}

impl FromStr for TransportMode {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(TransportMode::Auto),
            "shm" => Ok(TransportMode::Shm),
            "fabric" => Ok(TransportMode::Fabric),
            other => Err(Error::Init(format!("{TRANSPORT_ENV}={other:?}: expected auto, shm or fabric"))),
        }
    }
}

impl TransportMode {
    pub(crate) fn from_conf(conf: &Config) -> Result<Self, Error> {
        conf.get(TRANSPORT_ENV).unwrap_or_default().parse()
    }
}

/// A world of one process (no launcher): a private one-rank segment.
pub(crate) fn singleton(conf: &Config, cfg: EngineConfig, ring_bytes: u32) -> Result<(Engine, String), Error> {
    let name = format!("/rt-single-{}-{:x}", std::process::id(), nonce());
    let seg = Segment::create(&name, Layout { nranks: 1, ring_bytes, bulk_bytes: 0 }).map_err(init_err("segment"))?;
    Segment::unlink(&name).map_err(init_err("segment unlink"))?;
    let t = ShmTransport::new(&seg, Rank(0), vec![std::process::id() as i32]).map_err(init_err("shm"))?;
    let mut engine = Engine::new(Rank(0), 1, AnyTransport::Shm(t), cfg);
    enable_shm_coll(conf, &mut engine, &seg, Rank(0), vec![true], None);
    Ok((engine, "singleton (no rtrun)".to_string()))
}

/// Environment variable switching shared-memory collectives off (`RT_COLL_SHM=0`; then
/// every collective runs over point-to-point messages). Must be the same on every rank.
const COLL_SHM_ENV: &str = "RT_COLL_SHM";
/// Environment variable: smallest broadcast (bytes) a shared-memory collective pulls
/// by CMA instead of sending in messages. Must be the same on every rank.
const COLL_CMA_MIN_ENV: &str = "RT_COLL_CMA_MIN";
/// Default of [`COLL_CMA_MIN_ENV`].
const COLL_CMA_MIN_BYTES: usize = 16 * 1024;

/// Environment variable: bytes of each bulk buffer of the shared-memory collectives
/// (per rank and communicator with one; a multiple of 4096, 0 for none), read by the
/// rank that creates a node's segment. Long reductions combine contributions in place
/// there ([`runthrough_engine::coll::ShmColl`]).
const COLL_BULK_ENV: &str = "RT_COLL_BULK";
/// Largest default bulk buffer.
const COLL_BULK_MAX: usize = 1 << 20;
/// Default bulk buffers take at most this much of `/dev/shm` per node.
const COLL_BULK_TOTAL: usize = 32 << 20;

/// Bytes of each bulk buffer of a segment of `nranks` ranks, `local` of them on this
/// node: by default 1 MiB when at least 2 share the node, shrunk so that all of them
/// take at most 32 MiB; none below 64 KiB. (Combining in place beat the message
/// algorithms at every count measured: when ranks outnumber cores it saves a copy the
/// cores cannot overlap, and at 2 ranks on 2 cores a 1 MiB allreduce took 64–66 µs
/// through the bulk buffers against 440–452 by the ring, `osu_allreduce -m 65536:1048576`,
/// three runs each.)
fn bulk_bytes(conf: &Config, nranks: u32, local: usize) -> Result<u32, Error> {
    let share = COLL_BULK_TOTAL / (nranks as usize * runthrough_shm::collarea::BULK_SLOTS).max(1);
    let auto = if local >= 2 { COLL_BULK_MAX.min(share) / 4096 * 4096 } else { 0 };
    let auto = if auto < 64 * 1024 { 0 } else { auto };
    match conf.get(COLL_BULK_ENV) {
        None => Ok(auto as u32),
        Some(v) => v
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|b| b.is_multiple_of(4096) && *b <= runthrough_shm::collarea::BULK_MAX)
            .ok_or_else(|| Error::Init(format!("{COLL_BULK_ENV}={v}: want a multiple of 4096 up to 2^30"))),
    }
}

/// A word every rank publishes the address of (`probe/{rank}`) so that the others can
/// check they may read its memory by CMA.
static CMA_PROBE: u64 = 0x7275_6e74_6872_6f75;

/// Turns on shared-memory collectives over `seg`'s collective area, unless switched off;
/// `cma` holds every rank's pid when CMA works between every pair of ranks of the node.
fn enable_shm_coll(
    conf: &Config,
    engine: &mut Engine,
    seg: &Segment,
    me: Rank,
    local: Vec<bool>,
    cma: Option<Vec<i32>>,
) {
    if conf.off(COLL_SHM_ENV) {
        return;
    }
    if let Some(area) = seg.coll_area() {
        let mut coll = runthrough_engine::coll::ShmColl::new(area, me, local);
        if let Some(pids) = cma {
            let min = conf.get(COLL_CMA_MIN_ENV).and_then(|v| v.trim().parse().ok());
            coll = coll.with_cma(pids, min.unwrap_or(COLL_CMA_MIN_BYTES));
        }
        engine.enable_shm_coll(coll);
    }
}

/// Whether this rank can read every other local rank's memory by CMA (it reads their
/// probe words; `local`: the local ranks not out), unless CMA is switched off (`RT_SHM_CMA=0`).
fn probe_cma(x: &mut Exchange, me: u32, local: &[bool], pids: &[i32]) -> Result<bool, Error> {
    if runthrough_shm::cma::disabled_by_env() {
        return Ok(false);
    }
    for r in (0..local.len() as u32).filter(|&r| r != me && local[r as usize]) {
        let v = x.get("probe", r)?;
        let addr = peer_entry::probe_addr(r, &v)?;
        let mut word = [0u8; 8];
        match runthrough_shm::cma::read(pids[r as usize], addr, &mut word) {
            Ok(()) if u64::from_ne_bytes(word) == CMA_PROBE => {}
            other => {
                tracing::debug!(peer = r, result = ?other.map(|()| word), "CMA probe failed: collectives copy");
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// What [`boot`] hands to the runtime.
#[derive(Debug)]
pub(crate) struct Booted {
    pub(crate) engine: Engine,
    pub(crate) bootstrap: Bootstrap,
    pub(crate) liveness: Liveness,
    pub(crate) about: String,
    /// Ranks out of the job at the last start-up fence (failed during start-up, R31):
    /// the same list at every rank.
    pub(crate) out: Vec<u32>,
    /// The start-up heartbeat (rtrun only); stopped once `init` is done.
    pub(crate) heartbeat: Option<Heartbeat>,
    /// The detector's ring with the job's hosts interleaved (R42: a dead host is one
    /// timeout), the same at every rank: built from the hosts the ranks published.
    pub(crate) ring: Ring,
}

/// The start-up exchange with the bootstrap service (R31): the connection, this rank,
/// and which ranks are out of the job (exited or excluded), as the last fault-tolerant
/// fence said (never any without rtrun: see [`crate::bootstrap`]).
struct Exchange {
    bs: Bootstrap,
    me: u32,
    out: Vec<bool>,
}

impl Exchange {
    /// A fault-tolerant fence: completes over the ranks not out; afterwards `out` is the
    /// launcher's list at that fence, the same at every rank.
    fn fence(&mut self) -> Result<(), Error> {
        for r in self.bs.fence(BOOT_TIMEOUT)? {
            if let Some(o) = self.out.get_mut(r as usize) {
                *o = true;
            }
        }
        Ok(())
    }

    fn is_out(&self, r: u32) -> bool {
        self.out[r as usize]
    }

    /// Rank `r`'s entry `name` (`name/r`).
    fn get(&mut self, name: &str, r: u32) -> Result<Vec<u8>, Error> {
        self.bs.get(name, r, BOOT_TIMEOUT)
    }

    /// Publishes this rank's entry `name`.
    fn put(&mut self, name: &str, value: &[u8]) -> Result<(), Error> {
        self.bs.put(name, self.me, value)
    }
}

/// The start-up heartbeat (R31): a thread with its own connection to the launcher says
/// `Alive` every detector period until `init` is done, so the launcher can tell a rank
/// that is slow (busy opening its transports, or waiting for a core) from one that hangs.
/// Told it was excluded, it stops the process.
#[derive(Debug)]
pub(crate) struct Heartbeat {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Heartbeat {
    fn start(env: &JobEnv, period: Duration) -> Result<Heartbeat, Error> {
        let mut client = Client::connect(env, BOOT_TIMEOUT).map_err(kv_err("bootstrap connect"))?;
        client.alive().map_err(kv_err("bootstrap heartbeat"))?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("rt-heartbeat".into())
            .spawn(move || loop {
                match stopped.recv_timeout(period) {
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    _ => return,
                }
                match client.alive() {
                    Ok(()) => {}
                    Err(runthrough_launch::Error::Excluded) => {
                        crate::bootstrap::excluded_exit("by the launcher, during start-up")
                    }
                    // The launcher is gone: the main thread's next request says so.
                    Err(e) => {
                        tracing::debug!(error = %e, "start-up heartbeat: launcher unreachable");
                        return;
                    }
                }
            })
            .map_err(|e| Error::Init(format!("heartbeat thread: {e}")))?;
        Ok(Heartbeat { stop: Some(stop), thread: Some(thread) })
    }

    /// Stops the heartbeat (wakes the thread at once and joins it).
    pub(crate) fn stop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A rank started by `rtrun`, a PMIx or a PMI-2 server (see [`crate::runtime`] for the
/// sequence and R31).
pub(crate) fn boot(
    conf: &Config,
    env: &JobInfo,
    bs: Bootstrap,
    mut cfg: EngineConfig,
    ring_bytes: u32,
    hb_period: Duration,
) -> Result<Booted, Error> {
    let mode = TransportMode::from_conf(conf)?;
    let one_host = env.local_size == env.size;
    if mode == TransportMode::Shm && !one_host {
        return Err(Error::Unsupported("ranks on several hosts need the fabric transport"));
    }
    let use_fabric = mode == TransportMode::Fabric || (mode == TransportMode::Auto && !one_host);
    let use_shm = mode != TransportMode::Fabric;
    let provider = if use_fabric {
        Some(
            conf.get("RT_PROVIDER")
                .filter(|p| !p.trim().is_empty())
                .map_or(Ok(ProviderRequest::Auto), str::parse)
                .map_err(|_| Error::Init("RT_PROVIDER: expected auto, tcp, sockets, verbs or cxi".to_string()))?,
        )
    } else {
        None
    };
    let policy: BindPolicy = env.bind.parse().map_err(init_err("--bind-to"))?;
    let bound = match pin::bind(policy, env.local_rank as usize) {
        Ok(Some(core)) => format!("bound to core {core}"),
        Ok(None) => format!("not bound ({policy})"),
        Err(e) => {
            tracing::warn!(error = %e, "binding failed; running unbound");
            format!("binding failed: {e}")
        }
    };
    // `rtrun --report-bindings`: each rank says where it may run, as the kernel has it.
    if conf.on("RT_REPORT_BINDINGS") {
        let allowed = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Cpus_allowed_list:").map(|v| v.trim().to_owned())))
            .unwrap_or_else(|| "unknown".to_owned());
        eprintln!("rtrun: rank {} on {}: {bound}; CPUs {allowed}", env.rank, env.node);
    }
    let mut about = Vec::new();
    if bs.rtrun_env().is_none() {
        about.push(bs.describe());
    }
    let heartbeat = match bs.rtrun_env() {
        Some(env) => Some(Heartbeat::start(env, hb_period)?),
        None => None,
    };
    let me = env.rank;
    let mut x = Exchange { bs, me, out: vec![false; env.size as usize] };
    x.put("pid", &std::process::id().to_le_bytes())?;
    x.put("host", env.node.as_bytes())?;
    let probe = std::ptr::addr_of!(CMA_PROBE) as u64;
    x.put("probe", &probe.to_le_bytes())?;
    let mut rxm = String::new();
    let mut fabric = match provider {
        Some(request) => {
            let (t, pool) = open_fabric(conf, env, request, one_host, &mut about)?;
            rxm = pool;
            x.put("fi", &t.address().map_err(init_err("fabric address"))?)?;
            Some(t)
        }
        None => None,
    };
    // Fence 1: every rank not out has published its entries.
    x.fence()?;
    let published = x.out.clone();
    let mut hosts = Vec::with_capacity(env.size as usize);
    for r in 0..env.size {
        hosts.push(if published[r as usize] { None } else { Some(peer_entry::host(r, &x.get("host", r)?)?) });
    }
    // A rank that failed before publishing its host is reached like a remote one when
    // there is a fabric (never, as it is failed), else through the segment.
    let route: Vec<Route> = hosts
        .iter()
        .map(|h| match h {
            Some(h) if use_shm && *h == env.node => Route::Shm,
            None if fabric.is_none() => Route::Shm,
            _ => Route::Fabric,
        })
        .collect();
    let shm_peers = route.iter().filter(|r| **r == Route::Shm).count();
    let mut liveness = Liveness::default();
    let shm = if use_shm {
        let layout = Layout { nranks: env.size, ring_bytes, bulk_bytes: bulk_bytes(conf, env.size, shm_peers)? };
        let seg = attach_segment(&mut x, env, &hosts, layout)?;
        let topo = Topology::detect();
        let placement = seg.place_inbound(me, &topo);
        tracing::debug!(%placement, topology = %topo.describe(), "inbound rings placed");
        about.push(format!(
            "shared memory to {shm_peers} of {} ranks; {}; inbound rings: {placement}",
            env.size,
            topo.describe()
        ));
        // Fence 3: every local rank not out has attached, so the name can go.
        x.fence()?;
        let first_alive = (0..env.size).find(|&r| route[r as usize] == Route::Shm && !x.is_out(r));
        if first_alive == Some(me) {
            if let Err(e) = Segment::unlink(seg.name()) {
                tracing::debug!(error = %e, "segment unlink (the launcher unlinks at the end too)");
            }
        }
        let mut pids = vec![0i32; env.size as usize];
        for r in (0..env.size).filter(|&r| !published[r as usize]) {
            let v = x.get("pid", r)?;
            pids[r as usize] = peer_entry::pid(r, &v)?;
        }
        let watched: Vec<bool> = (0..env.size).map(|r| route[r as usize] == Route::Shm && !x.is_out(r)).collect();
        liveness = watch_peers(conf, me, &watched, &pids, seg.departures());
        // Collectives pull long contributions by CMA only if every local pair can: each
        // rank probes, publishes its answer, and all combine all answers alike.
        let local: Vec<bool> = route.iter().map(|r| *r == Route::Shm).collect();
        let ok = probe_cma(&mut x, me, &watched, &pids)?;
        x.put("cma", &[u8::from(ok)])?;
        // Fence 4: every local rank not out has published its answer.
        x.fence()?;
        let mut all = true;
        let answered: Vec<u32> = (0..env.size).filter(|&r| local[r as usize] && !x.is_out(r)).collect();
        for r in answered {
            all &= peer_entry::cma_ok(r, &x.get("cma", r)?)?;
        }
        let cma = all.then(|| pids.clone());
        let t = ShmTransport::new(&seg, Rank(me), pids).map_err(init_err("shm"))?;
        Some((t, seg, cma))
    } else {
        None
    };
    if let Some(t) = fabric.as_mut() {
        let mut addrs = Vec::with_capacity(env.size as usize);
        for r in 0..env.size {
            addrs.push(if published[r as usize] { None } else { Some(x.get("fi", r)?) });
        }
        let known: Vec<Option<&[u8]>> = addrs.iter().map(Option::as_deref).collect();
        t.connect_known(&known).map_err(init_err("fabric address vector"))?;
        let fabric_peers = env.size as usize - shm_peers;
        let describe = t.describe();
        about.push(format!("{describe} to {fabric_peers} of {} ranks", env.size));
        if describe.contains("ofi_rxm") {
            about.push(format!("ofi_rxm receive buffers {rxm}"));
        }
        if mode == TransportMode::Fabric && conf.get("RT_CMA_MIN").is_none() {
            // Every rendezvous goes by RMA read (zero copy) unless the user set a threshold.
            cfg.rma_min = 0;
        }
    }
    about.push(bound);
    let about = about.join("; ");
    let (shm, seg, cma) = match shm {
        Some((t, seg, cma)) => (Some(t), Some(seg), cma),
        None => (None, None, None),
    };
    let local: Vec<bool> = route.iter().map(|r| *r == Route::Shm).collect();
    let transport = match (shm, fabric) {
        (Some(s), None) => AnyTransport::Shm(s),
        (None, Some(f)) => AnyTransport::Fabric(Box::new(f)),
        (shm, fabric) => {
            AnyTransport::Multi(Box::new(MultiTransport::new(shm, fabric, route).map_err(init_err("routing"))?))
        }
    };
    let mut engine = Engine::new(Rank(me), env.size, transport, cfg);
    if let Some(seg) = &seg {
        enable_shm_coll(conf, &mut engine, seg, Rank(me), local, cma);
    }
    let out = (0..env.size).filter(|&r| x.is_out(r)).collect();
    let ring = detector_ring(&hosts);
    Ok(Booted { engine, bootstrap: x.bs, liveness, about, out, heartbeat, ring })
}

/// [`Ring::interleaving`] over the hosts the ranks published (the same lists at every
/// rank, R31); a rank out before it published one counts as a host of its own (it is
/// failed from the start, so where it stands on the ring matters to nobody).
fn detector_ring(hosts: &[Option<String>]) -> Ring {
    let mut ids: HashMap<&str, u32> = HashMap::new();
    let host_of: Vec<u32> = hosts
        .iter()
        .enumerate()
        .map(|(r, h)| match h {
            Some(h) => {
                let next = ids.len() as u32;
                *ids.entry(h.as_str()).or_insert(next)
            }
            None => u32::MAX - r as u32,
        })
        .collect();
    Ring::interleaving(&host_of)
}

/// Creates or opens this host's segment (fence 2 inside). Each host's creator is its
/// lowest rank not out; if some host's creator is out after the fence (it failed, maybe
/// half-way through creating it), the next rank of that host creates a fresh segment
/// under `NAME.K`, and *every* rank of the job fences again (fences are job-wide, so all
/// must count the same number): every rank takes the same decisions, from the same
/// lists (R31). `hosts`: the host of every rank that published one.
fn attach_segment(x: &mut Exchange, env: &JobInfo, hosts: &[Option<String>], layout: Layout) -> Result<Segment, Error> {
    let me = env.rank;
    let leader_of =
        |x: &Exchange, h: &str| (0..env.size).find(|&r| hosts[r as usize].as_deref() == Some(h) && !x.is_out(r));
    let mut names: Vec<&str> = hosts.iter().flatten().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    let mut attempt = 0;
    let mut mine: Option<Segment> = None;
    loop {
        let leaders: Vec<Option<u32>> = names.iter().map(|h| leader_of(x, h)).collect();
        let my_leader = leader_of(x, &env.node).unwrap_or(me);
        let name = if attempt == 0 { env.shm_name.clone() } else { format!("{}.{attempt}", env.shm_name) };
        if my_leader == me && mine.is_none() {
            mine = Some(Segment::create(&name, layout).map_err(init_err("segment create"))?);
        }
        // Fence 2: every host's creator has made its segment (unless it is out now).
        x.fence()?;
        if !leaders.iter().flatten().any(|&l| x.is_out(l)) {
            return match mine {
                Some(s) => Ok(s),
                None => Segment::open(&name, BOOT_TIMEOUT).map_err(init_err("segment open")),
            };
        }
        if x.is_out(my_leader) {
            tracing::debug!(
                leader = my_leader,
                name,
                "segment creator failed during start-up; the next local rank creates one"
            );
            let _ = Segment::unlink(&name);
            attempt += 1;
        }
    }
}

/// Opens a pidfd for every other rank reached over shared memory and not out (`local`). Never fails: without
/// pidfds (old kernel, seccomp, `RT_PIDFD=0`) there is no watch, and the other evidence
/// of peer death (launcher, ring detector) remains.
fn watch_peers(conf: &Config, me: u32, local: &[bool], pids: &[i32], departures: Departures) -> Liveness {
    let off = conf.off(PIDFD_ENV);
    let peers: Vec<(u32, i32)> = (0..local.len() as u32)
        .filter(|&r| r != me && local[r as usize] && pids[r as usize] > 0)
        .map(|r| (r, pids[r as usize]))
        .collect();
    let watch = if off || peers.is_empty() {
        None
    } else {
        match PeerWatch::open(&peers, departures.clone()) {
            Ok(w) => Some(w),
            Err(e) => {
                tracing::debug!(error = %e, "no pidfd peer watch; peer exits come from the launcher and the detector");
                None
            }
        }
    };
    Liveness { watch, departures: Some(departures) }
}

/// Where the fabric endpoint of a rank in a multi-host run binds: an interface of this
/// host and one of its addresses (see the module doc for the order of the choices).
///
/// `fabric_addr` / `fabric_iface` are the values of `RT_FABRIC_ADDR` / `RT_FABRIC_IFACE`;
/// `addrs` this host's interface addresses.
fn fabric_address(fabric_addr: Option<&str>, fabric_iface: Option<&str>, addrs: &[IfAddr]) -> Result<IfAddr, Error> {
    let known = || {
        let mut v: Vec<String> = addrs.iter().map(|a| format!("{} {}", a.iface, a.ip)).collect();
        v.dedup();
        v.join(", ")
    };
    if let Some(s) = fabric_addr.map(str::trim).filter(|s| !s.is_empty()) {
        let ip: std::net::IpAddr =
            s.parse().map_err(|_| Error::Init(format!("{RT_FABRIC_ADDR}={s:?}: not an IP address")))?;
        return net::iface_of(addrs, ip).cloned().ok_or_else(|| {
            Error::Init(format!("{RT_FABRIC_ADDR}={ip} is not an address of this host (it has: {})", known()))
        });
    }
    if let Some(name) = fabric_iface.map(str::trim).filter(|s| !s.is_empty()) {
        return net::ipv4_of(addrs, name).cloned().ok_or_else(|| {
            Error::Init(format!(
                "{RT_FABRIC_IFACE}={name:?}: no IPv4 address on that interface (this host has: {})",
                known()
            ))
        });
    }
    net::first_non_loopback_ipv4(addrs).cloned().ok_or_else(|| {
        Error::Init(format!(
            "ranks on several hosts need a network address, and this host has none but loopback \
             (set {RT_FABRIC_ADDR} with rtrun --host NAME=IP, or {RT_FABRIC_IFACE}; it has: {})",
            known()
        ))
    })
}

/// `FI_OFI_RXM_MSG_RX_SIZE`, the receive buffers `ofi_rxm` posts to its message
/// provider (tcp, verbs). `rtrun` exports [`RXM_MSG_RX_SIZE`] unless the user set it
/// (`runthrough_launch::env::fabric_defaults`); `init` never sets it (libfabric reads its
/// own environment, and writing the environment races with threads the application
/// may have started).
const RXM_MSG_RX_ENV: &str = "FI_OFI_RXM_MSG_RX_SIZE";

/// The default `rtrun` gives [`RXM_MSG_RX_ENV`]. Left unset, rxm over tcp takes 4096
/// buffers of its 16 KiB bounce size for the shared receive context it uses there:
/// 64 MiB that every rank allocates and clears when its endpoint is enabled, most of the
/// start-up of an 8-rank tcp job on 2 cores (page clearing was a third of its samples;
/// 8 ranks with libfabric 2.5.1 started in 0.67–0.93 s unset against 0.18–0.21 s at 256,
/// with Debian's 1.17 in 0.93–0.99 against 0.77–0.84; a rank's resident memory 83 MiB
/// against 31: bench/history/NOTEBOOK.md §0.17). 256 still holds four `osu_bw` windows
/// of 64 messages; a sender that outruns it waits in TCP's flow control, nothing is
/// dropped.
pub(crate) const RXM_MSG_RX_SIZE: u32 = runthrough_launch::env::RXM_MSG_RX_SIZE;

/// The rxm receive pool libfabric will use, as the "about" line reports it: the value of
/// [`RXM_MSG_RX_ENV`] in this process's environment (libfabric's, read only), or
/// libfabric's default when unset (a rank not started by `rtrun`).
fn rxm_receives() -> String {
    match std::env::var(RXM_MSG_RX_ENV) {
        Ok(v) if v.trim() == RXM_MSG_RX_SIZE.to_string() => v.trim().to_owned(),
        Ok(v) => format!("{} ({RXM_MSG_RX_ENV} set)", v.trim()),
        Err(_) => format!("libfabric's default ({RXM_MSG_RX_ENV} unset)"),
    }
}

/// Opens the libfabric endpoint of this rank: its source address pinned to loopback
/// when the job runs on one host, to this host's fabric address ([`fabric_address`])
/// otherwise (the IP providers bind to the hinted address; `rtrun` also exports
/// `FI_TCP_IFACE`/`FI_SOCKETS_IFACE` for one host). Also returns the rxm receive pool
/// ([`rxm_receives`]; it matters only under `ofi_rxm`).
fn open_fabric(
    conf: &Config,
    env: &JobInfo,
    request: ProviderRequest,
    one_host: bool,
    about: &mut Vec<String>,
) -> Result<(FabricTransport, String), Error> {
    let mut hints = Hints::default();
    if one_host {
        hints = hints.loopback();
    } else {
        let addrs = net::addresses().map_err(init_err("network interfaces"))?;
        let at = fabric_address(conf.get(RT_FABRIC_ADDR), conf.get(RT_FABRIC_IFACE), &addrs)?;
        // verbs and cxi name their own devices; the node pin is for the IP providers.
        if !matches!(request, ProviderRequest::Only(Provider::Verbs | Provider::Cxi)) {
            hints.node = Some(at.ip.to_string());
        }
        tracing::debug!(iface = %at.iface, ip = %at.ip, "fabric endpoint address");
        about.push(format!("fabric address {} on {}", at.ip, at.iface));
    }
    let rxm = rxm_receives();
    let mut fcfg = FabricConfig::default();
    if let Some(stall) = conf.millis(STALL_ENV)? {
        fcfg.stall = stall.max(Duration::from_millis(1));
    }
    let t = FabricTransport::open(request, &hints, Rank(env.rank), env.size, fcfg).map_err(init_err("fabric"))?;
    Ok((t, rxm))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_mode_parsing() {
        assert_eq!("".parse::<TransportMode>().unwrap(), TransportMode::Auto);
        assert_eq!("auto".parse::<TransportMode>().unwrap(), TransportMode::Auto);
        assert_eq!("SHM".parse::<TransportMode>().unwrap(), TransportMode::Shm);
        assert_eq!(" fabric ".parse::<TransportMode>().unwrap(), TransportMode::Fabric);
        assert!("ofi".parse::<TransportMode>().is_err());
    }

    #[test]
    fn fabric_address_choice() {
        let a = |iface: &str, ip: &str, up| IfAddr { iface: iface.into(), ip: ip.parse().unwrap(), up };
        let host = vec![a("lo", "127.0.0.1", true), a("rtn-h1", "fe80::1", true), a("rtn-h1", "10.77.0.12", true)];
        // Explicit address: its interface.
        let at = fabric_address(Some("10.77.0.12"), None, &host).unwrap();
        assert_eq!((at.iface.as_str(), at.ip.to_string().as_str()), ("rtn-h1", "10.77.0.12"));
        assert_eq!(fabric_address(Some("127.0.0.1"), Some("rtn-h1"), &host).unwrap().iface, "lo");
        // An address this host does not have is an error, never a fallback.
        let e = fabric_address(Some("10.77.0.13"), None, &host).unwrap_err().to_string();
        assert!(e.contains("not an address of this host") && e.contains("rtn-h1 10.77.0.12"), "{e}");
        assert!(fabric_address(Some("h1"), None, &host).is_err());
        // Named interface, then the first non-loopback one.
        assert_eq!(fabric_address(None, Some("rtn-h1"), &host).unwrap().ip.to_string(), "10.77.0.12");
        assert!(fabric_address(None, Some("eth0"), &host).is_err());
        assert_eq!(fabric_address(None, None, &host).unwrap().iface, "rtn-h1");
        assert_eq!(fabric_address(Some(" "), Some(""), &host).unwrap().iface, "rtn-h1");
        let e = fabric_address(None, None, &host[..1]).unwrap_err().to_string();
        assert!(e.contains("none but loopback"), "{e}");
    }
}
