//! Checkpoint and restart with MPI-IO under failures (R41): an iterative stencil writes a
//! collective checkpoint every few steps; when a rank dies the survivors revoke, shrink,
//! read the last complete checkpoint back over the new (different) decomposition, and
//! finish with the right answer.
//!
//! `rtrun -n 4 --kill 2@400ms checkpoint` — a periodic 1-D grid of `G` integers, block
//! distributed over the current communicator, is stepped `STEPS` times by
//! x'[i] = (x[i-1] + 2·x[i] + x[i+1] + t) mod P (exact, so the result is checked equal to
//! the serial one); each step exchanges halos with the neighbours and takes about 10 ms.
//! Every `EVERY` steps the members write their blocks collectively (`write_at_all`) into
//! one of two slots of the file, alternately; only when that write succeeded at every
//! member (the minimum of their successes is 1) does rank 0 write the commit record
//! naming the slot and the step, and sync: a checkpoint a failure cut short is never
//! named, and the slot it overwrote was not the last complete one. On a failure (a halo
//! exchange, a write, the minimum) the survivors revoke the communicator and the file's,
//! shrink, open the file on the shrunk communicator (the old handle is dropped: its
//! close would fail while the failure is unrecognized),
//! read the commit record, read their new blocks from its slot (`read_at_all`), and go on
//! from its step. Each survivor prints
//! `checkpoint: rank R of S result X restarts N from step T`, having checked X.

use std::time::Duration;

use runthrough::file::{FileError, Hints};
use runthrough::{Amode, Comm, Error, ErrorMode, File, Op};

const G: usize = 1200;
const STEPS: u64 = 120;
const EVERY: u64 = 10;
const P: u64 = 1_000_000_007;
/// The commit record: step, slot, and a check word.
const RECORD: u64 = 24;
const MAGIC: u64 = 0x5254_434b_5054_0001;

/// The block of member `r` of `n`.
fn block(r: usize, n: usize) -> std::ops::Range<usize> {
    r * G / n..(r + 1) * G / n
}

/// The byte offset of global element `i` in checkpoint slot `slot`.
fn at(slot: u64, i: usize) -> i64 {
    (RECORD + slot * (G as u64) * 8 + i as u64 * 8) as i64
}

fn step(x: &[u64], left: u64, right: u64, t: u64) -> Vec<u64> {
    (0..x.len())
        .map(|i| {
            let l = if i == 0 { left } else { x[i - 1] };
            let r = if i + 1 == x.len() { right } else { x[i + 1] };
            (l + 2 * x[i] + r + t) % P
        })
        .collect()
}

fn serial() -> Vec<u64> {
    let mut x: Vec<u64> = (0..G as u64).collect();
    for t in 0..STEPS {
        let (l, r) = (x[G - 1], x[0]);
        x = step(&x, l, r, t);
    }
    x
}

/// Why the computation must recover: a member failed (or another revoked).
fn failed(e: &FileError) -> bool {
    matches!(e, FileError::Comm(Error::RankFailStop { .. } | Error::Revoked | Error::InStatus { .. }))
}

struct Run {
    comm: Comm,
    file: File,
    x: Vec<u64>,
    t: u64,
    slot: u64,
}

impl Run {
    fn halo(&mut self) -> Result<(), FileError> {
        let (me, n) = (self.comm.rank(), self.comm.size());
        let (left, right) = ((me + n - 1) % n, (me + 1) % n);
        let (mut from_left, mut from_right) = ([0u64], [0u64]);
        let last = [*self.x.last().expect("a block")];
        self.comm.sendrecv(&last, right, 1, &mut from_left, left, 1)?;
        self.comm.sendrecv(&self.x[..1], left, 2, &mut from_right, right, 2)?;
        self.x = step(&self.x, from_left[0], from_right[0], self.t);
        self.t += 1;
        Ok(())
    }

    fn checkpoint(&mut self) -> Result<(), FileError> {
        let slot = self.slot;
        let lo = block(self.comm.rank(), self.comm.size()).start;
        let wrote = self.file.write_at_all(at(slot, lo), bytemuck::cast_slice(&self.x)).map(drop);
        // Named only when written everywhere: a minimum of every member's success, which
        // is 1 only if every member's write returned (each aggregator wrote its part).
        let mut everywhere = [0u32];
        self.comm.allreduce(&[u32::from(wrote.is_ok())], &mut everywhere, Op::Min)?;
        wrote?;
        if everywhere[0] != 1 {
            return Err(FileError::Comm(Error::RankFailStop { rank: 0 }));
        }
        if self.comm.rank() == 0 {
            let rec = [self.t, slot, MAGIC ^ self.t ^ slot];
            self.file.write_at(0, bytemuck::cast_slice(&rec))?;
        }
        self.file.sync()?;
        self.slot = 1 - slot;
        Ok(())
    }

    /// The survivors' way back: shrink, reopen, read the last named checkpoint.
    fn recover(&mut self, path: &std::path::Path) -> Result<(), FileError> {
        // Every communicator in use is revoked (the file's too: a member still in a
        // collective write or sync on it must leave it), then the survivors shrink.
        self.comm.revoke();
        self.file.comm().revoke();
        self.comm = self.comm.shrink()?;
        self.file = File::open(&self.comm, path, Amode::RDWR, Hints::default())?;
        let mut rec = [0u64; 3];
        let mut raw = vec![0u8; RECORD as usize];
        self.file.read_at_all(0, &mut raw)?;
        for (k, w) in rec.iter_mut().enumerate() {
            *w = u64::from_le_bytes(raw[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        }
        let (t, slot) = if rec[2] == MAGIC ^ rec[0] ^ rec[1] { (rec[0], rec[1]) } else { (0, u64::MAX) };
        let mine = block(self.comm.rank(), self.comm.size());
        if slot == u64::MAX {
            // No checkpoint yet: start again.
            self.x = mine.map(|i| i as u64).collect();
        } else {
            let mut bytes = vec![0u8; mine.len() * 8];
            self.file.read_at_all(at(slot, mine.start), &mut bytes)?;
            self.x = bytes.chunks(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect();
        }
        self.t = t;
        self.slot = if slot == u64::MAX { 0 } else { 1 - slot };
        Ok(())
    }
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let mut comm = match world.dup() {
        Ok(c) => c,
        Err(_) => world.shrink()?,
    };
    // One file a job, named by rank 0's process id; a failure while the members agree
    // on it and open it (a kill can land this early on a slow machine) shrinks and tries
    // again. The broadcast may fail at some members only: an agreement decides.
    let (path, file) = loop {
        let mut id = [std::process::id() as u64];
        let got = comm.bcast(&mut id, 0);
        let opened = match comm.agree(i32::from(got.is_ok())) {
            Ok(1) => {
                let path = std::env::temp_dir().join(format!("rt-checkpoint-{}", id[0]));
                File::open(&comm, &path, Amode::RDWR | Amode::CREATE, Hints::default()).map(|f| (path, f))
            }
            Ok(_) => Err(FileError::Comm(got.err().unwrap_or(Error::RankFailStop { rank: 0 }))),
            Err(e) => Err(FileError::Comm(e)),
        };
        match opened {
            Ok(pf) => break pf,
            Err(e) if failed(&e) => {
                comm.revoke();
                comm = comm.shrink()?;
            }
            Err(e) => return Err(into_error(e)),
        }
    };
    let mine = block(comm.rank(), comm.size());
    let mut run = Run { comm, file, x: mine.map(|i| i as u64).collect(), t: 0, slot: 0 };
    let mut restarts = Vec::new();
    let all = loop {
        let r = if run.t < STEPS {
            std::thread::sleep(Duration::from_millis(10));
            run.halo().and_then(|()| if run.t.is_multiple_of(EVERY) { run.checkpoint() } else { Ok(()) }).map(|()| None)
        } else {
            // The end: gather the result at every member (a failure now is recovered from
            // like any other: back to the last checkpoint).
            let n = run.comm.size();
            let counts: Vec<usize> = (0..n).map(|r| block(r, n).len()).collect();
            let displs: Vec<usize> = (0..n).map(|r| block(r, n).start).collect();
            let mut all = vec![0u64; G];
            let got = run.comm.allgatherv(&run.x, &mut all, &counts, &displs);
            // Every member leaves with the result, or every member recovers: an agreement
            // (a gather may fail at some members and not at others).
            match run.comm.agree(i32::from(got.is_ok())) {
                Ok(1) => Ok(Some(all)),
                Ok(_) => Err(FileError::Comm(got.err().unwrap_or(Error::RankFailStop { rank: 0 }))),
                Err(e) => Err(FileError::Comm(e)),
            }
        };
        match r {
            Ok(Some(all)) => break all,
            Ok(None) => {}
            Err(e) if failed(&e) => {
                // Recovery can itself meet a failure: try again on what is left.
                loop {
                    match run.recover(&path) {
                        Ok(()) => break,
                        Err(e) if failed(&e) => continue,
                        Err(e) => return Err(into_error(e)),
                    }
                }
                restarts.push(run.t);
            }
            Err(e) => return Err(into_error(e)),
        }
    };
    let (me, n) = (run.comm.rank(), run.comm.size());
    if all != serial() {
        eprintln!("checkpoint: rank {me} result differs from the serial one");
        std::process::exit(3);
    }
    let sum = all.iter().fold(0u64, |a, v| (a + v) % P);
    println!(
        "checkpoint: rank {me} of {n} result {sum} restarts {} from step {}",
        restarts.len(),
        restarts.first().map_or("-".to_string(), |t| t.to_string())
    );
    // A failure the file has not recognized keeps it open (R41): validate, then close.
    let closed = match run.file.close() {
        Err(e) if failed(&e) => run.file.validate().and_then(|_| run.file.close()),
        r => r,
    };
    if me == 0 {
        let _ = std::fs::remove_file(&path);
    }
    closed.map_err(into_error)?;
    drop(run);
    rt.finalize()
}

fn into_error(e: FileError) -> Error {
    match e {
        FileError::Comm(e) => e,
        FileError::Io(e) => {
            eprintln!("checkpoint: {e}");
            std::process::exit(4);
        }
    }
}
