//! The set of ranks known failed, with an epoch that grows with every new failure.
//!
//! Epochs let a communicator remember "the failures I have recognised" as a single
//! number and compare it cheaply with the current state (R8, R14).
//!
//! Representation: a bitmap for small jobs; for large jobs a sorted list until the list
//! would outgrow the bitmap, so that a simulator can hold one set per rank of a
//! 65,536-rank job without allocating a 8 KiB bitmap in each.

/// Jobs up to this many ranks always use the bitmap (at most 64 words).
const DENSE_ALWAYS_UP_TO: u32 = 4096;

/// Ranks known failed in a job of `size` ranks. Monotone: a rank never leaves the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureSet {
    /// Bitmap of failed ranks; empty while the set is sparse.
    words: Vec<u64>,
    /// Failed ranks in ascending order; used (and kept) only while `words` is empty.
    sorted: Vec<u32>,
    size: u32,
    order: Vec<u32>,
}

impl FailureSet {
    /// An empty set for a job of `size` ranks.
    pub fn new(size: u32) -> Self {
        let words = if size <= DENSE_ALWAYS_UP_TO { vec![0; (size as usize).div_ceil(64)] } else { Vec::new() };
        Self { words, sorted: Vec::new(), size, order: Vec::new() }
    }

    fn is_dense(&self) -> bool {
        self.size <= DENSE_ALWAYS_UP_TO || !self.words.is_empty()
    }

    /// Number of ranks in the job.
    pub fn job_size(&self) -> u32 {
        self.size
    }

    /// Marks `rank` failed. Returns `true` if it was not known before; ranks outside
    /// the job are ignored and return `false`.
    pub fn insert(&mut self, rank: u32) -> bool {
        if rank >= self.size {
            return false;
        }
        if self.is_dense() {
            let (w, b) = ((rank / 64) as usize, rank % 64);
            if self.words[w] & (1 << b) != 0 {
                return false;
            }
            self.words[w] |= 1 << b;
        } else {
            match self.sorted.binary_search(&rank) {
                Ok(_) => return false,
                Err(at) => self.sorted.insert(at, rank),
            }
            // Switch to the bitmap once the list would be larger than it.
            let bitmap_words = (self.size as usize).div_ceil(64);
            if self.sorted.len() * 4 > bitmap_words * 8 {
                self.words = vec![0; bitmap_words];
                for &r in &self.sorted {
                    self.words[(r / 64) as usize] |= 1 << (r % 64);
                }
                self.sorted = Vec::new();
            }
        }
        self.order.push(rank);
        true
    }

    /// Whether `rank` is known failed.
    pub fn contains(&self, rank: u32) -> bool {
        if rank >= self.size {
            return false;
        }
        if self.is_dense() {
            self.words[(rank / 64) as usize] & (1 << (rank % 64)) != 0
        } else {
            self.sorted.binary_search(&rank).is_ok()
        }
    }

    /// The epoch: how many failures are known. Grows by one with each new failure.
    pub fn epoch(&self) -> u32 {
        self.order.len() as u32
    }

    /// Whether no failure is known.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Failed ranks in the order they became known.
    pub fn in_order(&self) -> &[u32] {
        &self.order
    }

    /// Failed ranks learnt after `epoch` (i.e. since the set had `epoch` members).
    pub fn since(&self, epoch: u32) -> &[u32] {
        &self.order[(epoch as usize).min(self.order.len())..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_is_idempotent_and_grows_epoch() {
        let mut s = FailureSet::new(130);
        assert!(s.insert(129));
        assert!(!s.insert(129));
        assert!(s.insert(3));
        assert!(!s.insert(130), "out of range is ignored");
        assert_eq!(s.epoch(), 2);
        assert!(s.contains(3) && s.contains(129) && !s.contains(4));
        assert_eq!(s.since(1), &[3]);
        assert_eq!(s.in_order(), &[129, 3]);
    }

    #[test]
    fn large_job_switches_from_list_to_bitmap_transparently() {
        let size = 10_000;
        let mut s = FailureSet::new(size);
        assert!(s.words.is_empty(), "large jobs start sparse");
        let ranks: Vec<u32> = (0..800).map(|i| (i * 7919) % size).collect();
        for (i, &r) in ranks.iter().enumerate() {
            assert!(s.insert(r));
            assert!(!s.insert(r));
            assert_eq!(s.epoch(), i as u32 + 1);
        }
        assert!(!s.words.is_empty(), "switched to the bitmap");
        for r in 0..size {
            assert_eq!(s.contains(r), ranks.contains(&r), "rank {r}");
        }
        assert_eq!(s.in_order(), &ranks[..]);
        assert!(!s.contains(size) && !s.insert(size));
    }
}
