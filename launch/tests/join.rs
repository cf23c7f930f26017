//! The fault-tolerant start-up fences of the key-value service (R31), in process: a
//! `Join` completes over the ranks not out, every rank of a generation gets the same
//! list of ranks out, an excluded rank is told so at every request and listed as
//! exited, and the launcher's start-up watch sees exactly the silent ranks.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use runthrough_launch::outcome::RankStatus;
use runthrough_launch::{Client, Error, JobEnv, Server, Verdict};

const T: Duration = Duration::from_secs(10);

fn env(server: &Server, rank: u32, secret: &str) -> JobEnv {
    JobEnv {
        rank,
        size: server.size(),
        local_rank: rank,
        local_size: server.size(),
        jobid: "0123456789abcdef".into(),
        kv_addr: server.addr(),
        secret: secret.into(),
        bind: "none".into(),
        shm_name: "/rt-0123456789abcdef".into(),
        node: "localhost".into(),
    }
}

/// Joins on a thread; the reply comes back on the returned channel.
fn join_async(mut c: Client) -> mpsc::Receiver<(Client, Result<Vec<u32>, Error>)> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = c.join(T);
        let _ = tx.send((c, r));
    });
    rx
}

#[test]
fn join_completes_over_the_ranks_not_out_with_the_same_list_everywhere() {
    let secret = "1f".repeat(32);
    let server = Server::start(4, &secret).unwrap();
    let c: Vec<Client> = (0..4).map(|r| Client::connect(&env(&server, r, &secret), T).unwrap()).collect();
    let mut c = c.into_iter();
    let (c0, c1, mut c2, _c3) = (c.next().unwrap(), c.next().unwrap(), c.next().unwrap(), c.next().unwrap());

    // Generation 1: ranks 0 and 1 wait; rank 3 exits without joining; rank 2 joins last.
    let w0 = join_async(c0);
    let w1 = join_async(c1);
    assert!(w0.recv_timeout(Duration::from_millis(100)).is_err(), "fence completed without ranks 2 and 3");
    server.record_exit(3, RankStatus::Signaled(9));
    assert!(w0.recv_timeout(Duration::from_millis(100)).is_err(), "fence completed without rank 2");
    assert_eq!(c2.join(T).unwrap(), vec![3]);
    let (c0, r0) = w0.recv_timeout(T).unwrap();
    let (c1, r1) = w1.recv_timeout(T).unwrap();
    assert_eq!((r0.unwrap(), r1.unwrap()), (vec![3], vec![3]));

    // Generation 2: rank 1 is excluded while ranks 0 and 2 wait for it: the fence
    // completes and names it; rank 1 is told it is excluded, whatever it asks.
    let w0 = join_async(c0);
    let w2 = join_async(c2);
    thread::sleep(Duration::from_millis(50));
    assert!(server.exclude(1));
    assert!(!server.exclude(1), "excluded twice");
    assert!(!server.exclude(3), "an exited rank is out already");
    let (mut c0, r0) = w0.recv_timeout(T).unwrap();
    let (_c2, r2) = w2.recv_timeout(T).unwrap();
    assert_eq!((r0.unwrap(), r2.unwrap()), (vec![1, 3], vec![1, 3]));
    let mut c1 = c1;
    assert!(matches!(c1.join(T), Err(Error::Excluded)));
    // An error reply is not a transport failure: rank 1 keeps being told.
    assert!(matches!(c1.alive(), Err(Error::Excluded)));
    assert!(server.is_out(1) && server.is_out(3) && !server.is_out(0));
    // Survivors learn of the excluded rank as of an exited one.
    let mut exited = c0.exited().unwrap();
    exited.sort_unstable();
    assert_eq!(exited, vec![1, 3]);
}

#[test]
fn excluded_rank_gets_excluded_to_every_request_and_heartbeats_keep_ranks_unsilent() {
    let secret = "2e".repeat(32);
    let server = Server::start(3, &secret).unwrap();
    let mut c0 = Client::connect(&env(&server, 0, &secret), T).unwrap();
    let mut c1 = Client::connect(&env(&server, 1, &secret), T).unwrap();
    let mut plain = Client::connect(&env(&server, 2, &secret), T).unwrap();
    // Only ranks in the fault-tolerant start-up (Alive or Join) are watched for silence.
    c0.alive().unwrap();
    c1.alive().unwrap();
    plain.put("k", b"v").unwrap();
    let silence = Duration::from_millis(150);
    let until = Instant::now() + silence * 2;
    while Instant::now() < until {
        c0.alive().unwrap();
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(server.silent_ranks(silence), vec![1], "rank 1 stopped heartbeating; rank 2 never joined");
    assert!(server.unwatched_awaited().is_empty(), "nobody waits in a fence yet");
    // Once rank 0 waits in a fence, rank 2 (not in the start-up) is awaited.
    let w0 = join_async(c0);
    thread::sleep(Duration::from_millis(50));
    assert_eq!(server.unwatched_awaited(), vec![2]);
    assert!(server.exclude(1));
    assert!(matches!(c1.alive(), Err(Error::Excluded)));
    assert!(matches!(c1.put("x", b"y"), Err(Error::Excluded)));
    assert!(matches!(c1.started(), Err(Error::Excluded)));
    assert!(server.exclude(2));
    let (mut c0, r0) = w0.recv_timeout(T).unwrap();
    assert_eq!(r0.unwrap(), vec![1, 2]);
    // A started rank is no longer watched for silence.
    c0.started().unwrap();
    thread::sleep(silence + Duration::from_millis(50));
    assert!(server.silent_ranks(silence).is_empty());
}

/// The witness (R32): of two ranks that suspect each other, racing, exactly one claim is
/// confirmed and the other claimant is told it is excluded; the loser is listed as
/// exited, and a claim against a rank already out is confirmed again (idempotent).
#[test]
fn confirm_decides_contradicting_claims_exactly_once() {
    let secret = "2e".repeat(32);
    for round in 0..20 {
        let server = Server::start(3, &secret).unwrap();
        let mut a = Client::connect(&env(&server, 0, &secret), T).unwrap();
        let mut b = Client::connect(&env(&server, 1, &secret), T).unwrap();
        let mut c = Client::connect(&env(&server, 2, &secret), T).unwrap();
        let go = std::sync::Arc::new(std::sync::Barrier::new(2));
        let g = go.clone();
        let tb = thread::spawn(move || {
            g.wait();
            b.confirm(0, T)
        });
        go.wait();
        let ra = a.confirm(1, T);
        let rb = tb.join().unwrap();
        let (winner, loser) = match (&ra, &rb) {
            (Ok(Verdict::Confirmed), Err(Error::Excluded)) => (0, 1),
            (Err(Error::Excluded), Ok(Verdict::Confirmed)) => (1, 0),
            other => panic!("round {round}: expected exactly one confirmation, got {other:?}"),
        };
        assert!(server.is_out(loser) && !server.is_out(winner), "round {round}");
        assert_eq!(c.exited().unwrap(), vec![loser], "round {round}");
        // A third rank's claim against the loser: confirmed (already out).
        assert_eq!(c.confirm(loser, T).unwrap(), Verdict::Confirmed);
        // A claim against itself or outside the job is refused, not a crash.
        assert!(c.confirm(2, T).is_err());
    }
}

/// The witness and start-up (R31, R32): a claim against a rank still in its start-up
/// that the launcher heard from within the start-up timeout, or against one whose
/// start-up ended less than that timeout ago, is refused (`Starting`) and nobody is
/// excluded; once the suspect is silent for longer than the timeout, or started longer
/// ago, the same claim is confirmed. Without a start-up timeout set
/// (a plain server) claims are never refused.
#[test]
fn confirm_refuses_a_claim_against_a_rank_still_starting_and_heard_from() {
    let secret = "3d".repeat(32);
    let timeout = Duration::from_millis(300);
    let server = Server::start(4, &secret).unwrap();
    server.set_startup_timeout(timeout);
    let mut c: Vec<Client> = (0..4).map(|r| Client::connect(&env(&server, r, &secret), T).unwrap()).collect();
    for cl in &mut c {
        cl.alive().unwrap();
    }
    // Rank 1 is starting and was just heard from: refused, as often as asked.
    for _ in 0..3 {
        assert_eq!(c[0].confirm(1, T).unwrap(), Verdict::Starting);
        c[1].alive().unwrap();
    }
    assert!(!server.is_out(1));
    assert_eq!(c[2].exited().unwrap(), Vec::<u32>::new());
    // Silent for longer than the start-up timeout: confirmed, and rank 1 is out.
    thread::sleep(timeout + Duration::from_millis(100));
    assert_eq!(c[0].confirm(1, T).unwrap(), Verdict::Confirmed);
    assert!(server.is_out(1));
    assert!(matches!(c[1].alive(), Err(Error::Excluded)));
    // Rank 2 finished its start-up: for one timeout after, claims are refused (its
    // first ring heartbeats may still be on their way); then, heard from a moment ago
    // or not, a claim is confirmed (from now on the ring detector is the judge).
    c[2].started().unwrap();
    assert_eq!(c[3].confirm(2, T).unwrap(), Verdict::Starting);
    thread::sleep(timeout + Duration::from_millis(100));
    c[2].exited().unwrap();
    assert_eq!(c[3].confirm(2, T).unwrap(), Verdict::Confirmed);
    assert!(server.is_out(2));

    // A server without a start-up timeout never refuses.
    let plain = Server::start(2, &secret).unwrap();
    let mut p: Vec<Client> = (0..2).map(|r| Client::connect(&env(&plain, r, &secret), T).unwrap()).collect();
    p[1].alive().unwrap();
    assert_eq!(p[0].confirm(1, T).unwrap(), Verdict::Confirmed);
    assert!(plain.is_out(1));
}

/// Busy is not dead: a claim against a rank whose process the launcher started itself
/// ([`Server::watch_process`]) is refused (`Alive`) while that process sleeps or spins,
/// as often as asked; once it is stopped (SIGSTOP: hung) the claim is confirmed, as is a
/// claim against a dead process (a zombie not yet reaped, then gone). A rank without a
/// registered process is confirmed at once.
#[test]
fn confirm_refuses_a_claim_against_a_live_process_and_confirms_a_stopped_or_dead_one() {
    use std::process::{Command, Stdio};
    let secret = "5e".repeat(32);
    let server = Server::start(4, &secret).unwrap();
    let mut c: Vec<Client> = (0..4).map(|r| Client::connect(&env(&server, r, &secret), T).unwrap()).collect();
    let spawn = |script: &str| Command::new("sh").args(["-c", script]).stdout(Stdio::null()).spawn().unwrap();
    let mut sleeper = spawn("sleep 30");
    let mut spinner = spawn("while :; do :; done");
    let mut quitter = spawn("exit 0");
    server.watch_process(1, sleeper.id());
    server.watch_process(2, spinner.id());
    server.watch_process(3, quitter.id());
    for _ in 0..3 {
        assert_eq!(c[0].confirm(1, T).unwrap(), Verdict::Alive, "a sleeping process");
        assert_eq!(c[0].confirm(2, T).unwrap(), Verdict::Alive, "a spinning process");
    }
    assert!(!server.is_out(1) && !server.is_out(2));
    // SIGSTOP: hung, confirmed at once.
    let stop = |pid: u32| assert!(Command::new("kill").args(["-STOP", &pid.to_string()]).status().unwrap().success());
    stop(spinner.id());
    let t0 = Instant::now();
    while c[1].confirm(2, T).unwrap() != Verdict::Confirmed {
        assert!(t0.elapsed() < T, "a stopped process was never confirmed");
        thread::sleep(Duration::from_millis(5));
    }
    assert!(server.is_out(2));
    // Exited and not yet reaped (a zombie): confirmed.
    let t0 = Instant::now();
    while !std::fs::read_to_string(format!("/proc/{}/stat", quitter.id())).unwrap().contains(") Z") {
        assert!(t0.elapsed() < T, "the child never became a zombie");
        thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(c[0].confirm(3, T).unwrap(), Verdict::Confirmed);
    // Killed and reaped (gone): confirmed; the rank with no process registered too.
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
    assert_eq!(c[0].confirm(1, T).unwrap(), Verdict::Confirmed);
    let plain = Server::start(2, &secret).unwrap();
    let mut p: Vec<Client> = (0..2).map(|r| Client::connect(&env(&plain, r, &secret), T).unwrap()).collect();
    assert_eq!(p[0].confirm(1, T).unwrap(), Verdict::Confirmed);
    for child in [&mut spinner, &mut quitter] {
        let _ = child.kill();
        let _ = child.wait();
    }
}
