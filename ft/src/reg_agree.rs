//! Uniform agreement over shared registers: the fast path of `validate`, `agree` and
//! uniform creation for communicators whose members all share one node (R19, R24, R29).
//!
//! Where every participant can compare-and-swap every other's *vote word* (the
//! segment's collective area), agreement needs no coordinator and no message rounds:
//! a compare-and-swap object solves consensus for any number of processes (Herlihy,
//! "Wait-free synchronization", 1991), and with a perfect failure detector nobody
//! waits for a crashed process for ever. Failure-free cost: one write of each
//! participant's proposal and one read of every other's — the shape of an allgather,
//! against the four message delays of [`crate::agree`].
//!
//! Only the flag word and the failures are agreed here, not the `max` word or the
//! signals of [`crate::agree::Input`]: this path serves only the flag / failure users
//! (`validate`, `agree`, uniform creation); a caller that turns an outcome into a
//! [`crate::Decision`] decides `max` 0 and no signals.
//!
//! # Registers
//!
//! Per participant `k`: a vote word `V_k` and two proposal buffers (by instance
//! parity), written only by `k`. `V_k` holds an instance number and a state:
//! *proposed* (its proposal for that instance is in buffer `instance & 1`) or *dead*
//! (someone saw `k` failed before it proposed). A word changes only by
//! compare-and-swap and only forwards: `k` sets `(a, proposed)` when it enters
//! instance `a`; another participant that knows `k` failed sets `(a, dead)` over a word
//! of an earlier instance; a dead word is never changed again.
//!
//! # Algorithm (participant `j`, instance `a`)
//!
//! 1. Write the proposal (flag word, failures known) into buffer `a & 1`; swap `V_j`
//!    to `(a, proposed)`. If `V_j` is dead, `j` was excluded and stops.
//! 2. For every other `k`, until `k`'s status in `a` is settled, read `V_k`:
//!    - `(b, dead)` with `b ≤ a`: `k` is dead in `a`;
//!    - `(a, proposed)`, or any word of an instance `b > a`: `k` proposed in `a` (it
//!      enters instances in order, and `(b, dead)` with `b > a` replaced a proposal of
//!      `b − 1 ≥ a`); its proposal is in buffer `a & 1`;
//!    - an earlier instance: if the detector says `k` failed, swap `V_k` to `(a, dead)`
//!      (on a lost race, read again); otherwise wait.
//! 3. Decide: the AND of the proposed flags; the union of the proposed failures and the
//!    dead participants. If `V_j` turned dead meanwhile, `j` was excluded: no decision.
//!
//! # Why it is uniform
//!
//! Every participant's status in instance `a` is fixed by the first successful swap to
//! an `a` word (or an earlier dead one), and later words preserve it (the rules of step
//! 2). So every decider reads the same statuses and — as long as it is not excluded —
//! the same proposals: `k` rewrites buffer `a & 1` only in instance `a + 2`, which it
//! enters after deciding `a + 1`, which needs `j`'s status in `a + 1`, which `j`
//! settles only after deciding `a` (or by being declared dead: then `j` is excluded and
//! its decision discarded). Every decider computes the same function of the same
//! inputs, including one that decides and crashes at once.
//!
//! *Validity:* a participant is dead only if the detector reported it, and proposals
//! carry only reported failures; every participant alive when the decision is taken
//! proposed (nobody declares a live one dead). *Termination:* every `V_k` is
//! eventually settled: `k` proposes, or `k` fails and the perfect detector tells `j`,
//! which swaps it dead.
//!
//! [`agree`] is the algorithm over a [`Registers`] implementation; the engine provides
//! one over shared memory, the tests one over threads with crashes at every step.

use std::sync::atomic::{AtomicU64, Ordering};

/// Most participants (the failure bitmap has one bit each).
pub const MAX_PARTICIPANTS: usize = 128;

const PROPOSED: u64 = 1;
const DEAD: u64 = 2;

fn word(instance: u64, state: u64) -> u64 {
    instance << 2 | state
}

/// One participant's contribution: a flag word (AND-ed) and the participants it knows
/// failed (bit `k` = participant index `k`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Proposal {
    /// Flag word.
    pub flag: u32,
    /// Known failures, by participant index.
    pub failed: u128,
}

/// The shared registers of the participants `0..n`.
pub trait Registers {
    /// Number of participants (at most [`MAX_PARTICIPANTS`]).
    fn n(&self) -> usize;
    /// The vote word of participant `k`.
    fn vote(&self, k: usize) -> &AtomicU64;
    /// Writes the calling participant `k`'s proposal into its buffer `parity`.
    fn write(&self, k: usize, parity: usize, p: Proposal);
    /// Reads participant `k`'s buffer `parity`.
    fn read(&self, k: usize, parity: usize) -> Proposal;
}

/// How an instance ended for the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The decision: AND of the flags, union of the failures (participant indices).
    Decided(Proposal),
    /// The caller was declared dead by another participant (it was suspected): it must
    /// stop, its decision would not count.
    Excluded,
}

/// Where a crash-injecting caller stops ([`agree_until`]); `None` runs to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// After writing the proposal, before swapping the vote word.
    Written,
    /// After swapping the vote word.
    Voted,
    /// After settling the status of this many other participants.
    Settled(usize),
}

/// Runs instance `instance` (≥ 1, one more than the participant's previous) as
/// participant `me` with proposal `mine`. `failed(k)` is the perfect failure detector;
/// `snooze` is called between unsuccessful reads.
pub fn agree<R: Registers>(
    regs: &R,
    me: usize,
    instance: u64,
    mine: Proposal,
    failed: impl FnMut(usize) -> bool,
    snooze: impl FnMut(),
) -> Outcome {
    agree_until(regs, me, instance, mine, failed, snooze, None).unwrap_or(Outcome::Excluded)
}

/// [`agree`], stopping at `stop` (the simulated crash) with `None`.
pub fn agree_until<R: Registers>(
    regs: &R,
    me: usize,
    instance: u64,
    mine: Proposal,
    mut failed: impl FnMut(usize) -> bool,
    mut snooze: impl FnMut(),
    stop: Option<Step>,
) -> Option<Outcome> {
    let n = regs.n();
    assert!(n <= MAX_PARTICIPANTS && me < n && instance >= 1, "agreement arguments out of range");
    let parity = (instance & 1) as usize;
    regs.write(me, parity, mine);
    if stop == Some(Step::Written) {
        return None;
    }
    let own = regs.vote(me);
    let mut cur = own.load(Ordering::Acquire);
    loop {
        if cur & DEAD != 0 {
            return Some(Outcome::Excluded);
        }
        match own.compare_exchange(cur, word(instance, PROPOSED), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(x) => cur = x,
        }
    }
    if stop == Some(Step::Voted) {
        return None;
    }
    let mut acc = mine;
    let mut settled = 0;
    for k in (0..n).filter(|&k| k != me) {
        loop {
            let w = regs.vote(k).load(Ordering::Acquire);
            let (b, state) = (w >> 2, w & 3);
            if state == DEAD && b <= instance {
                acc.failed |= 1 << k;
                break;
            }
            if b > instance || (b == instance && state == PROPOSED) {
                let p = regs.read(k, parity);
                acc.flag &= p.flag;
                acc.failed |= p.failed;
                break;
            }
            if failed(k) {
                // Settle it dead unless it proposed (or was settled) meanwhile: re-read.
                let _ = regs.vote(k).compare_exchange(w, word(instance, DEAD), Ordering::AcqRel, Ordering::Acquire);
                continue;
            }
            snooze();
        }
        settled += 1;
        if stop == Some(Step::Settled(settled)) {
            return None;
        }
    }
    if own.load(Ordering::Acquire) & DEAD != 0 {
        return Some(Outcome::Excluded);
    }
    Some(Outcome::Decided(acc))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Mutex};

    /// Registers in memory; each buffer behind a mutex (the shared-memory version
    /// relies on the protocol instead).
    struct Mem {
        votes: Vec<AtomicU64>,
        bufs: Vec<[Mutex<Proposal>; 2]>,
    }

    impl Mem {
        fn new(n: usize) -> Self {
            Mem {
                votes: (0..n).map(|_| AtomicU64::new(0)).collect(),
                bufs: (0..n).map(|_| [Mutex::new(Proposal::default()), Mutex::new(Proposal::default())]).collect(),
            }
        }
    }

    impl Registers for Mem {
        fn n(&self) -> usize {
            self.votes.len()
        }
        fn vote(&self, k: usize) -> &AtomicU64 {
            &self.votes[k]
        }
        fn write(&self, k: usize, parity: usize, p: Proposal) {
            *self.bufs[k][parity].lock().unwrap() = p;
        }
        fn read(&self, k: usize, parity: usize) -> Proposal {
            *self.bufs[k][parity].lock().unwrap()
        }
    }

    /// A tiny deterministic generator (xorshift), so every seed is reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// `n` threads run `instances` agreements in a row; some crash at a random step of
    /// a random instance (set `crashed` after stopping: a perfect detector). Returns, per
    /// instance, the decisions (participant, outcome) and the crashed set at the end.
    /// Per instance, who decided what.
    type Decisions = Vec<Vec<(usize, Proposal)>>;
    /// Per participant, the instance and step it crashes at.
    type Crashes = Vec<Option<(u64, Step)>>;

    fn run(n: usize, instances: u64, seed: u64) -> (Decisions, u128, Crashes) {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let crash: Vec<Option<(u64, Step)>> = (0..n)
            .map(|_| {
                if rng.below(3) == 0 {
                    let at = 1 + rng.below(instances);
                    let step = match rng.below(3) {
                        0 => Step::Written,
                        1 => Step::Voted,
                        _ => Step::Settled(1 + rng.below(n as u64 - 1) as usize),
                    };
                    Some((at, step))
                } else {
                    None
                }
            })
            .collect();
        let mem = Arc::new(Mem::new(n));
        let crashed: Arc<Vec<AtomicBool>> = Arc::new((0..n).map(|_| AtomicBool::new(false)).collect());
        let decisions = Arc::new(Mutex::new(vec![Vec::new(); instances as usize]));
        let threads: Vec<_> = (0..n)
            .map(|me| {
                let (mem, crashed, decisions, crash) = (mem.clone(), crashed.clone(), decisions.clone(), crash[me]);
                let jitter = seed ^ me as u64;
                std::thread::spawn(move || {
                    let mut rng = Rng(jitter.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
                    for a in 1..=instances {
                        let known: u128 =
                            (0..n).filter(|&k| crashed[k].load(Ordering::Acquire)).map(|k| 1u128 << k).sum();
                        let mine =
                            Proposal { flag: !(1 << (me % 31)) & !(((rng.next() & 1) as u32) << 31), failed: known };
                        let stop = crash.filter(|(at, _)| *at == a).map(|(_, s)| s);
                        for _ in 0..rng.below(3) {
                            std::thread::yield_now();
                        }
                        let out = agree_until(
                            &*mem,
                            me,
                            a,
                            mine,
                            |k| crashed[k].load(Ordering::Acquire),
                            std::thread::yield_now,
                            stop,
                        );
                        match out {
                            None => {
                                crashed[me].store(true, Ordering::Release);
                                return;
                            }
                            Some(Outcome::Decided(d)) => decisions.lock().unwrap()[a as usize - 1].push((me, d)),
                            Some(Outcome::Excluded) => panic!("participant {me} excluded without a false suspicion"),
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let dead: u128 = (0..n).filter(|&k| crashed[k].load(Ordering::Acquire)).map(|k| 1u128 << k).sum();
        let d = decisions.lock().unwrap().clone();
        (d, dead, crash)
    }

    #[test]
    fn uniform_valid_and_terminating_under_crashes_at_every_step() {
        for seed in 0..300u64 {
            let n = 2 + (seed % 7) as usize;
            let instances = 3;
            let (decisions, dead, crash) = run(n, instances, seed);
            for (i, ds) in decisions.iter().enumerate() {
                let a = i as u64 + 1;
                // Termination: everyone that did not crash in or before `a` decided `a`.
                for (k, c) in crash.iter().enumerate() {
                    let alive_through = c.is_none_or(|(at, _)| at > a);
                    assert!(
                        !alive_through || ds.iter().any(|(p, _)| *p == k),
                        "seed {seed}: participant {k} did not decide instance {a}"
                    );
                }
                // Uniform agreement, also with deciders that crashed later.
                let Some(&(_, first)) = ds.first() else { continue };
                assert!(ds.iter().all(|(_, d)| *d == first), "seed {seed} instance {a}: {ds:?}");
                // Validity: only crashed participants are failed, and every participant
                // that crashed in an earlier instance is.
                assert_eq!(first.failed & !dead, 0, "seed {seed}: a live participant declared failed");
                for (k, c) in crash.iter().enumerate() {
                    if c.is_some_and(|(at, _)| at < a) {
                        assert_ne!(first.failed & (1 << k), 0, "seed {seed}: earlier crash of {k} missing in {a}");
                    }
                    // A participant that decided `a` proposed in it: its flag bit is ANDed.
                    if ds.iter().any(|(p, _)| *p == k) {
                        assert_eq!(first.flag & (1 << (k % 31)), 0, "seed {seed}: flag of {k} missing");
                    }
                }
            }
        }
    }

    #[test]
    fn failure_free_instances_decide_the_and_of_all_flags() {
        let mem = Mem::new(1);
        let d = agree(&mem, 0, 1, Proposal { flag: 0b1010, failed: 0 }, |_| false, || {});
        assert_eq!(d, Outcome::Decided(Proposal { flag: 0b1010, failed: 0 }));
        let (decisions, dead, _) = run(4, 5, u64::MAX); // a seed that may or may not crash
        for ds in &decisions {
            assert!(ds.iter().all(|(_, d)| d.failed & !dead == 0));
        }
    }

    #[test]
    fn a_participant_declared_dead_is_excluded() {
        let mem = Mem::new(2);
        // Participant 1 declares 0 dead before 0 votes in instance 1.
        mem.votes[0].store(word(1, DEAD), Ordering::Release);
        let out = agree(&mem, 0, 1, Proposal::default(), |_| false, || {});
        assert_eq!(out, Outcome::Excluded);
        // And 1 decides with 0 failed.
        let out = agree(&mem, 1, 1, Proposal { flag: 7, failed: 0 }, |_| false, || {});
        assert_eq!(out, Outcome::Decided(Proposal { flag: 7, failed: 1 }));
    }
}
