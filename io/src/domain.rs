//! Collective buffering (ROMIO's two-phase I/O): the bytes a collective call touches,
//! `lo..hi` over every process, are cut into one file domain per aggregator; every
//! process sends each aggregator its pieces in that aggregator's domain, and the
//! aggregator writes what it received as few large requests (or reads its domain's
//! pieces once and sends each process its bytes back).
//!
//! The wire form of a process's pieces for one aggregator ([`encode`]/[`decode`]): the
//! piece count, then (file offset, length) pairs, all little-endian `u64`, then the data
//! of the pieces in order (writes only).

use std::ops::Range;

/// The file domains of one collective call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domains {
    lo: u64,
    hi: u64,
    each: u64,
    count: usize,
}

impl Domains {
    /// `count` domains (at least 1) over `lo..hi`, each a multiple of `align` bytes
    /// (the last one shorter).
    pub fn new(lo: u64, hi: u64, count: usize, align: u64) -> Domains {
        let count = count.max(1);
        let span = hi.saturating_sub(lo);
        let align = align.max(1);
        let each = span.div_ceil(count as u64).div_ceil(align).max(1) * align;
        Domains { lo, hi, each, count }
    }

    /// How many domains.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The bytes of domain `d`.
    pub fn range(&self, d: usize) -> Range<u64> {
        let a = (self.lo + d as u64 * self.each).min(self.hi);
        a..(a + self.each).min(self.hi)
    }

    /// Calls `f(domain, file_offset, len, stream_offset)` for piece `(off, len, so)` cut
    /// at domain boundaries.
    pub fn split(&self, off: u64, len: u64, so: u64, mut f: impl FnMut(usize, u64, u64, u64)) {
        let (mut at, end) = (off, off + len);
        while at < end {
            let d = (((at - self.lo) / self.each) as usize).min(self.count - 1);
            let stop = self.range(d).end.max(at + 1).min(end);
            let stop = if d == self.count - 1 { end } else { stop };
            f(d, at, stop - at, so + (at - off));
            at = stop;
        }
    }
}

/// Appends to `out` the wire form of `pieces` (`(file_offset, len)`), and, for a write,
/// their data taken from `data` at each piece's `stream_offset` (`with_data`).
pub fn encode(pieces: &[(u64, u64, u64)], data: Option<&[u8]>, out: &mut Vec<u8>) {
    out.extend_from_slice(&(pieces.len() as u64).to_le_bytes());
    for &(fo, l, _) in pieces {
        out.extend_from_slice(&fo.to_le_bytes());
        out.extend_from_slice(&l.to_le_bytes());
    }
    if let Some(d) = data {
        for &(_, l, so) in pieces {
            out.extend_from_slice(&d[so as usize..(so + l) as usize]);
        }
    }
}

/// The pieces of a message made by [`encode`], and where their data starts in it; None
/// when it is malformed.
pub fn decode(msg: &[u8]) -> Option<(Vec<(u64, u64)>, usize)> {
    let word = |i: usize| msg.get(8 * i..8 * i + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
    let n = usize::try_from(word(0)?).ok()?;
    let mut pieces = Vec::with_capacity(n.min(msg.len() / 16));
    for k in 0..n {
        pieces.push((word(1 + 2 * k)?, word(2 + 2 * k)?));
    }
    Some((pieces, 8 + 16 * n))
}

/// Sorts `pieces` (`(file_offset, len, index)`) by offset (then index) and returns the
/// maximal contiguous runs they cover (`file_offset, len`). Overlapping pieces (erroneous
/// in one collective write) merge into one run; copying them in the sorted order lets
/// the later index's bytes win.
pub fn runs(pieces: &mut [(u64, u64, usize)]) -> Vec<(u64, u64)> {
    pieces.sort_by_key(|p| (p.0, p.2));
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(fo, l, _) in pieces.iter() {
        match out.last_mut() {
            Some(r) if fo <= r.0 + r.1 => r.1 = r.1.max(fo + l - r.0),
            _ => out.push((fo, l)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_cover_the_range_once_and_split_pieces_at_their_edges() {
        let d = Domains::new(10, 110, 3, 8);
        assert_eq!(d.range(0), 10..50);
        assert_eq!(d.range(1), 50..90);
        assert_eq!(d.range(2), 90..110);
        let mut got = Vec::new();
        d.split(40, 60, 5, |k, o, l, s| got.push((k, o, l, s)));
        assert_eq!(got, vec![(0, 40, 10, 5), (1, 50, 40, 15), (2, 90, 10, 55)]);
        let one = Domains::new(0, 5, 4, 1);
        let mut n = 0;
        one.split(0, 5, 0, |_, _, l, _| n += l);
        assert_eq!(n, 5);
    }

    #[test]
    fn messages_round_trip_and_runs_merge() {
        let data: Vec<u8> = (0..20).collect();
        let mut m = Vec::new();
        encode(&[(100, 4, 0), (200, 2, 10)], Some(&data), &mut m);
        let (p, at) = decode(&m).unwrap();
        assert_eq!(p, vec![(100, 4), (200, 2)]);
        assert_eq!(&m[at..], &[0, 1, 2, 3, 10, 11]);
        assert!(decode(&m[..20]).is_none());
        let mut ps = vec![(8, 4, 0), (0, 8, 1), (20, 1, 2), (12, 3, 3)];
        assert_eq!(runs(&mut ps), vec![(0, 15), (20, 1)]);
    }
}
