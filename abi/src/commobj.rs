//! A communicator as the C layer sees it, the groups of an intercommunicator, and the
//! table of the program's communicator handles. MPI_COMM_WORLD and MPI_COMM_SELF, and
//! the lookup of a handle, are `rt.rs`'s; the calls on communicators are `comm.rs`'s.

use std::ffi::c_int;
use std::sync::Arc;

use parking_lot::Mutex;
use runthrough::Comm;

use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::types::Handle;

/// A communicator as the C layer sees it.
pub(crate) struct CommObj {
    pub(crate) comm: Comm,
    /// World ranks of the members, by communicator rank.
    pub(crate) world: Vec<u32>,
    pub(crate) rank: usize,
    pub(crate) errhandler: Mutex<Handle>,
    /// Its attributes (`keyval.rs`; the calls are `attr.rs`'s).
    pub(crate) attrs: Mutex<crate::keyval::Attrs>,
    pub(crate) name: Mutex<String>,
    /// Failures acknowledged by MPIX_Comm_failure_ack (world ranks).
    pub(crate) acked: Mutex<Vec<u32>>,
    /// For an intercommunicator: the local and remote groups (world ranks). It runs on
    /// an intracommunicator over both (`comm`, `world`, `rank` above), through which its
    /// point-to-point ranks are translated.
    pub(crate) inter: Option<Inter>,
    /// This member's neighbourhood in the communicator's topology, computed at the first
    /// neighbourhood collective (a topology never changes): `None` without a topology.
    pub(crate) hood: std::sync::OnceLock<Option<runthrough::Neighborhood>>,
}

/// The two groups of an intercommunicator (world ranks) and the facade's
/// inter-communicator, whose calls (creation, merge, collectives) these translate.
#[derive(Debug, Clone)]
pub(crate) struct Inter {
    pub(crate) local: Vec<u32>,
    pub(crate) remote: Vec<u32>,
    pub(crate) ic: runthrough::InterComm,
}

impl CommObj {
    /// This process's rank as the program sees it (in the local group of an
    /// intercommunicator).
    pub(crate) fn user_rank(&self) -> usize {
        match &self.inter {
            Some(i) => i.local.iter().position(|&w| w == self.world[self.rank]).unwrap_or(0),
            None => self.rank,
        }
    }

    /// The size as the program sees it (the local group's for an intercommunicator).
    pub(crate) fn user_size(&self) -> usize {
        match &self.inter {
            Some(i) => i.local.len(),
            None => self.world.len(),
        }
    }

    /// The rank in the underlying communicator of a peer named by the program (a remote
    /// group rank on an intercommunicator); `None` when out of range.
    pub(crate) fn peer_index(&self, r: c_int) -> Option<usize> {
        if r < 0 {
            return None;
        }
        match &self.inter {
            Some(i) => {
                let w = *i.remote.get(r as usize)?;
                self.world.iter().position(|&x| x == w)
            }
            None => ((r as usize) < self.world.len()).then_some(r as usize),
        }
    }

    /// The rank the program sees for a message source `idx` of the underlying
    /// communicator.
    pub(crate) fn source_rank(&self, idx: usize) -> c_int {
        match &self.inter {
            Some(i) => self
                .world
                .get(idx)
                .and_then(|w| i.remote.iter().position(|x| x == w))
                .map_or(MPI_PROC_NULL, |p| p as c_int),
            None => idx as c_int,
        }
    }
}

// SAFETY: the attribute values are opaque words the program stores and reads back; the
// library never dereferences them (the copy/delete callbacks get them back as values).
unsafe impl Send for CommObj {}
// SAFETY: as above; every other field is Sync.
unsafe impl Sync for CommObj {}

impl CommObj {
    pub(crate) fn new(comm: Comm, errhandler: Handle, name: &str) -> Arc<Self> {
        comm.set_error_mode(runthrough::ErrorMode::ErrorsReturn);
        let world: Vec<u32> = comm.group().world_ranks().into_iter().map(|r| r as u32).collect();
        let rank = comm.rank();
        Arc::new(CommObj {
            comm,
            world,
            rank,
            errhandler: Mutex::new(errhandler),
            attrs: Mutex::default(),
            name: Mutex::new(name.to_string()),
            acked: Mutex::new(Vec::new()),
            inter: None,
            hood: std::sync::OnceLock::new(),
        })
    }

    /// As [`CommObj::new`], for inter-communicator `ic` (over its bridge).
    pub(crate) fn new_inter(ic: runthrough::InterComm, errhandler: Handle) -> Arc<Self> {
        ic.set_error_mode(runthrough::ErrorMode::ErrorsReturn);
        let world = |g: runthrough::Group| g.world_ranks().into_iter().map(|r| r as u32).collect();
        let inter = Inter { local: world(ic.group()), remote: world(ic.remote_group()), ic: ic.clone() };
        let mut c = Arc::into_inner(CommObj::new(ic.bridge().clone(), errhandler, "")).expect("a fresh communicator");
        c.inter = Some(inter);
        Arc::new(c)
    }

    pub(crate) fn size(&self) -> usize {
        self.world.len()
    }
}

pub(crate) static COMMS: Table<CommObj> = Table::new(Kind::Comm);

/// The parent inter-communicator's handle, made at the first `MPI_Comm_get_parent`;
/// `Some(None)` once the program freed or disconnected it (then `MPI_COMM_NULL`).
pub(crate) static PARENT: Mutex<Option<Option<Handle>>> = Mutex::new(None);

/// Called when communicator `h` is freed: a freed parent stays gone.
pub(crate) fn forget_parent(h: Handle) {
    let mut p = PARENT.lock();
    if *p == Some(Some(h)) {
        *p = Some(None);
    }
}
