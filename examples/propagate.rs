//! The listing of Engwer et al. (exception propagation in MPI, R27), ported: a local
//! error becomes `signal_error`, every rank catches `Propagated` naming the ranks that
//! signalled and their codes, and a rank that panics while using a communicator leaves
//! it corrupted at every other rank.
//!
//! `rtrun -n N propagate` (N ≥ 3) runs three scenes, each on a fresh dup of the world;
//! every rank prints one line per scene:
//! 1. `propagate: rank R signal caught Propagated([(1, 666)])` — rank 0 sends the
//!    answer 42 to rank 1, the others wait for a message from their left neighbour;
//!    rank 1 finds the answer "wrong" (a local exception) and signals 666 instead of
//!    passing it on.
//! 2. `propagate: rank R both caught Propagated([(1, 666), (2, 667)])` — ranks 1 and 2
//!    signal at once while the others block; each prints every signal it caught (two
//!    resolutions when the signals cross, one when they meet: the union is the same).
//! 3. `propagate: rank R corrupted caught CommCorrupted` — the last rank panics holding
//!    the communicator (it dies: the launcher reports it), every other rank blocked on
//!    it gets `CommCorrupted`.

use std::collections::BTreeSet;
use std::time::Duration;

use runthrough::{Comm, Error, ErrorMode};

fn fail(what: &str) -> ! {
    eprintln!("propagate: {what}");
    std::process::exit(3);
}

fn fresh(world: &Comm) -> Result<Comm, Error> {
    let c = world.dup()?;
    c.set_error_mode(ErrorMode::ErrorsReturn);
    Ok(c)
}

/// Scene 1: Engwer et al.'s listing on a ring.
fn signal(world: &Comm) -> Result<Vec<(u32, i32)>, Error> {
    let comm = fresh(world)?;
    let (me, n) = (comm.rank(), comm.size());
    let mut answer = [0i32];
    let outcome = (|| -> Result<(), Error> {
        if me == 0 {
            answer[0] = 42;
            comm.send(&answer, 1, 0)?;
            comm.recv(&mut answer, n - 1, 0)?;
        } else {
            comm.recv(&mut answer, me - 1, 0)?;
            if me == 1 {
                // A local exception: rank 1 does not like the answer.
                return Err(comm.signal_error(666));
            }
            comm.send(&answer, (me + 1) % n, 0)?;
        }
        Ok(())
    })();
    match outcome {
        Err(Error::Propagated(list)) => Ok(list),
        other => fail(&format!("rank {me}: scene 1 ended with {other:?}")),
    }
}

/// Scene 2: two ranks signal at once.
fn both(world: &Comm) -> Result<Vec<(u32, i32)>, Error> {
    let comm = fresh(world)?;
    let me = comm.rank();
    let mut caught = BTreeSet::new();
    let take = |caught: &mut BTreeSet<(u32, i32)>, e: Error, at: &str| match e {
        Error::Propagated(list) => caught.extend(list),
        e => fail(&format!("rank {me}: scene 2 {at} got {e:?}")),
    };
    // A fast signaller may reach its signal while others are still in this barrier:
    // then the barrier is their pending wait and fails.
    if let Err(e) = comm.barrier() {
        take(&mut caught, e, "barrier");
    }
    if me == 1 || me == 2 {
        take(&mut caught, comm.signal_error(665 + me as i32), "signal_error");
    } else if caught.is_empty() {
        let mut b = [0u8];
        match comm.recv(&mut b, 1usize, 0) {
            Err(e) => take(&mut caught, e, "receive"),
            Ok(_) => fail(&format!("rank {me}: nobody sends in scene 2")),
        }
    }
    // If the signals crossed, the second resolution reaches this rank at its next wait.
    while caught.len() < 2 {
        match comm.barrier() {
            Err(e) => take(&mut caught, e, "a later barrier"),
            Ok(()) => fail(&format!("rank {me}: scene 2 caught only {caught:?}")),
        }
    }
    comm.barrier()?; // used as before: no revoke needed
    Ok(caught.into_iter().collect())
}

/// Scene 3: the last rank panics holding the communicator.
fn corrupted(world: &Comm) -> Result<String, Error> {
    let comm = fresh(world)?;
    let (me, n) = (comm.rank(), comm.size());
    comm.barrier()?;
    if me == n - 1 {
        std::thread::sleep(Duration::from_millis(50));
        let _held = comm;
        panic!("propagate: rank {me} panics on purpose while holding the communicator");
    }
    let mut b = [0u8];
    match comm.recv(&mut b, n - 1, 0) {
        Err(Error::CommCorrupted) => Ok("CommCorrupted".into()),
        other => fail(&format!("rank {me}: scene 3 got {other:?}")),
    }
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let me = world.rank();
    if world.size() < 3 {
        fail("needs at least 3 ranks");
    }
    println!("propagate: rank {me} signal caught Propagated({:?})", signal(&world)?);
    println!("propagate: rank {me} both caught Propagated({:?})", both(&world)?);
    println!("propagate: rank {me} corrupted caught {}", corrupted(&world)?);
    drop(world);
    rt.finalize()
}
