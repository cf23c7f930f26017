//! Fault-tolerant manager/worker (run-through chapter §17.6 advice): the manager hands
//! tasks to workers and collects results with ANY_SOURCE receives. When a worker dies, the
//! pending wildcard receive fails with `RankFailStop` (R13); the manager asks which ranks
//! failed (`reenable_any_source`, R14), re-issues their lost tasks to the survivors, and
//! finishes every task.
//!
//! `rtrun -n 6 --kill 2@300ms --kill 4@700ms target/release/examples/manager_worker [TASKS]`
//! prints the total (checked against the serial sum) and the failed ranks; exits 0 (R7).

use std::collections::VecDeque;
use std::time::Duration;

use runthrough::{Error, ErrorMode, ANY_SOURCE, ANY_TAG};

const TASK: i32 = 1;
const RESULT: i32 = 2;
const STOP: i32 = 3;

/// The work of task `t`: a little arithmetic and a short nap, so kills land mid-run.
fn work(t: u64) -> u64 {
    std::thread::sleep(Duration::from_millis(10));
    (0..=t).map(|i| i * i % 1_000_003).sum()
}

fn main() -> Result<(), Error> {
    let tasks: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(500);
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    if n < 2 {
        eprintln!("manager_worker needs at least 2 ranks");
        std::process::exit(2);
    }
    if me != 0 {
        let mut msg = [0u64; 2];
        loop {
            let st = match world.recv(&mut msg[..1], 0, ANY_TAG) {
                Ok(st) => st,
                Err(Error::RankFailStop { .. }) => break, // the manager is gone
                Err(e) => return Err(e),
            };
            if st.tag == STOP {
                break;
            }
            msg[1] = work(msg[0]);
            if world.send(&msg, 0, RESULT).is_err() {
                break;
            }
        }
        return rt.finalize();
    }

    let mut todo: VecDeque<u64> = (0..tasks).collect();
    let mut inflight: Vec<Option<u64>> = vec![None; n];
    let mut alive: Vec<bool> = vec![true; n];
    let mut failed: Vec<usize> = Vec::new();
    let mut total = 0u64;
    let mut done = 0u64;
    let mut reissued = 0u64;
    // Hands the next task to `w`, or tells it to stop; a dead `w` gives its task back.
    let assign = |w: usize, todo: &mut VecDeque<u64>, inflight: &mut Vec<Option<u64>>, alive: &mut Vec<bool>| match todo
        .pop_front()
    {
        Some(t) => match world.send(&[t], w, TASK) {
            Ok(()) => inflight[w] = Some(t),
            Err(Error::RankFailStop { .. }) => {
                todo.push_front(t);
                alive[w] = false;
            }
            Err(e) => panic!("send task: {e}"),
        },
        None => {
            let _ = world.send(&[0u64], w, STOP);
        }
    };
    for w in 1..n {
        assign(w, &mut todo, &mut inflight, &mut alive);
    }
    let mut msg = [0u64; 2];
    while done < tasks {
        match world.recv(&mut msg, ANY_SOURCE, RESULT) {
            Ok(st) => {
                let w = st.source;
                if inflight[w] == Some(msg[0]) {
                    inflight[w] = None;
                    total += msg[1];
                    done += 1;
                }
                assign(w, &mut todo, &mut inflight, &mut alive);
            }
            Err(Error::RankFailStop { .. }) => {
                for w in world.reenable_any_source().world_ranks() {
                    if failed.contains(&w) {
                        continue;
                    }
                    failed.push(w);
                    alive[w] = false;
                    if let Some(t) = inflight[w].take() {
                        todo.push_front(t);
                        reissued += 1;
                    }
                }
                // Idle survivors (their task went back to the queue) get work again.
                for w in 1..n {
                    if alive[w] && inflight[w].is_none() && !todo.is_empty() {
                        assign(w, &mut todo, &mut inflight, &mut alive);
                    }
                }
            }
            Err(e) => return Err(e),
        }
        if (1..n).all(|w| !alive[w]) && done < tasks {
            eprintln!("manager_worker: every worker failed");
            std::process::exit(1);
        }
    }
    for (w, _) in alive.iter().enumerate().skip(1).filter(|(_, a)| **a) {
        let _ = world.send(&[0u64], w, STOP);
    }
    let expected: u64 = (0..tasks).map(|t| (0..=t).map(|i| i * i % 1_000_003).sum::<u64>()).sum();
    failed.sort_unstable();
    println!(
        "manager_worker: {done} tasks done by {} survivors, total {total} ({}), failed ranks {failed:?}, {reissued} task(s) re-issued",
        n - 1 - failed.len(),
        if total == expected { "correct" } else { "WRONG" }
    );
    if total != expected {
        std::process::exit(1);
    }
    rt.finalize()
}
