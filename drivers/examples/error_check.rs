//! Bad input and edge cases under `ErrorsReturn` (used by the multi-process tests), and
//! the abort scope of `ErrorsAreFatal` with `fatal` as argument.
//!
//! `rtrun -n 2 error_check` prints `error_check: ok` on every rank.
//! `rtrun -n 3 error_check fatal` makes rank 1 pass an invalid rank under the default
//! `ErrorsAreFatal`: the communicator's group (here the world) is aborted with the MPI
//! class code of the error (6, MPI_ERR_RANK).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use runthrough::{Error, ErrorMode, ANY_SOURCE, ANY_TAG, TAG_UB};

fn expect<T: std::fmt::Debug>(what: &str, got: Result<T, Error>, want: Error) {
    match got {
        Err(e) if e == want => {}
        other => {
            eprintln!("error_check: {what}: expected Err({want:?}), got {other:?}");
            std::process::exit(3);
        }
    }
}

fn ensure(what: &str, ok: bool) {
    if !ok {
        eprintln!("error_check: {what} failed");
        std::process::exit(3);
    }
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    let (me, n) = (world.rank(), world.size());
    if std::env::args().nth(1).as_deref() == Some("fatal") {
        world.barrier()?;
        if me == 1 {
            let _ = world.send(&[1u8], n + 5, 0);
            unreachable!("ErrorsAreFatal returned");
        }
        // The others block; the abort of the group ends them.
        let mut b = [0u8];
        let _ = world.recv(&mut b, 1, 99);
        eprintln!("error_check: rank {me} was not aborted");
        std::process::exit(4);
    }
    if std::env::args().nth(1).as_deref() == Some("fatal-sub") {
        // R3 scope: an error under ErrorsAreFatal on a sub-communicator aborts only that
        // communicator's group (the odd ranks); the even ranks finish normally.
        let half = world.split(Some((me % 2) as u32), me as i32)?.expect("a color was given");
        if me % 2 == 1 {
            if half.rank() == 0 {
                let _ = half.send(&[1u8], half.size() + 3, 0);
                unreachable!("ErrorsAreFatal returned");
            }
            let _ = half.recv(&mut [0u8], 0, 99);
            eprintln!("error_check: rank {me} was not aborted");
            std::process::exit(4);
        }
        half.barrier()?;
        println!("error_check: survived rank {me}");
        return rt.finalize();
    }
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let size = n as u32;

    // Invalid ranks and tags (R1: InvalidRank / InvalidTag), reported at the call.
    expect("send to rank size", world.send(&[0u8], n, 0), Error::InvalidRank { rank: n as i64, size });
    let mut b = [0u8; 4];
    expect("recv from -5", world.recv(&mut b, -5, 0), Error::InvalidRank { rank: -5, size });
    expect("send tag -1", world.send(&[0u8], 0, -1), Error::InvalidTag { tag: -1 });
    expect("send tag TAG_UB+1", world.send(&[0u8], 0, TAG_UB + 1), Error::InvalidTag { tag: TAG_UB + 1 });
    expect("recv tag -7", world.recv(&mut b, 0, -7), Error::InvalidTag { tag: -7 });

    // Send to self, eager and rendezvous.
    for len in [0usize, 8, 100_000, 3 << 20] {
        let out: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
        let mut inb = vec![0u8; len];
        let st = runthrough::scope(|s| {
            let r = world.isend(s, &out, me, 11)?;
            let st = world.recv(&mut inb, me, 11)?;
            r.wait()?;
            Ok::<_, Error>(st)
        })?;
        ensure("self send status", st.source == me && st.tag == 11 && st.len == len);
        ensure("self send contents", inb == out);
    }

    // Custom handler: called once per failing call, then the error is returned.
    let calls = Arc::new(AtomicUsize::new(0));
    let c2 = calls.clone();
    world.set_error_mode(ErrorMode::Handler(Arc::new(move |_, e| {
        assert!(matches!(e, Error::InvalidTag { .. }));
        c2.fetch_add(1, Ordering::SeqCst);
    })));
    expect("handler tag", world.send(&[0u8], 0, -3), Error::InvalidTag { tag: -3 });
    ensure("handler called once", calls.load(Ordering::SeqCst) == 1);
    world.set_error_mode(ErrorMode::ErrorsReturn);

    // dup is collective: every rank takes part.
    let dup = world.dup()?;
    if n >= 2 && me < 2 {
        let peer = 1 - me;
        // Truncation (R1): eager and rendezvous; what fits is delivered.
        for len in [100usize, 1 << 20] {
            let out: Vec<u8> = (0..len).map(|i| i as u8).collect();
            if me == 0 {
                world.send(&out, peer, 1)?;
            } else {
                let mut small = vec![0u8; 10];
                expect("truncate", world.recv(&mut small, peer, 1), Error::Truncate { posted: 10, arrived: len });
                ensure("truncated prefix", small[..] == out[..10]);
            }
        }
        // Typed buffers: f64 and u32 arrive intact; status length is in bytes.
        let vals: Vec<f64> = (0..1000).map(|i| i as f64 * 0.5).collect();
        let mut got = vec![0f64; 1000];
        let st = world.sendrecv(&vals, peer, 2, &mut got, peer, 2)?;
        ensure("sendrecv typed", got == vals && st.len == 8000 && st.source == peer);

        // probe / iprobe see a message without receiving it.
        if me == 0 {
            world.send(&[5u32, 6, 7], peer, 3)?;
        } else {
            let st = world.probe(ANY_SOURCE, 3)?;
            ensure("probe", st.source == 0 && st.len == 12);
            ensure("iprobe other tag", world.iprobe(0, 4)?.is_none());
            let mut v = [0u32; 3];
            world.recv(&mut v, st.source, st.tag)?;
            ensure("after probe", v == [5, 6, 7]);
        }

        // dup: messages on the duplicate never match receives on the world.
        if me == 0 {
            dup.send(&[1u8], peer, 9)?;
            world.send(&[2u8], peer, 9)?;
        } else {
            let mut x = [0u8];
            world.recv(&mut x, 0, 9)?;
            ensure("world gets the world message", x[0] == 2);
            dup.recv(&mut x, ANY_SOURCE, ANY_TAG)?;
            ensure("dup gets the dup message", x[0] == 1);
        }

        // wait_any returns the one that completed.
        if me == 0 {
            world.send(&[42u8], peer, 21)?;
        } else {
            let (mut a, mut c) = ([0u8], [0u8]);
            runthrough::scope(|s| {
                let mut reqs = vec![world.irecv(s, &mut a, 0, 20)?, world.irecv(s, &mut c, 0, 21)?];
                let (i, st) = runthrough::wait_any(&mut reqs).expect("an active request");
                ensure("wait_any index", i == 1 && st?.tag == 21);
                // The tag-20 receive is still pending: the scope's end cancels it.
                Ok::<_, Error>(())
            })?;
            ensure("wait_any data", c[0] == 42);
        }
    }
    world.barrier()?;
    println!("error_check: ok rank {me}");
    rt.finalize()
}
