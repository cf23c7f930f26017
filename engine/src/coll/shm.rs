//! Shared-memory collectives: barrier, broadcast, reduce, allreduce, allgather and
//! alltoall of at most [`COLL_DATA`] bytes per member, on communicators whose members
//! all share this node's segment (and whose context index has a slot in its
//! [`CollArea`]). One hop instead of ⌈log2 n⌉ message rounds, and no matching: each
//! member writes its contribution into its own slot and stores its *sequence word*;
//! the others wait for that word and read the data in place (the "release/gather" and
//! flag-based designs of MPICH's POSIX collectives and Open MPI's `coll/sm`).
//!
//! # Protocol
//!
//! Each communicator with a slot numbers its shared-memory collectives: the `k`-th in
//! validate epoch `e` has sequence `s = e << 32 | k` (k ≥ 1); a validate's commit sets
//! the member's entered word to `e << 32` ([`ShmColl::new_epoch`]). Words only grow.
//! Collective `s` uses buffer `b = s % COLL_BUFS` (ready line `b`, with the data inline
//! when it fits `COLL_INLINE` bytes, else data buffer `b`). In collective `s` a member
//! 1. stores `s` in its entered word: it has finished every earlier collective;
//! 2. if it has data, waits until every other participant entered collective
//!    `s − COLL_BUFS + 1`: they have then finished reading its data of
//!    `s − COLL_BUFS`, which lies in the same buffer, so it may be rewritten (every
//!    participant, not only the readers of `s`: in an allreduce everyone reads). A
//!    member remembers the lowest entered word it saw, so it reads remote entered
//!    words only every few collectives;
//! 3. writes its data into buffer `b` and stores `s` in ready word `b` (`Release`);
//! 4. waits for the ready words `b` of the members whose data it needs to reach `s`
//!    and copies their data (`Acquire`).
//!
//! # Long contributions (pulled in place)
//!
//! Broadcasts of more than [`COLL_DATA`] bytes (at least the
//! `cma_min` of [`ShmColl::with_cma`]) do not copy data through the slots: a member
//! *exposes* its buffer — address, length, `live = s` and a reader count of 0 in the
//! line words of buffer `b` ([`CollArea::line_word`]) — stores its ready word, and the
//! readers copy straight from its memory with CMA (`process_vm_readv`, one copy), then
//! add one to its reader count. The owner returns once every reader counted itself.
//! Measured at 8 ranks on 2 cores, a 1 MiB broadcast this way costs one hop instead of
//! a tree of ring transfers (137 against 200 µs for Open MPI). When ranks outnumber
//! cores, other long collectives stay on messages, where a CMA copy (≈ 10 GB/s on the
//! AMD host of that measure: page pinning) lost to two cache-hot copies: pulled in
//! place, an 8-rank allgather at 64 KiB took 245 µs instead of 87, and reduce and
//! alltoall at 1 MiB were slower too. When every member has a core, long allgathers and
//! alltoalls are pulled in place the same way, every member exposing its send buffer
//! ([`Coll::pulled_exchange`]): each member then both sends and receives, so the bulk
//! buffers' two copies a byte (below) are two for each core, where one suffices. So are
//! alltoalls when ranks outnumber cores, from [`OVERSUBSCRIBED_PULL_PER_MEMBER`] bytes a
//! block per member: on a later (Intel) host the messages' two copies cost more than
//! waiting for each owner to be scheduled.
//!
//! Run-through: an owner that gives up (its communicator became inactive, or a panic
//! unwound through it) first sets `live = 0`, then lets its caller have the buffer back.
//! A reader, after pulling, checks `live == s` (a fence between, the validation of a
//! sequence lock): if so the owner had not given up when the last byte was copied, so
//! the bytes are its data; if not — or the pull failed because the owner died or
//! unmapped the buffer — the reader waits until this process learns of the failure that
//! made the owner give up (one of the same epoch, so it makes the communicator inactive
//! here too; bounded by failure detection) and fails with it. So no member delivers a
//! buffer that was already handed back, and none waits for a member that gave up.
//! Whether CMA works is probed at start-up between every pair of local ranks, and the
//! path is used only if it works everywhere, so every member takes it or none.
//!
//! # Long reductions (combined in place)
//!
//! Reductions of at least [`BULK_MIN`] bytes on a communicator whose slot has *bulk
//! buffers* (a segment created with `bulk_bytes`, by default when at least two ranks
//! share the node; [`runthrough_shm::collarea`]) are a reduce-scatter in shared memory: every
//! member copies its vector (but its own slice) into its bulk buffer and stores its
//! ready word; member `v` combines slice `v` of every contribution, read in place and in
//! v-rank order, into slice `v` of its own bulk buffer (which nobody else reads before)
//! and stores its `REDUCED` line word; the root, or every member of an allreduce,
//! copies the combined slices out. One copy in, one out, and two waits, where the
//! binomial tree streamed whole vectors through the rings: two copies per hop and, on
//! too few cores, a context switch each time a ring filled (8 ranks on 2 cores, 1 MiB,
//! `bench/compare.sh`: reduce 235–318 µs against Open MPI's 346–586, where the tree
//! took 412–484; allreduce 327–333 against 815–944, where it took about 1200). A member
//! rewrites its buffer only once every participant has entered a later collective of
//! the communicator, so no reader sees it change; the data stays in shared memory, so
//! a member that dies after publishing leaves valid data behind, and one that dies
//! before makes the others' waits fail with the failure (R17). Pulling the slices by
//! CMA instead was slower (660–1140 µs).
//!
//! A reduce of two members is pipelined instead ([`Coll::pair_reduce`]): the non-root
//! writes its vector into its bulk buffer part by part, publishing the bytes written,
//! and the root combines each part in place as soon as it is there, so the copy and the
//! combine overlap on two cores (2 ranks, 1 MiB: 28.6 µs against Open MPI's 30.8, where
//! the reduce-scatter took 39–58). A contribution that is only read (`send` of a
//! reduce or allreduce, [`Coll::reduce_from`]) is written or combined from where it
//! is, without the copy into an accumulator the in-place form needs.
//!
//! # Long broadcasts, allgathers and alltoalls piped through the bulk buffers
//!
//! A broadcast or allgather contribution of at least [`BULK_MIN`] bytes (an alltoall's
//! too, when every member has a core of its own) goes through its owner's bulk buffer
//! part by part ([`Op::write_parts`]): the
//! owner publishes the bytes written in its `FILLED` word after each part and returns;
//! readers copy each part out as soon as it is published ([`Op::copy_parts`]), so the
//! two copies run at once on two cores without the rings' per-record protocol (2 ranks,
//! 1 MiB: bcast 19.3–19.6 µs against 28–32 through the rings, allgather 58–59 against
//! 69–78, alltoall 61 against 72–75). A reader whose writer dies waits for the failure
//! and returns it; the writer rewrites its buffer only once every member entered a later
//! collective, as above. When ranks outnumber cores this beat the CMA pull as well
//! (4 ranks on 2 cores, 1 MiB bcast 17.7–20.4 µs against 105–108, allgather 175–247
//! against 353–422; 8 ranks: 30–33 against 124–128 and 1358–1371 against 2622–2639),
//! which is left for communicators without bulk buffers; long alltoalls of
//! oversubscribed members are pulled in place (above) or go by messages (piped: 463–578
//! µs against 440–445 at 4 ranks, 1 MiB).
//!
//! Which members a step waits for depends on the operation: everyone in barrier,
//! allreduce, allgather and alltoall; the root in a broadcast (non-root side) and the
//! non-roots in a reduce (root side). Reductions combine in v-rank order from the
//! shared buffers, so every member computes the same expression and floating-point
//! results agree bitwise.
//!
//! Whether an operation takes this path depends only on the communicator (slot),
//! the operation and its size, which are the same at every member, so either all
//! members take it or none.
//!
//! # Run-through
//!
//! Waits give up when the communicator stops being collectively active, that is when
//! a member that the last validate did not recognise fails (R17, R18): every failure
//! this process learns of bumps [`ShmColl`]'s failure generation, and a waiting member
//! that sees it change checks its communicator under the engine lock. Members
//! recognised failed are not participants (R20): nobody waits for their words. A
//! collective aborted by a failure leaves the members' counters apart; the validate
//! that must follow starts a new epoch at every member, and a member enters it only
//! after its collectives of the old one returned — the "cut" a validate makes (R19).

use std::sync::atomic::{fence, AtomicU64, Ordering};

use crate::lock::BiasedMutex;
use runthrough_ft::reg_agree::{self, Outcome, Proposal, Registers};
use runthrough_ft::Decision;
use runthrough_shm::collarea::{CollArea, BULK_SLOTS, COLL_BUFS, COLL_DATA, COLL_VOTE_DATA};
use runthrough_shm::{cma, Error as ShmError};

use super::{with_scratch, Coll, Combine};
use crate::coll_state::ShmColl;
use crate::engine::Engine;
use crate::error::Error;
use crate::handle::Waiter;
use crate::types::{ContextId, Rank};

/// Polls of a waiting collective between two progress calls of the engine while it
/// spins (once it yields the CPU at every poll, it progresses at every poll): a process
/// blocked in a collective still applies the one-sided operations that target it, and
/// reads its messages.
const PROGRESS_EVERY: u32 = 64;

/// The shared-memory path of one collective in progress.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShmRef<'a> {
    pub(crate) coll: &'a ShmColl,
    pub(crate) slot: usize,
    pub(crate) gen: u64,
}

/// One collective on the shared-memory path.
struct Op<'c, 'a> {
    c: &'c Coll<'a>,
    sh: ShmRef<'a>,
    s: u64,
    /// Bytes each member contributes (where the data lives: inline or buffer).
    total: usize,
    waiter: Waiter,
    /// Long path: this member's contribution is exposed for pulling (withdrawn on drop,
    /// so a member that gives up — by error or panic — never leaves it readable).
    exposed: bool,
}

/// Line words describing an exposed long contribution (see [`CollArea::line_word`]):
/// its address in the owner's memory, its length, the collective it belongs to while
/// it may be read (0 once withdrawn), and the number of readers done with it.
const ADDR: usize = 1;
const LEN: usize = 2;
const LIVE: usize = 3;
const DONE: usize = 4;
/// Line word of a long reduction: the collective whose combined slice the member's bulk
/// buffer holds (see [`Coll::bulk_reduce`]; reset before the ready word, since the line
/// may hold an earlier collective's inline data).
const REDUCED: usize = 5;
/// Reductions of at least this many bytes go through the bulk buffers, when the
/// communicator has them.
const BULK_MIN: usize = 16 * 1024;
/// Alltoalls whose whole contribution (a block for every member) is at most this many
/// bytes, and more than [`COLL_DATA`], go through the bulk buffers in one piece also when
/// ranks outnumber cores: one write and one read for each member against 2(n - 1)
/// messages, each of which wants its receiver scheduled. 8 ranks on 2 cores, 4 alternated
/// runs of `osu_alltoall` (bench/history/NOTEBOOK.md §0.17): 1 KiB 11.1–20.6 against 21.1–24.7 µs,
/// 4 KiB 16.5–44.4 against 23.3–34.5, 8 KiB 22.6–62.3 against 30.7–60.0 (the first run of
/// each the high one); 4 ranks within the ranges from 4 to 16 KiB, below them from 256 B to
/// 2 KiB. Longer ones keep the messages (1 MiB at 4 ranks: 440–445 µs through messages
/// against 463–578 piped).
const SHORT_ALLTOALL_MAX: usize = 64 * 1024;
/// When ranks outnumber cores, an alltoall block of at least this many bytes per member
/// (64 KiB at 4 members, 128 KiB at 8) is pulled in place ([`Coll::pulled_exchange`]),
/// one CMA copy a byte, instead of going through messages: chunked eager records, a copy
/// into the ring and one out, which on an Intel host took 73 % of both cores' samples in a
/// 4-rank 1 MiB alltoall against 38 % (CMA plus its own block) for MPICH
/// (bench/history/NOTEBOOK.md §0.18). 3 alternated runs of `osu_alltoall` on 2 cores there,
/// messages against pulled: 4 ranks 64 KiB 68–75 against 29–50 µs, 256 KiB 256–334
/// against 243–259, 1 MiB 1219–1258 against 842–1196; 8 ranks 128 KiB 529–625 against
/// 457–721, 256 KiB 1211–1314 against 938–998, 1 MiB 6682–7275 against 5291–5967. Below
/// the bound the pulls lose: every one waits for its owner to be scheduled (8 ranks 64 KiB
/// 244–287 against 277–347; 4 ranks 32 KiB within each other's range). On the AMD host
/// of §0.17 the pulls were level with the messages at 4 ranks, 512 KiB and 1 MiB.
const OVERSUBSCRIBED_PULL_PER_MEMBER: usize = 16 * 1024;
/// Line word of a two-member long reduce: bytes of this collective's vector the member
/// has written into its bulk buffer so far (see [`Coll::pair_reduce`]; reset before the
/// ready word).
const FILLED: usize = 6;
/// A two-member long reduce moves its vector in about this many parts, each between
/// [`PAIR_PART_MIN`] and [`PAIR_PART_MAX`] bytes.
const PAIR_PARTS: usize = 8;
const PAIR_PART_MIN: usize = 8 * 1024;
/// The largest part of a two-member reduce and of the piped copies
/// ([`Op::write_parts`], [`Op::copy_parts`]).
const PAIR_PART_MAX: usize = 64 * 1024;

/// Root line words of a piped broadcast written through a ring ([`RING_BYTES`]): reader
/// `i` (the `i`-th member other than the root, in v-rank order) stores there the bytes of
/// the piece it has copied out, and the root reuses ring space only once every reader is
/// past it. `FILLED` (6) is the root's own; the others are free in a piped broadcast
/// (no inline data: its pieces are longer than a line's). Larger groups write linearly.
const TAKEN: [usize; 6] = [1, 2, 3, 4, 5, 7];
/// The window of the root's bulk buffer a long piece goes through (four 64 KiB parts):
/// a piece written linearly, 1 MiB of bulk buffer beside the 1 MiB being broadcast, left
/// a core's 1 MiB L2 on this project's host, and a 2-rank 1 MiB broadcast took 48 µs
/// against 25–31 µs in 128 KiB pieces (bench/history/NOTEBOOK.md §0.14).
const RING_BYTES: usize = 256 * 1024;
/// Pieces from this long go through the ring, when every member has a core (when ranks
/// outnumber cores the root would wait for readers that are not running).
const RING_MIN: usize = 2 * RING_BYTES;

/// The part of a piped copy or two-member reduce of `len` bytes: about [`PAIR_PARTS`]
/// parts between [`PAIR_PART_MIN`] and [`PAIR_PART_MAX`] bytes, so a reader copies (or
/// combines) one while the writer writes the next — also for a 64 KiB broadcast, which
/// one 64 KiB part would leave unpipelined (2 ranks, 64 KiB bcast: MPICH 7.5 µs against
/// 9.1 with one part; bench/history/NOTEBOOK.md §0.11).
fn pipe_part(len: usize) -> usize {
    (len / PAIR_PARTS).clamp(PAIR_PART_MIN, PAIR_PART_MAX)
}
/// Line word of a barrier's first member once it has left (a barrier carries no data,
/// so its line is free; see [`Coll::shm_barrier`]).
const LEFT: usize = 1;
/// Members up to which everyone watches everyone in a barrier when ranks outnumber
/// cores (a waiter reads at most three words); beyond, the barrier gathers and releases.
const WATCH_ALL_MAX: usize = 4;

impl<'a> Coll<'a> {
    /// Begins the shared-memory path of a collective in which each contributing member
    /// writes `total` bytes (step 1), when this communicator has one and they fit.
    fn shm_op(&self, total: usize) -> Option<Op<'_, 'a>> {
        let sh = self.shm.filter(|_| total <= COLL_DATA)?;
        Some(self.enter(sh, total))
    }

    /// Begins the long path of a collective in which each contributing member exposes
    /// `total` bytes to be pulled by CMA, when this communicator has a slot, CMA works on
    /// this node, ranks outnumber cores (otherwise a hop through the rings pipelines its
    /// two copies over the cores and wins: 2 ranks, 1 MiB: 30–80 against 79 µs) and
    /// `total` is long enough (the same answer at every member).
    fn shm_long(&self, total: usize) -> Option<Op<'_, 'a>> {
        let long = |sh: &ShmRef<'_>| total > COLL_DATA && total >= sh.coll.cma_min && sh.coll.pids.is_some();
        let sh = self.shm.filter(|sh| self.central && long(sh))?;
        Some(self.enter(sh, total))
    }

    /// Step 1: numbers the collective and stores it in this member's entered word.
    fn enter(&self, sh: ShmRef<'a>, total: usize) -> Op<'_, 'a> {
        let last = &sh.coll.last[sh.slot];
        let s = last.load(Ordering::Relaxed) + 1;
        last.store(s, Ordering::Relaxed);
        sh.coll.area.entered(sh.coll.me, sh.slot).store(s, Ordering::Release);
        // A shared-memory poll is one load: when ranks outnumber cores, yield at once
        // (spinning only delays the member being waited for).
        let spin = if self.central { 0 } else { self.spin };
        Op { c: self, sh, s, total, waiter: Waiter::new(spin), exposed: false }
    }

    /// Barrier over shared memory (`None`: no shared-memory path).
    ///
    /// Everyone watches everyone's word (one step), except when ranks outnumber cores
    /// and the communicator has more than [`WATCH_ALL_MAX`] members: then the others
    /// arrive at v-rank 0, which releases them (two steps, but each waiter watches one
    /// word). Oversubscribed, a member that leaves before v-rank 0 has yields once first:
    /// the core may be v-rank 0's, and a broadcast from it that follows then finds its
    /// data published instead of waiting two context switches for it (4 ranks on 2
    /// cores, interleaved: barrier 3.1–4.9 µs against 3.2–5.6 gathering, broadcast
    /// 0.07–0.39 µs against 0.84–1.71 without the yield).
    pub(super) fn shm_barrier(&self) -> Option<Result<(), Error>> {
        let mut op = self.shm_op(0)?;
        if self.central && self.n() > WATCH_ALL_MAX {
            return Some(if self.me == 0 {
                op.wait_all_ready().map(|()| op.ready())
            } else {
                op.ready();
                op.wait_ready(0)
            });
        }
        op.ready();
        if let Err(e) = op.wait_all_ready() {
            return Some(Err(e));
        }
        if self.central {
            // Every member has entered collective `s`, so none still reads this line
            // for collective `s - COLL_BUFS`; a stale value read here only skips a yield.
            if self.me == 0 {
                op.line(op.sh.coll.me, LEFT).store(op.s, Ordering::Release);
            } else if op.line(op.world(0), LEFT).load(Ordering::Acquire) < op.s {
                std::thread::yield_now();
            }
        }
        Some(Ok(()))
    }

    pub(super) fn shm_bcast(&self, vroot: usize, buf: &mut [u8]) -> Option<Result<(), Error>> {
        if let Some(r) = self.piped_bcast(vroot, buf) {
            return Some(r);
        }
        if let Some(r) = self.long_bcast(vroot, buf) {
            return Some(r);
        }
        let mut op = self.shm_op(buf.len())?;
        Some(if self.me == vroot { op.publish(buf) } else { op.wait_ready(vroot).map(|()| op.read(vroot, 0, buf)) })
    }

    pub(super) fn shm_reduce(
        &self,
        vroot: usize,
        buf: &mut [u8],
        elem: usize,
        f: Combine<'_>,
    ) -> Option<Result<(), Error>> {
        if let Some(r) = self.long_reduce(Some(vroot), buf, elem, f) {
            return Some(r);
        }
        let mut op = self.shm_op(buf.len())?;
        if self.me != vroot {
            return Some(op.publish(buf));
        }
        Some(with_scratch(buf.len(), |tmp| {
            for v in self.others() {
                op.wait_ready(v)?;
                op.read(v, 0, tmp);
                f(buf, tmp);
            }
            op.saw_all();
            Ok(())
        }))
    }

    pub(super) fn shm_allreduce(&self, buf: &mut [u8], elem: usize, f: Combine<'_>) -> Option<Result<(), Error>> {
        if let Some(r) = self.long_reduce(None, buf, elem, f) {
            return Some(r);
        }
        let mut op = self.shm_op(buf.len())?;
        let r = op.publish(buf).and_then(|()| {
            let len = buf.len();
            with_scratch(2 * len, |scratch| {
                let (acc, tmp) = scratch.split_at_mut(len);
                for v in 0..self.n() {
                    op.wait_ready(v)?;
                    if v == 0 {
                        op.read(v, 0, acc);
                    } else {
                        op.read(v, 0, tmp);
                        f(acc, tmp);
                    }
                }
                buf.copy_from_slice(acc);
                op.saw_all();
                Ok(())
            })
        });
        Some(r)
    }

    /// Allgather of `send` into `recv` (whose own block the caller filled).
    pub(super) fn shm_allgather(&self, send: &[u8], recv: &mut [u8]) -> Option<Result<(), Error>> {
        let len = send.len();
        if let Some(r) = self.pulled_exchange(send, len, recv, |_| 0, false) {
            return Some(r);
        }
        if let Some(r) = self.piped_allgather(send, recv) {
            return Some(r);
        }
        let mut op = self.shm_op(send.len())?;
        let len = send.len();
        let r = op.publish(send).and_then(|()| {
            for v in self.others() {
                op.wait_ready(v)?;
                let at = self.local(v) as usize * len;
                op.read(v, 0, &mut recv[at..at + len]);
            }
            op.saw_all();
            Ok(())
        });
        Some(r)
    }

    /// Alltoall of blocks of `len` bytes (the caller copied its own block).
    pub(super) fn shm_alltoall(&self, send: &[u8], recv: &mut [u8], len: usize) -> Option<Result<(), Error>> {
        let mine = self.local(self.me) as usize * len;
        let pull_oversubscribed = len >= OVERSUBSCRIBED_PULL_PER_MEMBER * self.n();
        if let Some(r) = self.pulled_exchange(send, len, recv, |_| mine, pull_oversubscribed) {
            return Some(r);
        }
        if let Some(r) = self.piped_alltoall(send, recv, len) {
            return Some(r);
        }
        let mut op = self.shm_op(send.len())?;
        let mine = self.local(self.me) as usize * len;
        let r = op.publish(send).and_then(|()| {
            for v in self.others() {
                op.wait_ready(v)?;
                let at = self.local(v) as usize * len;
                op.read(v, mine, &mut recv[at..at + len]);
            }
            op.saw_all();
            Ok(())
        });
        Some(r)
    }

    /// Long allgather or alltoall pulled in place, when every member has a core (an alltoall
    /// also when ranks outnumber cores: `oversubscribed_too`): each
    /// member exposes its whole `send` and pulls, from every other member `v`, the
    /// `len` bytes at `from(v)` of `v`'s `send` into `v`'s block of `recv` (the caller
    /// filled its own), then returns once every other member pulled from it. Every byte
    /// moves in one copy, where the bulk buffers take two (one into the writer's bulk
    /// buffer, one out): in these exchanges every member both sends and receives, so
    /// two copies a byte are two copies for each core, not one each pipelined over two
    /// cores as in a broadcast. 2 ranks on this project's Intel host (bench/history/NOTEBOOK.md
    /// §0.16): allgather and alltoall at 64 KiB and 1 MiB, as `osu_bibw` from 64 KiB.
    fn pulled_exchange(
        &self,
        send: &[u8],
        len: usize,
        recv: &mut [u8],
        from: impl Fn(usize) -> usize,
        oversubscribed_too: bool,
    ) -> Option<Result<(), Error>> {
        let long = |sh: &ShmRef<'_>| len > COLL_DATA && len >= sh.coll.cma_min && sh.coll.pids.is_some();
        let sh = self.shm.filter(|sh| (!self.central || oversubscribed_too) && long(sh))?;
        let mut op = self.enter(sh, send.len());
        let readers = self.n() as u64 - 1;
        let r = op.expose(send).and_then(|()| {
            for v in self.others() {
                op.wait_ready(v)?;
                let at = self.local(v) as usize * len;
                op.pull_part(v, from(v), &mut recv[at..at + len])?;
            }
            op.wait_pulled(readers)
        });
        Some(r.map(|()| op.saw_all()))
    }

    /// Long broadcast: every other member pulls the root's buffer (one hop; the root
    /// returns once all have pulled).
    fn long_bcast(&self, vroot: usize, buf: &mut [u8]) -> Option<Result<(), Error>> {
        let mut op = self.shm_long(buf.len())?;
        Some(if self.me == vroot {
            op.expose(buf).and_then(|()| op.wait_pulled(self.n() as u64 - 1)).map(|()| op.saw_all())
        } else {
            op.wait_ready(vroot).and_then(|()| op.pull(vroot, buf))
        })
    }

    /// The bulk buffers of this communicator and the largest piece of a member's
    /// contribution they carry at once, for the piped copies of broadcasts, allgathers
    /// and alltoalls whose contribution (`total` bytes) the slots do not carry: more
    /// than [`COLL_DATA`] bytes when every member has a core, at least [`BULK_MIN`] when
    /// ranks outnumber cores (there only with `oversubscribed_too`: the copies wait for
    /// members that may not be running). The same answer at every member.
    fn piped(&self, total: usize, oversubscribed_too: bool) -> Option<(ShmRef<'a>, usize)> {
        let min = if self.central { BULK_MIN } else { COLL_DATA + 1 };
        self.bulk_piece(total, 1, min).filter(|_| oversubscribed_too || !self.central)
    }

    /// Enters a collective that writes this member's bulk buffer: numbers it and waits
    /// until every participant has entered a collective after this member's previous
    /// one through its bulk buffer (so nobody still reads it).
    fn enter_bulk(&self, sh: ShmRef<'a>, total: usize) -> Result<Op<'_, 'a>, Error> {
        let mut op = self.enter(sh, total);
        let last = &sh.coll.bulk_last[sh.slot];
        op.wait_entered((last.load(Ordering::Relaxed) + 1).max(op.s.saturating_sub(COLL_BUFS as u64 - 1)))?;
        last.store(op.s, Ordering::Relaxed);
        Ok(op)
    }

    /// Long broadcast piped through the root's bulk buffer ([`Coll::piped`]): the root
    /// writes each piece part by part ([`Op::write_parts`]) and returns; the others copy
    /// each part out as soon as it is there ([`Op::copy_parts`]).
    /// A piece of at least [`RING_MIN`] bytes goes through a ring of [`RING_BYTES`] at
    /// the start of the bulk buffer when every member has a core and the readers fit the
    /// root's line ([`TAKEN`]): the root then waits for the readers to be past the part it
    /// overwrites (and fails, like every wait, once a missing one is known failed).
    fn piped_bcast(&self, vroot: usize, buf: &mut [u8]) -> Option<Result<(), Error>> {
        let (sh, piece) = self.piped(buf.len(), true)?;
        let readers = self.n() - 1;
        Some(buf.chunks_mut(piece).try_for_each(|p| {
            let part = pipe_part(p.len());
            let ring = !self.central && p.len() >= RING_MIN && readers <= TAKEN.len();
            let mut op = self.enter_bulk(sh, p.len())?;
            if self.me == vroot {
                return op.write_parts(p, part, ring.then_some((RING_BYTES, readers)));
            }
            op.wait_ready(vroot)?;
            // This member's reader index: its place among the members but the root.
            let seat = ring.then(|| (RING_BYTES, TAKEN[if self.me < vroot { self.me } else { self.me - 1 }]));
            op.copy_parts(vroot, 0, p, part, seat)
        }))
    }

    /// Long allgather piped through every member's bulk buffer: each writes its block,
    /// then copies the others' blocks out as their parts land.
    fn piped_allgather(&self, send: &[u8], recv: &mut [u8]) -> Option<Result<(), Error>> {
        let len = send.len();
        let (sh, piece) = self.piped(len, true)?;
        let mut at = 0;
        Some(send.chunks(piece).try_for_each(|p| {
            // Whole 64 KiB parts: every member writes its own block before it reads, so
            // smaller parts would only add publications (unlike a broadcast's readers).
            let part = PAIR_PART_MAX;
            let mut op = self.enter_bulk(sh, p.len())?;
            op.write_parts(p, part, None)?;
            for v in self.others() {
                let to = self.local(v) as usize * len + at;
                op.wait_ready(v)?;
                op.copy_parts(v, 0, &mut recv[to..to + p.len()], part, None)?;
            }
            op.saw_all();
            at += p.len();
            Ok(())
        }))
    }

    /// Long alltoall piped through every member's bulk buffer, when the blocks for the
    /// others fit in it: each writes them in v-rank order, then copies its block out of
    /// every other's as its parts land. When ranks outnumber cores, only a short one
    /// ([`SHORT_ALLTOALL_MAX`]; longer ones go through messages).
    fn piped_alltoall(&self, send: &[u8], recv: &mut [u8], len: usize) -> Option<Result<(), Error>> {
        let n = self.n();
        let (sh, piece) = if self.central && n * len <= SHORT_ALLTOALL_MAX {
            self.bulk_piece(n * len, 1, COLL_DATA + 1)?
        } else {
            self.piped(n * len, false)?
        };
        if (n - 1) * len > piece {
            return None;
        }
        // As in an allgather, every member writes before it reads: whole 64 KiB parts.
        let part = PAIR_PART_MAX;
        let block = |v: usize| self.local(v) as usize * len;
        // Where the block for `u` sits in `v`'s bulk buffer (its own is not written).
        let slot_of = |v: usize, u: usize| (if u < v { u } else { u - 1 }) * len;
        let r = self.enter_bulk(sh, (n - 1) * len).and_then(|mut op| {
            op.write_blocks(self.others().map(|u| &send[block(u)..block(u) + len]), part, None)?;
            for v in self.others() {
                op.wait_ready(v)?;
                let to = block(v);
                op.copy_parts(v, slot_of(v, self.me), &mut recv[to..to + len], part, None)?;
            }
            op.saw_all();
            Ok(())
        });
        Some(r)
    }

    /// Long reduce to v-rank `vroot`, or allreduce (`None`), of `elem`-byte elements,
    /// through the bulk buffers of this communicator's slot (one hop; `None`: it has
    /// none, or the vector is shorter than [`BULK_MIN`] — the same answer everywhere).
    /// Vectors longer than a bulk buffer go piece by piece, each its own collective.
    fn long_reduce(
        &self,
        vroot: Option<usize>,
        buf: &mut [u8],
        elem: usize,
        f: Combine<'_>,
    ) -> Option<Result<(), Error>> {
        let (sh, piece) = self.bulk_piece(buf.len(), elem, BULK_MIN)?;
        Some(
            buf.chunks_mut(piece)
                .try_for_each(|part| self.bulk_piece_reduce(sh, vroot, Vector::InPlace(part), elem, f)),
        )
    }

    /// [`Coll::long_reduce`] of a contribution that is only read: `send`, with the
    /// result in `recv` at the gatherers (the root, or everyone: `vroot` `None`) and
    /// `recv` `None` elsewhere. Saves the copy of `send` into an accumulator the
    /// in-place form needs. `None` where the bulk buffers do not apply.
    pub(super) fn long_reduce_from(
        &self,
        vroot: Option<usize>,
        send: &[u8],
        recv: Option<&mut [u8]>,
        elem: usize,
        f: Combine<'_>,
    ) -> Option<Result<(), Error>> {
        let (sh, piece) = self.bulk_piece(send.len(), elem, BULK_MIN)?;
        if vroot.is_none_or(|r| r == self.me) != recv.is_some() {
            return Some(Err(Error::InvalidArg("a reduce's receive buffer is for its gatherers only")));
        }
        Some(match recv {
            Some(recv) if recv.len() != send.len() => {
                Err(Error::InvalidArg("send and receive buffers differ in length"))
            }
            Some(recv) => send
                .chunks(piece)
                .zip(recv.chunks_mut(piece))
                .try_for_each(|(s, r)| self.bulk_piece_reduce(sh, vroot, Vector::Into(s, r), elem, f)),
            None => send.chunks(piece).try_for_each(|s| self.bulk_piece_reduce(sh, vroot, Vector::Read(s), elem, f)),
        })
    }

    /// This communicator's bulk buffers and the largest piece of a vector of `len` bytes
    /// (`elem`-byte elements) that goes through them at once, when `len` is at least
    /// `min` (a reduction's: [`BULK_MIN`]; the same answer at every member).
    fn bulk_piece(&self, len: usize, elem: usize, min: usize) -> Option<(ShmRef<'a>, usize)> {
        let sh = self.shm?;
        let piece = sh.coll.area.bulk_bytes() / elem.max(1) * elem;
        let fits = elem > 0 && len.is_multiple_of(elem) && len >= min;
        (sh.slot < BULK_SLOTS && piece > 0 && fits && self.n() >= 2).then_some((sh, piece))
    }

    /// One piece of a long reduction: pipelined between two members of a reduce,
    /// otherwise the reduce-scatter.
    fn bulk_piece_reduce(
        &self,
        sh: ShmRef<'a>,
        vroot: Option<usize>,
        v: Vector<'_>,
        elem: usize,
        f: Combine<'_>,
    ) -> Result<(), Error> {
        match (self.n(), vroot) {
            (2, Some(root)) => self.pair_reduce(sh, root, v, elem, f),
            _ => self.bulk_reduce(sh, vroot, v, elem, f),
        }
    }

    /// One piece of a long reduce of two members, pipelined: the other member writes its
    /// vector into its bulk buffer part by part, storing how many bytes are there in its
    /// `FILLED` line word after each part, and the root combines each part, read in
    /// place, into its own vector as soon as it is there — the copy and the combine run
    /// at once on two cores, where [`Coll::bulk_reduce`] does a copy in, a combine and
    /// a copy out one after the other. The writer does not wait for the root (it
    /// rewrites its buffer only once the root has entered a later collective, as in
    /// `bulk_reduce`); a root whose writer dies waits for the failure and returns it.
    fn pair_reduce(
        &self,
        sh: ShmRef<'a>,
        vroot: usize,
        v: Vector<'_>,
        elem: usize,
        f: Combine<'_>,
    ) -> Result<(), Error> {
        let (area, slot) = (&sh.coll.area, sh.slot);
        let len = v.src().len();
        let part = (pipe_part(len) / elem * elem).max(elem);
        let mut op = self.enter_bulk(sh, len)?;
        if self.me != vroot {
            return op.write_parts(v.src(), part, None);
        }
        let other = 1 - vroot;
        op.wait_ready(other)?;
        let rank = op.world(other);
        let filled = op.line(rank, FILLED);
        let mut at = 0;
        // Combine in v-rank order, as everywhere: the other's part first when the root
        // is v-rank 1.
        let mut each = |mine: Option<&[u8]>, out: &mut [u8]| {
            op.wait_at_least(filled, (at + out.len()) as u64)?;
            let x = area.bulk(rank, slot, at, out.len());
            at += out.len();
            match (vroot, mine) {
                (0, None) => f(out, x),
                (0, Some(m)) => {
                    out.copy_from_slice(m);
                    f(out, x);
                }
                (_, Some(m)) => {
                    out.copy_from_slice(x);
                    f(out, m);
                }
                (_, None) => with_scratch(out.len(), |t| {
                    t.copy_from_slice(x);
                    f(t, out);
                    out.copy_from_slice(t);
                }),
            }
            Ok::<(), Error>(())
        };
        match v {
            Vector::InPlace(b) => b.chunks_mut(part).try_for_each(|p| each(None, p))?,
            Vector::Into(s, r) => s.chunks(part).zip(r.chunks_mut(part)).try_for_each(|(m, p)| each(Some(m), p))?,
            Vector::Read(_) => unreachable!("the root of a reduce has a receive buffer"),
        }
        op.saw_all();
        Ok(())
    }

    /// One piece of [`Coll::long_reduce`]: every member writes its contribution but its
    /// own slice into its bulk buffer; member `v` combines slice `v` of all of them in
    /// v-rank order, reading them in place, into slice `v` of its own bulk buffer (which
    /// nobody else reads before); then the root — or, in an allreduce, everyone — copies
    /// the combined slices out (see the module doc, "Long reductions"). Every member
    /// computes the same expression, so floating-point results agree bitwise. A member
    /// writes its buffer again only once everyone has entered a later collective, that
    /// is, is done reading it.
    fn bulk_reduce(
        &self,
        sh: ShmRef<'a>,
        vroot: Option<usize>,
        mut v: Vector<'_>,
        elem: usize,
        f: Combine<'_>,
    ) -> Result<(), Error> {
        let n = self.n();
        let len = v.src().len();
        let elems = len / elem;
        let seg = |i: usize| i * elems / n * elem..(i + 1) * elems / n * elem;
        let (area, slot, me) = (&sh.coll.area, sh.slot, sh.coll.me);
        let gatherer = vroot.is_none_or(|r| r == self.me);
        let mut op = self.enter_bulk(sh, len)?;
        let mine = seg(self.me);
        // Only the others' slices: this member combines its own slice from its vector.
        area.bulk_write(me, slot, 0, &v.src()[..mine.start]);
        area.bulk_write(me, slot, mine.end, &v.src()[mine.end..]);
        op.line(me, REDUCED).store(0, Ordering::Relaxed);
        op.ready();
        // Slice `me` of this member's bulk buffer is the accumulator: the gatherers copy
        // the result from there.
        area.bulk_update(me, slot, mine.start, mine.len(), |acc| {
            for u in 0..n {
                let x = if u == self.me {
                    &v.src()[mine.clone()]
                } else {
                    op.wait_ready(u)?;
                    area.bulk(op.world(u), slot, mine.start, mine.len())
                };
                if u == 0 {
                    acc.copy_from_slice(x);
                } else {
                    f(acc, x);
                }
            }
            if let Some(out) = v.out().filter(|_| gatherer) {
                out[mine.clone()].copy_from_slice(acc);
            }
            Ok::<(), Error>(())
        })?;
        op.line(me, REDUCED).store(op.s, Ordering::Release);
        if let Some(out) = v.out().filter(|_| gatherer) {
            // Every slice of `out` is written, so `out` needs no copy of the contribution
            // first.
            for u in self.others() {
                let rank = op.world(u);
                op.wait_line(rank, REDUCED)?;
                let at = seg(u);
                out[at.clone()].copy_from_slice(area.bulk(rank, slot, at.start, at.len()));
            }
        }
        op.saw_all();
        Ok(())
    }
}

/// A member's vector in a long reduction: combined in place (the result replaces it),
/// read only (a member that gets no result), or read with the result going elsewhere.
enum Vector<'v> {
    InPlace(&'v mut [u8]),
    Read(&'v [u8]),
    Into(&'v [u8], &'v mut [u8]),
}

impl Vector<'_> {
    /// The contribution.
    fn src(&self) -> &[u8] {
        match self {
            Vector::InPlace(b) => b,
            Vector::Read(b) | Vector::Into(b, _) => b,
        }
    }

    /// Where the result goes, at a gatherer.
    fn out(&mut self) -> Option<&mut [u8]> {
        match self {
            Vector::InPlace(b) | Vector::Into(_, b) => Some(b),
            Vector::Read(_) => None,
        }
    }
}

impl<'a> Op<'_, 'a> {
    fn world(&self, v: usize) -> u32 {
        self.c.group[self.c.local(v) as usize].0
    }

    fn buf(&self) -> usize {
        (self.s % COLL_BUFS as u64) as usize
    }

    /// Piped copies: resets this member's `FILLED` word, stores its ready word, then
    /// writes `data` into its bulk buffer part by part, publishing the bytes written
    /// after each part (Release), so readers copy a part out while the next goes in.
    /// With `ring` (see [`Op::write_blocks`]) it fails when a reader is known failed.
    fn write_parts(&mut self, data: &[u8], part: usize, ring: Option<(usize, usize)>) -> Result<(), Error> {
        self.write_blocks(std::iter::once(data), part, ring)
    }

    /// [`Op::write_parts`] of several blocks, one after the other in the bulk buffer
    /// (parts of at most `part` bytes, none spanning two blocks). With `ring` = `(window,
    /// readers)` they go through the first `window` bytes (a multiple of `part`): byte
    /// `i` at `i % window`, written once each of the `readers` has published (in this
    /// member's [`TAKEN`] words, [`Op::copy_parts`]) that it copied out what was there.
    /// Only that wait can fail: when the communicator becomes inactive meanwhile (a
    /// reader that died), as the readers still running then fail theirs.
    fn write_blocks<'d>(
        &mut self,
        blocks: impl Iterator<Item = &'d [u8]>,
        part: usize,
        ring: Option<(usize, usize)>,
    ) -> Result<(), Error> {
        let (area, slot, me) = (&self.sh.coll.area, self.sh.slot, self.sh.coll.me);
        let (window, readers) = ring.unwrap_or((usize::MAX, 0));
        debug_assert!(ring.is_none() || window.is_multiple_of(part) && readers <= TAKEN.len());
        let filled = self.line(me, FILLED);
        filled.store(0, Ordering::Relaxed);
        // Every participant entered a collective after this member's previous one through
        // its bulk buffer (`enter_bulk`), so no reader still stores an older count here.
        for &w in &TAKEN[..readers] {
            self.line(me, w).store(0, Ordering::Relaxed);
        }
        self.ready();
        let mut at = 0;
        for b in blocks {
            for p in b.chunks(part) {
                if at + p.len() > window {
                    let past = (at + p.len() - window) as u64;
                    for &w in &TAKEN[..readers] {
                        self.wait_at_least(self.line(me, w), past)?;
                    }
                }
                area.bulk_write(me, slot, at % window, p);
                at += p.len();
                filled.store(at as u64, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Piped copies: copies `out.len()` bytes at `at` of v-rank `v`'s bulk buffer (its
    /// ready word seen) into `out`, each part (of `part` bytes, as `v` wrote them) once
    /// `v` has published it; fails when the communicator becomes inactive meanwhile (a
    /// writer that died). With `ring` = `(window, taken)` the writer goes through a
    /// ring ([`Op::write_blocks`]): byte `i` is read at `i % window`, and the bytes
    /// copied out are published after each part in `v`'s line word `taken`.
    fn copy_parts(
        &mut self,
        v: usize,
        at: usize,
        out: &mut [u8],
        part: usize,
        ring: Option<(usize, usize)>,
    ) -> Result<(), Error> {
        let rank = self.world(v);
        let filled = self.line(rank, FILLED);
        let window = ring.map_or(usize::MAX, |(w, _)| w);
        let taken = ring.map(|(_, t)| self.line(rank, t));
        let mut done = 0;
        for p in out.chunks_mut(part) {
            let end = at + done + p.len();
            self.wait_at_least(filled, end as u64)?;
            p.copy_from_slice(self.sh.coll.area.bulk(rank, self.sh.slot, (at + done) % window, p.len()));
            done += p.len();
            if let Some(t) = taken {
                t.store(end as u64, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Stores this member's ready word of the collective.
    fn ready(&self) {
        self.sh.coll.area.ready(self.sh.coll.me, self.sh.slot, self.buf()).store(self.s, Ordering::Release);
    }

    /// Steps 2 and 3: once the buffer is free, writes `data` (`total` bytes) into it and
    /// stores the ready word.
    fn publish(&mut self, data: &[u8]) -> Result<(), Error> {
        debug_assert_eq!(data.len(), self.total);
        self.wait_entered(self.s.saturating_sub(COLL_BUFS as u64 - 1))?;
        if !data.is_empty() {
            self.sh.coll.area.write(self.sh.coll.me, self.sh.slot, self.buf(), self.total, 0, data);
        }
        self.ready();
        Ok(())
    }

    /// Copies `out.len()` bytes at `at` of v-rank `v`'s contribution to this collective.
    fn read(&self, v: usize, at: usize, out: &mut [u8]) {
        self.sh.coll.area.read(self.world(v), self.sh.slot, self.buf(), self.total, at, out);
    }

    /// Waits until `rank`'s ready word of buffer `which` (its entered word for `None`)
    /// reaches `s` ([`Op::wait_at_least`]).
    fn wait_word(&mut self, rank: u32, which: Option<usize>, s: u64) -> Result<u64, Error> {
        let area = &self.sh.coll.area;
        let word = match which {
            Some(b) => area.ready(rank, self.sh.slot, b),
            None => area.entered(rank, self.sh.slot),
        };
        self.wait_at_least(word, s)
    }

    /// Waits until `word` reaches `s`; fails when the communicator stops being
    /// collectively active meanwhile. Returns the value seen.
    fn wait_at_least(&mut self, word: &'a AtomicU64, s: u64) -> Result<u64, Error> {
        let mut polls = 0u32;
        loop {
            let x = word.load(Ordering::Acquire);
            if x >= s {
                // Members' words pass this collective's number also when they completed
                // an error resolution that overtook it (their new epoch's numbers are
                // higher): then it fails here too (R27).
                if self.sh.coll.fail_gen() != self.sh.gen {
                    self.overtaken()?;
                }
                return Ok(x);
            }
            self.check()?;
            polls = polls.wrapping_add(1);
            if polls.is_multiple_of(PROGRESS_EVERY) || self.waiter.yielding() {
                // What arrives meanwhile (one-sided operations this process is the
                // target of, messages) is handled now, not at the progress thread's
                // next tick.
                self.c.eng.lock().progress();
            }
            self.waiter.snooze();
        }
    }

    /// Fails when this process learned of a failure since the last check that made the
    /// communicator collectively inactive.
    fn check(&mut self) -> Result<(), Error> {
        let g = self.sh.coll.fail_gen();
        if g != self.sh.gen {
            self.sh.gen = g;
            self.c.eng.lock().coll_check(self.c.ctx)?;
            self.overtaken()?;
        }
        Ok(())
    }

    /// Fails when an error resolution (R27) overtook this collective (it runs, or it
    /// completed since this collective began: [`Engine::resolution_overtook`]), with the
    /// resolution's list once it completed: this collective was the pending wait.
    fn overtaken(&mut self) -> Result<(), Error> {
        let epoch = (self.s >> 32) as u32;
        if !self.c.eng.lock().resolution_overtook(self.c.ctx, epoch) {
            return Ok(());
        }
        loop {
            {
                let mut e = self.c.eng.lock();
                if let Some(err) = e.overtaken_error(self.c.ctx) {
                    return Err(err);
                }
                e.progress();
            }
            self.waiter.snooze();
        }
    }

    /// Word `i` of `rank`'s line of this collective.
    fn line(&self, rank: u32, i: usize) -> &'a AtomicU64 {
        let coll: &'a ShmColl = self.sh.coll;
        coll.area.line_word(rank, self.sh.slot, self.buf(), i)
    }

    /// Long path, steps 2 and 3: once the line is free, describes `data` in it and
    /// stores the ready word. `data` must stay untouched until [`Op::wait_pulled`]
    /// returns `Ok`; any other way out withdraws it first (drop).
    fn expose(&mut self, data: &[u8]) -> Result<(), Error> {
        debug_assert_eq!(data.len(), self.total);
        self.wait_entered(self.s.saturating_sub(COLL_BUFS as u64 - 1))?;
        let me = self.sh.coll.me;
        self.line(me, ADDR).store(data.as_ptr() as u64, Ordering::Relaxed);
        self.line(me, LEN).store(data.len() as u64, Ordering::Relaxed);
        self.line(me, DONE).store(0, Ordering::Relaxed);
        self.line(me, LIVE).store(self.s, Ordering::Relaxed);
        self.exposed = true;
        self.ready();
        Ok(())
    }

    /// Long path: waits until `readers` others are done with this member's exposed
    /// contribution; fails (and withdraws it) when the communicator becomes inactive.
    fn wait_pulled(&mut self, readers: u64) -> Result<(), Error> {
        self.wait_at_least(self.line(self.sh.coll.me, DONE), readers)?;
        self.exposed = false;
        Ok(())
    }

    /// Long path: withdraws this member's exposed contribution, before its buffer goes
    /// back to the caller on a way out other than [`Op::wait_pulled`].
    fn withdraw(&mut self) {
        if std::mem::take(&mut self.exposed) {
            self.line(self.sh.coll.me, LIVE).store(0, Ordering::SeqCst);
            // Readers' later loads of the buffer are ordered after the store above.
            fence(Ordering::SeqCst);
        }
    }

    /// Long path: waits until line word `i` of `rank` reaches this collective; fails
    /// when the communicator becomes inactive meanwhile.
    fn wait_line(&mut self, rank: u32, i: usize) -> Result<(), Error> {
        self.wait_at_least(self.line(rank, i), self.s).map(drop)
    }

    /// Long path: copies v-rank `v`'s exposed contribution (its ready word seen) into
    /// `out` with CMA, then checks that `v` kept it exposed all along — it withdraws
    /// before its buffer goes back to its caller, so every byte copied before the check
    /// is its data (the validation of a sequence lock) — and counts this reader done.
    fn pull(&mut self, v: usize, out: &mut [u8]) -> Result<(), Error> {
        if out.len() != self.total {
            self.line(self.world(v), DONE).fetch_add(1, Ordering::AcqRel);
            return Err(Error::InvalidArg("collective buffer sizes differ between members"));
        }
        self.pull_part(v, 0, out)
    }

    /// [`Op::pull`] of the `out.len()` bytes at offset `at` of `v`'s exposed
    /// contribution (which must be as long as this member's).
    fn pull_part(&mut self, v: usize, at: usize, out: &mut [u8]) -> Result<(), Error> {
        let rank = self.world(v);
        let addr = self.line(rank, ADDR).load(Ordering::Relaxed);
        let len = self.line(rank, LEN).load(Ordering::Relaxed);
        if len != self.total as u64 || at.checked_add(out.len()).is_none_or(|end| end > self.total) {
            // Count this reader done anyway: an erroneous call must not hang the owner.
            self.line(rank, DONE).fetch_add(1, Ordering::AcqRel);
            return Err(Error::InvalidArg("collective buffer sizes differ between members"));
        }
        let pid = self.sh.coll.pids.as_ref().map_or(0, |p| p[rank as usize]);
        let read = cma::read(pid, addr + at as u64, out);
        fence(Ordering::SeqCst);
        let live = self.line(rank, LIVE).load(Ordering::SeqCst) == self.s;
        if !live || matches!(read, Err(ShmError::PeerGone { .. })) {
            return Err(self.gave_up());
        }
        self.line(rank, DONE).fetch_add(1, Ordering::AcqRel);
        read.map_err(|e| Error::Transport(format!("collective pull from rank {rank}: {e}")))
    }

    /// A member this one pulls from gave up (withdrew its contribution, unmapped it or
    /// died). A member gives up only when a failure made the communicator inactive
    /// there — a failure of the same epoch, so it makes it inactive here too once this
    /// process learns of it: wait for that (bounded by failure detection, R17) and
    /// return the communicator's error.
    fn gave_up(&mut self) -> Error {
        loop {
            // The generation first: a failure noted after the check changes it.
            self.sh.gen = self.sh.coll.fail_gen();
            if let Err(e) = self.c.eng.lock().coll_check(self.c.ctx) {
                return e;
            }
            while self.sh.coll.fail_gen() == self.sh.gen {
                self.waiter.snooze();
            }
        }
    }

    /// Waits until v-rank `v`'s contribution to this collective is ready.
    fn wait_ready(&mut self, v: usize) -> Result<(), Error> {
        let (rank, b, s) = (self.world(v), self.buf(), self.s);
        self.wait_word(rank, Some(b), s).map(drop)
    }

    /// Step 4 for everyone: waits until every other participant's contribution is ready.
    fn wait_all_ready(&mut self) -> Result<(), Error> {
        for v in 0..self.c.n() {
            if v != self.c.me {
                self.wait_ready(v)?;
            }
        }
        self.saw_all();
        Ok(())
    }

    /// Records that every other participant entered this collective.
    fn saw_all(&self) {
        self.sh.coll.known[self.sh.slot].fetch_max(self.s, Ordering::Relaxed);
    }

    /// Step 2: waits until every other participant entered collective `need`, and
    /// remembers the lowest entered word seen.
    fn wait_entered(&mut self, need: u64) -> Result<(), Error> {
        let known = &self.sh.coll.known[self.sh.slot];
        if known.load(Ordering::Relaxed) >= need {
            return Ok(());
        }
        let mut low = u64::MAX;
        for v in 0..self.c.n() {
            if v != self.c.me {
                let rank = self.world(v);
                low = low.min(self.wait_word(rank, None, need)?);
            }
        }
        self.sh.coll.known[self.sh.slot].fetch_max(low.min(self.s), Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Op<'_, '_> {
    fn drop(&mut self) {
        self.withdraw();
    }
}

/// The agreement registers of one communicator: its members' vote lines in its slot.
struct SlotRegisters<'r> {
    area: &'r CollArea,
    slot: usize,
    group: &'r [Rank],
}

impl Registers for SlotRegisters<'_> {
    fn n(&self) -> usize {
        self.group.len()
    }

    fn vote(&self, k: usize) -> &AtomicU64 {
        self.area.vote(self.group[k].0, self.slot)
    }

    fn write(&self, k: usize, parity: usize, p: Proposal) {
        let mut b = [0u8; COLL_VOTE_DATA];
        b[..4].copy_from_slice(&p.flag.to_le_bytes());
        b[8..].copy_from_slice(&p.failed.to_le_bytes());
        self.area.vote_write(self.group[k].0, self.slot, parity, &b);
    }

    fn read(&self, k: usize, parity: usize) -> Proposal {
        let b = self.area.vote_read(self.group[k].0, self.slot, parity);
        let flag = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let mut f = [0u8; 16];
        f.copy_from_slice(&b[8..]);
        Proposal { flag, failed: u128::from_le_bytes(f) }
    }
}

/// The agreement fast path (`ft::reg_agree`) on the communicator of `ctx` (members
/// `group`, this process local rank `me`) contributing `flag`: `None` when the
/// communicator's slot `slot` in `coll` (communicators without one run the message
/// agreement; every member makes the same choice). Each blocking agreement on the
/// communicator (validate, agree) is one instance, numbered by call order.
///
/// Only flag and failures are agreed: the decision's `max` is 0 and its `signals` are
/// empty. It serves only the flag / failure users (validate, agree, uniform creation);
/// `shrink` and `signal_error` must use the message agreement
/// ([`runthrough_ft::Agreement::with_input`]).
///
/// # Errors
/// `RankFailStop` naming this process if the others declared it failed (it was
/// suspected; it must stop).
pub fn shm_agreement(
    eng: &BiasedMutex<Engine>,
    ctx: ContextId,
    group: &[Rank],
    me: u32,
    flag: u32,
    coll: &ShmColl,
    slot: usize,
) -> Result<Decision, Error> {
    let mut gen = coll.fail_gen();
    let mut known = bitmap(&eng.lock().failed_in(ctx));
    let regs = SlotRegisters { area: &coll.area, slot, group };
    let instance = coll.agreements[slot].fetch_add(1, Ordering::Relaxed) + 1;
    let mut waiter = Waiter::new(coll.spin);
    let mine = Proposal { flag, failed: known };
    let failed = |k: usize| {
        let g = coll.fail_gen();
        if g != gen {
            gen = g;
            known = bitmap(&eng.lock().failed_in(ctx));
        }
        known & (1 << k) != 0
    };
    let out = reg_agree::agree(&regs, me as usize, instance, mine, failed, || waiter.snooze());
    match out {
        // The register agreement carries only flag and failures: it serves `validate`,
        // `agree` and uniform creation, never the `max` / `signals` users (`shrink`,
        // `signal_error`), which use the message agreement.
        Outcome::Decided(p) => Ok(Decision {
            flag: p.flag,
            max: 0,
            signals: Vec::new(),
            failed: {
                let mut w: Vec<u32> =
                    (0..group.len()).filter(|k| p.failed & (1 << k) != 0).map(|k| group[k].0).collect();
                w.sort_unstable();
                w
            },
        }),
        Outcome::Excluded => Err(Error::RankFailStop { rank: me }),
    }
}

/// Local ranks as a bitmap (ranks ≥ 128 cannot occur: slots exist only for such groups).
fn bitmap(local: &[u32]) -> u128 {
    local.iter().filter(|&&r| r < 128).fold(0, |m, &r| m | 1 << r)
}
