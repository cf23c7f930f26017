//! Establishing communication between groups that did not spawn each other (MPI-4.1
//! §11.10; run-through §17.10.1, R40): [`Runtime::open_port`], [`Runtime::close_port`],
//! [`Runtime::accept`], [`Runtime::connect`] — between the groups of two jobs, each
//! started by its own `rtrun`, or within one job.
//!
//! A port is a secret the accepting job's launcher admits on its key-value service
//! (`rtport/IP:PORT/SECRET`). `accept`'s root asks its launcher to wait for a
//! connection; `connect`'s root connects to that launcher as a client of the port and
//! names its group and their hosts. The launcher pairs them and makes a *joint world*
//! (the accepting group its ranks first, then the connecting one), served like a spawned
//! world (`spawn.rs`): every member of both groups joins it in-process, so the resulting
//! inter-communicator runs on a world of its own with its own detector.
//!
//! Uniform under failures (R40): each group first agrees over its own communicator that
//! every live member joined (a member that did not, or a failure not recognized before,
//! makes it a "no"), then all members of both groups that joined run one agreement over
//! the joint world: every member gets the inter-communicator, or every one an error.
//! Recognized failed members of either communicator are out of the joint world from the
//! start and recognized failures of the inter-communicator.
//!
//! Limits: the connecting group's processes are not the accepting launcher's, so it has
//! no exit records of them; it records one as exited when its last connection to the
//! joint world's service closes during the start-up (a dead process's sockets close), so
//! both groups fail alike at once. A connecting member that dies before it reached that
//! service holds the start-up until its fences time out (60 s); after the start-up,
//! failures are found by the joint world's detector as any. A live member whose join
//! fails after the joint start-up completed elsewhere (its `init` in the joint world
//! errs) leaves the joint agreement waiting for it: its process is alive, so the witness
//! never confirms it failed (not seen in tests; it would need a way to leave a world).

use std::time::Duration;

use runthrough_launch::client::Client;
use runthrough_launch::spawn::{PortName, SpawnReply, SpawnSpec};

use super::spawn::{prologue, share};
use super::Runtime;
use crate::{Comm, Error, InterComm};

/// How long `connect`'s root waits to reach the accepting launcher.
const PORT_CONNECT: Duration = Duration::from_secs(10);

/// Which side of a connection a group is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Accept,
    Connect,
}

impl Runtime {
    /// A new port of this job (MPI_Open_port): a name to give the connecting side (at
    /// most 256 bytes, MPI_MAX_PORT_NAME).
    ///
    /// # Errors
    /// `Unsupported` outside `rtrun`; `Transport` when the launcher cannot be reached.
    pub fn open_port(&self) -> Result<String, Error> {
        let mut b = self.shared.bootstrap.lock();
        let c = b.as_mut().ok_or(Error::Unsupported("ports need rtrun"))?.rtrun_client()?;
        c.open_port().map_err(|e| Error::Transport(format!("open_port: {e}")))
    }

    /// Closes port `name` (MPI_Close_port): no connection is accepted on it any more.
    ///
    /// # Errors
    /// `InvalidArg` for a name that is not a port; as [`Runtime::open_port`].
    pub fn close_port(&self, name: &str) -> Result<(), Error> {
        name.parse::<PortName>().map_err(|_| Error::InvalidArg("not a port name"))?;
        let mut b = self.shared.bootstrap.lock();
        let c = b.as_mut().ok_or(Error::Unsupported("ports need rtrun"))?.rtrun_client()?;
        c.close_port(name).map_err(|e| Error::Transport(format!("close_port: {e}")))
    }

    /// Publishes port `port` under `service` in the launcher's name service
    /// (MPI_Publish_name), visible to every process of the job (spawned ones too).
    ///
    /// # Errors
    /// `InvalidArg` when `service` is published already; as [`Runtime::open_port`].
    pub fn publish_name(&self, service: &str, port: &str) -> Result<(), Error> {
        self.names(|c| c.publish(service, port))?.map_err(|_| Error::InvalidArg("the service is published already"))
    }

    /// The port published under `service` (MPI_Lookup_name), `None` when none is.
    ///
    /// # Errors
    /// As [`Runtime::open_port`].
    pub fn lookup_name(&self, service: &str) -> Result<Option<String>, Error> {
        self.names(|c| c.lookup(service))
    }

    /// Withdraws `service` (MPI_Unpublish_name).
    ///
    /// # Errors
    /// `InvalidArg` when `service` is not published; as [`Runtime::open_port`].
    pub fn unpublish_name(&self, service: &str) -> Result<(), Error> {
        self.names(|c| c.unpublish(service))?.map_err(|_| Error::InvalidArg("the service is not published"))
    }

    /// Runs one name-service call on the launcher.
    fn names<T>(&self, f: impl FnOnce(&mut Client) -> Result<T, runthrough_launch::Error>) -> Result<T, Error> {
        let mut b = self.shared.bootstrap.lock();
        let c = b.as_mut().ok_or(Error::Unsupported("the name service needs rtrun"))?.rtrun_client()?;
        f(c).map_err(|e| Error::Transport(format!("name service: {e}")))
    }

    /// Accepts a connection on port `name` (MPI_Comm_accept): collective over `comm`,
    /// `name` matters at `root` only; waits until a group connects. Returns the
    /// inter-communicator (remote group: the connecting one). Uniform (module docs).
    ///
    /// # Errors
    /// `RankFailStop` when `comm` is not collectively active or a member of either group
    /// failed during the call; `InvalidRank` for a bad root; `Spawn` when the joint world
    /// could not start; `Unsupported` outside `rtrun`.
    pub fn accept(&self, name: &str, comm: &Comm, root: usize) -> Result<InterComm, Error> {
        let r = self.establish(Side::Accept, name, comm, root);
        comm.check(r)
    }

    /// Connects to the group accepting on port `name` (MPI_Comm_connect): collective
    /// over `comm`, `name` matters at `root` only. Returns the inter-communicator (remote
    /// group: the accepting one). Uniform (module docs).
    ///
    /// # Errors
    /// `Spawn` (MPI_ERR_PORT through the ABI) when nobody accepts on the port within a
    /// minute or it is not a port; otherwise as [`Runtime::accept`].
    pub fn connect(&self, name: &str, comm: &Comm, root: usize) -> Result<InterComm, Error> {
        let r = self.establish(Side::Connect, name, comm, root);
        comm.check(r)
    }

    fn establish(&self, side: Side, name: &str, comm: &Comm, root: usize) -> Result<InterComm, Error> {
        let (members, before, active) = prologue(comm, root)?;
        let n = members.len() as u32;
        // The connecting group tells the accepting launcher where its members run.
        let nodes = active.and_then(|()| match side {
            Side::Accept => Ok(Vec::new()),
            Side::Connect => self.node_names(comm),
        });
        let reply = nodes.and_then(|nodes| {
            let mut answer = Vec::new();
            if comm.rank() == root {
                let failed = (0..n).filter(|&i| before.contains(&members[i as usize])).collect();
                let spec = SpawnSpec { parents: members.clone(), failed, apps: Vec::new(), nodes };
                let reply = self.ask_launcher(side, name, comm, &spec);
                answer = reply.unwrap_or_else(|e| SpawnReply::refused(e.to_string(), 0)).encode().unwrap_or_default();
            }
            share(comm, root, answer)
        });
        // Join: the accepting group is the joint world's ranks 0..parents.
        let joined = match &reply {
            Ok(r) if r.ok => {
                let at = comm.rank() as u32 + if side == Side::Connect { r.parents } else { 0 };
                self.join(r, at)
            }
            Ok(r) => Err(Error::Spawn(r.reason.clone())),
            Err(e) => Err(e.clone()),
        };
        // This group agrees that every live member joined and nobody new failed.
        let side_ok = match comm.agree_failed(i32::from(joined.is_ok())) {
            Ok((flag, failed)) => {
                comm.learn_failed(&failed);
                flag == 1 && failed.iter().all(|w| before.contains(&(*w as u32)))
            }
            Err(_) => false,
        };
        let rt = joined?;
        let inter = rt.parent.clone().expect("a joint world's inter-communicator");
        // Both groups decide together, over the joint world.
        let bridge = inter.bridge();
        let out = bridge.recognized_world();
        let decided = bridge.agree_failed(i32::from(side_ok));
        let ok = matches!(&decided, Ok((1, failed)) if failed.iter().all(|w| out.contains(&(*w as u32))));
        if !ok {
            // A group that could not join, or a member of either that failed.
            return Err(decided.err().unwrap_or(Error::RankFailStop { rank: 0 }));
        }
        inter.set_error_mode(comm.error_mode());
        self.worlds.lock().push(rt);
        Ok(inter)
    }

    /// The root's request to the launcher: its own for accept, the port's for connect.
    fn ask_launcher(&self, side: Side, name: &str, comm: &Comm, spec: &SpawnSpec) -> Result<SpawnReply, Error> {
        let port: PortName = name.parse().map_err(|_| Error::Spawn(format!("{name:?} is not a port name")))?;
        match side {
            Side::Accept => {
                let mut b = comm.inner.shared.bootstrap.lock();
                let c = b.as_mut().ok_or(Error::Unsupported("ports need rtrun"))?.rtrun_client()?;
                c.accept(name, spec).map_err(|e| Error::Spawn(format!("accept: {e}")))
            }
            Side::Connect => {
                let mut c = Client::connect_port(&port, PORT_CONNECT)
                    .map_err(|e| Error::Spawn(format!("connect to {}: {e}", port.addr)))?;
                c.connect_port_group(name, spec).map_err(|e| Error::Spawn(format!("connect: {e}")))
            }
        }
    }

    /// Every member's host name (`RT_NODE`), in rank order.
    fn node_names(&self, comm: &Comm) -> Result<Vec<String>, Error> {
        const W: usize = 64;
        let mut mine = [0u8; W];
        let node = self.conf.get("RT_NODE").unwrap_or("localhost").as_bytes();
        mine[..node.len().min(W)].copy_from_slice(&node[..node.len().min(W)]);
        let mut all = vec![0u8; W * comm.size()];
        comm.allgather(&mine, &mut all)?;
        Ok(all.chunks(W).map(|c| String::from_utf8_lossy(c).trim_end_matches('\0').to_owned()).collect())
    }
}
