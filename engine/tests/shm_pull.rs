//! Long messages between two engines over the real shared-memory transport (one
//! segment, rings and CMA in this process): which protocol each takes under
//! `Config::cma_min` and `Config::cma_choose`, and every byte arriving either way.

use runthrough_engine::engine::CHOICE_SAMPLES;
use runthrough_engine::handle::{irecv, isend, recv, scope, send};
use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
use runthrough_engine::transport::shm::ShmTransport;
use runthrough_engine::transport::AnyTransport;
use runthrough_engine::SendTarget;
use runthrough_engine::{Config, ContextId, Engine, Rank, Tag};
use runthrough_shm::{Layout, Segment};

const CTX: ContextId = ContextId(0);
const LEN: usize = 512 * 1024;
const MESSAGES: usize = 2 * CHOICE_SAMPLES as usize + 4;

/// Two engines over one fresh segment; both "processes" are this one, so CMA reads from
/// this process.
fn pair(cfg: Config, tag: &str) -> Vec<BiasedMutex<Engine>> {
    let name = format!("/rt-pull-{tag}-{}", std::process::id());
    let _ = Segment::unlink(&name);
    let seg = Segment::create(&name, Layout { nranks: 2, ring_bytes: 256 * 1024, bulk_bytes: 0 }).unwrap();
    Segment::unlink(&name).unwrap();
    let pid = std::process::id() as i32;
    (0..2u32)
        .map(|r| {
            let t = ShmTransport::new(&seg, Rank(r), vec![pid, pid]).unwrap();
            let mut e = Engine::new(Rank(r), 2, AnyTransport::Shm(t), cfg);
            e.register_comm(CTX, &[Rank(0), Rank(1)]);
            BiasedMutex::new(e)
        })
        .collect()
}

fn message(i: usize) -> Vec<u8> {
    message_of(i, LEN)
}

fn message_of(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|b| (b.wrapping_mul(31) ^ i.wrapping_mul(7919)) as u8).collect()
}

/// Sends [`MESSAGES`] long messages from engine 0 to engine 1, one at a time, checks
/// each arrived whole, and returns how many of them engine 1 pulled, counted after
/// every message.
fn pulled_after_each(cfg: Config, tag: &str) -> Vec<u64> {
    pulled_between(&pair(cfg, tag), 0, 1)
}

/// As [`pulled_after_each`], from engine `from` to engine `to` of `e`; the counts are
/// `to`'s pulls since the call began.
fn pulled_between(e: &[BiasedMutex<Engine>], from: usize, to: usize) -> Vec<u64> {
    pulled_between_of(e, from, to, LEN)
}

/// As [`pulled_between`], with messages of `len` bytes.
fn pulled_between_of(e: &[BiasedMutex<Engine>], from: usize, to: usize, len: usize) -> Vec<u64> {
    let before = e[to].lock().stats().pulled;
    let mut counts = Vec::new();
    std::thread::scope(|s| {
        let sender = s.spawn(|| {
            for i in 0..MESSAGES {
                let m = message_of(i, len);
                send(
                    &e[from],
                    SendTarget {
                        ctx: CTX,
                        src: from as u32,
                        dest: to as u32,
                        peer: Rank(to as u32),
                        tag: Tag(i as i32),
                    },
                    &m,
                )
                .unwrap();
            }
        });
        let mut buf = vec![0u8; len];
        for i in 0..MESSAGES {
            buf.fill(0);
            let pat = Pattern { ctx: CTX, src: Some(from as u32), tag: Some(Tag(i as i32)) };
            let st = recv(&e[to], pat, Some(Rank(from as u32)), &mut buf).unwrap();
            assert_eq!(st.len, len);
            assert!(buf == message_of(i, len), "message {i} arrived altered");
            counts.push(e[to].lock().stats().pulled - before);
        }
        sender.join().unwrap();
    });
    counts
}

fn config(cma_min: usize, cma_choose: bool) -> Config {
    Config { eager_limit: 16 * 1024, cma_min, cma_choose, ..Config::default() }
}

#[test]
fn cma_min_alone_decides_without_the_choice() {
    assert_eq!(pulled_after_each(config(usize::MAX, false), "never"), vec![0; MESSAGES]);
    assert_eq!(pulled_after_each(config(LEN, false), "always"), (1..=MESSAGES as u64).collect::<Vec<_>>());
}

#[test]
fn the_choice_streams_some_pulls_as_many_then_keeps_one_protocol() {
    let k = CHOICE_SAMPLES as usize;
    let counts = pulled_after_each(config(LEN, true), "choose");
    // k streamed, k pulled: the measurements.
    let measured: Vec<u64> = (0..2 * k).map(|i| i.saturating_sub(k - 1) as u64).collect();
    assert_eq!(&counts[..2 * k], measured.as_slice(), "{counts:?}");
    // Then the faster for every later message: all pulled or none.
    let rest = &counts[2 * k..];
    let all = (k as u64 + 1..=(MESSAGES - k) as u64).collect::<Vec<_>>();
    assert!(rest == vec![k as u64; MESSAGES - 2 * k].as_slice() || rest == all.as_slice(), "{counts:?}");
}

/// A longer size class is measured anew, whatever the shorter one decided: 1 MiB
/// messages after the 512 KiB ones are again streamed k times, then pulled k times.
#[test]
fn each_size_class_makes_its_own_choice() {
    let k = CHOICE_SAMPLES as usize;
    let e = pair(config(LEN, true), "classes");
    let short = pulled_between(&e, 0, 1);
    assert_eq!(short[2 * k - 1], k as u64, "the 512 KiB class measured: {short:?}");
    let long = pulled_between_of(&e, 0, 1, 2 * LEN);
    let measured: Vec<u64> = (0..2 * k).map(|i| i.saturating_sub(k - 1) as u64).collect();
    assert_eq!(&long[..2 * k], measured.as_slice(), "the 1 MiB class measured anew: {long:?}");
}

#[test]
fn the_choice_leaves_messages_under_cma_min_streamed() {
    assert_eq!(pulled_after_each(config(LEN + 1, true), "short"), vec![0; MESSAGES]);
}

/// Long receives matched together are pulled over several progress calls, about a MiB of
/// CMA copies each, not all in the first (which held the engine lock for a whole window:
/// 64 x 4 MiB took 26 ms), and each pulled one's FIN reaches its sender at once.
#[test]
fn a_progress_call_pulls_about_a_mebibyte_and_fins_what_it_pulled() {
    const BIG: usize = 2 * 1024 * 1024;
    const N: usize = 4;
    let e = pair(config(LEN, false), "budget");
    let msgs: Vec<Vec<u8>> = (0..N).map(|i| message(i).repeat(BIG / LEN)).collect();
    let mut bufs = vec![vec![0u8; BIG]; N];
    scope(|s| {
        let recvs: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .map(|(i, b)| {
                let pat = Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(i as i32)) };
                irecv(s, &e[1], pat, Some(Rank(0)), b)
            })
            .collect();
        let mut sends: Vec<_> = msgs
            .iter()
            .enumerate()
            .map(|(i, m)| {
                isend(s, &e[0], SendTarget { ctx: CTX, src: 0, dest: 1, peer: Rank(1), tag: Tag(i as i32) }, m)
            })
            .collect();
        for done in 1..=N {
            e[1].lock().progress();
            assert_eq!(e[1].lock().stats().pulled, done as u64, "one 2 MiB pull per progress call");
            // The FIN went out with that progress call: the sender's next progress ends
            // that send, and only that one (pulled oldest first).
            let finished: Vec<bool> = sends.iter_mut().map(|r| r.is_complete()).collect();
            assert_eq!(finished.iter().filter(|c| **c).count(), done, "{finished:?}");
            assert!(finished[..done].iter().all(|c| *c), "pulled oldest first: {finished:?}");
        }
        for r in recvs {
            assert_eq!(r.wait().unwrap().len, BIG);
        }
        for s in sends {
            s.wait().unwrap();
        }
    });
    for (i, b) in bufs.iter().enumerate() {
        assert!(*b == msgs[i], "message {i} arrived altered");
    }
}

/// The lower rank of a pair decides for both directions: once engine 0 measured (on its
/// receives from engine 1), engine 1's receives from it all take engine 0's protocol,
/// without a measurement of their own (the two choosing apart was slower than either).
#[test]
fn the_lower_rank_decides_the_protocol_for_both_directions() {
    let e = pair(config(LEN, true), "pair");
    let k = CHOICE_SAMPLES as usize;
    let lower = pulled_between(&e, 1, 0);
    let pulls = match lower[2 * k..] {
        [a, ..] if a == k as u64 + 1 => true,
        [a, ..] if a == k as u64 => false,
        _ => panic!("engine 0 did not decide: {lower:?}"),
    };
    let upper = pulled_between(&e, 0, 1);
    let expected: Vec<u64> = (1..=MESSAGES as u64).map(|i| if pulls { i } else { 0 }).collect();
    assert_eq!(upper, expected, "engine 0 chose {}", if pulls { "CMA" } else { "streaming" });
}

/// A long message a process sends itself is one copy from the send buffer to the
/// receive buffer (no CMA, no stream through its own ring), whatever the protocol
/// settings: received in another order than sent, whole, and truncated with an error when
/// the receive is shorter.
#[test]
fn a_long_message_to_itself_is_one_copy() {
    let e = pair(config(usize::MAX, false), "self");
    let to_self = |tag: i32| SendTarget { ctx: CTX, src: 0, dest: 0, peer: Rank(0), tag: Tag(tag) };
    let msgs: Vec<Vec<u8>> = (0..3).map(message).collect();
    let mut bufs = vec![vec![0u8; LEN]; 3];
    let mut short = vec![0u8; LEN / 2];
    let long = message(9);
    scope(|s| {
        // Receives posted in reverse order of the sends: each matches its own tag.
        let mut recvs: Vec<_> = bufs
            .iter_mut()
            .enumerate()
            .rev()
            .map(|(i, b)| {
                irecv(s, &e[0], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(i as i32)) }, Some(Rank(0)), b)
            })
            .collect();
        let sends: Vec<_> = msgs.iter().enumerate().map(|(i, m)| isend(s, &e[0], to_self(i as i32), m)).collect();
        for r in recvs.drain(..) {
            assert_eq!(r.wait().unwrap().len, LEN);
        }
        for r in sends {
            r.wait().unwrap();
        }
        let r = irecv(s, &e[0], Pattern { ctx: CTX, src: Some(0), tag: Some(Tag(9)) }, Some(Rank(0)), &mut short);
        let snd = isend(s, &e[0], to_self(9), &long);
        assert!(
            matches!(r.wait(), Err(runthrough_engine::Error::Truncate { posted, arrived }) if posted == LEN / 2 && arrived == LEN)
        );
        snd.wait().unwrap();
    });
    for (i, b) in bufs.iter().enumerate() {
        assert!(*b == msgs[i], "message {i} to itself arrived altered");
    }
    assert!(short[..] == long[..LEN / 2], "the truncated message's first part");
    let st = e[0].lock().stats();
    assert_eq!((st.copied_to_self, st.streamed, st.pulled), (4, 0, 0), "{st:?}");
}
