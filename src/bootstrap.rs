//! Which service started this process, and the operations start-up and the runtime need
//! from it (T3): [`Bootstrap`] over `rtrun`'s key-value service, PMIx (`srun
//! --mpi=pmix`, or any PMIx server) or PMI-2 (`srun --mpi=pmi2`, MPICH's hydra).
//!
//! [`detect`] picks by environment, in this order: `RT_RANK` → rtrun; `PMIX_RANK` or
//! `PMIX_NAMESPACE` → PMIx; `PMI_FD` → PMI-2; none → a singleton world. [`connect`]
//! then reads this process's place in the job ([`JobInfo`]: rank, size, node-local rank
//! and size, host, shared-memory name) from the service.
//!
//! What each service offers (the rest are no-ops):
//!
//! | operation | rtrun | PMIx | PMI-2 |
//! |---|---|---|---|
//! | `put` / `get` | `name/RANK` keys | `rt.NAME` keys of each process (byte objects) | `rt.NAME.RANK` keys, values in hex |
//! | `fence` | fault-tolerant `Join`: completes over the ranks not out and names the ranks out (R31) | `PMIx_Fence` with `PMIX_COLLECT_DATA`; names none | `kvs-fence`; names none |
//! | `exited` evidence | the launcher's exit list | the ranks of `PMIX_ERR_PROC_TERM_WO_SYNC` / `PMIX_EVENT_PROC_TERMINATED` / `PMIX_ERR_PROC_ABORTED` / `PMIX_PROC_TERMINATED` events | none (pidfds and the ring detector remain) |
//! | `departed` | the launcher's list | none | none |
//! | `abort` | the given ranks | the whole namespace (`PMIx_Abort`) | the whole step (`abort;isworld=TRUE`) |
//! | lifecycle (`started`, `initialized`, `finalizing`) | told to the launcher | — | — |
//! | `finalized` | told to the launcher | `PMIx_Finalize` | `finalize` |
//!
//! Under PMIx and PMI-2 the fences are the server's plain ones: a rank that dies before
//! the last start-up fence stalls it (until the step ends or [`BOOT_FENCE_TIMEOUT`]),
//! so R31 holds under `rtrun` only; failures after start-up are handled alike.
//!
//! The shared-memory segment of a host is named per job step and host:
//! `/rt-NAMESPACE-HOST` (PMIx) or `/rt-pmi2-JOBID-HOST` (PMI-2), sanitized; the host's
//! lowest rank creates it and unlinks the name once every local rank attached
//! (`boot.rs`). With no launcher, a creator that dies before that leaves the name in
//! `/dev/shm` (rtrun removes it at the end of its job).

use std::ffi::OsString;
use std::io::Write as _;
use std::time::Duration;

use runthrough_launch::client::Client;
use runthrough_launch::env::JobEnv;
use runthrough_pmix::pmi2::{self, Pmi2};
use runthrough_pmix::pmix::Pmix;

use crate::config::Config;
use crate::Error;

/// Exit code of a rank that finds itself excluded (declared failed while hung).
pub(crate) const EXCLUDED_EXIT: i32 = 75;

/// Stops this process: the others declared it failed (`how`), so it must never rejoin
/// (T-FD, R31).
pub(crate) fn excluded_exit(how: &str) -> ! {
    let _ = writeln!(std::io::stderr(), "runthrough: this rank was excluded {how} (unresponsive); it stops");
    std::process::exit(EXCLUDED_EXIT)
}

/// Longest wait of a PMI-2 start-up fence or get (PMIx waits as its server decides).
pub(crate) const BOOT_FENCE_TIMEOUT: Duration = Duration::from_secs(120);
/// Environment variable that keeps a PMIx client attached after start-up when `0` (see
/// [`Bootstrap::started`]).
const PMIX_DETACH_ENV: &str = "RT_PMIX_DETACH";
/// SIGKILL's number (9 on every Linux architecture).
const SIGKILL: i32 = 9;
/// Environment variable choosing the core binding outside rtrun (`core|hwthread|none|numa`;
/// default `none`: the resource manager binds tasks itself).
const BIND_ENV: &str = "RT_BIND";

/// This process's place in the job, from the bootstrap service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobInfo {
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) local_rank: u32,
    pub(crate) local_size: u32,
    /// This host's name (ranks with equal names share memory).
    pub(crate) node: String,
    /// POSIX shared-memory name of this host's segment (per job and host).
    pub(crate) shm_name: String,
    /// Binding policy (`core`, `none`, `numa`).
    pub(crate) bind: String,
}

/// Which service started this process.
#[derive(Debug)]
pub(crate) enum Found {
    Rtrun(JobEnv),
    Pmix,
    Pmi2,
    Singleton,
}

/// Reads the environment (see the module doc for the order).
pub(crate) fn detect(conf: &Config) -> Result<Found, Error> {
    let env = JobEnv::from_launcher(|v| conf.get(v).map(OsString::from));
    if let Some(env) = env.map_err(|e| Error::Init(format!("bad launcher environment: {e}")))? {
        return Ok(Found::Rtrun(env));
    }
    if Pmix::in_vars(|v| conf.get(v).is_some()) {
        return Ok(Found::Pmix);
    }
    if conf.get(pmi2::PMI_FD).is_some() {
        return Ok(Found::Pmi2);
    }
    Ok(Found::Singleton)
}

/// The connection to the service that started this process.
#[derive(Debug)]
pub(crate) enum Bootstrap {
    /// `rtrun`'s key-value service (the environment kept for the heartbeat connection).
    Rtrun { client: Client, env: Box<JobEnv> },
    /// A PMIx server (terminated ranks seen so far accumulate in `terminated`;
    /// `detached` once this process finalized PMIx after start-up).
    Pmix { pmix: Box<Pmix>, terminated: Vec<u32>, detached: bool },
    /// A PMI-2 server.
    Pmi2(Pmi2),
}

/// Connects to the service `found` names; `None` for a singleton.
pub(crate) fn connect(found: Found, conf: &Config, timeout: Duration) -> Result<Option<(JobInfo, Bootstrap)>, Error> {
    match found {
        Found::Singleton => Ok(None),
        Found::Rtrun(env) => {
            let client = Client::connect(&env, timeout).map_err(launch_err("bootstrap connect"))?;
            let job = JobInfo {
                rank: env.rank,
                size: env.size,
                local_rank: env.local_rank,
                local_size: env.local_size,
                node: env.node.clone(),
                shm_name: env.shm_name.clone(),
                bind: env.bind.clone(),
            };
            Ok(Some((job, Bootstrap::Rtrun { client, env: Box::new(env) })))
        }
        Found::Pmix => {
            let pmix = Pmix::init().map_err(pmi_err("PMIx"))?;
            let rank = pmix.rank();
            let size = pmix.job_size().map_err(pmi_err("PMIx job size"))?;
            let node = pmix.hostname().ok().filter(|h| !h.is_empty()).unwrap_or_else(hostname);
            let (local_rank, local_size) = match (pmix.local_rank(), pmix.local_size()) {
                (Ok(r), Ok(s)) if r < s && s <= size => (r, s),
                other => {
                    tracing::debug!(?other, "PMIx gave no usable local rank/size; taking this rank alone");
                    (0, 1)
                }
            };
            let shm_name = shm_name(&pmix.namespace(), &node);
            let job = JobInfo { rank, size, local_rank, local_size, node, shm_name, bind: bind(conf) };
            check_job(&job)?;
            Ok(Some((job, Bootstrap::Pmix { pmix: Box::new(pmix), terminated: Vec::new(), detached: false })))
        }
        Found::Pmi2 => {
            let mut p = Pmi2::from_vars(|v| conf.get(v).map(str::to_owned))
                .map_err(pmi_err("PMI-2"))?
                .ok_or_else(|| Error::Init("PMI_FD vanished".into()))?;
            p.set_timeout(Some(BOOT_FENCE_TIMEOUT)).map_err(pmi_err("PMI-2"))?;
            let (rank, size) = (p.rank(), p.size());
            let node = hostname();
            let mapping = p.job_attr("PMI_process_mapping").unwrap_or_else(|e| {
                tracing::debug!(error = %e, "PMI-2 server refused PMI_process_mapping");
                None
            });
            let (local_rank, local_size) = match mapping.as_deref().map(|m| pmi2::wire::node_of_ranks(m, size)) {
                Some(Ok(nodes)) => {
                    let mine = nodes[rank as usize];
                    let local_rank = nodes[..rank as usize].iter().filter(|&&n| n == mine).count() as u32;
                    (local_rank, nodes.iter().filter(|&&n| n == mine).count() as u32)
                }
                other => {
                    tracing::debug!(?other, "no usable PMI_process_mapping; taking this rank alone");
                    (0, 1)
                }
            };
            let shm_name = shm_name(&format!("pmi2-{}", p.job_id()), &node);
            let job = JobInfo { rank, size, local_rank, local_size, node, shm_name, bind: bind(conf) };
            check_job(&job)?;
            Ok(Some((job, Bootstrap::Pmi2(p))))
        }
    }
}

/// Signals every task of this Slurm step with SIGKILL (`scancel`).
fn scancel_step() -> Result<(), Error> {
    let (Ok(job), Ok(step)) = (std::env::var("SLURM_JOB_ID"), std::env::var("SLURM_STEP_ID")) else {
        return Err(Error::Transport("abort: not a Slurm step (SLURM_JOB_ID, SLURM_STEP_ID unset)".into()));
    };
    let st = std::process::Command::new("scancel")
        .args(["--signal=KILL", &format!("{job}.{step}")])
        .status()
        .map_err(|e| Error::Transport(format!("abort: scancel: {e}")))?;
    // scancel runs inside the step, so the kill it asked for may reach it first.
    if st.success() || std::os::unix::process::ExitStatusExt::signal(&st) == Some(SIGKILL) {
        Ok(())
    } else {
        Err(Error::Transport(format!("abort: scancel {job}.{step}: {st}")))
    }
}

fn check_job(job: &JobInfo) -> Result<(), Error> {
    if job.size == 0 || job.rank >= job.size || job.local_rank >= job.local_size || job.local_size > job.size {
        return Err(Error::Init(format!("inconsistent job from the bootstrap service: {job:?}")));
    }
    Ok(())
}

fn bind(conf: &Config) -> String {
    conf.get(BIND_ENV).unwrap_or("none").to_owned()
}

/// This host's name (the kernel's), or `localhost`.
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_string())
}

/// `/rt-JOB-HOST`, with every character outside `[A-Za-z0-9._-]` replaced by `_`, each
/// part cut to keep the name well under the 255-byte limit.
pub(crate) fn shm_name(job: &str, host: &str) -> String {
    let clean = |s: &str, max: usize| -> String {
        s.chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' })
            .take(max)
            .collect()
    };
    format!("/rt-{}-{}", clean(job, 120), clean(host, 64))
}

/// Maps a launcher-service error to [`Error::Init`]; a rank the launcher excluded stops
/// here instead (R31: it never rejoins).
pub(crate) fn launch_err(what: &'static str) -> impl FnOnce(runthrough_launch::Error) -> Error {
    move |e| match e {
        runthrough_launch::Error::Excluded => crate::bootstrap::excluded_exit("by the launcher, during start-up"),
        e => Error::Init(format!("{what}: {e}")),
    }
}

fn pmi_err(what: &'static str) -> impl FnOnce(runthrough_pmix::Error) -> Error {
    move |e| Error::Init(format!("{what}: {e}"))
}

impl Bootstrap {
    /// A short name for `describe()`.
    pub(crate) fn describe(&self) -> String {
        match self {
            Bootstrap::Rtrun { .. } => "started by rtrun".to_string(),
            Bootstrap::Pmix { pmix, .. } => format!("started by PMIx (namespace {})", pmix.namespace()),
            Bootstrap::Pmi2(p) => format!("started by PMI-2 (job {})", p.job_id()),
        }
    }

    /// The rtrun environment (for the start-up heartbeat), if rtrun started this process.
    pub(crate) fn rtrun_env(&self) -> Option<&JobEnv> {
        match self {
            Bootstrap::Rtrun { env, .. } => Some(env),
            _ => None,
        }
    }

    /// Publishes this rank's (`me`) entry `name`.
    pub(crate) fn put(&mut self, name: &str, me: u32, value: &[u8]) -> Result<(), Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => {
                client.put(&format!("{name}/{me}"), value).map_err(launch_err("bootstrap put"))
            }
            Bootstrap::Pmix { pmix, .. } => pmix.put(&format!("rt.{name}"), value).map_err(pmi_err("PMIx put")),
            Bootstrap::Pmi2(p) => p.put(&format!("rt.{name}.{me}"), &pmi2::to_hex(value)).map_err(pmi_err("PMI-2 put")),
        }
    }

    /// Rank `rank`'s entry `name` (published before the last fence).
    pub(crate) fn get(&mut self, name: &str, rank: u32, timeout: Duration) -> Result<Vec<u8>, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => {
                client.get(&format!("{name}/{rank}"), timeout).map_err(launch_err("bootstrap get"))
            }
            Bootstrap::Pmix { pmix, .. } => pmix.get(rank, &format!("rt.{name}")).map_err(pmi_err("PMIx get")),
            Bootstrap::Pmi2(p) => {
                p.get(&format!("rt.{name}.{rank}")).and_then(|v| pmi2::from_hex(&v)).map_err(pmi_err("PMI-2 get"))
            }
        }
    }

    /// A fence over the job; returns the ranks out of the job at it (rtrun only; the
    /// others' fences are plain and name none).
    pub(crate) fn fence(&mut self, timeout: Duration) -> Result<Vec<u32>, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.join(timeout).map_err(launch_err("bootstrap fence")),
            Bootstrap::Pmix { pmix, .. } => pmix.fence().map(|()| Vec::new()).map_err(pmi_err("PMIx fence")),
            Bootstrap::Pmi2(p) => p.fence().map(|()| Vec::new()).map_err(pmi_err("PMI-2 fence")),
        }
    }

    /// Start-up is done (rtrun: the heartbeat ends and the detector takes over; PMIx:
    /// this process detaches, unless `RT_PMIX_DETACH=0`).
    ///
    /// Why PMIx detaches: Slurm's PMIx plugin (22.05 and later, `pmixp_client.c`
    /// `_errhandler`) kills the whole step when its PMIx server reports an error, and
    /// the server reports one (`PMIX_ERR_LOST_CONNECTION`) for every client whose
    /// connection closes before `PMIx_Finalize`: any rank's death would end the job. A
    /// client that finalized may die without that event, so after the last start-up
    /// exchange every rank calls `PMIx_Finalize`; failures are then found by the
    /// runtime's own evidence (pidfds, the ring detector), and an abort signals the step
    /// with `scancel` (see [`Bootstrap::abort`]).
    pub(crate) fn started(&mut self, conf: &Config) -> Result<(), Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.started().map_err(launch_err("bootstrap")),
            Bootstrap::Pmix { pmix, detached, .. } => {
                if !conf.off(PMIX_DETACH_ENV) {
                    pmix.finalize().map_err(pmi_err("PMIx detach (PMIx_Finalize)"))?;
                    *detached = true;
                }
                Ok(())
            }
            Bootstrap::Pmi2(_) => Ok(()),
        }
    }

    /// `init` returned (rtrun's end-of-job report).
    pub(crate) fn initialized(&mut self) -> Result<(), Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.initialized().map_err(launch_err("bootstrap")),
            _ => Ok(()),
        }
    }

    /// Finalize began (rtrun's end-of-job report).
    pub(crate) fn finalizing(&mut self) -> Result<(), Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.finalizing().map_err(launch_err("bootstrap")),
            _ => Ok(()),
        }
    }

    /// This rank finalized: told to rtrun, or the PMI session ends.
    pub(crate) fn finalized(&mut self) -> Result<(), Error> {
        let r = match self {
            Bootstrap::Rtrun { client, .. } => client.finalized().map_err(|e| e.to_string()),
            Bootstrap::Pmix { pmix, .. } => pmix.finalize().map_err(|e| e.to_string()),
            Bootstrap::Pmi2(p) => p.finalize().map_err(|e| e.to_string()),
        };
        r.map_err(|e| Error::Transport(format!("bootstrap: {e}")))
    }

    /// Asks the launcher to start `spec`'s processes (R40, `runthrough_launch::spawn`).
    ///
    /// # Errors
    /// [`Error::Unsupported`] outside `rtrun` (PMIx and PMI-2 spawn is not offered:
    /// docs/SLURM.md); [`Error::Spawn`] when the launcher refused or did not answer.
    pub(crate) fn spawn(
        &mut self,
        spec: &runthrough_launch::spawn::SpawnSpec,
    ) -> Result<runthrough_launch::spawn::SpawnReply, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.spawn(spec).map_err(|e| Error::Spawn(format!("launcher: {e}"))),
            _ => Err(Error::Unsupported("spawn needs rtrun (under Slurm: docs/SLURM.md)")),
        }
    }

    /// The `rtrun` client, for the port calls (R40).
    ///
    /// # Errors
    /// [`Error::Unsupported`] outside `rtrun`.
    pub(crate) fn rtrun_client(&mut self) -> Result<&mut Client, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => Ok(client),
            _ => Err(Error::Unsupported("ports need rtrun (under Slurm: docs/SLURM.md)")),
        }
    }

    /// Tells the launcher the parents' decision on spawned world `world` (rtrun only).
    pub(crate) fn spawn_done(&mut self, world: u32, ok: bool) -> Result<(), Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => {
                client.spawn_done(world, ok).map_err(|e| Error::Transport(e.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Asks the service to abort `ranks` with `code`. Returns whether it names the
    /// ranks it then kills in [`Bootstrap::exited`] (rtrun), so the caller may wait for them.
    ///
    /// PMIx and PMI-2 abort the whole job. A process detached from PMIx (see
    /// [`Bootstrap::started`]) asks Slurm instead: `scancel --signal=KILL
    /// $SLURM_JOB_ID.$SLURM_STEP_ID`.
    pub(crate) fn abort(&mut self, ranks: &[u32], code: i32) -> Result<bool, Error> {
        let msg = format!("runthrough: abort with code {code}");
        let transport = |e: runthrough_pmix::Error| Error::Transport(e.to_string());
        match self {
            Bootstrap::Rtrun { client, .. } => {
                client.abort(ranks, code).map(|()| true).map_err(|e| Error::Transport(e.to_string()))
            }
            Bootstrap::Pmix { detached: true, .. } => scancel_step().map(|()| false),
            Bootstrap::Pmix { pmix, .. } => pmix.abort(code, &msg).map(|()| false).map_err(transport),
            Bootstrap::Pmi2(p) => p.abort(&msg).map(|()| false).map_err(transport),
        }
    }

    /// Ranks the service has seen exit (all so far).
    pub(crate) fn exited(&mut self) -> Result<Vec<u32>, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.exited().map_err(|e| Error::Transport(e.to_string())),
            Bootstrap::Pmix { pmix, terminated, .. } => {
                let (new, lost) = pmix.take_terminated();
                if lost {
                    tracing::debug!("PMIx: connection to the server lost");
                }
                for r in new {
                    if !terminated.contains(&r) {
                        tracing::debug!(rank = r, "PMIx event: process terminated");
                        terminated.push(r);
                    }
                }
                Ok(terminated.clone())
            }
            Bootstrap::Pmi2(_) => Ok(Vec::new()),
        }
    }

    /// Ranks the service has seen exit after they finalized (rtrun only).
    pub(crate) fn departed(&mut self) -> Result<Vec<u32>, Error> {
        match self {
            Bootstrap::Rtrun { client, .. } => client.departed().map_err(|e| Error::Transport(e.to_string())),
            _ => Ok(Vec::new()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shm_names_are_per_job_and_host_and_sanitized() {
        assert_eq!(shm_name("slurm.pmix.12.0", "node-1"), "/rt-slurm.pmix.12.0-node-1");
        assert_eq!(shm_name("pmi2-12.3", "a/b c"), "/rt-pmi2-12.3-a_b_c");
        assert_ne!(shm_name("slurm.pmix.12.0", "n"), shm_name("slurm.pmix.12.1", "n"));
        let long = shm_name(&"x".repeat(1000), &"y".repeat(1000));
        assert!(long.len() < 255 && long.starts_with("/rt-"));
    }
}
