//! What the fault-tolerance benchmarks `ft_propagate`, `ft_revoke`, `ft_shrink` and
//! `ft_agree` share (driven by `bench/ft_propagate.sh`, side by side with the Open MPI
//! ULFM programs of the same names in `bench/c/`): options, the driver and the output
//! format.
//!
//! Output: rank 0 prints comment lines starting with `#`, then one sample per line,
//! `<index> <microseconds>` (three decimals), as the C programs do; the script
//! computes min/median/p90/max over the samples.

use std::io::Write;
use std::process::ExitCode;

use runthrough::{Comm, ErrorMode};

use crate::UsageError;

/// Options of the fault-tolerance benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleOptions {
    /// `-n COUNT`: samples reported (repetitions or batches).
    pub count: usize,
    /// `-x WARMUP`: unreported samples (or calls) first.
    pub warmup: usize,
    /// `-i ITERS`: calls per sample (`ft_agree` only).
    pub iters: usize,
    /// `--bare` (`ft_propagate` only): accepted for the C program's sake; runthrough's
    /// `signal_error` always returns the (rank, code) list.
    pub bare: bool,
}

/// What the arguments ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleCommand {
    /// Run with these options.
    Run(SampleOptions),
    /// Print the usage.
    Help,
}

/// Parses `-n COUNT`, `-x WARMUP`, `-i ITERS` (and `--bare` when `allow_bare`) after
/// the program name, starting from `defaults`.
///
/// # Errors
/// A [`UsageError`] for unknown options, malformed values or a zero count or ITERS.
pub fn parse_sample_args<I, S>(defaults: SampleOptions, allow_bare: bool, args: I) -> Result<SampleCommand, UsageError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut o = defaults;
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_ref();
        match arg {
            "-h" | "--help" => return Ok(SampleCommand::Help),
            "--bare" if allow_bare => o.bare = true,
            "-n" | "-x" | "-i" => {
                let value = args.next().ok_or_else(|| UsageError(format!("option {arg} needs a value")))?;
                let value = value.as_ref();
                let v = value
                    .parse::<usize>()
                    .map_err(|_| UsageError(format!("option {arg}: invalid number '{value}'")))?;
                match arg {
                    "-n" => o.count = v,
                    "-x" => o.warmup = v,
                    _ => o.iters = v,
                }
            }
            _ => return Err(UsageError(format!("unknown argument '{arg}'"))),
        }
    }
    if o.count == 0 || o.iters == 0 {
        return Err(UsageError("-n and -i must be at least 1".into()));
    }
    Ok(SampleCommand::Run(o))
}

/// The sample lines `<index> <us>` of `us`, after `header` (comment lines, each
/// ending in a newline).
pub fn format_samples(header: &str, us: &[f64]) -> String {
    let mut s = header.to_owned();
    for (i, v) in us.iter().enumerate() {
        s.push_str(&format!("{i} {v:.3}\n"));
    }
    s
}

/// Prints [`format_samples`] on stdout.
///
/// # Errors
/// The write error, as text.
pub fn print_samples(header: &str, us: &[f64]) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(format_samples(header, us).as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing output: {e}"))
}

/// The driver of one benchmark program `prog`: parses the arguments (`usage` on `-h` or
/// an error), initialises runthrough, sets [`ErrorMode::ErrorsReturn`] on the world,
/// runs `body` and finalises.
pub fn run_ft(
    prog: &str,
    usage: &str,
    defaults: SampleOptions,
    allow_bare: bool,
    body: impl FnOnce(&Comm, &SampleOptions) -> Result<(), String>,
) -> ExitCode {
    let opts = match parse_sample_args(defaults, allow_bare, std::env::args().skip(1)) {
        Ok(SampleCommand::Run(o)) => o,
        Ok(SampleCommand::Help) => {
            print!("{usage}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("{prog}: {e}\n{usage}");
            return ExitCode::from(2);
        }
    };
    let rt = match runthrough::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{prog}: runthrough init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let status = match body(&world, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{prog}: rank {}: {e}", world.rank());
            ExitCode::FAILURE
        }
    };
    drop(world);
    if let Err(e) = rt.finalize() {
        eprintln!("{prog}: runthrough finalize failed: {e}");
        return ExitCode::FAILURE;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: SampleOptions = SampleOptions { count: 5, warmup: 1, iters: 2, bare: false };

    #[test]
    fn parses_options() {
        let got = parse_sample_args(D, true, ["-n", "7", "-x", "0", "-i", "3", "--bare"]);
        assert_eq!(got.ok(), Some(SampleCommand::Run(SampleOptions { count: 7, warmup: 0, iters: 3, bare: true })));
        assert_eq!(parse_sample_args(D, false, ["-h"]).ok(), Some(SampleCommand::Help));
        assert!(parse_sample_args(D, false, ["--bare"]).is_err());
        assert!(parse_sample_args(D, false, ["-n", "0"]).is_err());
        assert!(parse_sample_args(D, false, ["-n"]).is_err());
    }

    #[test]
    fn formats_samples() {
        assert_eq!(format_samples("# h\n", &[1.0, 2.5]), "# h\n0 1.000\n1 2.500\n");
    }
}
