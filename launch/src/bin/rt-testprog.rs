//! `rt-testprog`: a tiny rank program driving the bootstrap client, for `rtrun`'s
//! integration tests.
//!
//! ```text
//! rt-testprog kv                     put own rank, fence, get all, verify, fence, finalized
//! rt-testprog exit CODES             exit without finalizing
//! rt-testprog finalize-exit CODES [MS]   sleep MS (default 0), finalized, then exit
//! rt-testprog abort CODE RANKS [BY [MS]] rank BY (default 0) aborts RANKS (comma list);
//!                                    the others sleep MS (default 10000), then finalize
//!                                    and exit 0
//! rt-testprog sleep MS               connect, initialized, sleep, finalized, exit 0
//! rt-testprog phase-exit CODES PHASES reach the rank's phase, then exit with its code:
//!                                    before-init (no connection), init (connect),
//!                                    running (+ initialized), finalizing (+ finalizing),
//!                                    finalized (+ finalized; rank 0 sleeps 300 ms first)
//! rt-testprog env                    print the RT_* variables, validate them
//! rt-testprog shm [MS]               create the job's shm object, print its name,
//!                                    sleep MS, finalized, exit 0
//! rt-testprog fence-dead             rank 1 exits at once, the others fence: expect
//!                                    PeerExited{1}, print it, wait for each other's
//!                                    key, finalized
//! rt-testprog exited                 rank 1 exits, rank 0 polls Client::exited until
//!                                    it lists 1
//! rt-testprog secret MS              connect (the secret authenticates), fence, print
//!                                    "secret HEX pid PID", sleep MS, fence, finalized
//! rt-testprog stdin                  connect, then print "stdin N bytes: TEXT" of what
//!                                    standard input holds after the secret, finalized
//! ```
//! CODES and PHASES are comma lists indexed by rank (the last entry repeats).
//! Exits 3 on unexpected errors, with a message on stderr.

use std::io::Write as _;
use std::process::exit;
use std::thread::sleep;
use std::time::{Duration, Instant};

use runthrough_launch::{Client, Error, JobEnv};

const T: Duration = Duration::from_secs(20);

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("rt-testprog: {msg}");
    exit(3)
}

fn job() -> JobEnv {
    match JobEnv::from_env() {
        Ok(Some(e)) => e,
        Ok(None) => fail("not started by rtrun (RT_RANK missing)"),
        Err(e) => fail(e),
    }
}

fn connect(env: &JobEnv) -> Client {
    Client::connect(env, T).unwrap_or_else(|e| fail(format!("connect: {e}")))
}

fn per_rank(list: &str, rank: u32) -> i32 {
    let v: Vec<i32> = list.split(',').map(|s| s.trim().parse().unwrap_or_else(|_| fail("bad code list"))).collect();
    *v.get(rank as usize).or(v.last()).unwrap_or(&0)
}

fn per_rank_str(list: &str, rank: u32) -> &str {
    let v: Vec<&str> = list.split(',').map(str::trim).collect();
    v.get(rank as usize).or(v.last()).copied().unwrap_or("")
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map(String::as_str).unwrap_or_else(|| fail("missing argument"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cmd = arg(&args, 0);
    if cmd == "env" {
        let mut out = std::io::stdout().lock();
        let mut vars: Vec<(String, String)> = std::env::vars().filter(|(k, _)| k.starts_with("RT_")).collect();
        vars.sort();
        for (k, v) in vars {
            let _ = writeln!(out, "{k}={v}");
        }
        drop(out);
        job();
        return;
    }
    let env = job();
    let rank = env.rank;
    match cmd {
        "kv" => {
            let mut c = connect(&env);
            c.put(&format!("addr/{rank}"), format!("value-of-{rank}").as_bytes()).unwrap_or_else(|e| fail(e));
            c.fence(T).unwrap_or_else(|e| fail(format!("fence: {e}")));
            for r in 0..env.size {
                let v = c.get(&format!("addr/{r}"), T).unwrap_or_else(|e| fail(e));
                if v != format!("value-of-{r}").as_bytes() {
                    fail(format!("rank {rank}: wrong value for {r}"));
                }
            }
            c.fence(T).unwrap_or_else(|e| fail(format!("fence 2: {e}")));
            match c.get("never-put", Duration::from_millis(50)) {
                Err(Error::Timeout) => {}
                other => fail(format!("expected timeout, got {other:?}")),
            }
            c.finalized().unwrap_or_else(|e| fail(e));
            println!("kv ok rank {rank} of {}", env.size);
        }
        "exit" => exit(per_rank(arg(&args, 1), rank)),
        "phase-exit" => {
            let code = per_rank(arg(&args, 1), rank);
            let phase = per_rank_str(arg(&args, 2), rank);
            let steps = ["before-init", "init", "running", "finalizing", "finalized"];
            let Some(n) = steps.iter().position(|s| *s == phase) else { fail(format!("bad phase {phase:?}")) };
            if n >= 1 {
                let mut c = connect(&env);
                if n >= 2 {
                    c.initialized().unwrap_or_else(|e| fail(e));
                }
                if n >= 3 {
                    c.finalizing().unwrap_or_else(|e| fail(e));
                }
                if n >= 4 {
                    if rank == 0 {
                        sleep(Duration::from_millis(300));
                    }
                    c.finalized().unwrap_or_else(|e| fail(e));
                }
            }
            exit(code);
        }
        "finalize-exit" => {
            let code = per_rank(arg(&args, 1), rank);
            let ms: u64 = args.get(2).map_or(0, |s| s.parse().unwrap_or(0));
            let mut c = connect(&env);
            sleep(Duration::from_millis(ms));
            c.finalized().unwrap_or_else(|e| fail(e));
            exit(code);
        }
        "abort" => {
            let code: i32 = arg(&args, 1).parse().unwrap_or_else(|_| fail("bad code"));
            let ranks: Vec<u32> =
                arg(&args, 2).split(',').map(|s| s.parse().unwrap_or_else(|_| fail("bad rank list"))).collect();
            let by: u32 = args.get(3).map_or(0, |s| s.parse().unwrap_or(0));
            let ms: u64 = args.get(4).map_or(10_000, |s| s.parse().unwrap_or(10_000));
            let mut c = connect(&env);
            if rank == by {
                c.abort(&ranks, code).unwrap_or_else(|e| fail(e));
                exit(code);
            }
            sleep(Duration::from_millis(ms));
            c.finalized().unwrap_or_else(|e| fail(e));
            println!("rank {rank} survived");
        }
        "secret" => {
            let ms: u64 = arg(&args, 1).parse().unwrap_or_else(|_| fail("bad ms"));
            let mut c = connect(&env);
            c.fence(T).unwrap_or_else(|e| fail(format!("fence: {e}")));
            println!("secret {} pid {}", env.secret, std::process::id());
            let _ = std::io::stdout().flush();
            sleep(Duration::from_millis(ms));
            c.fence(T).unwrap_or_else(|e| fail(format!("fence 2: {e}")));
            c.finalized().unwrap_or_else(|e| fail(e));
        }
        "stdin" => {
            use std::io::Read as _;
            let mut c = connect(&env);
            let mut text = String::new();
            std::io::stdin().read_to_string(&mut text).unwrap_or_else(|e| fail(format!("stdin: {e}")));
            println!("stdin {} bytes: {}", text.len(), text.replace('\n', "|"));
            c.finalized().unwrap_or_else(|e| fail(e));
        }
        "sleep" => {
            let ms: u64 = arg(&args, 1).parse().unwrap_or_else(|_| fail("bad ms"));
            let mut c = connect(&env);
            c.initialized().unwrap_or_else(|e| fail(e));
            println!("rank {rank} pid {} sleeping", std::process::id());
            sleep(Duration::from_millis(ms));
            c.finalized().unwrap_or_else(|e| fail(e));
            println!("rank {rank} done");
        }
        "shm" => {
            use std::os::unix::fs::OpenOptionsExt;
            // On Linux, shm_open(name) creates /dev/shm/<name without '/'>; creating it
            // directly with mode 0600 is equivalent and needs no unsafe code.
            let path = format!("/dev/shm/{}", env.shm_name.trim_start_matches('/'));
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .open(&path)
                .unwrap_or_else(|e| fail(format!("{path}: {e}")));
            println!("shm {path}");
            let ms: u64 = args.get(1).map_or(0, |s| s.parse().unwrap_or(0));
            let mut c = connect(&env);
            sleep(Duration::from_millis(ms));
            c.finalized().unwrap_or_else(|e| fail(e));
        }
        "fence-dead" => {
            if rank == 1 {
                exit(0);
            }
            let mut c = connect(&env);
            let t0 = Instant::now();
            match c.fence(T) {
                Err(Error::PeerExited { rank: 1 }) => {
                    println!("rank {rank} peer-exited 1 after {}ms", t0.elapsed().as_millis());
                }
                other => fail(format!("expected PeerExited, got {other:?}")),
            }
            // Nobody exits before every survivor's fence has failed (a slow rank's fence
            // would otherwise name the first survivor that exited).
            c.put(&format!("seen/{rank}"), b"1").unwrap_or_else(|e| fail(e));
            for r in (0..env.size).filter(|&r| r != 1) {
                c.get(&format!("seen/{r}"), T).unwrap_or_else(|e| fail(format!("seen/{r}: {e}")));
            }
            c.finalized().unwrap_or_else(|e| fail(e));
        }
        "exited" => {
            if rank == 1 {
                exit(0);
            }
            let mut c = connect(&env);
            let t0 = Instant::now();
            loop {
                let ex = c.exited().unwrap_or_else(|e| fail(e));
                if ex.contains(&1) {
                    println!("rank {rank} sees exited {ex:?}");
                    break;
                }
                if t0.elapsed() > T {
                    fail("rank 1 never reported as exited");
                }
                sleep(Duration::from_millis(20));
            }
            c.finalized().unwrap_or_else(|e| fail(e));
        }
        other => fail(format!("unknown command {other:?}")),
    }
}
