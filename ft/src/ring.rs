//! The order of the detector's ring: which rank watches which (R42, node loss).
//!
//! The ring detector ([`crate::detector`]) makes each rank observe its predecessor on a
//! ring. In rank order, a job placed *by slot* (a host's ranks numbered one after the
//! other, Slurm's default block distribution, `rtrun --map-by slot`) has each host's
//! ranks next to each other on the ring; when the host dies, one observer on the next
//! host declares its predecessor after δ, then starts a fresh window on the one before,
//! and so on: 64 ranks a host take 64·δ. A [`Ring`] built by [`Ring::interleaving`]
//! orders the ring so that consecutive positions are on different hosts wherever the
//! host sizes allow it, so the ranks of a dead host are observed by ranks of live hosts,
//! each by its own observer, and all their windows run out together: one δ for the node.
//!
//! **Interleaving.** Two orders are built and the one whose longest run of one host's
//! ranks (cyclically) is shorter is kept: *greedy* — each position takes the next rank of
//! the host with the most ranks left that is not the previous position's host (ties: the
//! host seen first), so no two neighbours share a host while no host holds more than half
//! of what is left (hosts of equal size are dealt out round-robin); and *spread* — the
//! `i`-th rank of a host of `c` gets the key `(2i + 1) / 2c`, its place within its host
//! spread over `(0, 1)`, and the ranks are sorted by key, then host, then rank, which
//! spaces one host holding most of the job evenly (runs of `⌈c / (n − c)⌉` when it holds
//! `c` of `n`: the others cut the cycle into `n − c` gaps). Within a host, ring order is
//! rank order. A job placed round-robin by host (`rtrun`'s default) gets rank order back,
//! and so does a job on one host.
//!
//! Every rank must build the same ring (the same `host_of` list, as every rank reads it
//! from the bootstrap's key-value exchange), or observers and observed would not match.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;

/// The order of the ranks on the detector's ring: rank order, or a permutation shared by
/// every detector of a simulation (cheap to clone). See the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Ring {
    /// `0 → 1 → … → n−1 → 0`.
    #[default]
    RankOrder,
    /// A permutation: `order[p]` is the rank at position `p`, `position[r]` the position of
    /// rank `r`.
    Permuted {
        /// Position → rank.
        order: Arc<[u32]>,
        /// Rank → position.
        position: Arc<[u32]>,
    },
}

impl Ring {
    /// The ring that interleaves hosts: `host_of[r]` names rank `r`'s host (any numbering).
    /// Rank order when that is already the interleaved order (one host, round-robin
    /// placement).
    ///
    /// # Panics
    /// If the job has more than `u32::MAX` ranks (a local programming error).
    pub fn interleaving(host_of: &[u32]) -> Ring {
        let n = u32::try_from(host_of.len()).expect("ranks fit in u32");
        // Each host's ranks in rank order, hosts in order of first appearance.
        let mut first_seen: HashMap<u32, usize> = HashMap::new();
        let mut members: Vec<Vec<u32>> = Vec::new();
        for (r, &h) in (0..n).zip(host_of) {
            let k = *first_seen.entry(h).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[k].push(r);
        }
        let spread = by_spread(&members, n);
        let greedy = by_greedy(&members, n);
        let order = if longest_run(&greedy, host_of) < longest_run(&spread, host_of) { greedy } else { spread };
        if order.iter().enumerate().all(|(p, &r)| p as u32 == r) {
            return Ring::RankOrder;
        }
        let mut position = vec![0u32; order.len()];
        for (p, &r) in order.iter().enumerate() {
            position[r as usize] = p as u32;
        }
        Ring::Permuted { order: order.into(), position: position.into() }
    }

    /// The rank at ring position `p` (of a ring of `n` ranks; `p < n`).
    pub fn rank_at(&self, p: u32) -> u32 {
        match self {
            Ring::RankOrder => p,
            Ring::Permuted { order, .. } => order[p as usize],
        }
    }

    /// The ring position of rank `r`.
    pub fn position(&self, r: u32) -> u32 {
        match self {
            Ring::RankOrder => r,
            Ring::Permuted { position, .. } => position[r as usize],
        }
    }

    /// Whether this ring can serve a job of `n` ranks (rank order serves any).
    pub fn fits(&self, n: u32) -> bool {
        match self {
            Ring::RankOrder => true,
            Ring::Permuted { order, .. } => order.len() == n as usize,
        }
    }

    /// The longest run of consecutive ring positions (cyclically) whose ranks share a host:
    /// how many detector timeouts the loss of that host takes at most.
    pub fn longest_host_run(&self, host_of: &[u32]) -> usize {
        let order: Vec<u32> = (0..host_of.len() as u32).map(|p| self.rank_at(p)).collect();
        longest_run(&order, host_of)
    }
}

/// The longest cyclic run of one host's ranks in `order`.
fn longest_run(order: &[u32], host_of: &[u32]) -> usize {
    let n = order.len();
    let host = |p: usize| host_of[order[p % n] as usize];
    if n == 0 {
        return 0;
    }
    // Start just after a host change, so no run wraps; none: one host, one run.
    let Some(start) = (0..n).find(|&p| host(p) != host(p + n - 1)) else { return n };
    let (mut best, mut run) = (0, 0);
    for k in 0..n {
        run = if k > 0 && host(start + k) == host(start + k + n - 1) { run + 1 } else { 1 };
        best = best.max(run);
    }
    best
}

/// Every rank keyed by its place within its host, `(2i + 1) / 2c` for the `i`-th of `c`,
/// sorted by key, then host, then rank: spreads one large host evenly.
fn by_spread(members: &[Vec<u32>], n: u32) -> Vec<u32> {
    let mut keyed: Vec<(u64, u64, usize, u32)> = Vec::with_capacity(n as usize);
    for (k, m) in members.iter().enumerate() {
        let c = m.len() as u64;
        for (i, &r) in m.iter().enumerate() {
            keyed.push((2 * i as u64 + 1, c, k, r));
        }
    }
    // (2i_a+1)/(2c_a) against (2i_b+1)/(2c_b), exactly.
    keyed.sort_by(|a, b| (a.0 * b.1).cmp(&(b.0 * a.1)).then(a.2.cmp(&b.2)).then(a.3.cmp(&b.3)));
    keyed.into_iter().map(|x| x.3).collect()
}

/// At each position the next rank of the host with the most ranks left that is not the
/// previous position's host (ties: the host seen first): no two neighbours share a host
/// while no host holds more than half of what is left.
fn by_greedy(members: &[Vec<u32>], n: u32) -> Vec<u32> {
    let mut heap: BinaryHeap<(usize, Reverse<usize>)> =
        members.iter().enumerate().map(|(k, m)| (m.len(), Reverse(k))).collect();
    let mut taken = vec![0usize; members.len()];
    let mut order = Vec::with_capacity(n as usize);
    let mut held: Option<(usize, Reverse<usize>)> = None;
    while let Some((left, Reverse(k))) = heap.pop() {
        order.push(members[k][taken[k]]);
        taken[k] += 1;
        if let Some(h) = held.take() {
            heap.push(h);
        }
        if left > 1 {
            held = Some((left - 1, Reverse(k)));
        }
    }
    if let Some((_, Reverse(k))) = held {
        // Only this host is left: its remaining ranks follow one another.
        order.extend_from_slice(&members[k][taken[k]..]);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(hosts: u32, per: u32) -> Vec<u32> {
        (0..hosts * per).map(|r| r / per).collect()
    }

    #[test]
    fn one_host_and_round_robin_placement_keep_rank_order() {
        assert_eq!(Ring::interleaving(&[0; 8]), Ring::RankOrder);
        let rr: Vec<u32> = (0..12).map(|r| r % 3).collect();
        assert_eq!(Ring::interleaving(&rr), Ring::RankOrder);
        assert_eq!(Ring::interleaving(&[]), Ring::RankOrder);
    }

    #[test]
    fn block_placement_is_dealt_round_robin() {
        let hosts = block(3, 4);
        let ring = Ring::interleaving(&hosts);
        let order: Vec<u32> = (0..12).map(|p| ring.rank_at(p)).collect();
        assert_eq!(order, vec![0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11]);
        for r in 0..12 {
            assert_eq!(ring.rank_at(ring.position(r)), r);
        }
        assert_eq!(ring.longest_host_run(&hosts), 1);
        assert_eq!(Ring::RankOrder.longest_host_run(&hosts), 4);
        assert!(ring.fits(12) && !ring.fits(13));
    }

    #[test]
    fn a_large_host_is_spread_as_evenly_as_the_sizes_allow() {
        // One host of 6 and one of 2: two gaps on the cycle, runs of ⌈6 / 2⌉ = 3.
        let hosts = [0, 0, 0, 0, 0, 0, 1, 1];
        let ring = Ring::interleaving(&hosts);
        assert_eq!(ring.longest_host_run(&hosts), 3);
        // Uneven sizes, shuffled placement: every rank exactly once, no host runs longer
        // than the bound for the largest host.
        let hosts: Vec<u32> = (0..40u32).map(|r| [0, 1, 1, 2, 2, 2, 3, 3][(r * 7 % 8) as usize]).collect();
        let ring = Ring::interleaving(&hosts);
        let mut seen: Vec<u32> = (0..40).map(|p| ring.rank_at(p)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        let largest = (0..4).map(|h| hosts.iter().filter(|&&x| x == h).count()).max().unwrap();
        assert!(largest <= 20);
        assert_eq!(ring.longest_host_run(&hosts), 1, "no host holds more than half");
        // Within a host, ring order keeps rank order.
        for h in 0..4 {
            let pos: Vec<u32> = (0..40).filter(|&r| hosts[r as usize] == h).map(|r| ring.position(r)).collect();
            assert!(pos.windows(2).all(|w| w[0] < w[1]), "host {h}: {pos:?}");
        }
    }

    #[test]
    fn a_host_holding_most_ranks_has_the_shortest_possible_runs() {
        for (big, small) in [(10u32, 3u32), (7, 1), (64, 16), (5, 4)] {
            let mut hosts = vec![0u32; big as usize];
            hosts.extend(std::iter::repeat_n(1, small as usize));
            let ring = Ring::interleaving(&hosts);
            let bound = big.div_ceil(small) as usize;
            assert_eq!(ring.longest_host_run(&hosts), bound, "{big} + {small}");
        }
    }

    #[test]
    fn random_placements_get_a_permutation_with_short_runs() {
        let mut rng = crate::sim::SplitMix64::new(42);
        for _ in 0..500 {
            let hosts_n = rng.range(1, 9) as u32;
            let n = rng.range(1, 200) as usize;
            let hosts: Vec<u32> = (0..n).map(|_| 100 + rng.range(0, u64::from(hosts_n) - 1) as u32).collect();
            let ring = Ring::interleaving(&hosts);
            assert!(ring.fits(n as u32));
            let mut seen: Vec<u32> = (0..n as u32).map(|p| ring.rank_at(p)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..n as u32).collect::<Vec<_>>());
            let mut sizes: HashMap<u32, usize> = HashMap::new();
            for &h in &hosts {
                *sizes.entry(h).or_default() += 1;
            }
            let c = *sizes.values().max().unwrap();
            let bound = if c == n { n } else { c.div_ceil(n - c).max(2) };
            let run = ring.longest_host_run(&hosts);
            assert!(run <= bound, "{hosts:?}: run {run} > {bound}");
            if 2 * c <= n {
                assert!(run <= 2, "{hosts:?}: run {run}");
            }
        }
    }
}
