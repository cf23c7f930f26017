//! Direct access to window memory: loads, stores and the CPU's atomics on memory this
//! process maps — its own window, and the windows of the members on its node, which live
//! in shared segments (`runthrough_shm::winseg`).
//!
//! Accumulates to one location are atomic with respect to each other whichever path
//! each took (MPI-4.1 §12.7.1's rule: same location, same basic type):
//! - when every member of the window is on this node, every accumulate takes the
//!   target's accumulate lock in the segment ([`DirectWin`]) and applies plain loops;
//! - otherwise every accumulate (by an origin on the target's node, or by the target's
//!   engine for a record from another node) goes through `Region`'s element-wise
//!   atomics, except the extension types ([`Elem::Ext`]: `long double`, pairs), which
//!   no atomic applies: those always travel as records, applied by the target's engine
//!   under its lock.
//!
//! An element that is not naturally aligned in the target's memory (a byte window whose
//! displacement puts an `int` at an odd address) is read, combined and written without an
//! atomic: MPI promises atomicity only for a predefined type at an address its origin
//! could have used, which is aligned.
//!
//! Puts and gets are plain copies (`memmove`: an origin buffer may lie in the window
//! itself). A copy gives no ordering with another process by itself: what makes a put
//! visible to its target is the synchronization after it — a flush issues a full fence,
//! and locks, notices and barriers travel through the shared-memory rings or the lock
//! words, whose hand-over is a release/acquire pair.
//!
//! This module holds the `unsafe` of direct access. A `Region` is an address range,
//! made only from memory a registered window holds: its own
//! [`WinMemory`](super::mem::WinMemory), used by the engine under its lock in the call
//! that looked it up, or a peer's part of a segment, kept mapped by the [`DirectWin`]
//! that holds the region (which serializes this process's copies into it).
#![allow(unsafe_code)]

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use runthrough_shm::winseg::WinMap;

use crate::error::Error;
use crate::failed_set::FailedSet;
use crate::types::Rank;

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
        if !elem.is_native() {
            // No atomic applies it: every accumulate of an extension type on this
            // memory is applied by one engine, under its lock (records; module docs).
            return self.accumulate_plain(off, op, elem, data, old);
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

    /// `Region::accumulate` with plain loads and stores (the caller holds the
    /// member's accumulate lock): a loop per operation and type.
    pub(crate) fn accumulate_plain(
        &self,
        off: u64,
        op: AccOp,
        elem: Elem,
        data: &[u8],
        old: Option<&mut [u8]>,
    ) -> Result<(), DirectError> {
        check_acc(op, elem).map_err(DirectError::Acc)?;
        let len = match (&old, op) {
            (Some(o), AccOp::NoOp) => o.len(),
            _ => data.len(),
        };
        let bad = !len.is_multiple_of(elem.size())
            || old.as_ref().is_some_and(|o| o.len() != len)
            || (op != AccOp::NoOp && data.len() != len);
        if bad {
            return Err(DirectError::Acc(AccError::Length));
        }
        let p = self.at(off, len).ok_or(DirectError::Outside)?;
        if let Some(o) = old {
            // SAFETY: `len` bytes inside the region (checked by `at`); `o` is the
            // caller's own buffer, distinct from the window's memory.
            unsafe { std::ptr::copy(p, o.as_mut_ptr(), len) };
        }
        if op == AccOp::NoOp {
            return Ok(());
        }
        // SAFETY: `len` bytes inside the region, which the caller's accumulate lock
        // keeps from every other accumulate; no Rust reference to them lives meanwhile.
        let target = unsafe { std::slice::from_raw_parts_mut(p, len) };
        if elem.is_native() && len == elem.size() {
            // One element (a fetch-and-op): no loop to set up.
            bits_to(combine(op, elem, bits_of(target), bits_of(data)), target);
            return Ok(());
        }
        super::accumulate(op, elem, target, data).map_err(DirectError::Acc)
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

/// The members of a window on this process's node that it reaches directly: their
/// memory in the node's segment, mapped here. Operations on them are applied at the
/// call, without the engine (the facade's fast path, and the engine itself for
/// operations that come through it): the mapping is kept by this object, the failed
/// check reads the engine's [`FailedSet`] without its lock, and this process's copies
/// into one window are serialized by `copying` (two threads of one process never copy
/// into the same memory at once; other processes are outside this process's memory
/// model, and MPI makes conflicting accesses erroneous).
#[derive(Debug)]
pub struct DirectWin {
    regions: Vec<Option<Region>>,
    /// This process's window rank (how the locks name it).
    me: u32,
    /// One lock block per member ([`LOCK_BLOCK`] bytes each) when every member is on
    /// this node: passive-target locks are then taken here, not by records.
    locks: Option<Region>,
    /// World rank of each window rank.
    world: Arc<[Rank]>,
    failed: Arc<FailedSet>,
    copying: CopyLock,
    _map: Arc<WinMap>,
}

// SAFETY: the regions lie in `_map`, which this object keeps mapped; copies are
// serialized by `copying`, atomics need nothing.
unsafe impl Sync for DirectWin {}
// SAFETY: as for Sync.
unsafe impl Send for DirectWin {}

/// Serializes this process's copies into one window's memory: one atomic swap to take,
/// a release store to give back (a copy is short; a waiter spins, then yields).
#[derive(Debug, Default)]
struct CopyLock(std::sync::atomic::AtomicBool);

/// A held [`CopyLock`].
struct CopyGuard<'a>(&'a std::sync::atomic::AtomicBool);

impl CopyLock {
    #[inline]
    fn hold(&self) -> CopyGuard<'_> {
        let mut spins = 0u32;
        while self.0.swap(true, Ordering::Acquire) {
            while self.0.load(Ordering::Relaxed) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
        CopyGuard(&self.0)
    }
}

impl Drop for CopyGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Bytes of one member's lock block: a word naming the exclusive holder of its
/// passive-target lock (window rank + 1, or 0), a word naming the holder of its
/// accumulate lock (the same way), then a bitmap of the shared holders by window rank.
pub const LOCK_BLOCK: usize = 64;

/// Most members a window's lock blocks serve (the bitmap's bits).
pub const LOCK_MEMBERS: usize = (LOCK_BLOCK / 8 - 2) * 64;

/// What one attempt at a lock found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// The lock is held.
    Held,
    /// Another holder is in the way: try again (the claims made stay, an exclusive
    /// claim keeps later shared lockers out).
    Wait,
}

impl DirectWin {
    /// The members `parts[r] = Some((offset, bytes))` of `map` (window rank `r`, world
    /// rank `world[r]`; this process is window rank `me`); `None` for the members not
    /// reached directly; `locks`, the
    /// offset of the members' lock blocks in `map` (zeroed, [`LOCK_BLOCK`] bytes each)
    /// when every member is on this node. `None` if a part lies outside the mapping.
    pub fn new(
        map: Arc<WinMap>,
        me: u32,
        parts: &[Option<(usize, usize)>],
        locks: Option<usize>,
        world: Arc<[Rank]>,
        failed: Arc<FailedSet>,
    ) -> Option<DirectWin> {
        let locks = match locks {
            None => None,
            Some(off) => {
                let len = LOCK_BLOCK.checked_mul(world.len())?;
                let end = off.checked_add(len)?;
                let aligned = (map.ptr() as usize + off).is_multiple_of(LOCK_BLOCK);
                // SAFETY: inside the mapping (checked), which `_map` keeps.
                (end <= map.len() && aligned && world.len() <= LOCK_MEMBERS)
                    .then(|| unsafe { Region::new(map.ptr().add(off), len) })
            }
        };
        let regions = parts
            .iter()
            .map(|p| match p {
                None => Some(None),
                Some((off, len)) => {
                    let end = off.checked_add(*len)?;
                    // SAFETY: inside the mapping, which `_map` keeps while the regions live.
                    (end <= map.len()).then(|| Some(unsafe { Region::new(map.ptr().add(*off), *len) }))
                }
            })
            .collect::<Option<Vec<_>>>()?;
        Some(DirectWin { regions, me, locks, world, failed, copying: CopyLock::default(), _map: map })
    }

    /// Whether passive-target locks are taken here ([`DirectWin::try_lock`]).
    pub fn has_locks(&self) -> bool {
        self.locks.is_some()
    }

    /// The words of `target`'s lock block: the exclusive word, then the bitmap.
    fn lock_words(&self, target: u32) -> Option<&[AtomicU64]> {
        let r = self.locks?;
        let off = (target as usize).checked_mul(LOCK_BLOCK)?;
        let p = r.at(off as u64, LOCK_BLOCK)?;
        // SAFETY: `LOCK_BLOCK` bytes inside the lock area, 64-byte aligned (checked in
        // `new`), mapped while `self` lives; every process touches them only atomically.
        Some(unsafe { std::slice::from_raw_parts(p.cast::<AtomicU64>(), LOCK_BLOCK / 8) })
    }

    fn is_failed(&self, rank: u32) -> bool {
        self.world.get(rank as usize).is_some_and(|&p| self.failed.contains(p))
    }

    /// One attempt at `me`'s lock (exclusive or shared) on `target`'s window. A holder
    /// known failed is released on the way (R36: nobody waits for a dead holder).
    /// `target` known failed: `RankFailStop`.
    pub fn try_lock(&self, target: u32, me: u32, exclusive: bool) -> Result<Attempt, Error> {
        if self.is_failed(target) {
            self.unlock_claims(target, me);
            return Err(Error::RankFailStop { rank: target });
        }
        let w = self.lock_words(target).ok_or(Error::ApiMisuse("no lock words"))?;
        let (excl, readers) = (&w[0], &w[2..]);
        let (word, bit) = (me as usize / 64, 1u64 << (me % 64));
        let mine = u64::from(me) + 1;
        let holder = excl.load(Ordering::Acquire);
        if holder != 0 && holder != mine && self.is_failed((holder - 1) as u32) {
            let _ = excl.compare_exchange(holder, 0, Ordering::AcqRel, Ordering::Acquire);
        }
        // Each side announces itself, then looks at the other (SeqCst: a store then a
        // load of another word, as in Dekker's algorithm).
        if !exclusive {
            readers[word].fetch_or(bit, Ordering::SeqCst);
            if excl.load(Ordering::SeqCst) == 0 {
                return Ok(Attempt::Held);
            }
            readers[word].fetch_and(!bit, Ordering::AcqRel);
            return Ok(Attempt::Wait);
        }
        if excl.load(Ordering::SeqCst) != mine
            && excl.compare_exchange(0, mine, Ordering::SeqCst, Ordering::SeqCst).is_err()
        {
            return Ok(Attempt::Wait);
        }
        // Claimed: wait for the shared holders to leave (the dead ones are cleared).
        let mut busy = false;
        for (i, r) in readers.iter().enumerate() {
            let mut v = r.load(Ordering::SeqCst);
            while v != 0 {
                let b = v.trailing_zeros();
                v &= v - 1;
                if self.is_failed((i * 64) as u32 + b) {
                    r.fetch_and(!(1u64 << b), Ordering::AcqRel);
                } else {
                    busy = true;
                }
            }
        }
        Ok(if busy { Attempt::Wait } else { Attempt::Held })
    }

    /// Releases `me`'s lock on `target` (after a fence: every direct operation is
    /// complete there). `target` known failed: released all the same, `RankFailStop`.
    pub fn unlock(&self, target: u32, me: u32) -> Result<(), Error> {
        std::sync::atomic::fence(Ordering::SeqCst);
        if !self.unlock_claims(target, me) {
            return Err(Error::ApiMisuse("unlock of a lock not held"));
        }
        if self.is_failed(target) {
            return Err(Error::RankFailStop { rank: target });
        }
        Ok(())
    }

    /// Drops whatever claim `me` has on `target`'s lock; whether it had one.
    fn unlock_claims(&self, target: u32, me: u32) -> bool {
        let Some(w) = self.lock_words(target) else { return false };
        let (word, bit) = (me as usize / 64, 1u64 << (me % 64));
        let excl = w[0].compare_exchange(u64::from(me) + 1, 0, Ordering::AcqRel, Ordering::Acquire).is_ok();
        let shared = w[2 + word].fetch_and(!bit, Ordering::AcqRel) & bit != 0;
        excl || shared
    }

    /// Whether window rank `rank` is reached directly.
    #[inline]
    pub fn reaches(&self, rank: u32) -> bool {
        self.regions.get(rank as usize).is_some_and(Option::is_some)
    }

    /// The region of `rank`, unless it is known failed (`Err`) or not reached directly
    /// (`None`).
    #[inline]
    fn region(&self, rank: u32) -> Option<Result<Region, Error>> {
        let r = (*self.regions.get(rank as usize)?)?;
        if self.world.get(rank as usize).is_some_and(|&p| self.failed.contains(p)) {
            return Some(Err(Error::RankFailStop { rank }));
        }
        Some(Ok(r))
    }

    /// Puts `data` at byte `disp` of `rank`'s memory: complete there at return.
    #[inline]
    pub fn put(&self, rank: u32, disp: u64, data: &[u8]) -> Option<Result<(), Error>> {
        Some(self.region(rank)?.and_then(|r| {
            let _one = self.copying.hold();
            r.write(disp, data).then_some(()).ok_or(Error::InvalidArg("put outside the target's window"))
        }))
    }

    /// Reads `out.len()` bytes at byte `disp` of `rank`'s memory.
    #[inline]
    pub fn get(&self, rank: u32, disp: u64, out: &mut [u8]) -> Option<Result<(), Error>> {
        Some(self.region(rank)?.and_then(|r| {
            let _one = self.copying.hold();
            r.read(disp, out).then_some(()).ok_or(Error::InvalidArg("get outside the target's window"))
        }))
    }

    /// `Region::accumulate` on `rank`'s memory: with per-element atomics, or, when
    /// every member is on this node (the lock blocks exist), under `rank`'s accumulate
    /// lock with plain loads and stores (one atomic per call instead of one per element;
    /// every accumulate on the window takes that lock then, the target's own included).
    pub fn accumulate(
        &self,
        rank: u32,
        disp: u64,
        op: AccOp,
        elem: Elem,
        data: &[u8],
        old: Option<&mut [u8]>,
    ) -> Option<Result<(), Error>> {
        if self.locks.is_none() && !elem.is_native() {
            // Extensions travel as records to the target's engine (no atomic applies
            // them, and no lock is shared with the other nodes' origins).
            return None;
        }
        let r = match self.region(rank)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let out = match self.locks {
            None => r.accumulate(disp, op, elem, data, old),
            Some(_) => self.acc_locked(rank, || r.accumulate_plain(disp, op, elem, data, old)),
        };
        Some(out.map_err(DirectError::into_error))
    }

    /// `Region::compare_and_swap` on `rank`'s memory.
    pub fn compare_and_swap(
        &self,
        rank: u32,
        disp: u64,
        elem: Elem,
        compare: &[u8],
        new: &[u8],
        old: &mut [u8],
    ) -> Option<Result<(), Error>> {
        let r = match self.region(rank)? {
            Ok(r) => r,
            Err(e) => return Some(Err(e)),
        };
        let out = match self.locks {
            None => r.compare_and_swap(disp, elem, compare, new, old),
            Some(_) => self.acc_locked(rank, || r.compare_and_swap(disp, elem, compare, new, old)),
        };
        Some(out.map_err(DirectError::into_error))
    }

    /// Whether accumulates on this window take the members' accumulate locks.
    pub fn locks_accumulates(&self) -> bool {
        self.locks.is_some()
    }

    /// Runs `f` holding `rank`'s accumulate lock (and this process's copy lock, so that
    /// no other thread of it copies meanwhile). The lock names its holder by window
    /// rank, `me`; a holder known failed is displaced (its accumulate may be half
    /// applied: what a dead writer leaves). Waits by spinning, then yielding: a holder
    /// that is merely descheduled gets the processor back.
    pub(crate) fn acc_locked<R>(&self, rank: u32, f: impl FnOnce() -> R) -> R {
        let _one = self.copying.hold();
        let Some(w) = self.lock_words(rank) else { return f() };
        let word = &w[1];
        let mine = u64::from(self.me) + 1;
        let mut spins = 0u32;
        loop {
            match word.compare_exchange_weak(0, mine, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => break,
                Err(0) => continue,
                Err(holder) => {
                    if self.is_failed((holder - 1) as u32)
                        && word.compare_exchange(holder, mine, Ordering::Acquire, Ordering::Relaxed).is_ok()
                    {
                        break;
                    }
                    spins += 1;
                    if spins < 64 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::yield_now();
                    }
                }
            }
        }
        let r = f();
        word.store(0, Ordering::Release);
        r
    }

    /// Completes every operation on `rank` (they were applied at their call): a full
    /// fence, so that what this process does next is ordered after them; errs if
    /// `rank` is known failed.
    #[inline]
    pub fn flush(&self, rank: u32) -> Option<Result<(), Error>> {
        Some(self.region(rank)?.map(|_| std::sync::atomic::fence(Ordering::SeqCst)))
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

impl DirectError {
    /// The error an origin sees.
    pub(crate) fn into_error(self) -> Error {
        match self {
            DirectError::Outside => Error::InvalidArg("operation outside the target's window"),
            DirectError::Acc(_) => Error::InvalidArg("accumulate of a bad type or length"),
        }
    }
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
    use crate::types::Rank;

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
    fn locks_in_the_segment_exclude_and_release_dead_holders() {
        let map = WinMap::anonymous(64 + 3 * LOCK_BLOCK).unwrap();
        let world: Arc<[Rank]> = vec![Rank(0), Rank(1), Rank(2)].into();
        let failed = Arc::new(FailedSet::new(3));
        let parts = [None, Some((0, 8)), Some((8, 8))];
        let d = DirectWin::new(map, 0, &parts, Some(64), world, failed.clone()).unwrap();
        assert!(d.has_locks() && d.reaches(1) && !d.reaches(0));
        // Shared holders together; an exclusive claim waits for them and keeps new
        // shared lockers out meanwhile.
        assert_eq!(d.try_lock(2, 0, false), Ok(Attempt::Held));
        assert_eq!(d.try_lock(2, 1, false), Ok(Attempt::Held));
        assert_eq!(d.try_lock(2, 2, true), Ok(Attempt::Wait));
        d.unlock(2, 0).unwrap();
        d.unlock(2, 1).unwrap();
        assert_eq!(d.try_lock(2, 0, false), Ok(Attempt::Wait), "the exclusive claim comes first");
        assert_eq!(d.try_lock(2, 2, true), Ok(Attempt::Held));
        assert_eq!(d.try_lock(2, 1, true), Ok(Attempt::Wait));
        d.unlock(2, 2).unwrap();
        // Rank 2 holds rank 1's lock exclusively, then dies: the next attempt of a
        // waiter releases it; an attempt on the dead target errs.
        assert_eq!(d.try_lock(1, 2, true), Ok(Attempt::Held));
        assert_eq!(d.try_lock(1, 0, false), Ok(Attempt::Wait));
        failed.insert(Rank(2));
        assert_eq!(d.try_lock(2, 1, true), Err(Error::RankFailStop { rank: 2 }), "the target itself died");
        assert_eq!(d.try_lock(1, 0, true), Ok(Attempt::Held), "rank 2's exclusive lock on rank 1 was released");
        assert_eq!(d.unlock(1, 1), Err(Error::ApiMisuse("unlock of a lock not held")));
        // Rank 2 died holding rank 1's accumulate lock: the next accumulate displaces it.
        d.lock_words(1).unwrap()[1].store(3, Ordering::SeqCst);
        let one = 1u64.to_ne_bytes();
        assert_eq!(d.accumulate(1, 0, AccOp::Sum, Elem::U64, &one, None), Some(Ok(())));
        assert_eq!(d.lock_words(1).unwrap()[1].load(Ordering::SeqCst), 0, "released after the accumulate");
        d.unlock(1, 0).unwrap();
        assert_eq!(d.put(2, 0, &[1]), Some(Err(Error::RankFailStop { rank: 2 })));
        assert_eq!(d.put(1, 0, &[1]), Some(Ok(())));
        assert_eq!(d.put(0, 0, &[1]), None, "rank 0 is not reached directly");
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
