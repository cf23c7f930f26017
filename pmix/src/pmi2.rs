//! A PMI-2 client in Rust: the process's end of the `PMI_FD` socket a PMI-2 server
//! (Slurm's `mpi/pmi2` plugin in `slurmstepd`, MPICH's hydra) hands each task.
//!
//! Parts: [`Pmi2::from_env`] (adopt `PMI_FD`, greeting, `fullinit`), [`Pmi2::job_id`]
//! (`job-getid`), [`Pmi2::job_attr`] (`info-getjobattr`, e.g. `PMI_process_mapping`),
//! [`Pmi2::put`] / [`Pmi2::fence`] / [`Pmi2::get`] (`kvs-put`, `kvs-fence`, `kvs-get`),
//! [`Pmi2::abort`], [`Pmi2::finalize`]. The message format is in [`wire`]. Values are
//! text without `;`: callers hex-encode binary values ([`to_hex`], [`from_hex`]).
//!
//! Every call is synchronous (a request, then its answer). `kvs-fence` is the server's
//! plain fence: it completes when every task of the job has entered it, so a task that
//! died before entering it stalls it (Slurm then lets the step's other tasks wait; the
//! caller bounds the wait with [`Pmi2::set_timeout`]).

use std::io::Write;
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::Error;

pub mod wire;

use wire::Msg;

/// Environment variable holding the socket's descriptor number.
pub const PMI_FD: &str = "PMI_FD";
/// Environment variable holding this task's rank.
pub const PMI_RANK: &str = "PMI_RANK";
/// Environment variable holding the number of tasks.
pub const PMI_SIZE: &str = "PMI_SIZE";
/// Environment variable holding the PMI job id (optional; sent back in `fullinit`).
pub const PMI_JOBID: &str = "PMI_JOBID";

/// A PMI-2 connection; `finalize` (or drop) ends it.
#[derive(Debug)]
pub struct Pmi2 {
    stream: UnixStream,
    rank: u32,
    size: u32,
    jobid: String,
    finalized: bool,
}

impl Pmi2 {
    /// Connects when `PMI_FD` is set: `Ok(None)` without it.
    ///
    /// # Errors
    /// [`Error::Env`] when `PMI_FD` or `PMI_RANK` is malformed or the descriptor is not
    /// open; the errors of the greeting and `fullinit` otherwise.
    pub fn from_env() -> Result<Option<Pmi2>, Error> {
        Pmi2::from_vars(|v| std::env::var(v).ok())
    }

    /// Like [`Pmi2::from_env`], reading `PMI_FD`, `PMI_RANK` and `PMI_JOBID` through
    /// `var` (a snapshot of the environment).
    ///
    /// # Errors
    /// As [`Pmi2::from_env`].
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Pmi2>, Error> {
        let Some(fd) = var(PMI_FD) else { return Ok(None) };
        let fd: RawFd = fd
            .trim()
            .parse()
            .ok()
            .filter(|&fd: &RawFd| fd > 2)
            .ok_or_else(|| Error::Env(format!("{PMI_FD}={fd:?}: want a descriptor number above 2")))?;
        let env_u32 = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
        let rank = env_u32(PMI_RANK).ok_or_else(|| Error::Env(format!("{PMI_RANK} missing or not a number")))?;
        // SAFETY: `fcntl(F_GETFD)` only reads the descriptor's flags; any integer is a
        // valid argument (a closed one gives EBADF).
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } < 0 {
            return Err(Error::Env(format!("{PMI_FD}={fd}: {}", std::io::Error::last_os_error())));
        }
        // SAFETY: the descriptor is open (checked above) and is the PMI socket the
        // launcher created for this process alone (it is named only by PMI_FD, which the
        // launcher sets for exactly this purpose, and nothing else in this process takes
        // it): the stream becomes its only owner and closes it on drop.
        let stream = unsafe { UnixStream::from_raw_fd(fd) };
        let jobid = var(PMI_JOBID).unwrap_or_else(|| "-1".to_string());
        Pmi2::start(stream, rank, &jobid).map(Some)
    }

    /// The greeting and `fullinit` over `stream` (for tests: a socket pair).
    ///
    /// # Errors
    /// Those of the exchange; [`Error::Protocol`] when the answers are malformed or the
    /// rank the server reports differs from `rank`.
    pub fn start(mut stream: UnixStream, rank: u32, jobid: &str) -> Result<Pmi2, Error> {
        stream.write_all(wire::INIT_LINE)?;
        wire::decode_init_response(&wire::read_line(&mut stream)?)?;
        // `finalized` until start-up succeeds: a half-started connection says no `finalize`.
        let mut p = Pmi2 { stream, rank, size: 0, jobid: String::new(), finalized: true };
        let rank_s = rank.to_string();
        let r = p.call(
            "fullinit",
            &[("pmijobid", jobid), ("pmirank", &rank_s), ("threaded", "FALSE")],
            "fullinit-response",
        )?;
        let num = |key: &str| -> Result<u32, Error> {
            r.get(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| Error::Protocol(format!("fullinit-response: {key} missing or not a number")))
        };
        p.size = num("size")?;
        let server_rank = num("rank")?;
        if server_rank != rank || rank >= p.size {
            return Err(Error::Protocol(format!(
                "fullinit-response: rank {server_rank} of {} for {PMI_RANK}={rank}",
                p.size
            )));
        }
        let id = p.call("job-getid", &[], "job-getid-response")?;
        p.jobid = id.get("jobid").unwrap_or_default().to_owned();
        p.finalized = false;
        Ok(p)
    }

    /// This task's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The number of tasks of the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The job id (`job-getid`; Slurm: `JOBID.STEPID`), unique per job step.
    pub fn job_id(&self) -> &str {
        &self.jobid
    }

    /// Bounds how long one answer may take (`None`: wait for ever).
    ///
    /// # Errors
    /// [`Error::Io`] if the socket refuses the setting.
    pub fn set_timeout(&mut self, t: Option<Duration>) -> Result<(), Error> {
        Ok(self.stream.set_read_timeout(t)?)
    }

    /// A job attribute (`info-getjobattr`), `None` when the server has none of that name.
    ///
    /// # Errors
    /// Those of the exchange.
    pub fn job_attr(&mut self, key: &str) -> Result<Option<String>, Error> {
        let r = self.call("info-getjobattr", &[("key", key)], "info-getjobattr-response")?;
        Ok(found(&r))
    }

    /// Publishes `key` = `value` (visible to the others after the next fence).
    ///
    /// # Errors
    /// [`Error::Invalid`] for characters PMI-2 cannot carry; those of the exchange.
    pub fn put(&mut self, key: &str, value: &str) -> Result<(), Error> {
        self.call("kvs-put", &[("key", key), ("value", value)], "kvs-put-response").map(drop)
    }

    /// Waits until every task has entered the fence; afterwards each sees the others' puts.
    ///
    /// # Errors
    /// Those of the exchange (a timeout is an [`Error::Io`]).
    pub fn fence(&mut self) -> Result<(), Error> {
        self.call("kvs-fence", &[], "kvs-fence-response").map(drop)
    }

    /// The value of `key`.
    ///
    /// # Errors
    /// [`Error::NotFound`] when no task put it (before the last fence); those of the exchange.
    pub fn get(&mut self, key: &str) -> Result<String, Error> {
        let jobid = self.jobid.clone();
        let r = self.call("kvs-get", &[("jobid", &jobid), ("srcid", "-1"), ("key", key)], "kvs-get-response")?;
        found(&r).ok_or_else(|| Error::NotFound(key.to_owned()))
    }

    /// Asks the server to end the whole job (`isworld=TRUE`); no answer comes.
    ///
    /// # Errors
    /// Those of writing the request.
    pub fn abort(&mut self, msg: &str) -> Result<(), Error> {
        let msg: String = msg.chars().map(|c| if c == ';' || c == '\n' { ' ' } else { c }).collect();
        let f = wire::encode("abort", &[("isworld", "TRUE"), ("msg", &msg)])?;
        Ok(self.stream.write_all(&f)?)
    }

    /// Ends the connection (`finalize`); later calls fail.
    ///
    /// # Errors
    /// Those of the exchange.
    pub fn finalize(&mut self) -> Result<(), Error> {
        if self.finalized {
            return Ok(());
        }
        self.finalized = true;
        self.call("finalize", &[], "finalize-response").map(drop)
    }

    /// Sends one request and reads its answer, which must be `expect` with `rc=0`.
    fn call(&mut self, cmd: &str, pairs: &[(&str, &str)], expect: &str) -> Result<Msg, Error> {
        let f = wire::encode(cmd, pairs)?;
        self.stream.write_all(&f)?;
        let r = Msg::decode(&wire::read_frame(&mut self.stream)?)?;
        if r.cmd != expect {
            return Err(Error::Protocol(format!("{cmd}: answered with {}", r.cmd)));
        }
        let rc = r.rc()?;
        if rc != 0 {
            let msg = r.get("errmsg").or(r.get("msg")).unwrap_or_default().to_owned();
            return Err(Error::Pmi2 { cmd: cmd.to_owned(), rc, msg });
        }
        Ok(r)
    }
}

/// The `value` of an answer with `found=TRUE`.
fn found(r: &Msg) -> Option<String> {
    match r.get("found") {
        Some(f) if f.eq_ignore_ascii_case("TRUE") => r.get("value").map(str::to_owned),
        _ => None,
    }
}

/// Lowercase hex of `bytes` (PMI-2 values are text).
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The bytes of a hex string.
///
/// # Errors
/// [`Error::Protocol`] for an odd length or a non-hex digit.
pub fn from_hex(s: &str) -> Result<Vec<u8>, Error> {
    let b = s.as_bytes();
    if !b.len().is_multiple_of(2) {
        return Err(Error::Protocol(format!("hex value of odd length {}", b.len())));
    }
    let digit = |c: u8| (c as char).to_digit(16).ok_or_else(|| Error::Protocol("non-hex digit in a value".into()));
    b.chunks_exact(2).map(|p| Ok((digit(p[0])? * 16 + digit(p[1])?) as u8)).collect()
}

impl Drop for Pmi2 {
    fn drop(&mut self) {
        if !self.finalized {
            let _ = self.finalize();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::io::Read;

    /// A server playing Slurm's part for `ntasks` = 1 over a socket pair.
    fn serve(mut s: UnixStream, size: u32) {
        let mut line = wire::read_line(&mut s).unwrap();
        line.push(b'\n');
        assert_eq!(line, wire::INIT_LINE);
        s.write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n").unwrap();
        let mut kvs: HashMap<String, String> = HashMap::new();
        let mut pending: HashMap<String, String> = HashMap::new();
        loop {
            let m = Msg::decode(&wire::read_frame(&mut s).unwrap()).unwrap();
            let reply = match m.cmd.as_str() {
                "fullinit" => {
                    assert_eq!((m.get("pmirank"), m.get("threaded")), (Some("0"), Some("FALSE")));
                    format!("cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=0;size={size};appnum=-1;debugged=FALSE;pmiverbose=FALSE;")
                }
                "job-getid" => "cmd=job-getid-response;rc=0;jobid=42.7;".into(),
                "info-getjobattr" => {
                    assert_eq!(m.get("key"), Some("PMI_process_mapping"));
                    "cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,1));".into()
                }
                "kvs-put" => {
                    pending.insert(m.get("key").unwrap().into(), m.get("value").unwrap().into());
                    "cmd=kvs-put-response;rc=0;".into()
                }
                "kvs-fence" => {
                    kvs.extend(pending.drain());
                    "cmd=kvs-fence-response;rc=0;".into()
                }
                "kvs-get" => match kvs.get(m.get("key").unwrap()) {
                    Some(v) => format!("cmd=kvs-get-response;rc=0;found=TRUE;value={v};"),
                    None => "cmd=kvs-get-response;rc=0;found=FALSE;".into(),
                },
                "finalize" => {
                    s.write_all(&Msg::decode(b"cmd=finalize-response;rc=0;").unwrap().encode().unwrap()).unwrap();
                    let mut rest = Vec::new();
                    s.read_to_end(&mut rest).unwrap();
                    assert!(rest.is_empty());
                    return;
                }
                other => panic!("unexpected {other}"),
            };
            s.write_all(&Msg::decode(reply.as_bytes()).unwrap().encode().unwrap()).unwrap();
        }
    }

    #[test]
    fn a_session_against_a_slurm_like_server() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || serve(b, 1));
        let mut p = Pmi2::start(a, 0, "-1").unwrap();
        assert_eq!((p.rank(), p.size(), p.job_id()), (0, 1, "42.7"));
        assert_eq!(p.job_attr("PMI_process_mapping").unwrap().as_deref(), Some("(vector,(0,1,1))"));
        p.put("fi/0", &to_hex(&[0, 1, 0xfe])).unwrap();
        assert!(matches!(p.get("fi/0"), Err(Error::NotFound(_))), "visible only after the fence");
        p.fence().unwrap();
        assert_eq!(from_hex(&p.get("fi/0").unwrap()).unwrap(), [0, 1, 0xfe]);
        assert!(p.put("k", "a;b").is_err());
        p.finalize().unwrap();
        drop(p);
        server.join().unwrap();
    }

    #[test]
    fn a_server_rank_other_than_ours_is_refused() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut b = b;
            let _ = wire::read_line(&mut b);
            b.write_all(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0\n").unwrap();
            let _ = wire::read_frame(&mut b);
            let r = wire::encode("fullinit-response", &[("rc", "0"), ("rank", "3"), ("size", "2")]).unwrap();
            b.write_all(&r).unwrap();
        });
        let e = Pmi2::start(a, 0, "-1").unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn hex() {
        assert_eq!(to_hex(&[0x00, 0xab, 0x7f]), "00ab7f");
        assert_eq!(from_hex("00AB7f").unwrap(), [0x00, 0xab, 0x7f]);
        assert!(from_hex("0").is_err() && from_hex("zz").is_err() && from_hex("é0").is_err());
    }
}
