//! What the fault-tolerance state machines report to the engine.

/// An event for the engine, returned by `poll_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FtEvent {
    /// `rank` is now known failed here; the failure set's epoch became `epoch`.
    /// The engine fails every request touching `rank` (T-FD, R10, R13).
    Failed {
        /// The failed rank.
        rank: u32,
        /// The epoch of the failure set once `rank` was added (1 for the first failure).
        epoch: u32,
    },
    /// This rank has been declared failed by others (it was wrongly suspected, e.g.
    /// stopped and resumed). It must stop: the engine exits and never rejoins
    /// (T-FD). The state machine is inert from now on.
    Excluded,
    /// In witnessed mode ([`crate::Detector::set_witnessed`]) the observed predecessor
    /// `rank` stayed silent past its window: the engine asks the witness (the launcher),
    /// and applies the verdict with [`crate::Detector::handle_local_failure`] only once
    /// the witness confirmed it (R32). Reported once per suspect.
    Suspected {
        /// The silent rank.
        rank: u32,
    },
}
