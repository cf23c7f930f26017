//! The byte-moving interface between the engine and its transports (docs/ARCHITECTURE.md §2).
//!
//! A [`Transport`] knows nothing of MPI: it sends records (a header and a payload) to a
//! peer, lets the engine pull a peer's exposed memory, and hands received records to the
//! engine in place. Its limits are data ([`Caps`]). "Would block" is
//! [`TransportError::Busy`]: the engine parks the work on a per-peer pending queue and
//! retries from `progress()`; a transport never spins inside a call.
//!
//! Adapters: [`shm::ShmTransport`] (shared-memory rings + CMA), [`fabric::FabricTransport`]
//! (libfabric RDM endpoint: bounce buffers, credits, RMA read), [`multi::MultiTransport`]
//! (per-peer routing: shm on this host, fabric to the others) and [`sim::SimTransport`]
//! (in-process, for tests). Dispatch on the hot path is the closed enum [`AnyTransport`].

// The fabric adapter owns pinned bounce pools handed to the NIC; its `unsafe` is confined
// to that module, each use with a `SAFETY` note.
#[allow(unsafe_code)]
pub mod fabric;
pub mod multi;
pub mod shm;
pub mod sim;

use crate::types::{OpId, Rank, RemoteRegion};

/// What a transport can do, as numbers the protocols read instead of assuming.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Largest record (header + payload) `try_send` accepts.
    pub max_record: usize,
    /// Whether `rma_read` can pull a peer's exposed memory.
    pub rma_read: bool,
    /// Largest single message the transport can move (for rendezvous).
    pub max_message: u64,
}

/// Outcome of a successful `try_send` / `rma_read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Posted {
    /// Finished: the data is on its way (or read) and the buffer may be reused.
    Done,
    /// Will complete later with the given id.
    InFlight(OpId),
}

/// Why a transport call did not post.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// No resources now (ring full, no credits): retry later.
    #[error("busy")]
    Busy,
    /// The record exceeds [`Caps::max_record`].
    #[error("record of {len} bytes exceeds the transport limit {max}")]
    TooLarge {
        /// Record size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// RMA/CMA is not available to reach this peer (e.g. ptrace policy forbids CMA).
    #[error("remote memory access unavailable")]
    RmaUnavailable,
    /// The peer is unreachable or gone.
    #[error("peer {peer} unreachable: {cause}")]
    Peer {
        /// The peer.
        peer: Rank,
        /// What the transport saw.
        cause: String,
    },
    /// A local failure of the transport.
    #[error("transport failure: {0}")]
    Local(String),
}

/// Something a transport reports from `poll`.
#[derive(Debug)]
pub enum Event<'a> {
    /// A record arrived from `peer`; the bytes are valid only during the callback.
    Received {
        /// Sender.
        peer: Rank,
        /// The record (header followed by payload).
        bytes: &'a [u8],
    },
    /// An in-flight send finished.
    Sent(OpId),
    /// An in-flight read finished; `data` holds what was read (valid only during the
    /// callback), for the engine to copy into the receive buffer if that still waits.
    ReadDone {
        /// The read.
        op: OpId,
        /// The bytes read.
        data: &'a [u8],
    },
    /// The transport saw `peer` fail (completion-queue error, peer process gone, ...).
    PeerError {
        /// The peer.
        peer: Rank,
        /// What the transport saw.
        cause: String,
    },
}

/// The byte-level transport interface.
pub trait Transport {
    /// Declared limits.
    fn caps(&self) -> Caps;
    /// Sends `header` followed by `payload` to `peer` as one record.
    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError>;
    /// Exposes `len` bytes at `addr` (a pending send's buffer) so `peer` can pull them;
    /// returns what the peer needs (address, key). CMA needs nothing beyond the address.
    fn expose(&mut self, _peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError> {
        Ok(RemoteRegion { addr, len: len as u64, key: 0 })
    }
    /// Withdraws an exposure once the send is over (deregistration, cache release).
    fn unexpose(&mut self, _region: RemoteRegion) {}
    /// Pulls `local.len()` bytes from `peer`'s exposed `remote` memory. `Done` means the
    /// bytes are in `local`; `InFlight` means an `Event::ReadDone { op, data }` follows
    /// with the bytes, and the transport does not keep `local` (an asynchronous read lands
    /// in memory the transport owns: a receive the engine fails meanwhile hands its buffer
    /// back at once, and a read that never completes writes nothing of the user's, R30).
    fn rma_read(
        &mut self,
        peer: Rank,
        remote: RemoteRegion,
        local: &mut [u8],
        op: OpId,
    ) -> Result<Posted, TransportError>;
    /// Whether `rma_read` from `peer` completes later (`InFlight`, a NIC's read) rather
    /// than in the call (CMA): the engine then pipelines a long pull in chunks.
    fn async_reads(&self, _peer: Rank) -> bool {
        false
    }
    /// Hands up to `budget` events to `f`; returns how many were handed.
    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, f: F) -> usize;
    /// Whether nothing this endpoint sent is still in its hands (all send buffers and
    /// reads completed), so the process may exit without losing data it sent.
    fn is_idle(&self) -> bool {
        true
    }
}

/// The closed set of transports (static dispatch on the hot path).
#[derive(Debug)]
pub enum AnyTransport {
    /// Shared memory.
    Shm(shm::ShmTransport),
    /// In-process simulation.
    Sim(sim::SimTransport),
    /// libfabric for every peer.
    Fabric(Box<fabric::FabricTransport>),
    /// Per-peer routing between shared memory and libfabric.
    Multi(Box<multi::MultiTransport>),
}

impl AnyTransport {
    /// Whether `peer` is reached through this node's shared memory (it runs on this
    /// node, in this job's segment). The simulation shares no memory between its ranks.
    pub fn shares_memory_with(&self, peer: Rank) -> bool {
        match self {
            AnyTransport::Shm(_) => true,
            AnyTransport::Sim(_) | AnyTransport::Fabric(_) => false,
            AnyTransport::Multi(t) => t.route(peer) == Some(multi::Route::Shm),
        }
    }

    /// The process id of `peer` when this process may copy to and from its memory with
    /// CMA (a peer on this node, CMA not switched off with `RT_SHM_CMA=0`).
    pub fn cma_pid(&self, peer: Rank) -> Option<i32> {
        match self {
            AnyTransport::Shm(t) => t.cma_pid(peer),
            AnyTransport::Multi(t) if t.route(peer) == Some(multi::Route::Shm) => t.shm()?.cma_pid(peer),
            _ => None,
        }
    }
}

impl Transport for AnyTransport {
    #[inline]
    fn caps(&self) -> Caps {
        match self {
            AnyTransport::Shm(t) => t.caps(),
            AnyTransport::Sim(t) => t.caps(),
            AnyTransport::Fabric(t) => t.caps(),
            AnyTransport::Multi(t) => t.caps(),
        }
    }

    #[inline]
    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        match self {
            AnyTransport::Shm(t) => t.try_send(peer, header, payload),
            AnyTransport::Sim(t) => t.try_send(peer, header, payload),
            AnyTransport::Fabric(t) => t.try_send(peer, header, payload),
            AnyTransport::Multi(t) => t.try_send(peer, header, payload),
        }
    }

    #[inline]
    fn async_reads(&self, peer: Rank) -> bool {
        match self {
            AnyTransport::Shm(t) => t.async_reads(peer),
            AnyTransport::Sim(t) => t.async_reads(peer),
            AnyTransport::Fabric(t) => t.async_reads(peer),
            AnyTransport::Multi(t) => t.async_reads(peer),
        }
    }

    #[inline]
    fn expose(&mut self, peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError> {
        match self {
            AnyTransport::Shm(t) => t.expose(peer, addr, len),
            AnyTransport::Sim(t) => t.expose(peer, addr, len),
            AnyTransport::Fabric(t) => t.expose(peer, addr, len),
            AnyTransport::Multi(t) => t.expose(peer, addr, len),
        }
    }

    #[inline]
    fn unexpose(&mut self, region: RemoteRegion) {
        match self {
            AnyTransport::Shm(t) => t.unexpose(region),
            AnyTransport::Sim(t) => t.unexpose(region),
            AnyTransport::Fabric(t) => t.unexpose(region),
            AnyTransport::Multi(t) => t.unexpose(region),
        }
    }

    #[inline]
    fn rma_read(
        &mut self,
        peer: Rank,
        remote: RemoteRegion,
        local: &mut [u8],
        op: OpId,
    ) -> Result<Posted, TransportError> {
        match self {
            AnyTransport::Shm(t) => t.rma_read(peer, remote, local, op),
            AnyTransport::Sim(t) => t.rma_read(peer, remote, local, op),
            AnyTransport::Fabric(t) => t.rma_read(peer, remote, local, op),
            AnyTransport::Multi(t) => t.rma_read(peer, remote, local, op),
        }
    }

    fn is_idle(&self) -> bool {
        match self {
            AnyTransport::Shm(t) => t.is_idle(),
            AnyTransport::Sim(t) => t.is_idle(),
            AnyTransport::Fabric(t) => t.is_idle(),
            AnyTransport::Multi(t) => t.is_idle(),
        }
    }

    #[inline]
    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, f: F) -> usize {
        match self {
            AnyTransport::Shm(t) => t.poll(budget, f),
            AnyTransport::Sim(t) => t.poll(budget, f),
            AnyTransport::Fabric(t) => t.poll(budget, f),
            AnyTransport::Multi(t) => t.poll(budget, f),
        }
    }
}
