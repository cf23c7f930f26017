//! Window memory: what a window exposes to one-sided operations.
//!
//! Memory the library allocates (`MPI_Win_allocate`, and the Rust API's windows, which
//! copy a vector in) is owned here, 8-byte aligned, and reached only through `&mut` of
//! the engine that registered it: the engine lock is what makes an operation applied by
//! the progress thread and a local access by the application exclusive of each other.
//! A leaked window handle leaks nothing the engine writes into: the engine owns the
//! memory until the window is freed (R30).
//!
//! Memory in a window segment (`runthrough_shm::winseg`) is mapped: the members on this
//! process's node reach it directly (`super::direct`), so an operation they apply there
//! is not under this engine's lock; accumulates stay atomic because every path applies
//! them with the CPU's atomics.
//!
//! Memory a C program exposes (`MPI_Win_create`) is external: its owner promises, as
//! MPI does, to keep it valid until the window is freed. This module holds the only
//! `unsafe` of one-sided communication: the view of that memory.
#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::Arc;

use runthrough_shm::winseg::WinMap;

use super::direct::Region;

/// The memory of one window at its owner.
#[derive(Debug)]
pub struct WinMemory(Mem);

#[derive(Debug)]
enum Mem {
    /// Allocated here: `len` bytes at the start of the words.
    Owned(Vec<u64>, usize),
    /// The program's: `len` bytes at `ptr`.
    External(NonNull<u8>, usize),
    /// `len` bytes at `off` of a window segment this process maps.
    Mapped(Arc<WinMap>, usize, usize),
}

// SAFETY: owned memory is a `Vec`; external memory is a plain address whose owner
// guaranteed (contract of `external`) that it stays valid while the window lives and
// that the program touches it only as MPI allows (a process-wide promise, not a
// per-thread one); mapped memory is a shared mapping kept alive by its `Arc`.
unsafe impl Send for WinMemory {}

impl WinMemory {
    /// `len` zeroed bytes, 8-byte aligned.
    pub fn zeroed(len: usize) -> WinMemory {
        WinMemory(Mem::Owned(vec![0u64; len.div_ceil(8)], len))
    }

    /// A copy of `bytes`, 8-byte aligned.
    pub fn from_bytes(bytes: &[u8]) -> WinMemory {
        let mut m = WinMemory::zeroed(bytes.len());
        m.bytes_mut().copy_from_slice(bytes);
        m
    }

    /// The program's `len` bytes at `ptr` (`MPI_Win_create`); a null `ptr` is allowed
    /// only with `len == 0`.
    ///
    /// # Safety
    /// The memory must be valid for reads and writes of `len` bytes until the
    /// `WinMemory` is dropped (the window freed), and while it lives no Rust reference
    /// to it may exist outside this type; the program's own loads and stores follow
    /// MPI's rules for window memory (none conflicting with an operation in progress).
    pub unsafe fn external(ptr: *mut u8, len: usize) -> WinMemory {
        let ptr = if len == 0 { NonNull::dangling() } else { NonNull::new(ptr).unwrap_or(NonNull::dangling()) };
        WinMemory(Mem::External(ptr, len))
    }

    /// Bytes `[off, off + len)` of the mapping `map` (the part of a window segment that
    /// is this process's window); `None` if they are not inside it.
    pub fn mapped(map: Arc<WinMap>, off: usize, len: usize) -> Option<WinMemory> {
        (off.checked_add(len)? <= map.len()).then(|| WinMemory(Mem::Mapped(map, off, len)))
    }

    /// The window's size in bytes.
    pub fn len(&self) -> usize {
        match self.0 {
            Mem::Owned(_, n) | Mem::External(_, n) | Mem::Mapped(_, _, n) => n,
        }
    }

    /// The memory as a direct-access region, valid while this `WinMemory` lives (the
    /// engine uses it under its lock, `super::direct`'s rule).
    pub(crate) fn region(&self) -> Region {
        // SAFETY: `base()` is valid for `len()` bytes while `self` lives (owned: the
        // vector; external: `external`'s contract; mapped: the mapping, checked by
        // `mapped`).
        unsafe { Region::new(self.base(), self.len()) }
    }

    /// Whether the window exposes no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The address of the first byte (`MPI_WIN_BASE`, `MPI_Win_allocate`'s result).
    pub fn base(&self) -> *mut u8 {
        match &self.0 {
            Mem::Owned(v, _) => v.as_ptr() as *mut u8,
            Mem::External(p, _) => p.as_ptr(),
            // SAFETY: `off <= map.len()` (checked by `mapped`).
            Mem::Mapped(m, off, _) => unsafe { m.ptr().add(*off) },
        }
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.0 {
            Mem::Owned(v, n) => &bytemuck::cast_slice(v)[..*n],
            // SAFETY: `external`'s contract: valid for `n` bytes, no other Rust reference.
            Mem::External(p, n) => unsafe { std::slice::from_raw_parts(p.as_ptr(), *n) },
            // SAFETY: inside the mapping (`mapped`); members on the node may write these
            // bytes meanwhile only as MPI allows (no conflicting access to what is read).
            Mem::Mapped(_, _, n) => unsafe { std::slice::from_raw_parts(self.base(), *n) },
        }
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let (p, len) = (self.base(), self.len());
        match &mut self.0 {
            Mem::Owned(v, n) => &mut bytemuck::cast_slice_mut(v)[..*n],
            // SAFETY: as in `bytes`; `&mut self` makes this the only view this side.
            Mem::External(..) | Mem::Mapped(..) => unsafe { std::slice::from_raw_parts_mut(p, len) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owned_memory_is_aligned_and_sized() {
        let mut m = WinMemory::from_bytes(&[1, 2, 3]);
        assert_eq!((m.len(), m.bytes()), (3, &[1u8, 2, 3][..]));
        assert_eq!(m.base() as usize % 8, 0);
        m.bytes_mut()[2] = 9;
        assert_eq!(m.bytes(), &[1, 2, 9]);
        assert!(WinMemory::zeroed(0).is_empty());
    }

    #[test]
    fn external_memory_is_the_program_s() {
        let mut backing = vec![5u8; 16];
        // SAFETY: `backing` outlives `m` and is not touched while `m` lives.
        let mut m = unsafe { WinMemory::external(backing.as_mut_ptr(), 16) };
        m.bytes_mut()[0] = 7;
        assert_eq!(m.bytes()[..2], [7, 5]);
        drop(m);
        assert_eq!(backing[0], 7);
        // SAFETY: empty.
        assert!(unsafe { WinMemory::external(std::ptr::null_mut(), 0) }.bytes().is_empty());
    }
}
