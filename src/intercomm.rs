//! Inter-communicators (MPI-4.1 §7.6, run-through R39): two disjoint groups that talk
//! to each other — point-to-point ranks name the *other* group's members — made from
//! any two groups, any leaders and any peer communicator ([`Comm::intercomm_create`]),
//! merged into an intra-communicator ([`InterComm::merge`]), duplicated, split, and
//! validated, agreed on, revoked and shrunk like an intra-communicator. The collectives
//! are `intercoll.rs`'s.
//!
//! An inter-communicator runs on four communicators created together on four
//! consecutive context pairs: the *bridge* over both groups (the program's
//! point-to-point, its ranks translated), the *inner* bridge for the collectives' own
//! messages, and one *local* communicator a side (each side its own pair, so two sides
//! on one node never share a shared-memory collective slot). The bridge lists the group
//! whose leader has the lower world rank first.
//!
//! ## Creation, uniform under failures (R39)
//! 1. The leaders swap their groups, recognised failures and creation keys over the peer
//!    communicator.
//! 2. Each leader hands what it got to its members one by one, on a private context of
//!    the local communicator.
//! 3. Each side agrees (over its local communicator) whether every live member has the
//!    other group: a side whose leader died before handing it over fails as one, and
//!    each of its members tells every process outside its group so (an *abort notice*,
//!    keyed by the side's leader, context and creation number).
//! 4. Both sides together run one fault-tolerant agreement over the bridge's members:
//!    the decision point. A new failure not recognised in an input communicator fails
//!    the creation everywhere; otherwise it decides the contexts. A member waiting in it
//!    that receives the other side's abort notice leaves with `RankFailStop`: the other
//!    side's live members never enter, so nobody can decide, and leaving is uniform.
//!
//! Every member reaches step 4 or fails in step 3 with its whole side; no member waits
//! for one that will not come (the other side's members either all enter step 4 or all
//! send the notice), so creation never hangs. The price: an aborted creation leaves one
//! small notice, never received, at every process outside the aborting side.

use std::sync::Arc;

use runthrough_engine::{ContextId, Rank, TAG_UB};
use runthrough_ft::{Decision, Input};

use crate::{Comm, Error, ErrorMode, Group, Pod, Source, Status, TagSel};

/// Tags of the creation's private messages (leader to members: header, then body).
const HAND_HEAD: i32 = 1;
const HAND_BODY: i32 = 2;
/// Context pairs an inter-communicator takes: bridge, inner bridge, two local sides.
const PAIRS: u32 = 4;

/// An inter-communicator: this process's group (the *local* group) and the *remote*
/// group; point-to-point ranks name remote members; collectives follow MPI-4.1 §6.2.2
/// (`intercoll.rs`). Cheap to clone.
#[derive(Clone, Debug)]
pub struct InterComm {
    /// Both groups: the program's point-to-point.
    pub(crate) bridge: Comm,
    /// Both groups: the collectives' own messages.
    pub(crate) inner: Comm,
    /// This side's group.
    pub(crate) local: Comm,
    /// Bridge ranks of the local group, by local rank.
    pub(crate) locals: Arc<[usize]>,
    /// Bridge ranks of the remote group, by remote rank.
    pub(crate) remotes: Arc<[usize]>,
}

/// A nonblocking inter-communicator duplicate ([`InterComm::idup`]; advanced by
/// [`InterComm::test_dup`]).
#[derive(Debug)]
#[must_use = "a dup request does nothing unless tested"]
pub struct InterDupRequest(crate::DupRequest);

/// What a side's leader learned from the other's in step 1.
#[derive(Debug, Clone)]
struct Hand {
    /// The other side's key (leader world rank, local context, creation number).
    key: [u32; 3],
    /// The other group, as world ranks in its order.
    group: Vec<u32>,
    /// Its members recognised failed in its local communicator (world ranks).
    recognized: Vec<u32>,
}

/// FNV-1a over `words`, into the upper half of the context space, even (a scratch
/// communicator's context: above every context a creation proposes).
fn scratch_ctx(words: impl IntoIterator<Item = u32>) -> ContextId {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in words.into_iter().flat_map(u32::to_le_bytes) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    ContextId(0x8000_0000 | ((h ^ (h >> 32)) as u32 & 0x7fff_fffe))
}

impl Comm {
    /// A communicator of the same shared state over `group` on scratch context `ctx`.
    fn scratch(&self, ctx: ContextId, group: Arc<[Rank]>) -> Option<Comm> {
        let me = group.iter().position(|r| *r == self.inner.group[self.inner.me as usize])?;
        Some(Comm::new(self.inner.shared.clone(), ctx, group, me as u32, ErrorMode::ErrorsReturn))
    }

    /// Creates an inter-communicator between this communicator's group (the local group;
    /// its member `local_leader` leads) and another, disjoint group led by the process
    /// that is rank `remote_leader` of `peer` (MPI_Intercomm_create). Collective over
    /// both groups; `peer` and `remote_leader` matter at the local leader only (others
    /// pass `None`), `tag` tells concurrent creations over the same peer apart.
    ///
    /// Uniform under failures (R39): every live member of both groups gets the
    /// inter-communicator, or every one gets an error (module docs). A failure not
    /// recognised in either input communicator fails it; recognised failures are
    /// recognised in the new one. The new one inherits this communicator's error mode.
    pub fn intercomm_create(
        &self,
        local_leader: usize,
        peer: Option<&Comm>,
        remote_leader: usize,
        tag: i32,
    ) -> Result<InterComm, Error> {
        let r = self.intercomm_create_inner(local_leader, peer, remote_leader, tag);
        self.check(r)
    }

    fn intercomm_create_inner(
        &self,
        local_leader: usize,
        peer: Option<&Comm>,
        remote_leader: usize,
        tag: i32,
    ) -> Result<InterComm, Error> {
        let leader = self.world_rank(local_leader)?;
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::InvalidTag { tag });
        }
        let attempt = self.inner.inter_attempts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let key = [leader.0, self.inner.ctx.0, attempt];
        let mine: Vec<u32> = self.inner.group.iter().map(|r| r.0).collect();
        let recognized = self.recognized_world();
        // 1. The leaders swap.
        let got = if self.rank() == local_leader {
            match peer {
                Some(p) => leaders_swap(p, remote_leader, tag, key, &mine, &recognized),
                None => Err(Error::InvalidArg("intercomm_create: the local leader needs the peer communicator")),
            }
        } else {
            Err(Error::RankFailStop { rank: local_leader as u32 })
        };
        // 2. The leader hands it to its members.
        let private = self
            .scratch(scratch_ctx([self.inner.ctx.0, attempt, 0x1c0]), self.inner.group.clone())
            .ok_or(Error::ApiMisuse("intercomm_create: not a member"))?;
        let hand = hand_over(&private, local_leader, got);
        // 3. Each side agrees whether all its members have the other group.
        let side_ok = matches!(self.agreement(u32::from(hand.is_ok())), Ok(ref d) if d.flag == 1);
        let notice = Notice::new(self);
        let hand = match hand {
            Ok(h) if side_ok => h,
            other => {
                notice.send_abort(key, &mine);
                return Err(other.err().unwrap_or(Error::RankFailStop { rank: local_leader as u32 }));
            }
        };
        // 4. One agreement over both groups decides.
        let low_first = leader.0 < hand.key[0];
        let (low, high) = if low_first { (&mine, &hand.group) } else { (&hand.group, &mine) };
        let group: Arc<[Rank]> = low.iter().chain(high.iter()).map(|&w| Rank(w)).collect();
        let (lk, hk) = if low_first { (key, hand.key) } else { (hand.key, key) };
        let words = lk.into_iter().chain(hk).chain([tag as u32]).chain(group.iter().map(|r| r.0));
        let scratch = self.scratch(scratch_ctx(words), group.clone()).ok_or(Error::ApiMisuse("not a member"))?;
        let known: Vec<u32> = recognized.iter().chain(&hand.recognized).copied().collect();
        let watch = Watch { notice: &notice, key: hand.key, members: &hand.group };
        let ctx = decide_contexts(&scratch, &known, &watch)?;
        // The communicators, with the recognised failures of both inputs.
        let rec_bridge: Vec<u32> =
            group.iter().enumerate().filter(|(_, r)| known.contains(&r.0)).map(|(i, _)| i as u32).collect();
        let rec_local = self.inner.shared.engine.lock().recognized(self.inner.ctx);
        let sides = Sides { ctx, group, low: low.len(), local_low: low_first, mode: self.error_mode() };
        Ok(InterComm::assemble(&self.inner.shared, sides, &rec_bridge, &rec_local))
    }
}

/// The layout of an inter-communicator's four communicators ([`InterComm::assemble`]).
pub(crate) struct Sides {
    /// The first of its four context pairs.
    pub(crate) ctx: u32,
    /// Both groups, the low one first (world ranks).
    pub(crate) group: Arc<[Rank]>,
    /// Members of the low group.
    pub(crate) low: usize,
    /// Whether this process is in the low group.
    pub(crate) local_low: bool,
    /// The error mode of the bridge and the local communicator.
    pub(crate) mode: ErrorMode,
}

impl InterComm {
    /// The inter-communicator `s` describes, made locally (every member must make the
    /// same): recognised failures `rec_bridge` (bridge ranks) and `rec_local` (local ranks).
    pub(crate) fn assemble(
        shared: &Arc<crate::shared::Shared>,
        s: Sides,
        rec_bridge: &[u32],
        rec_local: &[u32],
    ) -> InterComm {
        let me_world = shared.rank;
        let me = s.group.iter().position(|r| r.0 == me_world).unwrap_or(0) as u32;
        let (nl, n) = (s.low, s.group.len());
        let bridge = Comm::new(shared.clone(), ContextId(s.ctx), s.group.clone(), me, s.mode.clone());
        let inner = Comm::new(shared.clone(), ContextId(s.ctx + 2), s.group.clone(), me, ErrorMode::ErrorsReturn);
        bridge.recognize(rec_bridge);
        inner.recognize(rec_bridge);
        let (side_ctx, range, other) = if s.local_low { (s.ctx + 4, 0..nl, nl..n) } else { (s.ctx + 6, nl..n, 0..nl) };
        let local_group: Arc<[Rank]> = s.group[range.clone()].into();
        let local = Comm::new(shared.clone(), ContextId(side_ctx), local_group, me - range.start as u32, s.mode);
        local.recognize(rec_local);
        InterComm { bridge, inner, local, locals: range.collect(), remotes: other.collect() }
    }
}

/// Step 1 at a leader: swap (key, group, recognised failures) with the other leader.
fn leaders_swap(
    peer: &Comm,
    remote_leader: usize,
    tag: i32,
    key: [u32; 3],
    group: &[u32],
    recognized: &[u32],
) -> Result<Hand, Error> {
    let other = peer.world_rank(remote_leader)?;
    if group.contains(&other.0) {
        return Err(Error::InvalidArg("intercomm_create: the remote leader is in the local group"));
    }
    let head = [key[0], key[1], key[2], group.len() as u32, recognized.len() as u32];
    // A dead other leader is this creation's failure, not a status to look into.
    let lost = |e: Error| match e {
        Error::InStatus { rank } => Error::RankFailStop { rank },
        e => e,
    };
    let mut theirs = [0u32; 5];
    peer.sendrecv(&head, remote_leader, tag, &mut theirs, remote_leader, tag).map_err(lost)?;
    let body: Vec<u32> = group.iter().chain(recognized).copied().collect();
    let (n, nrec) = (theirs[3] as usize, theirs[4] as usize);
    let mut got = vec![0u32; n + nrec];
    peer.sendrecv(&body, remote_leader, tag, &mut got, remote_leader, tag).map_err(lost)?;
    if got[..n].iter().any(|w| group.contains(w)) || theirs[0] != other.0 {
        return Err(Error::InvalidArg("intercomm_create: the two groups overlap"));
    }
    let recognized = got.split_off(n);
    Ok(Hand { key: [theirs[0], theirs[1], theirs[2]], group: got, recognized })
}

/// Step 2: the leader sends what it got (or that it got nothing) to every member; the
/// others receive it. A member whose leader died gets the error.
fn hand_over(private: &Comm, leader: usize, got: Result<Hand, Error>) -> Result<Hand, Error> {
    if private.rank() == leader {
        let (head, body) = match &got {
            Ok(h) => {
                let head = [1, h.key[0], h.key[1], h.key[2], h.group.len() as u32, h.recognized.len() as u32];
                (head, h.group.iter().chain(&h.recognized).copied().collect::<Vec<u32>>())
            }
            Err(_) => ([0; 6], Vec::new()),
        };
        for m in (0..private.size()).filter(|&m| m != leader) {
            // A dead member is the agreements' business, not the leader's.
            let _ = private.send(&head, m, HAND_HEAD).and_then(|()| private.send(&body, m, HAND_BODY));
        }
        return got;
    }
    let mut head = [0u32; 6];
    private.recv(&mut head, leader, HAND_HEAD)?;
    let (n, nrec) = (head[4] as usize, head[5] as usize);
    let mut body = vec![0u32; n + nrec];
    private.recv(&mut body, leader, HAND_BODY)?;
    if head[0] != 1 {
        return Err(Error::RankFailStop { rank: leader as u32 });
    }
    let recognized = body.split_off(n);
    Ok(Hand { key: [head[1], head[2], head[3]], group: body, recognized })
}

/// The abort notices of step 3, on a context of the whole job.
struct Notice {
    comm: Comm,
}

/// What a member waiting in step 4 watches: the other side's abort notice.
struct Watch<'a> {
    notice: &'a Notice,
    key: [u32; 3],
    members: &'a [u32],
}

impl Notice {
    fn new(c: &Comm) -> Notice {
        let shared = &c.inner.shared;
        let n = shared.engine.lock().size();
        let world: Arc<[Rank]> = (0..n).map(Rank).collect();
        let me = c.inner.group[c.inner.me as usize];
        let comm = Comm::new(shared.clone(), scratch_ctx([0x1c_ab07]), world, me.0, ErrorMode::ErrorsReturn);
        Notice { comm }
    }

    fn tag(key: [u32; 3]) -> i32 {
        (scratch_ctx(key).0 >> 1) as i32 & TAG_UB
    }

    /// Tells every process outside `side` that the creation keyed `key` failed there.
    fn send_abort(&self, key: [u32; 3], side: &[u32]) {
        for w in (0..self.comm.size() as u32).filter(|w| !side.contains(w)) {
            let _ = self.comm.send(&key, w as usize, Notice::tag(key));
        }
    }

    /// Whether a member of `w.members` said the creation keyed `w.key` failed on its side.
    fn aborted(&self, w: &Watch<'_>) -> bool {
        let tag = Notice::tag(w.key);
        w.members.iter().any(|&m| matches!(self.comm.iprobe(Source::Rank(m as usize), TagSel::Tag(tag)), Ok(Some(_))))
    }
}

/// Step 4: agrees over the bridge's members on the new contexts (the largest proposal,
/// then whether every member could take it); a failure outside `known` fails it.
fn decide_contexts(scratch: &Comm, known: &[u32], watch: &Watch<'_>) -> Result<u32, Error> {
    let shared = &scratch.inner.shared;
    loop {
        let d = agree_watching(scratch, Input { flag: 1, max: shared.ctx_proposal(), signals: Vec::new() }, watch)?;
        new_failure(scratch, &d, known)?;
        let ctx = d.max;
        let claimed = shared.ctx_claim_pairs(ctx, PAIRS);
        let d2 = agree_watching(scratch, Input::flag(u32::from(claimed)), watch);
        let ok = matches!(&d2, Ok(d) if d.flag == 1 && new_failure(scratch, d, known).is_ok());
        if !ok && claimed {
            shared.ctx_release_pairs(ctx, PAIRS);
        }
        let d2 = d2?;
        new_failure(scratch, &d2, known)?;
        if ok {
            return Ok(ctx);
        }
    }
}

/// `Err(RankFailStop)` naming the first member the decision found failed that is not
/// in `known` (world ranks).
fn new_failure(c: &Comm, d: &Decision, known: &[u32]) -> Result<(), Error> {
    match d.failed.iter().find(|w| !known.contains(w)) {
        Some(w) => {
            let rank = c.inner.group.iter().position(|r| r.0 == *w).unwrap_or(0) as u32;
            Err(Error::RankFailStop { rank })
        }
        None => Ok(()),
    }
}

/// One agreement over `scratch`'s members; leaves with `RankFailStop` when the other
/// side's abort notice arrives first (nobody can decide then).
fn agree_watching(scratch: &Comm, input: Input, watch: &Watch<'_>) -> Result<Decision, Error> {
    let mut inst = Some(scratch.agreement_start_input(input)?);
    let mut waiter = scratch.waiter();
    loop {
        if let Some(d) = scratch.poll_agreement(&mut inst) {
            return Ok(d);
        }
        if watch.notice.aborted(watch) {
            let rank = scratch.inner.group.iter().position(|r| r.0 == watch.key[0]).unwrap_or(0) as u32;
            return Err(Error::RankFailStop { rank });
        }
        waiter.snooze();
    }
}

impl InterComm {
    /// This process's rank in the local group.
    pub fn rank(&self) -> usize {
        self.local.rank()
    }

    /// The size of the local group.
    pub fn size(&self) -> usize {
        self.locals.len()
    }

    /// The size of the remote group, failed members included (R39).
    pub fn remote_size(&self) -> usize {
        self.remotes.len()
    }

    /// The local group.
    pub fn group(&self) -> Group {
        self.local.group()
    }

    /// The remote group.
    pub fn remote_group(&self) -> Group {
        let g = self.bridge.members();
        Group::new(self.remotes.iter().map(|&i| g[i]).collect(), g[self.bridge.rank()])
    }

    /// The communicator of the local group alone (its own context).
    pub fn local_comm(&self) -> &Comm {
        &self.local
    }

    /// The communicator of both groups the program's point-to-point runs on (ranks:
    /// the group whose leader has the lower world rank first); [`InterComm::bridge_rank`]
    /// translates remote ranks.
    pub fn bridge(&self) -> &Comm {
        &self.bridge
    }

    /// The bridge rank of remote member `r`.
    pub fn bridge_rank(&self, r: usize) -> Result<usize, Error> {
        let size = self.remotes.len() as u32;
        self.remotes.get(r).copied().ok_or(Error::InvalidRank { rank: r as i64, size })
    }

    /// The remote rank of bridge rank `b` (`None` for a local member).
    pub fn remote_rank(&self, b: usize) -> Option<usize> {
        self.remotes.iter().position(|&x| x == b)
    }

    /// Sends `buf` to remote member `dest`.
    pub fn send<T: Pod>(&self, buf: &[T], dest: usize, tag: i32) -> Result<(), Error> {
        let b = self.bridge.check(self.bridge_rank(dest))?;
        self.bridge.send(buf, b, tag)
    }

    /// Receives from remote member `src` (or any); the status names the remote rank.
    pub fn recv<T: Pod>(&self, buf: &mut [T], src: impl Into<Source>, tag: impl Into<TagSel>) -> Result<Status, Error> {
        let src = match src.into() {
            Source::Rank(r) => Source::Rank(self.bridge.check(self.bridge_rank(r))?),
            s => s,
        };
        let mut st = self.bridge.recv(buf, src, tag)?;
        st.source = self.remote_rank(st.source).unwrap_or(st.source);
        Ok(st)
    }

    /// The intra-communicator of both groups (MPI_Intercomm_merge): the group whose
    /// members passed `high == false` first, each group in its own order; when both
    /// passed the same, the group whose leader has the lower world rank first. Collective
    /// over both groups and uniform, like [`Comm::dup`]; recognised failures stay
    /// recognised.
    pub fn merge(&self, high: bool) -> Result<Comm, Error> {
        let b = &self.bridge;
        let r = b.create_exchange_pairs(0, i32::from(high), 1).map(|(entries, ctx)| {
            let side_high = |side: &[usize]| side.iter().find_map(|&i| entries[i]).map_or(0, |e| e.1);
            let (lh, rh) = (side_high(&self.locals), side_high(&self.remotes));
            let local_low = self.locals.first() < self.remotes.first();
            let local_first = if lh != rh { lh < rh } else { local_low };
            let order: Vec<usize> = if local_first {
                self.locals.iter().chain(self.remotes.iter()).copied().collect()
            } else {
                self.remotes.iter().chain(self.locals.iter()).copied().collect()
            };
            let g = b.members();
            let group: Arc<[Rank]> = order.iter().map(|&i| g[i]).collect();
            let me = order.iter().position(|&i| i == b.rank()).unwrap_or(0) as u32;
            let c = Comm::new(b.inner.shared.clone(), ContextId(ctx), group, me, b.error_mode());
            let rec = b.inner.shared.engine.lock().recognized(b.inner.ctx);
            let moved: Vec<u32> =
                order.iter().enumerate().filter(|(_, i)| rec.contains(&(**i as u32))).map(|(n, _)| n as u32).collect();
            c.recognize(&moved);
            c
        });
        b.check(r)
    }

    /// A new inter-communicator of the same groups (MPI_Comm_dup); uniform like
    /// [`Comm::dup`].
    pub fn dup(&self) -> Result<InterComm, Error> {
        self.split_inner(Some(0), self.rank() as i32)?.ok_or(Self::no_remote())
    }

    /// Starts a nonblocking duplicate (MPI_Comm_idup): the exchange runs in the engine,
    /// [`InterComm::test_dup`] advances it and gives the duplicate. Every member of both
    /// groups calls it; uniform like [`InterComm::dup`].
    pub fn idup(&self) -> Result<InterDupRequest, Error> {
        self.bridge.check(self.bridge.idup_pairs(PAIRS)).map(InterDupRequest)
    }

    /// Advances `r`; the duplicate (or the error) once it ended, then `None`.
    pub fn test_dup(&self, r: &mut InterDupRequest) -> Option<Result<InterComm, Error>> {
        let out = self.bridge.test_dup_entries(&mut r.0)?.and_then(|(entries, ctx)| {
            let (loc, rem) = self.sides(&entries, 0);
            if rem.is_empty() {
                return Err(Self::no_remote());
            }
            Ok(self.rebuild(ctx, &loc, &rem))
        });
        Some(self.bridge.check(out))
    }

    /// The error of a duplicate with no live remote member left (every one failed).
    fn no_remote() -> Error {
        Error::RankFailStop { rank: 0 }
    }

    /// Splits both groups by `color` (MPI_Comm_split on an inter-communicator): each
    /// process gets the inter-communicator of the members of its color on each side,
    /// ordered by `key` then rank; `None` for `color == None` or when the other side has
    /// no member of that color. Uniform like [`Comm::split`].
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<InterComm>, Error> {
        self.split_inner(color, key)
    }

    fn split_inner(&self, color: Option<u32>, key: i32) -> Result<Option<InterComm>, Error> {
        let b = &self.bridge;
        let c = color.map_or(-1, |c| (c & 0x7fff_ffff) as i32);
        let r = b.create_exchange_pairs(c, key, PAIRS).map(|(entries, ctx)| {
            let (loc, rem) = self.sides(&entries, color?);
            if rem.is_empty() {
                return None;
            }
            Some(self.rebuild(ctx, &loc, &rem))
        });
        b.check(r)
    }

    /// The bridge members of each side whose exchanged entry has `color`, ordered by key
    /// then rank (recognised failures, which sent no entry, are left out).
    fn sides(&self, entries: &[Option<crate::comm::Entry>], color: u32) -> (Vec<usize>, Vec<usize>) {
        let pick = |side: &[usize]| {
            let mut m: Vec<(i32, usize)> = side
                .iter()
                .enumerate()
                .filter_map(|(r, &i)| entries[i].filter(|e| e.0 == (color & 0x7fff_ffff) as i32).map(|e| (e.1, r)))
                .collect();
            m.sort_unstable();
            m.into_iter().map(|(_, r)| side[r]).collect::<Vec<usize>>()
        };
        (pick(&self.locals), pick(&self.remotes))
    }

    /// The inter-communicator of bridge members `loc` (local, in order) and `rem` on the
    /// four context pairs from `ctx`, recognised failures carried.
    fn rebuild(&self, ctx: u32, loc: &[usize], rem: &[usize]) -> InterComm {
        let b = &self.bridge;
        let g = b.members();
        let local_low = self.locals.first() < self.remotes.first();
        let (low, high) = if local_low { (loc, rem) } else { (rem, loc) };
        let order: Vec<usize> = low.iter().chain(high).copied().collect();
        let group: Arc<[Rank]> = order.iter().map(|&i| g[i]).collect();
        let me = order.iter().position(|&i| i == b.rank()).unwrap_or(0) as u32;
        let shared = &b.inner.shared;
        let rec = shared.engine.lock().recognized(b.inner.ctx);
        let moved: Vec<u32> =
            order.iter().enumerate().filter(|(_, i)| rec.contains(&(**i as u32))).map(|(n, _)| n as u32).collect();
        let bridge = Comm::new(shared.clone(), ContextId(ctx), group.clone(), me, b.error_mode());
        let inner = Comm::new(shared.clone(), ContextId(ctx + 2), group.clone(), me, ErrorMode::ErrorsReturn);
        bridge.recognize(&moved);
        inner.recognize(&moved);
        let lgroup: Arc<[Rank]> = loc.iter().map(|&i| g[i]).collect();
        let lme = loc.iter().position(|&i| i == b.rank()).unwrap_or(0) as u32;
        let side_ctx = if local_low { ctx + 4 } else { ctx + 6 };
        let local = Comm::new(shared.clone(), ContextId(side_ctx), lgroup, lme, b.error_mode());
        let lrec: Vec<u32> =
            loc.iter().enumerate().filter(|(_, i)| rec.contains(&(**i as u32))).map(|(n, _)| n as u32).collect();
        local.recognize(&lrec);
        let (nl, nh) = (low.len(), high.len());
        let (locals, remotes): (Vec<usize>, Vec<usize>) = if local_low {
            ((0..nl).collect(), (nl..nl + nh).collect())
        } else {
            ((nl..nl + nh).collect(), (0..nl).collect())
        };
        InterComm { bridge, inner, local, locals: locals.into(), remotes: remotes.into() }
    }

    /// Validates over both groups (R39): one agreement on the failed members of both;
    /// they become recognised on the bridge, the inner bridge and the local communicator,
    /// and the collectives work again. Returns the failed group.
    pub fn validate(&self) -> Result<Group, Error> {
        let failed = self.bridge.validate()?;
        self.validated(&failed);
        Ok(failed)
    }

    /// Applies a validate of the bridge that decided `failed` (a nonblocking one, run
    /// on [`InterComm::bridge`]) to the inner bridge and the local communicator.
    pub fn validated(&self, failed: &Group) {
        let f: Vec<u32> = failed.world_ranks().into_iter().map(|w| w as u32).collect();
        let pick = |c: &Comm| -> Vec<u32> {
            c.members().iter().enumerate().filter(|(_, r)| f.contains(&r.0)).map(|(i, _)| i as u32).collect()
        };
        self.inner.recognize(&pick(&self.inner));
        self.local.recognize(&pick(&self.local));
    }

    /// Agrees on the AND of `flag` over the live members of both groups.
    pub fn agree(&self, flag: i32) -> Result<i32, Error> {
        self.bridge.agree(flag)
    }

    /// Revokes the inter-communicator everywhere (both groups).
    pub fn revoke(&self) {
        self.bridge.revoke();
        self.inner.revoke();
    }

    /// Whether it is revoked.
    pub fn is_revoked(&self) -> bool {
        self.bridge.is_revoked()
    }

    /// Whether collectives are enabled (no unrecognised failure in either group).
    pub fn collectives_enabled(&self) -> bool {
        self.bridge.collectives_enabled()
    }

    /// The failed members known here, as a group (both sides).
    pub fn group_failed(&self) -> Group {
        self.bridge.group_failed()
    }

    /// A new inter-communicator of the live members of both groups (ULFM's shrink):
    /// one agreement decides the failed set and the contexts; uniform. Fails when a side
    /// has no live member left.
    pub fn shrink(&self) -> Result<InterComm, Error> {
        let b = &self.bridge;
        let r = (|| {
            let d = b.agreement_shrink(PAIRS)?;
            let alive = |side: &[usize]| -> Vec<usize> {
                side.iter().copied().filter(|&i| !d.1.contains(&b.members()[i].0)).collect()
            };
            let (loc, rem) = (alive(&self.locals), alive(&self.remotes));
            if rem.is_empty() || loc.is_empty() {
                return Err(Error::RankFailStop { rank: 0 });
            }
            Ok(self.rebuild(d.0, &loc, &rem))
        })();
        b.check(r)
    }

    /// The error mode (the bridge's, which point-to-point and collectives use).
    pub fn error_mode(&self) -> ErrorMode {
        self.bridge.error_mode()
    }

    /// Sets the error mode of the inter-communicator.
    pub fn set_error_mode(&self, mode: ErrorMode) {
        self.local.set_error_mode(mode.clone());
        self.bridge.set_error_mode(mode);
    }
}
