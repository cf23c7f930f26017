//! Property tests: the message codec round-trips and rejects garbage without panicking,
//! and a detector fed arbitrary remote input never panics.

use proptest::prelude::*;
use runthrough_ft::{Config, Detector, Msg, Time};

fn any_msg() -> impl Strategy<Value = Msg> {
    prop_oneof![
        Just(Msg::Heartbeat),
        (any::<u32>(), any::<u16>()).prop_map(|(failed, hops)| Msg::Notice { failed, hops })
    ]
}

proptest! {
    #[test]
    fn round_trip(m in any_msg()) {
        let mut b = Vec::new();
        m.encode(&mut b);
        prop_assert_eq!(b.len(), m.encoded_len());
        prop_assert_eq!(Msg::decode(&b), Ok(m));
    }

    #[test]
    fn random_bytes_decode_or_reject_canonically(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
        if let Ok(m) = Msg::decode(&bytes) {
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(b, bytes, "only canonical encodings decode");
        }
    }

    #[test]
    fn detector_survives_arbitrary_remote_input(
        n in 1u32..40,
        me_seed in any::<u32>(),
        input in proptest::collection::vec((any::<u32>(), any_msg(), 0u64..30_000_000, any::<bool>()), 0..200),
    ) {
        let me = me_seed % n;
        let mut d = Detector::new(me, n, Config::default(), Time::ZERO);
        let mut now = Time::ZERO;
        for (from, msg, dt, small_rank) in input {
            now = Time::from_nanos(now.as_nanos() + dt);
            let from = if small_rank { from % (n + 2) } else { from };
            let msg = match msg {
                Msg::Notice { failed, hops } if small_rank => Msg::Notice { failed: failed % (n + 2), hops },
                m => m,
            };
            d.handle_message(from, msg, now);
            d.handle_timeout(now);
            while let Some((to, _)) = d.poll_transmit() {
                prop_assert!(to < n && to != me);
            }
            while d.poll_event().is_some() {}
            prop_assert!(d.failed().epoch() < n);
            if let Some(t) = d.poll_timeout() {
                prop_assert!(t > now || d.is_excluded());
            }
        }
    }
}
