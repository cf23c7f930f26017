//! Whole-node faults (T4, R32; used by `tests/cluster.rs`): every rank exchanges a
//! numbered stream with every other rank, round after round, while the test kills,
//! pauses or cuts off a node (`docker kill`, `docker pause`, `docker network
//! disconnect`) or slows the network (`tc netem`).
//!
//! `rtrun ... node_fault ROUNDS [PAUSE_MS [SECS]]`: ROUNDS rounds (default 2000), PAUSE_MS
//! milliseconds of sleep between rounds (default 1); with SECS, the ranks stop earlier
//! once SECS seconds have passed, deciding together every 50 rounds (`agree`, R29). In each round a rank sends its
//! round number to every peer it does not know failed and receives one from each; a
//! receive that fails with `RankFailStop` marks the peer failed here, at the wall-clock
//! time printed as `seen_us` (the first such peer; `last_us` the last one: a node's loss
//! seen as one event has them close; the test compares it with the time of the fault: the
//! containers share the host's clock). Every message must be the next number from its
//! sender (nothing lost, duplicated or reordered between ranks that both go on).
//!
//! At the end each survivor validates the world (the failed group agreed by all
//! survivors, R19) and prints
//! `node_fault: ok rank R rounds=K failed=[..] local=[..] seen_us=T last_us=T received=N`
//! where `failed` is the agreed group and `local` what this rank saw itself.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runthrough::{Error, ErrorMode};

const STREAM: i32 = 9;

fn now_us() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros())
}

fn fail(rank: usize, what: &str) -> ! {
    eprintln!("node_fault: rank {rank}: {what}");
    std::process::exit(3);
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let rounds: u64 = args.next().and_then(|a| a.parse().ok()).unwrap_or(2000);
    let pause = Duration::from_millis(args.next().and_then(|a| a.parse().ok()).unwrap_or(1));
    let secs: Option<f64> = args.next().and_then(|a| a.parse().ok());
    let start = std::time::Instant::now();
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    // The world may start with ranks failed in start-up (R31).
    let mut dead: Vec<bool> = vec![false; n];
    for r in world.group_failed().world_ranks() {
        dead[r] = true;
    }
    let mut next = vec![0u64; n];
    let mut seen_us = 0u128;
    let mut last_us = 0u128;
    let mut received = 0u64;
    let mut done = rounds;
    for round in 0..rounds {
        if let Some(secs) = secs.filter(|_| round % 50 == 0 && round > 0) {
            let more = i32::from(start.elapsed().as_secs_f64() < secs);
            if world.agree(more)? == 0 {
                done = round;
                break;
            }
        }
        let mut sends = Vec::with_capacity(n);
        let mut recvs = Vec::with_capacity(n);
        for p in (0..n).filter(|&p| p != me && !dead[p]) {
            sends.push(world.isend_owned(vec![round], p, STREAM)?);
            recvs.push((p, world.irecv_owned(vec![u64::MAX], p, STREAM)?));
        }
        for (p, r) in recvs {
            match r.wait() {
                (v, Ok(_)) => {
                    if v[0] != next[p] {
                        fail(me, &format!("from rank {p}: expected message {}, got {}", next[p], v[0]));
                    }
                    next[p] += 1;
                    received += 1;
                }
                (_, Err(Error::RankFailStop { rank })) if rank as usize == p => {
                    dead[p] = true;
                    last_us = now_us();
                    if seen_us == 0 {
                        seen_us = last_us;
                    }
                }
                (_, Err(e)) => fail(me, &format!("receive from rank {p} in round {round}: {e}")),
            }
        }
        for s in sends {
            match s.wait() {
                (_, Ok(_)) | (_, Err(Error::RankFailStop { .. })) => {}
                (_, Err(e)) => fail(me, &format!("send in round {round}: {e}")),
            }
        }
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
    let local: Vec<usize> = (0..n).filter(|&p| dead[p]).collect();
    let agreed = world.validate()?.world_ranks();
    // A peer this rank saw fail must be in the agreed group; the agreed group may hold
    // more (a rank that failed after this one's last round with it).
    if let Some(p) = local.iter().find(|p| !agreed.contains(p)) {
        fail(me, &format!("saw rank {p} fail, but the agreed failed group is {agreed:?}"));
    }
    // Between survivors the streams are complete: every survivor sent `rounds` to me.
    for p in (0..n).filter(|p| *p != me && !agreed.contains(p)) {
        if next[p] != done {
            fail(me, &format!("from surviving rank {p}: {} of {done} messages", next[p]));
        }
    }
    println!(
        "node_fault: ok rank {me} rounds={done} failed={agreed:?} local={local:?} seen_us={seen_us} last_us={last_us} received={received}"
    );
    rt.finalize()
}
