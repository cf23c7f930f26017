//! How each rank ended, and the job exit code derived from that (R7).
//!
//! Rule R7 (run-through chapter §17.5.2, advice): a rank *failed* if it was killed by a
//! signal, was aborted (named in, or the sender of, an abort request), or exited without
//! having told the launcher it finalized. Then:
//! 1. no rank failed → rank 0's exit code;
//! 2. otherwise → the exit code of the lowest-numbered rank that exited after finalizing;
//!
//! and in both cases, where that code is 0 but another rank that finalized exited
//! non-zero, the lowest such rank's code instead (as `mpirun` does: a rank that reports an
//! error through its exit code after `MPI_Finalize` fails the job, which scripts and test
//! harnesses rely on). Otherwise:
//! 3. if none did → the code of the last abort request;
//! 4. if there was none → `128 + signal` of the last rank killed by a signal;
//! 5. if none was → the exit code of the lowest-numbered rank with a non-zero exit code,
//!    else 0. (Case 5 covers programs that never use the runtime, e.g. `rtrun -n 2
//!    hostname`: nobody finalizes, so everyone "failed", yet all exited 0.)

/// How a rank process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RankStatus {
    /// It exited with this code.
    Exited(i32),
    /// It was killed by this signal.
    Signaled(i32),
}

/// An abort request recorded against a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AbortMark {
    /// Order of the abort request in the job (later requests have larger values).
    pub seq: u64,
    /// The abort code.
    pub code: i32,
}

/// Everything the exit-code rule needs to know about one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RankOutcome {
    /// The rank.
    pub rank: u32,
    /// How its process ended.
    pub status: RankStatus,
    /// Whether it reported a clean finalize before ending.
    pub finalized: bool,
    /// The latest abort request that named this rank or came from it.
    pub abort: Option<AbortMark>,
    /// Order in which the launcher saw the rank end (later = larger).
    pub exit_seq: u64,
}

impl RankOutcome {
    /// Whether this rank counts as failed under R7.
    pub fn is_failed(&self) -> bool {
        matches!(self.status, RankStatus::Signaled(_)) || self.abort.is_some() || !self.finalized
    }

    fn exit_code(&self) -> i32 {
        match self.status {
            RankStatus::Exited(c) => c,
            RankStatus::Signaled(s) => 128 + s,
        }
    }
}

/// The launcher's exit code for a finished job (rule R7, see the module doc).
/// An empty slice gives 0.
pub fn job_exit_code(outcomes: &[RankOutcome]) -> i32 {
    let lowest = |it: &mut dyn Iterator<Item = &RankOutcome>| it.min_by_key(|o| o.rank).copied();
    // Cases 1 and 2: the ranks that did not fail, the lowest first, its code unless 0.
    if let Some(o) = lowest(&mut outcomes.iter().filter(|o| !o.is_failed())) {
        return match o.exit_code() {
            0 => lowest(&mut outcomes.iter().filter(|o| !o.is_failed() && o.exit_code() != 0))
                .map_or(0, |o| o.exit_code()),
            c => c,
        };
    }
    if let Some(m) = outcomes.iter().filter_map(|o| o.abort).max_by_key(|m| m.seq) {
        return m.code;
    }
    if let Some(o) = outcomes.iter().filter(|o| matches!(o.status, RankStatus::Signaled(_))).max_by_key(|o| o.exit_seq)
    {
        return o.exit_code();
    }
    lowest(&mut outcomes.iter().filter(|o| o.exit_code() != 0)).map_or(0, |o| o.exit_code())
}

/// `--exit-status first-nonzero` (MPICH's and Open MPI's habit): the code of the rank
/// that ended first with a non-zero code (a signal counts as 128 + its number), else 0.
/// Where R7's rule forgives failures the program survived (the job exits 0 when a
/// finalized rank says so), this one reports the first of them.
pub fn first_nonzero_exit_code(outcomes: &[RankOutcome]) -> i32 {
    outcomes.iter().filter(|o| o.exit_code() != 0).min_by_key(|o| o.exit_seq).map_or(0, RankOutcome::exit_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use RankStatus::{Exited, Signaled};

    #[test]
    fn first_nonzero_is_the_earliest_failure() {
        let mut a = o(2, Signaled(9), false);
        a.exit_seq = 0;
        let mut b = o(0, Exited(3), true);
        b.exit_seq = 1;
        let c = o(1, Exited(0), true);
        assert_eq!(first_nonzero_exit_code(&[b, c, a]), 137);
        // R7 forgives the killed rank: rank 0 finalized and said 3.
        assert_eq!(job_exit_code(&[b, c, a]), 3);
        assert_eq!(first_nonzero_exit_code(&[c]), 0);
        assert_eq!(first_nonzero_exit_code(&[]), 0);
    }

    fn o(rank: u32, status: RankStatus, finalized: bool) -> RankOutcome {
        RankOutcome { rank, status, finalized, abort: None, exit_seq: u64::from(rank) }
    }

    #[test]
    fn r7_no_failure_gives_rank0_code() {
        let v = [o(1, Exited(5), true), o(0, Exited(3), true), o(2, Exited(0), true)];
        assert_eq!(job_exit_code(&v), 3);
        assert_eq!(job_exit_code(&[]), 0);
    }

    #[test]
    fn a_rank_exiting_non_zero_after_finalize_fails_the_job() {
        let v = [o(0, Exited(0), true), o(1, Exited(0), true), o(2, Exited(3), true), o(3, Exited(4), true)];
        assert_eq!(job_exit_code(&v), 3);
        let v = [o(0, Signaled(9), false), o(1, Exited(0), true), o(2, Exited(6), true)];
        assert_eq!(job_exit_code(&v), 6);
        let v = [o(0, Exited(0), true), o(1, Exited(0), true)];
        assert_eq!(job_exit_code(&v), 0);
    }

    #[test]
    fn r7_failure_gives_lowest_finalized_rank_code() {
        let v = [o(0, Signaled(9), false), o(1, Exited(0), false), o(2, Exited(12), true), o(3, Exited(13), true)];
        assert_eq!(job_exit_code(&v), 12);
        // Finalized but then killed: failed, not a candidate.
        let v = [o(0, Signaled(9), true), o(1, Exited(21), true)];
        assert_eq!(job_exit_code(&v), 21);
    }

    #[test]
    fn r7_none_finalized_gives_last_abort_code() {
        let mut a = o(0, Exited(1), false);
        a.abort = Some(AbortMark { seq: 0, code: 7 });
        let mut b = o(1, Signaled(9), false);
        b.abort = Some(AbortMark { seq: 1, code: 8 });
        assert_eq!(job_exit_code(&[a, b]), 8);
        // An aborted rank that had finalized is still failed.
        let mut c = o(2, Signaled(9), true);
        c.abort = Some(AbortMark { seq: 0, code: 4 });
        assert_eq!(job_exit_code(&[c]), 4);
    }

    #[test]
    fn r7_signal_without_abort_gives_128_plus_signal() {
        let mut v = [o(0, Signaled(9), false), o(1, Signaled(15), false)];
        assert_eq!(job_exit_code(&v), 128 + 15);
        v[0].exit_seq = 10;
        assert_eq!(job_exit_code(&v), 128 + 9);
    }

    #[test]
    fn r7_program_without_runtime() {
        let v = [o(0, Exited(0), false), o(1, Exited(0), false)];
        assert_eq!(job_exit_code(&v), 0);
        let v = [o(0, Exited(0), false), o(1, Exited(4), false), o(2, Exited(5), false)];
        assert_eq!(job_exit_code(&v), 4);
    }
}
