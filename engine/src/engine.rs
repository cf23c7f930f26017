//! The progress engine: sends, receives, protocols and failure-driven completion.
//!
//! Parts (docs/ARCHITECTURE.md §2, a message's way):
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
use std::sync::Arc;

use runthrough_ft::Msg;

use crate::comms::Comms;
use crate::failed_set::FailedSet;
use crate::note::Note;
use crate::request::Slab;
use crate::transport::{AnyTransport, Caps, Event, Transport};
use crate::types::{Rank, RemoteRegion, ReqId};
use crate::wire::{Header, MAX_HEADER_BYTES};

mod agreement;
mod cancel;
mod comm_state;
mod departure;
mod failure;
mod propagation;
mod recv;
mod rendezvous;
mod requests;
mod rma;
mod sched;
mod send;

pub use agreement::FREED_DECIDED_KEEP;
use agreement::{Agreements, EARLY_AGREE_KEEP, RESOLUTION_SERIES};
use cancel::Cancels;
use comm_state::CommFlags;
use departure::Departure;
use failure::Failures;
use recv::Receiving;
pub use rendezvous::CHOICE_SAMPLES;
use rendezvous::{choice_bucket, Pull, Rendezvous};
pub use requests::Detached;
use requests::Handed;
use sched::Schedules;
pub use sched::{Ended, Over, Scheduled, SendCombine};
use send::Sending;

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
/// Unexpected-payload buffers kept for reuse.
const POOL_KEEP: usize = 64;

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
    /// differs between hosts of one kind (bench/history/NOTEBOOK.md §0.10, §0.11): set when every
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
    /// A one-sided message (encoded, data included) with its sequence number.
    Rma { seq: crate::types::Seq, rec: Vec<u8> },
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
    /// Rendezvous a process sent itself, done as one copy between its two buffers.
    pub copied_to_self: u64,
    /// One-sided puts and gets done as single copies between two processes (CMA).
    pub rma_copied: u64,
}

/// Everything but the transport, so a transport callback can borrow it mutably: what
/// every part uses (the rank, the tunables, the requests, the peers, the communicators),
/// and each part's own state, defined in its module.
#[derive(Debug)]
struct State {
    me: Rank,
    cfg: Config,
    caps: Caps,
    reqs: Slab,
    peers: Vec<Peer>,
    /// Shared with a background thread without the lock: see [`Pulse`].
    pulse: Arc<Pulse>,
    /// The failed peers, shared with one-sided fast paths (see [`FailedSet`]).
    failed_set: Arc<FailedSet>,
    stats: Stats,
    comms: Comms,
    /// Sending (`send.rs`).
    send: Sending,
    /// The matching queues (`recv.rs`).
    recv: Receiving,
    /// Rendezvous pulls and reads (`rendezvous.rs`).
    rdv: Rendezvous,
    /// The detector and the failed set (`failure.rs`).
    fail: Failures,
    /// The collective area and the communicator-notice flags (`comm_state.rs`).
    cs: CommFlags,
    /// Agreements running and early (`agreement.rs`).
    agree: Agreements,
    /// Departure and wire notices (`departure.rs`).
    dep: Departure,
    /// Cancels of sends (`cancel.rs`).
    cancel: Cancels,
    /// Requests handed to the engine (`requests.rs`).
    handed: Handed,
    /// Nonblocking collectives the engine owns (`sched.rs`).
    sched: Schedules,
    /// Windows of one-sided communication (`rma.rs`).
    rma: rma::Windows,
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
/// middle of long copies (bench/history/NOTEBOOK.md §0.16: 1 MiB `osu_bibw`).
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
                reqs: Slab::default(),
                peers: (0..size).map(|_| Peer::default()).collect(),
                pulse: Arc::default(),
                failed_set: Arc::new(FailedSet::new(size)),
                stats: Stats::default(),
                comms: Comms::default(),
                send: Sending::new(eager_max, chunk),
                recv: Receiving::new(),
                rdv: Rendezvous::new(),
                fail: Failures::new(size),
                cs: CommFlags::new(),
                agree: Agreements::default(),
                dep: Departure::new(),
                cancel: Cancels::new(),
                handed: Handed::default(),
                sched: Schedules::default(),
                rma: rma::Windows::default(),
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
        self.st.send.eager_max
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

    /// The set of known failed peers, readable without the lock.
    pub fn failed_set(&self) -> Arc<FailedSet> {
        self.st.failed_set.clone()
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
        self.st.send.queued > 0 || !self.transport.is_idle()
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
        if !st.dep.byes.is_empty() {
            self.answer_byes();
        }
        if !self.st.dep.notes_in.is_empty() {
            self.apply_notes();
        }
        if self.st.cs.propagating {
            self.resolutions_service();
        }
        let Engine { transport, st } = self;
        if !st.fail.newly_failed.is_empty() {
            let failed = st.take_newly_failed();
            for peer in failed {
                self.fail_peer(peer);
            }
            return n;
        }
        if st.send.queued > 0 {
            st.flush(transport);
        }
        if !st.send.unexpose.is_empty() {
            for region in st.send.unexpose.drain(..) {
                transport.unexpose(region);
            }
        }
        if st.fail.ft.as_ref().is_some_and(|f| f.dirty) {
            self.ft_service();
        }
        if self.st.agree.dirty {
            self.agree_service();
        }
        if !self.st.handed.pending.is_empty() {
            self.reap_handed();
        }
        if !self.st.sched.list.is_empty() {
            self.advance_schedules();
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
        let needs = !self.st.fail.suspects.is_empty()
            || self.is_excluded()
            || self.st.reqs.has_wakers()
            || !self.st.handed.released.is_empty();
        self.st.pulse.attention.store(needs, Ordering::Relaxed);
    }
}

impl State {
    fn on_event(&mut self, ev: Event<'_>) {
        match ev {
            Event::Received { peer, bytes } => self.on_record(peer, bytes),
            Event::PeerError { peer, cause } => {
                tracing::debug!(peer = peer.0, %cause, "transport reports peer error");
                self.fail.newly_failed.push(peer);
            }
            Event::ReadDone { op, data } => self.read_done(op.0, data),
            Event::Sent(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::rendezvous::{choice_bucket, PullChoice, CHOICE_BUCKETS, CHOICE_SAMPLES};
    use super::DEFAULT_STREAM_CHUNK;
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
