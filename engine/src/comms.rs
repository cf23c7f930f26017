//! What the engine knows of communicators: their groups, and the run-through state that
//! failures change (run-through chapter §17.6):
//! - wildcard receives disabled by a new failure of a member (R13) until
//!   `reenable_any_source` (R14);
//! - per source, "poisoned" once a receive from a failed member completed in error, so
//!   later receives from it fail even when one of its messages is buffered (R12).
//!
//! - collectively inactive after a member's failure until validated (R18), with the
//!   validated failures excluded from later collectives (R20).
//!
//! A communicator owns two contexts, an even one for point-to-point traffic and the next
//! odd one for its collectives; both map to the same state.

use crate::types::{ContextId, Rank};
use runthrough_ft::SignalId;
use std::collections::HashMap;

#[derive(Debug)]
pub(crate) struct CommState {
    local_of: HashMap<Rank, u32>,
    pub(crate) wildcard_disabled: bool,
    poisoned: Vec<u32>,
    /// Collectively active (R18): false from a member's failure until validate.
    pub(crate) active: bool,
    /// Validations so far: collective tags carry it, so traffic of collectives begun
    /// before a validate never matches one begun after (the "cut" of R19).
    pub(crate) epoch: u32,
    /// Collectives begun in this epoch (every member counts every call, failed or not).
    pub(crate) coll_seq: u32,
    /// Failed members recognised by the last validate (local ranks, sorted): excluded
    /// from collectives (R20).
    pub(crate) recognized: Vec<u32>,
    /// The other members, ascending: the participants of collectives (kept in step with
    /// `recognized` by [`CommState::set_recognized`]; shared, so beginning a collective
    /// allocates nothing).
    pub(crate) alive: std::sync::Arc<[u32]>,
    /// Its slot in the node's collective area, if it uses shared-memory collectives.
    pub(crate) shm_slot: Option<usize>,
    /// Revoked (R29) or corrupted (R28): every operation on it fails for good.
    pub(crate) broken: Option<Broken>,
    /// Failures acknowledged by `ack_failed` (the first `acked` in failure order).
    pub(crate) acked: usize,
    /// The members in communicator order (agreement participants).
    pub(crate) group: std::sync::Arc<[Rank]>,
    /// Error propagation (R27).
    pub(crate) prop: Propagation,
}

/// A communicator's error propagation (R27, `Engine::signal_error`): signals known and
/// resolved, and the resolution running.
#[derive(Debug, Default)]
pub(crate) struct Propagation {
    /// This process's signals so far (the high bits of its next signal's id).
    pub(crate) serial: u32,
    /// Signals known and not yet resolved: (id, code).
    pub(crate) known: Vec<(SignalId, i32)>,
    /// Ids of the signals resolved.
    pub(crate) resolved: Vec<SignalId>,
    /// Resolutions completed here.
    pub(crate) epoch: u32,
    /// The agreement of resolution `epoch + 1`, once entered.
    pub(crate) running: Option<u64>,
    /// Its decided signals (ids, codes), while marks are still awaited.
    pub(crate) decided: Option<Vec<(SignalId, i32)>>,
    /// By local rank: the highest resolution whose mark arrived from that member.
    pub(crate) marks: Vec<u32>,
    /// Requests on the communicator parked during the resolution: they fail with its
    /// list when it completes.
    pub(crate) parked: Vec<crate::types::ReqId>,
    /// The list the next operation fails with: the union of the resolutions completed
    /// with nothing pending here and not delivered since.
    pub(crate) armed: Option<Vec<(u32, i32)>>,
    /// The last list delivered (communicator ranks, codes).
    pub(crate) last: Vec<(u32, i32)>,
}

/// Why a communicator is unusable for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Broken {
    /// `revoke` (R29): only agreements, shrink, failure queries and free still work.
    Revoked,
    /// A member panicked while using it (R28): nothing works any more.
    Corrupted,
}

impl Broken {
    pub(crate) fn error(self) -> crate::Error {
        match self {
            Broken::Revoked => crate::Error::Revoked,
            Broken::Corrupted => crate::Error::CommCorrupted,
        }
    }
}

impl CommState {
    /// Records the members recognised failed and recomputes the participants.
    pub(crate) fn set_recognized(&mut self, rec: Vec<u32>) {
        self.alive = (0..self.size()).filter(|r| !rec.contains(r)).collect();
        self.recognized = rec;
    }

    pub(crate) fn local_rank(&self, world: Rank) -> Option<u32> {
        self.local_of.get(&world).copied()
    }

    /// Number of members.
    pub(crate) fn size(&self) -> u32 {
        self.local_of.len() as u32
    }

    pub(crate) fn is_poisoned(&self, local: u32) -> bool {
        self.poisoned.contains(&local)
    }

    pub(crate) fn poison(&mut self, local: u32) {
        if !self.poisoned.contains(&local) {
            self.poisoned.push(local);
        }
    }
}

/// The communicator table, keyed by the even (point-to-point) context. A short vector
/// searched linearly: programs hold a handful of communicators, and every receive looks
/// its communicator up, so this beats hashing on the hot path.
#[derive(Debug, Default)]
pub(crate) struct Comms {
    map: Vec<(u32, CommState)>,
}

fn key(ctx: ContextId) -> u32 {
    ctx.p2p().0
}

impl Comms {
    pub(crate) fn register(&mut self, ctx: ContextId, group: &[Rank], shm_slot: Option<usize>) {
        let local_of = group.iter().enumerate().map(|(i, r)| (*r, i as u32)).collect();
        let alive = (0..group.len() as u32).collect();
        self.remove(ctx);
        self.map.push((
            key(ctx),
            CommState {
                local_of,
                wildcard_disabled: false,
                poisoned: Vec::new(),
                active: true,
                epoch: 0,
                coll_seq: 0,
                recognized: Vec::new(),
                alive,
                shm_slot,
                broken: None,
                acked: 0,
                group: group.into(),
                prop: Propagation { marks: vec![0; group.len()], ..Propagation::default() },
            },
        ));
    }

    pub(crate) fn remove(&mut self, ctx: ContextId) {
        self.map.retain(|(k, _)| *k != key(ctx));
    }

    #[inline]
    pub(crate) fn get(&self, ctx: ContextId) -> Option<&CommState> {
        let k = key(ctx);
        self.map.iter().find(|(x, _)| *x == k).map(|(_, c)| c)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, ctx: ContextId) -> Option<&mut CommState> {
        let k = key(ctx);
        self.map.iter_mut().find(|(x, _)| *x == k).map(|(_, c)| c)
    }

    /// Every communicator containing `world`, as (its p2p context, the rank's local rank).
    pub(crate) fn containing(&self, world: Rank) -> Vec<(ContextId, u32)> {
        self.map.iter().filter_map(|(k, c)| c.local_rank(world).map(|l| (ContextId(*k), l))).collect()
    }

    /// The keys (even contexts) of every communicator.
    pub(crate) fn keys(&self) -> impl Iterator<Item = ContextId> + '_ {
        self.map.iter().map(|(k, _)| ContextId(*k))
    }

    /// Whether `ctx` belongs to the communicator keyed by `comm`.
    pub(crate) fn same_comm(ctx: ContextId, comm: ContextId) -> bool {
        key(ctx) == key(comm)
    }
}
