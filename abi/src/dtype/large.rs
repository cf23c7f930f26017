//! The large-count (`_c`) forms of the datatype constructors and queries, pack and
//! unpack, and `MPI_Type_match_size`: counts and arrays converted (`crate::count`), then
//! the `int` forms.

use std::ffi::{c_int, c_void};

use crate::consts::*;
use crate::count::small_count;
use crate::raise::raise_on;
use crate::types::{Handle, MPI_Aint, MPI_Count};

pub(crate) unsafe fn MPI_Type_contiguous_c(count: MPI_Count, oldtype: Handle, newtype: *mut Handle) -> c_int {
    match c_int::try_from(count) {
        // SAFETY: forwarded.
        Ok(n) => unsafe { crate::dtype::MPI_Type_contiguous(n, oldtype, newtype) },
        // SAFETY: forwarded.
        Err(_) => unsafe { crate::dtype::contiguous_large(count, oldtype, newtype) },
    }
}
pub(crate) unsafe fn MPI_Type_vector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_vector_c(count, blocklength, stride, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hvector_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    stride: MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hvector_c(count, blocklength, stride, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_indexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_indexed_c(count, array_of_blocklengths, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hindexed_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hindexed_c(count, array_of_blocklengths, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_indexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_indexed_block_c(count, blocklength, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_hindexed_block_c(
    count: MPI_Count,
    blocklength: MPI_Count,
    array_of_displacements: *const MPI_Count,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::type_hindexed_block_c(count, blocklength, array_of_displacements, oldtype, newtype) }
}
pub(crate) unsafe fn MPI_Type_create_struct_c(
    count: MPI_Count,
    array_of_blocklengths: *const MPI_Count,
    array_of_displacements: *const MPI_Count,
    array_of_types: *const Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::type_struct_c(count, array_of_blocklengths, array_of_displacements, array_of_types, newtype)
    }
}
pub(crate) unsafe fn MPI_Type_create_resized_c(
    oldtype: Handle,
    lb: MPI_Count,
    extent: MPI_Count,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::dtype::MPI_Type_create_resized(oldtype, lb as isize, extent as isize, newtype) }
}
pub(crate) unsafe fn MPI_Type_get_envelope_c(
    datatype: Handle,
    num_integers: *mut MPI_Count,
    num_addresses: *mut MPI_Count,
    num_large_counts: *mut MPI_Count,
    num_datatypes: *mut MPI_Count,
    combiner: *mut c_int,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *num_integers = t.ints.len() as MPI_Count;
        *num_addresses = t.aints.len() as MPI_Count;
        *num_large_counts = t.large.len() as MPI_Count;
        *num_datatypes = t.types.len() as MPI_Count;
        *combiner = t.combiner;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_contents_c(
    datatype: Handle,
    max_integers: MPI_Count,
    max_addresses: MPI_Count,
    max_large_counts: MPI_Count,
    max_datatypes: MPI_Count,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut MPI_Aint,
    array_of_large_counts: *mut MPI_Count,
    array_of_datatypes: *mut Handle,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    if (max_large_counts as usize) < t.large.len() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: an array of max_large_counts entries (MPI contract), checked above.
    unsafe { std::ptr::copy_nonoverlapping(t.large.as_ptr(), array_of_large_counts, t.large.len()) };
    // SAFETY: forwarded.
    unsafe {
        crate::dtype::MPI_Type_get_contents(
            datatype,
            small_count!(max_integers),
            small_count!(max_addresses),
            small_count!(max_datatypes),
            array_of_integers,
            array_of_addresses,
            array_of_datatypes,
        )
    }
}

pub(crate) unsafe fn MPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut Handle) -> c_int {
    let t = match (typeclass, size) {
        (MPI_TYPECLASS_INTEGER, 1) => MPI_INTEGER1,
        (MPI_TYPECLASS_INTEGER, 2) => MPI_INTEGER2,
        (MPI_TYPECLASS_INTEGER, 4) => MPI_INTEGER4,
        (MPI_TYPECLASS_INTEGER, 8) => MPI_INTEGER8,
        (MPI_TYPECLASS_INTEGER, 16) => MPI_INTEGER16,
        (MPI_TYPECLASS_REAL, 2) => MPI_REAL2,
        (MPI_TYPECLASS_REAL, 4) => MPI_REAL4,
        (MPI_TYPECLASS_REAL, 8) => MPI_REAL8,
        (MPI_TYPECLASS_REAL, 16) => MPI_REAL16,
        (MPI_TYPECLASS_COMPLEX, 4) => MPI_COMPLEX4,
        (MPI_TYPECLASS_COMPLEX, 8) => MPI_COMPLEX8,
        (MPI_TYPECLASS_COMPLEX, 16) => MPI_COMPLEX16,
        (MPI_TYPECLASS_COMPLEX, 32) => MPI_COMPLEX32,
        _ => return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG),
    };
    // SAFETY: output argument.
    unsafe { *datatype = t };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_c(
    inbuf: *const c_void,
    incount: MPI_Count,
    datatype: Handle,
    outbuf: *mut c_void,
    outsize: MPI_Count,
    position: *mut MPI_Count,
    comm: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = small_count!(unsafe { *position });
    // SAFETY: forwarded.
    let rc = unsafe {
        crate::dtype::MPI_Pack(inbuf, small_count!(incount), datatype, outbuf, small_count!(outsize), &mut pos, comm)
    };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}
pub(crate) unsafe fn MPI_Unpack_c(
    inbuf: *const c_void,
    insize: MPI_Count,
    position: *mut MPI_Count,
    outbuf: *mut c_void,
    outcount: MPI_Count,
    datatype: Handle,
    comm: Handle,
) -> c_int {
    // SAFETY: in/out argument.
    let mut pos = small_count!(unsafe { *position });
    // SAFETY: forwarded.
    let rc = unsafe {
        crate::dtype::MPI_Unpack(inbuf, small_count!(insize), &mut pos, outbuf, small_count!(outcount), datatype, comm)
    };
    // SAFETY: in/out argument.
    unsafe { *position = pos as MPI_Count };
    rc
}
pub(crate) unsafe fn MPI_Pack_size_c(
    incount: MPI_Count,
    datatype: Handle,
    comm: Handle,
    size: *mut MPI_Count,
) -> c_int {
    let t = crate::dtype::dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = incount.max(0) * t.size as MPI_Count };
    MPI_SUCCESS
}
