//! What the engine keeps of collectives without depending on the collective algorithms
//! (`crate::coll` uses the engine, not the other way round): the node's shared-memory
//! collective area as this process sees it ([`ShmColl`]: per-slot sequences and states
//! the engine updates under its lock), the shared-memory path of one communicator
//! ([`ShmPath`]), and what a collective knows of its communicator when it begins
//! ([`CollView`], handed out by [`crate::engine::Engine::coll_begin`]).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use runthrough_shm::collarea::{CollArea, COLL_SLOTS};

use crate::types::{ContextId, Rank, Tag};

/// What a collective needs to know of its communicator, fixed when it begins.
#[derive(Debug, Clone)]
pub struct CollView {
    /// The communicator's collective context.
    pub ctx: ContextId,
    /// The tag of this collective's messages.
    pub tag: Tag,
    /// Live members (local ranks, ascending): the participants.
    pub alive: std::sync::Arc<[u32]>,
    /// The shared-memory path, if the communicator has one ([`ShmColl`]).
    pub shm: Option<ShmPath>,
    /// Polls a wait spins before it yields.
    pub spin: u32,
    /// Ranks outnumber cores: shared-memory barriers are centralised.
    pub central: bool,
}

/// This process's view of the node's collective area.
#[derive(Debug)]
pub struct ShmColl {
    pub(crate) area: CollArea,
    pub(crate) me: u32,
    /// Per world rank: whether it shares the segment.
    pub(crate) local: Vec<bool>,
    /// Bumped whenever this process learns of a peer's failure.
    pub(crate) fail_gen: AtomicU64,
    /// Per slot: the sequence of this process's last collective (process-local; only
    /// the thread running the communicator's collectives touches it).
    pub(crate) last: Box<[AtomicU64]>,
    /// Per slot: the last agreement instance (process-local).
    pub(crate) agreements: Box<[AtomicU64]>,
    /// Per slot: this member's last collective through its bulk buffer (process-local).
    pub(crate) bulk_last: Box<[AtomicU64]>,
    /// Per slot: a sequence every other participant was seen to have entered (so step
    /// 2 usually reads no remote word).
    pub(crate) known: Box<[AtomicU64]>,
    /// Per slot: [`ACTIVE`] and [`PRISTINE`] bits, kept by the engine under its lock, so
    /// a collective can start without it (`Coll::begin_shm` in `crate::coll`).
    pub(crate) state: Box<[AtomicU32]>,
    /// Engine tunables, copied at enable: polls before a wait yields, ranks outnumber
    /// cores, eager chunk.
    pub(crate) spin: u32,
    pub(crate) central: bool,
    pub(crate) chunk: usize,
    /// Process ids by world rank when every rank of the node can read every other's
    /// memory by CMA (probed at start-up, the same answer everywhere): long
    /// contributions are then pulled in place ([`ShmColl::with_cma`]).
    pub(crate) pids: Option<Box<[i32]>>,
    /// Contributions of at least this many bytes (and more than [`runthrough_shm::collarea::COLL_DATA`]) are
    /// pulled by CMA.
    pub(crate) cma_min: usize,
}

/// Slot state: the communicator is collectively active.
const ACTIVE: u32 = 1;
/// Slot state: no member is recognised failed (every member participates).
const PRISTINE: u32 = 2;

impl ShmColl {
    /// The collective area `area` as seen by world rank `me`; `local[r]` says whether
    /// world rank `r` shares the segment.
    pub fn new(area: CollArea, me: Rank, local: Vec<bool>) -> Self {
        ShmColl {
            area,
            me: me.0,
            local,
            fail_gen: AtomicU64::new(0),
            last: (0..COLL_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            known: (0..COLL_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            agreements: (0..COLL_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            bulk_last: (0..COLL_SLOTS).map(|_| AtomicU64::new(0)).collect(),
            state: (0..COLL_SLOTS).map(|_| AtomicU32::new(0)).collect(),
            spin: 0,
            central: false,
            chunk: 1,
            pids: None,
            cma_min: usize::MAX,
        }
    }

    /// Lets collectives pull contributions of at least `min` bytes (and more than
    /// [`runthrough_shm::collarea::COLL_DATA`]) straight from their owners' memory with CMA; `pids` are the
    /// process ids by world rank. Every rank of the node must make the same call (same
    /// `min`, CMA known to work between every pair), or none.
    pub fn with_cma(mut self, pids: Vec<i32>, min: usize) -> Self {
        self.pids = Some(pids.into());
        self.cma_min = min;
        self
    }

    /// Sets the engine tunables the lock-free start needs.
    pub(crate) fn tune(&mut self, spin: u32, central: bool, chunk: usize) {
        (self.spin, self.central, self.chunk) = (spin, central, chunk);
    }

    /// Records the collective state of the communicator in `slot` (engine lock held).
    pub(crate) fn set_state(&self, slot: usize, active: bool, pristine: bool) {
        let s = if active { ACTIVE } else { 0 } | if pristine { PRISTINE } else { 0 };
        self.state[slot].store(s, Ordering::Release);
    }

    /// Whether a collective on `slot` may start without the engine lock.
    #[inline]
    pub(crate) fn fast(&self, slot: usize) -> bool {
        self.state[slot].load(Ordering::Acquire) == ACTIVE | PRISTINE
    }

    /// The slot of the communicator of `ctx` with members `group`, if it can use
    /// shared-memory collectives: every member shares the segment and the context index
    /// is below [`COLL_SLOTS`]. Contexts are never reused by a process, so a slot
    /// belongs to one communicator for the life of the job.
    pub(crate) fn slot_for(&self, ctx: ContextId, group: &[Rank]) -> Option<usize> {
        let index = ctx.index() as usize;
        let local = |r: &Rank| r.0 < self.area.nranks() && self.local.get(r.0 as usize).copied().unwrap_or(false);
        (index < COLL_SLOTS && group.iter().all(local)).then_some(index)
    }

    /// Records a failure (waiting members re-check their communicators).
    pub(crate) fn note_failure(&self) {
        self.fail_gen.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn fail_gen(&self) -> u64 {
        self.fail_gen.load(Ordering::Acquire)
    }

    /// Starts validate epoch `epoch` on `slot`: this member's entered word becomes
    /// `epoch << 32`.
    pub(crate) fn new_epoch(&self, slot: usize, epoch: u32) {
        let s = u64::from(epoch) << 32;
        self.last[slot].store(s, Ordering::Relaxed);
        self.known[slot].store(0, Ordering::Relaxed);
        self.area.entered(self.me, slot).store(s, Ordering::Release);
    }
}

/// The shared-memory path of a communicator, as [`crate::engine::Engine::coll_begin`]
/// hands it out: its slot and the failure generation when the collective began.
#[derive(Debug, Clone, Copy)]
pub struct ShmPath {
    pub(crate) slot: usize,
    pub(crate) gen: u64,
}
