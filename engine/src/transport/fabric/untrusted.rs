//! Fabric frames are bytes another process wrote (`docs/UNTRUSTED.md`):
//! property tests and the `make fuzz` pass of `decode_frame`, which runs on every
//! received fabric record (no allocation; a frame either decodes to a rank inside the
//! job or is dropped and counted as malformed). Peer addresses published at start-up:
//! `check_peer_addrs`.

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use super::*;

const SIZE: u32 = 8;

fn random_frame(rng: &mut Rng, out: &mut Vec<u8>) {
    let kind = if rng.one_in(2) { KIND_DATA } else { KIND_CREDIT };
    out.extend_from_slice(&encode_frame(kind, rng.next_u64() as u16, rng.below(SIZE as usize) as u32));
    if kind == KIND_DATA {
        let n = rng.below(48);
        rng.fill(out, n);
    }
}

fn check(b: &[u8], size: u32) -> bool {
    match runthrough_fuzz::metered(0, || decode_frame(b, size)) {
        Some(f) => {
            assert!(f.src < size && b.len() >= FRAME_BYTES);
            assert_eq!(encode_frame(f.kind, f.credits, f.src), b[..FRAME_BYTES]);
            assert!(f.kind == KIND_DATA || b.len() == FRAME_BYTES);
            true
        }
        None => false,
    }
}

#[test]
fn fuzz_engine_fabric_frame() {
    runthrough_fuzz::run(
        "engine fabric frame (engine/src/transport/fabric.rs decode_frame)",
        random_frame,
        |b, shape| {
            let ok = check(b, SIZE);
            if shape == Shape::Valid {
                assert!(ok, "a valid frame is dropped");
            }
            if shape == Shape::Truncated {
                assert!(!ok || b.len() >= FRAME_BYTES, "a frame shorter than its header decodes");
            }
            ok
        },
    );
}

#[test]
fn peer_addresses_must_match_the_provider_length() {
    let own = 16;
    assert!(check_peer_addrs(&[Some(vec![1; 16]), Some(vec![2; 16])], own).is_ok());
    // A rank out at start-up has no address (R31): nothing to check.
    assert!(check_peer_addrs(&[Some(vec![1; 16]), None], own).is_ok());
    for bad in [vec![], vec![0u8; 1], vec![0u8; 15], vec![0u8; 17], vec![0u8; 4096]] {
        let e = check_peer_addrs(&[Some(vec![1; 16]), Some(bad.clone())], own).unwrap_err().to_string();
        assert!(e.contains("rank 1") && e.contains(&format!("{} bytes", bad.len())), "{e}");
    }
}

proptest! {
    #[test]
    fn prop_arbitrary_frames_never_panic(b in proptest::collection::vec(any::<u8>(), 0..32), size in 0u32..16) {
        check(&b, size);
    }

    #[test]
    fn prop_truncated_and_flipped_frames(seed in any::<u64>(), cut in any::<usize>(), at in any::<usize>(), x in 1u8..) {
        let mut f = Vec::new();
        random_frame(&mut Rng::new(seed), &mut f);
        prop_assert!(check(&f, SIZE));
        for k in 0..FRAME_BYTES {
            prop_assert!(!check(&f[..k], SIZE));
        }
        check(&f[..cut % f.len()], SIZE);
        let i = at % f.len();
        f[i] ^= x;
        check(&f, SIZE);
    }
}
