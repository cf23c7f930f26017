//! The progress engine: sends, receives, protocols and failure-driven completion.
//!
//! Parts (DESIGN §2, STYLE "A message's way"):
//! - start: `Engine::start_send` stamps the per-peer sequence number and picks eager
//!   (payload in the record) or rendezvous (an RTS; the receiver pulls with CMA/RMA and
//!   answers FIN, or asks for a stream with CTS when it cannot pull);
//!   `Engine::start_recv` matches the unexpected queue or posts the receive;
//! - [`Engine::progress`]: drains the transport in place (payloads are copied straight
//!   from the ring into the matched user buffer), restores send order from sequence
//!   numbers, runs the deferred pulls, then retries the per-peer pending queues (work a
//!   busy transport refused, kept in order so nothing overtakes);
//! - failure: [`Engine::fail_peer`] completes every request touching a failed rank with
//!   `RankFailStop` and discards its protocol work, from outside the protocols.
//!
//! The hot path (eager send, expected receive) allocates nothing: requests live in a
//! slab, queues keep their capacity, unexpected payloads use pooled buffers.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::time::Instant;

use runthrough_ft::failure_set::FailureSet;
use runthrough_ft::{AgreeMsg, Agreement, Decision, Detector, FtEvent, Msg, Participants, Time};

use crate::buf::{RawBuf, RawBufMut};
use crate::comms::{Broken, Comms};
use crate::error::Error;
use crate::matching::{Arrival, Pattern, PostedQueue, UnexpectedQueue};
use crate::note::{Note, MAX_NOTE_BYTES};
use crate::request::{Kind, RecvPhase, Request, SendPhase, Slab, Status};
use crate::transport::{AnyTransport, Caps, Event, Posted, Transport, TransportError};
use crate::types::{ContextId, OpId, Rank, RemoteRegion, ReqId, Seq, Tag};
use crate::wire::{Envelope, Header, MAX_HEADER_BYTES};

mod cancel;

/// Default largest payload sent eagerly (bytes); larger messages use rendezvous.
pub const DEFAULT_EAGER_LIMIT_BYTES: usize = 16 * 1024;
/// Default smallest rendezvous pulled by CMA/RMA rather than streamed.
pub const DEFAULT_RMA_MIN_BYTES: usize = 512 * 1024;
/// Default number of busy polls a blocking wait makes before it starts yielding.
pub const DEFAULT_SPIN_POLLS: u32 = 4000;
/// Polls made before yielding when ranks outnumber cores.
pub const OVERSUBSCRIBED_SPIN_POLLS: u32 = 16;
/// Records handed from the transport per progress call.
const POLL_BUDGET: usize = 64;
/// Bytes one progress call copies by CMA pulls at most (past the first pull).
const PULL_BYTES_PER_CALL: u64 = 1 << 20;
/// Transport drains before a peer is declared failed (each drains up to all records).
const DRAIN_ROUNDS: usize = 64;
/// Unexpected-payload buffers kept for reuse.
const POOL_KEEP: usize = 64;
/// A rendezvous pulled with asynchronous reads (a fabric) is read in chunks of this size,
/// all posted at once: the provider moves one chunk while the engine copies the previous
/// one into the receive buffer, and the transport's bounce buffers stay small enough to
/// be reused from message to message.
const READ_CHUNK: usize = 256 * 1024;
/// Long shared-memory receives timed per protocol before [`Config::cma_choose`] decides.
pub const CHOICE_SAMPLES: u8 = 9;
/// How much faster streaming must have been for [`PullChoice`] to keep it: a pull makes
/// one copy on the receiver's core and leaves the sender's free (it only waits for the
/// FIN), streaming copies on both, which a one-way measurement does not charge. Where the
/// two were close the verdict was a coin toss with a lopsided cost: on an Intel host,
/// 1 MiB `osu_bw` streamed 10.9-11.7 GB/s against 9.8-10.2 pulled, but a streamed 4 MiB
/// `osu_bibw` took 7.7-8.0 against 10.8-12.9 (bench/RESULTS.md §0.15).
const STREAM_MARGIN: f64 = 1.15;
/// Receives per timed span of [`PullChoice`].
const CHOICE_SPAN: usize = 4;
/// Sizes [`Config::cma_choose`] decides for separately: up to 64 KiB, 128 KiB, 256 KiB,
/// 512 KiB, 1 MiB, 2 MiB, 4 MiB, and longer. Which protocol wins changes with the size on some
/// hosts (an Intel host, bench/RESULTS.md §0.15: one verdict taken on the first 512 KiB
/// receives streamed 4 MiB `osu_bibw` at 8.0-8.9 GB/s where pulling took 11.6-12.9).
const CHOICE_BUCKETS: usize = 8;

/// The [`CHOICE_BUCKETS`] bucket of a long receive of `len` bytes: `len` in
/// (2^(15+b), 2^(16+b)] is in bucket `b` (shorter ones in the first, longer in the last).
fn choice_bucket(len: u64) -> usize {
    let bits = 64 - len.saturating_sub(1).leading_zeros() as usize;
    bits.saturating_sub(16).min(CHOICE_BUCKETS - 1)
}

/// [`Config::cma_choose`]'s measurements: per protocol, the lowest wall-clock time per
/// byte over [`CHOICE_SPAN`] consecutive receives, from the completion of the one before
/// them to the completion of the last.
///
/// Completion to completion, because per-message times mislead both ways
/// (bench/RESULTS.md §0.12): timed from its CTS, a streamed receive is charged with the
/// ones queued before it (streaming lost to CMA at 10.7 against 21.7 GB/s `osu_bw`
/// 4 MiB); timed alone, it is not charged with the part already in the ring nor with
/// this rank's own sends streamed meanwhile, while a CMA read is charged with nothing
/// but itself. Completion to completion charges each protocol with everything the rank
/// did meanwhile, as a window of them would; several receives, so the part of the next
/// one already in the ring evens out and one hiccup does not decide (over two, `osu_bibw`
/// chose CMA in 3 of 5 runs where streaming was 1.25x faster); the lowest of five such
/// spans, so a slow start (a fresh buffer's page faults, a peer not yet running: 0.2-0.8
/// against 0.03-0.08 ns/B later) does not decide either.
#[derive(Debug, Default, Clone, Copy)]
struct PullChoice {
    cma: Samples,
    stream: Samples,
}

#[derive(Debug, Default, Clone, Copy)]
struct Samples {
    n: u8,
    done: [Option<Instant>; CHOICE_SAMPLES as usize],
    bytes: [u64; CHOICE_SAMPLES as usize],
    per_byte: f64,
    /// The median span's time per byte.
    median_per_byte: f64,
}

impl PullChoice {
    /// Both protocols have their samples: [`PullChoice::pull`] no longer changes, and
    /// receives are no longer timed.
    fn decided(&self) -> bool {
        self.stream.n >= CHOICE_SAMPLES && self.cma.n >= CHOICE_SAMPLES
    }

    /// Whether the next long receive is pulled by CMA: not until streaming has its
    /// samples, then until CMA has its own, then unless streaming was faster by more
    /// than [`STREAM_MARGIN`] over both its lowest span and its median one. The lowest
    /// alone took a streamed span whose bytes were already in the ring (the rings hold
    /// 4 MiB at 2 ranks, four 1 MiB messages) for the protocol's speed: on an Intel host
    /// 1 MiB `osu_bibw` streamed spans of 5.9, 6.1, 6.4, 11.9 and 12.2 GB/s against
    /// pulls of 8.2-8.9, streamed on, and took 9.5 GB/s where pulling took 17-19
    /// (bench/RESULTS.md §0.16).
    fn pull(&self) -> bool {
        if self.stream.n < CHOICE_SAMPLES {
            return false;
        }
        let faster = |cma: f64, stream: f64| cma > stream * STREAM_MARGIN;
        self.cma.n < CHOICE_SAMPLES
            || !(faster(self.cma.per_byte, self.stream.per_byte)
                && faster(self.cma.median_per_byte, self.stream.median_per_byte))
    }

    /// A long receive of `bytes`, pulled (`cma`) or streamed, completed at `done`.
    fn record(&mut self, cma: bool, bytes: u64, done: Instant) {
        let s = if cma { &mut self.cma } else { &mut self.stream };
        let i = usize::from(s.n);
        if i >= s.done.len() {
            return;
        }
        s.done[i] = Some(done);
        s.bytes[i] = bytes;
        s.n += 1;
        if s.n == CHOICE_SAMPLES {
            let mut spans = [f64::INFINITY; CHOICE_SAMPLES as usize - CHOICE_SPAN];
            for (j, out) in (CHOICE_SPAN..s.done.len()).zip(spans.iter_mut()) {
                if let (Some(end), Some(start)) = (s.done[j], s.done[j - CHOICE_SPAN]) {
                    let bytes: u64 = s.bytes[j + 1 - CHOICE_SPAN..=j].iter().sum();
                    *out = end.saturating_duration_since(start).as_secs_f64() / bytes.max(1) as f64;
                }
            }
            spans.sort_by(f64::total_cmp);
            s.per_byte = spans[0];
            s.median_per_byte = spans[spans.len() / 2];
        }
    }
}

/// Default largest fragment of a streamed rendezvous: 64 KiB less one ring cell, so a
/// fragment, its header and its record prefix fill exactly a quarter of a 256 KiB ring
/// (1024 cells): four fragments in flight per ring. A whole 64 KiB fragment would take
/// 1025 cells and leave room for three (1 MiB `osu_bibw` 0.86x, 9 interleaved runs).
pub const DEFAULT_STREAM_CHUNK: usize = 64 * 1024 - 64;

/// Engine tunables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Payloads up to this size go eagerly (capped by the transport's record size).
    pub eager_limit: usize,
    /// Busy polls of a blocking wait before it yields the CPU.
    pub spin_polls: u32,
    /// Largest fragment of a streamed rendezvous (capped by the record size).
    pub stream_chunk: usize,
    /// Rendezvous messages at least this long are pulled with RMA reads that complete
    /// later (a fabric's); shorter ones are streamed through the transport.
    pub rma_min: usize,
    /// Rendezvous messages at least this long are pulled with reads that complete in the
    /// call (CMA on shared memory, single copy); shorter ones are streamed through the
    /// rings, which pipelines the two copies over two cores. `usize::MAX`: never.
    pub cma_min: usize,
    /// Measure instead which of the two completes those messages sooner on this host:
    /// the first [`CHOICE_SAMPLES`] are streamed, the next as many pulled, and from then
    /// on every one takes the protocol that was faster (completion to completion);
    /// from a lower rank, a receive takes that rank's verdict (carried by its RTS), so
    /// both directions of a pair take one protocol. Which wins
    /// differs between hosts of one kind (bench/RESULTS.md §0.10, §0.11): set when every
    /// rank has a core; when ranks outnumber cores CMA wins (the peer is often not
    /// running to copy its half).
    pub cma_choose: bool,
    /// Ranks outnumber cores on this node: shared-memory waits yield at once, barriers
    /// of more than four members gather to the first member and release from it (fewer
    /// wake-ups than everyone watching everyone), and long broadcasts are pulled in
    /// place.
    pub oversubscribed: bool,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            eager_limit: DEFAULT_EAGER_LIMIT_BYTES,
            spin_polls: DEFAULT_SPIN_POLLS,
            stream_chunk: DEFAULT_STREAM_CHUNK,
            rma_min: DEFAULT_RMA_MIN_BYTES,
            cma_min: DEFAULT_RMA_MIN_BYTES,
            cma_choose: false,
            oversubscribed: false,
        }
    }
}

#[derive(Debug)]
enum Unexp {
    Eager(Vec<u8>),
    Rts { len: u64, sreq: ReqId, region: RemoteRegion, pull: Option<bool> },
}

#[derive(Debug)]
struct UnexpEntry {
    peer: Rank,
    data: Unexp,
    /// The message's sequence number from `peer`: what a `CancelSend` names.
    seq: u32,
}

/// Work for one peer that the transport has not accepted yet, in order.
#[derive(Debug)]
enum Outgoing {
    /// An eager message or an RTS of request `req`.
    Msg { req: ReqId, header: Header },
    /// A protocol control header (CTS, FIN).
    Ctrl(Header),
    /// A rendezvous being streamed after a CTS.
    Stream { sreq: ReqId, rreq: ReqId, offset: u64 },
    /// A failure notice that must not be lost (heartbeats are dropped when busy).
    Ft(Msg),
    /// An agreement message (encoded), reliable.
    Agree(Vec<u8>),
    /// An engine notice (departure handshake, …), reliable.
    Note(Note),
}

/// Agreements (validate, agree) this process takes part in, and messages for instances
/// it has not entered yet (seeds/004: a process may enter late).
#[derive(Debug, Default)]
struct Agreements {
    running: Vec<(ContextId, Agreement)>,
    early: Vec<(Rank, AgreeMsg)>,
    origin: Option<Instant>,
    /// An agreement took input since its output was last drained (so progress only
    /// services agreements when there can be something to send).
    dirty: bool,
}

/// Messages kept for agreements not entered yet, at most.
const EARLY_AGREE_KEEP: usize = 4096;
/// The agreement sequence bit of error resolutions (R27): their own series per
/// communicator, beside the validates, agrees and creations the user calls.
const RESOLUTION_SERIES: u32 = 1 << 31;
/// Revoke/corrupt notices kept for communicators not created yet, at most.
const EARLY_NOTES_KEEP: usize = 256;

impl Agreements {
    fn now(&mut self) -> Time {
        Time::from_duration(self.origin.get_or_insert_with(Instant::now).elapsed())
    }
}

/// The failure detector as the engine drives it (DESIGN §3).
#[derive(Debug)]
struct Ft {
    det: Detector,
    origin: Instant,
    excluded: bool,
    scratch: Vec<u8>,
    /// A message was handled since the detector's output was last drained.
    dirty: bool,
    /// The rank the detector observes (cached), and whether any record arrived from it
    /// since the last tick: traffic proves liveness as well as a heartbeat does, and
    /// heartbeats can be crowded out by a busy transport.
    observed: Option<u32>,
    observed_spoke: bool,
}

impl Ft {
    fn now(&self) -> Time {
        Time::from_duration(self.origin.elapsed())
    }
}

#[derive(Debug, Default)]
struct Peer {
    send_seq: u32,
    recv_seq: u32,
    pending: VecDeque<Outgoing>,
    /// Matched-kind records that arrived ahead of their turn (other transports).
    held: BTreeMap<u32, Vec<u8>>,
    failed: bool,
    /// Exited after finalizing: gone, but not a failure.
    departed: bool,
    /// This rank is departing and waits for this peer's `ByeAck`.
    awaiting_bye_ack: bool,
    no_rma: bool,
}

#[derive(Debug, Clone, Copy)]
struct Pull {
    rreq: ReqId,
    peer: Rank,
    src: u32,
    tag: i32,
    len: u64,
    sreq: ReqId,
    region: RemoteRegion,
    /// The sender's protocol verdict (`Header::Rts::pull`).
    hint: Option<bool>,
}

/// Counters for tests and diagnostics.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Records that failed to decode (dropped, logged).
    pub malformed: u64,
    /// Protocol headers naming an unknown or mismatched request (dropped, logged).
    pub stray: u64,
    /// Messages that went to the unexpected queue.
    pub unexpected: u64,
    /// Rendezvous pulled with CMA/RMA.
    pub pulled: u64,
    /// Rendezvous streamed after a CTS.
    pub streamed: u64,
}

/// One asynchronous read of a rendezvous (a chunk of it).
#[derive(Debug, Clone, Copy)]
struct ChunkRead {
    rreq: ReqId,
    peer: Rank,
    offset: usize,
}

/// Everything but the transport, so a transport callback can borrow it mutably.
#[derive(Debug)]
struct State {
    me: Rank,
    cfg: Config,
    caps: Caps,
    eager_max: usize,
    chunk: usize,
    reqs: Slab,
    posted: PostedQueue<ReqId>,
    unexpected: UnexpectedQueue<UnexpEntry>,
    peers: Vec<Peer>,
    queued: usize,
    /// Shared with a background thread without the lock: see [`Pulse`].
    pulse: std::sync::Arc<Pulse>,
    pulls: Vec<Pull>,
    /// Asynchronous reads in flight, by operation id (never reused): which receive and
    /// where in its buffer the read's bytes go.
    reads: std::collections::HashMap<u64, ChunkRead>,
    next_read: u64,
    /// What [`Config::cma_choose`] measured so far, per size ([`choice_bucket`]).
    choice: [PullChoice; CHOICE_BUCKETS],
    newly_failed: Vec<Rank>,
    pool: Vec<Vec<u8>>,
    stats: Stats,
    comms: Comms,
    failures: FailureSet,
    /// Exposures of finished sends, withdrawn at the next progress.
    unexpose: Vec<RemoteRegion>,
    ft: Option<Ft>,
    agree: Agreements,
    /// The node's collective area, when shared-memory collectives are on.
    shm_coll: Option<std::sync::Arc<crate::coll::ShmColl>>,
    /// This rank is finalizing (departure handshake sent): its detector no longer
    /// judges others (see [`Engine::begin_departure`]).
    departing: bool,
    /// Peers whose `Bye` arrived and still has to be answered and applied.
    byes: Vec<Rank>,
    /// Communicator notices read from the wire (with their sender), applied after the
    /// poll.
    notes_in: Vec<(Rank, Note)>,
    /// Some communicator has had a signal (R27): resolutions are serviced.
    propagating: bool,
    /// Some communicator was broken or has had a signal: new operations look at their
    /// communicator's state (`comm_takes`). Never reset: it costs a lookup, not more.
    comm_notices: bool,
    /// Notices for communicators this process has not created yet (bounded).
    early_notes: Vec<(Rank, Note)>,
    /// Witnessed mode (R32): the detector's verdicts and the transports' evidence wait in
    /// `suspects` for the witness (the launcher) before they fail a peer.
    witnessed: bool,
    /// Ranks suspected and not yet handed to the witness ([`Engine::take_suspects`]).
    suspects: Vec<Rank>,
    /// Cancels of sends asked of their receivers ([`Engine::cancel_send`]), by (peer,
    /// sequence number): the send request if it still had one, and the answer once it came.
    cancels: std::collections::HashMap<(u32, u32), (Option<ReqId>, Option<bool>)>,
}

/// The progress engine of one process.
#[derive(Debug)]
pub struct Engine {
    transport: AnyTransport,
    st: State,
}

/// What an engine shares with a background thread (the runtime's progress thread)
/// without its lock, so that the thread need not take the lock while another thread
/// progresses the engine: it then only asks for the detector's tick, which the next
/// [`Engine::progress`] runs. Taking the lock every tick from a thread that shares the
/// core with the application's costs lock hand-overs and context switches in the
/// middle of long copies (bench/RESULTS.md §0.16: 1 MiB `osu_bibw`).
#[derive(Debug, Default)]
pub struct Pulse {
    /// [`Engine::progress`] calls so far (wrapping; written under the engine lock).
    calls: AtomicU64,
    /// The detector's tick is due: the next progress call runs [`Engine::ft_tick`].
    tick_due: AtomicBool,
    /// The engine has something only the lock holder can hand over: suspects for the
    /// witness, an exclusion, futures to wake ([`Engine::refresh_pulse`]).
    attention: AtomicBool,
}

impl Pulse {
    /// Counts a progress call (single writer: the engine lock's holder).
    #[inline]
    fn count_call(&self) {
        self.calls.store(self.calls.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    /// Progress calls so far (wrapping): changed between two looks, some thread
    /// progressed the engine in between.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    /// Whether the engine holds something for the lock holder ([`Pulse`]'s `attention`).
    pub fn needs_lock(&self) -> bool {
        self.attention.load(Ordering::Relaxed)
    }

    /// Asks the next [`Engine::progress`] call to run the detector's tick.
    pub fn request_tick(&self) {
        self.tick_due.store(true, Ordering::Relaxed);
    }
}

impl Engine {
    /// An engine for rank `me` of `size` ranks over `transport`.
    pub fn new(me: Rank, size: u32, transport: AnyTransport, cfg: Config) -> Self {
        let caps = transport.caps();
        let room = caps.max_record.saturating_sub(MAX_HEADER_BYTES);
        let eager_max = cfg.eager_limit.min(room);
        let chunk = cfg.stream_chunk.min(room).max(1);
        Self {
            transport,
            st: State {
                me,
                cfg,
                caps,
                eager_max,
                chunk,
                reqs: Slab::default(),
                posted: PostedQueue::default(),
                unexpected: UnexpectedQueue::default(),
                peers: (0..size).map(|_| Peer::default()).collect(),
                queued: 0,
                pulse: std::sync::Arc::default(),
                pulls: Vec::new(),
                reads: std::collections::HashMap::new(),
                next_read: 0,
                choice: [PullChoice::default(); CHOICE_BUCKETS],
                newly_failed: Vec::new(),
                witnessed: false,
                suspects: Vec::new(),
                pool: Vec::new(),
                stats: Stats::default(),
                comms: Comms::default(),
                failures: FailureSet::new(size),
                unexpose: Vec::new(),
                ft: None,
                agree: Agreements::default(),
                shm_coll: None,
                departing: false,
                byes: Vec::new(),
                notes_in: Vec::new(),
                propagating: false,
                comm_notices: false,
                early_notes: Vec::new(),
                cancels: std::collections::HashMap::new(),
            },
        }
    }

    /// This process's world rank.
    pub fn rank(&self) -> Rank {
        self.st.me
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.st.peers.len() as u32
    }

    /// The tunables in force.
    pub fn config(&self) -> Config {
        self.st.cfg
    }

    /// Largest payload sent eagerly.
    pub fn eager_limit(&self) -> usize {
        self.st.eager_max
    }

    /// The libfabric transport's counters, when every peer is on libfabric.
    pub fn fabric_stats(&self) -> Option<crate::transport::fabric::FabricStats> {
        match &self.transport {
            AnyTransport::Fabric(t) => Some(t.stats()),
            _ => None,
        }
    }

    /// Diagnostic counters.
    pub fn stats(&self) -> Stats {
        self.st.stats
    }

    /// Whether `peer` is known failed.
    pub fn is_failed(&self, peer: Rank) -> bool {
        self.st.peers.get(peer.0 as usize).is_some_and(|p| p.failed)
    }

    /// Number of live requests (pending or completed but not yet taken).
    pub fn live_requests(&self) -> usize {
        self.st.reqs.live()
    }

    /// Whether any work is still queued for a busy transport, or sent data is still in
    /// the transport's hands (finalize waits for neither to remain).
    pub fn has_queued(&self) -> bool {
        self.st.queued > 0 || !self.transport.is_idle()
    }

    /// Starts sending `buf` to `peer` (world rank) on context `ctx`, as rank `src` of the
    /// communicator to its rank `dest`. Never blocks; an error is reported at completion.
    pub(crate) fn start_send(
        &mut self,
        ctx: ContextId,
        src: u32,
        dest: u32,
        peer: Rank,
        tag: Tag,
        buf: RawBuf,
    ) -> ReqId {
        self.start_send_mode(ctx, src, dest, peer, tag, buf, false)
    }

    /// The small-message path: sends `buf` at once when it is an eager message and the
    /// transport takes it now, with no request slot. Returns the send's status then (the
    /// send is complete: the transport copied `buf`), or `None` when the general path
    /// ([`Engine::start_send`]) must run: a rendezvous size, a peer with queued work (its
    /// order must hold), a failed peer, a communicator with a notice (R27–R29), a busy
    /// or failing transport. Nothing was sent and no sequence number taken then.
    #[inline]
    pub(crate) fn try_send_now(
        &mut self,
        ctx: ContextId,
        src: u32,
        dest: u32,
        peer: Rank,
        tag: Tag,
        buf: &[u8],
    ) -> Option<Status> {
        let Engine { transport, st } = self;
        if buf.len() > st.eager_max || st.comm_notices {
            return None;
        }
        let p = st.peers.get_mut(peer.0 as usize)?;
        if p.failed || !p.pending.is_empty() {
            return None;
        }
        let header = Header::Eager { env: Envelope { ctx, src, tag, seq: Seq(p.send_seq) }, len: buf.len() as u32 };
        let mut hb = [0u8; MAX_HEADER_BYTES];
        let n = header.encode(&mut hb);
        match transport.try_send(peer, &hb[..n], buf) {
            Ok(Posted::Done) | Ok(Posted::InFlight(_)) => {
                p.send_seq = p.send_seq.wrapping_add(1);
                Some(Status { source: dest as usize, tag: tag.0, len: buf.len() })
            }
            Err(_) => None,
        }
    }

    /// [`Engine::start_send`], or with `sync` a synchronous-mode send (MPI_Ssend): it
    /// always takes the rendezvous path, so it completes only once the receiver matched
    /// it and took the data.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn start_send_mode(
        &mut self,
        ctx: ContextId,
        src: u32,
        dest: u32,
        peer: Rank,
        tag: Tag,
        buf: RawBuf,
        sync: bool,
    ) -> ReqId {
        let Engine { transport, st } = self;
        let len = buf.len();
        let phase = SendPhase::AwaitingTransport;
        let req = st.reqs.insert(Request {
            kind: Kind::Send { peer, dest, tag: tag.0, buf, phase, region: None },
            outcome: None,
            ctx,
        });
        // Revoked/corrupted (R28, R29) or resolving (R27) communicators: one flag read
        // on the hot path while none exists.
        if st.comm_notices && st.comm_takes(ctx, req) {
            return req;
        }
        let p = &mut st.peers[peer.0 as usize];
        if p.failed {
            st.set_outcome(req, Err(Error::RankFailStop { rank: dest }));
            return req;
        }
        let env = Envelope { ctx, src, tag, seq: Seq(p.send_seq) };
        p.send_seq = p.send_seq.wrapping_add(1);
        let header = if len <= st.eager_max && !sync {
            Header::Eager { env, len: len as u32 }
        } else {
            // Without an exposure the receiver cannot pull and asks for a stream instead.
            let region = transport.expose(peer, buf.addr(), len).unwrap_or(RemoteRegion {
                addr: buf.addr(),
                len: len as u64,
                key: 0,
            });
            if let Some(Request { kind: Kind::Send { region: r, .. }, .. }) = st.reqs.get_mut(req) {
                *r = Some(region);
            }
            let c = &st.choice[choice_bucket(len as u64)];
            let pull = (st.cfg.cma_choose && c.decided()).then(|| c.pull());
            Header::Rts { env, len: len as u64, sreq: req, region, pull }
        };
        let out = Outgoing::Msg { req, header };
        if st.peers[peer.0 as usize].pending.is_empty() {
            if let Some(out) = st.try_post(transport, peer, out) {
                st.peers[peer.0 as usize].pending.push_back(out);
                st.queued += 1;
            }
        } else {
            st.peers[peer.0 as usize].pending.push_back(out);
            st.queued += 1;
        }
        req
    }

    /// Starts a receive into `buf` for `pattern`; `peer` is the world rank of a specific
    /// source (`None` for ANY_SOURCE).
    pub(crate) fn start_recv(&mut self, pattern: Pattern, peer: Option<Rank>, buf: RawBufMut) -> ReqId {
        let req = self.st.reqs.insert(Request {
            kind: Kind::Recv { peer, buf, phase: RecvPhase::AwaitingMatch },
            outcome: None,
            ctx: pattern.ctx,
        });
        if self.st.comm_notices && self.st.comm_takes(pattern.ctx, req) {
            return req;
        }
        let comm = self.st.comms.get(pattern.ctx);
        // R17/R18: a collective receive on a communicator made inactive by a failure fails
        // at once. A collective that began just before the failure became known posts its
        // receives after `fail_peer` failed the pending ones; members that learnt of the
        // failure first skip the collective, so those receives would wait forever.
        if pattern.ctx.0 & 1 == 1 {
            if let Some(c) = comm.filter(|c| !c.active) {
                let rank = self.st.failures.in_order().iter().rev().find_map(|w| c.local_rank(Rank(*w))).unwrap_or(0);
                self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
                return req;
            }
        }
        // R12: a source whose receive already failed fails every later matching receive.
        if let (Some(s), Some(c)) = (pattern.src, comm) {
            if c.is_poisoned(s) {
                self.st.set_outcome(req, Err(Error::RankFailStop { rank: s }));
                return req;
            }
        }
        let found = match comm {
            Some(c) => self.st.unexpected.take_match_where(&pattern, |a, _| !c.is_poisoned(a.src)),
            None => self.st.unexpected.take_match(&pattern),
        };
        // R11 / R13: buffered messages are delivered first, also to a disabled wildcard.
        if let Some((a, e)) = found {
            match e.data {
                Unexp::Eager(data) => {
                    self.st.deliver_eager(req, &a, &data);
                    self.st.recycle(data);
                }
                Unexp::Rts { len, sreq, region, pull: hint } => {
                    let pull = Pull { rreq: req, peer: e.peer, src: a.src, tag: a.tag.0, len, sreq, region, hint };
                    let Engine { transport, st } = self;
                    st.pull(transport, pull);
                    st.flush(transport);
                }
            }
            return req;
        }
        if let Some(p) = peer {
            if self.st.peers[p.0 as usize].failed {
                let rank = pattern.src.unwrap_or(p.0);
                self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
                if let Some(c) = self.st.comms.get_mut(pattern.ctx) {
                    c.poison(rank);
                }
                return req;
            }
        } else if let Some(rank) = self.st.wildcard_blocker(pattern.ctx) {
            self.st.set_outcome(req, Err(Error::RankFailStop { rank }));
            return req;
        }
        self.st.posted.post(pattern, req);
        req
    }

    /// The small-message path of a receive: when nothing stands in the way (no pending
    /// communicator notice, a point-to-point context, a source whose receives need not
    /// fail), takes the earliest buffered message `pattern` matches if it is an eager one
    /// that fits `buf`, copies it and returns its status — no request slot, nothing
    /// posted. `None`: start the receive as usual ([`Engine::start_recv`]), which sees
    /// the queue as this left it. (It does not poll the transport first: a poll per
    /// receive cost `osu_bw` 8 B about a fifth, 2 ranks, three interleaved runs.)
    pub(crate) fn try_recv_now(&mut self, pattern: &Pattern, buf: &mut RawBufMut) -> Option<Status> {
        if self.st.comm_notices || pattern.ctx.0 & 1 == 1 {
            return None;
        }
        if self.st.unexpected.is_empty() {
            return None;
        }
        let st = &mut self.st;
        let comm = st.comms.get(pattern.ctx);
        if pattern.src.is_some_and(|s| comm.is_some_and(|c| c.is_poisoned(s))) {
            return None;
        }
        let fits = |e: &UnexpEntry| matches!(&e.data, Unexp::Eager(d) if d.len() <= buf.len());
        let (a, e) =
            st.unexpected.take_first_match_if(pattern, |a| comm.is_none_or(|c| !c.is_poisoned(a.src)), fits)?;
        let Unexp::Eager(data) = e.data else { unreachable!("only an eager message is taken") };
        buf.as_mut_slice()[..data.len()].copy_from_slice(&data);
        let status = Status { source: a.src as usize, tag: a.tag.0, len: data.len() };
        st.recycle(data);
        Some(status)
    }

    /// Takes the outcome of `req` if it has completed (the request is then freed).
    pub(crate) fn take_if_complete(&mut self, req: ReqId) -> Option<Result<Status, Error>> {
        let done = self.st.reqs.get(req)?.outcome.is_some();
        if !done {
            return None;
        }
        self.st.reqs.remove(req).and_then(|r| r.outcome)
    }

    /// Whether `req` has completed in error.
    pub(crate) fn has_failed(&self, req: ReqId) -> bool {
        self.st.reqs.get(req).is_some_and(|r| matches!(r.outcome, Some(Err(_))))
    }

    /// Whether `req` has completed (or no longer exists).
    pub(crate) fn is_complete(&self, req: ReqId) -> bool {
        self.st.reqs.get(req).is_none_or(|r| r.outcome.is_some())
    }

    /// Frees `req` if that is safe now: it completed, or it is a receive still waiting
    /// for a match (it is cancelled). Returns `false` when the engine may still touch the
    /// request's buffer, so the caller must keep progressing until it completes.
    pub(crate) fn release(&mut self, req: ReqId) -> bool {
        let Some(r) = self.st.reqs.get(req) else { return true };
        if r.outcome.is_some() {
            self.st.reqs.remove(req);
            return true;
        }
        if matches!(r.kind, Kind::Recv { phase: RecvPhase::AwaitingMatch, .. }) {
            self.st.posted.remove_where(|_, id| *id == req);
            self.st.reqs.remove(req);
            return true;
        }
        false
    }

    /// Cancels `req` if it is a receive still waiting for a match (MPI_Cancel): then it
    /// is freed and `true` returned; anything else is left as it is.
    pub(crate) fn cancel_recv(&mut self, req: ReqId) -> bool {
        let Some(r) = self.st.reqs.get(req) else { return false };
        if r.outcome.is_none() && matches!(r.kind, Kind::Recv { phase: RecvPhase::AwaitingMatch, .. }) {
            return self.release(req);
        }
        false
    }

    /// Marks request `req` as owned by request scope `scope`.
    pub(crate) fn set_scope(&mut self, req: ReqId, scope: u32) {
        self.st.reqs.set_scope(req, scope);
    }

    /// Registers `waker` to be woken once `req` has an outcome (a future pending on it).
    pub(crate) fn register_waker(&mut self, req: ReqId, waker: &std::task::Waker) {
        self.st.reqs.register_waker(req, waker);
        self.st.pulse.attention.store(true, Ordering::Relaxed);
    }

    /// Moves into `out` the wakers of futures whose request has an outcome now (success,
    /// a peer's failure, a revoked context: however it was set). The caller wakes them
    /// after releasing the engine lock. Nothing to do, and no allocation, when no future
    /// is pending.
    pub fn take_wakers(&mut self, out: &mut Vec<std::task::Waker>) {
        self.st.reqs.take_wakers(out);
    }

    /// Releases ([`Engine::release`]) every request owned by request scope `scope` that
    /// can be released now; returns how many remain (the caller progresses and retries).
    pub(crate) fn release_scope(&mut self, scope: u32) -> usize {
        if !self.st.reqs.has_scoped() {
            return 0;
        }
        let mut left = 0;
        for index in 0..self.st.reqs.slot_count() {
            if let Some(id) = self.st.reqs.scoped_at(index, scope) {
                left += usize::from(!self.release(id));
            }
        }
        left
    }

    /// Finds the earliest buffered message matching `pattern` without receiving it.
    pub fn probe_unexpected(&self, pattern: &Pattern) -> Option<Status> {
        self.st.unexpected.peek_match(pattern).map(|(a, e)| Status {
            source: a.src as usize,
            tag: a.tag.0,
            len: match &e.data {
                Unexp::Eager(d) => d.len(),
                Unexp::Rts { len, .. } => *len as usize,
            },
        })
    }

    /// Drives communication: drains the transport, runs pulls, retries queued work.
    /// Returns the number of transport events handled.
    pub fn progress(&mut self) -> usize {
        self.st.pulse.count_call();
        if self.st.pulse.tick_due.load(Ordering::Relaxed) {
            self.st.pulse.tick_due.store(false, Ordering::Relaxed);
            self.ft_tick();
        }
        let Engine { transport, st } = self;
        let n = transport.poll(POLL_BUDGET, |ev| st.on_event(ev));
        st.run_pulls(transport, true);
        if !st.byes.is_empty() {
            self.answer_byes();
        }
        if !self.st.notes_in.is_empty() {
            self.apply_notes();
        }
        if self.st.propagating {
            self.resolutions_service();
        }
        let Engine { transport, st } = self;
        if !st.newly_failed.is_empty() {
            let failed = st.take_newly_failed();
            for peer in failed {
                self.fail_peer(peer);
            }
            return n;
        }
        if st.queued > 0 {
            st.flush(transport);
        }
        if !st.unexpose.is_empty() {
            for region in st.unexpose.drain(..) {
                transport.unexpose(region);
            }
        }
        if st.ft.as_ref().is_some_and(|f| f.dirty) {
            self.ft_service();
        }
        if self.st.agree.dirty {
            self.agree_service();
        }
        n
    }

    /// What this engine shares with a background thread without its lock ([`Pulse`]).
    pub fn pulse(&self) -> std::sync::Arc<Pulse> {
        self.st.pulse.clone()
    }

    /// Recomputes [`Pulse::needs_lock`] (lock held): suspects for the witness, an
    /// exclusion to act on, or futures waiting for a waker.
    pub fn refresh_pulse(&self) {
        let needs = !self.st.suspects.is_empty() || self.is_excluded() || self.st.reqs.has_wakers();
        self.st.pulse.attention.store(needs, Ordering::Relaxed);
    }

    /// Matched long receives whose pull waits for a later progress call (each call
    /// copies about 1 MiB by CMA at most).
    pub fn pulls_pending(&self) -> bool {
        !self.st.pulls.is_empty()
    }

    /// Starts the ring failure detector with `cfg` (call once every rank is up: all start
    /// their timeout windows now).
    pub fn enable_ft(&mut self, cfg: runthrough_ft::Config) {
        let mut det = Detector::new(self.st.me.0, self.size(), cfg, Time::ZERO);
        det.set_witnessed(self.st.witnessed);
        self.st.ft = Some(Ft {
            observed: det.observing(),
            det,
            origin: Instant::now(),
            excluded: false,
            scratch: Vec::new(),
            dirty: false,
            observed_spoke: false,
        });
        self.ft_service();
    }

    /// Witnessed mode (R32, partitions): from now on a rank the detector finds silent,
    /// or the fabric reports in error, is not failed here but handed to the witness: the
    /// runtime collects it with [`Engine::take_suspects`], asks the launcher, and fails
    /// it with [`Engine::fail_peer`] once the launcher confirmed (the launcher takes the
    /// first of two contradicting claims and excludes the other claimant). Evidence that
    /// is certain stays direct: the launcher's own notices and a shared-memory peer's
    /// process exit (its pidfd) call [`Engine::fail_peer`] themselves.
    pub fn set_witnessed(&mut self, on: bool) {
        self.st.witnessed = on;
        if let Some(ft) = self.st.ft.as_mut() {
            ft.det.set_witnessed(on);
        }
    }

    /// The ranks suspected since the last call (witnessed mode), each once while it is
    /// neither failed nor confirmed.
    pub fn take_suspects(&mut self) -> Vec<Rank> {
        std::mem::take(&mut self.st.suspects)
    }

    /// The witness refused the suspicion of `peer` (R31, R32: the launcher still hears
    /// from it during its start-up): the detector drops it and gives `peer` a fresh
    /// window, after which, silent still, it is suspected again.
    pub fn refute_suspect(&mut self, peer: Rank) {
        if let Some(ft) = self.st.ft.as_mut() {
            let now = ft.now();
            ft.det.handle_refuted(peer.0, now);
        }
        self.ft_service();
    }

    /// Whether the detector runs.
    pub fn ft_enabled(&self) -> bool {
        self.st.ft.is_some()
    }

    /// Whether the others declared this process failed (it must stop, never rejoin).
    pub fn is_excluded(&self) -> bool {
        self.st.ft.as_ref().is_some_and(|f| f.excluded)
    }

    /// Drives the detector's clock: expired timers, heartbeats and notices to send,
    /// failures to apply. Called periodically by the runtime's progress thread.
    pub fn ft_tick(&mut self) {
        if let Some(ft) = self.st.ft.as_mut() {
            let now = ft.now();
            if std::mem::take(&mut ft.observed_spoke) {
                if let Some(p) = ft.observed {
                    ft.det.handle_message(p, Msg::Heartbeat, now);
                }
            }
            if ft.det.poll_timeout().is_some_and(|t| t <= now) {
                ft.det.handle_timeout(now);
            }
        }
        self.ft_service();
    }

    /// Sends what the detector wants sent and applies what it decided.
    fn ft_service(&mut self) {
        loop {
            let Engine { transport, st } = self;
            let Some(ft) = st.ft.as_mut() else { return };
            ft.dirty = false;
            ft.observed = ft.det.observing();
            let mut failed = Vec::new();
            let mut suspected = Vec::new();
            while let Some(ev) = ft.det.poll_event() {
                match ev {
                    // Departing: see `begin_departure`; the verdict only ends the wait.
                    FtEvent::Failed { rank, .. } if st.departing => {
                        if let Some(p) = st.peers.get_mut(rank as usize) {
                            p.awaiting_bye_ack = false;
                        }
                    }
                    FtEvent::Failed { rank, .. } => failed.push(Rank(rank)),
                    FtEvent::Suspected { rank } if !st.departing => suspected.push(Rank(rank)),
                    FtEvent::Excluded => {
                        ft.excluded = true;
                        st.pulse.attention.store(true, Ordering::Relaxed);
                        tracing::warn!("this rank was declared failed by the others: excluded");
                    }
                    _ => {}
                }
            }
            for r in suspected {
                st.suspect(r);
            }
            let Some(ft) = st.ft.as_mut() else { return };
            let mut out = Vec::new();
            while let Some((to, msg)) = ft.det.poll_transmit() {
                out.push((Rank(to), msg));
            }
            for (to, msg) in out {
                if to.0 >= st.peers.len() as u32
                    || st.peers[to.0 as usize].failed && !matches!(msg, Msg::Notice { .. })
                    || st.departing && matches!(msg, Msg::Notice { .. })
                {
                    continue;
                }
                let queued = !st.peers[to.0 as usize].pending.is_empty();
                let dead = st.peers[to.0 as usize].failed;
                match (msg, queued) {
                    // Best effort to a failed peer (it may be hung and learn it was
                    // excluded): never queued, as a dead peer's transport may stay busy
                    // forever (fabric credits) and finalize would wait on it.
                    (Msg::Notice { .. }, _) if dead => {
                        let _ = st.try_post(transport, to, Outgoing::Ft(msg));
                    }
                    (Msg::Notice { .. }, true) => st.queue(to, Outgoing::Ft(msg)),
                    (Msg::Notice { .. }, false) => {
                        if let Some(back) = st.try_post(transport, to, Outgoing::Ft(msg)) {
                            st.queue(to, back);
                        }
                    }
                    // Heartbeats are periodic: one lost to a busy transport is replaced.
                    (_, _) => {
                        let _ = st.try_post(transport, to, Outgoing::Ft(msg));
                    }
                }
            }
            if failed.is_empty() {
                return;
            }
            for r in failed {
                self.fail_peer(r);
            }
        }
    }

    /// Registers a communicator: its point-to-point context (even; the next one is its
    /// collective context) and its group in world ranks.
    pub fn register_comm(&mut self, ctx: ContextId, group: &[Rank]) {
        let slot = self.st.shm_coll.as_ref().and_then(|s| s.slot_for(ctx, group));
        self.st.comms.register(ctx, group, slot);
        if let (Some(slot), Some(sc)) = (slot, &self.st.shm_coll) {
            sc.set_state(slot, true, true);
        }
        // Members that revoked it, signalled on it or entered its resolution before this
        // process created it told us early: apply that now, in order.
        let mine = |n: &Note| match n {
            Note::Revoke { ctx: c }
            | Note::Corrupt { ctx: c }
            | Note::Signal { ctx: c, .. }
            | Note::Mark { ctx: c, .. } => Comms::same_comm(ContextId(*c), ctx),
            _ => false,
        };
        let (early, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.st.early_notes).into_iter().partition(|(_, n)| mine(n));
        self.st.early_notes = rest;
        if !early.is_empty() {
            self.st.notes_in.extend(early);
            self.apply_notes();
        }
    }

    /// Revokes the communicator of `ctx` (ULFM's `MPIX_Comm_revoke`, R29): here and, by
    /// a notice every member forwards on first receipt (so it spreads although members
    /// fail while it does), at every live member. Every pending and later operation on it
    /// fails with [`Error::Revoked`]; agreements (agree, validate, shrink's) still run.
    pub fn revoke(&mut self, ctx: ContextId) {
        self.break_comm(ctx, Broken::Revoked);
    }

    /// Marks the communicator of `ctx` corrupted (R28: a member panicked while using
    /// it), spread like [`Engine::revoke`]: every pending and later operation on it, at
    /// every member, fails with [`Error::CommCorrupted`].
    pub fn corrupt(&mut self, ctx: ContextId) {
        self.break_comm(ctx, Broken::Corrupted);
    }

    /// The error every operation on the communicator of `ctx` now gets, if it is revoked
    /// or corrupted.
    pub fn comm_error(&self, ctx: ContextId) -> Option<Error> {
        self.st.comms.get(ctx).and_then(|c| c.broken).map(Broken::error)
    }

    /// Acknowledges the first `n` failures of the communicator of `ctx` in the order
    /// they became known (ULFM's `ack_failed`); returns how many are acknowledged. Once
    /// all known are, ANY_SOURCE receives are enabled again (R13, R14).
    pub fn ack_failed(&mut self, ctx: ContextId, n: usize) -> usize {
        let known = self.failed_in(ctx).len();
        let Some(c) = self.st.comms.get_mut(ctx) else { return 0 };
        c.acked = c.acked.max(n.min(known));
        if c.acked == known {
            c.wildcard_disabled = false;
        }
        c.acked
    }

    /// Signals `code` on the communicator of `ctx` (R27, seeds/002 `signal_error`): the
    /// signal floods to every member (each forwards it on first receipt) and every member
    /// enters the error resolution: an agreement on the list of signals, behind a cut of
    /// the communicator's traffic. Returns the signal's id; poll
    /// [`Engine::signal_resolved`] with [`Engine::progress`].
    pub fn signal_error(&mut self, ctx: ContextId, code: i32) -> Result<u32, Error> {
        let me = self.st.me.0;
        let c = self.st.comms.get_mut(ctx).ok_or(Error::ApiMisuse("signal_error on an unknown communicator"))?;
        if let Some(b) = c.broken {
            return Err(b.error());
        }
        let origin = if me < 1 << 20 {
            me
        } else {
            return Err(Error::Unsupported("signal_error in jobs of 2^20 ranks or more"));
        };
        let id = ((c.prop.serial & 0xfff) << 20) | origin;
        c.prop.serial = c.prop.serial.wrapping_add(1);
        self.learn_signal(ctx, id, code);
        Ok(id)
    }

    /// Once the signal `id` of [`Engine::signal_error`] is resolved: the list the caller
    /// gets (communicator ranks and codes; it is also the delivery of the exception to
    /// the caller, so nothing stays armed for its next operation).
    pub fn signal_resolved(&mut self, ctx: ContextId, id: u32) -> Option<Vec<(u32, i32)>> {
        let c = self.st.comms.get_mut(ctx)?;
        if !c.prop.resolved.contains(&id) {
            return None;
        }
        Some(c.prop.armed.take().unwrap_or_else(|| c.prop.last.clone()))
    }

    /// Whether an error resolution runs on the communicator of `ctx` (R27): its
    /// operations are parked until it completes, then fail with `Propagated`.
    pub fn is_resolving(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_some_and(|c| c.prop.running.is_some())
    }

    /// The propagated list the next operation on the communicator of `ctx` fails with,
    /// taken (R27: each member gets the exception once, at its pending or next wait).
    pub fn take_armed(&mut self, ctx: ContextId) -> Option<Vec<(u32, i32)>> {
        self.st.comms.get_mut(ctx).and_then(|c| c.prop.armed.take())
    }

    /// The last propagated list delivered on the communicator of `ctx`.
    pub fn last_propagated(&self, ctx: ContextId) -> Option<Vec<(u32, i32)>> {
        self.st.comms.get(ctx).map(|c| c.prop.last.clone()).filter(|l| !l.is_empty())
    }

    /// A signal read or made here: new ones are forwarded to every other member and
    /// start (or join) a resolution.
    fn learn_signal(&mut self, ctx: ContextId, id: u32, code: i32) {
        let me = self.st.me;
        let key = ContextId(ctx.0 & !1);
        let Some(c) = self.st.comms.get_mut(key) else { return };
        if c.broken.is_some() || c.prop.resolved.contains(&id) || c.prop.known.iter().any(|k| k.0 == id) {
            return;
        }
        c.prop.known.push((id, code));
        self.st.propagating = true;
        self.st.comm_notices = true;
        let members = c.group.clone();
        for &peer in members.iter() {
            if peer != me && !self.st.peers[peer.0 as usize].failed {
                self.st.post_or_queue(&mut self.transport, peer, Outgoing::Note(Note::Signal { ctx: key.0, id, code }));
            }
        }
        self.enter_resolution(key);
    }

    /// Enters resolution `epoch + 1` of the communicator of `ctx` if signals wait and
    /// none runs: the mark (behind everything sent on it so far) goes to every member,
    /// the receives posted on it are parked, collectives stop, and the agreement on the
    /// signals starts.
    fn enter_resolution(&mut self, ctx: ContextId) {
        let me = self.st.me;
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        if c.prop.running.is_some() || c.prop.known.is_empty() || c.broken.is_some() {
            return;
        }
        let epoch = c.prop.epoch + 1;
        let signals: Vec<(u32, i32)> = c.prop.known.clone();
        let group = c.group.clone();
        self.st.stop_shm_collectives(ctx);
        let coll = ContextId(ctx.0 | 1);
        let on_comm = |x: ContextId| x == ctx || x == coll;
        while let Some((_, id)) = self.st.posted.remove_where(|pat, _| on_comm(pat.ctx)) {
            if let Some(c) = self.st.comms.get_mut(ctx) {
                c.prop.parked.push(id);
            }
        }
        for &peer in group.iter() {
            if peer != me && !self.st.peers[peer.0 as usize].failed {
                self.st.post_or_queue(&mut self.transport, peer, Outgoing::Note(Note::Mark { ctx: ctx.0, epoch }));
            }
        }
        let seq = RESOLUTION_SERIES | (epoch & !RESOLUTION_SERIES);
        let input = runthrough_ft::Input { flag: u32::MAX, max: 0, signals };
        match self.agree_start_input(ctx, &group, seq, input) {
            Ok(inst) => {
                if let Some(c) = self.st.comms.get_mut(ctx) {
                    c.prop.running = Some(inst);
                }
            }
            Err(e) => tracing::warn!(error = %e, "error resolution could not start"),
        }
    }

    /// `from` entered resolution `epoch` of the communicator of `ctx`: what it sent there
    /// before and this process did not match yet is dropped (a rendezvous is answered
    /// with `Discard`), and the mark counts towards completing the resolution.
    fn mark_from(&mut self, ctx: ContextId, from: Rank, epoch: u32) {
        let key = ContextId(ctx.0 & !1);
        let Some(c) = self.st.comms.get_mut(key) else { return };
        let Some(local) = c.local_rank(from) else { return };
        let m = &mut c.prop.marks[local as usize];
        *m = (*m).max(epoch);
        self.st.propagating = true;
        for x in [key, ContextId(key.0 | 1)] {
            while let Some((_, e)) = self.st.unexpected.take_match(&Pattern { ctx: x, src: Some(local), tag: None }) {
                self.st.drop_unexpected(e);
            }
        }
    }

    /// Completes the resolutions whose agreement decided and whose marks all arrived.
    fn resolutions_service(&mut self) {
        let mut any = false;
        let ctxs: Vec<ContextId> =
            self.st.comms.keys().filter(|&k| self.st.comms.get(k).is_some_and(|c| c.prop.running.is_some())).collect();
        for ctx in ctxs {
            any = true;
            let Some(c) = self.st.comms.get(ctx) else { continue };
            let Some(inst) = c.prop.running else { continue };
            if c.prop.decided.is_none() {
                let Some(d) = self.agree_decision(inst) else { continue };
                if let Some(c) = self.st.comms.get_mut(ctx) {
                    c.prop.decided = Some(d.signals);
                }
            }
            let c = self.st.comms.get(ctx).expect("present");
            let epoch = c.prop.epoch + 1;
            let me = self.st.me;
            let all_marks = c
                .group
                .iter()
                .enumerate()
                .all(|(i, r)| *r == me || self.st.peers[r.0 as usize].failed || c.prop.marks[i] >= epoch);
            if all_marks {
                self.complete_resolution(ctx);
            }
        }
        if !any {
            self.st.propagating =
                self.st.comms.keys().any(|k| self.st.comms.get(k).is_some_and(|c| !c.prop.known.is_empty()));
        }
    }

    /// Delivers a completed resolution: every parked request fails with the list (or,
    /// with none, the next operation will), collectives start a new epoch, and the next
    /// resolution starts if signals arrived meanwhile.
    fn complete_resolution(&mut self, ctx: ContextId) {
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        let decided = c.prop.decided.take().unwrap_or_default();
        c.prop.running = None;
        c.prop.epoch += 1;
        c.prop.resolved.extend(decided.iter().map(|s| s.0));
        let resolved = &c.prop.resolved;
        c.prop.known.retain(|k| !resolved.contains(&k.0));
        let mut list: Vec<(u32, i32)> =
            decided.iter().filter_map(|&(id, code)| c.local_rank(Rank(id & 0xf_ffff)).map(|l| (l, code))).collect();
        list.sort_unstable();
        let parked = std::mem::take(&mut c.prop.parked);
        if parked.is_empty() {
            // Undelivered lists accumulate: the next operation gets all of them at once.
            let armed = c.prop.armed.get_or_insert_with(Vec::new);
            armed.extend_from_slice(&list);
            armed.sort_unstable();
            armed.dedup();
        }
        c.prop.last = list.clone();
        tracing::debug!(ctx = ctx.0, ?list, parked = parked.len(), "error resolution complete");
        for id in parked {
            self.st.set_outcome(id, Err(Error::Propagated(list.clone())));
        }
        // Collectives begun before never match ones begun after (like a validate).
        let recognized = self.recognized(ctx);
        self.validate_commit(ctx, &recognized);
        self.enter_resolution(ctx);
    }

    /// Whether the communicator of `ctx` is revoked (or corrupted).
    pub fn is_revoked(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_some_and(|c| c.broken.is_some())
    }

    /// Breaks the communicator of `ctx` here (first time only: a corruption also
    /// overrides a revocation) and forwards the notice to every other live member.
    fn break_comm(&mut self, ctx: ContextId, broken: Broken) {
        let key = ContextId(ctx.0 & !1);
        let Some(c) = self.st.comms.get_mut(key) else { return };
        if c.broken == Some(broken) || c.broken == Some(Broken::Corrupted) {
            return;
        }
        c.broken = Some(broken);
        self.st.comm_notices = true;
        self.st.stop_shm_collectives(key);
        tracing::debug!(ctx = key.0, ?broken, "communicator broken");
        let err = broken.error();
        let coll = ContextId(key.0 | 1);
        let on_comm = |c: ContextId| c == key || c == coll;
        // Posted receives fail; receives already pulling or streaming finish (their
        // sender keeps its buffer exposed until they do).
        while let Some((_, id)) = self.st.posted.remove_where(|pat, _| on_comm(pat.ctx)) {
            self.st.set_outcome(id, Err(err.clone()));
        }
        // Buffered messages are dropped; a buffered rendezvous is answered with Discard.
        for pattern in [Pattern { ctx: key, src: None, tag: None }, Pattern { ctx: coll, src: None, tag: None }] {
            while let Some((_, e)) = self.st.unexpected.take_match(&pattern) {
                self.st.drop_unexpected(e);
            }
        }
        let me = self.st.me;
        let note = if broken == Broken::Revoked { Note::Revoke { ctx: key.0 } } else { Note::Corrupt { ctx: key.0 } };
        for peer in self.st.comms.members(key) {
            if peer != me && !self.st.peers[peer.0 as usize].failed {
                self.st.post_or_queue(&mut self.transport, peer, Outgoing::Note(note));
            }
        }
    }

    /// Turns on shared-memory collectives for communicators registered from now on
    /// whose members all share the segment ([`crate::coll::ShmColl`]). Every rank of the
    /// job must make the same choice.
    pub fn enable_shm_coll(&mut self, mut coll: crate::coll::ShmColl) {
        coll.tune(self.st.cfg.spin_polls, self.st.cfg.oversubscribed, self.st.eager_max.max(1));
        self.st.shm_coll = Some(std::sync::Arc::new(coll));
    }

    /// The collective area, when shared-memory collectives are on (a communicator keeps
    /// it to start collectives without the engine lock).
    pub fn shm_coll(&self) -> Option<std::sync::Arc<crate::coll::ShmColl>> {
        self.st.shm_coll.clone()
    }

    /// The slot of the communicator of `ctx` in the collective area, if it has one.
    pub fn shm_slot_of(&self, ctx: ContextId) -> Option<usize> {
        self.st.comms.get(ctx)?.shm_slot
    }

    /// `Ok` while the communicator of `ctx` is collectively active (R18), else the
    /// `RankFailStop` of a member failure it has not recognised.
    pub fn coll_check(&self, ctx: ContextId) -> Result<(), Error> {
        let Some(c) = self.st.comms.get(ctx) else {
            return Err(Error::ApiMisuse("collective on an unknown communicator"));
        };
        if let Some(b) = c.broken {
            return Err(b.error());
        }
        if !c.active {
            let rank = self.failed_in(ctx).into_iter().find(|r| !c.recognized.contains(r)).unwrap_or(0);
            return Err(Error::RankFailStop { rank });
        }
        Ok(())
    }

    /// Forgets a communicator (free completes whatever failed: R26).
    pub fn free_comm(&mut self, ctx: ContextId) {
        self.st.comms.remove(ctx);
    }

    /// Ranks of the communicator of `ctx` known failed here, in the order they became
    /// known (R8). Empty for an unknown context.
    pub fn failed_in(&self, ctx: ContextId) -> Vec<u32> {
        let Some(c) = self.st.comms.get(ctx) else { return Vec::new() };
        self.st.failures.in_order().iter().filter_map(|w| c.local_rank(Rank(*w))).collect()
    }

    /// Whether ANY_SOURCE receives on the communicator of `ctx` are enabled (R13).
    pub fn any_source_enabled(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_none_or(|c| !c.wildcard_disabled)
    }

    /// Re-enables ANY_SOURCE receives on the communicator of `ctx` and returns its ranks
    /// known failed now (R14); the next new failure of a member disables them again.
    pub fn reenable_any_source(&mut self, ctx: ContextId) -> Vec<u32> {
        if let Some(c) = self.st.comms.get_mut(ctx) {
            c.wildcard_disabled = false;
        }
        self.failed_in(ctx)
    }

    /// Members of the communicator of `ctx` recognised failed by its last validate.
    pub fn recognized(&self, ctx: ContextId) -> Vec<u32> {
        self.st.comms.get(ctx).map(|c| c.recognized.clone()).unwrap_or_default()
    }

    /// Whether collectives may run on the communicator of `ctx` (R18).
    pub fn collectives_enabled(&self, ctx: ContextId) -> bool {
        self.st.comms.get(ctx).is_none_or(|c| c.active)
    }

    /// Begins a collective on the communicator of `ctx`: checks it is collectively
    /// active, draws the collective's tag and lists the participants (R18, R20).
    pub fn coll_begin(&mut self, ctx: ContextId) -> Result<crate::coll::CollView, Error> {
        self.coll_check(ctx)?;
        if let Some(list) = self.take_armed(ctx) {
            return Err(Error::Propagated(list));
        }
        let (spin, central) = (self.st.cfg.spin_polls, self.st.cfg.oversubscribed);
        let c = self.st.comms.get_mut(ctx).ok_or(Error::ApiMisuse("collective on an unknown communicator"))?;
        let seq = c.coll_seq;
        c.coll_seq = c.coll_seq.wrapping_add(1);
        let tag = Tag((((c.epoch & 0x1ff) << 21) | (seq & 0x1f_ffff)) as i32);
        let shm = match (c.shm_slot, &self.st.shm_coll) {
            (Some(slot), Some(coll)) => Some(crate::coll::ShmPath { slot, gen: coll.fail_gen() }),
            _ => None,
        };
        Ok(crate::coll::CollView { ctx: ContextId(ctx.0 | 1), tag, alive: c.alive.clone(), shm, spin, central })
    }

    /// Applies a validate's decision on the communicator of `ctx` (R19): `failed` (local
    /// ranks) are recognised and excluded from later collectives, a new epoch starts,
    /// and the communicator is active again unless a failure of a member outside
    /// `failed` is already known here (then the next validate recognises it).
    /// Messages of collectives begun before are discarded.
    pub fn validate_commit(&mut self, ctx: ContextId, failed: &[u32]) {
        let failed_here = self.failed_in(ctx);
        let Some(c) = self.st.comms.get_mut(ctx) else { return };
        let mut rec = failed.to_vec();
        rec.sort_unstable();
        rec.dedup();
        c.active = failed_here.iter().all(|r| rec.contains(r));
        let pristine = rec.is_empty();
        c.set_recognized(rec);
        c.epoch = c.epoch.wrapping_add(1);
        c.coll_seq = 0;
        if let (Some(slot), Some(sc)) = (c.shm_slot, &self.st.shm_coll) {
            sc.new_epoch(slot, c.epoch);
            sc.set_state(slot, c.active, pristine);
        }
        let coll = ContextId(ctx.0 | 1);
        let epoch = c.epoch & 0x1ff;
        let stale = |a: &Arrival| a.ctx == coll && ((a.tag.0 as u32) >> 21) != epoch;
        while self
            .st
            .unexpected
            .take_match_where(&Pattern { ctx: coll, src: None, tag: None }, |a, _| stale(a))
            .is_some()
        {}
    }

    /// Enters the agreement number `seq` on the communicator of `ctx` (seeds/000
    /// §17.7.4, R19, R29): every live member contributes `flag` (ANDed) and the failures
    /// it knows; all decide the same flag and failed set. Returns the instance id.
    pub fn agree_start(&mut self, ctx: ContextId, group: &[Rank], seq: u32, flag: u32) -> Result<u64, Error> {
        self.agree_start_input(ctx, group, seq, runthrough_ft::Input::flag(flag))
    }

    /// [`Engine::agree_start`] with every agreed input: also a word whose maximum is
    /// decided and signals whose union is. Agreements whose `seq` has the top bit set
    /// form a separate series (error resolutions, R27), numbered on their own.
    pub fn agree_start_input(
        &mut self,
        ctx: ContextId,
        group: &[Rank],
        seq: u32,
        input: runthrough_ft::Input,
    ) -> Result<u64, Error> {
        if !group.contains(&self.st.me) {
            return Err(Error::ApiMisuse("agreement by a non-member"));
        }
        let participants =
            Participants::new(group.iter().map(|r| r.0).collect()).map_err(|_| Error::InvalidArg("agreement group"))?;
        let instance = (u64::from(ctx.0 & !1) << 32) | u64::from(seq);
        let known: Vec<u32> = group.iter().map(|r| r.0).filter(|r| self.st.failures.contains(*r)).collect();
        let now = self.st.agree.now();
        // `with_input` takes the job rank (it finds the participant index itself).
        let mut a =
            Agreement::with_input(std::sync::Arc::new(participants), self.st.me.0, instance, input, &known, now);
        let (early, rest): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.st.agree.early).into_iter().partition(|(_, m)| m.instance() == instance);
        self.st.agree.early = rest;
        for (from, m) in early {
            a.handle_message(from.0, m, now);
        }
        // What older agreements still have to say goes out before any is dropped (a
        // coordinator that just decided has its commits still to send).
        self.agree_service();
        // Older agreements of this communicator's series have served their late
        // participants (the next one needs every live member's report, sent only after
        // it decided the older one).
        let series = |inst: u64| inst as u32 & RESOLUTION_SERIES;
        self.st.agree.running.retain(|(c, x)| {
            !Comms::same_comm(*c, ctx) || series(x.instance()) != series(instance) || x.decision().is_none()
        });
        self.st.agree.running.push((ctx, a));
        self.agree_service();
        Ok(instance)
    }

    /// The decision of agreement `instance`, once reached (then it is final).
    pub fn agree_decision(&self, instance: u64) -> Option<Decision> {
        self.st.agree.running.iter().find(|(_, a)| a.instance() == instance).and_then(|(_, a)| a.decision().cloned())
    }

    /// Sends what the agreements want sent.
    fn agree_service(&mut self) {
        let Engine { transport, st } = self;
        st.agree.dirty = false;
        let mut out = Vec::new();
        for (_, a) in &mut st.agree.running {
            while let Some((to, m)) = a.poll_transmit() {
                out.push((Rank(to), m));
            }
        }
        for (to, m) in out {
            if to.0 as usize >= st.peers.len() || st.peers[to.0 as usize].failed {
                continue;
            }
            let mut bytes = Vec::with_capacity(m.encoded_len());
            m.encode(&mut bytes);
            if st.peers[to.0 as usize].pending.is_empty() {
                if let Some(back) = st.try_post(transport, to, Outgoing::Agree(bytes)) {
                    st.queue(to, back);
                }
            } else {
                st.queue(to, Outgoing::Agree(bytes));
            }
        }
    }

    /// World ranks known failed, in the order they became known.
    pub fn failed_ranks(&self) -> &[u32] {
        self.st.failures.in_order()
    }

    /// Starts this rank's departure (finalize, R6): sends `Bye` to every live peer behind
    /// whatever is queued for it, and from now on the failure detector no longer judges
    /// others (peers that read the `Bye` stop heartbeating this rank; a verdict drawn
    /// from that silence would be false) — a verdict only ends the wait for that peer.
    /// Poll [`Engine::departure_pending`] with [`Engine::progress`] until it is 0.
    pub fn begin_departure(&mut self) {
        if self.st.departing {
            return;
        }
        self.st.departing = true;
        let me = self.st.me.0 as usize;
        for i in 0..self.st.peers.len() {
            if i == me || self.st.peers[i].failed {
                continue;
            }
            self.st.peers[i].awaiting_bye_ack = true;
            self.st.post_or_queue(&mut self.transport, Rank(i as u32), Outgoing::Note(Note::Bye));
        }
    }

    /// Live peers that have not answered this rank's `Bye` yet.
    pub fn departure_pending(&self) -> usize {
        self.st.peers.iter().filter(|p| p.awaiting_bye_ack && !p.failed).count()
    }

    /// Applies the communicator notices read (revoke, corrupt): outside the transport
    /// poll, as applying one sends (it is forwarded to every member).
    fn apply_notes(&mut self) {
        for (from, n) in std::mem::take(&mut self.st.notes_in) {
            let ctx = match n {
                Note::Revoke { ctx } | Note::Corrupt { ctx } | Note::Signal { ctx, .. } | Note::Mark { ctx, .. } => {
                    ContextId(ctx)
                }
                _ => continue,
            };
            if self.st.comms.get(ctx).is_some() {
                match n {
                    Note::Revoke { .. } => self.break_comm(ctx, Broken::Revoked),
                    Note::Corrupt { .. } => self.break_comm(ctx, Broken::Corrupted),
                    Note::Signal { id, code, .. } => self.learn_signal(ctx, id, code),
                    Note::Mark { epoch, .. } => self.mark_from(ctx, from, epoch),
                    _ => {}
                }
            } else if self.st.early_notes.len() < EARLY_NOTES_KEEP && !self.st.early_notes.contains(&(from, n)) {
                self.st.early_notes.push((from, n));
            }
        }
    }

    /// Answers the `Bye`s read: a `ByeAck` first (nothing is sent to a departed peer),
    /// then the departure is applied; a busy transport defers both to the next progress.
    fn answer_byes(&mut self) {
        for peer in std::mem::take(&mut self.st.byes) {
            if self.is_failed(peer) {
                continue;
            }
            let Engine { transport, st } = self;
            match st.try_post(transport, peer, Outgoing::Note(Note::ByeAck)) {
                Some(_) => st.byes.push(peer),
                None => {
                    tracing::debug!(rank = peer.0, "peer said bye: departed");
                    self.peer_departed(peer);
                }
            }
        }
    }

    /// `peer` exited after finalizing: like [`Engine::fail_peer`] its pending operations
    /// complete with `RankFailStop` (they can never complete otherwise) and its messages
    /// are drained first, but it is not a failure: it does not join the failure set, does
    /// not disable wildcards (R13) and is not reported by `failed_in` (R8).
    pub fn peer_departed(&mut self, peer: Rank) {
        if self.is_failed(peer) || peer.0 >= self.size() {
            return;
        }
        self.drain();
        self.st.peers[peer.0 as usize].departed = true;
        self.st.fail_peer(peer);
        // It will never send again: an agreement still waiting for it stops waiting (it
        // decided every agreement it took part in before finalizing, so only one this
        // process joined late — e.g. after the others wrongly took it for failed — can be
        // waiting, and would otherwise wait forever).
        let now = self.st.agree.now();
        for (_, a) in &mut self.st.agree.running {
            a.handle_failure(peer.0, now);
        }
        self.st.agree.dirty |= !self.st.agree.running.is_empty();
        self.after_failures();
    }

    /// Hands every record the transports hold to the engine (bounded).
    fn drain(&mut self) {
        let Engine { transport, st } = self;
        for _ in 0..DRAIN_ROUNDS {
            let n = transport.poll(usize::MAX, |ev| st.on_event(ev));
            st.run_pulls(transport, false);
            if n == 0 {
                break;
            }
        }
    }

    fn after_failures(&mut self) {
        let others = self.st.take_newly_failed();
        for p in others {
            self.fail_peer(p);
        }
        let Engine { transport, st } = self;
        if st.queued > 0 {
            st.flush(transport);
        }
    }

    /// Marks `peer` failed and completes every request touching it with `RankFailStop`;
    /// its queued protocol work is discarded. First the transport is drained, so every
    /// message the peer sent before it died (or finalized) is matched or buffered and is
    /// still delivered (R11). Idempotent.
    pub fn fail_peer(&mut self, peer: Rank) {
        if self.is_failed(peer) || peer.0 >= self.size() {
            return;
        }
        self.drain();
        self.st.fail_peer(peer);
        if let Some(ft) = self.st.ft.as_mut() {
            let now = ft.now();
            ft.det.handle_local_failure(peer.0, now);
        }
        let now = self.st.agree.now();
        for (_, a) in &mut self.st.agree.running {
            a.handle_failure(peer.0, now);
        }
        self.st.agree.dirty |= !self.st.agree.running.is_empty();
        self.after_failures();
        // Sends the failure completed withdraw their exposure now, not at a later
        // progress: their buffers may be the user's again once released (R30).
        let Engine { transport, st } = self;
        for region in st.unexpose.drain(..) {
            transport.unexpose(region);
        }
    }
}

impl State {
    #[inline]
    /// Runs the matched rendezvous' pulls, oldest first. `budget`: stops once one call
    /// has copied [`PULL_BYTES_PER_CALL`] (CMA copies in the call, holding the engine
    /// lock): the rest wait for the next progress, so the lock is not held for a whole
    /// window of long messages (64 x 4 MiB: 26 ms) and the FINs of those done go out now.
    fn run_pulls(&mut self, t: &mut AnyTransport, budget: bool) {
        if !self.pulls.is_empty() {
            self.run_pulls_now(t, budget);
        }
    }

    #[inline(never)]
    fn run_pulls_now(&mut self, t: &mut AnyTransport, budget: bool) {
        let mut pulls = std::mem::take(&mut self.pulls);
        let mut copied = 0u64;
        let mut done = 0;
        for pull in &pulls {
            if budget && copied >= PULL_BYTES_PER_CALL {
                break;
            }
            copied += self.pull(t, *pull);
            done += 1;
        }
        pulls.drain(..done);
        // `pull` queues no pulls; should one ever, it runs after those left here.
        pulls.append(&mut self.pulls);
        self.pulls = pulls;
    }

    fn set_outcome(&mut self, req: ReqId, outcome: Result<Status, Error>) {
        if let Some(r) = self.reqs.get_mut(req) {
            if r.outcome.is_none() {
                r.outcome = Some(outcome);
                if let Kind::Send { region: region @ Some(_), .. } = &mut r.kind {
                    self.unexpose.extend(region.take());
                }
            }
        }
    }

    /// A new operation `req` on a revoked or corrupted communicator fails with its error;
    /// during a resolution (R27) it is parked (it fails with the resolution's list); once
    /// one completed with nothing pending, it fails with that list. Returns whether `req`
    /// was taken care of.
    fn comm_takes(&mut self, ctx: ContextId, req: ReqId) -> bool {
        let Some(c) = self.comms.get_mut(ctx) else { return false };
        if let Some(b) = c.broken {
            self.set_outcome(req, Err(b.error()));
            return true;
        }
        if c.prop.running.is_some() {
            c.prop.parked.push(req);
            return true;
        }
        if let Some(list) = c.prop.armed.take() {
            self.set_outcome(req, Err(Error::Propagated(list)));
            return true;
        }
        false
    }

    /// Members waiting in a shared-memory collective on the communicator of `ctx` stop
    /// waiting, and new ones take the locked path (broken or resolving communicator).
    fn stop_shm_collectives(&self, ctx: ContextId) {
        if let (Some(slot), Some(sc)) = (self.comms.get(ctx).and_then(|c| c.shm_slot), &self.shm_coll) {
            sc.set_state(slot, false, false);
            sc.note_failure();
        }
    }

    /// Drops a buffered message of a broken communicator; a rendezvous is answered with
    /// `Discard` so its sender completes (and withdraws its exposure).
    fn drop_unexpected(&mut self, e: UnexpEntry) {
        match e.data {
            Unexp::Eager(v) => self.recycle(v),
            Unexp::Rts { sreq, .. } => self.post_or_queue_note(e.peer, Note::Discard { sreq: sreq.to_wire() }),
        }
    }

    /// Queues a notice for `peer` (sent at the next flush, behind its queued work).
    fn post_or_queue_note(&mut self, peer: Rank, note: Note) {
        if !self.peers[peer.0 as usize].failed {
            self.queue(peer, Outgoing::Note(note));
        }
    }

    /// `peer` dropped our rendezvous `sreq` unmatched: the send completes with its
    /// communicator's error.
    fn discarded(&mut self, peer: Rank, sreq: ReqId) {
        let ctx = match self.reqs.get(sreq) {
            Some(Request { kind: Kind::Send { peer: p, .. }, outcome: None, ctx }) if *p == peer => *ctx,
            _ => return self.stray(peer, "discard for no waiting send"),
        };
        let err = self.comms.get(ctx).and_then(|c| c.broken).map_or(Error::Revoked, Broken::error);
        self.set_outcome(sreq, Err(err));
    }

    fn recycle(&mut self, mut v: Vec<u8>) {
        if self.pool.len() < POOL_KEEP {
            v.clear();
            self.pool.push(v);
        }
    }

    /// Tries to hand `out` to the transport. Returns it back when the transport is busy
    /// (or only partly took a stream).
    fn try_post(&mut self, t: &mut AnyTransport, peer: Rank, out: Outgoing) -> Option<Outgoing> {
        let mut hb = [0u8; MAX_HEADER_BYTES];
        match out {
            Outgoing::Msg { req, header } => {
                let n = header.encode(&mut hb);
                let (payload, eager) = match (&header, self.reqs.get(req)) {
                    (Header::Eager { .. }, Some(Request { kind: Kind::Send { buf, .. }, .. })) => (*buf, true),
                    (_, Some(_)) => (RawBuf::empty(), false),
                    (_, None) => return None,
                };
                match t.try_send(peer, &hb[..n], payload.as_slice()) {
                    Ok(Posted::Done) | Ok(Posted::InFlight(_)) => {
                        if eager {
                            let st = self.send_status(req);
                            self.set_outcome(req, Ok(st));
                        } else if let Some(Request { kind: Kind::Send { phase, .. }, .. }) = self.reqs.get_mut(req) {
                            *phase = SendPhase::AwaitingFinOrCts;
                        }
                        None
                    }
                    Err(TransportError::Busy) => Some(Outgoing::Msg { req, header }),
                    Err(e) => {
                        self.send_failed(peer, req, e);
                        None
                    }
                }
            }
            Outgoing::Ctrl(header) => {
                let n = header.encode(&mut hb);
                (!self.send_control(t, peer, &hb[..n], &[])).then_some(Outgoing::Ctrl(header))
            }
            Outgoing::Note(note) => {
                let n = Header::Note.encode(&mut hb);
                let mut nb = [0u8; MAX_NOTE_BYTES];
                let len = note.encode(&mut nb);
                (!self.send_control(t, peer, &hb[..n], &nb[..len])).then_some(Outgoing::Note(note))
            }
            Outgoing::Agree(bytes) => {
                let n = Header::Agree.encode(&mut hb);
                match t.try_send(peer, &hb[..n], &bytes) {
                    Err(TransportError::Busy) => Some(Outgoing::Agree(bytes)),
                    _ => None,
                }
            }
            Outgoing::Ft(msg) => {
                let n = Header::Ft.encode(&mut hb);
                let ft = self.ft.as_mut()?;
                ft.scratch.clear();
                msg.encode(&mut ft.scratch);
                match t.try_send(peer, &hb[..n], &ft.scratch) {
                    Err(TransportError::Busy) => Some(Outgoing::Ft(msg)),
                    _ => None,
                }
            }
            Outgoing::Stream { sreq, rreq, mut offset } => {
                let buf = match self.reqs.get(sreq) {
                    Some(Request { kind: Kind::Send { buf, .. }, outcome: None, .. }) => *buf,
                    _ => return None,
                };
                let data = buf.as_slice();
                while (offset as usize) < data.len() {
                    let end = (offset as usize + self.chunk).min(data.len());
                    let n = Header::Data { rreq, offset }.encode(&mut hb);
                    match t.try_send(peer, &hb[..n], &data[offset as usize..end]) {
                        Ok(_) => offset = end as u64,
                        Err(TransportError::Busy) => return Some(Outgoing::Stream { sreq, rreq, offset }),
                        Err(e) => {
                            self.send_failed(peer, sreq, e);
                            return None;
                        }
                    }
                }
                let st = self.send_status(sreq);
                self.set_outcome(sreq, Ok(st));
                self.stats.streamed += 1;
                None
            }
        }
    }

    /// Records a suspicion for the witness (R32), once per rank not already failed.
    fn suspect(&mut self, peer: Rank) {
        let known = self.peers.get(peer.0 as usize).is_none_or(|p| p.failed);
        if !known && !self.suspects.contains(&peer) {
            tracing::debug!(peer = peer.0, "suspected: asking the witness");
            self.suspects.push(peer);
            self.pulse.attention.store(true, Ordering::Relaxed);
        }
    }

    /// The peers the transports found in error since the last call; in witnessed mode
    /// (R32) they become suspicions instead (a fabric error may be a partition).
    fn take_newly_failed(&mut self) -> Vec<Rank> {
        let v = std::mem::take(&mut self.newly_failed);
        if !self.witnessed {
            return v;
        }
        for p in v {
            self.suspect(p);
        }
        Vec::new()
    }

    /// Sends a reliable control record (no user data); `false` when the transport is
    /// busy. A transport error fails the peer.
    fn send_control(&mut self, t: &mut AnyTransport, peer: Rank, header: &[u8], payload: &[u8]) -> bool {
        match t.try_send(peer, header, payload) {
            Ok(_) => true,
            Err(TransportError::Busy) => false,
            Err(e) => {
                tracing::debug!(peer = peer.0, error = %e, "control record not sent");
                self.newly_failed.push(peer);
                true
            }
        }
    }

    fn send_status(&self, req: ReqId) -> Status {
        match self.reqs.get(req) {
            Some(Request { kind: Kind::Send { dest, tag, buf, .. }, .. }) => {
                Status { source: *dest as usize, tag: *tag, len: buf.len() }
            }
            _ => Status { source: 0, tag: 0, len: 0 },
        }
    }

    fn send_failed(&mut self, peer: Rank, req: ReqId, e: TransportError) {
        let dest = match self.reqs.get(req) {
            Some(Request { kind: Kind::Send { dest, .. }, .. }) => *dest,
            _ => peer.0,
        };
        let err = match e {
            TransportError::Peer { .. } => {
                self.newly_failed.push(peer);
                Error::RankFailStop { rank: dest }
            }
            other => Error::Transport(other.to_string()),
        };
        self.set_outcome(req, Err(err));
    }

    /// Retries every peer's queued work in order, stopping at the first busy entry.
    fn flush(&mut self, t: &mut AnyTransport) {
        for i in 0..self.peers.len() {
            while let Some(out) = self.peers[i].pending.pop_front() {
                self.queued -= 1;
                if let Some(back) = self.try_post(t, Rank(i as u32), out) {
                    self.peers[i].pending.push_front(back);
                    self.queued += 1;
                    break;
                }
            }
        }
    }

    /// Posts `out` behind whatever is queued for `peer` (queues it when the transport
    /// is busy): for reliable messages whose order with the peer's data matters.
    fn post_or_queue(&mut self, t: &mut AnyTransport, peer: Rank, out: Outgoing) {
        let out = if self.peers[peer.0 as usize].pending.is_empty() { self.try_post(t, peer, out) } else { Some(out) };
        if let Some(back) = out {
            self.queue(peer, back);
        }
    }

    fn queue(&mut self, peer: Rank, out: Outgoing) {
        self.peers[peer.0 as usize].pending.push_back(out);
        self.queued += 1;
    }

    fn on_event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Received { peer, bytes } => self.on_record(peer, bytes),
            Event::PeerError { peer, cause } => {
                tracing::debug!(peer = peer.0, %cause, "transport reports peer error");
                self.newly_failed.push(peer);
            }
            Event::ReadDone { op, data } => self.read_done(op.0, data),
            Event::Sent(_) => {}
        }
    }

    fn on_record(&mut self, peer: Rank, bytes: &[u8]) {
        let Some(p) = self.peers.get_mut(peer.0 as usize) else { return };
        if let Some(ft) = self.ft.as_mut() {
            if ft.observed == Some(peer.0) {
                ft.observed_spoke = true;
            }
        }
        // The common record first: an in-order eager message (no `Header` built).
        if let Some((env, payload)) = crate::wire::decode_eager(bytes) {
            if env.seq.0 == p.recv_seq {
                p.recv_seq = p.recv_seq.wrapping_add(1);
                let held = !p.held.is_empty();
                self.on_eager(peer, env, payload);
                if held {
                    self.release_held(peer);
                }
                return;
            }
        }
        let (h, payload) = match Header::decode(bytes) {
            Ok(x) => x,
            Err(e) => {
                self.stats.malformed += 1;
                tracing::warn!(peer = peer.0, error = %e, "dropping malformed record");
                return;
            }
        };
        if let Header::Agree = h {
            match AgreeMsg::decode(payload) {
                Ok(m) => {
                    let now = self.agree.now();
                    match self.agree.running.iter_mut().find(|(_, a)| a.instance() == m.instance()) {
                        Some((_, a)) => {
                            a.handle_message(peer.0, m, now);
                            self.agree.dirty = true;
                        }
                        None if self.agree.early.len() < EARLY_AGREE_KEEP => self.agree.early.push((peer, m)),
                        None => tracing::warn!(peer = peer.0, "dropping agreement message: too many early ones"),
                    }
                }
                Err(e) => {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, error = %e, "dropping malformed agreement message");
                }
            }
            return;
        }
        if let Header::Note = h {
            match Note::decode(payload) {
                // Behind every message the peer sent before (one ordered channel).
                Ok(Note::Bye) if !p.failed => self.byes.push(peer),
                Ok(Note::ByeAck) => p.awaiting_bye_ack = false,
                Ok(n @ (Note::Revoke { .. } | Note::Corrupt { .. } | Note::Signal { .. } | Note::Mark { .. })) => {
                    self.notes_in.push((peer, n))
                }
                Ok(Note::Discard { sreq }) => self.discarded(peer, ReqId::from_wire(sreq)),
                Ok(Note::CancelSend { seq }) if !p.failed => self.withdraw(peer, seq),
                Ok(Note::CancelAck { seq, cancelled }) => self.cancel_answered(peer, seq, cancelled),
                Ok(_) => {}
                Err(e) => {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, error = %e, "dropping malformed notice");
                }
            }
            return;
        }
        if let Header::Ft = h {
            if let Some(ft) = self.ft.as_mut() {
                match Msg::decode(payload) {
                    Ok(m) => {
                        let now = ft.now();
                        ft.det.handle_message(peer.0, m, now);
                        ft.dirty = true;
                    }
                    Err(e) => {
                        self.stats.malformed += 1;
                        tracing::warn!(peer = peer.0, error = %e, "dropping malformed ft message");
                    }
                }
            }
            return;
        }
        let seq = match h {
            Header::Eager { env, .. } | Header::Rts { env, .. } => Some(env.seq.0),
            _ => None,
        };
        match seq {
            Some(s) if s != p.recv_seq => {
                if s.wrapping_sub(p.recv_seq) < u32::MAX / 2 {
                    p.held.insert(s, bytes.to_vec());
                } else {
                    self.stats.malformed += 1;
                    tracing::warn!(peer = peer.0, seq = s, "dropping duplicate or stale message");
                }
            }
            Some(_) => {
                p.recv_seq = p.recv_seq.wrapping_add(1);
                self.on_matched(peer, h, payload);
                self.release_held(peer);
            }
            // A failed peer's late protocol traffic refers to requests already failed.
            None if p.failed => {}
            None => self.on_protocol(peer, h, payload),
        }
    }

    fn release_held(&mut self, peer: Rank) {
        loop {
            let p = &mut self.peers[peer.0 as usize];
            if p.held.is_empty() {
                return;
            }
            let Some(rec) = p.held.remove(&p.recv_seq) else { return };
            p.recv_seq = p.recv_seq.wrapping_add(1);
            if let Ok((h, payload)) = Header::decode(&rec) {
                self.on_matched(peer, h, payload);
            }
        }
    }

    /// Whether messages on `ctx` are dropped on arrival: its communicator is broken (a
    /// flag read while no communicator ever was).
    #[inline]
    fn drops_arrivals(&self, ctx: ContextId) -> bool {
        self.comm_notices && self.comms.get(ctx).is_some_and(|c| c.broken.is_some())
    }

    /// An eager message taken in order from `peer`: to the earliest matching posted
    /// receive, else to the unexpected queue.
    #[inline]
    fn on_eager(&mut self, peer: Rank, env: Envelope, payload: &[u8]) {
        if self.drops_arrivals(env.ctx) {
            return;
        }
        let a = Arrival { ctx: env.ctx, src: env.src, tag: env.tag };
        if let Some((_, rreq)) = self.posted.take_match(&a) {
            self.deliver_eager(rreq, &a, payload);
        } else {
            let mut v = self.pool.pop().unwrap_or_default();
            v.extend_from_slice(payload);
            self.stats.unexpected += 1;
            self.unexpected.push(a, UnexpEntry { peer, data: Unexp::Eager(v), seq: env.seq.0 });
        }
    }

    fn on_matched(&mut self, peer: Rank, h: Header, payload: &[u8]) {
        match h {
            Header::Eager { env, .. } => self.on_eager(peer, env, payload),
            Header::Rts { env, sreq, .. } if self.drops_arrivals(env.ctx) => {
                self.post_or_queue_note(peer, Note::Discard { sreq: sreq.to_wire() });
            }
            Header::Rts { env, len, sreq, region, pull: hint } => {
                let a = Arrival { ctx: env.ctx, src: env.src, tag: env.tag };
                if let Some((_, rreq)) = self.posted.take_match(&a) {
                    self.pulls.push(Pull { rreq, peer, src: env.src, tag: env.tag.0, len, sreq, region, hint });
                } else {
                    self.stats.unexpected += 1;
                    let data = Unexp::Rts { len, sreq, region, pull: hint };
                    self.unexpected.push(a, UnexpEntry { peer, data, seq: env.seq.0 });
                }
            }
            _ => {}
        }
    }

    fn deliver_eager(&mut self, rreq: ReqId, a: &Arrival, payload: &[u8]) {
        let Some(Request { kind: Kind::Recv { buf, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else { return };
        let n = payload.len().min(buf.len());
        buf.as_mut_slice()[..n].copy_from_slice(&payload[..n]);
        *outcome = Some(if payload.len() > buf.len() {
            Err(Error::Truncate { posted: buf.len(), arrived: payload.len() })
        } else {
            Ok(Status { source: a.src as usize, tag: a.tag.0, len: payload.len() })
        });
    }

    fn on_protocol(&mut self, peer: Rank, h: Header, payload: &[u8]) {
        match h {
            Header::Fin { sreq } | Header::Cts { sreq, .. } => {
                let ok = matches!(
                    self.reqs.get(sreq),
                    Some(Request { kind: Kind::Send { peer: p, phase: SendPhase::AwaitingFinOrCts, .. }, outcome: None, .. })
                        if *p == peer
                );
                if !ok {
                    self.stray(peer, "fin/cts for no waiting send");
                    return;
                }
                if let Header::Cts { rreq, .. } = h {
                    if let Some(Request { kind: Kind::Send { phase, .. }, .. }) = self.reqs.get_mut(sreq) {
                        *phase = SendPhase::Streaming;
                    }
                    self.queue(peer, Outgoing::Stream { sreq, rreq, offset: 0 });
                } else {
                    let st = self.send_status(sreq);
                    self.set_outcome(sreq, Ok(st));
                }
            }
            Header::Data { rreq, offset } => {
                let Some(Request { kind: Kind::Recv { buf, phase, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else {
                    self.stray(peer, "data for no request");
                    return;
                };
                let RecvPhase::AwaitingData { peer: from, received, total, src, tag, timed } = phase else {
                    self.stray(peer, "data for a receive not streaming");
                    return;
                };
                // `offset` and `total` come from the peer: no overflow, nothing past the
                // message (a saturating sum let `offset + len = 2^64` through).
                let end = offset.checked_add(payload.len() as u64);
                if *from != peer || outcome.is_some() || end.is_none_or(|e| e > *total) {
                    self.stray(peer, "data outside the message");
                    return;
                }
                let dst = buf.as_mut_slice();
                let start = usize::try_from(offset).unwrap_or(usize::MAX).min(dst.len());
                let end = start.saturating_add(payload.len()).min(dst.len());
                dst[start..end].copy_from_slice(&payload[..end - start]);
                *received = received.saturating_add(payload.len() as u64);
                if *received >= *total {
                    if *timed {
                        self.choice[choice_bucket(*total)].record(false, *total, Instant::now());
                    }
                    let total = *total as usize;
                    *outcome = Some(if total > dst.len() {
                        Err(Error::Truncate { posted: dst.len(), arrived: total })
                    } else {
                        Ok(Status { source: *src as usize, tag: *tag, len: total })
                    });
                }
            }
            _ => {}
        }
    }

    /// An RMA read for a receive finished: copy what it read (`data`, in the transport's
    /// memory) into the receive buffer if the receive still waits for it, complete the
    /// receive, FIN the sender. A receive failed meanwhile (its peer declared failed) or
    /// released is left alone: its buffer may be the user's again.
    /// A chunk read finished: its bytes go to their place in the receive buffer (never
    /// past its end: a truncated receive reads only what fits); the last one completes
    /// the receive and tells the sender (FIN).
    fn read_done(&mut self, op: u64, data: &[u8]) {
        let Some(ChunkRead { rreq, offset, .. }) = self.reads.remove(&op) else { return };
        let Some(Request { kind: Kind::Recv { buf, phase, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else {
            return;
        };
        let RecvPhase::AwaitingRead { peer, left, sreq, total, src, tag } = *phase else { return };
        if outcome.is_some() {
            *phase = RecvPhase::AwaitingMatch;
            return;
        }
        let dst = buf.as_mut_slice();
        if offset < dst.len() {
            let n = data.len().min(dst.len() - offset);
            dst[offset..offset + n].copy_from_slice(&data[..n]);
        }
        if left > 1 {
            *phase = RecvPhase::AwaitingRead { peer, left: left - 1, sreq, total, src, tag };
            return;
        }
        *phase = RecvPhase::AwaitingMatch;
        *outcome = Some(if total as usize > buf.len() {
            Err(Error::Truncate { posted: buf.len(), arrived: total as usize })
        } else {
            Ok(Status { source: src as usize, tag, len: total as usize })
        });
        self.stats.pulled += 1;
        if !self.peers[peer.0 as usize].failed {
            self.queue(peer, Outgoing::Ctrl(Header::Fin { sreq }));
        }
    }

    fn stray(&mut self, peer: Rank, what: &'static str) {
        self.stats.stray += 1;
        tracing::warn!(peer = peer.0, what, "dropping stray protocol header");
    }

    /// Pulls a matched rendezvous into the receive buffer, or asks for a stream.
    fn pull(&mut self, t: &mut AnyTransport, pull: Pull) -> u64 {
        let Pull { rreq, peer, src, tag, len, sreq, region, hint } = pull;
        let async_reads = t.async_reads(peer);
        let min = if async_reads { self.cfg.rma_min } else { self.cfg.cma_min };
        let mut rma = self.caps.rma_read && !self.peers[peer.0 as usize].no_rma && len as usize >= min;
        // `cma_choose`: a long receive that could be pulled in the call takes the chosen
        // protocol, and is timed until the choice is made.
        let choosing = rma && self.cfg.cma_choose && !async_reads;
        // The lower rank of a pair decides for both directions once it measured: from a
        // lower rank its verdict rides on the RTS; otherwise this rank's own choice.
        let verdict = hint.filter(|_| peer.0 < self.me.0);
        let bucket = choice_bucket(len);
        if choosing {
            rma = verdict.unwrap_or_else(|| self.choice[bucket].pull());
        }
        let timed = choosing && verdict.is_none() && !self.choice[bucket].decided();
        if self.peers[peer.0 as usize].failed {
            self.set_outcome(rreq, Err(Error::RankFailStop { rank: src }));
            return 0;
        }
        let Some(Request { kind: Kind::Recv { buf, phase, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else {
            return 0;
        };
        if len == 0 {
            // An empty rendezvous (a synchronous-mode send of nothing): matched is done.
            *outcome = Some(Ok(Status { source: src as usize, tag, len: 0 }));
            self.queue(peer, Outgoing::Ctrl(Header::Fin { sreq }));
            return 0;
        }
        let dst = buf.as_mut_slice();
        let n = (len as usize).min(dst.len());
        if rma {
            // Asynchronous reads (a fabric) go in chunks, all posted now; a read done in
            // the call (CMA) takes the whole message at once.
            let step = if async_reads { READ_CHUNK } else { n };
            let first = n.min(step);
            let mut chunk = |t: &mut AnyTransport, off: usize, end: usize, dst: &mut [u8]| {
                let op = self.next_read;
                self.next_read += 1;
                let remote = RemoteRegion { addr: region.addr + off as u64, len: (end - off) as u64, key: region.key };
                let r = t.rma_read(peer, remote, &mut dst[off..end], OpId(op));
                if let Ok(Posted::InFlight(_)) = r {
                    self.reads.insert(op, ChunkRead { rreq, peer, offset: off });
                }
                r
            };
            let mut r = chunk(t, 0, first, dst);
            let mut left = u32::from(matches!(r, Ok(Posted::InFlight(_))));
            let mut off = first;
            while off < n && r.is_ok() {
                let end = off + (n - off).min(step);
                r = chunk(t, off, end, dst);
                left += u32::from(matches!(r, Ok(Posted::InFlight(_))));
                off = end;
            }
            match r {
                Ok(_) if left > 0 => {
                    *phase = RecvPhase::AwaitingRead { peer, left, sreq, total: len, src, tag };
                    return 0;
                }
                Ok(Posted::Done | Posted::InFlight(_)) => {
                    if timed {
                        self.choice[bucket].record(true, len, Instant::now());
                    }
                    *outcome = Some(if len as usize > dst.len() {
                        Err(Error::Truncate { posted: dst.len(), arrived: len as usize })
                    } else {
                        Ok(Status { source: src as usize, tag, len: len as usize })
                    });
                    self.stats.pulled += 1;
                    self.queue(peer, Outgoing::Ctrl(Header::Fin { sreq }));
                    return n as u64;
                }
                // Nothing in flight: the stream rewrites the whole buffer.
                Err(TransportError::RmaUnavailable) if left == 0 => {
                    tracing::debug!(peer = peer.0, "no CMA/RMA to this peer: streaming rendezvous");
                    self.peers[peer.0 as usize].no_rma = true;
                }
                Err(e) => {
                    tracing::debug!(peer = peer.0, error = %e, "rendezvous pull failed");
                    *outcome = Some(Err(Error::RankFailStop { rank: src }));
                    self.newly_failed.push(peer);
                    return 0;
                }
            }
        }
        *phase = RecvPhase::AwaitingData { peer, received: 0, total: len, src, tag, timed };
        self.queue(peer, Outgoing::Ctrl(Header::Cts { sreq, rreq }));
        0
    }

    /// The failed member a wildcard receive on `ctx` reports while wildcards are
    /// disabled (R13): the most recent failure among the communicator's members.
    fn wildcard_blocker(&self, ctx: ContextId) -> Option<u32> {
        let c = self.comms.get(ctx)?;
        if !c.wildcard_disabled {
            return None;
        }
        self.failures.in_order().iter().rev().find_map(|w| c.local_rank(Rank(*w)))
    }

    fn fail_peer(&mut self, peer: Rank) {
        let Some(p) = self.peers.get_mut(peer.0 as usize) else { return };
        if p.failed {
            return;
        }
        p.failed = true;
        let departed = p.departed;
        if !departed {
            self.failures.insert(peer.0);
        }
        p.held.clear();
        let dropped = p.pending.len();
        p.pending.clear();
        // Its reads in flight may never report (their receives fail below).
        self.reads.retain(|_, r| r.peer != peer);
        self.queued -= dropped;
        tracing::debug!(peer = peer.0, "failing requests of failed peer");
        // R13: every communicator containing the failed rank disables its wildcards.
        let containing = if departed { Vec::new() } else { self.comms.containing(peer) };
        // A failure a validate already recognised (the agreement told us before the
        // detector did) changes nothing collectively: the other members carry on with
        // the communicator active, so deactivating it here would make this member skip
        // a collective they wait in.
        let mut fresh = Vec::with_capacity(containing.len());
        for &(ctx, local) in &containing {
            if let Some(c) = self.comms.get_mut(ctx) {
                c.wildcard_disabled = true;
                if !c.recognized.contains(&local) {
                    // R18: collectively inactive until validated.
                    c.active = false;
                    if let (Some(slot), Some(sc)) = (c.shm_slot, &self.shm_coll) {
                        sc.set_state(slot, false, false);
                    }
                    fresh.push((ctx, local));
                }
            }
        }
        // After the states: a collective that sees the new generation also sees them.
        if let Some(sc) = &self.shm_coll {
            sc.note_failure();
        }
        // R17: receives of collectives in progress on those communicators fail, so no
        // member waits for one that gave up (collective data travels eagerly, so no
        // sender waits on a receiver).
        for (ctx, local) in &fresh {
            let coll = ContextId(ctx.0 | 1);
            while let Some((_, id)) = self.posted.remove_where(|pat, _| pat.ctx == coll) {
                self.set_outcome(id, Err(Error::RankFailStop { rank: *local }));
            }
        }
        for id in self.reqs.ids() {
            let Some(r) = self.reqs.get(id) else { continue };
            if r.outcome.is_some() {
                continue;
            }
            let rank = match &r.kind {
                Kind::Send { peer: p, dest, .. } if *p == peer => Some(*dest),
                Kind::Recv { phase: RecvPhase::AwaitingData { peer: p, src, .. }, .. } if *p == peer => Some(*src),
                Kind::Recv { phase: RecvPhase::AwaitingRead { peer: p, src, .. }, .. } if *p == peer => Some(*src),
                Kind::Recv { peer: Some(p), phase: RecvPhase::AwaitingMatch, .. } if *p == peer => {
                    let posted = self.posted.remove_where(|_, x| *x == id);
                    posted.map(|(pat, _)| {
                        let rank = pat.src.unwrap_or(peer.0);
                        if let Some(c) = self.comms.get_mut(pat.ctx) {
                            c.poison(rank);
                        }
                        rank
                    })
                }
                Kind::Recv { peer: None, phase: RecvPhase::AwaitingMatch, .. } => {
                    let hit = containing.iter().find_map(|(ctx, local)| {
                        self.posted.remove_where(|pat, x| *x == id && Comms::same_comm(pat.ctx, *ctx)).map(|_| *local)
                    });
                    hit
                }
                _ => None,
            };
            if let Some(rank) = rank {
                self.set_outcome(id, Err(Error::RankFailStop { rank }));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{choice_bucket, PullChoice, CHOICE_BUCKETS, CHOICE_SAMPLES, DEFAULT_STREAM_CHUNK};
    use crate::wire::{Header, MAX_HEADER_BYTES};
    use crate::ReqId;
    use runthrough_shm::ring::{max_record, record_footprint};

    /// The geometry of the default 256 KiB shared-memory ring: a 64 KiB payload with the
    /// largest header is one record (eager, not a rendezvous), and a streamed fragment
    /// with its header fills a quarter ring exactly, so four are in flight.
    #[test]
    fn a_64_kib_payload_is_one_record_and_four_stream_fragments_fill_a_ring() {
        let ring = 256 * 1024;
        assert!(max_record(ring) >= 64 * 1024 + MAX_HEADER_BYTES, "max_record {}", max_record(ring));
        let data = Header::Data { rreq: ReqId::from_wire(1), offset: 0 }.encoded_len();
        assert_eq!(4 * record_footprint(DEFAULT_STREAM_CHUNK + data), ring as usize);
        assert!(DEFAULT_STREAM_CHUNK + data <= max_record(ring));
    }

    /// Streams first, then pulls, then keeps whichever was faster per byte.
    #[test]
    fn pull_choice_measures_both_then_keeps_the_faster() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let k = u64::from(CHOICE_SAMPLES);
        // Receives of 1000 B completing every `stream` ms, then every `cma` ms: pulled
        // unless streaming was faster by more than the margin (10 against 11 ms pulls).
        for (stream, cma, pulls) in [(9, 4, true), (1, 4, false), (10, 11, true), (10, 12, false)] {
            let mut c = PullChoice::default();
            for i in 0..k {
                assert!(!c.pull(), "streamed while streaming is measured");
                c.record(false, 1000, at(1000 + i * stream));
            }
            for i in 0..k {
                assert!(c.pull(), "pulled while CMA is measured");
                c.record(true, 1000, at(2000 + i * cma));
            }
            assert!(c.decided());
            for i in 0..4 {
                assert_eq!(c.pull(), pulls);
                c.record(pulls, 1000, at(3000 + i));
            }
        }
    }

    /// Each size class has its own verdict: up to 64 KiB, up to 128 KiB, ... up to
    /// 4 MiB, then everything longer.
    #[test]
    fn long_receives_are_chosen_for_per_size_class() {
        let k = 1024u64;
        assert_eq!(choice_bucket(0), 0);
        assert_eq!(choice_bucket(32 * k + 1), 0);
        assert_eq!(choice_bucket(64 * k), 0);
        assert_eq!(choice_bucket(64 * k + 1), 1);
        assert_eq!(choice_bucket(128 * k), 1);
        assert_eq!(choice_bucket(512 * k), 3);
        assert_eq!(choice_bucket(1024 * k), 4);
        assert_eq!(choice_bucket(1024 * k + 1), 5);
        assert_eq!(choice_bucket(4 * 1024 * k), 6);
        assert_eq!(choice_bucket(4 * 1024 * k + 1), 7);
        assert_eq!(choice_bucket(u64::MAX), CHOICE_BUCKETS - 1);
    }

    /// Completion to completion over [`CHOICE_SPAN`] receives, the lowest span: a
    /// streamed receive counts from the previous one's completion, whenever its CTS went
    /// out, and a slow start or one hiccup decides nothing.
    #[test]
    fn the_choice_times_from_completion_to_completion() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let mut c = PullChoice::default();
        // A window's CTSs all went out at 0; the first two took 300 and 100 ms (cold),
        // then 10 ms each, but for one that took 1 ms (its bytes were mostly in the ring
        // already).
        for done in [300, 400, 410, 420, 421, 431, 441, 451, 461] {
            c.record(false, 1000, at(done));
        }
        assert_eq!(c.stream.per_byte, 0.031 / 4000.0);
        // Pulls of 9 ms each, with one of 2 ms.
        for done in [500, 509, 518, 520, 529, 538, 547, 556, 565] {
            c.record(true, 1000, at(done));
        }
        assert_eq!(c.cma.per_byte, 0.029 / 4000.0);
        assert!(c.pull(), "over four receives CMA was the faster: 29 against 31 ms");
    }

    /// Streaming is kept only when it was faster over its lowest span and over its
    /// median one: the lowest alone can be a span whose bytes were mostly in the ring
    /// already (1 MiB `osu_bibw` on an Intel host: streamed spans of 5.9-6.4 GB/s and
    /// two of 12, pulls of 8.2-8.9).
    #[test]
    fn streaming_must_be_faster_in_its_lowest_and_its_median_span() {
        let t0 = std::time::Instant::now();
        let at = |ms: u64| t0 + std::time::Duration::from_millis(ms);
        let choose = |stream: &[u64; 9], cma: &[u64; 9]| {
            let mut c = PullChoice::default();
            for &d in stream {
                c.record(false, 1000, at(d));
            }
            for &d in cma {
                c.record(true, 1000, at(d));
            }
            assert!(c.decided());
            c.pull()
        };
        // Spans of 4 streamed receives: 40, 40, 32, 24, 16 ms (the last ones had their
        // bytes in the ring); pulls: 30 ms a span. The lowest says stream, the median not.
        let stream = [0, 10, 20, 30, 40, 50, 52, 54, 56];
        let cma = [100, 107, 115, 122, 130, 137, 145, 152, 160];
        assert!(choose(&stream, &cma), "pulled: the median streamed span (32 ms) is slower than 30");
        // Streaming faster in every span (20 against 30 ms): streamed.
        let stream = [0, 5, 10, 15, 20, 25, 30, 35, 40];
        assert!(!choose(&stream, &cma), "streamed: faster by more than the margin in both");
    }
}
