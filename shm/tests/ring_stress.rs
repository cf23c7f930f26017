//! Multi-thread stress of the SPSC ring: no loss, duplication or reordering; payloads
//! intact (sequence number + checksum + comparison with the source bytes).

use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use runthrough_shm::ring::channel;
use runthrough_shm::PushError;

/// Header: seq u64, pool offset u32, body length u32, checksum u64.
const HEAD: usize = 24;

fn checksum(seq: u64, body: &[u8]) -> u64 {
    let mut h = seq.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ body.len() as u64;
    let mut words = body.chunks_exact(8);
    for w in &mut words {
        let w = u64::from_le_bytes(w.try_into().unwrap());
        h = (h ^ w).wrapping_mul(0x100_0000_01B3).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01B3);
    }
    h
}

fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 64 {
        std::hint::spin_loop();
    } else {
        thread::yield_now();
    }
}

/// Sends `count` records with bodies of 0..=max_body bytes through a ring of `ring_bytes`.
fn run(count: u64, ring_bytes: u32, max_body: usize, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let pool: Arc<Vec<u8>> = Arc::new((0..(1 << 20) + max_body).map(|_| rng.gen()).collect());
    let (mut tx, mut rx) = channel(ring_bytes);
    assert!(HEAD + max_body <= tx.max_record());
    let deadline = Instant::now() + Duration::from_secs(120);

    let src = pool.clone();
    let producer = thread::spawn(move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0xABCD);
        let mut fulls = 0u64;
        for seq in 0..count {
            let len = rng.gen_range(0..=max_body);
            let off = rng.gen_range(0..(1 << 20));
            let body = &src[off..off + len];
            let mut head = [0u8; HEAD];
            head[..8].copy_from_slice(&seq.to_le_bytes());
            head[8..12].copy_from_slice(&(off as u32).to_le_bytes());
            head[12..16].copy_from_slice(&(len as u32).to_le_bytes());
            head[16..24].copy_from_slice(&checksum(seq, body).to_le_bytes());
            let mut spins = 0;
            loop {
                match tx.try_push(&head, body) {
                    Ok(()) => break,
                    Err(PushError::Full) => {
                        fulls += 1;
                        assert!(Instant::now() < deadline, "producer stuck");
                        backoff(&mut spins);
                    }
                    Err(e) => panic!("push: {e}"),
                }
            }
        }
        fulls
    });

    let mut expected = 0u64;
    let mut bytes = 0usize;
    let mut spins = 0;
    while expected < count {
        let Some(rec) = rx.peek() else {
            assert!(Instant::now() < deadline, "consumer stuck at {expected}");
            backoff(&mut spins);
            continue;
        };
        spins = 0;
        let rec = rec.expect("ring corrupt");
        assert!(rec.len() >= HEAD, "short record");
        let seq = u64::from_le_bytes(rec[..8].try_into().unwrap());
        let off = u32::from_le_bytes(rec[8..12].try_into().unwrap()) as usize;
        let len = u32::from_le_bytes(rec[12..16].try_into().unwrap()) as usize;
        let sum = u64::from_le_bytes(rec[16..24].try_into().unwrap());
        assert_eq!(seq, expected, "lost, duplicated or reordered record");
        assert_eq!(rec.len(), HEAD + len, "record length of seq {seq}");
        let body = &rec[HEAD..];
        assert_eq!(checksum(seq, body), sum, "checksum of seq {seq}");
        assert!(body == &pool[off..off + len], "payload of seq {seq}");
        bytes += rec.len();
        rx.pop();
        expected += 1;
    }
    let fulls = producer.join().unwrap();
    assert!(rx.peek().is_none(), "extra record after the last one");
    eprintln!("{count} records, {bytes} bytes, ring {ring_bytes}: producer saw Full {fulls} times");
}

#[test]
fn stress_tiny_records() {
    run(2_000_000, 4096, 16, 1);
}

#[test]
fn stress_mixed_records_up_to_2k() {
    run(200_000, 16384, 2048, 2);
}

#[test]
fn stress_mixed_records_small_ring() {
    // Records of up to a quarter of the ring: many skip markers.
    run(100_000, 4096, 1008 - HEAD, 3);
}
