//! Engine notices: small control messages between engines, carried after a
//! [`Header::Note`](crate::wire::Header::Note) record. They carry no user data and are
//! bytes another process wrote: decoding validates everything and never panics
//! (`docs/UNTRUSTED.md`).
//!
//! | tag | notice  | bytes after the tag |
//! |-----|---------|---------------------|
//! | 1   | Bye     | none                |
//! | 2   | ByeAck  | none                |
//! | 3   | Revoke  | ctx u32             |
//! | 4   | Corrupt | ctx u32             |
//! | 5   | Discard | sreq u64            |
//! | 6   | Signal  | ctx u32, id u64, code i32 |
//! | 7   | Mark    | ctx u32, epoch u32  |
//! | 8   | CancelSend | seq u32          |
//! | 9   | CancelAck  | seq u32, cancelled u8 (0 or 1) |
//!
//! **Cancelling a send** (MPI_Cancel, MPI-4.1 3.8.4). The sender of message `seq` (the
//! sequence number it took to that peer) sends `CancelSend { seq }` behind it on the same
//! channel; the receiver withdraws the message if it is in its unexpected queue (not
//! matched: an eager message's data or a rendezvous' RTS) and answers `CancelAck` with
//! `cancelled` true, else false: the message was matched (or is still on its way, held
//! out of order) and is or will be received. Only the receiver decides, so a message is
//! never both cancelled and received.
//!
//! **Departure handshake** (R6, T-FD). A rank that finalizes sends `Bye` to every
//! live peer after its queued sends, on the same ordered channel; a peer that reads it
//! has every message the rank sent before it, answers `ByeAck` and records the rank as
//! departed (its pending operations with it complete with `RankFailStop`, but it is no
//! failure). The finalizing rank exits once every live peer answered. Without it a peer
//! could learn of the exit from its transport first (a reset connection) and take a
//! clean exit for a failure.

/// Largest encoded notice, in bytes.
pub const MAX_NOTE_BYTES: usize = 24;

const TAG_BYE: u8 = 1;
const TAG_BYE_ACK: u8 = 2;
const TAG_REVOKE: u8 = 3;
const TAG_CORRUPT: u8 = 4;
const TAG_DISCARD: u8 = 5;
const TAG_SIGNAL: u8 = 6;
const TAG_MARK: u8 = 7;
const TAG_CANCEL_SEND: u8 = 8;
const TAG_CANCEL_ACK: u8 = 9;

/// An engine notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// The sender is finalizing: it has sent everything it will ever send.
    Bye,
    /// The answer to a `Bye`: the receiver recorded the departure.
    ByeAck,
    /// The communicator of (point-to-point) context `ctx` is revoked (R29). Spread over
    /// the communicator's overlay: every member forwards it to its ⌈log2 n⌉ fingers on
    /// first receipt, and to a new ring successor when its successor fails (R42).
    Revoke {
        /// The communicator's even context.
        ctx: u32,
    },
    /// The communicator of `ctx` is corrupted: a member panicked while using it (R28).
    /// Spread like `Revoke`.
    Corrupt {
        /// The communicator's even context.
        ctx: u32,
    },
    /// The receiver dropped the sender's rendezvous `sreq` unmatched (its communicator
    /// is revoked or corrupted there): the send completes in error. The sender never
    /// completes an exposed send otherwise, so a late pull never reads reused memory.
    Discard {
        /// The sender's request.
        sreq: u64,
    },
    /// An error signalled on the communicator of `ctx` (R27, `signal_error`), spread
    /// like `Revoke` (and handed on while it is known and unresolved). `id` names the
    /// signal: its origin's job rank (low 32 bits) and the origin's signal count on the
    /// communicator (high 32 bits).
    Signal {
        /// The communicator's even context.
        ctx: u32,
        /// The signal's identity.
        id: u64,
        /// The code signalled.
        code: i32,
    },
    /// The sender entered error resolution `epoch` on the communicator of `ctx`: every
    /// message it sent there before is behind this notice (the cut of R27).
    Mark {
        /// The communicator's even context.
        ctx: u32,
        /// The resolution's number (1 for the first).
        epoch: u32,
    },
    /// The sender asks to withdraw its message `seq` if the receiver has not matched it
    /// (MPI_Cancel of a send).
    CancelSend {
        /// The message's sequence number from the sender to the receiver.
        seq: u32,
    },
    /// The answer to a `CancelSend`: whether message `seq` was withdrawn unmatched.
    CancelAck {
        /// The message's sequence number.
        seq: u32,
        /// Withdrawn (it will never be received) or not (it is or will be received).
        cancelled: bool,
    },
}

/// Why bytes could not be decoded as a notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// No tag byte, or fewer bytes than the notice needs.
    #[error("truncated notice: {have} bytes, need {need}")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// Unknown tag.
    #[error("unknown notice tag {0}")]
    UnknownTag(u8),
    /// Bytes after a complete notice.
    #[error("{0} bytes after the notice")]
    Trailing(usize),
    /// A `CancelAck` whose flag byte is neither 0 nor 1.
    #[error("cancel answer with flag {0}")]
    Flag(u8),
}

impl Note {
    /// Encodes into `out`; returns the number of bytes written.
    pub fn encode(&self, out: &mut [u8; MAX_NOTE_BYTES]) -> usize {
        match *self {
            Note::Bye => {
                out[0] = TAG_BYE;
                1
            }
            Note::ByeAck => {
                out[0] = TAG_BYE_ACK;
                1
            }
            Note::Revoke { ctx } | Note::Corrupt { ctx } => {
                out[0] = if matches!(self, Note::Revoke { .. }) { TAG_REVOKE } else { TAG_CORRUPT };
                out[1..5].copy_from_slice(&ctx.to_le_bytes());
                5
            }
            Note::Discard { sreq } => {
                out[0] = TAG_DISCARD;
                out[1..9].copy_from_slice(&sreq.to_le_bytes());
                9
            }
            Note::Signal { ctx, id, code } => {
                out[0] = TAG_SIGNAL;
                out[1..5].copy_from_slice(&ctx.to_le_bytes());
                out[5..13].copy_from_slice(&id.to_le_bytes());
                out[13..17].copy_from_slice(&code.to_le_bytes());
                17
            }
            Note::Mark { ctx, epoch } => {
                out[0] = TAG_MARK;
                out[1..5].copy_from_slice(&ctx.to_le_bytes());
                out[5..9].copy_from_slice(&epoch.to_le_bytes());
                9
            }
            Note::CancelSend { seq } => {
                out[0] = TAG_CANCEL_SEND;
                out[1..5].copy_from_slice(&seq.to_le_bytes());
                5
            }
            Note::CancelAck { seq, cancelled } => {
                out[0] = TAG_CANCEL_ACK;
                out[1..5].copy_from_slice(&seq.to_le_bytes());
                out[5] = cancelled as u8;
                6
            }
        }
    }

    /// Decodes exactly one notice.
    ///
    /// # Errors
    /// A [`NoteError`] for any malformed input.
    pub fn decode(b: &[u8]) -> Result<Note, NoteError> {
        let Some(&tag) = b.first() else { return Err(NoteError::Truncated { have: 0, need: 1 }) };
        let need = match tag {
            TAG_BYE | TAG_BYE_ACK => 1,
            TAG_REVOKE | TAG_CORRUPT | TAG_CANCEL_SEND => 5,
            TAG_CANCEL_ACK => 6,
            TAG_DISCARD | TAG_MARK => 9,
            TAG_SIGNAL => 17,
            t => return Err(NoteError::UnknownTag(t)),
        };
        if b.len() < need {
            return Err(NoteError::Truncated { have: b.len(), need });
        }
        if b.len() > need {
            return Err(NoteError::Trailing(b.len() - need));
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(match tag {
            TAG_BYE => Note::Bye,
            TAG_BYE_ACK => Note::ByeAck,
            TAG_REVOKE => Note::Revoke { ctx: u32_at(1) },
            TAG_CORRUPT => Note::Corrupt { ctx: u32_at(1) },
            TAG_SIGNAL => Note::Signal {
                ctx: u32_at(1),
                id: u64::from(u32_at(5)) | (u64::from(u32_at(9)) << 32),
                code: u32_at(13) as i32,
            },
            TAG_MARK => Note::Mark { ctx: u32_at(1), epoch: u32_at(5) },
            TAG_CANCEL_SEND => Note::CancelSend { seq: u32_at(1) },
            TAG_CANCEL_ACK => match b[5] {
                0 | 1 => Note::CancelAck { seq: u32_at(1), cancelled: b[5] == 1 },
                f => return Err(NoteError::Flag(f)),
            },
            _ => Note::Discard { sreq: u64::from(u32_at(1)) | (u64::from(u32_at(5)) << 32) },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_round_trip_and_malformed_ones_are_typed_errors() {
        let mut b = [0u8; MAX_NOTE_BYTES];
        for n in [
            Note::Bye,
            Note::ByeAck,
            Note::Revoke { ctx: 0xdead_beef },
            Note::Corrupt { ctx: 2 },
            Note::Discard { sreq: u64::MAX - 5 },
            Note::Signal { ctx: 4, id: 3 | (7 << 32), code: -666 },
            Note::Signal { ctx: 4, id: u64::MAX, code: i32::MIN },
            Note::Mark { ctx: 4, epoch: 9 },
            Note::CancelSend { seq: u32::MAX },
            Note::CancelAck { seq: 7, cancelled: true },
            Note::CancelAck { seq: 0, cancelled: false },
        ] {
            let len = n.encode(&mut b);
            assert_eq!(Note::decode(&b[..len]), Ok(n));
            let mut long = b[..len].to_vec();
            long.push(0);
            assert_eq!(Note::decode(&long), Err(NoteError::Trailing(1)));
        }
        assert_eq!(Note::decode(&[]), Err(NoteError::Truncated { have: 0, need: 1 }));
        assert_eq!(Note::decode(&[0]), Err(NoteError::UnknownTag(0)));
        assert_eq!(Note::decode(&[200, 1]), Err(NoteError::UnknownTag(200)));
        assert_eq!(Note::decode(&[TAG_REVOKE, 1, 2]), Err(NoteError::Truncated { have: 3, need: 5 }));
        assert_eq!(Note::decode(&[TAG_DISCARD, 1]), Err(NoteError::Truncated { have: 2, need: 9 }));
        assert_eq!(Note::decode(&[TAG_CANCEL_ACK, 1, 0, 0, 0, 2]), Err(NoteError::Flag(2)));
    }

    #[test]
    fn every_byte_string_up_to_two_bytes_decodes_or_is_rejected_without_panic() {
        for a in 0..=255u8 {
            let _ = Note::decode(&[a]);
            for c in 0..=255u8 {
                let _ = Note::decode(&[a, c]);
            }
        }
    }
}
