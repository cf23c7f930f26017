//! The bootstrap wire protocol between [`crate::client::Client`] and
//! [`crate::server::Server`].
//!
//! Transport: one TCP connection per rank to `RT_KV_ADDR` (loopback, or the private `--kv-addr`). Every message
//! is a *frame*: a `u32` little-endian body length, then the body. Bodies are at most
//! [`MAX_FRAME_BYTES`] (16 MiB); before authentication at most [`MAX_HELLO_FRAME_BYTES`].
//! A body starts with a one-byte tag; integers are little-endian; `bytes` and `str` are a
//! `u32` length followed by that many bytes (`str` is UTF-8). A body must be consumed
//! exactly: trailing bytes are a protocol error.
//!
//! Requests (client → server), strictly one outstanding at a time:
//!
//! | tag  | request     | fields                                       | reply                         |
//! |------|-------------|----------------------------------------------|-------------------------------|
//! | 0x01 | `Hello`     | `version: u16, rank: u32, secret: bytes`     | `Ok`, or the server closes    |
//! | 0x02 | `Put`       | `key: str, value: bytes`                     | `Ok`                          |
//! | 0x03 | `Get`       | `key: str, timeout_ms: u64`                  | `Value` or `Timeout`          |
//! | 0x04 | `Fence`     | `timeout_ms: u64`                            | `Ok`, `Timeout`, `PeerExited` |
//! | 0x05 | `Finalized` | —                                            | `Ok`                          |
//! | 0x06 | `Abort`     | `code: i32, n: u32, ranks: n × u32`          | `Ok` or `Failed`              |
//! | 0x07 | `Exited`    | —                                            | `Exited`                      |
//! | 0x08 | `Departed`  | — (ranks that exited after finalizing)       | `Exited`                      |
//! | 0x10 | `Initialized` | — (the sender's `init` completed)          | `Ok`                          |
//! | 0x11 | `Finalizing` | — (the sender's `finalize` began)           | `Ok`                          |
//! | 0x09 | `Join`      | `timeout_ms: u64` (fault-tolerant fence)     | `Out`, `Timeout`, `Excluded`  |
//! | 0x0a | `Alive`     | — (start-up heartbeat)                       | `Ok` or `Excluded`            |
//! | 0x0b | `Started`   | — (`init` is done: start-up watch ends)      | `Ok` or `Excluded`            |
//! | 0x0c | `Confirm`   | `suspect: u32` (the witness of R32)          | `Ok`, `Starting`, `Alive`, `Excluded` |
//! | 0x12 | `Spawn`     | `spec: bytes` ([`crate::spawn::SpawnSpec`])  | `Value` ([`crate::spawn::SpawnReply`]) or `Failed` |
//! | 0x13 | `SpawnDone` | `world: u32, ok: u8` (the parents' decision) | `Ok`                          |
//! | 0x14 | `OpenPort`  | —                                            | `Value` (the port name)       |
//! | 0x15 | `ClosePort` | `name: str`                                  | `Value` (empty)               |
//! | 0x16 | `Accept`    | `name: str, spec: bytes`                     | `Value` ([`crate::spawn::SpawnReply`]) |
//! | 0x17 | `Connect`   | `name: str, spec: bytes` (also a port client's) | `Value` ([`crate::spawn::SpawnReply`]) or `Failed` |
//! | 0x18 | `Publish`   | `service: str, port: str`                    | `Value` (empty: done; else why not) |
//! | 0x19 | `Lookup`    | `service: str`                               | `Value` (the port; empty: none) |
//! | 0x1a | `Unpublish` | `service: str`                               | `Value` (empty: done; else why not) |
//!
//! Replies (server → client):
//!
//! | tag  | reply        | fields                  |
//! |------|--------------|-------------------------|
//! | 0x80 | `Ok`         | —                       |
//! | 0x81 | `Value`      | `value: bytes`          |
//! | 0x82 | `Timeout`    | —                       |
//! | 0x83 | `PeerExited` | `rank: u32`             |
//! | 0x84 | `Exited`     | `n: u32, ranks: n × u32`|
//! | 0x85 | `Failed`     | `reason: str`           |
//! | 0x86 | `Out`        | `n: u32, ranks: n × u32`|
//! | 0x87 | `Excluded`   | —                       |
//! | 0x88 | `Starting`   | —                       |
//! | 0x89 | `Alive`      | —                       |
//!
//! The first frame of a connection must be `Hello` carrying the job secret (compared in
//! constant time), the current [`PROTOCOL_VERSION`] and a rank `< size`; otherwise the
//! server logs a warning and closes the connection without replying. After that, any
//! malformed or oversized frame also closes the connection. Waiting requests (`Get`,
//! `Fence`, `Join`) carry their own timeout, enforced by the server, so a reply always
//! comes.
//!
//! `Join`, `Alive` and `Started` make start-up fault tolerant (R31, see
//! [`crate::server`]): a `Join` completes once every rank has joined or is out (exited, or
//! excluded by the launcher), and its `Out` reply lists the ranks out at that moment, the
//! same list to every rank of the same `Join`; a rank the launcher excluded gets
//! `Excluded` to every request and must stop.

use std::io::{self, Read, Write};

use crate::error::Error;

/// Largest frame body accepted or sent.
pub const MAX_FRAME_BYTES: usize = 16 << 20;
/// Largest first (unauthenticated) frame body the server reads.
pub const MAX_HELLO_FRAME_BYTES: usize = 4096;
/// Bytes [`read_frame`] reserves before the body arrives (it grows with what arrives).
const FRAME_CHUNK_BYTES: usize = 64 << 10;
/// Protocol version carried in `Hello`.
pub const PROTOCOL_VERSION: u16 = 1;

const T_HELLO: u8 = 0x01;
const T_PUT: u8 = 0x02;
const T_GET: u8 = 0x03;
const T_FENCE: u8 = 0x04;
const T_FINALIZED: u8 = 0x05;
const T_ABORT: u8 = 0x06;
const T_EXITED: u8 = 0x07;
const T_DEPARTED: u8 = 0x08;
const T_INITIALIZED: u8 = 0x10;
const T_FINALIZING: u8 = 0x11;
const T_JOIN: u8 = 0x09;
const T_ALIVE: u8 = 0x0a;
const T_STARTED: u8 = 0x0b;
const T_CONFIRM: u8 = 0x0c;
const T_SPAWN: u8 = 0x12;
const T_SPAWN_DONE: u8 = 0x13;
const T_OPEN_PORT: u8 = 0x14;
const T_CLOSE_PORT: u8 = 0x15;
const T_ACCEPT: u8 = 0x16;
const T_CONNECT: u8 = 0x17;
const T_PUBLISH: u8 = 0x18;
const T_LOOKUP: u8 = 0x19;
const T_UNPUBLISH: u8 = 0x1a;
const T_OK: u8 = 0x80;
const T_VALUE: u8 = 0x81;
const T_TIMEOUT: u8 = 0x82;
const T_PEER_EXITED: u8 = 0x83;
const T_EXITED_LIST: u8 = 0x84;
const T_FAILED: u8 = 0x85;
const T_OUT: u8 = 0x86;
const T_EXCLUDED: u8 = 0x87;
const T_STARTING: u8 = 0x88;
const T_ALIVE_REPLY: u8 = 0x89;

/// A client → server message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    /// Authentication; must be the first frame.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u16,
        /// The sender's rank.
        rank: u32,
        /// The job secret (ASCII hex).
        secret: Vec<u8>,
    },
    /// Store `value` under `key` (last write wins).
    Put {
        /// The key.
        key: String,
        /// The value.
        value: Vec<u8>,
    },
    /// Wait up to `timeout_ms` for `key` and return its value.
    Get {
        /// The key.
        key: String,
        /// How long the server waits for the key.
        timeout_ms: u64,
    },
    /// Enter the next fence (barrier over all ranks).
    Fence {
        /// How long the server waits for the other ranks.
        timeout_ms: u64,
    },
    /// The sender finalized cleanly.
    Finalized,
    /// Ask the launcher to SIGKILL `ranks`, recording `code` as the abort code.
    Abort {
        /// The abort code.
        code: i32,
        /// The ranks to kill.
        ranks: Vec<u32>,
    },
    /// Ask which ranks have exited.
    Exited,
    /// Ask which ranks have exited after finalizing (departed cleanly, not failed).
    Departed,
    /// The sender's `init` completed (phase report for `rtrun`'s end-of-job lines).
    Initialized,
    /// The sender's `finalize` began (phase report; `Finalized` ends it).
    Finalizing,
    /// Enter the next fault-tolerant start-up fence: it completes over the ranks that
    /// are not out (exited or excluded).
    Join {
        /// How long the server waits for the other ranks.
        timeout_ms: u64,
    },
    /// Start-up heartbeat: the sender is alive.
    Alive,
    /// The sender's `init` is done: the launcher stops watching it for start-up hangs.
    Started,
    /// The sender's failure detector found `suspect` silent (or its fabric in error):
    /// the launcher, the job's witness (R32), excludes `suspect` and answers `Ok` — unless
    /// the sender itself was excluded first (a contradicting claim from the other side of
    /// a partition), which gets `Excluded`. Claims are decided one at a time, so of two
    /// ranks that suspect each other exactly one goes on. A claim against a rank still
    /// in its start-up that the launcher heard from within the start-up timeout is
    /// refused with `Starting` (R31: slow, not failed).
    Confirm {
        /// The suspected rank.
        suspect: u32,
    },
    /// Start the processes `spec` describes (an encoded [`crate::spawn::SpawnSpec`])
    /// in a new world with the sender's communicator; the reply is an encoded
    /// [`crate::spawn::SpawnReply`] once every child started or none did (R40).
    Spawn {
        /// The encoded spec.
        spec: Vec<u8>,
    },
    /// The parents of spawned world `world` decided: `ok` keeps its children, otherwise
    /// the launcher kills them (R40: all or none).
    SpawnDone {
        /// The world's number (from the reply).
        world: u32,
        /// Whether the spawn succeeded at every parent.
        ok: bool,
    },
    /// A new port (`MPI_Open_port`): the reply's value is its name.
    OpenPort,
    /// Close port `name`.
    ClosePort {
        /// The port.
        name: String,
    },
    /// Wait for a connection on port `name` (`MPI_Comm_accept`'s root; `spec`: an encoded
    /// [`crate::spawn::SpawnSpec`] naming the accepting group).
    Accept {
        /// The port.
        name: String,
        /// The group.
        spec: Vec<u8>,
    },
    /// Connect to port `name` (`MPI_Comm_connect`'s root, as a port client of the
    /// accepting job's launcher; `spec` names the connecting group and its hosts).
    Connect {
        /// The port.
        name: String,
        /// The group.
        spec: Vec<u8>,
    },
    /// Publish `port` under `service` (`MPI_Publish_name`; the launcher's name service).
    Publish {
        /// The service name.
        service: String,
        /// The port name.
        port: String,
    },
    /// The port published under `service` (`MPI_Lookup_name`).
    Lookup {
        /// The service name.
        service: String,
    },
    /// Withdraw `service` (`MPI_Unpublish_name`).
    Unpublish {
        /// The service name.
        service: String,
    },
}

/// A server → client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// Success without data.
    Ok,
    /// The value of a `Get`.
    Value(Vec<u8>),
    /// A `Get` or `Fence` timed out.
    Timeout,
    /// A `Fence` cannot complete because `rank` exited before reaching it.
    PeerExited {
        /// The lowest such rank.
        rank: u32,
    },
    /// The ranks that have exited, in the order the launcher saw them exit.
    Exited(Vec<u32>),
    /// The request was well formed but rejected.
    Failed {
        /// Why.
        reason: String,
    },
    /// A `Join` completed: the ranks out (exited or excluded) when it did, ascending;
    /// every rank of that `Join` gets the same list.
    Out(Vec<u32>),
    /// The launcher excluded the sender (it was taken for hung): it must stop.
    Excluded,
    /// A `Confirm` refused: the suspect has not finished its start-up and the launcher
    /// heard from it within the start-up timeout.
    Starting,
    /// A `Confirm` refused: the suspect's process runs on the launcher's host and is
    /// alive and not stopped (runnable, running or sleeping) — busy or starved of a core,
    /// not failed, however late its heartbeats.
    Alive,
}

impl Request {
    /// Appends this request as one frame (length prefix + body) to `out`.
    ///
    /// # Errors
    /// [`Error::FrameTooLarge`] if the body would exceed [`MAX_FRAME_BYTES`].
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let start = begin_frame(out);
        match self {
            Request::Hello { version, rank, secret } => {
                out.push(T_HELLO);
                out.extend_from_slice(&version.to_le_bytes());
                out.extend_from_slice(&rank.to_le_bytes());
                put_bytes(out, secret)?;
            }
            Request::Put { key, value } => {
                out.push(T_PUT);
                put_bytes(out, key.as_bytes())?;
                put_bytes(out, value)?;
            }
            Request::Get { key, timeout_ms } => {
                out.push(T_GET);
                put_bytes(out, key.as_bytes())?;
                out.extend_from_slice(&timeout_ms.to_le_bytes());
            }
            Request::Fence { timeout_ms } => {
                out.push(T_FENCE);
                out.extend_from_slice(&timeout_ms.to_le_bytes());
            }
            Request::Finalized => out.push(T_FINALIZED),
            Request::Abort { code, ranks } => {
                out.push(T_ABORT);
                out.extend_from_slice(&code.to_le_bytes());
                put_u32s(out, ranks)?;
            }
            Request::Exited => out.push(T_EXITED),
            Request::Departed => out.push(T_DEPARTED),
            Request::Initialized => out.push(T_INITIALIZED),
            Request::Finalizing => out.push(T_FINALIZING),
            Request::Join { timeout_ms } => {
                out.push(T_JOIN);
                out.extend_from_slice(&timeout_ms.to_le_bytes());
            }
            Request::Alive => out.push(T_ALIVE),
            Request::Started => out.push(T_STARTED),
            Request::Confirm { suspect } => {
                out.push(T_CONFIRM);
                out.extend_from_slice(&suspect.to_le_bytes());
            }
            Request::Spawn { spec } => {
                out.push(T_SPAWN);
                put_bytes(out, spec)?;
            }
            Request::SpawnDone { world, ok } => {
                out.push(T_SPAWN_DONE);
                out.extend_from_slice(&world.to_le_bytes());
                out.push(u8::from(*ok));
            }
            Request::OpenPort => out.push(T_OPEN_PORT),
            Request::ClosePort { name } => {
                out.push(T_CLOSE_PORT);
                put_bytes(out, name.as_bytes())?;
            }
            Request::Publish { service, port } => {
                out.push(T_PUBLISH);
                put_bytes(out, service.as_bytes())?;
                put_bytes(out, port.as_bytes())?;
            }
            Request::Lookup { service } | Request::Unpublish { service } => {
                out.push(if matches!(self, Request::Lookup { .. }) { T_LOOKUP } else { T_UNPUBLISH });
                put_bytes(out, service.as_bytes())?;
            }
            Request::Accept { name, spec } | Request::Connect { name, spec } => {
                out.push(if matches!(self, Request::Accept { .. }) { T_ACCEPT } else { T_CONNECT });
                put_bytes(out, name.as_bytes())?;
                put_bytes(out, spec)?;
            }
        }
        end_frame(out, start)
    }

    /// Decodes a frame body.
    ///
    /// # Errors
    /// [`Error::Protocol`] on any malformed input (never panics).
    pub fn decode(body: &[u8]) -> Result<Request, Error> {
        let mut c = Cursor { buf: body };
        let req = match c.u8()? {
            T_HELLO => Request::Hello { version: c.u16()?, rank: c.u32()?, secret: c.bytes()?.to_vec() },
            T_PUT => Request::Put { key: c.str()?, value: c.bytes()?.to_vec() },
            T_GET => Request::Get { key: c.str()?, timeout_ms: c.u64()? },
            T_FENCE => Request::Fence { timeout_ms: c.u64()? },
            T_FINALIZED => Request::Finalized,
            T_ABORT => Request::Abort { code: c.i32()?, ranks: c.u32s()? },
            T_EXITED => Request::Exited,
            T_DEPARTED => Request::Departed,
            T_INITIALIZED => Request::Initialized,
            T_FINALIZING => Request::Finalizing,
            T_JOIN => Request::Join { timeout_ms: c.u64()? },
            T_ALIVE => Request::Alive,
            T_STARTED => Request::Started,
            T_CONFIRM => Request::Confirm { suspect: c.u32()? },
            T_SPAWN => Request::Spawn { spec: c.bytes()?.to_vec() },
            T_SPAWN_DONE => Request::SpawnDone { world: c.u32()?, ok: c.flag()? },
            T_OPEN_PORT => Request::OpenPort,
            T_CLOSE_PORT => Request::ClosePort { name: c.str()? },
            T_ACCEPT => Request::Accept { name: c.str()?, spec: c.bytes()?.to_vec() },
            T_CONNECT => Request::Connect { name: c.str()?, spec: c.bytes()?.to_vec() },
            T_PUBLISH => Request::Publish { service: c.str()?, port: c.str()? },
            T_LOOKUP => Request::Lookup { service: c.str()? },
            T_UNPUBLISH => Request::Unpublish { service: c.str()? },
            _ => return Err(proto("unknown request tag")),
        };
        c.finish()?;
        Ok(req)
    }
}

impl Response {
    /// Appends this response as one frame (length prefix + body) to `out`.
    ///
    /// # Errors
    /// [`Error::FrameTooLarge`] if the body would exceed [`MAX_FRAME_BYTES`].
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        let start = begin_frame(out);
        match self {
            Response::Ok => out.push(T_OK),
            Response::Value(v) => {
                out.push(T_VALUE);
                put_bytes(out, v)?;
            }
            Response::Timeout => out.push(T_TIMEOUT),
            Response::PeerExited { rank } => {
                out.push(T_PEER_EXITED);
                out.extend_from_slice(&rank.to_le_bytes());
            }
            Response::Exited(ranks) => {
                out.push(T_EXITED_LIST);
                put_u32s(out, ranks)?;
            }
            Response::Failed { reason } => {
                out.push(T_FAILED);
                put_bytes(out, reason.as_bytes())?;
            }
            Response::Out(ranks) => {
                out.push(T_OUT);
                put_u32s(out, ranks)?;
            }
            Response::Excluded => out.push(T_EXCLUDED),
            Response::Starting => out.push(T_STARTING),
            Response::Alive => out.push(T_ALIVE_REPLY),
        }
        end_frame(out, start)
    }

    /// Decodes a frame body.
    ///
    /// # Errors
    /// [`Error::Protocol`] on any malformed input (never panics).
    pub fn decode(body: &[u8]) -> Result<Response, Error> {
        let mut c = Cursor { buf: body };
        let resp = match c.u8()? {
            T_OK => Response::Ok,
            T_VALUE => Response::Value(c.bytes()?.to_vec()),
            T_TIMEOUT => Response::Timeout,
            T_PEER_EXITED => Response::PeerExited { rank: c.u32()? },
            T_EXITED_LIST => Response::Exited(c.u32s()?),
            T_FAILED => Response::Failed { reason: c.str()? },
            T_OUT => Response::Out(c.u32s()?),
            T_EXCLUDED => Response::Excluded,
            T_STARTING => Response::Starting,
            T_ALIVE_REPLY => Response::Alive,
            _ => return Err(proto("unknown response tag")),
        };
        c.finish()?;
        Ok(resp)
    }
}

/// Reads one frame body of at most `max` bytes.
///
/// Returns `Ok(None)` on a clean end of stream before the first length byte.
///
/// # Errors
/// [`Error::FrameTooLarge`] if the announced length exceeds `max`; I/O errors as
/// [`Error::Timeout`], [`Error::Disconnected`] (EOF inside a frame) or [`Error::Io`].
pub fn read_frame<R: Read>(r: &mut R, max: usize) -> Result<Option<Vec<u8>>, Error> {
    let mut len = [0u8; 4];
    let mut got = 0;
    while got < len.len() {
        match r.read(&mut len[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(Error::Disconnected),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::io("read", e)),
        }
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(Error::FrameTooLarge { len, max });
    }
    // The length is the sender's word: allocate as bytes arrive, not all at once, so a
    // frame that announces 16 MiB and sends nothing costs nothing.
    let mut body = Vec::with_capacity(len.min(FRAME_CHUNK_BYTES));
    let got = r.take(len as u64).read_to_end(&mut body).map_err(|e| Error::io("read", e))?;
    if got < len {
        return Err(Error::Disconnected);
    }
    Ok(Some(body))
}

/// Writes pre-encoded frames.
///
/// # Errors
/// I/O errors mapped as in [`read_frame`].
pub fn write_frames<W: Write>(w: &mut W, frames: &[u8]) -> Result<(), Error> {
    w.write_all(frames).map_err(|e| Error::io("write", e))?;
    w.flush().map_err(|e| Error::io("write", e))
}

pub(crate) fn proto(reason: &'static str) -> Error {
    Error::Protocol { reason }
}

fn begin_frame(out: &mut Vec<u8>) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0; 4]);
    start
}

fn end_frame(out: &mut Vec<u8>, start: usize) -> Result<(), Error> {
    let len = out.len() - start - 4;
    if len > MAX_FRAME_BYTES {
        out.truncate(start);
        return Err(Error::FrameTooLarge { len, max: MAX_FRAME_BYTES });
    }
    // len <= MAX_FRAME_BYTES < u32::MAX
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

fn put_len(out: &mut Vec<u8>, len: usize) -> Result<(), Error> {
    if len > MAX_FRAME_BYTES {
        return Err(Error::FrameTooLarge { len, max: MAX_FRAME_BYTES });
    }
    out.extend_from_slice(&(len as u32).to_le_bytes());
    Ok(())
}

pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) -> Result<(), Error> {
    put_len(out, b.len())?;
    out.extend_from_slice(b);
    Ok(())
}

pub(crate) fn put_u32s(out: &mut Vec<u8>, v: &[u32]) -> Result<(), Error> {
    put_len(out, v.len())?;
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    Ok(())
}

pub(crate) struct Cursor<'a> {
    pub(crate) buf: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.buf.len() < n {
            return Err(proto("truncated frame"));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.array::<1>()?[0])
    }
    /// A `u8` that must be 0 or 1.
    pub(crate) fn flag(&mut self) -> Result<bool, Error> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(proto("flag is neither 0 nor 1")),
        }
    }
    fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    pub(crate) fn i32(&mut self) -> Result<i32, Error> {
        Ok(i32::from_le_bytes(self.array()?))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(crate) fn str(&mut self) -> Result<String, Error> {
        let b = self.bytes()?;
        std::str::from_utf8(b).map(str::to_owned).map_err(|_| proto("string is not UTF-8"))
    }
    pub(crate) fn u32s(&mut self) -> Result<Vec<u32>, Error> {
        let n = self.u32()? as usize;
        if n > self.buf.len() / 4 {
            return Err(proto("truncated frame"));
        }
        // Exactly `n` (checked against the bytes present): `collect` over a fallible
        // iterator would grow by doubling, past the frame's own size.
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            v.push(self.u32()?);
        }
        Ok(v)
    }
    pub(crate) fn finish(&self) -> Result<(), Error> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(proto("trailing bytes in frame"))
        }
    }
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;

    fn body(frame: &[u8]) -> &[u8] {
        let len = u32::from_le_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(frame.len(), len + 4);
        &frame[4..]
    }

    #[test]
    fn requests_round_trip() {
        let reqs = [
            Request::Hello { version: PROTOCOL_VERSION, rank: 7, secret: b"abc".to_vec() },
            Request::Put { key: "k\u{e9}".into(), value: vec![0, 1, 2] },
            Request::Get { key: String::new(), timeout_ms: u64::MAX },
            Request::Fence { timeout_ms: 5 },
            Request::Finalized,
            Request::Abort { code: -3, ranks: vec![1, 2, 3] },
            Request::Exited,
            Request::Departed,
            Request::Initialized,
            Request::Finalizing,
            Request::Join { timeout_ms: 60_000 },
            Request::Alive,
            Request::Started,
            Request::Confirm { suspect: 3 },
        ];
        for r in reqs {
            let mut out = Vec::new();
            r.encode(&mut out).unwrap();
            assert_eq!(Request::decode(body(&out)).unwrap(), r);
        }
    }

    #[test]
    fn responses_round_trip() {
        let resps = [
            Response::Ok,
            Response::Value(vec![9; 100]),
            Response::Timeout,
            Response::PeerExited { rank: 3 },
            Response::Exited(vec![4, 1]),
            Response::Failed { reason: "no".into() },
            Response::Out(vec![2, 5]),
            Response::Out(Vec::new()),
            Response::Excluded,
            Response::Starting,
            Response::Alive,
        ];
        for r in resps {
            let mut out = Vec::new();
            r.encode(&mut out).unwrap();
            assert_eq!(Response::decode(body(&out)).unwrap(), r);
        }
    }

    #[test]
    fn garbage_never_panics() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(1);
        for _ in 0..20_000 {
            let len = rng.gen_range(0..40);
            let mut b: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            if !b.is_empty() && rng.gen_bool(0.7) {
                b[0] = rng.gen_range(0..8) | if rng.gen() { 0x80 } else { 0 };
            }
            let _ = Request::decode(&b);
            let _ = Response::decode(&b);
        }
        assert!(Request::decode(&[]).is_err());
        assert!(Request::decode(&[T_FINALIZED, 0]).is_err());
        assert!(Request::decode(&[T_ABORT, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]).is_err());
    }

    #[test]
    fn oversized_frames_rejected() {
        let mut announce = Vec::new();
        announce.extend_from_slice(&((MAX_FRAME_BYTES as u32) + 1).to_le_bytes());
        let r = read_frame(&mut announce.as_slice(), MAX_FRAME_BYTES);
        assert!(matches!(r, Err(Error::FrameTooLarge { .. })));
        let r = read_frame(&mut &[1u8, 0][..], MAX_FRAME_BYTES);
        assert!(matches!(r, Err(Error::Disconnected)));
        assert!(read_frame(&mut &[][..], 10).unwrap().is_none());
        let big = Request::Put { key: "k".into(), value: vec![0; MAX_FRAME_BYTES] };
        let mut out = Vec::new();
        assert!(matches!(big.encode(&mut out), Err(Error::FrameTooLarge { .. })));
        assert!(out.is_empty());
    }
}
