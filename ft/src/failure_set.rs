//! The set of ranks known failed, with an epoch that grows with every new failure.
//!
//! Epochs let a communicator remember "the failures I have recognised" as a single
//! number and compare it cheaply with the current state (R8, R14).

/// Ranks known failed in a job of `size` ranks. Monotone: a rank never leaves the set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureSet {
    words: Vec<u64>,
    size: u32,
    order: Vec<u32>,
}

impl FailureSet {
    /// An empty set for a job of `size` ranks.
    pub fn new(size: u32) -> Self {
        Self { words: vec![0; (size as usize).div_ceil(64)], size, order: Vec::new() }
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
        let (w, b) = ((rank / 64) as usize, rank % 64);
        if self.words[w] & (1 << b) != 0 {
            return false;
        }
        self.words[w] |= 1 << b;
        self.order.push(rank);
        true
    }

    /// Whether `rank` is known failed.
    pub fn contains(&self, rank: u32) -> bool {
        rank < self.size && self.words[(rank / 64) as usize] & (1 << (rank % 64)) != 0
    }

    /// The epoch: how many failures are known. Grows by one with each new failure.
    pub fn epoch(&self) -> u32 {
        self.order.len() as u32
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
}
