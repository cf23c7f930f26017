//! [`DtRef`]: a datatype as one call uses it, borrowed when it is predefined.

use std::ops::Deref;
use std::sync::Arc;

use super::Dtype;

/// A datatype looked up for a call: a predefined one is borrowed from the table that lives
/// as long as the process, so the hot path (a send, a put of `MPI_INT`) touches no
/// reference count; a derived one is shared, so `MPI_Type_free` during the call frees
/// nothing it uses.
#[derive(Debug, Clone)]
pub(crate) enum DtRef {
    /// A predefined type.
    Static(&'static Arc<Dtype>),
    /// A derived type.
    Shared(Arc<Dtype>),
}

impl DtRef {
    /// The type as an `Arc`, for what keeps it past the call (a request's unpack).
    pub(crate) fn into_arc(self) -> Arc<Dtype> {
        match self {
            DtRef::Static(a) => Arc::clone(a),
            DtRef::Shared(a) => a,
        }
    }
}

impl Deref for DtRef {
    type Target = Dtype;

    #[inline]
    fn deref(&self) -> &Dtype {
        match self {
            DtRef::Static(a) => a,
            DtRef::Shared(a) => a,
        }
    }
}
