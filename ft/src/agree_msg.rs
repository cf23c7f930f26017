//! Messages of the fault-tolerant agreement ([`crate::agree`]) and their byte encoding.
//!
//! Parts: [`Value`] (a proposed or decided value: flag word, maximum word, failed
//! participants and signalled errors),
//! [`Prior`] (what a process already holds when it reports to a coordinator),
//! [`AgreeMsg`] (report, propose, accept, commit), [`AgreeMsg::encode`] /
//! [`AgreeMsg::decode`]. Decoding errors reuse [`DecodeError`].
//!
//! Every message carries the agreement's `instance` id, so that concurrent or
//! consecutive agreements never mix. Ranks inside messages are *participant indices*
//! (positions in the [`crate::Participants`] list), not job ranks.
//!
//! Encoding (little endian, no trailing bytes):
//!
//! | kind   | message   | body                                                                          |
//! |--------|-----------|-------------------------------------------------------------------------------|
//! | `0x11` | `Report`  | `instance: u64, ballot: u32, flag: u32, max: u32, failed: list, signals: sigs, prior` |
//! | `0x12` | `Propose` | `instance: u64, ballot: u32, value`                                           |
//! | `0x13` | `Accept`  | `instance: u64, ballot: u32`                                                  |
//! | `0x14` | `Commit`  | `instance: u64, value`                                                        |
//!
//! where `list` is `count: u32` then `count` strictly increasing `u32`; `sigs` is
//! `count: u32` then `count` pairs `(id: u64, code: i32)` ([`SignalId`]), strictly
//! increasing in `(id, code)` order; `value` is `flag: u32, max: u32, failed: list, signals: sigs`;
//! `prior` is a tag byte `0` (nothing), `1` (accepted: `ballot: u32, value`) or `2`
//! (decided: `value`).
//!
//! Decoding checks every length against the bytes actually present before allocating,
//! so a hostile count cannot make it allocate more than the message's own size; it
//! accepts only canonical encodings (sorted, duplicate-free lists; known tags) and never
//! panics. It does not know the participant count: the [`crate::Agreement`] drops
//! messages naming indices outside its participants, which bounds every `list` by the
//! participant count. Signals name job ranks, not participant indices, and are not
//! range-checked: they are data carried for the user (`signal_error`), bounded only by
//! the message's size.

use crate::msg::DecodeError;

/// A signal's identity (R27, `signal_error`): its origin's job rank in the low 32 bits,
/// the origin's count of signals on the communicator in the high 32 — unique in a job of
/// any size (2^32 ranks), for 2^32 signals a member and communicator.
pub type SignalId = u64;

const KIND_REPORT: u8 = 0x11;
const KIND_PROPOSE: u8 = 0x12;
const KIND_ACCEPT: u8 = 0x13;
const KIND_COMMIT: u8 = 0x14;

const PRIOR_NOTHING: u8 = 0;
const PRIOR_ACCEPTED: u8 = 1;
const PRIOR_DECIDED: u8 = 2;

/// A value of the agreement: the AND of flag words, the maximum of the contributed
/// words, the failed participants and the union of the signalled errors.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Value {
    /// Bitwise AND of the contributed flag words.
    pub flag: u32,
    /// Maximum of the contributed `max` words.
    pub max: u32,
    /// Failed participants, as strictly increasing participant indices.
    pub failed: Vec<u32>,
    /// Union of the contributed `(id, code)` signals, strictly increasing.
    pub signals: Vec<(SignalId, i32)>,
}

/// What a process already holds for this agreement when it reports to a coordinator.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Prior {
    /// It accepted no proposal yet.
    #[default]
    Nothing,
    /// It accepted `value` proposed under `ballot` (the proposing coordinator's index).
    Accepted {
        /// The ballot (participant index of the coordinator that proposed it).
        ballot: u32,
        /// The accepted value.
        value: Value,
    },
    /// It decided `value`.
    Decided(Value),
}

/// A message of the agreement protocol. See the [module docs](self) for the encoding and
/// [`crate::agree`] for the protocol.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum AgreeMsg {
    /// To the coordinator: "you are my coordinator; here is my contribution and my prior
    /// state". Also a promise to ignore proposals of lower ballots.
    Report {
        /// The agreement instance.
        instance: u64,
        /// The participant index of the coordinator addressed (= its ballot).
        ballot: u32,
        /// The sender's flag word.
        flag: u32,
        /// The sender's `max` word.
        max: u32,
        /// Participants the sender knows failed (strictly increasing indices).
        failed: Vec<u32>,
        /// The sender's signalled errors, `(id, code)` strictly increasing.
        signals: Vec<(SignalId, i32)>,
        /// What the sender already accepted or decided.
        prior: Prior,
    },
    /// From the coordinator: "accept `value` under `ballot`".
    Propose {
        /// The agreement instance.
        instance: u64,
        /// The proposing coordinator's participant index.
        ballot: u32,
        /// The proposed value.
        value: Value,
    },
    /// To the coordinator: "I accepted your proposal of `ballot`".
    Accept {
        /// The agreement instance.
        instance: u64,
        /// The ballot accepted.
        ballot: u32,
    },
    /// "`value` is decided": sent by a coordinator once every alive participant accepted
    /// it, or by a process that already decided.
    Commit {
        /// The agreement instance.
        instance: u64,
        /// The decided value.
        value: Value,
    },
}

impl AgreeMsg {
    /// The agreement instance this message belongs to.
    pub fn instance(&self) -> u64 {
        match *self {
            AgreeMsg::Report { instance, .. }
            | AgreeMsg::Propose { instance, .. }
            | AgreeMsg::Accept { instance, .. }
            | AgreeMsg::Commit { instance, .. } => instance,
        }
    }

    /// Length of this message's encoding.
    pub fn encoded_len(&self) -> usize {
        let list = |l: &[u32]| 4 + 4 * l.len();
        let sigs = |l: &[(SignalId, i32)]| 4 + 12 * l.len();
        let value = |v: &Value| 4 + 4 + list(&v.failed) + sigs(&v.signals);
        match self {
            AgreeMsg::Report { failed, signals, prior, .. } => {
                1 + 8
                    + 4
                    + 4
                    + 4
                    + list(failed)
                    + sigs(signals)
                    + 1
                    + match prior {
                        Prior::Nothing => 0,
                        Prior::Accepted { value: v, .. } => 4 + value(v),
                        Prior::Decided(v) => value(v),
                    }
            }
            AgreeMsg::Propose { value: v, .. } => 1 + 8 + 4 + value(v),
            AgreeMsg::Accept { .. } => 1 + 8 + 4,
            AgreeMsg::Commit { value: v, .. } => 1 + 8 + value(v),
        }
    }

    /// Appends the encoding of `self` to `out`.
    ///
    /// Lists (failures and signals) are written as given; [`crate::Agreement`] only
    /// produces strictly increasing ones, which is what [`AgreeMsg::decode`] accepts.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        match self {
            AgreeMsg::Report { instance, ballot, flag, max, failed, signals, prior } => {
                out.push(KIND_REPORT);
                out.extend_from_slice(&instance.to_le_bytes());
                out.extend_from_slice(&ballot.to_le_bytes());
                out.extend_from_slice(&flag.to_le_bytes());
                out.extend_from_slice(&max.to_le_bytes());
                put_list(out, failed);
                put_signals(out, signals);
                match prior {
                    Prior::Nothing => out.push(PRIOR_NOTHING),
                    Prior::Accepted { ballot, value } => {
                        out.push(PRIOR_ACCEPTED);
                        out.extend_from_slice(&ballot.to_le_bytes());
                        put_value(out, value);
                    }
                    Prior::Decided(value) => {
                        out.push(PRIOR_DECIDED);
                        put_value(out, value);
                    }
                }
            }
            AgreeMsg::Propose { instance, ballot, value } => {
                out.push(KIND_PROPOSE);
                out.extend_from_slice(&instance.to_le_bytes());
                out.extend_from_slice(&ballot.to_le_bytes());
                put_value(out, value);
            }
            AgreeMsg::Accept { instance, ballot } => {
                out.push(KIND_ACCEPT);
                out.extend_from_slice(&instance.to_le_bytes());
                out.extend_from_slice(&ballot.to_le_bytes());
            }
            AgreeMsg::Commit { instance, value } => {
                out.push(KIND_COMMIT);
                out.extend_from_slice(&instance.to_le_bytes());
                put_value(out, value);
            }
        }
    }

    /// Decodes one message occupying all of `bytes`.
    ///
    /// # Errors
    /// [`DecodeError`] if `bytes` is empty, has an unknown kind byte, ends early, has
    /// trailing bytes, or holds a non-canonical field (unknown prior tag, a rank or
    /// signal list that is not strictly increasing).
    pub fn decode(bytes: &[u8]) -> Result<AgreeMsg, DecodeError> {
        let (&kind, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        let mut r = Reader { kind, rest: body };
        let msg = match kind {
            KIND_REPORT => {
                let instance = r.u64()?;
                let ballot = r.u32()?;
                let flag = r.u32()?;
                let max = r.u32()?;
                let failed = r.list()?;
                let signals = r.signals()?;
                let prior = match r.u8()? {
                    PRIOR_NOTHING => Prior::Nothing,
                    PRIOR_ACCEPTED => {
                        let ballot = r.u32()?;
                        Prior::Accepted { ballot, value: r.value()? }
                    }
                    PRIOR_DECIDED => Prior::Decided(r.value()?),
                    _ => return Err(DecodeError::Invalid { kind, field: "prior tag" }),
                };
                AgreeMsg::Report { instance, ballot, flag, max, failed, signals, prior }
            }
            KIND_PROPOSE => {
                let instance = r.u64()?;
                let ballot = r.u32()?;
                AgreeMsg::Propose { instance, ballot, value: r.value()? }
            }
            KIND_ACCEPT => AgreeMsg::Accept { instance: r.u64()?, ballot: r.u32()? },
            KIND_COMMIT => {
                let instance = r.u64()?;
                AgreeMsg::Commit { instance, value: r.value()? }
            }
            other => return Err(DecodeError::UnknownKind(other)),
        };
        if !r.rest.is_empty() {
            return Err(DecodeError::Trailing { kind, extra: r.rest.len() });
        }
        Ok(msg)
    }
}

fn put_list(out: &mut Vec<u8>, list: &[u32]) {
    out.extend_from_slice(&(list.len() as u32).to_le_bytes());
    for x in list {
        out.extend_from_slice(&x.to_le_bytes());
    }
}

fn put_signals(out: &mut Vec<u8>, signals: &[(SignalId, i32)]) {
    out.extend_from_slice(&(signals.len() as u32).to_le_bytes());
    for (id, code) in signals {
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&code.to_le_bytes());
    }
}

fn put_value(out: &mut Vec<u8>, v: &Value) {
    out.extend_from_slice(&v.flag.to_le_bytes());
    out.extend_from_slice(&v.max.to_le_bytes());
    put_list(out, &v.failed);
    put_signals(out, &v.signals);
}

struct Reader<'a> {
    kind: u8,
    rest: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let Some((head, tail)) = self.rest.split_first_chunk::<N>() else {
            return Err(DecodeError::Truncated { kind: self.kind });
        };
        self.rest = tail;
        Ok(*head)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take::<1>()?[0])
    }

    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.take()?))
    }

    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.take()?))
    }

    fn list(&mut self) -> Result<Vec<u32>, DecodeError> {
        let count = self.u32()? as usize;
        // Bound the allocation by the bytes present, never by the claimed count.
        if count > self.rest.len() / 4 {
            return Err(DecodeError::Truncated { kind: self.kind });
        }
        let mut list = Vec::with_capacity(count);
        for _ in 0..count {
            let x = self.u32()?;
            if list.last().is_some_and(|&prev| prev >= x) {
                return Err(DecodeError::Invalid { kind: self.kind, field: "rank list order" });
            }
            list.push(x);
        }
        Ok(list)
    }

    fn signals(&mut self) -> Result<Vec<(SignalId, i32)>, DecodeError> {
        let count = self.u32()? as usize;
        // Bound the allocation by the bytes present, never by the claimed count.
        if count > self.rest.len() / 12 {
            return Err(DecodeError::Truncated { kind: self.kind });
        }
        let mut signals = Vec::with_capacity(count);
        for _ in 0..count {
            let s = (self.u64()?, i32::from_le_bytes(self.take()?));
            if signals.last().is_some_and(|&prev| prev >= s) {
                return Err(DecodeError::Invalid { kind: self.kind, field: "signal list order" });
            }
            signals.push(s);
        }
        Ok(signals)
    }

    fn value(&mut self) -> Result<Value, DecodeError> {
        let flag = self.u32()?;
        let max = self.u32()?;
        let failed = self.list()?;
        Ok(Value { flag, max, failed, signals: self.signals()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(flag: u32, failed: &[u32]) -> Value {
        Value { flag, failed: failed.to_vec(), ..Value::default() }
    }

    fn vs(flag: u32, max: u32, failed: &[u32], signals: &[(SignalId, i32)]) -> Value {
        Value { flag, max, failed: failed.to_vec(), signals: signals.to_vec() }
    }

    fn report(signals: &[(SignalId, i32)], prior: Prior) -> AgreeMsg {
        AgreeMsg::Report { instance: 1, ballot: 0, flag: 0, max: 0, failed: vec![], signals: signals.to_vec(), prior }
    }

    #[test]
    fn round_trip_and_rejects() {
        let msgs = [
            report(&[], Prior::Nothing),
            AgreeMsg::Report {
                instance: 7,
                ballot: 2,
                flag: !0,
                max: u32::MAX,
                failed: vec![],
                signals: vec![(0, i32::MIN), (0, -1), (3, 0), (u64::MAX, i32::MAX)],
                prior: Prior::Nothing,
            },
            AgreeMsg::Report {
                instance: u64::MAX,
                ballot: 3,
                flag: 5,
                max: 17,
                failed: vec![0, 1, 9],
                signals: vec![(2, 5)],
                prior: Prior::Accepted { ballot: 1, value: vs(4, 9, &[0], &[(1, -3), (2, 5)]) },
            },
            AgreeMsg::Report {
                instance: 1,
                ballot: 0,
                flag: 0,
                max: 1,
                failed: vec![2],
                signals: vec![],
                prior: Prior::Decided(vs(1, 1, &[2], &[(7, 7)])),
            },
            AgreeMsg::Propose { instance: 3, ballot: 0, value: vs(0xffff, 3, &[1, 2, 3], &[(0, 1), (0, 2)]) },
            AgreeMsg::Accept { instance: 3, ballot: 4 },
            AgreeMsg::Commit { instance: 9, value: v(1, &[]) },
            AgreeMsg::Commit { instance: 9, value: vs(1, 0x8000_0000, &[4], &[(9, -9)]) },
        ];
        for m in msgs {
            let mut b = Vec::new();
            m.encode(&mut b);
            assert_eq!(b.len(), m.encoded_len(), "{m:?}");
            assert_eq!(AgreeMsg::decode(&b), Ok(m.clone()));
            let kind = b[0];
            b.push(0);
            assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Trailing { kind, extra: 1 }));
            b.truncate(b.len() - 2);
            assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Truncated { kind }));
        }
        assert_eq!(AgreeMsg::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(AgreeMsg::decode(&[0x01]), Err(DecodeError::UnknownKind(0x01)));
    }

    #[test]
    fn rejects_non_canonical_fields_and_huge_counts() {
        let mut b = Vec::new();
        AgreeMsg::Commit { instance: 1, value: v(0, &[3, 3]) }.encode(&mut b);
        assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Invalid { kind: KIND_COMMIT, field: "rank list order" }));
        for bad in [&[(1, 2), (1, 2)][..], &[(2, 0), (1, 5)], &[(1, 0), (1, -1)]] {
            let mut b = Vec::new();
            AgreeMsg::Commit { instance: 1, value: vs(0, 0, &[], bad) }.encode(&mut b);
            let want = Err(DecodeError::Invalid { kind: KIND_COMMIT, field: "signal list order" });
            assert_eq!(AgreeMsg::decode(&b), want, "{bad:?}");
            let mut b = Vec::new();
            report(bad, Prior::Nothing).encode(&mut b);
            let want = Err(DecodeError::Invalid { kind: KIND_REPORT, field: "signal list order" });
            assert_eq!(AgreeMsg::decode(&b), want, "{bad:?}");
        }
        let mut b = Vec::new();
        report(&[], Prior::Nothing).encode(&mut b);
        *b.last_mut().unwrap() = 3;
        assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Invalid { kind: KIND_REPORT, field: "prior tag" }));
        // A count of 2^32 - 1 with no elements: rejected without allocating.
        let mut b = vec![KIND_COMMIT];
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Truncated { kind: KIND_COMMIT }));
        // A signal count of 2 with the bytes of one pair and a half: rejected before the
        // list is read (the count is checked against 8-byte pairs, not 4-byte words).
        let mut b = vec![KIND_COMMIT];
        b.extend_from_slice(&1u64.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes()); // flag
        b.extend_from_slice(&0u32.to_le_bytes()); // max
        b.extend_from_slice(&0u32.to_le_bytes()); // failed: none
        b.extend_from_slice(&2u32.to_le_bytes()); // signals: 2
        b.extend_from_slice(&[0; 12]);
        assert_eq!(AgreeMsg::decode(&b), Err(DecodeError::Truncated { kind: KIND_COMMIT }));
    }
}
