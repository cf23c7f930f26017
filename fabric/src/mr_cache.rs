//! Registration cache keyed by address range, with explicit invalidation (T1).
//!
//! Parts:
//! - [`Registrar`]: how to register a range (the real one wraps [`MemoryRegion::register`];
//!   tests use a counting fake, so the cache logic is tested without a NIC).
//! - [`RegCache`]: lookups hit when an existing registration *covers* the requested range;
//!   a miss registers exactly the requested range (overlapping entries may coexist);
//!   [`RegCache::invalidate`] drops every entry overlapping a range — call it when memory is
//!   freed or reused (the cache cannot see `free`); a bounded size evicts the least
//!   recently used entry. Handles are `Arc`s, so an evicted or invalidated registration
//!   stays open until in-flight operations that hold it finish.
//! - [`MrCache`]: the cache over real memory regions of one domain (and endpoint).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use crate::domain::Domain;
use crate::ep::Endpoint;
use crate::error::Result;
use crate::mr::{Access, MemoryRegion};

/// Registers address ranges for a [`RegCache`].
pub trait Registrar {
    /// The registration handle.
    type Handle;
    /// Register `len` bytes at `addr`.
    ///
    /// # Errors
    /// Whatever the registration fails with.
    fn register(&mut self, addr: usize, len: usize) -> Result<Self::Handle>;
}

struct Entry<H> {
    handle: Arc<H>,
    last_use: u64,
}

/// Hit/miss counters of a [`RegCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheStats {
    /// Lookups served from the cache.
    pub hits: u64,
    /// Lookups that registered.
    pub misses: u64,
    /// Entries evicted for capacity.
    pub evictions: u64,
    /// Entries removed by [`RegCache::invalidate`].
    pub invalidations: u64,
}

/// A registration cache over any [`Registrar`].
pub struct RegCache<R: Registrar> {
    registrar: R,
    /// Keyed by (start, end) of the registered range.
    entries: BTreeMap<(usize, usize), Entry<R::Handle>>,
    capacity: usize,
    clock: u64,
    stats: CacheStats,
}

impl<R: Registrar> fmt::Debug for RegCache<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegCache")
            .field("entries", &self.entries.len())
            .field("capacity", &self.capacity)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<R: Registrar> RegCache<R> {
    /// A cache holding at most `capacity` registrations (at least 1).
    pub fn new(registrar: R, capacity: usize) -> Self {
        RegCache {
            registrar,
            entries: BTreeMap::new(),
            capacity: capacity.max(1),
            clock: 0,
            stats: CacheStats::default(),
        }
    }

    /// A registration covering `addr..addr+len`: cached if one covers it, else new.
    ///
    /// # Errors
    /// The registrar's error on a miss.
    pub fn get(&mut self, addr: usize, len: usize) -> Result<Arc<R::Handle>> {
        self.clock += 1;
        let end = addr.saturating_add(len);
        // Covering entries start at or before `addr`; among them take one ending at or after `end`.
        let hit = self.entries.range_mut(..=(addr, usize::MAX)).rev().find(|((_, e), _)| *e >= end);
        if let Some((_, entry)) = hit {
            entry.last_use = self.clock;
            self.stats.hits += 1;
            return Ok(Arc::clone(&entry.handle));
        }
        self.stats.misses += 1;
        let handle = Arc::new(self.registrar.register(addr, len)?);
        if self.entries.len() >= self.capacity {
            self.evict_lru();
        }
        self.entries.insert((addr, end), Entry { handle: Arc::clone(&handle), last_use: self.clock });
        Ok(handle)
    }

    /// Drop every registration overlapping `addr..addr+len` (memory freed or reused).
    /// Returns how many were removed.
    pub fn invalidate(&mut self, addr: usize, len: usize) -> usize {
        let end = addr.saturating_add(len);
        let doomed: Vec<(usize, usize)> =
            self.entries.range(..(end, 0)).filter(|((s, e), _)| *s < end && *e > addr).map(|(k, _)| *k).collect();
        for k in &doomed {
            self.entries.remove(k);
        }
        self.stats.invalidations += doomed.len() as u64;
        doomed.len()
    }

    /// Drop everything.
    pub fn clear(&mut self) {
        self.stats.invalidations += self.entries.len() as u64;
        self.entries.clear();
    }

    /// Number of cached registrations.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The registrar.
    pub fn registrar(&self) -> &R {
        &self.registrar
    }

    fn evict_lru(&mut self) {
        if let Some(k) = self.entries.iter().min_by_key(|(_, e)| e.last_use).map(|(k, _)| *k) {
            self.entries.remove(&k);
            self.stats.evictions += 1;
        }
    }
}

/// The real registrar: one domain, the endpoint for `FI_MR_ENDPOINT`, fixed access rights.
#[derive(Debug)]
pub struct DomainRegistrar {
    domain: Arc<Domain>,
    ep: Option<Arc<Endpoint>>,
    access: Access,
}

impl Registrar for DomainRegistrar {
    type Handle = MemoryRegion;
    fn register(&mut self, addr: usize, len: usize) -> Result<MemoryRegion> {
        // SAFETY: `MrCache::get`'s contract (memory valid until invalidated) is forwarded here.
        unsafe { MemoryRegion::register(&self.domain, self.ep.as_ref(), addr as *const u8, len, self.access) }
    }
}

/// A registration cache of real memory regions.
#[derive(Debug)]
pub struct MrCache {
    inner: RegCache<DomainRegistrar>,
}

impl MrCache {
    /// A cache for `domain` (binding to `ep` under `FI_MR_ENDPOINT`) with `access` rights.
    pub fn new(domain: &Arc<Domain>, ep: Option<&Arc<Endpoint>>, access: Access, capacity: usize) -> Self {
        let registrar = DomainRegistrar { domain: Arc::clone(domain), ep: ep.cloned(), access };
        MrCache { inner: RegCache::new(registrar, capacity) }
    }

    /// A registration covering `addr..addr+len`.
    ///
    /// # Safety
    /// The memory must stay allocated until [`MrCache::invalidate`] is called for it (before
    /// freeing or unmapping it) and every returned handle for it is dropped.
    ///
    /// # Errors
    /// The registration error on a miss.
    pub unsafe fn get(&mut self, addr: *const u8, len: usize) -> Result<Arc<MemoryRegion>> {
        self.inner.get(addr as usize, len)
    }

    /// Drop cached registrations overlapping `addr..addr+len`; returns how many.
    pub fn invalidate(&mut self, addr: *const u8, len: usize) -> usize {
        self.inner.invalidate(addr as usize, len)
    }

    /// Counters.
    pub fn stats(&self) -> CacheStats {
        self.inner.stats()
    }

    /// Number of cached registrations.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Counting {
        calls: Vec<(usize, usize)>,
    }

    impl Registrar for Counting {
        type Handle = (usize, usize);
        fn register(&mut self, addr: usize, len: usize) -> Result<(usize, usize)> {
            self.calls.push((addr, len));
            Ok((addr, len))
        }
    }

    #[test]
    fn hit_when_covered_miss_otherwise() {
        let mut c = RegCache::new(Counting::default(), 8);
        let a = c.get(0x1000, 0x1000).unwrap();
        let b = c.get(0x1100, 0x100).unwrap(); // inside: hit
        assert!(Arc::ptr_eq(&a, &b));
        let d = c.get(0x1000, 0x1000).unwrap(); // exact: hit
        assert!(Arc::ptr_eq(&a, &d));
        c.get(0x3000, 0x10).unwrap(); // disjoint: miss
        assert_eq!(c.stats(), CacheStats { hits: 2, misses: 2, ..CacheStats::default() });
        assert_eq!(c.registrar().calls, vec![(0x1000, 0x1000), (0x3000, 0x10)]);
    }

    #[test]
    fn overlapping_ranges_register_separately_and_invalidate_together() {
        let mut c = RegCache::new(Counting::default(), 8);
        c.get(0x1000, 0x1000).unwrap();
        // Overlaps the first but is not covered by it: a new registration.
        let o = c.get(0x1800, 0x1000).unwrap();
        assert_eq!(*o, (0x1800, 0x1000));
        assert_eq!(c.len(), 2);
        // Covered by the second only: hit on it.
        let h = c.get(0x2000, 0x100).unwrap();
        assert!(Arc::ptr_eq(&o, &h));
        // A range touching both overlapping entries removes both; an adjacent one is kept.
        c.get(0x2800, 0x100).unwrap();
        assert_eq!(c.invalidate(0x1f00, 0x200), 2);
        assert_eq!(c.len(), 1);
        // Ranges ending exactly where another starts do not overlap.
        assert_eq!(c.invalidate(0x2700, 0x100), 0);
        assert_eq!(c.invalidate(0x2800, 1), 1);
        assert!(c.is_empty());
    }

    #[test]
    fn invalidate_then_miss_and_handles_stay_alive() {
        let mut c = RegCache::new(Counting::default(), 8);
        let a = c.get(0x1000, 0x100).unwrap();
        assert_eq!(c.invalidate(0x1000, 0x100), 1);
        // The caller's in-flight handle survives invalidation.
        assert_eq!(*a, (0x1000, 0x100));
        c.get(0x1000, 0x100).unwrap();
        assert_eq!(c.stats().misses, 2);
        assert_eq!(c.stats().invalidations, 1);
    }

    #[test]
    fn capacity_evicts_least_recently_used() {
        let mut c = RegCache::new(Counting::default(), 2);
        c.get(0x1000, 0x10).unwrap();
        c.get(0x2000, 0x10).unwrap();
        c.get(0x1000, 0x10).unwrap(); // touch the first
        c.get(0x3000, 0x10).unwrap(); // evicts 0x2000
        assert_eq!(c.stats().evictions, 1);
        c.get(0x1000, 0x10).unwrap();
        assert_eq!(c.stats().hits, 2);
        c.get(0x2000, 0x10).unwrap();
        assert_eq!(c.stats().misses, 4);
    }
}
