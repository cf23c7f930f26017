//! Every collective against a serial reference (used by `tests/coll.rs`): each rank
//! derives every rank's input from a seed, runs the collective and checks its output
//! against the result computed locally. Several vector lengths (odd ones, and long enough
//! for the ring allreduce) and every root.
//!
//! `rtrun -n N coll_check [SEED]` prints `coll_check: ok ranks=N checks=K` on rank 0.

use runthrough::{Comm, Error, Op};

fn input(seed: u64, rank: usize, len: usize) -> Vec<i64> {
    (0..len).map(|i| ((seed as i64 * 31 + rank as i64 * 1009 + i as i64 * 7) % 1000) - 500).collect()
}

fn fail(what: String) -> ! {
    eprintln!("coll_check: {what}");
    std::process::exit(3);
}

fn check(what: &str, got: &[i64], want: &[i64]) {
    if got != want {
        let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        fail(format!(
            "{what}: element {i} is {} (want {}), len {}",
            got.get(i).copied().unwrap_or(0),
            want[i],
            want.len()
        ));
    }
}

fn reduce_ref(n: usize, seed: u64, len: usize, upto: usize, op: Op) -> Vec<i64> {
    let mut acc = input(seed, 0, len);
    for r in 1..upto.min(n) {
        for (a, b) in acc.iter_mut().zip(input(seed, r, len)) {
            *a = match op {
                Op::Sum => a.wrapping_add(b),
                Op::Max => (*a).max(b),
                Op::Min => (*a).min(b),
                Op::BitXor => *a ^ b,
                _ => unreachable!(),
            };
        }
    }
    acc
}

fn run(world: &Comm, seed: u64) -> Result<usize, Error> {
    let (me, n) = (world.rank(), world.size());
    let mut checks = 0;
    world.barrier()?;
    for len in [0usize, 1, 7, 1000, 20_011] {
        let mine = input(seed, me, len);
        for root in 0..n {
            let mut b = if me == root { input(seed, root, len) } else { vec![0; len] };
            world.bcast(&mut b, root)?;
            check("bcast", &b, &input(seed, root, len));
            for op in [Op::Sum, Op::Max] {
                let mut out = vec![0; len];
                world.reduce(&mine, &mut out, op, root)?;
                if me == root {
                    check("reduce", &out, &reduce_ref(n, seed, len, n, op));
                }
            }
            let mut g = vec![0; len * n];
            world.gather(&mine, &mut g, root)?;
            if me == root {
                let want: Vec<i64> = (0..n).flat_map(|r| input(seed, r, len)).collect();
                check("gather", &g, &want);
            }
            let src: Vec<i64> =
                if me == root { (0..n).flat_map(|r| input(seed ^ 5, r, len)).collect() } else { Vec::new() };
            let mut piece = vec![0; len];
            world.scatter(&src, &mut piece, root)?;
            check("scatter", &piece, &input(seed ^ 5, me, len));
            checks += 4;
        }
        for op in [Op::Sum, Op::Min, Op::BitXor] {
            let mut out = vec![0; len];
            world.allreduce(&mine, &mut out, op)?;
            check("allreduce", &out, &reduce_ref(n, seed, len, n, op));
            let mut sc = vec![0; len];
            world.scan(&mine, &mut sc, op)?;
            check("scan", &sc, &reduce_ref(n, seed, len, me + 1, op));
            let mut ex = vec![0; len];
            let defined = world.exscan(&mine, &mut ex, op)?;
            if defined != (me > 0) {
                fail(format!("exscan defined={defined} on rank {me}"));
            }
            if me > 0 {
                check("exscan", &ex, &reduce_ref(n, seed, len, me, op));
            }
            checks += 3;
        }
        let mut ag = vec![0; len * n];
        world.allgather(&mine, &mut ag)?;
        check("allgather", &ag, &(0..n).flat_map(|r| input(seed, r, len)).collect::<Vec<_>>());
        // alltoall: block j of rank i is input(seed ^ i, j).
        let send: Vec<i64> = (0..n).flat_map(|j| input(seed ^ me as u64, j, len)).collect();
        let mut recv = vec![0; len * n];
        world.alltoall(&send, &mut recv)?;
        check("alltoall", &recv, &(0..n).flat_map(|i| input(seed ^ i as u64, me, len)).collect::<Vec<_>>());
        checks += 2;
    }
    // Floating point allreduce (sum of small integers is exact) and a bad operator.
    let mut f = [0f64; 3];
    world.allreduce(&[me as f64, 1.0, -(me as f64)], &mut f, Op::Sum)?;
    let s = (n * (n - 1) / 2) as f64;
    if f != [s, n as f64, -s] {
        fail(format!("f64 allreduce {f:?}"));
    }
    world.set_error_mode(runthrough::ErrorMode::ErrorsReturn);
    if world.allreduce(&[1.0f32], &mut [0.0f32], Op::BitAnd).is_ok() {
        fail("bitwise reduction of floats accepted".into());
    }
    if world.bcast(&mut [0u8], n).is_ok() {
        fail("root out of range accepted".into());
    }
    world.barrier()?;
    Ok(checks + 3)
}

fn main() -> Result<(), Error> {
    let seed: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(11);
    let rt = runthrough::init()?;
    let world = rt.world();
    let checks = run(&world, seed)?;
    let dup = world.dup()?;
    let mut checks = checks + run(&dup, seed + 1)?;
    // split by parity: each half is a working communicator of the right members.
    let (me, n) = (world.rank(), world.size());
    let half = world.split(Some((me % 2) as u32), -(me as i32))?.expect("a color was given");
    let want: Vec<usize> = (0..n).filter(|r| r % 2 == me % 2).rev().collect();
    if half.size() != want.len() || want[half.rank()] != me {
        fail(format!("split: rank {me} is {} of {} (want order {want:?})", half.rank(), half.size()));
    }
    let mut s = [0u64];
    half.allreduce(&[me as u64], &mut s, Op::Sum)?;
    if s[0] != want.iter().map(|&r| r as u64).sum::<u64>() {
        fail(format!("split allreduce {}", s[0]));
    }
    if world.split(None, 0)?.is_some() {
        fail("split with no color returned a communicator".into());
    }
    checks += 2;
    if world.rank() == 0 {
        println!("coll_check: ok ranks={} checks={checks}", world.size());
    }
    rt.finalize()
}
