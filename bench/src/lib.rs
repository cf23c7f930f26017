//! OSU Micro-Benchmarks-style point-to-point programs for runthrough.
//!
//! The three programs in `src/bin/` (`osu_latency`, `osu_bw`, `osu_bibw`) measure
//! what the OSU Micro-Benchmarks 7.x tests of the same names measure, take the same
//! options and print the same format, so their output can be compared line by line
//! with the reference MPIs (see `bench/compare.sh` and `bench/c/osu_pt2pt.c`):
//!
//! - latency: half the round trip of a blocking send/recv ping-pong;
//! - bandwidth: a window of [`WINDOW_SIZE`] non-blocking sends answered by a
//!   1-byte acknowledgement (`osu_bw`);
//! - bi-directional bandwidth: both ranks post a window of receives and sends
//!   (`osu_bibw`).
//!
//! Bandwidth is in MB/s with MB = 10^6 bytes, as in OSU.
//!
//! This crate holds what the three programs share, in one place: option parsing
//! ([`parse_args`], [`Options`]), the iteration defaults ([`Test::default_iterations`]),
//! the output format ([`Test::header`], [`format_row`]), timing ([`timed_loop`],
//! [`latency_us`], [`bandwidth_mb_per_s`]), buffers ([`Buffers`]) and the driver
//! ([`run`]) that initialises runthrough, checks the job size and prints the table on
//! rank 0. Each program only supplies its measurement kernel.
//!
//! One deliberate difference with OSU: OSU posts all receives of a window into the
//! same buffer, which Rust's borrow rules forbid, so the bandwidth programs receive
//! into [`WINDOW_SIZE`] distinct slots of one allocation ([`Buffers::recv_slots`]).

#![forbid(unsafe_code)]

use std::fmt;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

mod coll;
pub mod ft;
pub mod samples;
pub use coll::{coll_timed_loop, run_coll, Collective};

/// Number of messages in flight per iteration in the bandwidth tests (OSU's default
/// `-W 64`).
pub const WINDOW_SIZE: usize = 64;

/// Sizes strictly above this many bytes use the "large" iteration counts (OSU's
/// `LARGE_MESSAGE_SIZE`).
pub const LARGE_MESSAGE_BYTES: usize = 8192;

/// Default largest message size in bytes (OSU's `MAX_MESSAGE_SIZE`, 4 MiB).
pub const DEFAULT_MAX_BYTES: usize = 1 << 22;

/// Default largest message size of the collectives in bytes (OSU's
/// `MAX_MSG_SIZE_COLL`, 1 MiB).
pub const DEFAULT_MAX_COLL_BYTES: usize = 1 << 20;

/// Tag of the data messages in every test.
pub const DATA_TAG: i32 = 100;

/// Tag of the 1-byte acknowledgement that closes each bandwidth-test window.
pub const ACK_TAG: i32 = 101;

/// The byte every send buffer holds.
pub const SEND_FILL: u8 = b'a';

/// The byte receive buffers hold before a message arrives.
pub const RECV_FILL: u8 = b'b';

/// Exit status for bad command-line arguments (as in the C program and getopt users).
const EXIT_USAGE: u8 = 2;

/// Which OSU test a program implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Test {
    /// `osu_latency`: blocking ping-pong, half round trip in microseconds.
    Latency,
    /// `osu_bw`: uni-directional windowed bandwidth in MB/s.
    Bandwidth,
    /// `osu_bibw`: bi-directional windowed bandwidth in MB/s.
    BiBandwidth,
    /// `osu_mbw_mr`: OSU's multi-pair bandwidth and message rate. The first half of the
    /// ranks each stream windows to a partner in the second half (rank `r` to
    /// `r + n/2`); the row is the sum over the pairs in MB/s and messages per second.
    MessageRate,
    /// One of the collective latency tests (`osu_barrier`, `osu_allreduce`, ...), run
    /// by [`run_coll`] on any number of ranks.
    Coll(Collective),
}

/// How many timed iterations to run for one message size, after how many untimed
/// warm-up iterations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Iterations {
    /// Timed iterations.
    pub timed: usize,
    /// Untimed warm-up iterations, run first.
    pub warmup: usize,
}

impl Test {
    /// The program name (`osu_latency`, `osu_bw`, `osu_bibw`).
    pub fn program(self) -> &'static str {
        match self {
            Test::Latency => "osu_latency",
            Test::Bandwidth => "osu_bw",
            Test::BiBandwidth => "osu_bibw",
            Test::MessageRate => "osu_mbw_mr",
            Test::Coll(c) => c.program(),
        }
    }

    /// The two header lines printed before the rows, each ending in a newline.
    pub fn header(self) -> String {
        let (title, column) = match self {
            Test::Latency => ("Latency Test", "# Size          Latency (us)"),
            Test::Bandwidth => ("Bandwidth Test", "# Size      Bandwidth (MB/s)"),
            Test::BiBandwidth => ("Bi-Directional Bandwidth Test", "# Size      Bandwidth (MB/s)"),
            Test::MessageRate => {
                ("Multiple Bandwidth / Message Rate Test", "# Size                  MB/s        Messages/s")
            }
            Test::Coll(c) => (c.title(), c.column()),
        };
        format!("# OSU MPI-style {title} (runthrough)\n{column}\n")
    }

    /// Smallest size measured when `-m` gives no minimum: 0 for latency and barrier,
    /// one element (4 bytes) for reduce and allreduce, 1 otherwise.
    pub fn default_min_bytes(self) -> usize {
        match self {
            Test::Latency | Test::Coll(Collective::Barrier) => 0,
            Test::Coll(c) => c.elem_bytes(),
            Test::Bandwidth | Test::BiBandwidth | Test::MessageRate => 1,
        }
    }

    /// Largest size measured when `-m` gives no maximum: [`DEFAULT_MAX_BYTES`] for the
    /// point-to-point tests, [`DEFAULT_MAX_COLL_BYTES`] for the collectives (as OSU).
    pub fn default_max_bytes(self) -> usize {
        match self {
            Test::Coll(Collective::Barrier) => 0,
            Test::Coll(_) => DEFAULT_MAX_COLL_BYTES,
            _ => DEFAULT_MAX_BYTES,
        }
    }

    /// Bytes per element of the data the test moves: 4 (`f32`, OSU's `MPI_FLOAT`) for
    /// reduce and allreduce, 1 otherwise. Sizes are whole elements.
    pub fn elem_bytes(self) -> usize {
        match self {
            Test::Coll(c) => c.elem_bytes(),
            _ => 1,
        }
    }

    /// OSU's default iteration counts for a message of `size` bytes: latency runs
    /// 10000 (+1000 warm-up), or 1000 (+100) above [`LARGE_MESSAGE_BYTES`]; the
    /// bandwidth tests run 100 (+10) windows, or 20 (+2) above it; the collectives
    /// 1000 (+100), or 100 (+10) above it.
    pub fn default_iterations(self, size: usize) -> Iterations {
        let large = size > LARGE_MESSAGE_BYTES;
        let (timed, warmup) = match (self, large) {
            (Test::Latency, false) => (10_000, 1_000),
            (Test::Latency, true) => (1_000, 100),
            (Test::Coll(_), false) => (1_000, 100),
            (Test::Coll(_), true) => (100, 10),
            (_, false) => (100, 10),
            (_, true) => (20, 2),
        };
        Iterations { timed, warmup }
    }

    /// The value printed for one size: latency in microseconds or bandwidth in MB/s
    /// (for [`Test::MessageRate`], one pair's).
    pub fn result(self, size: usize, iterations: usize, elapsed: Duration) -> f64 {
        match self {
            Test::Latency => latency_us(elapsed, iterations),
            Test::Bandwidth | Test::MessageRate => bandwidth_mb_per_s(size * WINDOW_SIZE, iterations, elapsed),
            Test::BiBandwidth => bandwidth_mb_per_s(2 * size * WINDOW_SIZE, iterations, elapsed),
            Test::Coll(_) => op_latency_us(elapsed, iterations),
        }
    }

    /// Receive slots rank `rank` needs: one for latency and for the sender of
    /// `osu_bw` (its acknowledgement), a full window otherwise.
    fn recv_slots(self, rank: usize, nranks: usize) -> usize {
        if self.receives_data(rank, nranks) && !matches!(self, Test::Latency | Test::Coll(_)) {
            WINDOW_SIZE
        } else {
            1
        }
    }

    /// Whether rank `rank` of `nranks` receives data messages (the senders of `osu_bw`
    /// and `osu_mbw_mr` only get acknowledgements).
    fn receives_data(self, rank: usize, nranks: usize) -> bool {
        match self {
            Test::Bandwidth => rank != 0,
            Test::MessageRate => rank >= nranks / 2,
            _ => true,
        }
    }

    /// Whether the test runs on `nranks` ranks, and if not the sizes it accepts.
    fn job_size(self, nranks: usize) -> Result<(), &'static str> {
        match self {
            Test::MessageRate if nranks >= 2 && nranks.is_multiple_of(2) => Ok(()),
            Test::MessageRate => Err("an even number of"),
            _ if nranks == 2 => Ok(()),
            _ => Err("exactly 2"),
        }
    }
}

/// Parsed command-line options (`-m [MIN:]MAX`, `-i ITERS`, `-x WARMUP`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Smallest message size in bytes.
    pub min_bytes: usize,
    /// Largest message size in bytes.
    pub max_bytes: usize,
    /// `-i`: timed iterations for every size, instead of the defaults.
    pub iterations: Option<usize>,
    /// `-x`: warm-up iterations for every size, instead of the defaults.
    pub warmup: Option<usize>,
}

impl Options {
    /// The defaults of `test`: all sizes from its minimum to its maximum
    /// ([`Test::default_max_bytes`]).
    pub fn defaults(test: Test) -> Self {
        Options {
            min_bytes: test.default_min_bytes(),
            max_bytes: test.default_max_bytes(),
            iterations: None,
            warmup: None,
        }
    }

    /// The sizes to measure: `min`, then doubling (0 is followed by 1) up to `max`.
    pub fn sizes(&self) -> impl Iterator<Item = usize> {
        let max = self.max_bytes;
        std::iter::successors(Some(self.min_bytes), |&s| if s == 0 { Some(1) } else { s.checked_mul(2) })
            .take_while(move |&s| s <= max)
    }

    /// The iteration counts for `size`: the test's defaults overridden by `-i`/`-x`.
    pub fn iterations_for(&self, test: Test, size: usize) -> Iterations {
        let d = test.default_iterations(size);
        Iterations { timed: self.iterations.unwrap_or(d.timed), warmup: self.warmup.unwrap_or(d.warmup) }
    }
}

/// What the command line asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// Run the test with these options.
    Run(Options),
    /// `-h`/`--help`: print the usage and exit successfully.
    Help,
}

/// A command line that could not be parsed; its `Display` says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The usage text of `test`'s program.
pub fn usage(test: Test) -> String {
    format!(
        "usage: rtrun -n {ranks} {prog} [-m [MIN:]MAX] [-i ITERS] [-x WARMUP] [-h]\n\
         \x20 -m [MIN:]MAX  message sizes in bytes (default {min}:{max}{note})\n\
         \x20 -i ITERS      timed iterations per size (default: OSU's, by size)\n\
         \x20 -x WARMUP     warm-up iterations per size (default: OSU's, by size)\n\
         \x20 -h            print this help\n",
        prog = test.program(),
        ranks = if matches!(test, Test::Coll(_)) { "N" } else { "2" },
        min = test.default_min_bytes(),
        max = test.default_max_bytes(),
        note = match test {
            Test::Coll(Collective::Barrier) => "; ignored: a barrier moves no data",
            Test::Coll(c) if c.elem_bytes() > 1 => "; whole f32 elements",
            _ => "",
        },
    )
}

fn parse_count(opt: &str, value: &str) -> Result<usize, UsageError> {
    value.parse::<usize>().map_err(|_| UsageError(format!("option {opt}: invalid number '{value}'")))
}

/// Parses the arguments that follow the program name.
///
/// Options take their value either separately (`-m 1024`) or attached (`-m1024`).
///
/// # Errors
/// A [`UsageError`] for an unknown option, a missing or malformed value, `-i 0`,
/// or a minimum size above the maximum.
pub fn parse_args<I, S>(test: Test, args: I) -> Result<Command, UsageError>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut opts = Options::defaults(test);
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let arg = arg.as_ref();
        if arg == "-h" || arg == "--help" {
            return Ok(Command::Help);
        }
        let (flag, attached) = match arg.get(..2) {
            Some(f @ ("-m" | "-i" | "-x")) => (f, &arg[2..]),
            _ => return Err(UsageError(format!("unknown argument '{arg}'"))),
        };
        let value = if attached.is_empty() {
            match args.next() {
                Some(v) => v.as_ref().to_owned(),
                None => return Err(UsageError(format!("option {flag} needs a value"))),
            }
        } else {
            attached.to_owned()
        };
        match flag {
            "-m" => match value.split_once(':') {
                Some((min, max)) => {
                    opts.min_bytes = parse_count(flag, min)?;
                    if !max.is_empty() {
                        opts.max_bytes = parse_count(flag, max)?;
                    }
                }
                None => opts.max_bytes = parse_count(flag, &value)?,
            },
            "-i" => {
                let n = parse_count(flag, &value)?;
                if n == 0 {
                    return Err(UsageError("option -i: iterations must be at least 1".into()));
                }
                opts.iterations = Some(n);
            }
            _ => opts.warmup = Some(parse_count(flag, &value)?),
        }
    }
    // Sizes are whole elements, at least one (OSU's reduce and allreduce do the same).
    let elem = test.elem_bytes();
    if elem > 1 {
        opts.min_bytes = (opts.min_bytes / elem).max(1) * elem;
    }
    if opts.min_bytes > opts.max_bytes {
        return Err(UsageError(format!("minimum size {} is above maximum size {}", opts.min_bytes, opts.max_bytes)));
    }
    Ok(Command::Run(opts))
}

/// One output row: the size left-aligned in 10 columns, the value right-aligned in
/// 18 with two decimals (OSU's `%-10d%18.2f`), followed by a newline.
pub fn format_row(size: usize, value: f64) -> String {
    format!("{size:<10}{value:>18.2}\n")
}

/// A latency row: as [`format_row`] with three decimals. Shared-memory latencies of
/// 0.1 us are compared to 0.9x, which two decimals cannot resolve (0.13 against 0.14
/// is anything from 0.90x to 1.0x); `bench/c/osu_pt2pt.c` prints them alike.
pub fn format_latency_row(size: usize, value: f64) -> String {
    format!("{size:<10}{value:>18.3}\n")
}

/// Runs `body` `warmup + timed` times and returns the time taken by the last
/// `timed` runs (the clock starts when warm-up ends, as in OSU).
///
/// # Errors
/// The first error `body` returns, which ends the loop.
pub fn timed_loop<E>(iterations: Iterations, mut body: impl FnMut() -> Result<(), E>) -> Result<Duration, E> {
    for _ in 0..iterations.warmup {
        body()?;
    }
    let start = Instant::now();
    for _ in 0..iterations.timed {
        body()?;
    }
    Ok(start.elapsed())
}

/// Half-round-trip latency in microseconds of `iterations` ping-pongs.
pub fn latency_us(elapsed: Duration, iterations: usize) -> f64 {
    elapsed.as_secs_f64() * 1e6 / (2.0 * iterations as f64)
}

/// Latency in microseconds of one of `iterations` operations that took `elapsed` in
/// all (the collectives' figure; 0 when no iteration ran).
pub fn op_latency_us(elapsed: Duration, iterations: usize) -> f64 {
    if iterations == 0 {
        return 0.0;
    }
    elapsed.as_secs_f64() * 1e6 / iterations as f64
}

/// Bandwidth in MB/s (10^6 bytes per second) of `iterations` rounds that each moved
/// `bytes_per_iteration` bytes.
pub fn bandwidth_mb_per_s(bytes_per_iteration: usize, iterations: usize, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs <= 0.0 {
        return 0.0;
    }
    bytes_per_iteration as f64 * iterations as f64 / secs / 1e6
}

/// Send and receive buffers, allocated once at the largest size.
#[derive(Debug)]
pub struct Buffers {
    /// Source of every data message (`max` bytes).
    pub send: Vec<u8>,
    /// Receive slots, `slots * max` bytes; see [`Buffers::recv_slots`].
    recv: Vec<u8>,
    /// Slot count of `recv`.
    slots: usize,
    /// The acknowledgement byte of the bandwidth test.
    pub ack: [u8; 1],
}

impl Buffers {
    /// Allocates a `max`-byte send buffer and `slots` receive slots of `max` bytes.
    ///
    /// # Errors
    /// A message naming the size when the memory cannot be allocated.
    pub fn new(max: usize, slots: usize) -> Result<Self, String> {
        let recv_bytes =
            max.checked_mul(slots).ok_or_else(|| format!("receive buffer of {slots} x {max} bytes overflows"))?;
        Ok(Buffers { send: filled(max, SEND_FILL)?, recv: filled(recv_bytes, RECV_FILL)?, slots, ack: [0] })
    }

    /// The first receive slot, cut to `size` bytes.
    ///
    /// # Panics
    /// If `size` exceeds the size the buffers were allocated for.
    pub fn recv(&mut self, size: usize) -> &mut [u8] {
        &mut self.recv[..size]
    }

    /// Overwrites the first `size` bytes of every receive slot with [`RECV_FILL`].
    pub fn clear_recv(&mut self, size: usize) {
        let slots = self.slots;
        self.recv_slots(size, slots).for_each(|s| s.fill(RECV_FILL));
    }

    /// Whether the first `size` bytes of every receive slot hold [`SEND_FILL`], that
    /// is whether every slot received a message since [`Buffers::clear_recv`].
    pub fn recv_complete(&mut self, size: usize) -> bool {
        let slots = self.slots;
        self.recv_slots(size, slots).all(|s| s.iter().all(|&b| b == SEND_FILL))
    }

    /// `count` disjoint receive slots of `size` bytes each, packed: slot `w` starts at
    /// byte `w * size` of the receive allocation, exactly where `bench/c/osu_pt2pt.c -d`
    /// puts it (empty slices for size 0).
    ///
    /// # Panics
    /// If `count` exceeds the slot count or `size` the allocated size.
    pub fn recv_slots(&mut self, size: usize, count: usize) -> RecvSlots<'_> {
        self.send_and_recv_slots(size, count).1
    }

    /// The send buffer cut to `size` bytes together with `count` receive slots of
    /// `size` bytes, for programs that send and receive in the same window.
    ///
    /// # Panics
    /// If `count` exceeds the slot count or `size` the allocated size.
    pub fn send_and_recv_slots(&mut self, size: usize, count: usize) -> (&[u8], RecvSlots<'_>) {
        assert!(count <= self.slots, "{count} slots requested, {} allocated", self.slots);
        let capacity = self.recv.len().checked_div(self.slots).unwrap_or(0);
        assert!(size <= capacity, "slot size {size} above allocated {capacity}");
        // Packed at `size`, as the C programs' -d layout (byte for byte the same offsets).
        let stride = size;
        let slots = RecvSlots { rest: &mut self.recv[..stride * count], stride, size, remaining: count };
        (&self.send[..size], slots)
    }
}

/// Iterator over disjoint receive slots, from [`Buffers::recv_slots`].
#[derive(Debug)]
pub struct RecvSlots<'a> {
    rest: &'a mut [u8],
    stride: usize,
    size: usize,
    remaining: usize,
}

impl<'a> Iterator for RecvSlots<'a> {
    type Item = &'a mut [u8];

    fn next(&mut self) -> Option<&'a mut [u8]> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let rest = std::mem::take(&mut self.rest);
        let (slot, tail) = rest.split_at_mut(self.stride);
        self.rest = tail;
        Some(&mut slot[..self.size])
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for RecvSlots<'_> {}

fn filled(len: usize, byte: u8) -> Result<Vec<u8>, String> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| format!("cannot allocate {len} bytes"))?;
    v.resize(len, byte);
    Ok(v)
}

/// Runs one OSU-style program: parses the command line, initialises runthrough,
/// checks that the job has exactly 2 ranks, then for every size calls `measure`
/// on both ranks (after a barrier) and prints the result on rank 0.
///
/// `measure(world, buffers, size, iterations)` runs one size and returns the time
/// of the timed iterations (see [`timed_loop`]); [`Test::result`] turns it into the
/// printed value.
///
/// Returns exit status 2 for bad arguments (after printing the usage to stderr), 1
/// for runtime errors (after printing them), 0 otherwise. Never panics on input.
pub fn run(
    test: Test,
    mut measure: impl FnMut(&runthrough::Comm, &mut Buffers, usize, Iterations) -> Result<Duration, runthrough::Error>,
) -> ExitCode {
    launch(test, |opts, world| drive(test, opts, world, &mut measure))
}

/// What [`run`] and [`run_coll`] share: parses the command line, initialises
/// runthrough, runs `body` on the world communicator, reports its error, finalizes.
fn launch(test: Test, body: impl FnOnce(&Options, &runthrough::Comm) -> Result<(), DriveError>) -> ExitCode {
    let prog = test.program();
    let opts = match parse_args(test, std::env::args().skip(1)) {
        Ok(Command::Run(opts)) => opts,
        Ok(Command::Help) => {
            // Ignore a closed stdout: nothing useful to do about it.
            let _ = std::io::stdout().write_all(usage(test).as_bytes());
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprint!("{prog}: {e}\n{}", usage(test));
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let rt = match runthrough::init() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("{prog}: runthrough init failed: {e}");
            return ExitCode::FAILURE;
        }
    };
    let status = {
        let world = rt.world();
        match body(&opts, &world) {
            Ok(()) => ExitCode::SUCCESS,
            // Every rank sees a wrong job size; one message is enough.
            Err(DriveError::WrongSize(..)) if world.rank() != 0 => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("{prog}: rank {}: {e}", world.rank());
                ExitCode::FAILURE
            }
        }
    };
    if let Err(e) = rt.finalize() {
        eprintln!("{prog}: runthrough finalize failed: {e}");
        return ExitCode::FAILURE;
    }
    status
}

/// Errors of [`drive`]: runthrough's, a failed allocation or a failed write.
#[derive(Debug)]
enum DriveError {
    /// The job size, and the sizes the test accepts.
    WrongSize(usize, &'static str),
    Rt(runthrough::Error),
    Setup(String),
    Io(std::io::Error),
}

impl fmt::Display for DriveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DriveError::WrongSize(n, need) => {
                write!(f, "this test requires {need} processes, the job has {n}")
            }
            DriveError::Rt(e) => write!(f, "{e}"),
            DriveError::Setup(e) => f.write_str(e),
            DriveError::Io(e) => write!(f, "writing output: {e}"),
        }
    }
}

impl From<runthrough::Error> for DriveError {
    fn from(e: runthrough::Error) -> Self {
        DriveError::Rt(e)
    }
}

impl From<std::io::Error> for DriveError {
    fn from(e: std::io::Error) -> Self {
        DriveError::Io(e)
    }
}

fn drive(
    test: Test,
    opts: &Options,
    world: &runthrough::Comm,
    measure: &mut impl FnMut(&runthrough::Comm, &mut Buffers, usize, Iterations) -> Result<Duration, runthrough::Error>,
) -> Result<(), DriveError> {
    let (rank, size) = (world.rank(), world.size());
    test.job_size(size).map_err(|accepted| DriveError::WrongSize(size, accepted))?;
    let mut bufs = Buffers::new(opts.max_bytes, test.recv_slots(rank, size)).map_err(DriveError::Setup)?;
    let stdout = std::io::stdout();
    if rank == 0 {
        let mut out = stdout.lock();
        out.write_all(test.header().as_bytes())?;
        out.flush()?;
    }
    for msg in opts.sizes() {
        let iterations = opts.iterations_for(test, msg);
        let check = test.receives_data(rank, size);
        if check {
            bufs.clear_recv(msg);
        }
        world.barrier()?;
        let elapsed = measure(world, &mut bufs, msg, iterations)?;
        // Outside the timing: every receive slot must hold the sender's bytes.
        if check && !bufs.recv_complete(msg) {
            return Err(DriveError::Setup(format!("received data is wrong at size {msg}")));
        }
        let row = if test == Test::MessageRate {
            // Every sender's own rate, summed over the pairs (as OSU's osu_mbw_mr).
            let mine = if test.receives_data(rank, size) {
                [0.0, 0.0]
            } else {
                let mb = test.result(msg, iterations.timed, elapsed);
                [mb, (WINDOW_SIZE * iterations.timed) as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)]
            };
            let mut sum = [0.0f64; 2];
            world.allreduce(&mine, &mut sum, runthrough::Op::Sum)?;
            format!("{msg:<10}{:>18.2}{:>18.2}\n", sum[0], sum[1])
        } else if test == Test::Latency {
            format_latency_row(msg, test.result(msg, iterations.timed, elapsed))
        } else {
            format_row(msg, test.result(msg, iterations.timed, elapsed))
        };
        if rank == 0 {
            let mut out = stdout.lock();
            out.write_all(row.as_bytes())?;
            out.flush()?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_opts(test: Test, args: &[&str]) -> Options {
        match parse_args(test, args) {
            Ok(Command::Run(o)) => o,
            other => panic!("expected options for {args:?}, got {other:?}"),
        }
    }

    #[test]
    fn defaults_match_osu() {
        let o = run_opts(Test::Latency, &[]);
        assert_eq!((o.min_bytes, o.max_bytes), (0, 1 << 22));
        assert_eq!(run_opts(Test::Bandwidth, &[]).min_bytes, 1);
        assert_eq!(o.iterations_for(Test::Latency, 8192), Iterations { timed: 10_000, warmup: 1_000 });
        assert_eq!(o.iterations_for(Test::Latency, 8193), Iterations { timed: 1_000, warmup: 100 });
        assert_eq!(o.iterations_for(Test::BiBandwidth, 64), Iterations { timed: 100, warmup: 10 });
        assert_eq!(o.iterations_for(Test::Bandwidth, 1 << 20), Iterations { timed: 20, warmup: 2 });
    }

    #[test]
    fn parses_size_range_forms() {
        let o = run_opts(Test::Latency, &["-m", "8:1024"]);
        assert_eq!((o.min_bytes, o.max_bytes), (8, 1024));
        let o = run_opts(Test::Latency, &["-m", "4096"]);
        assert_eq!((o.min_bytes, o.max_bytes), (0, 4096));
        let o = run_opts(Test::Bandwidth, &["-m64:"]);
        assert_eq!((o.min_bytes, o.max_bytes), (64, DEFAULT_MAX_BYTES));
    }

    #[test]
    fn parses_iterations_and_warmup() {
        let o = run_opts(Test::Bandwidth, &["-i", "7", "-x3", "-m", "1:2"]);
        assert_eq!(o.iterations, Some(7));
        assert_eq!(o.iterations_for(Test::Bandwidth, 1 << 20), Iterations { timed: 7, warmup: 3 });
        assert_eq!(run_opts(Test::Latency, &["-x", "0"]).warmup, Some(0));
    }

    #[test]
    fn help_is_recognised() {
        assert_eq!(parse_args(Test::Latency, ["-h"]), Ok(Command::Help));
        assert_eq!(parse_args(Test::Latency, ["-m", "8", "--help"]), Ok(Command::Help));
        assert!(usage(Test::BiBandwidth).contains("osu_bibw"));
    }

    #[test]
    fn rejects_bad_arguments() {
        for args in [
            &["-m"][..],
            &["-m", "abc"],
            &["-m", "-5"],
            &["-m", "8:x"],
            &["-m", "1024:8"],
            &["-i", "0"],
            &["-i"],
            &["-x", "1.5"],
            &["-q"],
            &["extra"],
            &["-"],
        ] {
            assert!(parse_args(Test::Latency, args).is_err(), "accepted {args:?}");
        }
        // Bandwidth tests start at 1 byte, so a 0-byte maximum is empty.
        assert!(parse_args(Test::Bandwidth, ["-m", "0"]).is_err());
    }

    #[test]
    fn sizes_double_from_min() {
        let o = run_opts(Test::Latency, &["-m", "0:16"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [0, 1, 2, 4, 8, 16]);
        let o = run_opts(Test::Bandwidth, &["-m", "3:20"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [3, 6, 12]);
        let o = run_opts(Test::Latency, &["-m", "0:0"]);
        assert_eq!(o.sizes().collect::<Vec<_>>(), [0]);
        let huge = Options { min_bytes: 1 << 62, max_bytes: usize::MAX, iterations: None, warmup: None };
        assert_eq!(huge.sizes().count(), usize::BITS as usize - 62);
    }

    #[test]
    fn rows_and_headers_use_osu_format() {
        assert_eq!(format_row(0, 0.17), "0                       0.17\n");
        assert_eq!(format_row(1_048_576, 8_912.345_6), "1048576              8912.35\n");
        assert_eq!(format_row(8, 123_456_789.0), "8               123456789.00\n");
        assert_eq!(format_latency_row(8, 0.1234), "8                      0.123\n");
        assert_eq!(Test::Latency.header(), "# OSU MPI-style Latency Test (runthrough)\n# Size          Latency (us)\n");
        assert!(Test::Bandwidth.header().ends_with("\n# Size      Bandwidth (MB/s)\n"));
        assert!(Test::BiBandwidth.header().starts_with("# OSU MPI-style Bi-Directional"));
    }

    #[test]
    fn results_use_osu_units() {
        let one_s = Duration::from_secs(1);
        assert!((latency_us(one_s, 500_000) - 1.0).abs() < 1e-9);
        assert!((Test::Bandwidth.result(1_000_000, 10, one_s) - 640.0).abs() < 1e-9);
        assert!((Test::BiBandwidth.result(1_000_000, 10, one_s) - 1280.0).abs() < 1e-9);
        assert_eq!(bandwidth_mb_per_s(8, 1, Duration::ZERO), 0.0);
    }

    #[test]
    fn timed_loop_runs_warmup_then_timed() {
        let mut n = 0;
        let it = Iterations { timed: 5, warmup: 2 };
        timed_loop::<()>(it, || {
            n += 1;
            Ok(())
        })
        .unwrap();
        assert_eq!(n, 7);
        let mut m = 0;
        let r = timed_loop(it, || {
            m += 1;
            if m == 3 {
                Err("stop")
            } else {
                Ok(())
            }
        });
        assert_eq!((r, m), (Err("stop"), 3));
    }

    #[test]
    fn recv_slots_are_disjoint_and_sized() {
        let mut b = Buffers::new(16, 4).unwrap();
        let slots: Vec<&mut [u8]> = b.recv_slots(8, 4).collect();
        assert_eq!(slots.len(), 4);
        for (i, s) in slots.into_iter().enumerate() {
            assert_eq!(s.len(), 8);
            s.fill(i as u8);
        }
        assert_eq!(b.recv(16)[..8], [0; 8]);
        assert!(b.recv_slots(0, 4).all(|s| s.is_empty()));
        b.clear_recv(16);
        assert!(!b.recv_complete(16));
        b.recv_slots(16, 4).for_each(|s| s.copy_from_slice(&[SEND_FILL; 16]));
        assert!(b.recv_complete(16));
        b.recv_slots(16, 4).last().into_iter().for_each(|s| s[15] = 0);
        assert!(!b.recv_complete(16) && b.recv_complete(15));
        let mut empty = Buffers::new(0, WINDOW_SIZE).unwrap();
        assert_eq!(empty.recv_slots(0, WINDOW_SIZE).count(), WINDOW_SIZE);
    }
}
