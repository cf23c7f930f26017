//! Collectives as schedules of rounds (R21), the machinery below both kinds of
//! nonblocking collective: those on the caller's buffers (`crate::icoll`, advanced by
//! `test`/`wait`/`poll`) and those the engine owns with their buffer
//! (`Engine::start_schedule`, advanced by every progress call).
//!
//! A round posts receives and sends (collective data is eager, chunked to the eager
//! limit, like the blocking collectives of `crate::coll`); when all of them have
//! completed, its reductions are applied and the next round is posted.
//! [`Plan`] names a collective by its byte layout; [`compile`] turns it into this
//! member's rounds over the collective's participants (the communicator's live members,
//! R20). The schedules: a dissemination barrier, binomial broadcast and reduce, reduce +
//! broadcast for allreduce, linear gather and scatter (the root posts everything at
//! once), one round of all pairs for allgather and alltoall, reduce + scatter for
//! reduce-scatter, and a chain for the scans.
//!
//! The runner sees the engine only through [`Ops`] (implemented by `Engine`), so this
//! module sits below the engine and `icoll` above both, with no import circle.
//!
//! `unsafe` here: a runner posts raw views of two byte areas ([`Bufs`]) it does not own.
//! Invariant (the callers'): both areas stay alive, unresized and untouched by anything
//! else while a round is posted, and every range a plan names lies inside its area
//! (`Runner::check_ranges`). The plans never give one round two writers of a range,
//! nor a writer and a reader.
#![allow(unsafe_code)]

use std::ops::Range;
use std::sync::Arc;

use crate::buf::{RawBuf, RawBufMut};
use crate::coll_state::CollView;
use crate::error::Error;
use crate::matching::Pattern;
use crate::types::{ContextId, Rank, ReqId, SendTarget, Tag};

/// An element-wise reduction of `incoming` into `acc` (both the same length, a whole
/// number of elements): `acc = incoming op acc`.
pub type Combine<'f> = &'f dyn Fn(&mut [u8], &[u8]);

/// A byte range of the first area (the caller's buffer, or an owned schedule's arena),
/// of the scratch area, or of the send area (a neighbourhood exchange's sends: the
/// first area too, unless a schedule runs over the program's own send and receive
/// buffers, [`crate::Engine::start_exchange`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Loc {
    User(Range<usize>),
    Own(Range<usize>),
    Src(Range<usize>),
}

/// One round: everything in it is posted at once; reductions run when it completes.
/// Peers are v-ranks (indices into the participants).
#[derive(Debug, Default)]
pub(crate) struct Round {
    pub(crate) recvs: Vec<(usize, Loc)>,
    pub(crate) sends: Vec<(usize, Loc)>,
    /// `(accumulator, incoming)` pairs, applied in order: `acc = incoming op acc`.
    pub(crate) combine: Vec<(Loc, Loc)>,
}

/// A collective by the layout of its bytes in one area, roots and blocks named by
/// local rank. Blocks of members that are not participants (recognised failures) are
/// left alone. This member's own block of a gather, scatter, allgather or alltoall is
/// not copied: the caller lays it out where it belongs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Dissemination barrier; no bytes.
    Barrier,
    /// Broadcast of bytes `0..len` from `root`.
    Bcast {
        /// Local rank of the root.
        root: u32,
        /// Bytes broadcast.
        len: usize,
    },
    /// Reduce of bytes `0..len` (this member's contribution at the start) into `root`.
    Reduce {
        /// Local rank of the root.
        root: u32,
        /// Bytes of the vector.
        len: usize,
    },
    /// Reduce, then broadcast: everyone ends with the result in `0..len`.
    Allreduce {
        /// Bytes of the vector.
        len: usize,
    },
    /// `root` receives every other participant's block; the others send theirs.
    Gatherv {
        /// Local rank of the root.
        root: u32,
        /// Block of each local rank (at the root: where it lands; elsewhere only this
        /// member's own is read).
        blocks: Vec<Range<usize>>,
    },
    /// `root` sends every other participant its block; the others receive theirs.
    Scatterv {
        /// Local rank of the root.
        root: u32,
        /// Block of each local rank (as for `Gatherv`).
        blocks: Vec<Range<usize>>,
    },
    /// Every participant sends its block to and receives every other's.
    Allgatherv {
        /// Block of each local rank.
        blocks: Vec<Range<usize>>,
    },
    /// Block `sends[j]` goes to local rank `j`, `recvs[j]` comes from it.
    Alltoallv {
        /// What goes to each local rank.
        sends: Vec<Range<usize>>,
        /// Where each local rank's block lands.
        recvs: Vec<Range<usize>>,
    },
    /// Reduce of `0..len` to the first participant, which scatters `blocks` of the
    /// result (each member's lands in its own block of `0..len`).
    ReduceScatter {
        /// Bytes of the vector.
        len: usize,
        /// Block of each local rank, inside `0..len`.
        blocks: Vec<Range<usize>>,
    },
    /// Inclusive prefix reduction of `0..len` in participant order.
    Scan {
        /// Bytes of the vector.
        len: usize,
    },
    /// Exclusive prefix reduction: this member's contribution in `0..len`, the result
    /// (not at the first participant) in `len..2 len`.
    Exscan {
        /// Bytes of the vector.
        len: usize,
    },
    /// A neighbourhood exchange (MPI-4.1 8.6): each block goes to or comes from the local
    /// rank beside it, posted in the order given, so the k-th message between two members
    /// meets the k-th receive; a neighbour that is not a participant (a recognized failure)
    /// is skipped, and the caller copies the blocks a member exchanges with itself.
    Neighbor {
        /// What goes to each destination, in posting order.
        sends: Vec<(u32, Range<usize>)>,
        /// Where each source's block lands, in posting order.
        recvs: Vec<(u32, Range<usize>)>,
    },
}

impl Plan {
    /// Whether the plan combines (needs an operator).
    pub fn reduces(&self) -> bool {
        matches!(
            self,
            Plan::Reduce { .. }
                | Plan::Allreduce { .. }
                | Plan::ReduceScatter { .. }
                | Plan::Scan { .. }
                | Plan::Exscan { .. }
        )
    }

    /// Every range of the first area the plan names, and the end of the area it needs.
    fn extent(&self) -> usize {
        let end = |b: &[Range<usize>]| b.iter().map(|r| r.end).max().unwrap_or(0);
        match self {
            Plan::Barrier => 0,
            Plan::Bcast { len, .. } | Plan::Reduce { len, .. } | Plan::Allreduce { len } | Plan::Scan { len } => *len,
            Plan::Exscan { len } => 2 * len,
            Plan::Gatherv { blocks, .. } | Plan::Scatterv { blocks, .. } | Plan::Allgatherv { blocks } => end(blocks),
            Plan::Alltoallv { sends, recvs } => end(sends).max(end(recvs)),
            Plan::ReduceScatter { len, blocks } => end(blocks).max(*len),
            Plan::Neighbor { sends, recvs } => sends.iter().chain(recvs).map(|b| b.1.end).max().unwrap_or(0),
        }
    }

    /// Whether a range is backwards (start after end).
    fn malformed(&self) -> bool {
        let bad = |b: &[Range<usize>]| b.iter().any(|r| r.start > r.end);
        match self {
            Plan::Gatherv { blocks, .. }
            | Plan::Scatterv { blocks, .. }
            | Plan::Allgatherv { blocks }
            | Plan::ReduceScatter { blocks, .. } => bad(blocks),
            Plan::Alltoallv { sends, recvs } => bad(sends) || bad(recvs),
            Plan::Neighbor { sends, recvs } => sends.iter().chain(recvs).any(|b| b.1.start > b.1.end),
            _ => false,
        }
    }

    /// Whether the plan has a block for each of `n` members (where it has blocks).
    fn sized_for(&self, n: usize) -> bool {
        match self {
            Plan::Gatherv { blocks, .. }
            | Plan::Scatterv { blocks, .. }
            | Plan::Allgatherv { blocks }
            | Plan::ReduceScatter { blocks, .. } => blocks.len() == n,
            Plan::Alltoallv { sends, recvs } => sends.len() == n && recvs.len() == n,
            _ => true,
        }
    }
}

/// The binomial broadcast tree rooted at v-rank `vroot` over `n` participants, as seen
/// from v-rank `me`: its parent (none at the root) and its children, farthest subtree
/// first (the order the sends go out).
pub(crate) fn bcast_tree(n: usize, me: usize, vroot: usize) -> (Option<usize>, Vec<usize>) {
    let rel = (me + n - vroot) % n;
    let mut parent = None;
    let mut mask = 1;
    while mask < n {
        if rel & mask != 0 {
            parent = Some((rel - mask + vroot) % n);
            break;
        }
        mask <<= 1;
    }
    let mut children = Vec::new();
    mask >>= 1;
    while mask > 0 {
        if rel + mask < n {
            children.push((rel + mask + vroot) % n);
        }
        mask >>= 1;
    }
    (parent, children)
}

/// Dissemination barrier rounds.
pub(crate) fn barrier(n: usize, me: usize) -> (Vec<Round>, usize) {
    let mut rounds = Vec::new();
    let mut k = 1;
    while k < n {
        rounds.push(Round {
            recvs: vec![((me + n - k) % n, Loc::User(0..0))],
            sends: vec![((me + k) % n, Loc::User(0..0))],
            combine: Vec::new(),
        });
        k <<= 1;
    }
    (rounds, 0)
}

/// Binomial broadcast of the user buffer (`len` bytes) from v-rank `vroot`.
pub(crate) fn bcast(n: usize, me: usize, vroot: usize, len: usize) -> (Vec<Round>, usize) {
    let (parent, children) = bcast_tree(n, me, vroot);
    let mut rounds = Vec::new();
    if let Some(p) = parent {
        rounds.push(Round { recvs: vec![(p, Loc::User(0..len))], ..Round::default() });
    }
    if !children.is_empty() {
        let sends = children.into_iter().map(|c| (c, Loc::User(0..len))).collect();
        rounds.push(Round { sends, ..Round::default() });
    }
    (rounds, 0)
}

/// Binomial reduce of `acc` into v-rank `vroot`: all children's vectors arrive at once
/// into scratch (from byte `base` on), then are combined in the blocking algorithm's
/// order, then the result goes to the parent. Returns the rounds and the scratch length.
pub(crate) fn reduce(n: usize, me: usize, vroot: usize, acc: &Loc, base: usize) -> (Vec<Round>, usize) {
    let len = match acc {
        Loc::User(r) | Loc::Own(r) | Loc::Src(r) => r.len(),
    };
    let (parent, children) = bcast_tree(n, me, vroot);
    let mut gather = Round::default();
    // Nearest subtree first, as the blocking reduce combines.
    for (k, &c) in children.iter().rev().enumerate() {
        let tmp = Loc::Own(base + k * len..base + (k + 1) * len);
        gather.recvs.push((c, tmp.clone()));
        gather.combine.push((acc.clone(), tmp));
    }
    let own = base + gather.recvs.len() * len;
    let mut rounds = Vec::new();
    if !gather.recvs.is_empty() {
        rounds.push(gather);
    }
    if let Some(p) = parent {
        rounds.push(Round { sends: vec![(p, acc.clone())], ..Round::default() });
    }
    (rounds, own)
}

/// Linear gather (`to_root`) or scatter over `alive` of the `blocks` (by local rank).
fn linear(alive: &[u32], me: usize, vroot: usize, blocks: &[Range<usize>], to_root: bool) -> Vec<Round> {
    let block = |v: usize| Loc::User(blocks[alive[v] as usize].clone());
    let mut r = Round::default();
    if me == vroot {
        let others = (0..alive.len()).filter(|&v| v != me).map(|v| (v, block(v)));
        if to_root {
            r.recvs.extend(others);
        } else {
            r.sends.extend(others);
        }
    } else if to_root {
        r.sends.push((vroot, block(me)));
    } else {
        r.recvs.push((vroot, block(me)));
    }
    if r.sends.is_empty() && r.recvs.is_empty() {
        Vec::new()
    } else {
        vec![r]
    }
}

/// This member's rounds of `plan` over participants `alive` (local ranks, ascending),
/// `me` its v-rank; scratch from byte `base` of the second area. Returns the rounds and
/// the scratch length.
///
/// # Errors
/// `RankFailStop` when the root is not a participant.
pub(crate) fn compile(plan: &Plan, alive: &[u32], me: usize, base: usize) -> Result<(Vec<Round>, usize), Error> {
    let n = alive.len();
    let vroot = |root: u32| alive.iter().position(|&x| x == root).ok_or(Error::RankFailStop { rank: root });
    let pairs = |sends: &[Range<usize>], recvs: &[Range<usize>]| {
        let mut r = Round::default();
        for v in (0..n).filter(|&v| v != me) {
            let l = alive[v] as usize;
            r.recvs.push((v, Loc::User(recvs[l].clone())));
            r.sends.push((v, Loc::User(sends[l].clone())));
        }
        if n > 1 {
            vec![r]
        } else {
            Vec::new()
        }
    };
    Ok(match plan {
        Plan::Barrier => barrier(n, me),
        Plan::Bcast { root, len } => bcast(n, me, vroot(*root)?, *len),
        Plan::Reduce { root, len } => reduce(n, me, vroot(*root)?, &Loc::User(0..*len), base),
        Plan::Allreduce { len } => {
            let (mut rounds, own) = reduce(n, me, 0, &Loc::User(0..*len), base);
            rounds.extend(bcast(n, me, 0, *len).0);
            (rounds, own)
        }
        Plan::Gatherv { root, blocks } => (linear(alive, me, vroot(*root)?, blocks, true), 0),
        Plan::Scatterv { root, blocks } => (linear(alive, me, vroot(*root)?, blocks, false), 0),
        Plan::Allgatherv { blocks } => {
            let mine = vec![blocks[alive[me] as usize].clone(); blocks.len()];
            (pairs(&mine, blocks), 0)
        }
        Plan::Alltoallv { sends, recvs } => (pairs(sends, recvs), 0),
        Plan::Neighbor { sends, recvs } => {
            let peer = |l: u32| alive.iter().position(|&x| x == l).filter(|&v| v != me);
            let mut r = Round::default();
            r.recvs.extend(recvs.iter().filter_map(|(l, b)| Some((peer(*l)?, Loc::User(b.clone())))));
            r.sends.extend(sends.iter().filter_map(|(l, b)| Some((peer(*l)?, Loc::Src(b.clone())))));
            (if r.recvs.is_empty() && r.sends.is_empty() { Vec::new() } else { vec![r] }, 0)
        }
        Plan::ReduceScatter { len, blocks } => {
            let (mut rounds, own) = reduce(n, me, 0, &Loc::User(0..*len), base);
            rounds.extend(linear(alive, me, 0, blocks, false));
            (rounds, own)
        }
        Plan::Scan { len } => {
            let mut rounds = Vec::new();
            let tmp = Loc::Own(base..base + len);
            if me > 0 {
                rounds.push(Round {
                    recvs: vec![(me - 1, tmp.clone())],
                    combine: vec![(Loc::User(0..*len), tmp)],
                    ..Round::default()
                });
            }
            if me + 1 < n {
                rounds.push(Round { sends: vec![(me + 1, Loc::User(0..*len))], ..Round::default() });
            }
            (rounds, base + len)
        }
        Plan::Exscan { len } => {
            let mut rounds = Vec::new();
            let result = Loc::User(*len..2 * len);
            if me > 0 {
                rounds.push(Round {
                    recvs: vec![(me - 1, result.clone())],
                    combine: vec![(Loc::User(0..*len), result)],
                    ..Round::default()
                });
            }
            if me + 1 < n {
                rounds.push(Round { sends: vec![(me + 1, Loc::User(0..*len))], ..Round::default() });
            }
            (rounds, 0)
        }
    })
}

/// What a runner needs of the engine: starting its operations, settling them, and the
/// collective's view of its communicator. Implemented by `Engine`.
pub(crate) trait Ops {
    /// `Engine::coll_begin` (`tag`: a tag reserved before instead of the next one).
    fn begin(&mut self, ctx: ContextId, tag: Option<Tag>) -> Result<CollView, Error>;
    /// Largest eager payload: collective data is chunked to it.
    fn eager(&self) -> usize;
    /// Starts a receive into `buf`.
    fn recv(&mut self, pattern: Pattern, peer: Option<Rank>, buf: RawBufMut) -> ReqId;
    /// Starts a send of `buf`.
    fn send(&mut self, to: SendTarget, buf: RawBuf) -> ReqId;
    /// Tags an operation with a request scope's token (0: none).
    fn scope(&mut self, req: ReqId, token: u32);
    /// Whether the operation has an outcome.
    fn complete(&self, req: ReqId) -> bool;
    /// Whether the operation completed in error.
    fn failed(&self, req: ReqId) -> bool;
    /// Takes the outcome of a completed operation.
    fn take(&mut self, req: ReqId) -> Option<Result<(), Error>>;
    /// Cancels or forgets the operation; whether it is gone.
    fn release(&mut self, req: ReqId) -> bool;
}

/// The areas a runner's ranges point into: `Loc::User`, `Loc::Own` and `Loc::Src`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Bufs {
    pub(crate) user: *mut u8,
    pub(crate) own: *mut u8,
    /// Read only (sends).
    pub(crate) src: *const u8,
}

impl Bufs {
    /// The bytes of `loc`, for reading.
    ///
    /// # Safety
    /// `loc` lies inside its area, alive, and no posted receive writes it while the
    /// slice lives.
    unsafe fn bytes<'x>(self, loc: &Loc) -> &'x [u8] {
        let (base, range) = match loc {
            Loc::User(r) => (self.user.cast_const(), r.clone()),
            Loc::Own(r) => (self.own.cast_const(), r.clone()),
            Loc::Src(r) => (self.src, r.clone()),
        };
        if range.is_empty() {
            return &[];
        }
        // SAFETY: the caller's guarantees (function contract).
        unsafe { std::slice::from_raw_parts(base.add(range.start), range.len()) }
    }

    /// The bytes of `loc`, for writing.
    ///
    /// # Safety
    /// As [`Bufs::bytes`], and nothing else accesses `loc` while the slice lives.
    unsafe fn bytes_mut<'x>(self, loc: &Loc) -> &'x mut [u8] {
        let (base, range) = match loc {
            Loc::User(r) => (self.user, r.clone()),
            Loc::Own(r) => (self.own, r.clone()),
            // Nothing is written into the send area.
            Loc::Src(_) => return &mut [],
        };
        if range.is_empty() {
            return &mut [];
        }
        // SAFETY: the caller's guarantees (function contract).
        unsafe { std::slice::from_raw_parts_mut(base.add(range.start), range.len()) }
    }
}

/// One nonblocking collective's schedule and where it stands.
#[derive(Debug)]
pub(crate) struct Runner {
    group: Arc<[Rank]>,
    ctx: ContextId,
    tag: Tag,
    alive: Arc<[u32]>,
    me: usize,
    chunk: usize,
    rounds: Vec<Round>,
    next: usize,
    posted: Vec<ReqId>,
    /// `Some` once it ended (or failed and waits for what could not be cancelled).
    pub(crate) outcome: Option<Result<(), Error>>,
    token: u32,
}

/// How a collective's start went.
pub(crate) enum Begun {
    /// It runs (or already ended in error: a collectively inactive communicator, R21).
    Run(Runner),
    /// The call itself is wrong (not a member, an unknown communicator, ...).
    Refused(Error),
}

impl Runner {
    /// Begins a collective on communicator `ctx` (members `group` by local rank, this
    /// process local rank `me`) with `plan`; scratch from byte `base` of the second area.
    /// Nothing is posted yet: see [`Runner::post_next`]. Returns the runner and its
    /// scratch length.
    pub(crate) fn begin(
        e: &mut impl Ops,
        ctx: ContextId,
        group: Arc<[Rank]>,
        me: u32,
        plan: &Plan,
        tag: Option<Tag>,
        base: usize,
    ) -> (Begun, usize) {
        let mut r = Runner {
            group,
            ctx,
            tag: Tag(0),
            alive: Arc::from([]),
            me: 0,
            chunk: e.eager().max(1),
            rounds: Vec::new(),
            next: 0,
            posted: Vec::new(),
            outcome: None,
            token: 0,
        };
        let view = match e.begin(ctx, tag) {
            Ok(v) => v,
            Err(err @ Error::RankFailStop { .. }) => {
                r.outcome = Some(Err(err));
                return (Begun::Run(r), 0);
            }
            Err(err) => return (Begun::Refused(err), 0),
        };
        let Some(vme) = view.alive.iter().position(|&x| x == me) else {
            return (Begun::Refused(Error::ApiMisuse("collective by a non-member")), 0);
        };
        if !plan.sized_for(r.group.len()) || plan.malformed() {
            return (Begun::Refused(Error::InvalidArg("a collective's blocks do not match its communicator")), 0);
        }
        (r.ctx, r.tag, r.alive, r.me) = (view.ctx, view.tag, view.alive, vme);
        match compile(plan, &r.alive, vme, base) {
            Ok((rounds, own)) => {
                r.rounds = rounds;
                (Begun::Run(r), own)
            }
            Err(err) => {
                r.outcome = Some(Err(err));
                (Begun::Run(r), 0)
            }
        }
    }

    /// The end of the first area `plan` needs (its ranges must lie below).
    pub(crate) fn extent(plan: &Plan) -> usize {
        plan.extent()
    }

    /// The collective context its messages travel on.
    pub(crate) fn ctx(&self) -> ContextId {
        self.ctx
    }

    /// Tags every operation the runner posts with a request scope's token.
    pub(crate) fn set_token(&mut self, token: u32) {
        self.token = token;
    }

    /// Whether it has operations posted.
    pub(crate) fn has_posted(&self) -> bool {
        !self.posted.is_empty()
    }

    /// Its posted operations.
    pub(crate) fn posted(&self) -> &[ReqId] {
        &self.posted
    }

    /// Posts round `self.next` (or ends when there is none).
    ///
    /// # Safety
    /// `bufs` holds every range of the rounds, alive and untouched by anything else
    /// until the round completed or was cancelled (module invariant).
    pub(crate) unsafe fn post_next(&mut self, e: &mut impl Ops, bufs: Bufs) {
        if self.outcome.is_some() {
            return;
        }
        let Some(round) = self.rounds.get(self.next) else {
            self.outcome = Some(Ok(()));
            return;
        };
        let mut posted = std::mem::take(&mut self.posted);
        for (v, loc) in &round.recvs {
            let src = self.alive[*v];
            let pattern = Pattern { ctx: self.ctx, src: Some(src), tag: Some(self.tag) };
            let peer = Some(self.group[src as usize]);
            // SAFETY: the round's receive ranges are disjoint from each other and from its
            // send ranges, and nothing else touches them until the round completed or
            // was cancelled (function contract).
            let whole = unsafe { bufs.bytes_mut(loc) };
            if whole.is_empty() {
                // SAFETY: an empty view; nothing is ever written through it.
                posted.push(e.recv(pattern, peer, unsafe { RawBufMut::new(whole) }));
            }
            for c in whole.chunks_mut(self.chunk) {
                // SAFETY: as above, for this chunk.
                posted.push(e.recv(pattern, peer, unsafe { RawBufMut::new(c) }));
            }
        }
        let me = self.alive[self.me];
        for (v, loc) in &round.sends {
            let dest = self.alive[*v];
            let to = SendTarget { ctx: self.ctx, src: me, dest, peer: self.group[dest as usize], tag: self.tag };
            // SAFETY: send ranges are only read while the round is posted (function contract).
            let whole = unsafe { bufs.bytes(loc) };
            if whole.is_empty() {
                posted.push(e.send(to, RawBuf::empty()));
            }
            for c in whole.chunks(self.chunk) {
                // SAFETY: as above, for this chunk.
                posted.push(e.send(to, unsafe { RawBuf::new(c) }));
            }
        }
        for &id in &posted {
            e.scope(id, self.token);
        }
        self.posted = posted;
    }

    /// Advances the schedule as far as completed rounds allow, combining with `op`.
    /// Returns whether it is done (its outcome set and nothing left posted).
    ///
    /// # Safety
    /// As [`Runner::post_next`].
    pub(crate) unsafe fn advance(&mut self, e: &mut impl Ops, bufs: Bufs, op: Option<Combine<'_>>) -> bool {
        loop {
            if self.outcome.is_some() {
                // After an error, wait for what could not be cancelled.
                self.posted.retain(|&id| !e.release(id));
                return self.posted.is_empty();
            }
            if !self.posted.iter().all(|&id| e.complete(id)) {
                // A round in which something already failed need not wait for the rest.
                let failed = self.posted.iter().position(|&id| e.failed(id));
                let Some(i) = failed else { return false };
                let id = self.posted.swap_remove(i);
                if let Some(Err(err)) = e.take(id) {
                    self.outcome = Some(Err(err));
                }
                continue;
            }
            let mut first = Ok(());
            for id in self.posted.drain(..) {
                if let Some(Err(err)) = e.take(id) {
                    if first.is_ok() {
                        first = Err(err);
                    }
                }
            }
            if let Err(err) = first {
                self.outcome = Some(Err(err));
                return true;
            }
            let round = &self.rounds[self.next];
            if !round.combine.is_empty() {
                let Some(op) = op else {
                    self.outcome = Some(Err(Error::InvalidArg("reduction without an operator")));
                    return true;
                };
                for (acc, inc) in &round.combine {
                    // SAFETY: the round completed, so nothing is posted on any range; the
                    // schedule never combines a range into itself (function contract).
                    let (a, x) = unsafe { (bufs.bytes_mut(acc), bufs.bytes(inc)) };
                    op(a, x);
                }
            }
            self.next += 1;
            // SAFETY: forwarded (function contract).
            unsafe { self.post_next(e, bufs) };
        }
    }
}

#[cfg(test)]
mod tests;
