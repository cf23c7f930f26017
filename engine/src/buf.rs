//! User buffers held by pending requests: the engine's only `unsafe`.
//!
//! A request keeps a raw view of the user's buffer between the call that starts it and
//! its completion (zero-copy: data goes straight between the user buffer and the
//! transport). The views are created only by [`crate::handle`], whose request handles
//! borrow the buffer for their lifetime `'a` and, when dropped early, cancel the request
//! or wait for it before the borrow ends. That is the invariant every `SAFETY` note below
//! relies on: *while a request is pending, its buffer is alive and nobody else touches
//! it*.
#![allow(unsafe_code)]

/// A read-only view of a send buffer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBuf {
    ptr: *const u8,
    len: usize,
}

/// A writable view of a receive buffer (not `Clone`: one writer at a time).
#[derive(Debug)]
pub(crate) struct RawBufMut {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the views are plain addresses; the engine that holds them is behind a mutex,
// and the buffers they point to are borrowed by the request handle for as long as the
// view is used (module invariant).
unsafe impl Send for RawBuf {}
// SAFETY: as above.
unsafe impl Send for RawBufMut {}

impl RawBuf {
    /// Views `s`.
    ///
    /// # Safety
    /// `s` must stay alive and unmodified until the request holding this view has
    /// completed or been cancelled.
    pub(crate) unsafe fn new(s: &[u8]) -> Self {
        Self { ptr: s.as_ptr(), len: s.len() }
    }

    /// An empty view.
    pub(crate) fn empty() -> Self {
        Self { ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(), len: 0 }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The address, as exposed to a peer that pulls the data (CMA / RMA).
    pub(crate) fn addr(&self) -> u64 {
        self.ptr as u64
    }

    /// The bytes.
    pub(crate) fn as_slice(&self) -> &[u8] {
        // SAFETY: module invariant: the buffer outlives the pending request that owns
        // this view and is not written meanwhile (it was borrowed shared by the handle).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl RawBuf {
    /// Copies these bytes into `dst`, as many as fit; how many. A message a process sends
    /// itself goes this way (one copy); the two views may even overlap (an erroneous
    /// program's), which moves the bytes as `memmove` does rather than breaking aliasing.
    pub(crate) fn copy_to(&self, dst: &mut RawBufMut) -> usize {
        let n = self.len.min(dst.len);
        // SAFETY: module invariant: both buffers are alive while their pending requests
        // are, `self` readable for `self.len` bytes and `dst` writable for `dst.len`;
        // `ptr::copy` allows overlap, and no reference to either range is alive here.
        unsafe { std::ptr::copy(self.ptr, dst.ptr, n) };
        n
    }
}

impl RawBufMut {
    /// Views `s` for writing.
    ///
    /// # Safety
    /// `s` must stay alive and be accessed by nobody else until the request holding this
    /// view has completed or been cancelled.
    pub(crate) unsafe fn new(s: &mut [u8]) -> Self {
        Self { ptr: s.as_mut_ptr(), len: s.len() }
    }

    /// An empty view.
    pub(crate) fn empty() -> Self {
        Self { ptr: std::ptr::NonNull::<u8>::dangling().as_ptr(), len: 0 }
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The bytes, for writing.
    pub(crate) fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: module invariant: the buffer is exclusively borrowed by the request
        // handle that owns this view, and outlives the pending request.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}
