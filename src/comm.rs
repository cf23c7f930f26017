//! Communicators: a group of ranks, a context, an error mode; point-to-point operations.
//!
//! Ranks given to and reported by a communicator are its own (0..size). Messages on
//! different communicators never match each other (each has its own context; its
//! collectives use the next one). Error modes (R2): the world starts with
//! [`ErrorMode::ErrorsAreFatal`]; new communicators inherit their parent's mode.

use runthrough_engine::SendTarget;
use std::fmt;
use std::io::Write;
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::{self as engine, ContextId, Rank, Tag, Waiter, TAG_UB};

use crate::shared::{FatalScope, Shared};
use crate::{Error, Group, Pod, Status};

/// A user error handler: called with the communicator and the error, which is then
/// returned to the caller.
pub type Handler = Arc<dyn Fn(&Comm, &Error) + Send + Sync>;

/// What a communicator does when one of its operations fails (R2, R3).
#[derive(Clone)]
pub enum ErrorMode {
    /// Abort: by default the processes of this communicator's group, as `abort(comm)`
    /// (MPI Forum ticket #324, R3); job-wide under [`FatalScope::Job`]. The world's default.
    ErrorsAreFatal,
    /// Abort the processes of this communicator's group, whatever the fatal scope (MPI-4's
    /// `MPI_ERRORS_ABORT`).
    ErrorsAbort,
    /// Return the error to the caller.
    ErrorsReturn,
    /// Call a handler, then return the error.
    Handler(Handler),
}

impl fmt::Debug for ErrorMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorMode::ErrorsAreFatal => f.write_str("ErrorsAreFatal"),
            ErrorMode::ErrorsAbort => f.write_str("ErrorsAbort"),
            ErrorMode::ErrorsReturn => f.write_str("ErrorsReturn"),
            ErrorMode::Handler(_) => f.write_str("Handler(..)"),
        }
    }
}

/// A member's (color, key) in a communicator creation.
pub(crate) type Entry = (i32, i32);

/// What a member knows after the exchange of a creation ([`Comm::exchange_claim`]).
#[derive(Debug)]
pub(crate) struct Claim {
    ctx: u32,
    /// How many context pairs from `ctx` the creation takes (an inter-communicator
    /// takes three).
    pairs: u32,
    claimed: bool,
    exchanged: Result<(), Error>,
    recognized: Vec<u32>,
}

impl Claim {
    /// Bit of the agreement's flag: the exchange worked here.
    const EXCHANGED: u32 = 1;
    /// Bit of the agreement's flag: the context chosen is free here (no other thread's
    /// creation holds it).
    const CLAIMED: u32 = 2;

    /// This member's flag for the creation's agreement.
    pub(crate) fn flag(&self) -> u32 {
        (if self.exchanged.is_ok() { Self::EXCHANGED } else { 0 }) | if self.claimed { Self::CLAIMED } else { 0 }
    }
}

/// A creation's outcome after its agreement ([`Comm::exchange_verdict`]).
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Every member chooses a context again.
    Retry,
    /// The creation failed (uniformly).
    Fail(Error),
    /// The members' entries and the new context.
    Done(Vec<Option<Entry>>, u32),
}

/// Which sources a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Any source (MPI_ANY_SOURCE).
    Any,
    /// This rank of the communicator.
    Rank(usize),
    /// A negative rank other than the wildcard: always an invalid-rank error.
    Invalid(i64),
}

/// Which tags a receive accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TagSel {
    /// Any tag (MPI_ANY_TAG).
    Any,
    /// This tag.
    Tag(i32),
}

/// Receive from any source.
pub const ANY_SOURCE: Source = Source::Any;
/// Receive any tag.
pub const ANY_TAG: TagSel = TagSel::Any;

impl From<usize> for Source {
    fn from(r: usize) -> Self {
        Source::Rank(r)
    }
}

impl From<u32> for Source {
    fn from(r: u32) -> Self {
        Source::Rank(r as usize)
    }
}

impl From<i32> for Source {
    /// Non-negative values name a rank; negative ones are invalid (use [`ANY_SOURCE`]).
    fn from(r: i32) -> Self {
        if r < 0 {
            Source::Invalid(r.into())
        } else {
            Source::Rank(r as usize)
        }
    }
}

impl From<i32> for TagSel {
    fn from(t: i32) -> Self {
        TagSel::Tag(t)
    }
}

pub(crate) struct CommInner {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ctx: ContextId,
    pub(crate) group: Arc<[Rank]>,
    pub(crate) me: u32,
    mode: Mutex<ErrorMode>,
    /// Agreements (validate, agree) begun on this communicator.
    agreements: std::sync::atomic::AtomicU32,
    /// The node's collective area and this communicator's slot in it, when it has
    /// shared-memory collectives (kept here so they start without the engine lock).
    pub(crate) shm: Option<(Arc<runthrough_engine::coll::ShmColl>, usize)>,
    /// Its topology (`topo.rs`), set once when a topology constructor made it.
    pub(crate) topo: std::sync::OnceLock<Arc<crate::topo::Topology>>,
    /// Inter-communicator creations begun with this as the local communicator (each
    /// side numbers its own; `intercomm.rs`).
    pub(crate) inter_attempts: std::sync::atomic::AtomicU32,
    /// `create_group` calls so far by (context, tag, members) hash.
    group_creations: Mutex<std::collections::HashMap<u64, u32>>,
}

impl Drop for CommInner {
    fn drop(&mut self) {
        // Freeing completes whatever has failed (R26).
        self.shared.engine.lock().free_comm(self.ctx);
    }
}

/// A communicator handle (cheap to clone; clones are the same communicator).
#[derive(Clone)]
pub struct Comm {
    pub(crate) inner: Arc<CommInner>,
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Comm")
            .field("ctx", &self.inner.ctx)
            .field("rank", &self.inner.me)
            .field("size", &self.inner.group.len())
            .finish()
    }
}

fn valid_tag(tag: i32) -> Result<Tag, Error> {
    if (0..=TAG_UB).contains(&tag) {
        Ok(Tag(tag))
    } else {
        Err(Error::InvalidTag { tag })
    }
}

impl Comm {
    pub(crate) fn new(shared: Arc<Shared>, ctx: ContextId, group: Arc<[Rank]>, me: u32, mode: ErrorMode) -> Self {
        let shm = {
            let mut e = shared.engine.lock();
            e.register_comm(ctx, &group);
            e.shm_coll().zip(e.shm_slot_of(ctx))
        };
        Comm {
            inner: Arc::new(CommInner {
                shared,
                ctx,
                group,
                me,
                mode: Mutex::new(mode),
                agreements: std::sync::atomic::AtomicU32::new(0),
                shm,
                topo: std::sync::OnceLock::new(),
                inter_attempts: std::sync::atomic::AtomicU32::new(0),
                group_creations: Mutex::default(),
            }),
        }
    }

    fn my_world_rank(&self) -> Rank {
        self.inner.group[self.inner.me as usize]
    }

    /// The group of the communicator (failed members included).
    pub fn group(&self) -> Group {
        Group::new(self.inner.group.to_vec(), self.my_world_rank())
    }

    /// The group of this communicator's processes known failed here, in the order the
    /// failures became known (R8; local, no communication).
    pub fn group_failed(&self) -> Group {
        let failed = self.inner.shared.engine.lock().failed_in(self.inner.ctx);
        Group::new(failed.iter().map(|&l| self.inner.group[l as usize]).collect(), self.my_world_rank())
    }

    /// Re-enables ANY_SOURCE receives disabled by failures and returns the failed group
    /// known now (R14); the next new failure of a member disables them again. Safe to call
    /// from several threads.
    pub fn reenable_any_source(&self) -> Group {
        let failed = self.inner.shared.engine.lock().reenable_any_source(self.inner.ctx);
        Group::new(failed.iter().map(|&l| self.inner.group[l as usize]).collect(), self.my_world_rank())
    }

    /// Whether ANY_SOURCE receives are enabled (false after a member's failure until
    /// [`Comm::reenable_any_source`]) (R13).
    pub fn any_source_enabled(&self) -> bool {
        self.inner.shared.engine.lock().any_source_enabled(self.inner.ctx)
    }

    /// Revokes the communicator (ULFM's `MPIX_Comm_revoke`, R29): every pending and
    /// later operation on it, at every member, fails with [`Error::Revoked`] — except
    /// [`Comm::agree`], [`Comm::shrink`], [`Comm::ack_failed`], [`Comm::get_failed`] and
    /// [`Comm::free`]. Local and non-blocking: the notice is sent to every member, and
    /// every member forwards it on first receipt, so it reaches every live member even
    /// when members (this one included) fail while it spreads.
    pub fn revoke(&self) {
        let mut e = self.inner.shared.engine.lock();
        e.revoke(self.inner.ctx);
        e.progress();
    }

    /// Whether the communicator is revoked here (ULFM's `MPIX_Comm_is_revoked`): by
    /// [`Comm::revoke`] at any member, or corrupted (R28).
    pub fn is_revoked(&self) -> bool {
        self.inner.shared.engine.lock().is_revoked(self.inner.ctx)
    }

    /// The group of members known failed here (ULFM's `MPIX_Comm_get_failed`; local,
    /// in the order the failures became known): the same as [`Comm::group_failed`].
    pub fn get_failed(&self) -> Group {
        self.group_failed()
    }

    /// Acknowledges the first `n` failures of [`Comm::get_failed`] (ULFM's
    /// `MPIX_Comm_ack_failed`) and returns how many are acknowledged now (never fewer
    /// than before, never more than are known). Once every failure known is
    /// acknowledged, ANY_SOURCE receives work again (R13/R14); a later failure disables
    /// them until it is acknowledged too.
    pub fn ack_failed(&self, n: usize) -> usize {
        self.inner.shared.engine.lock().ack_failed(self.inner.ctx, n)
    }

    /// This process's rank in the communicator.
    pub fn rank(&self) -> usize {
        self.inner.me as usize
    }

    /// Number of processes in the communicator (failed ones included, R22).
    pub fn size(&self) -> usize {
        self.inner.group.len()
    }

    /// The world rank of communicator rank `r`.
    pub(crate) fn world_rank(&self, r: usize) -> Result<Rank, Error> {
        self.inner
            .group
            .get(r)
            .copied()
            .ok_or(Error::InvalidRank { rank: r as i64, size: self.inner.group.len() as u32 })
    }

    /// The error mode.
    pub fn error_mode(&self) -> ErrorMode {
        self.inner.mode.lock().clone()
    }

    /// Sets the error mode.
    pub fn set_error_mode(&self, mode: ErrorMode) {
        *self.inner.mode.lock() = mode;
    }

    /// Applies the error mode to an outcome (R2, R3).
    #[inline]
    pub(crate) fn check<T>(&self, r: Result<T, Error>) -> Result<T, Error> {
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(self.check_error(e)),
        }
    }

    /// Applies this communicator's error mode to `e` as its own operations do (`check`'s
    /// error path). The C layer keeps every communicator in `ErrorsReturn` and runs MPI's
    /// handlers itself, so for it this maps a failure to the communicator-level error
    /// (R28/R29).
    #[cold]
    #[inline(never)]
    pub fn check_error(&self, e: Error) -> Error {
        // On a revoked or corrupted communicator that is the error (R28, R29), also for
        // an operation that stopped at a failed member or a collective that gave up.
        let e = match e {
            Error::RankFailStop { .. } | Error::InStatus { .. } => self.comm_level_error().unwrap_or(e),
            e => e,
        };
        let mode = self.inner.mode.lock().clone();
        match mode {
            ErrorMode::ErrorsReturn => e,
            ErrorMode::Handler(h) => {
                h(self, &e);
                e
            }
            ErrorMode::ErrorsAreFatal if self.inner.shared.fatal_scope() == FatalScope::Job => {
                fatal_message(self, &e, "job");
                let all: Vec<u32> = (0..self.inner.shared.world_size).collect();
                self.inner.shared.abort(&all, e.exit_code())
            }
            ErrorMode::ErrorsAreFatal | ErrorMode::ErrorsAbort => {
                fatal_message(self, &e, "communicator group");
                self.abort(e.exit_code())
            }
        }
    }

    /// Aborts the processes of this communicator's group (this one included) with
    /// `code`, as `MPI_Abort(comm, code)` with the scope of R3.
    pub fn abort(&self, code: i32) -> ! {
        let ranks: Vec<u32> = self.inner.group.iter().map(|r| r.0).collect();
        self.inner.shared.abort(&ranks, code)
    }

    pub(crate) fn waiter(&self) -> Waiter {
        self.inner.shared.waiter()
    }

    #[inline]
    pub(crate) fn pattern(&self, src: Source, tag: TagSel) -> Result<(Pattern, Option<Rank>), Error> {
        let (src, peer) = match src {
            Source::Any => (None, None),
            Source::Rank(r) => (Some(r as u32), Some(self.world_rank(r)?)),
            Source::Invalid(r) => return Err(Error::InvalidRank { rank: r, size: self.size() as u32 }),
        };
        let tag = match tag {
            TagSel::Any => None,
            TagSel::Tag(t) => Some(valid_tag(t)?),
        };
        Ok((Pattern { ctx: self.inner.ctx, src, tag }, peer))
    }

    /// The world rank of `dest` and the checked `tag` of a send (argument errors through
    /// the error mode, R4).
    #[inline]
    pub(crate) fn destination(&self, dest: usize, tag: i32) -> Result<(Rank, Tag), Error> {
        let peer = self.check(self.world_rank(dest))?;
        Ok((peer, self.check(valid_tag(tag))?))
    }

    /// Sends `buf` to `dest` and waits until the buffer may be reused.
    pub fn send<T: Pod>(&self, buf: &[T], dest: usize, tag: i32) -> Result<(), Error> {
        let (peer, tag) = self.destination(dest, tag)?;
        let (eng, ctx, me) = (&self.inner.shared.engine, self.inner.ctx, self.inner.me);
        let r = engine::send(eng, SendTarget { ctx, src: me, dest: dest as u32, peer, tag }, bytemuck::cast_slice(buf));
        self.check(r).map(drop)
    }

    /// Receives into `buf`; the status tells the source, tag and length in bytes.
    pub fn recv<T: Pod>(&self, buf: &mut [T], src: impl Into<Source>, tag: impl Into<TagSel>) -> Result<Status, Error> {
        let (pattern, peer) = self.check(self.pattern(src.into(), tag.into()))?;
        let r = engine::recv(&self.inner.shared.engine, pattern, peer, bytemuck::cast_slice_mut(buf));
        self.check(r)
    }

    /// Sends and receives at once (no deadlock whatever the peers' order). A failed peer
    /// (either side) gives `InStatus { rank }` naming it, and the error mode is applied
    /// once for the whole operation (R16).
    pub fn sendrecv<S: Pod, R: Pod>(
        &self,
        sendbuf: &[S],
        dest: usize,
        sendtag: i32,
        recvbuf: &mut [R],
        src: impl Into<Source>,
        recvtag: impl Into<TagSel>,
    ) -> Result<Status, Error> {
        let (pattern, src_peer) = self.check(self.pattern(src.into(), recvtag.into()))?;
        let (dest_peer, tag) = self.destination(dest, sendtag)?;
        let (sent, got) = engine::sendrecv(
            &self.inner.shared.engine,
            SendTarget { ctx: self.inner.ctx, src: self.inner.me, dest: dest as u32, peer: dest_peer, tag },
            bytemuck::cast_slice(sendbuf),
            pattern,
            src_peer,
            bytemuck::cast_slice_mut(recvbuf),
        );
        let out = match (sent, got) {
            (_, Err(Error::RankFailStop { rank })) | (Err(Error::RankFailStop { rank }), _) => {
                Err(Error::InStatus { rank })
            }
            (Err(e), _) => Err(e),
            (Ok(_), got) => got,
        };
        self.check(out)
    }

    /// Whether a message matching `src`/`tag` can be received now; its status if so.
    pub fn iprobe(&self, src: impl Into<Source>, tag: impl Into<TagSel>) -> Result<Option<Status>, Error> {
        let (pattern, _) = self.check(self.pattern(src.into(), tag.into()))?;
        let mut e = self.inner.shared.engine.lock();
        e.progress();
        Ok(e.probe_unexpected(&pattern))
    }

    /// Waits until a message matching `src`/`tag` can be received; returns its status.
    pub fn probe(&self, src: impl Into<Source>, tag: impl Into<TagSel>) -> Result<Status, Error> {
        let (src, tag) = (src.into(), tag.into());
        let mut waiter = self.waiter();
        loop {
            if let Some(st) = self.iprobe(src, tag)? {
                return Ok(st);
            }
            waiter.snooze();
        }
    }

    /// A new communicator with the same group and a new context; collective over the
    /// live members, and uniform (R23–R25): it requires a collectively active input, and
    /// either every live member gets the new communicator or every one gets
    /// `RankFailStop`. Recognised failed members stay recognised failures in the copy.
    /// It inherits this communicator's error mode.
    pub fn dup(&self) -> Result<Comm, Error> {
        let r = self.create_exchange(0, self.rank() as i32).map(|(_, ctx)| self.dup_on(ctx));
        self.check(r)
    }

    /// [`Comm::dup`], and the two words every member gave (`None` for recognised failed
    /// members), from the same creation exchange: uniform as `dup` is.
    pub(crate) fn dup_tagged(&self, a: i32, b: i32) -> Result<(Comm, Vec<Option<Entry>>), Error> {
        let r = self.create_exchange(a & 0x7fff_ffff, b).map(|(entries, ctx)| (self.dup_on(ctx), entries));
        self.check(r)
    }

    /// Splits the communicator by `color` (`None` = MPI_UNDEFINED: no new communicator
    /// for this process), ordering each part by `key` then rank. Collective over the live
    /// members and uniform like [`Comm::dup`]; recognised failed members act as
    /// UNDEFINED (R25), so splitting by one color yields the live members.
    pub fn split(&self, color: Option<u32>, key: i32) -> Result<Option<Comm>, Error> {
        let c = color.map_or(-1, |c| (c & 0x7fff_ffff) as i32);
        let r = self.create_exchange(c, key).map(|(entries, ctx)| {
            let mine = color?;
            let mut members: Vec<(i32, usize)> = entries
                .iter()
                .enumerate()
                .filter_map(|(r, e)| e.filter(|e| e.0 == mine as i32 & 0x7fff_ffff).map(|e| (e.1, r)))
                .collect();
            members.sort_unstable();
            let group: Arc<[Rank]> = members.iter().map(|&(_, r)| self.inner.group[r]).collect();
            let me = members.iter().position(|&(_, r)| r == self.rank())? as u32;
            Some(Comm::new(self.inner.shared.clone(), ContextId(ctx), group, me, self.error_mode()))
        });
        self.check(r)
    }

    /// A communicator of the members of `group` (a subset of this communicator's, in
    /// the group's order; MPI_Comm_create): collective over the live members and uniform
    /// like [`Comm::dup`]; processes outside `group` get `None`. Every member must pass
    /// the same group. Members of `group` recognised failed here stay recognised failed
    /// in the new communicator.
    pub fn create(&self, group: &Group) -> Result<Option<Comm>, Error> {
        let r = (|| {
            let locals: Vec<usize> = group
                .ranks()
                .iter()
                .map(|w| self.inner.group.iter().position(|g| g == w))
                .collect::<Option<_>>()
                .ok_or(Error::InvalidArg("create: the group is not a subset of the communicator"))?;
            let mine = locals.iter().position(|&l| l == self.rank());
            let (_, ctx) = self.create_exchange(if mine.is_some() { 0 } else { -1 }, mine.unwrap_or(0) as i32)?;
            let Some(me) = mine else { return Ok(None) };
            let members: Arc<[Rank]> = group.ranks().into();
            let c = Comm::new(self.inner.shared.clone(), ContextId(ctx), members, me as u32, self.error_mode());
            let recognized = self.inner.shared.engine.lock().recognized(self.inner.ctx);
            let inherited: Vec<u32> = locals
                .iter()
                .enumerate()
                .filter(|(_, l)| recognized.contains(&(**l as u32)))
                .map(|(i, _)| i as u32)
                .collect();
            if !inherited.is_empty() {
                c.inner.shared.engine.lock().validate_commit(c.inner.ctx, &inherited);
            }
            Ok(Some(c))
        })();
        self.check(r)
    }

    /// A communicator of the members of `group` (a subset of this communicator's, in the
    /// group's order; MPI_Comm_create_group): collective over the members of `group`
    /// only — the others need not call it (they get `None` if they do). Calls that may
    /// run at the same time over overlapping groups use different `tag`s. The members
    /// agree on the new context as [`Comm::dup`] does (uniform over them), through a
    /// scratch communicator of theirs whose context comes from this communicator's, the
    /// tag and the group — the same at every member, and above every context a creation
    /// proposes.
    pub fn create_group(&self, group: &Group, tag: i32) -> Result<Option<Comm>, Error> {
        let r = (|| {
            let members = group.ranks();
            if members.iter().any(|w| !self.inner.group.contains(w)) {
                return Err(Error::InvalidArg("create_group: the group is not a subset of the communicator"));
            }
            let Some(me) = members.iter().position(|w| *w == self.my_world_rank()) else { return Ok(None) };
            // FNV-1a over (context, tag, members), into the upper half of the context
            // space, even (a communicator takes two contexts).
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            let words = [self.inner.ctx.0, tag as u32].into_iter().chain(members.iter().map(|r| r.0));
            for b in words.flat_map(u32::to_le_bytes) {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            // The same group and tag again later (legal once the first ended) must not
            // meet the first one's scratch context: every member counts them alike.
            let again = {
                let mut seen = self.inner.group_creations.lock();
                let n = seen.entry(h).or_insert(0);
                *n += 1;
                *n - 1
            };
            for b in again.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            let scratch_ctx = 0x8000_0000 | ((h ^ (h >> 32)) as u32 & 0x7fff_fffe);
            let scratch = Comm::new(
                self.inner.shared.clone(),
                ContextId(scratch_ctx),
                members.into(),
                me as u32,
                ErrorMode::ErrorsReturn,
            );
            let c = scratch.dup()?;
            c.set_error_mode(self.error_mode());
            Ok(Some(c))
        })();
        self.check(r)
    }

    /// Frees the communicator (MPI_Comm_free; dropping it does the same). Local and
    /// always complete, whatever failed (R26): its pending operations are the caller's
    /// requests, which borrow it and so have completed or been dropped already.
    pub fn free(self) {
        drop(self);
    }

    /// The creation protocol of `dup` and `split`: exchange (color, key, context proposal)
    /// over the live members, then agree whether that worked everywhere with no failure
    /// beyond the recognised ones; the agreement is the decision point of R24 (a
    /// failure known before it gives an error everywhere). Returns each member's entry
    /// (`None` for recognised failed members) and the new context.
    fn create_exchange(&self, color: i32, key: i32) -> Result<(Vec<Option<Entry>>, u32), Error> {
        self.create_exchange_pairs(color, key, 1)
    }

    /// [`Comm::create_exchange`] taking `pairs` context pairs from the new context on.
    pub(crate) fn create_exchange_pairs(
        &self,
        color: i32,
        key: i32,
        pairs: u32,
    ) -> Result<(Vec<Option<Entry>>, u32), Error> {
        let shared = &self.inner.shared;
        let n = self.size();
        loop {
            let proposal = shared.ctx_proposal();
            let mut all = vec![i32::MIN; 3 * n];
            let exchanged = runthrough_engine::coll::Coll::begin(
                &shared.engine,
                self.inner.ctx,
                self.members(),
                self.inner.me,
                None,
            )
            .and_then(|c| {
                let mine = [color, key, proposal as i32];
                c.allgather(bytemuck::cast_slice(&mine), bytemuck::cast_slice_mut(&mut all))
            });
            let claim = self.exchange_claim(&all, proposal, exchanged, pairs);
            let decision = self.agreement(claim.flag());
            match self.exchange_verdict(&all, claim, decision) {
                Verdict::Retry => continue,
                Verdict::Fail(e) => return Err(e),
                Verdict::Done(entries, ctx) => return Ok((entries, ctx)),
            }
        }
    }

    /// After the exchange of a creation (`all`: three words a member, `i32::MIN` where
    /// none came): the context chosen (the largest proposal) and whether it could be
    /// taken here.
    pub(crate) fn exchange_claim(&self, all: &[i32], proposal: u32, exchanged: Result<(), Error>, pairs: u32) -> Claim {
        let shared = &self.inner.shared;
        let ctx = all.chunks(3).filter(|e| e[2] != i32::MIN).map(|e| e[2] as u32).max().unwrap_or(proposal);
        let claimed = exchanged.is_ok() && shared.ctx_claim_pairs(ctx, pairs);
        let recognized = shared.engine.lock().recognized(self.inner.ctx);
        Claim { ctx, pairs, claimed, exchanged, recognized }
    }

    /// The creation's outcome once its agreement decided (or failed): a new context and
    /// the members' entries, an error, or a new try (another thread's creation took the
    /// context at some member).
    pub(crate) fn exchange_verdict(
        &self,
        all: &[i32],
        claim: Claim,
        decision: Result<runthrough_ft::Decision, Error>,
    ) -> Verdict {
        let shared = &self.inner.shared;
        let Claim { ctx, pairs, claimed, exchanged, recognized } = claim;
        let decision = match decision {
            Ok(d) => d,
            Err(e) => {
                if claimed {
                    shared.ctx_release_pairs(ctx, pairs);
                }
                return Verdict::Fail(e);
            }
        };
        let new_failure = decision
            .failed
            .iter()
            .filter_map(|w| self.inner.group.iter().position(|g| g.0 == *w))
            .find(|l| !recognized.contains(&(*l as u32)));
        let ok = new_failure.is_none()
            && decision.flag & (Claim::EXCHANGED | Claim::CLAIMED) == Claim::EXCHANGED | Claim::CLAIMED;
        if !ok && claimed {
            shared.ctx_release_pairs(ctx, pairs);
        }
        if let Some(rank) = new_failure {
            return Verdict::Fail(Error::RankFailStop { rank: rank as u32 });
        }
        if decision.flag & Claim::EXCHANGED == 0 {
            return Verdict::Fail(
                exchanged.err().unwrap_or(Error::RankFailStop { rank: recognized.first().copied().unwrap_or(0) }),
            );
        }
        if decision.flag & Claim::CLAIMED == 0 {
            // Another thread's creation took that context at some member: every member
            // chooses again, above what it has seen.
            return Verdict::Retry;
        }
        let entries: Vec<Option<Entry>> = all
            .chunks(3)
            .enumerate()
            .map(|(r, e)| if recognized.contains(&(r as u32)) || e[2] == i32::MIN { None } else { Some((e[0], e[1])) })
            .collect();
        Verdict::Done(entries, ctx)
    }

    /// A communicator of the same members on context `ctx` (what a dup creates), its
    /// recognised failures carried over.
    pub(crate) fn dup_on(&self, ctx: u32) -> Comm {
        let c = Comm::new(
            self.inner.shared.clone(),
            ContextId(ctx),
            self.inner.group.clone(),
            self.inner.me,
            self.error_mode(),
        );
        let recognized = self.inner.shared.engine.lock().recognized(self.inner.ctx);
        if !recognized.is_empty() {
            c.inner.shared.engine.lock().validate_commit(c.inner.ctx, &recognized);
        }
        // A duplicate keeps the topology (MPI-4.1 7.4.2).
        match self.inner.topo.get() {
            Some(t) => c.with_topology(t.clone()),
            None => c,
        }
    }

    /// Enters one fault-tolerant agreement over the live members; returns its instance.
    pub(crate) fn agreement_start(&self, flag: u32) -> Result<u64, Error> {
        self.agreement_start_input(runthrough_ft::Input::flag(flag))
    }

    /// [`Comm::agreement_start`] with a whole input (a flag and a word whose maximum is
    /// decided); always the message-passing agreement, never the node's registers.
    pub(crate) fn agreement_start_input(&self, input: runthrough_ft::Input) -> Result<u64, Error> {
        let seq = self.inner.agreements.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.shared.engine.lock().agree_start_input(self.inner.ctx, &self.inner.group, seq, input)
    }

    /// Makes the members at `local` (ranks here) recognised failures, as a validate that
    /// decided them would (a new communicator inheriting its parents' recognised failures).
    pub(crate) fn recognize(&self, local: &[u32]) {
        if !local.is_empty() {
            self.inner.shared.engine.lock().validate_commit(self.inner.ctx, local);
        }
    }

    /// The members recognised failed here, as world ranks.
    pub(crate) fn recognized_world(&self) -> Vec<u32> {
        let rec = self.inner.shared.engine.lock().recognized(self.inner.ctx);
        rec.iter().filter_map(|&l| self.inner.group.get(l as usize).map(|r| r.0)).collect()
    }

    /// Runs one fault-tolerant agreement over the live members; returns the decision.
    pub(crate) fn agreement(&self, flag: u32) -> Result<runthrough_ft::Decision, Error> {
        let shared = &self.inner.shared;
        // R27: a propagated error not yet delivered here is this call's outcome.
        if let Some(list) = shared.engine.lock().take_armed(self.inner.ctx) {
            return Err(Error::Propagated(list));
        }
        if let Some((coll, slot)) = &self.inner.shm {
            // Every member shares the node: the register agreement (ft::reg_agree).
            let (ctx, group, me) = (self.inner.ctx, &self.inner.group, self.inner.me);
            return runthrough_engine::coll::shm_agreement(&shared.engine, ctx, group, me, flag, coll, *slot);
        }
        let mut inst = Some(self.agreement_start(flag)?);
        self.wait_agreement(&mut inst, "agreement already completed and its outcome taken")
    }

    /// Makes progress; once agreement `*instance` decided, takes it (`None` after).
    pub(crate) fn poll_agreement(&self, instance: &mut Option<u64>) -> Option<runthrough_ft::Decision> {
        let inst = (*instance)?;
        let d = {
            let mut e = self.inner.shared.engine.lock();
            e.progress();
            e.agree_decision(inst)
        };
        if d.is_some() {
            *instance = None;
        }
        d
    }

    /// Blocks until agreement `*instance` decides; `ApiMisuse(taken)` if its outcome
    /// was already taken.
    fn wait_agreement(
        &self,
        instance: &mut Option<u64>,
        taken: &'static str,
    ) -> Result<runthrough_ft::Decision, Error> {
        if instance.is_none() {
            return self.check(Err(Error::ApiMisuse(taken)));
        }
        let mut waiter = self.waiter();
        loop {
            if let Some(d) = self.poll_agreement(instance) {
                return Ok(d);
            }
            waiter.snooze();
        }
    }

    /// Applies a validate's decision: its failed members become recognised (R19, R20).
    pub(crate) fn validate_apply(&self, d: &runthrough_ft::Decision) -> Group {
        let local: Vec<u32> =
            d.failed.iter().filter_map(|w| self.inner.group.iter().position(|g| g.0 == *w).map(|i| i as u32)).collect();
        let mut e = self.inner.shared.engine.lock();
        // A member the agreement decided failed is failed here too, even before this
        // process's own evidence arrives (fail-stop): so what the program acknowledges
        // next (ULFM's failure_ack) covers it, and nothing waits for it.
        for &w in &d.failed {
            if Rank(w) != e.rank() && !e.is_failed(Rank(w)) {
                e.fail_peer(Rank(w));
            }
        }
        e.validate_commit(self.inner.ctx, &local);
        drop(e);
        Group::new(d.failed.iter().map(|&w| Rank(w)).collect(), self.my_world_rank())
    }

    /// Validates the communicator (run-through chapter §17.7.4, R19): a collective over the live
    /// members that agrees, uniformly, on the group of failed members; they become
    /// recognised failures, excluded from later collectives (R20), and collectives are
    /// enabled again. Returns the agreed failed group (the same at every member).
    /// Collectives begun before need not match across it (the "cut" of R19).
    pub fn validate(&self) -> Result<Group, Error> {
        let r = self.usable().and_then(|()| self.agreement(u32::MAX)).map(|d| self.validate_apply(&d));
        self.check(r)
    }

    /// Starts a validate (MPI_Comm_ivalidate, R19, R21): the agreement runs in the
    /// background (the progress thread carries its messages); the request's completion
    /// applies the decision, as [`Comm::validate`] does. Its agreement is ordered with
    /// this communicator's other validates, agrees and creations by call order.
    pub fn ivalidate(&self) -> Result<ValidateRequest<'_>, Error> {
        let r = self.usable().and_then(|()| self.agreement_start(u32::MAX));
        self.check(r).map(|instance| ValidateRequest { comm: self, instance: Some(instance) })
    }

    /// Fault-tolerant agreement on the bitwise AND of `flag` over the live members
    /// (ULFM's `MPIX_Comm_agree`, R29): every member gets the same value.
    /// Works on a revoked communicator (not on a corrupted one).
    pub fn agree(&self, flag: i32) -> Result<i32, Error> {
        let r = self.not_corrupted().and_then(|()| self.agreement(flag as u32)).map(|d| d.flag as i32);
        self.check(r)
    }

    /// [`Comm::agree`], and the failed members the agreement decided on (world ranks,
    /// ascending), the same at every member that returns: what ULFM's `MPIX_Comm_agree`
    /// compares with the failures this process acknowledged.
    pub fn agree_failed(&self, flag: i32) -> Result<(i32, Vec<usize>), Error> {
        let r = self
            .not_corrupted()
            .and_then(|()| self.agreement(flag as u32))
            .map(|d| (d.flag as i32, d.failed.iter().map(|&r| r as usize).collect()));
        self.check(r)
    }

    /// A new communicator of the members not failed (ULFM's `MPIX_Comm_shrink`, R29):
    /// fault tolerant and uniform — one agreement over the live members decides both the
    /// failed set and the new context, so every member that returns gets the same
    /// communicator (the survivors in their old order, its own rank among them), or every
    /// one gets the same error. Works on a revoked communicator; inherits the error mode.
    ///
    /// The new context must be free at every survivor: each contributes the complement of
    /// its next free context to the agreement's AND, so the decision is the bitwise OR
    /// of the proposals, which is at least each of them.
    pub fn shrink(&self) -> Result<Comm, Error> {
        let r = self.agreement_shrink(1).and_then(|(ctx, failed)| {
            let shared = &self.inner.shared;
            let group: Arc<[Rank]> = self.inner.group.iter().copied().filter(|r| !failed.contains(&r.0)).collect();
            let me = group
                .iter()
                .position(|r| *r == self.my_world_rank())
                .ok_or(Error::RankFailStop { rank: self.inner.me })?;
            Ok(Comm::new(shared.clone(), ContextId(ctx), group, me as u32, self.error_mode()))
        });
        self.check(r)
    }

    /// The agreement of a shrink: the new context (taking `pairs` pairs from it) and the
    /// failed members (world ranks), the same at every member that returns.
    pub(crate) fn agreement_shrink(&self, pairs: u32) -> Result<(u32, Vec<u32>), Error> {
        self.not_corrupted()?;
        let shared = &self.inner.shared;
        let proposal = shared.ctx_proposal();
        let d = self.agreement(!proposal)?;
        let ctx = !d.flag;
        if !shared.ctx_claim_pairs(ctx, pairs) {
            tracing::warn!(ctx, "shrink: context also taken by a concurrent creation");
        }
        Ok((ctx, d.failed))
    }

    /// Signals `code` to every member (R27, Engwer et al.'s `signal_error`): every other
    /// member's pending or next wait on this communicator (point-to-point, collective,
    /// the next agree or validate) fails with [`Error::Propagated`] listing every signal
    /// of the same resolution as `(rank, code)` — the same list at every member — and so
    /// does this call, which returns once that list is agreed (passed through the error
    /// mode first). Several members may signal at once; failed members are no obstacle.
    ///
    /// Afterwards the communicator is used as before, no revoke needed: each member gets
    /// the exception once; what was sent on it before and not yet received when the
    /// members entered the resolution is discarded (a rendezvous send of it fails with
    /// `Propagated` too), so the restarted computation never matches old traffic.
    pub fn signal_error(&self, code: i32) -> Error {
        let ctx = self.inner.ctx;
        let r: Result<(), Error> = (|| {
            let id = self.inner.shared.engine.lock().signal_error(ctx, code)?;
            let mut waiter = self.waiter();
            loop {
                {
                    let mut e = self.inner.shared.engine.lock();
                    e.progress();
                    if let Some(list) = e.signal_resolved(ctx, id) {
                        return Err(Error::Propagated(list));
                    }
                }
                waiter.snooze();
            }
        })();
        match self.check(r) {
            Err(e) => e,
            Ok(()) => Error::ApiMisuse("signal_error resolved without a list"),
        }
    }

    /// The error of the communicator itself that an operation which stopped at a failed
    /// member or a collective that gave up reports instead: revoked or corrupted
    /// (R28, R29), or an error resolution running or just completed (R27; waits for it).
    fn comm_level_error(&self) -> Option<Error> {
        let ctx = self.inner.ctx;
        let mut waiter = self.waiter();
        loop {
            {
                let mut e = self.inner.shared.engine.lock();
                if let Some(err) = e.comm_error(ctx) {
                    return Some(err);
                }
                if !e.is_resolving(ctx) {
                    return e.take_armed(ctx).map(Error::Propagated);
                }
                e.progress();
            }
            waiter.snooze();
        }
    }

    /// Starts an agreement on the bitwise AND of `flag` (ULFM's `MPIX_Comm_iagree`,
    /// R29): it runs in the background; [`AgreeRequest::wait`] returns the value every
    /// member gets. Works on a revoked communicator. Ordered with this communicator's
    /// other nonblocking agreements (`ivalidate`, `iagree`) by call order.
    pub fn iagree(&self, flag: i32) -> Result<AgreeRequest<'_>, Error> {
        let r = self.not_corrupted().and_then(|()| self.agreement_start(flag as u32));
        self.check(r).map(|instance| AgreeRequest { comm: self, instance: Some(instance) })
    }

    /// `Err(Revoked | CommCorrupted)` when the communicator is revoked or corrupted.
    pub(crate) fn usable(&self) -> Result<(), Error> {
        self.inner.shared.engine.lock().comm_error(self.inner.ctx).map_or(Ok(()), Err)
    }

    /// `Err(CommCorrupted)` when the communicator is corrupted (R28).
    pub(crate) fn not_corrupted(&self) -> Result<(), Error> {
        match self.inner.shared.engine.lock().comm_error(self.inner.ctx) {
            Some(Error::CommCorrupted) => Err(Error::CommCorrupted),
            _ => Ok(()),
        }
    }

    /// The members' world ranks, by local rank.
    pub(crate) fn members(&self) -> &[Rank] {
        &self.inner.group
    }

    /// Marks the members an agreement decided failed (world ranks) as failed here too,
    /// before this process's own evidence arrives (fail-stop), as a validate does: what
    /// the program asks next (the failed group, collectives enabled) agrees with the
    /// decision it just acted on.
    pub(crate) fn learn_failed(&self, world: &[usize]) {
        let mut e = self.inner.shared.engine.lock();
        for &w in world {
            let r = Rank(w as u32);
            if r != e.rank() && !e.is_failed(r) {
                e.fail_peer(r);
            }
        }
    }

    /// The lowest rank not recognised failed (the same at every member: recognition is
    /// uniform): the member that does a collective's one-process part.
    pub(crate) fn leader(&self) -> usize {
        let rec = self.recognized_world();
        self.inner.group.iter().position(|r| !rec.contains(&r.0)).unwrap_or(0)
    }
}

impl Drop for Comm {
    /// A handle dropped while its thread panics corrupts the communicator (R28,
    /// Engwer et al.): every member's pending and later operations on it fail with
    /// [`Error::CommCorrupted`], so none waits for this process.
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        // The panic may have left the engine lock with a frame still unwinding: wait a
        // while, never forever.
        if let Some(mut e) = self.inner.shared.engine.try_lock_for(std::time::Duration::from_secs(1)) {
            e.corrupt(self.inner.ctx);
            e.progress();
        }
    }
}

/// An agreement in progress ([`Comm::iagree`]).
#[derive(Debug)]
#[must_use = "an agree request does nothing unless waited on or tested"]
pub struct AgreeRequest<'a> {
    comm: &'a Comm,
    instance: Option<u64>,
}

impl AgreeRequest<'_> {
    /// Makes progress; once decided, returns the agreed flag (later calls `Ok(None)`).
    pub fn test(&mut self) -> Result<Option<i32>, Error> {
        Ok(self.comm.poll_agreement(&mut self.instance).map(|d| d.flag as i32))
    }

    /// Blocks until the agreement decides; returns the AND of the live members' flags.
    pub fn wait(mut self) -> Result<i32, Error> {
        let taken = "agree already completed and its outcome taken";
        self.comm.wait_agreement(&mut self.instance, taken).map(|d| d.flag as i32)
    }
}

/// A validate in progress ([`Comm::ivalidate`]).
#[derive(Debug)]
#[must_use = "a validate request does nothing unless waited on or tested"]
pub struct ValidateRequest<'a> {
    comm: &'a Comm,
    instance: Option<u64>,
}

impl ValidateRequest<'_> {
    /// Makes progress; once the agreement has decided, applies it and returns the agreed
    /// failed group (later calls return `Ok(None)`).
    pub fn test(&mut self) -> Result<Option<Group>, Error> {
        Ok(self.comm.poll_agreement(&mut self.instance).map(|d| self.comm.validate_apply(&d)))
    }

    /// Blocks until the validate completes; returns the agreed failed group.
    pub fn wait(mut self) -> Result<Group, Error> {
        let taken = "validate already completed and its outcome taken";
        self.comm.wait_agreement(&mut self.instance, taken).map(|d| self.comm.validate_apply(&d))
    }
}

impl Drop for ValidateRequest<'_> {
    /// Completes the validate: the other members' agreement counts on this one, and the
    /// decision must be applied here too for the communicator to stay uniform.
    fn drop(&mut self) {
        if self.instance.is_some() {
            let taken = "validate already completed and its outcome taken";
            if let Ok(d) = self.comm.wait_agreement(&mut self.instance, taken) {
                self.comm.validate_apply(&d);
            }
        }
    }
}

fn fatal_message(comm: &Comm, e: &Error, scope: &str) {
    // The process is about to exit; stderr is the one place the user will look.
    let _ = writeln!(
        std::io::stderr(),
        "runthrough: rank {} (world rank {}): fatal error: {e}; aborting the {scope} (ErrorsAreFatal)",
        comm.rank(),
        comm.inner.group.get(comm.rank()).map_or(0, |r| r.0),
    );
}
