//! `external32` packing (big-endian, native sizes) and the large-count forms of the
//! subarray and darray constructors.

use std::ffi::{c_char, c_int, c_void, CStr};

use crate::consts::*;
use crate::count::{small_count, wide_count};
use crate::raise::raise_on;
use crate::types::{Handle, MPI_Aint, MPI_Count};

/// Converts packed data of `count` elements of `t` between native and big-endian byte
/// order in place (its own inverse): every leaf element is reversed.
pub(crate) fn swap_packed(buf: &mut [u8], count: usize, t: &crate::dtype::Dtype) {
    if cfg!(target_endian = "big") {
        return;
    }
    let mut pos = 0;
    for _ in 0..count {
        for s in &t.segs {
            let unit = s.esize.max(1);
            let end = (pos + s.len).min(buf.len());
            for chunk in buf[pos..end].chunks_mut(unit) {
                chunk.reverse();
            }
            pos = end;
        }
    }
}

unsafe fn datarep_ok(datarep: *const c_char) -> bool {
    // SAFETY: C string (MPI contract).
    !datarep.is_null() && unsafe { CStr::from_ptr(datarep) }.to_bytes() == b"external32"
}

pub(crate) unsafe fn MPI_Pack_external_size(
    datarep: *const c_char,
    incount: c_int,
    datatype: Handle,
    size: *mut MPI_Aint,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    // SAFETY: output argument.
    unsafe { *size = incount.max(0) as MPI_Aint * t.size as MPI_Aint };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_external_size_c(
    datarep: *const c_char,
    incount: MPI_Count,
    datatype: Handle,
    size: *mut MPI_Count,
) -> c_int {
    let mut s: MPI_Aint = 0;
    // SAFETY: forwarded; output argument.
    unsafe {
        let rc = MPI_Pack_external_size(datarep, small_count!(incount), datatype, &mut s);
        *size = s as MPI_Count;
        rc
    }
}

pub(crate) unsafe fn MPI_Pack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: c_int,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Aint,
    position: *mut MPI_Aint,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    let n = incount.max(0) as usize;
    // SAFETY: in/out argument.
    let pos = unsafe { *position }.max(0) as usize;
    if pos + n * t.size > outsize.max(0) as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TRUNCATE);
    }
    let mut tmp = Vec::new();
    // SAFETY: the program's buffers (MPI contract); room checked above.
    unsafe {
        crate::dtype::pack_into(inbuf.cast(), n, &t, &mut tmp);
        swap_packed(&mut tmp, n, &t);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), outbuf.cast::<u8>().add(pos), tmp.len());
        *position = (pos + tmp.len()) as MPI_Aint;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Unpack_external(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Aint,
    position: *mut MPI_Aint,
    outbuf: *mut c_void,
    outcount: c_int,
    datatype: Handle,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: C string.
    if !unsafe { datarep_ok(datarep) } {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_UNSUPPORTED_DATAREP);
    }
    let n = outcount.max(0) as usize;
    // SAFETY: in/out argument.
    let pos = unsafe { *position }.max(0) as usize;
    let need = n * t.size;
    if pos + need > insize.max(0) as usize {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TRUNCATE);
    }
    // SAFETY: the program's buffers; size checked above.
    unsafe {
        let mut tmp = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), need).to_vec();
        swap_packed(&mut tmp, n, &t);
        crate::dtype::unpack_from(&tmp, outbuf.cast(), n, &t);
        *position = (pos + need) as MPI_Aint;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = unsafe { *position } as MPI_Aint;
    // SAFETY: forwarded.
    let rc = unsafe {
        MPI_Pack_external(datarep, inbuf, small_count!(incount), datatype, outbuf, outsize as MPI_Aint, &mut pos)
    };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}

pub(crate) unsafe fn MPI_Unpack_external_c(
    datarep: *const c_char,
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = unsafe { *position } as MPI_Aint;
    // SAFETY: forwarded.
    let rc = unsafe {
        MPI_Unpack_external(datarep, inbuf, insize as MPI_Aint, &mut pos, outbuf, small_count!(outcount), datatype)
    };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}

pub(crate) unsafe fn MPI_Type_create_subarray_c(
    ndims: c_int,
    array_of_sizes: *const MPI_Count,
    array_of_subsizes: *const MPI_Count,
    array_of_starts: *const MPI_Count,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let n = ndims as MPI_Count;
    let a: Vec<c_int> = wide_count!(array_of_sizes, n);
    let b: Vec<c_int> = wide_count!(array_of_subsizes, n);
    let c: Vec<c_int> = wide_count!(array_of_starts, n);
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_create_subarray(ndims, a.as_ptr(), b.as_ptr(), c.as_ptr(), order, oldtype, newtype)
    }
}

pub(crate) unsafe fn MPI_Type_create_darray_c(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const MPI_Count,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let g: Vec<c_int> = wide_count!(array_of_gsizes, ndims as MPI_Count);
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_create_darray(
            size,
            rank,
            ndims,
            g.as_ptr(),
            array_of_distribs,
            array_of_dargs,
            array_of_psizes,
            order,
            oldtype,
            newtype,
        )
    }
}
