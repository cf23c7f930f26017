//! The engine's own work for one 8 B round trip over the shared-memory transport, in one
//! thread: two engines on one segment take turns (send, then the other receives and
//! answers), so every call completes without waiting and an instruction counter sees
//! only the path a message takes (`valgrind --tool=callgrind --toggle-collect=*round_trips*
//! target/release/examples/pingpong_instr`). It checks each message's bytes.
//! `cargo run --release -p runthrough-engine --example pingpong_instr -- [N]`.

use runthrough_engine::handle::{recv, send};
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::shm::ShmTransport;
use runthrough_engine::transport::AnyTransport;
use runthrough_engine::SendTarget;
use runthrough_engine::{Config, ContextId, Engine, Rank, Tag};
use runthrough_shm::{Layout, Segment};

const CTX: ContextId = ContextId(0);

#[inline(never)]
fn round_trips(e: &[BiasedMutex<Engine>], n: usize) {
    let mut out = [0u8; 8];
    let mut back = [0u8; 8];
    for i in 0..n {
        out.copy_from_slice(&(i as u64).to_le_bytes());
        for (from, to) in [(0usize, 1usize), (1, 0)] {
            send(
                &e[from],
                SendTarget { ctx: CTX, src: from as u32, dest: to as u32, peer: Rank(to as u32), tag: Tag(1) },
                &out,
            )
            .expect("send");
            let pat = Pattern { ctx: CTX, src: Some(from as u32), tag: Some(Tag(1)) };
            let st = recv(&e[to], pat, Some(Rank(from as u32)), &mut back).expect("recv");
            assert!(st.len == 8 && back == out, "round trip {i} arrived altered");
        }
    }
}

/// What a blocking wait repeats while nothing arrives.
#[inline(never)]
fn empty_polls(e: &BiasedMutex<Engine>, n: usize) -> usize {
    let mut events = 0;
    for _ in 0..n {
        events += e.lock().progress();
    }
    assert_eq!(events, 0, "nothing was sent");
    n
}

fn main() {
    let n: usize = std::env::args().nth(1).map_or(100_000, |a| a.parse().expect("N"));
    let name = format!("/rt-pingpong-instr-{}", std::process::id());
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, Layout { nranks: 2, ring_bytes: 256 * 1024, bulk_bytes: 0 }).expect("segment");
    Segment::unlink(&name).expect("unlink");
    let pid = std::process::id() as i32;
    let e: Vec<BiasedMutex<Engine>> = (0..2u32)
        .map(|r| {
            let t = ShmTransport::new(&seg, Rank(r), vec![pid, pid]).expect("transport");
            let mut e = Engine::new(Rank(r), 2, AnyTransport::Shm(t), Config::default());
            e.register_comm(CTX, &[Rank(0), Rank(1)]);
            BiasedMutex::new(e)
        })
        .collect();
    round_trips(&e, 1000);
    let t = std::time::Instant::now();
    round_trips(&e, n);
    println!("{n} round trips in one thread: {:.1} ns each", t.elapsed().as_nanos() as f64 / n as f64);
    let t = std::time::Instant::now();
    let polls = empty_polls(&e[0], 10 * n);
    println!(
        "{polls} empty polls (lock, progress, unlock): {:.1} ns each",
        t.elapsed().as_nanos() as f64 / polls as f64
    );
}
