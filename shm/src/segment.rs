//! The per-job shared-memory segment: one POSIX shm object per node holding every ring.
//!
//! Parts: [`Layout`] (rank count and ring size: everything the geometry derives from),
//! [`Segment`] (create / open / unlink, ring handles, NUMA placement of a rank's inbound
//! region), [`Departures`] (the per-rank "finalized" marks read by
//! [`crate::liveness::PeerWatch`]), [`default_name`], and the private mapping owner
//! (`munmap` on last drop).
//!
//! # Format (version [`VERSION`])
//!
//! ```text
//! offset 0            header (one page): magic, version, nranks, ring_bytes, bulk_bytes,
//!                     creator pid, total size, rings offset, region stride, ring stride,
//!                     ready flag, departure bitmap (MAX_RANKS bits: bit r set = rank r
//!                     finalized)
//! rings_offset        inbound region of rank 0: ring (0→0), ring (1→0), ..., ring (n-1→0)
//! + region_stride     inbound region of rank 1: ring (0→1), ...
//! ...
//! coll_offset         collective area (rings_offset + n × region_stride): per rank,
//!                     COLL_SLOTS slots of entered word, vote word, ready lines and data buffers
//!                     (see crate::collarea; absent above COLL_MAX_RANKS ranks)
//! bulk_offset         bulk buffers (page-aligned, after the collective area): per rank,
//!                     BULK_SLOTS buffers of bulk_bytes (none when bulk_bytes is 0)
//! ```
//!
//! One ring per ordered pair `(from, to)`, self-sends included; each ring is
//! [`crate::ring`]'s control blocks followed by `ring_bytes` of 64-byte cells. The
//! rings a rank receives on are contiguous and the region is page-aligned, so the receiver
//! can bind it to its NUMA node ([`Segment::place_inbound`]). The segment contains offsets
//! only, never pointers. The creator writes the header last and then sets `ready`
//! (`Release`); openers wait for it with a bounded back-off and validate everything: a
//! foreign, truncated or garbage object is an error, never undefined behaviour.
//!
//! The object is created `O_EXCL` with mode 0600 and backed with `posix_fallocate`, so a
//! full `/dev/shm` is reported at creation (ENOSPC) instead of as SIGBUS later.
//! Cleanup of crashed jobs is by name: [`Segment::unlink`] is idempotent. The design
//! follows libfabric `smr` regions and UCX `mm` segments.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::mapping::Mapping;
use crate::numa::{Placement, Topology};
use crate::ring::{self, Claim, Owner, RingRx, RingTx};
use crate::Error;

/// Segment format version; bumped on any layout change.
pub const VERSION: u32 = 4;
/// Largest rank count a segment accepts.
pub const MAX_RANKS: u32 = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"RTSHMSEG");
const READY: u32 = 0x5244_5952; // "RYDR"
/// Largest segment accepted (1 TiB): a sanity bound on the layout.
pub const MAX_SEGMENT_BYTES: usize = 1 << 40;
/// Longest accepted segment name, leading slash included.
pub const MAX_NAME: usize = 255;
/// `MADV_POPULATE_WRITE` (Linux 5.14), not yet in every `libc` release.
const MADV_POPULATE_WRITE: libc::c_int = 23;

/// Everything the segment geometry is derived from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layout {
    /// Number of ranks on the node (1..=[`MAX_RANKS`]).
    pub nranks: u32,
    /// Bytes of cells per ring: a power of two in 4096..=2^30.
    pub ring_bytes: u32,
    /// Bytes of each bulk buffer of the collective area (see [`crate::collarea`]): a
    /// multiple of 4096 up to 2^30, or 0 for none.
    pub bulk_bytes: u32,
}

/// The header at offset 0. All fields atomic: it is read while another process may still
/// be writing it.
#[repr(C)]
struct Header {
    magic: AtomicU64,
    version: AtomicU32,
    nranks: AtomicU32,
    ring_bytes: AtomicU32,
    bulk_bytes: AtomicU32,
    creator_pid: AtomicI32,
    total_size: AtomicU64,
    rings_offset: AtomicU64,
    region_stride: AtomicU64,
    ring_stride: AtomicU64,
    ready: AtomicU32,
    /// Bit `r` set: rank `r` finalized (it exits next; its exit is a departure, not a
    /// failure). Zero at creation (a fresh shm object reads as zeros).
    departed: [AtomicU64; DEPARTED_WORDS],
}

/// Words of the departure bitmap: one bit per possible rank.
const DEPARTED_WORDS: usize = MAX_RANKS as usize / 64;

/// Offsets derived from a [`Layout`] and the page size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Geometry {
    rings_offset: usize,
    region_stride: usize,
    ring_stride: usize,
    /// Start of the collective area ([`crate::collarea`]; empty above
    /// [`crate::collarea::COLL_MAX_RANKS`] ranks), right after the rings.
    coll_offset: usize,
    /// Start of the bulk buffers (right after the collective area).
    bulk_offset: usize,
    total: usize,
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p >= 4096).unwrap_or(4096)
}

impl Layout {
    fn geometry(self) -> Result<Geometry, Error> {
        if self.nranks == 0 || self.nranks > MAX_RANKS {
            return Err(Error::InvalidArgument("nranks must be in 1..=4096"));
        }
        ring::check_ring_bytes(self.ring_bytes)?;
        let page = page_size();
        let n = self.nranks as usize;
        let ring_stride = ring::ring_stride(self.ring_bytes);
        let too_big = Error::InvalidArgument("segment would be too large");
        let region_stride = ring_stride.checked_mul(n).and_then(|b| b.checked_next_multiple_of(page)).ok_or(too_big)?;
        let rings_offset = page.max(std::mem::size_of::<Header>().next_multiple_of(page));
        let coll_offset = region_stride
            .checked_mul(n)
            .and_then(|b| b.checked_add(rings_offset))
            .ok_or(Error::InvalidArgument("segment would be too large"))?;
        crate::collarea::check_bulk_bytes(self.bulk_bytes)?;
        let bulk_offset = coll_offset
            .checked_add(crate::collarea::area_bytes(self.nranks).next_multiple_of(page))
            .ok_or(Error::InvalidArgument("segment would be too large"))?;
        let total = crate::collarea::bulk_area_bytes(self.nranks, self.bulk_bytes)
            .and_then(|b| b.checked_add(bulk_offset))
            .filter(|&t| t <= MAX_SEGMENT_BYTES && libc::off_t::try_from(t).is_ok())
            .ok_or(Error::InvalidArgument("segment would be too large"))?;
        Ok(Geometry { rings_offset, region_stride, ring_stride, coll_offset, bulk_offset, total })
    }

    /// Total bytes of a segment with this layout (what `/dev/shm` must hold).
    pub fn segment_bytes(self) -> Result<usize, Error> {
        Ok(self.geometry()?.total)
    }
}

/// The segment's header at the start of `map`.
trait HeaderOf {
    fn header(&self) -> &Header;
}

impl HeaderOf for Mapping {
    fn header(&self) -> &Header {
        debug_assert!(self.len >= std::mem::size_of::<Header>());
        // SAFETY: every mapping made here is at least one page (checked by the callers
        // before mapping), page-aligned, and Header holds only atomics.
        unsafe { &*(self.ptr as *const Header) }
    }
}

/// The default segment name for a job: `"/rt-{jobid}"`, with characters outside
/// `[A-Za-z0-9._-]` replaced by `_` and the result cut to [`MAX_NAME`] bytes.
pub fn default_name(jobid: &str) -> String {
    let mut name = String::from("/rt-");
    name.extend(jobid.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '_' }));
    name.truncate(MAX_NAME);
    name
}

fn c_name(name: &str) -> Result<CString, Error> {
    let rest = name.strip_prefix('/').ok_or(Error::InvalidArgument("shm name must start with '/'"))?;
    if rest.is_empty()
        || name.len() > MAX_NAME
        || rest == "."
        || rest == ".."
        || !rest.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(Error::InvalidArgument("shm name must be '/' then 1..=254 characters of [A-Za-z0-9._-]"));
    }
    CString::new(name).map_err(|_| Error::InvalidArgument("shm name contains NUL"))
}

fn shm_open(name: &CString, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string.
    let fd = unsafe { libc::shm_open(name.as_ptr(), flags | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by shm_open and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn file_size(fd: &OwnedFd) -> Result<usize, Error> {
    // SAFETY: an all-zero `stat` is a valid value; fstat fills it.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid fd and a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::last_os("fstat"));
    }
    Ok(usize::try_from(st.st_size).unwrap_or(0))
}

/// Removes `name`, logging (not failing) on error: used on creation failure paths.
fn unlink_quietly(name: &CString) {
    // SAFETY: valid NUL-terminated string.
    if unsafe { libc::shm_unlink(name.as_ptr()) } != 0 {
        tracing::warn!(err = %io::Error::last_os_error(), "shm_unlink after failed create");
    }
}

/// Binds `len` bytes at `ptr` (page-aligned) to NUMA node `node` (`mbind(MPOL_BIND,
/// MPOL_MF_MOVE)`): the shared policy of the shm object's pages.
fn mbind(ptr: *mut u8, len: usize, node: u32) -> io::Result<()> {
    const MPOL_BIND: libc::c_long = 2;
    const MPOL_MF_MOVE: libc::c_long = 1 << 1;
    const WORDS: usize = 16;
    const BITS: usize = WORDS * libc::c_ulong::BITS as usize;
    let node = node as usize;
    if node >= BITS {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "NUMA node index too large"));
    }
    let mut mask = [0 as libc::c_ulong; WORDS];
    mask[node / libc::c_ulong::BITS as usize] |= 1 << (node % libc::c_ulong::BITS as usize);
    // SAFETY: ptr/len describe (part of) our own live mapping; `mask` outlives the call and
    // holds BITS bits (maxnode is passed as BITS + 1, the kernel's convention).
    let r = unsafe { libc::syscall(libc::SYS_mbind, ptr, len, MPOL_BIND, mask.as_ptr(), BITS + 1, MPOL_MF_MOVE) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Allocates the pages of `[ptr, ptr + len)` without changing their contents.
fn prefault(ptr: *mut u8, len: usize) {
    // SAFETY: page-aligned range inside our live mapping; MADV_POPULATE_WRITE only
    // faults pages in (it never changes data).
    if unsafe { libc::madvise(ptr.cast(), len, MADV_POPULATE_WRITE) } == 0 {
        return;
    }
    tracing::debug!(
        err = %io::Error::last_os_error(),
        "MADV_POPULATE_WRITE unavailable; touching pages one by one"
    );
    let page = page_size();
    for off in (0..len).step_by(page) {
        // SAFETY: `ptr + off` is page-aligned inside the mapping; an atomic add of zero
        // is a write access that preserves the value even if a peer writes concurrently.
        unsafe { AtomicU64::from_ptr(ptr.add(off).cast()) }.fetch_add(0, Ordering::Relaxed);
    }
}

/// A mapped per-job segment. Dropping it does not unlink the name (see
/// [`Segment::unlink`]) and does not invalidate ring handles taken from it.
#[derive(Debug)]
pub struct Segment {
    map: Arc<Mapping>,
    name: String,
    layout: Layout,
    geo: Geometry,
}

impl Segment {
    /// Creates the segment `name` (`O_CREAT | O_EXCL`, mode 0600) for `layout`, maps it and
    /// marks it ready. Fails with `Error::Io { op: "shm_open", .. }` of kind
    /// `AlreadyExists` if the name is taken (e.g. by a crashed job: unlink it first).
    pub fn create(name: &str, layout: Layout) -> Result<Segment, Error> {
        let cname = c_name(name)?;
        let geo = layout.geometry()?;
        let fd = shm_open(&cname, libc::O_CREAT | libc::O_EXCL | libc::O_RDWR)
            .map_err(|source| Error::Io { op: "shm_open", source })?;
        let map = Segment::init(&fd, layout, geo).inspect_err(|_| unlink_quietly(&cname))?;
        tracing::debug!(name, ?layout, bytes = geo.total, "shm segment created");
        Ok(Segment { map: Arc::new(map), name: name.to_owned(), layout, geo })
    }

    fn init(fd: &OwnedFd, layout: Layout, geo: Geometry) -> Result<Mapping, Error> {
        // The umask may have cleared bits of 0600; make the mode exact.
        // SAFETY: valid fd.
        if unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) } != 0 {
            return Err(Error::last_os("fchmod"));
        }
        let total = geo.total as libc::off_t; // checked in geometry()
                                              // SAFETY: valid fd.
        if unsafe { libc::ftruncate(fd.as_raw_fd(), total) } != 0 {
            return Err(Error::last_os("ftruncate"));
        }
        // Reserve the memory now: ENOSPC here beats SIGBUS on first touch.
        // SAFETY: valid fd.
        match unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, total) } {
            0 => {}
            libc::EOPNOTSUPP | libc::EINVAL => {
                tracing::debug!("posix_fallocate unsupported on shm; memory not reserved");
            }
            e => return Err(Error::Io { op: "posix_fallocate", source: io::Error::from_raw_os_error(e) }),
        }
        let map = Mapping::map(fd, geo.total, libc::PROT_READ | libc::PROT_WRITE, Segment::claims(layout))?;
        let h = map.header();
        h.magic.store(MAGIC, Ordering::Relaxed);
        h.version.store(VERSION, Ordering::Relaxed);
        h.nranks.store(layout.nranks, Ordering::Relaxed);
        h.ring_bytes.store(layout.ring_bytes, Ordering::Relaxed);
        h.bulk_bytes.store(layout.bulk_bytes, Ordering::Relaxed);
        h.creator_pid.store(std::process::id() as i32, Ordering::Relaxed);
        h.total_size.store(geo.total as u64, Ordering::Relaxed);
        h.rings_offset.store(geo.rings_offset as u64, Ordering::Relaxed);
        h.region_stride.store(geo.region_stride as u64, Ordering::Relaxed);
        h.ring_stride.store(geo.ring_stride as u64, Ordering::Relaxed);
        h.ready.store(READY, Ordering::Release);
        Ok(map)
    }

    fn claims(layout: Layout) -> usize {
        2 * layout.nranks as usize * layout.nranks as usize
    }

    /// Opens the existing segment `name`, waiting up to `timeout` (with a sleeping
    /// back-off) for it to be created and marked ready, and validates its header.
    ///
    /// Errors: `Timeout` if it never appears or becomes ready; `BadSegment` if it is
    /// smaller than a header or not a runthrough segment, or its geometry is inconsistent;
    /// `Version` for another format version.
    pub fn open(name: &str, timeout: Duration) -> Result<Segment, Error> {
        let cname = c_name(name)?;
        let deadline = Instant::now() + timeout;
        let mut backoff = Duration::from_millis(1);
        let pause = |backoff: &mut Duration| {
            let left = deadline.saturating_duration_since(Instant::now());
            std::thread::sleep((*backoff).min(left));
            *backoff = (*backoff * 2).min(Duration::from_millis(50));
        };
        let fd = loop {
            match shm_open(&cname, libc::O_RDWR) {
                Ok(fd) => break fd,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if Instant::now() >= deadline {
                        return Err(Error::Timeout("shm segment to be created"));
                    }
                    pause(&mut backoff);
                }
                Err(source) => return Err(Error::Io { op: "shm_open", source }),
            }
        };
        let page = page_size();
        let (layout, stored) = loop {
            let size = file_size(&fd)?;
            if size >= page {
                let head = Mapping::map(&fd, page, libc::PROT_READ, 0)?;
                let h = head.header();
                if h.ready.load(Ordering::Acquire) == READY {
                    break Segment::read_header(h)?;
                }
                let magic = h.magic.load(Ordering::Relaxed);
                if magic != 0 && magic != MAGIC {
                    return Err(Error::BadSegment("not a runthrough segment (magic)"));
                }
            }
            if Instant::now() >= deadline {
                return Err(if size < page {
                    Error::BadSegment("segment smaller than its header")
                } else {
                    Error::Timeout("shm segment to become ready")
                });
            }
            pause(&mut backoff);
        };
        let geo = Segment::check_stored(layout, stored, file_size(&fd)?)?;
        let map = Mapping::map(&fd, geo.total, libc::PROT_READ | libc::PROT_WRITE, Segment::claims(layout))?;
        tracing::debug!(name, ?layout, "shm segment opened");
        Ok(Segment { map: Arc::new(map), name: name.to_owned(), layout, geo })
    }

    /// Validates magic and version of a ready header and reads its layout and geometry.
    fn read_header(h: &Header) -> Result<(Layout, Geometry), Error> {
        if h.magic.load(Ordering::Relaxed) != MAGIC {
            return Err(Error::BadSegment("not a runthrough segment (magic)"));
        }
        let found = h.version.load(Ordering::Relaxed);
        if found != VERSION {
            return Err(Error::Version { found, expected: VERSION });
        }
        let layout = Layout {
            nranks: h.nranks.load(Ordering::Relaxed),
            ring_bytes: h.ring_bytes.load(Ordering::Relaxed),
            bulk_bytes: h.bulk_bytes.load(Ordering::Relaxed),
        };
        let field = |a: &AtomicU64| usize::try_from(a.load(Ordering::Relaxed)).unwrap_or(0);
        let (rings_offset, region_stride) = (field(&h.rings_offset), field(&h.region_stride));
        let coll_offset = region_stride.saturating_mul(layout.nranks as usize).saturating_add(rings_offset);
        let area = crate::collarea::area_bytes(layout.nranks).next_multiple_of(page_size());
        let geo = Geometry {
            rings_offset,
            region_stride,
            ring_stride: field(&h.ring_stride),
            coll_offset,
            bulk_offset: coll_offset.saturating_add(area),
            total: field(&h.total_size),
        };
        Ok((layout, geo))
    }

    /// Checks a ready header's layout and stored geometry against each other and the
    /// object's `size`: every offset `open` maps and later uses derives from a layout
    /// that passed [`Layout`]'s own bounds, and lies inside the object.
    fn check_stored(layout: Layout, stored: Geometry, size: usize) -> Result<Geometry, Error> {
        let geo = layout.geometry().map_err(|_| Error::BadSegment("header layout out of range"))?;
        if geo != stored {
            return Err(Error::BadSegment("header geometry inconsistent"));
        }
        if size < geo.total {
            return Err(Error::BadSegment("segment smaller than its layout"));
        }
        Ok(geo)
    }

    /// Removes the name `name`. Idempotent: a missing name is not an error. Mappings (and
    /// ring handles) stay valid until dropped.
    pub fn unlink(name: &str) -> Result<(), Error> {
        let cname = c_name(name)?;
        // SAFETY: valid NUL-terminated string.
        if unsafe { libc::shm_unlink(cname.as_ptr()) } != 0 {
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::NotFound {
                return Err(Error::Io { op: "shm_unlink", source: e });
            }
        }
        Ok(())
    }

    /// The layout this segment was created with.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The segment's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Pid of the process that created the segment.
    pub fn creator_pid(&self) -> i32 {
        self.map.header().creator_pid.load(Ordering::Relaxed)
    }

    fn check_rank(&self, rank: u32) -> Result<(), Error> {
        if rank >= self.layout.nranks {
            return Err(Error::RankOutOfRange { rank, nranks: self.layout.nranks });
        }
        Ok(())
    }

    /// Pointer to ring `(from, to)` and its index (ranks already checked).
    fn ring_base(&self, from: u32, to: u32) -> (*mut u8, usize) {
        let off = self.geo.rings_offset + to as usize * self.geo.region_stride + from as usize * self.geo.ring_stride;
        debug_assert!(off + self.geo.ring_stride <= self.map.len);
        // SAFETY: geometry was validated against the mapping length; `off` is in bounds.
        let base = unsafe { self.map.ptr.add(off) };
        (base, to as usize * self.layout.nranks as usize + from as usize)
    }

    /// The producer end of the ring from `from` to `to` (used by rank `from`). Only one
    /// producer handle per ring may exist in a process at a time (a second call fails
    /// until the first handle is dropped); by convention only rank `from` takes it.
    pub fn ring_tx(&self, from: u32, to: u32) -> Result<RingTx, Error> {
        self.check_rank(from)?;
        self.check_rank(to)?;
        let (base, ring) = self.ring_base(from, to);
        let claim = Claim::take(&self.map.claims, 2 * ring)
            .ok_or(Error::InvalidArgument("ring producer handle already taken"))?;
        let owner: Owner = self.map.clone();
        // SAFETY: `base` is a CTL_ALIGN-aligned (page + multiples of the ring stride)
        // ring of `ring_stride` bytes inside the mapping, which `owner` keeps alive; the
        // claim makes this the process's only producer of the ring.
        unsafe { RingTx::from_raw(base, self.layout.ring_bytes, owner, Some(claim)) }
    }

    /// The consumer end of the ring from `from` to `to` (used by rank `to`). Only one
    /// consumer handle per ring may exist in a process at a time.
    pub fn ring_rx(&self, from: u32, to: u32) -> Result<RingRx, Error> {
        self.check_rank(from)?;
        self.check_rank(to)?;
        let (base, ring) = self.ring_base(from, to);
        let claim = Claim::take(&self.map.claims, 2 * ring + 1)
            .ok_or(Error::InvalidArgument("ring consumer handle already taken"))?;
        let owner: Owner = self.map.clone();
        // SAFETY: as in ring_tx, for the consumer side.
        unsafe { RingRx::from_raw(base, self.layout.ring_bytes, owner, Some(claim)) }
    }

    /// The collective area (per-rank slots of sequence words and small data buffers for
    /// shared-memory collectives), or `None` when the segment has more than
    /// [`crate::collarea::COLL_MAX_RANKS`] ranks.
    pub fn coll_area(&self) -> Option<crate::collarea::CollArea> {
        if crate::collarea::area_bytes(self.layout.nranks) == 0 {
            return None;
        }
        debug_assert!(self.geo.coll_offset + crate::collarea::area_bytes(self.layout.nranks) <= self.map.len);
        let bulk = (self.geo.bulk_offset, self.layout.bulk_bytes as usize);
        Some(crate::collarea::CollArea::new(self.map.clone(), self.geo.coll_offset, self.layout.nranks, bulk))
    }

    /// The departure marks of this segment's ranks (a handle that keeps the mapping).
    pub fn departures(&self) -> Departures {
        Departures { map: self.map.clone(), nranks: self.layout.nranks }
    }

    /// Binds the inbound region of rank `me` (the rings it receives on) to the NUMA node of
    /// the calling thread's CPU and prefaults it there, without changing its contents.
    /// Call during init, before traffic, from the (pinned) thread of rank `me`. Never
    /// fails: the result says what was done.
    pub fn place_inbound(&self, me: u32, topo: &Topology) -> Placement {
        if let Err(e) = self.check_rank(me) {
            return Placement::Failed(e.to_string());
        }
        let off = self.geo.rings_offset + me as usize * self.geo.region_stride;
        // SAFETY: the region [off, off + region_stride) lies inside the mapping.
        let ptr = unsafe { self.map.ptr.add(off) };
        let len = self.geo.region_stride;
        let placement = match topo.placement_node() {
            Ok(None) => Placement::SingleNode,
            Ok(Some(node)) => match mbind(ptr, len, node) {
                Ok(()) => Placement::Bound { node },
                Err(e) => Placement::Failed(format!("mbind to node {node}: {e}")),
            },
            Err(reason) => Placement::Failed(reason),
        };
        prefault(ptr, len);
        tracing::debug!(rank = me, bytes = len, %placement, "inbound rings placed");
        placement
    }
}

/// The per-rank "finalized" marks in the segment header: a rank that finalized sets its
/// mark just before it exits, so a peer that sees the process gone (pidfd, see
/// [`crate::liveness`]) can tell a departure from a failure without asking the launcher.
/// Marks are never cleared.
#[derive(Debug, Clone)]
pub struct Departures {
    map: Arc<Mapping>,
    nranks: u32,
}

impl Departures {
    /// Marks `rank` as finalized (`Release`: whatever it wrote before is visible to a peer
    /// that reads the mark).
    pub fn mark(&self, rank: u32) -> Result<(), Error> {
        if rank >= self.nranks {
            return Err(Error::RankOutOfRange { rank, nranks: self.nranks });
        }
        let word = &self.map.header().departed[rank as usize / 64];
        word.fetch_or(1 << (rank % 64), Ordering::Release);
        Ok(())
    }

    /// Whether `rank` marked itself finalized (false for a rank out of range).
    pub fn is_marked(&self, rank: u32) -> bool {
        rank < self.nranks
            && self.map.header().departed[rank as usize / 64].load(Ordering::Acquire) & (1 << (rank % 64)) != 0
    }
}

#[cfg(test)]
mod untrusted;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(default_name("1234.5"), "/rt-1234.5");
        assert_eq!(default_name("a/b c"), "/rt-a_b_c");
        assert_eq!(default_name(&"x".repeat(400)).len(), MAX_NAME);
        assert!(c_name(&default_name(&"x".repeat(400))).is_ok());
        assert!(c_name("noslash").is_err());
        assert!(c_name("/").is_err());
        assert!(c_name("/a/b").is_err());
        assert!(c_name("/..").is_err());
        assert!(c_name("/ok-name_1.2").is_ok());
    }

    #[test]
    fn mbind_and_prefault_keep_contents() {
        let name = default_name(&format!("unit-{}-mbind", std::process::id()));
        let _ = Segment::unlink(&name);
        let seg = Segment::create(&name, Layout { nranks: 2, ring_bytes: 4096, bulk_bytes: 0 }).unwrap();
        Segment::unlink(&name).unwrap();
        let mut tx = seg.ring_tx(1, 1).unwrap();
        tx.try_push(b"kept", &[]).unwrap();
        let off = seg.geo.rings_offset + seg.geo.region_stride;
        // SAFETY: the inbound region of rank 1 is inside the mapping.
        let ptr = unsafe { seg.map.ptr.add(off) };
        // Node 0 exists on every Linux machine: the multi-node code path, exercised here.
        mbind(ptr, seg.geo.region_stride, 0).expect("mbind to node 0");
        assert!(mbind(ptr, seg.geo.region_stride, 100_000).is_err());
        prefault(ptr, seg.geo.region_stride);
        let mut rx = seg.ring_rx(1, 1).unwrap();
        assert_eq!(rx.try_recv(|r| r.to_vec()).unwrap().unwrap(), b"kept");
    }

    #[test]
    fn departure_marks_are_shared_and_checked() {
        let name = default_name(&format!("unit-{}-departed", std::process::id()));
        let _ = Segment::unlink(&name);
        let seg = Segment::create(&name, Layout { nranks: 70, ring_bytes: 4096, bulk_bytes: 0 }).unwrap();
        let other = Segment::open(&name, Duration::from_secs(1)).unwrap();
        Segment::unlink(&name).unwrap();
        let (a, b) = (seg.departures(), other.departures());
        assert!((0..70).all(|r| !b.is_marked(r)), "a new segment has no marks");
        a.mark(3).unwrap();
        a.mark(69).unwrap();
        assert!(b.is_marked(3) && b.is_marked(69) && !b.is_marked(4) && !b.is_marked(68));
        assert!(a.mark(70).is_err());
        assert!(!b.is_marked(70));
        assert!(std::mem::size_of::<Header>() <= 4096, "the header fits its page");
    }

    #[test]
    fn geometry_is_page_aligned_and_checked() {
        let g = Layout { nranks: 3, ring_bytes: 4096, bulk_bytes: 0 }.geometry().unwrap();
        let page = page_size();
        assert_eq!(g.rings_offset % page, 0);
        assert_eq!(g.region_stride % page, 0);
        assert!(g.region_stride >= 3 * g.ring_stride);
        assert_eq!(g.coll_offset, g.rings_offset + 3 * g.region_stride);
        assert_eq!(g.total, g.coll_offset + crate::collarea::area_bytes(3).next_multiple_of(page));
        let big =
            Layout { nranks: crate::collarea::COLL_MAX_RANKS + 1, ring_bytes: 4096, bulk_bytes: 0 }.geometry().unwrap();
        assert_eq!(big.total, big.coll_offset, "no collective area above the limit");
        let b = Layout { nranks: 3, ring_bytes: 4096, bulk_bytes: 8192 }.geometry().unwrap();
        assert_eq!(b.bulk_offset, g.total, "bulk buffers follow the collective area");
        assert_eq!(b.total, b.bulk_offset + 3 * crate::collarea::BULK_SLOTS * 8192);
        assert_eq!(b.bulk_offset % page, 0);
        for bad in [
            Layout { nranks: 2, ring_bytes: 4096, bulk_bytes: 100 },
            Layout { nranks: 2, ring_bytes: 4096, bulk_bytes: (1 << 30) + 4096 },
            Layout { nranks: 0, ring_bytes: 4096, bulk_bytes: 0 },
            Layout { nranks: 5000, ring_bytes: 4096, bulk_bytes: 0 },
            Layout { nranks: 2, ring_bytes: 4000, bulk_bytes: 0 },
            Layout { nranks: 2, ring_bytes: 2048, bulk_bytes: 0 },
            Layout { nranks: 4096, ring_bytes: 1 << 30, bulk_bytes: 0 },
        ] {
            assert!(bad.geometry().is_err(), "{bad:?}");
        }
    }
}
