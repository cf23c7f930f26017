//! The collective area of the segment: per rank, [`COLL_SLOTS`] slots — one per
//! communicator that uses shared-memory collectives — each holding an *entered word*, a
//! *vote word*, [`COLL_BUFS`] *ready lines* and [`COLL_BUFS`] data buffers of
//! [`COLL_DATA`] bytes.
//!
//! ```text
//! slot (COLL_SLOT_BYTES, 64-byte aligned)
//!   +0       entered word (u64, own cache line): the last collective its owner entered
//!   +64      vote line: vote word (u64) and two proposal buffers of COLL_VOTE_DATA
//!            bytes at +72 and +96: the registers of the agreement fast path
//!   +128     ready line k = 0..COLL_BUFS (64 bytes each): ready word (u64) + COLL_INLINE
//!            bytes of inline data, so a short contribution travels with its flag; a
//!            long contribution, pulled from its owner's memory by CMA, is described
//!            there instead (seven line words: see `line_word`)
//!   +384     data buffer k = 0..COLL_BUFS (COLL_DATA bytes each), for longer ones
//! ```
//!
//!
//! When the segment has bulk buffers (`bulk_bytes` of its layout, 0 for none), each rank
//! also owns [`BULK_SLOTS`] of them, one per communicator with a slot below
//! [`BULK_SLOTS`]: room for a whole contribution of up to `bulk_bytes` that the others
//! read in place (long reductions).
//!
//! Only the owner writes its entered word, ready lines and data buffers; anyone may read
//! them, compare-and-swap vote words and update line words atomically. The protocols on
//! top (the engine's `coll::shm`) hand data over with the usual pattern: the owner writes the data, then
//! stores the ready word with `Release`; a reader loads the ready word with `Acquire` and
//! then copies the data. The protocols guarantee data is not rewritten while someone may
//! still read it; this module guarantees that every access stays inside the mapping
//! (ranks, slots and ranges are checked, a violation panics rather than touching other
//! memory). A protocol bug could at worst copy inconsistent bytes: the memory is plain
//! bytes of a shared mapping, where every bit pattern is a valid `u8`.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use crate::mapping::Mapping;

/// Slots per rank: communicators whose context index is below this use shared-memory
/// collectives.
pub const COLL_SLOTS: usize = 16;
/// Ready lines and data buffers per slot (collective `s` uses number `s % COLL_BUFS`).
pub const COLL_BUFS: usize = 4;
/// Bytes of each of the two proposal buffers in the vote line.
pub const COLL_VOTE_DATA: usize = 24;
/// Bytes of inline data in a ready line.
pub const COLL_INLINE: usize = 56;
/// Bytes of each data buffer: the most one member contributes to one collective.
pub const COLL_DATA: usize = 1024;
/// Offset of the ready lines in a slot.
const READY_AT: usize = 128;
/// Offset of the data buffers in a slot.
const DATA_AT: usize = READY_AT + 64 * COLL_BUFS;
/// Bytes of one slot.
pub const COLL_SLOT_BYTES: usize = DATA_AT + COLL_BUFS * COLL_DATA;
/// Segments of more ranks have no collective area.
pub const COLL_MAX_RANKS: u32 = 128;
/// Communicators (slots) per rank with a bulk buffer.
pub const BULK_SLOTS: usize = 2;
/// Largest bulk buffer.
pub const BULK_MAX: u32 = 1 << 30;

/// Checks a layout's bulk buffer size: 0, or a multiple of 4096 up to [`BULK_MAX`].
pub(crate) fn check_bulk_bytes(bytes: u32) -> Result<(), crate::Error> {
    if bytes.is_multiple_of(4096) && bytes <= BULK_MAX {
        Ok(())
    } else {
        Err(crate::Error::InvalidArgument("bulk_bytes must be a multiple of 4096 up to 2^30"))
    }
}

/// Bytes of the bulk buffers of `nranks` ranks of `bytes` each (0 without a collective
/// area); `None` on overflow.
pub(crate) fn bulk_area_bytes(nranks: u32, bytes: u32) -> Option<usize> {
    if area_bytes(nranks) == 0 {
        return Some(0);
    }
    (nranks as usize).checked_mul(BULK_SLOTS)?.checked_mul(bytes as usize)
}

/// Bytes of the area for `nranks` ranks (0 above [`COLL_MAX_RANKS`]).
pub(crate) fn area_bytes(nranks: u32) -> usize {
    if nranks > COLL_MAX_RANKS {
        0
    } else {
        nranks as usize * COLL_SLOTS * COLL_SLOT_BYTES
    }
}

/// A handle on the collective area; keeps the mapping alive.
#[derive(Debug, Clone)]
pub struct CollArea {
    map: Arc<Mapping>,
    offset: usize,
    nranks: u32,
    /// Offset of the bulk buffers and the bytes of each.
    bulk: (usize, usize),
}

impl CollArea {
    pub(crate) fn new(map: Arc<Mapping>, offset: usize, nranks: u32, bulk: (usize, usize)) -> Self {
        assert!(
            offset.is_multiple_of(64) && offset + area_bytes(nranks) <= map.len,
            "collective area outside the mapping"
        );
        let bulk_end = bulk_area_bytes(nranks, bulk.1 as u32).and_then(|b| b.checked_add(bulk.0));
        assert!(
            bulk.0.is_multiple_of(64) && bulk.1.is_multiple_of(64) && bulk_end.is_some_and(|e| e <= map.len),
            "bulk buffers outside the mapping"
        );
        CollArea { map, offset, nranks, bulk }
    }

    /// Bytes of each bulk buffer (0: none).
    pub fn bulk_bytes(&self) -> usize {
        self.bulk.1
    }

    /// Pointer to byte `at` of the bulk buffer of `(rank, slot)`; panics outside it.
    #[inline]
    fn bulk_ptr(&self, rank: u32, slot: usize, at: usize, len: usize) -> *mut u8 {
        assert!(
            rank < self.nranks && slot < BULK_SLOTS && at.checked_add(len).is_some_and(|e| e <= self.bulk.1),
            "bulk buffer access out of range"
        );
        let off = self.bulk.0 + (rank as usize * BULK_SLOTS + slot) * self.bulk.1 + at;
        // SAFETY: `off + len` lies inside the bulk buffers, which `new` checked lie inside
        // the live mapping `self.map` keeps.
        unsafe { self.map.ptr.add(off) }
    }

    /// Copies `bytes` to offset `at` of the bulk buffer of `(rank, slot)`.
    #[inline]
    pub fn bulk_write(&self, rank: u32, slot: usize, at: usize, bytes: &[u8]) {
        let dst = self.bulk_ptr(rank, slot, at, bytes.len());
        // SAFETY: as in `write`.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) }
    }

    /// Calls `f` on the `len` bytes at offset `at` of this process's bulk buffer of
    /// `(rank, slot)`, to update them in place. Only the owner `rank` may call it, and
    /// only for bytes nobody reads meanwhile (the protocol on top guarantees it; a bug
    /// could at worst show readers inconsistent bytes).
    #[inline]
    pub fn bulk_update<R>(&self, rank: u32, slot: usize, at: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let p = self.bulk_ptr(rank, slot, at, len);
        // SAFETY: in bounds (checked), alive while `self` is, `u8` has no invalid values,
        // and the owner is the only writer of its bulk buffer, with no reader of these
        // bytes while `f` runs (above); the slice does not outlive the call.
        f(unsafe { std::slice::from_raw_parts_mut(p, len) })
    }

    /// The `len` bytes at offset `at` of the bulk buffer of `(rank, slot)`, read in place
    /// (to combine them without a copy). The protocol on top must keep the owner from
    /// writing them while the borrow lives (the owner publishes, then waits until every
    /// reader moved on before it rewrites); a protocol bug could at worst make the slice
    /// show inconsistent bytes, every pattern of which is a valid `u8`.
    #[inline]
    pub fn bulk(&self, rank: u32, slot: usize, at: usize, len: usize) -> &[u8] {
        let src = self.bulk_ptr(rank, slot, at, len);
        // SAFETY: in bounds (checked), alive as long as `self` (the mapping), and `u8`
        // has no invalid values; the owner does not write while readers may read (above).
        unsafe { std::slice::from_raw_parts(src, len) }
    }

    /// Number of ranks with slots.
    pub fn nranks(&self) -> u32 {
        self.nranks
    }

    /// Pointer to byte `at` of `(rank, slot)`; panics outside the area.
    #[inline]
    fn ptr(&self, rank: u32, slot: usize, at: usize, len: usize) -> *mut u8 {
        assert!(
            rank < self.nranks && slot < COLL_SLOTS && at + len <= COLL_SLOT_BYTES,
            "collective slot access out of range"
        );
        let off = self.offset + (rank as usize * COLL_SLOTS + slot) * COLL_SLOT_BYTES + at;
        // SAFETY: `off + len` lies inside the area, which `new` checked lies inside the
        // live mapping `self.map` keeps.
        unsafe { self.map.ptr.add(off) }
    }

    #[inline]
    fn word(&self, rank: u32, slot: usize, at: usize) -> &AtomicU64 {
        // SAFETY: in bounds (checked by `ptr`), 8-byte aligned (page-aligned area, slots
        // and lines of multiples of 64 bytes, `at` a multiple of 8), valid for the
        // lifetime of `self` (the mapping outlives the borrow), and only ever accessed
        // atomically by every process.
        unsafe { AtomicU64::from_ptr(self.ptr(rank, slot, at, 8).cast()) }
    }

    /// The entered word of `(rank, slot)`.
    #[inline]
    pub fn entered(&self, rank: u32, slot: usize) -> &AtomicU64 {
        self.word(rank, slot, 0)
    }

    /// The vote word of `(rank, slot)`.
    #[inline]
    pub fn vote(&self, rank: u32, slot: usize) -> &AtomicU64 {
        self.word(rank, slot, 64)
    }

    /// Writes proposal buffer `parity` (0 or 1) of `(rank, slot)`: the
    /// [`COLL_VOTE_DATA`] bytes beside the vote word (for the agreement fast path).
    #[inline]
    pub fn vote_write(&self, rank: u32, slot: usize, parity: usize, bytes: &[u8; COLL_VOTE_DATA]) {
        assert!(parity < 2, "proposal buffer out of range");
        let dst = self.ptr(rank, slot, 72 + parity * COLL_VOTE_DATA, COLL_VOTE_DATA);
        // SAFETY: as in `write`: inside the mapping (checked), plain bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, COLL_VOTE_DATA) }
    }

    /// Reads proposal buffer `parity` of `(rank, slot)`.
    #[inline]
    pub fn vote_read(&self, rank: u32, slot: usize, parity: usize) -> [u8; COLL_VOTE_DATA] {
        assert!(parity < 2, "proposal buffer out of range");
        let src = self.ptr(rank, slot, 72 + parity * COLL_VOTE_DATA, COLL_VOTE_DATA);
        let mut out = [0u8; COLL_VOTE_DATA];
        // SAFETY: as in `read`.
        unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), COLL_VOTE_DATA) }
        out
    }

    /// The ready word of line `k` of `(rank, slot)`. Panics unless `k < COLL_BUFS`.
    #[inline]
    pub fn ready(&self, rank: u32, slot: usize, k: usize) -> &AtomicU64 {
        assert!(k < COLL_BUFS, "collective buffer out of range");
        self.word(rank, slot, READY_AT + 64 * k)
    }

    /// Word `i` (1 to 7) of ready line `k` of `(rank, slot)`: the line's inline data
    /// seen as atomic words, for a protocol that describes a contribution there rather
    /// than carrying it (a line is used one way or the other per collective). Unlike the
    /// rest of a slot, others may update these words atomically (e.g. count readers
    /// done). Panics unless `k < COLL_BUFS` and `1 <= i <= 7`.
    #[inline]
    pub fn line_word(&self, rank: u32, slot: usize, k: usize, i: usize) -> &AtomicU64 {
        assert!(k < COLL_BUFS && (1..8).contains(&i), "ready line word out of range");
        self.word(rank, slot, READY_AT + 64 * k + 8 * i)
    }

    /// Where `len` bytes at `at` of a contribution of `total` bytes live in buffer `k`:
    /// inline in ready line `k` when the whole contribution fits there, else in data
    /// buffer `k`. Panics when they do not fit.
    #[inline]
    fn place(k: usize, total: usize, at: usize, len: usize) -> usize {
        assert!(k < COLL_BUFS && at + len <= total && total <= COLL_DATA, "collective buffer access out of range");
        if total <= COLL_INLINE {
            READY_AT + 64 * k + 8 + at
        } else {
            DATA_AT + k * COLL_DATA + at
        }
    }

    /// Copies `bytes` to offset `at` of buffer `k` of `(rank, slot)`, for a contribution
    /// of `total` bytes (≤ [`COLL_DATA`]; inline when ≤ [`COLL_INLINE`]).
    #[inline]
    pub fn write(&self, rank: u32, slot: usize, k: usize, total: usize, at: usize, bytes: &[u8]) {
        let dst = self.ptr(rank, slot, Self::place(k, total, at, bytes.len()), bytes.len());
        // SAFETY: `dst..dst + len` is inside the mapping (checked); a shared mapping never
        // overlaps a Rust-owned slice; bytes have no invalid values.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len()) }
    }

    /// Copies from offset `at` of buffer `k` of `(rank, slot)` into `out`, for a
    /// contribution of `total` bytes.
    #[inline]
    pub fn read(&self, rank: u32, slot: usize, k: usize, total: usize, at: usize, out: &mut [u8]) {
        let src = self.ptr(rank, slot, Self::place(k, total, at, out.len()), out.len());
        // SAFETY: as in `write`, in the other direction.
        unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Layout, Segment};
    use std::sync::atomic::Ordering;

    /// A fresh segment of `nranks` named after `test`, and a second mapping of it.
    fn segment(test: &str, nranks: u32) -> (Segment, Segment) {
        segment_bulk(test, nranks, 0)
    }

    fn segment_bulk(test: &str, nranks: u32, bulk_bytes: u32) -> (Segment, Segment) {
        let name = format!("/rt-collarea-{test}-{}", std::process::id());
        let _ = Segment::unlink(&name);
        let seg = Segment::create(&name, Layout { nranks, ring_bytes: 4096, bulk_bytes }).unwrap();
        let other = Segment::open(&name, std::time::Duration::from_secs(1)).unwrap();
        Segment::unlink(&name).unwrap();
        (seg, other)
    }

    #[test]
    fn bulk_buffers_are_disjoint_shared_and_bounded() {
        let (seg, other) = segment_bulk("bulk", 3, 8192);
        let (a, b) = (seg.coll_area().unwrap(), other.coll_area().unwrap());
        assert_eq!((a.bulk_bytes(), b.bulk_bytes()), (8192, 8192));
        for rank in 0..3u32 {
            for slot in 0..BULK_SLOTS {
                let fill = [rank as u8 * 16 + slot as u8; 8192];
                a.bulk_write(rank, slot, 0, &fill);
            }
        }
        for rank in 0..3u32 {
            for slot in 0..BULK_SLOTS {
                let want = rank as u8 * 16 + slot as u8;
                assert!(b.bulk(rank, slot, 0, 8192).iter().all(|&x| x == want), "rank {rank} slot {slot}");
            }
        }
        a.bulk_write(1, 1, 8000, &[7; 192]);
        assert_eq!(b.bulk(1, 1, 7999, 2), &[17, 7]);
        a.bulk_update(2, 0, 4096, 2, |x| x.copy_from_slice(&[1, 2]));
        assert_eq!(b.bulk(2, 0, 4095, 4), &[32, 1, 2, 32]);
        for bad in [(3, 0, 0, 1), (0, BULK_SLOTS, 0, 1), (0, 0, 8192, 1), (0, 0, 1, 8192), (0, 0, usize::MAX, 2)] {
            let r = std::panic::catch_unwind(|| b.bulk(bad.0, bad.1, bad.2, bad.3).len());
            assert!(r.is_err(), "{bad:?} must panic");
        }
        let (none, _) = segment_bulk("nobulk", 2, 0);
        let none = none.coll_area().unwrap();
        assert_eq!(none.bulk_bytes(), 0);
        assert!(std::panic::catch_unwind(|| none.bulk(0, 0, 0, 1).len()).is_err());
    }

    #[test]
    fn slots_are_disjoint_and_shared_between_mappings() {
        let (seg, other) = segment("shared", 3);
        let (a, b) = (seg.coll_area().unwrap(), other.coll_area().unwrap());
        let tag = |rank: u32, slot: usize, k: usize| u64::from(rank) << 32 | (slot as u64) << 8 | k as u64;
        for rank in 0..3u32 {
            for slot in 0..COLL_SLOTS {
                a.entered(rank, slot).store(tag(rank, slot, 9), Ordering::Release);
                a.vote(rank, slot).store(!tag(rank, slot, 9), Ordering::Release);
                a.vote_write(rank, slot, 1, &[rank as u8 ^ slot as u8; COLL_VOTE_DATA]);
                for k in 0..COLL_BUFS {
                    a.write(rank, slot, k, COLL_DATA, COLL_DATA - 8, &tag(rank, slot, k).to_le_bytes());
                    a.write(rank, slot, k, COLL_INLINE, COLL_INLINE - 8, &(!tag(rank, slot, k)).to_le_bytes());
                    a.ready(rank, slot, k).store(tag(rank, slot, k), Ordering::Release);
                }
            }
        }
        for rank in 0..3u32 {
            for slot in 0..COLL_SLOTS {
                assert_eq!(b.entered(rank, slot).load(Ordering::Acquire), tag(rank, slot, 9));
                assert_eq!(b.vote(rank, slot).load(Ordering::Acquire), !tag(rank, slot, 9));
                assert_eq!(b.vote_read(rank, slot, 1), [rank as u8 ^ slot as u8; COLL_VOTE_DATA]);
                for k in 0..COLL_BUFS {
                    assert_eq!(b.ready(rank, slot, k).load(Ordering::Acquire), tag(rank, slot, k));
                    let mut out = [0u8; 8];
                    b.read(rank, slot, k, COLL_DATA, COLL_DATA - 8, &mut out);
                    assert_eq!(u64::from_le_bytes(out), tag(rank, slot, k));
                    b.read(rank, slot, k, COLL_INLINE, COLL_INLINE - 8, &mut out);
                    assert_eq!(u64::from_le_bytes(out), !tag(rank, slot, k), "inline data beside its ready word");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_rank_out_of_range_panics() {
        segment("rank", 2).0.coll_area().unwrap().entered(2, 0);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn data_past_a_buffer_panics() {
        segment("range", 2).0.coll_area().unwrap().write(1, 0, 0, COLL_DATA, COLL_DATA - 4, &[0u8; 8]);
    }

    #[test]
    fn no_area_above_the_rank_limit() {
        assert_eq!(area_bytes(COLL_MAX_RANKS + 1), 0);
        assert_eq!(area_bytes(2), 2 * COLL_SLOTS * COLL_SLOT_BYTES);
        assert_eq!(COLL_SLOT_BYTES % 64, 0);
    }
}
