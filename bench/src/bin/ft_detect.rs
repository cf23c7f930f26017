//! `ft_detect`: how long after a rank fails do the survivors learn it?
//!
//! Run as `rtrun -n N [--ft-period D] [--ft-timeout D] ft_detect [--mode kill|stop]
//! [-v RANK] [-w MS]`. After a start barrier every survivor blocks in a receive from
//! the victim (default rank N-1). The victim waits `-w` ms, takes the time
//! (`CLOCK_REALTIME`: all ranks share the host clock), sends it and its pid to rank 0,
//! and signals itself: SIGKILL (`--mode kill`: the launcher sees the exit and the
//! detector the silence) or SIGSTOP (`--mode stop`: the process hangs, only the ring
//! detector can tell). The signal is sent by a `/bin/sh` child started beforehand and
//! released through a pipe, so the signal follows the timestamp within microseconds.
//! Each survivor records when its receive fails with `RankFailStop` and sends that
//! time to rank 0, which prints one OSU-style row: ranks, the detector's effective
//! period and timeout, and min/avg/max detection latency over the survivors. In stop
//! mode rank 0 then SIGKILLs the stopped victim so that the job can end.
//!
//! One failure per job; `bench/ft_detect.sh` runs repetitions and configurations.

#![forbid(unsafe_code)]

use std::io::Write;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use runthrough::{Comm, Error, ErrorMode};
use runthrough_bench::ft::{
    detect_header, detect_row, detect_usage, detector_settings, min_avg_max, parse_detect_args, DetectCommand,
    DetectOptions, FailMode,
};

/// The victim's time and pid, to rank 0.
const TIME_TAG: i32 = 1;
/// Never sent: the receive the survivors block in.
const DATA_TAG: i32 = 2;
/// A survivor's detection time, to rank 0.
const RESULT_TAG: i32 = 3;

fn now_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn main() -> ExitCode {
    let opts = match parse_detect_args(std::env::args().skip(1)) {
        Ok(DetectCommand::Run(o)) => o,
        Ok(DetectCommand::Help) => {
            print!("{}", detect_usage());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("ft_detect: {e}\n{}", detect_usage());
            return ExitCode::from(2);
        }
    };
    let rt = match runthrough::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("ft_detect: runthrough init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let world = rt.world();
    world.set_error_mode(ErrorMode::ErrorsReturn);
    let status = match measure(&world, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ft_detect: rank {}: {e}", world.rank());
            ExitCode::FAILURE
        }
    };
    drop(world);
    if let Err(e) = rt.finalize() {
        eprintln!("ft_detect: runthrough finalize failed: {e}");
        return ExitCode::FAILURE;
    }
    status
}

fn measure(world: &Comm, opts: &DetectOptions) -> Result<(), String> {
    let (rank, size) = (world.rank(), world.size());
    let victim = opts.victim_in(size)?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (period, timeout) = detector_settings(|k| std::env::var(k).ok(), cores)
        .ok_or("the failure detector is off (rtrun --no-ft): nothing to measure")?;
    let rt_err = |what: &str, e: Error| format!("{what}: {e}");
    // Warm up every pair's path (and the detector's heartbeats) before the failure.
    for _ in 0..3 {
        world.barrier().map_err(|e| rt_err("start barrier", e))?;
    }
    if rank == victim {
        fail(world, opts)
    } else {
        survive(world, opts.mode, victim, period, timeout)
    }
}

/// The victim: wait, take the time, tell rank 0, signal itself. Never returns unless
/// something went wrong.
fn fail(world: &Comm, opts: &DetectOptions) -> Result<(), String> {
    let pid = std::process::id();
    // `$0` is the pid; the shell's builtin kill runs as soon as the line arrives.
    let script = format!("read _ && kill -{} \"$0\"", opts.mode.signal());
    let mut trigger: Child = Command::new("/bin/sh")
        .args(["-c", &script, &pid.to_string()])
        .stdin(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start /bin/sh: {e}"))?;
    let mut pipe = trigger.stdin.take().ok_or("no pipe to /bin/sh")?;
    std::thread::sleep(Duration::from_millis(opts.settle_ms));
    let t = now_ns();
    world.send(&[t, u64::from(pid)], 0, TIME_TAG).map_err(|e| format!("sending the failure time: {e}"))?;
    pipe.write_all(b"\n").and_then(|()| pipe.flush()).map_err(|e| format!("releasing /bin/sh: {e}"))?;
    // SIGKILL ends us here; SIGSTOP freezes us here until rank 0's SIGKILL.
    let _ = trigger.wait();
    loop {
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// A survivor: block in a receive from the victim until it fails; report to rank 0.
fn survive(world: &Comm, mode: FailMode, victim: usize, period: Duration, timeout: Duration) -> Result<(), String> {
    let rank = world.rank();
    let mut failed_at = [0u64; 2];
    if rank == 0 {
        world.recv(&mut failed_at, victim, TIME_TAG).map_err(|e| format!("receiving the failure time: {e}"))?;
    }
    let mut never = [0u8; 1];
    let detected = match world.recv(&mut never, victim, DATA_TAG) {
        Err(Error::RankFailStop { .. }) => now_ns(),
        Err(e) => return Err(format!("receive from the victim failed with {e}, not RankFailStop")),
        Ok(_) => return Err("a message arrived from the victim".into()),
    };
    if rank != 0 {
        return world.send(&[detected], 0, RESULT_TAG).map_err(|e| format!("reporting to rank 0: {e}"));
    }
    let mut times = vec![detected];
    for r in (1..world.size()).filter(|&r| r != victim) {
        let mut t = [0u64];
        world.recv(&mut t, r, RESULT_TAG).map_err(|e| format!("result of rank {r}: {e}"))?;
        times.push(t[0]);
    }
    if mode == FailMode::Stop {
        // The stopped victim would hold the job open: end it.
        let _ = Command::new("kill").args(["-KILL", &failed_at[1].to_string()]).status();
    }
    let ms: Vec<f64> = times.iter().map(|&t| (t as f64 - failed_at[0] as f64) / 1e6).collect();
    let (min, avg, max) = min_avg_max(&ms).ok_or("no survivors")?;
    let mut out = std::io::stdout().lock();
    out.write_all(detect_header(mode).as_bytes())
        .and_then(|()| out.write_all(detect_row(world.size(), period, timeout, min, avg, max).as_bytes()))
        .and_then(|()| out.flush())
        .map_err(|e| format!("writing output: {e}"))
}
