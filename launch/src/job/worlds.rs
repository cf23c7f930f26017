//! The launcher's side of spawning (R40, [`crate::spawn`]): each spawn makes a *world*
//! of the parents and the new children, served by a key-value service of its own; the
//! job loop asks here for requests and decisions every round, and tells here which
//! processes exited, so every world a process belongs to learns it.
//!
//! Processes are numbered in one *universe*: the job's own ranks `0..N`, then each
//! spawned child in the order it was started (`--kill RANK@T` names these; a kill of a
//! rank not started yet waits for it).

use std::net::IpAddr;
use std::time::Duration;

use super::{kill_rank, random_hex, Launch, Proc, Rank};
use crate::env::JobEnv;
use crate::hosts::HostSpec;
use crate::outcome::RankStatus;
use crate::report::Cause;
use crate::server::{AbortRequest, Server, SpawnRequest};
use crate::spawn::{SpawnReply, SpawnSpec, RT_APPNUM, RT_SPAWN_PARENTS};

/// One spawned world.
struct World {
    server: Server,
    /// Universe rank of each member, by world rank (parents first).
    members: Vec<u32>,
    parents: usize,
    /// The parents' decision (`SpawnDone`), once made.
    decided: Option<bool>,
    /// Its shared-memory names (unlinked at the end).
    shm_names: Vec<String>,
}

/// Every spawned world of the job, and where each universe rank runs.
pub(super) struct Worlds {
    /// Spawned worlds; world `k` (from 1) is `list[k - 1]`, world 0 the job's own.
    list: Vec<World>,
    /// Host index of every universe rank.
    pub(super) host_of: Vec<usize>,
    /// The job's own ranks.
    own: u32,
    /// Where the worlds' services listen.
    ip: IpAddr,
    /// The start-up timeout the worlds' witnesses use (R31).
    startup: Duration,
}

/// What one round of [`Worlds::serve`] started.
#[derive(Default)]
pub(super) struct Started {
    /// Processes started (and still to be reaped).
    pub(super) processes: usize,
    /// Output forwarders started.
    pub(super) forwarders: usize,
}

impl Worlds {
    pub(super) fn new(host_of: Vec<usize>, ip: IpAddr, startup: Duration) -> Worlds {
        let own = host_of.len() as u32;
        Worlds { list: Vec::new(), host_of, own, ip, startup }
    }

    /// The universe rank of `rank` of world `w`.
    fn universe_rank(&self, w: usize, rank: u32) -> Option<u32> {
        match w {
            0 => (rank < self.own).then_some(rank),
            _ => self.list.get(w - 1)?.members.get(rank as usize).copied(),
        }
    }

    /// Serves what the worlds asked since the last round: spawn requests (children
    /// started and pushed onto `ranks`), the parents' decisions (children of a failed
    /// spawn killed), and spawned worlds whose parents all ended undecided (their
    /// children killed). Returns the abort requests of the spawned worlds, in universe
    /// ranks, for the job loop to apply as its own.
    pub(super) fn serve(
        &mut self,
        own: &Server,
        launch: &Launch<'_>,
        hosts: &[HostSpec],
        ranks: &mut Vec<Rank>,
        started: &mut Started,
    ) -> Vec<AbortRequest> {
        let mut requests: Vec<(usize, SpawnRequest)> = own.take_spawn_requests().into_iter().map(|r| (0, r)).collect();
        let mut done = own.take_spawn_done();
        let mut aborts = Vec::new();
        for (k, w) in self.list.iter().enumerate() {
            requests.extend(w.server.take_spawn_requests().into_iter().map(|r| (k + 1, r)));
            done.extend(w.server.take_spawn_done());
            for a in w.server.take_abort_requests() {
                let map = |r: u32| w.members.get(r as usize).copied();
                if let Some(from) = map(a.from) {
                    aborts.push(AbortRequest {
                        from,
                        ranks: a.ranks.iter().filter_map(|&r| map(r)).collect(),
                        code: a.code,
                    });
                }
            }
        }
        for (w, req) in requests {
            let reply = self.spawn(w, &req, launch, hosts, ranks, started);
            let server = if w == 0 { own } else { &self.list[w - 1].server };
            match reply.encode() {
                Ok(b) => server.answer_spawn(req.id, b),
                Err(e) => tracing::warn!("spawn reply not encodable: {e}"),
            }
        }
        for (world, ok) in done {
            let Some(w) = (world as usize).checked_sub(1).and_then(|i| self.list.get_mut(i)) else { continue };
            if w.decided.is_none() {
                tracing::debug!("world {world}: the parents decided {}", if ok { "success" } else { "failure" });
                w.decided = Some(ok);
                if !ok {
                    cancel(w, ranks);
                }
            }
        }
        // Every parent gone before deciding: nobody will, and the children must not run
        // on alone (R40: none started).
        for (k, w) in self.list.iter_mut().enumerate() {
            let gone = |u: &u32| ranks.get(*u as usize).is_none_or(|r| r.child.is_none());
            if w.decided.is_none() && w.members[..w.parents].iter().all(gone) {
                tracing::debug!("world {}: every parent ended before deciding; its children are killed", k + 1);
                w.decided = Some(false);
                cancel(w, ranks);
            }
        }
        aborts
    }

    /// The spawned world a child `u` was started in, and its rank there.
    fn home(&self, u: u32) -> Option<(&World, u32)> {
        self.list.iter().find_map(|w| {
            let i = w.members[w.parents..].iter().position(|&m| m == u)?;
            Some((w, (w.parents + i) as u32))
        })
    }

    /// Whether universe rank `u` finalized (in its own world; `own` serves the job's).
    pub(super) fn is_finalized(&self, own: &Server, u: u32) -> bool {
        match self.home(u) {
            Some((w, r)) => w.server.is_finalized(r),
            None => own.is_finalized(u),
        }
    }

    /// How far universe rank `u` got (in its own world).
    pub(super) fn phase(&self, own: &Server, u: u32) -> crate::report::Phase {
        match self.home(u) {
            Some((w, r)) => w.server.phase(r),
            None => own.phase(u),
        }
    }

    /// Records in every spawned world holding universe rank `u` that it exited.
    pub(super) fn record_exit(&self, u: u32, status: RankStatus) {
        for w in &self.list {
            if let Some(i) = w.members.iter().position(|&m| m == u) {
                w.server.record_exit(i as u32, status);
            }
        }
    }

    /// Shuts the worlds' services down and unlinks their segment names.
    pub(super) fn finish(&mut self) {
        for w in &mut self.list {
            w.server.shutdown();
            for name in &w.shm_names {
                // Normally unlinked by the world's members already.
                let _ = crate::sys::shm_unlink(name);
            }
        }
    }

    /// One spawn request of world `w`.
    fn spawn(
        &mut self,
        w: usize,
        req: &SpawnRequest,
        launch: &Launch<'_>,
        hosts: &[HostSpec],
        ranks: &mut Vec<Rank>,
        started: &mut Started,
    ) -> SpawnReply {
        let spec = match SpawnSpec::decode(&req.spec) {
            Ok(s) => s,
            Err(e) => return SpawnReply::refused(format!("malformed spawn request: {e}"), 0),
        };
        let children = spec.children();
        let refuse = |why: String| SpawnReply::refused(why, children);
        let parents: Option<Vec<u32>> = spec.parents.iter().map(|&r| self.universe_rank(w, r)).collect();
        let (Some(parents), Some(root)) = (parents, self.universe_rank(w, req.from)) else {
            return refuse("the spawn names a parent outside its world".into());
        };
        if parents.is_empty() || children == 0 || spec.failed.iter().any(|&i| i as usize >= parents.len()) {
            return refuse("a spawn needs parents and at least one child".into());
        }
        let running = ranks.iter().filter(|r| r.child.is_some()).count() as u64;
        if let Some(limit) = launch.limit.filter(|&l| running + u64::from(children) > u64::from(l)) {
            return refuse(format!(
                "{children} more processes would exceed the universe of {limit} ({running} running; rtrun --universe)"
            ));
        }
        // Where each child runs: its application's `host`, else the root's host.
        let mut child_hosts = Vec::with_capacity(children as usize);
        for app in &spec.apps {
            let h = match &app.host {
                None => self.host_of.get(root as usize).copied().unwrap_or(0),
                Some(name) => match hosts.iter().position(|h| h.name == *name) {
                    Some(h) => h,
                    None => return refuse(format!("info host={name:?} is not a host of this job")),
                },
            };
            child_hosts.extend(std::iter::repeat_n(h, app.procs as usize));
        }
        let p = parents.len() as u32;
        let size = p + children;
        let jobid = random_hex(crate::env::JOBID_HEX_LEN / 2);
        let secret = random_hex(crate::env::SECRET_HEX_LEN / 2);
        let server = match Server::start_on(self.ip, size, &secret) {
            Ok(s) => s,
            Err(e) => return refuse(format!("no key-value service for the new world: {e}")),
        };
        server.set_startup_timeout(self.startup);
        let member_hosts: Vec<usize> =
            parents.iter().map(|&u| self.host_of.get(u as usize).copied().unwrap_or(0)).chain(child_hosts).collect();
        let local: Vec<(u32, u32)> = member_hosts
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let before = member_hosts[..i].iter().filter(|x| *x == h).count() as u32;
                (before, member_hosts.iter().filter(|x| *x == h).count() as u32)
            })
            .collect();
        let mut used: Vec<usize> = member_hosts.clone();
        used.sort_unstable();
        used.dedup();
        let shm: Vec<(String, String)> =
            used.iter().map(|&h| (hosts[h].name.clone(), format!("/rt-{jobid}-h{h}"))).collect();
        let shm_of = |h: usize| shm.iter().find(|(n, _)| *n == hosts[h].name).map(|x| x.1.clone()).unwrap_or_default();
        for (i, &u) in parents.iter().enumerate() {
            if spec.failed.contains(&(i as u32)) || ranks.get(u as usize).is_none_or(|r| r.child.is_none()) {
                // Recognized failed (or already gone): out of the world from the start.
                server.exclude(i as u32);
            } else if let Some(pid) = ranks[u as usize].child.as_ref().filter(|_| launch.opts.agent.is_none()) {
                server.watch_process(i as u32, pid.id());
            }
        }
        let mut world = World { server, members: parents, parents: p as usize, decided: None, shm_names: Vec::new() };
        world.shm_names = shm.iter().map(|x| x.1.clone()).collect();
        let mut codes = Vec::with_capacity(children as usize);
        let mut failure: Option<String> = None;
        let mut wr = p;
        for (a, app) in spec.apps.iter().enumerate() {
            for _ in 0..app.procs {
                if failure.is_some() {
                    codes.push(-1);
                    continue;
                }
                let h = member_hosts[wr as usize];
                let (local_rank, local_size) = local[wr as usize];
                let env = JobEnv {
                    rank: wr,
                    size,
                    local_rank,
                    local_size,
                    jobid: jobid.clone(),
                    kv_addr: world.server.addr(),
                    secret: secret.clone(),
                    bind: "none".to_owned(),
                    shm_name: shm_of(h),
                    node: hosts[h].name.clone(),
                };
                let program = resolve(&app.program, app.path.as_deref());
                let args: Vec<std::ffi::OsString> = app.args.iter().map(Into::into).collect();
                let u = ranks.len() as u32;
                let extra = vec![(RT_SPAWN_PARENTS, p.to_string()), (RT_APPNUM, a.to_string())];
                let proc = Proc {
                    label: u,
                    env,
                    host: &hosts[h],
                    program: program.as_ref(),
                    args: &args,
                    extra,
                    wdir: app.wdir.as_deref(),
                    files: None,
                };
                match launch.start(proc) {
                    Ok((rk, n, pid)) => {
                        if let Some(pid) = pid {
                            world.server.watch_process(wr, pid);
                        }
                        tracing::debug!("world {}: child {wr} is universe rank {u}", self.list.len() + 1);
                        ranks.push(rk);
                        self.host_of.push(h);
                        world.members.push(u);
                        started.processes += 1;
                        started.forwarders += n;
                        codes.push(0);
                    }
                    Err(e) => {
                        codes.push(e.raw_os_error().unwrap_or(-1));
                        failure = Some(format!("cannot start {:?}: {e}", app.program));
                    }
                }
                wr += 1;
            }
        }
        let id = self.list.len() as u32 + 1;
        let reply = match failure {
            Some(reason) => {
                // All or none (R40): those started are killed.
                world.decided = Some(false);
                cancel(&world, ranks);
                SpawnReply { ok: false, reason, codes, world: id, ..SpawnReply::default() }
            }
            None => SpawnReply {
                ok: true,
                reason: String::new(),
                codes,
                world: id,
                jobid,
                kv_addr: world.server.addr().to_string(),
                secret,
                local,
                shm,
                universe: launch.universe,
            },
        };
        self.list.push(world);
        reply
    }
}

/// Kills the children of a world whose spawn failed; their ends are not the job's
/// failures ([`Cause::Cancelled`]).
fn cancel(w: &World, ranks: &mut [Rank]) {
    for &u in &w.members[w.parents..] {
        if let Some(rk) = ranks.get_mut(u as usize) {
            if rk.child.is_some() && rk.cause == Cause::None {
                rk.cause = Cause::Cancelled;
            }
            kill_rank(u, rk);
        }
    }
}

/// The program to run: a bare name found in one of `path`'s directories (spawn's info
/// `path`) when given there, else as given (`PATH` applies).
fn resolve(program: &str, path: Option<&str>) -> std::ffi::OsString {
    if let Some(dirs) = path.filter(|_| !program.contains('/')) {
        for d in dirs.split(':').filter(|d| !d.is_empty()) {
            let p = std::path::Path::new(d).join(program);
            if p.is_file() {
                return p.into_os_string();
            }
        }
    }
    program.into()
}
