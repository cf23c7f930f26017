//! Window creation (R34): collective over a collectively active communicator, and
//! uniform — every member returns the window or every member errs (each step ends with
//! an agreement of the members).
//!
//! Where the memory lives:
//! - a created window (`win_create`, `win_with_memory`) exposes the memory it was given;
//!   members on this node put and get with single copies between the processes (CMA,
//!   `process_vm_writev`/`readv`), the others — and every accumulate — by records its
//!   engine applies;
//! - an allocated window (`win_allocate`) lives, when another member shares this
//!   process's node (its records travel through the node's shared memory), in one
//!   segment per node (`runthrough_shm::winseg`): each member's part rounded up to 64
//!   bytes, in window-rank order. Every member of the node maps the segment, and the
//!   engine applies operations on those members directly with loads, stores and atomics
//!   (`runthrough_engine::rma::direct`). A member alone on its node allocates privately;
//! - a dynamic window (`win_create_dynamic`) exposes what the program attaches
//!   ([`Window::attach`]), addressed by absolute address; other members reach it by
//!   records;
//! - a shared window (`win_allocate_shared`, MPI-4.1 §12.2.3) needs every member on one
//!   host: one segment, the parts contiguous in rank order (MPI's default), every
//!   member's part reachable with [`Window::shared_query`].
//!
//! When every member is on one node (and there are at most
//! `runthrough_engine::rma::direct::LOCK_MEMBERS`), the segment also holds one lock block
//! per member after the parts, and passive-target locks are a few atomics there
//! ([`Window::lock`]) instead of records to the target.
//!
//! The first member of a node creates the segment (`O_EXCL`, 0600) under its process id
//! and a counter, the others open it once the members agreed it exists, and the creator
//! unlinks the name once the members agreed they all mapped it: no name outlives the
//! creation, the pages go with the last mapping.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use runthrough_engine::rma::direct::{DirectWin, LOCK_BLOCK, LOCK_MEMBERS};
use runthrough_engine::rma::mem::WinMemory;
use runthrough_shm::winseg::{self, WinMap};

use super::{Epochs, Window};
use crate::comm::Comm;
use crate::{Error, Pod};

/// Names this process's segments apart.
static SEGMENTS: AtomicU64 = AtomicU64::new(0);

/// Each part of an allocated window's segment starts at a multiple of this.
const PART_ALIGN: usize = 64;

/// What a new window exposes at this process.
pub(super) enum Backing {
    /// Memory given by the program (a created window).
    Given(WinMemory),
    /// Bytes allocated here, in the node's segment when a member shares the node.
    Allocate(usize),
    /// Bytes in the segment every member maps (all on one host).
    Shared(usize),
    /// No memory until the program attaches some (a dynamic window).
    Dynamic,
}

/// One member's row of the creation exchange.
#[derive(Clone, Copy)]
struct Row {
    bytes: u64,
    unit: u64,
    /// The first window rank on this member's node.
    leader: u64,
    pid: u64,
    counter: u64,
    /// The address of the member's memory (a created window's, for CMA).
    base: u64,
}

const ROW: usize = 6;

/// The shared part of a window at one member: the segment, each node member's
/// `(offset, bytes)` in it, and the direct access to the other members there.
#[derive(Debug)]
pub(super) struct Segment {
    pub(super) map: Arc<WinMap>,
    pub(super) parts: Vec<Option<(usize, usize)>>,
    pub(super) direct: Arc<DirectWin>,
}

/// A hash of this host's name: members with the same one share a host.
fn host_key() -> u64 {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    name.trim().bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

/// Whether every member's `ok` holds (an agreement: the same answer everywhere); errs
/// where a failure is in the way.
fn all_ok(comm: &Comm, ok: bool) -> Result<bool, Error> {
    comm.agree(i32::from(ok)).map(|v| v == 1)
}

impl<T: Pod> Window<T> {
    /// Creates a window on a duplicate of `parent` exposing `backing` with displacement
    /// unit `unit`.
    pub(super) fn create_on(parent: &Comm, backing: Backing, unit: usize) -> Result<Window<T>, Error> {
        let comm = parent.dup()?;
        let dynamic = matches!(backing, Backing::Dynamic);
        let r = Self::build(&comm, backing, unit);
        match r {
            Ok((rows, seg)) => {
                let n = comm.size();
                Ok(Window {
                    comm,
                    bytes: rows.iter().map(|r| r.bytes as usize).collect(),
                    units: rows.iter().map(|r| r.unit as usize).collect(),
                    epochs: Mutex::new(Epochs { touched: vec![false; n], ..Epochs::default() }),
                    seg,
                    dynamic,
                    freed: false,
                    _t: PhantomData,
                })
            }
            Err(e) => {
                comm.inner.shared.engine.lock().win_free(comm.inner.ctx);
                Err(e)
            }
        }
    }

    fn build(comm: &Comm, backing: Backing, unit: usize) -> Result<(Vec<Row>, Option<Segment>), Error> {
        let (n, me) = (comm.size(), comm.rank());
        let eng = &comm.inner.shared.engine;
        let group = comm.inner.group.clone();
        let base = match &backing {
            Backing::Given(m) => m.base() as u64,
            _ => 0,
        };
        let bytes = match &backing {
            Backing::Given(m) => m.len(),
            Backing::Allocate(b) | Backing::Shared(b) => *b,
            Backing::Dynamic => 0,
        };
        let leader = match &backing {
            Backing::Given(_) | Backing::Dynamic => me as u64,
            Backing::Allocate(_) => {
                let e = eng.lock();
                (0..n).find(|&r| r == me || e.shares_node_with(group[r])).unwrap_or(me) as u64
            }
            // Filled in once every member's host is known.
            Backing::Shared(_) => host_key(),
        };
        let counter = SEGMENTS.fetch_add(1, Ordering::Relaxed);
        let mine = [bytes as u64, unit as u64, leader, u64::from(std::process::id()), counter, base];
        let mut all = vec![0u64; ROW * n];
        let got = comm.allgather(&mine, &mut all);
        let mut rows: Vec<Row> = all
            .chunks_exact(ROW)
            .map(|c| Row { bytes: c[0], unit: c[1], leader: c[2], pid: c[3], counter: c[4], base: c[5] })
            .collect();
        if let Backing::Shared(_) = backing {
            // Every member's host key: the leader is the first member with the same one.
            let keys: Vec<u64> = rows.iter().map(|r| r.leader).collect();
            for (r, row) in rows.iter_mut().enumerate() {
                row.leader = keys.iter().position(|&k| k == keys[r]).unwrap_or(r) as u64;
            }
        }
        let node: Vec<usize> = (0..n).filter(|&r| got.is_ok() && rows[r].leader == rows[me].leader).collect();
        let (mem, dynamic) = match backing {
            Backing::Given(mem) => (mem, false),
            Backing::Dynamic => (WinMemory::zeroed(0), true),
            Backing::Allocate(_) => return Self::segment(comm, rows, node, got, false),
            Backing::Shared(_) => return Self::segment(comm, rows, node, got, true),
        };
        let registered = {
            let mut e = eng.lock();
            let ctx = comm.inner.ctx;
            e.win_register(ctx, group, mem).and_then(|()| match dynamic {
                true => e.win_make_dynamic(ctx),
                // Members on this node copy to and from the memory with CMA.
                false if got.is_ok() => {
                    let bases: Vec<(u64, usize)> = rows.iter().map(|r| (r.base, r.bytes as usize)).collect();
                    e.win_reach_by_cma(ctx, &bases)
                }
                false => Ok(()),
            })
        };
        Self::agreed(comm, got.and(registered))?;
        Ok((rows, None))
    }

    /// Ends a step: every member learns whether every member got this far (uniform).
    fn agreed(comm: &Comm, mine: Result<(), Error>) -> Result<(), Error> {
        match (all_ok(comm, mine.is_ok()), mine) {
            (Ok(true), Ok(())) => Ok(()),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(false), Ok(())) => Err(Error::RankFailStop { rank: comm.rank() as u32 }),
        }
    }

    /// Allocates this process's part: in its node's segment when the node holds other
    /// members (or `shared` asks for one), else privately.
    fn segment(
        comm: &Comm,
        rows: Vec<Row>,
        node: Vec<usize>,
        got: Result<(), Error>,
        shared: bool,
    ) -> Result<(Vec<Row>, Option<Segment>), Error> {
        let (n, me) = (comm.size(), comm.rank());
        let eng = &comm.inner.shared.engine;
        let group = comm.inner.group.clone();
        let step = got.and_then(|()| {
            if shared && node.len() != n {
                return Err(Error::Unsupported("shared windows need every member on one host"));
            }
            Ok(())
        });
        if step.is_ok() && node.len() == 1 && !shared {
            let mem = WinMemory::zeroed(rows[me].bytes as usize);
            let registered = eng.lock().win_register(comm.inner.ctx, group, mem);
            Self::agreed(comm, registered)?;
            return Ok((rows, None));
        }
        // The layout, the same at every member of the node.
        let mut parts = vec![None; n];
        let mut total = 0usize;
        for &r in &node {
            let b = rows[r].bytes as usize;
            parts[r] = Some((total, b));
            let next = if shared { Some(b) } else { b.checked_next_multiple_of(PART_ALIGN) };
            total = next.and_then(|b| total.checked_add(b)).ok_or(Error::InvalidArg("window too large"))?;
        }
        // Every member on this node: passive-target locks live in the segment too, one
        // block per member after the parts.
        let locks = (node.len() == n && n <= LOCK_MEMBERS).then(|| total.next_multiple_of(LOCK_BLOCK));
        if let Some(at) = locks {
            total = at.checked_add(LOCK_BLOCK * n).ok_or(Error::InvalidArg("window too large"))?;
        }
        let lead = rows[me].leader as usize;
        let name = winseg::name_of(rows[lead].pid as u32, rows[lead].counter);
        let created = match (&step, lead == me) {
            (Ok(()), true) => Some(WinMap::create(&name, total).map_err(|e| Error::Transport(e.to_string()))),
            _ => None,
        };
        let step = step.and(created.as_ref().map_or(Ok(()), |c| c.as_ref().map(drop).map_err(Clone::clone)));
        if let Err(e) = Self::agreed(comm, step) {
            if created.as_ref().is_some_and(Result::is_ok) {
                WinMap::unlink(&name);
            }
            return Err(e);
        }
        let map = match created {
            Some(c) => c,
            None => WinMap::open(&name, total).map_err(|e| Error::Transport(e.to_string())),
        };
        let mapped = map.and_then(|map| {
            let (off, b) = parts[me].unwrap_or((0, 0));
            let mem = WinMemory::mapped(map.clone(), off, b).ok_or(Error::InvalidArg("part outside the segment"))?;
            let mut e = eng.lock();
            // The others on the node, reached directly (this process's own part is `mem`).
            let others: Vec<Option<(usize, usize)>> =
                parts.iter().enumerate().map(|(r, p)| p.filter(|_| r != me)).collect();
            let direct = DirectWin::new(map.clone(), me as u32, &others, locks, group.clone(), e.failed_set())
                .ok_or(Error::InvalidArg("part outside the segment"))?;
            let direct = Arc::new(direct);
            e.win_register(comm.inner.ctx, group, mem)?;
            e.win_share(comm.inner.ctx, direct.clone())?;
            Ok(Segment { map, parts, direct })
        });
        let r = Self::agreed(comm, mapped.as_ref().map(drop).map_err(Clone::clone));
        if lead == me {
            WinMap::unlink(&name);
        }
        r?;
        Ok((rows, Some(mapped?)))
    }
}
