//! FFI wrapper lifetimes: open fabric → domain → AV/CQ → endpoint → MR and drop the user's
//! handles in every order; children keep their parents alive, so nothing crashes and each
//! fid is closed once (after its children).
//!
//! A provider not present here is skipped (`common::skip`: a failure unless
//! `RT_EXPECTED_SKIPS` names `provider-tcp` / `provider-sockets`).

mod common;

use std::sync::Arc;

use runthrough_fabric::{
    Access, AddressVector, CompletionQueue, Domain, Endpoint, Error, Hints, InfoList, MemoryRegion, MrCache, Provider,
};

fn providers() -> Vec<Provider> {
    [Provider::Tcp, Provider::Sockets]
        .into_iter()
        .filter(|p| {
            common::pin_loopback();
            let present = !InfoList::get(&Hints::provider(p.fi_name()).loopback()).unwrap().is_empty();
            if !present {
                common::skip(&common::skip::provider(p.fi_name()), &format!("provider {p} not present"));
            }
            present
        })
        .collect()
}

/// Every permutation of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

#[test]
fn any_drop_order_of_user_handles_is_safe() {
    for p in providers() {
        for order in permutations(5) {
            let node = common::open_node(p).expect("present");
            let buf = vec![7u8; 4096];
            // SAFETY: `buf` is dropped only after every handle (the loop below takes them all).
            let mr =
                unsafe { MemoryRegion::register(&node.domain, Some(&node.ep), buf.as_ptr(), buf.len(), Access::ALL) }
                    .expect("register");
            let fabric = Arc::clone(node.domain.fabric());
            let mut handles: Vec<Option<Box<dyn std::any::Any>>> = vec![
                Some(Box::new(fabric)),
                Some(Box::new(node.domain)),
                Some(Box::new((node.av, node.cq))),
                Some(Box::new(node.ep)),
                Some(Box::new(mr)),
            ];
            for i in order {
                handles[i].take();
            }
            drop(buf);
        }
    }
}

#[test]
fn children_keep_parents_alive() {
    for p in providers() {
        let node = common::open_node(p).expect("present");
        let ep = Arc::clone(&node.ep);
        let weak_domain = Arc::downgrade(&node.domain);
        let weak_fabric = Arc::downgrade(node.domain.fabric());
        let weak_cq = Arc::downgrade(&node.cq);
        drop(node);
        // The endpoint alone keeps CQ, domain and fabric open and usable.
        assert!(weak_domain.upgrade().is_some() && weak_fabric.upgrade().is_some() && weak_cq.upgrade().is_some());
        let mut out = Vec::new();
        ep.cq().read(&mut out, 8).expect("cq still open");
        assert!(ep.name().is_ok());
        drop(ep);
        assert!(weak_domain.upgrade().is_none() && weak_fabric.upgrade().is_none() && weak_cq.upgrade().is_none());
    }
}

#[test]
fn av_and_cq_from_another_domain_are_refused() {
    for p in providers() {
        let a = common::open_node(p).expect("present");
        let b = common::open_node(p).expect("present");
        let e = Endpoint::open(&a.domain, &b.av, &a.cq).unwrap_err();
        assert!(matches!(e, Error::InvalidArg(_)), "{e}");
        let e = Endpoint::open(&a.domain, &a.av, &b.cq).unwrap_err();
        assert!(matches!(e, Error::InvalidArg(_)), "{e}");
    }
}

#[test]
fn open_close_many_times() {
    for p in providers() {
        for _ in 0..20 {
            let n = common::open_node(p).expect("present");
            let av2 = AddressVector::open(&n.domain, 4).unwrap();
            let cq2 = CompletionQueue::open(&n.domain, 0).unwrap();
            let ep2 = Endpoint::open(&n.domain, &av2, &cq2).unwrap();
            let peer = n.av.insert(&ep2.name().unwrap()).unwrap();
            n.av.remove(peer).unwrap();
            drop(n);
            drop(ep2);
            let _ = Domain::open(av2.domain().fabric()).unwrap();
        }
    }
}

#[test]
fn registration_cache_over_real_regions() {
    for p in providers() {
        let n = common::open_node(p).expect("present");
        let buf = vec![1u8; 1 << 16];
        let mut cache = MrCache::new(&n.domain, Some(&n.ep), Access::ALL, 8);
        // SAFETY: `buf` outlives the cache and every handle (all dropped before `buf`).
        let (a, b) =
            unsafe { (cache.get(buf.as_ptr(), buf.len()).unwrap(), cache.get(buf.as_ptr().add(100), 10).unwrap()) };
        assert!(Arc::ptr_eq(&a, &b), "sub-range hit");
        let ra = a.remote_access(buf.as_ptr().wrapping_add(100), 10).unwrap();
        let va = a.policy().virt_addr;
        assert_eq!(ra.addr, if va { buf.as_ptr() as u64 + 100 } else { 100 });
        assert!(a.remote_access(buf.as_ptr(), buf.len() + 1).is_err());
        assert_eq!(cache.invalidate(buf.as_ptr(), 1), 1);
        // SAFETY: as above.
        let c = unsafe { cache.get(buf.as_ptr(), buf.len()).unwrap() };
        assert!(!Arc::ptr_eq(&a, &c), "re-registered after invalidate");
        assert_eq!(cache.stats().misses, 2);
        assert_eq!(cache.stats().hits, 1);
        drop((a, b, c, cache));
        drop(buf);
    }
}

#[test]
fn getinfo_reports_attributes() {
    common::pin_loopback();
    let list = InfoList::get(&Hints::default().loopback()).unwrap();
    assert!(!list.is_empty(), "some provider supports RDM+tagged+RMA on loopback");
    for a in list.attrs() {
        assert!(a.max_msg_size > 0, "{a:?}");
        assert!(a.tag_bits() > 0);
        eprintln!(
            "{}/{} fabric={} inject={} max_msg={} mr_mode={:?} tag_bits={}",
            a.provider,
            a.domain,
            a.fabric,
            a.inject_size,
            a.max_msg_size,
            a.mr_mode,
            a.tag_bits()
        );
    }
    let (maj, min) = runthrough_fabric::runtime_version().expect("libfabric.so.1 loads");
    assert!((maj, min) >= (1, 17), "runtime {maj}.{min}");
    assert!(runthrough_fabric::header_version() >= (1, 17));
}
