//! Spawn: the job's ranks start `CHILDREN` (argument 1, default 2) more processes of this
//! program and talk to them through the inter-communicator (R40).
//!
//! Each parent sends every child its rank; each child answers with the sum of what it
//! got, times its own rank + 1; then parents and children merge into one communicator
//! and all-reduce their ranks. Every process checks what it got and prints one `OK` line.
//!
//! Run: `rtrun -n 2 target/release/examples/spawn 3`.

use runthrough::{Op, SpawnApp};

fn main() {
    let rt = runthrough::init().expect("init");
    let args: Vec<String> = std::env::args().collect();
    match rt.parent() {
        None => parent(&rt, &args),
        Some(inter) => child(&rt, &inter, &args),
    }
    rt.finalize().expect("finalize");
}

fn parent(rt: &runthrough::Runtime, args: &[String]) {
    let world = rt.world();
    let n: u32 = args.get(1).map_or(2, |a| a.parse().expect("children"));
    let app = SpawnApp {
        program: args[0].clone(),
        args: vec!["child".into(), world.size().to_string()],
        procs: n,
        ..SpawnApp::default()
    };
    let inter = rt.spawn(&world, 0, &app).expect("spawn");
    assert_eq!((inter.size(), inter.remote_size()), (world.size(), n as usize));
    let me = world.rank() as u64;
    for c in 0..n as usize {
        inter.send(&[me], c, 7).expect("send");
    }
    let p = world.size() as u64;
    let sum = p * (p - 1) / 2;
    for c in 0..n as usize {
        let mut got = [0u64];
        inter.recv(&mut got, c, 8).expect("recv");
        assert_eq!(got[0], sum * (c as u64 + 1), "child {c}'s answer");
    }
    merged(&inter, false, p as usize + n as usize);
    println!("OK parent {} of {}: {} children answered", world.rank(), world.size(), n);
}

fn child(rt: &runthrough::Runtime, inter: &runthrough::InterComm, args: &[String]) {
    let world = rt.world();
    assert_eq!(args.get(1).map(String::as_str), Some("child"));
    let parents: usize = args[2].parse().expect("parents");
    assert_eq!(inter.remote_size(), parents);
    assert_eq!(inter.size(), world.size());
    let mut sum = 0u64;
    for p in 0..parents {
        let mut got = [0u64];
        inter.recv(&mut got, p, 7).expect("recv");
        assert_eq!(got[0], p as u64);
        sum += got[0];
    }
    let answer = [sum * (world.rank() as u64 + 1)];
    for p in 0..parents {
        inter.send(&answer, p, 8).expect("send");
    }
    // The children's own world works on its own too.
    let mut total = [0u64];
    world.allreduce(&[1u64], &mut total, Op::Sum).expect("children's allreduce");
    assert_eq!(total[0], world.size() as u64);
    merged(inter, true, parents + world.size());
    println!(
        "OK child {} of {} (appnum {:?}, universe {:?})",
        world.rank(),
        world.size(),
        rt.appnum(),
        rt.universe_size()
    );
}

/// Merges (children high) and checks the merged communicator: size, order, allreduce.
fn merged(inter: &runthrough::InterComm, high: bool, n: usize) {
    let all = inter.merge(high).expect("merge");
    assert_eq!(all.size(), n);
    let mut total = [0u64];
    all.allreduce(&[all.rank() as u64], &mut total, Op::Sum).expect("allreduce");
    assert_eq!(total[0], (n * (n - 1) / 2) as u64);
    all.barrier().expect("barrier");
}
