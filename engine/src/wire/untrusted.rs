//! Wire headers are bytes another process wrote (`docs/UNTRUSTED.md`):
//! property tests and the `make fuzz` pass of [`Header::decode`]. Decoding never panics,
//! never allocates (it is on the hot path), and rejects with a typed [`WireError`].

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use super::*;

// The engine's unit-test binary meters allocations (one global allocator per binary).
#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

/// A random header of any kind with a payload consistent with it.
fn random_record(rng: &mut Rng, out: &mut Vec<u8>) {
    let env = Envelope {
        ctx: ContextId(rng.next_u64() as u32),
        src: rng.next_u64() as u32,
        tag: Tag(rng.next_u64() as i32),
        seq: Seq(rng.next_u64() as u32),
    };
    let id = |rng: &mut Rng| ReqId::from_wire(rng.next_u64());
    let payload = rng.below(40);
    let h = match rng.below(8) {
        0 => Header::Eager { env, len: payload as u32 },
        1 => {
            let len = rng.extreme();
            let region = RemoteRegion { addr: rng.next_u64(), len, key: u64::from(rng.next_u64() as u32) };
            let pull = [None, Some(false), Some(true)][rng.below(3)];
            Header::Rts { env, len, sreq: id(rng), region, pull }
        }
        2 => Header::Cts { sreq: id(rng), rreq: id(rng) },
        3 => Header::Fin { sreq: id(rng) },
        4 => Header::Data { rreq: id(rng), offset: rng.extreme() },
        5 => Header::Ft,
        6 => Header::Note,
        _ => Header::Agree,
    };
    let mut b = [0u8; MAX_HEADER_BYTES];
    let n = h.encode(&mut b);
    out.extend_from_slice(&b[..n]);
    if h.has_payload() {
        rng.fill(out, payload);
    }
}

/// Checks one decode: a decoded header re-encodes to the input's header bytes (bytes 2
/// and 3 are reserved and ignored, but for an RTS's byte 2, its protocol verdict) and hands back exactly the rest; an Eager length
/// matches the payload. Returns whether the input was accepted.
fn check(b: &[u8]) -> bool {
    match runthrough_fuzz::metered(0, || Header::decode(b)) {
        Ok((h, rest)) => {
            let mut e = [0u8; MAX_HEADER_BYTES];
            let n = h.encode(&mut e);
            assert!(n <= b.len(), "decoded {h:?} from {} bytes", b.len());
            assert_eq!((&e[..2], &e[4..n]), (&b[..2], &b[4..n]), "{h:?} does not re-encode to its bytes");
            assert_eq!(rest, &b[n..]);
            if let Header::Eager { len, .. } = h {
                assert_eq!(len as usize, rest.len());
            }
            if !h.has_payload() {
                assert!(rest.is_empty(), "{h:?} with a payload");
            }
            true
        }
        Err(WireError::Truncated { have, need }) => {
            assert!(have < need && have == b.len());
            false
        }
        Err(WireError::Length { actual, .. }) => {
            assert!(actual < b.len());
            false
        }
        Err(WireError::UnknownKind(k)) => {
            assert_eq!(b[0], k);
            false
        }
        Err(WireError::Version(v)) => {
            assert_eq!((b[1], v == WIRE_VERSION), (v, false));
            false
        }
        Err(WireError::RtsHint(v)) => {
            assert_eq!((b[0], b[2], v > 2), (2, v, true));
            false
        }
    }
}

/// The `make fuzz` pass of the one-sided messages (`crate::rma`, after an `Rma` header):
/// decoding never panics or allocates, an accepted message re-encodes to its bytes, a
/// valid one is accepted.
#[test]
fn fuzz_rma_message() {
    use crate::rma::{AccOp, Elem, RmaMsg, MAX_RMA_HEADER};
    let ops = [AccOp::Sum, AccOp::Replace, AccOp::NoOp, AccOp::LogicalXor];
    let elems = [Elem::U8, Elem::I32, Elem::F64, Elem::U64];
    let valid = |rng: &mut Rng, out: &mut Vec<u8>| {
        let (win, token, disp) = (rng.next_u64() as u32, rng.next_u64(), rng.extreme());
        let data = [7u8; 24];
        let data = &data[..rng.below(24)];
        let (op, elem) = (ops[rng.below(ops.len())], elems[rng.below(elems.len())]);
        let m = match rng.below(12) {
            0 => RmaMsg::Put { win, disp, data },
            1 => RmaMsg::Get { win, token, disp, len: rng.extreme() },
            2 => RmaMsg::Reply { token, offset: rng.extreme(), data },
            3 => RmaMsg::Acc { win, disp, op, elem, data },
            4 => RmaMsg::GetAcc { win, token, disp, roff: rng.extreme(), op, elem, data },
            5 => RmaMsg::Cas { win, token, disp, elem, data },
            6 => RmaMsg::Flush { win, token },
            7 => RmaMsg::Done { token, refused: rng.below(2) == 1 },
            8 => RmaMsg::Lock { win, token, exclusive: rng.below(2) == 1 },
            9 => RmaMsg::Unlock { win, token },
            10 => RmaMsg::Post { win },
            _ => RmaMsg::Complete { win },
        };
        let mut h = [0u8; MAX_RMA_HEADER];
        let n = m.encode_header(&mut h);
        out.extend_from_slice(&h[..n]);
        out.extend_from_slice(m.data());
    };
    runthrough_fuzz::run("one-sided message (engine/src/rma.rs RmaMsg::decode)", valid, |b, shape| {
        let r = runthrough_fuzz::metered(0, || RmaMsg::decode(b));
        if let Ok(m) = r {
            let mut h = [0u8; MAX_RMA_HEADER];
            let n = m.encode_header(&mut h);
            assert_eq!((&h[..n], m.data()), b.split_at(n), "{m:?} does not re-encode to its bytes");
        } else if shape == Shape::Valid {
            panic!("a valid one-sided message is rejected: {b:?}");
        }
        r.is_ok()
    });
}

/// The `make fuzz` pass of the engine notices ([`crate::note::Note::decode`], the
/// payload of a `Note` record): typed errors, never a panic or an allocation.
#[test]
fn fuzz_engine_note() {
    use crate::note::{Note, MAX_NOTE_BYTES};
    let valid = |rng: &mut Rng, out: &mut Vec<u8>| {
        let n = match rng.below(7) {
            0 => Note::Bye,
            1 => Note::ByeAck,
            2 => Note::Revoke { ctx: rng.next_u64() as u32 },
            3 => Note::Corrupt { ctx: rng.next_u64() as u32 },
            4 => Note::Signal { ctx: rng.next_u64() as u32, id: rng.next_u64(), code: rng.next_u64() as i32 },
            5 => Note::Mark { ctx: rng.next_u64() as u32, epoch: rng.next_u64() as u32 },
            _ => Note::Discard { sreq: rng.next_u64() },
        };
        let mut b = [0u8; MAX_NOTE_BYTES];
        let len = n.encode(&mut b);
        out.extend_from_slice(&b[..len]);
    };
    runthrough_fuzz::run("engine notice (engine/src/note.rs Note::decode)", valid, |b, shape| {
        let r = runthrough_fuzz::metered(0, || Note::decode(b));
        if let Ok(n) = r {
            let mut e = [0u8; MAX_NOTE_BYTES];
            let len = n.encode(&mut e);
            assert_eq!(&e[..len], b, "{n:?} does not re-encode to its bytes");
        } else if shape == Shape::Valid {
            panic!("a valid notice is rejected: {b:?}");
        }
        r.is_ok()
    });
}

/// The `make fuzz` pass (and, with fewer cases, part of `make test`).
#[test]
fn fuzz_engine_wire_header() {
    runthrough_fuzz::run("engine wire header (engine/src/wire.rs Header::decode)", random_record, |b, shape| {
        let ok = check(b);
        if shape == Shape::Valid {
            assert!(ok, "a valid record is rejected");
        }
        ok
    });
}

#[test]
fn every_truncation_of_every_kind_is_a_typed_error_or_a_shorter_payload() {
    let mut rng = Rng::new(16);
    let mut rec = Vec::new();
    for _ in 0..500 {
        rec.clear();
        random_record(&mut rng, &mut rec);
        let kind_len = Header::decode(&rec).expect("valid").0.encoded_len();
        runthrough_fuzz::every_truncation(&rec, |cut| {
            let accepted = check(cut);
            // Inside the header: always an error. Inside the payload: only the kinds
            // whose payload is opaque accept it (an Eager length no longer matches).
            if cut.len() < kind_len || rec[0] == KIND_EAGER {
                assert!(!accepted, "truncation to {} of {rec:?} accepted", cut.len());
            }
        });
    }
}

#[test]
fn header_decode_allocates_nothing() {
    let mut rng = Rng::new(7);
    let mut rec = Vec::new();
    for _ in 0..200 {
        rec.clear();
        random_record(&mut rng, &mut rec);
        let (_, bytes) = runthrough_fuzz::measure(|| check(&rec) && Header::decode(&rec).is_ok());
        // `check` encodes into a stack array and compares slices: nothing either.
        assert_eq!(bytes, 0);
    }
}

proptest! {
    #[test]
    fn prop_arbitrary_bytes_are_typed_errors_or_consistent_headers(
        b in proptest::collection::vec(any::<u8>(), 0..96),
    ) {
        check(&b);
    }

    #[test]
    fn prop_flipped_valid_records_never_panic(seed in any::<u64>(), at in any::<usize>(), x in 1u8..) {
        let mut rec = Vec::new();
        random_record(&mut Rng::new(seed), &mut rec);
        let i = at % rec.len();
        rec[i] ^= x;
        check(&rec);
    }

    #[test]
    fn prop_truncated_valid_records_never_panic(seed in any::<u64>(), cut in any::<usize>()) {
        let mut rec = Vec::new();
        random_record(&mut Rng::new(seed), &mut rec);
        let cut = cut % rec.len();
        check(&rec[..cut]);
    }
}
