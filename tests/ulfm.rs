//! Propagated errors, the ULFM calls and corrupted communicators with real processes
//! (R27, R28, R29), on shared
//! memory and over libfabric tcp: `drivers/examples/ulfm_check.rs` in each mode; every rank's end
//! is checked (the victims' abnormal end included) and every survivor's line.

mod common;

use std::time::Duration;

use common::{example, ok, ok_failed, run_env};

const LIMIT: Duration = Duration::from_secs(90);
/// A generous detector timeout: a busy 2-core machine's scheduling is no failure.
const FT: (&str, &str) = ("RT_FT_TIMEOUT_MS", "3000");
const FABRIC: [&str; 4] = ["--transport", "fabric", "--provider", "tcp"];

/// Runs `ulfm_check MODE` on `n` ranks; `victims` must end abnormally, every other rank
/// cleanly with its `ok` line; returns the survivors' lines.
fn check(n: usize, mode: &str, transport: &[&str], victims: &[u32]) -> Vec<String> {
    check_env(n, mode, transport, victims, &[])
}

/// The overlay instead of the flood on these few ranks (notices are flooded up to 64
/// members by default).
const OVERLAY: (&str, &str) = ("RT_NOTICE_FLOOD_MAX", "0");

/// [`check`] with more environment.
fn check_env(n: usize, mode: &str, transport: &[&str], victims: &[u32], env: &[(&str, &str)]) -> Vec<String> {
    let prog = example("ulfm_check");
    let ranks = n.to_string();
    let mut a = vec!["-n", &ranks];
    a.extend_from_slice(transport);
    a.push(prog.to_str().unwrap());
    a.push(mode);
    let mut env = env.to_vec();
    env.push(FT);
    let run = run_env(&a, &env, LIMIT);
    let out = if victims.is_empty() { ok(&run) } else { ok_failed(&run, victims) };
    (0..n as u32)
        .filter(|r| !victims.contains(r))
        .map(|r| {
            let prefix = format!("ulfm_check: ok rank {r} {mode} ");
            out.lines()
                .find(|l| l.starts_with(&prefix))
                .unwrap_or_else(|| panic!("{mode}: rank {r} did not report ok:\n{out}"))
                .to_string()
        })
        .collect()
}

#[test]
fn revoke_fails_blocked_and_later_operations_at_every_member_but_agree_decides() {
    for transport in [&[][..], &FABRIC[..]] {
        for n in [3, 5] {
            for line in check(n, "revoke", transport, &[]) {
                assert!(line.ends_with("agreed=0b110"), "{transport:?} -n {n}: {line}");
            }
        }
    }
}

/// The survivors ended uniformly: every line ends with `outcome` or none does.
fn assert_uniform(lines: &[String], outcome: &str, what: &str) {
    let seen: Vec<bool> = lines.iter().map(|l| l.ends_with(outcome)).collect();
    assert!(seen.iter().all(|&s| s == seen[0]), "{what}: not uniform: {lines:?}");
}

/// The revoker dies right after revoking: the notice either reached a survivor (then the
/// flood brings it to every survivor, checked in the example by two agreements) or none.
#[test]
fn revoke_spreads_although_the_revoker_dies_while_it_spreads() {
    for transport in [&[][..], &FABRIC[..]] {
        for _ in 0..3 {
            assert_uniform(&check(4, "revoke-kill", transport, &[3]), "revoked=true", &format!("{transport:?}"));
        }
    }
}

/// The notice travels the communicator's overlay (R42): at 8 ranks the revoker reaches
/// ranks 0, 1 and 3 directly and the rest through them. The revoker dies right after
/// revoking and its first relay (rank 0, its ring successor) dies at about the same
/// time: the survivors are still uniform — all see it or none (a notice still in the
/// dead revoker's send queue is lost with it).
#[test]
fn revoke_spreads_over_the_overlay_although_revoker_and_relay_die() {
    for transport in [&[][..], &FABRIC[..]] {
        for n in [8, 6] {
            let lines = check_env(n, "revoke-relay-kill", transport, &[0, n as u32 - 1], &[OVERLAY]);
            assert_uniform(&lines, "revoked=true", &format!("{transport:?} -n {n}"));
        }
    }
}

/// R28: a rank panics holding the communicator; every other member gets
/// `CommCorrupted` (never `RankFailStop`, although the rank dies too), now and later.
#[test]
fn a_handle_dropped_while_panicking_corrupts_the_communicator_everywhere() {
    for transport in [&[][..], &FABRIC[..]] {
        for line in check(4, "corrupt", transport, &[1]) {
            assert!(line.ends_with("corrupted"), "{line}");
        }
    }
}

#[test]
fn ack_failed_re_enables_wildcard_receives() {
    for transport in [&[][..], &FABRIC[..]] {
        for line in check(4, "ack", transport, &[3]) {
            assert!(line.ends_with("acked=1"), "{line}");
        }
    }
}

/// Shrink after a kill: every survivor gets the same communicator of the survivors (an
/// allreduce over it gives the survivors' sum at each).
#[test]
fn shrink_after_a_kill_gives_every_survivor_the_same_communicator() {
    for transport in [&[][..], &FABRIC[..]] {
        for n in [4, 6] {
            let m = n as u64 - 1;
            for line in check(n, "shrink", transport, &[n as u32 - 1]) {
                assert!(line.ends_with(&format!("size={m} sum={}", m * (m + 1) / 2)), "{line}");
            }
        }
    }
}

/// R27 with a kill mid-propagation: the signaller dies right after signalling; the
/// survivors end uniformly (all caught it or none did) and in bounded time.
#[test]
fn a_signal_survives_its_signaller_dying_while_it_spreads() {
    for transport in [&[][..], &FABRIC[..]] {
        for _ in 0..3 {
            assert_uniform(&check(4, "signal-kill", transport, &[3]), "caught=true", &format!("{transport:?}"));
        }
    }
}

/// R27 over the overlay (R42): the signaller dies right after signalling and its ring
/// successor — the signal's first relay — dies at about the same time (before, while or
/// after it passes the signal on): the survivors end uniformly, 6 and 8 ranks (at 8 a
/// member is not among the signaller's fingers and hears of it only through a relay).
#[test]
fn a_signal_spreads_over_the_overlay_although_signaller_and_relay_die() {
    for transport in [&[][..], &FABRIC[..]] {
        for n in [8, 6] {
            let lines = check_env(n, "signal-relay-kill", transport, &[0, n as u32 - 1], &[OVERLAY]);
            assert_uniform(&lines, "caught=true", &format!("{transport:?} -n {n}"));
        }
    }
}

/// R27 with a failed member present: the signal and its resolution skip it.
#[test]
fn a_signal_reaches_every_survivor_with_a_failed_member_present() {
    for transport in [&[][..], &FABRIC[..]] {
        for line in check(4, "signal-failed", transport, &[3]) {
            assert!(line.ends_with("caught=[(0, 5)]"), "{line}");
        }
    }
}

/// R27: an error resolution overtakes collectives pending at the other members — on
/// shared memory's lock-free path too, where members' words pass the pending barrier's
/// number once they completed the resolution: every barrier fails with the signal, and
/// the communicator's next collectives match each other.
#[test]
fn a_signal_fails_the_collectives_pending_at_the_other_members() {
    for transport in [&[][..], &FABRIC[..]] {
        for n in [4, 3] {
            for line in check(n, "signal-in-collective", transport, &[]) {
                assert!(line.ends_with("caught=[(1, 9)]"), "{transport:?} -n {n}: {line}");
            }
        }
    }
}

/// Engwer et al.'s listing (`examples/propagate.rs`): every rank catches the same
/// `Propagated` lists (one signaller, then two at once), and `CommCorrupted` when the
/// last rank panics holding the communicator.
#[test]
fn propagate_example_every_rank_catches_the_same_lists() {
    for (n, transport) in [(4, &[][..]), (5, &FABRIC[..]), (3, &[][..])] {
        let prog = example("propagate");
        let ranks = n.to_string();
        let mut a = vec!["-n", &ranks];
        a.extend_from_slice(transport);
        a.push(prog.to_str().unwrap());
        let run = run_env(&a, &[FT], LIMIT);
        let victim = n as u32 - 1;
        let out = ok_failed(&run, &[victim]);
        for r in 0..n {
            let line = |scene: &str| format!("propagate: rank {r} {scene} caught ");
            assert!(out.contains(&format!("{}Propagated([(1, 666)])", line("signal"))), "rank {r}, -n {n}:\n{out}");
            assert!(
                out.contains(&format!("{}Propagated([(1, 666), (2, 667)])", line("both"))),
                "rank {r}, -n {n}:\n{out}"
            );
            if r as u32 != victim {
                assert!(out.contains(&format!("{}CommCorrupted", line("corrupted"))), "rank {r}, -n {n}:\n{out}");
            }
        }
    }
}

/// The ULFM recovery loop (`examples/ulfm_shrink.rs`): 6 ranks lose rank 3 mid-run
/// (`--kill`), revoke, shrink and finish on 5 with the serial result, on shared memory
/// and over tcp (there, start-up is slower: the kill time is moved past it). On shared
/// memory the job runs about 0.85 s (start-up 0.05 s, 40 blocks of 20 ms): the second
/// shared-memory kill lands at about three quarters of the run.
#[test]
fn ulfm_shrink_example_finishes_on_the_survivors_with_the_right_result() {
    let expected: u64 = (0..4000u64).map(|k| (k * k) % 1_000_003).sum();
    for (kill, transport) in [("3@300ms", &[][..]), ("3@1200ms", &FABRIC[..]), ("3@650ms", &[][..])] {
        let prog = example("ulfm_shrink");
        let mut a = vec!["-n", "6", "--kill", kill];
        a.extend_from_slice(transport);
        a.push(prog.to_str().unwrap());
        let run = run_env(&a, &[FT], LIMIT);
        let out = ok_failed(&run, &[3]);
        for r in 0..5 {
            let line = format!("ulfm_shrink: rank {r} of 5 result {expected}");
            assert!(out.lines().any(|l| l == line), "{kill} {transport:?}: no `{line}`:\n{out}");
        }
    }
}
