//! A file view (MPI-4.1 §14.3): the file seen from byte `disp` as a sequence of
//! filetypes, each tile `extent` bytes after the previous one; the data of a tile is the
//! filetype's runs, in order. A position (in etypes) names a byte of that data stream;
//! [`View::pieces`] turns a stream range into file byte ranges.

use crate::{Class, Error, Result};

/// A view: the displacement, the etype's size and the filetype's runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    disp: u64,
    etype: u64,
    /// The filetype's runs (offset from the tile's start, length), ascending, coalesced.
    runs: Vec<(u64, u64)>,
    /// Data bytes before each run in a tile.
    before: Vec<u64>,
    /// Data bytes in a tile.
    tile: u64,
    /// Bytes from one tile to the next.
    extent: u64,
}

impl View {
    /// The default view at `disp` (every byte, in etypes of `etype` bytes).
    pub fn contiguous(disp: u64, etype: u64) -> View {
        View { disp, etype: etype.max(1), runs: vec![(0, 1)], before: vec![0], tile: 1, extent: 1 }
    }

    /// A view of filetype `runs` (type-map order, offsets from the filetype's origin) and
    /// `extent`, in etypes of `etype` bytes. Errs (`MPI_ERR_ARG`) when the runs go back or
    /// overlap (MPI asks monotonically non-decreasing displacements), fall outside
    /// `0..extent`, hold no data, or their total is not a multiple of the etype.
    pub fn new(disp: u64, etype: u64, runs: impl IntoIterator<Item = (i64, u64)>, extent: i64) -> Result<View> {
        let bad = |why: String| Err(Error::new(Class::Arg, format!("file view: {why}")));
        if etype == 0 {
            return bad("the etype holds no data".into());
        }
        let mut out: Vec<(u64, u64)> = Vec::new();
        let mut end = 0u64;
        for (off, len) in runs {
            if len == 0 {
                continue;
            }
            if off < 0 {
                return bad(format!("a filetype displacement is negative ({off})"));
            }
            let off = off as u64;
            if off < end {
                return bad(format!("filetype displacements go back or overlap (at {off})"));
            }
            match out.last_mut() {
                Some(last) if last.0 + last.1 == off => last.1 += len,
                _ => out.push((off, len)),
            }
            end = off + len;
        }
        let tile: u64 = out.iter().map(|r| r.1).sum();
        if tile == 0 {
            return bad("the filetype holds no data".into());
        }
        if extent <= 0 || end > extent as u64 {
            return bad(format!("the filetype's data ends at {end}, past its extent {extent}"));
        }
        if !tile.is_multiple_of(etype) {
            return bad(format!("the etype ({etype} bytes) does not divide the filetype ({tile} bytes)"));
        }
        let extent = extent as u64;
        if out.len() == 1 && out[0] == (0, extent) {
            return Ok(View::contiguous(disp, etype));
        }
        let before = out
            .iter()
            .scan(0u64, |acc, r| {
                let b = *acc;
                *acc += r.1;
                Some(b)
            })
            .collect();
        Ok(View { disp, etype, runs: out, before, tile, extent })
    }

    /// The displacement.
    pub fn disp(&self) -> u64 {
        self.disp
    }

    /// The etype's size in bytes.
    pub fn etype(&self) -> u64 {
        self.etype
    }

    /// Whether the view's data is every byte from `disp` on.
    pub fn is_contiguous(&self) -> bool {
        self.tile == self.extent
    }

    /// The file byte of stream byte `at`.
    fn file_byte(&self, at: u64) -> u64 {
        if self.is_contiguous() {
            return self.disp + at;
        }
        let (t, within) = (at / self.tile, at % self.tile);
        let i = self.before.partition_point(|&b| b <= within) - 1;
        self.disp + t * self.extent + self.runs[i].0 + (within - self.before[i])
    }

    /// The absolute file byte of position `pos` (etypes), MPI_File_get_byte_offset.
    pub fn byte_offset(&self, pos: u64) -> u64 {
        self.file_byte(pos * self.etype)
    }

    /// The stream bytes before file byte `byte`: how much of the view a file of `byte`
    /// bytes holds.
    pub fn data_before(&self, byte: u64) -> u64 {
        if byte <= self.disp {
            return 0;
        }
        let rel = byte - self.disp;
        if self.is_contiguous() {
            return rel;
        }
        let (t, within) = (rel / self.extent, rel % self.extent);
        let mut d = t * self.tile;
        for (r, b) in self.runs.iter().zip(&self.before) {
            if within <= r.0 {
                break;
            }
            d = t * self.tile + b + (within - r.0).min(r.1);
        }
        d
    }

    /// The position (etypes) of the first stream byte at or after file byte `byte` — the
    /// view's end when the file is `byte` bytes long (MPI_SEEK_END).
    pub fn position_at(&self, byte: u64) -> u64 {
        self.data_before(byte).div_ceil(self.etype)
    }

    /// Calls `f(file_offset, len, stream_offset)` for the file ranges of stream bytes
    /// `at..at + n`, in stream order, adjacent ranges merged (`stream_offset` counts from
    /// `at`).
    pub fn pieces(&self, at: u64, n: u64, mut f: impl FnMut(u64, u64, u64)) {
        if n == 0 {
            return;
        }
        if self.is_contiguous() {
            return f(self.disp + at, n, 0);
        }
        let (mut t, within) = (at / self.tile, at % self.tile);
        let mut i = self.before.partition_point(|&b| b <= within) - 1;
        let mut skip = within - self.before[i];
        let mut done = 0u64;
        let mut cur: Option<(u64, u64, u64)> = None;
        while done < n {
            let (off, len) = self.runs[i];
            let take = (len - skip).min(n - done);
            let file = self.disp + t * self.extent + off + skip;
            cur = match cur {
                Some((fo, l, so)) if fo + l == file => Some((fo, l + take, so)),
                Some((fo, l, so)) => {
                    f(fo, l, so);
                    Some((file, take, done))
                }
                None => Some((file, take, done)),
            };
            done += take;
            skip = 0;
            i += 1;
            if i == self.runs.len() {
                i = 0;
                t += 1;
            }
        }
        if let Some((fo, l, so)) = cur {
            f(fo, l, so);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::View;
    use proptest::prelude::*;

    /// Every stream byte's file offset, one by one (the reference).
    fn slow(v: &View, at: u64, n: u64) -> Vec<u64> {
        (at..at + n).map(|b| v.file_byte(b)).collect()
    }

    fn fast(v: &View, at: u64, n: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut expect_stream = 0;
        v.pieces(at, n, |fo, l, so| {
            assert_eq!(so, expect_stream, "stream offsets in order, no gap");
            expect_stream += l;
            out.extend(fo..fo + l);
        });
        out
    }

    #[test]
    fn a_vector_view_maps_like_the_standard_says() {
        // disp 100, etype 4 bytes, filetype: 2 ints at 0 and 1 int at 12, extent 20.
        let v = View::new(100, 4, [(0, 8), (12, 4)], 20).unwrap();
        assert_eq!(v.byte_offset(0), 100);
        assert_eq!(v.byte_offset(2), 112);
        assert_eq!(v.byte_offset(3), 120);
        assert_eq!(v.byte_offset(5), 132);
        let mut got = Vec::new();
        v.pieces(4, 16, |fo, l, so| got.push((fo, l, so)));
        assert_eq!(got, vec![(104, 4, 0), (112, 4, 4), (120, 8, 8)]); // a gap at 116..120
        assert_eq!(v.position_at(100), 0);
        assert_eq!(v.position_at(108), 2);
        assert_eq!(v.position_at(116), 3);
        assert_eq!(v.position_at(121), 4); // one byte into the next tile's first etype
    }

    #[test]
    fn bad_views_are_refused_with_arg() {
        for (runs, ext) in [
            (vec![(4, 4), (0, 4)], 8),  // goes back
            (vec![(0, 8), (4, 4)], 16), // overlaps
            (vec![(0, 4), (8, 4)], 10), // past its extent
            (vec![(0, 6)], 8),          // etype 4 does not divide 6
            (vec![(-4, 4)], 8),         // negative
            (vec![], 8),                // no data
        ] {
            assert_eq!(View::new(0, 4, runs.clone(), ext).unwrap_err().class, crate::Class::Arg, "{runs:?} {ext}");
        }
        assert!(View::new(0, 4, [(0, 8)], 8).unwrap().is_contiguous());
    }

    proptest! {
        #[test]
        fn pieces_agree_with_byte_by_byte(
            gaps in proptest::collection::vec((0u64..5, 1u64..6), 1..5),
            tail in 0u64..4, disp in 0u64..50, at in 0u64..60, n in 0u64..80,
        ) {
            let mut off = 0i64;
            let mut runs = Vec::new();
            for (g, l) in &gaps {
                off += *g as i64;
                runs.push((off, *l));
                off += *l as i64;
            }
            let v = View::new(disp, 1, runs, off + tail as i64).unwrap();
            prop_assert_eq!(fast(&v, at, n), slow(&v, at, n));
            // position_at inverts byte_offset.
            for p in 0..20 {
                prop_assert_eq!(v.position_at(v.byte_offset(p)), p);
            }
        }
    }
}
