//! RDM endpoints (`fi_endpoint`): bound to one address vector and one completion queue.
//!
//! Parts: [`Endpoint`] — open/bind/enable, [`Endpoint::name`] (`fi_getname`), tagged
//! send/recv/inject, untagged send/recv/inject, RMA read. Posting returns
//! [`Error::Busy`] for `-FI_EAGAIN` (progress the CQ and retry; see [`crate::StallTracker`]);
//! every other failure carries the peer it addressed.
//!
//! Posting functions that leave a buffer with the provider are `unsafe`: the buffer must
//! stay valid (and, for receives, unaliased) until the operation's completion — success or
//! error entry — has been read, or until the endpoint is closed. Inject variants copy the
//! data and are safe.

use std::fmt;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use crate::addr::FiAddr;
use crate::av::{AddressVector, EpAddr};
use crate::cq::{CompletionQueue, OpContext};
use crate::domain::Domain;
use crate::error::{fi_call, Error, Result};
use crate::ffi::{self, caps};
use crate::mr_attr::{MrDesc, RemoteAccess};

/// Largest address blob `fi_getname` is asked for.
const MAX_ADDR_BYTES: usize = 256;

/// An enabled `fid_ep` of type `FI_EP_RDM`.
pub struct Endpoint {
    raw: NonNull<ffi::fid_ep>,
    domain: Arc<Domain>,
    av: Arc<AddressVector>,
    cq: Arc<CompletionQueue>,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Endpoint").field("domain", &self.domain).finish_non_exhaustive()
    }
}

// SAFETY: FI_THREAD_SAFE is always requested; the handle is an owned pointer.
unsafe impl Send for Endpoint {}
// SAFETY: see `Send`.
unsafe impl Sync for Endpoint {}

impl Endpoint {
    /// `fi_endpoint` from the domain's info, bind `av` and `cq` (transmit and receive),
    /// `fi_enable`. The endpoint keeps all three alive.
    ///
    /// # Errors
    /// [`Error::InvalidArg`] if `av`/`cq` belong to another domain; else the provider's code.
    pub fn open(domain: &Arc<Domain>, av: &Arc<AddressVector>, cq: &Arc<CompletionQueue>) -> Result<Arc<Endpoint>> {
        if !Arc::ptr_eq(av.domain(), domain) || !Arc::ptr_eq(cq.domain(), domain) {
            return Err(Error::InvalidArg("av and cq must belong to the endpoint's domain"));
        }
        let mut out: *mut ffi::fid_ep = ptr::null_mut();
        // SAFETY: the domain is open and its info valid; `out` is writable.
        fi_call!("fi_endpoint", unsafe { ffi::endpoint(domain.as_ptr(), domain.info().as_ptr(), &mut out) })?;
        let raw = NonNull::new(out).ok_or(Error::Unsupported("fi_endpoint returned NULL"))?;
        // From here `ep`'s Drop closes the fid if binding fails.
        let ep = Endpoint { raw, domain: Arc::clone(domain), av: Arc::clone(av), cq: Arc::clone(cq) };
        // SAFETY: endpoint and AV are open.
        fi_call!("fi_ep_bind(av)", unsafe { ffi::bind(ep.as_fid(), av.as_fid(), 0) })?;
        // SAFETY: endpoint and CQ are open.
        fi_call!("fi_ep_bind(cq)", unsafe { ffi::bind(ep.as_fid(), cq.as_fid(), caps::TRANSMIT | caps::RECV) })?;
        // SAFETY: the endpoint is open and bound.
        fi_call!("fi_enable", unsafe { ffi::enable(ep.as_fid()) })?;
        Ok(Arc::new(ep))
    }

    /// This endpoint's address blob (`fi_getname`), to hand to peers.
    ///
    /// # Errors
    /// The provider's code (`FI_ETOOSMALL` if the name exceeds 256 bytes).
    pub fn name(&self) -> Result<EpAddr> {
        let mut buf = vec![0u8; MAX_ADDR_BYTES];
        let mut len = buf.len();
        // SAFETY: the endpoint is open; `buf` is writable for `len` bytes.
        fi_call!("fi_getname", unsafe { ffi::getname(self.as_ptr(), buf.as_mut_ptr().cast(), &mut len) })?;
        buf.truncate(len);
        Ok(EpAddr(buf))
    }

    /// Post a tagged send of `buf` to `dest`.
    ///
    /// # Safety
    /// `buf` must stay valid until this operation's completion is read from the CQ or the
    /// endpoint is closed. `desc` must describe a registration covering `buf` when the
    /// domain requires `FI_MR_LOCAL`.
    ///
    /// # Errors
    /// [`Error::Busy`] on `-FI_EAGAIN`; otherwise the code with `peer = dest`.
    pub unsafe fn tsend(&self, buf: &[u8], desc: Option<MrDesc>, dest: FiAddr, tag: u64, ctx: OpContext) -> Result<()> {
        // SAFETY: endpoint open; the caller keeps `buf` alive until completion.
        let ret = unsafe {
            ffi::tsend(self.as_ptr(), buf.as_ptr().cast(), buf.len(), desc_ptr(desc), dest.0, tag, ctx.as_ptr())
        };
        fi_call!("fi_tsend", Some(dest), ret).map(drop)
    }

    /// Post a tagged receive into `buf` matching `tag` (bits set in `ignore` are wildcards)
    /// from `src` ([`FiAddr::UNSPEC`] for any).
    ///
    /// # Safety
    /// `buf` must stay valid and not be accessed until this operation's completion is read
    /// or the endpoint is closed. `desc` as for [`Endpoint::tsend`].
    ///
    /// # Errors
    /// [`Error::Busy`] on `-FI_EAGAIN`; otherwise the code with `peer = src`.
    pub unsafe fn trecv(
        &self,
        buf: &mut [u8],
        desc: Option<MrDesc>,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        ctx: OpContext,
    ) -> Result<()> {
        // SAFETY: endpoint open; the caller keeps `buf` alive and untouched until completion.
        let ret = unsafe {
            ffi::trecv(
                self.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                desc_ptr(desc),
                src.0,
                tag,
                ignore,
                ctx.as_ptr(),
            )
        };
        fi_call!("fi_trecv", Some(src), ret).map(drop)
    }

    /// Tagged inject: the data is copied, no completion is generated. `buf.len()` must not
    /// exceed the provider's inject size.
    ///
    /// # Errors
    /// [`Error::Busy`] on `-FI_EAGAIN`; otherwise the code with `peer = dest`.
    pub fn tinject(&self, buf: &[u8], dest: FiAddr, tag: u64) -> Result<()> {
        // SAFETY: endpoint open; inject copies `buf` before returning.
        let ret = unsafe { ffi::tinject(self.as_ptr(), buf.as_ptr().cast(), buf.len(), dest.0, tag) };
        fi_call!("fi_tinject", Some(dest), ret).map(drop)
    }

    /// Post an untagged send.
    ///
    /// # Safety
    /// As [`Endpoint::tsend`].
    ///
    /// # Errors
    /// As [`Endpoint::tsend`].
    pub unsafe fn send(&self, buf: &[u8], desc: Option<MrDesc>, dest: FiAddr, ctx: OpContext) -> Result<()> {
        // SAFETY: endpoint open; the caller keeps `buf` alive until completion.
        let ret =
            unsafe { ffi::send(self.as_ptr(), buf.as_ptr().cast(), buf.len(), desc_ptr(desc), dest.0, ctx.as_ptr()) };
        fi_call!("fi_send", Some(dest), ret).map(drop)
    }

    /// Post an untagged receive.
    ///
    /// # Safety
    /// As [`Endpoint::trecv`].
    ///
    /// # Errors
    /// As [`Endpoint::trecv`].
    pub unsafe fn recv(&self, buf: &mut [u8], desc: Option<MrDesc>, src: FiAddr, ctx: OpContext) -> Result<()> {
        // SAFETY: endpoint open; the caller keeps `buf` alive and untouched until completion.
        let ret = unsafe {
            ffi::recv(self.as_ptr(), buf.as_mut_ptr().cast(), buf.len(), desc_ptr(desc), src.0, ctx.as_ptr())
        };
        fi_call!("fi_recv", Some(src), ret).map(drop)
    }

    /// Untagged inject (copied, no completion).
    ///
    /// # Errors
    /// As [`Endpoint::tinject`].
    pub fn inject(&self, buf: &[u8], dest: FiAddr) -> Result<()> {
        // SAFETY: endpoint open; inject copies `buf` before returning.
        let ret = unsafe { ffi::inject(self.as_ptr(), buf.as_ptr().cast(), buf.len(), dest.0) };
        fi_call!("fi_inject", Some(dest), ret).map(drop)
    }

    /// Post an RMA read of `buf.len()` bytes from the peer's registered region `remote`
    /// into `buf`.
    ///
    /// # Safety
    /// As [`Endpoint::trecv`] for `buf`.
    ///
    /// # Errors
    /// [`Error::InvalidArg`] if `buf` is longer than `remote.len`; [`Error::Busy`]; otherwise
    /// the code with `peer = src`.
    pub unsafe fn read(
        &self,
        buf: &mut [u8],
        desc: Option<MrDesc>,
        src: FiAddr,
        remote: RemoteAccess,
        ctx: OpContext,
    ) -> Result<()> {
        if buf.len() as u64 > remote.len {
            return Err(Error::InvalidArg("rma read longer than the remote region"));
        }
        // SAFETY: endpoint open; the caller keeps `buf` alive and untouched until completion.
        let ret = unsafe {
            ffi::read(
                self.as_ptr(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                desc_ptr(desc),
                src.0,
                remote.addr,
                remote.key.0,
                ctx.as_ptr(),
            )
        };
        fi_call!("fi_read", Some(src), ret).map(drop)
    }

    /// The domain this endpoint belongs to.
    pub fn domain(&self) -> &Arc<Domain> {
        &self.domain
    }

    /// The bound address vector.
    pub fn av(&self) -> &Arc<AddressVector> {
        &self.av
    }

    /// The bound completion queue.
    pub fn cq(&self) -> &Arc<CompletionQueue> {
        &self.cq
    }

    pub(crate) fn as_ptr(&self) -> *mut ffi::fid_ep {
        self.raw.as_ptr()
    }

    pub(crate) fn as_fid(&self) -> *mut ffi::fid {
        // SAFETY: `fid` is the first member of an open fid_ep.
        unsafe { &mut (*self.raw.as_ptr()).fid }
    }
}

fn desc_ptr(desc: Option<MrDesc>) -> *mut std::os::raw::c_void {
    desc.map_or(ptr::null_mut(), |d| d.as_ptr())
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        // SAFETY: we own the fid. Endpoint-bound MRs hold an Arc<Endpoint>, so none is open;
        // the AV and CQ it is bound to are released only after this (field drops).
        let ret = unsafe { ffi::close(self.as_fid()) };
        if ret != 0 {
            tracing::debug!(ret, "fi_close(ep) failed");
        }
    }
}
