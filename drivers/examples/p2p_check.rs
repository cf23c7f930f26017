//! All-pairs point-to-point check (used by the multi-process tests): every rank sends
//! every other rank `K` messages of pseudo-random sizes from 0 B to `MAX` (eager and
//! rendezvous), then receives them twice over — first with specific sources and
//! ANY_TAG, then with ANY_SOURCE — verifying every byte and the per-source order.
//!
//! `rtrun -n 4 p2p_check [K] [MAX_BYTES] [SEED]`; prints `p2p_check: ok ...` on rank 0.

use runthrough::{Comm, Error, ANY_SOURCE, ANY_TAG};

/// SplitMix64: a tiny deterministic generator both sides can replay.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn size_of(seed: u64, from: usize, to: usize, k: usize, max: usize) -> usize {
    let h = mix(seed ^ ((from as u64) << 40) ^ ((to as u64) << 20) ^ k as u64);
    let class = h % 100;
    let r = (h >> 8) as usize;
    match class {
        0..=4 => 0,
        5..=59 => r % 257.min(max + 1),
        60..=84 => r % 65_537.min(max + 1),
        _ => r % (max + 1),
    }
}

fn fill(buf: &mut [u8], seed: u64, from: usize, to: usize, k: usize) {
    let base = mix(seed ^ 0xabcd ^ ((from as u64) << 32) ^ ((to as u64) << 16) ^ k as u64);
    for (i, chunk) in buf.chunks_mut(8).enumerate() {
        let v = mix(base.wrapping_add(i as u64)).to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
}

fn tag_of(k: usize) -> i32 {
    (k % 5) as i32
}

fn check(got: &[u8], seed: u64, from: usize, to: usize, k: usize, round: &str) {
    let mut want = vec![0u8; got.len()];
    fill(&mut want, seed, from, to, k);
    if got != want.as_slice() {
        eprintln!("p2p_check: {round}: message {k} from {from} to {to} has wrong contents");
        std::process::exit(3);
    }
}

fn round(world: &Comm, k_msgs: usize, max: usize, seed: u64, any_source: bool) -> Result<usize, Error> {
    let (me, n) = (world.rank(), world.size());
    let mut out: Vec<(usize, usize, Vec<u8>)> = Vec::new();
    for to in (0..n).filter(|&p| p != me) {
        for k in 0..k_msgs {
            let mut m = vec![0u8; size_of(seed, me, to, k, max)];
            fill(&mut m, seed, me, to, k);
            out.push((to, k, m));
        }
    }
    runthrough::scope(|ss| {
        let mut sends = Vec::with_capacity(out.len());
        for (to, k, m) in &out {
            sends.push(world.isend(ss, m, *to, tag_of(*k))?);
        }
        let mut bytes = 0;
        if any_source {
            let mut next = vec![0usize; n];
            let mut buf = vec![0u8; max];
            for _ in 0..(n - 1) * k_msgs {
                let st = world.recv(&mut buf, ANY_SOURCE, ANY_TAG)?;
                let k = next[st.source];
                next[st.source] += 1;
                if st.len != size_of(seed, st.source, me, k, max) || st.tag != tag_of(k) {
                    eprintln!(
                        "p2p_check: any-source: from {} got len {} tag {} for message {k}",
                        st.source, st.len, st.tag
                    );
                    std::process::exit(3);
                }
                check(&buf[..st.len], seed, st.source, me, k, "any-source");
                bytes += st.len;
            }
        } else {
            let mut bufs: Vec<(usize, usize, Vec<u8>)> = Vec::new();
            for from in (0..n).filter(|&p| p != me) {
                for k in 0..k_msgs {
                    bufs.push((from, k, vec![0u8; size_of(seed, from, me, k, max)]));
                }
            }
            let meta: Vec<(usize, usize)> = bufs.iter().map(|b| (b.0, b.1)).collect();
            runthrough::scope(|rs| {
                let mut recvs = Vec::with_capacity(bufs.len());
                for (from, _, b) in bufs.iter_mut() {
                    recvs.push(world.irecv(rs, b, *from, ANY_TAG)?);
                }
                for (r, &(from, k)) in recvs.into_iter().zip(&meta) {
                    let st = r.wait()?;
                    if st.tag != tag_of(k) || st.source != from {
                        eprintln!(
                            "p2p_check: specific: got tag {} from {}, expected message {k} from {from}",
                            st.tag, st.source
                        );
                        std::process::exit(3);
                    }
                }
                Ok::<_, Error>(())
            })?;
            for (from, k, b) in &bufs {
                check(b, seed, *from, me, *k, "specific");
                bytes += b.len();
            }
        }
        runthrough::wait_all(&mut sends)?;
        Ok(bytes)
    })
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().collect();
    let k_msgs: usize = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(10);
    let max: usize = args.get(2).and_then(|a| a.parse().ok()).unwrap_or(4 << 20);
    let seed: u64 = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(7);
    let rt = runthrough::init()?;
    let world = rt.world();
    let a = round(&world, k_msgs, max, seed, false)?;
    world.barrier()?;
    let b = round(&world, k_msgs, max, seed.wrapping_add(1), true)?;
    world.barrier()?;
    if world.rank() == 0 {
        println!(
            "p2p_check: transport: {}\np2p_check: ok ranks={} msgs_per_pair={k_msgs} max={max} rank0_bytes={} shm={}",
            rt.describe(),
            world.size(),
            a + b,
            std::env::var("RT_SHM_NAME").unwrap_or_default()
        );
    }
    rt.finalize()
}
