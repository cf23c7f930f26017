//! Engine notices: small control messages between engines, carried after a
//! [`Header::Note`](crate::wire::Header::Note) record. They carry no user data and are
//! bytes another process wrote: decoding validates everything and never panics
//! (`docs/UNTRUSTED.md`).
//!
//! | tag | notice  | bytes after the tag |
//! |-----|---------|---------------------|
//! | 1   | Bye     | none                |
//! | 2   | ByeAck  | none                |
//!
//! **Departure handshake** (R6, DESIGN §3). A rank that finalizes sends `Bye` to every
//! live peer after its queued sends, on the same ordered channel; a peer that reads it
//! has every message the rank sent before it, answers `ByeAck` and records the rank as
//! departed (its pending operations with it complete with `RankFailStop`, but it is no
//! failure). The finalizing rank exits once every live peer answered. Without it a peer
//! could learn of the exit from its transport first (a reset connection) and take a
//! clean exit for a failure.

/// Largest encoded notice, in bytes.
pub const MAX_NOTE_BYTES: usize = 16;

const TAG_BYE: u8 = 1;
const TAG_BYE_ACK: u8 = 2;

/// An engine notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// The sender is finalizing: it has sent everything it will ever send.
    Bye,
    /// The answer to a `Bye`: the receiver recorded the departure.
    ByeAck,
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
}

impl Note {
    /// Encodes into `out`; returns the number of bytes written.
    pub fn encode(&self, out: &mut [u8; MAX_NOTE_BYTES]) -> usize {
        out[0] = match self {
            Note::Bye => TAG_BYE,
            Note::ByeAck => TAG_BYE_ACK,
        };
        1
    }

    /// Decodes exactly one notice.
    ///
    /// # Errors
    /// A [`NoteError`] for any malformed input.
    pub fn decode(b: &[u8]) -> Result<Note, NoteError> {
        let Some(&tag) = b.first() else { return Err(NoteError::Truncated { have: 0, need: 1 }) };
        let (note, need) = match tag {
            TAG_BYE => (Note::Bye, 1),
            TAG_BYE_ACK => (Note::ByeAck, 1),
            t => return Err(NoteError::UnknownTag(t)),
        };
        if b.len() > need {
            return Err(NoteError::Trailing(b.len() - need));
        }
        Ok(note)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_round_trip_and_malformed_ones_are_typed_errors() {
        let mut b = [0u8; MAX_NOTE_BYTES];
        for n in [Note::Bye, Note::ByeAck] {
            let len = n.encode(&mut b);
            assert_eq!(Note::decode(&b[..len]), Ok(n));
            let mut long = b[..len].to_vec();
            long.push(0);
            assert_eq!(Note::decode(&long), Err(NoteError::Trailing(1)));
        }
        assert_eq!(Note::decode(&[]), Err(NoteError::Truncated { have: 0, need: 1 }));
        assert_eq!(Note::decode(&[0]), Err(NoteError::UnknownTag(0)));
        assert_eq!(Note::decode(&[200, 1]), Err(NoteError::UnknownTag(200)));
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
