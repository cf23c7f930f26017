//! The job environment `rtrun` gives every rank.
//!
//! | variable        | meaning                                                   |
//! |-----------------|-----------------------------------------------------------|
//! | `RT_RANK`       | this rank, `0..RT_SIZE`                                   |
//! | `RT_SIZE`       | number of ranks in the job                                |
//! | `RT_LOCAL_RANK` | rank among the ranks on this node                         |
//! | `RT_LOCAL_SIZE` | number of ranks on this node                              |
//! | `RT_JOBID`      | 16 lowercase hex characters, random per job               |
//! | `RT_KV_ADDR`    | `IP:PORT` of the key-value service: loopback (default) or |
//! |                 | the private address given by `rtrun --kv-addr`            |
//! | `RT_KV_SECRET`  | 64 lowercase hex characters, random per job, or `stdin`:  |
//! |                 | the secret is the first line of standard input            |
//! | `RT_BIND`       | `core`, `none` or `numa` (from `--bind-to`)               |
//! | `RT_SHM_NAME`   | `/rt-<jobid>`, the job's POSIX shared-memory name         |
//! | `RT_NODE`       | this host's name (the `--host` name in multi-host runs)   |
//!
//! Optional, read by the rank's fabric bring-up in multi-host runs (not part of
//! [`JobEnv`]):
//!
//! | variable          | meaning                                                 |
//! |-------------------|---------------------------------------------------------|
//! | `RT_FABRIC_ADDR`  | IP the fabric endpoint binds to (`--host NAME=IP`)      |
//! | `RT_FABRIC_IFACE` | interface whose first IPv4 address the endpoint binds to|
//!
//! The rest of the parent's environment is passed through unchanged.
//!
//! **The secret never travels in a command line.** Ranks `rtrun` starts itself get it in
//! their environment, which only their own user (and root) can read. Through a launch
//! agent the rank's variables are words of the agent's command line (`ssh` passes no
//! environment on), which every local user can read in `/proc/PID/cmdline`: there
//! `RT_KV_SECRET=stdin`, and `rtrun` writes the secret as the first line of the rank's
//! standard input. [`JobEnv::from_env`] reads that line once per process, a byte at a
//! time so nothing after it is consumed (rank 0's standard input follows it), and keeps
//! it in memory only.

use std::ffi::OsString;
use std::net::SocketAddr;

use crate::error::Error;

/// `RT_RANK`.
pub const RT_RANK: &str = "RT_RANK";
/// `RT_SIZE`.
pub const RT_SIZE: &str = "RT_SIZE";
/// `RT_LOCAL_RANK`.
pub const RT_LOCAL_RANK: &str = "RT_LOCAL_RANK";
/// `RT_LOCAL_SIZE`.
pub const RT_LOCAL_SIZE: &str = "RT_LOCAL_SIZE";
/// `RT_JOBID`.
pub const RT_JOBID: &str = "RT_JOBID";
/// `RT_KV_ADDR`.
pub const RT_KV_ADDR: &str = "RT_KV_ADDR";
/// `RT_KV_SECRET`.
pub const RT_KV_SECRET: &str = "RT_KV_SECRET";
/// `RT_BIND`.
pub const RT_BIND: &str = "RT_BIND";
/// `RT_SHM_NAME`.
pub const RT_SHM_NAME: &str = "RT_SHM_NAME";
/// `RT_NODE`.
pub const RT_NODE: &str = "RT_NODE";
/// `RT_FABRIC_ADDR` (optional): the IP this rank's fabric endpoint binds to.
pub const RT_FABRIC_ADDR: &str = "RT_FABRIC_ADDR";
/// `RT_FABRIC_IFACE` (optional): the interface this rank's fabric endpoint binds to.
pub const RT_FABRIC_IFACE: &str = "RT_FABRIC_IFACE";

/// The receive buffers `rtrun` gives libfabric's `ofi_rxm` (`FI_OFI_RXM_MSG_RX_SIZE`)
/// unless the user set it: left unset, rxm over tcp allocates and clears 4096 buffers of
/// 16 KiB at every rank's start (bench/history/NOTEBOOK.md §0.17).
pub const RXM_MSG_RX_SIZE: u32 = 256;

/// The libfabric variables `rtrun` exports to every rank before executing it, each only
/// when `is_set` says the user did not set it (ranks never write their environment:
/// libfabric reads its own, and a write would race with the application's threads).
/// `FI_OFI_RXM_MSG_RX_SIZE` is [`RXM_MSG_RX_SIZE`]; on one host the IP providers are
/// pinned to loopback (`FI_TCP_IFACE=lo`, `FI_SOCKETS_IFACE=lo`). Across hosts a rank
/// binds its endpoint to its own address (`RT_FABRIC_ADDR`, `RT_FABRIC_IFACE`), which the
/// launcher cannot know the interface of.
pub fn fabric_defaults(one_host: bool, is_set: impl Fn(&str) -> bool) -> Vec<(&'static str, String)> {
    let mut v = vec![("FI_OFI_RXM_MSG_RX_SIZE", RXM_MSG_RX_SIZE.to_string())];
    if one_host {
        v.push(("FI_TCP_IFACE", "lo".to_owned()));
        v.push(("FI_SOCKETS_IFACE", "lo".to_owned()));
    }
    v.retain(|(k, _)| !is_set(k));
    v
}

/// Every variable `rtrun` sets, in a stable order.
pub const ALL_VARS: [&str; 10] =
    [RT_RANK, RT_SIZE, RT_LOCAL_RANK, RT_LOCAL_SIZE, RT_JOBID, RT_KV_ADDR, RT_KV_SECRET, RT_BIND, RT_SHM_NAME, RT_NODE];

/// Length of `RT_JOBID` in hex characters.
pub const JOBID_HEX_LEN: usize = 16;
/// Length of `RT_KV_SECRET` in hex characters.
pub const SECRET_HEX_LEN: usize = 64;
/// The value of `RT_KV_SECRET` that says the secret is the first line of standard input.
pub const SECRET_FROM_STDIN: &str = "stdin";
/// How long a rank waits for the secret on its standard input before giving up.
const SECRET_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What one rank knows about its job, from the `RT_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobEnv {
    /// This rank (`RT_RANK`), `< size`.
    pub rank: u32,
    /// Number of ranks (`RT_SIZE`), `>= 1`.
    pub size: u32,
    /// Rank on this node (`RT_LOCAL_RANK`), `< local_size`.
    pub local_rank: u32,
    /// Ranks on this node (`RT_LOCAL_SIZE`).
    pub local_size: u32,
    /// Job id (`RT_JOBID`), 16 hex characters.
    pub jobid: String,
    /// Address of the launcher's key-value service (`RT_KV_ADDR`): loopback or a private
    /// address ([`crate::hosts::kv_ip_allowed`]).
    pub kv_addr: SocketAddr,
    /// Per-job secret (`RT_KV_SECRET`), 64 hex characters; the first thing a client sends.
    pub secret: String,
    /// Binding policy (`RT_BIND`): `core`, `none` or `numa`.
    pub bind: String,
    /// POSIX shared-memory name of the job (`RT_SHM_NAME`), starts with `/`.
    pub shm_name: String,
    /// This host's name (`RT_NODE`).
    pub node: String,
}

impl JobEnv {
    /// Reads the job environment of this process.
    ///
    /// Returns `Ok(None)` when `RT_RANK` is absent (a singleton run without `rtrun`).
    ///
    /// # Errors
    /// [`Error::MissingEnv`] if `RT_RANK` is set but another variable is missing,
    /// [`Error::BadEnv`] if a variable is malformed.
    /// With `RT_KV_SECRET=stdin` the secret is read from standard input (the first time
    /// only; later calls reuse it): an error if the input ends or stays silent for a
    /// minute before a whole line arrived.
    pub fn from_env() -> Result<Option<JobEnv>, Error> {
        JobEnv::from_launcher(|v| std::env::var_os(v))
    }

    /// Like [`JobEnv::from_env`] (the secret read from standard input when the launcher
    /// says so), but reads variables through `lookup`: a snapshot of the environment.
    ///
    /// # Errors
    /// As [`JobEnv::from_env`].
    pub fn from_launcher<F>(mut lookup: F) -> Result<Option<JobEnv>, Error>
    where
        F: FnMut(&str) -> Option<OsString>,
    {
        let from_stdin = lookup(RT_RANK).is_some() && lookup(RT_KV_SECRET).is_some_and(|v| v == SECRET_FROM_STDIN);
        let secret = match from_stdin {
            true => Some(secret_from_stdin().map_err(|reason| Error::BadEnv {
                var: RT_KV_SECRET,
                value: SECRET_FROM_STDIN.to_owned(),
                reason,
            })?),
            false => None,
        };
        JobEnv::from_lookup(|name| match (name, &secret) {
            (RT_KV_SECRET, Some(s)) => Some(OsString::from(s)),
            _ => lookup(name),
        })
    }

    /// Like [`JobEnv::from_env`], but reads variables through `lookup` (for tests and for
    /// other launchers that carry the same information).
    ///
    /// # Errors
    /// As [`JobEnv::from_env`].
    pub fn from_lookup<F>(mut lookup: F) -> Result<Option<JobEnv>, Error>
    where
        F: FnMut(&str) -> Option<OsString>,
    {
        if lookup(RT_RANK).is_none() {
            return Ok(None);
        }
        let mut get = |var: &'static str| -> Result<String, Error> {
            let raw = lookup(var).ok_or(Error::MissingEnv { var })?;
            raw.into_string().map_err(|raw| Error::BadEnv {
                var,
                value: raw.to_string_lossy().into_owned(),
                reason: "not valid UTF-8",
            })
        };
        let rank = parse_u32(RT_RANK, get(RT_RANK)?)?;
        let size = parse_u32(RT_SIZE, get(RT_SIZE)?)?;
        let local_rank = parse_u32(RT_LOCAL_RANK, get(RT_LOCAL_RANK)?)?;
        let local_size = parse_u32(RT_LOCAL_SIZE, get(RT_LOCAL_SIZE)?)?;
        let jobid = get(RT_JOBID)?;
        let kv_addr_s = get(RT_KV_ADDR)?;
        let secret = get(RT_KV_SECRET)?;
        let bind = get(RT_BIND)?;
        let shm_name = get(RT_SHM_NAME)?;
        let node = get(RT_NODE)?;

        let bad = |var: &'static str, value: &str, reason: &'static str| Error::BadEnv {
            var,
            value: value.to_owned(),
            reason,
        };
        if size == 0 {
            return Err(bad(RT_SIZE, "0", "must be at least 1"));
        }
        if rank >= size {
            return Err(bad(RT_RANK, &rank.to_string(), "must be less than RT_SIZE"));
        }
        if local_size == 0 || local_size > size {
            return Err(bad(RT_LOCAL_SIZE, &local_size.to_string(), "must be in 1..=RT_SIZE"));
        }
        if local_rank >= local_size {
            return Err(bad(RT_LOCAL_RANK, &local_rank.to_string(), "must be less than RT_LOCAL_SIZE"));
        }
        if !is_hex(&jobid, JOBID_HEX_LEN) {
            return Err(bad(RT_JOBID, &jobid, "must be 16 hex characters"));
        }
        if !is_hex(&secret, SECRET_HEX_LEN) {
            // Never echo the secret itself.
            return Err(bad(RT_KV_SECRET, "<redacted>", "must be 64 hex characters"));
        }
        let kv_addr: SocketAddr =
            kv_addr_s.parse().map_err(|_| bad(RT_KV_ADDR, &kv_addr_s, "not an IP:PORT address"))?;
        if !crate::hosts::kv_ip_allowed(kv_addr.ip()) || kv_addr.port() == 0 {
            return Err(bad(RT_KV_ADDR, &kv_addr_s, "must be a loopback or private IP:PORT"));
        }
        if !matches!(bind.as_str(), "core" | "hwthread" | "none" | "numa") {
            return Err(bad(RT_BIND, &bind, "must be core, hwthread, none or numa"));
        }
        if !shm_name.starts_with('/') || shm_name.len() < 2 || shm_name[1..].contains('/') || shm_name.len() > 255 {
            return Err(bad(RT_SHM_NAME, &shm_name, "must be /NAME without other slashes"));
        }
        Ok(Some(JobEnv { rank, size, local_rank, local_size, jobid, kv_addr, secret, bind, shm_name, node }))
    }

    /// The `(name, value)` pairs that describe this environment, in [`ALL_VARS`] order
    /// (what `rtrun` sets for a rank).
    pub fn to_vars(&self) -> Vec<(&'static str, String)> {
        vec![
            (RT_RANK, self.rank.to_string()),
            (RT_SIZE, self.size.to_string()),
            (RT_LOCAL_RANK, self.local_rank.to_string()),
            (RT_LOCAL_SIZE, self.local_size.to_string()),
            (RT_JOBID, self.jobid.clone()),
            (RT_KV_ADDR, self.kv_addr.to_string()),
            (RT_KV_SECRET, self.secret.clone()),
            (RT_BIND, self.bind.clone()),
            (RT_SHM_NAME, self.shm_name.clone()),
            (RT_NODE, self.node.clone()),
        ]
    }
}

/// Why a secret promised on standard input did not arrive.
const STDIN_REASON: &str = "standard input ended or stayed silent before the job secret's line \
     (a launch agent must pass standard input on: `docker exec -i`, `ssh` without -n)";

/// The secret from the first line of standard input, read once per process.
fn secret_from_stdin() -> Result<String, &'static str> {
    static SECRET: std::sync::OnceLock<Result<String, &'static str>> = std::sync::OnceLock::new();
    SECRET.get_or_init(read_secret_line).clone()
}

/// Reads up to the first newline of standard input, one byte at a time from a duplicate
/// of descriptor 0 (no buffer that could swallow what follows the line), on a helper
/// thread so a silent input cannot hang start-up.
fn read_secret_line() -> Result<String, &'static str> {
    use std::io::Read as _;
    use std::os::fd::AsFd as _;
    let fd = std::io::stdin().as_fd().try_clone_to_owned().map_err(|_| "standard input is closed")?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("rt-secret".into())
        .spawn(move || {
            let mut f = std::fs::File::from(fd);
            let mut line = Vec::with_capacity(SECRET_HEX_LEN + 1);
            let mut b = [0u8; 1];
            let got = loop {
                match f.read(&mut b) {
                    Ok(1) if b[0] == b'\n' => break String::from_utf8(line).ok(),
                    Ok(1) if line.len() <= SECRET_HEX_LEN => line.push(b[0]),
                    Ok(1) => break None,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    _ => break None,
                }
            };
            let _ = tx.send(got);
        })
        .map_err(|_| "no thread to read standard input")?;
    match rx.recv_timeout(SECRET_WAIT) {
        Ok(Some(line)) => Ok(line),
        _ => Err(STDIN_REASON),
    }
}

fn parse_u32(var: &'static str, value: String) -> Result<u32, Error> {
    value.trim().parse::<u32>().map_err(|_| Error::BadEnv { var, value, reason: "not a non-negative 32-bit integer" })
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn sample() -> JobEnv {
        JobEnv {
            rank: 1,
            size: 4,
            local_rank: 1,
            local_size: 4,
            jobid: "0123456789abcdef".into(),
            kv_addr: "127.0.0.1:4000".parse().unwrap(),
            secret: "ab".repeat(32),
            bind: "core".into(),
            shm_name: "/rt-0123456789abcdef".into(),
            node: "host".into(),
        }
    }

    fn parse(vars: &HashMap<&'static str, String>) -> Result<Option<JobEnv>, Error> {
        JobEnv::from_lookup(|k| vars.get(k).map(OsString::from))
    }

    #[test]
    fn fabric_defaults_leave_what_the_user_set() {
        let all = fabric_defaults(true, |_| false);
        assert_eq!(
            all.iter().map(|(k, _)| *k).collect::<Vec<_>>(),
            ["FI_OFI_RXM_MSG_RX_SIZE", "FI_TCP_IFACE", "FI_SOCKETS_IFACE"]
        );
        assert_eq!(all[0].1, "256");
        let across = fabric_defaults(false, |k| k == "FI_OFI_RXM_MSG_RX_SIZE");
        assert!(across.is_empty(), "{across:?}");
    }

    #[test]
    fn round_trip() {
        let env = sample();
        let vars: HashMap<_, _> = env.to_vars().into_iter().collect();
        assert_eq!(parse(&vars).unwrap(), Some(env));
    }

    #[test]
    fn private_kv_address_for_multi_host_runs() {
        for addr in ["10.77.0.1:4000", "192.168.3.4:9", "[fd00::1]:77", "[::1]:5"] {
            let env = JobEnv { kv_addr: addr.parse().unwrap(), ..sample() };
            let vars: HashMap<_, _> = env.to_vars().into_iter().collect();
            assert_eq!(parse(&vars).unwrap(), Some(env), "{addr}");
        }
    }

    #[test]
    fn absent_rank_is_singleton() {
        assert_eq!(parse(&HashMap::new()).unwrap(), None);
    }

    #[test]
    fn missing_and_malformed() {
        let good: HashMap<_, _> = sample().to_vars().into_iter().collect();
        let mut v = good.clone();
        v.remove(RT_KV_SECRET);
        assert!(matches!(parse(&v), Err(Error::MissingEnv { var: RT_KV_SECRET })));
        for (var, value) in [
            (RT_RANK, "x"),
            (RT_RANK, "4"),
            (RT_SIZE, "0"),
            (RT_JOBID, "xyz"),
            (RT_KV_SECRET, "00"),
            (RT_KV_ADDR, "8.8.8.8:5"),
            (RT_KV_ADDR, "0.0.0.0:5"),
            (RT_KV_ADDR, "10.0.0.1:0"),
            (RT_KV_ADDR, "nope"),
            (RT_BIND, "socket"),
            (RT_SHM_NAME, "rt-x"),
            (RT_LOCAL_RANK, "9"),
        ] {
            let mut v = good.clone();
            v.insert(var, value.into());
            match parse(&v) {
                Err(Error::BadEnv { var: got, .. }) => assert_eq!(got, var, "{var}={value}"),
                other => panic!("{var}={value}: {other:?}"),
            }
        }
    }
}
