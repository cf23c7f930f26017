//! Start-up and shut-down: bootstrap through the launcher's key-value service, the
//! shared-memory segment, the engine; `finalize`.
//!
//! Under `rtrun` (env `RT_RANK` etc.): pin per `RT_BIND`, connect to the launcher, rank 0
//! creates the job's segment (0600, per-job name), everyone opens it and places its
//! inbound rings on its NUMA node, and once all are attached rank 0 unlinks the name, so
//! the segment disappears with the last process even after a crash (the launcher also
//! unlinks it at exit). Under Slurm (`srun --mpi=pmix` or `--mpi=pmi2`) the same
//! sequence runs over the PMIx or PMI-2 server's key-value exchange
//! (`src/bootstrap.rs` picks the service from the environment; `docs/SLURM.md`).
//! Without any of them the process is a singleton world of size 1.
//!
//! A failure during start-up returns [`Error::Init`] instead of aborting (R5).
//!
//! Start-up runs through failures (R31). Under `rtrun` the launcher is the authority on
//! who is in the job while it starts: it sees ranks exit, and it excludes (SIGKILLs) a
//! rank it takes for hung — one whose start-up heartbeats stopped for the detector
//! timeout while its process is stopped (for ten timeouts whatever its state), or that
//! is stopped before its first heartbeat while others wait for it
//! (`runthrough_launch::job`). The bootstrap fences ([`runthrough_launch::Client::join`])
//! complete over the ranks not out, and each fence's reply lists the ranks out when it
//! completed — the same list at every rank — so all survivors take the same decisions
//! during start-up (which entries to read, who creates a host's segment: see
//! `boot.rs`) and start with the same world: the ranks out at the last fence are failed
//! in it before `init` returns, as any failure would be (`group_failed()` names them,
//! operations with them complete with `RankFailStop`, wildcards are disabled and
//! collectives wait for a `validate`, which recognises them). A rank that fails after
//! the last fence is found as any later failure (launcher notice, pidfd, detector); those
//! the launcher knows of when `init` ends are applied before it returns. A rank the
//! launcher excluded stops (exit code 75) as soon as it learns it, never rejoining.
//! `init` returns an error only when the launcher is gone (or a local step fails); when
//! every other rank is gone, it returns a world where they all are failed.
//!
//! Environment tunables: `RT_EAGER_LIMIT` (bytes, default 16384; when every rank shares
//! the node 32768 if each has a core, [`SHM_CHOOSING_EAGER_LIMIT`], else 65536,
//! [`SHM_EAGER_LIMIT`]), `RT_RING_BYTES` (per ring pair, power of
//! two; default 256 KiB where ranks outnumber cores, else each rank's inbound rings share
//! [`INBOUND_RING_BUDGET`], up to 4 MiB a ring), `RT_SPIN_POLLS` (busy polls before a wait
//! yields; default 4000, or 16 when ranks outnumber cores), `RT_FATAL_SCOPE`
//! (`group`, the default, or `job`: see [`FatalScope`]), `RT_CMA_MIN` (smallest message
//! pulled by single copy, CMA or RMA; default 524288 where ranks outnumber cores or over
//! a fabric, and no CMA on a node whose ranks each have a core; smaller rendezvous
//! stream through the rings),
//! `RT_SHM_CMA=0` (no single copy at all), `RT_PIDFD=0` (no pidfd watch of the
//! shared-memory peers), `RT_LAUNCHER_NOTICES=0` (do not ask the launcher which ranks
//! exited; for tests that must prove another source of evidence).

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::task::Waker;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use runthrough_engine::engine::{Config as EngineConfig, OVERSUBSCRIBED_SPIN_POLLS};

use crate::config::Config;
use runthrough_engine::lock::{BiasedGuard, BiasedMutex};
use runthrough_engine::{ContextId, Rank};
use runthrough_ft::ring::Ring;
use runthrough_ft::{DEFAULT_HB_PERIOD, DEFAULT_HB_TIMEOUT};
use runthrough_shm::PeerWatch;

use crate::boot::{self, Liveness};
use crate::bootstrap::{self, Bootstrap, JobInfo, EXCLUDED_EXIT};
use crate::comm::{Comm, ErrorMode};
pub use crate::shared::FatalScope;
pub(crate) use crate::shared::Shared;
use crate::{witness, Error, InterComm};

/// Default bytes of cells per ring pair (`RT_RING_BYTES` overrides).
///
/// Small enough that the data in flight between every pair of an oversubscribed job
/// stays in the last-level cache, so the receiver's copy out of a ring reads what the
/// sender's copy just wrote (8 ranks on 2 cores, 1 MiB per member, interleaved:
/// alltoall 3.3–4.1 ms and allgather 2.8–3.3 ms with 256 KiB rings and 64 KiB records,
/// against 4.8–5.0 and 4.3–4.8 ms with 1 MiB rings, where 56 MiB could be in flight).
pub const DEFAULT_RING_BYTES: u32 = 256 * 1024;
/// Bytes of inbound rings per rank on a node whose ranks each have a core (4 MiB a ring
/// at most). There a rank's peer runs to drain its ring, and a larger ring holds a whole
/// `osu_bibw` window of 64 KiB messages instead of three, so the two ranks stop waiting
/// on each other every third message (2 ranks, 7 interleaved runs: 64 KiB `osu_bibw`
/// 1.18x, 4 MiB `osu_bibw` 1.07x, 64 KiB `osu_bw` 1.05x, 1 MiB `osu_bw` 1.00x, 4 MiB
/// `osu_bw` 0.96x against 256 KiB rings; bench/history/NOTEBOOK.md §0.13).
pub const INBOUND_RING_BUDGET: usize = 4 << 20;

/// The default ring size of a node of `local` ranks on `cores` cores: when ranks
/// outnumber cores, [`DEFAULT_RING_BYTES`]; else each rank's inbound rings share
/// [`INBOUND_RING_BUDGET`] (the largest power of two that fits, 256 KiB at least).
pub(crate) fn default_ring_bytes(local: usize, cores: usize) -> u32 {
    if local < 2 || local > cores {
        return DEFAULT_RING_BYTES;
    }
    let share = INBOUND_RING_BUDGET / (local - 1);
    (1usize << share.ilog2()).max(DEFAULT_RING_BYTES as usize) as u32
}
/// Default eager limit when every rank of the job shares the node (only shared-memory
/// rings): a quarter ring, the largest payload a 256 KiB ring takes in one record (a
/// record holds a quarter ring plus one cell: a 64 KiB message goes eager, 2.05 against
/// 2.29 µs as a rendezvous, `osu_latency`, 9 interleaved runs). Collectives move data in eager
/// records, and four times fewer of them per MiB (8 ranks, 1 MiB alltoall: 3.3–3.6
/// against 4.1–4.8 ms with 16 KiB).
pub const SHM_EAGER_LIMIT: usize = 64 * 1024;
/// Default eager limit when every rank of the job shares the node and has a core of its
/// own: longer messages are a rendezvous whose protocol (one CMA copy, or two pipelined
/// copies through the ring) the engine times per size class (`Config::cma_choose`). On
/// an Intel host one copy won from 64 KiB (`osu_latency` 64 KiB 4.8-5.0 against
/// 8.5-8.6 µs eager, `osu_bibw` 22.6 against 15.0 GB/s; bench/history/NOTEBOOK.md §0.15); on
/// the AMD host of §0.13 a 64 KiB rendezvous cost 2.29 against 2.05 µs eager.
pub const SHM_CHOOSING_EAGER_LIMIT: usize = 32 * 1024;
/// Attempts of the progress thread to take the engine lock without waiting.
const LOCK_TRIES: u32 = 64;
/// Progress calls the progress thread makes at most per tick while pulls wait.
const BACKGROUND_PULL_ROUNDS: usize = 256;
/// Least default detector timeout when the job spans hosts: heartbeats then cross TCP
/// (libfabric tcp/sockets), where one lost segment holds everything behind it for the
/// retransmission timeout (Linux: at least 200 ms, doubling on each further loss of the
/// same segment: a segment lost three times arrives 1.4 s late). With 1 % of packets
/// lost (tests/cluster.rs, `lossy_network_no_false_failure`), 0.5 s took a live rank for
/// failed within five minutes, twice; 2 s outlasts three losses in a row.
const MULTI_HOST_HB_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long the witness thread may take to connect to the launcher at init (R32).
const WITNESS_CONNECT: Duration = Duration::from_secs(10);
/// How often the progress thread asks the launcher which ranks exited (`RT_WATCH_MS`).
const DEFAULT_WATCH: Duration = Duration::from_millis(10);
/// Longest wait for the connection to the bootstrap service (rtrun's).
const BOOT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Environment variable that stops the launcher's exit notices when `0`.
const LAUNCHER_NOTICES_ENV: &str = "RT_LAUNCHER_NOTICES";
/// Consecutive idle progress calls that end finalize's flush.
const FINALIZE_IDLE_POLLS: u32 = 64;
/// How long finalize keeps flushing queued sends.
const FINALIZE_FLUSH: Duration = Duration::from_secs(10);

/// The context of [`Runtime::comm_self`]: reserved at every process, so made locally.
const SELF_CTX: u32 = 2;
/// The first context communicator creation proposes (the world's is 0, the self
/// communicator's [`SELF_CTX`]; each takes two, point-to-point and collective).
const FIRST_CREATED_CTX: u32 = 4;

mod ports;
mod spawn;
pub use spawn::{SpawnApp, SpawnError};

/// An initialised runthrough process. Dropping it finalizes.
#[derive(Debug)]
pub struct Runtime {
    shared: Arc<Shared>,
    world: Comm,
    /// This process alone ([`Runtime::comm_self`]).
    solo: Comm,
    finalized: bool,
    about: String,
    watchdog: Option<JoinHandle<()>>,
    /// The settings it started with (a spawn's parents join the new world with them).
    conf: Config,
    /// In a spawned world: its parents and children.
    layout: Option<spawn::Layout>,
    /// In a spawned world: the inter-communicator between parents and children.
    parent: Option<InterComm>,
    /// The worlds this process joined as a parent (finalized before this one).
    worlds: Mutex<Vec<Runtime>>,
}

/// Initialises this process from its environment and returns the runtime (R5: errors
/// are returned): [`init_with`]`(`[`Config::from_env`]`())`.
pub fn init() -> Result<Runtime, Error> {
    init_with(Config::from_env())
}

/// Initialises this process with the settings `conf` and returns the runtime (R5: errors
/// are returned). Reads no environment variable and writes none: what the launcher
/// exported reaches it only through `conf` ([`Config::from_env`]).
pub fn init_with(conf: Config) -> Result<Runtime, Error> {
    // RT_LOG: this rank's log on stderr, labelled with its rank under the launcher.
    let who = conf.get("RT_RANK").map_or_else(|| "runthrough".to_owned(), |r| format!("rank {r}"));
    runthrough_launch::logging::install(conf.get(runthrough_launch::logging::RT_LOG), conf.get("RT_DEBUG"), &who);
    let found = bootstrap::detect(&conf)?;
    let job = bootstrap::connect(found, &conf, BOOT_CONNECT_TIMEOUT)?;
    if conf.get(spawn::DIE_CONNECTED_ENV).is_some() {
        eprintln!("runthrough: dying on purpose while joining a world ({})", spawn::DIE_JOINING_ENV);
        // SIGKILL: no handler runs (a signal handler of a loaded library would delay the
        // death, holding the sockets open meanwhile).
        let _ = std::process::Command::new("kill").arg("-9").arg(std::process::id().to_string()).status();
        std::process::abort();
    }
    let cores = node_cores(&conf);
    let cfg = engine_config(&conf, cores, job.as_ref().map(|(j, _)| j))?;
    let local_size = job.as_ref().map_or(1, |(j, _)| j.local_size as usize);
    let ring_default = default_ring_bytes(local_size, cores);
    let ring_bytes = conf.num("RT_RING_BYTES", u64::from(ring_default))? as u32;
    let multi_host = job.as_ref().is_some_and(|(j, _)| j.local_size < j.size);
    let ft = ft_config(&conf, cores, local_size, multi_host)?;
    let hb_period = Duration::from_millis(conf.num("RT_FT_PERIOD_MS", DEFAULT_HB_PERIOD.as_millis() as u64)?.max(1));
    // R32: under rtrun the launcher is the job's witness (its environment, for the
    // witness thread's own connection).
    let witness_env = match &job {
        Some((_, Bootstrap::Rtrun { env, .. })) => Some(env.as_ref().clone()),
        _ => None,
    };
    let (engine, bootstrap, liveness, size, rank, about, out, heartbeat, ring) = match job {
        None => {
            let (engine, about) = boot::singleton(&conf, cfg, ring_bytes)?;
            (engine, None, Liveness::default(), 1, 0, about, Vec::new(), None, Ring::RankOrder)
        }
        Some((env, bs)) => {
            let b = boot::boot(&conf, &env, bs, cfg, ring_bytes, hb_period)?;
            late_start(&conf, env.rank)?;
            (b.engine, Some(b.bootstrap), b.liveness, env.size, env.rank, b.about, b.out, b.heartbeat, b.ring)
        }
    };
    let Liveness { watch: peer_watch, departures } = liveness;
    let layout = spawn::Layout::from_conf(&conf, size)?;
    let first_ctx = if layout.is_some() { spawn::FIRST_CTX } else { FIRST_CREATED_CTX };
    let shared = Arc::new(Shared {
        engine: Arc::new(BiasedMutex::new(engine)),
        bootstrap: Mutex::new(bootstrap),
        world_size: size,
        rank,
        next_ctx: AtomicU32::new(first_ctx),
        claimed: Mutex::new(std::collections::HashSet::new()),
        job_fatal: AtomicBool::new(conf.get("RT_FATAL_SCOPE") == Some("job")),
        stop: AtomicBool::new(false),
        departures,
    });
    let watch = Duration::from_millis(conf.num("RT_WATCH_MS", DEFAULT_WATCH.as_millis() as u64)?.max(1));
    let notices = !conf.off(LAUNCHER_NOTICES_ENV);
    let tick = ft.as_ref().map_or(watch, |c| (c.period() / 2).min(watch)).max(Duration::from_millis(1));
    // The world first, so that the start-up failures below reach it as any failure
    // would: recorded (R8), wildcards disabled (R13), collectives off until validate (R18).
    // A spawned world: the children's own world, or the parents' side (and the
    // inter-communicator between them, with the parents out from the start recognized).
    let (world, parent) = match layout {
        Some(l) => {
            let (w, i) = l.comms(&shared, rank, &out);
            (w, Some(i))
        }
        None => {
            let group: Arc<[Rank]> = (0..size).map(Rank).collect();
            (Comm::new(shared.clone(), ContextId(0), group, rank, ErrorMode::ErrorsAreFatal), None)
        }
    };
    let watchdog = if size > 1 {
        // R32: under rtrun with the detector on, the launcher witnesses every verdict.
        let witness = match (&witness_env, &ft) {
            (Some(env), Some(_)) if witness::enabled(&conf) => {
                let timeout = conf.millis("RT_WITNESS_TIMEOUT_MS")?;
                Some(witness::spawn(Arc::downgrade(&shared), env, WITNESS_CONNECT, timeout, notices.then_some(watch))?)
            }
            _ => None,
        };
        {
            let mut e = shared.engine.lock();
            // Every verdict is a suspicion first: the launcher witnesses it (R32), or,
            // without one, this node's evidence of the suspect's process (busy is not
            // dead) decides it in the progress thread.
            e.set_witnessed(true);
            if let Some(cfg) = ft {
                e.enable_ft(cfg, ring);
            }
            // R31: the ranks out at the last start-up fence, the same at every rank.
            for &r in &out {
                e.fail_peer(Rank(r));
            }
        }
        // With a witness, its thread also asks the launcher for exits (its own
        // connection, bounded waits): the progress thread never blocks on the network.
        let progress_watch = (notices && witness.is_none()).then_some(watch);
        Some(spawn_progress(Arc::downgrade(&shared), tick, progress_watch, peer_watch, witness)?)
    } else {
        None
    };
    if shared.bootstrap.lock().is_some() {
        // Start-up is done: from now on the ring detector finds this rank if it hangs
        // (a rank the launcher excluded stops inside `started`).
        let started = shared.bootstrap.lock().as_mut().map(|b| b.started(&conf));
        if let Some(mut hb) = heartbeat {
            hb.stop();
        }
        if let Some(Err(e)) = started {
            return Err(e);
        }
        if notices && size > 1 {
            // Ranks that failed after the last fence, known now rather than a tick later.
            apply_launcher_notices(&shared);
        }
    }
    // Phase report for the launcher's end-of-job lines (`rtrun` says "after init").
    if let Some(Err(e)) = shared.bootstrap.lock().as_mut().map(Bootstrap::initialized) {
        tracing::warn!(error = %e, "could not tell the launcher that init completed");
    }
    let solo = Comm::new(shared.clone(), ContextId(SELF_CTX), Arc::from([Rank(rank)]), 0, ErrorMode::ErrorsAreFatal);
    Ok(Runtime {
        shared,
        world,
        solo,
        finalized: false,
        about,
        watchdog,
        conf,
        layout,
        parent,
        worlds: Mutex::new(Vec::new()),
    })
}

/// Asks the launcher which ranks exited and applies what is new: a rank that finalized
/// before exiting departed, the others failed.
fn apply_launcher_notices(sh: &Shared) {
    let exited = match sh.bootstrap.lock().as_mut().map(|c| c.exited()) {
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            tracing::debug!(error = %e, "launcher unreachable");
            return;
        }
        None => return,
    };
    crate::shared::apply_exits(sh, exited, || {
        sh.bootstrap.lock().as_mut().and_then(|c| c.departed().ok()).unwrap_or_default()
    });
}

/// The progress thread (docs/ARCHITECTURE.md §2, §3): every tick it
/// drains the transports (so heartbeats are read while the application computes), drives
/// the failure detector's clock and polls the pidfds of the shared-memory peers
/// (`peer_watch`); every `watch` (unless `None`: `RT_LAUNCHER_NOTICES=0`) it asks the
/// launcher which ranks exited. Either notice of an exit becomes a failure of the peer,
/// or a departure when the peer had finalized (local evidence, T-FD). The engine
/// drains a peer's messages before failing it, so a rank that finalized and exited loses
/// nothing. A rank the others declared failed (it was hung, e.g. SIGSTOPped) stops here,
/// never rejoining. Runs until finalize; holds only a weak reference to the runtime.
fn spawn_progress(
    shared: Weak<Shared>,
    tick: Duration,
    watch: Option<Duration>,
    mut peer_watch: Option<PeerWatch>,
    witness: Option<std::sync::mpsc::Sender<Rank>>,
) -> Result<JoinHandle<()>, Error> {
    std::thread::Builder::new()
        .name("rt-progress".into())
        .spawn(move || {
            let mut last_watch = Instant::now();
            let mut exits = Vec::new();
            let mut wakers = Vec::new();
            let mut released: Vec<Box<dyn runthrough_engine::Detached>> = Vec::new();
            // The engine's progress count at this thread's last look.
            let mut seen: Option<u64> = None;
            let pulse = match shared.upgrade() {
                Some(sh) => sh.engine.lock().pulse(),
                None => return,
            };
            loop {
                // Parked, not asleep: finalize unparks it, so it returns at once rather
                // than up to a tick later (a spurious wake only brings a tick forward).
                std::thread::park_timeout(tick);
                let Some(sh) = shared.upgrade() else { return };
                if sh.stop.load(Ordering::Acquire) {
                    return;
                }
                // Another thread progressed since the last tick (the application, waiting
                // in a blocking call): it drains the transports and runs the pulls, and its
                // next progress call runs the detector's tick, so this thread leaves the
                // lock alone, unless the engine holds something only the lock holder hands
                // over (suspects, an exclusion, futures to wake). Sharing the core with
                // that thread, taking the lock would cost hand-overs and context switches
                // in the middle of its copies (bench/history/NOTEBOOK.md §0.16: 1 MiB osu_bibw).
                let calls = pulse.calls();
                let others_progress = seen.is_some_and(|s| s != calls);
                seen = Some(calls);
                if others_progress && !pulse.needs_lock() {
                    pulse.request_tick();
                } else {
                    // Prefer not to queue on the engine lock: a parked progress thread gets
                    // the lock handed over (fair unlock) and can stall the application
                    // until the scheduler runs it. But heartbeats must go out every tick, or
                    // a busy rank is taken for a hung one: after a few tries, wait.
                    let mut guard = None;
                    for _ in 0..LOCK_TRIES {
                        if let Some(g) = sh.engine.try_lock() {
                            guard = Some(g);
                            break;
                        }
                        std::thread::yield_now();
                    }
                    let mut e = match guard {
                        Some(g) => g,
                        None => sh.engine.lock(),
                    };
                    // The lock is taken after another thread progressed only to hand
                    // over what the engine holds: the transports and pulls are that
                    // thread's, which shares the core.
                    if !others_progress {
                        e.progress();
                        // While the application computes, this thread alone moves its long
                        // receives: all of them, not the MiB a progress call pulls. Between
                        // calls the lock goes to a thread waiting for it (the application's),
                        // which a window of pulls under one hold kept out (bench/history/NOTEBOOK.md §0.12).
                        for _ in 0..BACKGROUND_PULL_ROUNDS {
                            if !e.pulls_pending() {
                                break;
                            }
                            BiasedGuard::bump(&mut e);
                            e.progress();
                        }
                    }
                    e.ft_tick();
                    match &witness {
                        Some(w) => {
                            for r in e.take_suspects() {
                                // The witness thread ends only with the runtime.
                                let _ = w.send(r);
                            }
                        }
                        // No launcher to witness (a singleton, Slurm, RT_WITNESS=0): this
                        // node's own evidence. Busy is not dead: a peer of this host
                        // whose process is alive and not stopped gets a fresh window.
                        None => {
                            for r in e.take_suspects() {
                                if peer_watch.as_ref().and_then(|w| w.is_running(r.0)) == Some(true) {
                                    tracing::debug!(rank = r.0, "suspect's process is alive on this host: refuted");
                                    e.refute_suspect(r);
                                } else {
                                    e.fail_peer(r);
                                }
                            }
                        }
                    }
                    // Futures whose requests completed (here or in anyone's progress).
                    e.take_wakers(&mut wakers);
                    // Owners of requests handed to the engine (`MPI_Request_free`) that
                    // completed: dropped below, without the lock (an owner may hold a
                    // communicator, whose drop takes it).
                    if e.has_released() {
                        released = e.take_released();
                    }
                    e.refresh_pulse();
                    seen = Some(pulse.calls());
                    if e.is_excluded() {
                        let rank = e.rank();
                        drop(e);
                        let _ = writeln!(
                            std::io::stderr(),
                            "runthrough: rank {rank} was declared failed by the others (unresponsive); it stops"
                        );
                        std::process::exit(EXCLUDED_EXIT);
                    }
                }
                wakers.drain(..).for_each(Waker::wake);
                drop(std::mem::take(&mut released));
                if let Some(w) = peer_watch.as_mut() {
                    w.poll_exited(&mut exits);
                    if !exits.is_empty() {
                        let mut e = sh.engine.lock();
                        for x in exits.drain(..) {
                            if x.finalized {
                                tracing::debug!(rank = x.rank, "pidfd: peer finalized and exited");
                                e.peer_departed(Rank(x.rank));
                            } else {
                                tracing::debug!(rank = x.rank, "pidfd: peer exited without finalizing");
                                e.fail_peer(Rank(x.rank));
                            }
                        }
                        // Futures pending on the failed peers get their error now.
                        e.take_wakers(&mut wakers);
                        drop(e);
                        wakers.drain(..).for_each(Waker::wake);
                    }
                }
                let Some(watch) = watch else { continue };
                if last_watch.elapsed() < watch {
                    continue;
                }
                last_watch = Instant::now();
                apply_launcher_notices(&sh);
            }
        })
        .map_err(|e| Error::Init(format!("progress thread: {e}")))
}

/// The detector's settings from `RT_FT_PERIOD_MS` / `RT_FT_TIMEOUT_MS` (set by
/// `rtrun --ft-period/--ft-timeout`); `None` when `RT_FT=0` (`rtrun --no-ft`).
///
/// When ranks outnumber cores the default timeout grows with the oversubscription
/// factor (100 ms × ranks/cores): a process that waits its turn for a core is slow, not
/// dead, and must not be excluded for it. Across hosts it is at least
/// [`MULTI_HOST_HB_TIMEOUT`] (2 s). An explicit timeout is taken as given.
fn ft_config(
    conf: &Config,
    cores: usize,
    local_ranks: usize,
    multi_host: bool,
) -> Result<Option<runthrough_ft::Config>, Error> {
    if conf.off("RT_FT") {
        return Ok(None);
    }
    let factor = local_ranks.div_ceil(cores).max(1) as u64;
    let period = conf.num("RT_FT_PERIOD_MS", DEFAULT_HB_PERIOD.as_millis() as u64)?;
    let mut default = DEFAULT_HB_TIMEOUT.as_millis() as u64 * factor;
    if multi_host {
        default = default.max(MULTI_HOST_HB_TIMEOUT.as_millis() as u64);
    }
    let timeout = conf.num("RT_FT_TIMEOUT_MS", default)?;
    runthrough_ft::Config::new(Duration::from_millis(period), Duration::from_millis(timeout))
        .map(Some)
        .map_err(|e| Error::Init(format!("failure detector settings: {e}")))
}

fn engine_config(conf: &Config, cores: usize, job: Option<&JobInfo>) -> Result<EngineConfig, Error> {
    let mut cfg = EngineConfig::default();
    let local = job.map_or(1, |j| j.local_size as usize);
    if job.is_some_and(|j| j.local_size == j.size) {
        // The shorter limit only where the rendezvous protocol is chosen: on shared
        // memory (`RT_TRANSPORT=fabric` on one node keeps 64 KiB eager).
        let fabric = matches!(crate::boot::TransportMode::from_conf(conf), Ok(crate::boot::TransportMode::Fabric));
        cfg.eager_limit = if local > cores || fabric { SHM_EAGER_LIMIT } else { SHM_CHOOSING_EAGER_LIMIT };
    }
    cfg.eager_limit = conf.num("RT_EAGER_LIMIT", cfg.eager_limit as u64)? as usize;
    if local > cores {
        cfg.spin_polls = OVERSUBSCRIBED_SPIN_POLLS;
        cfg.oversubscribed = true;
    } else {
        // Every rank has a core: streaming through the rings pipelines the two copies
        // over two cores, CMA makes one. Which completes long messages sooner differs
        // between hosts of one kind: one streamed 1 MiB osu_bw at 23.5-25.0 GB/s
        // against CMA's 10.9-11.4 (and 4 MiB osu_bibw 21.2-21.5 against 13.5-16.0),
        // another pulled 1 MiB osu_bibw at 17.1-17.6 against streaming's 8.9-11.4
        // (bench/history/NOTEBOOK.md §0.10, §0.11). So the engine times both on the first long
        // messages and keeps the faster. When ranks outnumber cores the peer is often
        // not running to copy its half, and CMA's pull wins (4 ranks on 2 cores, 1 MiB
        // allgather 365 against 444-468 us).
        cfg.cma_choose = true;
        // From just past the eager limit, not from 512 KiB: on some hosts one copy wins
        // from there too (an Intel host, bench/history/NOTEBOOK.md §0.15: 256 KiB `osu_bibw`
        // 12.5-13.2 GB/s streamed, 26.2-27.3 pulled), on others the two pipelined
        // copies do; the choice is per size class.
        cfg.cma_min = cfg.eager_limit.saturating_add(1).min(cfg.cma_min);
    }
    if conf.get("RT_CMA_MIN").is_some() {
        cfg.rma_min = conf.num("RT_CMA_MIN", 0)? as usize;
        cfg.cma_min = cfg.rma_min;
        cfg.cma_choose = false;
    }
    cfg.spin_polls = conf.num("RT_SPIN_POLLS", cfg.spin_polls.into())? as u32;
    Ok(cfg)
}

/// The cores this node's ranks share: `RT_NODE_CORES` when set (nodes that share one
/// machine's cores, e.g. containers on one host: `cluster.sh` sets their share), else
/// what the process may run on. It sets the oversubscription scaling of the detector
/// timeout and whether waits back off early.
fn node_cores(conf: &Config) -> usize {
    conf.get("RT_NODE_CORES")
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Environment variable for testing R31: `RANK:MS` makes rank `RANK` wait `MS` ms after
/// the last start-up fence, before its detector starts (its start-up heartbeat runs on):
/// a rank slower to start than the others, which must not be taken for failed.
const LATE_START_ENV: &str = "RT_TEST_LATE_START";

/// The wait of [`LATE_START_ENV`], if it names this rank.
fn late_start(conf: &Config, rank: u32) -> Result<(), Error> {
    let Some(v) = conf.get(LATE_START_ENV) else { return Ok(()) };
    let bad = || Error::Init(format!("{LATE_START_ENV}={v:?}: expected RANK:MS"));
    let (r, ms) = v.trim().split_once(':').ok_or_else(bad)?;
    let (r, ms): (u32, u64) = (r.parse().map_err(|_| bad())?, ms.parse().map_err(|_| bad())?);
    if r == rank {
        std::thread::sleep(Duration::from_millis(ms));
    }
    Ok(())
}

impl Runtime {
    /// The world communicator (all ranks; `ErrorsAreFatal` by default).
    pub fn world(&self) -> Comm {
        self.world.clone()
    }

    /// The communicator of this process alone (MPI_COMM_SELF; `ErrorsAreFatal` by
    /// default, every call returns the same communicator). Made locally at `init`, on a
    /// context every process reserves, so it exists whatever failed around this process.
    pub fn comm_self(&self) -> Comm {
        self.solo.clone()
    }

    /// A one-line description of how this process communicates: transport, NUMA
    /// topology and ring placement, core binding.
    pub fn describe(&self) -> &str {
        &self.about
    }

    /// Chooses which processes `ErrorsAreFatal` aborts.
    pub fn set_fatal_scope(&self, scope: FatalScope) {
        self.shared.job_fatal.store(scope == FatalScope::Job, Ordering::Relaxed);
    }

    /// Finishes: tells the launcher finalize began, flushes queued sends and tells the
    /// launcher this rank finalized.
    /// Completes normally even when peers have failed (R6).
    pub fn finalize(mut self) -> Result<(), Error> {
        self.finalize_inner()
    }

    fn finalize_inner(&mut self) -> Result<(), Error> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        // The worlds joined by spawning first: each finalizes on its own.
        for w in std::mem::take(&mut *self.worlds.lock()) {
            if let Err(e) = w.finalize() {
                tracing::warn!(error = %e, "finalize of a spawned world failed");
            }
        }
        // Unwinding from a panic is no clean finalize: this rank fails (R10, R28). Its
        // queued notices (a corrupted communicator's) still go out below, but it says no
        // `Bye`, marks no departure and does not tell the launcher it finalized.
        let panicking = std::thread::panicking();
        if panicking {
            tracing::debug!("runtime dropped while panicking: flushing, then failing");
        } else if let Some(Err(e)) = self.shared.bootstrap.lock().as_mut().map(Bootstrap::finalizing) {
            tracing::warn!(error = %e, "could not tell the launcher that finalize began");
        }
        let deadline = Instant::now() + FINALIZE_FLUSH;
        let mut waiter = self.shared.waiter();
        let mut idle_polls = 0;
        loop {
            let mut e = self.shared.engine.lock();
            e.progress();
            // Once nothing is queued or in flight, a few more polls let a provider push
            // out what it buffered (e.g. injected sends) before the process exits.
            idle_polls = if e.has_queued() { 0 } else { idle_polls + 1 };
            if idle_polls > FINALIZE_IDLE_POLLS {
                break;
            }
            if Instant::now() > deadline {
                tracing::warn!("finalize: queued sends not accepted in time; dropping them");
                break;
            }
            drop(e);
            waiter.snooze();
        }
        // Departure handshake (engine::note): every live peer reads this rank's `Bye`
        // behind its last message before the process exits, so none takes the exit for
        // a failure. Bounded: a peer that dies or hangs stops being waited for once any
        // evidence names it, and the whole of finalize never exceeds FINALIZE_FLUSH.
        if !panicking {
            self.shared.engine.lock().begin_departure();
            loop {
                let mut e = self.shared.engine.lock();
                e.progress();
                if e.departure_pending() == 0 {
                    break;
                }
                if Instant::now() > deadline {
                    tracing::warn!(
                        peers = e.departure_pending(),
                        "finalize: peers did not answer the departure in time"
                    );
                    break;
                }
                drop(e);
                waiter.snooze();
            }
        }
        self.shared.stop.store(true, Ordering::Release);
        if let Some(w) = self.watchdog.take() {
            w.thread().unpark();
            let _ = w.join();
        }
        if panicking {
            return Ok(());
        }
        if let Some(d) = &self.shared.departures {
            // Before exiting: peers watching this process's pidfd then see a departure.
            if let Err(e) = d.mark(self.shared.rank) {
                tracing::warn!(error = %e, "could not mark this rank finalized in the segment");
            }
        }
        if let Some(c) = self.shared.bootstrap.lock().as_mut() {
            c.finalized()?;
        }
        Ok(())
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Err(e) = self.finalize_inner() {
            tracing::warn!(error = %e, "finalize on drop failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{default_ring_bytes, DEFAULT_RING_BYTES};

    #[test]
    fn rings_grow_only_where_every_rank_has_a_core_within_the_budget() {
        const K: u32 = 1024;
        // Oversubscribed, or a singleton: the cache-sized default.
        assert_eq!(default_ring_bytes(4, 2), DEFAULT_RING_BYTES);
        assert_eq!(default_ring_bytes(8, 2), DEFAULT_RING_BYTES);
        assert_eq!(default_ring_bytes(1, 2), DEFAULT_RING_BYTES);
        // A core each: 4 MiB of inbound rings per rank, a power of two per ring.
        assert_eq!(default_ring_bytes(2, 2), 4096 * K);
        assert_eq!(default_ring_bytes(3, 64), 2048 * K);
        assert_eq!(default_ring_bytes(4, 64), 1024 * K);
        assert_eq!(default_ring_bytes(9, 64), 512 * K);
        assert_eq!(default_ring_bytes(17, 64), 256 * K);
        assert_eq!(default_ring_bytes(64, 64), DEFAULT_RING_BYTES);
    }
}
