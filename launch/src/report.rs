//! What `rtrun` says about each rank after the job: one stderr line per rank that ended
//! abnormally, and a machine-readable record per rank (`--outcome-file`).
//!
//! Parts: [`Phase`] (how far a rank got: the server learns it from the rank's
//! `Hello`, `Initialized`, `Finalizing` and `Finalized` requests), [`Cause`] (what the
//! launcher itself did to the rank: `--kill`/`--stop`, `--timeout`, an interrupt, an abort
//! request), [`RankReport`] (everything about one rank's end), [`signal_name`].
//!
//! A rank ended *abnormally* ([`RankReport::is_abnormal`]) if a signal killed it, if it
//! exited with a non-zero code (in any phase, after finalize included), if it was
//! aborted, or if it exited with code 0 after starting `init` without finalizing. A
//! program that never starts the runtime and exits 0 (`rtrun -n 2 hostname`) ended
//! normally. The job's exit code (R7, [`crate::outcome`]) does not depend on any of this.
//!
//! The record format, one line per rank, fields separated by one space, no field holding
//! a space (host names never do):
//!
//! ```text
//! rank=1 host=node7 end=exit:3 phase=running cause=none abnormal=1
//! rank=2 host=node7 end=signal:SIGKILL phase=running cause=injected abnormal=1
//! ```
//!
//! `end` is `exit:CODE` or `signal:NAME` (`signal:N` for a signal without a name here); `phase` one of [`Phase::as_str`]; `cause` one of
//! [`Cause::as_str`] (`abort:CODE` for an abort request).

use std::fmt;

use crate::outcome::{RankOutcome, RankStatus};

/// How far a rank got through the runtime's life cycle when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Phase {
    /// It never reached the launcher (no `init`, or died before connecting).
    #[default]
    BeforeInit,
    /// It connected to the launcher but `init` did not complete.
    Init,
    /// `init` completed; `finalize` had not begun.
    Running,
    /// `finalize` began but did not complete.
    Finalizing,
    /// `finalize` completed.
    Finalized,
}

impl Phase {
    /// The record spelling: `before-init`, `init`, `running`, `finalizing`, `finalized`.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::BeforeInit => "before-init",
            Phase::Init => "init",
            Phase::Running => "running",
            Phase::Finalizing => "finalizing",
            Phase::Finalized => "finalized",
        }
    }

    /// The phase of a record spelling.
    pub fn parse(s: &str) -> Option<Phase> {
        [Phase::BeforeInit, Phase::Init, Phase::Running, Phase::Finalizing, Phase::Finalized]
            .into_iter()
            .find(|p| p.as_str() == s)
    }

    /// The words of the stderr line: `before init`, `during init`, `after init, before
    /// finalize`, `during finalize`, `after finalize`.
    pub fn describe(self) -> &'static str {
        match self {
            Phase::BeforeInit => "before init",
            Phase::Init => "during init",
            Phase::Running => "after init, before finalize",
            Phase::Finalizing => "during finalize",
            Phase::Finalized => "after finalize",
        }
    }
}

/// What the launcher did to a rank, if anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Cause {
    /// Nothing: the rank ended by itself.
    #[default]
    None,
    /// `--kill` or `--stop` targeted it (fault injection).
    Injected,
    /// `--timeout` expired and the launcher killed it.
    Timeout,
    /// SIGINT/SIGTERM reached `rtrun`, which killed it.
    Interrupted,
    /// An abort request (R3) named it or came from it, with this code.
    Abort(i32),
    /// A spawned child killed because its spawn failed (R40: all children or none);
    /// not a failure of the job.
    Cancelled,
}

impl Cause {
    /// The record spelling: `none`, `injected`, `timeout`, `interrupted`, `abort:CODE`.
    pub fn as_str(self) -> String {
        match self {
            Cause::None => "none".into(),
            Cause::Injected => "injected".into(),
            Cause::Timeout => "timeout".into(),
            Cause::Interrupted => "interrupted".into(),
            Cause::Abort(c) => format!("abort:{c}"),
            Cause::Cancelled => "cancelled".into(),
        }
    }

    fn parse(s: &str) -> Option<Cause> {
        Some(match s {
            "none" => Cause::None,
            "injected" => Cause::Injected,
            "timeout" => Cause::Timeout,
            "interrupted" => Cause::Interrupted,
            "cancelled" => Cause::Cancelled,
            _ => Cause::Abort(s.strip_prefix("abort:")?.parse().ok()?),
        })
    }

    fn suffix(self) -> String {
        match self {
            Cause::None => String::new(),
            Cause::Injected => " (fault injected)".into(),
            Cause::Timeout => " (killed by rtrun: --timeout)".into(),
            Cause::Interrupted => " (killed by rtrun: interrupted)".into(),
            Cause::Abort(c) => format!(" (aborted, code {c})"),
            Cause::Cancelled => " (killed by rtrun: its spawn failed)".into(),
        }
    }
}

/// Everything `rtrun` reports about how one rank ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RankReport {
    /// The rank.
    pub rank: u32,
    /// The host it ran on (`RT_NODE`).
    pub host: String,
    /// How its process ended.
    pub status: RankStatus,
    /// How far it got.
    pub phase: Phase,
    /// What the launcher did to it.
    pub cause: Cause,
}

impl RankReport {
    /// Builds the report of `outcome` (the abort mark becomes [`Cause::Abort`] unless a
    /// launcher action is given).
    pub fn new(outcome: &RankOutcome, host: &str, phase: Phase, cause: Cause) -> RankReport {
        let cause = match (cause, outcome.abort) {
            (Cause::None, Some(m)) => Cause::Abort(m.code),
            (c, _) => c,
        };
        let phase = if outcome.finalized { Phase::Finalized } else { phase };
        RankReport { rank: outcome.rank, host: host.to_owned(), status: outcome.status, phase, cause }
    }

    /// Whether the rank ended abnormally (see the module doc).
    pub fn is_abnormal(&self) -> bool {
        match self.status {
            RankStatus::Signaled(_) => true,
            RankStatus::Exited(c) => {
                c != 0
                    || matches!(self.cause, Cause::Abort(_))
                    || !matches!(self.phase, Phase::BeforeInit | Phase::Finalized)
            }
        }
    }

    /// Whether the rank ended cleanly through the runtime: exit code 0 after finalize.
    pub fn is_clean(&self) -> bool {
        self.status == RankStatus::Exited(0) && self.phase == Phase::Finalized && !self.is_abnormal()
    }

    /// The stderr line (without newline), e.g. `rtrun: rank 1 on host n7: exit code 3,
    /// after init, before finalize`.
    pub fn line(&self) -> String {
        let end = match self.status {
            RankStatus::Exited(c) => format!("exit code {c}"),
            RankStatus::Signaled(s) => format!("killed by {}", signal_name(s)),
        };
        format!(
            "rtrun: rank {} on host {}: {end}, {}{}",
            self.rank,
            self.host,
            self.phase.describe(),
            self.cause.suffix()
        )
    }

    /// The machine-readable record (see the module doc), without newline.
    pub fn record(&self) -> String {
        let end = match self.status {
            RankStatus::Exited(c) => format!("exit:{c}"),
            RankStatus::Signaled(s) => match SIGNALS.iter().find(|(n, _)| *n == s) {
                Some((_, name)) => format!("signal:{name}"),
                None => format!("signal:{s}"),
            },
        };
        format!(
            "rank={} host={} end={end} phase={} cause={} abnormal={}",
            self.rank,
            self.host,
            self.phase.as_str(),
            self.cause.as_str(),
            u8::from(self.is_abnormal())
        )
    }

    /// Parses a [`RankReport::record`] line; `None` if it is malformed.
    pub fn parse(line: &str) -> Option<RankReport> {
        let mut rank = None;
        let mut host = None;
        let mut status = None;
        let mut phase = None;
        let mut cause = None;
        for field in line.split_whitespace() {
            let (k, v) = field.split_once('=')?;
            match k {
                "rank" => rank = v.parse().ok(),
                "host" => host = Some(v.to_owned()),
                "end" => {
                    status = match v.split_once(':')? {
                        ("exit", c) => Some(RankStatus::Exited(c.parse().ok()?)),
                        ("signal", s) => Some(RankStatus::Signaled(signal_number(s)?)),
                        _ => None,
                    }
                }
                "phase" => phase = Phase::parse(v),
                "cause" => cause = Cause::parse(v),
                "abnormal" => {}
                _ => return None,
            }
        }
        Some(RankReport { rank: rank?, host: host?, status: status?, phase: phase?, cause: cause? })
    }
}

impl fmt::Display for RankReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.record())
    }
}

/// Linux signal numbers 1..=31 and their names.
const SIGNALS: [(i32, &str); 31] = [
    (1, "SIGHUP"),
    (2, "SIGINT"),
    (3, "SIGQUIT"),
    (4, "SIGILL"),
    (5, "SIGTRAP"),
    (6, "SIGABRT"),
    (7, "SIGBUS"),
    (8, "SIGFPE"),
    (9, "SIGKILL"),
    (10, "SIGUSR1"),
    (11, "SIGSEGV"),
    (12, "SIGUSR2"),
    (13, "SIGPIPE"),
    (14, "SIGALRM"),
    (15, "SIGTERM"),
    (16, "SIGSTKFLT"),
    (17, "SIGCHLD"),
    (18, "SIGCONT"),
    (19, "SIGSTOP"),
    (20, "SIGTSTP"),
    (21, "SIGTTIN"),
    (22, "SIGTTOU"),
    (23, "SIGURG"),
    (24, "SIGXCPU"),
    (25, "SIGXFSZ"),
    (26, "SIGVTALRM"),
    (27, "SIGPROF"),
    (28, "SIGWINCH"),
    (29, "SIGIO"),
    (30, "SIGPWR"),
    (31, "SIGSYS"),
];

/// The name of a Linux signal (`SIGKILL`), or `signal N` for one without a name here.
pub fn signal_name(sig: i32) -> String {
    SIGNALS.iter().find(|(n, _)| *n == sig).map_or_else(|| format!("signal {sig}"), |(_, s)| (*s).to_owned())
}

fn signal_number(name: &str) -> Option<i32> {
    SIGNALS.iter().find(|(_, s)| *s == name).map(|(n, _)| *n).or_else(|| name.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::AbortMark;

    fn outcome(status: RankStatus, finalized: bool) -> RankOutcome {
        RankOutcome { rank: 1, status, finalized, abort: None, exit_seq: 0 }
    }

    #[test]
    fn lines_name_rank_host_end_phase_and_cause() {
        let r = RankReport::new(&outcome(RankStatus::Exited(3), false), "n7", Phase::Running, Cause::None);
        assert!(r.is_abnormal());
        assert_eq!(r.line(), "rtrun: rank 1 on host n7: exit code 3, after init, before finalize");
        let r = RankReport::new(&outcome(RankStatus::Signaled(9), false), "n7", Phase::Init, Cause::Injected);
        assert_eq!(r.line(), "rtrun: rank 1 on host n7: killed by SIGKILL, during init (fault injected)");
        let mut o = outcome(RankStatus::Signaled(9), false);
        o.abort = Some(AbortMark { seq: 0, code: 7 });
        let r = RankReport::new(&o, "h", Phase::Running, Cause::None);
        assert!(r.line().ends_with("(aborted, code 7)"), "{}", r.line());
        assert_eq!(signal_name(64), "signal 64");
    }

    #[test]
    fn abnormal_rules() {
        let rep = |s, fin, phase| RankReport::new(&outcome(s, fin), "h", phase, Cause::None);
        // Clean: exit 0 after finalize; a program that never used the runtime, exit 0.
        assert!(rep(RankStatus::Exited(0), true, Phase::Finalizing).is_clean());
        assert!(!rep(RankStatus::Exited(0), false, Phase::BeforeInit).is_abnormal());
        // Exit 0 without finalizing after init started; non-zero after finalize; signals.
        assert!(rep(RankStatus::Exited(0), false, Phase::Running).is_abnormal());
        assert!(rep(RankStatus::Exited(0), false, Phase::Finalizing).is_abnormal());
        assert!(rep(RankStatus::Exited(5), true, Phase::Finalized).is_abnormal());
        assert!(rep(RankStatus::Signaled(15), true, Phase::Finalized).is_abnormal());
        assert!(!rep(RankStatus::Exited(5), true, Phase::Finalized).is_clean());
    }

    #[test]
    fn records_round_trip() {
        for (status, phase, cause) in [
            (RankStatus::Exited(0), Phase::Finalized, Cause::None),
            (RankStatus::Exited(-1), Phase::BeforeInit, Cause::Timeout),
            (RankStatus::Signaled(9), Phase::Running, Cause::Injected),
            (RankStatus::Signaled(64), Phase::Init, Cause::Interrupted),
            (RankStatus::Exited(7), Phase::Finalizing, Cause::Abort(-7)),
        ] {
            let r = RankReport { rank: 3, host: "rt-h0".into(), status, phase, cause };
            assert_eq!(RankReport::parse(&r.record()), Some(r.clone()), "{}", r.record());
        }
        assert_eq!(RankReport::parse("rank=1 host=h end=exit:x phase=running cause=none"), None);
        assert_eq!(RankReport::parse("rank=1 host=h end=exit:0 phase=running"), None);
        assert_eq!(RankReport::parse("garbage"), None);
    }
}
