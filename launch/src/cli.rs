//! Command-line parsing for `rtrun` (hand-written; no external parser).
//!
//! ```text
//! rtrun -n N [--bind-to core|none|numa] [--timeout DURATION] [--tag-output] [--quiet]
//!       [--outcome-file PATH] [--output pty|pipe] [--initial-errhandler NAME]
//!       [--kill|--stop|--cont RANK@DURATION]... [--ft-period D] [--ft-timeout D] [--no-ft]
//!       [--transport auto|shm|fabric]
//!       [--provider auto|tcp|sockets|verbs|cxi]
//!       [--host NAME[=IP],... [--map-by node|slot] [--launch-agent TEMPLATE] [--kv-addr IP]]
//!       [--] prog [args...]
//! ```
//! Options may also be written `--opt=value`, and `-n` as `-nN`. Option parsing stops at
//! the first non-option (the program) or after `--`. Durations: see [`parse_duration`].

use std::ffi::OsString;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use crate::hosts::{self, Agent, AgentError, HostError, HostSpec, MapBy};

/// Largest accepted `-n`.
pub const MAX_RANKS: u32 = 4096;

/// The usage text printed by `--help` and after argument errors.
pub const USAGE: &str = "\
usage: rtrun -n N [options] [--] PROGRAM [ARGS...]

Runs N ranks of PROGRAM on this host (or on --host hosts) with the runthrough
bootstrap service.

options:
  -n N, -np N, --np N      number of ranks (1..=4096)
  -x VAR[=VALUE], --env VAR[=VALUE]
                           set VAR in every rank's environment (without =VALUE: rtrun's
                           own value of VAR); repeatable
  --bind-to core|hwthread|numa|none
                           binding: a physical core per rank (all its hardware
                           threads), a hardware thread per rank, a NUMA node, or none
                           (default); passed to the ranks as RT_BIND
  --timeout DURATION       SIGKILL all ranks after DURATION, exit 124
  --tag-output             prefix every output line with [RANK]
  --quiet                  no end-of-job line for ranks that ended abnormally
  --outcome-file PATH      write one line per rank to PATH after the job: rank, host,
                           exit code or signal, phase, cause (machine-readable)
  --exit-status r7|first-nonzero
                           rtrun's exit code: r7 (default: a job that ran through
                           failures exits with the code of its lowest finalized rank,
                           so survivors that finished their work report success; else
                           the abort code, else 128+signal), or first-nonzero (mpirun's:
                           the first rank to end non-zero, 128+signal for a signal)
  --report-bindings        each rank prints its binding and the CPUs it may run on
                           (stderr, at start-up)
  --oversubscribe          accepted (Open MPI's flag): ranks may always outnumber cores
  --output-filename DIR    also write each rank's output to DIR/1/rank.R/stdout and
                           stderr (Open MPI's layout)
  --output pty|pipe        the ranks' standard output: a pseudo-terminal (default, as
                           Open MPI's mpirun: C programs line-buffer it, so a line
                           printed just before a crash is not lost) or a pipe
  --initial-errhandler NAME
                           the error handler MPI_COMM_WORLD, MPI_COMM_SELF and sessions
                           start with (MPI-4.1 11.2.2): mpi_errors_are_fatal (default),
                           mpi_errors_abort or mpi_errors_return (sets
                           RT_INITIAL_ERRHANDLER; MPI_INFO_ENV's mpi_initial_errhandler)
  --kill RANK@DURATION     SIGKILL RANK DURATION after start (fault injection; repeatable)
  --stop RANK@DURATION     SIGSTOP RANK (it hangs; repeatable)
  --cont RANK@DURATION     SIGCONT RANK (a stopped rank resumes; repeatable)
  --ft-period DURATION     failure-detector heartbeat period (default 10ms)
  --ft-timeout DURATION    failure-detector timeout (default 100ms, x ranks/cores when oversubscribed)
  --no-ft                  no failure detector (overhead measurements)
  --transport auto|shm|fabric
                           auto: shared memory on this host, libfabric to others;
                           fabric: libfabric to every rank (sets RT_TRANSPORT)
  --provider auto|tcp|sockets|verbs|cxi
                           libfabric provider (sets RT_PROVIDER)
  --host NAME[=IP],...     run on these hosts; each rank gets RT_NODE=NAME, and with
                           =IP its fabric endpoint binds to IP (RT_FABRIC_ADDR)
  --hostfile FILE          the hosts from FILE, one a line: NAME[=IP] [slots=N]
                           (Open MPI) or NAME:N (MPICH); with slots, ranks fill each
                           host's slots in turn unless --map-by is given
                           (also --machinefile, -f)
  --map-by node|slot       node: round-robin over hosts (default); slot: fill each
                           host with its slots, or ceil(N/hosts) ranks without them
  --launch-agent TEMPLATE  start each rank through TEMPLATE with {host} replaced, e.g.
                           'ip netns exec {host}' or 'ssh {host}' (needs --host)
  --kv-addr IP             address of the key-value service (loopback or private;
                           default 127.0.0.1; required with --launch-agent)
  --info[=markdown]        list every environment variable runthrough reads, with its
                           default and meaning (the README's table: --info=markdown)
  -V, --version            print rtrun's version
  -h, --help               print this help

DURATION: a number with an optional unit us, ms, s or m (default s): 250ms, 1.5s, 2.

signals: SIGINT or SIGTERM to rtrun gives every rank SIGTERM, then SIGKILL to those
still running 500 ms later; exit 130. An abort (MPI_Abort, a fatal error) does the same
to the ranks it names.

environment: RT_LOG=error|warn|info|debug|trace or a tracing filter (e.g.
runthrough_engine=debug) prints rtrun's and every rank's log on stderr, each line
labelled rtrun or rank N.
";

/// Where the ranks' standard output goes (`--output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputMode {
    /// A pseudo-terminal per rank (the default): the C library line-buffers a terminal,
    /// so what a rank printed reaches `rtrun` line by line, even if it is killed next.
    #[default]
    Pty,
    /// A pipe per rank: the C library fully buffers it (what a rank prints just before it
    /// is killed may be lost).
    Pipe,
}

/// The error handlers a rank may start with (`--initial-errhandler`, MPI-4.1 11.2.2).
pub const INITIAL_ERRHANDLERS: [&str; 3] = ["mpi_errors_are_fatal", "mpi_errors_abort", "mpi_errors_return"];

/// The binding policy (`--bind-to`, exported as `RT_BIND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Bind {
    /// One physical core per rank (all its hardware threads).
    Core,
    /// One hardware thread (logical CPU) per rank.
    HwThread,
    /// No binding (default).
    #[default]
    None,
    /// Bind to a NUMA node.
    Numa,
}

impl Bind {
    /// The `RT_BIND` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Bind::Core => "core",
            Bind::HwThread => "hwthread",
            Bind::None => "none",
            Bind::Numa => "numa",
        }
    }
}

impl fmt::Display for Bind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The transport choice (`--transport`, exported as `RT_TRANSPORT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportChoice {
    /// Shared memory on this host, libfabric to other hosts.
    Auto,
    /// Shared memory only.
    Shm,
    /// libfabric to every rank, even on one host.
    Fabric,
}

impl TransportChoice {
    /// The `RT_TRANSPORT` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TransportChoice::Auto => "auto",
            TransportChoice::Shm => "shm",
            TransportChoice::Fabric => "fabric",
        }
    }
}

impl fmt::Display for TransportChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Provider names `--provider` accepts (exported as `RT_PROVIDER`).
pub const PROVIDERS: [&str; 5] = ["auto", "tcp", "sockets", "verbs", "cxi"];

/// The signal a fault-injection option sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// `--kill`: SIGKILL (the rank exits).
    Kill,
    /// `--stop`: SIGSTOP (the rank hangs; only the in-band detector can tell).
    Stop,
    /// `--cont`: SIGCONT (a stopped rank resumes; it must find itself excluded).
    Cont,
}

/// One `--kill` / `--stop` / `--cont RANK@DURATION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KillSpec {
    /// The rank to signal.
    pub rank: u32,
    /// How long after start.
    pub after: Duration,
    /// Which signal.
    pub fault: Fault,
}

/// A parsed `rtrun` command line that runs a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// Number of ranks (`-n`).
    pub ranks: u32,
    /// `--bind-to`.
    pub bind: Bind,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--tag-output`.
    pub tag_output: bool,
    /// `--quiet`: no end-of-job line per abnormally ended rank.
    pub quiet: bool,
    /// `--outcome-file`: where to write the per-rank records ([`crate::report`]).
    pub outcome_file: Option<std::path::PathBuf>,
    /// `--output`.
    pub output: OutputMode,
    /// `--initial-errhandler`, one of [`INITIAL_ERRHANDLERS`] (exported as
    /// `RT_INITIAL_ERRHANDLER`).
    pub initial_errhandler: Option<String>,
    /// Every `--kill`, in command-line order.
    pub kills: Vec<KillSpec>,
    /// `--transport`, if given (else the ranks inherit `RT_TRANSPORT`).
    pub transport: Option<TransportChoice>,
    /// `--provider`, one of [`PROVIDERS`], if given (else the ranks inherit `RT_PROVIDER`).
    pub provider: Option<String>,
    /// `--ft-period` (exported as `RT_FT_PERIOD_MS`).
    pub ft_period: Option<Duration>,
    /// `--ft-timeout` (exported as `RT_FT_TIMEOUT_MS`).
    pub ft_timeout: Option<Duration>,
    /// `--no-ft`: the failure detector is off (exported as `RT_FT=0`).
    pub no_ft: bool,
    /// `--host`: the hosts, in order (empty: every rank on this host).
    pub hosts: Vec<HostSpec>,
    /// `--map-by`.
    pub map_by: MapBy,
    /// `--launch-agent`, parsed.
    pub agent: Option<Agent>,
    /// `--kv-addr`, if given (else 127.0.0.1).
    pub kv_addr: Option<IpAddr>,
    /// `--exit-status first-nonzero` instead of R7's rule.
    pub first_nonzero: bool,
    /// `--report-bindings` (exported as `RT_REPORT_BINDINGS=1`).
    pub report_bindings: bool,
    /// `--output-filename`: where each rank's output is also written.
    pub output_dir: Option<std::path::PathBuf>,
    /// `-x`/`--env`: variables set in every rank's environment, in order.
    pub env: Vec<(String, String)>,
    /// The program, looked up as given (path, or `PATH` search).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
// Parsed once per process: the size difference between the variants does not matter.
#[allow(clippy::large_enum_variant)]
pub enum Invocation {
    /// Run a job.
    Run(Options),
    /// Print [`USAGE`] and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
    /// Print every environment variable runthrough reads (`--info`; Markdown with
    /// `--info=markdown`) and exit 0.
    Info {
        /// The README's Markdown table instead of text.
        markdown: bool,
    },
}

/// A malformed `rtrun` command line (exit code 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UsageError {
    /// `--info=` other than `text` or `markdown`.
    #[error("--info={value}: expected text or markdown")]
    BadInfo {
        /// The value given.
        value: String,
    },
    /// `--exit-status` other than `r7` or `first-nonzero`.
    #[error("--exit-status {value}: expected r7 or first-nonzero")]
    BadExitStatus {
        /// The value given.
        value: String,
    },
    /// A `--hostfile` that cannot be read or parsed.
    #[error("--hostfile {path}: {reason}")]
    Hostfile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// A `-x` value a launch agent's shell would have to quote.
    #[error("-x {value}: through a launch agent, names and values may hold letters, digits and ._/:,=@%+- only")]
    EnvNeedsQuoting {
        /// The variable and value.
        value: String,
    },
    /// `-x VAR` of a variable `rtrun` does not have, or an empty name.
    #[error("-x {value}: no such variable in rtrun's environment (give -x VAR=VALUE)")]
    BadEnv {
        /// The value given.
        value: String,
    },
    /// An option that needs a value came last.
    #[error("option {option} needs a value")]
    MissingValue {
        /// The option.
        option: String,
    },
    /// `-n` was not given.
    #[error("the number of ranks (-n N) is required")]
    MissingRanks,
    /// `-n` is not a number in `1..=MAX_RANKS`.
    #[error("invalid number of ranks {value:?}: expected an integer in 1..={MAX_RANKS}")]
    BadRanks {
        /// The value given.
        value: String,
    },
    /// No program was given.
    #[error("no program given")]
    MissingProgram,
    /// A duration did not parse.
    #[error("invalid duration {value:?} for {option}: {reason}")]
    BadDuration {
        /// The option.
        option: &'static str,
        /// The value given.
        value: String,
        /// Why it is invalid.
        reason: DurationError,
    },
    /// `--kill` is not `RANK@DURATION`.
    #[error("invalid --kill {value:?}: expected RANK@DURATION")]
    BadKill {
        /// The value given.
        value: String,
    },
    /// `--kill` names a rank `>= N`.
    #[error("--kill rank {rank} does not exist in a job of {size} ranks")]
    KillRankOutOfRange {
        /// The rank.
        rank: u32,
        /// `-n`.
        size: u32,
    },
    /// `--bind-to` value is not `core`, `none` or `numa`.
    #[error("invalid --bind-to {value:?}: expected core, none or numa")]
    BadBind {
        /// The value given.
        value: String,
    },
    /// `--transport` value is not `auto`, `shm` or `fabric`.
    #[error("invalid --transport {value:?}: expected auto, shm or fabric")]
    BadTransport {
        /// The value given.
        value: String,
    },
    /// `--provider` value is not a provider name runthrough drives.
    #[error("invalid --provider {value:?}: expected auto, tcp, sockets, verbs or cxi")]
    BadProvider {
        /// The value given.
        value: String,
    },
    /// `--output` value is not `pty` or `pipe`.
    #[error("invalid --output {value:?}: expected pty or pipe")]
    BadOutput {
        /// The value given.
        value: String,
    },
    /// `--initial-errhandler` names no predefined error handler.
    #[error(
        "invalid --initial-errhandler {value:?}: expected mpi_errors_are_fatal, mpi_errors_abort or mpi_errors_return"
    )]
    BadErrhandler {
        /// The value given.
        value: String,
    },
    /// An unknown option.
    #[error("unknown option {option:?}")]
    UnknownOption {
        /// The option.
        option: String,
    },
    /// `--host` is malformed.
    #[error("invalid --host: {0}")]
    BadHost(#[source] HostError),
    /// `--map-by` value is not `node` or `slot`.
    #[error("invalid --map-by {value:?}: expected node or slot")]
    BadMapBy {
        /// The value given.
        value: String,
    },
    /// `--launch-agent` is malformed.
    #[error("invalid --launch-agent: {0}")]
    BadAgent(#[source] AgentError),
    /// `--launch-agent` without `--host`.
    #[error("--launch-agent needs --host (the hosts to substitute for {{host}})")]
    AgentWithoutHosts,
    /// `--kv-addr` is not an IP address the service may listen on.
    #[error("invalid --kv-addr {value:?}: expected a loopback or private IP address (e.g. 10.77.0.1)")]
    BadKvAddr {
        /// The value given.
        value: String,
    },
    /// `--launch-agent` without `--kv-addr`: remote ranks cannot reach loopback.
    #[error("--launch-agent needs --kv-addr IP, an address of this host the ranks can reach")]
    KvAddrRequired,
    /// An option value is not valid UTF-8.
    #[error("the value of {option} is not valid UTF-8")]
    NotUnicode {
        /// The option.
        option: String,
    },
}

/// Why a duration did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DurationError {
    /// Empty string.
    #[error("empty")]
    Empty,
    /// The number part is not a finite non-negative decimal number.
    #[error("not a non-negative number")]
    BadNumber,
    /// The unit is not one of `us`, `ms`, `s`, `m`.
    #[error("unknown unit (use us, ms, s or m)")]
    BadUnit,
    /// Too large to represent.
    #[error("too large")]
    Overflow,
}

/// Parses `250ms`, `2s`, `1.5s`, `100us`, `2m`, or a bare number of seconds.
///
/// # Errors
/// [`DurationError`] for anything else (negative, NaN, unknown unit, overflow).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() || num == "." {
        return Err(DurationError::BadNumber);
    }
    let value: f64 = num.parse().map_err(|_| DurationError::BadNumber)?;
    let scale = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "\u{b5}s" => 1e-6,
        "m" | "min" => 60.0,
        _ => return Err(DurationError::BadUnit),
    };
    Duration::try_from_secs_f64(value * scale).map_err(|_| DurationError::Overflow)
}

fn utf8(option: &str, v: OsString) -> Result<String, UsageError> {
    v.into_string().map_err(|_| UsageError::NotUnicode { option: option.to_owned() })
}

/// Parses `rtrun`'s arguments (without the program name `argv[0]`).
///
/// # Errors
/// [`UsageError`] for every malformed command line; never panics.
pub fn parse_args<I>(args: I) -> Result<Invocation, UsageError>
where
    I: IntoIterator<Item = OsString>,
{
    let mut it = args.into_iter();
    let mut ranks: Option<u32> = None;
    let mut bind = Bind::default();
    let mut timeout = None;
    let mut tag_output = false;
    let mut output = OutputMode::default();
    let mut initial_errhandler = None;
    let mut quiet = false;
    let mut outcome_file = None;
    let mut kills = Vec::new();
    let mut transport = None;
    let mut provider = None;
    let mut ft_period = None;
    let mut ft_timeout = None;
    let mut no_ft = false;
    let mut host_list = Vec::new();
    let mut map_by = MapBy::default();
    let mut map_by_given = false;
    let mut slots_given = false;
    let mut agent = None;
    let mut kv_addr = None;
    let mut env = Vec::new();
    let mut output_dir = None;
    let mut report_bindings = false;
    let mut first_nonzero = false;
    let mut program = None;

    while let Some(arg) = it.next() {
        let Some(a) = arg.to_str() else {
            // Not an option we know (options are ASCII): the program.
            program = Some(arg);
            break;
        };
        if a == "--" {
            program = it.next();
            break;
        }
        if !a.starts_with('-') || a == "-" {
            program = Some(arg);
            break;
        }
        // Split `--opt=value` and `-nN`.
        let (name, inline): (&str, Option<String>) = if let Some(rest) = a.strip_prefix("--") {
            match rest.split_once('=') {
                Some((n, v)) => (&a[..2 + n.len()], Some(v.to_owned())),
                None => (a, None),
            }
        } else if a.len() > 2 && a.starts_with("-n") {
            ("-n", Some(a[2..].trim_start_matches('=').to_owned()))
        } else {
            (a, None)
        };
        let name = name.to_owned();
        let mut value = |inline: Option<String>| -> Result<String, UsageError> {
            match inline {
                Some(v) => Ok(v),
                None => match it.next() {
                    Some(v) => utf8(&name, v),
                    None => Err(UsageError::MissingValue { option: name.clone() }),
                },
            }
        };
        match name.as_str() {
            "-h" | "--help" => return Ok(Invocation::Help),
            "-V" | "--version" => return Ok(Invocation::Version),
            "--info" => match inline.as_deref() {
                None | Some("text") => return Ok(Invocation::Info { markdown: false }),
                Some("markdown") => return Ok(Invocation::Info { markdown: true }),
                Some(v) => return Err(UsageError::BadInfo { value: v.to_owned() }),
            },
            "--output-filename" => output_dir = Some(std::path::PathBuf::from(value(inline)?)),
            "--report-bindings" => report_bindings = true,
            "--exit-status" => {
                let v = value(inline)?;
                first_nonzero = match v.as_str() {
                    "r7" => false,
                    "first-nonzero" => true,
                    _ => return Err(UsageError::BadExitStatus { value: v }),
                };
            }
            // Open MPI refuses more ranks than slots without it; runthrough never does.
            "--oversubscribe" => {}
            "-x" | "--env" => {
                let v = value(inline)?;
                let (k, val) = match v.split_once('=') {
                    Some((k, val)) => (k.to_owned(), val.to_owned()),
                    // Open MPI's `-x VAR`: rtrun's own value (an unset one is an error).
                    None => match std::env::var(&v) {
                        Ok(val) => (v.clone(), val),
                        Err(_) => return Err(UsageError::BadEnv { value: v }),
                    },
                };
                if k.is_empty() || k.contains('\0') || val.contains('\0') {
                    return Err(UsageError::BadEnv { value: v });
                }
                env.push((k, val));
            }
            "-n" | "--np" | "-np" => {
                let v = value(inline)?;
                match v.trim().parse::<u32>() {
                    Ok(n) if (1..=MAX_RANKS).contains(&n) => ranks = Some(n),
                    _ => return Err(UsageError::BadRanks { value: v }),
                }
            }
            "--bind-to" => {
                let v = value(inline)?;
                bind = match v.as_str() {
                    "core" => Bind::Core,
                    "hwthread" => Bind::HwThread,
                    "none" => Bind::None,
                    "numa" => Bind::Numa,
                    _ => return Err(UsageError::BadBind { value: v }),
                };
            }
            "--transport" => {
                let v = value(inline)?;
                transport = Some(match v.as_str() {
                    "auto" => TransportChoice::Auto,
                    "shm" => TransportChoice::Shm,
                    "fabric" => TransportChoice::Fabric,
                    _ => return Err(UsageError::BadTransport { value: v }),
                });
            }
            "--provider" => {
                let v = value(inline)?;
                if !PROVIDERS.contains(&v.as_str()) {
                    return Err(UsageError::BadProvider { value: v });
                }
                provider = Some(v);
            }
            "--host" | "-H" | "--hosts" => {
                host_list = hosts::parse_hosts(&value(inline)?).map_err(UsageError::BadHost)?;
            }
            "--hostfile" | "--machinefile" | "-f" => {
                let path = value(inline)?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| UsageError::Hostfile { path: path.clone(), reason: e.to_string() })?;
                host_list = hosts::parse_hostfile(&text)
                    .map_err(|e| UsageError::Hostfile { path: path.clone(), reason: e.to_string() })?;
                slots_given = host_list.iter().any(|h| h.slots.is_some());
            }
            "--map-by" => {
                map_by_given = true;
                let v = value(inline)?;
                map_by = match v.as_str() {
                    "node" => MapBy::Node,
                    "slot" => MapBy::Slot,
                    _ => return Err(UsageError::BadMapBy { value: v }),
                };
            }
            "--launch-agent" => {
                agent = Some(Agent::parse(&value(inline)?).map_err(UsageError::BadAgent)?);
            }
            "--kv-addr" => {
                let v = value(inline)?;
                match v.trim().parse::<IpAddr>() {
                    Ok(ip) if hosts::kv_ip_allowed(ip) => kv_addr = Some(ip),
                    _ => return Err(UsageError::BadKvAddr { value: v }),
                }
            }
            "--timeout" => {
                let v = value(inline)?;
                let d = parse_duration(&v).map_err(|reason| UsageError::BadDuration {
                    option: "--timeout",
                    value: v.clone(),
                    reason,
                })?;
                timeout = Some(d);
            }
            "--tag-output" if inline.is_none() => tag_output = true,
            "--output" => {
                let v = value(inline)?;
                output = match v.as_str() {
                    "pty" => OutputMode::Pty,
                    "pipe" => OutputMode::Pipe,
                    _ => return Err(UsageError::BadOutput { value: v }),
                };
            }
            "--initial-errhandler" => {
                let v = value(inline)?;
                let name = v.trim().to_ascii_lowercase();
                if !INITIAL_ERRHANDLERS.contains(&name.as_str()) {
                    return Err(UsageError::BadErrhandler { value: v });
                }
                initial_errhandler = Some(name);
            }
            "--quiet" | "-q" if inline.is_none() => quiet = true,
            "--outcome-file" => outcome_file = Some(std::path::PathBuf::from(value(inline)?)),
            "--no-ft" if inline.is_none() => no_ft = true,
            "--ft-period" | "--ft-timeout" => {
                let v = value(inline)?;
                let option = if name == "--ft-period" { "--ft-period" } else { "--ft-timeout" };
                let d = parse_duration(&v).map_err(|reason| UsageError::BadDuration {
                    option,
                    value: v.clone(),
                    reason,
                })?;
                if d.is_zero() {
                    return Err(UsageError::BadDuration { option, value: v, reason: DurationError::BadNumber });
                }
                if option == "--ft-period" {
                    ft_period = Some(d);
                } else {
                    ft_timeout = Some(d);
                }
            }
            "--kill" | "--stop" | "--cont" => {
                let (option, fault) = match name.as_str() {
                    "--kill" => ("--kill", Fault::Kill),
                    "--stop" => ("--stop", Fault::Stop),
                    _ => ("--cont", Fault::Cont),
                };
                let v = value(inline)?;
                let Some((r, d)) = v.split_once('@') else {
                    return Err(UsageError::BadKill { value: v });
                };
                let rank = r.trim().parse::<u32>().map_err(|_| UsageError::BadKill { value: v.clone() })?;
                let after =
                    parse_duration(d).map_err(|reason| UsageError::BadDuration { option, value: v.clone(), reason })?;
                kills.push(KillSpec { rank, after, fault });
            }
            _ => return Err(UsageError::UnknownOption { option: a.to_owned() }),
        }
    }

    // A hostfile's slot counts mean filling hosts by slot unless --map-by says otherwise
    // (as Open MPI and MPICH do).
    if slots_given && !map_by_given {
        map_by = MapBy::Slot;
    }
    let ranks = ranks.ok_or(UsageError::MissingRanks)?;
    let program = program.ok_or(UsageError::MissingProgram)?;
    if program.is_empty() {
        return Err(UsageError::MissingProgram);
    }
    if let Some(k) = kills.iter().find(|k| k.rank >= ranks) {
        return Err(UsageError::KillRankOutOfRange { rank: k.rank, size: ranks });
    }
    if agent.is_some() && host_list.is_empty() {
        return Err(UsageError::AgentWithoutHosts);
    }
    if agent.is_some() && kv_addr.is_none() {
        return Err(UsageError::KvAddrRequired);
    }
    // Through a launch agent (a remote shell may read them) -x values must need no quoting.
    if let (Some(_), Some((k, v))) =
        (&agent, env.iter().find(|(k, v)| !crate::hosts::shell_safe(k) || !crate::hosts::shell_safe(v)))
    {
        return Err(UsageError::EnvNeedsQuoting { value: format!("{k}={v}") });
    }
    Ok(Invocation::Run(Options {
        ranks,
        bind,
        timeout,
        tag_output,
        quiet,
        outcome_file,
        output,
        initial_errhandler,
        kills,
        transport,
        provider,
        ft_period,
        ft_timeout,
        no_ft,
        hosts: host_list,
        map_by,
        agent,
        kv_addr,
        output_dir,
        report_bindings,
        first_nonzero,
        env,
        program,
        args: it.collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &[&str]) -> Result<Invocation, UsageError> {
        parse_args(s.iter().map(OsString::from))
    }

    fn run(s: &[&str]) -> Options {
        match parse(s) {
            Ok(Invocation::Run(o)) => o,
            other => panic!("{s:?}: {other:?}"),
        }
    }

    #[test]
    fn env_options_set_or_copy_variables_in_order() {
        // PATH is set in any test environment: `-x PATH` copies rtrun's value.
        let path = std::env::var("PATH").unwrap();
        let o = run(&["-n", "1", "-x", "A=1", "--env", "B=x=y", "-x", "PATH", "--env=C=", "prog"]);
        let want: Vec<(String, String)> = [("A", "1"), ("B", "x=y"), ("PATH", path.as_str()), ("C", "")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(o.env, want);
        assert!(matches!(
            parse(&["-n", "1", "-x", "RT_SURELY_UNSET_VARIABLE_X", "prog"]),
            Err(UsageError::BadEnv { .. })
        ));
        assert!(matches!(parse(&["-n", "1", "-x", "=v", "prog"]), Err(UsageError::BadEnv { .. })));
        let agent = ["--host", "a,b", "--launch-agent", "ssh {host}", "--kv-addr", "10.0.0.1"];
        let mut args: Vec<&str> = vec!["-n", "2"];
        args.extend(agent);
        args.extend(["-x", "A=two words", "prog"]);
        assert!(matches!(parse(&args), Err(UsageError::EnvNeedsQuoting { .. })));
    }

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        assert_eq!(parse_duration("250ms"), Ok(ms(250)));
        assert_eq!(parse_duration("2s"), Ok(ms(2000)));
        assert_eq!(parse_duration("1.5s"), Ok(ms(1500)));
        assert_eq!(parse_duration("100us"), Ok(Duration::from_micros(100)));
        assert_eq!(parse_duration("3"), Ok(ms(3000)));
        assert_eq!(parse_duration("0.25"), Ok(ms(250)));
        assert_eq!(parse_duration("2m"), Ok(ms(120_000)));
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("abc"), Err(DurationError::BadNumber));
        assert_eq!(parse_duration("-1s"), Err(DurationError::BadNumber));
        assert_eq!(parse_duration("1.2.3s"), Err(DurationError::BadNumber));
        assert_eq!(parse_duration("5h"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("ms"), Err(DurationError::BadNumber));
        assert_eq!(parse_duration("1e3"), Err(DurationError::BadUnit));
        assert_eq!(parse_duration("99999999999999999999999"), Err(DurationError::Overflow));
    }

    #[test]
    fn full_command_line() {
        let o = run(&[
            "-n",
            "4",
            "--bind-to",
            "core",
            "--timeout",
            "10",
            "--tag-output",
            "--quiet",
            "--outcome-file",
            "/tmp/o.txt",
            "--kill",
            "1@300ms",
            "--kill=2@1s",
            "--",
            "prog",
            "-n",
            "x",
        ]);
        assert_eq!(o.ranks, 4);
        assert_eq!(o.bind, Bind::Core);
        assert_eq!(o.timeout, Some(Duration::from_secs(10)));
        assert!(o.tag_output);
        assert!(o.quiet);
        assert_eq!(o.outcome_file.as_deref(), Some(std::path::Path::new("/tmp/o.txt")));
        assert_eq!(
            o.kills,
            vec![
                KillSpec { rank: 1, after: Duration::from_millis(300), fault: Fault::Kill },
                KillSpec { rank: 2, after: Duration::from_secs(1), fault: Fault::Kill },
            ]
        );
        assert_eq!(o.program, "prog");
        assert_eq!(o.args, vec![OsString::from("-n"), OsString::from("x")]);
    }

    #[test]
    fn options_stop_at_program() {
        let o = run(&["-n2", "prog", "--tag-output"]);
        assert_eq!(o.ranks, 2);
        assert!(!o.tag_output);
        assert!(!o.quiet && o.outcome_file.is_none());
        assert_eq!(o.args, vec![OsString::from("--tag-output")]);
        assert_eq!(run(&["--np=3", "p"]).ranks, 3);
    }

    #[test]
    fn output_and_initial_errhandler() {
        let o = run(&["-n", "2", "p"]);
        assert_eq!((o.output, o.initial_errhandler.as_deref()), (OutputMode::Pty, None));
        let o = run(&["-n", "2", "--output", "pipe", "--initial-errhandler=MPI_ERRORS_RETURN", "p"]);
        assert_eq!((o.output, o.initial_errhandler.as_deref()), (OutputMode::Pipe, Some("mpi_errors_return")));
        assert!(matches!(parse(&["-n", "2", "--output", "tty", "p"]), Err(UsageError::BadOutput { .. })));
        assert!(matches!(
            parse(&["-n", "2", "--initial-errhandler", "mine", "p"]),
            Err(UsageError::BadErrhandler { .. })
        ));
    }

    #[test]
    fn stop_cont_and_detector_options() {
        let o = run(&[
            "-n",
            "3",
            "--stop",
            "1@200ms",
            "--cont=1@2s",
            "--ft-period",
            "5ms",
            "--ft-timeout=250ms",
            "--no-ft",
            "p",
        ]);
        assert_eq!(
            o.kills,
            vec![
                KillSpec { rank: 1, after: Duration::from_millis(200), fault: Fault::Stop },
                KillSpec { rank: 1, after: Duration::from_secs(2), fault: Fault::Cont },
            ]
        );
        assert_eq!(o.ft_period, Some(Duration::from_millis(5)));
        assert_eq!(o.ft_timeout, Some(Duration::from_millis(250)));
        assert!(o.no_ft);
        for bad in [
            &["-n", "2", "--stop", "5@1s", "p"][..],
            &["-n", "2", "--ft-timeout", "0", "p"],
            &["-n", "2", "--cont", "x", "p"],
        ] {
            assert!(parse_args(bad.iter().map(OsString::from)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn transport_and_provider() {
        let o = run(&["-n", "2", "--transport", "fabric", "--provider=sockets", "prog"]);
        assert_eq!(o.transport, Some(TransportChoice::Fabric));
        assert_eq!(o.provider.as_deref(), Some("sockets"));
        let o = run(&["-n", "2", "--transport=shm", "prog"]);
        assert_eq!((o.transport, o.provider), (Some(TransportChoice::Shm), None));
        assert_eq!(run(&["-n", "2", "--transport", "auto", "p"]).transport, Some(TransportChoice::Auto));
        for p in PROVIDERS {
            assert_eq!(run(&["-n", "1", "--provider", p, "x"]).provider.as_deref(), Some(p));
        }
        let o = run(&["-n", "2", "prog", "--transport", "fabric"]);
        assert_eq!(o.transport, None, "options after the program are its own");
        assert_eq!(TransportChoice::Fabric.to_string(), "fabric");
    }

    #[test]
    fn hosts_map_by_agent_kv_addr() {
        let o = run(&[
            "-n",
            "6",
            "--host",
            "rt-h0=10.77.0.11,rt-h1=10.77.0.12,rt-h2=10.77.0.13",
            "--map-by=slot",
            "--launch-agent",
            "ip netns exec {host}",
            "--kv-addr",
            "10.77.0.1",
            "prog",
        ]);
        assert_eq!(o.hosts.len(), 3);
        assert_eq!(o.hosts[1].to_string(), "rt-h1=10.77.0.12");
        assert_eq!(o.map_by, MapBy::Slot);
        assert_eq!(
            o.agent.as_ref().map(|a| a.command("rt-h2")),
            Some(vec!["ip".into(), "netns".into(), "exec".into(), "rt-h2".into()])
        );
        assert_eq!(o.kv_addr, Some("10.77.0.1".parse().unwrap()));
        let o = run(&["-n", "2", "--host", "a,b", "prog"]);
        assert_eq!((o.map_by, o.agent, o.kv_addr), (MapBy::Node, None, None));
        let o = run(&["-n", "2", "prog"]);
        assert!(o.hosts.is_empty());
        assert_eq!(run(&["-n", "2", "--kv-addr=127.0.0.1", "p"]).kv_addr, Some("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn help() {
        assert_eq!(parse(&["--version"]), Ok(Invocation::Version));
        assert_eq!(parse(&["-n", "2", "-V", "prog"]), Ok(Invocation::Version));
        assert_eq!(parse(&["--help"]), Ok(Invocation::Help));
        assert_eq!(parse(&["-n", "2", "-h"]), Ok(Invocation::Help));
    }

    #[test]
    fn errors() {
        use UsageError as E;
        type Check = fn(&UsageError) -> bool;
        let cases: &[(&[&str], Check)] = &[
            (&["-n", "0", "p"], |e| matches!(e, E::BadRanks { .. })),
            (&["-n", "x", "p"], |e| matches!(e, E::BadRanks { .. })),
            (&["-n", "-3", "p"], |e| matches!(e, E::BadRanks { .. })),
            (&["-n", "5000", "p"], |e| matches!(e, E::BadRanks { .. })),
            (&["p"], |e| matches!(e, E::MissingRanks)),
            (&["-n"], |e| matches!(e, E::MissingValue { .. })),
            (&["-n", "2"], |e| matches!(e, E::MissingProgram)),
            (&["-n", "2", "--"], |e| matches!(e, E::MissingProgram)),
            (&["-n", "2", "--kill", "1@abc", "p"], |e| matches!(e, E::BadDuration { .. })),
            (&["-n", "2", "--kill", "1", "p"], |e| matches!(e, E::BadKill { .. })),
            (&["-n", "2", "--kill", "x@1s", "p"], |e| matches!(e, E::BadKill { .. })),
            (&["-n", "2", "--kill", "2@1s", "p"], |e| matches!(e, E::KillRankOutOfRange { rank: 2, size: 2 })),
            (&["-n", "2", "--frobnicate", "p"], |e| matches!(e, E::UnknownOption { .. })),
            (&["-n", "2", "--bind-to", "socket", "p"], |e| matches!(e, E::BadBind { .. })),
            (&["-n", "2", "--timeout", "soon", "p"], |e| matches!(e, E::BadDuration { .. })),
            (&["-n", "2", "--tag-output=yes", "p"], |e| matches!(e, E::UnknownOption { .. })),
            (&["-n", "2", "--transport", "ofi", "p"], |e| matches!(e, E::BadTransport { .. })),
            (&["-n", "2", "--transport"], |e| matches!(e, E::MissingValue { .. })),
            (&["-n", "2", "--provider", "psm3", "p"], |e| matches!(e, E::BadProvider { .. })),
            (&["-n", "2", "--provider=TCP", "p"], |e| matches!(e, E::BadProvider { .. })),
            (&["-n", "2", "--provider"], |e| matches!(e, E::MissingValue { .. })),
            (&["-n", "2", "--host", "", "p"], |e| matches!(e, E::BadHost(HostError::Empty))),
            (&["-n", "2", "--host", "a,a", "p"], |e| matches!(e, E::BadHost(HostError::Duplicate(_)))),
            (&["-n", "2", "--host", "a=1.2.3", "p"], |e| matches!(e, E::BadHost(HostError::BadAddr { .. }))),
            (&["-n", "2", "--host"], |e| matches!(e, E::MissingValue { .. })),
            (&["-n", "2", "--map-by", "core", "p"], |e| matches!(e, E::BadMapBy { .. })),
            (&["-n", "2", "--launch-agent", "ssh", "--host", "a", "p"], |e| matches!(e, E::BadAgent(_))),
            (&["-n", "2", "--launch-agent", "ssh {host}", "--kv-addr", "10.0.0.1", "p"], |e| {
                matches!(e, E::AgentWithoutHosts)
            }),
            (&["-n", "2", "--launch-agent", "ssh {host}", "--host", "a", "p"], |e| matches!(e, E::KvAddrRequired)),
            (&["-n", "2", "--kv-addr", "8.8.8.8", "p"], |e| matches!(e, E::BadKvAddr { .. })),
            (&["-n", "2", "--kv-addr", "0.0.0.0", "p"], |e| matches!(e, E::BadKvAddr { .. })),
            (&["-n", "2", "--kv-addr", "here", "p"], |e| matches!(e, E::BadKvAddr { .. })),
        ];
        for (args, check) in cases {
            match parse(args) {
                Err(e) => assert!(check(&e), "{args:?}: {e:?}"),
                Ok(x) => panic!("{args:?} parsed: {x:?}"),
            }
        }
    }
}
