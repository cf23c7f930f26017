//! Dynamic processes (MPI-4.1 §11.8; run-through R40): [`Runtime::spawn`],
//! [`Runtime::spawn_multiple`] and [`Runtime::parent`].
//!
//! A spawn makes a new *world* (`runthrough_launch::spawn`): the spawning communicator's
//! members are its ranks `0..P`, the children `P..P+C`. Every member starts its transports
//! and failure detector in that world as at `init` — the children from their
//! environment, each parent by joining it in-process (a second engine, progress thread
//! and witness, kept by the [`Runtime`] until finalize) — so children are watched like
//! any rank, and the parent inter-communicator runs on the same engine machinery as any
//! communicator. Layout of a spawned world's contexts: the children's `MPI_COMM_WORLD`
//! 0, self 2, the inter-communicator's bridge 4, inner bridge 6, the parents' side 8, the
//! children's side 10; created communicators from 12.
//!
//! ## All or none (R40)
//! 1. The spawning communicator must be collectively active (`RankFailStop` otherwise,
//!    before anything starts); a root recognized failed is `InvalidRank` (MPI_ERR_RANK).
//! 2. The root asks the launcher, which starts every child or none (it kills those
//!    started when one cannot be) and answers; the answer is broadcast to the parents.
//! 3. Each parent joins the world (start-up fences with the children; recognized
//!    failed parents are out of it from the start, so they are recognized failures of
//!    the children's parent inter-communicator).
//! 4. One agreement over the spawning communicator decides: it succeeds only when every
//!    live parent joined, no child failed during start-up and no parent failed that was
//!    not recognized before. Every parent tells the launcher the decision; on failure it
//!    kills the children (and so it does when the root dies before any parent joined).
//!
//! So every live parent returns the inter-communicator, or every one returns an error
//! and no child runs on: `Spawn` (MPI_ERR_SPAWN) with per-child codes when a child could
//! not start, `RankFailStop` when a parent failed.

use std::sync::Arc;

use runthrough_engine::Rank;
use runthrough_launch::spawn::{SpawnReply, SpawnSpec, RT_APPNUM, RT_SPAWN_PARENTS, RT_UNIVERSE_SIZE};

use super::{init_with, Runtime};
use crate::config::Config;
use crate::intercomm::Sides;
use crate::{Comm, Error, ErrorMode, InterComm};

pub use runthrough_launch::spawn::App as SpawnApp;

/// The inter-communicator's first context in a spawned world.
const BRIDGE_CTX: u32 = 4;
/// The first context a spawned world's creations propose.
pub(super) const FIRST_CTX: u32 = BRIDGE_CTX + 8;

/// A spawn that failed: the error, and each child's code (0: it had started, and was
/// killed because another could not; an OS error number: it could not start; -1: not
/// tried). Empty codes when the parents failed before the launcher answered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{error}")]
pub struct SpawnError {
    /// What failed (`Error::Spawn`, `RankFailStop`, `InvalidRank`, ...).
    pub error: Error,
    /// Per child, in order.
    pub codes: Vec<i32>,
}

impl From<Error> for SpawnError {
    fn from(error: Error) -> SpawnError {
        SpawnError { error, codes: Vec::new() }
    }
}

/// A spawned world as one of its members sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// The parents (ranks `0..parents`).
    pub(super) parents: u32,
    /// Parents and children.
    pub(super) size: u32,
}

impl Layout {
    /// The layout `RT_SPAWN_PARENTS` gives a world of `size` (none for a job's own world).
    pub(super) fn from_conf(conf: &Config, size: u32) -> Result<Option<Layout>, Error> {
        let Some(v) = conf.get(RT_SPAWN_PARENTS) else { return Ok(None) };
        match v.trim().parse::<u32>() {
            Ok(p) if p >= 1 && p < size => Ok(Some(Layout { parents: p, size })),
            _ => Err(Error::Init(format!("{RT_SPAWN_PARENTS}={v:?}: expected 1..{size}"))),
        }
    }

    /// This process's world communicator and the inter-communicator to the other side:
    /// a child's `MPI_COMM_WORLD` (the children, context 0) and its parent
    /// inter-communicator; a parent's side of the inter-communicator and the whole of it.
    /// `out`: the world ranks out at start-up (recognized failed parents, R40).
    pub(super) fn comms(&self, shared: &Arc<crate::shared::Shared>, me: u32, out: &[u32]) -> (Comm, InterComm) {
        let p = self.parents as usize;
        let parent = (me as usize) < p;
        let group: Arc<[Rank]> = (0..self.size).map(Rank).collect();
        let rec_bridge: Vec<u32> = out.iter().copied().filter(|&r| r < self.size).collect();
        let rec_local: Vec<u32> = match parent {
            true => rec_bridge.iter().copied().filter(|&r| (r as usize) < p).collect(),
            false => rec_bridge.iter().filter(|&&r| r as usize >= p).map(|&r| r - self.parents).collect(),
        };
        let mode = ErrorMode::ErrorsAreFatal;
        let sides = Sides { ctx: BRIDGE_CTX, group: group.clone(), low: p, local_low: parent, mode: mode.clone() };
        let inter = InterComm::assemble(shared, sides, &rec_bridge, &rec_local);
        if parent {
            return (inter.local.clone(), inter);
        }
        let children: Arc<[Rank]> = group[p..].into();
        let world = Comm::new(shared.clone(), runthrough_engine::ContextId(0), children, me - self.parents, mode);
        world.recognize(&rec_local);
        (world, inter)
    }
}

impl Runtime {
    /// The inter-communicator to this process's parents (MPI_Comm_get_parent): `None`
    /// unless this process was spawned. Parents recognized failed when they spawned it
    /// are recognized failures in it (R40).
    pub fn parent(&self) -> Option<InterComm> {
        self.parent.clone().filter(|_| self.layout.is_some_and(|l| self.shared.rank >= l.parents))
    }

    /// `MPI_UNIVERSE_SIZE`: how many processes the job may hold at once (`rtrun
    /// --universe`); `None` outside `rtrun`.
    pub fn universe_size(&self) -> Option<u32> {
        self.conf.get(RT_UNIVERSE_SIZE).and_then(|v| v.trim().parse().ok())
    }

    /// `MPI_APPNUM`: which application of its spawn this process runs (`None` for the
    /// job's own ranks).
    pub fn appnum(&self) -> Option<u32> {
        self.conf.get(RT_APPNUM).and_then(|v| v.trim().parse().ok())
    }

    /// Starts `app.procs` processes of `app` (MPI_Comm_spawn) and returns the
    /// inter-communicator to them (local group: `comm`'s members; remote: the children,
    /// whose `MPI_COMM_WORLD` is theirs alone). Collective over `comm`; `app` matters at
    /// `root` only. All or none under failures (R40, module docs).
    ///
    /// # Errors
    /// [`SpawnError`]: `Spawn` when a child could not start (its code says why),
    /// `RankFailStop` when `comm` is not collectively active or a parent failed during
    /// the spawn, `InvalidRank` for a root out of range or recognized failed,
    /// `Unsupported` outside `rtrun`.
    pub fn spawn(&self, comm: &Comm, root: usize, app: &SpawnApp) -> Result<InterComm, SpawnError> {
        self.spawn_multiple(comm, root, std::slice::from_ref(app))
    }

    /// [`Runtime::spawn`] of several programs at once (MPI_Comm_spawn_multiple): the
    /// children of `apps[0]` first; each child's [`Runtime::appnum`] is its program's index.
    ///
    /// # Errors
    /// As [`Runtime::spawn`].
    pub fn spawn_multiple(&self, comm: &Comm, root: usize, apps: &[SpawnApp]) -> Result<InterComm, SpawnError> {
        let r = self.spawn_inner(comm, root, apps);
        if let Err(e) = &r {
            // The communicator's error mode applies to the error (fatal by default).
            let _ = comm.check::<()>(Err(e.error.clone()));
        }
        r
    }

    fn spawn_inner(&self, comm: &Comm, root: usize, apps: &[SpawnApp]) -> Result<InterComm, SpawnError> {
        let size = comm.size() as u32;
        let (members, before, active) = prologue(comm, root)?;
        // 2. The root asks the launcher; the answer goes to every parent.
        let reply = active.and_then(|()| {
            let mut answer: Vec<u8> = Vec::new();
            if comm.rank() == root {
                let failed = (0..size).filter(|&i| before.contains(&members[i as usize])).collect();
                let spec = SpawnSpec { parents: members.clone(), failed, apps: apps.to_vec(), nodes: Vec::new() };
                let refused = |e: Error| SpawnReply::refused(e.to_string(), spec.children());
                let reply = match check_apps(apps) {
                    Err(e) => refused(e),
                    Ok(()) => match comm.inner.shared.bootstrap.lock().as_mut() {
                        Some(b) => b.spawn(&spec).unwrap_or_else(refused),
                        None => refused(Error::Unsupported("spawn needs rtrun (this process is a singleton)")),
                    },
                };
                answer = reply.encode().unwrap_or_default();
            }
            share(comm, root, answer)
        });
        // 3. Join the world.
        let joined = match &reply {
            Ok(r) if r.ok => self.join(r, comm.rank() as u32),
            Ok(r) => Err(Error::Spawn(r.reason.clone())),
            Err(e) => Err(e.clone()),
        };
        let healthy = joined.as_ref().is_ok_and(|rt| {
            let e = rt.shared.engine.lock();
            (size..rt.shared.world_size).all(|c| !e.is_failed(Rank(c)))
        });
        // 4. One agreement decides; a failure not recognized before fails it.
        let decided = comm.agree_failed(i32::from(healthy)).map(|(flag, failed)| {
            comm.learn_failed(&failed);
            let new = failed.iter().find(|w| !before.contains(&(**w as u32))).copied();
            (flag == 1, new)
        });
        let ok = matches!(decided, Ok((true, None)));
        if let Some(r) = reply.as_ref().ok().filter(|r| r.ok) {
            if let Some(b) = comm.inner.shared.bootstrap.lock().as_mut() {
                if let Err(e) = b.spawn_done(r.world, ok) {
                    tracing::warn!(error = %e, "could not tell the launcher the spawn's outcome");
                }
            }
        }
        if ok {
            let rt = joined.expect("joined (agreed)");
            let inter = rt.parent.clone().expect("a spawned world's inter-communicator");
            inter.set_error_mode(comm.error_mode());
            self.worlds.lock().push(rt);
            return Ok(inter);
        }
        let codes = reply.as_ref().map(|r| r.codes.clone()).unwrap_or_default();
        let error = match (decided, &reply, joined) {
            (Err(e), _, _) => e,
            (Ok((_, Some(w))), _, _) => {
                Error::RankFailStop { rank: members.iter().position(|&m| m as usize == w).unwrap_or(0) as u32 }
            }
            (_, Ok(r), _) if !r.ok => Error::Spawn(r.reason.clone()),
            // The world did not start here (its fences timed out, say): a spawn error
            // (MPI_ERR_SPAWN), as at the parents that joined and saw the agreement fail.
            (_, _, Err(e)) => Error::Spawn(format!("joining the spawned world: {e}")),
            _ => Error::Spawn("a child or a parent failed during the spawn".into()),
        };
        Err(SpawnError { error, codes })
    }

    /// Joins the world `r` describes as its rank `rank`.
    pub(super) fn join(&self, r: &SpawnReply, rank: u32) -> Result<Runtime, Error> {
        let parents = r.parents;
        let (local_rank, local_size) =
            r.local.get(rank as usize).copied().ok_or(Error::Spawn("short answer".into()))?;
        let node = self.conf.get("RT_NODE").unwrap_or_default();
        let shm = r.shm.iter().find(|(h, _)| h == node).map(|x| x.1.clone()).unwrap_or_default();
        let conf = self
            .conf
            .clone()
            .var("RT_RANK", rank.to_string())
            .var("RT_SIZE", r.local.len().to_string())
            .var("RT_LOCAL_RANK", local_rank.to_string())
            .var("RT_LOCAL_SIZE", local_size.to_string())
            .var("RT_JOBID", r.jobid.clone())
            .var("RT_KV_ADDR", r.kv_addr.clone())
            .var("RT_KV_SECRET", r.secret.clone())
            .var("RT_SHM_NAME", shm)
            .var("RT_BIND", "none")
            .var(RT_SPAWN_PARENTS, parents.to_string())
            .unset("RT_TEST_LATE_START")
            .unset(RT_APPNUM);
        let conf = match self.conf.get(DIE_JOINING_ENV).and_then(|v| v.trim().parse::<u32>().ok()) {
            Some(r) if r == self.world.rank() as u32 => conf.var(DIE_CONNECTED_ENV, "1"),
            _ => conf,
        };
        init_with(conf.unset(DIE_JOINING_ENV))
    }
}

/// Environment variable for testing R40: `RANK` makes the process of world rank `RANK`
/// die (SIGKILL) as soon as it connected to the service of a world it joins (a spawned or
/// joint world): a member that dies during the world's start-up.
pub(crate) const DIE_JOINING_ENV: &str = "RT_TEST_DIE_JOINING";
/// Set by [`DIE_JOINING_ENV`] in the joining process's start-up ([`crate::init_with`]).
pub(crate) const DIE_CONNECTED_ENV: &str = "RT_TEST_DIE_CONNECTED";

/// Step 1 of a spawn, accept or connect over `comm` with `root`: the members (world
/// ranks), those recognized failed, and whether `comm` is collectively active (when not,
/// this member's part is a "no" in the deciding agreement: a member that left here would
/// leave the others waiting in it).
///
/// # Errors
/// `InvalidRank` for a root out of range or recognized failed (MPI_ERR_RANK).
pub(super) fn prologue(comm: &Comm, root: usize) -> Result<Prologue, Error> {
    let before = comm.recognized_world();
    let members: Vec<u32> = comm.members().iter().map(|r| r.0).collect();
    if root >= comm.size() || before.contains(&members[root]) {
        return Err(Error::InvalidRank { rank: root as i64, size: comm.size() as u32 });
    }
    let active = comm.usable().and_then(|()| match comm.collectives_enabled() {
        true => Ok(()),
        false => Err(Error::RankFailStop { rank: 0 }),
    });
    Ok((members, before, active))
}

/// [`prologue`]'s result: the members, those recognized failed (world ranks), and
/// whether the communicator is collectively active.
pub(super) type Prologue = (Vec<u32>, Vec<u32>, Result<(), Error>);

/// Broadcasts the root's `answer` (an encoded reply of the launcher) over `comm`.
pub(super) fn share(comm: &Comm, root: usize, mut answer: Vec<u8>) -> Result<SpawnReply, Error> {
    let mut len = [answer.len() as u64];
    comm.bcast(&mut len, root)?;
    answer.resize(len[0] as usize, 0);
    comm.bcast(&mut answer, root)?;
    SpawnReply::decode(&answer).map_err(|e| Error::Spawn(format!("launcher answer: {e}")))
}

/// Refuses what no launcher could start.
fn check_apps(apps: &[SpawnApp]) -> Result<(), Error> {
    if apps.is_empty() || apps.iter().any(|a| a.procs == 0 || a.program.is_empty()) {
        return Err(Error::InvalidArg("spawn: every program needs a name and at least one process"));
    }
    Ok(())
}
