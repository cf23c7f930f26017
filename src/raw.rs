//! Byte-level entry points for the MPI standard ABI (`abi/`, `libmpi_abi.so.1`).
//!
//! A C program hands the library raw pointers and promises, as the MPI standard makes it
//! promise, that a buffer stays valid until its request completes. That promise cannot be
//! expressed to the borrow checker, so the C layer starts such requests itself with the
//! engine's `unsafe` unscoped calls; this crate stays free of `unsafe` and only hands it
//! what those calls need (the engine, a checked destination, a matching pattern).
//! Reductions here take the element size explicitly because the C layer works on bytes
//! of any datatype.

use std::sync::Arc;

use runthrough_engine::lock::BiasedMutex;
use runthrough_engine::matching::Pattern;
/// Where a send goes, checked: what the engine needs to start it (the engine's type).
pub use runthrough_engine::SendTarget;
use runthrough_engine::{Engine, Rank, Tag};

use crate::comm::{Source, TagSel};
use crate::{Comm, Error};

impl Comm {
    /// The engine this communicator runs on (for requests on memory only the caller can
    /// vouch for: `runthrough_engine::isend_unscoped` and `irecv_unscoped`).
    pub fn engine(&self) -> &Arc<BiasedMutex<Engine>> {
        &self.inner.shared.engine
    }

    /// Checks `dest` and `tag` of a send (errors as the safe sends report them, without
    /// applying the error mode).
    pub fn send_target(&self, dest: usize, tag: i32) -> Result<SendTarget, Error> {
        match self.send_target_valid(dest, tag) {
            Some(t) => Ok(t),
            // Which of the two is wrong, as the safe sends report it.
            None => self.world_rank(dest).and(Err(Error::InvalidTag { tag })),
        }
    }

    /// [`Comm::send_target`] for the common case alone, for a hot path: `None` when
    /// `dest` or `tag` is out of range (the caller then takes the path that reports it).
    #[inline]
    pub fn send_target_valid(&self, dest: usize, tag: i32) -> Option<SendTarget> {
        let peer = *self.inner.group.get(dest)?;
        if !(0..=runthrough_engine::TAG_UB).contains(&tag) {
            return None;
        }
        Some(SendTarget { ctx: self.inner.ctx, src: self.inner.me, dest: dest as u32, peer, tag: Tag(tag) })
    }

    /// [`Comm::recv_pattern`] for the common case alone, for a hot path: a receive from
    /// rank `src` (`None`: any source) with `tag` (`None`: any tag); `None` when either is
    /// out of range (the caller then takes the path that reports it).
    #[inline]
    pub fn recv_pattern_valid(&self, src: Option<usize>, tag: Option<i32>) -> Option<(Pattern, Option<Rank>)> {
        let (src, peer) = match src {
            None => (None, None),
            Some(r) => (Some(r as u32), Some(*self.inner.group.get(r)?)),
        };
        let tag = match tag {
            None => None,
            Some(t) if (0..=runthrough_engine::TAG_UB).contains(&t) => Some(Tag(t)),
            Some(_) => return None,
        };
        Some((Pattern { ctx: self.inner.ctx, src, tag }, peer))
    }

    /// The matching pattern of a receive from `src` with `tag`, and the source's world
    /// rank when it is not a wildcard.
    pub fn recv_pattern(&self, src: Source, tag: TagSel) -> Result<(Pattern, Option<Rank>), Error> {
        self.pattern(src, tag)
    }

    /// Reduces `send` (elements of `elem` bytes) over the live members into `recv` at
    /// `root` with `f(acc, incoming)`; `recv` matters at the root only.
    pub fn reduce_bytes(
        &self,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        root: usize,
        f: &dyn Fn(&mut [u8], &[u8]),
    ) -> Result<(), Error> {
        let r = (|| {
            let root = self.coll_root(root)?;
            let mut acc = send.to_vec();
            self.coll_short(acc.len())?.reduce(root, &mut acc, elem.max(1), f)?;
            if self.rank() == root as usize {
                if recv.len() != acc.len() {
                    return Err(Error::InvalidArg("reduce: receive and send lengths differ"));
                }
                recv.copy_from_slice(&acc);
            }
            Ok(())
        })();
        self.check(r)
    }

    /// Allreduce in place on `buf` (elements of `elem` bytes) with `f(acc, incoming)`.
    pub fn allreduce_bytes(&self, buf: &mut [u8], elem: usize, f: &dyn Fn(&mut [u8], &[u8])) -> Result<(), Error> {
        let r = self.coll_short(buf.len()).and_then(|c| c.allreduce(buf, elem.max(1), f));
        self.check(r)
    }

    /// Inclusive scan in place on `buf` with `f(acc, incoming)`.
    pub fn scan_bytes(&self, buf: &mut [u8], f: &dyn Fn(&mut [u8], &[u8])) -> Result<(), Error> {
        let r = self.coll_any().and_then(|c| c.scan(buf, f));
        self.check(r)
    }

    /// Exclusive scan in place on `buf`; `false` on the first live member (its `buf` is
    /// then undefined).
    pub fn exscan_bytes(&self, buf: &mut [u8], f: &dyn Fn(&mut [u8], &[u8])) -> Result<bool, Error> {
        let r = self.coll_any().and_then(|c| c.exscan(buf, f));
        self.check(r)
    }
}
