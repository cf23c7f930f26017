//! The partition rule (R32): the launcher is the job's witness.
//!
//! A rank's failure detector can only see silence. Silence from a crashed rank and
//! silence across a network partition look the same, and if each side of a partition
//! declared the other failed, both would go on as the same communicator with different
//! failed groups (split brain). So under `rtrun` a verdict of the ring detector, or an
//! error of the fabric, is a *suspicion* ([`Engine::set_witnessed`]): this thread asks
//! the launcher ([`Client::confirm`]) before the peer is failed here.
//!
//! The launcher decides claims one at a time: the first claim excludes the suspect;
//! a claim from a rank already excluded is refused (`Excluded`). Hence:
//! - **The side that reaches the launcher continues.** Its claims are confirmed within a
//!   round trip; the ranks it suspected are excluded for good (every later request of
//!   theirs gets `Excluded`, and the launcher's `Exited` list names them).
//! - **The side cut off from the launcher stops.** Its claims cannot be confirmed, so it
//!   never fails anyone: it cannot continue with a failed group of its own. When a claim
//!   is not answered within the witness timeout (`RT_WITNESS_TIMEOUT_MS`, default
//!   [`DEFAULT_TIMEOUT`]) the rank exits; when the network heals first, the answer is
//!   `Excluded` and it exits too. It never rejoins.
//! - **Two ranks that suspect each other** (an asymmetric cut, both still reaching the
//!   launcher): the first claim wins, the other claimant is excluded and stops.
//!
//! **Busy is not dead.** Where the launcher started the suspect itself (no launch agent),
//! it reads the suspect's process state first: alive and not stopped (running, runnable,
//! sleeping), the claim is refused (`Alive`) and the observer gives the suspect a fresh
//! window, however late its heartbeats — a rank starved of a core, or computing while its
//! progress thread waits for one, is slow, not failed. Stopped (`SIGSTOP`: hung) or dead,
//! the claim is confirmed at once as before (`docs/DETECTOR.md`).
//!
//! Evidence that is certain does not wait: the launcher's own exit notices and a
//! shared-memory peer's process exit (its pidfd) fail the peer at once.
//!
//! Without a launcher (singleton; under Slurm, see docs/SLURM.md) there is no witness and
//! the detector declares failures itself. `RT_WITNESS=0` turns the witness off under
//! `rtrun` too (then a partition can split the job: both sides continue).

use std::io::Write;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::Weak;
use std::task::Waker;
use std::time::Duration;

use runthrough_engine::Rank;
use runthrough_launch::client::{Client, Verdict};
use runthrough_launch::env::JobEnv;

use crate::bootstrap::{excluded_exit, EXCLUDED_EXIT};
use crate::config::Config;
use crate::shared::Shared;
use crate::Error;

/// How long a claim may go unanswered before this rank takes itself for cut off.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether the witness is on (`RT_WITNESS`, default on under `rtrun`).
pub(crate) fn enabled(conf: &Config) -> bool {
    !conf.off("RT_WITNESS")
}

/// Starts the witness thread with its own connection to the launcher (made now, while
/// the launcher is surely reachable) and returns where the progress thread hands it the
/// engine's suspects.
///
/// Every `watch` (`None`: `RT_LAUNCHER_NOTICES=0`) the same thread asks the launcher which
/// ranks exited, in place of the progress thread, which must never block on the network:
/// behind a partition a request to the launcher waits for its timeout, and a progress
/// thread stuck there would stop heartbeats and the detector alike.
pub(crate) fn spawn(
    shared: Weak<Shared>,
    env: &JobEnv,
    connect: Duration,
    timeout: Option<Duration>,
    watch: Option<Duration>,
) -> Result<Sender<Rank>, Error> {
    let timeout = timeout.map_or(DEFAULT_TIMEOUT, |t| t.max(Duration::from_millis(1)));
    let client = Client::connect(env, connect).map_err(|e| Error::Init(format!("witness connection: {e}")))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("rt-witness".into())
        .spawn(move || serve(&shared, client, &rx, timeout, watch))
        .map_err(|e| Error::Init(format!("witness thread: {e}")))?;
    Ok(tx)
}

/// Asks the launcher about each suspect in turn, and between suspects (every `watch`)
/// which ranks exited; runs until the runtime is gone.
fn serve(shared: &Weak<Shared>, mut client: Client, rx: &Receiver<Rank>, timeout: Duration, watch: Option<Duration>) {
    let mut wakers: Vec<Waker> = Vec::new();
    let idle = watch.unwrap_or(Duration::from_secs(3600));
    let mut notices = watch.is_some();
    loop {
        let suspect = match rx.recv_timeout(idle) {
            Ok(s) => s,
            Err(RecvTimeoutError::Timeout) => {
                let Some(sh) = shared.upgrade() else { return };
                if notices {
                    match client.exited_within(timeout) {
                        Ok(exited) => {
                            crate::shared::apply_exits(&sh, exited, || {
                                client.departed_within(timeout).unwrap_or_default()
                            });
                            wake(&sh, &mut wakers);
                        }
                        // Unreachable: a later suspicion finds out what that means.
                        Err(e) => {
                            tracing::debug!(error = %e, "launcher unreachable: no more exit notices");
                            notices = false;
                        }
                    }
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        let Some(sh) = shared.upgrade() else { return };
        match client.confirm(suspect.0, timeout) {
            Ok(Verdict::Confirmed) => {
                tracing::debug!(rank = suspect.0, "witness confirmed the suspicion");
                sh.engine.lock().fail_peer(suspect);
                wake(&sh, &mut wakers);
            }
            // R31: the suspect is still starting and the launcher hears from it; it
            // began heartbeating later than this rank began watching it.
            Ok(Verdict::Starting) => {
                tracing::debug!(rank = suspect.0, "witness refused: the suspect is still starting");
                sh.engine.lock().refute_suspect(suspect);
            }
            // Busy is not dead: the suspect's process is alive on the launcher's host
            // (starved of a core, or computing while its progress thread waits for one).
            Ok(Verdict::Alive) => {
                tracing::debug!(rank = suspect.0, "witness refused: the suspect's process is alive");
                sh.engine.lock().refute_suspect(suspect);
            }
            Err(runthrough_launch::Error::Excluded) => {
                excluded_exit("by the launcher: another rank's claim against it came first (R32)")
            }
            Err(e) => cut_off(&sh, suspect, &e),
        }
    }
}

/// Wakes the futures whose requests completed (failed peers).
fn wake(sh: &Shared, wakers: &mut Vec<Waker>) {
    sh.engine.lock().take_wakers(wakers);
    wakers.drain(..).for_each(Waker::wake);
}

/// This rank cannot reach the witness while it suspects a peer: it is on the side of a
/// partition that must stop (R32).
fn cut_off(sh: &Shared, suspect: Rank, e: &runthrough_launch::Error) -> ! {
    let me = sh.rank;
    let _ = writeln!(
        std::io::stderr(),
        "runthrough: rank {me} suspects rank {} but cannot reach the launcher (the job's witness: {e}); \
         it is cut off from the job (a partition) and stops (R32)",
        suspect.0
    );
    std::process::exit(EXCLUDED_EXIT)
}
