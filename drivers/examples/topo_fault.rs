//! Process topologies through the Rust API, with and without a dead process (R38), for
//! tests/topo.rs.
//!
//! `rtrun -n N topo_fault MODE` (N even, ≥ 4); every survivor prints
//! `topo_fault: ok rank R MODE` or `topo_fault: rank R MODE FAILED: why`:
//! - `plain`: nobody dies. A Cartesian grid 2 × N/2 (periodic in dimension 0), its rows and
//!   columns (`cart_sub`), a ring graph, distributed graphs adjacent and general: every
//!   query checked against MPI's definitions, a message along every shift and edge;
//! - `recognized`: the last rank dies first and the survivors recognize it (`validate`);
//!   then every constructor still takes all N processes: the dead one is in the new
//!   communicators as a recognized failure (cart, graph: it "contributes the same
//!   values"; its row of `cart_sub` holds it), their barriers succeed among the
//!   survivors, and in `dist_graph_create` it contributes no edge (its successor has no
//!   source);
//! - `unrecognized`: the last rank dies and is not recognized: `cart_create` and
//!   `graph_create` err with `RankFailStop` at every survivor (uniform: nobody gets a
//!   communicator), and succeed once `validate` recognized it;
//! - `neighbor`: the grid is made with everyone alive, then the last rank dies: the
//!   survivors' neighbourhood collectives on it err with `RankFailStop` (no hang) until
//!   they validate the grid, then exchange among themselves (the dead neighbour's blocks
//!   keep what they held).
//!
//! - `neighbor_mid`: the last rank dies between two of a run of neighbourhood collectives
//!   on the grid: every survivor — the dead rank's neighbours and the others, whose
//!   neighbours stop exchanging — ends its run with `RankFailStop` in bounded time (no
//!   hang), validates the grid and exchanges again.
//!
//! In every mode the grid's `neighbor_alltoall` and `neighbor_allgather` are checked block
//! by block (dimension 0 has 2 processes and wraps: both neighbours there are one process,
//! and MPI's ordering says which block is which).
use runthrough::{Comm, DistGraph, Error, ErrorMode, NeighborKind, Topology};

use runthrough_drivers::{die, ensure, until_failed, R};

fn e(what: &'static str) -> impl Fn(Error) -> String {
    move |err| format!("{what}: {err}")
}

/// The grid 2 × n/2, periodic in dimension 0, over `world`; checks its queries.
fn grid(world: &Comm, dead: Option<usize>) -> R<Comm> {
    let n = world.size();
    let cart = world.cart_create(&[2, n / 2], &[true, false], true).map_err(e("cart_create"))?;
    let cart = cart.ok_or("cart_create gave no communicator")?;
    ensure(cart.size() == n && cart.rank() == world.rank(), || "cart keeps every rank in place".into())?;
    let Some(Topology::Cart(c)) = cart.topology() else { return Err("no Cartesian topology".into()) };
    let me = cart.rank();
    let k = c.coords(me).map_err(e("coords"))?;
    ensure(k == [me / (n / 2), me % (n / 2)], || format!("coords {k:?}"))?;
    let (up, down) = c.shift(me, 0, 1).map_err(e("shift"))?;
    let other = (me + n / 2) % n;
    ensure(up == Some(other) && down == Some(other), || format!("periodic shift {up:?} {down:?}"))?;
    let (left, right) = c.shift(me, 1, 1).map_err(e("shift"))?;
    let col = me % (n / 2);
    ensure(left == (col > 0).then(|| me - 1), || format!("left {left:?}"))?;
    ensure(right == (col + 1 < n / 2).then(|| me + 1), || format!("right {right:?}"))?;
    if let Some(d) = dead {
        let failed = cart.group_failed().world_ranks();
        ensure(failed == [d], || format!("the new grid's recognized failures {failed:?}, want [{d}]"))?;
    }
    cart.barrier().map_err(e("barrier on the grid"))?;
    // The duplicate keeps the topology.
    let dup = cart.dup().map_err(e("dup"))?;
    ensure(dup.topology() == cart.topology(), || "dup lost the topology".into())?;
    Ok(cart)
}

/// The grid's neighbourhood collectives, block by block; `dead` sends nothing.
fn exchange(cart: &Comm, dead: Option<usize>) -> R<()> {
    let Some(Topology::Cart(c)) = cart.topology() else { return Err("no grid".into()) };
    let me = cart.rank();
    let send: Vec<i64> = (0..4).map(|k| (me * 100 + k) as i64).collect();
    let mut recv = vec![-1i64; 4];
    cart.neighbor_alltoall(&send, &mut recv).map_err(e("neighbor_alltoall"))?;
    let mut all = vec![-1i64; 4];
    cart.neighbor_allgather(&[me as i64], &mut all).map_err(e("neighbor_allgather"))?;
    for d in 0..2 {
        let (below, above) = c.shift(me, d, 1).map_err(e("shift"))?;
        let live = |r: Option<usize>| r.filter(|&r| Some(r) != dead);
        // From below: what it sent up (its block 2d+1); from above: what it sent down.
        let want = [
            live(below).map_or(-1, |b| (b * 100 + 2 * d + 1) as i64),
            live(above).map_or(-1, |a| (a * 100 + 2 * d) as i64),
        ];
        ensure(recv[2 * d..2 * d + 2] == want, || format!("alltoall dim {d}: {:?} want {want:?}", &recv[2 * d..]))?;
        let want = [live(below).map_or(-1, |b| b as i64), live(above).map_or(-1, |a| a as i64)];
        ensure(all[2 * d..2 * d + 2] == want, || format!("allgather dim {d}: {:?} want {want:?}", &all[2 * d..]))?;
    }
    // The v forms, blocks laid out backwards in the send buffer: the same values arrive.
    let mut sendv = vec![0i64; 8];
    for k in 0..4 {
        sendv[6 - 2 * k] = send[k];
        sendv[7 - 2 * k] = send[k] + 50;
    }
    let mut recvv = vec![-1i64; 8];
    cart.neighbor_alltoallv(&sendv, &[2; 4], &[6, 4, 2, 0], &mut recvv, &[2; 4], &[0, 2, 4, 6])
        .map_err(e("neighbor_alltoallv"))?;
    let firsts: Vec<i64> = (0..4).map(|k| recvv[2 * k]).collect();
    let seconds_ok = (0..4).all(|k| recvv[2 * k + 1] == if recvv[2 * k] < 0 { -1 } else { recvv[2 * k] + 50 });
    ensure(firsts == recv && seconds_ok, || format!("alltoallv {recvv:?}, alltoall gave {recv:?}"))?;
    let mut allv = vec![-1i64; 4];
    cart.neighbor_allgatherv(&[me as i64], &mut allv, &[1; 4], &[3, 2, 1, 0]).map_err(e("neighbor_allgatherv"))?;
    allv.reverse();
    ensure(allv == all, || format!("allgatherv {allv:?}, allgather gave {all:?}"))?;
    // Nonblocking: both started before either is waited for, then a blocking
    // collective in between; persistent: started twice. The same blocks arrive.
    let mut a = cart.ineighbor_alltoall(&send, vec![-1i64; 4]).map_err(e("ineighbor_alltoall"))?;
    let g = cart.ineighbor_allgather(&[me as i64], vec![-1i64; 4]).map_err(e("ineighbor_allgather"))?;
    while !a.test() {}
    let got = a.wait().map_err(e("ineighbor_alltoall wait"))?;
    ensure(got == recv, || format!("ineighbor_alltoall {got:?}, neighbor_alltoall gave {recv:?}"))?;
    cart.barrier().map_err(e("barrier between nonblocking neighbourhood collectives"))?;
    let got = g.wait().map_err(e("ineighbor_allgather wait"))?;
    ensure(got == all, || format!("ineighbor_allgather {got:?}, neighbor_allgather gave {all:?}"))?;
    let p = cart.neighbor_init(NeighborKind::Alltoall).map_err(e("neighbor_init"))?;
    for _ in 0..2 {
        let got = p.start(&send, vec![-1i64; 4]).and_then(|r| r.wait()).map_err(e("persistent neighbor_alltoall"))?;
        ensure(got == recv, || format!("persistent neighbor_alltoall {got:?}, neighbor_alltoall gave {recv:?}"))?;
    }
    Ok(())
}

fn rows_and_columns(cart: &Comm, dead: Option<usize>) -> R<()> {
    let n = cart.size();
    let me = cart.rank();
    let row = cart.cart_sub(&[false, true]).map_err(e("cart_sub row"))?;
    let col = cart.cart_sub(&[true, false]).map_err(e("cart_sub column"))?;
    ensure(row.size() == n / 2 && row.rank() == me % (n / 2), || format!("row {} {}", row.size(), row.rank()))?;
    ensure(col.size() == 2 && col.rank() == me / (n / 2), || format!("column {} {}", col.size(), col.rank()))?;
    let Some(Topology::Cart(rc)) = row.topology() else { return Err("row without a grid".into()) };
    ensure(rc.dims() == [n / 2] && rc.periods() == [false], || format!("row grid {rc:?}"))?;
    let members = row.group().world_ranks();
    let want: Vec<usize> = (0..n / 2).map(|j| me / (n / 2) * (n / 2) + j).collect();
    ensure(members == want, || format!("row members {members:?}, want {want:?}"))?;
    if let Some(d) = dead.filter(|d| want.contains(d)) {
        let failed = row.group_failed().world_ranks();
        ensure(failed == [d], || format!("row's recognized failures {failed:?}"))?;
    }
    row.barrier().map_err(e("barrier on a row"))?;
    col.barrier().map_err(e("barrier on a column"))?;
    Ok(())
}

fn graphs(world: &Comm, dead: Option<usize>) -> R<()> {
    let (n, me) = (world.size(), world.rank());
    // A ring: node i's neighbours are i-1 and i+1.
    let mut index = Vec::new();
    let mut edges = Vec::new();
    for i in 0..n {
        edges.extend([(i + n - 1) % n, (i + 1) % n]);
        index.push(edges.len());
    }
    let g = world.graph_create(&index, &edges, false).map_err(e("graph_create"))?.ok_or("graph gave none")?;
    let Some(Topology::Graph(t)) = g.topology() else { return Err("no graph topology".into()) };
    let nb = t.neighbors(me).map_err(e("neighbors"))?;
    ensure(nb == [(me + n - 1) % n, (me + 1) % n], || format!("ring neighbours {nb:?}"))?;
    g.barrier().map_err(e("barrier on the graph"))?;
    // Adjacent: from the left, to the right.
    let adj = DistGraph {
        sources: vec![(me + n - 1) % n],
        source_weights: None,
        destinations: vec![(me + 1) % n],
        destination_weights: None,
    };
    let a = world.dist_graph_create_adjacent(adj.clone(), false).map_err(e("dist_graph_create_adjacent"))?;
    ensure(a.topology() == Some(&Topology::DistGraph(adj)), || "adjacent graph".into())?;
    // General: every live member gives its edge to the right, weight 100 + itself.
    let mine = [(me, (me + 1) % n, 100 + me as i32)];
    let d = world.dist_graph_create(&mine, true, false).map_err(e("dist_graph_create"))?;
    let Some(Topology::DistGraph(t)) = d.topology() else { return Err("no distributed graph".into()) };
    let left = (me + n - 1) % n;
    let (want_src, want_w) = if dead == Some(left) { (vec![], vec![]) } else { (vec![left], vec![100 + left as i32]) };
    ensure(t.sources == want_src && t.source_weights.as_deref() == Some(&want_w[..]), || format!("sources {t:?}"))?;
    ensure(t.destinations == [(me + 1) % n], || format!("destinations {t:?}"))?;
    // A message along each live edge: to the right, from the left.
    let right = (me + 1) % n;
    if dead != Some(right) {
        d.send(&[me as u64], right, 9).map_err(e("send along the edge"))?;
    }
    if dead != Some(left) {
        let mut got = [0u64];
        d.recv(&mut got, left, 9).map_err(e("recv along the edge"))?;
        ensure(got[0] == left as u64, || format!("got {} from the left", got[0]))?;
    }
    Ok(())
}

fn run(world: &Comm, mode: &str) -> R<()> {
    let n = world.size();
    ensure(n >= 4 && n.is_multiple_of(2), || "an even number of ranks, at least 4".into())?;
    let victim = n - 1;
    match mode {
        "plain" => {
            let cart = grid(world, None)?;
            exchange(&cart, None)?;
            rows_and_columns(&cart, None)?;
            graphs(world, None)
        }
        "recognized" => {
            // The victim dies first thing (a barrier before it could fail at a member
            // whose last message from it was lost with it).
            if world.rank() == victim {
                die();
            }
            until_failed(world, victim)?;
            let failed = world.validate().map_err(e("validate"))?.world_ranks();
            ensure(failed == [victim], || format!("validate {failed:?}"))?;
            let cart = grid(world, Some(victim))?;
            exchange(&cart, Some(victim))?;
            rows_and_columns(&cart, Some(victim))?;
            graphs(world, Some(victim))
        }
        "neighbor" => {
            let cart = grid(world, None)?;
            if world.rank() == victim {
                die();
            }
            until_failed(world, victim)?;
            let mut recv = vec![0i64; 4];
            match cart.neighbor_alltoall(&[0i64; 4], &mut recv) {
                Err(Error::RankFailStop { .. }) => {}
                other => return Err(format!("neighbor_alltoall with an unrecognized failure: {other:?}")),
            }
            let failed = cart.validate().map_err(e("validate the grid"))?.world_ranks();
            ensure(failed == [victim], || format!("the grid's validate {failed:?}"))?;
            exchange(&cart, Some(victim))
        }
        "unrecognized" => {
            if world.rank() == victim {
                die();
            }
            until_failed(world, victim)?;
            match world.cart_create(&[2, n / 2], &[false, false], false) {
                Err(Error::RankFailStop { .. }) => {}
                other => {
                    return Err(format!("cart_create with an unrecognized failure: {:?}", other.map(|c| c.is_some())))
                }
            }
            match world.graph_create(&vec![0; n], &[], false) {
                Err(Error::RankFailStop { .. }) => {}
                other => {
                    return Err(format!("graph_create with an unrecognized failure: {:?}", other.map(|c| c.is_some())))
                }
            }
            world.validate().map_err(e("validate"))?;
            grid(world, Some(victim)).map(drop)
        }
        "neighbor_mid" => {
            let cart = grid(world, None)?;
            let mut failed_at = None;
            for i in 0..400 {
                if world.rank() == victim && i == 150 {
                    die();
                }
                let mut recv = vec![0i64; 4];
                match cart.neighbor_alltoall(&[i as i64; 4], &mut recv) {
                    Ok(()) => {}
                    Err(Error::RankFailStop { .. }) => {
                        failed_at = Some(i);
                        break;
                    }
                    Err(other) => return Err(format!("exchange {i}: {other}")),
                }
            }
            // The victim's last exchange (149) returned at the victim, but what it sent may
            // not have left it before it died: a survivor may fail there, never earlier.
            ensure(failed_at.is_some_and(|i| i >= 149), || format!("the run ended at {failed_at:?}"))?;
            until_failed(world, victim)?;
            let failed = cart.validate().map_err(e("validate the grid"))?.world_ranks();
            ensure(failed == [victim], || format!("the grid's validate {failed:?}"))?;
            exchange(&cart, Some(victim))
        }
        other => Err(format!("unknown mode {other:?}")),
    }
}

fn main() -> Result<(), Error> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let rt = runthrough::init()?;
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let me = world.rank();
    match run(&world, &mode) {
        Ok(()) => println!("topo_fault: ok rank {me} {mode}"),
        Err(why) => {
            println!("topo_fault: rank {me} {mode} FAILED: {why}");
            std::process::exit(1);
        }
    }
    rt.finalize()
}
