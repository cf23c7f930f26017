//! The blocking client a rank uses to reach the launcher's key-value service.
//!
//! One [`Client`] = one TCP connection to `RT_KV_ADDR`, authenticated by the job secret
//! in its first frame (protocol: [`crate::wire`]). Every call sends one request and
//! waits for its reply; nothing blocks forever: waiting requests carry a timeout the
//! server enforces, and the socket read gets that timeout plus [`REPLY_GRACE`]. Other
//! requests use [`DEFAULT_IO_TIMEOUT`]. After a transport failure or a local timeout the
//! client is unusable (the stream may be out of step) and every later call returns
//! [`Error::Disconnected`].

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use crate::env::JobEnv;
use crate::error::Error;
use crate::wire::{self, Request, Response, MAX_FRAME_BYTES, PROTOCOL_VERSION};

/// Socket timeout for requests that do not wait on other ranks.
pub const DEFAULT_IO_TIMEOUT: Duration = Duration::from_secs(30);
/// Extra time the client waits beyond a server-side timeout before giving up itself.
pub const REPLY_GRACE: Duration = Duration::from_secs(5);
/// How long [`Client::spawn`] waits for the launcher's answer (the server gives up
/// after two minutes).
pub const SPAWN_REPLY_WAIT: Duration = Duration::from_secs(130);
/// How long [`Client::accept`] waits (MPI_Comm_accept blocks until a connection comes).
pub const ACCEPT_WAIT: Duration = Duration::from_secs(365 * 24 * 3600);
/// Longest key accepted by [`Client::put`] / [`Client::get`].
pub const MAX_KEY_BYTES: usize = 4096;

/// The witness's answer to a claim ([`Client::confirm`], R32).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The suspect is out of the job (excluded now, or already out): fail it.
    Confirmed,
    /// Refused: the suspect is still in its start-up and the launcher heard from it
    /// within the start-up timeout (R31). It is slow, not failed: observe it afresh.
    Starting,
    /// Refused: the suspect's process runs on the launcher's host and is alive, not
    /// stopped — busy or starved of a core, not failed. Observe it afresh.
    Alive,
}

/// A connection to the launcher's key-value service.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    rank: u32,
    broken: bool,
    buf: Vec<u8>,
}

impl Client {
    /// Connects to `env.kv_addr` and authenticates with `env.secret` as `env.rank`.
    ///
    /// # Errors
    /// [`Error::Timeout`] if the connection or the handshake takes longer than
    /// `timeout`; [`Error::Refused`] if the server closes the connection (wrong secret,
    /// version or rank); [`Error::Io`] for other socket errors.
    pub fn connect(env: &JobEnv, timeout: Duration) -> Result<Client, Error> {
        let timeout = timeout.max(Duration::from_millis(1));
        let stream = TcpStream::connect_timeout(&env.kv_addr, timeout).map_err(|e| Error::io("connect", e))?;
        stream.set_nodelay(true).map_err(|e| Error::io("connect", e))?;
        let mut client = Client { stream, rank: env.rank, broken: false, buf: Vec::new() };
        let hello =
            Request::Hello { version: PROTOCOL_VERSION, rank: env.rank, secret: env.secret.as_bytes().to_vec() };
        match client.call(&hello, timeout) {
            Ok(Response::Ok) => Ok(client),
            Ok(_) => Err(Error::Protocol { reason: "unexpected reply to hello" }),
            Err(Error::Disconnected) => Err(Error::Refused),
            Err(e) => Err(e),
        }
    }

    /// Connects to the launcher of another job as a client of its port `port`
    /// (`MPI_Comm_connect`'s root): it may only [`Client::connect_port_group`].
    ///
    /// # Errors
    /// As [`Client::connect`].
    pub fn connect_port(port: &crate::spawn::PortName, timeout: Duration) -> Result<Client, Error> {
        let timeout = timeout.max(Duration::from_millis(1));
        let stream = TcpStream::connect_timeout(&port.addr, timeout).map_err(|e| Error::io("connect", e))?;
        stream.set_nodelay(true).map_err(|e| Error::io("connect", e))?;
        let rank = crate::server::PORT_CLIENT;
        let mut client = Client { stream, rank, broken: false, buf: Vec::new() };
        let hello = Request::Hello { version: PROTOCOL_VERSION, rank, secret: port.secret.as_bytes().to_vec() };
        match client.call(&hello, timeout) {
            Ok(Response::Ok) => Ok(client),
            Ok(_) => Err(Error::Protocol { reason: "unexpected reply to hello" }),
            Err(Error::Disconnected) => Err(Error::Refused),
            Err(e) => Err(e),
        }
    }

    /// A new port of this job (`MPI_Open_port`): its name.
    ///
    /// # Errors
    /// Transport errors, a launcher that refused.
    pub fn open_port(&mut self) -> Result<String, Error> {
        match self.call(&Request::OpenPort, SPAWN_REPLY_WAIT)? {
            Response::Value(v) => String::from_utf8(v).map_err(|_| Error::Protocol { reason: "port name" }),
            other => Err(unexpected(other)),
        }
    }

    /// Closes port `name` (`MPI_Close_port`).
    ///
    /// # Errors
    /// Transport errors, a launcher that refused (not a port of this job).
    pub fn close_port(&mut self, name: &str) -> Result<(), Error> {
        match self.call(&Request::ClosePort { name: name.to_owned() }, SPAWN_REPLY_WAIT)? {
            Response::Value(_) => Ok(()),
            other => Err(unexpected(other)),
        }
    }

    /// Waits for a connection on port `name` for the group `spec` names
    /// (`MPI_Comm_accept`'s root); returns the joint world's description.
    ///
    /// # Errors
    /// Transport errors, a launcher that refused.
    pub fn accept(&mut self, name: &str, spec: &crate::spawn::SpawnSpec) -> Result<crate::spawn::SpawnReply, Error> {
        let req = Request::Accept { name: name.to_owned(), spec: spec.encode()? };
        match self.call(&req, ACCEPT_WAIT)? {
            Response::Value(v) => crate::spawn::SpawnReply::decode(&v),
            other => Err(unexpected(other)),
        }
    }

    /// Connects the group `spec` names to port `name` (on a [`Client::connect_port`]
    /// connection); returns the joint world's description.
    ///
    /// # Errors
    /// [`Error::Server`] when nobody accepted within a minute, transport errors.
    pub fn connect_port_group(
        &mut self,
        name: &str,
        spec: &crate::spawn::SpawnSpec,
    ) -> Result<crate::spawn::SpawnReply, Error> {
        let req = Request::Connect { name: name.to_owned(), spec: spec.encode()? };
        match self.call(&req, SPAWN_REPLY_WAIT)? {
            Response::Value(v) => crate::spawn::SpawnReply::decode(&v),
            other => Err(unexpected(other)),
        }
    }

    /// The launcher's name service: publishes `port` under `service` (`Ok(Err(why))`
    /// when refused: the service is published already).
    ///
    /// # Errors
    /// Transport errors.
    pub fn publish(&mut self, service: &str, port: &str) -> Result<Result<(), String>, Error> {
        let req = Request::Publish { service: service.to_owned(), port: port.to_owned() };
        self.name_call(&req).map(|v| if v.is_empty() { Ok(()) } else { Err(String::from_utf8_lossy(&v).into_owned()) })
    }

    /// The port published under `service`, if any.
    ///
    /// # Errors
    /// Transport errors.
    pub fn lookup(&mut self, service: &str) -> Result<Option<String>, Error> {
        let v = self.name_call(&Request::Lookup { service: service.to_owned() })?;
        Ok((!v.is_empty()).then(|| String::from_utf8_lossy(&v).into_owned()))
    }

    /// Withdraws `service` (`Ok(Err(why))` when it was not published).
    ///
    /// # Errors
    /// Transport errors.
    pub fn unpublish(&mut self, service: &str) -> Result<Result<(), String>, Error> {
        let v = self.name_call(&Request::Unpublish { service: service.to_owned() })?;
        Ok(if v.is_empty() { Ok(()) } else { Err(String::from_utf8_lossy(&v).into_owned()) })
    }

    fn name_call(&mut self, req: &Request) -> Result<Vec<u8>, Error> {
        match self.call(req, SPAWN_REPLY_WAIT)? {
            Response::Value(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// The rank this client authenticated as.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Stores `value` under `key` (last write wins).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a key longer than [`MAX_KEY_BYTES`],
    /// [`Error::FrameTooLarge`] for a value near 16 MiB, transport errors.
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), Error> {
        check_key(key)?;
        let req = Request::Put { key: key.to_owned(), value: value.to_vec() };
        expect_ok(self.call(&req, DEFAULT_IO_TIMEOUT)?)
    }

    /// Returns the value of `key`, waiting up to `timeout` for some rank to put it.
    ///
    /// # Errors
    /// [`Error::Timeout`] if the key did not appear in time, transport errors.
    pub fn get(&mut self, key: &str, timeout: Duration) -> Result<Vec<u8>, Error> {
        check_key(key)?;
        let req = Request::Get { key: key.to_owned(), timeout_ms: millis(timeout) };
        match self.call(&req, timeout.saturating_add(REPLY_GRACE))? {
            Response::Value(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// Barrier over all ranks of the job. Generation-counted: the n-th call of every
    /// rank meets the n-th call of every other rank.
    ///
    /// # Errors
    /// [`Error::PeerExited`] promptly if the launcher saw some rank exit before reaching
    /// this fence; [`Error::Timeout`] after `timeout`. In both cases this rank leaves the
    /// fence (a later call starts the same generation again).
    pub fn fence(&mut self, timeout: Duration) -> Result<(), Error> {
        let req = Request::Fence { timeout_ms: millis(timeout) };
        expect_ok(self.call(&req, timeout.saturating_add(REPLY_GRACE))?)
    }

    /// Fault-tolerant start-up fence (R31): waits until every rank has joined this
    /// generation or is out (exited, or excluded by the launcher), and returns the ranks
    /// out when it completed, ascending: the same list at every rank of the generation.
    ///
    /// # Errors
    /// [`Error::Excluded`] if the launcher excluded this rank; [`Error::Timeout`] after
    /// `timeout`; transport errors.
    pub fn join(&mut self, timeout: Duration) -> Result<Vec<u32>, Error> {
        let req = Request::Join { timeout_ms: millis(timeout) };
        match self.call(&req, timeout.saturating_add(REPLY_GRACE))? {
            Response::Out(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// Start-up heartbeat: tells the launcher this rank is alive (R31).
    ///
    /// # Errors
    /// [`Error::Excluded`] if the launcher excluded this rank; transport errors.
    pub fn alive(&mut self) -> Result<(), Error> {
        expect_ok(self.call(&Request::Alive, DEFAULT_IO_TIMEOUT)?)
    }

    /// Tells the launcher this rank's start-up is done: from now on the ring detector,
    /// not the launcher's start-up watch, finds it if it hangs (R31).
    ///
    /// # Errors
    /// [`Error::Excluded`] if the launcher excluded this rank first; transport errors.
    pub fn started(&mut self) -> Result<(), Error> {
        expect_ok(self.call(&Request::Started, DEFAULT_IO_TIMEOUT)?)
    }

    /// Asks the launcher, the job's witness (R32), to confirm that `suspect` failed:
    /// [`Verdict::Confirmed`] once it excluded `suspect` (or it was already out);
    /// [`Verdict::Starting`] when it refused because `suspect` is still in its start-up
    /// and was heard from within the start-up timeout (R31); [`Verdict::Alive`] when it
    /// refused because the suspect's process is alive on the launcher's host (busy is
    /// not dead); [`Error::Excluded`] if this
    /// rank was excluded first. `timeout` bounds the whole call (the launcher answers at
    /// once; a rank cut off from it by a partition gets an I/O error).
    ///
    /// # Errors
    /// [`Error::Excluded`], transport errors and timeouts.
    pub fn confirm(&mut self, suspect: u32, timeout: Duration) -> Result<Verdict, Error> {
        match self.call(&Request::Confirm { suspect }, timeout)? {
            Response::Ok => Ok(Verdict::Confirmed),
            Response::Starting => Ok(Verdict::Starting),
            Response::Alive => Ok(Verdict::Alive),
            other => Err(unexpected(other)),
        }
    }

    /// Tells the launcher this rank finalized cleanly (exit-code rule R7).
    ///
    /// # Errors
    /// Transport errors.
    pub fn finalized(&mut self) -> Result<(), Error> {
        expect_ok(self.call(&Request::Finalized, DEFAULT_IO_TIMEOUT)?)
    }

    /// Tells the launcher this rank's `init` completed (phase report, [`crate::report`]).
    ///
    /// # Errors
    /// Transport errors.
    pub fn initialized(&mut self) -> Result<(), Error> {
        expect_ok(self.call(&Request::Initialized, DEFAULT_IO_TIMEOUT)?)
    }

    /// Tells the launcher this rank's `finalize` began (phase report; [`Client::finalized`]
    /// ends it).
    ///
    /// # Errors
    /// Transport errors.
    pub fn finalizing(&mut self) -> Result<(), Error> {
        expect_ok(self.call(&Request::Finalizing, DEFAULT_IO_TIMEOUT)?)
    }

    /// Asks the launcher to SIGKILL `ranks` (the group of a communicator, R3) and to
    /// record `code` as an abort code. The caller should exit right after.
    ///
    /// # Errors
    /// [`Error::Server`] if a rank is out of range, transport errors.
    pub fn abort(&mut self, ranks: &[u32], code: i32) -> Result<(), Error> {
        let req = Request::Abort { code, ranks: ranks.to_vec() };
        expect_ok(self.call(&req, DEFAULT_IO_TIMEOUT)?)
    }

    /// Asks the launcher to start the processes `spec` describes in a new world with
    /// the parents it names (R40; [`crate::spawn`]), and returns its answer once every
    /// child started or none runs.
    ///
    /// # Errors
    /// [`Error::Server`] if the launcher refused the request or did not answer in time,
    /// transport errors.
    pub fn spawn(&mut self, spec: &crate::spawn::SpawnSpec) -> Result<crate::spawn::SpawnReply, Error> {
        let req = Request::Spawn { spec: spec.encode()? };
        match self.call(&req, SPAWN_REPLY_WAIT)? {
            Response::Value(v) => crate::spawn::SpawnReply::decode(&v),
            other => Err(unexpected(other)),
        }
    }

    /// Tells the launcher the parents' decision on spawned world `world`: `false` kills
    /// its children.
    ///
    /// # Errors
    /// Transport errors.
    pub fn spawn_done(&mut self, world: u32, ok: bool) -> Result<(), Error> {
        expect_ok(self.call(&Request::SpawnDone { world, ok }, DEFAULT_IO_TIMEOUT)?)
    }

    /// The ranks the launcher has seen exit, in exit order.
    ///
    /// # Errors
    /// Transport errors.
    pub fn exited(&mut self) -> Result<Vec<u32>, Error> {
        self.exited_within(DEFAULT_IO_TIMEOUT)
    }

    /// [`Client::exited`], waiting at most `wait` for the reply (a thread that must not
    /// stall behind a partition; after a timeout the connection is broken for good).
    ///
    /// # Errors
    /// Transport errors and timeouts.
    pub fn exited_within(&mut self, wait: Duration) -> Result<Vec<u32>, Error> {
        match self.call(&Request::Exited, wait)? {
            Response::Exited(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    /// The ranks the launcher has seen exit after they finalized (departed cleanly, as
    /// opposed to failed), in exit order.
    ///
    /// # Errors
    /// Transport errors.
    pub fn departed(&mut self) -> Result<Vec<u32>, Error> {
        self.departed_within(DEFAULT_IO_TIMEOUT)
    }

    /// [`Client::departed`], waiting at most `wait` for the reply.
    ///
    /// # Errors
    /// Transport errors and timeouts.
    pub fn departed_within(&mut self, wait: Duration) -> Result<Vec<u32>, Error> {
        match self.call(&Request::Departed, wait)? {
            Response::Exited(v) => Ok(v),
            other => Err(unexpected(other)),
        }
    }

    fn call(&mut self, req: &Request, wait: Duration) -> Result<Response, Error> {
        if self.broken {
            return Err(Error::Disconnected);
        }
        let r = self.call_inner(req, wait);
        if let Err(e) = &r {
            if !matches!(e, Error::InvalidArgument { .. } | Error::FrameTooLarge { .. }) {
                self.broken = true;
            }
        }
        r
    }

    fn call_inner(&mut self, req: &Request, wait: Duration) -> Result<Response, Error> {
        self.buf.clear();
        req.encode(&mut self.buf)?;
        let io_timeout = Some(DEFAULT_IO_TIMEOUT);
        self.stream.set_write_timeout(io_timeout).map_err(|e| Error::io("write", e))?;
        self.stream.write_all(&self.buf).map_err(|e| Error::io("write", e))?;
        self.stream.set_read_timeout(Some(wait.max(Duration::from_millis(1)))).map_err(|e| Error::io("read", e))?;
        match wire::read_frame(&mut self.stream, MAX_FRAME_BYTES) {
            Ok(Some(body)) => Response::decode(&body),
            Ok(None) => Err(Error::Disconnected),
            Err(e) => Err(e),
        }
    }
}

fn check_key(key: &str) -> Result<(), Error> {
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument { reason: "key longer than MAX_KEY_BYTES" });
    }
    Ok(())
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn expect_ok(resp: Response) -> Result<(), Error> {
    match resp {
        Response::Ok => Ok(()),
        other => Err(unexpected(other)),
    }
}

fn unexpected(resp: Response) -> Error {
    match resp {
        Response::Timeout => Error::Timeout,
        Response::PeerExited { rank } => Error::PeerExited { rank },
        Response::Failed { reason } => Error::Server { reason },
        Response::Excluded => Error::Excluded,
        _ => Error::Protocol { reason: "unexpected reply" },
    }
}
