//! Single-copy transfer between processes of one node: cross-memory attach (CMA).
//!
//! Parts: [`read`] (pull bytes from a peer's address space with `process_vm_readv(2)`),
//! [`write()`] (push bytes into it with `process_vm_writev(2)`: one-sided puts into a
//! created window of a process on the node),
//! [`disabled_by_env`] (the `RT_SHM_CMA=0` switch forcing the pipelined ring fallback).
//!
//! The receiver of a large message pulls it straight into the user buffer, as Open MPI's
//! `vader`/`smsc cma` and MPICH's `nemesis lmt cma` do. The kernel may copy fewer bytes
//! than asked; [`read`] loops until all bytes arrived, in chunks of at most 1 GiB. Errors
//! are typed: `EPERM` → [`Error::CmaDenied`] (Yama `ptrace_scope`, other user, seccomp:
//! use the fallback), `ESRCH` → [`Error::PeerGone`], `EFAULT` → [`Error::BadAddress`].

use std::io;

use crate::Error;

/// Largest chunk asked of the kernel in one call.
const CHUNK: usize = 1 << 30;

/// Environment variable that disables CMA when set to `0`.
pub const ENV_CMA: &str = "RT_SHM_CMA";

/// True when `RT_SHM_CMA=0`: the caller must use the pipelined copy through the rings.
pub fn disabled_by_env() -> bool {
    std::env::var_os(ENV_CMA).is_some_and(|v| v == "0")
}

/// Copies `local.len()` bytes from address `remote_addr` of process `pid` into `local`.
///
/// On error `local` may have been partly written.
pub fn read(pid: i32, remote_addr: u64, local: &mut [u8]) -> Result<(), Error> {
    if pid <= 0 {
        return Err(Error::InvalidArgument("CMA pid must be positive"));
    }
    if remote_addr.checked_add(local.len() as u64).is_none() {
        return Err(Error::BadAddress);
    }
    let mut done = 0usize;
    while done < local.len() {
        let want = (local.len() - done).min(CHUNK);
        let liov = libc::iovec {
            // SAFETY: `done < local.len()`, so the pointer stays inside `local`.
            iov_base: unsafe { local.as_mut_ptr().add(done) }.cast(),
            iov_len: want,
        };
        let riov = libc::iovec { iov_base: (remote_addr + done as u64) as usize as *mut libc::c_void, iov_len: want };
        // SAFETY: `liov` describes `want` writable bytes of `local`, exclusively borrowed
        // for the call; the remote iovec is only interpreted by the kernel in the other
        // address space (bad remote addresses yield EFAULT, not memory unsafety here).
        let n = unsafe { libc::process_vm_readv(pid, &liov, 1, &riov, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EPERM) => Error::CmaDenied,
                Some(libc::ESRCH) => Error::PeerGone { pid },
                Some(libc::EFAULT) => Error::BadAddress,
                _ => Error::Io { op: "process_vm_readv", source: e },
            });
        }
        if n == 0 {
            // Nothing readable at the current remote address.
            return Err(Error::BadAddress);
        }
        done += n as usize;
    }
    Ok(())
}

/// Copies `local` to address `remote_addr` of process `pid` (`process_vm_writev`).
///
/// On error a prefix of `local` may have been written.
pub fn write(pid: i32, remote_addr: u64, local: &[u8]) -> Result<(), Error> {
    if pid <= 0 {
        return Err(Error::InvalidArgument("CMA pid must be positive"));
    }
    if remote_addr.checked_add(local.len() as u64).is_none() {
        return Err(Error::BadAddress);
    }
    let mut done = 0usize;
    while done < local.len() {
        let want = (local.len() - done).min(CHUNK);
        let liov = libc::iovec {
            // SAFETY: `done < local.len()`, so the pointer stays inside `local`; the kernel
            // only reads through it.
            iov_base: unsafe { local.as_ptr().add(done) }.cast_mut().cast(),
            iov_len: want,
        };
        let riov = libc::iovec { iov_base: (remote_addr + done as u64) as usize as *mut libc::c_void, iov_len: want };
        // SAFETY: `liov` describes `want` readable bytes of `local`, borrowed for the call;
        // the remote iovec is only interpreted by the kernel in the other address space.
        let n = unsafe { libc::process_vm_writev(pid, &liov, 1, &riov, 1, 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EPERM) => Error::CmaDenied,
                Some(libc::ESRCH) => Error::PeerGone { pid },
                Some(libc::EFAULT) => Error::BadAddress,
                _ => Error::Io { op: "process_vm_writev", source: e },
            });
        }
        if n == 0 {
            return Err(Error::BadAddress);
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(test)]
mod write_tests {
    use super::*;

    #[test]
    fn a_write_into_this_process_lands_and_a_bad_address_is_typed() {
        let pid = std::process::id() as i32;
        let mut dst = vec![0u8; 4096 + 3];
        let src: Vec<u8> = (0..dst.len()).map(|i| i as u8).collect();
        // A process may always reach its own memory (no ptrace policy applies to itself).
        write(pid, dst.as_mut_ptr() as u64, &src).unwrap();
        assert_eq!(dst, src);
        assert!(matches!(write(pid, 8, &src[..8]), Err(Error::BadAddress)));
        assert!(matches!(write(0, 8, &src[..8]), Err(Error::InvalidArgument(_))));
    }
}
