//! The data layout of one element of a datatype, as a tree whose size does not grow with
//! the counts of the constructors: a sequence of parts, each either `count` runs of bytes
//! at a fixed stride or `count` copies of a nested layout at a fixed stride. A vector of
//! a billion ints is one part; pack, unpack and MPI_Get_elements walk the tree.

use std::sync::Arc;

/// A run of data bytes in one element, as iterating a [`Layout`] yields them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    /// Offset from the element's start.
    pub(crate) off: isize,
    pub(crate) len: usize,
    /// Size of the basic elements in it (for MPI_Get_elements and external32).
    pub(crate) esize: usize,
}

/// One part of a layout.
#[derive(Debug, Clone)]
pub(crate) enum Part {
    /// `count` runs of `len` bytes (basic elements of `esize` bytes each) at
    /// `off + i * stride`.
    Run { off: isize, len: usize, esize: usize, count: usize, stride: isize },
    /// `count` copies of `inner` at `off + i * stride`.
    Copies { off: isize, count: usize, stride: isize, inner: Layout },
}

#[derive(Debug, Default)]
struct Node {
    parts: Vec<Part>,
    /// Data bytes of one element.
    size: usize,
    /// Basic elements in one element.
    elems: u64,
    /// Whether the data of one element is its bytes `0..size`, in type-map order.
    seq: bool,
}

/// The layout of one element (cheap to clone: shared).
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout(Arc<Node>);

impl Layout {
    /// The data bytes of one element.
    pub(crate) fn size(&self) -> usize {
        self.0.size
    }

    /// The basic elements of one element.
    pub(crate) fn elems(&self) -> u64 {
        self.0.elems
    }

    pub(crate) fn parts(&self) -> &[Part] {
        &self.0.parts
    }

    /// One run of `len` bytes of basic elements of `esize` bytes at offset 0 (a predefined
    /// type).
    pub(crate) fn leaf(len: usize, esize: usize) -> Layout {
        let mut b = Builder::default();
        b.run(0, len, esize, 1, 0);
        b.finish().unwrap_or_default()
    }

    /// Whether the data of one element is its bytes `0..size`, in type-map order.
    #[inline]
    pub(crate) fn sequential(&self) -> bool {
        self.0.seq
    }

    fn compute_sequential(parts: &[Part], size: usize) -> bool {
        fn seq(parts: &[Part], pos: &mut isize) -> bool {
            for p in parts {
                match p {
                    Part::Run { off, len, count, stride, .. } => {
                        if *off != *pos || (*count > 1 && *stride != *len as isize) {
                            return false;
                        }
                        *pos += (*count * *len) as isize;
                    }
                    Part::Copies { off, count, stride, inner } => {
                        if *off != *pos || (*count > 1 && *stride != inner.size() as isize) {
                            return false;
                        }
                        if !inner.sequential() {
                            return false;
                        }
                        *pos += (*count * inner.size()) as isize;
                    }
                }
            }
            true
        }
        let mut pos = 0;
        seq(parts, &mut pos) && pos == size as isize
    }

    /// Calls `f(offset, len)` for every run of one element at `base`, in type-map order,
    /// until it returns false; false if it did.
    #[inline]
    pub(crate) fn walk(&self, base: isize, f: &mut impl FnMut(isize, usize) -> bool) -> bool {
        for p in self.parts() {
            match p {
                Part::Run { off, len, count, stride, .. } => {
                    let mut at = base + off;
                    for _ in 0..*count {
                        if !f(at, *len) {
                            return false;
                        }
                        at += stride;
                    }
                }
                Part::Copies { off, count, stride, inner } => {
                    let mut at = base + off;
                    for _ in 0..*count {
                        if !inner.walk(at, f) {
                            return false;
                        }
                        at += stride;
                    }
                }
            }
        }
        true
    }

    /// The basic elements in the first `bytes` (< one element's size) packed bytes of an
    /// element, and the bytes left over that do not make a whole basic element.
    pub(crate) fn partial_elements(&self, mut bytes: u64) -> (u64, u64) {
        let mut n = 0;
        for p in self.parts() {
            if bytes == 0 {
                break;
            }
            match p {
                Part::Run { len, esize, count, .. } => {
                    let (len, esize, count) = (*len as u64, (*esize).max(1) as u64, *count as u64);
                    let whole = (bytes / len).min(count);
                    n += whole * (len / esize);
                    bytes -= whole * len;
                    if whole < count {
                        // Inside one run: whole basic elements only.
                        n += bytes / esize;
                        return (n, bytes % esize);
                    }
                }
                Part::Copies { count, inner, .. } => {
                    let (size, count) = (inner.size() as u64, *count as u64);
                    if size == 0 {
                        continue;
                    }
                    let whole = (bytes / size).min(count);
                    n += whole * inner.elems();
                    bytes -= whole * size;
                    if whole < count {
                        let (m, rest) = inner.partial_elements(bytes);
                        return (n + m, rest);
                    }
                }
            }
        }
        (n, bytes)
    }
}

/// The runs of one element in type-map order: `for s in &t.segs`.
pub(crate) struct SegIter<'a> {
    /// (parts, next part, next repetition of it, base offset).
    stack: Vec<(&'a [Part], usize, usize, isize)>,
}

impl Iterator for SegIter<'_> {
    type Item = Seg;

    fn next(&mut self) -> Option<Seg> {
        loop {
            let (parts, i, j, base) = self.stack.last_mut()?;
            let Some(p) = parts.get(*i) else {
                self.stack.pop();
                continue;
            };
            match p {
                Part::Run { off, len, esize, count, stride } => {
                    if *j < *count {
                        let s = Seg { off: *base + off + *j as isize * stride, len: *len, esize: *esize };
                        *j += 1;
                        return Some(s);
                    }
                }
                Part::Copies { off, count, stride, inner } => {
                    if *j < *count {
                        let b = *base + off + *j as isize * stride;
                        *j += 1;
                        self.stack.push((inner.parts(), 0, 0, b));
                        continue;
                    }
                }
            }
            *i += 1;
            *j = 0;
        }
    }
}

impl<'a> IntoIterator for &'a Layout {
    type Item = Seg;
    type IntoIter = SegIter<'a>;

    fn into_iter(self) -> SegIter<'a> {
        SegIter { stack: vec![(self.parts(), 0, 0, 0)] }
    }
}

/// Parts of a nested layout spliced into the parent rather than nested under it, at most.
const SPLICE: usize = 16;

/// Builds a layout part by part, merging runs where it can.
#[derive(Debug, Default)]
pub(crate) struct Builder {
    parts: Vec<Part>,
    size: usize,
    elems: u64,
    overflow: bool,
}

impl Builder {
    fn add_totals(&mut self, count: usize, size: usize, elems: u64) {
        match (count.checked_mul(size), (count as u64).checked_mul(elems)) {
            (Some(s), Some(e)) => match (self.size.checked_add(s), self.elems.checked_add(e)) {
                (Some(s), Some(e)) => (self.size, self.elems) = (s, e),
                _ => self.overflow = true,
            },
            _ => self.overflow = true,
        }
    }

    /// Appends `count` runs of `len` bytes at `off + i * stride`.
    pub(crate) fn run(&mut self, off: isize, mut len: usize, esize: usize, mut count: usize, mut stride: isize) {
        if len == 0 || count == 0 {
            return;
        }
        self.add_totals(count, len, (len / esize.max(1)) as u64);
        if count > 1 && stride == len as isize {
            match len.checked_mul(count) {
                Some(l) => (len, count, stride) = (l, 1, 0),
                None => self.overflow = true,
            }
        }
        if count == 1 {
            stride = 0;
        }
        if let Some(Part::Run { off: o, len: l, esize: e, count: c, stride: s }) = self.parts.last_mut() {
            if *e == esize && count == 1 {
                if *c == 1 && *o + *l as isize == off {
                    // Touching: one longer run.
                    *l += len;
                    return;
                }
                if *l == len && *c == 1 {
                    // A second run of the same length: a strided pair.
                    (*c, *s) = (2, off - *o);
                    return;
                }
                if *l == len && *o + *c as isize * *s == off {
                    // The next run of a strided series.
                    *c += 1;
                    return;
                }
            }
        }
        self.parts.push(Part::Run { off, len, esize, count, stride });
    }

    /// Appends `count` copies of `inner` at `off + i * stride`.
    pub(crate) fn copies(&mut self, off: isize, count: usize, stride: isize, inner: &Layout) {
        if count == 0 || inner.size() == 0 {
            return;
        }
        let ip = inner.parts();
        if let [Part::Run { off: o, len, esize, count: c, stride: s }] = ip {
            if *c == 1 {
                return self.run(off + o, *len, *esize, count, stride);
            }
            if count == 1 {
                return self.run(off + o, *len, *esize, *c, *s);
            }
            if (*c as isize).checked_mul(*s) == Some(stride) {
                if let Some(n) = count.checked_mul(*c) {
                    // The copies continue the inner series.
                    return self.run(off + o, *len, *esize, n, *s);
                }
            }
        }
        if count == 1 && ip.len() <= SPLICE {
            for p in ip {
                match p {
                    Part::Run { off: o, len, esize, count: c, stride: s } => self.run(off + o, *len, *esize, *c, *s),
                    Part::Copies { off: o, count: c, stride: s, inner } => self.copies(off + o, *c, *s, inner),
                }
            }
            return;
        }
        self.add_totals(count, inner.size(), inner.elems());
        self.parts.push(Part::Copies { off, count, stride, inner: inner.clone() });
    }

    /// The layout, or `None` when its size overflowed.
    pub(crate) fn finish(self) -> Option<Layout> {
        if self.overflow {
            return None;
        }
        let seq = Layout::compute_sequential(&self.parts, self.size);
        Some(Layout(Arc::new(Node { parts: self.parts, size: self.size, elems: self.elems, seq })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn runs(l: &Layout) -> Vec<(isize, usize)> {
        l.into_iter().map(|s| (s.off, s.len)).collect()
    }

    #[test]
    fn a_vector_of_a_billion_ints_is_one_part() {
        let int = Layout::leaf(4, 4);
        let mut b = Builder::default();
        b.copies(0, 1 << 30, 8, &int);
        let l = b.finish().unwrap();
        assert_eq!(l.parts().len(), 1);
        assert_eq!(l.size(), 4 << 30);
        assert_eq!(l.elems(), 1 << 30);
        assert!(!l.sequential());
        assert_eq!(l.into_iter().take(3).map(|s| s.off).collect::<Vec<_>>(), vec![0, 8, 16]);
    }

    #[test]
    fn touching_runs_merge_and_are_sequential() {
        let int = Layout::leaf(4, 4);
        let mut b = Builder::default();
        b.copies(0, 3, 4, &int);
        b.copies(12, 1, 0, &int);
        let l = b.finish().unwrap();
        assert_eq!(runs(&l), vec![(0, 16)]);
        assert!(l.sequential());
    }

    #[test]
    fn nested_copies_walk_in_type_map_order() {
        // Two runs of 2 ints 16 bytes apart, three times 100 bytes apart, downwards.
        let int = Layout::leaf(4, 4);
        let mut b = Builder::default();
        b.copies(0, 2, 4, &int);
        b.copies(16, 2, 4, &int);
        let inner = b.finish().unwrap();
        let mut o = Builder::default();
        o.copies(0, 3, -100, &inner);
        let l = o.finish().unwrap();
        assert_eq!(runs(&l), vec![(0, 8), (16, 8), (-100, 8), (-84, 8), (-200, 8), (-184, 8)]);
        let mut walked = Vec::new();
        l.walk(1000, &mut |off, len| {
            walked.push((off - 1000, len));
            true
        });
        assert_eq!(walked, runs(&l));
        assert_eq!((l.size(), l.elems()), (48, 12));
    }

    #[test]
    fn partial_elements_count_whole_basic_elements() {
        // A (double, int) pair: two basic elements.
        let mut b = Builder::default();
        b.run(0, 8, 8, 1, 0);
        b.run(8, 4, 4, 1, 0);
        let pair = b.finish().unwrap();
        assert_eq!(pair.elems(), 2);
        assert_eq!(pair.partial_elements(8), (1, 0));
        assert_eq!(pair.partial_elements(10), (1, 2));
        assert_eq!(pair.partial_elements(4), (0, 4));
        let mut v = Builder::default();
        v.copies(0, 1000, 32, &pair);
        let v = v.finish().unwrap();
        assert_eq!(v.partial_elements(12 * 7 + 8), (15, 0));
    }

    #[test]
    fn overflow_is_reported() {
        let int = Layout::leaf(4, 4);
        let mut b = Builder::default();
        b.copies(0, usize::MAX / 2, 4, &int);
        assert!(b.finish().is_none());
    }
}
