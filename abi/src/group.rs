//! Groups: every local operation of MPI 5 section 7.3.

use std::ffi::c_int;
use std::sync::Arc;

use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::raise::raise_on;
use crate::types::Handle;

/// An ordered set of processes (world ranks).
#[derive(Debug)]
pub(crate) struct GroupObj {
    pub(crate) ranks: Vec<u32>,
}

pub(crate) static GROUPS: Table<GroupObj> = Table::new(Kind::Group);

static EMPTY: std::sync::OnceLock<Arc<GroupObj>> = std::sync::OnceLock::new();

pub(crate) fn lookup(h: Handle) -> Option<Arc<GroupObj>> {
    if h == MPI_GROUP_EMPTY {
        return Some(EMPTY.get_or_init(|| Arc::new(GroupObj { ranks: Vec::new() })).clone());
    }
    GROUPS.get(h)
}

/// A new group handle for `ranks` (MPI_GROUP_EMPTY when empty).
pub(crate) fn new_group(ranks: Vec<u32>) -> Handle {
    if ranks.is_empty() {
        return MPI_GROUP_EMPTY;
    }
    GROUPS.insert(Arc::new(GroupObj { ranks }))
}

macro_rules! group {
    ($h:expr) => {
        match lookup($h) {
            Some(g) => g,
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_GROUP),
        }
    };
}

fn my_world_rank() -> Option<u32> {
    crate::rt::runtime_world().map(|w| w.world[w.rank])
}

pub(crate) unsafe fn MPI_Group_size(group: Handle, size: *mut c_int) -> c_int {
    let g = group!(group);
    // SAFETY: output argument.
    unsafe { *size = g.ranks.len() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Group_rank(group: Handle, rank: *mut c_int) -> c_int {
    let g = group!(group);
    let me = my_world_rank();
    let r = g.ranks.iter().position(|&x| Some(x) == me).map_or(MPI_UNDEFINED, |i| i as c_int);
    // SAFETY: output argument.
    unsafe { *rank = r };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Group_translate_ranks(
    group1: Handle,
    n: c_int,
    ranks1: *const c_int,
    group2: Handle,
    ranks2: *mut c_int,
) -> c_int {
    let a = group!(group1);
    let b = group!(group2);
    for i in 0..n.max(0) as usize {
        // SAFETY: arrays of n entries (MPI contract).
        let r = unsafe { *ranks1.add(i) };
        let out = if r == MPI_PROC_NULL {
            MPI_PROC_NULL
        } else if r < 0 || r as usize >= a.ranks.len() {
            return raise_on(MPI_COMM_WORLD, MPI_ERR_RANK);
        } else {
            let w = a.ranks[r as usize];
            b.ranks.iter().position(|&x| x == w).map_or(MPI_UNDEFINED, |j| j as c_int)
        };
        // SAFETY: as above.
        unsafe { *ranks2.add(i) = out };
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Group_compare(group1: Handle, group2: Handle, result: *mut c_int) -> c_int {
    let a = group!(group1);
    let b = group!(group2);
    let r = if a.ranks == b.ranks {
        MPI_IDENT
    } else {
        let mut x = a.ranks.clone();
        let mut y = b.ranks.clone();
        x.sort_unstable();
        y.sort_unstable();
        if x == y {
            MPI_SIMILAR
        } else {
            MPI_UNEQUAL
        }
    };
    // SAFETY: output argument.
    unsafe { *result = r };
    MPI_SUCCESS
}

unsafe fn out(newgroup: *mut Handle, ranks: Vec<u32>) -> c_int {
    // SAFETY: output argument.
    unsafe { *newgroup = new_group(ranks) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Group_union(group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    let a = group!(group1);
    let b = group!(group2);
    let mut r = a.ranks.clone();
    r.extend(b.ranks.iter().filter(|x| !a.ranks.contains(x)));
    // SAFETY: output argument.
    unsafe { out(newgroup, r) }
}

pub(crate) unsafe fn MPI_Group_intersection(group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    let a = group!(group1);
    let b = group!(group2);
    let r = a.ranks.iter().copied().filter(|x| b.ranks.contains(x)).collect();
    // SAFETY: output argument.
    unsafe { out(newgroup, r) }
}

pub(crate) unsafe fn MPI_Group_difference(group1: Handle, group2: Handle, newgroup: *mut Handle) -> c_int {
    let a = group!(group1);
    let b = group!(group2);
    let r = a.ranks.iter().copied().filter(|x| !b.ranks.contains(x)).collect();
    // SAFETY: output argument.
    unsafe { out(newgroup, r) }
}

/// Reads `n` ranks of `g` from a C array, checking range and uniqueness.
unsafe fn read_ranks(g: &GroupObj, n: c_int, ranks: *const c_int) -> Result<Vec<usize>, c_int> {
    let mut v = Vec::with_capacity(n.max(0) as usize);
    for i in 0..n.max(0) as usize {
        // SAFETY: array of n entries (MPI contract).
        let r = unsafe { *ranks.add(i) };
        if r < 0 || r as usize >= g.ranks.len() || v.contains(&(r as usize)) {
            return Err(MPI_ERR_RANK);
        }
        v.push(r as usize);
    }
    Ok(v)
}

pub(crate) unsafe fn MPI_Group_incl(group: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) -> c_int {
    let g = group!(group);
    // SAFETY: forwarded array.
    match unsafe { read_ranks(&g, n, ranks) } {
        // SAFETY: output argument.
        Ok(v) => unsafe { out(newgroup, v.iter().map(|&i| g.ranks[i]).collect()) },
        Err(e) => raise_on(MPI_COMM_WORLD, e),
    }
}

pub(crate) unsafe fn MPI_Group_excl(group: Handle, n: c_int, ranks: *const c_int, newgroup: *mut Handle) -> c_int {
    let g = group!(group);
    // SAFETY: forwarded array.
    match unsafe { read_ranks(&g, n, ranks) } {
        Ok(v) => {
            let r = (0..g.ranks.len()).filter(|i| !v.contains(i)).map(|i| g.ranks[i]).collect();
            // SAFETY: output argument.
            unsafe { out(newgroup, r) }
        }
        Err(e) => raise_on(MPI_COMM_WORLD, e),
    }
}

/// The ranks named by `n` triplets (first, last, stride).
unsafe fn expand_ranges(g: &GroupObj, n: c_int, ranges: *mut [c_int; 3]) -> Result<Vec<usize>, c_int> {
    let mut v = Vec::new();
    for i in 0..n.max(0) as usize {
        // SAFETY: n triplets (MPI contract).
        let [first, last, stride] = unsafe { *ranges.add(i) };
        if stride == 0 {
            return Err(MPI_ERR_ARG);
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            if r < 0 || r as usize >= g.ranks.len() || v.contains(&(r as usize)) {
                return Err(MPI_ERR_RANK);
            }
            v.push(r as usize);
            r += stride;
        }
    }
    Ok(v)
}

pub(crate) unsafe fn MPI_Group_range_incl(
    group: Handle,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut Handle,
) -> c_int {
    let g = group!(group);
    // SAFETY: forwarded array.
    match unsafe { expand_ranges(&g, n, ranges) } {
        // SAFETY: output argument.
        Ok(v) => unsafe { out(newgroup, v.iter().map(|&i| g.ranks[i]).collect()) },
        Err(e) => raise_on(MPI_COMM_WORLD, e),
    }
}

pub(crate) unsafe fn MPI_Group_range_excl(
    group: Handle,
    n: c_int,
    ranges: *mut [c_int; 3],
    newgroup: *mut Handle,
) -> c_int {
    let g = group!(group);
    // SAFETY: forwarded array.
    match unsafe { expand_ranges(&g, n, ranges) } {
        Ok(v) => {
            let r = (0..g.ranks.len()).filter(|i| !v.contains(i)).map(|i| g.ranks[i]).collect();
            // SAFETY: output argument.
            unsafe { out(newgroup, r) }
        }
        Err(e) => raise_on(MPI_COMM_WORLD, e),
    }
}

pub(crate) unsafe fn MPI_Group_free(group: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *group };
    if h != MPI_GROUP_EMPTY && GROUPS.remove(h).is_none() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_GROUP);
    }
    // SAFETY: in/out argument.
    unsafe { *group = MPI_GROUP_NULL };
    MPI_SUCCESS
}
