//! The few collectives the facade needs before the collectives issue: a dissemination
//! allreduce of `max` (correct for any idempotent operation in ⌈log2 n⌉ rounds; Hensgen,
//! Finkel and Manber's dissemination pattern), used as the barrier and to agree on new
//! context ids. It runs on the communicator's collective context, so it never matches
//! user messages.

use crate::comm::{Comm, Source, TagSel};
use crate::Error;

/// The maximum of `v` over all ranks of `comm`.
pub(crate) fn allreduce_max(comm: &Comm, mut v: u32) -> Result<u32, Error> {
    let n = comm.size();
    let me = comm.rank();
    let ctx = comm.coll_ctx();
    let mut k = 1usize;
    let mut round = 0i32;
    while k < n {
        let to = (me + k) % n;
        let from = (me + n - k) % n;
        let mut got = [0u32];
        let out = [v];
        let r = comm.irecv_on(ctx, &mut got, Source::Rank(from), TagSel::Tag(round))?;
        let s = comm.isend_on(ctx, &out, to, round)?;
        s.inner_wait()?;
        r.inner_wait()?;
        v = v.max(got[0]);
        k <<= 1;
        round += 1;
    }
    Ok(v)
}
