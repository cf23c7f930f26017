//! The key-value bootstrap service `rtrun` runs for its ranks (T3).
//!
//! Parts: an acceptor thread on `127.0.0.1:0` (loopback; or, for multi-host runs, the
//! private address `rtrun --kv-addr` names, see [`Server::start_on`]), one thread per accepted
//! connection, and a shared `State` under one mutex with one condition variable that
//! waiting `Get` / `Fence` requests sleep on. Protocol: [`crate::wire`].
//!
//! - Authentication: the first frame must be `Hello` with the job secret (compared in
//!   constant time), read with a [`HANDSHAKE_TIMEOUT`] and at most
//!   [`crate::wire::MAX_HELLO_FRAME_BYTES`]; anything else is logged with
//!   `tracing::warn!` and the connection is closed without a reply.
//! - Fences are generation-counted per rank: a rank entering its n-th fence sets its
//!   counter to n and waits until every counter is >= n. If a rank the launcher saw exit
//!   ([`Server::record_exit`]) has a counter < n, the fence fails with `PeerExited`
//!   immediately; on timeout or failure the waiting rank leaves the fence again.
//! - Abort requests are queued for the launcher ([`Server::take_abort_requests`]).
//! - Each rank's [`Phase`] (for `rtrun`'s end-of-job report): `Init` once its `Hello` is
//!   accepted, then `Running`, `Finalizing`, `Finalized` as it reports them
//!   ([`Server::phase`]); a phase never goes back.
//!
//! Fault-tolerant start-up (R31): the launcher is the authority on who is in the job
//! while it starts. A rank is *out* once the launcher saw it exit
//! ([`Server::record_exit`]) or excluded it ([`Server::exclude`]: it was taken for hung,
//! and the launcher kills it). `Join` fences are generation-counted like `Fence`, but
//! complete once every rank has joined the generation *or is out*; the first request to
//! see a generation complete freezes the list of ranks out at that moment, and every
//! rank of that generation gets that same list (`Out`), so every survivor leaves a fence
//! with the same view of who is out. An excluded rank gets `Excluded` to every request
//! from then on (and `Exited` lists it), so even a rank that survives the kill (behind
//! a launch agent) stops instead of rejoining. Liveness during start-up: every request
//! of a rank (its `Alive` heartbeats among them) stamps it as seen;
//! [`Server::silent_ranks`] lists the ranks in the fault-tolerant start-up (they sent
//! `Alive` or `Join`; plain-protocol clients never are), not yet `Started`, silent for
//! longer than a timeout, and [`Server::unwatched_awaited`] the ranks others wait for
//! that are not in it yet: the launcher decides from these ([`crate::job`]).
//!
//! Garbage never panics the server: malformed frames close that one connection, frames
//! are bounded ([`crate::wire::MAX_FRAME_BYTES`]), the number of connections is bounded,
//! and a poisoned mutex is recovered.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::outcome::RankStatus;
use crate::report::Phase;
use crate::sys;
use crate::wire::{self, Request, Response, MAX_FRAME_BYTES, MAX_HELLO_FRAME_BYTES};

/// How long a new connection may take to send its `Hello`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Minimum bound on simultaneous connections (the bound is `max(this, 4 × size)`).
pub const MIN_MAX_CONNECTIONS: usize = 64;

/// An abort request from a rank (R3), queued for the launcher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbortRequest {
    /// The rank that asked.
    pub from: u32,
    /// The ranks to SIGKILL.
    pub ranks: Vec<u32>,
    /// The abort code to record.
    pub code: i32,
}

/// A request for the launcher itself (spawn, ports: R40), queued for it; it answers
/// with [`Server::answer_spawn`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// Its number, for the answer.
    pub id: u64,
    /// The rank that asked ([`PORT_CLIENT`] for a port client).
    pub from: u32,
    /// What it asks: `Spawn`, `OpenPort`, `ClosePort`, `Accept`, `Connect`, `Publish`,
    /// `Lookup` or `Unpublish`.
    pub req: Request,
}

/// The rank a *port client* says in its `Hello`: a process of another job connecting to
/// a port of this one, authenticated by the port's secret instead of the job's; it may
/// only send `Connect`.
pub const PORT_CLIENT: u32 = u32::MAX;

/// Longest a spawn request waits for the launcher's answer.
const SPAWN_WAIT: Duration = Duration::from_secs(120);
/// Longest `MPI_Comm_connect` waits for an `MPI_Comm_accept` on its port (MPI lets it
/// give up: `MPI_ERR_PORT`).
const CONNECT_WAIT: Duration = Duration::from_secs(60);

/// The shared state of the service.
#[derive(Debug)]
struct State {
    kv: HashMap<String, Vec<u8>>,
    fence_gen: Vec<u64>,
    finalized: Vec<bool>,
    phase: Vec<Phase>,
    exited: Vec<(u32, RankStatus)>,
    has_exited: Vec<bool>,
    aborts: Vec<AbortRequest>,
    shutdown: bool,
    /// Start-up membership (R31): exited or excluded.
    out: Vec<bool>,
    /// Excluded by the launcher (taken for hung), or on a confirmed suspicion (R32).
    excluded: Vec<bool>,
    /// `Join` generation each rank has entered.
    join_gen: Vec<u64>,
    /// Per completed `Join` generation: the ranks out when it completed.
    join_done: HashMap<u64, Vec<u32>>,
    /// When each rank was last heard from (`None`: never connected).
    last_seen: Vec<Option<Instant>>,
    /// Ranks whose `init` is done (`Started`).
    started: Vec<bool>,
    /// When each rank said `Started`.
    started_at: Vec<Option<Instant>>,
    /// Ranks in the fault-tolerant start-up (they sent `Alive` or `Join`): watched for
    /// silence. Clients of the plain protocol never are.
    watched: Vec<bool>,
    /// The start-up timeout ([`Server::set_startup_timeout`]): a claim against a rank
    /// still starting and heard from within it, or started within it, is refused.
    /// `None`: never refused.
    startup_timeout: Option<Duration>,
    /// Each rank's process on the launcher's host, when the launcher started it directly
    /// ([`Server::watch_process`]): a claim against it is refused while that process is
    /// alive and not stopped. Cleared when the rank is recorded as exited.
    pids: Vec<Option<u32>>,
    /// Spawn requests the launcher has not taken yet.
    spawns: Vec<SpawnRequest>,
    /// Answers to spawn requests, by id, until their requester takes them.
    spawn_answers: HashMap<u64, Vec<u8>>,
    next_spawn: u64,
    /// The parents' decisions on spawned worlds (`SpawnDone`): (world, ok).
    spawn_done: Vec<(u32, bool)>,
    /// Secrets of the open ports whose clients this service admits ([`PORT_CLIENT`]).
    ports: Vec<Vec<u8>>,
    /// Ranks whose process the launcher cannot watch ([`Server::exit_on_close`]): their
    /// last connection closing during the start-up records them as exited.
    exit_on_close: Vec<bool>,
    /// Open connections of each rank.
    open: Vec<u32>,
}

struct Shared {
    size: u32,
    secret: Vec<u8>,
    state: Mutex<State>,
    changed: Condvar,
    stop: AtomicBool,
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
    live_conns: AtomicUsize,
    max_conns: usize,
}

impl Shared {
    /// [`Server::record_exit`].
    fn record_exit(&self, rank: u32, status: RankStatus) {
        let mut st = self.lock();
        let Some(seen) = st.has_exited.get_mut(rank as usize) else {
            return;
        };
        if !*seen {
            *seen = true;
            st.pids[rank as usize] = None;
            st.exited.push((rank, status));
            st.out[rank as usize] = true;
            self.changed.notify_all();
        }
    }

    /// One more (`true`) or one fewer open connection of `rank`; the last one of a rank
    /// of [`Server::exit_on_close`] closing during its start-up records it as exited.
    fn connection(&self, rank: u32, opened: bool) {
        let r = rank as usize;
        let gone = {
            let mut st = self.lock();
            let Some(open) = st.open.get_mut(r) else { return };
            *open = if opened { open.saturating_add(1) } else { open.saturating_sub(1) };
            !opened && *open == 0 && st.exit_on_close[r] && !st.started[r] && !st.finalized[r]
        };
        if gone {
            tracing::debug!(
                "key-value service: rank {rank} (not watched here) closed its last connection while starting"
            );
            self.record_exit(rank, RankStatus::Exited(1));
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
    fn conns(&self) -> MutexGuard<'_, HashMap<u64, TcpStream>> {
        self.conns.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The running key-value service. Dropping it shuts it down.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl fmt::Debug for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).field("size", &self.shared.size).finish_non_exhaustive()
    }
}

impl Server {
    /// Starts the service for a job of `size` ranks on `127.0.0.1` (ephemeral port),
    /// accepting clients that present `secret`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `size` is 0 or `secret` is empty; [`Error::Io`] if
    /// binding or spawning the acceptor thread fails.
    pub fn start(size: u32, secret: &str) -> Result<Server, Error> {
        Server::start_on(IpAddr::V4(Ipv4Addr::LOCALHOST), size, secret)
    }

    /// Like [`Server::start`], on `ip` (ephemeral port): loopback or a private address
    /// ([`crate::hosts::kv_ip_allowed`]) that ranks on other hosts can reach.
    ///
    /// # Errors
    /// As [`Server::start`]; [`Error::InvalidArgument`] if `ip` is neither loopback nor
    /// private.
    pub fn start_on(ip: IpAddr, size: u32, secret: &str) -> Result<Server, Error> {
        if !crate::hosts::kv_ip_allowed(ip) {
            return Err(Error::InvalidArgument { reason: "the service listens on loopback or a private address only" });
        }
        if size == 0 {
            return Err(Error::InvalidArgument { reason: "job size must be at least 1" });
        }
        if secret.is_empty() {
            return Err(Error::InvalidArgument { reason: "secret must not be empty" });
        }
        let listener = TcpListener::bind((ip, 0)).map_err(|e| Error::Io { op: "bind", source: e })?;
        let addr = listener.local_addr().map_err(|e| Error::Io { op: "bind", source: e })?;
        let n = size as usize;
        let shared = Arc::new(Shared {
            size,
            secret: secret.as_bytes().to_vec(),
            state: Mutex::new(State {
                kv: HashMap::new(),
                fence_gen: vec![0; n],
                finalized: vec![false; n],
                phase: vec![Phase::BeforeInit; n],
                exited: Vec::new(),
                has_exited: vec![false; n],
                aborts: Vec::new(),
                shutdown: false,
                out: vec![false; n],
                excluded: vec![false; n],
                join_gen: vec![0; n],
                join_done: HashMap::new(),
                last_seen: vec![None; n],
                started: vec![false; n],
                started_at: vec![None; n],
                watched: vec![false; n],
                startup_timeout: None,
                pids: vec![None; n],
                spawns: Vec::new(),
                spawn_answers: HashMap::new(),
                next_spawn: 0,
                spawn_done: Vec::new(),
                ports: Vec::new(),
                exit_on_close: vec![false; n],
                open: vec![0; n],
            }),
            changed: Condvar::new(),
            stop: AtomicBool::new(false),
            conns: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(0),
            live_conns: AtomicUsize::new(0),
            max_conns: MIN_MAX_CONNECTIONS.max(n.saturating_mul(4)),
        });
        let sh = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("rt-kv-accept".into())
            .spawn(move || accept_loop(&sh, &listener))
            .map_err(|e| Error::Io { op: "spawn", source: e })?;
        Ok(Server { addr, shared, acceptor: Some(acceptor) })
    }

    /// Takes the spawn requests queued since the last call.
    pub fn take_spawn_requests(&self) -> Vec<SpawnRequest> {
        std::mem::take(&mut self.shared.lock().spawns)
    }

    /// Answers spawn request `id` with an encoded [`crate::spawn::SpawnReply`].
    pub fn answer_spawn(&self, id: u64, reply: Vec<u8>) {
        self.shared.lock().spawn_answers.insert(id, reply);
        self.shared.changed.notify_all();
    }

    /// Admits port clients presenting `secret` (an open port's).
    pub fn open_port(&self, secret: &[u8]) {
        self.shared.lock().ports.push(secret.to_vec());
    }

    /// Stops admitting port clients presenting `secret`.
    pub fn close_port(&self, secret: &[u8]) {
        self.shared.lock().ports.retain(|p| p != secret);
    }

    /// Whether `rank` ever sent a request (a parent that joined a spawned world did).
    pub fn heard_from(&self, rank: u32) -> bool {
        self.shared.lock().last_seen.get(rank as usize).is_some_and(Option::is_some)
    }

    /// Takes the parents' decisions (`SpawnDone`) received since the last call.
    pub fn take_spawn_done(&self) -> Vec<(u32, bool)> {
        std::mem::take(&mut self.shared.lock().spawn_done)
    }

    /// The address clients connect to (`RT_KV_ADDR`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.shared.size
    }

    /// Records that `rank` exited with `status`: pending and later fences that `rank`
    /// did not reach fail with `PeerExited`, and `Exited` requests list it. Recording
    /// the same rank twice, or a rank `>= size`, is ignored.
    pub fn record_exit(&self, rank: u32, status: RankStatus) {
        self.shared.record_exit(rank, status);
    }

    /// `rank` runs in a process this launcher neither started nor can watch (a member of
    /// another job in a joint world, `MPI_Comm_connect`): when its last connection to
    /// this service closes before it finished its start-up (`Started`), it is recorded
    /// as exited (status `Exited(1)`: unknown here). The kernel closes a process's
    /// sockets when it dies; a live process, however busy or starved, keeps them open,
    /// and one that gives up its start-up is out of it anyway. So a member of the other
    /// job that dies while the joint world starts fails the start-up's fences at once,
    /// instead of after their timeout.
    pub fn exit_on_close(&self, rank: u32) {
        if let Some(f) = self.shared.lock().exit_on_close.get_mut(rank as usize) {
            *f = true;
        }
    }

    /// Excludes `rank` from the job (R31: the launcher took it for hung during start-up
    /// and kills it): pending and later `Join` fences complete without it and list it as
    /// out, `Exited` lists it, and every later request of its own gets `Excluded`.
    /// Returns whether it was newly excluded (false for a rank already out, or `>= size`).
    pub fn exclude(&self, rank: u32) -> bool {
        let mut st = self.shared.lock();
        let r = rank as usize;
        if r >= st.out.len() || st.out[r] {
            return false;
        }
        st.out[r] = true;
        st.excluded[r] = true;
        self.shared.changed.notify_all();
        true
    }

    /// Sets the start-up timeout of the job (the launcher's start-up watch, R31). From
    /// then on the witness refuses (`Starting`) a claim against a rank that has not
    /// finished its start-up and was heard from within `timeout`, or that finished it
    /// (`Started`) less than `timeout` ago: such a rank is slow to start — its
    /// successor's detector started watching it first, and its first heartbeats may
    /// still be on their way — not failed. A rank silent for longer while starting is
    /// fair game, as is every rank started for longer.
    pub fn set_startup_timeout(&self, timeout: Duration) {
        self.shared.lock().startup_timeout = Some(timeout);
    }

    /// Tells the witness that `rank` runs as process `pid` on this host, started by the
    /// launcher itself (no launch agent in between). From then on a claim against `rank`
    /// (R32) is refused (`Alive`) while `/proc/PID/stat` shows the process alive and not
    /// stopped: running, runnable or sleeping, it is busy or starved of a core, not
    /// failed, however late its heartbeats. A stopped (`T`) or dead process is confirmed
    /// as before. Ranks behind a launch agent are never registered: the process the
    /// launcher sees is the agent's, and a rank behind a partition may be alive but cut
    /// off (`docs/DETECTOR.md`).
    pub fn watch_process(&self, rank: u32, pid: u32) {
        if let Some(p) = self.shared.lock().pids.get_mut(rank as usize) {
            *p = Some(pid);
        }
    }

    /// The value stored under `key`, if any (the launcher reading what ranks published).
    pub fn value(&self, key: &str) -> Option<Vec<u8>> {
        self.shared.lock().kv.get(key).cloned()
    }

    /// Whether `rank` is out of the job: exited, or excluded.
    pub fn is_out(&self, rank: u32) -> bool {
        self.shared.lock().out.get(rank as usize).copied().unwrap_or(true)
    }

    /// The ranks in the fault-tolerant start-up (they sent `Alive` or `Join`), not out
    /// and whose start-up is not done (`Started`), that nothing was heard from (no
    /// request, no heartbeat) for longer than `timeout`.
    pub fn silent_ranks(&self, timeout: Duration) -> Vec<u32> {
        let st = self.shared.lock();
        let now = Instant::now();
        (0..st.out.len())
            .filter(|&r| st.watched[r] && !st.out[r] && !st.started[r])
            .filter(|&r| st.last_seen[r].is_some_and(|t| now.saturating_duration_since(t) > timeout))
            .map(|r| r as u32)
            .collect()
    }

    /// The ranks not yet in the fault-tolerant start-up (never connected, or connected
    /// but no `Alive` or `Join` yet), not out, that some rank already waits for in a
    /// `Join` fence.
    pub fn unwatched_awaited(&self) -> Vec<u32> {
        let st = self.shared.lock();
        if st.join_gen.iter().all(|&g| g == 0) {
            return Vec::new();
        }
        (0..st.out.len()).filter(|&r| !st.out[r] && !st.watched[r]).map(|r| r as u32).collect()
    }

    /// The ranks recorded as exited, in order, with their status.
    pub fn exited(&self) -> Vec<(u32, RankStatus)> {
        self.shared.lock().exited.clone()
    }

    /// Whether `rank` reported a clean finalize.
    pub fn is_finalized(&self, rank: u32) -> bool {
        self.shared.lock().finalized.get(rank as usize).copied().unwrap_or(false)
    }

    /// How far `rank` got (see [`Phase`]); `BeforeInit` for a rank `>= size`.
    pub fn phase(&self, rank: u32) -> Phase {
        self.shared.lock().phase.get(rank as usize).copied().unwrap_or_default()
    }

    /// Removes and returns the abort requests received since the last call, oldest first.
    pub fn take_abort_requests(&self) -> Vec<AbortRequest> {
        std::mem::take(&mut self.shared.lock().aborts)
    }

    /// Stops accepting, wakes every waiting request (they get a `Failed` reply) and
    /// closes every connection. Idempotent; also done on drop.
    pub fn shutdown(&mut self) {
        if self.shared.stop.swap(true, Ordering::SeqCst) {
            return;
        }
        {
            let mut st = self.shared.lock();
            st.shutdown = true;
            self.shared.changed.notify_all();
        }
        // Wake the acceptor out of accept(2).
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.acceptor.take() {
            let _ = h.join();
        }
        for (_, s) in self.shared.conns().drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn accept_loop(shared: &Arc<Shared>, listener: &TcpListener) {
    for conn in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!("key-value service: accept failed: {e}");
                // Avoid a hot loop on e.g. EMFILE.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let peer = stream.peer_addr().ok();
        if shared.live_conns.load(Ordering::SeqCst) >= shared.max_conns {
            tracing::warn!("key-value service: too many connections, closing one from {peer:?}");
            continue;
        }
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        match stream.try_clone() {
            Ok(clone) => {
                shared.conns().insert(id, clone);
            }
            Err(e) => {
                tracing::warn!("key-value service: cannot track connection: {e}");
                continue;
            }
        }
        shared.live_conns.fetch_add(1, Ordering::SeqCst);
        let sh = Arc::clone(shared);
        let spawned = thread::Builder::new().name("rt-kv-conn".into()).spawn(move || {
            serve_conn(&sh, stream, peer);
            sh.conns().remove(&id);
            sh.live_conns.fetch_sub(1, Ordering::SeqCst);
        });
        if let Err(e) = spawned {
            tracing::warn!("key-value service: cannot spawn connection thread: {e}");
            shared.conns().remove(&id);
            shared.live_conns.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Compares two byte strings in time independent of where they differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

fn authenticate(shared: &Shared, stream: &mut TcpStream) -> Result<u32, &'static str> {
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT)).map_err(|_| "socket error")?;
    let body = match wire::read_frame(stream, MAX_HELLO_FRAME_BYTES) {
        Ok(Some(b)) => b,
        Ok(None) => return Err("closed before hello"),
        Err(Error::Timeout) => return Err("no hello within the handshake timeout"),
        Err(Error::FrameTooLarge { .. }) => return Err("oversized first frame"),
        Err(_) => return Err("error reading hello"),
    };
    match Request::decode(&body) {
        Ok(Request::Hello { version, rank: PORT_CLIENT, secret }) if version == wire::PROTOCOL_VERSION => {
            let st = shared.lock();
            match st.ports.iter().any(|p| constant_time_eq(&secret, p)) {
                true => Ok(PORT_CLIENT),
                false => Err("no open port has that secret"),
            }
        }
        Ok(Request::Hello { version, rank, secret }) => {
            if !constant_time_eq(&secret, &shared.secret) {
                Err("wrong secret")
            } else if version != wire::PROTOCOL_VERSION {
                Err("unsupported protocol version")
            } else if rank >= shared.size {
                Err("rank out of range")
            } else {
                Ok(rank)
            }
        }
        Ok(_) => Err("first frame is not a hello"),
        Err(_) => Err("malformed first frame"),
    }
}

fn serve_conn(shared: &Shared, mut stream: TcpStream, peer: Option<SocketAddr>) {
    let rank = match authenticate(shared, &mut stream) {
        Ok(r) => r,
        Err(why) => {
            tracing::warn!("key-value service: refused connection from {peer:?}: {why}");
            let _ = stream.shutdown(Shutdown::Both);
            return;
        }
    };
    let _ = stream.set_nodelay(true);
    if rank == PORT_CLIENT {
        return serve_requests(shared, stream, rank);
    }
    advance(shared, rank, Phase::Init);
    shared.lock().last_seen[rank as usize] = Some(Instant::now());
    shared.connection(rank, true);
    serve_requests(shared, stream, rank);
    shared.connection(rank, false);
}

/// Answers the requests of an authenticated connection until it closes.
fn serve_requests(shared: &Shared, mut stream: TcpStream, rank: u32) {
    let mut out = Vec::new();
    if reply(&mut stream, &mut out, &Response::Ok).is_err() {
        return;
    }
    if stream.set_read_timeout(None).is_err() {
        return;
    }
    loop {
        let body = match wire::read_frame(&mut stream, MAX_FRAME_BYTES) {
            Ok(Some(b)) => b,
            Ok(None) => return,
            Err(e) => {
                if !matches!(e, Error::Disconnected) && !shared.stop.load(Ordering::SeqCst) {
                    tracing::warn!("key-value service: rank {rank}: {e}; closing");
                }
                return;
            }
        };
        let req = match Request::decode(&body) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!("key-value service: rank {rank}: {e}; closing");
                return;
            }
        };
        let resp = handle(shared, rank, req);
        if reply(&mut stream, &mut out, &resp).is_err() {
            return;
        }
    }
}

fn reply(stream: &mut TcpStream, out: &mut Vec<u8>, resp: &Response) -> Result<(), Error> {
    out.clear();
    resp.encode(out)?;
    wire::write_frames(stream, out)
}

fn deadline(timeout_ms: u64) -> Option<Instant> {
    Instant::now().checked_add(Duration::from_millis(timeout_ms))
}

/// Waits on the condition variable until `deadline` (forever if `None`).
/// Returns `false`, without waiting, if the deadline has already passed; callers check
/// their condition before calling, so `false` means "timed out".
fn wait<'a>(shared: &'a Shared, st: MutexGuard<'a, State>, deadline: Option<Instant>) -> (MutexGuard<'a, State>, bool) {
    match deadline {
        None => (shared.changed.wait(st).unwrap_or_else(PoisonError::into_inner), true),
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return (st, false);
            }
            let (st, _) = shared.changed.wait_timeout(st, d - now).unwrap_or_else(PoisonError::into_inner);
            (st, true)
        }
    }
}

fn shutting_down() -> Response {
    Response::Failed { reason: "the key-value service is shutting down".into() }
}

fn handle(shared: &Shared, rank: u32, req: Request) -> Response {
    if rank == PORT_CLIENT {
        return match req {
            Request::Connect { .. } => ask(shared, rank, req, Some(CONNECT_WAIT)),
            _ => Response::Failed { reason: "a port client may only connect".into() },
        };
    }
    let me = rank as usize;
    {
        let mut st = shared.lock();
        st.last_seen[me] = Some(Instant::now());
        if matches!(req, Request::Alive | Request::Join { .. }) {
            st.watched[me] = true;
        }
        // An excluded rank is told so whatever it asks (it stops, never rejoins), except
        // for the queries a rank that found out itself may still make on its way out.
        if st.excluded[me] && !matches!(req, Request::Exited | Request::Departed | Request::Abort { .. }) {
            return Response::Excluded;
        }
    }
    match req {
        Request::Hello { .. } => Response::Failed { reason: "already authenticated".into() },
        Request::Confirm { suspect } => confirm(shared, me, suspect),
        Request::Put { key, value } => {
            let mut st = shared.lock();
            st.kv.insert(key, value);
            shared.changed.notify_all();
            Response::Ok
        }
        Request::Get { key, timeout_ms } => {
            let dl = deadline(timeout_ms);
            let mut st = shared.lock();
            loop {
                if let Some(v) = st.kv.get(&key) {
                    return Response::Value(v.clone());
                }
                if st.shutdown {
                    return shutting_down();
                }
                let (g, more) = wait(shared, st, dl);
                st = g;
                if !more {
                    return Response::Timeout;
                }
            }
        }
        Request::Fence { timeout_ms } => {
            let dl = deadline(timeout_ms);
            let mut st = shared.lock();
            let gen = st.fence_gen[me] + 1;
            st.fence_gen[me] = gen;
            shared.changed.notify_all();
            loop {
                if st.fence_gen.iter().all(|&g| g >= gen) {
                    return Response::Ok;
                }
                let dead = st.fence_gen.iter().zip(&st.has_exited).position(|(&g, &exited)| exited && g < gen);
                let give_up = if let Some(p) = dead {
                    Some(Response::PeerExited { rank: p as u32 })
                } else if st.shutdown {
                    Some(shutting_down())
                } else {
                    None
                };
                if let Some(resp) = give_up {
                    st.fence_gen[me] = gen - 1;
                    shared.changed.notify_all();
                    return resp;
                }
                let (g, more) = wait(shared, st, dl);
                st = g;
                if !more {
                    st.fence_gen[me] = gen - 1;
                    shared.changed.notify_all();
                    return Response::Timeout;
                }
            }
        }
        Request::Finalized => {
            shared.lock().finalized[me] = true;
            advance(shared, rank, Phase::Finalized);
            Response::Ok
        }
        Request::Initialized => {
            advance(shared, rank, Phase::Running);
            Response::Ok
        }
        Request::Finalizing => {
            advance(shared, rank, Phase::Finalizing);
            Response::Ok
        }
        Request::Abort { code, ranks } => {
            if let Some(bad) = ranks.iter().find(|&&r| r >= shared.size) {
                return Response::Failed { reason: format!("abort names rank {bad}, job size is {}", shared.size) };
            }
            let mut st = shared.lock();
            st.aborts.push(AbortRequest { from: rank, ranks, code });
            Response::Ok
        }
        Request::Exited => {
            // Excluded ranks count as exited (they are killed; a survivor of the kill
            // behind a launch agent is out all the same).
            let st = shared.lock();
            let mut v: Vec<u32> = st.exited.iter().map(|e| e.0).collect();
            v.extend((0..st.excluded.len() as u32).filter(|&r| st.excluded[r as usize] && !st.has_exited[r as usize]));
            Response::Exited(v)
        }
        Request::Join { timeout_ms } => join(shared, me, timeout_ms),
        // MPI_Comm_accept waits as long as it takes; connect gives up (MPI_ERR_PORT).
        Request::Accept { .. } => ask(shared, rank, req, None),
        Request::Connect { .. } => ask(shared, rank, req, Some(CONNECT_WAIT)),
        Request::Spawn { .. }
        | Request::OpenPort
        | Request::ClosePort { .. }
        | Request::Publish { .. }
        | Request::Lookup { .. }
        | Request::Unpublish { .. } => ask(shared, rank, req, Some(SPAWN_WAIT)),
        Request::SpawnDone { world, ok } => {
            shared.lock().spawn_done.push((world, ok));
            Response::Ok
        }
        Request::Alive => Response::Ok,
        Request::Started => {
            let mut st = shared.lock();
            st.started[me] = true;
            st.started_at[me] = Some(Instant::now());
            Response::Ok
        }
        Request::Departed => {
            let st = shared.lock();
            Response::Exited(
                st.exited
                    .iter()
                    .map(|e| e.0)
                    .filter(|r| st.finalized.get(*r as usize).copied().unwrap_or(false))
                    .collect(),
            )
        }
    }
}

/// Queues a request for the launcher and waits for its answer (at most `wait`; a
/// launcher that never answers is a failure of the request).
fn ask(shared: &Shared, rank: u32, req: Request, limit: Option<Duration>) -> Response {
    let dl = limit.map(|w| Instant::now() + w);
    let mut st = shared.lock();
    let id = st.next_spawn;
    st.next_spawn += 1;
    st.spawns.push(SpawnRequest { id, from: rank, req });
    loop {
        if let Some(v) = st.spawn_answers.remove(&id) {
            return Response::Value(v);
        }
        if st.shutdown {
            return shutting_down();
        }
        let (g, more) = wait(shared, st, dl);
        st = g;
        if !more {
            st.spawns.retain(|r| r.id != id);
            return Response::Failed { reason: "the launcher did not answer in time".into() };
        }
    }
}

/// Moves `rank`'s phase forward to `to` (never back).
/// The witness's decision (R32): under one lock, so two ranks that suspect each other are
/// decided in order — the first claim excludes the other rank, whose own claim then gets
/// `Excluded` (it was checked on entry too, but without the lock held throughout).
fn confirm(shared: &Shared, me: usize, suspect: u32) -> Response {
    let mut st = shared.lock();
    if st.excluded[me] {
        return Response::Excluded;
    }
    let s = suspect as usize;
    if s == me || s >= st.out.len() {
        return Response::Failed { reason: format!("rank {suspect} cannot be suspected by rank {me}") };
    }
    if let Some(t) = st.startup_timeout.filter(|_| !st.out[s] && st.watched[s]) {
        let within = |at: Option<Instant>| at.is_some_and(|at| at.elapsed() <= t);
        // Still starting and heard from; or started so recently that its first ring
        // heartbeats may not have reached its observer yet (a fresh connection).
        let starting = if st.started[s] { within(st.started_at[s]) } else { within(st.last_seen[s]) };
        if starting {
            return Response::Starting;
        }
    }
    // Busy is not dead: a process of this host that is alive and not stopped is slow
    // (starved of a core, or computing with its progress thread starved), not failed.
    if !st.out[s] && st.pids[s].is_some_and(|pid| sys::proc_state(pid) == sys::ProcState::Alive) {
        return Response::Alive;
    }
    if !st.out[s] {
        st.out[s] = true;
        st.excluded[s] = true;
        shared.changed.notify_all();
    }
    Response::Ok
}

fn advance(shared: &Shared, rank: u32, to: Phase) {
    if let Some(p) = shared.lock().phase.get_mut(rank as usize) {
        *p = (*p).max(to);
    }
}

/// A fault-tolerant start-up fence (R31; see the module doc).
fn join(shared: &Shared, me: usize, timeout_ms: u64) -> Response {
    let dl = deadline(timeout_ms);
    let mut st = shared.lock();
    let gen = st.join_gen[me] + 1;
    st.join_gen[me] = gen;
    shared.changed.notify_all();
    loop {
        if st.excluded[me] {
            return Response::Excluded;
        }
        if let Some(out) = st.join_done.get(&gen) {
            return Response::Out(out.clone());
        }
        if st.join_gen.iter().zip(&st.out).all(|(&g, &out)| g >= gen || out) {
            let out: Vec<u32> = (0..st.out.len() as u32).filter(|&r| st.out[r as usize]).collect();
            st.join_done.insert(gen, out.clone());
            shared.changed.notify_all();
            return Response::Out(out);
        }
        if st.shutdown {
            return shutting_down();
        }
        let (g, more) = wait(shared, st, dl);
        st = g;
        if !more {
            return Response::Timeout;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_time_eq_works() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(constant_time_eq(b"", b""));
    }
}
