//! The segment header is bytes another process wrote
//! (`docs/UNTRUSTED.md`): property tests and the `make fuzz` pass of the header checks
//! `Segment::open` runs (`read_header`, then `check_stored` against the object's size).
//! A header that passes describes a geometry recomputed from a layout within bounds and
//! lying inside the object; anything else is `BadSegment` or `Version`. The checks
//! allocate nothing.

use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64};

use proptest::prelude::*;
use runthrough_fuzz::{Rng, Shape};

use super::*;

#[global_allocator]
static ALLOC: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;

/// Header fields in order (magic, version, nranks, ring_bytes, bulk_bytes, creator_pid,
/// total_size, rings_offset, region_stride, ring_stride, ready), then the size of the
/// shm object (a peer controls it too, with `ftruncate`).
const IMAGE: usize = 8 + 4 * 5 + 8 * 4 + 4 + 8;

fn header_from(img: &[u8]) -> (Header, usize) {
    let mut b = [0u8; IMAGE];
    let n = img.len().min(IMAGE);
    b[..n].copy_from_slice(&img[..n]);
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    let h = Header {
        magic: AtomicU64::new(u64_at(0)),
        version: AtomicU32::new(u32_at(8)),
        nranks: AtomicU32::new(u32_at(12)),
        ring_bytes: AtomicU32::new(u32_at(16)),
        bulk_bytes: AtomicU32::new(u32_at(20)),
        creator_pid: AtomicI32::new(u32_at(24) as i32),
        total_size: AtomicU64::new(u64_at(28)),
        rings_offset: AtomicU64::new(u64_at(36)),
        region_stride: AtomicU64::new(u64_at(44)),
        ring_stride: AtomicU64::new(u64_at(52)),
        ready: AtomicU32::new(u32_at(60)),
        departed: std::array::from_fn(|_| AtomicU64::new(0)),
    };
    (h, usize::try_from(u64_at(64)).unwrap_or(usize::MAX))
}

fn random_layout(rng: &mut Rng) -> Layout {
    Layout {
        nranks: {
            let most = if rng.one_in(8) { MAX_RANKS as usize } else { 200 };
            1 + rng.below(most) as u32
        },
        ring_bytes: 4096 << rng.below(9),
        bulk_bytes: if rng.one_in(2) { 0 } else { 4096 * rng.below(64) as u32 },
    }
}

/// The header `Segment::create` writes for a random layout, and an object size.
fn valid_image(rng: &mut Rng, out: &mut Vec<u8>) {
    let (layout, geo) = loop {
        let l = random_layout(rng);
        if let Ok(g) = l.geometry() {
            break (l, g);
        }
    };
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    for v in [layout.nranks, layout.ring_bytes, layout.bulk_bytes, rng.next_u64() as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    for v in [geo.total, geo.rings_offset, geo.region_stride, geo.ring_stride] {
        out.extend_from_slice(&(v as u64).to_le_bytes());
    }
    out.extend_from_slice(&READY.to_le_bytes());
    out.extend_from_slice(&((geo.total + 4096 * rng.below(3)) as u64).to_le_bytes());
}

/// What `open` does with a header once it reads as ready; checks that what passes is
/// safe to map and index. Returns whether it passed.
fn check(img: &[u8]) -> bool {
    let (h, size) = header_from(img);
    let r = runthrough_fuzz::metered(0, || {
        if h.ready.load(Ordering::Relaxed) != READY {
            return Err(Error::Timeout("shm segment to become ready")); // `open` waits, then this
        }
        let (layout, stored) = Segment::read_header(&h)?;
        Ok((layout, Segment::check_stored(layout, stored, size)?))
    });
    match r {
        Ok((layout, geo)) => {
            assert_eq!(geo, layout.geometry().expect("a layout that passed"));
            let n = layout.nranks as usize;
            assert!((1..=MAX_RANKS as usize).contains(&n));
            assert!(ring::check_ring_bytes(layout.ring_bytes).is_ok());
            assert!(
                geo.ring_stride == ring::ring_stride(layout.ring_bytes) && geo.region_stride >= n * geo.ring_stride
            );
            // The last ring, the collective area and the bulk buffers lie inside.
            let last_ring = geo.rings_offset + (n - 1) * geo.region_stride + (n - 1) * geo.ring_stride;
            assert!(last_ring + geo.ring_stride <= geo.coll_offset);
            assert!(geo.coll_offset + crate::collarea::area_bytes(layout.nranks) <= geo.bulk_offset);
            assert!(geo.bulk_offset <= geo.total && geo.total <= size && geo.total <= MAX_SEGMENT_BYTES);
            true
        }
        Err(Error::BadSegment(_) | Error::Version { .. } | Error::Timeout(_)) => false,
        Err(e) => panic!("header check gave {e:?}"),
    }
}

#[test]
fn fuzz_shm_segment_header() {
    runthrough_fuzz::run(
        "shm segment header (shm/src/segment.rs read_header + check_stored)",
        valid_image,
        |b, shape| {
            let ok = check(b);
            if shape == Shape::Valid {
                assert!(ok, "a header Segment::create writes is rejected");
            }
            ok
        },
    );
}

#[test]
fn hostile_headers_are_typed_errors() {
    let mut img = Vec::new();
    valid_image(&mut Rng::new(5), &mut img);
    assert!(check(&img));
    let field = |img: &mut Vec<u8>, at: usize, v: &[u8]| img[at..at + v.len()].copy_from_slice(v);
    // Each field turned hostile on its own.
    for (at, v) in [
        (0, &b"NOTOURS!"[..]),
        (8, &99u32.to_le_bytes()[..]),
        (12, &0u32.to_le_bytes()[..]),
        (12, &(MAX_RANKS + 1).to_le_bytes()[..]),
        (16, &4097u32.to_le_bytes()[..]),
        (20, &100u32.to_le_bytes()[..]),
        (28, &u64::MAX.to_le_bytes()[..]),
        (36, &(1u64 << 62).to_le_bytes()[..]),
        (44, &u64::MAX.to_le_bytes()[..]),
        (52, &1u64.to_le_bytes()[..]),
        (64, &4096u64.to_le_bytes()[..]),
    ] {
        let mut bad = img.clone();
        field(&mut bad, at, v);
        assert!(!check(&bad), "field at {at} = {v:?} accepted");
    }
}

proptest! {
    #[test]
    fn prop_arbitrary_headers(b in proptest::collection::vec(any::<u8>(), 0..IMAGE + 8)) {
        check(&b);
    }

    #[test]
    fn prop_valid_headers_with_a_field_changed(seed in any::<u64>(), at in 0usize..IMAGE, x in 1u8..) {
        let mut img = Vec::new();
        valid_image(&mut Rng::new(seed), &mut img);
        prop_assert!(check(&img));
        img[at] ^= x;
        check(&img);
        for cut in 0..IMAGE {
            check(&img[..cut]);
        }
    }
}

/// End to end: `Segment::open` on real shm objects whose header another process turned
/// hostile after creating it, or which it shrank, fails with `BadSegment` / `Version`.
#[test]
fn open_refuses_hostile_objects() {
    let layout = Layout { nranks: 3, ring_bytes: 4096, bulk_bytes: 0 };
    type Corrupt = (&'static str, fn(&Header));
    let corrupt: [Corrupt; 5] = [
        ("magic", |h| h.magic.store(7, Ordering::Relaxed)),
        ("version", |h| h.version.store(VERSION + 1, Ordering::Relaxed)),
        ("nranks", |h| h.nranks.store(MAX_RANKS, Ordering::Relaxed)),
        ("stride", |h| h.region_stride.store(1, Ordering::Relaxed)),
        ("total", |h| h.total_size.store(u64::MAX, Ordering::Relaxed)),
    ];
    for (what, f) in corrupt {
        let name = default_name(&format!("unit-{}-hostile-{what}", std::process::id()));
        let _ = Segment::unlink(&name);
        let seg = Segment::create(&name, layout).unwrap();
        f(seg.map.header());
        let r = Segment::open(&name, Duration::from_millis(200));
        Segment::unlink(&name).unwrap();
        assert!(matches!(r, Err(Error::BadSegment(_) | Error::Version { .. })), "{what}: {r:?}");
    }
    // A valid header over an object shrunk below its layout.
    let name = default_name(&format!("unit-{}-hostile-size", std::process::id()));
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, layout).unwrap();
    let fd = shm_open(&c_name(&name).unwrap(), libc::O_RDWR).unwrap();
    // SAFETY: a valid fd; shrinking the object only affects mappings of its tail, which
    // nothing here touches (the header page stays).
    assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), seg.geo.total as libc::off_t / 2) }, 0);
    let r = Segment::open(&name, Duration::from_millis(200));
    Segment::unlink(&name).unwrap();
    assert!(matches!(r, Err(Error::BadSegment("segment smaller than its layout"))), "{r:?}");
}
