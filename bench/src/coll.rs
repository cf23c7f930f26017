//! The OSU collective latency tests (`osu_barrier`, `osu_bcast`, `osu_reduce`,
//! `osu_allreduce`, `osu_allgather`, `osu_alltoall`): what they move, their output
//! format and the driver [`run_coll`] every one of them uses.
//!
//! As in OSU 5–7: every rank times each operation alone and separates consecutive
//! operations by an untimed barrier (the barrier test itself runs back to back); each
//! rank's average latency is then summed to rank 0 with a reduce and divided by the
//! job size, and rank 0 prints that average. Reduce and allreduce sum `f32` vectors
//! (OSU's `MPI_FLOAT`/`MPI_SUM`); the root of bcast and reduce is rank 0. The size of
//! allgather and alltoall is the block each rank contributes per peer.

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use runthrough::{Comm, Op, Pod};

use crate::{format_row, launch, op_latency_us, DriveError, Iterations, Options, Test};

/// One OSU collective latency test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Collective {
    /// `osu_barrier`: one line, no sizes.
    Barrier,
    /// `osu_bcast`: bytes from rank 0 to every rank.
    Bcast,
    /// `osu_reduce`: `f32` sum to rank 0.
    Reduce,
    /// `osu_allreduce`: `f32` sum to every rank.
    Allreduce,
    /// `osu_allgather`: every rank's block to every rank.
    Allgather,
    /// `osu_alltoall`: a distinct block from every rank to every rank.
    Alltoall,
}

impl Collective {
    /// All six, in the order the comparison reports them.
    pub const ALL: [Collective; 6] = [
        Collective::Barrier,
        Collective::Bcast,
        Collective::Reduce,
        Collective::Allreduce,
        Collective::Allgather,
        Collective::Alltoall,
    ];

    /// The short name (`barrier`, `bcast`, ...), as `osu_coll.c` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Collective::Barrier => "barrier",
            Collective::Bcast => "bcast",
            Collective::Reduce => "reduce",
            Collective::Allreduce => "allreduce",
            Collective::Allgather => "allgather",
            Collective::Alltoall => "alltoall",
        }
    }

    /// The program name (`osu_barrier`, ...).
    pub fn program(self) -> &'static str {
        match self {
            Collective::Barrier => "osu_barrier",
            Collective::Bcast => "osu_bcast",
            Collective::Reduce => "osu_reduce",
            Collective::Allreduce => "osu_allreduce",
            Collective::Allgather => "osu_allgather",
            Collective::Alltoall => "osu_alltoall",
        }
    }

    /// The test's title in the first header line.
    pub(crate) fn title(self) -> &'static str {
        match self {
            Collective::Barrier => "Barrier Latency Test",
            Collective::Bcast => "Broadcast Latency Test",
            Collective::Reduce => "Reduce Latency Test",
            Collective::Allreduce => "Allreduce Latency Test",
            Collective::Allgather => "Allgather Latency Test",
            Collective::Alltoall => "All-to-All Latency Test",
        }
    }

    /// The column header line (OSU's `%-10s%18s`; the barrier has no size column).
    pub(crate) fn column(self) -> &'static str {
        match self {
            Collective::Barrier => "# Avg Latency(us)",
            _ => "# Size       Avg Latency(us)",
        }
    }

    /// Bytes per element: 4 for the `f32` reductions, 1 otherwise.
    pub fn elem_bytes(self) -> usize {
        match self {
            Collective::Reduce | Collective::Allreduce => std::mem::size_of::<f32>(),
            _ => 1,
        }
    }

    /// Blocks of one size in the send and in the receive buffer with `ranks` ranks.
    pub fn blocks(self, ranks: usize) -> (usize, usize) {
        match self {
            Collective::Barrier => (0, 0),
            Collective::Bcast => (0, 1),
            Collective::Reduce | Collective::Allreduce => (1, 1),
            Collective::Allgather => (1, ranks),
            Collective::Alltoall => (ranks, ranks),
        }
    }

    /// What every element of rank `rank`'s receive buffer holds after the operation
    /// when every send element is 1 and rank 0's bcast buffer is 1 (`None`: nothing to
    /// check, as on the non-root ranks of reduce).
    pub fn expected(self, ranks: usize, rank: usize) -> Option<usize> {
        match self {
            Collective::Barrier => None,
            Collective::Reduce if rank != 0 => None,
            Collective::Reduce | Collective::Allreduce => Some(ranks),
            Collective::Bcast | Collective::Allgather | Collective::Alltoall => Some(1),
        }
    }
}

/// Runs `op` `warmup + timed` times as OSU's collective tests do and returns the time
/// spent in the last `timed` calls of `op` alone: with `separate`, every call is
/// followed by an untimed barrier on `world` so that ranks enter each operation
/// together (the barrier test passes `false`).
///
/// # Errors
/// The first error of `op` or of a barrier.
pub fn coll_timed_loop(
    iterations: Iterations,
    world: &Comm,
    separate: bool,
    mut op: impl FnMut() -> Result<(), runthrough::Error>,
) -> Result<Duration, runthrough::Error> {
    let mut total = Duration::ZERO;
    for i in 0..iterations.warmup + iterations.timed {
        let start = Instant::now();
        op()?;
        let took = start.elapsed();
        if i >= iterations.warmup {
            total += took;
        }
        if separate {
            world.barrier()?;
        }
    }
    Ok(total)
}

/// Runs one OSU collective program on however many ranks the job has (at least 2):
/// parses the command line, initialises runthrough, and for every size calls `op`
/// with the send and receive buffers cut to that size ([`Collective::blocks`] blocks of
/// `size / size_of::<T>()` elements each), times it with [`coll_timed_loop`], reduces
/// the ranks' average latencies to rank 0 and prints their mean there.
///
/// Send buffers hold 1s; receive buffers 0s, except rank 0's for bcast (1s). After the
/// timed loop each rank checks its receive buffer against [`Collective::expected`].
///
/// Exit status as [`crate::run`]: 2 for bad arguments, 1 for errors, 0 otherwise.
pub fn run_coll<T: Pod + From<u8> + PartialEq>(
    coll: Collective,
    mut op: impl FnMut(&Comm, &[T], &mut [T]) -> Result<(), runthrough::Error>,
) -> ExitCode {
    debug_assert_eq!(std::mem::size_of::<T>(), coll.elem_bytes());
    launch(Test::Coll(coll), |opts, world| drive_coll(coll, opts, world, &mut op))
}

fn filled<T: Pod>(len: usize, value: T) -> Result<Vec<T>, DriveError> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| DriveError::Setup(format!("cannot allocate {len} elements")))?;
    v.resize(len, value);
    Ok(v)
}

fn drive_coll<T: Pod + From<u8> + PartialEq>(
    coll: Collective,
    opts: &Options,
    world: &Comm,
    op: &mut impl FnMut(&Comm, &[T], &mut [T]) -> Result<(), runthrough::Error>,
) -> Result<(), DriveError> {
    let (rank, ranks) = (world.rank(), world.size());
    if ranks < 2 {
        return Err(DriveError::WrongSize(ranks, "at least 2"));
    }
    let test = Test::Coll(coll);
    let elem = std::mem::size_of::<T>().max(1);
    let (send_blocks, recv_blocks) = coll.blocks(ranks);
    let max_count = opts.max_bytes / elem;
    let overflow = || DriveError::Setup(format!("buffers of {ranks} x {} bytes overflow", opts.max_bytes));
    let send = filled(max_count.checked_mul(send_blocks).ok_or_else(overflow)?, T::from(1))?;
    let recv_fill = T::from(u8::from(coll == Collective::Bcast && rank == 0));
    let mut recv = filled(max_count.checked_mul(recv_blocks).ok_or_else(overflow)?, recv_fill)?;
    let expected = coll.expected(ranks, rank).and_then(|v| u8::try_from(v).ok()).map(T::from);

    let stdout = std::io::stdout();
    if rank == 0 {
        let mut out = stdout.lock();
        out.write_all(test.header().as_bytes())?;
        out.flush()?;
    }
    let sizes: Vec<usize> = if coll == Collective::Barrier { vec![0] } else { opts.sizes().collect() };
    for size in sizes {
        let count = size / elem;
        let iterations = opts.iterations_for(test, size);
        let (s, r) = (&send[..count * send_blocks], &mut recv[..count * recv_blocks]);
        world.barrier()?;
        let elapsed = coll_timed_loop(iterations, world, coll != Collective::Barrier, || op(world, s, r))?;
        if let Some(want) = expected {
            if let Some(i) = r.iter().position(|x| *x != want) {
                return Err(DriveError::Setup(format!("wrong result at size {size}, element {i}")));
            }
        }
        let mine = [op_latency_us(elapsed, iterations.timed)];
        let mut sum = [0.0f64];
        world.reduce(&mine, &mut sum, Op::Sum, 0)?;
        if rank == 0 {
            let avg = sum[0] / ranks as f64;
            let line = if coll == Collective::Barrier { format!("{avg:>18.2}\n") } else { format_row(size, avg) };
            let mut out = stdout.lock();
            out.write_all(line.as_bytes())?;
            out.flush()?;
        }
        world.barrier()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{parse_args, usage, Command, DEFAULT_MAX_COLL_BYTES};

    fn run_opts(c: Collective, args: &[&str]) -> Options {
        match parse_args(Test::Coll(c), args) {
            Ok(Command::Run(o)) => o,
            other => panic!("expected options for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn coll_defaults_match_osu() {
        let o = run_opts(Collective::Bcast, &[]);
        assert_eq!((o.min_bytes, o.max_bytes), (1, DEFAULT_MAX_COLL_BYTES));
        let t = Test::Coll(Collective::Allgather);
        assert_eq!(o.iterations_for(t, 8192), Iterations { timed: 1_000, warmup: 100 });
        assert_eq!(o.iterations_for(t, 8193), Iterations { timed: 100, warmup: 10 });
        let o = run_opts(Collective::Allreduce, &[]);
        assert_eq!((o.min_bytes, o.max_bytes), (4, 1 << 20));
        assert_eq!(run_opts(Collective::Barrier, &[]).sizes().collect::<Vec<_>>(), [0]);
    }

    #[test]
    fn reductions_round_sizes_to_elements() {
        let o = run_opts(Collective::Reduce, &["-m", "1:16"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [4, 8, 16]);
        let o = run_opts(Collective::Allreduce, &["-m", "8:8", "-i", "100"]);
        assert_eq!((o.min_bytes, o.max_bytes, o.iterations), (8, 8, Some(100)));
        let o = run_opts(Collective::Allreduce, &["-m", "6:64"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [4, 8, 16, 32, 64]);
        // One element is the least: a 1-byte maximum is empty.
        assert!(parse_args(Test::Coll(Collective::Allreduce), ["-m", "1"]).is_err());
        // Byte collectives keep the sizes as given.
        let o = run_opts(Collective::Alltoall, &["-m", "3:12"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [3, 6, 12]);
    }

    #[test]
    fn coll_rejects_bad_arguments() {
        for args in [&["-m", "x"][..], &["-i", "0"], &["-r", "3"], &["-m", "64:8"]] {
            assert!(parse_args(Test::Coll(Collective::Bcast), args).is_err(), "accepted {args:?}");
        }
    }

    #[test]
    fn coll_headers_and_usage() {
        let t = Test::Coll(Collective::Allreduce);
        assert_eq!(t.header(), "# OSU MPI-style Allreduce Latency Test (runthrough)\n# Size       Avg Latency(us)\n");
        assert_eq!(Test::Coll(Collective::Barrier).header().lines().nth(1), Some("# Avg Latency(us)"));
        assert!(usage(t).starts_with("usage: rtrun -n N osu_allreduce "));
        assert!(usage(Test::Latency).starts_with("usage: rtrun -n 2 osu_latency "));
        for c in Collective::ALL {
            assert_eq!(c.program(), format!("osu_{}", c.name()));
            assert_eq!(Test::Coll(c).program(), c.program());
        }
    }

    #[test]
    fn coll_buffers_and_results() {
        assert_eq!(Collective::Alltoall.blocks(8), (8, 8));
        assert_eq!(Collective::Allgather.blocks(3), (1, 3));
        assert_eq!(Collective::Bcast.blocks(4), (0, 1));
        assert_eq!(Collective::Reduce.expected(4, 1), None);
        assert_eq!(Collective::Reduce.expected(4, 0), Some(4));
        assert_eq!(Collective::Allreduce.expected(5, 3), Some(5));
        assert_eq!(Collective::Bcast.expected(5, 3), Some(1));
        let t = Test::Coll(Collective::Bcast);
        assert!((t.result(8, 1000, Duration::from_millis(1)) - 1.0).abs() < 1e-9);
        assert_eq!(op_latency_us(Duration::from_secs(1), 0), 0.0);
    }
}
