//! NUMA topology (hwloc, through the `hwloc2` crate) and memory placement results.
//!
//! Parts: [`Topology`] (detection, node count, the calling thread's node, a one-line
//! description), [`Placement`] (what [`Segment::place_inbound`](crate::Segment::place_inbound)
//! did). The memory-binding system call itself (`mbind`) sits with the mapping in
//! `segment.rs`, the crate's place for unsafe code; this module only decides *where*.
//!
//! Rings are placed on the *receiver's* node (the receiver polls them; the sender's
//! stores are posted writes), as in Open MPI `vader` / UCX `mm`.
//!
//! Known bug worked around: `hwloc2` 2.2's `objects_with_type(&ObjectType::NUMANode)`
//! panics with hwloc 2.x (NUMA nodes have a virtual depth), so it is never called: NUMA
//! locality is read from objects' `nodeset()` (the root's for the node count, a PU's for
//! the current node). Every hwloc call is additionally guarded against panics: detection
//! never fails, it falls back to a single-node view that says so.

use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

use hwloc2::{CpuBindFlags, CpuSet, ObjectType};

use crate::Error;

/// What the topology knows, detected once.
pub struct Topology {
    hw: Option<hwloc2::Topology>,
    nodes: usize,
    cores: usize,
    pus: usize,
    /// Why hwloc is not used, when it is not.
    fallback: Option<String>,
}

impl fmt::Debug for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Topology")
            .field("hwloc", &self.hw.is_some())
            .field("nodes", &self.nodes)
            .field("cores", &self.cores)
            .field("pus", &self.pus)
            .field("fallback", &self.fallback)
            .finish()
    }
}

/// Counts objects of a type that has a normal (non-virtual) depth.
fn count(hw: &hwloc2::Topology, t: ObjectType) -> usize {
    hw.depth_for_type(&t).map(|d| hw.size_at_depth(d) as usize).unwrap_or(0)
}

impl Topology {
    /// Detects the machine's topology. Never fails or panics: if hwloc cannot be used, the
    /// result is a single-node view whose [`describe`](Topology::describe) says why.
    pub fn detect() -> Topology {
        let detected = catch_unwind(|| {
            let hw = hwloc2::Topology::new()?;
            let nodes = hw.object_at_root().nodeset().map(|s| s.weight()).filter(|&w| w > 0).unwrap_or(1) as usize;
            let cores = count(&hw, ObjectType::Core);
            let pus = count(&hw, ObjectType::PU);
            Some((hw, nodes, cores, pus))
        });
        match detected {
            Ok(Some((hw, nodes, cores, pus))) => {
                let t = Topology { hw: Some(hw), nodes, cores, pus, fallback: None };
                tracing::debug!(topology = %t.describe(), "hwloc topology detected");
                t
            }
            Ok(None) => Topology::fallback("hwloc could not load the topology"),
            Err(_) => Topology::fallback("hwloc panicked during detection"),
        }
    }

    /// A single-node view without hwloc (also useful in tests).
    pub fn single_node_fallback(reason: &str) -> Topology {
        Topology::fallback(reason)
    }

    fn fallback(reason: &str) -> Topology {
        tracing::warn!(reason, "NUMA topology unavailable; assuming a single node");
        let pus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Topology { hw: None, nodes: 1, cores: pus, pus, fallback: Some(reason.to_owned()) }
    }

    /// Number of NUMA nodes (at least 1).
    pub fn numa_nodes(&self) -> usize {
        self.nodes
    }

    /// Number of physical cores hwloc reports (logical CPUs in the fallback view).
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Number of processing units (hardware threads).
    pub fn pus(&self) -> usize {
        self.pus
    }

    /// True when hwloc is unavailable and the single-node fallback is in use.
    pub fn is_fallback(&self) -> bool {
        self.fallback.is_some()
    }

    /// The OS index of the NUMA node of the CPU the calling thread runs on now, if known.
    /// On a single-node machine this is that node (usually 0).
    pub fn current_node(&self) -> Option<u32> {
        let hw = self.hw.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| {
            if self.nodes <= 1 {
                let first = hw.object_at_root().nodeset()?.first();
                return u32::try_from(first).ok().or(Some(0));
            }
            let cpu = u32::try_from(hw.get_cpu_location(CpuBindFlags::CPUBIND_THREAD)?.first()).ok()?;
            let depth = hw.depth_for_type(&ObjectType::PU).ok()?;
            let pu = hw.objects_at_depth(depth).into_iter().find(|o| o.os_index() == cpu)?;
            u32::try_from(pu.nodeset()?.first()).ok()
        }))
        .ok()
        .flatten()
    }

    /// Where the calling thread's memory should be bound: `Ok(None)` when placement is
    /// trivial (one node), `Ok(Some(node))` for a multi-node machine, `Err(reason)` when
    /// the node cannot be told.
    pub(crate) fn placement_node(&self) -> Result<Option<u32>, String> {
        if self.nodes <= 1 {
            return Ok(None);
        }
        self.current_node().map(Some).ok_or_else(|| "cannot tell the calling thread's NUMA node".to_owned())
    }

    /// OS indexes of the processing units local to NUMA node `node`.
    fn pus_of_node(&self, node: u32) -> Option<CpuSet> {
        let hw = self.hw.as_ref()?;
        catch_unwind(AssertUnwindSafe(|| {
            let depth = hw.depth_for_type(&ObjectType::PU).ok()?;
            let set: CpuSet = hw
                .objects_at_depth(depth)
                .into_iter()
                .filter(|o| o.nodeset().is_some_and(|s| s.is_set(node)))
                .map(|o| o.os_index())
                .collect();
            (!set.is_empty()).then_some(set)
        }))
        .ok()
        .flatten()
    }

    /// Binds the calling thread to the processing units of NUMA node `node`.
    pub(crate) fn bind_thread_to_node(&mut self, node: u32) -> Result<(), Error> {
        let set =
            self.pus_of_node(node).ok_or_else(|| Error::Numa(format!("no processing units found on node {node}")))?;
        let hw = self.hw.as_mut().ok_or_else(|| Error::Numa("hwloc unavailable".to_owned()))?;
        hw.set_cpubind(set, CpuBindFlags::CPUBIND_THREAD)
            .map_err(|e| Error::Numa(format!("binding to node {node}: {e:?}")))
    }

    /// Binds the calling thread to every processing unit of physical core
    /// `index % cores` (hwloc's order, cores whose units this process may use), so two
    /// ranks never share a core's hardware threads. Returns the OS indexes of its units.
    pub(crate) fn bind_thread_to_core(&mut self, index: usize) -> Result<Vec<u32>, Error> {
        let hw = self.hw.as_mut().ok_or_else(|| Error::Numa("hwloc unavailable".to_owned()))?;
        let found = catch_unwind(AssertUnwindSafe(|| {
            let depth = hw.depth_for_type(&ObjectType::Core).ok()?;
            let cores: Vec<CpuSet> =
                hw.objects_at_depth(depth).into_iter().filter_map(|o| o.cpuset()).filter(|s| s.weight() > 0).collect();
            let set = cores.get(index % cores.len().max(1))?.clone();
            let pus: Vec<u32> = set.clone().into_iter().collect();
            Some((set, pus))
        }))
        .ok()
        .flatten();
        let (set, pus) = found.ok_or_else(|| Error::Numa("hwloc lists no cores".to_owned()))?;
        hw.set_cpubind(set, CpuBindFlags::CPUBIND_THREAD)
            .map_err(|e| Error::Numa(format!("binding to a core: {e:?}")))?;
        Ok(pus)
    }

    /// One line for logs, e.g. `"1 NUMA node (single-node machine: placement is trivial),
    /// 2 cores, 2 PUs"`.
    pub fn describe(&self) -> String {
        match (&self.fallback, self.nodes) {
            (Some(reason), _) => format!(
                "1 NUMA node assumed ({reason}; single-node fallback: placement is trivial), \
                 {} logical CPUs",
                self.pus
            ),
            (None, 1) => format!(
                "1 NUMA node (single-node machine: placement is trivial), {} cores, {} PUs",
                self.cores, self.pus
            ),
            (None, n) => format!("{n} NUMA nodes, {} cores, {} PUs", self.cores, self.pus),
        }
    }
}

/// What placing a memory region did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// One NUMA node: nothing to bind; the region was prefaulted.
    SingleNode,
    /// The region was bound to NUMA node `node` and prefaulted there.
    Bound {
        /// OS index of the node.
        node: u32,
    },
    /// Binding failed (the region still works, with the kernel's default placement).
    Failed(String),
}

impl Placement {
    /// True for [`Placement::Failed`].
    pub fn is_failed(&self) -> bool {
        matches!(self, Placement::Failed(_))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Placement::SingleNode => f.write_str("single NUMA node (nothing to bind)"),
            Placement::Bound { node } => write!(f, "bound to NUMA node {node}"),
            Placement::Failed(why) => write!(f, "placement failed: {why}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fallback_describes_itself() {
        let t = Topology::single_node_fallback("test");
        assert_eq!(t.numa_nodes(), 1);
        assert!(t.is_fallback());
        assert!(t.describe().contains("test"));
        assert_eq!(t.current_node(), None);
        assert_eq!(t.placement_node(), Ok(None));
        let mut t = Topology::single_node_fallback("test");
        assert!(matches!(t.bind_thread_to_node(0), Err(Error::Numa(_))));
    }

    #[test]
    fn bind_thread_to_node_zero() {
        // The multi-node path of `--bind-to numa`, on node 0 (present everywhere).
        std::thread::spawn(|| {
            let mut t = Topology::detect();
            t.bind_thread_to_node(0).expect("bind to node 0");
            assert_eq!(t.current_node(), Some(0));
            assert!(matches!(t.bind_thread_to_node(999), Err(Error::Numa(_))));
        })
        .join()
        .unwrap();
    }
}
