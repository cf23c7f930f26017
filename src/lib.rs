//! runthrough: fault-tolerant message passing over shared memory (and libfabric).
//!
//! The facade is thin: [`init`] bootstraps the process (under `rtrun`, or as a
//! singleton) and returns a [`Runtime`] whose [`Runtime::world`] communicator sends and
//! receives typed buffers ([`Pod`] types or raw bytes).
//!
//! ```no_run
//! let rt = runthrough::init()?;
//! let world = rt.world();
//! let (rank, size) = (world.rank(), world.size());
//! let mut token = [0u64];
//! if rank == 0 {
//!     world.send(&[41u64], 1 % size, 0)?;
//!     world.recv(&mut token, size - 1, 0)?;
//! } else {
//!     world.recv(&mut token, rank - 1, 0)?;
//!     token[0] += 1;
//!     world.send(&token, (rank + 1) % size, 0)?;
//! }
//! rt.finalize()?;
//! # Ok::<(), runthrough::Error>(())
//! ```
//!
//! Parts: [`runtime`] (init, finalize, the fatal scope), [`comm`] (communicators, error
//! modes, point-to-point), [`request`] (nonblocking requests that borrow their buffers),
//! [`coll`] (collectives and reduction operators), [`group`] (process groups).
//!
//! Errors are [`Error`] values (R1); under the default [`ErrorMode::ErrorsAreFatal`] an
//! error aborts the processes of the communicator's group (R3), under
//! [`ErrorMode::ErrorsReturn`] it is returned.
#![forbid(unsafe_code)]

mod boot;
pub mod coll;
pub mod comm;
pub mod group;
pub mod request;
pub mod runtime;

pub use bytemuck::Pod;
pub use coll::{CollRequest, LocF32, LocF64, LocI32, LocI64, Op, Reduce};
pub use comm::{Comm, ErrorMode, Source, TagSel, ValidateRequest, ANY_SOURCE, ANY_TAG};
pub use group::{Group, GroupOrder};
pub use request::{wait_all, wait_any, Request};
pub use runthrough_engine::{Class, Error, Scope, Status, TAG_UB};
pub use runtime::{init, FatalScope, Runtime};
