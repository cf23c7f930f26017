//! Safe wrapper over libfabric for runthrough (DESIGN T1).
//!
//! This crate moves bytes between endpoints and reports peer errors; it knows nothing of
//! MPI. The bindgen-generated FFI, the RAII handle types and the provider selection land
//! with the libfabric issue; until then the crate only names the providers it will drive.
#![forbid(unsafe_code)]

/// A libfabric provider runthrough knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// `tcp;ofi_rxm`: commodity Ethernet (and loopback in tests).
    Tcp,
    /// `sockets`: the portable reference provider.
    Sockets,
    /// `verbs;ofi_rxm`: InfiniBand / RoCE.
    Verbs,
    /// `cxi`: HPE Slingshot.
    Cxi,
}

impl Provider {
    /// The provider name as libfabric's `fi_info` spells it.
    pub fn fi_name(self) -> &'static str {
        match self {
            Provider::Tcp => "tcp;ofi_rxm",
            Provider::Sockets => "sockets",
            Provider::Verbs => "verbs;ofi_rxm",
            Provider::Cxi => "cxi",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_match_fi_info() {
        assert_eq!(Provider::Tcp.fi_name(), "tcp;ofi_rxm");
        assert_eq!(Provider::Cxi.fi_name(), "cxi");
    }
}
