//! Newtypes for the identifiers that cross crate and wire boundaries (docs/ARCHITECTURE.md §5).

use std::fmt;

/// A process's rank in the job (world rank), or within a communicator where stated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(pub u32);

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A message tag. User tags are `0..=TAG_UB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tag(pub i32);

/// The largest user tag (MPI's `MPI_TAG_UB`).
pub const TAG_UB: i32 = (1 << 30) - 1;

/// A communication context: one per communicator for point-to-point traffic, and the
/// next one for its collectives, so the two never match each other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ContextId(pub u32);

impl ContextId {
    /// The point-to-point context of the communicator this context belongs to (even).
    #[inline]
    pub const fn p2p(self) -> ContextId {
        ContextId(self.0 & !1)
    }

    /// The collective context of the communicator this context belongs to (the odd one
    /// after its point-to-point context).
    #[inline]
    pub const fn coll(self) -> ContextId {
        ContextId(self.0 | 1)
    }

    /// Whether this is a communicator's collective context.
    #[inline]
    pub const fn is_coll(self) -> bool {
        self.0 & 1 == 1
    }

    /// The communicator's index among contexts (its point-to-point context halved).
    #[inline]
    pub const fn index(self) -> u32 {
        self.0 >> 1
    }
}

/// Where a message goes, as its sender states it: the context, the sender's and the
/// receiver's ranks in the communicator (what the envelope carries), the receiver's world
/// rank (where the transport delivers it) and the tag. Passed by value, by field name:
/// positional ids compiled with `src` and `dest` swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendTarget {
    /// The communicator's context (point-to-point or collective).
    pub ctx: ContextId,
    /// The sender's rank in the communicator.
    pub src: u32,
    /// The receiver's rank in the communicator.
    pub dest: u32,
    /// The receiver's world rank.
    pub peer: Rank,
    /// The message's tag.
    pub tag: Tag,
}

/// Per-(sender, receiver) sequence number of matched messages; restores send order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seq(pub u32);

/// A request's identity: slab index plus a generation, so a stale id (from the wire or
/// a dropped handle) never names a reused slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReqId {
    /// Slot in the request slab.
    pub index: u32,
    /// Generation of the slot when the request was created.
    pub gen: u32,
}

impl ReqId {
    /// Packs the id into the 64-bit form carried by wire headers.
    pub fn to_wire(self) -> u64 {
        (u64::from(self.gen) << 32) | u64::from(self.index)
    }

    /// Unpacks an id read from a wire header.
    pub fn from_wire(v: u64) -> Self {
        Self { index: v as u32, gen: (v >> 32) as u32 }
    }
}

/// A transport-level operation id (for operations that complete later).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OpId(pub u64);

/// Where a sender's exposed buffer lives, as the receiver needs it to pull the data
/// (an address for CMA; address and key for RMA).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Address in the owner's address space (or the provider's offset).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// Remote protection key (0 for CMA).
    pub key: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn req_id_wire_round_trip() {
        let id = ReqId { index: 0xdead_beef, gen: 7 };
        assert_eq!(ReqId::from_wire(id.to_wire()), id);
    }
}
