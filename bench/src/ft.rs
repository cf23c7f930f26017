//! The failure-detection benchmark `ft_detect`: options, the detector settings a
//! job runs with, the statistics and the output format (the program is
//! `src/bin/ft_detect.rs`, the driver that runs it over configurations
//! `bench/ft_detect.sh`).
//!
//! One job measures one failure: the victim records the time (`CLOCK_REALTIME`,
//! shared by every rank of one host), sends it to rank 0 and then SIGKILLs (`kill`
//! mode) or SIGSTOPs (`stop` mode) itself; every survivor, blocked in a receive from
//! the victim, records when that receive fails with `RankFailStop`. A killed rank
//! cannot be reused, so repetitions are separate jobs.

use std::fmt;
use std::time::Duration;

use crate::UsageError;

/// How the victim fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailMode {
    /// SIGKILL: the process exits; the launcher sees it and so does the detector.
    Kill,
    /// SIGSTOP: the process hangs; only the in-band ring detector can tell.
    Stop,
}

impl FailMode {
    /// `kill` or `stop`.
    pub fn name(self) -> &'static str {
        match self {
            FailMode::Kill => "kill",
            FailMode::Stop => "stop",
        }
    }

    /// The signal the victim sends itself (for `kill -SIG`).
    pub fn signal(self) -> &'static str {
        match self {
            FailMode::Kill => "KILL",
            FailMode::Stop => "STOP",
        }
    }
}

impl fmt::Display for FailMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Options of `ft_detect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DetectOptions {
    /// `--mode kill|stop` (default kill).
    pub mode: FailMode,
    /// `-v RANK`: the victim (default: the last rank); never rank 0, which reports.
    pub victim: Option<usize>,
    /// `-w MS`: how long the victim waits after the start barrier before failing, so
    /// that every survivor is blocked in its receive (default 50).
    pub settle_ms: u64,
}

impl Default for DetectOptions {
    fn default() -> Self {
        DetectOptions { mode: FailMode::Kill, victim: None, settle_ms: 50 }
    }
}

impl DetectOptions {
    /// The victim in a job of `size` ranks.
    ///
    /// # Errors
    /// When the job has fewer than 2 ranks or the victim is 0 or not below `size`.
    pub fn victim_in(&self, size: usize) -> Result<usize, String> {
        if size < 2 {
            return Err(format!("ft_detect needs at least 2 ranks, the job has {size}"));
        }
        let v = self.victim.unwrap_or(size - 1);
        if v == 0 || v >= size {
            return Err(format!("victim {v} must be in 1..{size} (rank 0 reports)"));
        }
        Ok(v)
    }
}

/// The usage text of `ft_detect`.
pub fn detect_usage() -> String {
    "usage: rtrun -n N [--ft-period D] [--ft-timeout D] ft_detect [--mode kill|stop] [-v RANK] [-w MS] [-h]\n\
     \x20 --mode kill|stop  the victim SIGKILLs (default) or SIGSTOPs itself\n\
     \x20 -v RANK           the victim (default N-1; not 0)\n\
     \x20 -w MS             the victim waits MS ms after the start barrier (default 50)\n\
     \x20 -h                print this help\n\
     One failure per job: run repetitions as separate jobs (bench/ft_detect.sh).\n"
        .to_owned()
}

/// What `ft_detect`'s command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectCommand {
    /// Measure with these options.
    Run(DetectOptions),
    /// Print the usage.
    Help,
}

/// Parses `ft_detect`'s arguments (after the program name).
///
/// # Errors
/// A [`UsageError`] for unknown options or malformed values.
pub fn parse_detect_args<I, S>(args: I) -> Result<DetectCommand, UsageError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut o = DetectOptions::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_ref().to_owned();
        if arg == "-h" || arg == "--help" {
            return Ok(DetectCommand::Help);
        }
        let (flag, attached) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_owned(), Some(v.to_owned())),
            _ => (arg.clone(), None),
        };
        if !matches!(flag.as_str(), "--mode" | "-v" | "-w") {
            return Err(UsageError(format!("unknown argument '{arg}'")));
        }
        let value = match attached.or_else(|| args.next().map(|v| v.as_ref().to_owned())) {
            Some(v) => v,
            None => return Err(UsageError(format!("option {flag} needs a value"))),
        };
        let number =
            || value.parse::<u64>().map_err(|_| UsageError(format!("option {flag}: invalid number '{value}'")));
        match flag.as_str() {
            "--mode" => {
                o.mode = match value.as_str() {
                    "kill" => FailMode::Kill,
                    "stop" => FailMode::Stop,
                    _ => return Err(UsageError(format!("option --mode: '{value}' is not kill or stop"))),
                }
            }
            "-v" => o.victim = Some(usize::try_from(number()?).map_err(|_| UsageError("option -v: too large".into()))?),
            _ => o.settle_ms = number()?,
        }
    }
    Ok(DetectCommand::Run(o))
}

/// The detector settings of this job as the runtime derives them (see
/// `ft_config` in runthrough's `src/runtime.rs`): `RT_FT_PERIOD_MS` and
/// `RT_FT_TIMEOUT_MS` as `rtrun --ft-period/--ft-timeout` set them, else the defaults,
/// the timeout multiplied by the oversubscription factor ⌈local ranks / cores⌉.
/// `None` when the detector is off (`RT_FT=0`, `rtrun --no-ft`).
///
/// `var` reads an environment variable; `cores` is the CPUs this process may use.
pub fn detector_settings(var: impl Fn(&str) -> Option<String>, cores: usize) -> Option<(Duration, Duration)> {
    if var("RT_FT").is_some_and(|v| v == "0") {
        return None;
    }
    let num = |name: &str| var(name).and_then(|v| v.trim().parse::<u64>().ok());
    let local = num("RT_LOCAL_SIZE").unwrap_or(1).max(1);
    let factor = local.div_ceil(cores.max(1) as u64).max(1);
    let period = num("RT_FT_PERIOD_MS").map_or(runthrough_ft::DEFAULT_HB_PERIOD, Duration::from_millis);
    let timeout = num("RT_FT_TIMEOUT_MS")
        .map_or(runthrough_ft::DEFAULT_HB_TIMEOUT * u32::try_from(factor).unwrap_or(u32::MAX), Duration::from_millis);
    Some((period, timeout))
}

/// Minimum, mean and maximum of `samples` (`None` when empty).
pub fn min_avg_max(samples: &[f64]) -> Option<(f64, f64, f64)> {
    if samples.is_empty() {
        return None;
    }
    let min = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let max = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((min, samples.iter().sum::<f64>() / samples.len() as f64, max))
}

/// The header of `ft_detect`'s table (two lines, each ending in a newline).
pub fn detect_header(mode: FailMode) -> String {
    format!(
        "# OSU MPI-style Failure Detection Test (runthrough), mode {mode}\n\
         # Ranks  Period(ms)  Timeout(ms)  Detect-min(ms)  Detect-avg(ms)  Detect-max(ms)\n"
    )
}

/// One row of the table: ranks, the detector's period and timeout, and the detection
/// latency statistics in milliseconds, aligned under [`detect_header`].
pub fn detect_row(ranks: usize, period: Duration, timeout: Duration, min: f64, avg: f64, max: f64) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    format!("{ranks:<7}{:>12.2}{:>13.2}{min:>16.2}{avg:>16.2}{max:>16.2}\n", ms(period), ms(timeout))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(args: &[&str]) -> DetectOptions {
        match parse_detect_args(args) {
            Ok(DetectCommand::Run(o)) => o,
            other => panic!("expected options for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn parses_detect_options() {
        assert_eq!(opts(&[]), DetectOptions::default());
        let o = opts(&["--mode", "stop", "-v", "2", "-w", "10"]);
        assert_eq!(o, DetectOptions { mode: FailMode::Stop, victim: Some(2), settle_ms: 10 });
        assert_eq!(opts(&["--mode=kill"]).mode, FailMode::Kill);
        assert_eq!(parse_detect_args(["-w", "5", "-h"]), Ok(DetectCommand::Help));
        for bad in [&["--mode", "hang"][..], &["-v"], &["-v", "x"], &["-r", "3"], &["-w", "-1"], &["x"]] {
            assert!(parse_detect_args(bad).is_err(), "accepted {bad:?}");
        }
        assert!(detect_usage().contains("--mode kill|stop"));
    }

    #[test]
    fn victim_is_never_rank_zero() {
        let d = DetectOptions::default();
        assert_eq!(d.victim_in(4), Ok(3));
        assert!(d.victim_in(1).is_err());
        let v = |r| DetectOptions { victim: Some(r), ..d };
        assert_eq!(v(1).victim_in(4), Ok(1));
        assert!(v(0).victim_in(4).is_err());
        assert!(v(4).victim_in(4).is_err());
    }

    #[test]
    fn detector_settings_follow_the_runtime() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned())
        };
        let ms = Duration::from_millis;
        assert_eq!(detector_settings(env(&[("RT_LOCAL_SIZE", "2")]), 2), Some((ms(10), ms(100))));
        assert_eq!(detector_settings(env(&[("RT_LOCAL_SIZE", "8")]), 2), Some((ms(10), ms(400))));
        assert_eq!(detector_settings(env(&[("RT_LOCAL_SIZE", "5")]), 2), Some((ms(10), ms(300))));
        let explicit = env(&[("RT_LOCAL_SIZE", "8"), ("RT_FT_TIMEOUT_MS", "500"), ("RT_FT_PERIOD_MS", "20")]);
        assert_eq!(detector_settings(explicit, 2), Some((ms(20), ms(500))));
        assert_eq!(detector_settings(env(&[("RT_FT", "0")]), 2), None);
    }

    #[test]
    fn stats_and_rows() {
        assert_eq!(min_avg_max(&[]), None);
        assert_eq!(min_avg_max(&[3.0, 1.0, 2.0]), Some((1.0, 2.0, 3.0)));
        let row = detect_row(8, Duration::from_millis(10), Duration::from_millis(400), 1.5, 2.25, 3.0);
        assert_eq!(row, "8             10.00       400.00            1.50            2.25            3.00\n");
        let header = detect_header(FailMode::Stop);
        assert!(header.ends_with("Detect-max(ms)\n") && header.contains("mode stop"));
        assert_eq!(row.split_whitespace().count(), 6);
    }
}
