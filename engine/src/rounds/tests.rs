use super::*;

/// Every send of a schedule set has exactly one matching receive, in the same
/// position of the peers' round sequences relative order (no deadlock): simulate the
/// rounds of all members with message counters.
fn runs_to_completion(build: impl Fn(usize) -> Vec<Round>, n: usize) -> bool {
    let mut scheds: Vec<Vec<Round>> = (0..n).map(&build).collect();
    let mut at = vec![0usize; n];
    // in-flight[(from, to)] = count of sends not yet received.
    let mut inflight = std::collections::HashMap::<(usize, usize), usize>::new();
    let mut sent = vec![false; n];
    for _ in 0..10 * n * n + 10 {
        let mut moved = false;
        for m in 0..n {
            let Some(r) = scheds[m].get_mut(at[m]) else { continue };
            if !sent[m] {
                for (to, _) in &r.sends {
                    *inflight.entry((m, *to)).or_default() += 1;
                }
                sent[m] = true;
                moved = true;
            }
            let ready = r.recvs.iter().all(|(from, _)| inflight.get(&(*from, m)).copied().unwrap_or(0) > 0);
            if ready {
                for (from, _) in &r.recvs {
                    *inflight.get_mut(&(*from, m)).unwrap() -= 1;
                }
                at[m] += 1;
                sent[m] = false;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    (0..n).all(|m| at[m] == scheds[m].len()) && inflight.values().all(|&c| c == 0)
}

#[test]
fn schedules_complete_for_every_size_and_root() {
    for n in 1..=9 {
        assert!(runs_to_completion(|m| barrier(n, m).0, n), "barrier n={n}");
        for root in 0..n {
            assert!(runs_to_completion(|m| bcast(n, m, root, 8).0, n), "bcast n={n} root={root}");
            assert!(runs_to_completion(|m| reduce(n, m, root, &Loc::User(0..8), 0).0, n), "reduce n={n} root={root}");
        }
        let all = |m: usize| {
            let mut r = reduce(n, m, 0, &Loc::User(0..8), 0).0;
            r.extend(bcast(n, m, 0, 8).0);
            r
        };
        assert!(runs_to_completion(all, n), "allreduce n={n}");
    }
}

/// Every plan, over every participant set of up to 7 members drawn from a communicator
/// of 7 (a missing member stands for a recognised failure), completes without deadlock.
#[test]
fn every_plan_completes_over_any_participants() {
    let size = 7usize;
    let blocks: Vec<Range<usize>> = (0..size).map(|i| i * 4..i * 4 + 4).collect();
    for mask in 1u32..(1 << size) {
        let alive: Vec<u32> = (0..size as u32).filter(|r| mask & (1 << r) != 0).collect();
        let root = alive[alive.len() / 2];
        let plans = [
            Plan::Barrier,
            Plan::Bcast { root, len: 8 },
            Plan::Reduce { root, len: 8 },
            Plan::Allreduce { len: 8 },
            Plan::Gatherv { root, blocks: blocks.clone() },
            Plan::Scatterv { root, blocks: blocks.clone() },
            Plan::Allgatherv { blocks: blocks.clone() },
            Plan::Alltoallv { sends: blocks.clone(), recvs: blocks.clone() },
            Plan::ReduceScatter { len: 28, blocks: blocks.clone() },
            Plan::Scan { len: 8 },
            Plan::Exscan { len: 8 },
        ];
        for plan in &plans {
            let build = |v: usize| compile(plan, &alive, v, 64).expect("root is a participant").0;
            assert!(runs_to_completion(build, alive.len()), "{plan:?} over {alive:?}");
        }
    }
}

/// A neighbourhood exchange (each member sends to the next two and receives from the
/// previous two, the plan its own) completes over any participants, skipping the absent.
#[test]
fn a_neighbourhood_exchange_completes_over_any_participants() {
    let size = 7u32;
    for mask in 1u32..(1 << size) {
        let alive: Vec<u32> = (0..size).filter(|r| mask & (1 << r) != 0).collect();
        let build = |v: usize| {
            let l = alive[v];
            let plan = Plan::Neighbor {
                sends: vec![((l + 1) % size, 0..4), ((l + 2) % size, 4..8)],
                recvs: vec![((l + size - 1) % size, 8..12), ((l + size - 2) % size, 12..16)],
            };
            let rounds = compile(&plan, &alive, v, 64).expect("no root").0;
            let peers = rounds.iter().flat_map(|r| r.sends.iter().chain(&r.recvs)).count();
            let present = |x: u32| alive.contains(&x) && x != l;
            let want = [(l + 1) % size, (l + 2) % size, (l + size - 1) % size, (l + size - 2) % size]
                .into_iter()
                .filter(|&x| present(x))
                .count();
            assert_eq!(peers, want, "member {l} over {alive:?}: absent neighbours and itself are skipped");
            rounds
        };
        assert!(runs_to_completion(build, alive.len()), "neighbourhood over {alive:?}");
    }
}

#[test]
fn a_root_that_is_not_a_participant_is_a_failure() {
    let alive = [0u32, 2, 3];
    let r = compile(&Plan::Bcast { root: 1, len: 4 }, &alive, 0, 0);
    assert!(matches!(r, Err(Error::RankFailStop { rank: 1 })), "{r:?}");
}

#[test]
fn gather_lands_each_block_where_its_rank_says() {
    let blocks: Vec<Range<usize>> = (0..4).map(|i| i * 10..i * 10 + 3).collect();
    // Rank 1 failed: participants 0, 2, 3; root 2 (v-rank 1).
    let alive = [0u32, 2, 3];
    let (rounds, _) = compile(&Plan::Gatherv { root: 2, blocks: blocks.clone() }, &alive, 1, 0).unwrap();
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].recvs, vec![(0, Loc::User(0..3)), (2, Loc::User(30..33))]);
    assert!(rounds[0].sends.is_empty());
    // v-rank 2 (local rank 3) sends its own block to v-rank 1.
    let (rounds, _) = compile(&Plan::Gatherv { root: 2, blocks }, &alive, 2, 0).unwrap();
    assert_eq!(rounds[0].sends, vec![(1, Loc::User(30..33))]);
}

#[test]
fn exscan_combines_the_incoming_prefix_into_the_contribution_before_sending_it() {
    let (rounds, own) = compile(&Plan::Exscan { len: 8 }, &[0, 1, 2], 1, 16).unwrap();
    assert_eq!(own, 0);
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds[0].recvs, vec![(0, Loc::User(8..16))]);
    assert_eq!(rounds[0].combine, vec![(Loc::User(0..8), Loc::User(8..16))]);
    assert_eq!(rounds[1].sends, vec![(2, Loc::User(0..8))]);
}

#[test]
fn reduce_uses_scratch_per_child() {
    // v-rank 0 of 8 has children 1, 2, 4: three scratch vectors, no send.
    let (rounds, own) = reduce(8, 0, 0, &Loc::User(0..16), 0);
    assert_eq!(own, 48);
    assert_eq!(rounds.len(), 1);
    assert_eq!(rounds[0].recvs.iter().map(|r| r.0).collect::<Vec<_>>(), vec![1, 2, 4]);
    // A leaf only sends.
    let (rounds, own) = reduce(8, 7, 0, &Loc::Own(0..16), 16);
    assert_eq!((rounds.len(), own), (1, 16));
    assert_eq!(rounds[0].sends[0].0, 6);
}

#[test]
#[allow(clippy::reversed_empty_ranges)]
fn malformed_and_missized_plans_are_seen() {
    let p = Plan::Gatherv { root: 0, blocks: vec![0..4, 6..5] };
    assert!(p.malformed());
    assert!(!Plan::Alltoallv { sends: vec![0..1; 3], recvs: vec![0..1; 2] }.sized_for(3));
    assert_eq!(Plan::Alltoallv { sends: vec![0..1, 5..9], recvs: vec![2..12, 0..0] }.extent(), 12);
    assert_eq!(Plan::Exscan { len: 8 }.extent(), 16);
}
