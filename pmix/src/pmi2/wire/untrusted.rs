//! PMI-2 frames are bytes another process (the resource manager's step daemon) wrote
//! (`docs/UNTRUSTED.md`): property tests and the `make fuzz` pass of [`Msg::decode`],
//! [`read_frame`], [`decode_init_response`] and [`node_of_ranks`]. Nothing panics; every
//! rejection is an [`Error::Protocol`] / [`Error::Pmi2`] (or [`Error::Io`] for a stream
//! that ends early); decoding allocates at most 8 times the bytes present (plus 256 bytes), and
//! reading a frame at most the announced length, itself at most [`MAX_BODY_BYTES`].

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use super::*;

#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

fn word(rng: &mut Rng) -> String {
    const CHARS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789-_/.(),= ";
    let n = rng.below(10);
    (0..n).map(|_| CHARS[rng.below(CHARS.len())] as char).collect()
}

fn random_frame(rng: &mut Rng) -> Vec<u8> {
    let cmd = format!("c{}", word(rng).replace('=', ""));
    let keys: Vec<String> = (0..rng.below(5)).map(|_| format!("k{}", word(rng).replace('=', ""))).collect();
    let vals: Vec<String> = keys.iter().map(|_| word(rng)).collect();
    let pairs: Vec<(&str, &str)> = keys.iter().map(String::as_str).zip(vals.iter().map(String::as_str)).collect();
    encode(&cmd, &pairs).expect("generated pairs are carriable")
}

/// Decodes `body`; what decodes must re-encode to the same bytes.
fn check_body(body: &[u8]) -> bool {
    match runthrough_fuzz::metered(8 * body.len() + 256, || Msg::decode(body)) {
        Ok(m) => {
            let f = m.encode().expect("a decoded message re-encodes");
            assert_eq!(&f[PREFIX_BYTES..], body, "{m:?} is not canonical");
            true
        }
        Err(Error::Protocol(_)) => false,
        Err(e) => panic!("Msg::decode gave {e:?}"),
    }
}

#[test]
fn fuzz_pmi2_frame() {
    runthrough_fuzz::run(
        "PMI-2 frame (pmix/src/pmi2/wire.rs read_frame + Msg::decode)",
        |rng, out| out.extend_from_slice(&random_frame(rng)),
        |b, shape| {
            let bound = MAX_BODY_BYTES.min(1_000_000);
            match runthrough_fuzz::metered(bound + 64, || read_frame(&mut &b[..])) {
                Ok(body) => {
                    assert_eq!(body, b[PREFIX_BYTES..PREFIX_BYTES + body.len()]);
                    let ok = check_body(&body);
                    if shape == Shape::Valid {
                        assert!(ok && body.len() + PREFIX_BYTES == b.len(), "a valid frame is rejected");
                    }
                    ok
                }
                Err(Error::Protocol(_) | Error::Io(_)) => {
                    assert!(shape != Shape::Valid, "a valid frame is rejected");
                    false
                }
                Err(e) => panic!("read_frame gave {e:?}"),
            }
        },
    );
}

#[test]
fn fuzz_pmi2_greeting_and_mapping() {
    runthrough_fuzz::run(
        "PMI-2 greeting answer and process mapping (pmix/src/pmi2/wire.rs)",
        |rng, out| {
            if rng.one_in(2) {
                out.extend_from_slice(b"cmd=response_to_init rc=0 pmi_version=2 pmi_subversion=0");
            } else {
                let blocks = 1 + rng.below(3);
                let mut m = String::from("(vector");
                for _ in 0..blocks {
                    m.push_str(&format!(",({},{},{})", rng.below(4), 1 + rng.below(3), 1 + rng.below(4)));
                }
                m.push(')');
                out.extend_from_slice(m.as_bytes());
            }
        },
        |b, shape| {
            let greeting = runthrough_fuzz::metered(8 * b.len() + 256, || decode_init_response(b));
            assert!(matches!(greeting, Ok(()) | Err(Error::Protocol(_) | Error::Pmi2 { .. })), "{greeting:?}");
            let text = String::from_utf8_lossy(b);
            let size = 64;
            let mapping = runthrough_fuzz::metered(8 * b.len() + 8 * size + 256, || node_of_ranks(&text, size as u32));
            match &mapping {
                Ok(nodes) => assert_eq!(nodes.len(), size),
                Err(Error::Protocol(_)) => {}
                Err(e) => panic!("node_of_ranks gave {e:?}"),
            }
            let ok = greeting.is_ok() || mapping.is_ok();
            if shape == Shape::Valid {
                assert!(ok, "a valid greeting or mapping is rejected");
            }
            ok
        },
    );
}

/// An announced length is checked before anything is allocated for it.
#[test]
fn an_announced_length_is_bounded() {
    let (r, bytes) = runthrough_fuzz::measure(|| read_frame(&mut &b"999999cmd=x;"[..]));
    assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
    assert!(bytes < 1024, "{bytes} bytes allocated for a refused frame");
}

proptest! {
    #[test]
    fn prop_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..80)) {
        check_body(&b);
        let _ = read_frame(&mut &b[..]);
        let _ = decode_init_response(&b);
        let _ = node_of_ranks(&String::from_utf8_lossy(&b), 16);
    }

    #[test]
    fn prop_valid_frames_round_trip(seed in any::<u64>(), cut in any::<usize>()) {
        let mut rng = Rng::new(seed);
        let f = random_frame(&mut rng);
        prop_assert_eq!(Msg::decode(&read_frame(&mut &f[..]).unwrap()).unwrap().encode().unwrap(), f.clone());
        let cut = cut % f.len();
        prop_assert!(read_frame(&mut &f[..cut]).is_err());
    }
}
