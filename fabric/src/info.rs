//! Provider discovery: `fi_getinfo` with hints, and the attributes runthrough cares about.
//!
//! Parts:
//! - [`Hints`]: what we ask for — `FI_EP_RDM`, `FI_TAGGED|FI_MSG|FI_RMA` (+ `FI_READ`,
//!   `FI_REMOTE_READ`), `FI_THREAD_SAFE`, the mr_mode bits this crate can honour, an
//!   optional provider-name filter and an optional loopback pin (node `127.0.0.1`, `FI_SOURCE`).
//! - [`InfoList`]: the owned `fi_info` list (`fi_freeinfo` on drop), iterated as [`InfoRef`].
//! - [`Info`]: one entry duplicated out of the list (`fi_dupinfo`), shared by the fabric,
//!   domain and endpoints opened from it.
//! - [`InfoAttrs`]: a plain-data copy of the attributes (provider, fabric, domain,
//!   inject_size, max_msg_size, mr_mode, tag bits, …) that the pure selection logic in
//!   [`crate::provider`] works on.
//!
//! The crate always requests `FI_THREAD_SAFE`, which is what makes its handle types
//! `Send + Sync`, and never grants `FI_CONTEXT`/`FI_CONTEXT2` (operation contexts are plain
//! tokens), so providers that require those are filtered out by `fi_getinfo` itself.

use std::ffi::{CStr, CString};
use std::fmt;
use std::ptr::{self, NonNull};

use crate::error::{fi_call, Error, Result};
use crate::ffi::{self, caps};
use crate::mr_attr::MrMode;

/// Node name used to pin endpoints to loopback.
pub const LOOPBACK_NODE: &str = "127.0.0.1";

/// The capabilities every runthrough endpoint needs.
pub const REQUIRED_CAPS: u64 = caps::TAGGED | caps::MSG | caps::RMA | caps::READ | caps::REMOTE_READ;

/// What to ask `fi_getinfo` for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hints {
    /// `fabric_attr->prov_name`, e.g. `"tcp;ofi_rxm"`; `None` lists every provider.
    pub provider: Option<String>,
    /// `domain_attr->name`, e.g. `"lo"` or `"cxi0"`.
    pub domain: Option<String>,
    /// Local node to bind (with `FI_SOURCE`), e.g. [`LOOPBACK_NODE`].
    pub node: Option<String>,
    /// Capability bits (default [`REQUIRED_CAPS`]).
    pub caps: u64,
    /// mr_mode bits this application can honour (default [`MrMode::SUPPORTED`]).
    pub mr_mode: MrMode,
}

impl Default for Hints {
    fn default() -> Self {
        Hints { provider: None, domain: None, node: None, caps: REQUIRED_CAPS, mr_mode: MrMode::SUPPORTED }
    }
}

impl Hints {
    /// Hints restricted to one provider name (as `fi_info` spells it).
    pub fn provider(name: &str) -> Self {
        Hints { provider: Some(name.to_owned()), ..Hints::default() }
    }

    /// Pin the endpoint's source address to `127.0.0.1` (tests, single-host runs).
    pub fn loopback(mut self) -> Self {
        self.node = Some(LOOPBACK_NODE.to_owned());
        self
    }

    /// Build the C hints (`fi_allocinfo`), owned by the returned guard.
    fn to_raw(&self) -> Result<RawInfo> {
        // SAFETY: fi_dupinfo(NULL) is fi_allocinfo: a zeroed fi_info with all sub-attributes.
        let raw = NonNull::new(unsafe { ffi::fi_dupinfo(ptr::null()) }).map(RawInfo).ok_or(Error::Call {
            op: "fi_allocinfo",
            code: crate::ErrorCode::ENOMEM,
            peer: None,
        })?;
        let p = raw.0.as_ptr();
        // SAFETY: `p` and its attribute structs were just allocated by libfabric; strings are
        // strdup'ed so that fi_freeinfo (in RawInfo::drop) frees them with the right allocator.
        unsafe {
            (*p).caps = self.caps;
            (*p).mode = 0;
            (*(*p).ep_attr).type_ = ffi::FI_EP_RDM;
            (*(*p).domain_attr).threading = ffi::FI_THREAD_SAFE;
            (*(*p).domain_attr).mr_mode = self.mr_mode.bits() as i32;
            (*(*p).domain_attr).av_type = ffi::FI_AV_TABLE;
            if let Some(name) = &self.provider {
                (*(*p).fabric_attr).prov_name = strdup(name)?;
            }
            if let Some(name) = &self.domain {
                (*(*p).domain_attr).name = strdup(name)?;
            }
        }
        Ok(raw)
    }
}

fn strdup(s: &str) -> Result<*mut std::os::raw::c_char> {
    let c = CString::new(s).map_err(|_| Error::InvalidArg("string contains NUL"))?;
    // SAFETY: `c` is a valid NUL-terminated string; the copy is malloc'ed for fi_freeinfo.
    let p = unsafe { libc::strdup(c.as_ptr()) };
    if p.is_null() {
        return Err(Error::Call { op: "strdup", code: crate::ErrorCode::ENOMEM, peer: None });
    }
    Ok(p)
}

/// Owner of an `fi_info` list allocated by libfabric; frees it once.
struct RawInfo(NonNull<ffi::fi_info>);

impl Drop for RawInfo {
    fn drop(&mut self) {
        // SAFETY: the pointer came from fi_getinfo / fi_dupinfo and is freed exactly once here.
        unsafe { ffi::fi_freeinfo(self.0.as_ptr()) }
    }
}

// SAFETY: an fi_info list is plain heap data owned by this handle alone; libfabric keeps no
// reference to it, and we only read it through `&self`.
unsafe impl Send for RawInfo {}
// SAFETY: shared access only reads the list.
unsafe impl Sync for RawInfo {}

/// The list `fi_getinfo` returned.
pub struct InfoList {
    head: Option<RawInfo>,
}

impl fmt::Debug for InfoList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter().map(|i| i.attrs())).finish()
    }
}

impl InfoList {
    /// `fi_getinfo(FI_VERSION, node, NULL, flags, hints, &info)`. An empty list (`FI_ENODATA`)
    /// is returned as an empty `InfoList`, not as an error.
    ///
    /// # Errors
    /// [`Error::Load`] when `libfabric.so.1` cannot be loaded; any other `fi_getinfo`
    /// failure.
    pub fn get(hints: &Hints) -> Result<InfoList> {
        // The first libfabric call of a process loads the library: say so if it cannot.
        ffi::lib()?;
        let raw_hints = hints.to_raw()?;
        let node = hints.node.as_deref().map(CString::new).transpose().map_err(|_| Error::InvalidArg("node"))?;
        let flags = if node.is_some() { caps::SOURCE } else { 0 };
        let mut out: *mut ffi::fi_info = ptr::null_mut();
        // SAFETY: all pointers are valid for the call; `out` receives a list we then own.
        let ret = unsafe {
            ffi::fi_getinfo(
                ffi::API_VERSION,
                node.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
                ptr::null(),
                flags,
                raw_hints.0.as_ptr(),
                &mut out,
            )
        };
        if ret == -(ffi::FI_ENODATA as i32) {
            return Ok(InfoList { head: None });
        }
        fi_call!("fi_getinfo", ret)?;
        Ok(InfoList { head: NonNull::new(out).map(RawInfo) })
    }

    /// The entries, best first (libfabric's order).
    pub fn iter(&self) -> impl Iterator<Item = InfoRef<'_>> + '_ {
        let mut cur = self.head.as_ref().map_or(ptr::null_mut(), |h| h.0.as_ptr());
        std::iter::from_fn(move || {
            let p = NonNull::new(cur)?;
            // SAFETY: `p` is a node of the list owned by `self`, alive for the borrow.
            cur = unsafe { (*p.as_ptr()).next };
            Some(InfoRef { p, _list: std::marker::PhantomData })
        })
    }

    /// Whether libfabric returned nothing.
    pub fn is_empty(&self) -> bool {
        self.head.is_none()
    }

    /// The plain attributes of every entry, in order.
    pub fn attrs(&self) -> Vec<InfoAttrs> {
        self.iter().map(|i| i.attrs()).collect()
    }
}

/// One entry of an [`InfoList`], borrowed.
#[derive(Clone, Copy)]
pub struct InfoRef<'a> {
    p: NonNull<ffi::fi_info>,
    _list: std::marker::PhantomData<&'a InfoList>,
}

impl fmt::Debug for InfoRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.attrs().fmt(f)
    }
}

impl InfoRef<'_> {
    /// A copy of the attributes.
    pub fn attrs(&self) -> InfoAttrs {
        // SAFETY: the entry is alive for the borrow of its list.
        unsafe { InfoAttrs::read(self.p.as_ptr()) }
    }

    /// Duplicate this one entry (`fi_dupinfo`) into an owned [`Info`].
    ///
    /// # Errors
    /// `FI_ENOMEM` if libfabric cannot allocate.
    pub fn to_owned(&self) -> Result<Info> {
        // SAFETY: the entry is valid; fi_dupinfo copies only this node (its `next` is cleared).
        let dup = unsafe { ffi::fi_dupinfo(self.p.as_ptr()) };
        let raw = NonNull::new(dup).map(RawInfo).ok_or(Error::Call {
            op: "fi_dupinfo",
            code: crate::ErrorCode::ENOMEM,
            peer: None,
        })?;
        // SAFETY: freshly duplicated, exclusively owned.
        unsafe { (*raw.0.as_ptr()).next = ptr::null_mut() };
        let attrs = self.attrs();
        Ok(Info { raw, attrs })
    }
}

/// One owned `fi_info` entry, from which a fabric, a domain and endpoints are opened.
pub struct Info {
    raw: RawInfo,
    attrs: InfoAttrs,
}

impl fmt::Debug for Info {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Info").field(&self.attrs).finish()
    }
}

impl Info {
    /// The attributes of this entry.
    pub fn attrs(&self) -> &InfoAttrs {
        &self.attrs
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fi_info {
        self.raw.0.as_ptr()
    }
}

/// The attributes of an `fi_info` entry that runthrough's decisions need, as plain data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InfoAttrs {
    /// `fabric_attr->prov_name`, e.g. `"tcp;ofi_rxm"`.
    pub provider: String,
    /// `fabric_attr->name`, e.g. `"127.0.0.1/32"`.
    pub fabric: String,
    /// `domain_attr->name`, e.g. `"lo"`.
    pub domain: String,
    /// `caps` bits.
    pub caps: u64,
    /// `mode` bits the provider requires of us.
    pub mode: u64,
    /// `tx_attr->inject_size`: largest message `fi_inject`/`fi_tinject` accepts.
    pub inject_size: usize,
    /// `ep_attr->max_msg_size`.
    pub max_msg_size: usize,
    /// `domain_attr->mr_mode` bits the provider requires.
    pub mr_mode: MrMode,
    /// `domain_attr->mr_key_size` in bytes.
    pub mr_key_size: usize,
    /// `ep_attr->mem_tag_format`.
    pub mem_tag_format: u64,
    /// `tx_attr->rma_iov_limit`.
    pub rma_iov_limit: usize,
}

impl InfoAttrs {
    /// Number of usable tag bits from `mem_tag_format` (the highest set bit; 0 means 64).
    pub fn tag_bits(&self) -> u32 {
        if self.mem_tag_format == 0 {
            64
        } else {
            64 - self.mem_tag_format.leading_zeros()
        }
    }

    /// Whether the entry offers RMA read (initiator `FI_READ` and target `FI_REMOTE_READ`).
    pub fn has_rma_read(&self) -> bool {
        let want = caps::RMA | caps::READ | caps::REMOTE_READ;
        self.caps & want == want
    }

    /// # Safety
    /// `p` must point to a valid `fi_info` whose attribute pointers are valid or NULL.
    unsafe fn read(p: *const ffi::fi_info) -> InfoAttrs {
        // SAFETY: caller guarantees `p`, and libfabric fills every attr pointer of a result.
        unsafe {
            let i = &*p;
            let fab = i.fabric_attr.as_ref();
            let dom = i.domain_attr.as_ref();
            let ep = i.ep_attr.as_ref();
            let tx = i.tx_attr.as_ref();
            InfoAttrs {
                provider: fab.map_or(String::new(), |f| cstr(f.prov_name)),
                fabric: fab.map_or(String::new(), |f| cstr(f.name)),
                domain: dom.map_or(String::new(), |d| cstr(d.name)),
                caps: i.caps,
                mode: i.mode,
                inject_size: tx.map_or(0, |t| t.inject_size),
                max_msg_size: ep.map_or(0, |e| e.max_msg_size),
                mr_mode: MrMode::from_bits(dom.map_or(0, |d| d.mr_mode as u32 as u64)),
                mr_key_size: dom.map_or(0, |d| d.mr_key_size),
                mem_tag_format: ep.map_or(0, |e| e.mem_tag_format),
                rma_iov_limit: tx.map_or(0, |t| t.rma_iov_limit),
            }
        }
    }
}

/// # Safety
/// `p` is NULL or a valid NUL-terminated string.
unsafe fn cstr(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: caller guarantees a valid C string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
