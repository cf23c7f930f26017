//! Messages the detector exchanges, and their byte encoding.
//!
//! Parts: [`Msg`] (heartbeat, failure notice), [`Msg::encode`] / [`Msg::decode`], and
//! [`DecodeError`]. The engine carries the encoded bytes as the payload of its own FT
//! wire header, on whichever transport reaches the peer.
//!
//! Encoding (little endian, fixed length per kind, no trailing bytes):
//!
//! | kind byte | message     | body                                  | total |
//! |-----------|-------------|---------------------------------------|-------|
//! | `0x01`    | `Heartbeat` | none                                  | 1     |
//! | `0x02`    | `Notice`    | `failed: u32`, `hops: u16`            | 7     |
//!
//! Decoding validates the kind and the exact length and never panics. It does not know
//! the job size: the detector ignores ranks outside the job.

use std::fmt;

const KIND_HEARTBEAT: u8 = 0x01;
const KIND_NOTICE: u8 = 0x02;
const NOTICE_LEN: usize = 1 + 4 + 2;

/// A detector message between two ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Msg {
    /// "I am alive", sent every period η to the ring successor.
    Heartbeat,
    /// "Rank `failed` has failed", reliably broadcast (forwarded on first sight).
    Notice {
        /// The rank declared failed.
        failed: u32,
        /// Overlay hops this copy has travelled: 1 when sent by the rank that declared the
        /// failure, +1 per forward. Used for measurement only.
        hops: u16,
    },
}

impl Msg {
    /// Length of the longest encoding, for sizing buffers.
    pub const MAX_ENCODED_LEN: usize = NOTICE_LEN;

    /// Length of this message's encoding.
    pub fn encoded_len(&self) -> usize {
        match self {
            Msg::Heartbeat => 1,
            Msg::Notice { .. } => NOTICE_LEN,
        }
    }

    /// Appends the encoding of `self` to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Msg::Heartbeat => out.push(KIND_HEARTBEAT),
            Msg::Notice { failed, hops } => {
                out.push(KIND_NOTICE);
                out.extend_from_slice(&failed.to_le_bytes());
                out.extend_from_slice(&hops.to_le_bytes());
            }
        }
    }

    /// Decodes one message occupying all of `bytes`.
    ///
    /// # Errors
    /// [`DecodeError`] if `bytes` is empty, has an unknown kind byte, or is not exactly
    /// the length of its kind.
    pub fn decode(bytes: &[u8]) -> Result<Msg, DecodeError> {
        let (&kind, body) = bytes.split_first().ok_or(DecodeError::Empty)?;
        let expect = |len: usize| {
            if bytes.len() == len {
                Ok(())
            } else {
                Err(DecodeError::Length { kind, expected: len, got: bytes.len() })
            }
        };
        match kind {
            KIND_HEARTBEAT => {
                expect(1)?;
                Ok(Msg::Heartbeat)
            }
            KIND_NOTICE => {
                expect(NOTICE_LEN)?;
                let failed = u32::from_le_bytes([body[0], body[1], body[2], body[3]]);
                let hops = u16::from_le_bytes([body[4], body[5]]);
                Ok(Msg::Notice { failed, hops })
            }
            other => Err(DecodeError::UnknownKind(other)),
        }
    }
}

/// Why bytes did not decode into a [`Msg`] or a [`crate::AgreeMsg`]. The remote sent
/// garbage: drop it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecodeError {
    /// No bytes at all.
    Empty,
    /// The kind byte names no message.
    UnknownKind(u8),
    /// The length does not match the kind.
    Length {
        /// The kind byte.
        kind: u8,
        /// The length that kind has.
        expected: usize,
        /// The length received.
        got: usize,
    },
    /// A variable-length message ends before its declared contents
    /// ([`crate::AgreeMsg`]).
    Truncated {
        /// The kind byte.
        kind: u8,
    },
    /// Bytes follow the end of a variable-length message ([`crate::AgreeMsg`]).
    Trailing {
        /// The kind byte.
        kind: u8,
        /// How many bytes follow.
        extra: usize,
    },
    /// A field holds a value its kind forbids (e.g. an unsorted rank list).
    Invalid {
        /// The kind byte.
        kind: u8,
        /// Which field, for logs.
        field: &'static str,
    },
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Empty => write!(f, "empty ft message"),
            DecodeError::UnknownKind(k) => write!(f, "unknown ft message kind {k:#04x}"),
            DecodeError::Length { kind, expected, got } => {
                write!(f, "ft message kind {kind:#04x} has length {got}, expected {expected}")
            }
            DecodeError::Truncated { kind } => write!(f, "ft message kind {kind:#04x} is truncated"),
            DecodeError::Trailing { kind, extra } => {
                write!(f, "ft message kind {kind:#04x} has {extra} trailing bytes")
            }
            DecodeError::Invalid { kind, field } => {
                write!(f, "ft message kind {kind:#04x} has an invalid {field}")
            }
        }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_rejects() {
        for m in [Msg::Heartbeat, Msg::Notice { failed: 0xdead_beef, hops: 17 }] {
            let mut b = Vec::new();
            m.encode(&mut b);
            assert_eq!(b.len(), m.encoded_len());
            assert!(b.len() <= Msg::MAX_ENCODED_LEN);
            assert_eq!(Msg::decode(&b), Ok(m));
            b.push(0);
            assert!(matches!(Msg::decode(&b), Err(DecodeError::Length { .. })));
        }
        assert_eq!(Msg::decode(&[]), Err(DecodeError::Empty));
        assert_eq!(Msg::decode(&[0x7f]), Err(DecodeError::UnknownKind(0x7f)));
        assert_eq!(
            Msg::decode(&[KIND_NOTICE, 1, 2]),
            Err(DecodeError::Length { kind: KIND_NOTICE, expected: 7, got: 3 })
        );
    }
}
