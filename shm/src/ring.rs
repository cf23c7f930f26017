//! Single-producer single-consumer record ring of 64-byte cells ("fastbox" rings).
//!
//! Parts: [`RingTx`] (producer handle), [`RingRx`] (consumer handle), [`PushError`] /
//! [`Full`] (the "would block" outcome), [`channel`] (a heap-backed ring for in-process
//! tests and benches), and the crate-private memory layout used by
//! [`Segment`](crate::Segment).
//!
//! # Algorithm
//!
//! The idea is the fastbox of MPICH's Nemesis / Open MPI's `vader` and the cell rings of
//! UCX `mm`: the "data present" flag lives in the same cache line as the data, so a small
//! message costs the receiver exactly one cache-line transfer and the producer never reads
//! a line the consumer writes on the fast path.
//!
//! Memory of one ring (all offsets relative to its base, no pointers inside):
//!
//! ```text
//! [CachePadded producer block: tail u64]   written by the producer (informational / re-attach)
//! [CachePadded consumer block: head u64]   written by the consumer, read by the producer
//! [ring_bytes of 64-byte cells]
//! ```
//!
//! A *record* (one message: header bytes then payload bytes) starts at a cell boundary. Its
//! first cell begins with a 16-byte prefix: `stamp: u64` = absolute cell position + 1,
//! `len: u32`, 4 reserved bytes; the record bytes follow at offset 16 (so they are 16-byte
//! aligned) and continue contiguously through the following cells, which carry no prefix.
//! The record is therefore one contiguous slice in the ring. Records never wrap: when a
//! record does not fit before the end, the producer writes a *skip marker* (`len =
//! u32::MAX`) and continues at cell 0.
//!
//! The producer fills the cells, then stores the stamp with `Release`. The consumer loads
//! the stamp at its position with `Acquire`; it is valid only if it equals position + 1, so
//! stamps left from earlier laps never match. Continuation cells hold arbitrary payload
//! bytes in the first word, which *could* equal a later position + 1; so when the consumer
//! releases a record it zeroes the first word of each of its continuation cells (never of
//! a one-cell record: the latency-critical small message costs nothing extra). Invariant:
//! the first word of every released cell is 0 or a stamp of a past position.
//!
//! The producer keeps a cached copy of the consumer's head and re-reads the shared head
//! (`Acquire`) only when the cached one says the ring is full. No allocation, lock or
//! system call happens on push or pop. Every length read from shared memory is validated:
//! a corrupt ring yields [`Error::BadSegment`], never undefined behaviour.

use std::alloc::{self, Layout};
use std::any::Any;
use std::fmt;
use std::mem::{align_of, size_of};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crossbeam_utils::CachePadded;

use crate::Error;

/// Size of a ring cell in bytes (one cache line).
pub const CELL: usize = 64;
/// Offset of the record bytes inside a record's first cell (stamp, length, reserved).
pub const RECORD_OFFSET: usize = 16;
/// Smallest accepted `ring_bytes`.
pub const MIN_RING_BYTES: u32 = 4096;
/// Largest accepted `ring_bytes`.
pub const MAX_RING_BYTES: u32 = 1 << 30;
/// How many cells past the end of a record just peeked the consumer prefetches (0, 1,
/// 2, 4 measured: 2 and 4 best, alike).
const PREFETCH_AHEAD: u64 = 2;
/// Length value marking a skip record (the rest of the lap is unused).
const SKIP: u32 = u32::MAX;

/// Producer-side control word(s).
#[repr(C)]
struct ProdCtl {
    /// Position after the last published record (informational; used to re-attach).
    tail: AtomicU64,
}

/// Consumer-side control word(s).
#[repr(C)]
struct ConsCtl {
    /// Position after the last released record.
    head: AtomicU64,
}

/// The control blocks in front of the cells, each on its own cache line(s).
#[repr(C)]
struct RingCtl {
    prod: CachePadded<ProdCtl>,
    cons: CachePadded<ConsCtl>,
}

/// Bytes of control blocks in front of a ring's cells.
pub(crate) const CTL_BYTES: usize = size_of::<RingCtl>();
/// Required alignment of a ring's base.
pub(crate) const CTL_ALIGN: usize = align_of::<RingCtl>();

/// One cell, used for layout checks.
#[repr(C, align(64))]
struct Cell([u8; CELL]);

const _: () = assert!(size_of::<Cell>() == CELL && align_of::<Cell>() == CELL);
const _: () = assert!(CTL_BYTES & (CELL - 1) == 0 && CTL_ALIGN & (CELL - 1) == 0);

/// Checks that `ring_bytes` is a power of two in `MIN_RING_BYTES..=MAX_RING_BYTES`.
pub(crate) fn check_ring_bytes(ring_bytes: u32) -> Result<(), Error> {
    if !ring_bytes.is_power_of_two() || !(MIN_RING_BYTES..=MAX_RING_BYTES).contains(&ring_bytes) {
        return Err(Error::InvalidArgument("ring_bytes must be a power of two between 4096 and 2^30"));
    }
    Ok(())
}

/// Bytes one ring occupies (control blocks + cells); a multiple of [`CTL_ALIGN`].
pub(crate) fn ring_stride(ring_bytes: u32) -> usize {
    CTL_BYTES + ring_bytes as usize
}

/// Largest record (header + payload bytes) a ring of `ring_bytes` accepts: a quarter of
/// the ring plus one cell, minus the first cell's prefix. The extra cell carries a
/// message header beside a payload of a whole quarter ring (64 KiB in one record of a
/// 256 KiB ring, not a rendezvous); a record still always fits after one skip (the skip
/// is shorter than the record, so both take at most half the ring and two cells).
pub const fn max_record(ring_bytes: u32) -> usize {
    ring_bytes as usize / 4 + CELL - RECORD_OFFSET
}

/// Ring bytes a record of `len` bytes occupies (excluding a possible skip marker).
pub const fn record_footprint(len: usize) -> usize {
    cells_for(len) as usize * CELL
}

const fn cells_for(len: usize) -> u64 {
    (RECORD_OFFSET + len).div_ceil(CELL) as u64
}

/// Whatever keeps the ring memory alive (a shared mapping or a heap block).
pub(crate) type Owner = Arc<dyn Any + Send + Sync>;

/// Exclusive claim on one end of one ring within this process; released on drop.
#[derive(Debug)]
pub(crate) struct Claim {
    set: Arc<[AtomicBool]>,
    idx: usize,
}

impl Claim {
    /// Takes flag `idx` of `set`; `None` if it is already taken (or out of range).
    pub(crate) fn take(set: &Arc<[AtomicBool]>, idx: usize) -> Option<Claim> {
        let flag = set.get(idx)?;
        flag.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).ok()?;
        Some(Claim { set: set.clone(), idx })
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.set[self.idx].store(false, Ordering::Release);
    }
}

/// Raw view of one ring: pointers into memory kept alive by `_owner`.
struct Raw {
    ctl: *const RingCtl,
    cells: *mut u8,
    ncells: u64,
    max_record: usize,
    _owner: Owner,
    _claim: Option<Claim>,
}

impl Raw {
    /// # Safety
    /// `base` must be aligned to [`CTL_ALIGN`] and point to `ring_stride(ring_bytes)`
    /// bytes valid for reads and writes for as long as `owner` is alive; `ring_bytes` must
    /// have passed [`check_ring_bytes`].
    unsafe fn new(base: *mut u8, ring_bytes: u32, owner: Owner, claim: Option<Claim>) -> Raw {
        debug_assert_eq!(base as usize % CTL_ALIGN, 0);
        Raw {
            ctl: base as *const RingCtl,
            // SAFETY: the caller guarantees `ring_stride(ring_bytes)` bytes at `base`, and
            // CTL_BYTES < ring_stride.
            cells: unsafe { base.add(CTL_BYTES) },
            ncells: (ring_bytes as usize / CELL) as u64,
            max_record: max_record(ring_bytes),
            _owner: owner,
            _claim: claim,
        }
    }

    fn ctl(&self) -> &RingCtl {
        // SAFETY: `ctl` points to a properly aligned RingCtl inside memory kept alive by
        // `_owner` (Raw::new contract); RingCtl holds only atomics, so shared access from
        // several threads/processes is sound.
        unsafe { &*self.ctl }
    }

    /// Pointer to the start of cell `idx` (`idx < ncells`).
    fn cell(&self, idx: u64) -> *mut u8 {
        debug_assert!(idx < self.ncells);
        // SAFETY: idx < ncells, so the offset stays inside the `ncells * CELL` cell bytes.
        unsafe { self.cells.add(idx as usize * CELL) }
    }

    /// Asks the CPU to bring cell `idx` into this core's cache (a hint: no effect on
    /// what any load returns).
    #[inline(always)]
    fn prefetch(&self, idx: u64) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch instruction never faults and changes no memory or register
        // state visible to the program; the address is inside the ring anyway.
        unsafe {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            _mm_prefetch::<_MM_HINT_T0>(self.cell(idx).cast_const().cast());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = idx;
    }

    /// The stamp word of cell `idx`.
    fn stamp(&self, idx: u64) -> &AtomicU64 {
        // SAFETY: the cell start is 64-byte aligned and inside live memory; the word is
        // accessed atomically by both sides while it may be shared (it is only written
        // non-atomically, as continuation data, by the producer while it owns the cell).
        unsafe { AtomicU64::from_ptr(self.cell(idx) as *mut u64) }
    }

    /// The length word of cell `idx`.
    fn len(&self, idx: u64) -> &AtomicU32 {
        // SAFETY: offset 8 of an aligned cell is 4-byte aligned and inside live memory;
        // same sharing discipline as the stamp.
        unsafe { AtomicU32::from_ptr(self.cell(idx).add(8) as *mut u32) }
    }

    /// Reads both cursors and checks they describe a possible ring state.
    fn cursors(&self) -> Result<(u64, u64), Error> {
        let tail = self.ctl().prod.tail.load(Ordering::Acquire);
        let head = self.ctl().cons.head.load(Ordering::Acquire);
        if tail < head || tail - head > self.ncells {
            return Err(Error::BadSegment("ring cursors"));
        }
        Ok((head, tail))
    }
}

impl fmt::Debug for Raw {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Raw")
            .field("ctl", &self.ctl)
            .field("ncells", &self.ncells)
            .field("max_record", &self.max_record)
            .finish_non_exhaustive()
    }
}

/// The ring has no room for the record now ("would block"): retry after the consumer
/// has made progress. Not an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Full;

impl fmt::Display for Full {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ring full")
    }
}

impl std::error::Error for Full {}

/// Why [`RingTx::try_push`] did not publish a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PushError {
    /// No room now ("would block"): retry later, e.g. from the progress loop.
    Full,
    /// The record can never fit: `len > max` ([`RingTx::max_record`]). Send it another way
    /// (rendezvous / single copy).
    TooLarge {
        /// Requested record length (head + body).
        len: usize,
        /// Largest record the ring accepts.
        max: usize,
    },
    /// The consumer's shared cursor is impossible (corrupt segment or a misbehaving peer);
    /// the ring cannot be used any more.
    Corrupt,
}

impl From<Full> for PushError {
    fn from(_: Full) -> PushError {
        PushError::Full
    }
}

impl fmt::Display for PushError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PushError::Full => f.write_str("ring full"),
            PushError::TooLarge { len, max } => {
                write!(f, "record of {len} bytes exceeds the ring maximum of {max}")
            }
            PushError::Corrupt => f.write_str("ring consumer cursor is corrupt"),
        }
    }
}

impl std::error::Error for PushError {}

impl From<PushError> for Error {
    /// `Full` has no `Error` counterpart: it maps to `Timeout("ring space")`, for callers
    /// that gave up waiting.
    fn from(e: PushError) -> Error {
        match e {
            PushError::Full => Error::Timeout("ring space"),
            PushError::TooLarge { len, max } => Error::TooLarge { len, max },
            PushError::Corrupt => Error::BadSegment("ring consumer cursor"),
        }
    }
}

/// Producer end of a ring. One per ring at a time; `Send`, not `Sync`.
#[derive(Debug)]
pub struct RingTx {
    raw: Raw,
    /// Absolute cell position of the next record.
    pos: u64,
    /// Last seen consumer head.
    cached_head: u64,
    /// One bit per cell: its first word holds payload bytes (it was written as a
    /// continuation cell and not since as a record's first cell or scrubbed). Such a
    /// word could pass for the stamp of a record starting there on a later lap, so it
    /// is zeroed ([`RingTx::scrub`]) before the consumer can look at it: before a record
    /// ending at that cell is published. The producer does this on cells it owns and
    /// writes next anyway; the consumer never writes the cells it reads.
    dirty: Vec<u64>,
}

// SAFETY: RingTx owns its ring's producer side exclusively (single producer); the memory
// it points to is kept alive by the `Send + Sync` owner and is only shared through the
// SPSC protocol, so moving the handle to another thread is sound.
unsafe impl Send for RingTx {}

impl RingTx {
    /// Attaches a producer to the ring at `base`, resuming from the shared cursors.
    ///
    /// # Safety
    /// As [`Raw::new`]; moreover no other `RingTx` for this ring may exist at the same
    /// time (in any process). Within a process, `claim` (when given) enforces that.
    pub(crate) unsafe fn from_raw(
        base: *mut u8,
        ring_bytes: u32,
        owner: Owner,
        claim: Option<Claim>,
    ) -> Result<RingTx, Error> {
        // SAFETY: forwarded contract.
        let raw = unsafe { Raw::new(base, ring_bytes, owner, claim) };
        let (head, tail) = raw.cursors()?;
        let mut tx = RingTx { raw, pos: tail, cached_head: head, dirty: Vec::new() };
        tx.dirty = vec![0; (tx.raw.ncells as usize).div_ceil(64)];
        if tail != 0 {
            tx.mark_history(head, tail);
        }
        Ok(tx)
    }

    /// Attached to a ring written before: the free cells' first words are of unknown
    /// origin, so they count as dirty; in the records not yet consumed (`head..tail`),
    /// each record's (or skip marker's) first cell is clean and the rest dirty. Never a
    /// live record's first cell is dirty, so a scrub cannot zero its stamp. The walk
    /// stops at the first length that makes no sense (the consumer reports that ring
    /// corrupt); the cells after it stay dirty.
    fn mark_history(&mut self, head: u64, tail: u64) {
        let n = self.raw.ncells;
        self.dirty.fill(u64::MAX);
        let mut p = head;
        while p < tail {
            let idx = p & (n - 1);
            let len = self.raw.len(idx).load(Ordering::Relaxed);
            self.set_clean(idx);
            let need = if len == SKIP { n - idx } else { cells_for(len as usize) };
            if len != SKIP && (len as usize > self.raw.max_record || need > n - idx) {
                return;
            }
            p += need;
        }
    }

    /// Whether cell `c`'s first word may hold payload bytes (see `dirty`).
    #[inline]
    fn is_dirty(&self, c: u64) -> bool {
        self.dirty[(c / 64) as usize] & (1 << (c % 64)) != 0
    }

    /// Cell `c`'s first word is (about to be) a stamp or zero.
    #[inline]
    fn set_clean(&mut self, c: u64) {
        self.dirty[(c / 64) as usize] &= !(1 << (c % 64));
    }

    /// Marks cells `from..to` (inside the ring, `from <= to`) as continuation cells.
    fn mark_dirty(&mut self, from: u64, to: u64) {
        let mut c = from;
        while c < to {
            let (w, b) = ((c / 64) as usize, c % 64);
            let n = (64 - b).min(to - c);
            let bits = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << b };
            self.dirty[w] |= bits;
            c += n;
        }
    }

    /// Zeroes the first word of cell `c` if it may hold payload bytes. Called only on a
    /// free cell: the cell after a record about to be published (a dirty cell is never
    /// a record's first cell, so it is not the consumer's head record even when the
    /// ring is full), or cell 0 before a skip marker sends the consumer there.
    #[inline]
    fn scrub(&mut self, c: u64) {
        if self.is_dirty(c) {
            self.raw.stamp(c).store(0, Ordering::Relaxed);
            self.set_clean(c);
        }
    }

    /// Largest record (`head.len() + body.len()`) this ring accepts.
    pub fn max_record(&self) -> usize {
        self.raw.max_record
    }

    /// Free ring bytes as of now (re-reads the consumer's head). A record of `len` bytes
    /// needs [`record_footprint`]`(len)` bytes, plus the rest of the lap if it would cross
    /// the end of the ring.
    pub fn free_bytes(&self) -> usize {
        let head = self.raw.ctl().cons.head.load(Ordering::Acquire);
        let used = self.pos.saturating_sub(head).min(self.raw.ncells);
        (self.raw.ncells - used) as usize * CELL
    }

    /// Publishes one record made of `head` followed by `body` (two copies, then one
    /// `Release` store). Never blocks: [`PushError::Full`] means "retry later".
    #[inline]
    pub fn try_push(&mut self, head: &[u8], body: &[u8]) -> Result<(), PushError> {
        let len = head.len().saturating_add(body.len());
        if len > self.raw.max_record {
            return Err(PushError::TooLarge { len, max: self.raw.max_record });
        }
        let n = self.raw.ncells;
        let need = cells_for(len);
        let idx = self.pos & (n - 1);
        let to_end = n - idx;
        let skip = if need > to_end { to_end } else { 0 };
        let total = skip + need;
        if self.pos - self.cached_head + total > n {
            let h = self.raw.ctl().cons.head.load(Ordering::Acquire);
            if h < self.cached_head || h > self.pos {
                return Err(PushError::Corrupt);
            }
            self.cached_head = h;
            if self.pos - h + total > n {
                return Err(PushError::Full);
            }
        }
        if skip > 0 {
            // The consumer goes on at cell 0 once it sees the marker; cell 0 is free (the
            // record fits there).
            self.scrub(0);
            self.set_clean(idx);
            self.raw.len(idx).store(SKIP, Ordering::Relaxed);
            self.raw.stamp(idx).store(self.pos + 1, Ordering::Release);
            self.pos += skip;
        }
        let idx = self.pos & (n - 1);
        self.set_clean(idx);
        if need > 1 {
            self.mark_dirty(idx + 1, idx + need);
        }
        // The consumer looks at the next cell once this record is out.
        self.scrub((idx + need) & (n - 1));
        self.raw.len(idx).store(len as u32, Ordering::Relaxed);
        let dst = self.raw.cell(idx);
        // SAFETY: cells [idx, idx + need) are inside the ring (no wrap: checked above) and
        // owned by the producer: the consumer released them (head) and will not read them
        // before the stamp below is published. `len <= max_record` keeps
        // RECORD_OFFSET + len within those cells. Sources are caller slices, which cannot
        // overlap the ring's producer-owned cells.
        unsafe {
            let dst = dst.add(RECORD_OFFSET);
            std::ptr::copy_nonoverlapping(head.as_ptr(), dst, head.len());
            std::ptr::copy_nonoverlapping(body.as_ptr(), dst.add(head.len()), body.len());
        }
        self.raw.stamp(idx).store(self.pos + 1, Ordering::Release);
        self.pos += need;
        self.raw.ctl().prod.tail.store(self.pos, Ordering::Release);
        Ok(())
    }
}

/// The record currently returned by [`RingRx::peek`].
#[derive(Debug, Clone, Copy)]
struct Peeked {
    idx: u64,
    need: u64,
    len: usize,
}

/// Consumer end of a ring. One per ring at a time; `Send`, not `Sync`.
#[derive(Debug)]
pub struct RingRx {
    raw: Raw,
    /// Absolute cell position of the next record to read.
    pos: u64,
    peeked: Option<Peeked>,
}

// SAFETY: as for RingTx: exclusive consumer side, memory kept alive by a Send + Sync owner.
unsafe impl Send for RingRx {}

impl RingRx {
    /// Attaches a consumer to the ring at `base`, resuming from the shared head.
    ///
    /// # Safety
    /// As [`Raw::new`]; moreover no other `RingRx` for this ring may exist at the same
    /// time (in any process). Within a process, `claim` (when given) enforces that.
    pub(crate) unsafe fn from_raw(
        base: *mut u8,
        ring_bytes: u32,
        owner: Owner,
        claim: Option<Claim>,
    ) -> Result<RingRx, Error> {
        // SAFETY: forwarded contract.
        let raw = unsafe { Raw::new(base, ring_bytes, owner, claim) };
        let (head, _tail) = raw.cursors()?;
        Ok(RingRx { raw, pos: head, peeked: None })
    }

    /// Largest record this ring accepts (longer lengths read from the ring are corrupt).
    pub fn max_record(&self) -> usize {
        self.raw.max_record
    }

    fn slice(&self, p: Peeked) -> &[u8] {
        // SAFETY: `p` was validated by `peek`: RECORD_OFFSET + len lies within cells
        // [idx, idx + need) which are inside the ring. The producer published them with a
        // Release stamp we loaded with Acquire, and will not touch them before `pop`
        // publishes the head; `&mut self` in `pop` ends this borrow first.
        unsafe { std::slice::from_raw_parts(self.raw.cell(p.idx).add(RECORD_OFFSET), p.len) }
    }

    /// Returns the next record, borrowed from the ring, or `None` when none is ready.
    /// Skip markers are passed transparently. Calling it again without [`pop`] returns the
    /// same record. A malformed record yields `Some(Err(Error::BadSegment(..)))` (again on
    /// every call: the ring is unusable).
    ///
    /// [`pop`]: RingRx::pop
    #[inline]
    pub fn peek(&mut self) -> Option<Result<&[u8], Error>> {
        if let Some(p) = self.peeked {
            return Some(Ok(self.slice(p)));
        }
        let n = self.raw.ncells;
        // At most two rounds: a skip marker is never at cell 0.
        loop {
            let idx = self.pos & (n - 1);
            if self.raw.stamp(idx).load(Ordering::Acquire) != self.pos.wrapping_add(1) {
                return None;
            }
            let len = self.raw.len(idx).load(Ordering::Relaxed);
            if len == SKIP {
                if idx == 0 {
                    return Some(Err(Error::BadSegment("skip marker at ring start")));
                }
                self.pos += n - idx;
                continue;
            }
            let len = len as usize;
            let need = cells_for(len.min(self.raw.max_record));
            if len > self.raw.max_record || need > n - idx {
                return Some(Err(Error::BadSegment("record length")));
            }
            let p = Peeked { idx, need, len };
            self.peeked = Some(p);
            // The records after this one are most likely written already when the
            // consumer is the slower side: ask for a line ahead while this record is
            // handled (the raw ring: 33 -> 46 M records/s, `examples/ring_stream.rs`;
            // 8 B `osu_bw` about +4 %, bench/history/NOTEBOOK.md §0.15).
            self.raw.prefetch((idx + need + PREFETCH_AHEAD) & (n - 1));
            return Some(Ok(self.slice(p)));
        }
    }

    /// Releases the record returned by the last [`peek`](RingRx::peek) so the producer can
    /// reuse its cells. Does nothing if no record is peeked.
    #[inline]
    pub fn pop(&mut self) {
        let Some(p) = self.peeked.take() else {
            return;
        };
        // Continuation cells keep their payload bytes: the producer scrubs a stale word
        // before a record could start there (`RingTx::scrub`), so the consumer never
        // writes (and takes back from the producer) the cache lines it read.
        self.pos += p.need;
        self.raw.ctl().cons.head.store(self.pos, Ordering::Release);
    }

    /// Convenience: peeks, hands the record to `f`, and pops it.
    pub fn try_recv<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<Result<R, Error>> {
        let r = match self.peek()? {
            Ok(rec) => f(rec),
            Err(e) => return Some(Err(e)),
        };
        self.pop();
        Some(Ok(r))
    }
}

/// A ring in zeroed, aligned heap memory (for [`channel`]).
#[derive(Debug)]
struct HeapRing {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the block is plain memory accessed only through the SPSC protocol (atomics for
// control words and stamps, Release/Acquire ordering for data), from any thread.
unsafe impl Send for HeapRing {}
// SAFETY: see Send: shared access is mediated by the ring protocol.
unsafe impl Sync for HeapRing {}

impl Drop for HeapRing {
    fn drop(&mut self) {
        // SAFETY: `ptr` was returned by `alloc_zeroed(layout)` and is freed exactly once,
        // after the last handle (which owns an Arc of this block) is gone.
        unsafe { alloc::dealloc(self.ptr, self.layout) }
    }
}

/// Creates an in-process ring of `ring_bytes` bytes of cells in 64-byte-aligned heap
/// memory, for tests and benches. The memory lives until both ends are dropped.
///
/// # Panics
/// If `ring_bytes` is not a power of two in `4096..=2^30`, or on allocation failure.
pub fn channel(ring_bytes: u32) -> (RingTx, RingRx) {
    if let Err(e) = check_ring_bytes(ring_bytes) {
        panic!("channel({ring_bytes}): {e}");
    }
    let layout = Layout::from_size_align(ring_stride(ring_bytes), CTL_ALIGN)
        .expect("ring layout is valid for checked ring_bytes");
    // SAFETY: the layout has non-zero size.
    let ptr = unsafe { alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        alloc::handle_alloc_error(layout);
    }
    let owner: Owner = Arc::new(HeapRing { ptr, layout });
    // SAFETY: `ptr` is CTL_ALIGN-aligned, ring_stride(ring_bytes) zeroed bytes kept alive
    // by `owner`; zeroed cursors are consistent; exactly one Tx and one Rx are created.
    unsafe {
        let tx = RingTx::from_raw(ptr, ring_bytes, owner.clone(), None).expect("zeroed ring");
        let rx = RingRx::from_raw(ptr, ring_bytes, owner, None).expect("zeroed ring");
        (tx, rx)
    }
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;

    fn recv(rx: &mut RingRx) -> Option<Vec<u8>> {
        rx.try_recv(|r| r.to_vec()).map(|r| r.unwrap())
    }

    #[test]
    fn push_pop_roundtrip_and_idempotent_peek() {
        let (mut tx, mut rx) = channel(4096);
        assert!(rx.peek().is_none());
        tx.try_push(b"head", b"body").unwrap();
        assert_eq!(rx.peek().unwrap().unwrap(), b"headbody");
        assert_eq!(rx.peek().unwrap().unwrap(), b"headbody");
        rx.pop();
        assert!(rx.peek().is_none());
        rx.pop(); // no-op
        tx.try_push(&[], &[]).unwrap();
        assert_eq!(recv(&mut rx).unwrap(), b"");
        assert_eq!(tx.free_bytes(), 4096);
    }

    #[test]
    fn record_slice_is_aligned() {
        let (mut tx, mut rx) = channel(4096);
        tx.try_push(&[1; 3], &[]).unwrap();
        tx.try_push(&[2; 100], &[]).unwrap();
        for _ in 0..2 {
            let r = rx.peek().unwrap().unwrap();
            assert_eq!(r.as_ptr() as usize % 16, 0);
            rx.pop();
        }
    }

    #[test]
    fn full_when_full_then_room_after_pop() {
        let (mut tx, mut rx) = channel(4096); // 64 cells
                                              // 48 bytes of record = exactly one cell.
        for i in 0..64u8 {
            tx.try_push(&[i], &[0; 47]).unwrap();
        }
        assert_eq!(tx.free_bytes(), 0);
        assert_eq!(tx.try_push(&[], &[]), Err(PushError::Full));
        assert_eq!(recv(&mut rx).unwrap()[0], 0);
        tx.try_push(&[64], &[0; 47]).unwrap();
        assert_eq!(tx.try_push(&[], &[]), Err(PushError::Full));
        for i in 1..=64u8 {
            assert_eq!(recv(&mut rx).unwrap()[0], i);
        }
        assert!(rx.peek().is_none());
    }

    #[test]
    fn too_large() {
        let (mut tx, _rx) = channel(4096);
        assert_eq!(tx.max_record(), 1072);
        let big = vec![0u8; 1000];
        tx.try_push(&big, &[0; 72]).unwrap();
        assert_eq!(tx.try_push(&big, &[0; 73]), Err(PushError::TooLarge { len: 1073, max: 1072 }));
        assert!(matches!(Error::from(PushError::TooLarge { len: 1, max: 0 }), Error::TooLarge { len: 1, max: 0 }));
    }

    #[test]
    fn skip_marker_wraparound() {
        let (mut tx, mut rx) = channel(4096); // 64 cells
                                              // 60 one-cell records, consumed: position 60.
        for i in 0..60u32 {
            tx.try_push(&i.to_le_bytes(), &[]).unwrap();
            assert_eq!(recv(&mut rx).unwrap(), i.to_le_bytes());
        }
        // A 10-cell record does not fit in the last 4 cells: skip marker + record at cell 0.
        let body: Vec<u8> = (0..600u32).map(|i| i as u8).collect();
        assert_eq!(record_footprint(600), 640);
        tx.try_push(b"wrap", &body).unwrap();
        assert_eq!(tx.free_bytes(), 4096 - (4 + 10) * 64);
        let r = recv(&mut rx).unwrap();
        assert_eq!(&r[..4], b"wrap");
        assert_eq!(&r[4..], &body[..]);
        assert_eq!(tx.free_bytes(), 4096);
        // Skip needs room too: fill so that only the tail of the lap is free.
        tx.try_push(&[7], &[]).unwrap();
        assert_eq!(recv(&mut rx).unwrap(), [7]);
    }

    #[test]
    fn skip_needs_room_for_marker_and_record() {
        let (mut tx, mut rx) = channel(4096); // 64 cells
        for i in 0..60u8 {
            tx.try_push(&[i; 48], &[]).unwrap();
        }
        for _ in 0..10 {
            recv(&mut rx).unwrap();
        }
        // Position 60, head 10: 14 free cells, 4 at the end and 10 at the start.
        assert_eq!(tx.free_bytes(), 14 * 64);
        // 11 cells: 4 (skip) + 11 > 14.
        assert_eq!(tx.try_push(&[9; 680], &[]), Err(PushError::Full));
        // 10 cells: 4 (skip) + 10 == 14.
        tx.try_push(&[9; 600], &[]).unwrap();
        assert_eq!(tx.free_bytes(), 0);
        for i in 10..60u8 {
            assert_eq!(recv(&mut rx).unwrap(), vec![i; 48]);
        }
        assert_eq!(recv(&mut rx).unwrap(), vec![9; 600]);
        assert!(rx.peek().is_none());
        assert_eq!(tx.free_bytes(), 4096);
    }

    #[test]
    fn stale_continuation_word_is_not_a_stamp() {
        let (mut tx, mut rx) = channel(4096); // 64 cells
                                              // Record at cells 0-1 whose continuation word (cell 1) reads as the stamp
                                              // position 65 would carry on the next lap.
        let mut rec = vec![0u8; 100];
        rec[48..56].copy_from_slice(&66u64.to_le_bytes());
        tx.try_push(&rec, &[]).unwrap();
        assert_eq!(recv(&mut rx).unwrap(), rec);
        for _ in 2..64 {
            tx.try_push(&[1], &[]).unwrap();
            recv(&mut rx).unwrap();
        }
        tx.try_push(&[2], &[]).unwrap(); // position 64 = cell 0
        assert_eq!(recv(&mut rx).unwrap(), [2]);
        assert!(rx.peek().is_none(), "continuation data taken for a record");
    }

    /// As above on a ring of 1024 cells, with the forged word in a cell of the second
    /// 64-cell word of the producer's bitmap, after a record that spans the boundary.
    #[test]
    fn stale_continuation_word_past_a_bitmap_word_is_not_a_stamp() {
        const N: usize = 1024;
        let (mut tx, mut rx) = channel((N * CELL) as u32);
        let mut rec = vec![0u8; 70 * CELL - RECORD_OFFSET]; // cells 0..70
        let forged = N + 66; // the stamp of position N + 65 (cell 65)
        let at = 65 * CELL - RECORD_OFFSET;
        rec[at..at + 8].copy_from_slice(&(forged as u64).to_le_bytes());
        tx.try_push(&rec, &[]).unwrap();
        assert_eq!(recv(&mut rx).unwrap(), rec);
        for _ in 70..N + 65 {
            tx.try_push(&[1], &[]).unwrap();
            assert_eq!(recv(&mut rx).unwrap(), [1]);
        }
        assert!(rx.peek().is_none(), "continuation data taken for a record");
        tx.try_push(&[2], &[]).unwrap(); // position N + 65 = cell 65
        assert_eq!(recv(&mut rx).unwrap(), [2]);
    }

    /// A producer attached to a ring with records not yet consumed never scrubs a live
    /// record's stamp, even when it fills the ring up to that record.
    #[test]
    fn a_reattached_producer_keeps_the_live_records() {
        let (mut tx, mut rx) = channel(4096); // 64 cells
        tx.try_push(&[7; 100], &[]).unwrap(); // cells 0..2, not consumed
        let (base, owner) = (tx.raw.ctl as *mut u8, tx.raw._owner.clone());
        drop(tx);
        // SAFETY: test-only re-attach to a live heap ring; the first producer is gone.
        let mut tx = unsafe { RingTx::from_raw(base, 4096, owner, None) }.unwrap();
        for i in 2..64u8 {
            tx.try_push(&[i], &[]).unwrap(); // the last one ends at cell 0 (position 64)
        }
        assert_eq!(tx.try_push(&[0], &[]), Err(PushError::Full));
        assert_eq!(recv(&mut rx).unwrap(), vec![7; 100], "the live record's stamp was scrubbed");
        for i in 2..64u8 {
            assert_eq!(recv(&mut rx).unwrap(), [i]);
        }
        assert!(rx.peek().is_none());
    }

    #[test]
    fn corrupted_length_is_an_error() {
        let (mut tx, mut rx) = channel(4096);
        tx.try_push(b"ok", &[]).unwrap();
        // Corrupt the length of the published record directly.
        tx.raw.len(0).store(5000, Ordering::Relaxed);
        assert!(matches!(rx.peek(), Some(Err(Error::BadSegment("record length")))));
        // Length fits max_record but runs past the end of the ring.
        tx.raw.len(0).store(1000, Ordering::Relaxed);
        tx.raw.stamp(60).store(61, Ordering::Relaxed);
        tx.raw.len(60).store(300, Ordering::Relaxed);
        assert!(rx.peek().unwrap().is_ok());
        rx.pop();
        rx.pos = 60;
        assert!(matches!(rx.peek(), Some(Err(Error::BadSegment("record length")))));
        // A skip marker at cell 0 is corrupt too.
        rx.pos = 64;
        tx.raw.stamp(0).store(65, Ordering::Relaxed);
        tx.raw.len(0).store(SKIP, Ordering::Relaxed);
        assert!(matches!(rx.peek(), Some(Err(Error::BadSegment(_)))));
    }

    #[test]
    fn corrupted_head_is_detected() {
        let (mut tx, _rx) = channel(4096);
        for _ in 0..64 {
            tx.try_push(&[0; 48], &[]).unwrap();
        }
        tx.raw.ctl().cons.head.store(1 << 40, Ordering::Relaxed);
        assert_eq!(tx.try_push(&[], &[]), Err(PushError::Corrupt));
        let raw_base = tx.raw.ctl as *mut u8;
        let owner = tx.raw._owner.clone();
        // SAFETY: test-only re-attach to a live heap ring (the original Rx is unused).
        let r = unsafe { RingRx::from_raw(raw_base, 4096, owner, None) };
        assert!(matches!(r, Err(Error::BadSegment("ring cursors"))));
    }

    #[test]
    #[should_panic(expected = "must be a power of two")]
    fn channel_rejects_bad_size() {
        let _ = channel(5000);
    }
}
