//! Rendezvous: the receiver's side of long messages. A matched RTS becomes a pull
//! (CMA on shared memory, RMA reads in chunks on a fabric) or, where the receiver
//! cannot pull, a CTS that asks the sender to stream; FIN ends either. [`PullChoice`]
//! measures both ways on shared memory when `Config::cma_choose` is on and keeps the
//! faster per message size.

use std::collections::HashMap;
use std::time::Instant;

use super::{Engine, Outgoing, State};
use crate::error::Error;
use crate::request::{Kind, RecvPhase, Request, SendPhase, Status};
use crate::transport::{AnyTransport, Posted, Transport, TransportError};
use crate::types::{OpId, Rank, RemoteRegion, ReqId};
use crate::wire::Header;

/// The receiver's rendezvous work: pulls to run, reads in flight, and what the protocol choice measured.
#[derive(Debug)]
pub(super) struct Rendezvous {
    /// Matched rendezvous waiting for their pull, oldest first.
    pub(super) pulls: Vec<Pull>,
    /// Asynchronous reads in flight, by operation id (never reused): which receive and
    /// where in its buffer the read's bytes go.
    pub(super) reads: HashMap<u64, ChunkRead>,
    /// The next read's operation id.
    pub(super) next_read: u64,
    /// What [`super::Config::cma_choose`] measured so far, per size ([`choice_bucket`]).
    pub(super) choice: [PullChoice; CHOICE_BUCKETS],
}

impl Rendezvous {
    pub(super) fn new() -> Self {
        Self { pulls: Vec::new(), reads: HashMap::new(), next_read: 0, choice: [PullChoice::default(); CHOICE_BUCKETS] }
    }
}

/// Long shared-memory receives timed per protocol before [`super::Config::cma_choose`] decides.
pub const CHOICE_SAMPLES: u8 = 9;

/// How much faster streaming must have been for [`PullChoice`] to keep it: a pull makes
/// one copy on the receiver's core and leaves the sender's free (it only waits for the
/// FIN), streaming copies on both, which a one-way measurement does not charge. Where the
/// two were close the verdict was a coin toss with a lopsided cost: on an Intel host,
/// 1 MiB `osu_bw` streamed 10.9-11.7 GB/s against 9.8-10.2 pulled, but a streamed 4 MiB
/// `osu_bibw` took 7.7-8.0 against 10.8-12.9 (bench/history/NOTEBOOK.md §0.15).
pub(super) const STREAM_MARGIN: f64 = 1.15;

/// Receives per timed span of [`PullChoice`].
pub(super) const CHOICE_SPAN: usize = 4;

/// Sizes [`super::Config::cma_choose`] decides for separately: up to 64 KiB, 128 KiB, 256 KiB,
/// 512 KiB, 1 MiB, 2 MiB, 4 MiB, and longer. Which protocol wins changes with the size on some
/// hosts (an Intel host, bench/history/NOTEBOOK.md §0.15: one verdict taken on the first 512 KiB
/// receives streamed 4 MiB `osu_bibw` at 8.0-8.9 GB/s where pulling took 11.6-12.9).
pub(super) const CHOICE_BUCKETS: usize = 8;

/// The [`CHOICE_BUCKETS`] bucket of a long receive of `len` bytes: `len` in
/// (2^(15+b), 2^(16+b)] is in bucket `b` (shorter ones in the first, longer in the last).
pub(super) fn choice_bucket(len: u64) -> usize {
    let bits = 64 - len.saturating_sub(1).leading_zeros() as usize;
    bits.saturating_sub(16).min(CHOICE_BUCKETS - 1)
}

/// [`super::Config::cma_choose`]'s measurements: per protocol, the lowest wall-clock time per
/// byte over [`CHOICE_SPAN`] consecutive receives, from the completion of the one before
/// them to the completion of the last.
///
/// Completion to completion, because per-message times mislead both ways
/// (bench/history/NOTEBOOK.md §0.12): timed from its CTS, a streamed receive is charged with the
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
pub(super) struct PullChoice {
    pub(super) cma: Samples,
    pub(super) stream: Samples,
}

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Samples {
    pub(super) n: u8,
    pub(super) done: [Option<Instant>; CHOICE_SAMPLES as usize],
    pub(super) bytes: [u64; CHOICE_SAMPLES as usize],
    pub(super) per_byte: f64,
    /// The median span's time per byte.
    pub(super) median_per_byte: f64,
}

impl PullChoice {
    /// Both protocols have their samples: [`PullChoice::pull`] no longer changes, and
    /// receives are no longer timed.
    pub(super) fn decided(&self) -> bool {
        self.stream.n >= CHOICE_SAMPLES && self.cma.n >= CHOICE_SAMPLES
    }

    /// Whether the next long receive is pulled by CMA: not until streaming has its
    /// samples, then until CMA has its own, then unless streaming was faster by more
    /// than [`STREAM_MARGIN`] over both its lowest span and its median one. The lowest
    /// alone took a streamed span whose bytes were already in the ring (the rings hold
    /// 4 MiB at 2 ranks, four 1 MiB messages) for the protocol's speed: on an Intel host
    /// 1 MiB `osu_bibw` streamed spans of 5.9, 6.1, 6.4, 11.9 and 12.2 GB/s against
    /// pulls of 8.2-8.9, streamed on, and took 9.5 GB/s where pulling took 17-19
    /// (bench/history/NOTEBOOK.md §0.16).
    pub(super) fn pull(&self) -> bool {
        if self.stream.n < CHOICE_SAMPLES {
            return false;
        }
        let faster = |cma: f64, stream: f64| cma > stream * STREAM_MARGIN;
        self.cma.n < CHOICE_SAMPLES
            || !(faster(self.cma.per_byte, self.stream.per_byte)
                && faster(self.cma.median_per_byte, self.stream.median_per_byte))
    }

    /// A long receive of `bytes`, pulled (`cma`) or streamed, completed at `done`.
    pub(super) fn record(&mut self, cma: bool, bytes: u64, done: Instant) {
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

#[derive(Debug, Clone, Copy)]
pub(super) struct Pull {
    pub(super) rreq: ReqId,
    pub(super) peer: Rank,
    pub(super) src: u32,
    pub(super) tag: i32,
    pub(super) len: u64,
    pub(super) sreq: ReqId,
    pub(super) region: RemoteRegion,
    /// The sender's protocol verdict (`Header::Rts::pull`).
    pub(super) hint: Option<bool>,
}

/// One asynchronous read of a rendezvous (a chunk of it).
#[derive(Debug, Clone, Copy)]
pub(super) struct ChunkRead {
    pub(super) rreq: ReqId,
    pub(super) peer: Rank,
    pub(super) offset: usize,
}

/// A rendezvous pulled with asynchronous reads (a fabric) is read in chunks of this size,
/// all posted at once: the provider moves one chunk while the engine copies the previous
/// one into the receive buffer, and the transport's bounce buffers stay small enough to
/// be reused from message to message.
pub(super) const READ_CHUNK: usize = 256 * 1024;

/// Bytes one progress call copies by CMA pulls at most (past the first pull).
pub(super) const PULL_BYTES_PER_CALL: u64 = 1 << 20;

impl Engine {
    /// Matched long receives whose pull waits for a later progress call (each call
    /// copies about 1 MiB by CMA at most).
    pub fn pulls_pending(&self) -> bool {
        !self.st.rdv.pulls.is_empty()
    }
}

impl State {
    #[inline]
    /// Runs the matched rendezvous' pulls, oldest first. `budget`: stops once one call
    /// has copied [`PULL_BYTES_PER_CALL`] (CMA copies in the call, holding the engine
    /// lock): the rest wait for the next progress, so the lock is not held for a whole
    /// window of long messages (64 x 4 MiB: 26 ms) and the FINs of those done go out now.
    pub(super) fn run_pulls(&mut self, t: &mut AnyTransport, budget: bool) {
        if !self.rdv.pulls.is_empty() {
            self.run_pulls_now(t, budget);
        }
    }

    #[inline(never)]
    pub(super) fn run_pulls_now(&mut self, t: &mut AnyTransport, budget: bool) {
        let mut pulls = std::mem::take(&mut self.rdv.pulls);
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
        pulls.append(&mut self.rdv.pulls);
        self.rdv.pulls = pulls;
    }

    pub(super) fn on_protocol(&mut self, peer: Rank, h: Header, payload: &[u8]) {
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
                        self.rdv.choice[choice_bucket(*total)].record(false, *total, Instant::now());
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
    pub(super) fn read_done(&mut self, op: u64, data: &[u8]) {
        let Some(ChunkRead { rreq, offset, .. }) = self.rdv.reads.remove(&op) else { return };
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

    /// Pulls a matched rendezvous into the receive buffer, or asks for a stream.
    pub(super) fn pull(&mut self, t: &mut AnyTransport, pull: Pull) -> u64 {
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
            rma = verdict.unwrap_or_else(|| self.rdv.choice[bucket].pull());
        }
        let timed = choosing && verdict.is_none() && !self.rdv.choice[bucket].decided();
        if self.peers[peer.0 as usize].failed {
            self.set_outcome(rreq, Err(Error::RankFailStop { rank: src }));
            return 0;
        }
        // A message this process sent itself: one copy from the send's buffer, here.
        let own = match self.reqs.get(sreq) {
            Some(Request { kind: Kind::Send { buf, .. }, .. }) if peer == self.me && buf.len() as u64 == len => {
                Some(*buf)
            }
            _ => None,
        };
        let Some(Request { kind: Kind::Recv { buf, phase, .. }, outcome, .. }) = self.reqs.get_mut(rreq) else {
            return 0;
        };
        if let Some(from) = own {
            let n = from.copy_to(buf);
            *outcome = Some(if len as usize > n {
                Err(Error::Truncate { posted: n, arrived: len as usize })
            } else {
                Ok(Status { source: src as usize, tag, len: n })
            });
            self.stats.copied_to_self += 1;
            self.queue(peer, Outgoing::Ctrl(Header::Fin { sreq }));
            return n as u64;
        }
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
                let op = self.rdv.next_read;
                self.rdv.next_read += 1;
                let remote = RemoteRegion { addr: region.addr + off as u64, len: (end - off) as u64, key: region.key };
                let r = t.rma_read(peer, remote, &mut dst[off..end], OpId(op));
                if let Ok(Posted::InFlight(_)) = r {
                    self.rdv.reads.insert(op, ChunkRead { rreq, peer, offset: off });
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
                        self.rdv.choice[bucket].record(true, len, Instant::now());
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
                    self.fail.newly_failed.push(peer);
                    return 0;
                }
            }
        }
        *phase = RecvPhase::AwaitingData { peer, received: 0, total: len, src, tag, timed };
        self.queue(peer, Outgoing::Ctrl(Header::Cts { sreq, rreq }));
        0
    }
}
