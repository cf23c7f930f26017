//! Segment lifecycle across real processes: create / open / unlink, 0600 mode, record
//! exchange through the rings, and rejection of garbage, truncated, foreign-version and
//! duplicate segments.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use runthrough_shm::numa::Topology;
use runthrough_shm::segment::default_name;
use runthrough_shm::{Error, Layout, PushError, RingRx, RingTx, Segment};

const CHILD_ENV: &str = "RT_SHM_SEGMENT_CHILD";

fn name(tag: &str) -> String {
    default_name(&format!("test-{}-{tag}", std::process::id()))
}

fn shm_path(name: &str) -> String {
    format!("/dev/shm{name}")
}

fn layout2() -> Layout {
    Layout { nranks: 2, ring_bytes: 8192, bulk_bytes: 0 }
}

fn push(tx: &mut RingTx, head: &[u8], body: &[u8], deadline: Instant) {
    loop {
        match tx.try_push(head, body) {
            Ok(()) => return,
            Err(PushError::Full) => {
                assert!(Instant::now() < deadline, "push timed out");
                std::thread::yield_now();
            }
            Err(e) => panic!("push: {e}"),
        }
    }
}

fn try_recv(rx: &mut RingRx) -> Option<Vec<u8>> {
    rx.try_recv(|r| r.to_vec()).map(|r| r.expect("ring corrupt"))
}

fn body(seq: u32) -> Vec<u8> {
    let len = (seq as usize * 37) % 1500;
    (0..len).map(|i| (i as u32 ^ seq) as u8).collect()
}

/// Child side of `two_processes_exchange_records`: rank 1 echoes every record back to
/// rank 0 until it gets `STOP`. Runs only when spawned by the parent.
#[test]
fn child_main() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (seg_name, parent) = spec.split_once(':').unwrap();
    let seg = Segment::open(seg_name, Duration::from_secs(20)).expect("child open");
    assert_eq!(seg.layout(), layout2());
    assert_eq!(seg.creator_pid(), parent.parse::<i32>().unwrap());
    assert_ne!(seg.creator_pid(), std::process::id() as i32);
    assert!(!seg.place_inbound(1, &Topology::detect()).is_failed());
    let mut rx = seg.ring_rx(0, 1).unwrap();
    let mut tx = seg.ring_tx(1, 0).unwrap();
    drop(seg); // handles keep the mapping alive
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let Some(rec) = try_recv(&mut rx) else {
            assert!(Instant::now() < deadline, "child timed out");
            std::thread::yield_now();
            continue;
        };
        push(&mut tx, b"echo", &rec, deadline);
        if rec == b"STOP" {
            return;
        }
    }
}

#[test]
fn two_processes_exchange_records() {
    let name = name("xproc");
    let _ = Segment::unlink(&name);
    // Start the child first: open() must wait for the segment to be created.
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["child_main", "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, format!("{name}:{}", std::process::id()))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let seg = Segment::create(&name, layout2()).unwrap();
    assert_eq!(seg.name(), name);
    let mode = fs::metadata(shm_path(&name)).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "segment mode");
    assert!(!seg.place_inbound(0, &Topology::detect()).is_failed());
    let mut tx = seg.ring_tx(0, 1).unwrap();
    let mut rx = seg.ring_rx(1, 0).unwrap();

    let deadline = Instant::now() + Duration::from_secs(60);
    const N: u32 = 20_000;
    let (mut sent, mut got) = (0u32, 0u32);
    while got < N {
        // Keep up to 8 records in flight.
        while sent < N && sent - got < 8 {
            push(&mut tx, &sent.to_le_bytes(), &body(sent), deadline);
            sent += 1;
        }
        match try_recv(&mut rx) {
            Some(rec) => {
                assert_eq!(&rec[..4], b"echo");
                assert_eq!(&rec[4..8], got.to_le_bytes(), "order");
                assert_eq!(&rec[8..], body(got), "payload of {got}");
                got += 1;
            }
            None => {
                assert!(Instant::now() < deadline, "parent timed out at {got}");
                std::thread::yield_now();
            }
        }
    }
    push(&mut tx, b"STOP", &[], deadline);
    let stop = loop {
        if let Some(r) = try_recv(&mut rx) {
            break r;
        }
        assert!(Instant::now() < deadline);
        std::thread::yield_now();
    };
    assert_eq!(stop, b"echoSTOP");
    assert!(child.wait().unwrap().success(), "child failed");
    Segment::unlink(&name).unwrap();
    assert!(fs::metadata(shm_path(&name)).is_err());
}

#[test]
fn create_existing_fails_and_unlink_is_idempotent() {
    let name = name("dup");
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, layout2()).unwrap();
    match Segment::create(&name, layout2()) {
        Err(Error::Io { op, source }) => {
            assert_eq!(op, "shm_open");
            assert_eq!(source.kind(), std::io::ErrorKind::AlreadyExists);
        }
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    Segment::unlink(&name).unwrap();
    Segment::unlink(&name).unwrap();
    // The mapping outlives the name.
    let mut tx = seg.ring_tx(0, 0).unwrap();
    let mut rx = seg.ring_rx(0, 0).unwrap();
    tx.try_push(b"self", b"-send").unwrap();
    assert_eq!(try_recv(&mut rx).unwrap(), b"self-send");
    assert!(matches!(Segment::unlink("bad name"), Err(Error::InvalidArgument(_))));
}

#[test]
fn open_missing_times_out() {
    let t = Instant::now();
    let r = Segment::open(&name("missing"), Duration::from_millis(60));
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");
    assert!(t.elapsed() >= Duration::from_millis(60));
}

#[test]
fn open_rejects_garbage_and_truncated() {
    let garbage = name("garbage");
    let mut bytes = vec![0u8; 16384];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3] | 1;
    }
    fs::write(shm_path(&garbage), &bytes).unwrap();
    let r = Segment::open(&garbage, Duration::from_millis(100));
    assert!(matches!(r, Err(Error::BadSegment(_))), "{r:?}");

    let small = name("small");
    fs::write(shm_path(&small), b"tiny").unwrap();
    let r = Segment::open(&small, Duration::from_millis(50));
    assert!(matches!(r, Err(Error::BadSegment(_))), "{r:?}");

    // All zeros: looks like a creator that never finished.
    let zeros = name("zeros");
    fs::write(shm_path(&zeros), vec![0u8; 8192]).unwrap();
    let r = Segment::open(&zeros, Duration::from_millis(50));
    assert!(matches!(r, Err(Error::Timeout(_))), "{r:?}");

    for n in [garbage, small, zeros] {
        Segment::unlink(&n).unwrap();
    }
}

#[test]
fn open_rejects_other_version_and_bad_geometry() {
    let name = name("version");
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, layout2()).unwrap();
    let file = fs::OpenOptions::new().write(true).open(shm_path(&name)).unwrap();
    // Header: magic u64 @0, version u32 @8, nranks u32 @12.
    file.write_at(&99u32.to_le_bytes(), 8).unwrap();
    match Segment::open(&name, Duration::from_millis(50)) {
        Err(Error::Version { found, expected }) => {
            assert_eq!(found, 99);
            assert_eq!(expected, runthrough_shm::segment::VERSION);
        }
        other => panic!("expected Version, got {other:?}"),
    }
    file.write_at(&runthrough_shm::segment::VERSION.to_le_bytes(), 8).unwrap();
    file.write_at(&3u32.to_le_bytes(), 12).unwrap();
    let r = Segment::open(&name, Duration::from_millis(50));
    assert!(matches!(r, Err(Error::BadSegment(_))), "{r:?}");
    file.write_at(&2u32.to_le_bytes(), 12).unwrap();
    let ok = Segment::open(&name, Duration::from_millis(50)).unwrap();
    assert_eq!(ok.layout(), seg.layout());
    // Truncate below the layout's size.
    file.set_len(8192).unwrap();
    let r = Segment::open(&name, Duration::from_millis(50));
    assert!(matches!(r, Err(Error::BadSegment(_))), "{r:?}");
    drop(file);
    Segment::unlink(&name).unwrap();
    let _ = std::io::stderr().flush();
}

#[test]
fn ring_handles_are_checked() {
    let name = name("handles");
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, layout2()).unwrap();
    Segment::unlink(&name).unwrap();
    assert!(matches!(seg.ring_tx(2, 0), Err(Error::RankOutOfRange { rank: 2, nranks: 2 })));
    assert!(matches!(seg.ring_rx(0, 7), Err(Error::RankOutOfRange { rank: 7, nranks: 2 })));
    let tx = seg.ring_tx(0, 1).unwrap();
    assert!(matches!(seg.ring_tx(0, 1), Err(Error::InvalidArgument(_))));
    let _rx = seg.ring_rx(0, 1).unwrap();
    assert!(matches!(seg.ring_rx(0, 1), Err(Error::InvalidArgument(_))));
    drop(tx);
    let mut tx = seg.ring_tx(0, 1).unwrap();
    // Handles outlive the segment.
    drop(seg);
    tx.try_push(b"x", b"").unwrap();
    fn assert_send<T: Send>() {}
    assert_send::<Segment>();
    assert_send::<RingTx>();
    assert_send::<RingRx>();
}

#[test]
fn bad_layouts_and_names_are_rejected() {
    let r = Segment::create(&name("badlayout"), Layout { nranks: 2, ring_bytes: 1000, bulk_bytes: 0 });
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
    let r = Segment::create("no-slash", layout2());
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}
