//! Collective operations over point-to-point messages on a communicator's collective
//! context (docs/REQUIREMENTS.md R17–R21).
//!
//! Run-through rules:
//! - a collective starts only on a collectively active communicator (R18), otherwise it
//!   returns `RankFailStop` at once, without communicating;
//! - it runs over the members not recognised as failed by the last validate (R20):
//!   reductions and scans skip them, their segments of gathered data are left as they
//!   were (undefined), exscan's "first process" is the first such member, and a failed
//!   root is an error;
//! - it never hangs (R17): a member's failure fails every collective receive in progress
//!   on communicators containing it, and collective messages are only eager records
//!   (chunked to the eager limit), so no sender waits for a receiver that gave up (long
//!   broadcasts on one node are pulled in place instead, with the
//!   give-up rule of the "Long contributions" of `coll/shm.rs`);
//! - every message carries a tag made of the validate epoch and the collective's sequence
//!   number, so traffic of an aborted collective never matches a later one (the "cut" a
//!   validate makes, R19).
//!
//! Algorithms (over the v-ranks 0..n of the live members): dissemination barrier
//! (Hensgen, Finkel, Manber); broadcast and reduce flat (one hop) for one eager record on
//! up to 8 members ("few": `RT_COLL_FLAT_MAX`), else binomial trees; allreduce of one
//! eager record by recursive doubling (2 or more than 8 members) or flat reduce +
//! broadcast, reduce + broadcast up to 64 KiB, beyond that a direct reduce-scatter +
//! allgather on 3..=4 members (two rounds), reduce + broadcast on 5..=8, or the ring
//! (2(n − 1) steps); allgather and
//! alltoall by direct exchange with everyone at once on few members or for blocks up
//! to 4 KiB, else ring allgather and pairwise-exchange alltoall; linear gather/scatter;
//! linear-chain scans. On few members the number of rounds matters more than the
//! algorithms' message counts: when ranks outnumber cores, every round a member waits
//! in costs a context switch.

use crate::lock::BiasedMutex;

mod shm;
pub use crate::coll_state::{CollView, ShmColl, ShmPath};
pub use shm::shm_agreement;

use crate::engine::Engine;
use crate::error::Error;
use crate::handle::{irecv_local as irecv, isend_local as isend, Request};
use crate::matching::Pattern;
use crate::rounds::bcast_tree;
use crate::types::{ContextId, Rank, SendTarget, Tag};

thread_local! {
    /// Scratch for incoming vectors of reductions, kept between calls: a fresh
    /// allocation per call costs a page fault per 4 KiB on large vectors.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Runs `f` with a scratch buffer of `len` bytes (contents unspecified).
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    SCRATCH.with(|s| {
        let mut v = s.take();
        if v.len() < len {
            v.resize(len, 0);
        }
        let r = f(&mut v[..len]);
        s.replace(v);
        r
    })
}

/// Up to this many participants (`RT_COLL_FLAT_MAX`, default 8), broadcasts and
/// reduces of one eager record go flat (one hop) instead of down a binomial tree.
fn flat_max() -> usize {
    static FLAT: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FLAT.get_or_init(|| std::env::var("RT_COLL_FLAT_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(8))
}

/// Allgather and alltoall blocks up to this size are exchanged with everyone at once.
const DIRECT_MAX_BLOCK: usize = 4096;

/// Long allreduces on up to this many members (3 or more) use the direct
/// reduce-scatter + allgather; on more, up to [`flat_max`], a binomial reduce + broadcast
/// (measured faster at 8 ranks on 2 cores: its transfers are whole vectors, pulled by
/// single copy, where the direct algorithm's eighths stream through the rings), and
/// beyond that the ring.
const DIRECT_ALLREDUCE_MAX: usize = 4;

/// Long allreduces (at least this many bytes, and at least one element per member)
/// use the ring algorithm.
const RING_ALLREDUCE_MIN_BYTES: usize = 64 * 1024;

pub use crate::rounds::Combine;

const TOO_SHORT: Error = Error::InvalidArg("buffer shorter than its count");

/// Checks that every `(displs[i], counts[i])` of `members` lies within `len` bytes.
fn check_ranges(len: usize, counts: &[usize], displs: &[usize], members: usize) -> Result<(), Error> {
    if counts.len() != members || displs.len() != members {
        return Err(Error::InvalidArg("counts and displacements need one entry per member"));
    }
    if counts.iter().zip(displs).any(|(&c, &d)| d.checked_add(c).is_none_or(|end| end > len)) {
        return Err(Error::InvalidArg("a count and displacement reach past the buffer"));
    }
    Ok(())
}

/// Splits `buf` into the disjoint ranges `displs[i]..displs[i] + counts[i]`, in member
/// order (overlapping ranges are an error: a receive buffer is written once).
fn split_ranges<'b>(buf: &'b mut [u8], counts: &[usize], displs: &[usize]) -> Result<Vec<&'b mut [u8]>, Error> {
    check_ranges(buf.len(), counts, displs, counts.len())?;
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&i| displs[i]);
    let mut pieces: Vec<Option<&'b mut [u8]>> = (0..counts.len()).map(|_| None).collect();
    let mut rest = buf;
    let mut at = 0;
    for i in order {
        if displs[i] < at {
            return Err(Error::InvalidArg("receive ranges overlap"));
        }
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(displs[i] - at);
        let (piece, tail) = tail.split_at_mut(counts[i]);
        pieces[i] = Some(piece);
        rest = tail;
        at = displs[i] + counts[i];
    }
    Ok(pieces.into_iter().map(|p| p.unwrap_or_default()).collect())
}

/// One collective call in progress.
#[derive(Debug)]
pub struct Coll<'a> {
    eng: &'a BiasedMutex<Engine>,
    group: &'a [Rank],
    /// The communicator's collective context.
    ctx: ContextId,
    /// The tag of this collective's messages (unused on the shared-memory path).
    tag: Tag,
    /// The participants (local ranks, ascending); `None`: every member.
    alive: Option<std::sync::Arc<[u32]>>,
    me: usize,
    chunk: usize,
    spin: u32,
    central: bool,
    shm: Option<shm::ShmRef<'a>>,
    /// Begun without the engine lock for a shared-memory collective: no message tag.
    shm_only: bool,
}

impl<'a> Coll<'a> {
    /// Begins a collective on the communicator of `ctx` whose members are `group`
    /// (world ranks by local rank), as local rank `me`.
    ///
    /// # Errors
    /// `RankFailStop` when the communicator is collectively inactive (R18).
    /// `shm` is the node's collective area when the communicator was registered with
    /// shared-memory collectives on ([`Engine::shm_coll`]); the same at every member.
    ///
    /// # Errors
    /// `RankFailStop` when the communicator is collectively inactive (R18).
    pub fn begin(
        eng: &'a BiasedMutex<Engine>,
        ctx: ContextId,
        group: &'a [Rank],
        me: u32,
        shm: Option<&'a ShmColl>,
    ) -> Result<Self, Error> {
        let (view, chunk) = {
            let mut e = eng.lock();
            if e.is_resolving(ctx) {
                drop(e);
                return Err(Self::parked(eng, ctx));
            }
            let view = e.coll_begin(ctx)?;
            (view, e.eager_limit().max(1))
        };
        let me = view.alive.iter().position(|&r| r == me).ok_or(Error::ApiMisuse("collective by a non-member"))?;
        let shm = match (view.shm, shm) {
            (Some(p), Some(coll)) => Some(shm::ShmRef { coll, slot: p.slot, gen: p.gen }),
            _ => None,
        };
        Ok(Coll {
            eng,
            group,
            ctx: view.ctx,
            tag: view.tag,
            alive: Some(view.alive),
            me,
            chunk,
            spin: view.spin,
            central: view.central,
            shm,
            shm_only: false,
        })
    }

    /// A collective begun while an error resolution runs on its communicator (R27) is
    /// parked, as a receive is: it never starts (shared memory's collectives post no
    /// receives to park, and would match the others' collectives after the resolution)
    /// and fails with the resolution's list once it completes.
    #[cold]
    fn parked(eng: &BiasedMutex<Engine>, ctx: ContextId) -> Error {
        let mut waiter = crate::handle::Waiter::new(0);
        loop {
            {
                let mut e = eng.lock();
                if let Some(err) = e.overtaken_error(ctx) {
                    return err;
                }
                e.progress();
            }
            waiter.snooze();
        }
    }

    /// Begins a collective that the caller knows takes the shared-memory path (one of
    /// barrier, bcast, reduce, allreduce, allgather, alltoall with at most
    /// [`runthrough_shm::collarea::COLL_DATA`] bytes per member) without taking the
    /// engine lock: `None` unless slot `slot` of `shm` is collectively active with no
    /// recognised failure (then [`Coll::begin`] applies).
    pub fn begin_shm(
        eng: &'a BiasedMutex<Engine>,
        ctx: ContextId,
        group: &'a [Rank],
        me: u32,
        shm: &'a ShmColl,
        slot: usize,
    ) -> Option<Self> {
        let gen = shm.fail_gen();
        if !shm.fast(slot) {
            return None;
        }
        Some(Coll {
            eng,
            group,
            ctx: ctx.coll(),
            tag: Tag(0),
            alive: None,
            me: me as usize,
            chunk: shm.chunk,
            spin: shm.spin,
            central: shm.central,
            shm: Some(shm::ShmRef { coll: shm, slot, gen }),
            shm_only: true,
        })
    }

    /// Number of participants.
    pub fn n(&self) -> usize {
        self.alive.as_ref().map_or(self.group.len(), |a| a.len())
    }

    /// The v-rank (index among participants) of local rank `r`, if it participates.
    pub fn vrank_of(&self, r: u32) -> Option<usize> {
        match &self.alive {
            None => ((r as usize) < self.group.len()).then_some(r as usize),
            Some(a) => a.iter().position(|&x| x == r),
        }
    }

    /// Local rank of v-rank `v`.
    fn local(&self, v: usize) -> u32 {
        self.alive.as_ref().map_or(v as u32, |a| a[v])
    }

    /// The tag of this collective's messages (a collective begun by
    /// [`Coll::begin_shm`] sends none).
    fn tag(&self) -> Tag {
        debug_assert!(!self.shm_only, "a shared-memory collective fell back to messages");
        self.tag
    }

    fn post_recvs<'b>(&self, v_from: usize, buf: &'b mut [u8], out: &mut Vec<Request<'b>>)
    where
        'a: 'b,
    {
        let src = self.local(v_from);
        let pattern = Pattern { ctx: self.ctx, src: Some(src), tag: Some(self.tag()) };
        let peer = Some(self.group[src as usize]);
        if buf.is_empty() {
            out.push(irecv(self.eng, pattern, peer, buf));
            return;
        }
        for c in buf.chunks_mut(self.chunk) {
            out.push(irecv(self.eng, pattern, peer, c));
        }
    }

    /// The other participants' v-ranks, ascending.
    fn others(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.n()).filter(move |&v| v != self.me)
    }

    /// Posts, for each `(v, range)` of `from` (ranges ascending and disjoint), the
    /// receive of v-rank `v`'s data into that range of `buf`.
    fn post_recvs_into<'b>(
        &self,
        buf: &'b mut [u8],
        from: impl Iterator<Item = (usize, std::ops::Range<usize>)>,
        out: &mut Vec<Request<'b>>,
    ) where
        'a: 'b,
    {
        let mut rest = buf;
        let mut at = 0;
        for (v, r) in from {
            let (_, tail) = std::mem::take(&mut rest).split_at_mut(r.start - at);
            let (piece, tail) = tail.split_at_mut(r.len());
            self.post_recvs(v, piece, out);
            rest = tail;
            at = r.end;
        }
    }

    fn post_sends<'b>(&self, v_to: usize, buf: &'b [u8], out: &mut Vec<Request<'b>>)
    where
        'a: 'b,
    {
        let dst = self.local(v_to);
        let me = self.local(self.me);
        let peer = self.group[dst as usize];
        if buf.is_empty() {
            out.push(isend(self.eng, SendTarget { ctx: self.ctx, src: me, dest: dst, peer, tag: self.tag() }, buf));
            return;
        }
        for c in buf.chunks(self.chunk) {
            out.push(isend(self.eng, SendTarget { ctx: self.ctx, src: me, dest: dst, peer, tag: self.tag() }, c));
        }
    }

    fn finish(reqs: &mut Vec<Request<'_>>) -> Result<(), Error> {
        crate::handle::wait_all(reqs)
    }

    /// A single-record receive (the buffer fits one eager chunk).
    fn recv1<'b>(&self, v_from: usize, buf: &'b mut [u8]) -> Request<'b>
    where
        'a: 'b,
    {
        let src = self.local(v_from);
        let pattern = Pattern { ctx: self.ctx, src: Some(src), tag: Some(self.tag()) };
        irecv(self.eng, pattern, Some(self.group[src as usize]), buf)
    }

    /// A single-record send.
    fn send1<'b>(&self, v_to: usize, buf: &'b [u8]) -> Request<'b>
    where
        'a: 'b,
    {
        let dst = self.local(v_to);
        isend(
            self.eng,
            SendTarget {
                ctx: self.ctx,
                src: self.local(self.me),
                dest: dst,
                peer: self.group[dst as usize],
                tag: self.tag(),
            },
            buf,
        )
    }

    fn send(&self, v_to: usize, buf: &[u8]) -> Result<(), Error> {
        if buf.len() <= self.chunk {
            return self.send1(v_to, buf).wait().map(drop);
        }
        let mut r = Vec::new();
        self.post_sends(v_to, buf, &mut r);
        Self::finish(&mut r)
    }

    fn recv(&self, v_from: usize, buf: &mut [u8]) -> Result<(), Error> {
        if buf.len() <= self.chunk {
            return self.recv1(v_from, buf).wait().map(drop);
        }
        let mut r = Vec::new();
        self.post_recvs(v_from, buf, &mut r);
        Self::finish(&mut r)
    }

    fn sendrecv(&self, v_to: usize, sbuf: &[u8], v_from: usize, rbuf: &mut [u8]) -> Result<(), Error> {
        if sbuf.len() <= self.chunk && rbuf.len() <= self.chunk {
            // No vector of requests for the common short exchange; both always complete.
            let r = self.recv1(v_from, rbuf);
            let s = self.send1(v_to, sbuf);
            let (rr, sr) = (r.wait(), s.wait());
            return rr.and(sr).map(drop);
        }
        let mut r = Vec::new();
        self.post_recvs(v_from, rbuf, &mut r);
        self.post_sends(v_to, sbuf, &mut r);
        Self::finish(&mut r)
    }

    /// Blocks until every participant has entered.
    pub fn barrier(&self) -> Result<(), Error> {
        if let Some(r) = self.shm_barrier() {
            return r;
        }
        let n = self.n();
        let mut k = 1;
        while k < n {
            self.sendrecv((self.me + k) % n, &[], (self.me + n - k) % n, &mut [])?;
            k <<= 1;
        }
        Ok(())
    }

    fn vroot(&self, root: u32) -> Result<usize, Error> {
        self.vrank_of(root).ok_or(Error::RankFailStop { rank: root })
    }

    /// Broadcasts `buf` from local rank `root` (binomial tree).
    pub fn bcast(&self, root: u32, buf: &mut [u8]) -> Result<(), Error> {
        let n = self.n();
        let vroot = self.vroot(root)?;
        if let Some(r) = self.shm_bcast(vroot, buf) {
            return r;
        }
        if n <= flat_max() && buf.len() <= self.chunk {
            // Flat: one hop to everyone (a hop costs a context switch when ranks
            // outnumber cores; the root's extra sends are cheap eager posts).
            if self.me != vroot {
                return self.recv(vroot, buf);
            }
            let mut sends = Vec::with_capacity(n - 1);
            for v in (0..n).filter(|&v| v != vroot) {
                sends.push(self.send1(v, buf));
            }
            return Self::finish(&mut sends);
        }
        let (parent, children) = bcast_tree(n, self.me, vroot);
        if let Some(p) = parent {
            self.recv(p, buf)?;
        }
        let mut sends = Vec::new();
        for c in children {
            self.post_sends(c, buf, &mut sends);
        }
        Self::finish(&mut sends)
    }

    /// A reduce (to local rank `root`, or an allreduce: `None`) whose contribution
    /// `send` is only read, the result going to `recv` at the members that get it (the
    /// root, or everyone) and `recv` `None` elsewhere — through the shared-memory bulk
    /// buffers, which need no copy of `send` into an accumulator first. `None` when they
    /// do not apply (the same answer at every member): then use the in-place forms.
    pub fn reduce_from(
        &self,
        root: Option<u32>,
        send: &[u8],
        recv: Option<&mut [u8]>,
        elem: usize,
        op: Combine<'_>,
    ) -> Option<Result<(), Error>> {
        let vroot = match root.map(|r| self.vroot(r)).transpose() {
            Ok(v) => v,
            Err(e) => return Some(Err(e)),
        };
        self.long_reduce_from(vroot, send, recv, elem, op)
    }

    /// Reduces `buf` (of `elem`-byte elements) into local rank `root`'s `buf` (binomial
    /// tree, or the shared-memory paths; `op` must be commutative and associative).
    /// Other ranks' `buf` is left undefined.
    pub fn reduce(&self, root: u32, buf: &mut [u8], elem: usize, op: Combine<'_>) -> Result<(), Error> {
        let n = self.n();
        let vroot = self.vroot(root)?;
        if let Some(r) = self.shm_reduce(vroot, buf, elem, op) {
            return r;
        }
        if n <= flat_max() && buf.len() <= self.chunk {
            return self.flat_reduce(vroot, buf, op);
        }
        let rel = (self.me + n - vroot) % n;
        // Children at rel + m for every bit m below rel's lowest set bit (the parent's).
        let mut mask = 1;
        let mut kids = 0;
        while mask < n && rel & mask == 0 {
            kids += usize::from(rel + mask < n);
            mask <<= 1;
        }
        let len = buf.len();
        with_scratch(kids * len, |tmp| {
            {
                // Every child's receive is posted at once, so no child's records wait in
                // the unexpected queue (an extra copy) while another child is received.
                let mut reqs = Vec::with_capacity(kids * len.div_ceil(self.chunk).max(1));
                let kid = |k: usize| ((rel + (1 << k) + vroot) % n, k * len..(k + 1) * len);
                self.post_recvs_into(tmp, (0..kids).map(kid), &mut reqs);
                Self::finish(&mut reqs)?;
            }
            for part in tmp.chunks(len.max(1)).take(kids) {
                op(buf, part);
            }
            if rel == 0 {
                return Ok(());
            }
            self.send((rel - mask + vroot) % n, buf)
        })
    }

    /// Flat reduce of one eager record: every member sends to the root, which receives
    /// all at once and combines in v-rank order (one hop).
    fn flat_reduce(&self, vroot: usize, buf: &mut [u8], op: Combine<'_>) -> Result<(), Error> {
        let n = self.n();
        if self.me != vroot {
            return self.send(vroot, buf);
        }
        let len = buf.len();
        with_scratch(len * n, |tmp| {
            {
                let mut reqs = Vec::with_capacity(n - 1);
                self.post_recvs_into(tmp, self.others().map(|v| (v, v * len..(v + 1) * len)), &mut reqs);
                Self::finish(&mut reqs)?;
            }
            for v in self.others() {
                op(buf, &tmp[v * len..(v + 1) * len]);
            }
            Ok(())
        })
    }

    /// Reduces `buf` over all participants; everyone gets the result. `elem` is the
    /// element size in bytes (ring chunks never split an element).
    pub fn allreduce(&self, buf: &mut [u8], elem: usize, op: Combine<'_>) -> Result<(), Error> {
        if let Some(r) = self.shm_allreduce(buf, elem, op) {
            return r;
        }
        let n = self.n();
        let elems = buf.len() / elem.max(1);
        let long = n > 1 && buf.len() >= RING_ALLREDUCE_MIN_BYTES && elems >= n;
        if long && n > 2 && n <= DIRECT_ALLREDUCE_MAX.min(flat_max()) {
            return self.direct_allreduce(buf, elem, op);
        }
        if long && (n == 2 || n > flat_max()) {
            return self.ring_allreduce(buf, elem, op);
        }
        // One eager record: recursive doubling, except on 3..=8 members where a flat
        // reduce + flat broadcast (two hops) measured faster when ranks outnumber cores.
        if n > 1 && buf.len() <= self.chunk && (n == 2 || n > flat_max()) {
            return self.doubling_allreduce(buf, op);
        }
        let root = self.local(0);
        self.reduce(root, buf, elem, op)?;
        self.bcast(root, buf)
    }

    /// Recursive-doubling allreduce for vectors of one eager record (Thakur, Rabenseifner
    /// and Gropp): ⌈log2 n⌉ exchange rounds instead of the 2⌈log2 n⌉ of reduce +
    /// broadcast. With p the largest power of two ≤ n and r = n − p, the first 2r
    /// participants pair up (even ones hand their vector to the odd one and wait for the
    /// result), the other p exchange with partners at distance 1, 2, 4, …. Every member
    /// combines in the same order (lower v-rank's vector first), so floating-point results
    /// agree bitwise across members.
    fn doubling_allreduce(&self, buf: &mut [u8], op: Combine<'_>) -> Result<(), Error> {
        let n = self.n();
        let p = 1 << (usize::BITS - 1 - n.leading_zeros());
        let rem = n - p;
        let me = self.me;
        with_scratch(buf.len(), |tmp| {
            let newrank = if me < 2 * rem {
                if me.is_multiple_of(2) {
                    self.send(me + 1, buf)?;
                    return self.recv(me + 1, buf);
                }
                self.recv(me - 1, tmp)?;
                // Lower v-rank first: acc = tmp ⊕ buf, kept in buf.
                op(tmp, buf);
                buf.copy_from_slice(tmp);
                me / 2
            } else {
                me - rem
            };
            let mut mask = 1;
            while mask < p {
                let partner_new = newrank ^ mask;
                let partner = if partner_new < rem { partner_new * 2 + 1 } else { partner_new + rem };
                self.sendrecv(partner, buf, partner, tmp)?;
                if partner < me {
                    op(tmp, buf);
                    buf.copy_from_slice(tmp);
                } else {
                    op(buf, tmp);
                }
                mask <<= 1;
            }
            if me < 2 * rem {
                self.send(me - 1, buf)?;
            }
            Ok(())
        })
    }

    /// Direct allreduce for few members: a reduce-scatter in which every member sends
    /// each other member its segment of the vector at once and combines the n − 1
    /// segments it receives into its own (in v-rank order), then an allgather of the
    /// reduced segments, also all at once — two rounds instead of the ring's 2(n − 1),
    /// the same bytes moved.
    fn direct_allreduce(&self, buf: &mut [u8], elem: usize, op: Combine<'_>) -> Result<(), Error> {
        let n = self.n();
        let elems = buf.len() / elem;
        let seg = |i: usize| i * elems / n * elem..(i + 1) * elems / n * elem;
        let mine = seg(self.me);
        let len = mine.len();
        with_scratch(len * n, |tmp| {
            {
                let mut reqs = Vec::with_capacity(2 * n * (len / self.chunk + 1));
                self.post_recvs_into(tmp, self.others().map(|v| (v, v * len..(v + 1) * len)), &mut reqs);
                for step in 1..n {
                    let v = (self.me + step) % n;
                    self.post_sends(v, &buf[seg(v)], &mut reqs);
                }
                Self::finish(&mut reqs)?;
            }
            // Combine in v-rank order, so every segment's owner computes the same
            // expression the others would.
            let own = &mut buf[mine.clone()];
            let mut acc = own.to_vec();
            for v in 0..n {
                let x: &[u8] = if v == self.me { own } else { &tmp[v * len..(v + 1) * len] };
                if v == 0 {
                    acc.copy_from_slice(x);
                } else {
                    op(&mut acc, x);
                }
            }
            own.copy_from_slice(&acc);
            Ok(())
        })?;
        let out = buf[mine.clone()].to_vec();
        self.direct_exchange(|v| (&out[..], seg(v)), buf)
    }

    /// Ring allreduce: n−1 reduce-scatter steps then n−1 allgather steps, each moving
    /// 1/n of the vector (bandwidth-optimal, Patarasuk and Yuan).
    fn ring_allreduce(&self, buf: &mut [u8], elem: usize, op: Combine<'_>) -> Result<(), Error> {
        let n = self.n();
        let elems = buf.len() / elem;
        let seg = |i: usize| {
            let lo = i * elems / n * elem;
            let hi = (i + 1) * elems / n * elem;
            lo..hi
        };
        let (next, prev) = ((self.me + 1) % n, (self.me + n - 1) % n);
        let mut tmp = vec![0u8; seg(0).len().max(seg(n - 1).len()) + elem];
        for step in 0..n - 1 {
            let s = (self.me + n - step) % n;
            let r = (self.me + n - step - 1) % n;
            let (sr, rr) = (seg(s), seg(r));
            let out = buf[sr].to_vec();
            let t = &mut tmp[..rr.len()];
            self.sendrecv(next, &out, prev, t)?;
            op(&mut buf[rr], t);
        }
        for step in 0..n - 1 {
            let s = (self.me + 1 + n - step) % n;
            let r = (self.me + n - step) % n;
            let (sr, rr) = (seg(s), seg(r));
            let out = buf[sr].to_vec();
            self.sendrecv(next, &out, prev, &mut buf[rr])?;
        }
        Ok(())
    }

    /// Gathers each participant's `send` into `recv` at local rank `root`, in
    /// local-rank order (`recv.len()` = group size × `send.len()`); failed members'
    /// segments are left as they were.
    pub fn gather(&self, root: u32, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let vroot = self.vroot(root)?;
        if self.me != vroot {
            return self.send(vroot, send);
        }
        let len = send.len();
        let mut reqs = Vec::new();
        let mut rest = &mut recv[..];
        for i in 0..self.group.len() {
            let (segment, tail) = rest.split_at_mut(len);
            rest = tail;
            match self.vrank_of(i as u32) {
                Some(v) if v == self.me => segment.copy_from_slice(send),
                Some(v) => self.post_recvs(v, segment, &mut reqs),
                None => {}
            }
        }
        Self::finish(&mut reqs)
    }

    /// Scatters `send` (group size × `recv.len()`, local-rank order) from `root`.
    pub fn scatter(&self, root: u32, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let vroot = self.vroot(root)?;
        if self.me != vroot {
            return self.recv(vroot, recv);
        }
        let len = recv.len();
        let mut reqs = Vec::new();
        for i in 0..self.group.len() {
            let segment = &send[i * len..(i + 1) * len];
            match self.vrank_of(i as u32) {
                Some(v) if v == self.me => recv.copy_from_slice(segment),
                Some(v) => self.post_sends(v, segment, &mut reqs),
                None => {}
            }
        }
        Self::finish(&mut reqs)
    }

    /// Everyone gets every participant's `send`, in local-rank order (ring).
    pub fn allgather(&self, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let n = self.n();
        let len = send.len();
        let at = |v: usize| self.local(v) as usize * len;
        let mine = at(self.me);
        recv[mine..mine + len].copy_from_slice(send);
        if let Some(r) = self.shm_allgather(send, recv) {
            return r;
        }
        if len <= DIRECT_MAX_BLOCK || n <= flat_max() {
            // Short blocks: every exchange posted at once (one round, not n − 1).
            return self.direct_exchange(|v| (send, at(v)..at(v) + len), recv);
        }
        let (next, prev) = ((self.me + 1) % n, (self.me + n - 1) % n);
        for step in 0..n.saturating_sub(1) {
            let s = at((self.me + n - step) % n);
            let r = at((self.me + n - step - 1) % n);
            let out = recv[s..s + len].to_vec();
            self.sendrecv(next, &out, prev, &mut recv[r..r + len])?;
        }
        Ok(())
    }

    /// Block `j` of `send` goes to member `j`; block `i` of `recv` comes from member
    /// `i` (blocks of `send.len() / group size` bytes; pairwise exchange).
    pub fn alltoall(&self, send: &[u8], recv: &mut [u8]) -> Result<(), Error> {
        let n = self.n();
        let len = send.len() / self.group.len().max(1);
        let at = |v: usize| self.local(v) as usize * len;
        let me = at(self.me);
        recv[me..me + len].copy_from_slice(&send[me..me + len]);
        if let Some(r) = self.shm_alltoall(send, recv, len) {
            return r;
        }
        if len <= DIRECT_MAX_BLOCK || n <= flat_max() {
            return self.direct_exchange(|v| (&send[at(v)..at(v) + len], at(v)..at(v) + len), recv);
        }
        for step in 1..n {
            let to = (self.me + step) % n;
            let from = (self.me + n - step) % n;
            let (s, r) = (at(to), at(from));
            self.sendrecv(to, &send[s..s + len], from, &mut recv[r..r + len])?;
        }
        Ok(())
    }

    /// Gathers variable-size contributions at `root`: member `i`'s `send` lands in
    /// `recv[displs[i]..displs[i] + counts[i]]` (bytes; local-rank indexed); failed
    /// members' ranges are left as they were.
    pub fn gatherv(
        &self,
        root: u32,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), Error> {
        let vroot = self.vroot(root)?;
        if self.me != vroot {
            return self.send(vroot, send);
        }
        let mut reqs = Vec::new();
        for (i, piece) in split_ranges(recv, counts, displs)?.into_iter().enumerate() {
            match self.vrank_of(i as u32) {
                Some(v) if v == self.me => piece.copy_from_slice(send.get(..piece.len()).ok_or(TOO_SHORT)?),
                Some(v) => self.post_recvs(v, piece, &mut reqs),
                None => {}
            }
        }
        Self::finish(&mut reqs)
    }

    /// Scatters `send[displs[i]..displs[i] + counts[i]]` to member `i` (bytes) from
    /// `root`.
    pub fn scatterv(
        &self,
        root: u32,
        send: &[u8],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [u8],
    ) -> Result<(), Error> {
        let vroot = self.vroot(root)?;
        if self.me != vroot {
            return self.recv(vroot, recv);
        }
        check_ranges(send.len(), counts, displs, self.group.len())?;
        let mut reqs = Vec::new();
        for i in 0..self.group.len() {
            let piece = &send[displs[i]..displs[i] + counts[i]];
            match self.vrank_of(i as u32) {
                Some(v) if v == self.me => recv.get_mut(..piece.len()).ok_or(TOO_SHORT)?.copy_from_slice(piece),
                Some(v) => self.post_sends(v, piece, &mut reqs),
                None => {}
            }
        }
        Self::finish(&mut reqs)
    }

    /// Everyone gets member `i`'s `send` in `recv[displs[i]..displs[i] + counts[i]]`
    /// (bytes; ring over the participants).
    pub fn allgatherv(&self, send: &[u8], recv: &mut [u8], counts: &[usize], displs: &[usize]) -> Result<(), Error> {
        let n = self.n();
        check_ranges(recv.len(), counts, displs, self.group.len())?;
        let at = |v: usize| {
            let l = self.local(v) as usize;
            displs[l]..displs[l] + counts[l]
        };
        let mine = at(self.me);
        recv[mine.clone()].copy_from_slice(send.get(..mine.len()).ok_or(TOO_SHORT)?);
        let (next, prev) = ((self.me + 1) % n, (self.me + n - 1) % n);
        for step in 0..n.saturating_sub(1) {
            let s = at((self.me + n - step) % n);
            let r = at((self.me + n - step - 1) % n);
            let out = recv[s].to_vec();
            self.sendrecv(next, &out, prev, &mut recv[r])?;
        }
        Ok(())
    }

    /// Member `j` gets `send[sdispls[j]..][..scounts[j]]`; what member `i` sends here
    /// lands in `recv[rdispls[i]..][..rcounts[i]]` (bytes; pairwise exchange).
    pub fn alltoallv(
        &self,
        send: &[u8],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [u8],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(), Error> {
        let n = self.n();
        let g = self.group.len();
        check_ranges(send.len(), scounts, sdispls, g)?;
        check_ranges(recv.len(), rcounts, rdispls, g)?;
        let me = self.local(self.me) as usize;
        let (sr, rr) = (sdispls[me]..sdispls[me] + scounts[me], rdispls[me]..rdispls[me] + rcounts[me]);
        if sr.len() != rr.len() {
            return Err(Error::InvalidArg("alltoallv: this member's send and receive counts to itself differ"));
        }
        recv[rr].copy_from_slice(&send[sr]);
        for step in 1..n {
            let to = self.local((self.me + step) % n) as usize;
            let from = self.local((self.me + n - step) % n) as usize;
            let s = &send[sdispls[to]..sdispls[to] + scounts[to]];
            let r = &mut recv[rdispls[from]..rdispls[from] + rcounts[from]];
            self.sendrecv((self.me + step) % n, s, (self.me + n - step) % n, r)?;
        }
        Ok(())
    }

    /// Exchanges with every other participant at once: `parts(v)` gives what goes to
    /// v-rank `v` and the range of `recv` its block fills (disjoint, ascending with `v`:
    /// blocks are laid out in local-rank order). Receives are
    /// posted first, then sends in rotated order (member i starts with i + 1) so no
    /// member is everyone's first target.
    fn direct_exchange<'s>(
        &self,
        parts: impl Fn(usize) -> (&'s [u8], std::ops::Range<usize>),
        recv: &mut [u8],
    ) -> Result<(), Error> {
        let n = self.n();
        if n == 2 {
            let v = 1 - self.me;
            let (out, r) = parts(v);
            return self.sendrecv(v, out, v, &mut recv[r]);
        }
        let mut reqs = Vec::with_capacity(2 * n);
        self.post_recvs_into(recv, self.others().map(|v| (v, parts(v).1)), &mut reqs);
        for step in 1..n {
            let v = (self.me + step) % n;
            self.post_sends(v, parts(v).0, &mut reqs);
        }
        Self::finish(&mut reqs)
    }

    /// Inclusive prefix reduction in v-rank order (linear chain).
    pub fn scan(&self, buf: &mut [u8], op: Combine<'_>) -> Result<(), Error> {
        if self.me > 0 {
            let mut prefix = vec![0u8; buf.len()];
            self.recv(self.me - 1, &mut prefix)?;
            op(buf, &prefix);
        }
        if self.me + 1 < self.n() {
            self.send(self.me + 1, buf)?;
        }
        Ok(())
    }

    /// Exclusive prefix reduction: `buf` becomes the reduction of the participants
    /// before this one. Returns `false` on the first participant, whose `buf` is then
    /// undefined (left as it was).
    pub fn exscan(&self, buf: &mut [u8], op: Combine<'_>) -> Result<bool, Error> {
        let mine = buf.to_vec();
        if self.me > 0 {
            self.recv(self.me - 1, buf)?;
        }
        if self.me + 1 < self.n() {
            let mut out = mine.clone();
            if self.me > 0 {
                op(&mut out, buf);
            }
            self.send(self.me + 1, &out)?;
        }
        Ok(self.me > 0)
    }
}
