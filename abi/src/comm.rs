//! Communicators: the calls that make, compare, name and free them, and the registration
//! of a new one with what it inherits (error handler, attributes). The communicator
//! object and its table are `commobj.rs`'s, MPI_COMM_WORLD, MPI_COMM_SELF and the lookup
//! of a handle `rt.rs`'s.

use std::ffi::{c_char, c_int};
use std::sync::Arc;

use runthrough::Comm;

use crate::commobj::{CommObj, COMMS};
use crate::consts::*;
use crate::raise::raise_on;
use crate::types::Handle;

/// `let c = comm!(h);`: the communicator or return its error through MPI_COMM_WORLD.
macro_rules! comm {
    ($h:expr) => {
        match crate::rt::lookup($h) {
            Ok(c) => c,
            Err(e) => return crate::raise::raise_on(crate::consts::MPI_COMM_WORLD, e),
        }
    };
}
pub(crate) use comm;

/// Registers a new communicator derived from `parent` (inheriting its error handler and
/// copying its attributes as their copy callbacks say) and returns its handle; a failing
/// copy callback's code, the new communicator freed.
pub(crate) fn register_child(parent: &Arc<CommObj>, parent_h: Handle, c: Comm) -> Result<Handle, c_int> {
    let obj = CommObj::new(c, *parent.errhandler.lock(), "");
    register_child_obj(parent, parent_h, obj)
}

/// [`register_child`] of a communicator object made already (an inter-communicator's).
fn register_child_obj(parent: &Arc<CommObj>, parent_h: Handle, obj: Arc<CommObj>) -> Result<Handle, c_int> {
    let h = COMMS.insert(obj.clone());
    if let Err(e) = copy_attrs(parent, parent_h, &obj, h) {
        COMMS.remove(h);
        return Err(e);
    }
    Ok(h)
}

/// Registers a new communicator that inherits nothing but the error handler (split,
/// create, shrink).
pub(crate) fn register_plain(parent: &Arc<CommObj>, c: Comm) -> Handle {
    COMMS.insert(CommObj::new(c, *parent.errhandler.lock(), ""))
}

// ---------------------------------------------------------------------------------------
// Attributes (`keyval.rs`; the calls are `attr.rs`'s)

/// Copies the attributes of `parent` to its duplicate `child` as their copy callbacks
/// say; a failing callback's code (the attributes copied so far deleted again).
fn copy_attrs(parent: &Arc<CommObj>, parent_h: Handle, child: &Arc<CommObj>, child_h: Handle) -> Result<(), c_int> {
    crate::keyval::copy_all(&parent.attrs, parent_h, &child.attrs, child_h)
}

/// Runs the delete callbacks of every attribute of `c`, the last set first
/// (MPI_Comm_free, and MPI_Finalize for MPI_COMM_SELF, MPI-4.1 11.2.4).
pub(crate) fn delete_attrs(c: &Arc<CommObj>, h: Handle) -> c_int {
    crate::keyval::delete_all(&c.attrs, h)
}

// ---------------------------------------------------------------------------------------
// Communicators

pub(crate) unsafe fn MPI_Comm_rank(comm: Handle, rank: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *rank = c.user_rank() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_size(comm: Handle, size: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *size = c.user_size() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_test_inter(comm: Handle, flag: *mut c_int) -> c_int {
    let c = comm!(comm);
    // SAFETY: output argument.
    unsafe { *flag = c.inter.is_some() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_dup(comm: Handle, newcomm: *mut Handle) -> c_int {
    let c = comm!(comm);
    let eh = *c.errhandler.lock();
    let dup = match &c.inter {
        Some(i) => i.ic.dup().map(|d| CommObj::new_inter(d, eh)),
        None => c.comm.dup().map(|d| CommObj::new(d, eh, "")),
    };
    match dup {
        Ok(d) => {
            let h = register_child_obj(&c, comm, d);
            // SAFETY: output argument.
            unsafe { *newcomm = *h.as_ref().unwrap_or(&MPI_COMM_NULL) };
            // A copy callback's error fails the dup (MPI-4.1 7.7.2).
            h.map_or_else(|e| raise_on(comm, e), |_| MPI_SUCCESS)
        }
        Err(e) => crate::raise::raise_error(comm, &e),
    }
}

pub(crate) unsafe fn MPI_Comm_dup_with_info(comm: Handle, info: Handle, newcomm: *mut Handle) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_dup(comm, newcomm) }
}

/// Nonblocking (MPI-4.1 7.4.2): the exchange of the duplication runs in the engine,
/// taking the communicator's next collective tag, so the call returns at once and the
/// program may overlap it with other work; its agreement is entered by the request's
/// waits and tests. `newcomm` is `MPI_COMM_NULL` until the request completes, then the
/// new handle (MPI forbids using it before).
pub(crate) unsafe fn MPI_Comm_idup(comm: Handle, newcomm: *mut Handle, request: *mut Handle) -> c_int {
    let c = comm!(comm);
    if newcomm.is_null() || request.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: output argument.
    unsafe { *newcomm = MPI_COMM_NULL };
    let out = crate::types::SendPtr(newcomm.cast());
    if let Some(i) = &c.inter {
        // The same, over the inter-communicator's bridge.
        let ic = i.ic.clone();
        let mut dup = match ic.idup() {
            Ok(d) => d,
            Err(e) => return raise_on(comm, crate::err::code_of(&e)),
        };
        let poll = move || {
            let out = out;
            let made = ic.test_dup(&mut dup)?.map(|d| CommObj::new_inter(d, *c.errhandler.lock()));
            let err = match made.map_err(|e| crate::err::code_of(&e)).and_then(|d| register_child_obj(&c, comm, d)) {
                Ok(h) => {
                    // SAFETY: the program keeps `newcomm` valid until the request
                    // completes (the nonblocking-call contract).
                    unsafe { *out.0.cast::<Handle>() = h };
                    MPI_SUCCESS
                }
                Err(e) => e,
            };
            Some((crate::types::MPI_Status::empty(), err))
        };
        // SAFETY: output argument.
        unsafe { *request = crate::req::new_active(comm, crate::req::Active::Polled(Box::new(poll))) };
        return MPI_SUCCESS;
    }
    let mut dup = match c.comm.idup() {
        Ok(d) => d,
        Err(e) => return raise_on(comm, crate::err::code_of(&e)),
    };
    let poll = move || {
        let out = out;
        let err = match c.comm.test_dup(&mut dup)? {
            Ok(d) => match register_child(&c, comm, d) {
                Ok(h) => {
                    // SAFETY: the program keeps `newcomm` valid until the request
                    // completes (the nonblocking-call contract).
                    unsafe { *out.0.cast::<Handle>() = h };
                    MPI_SUCCESS
                }
                Err(e) => e,
            },
            Err(e) => crate::err::code_of(&e),
        };
        Some((crate::types::MPI_Status::empty(), err))
    };
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(comm, crate::req::Active::Polled(Box::new(poll))) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_split(comm: Handle, color: c_int, key: c_int, newcomm: *mut Handle) -> c_int {
    let c = comm!(comm);
    if color < 0 && color != MPI_UNDEFINED {
        return raise_on(comm, MPI_ERR_ARG);
    }
    let color = if color == MPI_UNDEFINED { None } else { Some(color as u32) };
    if let Some(i) = &c.inter {
        // An intercommunicator splits into intercommunicators (MPI-4.1 7.4.2): none of
        // the color on the other side gives MPI_COMM_NULL.
        return match i.ic.split(color, key) {
            Ok(s) => {
                let h = s.map_or(MPI_COMM_NULL, |s| COMMS.insert(CommObj::new_inter(s, *c.errhandler.lock())));
                // SAFETY: output argument.
                unsafe { *newcomm = h };
                MPI_SUCCESS
            }
            Err(e) => crate::raise::raise_error(comm, &e),
        };
    }
    match c.comm.split(color, key) {
        Ok(Some(s)) => {
            // SAFETY: output argument.
            unsafe { *newcomm = register_plain(&c, s) };
            MPI_SUCCESS
        }
        Ok(None) => {
            // SAFETY: output argument.
            unsafe { *newcomm = MPI_COMM_NULL };
            MPI_SUCCESS
        }
        Err(e) => crate::raise::raise_error(comm, &e),
    }
}

/// A number naming this node: the same for every process of the node (its host name).
pub(crate) fn node_color() -> u32 {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 { &buf[..buf.iter().position(|&b| b == 0).unwrap_or(buf.len())] } else { &b"?"[..] };
    // FNV-1a, folded into 31 bits (split colors are non-negative ints).
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in name {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    ((h ^ (h >> 32)) & 0x7fff_ffff) as u32
}

pub(crate) unsafe fn MPI_Comm_split_type(
    comm: Handle,
    split_type: c_int,
    key: c_int,
    info: Handle,
    newcomm: *mut Handle,
) -> c_int {
    let shared_asked = crate::info::value(info, "mpi_hw_resource_type").as_deref() == Some("mpi_shared_memory");
    let color = match split_type {
        MPI_UNDEFINED => MPI_UNDEFINED,
        MPI_COMM_TYPE_SHARED => node_color() as c_int,
        // The one hardware level runthrough knows is the node (shared memory): guided
        // splits give it when asked for by name, unguided ones find nothing smaller.
        MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED if shared_asked => node_color() as c_int,
        MPI_COMM_TYPE_HW_GUIDED | MPI_COMM_TYPE_RESOURCE_GUIDED | MPI_COMM_TYPE_HW_UNGUIDED => {
            let _c = comm!(comm);
            // SAFETY: output argument.
            unsafe { *newcomm = MPI_COMM_NULL };
            return MPI_SUCCESS;
        }
        _ => return raise_on(comm, MPI_ERR_ARG),
    };
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_split(comm, color, key, newcomm) }
}

pub(crate) unsafe fn MPI_Comm_create_group(comm: Handle, group: Handle, tag: c_int, newcomm: *mut Handle) -> c_int {
    let c = comm!(comm);
    let Some(g) = crate::group::lookup(group) else { return raise_on(comm, MPI_ERR_GROUP) };
    // Only the two groups whose members can agree without the others: all of `comm`
    // (a duplicate) and this process alone.
    if g.ranks == c.world {
        // SAFETY: forwarded arguments.
        return unsafe { MPI_Comm_dup(comm, newcomm) };
    }
    if g.ranks == [c.world[c.rank]] {
        // SAFETY: forwarded arguments.
        return unsafe { MPI_Comm_dup(MPI_COMM_SELF, newcomm) };
    }
    if !g.ranks.contains(&c.world[c.rank]) {
        return raise_on(comm, MPI_ERR_GROUP);
    }
    if c.inter.is_some() {
        crate::err::set_detail("MPI_Comm_create_group on an intercommunicator is not supported".into());
        return raise_on(comm, MPI_ERR_UNSUPPORTED_OPERATION);
    }
    // A proper subgroup: collective over its members only (MPI-4.1 7.4.2).
    let Some(locals) = g.ranks.iter().map(|x| c.world.iter().position(|y| y == x)).collect::<Option<Vec<usize>>>()
    else {
        return raise_on(comm, MPI_ERR_GROUP);
    };
    match c.comm.group().incl(&locals).and_then(|rg| c.comm.create_group(&rg, tag)) {
        Ok(Some(n)) => {
            // SAFETY: output argument.
            unsafe { *newcomm = register_plain(&c, n) };
            MPI_SUCCESS
        }
        Ok(None) => raise_on(comm, MPI_ERR_GROUP),
        Err(e) => crate::raise::raise_error(comm, &e),
    }
}

/// The intracommunicator of both groups (MPI-4.1 7.6.2): the facade's merge.
pub(crate) unsafe fn MPI_Intercomm_merge(intercomm: Handle, high: c_int, newintracomm: *mut Handle) -> c_int {
    let c = comm!(intercomm);
    let Some(i) = c.inter.as_ref() else {
        return raise_on(intercomm, MPI_ERR_COMM);
    };
    match i.ic.merge(high != 0) {
        Ok(m) => {
            // SAFETY: output argument.
            unsafe { *newintracomm = register_plain(&c, m) };
            MPI_SUCCESS
        }
        Err(e) => crate::raise::raise_error(intercomm, &e),
    }
}

/// MPI_Intercomm_create from any two disjoint groups, leaders and peer communicator:
/// the facade's `Comm::intercomm_create` (uniform under failures, R39). `peer_comm` and
/// `remote_leader` matter at the local leader only.
pub(crate) unsafe fn MPI_Intercomm_create(
    local_comm: Handle,
    local_leader: c_int,
    peer_comm: Handle,
    remote_leader: c_int,
    tag: c_int,
    newintercomm: *mut Handle,
) -> c_int {
    let lc = comm!(local_comm);
    if lc.inter.is_some() {
        return raise_on(local_comm, MPI_ERR_COMM);
    }
    if local_leader < 0 || local_leader as usize >= lc.size() {
        return raise_on(local_comm, MPI_ERR_RANK);
    }
    let peer = if lc.rank == local_leader as usize {
        let pc = comm!(peer_comm);
        if pc.inter.is_some() {
            return raise_on(local_comm, MPI_ERR_COMM);
        }
        if remote_leader < 0 || remote_leader as usize >= pc.size() {
            return raise_on(local_comm, MPI_ERR_RANK);
        }
        Some(pc)
    } else {
        None
    };
    let peer_comm = peer.as_ref().map(|p| &p.comm);
    match lc.comm.intercomm_create(local_leader as usize, peer_comm, remote_leader.max(0) as usize, tag) {
        Ok(ic) => {
            // SAFETY: output argument.
            unsafe { *newintercomm = COMMS.insert(CommObj::new_inter(ic, *lc.errhandler.lock())) };
            MPI_SUCCESS
        }
        Err(e) => crate::raise::raise_error(local_comm, &e),
    }
}

pub(crate) unsafe fn MPI_Comm_remote_size(comm: Handle, size: *mut c_int) -> c_int {
    let c = comm!(comm);
    match &c.inter {
        Some(i) => {
            // SAFETY: output argument.
            unsafe { *size = i.remote.len() as c_int };
            MPI_SUCCESS
        }
        None => raise_on(comm, MPI_ERR_COMM),
    }
}

pub(crate) unsafe fn MPI_Comm_remote_group(comm: Handle, group: *mut Handle) -> c_int {
    let c = comm!(comm);
    match &c.inter {
        Some(i) => {
            // SAFETY: output argument.
            unsafe { *group = crate::group::new_group(i.remote.clone()) };
            MPI_SUCCESS
        }
        None => raise_on(comm, MPI_ERR_COMM),
    }
}

pub(crate) unsafe fn MPI_Comm_create(comm: Handle, group: Handle, newcomm: *mut Handle) -> c_int {
    let c = comm!(comm);
    let g = match crate::group::lookup(group) {
        Some(g) => g,
        None => return raise_on(comm, MPI_ERR_GROUP),
    };
    if let Some(i) = &c.inter {
        // On an intercommunicator (MPI-4.1 7.4.2): `group` is a subgroup of the local
        // group; each side's members of its own `group` make the new intercommunicator,
        // in the group's order (a split by membership); none on either side gives
        // MPI_COMM_NULL.
        if g.ranks.iter().any(|w| !i.local.contains(w)) {
            return raise_on(comm, MPI_ERR_GROUP);
        }
        let me = i.local[c.user_rank()];
        let pos = g.ranks.iter().position(|&w| w == me);
        let color = if pos.is_some() { 0 } else { MPI_UNDEFINED };
        // SAFETY: forwarded arguments.
        return unsafe { MPI_Comm_split(comm, color, pos.unwrap_or(0) as c_int, newcomm) };
    }
    // The group's members as ranks of `comm`.
    let mut local = Vec::with_capacity(g.ranks.len());
    for w in &g.ranks {
        match c.world.iter().position(|x| x == w) {
            Some(i) => local.push(i),
            None => return raise_on(comm, MPI_ERR_GROUP),
        }
    }
    let rg = match c.comm.group().incl(&local) {
        Ok(rg) => rg,
        Err(e) => return crate::raise::raise_error(comm, &e),
    };
    match c.comm.create(&rg) {
        Ok(Some(n)) => {
            // SAFETY: output argument.
            unsafe { *newcomm = register_plain(&c, n) };
            MPI_SUCCESS
        }
        Ok(None) => {
            // SAFETY: output argument.
            unsafe { *newcomm = MPI_COMM_NULL };
            MPI_SUCCESS
        }
        Err(e) => crate::raise::raise_error(comm, &e),
    }
}

pub(crate) unsafe fn MPI_Comm_free(comm: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *comm };
    if h == MPI_COMM_WORLD || h == MPI_COMM_SELF || h == MPI_COMM_NULL {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM);
    }
    let Some(c) = COMMS.get(h) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_COMM) };
    crate::commobj::forget_parent(h);
    // Its nonblocking collectives still running end first: their messages must not
    // meet a later communicator on the same context.
    c.comm.settle_owned();
    let rc = delete_attrs(&c, h);
    COMMS.remove(h);
    // SAFETY: in/out argument.
    unsafe { *comm = MPI_COMM_NULL };
    if rc != MPI_SUCCESS {
        return raise_on(MPI_COMM_WORLD, rc);
    }
    MPI_SUCCESS
}

/// Frees the communicator once its pending communication is done; completes normally
/// whatever failed (R40: the freeing completes what failed, R26).
pub(crate) unsafe fn MPI_Comm_disconnect(comm: *mut Handle) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Comm_free(comm) }
}

pub(crate) unsafe fn MPI_Comm_compare(comm1: Handle, comm2: Handle, result: *mut c_int) -> c_int {
    let a = comm!(comm1);
    let b = comm!(comm2);
    let r = if comm1 == comm2 {
        MPI_IDENT
    } else if a.world == b.world {
        MPI_CONGRUENT
    } else {
        let mut x = a.world.clone();
        let mut y = b.world.clone();
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

pub(crate) unsafe fn MPI_Comm_group(comm: Handle, group: *mut Handle) -> c_int {
    let c = comm!(comm);
    let g = c.inter.as_ref().map_or_else(|| c.world.clone(), |i| i.local.clone());
    // SAFETY: output argument.
    unsafe { *group = crate::group::new_group(g) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_set_name(comm: Handle, comm_name: *const c_char) -> c_int {
    let c = comm!(comm);
    if comm_name.is_null() {
        return raise_on(comm, MPI_ERR_ARG);
    }
    // SAFETY: NUL-terminated string (MPI contract).
    *c.name.lock() = unsafe { std::ffi::CStr::from_ptr(comm_name) }.to_string_lossy().into_owned();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_get_name(comm: Handle, comm_name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let name = if comm == MPI_COMM_NULL {
        "MPI_COMM_NULL".to_string()
    } else {
        let c = comm!(comm);
        let n = c.name.lock().clone();
        n
    };
    // SAFETY: MPI_MAX_OBJECT_NAME bytes (MPI contract).
    unsafe { crate::err::put_string(&name, comm_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_set_info(comm: Handle, info: Handle) -> c_int {
    let _c = comm!(comm);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Comm_get_info(comm: Handle, info_used: *mut Handle) -> c_int {
    let _c = comm!(comm);
    // SAFETY: forwarded output argument.
    unsafe { crate::info::MPI_Info_create(info_used) }
}

/// The info hints are ignored (none is defined for duplication).
pub(crate) unsafe fn MPI_Comm_idup_with_info(
    comm: Handle,
    info: Handle,
    newcomm: *mut Handle,
    request: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { MPI_Comm_idup(comm, newcomm, request) }
}
