//! `libmpi_abi.so.1`: the MPI-5 standard ABI over runthrough.
//!
//! Programs compiled once against the standard header `mpi_abi.h` (MPICH's `mpicc_abi`,
//! mpi4py built with `MPI4PY_BUILD_MPIABI=1`) run on runthrough by putting this library
//! first on `LD_LIBRARY_PATH`. Handle values and constants are the header's (generated
//! into `consts.rs` by `gen.py`); every function of the header is exported under its
//! `MPI_` and `PMPI_` names (`exports.rs`, generated), either implemented here or
//! returning `MPI_ERR_UNSUPPORTED_OPERATION` through the error handler with a message
//! naming it. The ULFM and run-through extensions are in `abi/include/mpi-ext.h`.
//!
//! This crate is the C boundary: `unsafe` is confined to reading and writing the
//! program's arguments, each block with its `SAFETY:` note, and no panic crosses into C
//! (`guard.rs`). See `docs/ABI.md`.
// The functions keep the header's parameter lists, used or not, and walk C arrays by index.
#![allow(
    non_snake_case,
    unused_variables,
    clippy::missing_safety_doc,
    clippy::too_many_arguments,
    clippy::needless_range_loop,
    unreachable_pub
)]

// The modules form layers, each using only those below it (no import cycle):
// - plain types and constants: `types`, `consts`, `handles`, `status`;
// - error codes, classes and strings, with the error handler objects: `err`; attribute
//   storage: `keyval`;
// - the communicator and window objects and their tables: `commobj`, `winobj`; the
//   runtime handle (the runtime, MPI_COMM_WORLD and MPI_COMM_SELF, the live sessions,
//   handle lookup): `rt`;
// - raising an error through its object's handler, and chapter 9's calls: `raise`;
// - the object families: `count`, `info`, `group`, `dtype`, `op`, `req` (with
//   generalized requests), `comm`, `attr`, `env` (the world model), `session`;
// - the operations over them: `p2p`, `bsend`, `coll`, `topo`, `ft`, `file`, `win`
//   (one-sided communication);
// - the C boundary: `guard`, and `exports` (generated) on top.
mod attr;
mod bsend;
mod coll;
mod comm;
mod commobj;
#[rustfmt::skip]
mod consts;
mod count;
mod dtype;
mod env;
mod err;
#[allow(missing_docs)]
#[rustfmt::skip]
mod exports;
mod file;
mod ft;
mod group;
mod guard;
mod handles;
mod info;
mod keyval;
mod op;
mod p2p;
mod raise;
mod req;
mod rt;
mod session;
mod spawn;
mod status;
mod topo;
pub mod types;
mod win;
mod winobj;

/// Every implementation, under its MPI name, for `exports.rs`.
mod imp {
    pub(crate) use crate::attr::*;
    pub(crate) use crate::bsend::*;
    pub(crate) use crate::coll::*;
    pub(crate) use crate::comm::*;
    pub(crate) use crate::dtype::*;
    pub(crate) use crate::env::*;
    pub(crate) use crate::file::*;
    pub(crate) use crate::ft::*;
    pub(crate) use crate::group::*;
    pub(crate) use crate::info::*;
    pub(crate) use crate::op::*;
    pub(crate) use crate::p2p::*;
    pub(crate) use crate::raise::*;
    pub(crate) use crate::req::*;
    pub(crate) use crate::session::*;
    pub(crate) use crate::spawn::*;
    pub(crate) use crate::topo::*;
    pub(crate) use crate::win::*;
}
