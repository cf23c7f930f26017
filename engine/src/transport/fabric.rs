//! Adapter: the engine's [`Transport`] over a libfabric RDM endpoint (T1, docs/REQUIREMENTS.md).
//!
//! Parts:
//! - **Frames.** Every record travels as one untagged message: an 8-byte transport frame
//!   (`magic 0xF7`, kind `DATA`/`CREDIT`, piggybacked credits `u16`, sender world rank
//!   `u32`, little-endian) followed by the engine's header and payload. The frame names the
//!   sender, so receives are posted for any source and no `FI_SOURCE` lookup is needed. A
//!   frame that fails validation (short, bad magic or kind, rank out of range) or a receive
//!   that overflows its buffer (`FI_ETRUNC`) is counted in [`FabricStats::malformed`] and
//!   dropped; the buffer is reposted. Remote input never panics.
//! - **Bounce pools.** Two pinned slabs allocated once: `send_bufs` send buffers and
//!   `size × (credits + 2)` receive buffers, `bounce_bytes` each (registered once when the
//!   provider wants `FI_MR_LOCAL` descriptors). `try_send` copies frame + header + payload
//!   into a free send buffer and posts `fi_send`; the buffer returns to the free list on
//!   its completion. Records that fit the provider's inject size go by `fi_inject` from the
//!   stack instead (no buffer, no completion). No free buffer → `Busy`. Every receive
//!   buffer is posted with `FI_ADDR_UNSPEC`; a completed one is handed to the engine as
//!   [`Event::Received`] borrowed in place, then reposted.
//! - **Credits.** A sender holds `credits` plus [`CONTROL_RESERVE`] credits per peer; each
//!   `DATA` record spends one (none left → `Busy`, the engine queues and retries). User data
//!   may not dip into the last `CONTROL_RESERVE`: those are kept for protocol control
//!   ([`crate::wire::is_control`]: CTS, FIN, failure-detector heartbeats), so a stream that
//!   fills the window never starves heartbeats into a false failure. The receiver owes a credit back for each
//!   `DATA` record once its buffer is reposted, piggybacks owed credits on its next record
//!   to that peer, and sends an explicit `CREDIT` frame once half the window is owed. So
//!   at most `credits + CONTROL_RESERVE` records plus two credit frames per peer are ever in flight to
//!   a rank, and the receive pool covers them: a flood of unexpected messages backs up at
//!   the senders, never in this process's memory nor the provider's unexpected queue.
//! - **Rendezvous.** [`Transport::expose`] registers the send buffer through the fabric
//!   registration cache ([`MrCache`]) and returns the address in the provider's convention
//!   (virtual address under `FI_MR_VIRT_ADDR`, else the offset in the registration), the
//!   length and the key; endpoint binding (`FI_MR_ENDPOINT`) and provider keys are handled
//!   by the fabric crate. [`Transport::rma_read`] posts `fi_read` into the receive buffer
//!   (registered for the read when `FI_MR_LOCAL`) and returns `InFlight`; the completion
//!   becomes [`Event::ReadDone`]. A read the provider refuses with `-FI_EAGAIN` is queued
//!   and reposted from `poll` (the engine treats a failed read as a dead peer).
//! - **Failures.** Operations are posted with [`OpSlab`] contexts that remember the peer,
//!   so every completion-queue error entry of a send or read becomes
//!   [`Event::PeerError`] for that peer. Receive error entries have no peer (receives are
//!   posted for any source): they are counted ([`FabricStats::rx_errors`]) and the buffer
//!   reposted. A peer whose sends stay `Busy` (credits, buffers or `-FI_EAGAIN`) past the
//!   stall bound ([`StallTracker`]) is reported as a `PeerError` once per episode:
//!   libfabric 1.17's `tcp;ofi_rxm` never reports a SIGKILLed peer otherwise (T-FD).
//!
//! Ordering: libfabric RDM gives no cross-buffer delivery order guarantee the engine
//! relies on; the engine restores per-peer order from its sequence numbers.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use runthrough_fabric::provider::open_selected;
use runthrough_fabric::{
    Access, AddressVector, CompletionQueue, CqEvent, Domain, Endpoint, EpAddr, Error as FiError, ErrorCode, FiAddr,
    MemoryRegion, MrCache, MrDesc, OpSlab, RemoteAccess, RemoteKey, Selection, StallTracker,
};
pub use runthrough_fabric::{Hints, Provider, ProviderRequest};

use super::{Caps, Event, Posted, Transport, TransportError};
use crate::types::{OpId, Rank, RemoteRegion};

/// Bytes of the transport frame in front of every record.
pub const FRAME_BYTES: usize = 8;
const FRAME_MAGIC: u8 = 0xF7;
const KIND_DATA: u8 = 1;
const KIND_CREDIT: u8 = 2;
/// Default bounce buffer size: a 64 KiB stream chunk plus frame and engine header.
pub const DEFAULT_BOUNCE_BYTES: usize = 64 * 1024 + 64;
/// Default per-peer send window (records in flight to one peer).
pub const DEFAULT_CREDITS: u32 = 16;
/// Default number of send bounce buffers.
pub const DEFAULT_SEND_BUFS: usize = 64;
/// Credits per peer beyond the data window, usable only by protocol control records.
pub const CONTROL_RESERVE: u32 = 4;
/// Default bound after which a peer whose sends stay busy is reported failed.
pub const DEFAULT_STALL: Duration = Duration::from_secs(5);
/// Upper bound on the receive pool (buffers), so large jobs shrink the per-peer window.
const MAX_RECV_BUFS: usize = 2048;
/// Spare read bounce buffers kept for reuse: at most this many, holding at most
/// `BOUNCE_KEEP_BYTES` (the engine reads a long message in 256 KiB chunks, all in flight
/// at once, so a window of them reuses its buffers instead of faulting in fresh ones).
const BOUNCE_KEEP: usize = 256;
const BOUNCE_KEEP_BYTES: usize = 64 << 20;
/// Cached send-buffer registrations.
const MR_CACHE_ENTRIES: usize = 64;
/// Records up to this size are injected from a stack copy.
const INJECT_STACK_BYTES: usize = 256;
/// Key of an exposure that could not be registered: the reader falls back to streaming.
const NO_KEY: u64 = u64::MAX;

/// Tunables of a [`FabricTransport`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FabricConfig {
    /// Size of each bounce buffer (frame + header + payload of the largest record).
    pub bounce_bytes: usize,
    /// Per-peer send window (shrunk for large jobs so the receive pool stays bounded).
    pub credits: u32,
    /// Number of send bounce buffers.
    pub send_bufs: usize,
    /// Busy for longer than this → [`Event::PeerError`] for the peer.
    pub stall: Duration,
}

impl Default for FabricConfig {
    fn default() -> Self {
        Self {
            bounce_bytes: DEFAULT_BOUNCE_BYTES,
            credits: DEFAULT_CREDITS,
            send_bufs: DEFAULT_SEND_BUFS,
            stall: DEFAULT_STALL,
        }
    }
}

/// Counters for tests and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FabricStats {
    /// Frames dropped because they failed validation or overflowed a buffer.
    pub malformed: u64,
    /// Receive error entries (no peer to attribute them to; the buffer was reposted).
    pub rx_errors: u64,
    /// Explicit credit frames sent.
    pub credit_frames: u64,
    /// Records sent with `fi_inject`.
    pub injects: u64,
    /// Records sent through a send bounce buffer.
    pub bounced: u64,
    /// `try_send` calls answered `Busy`.
    pub busy: u64,
    /// Peers reported failed because their sends stalled.
    pub stalls: u64,
    /// RMA reads posted.
    pub reads: u64,
}

/// A slab of equal bounce buffers that never moves (its address is given to the NIC).
struct Pool {
    _mem: Vec<u8>,
    base: *mut u8,
    slot: usize,
    count: usize,
}

// SAFETY: `base` points into `_mem`, owned by the pool; the transport that owns the pool
// is used by one thread at a time (the engine sits behind a mutex).
unsafe impl Send for Pool {}

impl Pool {
    fn new(count: usize, slot: usize) -> Self {
        let mut mem = vec![0u8; count * slot];
        let base = mem.as_mut_ptr();
        Pool { _mem: mem, base, slot, count }
    }

    fn ptr(&self, i: u32) -> *mut u8 {
        debug_assert!((i as usize) < self.count);
        self.base.wrapping_add(i as usize * self.slot)
    }

    fn len(&self) -> usize {
        self.count * self.slot
    }
}

impl fmt::Debug for Pool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pool").field("slot", &self.slot).field("count", &self.count).finish()
    }
}

/// What an in-flight operation is, by its context.
#[derive(Debug)]
enum Op {
    Send { buf: u32, peer: u32 },
    Recv { buf: u32 },
    Read { op: u64, peer: u32, bounce: Vec<u8>, _mr: Option<MemoryRegion> },
}

/// An exposure as the peer sees it: (address or offset, key, length).
type ExposureKey = (u64, u64, u64);

/// A live exposure: its registration, how many sends share it, and its virtual address.
#[derive(Debug)]
struct Exposure {
    _mr: Arc<MemoryRegion>,
    count: u32,
    va: u64,
}

/// A read the provider did not take, with why.
type Refused = Box<(PendingRead, FiError)>;

/// A read waiting for the provider to accept it. It reads into `bounce`, memory of the
/// transport's own that lives in the operation's slot until the provider reports the
/// read, however long that takes (never, for a peer that hangs): the receive buffer is
/// only written by the engine's copy at `ReadDone`, so a receive failed meanwhile can
/// hand its buffer back at once (R30).
#[derive(Debug)]
struct PendingRead {
    op: u64,
    peer: u32,
    bounce: Vec<u8>,
    remote: RemoteAccess,
    mr: Option<MemoryRegion>,
}

/// The parts of a validated frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Frame {
    kind: u8,
    credits: u16,
    src: u32,
}

fn encode_frame(kind: u8, credits: u16, src: u32) -> [u8; FRAME_BYTES] {
    let c = credits.to_le_bytes();
    let s = src.to_le_bytes();
    [FRAME_MAGIC, kind, c[0], c[1], s[0], s[1], s[2], s[3]]
}

fn decode_frame(b: &[u8], size: u32) -> Option<Frame> {
    if b.len() < FRAME_BYTES || b[0] != FRAME_MAGIC || !matches!(b[1], KIND_DATA | KIND_CREDIT) {
        return None;
    }
    let src = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    if src >= size || (b[1] == KIND_CREDIT && b.len() != FRAME_BYTES) {
        return None;
    }
    Some(Frame { kind: b[1], credits: u16::from_le_bytes([b[2], b[3]]), src })
}

/// Checks the address blobs the ranks published (bytes of other processes) before any
/// reaches `fi_av_insert`: every one must be as long as this endpoint's own name (one
/// provider, one address format), so a short or overlong blob is a clear error naming
/// the rank instead of a provider reading past it.
fn check_peer_addrs<A: AsRef<[u8]>>(addrs: &[Option<A>], own_len: usize) -> Result<(), TransportError> {
    let len = |a: &Option<A>| a.as_ref().map(|a| a.as_ref().len());
    match addrs.iter().position(|a| len(a).is_some_and(|l| l != own_len)) {
        None => Ok(()),
        Some(r) => Err(TransportError::Local(format!(
            "fabric address of rank {r} is {} bytes, this provider's are {own_len}",
            len(&addrs[r]).unwrap_or(0)
        ))),
    }
}

/// The libfabric transport endpoint of one rank.
pub struct FabricTransport {
    // Field order is drop order: the endpoint (and everything bound to it) closes before
    // the bounce pools the provider may still write into are freed.
    ep: Arc<Endpoint>,
    cq: Arc<CompletionQueue>,
    av: Arc<AddressVector>,
    domain: Arc<Domain>,
    ops: OpSlab<Op>,
    cache: MrCache,
    exposed: HashMap<ExposureKey, Exposure>,
    pending_reads: VecDeque<PendingRead>,
    /// Spare bounce buffers of finished reads (at most `BOUNCE_KEEP`), so reads in steady
    /// state allocate nothing.
    bounce_pool: Vec<Vec<u8>>,
    send_mr: Option<MemoryRegion>,
    recv_mr: Option<MemoryRegion>,
    sel: Selection,
    cfg: FabricConfig,
    me: Rank,
    size: u32,
    addrs: Vec<FiAddr>,
    credits: Vec<u32>,
    owed: Vec<u32>,
    /// Peers owed enough credits to deserve an explicit credit frame.
    credit_due: Vec<u32>,
    window: u32,
    send_free: Vec<u32>,
    /// Receive buffers to repost, with the peer that is owed a credit once they are.
    repost: Vec<(u32, Option<u32>)>,
    stall: StallTracker<u32>,
    waiting: Vec<bool>,
    events: Vec<CqEvent>,
    inject_max: usize,
    invalidate_on_unexpose: bool,
    stats: FabricStats,
    send_pool: Pool,
    recv_pool: Pool,
}

impl fmt::Debug for FabricTransport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FabricTransport")
            .field("me", &self.me)
            .field("provider", &self.sel.provider)
            .field("domain", &self.sel.domain)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

fn local<E: fmt::Display>(what: &'static str) -> impl FnOnce(E) -> TransportError {
    move |e| TransportError::Local(format!("{what}: {e}"))
}

impl FabricTransport {
    /// Opens the provider chosen by `request` (with `hints`' node/domain pins) for rank
    /// `me` of `size`: fabric, domain, AV, CQ, one RDM endpoint, the bounce pools, and posts
    /// every receive buffer. Peers are added with [`FabricTransport::connect`].
    ///
    /// # Errors
    /// [`TransportError::Local`] when no provider fits or a libfabric call fails.
    pub fn open(
        request: ProviderRequest,
        hints: &Hints,
        me: Rank,
        size: u32,
        cfg: FabricConfig,
    ) -> Result<Self, TransportError> {
        if me.0 >= size {
            return Err(TransportError::Local(format!("rank {me} outside a job of {size}")));
        }
        let (info, sel) = open_selected(request, hints).map_err(local("provider"))?;
        let n = size as usize;
        let data_window = cfg.credits.min((MAX_RECV_BUFS / n).saturating_sub(2) as u32).max(2);
        let window = data_window + CONTROL_RESERVE;
        let nrecv = n * (window as usize + 2);
        let bounce = cfg.bounce_bytes.max(FRAME_BYTES + 64);
        let domain = Domain::open_info(info).map_err(local("fi_domain"))?;
        let av = AddressVector::open(&domain, n).map_err(local("fi_av_open"))?;
        let cq = CompletionQueue::open(&domain, (nrecv + cfg.send_bufs + 64).max(1024)).map_err(local("fi_cq_open"))?;
        let ep = Endpoint::open(&domain, &av, &cq).map_err(local("fi_endpoint"))?;
        let send_pool = Pool::new(cfg.send_bufs.max(1), bounce);
        let recv_pool = Pool::new(nrecv, bounce);
        let (send_mr, recv_mr) = if sel.mr.local_desc {
            // SAFETY: the pools live in this transport and are freed only after the
            // registrations (field order), which close before the endpoint's memory goes.
            let s =
                unsafe { MemoryRegion::register(&domain, Some(&ep), send_pool.base, send_pool.len(), Access::SEND) }
                    .map_err(local("register send pool"))?;
            // SAFETY: as above.
            let r =
                unsafe { MemoryRegion::register(&domain, Some(&ep), recv_pool.base, recv_pool.len(), Access::RECV) }
                    .map_err(local("register receive pool"))?;
            (Some(s), Some(r))
        } else {
            (None, None)
        };
        let cache = MrCache::new(&domain, Some(&ep), Access::REMOTE_READ | Access::SEND, MR_CACHE_ENTRIES);
        // Software providers read registered memory through its virtual address at use
        // time, so a cached registration of since-freed memory is harmless; NIC providers
        // pin pages, so their registrations are dropped when the send ends.
        let invalidate_on_unexpose = !matches!(sel.provider, Provider::Tcp | Provider::Sockets);
        let inject_max = sel.inject_bytes.min(INJECT_STACK_BYTES);
        let mut t = FabricTransport {
            ep,
            cq,
            av,
            domain,
            ops: OpSlab::new(),
            cache,
            exposed: HashMap::new(),
            pending_reads: VecDeque::new(),
            bounce_pool: Vec::new(),
            send_mr,
            recv_mr,
            sel,
            cfg,
            me,
            size,
            addrs: Vec::new(),
            credits: vec![window; n],
            owed: vec![0; n],
            credit_due: Vec::new(),
            window,
            send_free: (0..send_pool.count as u32).rev().collect(),
            repost: Vec::new(),
            stall: StallTracker::new(cfg.stall),
            waiting: vec![false; n],
            events: Vec::with_capacity(64),
            inject_max,
            invalidate_on_unexpose,
            stats: FabricStats::default(),
            send_pool,
            recv_pool,
        };
        for buf in 0..t.recv_pool.count as u32 {
            t.post_recv(buf, None).map_err(local("posting receive buffers"))?;
        }
        tracing::debug!(
            provider = %t.sel.provider, domain = %t.sel.domain, window, recv_bufs = nrecv,
            send_bufs = t.send_pool.count, bounce, "fabric transport open"
        );
        Ok(t)
    }

    /// This endpoint's address, to publish to the other ranks.
    ///
    /// # Errors
    /// [`TransportError::Local`] if `fi_getname` fails.
    pub fn address(&self) -> Result<Vec<u8>, TransportError> {
        self.ep.name().map(|a| a.0).map_err(local("fi_getname"))
    }

    /// Inserts every rank's address (indexed by world rank, this rank's own included) into
    /// the address vector.
    ///
    /// # Errors
    /// [`TransportError::Local`] for a wrong count or an address the AV refuses.
    pub fn connect(&mut self, addrs: &[Vec<u8>]) -> Result<(), TransportError> {
        let known: Vec<Option<&[u8]>> = addrs.iter().map(|a| Some(a.as_slice())).collect();
        self.connect_known(&known)
    }

    /// Like [`FabricTransport::connect`], where the address of some ranks is unknown
    /// (`None`: ranks that failed during start-up before publishing one, R31). Nothing is
    /// ever sent to them: a send returns a peer error.
    pub fn connect_known(&mut self, addrs: &[Option<&[u8]>]) -> Result<(), TransportError> {
        if addrs.len() != self.size as usize {
            return Err(TransportError::Local(format!("{} addresses for {} ranks", addrs.len(), self.size)));
        }
        check_peer_addrs(addrs, self.ep.name().map_err(local("fi_getname"))?.0.len())?;
        let mut out = Vec::with_capacity(addrs.len());
        for a in addrs {
            out.push(match a {
                Some(a) => self.av.insert(&EpAddr(a.to_vec())).map_err(local("fi_av_insert"))?,
                None => FiAddr::UNSPEC,
            });
        }
        self.addrs = out;
        Ok(())
    }

    /// The provider's selection (name, domain, mr_mode, sizes).
    pub fn selection(&self) -> &Selection {
        &self.sel
    }

    /// One line for `Runtime::describe`.
    pub fn describe(&self) -> String {
        format!(
            "libfabric {} on domain {} (mr_mode {:?}, inject {} B, {} x {} B send / {} recv bounce buffers, {}+{} credits per peer)",
            self.sel.provider,
            self.sel.domain,
            self.sel.mr_mode,
            self.sel.inject_bytes,
            self.send_pool.count,
            self.send_pool.slot,
            self.recv_pool.count,
            self.window - CONTROL_RESERVE,
            CONTROL_RESERVE
        )
    }

    /// The tunables this transport was opened with.
    pub fn config(&self) -> FabricConfig {
        self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> FabricStats {
        self.stats
    }

    /// The per-peer send window for user data in force (control records get
    /// [`CONTROL_RESERVE`] more).
    pub fn window(&self) -> u32 {
        self.window - CONTROL_RESERVE
    }

    /// Whether `region` is one of this transport's exposures (for routing `unexpose`).
    pub fn owns(&self, region: &RemoteRegion) -> bool {
        self.exposed.contains_key(&(region.addr, region.key, region.len))
    }

    /// Sends `bytes` to `peer` as they are, without a transport frame. Only for tests of
    /// the receiver's frame validation.
    #[doc(hidden)]
    pub fn send_unframed(&mut self, peer: Rank, bytes: &[u8]) -> Result<(), TransportError> {
        let addr = self.addr_of(peer)?;
        if bytes.len() > self.send_pool.slot {
            return Err(TransportError::TooLarge { len: bytes.len(), max: self.send_pool.slot });
        }
        let buf = self.send_free.pop().ok_or(TransportError::Busy)?;
        let ptr = self.send_pool.ptr(buf);
        // SAFETY: the slot is free (taken from the free list) and `bytes` fits in it.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, bytes.len()) };
        self.post_send(buf, bytes.len(), peer.0, addr)
    }

    fn addr_of(&self, peer: Rank) -> Result<FiAddr, TransportError> {
        match self.addrs.get(peer.0 as usize).copied() {
            None => Err(TransportError::Local(format!("no address for rank {peer}"))),
            Some(FiAddr::UNSPEC) => {
                Err(TransportError::Peer { peer, cause: "it failed during start-up (no address)".to_string() })
            }
            Some(a) => Ok(a),
        }
    }

    fn post_error(peer: Rank, e: &FiError) -> TransportError {
        if e.is_peer_failure() {
            TransportError::Peer { peer, cause: e.to_string() }
        } else {
            TransportError::Local(e.to_string())
        }
    }

    fn busy(&mut self, peer: u32) {
        self.stats.busy += 1;
        if peer != self.me.0 && !self.waiting[peer as usize] {
            self.waiting[peer as usize] = true;
            self.stall.handle_busy(peer, Instant::now());
        }
    }

    fn progressed(&mut self, peer: u32) {
        if let Some(w) = self.waiting.get_mut(peer as usize) {
            if *w {
                *w = false;
                self.stall.handle_progress(peer);
            }
        }
    }

    /// Posts send buffer `buf` holding `len` bytes to `addr`; the buffer is returned to the
    /// free list on failure.
    fn post_send(&mut self, buf: u32, len: usize, peer: u32, addr: FiAddr) -> Result<(), TransportError> {
        let ptr = self.send_pool.ptr(buf);
        let ctx = self.ops.insert(addr, Op::Send { buf, peer });
        let desc = self.send_mr.as_ref().map(MemoryRegion::desc);
        // SAFETY: the slot stays reserved (off the free list) until the completion of this
        // send is read, and the pool outlives the endpoint.
        let ret = unsafe { self.ep.send(std::slice::from_raw_parts(ptr, len), desc, addr, ctx) };
        match ret {
            Ok(()) => {
                self.stats.bounced += 1;
                Ok(())
            }
            Err(e) => {
                self.ops.cancel(ctx);
                self.send_free.push(buf);
                match e {
                    FiError::Busy => Err(TransportError::Busy),
                    e => Err(Self::post_error(Rank(peer), &e)),
                }
            }
        }
    }

    /// Posts receive buffer `buf`; on `Busy` it is queued for the next poll. `owes` is the
    /// peer whose record the buffer held: it is owed a credit once the buffer is posted.
    fn post_recv(&mut self, buf: u32, owes: Option<u32>) -> Result<(), FiError> {
        let ptr = self.recv_pool.ptr(buf);
        let ctx = self.ops.insert(FiAddr::UNSPEC, Op::Recv { buf });
        let desc: Option<MrDesc> = self.recv_mr.as_ref().map(MemoryRegion::desc);
        // SAFETY: the slot belongs to no one else until this receive completes (it was
        // just handed back by the engine or never posted), and the pool outlives the
        // endpoint.
        let ret = unsafe {
            self.ep.recv(std::slice::from_raw_parts_mut(ptr, self.recv_pool.slot), desc, FiAddr::UNSPEC, ctx)
        };
        match ret {
            Ok(()) => {
                if let Some(p) = owes {
                    self.owe(p);
                }
                Ok(())
            }
            Err(FiError::Busy) => {
                self.ops.cancel(ctx);
                self.repost.push((buf, owes));
                Ok(())
            }
            Err(e) => {
                self.ops.cancel(ctx);
                self.repost.push((buf, owes));
                Err(e)
            }
        }
    }

    fn owe(&mut self, peer: u32) {
        let o = &mut self.owed[peer as usize];
        *o += 1;
        if *o == (self.window / 2).max(1) {
            self.credit_due.push(peer);
        }
    }

    /// Sends explicit credit frames to peers owed at least half a window.
    fn return_credits(&mut self) {
        let threshold = (self.window / 2).max(1);
        let mut i = 0;
        while i < self.credit_due.len() {
            let p = self.credit_due[i];
            let owed = self.owed[p as usize];
            if owed < threshold {
                self.credit_due.swap_remove(i);
                continue;
            }
            let give = owed.min(u32::from(u16::MAX)) as u16;
            let frame = encode_frame(KIND_CREDIT, give, self.me.0);
            let Some(&addr) = self.addrs.get(p as usize).filter(|a| **a != FiAddr::UNSPEC) else {
                self.credit_due.swap_remove(i);
                continue;
            };
            match self.send_small(&frame, p, addr) {
                Ok(()) => {
                    self.owed[p as usize] -= u32::from(give);
                    self.stats.credit_frames += 1;
                    self.credit_due.swap_remove(i);
                }
                // Busy: retried at the next poll. A dead peer needs no credits.
                Err(TransportError::Busy) => i += 1,
                Err(_) => {
                    self.credit_due.swap_remove(i);
                }
            }
        }
    }

    /// Sends a small control frame: inject if it fits, else a send buffer.
    fn send_small(&mut self, bytes: &[u8], peer: u32, addr: FiAddr) -> Result<(), TransportError> {
        if bytes.len() <= self.inject_max {
            return self.ep.inject(bytes, addr).map_err(|e| match e {
                FiError::Busy => TransportError::Busy,
                e => Self::post_error(Rank(peer), &e),
            });
        }
        let buf = self.send_free.pop().ok_or(TransportError::Busy)?;
        // SAFETY: the slot was just taken off the free list; `bytes` is a frame, smaller
        // than any slot.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.send_pool.ptr(buf), bytes.len()) };
        self.post_send(buf, bytes.len(), peer, addr)
    }

    /// A bounce buffer of `len` bytes for a read (from the spares when one is big enough).
    fn bounce(&mut self, len: usize) -> Vec<u8> {
        let mut v = match self.bounce_pool.iter().position(|b| b.capacity() >= len) {
            Some(i) => self.bounce_pool.swap_remove(i),
            None => Vec::with_capacity(len),
        };
        // A spare keeps its length: reusing one of the same size writes nothing.
        if v.len() >= len {
            v.truncate(len);
        } else {
            v.resize(len, 0);
        }
        v
    }

    /// Keeps a finished read's bounce buffer for reuse.
    fn recycle_bounce(&mut self, v: Vec<u8>) {
        let kept: usize = self.bounce_pool.iter().map(Vec::capacity).sum();
        if self.bounce_pool.len() < BOUNCE_KEEP && v.capacity() > 0 && kept + v.capacity() <= BOUNCE_KEEP_BYTES {
            self.bounce_pool.push(v);
        }
    }

    fn post_read(&mut self, r: PendingRead) -> Result<(), Refused> {
        let Some(&addr) = self.addrs.get(r.peer as usize).filter(|a| **a != FiAddr::UNSPEC) else {
            return Err(Box::new((r, FiError::InvalidArg("no address for the peer"))));
        };
        let desc = r.mr.as_ref().map(MemoryRegion::desc);
        let PendingRead { op, peer, mut bounce, remote, mr } = r;
        let (ptr, len) = (bounce.as_mut_ptr(), bounce.len());
        // The vector moves into the slot; its heap block (what the provider writes) does not.
        let ctx = self.ops.insert(addr, Op::Read { op, peer, bounce, _mr: mr });
        // SAFETY: `ptr`/`len` are the bounce vector's heap block, owned by the operation's
        // slot, which keeps it (never resized, never dropped) until the provider reports the
        // read or the slot is cancelled below after the provider refused it.
        let ret = unsafe { self.ep.read(std::slice::from_raw_parts_mut(ptr, len), desc, addr, remote, ctx) };
        match ret {
            Ok(()) => {
                self.stats.reads += 1;
                Ok(())
            }
            Err(e) => match self.ops.cancel(ctx) {
                Some((_, Op::Read { bounce, _mr, .. })) => {
                    Err(Box::new((PendingRead { op, peer, bounce, remote, mr: _mr }, e)))
                }
                _ => Err(Box::new((PendingRead { op, peer, bounce: Vec::new(), remote, mr: None }, e))),
            },
        }
    }

    /// Retries deferred work: receive reposts, refused reads, credit returns. Reports a
    /// read that can no longer be posted as a peer error.
    fn retry_deferred<F: FnMut(Event<'_>)>(&mut self, f: &mut F) -> usize {
        let mut handed = 0;
        if !self.repost.is_empty() {
            let pending = std::mem::take(&mut self.repost);
            for (buf, owes) in pending {
                if let Err(e) = self.post_recv(buf, owes) {
                    tracing::warn!(error = %e, "reposting a receive buffer failed");
                }
            }
        }
        while let Some(r) = self.pending_reads.pop_front() {
            match self.post_read(r).map_err(|b| *b) {
                Ok(()) => {}
                Err((r, FiError::Busy)) => {
                    self.pending_reads.push_front(r);
                    break;
                }
                Err((r, e)) => {
                    f(Event::PeerError { peer: Rank(r.peer), cause: format!("posting an rma read: {e}") });
                    handed += 1;
                }
            }
        }
        if !self.credit_due.is_empty() {
            self.return_credits();
        }
        handed
    }

    fn on_recv<F: FnMut(Event<'_>)>(&mut self, buf: u32, len: usize, f: &mut F) -> usize {
        let len = len.min(self.recv_pool.slot);
        // SAFETY: the receive into this slot completed, so the provider no longer writes it;
        // it is reposted only after the borrow below ends.
        let bytes = unsafe { std::slice::from_raw_parts(self.recv_pool.ptr(buf), len) };
        let mut handed = 0;
        let mut owes = None;
        match decode_frame(bytes, self.size) {
            None => {
                self.stats.malformed += 1;
                tracing::warn!(len, "dropping a malformed fabric frame");
            }
            Some(fr) => {
                if fr.credits > 0 {
                    let c = &mut self.credits[fr.src as usize];
                    *c = (*c + u32::from(fr.credits)).min(self.window);
                    self.progressed(fr.src);
                }
                if fr.kind == KIND_DATA {
                    f(Event::Received { peer: Rank(fr.src), bytes: &bytes[FRAME_BYTES..] });
                    handed = 1;
                    owes = Some(fr.src);
                }
            }
        }
        if let Err(e) = self.post_recv(buf, owes) {
            tracing::warn!(error = %e, "reposting a receive buffer failed");
        }
        handed
    }
}

impl Transport for FabricTransport {
    fn caps(&self) -> Caps {
        Caps {
            max_record: self.send_pool.slot - FRAME_BYTES,
            rma_read: true,
            max_message: self.sel.max_msg_bytes as u64,
        }
    }

    #[inline]
    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        let addr = self.addr_of(peer)?;
        let p = peer.0 as usize;
        let len = FRAME_BYTES + header.len() + payload.len();
        if len > self.send_pool.slot {
            return Err(TransportError::TooLarge { len: len - FRAME_BYTES, max: self.send_pool.slot - FRAME_BYTES });
        }
        let floor = if crate::wire::is_control(header) { 0 } else { CONTROL_RESERVE };
        if self.credits[p] <= floor {
            self.busy(peer.0);
            return Err(TransportError::Busy);
        }
        let give = self.owed[p].min(u32::from(u16::MAX)) as u16;
        let frame = encode_frame(KIND_DATA, give, self.me.0);
        if len <= self.inject_max {
            let mut tmp = [0u8; INJECT_STACK_BYTES];
            tmp[..FRAME_BYTES].copy_from_slice(&frame);
            tmp[FRAME_BYTES..FRAME_BYTES + header.len()].copy_from_slice(header);
            tmp[FRAME_BYTES + header.len()..len].copy_from_slice(payload);
            match self.ep.inject(&tmp[..len], addr) {
                Ok(()) => self.stats.injects += 1,
                Err(FiError::Busy) => {
                    self.busy(peer.0);
                    return Err(TransportError::Busy);
                }
                Err(e) => return Err(Self::post_error(peer, &e)),
            }
        } else {
            let Some(buf) = self.send_free.pop() else {
                self.busy(peer.0);
                return Err(TransportError::Busy);
            };
            let ptr = self.send_pool.ptr(buf);
            // SAFETY: the slot was just taken off the free list and `len` fits in it.
            unsafe {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), ptr, FRAME_BYTES);
                std::ptr::copy_nonoverlapping(header.as_ptr(), ptr.add(FRAME_BYTES), header.len());
                std::ptr::copy_nonoverlapping(payload.as_ptr(), ptr.add(FRAME_BYTES + header.len()), payload.len());
            }
            match self.post_send(buf, len, peer.0, addr) {
                Ok(()) => {}
                Err(TransportError::Busy) => {
                    self.busy(peer.0);
                    return Err(TransportError::Busy);
                }
                Err(e) => return Err(e),
            }
        }
        self.credits[p] -= 1;
        self.owed[p] -= u32::from(give);
        self.progressed(peer.0);
        Ok(Posted::Done)
    }

    fn expose(&mut self, _peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError> {
        if len == 0 {
            return Ok(RemoteRegion { addr, len: 0, key: NO_KEY });
        }
        let ptr = addr as *const u8;
        // SAFETY: the engine exposes the buffer of a pending send, alive until the send
        // completes and `unexpose` runs. A cached registration may outlive that: it is
        // dropped at `unexpose` for NIC providers (pinned pages); software providers (tcp,
        // sockets) only read through it while a later exposure of live memory uses it.
        let got = unsafe { self.cache.get(ptr, len) }.and_then(|mr| mr.remote_access(ptr, len).map(|ra| (mr, ra)));
        match got {
            Ok((mr, ra)) => {
                let region = RemoteRegion { addr: ra.addr, len: ra.len, key: ra.key.0 };
                self.exposed
                    .entry((region.addr, region.key, region.len))
                    .or_insert(Exposure { _mr: mr, count: 0, va: addr })
                    .count += 1;
                Ok(region)
            }
            Err(e) => {
                // The receiver sees NO_KEY, cannot pull, and asks for a stream.
                tracing::debug!(error = %e, len, "registration for rendezvous failed; peer will stream");
                Ok(RemoteRegion { addr, len: len as u64, key: NO_KEY })
            }
        }
    }

    fn unexpose(&mut self, region: RemoteRegion) {
        let k = (region.addr, region.key, region.len);
        let Some(entry) = self.exposed.get_mut(&k) else { return };
        entry.count -= 1;
        if entry.count == 0 {
            if let Some(gone) = self.exposed.remove(&k) {
                if self.invalidate_on_unexpose {
                    self.cache.invalidate(gone.va as *const u8, region.len as usize);
                }
            }
        }
    }

    fn rma_read(
        &mut self,
        peer: Rank,
        remote: RemoteRegion,
        local: &mut [u8],
        op: OpId,
    ) -> Result<Posted, TransportError> {
        if local.is_empty() {
            return Ok(Posted::Done);
        }
        if remote.key == NO_KEY || local.len() > self.sel.max_msg_bytes || local.len() as u64 > remote.len {
            return Err(TransportError::RmaUnavailable);
        }
        self.addr_of(peer)?;
        let mut bounce = self.bounce(local.len());
        let mr = if self.sel.mr.local_desc {
            // SAFETY: the bounce vector travels with the registration (pending read, then
            // the operation's slot) and outlives it: the slot drops the registration first
            // (field order of `Op::Read` is irrelevant: the provider is done with both).
            let m = unsafe {
                MemoryRegion::register(&self.domain, Some(&self.ep), bounce.as_mut_ptr(), bounce.len(), Access::READ)
            };
            match m {
                Ok(m) => Some(m),
                Err(_) => {
                    self.recycle_bounce(bounce);
                    return Err(TransportError::RmaUnavailable);
                }
            }
        } else {
            None
        };
        let r = PendingRead {
            op: op.0,
            peer: peer.0,
            bounce,
            remote: RemoteAccess { addr: remote.addr, key: RemoteKey(remote.key), len: remote.len },
            mr,
        };
        if !self.pending_reads.is_empty() {
            self.pending_reads.push_back(r);
            return Ok(Posted::InFlight(op));
        }
        match self.post_read(r).map_err(|b| *b) {
            Ok(()) => Ok(Posted::InFlight(op)),
            Err((r, FiError::Busy)) => {
                self.pending_reads.push_back(r);
                Ok(Posted::InFlight(op))
            }
            Err((_, e)) => Err(Self::post_error(peer, &e)),
        }
    }

    fn is_idle(&self) -> bool {
        self.send_free.len() == self.send_pool.count && self.pending_reads.is_empty()
    }

    fn async_reads(&self, _peer: Rank) -> bool {
        true
    }

    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, mut f: F) -> usize {
        let mut handed = self.retry_deferred(&mut f);
        let mut events = std::mem::take(&mut self.events);
        events.clear();
        if let Err(e) = self.cq.read(&mut events, budget.max(1)) {
            self.stats.rx_errors += 1;
            tracing::warn!(error = %e, "fi_cq_read failed");
        }
        for mut ev in events.drain(..) {
            let Some((_, op)) = self.ops.complete(&mut ev) else {
                tracing::warn!(ctx = ev.context().0, "completion for no known operation");
                continue;
            };
            match (op, ev) {
                (Op::Recv { buf }, CqEvent::Done(d)) => handed += self.on_recv(buf, d.len, &mut f),
                (Op::Recv { buf }, CqEvent::Failed(e)) => {
                    if e.err == ErrorCode::ECANCELED {
                        continue;
                    }
                    if e.err == ErrorCode::ETRUNC {
                        self.stats.malformed += 1;
                    } else {
                        self.stats.rx_errors += 1;
                    }
                    tracing::warn!(error = %e, "receive error entry (no peer to attribute); reposting");
                    if let Err(e) = self.post_recv(buf, None) {
                        tracing::warn!(error = %e, "reposting a receive buffer failed");
                    }
                }
                (Op::Send { buf, peer }, CqEvent::Done(_)) => {
                    self.send_free.push(buf);
                    self.progressed(peer);
                }
                (Op::Send { buf, peer }, CqEvent::Failed(e)) => {
                    self.send_free.push(buf);
                    f(Event::PeerError { peer: Rank(peer), cause: e.to_string() });
                    handed += 1;
                }
                (Op::Read { op, bounce, .. }, CqEvent::Done(_)) => {
                    f(Event::ReadDone { op: OpId(op), data: &bounce });
                    self.recycle_bounce(bounce);
                    handed += 1;
                }
                (Op::Read { peer, bounce, .. }, CqEvent::Failed(e)) => {
                    self.recycle_bounce(bounce);
                    f(Event::PeerError { peer: Rank(peer), cause: e.to_string() });
                    handed += 1;
                }
            }
        }
        self.events = events;
        if self.stall.poll_timeout().is_some_and(|t| Instant::now() >= t) {
            while let Some(s) = self.stall.poll_stall(Instant::now()) {
                self.stats.stalls += 1;
                f(Event::PeerError {
                    peer: Rank(s.peer),
                    cause: format!("sends stalled for {:?} (no credits, buffers or provider resources)", s.waited),
                });
                handed += 1;
            }
        }
        handed
    }
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_garbage() {
        let f = encode_frame(KIND_DATA, 7, 3);
        assert_eq!(decode_frame(&f, 4), Some(Frame { kind: KIND_DATA, credits: 7, src: 3 }));
        let mut rec = f.to_vec();
        rec.extend_from_slice(b"payload");
        assert_eq!(decode_frame(&rec, 4).map(|x| x.src), Some(3));
        // Rank out of range, short, bad magic, bad kind, credit frame with a tail.
        assert_eq!(decode_frame(&f, 3), None);
        assert_eq!(decode_frame(&f[..7], 4), None);
        let mut bad = f;
        bad[0] = 0;
        assert_eq!(decode_frame(&bad, 4), None);
        bad = f;
        bad[1] = 9;
        assert_eq!(decode_frame(&bad, 4), None);
        let mut c = encode_frame(KIND_CREDIT, 8, 1).to_vec();
        assert!(decode_frame(&c, 2).is_some());
        c.push(0);
        assert_eq!(decode_frame(&c, 2), None);
    }
}
