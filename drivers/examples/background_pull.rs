//! The progress thread moves long receives while the application computes (used by
//! `tests/progress_thread.rs`): rank 0 sends `COUNT` messages of 1 MiB to rank 1; rank 1
//! posts their receives, sleeps `SLEEP_MS` without calling into the library, then tests
//! the *last* receive once. A progress call pulls rendezvous until it copied about 1 MiB
//! (one of these messages); the progress thread makes up to `BACKGROUND_PULL_ROUNDS` such
//! calls a tick while pulls wait. So with a long tick (the test sets one) the last
//! message is in by the first test only if those rounds ran (that test's own progress
//! call pulls just one more). Rank 1 then waits for all and checks every byte; it prints
//! `background_pull: ok rank=1 last_done_at_first_test=BOOL count=COUNT`, rank 0
//! `background_pull: ok rank=0`.
//!
//! `rtrun -n 2 background_pull [COUNT] [SLEEP_MS]` (defaults 48 and 1000).

use std::time::Duration;

use runthrough::Error;

const TAG: i32 = 7;
const MIB: usize = 1 << 20;

fn byte(i: usize) -> u8 {
    (i.wrapping_mul(31) ^ (i >> 12)) as u8
}

fn main() -> Result<(), Error> {
    let mut args = std::env::args().skip(1);
    let count: usize = args.next().map_or(48, |a| a.parse().expect("COUNT"));
    let sleep_ms: u64 = args.next().map_or(1000, |a| a.parse().expect("SLEEP_MS"));
    let rt = runthrough::init()?;
    let world = rt.world();
    if world.size() != 2 {
        eprintln!("background_pull: run with 2 ranks");
        std::process::exit(2);
    }
    // The sender's data is made before the barrier: 48 MiB take most of a second in a
    // debug build, which came out of the receiver's computation (the clean-clone CI at
    // b672af7 on a slow-level host: the last receive not complete after it).
    let data: Vec<u8> = if world.rank() == 0 { (0..count * MIB).map(byte).collect() } else { Vec::new() };
    world.barrier()?;
    if world.rank() == 0 {
        runthrough::scope(|s| {
            let mut reqs = Vec::with_capacity(count);
            for part in data.chunks(MIB) {
                reqs.push(world.isend(s, part, 1, TAG)?);
            }
            runthrough::wait_all(&mut reqs)
        })?;
        println!("background_pull: ok rank=0");
    } else {
        let mut reqs = Vec::with_capacity(count);
        for _ in 0..count {
            reqs.push(world.irecv_owned(vec![0u8; MIB], 0, TAG)?);
        }
        // Computing: no call into the library.
        std::thread::sleep(Duration::from_millis(sleep_ms));
        let last = reqs.pop().expect("count > 0");
        let (last_done, last_out) = match last.test() {
            Ok(done) => (true, done),
            Err(req) => (false, req.wait()),
        };
        let mut outs: Vec<_> = reqs.into_iter().map(|r| r.wait()).collect();
        outs.push(last_out);
        for (k, (buf, st)) in outs.into_iter().enumerate() {
            let st = st?;
            assert_eq!(st.len, MIB, "message {k}: length");
            if let Some(i) = (0..MIB).find(|&i| buf[i] != byte(k * MIB + i)) {
                eprintln!("background_pull: rank 1: message {k} byte {i} is {}", buf[i]);
                std::process::exit(3);
            }
        }
        println!("background_pull: ok rank=1 last_done_at_first_test={last_done} count={count}");
    }
    world.barrier()?;
    rt.finalize()
}
