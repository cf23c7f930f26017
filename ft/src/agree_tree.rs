//! The shape of the agreement's tree ([`crate::agree`]): a k-ary tree over participant
//! indices in which every subtree is a contiguous range, so that a node's place, its
//! parent and its children follow from `(root, n, k)` by arithmetic, and a report from a
//! node stands for its whole range.
//!
//! The tree of ballot `b` ([`Tree::new`]`(b, n, k)`) spans the indices `b..n` (every lower
//! index is known failed by whoever coordinates `b`). Node `lo` with range `lo..hi` has
//! the range `lo + 1..hi` split into at most `k` contiguous chunks of nearly equal sizes
//! (the larger ones first); each chunk is a child's range and the chunk's first index is
//! the child. Depth is about `log_k(n − b)`: 4 for 2^20 indices at `k = 32`.
//!
//! Failures are handled by skipping, not by rebuilding: a node's *live parent* is its
//! nearest ancestor not known failed, its *live children* are its children with every
//! failed one replaced by that one's live children (ERA's re-attachment to the nearest
//! live ancestor), and a node's range is *covered* when every child has answered or is
//! failed with its own range covered.

/// Fan-out of the agreement tree unless [`crate::Participants::with_fanout`] says
/// otherwise: with 32, up to 33 participants form a star (the root's children are
/// everybody), and 2^20 a tree of depth 4 in which the busiest process sends 66 messages.
pub const DEFAULT_FANOUT: u32 = 32;

/// The tree of one ballot: indices `root..n`, fan-out `k` (at least 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tree {
    root: u32,
    n: u32,
    k: u32,
}

impl Tree {
    /// The tree over `root..n` with fan-out `k` (values below 2 are taken as 2).
    pub fn new(root: u32, n: u32, k: u32) -> Tree {
        Tree { root, n, k: k.max(2) }
    }

    /// The root (the ballot).
    pub fn root(&self) -> u32 {
        self.root
    }

    /// The chunk of `lo + 1..hi` holding `x` (`lo < x < hi`).
    fn chunk_of(&self, lo: u32, hi: u32, x: u32) -> (u32, u32) {
        let first = lo + 1;
        let m = hi - first;
        let k = self.k.min(m);
        let (q, rem) = (m / k, m % k);
        let off = x - first;
        let big = rem * (q + 1);
        if off < big {
            let i = off / (q + 1);
            (first + i * (q + 1), first + (i + 1) * (q + 1))
        } else {
            let s = first + big + (off - big) / q * q;
            (s, s + q)
        }
    }

    /// Calls `visit(lo, hi)` for each node on the way from the root down to `x`, `x`
    /// included; `false` if `x` is not in the tree.
    fn descend(&self, x: u32, mut visit: impl FnMut(u32, u32)) -> bool {
        if x < self.root || x >= self.n {
            return false;
        }
        let (mut lo, mut hi) = (self.root, self.n);
        visit(lo, hi);
        while lo != x {
            (lo, hi) = self.chunk_of(lo, hi, x);
            visit(lo, hi);
        }
        true
    }

    /// `x`'s range `x..hi`, or `None` if `x` is not in the tree.
    pub fn range(&self, x: u32) -> Option<(u32, u32)> {
        let mut r = None;
        self.descend(x, |lo, hi| r = Some((lo, hi)));
        r
    }

    /// Whether `y` lies in `x`'s subtree, `y ≠ x`.
    pub fn is_below(&self, x: u32, y: u32) -> bool {
        y != x && self.range(x).is_some_and(|(lo, hi)| lo <= y && y < hi)
    }

    /// The nearest ancestor of `x` that `failed` does not hold; `None` for the root, for
    /// indices outside the tree, and when every ancestor is failed.
    pub fn live_parent(&self, x: u32, failed: impl Fn(u32) -> bool) -> Option<u32> {
        let mut path = Vec::new();
        if !self.descend(x, |lo, _| path.push(lo)) {
            return None;
        }
        path.pop();
        path.into_iter().rev().find(|&a| !failed(a))
    }

    /// The children's ranges of the node with range `lo..hi`.
    fn children(&self, lo: u32, hi: u32) -> impl Iterator<Item = (u32, u32)> {
        let first = lo + 1;
        let m = hi.saturating_sub(first);
        let k = self.k.min(m.max(1));
        let (q, rem) = (m / k, m % k);
        (0..k).filter(move |_| m > 0).map(move |i| {
            let s = first + i * q + i.min(rem);
            (s, s + q + u32::from(i < rem))
        })
    }

    /// Appends `x`'s live children to `out`: its children, each failed one replaced by
    /// its own live children.
    pub fn live_children(&self, x: u32, failed: &impl Fn(u32) -> bool, out: &mut Vec<u32>) {
        if let Some((lo, hi)) = self.range(x) {
            self.live_below(lo, hi, failed, out);
        }
    }

    fn live_below(&self, lo: u32, hi: u32, failed: &impl Fn(u32) -> bool, out: &mut Vec<u32>) {
        for (c, e) in self.children(lo, hi) {
            if failed(c) {
                self.live_below(c, e, failed, out);
            } else {
                out.push(c);
            }
        }
    }

    /// Whether `x`'s range is covered: every child has `answered`, or is `failed` and
    /// has its own range covered. A leaf's range is always covered.
    pub fn covered(&self, x: u32, answered: &impl Fn(u32) -> bool, failed: &impl Fn(u32) -> bool) -> bool {
        self.range(x).is_some_and(|(lo, hi)| self.covered_below(lo, hi, answered, failed))
    }

    fn covered_below(&self, lo: u32, hi: u32, answered: &impl Fn(u32) -> bool, failed: &impl Fn(u32) -> bool) -> bool {
        self.children(lo, hi).all(|(c, e)| answered(c) || (failed(c) && self.covered_below(c, e, answered, failed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parent of every node by brute force over the ranges.
    fn check_shape(root: u32, n: u32, k: u32) {
        let t = Tree::new(root, n, k);
        let mut seen = vec![0u32; n as usize];
        let mut stack = vec![(root, n)];
        let mut depth_max = 0;
        let mut depth = vec![0u32; n as usize];
        while let Some((lo, hi)) = stack.pop() {
            seen[lo as usize] += 1;
            assert_eq!(t.range(lo), Some((lo, hi)), "root={root} n={n} k={k} node {lo}");
            let kids: Vec<_> = t.children(lo, hi).collect();
            assert!(kids.len() <= k.max(2) as usize);
            // The chunks tile lo + 1..hi in order, sizes differ by at most one.
            let mut next = lo + 1;
            for &(c, e) in &kids {
                assert_eq!(c, next);
                assert!(e > c);
                next = e;
                depth[c as usize] = depth[lo as usize] + 1;
                depth_max = depth_max.max(depth[c as usize]);
                assert_eq!(t.live_parent(c, |_| false), Some(lo));
                stack.push((c, e));
            }
            assert_eq!(next, hi);
            let sizes: Vec<u32> = kids.iter().map(|(c, e)| e - c).collect();
            if let (Some(a), Some(b)) = (sizes.iter().max(), sizes.iter().min()) {
                assert!(a - b <= 1, "{sizes:?}");
            }
        }
        for (i, &s) in seen.iter().enumerate() {
            assert_eq!(s, u32::from(i as u32 >= root), "node {i} seen {s} times");
        }
        assert_eq!(t.live_parent(root, |_| false), None);
        assert_eq!(t.range(n), None);
        if root > 0 {
            assert_eq!(t.range(root - 1), None);
        }
        let _ = depth_max;
    }

    #[test]
    fn ranges_tile_and_parents_match_children() {
        for n in 1..=70 {
            for root in [0, 1, n / 2, n - 1].into_iter().filter(|&r| r < n) {
                for k in [1, 2, 3, 4, 7, 32] {
                    check_shape(root, n, k);
                }
            }
        }
        check_shape(0, 100_000, 32);
    }

    #[test]
    fn depth_of_a_million_at_fanout_32_is_four() {
        let t = Tree::new(0, 1 << 20, DEFAULT_FANOUT);
        let mut deepest = 0;
        for x in [1u32, 2, 1000, 65_535, (1 << 20) - 1, (1 << 20) - 2, 777_777] {
            let mut d = 0;
            t.descend(x, |_, _| d += 1);
            deepest = deepest.max(d - 1);
        }
        assert_eq!(deepest, 4);
        let mut kids = Vec::new();
        t.live_children(0, &|_| false, &mut kids);
        assert_eq!(kids.len(), 32);
    }

    #[test]
    fn failed_nodes_are_skipped_both_ways() {
        // 0..15 at k = 2: 0 → {1..8, 8..15}; 1 → {2..5, 5..8}; 2 → {3, 4}.
        let t = Tree::new(0, 15, 2);
        assert_eq!(t.range(1), Some((1, 8)));
        assert_eq!(t.range(2), Some((2, 5)));
        let failed = |x: u32| x == 1 || x == 2;
        assert_eq!(t.live_parent(3, failed), Some(0));
        assert_eq!(t.live_parent(5, failed), Some(0));
        let mut kids = Vec::new();
        t.live_children(0, &failed, &mut kids);
        assert_eq!(kids, vec![3, 4, 5, 8]);
        assert!(t.is_below(0, 4) && t.is_below(1, 7) && !t.is_below(1, 8) && !t.is_below(3, 3));
        // Covered: 8 answered; 1 and 2 failed, so 3, 4 and 5 must have answered.
        let answered = |x: u32| [3, 4, 8].contains(&x);
        assert!(!t.covered(0, &answered, &failed));
        let answered = |x: u32| [3, 4, 5, 8].contains(&x);
        assert!(t.covered(0, &answered, &failed));
        // A leaf is covered at once; the root with nobody failed needs its 2 children.
        assert!(t.covered(14, &|_| false, &|_| false));
        assert!(t.covered(0, &|x| x == 1 || x == 8, &|_| false));
        // Every ancestor failed: no live parent.
        assert_eq!(t.live_parent(3, |x| x < 3), None);
    }
}
