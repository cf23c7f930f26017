//! Routing per peer: shared memory to ranks on this host, libfabric to the others
//! (docs/ARCHITECTURE.md §2).
//!
//! [`MultiTransport`] holds at most one [`ShmTransport`] and one [`FabricTransport`] and a
//! route per world rank, fixed at start-up ([`Route`]). `--transport fabric` is simply a
//! route table with every peer on the fabric (bring-up then uses the fabric transport
//! alone); `--transport shm` one with every peer on shared memory.
//!
//! Ordering: each (sender, receiver) pair uses exactly one transport for its whole life, so
//! the pair's records never race across two transports; within a transport, the engine's
//! per-peer sequence numbers restore send order of matched messages (non-overtaking), and
//! protocol records (CTS, FIN, data) carry the ids they refer to. Capabilities are the
//! most restrictive of the two for record sizes; RMA-read is declared if either transport
//! has it, and a peer whose transport cannot pull answers `RmaUnavailable` (the engine then
//! streams for that peer).

use super::fabric::FabricTransport;
use super::shm::ShmTransport;
use super::{Caps, Event, Posted, Transport, TransportError};
use crate::types::{OpId, Rank, RemoteRegion};

/// Which transport carries the traffic to one peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Shared memory (same host).
    Shm,
    /// libfabric (another host, or forced).
    Fabric,
}

/// A transport routing each peer to shared memory or libfabric.
#[derive(Debug)]
pub struct MultiTransport {
    shm: Option<ShmTransport>,
    fabric: Option<FabricTransport>,
    route: Vec<Route>,
    caps: Caps,
    fabric_first: bool,
}

impl MultiTransport {
    /// Combines the transports with one route per world rank.
    ///
    /// # Errors
    /// [`TransportError::Local`] if a route names a transport that is absent.
    pub fn new(
        shm: Option<ShmTransport>,
        fabric: Option<FabricTransport>,
        route: Vec<Route>,
    ) -> Result<Self, TransportError> {
        for (r, how) in route.iter().enumerate() {
            let present = match how {
                Route::Shm => shm.is_some(),
                Route::Fabric => fabric.is_some(),
            };
            if !present {
                return Err(TransportError::Local(format!("rank {r} routed to an absent {how:?} transport")));
            }
        }
        let caps = [shm.as_ref().map(Transport::caps), fabric.as_ref().map(Transport::caps)]
            .into_iter()
            .flatten()
            .reduce(|a, b| Caps {
                max_record: a.max_record.min(b.max_record),
                rma_read: a.rma_read || b.rma_read,
                max_message: a.max_message.min(b.max_message),
            })
            .ok_or_else(|| TransportError::Local("no transport".into()))?;
        Ok(Self { shm, fabric, route, caps, fabric_first: false })
    }

    /// The route of `peer`.
    pub fn route(&self, peer: Rank) -> Option<Route> {
        self.route.get(peer.0 as usize).copied()
    }

    /// The shared-memory transport, if any.
    pub fn shm(&self) -> Option<&ShmTransport> {
        self.shm.as_ref()
    }

    /// The fabric transport, if any.
    pub fn fabric(&self) -> Option<&FabricTransport> {
        self.fabric.as_ref()
    }

    #[inline]
    fn pick(&mut self, peer: Rank) -> Result<&mut dyn RouteTo, TransportError> {
        match (self.route.get(peer.0 as usize), &mut self.shm, &mut self.fabric) {
            (Some(Route::Shm), Some(s), _) => Ok(s),
            (Some(Route::Fabric), _, Some(f)) => Ok(f),
            _ => Err(TransportError::Local(format!("no route to rank {peer}"))),
        }
    }
}

/// The object-safe part of [`Transport`] used for per-peer dispatch.
trait RouteTo {
    fn send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError>;
    fn expose_to(&mut self, peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError>;
    fn read(&mut self, peer: Rank, remote: RemoteRegion, local: &mut [u8], op: OpId) -> Result<Posted, TransportError>;
}

impl<T: Transport> RouteTo for T {
    #[inline]
    fn send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        self.try_send(peer, header, payload)
    }
    fn expose_to(&mut self, peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError> {
        self.expose(peer, addr, len)
    }
    fn read(&mut self, peer: Rank, remote: RemoteRegion, local: &mut [u8], op: OpId) -> Result<Posted, TransportError> {
        self.rma_read(peer, remote, local, op)
    }
}

impl Transport for MultiTransport {
    fn caps(&self) -> Caps {
        self.caps
    }

    #[inline]
    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        self.pick(peer)?.send(peer, header, payload)
    }

    fn expose(&mut self, peer: Rank, addr: u64, len: usize) -> Result<RemoteRegion, TransportError> {
        self.pick(peer)?.expose_to(peer, addr, len)
    }

    fn unexpose(&mut self, region: RemoteRegion) {
        match &mut self.fabric {
            Some(f) if f.owns(&region) => f.unexpose(region),
            _ => {
                if let Some(s) = &mut self.shm {
                    s.unexpose(region);
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
        self.pick(peer)?.read(peer, remote, local, op)
    }

    fn async_reads(&self, peer: Rank) -> bool {
        matches!(self.route.get(peer.0 as usize), Some(Route::Fabric))
    }

    fn is_idle(&self) -> bool {
        self.shm.as_ref().is_none_or(|s| s.is_idle()) && self.fabric.as_ref().is_none_or(|t| t.is_idle())
    }

    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, mut f: F) -> usize {
        // Alternate which transport goes first so neither starves the other's budget.
        self.fabric_first = !self.fabric_first;
        let mut n = 0;
        for turn in 0..2 {
            let fabric = (turn == 0) == self.fabric_first;
            let left = budget.saturating_sub(n);
            if left == 0 {
                break;
            }
            n += match (fabric, &mut self.shm, &mut self.fabric) {
                (false, Some(s), _) => s.poll(left, &mut f),
                (true, _, Some(t)) => t.poll(left, &mut f),
                _ => 0,
            };
        }
        n
    }
}
