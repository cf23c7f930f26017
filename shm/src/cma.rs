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
    let base = local.as_mut_ptr();
    // SAFETY: `liov` describes bytes of `local` (`copy` keeps them inside it), exclusively
    // borrowed for the call; the remote iovec is only interpreted by the kernel in the
    // other address space (bad remote addresses yield EFAULT, not memory unsafety here).
    copy(pid, remote_addr, local.len(), "process_vm_readv", base, |l, r| unsafe {
        libc::process_vm_readv(pid, l, 1, r, 1, 0)
    })
}

/// Copies `local` to address `remote_addr` of process `pid` (`process_vm_writev`).
///
/// On error a prefix of `local` may have been written.
pub fn write(pid: i32, remote_addr: u64, local: &[u8]) -> Result<(), Error> {
    // SAFETY: as in `read`; the kernel only reads through `liov` here.
    copy(pid, remote_addr, local.len(), "process_vm_writev", local.as_ptr().cast_mut(), |l, r| unsafe {
        libc::process_vm_writev(pid, l, 1, r, 1, 0)
    })
}

/// The loop of [`read`] and [`write`]: `len` bytes at `local` against `remote_addr` of
/// `pid`, in chunks of at most [`CHUNK`], each by `call(local iovec, remote iovec)`
/// (the kernel may move fewer bytes than asked; `EINTR` is retried).
fn copy(
    pid: i32,
    remote_addr: u64,
    len: usize,
    op: &'static str,
    local: *mut u8,
    mut call: impl FnMut(&libc::iovec, &libc::iovec) -> isize,
) -> Result<(), Error> {
    if pid <= 0 {
        return Err(Error::InvalidArgument("CMA pid must be positive"));
    }
    if remote_addr.checked_add(len as u64).is_none() {
        return Err(Error::BadAddress);
    }
    let mut done = 0usize;
    while done < len {
        let want = (len - done).min(CHUNK);
        // `wrapping_add` stays inside the caller's buffer: `done < len`.
        let liov = libc::iovec { iov_base: local.wrapping_add(done).cast(), iov_len: want };
        let riov = libc::iovec { iov_base: (remote_addr + done as u64) as usize as *mut libc::c_void, iov_len: want };
        let n = call(&liov, &riov);
        if n < 0 {
            let e = io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EPERM) => Error::CmaDenied,
                Some(libc::ESRCH) => Error::PeerGone { pid },
                Some(libc::EFAULT) => Error::BadAddress,
                _ => Error::Io { op, source: e },
            });
        }
        if n == 0 {
            // Nothing movable at the current remote address.
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
