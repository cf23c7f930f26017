//! Bootstrap frames are bytes another process wrote
//! (`docs/UNTRUSTED.md`): property tests and the `make fuzz` pass of
//! [`Request::decode`], [`Response::decode`] and [`read_frame`]. Nothing panics; every
//! rejection is an [`Error::Protocol`] (or, for a frame, `FrameTooLarge` /
//! `Disconnected`); decoding allocates at most the frame's own length, and reading a
//! frame at most what actually arrived (doubled by `Vec` growth) or 64 KiB, whatever
//! length it announces.

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use super::*;

#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

fn blob(rng: &mut Rng, max: usize) -> Vec<u8> {
    let mut v = Vec::new();
    let n = rng.below(max);
    rng.fill(&mut v, n);
    v
}

fn text(rng: &mut Rng) -> String {
    String::from_utf8_lossy(&blob(rng, 12)).into_owned()
}

fn random_request(rng: &mut Rng) -> Request {
    match rng.below(17) {
        0 => Request::Hello { version: rng.next_u64() as u16, rank: rng.extreme() as u32, secret: blob(rng, 70) },
        1 => Request::Put { key: text(rng), value: blob(rng, 40) },
        2 => Request::Get { key: text(rng), timeout_ms: rng.extreme() },
        3 => Request::Fence { timeout_ms: rng.extreme() },
        4 => Request::Finalized,
        5 => Request::Abort {
            code: rng.next_u64() as i32,
            ranks: (0..rng.below(5)).map(|_| rng.extreme() as u32).collect(),
        },
        6 => Request::Exited,
        7 => Request::Spawn { spec: blob(rng, 60) },
        8 => Request::SpawnDone { world: rng.extreme() as u32, ok: rng.below(2) == 1 },
        9 => Request::OpenPort,
        10 => Request::ClosePort { name: text(rng) },
        11 => Request::Accept { name: text(rng), spec: blob(rng, 30) },
        12 => Request::Connect { name: text(rng), spec: blob(rng, 30) },
        13 => Request::Publish { service: text(rng), port: text(rng) },
        14 => Request::Lookup { service: text(rng) },
        15 => Request::Unpublish { service: text(rng) },
        _ => Request::Departed,
    }
}

fn random_response(rng: &mut Rng) -> Response {
    match rng.below(6) {
        0 => Response::Ok,
        1 => Response::Value(blob(rng, 40)),
        2 => Response::Timeout,
        3 => Response::PeerExited { rank: rng.extreme() as u32 },
        4 => Response::Exited((0..rng.below(5)).map(|_| rng.extreme() as u32).collect()),
        _ => Response::Failed { reason: text(rng) },
    }
}

/// The body of an encoded frame.
fn body_of(frame: &[u8]) -> &[u8] {
    &frame[4..]
}

fn check_request(b: &[u8]) -> bool {
    match runthrough_fuzz::metered(b.len(), || Request::decode(b)) {
        Ok(r) => {
            let mut e = Vec::new();
            r.encode(&mut e).expect("a decoded request re-encodes");
            assert_eq!(body_of(&e), b, "{r:?} is not canonical");
            true
        }
        Err(Error::Protocol { .. }) => false,
        Err(e) => panic!("Request::decode gave {e:?}"),
    }
}

fn check_response(b: &[u8]) -> bool {
    match runthrough_fuzz::metered(b.len(), || Response::decode(b)) {
        Ok(r) => {
            let mut e = Vec::new();
            r.encode(&mut e).expect("a decoded response re-encodes");
            assert_eq!(body_of(&e), b, "{r:?} is not canonical");
            true
        }
        Err(Error::Protocol { .. }) => false,
        Err(e) => panic!("Response::decode gave {e:?}"),
    }
}

fn expect(ok: bool, shape: Shape) -> bool {
    match shape {
        Shape::Valid => assert!(ok, "a valid body is rejected"),
        Shape::Truncated | Shape::Extended => assert!(!ok, "a body of the wrong length decodes"),
        _ => {}
    }
    ok
}

#[test]
fn fuzz_launch_request() {
    runthrough_fuzz::run(
        "bootstrap request (launch/src/wire.rs Request::decode)",
        |rng, out| {
            let mut f = Vec::new();
            random_request(rng).encode(&mut f).unwrap();
            out.extend_from_slice(body_of(&f));
        },
        |b, shape| expect(check_request(b), shape),
    );
}

#[test]
fn fuzz_launch_response() {
    runthrough_fuzz::run(
        "bootstrap response (launch/src/wire.rs Response::decode)",
        |rng, out| {
            let mut f = Vec::new();
            random_response(rng).encode(&mut f).unwrap();
            out.extend_from_slice(body_of(&f));
        },
        |b, shape| expect(check_response(b), shape),
    );
}

/// Whole frames off a byte stream: a length prefix the sender chose, then the body.
#[test]
fn fuzz_launch_frame_reader() {
    runthrough_fuzz::run(
        "bootstrap frame reader (launch/src/wire.rs read_frame)",
        |rng, out| {
            if rng.one_in(2) {
                random_request(rng).encode(out).unwrap();
            } else {
                random_response(rng).encode(out).unwrap();
            }
        },
        |b, shape| {
            let max = if shape == Shape::Random { MAX_HELLO_FRAME_BYTES } else { MAX_FRAME_BYTES };
            let bound = FRAME_CHUNK_BYTES.max(2 * b.len());
            match runthrough_fuzz::metered(bound, || read_frame(&mut &b[..], max)) {
                Ok(Some(body)) => {
                    assert_eq!(body, b[4..4 + body.len()]);
                    assert_eq!(u32::from_le_bytes(b[..4].try_into().unwrap()) as usize, body.len());
                    let ok = check_request(&body) || check_response(&body);
                    if shape == Shape::Valid {
                        assert!(ok && body.len() + 4 == b.len());
                    }
                    true
                }
                Ok(None) => {
                    assert!(b.is_empty());
                    false
                }
                Err(Error::FrameTooLarge { len, max: m }) => {
                    assert!(len > m && m == max);
                    false
                }
                Err(Error::Disconnected) => {
                    assert!(!b.is_empty());
                    false
                }
                Err(e) => panic!("read_frame gave {e:?}"),
            }
        },
    );
}

/// Regression: `read_frame` used to allocate the announced length (up to 16 MiB) before
/// a byte of the body arrived.
#[test]
fn an_announced_length_is_not_an_allocation() {
    let mut b = (MAX_FRAME_BYTES as u32).to_le_bytes().to_vec();
    b.extend_from_slice(b"only this");
    let (r, bytes) = runthrough_fuzz::measure(|| read_frame(&mut &b[..], MAX_FRAME_BYTES));
    assert!(matches!(r, Err(Error::Disconnected)), "{r:?}");
    assert!(bytes <= FRAME_CHUNK_BYTES, "{bytes} bytes allocated for a 9-byte body");
}

#[test]
fn every_truncation_of_valid_bodies_is_a_protocol_error() {
    let mut rng = Rng::new(3);
    for _ in 0..300 {
        let (mut q, mut p) = (Vec::new(), Vec::new());
        random_request(&mut rng).encode(&mut q).unwrap();
        random_response(&mut rng).encode(&mut p).unwrap();
        runthrough_fuzz::every_truncation(body_of(&q), |cut| assert!(!check_request(cut)));
        runthrough_fuzz::every_truncation(body_of(&p), |cut| assert!(!check_response(cut)));
        runthrough_fuzz::every_truncation(&q, |cut| {
            assert!(!matches!(read_frame(&mut &cut[..], MAX_FRAME_BYTES), Ok(Some(_))))
        });
    }
}

proptest! {
    #[test]
    fn prop_arbitrary_bodies(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        check_request(&b);
        check_response(&b);
        let _ = read_frame(&mut &b[..], MAX_HELLO_FRAME_BYTES);
    }

    #[test]
    fn prop_flipped_and_truncated_bodies(seed in any::<u64>(), at in any::<usize>(), x in 1u8.., cut in any::<usize>()) {
        let mut rng = Rng::new(seed);
        let (mut q, mut p) = (Vec::new(), Vec::new());
        random_request(&mut rng).encode(&mut q).unwrap();
        random_response(&mut rng).encode(&mut p).unwrap();
        let (q, p) = (&mut q[4..], &mut p[4..]);
        prop_assert!(check_request(q) && check_response(p));
        prop_assert!(!check_request(&q[..cut % q.len()]));
        prop_assert!(!check_response(&p[..cut % p.len()]));
        q[at % q.len()] ^= x;
        p[at % p.len()] ^= x;
        check_request(q);
        check_response(p);
    }
}
