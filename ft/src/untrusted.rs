//! Detector and agreement messages are bytes another process wrote
//! (`docs/UNTRUSTED.md`): property tests and the `make fuzz` pass of [`Msg::decode`] and
//! [`AgreeMsg::decode`]. Neither panics; `Msg::decode` allocates nothing and
//! `AgreeMsg::decode` never more than the message's own length (a count is checked
//! against the bytes present before the list is allocated); every rejection is a typed
//! [`DecodeError`]; whatever decodes re-encodes to the same bytes (canonical encodings).

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use crate::{AgreeMsg, DecodeError, Msg, Prior, SignalId, Value};

#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

fn random_msg(rng: &mut Rng, out: &mut Vec<u8>) {
    let m = if rng.one_in(3) {
        Msg::Heartbeat
    } else {
        Msg::Notice { failed: rng.extreme() as u32, hops: rng.next_u64() as u16 }
    };
    m.encode(out);
}

fn list(rng: &mut Rng) -> Vec<u32> {
    let mut v: Vec<u32> = (0..rng.below(6)).map(|_| rng.below(64) as u32).collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn signals(rng: &mut Rng) -> Vec<(SignalId, i32)> {
    let mut v: Vec<(SignalId, i32)> = (0..rng.below(6))
        .map(|_| {
            let id = if rng.one_in(4) { rng.extreme() } else { rng.below(64) as u64 };
            let code = if rng.one_in(4) { rng.extreme() as i32 } else { rng.below(7) as i32 - 3 };
            (id, code)
        })
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn value(rng: &mut Rng) -> Value {
    Value { flag: rng.next_u64() as u32, max: rng.extreme() as u32, failed: list(rng), signals: signals(rng) }
}

fn random_agree(rng: &mut Rng, out: &mut Vec<u8>) {
    let instance = rng.extreme();
    let ballot = rng.below(64) as u32;
    let m = match rng.below(4) {
        0 => {
            let prior = match rng.below(3) {
                0 => Prior::Nothing,
                1 => Prior::Accepted { ballot: rng.below(64) as u32, value: value(rng) },
                _ => Prior::Decided(value(rng)),
            };
            AgreeMsg::Report {
                instance,
                ballot,
                flag: rng.next_u64() as u32,
                max: rng.extreme() as u32,
                failed: list(rng),
                signals: signals(rng),
                prior,
            }
        }
        1 => AgreeMsg::Propose { instance, ballot, value: value(rng) },
        2 => AgreeMsg::Accept { instance, ballot },
        _ => AgreeMsg::Commit { instance, value: value(rng) },
    };
    m.encode(out);
}

fn check_msg(b: &[u8]) -> bool {
    match runthrough_fuzz::metered(0, || Msg::decode(b)) {
        Ok(m) => {
            let mut e = Vec::new();
            m.encode(&mut e);
            assert_eq!(e, b, "{m:?} is not canonical");
            true
        }
        Err(DecodeError::Empty) => {
            assert!(b.is_empty());
            false
        }
        Err(DecodeError::Length { got, .. }) => {
            assert_eq!(got, b.len());
            false
        }
        Err(DecodeError::UnknownKind(k)) => {
            assert_eq!(k, b[0]);
            false
        }
        Err(e) => panic!("Msg::decode gave {e:?}, which it does not document"),
    }
}

fn check_agree(b: &[u8]) -> bool {
    match runthrough_fuzz::metered(b.len(), || AgreeMsg::decode(b)) {
        Ok(m) => {
            let mut e = Vec::new();
            m.encode(&mut e);
            assert_eq!(e, b, "{m:?} is not canonical");
            assert_eq!(m.encoded_len(), b.len());
            true
        }
        Err(e) => {
            assert!(!e.to_string().is_empty());
            false
        }
    }
}

#[test]
fn fuzz_ft_detector_msg() {
    runthrough_fuzz::run("ft detector message (ft/src/msg.rs Msg::decode)", random_msg, |b, shape| {
        let ok = check_msg(b);
        match shape {
            Shape::Valid => assert!(ok),
            Shape::Truncated | Shape::Extended => assert!(!ok, "a wrong length decodes"),
            _ => {}
        }
        ok
    });
}

#[test]
fn fuzz_ft_agreement_msg() {
    runthrough_fuzz::run("ft agreement message (ft/src/agree_msg.rs AgreeMsg::decode)", random_agree, |b, shape| {
        let ok = check_agree(b);
        match shape {
            Shape::Valid => assert!(ok),
            Shape::Truncated | Shape::Extended => assert!(!ok, "a wrong length decodes"),
            _ => {}
        }
        ok
    });
}

#[test]
fn every_truncation_of_valid_messages_is_rejected() {
    let mut rng = Rng::new(4);
    for _ in 0..300 {
        let (mut a, mut m) = (Vec::new(), Vec::new());
        random_agree(&mut rng, &mut a);
        random_msg(&mut rng, &mut m);
        runthrough_fuzz::every_truncation(&a, |cut| {
            assert!(matches!(
                AgreeMsg::decode(cut),
                Err(DecodeError::Empty | DecodeError::Truncated { .. } | DecodeError::Invalid { .. })
            ));
        });
        runthrough_fuzz::every_truncation(&m, |cut| assert!(!check_msg(cut)));
    }
}

#[test]
fn hostile_counts_allocate_nothing_beyond_the_message() {
    // Commit with a list count of 2^32 - 1 and 1000 elements' worth of bytes.
    let mut b = vec![0x14];
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend((0..4000u32).map(|i| i as u8));
    let (r, bytes) = runthrough_fuzz::measure(|| AgreeMsg::decode(&b));
    assert_eq!(r, Err(DecodeError::Truncated { kind: 0x14 }));
    assert_eq!(bytes, 0, "the count is checked before the list is allocated");
    // Report with a signal count of 2^32 - 1 and 1000 pairs' worth of bytes.
    let mut b = vec![0x11];
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(&[0; 12]); // ballot, flag, max
    b.extend_from_slice(&0u32.to_le_bytes()); // failed: none
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    b.extend((0..8000u32).map(|i| i as u8));
    let (r, bytes) = runthrough_fuzz::measure(|| AgreeMsg::decode(&b));
    assert_eq!(r, Err(DecodeError::Truncated { kind: 0x11 }));
    assert_eq!(bytes, 0, "the signal count is checked before the list is allocated");
}

proptest! {
    #[test]
    fn prop_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        check_msg(&b);
        check_agree(&b);
    }

    #[test]
    fn prop_flipped_and_truncated_valid_messages(seed in any::<u64>(), at in any::<usize>(), x in 1u8.., cut in any::<usize>()) {
        let mut rng = Rng::new(seed);
        let (mut a, mut m) = (Vec::new(), Vec::new());
        random_agree(&mut rng, &mut a);
        random_msg(&mut rng, &mut m);
        prop_assert!(check_agree(&a) && check_msg(&m));
        prop_assert!(!check_agree(&a[..cut % a.len()]));
        prop_assert!(!check_msg(&m[..cut % m.len()]));
        let (i, j) = (at % a.len(), at % m.len());
        a[i] ^= x;
        m[j] ^= x;
        check_agree(&a);
        check_msg(&m);
    }
}
