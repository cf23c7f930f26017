//! Window segments: the shared memory that one-sided windows of the processes of one
//! node live in, so that every member of the node reaches the others' window memory with
//! plain loads, stores and the CPU's atomics (MPI's unified model; `MPI_Win_allocate`,
//! `MPI_Win_allocate_shared`).
//!
//! A segment is a POSIX shared memory object (`shm_open`, mode 0600) created by one
//! process with `O_EXCL`, opened by the others, and unlinked by its creator once every
//! process that needs it mapped it: no name outlives the window's creation, and the pages
//! go with the last mapping. [`WinMap`] is one process's mapping; it is unmapped when the
//! last `Arc` of it drops, so memory another process writes into is never unmapped under
//! a reference of this process, and a peer's writes into a segment whose creator has
//! unmapped it land in pages nobody reuses (they are freed with the last mapping).
//!
//! Names are `/rt-win-<pid>-<n>`: the creator's process id and a counter of its own, so
//! two processes never race for a name and a reader needs only two numbers to find one.

use std::ffi::CString;
use std::sync::Arc;

use crate::Error;

/// One process's mapping of a window segment (or of anonymous memory), unmapped when the
/// last owner drops.
#[derive(Debug)]
pub struct WinMap {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: a plain address range this process mapped; the struct is immutable, and what
// is stored in the range is accessed by its users' own synchronization (the engine's
// atomics and MPI's epochs), from any thread.
unsafe impl Send for WinMap {}
// SAFETY: as for Send.
unsafe impl Sync for WinMap {}

/// The name of segment `n` of process `pid`.
pub fn name_of(pid: u32, n: u64) -> String {
    format!("/rt-win-{pid}-{n}")
}

fn cname(name: &str) -> Result<CString, Error> {
    CString::new(name).map_err(|_| Error::InvalidArgument("segment name holds a NUL byte"))
}

impl WinMap {
    /// `len` bytes (at least one page is mapped) of zeroed anonymous memory, shared with
    /// nobody: a window whose members are all on other nodes.
    pub fn anonymous(len: usize) -> Result<Arc<WinMap>, Error> {
        Self::map(None, len)
    }

    /// Creates the segment `name` of `len` zeroed bytes (`O_EXCL`, mode 0600) and maps it.
    /// The caller unlinks it with [`WinMap::unlink`] once its readers mapped it.
    pub fn create(name: &str, len: usize) -> Result<Arc<WinMap>, Error> {
        let n = cname(name)?;
        // SAFETY: a NUL-terminated name; plain shm_open(3).
        let fd =
            unsafe { libc::shm_open(n.as_ptr(), libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC, 0o600) };
        if fd < 0 {
            return Err(Error::last_os("shm_open"));
        }
        // SAFETY: the descriptor just opened.
        let sized = unsafe { libc::ftruncate(fd, len.max(1) as libc::off_t) } == 0;
        let r = if sized { Self::map(Some(fd), len) } else { Err(Error::last_os("ftruncate")) };
        // SAFETY: the descriptor just opened; a mapping stays valid after it is closed.
        unsafe { libc::close(fd) };
        if r.is_err() {
            Self::unlink(name);
        }
        r
    }

    /// Opens and maps the segment `name`, which must hold at least `len` bytes.
    pub fn open(name: &str, len: usize) -> Result<Arc<WinMap>, Error> {
        let n = cname(name)?;
        // SAFETY: a NUL-terminated name; plain shm_open(3).
        let fd = unsafe { libc::shm_open(n.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC, 0) };
        if fd < 0 {
            return Err(Error::last_os("shm_open"));
        }
        // SAFETY: an all-zero `stat` is a valid value to be overwritten by fstat.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: the descriptor just opened; `st` is writable.
        let ok = unsafe { libc::fstat(fd, &mut st) } == 0;
        let r = if !ok {
            Err(Error::last_os("fstat"))
        } else if (st.st_size as u64) < len as u64 {
            Err(Error::BadSegment("window segment smaller than its members' memory"))
        } else {
            Self::map(Some(fd), len)
        };
        // SAFETY: the descriptor just opened.
        unsafe { libc::close(fd) };
        r
    }

    /// Removes the name `name` (the pages stay while mapped). Errors are ignored: the
    /// name may be gone already.
    pub fn unlink(name: &str) {
        if let Ok(n) = cname(name) {
            // SAFETY: a NUL-terminated name; plain shm_unlink(3).
            unsafe { libc::shm_unlink(n.as_ptr()) };
        }
    }

    fn map(fd: Option<libc::c_int>, len: usize) -> Result<Arc<WinMap>, Error> {
        let (flags, fd) = match fd {
            Some(fd) => (libc::MAP_SHARED, fd),
            None => (libc::MAP_SHARED | libc::MAP_ANONYMOUS, -1),
        };
        // SAFETY: a new mapping chosen by the kernel (addr NULL); no existing memory is
        // touched.
        let p =
            unsafe { libc::mmap(std::ptr::null_mut(), len.max(1), libc::PROT_READ | libc::PROT_WRITE, flags, fd, 0) };
        if p == libc::MAP_FAILED {
            return Err(Error::last_os("mmap"));
        }
        Ok(Arc::new(WinMap { ptr: p.cast(), len }))
    }

    /// The first byte (page aligned).
    pub fn ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// The bytes mapped for use (the mapping itself is at least one page).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no byte is for use.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for WinMap {
    fn drop(&mut self) {
        // SAFETY: the range `map` mapped, unmapped once, when no owner can reach it.
        unsafe { libc::munmap(self.ptr.cast(), self.len.max(1)) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_one_memory_for_its_creator_and_its_readers() {
        let name = name_of(std::process::id(), 900_001);
        let a = WinMap::create(&name, 4096 + 8).unwrap();
        let b = WinMap::open(&name, 4096 + 8).unwrap();
        WinMap::unlink(&name);
        assert!(WinMap::open(&name, 1).is_err(), "the name is gone once unlinked");
        // SAFETY: both mappings hold 4104 bytes; this test is their only user.
        unsafe {
            *a.ptr().add(4100) = 7;
            assert_eq!(*b.ptr().add(4100), 7);
            assert_eq!(*b.ptr(), 0, "zeroed");
        }
        assert!(WinMap::create(&name_of(std::process::id(), 900_002), 8).is_ok_and(|m| m.len() == 8));
        WinMap::unlink(&name_of(std::process::id(), 900_002));
    }

    #[test]
    fn a_reader_asking_for_more_than_the_segment_holds_is_refused() {
        let name = name_of(std::process::id(), 900_003);
        let _a = WinMap::create(&name, 64).unwrap();
        let r = WinMap::open(&name, 1 << 20);
        WinMap::unlink(&name);
        assert!(matches!(r, Err(Error::BadSegment(_))), "{r:?}");
        assert!(WinMap::create(&name_of(std::process::id(), 900_004), 8).is_ok());
        WinMap::unlink(&name_of(std::process::id(), 900_004));
        assert!(WinMap::anonymous(0).is_ok_and(|m| m.is_empty()));
    }
}
