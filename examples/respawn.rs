//! Replacing the dead (R40, docs/SPAWN.md): a computation on 6 ranks loses one; the
//! survivors revoke, shrink, spawn a replacement, merge with it, put it in the dead
//! rank's place, restore its state from a neighbour's copy, and finish with the result a
//! failure-free run gives.
//!
//! `rtrun -n 6 --kill 3@1s target/release/examples/respawn` — a ring of 6 × 64 cells;
//! every step each rank swaps its edge cells with its neighbours and smooths its block
//! (plus a forcing term); every `CKPT` steps each rank keeps its block and sends a copy
//! to its right neighbour (its *buddy*), keeping the one it gets from its left. A step takes ~4 ms, so the kill lands mid-run.
//! When a step fails, every survivor revokes the communicator, shrinks it, and the
//! survivors spawn one replacement per dead rank; merged, the replacements take the dead
//! ranks' places (a split keyed by the old rank), everyone rolls back to the last
//! checkpoint every survivor committed (the minimum of their latest; each holds it, and
//! so does the dead rank's buddy, whose latest is no older), survivors from their own
//! copy, each replacement from its buddy's. At the end rank 0 gathers the ring, compares it bit for
//! bit with a serial run and prints `respawn: ... matches`; it also prints how long the
//! recovery took (the first error seen to the replacement's first step).

use std::time::{Duration, Instant};

use runthrough::{Comm, Error, ErrorMode, InterComm, Op, Runtime, SpawnApp};

const CELLS: usize = 64;
const STEPS: u64 = 500;
const CKPT: u64 = 10;
const STEP_PAUSE: Duration = Duration::from_millis(4);
/// Tags: halos, buddy copies, the replacement's restored block.
const HALO: i32 = 1;
const BUDDY: i32 = 2;
const RESTORE: i32 = 3;

/// One rank's part: its block at `step`, its committed checkpoints (own and its left
/// neighbour's copy, by step; every one is kept — ranks far apart on the ring may be
/// several checkpoints apart when one fails — 50 blocks of 512 bytes at most).
struct Part {
    rank: usize,
    step: u64,
    cells: Vec<f64>,
    own: Vec<(u64, Vec<f64>)>,
    buddy: Vec<(u64, Vec<f64>)>,
}

fn forcing(cell: usize, step: u64) -> f64 {
    ((cell as u64 * 31 + step * 17) % 101) as f64 * 1e-3
}

/// One step of cell `g` (global index) given its neighbours.
fn update(l: f64, x: f64, r: f64, g: usize, step: u64) -> f64 {
    0.25 * l + 0.5 * x + 0.25 * r + forcing(g, step)
}

fn initial(rank: usize) -> Vec<f64> {
    (0..CELLS).map(|i| ((rank * CELLS + i) % 7) as f64).collect()
}

/// Runs steps until `STEPS` on `comm` (rank = the part's place in the ring).
fn run(comm: &Comm, p: &mut Part, recovered: &mut Option<Instant>) -> Result<(), Error> {
    let n = comm.size();
    let (left, right) = ((p.rank + n - 1) % n, (p.rank + 1) % n);
    while p.step < STEPS {
        std::thread::sleep(STEP_PAUSE);
        let (mut from_left, mut from_right) = ([0f64], [0f64]);
        comm.sendrecv(&p.cells[CELLS - 1..], right, HALO, &mut from_left, left, HALO)?;
        comm.sendrecv(&p.cells[..1], left, HALO, &mut from_right, right, HALO)?;
        let old = p.cells.clone();
        for i in 0..CELLS {
            let l = if i == 0 { from_left[0] } else { old[i - 1] };
            let r = if i == CELLS - 1 { from_right[0] } else { old[i + 1] };
            p.cells[i] = update(l, old[i], r, p.rank * CELLS + i, p.step);
        }
        p.step += 1;
        if let Some(t) = recovered.take() {
            if p.rank == 0 {
                println!(
                    "respawn: recovered in {:.1} ms (first error to the next step)",
                    t.elapsed().as_secs_f64() * 1e3
                );
            }
        }
        if p.step.is_multiple_of(CKPT) {
            let mut copy = vec![0f64; CELLS];
            comm.sendrecv(&p.cells, right, BUDDY, &mut copy, left, BUDDY)?;
            // Committed here once the buddy copy went both ways. No agreement: a member
            // that fails into the recovery while others wait in an agreement on this
            // communicator would meet them in the shrink's (ULFM: every member calls the
            // same collectives in the same order). The roll-back takes the minimum.
            p.own.push((p.step, p.cells.clone()));
            p.buddy.push((p.step, copy));
        }
    }
    Ok(())
}

fn at(slots: &[(u64, Vec<f64>)], step: u64) -> Option<Vec<f64>> {
    slots.iter().find(|s| s.0 == step).map(|s| s.1.clone())
}

/// After a failure: revoke, shrink, spawn replacements, merge, reorder, roll back.
fn recover(rt: &Runtime, comm: Comm, p: &mut Part) -> Result<Comm, Error> {
    comm.revoke();
    let n = comm.size();
    let shrunk = comm.shrink()?;
    let alive: Vec<usize> = shrunk.group().world_ranks();
    let dead: Vec<usize> =
        comm.group().world_ranks().iter().enumerate().filter(|(_, w)| !alive.contains(w)).map(|(r, _)| r).collect();
    let me = std::env::args().next().expect("program");
    let app =
        SpawnApp { program: me, args: vec!["replacement".into()], procs: dead.len() as u32, ..SpawnApp::default() };
    let inter = rt.spawn(&shrunk, 0, &app).map_err(|e| e.error)?;
    let merged = inter.merge(false)?;
    // The replacements learn which ranks they replace.
    let mut places: Vec<u64> = dead.iter().map(|&d| d as u64).collect();
    merged.bcast(&mut places, 0)?;
    let whole = rejoin(&merged, p.rank, n)?;
    roll_back(&whole, p, &dead)?;
    Ok(whole)
}

/// The communicator of the ring again, ranks in their old places.
fn rejoin(merged: &Comm, place: usize, n: usize) -> Result<Comm, Error> {
    let whole = merged.split(Some(0), place as i32)?.ok_or(Error::InvalidArg("split gave nothing"))?;
    whole.set_error_mode(ErrorMode::ErrorsReturn);
    assert_eq!((whole.rank(), whole.size()), (place, n));
    Ok(whole)
}

/// Everyone goes back to the last checkpoint every member committed; each dead rank's
/// buddy sends its copy to the replacement.
fn roll_back(whole: &Comm, p: &mut Part, dead: &[usize]) -> Result<(), Error> {
    let mine = if dead.contains(&p.rank) { u64::MAX } else { p.own.last().map_or(0, |s| s.0) };
    let mut step = [0u64];
    whole.allreduce(&[mine], &mut step, Op::Min)?;
    let step = step[0];
    let n = whole.size();
    for &d in dead {
        let buddy = (d + 1) % n;
        if p.rank == buddy && !dead.contains(&buddy) {
            let copy = if step == 0 { initial(d) } else { at(&p.buddy, step).expect("the buddy's copy") };
            whole.send(&copy, d, RESTORE)?;
        }
    }
    if dead.contains(&p.rank) {
        let buddy = (p.rank + 1) % n;
        p.cells = vec![0f64; CELLS];
        whole.recv(&mut p.cells, buddy, RESTORE)?;
        p.own.clear();
        p.buddy.clear();
    } else {
        p.cells = if step == 0 { initial(p.rank) } else { at(&p.own, step).expect("own checkpoint") };
    }
    p.step = step;
    Ok(())
}

/// The serial run, for the check.
fn serial(n: usize) -> Vec<f64> {
    let mut x: Vec<f64> = (0..n).flat_map(initial).collect();
    let m = x.len();
    for step in 0..STEPS {
        let old = x.clone();
        for g in 0..m {
            x[g] = update(old[(g + m - 1) % m], old[g], old[(g + 1) % m], g, step);
        }
    }
    x
}

fn main() -> Result<(), Error> {
    let rt = runthrough::init()?;
    let (mut comm, mut p) = match rt.parent() {
        None => {
            let world = rt.world();
            world.set_error_mode(ErrorMode::ErrorsReturn);
            // A rank killed during start-up leaves a world with a failed member, which
            // dup refuses (R23): then the world itself is the ring, and its first step
            // fails into the recovery.
            let comm = world.dup().unwrap_or(world);
            let rank = comm.rank();
            (comm, Part { rank, step: 0, cells: initial(rank), own: Vec::new(), buddy: Vec::new() })
        }
        Some(inter) => replacement(&inter)?,
    };
    let mut recovered = None;
    loop {
        match run(&comm, &mut p, &mut recovered) {
            Ok(()) => break,
            Err(Error::RankFailStop { .. } | Error::Revoked | Error::InStatus { .. }) => {
                recovered = Some(Instant::now());
                comm = recover(&rt, comm, &mut p)?;
            }
            Err(e) => return Err(e),
        }
    }
    let n = comm.size();
    let mut all = vec![0f64; if p.rank == 0 { n * CELLS } else { 0 }];
    comm.gather(&p.cells, &mut all, 0)?;
    if p.rank == 0 {
        let want = serial(n);
        let same = all.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
        let sum: f64 = all.iter().sum();
        if !same {
            eprintln!("respawn: rank 0: the ring differs from the serial run (sum {sum})");
            std::process::exit(3);
        }
        println!("respawn: {n} ranks, {STEPS} steps: the ring matches the serial run bit for bit (sum {sum:.6})");
    }
    println!("respawn: rank {} done", p.rank);
    drop(comm);
    rt.finalize()
}

/// A replacement: merge with the survivors, learn its place, take its restored block.
fn replacement(inter: &InterComm) -> Result<(Comm, Part), Error> {
    inter.set_error_mode(ErrorMode::ErrorsReturn);
    let merged = inter.merge(true)?;
    let survivors = inter.remote_size();
    let mut places = vec![0u64; merged.size() - survivors];
    merged.bcast(&mut places, 0)?;
    let place = places[inter.rank()] as usize;
    let n = merged.size();
    let whole = rejoin(&merged, place, n)?;
    let mut p = Part { rank: place, step: 0, cells: Vec::new(), own: Vec::new(), buddy: Vec::new() };
    roll_back(&whole, &mut p, &places.iter().map(|&x| x as usize).collect::<Vec<_>>())?;
    println!("respawn: replacement took rank {place} at step {}", p.step);
    Ok((whole, p))
}
