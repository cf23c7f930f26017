//! Multi-process tests of `rtrun` and the bootstrap service (real processes, every test
//! with a hard timeout). Rank programs are `rt-testprog` (see its module doc).
//!
//! Every job runs with `--outcome-file`, and every test checks each rank's end (exit code
//! or signal, phase, cause) from it, not only `rtrun`'s exit code: R7 hides most ranks'
//! failures behind rank 0's code.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::thread;
use std::time::{Duration, Instant};

use runthrough_launch::outcome::RankStatus;
use runthrough_launch::report::{Cause, Phase, RankReport};
use runthrough_launch::{Client, Error, JobEnv, Server};

const RTRUN: &str = env!("CARGO_BIN_EXE_rtrun");
const PROG: &str = env!("CARGO_BIN_EXE_rt-testprog");
const LIMIT: Duration = Duration::from_secs(30);

#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// The `--outcome-file` records, by rank (empty when no job ran).
    ranks: Vec<RankReport>,
}

impl Out {
    /// Asserts that exactly ranks `0..n` were reported.
    fn assert_ranks(&self, n: u32) {
        let got: Vec<u32> = self.ranks.iter().map(|r| r.rank).collect();
        assert_eq!(got, (0..n).collect::<Vec<_>>(), "{self:?}");
    }

    /// Asserts that all `n` ranks ended cleanly (exit 0 after finalize) and that no
    /// end-of-job line was printed.
    fn assert_all_clean(&self, n: u32) {
        self.assert_ranks(n);
        for r in &self.ranks {
            assert!(r.is_clean(), "rank {} did not end cleanly: {r}\n{self:?}", r.rank);
        }
        assert_eq!(report_lines(&self.stderr).len(), 0, "{self:?}");
    }

    /// Asserts how `rank` ended.
    fn assert_end(&self, rank: u32, status: RankStatus, phase: Phase, cause: Cause) {
        let r = self.ranks.iter().find(|r| r.rank == rank).unwrap_or_else(|| panic!("no rank {rank}: {self:?}"));
        assert_eq!((r.status, r.phase, r.cause), (status, phase, cause), "rank {rank}: {r}\n{self:?}");
    }

    /// Asserts how `rank` ended, where it may have ended in an earlier phase than `by`
    /// (a fault that lands while the machine is slow to start the rank).
    fn assert_end_by(&self, rank: u32, status: RankStatus, by: Phase, cause: Cause) {
        let r = self.ranks.iter().find(|r| r.rank == rank).unwrap_or_else(|| panic!("no rank {rank}: {self:?}"));
        assert!(r.status == status && r.phase <= by && r.cause == cause, "rank {rank}: {r}\n{self:?}");
    }

    /// Asserts that every listed rank ended with exit code 0 without using the runtime
    /// (it never reached the launcher), which is not abnormal.
    fn assert_ended_before_init(&self, ranks: impl IntoIterator<Item = u32>) {
        for rank in ranks {
            self.assert_end(rank, RankStatus::Exited(0), Phase::BeforeInit, Cause::None);
            assert!(!self.ranks[rank as usize].is_abnormal());
        }
    }
}

/// The end-of-job lines `rtrun` printed on stderr.
fn report_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("rtrun: rank ")).collect()
}

const SIGKILL: RankStatus = RankStatus::Signaled(9);
/// How the ranks an abort names, or all on an interrupt, end: SIGTERM, SIGKILL after
/// `job::TERM_GRACE`.
const SIGTERM: RankStatus = RankStatus::Signaled(15);

fn this_host() -> String {
    runthrough_launch::job::hostname()
}

/// A running `rtrun`, with its stdout lines streamed through a channel.
struct Job {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    stderr: thread::JoinHandle<String>,
    start: Instant,
    outcome: std::path::PathBuf,
}

impl Job {
    fn spawn(args: &[&str]) -> Job {
        static JOBS: AtomicU32 = AtomicU32::new(0);
        let outcome = std::env::temp_dir().join(format!(
            "rtrun-test-outcome-{}-{}",
            std::process::id(),
            JOBS.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&outcome);
        let mut child = Command::new(RTRUN)
            .arg("--outcome-file")
            .arg(&outcome)
            .args(args)
            .env_remove("RT_DEBUG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rtrun");
        let out = child.stdout.take().unwrap();
        let mut err = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for l in BufReader::new(out).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stderr = thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Job { child, lines, seen: Vec::new(), stderr, start: Instant::now(), outcome }
    }

    /// Waits for a stdout line containing `needle` (hard timeout).
    fn expect_line(&mut self, needle: &str) -> String {
        let deadline = Instant::now() + LIMIT;
        loop {
            if let Some(l) = self.seen.iter().find(|l| l.contains(needle)) {
                return l.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => self.seen.push(l),
                Err(_) => {
                    let _ = self.child.kill();
                    panic!("no line containing {needle:?}; saw {:?}", self.seen);
                }
            }
        }
    }

    fn wait(mut self, limit: Duration) -> Out {
        let deadline = self.start + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("rtrun exceeded its hard timeout of {limit:?}; stdout so far: {:?}", self.seen);
            }
            thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.start.elapsed();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(5)) {
            self.seen.push(l);
        }
        let mut stdout = self.seen.join("\n");
        stdout.push('\n');
        let records = std::fs::read_to_string(&self.outcome).unwrap_or_default();
        let _ = std::fs::remove_file(&self.outcome);
        let ranks = records
            .lines()
            .map(|l| RankReport::parse(l).unwrap_or_else(|| panic!("bad outcome record {l:?}")))
            .collect();
        Out { code: status.code(), stdout, stderr: self.stderr.join().unwrap(), elapsed, ranks }
    }
}

fn rtrun(args: &[&str]) -> Out {
    Job::spawn(args).wait(LIMIT)
}

fn count(haystack: &str, needle: &str) -> usize {
    haystack.matches(needle).count()
}

#[test]
fn argument_errors_exit_2() {
    let cases: &[&[&str]] = &[
        &["-n", "0", PROG, "kv"],
        &[PROG, "kv"],
        &["-n"],
        &["-n", "two", PROG, "kv"],
        &["-n", "2"],
        &["-n", "2", "--"],
        &["-n", "2", "--kill", "1@abc", PROG, "kv"],
        &["-n", "2", "--kill", "18@1s", PROG, "kv"],
        &["-n", "2", "--universe", "3", "--kill", "3@1s", PROG, "kv"],
        &["-n", "2", "--frobnicate", PROG, "kv"],
        &["-n", "2", "--bind-to", "socket", PROG, "kv"],
        &["-n", "2", "--timeout", "never", PROG, "kv"],
        &["-n", "2", "--transport", "ofi", PROG, "kv"],
        &["-n", "2", "--provider", "psm3", PROG, "kv"],
        &["-n", "2", "--provider"],
        &["-n", "2", "--host", "a,a", PROG, "kv"],
        &["-n", "2", "--host", "a=10.0.0", PROG, "kv"],
        &["-n", "2", "--host", "a b", PROG, "kv"],
        &["-n", "2", "--map-by", "socket", "--host", "a,b", PROG, "kv"],
        &["-n", "2", "--launch-agent", "ssh", "--host", "a", "--kv-addr", "10.0.0.1", PROG, "kv"],
        &["-n", "2", "--launch-agent", "ssh {host}", "--kv-addr", "10.0.0.1", PROG, "kv"],
        &["-n", "2", "--launch-agent", "ssh {host}", "--host", "a", PROG, "kv"],
        &["-n", "2", "--kv-addr", "0.0.0.0", PROG, "kv"],
        &["-n", "2", "--kv-addr", "8.8.8.8", PROG, "kv"],
    ];
    for args in cases {
        let out = rtrun(args);
        assert_eq!(out.code, Some(2), "{args:?}: {out:?}");
        assert!(out.stderr.starts_with("rtrun: "), "{args:?}: {out:?}");
        assert!(out.stderr.contains("--help"), "{args:?}: {out:?}");
        assert!(out.stdout.trim().is_empty(), "{args:?}: {out:?}");
        out.assert_ranks(0);
    }
}

#[test]
fn help_exits_0() {
    let out = rtrun(&["--help"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("usage: rtrun -n N"), "{out:?}");
    out.assert_ranks(0);
}

#[test]
fn missing_program_exits_127() {
    let out = rtrun(&["-n", "2", "/nonexistent/rt-no-such-program"]);
    assert_eq!(out.code, Some(127), "{out:?}");
    assert!(out.stderr.contains("cannot start rank 0"), "{out:?}");
    out.assert_ranks(0);
}

#[test]
fn t3_kv_exchange_1_2_4_8() {
    for n in [1u32, 2, 4, 8] {
        let ns = n.to_string();
        let out = rtrun(&["-n", &ns, PROG, "kv"]);
        assert_eq!(out.code, Some(0), "n={n}: {out:?}");
        for r in 0..n {
            assert_eq!(count(&out.stdout, &format!("kv ok rank {r} of {n}\n")), 1, "{out:?}");
        }
        out.assert_all_clean(n);
    }
}

#[test]
fn tag_output_prefixes_every_line() {
    let out = rtrun(&["-n", "4", "--tag-output", PROG, "kv"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{out:?}");
    for r in 0..4 {
        assert!(lines.contains(&format!("[{r}] kv ok rank {r} of 4").as_str()), "{out:?}");
    }
    out.assert_all_clean(4);
    // stderr too
    let out = rtrun(&["-n", "2", "--tag-output", PROG, "bogus-command"]);
    assert_eq!(out.code, Some(3), "{out:?}");
    assert!(out.stderr.contains("[1] rt-testprog: unknown command"), "{out:?}");
    out.assert_ranks(2);
    for r in 0..2 {
        out.assert_end(r, RankStatus::Exited(3), Phase::BeforeInit, Cause::None);
    }
    assert_eq!(report_lines(&out.stderr).len(), 2, "{out:?}");
}

/// `--host` placement and the launch agent, without namespaces: the agent is `env` with
/// a variable naming `{host}`, so every rank shows which host it was started for.
#[test]
fn hosts_placement_and_launch_agent_environment() {
    for (map_by, hosts_of) in [("node", ["a", "b", "c", "a", "b"]), ("slot", ["a", "a", "b", "b", "c"])] {
        let out = rtrun(&[
            "-n",
            "5",
            "--host",
            "a=127.0.0.1,b=127.0.0.2,c",
            "--map-by",
            map_by,
            "--launch-agent",
            "env RT_TEST_AGENT_HOST={host}",
            "--kv-addr",
            "127.0.0.1",
            "--tag-output",
            PROG,
            "env",
        ]);
        assert_eq!(out.code, Some(0), "{out:?}");
        let get = |rank: usize, var: &str| -> Option<String> {
            let p = format!("[{rank}] {var}=");
            out.stdout.lines().find(|l| l.starts_with(&p)).map(|l| l[p.len()..].to_owned())
        };
        let jobid = get(0, "RT_JOBID").unwrap();
        for (r, host) in hosts_of.iter().enumerate() {
            let on: Vec<usize> = (0..5).filter(|&q| hosts_of[q] == *host).collect();
            let local = on.iter().position(|&q| q == r).unwrap();
            assert_eq!(get(r, "RT_NODE").as_deref(), Some(*host), "{map_by} {r}: {out:?}");
            assert_eq!(get(r, "RT_TEST_AGENT_HOST").as_deref(), Some(*host), "{out:?}");
            assert_eq!(get(r, "RT_LOCAL_RANK"), Some(local.to_string()), "{map_by} {r}: {out:?}");
            assert_eq!(get(r, "RT_LOCAL_SIZE"), Some(on.len().to_string()), "{map_by} {r}: {out:?}");
            let h = (host.as_bytes()[0] - b'a') as usize;
            assert_eq!(get(r, "RT_SHM_NAME"), Some(format!("/rt-{jobid}-h{h}")));
            let addr = match *host {
                "a" => Some("127.0.0.1".to_owned()),
                "b" => Some("127.0.0.2".to_owned()),
                _ => None,
            };
            assert_eq!(get(r, "RT_FABRIC_ADDR"), addr, "{out:?}");
            assert!(get(r, "RT_KV_ADDR").unwrap().starts_with("127.0.0.1:"));
            // The report names the host each rank ran on.
            assert_eq!(out.ranks[r].host, *host, "{out:?}");
        }
        out.assert_ranks(5);
        out.assert_ended_before_init(0..5);
    }
}

#[test]
fn environment_of_each_rank() {
    let out = rtrun(&["-n", "2", "--bind-to", "numa", "--tag-output", PROG, "env"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let get = |rank: u32, var: &str| -> String {
        let p = format!("[{rank}] {var}=");
        let l = out.stdout.lines().find(|l| l.starts_with(&p)).unwrap_or_else(|| panic!("{p}: {out:?}"));
        l[p.len()..].to_owned()
    };
    for r in 0..2 {
        assert_eq!(get(r, "RT_RANK"), r.to_string());
        assert_eq!(get(r, "RT_SIZE"), "2");
        assert_eq!(get(r, "RT_LOCAL_RANK"), r.to_string());
        assert_eq!(get(r, "RT_LOCAL_SIZE"), "2");
        assert_eq!(get(r, "RT_BIND"), "numa");
        let jobid = get(r, "RT_JOBID");
        assert_eq!(jobid.len(), 16);
        assert_eq!(get(r, "RT_SHM_NAME"), format!("/rt-{jobid}"));
        assert_eq!(get(r, "RT_KV_SECRET").len(), 64);
        assert!(get(r, "RT_KV_ADDR").starts_with("127.0.0.1:"));
        assert!(!get(r, "RT_NODE").is_empty());
    }
    assert_eq!(get(0, "RT_JOBID"), get(1, "RT_JOBID"));
    assert_eq!(get(0, "RT_KV_SECRET"), get(1, "RT_KV_SECRET"));
    out.assert_ranks(2);
    out.assert_ended_before_init(0..2);
    // --transport / --provider reach every rank as RT_TRANSPORT / RT_PROVIDER.
    let net = rtrun(&["-n", "2", "--transport", "fabric", "--provider", "sockets", "--tag-output", PROG, "env"]);
    assert_eq!(net.code, Some(0), "{net:?}");
    for r in 0..2 {
        assert!(net.stdout.contains(&format!("[{r}] RT_TRANSPORT=fabric")), "{net:?}");
        assert!(net.stdout.contains(&format!("[{r}] RT_PROVIDER=sockets")), "{net:?}");
    }
    net.assert_ranks(2);
    net.assert_ended_before_init(0..2);
    // A second job gets fresh random ids.
    let again = rtrun(&["-n", "1", PROG, "env"]);
    let jobid0 = get(0, "RT_JOBID");
    assert!(!again.stdout.contains(&jobid0), "{again:?}");
    again.assert_ranks(1);
    again.assert_ended_before_init([0]);
}

fn in_process_env(server: &Server, rank: u32, secret: &str) -> JobEnv {
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

#[test]
fn t3_wrong_secret_refused_right_one_works() {
    let secret = "a5".repeat(32);
    let server = Server::start(2, &secret).unwrap();
    assert!(server.addr().ip().is_loopback());
    let t = Duration::from_secs(5);

    let bad = in_process_env(&server, 0, &"b6".repeat(32));
    assert!(matches!(Client::connect(&bad, t), Err(Error::Refused)));
    let short = in_process_env(&server, 0, "a5");
    assert!(matches!(Client::connect(&short, t), Err(Error::Refused)));
    let bad_rank = in_process_env(&server, 2, &secret);
    assert!(matches!(Client::connect(&bad_rank, t), Err(Error::Refused)));

    // Garbage and oversized frames: the connection is closed, the server lives on.
    for junk in [&b"\xff\xff\xff\xffjunk"[..], b"\x03\x00\x00\x00\x01\x02\x03", b"GET / HTTP/1.1\r\n\r\n"] {
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(t)).unwrap();
        let _ = s.write_all(junk);
        let mut buf = [0u8; 16];
        assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)), "server replied to junk");
    }

    let mut c0 = Client::connect(&in_process_env(&server, 0, &secret), t).unwrap();
    let mut c1 = Client::connect(&in_process_env(&server, 1, &secret), t).unwrap();
    c0.put("k", b"v").unwrap();
    assert_eq!(c1.get("k", t).unwrap(), b"v");
    assert!(matches!(c1.get("missing", Duration::from_millis(20)), Err(Error::Timeout)));
    // The client stays usable after a server-side timeout.
    c1.put("k2", b"w").unwrap();
    assert_eq!(c0.get("k2", t).unwrap(), b"w");
    assert!(matches!(c0.abort(&[5], 1), Err(Error::Server { .. })));
    c0.finalized().unwrap();
    assert!(server.is_finalized(0));
    assert!(!server.is_finalized(1));
}

#[test]
fn fence_generations_timeout_and_peer_exit_in_process() {
    let secret = "0f".repeat(32);
    let server = Server::start(3, &secret).unwrap();
    let t = Duration::from_secs(10);
    let envs: Vec<JobEnv> = (0..3).map(|r| in_process_env(&server, r, &secret)).collect();

    // Three generations across three ranks.
    let handles: Vec<_> = envs
        .iter()
        .cloned()
        .map(|e| {
            thread::spawn(move || {
                let mut c = Client::connect(&e, t).unwrap();
                for _ in 0..3 {
                    c.fence(t).unwrap();
                }
                c
            })
        })
        .collect();
    let mut clients: Vec<Client> = handles.into_iter().map(|h| h.join().unwrap()).collect();

    // A fence with a missing rank times out, and leaves the fence again.
    let t0 = Instant::now();
    assert!(matches!(clients[0].fence(Duration::from_millis(100)), Err(Error::Timeout)));
    assert!(t0.elapsed() < Duration::from_secs(3));

    // A rank that exits before the fence fails the waiters promptly.
    let mut c1 = clients.remove(1);
    let waiter = thread::spawn(move || {
        let t0 = Instant::now();
        let r = c1.fence(Duration::from_secs(20));
        (r, t0.elapsed())
    });
    thread::sleep(Duration::from_millis(200));
    server.record_exit(2, RankStatus::Signaled(9));
    let (r, waited) = waiter.join().unwrap();
    assert!(matches!(r, Err(Error::PeerExited { rank: 2 })), "{r:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    assert!(matches!(clients[0].fence(t), Err(Error::PeerExited { rank: 2 })));
    assert_eq!(clients[0].exited().unwrap(), vec![2]);
    assert_eq!(server.exited(), vec![(2, RankStatus::Signaled(9))]);
}

#[test]
fn kill_one_rank_others_finish() {
    let out = rtrun(&["-n", "3", "--kill", "1@300ms", PROG, "sleep", "1500"]);
    // Rank 1 failed; the lowest rank that finalized is 0, which exited 0.
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("rank 0 done"), "{out:?}");
    assert!(out.stdout.contains("rank 2 done"), "{out:?}");
    assert!(!out.stdout.contains("rank 1 done"), "{out:?}");
    assert!(out.elapsed < Duration::from_secs(10), "{out:?}");
    out.assert_ranks(3);
    out.assert_end_by(1, SIGKILL, Phase::Running, Cause::Injected);
    assert!(out.ranks[0].is_clean() && out.ranks[2].is_clean(), "{out:?}");
}

#[test]
fn r7_all_ok_gives_rank0_code() {
    let out = rtrun(&["-n", "3", PROG, "finalize-exit", "5,6,7"]);
    assert_eq!(out.code, Some(5), "{out:?}");
    out.assert_ranks(3);
    for r in 0..3 {
        out.assert_end(r, RankStatus::Exited(5 + r as i32), Phase::Finalized, Cause::None);
    }
}

#[test]
fn r7_killed_rank_gives_lowest_finalized_code() {
    for victim in [2u32, 0] {
        let kill = format!("{victim}@200ms");
        let out = rtrun(&["-n", "4", "--kill", &kill, PROG, "finalize-exit", "10,11,12,13", "1500"]);
        assert_eq!(out.code, Some(if victim == 0 { 11 } else { 10 }), "{out:?}");
        out.assert_ranks(4);
        for r in 0..4 {
            if r == victim {
                // finalize-exit connects, then sleeps: killed during init.
                out.assert_end_by(r, SIGKILL, Phase::Init, Cause::Injected);
            } else {
                out.assert_end(r, RankStatus::Exited(10 + r as i32), Phase::Finalized, Cause::None);
            }
        }
    }
}

#[test]
fn r7_nobody_finalized_gives_lowest_nonzero_code() {
    // Nobody finalizes, nobody aborts, no signals: lowest non-zero exit code (rule 5).
    let out = rtrun(&["-n", "2", PROG, "exit", "4,0"]);
    assert_eq!(out.code, Some(4), "{out:?}");
    out.assert_ranks(2);
    out.assert_end(0, RankStatus::Exited(4), Phase::BeforeInit, Cause::None);
    out.assert_ended_before_init([1]);
}

#[test]
fn r7_none_finalized_gives_abort_code() {
    let out = rtrun(&["-n", "2", PROG, "abort", "7", "0,1"]);
    assert_eq!(out.code, Some(7), "{out:?}");
    assert!(!out.stdout.contains("survived"), "{out:?}");
    assert!(out.elapsed < Duration::from_secs(8), "{out:?}");
    out.assert_ranks(2);
    // Rank 0 asked and exits by itself unless the launcher's SIGTERM comes first.
    assert!(matches!(out.ranks[0].status, RankStatus::Exited(7) | SIGTERM), "{out:?}");
    assert_eq!(out.ranks[0].cause, Cause::Abort(7), "{out:?}");
    // Rank 1 may be killed before it reached the launcher.
    let r1 = &out.ranks[1];
    assert!(r1.status == SIGTERM && r1.cause == Cause::Abort(7) && r1.phase <= Phase::Init, "{out:?}");
}

#[test]
fn r7_signal_without_abort_gives_128_plus_signal() {
    let out = rtrun(&["-n", "2", "--kill", "0@200ms", "--kill", "1@200ms", PROG, "sleep", "5000"]);
    assert_eq!(out.code, Some(128 + 9), "{out:?}");
    out.assert_ranks(2);
    for r in 0..2 {
        out.assert_end_by(r, SIGKILL, Phase::Running, Cause::Injected);
    }
}

#[test]
fn r3_abort_kills_only_listed_ranks() {
    let out = rtrun(&["-n", "4", "--tag-output", PROG, "abort", "9", "1,2", "0", "1500"]);
    assert!(out.stdout.contains("[3] rank 3 survived"), "{out:?}");
    assert!(!out.stdout.contains("rank 1 survived"), "{out:?}");
    assert!(!out.stdout.contains("rank 2 survived"), "{out:?}");
    // Failures: 0 (aborted), 1, 2 (killed); lowest finalized rank is 3, exit 0.
    assert_eq!(out.code, Some(0), "{out:?}");
    out.assert_ranks(4);
    out.assert_end(0, RankStatus::Exited(9), Phase::Init, Cause::Abort(9));
    // Ranks 1 and 2 may be killed before they reached the launcher.
    for r in [1, 2] {
        out.assert_end_by(r, SIGTERM, Phase::Init, Cause::Abort(9));
    }
    assert!(out.ranks[3].is_clean(), "{out:?}");
}

#[test]
fn timeout_kills_everything_exit_124() {
    let out = Job::spawn(&["-n", "2", "--timeout", "1", PROG, "sleep", "10000"]).wait(Duration::from_secs(8));
    assert_eq!(out.code, Some(124), "{out:?}");
    assert!(out.stderr.contains("rtrun: job timed out after 1s"), "{out:?}");
    assert!(out.elapsed < Duration::from_millis(2500), "{out:?}");
    out.assert_ranks(2);
    for r in 0..2 {
        out.assert_end_by(r, SIGKILL, Phase::Running, Cause::Timeout);
    }
}

#[test]
fn fence_fails_fast_when_a_rank_exited() {
    let out = rtrun(&["-n", "3", PROG, "fence-dead"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("rank 0 peer-exited 1"), "{out:?}");
    assert!(out.stdout.contains("rank 2 peer-exited 1"), "{out:?}");
    out.assert_ranks(3);
    out.assert_ended_before_init([1]);
    assert!(out.ranks[0].is_clean() && out.ranks[2].is_clean(), "{out:?}");
}

#[test]
fn ranks_learn_which_ranks_exited() {
    let out = rtrun(&["-n", "2", PROG, "exited"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("rank 0 sees exited [1]"), "{out:?}");
    out.assert_ranks(2);
    out.assert_ended_before_init([1]);
    assert!(out.ranks[0].is_clean(), "{out:?}");
}

fn shm_path(stdout: &str) -> String {
    let line = stdout.lines().find(|l| l.starts_with("shm /dev/shm/rt-")).unwrap_or_else(|| panic!("{stdout}"));
    line["shm ".len()..].to_owned()
}

#[test]
fn shm_removed_after_normal_exit() {
    let out = rtrun(&["-n", "2", PROG, "shm"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    out.assert_all_clean(2);
    let path = shm_path(&out.stdout);
    assert!(!Path::new(&path).exists(), "{path} still exists");
}

#[test]
fn shm_removed_after_killed_job() {
    let mut job = Job::spawn(&["-n", "2", "--kill", "0@700ms", "--kill", "1@700ms", PROG, "shm", "10000"]);
    let path = shm_path(&job.expect_line("shm /dev/shm/"));
    assert!(Path::new(&path).exists(), "{path} should exist while the job runs");
    let out = job.wait(Duration::from_secs(8));
    assert_eq!(out.code, Some(137), "{out:?}");
    assert!(!Path::new(&path).exists(), "{path} still exists");
    out.assert_ranks(2);
    for r in 0..2 {
        out.assert_end(r, SIGKILL, Phase::Init, Cause::Injected);
    }
}

fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

fn rank_pids(job: &mut Job, n: u32) -> Vec<u32> {
    (0..n)
        .map(|r| {
            let l = job.expect_line(&format!("rank {r} pid "));
            l.split_whitespace().nth(3).unwrap().parse().unwrap()
        })
        .collect()
}

fn wait_dead(pids: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| pid_alive(p)) {
        assert!(Instant::now() < deadline, "ranks {pids:?} still alive");
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_kills_ranks_exit_130() {
    let mut job = Job::spawn(&["-n", "2", PROG, "sleep", "20000"]);
    let pids = rank_pids(&mut job, 2);
    let st = Command::new("kill").args(["-TERM", &job.child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = job.wait(Duration::from_secs(8));
    assert_eq!(out.code, Some(130), "{out:?}");
    wait_dead(&pids);
    out.assert_ranks(2);
    for r in 0..2 {
        out.assert_end(r, SIGTERM, Phase::Running, Cause::Interrupted);
    }
}

/// An interrupt of `rtrun` gives every rank SIGTERM, then SIGKILL after the grace: a
/// rank that handles SIGTERM ends on its own (its last words reach the output), one that
/// ignores it is SIGKILLed no sooner than the grace.
#[test]
fn sigterm_gives_ranks_a_grace_before_sigkill() {
    let script = r#"if [ "$RT_RANK" = 0 ]; then trap "" TERM; echo ready 0; exec sleep 20;
        else trap 'echo "rank 1 got TERM"; exit 0' TERM; echo ready 1; sleep 20 & wait; fi"#;
    let mut job = Job::spawn(&["-n", "2", "sh", "-c", script]);
    job.expect_line("ready 0");
    job.expect_line("ready 1");
    let sent = Instant::now();
    let st = Command::new("kill").args(["-TERM", &job.child.id().to_string()]).status().unwrap();
    assert!(st.success());
    let out = job.wait(Duration::from_secs(8));
    let took = sent.elapsed();
    assert_eq!(out.code, Some(130), "{out:?}");
    out.assert_ranks(2);
    out.assert_end(0, SIGKILL, Phase::BeforeInit, Cause::Interrupted);
    assert!(took >= Duration::from_millis(450), "the ignoring rank was SIGKILLed after {took:?}, before the grace");
    assert!(out.stdout.contains("rank 1 got TERM"), "{out:?}");
    let r1 = out.ranks.iter().find(|r| r.rank == 1).unwrap();
    assert_eq!((r1.status, r1.cause), (RankStatus::Exited(0), Cause::Interrupted), "{out:?}");
}

#[test]
fn ranks_die_with_rtrun() {
    let mut job = Job::spawn(&["-n", "2", PROG, "sleep", "20000"]);
    let pids = rank_pids(&mut job, 2);
    job.child.kill().unwrap(); // SIGKILL: no cleanup in rtrun, PR_SET_PDEATHSIG acts
    let _ = job.child.wait();
    wait_dead(&pids);
    // rtrun died first: it wrote no report.
    assert!(!job.outcome.exists());
}

#[test]
fn r3_abort_self_records_abort_code() {
    // abort(self): the rank is aborted whether it exits first or is killed first.
    for _ in 0..3 {
        let out = rtrun(&["-n", "1", PROG, "abort", "6", "0"]);
        assert_eq!(out.code, Some(6), "{out:?}");
        out.assert_ranks(1);
        assert!(matches!(out.ranks[0].status, RankStatus::Exited(6) | SIGTERM), "{out:?}");
        assert_eq!((out.ranks[0].phase, out.ranks[0].cause), (Phase::Init, Cause::Abort(6)), "{out:?}");
    }
}

/// The per-rank report: an `exit(3)` after init while rank 0 finalizes. R7 keeps the job's
/// exit code 0 (rank 0 finalized); `rtrun` names the rank, its host, the code and the
/// phase on stderr, once.
#[test]
fn report_names_a_rank_that_exits_after_init() {
    let out = rtrun(&["-n", "3", PROG, "phase-exit", "0,3,0", "finalized,running,finalized"]);
    assert_eq!(out.code, Some(0), "R7: {out:?}");
    let want = format!("rtrun: rank 1 on host {}: exit code 3, after init, before finalize", this_host());
    assert_eq!(report_lines(&out.stderr), [want.as_str()], "{out:?}");
    out.assert_ranks(3);
    out.assert_end(1, RankStatus::Exited(3), Phase::Running, Cause::None);
    assert!(out.ranks[0].is_clean() && out.ranks[2].is_clean(), "{out:?}");
}

/// Every phase gets its words; an exit 0 without the runtime is not reported. Rank 4
/// exits 4 after finalizing: the job exits 4 (rank 0, the lowest that finalized, exited 0;
/// a non-zero code after finalize fails the job, as under `mpirun`).
#[test]
fn report_distinguishes_every_phase() {
    let phases = "finalized,before-init,init,finalizing,finalized,before-init";
    let out = rtrun(&["-n", "6", PROG, "phase-exit", "0,2,0,0,4,0", phases]);
    assert_eq!(out.code, Some(4), "R7: {out:?}");
    let h = this_host();
    let want = [
        format!("rtrun: rank 1 on host {h}: exit code 2, before init"),
        format!("rtrun: rank 2 on host {h}: exit code 0, during init"),
        format!("rtrun: rank 3 on host {h}: exit code 0, during finalize"),
        format!("rtrun: rank 4 on host {h}: exit code 4, after finalize"),
    ];
    let mut got = report_lines(&out.stderr);
    got.sort_unstable();
    assert_eq!(got, want.iter().map(String::as_str).collect::<Vec<_>>(), "{out:?}");
    out.assert_ranks(6);
    out.assert_end(4, RankStatus::Exited(4), Phase::Finalized, Cause::None);
    out.assert_ended_before_init([5]);
    assert!(out.ranks[0].is_clean(), "{out:?}");
}

/// `--kill` and `--stop`: the signal's name and "(fault injected)"; `--quiet` hides the
/// lines (the outcome file still has the records); a clean job prints none.
#[test]
fn report_kill_stop_quiet_and_clean() {
    let h = this_host();
    // 1 s: the rank is surely past init (it reports it at once), even on a busy machine.
    let out = rtrun(&["-n", "3", "--kill", "1@1s", PROG, "sleep", "2500"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let want = format!("rtrun: rank 1 on host {h}: killed by SIGKILL, after init, before finalize (fault injected)");
    assert_eq!(report_lines(&out.stderr), [want.as_str()], "{out:?}");
    out.assert_end(1, SIGKILL, Phase::Running, Cause::Injected);

    // A stopped rank left stopped is killed by rtrun once the others ended.
    let out = rtrun(&["-n", "2", "--stop", "1@1s", PROG, "sleep", "2000"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    let want = format!("rtrun: rank 1 on host {h}: killed by SIGKILL, after init, before finalize (fault injected)");
    assert_eq!(report_lines(&out.stderr), [want.as_str()], "{out:?}");
    out.assert_end(1, SIGKILL, Phase::Running, Cause::Injected);
    assert!(out.ranks[0].is_clean(), "{out:?}");

    let out = rtrun(&["-n", "3", "--quiet", "--kill", "1@300ms", PROG, "sleep", "1500"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(report_lines(&out.stderr).len(), 0, "{out:?}");
    out.assert_end_by(1, SIGKILL, Phase::Running, Cause::Injected);

    let out = rtrun(&["-n", "3", PROG, "kv"]);
    assert!(out.stderr.is_empty(), "{out:?}");
    out.assert_all_clean(3);
}

/// Every process's command line and environment on this machine, by pid.
fn every_cmdline_and_environment() -> Vec<(u32, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else { continue };
        for f in ["cmdline", "environ"] {
            if let Ok(b) = std::fs::read(e.path().join(f)) {
                out.push((pid, b));
            }
        }
    }
    out
}

/// Through a launch agent, the job secret is in no process's command line or environment
/// while the job runs (the agent's words are world-readable in `/proc/PID/cmdline`), and
/// the ranks still authenticate with it: it reaches them on standard input.
#[test]
fn launch_agent_secret_in_no_command_line_or_environment() {
    let mut job = Job::spawn(&[
        "-n",
        "3",
        "--host",
        "a,b",
        "--launch-agent",
        "env RT_TEST_AGENT_HOST={host}",
        "--kv-addr",
        "127.0.0.1",
        "--tag-output",
        PROG,
        "secret",
        "2000",
    ]);
    let mut secrets = Vec::new();
    for r in 0..3 {
        let l = job.expect_line(&format!("[{r}] secret "));
        let w: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(w[2].len(), 64, "{l}");
        secrets.push(w[2].to_owned());
    }
    assert!(secrets.iter().all(|s| *s == secrets[0]), "{secrets:?}");
    // The ranks are still running (they sleep 2 s between two fences): look everywhere.
    let seen = every_cmdline_and_environment();
    assert!(seen.len() > 6, "{} /proc entries", seen.len());
    for (pid, bytes) in &seen {
        let hit = bytes.windows(64).any(|w| w == secrets[0].as_bytes());
        assert!(!hit, "pid {pid} shows the job secret in its command line or environment");
    }
    let out = job.wait(LIMIT);
    assert_eq!(out.code, Some(0), "{out:?}");
    out.assert_all_clean(3);
}

/// Through a launch agent, rank 0 reads `rtrun`'s standard input after the secret's line,
/// whole; the other ranks' input ends after the secret.
#[test]
fn launch_agent_forwards_standard_input_to_rank_0() {
    let args = [
        "--outcome-file",
        "/dev/null",
        "-n",
        "2",
        "--host",
        "a",
        "--launch-agent",
        "env RT_TEST_AGENT_HOST={host}",
        "--kv-addr",
        "127.0.0.1",
        "--tag-output",
        PROG,
        "stdin",
    ];
    let mut child = Command::new(RTRUN)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rtrun");
    let mut input = child.stdin.take().unwrap();
    input.write_all(b"first line\nsecond line\n").unwrap();
    drop(input);
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < LIMIT, "rtrun still running");
        thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout} {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains("[0] stdin 23 bytes: first line|second line|"), "{stdout}");
    assert!(stdout.contains("[1] stdin 0 bytes: "), "{stdout}");
}

/// An agent that closes the rank's standard input (where the secret travels) is refused
/// when it is a known one, and otherwise fails the ranks at once with the reason, not a
/// hang.
#[test]
fn launch_agent_without_standard_input_fails_clearly() {
    let out = rtrun(&[
        "-n",
        "2",
        "--host",
        "a",
        "--launch-agent",
        "docker exec {host}",
        "--kv-addr",
        "127.0.0.1",
        PROG,
        "kv",
    ]);
    assert_eq!(out.code, Some(2), "{out:?}");
    assert!(out.stderr.contains("docker exec -i"), "{out:?}");
    // An unknown agent that closes standard input.
    let dir = std::env::temp_dir().join(format!("rt-closing-agent-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let agent = dir.join("agent");
    std::fs::write(&agent, "#!/bin/sh\nshift\nexec \"$@\" </dev/null\n").unwrap();
    std::fs::set_permissions(&agent, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let template = format!("{} {{host}}", agent.display());
    let out = rtrun(&["-n", "2", "--host", "a", "--launch-agent", &template, "--kv-addr", "127.0.0.1", PROG, "kv"]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_ne!(out.code, Some(0), "{out:?}");
    assert!(out.stderr.contains("standard input ended"), "{out:?}");
    assert!(out.elapsed < Duration::from_secs(20), "{out:?}");
}

/// `rtrun --version` prints the version; `-x VAR=VALUE` and `-x VAR` reach every rank's
/// environment (the latter with rtrun's own value).
#[test]
fn version_and_env_options() {
    let o = Command::new(RTRUN).arg("--version").output().unwrap();
    assert!(o.status.success());
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), format!("rtrun (runthrough) {}", env!("CARGO_PKG_VERSION")));
    let out = Command::new(RTRUN)
        .args(["-n", "3", "--tag-output", "-x", "RT_TEST_X=hello world", "--env", "RT_TEST_Y"])
        .args(["sh", "-c", r#"echo "x=$RT_TEST_X y=$RT_TEST_Y""#])
        .env("RT_TEST_Y", "from-rtrun")
        .env_remove("RT_DEBUG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for r in 0..3 {
        assert!(text.contains(&format!("[{r}] x=hello world y=from-rtrun")), "rank {r}: {text}");
    }
}

/// `--output-filename DIR`: each rank's stdout and stderr also land, unprefixed, in
/// `DIR/1/rank.R/stdout` and `stderr` (Open MPI's layout), while the terminal still gets
/// them; a directory that cannot be made fails the launch before any rank starts.
#[test]
fn output_filename_writes_each_rank_s_streams_to_files() {
    let dir = std::env::temp_dir().join(format!("rtrun-outfiles-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(RTRUN)
        .args(["-n", "3", "--tag-output", "--output-filename", dir.to_str().unwrap()])
        .args(["sh", "-c", r#"echo "out of $RT_RANK"; echo "err of $RT_RANK" >&2"#])
        .env_remove("RT_DEBUG")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for r in 0..3 {
        assert!(stdout.contains(&format!("[{r}] out of {r}")), "{stdout}");
        let d = dir.join("1").join(format!("rank.{r}"));
        assert_eq!(std::fs::read_to_string(d.join("stdout")).unwrap().replace('\r', ""), format!("out of {r}\n"));
        assert_eq!(std::fs::read_to_string(d.join("stderr")).unwrap(), format!("err of {r}\n"));
    }
    let _ = std::fs::remove_dir_all(&dir);
    // Under a regular file nothing can be created: rtrun fails, no rank runs.
    let file = std::env::temp_dir().join(format!("rtrun-outfile-{}", std::process::id()));
    std::fs::write(&file, "x").unwrap();
    let out = Command::new(RTRUN)
        .args(["-n", "2", "--output-filename", file.to_str().unwrap(), "sh", "-c", "echo ran"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ran"), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--output-filename"), "{out:?}");
}

/// `--hostfile` in Open MPI's and MPICH's formats: with slot counts the ranks fill each
/// host's slots in turn (then start over), `--map-by node` still goes round-robin, and
/// each rank learns its host and local rank.
#[test]
fn hostfile_places_ranks_by_slots() {
    let file = std::env::temp_dir().join(format!("rtrun-hostfile-{}", std::process::id()));
    std::fs::write(&file, "# two hosts\nhost-a slots=2 max_slots=4\nhost-b:1\n").unwrap();
    let placed = |extra: &[&str]| -> Vec<String> {
        let out = Command::new(RTRUN)
            .args(["-n", "4", "--hostfile", file.to_str().unwrap()])
            .args(extra)
            .args(["sh", "-c", r#"echo "rank $RT_RANK on $RT_NODE local $RT_LOCAL_RANK of $RT_LOCAL_SIZE""#])
            .env_remove("RT_DEBUG")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
        let mut lines: Vec<String> = text.lines().filter(|l| l.starts_with("rank ")).map(str::to_owned).collect();
        lines.sort();
        lines
    };
    assert_eq!(
        placed(&[]),
        [
            "rank 0 on host-a local 0 of 3",
            "rank 1 on host-a local 1 of 3",
            "rank 2 on host-b local 0 of 1",
            "rank 3 on host-a local 2 of 3"
        ]
    );
    assert_eq!(
        placed(&["--map-by", "node"]),
        [
            "rank 0 on host-a local 0 of 2",
            "rank 1 on host-b local 0 of 2",
            "rank 2 on host-a local 1 of 2",
            "rank 3 on host-b local 1 of 2"
        ]
    );
    std::fs::write(&file, "host-a slots=many\n").unwrap();
    let out = Command::new(RTRUN).args(["-n", "1", "--hostfile", file.to_str().unwrap(), "true"]).output().unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("hostfile line 1"), "{out:?}");
}

/// `--exit-status`: rank 1 exits 5 without finalizing, rank 0 finalizes and exits 0. R7's
/// rule (the default) gives rank 0's 0 (the job ran through the failure); first-nonzero
/// gives 5, as mpirun would.
#[test]
fn exit_status_r7_by_default_first_nonzero_on_request() {
    let job = ["-n", "2", PROG, "phase-exit", "0,5", "finalized,running"];
    let out = rtrun(&job);
    assert_eq!(out.code, Some(0), "{out:?}");
    let mut args = vec!["--exit-status", "first-nonzero"];
    args.extend(job);
    let out = rtrun(&args);
    assert_eq!(out.code, Some(5), "{out:?}");
    let out = rtrun(&["--exit-status", "last", "-n", "1", PROG, "kv"]);
    assert_eq!(out.code, Some(2), "{out:?}");
}

/// `rtrun --info` lists every variable of the tunables table; `--info=markdown` is the
/// README's table.
#[test]
fn info_lists_every_tunable() {
    let out = Command::new(RTRUN).arg("--info").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    for t in runthrough_launch::tunables::TUNABLES {
        assert!(text.lines().any(|l| l.trim_start().starts_with(t.name)), "{} missing:\n{text}", t.name);
    }
    let md = Command::new(RTRUN).arg("--info=markdown").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&md.stdout), runthrough_launch::tunables::markdown());
    let bad = Command::new(RTRUN).arg("--info=xml").output().unwrap();
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}
