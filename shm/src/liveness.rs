//! Peer liveness on one node: the kernel tells when a peer process exits (T-FD,
//! "shm peer death (pidfd)"), without a launcher and without waiting for heartbeats.
//!
//! Parts: [`PeerWatch`] (one `pidfd_open(2)` descriptor per peer process, polled without
//! blocking) and [`PeerExit`] (what it reports: the rank, and whether it had finalized,
//! read from the segment's [`Departures`] marks).
//!
//! A pidfd becomes readable when its process terminates (Linux ≥ 5.3); `poll(2)` with a
//! zero timeout over all of them is one cheap system call, so the runtime's progress
//! thread can ask every tick. A rank that finalized sets its departure mark before it
//! exits, so its exit is reported with `finalized: true` and taken as a departure, not a
//! failure. When the kernel refuses pidfds (`ENOSYS` on old kernels, `EPERM` under some
//! seccomp policies) [`PeerWatch::open`] fails with [`Error::Io`] and the caller goes on
//! without the watch. Each descriptor is an [`OwnedFd`]: dropping the watch closes them.
//!
//! The watch names processes by pid: a pid is valid from the moment the peer published it
//! (at start-up, while it waits for the others) until it exits, and the pidfd taken then
//! keeps naming that process even if the pid is reused later.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::segment::Departures;
use crate::Error;

/// A peer process that exited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerExit {
    /// The peer's rank.
    pub rank: u32,
    /// Whether it marked itself finalized before exiting (a departure, not a failure).
    pub finalized: bool,
}

/// Watches peer processes of this node for exit through pidfds.
#[derive(Debug)]
pub struct PeerWatch {
    /// Ranks still watched, index-aligned with `fds` and `pollfds`.
    ranks: Vec<u32>,
    fds: Vec<OwnedFd>,
    pollfds: Vec<libc::pollfd>,
    /// Peers already gone when the watch was opened (`ESRCH`): reported by the next poll.
    gone: Vec<u32>,
    /// Every peer given to [`PeerWatch::open`], `(rank, pid)`.
    pids: Vec<(u32, i32)>,
    departures: Departures,
}

/// `pidfd_open(pid, 0)`: a descriptor (close-on-exec) that becomes readable when `pid`
/// exits.
fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes two integers and touches no memory of this process.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: on success the kernel returned a new descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

impl PeerWatch {
    /// Opens a pidfd for each `(rank, pid)` in `peers`. A peer already gone is reported
    /// (as not finalized, unless marked) by the first [`PeerWatch::poll_exited`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a pid ≤ 0; [`Error::Io`] (`op: "pidfd_open"`) when
    /// the kernel refuses pidfds (`ENOSYS`, `EPERM`, ...) or is out of descriptors: the
    /// caller then relies on its other evidence of peer death.
    pub fn open(peers: &[(u32, i32)], departures: Departures) -> Result<PeerWatch, Error> {
        let mut w = PeerWatch {
            ranks: Vec::with_capacity(peers.len()),
            fds: Vec::with_capacity(peers.len()),
            pollfds: Vec::with_capacity(peers.len()),
            gone: Vec::new(),
            pids: peers.to_vec(),
            departures,
        };
        for &(rank, pid) in peers {
            if pid <= 0 {
                return Err(Error::InvalidArgument("watched pid must be positive"));
            }
            match pidfd_open(pid) {
                Ok(fd) => {
                    w.pollfds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
                    w.fds.push(fd);
                    w.ranks.push(rank);
                }
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => w.gone.push(rank),
                Err(source) => return Err(Error::Io { op: "pidfd_open", source }),
            }
        }
        Ok(w)
    }

    /// Whether peer `rank`'s process is alive and not stopped — running, runnable or
    /// sleeping (`/proc/PID/stat`) — however long since it was last scheduled: `None`
    /// for a rank this watch does not cover, `Some(false)` once it exited (seen by
    /// [`PeerWatch::poll_exited`], or its state is zombie or gone) or while it is stopped
    /// (`T`: hung until continued). Busy is not dead: a peer starved of a core, or
    /// computing while its progress thread waits for one, is `Some(true)`.
    pub fn is_running(&self, rank: u32) -> Option<bool> {
        let &(_, pid) = self.pids.iter().find(|p| p.0 == rank)?;
        if !self.ranks.contains(&rank) {
            return Some(false);
        }
        Some(process_running(pid))
    }

    /// Number of peers still watched (not yet reported).
    pub fn watched(&self) -> usize {
        self.ranks.len() + self.gone.len()
    }

    /// Appends to `out` the peers that exited since the last call (each reported once)
    /// and stops watching them. Never blocks: one `poll(2)` with a zero timeout, or none
    /// when nothing is watched.
    pub fn poll_exited(&mut self, out: &mut Vec<PeerExit>) {
        for rank in self.gone.drain(..) {
            out.push(PeerExit { rank, finalized: self.departures.is_marked(rank) });
        }
        if self.pollfds.is_empty() {
            return;
        }
        // SAFETY: `pollfds` is a live, exclusively borrowed array of `len()` entries whose
        // descriptors are owned by `fds` (open for the whole call); timeout 0 never blocks.
        let n = unsafe { libc::poll(self.pollfds.as_mut_ptr(), self.pollfds.len() as libc::nfds_t, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EINTR) {
                tracing::debug!(error = %e, "poll of peer pidfds failed");
            }
            return;
        }
        if n == 0 {
            return;
        }
        let mut i = 0;
        while i < self.pollfds.len() {
            // POLLIN: the process exited. POLLHUP/POLLERR/POLLNVAL: the descriptor can no
            // longer tell; take the process as gone rather than watch it forever.
            if self.pollfds[i].revents != 0 {
                let rank = self.ranks.swap_remove(i);
                self.pollfds.swap_remove(i);
                drop(self.fds.swap_remove(i));
                // Read after the exit was seen: a mark set before exiting is visible.
                let finalized = self.departures.is_marked(rank);
                tracing::debug!(rank, finalized, "peer process exited (pidfd)");
                out.push(PeerExit { rank, finalized });
            } else {
                i += 1;
            }
        }
    }
}

/// Whether process `pid` of this host is alive and not stopped according to
/// `/proc/PID/stat` (state `R`, `S`, `D`, `I`...; not `T`/`t` stopped, not `Z`/`X` dead,
/// not gone). Safe code: it reads a file.
pub fn process_running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "PID (COMM) STATE ...": the state follows the last ')'.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .is_some_and(|s| !matches!(s, "T" | "t" | "Z" | "X" | "x"))
}

#[cfg(test)]
mod tests {
    use std::process::Command;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::segment::{default_name, Layout, Segment};

    fn departures(tag: &str) -> Departures {
        let name = default_name(&format!("unit-{}-{tag}", std::process::id()));
        let _ = Segment::unlink(&name);
        let seg = Segment::create(&name, Layout { nranks: 4, ring_bytes: 4096, bulk_bytes: 0 }).unwrap();
        Segment::unlink(&name).unwrap();
        seg.departures()
    }

    fn wait_exits(w: &mut PeerWatch, want: usize) -> Vec<PeerExit> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while out.len() < want && Instant::now() < deadline {
            w.poll_exited(&mut out);
            std::thread::sleep(Duration::from_millis(1));
        }
        out
    }

    /// Whether this kernel (and its seccomp policy) hands out pidfds.
    fn pidfds_available() -> bool {
        match pidfd_open(std::process::id() as i32) {
            Ok(_) => true,
            Err(e) => {
                eprintln!("pidfd unavailable here ({e}); nothing to test");
                false
            }
        }
    }

    /// Busy is not dead: a sleeping or spinning peer is running; a stopped one is not,
    /// nor one that exited; a rank the watch does not cover is `None`.
    #[test]
    fn is_running_tells_busy_from_stopped_and_gone() {
        if !pidfds_available() {
            return;
        }
        let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
        let mut spinner = Command::new("sh").args(["-c", "while :; do :; done"]).spawn().unwrap();
        let pids = [(1, sleeper.id() as i32), (2, spinner.id() as i32)];
        let mut w = PeerWatch::open(&pids, departures("running")).expect("pidfds of live children");
        assert_eq!((w.is_running(1), w.is_running(2), w.is_running(3)), (Some(true), Some(true), None));
        assert!(Command::new("kill").args(["-STOP", &spinner.id().to_string()]).status().unwrap().success());
        let t0 = Instant::now();
        while w.is_running(2) != Some(false) {
            assert!(t0.elapsed() < Duration::from_secs(10), "a stopped process still running");
            std::thread::sleep(Duration::from_millis(1));
        }
        sleeper.kill().unwrap();
        sleeper.wait().unwrap();
        assert_eq!(w.is_running(1), Some(false), "a reaped process");
        assert_eq!(wait_exits(&mut w, 1), vec![PeerExit { rank: 1, finalized: false }]);
        assert_eq!(w.is_running(1), Some(false), "an exit reported");
        spinner.kill().unwrap();
        spinner.wait().unwrap();
    }

    #[test]
    fn exits_are_reported_once_with_their_departure_mark() {
        if !pidfds_available() {
            return;
        }
        let marks = departures("pidfd");
        let mut a = Command::new("sleep").arg("30").spawn().unwrap();
        let mut b = Command::new("sleep").arg("30").spawn().unwrap();
        let mut c = Command::new("sleep").arg("30").spawn().unwrap();
        let pids = [(1, a.id() as i32), (2, b.id() as i32), (3, c.id() as i32)];
        let mut w = PeerWatch::open(&pids, marks.clone()).expect("pidfds of live children");
        let mut out = Vec::new();
        w.poll_exited(&mut out);
        assert!(out.is_empty(), "nobody exited yet: {out:?}");
        // Rank 2 "finalizes" (marks, then exits); rank 1 is killed.
        marks.mark(2).unwrap();
        b.kill().unwrap();
        a.kill().unwrap();
        a.wait().unwrap();
        b.wait().unwrap();
        let mut got = wait_exits(&mut w, 2);
        got.sort_by_key(|x| x.rank);
        assert_eq!(got, vec![PeerExit { rank: 1, finalized: false }, PeerExit { rank: 2, finalized: true }]);
        assert_eq!(w.watched(), 1);
        // A process still running is not reported, and nothing is reported twice.
        let mut again = Vec::new();
        w.poll_exited(&mut again);
        assert!(again.is_empty(), "{again:?}");
        // An exited but not yet reaped process (a zombie) counts as exited.
        c.kill().unwrap();
        assert_eq!(wait_exits(&mut w, 1), vec![PeerExit { rank: 3, finalized: false }]);
        c.wait().unwrap();
        assert_eq!(w.watched(), 0);
    }

    #[test]
    fn a_peer_gone_before_the_watch_is_reported_and_bad_pids_are_refused() {
        if !pidfds_available() {
            return;
        }
        let mut p = Command::new("true").spawn().unwrap();
        let pid = p.id() as i32;
        p.wait().unwrap();
        let mut w = PeerWatch::open(&[(0, pid)], departures("gone")).expect("watch of a gone peer");
        assert_eq!(wait_exits(&mut w, 1), vec![PeerExit { rank: 0, finalized: false }]);
        assert!(matches!(PeerWatch::open(&[(0, 0)], departures("bad")), Err(Error::InvalidArgument(_))));
    }
}
