//! Deterministic fuzzing support for every decoder of bytes another process wrote
//! (`docs/UNTRUSTED.md`). Test-only: the crates dev-depend on it.
//!
//! cargo-fuzz needs a nightly toolchain; this is the stable-toolchain substitute, run as
//! ordinary `#[test]`s. Parts:
//!
//! - [`Rng`]: SplitMix64, a fast deterministic generator (seeded per decoder, so a
//!   failure reproduces with the same case count).
//! - [`make_case`]: one input from a valid encoding, in one of the [`Shape`]s: random
//!   bytes, the valid encoding itself, truncated, with bytes flipped, with a field
//!   overwritten by an extreme integer, with a byte inserted or removed, or with trailing
//!   bytes.
//! - [`run`]: feeds [`cases`] inputs to a decoder; a panic names the case and its bytes.
//! - [`metered`]: every decode runs under the [`TrackingAlloc`] meter and fails the test
//!   if one allocation exceeds the decoder's bound (a function of the input length: an
//!   allocation sized by an unchecked length field cannot hide).
//! - [`every_truncation`]: a valid encoding cut at every length.
//!
//! `RT_FUZZ_CASES` sets the number of cases per decoder (default [`DEFAULT_CASES`], the
//! short pass of `make test`); `make fuzz` runs 10^6 in release mode. Each run prints one
//! line per decoder: `fuzz <decoder>: <cases> cases, <accepted> accepted, <rejected>
//! rejected, largest allocation <bytes> B, <seconds> s`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

/// Cases per decoder when `RT_FUZZ_CASES` is unset (the short pass of `make test`).
pub const DEFAULT_CASES: u64 = 3000;

/// Cases per decoder: `RT_FUZZ_CASES`, else [`DEFAULT_CASES`].
///
/// # Panics
/// If `RT_FUZZ_CASES` is set but not a number.
pub fn cases() -> u64 {
    match std::env::var("RT_FUZZ_CASES") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("RT_FUZZ_CASES={v:?} is not a number")),
        Err(_) => DEFAULT_CASES,
    }
}

/// SplitMix64 (Steele, Lea, Flood 2014): one add and three multiply-xorshifts per word.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// A generator seeded from `name` (FNV-1a), so each decoder has its own stream.
    pub fn for_name(name: &str) -> Rng {
        Rng(name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)))
    }

    /// The next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; the slight bias is irrelevant here).
    #[inline]
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// True with probability `1 / n`.
    #[inline]
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    /// Appends `n` random bytes to `out`.
    pub fn fill(&mut self, out: &mut Vec<u8>, n: usize) {
        let mut left = n;
        while left > 0 {
            let w = self.next_u64().to_le_bytes();
            let k = left.min(8);
            out.extend_from_slice(&w[..k]);
            left -= k;
        }
    }

    /// An integer a length or count field would find hostile: 0, 1, small, around the
    /// powers of two, the maxima of u16/u32/i32/u64, or random.
    pub fn extreme(&mut self) -> u64 {
        match self.below(10) {
            0 => 0,
            1 => 1,
            2 => self.below(64) as u64,
            3 => (1u64 << self.below(64)).wrapping_sub(self.below(3) as u64),
            4 => u64::from(u16::MAX),
            5 => u64::from(u32::MAX) - self.below(2) as u64,
            6 => i32::MAX as u64 + self.below(2) as u64,
            7 => u64::MAX - self.below(2) as u64,
            8 => i64::MAX as u64,
            _ => self.next_u64(),
        }
    }
}

/// What a case was made from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Shape {
    /// Random bytes of random length.
    Random,
    /// The valid encoding, unchanged: the decoder must accept it.
    Valid,
    /// The valid encoding cut short (possibly to nothing).
    Truncated,
    /// The valid encoding with 1 to 4 bytes changed.
    Flipped,
    /// The valid encoding with a 1-, 2-, 4- or 8-byte window overwritten by
    /// [`Rng::extreme`] (hits length and count fields).
    Field,
    /// The valid encoding with one byte inserted or removed.
    Shifted,
    /// The valid encoding followed by 1 to 16 random bytes.
    Extended,
}

/// Writes into `out` one case made from `valid` (random bytes up to `2 × valid.len() + 16`
/// long for [`Shape::Random`]) and returns its shape.
pub fn make_case(rng: &mut Rng, valid: &[u8], out: &mut Vec<u8>) -> Shape {
    out.clear();
    let n = valid.len();
    let pick = rng.below(16);
    let shape = match pick {
        0..=2 => Shape::Random,
        3 => Shape::Valid,
        4..=6 => Shape::Truncated,
        7..=9 => Shape::Flipped,
        10..=12 => Shape::Field,
        13..=14 => Shape::Shifted,
        _ => Shape::Extended,
    };
    match shape {
        Shape::Random => {
            let len = rng.below(2 * n + 17);
            rng.fill(out, len);
        }
        Shape::Valid => out.extend_from_slice(valid),
        Shape::Truncated => out.extend_from_slice(&valid[..rng.below(n.max(1))]),
        Shape::Flipped => {
            out.extend_from_slice(valid);
            if n > 0 {
                for _ in 0..1 + rng.below(4) {
                    let i = rng.below(n);
                    out[i] ^= 1 + rng.below(255) as u8;
                }
            }
        }
        Shape::Field => {
            out.extend_from_slice(valid);
            let w = [1, 2, 4, 8][rng.below(4)];
            if n >= w {
                let at = rng.below(n - w + 1);
                let v = rng.extreme().to_le_bytes();
                out[at..at + w].copy_from_slice(&v[..w]);
            }
        }
        Shape::Shifted => {
            out.extend_from_slice(valid);
            let at = rng.below(n + 1);
            if n > 0 && rng.one_in(2) {
                out.remove(at.min(n - 1));
            } else {
                out.insert(at, rng.next_u64() as u8);
            }
        }
        Shape::Extended => {
            out.extend_from_slice(valid);
            let extra = 1 + rng.below(16);
            rng.fill(out, extra);
        }
    }
    shape
}

/// Calls `f` with `valid[..k]` for every `k < valid.len()`.
pub fn every_truncation(valid: &[u8], mut f: impl FnMut(&[u8])) {
    for k in 0..valid.len() {
        f(&valid[..k]);
    }
}

/// The result of a [`run`].
#[derive(Debug, Clone)]
pub struct Report {
    /// The decoder's name.
    pub name: String,
    /// Cases fed.
    pub cases: u64,
    /// Cases the decoder accepted.
    pub accepted: u64,
    /// Cases the decoder rejected with an error.
    pub rejected: u64,
    /// Largest single allocation seen during a decode, in bytes.
    pub largest_alloc: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "fuzz {}: {} cases, {} accepted, {} rejected, largest allocation {} B, {:.2} s",
            self.name,
            self.cases,
            self.accepted,
            self.rejected,
            self.largest_alloc,
            self.elapsed.as_secs_f64()
        )
    }
}

/// Prints the failing case if a decode panics.
struct CaseGuard<'a> {
    name: &'a str,
    case: u64,
    shape: Shape,
    input: &'a [u8],
}

impl Drop for CaseGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let hex: String = self.input.iter().map(|b| format!("{b:02x}")).collect();
            eprintln!("fuzz {}: case {} ({:?}) panicked on input {hex}", self.name, self.case, self.shape);
        }
    }
}

/// Runs [`cases`] cases against one decoder and prints (and returns) the [`Report`].
///
/// - `valid(rng, out)` writes a valid encoding into `out` (cleared before each call);
/// - `decode(input, shape)` decodes inside [`metered`] (which checks the allocation
///   bound), checks what it can (e.g. a decoded message re-encodes to the input;
///   [`Shape::Valid`] is accepted) and returns whether the decoder accepted the input.
///
/// # Panics
/// If a decode panics or fails a check, if an allocation exceeds its bound, if a case
/// made no [`metered`] call, or if [`TrackingAlloc`] is not this binary's global
/// allocator.
pub fn run(
    name: &str,
    mut valid: impl FnMut(&mut Rng, &mut Vec<u8>),
    mut decode: impl FnMut(&[u8], Shape) -> bool,
) -> Report {
    assert_tracking(name);
    let n = cases();
    let mut rng = Rng::for_name(name);
    let (mut seed, mut input) = (Vec::new(), Vec::new());
    let mut report =
        Report { name: name.to_owned(), cases: n, accepted: 0, rejected: 0, largest_alloc: 0, elapsed: Duration::ZERO };
    LARGEST.with(|l| l.set(0));
    let start = Instant::now();
    for case in 0..n {
        seed.clear();
        valid(&mut rng, &mut seed);
        let shape = make_case(&mut rng, &seed, &mut input);
        let guard = CaseGuard { name, case, shape, input: &input };
        let calls = CALLS.with(Cell::get);
        let ok = decode(&input, shape);
        assert!(CALLS.with(Cell::get) > calls, "fuzz {name}: case {case} decoded outside `metered`");
        drop(guard);
        if ok {
            report.accepted += 1;
        } else {
            report.rejected += 1;
        }
    }
    report.elapsed = start.elapsed();
    report.largest_alloc = LARGEST.with(Cell::get);
    eprintln!("{report}");
    report
}

/// Runs the decode `f` under the allocation meter: panics if one allocation it makes
/// exceeds `bound` bytes (e.g. the input's length for a decoder that copies out of it,
/// 0 for one that must not allocate). The largest seen goes into [`run`]'s report.
pub fn metered<R>(bound: usize, f: impl FnOnce() -> R) -> R {
    let (r, largest) = measure(f);
    assert!(largest <= bound, "a decode allocated {largest} B at once, bound {bound} B");
    LARGEST.with(|l| l.set(l.get().max(largest)));
    CALLS.with(|c| c.set(c.get() + 1));
    r
}

thread_local! {
    static METER: Cell<Option<usize>> = const { Cell::new(None) };
    static LARGEST: Cell<usize> = const { Cell::new(0) };
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

/// A global allocator (the system's) that records, on the thread inside [`measure`], the
/// largest single allocation request. Install it in each test binary that calls [`run`]:
/// `#[global_allocator] static A: runthrough_fuzz::TrackingAlloc = runthrough_fuzz::TrackingAlloc;`
#[derive(Debug, Clone, Copy, Default)]
pub struct TrackingAlloc;

impl TrackingAlloc {
    #[inline]
    fn note(size: usize) {
        let _ = METER.try_with(|m| {
            if let Some(max) = m.get() {
                m.set(Some(max.max(size)));
            }
        });
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// meter only reads and writes a const-initialised thread-local `Cell` (no allocation).
unsafe impl GlobalAlloc for TrackingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::note(layout.size());
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::note(new_size);
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns its result with the largest single allocation it made on this
/// thread (0 if none, or if [`TrackingAlloc`] is not installed).
pub fn measure<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let outer = METER.with(|m| m.replace(Some(0)));
    let r = f();
    let largest = METER.with(|m| m.replace(outer)).unwrap_or(0);
    if let Some(o) = outer {
        METER.with(|m| m.set(Some(o.max(largest))));
    }
    (r, largest)
}

/// Panics unless [`TrackingAlloc`] is the global allocator (else the bound is unchecked).
fn assert_tracking(name: &str) {
    let (v, seen) = measure(|| Vec::<u8>::with_capacity(4321));
    drop(std::hint::black_box(v));
    assert!(seen >= 4321, "fuzz {name}: install runthrough_fuzz::TrackingAlloc as the global allocator");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[global_allocator]
    static ALLOC: TrackingAlloc = TrackingAlloc;

    #[test]
    fn meter_sees_allocations_and_shapes_cover_everything() {
        let ((), seen) = measure(|| drop(std::hint::black_box(vec![0u8; 10_000])));
        assert!(seen >= 10_000);
        let ((), none) = measure(|| ());
        assert_eq!(none, 0);
        let mut rng = Rng::new(1);
        let valid: Vec<u8> = (0..40).collect();
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..2000 {
            let s = make_case(&mut rng, &valid, &mut out);
            match s {
                Shape::Valid => assert_eq!(out, valid),
                Shape::Truncated => assert!(out.len() < valid.len() && valid.starts_with(&out)),
                Shape::Extended => assert!(out.len() > valid.len() && out.starts_with(&valid)),
                Shape::Shifted => assert_eq!(out.len().abs_diff(valid.len()), 1),
                Shape::Flipped | Shape::Field => assert_eq!(out.len(), valid.len()),
                Shape::Random => assert!(out.len() <= 2 * valid.len() + 16),
            }
            seen.insert(s);
        }
        assert_eq!(seen.len(), 7, "every shape is produced");
    }

    #[test]
    fn run_rejects_an_allocation_sized_by_a_length_field() {
        // A decoder that trusts a u32 length: must trip the bound.
        let r = std::panic::catch_unwind(|| {
            run(
                "trusting",
                |_, out| out.extend_from_slice(&[4, 0, 0, 0, 1, 2, 3, 4]),
                |b, _| {
                    metered(b.len(), || {
                        let Some(len) = b.get(..4) else { return false };
                        let len = u32::from_le_bytes(len.try_into().unwrap()) as usize;
                        let v: Vec<u8> = Vec::with_capacity(len.min(1 << 28));
                        std::hint::black_box(v).capacity() > 0
                    })
                },
            )
        });
        assert!(r.is_err(), "a decoder allocating by an unchecked length passes");
    }
}
