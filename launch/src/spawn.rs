//! Spawning processes into a running job (MPI-4.1 §11.8, R40): what a rank asks the
//! launcher for ([`SpawnSpec`], sent in a `Spawn` request, [`crate::wire`]) and what it
//! gets back ([`SpawnReply`]).
//!
//! A spawn makes a new *world*: the parents (the spawning communicator's members, in its
//! order, ranks `0..P` of the world) and the children (ranks `P..P+C`, in the order of the
//! applications and their processes). The launcher serves the world's bootstrap on a
//! key-value service of its own (its own secret, fences and failure records), starts the
//! children with that world in their environment, and hands the parents what they need
//! to join it ([`SpawnReply`]): every member then runs the ordinary start-up sequence
//! (transports, fences, detector) in that world. Recognized failed parents are out of the
//! world from the start. The launcher starts every child or none: when one fails to
//! start (its program cannot be run) it kills those already started and answers
//! `ok = false` with each child's code. Once the parents decided (an agreement of theirs)
//! they send `SpawnDone`: on `ok = false`, or when every parent exits before deciding, the
//! launcher kills the world's children.
//!
//! Environment of a spawned child, beside the [`crate::env`] variables of its world:
//! [`RT_SPAWN_PARENTS`] (`P`), [`RT_APPNUM`] (its application's index),
//! [`RT_UNIVERSE_SIZE`] (also given to the job's own ranks).

use crate::error::Error;
use crate::wire::{proto, put_bytes, put_u32s, Cursor};

/// Number of parents of a spawned world (its ranks `0..P`); unset in the job's own world.
pub const RT_SPAWN_PARENTS: &str = "RT_SPAWN_PARENTS";
/// Index of the application a spawned child runs (`MPI_APPNUM`).
pub const RT_APPNUM: &str = "RT_APPNUM";
/// How many processes the job may hold at once, its own ranks included
/// (`MPI_UNIVERSE_SIZE`; `rtrun --universe`).
pub const RT_UNIVERSE_SIZE: &str = "RT_UNIVERSE_SIZE";
/// Most processes one spawn may start.
pub const MAX_SPAWN: u32 = 4096;

/// A port (`MPI_Open_port`): the accepting job's launcher address and the port's secret,
/// written `rtport/IP:PORT/SECRET` (at most `MPI_MAX_PORT_NAME` = 256 bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortName {
    /// The launcher's key-value service that admits the port's clients.
    pub addr: std::net::SocketAddr,
    /// The port's secret (hex).
    pub secret: String,
}

impl std::fmt::Display for PortName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "rtport/{}/{}", self.addr, self.secret)
    }
}

impl std::str::FromStr for PortName {
    type Err = Error;
    fn from_str(s: &str) -> Result<PortName, Error> {
        let bad = || Error::InvalidArgument { reason: "not a runthrough port name (rtport/IP:PORT/SECRET)" };
        let mut parts = s.trim_end_matches('\0').split('/');
        let (Some("rtport"), Some(addr), Some(secret), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(bad());
        };
        let addr = addr.parse().map_err(|_| bad())?;
        if secret.is_empty() || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad());
        }
        Ok(PortName { addr, secret: secret.to_owned() })
    }
}

/// One program to start (`MPI_Comm_spawn`'s command, or one entry of
/// `MPI_Comm_spawn_multiple`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct App {
    /// The program (a path, or a name looked up in `PATH`, or in `path` when given).
    pub program: String,
    /// Its arguments (without the program name).
    pub args: Vec<String>,
    /// How many processes run it.
    pub procs: u32,
    /// Info `host`: the host (a `--host` name of the job) to start them on; default: the
    /// spawning root's.
    pub host: Option<String>,
    /// Info `wdir`: their working directory.
    pub wdir: Option<String>,
    /// Info `path`: directories (`:`-separated) to look for a bare program name in.
    pub path: Option<String>,
}

/// What a spawning root asks the launcher for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnSpec {
    /// The parents: the spawning communicator's members as ranks of the sender's world,
    /// in the communicator's order.
    pub parents: Vec<u32>,
    /// Indices into `parents` of the members recognized failed (out of the new world).
    pub failed: Vec<u32>,
    /// The programs.
    pub apps: Vec<App>,
    /// For `Connect` (a group of another job): each member's host name, so the accepting
    /// launcher can place the joint world's shared memory.
    pub nodes: Vec<String>,
}

/// The launcher's answer to a [`SpawnSpec`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SpawnReply {
    /// Whether every child started. When not, none runs any more.
    pub ok: bool,
    /// Why not, when not.
    pub reason: String,
    /// Per child, in world order: 0 if it started, else the OS error number of its
    /// start (`-1`: not tried, or killed because another failed).
    pub codes: Vec<i32>,
    /// The world's number (for `SpawnDone`).
    pub world: u32,
    /// Its job id (16 hex characters).
    pub jobid: String,
    /// Its key-value service (`IP:PORT`).
    pub kv_addr: String,
    /// Its secret.
    pub secret: String,
    /// Per world rank: (local rank, local size) on its host.
    pub local: Vec<(u32, u32)>,
    /// Per host of the world: (host name, shared-memory name).
    pub shm: Vec<(String, String)>,
    /// `MPI_UNIVERSE_SIZE`.
    pub universe: u32,
    /// The world's first group (the parents, or the accepting group): its ranks `0..parents`.
    pub parents: u32,
}

fn put_str(out: &mut Vec<u8>, s: &str) -> Result<(), Error> {
    put_bytes(out, s.as_bytes())
}

fn put_opt(out: &mut Vec<u8>, s: &Option<String>) -> Result<(), Error> {
    out.push(u8::from(s.is_some()));
    put_str(out, s.as_deref().unwrap_or(""))
}

fn opt(c: &mut Cursor<'_>) -> Result<Option<String>, Error> {
    let some = c.flag()?;
    let s = c.str()?;
    Ok(some.then_some(s))
}

/// A count read from the wire, bounded so a hostile length allocates nothing large.
fn count(c: &mut Cursor<'_>, max: u32) -> Result<usize, Error> {
    let n = c.u32()?;
    if n > max {
        return Err(proto("spawn: count out of range"));
    }
    Ok(n as usize)
}

impl SpawnSpec {
    /// The wire form.
    ///
    /// # Errors
    /// [`Error::FrameTooLarge`] for a spec over the frame limit.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        put_u32s(&mut out, &self.parents)?;
        put_u32s(&mut out, &self.failed)?;
        out.extend_from_slice(&(self.apps.len() as u32).to_le_bytes());
        for a in &self.apps {
            put_str(&mut out, &a.program)?;
            out.extend_from_slice(&(a.args.len() as u32).to_le_bytes());
            for s in &a.args {
                put_str(&mut out, s)?;
            }
            out.extend_from_slice(&a.procs.to_le_bytes());
            put_opt(&mut out, &a.host)?;
            put_opt(&mut out, &a.wdir)?;
            put_opt(&mut out, &a.path)?;
        }
        out.extend_from_slice(&(self.nodes.len() as u32).to_le_bytes());
        for n in &self.nodes {
            put_str(&mut out, n)?;
        }
        Ok(out)
    }

    /// Decodes [`SpawnSpec::encode`]'s output.
    ///
    /// # Errors
    /// [`Error::Protocol`] on malformed input (never panics).
    pub fn decode(b: &[u8]) -> Result<SpawnSpec, Error> {
        let mut c = Cursor { buf: b };
        let parents = c.u32s()?;
        let failed = c.u32s()?;
        let n = count(&mut c, MAX_SPAWN)?;
        let mut apps = Vec::new();
        for _ in 0..n {
            let program = c.str()?;
            let nargs = count(&mut c, 1 << 16)?;
            let args = (0..nargs).map(|_| c.str()).collect::<Result<_, _>>()?;
            let procs = c.u32()?;
            apps.push(App { program, args, procs, host: opt(&mut c)?, wdir: opt(&mut c)?, path: opt(&mut c)? });
        }
        let n = count(&mut c, 1 << 20)?;
        let nodes = (0..n).map(|_| c.str()).collect::<Result<_, _>>()?;
        c.finish()?;
        Ok(SpawnSpec { parents, failed, apps, nodes })
    }

    /// Children the spec starts (saturating).
    pub fn children(&self) -> u32 {
        self.apps.iter().fold(0u32, |n, a| n.saturating_add(a.procs))
    }
}

impl SpawnReply {
    /// A refusal: nothing started.
    pub fn refused(reason: impl Into<String>, children: u32) -> SpawnReply {
        SpawnReply { ok: false, reason: reason.into(), codes: vec![-1; children as usize], ..SpawnReply::default() }
    }

    /// The wire form.
    ///
    /// # Errors
    /// [`Error::FrameTooLarge`] for a reply over the frame limit.
    pub fn encode(&self) -> Result<Vec<u8>, Error> {
        let mut out = vec![u8::from(self.ok)];
        put_str(&mut out, &self.reason)?;
        let codes: Vec<u32> = self.codes.iter().map(|&c| c as u32).collect();
        put_u32s(&mut out, &codes)?;
        out.extend_from_slice(&self.world.to_le_bytes());
        put_str(&mut out, &self.jobid)?;
        put_str(&mut out, &self.kv_addr)?;
        put_str(&mut out, &self.secret)?;
        let local: Vec<u32> = self.local.iter().flat_map(|&(r, s)| [r, s]).collect();
        put_u32s(&mut out, &local)?;
        out.extend_from_slice(&(self.shm.len() as u32).to_le_bytes());
        for (h, s) in &self.shm {
            put_str(&mut out, h)?;
            put_str(&mut out, s)?;
        }
        out.extend_from_slice(&self.universe.to_le_bytes());
        out.extend_from_slice(&self.parents.to_le_bytes());
        Ok(out)
    }

    /// Decodes [`SpawnReply::encode`]'s output.
    ///
    /// # Errors
    /// [`Error::Protocol`] on malformed input (never panics).
    pub fn decode(b: &[u8]) -> Result<SpawnReply, Error> {
        let mut c = Cursor { buf: b };
        let ok = c.flag()?;
        let reason = c.str()?;
        let codes = c.u32s()?.into_iter().map(|x| x as i32).collect();
        let world = c.u32()?;
        let (jobid, kv_addr, secret) = (c.str()?, c.str()?, c.str()?);
        let flat = c.u32s()?;
        if flat.len() % 2 != 0 {
            return Err(proto("spawn reply: odd local table"));
        }
        let local = flat.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        let hosts = count(&mut c, 1 << 16)?;
        let shm = (0..hosts).map(|_| Ok((c.str()?, c.str()?))).collect::<Result<_, Error>>()?;
        let universe = c.u32()?;
        let parents = c.u32()?;
        c.finish()?;
        Ok(SpawnReply { ok, reason, codes, world, jobid, kv_addr, secret, local, shm, universe, parents })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_and_reply_round_trip_and_reject_garbage() {
        let spec = SpawnSpec {
            parents: vec![0, 2, 5],
            failed: vec![1],
            apps: vec![
                App { program: "a.out".into(), args: vec!["x".into(), "".into()], procs: 2, ..App::default() },
                App {
                    program: "b".into(),
                    procs: 1,
                    host: Some("h1".into()),
                    wdir: Some("/tmp".into()),
                    ..App::default()
                },
            ],
            nodes: vec!["n1".into(), "n2".into()],
        };
        let b = spec.encode().unwrap();
        assert_eq!(SpawnSpec::decode(&b).unwrap(), spec);
        assert_eq!(spec.children(), 3);
        for cut in 0..b.len() {
            assert!(SpawnSpec::decode(&b[..cut]).is_err(), "truncated at {cut}");
        }
        let reply = SpawnReply {
            ok: true,
            codes: vec![0, 0, 2],
            world: 3,
            jobid: "00112233aabbccdd".into(),
            kv_addr: "127.0.0.1:4000".into(),
            secret: "ab".repeat(32),
            local: vec![(0, 4), (1, 4)],
            shm: vec![("h0".into(), "/rt-x".into())],
            universe: 16,
            parents: 1,
            ..SpawnReply::default()
        };
        let b = reply.encode().unwrap();
        assert_eq!(SpawnReply::decode(&b).unwrap(), reply);
        let mut long = b.clone();
        long.push(0);
        assert!(SpawnReply::decode(&long).is_err());
        assert_eq!(SpawnReply::refused("full", 2).codes, vec![-1, -1]);
        let port = PortName { addr: "127.0.0.1:4000".parse().unwrap(), secret: "ab12".into() };
        assert_eq!(port.to_string().parse::<PortName>().unwrap(), port);
        for bad in ["", "rtport/127.0.0.1:4000", "rtport/x/ab", "rtport/127.0.0.1:4000/zz", "tcp/127.0.0.1:1/ab/c"] {
            assert!(bad.parse::<PortName>().is_err(), "{bad}");
        }
    }
}
