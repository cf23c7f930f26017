//! The crate's only `unsafe` code: thin wrappers over the libc facilities the launcher
//! needs and std does not offer.
//!
//! - [`install_termination_handlers`] / [`termination_requested`]: a `sigaction`
//!   handler for SIGINT and SIGTERM that only stores to an `AtomicBool` (async-signal
//!   safe); the launcher's supervision loop polls the flag.
//! - [`kill_on_parent_death`]: a `pre_exec` hook setting `prctl(PR_SET_PDEATHSIG,
//!   SIGKILL)` in each rank, so ranks die if `rtrun` dies. Linux delivers the signal
//!   when the *thread* that forked exits, so ranks must be spawned from the main thread.
//! - [`shm_unlink`]: removes the job's POSIX shared-memory segment.
//! - [`interface_addresses`]: the IP addresses of this network namespace's interfaces
//!   (`getifaddrs`), so a rank can find the interface that holds its fabric address.
//! - [`open_pty`]: a pseudo-terminal per rank for `--output pty` (`openpty`, raw mode).
//! - [`proc_state`]: a process's state from `/proc/PID/stat` (safe code).
//! - [`stdin_is_background_terminal`]: whether reading standard input would stop `rtrun`
//!   (`tcgetpgrp`), before it forwards that input to rank 0 through a launch agent.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};

static TERMINATION_REQUESTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_termination_signal(_signal: libc::c_int) {
    // Only an atomic store: async-signal safe.
    TERMINATION_REQUESTED.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT/SIGTERM handler. Child processes get default dispositions back
/// at `exec` (handlers, unlike ignored signals, do not survive `exec`).
pub(crate) fn install_termination_handlers() -> io::Result<()> {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is a plain C struct for which all-zero bytes is a valid
        // (empty) value.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_termination_signal as extern "C" fn(libc::c_int) as usize;
        action.sa_flags = libc::SA_RESTART;
        // SAFETY: `action.sa_mask` is a valid, exclusively borrowed sigset_t.
        if unsafe { libc::sigemptyset(&mut action.sa_mask) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `action` is fully initialised and points at an `extern "C"` handler
        // that only performs an async-signal-safe atomic store; a null old-action
        // pointer is allowed.
        if unsafe { libc::sigaction(signal, &action, std::ptr::null_mut()) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`install_termination_handlers`].
pub(crate) fn termination_requested() -> bool {
    TERMINATION_REQUESTED.load(Ordering::SeqCst)
}

/// Runs in the child between `fork` and `exec`: only async-signal-safe calls, no
/// allocation (`last_os_error` / `from_raw_os_error` do not allocate).
fn child_set_parent_death_signal(parent: libc::pid_t) -> io::Result<()> {
    // SAFETY: prctl with PR_SET_PDEATHSIG takes a signal number and no pointers.
    let rc = unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
            0 as libc::c_ulong,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: getppid has no preconditions.
    if unsafe { libc::getppid() } != parent {
        // The launcher died before prctl took effect: do not run orphaned.
        return Err(io::Error::from_raw_os_error(libc::ESRCH));
    }
    Ok(())
}

/// Makes the spawned process receive SIGKILL when the spawning thread exits.
pub(crate) fn kill_on_parent_death(cmd: &mut Command) {
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the hook runs in the forked child before exec and only calls
    // `child_set_parent_death_signal`, which is async-signal safe and allocation free.
    unsafe {
        cmd.pre_exec(move || child_set_parent_death_signal(parent));
    }
}

/// `shm_unlink(name)`; a missing segment (ENOENT) is not an error.
pub(crate) fn shm_unlink(name: &str) -> io::Result<()> {
    let c_name = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: `c_name` is a valid NUL-terminated string that outlives the call.
    if unsafe { libc::shm_unlink(c_name.as_ptr()) } == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ENOENT) {
        Ok(())
    } else {
        Err(err)
    }
}

/// Sends SIGSTOP (`stop = true`) or SIGCONT to `pid` (fault injection).
pub(crate) fn stop_or_continue(pid: u32, stop: bool) -> io::Result<()> {
    let sig = if stop { libc::SIGSTOP } else { libc::SIGCONT };
    // SAFETY: kill(2) with a pid of a child we spawned (not yet reaped, so the pid cannot
    // have been reused) and a valid signal number; no memory is involved.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends SIGTERM to child `pid` (the first step of an abort's kill: SIGKILL follows
/// after a grace period).
pub(crate) fn terminate(pid: u32) -> io::Result<()> {
    // SAFETY: kill(2) with a pid of a child we spawned (not yet reaped, so the pid cannot
    // have been reused) and a valid signal number; no memory is involved.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `(interface, address, up)` for every IPv4/IPv6 address of every interface, in
/// `getifaddrs` order.
pub(crate) fn interface_addresses() -> io::Result<Vec<(String, IpAddr, bool)>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs writes a list head we free below with freeifaddrs.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, valid until freeifaddrs.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_name is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }.to_string_lossy().into_owned();
        let up = ifa.ifa_flags & libc::IFF_UP as libc::c_uint != 0;
        // SAFETY: ifa_addr points to a sockaddr whose family says which struct it is.
        let ip = unsafe {
            match i32::from((*ifa.ifa_addr).sa_family) {
                libc::AF_INET => {
                    let sin = &*(ifa.ifa_addr as *const libc::sockaddr_in);
                    IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
                }
                libc::AF_INET6 => {
                    let sin6 = &*(ifa.ifa_addr as *const libc::sockaddr_in6);
                    IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
                }
                _ => continue,
            }
        };
        out.push((name, ip, up));
    }
    // SAFETY: `head` came from getifaddrs and is freed exactly once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// What `/proc/PID/stat` says of a process on this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProcState {
    /// Running, runnable, sleeping or in an uninterruptible wait (`R`, `S`, `D`, `I`,
    /// ...): alive, however long since it was last scheduled.
    Alive,
    /// Stopped by a signal (`T`) or by a tracer (`t`): hung until continued.
    Stopped,
    /// A zombie (`Z`), dead (`X`), or gone (no `/proc/PID/stat`, or no procfs).
    Dead,
}

/// The state of process `pid` according to `/proc/PID/stat`. Safe code: it reads a file.
pub(crate) fn proc_state(pid: u32) -> ProcState {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ProcState::Dead;
    };
    // "PID (COMM) STATE ...": COMM may contain spaces and parentheses; the state
    // follows the last ')'.
    match stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()) {
        Some("T" | "t") => ProcState::Stopped,
        Some("Z" | "X" | "x") | None => ProcState::Dead,
        Some(_) => ProcState::Alive,
    }
}

/// Whether process `pid` is stopped (state `T`, stopped by a signal, or `t`, stopped by
/// a tracer) according to `/proc/PID/stat`; `false` when it cannot be read (gone, or no
/// procfs).
pub(crate) fn is_stopped(pid: u32) -> bool {
    proc_state(pid) == ProcState::Stopped
}

/// A pseudo-terminal pair for a rank's standard output: `(master, slave)`, both
/// close-on-exec (the slave reaches the rank as its fd 1 through `dup2`, and no other
/// child may hold it open, or the master would never see the end), the slave in raw mode
/// (no output processing: the bytes the rank writes are the bytes forwarded).
pub(crate) fn open_pty() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let (mut m, mut s): (libc::c_int, libc::c_int) = (-1, -1);
    // SAFETY: openpty writes the two descriptors; the name, termios and window size
    // arguments may be null.
    let rc = unsafe { libc::openpty(&mut m, &mut s, std::ptr::null_mut(), std::ptr::null(), std::ptr::null()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: two fresh descriptors that nothing else owns.
    let (m, s) = unsafe { (OwnedFd::from_raw_fd(m), OwnedFd::from_raw_fd(s)) };
    for fd in [m.as_raw_fd(), s.as_raw_fd()] {
        // SAFETY: fcntl on a descriptor owned above.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    // SAFETY: a zeroed termios is a valid buffer for tcgetattr to fill.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: the slave descriptor is open; `t` is a valid termios.
    unsafe {
        if libc::tcgetattr(s.as_raw_fd(), &mut t) != 0 {
            return Err(io::Error::last_os_error());
        }
        libc::cfmakeraw(&mut t);
        if libc::tcsetattr(s.as_raw_fd(), libc::TCSANOW, &t) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((m, s))
}

/// Whether this process's standard input is a terminal of which it is not in the
/// foreground process group (`rtrun ... &`): reading it would stop the process with
/// SIGTTIN, so rank 0's input is not forwarded then.
pub(crate) fn stdin_is_background_terminal() -> bool {
    use std::io::IsTerminal as _;
    if !std::io::stdin().is_terminal() {
        return false;
    }
    // SAFETY: `tcgetpgrp` and `getpgrp` take no pointers; fd 0 is open (it is a terminal).
    let (fg, own) = unsafe { (libc::tcgetpgrp(0), libc::getpgrp()) };
    fg != own
}
