//! Pinning ranks to cores (`--bind-to core|numa|none`).
//!
//! Parts: [`BindPolicy`] (parsed from the launcher option), [`bind`] (applies it to the
//! calling thread with `core_affinity`, or hwloc for a NUMA node). Call it early, from the
//! thread that will run the rank, before spawning helpers (they inherit the mask) and
//! before [`Segment::place_inbound`](crate::Segment::place_inbound).

use std::fmt;
use std::str::FromStr;

use crate::numa::Topology;
use crate::Error;

/// How to pin a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum BindPolicy {
    /// Leave the affinity alone.
    #[default]
    None,
    /// One physical core per local rank (all its hardware threads): core
    /// `local_rank % ncores` of the allowed cores, as hwloc lists them.
    Core,
    /// One hardware thread (logical CPU) per local rank: CPU `local_rank % ncpus` of the
    /// allowed ones (two ranks may share a core's hardware threads).
    HwThread,
    /// The whole NUMA node `local_rank % nnodes` (same as `None` on a single-node machine).
    Numa,
}

impl FromStr for BindPolicy {
    type Err = Error;

    fn from_str(s: &str) -> Result<BindPolicy, Error> {
        match s {
            "none" => Ok(BindPolicy::None),
            "core" => Ok(BindPolicy::Core),
            "hwthread" => Ok(BindPolicy::HwThread),
            "numa" => Ok(BindPolicy::Numa),
            other => Err(Error::BadBindPolicy(other.to_owned())),
        }
    }
}

impl fmt::Display for BindPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BindPolicy::None => "none",
            BindPolicy::Core => "core",
            BindPolicy::HwThread => "hwthread",
            BindPolicy::Numa => "numa",
        })
    }
}

/// Applies `policy` to the calling thread for the rank with node-local index `local_rank`.
/// Returns the (first) CPU it was bound to (`Core`, `HwThread`), or `None` when not bound
/// to a single core.
pub fn bind(policy: BindPolicy, local_rank: usize) -> Result<Option<usize>, Error> {
    match policy {
        BindPolicy::None => Ok(None),
        BindPolicy::Core => {
            let mut topo = Topology::detect();
            if !topo.is_fallback() {
                let pus = topo.bind_thread_to_core(local_rank)?;
                tracing::debug!(local_rank, ?pus, "bound to a physical core");
                return Ok(pus.first().map(|&p| p as usize));
            }
            // No hwloc: a logical CPU, as --bind-to hwthread.
            bind(BindPolicy::HwThread, local_rank)
        }
        BindPolicy::HwThread => {
            let cores = core_affinity::get_core_ids()
                .filter(|c| !c.is_empty())
                .ok_or(Error::Affinity("cannot list the allowed cores"))?;
            let core = cores[local_rank % cores.len()];
            if !core_affinity::set_for_current(core) {
                return Err(Error::Affinity("sched_setaffinity refused"));
            }
            tracing::debug!(local_rank, core = core.id, "bound to core");
            Ok(Some(core.id))
        }
        BindPolicy::Numa => {
            let mut topo = Topology::detect();
            let nodes = topo.numa_nodes();
            if nodes <= 1 {
                tracing::info!(
                    local_rank,
                    topology = %topo.describe(),
                    "--bind-to numa on a single-node machine: leaving affinity unchanged"
                );
                return Ok(None);
            }
            let node = (local_rank % nodes) as u32;
            topo.bind_thread_to_node(node)?;
            tracing::debug!(local_rank, node, "bound to NUMA node");
            Ok(None)
        }
    }
}
