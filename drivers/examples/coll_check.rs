//! Every collective against a serial reference (used by `tests/coll.rs`): each rank
//! derives every rank's input from a seed, runs the collective and checks its output
//! against the result computed locally. Several vector lengths (odd ones, and long enough
//! for the ring allreduce) and every root.
//!
//! `rtrun -n N coll_check [SEED]` prints `coll_check: ok ranks=N checks=K` on rank 0.

use runthrough::{Comm, Error, LocF64, Op};

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
                Op::LogicalAnd => i64::from(*a != 0 && b != 0),
                Op::LogicalOr => i64::from(*a != 0 || b != 0),
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
    checks += run_v_and_nonblocking(world, seed)?;
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

/// Variable-size collectives, reduce_scatter, nonblocking collectives, the logical and
/// location operators and user operations, against the same serial reference.
fn run_v_and_nonblocking(world: &Comm, seed: u64) -> Result<usize, Error> {
    let (me, n) = (world.rank(), world.size());
    let mut checks = 0;
    // Member i contributes i + 1 + (seed % 3) elements; ranges laid out in reverse order
    // with a gap of one element, so displacements matter.
    let counts: Vec<usize> = (0..n).map(|i| i + 1 + (seed % 3) as usize).collect();
    let total: usize = counts.iter().sum::<usize>() + n;
    let mut displs = vec![0; n];
    let mut at = 0;
    for i in (0..n).rev() {
        displs[i] = at;
        at += counts[i] + 1;
    }
    let placed = |f: &dyn Fn(usize) -> Vec<i64>| {
        let mut v = vec![-1i64; total];
        for i in 0..n {
            v[displs[i]..displs[i] + counts[i]].copy_from_slice(&f(i));
        }
        v
    };
    let mine = input(seed, me, counts[me]);
    for root in 0..n {
        let mut g = vec![-1i64; total];
        world.gatherv(&mine, &mut g, &counts, &displs, root)?;
        if me == root {
            check("gatherv", &g, &placed(&|i| input(seed, i, counts[i])));
        }
        let src = placed(&|i| input(seed ^ 9, i, counts[i]));
        let mut piece = vec![0; counts[me]];
        world.scatterv(&src, &counts, &displs, &mut piece, root)?;
        check("scatterv", &piece, &input(seed ^ 9, me, counts[me]));
        checks += 2;
    }
    let mut ag = vec![-1i64; total];
    world.allgatherv(&mine, &mut ag, &counts, &displs)?;
    check("allgatherv", &ag, &placed(&|i| input(seed, i, counts[i])));
    // alltoallv: i sends j a block of (i + j) % 3 + 1 elements, values input(seed ^ i, j).
    let len = |i: usize, j: usize| (i + j) % 3 + 1;
    let offsets = |c: &[usize]| c.iter().scan(0, |a, &x| Some(std::mem::replace(a, *a + x))).collect::<Vec<_>>();
    let sc: Vec<usize> = (0..n).map(|j| len(me, j)).collect();
    let rc: Vec<usize> = (0..n).map(|i| len(i, me)).collect();
    let (sd, rd) = (offsets(&sc), offsets(&rc));
    let send: Vec<i64> = (0..n).flat_map(|j| input(seed ^ me as u64, j, len(me, j))).collect();
    let mut recv = vec![0; rc.iter().sum()];
    world.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)?;
    check("alltoallv", &recv, &(0..n).flat_map(|i| input(seed ^ i as u64, me, len(i, me))).collect::<Vec<_>>());
    // reduce_scatter with the counts above.
    let all = input(seed, me, counts.iter().sum());
    let mut part = vec![0; counts[me]];
    world.reduce_scatter(&all, &mut part, &counts, Op::Sum)?;
    let full = (1..n).fold(input(seed, 0, all.len()), |acc, r| {
        acc.iter().zip(input(seed, r, all.len())).map(|(a, b)| a.wrapping_add(b)).collect()
    });
    let start: usize = counts[..me].iter().sum();
    check("reduce_scatter", &part, &full[start..start + counts[me]]);
    checks += 3;
    // Nonblocking collectives, two in flight at once, each against its blocking twin.
    for len in [0usize, 3, 1000, 20_011] {
        let mine = input(seed, me, len);
        for root in [0, n - 1] {
            let mut b = if me == root { input(seed, root, len) } else { vec![0; len] };
            let mut red = vec![0; len];
            runthrough::scope(|s| {
                let mut rb = world.ibcast(s, &mut b, root)?;
                let mut rr = world.ireduce(s, &mine, &mut red, Op::Max, root)?;
                while !(rb.test()? & rr.test()?) {
                    std::thread::yield_now();
                }
                Ok::<_, Error>(())
            })?;
            check("ibcast", &b, &input(seed, root, len));
            if me == root {
                check("ireduce", &red, &reduce_ref(n, seed, len, n, Op::Max));
            }
        }
        let mut out = vec![0; len];
        runthrough::scope(|s| {
            let barrier = world.ibarrier(s)?;
            world.iallreduce(s, &mine, &mut out, Op::Sum)?.wait()?;
            barrier.wait()
        })?;
        check("iallreduce", &out, &reduce_ref(n, seed, len, n, Op::Sum));
        checks += 3;
    }
    // Logical operators on zero and nonzero values (not only 0 / 1).
    let flags = |r: usize| -> Vec<i64> {
        (0..5).map(|i| if (i + r).is_multiple_of(3) { 0 } else { i as i64 * 7 - 3 }).collect()
    };
    for op in [Op::LogicalAnd, Op::LogicalOr] {
        let mut out = vec![0; 5];
        world.allreduce(&flags(me), &mut out, op)?;
        let want: Vec<i64> = (0..5)
            .map(|i| {
                let set = (0..n).map(|r| flags(r)[i] != 0);
                i64::from(if op == Op::LogicalAnd { set.clone().all(|b| b) } else { set.clone().any(|b| b) })
            })
            .collect();
        check("logical", &out, &want);
    }
    // MINLOC / MAXLOC: value (rank * 5) % n with index = rank; ties go to the smaller index.
    let v = LocF64 { value: ((me * 5) % n) as f64, index: me as i64 };
    let (mut lo, mut hi) = ([LocF64::default()], [LocF64::default()]);
    world.allreduce(&[v], &mut lo, Op::MinLoc)?;
    world.allreduce(&[v], &mut hi, Op::MaxLoc)?;
    let vals: Vec<(f64, i64)> = (0..n).map(|r| (((r * 5) % n) as f64, r as i64)).collect();
    let min =
        vals.iter().fold((f64::MAX, i64::MAX), |a, &b| if b.0 < a.0 || (b.0 == a.0 && b.1 < a.1) { b } else { a });
    let max =
        vals.iter().fold((f64::MIN, i64::MAX), |a, &b| if b.0 > a.0 || (b.0 == a.0 && b.1 < a.1) { b } else { a });
    if (lo[0].value, lo[0].index) != min || (hi[0].value, hi[0].index) != max {
        fail(format!("minloc {:?} (want {min:?}) maxloc {:?} (want {max:?})", lo[0], hi[0]));
    }
    // A user operation (a * b mod 1009, commutative and associative), blocking both ways.
    let mulmod = |acc: &mut [i64], x: &[i64]| acc.iter_mut().zip(x).for_each(|(a, b)| *a = (*a * *b).rem_euclid(1009));
    let mine: Vec<i64> = (0..9).map(|i| (me * 13 + i + 2) as i64).collect();
    let want: Vec<i64> =
        (0..9).map(|i| (0..n).fold(1i64, |a, r| (a * (r * 13 + i + 2) as i64).rem_euclid(1009))).collect();
    let mut out = vec![0; 9];
    world.allreduce_with(&mine, &mut out, mulmod)?;
    check("allreduce_with", &out, &want);
    let mut out = vec![0; 9];
    world.reduce_with(&mine, &mut out, n - 1, mulmod)?;
    if me == n - 1 {
        check("reduce_with", &out, &want);
    }
    Ok(checks + 5)
}

fn main() -> Result<(), Error> {
    let seed: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(11);
    let rt = runthrough::init()?;
    let world = rt.world();
    let checks = run(&world, seed)?;
    let dup = world.dup()?;
    // R2: new communicators inherit the parent's error mode (`run` left the world in
    // ErrorsReturn; it started ErrorsAreFatal).
    let inherits = |what: &str, c: &runthrough::Comm| {
        if format!("{:?}", c.error_mode()) != "ErrorsReturn" {
            fail(format!("{what} did not inherit ErrorsReturn: {:?}", c.error_mode()));
        }
    };
    inherits("dup", &dup);
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
    // create from a group: the even members in reverse order; the others get None.
    let evens: Vec<usize> = (0..n).filter(|r| r % 2 == 0).rev().collect();
    let made = world.create(&world.group().incl(&evens)?)?;
    match (&made, evens.iter().position(|&r| r == me)) {
        (Some(c), Some(pos)) if c.rank() == pos && c.size() == evens.len() => {
            let mut s = [0u64];
            c.allreduce(&[me as u64], &mut s, Op::Sum)?;
            if s[0] != evens.iter().map(|&r| r as u64).sum::<u64>() {
                fail(format!("create allreduce {}", s[0]));
            }
        }
        (None, None) => {}
        _ => fail(format!("create: rank {me} got {:?}", made.as_ref().map(|c| (c.rank(), c.size())))),
    }
    inherits("split", &half);
    if let Some(c) = &made {
        inherits("create", c);
    }
    checks += 2;
    if world.rank() == 0 {
        println!("coll_check: ok ranks={} checks={checks}", world.size());
    }
    rt.finalize()
}
