//! The data-access calls of files (MPI-4.1 §14.4): explicit offsets, the individual and
//! the shared file pointer; independent, collective and ordered; blocking, nonblocking,
//! split collective; each with its `_c` large-count form.
//!
//! The memory side: a contiguous buffer is read or written in place, any other datatype
//! packed or unpacked around the facade's call. The nonblocking forms do the access at
//! their start and return a request already complete (MPI allows an operation to be
//! complete at its start); the split collectives do the collective at `_begin` and keep
//! its outcome for `_end`, where its error is reported (seeds/000 §17.12.4).

use std::ffi::{c_int, c_void};

use super::{file, raise_file, FileObj, FILES};
use crate::consts::*;
use crate::dtype::lookup as dtype_lookup;
use crate::types::{Handle, MPI_Count, MPI_Offset, MPI_Status};

/// Where an access starts.
#[derive(Debug, Clone, Copy)]
enum At {
    Offset(MPI_Offset),
    Own,
    Shared,
}

/// Independent, collective, or ordered (collective at the shared pointer).
#[derive(Debug, Clone, Copy)]
enum Mode {
    Independent,
    Collective,
    Ordered,
}

/// One access of `count` elements of `datatype` at `buf`; the bytes moved, or the error
/// code (its detail set).
///
/// # Safety
/// `buf` holds `count` elements of `datatype` (the program's buffer).
unsafe fn access(
    f: &FileObj,
    at: At,
    mode: Mode,
    write: bool,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
) -> Result<usize, c_int> {
    let count = usize::try_from(count).map_err(|_| MPI_ERR_COUNT)?;
    let t = dtype_lookup(datatype).ok_or(MPI_ERR_TYPE)?;
    let bytes = count.checked_mul(t.size).ok_or(MPI_ERR_COUNT)?;
    if bytes > 0 && buf.is_null() {
        return Err(MPI_ERR_BUFFER);
    }
    let file = f.file.read();
    // "external32": the stream is big-endian (packed, then each element swapped).
    let external = file.datarep() == "external32";
    let r = if write {
        let mut packed = Vec::new();
        let data: &[u8] = if bytes == 0 {
            &[]
        } else if t.contiguous() && !external {
            // SAFETY: `bytes` bytes of the program's buffer (function contract).
            unsafe { std::slice::from_raw_parts(buf.cast::<u8>(), bytes) }
        } else {
            // SAFETY: `count` elements of `t` (function contract).
            unsafe { crate::dtype::pack_into(buf.cast(), count, &t, &mut packed) };
            if external {
                crate::dtype::swap_packed(&mut packed, count, &t);
            }
            &packed
        };
        match (at, mode) {
            (At::Offset(o), Mode::Collective) => file.write_at_all(o, data),
            (At::Offset(o), _) => file.write_at(o, data),
            (At::Own, Mode::Collective) => file.write_all(data),
            (At::Own, _) => file.write(data),
            (At::Shared, Mode::Ordered) => file.write_ordered(data),
            (At::Shared, _) => file.write_shared(data),
        }
    } else {
        let mut packed = Vec::new();
        let contiguous = bytes == 0 || (t.contiguous() && !external);
        let into: &mut [u8] = if bytes == 0 {
            &mut []
        } else if contiguous {
            // SAFETY: `bytes` writable bytes of the program's buffer (function contract).
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), bytes) }
        } else {
            packed.resize(bytes, 0);
            &mut packed
        };
        let r = match (at, mode) {
            (At::Offset(o), Mode::Collective) => file.read_at_all(o, into),
            (At::Offset(o), _) => file.read_at(o, into),
            (At::Own, Mode::Collective) => file.read_all(into),
            (At::Own, _) => file.read(into),
            (At::Shared, Mode::Ordered) => file.read_ordered(into),
            (At::Shared, _) => file.read_shared(into),
        };
        if let (Ok(n), false) = (&r, contiguous) {
            if external {
                crate::dtype::swap_packed(&mut packed[..*n], count, &t);
            }
            // SAFETY: `count` elements of `t` (function contract); the bytes read.
            unsafe { crate::dtype::unpack_from(&packed[..*n], buf.cast(), count, &t) };
        }
        r
    };
    r.map_err(|e| {
        crate::err::set_detail(e.to_string());
        super::code_of(&e)
    })
}

fn status_of(n: usize) -> MPI_Status {
    MPI_Status::new(MPI_ANY_SOURCE, MPI_ANY_TAG, n)
}

/// A blocking access: the status, or the error on the file's handler.
///
/// # Safety
/// As [`access`]; `status` is null or writable.
#[allow(clippy::too_many_arguments)]
unsafe fn blocking(
    fh: Handle,
    at: At,
    mode: Mode,
    write: bool,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    status: *mut MPI_Status,
) -> c_int {
    let f = file!(fh);
    // SAFETY: forwarded (function contract).
    match unsafe { access(&f, at, mode, write, buf, count, datatype) } {
        Ok(n) => {
            // SAFETY: null or writable (function contract).
            unsafe { crate::status::put_status(status, status_of(n)) };
            MPI_SUCCESS
        }
        Err(code) => raise_file(fh, code),
    }
}

/// A nonblocking access: done now, its request complete.
///
/// # Safety
/// As [`access`]; `request` is writable.
#[allow(clippy::too_many_arguments)]
unsafe fn started(
    fh: Handle,
    at: At,
    mode: Mode,
    write: bool,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
    request: *mut Handle,
) -> c_int {
    let f = file!(fh);
    // SAFETY: forwarded (function contract).
    match unsafe { access(&f, at, mode, write, buf, count, datatype) } {
        Ok(n) => {
            // SAFETY: output argument.
            unsafe { *request = crate::req::completed(MPI_COMM_SELF, status_of(n), MPI_SUCCESS) };
            MPI_SUCCESS
        }
        Err(code) => raise_file(fh, code),
    }
}

/// A split collective's begin: the collective now, its outcome kept for the end.
///
/// # Safety
/// As [`access`].
unsafe fn begin(
    fh: Handle,
    at: At,
    mode: Mode,
    write: bool,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: Handle,
) -> c_int {
    let f = file!(fh);
    if f.split.lock().is_some() {
        crate::err::set_detail("a split collective is already active on this file".into());
        return raise_file(fh, MPI_ERR_OTHER);
    }
    // SAFETY: forwarded (function contract).
    let outcome = match unsafe { access(&f, at, mode, write, buf, count, datatype) } {
        Ok(n) => (MPI_SUCCESS, status_of(n)),
        Err(code) => (code, status_of(0)),
    };
    *f.split.lock() = Some(outcome);
    MPI_SUCCESS
}

/// A split collective's end: the outcome of its begin.
///
/// # Safety
/// `status` is null or writable.
unsafe fn end(fh: Handle, status: *mut MPI_Status) -> c_int {
    let f = file!(fh);
    let Some((code, s)) = f.split.lock().take() else {
        crate::err::set_detail("no split collective is active on this file".into());
        return raise_file(fh, MPI_ERR_OTHER);
    };
    // SAFETY: null or writable (function contract).
    unsafe { crate::status::put_status(status, s) };
    if code == MPI_SUCCESS {
        MPI_SUCCESS
    } else {
        raise_file(fh, code)
    }
}

/// `file_fns!(shape, NAME, NAME_c, buffer type, [at,] mode, write)`: the call and its
/// large-count form (`file_fns!(end, READ_END, WRITE_END)`: a split collective's ends).
macro_rules! file_fns {
    (end, $n:ident, $m:ident) => {
        pub(crate) unsafe fn $n(fh: Handle, _buf: *mut c_void, status: *mut MPI_Status) -> c_int {
            // SAFETY: forwarded program argument.
            unsafe { end(fh, status) }
        }
        pub(crate) unsafe fn $m(fh: Handle, _buf: *const c_void, status: *mut MPI_Status) -> c_int {
            // SAFETY: forwarded program argument.
            unsafe { end(fh, status) }
        }
    };
    ($shape:ident, $n:ident, $nc:ident, $bt:ty, $($rest:expr),+) => {
        file_fn!($shape, $n, c_int, $bt, $($rest),+);
        file_fn!($shape, $nc, MPI_Count, $bt, $($rest),+);
    };
}

/// One function of [`file_fns`]: `count` of type `$ct`.
macro_rules! file_fn {
    (status, $n:ident, $ct:ty, $bt:ty, $at:expr, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(fh: Handle, buf: $bt, count: $ct, datatype: Handle, status: *mut MPI_Status) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { blocking(fh, $at, $mode, $w, buf as *mut c_void, count, datatype, status) }
        }
    };
    (status_at, $n:ident, $ct:ty, $bt:ty, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(
            fh: Handle,
            offset: MPI_Offset,
            buf: $bt,
            count: $ct,
            datatype: Handle,
            status: *mut MPI_Status,
        ) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { blocking(fh, At::Offset(offset), $mode, $w, buf as *mut c_void, count, datatype, status) }
        }
    };
    (request, $n:ident, $ct:ty, $bt:ty, $at:expr, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(fh: Handle, buf: $bt, count: $ct, datatype: Handle, request: *mut Handle) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { started(fh, $at, $mode, $w, buf as *mut c_void, count, datatype, request) }
        }
    };
    (request_at, $n:ident, $ct:ty, $bt:ty, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(
            fh: Handle,
            offset: MPI_Offset,
            buf: $bt,
            count: $ct,
            datatype: Handle,
            request: *mut Handle,
        ) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { started(fh, At::Offset(offset), $mode, $w, buf as *mut c_void, count, datatype, request) }
        }
    };
    (begin, $n:ident, $ct:ty, $bt:ty, $at:expr, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(fh: Handle, buf: $bt, count: $ct, datatype: Handle) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { begin(fh, $at, $mode, $w, buf as *mut c_void, count, datatype) }
        }
    };
    (begin_at, $n:ident, $ct:ty, $bt:ty, $mode:expr, $w:expr) => {
        pub(crate) unsafe fn $n(fh: Handle, offset: MPI_Offset, buf: $bt, count: $ct, datatype: Handle) -> c_int {
            let count = MPI_Count::from(count);
            // SAFETY: forwarded program arguments.
            unsafe { begin(fh, At::Offset(offset), $mode, $w, buf as *mut c_void, count, datatype) }
        }
    };
}

use Mode::{Collective, Independent, Ordered};

file_fns!(status, MPI_File_read, MPI_File_read_c, *mut c_void, At::Own, Independent, false);
file_fns!(status, MPI_File_write, MPI_File_write_c, *const c_void, At::Own, Independent, true);
file_fns!(status, MPI_File_read_all, MPI_File_read_all_c, *mut c_void, At::Own, Collective, false);
file_fns!(status, MPI_File_write_all, MPI_File_write_all_c, *const c_void, At::Own, Collective, true);
file_fns!(status, MPI_File_read_shared, MPI_File_read_shared_c, *mut c_void, At::Shared, Independent, false);
file_fns!(status, MPI_File_write_shared, MPI_File_write_shared_c, *const c_void, At::Shared, Independent, true);
file_fns!(status, MPI_File_read_ordered, MPI_File_read_ordered_c, *mut c_void, At::Shared, Ordered, false);
file_fns!(status, MPI_File_write_ordered, MPI_File_write_ordered_c, *const c_void, At::Shared, Ordered, true);
file_fns!(status_at, MPI_File_read_at, MPI_File_read_at_c, *mut c_void, Independent, false);
file_fns!(status_at, MPI_File_write_at, MPI_File_write_at_c, *const c_void, Independent, true);
file_fns!(status_at, MPI_File_read_at_all, MPI_File_read_at_all_c, *mut c_void, Collective, false);
file_fns!(status_at, MPI_File_write_at_all, MPI_File_write_at_all_c, *const c_void, Collective, true);
file_fns!(request, MPI_File_iread, MPI_File_iread_c, *mut c_void, At::Own, Independent, false);
file_fns!(request, MPI_File_iwrite, MPI_File_iwrite_c, *const c_void, At::Own, Independent, true);
file_fns!(request, MPI_File_iread_all, MPI_File_iread_all_c, *mut c_void, At::Own, Collective, false);
file_fns!(request, MPI_File_iwrite_all, MPI_File_iwrite_all_c, *const c_void, At::Own, Collective, true);
file_fns!(request, MPI_File_iread_shared, MPI_File_iread_shared_c, *mut c_void, At::Shared, Independent, false);
file_fns!(request, MPI_File_iwrite_shared, MPI_File_iwrite_shared_c, *const c_void, At::Shared, Independent, true);
file_fns!(request_at, MPI_File_iread_at, MPI_File_iread_at_c, *mut c_void, Independent, false);
file_fns!(request_at, MPI_File_iwrite_at, MPI_File_iwrite_at_c, *const c_void, Independent, true);
file_fns!(request_at, MPI_File_iread_at_all, MPI_File_iread_at_all_c, *mut c_void, Collective, false);
file_fns!(request_at, MPI_File_iwrite_at_all, MPI_File_iwrite_at_all_c, *const c_void, Collective, true);
file_fns!(begin, MPI_File_read_all_begin, MPI_File_read_all_begin_c, *mut c_void, At::Own, Collective, false);
file_fns!(begin, MPI_File_write_all_begin, MPI_File_write_all_begin_c, *const c_void, At::Own, Collective, true);
file_fns!(begin, MPI_File_read_ordered_begin, MPI_File_read_ordered_begin_c, *mut c_void, At::Shared, Ordered, false);
file_fns!(
    begin,
    MPI_File_write_ordered_begin,
    MPI_File_write_ordered_begin_c,
    *const c_void,
    At::Shared,
    Ordered,
    true
);
file_fns!(begin_at, MPI_File_read_at_all_begin, MPI_File_read_at_all_begin_c, *mut c_void, Collective, false);
file_fns!(begin_at, MPI_File_write_at_all_begin, MPI_File_write_at_all_begin_c, *const c_void, Collective, true);
file_fns!(end, MPI_File_read_all_end, MPI_File_write_all_end);
file_fns!(end, MPI_File_read_at_all_end, MPI_File_write_at_all_end);
file_fns!(end, MPI_File_read_ordered_end, MPI_File_write_ordered_end);

pub(crate) unsafe fn MPI_File_get_type_extent_c(fh: Handle, datatype: Handle, extent: *mut MPI_Count) -> c_int {
    let _f = file!(fh);
    let Some(t) = dtype_lookup(datatype) else { return raise_file(fh, MPI_ERR_TYPE) };
    // SAFETY: output argument ("native": the file extent is the memory extent).
    unsafe { *extent = t.extent() as MPI_Count };
    MPI_SUCCESS
}
