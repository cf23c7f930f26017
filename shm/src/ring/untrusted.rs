//! Ring memory is written by another process (`docs/UNTRUSTED.md`):
//! the `make fuzz` pass of the consumer (`RingRx::from_raw`, `peek`, `pop`) and of the
//! producer's attach and push (`RingTx::from_raw`, `try_push`) over ring images a peer
//! could have left: real ring states after random traffic, mutated, truncated (the tail
//! zeroed) or random. Whatever the cursors, stamps and lengths say, every record handed
//! out lies inside the ring's cells and within `max_record`, nothing is written outside
//! the ring (guard bytes on both sides), corruption is `BadSegment` / `Corrupt`, and
//! nothing allocates (this is the hot path of shared-memory receives).

use std::alloc::{self, Layout};
use std::sync::Arc;

use runthrough_fuzz::{Rng, Shape};

use super::*;

const RING: u32 = 4096;
/// `RingTx::from_raw`'s bitmap for a ring of `RING` bytes (one bit per 64-byte cell).
const DIRTY_BITMAP_BYTES: usize = (RING as usize / 64).div_ceil(64) * 8;
const GUARD: usize = 256;
const GUARD_BYTE: u8 = 0xa5;

/// A ring-sized block with guard bytes before and after.
struct Arena {
    ptr: *mut u8,
    owner: Owner,
    stride: usize,
}

impl Arena {
    fn new() -> Arena {
        let stride = ring_stride(RING);
        let layout = Layout::from_size_align(GUARD + stride + GUARD, CTL_ALIGN).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Arena { ptr, owner: Arc::new(HeapRing { ptr, layout }), stride }
    }

    fn base(&self) -> *mut u8 {
        // SAFETY: GUARD < the block's size.
        unsafe { self.ptr.add(GUARD) }
    }

    /// Loads `img` as the ring's bytes (zeros past its end) and resets the guards. Call
    /// only while no handle on this arena exists.
    fn load(&self, img: &[u8]) {
        let n = img.len().min(self.stride);
        // SAFETY: the block holds GUARD + stride + GUARD bytes, no handle is alive, and
        // `img` is a separate allocation.
        unsafe {
            std::ptr::write_bytes(self.ptr, GUARD_BYTE, GUARD);
            std::ptr::copy_nonoverlapping(img.as_ptr(), self.base(), n);
            std::ptr::write_bytes(self.base().add(n), 0, self.stride - n);
            std::ptr::write_bytes(self.base().add(self.stride), GUARD_BYTE, GUARD);
        }
    }

    fn guards_intact(&self) -> bool {
        // SAFETY: both guard ranges lie inside the block; handles never write them (that
        // is what is checked).
        let (before, after) = unsafe {
            (
                std::slice::from_raw_parts(self.ptr, GUARD),
                std::slice::from_raw_parts(self.base().add(self.stride), GUARD),
            )
        };
        before.iter().chain(after).all(|&b| b == GUARD_BYTE)
    }

    /// The ring's bytes (racy copy is fine: single-threaded here).
    fn image(&self, out: &mut Vec<u8>) {
        // SAFETY: the ring range lies inside the block.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(self.base(), self.stride) });
    }

    fn rx(&self) -> Result<RingRx, Error> {
        // SAFETY: `base` is CTL_ALIGN-aligned (GUARD is a multiple) with ring_stride(RING)
        // bytes kept alive by `owner`; one consumer handle at a time.
        unsafe { RingRx::from_raw(self.base(), RING, self.owner.clone(), None) }
    }

    fn tx(&self) -> Result<RingTx, Error> {
        // SAFETY: as in `rx`, one producer handle at a time.
        unsafe { RingTx::from_raw(self.base(), RING, self.owner.clone(), None) }
    }
}

/// A live ring that random traffic keeps moving: its images are the valid encodings.
struct Traffic {
    arena: Arena,
    tx: RingTx,
    rx: RingRx,
}

impl Traffic {
    fn new() -> Traffic {
        let arena = Arena::new();
        arena.load(&[]);
        let (tx, rx) = (arena.tx().unwrap(), arena.rx().unwrap());
        Traffic { arena, tx, rx }
    }

    fn step(&mut self, rng: &mut Rng, out: &mut Vec<u8>) {
        let mut rec = Vec::new();
        for _ in 0..rng.below(4) {
            rec.clear();
            let n = if rng.one_in(4) { rng.below(self.tx.max_record() + 1) } else { rng.below(100) };
            rng.fill(&mut rec, n);
            let _ = self.tx.try_push(&rec[..n / 2], &rec[n / 2..]);
        }
        for _ in 0..rng.below(4) {
            let _ = self.rx.try_recv(|r| r.len());
        }
        self.arena.image(out);
    }
}

/// Attaches both ends to `img` and drains it; returns whether no corruption was reported.
fn check(arena: &Arena, img: &[u8], push: &[u8]) -> bool {
    arena.load(img);
    let cells = arena.base() as usize + CTL_BYTES;
    // The one allocation: the producer's bitmap of continuation cells, one bit per cell
    // of this (local, not hostile) ring size.
    let ok = runthrough_fuzz::metered(DIRTY_BITMAP_BYTES, || {
        let mut clean = true;
        match arena.rx() {
            Err(Error::BadSegment(_)) => clean = false,
            Err(e) => panic!("RingRx::from_raw gave {e:?}"),
            Ok(mut rx) => {
                let max = rx.max_record();
                for _ in 0..8 {
                    match rx.peek() {
                        None => break,
                        Some(Ok(r)) => {
                            let at = r.as_ptr() as usize;
                            assert!(r.len() <= max, "record of {} bytes", r.len());
                            assert!(at >= cells && at + r.len() <= cells + RING as usize, "record outside the cells");
                            rx.pop();
                        }
                        Some(Err(Error::BadSegment(_))) => {
                            assert!(matches!(rx.peek(), Some(Err(_))), "a corrupt ring stays corrupt");
                            clean = false;
                            break;
                        }
                        Some(Err(e)) => panic!("peek gave {e:?}"),
                    }
                }
            }
        }
        match arena.tx() {
            Err(Error::BadSegment(_)) => clean = false,
            Err(e) => panic!("RingTx::from_raw gave {e:?}"),
            Ok(mut tx) => match tx.try_push(&push[..push.len() / 2], &push[push.len() / 2..]) {
                Ok(()) | Err(PushError::Full) => {}
                Err(PushError::Corrupt) => clean = false,
                Err(e) => panic!("try_push gave {e:?}"),
            },
        }
        clean
    });
    assert!(arena.guards_intact(), "a ring handle wrote outside the ring");
    ok
}

#[test]
fn fuzz_shm_ring_records() {
    let arena = Arena::new();
    let mut traffic = Traffic::new();
    let mut push = Vec::new();
    let mut rng = Rng::new(99);
    runthrough_fuzz::run(
        "shm ring cells and cursors (shm/src/ring.rs RingRx::peek/pop, RingTx::try_push)",
        |rng, out| traffic.step(rng, out),
        |img, shape| {
            push.clear();
            let n = rng.below(200);
            rng.fill(&mut push, n);
            let ok = check(&arena, img, &push);
            if shape == Shape::Valid {
                assert!(ok, "a ring state real traffic left is reported corrupt");
            }
            ok
        },
    );
}

#[test]
fn hostile_cursors_and_lengths_are_bad_segment() {
    let arena = Arena::new();
    let mut t = Traffic::new();
    let mut img = Vec::new();
    t.tx.try_push(b"one", &[]).unwrap();
    t.arena.image(&mut img);
    assert!(check(&arena, &img, b"x"));
    let cell0 = CTL_BYTES;
    for (at, v) in [
        (0, u64::MAX.to_le_bytes().to_vec()),         // tail far ahead of head
        (CTL_BYTES / 2, 5u64.to_le_bytes().to_vec()), // head ahead of tail
        (cell0 + 8, 5000u32.to_le_bytes().to_vec()),  // length beyond max_record
        (cell0 + 8, SKIP.to_le_bytes().to_vec()),     // skip marker at cell 0
    ] {
        let mut bad = img.clone();
        bad[at..at + v.len()].copy_from_slice(&v);
        assert!(!check(&arena, &bad, b"x"), "corruption at {at} not reported");
    }
}

proptest::proptest! {
    #[test]
    fn prop_any_word_of_a_live_ring_overwritten(seed in proptest::prelude::any::<u64>(), at in 0usize..4352, v in proptest::prelude::any::<u64>(), w in 0usize..4) {
        let arena = Arena::new();
        let mut t = Traffic::new();
        let mut rng = Rng::new(seed);
        let mut img = Vec::new();
        for _ in 0..1 + rng.below(8) {
            img.clear();
            t.step(&mut rng, &mut img);
        }
        proptest::prop_assert!(check(&arena, &img, b"abc"));
        let width = [1, 2, 4, 8][w];
        let at = at.min(img.len() - width);
        img[at..at + width].copy_from_slice(&v.to_le_bytes()[..width]);
        check(&arena, &img, b"abc");
    }
}
