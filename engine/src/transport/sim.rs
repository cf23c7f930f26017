//! An in-process transport for tests: engines of
//! one test share a [`SimHub`]; records queue per (sender, receiver) with a bounded
//! capacity so `Busy` and back-pressure are exercised, and there is no RMA, so large
//! messages take the streamed rendezvous path.

use std::collections::VecDeque;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{Caps, Event, Posted, Transport, TransportError};
use crate::types::{OpId, Rank, RemoteRegion};

#[derive(Debug)]
struct HubState {
    /// `queues[to][from]`: records in flight from `from` to `to`.
    queues: Vec<Vec<VecDeque<Vec<u8>>>>,
    capacity: usize,
    dead: Vec<bool>,
}

/// The shared medium of a simulated job.
#[derive(Debug, Clone)]
pub struct SimHub {
    state: Arc<Mutex<HubState>>,
    max_record: usize,
}

impl SimHub {
    /// A hub for `n` ranks; each (sender, receiver) queue holds at most `capacity`
    /// records and each record at most `max_record` bytes.
    pub fn new(n: u32, capacity: usize, max_record: usize) -> Self {
        let n = n as usize;
        let queues = (0..n).map(|_| (0..n).map(|_| VecDeque::new()).collect()).collect();
        Self { state: Arc::new(Mutex::new(HubState { queues, capacity, dead: vec![false; n] })), max_record }
    }

    /// The transport endpoint of rank `me`.
    pub fn endpoint(&self, me: Rank) -> SimTransport {
        SimTransport { hub: self.clone(), me, scratch: Vec::new(), next_peer: 0 }
    }

    /// Kills `rank`: its queued inbound records vanish and sends to it fail.
    pub fn kill(&self, rank: Rank) {
        let mut s = self.state.lock();
        s.dead[rank.0 as usize] = true;
        for q in &mut s.queues[rank.0 as usize] {
            q.clear();
        }
    }
}

/// One rank's endpoint on a [`SimHub`].
#[derive(Debug)]
pub struct SimTransport {
    hub: SimHub,
    me: Rank,
    scratch: Vec<u8>,
    next_peer: usize,
}

impl Transport for SimTransport {
    fn caps(&self) -> Caps {
        Caps { max_record: self.hub.max_record, rma_read: false, max_message: u64::MAX }
    }

    fn try_send(&mut self, peer: Rank, header: &[u8], payload: &[u8]) -> Result<Posted, TransportError> {
        let len = header.len() + payload.len();
        if len > self.hub.max_record {
            return Err(TransportError::TooLarge { len, max: self.hub.max_record });
        }
        let mut s = self.hub.state.lock();
        if s.dead[peer.0 as usize] {
            return Err(TransportError::Peer { peer, cause: "simulated peer is dead".into() });
        }
        let cap = s.capacity;
        let q = &mut s.queues[peer.0 as usize][self.me.0 as usize];
        if q.len() >= cap {
            return Err(TransportError::Busy);
        }
        let mut rec = Vec::with_capacity(len);
        rec.extend_from_slice(header);
        rec.extend_from_slice(payload);
        q.push_back(rec);
        Ok(Posted::Done)
    }

    fn rma_read(
        &mut self,
        _peer: Rank,
        _remote: RemoteRegion,
        _local: &mut [u8],
        _op: OpId,
    ) -> Result<Posted, TransportError> {
        Err(TransportError::RmaUnavailable)
    }

    fn poll<F: FnMut(Event<'_>)>(&mut self, budget: usize, mut f: F) -> usize {
        let mut handed = 0;
        let n = self.hub.state.lock().queues.len();
        for i in 0..n {
            let from = (self.next_peer + i) % n;
            while handed < budget {
                let rec = {
                    let mut s = self.hub.state.lock();
                    if s.dead[from] {
                        break;
                    }
                    match s.queues[self.me.0 as usize][from].pop_front() {
                        Some(r) => r,
                        None => break,
                    }
                };
                self.scratch = rec;
                f(Event::Received { peer: Rank(from as u32), bytes: &self.scratch });
                handed += 1;
            }
        }
        self.next_peer = (self.next_peer + 1) % n.max(1);
        handed
    }
}
