//! Command-line parsing for `rtrun`, on clap (derive): what it accepts, `--help` and the
//! man page all come from one definition.
//!
//! Parts:
//! - this file: what a command line asks for ([`Invocation`], [`Options`] and their
//!   types), its errors ([`UsageError`]), [`parse_args`], [`help`], [`man_page`] and
//!   [`parse_duration`];
//! - `args`: the clap definition (every option and its help text) and mpirun's `-np`
//!   rewritten for clap;
//! - `convert`: clap's result to an [`Invocation`], every value checked; clap's errors
//!   to [`UsageError`]s;
//! - `man`: the man page (`clap_mangen`), and the sections after the options that
//!   `--help` and the man page share (environment, exit status, examples).
//!
//! ```text
//! rtrun -n N [options] [--] PROGRAM [ARGS...]
//! ```
//! mpirun's habits: `-np N`, `-H`/`--host`, `--hostfile`/`--machinefile`/`-f`, `-x VAR`,
//! `--oversubscribe`, `--report-bindings`, `--output-filename`. Options may also be
//! written `--opt=value`, and `-n` as `-nN`. Option parsing stops at the program (its
//! arguments are its own, even those that look like options) or after `--`. Durations:
//! see [`parse_duration`].

use std::ffi::OsString;
use std::fmt;
use std::net::IpAddr;
use std::time::Duration;

use clap::FromArgMatches;

use crate::hosts::{Agent, AgentError, HostError, HostSpec, MapBy};

mod args;
mod convert;
mod man;

/// Largest accepted `-n`.
pub const MAX_RANKS: u32 = 4096;

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

/// `MPI_UNIVERSE_SIZE` without `--universe` (a hint then, not a limit): room for the
/// job's ranks and as many again spawned (at least 16 more); also the bound of the
/// universe ranks `--kill` may name.
pub fn default_universe(ranks: u32) -> u32 {
    ranks.saturating_add(ranks.max(16))
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
    /// `--universe` (never below the ranks): `MPI_UNIVERSE_SIZE` and a hard limit on the
    /// processes held at once. Without it `MPI_UNIVERSE_SIZE` is [`default_universe`] and
    /// spawns are not limited (MPICH's behaviour; mpi4py's suite spawns more).
    pub universe: Option<u32>,
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
    /// Print [`help`] and exit 0.
    Help,
    /// Print the version and exit 0.
    Version,
    /// Print every environment variable runthrough reads (`--info`; Markdown with
    /// `--info=markdown`) and exit 0.
    Info {
        /// The README's Markdown table instead of text.
        markdown: bool,
    },
    /// Print the man page ([`man_page`], the hidden `--generate-man`) and exit 0.
    Man,
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
    /// `--kill` names a rank outside the universe (the ranks and the children that may
    /// be spawned, `--universe`).
    #[error("--kill rank {rank} is outside the job's universe of {size} processes (--universe)")]
    KillRankOutOfRange {
        /// The rank.
        rank: u32,
        /// `-n`.
        size: u32,
    },
    /// `--bind-to` value is not `core`, `hwthread`, `numa` or `none`.
    #[error("invalid --bind-to {value:?}: expected core, hwthread, numa or none")]
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
    /// A command line clap could not split otherwise (clap's message).
    #[error("{message}")]
    Syntax {
        /// clap's message.
        message: String,
    },
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

/// Parses `rtrun`'s arguments (without the program name `argv[0]`): mpirun's `-np`
/// rewritten for clap (`args::normalize`), the command line split by clap
/// (`args::Args`), then every value checked (`convert`).
///
/// # Errors
/// [`UsageError`] for every malformed command line; never panics.
pub fn parse_args<I>(argv: I) -> Result<Invocation, UsageError>
where
    I: IntoIterator<Item = OsString>,
{
    let written: Vec<OsString> = argv.into_iter().collect();
    let matches = args::command()
        .no_binary_name(true)
        .try_get_matches_from(args::normalize(written.iter().cloned()))
        .map_err(|e| convert::usage_error(&e, &written))?;
    let parsed = args::Args::from_arg_matches(&matches).map_err(|e| convert::usage_error(&e, &written))?;
    convert::invocation(parsed, &matches)
}

/// The text `--help` prints: usage, description, every option, then durations, signals,
/// environment, exit status and examples.
pub fn help() -> String {
    args::command().render_long_help().to_string()
}

/// The man page, rtrun.1, in roff (`rtrun --generate-man`; `scripts/install.sh` installs
/// it): the same options and sections as [`help`], and the installed files.
pub fn man_page() -> String {
    man::man_page()
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
            &["-n", "2", "--stop", "18@1s", "p"][..],
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
    fn mpirun_spellings() {
        let o = run(&[
            "-np",
            "4",
            "-H",
            "a,b",
            "--oversubscribe",
            "--report-bindings",
            "--output-filename",
            "/tmp/rt-out",
            "--exit-status",
            "first-nonzero",
            "prog",
            "-np",
            "2",
            "-H",
        ]);
        assert_eq!((o.ranks, o.hosts.len(), o.report_bindings, o.first_nonzero), (4, 2, true, true));
        assert_eq!(o.output_dir.as_deref(), Some(std::path::Path::new("/tmp/rt-out")));
        assert_eq!(o.args, ["-np", "2", "-H"], "the program's arguments are its own");
        assert_eq!(run(&["--hosts", "a", "-n", "1", "p"]).hosts.len(), 1);
        for n in
            [&["-n=3", "p"][..], &["-n3", "p"], &["--np", "3", "p"], &["-qn", "3", "p"], &["-np", "2", "-n", "3", "p"]]
        {
            assert_eq!(run(n).ranks, 3, "{n:?}: the last -n wins");
        }
        // An option's value is never rewritten, nor taken for an option.
        let o = run(&["-n", "1", "--outcome-file", "-np", "--", "p", "--", "-x"]);
        assert_eq!(o.outcome_file.as_deref(), Some(std::path::Path::new("-np")));
        assert_eq!((o.program.to_str(), o.args.len()), (Some("p"), 2));
        assert_eq!(run(&["-n", "1", "-", "x"]).program, "-");
        assert!(!run(&["-n", "1", "p"]).first_nonzero);
        assert!(!run(&["-n", "1", "--exit-status=r7", "p"]).first_nonzero);
        assert!(matches!(parse(&["-np"]), Err(UsageError::MissingValue { option }) if option == "-np"));
    }

    #[test]
    fn hostfile_spellings_and_host_override() {
        let path = std::env::temp_dir().join(format!("rt-cli-hostfile-{}", std::process::id()));
        std::fs::write(&path, "a slots=2\nb:1\n").unwrap();
        let file = path.to_str().unwrap();
        for flag in ["--hostfile", "--machinefile", "-f"] {
            let o = run(&["-n", "3", flag, file, "p"]);
            assert_eq!((o.hosts.len(), o.map_by), (2, MapBy::Slot), "{flag}");
        }
        assert_eq!(run(&["-n", "3", "-f", file, "--map-by", "node", "p"]).map_by, MapBy::Node);
        // The later of --host and --hostfile wins.
        let o = run(&["-n", "1", "--hostfile", file, "-H", "c", "p"]);
        assert_eq!((o.hosts.len(), o.map_by), (1, MapBy::Node));
        assert_eq!(run(&["-n", "1", "-H", "c", "--hostfile", file, "p"]).hosts.len(), 2);
        let _ = std::fs::remove_file(&path);
        assert!(matches!(parse(&["-n", "1", "-f", file, "p"]), Err(UsageError::Hostfile { .. })));
    }

    #[test]
    fn faults_keep_command_line_order() {
        let o = run(&["-n", "2", "--cont", "1@3s", "--kill=0@1s", "--stop", "1@2s", "--kill", "1@4s", "p"]);
        let got: Vec<(Fault, u32)> = o.kills.iter().map(|k| (k.fault, k.rank)).collect();
        assert_eq!(got, [(Fault::Cont, 1), (Fault::Kill, 0), (Fault::Stop, 1), (Fault::Kill, 1)]);
    }

    #[test]
    fn info_man_and_values_that_are_not_unicode() {
        use std::os::unix::ffi::OsStringExt;
        assert_eq!(parse(&["--info"]), Ok(Invocation::Info { markdown: false }));
        assert_eq!(parse(&["--info=text"]), Ok(Invocation::Info { markdown: false }));
        assert_eq!(parse(&["-n", "2", "--info=markdown"]), Ok(Invocation::Info { markdown: true }));
        assert!(matches!(parse(&["--info=html"]), Err(UsageError::BadInfo { .. })));
        assert_eq!(parse(&["--generate-man"]), Ok(Invocation::Man));
        // A program whose name is not UTF-8 runs as given; an option's value must be.
        let bytes = OsString::from_vec(vec![b'p', 0xff]);
        match parse_args([OsString::from("-n"), "1".into(), bytes.clone()]) {
            Ok(Invocation::Run(o)) => assert_eq!(o.program, bytes),
            other => panic!("{other:?}"),
        }
        let bad = parse_args([OsString::from("-n"), "1".into(), "--outcome-file".into(), bytes, "p".into()]);
        assert!(matches!(&bad, Err(UsageError::NotUnicode { option }) if option == "--outcome-file"), "{bad:?}");
    }

    #[test]
    fn help_lists_every_option_np_and_the_default_exit_status() {
        let h = super::help();
        assert!(h.starts_with("usage: rtrun -n N [options] [--] PROGRAM [ARGS...]\n"), "{h}");
        assert!(h.contains("-n, --np <N>") && h.contains("also -np N"), "{h}");
        assert!(h.contains("r7 (the default: a job that ran through failures exits with"), "{h}");
        assert!(h.contains("Exit status:") && h.contains("Environment:") && h.contains("Examples:"), "{h}");
        for a in args::command().get_arguments().filter(|a| !a.is_hide_set()) {
            let long = a.get_long().map(|l| format!("--{l}")).unwrap_or_default();
            assert!(h.contains(&long), "{long} not in --help");
        }
        assert!(!h.contains("--generate-man"), "hidden");
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
            (&["-n", "2", "--kill", "18@1s", "p"], |e| matches!(e, E::KillRankOutOfRange { rank: 18, size: 18 })),
            (&["-n", "2", "--universe", "3", "--kill", "3@1s", "p"], |e| {
                matches!(e, E::KillRankOutOfRange { rank: 3, size: 3 })
            }),
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
