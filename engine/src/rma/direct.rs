//! Direct access to window memory: loads, stores and the CPU's atomics on memory this
//! process maps — its own window, and the windows of the members on its node, which live
//! in shared segments (`runthrough_shm::winseg`).
//!
//! Every accumulate, wherever it is applied (by an origin on the target's node, or by
//! the target's engine for a record from another node), goes through [`Region`]'s
//! element-wise atomics, so accumulates to one location are atomic with respect to each
//! other whichever path each took (MPI-4.1 §12.7.1's rule: same location, same basic
//! type). An element that is not naturally aligned in the target's memory (a byte
//! window whose displacement puts an `int` at an odd address) is read, combined and
//! written without an atomic: MPI promises atomicity only for a predefined type at an
//! address its origin could have used, which is aligned.
//!
//! Puts and gets are plain copies (`memmove`: an origin buffer may lie in the window
//! itself). A copy gives no ordering with another process by itself: what makes a put
//! visible to its target is the synchronization after it — a flush issues a full fence,
//! and locks, notices and barriers travel through the shared-memory rings, whose
//! hand-over is a release/acquire pair.
//!
//! This module holds the `unsafe` of direct access: a [`Region`] is an address range,
//! made only by the engine from memory a registered window holds (its own
//! [`WinMemory`](super::mem::WinMemory), or a peer's mapping kept by the window) and used
//! only while the engine holds that window, under the engine lock, in the call that
//! looked it up.
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use runthrough_shm::winseg::WinMap;

use super::{bits_of, bits_to, check_acc, combine, AccError, AccOp, Elem};

/// A window member's memory reached by loads, stores and atomics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Region {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: an address range; who may use it when is the module's rule (engine lock).
unsafe impl Send for Region {}

impl Region {
    /// The range of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr` must be valid for reads and writes of `len` bytes for as long as the region
    /// is used, and no Rust reference to those bytes may be live while it is (module
    /// rule: the engine makes regions from the memory of its registered windows and uses
    /// them under its lock).
    pub(crate) unsafe fn new(ptr: *mut u8, len: usize) -> Region {
        Region { ptr, len }
    }

    /// Bytes `[off, off + len)` of `map`, if inside it: a peer's window in a segment
    /// this process maps. The caller keeps `map` while it uses the region (the window
    /// holds it: module rule).
    pub(crate) fn of_map(map: &WinMap, off: usize, len: usize) -> Option<Region> {
        (off.checked_add(len)? <= map.len()).then(|| {
            // SAFETY: inside the mapping, which the window keeps while the region is used.
            unsafe { Region::new(map.ptr().add(off), len) }
        })
    }

    /// The address of bytes `[off, off + len)`, if inside the region.
    fn at(&self, off: u64, len: usize) -> Option<*mut u8> {
        let start = usize::try_from(off).ok()?;
        let end = start.checked_add(len)?;
        // SAFETY: `start <= end <= self.len`: inside the mapping (or one past it for an
        // empty range).
        (end <= self.len).then(|| unsafe { self.ptr.add(start) })
    }

    /// Copies `data` to `[off, off + data.len())`; `false` if outside the region.
    pub(crate) fn write(&self, off: u64, data: &[u8]) -> bool {
        let Some(p) = self.at(off, data.len()) else { return false };
        // SAFETY: `p` is valid for `data.len()` bytes (checked by `at`, module rule);
        // `copy` allows the source to overlap the window (a buffer in the window itself).
        unsafe { std::ptr::copy(data.as_ptr(), p, data.len()) };
        true
    }

    /// Copies `[off, off + out.len())` to `out`; `false` if outside the region.
    pub(crate) fn read(&self, off: u64, out: &mut [u8]) -> bool {
        let Some(p) = self.at(off, out.len()) else { return false };
        // SAFETY: as in `write`; `out` is exclusively borrowed, so it is no reference
        // into the region that could be live (a get into the window itself is a copy
        // between two raw ranges: `copy` handles overlap).
        unsafe { std::ptr::copy(p, out.as_mut_ptr(), out.len()) };
        true
    }

    /// Accumulates `data` (elements `elem`) into `[off, off + data.len())` with `op`,
    /// element by element and each element atomically; `old`, if given (as long as
    /// `data`), receives the elements as they were. `NoOp` reads only: then `old` gives
    /// the length and `data` is not read.
    pub(crate) fn accumulate(
        &self,
        off: u64,
        op: AccOp,
        elem: Elem,
        data: &[u8],
        mut old: Option<&mut [u8]>,
    ) -> Result<(), DirectError> {
        check_acc(op, elem).map_err(DirectError::Acc)?;
        let n = elem.size();
        let len = match (&old, op) {
            (Some(o), AccOp::NoOp) => o.len(),
            _ => data.len(),
        };
        let bad = !len.is_multiple_of(n)
            || old.as_ref().is_some_and(|o| o.len() != len)
            || (op != AccOp::NoOp && data.len() != len);
        if bad {
            return Err(DirectError::Acc(AccError::Length));
        }
        let p = self.at(off, len).ok_or(DirectError::Outside)?;
        for i in 0..len / n {
            let b = if op == AccOp::NoOp { 0 } else { bits_of(&data[i * n..(i + 1) * n]) };
            let f = |a: u64| (op != AccOp::NoOp).then(|| combine(op, elem, a, b));
            // SAFETY: element `i` lies inside the range `at` checked.
            let was = unsafe { rmw(p.add(i * n), n, f) };
            if let Some(o) = old.as_deref_mut() {
                bits_to(was, &mut o[i * n..(i + 1) * n]);
            }
        }
        Ok(())
    }

    /// Compares the element at `off` with `compare` and, if equal (bitwise), replaces it
    /// with `new`, atomically; `old` receives the element as it was.
    pub(crate) fn compare_and_swap(
        &self,
        off: u64,
        elem: Elem,
        compare: &[u8],
        new: &[u8],
        old: &mut [u8],
    ) -> Result<(), DirectError> {
        let n = elem.size();
        if compare.len() != n || new.len() != n || old.len() != n {
            return Err(DirectError::Acc(AccError::Length));
        }
        let p = self.at(off, n).ok_or(DirectError::Outside)?;
        let (c, v) = (bits_of(compare), bits_of(new));
        // SAFETY: one element inside the range `at` checked.
        let was = unsafe { rmw(p, n, |a| (a == c).then_some(v)) };
        bits_to(was, old);
        Ok(())
    }
}

/// Why a direct operation was not applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DirectError {
    /// The range is outside the window.
    Outside,
    /// The operation does not apply to the type, or the lengths are wrong.
    Acc(AccError),
}

/// Reads the `n`-byte element at `p`, writes `f(old)` if `f` gives a value, atomically
/// when `p` is aligned to `n`; returns the old bits.
///
/// # Safety
/// `p` must be valid for reads and writes of `n` bytes (`n` is 1, 2, 4 or 8).
unsafe fn rmw(p: *mut u8, n: usize, f: impl Fn(u64) -> Option<u64>) -> u64 {
    macro_rules! atomic {
        ($a:ty, $u:ty) => {{
            // SAFETY: `p` is aligned for `$u` (checked by the caller) and valid for its
            // bytes; other processes reach these bytes only through atomics of the same
            // width (module rule) or through MPI-erroneous conflicting access.
            let a = unsafe { <$a>::from_ptr(p.cast::<$u>()) };
            let mut cur = a.load(Ordering::Acquire);
            loop {
                let Some(new) = f(cur as u64) else { return cur as u64 };
                match a.compare_exchange_weak(cur, new as $u, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => return cur as u64,
                    Err(now) => cur = now,
                }
            }
        }};
    }
    if (p as usize).is_multiple_of(n) {
        match n {
            1 => atomic!(AtomicU8, u8),
            2 => atomic!(AtomicU16, u16),
            4 => atomic!(AtomicU32, u32),
            _ => atomic!(AtomicU64, u64),
        }
    }
    let mut b = [0u8; 8];
    // SAFETY: `p` is valid for `n <= 8` bytes (contract); unaligned copies.
    unsafe { std::ptr::copy_nonoverlapping(p, b.as_mut_ptr(), n) };
    let was = bits_of(&b[..n]);
    if let Some(new) = f(was) {
        bits_to(new, &mut b[..n]);
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, n) };
    }
    was
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accumulates_and_swaps_apply_element_by_element() {
        let mut words = [0u64; 4];
        // SAFETY: the array outlives the region, and no reference to it is used meanwhile.
        let r = unsafe { Region::new(words.as_mut_ptr().cast(), 32) };
        let ones: Vec<u8> = [5i32, -2, 7, 1].iter().flat_map(|v| v.to_ne_bytes()).collect();
        r.accumulate(0, AccOp::Sum, Elem::I32, &ones, None).unwrap();
        r.accumulate(0, AccOp::Sum, Elem::I32, &ones, None).unwrap();
        let mut old = vec![0u8; 16];
        r.accumulate(0, AccOp::Max, Elem::I32, &ones, Some(&mut old)).unwrap();
        let twice: Vec<u8> = [10i32, -4, 14, 2].iter().flat_map(|v| v.to_ne_bytes()).collect();
        assert_eq!(old, twice, "the elements before the max");
        let mut out = [0u8; 16];
        assert!(r.read(0, &mut out));
        let got: Vec<i32> = out.chunks(4).map(|c| i32::from_ne_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, [10, -2, 14, 2]);
        let mut was = [0u8; 8];
        r.compare_and_swap(16, Elem::U64, &0u64.to_ne_bytes(), &9u64.to_ne_bytes(), &mut was).unwrap();
        r.compare_and_swap(16, Elem::U64, &0u64.to_ne_bytes(), &3u64.to_ne_bytes(), &mut was).unwrap();
        assert_eq!(u64::from_ne_bytes(was), 9, "the second swap saw the first's value and did nothing");
        // An unaligned element (offset 17) is still combined, without an atomic.
        r.accumulate(17, AccOp::Sum, Elem::U16, &1u16.to_ne_bytes(), None).unwrap();
        assert!(r.write(24, &[1, 2]));
        assert!(!r.write(31, &[1, 2]), "past the end");
        assert_eq!(r.accumulate(30, AccOp::Sum, Elem::U32, &[0; 4], None), Err(DirectError::Outside));
        assert!(matches!(r.accumulate(0, AccOp::BitAnd, Elem::F32, &[0; 4], None), Err(DirectError::Acc(_))));
        // The region is no longer used: the array is read directly.
        assert_eq!(words[2], 9 + (1 << 8), "{:x}", words[2]);
    }

    #[test]
    fn concurrent_accumulates_are_atomic() {
        let mut words = vec![0u64; 8];
        // SAFETY: the vector outlives the threads below, and is read only after them.
        let r = unsafe { Region::new(words.as_mut_ptr().cast(), 64) };
        let addr = r.ptr as usize;
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(move || {
                    // SAFETY: the vector outlives the threads (joined below).
                    let r = unsafe { Region::new(addr as *mut u8, 64) };
                    for _ in 0..10_000 {
                        r.accumulate(0, AccOp::Sum, Elem::U64, &[1, 0, 0, 0, 0, 0, 0, 0], None).unwrap();
                        r.accumulate(8, AccOp::Sum, Elem::F64, &1f64.to_ne_bytes(), None).unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert_eq!(words[0], 40_000);
        assert_eq!(f64::from_bits(words[1]), 40_000.0);
    }
}
