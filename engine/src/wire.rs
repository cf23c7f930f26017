//! Wire headers: the first byte is the kind, the second the protocol
//! version; matched kinds carry `{ctx, src, tag, seq}`. All integers little-endian.
//!
//! | kind  | bytes | fields after the 4-byte common part                         |
//! |-------|-------|--------------------------------------------------------------|
//! | Eager | 24    | ctx u32, src u32, tag i32, seq u32, len u32; payload follows |
//! | Rts   | 48    | ctx, src, tag, seq, len u64, sreq u64, addr u64, key u32     |
//! | Cts   | 20    | sreq u64, rreq u64                                           |
//! | Fin   | 12    | sreq u64                                                     |
//! | Data  | 20    | rreq u64, offset u64; payload follows                        |
//! | Ft    | 4     | none; the fault-tolerance message (`runthrough_ft::Msg`) follows |
//! | Agree | 4     | none; the agreement message (`runthrough_ft::AgreeMsg`) follows |
//! | Note  | 4     | none; an engine notice (`crate::note::Note`: departure, …) follows |
//! | Rma   | 8     | seq u32; a one-sided message (`crate::rma`) follows           |
//!
//! Bytes 2 and 3 of the common part are zero, except an RTS's byte 2: the sender's
//! protocol verdict (0 none, 1 stream, 2 pull by CMA; see `Header::Rts::pull`).
//!
//! Decoding validates everything: a short buffer, an unknown kind or version, or a
//! length that disagrees with the payload is a [`WireError`], never a panic.

use crate::types::{ContextId, RemoteRegion, ReqId, Seq, Tag};

/// Protocol version carried in byte 1 of every header.
pub const WIRE_VERSION: u8 = 1;
/// Largest encoded header, in bytes.
pub const MAX_HEADER_BYTES: usize = 48;

const KIND_EAGER: u8 = 1;
const KIND_RTS: u8 = 2;
const KIND_CTS: u8 = 3;
const KIND_FIN: u8 = 4;
const KIND_DATA: u8 = 5;
const KIND_FT: u8 = 6;
const KIND_AGREE: u8 = 7;
const KIND_NOTE: u8 = 8;
const KIND_RMA: u8 = 9;

/// Whether an encoded header is protocol control (CTS, FIN, failure-detector traffic):
/// records that carry no user data, which a transport may let past a flow-control window
/// that user data has filled, so heartbeats and handshakes never starve behind a stream.
pub fn is_control(header: &[u8]) -> bool {
    matches!(header.first(), Some(&(KIND_CTS | KIND_FIN | KIND_FT | KIND_AGREE | KIND_NOTE)))
}

/// The envelope used for matching.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Communication context.
    pub ctx: ContextId,
    /// Sender's rank in the communicator.
    pub src: u32,
    /// Message tag.
    pub tag: Tag,
    /// Sequence number from the sender to this receiver.
    pub seq: Seq,
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// A small message; `len` payload bytes follow the header.
    Eager {
        /// Matching envelope.
        env: Envelope,
        /// Payload length.
        len: u32,
    },
    /// Ready-to-send: a large message waits at the sender to be pulled.
    Rts {
        /// Matching envelope.
        env: Envelope,
        /// Message length.
        len: u64,
        /// The sender's request.
        sreq: ReqId,
        /// Where the receiver pulls from.
        region: RemoteRegion,
        /// The sender's verdict on pulling by CMA against streaming, once it measured
        /// both (`Config::cma_choose`; byte 2: 0 none, 1 stream, 2 pull): the lower
        /// rank of a pair decides for both directions, as the two choosing apart was
        /// slower than either protocol (bench/history/NOTEBOOK.md §0.12).
        pull: Option<bool>,
    },
    /// Clear-to-send: the receiver asks the sender to stream the data (no RMA/CMA).
    Cts {
        /// The sender's request.
        sreq: ReqId,
        /// The receiver's request the data is for.
        rreq: ReqId,
    },
    /// Finish: the receiver has pulled the data; the send completes.
    Fin {
        /// The sender's request.
        sreq: ReqId,
    },
    /// A fault-tolerance message (heartbeat, failure notice); its bytes follow.
    Ft,
    /// An agreement message (validate, agree); its bytes follow.
    Agree,
    /// An engine notice ([`crate::note::Note`]); its bytes follow.
    Note,
    /// A one-sided message ([`crate::rma`]); its bytes follow. It takes the sender's
    /// next sequence number to this receiver, as a message does, so the receiver
    /// applies a peer's one-sided operations in issue order on every transport.
    Rma {
        /// Sequence number from the sender to this receiver.
        seq: Seq,
    },
    /// A fragment of a streamed message; payload follows.
    Data {
        /// The receiver's request.
        rreq: ReqId,
        /// Offset of this fragment in the message.
        offset: u64,
    },
}

/// Why bytes could not be decoded as a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// Fewer bytes than the header kind needs.
    #[error("truncated header: {have} bytes, need {need}")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// An RTS whose protocol verdict byte is none of 0, 1, 2.
    #[error("RTS with unknown protocol verdict {0}")]
    RtsHint(u8),
    /// Unknown kind byte.
    #[error("unknown header kind {0}")]
    UnknownKind(u8),
    /// Unsupported protocol version.
    #[error("unsupported wire version {0}")]
    Version(u8),
    /// The length field disagrees with the bytes that follow.
    #[error("payload length {declared} but {actual} bytes follow")]
    Length {
        /// Length the header declares.
        declared: u64,
        /// Bytes actually present.
        actual: usize,
    },
}

impl Header {
    /// Whether bytes follow this header (user data, or an opaque message for the
    /// fault-tolerance, agreement or notice decoders); the other kinds stand alone.
    pub fn has_payload(&self) -> bool {
        matches!(
            self,
            Header::Eager { .. } | Header::Data { .. } | Header::Ft | Header::Agree | Header::Note | Header::Rma { .. }
        )
    }

    /// Encoded size of this header.
    pub fn encoded_len(&self) -> usize {
        match self {
            Header::Eager { .. } => 24,
            Header::Rts { .. } => 48,
            Header::Cts { .. } => 20,
            Header::Fin { .. } => 12,
            Header::Data { .. } => 20,
            Header::Ft | Header::Agree | Header::Note => 4,
            Header::Rma { .. } => 8,
        }
    }

    /// Encodes into `out` and returns the number of bytes written.
    pub fn encode(&self, out: &mut [u8; MAX_HEADER_BYTES]) -> usize {
        let n = self.encoded_len();
        out[1] = WIRE_VERSION;
        out[2] = 0;
        out[3] = 0;
        match *self {
            Header::Eager { env, len } => {
                out[0] = KIND_EAGER;
                put_env(out, &env);
                put32(out, 20, len);
            }
            Header::Rts { env, len, sreq, region, pull } => {
                out[0] = KIND_RTS;
                out[2] = match pull {
                    None => 0,
                    Some(false) => 1,
                    Some(true) => 2,
                };
                put_env(out, &env);
                put64(out, 20, len);
                put64(out, 28, sreq.to_wire());
                put64(out, 36, region.addr);
                put32(out, 44, region.key as u32);
            }
            Header::Cts { sreq, rreq } => {
                out[0] = KIND_CTS;
                put64(out, 4, sreq.to_wire());
                put64(out, 12, rreq.to_wire());
            }
            Header::Fin { sreq } => {
                out[0] = KIND_FIN;
                put64(out, 4, sreq.to_wire());
            }
            Header::Ft => out[0] = KIND_FT,
            Header::Agree => out[0] = KIND_AGREE,
            Header::Note => out[0] = KIND_NOTE,
            Header::Rma { seq } => {
                out[0] = KIND_RMA;
                put32(out, 4, seq.0);
            }
            Header::Data { rreq, offset } => {
                out[0] = KIND_DATA;
                put64(out, 4, rreq.to_wire());
                put64(out, 12, offset);
            }
        }
        n
    }

    /// Decodes a record into its header and the payload that follows it.
    pub fn decode(b: &[u8]) -> Result<(Header, &[u8]), WireError> {
        if b.len() < 4 {
            return Err(WireError::Truncated { have: b.len(), need: 4 });
        }
        if b[1] != WIRE_VERSION {
            return Err(WireError::Version(b[1]));
        }
        let need = match b[0] {
            KIND_EAGER => 24,
            KIND_RTS => 48,
            KIND_CTS => 20,
            KIND_FIN => 12,
            KIND_DATA => 20,
            KIND_FT | KIND_AGREE | KIND_NOTE => 4,
            KIND_RMA => 8,
            k => return Err(WireError::UnknownKind(k)),
        };
        if b.len() < need {
            return Err(WireError::Truncated { have: b.len(), need });
        }
        let rest = &b[need..];
        let h = match b[0] {
            KIND_EAGER => {
                let len = get32(b, 20);
                if len as usize != rest.len() {
                    return Err(WireError::Length { declared: len.into(), actual: rest.len() });
                }
                Header::Eager { env: get_env(b), len }
            }
            KIND_RTS => {
                let len = get64(b, 20);
                let pull = match b[2] {
                    0 => None,
                    1 => Some(false),
                    2 => Some(true),
                    v => return Err(WireError::RtsHint(v)),
                };
                Header::Rts {
                    pull,
                    env: get_env(b),
                    len,
                    sreq: ReqId::from_wire(get64(b, 28)),
                    region: RemoteRegion { addr: get64(b, 36), len, key: get32(b, 44).into() },
                }
            }
            KIND_CTS => Header::Cts { sreq: ReqId::from_wire(get64(b, 4)), rreq: ReqId::from_wire(get64(b, 12)) },
            KIND_FIN => Header::Fin { sreq: ReqId::from_wire(get64(b, 4)) },
            KIND_FT => Header::Ft,
            KIND_AGREE => Header::Agree,
            KIND_NOTE => Header::Note,
            KIND_RMA => Header::Rma { seq: Seq(get32(b, 4)) },
            _ => Header::Data { rreq: ReqId::from_wire(get64(b, 4)), offset: get64(b, 12) },
        };
        if !h.has_payload() && !rest.is_empty() {
            return Err(WireError::Length { declared: 0, actual: rest.len() });
        }
        Ok((h, rest))
    }
}

/// The receive path's shortcut for the common record, a well-formed eager message: its
/// envelope and payload, or `None` for anything else (which [`Header::decode`] then
/// decodes, or rejects with the reason).
#[inline]
pub fn decode_eager(b: &[u8]) -> Option<(Envelope, &[u8])> {
    if b.len() < 24 || b[0] != KIND_EAGER || b[1] != WIRE_VERSION {
        return None;
    }
    let rest = &b[24..];
    (get32(b, 20) as usize == rest.len()).then(|| (get_env(b), rest))
}

fn put_env(out: &mut [u8], env: &Envelope) {
    put32(out, 4, env.ctx.0);
    put32(out, 8, env.src);
    put32(out, 12, env.tag.0 as u32);
    put32(out, 16, env.seq.0);
}

fn get_env(b: &[u8]) -> Envelope {
    Envelope { ctx: ContextId(get32(b, 4)), src: get32(b, 8), tag: Tag(get32(b, 12) as i32), seq: Seq(get32(b, 16)) }
}

#[inline]
fn put32(out: &mut [u8], at: usize, v: u32) {
    out[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn put64(out: &mut [u8], at: usize, v: u64) {
    out[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn get32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

#[inline]
fn get64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_headers_are_classified() {
        let mut b = [0u8; MAX_HEADER_BYTES];
        let n = Header::Ft.encode(&mut b);
        assert!(is_control(&b[..n]));
        let n = Header::Fin { sreq: ReqId::from_wire(1) }.encode(&mut b);
        assert!(is_control(&b[..n]));
        let n = Header::Data { rreq: ReqId::from_wire(1), offset: 0 }.encode(&mut b);
        assert!(!is_control(&b[..n]));
        assert!(!is_control(&[]));
    }
    use proptest::prelude::*;

    fn env(ctx: u32, src: u32, tag: i32, seq: u32) -> Envelope {
        Envelope { ctx: ContextId(ctx), src, tag: Tag(tag), seq: Seq(seq) }
    }

    fn round_trip(h: Header, payload: &[u8]) {
        let mut buf = [0u8; MAX_HEADER_BYTES];
        let n = h.encode(&mut buf);
        assert_eq!(n, h.encoded_len());
        let mut rec = buf[..n].to_vec();
        rec.extend_from_slice(payload);
        let (d, rest) = Header::decode(&rec).expect("decodes");
        assert_eq!(d, h);
        assert_eq!(rest, payload);
    }

    #[test]
    fn every_header_round_trips() {
        let id = ReqId { index: 5, gen: 9 };
        round_trip(Header::Eager { env: env(2, 3, 77, 9), len: 3 }, b"abc");
        round_trip(Header::Eager { env: env(0, 0, 0, 0), len: 0 }, b"");
        round_trip(
            Header::Rts {
                env: env(u32::MAX, 7, (1 << 30) - 1, u32::MAX),
                len: 1 << 40,
                sreq: id,
                region: RemoteRegion { addr: 0x7fff_0000_1234, len: 1 << 40, key: 42 },
                pull: Some(true),
            },
            b"",
        );
        round_trip(Header::Cts { sreq: id, rreq: ReqId { index: 1, gen: 2 } }, b"");
        round_trip(Header::Fin { sreq: id }, b"");
        round_trip(Header::Data { rreq: id, offset: 1 << 33 }, b"xyz");
        round_trip(Header::Ft, &[2, 1, 0, 0, 0, 3, 0]);
        round_trip(Header::Agree, &[0x13, 9, 9]);
        round_trip(Header::Note, &[1]);
        round_trip(Header::Rma { seq: Seq(u32::MAX) }, &[1, 2]);
    }

    #[test]
    fn rejects_malformed() {
        assert!(matches!(Header::decode(&[]), Err(WireError::Truncated { .. })));
        assert_eq!(Header::decode(&[10, 1, 0, 0]), Err(WireError::UnknownKind(10)));
        assert!(matches!(Header::decode(&[9, 1, 0, 0]), Err(WireError::Truncated { have: 4, need: 8 })));
        assert_eq!(Header::decode(&[1, 2, 0, 0]), Err(WireError::Version(2)));
        let mut buf = [0u8; MAX_HEADER_BYTES];
        let n = Header::Eager { env: env(1, 1, 1, 1), len: 5 }.encode(&mut buf);
        assert!(matches!(Header::decode(&buf[..n]), Err(WireError::Length { .. })));
        assert!(matches!(Header::decode(&buf[..n - 1]), Err(WireError::Truncated { .. })));
        let n = Header::Fin { sreq: ReqId { index: 0, gen: 0 } }.encode(&mut buf);
        let mut rec = buf[..n].to_vec();
        rec.push(0);
        assert!(matches!(Header::decode(&rec), Err(WireError::Length { .. })));
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let _ = Header::decode(&bytes);
        }

        #[test]
        fn truncations_of_valid_headers_are_rejected(
            ctx in any::<u32>(), src in any::<u32>(), tag in any::<i32>(), seq in any::<u32>(),
            len in any::<u64>(), cut in 0usize..48,
        ) {
            let e = env(ctx, src, tag, seq);
            let sreq = ReqId::from_wire(len.rotate_left(7));
            let h = Header::Rts { env: e, len, sreq, region: RemoteRegion { addr: len ^ 1, len, key: 3 }, pull: [None, Some(false), Some(true)][(len % 3) as usize] };
            let mut buf = [0u8; MAX_HEADER_BYTES];
            let n = h.encode(&mut buf);
            let cut = cut.min(n - 1);
            let truncated = Header::decode(&buf[..cut]);
            prop_assert!(truncated.is_err());
            prop_assert_eq!(Header::decode(&buf[..n]).map(|(h, _)| h), Ok(h));
        }
    }
}
