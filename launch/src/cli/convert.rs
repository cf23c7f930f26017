//! From clap's [`Args`] to an [`Invocation`]: every value checked, with [`UsageError`]'s
//! messages ([`invocation`]), and clap's own syntax errors turned into [`UsageError`]s
//! ([`usage_error`]), so that `rtrun` reports both the same way (exit code 2).

use std::ffi::OsString;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::ArgMatches;

use super::args::{Args, FAULT_IDS};
use super::{
    parse_duration, Bind, DurationError, Fault, Invocation, KillSpec, Options, OutputMode, TransportChoice, UsageError,
    INITIAL_ERRHANDLERS, MAX_RANKS, PROVIDERS,
};
use crate::hosts::{self, Agent, MapBy};

/// Checks the values of a parsed command line and builds what it asks for. `matches` is
/// what `args` came from (it knows where each `--kill`, `--stop` and `--cont` stood, so
/// the faults keep their command-line order).
///
/// `--help`, `--version`, `--info` and `--generate-man` win over everything else, as
/// they did when they stopped the parsing where they stood.
///
/// # Errors
/// [`UsageError`] for a malformed value or a missing `-n` or program.
pub(crate) fn invocation(a: Args, matches: &ArgMatches) -> Result<Invocation, UsageError> {
    if a.help {
        return Ok(Invocation::Help);
    }
    if a.version {
        return Ok(Invocation::Version);
    }
    if a.generate_man {
        return Ok(Invocation::Man);
    }
    if let Some(v) = a.info {
        return match v.as_str() {
            "text" => Ok(Invocation::Info { markdown: false }),
            "markdown" => Ok(Invocation::Info { markdown: true }),
            _ => Err(UsageError::BadInfo { value: v }),
        };
    }

    let universe = a.universe.map(|v| ranks(&v)).transpose()?;
    let ranks = a.np.map(|v| ranks(&v)).transpose()?;
    let env = a.env.iter().map(|v| env_var(v)).collect::<Result<Vec<_>, _>>()?;
    let bind = match a.bind_to {
        None => Bind::default(),
        Some(v) => match v.as_str() {
            "core" => Bind::Core,
            "hwthread" => Bind::HwThread,
            "none" => Bind::None,
            "numa" => Bind::Numa,
            _ => return Err(UsageError::BadBind { value: v }),
        },
    };
    let timeout = a.timeout.map(|v| duration("--timeout", v)).transpose()?;
    let first_nonzero = match a.exit_status.as_deref() {
        None | Some("r7") => false,
        Some("first-nonzero") => true,
        Some(v) => return Err(UsageError::BadExitStatus { value: v.to_owned() }),
    };
    let initial_errhandler = match a.initial_errhandler {
        None => None,
        Some(v) => {
            let name = v.trim().to_ascii_lowercase();
            if !INITIAL_ERRHANDLERS.contains(&name.as_str()) {
                return Err(UsageError::BadErrhandler { value: v });
            }
            Some(name)
        }
    };
    let output = match a.output {
        None => OutputMode::default(),
        Some(v) => match v.as_str() {
            "pty" => OutputMode::Pty,
            "pipe" => OutputMode::Pipe,
            _ => return Err(UsageError::BadOutput { value: v }),
        },
    };
    let kills = faults(matches)?;
    let ft_period = a.ft_period.map(|v| nonzero_duration("--ft-period", v)).transpose()?;
    let ft_timeout = a.ft_timeout.map(|v| nonzero_duration("--ft-timeout", v)).transpose()?;
    let transport = match a.transport {
        None => None,
        Some(v) => Some(match v.as_str() {
            "auto" => TransportChoice::Auto,
            "shm" => TransportChoice::Shm,
            "fabric" => TransportChoice::Fabric,
            _ => return Err(UsageError::BadTransport { value: v }),
        }),
    };
    if let Some(v) = a.provider.as_deref().filter(|v| !PROVIDERS.contains(v)) {
        return Err(UsageError::BadProvider { value: v.to_owned() });
    }

    // --host and --hostfile override each other (clap keeps the later one).
    let mut slots_given = false;
    let host_list = if let Some(v) = &a.host {
        hosts::parse_hosts(v).map_err(UsageError::BadHost)?
    } else if let Some(path) = &a.hostfile {
        let bad = |reason: String| UsageError::Hostfile { path: path.clone(), reason };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let list = hosts::parse_hostfile(&text).map_err(|e| bad(e.to_string()))?;
        slots_given = list.iter().any(|h| h.slots.is_some());
        list
    } else {
        Vec::new()
    };
    let map_by = match a.map_by {
        // A hostfile's slot counts mean filling hosts by slot unless --map-by says
        // otherwise (as Open MPI and MPICH do).
        None if slots_given => MapBy::Slot,
        None => MapBy::default(),
        Some(v) => match v.as_str() {
            "node" => MapBy::Node,
            "slot" => MapBy::Slot,
            _ => return Err(UsageError::BadMapBy { value: v }),
        },
    };
    let agent = a.launch_agent.map(|v| Agent::parse(&v).map_err(UsageError::BadAgent)).transpose()?;
    let kv_addr = match a.kv_addr {
        None => None,
        Some(v) => match v.trim().parse::<IpAddr>() {
            Ok(ip) if hosts::kv_ip_allowed(ip) => Some(ip),
            _ => return Err(UsageError::BadKvAddr { value: v }),
        },
    };

    let ranks = ranks.ok_or(UsageError::MissingRanks)?;
    let mut command = a.command.into_iter();
    let program = command.next().filter(|p| !p.is_empty()).ok_or(UsageError::MissingProgram)?;
    // Spawned children are universe ranks N, N+1, ...: their kills wait for them.
    let universe = universe.map(|u| u.max(ranks));
    let bound = universe.unwrap_or_else(|| crate::cli::default_universe(ranks));
    if let Some(k) = kills.iter().find(|k| k.rank >= bound) {
        return Err(UsageError::KillRankOutOfRange { rank: k.rank, size: bound });
    }
    if agent.is_some() && host_list.is_empty() {
        return Err(UsageError::AgentWithoutHosts);
    }
    if agent.is_some() && kv_addr.is_none() {
        return Err(UsageError::KvAddrRequired);
    }
    // Through a launch agent (a remote shell may read them) -x values must need no quoting.
    if let (Some(_), Some((k, v))) = (&agent, env.iter().find(|(k, v)| !hosts::shell_safe(k) || !hosts::shell_safe(v)))
    {
        return Err(UsageError::EnvNeedsQuoting { value: format!("{k}={v}") });
    }
    Ok(Invocation::Run(Options {
        ranks,
        bind,
        timeout,
        universe,
        tag_output: a.tag_output,
        quiet: a.quiet,
        outcome_file: a.outcome_file.map(PathBuf::from),
        output,
        initial_errhandler,
        kills,
        transport,
        provider: a.provider,
        ft_period,
        ft_timeout,
        no_ft: a.no_ft,
        hosts: host_list,
        map_by,
        agent,
        kv_addr,
        first_nonzero,
        report_bindings: a.report_bindings,
        output_dir: a.output_filename.map(PathBuf::from),
        env,
        program,
        args: command.collect(),
    }))
}

/// `-n`: an integer in `1..=MAX_RANKS`.
fn ranks(v: &str) -> Result<u32, UsageError> {
    match v.trim().parse::<u32>() {
        Ok(n) if (1..=MAX_RANKS).contains(&n) => Ok(n),
        _ => Err(UsageError::BadRanks { value: v.to_owned() }),
    }
}

/// `-x VAR=VALUE`, or `-x VAR` for `rtrun`'s own value of `VAR` (Open MPI's).
fn env_var(v: &str) -> Result<(String, String), UsageError> {
    let bad = || UsageError::BadEnv { value: v.to_owned() };
    let (k, val) = match v.split_once('=') {
        Some((k, val)) => (k.to_owned(), val.to_owned()),
        // An unset variable is an error.
        None => (v.to_owned(), std::env::var(v).map_err(|_| bad())?),
    };
    if k.is_empty() || k.contains('\0') || val.contains('\0') {
        return Err(bad());
    }
    Ok((k, val))
}

fn duration(option: &'static str, v: String) -> Result<Duration, UsageError> {
    parse_duration(&v).map_err(|reason| UsageError::BadDuration { option, value: v, reason })
}

fn nonzero_duration(option: &'static str, v: String) -> Result<Duration, UsageError> {
    match duration(option, v.clone())? {
        d if d.is_zero() => Err(UsageError::BadDuration { option, value: v, reason: DurationError::BadNumber }),
        d => Ok(d),
    }
}

/// Every `--kill`, `--stop` and `--cont RANK@DURATION`, in command-line order.
fn faults(matches: &ArgMatches) -> Result<Vec<KillSpec>, UsageError> {
    let mut all = Vec::new();
    for (id, fault) in FAULT_IDS.into_iter().zip([Fault::Kill, Fault::Stop, Fault::Cont]) {
        let (Some(values), Some(at)) = (matches.get_many::<String>(id), matches.indices_of(id)) else {
            continue;
        };
        for (index, v) in at.zip(values) {
            all.push((index, fault_spec(fault, v)?));
        }
    }
    all.sort_by_key(|(index, _)| *index);
    Ok(all.into_iter().map(|(_, k)| k).collect())
}

fn fault_spec(fault: Fault, v: &str) -> Result<KillSpec, UsageError> {
    let option = match fault {
        Fault::Kill => "--kill",
        Fault::Stop => "--stop",
        Fault::Cont => "--cont",
    };
    let bad = || UsageError::BadKill { value: v.to_owned() };
    let (r, d) = v.split_once('@').ok_or_else(bad)?;
    let rank = r.trim().parse::<u32>().map_err(|_| bad())?;
    let after = parse_duration(d).map_err(|reason| UsageError::BadDuration { option, value: v.to_owned(), reason })?;
    Ok(KillSpec { rank, after, fault })
}

/// clap's error for a command line it could not split, as a [`UsageError`]. `argv` is
/// what clap was given (for the option the user wrote, where clap names it otherwise).
pub(crate) fn usage_error(e: &clap::Error, argv: &[OsString]) -> UsageError {
    let context = |kind| match e.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        Some(ContextValue::Strings(v)) => v.first().cloned(),
        _ => None,
    };
    // clap names an option by its long name and value (`--np <N>`).
    let named = || context(ContextKind::InvalidArg).map(|a| a.split(' ').next().unwrap_or_default().to_owned());
    match e.kind() {
        // `--frobnicate`.
        ErrorKind::UnknownArgument => {
            UsageError::UnknownOption { option: context(ContextKind::InvalidArg).unwrap_or_default() }
        }
        // `--tag-output=yes`: a flag given a value.
        ErrorKind::TooManyValues | ErrorKind::NoEquals => {
            UsageError::UnknownOption { option: written_with_value(argv, named()) }
        }
        // A value is missing only at the end (an option takes the next argument, whatever
        // it is): the last word is the option as the user wrote it (`-n`, `-np`).
        ErrorKind::InvalidValue | ErrorKind::TooFewValues | ErrorKind::WrongNumberOfValues => {
            let last = argv.last().and_then(|a| a.to_str()).filter(|a| a.starts_with('-')).map(str::to_owned);
            UsageError::MissingValue { option: last.or_else(named).unwrap_or_default() }
        }
        ErrorKind::InvalidUtf8 => UsageError::NotUnicode { option: not_unicode_option(argv) },
        _ => UsageError::Syntax { message: first_line(&e.to_string()) },
    }
}

/// The argument the user wrote for the option clap names `named` (`--tag-output=yes` for
/// `--tag-output`), else clap's name.
fn written_with_value(argv: &[OsString], named: Option<String>) -> String {
    let name = named.unwrap_or_default();
    argv.iter()
        .filter_map(|a| a.to_str())
        .find(|a| !name.is_empty() && a.starts_with(name.as_str()) && a[name.len()..].starts_with('='))
        .map_or(name.clone(), str::to_owned)
}

/// The option whose value is not UTF-8 (clap does not say which): the first word that is
/// not, as `--opt=VALUE`, or the option before it.
fn not_unicode_option(argv: &[OsString]) -> String {
    let Some(i) = argv.iter().position(|a| a.to_str().is_none()) else {
        return String::new();
    };
    let inline = argv[i].to_string_lossy().split_once('=').map(|(name, _)| name.to_owned());
    let before = || i.checked_sub(1).and_then(|j| argv[j].to_str()).map(str::to_owned);
    inline.filter(|name| name.starts_with('-')).or_else(before).unwrap_or_default()
}

/// clap's message, first line, without its `error: ` prefix.
fn first_line(message: &str) -> String {
    let line = message.lines().next().unwrap_or_default();
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}
