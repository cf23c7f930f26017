//! What a collective holds from its start: the datatypes and the user operation it was
//! started with ([`Held`]), and the rank-ordered reduction of non-commutative operations.

use std::ffi::c_int;
use std::sync::Arc;

use super::{code, Args};
use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::{DtRef, Dtype};
use crate::types::Handle;

/// The datatypes and the user operation of a collective, taken when it starts: a
/// nonblocking or persistent collective keeps them even when the program frees the
/// handles before it completes (MPI-4.1 5.1.10: "any communication that is currently
/// using this datatype will complete normally"; the same for operations, 6.9.5).
/// Empty for a blocking call, which looks the handles up as it runs.
#[derive(Default, Clone)]
pub(crate) struct Held {
    types: Vec<(Handle, Arc<Dtype>)>,
    op: Option<(Handle, Arc<crate::op::UserOp>)>,
}

impl Held {
    /// What `a` names now.
    pub(super) fn of(a: &Args) -> Held {
        let types =
            [a.stype, a.rtype].into_iter().filter_map(|h| crate::dtype::lookup(h).map(|t| (h, t.into_arc()))).collect();
        Held { types, op: crate::op::user_op(a.op).map(|u| (a.op, u)) }
    }

    /// The datatype `h`: the one taken at the start, else the handle's now.
    pub(super) fn ty(&self, h: Handle) -> Result<Arc<Dtype>, c_int> {
        match self.types.iter().find(|(x, _)| *x == h) {
            Some((_, t)) => Ok(t.clone()),
            None => crate::dtype::lookup(h).map(DtRef::into_arc).ok_or(MPI_ERR_TYPE),
        }
    }

    /// The datatype of an argument that matters only where `used` (the receive type of a
    /// gather at the root, the send type of a scatter at the root): elsewhere MPI ignores
    /// it, so `MPI_DATATYPE_NULL` or any other value is accepted (MPI_BYTE stands in).
    pub(super) fn ty_if(&self, h: Handle, used: bool) -> Result<Arc<Dtype>, c_int> {
        match self.ty(h) {
            Ok(t) => Ok(t),
            Err(_) if !used => self.ty(MPI_BYTE),
            Err(e) => Err(e),
        }
    }

    /// How to combine with operation `op` over `t` (datatype handle `dt`).
    pub(super) fn combine(&self, op: Handle, dt: Handle, t: &Arc<Dtype>) -> Result<crate::op::Combine, c_int> {
        let held = self.op.as_ref().filter(|(h, _)| *h == op).map(|(_, u)| u.clone());
        crate::op::resolve_held(held, op, dt, &DtRef::Shared(t.clone()))
    }
}

/// `input` (this member's packed contribution) reduced with the non-commutative `comb` in
/// rank order, `x0 op x1 op ... op x(n-1)` over the members not known failed, the result at
/// every member: the contributions are gathered everywhere, then folded from the last.
pub(super) fn ordered_reduce(c: &CommObj, input: &[u8], comb: &crate::op::Combine) -> Result<Vec<u8>, c_int> {
    let n = c.size();
    let len = input.len();
    let mut all = vec![0u8; len * n];
    c.comm.allgather(input, &mut all).map_err(code)?;
    let failed = c.comm.group_failed().world_ranks();
    let mut live = (0..n).rev().filter(|&i| !failed.contains(&(c.world[i] as usize)));
    let Some(last) = live.next() else { return Ok(input.to_vec()) };
    let mut acc = all[last * len..(last + 1) * len].to_vec();
    for i in live {
        comb.apply(&mut acc, &all[i * len..(i + 1) * len]);
    }
    Ok(acc)
}
