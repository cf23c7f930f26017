//! Running one job: spawn, supervise, inject faults, clean up (docs/ARCHITECTURE.md §6).
//!
//! [`run`] starts the key-value [`Server`], spawns `N` ranks with the `RT_*` environment
//! ([`crate::env`]), forwards their output line by line, and supervises them in a
//! polling loop ([`POLL_INTERVAL`]) that handles, in order: SIGINT/SIGTERM (kill all,
//! exit 130), `--timeout` (kill all, exit 124), `--kill` fault injection, abort requests
//! (kill the listed ranks only, R3), and reaping. A rank that dies is reported to the
//! server (so fences fail fast and `Client::exited` lists it) but the other ranks keep
//! running. At the end the job's shared-memory name is unlinked, the exit code is
//! computed by [`crate::outcome::job_exit_code`] (R7), and every rank gets a
//! [`RankReport`] (its host, how far it got — [`crate::server::Server::phase`] — and what
//! the launcher did to it: `--kill`/`--stop`, `--timeout`, an interrupt, an abort).
//!
//! Start-up membership (R31): while ranks start, the launcher decides who is in the job.
//! A rank that exits is out at once; a rank taken for hung is *excluded* — marked out in
//! the server (so the fault-tolerant start-up fences complete without it and every
//! survivor is told it is out, [`crate::server`]) and then SIGKILLed, so it can never
//! rejoin. Taken for hung: a rank in the start-up watch (it sent a heartbeat or joined a
//! fence) whose start-up is not done and that sent nothing for the start-up timeout while
//! its process is stopped (`T` in `/proc/PID/stat`), or — behind a launch agent, whose
//! process tells nothing of the rank behind it — for [`SILENT_FACTOR`] timeouts whatever
//! its state (a process of this host that is alive, however starved of a core, is slow,
//! not hung, and never excluded for silence); or
//! a rank not yet in the watch while others wait for it in a fence, whose process has
//! been stopped for the start-up timeout, or that is not in
//! the watch [`CONNECT_TIMEOUT`] after launch. (Clients of the plain key-value protocol,
//! which never heartbeat nor join, are never excluded.) The start-up timeout is the ring detector's: `--ft-timeout`, else
//! `RT_FT_TIMEOUT_MS`, else 100 ms times the oversubscription factor of the busiest host
//! (ranks there / cores here, rounded up), as the ranks compute it.
//!
//! Ranks are spawned from the calling thread, which must outlive the job (call [`run`]
//! from `main`): `PR_SET_PDEATHSIG` fires when the spawning thread exits.
//!
//! Multi-host runs (`--host`, see [`crate::hosts`]): ranks are placed by `--map-by`; each
//! gets `RT_NODE` = its host name, `RT_LOCAL_RANK`/`RT_LOCAL_SIZE` of that host,
//! `RT_FABRIC_ADDR` when the host was given as `NAME=IP`, and a per-host shared-memory
//! name `/rt-<jobid>-h<host index>` (hosts made with network namespaces share `/dev/shm`),
//! all unlinked at the end. The key-value service listens on `--kv-addr`. With
//! `--launch-agent`, a rank is started as `AGENT-WORDS env VAR=VALUE... PROGRAM ARGS`:
//! the `env` prefix carries every variable `rtrun` sets but the secret (`RT_KV_SECRET=stdin`:
//! the secret is the first line `rtrun` writes to the rank's standard input, so no other
//! user reads it in `/proc/PID/cmdline`; rank 0's own input follows), plus the `RT_*` and `FI_*`
//! variables of `rtrun`'s own environment whose values are shell-safe, through agents that
//! do not pass the environment on (`ssh`); the agent's process is the one supervised,
//! signalled by `--kill`/`--stop` and reaped. Without an agent, `--host` names are
//! simulated hosts on this machine (their ranks' endpoints default to 127.0.0.1).

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rand::RngCore;

use crate::cli::{Fault, Options, OutputMode};
use crate::env::{JobEnv, RT_FABRIC_ADDR};
use crate::error::Error;
use crate::hosts::{self, Placement};
use crate::outcome::{job_exit_code, AbortMark, RankOutcome, RankStatus};
use crate::report::{Cause, RankReport};
use crate::server::Server;
use crate::sys;

mod worlds;

/// How often the supervision loop wakes up.
pub const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// Exit code after `--timeout`.
pub const EXIT_TIMEOUT: i32 = 124;
/// Exit code after SIGINT / SIGTERM.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Lines longer than this are forwarded in pieces of this size.
pub const MAX_LINE_BYTES: usize = 1 << 20;
/// Longest a rank others wait for in a start-up fence may take to start heartbeating
/// before the launcher excludes it (R31). The ranks wait for start-up fences longer than this.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A rank silent during start-up whose process is not stopped is excluded only after this
/// many start-up timeouts (R31).
pub const SILENT_FACTOR: u32 = 10;
/// The ring detector's default timeout (`runthrough_ft::DEFAULT_HB_TIMEOUT`), scaled by
/// oversubscription for the launcher's start-up watch.
const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_millis(100);
/// How long to wait for output forwarders after all ranks ended (a rank's own children
/// may keep its pipes open).
pub const OUTPUT_DRAIN_TIMEOUT: Duration = Duration::from_secs(2);

/// Why the job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobEnd {
    /// Every rank ended on its own (or by `--kill` / abort).
    Completed,
    /// `--timeout` expired; all ranks were killed.
    TimedOut(Duration),
    /// SIGINT or SIGTERM arrived; all ranks were killed.
    Interrupted,
}

/// The result of a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobReport {
    /// What `rtrun` should exit with.
    pub exit_code: i32,
    /// Why the job ended.
    pub end: JobEnd,
    /// One outcome per rank, by rank.
    pub outcomes: Vec<RankOutcome>,
    /// One report per rank, by rank: what `rtrun` says about how each ended.
    pub reports: Vec<RankReport>,
    /// The job id (`RT_JOBID`).
    pub jobid: String,
}

/// Failures of the launcher itself (not of ranks).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The key-value service could not start.
    #[error("cannot start the key-value service: {0}")]
    Server(#[from] Error),
    /// The signal handlers could not be installed.
    #[error("cannot install signal handlers: {0}")]
    Signals(#[source] io::Error),
    /// `--output-filename`'s files could not be created (nothing was started).
    #[error("--output-filename {dir:?}: {source}")]
    OutputFiles {
        /// The directory.
        dir: std::path::PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A rank could not be started; ranks already started were killed.
    #[error("cannot start rank {rank} ({program:?}): {source}")]
    Spawn {
        /// The rank.
        rank: u32,
        /// The program.
        program: OsString,
        /// The error.
        #[source]
        source: io::Error,
    },
}

impl LaunchError {
    /// The conventional exit code: 127 program not found, 126 not executable, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            LaunchError::Spawn { source, .. } => match source.kind() {
                io::ErrorKind::NotFound => 127,
                io::ErrorKind::PermissionDenied => 126,
                _ => 1,
            },
            _ => 1,
        }
    }
}

fn random_hex(bytes: usize) -> String {
    let mut b = vec![0u8; bytes];
    rand::thread_rng().fill_bytes(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// This host's name (`RT_NODE`): the kernel hostname, else `$HOSTNAME`, else `localhost`.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "localhost".to_owned())
}

struct Rank {
    child: Option<Child>,
    outcome: Option<RankOutcome>,
    abort: Option<AbortMark>,
    /// SIGSTOPped by `--stop` and not continued since.
    stopped: bool,
    /// What the launcher did to it while it ran (the first such action).
    cause: Cause,
    /// Since when its process is seen stopped while not yet in the start-up watch (R31).
    stalled_since: Option<Instant>,
    /// The launch agent's words for its host, when it runs through one.
    agent: Option<Vec<String>>,
    /// Its process id inside its host (what it published at start-up), when it runs
    /// through an agent: a `docker exec` client does not pass signals on, so signals go
    /// through the agent to this pid too.
    host_pid: Option<u32>,
    /// SIGTERMed by an abort or an interrupt: SIGKILLed at this instant if still running.
    kill_at: Option<Instant>,
}

impl Rank {
    /// Sends `sig` (a `kill -s` name) to the rank's process inside its host through the
    /// launch agent, in the background; nothing without an agent or before the rank
    /// published its pid.
    fn signal_in_host(&self, sig: &str) {
        let (Some(agent), Some(pid)) = (&self.agent, self.host_pid) else { return };
        let mut c = Command::new(&agent[0]);
        c.args(&agent[1..]).args(["kill", "-s", sig, &pid.to_string()]);
        c.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        match c.spawn() {
            // Reaped by a short-lived thread: the job loop never waits on an agent.
            Ok(mut child) => {
                thread::spawn(move || child.wait());
            }
            Err(e) => tracing::warn!("cannot signal pid {pid} through the launch agent: {e}"),
        }
    }
}

/// The start-up timeout of the module doc: `--ft-timeout`, else `RT_FT_TIMEOUT_MS`, else
/// the detector default scaled by the busiest host's oversubscription.
fn startup_timeout(opts: &Options, placement: &[Placement]) -> Duration {
    if let Some(t) = opts.ft_timeout {
        return t.max(Duration::from_millis(1));
    }
    if let Some(ms) = std::env::var("RT_FT_TIMEOUT_MS").ok().and_then(|v| v.trim().parse::<u64>().ok()) {
        return Duration::from_millis(ms.max(1));
    }
    let cores = thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    let busiest = placement.iter().map(|p| p.local_size).max().unwrap_or(1);
    let scaled = DEFAULT_STARTUP_TIMEOUT * busiest.div_ceil(cores).max(1);
    // Across hosts the ranks' own default is at least 2 s (TCP retransmissions hold
    // heartbeats, runtime::ft_config); the start-up watch is no stricter.
    let hosts = placement.iter().map(|p| p.host).max().map_or(1, |h| h + 1);
    if hosts > 1 {
        scaled.max(MULTI_HOST_STARTUP_TIMEOUT)
    } else {
        scaled
    }
}

/// Least start-up timeout of a job across hosts (the ranks' detector default there).
const MULTI_HOST_STARTUP_TIMEOUT: Duration = Duration::from_millis(2000);

/// The launcher's start-up watch (R31, module doc).
///
/// The launcher must not blame ranks for its own stalls: when its supervision loop was
/// descheduled (a gap of a quarter timeout between two rounds), the heartbeats of that
/// time may still sit unread in its sockets, so nobody is excluded until it has run
/// steadily for a whole timeout again.
struct StartupWatch {
    timeout: Duration,
    launched: Instant,
    last_round: Instant,
    steady_since: Instant,
}

impl StartupWatch {
    fn new(timeout: Duration, launched: Instant) -> StartupWatch {
        StartupWatch { timeout, launched, last_round: launched, steady_since: launched }
    }

    /// One round: excludes the ranks taken for hung (server first, so fences complete
    /// without them, then SIGKILL) — the job's ranks, then the children starting in
    /// spawned worlds (`worlds`: each world's service and the universe rank of each of
    /// its ranks, `u32::MAX` for those not watched here).
    fn round(&mut self, server: &Server, ranks: &mut [Rank], worlds: &[(&Server, Vec<u32>)]) {
        let now = Instant::now();
        if now.saturating_duration_since(self.last_round) > self.timeout / 4 {
            self.steady_since = now;
        }
        self.last_round = now;
        let steady = now.saturating_duration_since(self.steady_since) > self.timeout;
        let own: Vec<u32> = (0..ranks.len() as u32).collect();
        self.exclude_hung(server, &own, ranks, steady, Some(self.launched));
        for (w, members) in worlds {
            // No connect deadline: a child not hung but slow to connect is awaited (its
            // world's fences time out).
            self.exclude_hung(w, members, ranks, steady, None);
        }
    }

    /// [`StartupWatch::round`] for the ranks of `server` (`members`: the universe rank of
    /// each); `connect_since`: ranks not connected by [`CONNECT_TIMEOUT`] after it are
    /// hung too.
    fn exclude_hung(
        &self,
        server: &Server,
        members: &[u32],
        ranks: &mut [Rank],
        steady: bool,
        connect_since: Option<Instant>,
    ) {
        let now = Instant::now();
        let mut hung_ranks = Vec::new();
        if steady {
            // Silent for the timeout and its process stopped: hung. Silent but alive on
            // this host (running, runnable, sleeping): slow, never excluded for it. Behind
            // a launch agent (the process seen is the agent's): after SILENT_FACTOR
            // timeouts.
            let long = server.silent_ranks(self.timeout * SILENT_FACTOR);
            for r in server.silent_ranks(self.timeout) {
                let Some(rk) = members.get(r as usize).and_then(|&u| ranks.get(u as usize)) else { continue };
                let Some(child) = rk.child.as_ref() else { continue };
                let hung = match sys::proc_state(child.id()) {
                    sys::ProcState::Stopped => true,
                    sys::ProcState::Alive if rk.agent.is_none() => false,
                    _ => long.contains(&r),
                };
                if hung {
                    hung_ranks.push(r);
                }
            }
        }
        let awaited = server.unwatched_awaited();
        for (r, &u) in members.iter().enumerate() {
            let Some(rk) = ranks.get_mut(u as usize) else { continue };
            let Some(child) = rk.child.as_ref() else { continue };
            if !awaited.contains(&(r as u32)) {
                rk.stalled_since = None;
                continue;
            }
            if sys::is_stopped(child.id()) {
                let since = *rk.stalled_since.get_or_insert(now);
                if steady && now.saturating_duration_since(since) > self.timeout {
                    hung_ranks.push(r as u32);
                }
            } else {
                rk.stalled_since = None;
                if connect_since.is_some_and(|t| now.saturating_duration_since(t) > CONNECT_TIMEOUT) {
                    hung_ranks.push(r as u32);
                }
            }
        }
        for r in hung_ranks {
            if server.exclude(r) {
                let u = members[r as usize];
                tracing::debug!("rank {u} is unresponsive during start-up: excluded and killed");
                if let Some(rk) = ranks.get_mut(u as usize) {
                    kill_rank(u, rk);
                }
            }
        }
    }
}

fn status_of(status: ExitStatus) -> RankStatus {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => RankStatus::Exited(c),
        (None, Some(s)) => RankStatus::Signaled(s),
        (None, None) => RankStatus::Exited(1),
    }
}

/// Forwards `pipe` to `out` line by line, each line written with one `write_all` under
/// the stream lock (so lines of different ranks never interleave), prefixed with
/// `prefix`, and unprefixed to `copy` when given (`--output-filename`). Keeps draining
/// after write errors so the rank never blocks on a full pipe.
fn forward<R: Read, W: Write>(pipe: R, prefix: &[u8], mut out: impl FnMut() -> W, mut copy: Option<std::fs::File>) {
    let mut reader = BufReader::with_capacity(64 * 1024, pipe);
    let mut line = Vec::with_capacity(256);
    let mut broken = false;
    loop {
        let (done, eof) = match reader.fill_buf() {
            Ok([]) => (false, true),
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    line.extend_from_slice(&buf[..=i]);
                    reader.consume(i + 1);
                    (true, false)
                }
                None => {
                    let n = buf.len();
                    line.extend_from_slice(buf);
                    reader.consume(n);
                    (line.len() >= MAX_LINE_BYTES, false)
                }
            },
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => (false, true),
        };
        if (done || eof) && !line.is_empty() {
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            if !broken {
                let mut msg = Vec::with_capacity(prefix.len() + line.len());
                msg.extend_from_slice(prefix);
                msg.extend_from_slice(&line);
                let mut w = out();
                broken = w.write_all(&msg).and_then(|()| w.flush()).is_err();
            }
            if let Some(f) = copy.as_mut() {
                if let Err(e) = f.write_all(&line) {
                    tracing::warn!("output file: {e}; no more copies");
                    copy = None;
                }
            }
            line.clear();
        }
        if eof {
            return;
        }
    }
}

/// `--output-filename DIR`: rank `rank`'s output files, `DIR/1/rank.R/stdout` and
/// `stderr` (Open MPI's layout; `1` is the job), created now.
fn output_files(dir: &std::path::Path, rank: u32) -> io::Result<(std::fs::File, std::fs::File)> {
    let d = dir.join("1").join(format!("rank.{rank}"));
    std::fs::create_dir_all(&d)?;
    Ok((std::fs::File::create(d.join("stdout"))?, std::fs::File::create(d.join("stderr"))?))
}

fn spawn_forwarders(
    child: &mut Child,
    pty: Option<std::fs::File>,
    rank: u32,
    tag: bool,
    files: Option<(std::fs::File, std::fs::File)>,
    done: &mpsc::Sender<()>,
) -> usize {
    let (out_copy, err_copy) = match files {
        Some((o, e)) => (Some(o), Some(e)),
        None => (None, None),
    };
    let prefix = if tag { format!("[{rank}] ").into_bytes() } else { Vec::new() };
    let mut n = 0;
    // The pseudo-terminal's master, or the pipe; a read error (EIO once the terminal's
    // last writer closed it) ends the forwarding as end-of-file does.
    let stdout: Option<Box<dyn Read + Send>> = match pty {
        Some(m) => Some(Box::new(m)),
        None => child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>),
    };
    if let Some(p) = stdout {
        let (prefix, done) = (prefix.clone(), done.clone());
        let ok = thread::Builder::new()
            .name(format!("rt-out-{rank}"))
            .spawn(move || {
                forward(p, &prefix, || io::stdout().lock(), out_copy);
                let _ = done.send(());
            })
            .is_ok();
        n += usize::from(ok);
    }
    if let Some(p) = child.stderr.take() {
        let done = done.clone();
        let ok = thread::Builder::new()
            .name(format!("rt-err-{rank}"))
            .spawn(move || {
                forward(p, &prefix, || io::stderr().lock(), err_copy);
                let _ = done.send(());
            })
            .is_ok();
        n += usize::from(ok);
    }
    n
}

/// How long a rank that an abort or an interrupt of `rtrun` (SIGINT, SIGTERM) SIGTERMed
/// has to exit (a handler may flush its output, remove its files) before it is
/// SIGKILLed, as `mpirun` does.
pub const TERM_GRACE: Duration = Duration::from_millis(500);

/// Ends a rank: SIGTERM now, SIGKILL once [`TERM_GRACE`] passed (`Rank::kill_at`,
/// checked every round of the job loop).
fn terminate_rank(rank: u32, r: &mut Rank, now: Instant) {
    let Some(child) = r.child.as_ref() else { return };
    if r.kill_at.is_some() {
        return;
    }
    tracing::debug!("terminating rank {rank} (pid {})", child.id());
    r.signal_in_host("TERM");
    // A stopped process acts on SIGTERM only once continued; SIGKILL ends it anyway.
    let _ = sys::terminate(child.id());
    r.kill_at = Some(if r.stopped { now } else { now + TERM_GRACE });
}

fn kill_rank(rank: u32, r: &mut Rank) {
    if r.child.is_some() {
        r.signal_in_host("KILL");
    }
    if let Some(child) = r.child.as_mut() {
        tracing::debug!("killing rank {rank} (pid {})", child.id());
        // SIGKILL; an error means it already exited and is waiting to be reaped.
        let _ = child.kill();
    }
}

/// Where the ranks of a job run: the hosts (this host alone without `--host`), one
/// placement per rank, and one shared-memory name per host.
#[derive(Debug, Clone, PartialEq, Eq)]
struct JobLayout {
    hosts: Vec<hosts::HostSpec>,
    placement: Vec<Placement>,
    shm_names: Vec<String>,
}

impl JobLayout {
    fn new(opts: &Options, jobid: &str) -> JobLayout {
        if opts.hosts.is_empty() {
            return JobLayout {
                hosts: vec![hosts::HostSpec { name: hostname(), addr: None, slots: None }],
                placement: hosts::place(opts.ranks, 1, opts.map_by),
                shm_names: vec![format!("/rt-{jobid}")],
            };
        }
        let mut hosts = opts.hosts.clone();
        if opts.agent.is_none() {
            // Simulated hosts on this machine: fabric endpoints on loopback unless given.
            for h in &mut hosts {
                h.addr.get_or_insert(IpAddr::V4(Ipv4Addr::LOCALHOST));
            }
        }
        let placement = hosts::place_on(opts.ranks, &hosts, opts.map_by);
        let shm_names = (0..hosts.len()).map(|i| format!("/rt-{jobid}-h{i}")).collect();
        JobLayout { hosts, placement, shm_names }
    }

    /// Unlinks every host's segment name (normally the ranks already did; a crash may
    /// leave one behind). Absent names are not an error.
    ///
    /// When a host's segment creator fails during start-up, the next one creates the
    /// segment under `NAME.K` (K = 1, 2, ...: R31): those names are unlinked too.
    fn unlink_segments(&self) {
        for (h, name) in self.shm_names.iter().enumerate() {
            let local = self.placement.iter().filter(|p| p.host == h).count();
            let retries = (1..local).map(|k| format!("{name}.{k}"));
            for name in std::iter::once(name.clone()).chain(retries) {
                if let Err(e) = sys::shm_unlink(&name) {
                    tracing::warn!("shm_unlink({name}) failed: {e}");
                }
            }
        }
    }
}

/// The program as a launch agent is given it: a relative path with a directory in it
/// (`target/release/x`) is made absolute from `rtrun`'s working directory, since the
/// agent's command runs in another directory (`docker exec` in the container's, `ssh` in
/// the home); a bare name is left to the host's `PATH`.
fn program_for_agent(program: &std::ffi::OsStr) -> std::ffi::OsString {
    let p = std::path::Path::new(program);
    if p.is_relative() && p.components().count() > 1 {
        if let Ok(cwd) = std::env::current_dir() {
            return cwd.join(p).into_os_string();
        }
    }
    program.to_owned()
}

/// The `RT_*` and `FI_*` variables of `rtrun`'s environment with shell-safe values, to be
/// passed on through a launch agent (sorted, for stable command lines).
fn forwarded_environment() -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = std::env::vars()
        .filter(|(k, v)| {
            (k.starts_with("RT_") || k.starts_with("FI_"))
                && k != crate::env::RT_KV_SECRET
                && hosts::shell_safe(k)
                && hosts::shell_safe(v)
        })
        .collect();
    v.sort();
    v
}

/// `AGENT-WORDS env VAR=VALUE...`: the agent's words, then `env` with the inherited
/// `RT_*`/`FI_*` variables and the rank's own (which win); the program follows.
fn agent_command(agent: &[String], inherited: &[(String, String)], vars: &[(&str, String)]) -> Vec<String> {
    let mut words = agent.to_vec();
    words.push("env".to_owned());
    for (k, v) in inherited {
        if !vars.iter().any(|(n, _)| n == k) {
            words.push(format!("{k}={v}"));
        }
    }
    for (k, v) in vars {
        words.push(format!("{k}={v}"));
    }
    words
}

/// Through a launch agent: writes the secret's line to a rank's standard input, then, for
/// rank 0, forwards `rtrun`'s own standard input after it on a thread (unless that is a
/// terminal `rtrun` runs in the background of: reading it would stop `rtrun`); the other
/// ranks' input ends after the line, as `/dev/null` would.
fn send_secret(mut input: std::process::ChildStdin, secret: &str, forward_own: bool) {
    // A rank gone already (a failed agent) shows in its outcome, not here.
    if input.write_all(format!("{secret}\n").as_bytes()).is_err() || !forward_own || sys::stdin_is_background_terminal()
    {
        return;
    }
    let spawned = thread::Builder::new().name("rt-stdin".into()).spawn(move || {
        let _ = io::copy(&mut io::stdin().lock(), &mut input);
    });
    if let Err(e) = spawned {
        tracing::debug!("rank 0's standard input is not forwarded: {e}");
    }
}

/// A `--kill`/`--stop`/`--cont` of the command line, and whether it was applied.
#[derive(Debug, Clone, Copy)]
struct Pending {
    k: crate::cli::KillSpec,
    done: bool,
}

impl std::ops::Deref for Pending {
    type Target = crate::cli::KillSpec;
    fn deref(&self) -> &crate::cli::KillSpec {
        &self.k
    }
}

/// What starting a process needs from the job (its own ranks and spawned children).
struct Launch<'a> {
    opts: &'a Options,
    forwarded: &'a [(String, String)],
    done: &'a mpsc::Sender<()>,
    one_host: bool,
    /// `MPI_UNIVERSE_SIZE` (`--universe`, else the default).
    universe: u32,
    /// `--universe`: the most processes held at once.
    limit: Option<u32>,
}

/// One process to start.
struct Proc<'a> {
    /// Its universe rank (output prefix and logs).
    label: u32,
    /// Its world's environment.
    env: JobEnv,
    host: &'a hosts::HostSpec,
    program: &'a std::ffi::OsStr,
    args: &'a [OsString],
    /// Variables beside the world's (a spawned child's, [`crate::spawn`]).
    extra: Vec<(&'static str, String)>,
    /// Working directory (spawn's `wdir`), when not `rtrun`'s.
    wdir: Option<&'a str>,
    /// `--output-filename`'s files.
    files: Option<(std::fs::File, std::fs::File)>,
}

impl Launch<'_> {
    /// Starts `p`: returns its record, its output forwarders and, when `rtrun` runs it
    /// directly (no agent), its pid.
    fn start(&self, p: Proc<'_>) -> io::Result<(Rank, usize, Option<u32>)> {
        let (opts, host, rank) = (self.opts, p.host, p.label);
        let mut vars: Vec<(&str, String)> = p.env.to_vars();
        vars.push((crate::spawn::RT_UNIVERSE_SIZE, self.universe.to_string()));
        vars.extend(p.extra.iter().cloned());
        if opts.agent.is_some() {
            // The agent's command line is world-readable: the secret goes to the rank's
            // standard input instead (see `crate::env`).
            for (k, v) in &mut vars {
                if *k == crate::env::RT_KV_SECRET {
                    *v = crate::env::SECRET_FROM_STDIN.to_owned();
                }
            }
        }
        if let Some(t) = opts.transport {
            vars.push(("RT_TRANSPORT", t.as_str().to_owned()));
        }
        if let Some(p) = &opts.provider {
            vars.push(("RT_PROVIDER", p.clone()));
        }
        if let Some(d) = opts.ft_period {
            vars.push(("RT_FT_PERIOD_MS", d.as_millis().max(1).to_string()));
        }
        if let Some(d) = opts.ft_timeout {
            vars.push(("RT_FT_TIMEOUT_MS", d.as_millis().max(1).to_string()));
        }
        if opts.no_ft {
            vars.push(("RT_FT", "0".to_owned()));
        }
        if let Some(eh) = &opts.initial_errhandler {
            vars.push(("RT_INITIAL_ERRHANDLER", eh.clone()));
        }
        if opts.report_bindings {
            vars.push(("RT_REPORT_BINDINGS", "1".to_owned()));
        }
        if let Some(ip) = host.addr {
            vars.push((RT_FABRIC_ADDR, ip.to_string()));
        }
        // What libfabric reads from its own environment: set here, never by the rank.
        let user_set = |k: &str| std::env::var_os(k).is_some() || opts.env.iter().any(|(n, _)| n == k);
        vars.extend(crate::env::fabric_defaults(self.one_host, user_set));
        let mut cmd = match &opts.agent {
            None => {
                let mut c = Command::new(p.program);
                c.args(p.args);
                if let Some(d) = p.wdir {
                    c.current_dir(d);
                }
                c
            }
            Some(agent) => {
                let mut vars = vars.clone();
                vars.extend(opts.env.iter().map(|(k, v)| (k.as_str(), v.clone())));
                let words = agent_command(&agent.command(&host.name), self.forwarded, &vars);
                let mut c = Command::new(&words[0]);
                c.args(&words[1..]).arg(program_for_agent(p.program)).args(p.args);
                c
            }
        };
        // --output pty: the rank's stdout is a terminal, so the C library line-buffers it
        // (a line printed just before a crash still arrives); a pipe if none can be had.
        let pty = match opts.output {
            OutputMode::Pty => sys::open_pty()
                .map_err(|e| tracing::debug!("no pseudo-terminal for rank {rank} ({e}): its stdout is a pipe"))
                .ok(),
            OutputMode::Pipe => None,
        };
        let (out_master, out_slave) = match pty {
            Some((m, s)) => (Some(std::fs::File::from(m)), Stdio::from(s)),
            None => (None, Stdio::piped()),
        };
        let stdin = match (&opts.agent, rank) {
            (Some(_), _) => Stdio::piped(),
            (None, 0) => Stdio::inherit(),
            (None, _) => Stdio::null(),
        };
        // `-x`: after the launcher's own, so a user may override them (at their own risk).
        cmd.envs(vars).envs(opts.env.iter().map(|(k, v)| (k, v))).stdin(stdin).stdout(out_slave).stderr(Stdio::piped());
        sys::kill_on_parent_death(&mut cmd);
        // The spawn drops this process's copy of the slave: the master then reads the
        // rank's output until the rank (and whatever it forked) closed it.
        let mut child = cmd.spawn()?;
        if let Some(input) = child.stdin.take() {
            send_secret(input, &p.env.secret, rank == 0);
        }
        let pid = opts.agent.is_none().then(|| child.id());
        let n = spawn_forwarders(&mut child, out_master, rank, opts.tag_output, p.files, self.done);
        let rk = Rank {
            child: Some(child),
            outcome: None,
            abort: None,
            stopped: false,
            cause: Cause::None,
            stalled_since: None,
            agent: opts.agent.as_ref().map(|a| a.command(&host.name)),
            host_pid: None,
            kill_at: None,
        };
        Ok((rk, n, pid))
    }
}

/// Runs a job to completion. See the module doc.
///
/// # Errors
/// [`LaunchError`] if the launcher itself cannot work (service, signals, spawning).
pub fn run(opts: &Options) -> Result<JobReport, LaunchError> {
    let jobid = random_hex(crate::env::JOBID_HEX_LEN / 2);
    let secret = random_hex(crate::env::SECRET_HEX_LEN / 2);
    let kv_ip = opts.kv_addr.unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    let layout = JobLayout::new(opts, &jobid);
    let mut server = Server::start_on(kv_ip, opts.ranks, &secret)?;
    let timeout = startup_timeout(opts, &layout.placement);
    // The witness refuses claims against ranks still starting and heard from (R31).
    server.set_startup_timeout(timeout);
    sys::install_termination_handlers().map_err(LaunchError::Signals)?;
    // --output-filename: every rank's files exist before any rank starts.
    let mut out_files: Vec<Option<(std::fs::File, std::fs::File)>> = match &opts.output_dir {
        Some(dir) => (0..opts.ranks)
            .map(|r| output_files(dir, r).map(Some))
            .collect::<io::Result<_>>()
            .map_err(|source| LaunchError::OutputFiles { dir: dir.clone(), source })?,
        None => Vec::new(),
    };
    tracing::debug!("job {jobid}: {} ranks of {:?}, key-value service on {}", opts.ranks, opts.program, server.addr());
    let forwarded = forwarded_environment();

    let (done_tx, done_rx) = mpsc::channel();
    let mut forwarders = 0;
    let mut ranks: Vec<Rank> = Vec::with_capacity(opts.ranks as usize);
    let one_host = layout.placement.iter().all(|p| p.host == layout.placement[0].host);
    let universe = opts.universe.unwrap_or_else(|| crate::cli::default_universe(opts.ranks));
    let launch = Launch { opts, forwarded: &forwarded, done: &done_tx, one_host, universe, limit: opts.universe };
    for rank in 0..opts.ranks {
        let p = layout.placement[rank as usize];
        let host = &layout.hosts[p.host];
        let env = JobEnv {
            rank,
            size: opts.ranks,
            local_rank: p.local_rank,
            local_size: p.local_size,
            jobid: jobid.clone(),
            kv_addr: server.addr(),
            secret: secret.clone(),
            bind: opts.bind.as_str().to_owned(),
            shm_name: layout.shm_names[p.host].clone(),
            node: host.name.clone(),
        };
        let files = out_files.get_mut(rank as usize).and_then(Option::take);
        let proc = Proc {
            label: rank,
            env,
            host,
            program: &opts.program,
            args: &opts.args,
            extra: Vec::new(),
            wdir: None,
            files,
        };
        match launch.start(proc) {
            Ok((rk, n, pid)) => {
                if let Some(pid) = pid {
                    // Busy is not dead: the witness may look at this process's state.
                    server.watch_process(rank, pid);
                }
                forwarders += n;
                ranks.push(rk);
            }
            Err(source) => {
                for (r, rk) in ranks.iter_mut().enumerate() {
                    kill_rank(r as u32, rk);
                    if let Some(c) = rk.child.as_mut() {
                        let _ = c.wait();
                    }
                }
                layout.unlink_segments();
                let program = match &opts.agent {
                    Some(a) => a.command(&host.name).first().map(OsString::from).unwrap_or_default(),
                    None => opts.program.clone(),
                };
                return Err(LaunchError::Spawn { rank, program, source });
            }
        }
    }
    let mut worlds = worlds::Worlds::new(layout.placement.iter().map(|p| p.host).collect(), kv_ip, timeout);

    let start = Instant::now();
    let mut watch = StartupWatch::new(timeout, start);
    let mut kills: Vec<Pending> = opts.kills.iter().map(|&k| Pending { k, done: false }).collect();
    kills.sort_by_key(|k| k.after);
    let mut exit_seq = 0u64;
    let mut abort_seq = 0u64;
    let mut live = ranks.len();
    let mut end = JobEnd::Completed;

    while live > 0 {
        let now = start.elapsed();
        let kill_all = if sys::termination_requested() {
            end = JobEnd::Interrupted;
            true
        } else if opts.timeout.is_some_and(|t| now >= t) {
            end = JobEnd::TimedOut(opts.timeout.unwrap_or_default());
            true
        } else {
            false
        };
        if kill_all {
            // An interrupt gives the ranks SIGTERM and the grace; `--timeout` kills at once
            // (the ranks had their time).
            let why = if end == JobEnd::Interrupted { Cause::Interrupted } else { Cause::Timeout };
            let now = Instant::now();
            for (r, rk) in ranks.iter_mut().enumerate() {
                if rk.child.is_some() && rk.cause == Cause::None {
                    rk.cause = why;
                }
                if why == Cause::Interrupted {
                    terminate_rank(r as u32, rk, now);
                } else {
                    kill_rank(r as u32, rk);
                }
            }
        }
        for (r, rk) in ranks.iter_mut().enumerate() {
            if rk.agent.is_some() && rk.host_pid.is_none() {
                rk.host_pid =
                    server.value(&format!("pid/{r}")).and_then(|v| Some(u32::from_le_bytes(v.try_into().ok()?)));
            }
        }
        // A kill of a rank not started yet (a child to be spawned) waits for it.
        let existing = ranks.len();
        for k in kills.iter_mut().filter(|k| !k.done && k.after <= now && (k.rank as usize) < existing) {
            k.done = true;
            tracing::debug!("{:?} {}@{:?}", k.fault, k.rank, k.after);
            let rk = &mut ranks[k.rank as usize];
            if k.fault != Fault::Cont && rk.child.is_some() && rk.cause == Cause::None {
                rk.cause = Cause::Injected;
            }
            match k.fault {
                Fault::Kill => kill_rank(k.rank, rk),
                Fault::Stop | Fault::Cont => {
                    if let Some(child) = rk.child.as_ref() {
                        let _ = sys::stop_or_continue(child.id(), k.fault == Fault::Stop);
                        rk.signal_in_host(if k.fault == Fault::Stop { "STOP" } else { "CONT" });
                        rk.stopped = k.fault == Fault::Stop;
                    }
                }
            }
        }
        watch.round(&server, &mut ranks, &worlds.starting());
        let mut spawned = worlds::Started::default();
        let world_aborts = worlds.serve(&server, &launch, &layout.hosts, &mut ranks, &mut spawned);
        live += spawned.processes;
        forwarders += spawned.forwarders;
        // Reap first, then apply abort requests, then record outcomes: a rank that
        // asked for an abort got its reply before exiting, so its request is queued by
        // the time its exit is seen, and its outcome carries the abort mark.
        let mut ended = Vec::new();
        for (r, rk) in ranks.iter_mut().enumerate() {
            let Some(child) = rk.child.as_mut() else {
                continue;
            };
            match child.try_wait() {
                Ok(Some(s)) => ended.push((r, status_of(s))),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!("cannot wait for rank {r}: {e}");
                    ended.push((r, RankStatus::Exited(1)));
                }
            }
        }
        for req in server.take_abort_requests().into_iter().chain(world_aborts) {
            let mark = AbortMark { seq: abort_seq, code: req.code };
            abort_seq += 1;
            tracing::debug!("rank {} aborts ranks {:?} with code {}", req.from, req.ranks, req.code);
            // The requester counts as aborted; it exits by itself unless it named itself.
            for &r in std::iter::once(&req.from).chain(&req.ranks) {
                if let Some(rk) = ranks.get_mut(r as usize) {
                    if rk.outcome.is_none() {
                        rk.abort = Some(mark);
                    }
                }
            }
            let now = Instant::now();
            for &r in &req.ranks {
                if let Some(rk) = ranks.get_mut(r as usize) {
                    terminate_rank(r, rk, now);
                }
            }
        }
        // Ranks an abort SIGTERMed whose grace ran out.
        let now = Instant::now();
        for (r, rk) in ranks.iter_mut().enumerate() {
            if rk.kill_at.is_some_and(|t| t <= now) {
                kill_rank(r as u32, rk);
            }
        }
        for (r, status) in ended {
            let rank = r as u32;
            let rk = &mut ranks[r];
            tracing::debug!("rank {rank} ended: {status:?}");
            rk.child = None;
            server.record_exit(rank, status);
            worlds.record_exit(rank, status);
            rk.outcome = Some(RankOutcome {
                rank,
                status,
                finalized: worlds.is_finalized(&server, rank),
                abort: rk.abort,
                exit_seq,
            });
            exit_seq += 1;
            live -= 1;
        }
        // Ranks left stopped (`--stop` without `--cont`) once every other rank ended
        // would hang the job: they are hung processes, so they are killed.
        let pending_cont = kills.iter().any(|k| !k.done && k.fault == Fault::Cont);
        if live > 0 && !pending_cont && ranks.iter().all(|rk| rk.child.is_none() || rk.stopped) {
            for (r, rk) in ranks.iter_mut().enumerate() {
                tracing::debug!("rank {r} is still stopped after the others ended; killing it");
                kill_rank(r as u32, rk);
            }
        }
        if live > 0 {
            thread::sleep(POLL_INTERVAL);
        }
    }

    drop(done_tx);
    // Drain output: every forwarder reports when its pipe hits EOF.
    let drain_deadline = Instant::now() + OUTPUT_DRAIN_TIMEOUT;
    for _ in 0..forwarders {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            tracing::debug!("output still open after all ranks ended; not waiting");
            break;
        }
    }
    layout.unlink_segments();
    server.shutdown();
    worlds.finish();

    // Children killed because their spawn failed are no failures of the job (R40).
    let outcomes: Vec<RankOutcome> =
        ranks.iter().filter(|r| r.cause != Cause::Cancelled).filter_map(|r| r.outcome).collect();
    let reports = ranks
        .iter()
        .filter_map(|rk| {
            let o = rk.outcome.as_ref()?;
            let host = &layout.hosts[worlds.host_of[o.rank as usize]].name;
            Some(RankReport::new(o, host, worlds.phase(&server, o.rank), rk.cause))
        })
        .collect();
    let exit_code = match end {
        JobEnd::Completed if opts.first_nonzero => crate::outcome::first_nonzero_exit_code(&outcomes),
        JobEnd::Completed => job_exit_code(&outcomes),
        JobEnd::TimedOut(_) => EXIT_TIMEOUT,
        JobEnd::Interrupted => EXIT_INTERRUPTED,
    };
    Ok(JobReport { exit_code, end, outcomes, reports, jobid })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    #[derive(Clone, Default)]
    struct Buf(Rc<RefCell<Vec<u8>>>);

    impl Write for Buf {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.0.borrow_mut().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn forward_splits_and_prefixes_lines() {
        let input: &[u8] = b"one\ntwo\npartial";
        let out = Buf::default();
        forward(input, b"[3] ", || out.clone(), None);
        assert_eq!(*out.0.borrow(), b"[3] one\n[3] two\n[3] partial\n");
    }

    #[test]
    fn forward_bounds_long_lines() {
        let input = vec![b'x'; MAX_LINE_BYTES * 2 + 5];
        let out = Buf::default();
        forward(input.as_slice(), b"", || out.clone(), None);
        assert_eq!(out.0.borrow().iter().filter(|&&b| b == b'\n').count(), 3);
    }

    fn opts(args: &[&str]) -> Options {
        match crate::cli::parse_args(args.iter().map(OsString::from)) {
            Ok(crate::cli::Invocation::Run(o)) => o,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn layout_single_host() {
        let l = JobLayout::new(&opts(&["-n", "3", "p"]), "00ff");
        assert_eq!(l.hosts.len(), 1);
        assert_eq!(l.hosts[0].addr, None);
        assert_eq!(l.shm_names, ["/rt-00ff"]);
        assert_eq!(
            l.placement.iter().map(|p| (p.host, p.local_rank, p.local_size)).collect::<Vec<_>>(),
            [(0, 0, 3), (0, 1, 3), (0, 2, 3)]
        );
    }

    #[test]
    fn layout_hosts_and_agent_command() {
        let o = opts(&[
            "-n",
            "4",
            "--host",
            "a=10.77.0.11,b=10.77.0.12",
            "--launch-agent",
            "ip netns exec {host}",
            "--kv-addr",
            "10.77.0.1",
            "p",
        ]);
        let l = JobLayout::new(&o, "00ff");
        assert_eq!(l.shm_names, ["/rt-00ff-h0", "/rt-00ff-h1"]);
        assert_eq!(l.placement.iter().map(|p| p.host).collect::<Vec<_>>(), [0, 1, 0, 1]);
        assert_eq!(l.hosts[1].addr, Some("10.77.0.12".parse().unwrap()));
        let vars = vec![("RT_RANK", "1".to_owned()), ("RT_NODE", "b".to_owned())];
        let inherited = vec![("FI_LOG_LEVEL".to_owned(), "warn".to_owned()), ("RT_RANK".to_owned(), "9".to_owned())];
        let words = agent_command(&o.agent.unwrap().command("b"), &inherited, &vars);
        assert_eq!(words, ["ip", "netns", "exec", "b", "env", "FI_LOG_LEVEL=warn", "RT_RANK=1", "RT_NODE=b"]);
        // Without an agent, named hosts are simulated here with loopback endpoints.
        let l = JobLayout::new(&opts(&["-n", "4", "--host", "x,y=127.0.0.2", "--map-by", "slot", "p"]), "00ff");
        assert_eq!(l.hosts[0].addr, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(l.hosts[1].addr, Some("127.0.0.2".parse().unwrap()));
        assert_eq!(l.placement.iter().map(|p| p.host).collect::<Vec<_>>(), [0, 0, 1, 1]);
    }

    #[test]
    fn random_hex_lengths() {
        let s = random_hex(8);
        assert_eq!(s.len(), 16);
        assert!(s.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(random_hex(32), random_hex(32));
    }
}
