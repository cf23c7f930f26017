//! Inter-communicators through the Rust API, with and without dead processes (R39), for
//! tests/intercomm.rs.
//!
//! `rtrun -n N intercomm MODE [VICTIM]` (N ≥ 5). The two groups are not contiguous and
//! not equal: group A holds the world ranks divisible by 3, group B the others; each is
//! led by its local rank 1 (world 3 and world 2), over the world as peer. Every survivor
//! prints `intercomm: ok rank R MODE ...` or `intercomm: rank R MODE FAILED: why`:
//! - `plain`: nobody dies. Sizes, ranks and remote groups; a message to every remote
//!   member; every collective (barrier, bcast both ways, gather, scatter, allgather,
//!   allgatherv, alltoall, reduce, allreduce, reduce_scatter) value by value; merge with
//!   both `high` orders; dup and split;
//! - `recognized`: the last rank dies after the groups are made, they validate it, then
//!   creation takes it in as a recognised failure: `remote_size` counts it, collectives
//!   skip it, merge holds it;
//! - `unrecognized`: the same death not validated: creation errs with `RankFailStop` at
//!   every survivor, then succeeds after validate;
//! - `kill_create VICTIM` / `kill_merge VICTIM`: every rank creates (and merges) in a loop;
//!   VICTIM kills itself at a pseudo-random moment. Each survivor prints the number of the
//!   first creation (merge) that failed — the same everywhere if they are uniform — and
//!   then recovers (validate, create again);
//! - `coll_mid`: the last rank dies in a run of inter-communicator allreduces: every
//!   survivor ends the run with `RankFailStop` in bounded time, validates, reduces again.

use std::time::{Duration, Instant};

use runthrough::{Comm, Error, ErrorMode, InterComm, InterRoot};

use runthrough_drivers::{die, ensure, until_failed, R};

fn e(what: &'static str) -> impl Fn(Error) -> String {
    move |err| format!("{what}: {err}")
}

/// The world ranks of the group of `w` (A: divisible by 3).
fn side(n: usize, in_a: bool) -> Vec<usize> {
    (0..n).filter(|r| r.is_multiple_of(3) == in_a).collect()
}

/// This rank's group communicator (split of the world).
fn halves(world: &Comm) -> R<Comm> {
    let in_a = world.rank().is_multiple_of(3);
    let c = world.split(Some(u32::from(in_a)), 0).map_err(e("split"))?;
    c.ok_or_else(|| "split gave no communicator".into())
}

fn create(world: &Comm, local: &Comm) -> Result<InterComm, Error> {
    create_led(world, local, 1)
}

/// As [`create`], each group led by its local rank `lead`.
fn create_led(world: &Comm, local: &Comm, lead: usize) -> Result<InterComm, Error> {
    let in_a = world.rank().is_multiple_of(3);
    let other = side(world.size(), !in_a);
    local.intercomm_create(lead, (local.rank() == lead).then_some(world), other[lead], 7)
}

/// Checks the groups and ranks of `ic` (no member dead).
fn check_shape(world: &Comm, ic: &InterComm) -> R<()> {
    let n = world.size();
    let in_a = world.rank().is_multiple_of(3);
    let (mine, other) = (side(n, in_a), side(n, !in_a));
    ensure(ic.size() == mine.len() && ic.remote_size() == other.len(), || "sizes".into())?;
    ensure(mine[ic.rank()] == world.rank(), || format!("local rank {}", ic.rank()))?;
    ensure(ic.remote_group().world_ranks() == other, || format!("remote group {:?}", ic.remote_group().world_ranks()))?;
    ensure(ic.group().world_ranks() == mine, || "local group".into())
}

/// Every collective, value by value (values: world rank + 1; `dead` skipped).
fn check_colls(world: &Comm, ic: &InterComm, dead: Option<usize>) -> R<()> {
    let n = world.size();
    let me = world.rank() as u64;
    let in_a = world.rank().is_multiple_of(3);
    let (mine, other) = (side(n, in_a), side(n, !in_a));
    let (m, k) = (mine.len(), other.len());
    let live = |w: &usize| Some(*w) != dead;
    ic.barrier().map_err(e("barrier"))?;
    // bcast from A's rank 0 to B, then from B's rank 1 to A.
    for (root_in_a, root) in [(true, 0usize), (false, 1usize)] {
        let mut buf = [0u64; 3];
        let role = if in_a == root_in_a {
            if ic.rank() == root {
                buf = [me, 11, 12];
                InterRoot::Root
            } else {
                InterRoot::Null
            }
        } else {
            InterRoot::Remote(root)
        };
        ic.bcast(&mut buf, role).map_err(e("bcast"))?;
        if in_a != root_in_a {
            let want = side(n, root_in_a)[root] as u64;
            ensure(buf == [want, 11, 12], || format!("bcast got {buf:?}"))?;
        }
    }
    // gather and scatter rooted at A's rank 0.
    let role = if in_a {
        if ic.rank() == 0 {
            InterRoot::Root
        } else {
            InterRoot::Null
        }
    } else {
        InterRoot::Remote(0)
    };
    let mut got = vec![u64::MAX; if role == InterRoot::Root { 2 * k } else { 0 }];
    ic.gather(&[me, me * 10], &mut got, role).map_err(e("gather"))?;
    if role == InterRoot::Root {
        for (j, w) in other.iter().enumerate().filter(|(_, w)| live(w)) {
            ensure(got[2 * j..2 * j + 2] == [*w as u64, *w as u64 * 10], || format!("gather {got:?}"))?;
        }
    }
    let send: Vec<u64> = if role == InterRoot::Root { other.iter().map(|&w| w as u64 + 100).collect() } else { vec![] };
    let mut one = [0u64];
    ic.scatter(&send, &mut one, role).map_err(e("scatter"))?;
    if !in_a {
        ensure(one[0] == me + 100, || format!("scatter {one:?}"))?;
    }
    // allgather, allgatherv (remote member j sends j + 1 values), alltoall.
    let mut all = vec![u64::MAX; k];
    ic.allgather(&[me], &mut all).map_err(e("allgather"))?;
    for (j, w) in other.iter().enumerate().filter(|(_, w)| live(w)) {
        ensure(all[j] == *w as u64, || format!("allgather {all:?}"))?;
    }
    let mine_v: Vec<u64> = vec![me; ic.rank() + 1];
    let counts: Vec<usize> = (1..=k).collect();
    let displs: Vec<usize> = (0..k).map(|j| j * (j + 1) / 2).collect();
    let mut allv = vec![u64::MAX; k * (k + 1) / 2];
    ic.allgatherv(&mine_v, &mut allv, &counts, &displs).map_err(e("allgatherv"))?;
    for (j, w) in other.iter().enumerate().filter(|(_, w)| live(w)) {
        ensure(allv[displs[j]..displs[j] + j + 1].iter().all(|&x| x == *w as u64), || format!("allgatherv {allv:?}"))?;
    }
    let send: Vec<u64> = (0..k).map(|j| me * 1000 + j as u64).collect();
    let mut recv = vec![u64::MAX; k];
    ic.alltoall(&send, &mut recv).map_err(e("alltoall"))?;
    for (j, w) in other.iter().enumerate().filter(|(_, w)| live(w)) {
        ensure(recv[j] == *w as u64 * 1000 + ic.rank() as u64, || format!("alltoall {recv:?}"))?;
    }
    // reductions: sums of (world rank + 1) over the other group's live members; a
    // non-commutative "keep the first" checks the order (remote rank 0's value, or the
    // first live one's).
    let sum: u64 = other.iter().filter(|w| live(w)).map(|&w| w as u64 + 1).sum();
    let add = |acc: &mut [u64], inc: &[u64]| acc.iter_mut().zip(inc).for_each(|(a, b)| *a += b);
    let mut out = [0u64; 2];
    ic.allreduce_with(&[me + 1, 1], &mut out, &add).map_err(e("allreduce"))?;
    ensure(out == [sum, other.iter().filter(|w| live(w)).count() as u64], || format!("allreduce {out:?}"))?;
    let first = |acc: &mut [u64], inc: &[u64]| acc.copy_from_slice(inc);
    let mut f = [0u64];
    ic.allreduce_with(&[me], &mut f, &first).map_err(e("allreduce first"))?;
    let want_first = *other.iter().find(|w| live(w)).unwrap() as u64;
    ensure(f == [want_first], || format!("non-commutative allreduce {f:?}, want {want_first}"))?;
    let role = if in_a {
        InterRoot::Remote(0)
    } else if ic.rank() == 0 {
        InterRoot::Root
    } else {
        InterRoot::Null
    };
    let mut red = [0u64];
    ic.reduce_with(&[me + 1], &mut red, role, &add).map_err(e("reduce"))?;
    if role == InterRoot::Root {
        ensure(red[0] == sum, || format!("reduce {red:?}"))?;
    }
    // reduce_scatter: every member sends (m + k) ones... the sums must be the same length
    // on both sides: each side's vector has 12 elements, split by its own counts.
    let counts: Vec<usize> = (0..m).map(|i| if i == 0 { 12 - (m - 1) } else { 1 }).collect();
    let vec12: Vec<u64> = (0..12).map(|x| x * (me + 1)).collect();
    let mut part = vec![0u64; counts[ic.rank()]];
    ic.reduce_scatter_with(&vec12, &mut part, &counts, &add).map_err(e("reduce_scatter"))?;
    let start: usize = counts[..ic.rank()].iter().sum();
    for (i, x) in part.iter().enumerate() {
        ensure(*x == (start + i) as u64 * sum, || format!("reduce_scatter {part:?}"))?;
    }
    Ok(())
}

fn check_merge(world: &Comm, ic: &InterComm, dead: Option<usize>) -> R<()> {
    let n = world.size();
    let in_a = world.rank().is_multiple_of(3);
    for a_high in [true, false] {
        let merged = ic.merge(in_a == a_high).map_err(e("merge"))?;
        let (first, second) = if a_high { (side(n, false), side(n, true)) } else { (side(n, true), side(n, false)) };
        let want: Vec<usize> = first.into_iter().chain(second).collect();
        ensure(merged.group().world_ranks() == want, || format!("merged group {:?}", merged.group().world_ranks()))?;
        ensure(want[merged.rank()] == world.rank(), || "merged rank".into())?;
        if let Some(d) = dead {
            ensure(merged.group_failed().world_ranks() == [d], || "merged keeps the recognised failure".into())?;
        }
        merged.barrier().map_err(e("merged barrier"))?;
    }
    Ok(())
}

fn plain(world: &Comm) -> R<String> {
    let local = halves(world)?;
    let ic = create(world, &local).map_err(e("intercomm_create"))?;
    check_shape(world, &ic)?;
    // A message to every remote member, one from each.
    for j in 0..ic.remote_size() {
        ic.send(&[world.rank() as u64, j as u64], j, 3).map_err(e("send"))?;
    }
    let other = side(world.size(), !world.rank().is_multiple_of(3));
    for _ in 0..ic.remote_size() {
        let mut b = [0u64; 2];
        let st = ic.recv(&mut b, runthrough::ANY_SOURCE, 3).map_err(e("recv"))?;
        ensure(b == [other[st.source] as u64, ic.rank() as u64], || format!("message {b:?} from {}", st.source))?;
    }
    check_colls(world, &ic, None)?;
    check_merge(world, &ic, None)?;
    let d = ic.dup().map_err(e("dup"))?;
    check_shape(world, &d)?;
    check_colls(world, &d, None)?;
    // The nonblocking dup gives the same shape.
    let mut r = ic.idup().map_err(e("idup"))?;
    let di = loop {
        if let Some(out) = ic.test_dup(&mut r) {
            break out.map_err(e("idup test"))?;
        }
        std::thread::yield_now();
    };
    check_shape(world, &di)?;
    di.barrier().map_err(e("idup barrier"))?;
    // split by local rank parity: a color with no remote member gives None.
    let s = ic.split(Some((ic.rank() % 2) as u32), 0).map_err(e("split"))?;
    if let Some(s) = &s {
        ensure(s.remote_size() >= 1 && s.size() >= 1, || "split sizes".into())?;
        s.barrier().map_err(e("split barrier"))?;
    }
    ensure(ic.validate().map_err(e("validate"))?.size() == 0, || "validate found failures".into())?;
    Ok(String::new())
}

fn with_dead(world: &Comm, recognize: bool) -> R<String> {
    let n = world.size();
    let dead = n - 1;
    let local = halves(world)?;
    if world.rank() == dead {
        die();
    }
    until_failed(world, dead)?;
    if !recognize {
        match create(world, &local) {
            Err(Error::RankFailStop { .. }) => {}
            other => return Err(format!("creation with an unrecognised failure gave {other:?}")),
        }
    }
    local.validate().map_err(e("validate local"))?;
    world.validate().map_err(e("validate world"))?;
    let ic = create(world, &local).map_err(e("intercomm_create"))?;
    let in_a = world.rank().is_multiple_of(3);
    ensure(ic.remote_size() == side(n, !in_a).len(), || "remote_size counts the dead".into())?;
    ensure(ic.group_failed().world_ranks() == [dead], || format!("failed {:?}", ic.group_failed().world_ranks()))?;
    check_colls(world, &ic, Some(dead))?;
    check_merge(world, &ic, Some(dead))?;
    Ok(String::new())
}

/// A pseudo-random delay in 0..`max` ms from the clock.
fn jitter(max: u64) -> u64 {
    let t = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    (t.subsec_nanos() as u64 / 7919) % max
}

fn kill_loop(world: &Comm, victim: usize, merge: bool) -> R<String> {
    let local = halves(world)?;
    world.barrier().map_err(e("barrier"))?;
    if world.rank() == victim {
        let ms = 5 + jitter(if merge { 120 } else { 80 });
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            die();
        });
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut first_fail = None;
    for i in 0.. {
        ensure(Instant::now() < deadline, || "no creation failed in 60 s".into())?;
        let r = create(world, &local).map_err(|e| ("create", e)).and_then(|ic| {
            if merge {
                ic.merge(false).map(drop).map_err(|e| ("merge", e))
            } else {
                Ok(())
            }
        });
        if let Err((what, err)) = r {
            ensure(matches!(err, Error::RankFailStop { .. }), || format!("iteration {i}: {what}: {err}"))?;
            first_fail = Some((i, what));
            break;
        }
    }
    let Some((i, what)) = first_fail else { return Err("the victim's death never failed a creation".into()) };
    until_failed(world, victim)?;
    local.validate().map_err(e("validate local"))?;
    world.validate().map_err(e("validate world"))?;
    // The victims are never a local rank 0: those lead now.
    let ic = create_led(world, &local, 0).map_err(e("create after validate"))?;
    let merged = ic.merge(true).map_err(e("merge after validate"))?;
    merged.barrier().map_err(e("merged barrier"))?;
    Ok(format!("first_fail {i} in {what}"))
}

fn coll_mid(world: &Comm) -> R<String> {
    let n = world.size();
    let dead = n - 1;
    let local = halves(world)?;
    let ic = create(world, &local).map_err(e("intercomm_create"))?;
    let add = |acc: &mut [u64], inc: &[u64]| acc.iter_mut().zip(inc).for_each(|(a, b)| *a += b);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut out = [0u64];
    for i in 0.. {
        if world.rank() == dead && i == 20 {
            die();
        }
        ensure(Instant::now() < deadline, || "no error in 60 s".into())?;
        match ic.allreduce_with(&[1], &mut out, &add) {
            Ok(()) => {}
            Err(Error::RankFailStop { .. }) => break,
            Err(err) => return Err(format!("allreduce {i}: {err}")),
        }
    }
    until_failed(world, dead)?;
    ic.validate().map_err(e("validate"))?;
    let in_a = world.rank().is_multiple_of(3);
    let live = side(n, !in_a).iter().filter(|&&w| w != dead).count() as u64;
    ic.allreduce_with(&[1], &mut out, &add).map_err(e("allreduce after validate"))?;
    ensure(out[0] == live, || format!("allreduce after validate {out:?}, want {live}"))?;
    Ok(String::new())
}

fn run(world: &Comm, mode: &str, victim: usize) -> R<String> {
    match mode {
        "plain" => plain(world),
        "recognized" => with_dead(world, true),
        "unrecognized" => with_dead(world, false),
        "kill_create" => kill_loop(world, victim, false),
        "kill_merge" => kill_loop(world, victim, true),
        "coll_mid" => coll_mid(world),
        _ => Err(format!("unknown mode {mode:?}")),
    }
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let victim: usize = std::env::args().nth(2).and_then(|v| v.parse().ok()).unwrap_or(0);
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let me = world.rank();
    match run(&world, &mode, victim) {
        Ok(extra) => println!("intercomm: ok rank {me} {mode} {extra}"),
        Err(why) => {
            println!("intercomm: rank {me} {mode} FAILED: {why}");
            std::process::exit(1);
        }
    }
    rt.finalize()
}
