//! Collective data access: `read/write(_at)_all` and `read/write_ordered`.
//!
//! Each call first learns every member's byte range and piece count (an allgather).
//! Ranges that do not interleave, or pieces large enough that a system call each costs
//! little, are read or written by their own member; small interleaved pieces go through
//! collective buffering (`runthrough_io::domain`): the range `lo..hi` of the call is cut
//! into one file domain per aggregator (the first live member of each node, or
//! `cb_nodes` of them), every member sends each aggregator its pieces of that domain
//! (an alltoall of sizes, an alltoallv of the pieces), and the aggregator writes the
//! contiguous runs they make, one write a run — or reads the runs and sends each member
//! its bytes back. A member whose own arguments are bad still takes part (with nothing)
//! and then reports its error, so a bad call never leaves the others waiting.

use runthrough_io::domain::{self, Domains};

use super::{File, FileError, FileResult, IoClass};

/// Collective buffering is used (unless the hints say) when pieces average fewer bytes.
const CB_PIECE: u64 = 4 << 10;

/// Pieces `(file_offset, len, stream_offset)`.
type Pieces = Vec<(u64, u64, u64)>;

impl File {
    /// Writes `buf` at `off` (etypes) at every member (MPI_File_write_at_all; collective).
    pub fn write_at_all(&self, off: i64, buf: &[u8]) -> FileResult<usize> {
        let r = Self::check_offset(off).and_then(|o| self.explicit_ok().map(|()| o));
        self.coll_write(r, buf)
    }

    /// Reads at `off` (etypes) at every member (MPI_File_read_at_all; collective);
    /// returns the bytes read (fewer at the end of file).
    pub fn read_at_all(&self, off: i64, buf: &mut [u8]) -> FileResult<usize> {
        let r = Self::check_offset(off).and_then(|o| self.explicit_ok().map(|()| o));
        self.coll_read(r, buf)
    }

    /// Writes at each member's individual pointer and advances it (MPI_File_write_all).
    pub fn write_all(&self, buf: &[u8]) -> FileResult<usize> {
        let pos = self.explicit_ok().and_then(|()| Ok(self.open_state()?.pos));
        let n = self.coll_write(pos, buf)?;
        let mut s = self.state.lock();
        s.pos += n as u64 / s.view.etype();
        Ok(n)
    }

    /// Reads at each member's individual pointer and advances it (MPI_File_read_all).
    pub fn read_all(&self, buf: &mut [u8]) -> FileResult<usize> {
        let pos = self.explicit_ok().and_then(|()| Ok(self.open_state()?.pos));
        let n = self.coll_read(pos, buf)?;
        let mut s = self.state.lock();
        s.pos += (n as u64).div_ceil(s.view.etype());
        Ok(n)
    }

    /// Writes at the shared pointer in rank order (MPI_File_write_ordered; collective).
    pub fn write_ordered(&self, buf: &[u8]) -> FileResult<usize> {
        let pos = self.ordered_position(buf.len())?;
        self.coll_write(pos, buf)
    }

    /// Reads at the shared pointer in rank order (MPI_File_read_ordered; collective).
    pub fn read_ordered(&self, buf: &mut [u8]) -> FileResult<usize> {
        let pos = self.ordered_position(buf.len())?;
        self.coll_read(pos, buf)
    }

    /// This member's position of an ordered access of `n` bytes: the shared pointer,
    /// advanced by the leader for every member at once, plus the etypes of the members
    /// before this one.
    fn ordered_position(&self, n: usize) -> FileResult<FileResult<u64>> {
        self.active()?;
        let etype = self.open_state()?.view.etype();
        let mine = n as u64 / etype;
        let bad = (!(n as u64).is_multiple_of(etype))
            .then(|| FileError::io(IoClass::Arg, format!("{n} bytes is not a whole number of etypes ({etype})")));
        let mut counts = vec![0u64; self.comm.size()];
        self.comm.allgather(&[if bad.is_some() { 0 } else { mine }], &mut counts)?;
        let mut base = [u64::MAX];
        let leader = self.comm.leader();
        if self.comm.rank() == leader {
            if let Ok(b) = self.shared().and_then(|s| Ok(s.fetch_add(counts.iter().sum())?)) {
                base[0] = b;
            }
        }
        self.comm.bcast(&mut base, leader)?;
        if base[0] == u64::MAX {
            return Err(FileError::io(IoClass::Io, "the shared file pointer could not be advanced"));
        }
        Ok(match bad {
            Some(e) => Err(e),
            None => Ok(base[0] + counts[..self.comm.rank()].iter().sum::<u64>()),
        })
    }

    /// The pieces of `n` bytes at `pos` in the view, and whether atomic mode is on; an
    /// error of this member's arguments is kept for after the collective steps.
    fn coll_pieces(&self, pos: FileResult<u64>, n: usize, writing: bool) -> FileResult<(FileResult<Pieces>, bool)> {
        self.active()?;
        let (view, atomic) = self.view_atomic()?;
        let pieces = pos.and_then(|pos| {
            if writing && !self.posix.amode().writable() {
                return Err(FileError::io(IoClass::Access, "write to a file opened MPI_MODE_RDONLY"));
            }
            if !writing && !self.posix.amode().readable() {
                return Err(FileError::io(IoClass::Access, "read of a file opened MPI_MODE_WRONLY"));
            }
            if writing && !(n as u64).is_multiple_of(view.etype()) {
                return Err(FileError::io(IoClass::Arg, format!("{n} bytes is not a whole number of etypes")));
            }
            let mut p = Vec::new();
            view.pieces(pos * view.etype(), n as u64, |fo, l, so| p.push((fo, l, so)));
            Ok(p)
        });
        Ok((pieces, atomic))
    }

    /// Every member's byte range (`lo, hi`; empty as `MAX, 0`), and whether collective
    /// buffering is used: when the hints ask for it, or when the members' ranges
    /// interleave and their pieces average under [`CB_PIECE`] bytes. Larger pieces are
    /// written and read straight by their members: a system call a piece costs little
    /// beside its bytes, and every member's bandwidth adds up (on one node at 4 ranks,
    /// 64 KiB pieces: 2.3 GiB/s straight against 0.2 through one aggregator).
    fn ranges(&self, pieces: &[(u64, u64, u64)]) -> FileResult<(u64, u64, bool)> {
        let lo = pieces.iter().map(|p| p.0).min().unwrap_or(u64::MAX);
        let hi = pieces.iter().map(|p| p.0 + p.1).max().unwrap_or(0);
        let bytes: u64 = pieces.iter().map(|p| p.1).sum();
        let mut all = vec![0u64; 4 * self.comm.size()];
        for c in all.chunks_mut(4) {
            c[0] = u64::MAX;
        }
        self.comm.allgather(&[lo, hi, pieces.len() as u64, bytes], &mut all)?;
        let mut spans: Vec<(u64, u64)> = all.chunks(4).map(|c| (c[0], c[1])).filter(|c| c.0 < c.1).collect();
        spans.sort_unstable();
        let (count, total) = all.chunks(4).fold((0u64, 0u64), |a, c| (a.0 + c[2], a.1 + c[3]));
        let glo = spans.first().map_or(0, |s| s.0);
        let ghi = spans.iter().map(|s| s.1).max().unwrap_or(0);
        let interleaved = spans.windows(2).any(|w| w[1].0 < w[0].1);
        let small = total < CB_PIECE * count.max(1);
        let cb = self.state.lock().hints.cb.unwrap_or(interleaved && small) && spans.len() > 1;
        Ok((glo, ghi, cb))
    }

    /// The aggregators: the first live member of each node in rank order, then (to reach
    /// `cb_nodes`) other live members in rank order.
    fn aggregators(&self) -> Vec<usize> {
        let rec = self.comm.recognized_world();
        let live: Vec<usize> = (0..self.comm.size()).filter(|&r| !rec.contains(&self.comm.members()[r].0)).collect();
        let mut aggs: Vec<usize> = Vec::new();
        for &r in &live {
            if !aggs.iter().any(|&a| self.nodes[a] == self.nodes[r]) {
                aggs.push(r);
            }
        }
        if let Some(k) = self.state.lock().hints.cb_nodes {
            let k = k.clamp(1, live.len().max(1));
            for &r in &live {
                if aggs.len() >= k {
                    break;
                }
                if !aggs.contains(&r) {
                    aggs.push(r);
                }
            }
            aggs.truncate(k);
        }
        aggs
    }

    /// Sends `out[r]` to every member r and returns what each member sent here (an
    /// alltoall of sizes, then an alltoallv).
    fn exchange(&self, out: Vec<Vec<u8>>) -> FileResult<Vec<Vec<u8>>> {
        let n = self.comm.size();
        let scounts: Vec<u64> = out.iter().map(|v| v.len() as u64).collect();
        let mut rcounts = vec![0u64; n];
        self.comm.alltoall(&scounts, &mut rcounts)?;
        let sc: Vec<usize> = scounts.iter().map(|&c| c as usize).collect();
        let rc: Vec<usize> = rcounts.iter().map(|&c| c as usize).collect();
        let displs = |c: &[usize]| c.iter().scan(0, |a, &x| Some(std::mem::replace(a, *a + x))).collect::<Vec<_>>();
        let (sd, rd) = (displs(&sc), displs(&rc));
        let send: Vec<u8> = out.concat();
        let mut recv = vec![0u8; rc.iter().sum()];
        self.comm.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd)?;
        Ok((0..n).map(|r| recv[rd[r]..rd[r] + rc[r]].to_vec()).collect())
    }

    /// This member's pieces cut into the aggregators' domains, as their wire messages.
    fn to_aggregators(
        &self,
        pieces: &[(u64, u64, u64)],
        data: Option<&[u8]>,
        lo: u64,
        hi: u64,
    ) -> (Vec<usize>, Vec<Vec<u8>>) {
        let aggs = self.aggregators();
        let span = hi - lo;
        let align = if span >= 16 << 20 { 1 << 20 } else { 1 };
        let domains = Domains::new(lo, hi, aggs.len(), align);
        let mut per: Vec<Pieces> = vec![Vec::new(); aggs.len()];
        for &(fo, l, so) in pieces {
            domains.split(fo, l, so, |d, o, l, s| per[d].push((o, l, s)));
        }
        let mut out = vec![Vec::new(); self.comm.size()];
        for (a, &r) in aggs.iter().enumerate() {
            if !per[a].is_empty() {
                domain::encode(&per[a], data, &mut out[r]);
            }
        }
        (aggs, out)
    }

    fn coll_write(&self, pos: FileResult<u64>, buf: &[u8]) -> FileResult<usize> {
        let (pieces, atomic) = self.coll_pieces(pos.clone(), buf.len(), true)?;
        let none = Vec::new();
        let mine = pieces.as_ref().unwrap_or(&none);
        let (lo, hi, cb) = self.ranges(mine)?;
        if !cb {
            drop(pieces?);
            let view = self.view_atomic()?.0;
            self.posix.write_view(&view, pos? * view.etype(), buf, atomic)?;
            return Ok(buf.len());
        }
        let (_, out) = self.to_aggregators(mine, Some(buf), lo, hi);
        let got = self.exchange(out)?;
        // An aggregator: the runs its domain's pieces make, each written once.
        let mut all: Vec<(u64, u64, usize)> = Vec::new();
        let mut data: Vec<&[u8]> = Vec::new();
        for msg in got.iter().filter(|m| !m.is_empty()) {
            let (ps, mut at) = domain::decode(msg)
                .ok_or_else(|| FileError::io(IoClass::Io, "a malformed collective buffering message"))?;
            for (fo, l) in ps {
                all.push((fo, l, data.len()));
                data.push(&msg[at..at + l as usize]);
                at += l as usize;
            }
        }
        let runs = domain::runs(&mut all);
        let mut k = 0;
        let mut run_buf = Vec::new();
        for (start, len) in runs {
            run_buf.clear();
            run_buf.resize(len as usize, 0);
            while k < all.len() && all[k].0 < start + len {
                let (fo, l, i) = all[k];
                run_buf[(fo - start) as usize..(fo - start + l) as usize].copy_from_slice(data[i]);
                k += 1;
            }
            if atomic {
                self.posix.locked(true, || self.posix.write_at(start, &run_buf))?;
            } else {
                self.posix.write_pieces(&[(start, len, 0)], &run_buf)?;
            }
        }
        pieces?;
        Ok(buf.len())
    }

    fn coll_read(&self, pos: FileResult<u64>, buf: &mut [u8]) -> FileResult<usize> {
        let (pieces, atomic) = self.coll_pieces(pos.clone(), buf.len(), false)?;
        let none = Vec::new();
        let mine = pieces.as_ref().unwrap_or(&none);
        let (lo, hi, cb) = self.ranges(mine)?;
        if !cb {
            drop(pieces?);
            let view = self.view_atomic()?.0;
            return self.read_view(&view, atomic, pos?, buf);
        }
        let (aggs, out) = self.to_aggregators(mine, None, lo, hi);
        let asked = self.exchange(out)?;
        // An aggregator: read the runs of every member's pieces, reply in their order.
        let mut all: Vec<(u64, u64, usize)> = Vec::new();
        let mut lists = Vec::new();
        for (r, msg) in asked.iter().enumerate().filter(|(_, m)| !m.is_empty()) {
            let (ps, _) = domain::decode(msg)
                .ok_or_else(|| FileError::io(IoClass::Io, "a malformed collective buffering message"))?;
            for &(fo, l) in &ps {
                all.push((fo, l, all.len()));
            }
            lists.push((r, ps));
        }
        let mut runs: Vec<(u64, Vec<u8>)> = Vec::new();
        for (start, len) in domain::runs(&mut all) {
            let mut b = vec![0u8; len as usize];
            let mut read = || self.posix.read_at(start, &mut b);
            if atomic {
                self.posix.locked(false, read)?;
            } else {
                read()?;
            }
            runs.push((start, b));
        }
        let mut replies = vec![Vec::new(); self.comm.size()];
        for (r, ps) in &lists {
            for &(fo, l) in ps {
                let i = runs.partition_point(|run| run.0 <= fo) - 1;
                let (start, b) = &runs[i];
                replies[*r].extend_from_slice(&b[(fo - start) as usize..(fo - start + l) as usize]);
            }
        }
        let back = self.exchange(replies)?;
        let mine = pieces?;
        // The replies come in the order of this member's pieces for each aggregator.
        let view = self.view_atomic()?.0;
        let span = hi - lo;
        let domains = Domains::new(lo, hi, aggs.len(), if span >= 16 << 20 { 1 << 20 } else { 1 });
        let mut at = vec![0usize; aggs.len()];
        for &(fo, l, so) in &mine {
            domains.split(fo, l, so, |d, _, l, s| {
                let from = &back[aggs[d]];
                buf[s as usize..(s + l) as usize].copy_from_slice(&from[at[d]..at[d] + l as usize]);
                at[d] += l as usize;
            });
        }
        let at = pos? * view.etype();
        let size = self.posix.size()?;
        Ok((view.data_before(size).saturating_sub(at)).min(buf.len() as u64) as usize)
    }
}
