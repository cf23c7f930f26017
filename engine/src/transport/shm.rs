//! Adapter: the engine's [`Transport`] over `runthrough-shm` rings and CMA (T2).
//!
//! One ring per ordered pair of ranks (self included); a record is written in place in
//! the receiver's ring and handed to the engine as a borrowed slice, so an eager payload
//! is copied exactly twice (user buffer → ring → user buffer). Rendezvous pulls use
//! `process_vm_readv` (one copy); when the kernel forbids CMA the engine streams instead.

use runthrough_shm::ring::PushError;
use runthrough_shm::{cma, Error as ShmError, RingRx, RingTx, Segment};

use super::{Caps, Event, Posted, Transport, TransportError};
use crate::types::{OpId, Rank, RemoteRegion};

/// Shared-memory transport endpoint of one rank.
#[derive(Debug)]
pub struct ShmTransport {
    tx: Vec<RingTx>,
    rx: Vec<RingRx>,
    /// Ring from each peer that stopped being readable (corrupt record): never read again.
    broken: Vec<bool>,
    pids: Vec<i32>,
    cma: bool,
    max_record: usize,
    next: usize,
}

impl ShmTransport {
    /// The endpoint of rank `me` in `seg`, given every rank's process id (for CMA).
    pub fn new(seg: &Segment, me: Rank, pids: Vec<i32>) -> Result<Self, ShmError> {
        let n = seg.layout().nranks;
        let mut tx = Vec::with_capacity(n as usize);
        let mut rx = Vec::with_capacity(n as usize);
        for peer in 0..n {
            tx.push(seg.ring_tx(me.0, peer)?);
            rx.push(seg.ring_rx(peer, me.0)?);
        }
        let max_record = tx.first().map_or(0, RingTx::max_record);
        Ok(Self { tx, rx, broken: vec![false; n as usize], pids, cma: !cma::disabled_by_env(), max_record, next: 0 })
    }
}

impl ShmTransport {
    /// The process id of `peer`, when single-copy access to its memory (CMA) is on.
    pub fn cma_pid(&self, peer: Rank) -> Option<i32> {
        self.cma.then(|| self.pids.get(peer.0 as usize).copied()).flatten().filter(|&p| p > 0)
    }
}

impl Transport for ShmTransport {
    fn caps(&self) -> Caps {
        Caps { max_record: self.max_record, rma_read: self.cma, max_message: isize::MAX as u64 }
    }

    #[inline]
    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        let Some(tx) = self.tx.get_mut(peer.0 as usize) else {
            return Err(TransportError::Local(format!("no ring to rank {peer}")));
        };
        match tx.try_push(header, payload) {
            Ok(()) => Ok(Posted::Done),
            Err(PushError::Full) => Err(TransportError::Busy),
            Err(PushError::TooLarge { len, max }) => Err(TransportError::TooLarge { len, max }),
            Err(PushError::Corrupt) => Err(TransportError::Peer { peer, cause: "ring cursor corrupt".into() }),
        }
    }

    fn rma_read(
        &mut self,
        peer: Rank,
        remote: RemoteRegion,
        local: &mut [u8],
        _op: OpId,
    ) -> Result<Posted, TransportError> {
        if !self.cma {
            return Err(TransportError::RmaUnavailable);
        }
        let Some(&pid) = self.pids.get(peer.0 as usize) else {
            return Err(TransportError::Local(format!("no pid for rank {peer}")));
        };
        match cma::read(pid, remote.addr, local) {
            Ok(()) => Ok(Posted::Done),
            Err(ShmError::CmaDenied) => {
                self.cma = false;
                Err(TransportError::RmaUnavailable)
            }
            Err(e) if e.is_peer_fault() => Err(TransportError::Peer { peer, cause: e.to_string() }),
            Err(e) => Err(TransportError::Local(e.to_string())),
        }
    }

    #[inline]
    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, mut f: F) -> usize {
        let n = self.rx.len();
        let mut handed = 0;
        // Round robin from `next`, without a division per peer (this loop is the idle
        // poll of every blocking wait).
        let mut peer = self.next;
        for _ in 0..n {
            let this = peer;
            peer = if peer + 1 >= n { 0 } else { peer + 1 };
            if self.broken[this] {
                continue;
            }
            let peer = this;
            let rx = &mut self.rx[peer];
            while handed < budget {
                match rx.peek() {
                    None => break,
                    Some(Ok(bytes)) => {
                        f(Event::Received { peer: Rank(peer as u32), bytes });
                        rx.pop();
                        handed += 1;
                    }
                    Some(Err(e)) => {
                        self.broken[peer] = true;
                        f(Event::PeerError { peer: Rank(peer as u32), cause: e.to_string() });
                        handed += 1;
                        break;
                    }
                }
            }
        }
        self.next = if self.next + 1 >= n { 0 } else { self.next + 1 };
        handed
    }
}
