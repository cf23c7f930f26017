//! `rtrun`'s command line as a clap (derive) definition: the one source of the option
//! syntax, of `--help` and of the man page (`super::man`).
//!
//! Parts:
//! - [`Args`]: every option, with its help text. Values stay strings here: clap only
//!   splits the command line; `super::convert` checks each value and builds the
//!   [`super::Invocation`], with `super::UsageError`'s messages.
//! - [`normalize`]: the one spelling clap cannot take as it is, mpirun's `-np N`.
//! - [`command`]: the `clap::Command` with the help text's extra sections attached.

use std::ffi::OsString;

use clap::{ArgAction, CommandFactory};

/// The usage line of `--help` and of the man page's synopsis.
pub(crate) const USAGE: &str = "rtrun -n N [options] [--] PROGRAM [ARGS...]";

/// One line on what `rtrun` is (the man page's NAME).
pub(crate) const ABOUT: &str = "run the ranks of a runthrough (MPI) job";

/// The description (`--help` above the options; the man page's DESCRIPTION).
pub(crate) const LONG_ABOUT: &str = "\
Runs N ranks of PROGRAM on this host (or on --host hosts) with the runthrough
bootstrap service. Options come before PROGRAM: everything after it is PROGRAM's
arguments, passed on untouched even where they look like rtrun's options; `--`
also ends the options. mpiexec is rtrun under MPI's standard name: the same
program, the same options.";

/// `rtrun`'s options, as clap parses them (see the module doc). Every value-taking
/// option takes the next argument whatever it looks like (`-n -3` is a bad number of
/// ranks, not a missing value), and a repeated option's last value wins, except where
/// an option is said to be repeatable.
#[derive(Debug, clap::Parser)]
#[command(
    name = "rtrun",
    version,
    about = ABOUT,
    long_about = LONG_ABOUT,
    override_usage = USAGE,
    help_template = "usage: {usage}\n\n{about-with-newline}\n{all-args}{after-help}",
    disable_help_flag = true,
    disable_version_flag = true,
    args_override_self = true
)]
pub(crate) struct Args {
    /// number of ranks (1..=4096); also -np N, mpirun's spelling
    #[arg(short = 'n', long = "np", value_name = "N", allow_hyphen_values = true)]
    pub(crate) np: Option<String>,

    /// set VAR in every rank's environment (without =VALUE: rtrun's own value of VAR);
    /// repeatable
    #[arg(
        short = 'x',
        long = "env",
        value_name = "VAR[=VALUE]",
        allow_hyphen_values = true,
        action = ArgAction::Append,
        verbatim_doc_comment
    )]
    pub(crate) env: Vec<String>,

    /// binding: a physical core per rank (all its hardware threads), a hardware thread
    /// per rank, a NUMA node, or none (default); passed to the ranks as RT_BIND
    #[arg(long, value_name = "core|hwthread|numa|none", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) bind_to: Option<String>,

    /// MPI_UNIVERSE_SIZE, and the most processes the job may hold at once, spawned ones
    /// included (default: no limit; MPI_UNIVERSE_SIZE twice the ranks, at least 16 more)
    #[arg(long, value_name = "N", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) universe: Option<String>,

    /// SIGKILL all ranks after DURATION, exit 124
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) timeout: Option<String>,

    /// rtrun's exit code: r7 (the default: a job that ran through failures exits with
    /// the code of its lowest finalized rank, so survivors that finished their work
    /// report success; else the abort code, else 128+signal), or first-nonzero
    /// (mpirun's: the first rank to end non-zero, 128+signal for a signal)
    #[arg(long, value_name = "r7|first-nonzero", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) exit_status: Option<String>,

    /// the error handler MPI_COMM_WORLD, MPI_COMM_SELF and sessions start with
    /// (MPI-4.1 11.2.2): mpi_errors_are_fatal (default), mpi_errors_abort or
    /// mpi_errors_return (sets RT_INITIAL_ERRHANDLER; MPI_INFO_ENV's
    /// mpi_initial_errhandler)
    #[arg(long, value_name = "NAME", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) initial_errhandler: Option<String>,

    /// accepted (Open MPI's flag): ranks may always outnumber cores
    #[arg(long)]
    pub(crate) oversubscribe: bool,

    /// each rank prints its binding and the CPUs it may run on (stderr, at start-up)
    #[arg(long)]
    pub(crate) report_bindings: bool,

    /// prefix every output line with [RANK]
    #[arg(long)]
    pub(crate) tag_output: bool,

    /// no end-of-job line for ranks that ended abnormally
    #[arg(short = 'q', long)]
    pub(crate) quiet: bool,

    /// write one line per rank to PATH after the job: rank, host, exit code or signal,
    /// phase, cause (machine-readable)
    #[arg(long, value_name = "PATH", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) outcome_file: Option<String>,

    /// the ranks' standard output: a pseudo-terminal (default, as Open MPI's mpirun:
    /// C programs line-buffer it, so a line printed just before a crash is not lost)
    /// or a pipe
    #[arg(long, value_name = "pty|pipe", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) output: Option<String>,

    /// also write each rank's output to DIR/1/rank.R/stdout and stderr (Open MPI's
    /// layout)
    #[arg(long, value_name = "DIR", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) output_filename: Option<String>,

    /// SIGKILL RANK DURATION after start (fault injection); repeatable
    #[arg(long, value_name = "RANK@DURATION", allow_hyphen_values = true, action = ArgAction::Append)]
    pub(crate) kill: Vec<String>,

    /// SIGSTOP RANK (it hangs); repeatable
    #[arg(long, value_name = "RANK@DURATION", allow_hyphen_values = true, action = ArgAction::Append)]
    pub(crate) stop: Vec<String>,

    /// SIGCONT RANK (a stopped rank resumes); repeatable
    #[arg(long, value_name = "RANK@DURATION", allow_hyphen_values = true, action = ArgAction::Append)]
    pub(crate) cont: Vec<String>,

    /// failure-detector heartbeat period (default 10ms)
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) ft_period: Option<String>,

    /// failure-detector timeout (default 100ms, x ranks/cores when oversubscribed)
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub(crate) ft_timeout: Option<String>,

    /// no failure detector (overhead measurements)
    #[arg(long)]
    pub(crate) no_ft: bool,

    /// auto: shared memory on this host, libfabric to others; shm: shared memory only;
    /// fabric: libfabric to every rank (sets RT_TRANSPORT)
    #[arg(long, value_name = "auto|shm|fabric", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) transport: Option<String>,

    /// libfabric provider (sets RT_PROVIDER)
    #[arg(long, value_name = "auto|tcp|sockets|verbs|cxi", allow_hyphen_values = true)]
    pub(crate) provider: Option<String>,

    /// run on these hosts; each rank gets RT_NODE=NAME, and with =IP its fabric
    /// endpoint binds to IP (RT_FABRIC_ADDR); also --hosts
    #[arg(
        short = 'H',
        long,
        alias = "hosts",
        value_name = "NAME[=IP],...",
        allow_hyphen_values = true,
        overrides_with = "hostfile",
        verbatim_doc_comment
    )]
    pub(crate) host: Option<String>,

    /// the hosts from FILE, one a line: NAME[=IP] [slots=N] (Open MPI) or NAME:N
    /// (MPICH); with slots, ranks fill each host's slots in turn unless --map-by is
    /// given; also --machinefile
    #[arg(
        short = 'f',
        long,
        alias = "machinefile",
        value_name = "FILE",
        allow_hyphen_values = true,
        overrides_with = "host",
        verbatim_doc_comment
    )]
    pub(crate) hostfile: Option<String>,

    /// node: round-robin over hosts (default); slot: fill each host with its slots, or
    /// ceil(N/hosts) ranks without them
    #[arg(long, value_name = "node|slot", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) map_by: Option<String>,

    /// start each rank through TEMPLATE with {host} replaced, e.g.
    /// 'ip netns exec {host}' or 'ssh {host}' (needs --host)
    #[arg(long, value_name = "TEMPLATE", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) launch_agent: Option<String>,

    /// address of the key-value service (loopback or private; default 127.0.0.1;
    /// required with --launch-agent)
    #[arg(long, value_name = "IP", allow_hyphen_values = true, verbatim_doc_comment)]
    pub(crate) kv_addr: Option<String>,

    /// list every environment variable runthrough reads, with its default and
    /// meaning, and exit (--info=markdown: the README's table)
    #[arg(
        long,
        value_name = "markdown",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "text",
        verbatim_doc_comment
    )]
    pub(crate) info: Option<String>,

    /// print rtrun's version and exit
    #[arg(short = 'V', long)]
    pub(crate) version: bool,

    /// print this help and exit
    #[arg(short = 'h', long)]
    pub(crate) help: bool,

    /// write the man page, rtrun.1 (roff), to standard output and exit (used by
    /// scripts/install.sh)
    #[arg(long, hide = true)]
    pub(crate) generate_man: bool,

    /// the program each rank runs (a path, or looked up in PATH) and its arguments (in
    /// the usage line and the description, not listed with the options)
    #[arg(value_name = "PROGRAM", num_args = 1.., trailing_var_arg = true, hide = true)]
    pub(crate) command: Vec<OsString>,
}

/// The ids (clap's names) of the fault-injection options, in [`Args`].
pub(crate) const FAULT_IDS: [&str; 3] = ["kill", "stop", "cont"];

/// The `clap::Command` of [`Args`], with the sections after the options (durations,
/// signals, environment, exit status, examples) as its long after-help.
pub(crate) fn command() -> clap::Command {
    Args::command().after_long_help(super::man::help_text())
}

/// Rewrites the spellings clap cannot parse into ones it can, before it sees them.
///
/// Only mpirun's `-np` needs it: clap reads `-np` as `-n p`, so a lone `-np` becomes
/// `--np` (`-np 4`, as `mpirun -np 4`). Rewriting stops at the first argument that is
/// not an option or an option's value (the program) and at `--`, so the program's own
/// arguments are never touched. `-H host` and the other single-dash spellings are
/// ordinary short options.
pub(crate) fn normalize<I>(args: I) -> Vec<OsString>
where
    I: IntoIterator<Item = OsString>,
{
    let cmd = Args::command();
    let mut out = Vec::new();
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        let Some(s) = a.to_str() else {
            // Not UTF-8: not an option (they are ASCII), so the program.
            out.push(a);
            break;
        };
        if s == "-np" {
            out.push("--np".into());
            out.extend(args.next());
            continue;
        }
        let is_option = s.starts_with('-') && s != "-";
        if s == "--" || !is_option {
            out.push(a);
            break;
        }
        let takes_value = !s.contains('=') && option_takes_value(&cmd, s);
        out.push(a);
        if takes_value {
            out.extend(args.next());
        }
    }
    out.extend(args);
    out
}

/// Whether the option spelled `word` (`--long`, or `-s` with no value attached) takes
/// the next argument as its value.
fn option_takes_value(cmd: &clap::Command, word: &str) -> bool {
    let takes =
        |a: &clap::Arg| a.get_action().takes_values() && !matches!(a.get_num_args(), Some(n) if n.min_values() == 0);
    if let Some(long) = word.strip_prefix("--") {
        let named =
            |a: &&clap::Arg| a.get_long() == Some(long) || a.get_all_aliases().is_some_and(|v| v.contains(&long));
        return cmd.get_arguments().find(named).is_some_and(takes);
    }
    // `-x`, `-qn`: the first letter that takes a value takes the rest of the word, or
    // the next argument when nothing follows it.
    let mut letters = word[1..].chars();
    while let Some(c) = letters.next() {
        if cmd.get_arguments().find(|a| a.get_short() == Some(c)).is_some_and(takes) {
            return letters.as_str().is_empty();
        }
    }
    false
}
