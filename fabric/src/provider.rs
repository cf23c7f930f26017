//! Run-time provider selection (T1): pure decision logic.
//!
//! Parts:
//! - [`Provider`]: the providers runthrough drives (`tcp;ofi_rxm`, `sockets`,
//!   `verbs;ofi_rxm`, `cxi`), and [`ProviderRequest`] (`auto|tcp|sockets|verbs|cxi`, from a
//!   flag or the `RT_PROVIDER` environment variable).
//! - [`select`]: given what `fi_getinfo` listed ([`InfoAttrs`]) and the request, the entry
//!   to open and a [`Selection`] (mr_mode handling, inject/eager/max sizes, tag bits), or
//!   a [`SelectError`] listing why each candidate was refused. `auto` prefers
//!   cxi > verbs > tcp > sockets; within one provider, libfabric's order.
//! - [`open_selected`]: the impure wrapper — `fi_getinfo` then [`select`].
//!
//! Nothing here needs the hardware: the verbs and cxi cases are unit-tested on synthetic
//! attributes and take the same path as tcp when those providers are present.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ffi;
use crate::info::{Hints, Info, InfoAttrs, InfoList};
use crate::mr_attr::{MrMode, MrPolicy};

/// Environment variable read by [`ProviderRequest::from_env`].
pub const PROVIDER_ENV: &str = "RT_PROVIDER";

/// Default eager/rendezvous switch point, matching the rxm and cxi defaults (16 KiB).
pub const DEFAULT_EAGER_LIMIT_BYTES: usize = 16 * 1024;
/// Eager limit for `sockets`, which has no rendezvous of its own and copies through its
/// own buffers; larger eager messages avoid a round trip.
pub const SOCKETS_EAGER_LIMIT_BYTES: usize = 64 * 1024;

/// A libfabric provider runthrough knows how to drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
    /// All providers, in `auto` preference order.
    pub const PREFERENCE: [Provider; 4] = [Provider::Cxi, Provider::Verbs, Provider::Tcp, Provider::Sockets];

    /// The provider name as libfabric's `fi_info` spells it.
    pub fn fi_name(self) -> &'static str {
        match self {
            Provider::Tcp => "tcp;ofi_rxm",
            Provider::Sockets => "sockets",
            Provider::Verbs => "verbs;ofi_rxm",
            Provider::Cxi => "cxi",
        }
    }

    /// Which provider an `fi_info` `prov_name` is, if one we drive.
    pub fn from_fi_name(name: &str) -> Option<Provider> {
        Provider::PREFERENCE.into_iter().find(|p| p.fi_name() == name)
    }

    /// The eager limit we use on this provider (before clamping to its max message size).
    pub fn eager_limit_bytes(self) -> usize {
        match self {
            Provider::Sockets => SOCKETS_EAGER_LIMIT_BYTES,
            Provider::Tcp | Provider::Verbs | Provider::Cxi => DEFAULT_EAGER_LIMIT_BYTES,
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.fi_name())
    }
}

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProviderRequest {
    /// The best present provider.
    #[default]
    Auto,
    /// Exactly this one.
    Only(Provider),
}

impl ProviderRequest {
    /// From `RT_PROVIDER` (unset or empty → `auto`).
    ///
    /// # Errors
    /// [`Error::InvalidArg`] for an unknown name.
    pub fn from_env() -> Result<ProviderRequest> {
        match std::env::var(PROVIDER_ENV) {
            Ok(v) if !v.trim().is_empty() => v.parse(),
            _ => Ok(ProviderRequest::Auto),
        }
    }

    /// The hints to pass to `fi_getinfo` for this request.
    pub fn hints(self) -> Hints {
        match self {
            ProviderRequest::Auto => Hints::default(),
            ProviderRequest::Only(p) => Hints::provider(p.fi_name()),
        }
    }
}

impl FromStr for ProviderRequest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "auto" => ProviderRequest::Auto,
            "tcp" | "tcp;ofi_rxm" => ProviderRequest::Only(Provider::Tcp),
            "sockets" => ProviderRequest::Only(Provider::Sockets),
            "verbs" | "verbs;ofi_rxm" => ProviderRequest::Only(Provider::Verbs),
            "cxi" => ProviderRequest::Only(Provider::Cxi),
            _ => return Err(Error::InvalidArg("provider must be auto|tcp|sockets|verbs|cxi")),
        })
    }
}

impl fmt::Display for ProviderRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProviderRequest::Auto => f.write_str("auto"),
            ProviderRequest::Only(p) => p.fmt(f),
        }
    }
}

/// The outcome of [`select`]: which entry to open and how to drive it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    /// Index of the chosen entry in the candidate list.
    pub index: usize,
    /// The provider.
    pub provider: Provider,
    /// Its domain name (e.g. `lo`, `mlx5_0`, `cxi0`).
    pub domain: String,
    /// The mr_mode bits and what they require.
    pub mr_mode: MrMode,
    /// Decisions implied by `mr_mode`.
    pub mr: MrPolicy,
    /// Largest message for inject (`tx_attr->inject_size`).
    pub inject_bytes: usize,
    /// Messages up to this size go eager; larger ones rendezvous (RMA read).
    pub eager_limit_bytes: usize,
    /// Largest single message (`ep_attr->max_msg_size`).
    pub max_msg_bytes: usize,
    /// Usable tag bits.
    pub tag_bits: u32,
}

/// Why no candidate was selected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectError {
    /// What was asked.
    pub request: ProviderRequest,
    /// Each refused candidate (`provider/domain`) and the reason.
    pub refused: Vec<(String, &'static str)>,
}

impl fmt::Display for SelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no usable provider for request {}", self.request)?;
        if self.refused.is_empty() {
            return f.write_str(" (fi_getinfo listed none)");
        }
        for (who, why) in &self.refused {
            write!(f, "; {who}: {why}")?;
        }
        Ok(())
    }
}

impl std::error::Error for SelectError {}

impl From<SelectError> for Error {
    fn from(e: SelectError) -> Error {
        Error::NoProvider(e.to_string())
    }
}

/// Mode bits we never grant: operation contexts are plain tokens, messages have no prefix.
const REFUSED_MODE: u64 = ffi::FI_CONTEXT | ffi::FI_CONTEXT2 | ffi::FI_MSG_PREFIX;

/// Minimum tag bits the engine's matching needs (context id + source + tag fit the rest).
pub const MIN_TAG_BITS: u32 = 32;

/// Why a candidate cannot be used, or `Ok` with its selection (index filled by the caller).
fn judge(index: usize, provider: Provider, a: &InfoAttrs) -> std::result::Result<Selection, &'static str> {
    if a.caps & crate::info::REQUIRED_CAPS != crate::info::REQUIRED_CAPS {
        return Err("lacks FI_TAGGED|FI_MSG|FI_RMA|FI_READ|FI_REMOTE_READ");
    }
    if a.mode & REFUSED_MODE != 0 {
        return Err("requires FI_CONTEXT/FI_CONTEXT2/FI_MSG_PREFIX mode");
    }
    let mr = a.mr_mode.policy().map_err(|_| "requires mr_mode bits we cannot honour (RAW/HMEM/MMU_NOTIFY/...)")?;
    if a.mr_key_size > 8 {
        return Err("MR keys wider than 64 bits");
    }
    let tag_bits = a.tag_bits();
    if tag_bits < MIN_TAG_BITS {
        return Err("fewer than 32 tag bits");
    }
    if a.max_msg_size == 0 {
        return Err("max_msg_size is 0");
    }
    let eager_limit_bytes = provider.eager_limit_bytes().min(a.max_msg_size).max(a.inject_size.min(a.max_msg_size));
    Ok(Selection {
        index,
        provider,
        domain: a.domain.clone(),
        mr_mode: a.mr_mode,
        mr,
        inject_bytes: a.inject_size,
        eager_limit_bytes,
        max_msg_bytes: a.max_msg_size,
        tag_bits,
    })
}

/// Choose the entry to open among `candidates` (as listed by `fi_getinfo`).
///
/// # Errors
/// [`SelectError`] listing every refused candidate when none fits.
pub fn select(request: ProviderRequest, candidates: &[InfoAttrs]) -> std::result::Result<Selection, SelectError> {
    let order: Vec<Provider> = match request {
        ProviderRequest::Auto => Provider::PREFERENCE.to_vec(),
        ProviderRequest::Only(p) => vec![p],
    };
    let mut refused = Vec::new();
    for want in order {
        for (i, a) in candidates.iter().enumerate() {
            if Provider::from_fi_name(&a.provider) != Some(want) {
                continue;
            }
            match judge(i, want, a) {
                Ok(sel) => return Ok(sel),
                Err(why) => refused.push((format!("{}/{}", a.provider, a.domain), why)),
            }
        }
    }
    Err(SelectError { request, refused })
}

/// `fi_getinfo` for `request` (plus `hints`' node/domain pins), then [`select`]; returns the
/// chosen entry, ready for [`crate::Domain::open_info`], and the selection.
///
/// # Errors
/// `fi_getinfo` failures, or [`Error::NoProvider`] when nothing fits.
pub fn open_selected(request: ProviderRequest, hints: &Hints) -> Result<(Arc<Info>, Selection)> {
    let mut h = hints.clone();
    if let ProviderRequest::Only(p) = request {
        h.provider = Some(p.fi_name().to_owned());
    }
    let list = InfoList::get(&h)?;
    let attrs = list.attrs();
    let sel = select(request, &attrs)?;
    let entry = list.iter().nth(sel.index).ok_or(Error::Unsupported("fi_info list changed"))?;
    let info = Arc::new(entry.to_owned()?);
    tracing::debug!(provider = %sel.provider, domain = %sel.domain, mr_mode = ?sel.mr_mode, "provider selected");
    Ok((info, sel))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::REQUIRED_CAPS;

    fn attrs(provider: &str, domain: &str) -> InfoAttrs {
        InfoAttrs {
            provider: provider.into(),
            fabric: "f".into(),
            domain: domain.into(),
            caps: REQUIRED_CAPS | crate::ffi::caps::SEND | crate::ffi::caps::RECV,
            mode: 0,
            inject_size: 64,
            max_msg_size: usize::MAX,
            mr_mode: MrMode::default(),
            mr_key_size: 8,
            mem_tag_format: 0xaaaa_aaaa_aaaa_aaaa,
            rma_iov_limit: 4,
        }
    }

    fn verbs() -> InfoAttrs {
        InfoAttrs {
            mr_mode: MrMode::LOCAL | MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY,
            inject_size: 192,
            max_msg_size: 1 << 30,
            ..attrs("verbs;ofi_rxm", "mlx5_0")
        }
    }

    fn cxi() -> InfoAttrs {
        InfoAttrs {
            mr_mode: MrMode::ENDPOINT | MrMode::ALLOCATED | MrMode::PROV_KEY,
            inject_size: 192,
            max_msg_size: 1 << 32,
            mem_tag_format: 0x0000_ffff_ffff_ffff,
            mr_key_size: 8,
            ..attrs("cxi", "cxi0")
        }
    }

    #[test]
    fn request_parsing_and_env_names() {
        assert_eq!("auto".parse::<ProviderRequest>().unwrap(), ProviderRequest::Auto);
        assert_eq!("TCP".parse::<ProviderRequest>().unwrap(), ProviderRequest::Only(Provider::Tcp));
        assert_eq!("verbs;ofi_rxm".parse::<ProviderRequest>().unwrap(), ProviderRequest::Only(Provider::Verbs));
        assert_eq!("cxi".parse::<ProviderRequest>().unwrap(), ProviderRequest::Only(Provider::Cxi));
        assert!("psm3".parse::<ProviderRequest>().is_err());
        assert_eq!(Provider::from_fi_name("tcp;ofi_rxm"), Some(Provider::Tcp));
        assert_eq!(Provider::from_fi_name("net;ofi_rxm"), None);
        assert_eq!(ProviderRequest::Only(Provider::Sockets).hints().provider.as_deref(), Some("sockets"));
    }

    #[test]
    fn auto_prefers_cxi_then_verbs_then_tcp_then_sockets() {
        let list = vec![attrs("sockets", "lo"), attrs("tcp;ofi_rxm", "lo"), verbs(), cxi(), attrs("shm", "shm")];
        assert_eq!(select(ProviderRequest::Auto, &list).unwrap().provider, Provider::Cxi);
        assert_eq!(select(ProviderRequest::Auto, &list[..3]).unwrap().provider, Provider::Verbs);
        let s = select(ProviderRequest::Auto, &list[..2]).unwrap();
        assert_eq!((s.provider, s.index), (Provider::Tcp, 1));
        assert_eq!(select(ProviderRequest::Auto, &list[..1]).unwrap().provider, Provider::Sockets);
        // Providers we do not drive are never picked.
        assert!(select(ProviderRequest::Auto, &list[4..]).is_err());
    }

    #[test]
    fn explicit_request_takes_first_usable_entry_of_that_provider() {
        let mut bad = attrs("tcp;ofi_rxm", "eth0");
        bad.caps &= !crate::ffi::caps::RMA;
        let list = vec![bad, attrs("tcp;ofi_rxm", "lo"), attrs("sockets", "lo")];
        let s = select(ProviderRequest::Only(Provider::Tcp), &list).unwrap();
        assert_eq!((s.index, s.domain.as_str()), (1, "lo"));
        let e = select(ProviderRequest::Only(Provider::Cxi), &list).unwrap_err();
        assert!(e.refused.is_empty());
        assert!(e.to_string().contains("fi_getinfo listed none"), "{e}");
    }

    #[test]
    fn tcp_and_sockets_sizes() {
        let t = select(ProviderRequest::Only(Provider::Tcp), &[attrs("tcp;ofi_rxm", "lo")]).unwrap();
        assert_eq!(t.inject_bytes, 64);
        assert_eq!(t.eager_limit_bytes, DEFAULT_EAGER_LIMIT_BYTES);
        assert_eq!(t.tag_bits, 64);
        assert_eq!(t.mr, MrPolicy::default());
        let s = select(ProviderRequest::Only(Provider::Sockets), &[attrs("sockets", "lo")]).unwrap();
        assert_eq!(s.eager_limit_bytes, SOCKETS_EAGER_LIMIT_BYTES);
    }

    #[test]
    fn verbs_needs_local_descriptors_and_virtual_addresses() {
        let s = select(ProviderRequest::Only(Provider::Verbs), &[verbs()]).unwrap();
        assert!(s.mr.local_desc && s.mr.virt_addr && s.mr.prov_key && s.mr.allocated_only);
        assert!(!s.mr.bind_endpoint);
        assert_eq!(s.inject_bytes, 192);
        assert_eq!(s.max_msg_bytes, 1 << 30);
    }

    #[test]
    fn cxi_binds_mrs_to_the_endpoint_and_has_48_tag_bits() {
        let s = select(ProviderRequest::Auto, &[cxi()]).unwrap();
        assert_eq!(s.provider, Provider::Cxi);
        assert!(s.mr.bind_endpoint && s.mr.prov_key && !s.mr.local_desc);
        assert_eq!(s.tag_bits, 48);
        assert_eq!(s.domain, "cxi0");
    }

    #[test]
    fn unusable_entries_are_refused_with_reasons() {
        let mut raw = cxi();
        raw.mr_mode = raw.mr_mode | MrMode::RAW;
        let mut ctx = verbs();
        ctx.mode = crate::ffi::FI_CONTEXT;
        let mut few_tags = attrs("tcp;ofi_rxm", "lo");
        few_tags.mem_tag_format = 0xffff;
        let e = select(ProviderRequest::Auto, &[raw, ctx, few_tags, attrs("sockets", "lo")]).unwrap();
        // Falls through to the last usable one.
        assert_eq!(e.provider, Provider::Sockets);
        let mut raw = cxi();
        raw.mr_mode = raw.mr_mode | MrMode::HMEM;
        let err = select(ProviderRequest::Only(Provider::Cxi), &[raw]).unwrap_err();
        assert_eq!(err.refused.len(), 1);
        assert!(err.refused[0].1.contains("mr_mode"), "{err}");
        let as_error: Error = err.into();
        assert!(matches!(as_error, Error::NoProvider(_)));
    }

    #[test]
    fn eager_limit_is_clamped_to_max_msg_size() {
        let mut small = verbs();
        small.max_msg_size = 4096;
        let s = select(ProviderRequest::Auto, &[small]).unwrap();
        assert_eq!(s.eager_limit_bytes, 4096);
    }
}
