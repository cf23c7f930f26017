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
use crate::server::{AbortRequest, Server, SpawnRequest, PORT_CLIENT};
use crate::spawn::{PortName, SpawnReply, SpawnSpec, RT_APPNUM, RT_SPAWN_PARENTS};
use crate::wire::Request;

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
    /// Made by a spawn (its members after the parents are its children); else by
    /// accept/connect (they are the connecting group).
    spawned: bool,
    /// The universe rank that asked for it (the spawning root).
    root: u32,
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
    /// Secrets of the open ports.
    ports: Vec<String>,
    /// The name service: port by service name (`MPI_Publish_name`), for every world of
    /// the job.
    names: std::collections::HashMap<String, String>,
    /// Accepts waiting for a connect: (world, request).
    accepts: Vec<(usize, SpawnRequest)>,
    /// Connects waiting for an accept: (world, request, since).
    connects: Vec<(usize, SpawnRequest, std::time::Instant)>,
}

/// How long a connect waits for an accept on its port before the launcher refuses it
/// (the server gives up on it at 60 s).
const CONNECT_PATIENCE: Duration = Duration::from_secs(55);

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
        Worlds {
            list: Vec::new(),
            host_of,
            own,
            ip,
            startup,
            ports: Vec::new(),
            names: std::collections::HashMap::new(),
            accepts: Vec::new(),
            connects: Vec::new(),
        }
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
            let id = req.id;
            let answer = match &req.req {
                Request::Spawn { spec } => Some(self.spawn(w, req.from, spec, launch, hosts, ranks, started).encode()),
                Request::OpenPort => Some(Ok(self.open_port(own).into_bytes())),
                Request::ClosePort { name } => {
                    if let Ok(p) = name.parse::<PortName>() {
                        self.ports.retain(|x| *x != p.secret);
                        own.close_port(p.secret.as_bytes());
                    }
                    Some(Ok(Vec::new()))
                }
                Request::Publish { service, port } => Some(Ok(match self.names.contains_key(service) {
                    true => format!("{service:?} is published already").into_bytes(),
                    false => {
                        self.names.insert(service.clone(), port.clone());
                        Vec::new()
                    }
                })),
                Request::Lookup { service } => {
                    Some(Ok(self.names.get(service).cloned().unwrap_or_default().into_bytes()))
                }
                Request::Unpublish { service } => Some(Ok(match self.names.remove(service) {
                    Some(_) => Vec::new(),
                    None => format!("{service:?} is not published").into_bytes(),
                })),
                Request::Accept { .. } => {
                    self.accepts.push((w, req));
                    None
                }
                Request::Connect { .. } => {
                    self.connects.push((w, req, std::time::Instant::now()));
                    None
                }
                _ => Some(Ok(b"not a request for the launcher".to_vec())),
            };
            if let Some(a) = answer {
                self.answer(own, w, id, a);
            }
        }
        self.match_ports(own, launch, hosts, ranks);
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
        // Every parent gone before deciding, or the root gone before any parent joined
        // (nobody else got the answer): nobody will decide, and the children must not
        // run on alone (R40: none started). A parent that joined decides and says so.
        for (k, w) in self.list.iter_mut().enumerate() {
            let gone = |u: &u32| ranks.get(*u as usize).is_none_or(|r| r.child.is_none());
            let orphaned = w.members[..w.parents].iter().all(gone)
                || (gone(&w.root) && !(0..w.parents as u32).any(|p| w.server.heard_from(p)));
            if w.decided.is_none() && orphaned {
                tracing::debug!("world {}: no parent left to decide; its children are killed", k + 1);
                w.decided = Some(false);
                cancel(w, ranks);
            }
        }
        aborts
    }

    /// The spawned world a child `u` was started in, and its rank there.
    fn home(&self, u: u32) -> Option<(&World, u32)> {
        self.list.iter().filter(|w| w.spawned).find_map(|w| {
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

    /// Answers request `id` of world `w`.
    fn answer(&self, own: &Server, w: usize, id: u64, a: Result<Vec<u8>, crate::error::Error>) {
        let server = if w == 0 { own } else { &self.list[w - 1].server };
        match a {
            Ok(b) => server.answer_spawn(id, b),
            Err(e) => tracing::warn!("launcher answer not encodable: {e}"),
        }
    }

    /// A new port: its secret admitted by the job's own service, whose address it names.
    fn open_port(&mut self, own: &Server) -> String {
        let secret = random_hex(crate::env::SECRET_HEX_LEN / 2);
        own.open_port(secret.as_bytes());
        self.ports.push(secret.clone());
        PortName { addr: own.addr(), secret }.to_string()
    }

    /// Pairs each pending connect with an accept on its port: one joint world of the
    /// accepting group (ranks first) and the connecting one, the same answer to both
    /// roots. A connect left unpaired for [`CONNECT_PATIENCE`] is refused (its client
    /// gives up soon after); one naming no open port at once.
    fn match_ports(&mut self, own: &Server, launch: &Launch<'_>, hosts: &[HostSpec], ranks: &[Rank]) {
        let mut k = 0;
        while k < self.connects.len() {
            let (cw, creq, since) = &self.connects[k];
            let Request::Connect { name, .. } = &creq.req else { unreachable!("only connects are queued here") };
            let open = name.parse::<PortName>().is_ok_and(|p| self.ports.contains(&p.secret));
            let accept =
                self.accepts.iter().position(|(_, a)| matches!(&a.req, Request::Accept { name: n, .. } if n == name));
            let reply = match (open, accept) {
                (false, _) => Some(SpawnReply::refused(format!("no open port {name:?}"), 0)),
                (true, None) if since.elapsed() > CONNECT_PATIENCE => {
                    Some(SpawnReply::refused("nobody accepted on the port in time", 0))
                }
                (true, None) => None,
                (true, Some(a)) => {
                    let (aw, areq) = self.accepts.remove(a);
                    let (cw, creq) = (*cw, creq.clone());
                    let joint = self.joint(aw, &areq, cw, &creq, launch, hosts, ranks);
                    self.answer(own, aw, areq.id, joint.encode());
                    Some(joint)
                }
            };
            match reply {
                Some(r) => {
                    let (cw, creq, _) = self.connects.remove(k);
                    self.answer(own, cw, creq.id, r.encode());
                }
                None => k += 1,
            }
        }
    }

    /// The joint world of an accepting and a connecting group (`MPI_Comm_accept` and
    /// `MPI_Comm_connect`); the connecting group may be another job's (a port client:
    /// its members are `u32::MAX` here, placed by the host names it gave).
    #[allow(clippy::too_many_arguments)]
    fn joint(
        &mut self,
        aw: usize,
        areq: &SpawnRequest,
        cw: usize,
        creq: &SpawnRequest,
        launch: &Launch<'_>,
        hosts: &[HostSpec],
        ranks: &[Rank],
    ) -> SpawnReply {
        let spec = |r: &SpawnRequest| match &r.req {
            Request::Accept { spec, .. } | Request::Connect { spec, .. } => SpawnSpec::decode(spec).ok(),
            _ => None,
        };
        let (Some(a), Some(c)) = (spec(areq), spec(creq)) else {
            return SpawnReply::refused("malformed accept or connect", 0);
        };
        let ours = |w: usize, spec: &SpawnSpec| -> Option<Vec<u32>> {
            spec.parents.iter().map(|&r| self.universe_rank(w, r)).collect()
        };
        let Some(mut members) = ours(aw, &a) else {
            return SpawnReply::refused("the accepting group is not of this job", 0);
        };
        let foreign = creq.from == PORT_CLIENT;
        let connecting = match foreign {
            true => vec![u32::MAX; c.parents.len()],
            false => match ours(cw, &c) {
                Some(m) => m,
                None => return SpawnReply::refused("the connecting group is not of this job", 0),
            },
        };
        if members.is_empty() || connecting.is_empty() || (foreign && c.nodes.len() != connecting.len()) {
            return SpawnReply::refused("accept and connect need groups (and the connecting hosts)", 0);
        }
        let host = |u: u32| hosts[self.host_of.get(u as usize).copied().unwrap_or(0)].name.clone();
        let mut nodes: Vec<String> = members.iter().map(|&u| host(u)).collect();
        match foreign {
            true => nodes.extend(c.nodes.iter().cloned()),
            false => nodes.extend(connecting.iter().map(|&u| host(u))),
        }
        let Base { server, jobid, secret, local, shm } = match self.base(&nodes) {
            Ok(b) => b,
            Err(e) => return SpawnReply::refused(e, 0),
        };
        let p = members.len();
        let failed: Vec<u32> = a.failed.iter().copied().chain(c.failed.iter().map(|&i| i + p as u32)).collect();
        members.extend(connecting);
        admit(&server, &members, &failed, ranks, launch);
        let kv_addr = server.addr().to_string();
        let shm_names = shm.iter().map(|x| x.1.clone()).collect();
        let root = members[0];
        let world = World { server, members, parents: p, decided: Some(true), shm_names, spawned: false, root };
        self.list.push(world);
        let id = self.list.len() as u32;
        tracing::debug!("world {id}: {p} accepting and {} connecting processes", nodes.len() - p);
        let (universe, parents) = (launch.universe, p as u32);
        SpawnReply {
            ok: true,
            world: id,
            jobid,
            kv_addr,
            secret,
            local,
            shm,
            universe,
            parents,
            ..SpawnReply::default()
        }
    }

    /// The spawned worlds whose children may still be starting (the parents have not
    /// decided yet), for the start-up watch: each world's service and the universe rank
    /// of each of its children by world rank (`u32::MAX` for the parents, whose start-up
    /// was their job's: they are not watched here).
    pub(super) fn starting(&self) -> Vec<(&Server, Vec<u32>)> {
        let children =
            |w: &World| w.members.iter().enumerate().map(|(i, &u)| if i < w.parents { u32::MAX } else { u }).collect();
        self.list.iter().filter(|w| w.spawned && w.decided.is_none()).map(|w| (&w.server, children(w))).collect()
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

    /// A new world of members on hosts `nodes` (by name): its service, each member's
    /// place on its host, one shared-memory name per host.
    fn base(&self, nodes: &[String]) -> Result<Base, String> {
        let jobid = random_hex(crate::env::JOBID_HEX_LEN / 2);
        let secret = random_hex(crate::env::SECRET_HEX_LEN / 2);
        let server = Server::start_on(self.ip, nodes.len() as u32, &secret)
            .map_err(|e| format!("no key-value service for the new world: {e}"))?;
        server.set_startup_timeout(self.startup);
        let local = nodes
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let before = nodes[..i].iter().filter(|x| *x == h).count() as u32;
                (before, nodes.iter().filter(|x| *x == h).count() as u32)
            })
            .collect();
        let mut used: Vec<&String> = nodes.iter().collect();
        used.sort_unstable();
        used.dedup();
        let shm = used.iter().enumerate().map(|(i, h)| ((*h).clone(), format!("/rt-{jobid}-h{i}"))).collect();
        Ok(Base { server, jobid, secret, local, shm })
    }

    /// One spawn request of world `w`.
    #[allow(clippy::too_many_arguments)]
    fn spawn(
        &mut self,
        w: usize,
        from: u32,
        spec: &[u8],
        launch: &Launch<'_>,
        hosts: &[HostSpec],
        ranks: &mut Vec<Rank>,
        started: &mut Started,
    ) -> SpawnReply {
        let spec = match SpawnSpec::decode(spec) {
            Ok(s) => s,
            Err(e) => return SpawnReply::refused(format!("malformed spawn request: {e}"), 0),
        };
        let children = spec.children();
        let refuse = |why: String| SpawnReply::refused(why, children);
        let parents: Option<Vec<u32>> = spec.parents.iter().map(|&r| self.universe_rank(w, r)).collect();
        let (Some(parents), Some(root)) = (parents, self.universe_rank(w, from)) else {
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
        let member_hosts: Vec<usize> =
            parents.iter().map(|&u| self.host_of.get(u as usize).copied().unwrap_or(0)).chain(child_hosts).collect();
        let nodes: Vec<String> = member_hosts.iter().map(|&h| hosts[h].name.clone()).collect();
        let Base { server, jobid, secret, local, shm } = match self.base(&nodes) {
            Ok(b) => b,
            Err(e) => return refuse(e),
        };
        let shm_of = |h: usize| shm.iter().find(|(n, _)| *n == hosts[h].name).map(|x| x.1.clone()).unwrap_or_default();
        admit(&server, &parents, &spec.failed, ranks, launch);
        let shm_names = shm.iter().map(|x| x.1.clone()).collect();
        let mut world =
            World { server, members: parents, parents: p as usize, decided: None, shm_names, spawned: true, root };
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
                parents: p,
            },
        };
        self.list.push(world);
        reply
    }
}

/// A new world's service and layout ([`Worlds::base`]).
struct Base {
    server: Server,
    jobid: String,
    secret: String,
    /// Per member: (local rank, local size).
    local: Vec<(u32, u32)>,
    /// Per host: (name, shared-memory name).
    shm: Vec<(String, String)>,
}

/// Admits the members of this job (`members`, universe ranks; `u32::MAX` for another
/// job's) to a new world's `server`: those in `failed` (indices) or already gone are out
/// from the start, the others' processes watched by the witness (R32).
fn admit(server: &Server, members: &[u32], failed: &[u32], ranks: &[Rank], launch: &Launch<'_>) {
    for (i, &u) in members.iter().enumerate() {
        if u == u32::MAX {
            // Another job's process (a connecting group): this launcher cannot watch it.
            server.exit_on_close(i as u32);
            continue;
        }
        let rk = ranks.get(u as usize);
        if failed.contains(&(i as u32)) || rk.is_none_or(|r| r.child.is_none()) {
            server.exclude(i as u32);
        } else if let Some(child) = rk.and_then(|r| r.child.as_ref()).filter(|_| launch.opts.agent.is_none()) {
            server.watch_process(i as u32, child.id());
        }
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
