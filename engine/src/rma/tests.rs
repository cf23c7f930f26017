use super::*;
use proptest::prelude::*;

fn round_trip(m: RmaMsg<'_>) {
    let mut h = [0u8; MAX_RMA_HEADER];
    let n = m.encode_header(&mut h);
    let mut rec = h[..n].to_vec();
    rec.extend_from_slice(m.data());
    assert_eq!(RmaMsg::decode(&rec), Ok(m));
}

#[test]
fn every_message_round_trips() {
    let (win, token, disp) = (7, u64::MAX - 3, 1 << 40);
    round_trip(RmaMsg::Put { win, disp, data: b"abc" });
    round_trip(RmaMsg::Put { win, disp, data: b"" });
    round_trip(RmaMsg::Get { win, token, disp, len: 99 });
    round_trip(RmaMsg::Reply { token, offset: 5, data: b"xy" });
    round_trip(RmaMsg::Acc { win, disp, op: AccOp::LogicalXor, elem: Elem::F64, data: &[1; 8] });
    round_trip(RmaMsg::GetAcc { win, token, disp, roff: 64, op: AccOp::NoOp, elem: Elem::U16, data: &[2; 4] });
    round_trip(RmaMsg::Cas { win, token, disp, elem: Elem::I32, data: &[3; 8] });
    round_trip(RmaMsg::Flush { win, token });
    round_trip(RmaMsg::Done { token, refused: true });
    round_trip(RmaMsg::Lock { win, token, exclusive: true });
    round_trip(RmaMsg::Unlock { win, token });
    round_trip(RmaMsg::Post { win });
    round_trip(RmaMsg::Complete { win });
}

#[test]
fn malformed_messages_are_refused() {
    assert!(matches!(RmaMsg::decode(&[]), Err(RmaWireError::Truncated { .. })));
    assert_eq!(RmaMsg::decode(&[99]), Err(RmaWireError::UnknownOp(99)));
    assert!(matches!(RmaMsg::decode(&[OP_GET, 1, 0, 0]), Err(RmaWireError::Truncated { .. })));
    assert_eq!(RmaMsg::decode(&[OP_POST, 1, 0, 0, 0, 9]), Err(RmaWireError::Trailing(OP_POST, 1)));
    let mut acc = vec![OP_ACC, 0, 0, 0, 0];
    acc.extend_from_slice(&[0; 8]);
    acc.extend_from_slice(&[12, 0]);
    assert_eq!(RmaMsg::decode(&acc), Err(RmaWireError::AccCode(12, 0)));
}

#[test]
fn accumulate_every_operator() {
    let acc_i32 = |op, a: i32, b: i32| {
        let mut t = a.to_ne_bytes();
        accumulate(op, Elem::I32, &mut t, &b.to_ne_bytes()).unwrap();
        i32::from_ne_bytes(t)
    };
    assert_eq!(acc_i32(AccOp::Sum, i32::MAX, 1), i32::MIN, "integers wrap");
    assert_eq!(acc_i32(AccOp::Prod, 6, -7), -42);
    assert_eq!(acc_i32(AccOp::Max, -3, 2), 2);
    assert_eq!(acc_i32(AccOp::Min, -3, 2), -3);
    assert_eq!(acc_i32(AccOp::BitAnd, 0b1100, 0b1010), 0b1000);
    assert_eq!(acc_i32(AccOp::BitOr, 0b1100, 0b1010), 0b1110);
    assert_eq!(acc_i32(AccOp::BitXor, 0b1100, 0b1010), 0b0110);
    assert_eq!(acc_i32(AccOp::LogicalAnd, 5, 0), 0);
    assert_eq!(acc_i32(AccOp::LogicalOr, 5, 0), 1);
    assert_eq!(acc_i32(AccOp::LogicalXor, 5, 3), 0);
    assert_eq!(acc_i32(AccOp::Replace, 5, 3), 3);
    assert_eq!(acc_i32(AccOp::NoOp, 5, 3), 5);
    let mut t = [1.5f64.to_ne_bytes(), 2.0f64.to_ne_bytes()].concat();
    let o = [0.25f64.to_ne_bytes(), (-1.0f64).to_ne_bytes()].concat();
    accumulate(AccOp::Sum, Elem::F64, &mut t, &o).unwrap();
    assert_eq!(f64::from_ne_bytes(t[..8].try_into().unwrap()), 1.75);
    assert_eq!(f64::from_ne_bytes(t[8..].try_into().unwrap()), 1.0);
    assert_eq!(
        accumulate(AccOp::BitAnd, Elem::F32, &mut [0; 4], &[0; 4]),
        Err(AccError::OpType(AccOp::BitAnd, Elem::F32))
    );
    assert_eq!(accumulate(AccOp::Sum, Elem::I16, &mut [0; 3], &[0; 3]), Err(AccError::Length));
    assert_eq!(accumulate(AccOp::Sum, Elem::I16, &mut [0; 4], &[0; 2]), Err(AccError::Length));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
        let _ = RmaMsg::decode(&bytes);
    }
}

proptest! {
    /// The vectorized loops (plain path: typed when both sides are aligned, byte-wise
    /// when one is not) and the per-element step (atomic path) agree on every operation
    /// and type.
    #[test]
    fn the_plain_and_the_atomic_accumulate_agree(t in proptest::collection::vec(any::<u8>(), 65), o in proptest::collection::vec(any::<u8>(), 65)) {
        for (ts, os) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            let o = &o[os..os + 64];
            for &op in &ACC_OPS {
                for &elem in &ELEMS {
                    if check_acc(op, elem).is_err() {
                        continue;
                    }
                    let mut whole = t.clone();
                    let plain = &mut whole[ts..ts + 64];
                    accumulate(op, elem, plain, o).unwrap();
                    let n = elem.size();
                    let mut step = t[ts..ts + 64].to_vec();
                    for (x, y) in step.chunks_exact_mut(n).zip(o.chunks_exact(n)) {
                        bits_to(combine(op, elem, bits_of(x), bits_of(y)), x);
                    }
                    prop_assert_eq!(&*plain, &step[..], "{:?} {:?} shifts {} {}", op, elem, ts, os);
                }
            }
        }
    }
}
