//! NUMA detection / placement on this machine, and pinning policies.

use std::time::Duration;

use runthrough_shm::numa::{Placement, Topology};
use runthrough_shm::pin::{bind, BindPolicy};
use runthrough_shm::segment::default_name;
use runthrough_shm::{Error, Layout, Segment};

#[test]
fn detect_and_describe() {
    let t = Topology::detect();
    assert!(!t.is_fallback(), "hwloc should work here: {}", t.describe());
    assert!(t.numa_nodes() >= 1);
    assert!(t.pus() >= 1 && t.cores() >= 1);
    let d = t.describe();
    if t.numa_nodes() == 1 {
        assert!(d.starts_with("1 NUMA node (single-node machine"), "{d}");
        assert!(t.current_node().is_some());
    } else {
        assert!(d.contains("NUMA nodes"), "{d}");
    }
    eprintln!("{d}; current node {:?}", t.current_node());
}

#[test]
fn place_inbound_keeps_data_and_does_not_fail() {
    let name = default_name(&format!("test-{}-numa", std::process::id()));
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, Layout { nranks: 3, ring_bytes: 4096, bulk_bytes: 0 }).unwrap();
    let peer = Segment::open(&name, Duration::from_secs(1)).unwrap();
    Segment::unlink(&name).unwrap();
    let mut tx = seg.ring_tx(2, 1).unwrap();
    tx.try_push(b"before", b" placement").unwrap();
    let topo = Topology::detect();
    let p = peer.place_inbound(1, &topo);
    assert!(!p.is_failed(), "{p}");
    if topo.numa_nodes() == 1 {
        assert_eq!(p, Placement::SingleNode);
    }
    for me in [0, 2] {
        assert!(!seg.place_inbound(me, &topo).is_failed());
    }
    assert!(seg.place_inbound(3, &topo).is_failed());
    let mut rx = peer.ring_rx(2, 1).unwrap();
    let got = rx.try_recv(|r| r.to_vec()).unwrap().unwrap();
    assert_eq!(got, b"before placement");
}

#[test]
fn bind_policies() {
    assert_eq!("none".parse::<BindPolicy>().unwrap(), BindPolicy::None);
    assert_eq!("core".parse::<BindPolicy>().unwrap(), BindPolicy::Core);
    assert_eq!("numa".parse::<BindPolicy>().unwrap(), BindPolicy::Numa);
    for bad in ["", "Core", "socket", "core "] {
        match bad.parse::<BindPolicy>() {
            Err(Error::BadBindPolicy(s)) => assert_eq!(s, bad),
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    assert_eq!(BindPolicy::Core.to_string(), "core");

    // Bind in a scratch thread so the harness's threads keep their affinity.
    std::thread::spawn(|| {
        let allowed: Vec<usize> = core_affinity::get_core_ids().unwrap().iter().map(|c| c.id).collect();
        assert_eq!(bind(BindPolicy::None, 0).unwrap(), None);
        assert_eq!(bind(BindPolicy::Numa, 0).unwrap(), None);
        let core = bind(BindPolicy::Core, 1).unwrap().expect("a core");
        assert_eq!(core, allowed[1 % allowed.len()]);
        let now: Vec<usize> = core_affinity::get_core_ids().unwrap().iter().map(|c| c.id).collect();
        assert_eq!(now, vec![core], "affinity is now that single core");
    })
    .join()
    .unwrap();
}
