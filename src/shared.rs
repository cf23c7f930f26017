//! What the runtime and every communicator share: the engine, the bootstrap service
//! (for aborts), the context ids taken, the fatal scope. Below both `runtime` (which
//! creates it) and `comm` (which uses it).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::{Engine, Rank, Waiter};

use crate::bootstrap::Bootstrap;

/// Longest an aborting rank waits for the launcher to kill the rest of its group.
const ABORT_LINGER: Duration = Duration::from_secs(2);
/// Longest an aborting rank waits for a PMIx or PMI-2 server (Slurm) to kill the job,
/// this rank included (Slurm's kill goes through slurmctld and can take seconds).
const SERVER_ABORT_WAIT: Duration = Duration::from_secs(10);

/// Which processes `ErrorsAreFatal` aborts (R3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FatalScope {
    /// The processes of the communicator's group, as `abort(comm)` (ticket #324, the
    /// run-through draft; MPI-4's `MPI_ERRORS_ABORT`). The default.
    Group,
    /// Every process of the job (MPI-4's `MPI_ERRORS_ARE_FATAL`). Set with
    /// `RT_FATAL_SCOPE=job` or [`crate::Runtime::set_fatal_scope`].
    Job,
}

/// State shared by the runtime and every communicator.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) engine: Arc<BiasedMutex<Engine>>,
    /// The bootstrap service (rtrun, PMIx, PMI-2); none for a singleton.
    pub(crate) bootstrap: Mutex<Option<Bootstrap>>,
    pub(crate) world_size: u32,
    /// This process's world rank.
    pub(crate) rank: u32,
    pub(crate) next_ctx: AtomicU32,
    /// Contexts this process took for a communicator, or holds for one being created
    /// (several threads may create communicators at once, MPI_THREAD_MULTIPLE).
    pub(crate) claimed: Mutex<std::collections::HashSet<u32>>,
    pub(crate) job_fatal: AtomicBool,
    pub(crate) stop: AtomicBool,
    /// The segment's departure marks (shared memory only): set for this rank at finalize.
    pub(crate) departures: Option<runthrough_shm::segment::Departures>,
}

impl Shared {
    /// The next context id this process would use (agreed on collectively by `dup`).
    pub(crate) fn ctx_proposal(&self) -> u32 {
        self.next_ctx.load(Ordering::Relaxed)
    }

    /// Records that contexts below `agreed + 2` are taken (saturating: a program whose
    /// members mismatched their agreements can make a shrink decide garbage, which must
    /// not panic here).
    pub(crate) fn ctx_taken(&self, agreed: u32) {
        self.next_ctx.fetch_max(agreed.saturating_add(2), Ordering::Relaxed);
    }

    /// Takes context `ctx` for a communicator being created here, unless another
    /// creation (another thread's) holds it already: `false` then, and the creation must
    /// choose again with every member.
    pub(crate) fn ctx_claim(&self, ctx: u32) -> bool {
        let fresh = self.claimed.lock().insert(ctx);
        self.ctx_taken(ctx);
        fresh
    }

    /// Gives back a context [`Shared::ctx_claim`] took for a creation that failed.
    pub(crate) fn ctx_release(&self, ctx: u32) {
        self.claimed.lock().remove(&ctx);
    }

    /// [`Shared::ctx_claim`] of the `pairs` contexts `ctx, ctx + 2, …`: all of them or
    /// none (those taken are given back).
    pub(crate) fn ctx_claim_pairs(&self, ctx: u32, pairs: u32) -> bool {
        let all: Vec<u32> = (0..pairs).map(|i| ctx + 2 * i).collect();
        let taken: Vec<u32> = all.iter().copied().filter(|&c| self.ctx_claim(c)).collect();
        if taken.len() == all.len() {
            return true;
        }
        taken.into_iter().for_each(|c| self.ctx_release(c));
        false
    }

    /// Gives back what [`Shared::ctx_claim_pairs`] took.
    pub(crate) fn ctx_release_pairs(&self, ctx: u32, pairs: u32) {
        (0..pairs).for_each(|i| self.ctx_release(ctx + 2 * i));
    }

    pub(crate) fn fatal_scope(&self) -> FatalScope {
        if self.job_fatal.load(Ordering::Relaxed) {
            FatalScope::Job
        } else {
            FatalScope::Group
        }
    }

    /// Aborts `ranks` (world ranks; this process included) with `code`, then exits.
    ///
    /// Once the launcher took the request, this process waits (at most [`ABORT_LINGER`])
    /// until the launcher has killed the other ranks of the group, normally killing this
    /// one with them: a member that saw this process exit first (its pidfd reports it
    /// within milliseconds) would take it for a failure and report an error, and an
    /// abort code, of its own (R3, R7).
    pub(crate) fn abort(&self, ranks: &[u32], code: i32) -> ! {
        // What this process printed reaches the launcher before anyone is killed (the
        // launcher SIGKILLs a group's ranks, this one included, after a short grace).
        let _ = std::io::Write::flush(&mut std::io::stdout());
        let _ = std::io::Write::flush(&mut std::io::stderr());
        if let Some(c) = self.bootstrap.lock().as_mut() {
            match c.abort(ranks, code) {
                Err(e) => tracing::warn!(error = %e, "launcher did not take the abort request"),
                // PMIx and PMI-2 abort the whole job and report no kills to wait for:
                // wait to be killed with the others, so none takes this exit for a failure.
                Ok(false) => std::thread::sleep(SERVER_ABORT_WAIT),
                Ok(true) => {
                    let deadline = Instant::now() + ABORT_LINGER;
                    while Instant::now() < deadline {
                        let Ok(gone) = c.exited() else { break };
                        if ranks.iter().all(|r| *r == self.rank || gone.contains(r)) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
            }
        }
        std::process::exit(code)
    }

    pub(crate) fn waiter(&self) -> Waiter {
        Waiter::new(self.engine.lock().config().spin_polls)
    }
}

/// Applies the launcher's list of exited ranks: a rank that finalized before exiting
/// (in `departed()`, asked only when some exit is new) departed, the others failed.
pub(crate) fn apply_exits(sh: &Shared, exited: Vec<u32>, departed: impl FnOnce() -> Vec<u32>) {
    let new: Vec<u32> = {
        let e = sh.engine.lock();
        let me = e.rank().0;
        exited.into_iter().filter(|&r| r != me && !e.is_failed(Rank(r))).collect()
    };
    if new.is_empty() {
        return;
    }
    let departed = departed();
    let mut e = sh.engine.lock();
    for r in new {
        if departed.contains(&r) {
            tracing::debug!(rank = r, "launcher reports rank finalized and exited");
            e.peer_departed(Rank(r));
        } else {
            tracing::debug!(rank = r, "launcher reports rank exited without finalizing");
            e.fail_peer(Rank(r));
        }
    }
}
