//! Every environment variable runthrough reads, in one table: `rtrun --info` prints it,
//! the README's table is generated from it (`rtrun --info --markdown`; `tests/tunables.rs`
//! checks the README holds exactly that and that every `RT_*` name the code reads is
//! here).

/// Who sets a variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A user's tunable.
    Tunable,
    /// Set by `rtrun` for each rank (the bootstrap); a user sets them only to start ranks
    /// without it.
    Launcher,
    /// libfabric's, which runthrough sets for the ranks unless the user did.
    Fabric,
}

/// One variable: name, default, meaning.
#[derive(Debug, Clone, Copy)]
pub struct Tunable {
    /// The variable.
    pub name: &'static str,
    /// Its default (or what it is when unset).
    pub default: &'static str,
    /// What it does.
    pub meaning: &'static str,
    /// Who sets it.
    pub kind: Kind,
}

const fn t(name: &'static str, default: &'static str, meaning: &'static str) -> Tunable {
    Tunable { name, default, meaning, kind: Kind::Tunable }
}

const fn l(name: &'static str, meaning: &'static str) -> Tunable {
    Tunable { name, default: "set by rtrun", meaning, kind: Kind::Launcher }
}

/// The table.
pub const TUNABLES: &[Tunable] = &[
    t("RT_LOG", "unset: no log", "log filter for rtrun and every rank on stderr: error, warn, info, debug, trace, or a tracing filter (runthrough_engine=debug)"),
    t("RT_DEBUG", "unset", "1: rtrun's log at debug (the older switch; RT_LOG wins)"),
    t("RT_EAGER_LIMIT", "16384; on one node 32768 (a core per rank) or 65536", "largest message sent eagerly, bytes"),
    t("RT_CMA_MIN", "524288 where ranks outnumber cores or over a fabric; else measured per size class", "smallest rendezvous pulled by single copy (CMA or RMA); smaller ones stream through the rings"),
    t("RT_RING_BYTES", "262144 where ranks outnumber cores; else 4 MiB shared by a rank's inbound rings", "bytes of each shared-memory ring (a power of two)"),
    t("RT_SPIN_POLLS", "4000; 16 where ranks outnumber cores", "busy polls of a wait before it yields the CPU"),
    t("RT_ENGINE_LOCK_BIAS", "1", "0: the thread that called init takes the engine lock like any other (no membarrier fast path)"),
    t("RT_SHM_CMA", "1", "0: no single copy (CMA) between ranks of a node"),
    t("RT_COLL_SHM", "1", "0: no shared-memory collectives or register agreement (everything over messages)"),
    t("RT_COLL_FLAT_MAX", "8", "members up to which short collectives over messages go flat"),
    t("RT_NOTICE_FLOOD_MAX", "64", "members up to which revoke, corrupt and signal notices are flooded (one hop); above, they travel the log2 n overlay"),
    t("RT_COLL_CMA_MIN", "16384", "bytes per member from which a node's broadcasts (ranks outnumbering cores), allgathers and alltoalls (a core per rank) are pulled in place by CMA"),
    t("RT_COLL_BULK", "1048576 when two or more ranks share the node, else 0", "bytes of each bulk buffer through which a node's reductions of 16 KiB or more combine in place (a multiple of 4096; 0: none)"),
    t("RT_FT", "1", "0: no failure detector (rtrun --no-ft)"),
    t("RT_FT_PERIOD_MS", "10", "failure-detector heartbeat period (rtrun --ft-period)"),
    t("RT_FT_TIMEOUT_MS", "100, times ranks/cores where ranks outnumber cores", "silence after which a rank is suspected (rtrun --ft-timeout)"),
    t("RT_WATCH_MS", "10", "how often the progress thread asks the launcher which ranks exited"),
    t("RT_LAUNCHER_NOTICES", "1", "0: ignore the launcher's notices that ranks exited"),
    t("RT_PIDFD", "1", "0: no pidfd watch of the node's peers"),
    t("RT_WITNESS", "1", "0: no launcher witness (a suspected rank is failed on this node's own evidence)"),
    t("RT_WITNESS_TIMEOUT_MS", "2000", "how long a claim to the launcher may go unanswered before this rank takes itself for cut off"),
    t("RT_NODE_CORES", "the CPUs this process may run on", "the cores this node's ranks share (containers sharing a host)"),
    t("RT_TRANSPORT", "auto", "auto, shm or fabric (rtrun --transport)"),
    t("RT_PROVIDER", "auto", "libfabric provider: auto, tcp, sockets, verbs or cxi (rtrun --provider)"),
    t("RT_FABRIC_ADDR", "unset", "address this rank's fabric endpoint binds to (rtrun --host NAME=IP)"),
    t("RT_FABRIC_IFACE", "unset: the first non-loopback interface", "interface whose address the fabric endpoint binds to"),
    t("RT_FABRIC_STALL_MS", "5000", "how long a peer's sends may stay refused before the peer is reported failed (fabric)"),
    t("RT_BIND", "none", "core, hwthread, numa or none (rtrun --bind-to)"),
    t("RT_REPORT_BINDINGS", "unset", "1: each rank prints its binding at start-up (rtrun --report-bindings)"),
    t("RT_FATAL_SCOPE", "group", "what ErrorsAreFatal aborts: group (the communicator's) or job"),
    t("RT_INITIAL_ERRHANDLER", "mpi_errors_are_fatal", "the error handler MPI_COMM_WORLD, MPI_COMM_SELF and sessions start with (rtrun --initial-errhandler)"),
    t("RT_PMIX_DETACH", "1", "0: a PMIx client stays attached after start-up"),
    t("RT_ABI_TRACE", "unset", "1: libmpi_abi.so.1 logs each unsupported call on stderr"),
    l("RT_RANK", "this rank"),
    l("RT_SIZE", "ranks in the job"),
    l("RT_LOCAL_RANK", "this rank's index among its host's ranks"),
    l("RT_LOCAL_SIZE", "ranks on this host"),
    l("RT_NODE", "this rank's host name"),
    l("RT_JOBID", "the job's id"),
    l("RT_KV_ADDR", "the launcher's key-value service"),
    l("RT_KV_SECRET", "the job's secret (through a launch agent: `stdin`, the secret on standard input)"),
    l("RT_SHM_NAME", "the host's shared-memory segment"),
    l("RT_UNIVERSE_SIZE", "MPI_UNIVERSE_SIZE (rtrun --universe, else twice the ranks, at least 16 more)"),
    l("RT_SPAWN_PARENTS", "in a spawned process: how many parents its world has (ranks 0..P; docs/SPAWN.md)"),
    l("RT_APPNUM", "in a spawned process: its program's index in the spawn (MPI_APPNUM)"),
    Tunable {
        name: "FI_TCP_IFACE",
        default: "lo on one host (rtrun)",
        meaning: "libfabric tcp's interface; across hosts the endpoint binds to its address instead",
        kind: Kind::Fabric,
    },
    Tunable {
        name: "FI_SOCKETS_IFACE",
        default: "lo on one host (rtrun)",
        meaning: "the same for libfabric's sockets provider",
        kind: Kind::Fabric,
    },
    Tunable {
        name: "FI_OFI_RXM_MSG_RX_SIZE",
        default: "256 (rtrun)",
        meaning: "receive buffers ofi_rxm posts to its message provider (libfabric's 4096 cost 64 MiB a rank)",
        kind: Kind::Fabric,
    },
];

/// The table as `rtrun --info` prints it: one variable a line.
pub fn text() -> String {
    let w = TUNABLES.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let mut s = String::new();
    for (title, kind) in [
        ("tunables", Kind::Tunable),
        ("set by rtrun for each rank", Kind::Launcher),
        ("libfabric's, set for the ranks unless given", Kind::Fabric),
    ] {
        s += &format!("{title}:\n");
        for t in TUNABLES.iter().filter(|t| t.kind == kind) {
            s += &format!("  {:w$}  {} (default: {})\n", t.name, t.meaning, t.default);
        }
    }
    s
}

/// The table in Markdown (the README's).
pub fn markdown() -> String {
    let mut s = String::from("| variable | default | meaning |\n|---|---|---|\n");
    for t in TUNABLES {
        let default = if t.kind == Kind::Launcher { "set by `rtrun`" } else { t.default };
        s += &format!("| `{}` | {} | {} |\n", t.name, default, t.meaning);
    }
    s
}
