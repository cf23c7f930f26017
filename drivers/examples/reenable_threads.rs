//! Example 17.5 of the run-through chapter, ported: several threads of rank 0 receive with
//! ANY_SOURCE while workers stream numbered messages and some workers are killed. A thread
//! whose wildcard receive fails re-enables wildcards under a writer lock, unless another
//! thread already did for the same failures (the `recognize_cnt` protocol of the example).
//!
//! `rtrun -n 6 --kill 2@150ms --kill 4@300ms reenable_threads [THREADS] [MSGS]`
//! checks: every message of a surviving worker arrives exactly once, a dead worker's
//! messages arrive at most once each, and wildcards were re-enabled at most once per
//! failure. Prints `reenable_threads: ok ...`.

use std::collections::HashSet;
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use runthrough::{Error, ErrorMode, ANY_SOURCE};

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let threads: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(3);
    let msgs: u64 = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(200);
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let (me, n) = (world.rank(), world.size());
    if me != 0 {
        for i in 0..msgs {
            world.send(&[me as u64, i], 0, 1)?;
            std::thread::sleep(Duration::from_millis(2));
        }
        return rt.finalize();
    }
    // Shared by the receiving threads, as the example's globals.
    let recognized = RwLock::new((0u64, Vec::<usize>::new())); // (recognize_cnt, failed group)
    let got = Mutex::new(HashSet::<(u64, u64)>::new());
    let reenables = Mutex::new(0usize);
    let done = |got: &HashSet<(u64, u64)>, failed: &[usize]| {
        (1..n).all(|w| failed.contains(&w) || (0..msgs).all(|i| got.contains(&(w as u64, i))))
    };
    let results: Vec<Result<(), Error>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| -> Result<(), Error> {
                    let mut my_cnt = u64::MAX; // forces a check in the first loop
                    loop {
                        let guard = recognized.read().unwrap();
                        if my_cnt != guard.0 {
                            my_cnt = guard.0;
                        }
                        if done(&got.lock().unwrap(), &guard.1) {
                            return Ok(());
                        }
                        let mut m = [0u64; 2];
                        // A receive that also gives up once every message is in (the
                        // example's `done`): wait with test(), cancel by dropping.
                        let outcome = runthrough::scope(|s| {
                            let mut r = world.irecv(s, &mut m, ANY_SOURCE, 1)?;
                            let outcome = loop {
                                match r.test() {
                                    Ok(Some(st)) => break Some(Ok(st)),
                                    Ok(None) => {}
                                    Err(e) => break Some(Err(e)),
                                }
                                if done(&got.lock().unwrap(), &guard.1) {
                                    break None;
                                }
                                std::thread::yield_now();
                            };
                            Ok::<_, Error>(outcome)
                        })?;
                        let Some(outcome) = outcome else { return Ok(()) };
                        match outcome {
                            Ok(_) => {
                                drop(guard);
                                if !got.lock().unwrap().insert((m[0], m[1])) {
                                    eprintln!("reenable_threads: duplicate message {m:?}");
                                    std::process::exit(3);
                                }
                            }
                            Err(Error::RankFailStop { .. }) => {
                                drop(guard);
                                let mut w = recognized.write().unwrap();
                                if my_cnt != w.0 {
                                    continue; // another thread already re-enabled wildcards
                                }
                                let failed = world.reenable_any_source().world_ranks();
                                *reenables.lock().unwrap() += 1;
                                w.0 += 1;
                                w.1 = failed;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    // Every receiving thread's error is fatal for the check, never dropped.
    for (t, r) in results.iter().enumerate() {
        if let Err(e) = r {
            eprintln!("reenable_threads: receiving thread {t} failed: {e:?}");
            std::process::exit(3);
        }
    }
    let failed = recognized.read().unwrap().1.clone();
    let reenabled = *reenables.lock().unwrap();
    if reenabled > failed.len() || (reenabled == 0 && !failed.is_empty()) {
        eprintln!("reenable_threads: {reenabled} re-enables for failures {failed:?}");
        std::process::exit(3);
    }
    let got = got.lock().unwrap();
    if !done(&got, &failed) {
        eprintln!("reenable_threads: messages of live workers missing ({} received)", got.len());
        std::process::exit(3);
    }
    println!("reenable_threads: ok threads={threads} received={} failed={failed:?} reenables={reenabled}", got.len());
    drop(got);
    rt.finalize()
}
