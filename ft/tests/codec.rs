//! Property tests: the message codecs (detector and agreement) round-trip and reject
//! garbage without panicking, and a detector or an agreement fed arbitrary remote input
//! never panics.

use std::sync::Arc;

use proptest::prelude::*;
use runthrough_ft::{AgreeMsg, Agreement, Config, Detector, Msg, Participants, Prior, SignalId, Time, Value};

fn sorted_list(max: u32) -> impl Strategy<Value = Vec<u32>> {
    proptest::collection::btree_set(0..max, 0..6).prop_map(|s| s.into_iter().collect())
}

fn signals() -> impl Strategy<Value = Vec<(SignalId, i32)>> {
    proptest::collection::btree_set((any::<u64>(), any::<i32>()), 0..5).prop_map(|s| s.into_iter().collect())
}

fn any_value(max: u32) -> impl Strategy<Value = Value> {
    (any::<u32>(), any::<u32>(), sorted_list(max), signals()).prop_map(|(flag, max, failed, signals)| Value {
        flag,
        max,
        failed,
        signals,
    })
}

fn any_prior(max: u32) -> impl Strategy<Value = Prior> {
    prop_oneof![
        Just(Prior::Nothing),
        (0..max, any_value(max)).prop_map(|(ballot, value)| Prior::Accepted { ballot, value }),
        any_value(max).prop_map(Prior::Decided),
    ]
}

/// Agreement messages naming indices below `max` (use `u32::MAX` for any).
fn any_agree_msg(instances: u64, max: u32) -> impl Strategy<Value = AgreeMsg> {
    prop_oneof![
        (0..instances, 0..max, any::<u32>(), any::<u32>(), sorted_list(max), signals(), any_prior(max)).prop_map(
            |(instance, ballot, flag, m, failed, signals, prior)| AgreeMsg::Report {
                instance,
                ballot,
                flag,
                max: m,
                failed,
                signals,
                prior
            }
        ),
        (0..instances, 0..max, any_value(max)).prop_map(|(instance, ballot, value)| AgreeMsg::Propose {
            instance,
            ballot,
            value
        }),
        (0..instances, 0..max).prop_map(|(instance, ballot)| AgreeMsg::Accept { instance, ballot }),
        (0..instances, any_value(max)).prop_map(|(instance, value)| AgreeMsg::Commit { instance, value }),
    ]
}

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
    fn agree_round_trip(m in any_agree_msg(u64::MAX, u32::MAX)) {
        let mut b = Vec::new();
        m.encode(&mut b);
        prop_assert_eq!(b.len(), m.encoded_len());
        prop_assert_eq!(AgreeMsg::decode(&b), Ok(m));
    }

    #[test]
    fn agree_random_bytes_decode_or_reject_canonically(
        kind in 0x10u8..0x16,
        body in proptest::collection::vec(any::<u8>(), 0..64),
        small_counts in any::<bool>(),
    ) {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&body);
        if small_counts {
            // Make plausible list counts likely: zero the high bytes of every u32 slot.
            for (i, b) in bytes.iter_mut().enumerate().skip(1) {
                if i % 4 != 1 {
                    *b %= 2;
                }
            }
        }
        if let Ok(m) = AgreeMsg::decode(&bytes) {
            let mut b = Vec::new();
            m.encode(&mut b);
            prop_assert_eq!(b, bytes, "only canonical encodings decode");
        }
    }

    #[test]
    fn agreement_survives_arbitrary_remote_input(
        n in 1u32..12,
        me_seed in any::<u32>(),
        input in proptest::collection::vec(
            (any::<u32>(), any_agree_msg(3, 14), any::<bool>(), any::<bool>()), 0..120),
    ) {
        let parts = Arc::new(Participants::world(n));
        let me = me_seed % n;
        let mut a = Agreement::new(parts, me, 1, !0, &[], Time::ZERO);
        for (i, (from, msg, small_rank, failure)) in input.into_iter().enumerate() {
            let now = Time::from_nanos(i as u64);
            let from = if small_rank { from % (n + 2) } else { from };
            if failure {
                a.handle_failure(from, now);
            } else {
                a.handle_message(from, msg, now);
            }
            while let Some((to, _)) = a.poll_transmit() {
                prop_assert!(to < n && to != me);
            }
            if let Some(d) = a.poll_decision() {
                prop_assert!(d.failed.windows(2).all(|w| w[0] < w[1]));
                prop_assert!(d.failed.iter().all(|&r| r < n));
                prop_assert!(d.signals.windows(2).all(|w| w[0] < w[1]));
            }
            prop_assert_eq!(a.poll_timeout(), None);
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
