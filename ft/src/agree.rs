//! Fault-tolerant uniform agreement: the one core behind `validate` (R19), `agree`
//! (R29) and uniform communicator creation (R24).
//!
//! Parts: [`Participants`] (the ranks of a communicator, shared by every agreement on
//! it), [`Agreement`] (one instance on one process: a sans-IO state machine driven by
//! [`Agreement::handle_message`] and [`Agreement::handle_failure`], drained with
//! [`Agreement::poll_transmit`] and [`Agreement::poll_decision`]), [`Decision`] (what
//! every process decides), [`AgreeState`] (what an instance waits for). The messages are
//! in [`crate::agree_msg`]; the simulator that checks the properties under crashes is
//! [`crate::agree_sim`].
//!
//! # What is agreed
//!
//! Each participant contributes an [`Input`] — a flag word, a `max` word and a set of
//! signalled errors `(id, code)` — and the participants it knows failed. Every
//! process that decides decides the same [`Decision`], computed over one set of
//! *contributors* that contains every participant alive at the decision:
//!
//! - `flag`: the bitwise AND of the contributors' flag words;
//! - `max`: the maximum of the contributors' `max` words — so it is at least the word of
//!   every participant alive at the decision, and it is some participant's word;
//! - `signals`: the union of the contributors' signals, sorted ascending, without
//!   duplicates — so it contains every signal known to every participant alive at the
//!   decision, and only contributed signals;
//! - `failed`: a set of failed participants that contains every failure known to each
//!   contributor and to the coordinator that proposed it, and only failed participants.
//!
//! `validate` uses `failed` (the same group everywhere); `agree` uses `flag`; uniform
//! creation contributes "I saw no new failure" as a flag bit (or compares `failed` with
//! the failures the communicator already recognised) and succeeds or fails everywhere;
//! `shrink` contributes as `max` a context id from which every id is free locally (one
//! past the highest in use), so the decided `max` is free at every survivor; `signal_error` (R27) contributes the signals it
//! knows, and every member gets the same list. There is no "error everywhere" outcome:
//! the agreement itself always decides.
//!
//! # Model
//!
//! Fail-stop processes; reliable FIFO-free channels between alive processes (messages may
//! be reordered or delayed, never lost or invented); a *perfect* failure detector in the
//! sense the ring detector provides it (T-FD): every failure is eventually reported
//! to every alive participant through [`Agreement::handle_failure`], and a process
//! reported failed is failed — a wrongly suspected process is excluded and must stop
//! (the engine drops its agreements on [`crate::FtEvent::Excluded`] and never returns
//! their decisions to the user).
//!
//! # Algorithm
//!
//! A coordinator-based three-phase commit with coordinator replacement, made safe by
//! Paxos-style ballots (Lamport, "Paxos made simple", 2001) and made live by the
//! perfect detector; its messages travel a k-ary tree rooted at the coordinator, as in
//! ULFM's ERA agreement (Herault et al., "Practical scalable consensus for
//! pseudo-synchronous distributed systems", SC'15), so that no process handles more
//! than about `2k + 2` messages whatever `n` (ERA's early return is not taken: every
//! process returns after the commit).
//!
//! - The *coordinator* is the participant with the lowest index not known failed
//!   locally. Its ballot is its index. Each coordinator proposes at most once, so ballots
//!   are unique, and since a process only takes over when every lower index is known
//!   failed, ballots grow over time.
//! - **The tree of ballot `b`** ([`crate::agree_tree`]) spans the indices `b..n`, every
//!   subtree a contiguous range, fan-out [`Participants::fanout`] (32 by default: up to
//!   33 participants it is the star). A process sends up to its *live parent* (nearest
//!   ancestor not known failed) and down to its *live children* (a failed child replaced
//!   by its own live children); a range is *covered* when each child has answered or is
//!   known failed with its own range covered.
//! - **Report.** On entry, and again whenever its coordinator is reported failed, a
//!   process works in the new ballot's tree: once its range is covered by its children's
//!   reports, it sends its live parent one `Report` merging its own input (flag, `max`,
//!   signals), the failures it knows, its *prior* (nothing, or the last proposal it
//!   accepted `(ballot, value)`) with its children's reports: the AND of the flags, the
//!   maximum `max`, the union of signals and failures, the highest-ballot prior. Merging
//!   is idempotent, so a report relayed twice changes nothing. The report stands for the
//!   sender's whole range; it is resent whenever the live parent changes. Entering a
//!   ballot is a *promise* never to accept a proposal of a lower one.
//! - **Propose.** The coordinator waits until its range (everybody not below its index)
//!   is covered. If it holds no accepted value it proposes a fresh value: the merged
//!   flag, `max` and signals, and the union of the reported failures and those it knows;
//!   otherwise the accepted value with the highest ballot among the merged priors.
//! - **Accept.** A process accepts a proposal whose ballot is at least its promise (it
//!   records it), passes it to its live children (and to every later one, when a child
//!   fails), and once its range is covered by its children's `Accept`s sends its own up.
//! - **Commit.** When its range is covered by accepts, the coordinator decides and sends
//!   `Commit` down. A process decides on the first `Commit` (from anyone) or on a report
//!   whose prior is a decision, and then sends `Commit` to each live neighbour in its
//!   current tree (parent and children) not known to hold it, again as they change, and
//!   answers every later `Report` or `Propose` with a `Commit`.
//!
//! Failure-free cost: `4 × depth` message delays and `4(n − 1)` messages, as the star:
//! each non-root sends one report and one accept, each tree edge carries one proposal
//! and one commit. The busiest process (an inner node) sends `2k + 2` and receives
//! `2k + 2`; at 2^20 participants and `k = 32` the depth is 4.
//!
//! # Why it is uniform
//!
//! A covered range means: each index in it either contributed a report merged into what
//! was sent (its input, its failures, its prior) or was known failed by a contributor
//! (and is in that contributor's failure list). For accepts: each index in it accepted,
//! or was known failed by a process on the way. Since the detector never reports a live
//! process, a covered tree contains the report, or the accept, of every process alive
//! when its last piece was sent. With that, the star's proof carries over unchanged:
//!
//! Claim: if a coordinator `c` commits `v` under ballot `c`, every proposal of a ballot
//! `b > c` is `v`. Induction on `b`. The coordinator `b` took over knowing `c` failed,
//! so `c` did not know `b` failed when it committed (the detector is perfect and `b` was
//! alive then): `c`'s covered accepts include `b`'s `Accept`. `b` sent it before it took
//! over, because taking over promises `b > c` to itself. So `b`'s own prior, which its
//! proposal always merges, holds an accepted ballot in `[c, b)`, and `b` proposes the
//! value of the highest accepted ballot it sees, which lies in `[c, b)` and is `v` by
//! induction. (Accepted ballots never decrease: an accept raises the promise.) Every
//! decision traces back to a commit of a coordinator (a `Commit` or a decided prior is
//! only ever a decided process's value), so all decisions are equal — including that of
//! a process which decides and crashes at once, because the commit it decided on already
//! constrains every later ballot.
//!
//! *Validity:* a fresh value is computed only once the coordinator's range is covered,
//! so it includes the input and failures of every process alive then; an adopted value
//! was fresh under a lower ballot, when a superset was alive. Failures come from the
//! perfect detector, so they are real. *Termination:* after the last failure is reported
//! everywhere, every live process works in the same tree with the same live parents and
//! children; reports are complete from the leaves up (each process resends to a changed
//! parent), the coordinator proposes, proposals reach every live process (each passes it
//! to new children), accepts come up, and the commit reaches everyone; a process that
//! already decided passes the decision to every live neighbour, so the decided processes
//! spread over the connected tree. There are finitely many participants, hence failures.
//!
//! # Driving it
//!
//! No timers: progress comes from messages and from the detector's failure notices
//! ([`Agreement::poll_timeout`] is always `None`). The engine creates an [`Agreement`]
//! per operation with an instance id unique on the communicator (context id and a
//! per-communicator sequence number), routes [`AgreeMsg`]s by instance, buffers messages
//! of instances it has not created yet (a faster peer may already be in the next
//! agreement: in a tree that is at most a report and an accept from each live child,
//! about `2k` messages an instance, whatever `n`), forwards every [`crate::FtEvent::Failed`] to
//! [`Agreement::handle_failure`], and keeps an instance alive after its decision until
//! the *next* agreement on the communicator decides: that one needs a report from every
//! alive participant, which each sends only after deciding this one, so nobody can need
//! this instance's answers any more.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use crate::agree_msg::{AgreeMsg, Prior, SignalId, Value};
use crate::agree_tree::{Tree, DEFAULT_FANOUT};
use crate::time::Time;

/// The ranks taking part in agreements: a communicator's group, as job ranks in
/// communicator order. The position of a rank in the list is its *participant index*;
/// the lowest alive index coordinates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Participants {
    ranks: Vec<u32>,
    /// `(job rank, index)` sorted by job rank, for reverse lookup.
    by_rank: Vec<(u32, u32)>,
    /// Fan-out of the agreement tree ([`crate::agree_tree`]).
    fanout: u32,
}

/// Why a list of ranks cannot be [`Participants`] (a local programming error).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ParticipantsError {
    /// The list is empty.
    Empty,
    /// This job rank appears twice.
    Duplicate(u32),
    /// More than `u32::MAX` participants.
    TooMany,
}

impl fmt::Display for ParticipantsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParticipantsError::Empty => write!(f, "an agreement needs at least one participant"),
            ParticipantsError::Duplicate(r) => write!(f, "rank {r} appears twice among the participants"),
            ParticipantsError::TooMany => write!(f, "more than 2^32 - 1 participants"),
        }
    }
}

impl std::error::Error for ParticipantsError {}

impl Participants {
    /// The participants `ranks` (job ranks, in communicator order).
    ///
    /// # Errors
    /// [`ParticipantsError`] if `ranks` is empty, too long, or has a duplicate.
    pub fn new(ranks: Vec<u32>) -> Result<Participants, ParticipantsError> {
        if ranks.is_empty() {
            return Err(ParticipantsError::Empty);
        }
        if u32::try_from(ranks.len()).is_err() {
            return Err(ParticipantsError::TooMany);
        }
        let mut by_rank: Vec<(u32, u32)> = ranks.iter().enumerate().map(|(i, &r)| (r, i as u32)).collect();
        by_rank.sort_unstable();
        if let Some(w) = by_rank.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(ParticipantsError::Duplicate(w[0].0));
        }
        Ok(Participants { ranks, by_rank, fanout: DEFAULT_FANOUT })
    }

    /// The same participants agreeing over a tree of fan-out `k` (at least 2; the
    /// default is [`DEFAULT_FANOUT`]). Every participant of one agreement must use the
    /// same fan-out.
    pub fn with_fanout(mut self, k: u32) -> Participants {
        self.fanout = k.max(2);
        self
    }

    /// The fan-out of the agreement tree.
    pub fn fanout(&self) -> u32 {
        self.fanout
    }

    /// Participants `0..n`: job rank = index (a world communicator).
    ///
    /// # Panics
    /// If `n` is zero.
    pub fn world(n: u32) -> Participants {
        assert!(n > 0, "an agreement needs at least one participant");
        Participants { ranks: (0..n).collect(), by_rank: (0..n).map(|r| (r, r)).collect(), fanout: DEFAULT_FANOUT }
    }

    /// Number of participants.
    pub fn len(&self) -> u32 {
        self.ranks.len() as u32
    }

    /// Always `false`: there is at least one participant.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// The job ranks, in participant-index order.
    pub fn ranks(&self) -> &[u32] {
        &self.ranks
    }

    /// The job rank of participant `index`.
    pub fn rank(&self, index: u32) -> Option<u32> {
        self.ranks.get(index as usize).copied()
    }

    /// The participant index of job rank `rank`.
    pub fn index_of(&self, rank: u32) -> Option<u32> {
        self.by_rank.binary_search_by_key(&rank, |&(r, _)| r).ok().map(|i| self.by_rank[i].1)
    }
}

/// What a participant contributes to an agreement (besides the failures it knows).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Input {
    /// Flag word; the decision holds the AND of the contributed ones.
    pub flag: u32,
    /// A word whose maximum is decided (`shrink`: a context id from which every id is
    /// free here).
    pub max: u32,
    /// Signalled errors `(id, code)` ([`SignalId`]); the decision holds the union. Any order,
    /// duplicates allowed: [`Agreement::with_input`] sorts and deduplicates them.
    pub signals: Vec<(SignalId, i32)>,
}

impl Input {
    /// Contributes `flag` only: `max` 0, no signals.
    pub fn flag(flag: u32) -> Input {
        Input { flag, max: 0, signals: Vec::new() }
    }
}

/// What every process decides.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Decision {
    /// Bitwise AND of the flag words of every participant alive at the decision (and
    /// perhaps of some that failed since contributing).
    pub flag: u32,
    /// Maximum of the `max` words of the same contributors: at least the word of every
    /// participant alive at the decision.
    pub max: u32,
    /// The failed participants, as job ranks in ascending order.
    pub failed: Vec<u32>,
    /// Union of the signals of the same contributors, `(id, code)` in ascending
    /// order without duplicates: contains every signal of every participant alive at the
    /// decision.
    pub signals: Vec<(SignalId, i32)>,
}

/// What an [`Agreement`] waits for (for logs and tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgreeState {
    /// Reported to the coordinator; waiting for its proposal or commit.
    AwaitingCoordinator,
    /// Coordinating: waiting for a report from every participant not known failed.
    AwaitingReports,
    /// Coordinating: proposed; waiting for every participant not known failed to accept.
    AwaitingAccepts,
    /// Decided (still answering late reports).
    Decided,
}

impl fmt::Display for AgreeState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AgreeState::AwaitingCoordinator => "awaiting coordinator",
            AgreeState::AwaitingReports => "awaiting reports",
            AgreeState::AwaitingAccepts => "awaiting accepts",
            AgreeState::Decided => "decided",
        })
    }
}

/// Reports gathered from the subtree under one ballot, merged.
#[derive(Debug, Clone)]
struct Gather {
    ballot: u32,
    /// Senders whose report was merged (each stands for its whole range), ascending.
    from: Vec<u32>,
    flag: u32,
    max: u32,
    /// Union of the reported signals, ascending, no duplicates.
    signals: Vec<(SignalId, i32)>,
    /// Union of the reported failures, ascending.
    failed: Vec<u32>,
    /// Highest-ballot accepted value reported.
    best: Option<(u32, Value)>,
}

impl Gather {
    fn new(ballot: u32) -> Gather {
        Gather { ballot, from: Vec::new(), flag: u32::MAX, max: 0, signals: Vec::new(), failed: Vec::new(), best: None }
    }

    /// Merges a report. Merging is idempotent, so a report that arrives twice (resent
    /// to a new parent, or relayed before its sender's parent died) changes nothing.
    fn merge(
        &mut self,
        from: u32,
        flag: u32,
        max: u32,
        failed: &[u32],
        signals: &[(SignalId, i32)],
        best: Option<(u32, &Value)>,
    ) {
        if let Err(at) = self.from.binary_search(&from) {
            self.from.insert(at, from);
        }
        self.flag &= flag;
        self.max = self.max.max(max);
        union_into(&mut self.signals, signals);
        union_into(&mut self.failed, failed);
        if let Some((b, v)) = best {
            if self.best.as_ref().is_none_or(|(have, _)| b > *have) {
                self.best = Some((b, v.clone()));
            }
        }
    }
}

/// `into ∪= add`, both ascending without duplicates.
fn union_into<T: Ord + Copy>(into: &mut Vec<T>, add: &[T]) {
    if add.iter().all(|x| into.binary_search(x).is_ok()) {
        return;
    }
    let mut out = Vec::with_capacity(into.len() + add.len());
    let (mut i, mut j) = (0, 0);
    while i < into.len() || j < add.len() {
        let take_into = j == add.len() || (i < into.len() && into[i] <= add[j]);
        let x = if take_into { into[i] } else { add[j] };
        if take_into {
            i += 1;
        } else {
            j += 1;
        }
        if out.last() != Some(&x) {
            out.push(x);
        }
    }
    *into = out;
}

/// One agreement instance on one process. See the [module docs](self).
#[derive(Debug)]
pub struct Agreement {
    parts: Arc<Participants>,
    me: u32,
    instance: u64,
    /// This process's contribution (signals sorted and deduplicated).
    input: Input,
    /// Participant indices known failed, ascending.
    failed: Vec<u32>,
    /// Lowest index not known failed: the ballot whose tree this process works in.
    coordinator: u32,
    /// Lowest ballot this process may still accept.
    promise: u32,
    accepted: Option<(u32, Value)>,
    decided: Option<Value>,
    decision: Option<Decision>,
    decision_polled: bool,
    decided_at: Option<Time>,
    /// Reports from below, for the current ballot and later ones (a child may learn of
    /// a coordinator's failure first).
    gathers: Vec<Gather>,
    /// `(ballot, sender)` of the accepts from below, ascending.
    acks: Vec<(u32, u32)>,
    /// The live parent this process's complete report of the current ballot went to.
    reported_to: Option<u32>,
    /// The live parent its complete accept of the current ballot went to.
    acked_to: Option<u32>,
    /// Live children the accepted proposal was passed to, ascending.
    proposed_to: Vec<u32>,
    /// Processes known to hold the decision (sent it to this one, or were sent it).
    informed: Vec<u32>,
    transmits: VecDeque<(u32, AgreeMsg)>,
}

impl Agreement {
    /// Enters agreement `instance` as job rank `me` among `participants`, contributing
    /// `flag` (with `max` 0 and no signals: [`Input::flag`]) and the failures
    /// `known_failed`. See [`Agreement::with_input`].
    ///
    /// # Panics
    /// If `me` is not a participant (a local programming error).
    pub fn new(
        participants: Arc<Participants>,
        me: u32,
        instance: u64,
        flag: u32,
        known_failed: &[u32],
        now: Time,
    ) -> Agreement {
        Agreement::with_input(participants, me, instance, Input::flag(flag), known_failed, now)
    }

    /// Enters agreement `instance` as job rank `me` among `participants`, contributing
    /// `input` and the failures `known_failed` (job ranks; others than participants are
    /// ignored) known here at entry. Queues the first report if this process is a leaf
    /// of its tree.
    ///
    /// # Panics
    /// If `me` is not a participant (a local programming error).
    pub fn with_input(
        participants: Arc<Participants>,
        me: u32,
        instance: u64,
        mut input: Input,
        known_failed: &[u32],
        now: Time,
    ) -> Agreement {
        input.signals.sort_unstable();
        input.signals.dedup();
        let Some(me_index) = participants.index_of(me) else {
            panic!("rank {me} is not a participant of agreement {instance}");
        };
        let mut failed: Vec<u32> =
            known_failed.iter().filter_map(|&r| participants.index_of(r)).filter(|&i| i != me_index).collect();
        failed.sort_unstable();
        failed.dedup();
        let mut a = Agreement {
            parts: participants,
            me: me_index,
            instance,
            input,
            failed,
            coordinator: 0,
            promise: 0,
            accepted: None,
            decided: None,
            decision: None,
            decision_polled: false,
            decided_at: None,
            gathers: Vec::new(),
            acks: Vec::new(),
            reported_to: None,
            acked_to: None,
            proposed_to: Vec::new(),
            informed: Vec::new(),
            transmits: VecDeque::new(),
        };
        a.coordinator = a.lowest_alive_from(0);
        a.enter_ballot();
        a.progress(now);
        a
    }

    /// The agreement instance.
    pub fn instance(&self) -> u64 {
        self.instance
    }

    /// This process's job rank.
    pub fn me(&self) -> u32 {
        self.parts.ranks[self.me as usize]
    }

    /// The participants.
    pub fn participants(&self) -> &Arc<Participants> {
        &self.parts
    }

    /// The job rank of the current coordinator (the lowest participant this process
    /// does not know failed; possibly itself), the root of the tree it reports in.
    pub fn coordinator(&self) -> u32 {
        self.parts.ranks[self.coordinator as usize]
    }

    /// What this instance waits for.
    pub fn state(&self) -> AgreeState {
        if self.decided.is_some() {
            return AgreeState::Decided;
        }
        if self.coordinator != self.me {
            return AgreeState::AwaitingCoordinator;
        }
        match self.accepted {
            Some((b, _)) if b == self.me => AgreeState::AwaitingAccepts,
            _ => AgreeState::AwaitingReports,
        }
    }

    /// The decision, once taken (also after [`Agreement::poll_decision`] returned it).
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_ref()
    }

    /// When the decision was taken.
    pub fn decided_at(&self) -> Option<Time> {
        self.decided_at
    }

    /// Handles agreement message `msg` from job rank `from`, received at `now`.
    /// Messages of another instance, from non-participants or from this process, and
    /// messages naming participant indices out of range or holding a list that is not
    /// strictly increasing (which [`AgreeMsg::decode`] never yields) are dropped; so are
    /// reports and accepts from a process that is not below this one in the ballot's tree.
    pub fn handle_message(&mut self, from: u32, msg: AgreeMsg, now: Time) {
        let Some(from) = self.parts.index_of(from) else { return };
        let n = self.parts.len();
        if from == self.me || msg.instance() != self.instance || !well_formed(&msg, n) {
            return;
        }
        match msg {
            AgreeMsg::Report { ballot, flag, max, failed, signals, prior, .. } => {
                if let Some(v) = &self.decided {
                    let commit = AgreeMsg::Commit { instance: self.instance, value: v.clone() };
                    self.send(from, commit);
                    insert_sorted(&mut self.informed, from);
                    return;
                }
                if let Prior::Decided(v) = prior {
                    insert_sorted(&mut self.informed, from);
                    self.decide(v, now);
                } else if ballot >= self.coordinator && self.tree(ballot).is_below(self.me, from) {
                    let at = match self.gathers.iter().position(|g| g.ballot == ballot) {
                        Some(at) => at,
                        None => {
                            self.gathers.push(Gather::new(ballot));
                            self.gathers.len() - 1
                        }
                    };
                    let best = match &prior {
                        Prior::Accepted { ballot, value } => Some((*ballot, value)),
                        _ => None,
                    };
                    self.gathers[at].merge(from, flag, max, &failed, &signals, best);
                }
            }
            AgreeMsg::Propose { ballot, value, .. } => {
                if let Some(v) = &self.decided {
                    let commit = AgreeMsg::Commit { instance: self.instance, value: v.clone() };
                    self.send(from, commit);
                    insert_sorted(&mut self.informed, from);
                    return;
                }
                if ballot < self.promise || self.accepted.as_ref().is_some_and(|(b, _)| *b == ballot) {
                    return;
                }
                self.promise = ballot;
                self.accepted = Some((ballot, value));
                self.acked_to = None;
                self.proposed_to.clear();
            }
            AgreeMsg::Accept { ballot, .. } => {
                if ballot >= self.coordinator && self.tree(ballot).is_below(self.me, from) {
                    insert_sorted(&mut self.acks, (ballot, from));
                }
            }
            AgreeMsg::Commit { value, .. } => {
                insert_sorted(&mut self.informed, from);
                self.decide(value, now);
            }
        }
        self.progress(now);
    }

    /// The detector reports job rank `rank` failed (the engine forwards every
    /// [`crate::FtEvent::Failed`]). Ignored for non-participants, for this process and
    /// for failures already known.
    pub fn handle_failure(&mut self, rank: u32, now: Time) {
        let Some(i) = self.parts.index_of(rank) else { return };
        if i == self.me {
            return;
        }
        match self.failed.binary_search(&i) {
            Ok(_) => return,
            Err(at) => self.failed.insert(at, i),
        }
        if i == self.coordinator {
            self.coordinator = self.lowest_alive_from(i + 1);
            self.enter_ballot();
        }
        self.progress(now);
    }

    /// The next message to send: `(destination job rank, message)`.
    pub fn poll_transmit(&mut self) -> Option<(u32, AgreeMsg)> {
        self.transmits.pop_front()
    }

    /// Always `None`: the agreement has no timers (progress comes from messages and
    /// failure notices). Present so the engine drives every FT state machine alike.
    pub fn poll_timeout(&self) -> Option<Time> {
        None
    }

    /// The decision, returned once, when taken.
    pub fn poll_decision(&mut self) -> Option<Decision> {
        if self.decision_polled {
            return None;
        }
        let d = self.decision.clone()?;
        self.decision_polled = true;
        Some(d)
    }

    fn lowest_alive_from(&self, start: u32) -> u32 {
        let mut i = start;
        // `me` is never in `failed`, so this stops at `me` at the latest.
        while self.failed.binary_search(&i).is_ok() {
            i += 1;
        }
        i
    }

    fn tree(&self, ballot: u32) -> Tree {
        Tree::new(ballot, self.parts.len(), self.parts.fanout)
    }

    fn is_failed(&self, i: u32) -> bool {
        self.failed.binary_search(&i).is_ok()
    }

    fn send(&mut self, to: u32, msg: AgreeMsg) {
        self.transmits.push_back((self.parts.ranks[to as usize], msg));
    }

    /// Starts working under the ballot of the (new) coordinator: promises it, forgets
    /// what was gathered under lower ones.
    fn enter_ballot(&mut self) {
        let b = self.coordinator;
        self.promise = self.promise.max(b);
        self.gathers.retain(|g| g.ballot >= b);
        self.acks.retain(|&(ab, _)| ab >= b);
        self.reported_to = None;
        self.acked_to = None;
    }

    fn decide(&mut self, value: Value, now: Time) {
        if self.decided.is_some() {
            return;
        }
        let mut failed: Vec<u32> = value.failed.iter().map(|&i| self.parts.ranks[i as usize]).collect();
        failed.sort_unstable();
        let signals = value.signals.clone();
        self.decision = Some(Decision { flag: value.flag, max: value.max, failed, signals });
        self.decided_at = Some(now);
        self.decided = Some(value);
    }

    /// This process's live children in the current ballot's tree.
    fn live_children(&self) -> Vec<u32> {
        let mut out = Vec::new();
        self.tree(self.coordinator).live_children(self.me, &|i| self.is_failed(i), &mut out);
        out
    }

    /// Moves this process forward as far as its inputs allow: passes a decision to every
    /// live neighbour not known to hold it; otherwise sends its report up once its
    /// range is covered (the root proposes instead), passes the accepted proposal down,
    /// sends its accept up once its range accepted (the root decides instead).
    fn progress(&mut self, now: Time) {
        let b = self.coordinator;
        let tree = self.tree(b);
        let parent = tree.live_parent(self.me, |i| self.is_failed(i));
        if let Some(v) = self.decided.clone() {
            let mut to = self.live_children();
            to.extend(parent);
            for t in to {
                if self.informed.binary_search(&t).is_err() {
                    insert_sorted(&mut self.informed, t);
                    self.send(t, AgreeMsg::Commit { instance: self.instance, value: v.clone() });
                }
            }
            return;
        }
        // Report phase.
        let at = self.gathers.iter().position(|g| g.ballot == b);
        let covered = {
            let from: &[u32] = at.map_or(&[], |at| &self.gathers[at].from);
            tree.covered(self.me, &|i| from.binary_search(&i).is_ok(), &|i| self.is_failed(i))
        };
        // The root proposes once covered; another process reports once covered, again
        // whenever its live parent changes.
        let report_to = if self.me == b { None } else { parent.filter(|&p| self.reported_to != Some(p)) };
        let acts = self.me == b || report_to.is_some();
        if acts && covered && self.accepted.as_ref().is_none_or(|(ab, _)| *ab < b) {
            let mut g = at.map_or_else(|| Gather::new(b), |at| self.gathers[at].clone());
            let best = self.accepted.as_ref().map(|(ab, v)| (*ab, v));
            g.merge(self.me, self.input.flag, self.input.max, &self.failed, &self.input.signals, best);
            if let Some(p) = report_to {
                self.reported_to = Some(p);
                let prior = match g.best {
                    Some((ballot, value)) => Prior::Accepted { ballot, value },
                    None => Prior::Nothing,
                };
                let (flag, max, failed, signals) = (g.flag, g.max, g.failed, g.signals);
                let msg = AgreeMsg::Report { instance: self.instance, ballot: b, flag, max, failed, signals, prior };
                self.send(p, msg);
            } else {
                // The root: adopt the highest accepted value, or propose a fresh one.
                let value = match g.best {
                    Some((_, v)) => v,
                    None => Value { flag: g.flag, max: g.max, failed: g.failed, signals: g.signals },
                };
                self.promise = b;
                self.accepted = Some((b, value));
                self.proposed_to.clear();
                self.acked_to = None;
            }
        }
        // Accept phase: only for the current ballot's proposal.
        let Some((ab, value)) = self.accepted.clone() else { return };
        if ab != b {
            return;
        }
        for c in self.live_children() {
            if let Err(at) = self.proposed_to.binary_search(&c) {
                self.proposed_to.insert(at, c);
                self.send(c, AgreeMsg::Propose { instance: self.instance, ballot: b, value: value.clone() });
            }
        }
        let acks = &self.acks;
        let answered = |i: u32| acks.binary_search(&(b, i)).is_ok();
        if !tree.covered(self.me, &answered, &|i| self.is_failed(i)) {
            return;
        }
        if self.me == b {
            self.decide(value, now);
            self.progress(now);
        } else if let Some(p) = parent {
            if self.acked_to != Some(p) {
                self.acked_to = Some(p);
                self.send(p, AgreeMsg::Accept { instance: self.instance, ballot: b });
            }
        }
    }
}

fn insert_sorted<T: Ord>(v: &mut Vec<T>, x: T) {
    if let Err(at) = v.binary_search(&x) {
        v.insert(at, x);
    }
}

/// Whether `msg` names only participant indices below `n` and holds only strictly
/// increasing lists (a decoded message always does; one built in memory may not).
fn well_formed(msg: &AgreeMsg, n: u32) -> bool {
    let list_ok = |l: &[u32]| l.windows(2).all(|w| w[0] < w[1]) && l.last().is_none_or(|&x| x < n);
    let signals_ok = |l: &[(SignalId, i32)]| l.windows(2).all(|w| w[0] < w[1]);
    let value_ok = |v: &Value| list_ok(&v.failed) && signals_ok(&v.signals);
    match msg {
        AgreeMsg::Report { ballot, failed, signals, prior, .. } => {
            *ballot < n
                && list_ok(failed)
                && signals_ok(signals)
                && match prior {
                    Prior::Nothing => true,
                    Prior::Accepted { ballot, value } => *ballot < n && value_ok(value),
                    Prior::Decided(value) => value_ok(value),
                }
        }
        AgreeMsg::Propose { ballot, value, .. } => *ballot < n && value_ok(value),
        AgreeMsg::Accept { ballot, .. } => *ballot < n,
        AgreeMsg::Commit { value, .. } => value_ok(value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ns: u64) -> Time {
        Time::from_nanos(ns)
    }

    fn drain(a: &mut Agreement) -> Vec<(u32, AgreeMsg)> {
        std::iter::from_fn(|| a.poll_transmit()).collect()
    }

    #[test]
    fn participants_map_both_ways_and_reject_duplicates() {
        let p = Participants::new(vec![7, 3, 11]).unwrap();
        assert_eq!((p.len(), p.rank(1), p.index_of(11), p.index_of(4)), (3, Some(3), Some(2), None));
        assert_eq!(Participants::new(vec![]), Err(ParticipantsError::Empty));
        assert_eq!(Participants::new(vec![1, 2, 1]), Err(ParticipantsError::Duplicate(1)));
        assert_eq!(Participants::world(4).index_of(3), Some(3));
    }

    #[test]
    fn alone_decides_at_once() {
        let p = Arc::new(Participants::new(vec![5]).unwrap());
        let mut a = Agreement::new(p, 5, 1, 0b1010, &[9], t(0));
        assert!(a.poll_transmit().is_none());
        assert_eq!(a.poll_decision(), Some(Decision { flag: 0b1010, ..Decision::default() }));
        assert_eq!(a.poll_decision(), None);
        assert_eq!(a.state(), AgreeState::Decided);
        assert_eq!(a.poll_timeout(), None);
    }

    #[test]
    fn three_processes_failure_free_by_hand() {
        // Job ranks 10, 20, 30; 10 coordinates.
        let p = Arc::new(Participants::new(vec![10, 20, 30]).unwrap());
        let mut a: Vec<Agreement> =
            [10, 20, 30].iter().map(|&r| Agreement::new(p.clone(), r, 42, !(1 << (r / 10)), &[], t(0))).collect();
        assert_eq!(a[0].state(), AgreeState::AwaitingReports);
        assert!(drain(&mut a[0]).is_empty());
        for i in 1..3 {
            let out = drain(&mut a[i]);
            assert_eq!(out.len(), 1);
            let (to, m) = out.into_iter().next().unwrap();
            assert_eq!(to, 10);
            a[0].handle_message(p.rank(i as u32).unwrap(), m, t(1));
        }
        assert_eq!(a[0].state(), AgreeState::AwaitingAccepts);
        let proposals = drain(&mut a[0]);
        assert_eq!(proposals.len(), 2);
        for (to, m) in proposals {
            let i = p.index_of(to).unwrap() as usize;
            a[i].handle_message(10, m, t(2));
            for (to, m) in drain(&mut a[i]) {
                assert_eq!(to, 10);
                a[0].handle_message(p.rank(i as u32).unwrap(), m, t(3));
            }
        }
        let want = Decision { flag: !0b1110, ..Decision::default() };
        assert_eq!(a[0].poll_decision(), Some(want.clone()));
        for (to, m) in drain(&mut a[0]) {
            let i = p.index_of(to).unwrap() as usize;
            a[i].handle_message(10, m, t(4));
            assert_eq!(a[i].poll_decision(), Some(want.clone()));
        }
    }

    #[test]
    fn coordinator_failure_moves_the_report_and_foreign_input_is_dropped() {
        let p = Arc::new(Participants::world(4));
        let mut a = Agreement::new(p, 2, 5, 1, &[], t(0));
        assert_eq!(drain(&mut a).len(), 1);
        // Wrong instance, out-of-range indices, non-participants: dropped.
        let bad = AgreeMsg::Commit { instance: 6, value: Value::default() };
        a.handle_message(0, bad, t(1));
        let bad = AgreeMsg::Commit { instance: 5, value: Value { failed: vec![4], ..Value::default() } };
        a.handle_message(0, bad, t(1));
        let bad = AgreeMsg::Commit { instance: 5, value: Value { failed: vec![1, 0], ..Value::default() } };
        a.handle_message(0, bad, t(1));
        let bad = AgreeMsg::Commit { instance: 5, value: Value { signals: vec![(1, 1), (0, 0)], ..Value::default() } };
        a.handle_message(0, bad, t(1));
        a.handle_message(99, AgreeMsg::Accept { instance: 5, ballot: 0 }, t(1));
        assert!(a.poll_decision().is_none());
        a.handle_failure(0, t(2));
        let out = drain(&mut a);
        assert_eq!(out.len(), 1);
        assert!(matches!(&out[0], (1, AgreeMsg::Report { ballot: 1, failed, .. }) if failed == &[0]));
        a.handle_failure(1, t(3));
        assert_eq!(a.state(), AgreeState::AwaitingReports);
        assert_eq!(a.coordinator(), 2);
        // Rank 3 reports having accepted ballot 1's proposal: it is adopted.
        let v = Value { flag: 7, max: 3, failed: vec![0], signals: vec![(0, -1)] };
        let report = AgreeMsg::Report {
            instance: 5,
            ballot: 2,
            flag: 0,
            max: 99,
            failed: vec![],
            signals: vec![(8, 8)],
            prior: Prior::Accepted { ballot: 1, value: v.clone() },
        };
        a.handle_message(3, report, t(4));
        let out = drain(&mut a);
        assert_eq!(out, vec![(3, AgreeMsg::Propose { instance: 5, ballot: 2, value: v })]);
        a.handle_message(3, AgreeMsg::Accept { instance: 5, ballot: 2 }, t(5));
        let want = Decision { flag: 7, max: 3, failed: vec![0], signals: vec![(0, -1)] };
        assert_eq!(a.poll_decision(), Some(want));
    }

    #[test]
    fn fresh_value_combines_max_and_signals_of_every_report() {
        // Job ranks 10, 20, 30; 10 coordinates. Inputs: unsorted signals with
        // duplicates, overlapping between participants.
        let p = Arc::new(Participants::new(vec![10, 20, 30]).unwrap());
        let inputs = [
            Input { flag: 0b111, max: 4, signals: vec![(30, 2), (20, -1), (30, 2)] },
            Input { flag: 0b110, max: 9, signals: vec![(20, -1)] },
            Input { flag: 0b011, max: 1, signals: vec![] },
        ];
        let mut a: Vec<Agreement> = [10, 20, 30]
            .iter()
            .zip(&inputs)
            .map(|(&r, i)| Agreement::with_input(p.clone(), r, 1, i.clone(), &[], t(0)))
            .collect();
        // 20's report arrives twice (a faulty duplicate): counted once.
        for i in 1..3 {
            for (to, m) in drain(&mut a[i]) {
                assert_eq!(to, 10);
                if i == 1 {
                    a[0].handle_message(20, m.clone(), t(1));
                }
                a[0].handle_message(p.rank(i as u32).unwrap(), m, t(1));
            }
        }
        let want = Decision { flag: 0b010, max: 9, failed: vec![], signals: vec![(20, -1), (30, 2)] };
        let proposals = drain(&mut a[0]);
        assert_eq!(proposals.len(), 2);
        for (to, m) in proposals {
            let AgreeMsg::Propose { value, .. } = &m else { panic!("{m:?}") };
            assert_eq!((value.max, &value.signals), (want.max, &want.signals));
            let i = p.index_of(to).unwrap() as usize;
            a[i].handle_message(10, m, t(2));
            for (_, m) in drain(&mut a[i]) {
                a[0].handle_message(to, m, t(3));
            }
        }
        assert_eq!(a[0].poll_decision(), Some(want.clone()));
        for (to, m) in drain(&mut a[0]) {
            let i = p.index_of(to).unwrap() as usize;
            a[i].handle_message(10, m, t(4));
            assert_eq!(a[i].poll_decision(), Some(want.clone()));
        }
    }
}
