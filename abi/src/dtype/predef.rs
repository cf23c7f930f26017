//! The predefined datatypes: what a reduction sees in one element ([`Basic`]) and the
//! table of the header's datatype handles.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use super::layout::{Builder, Layout};
use super::Dtype;
use crate::consts::*;
use crate::types::Handle;

/// What a reduction sees in one (packed) element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Basic {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    I128,
    F32,
    F64,
    Bool,
    Byte,
    CF32,
    CF64,
    /// `(value, index)` pairs for MINLOC/MAXLOC.
    Pair(PairKind),
    /// C's long double (16 bytes, x87 extended precision).
    LongDouble,
    /// C's long double _Complex (32 bytes).
    CLongDouble,
    /// Data no predefined operation applies to (long double, half precision, wchar).
    Opaque(usize),
}

/// The MINLOC/MAXLOC pair types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PairKind {
    FloatInt,
    DoubleInt,
    LongInt,
    TwoInt,
    ShortInt,
    TwoFloat,
    TwoDouble,
    LongDoubleInt,
}

impl Basic {
    /// Bytes of one packed element.
    pub(crate) fn size(self) -> usize {
        use Basic::*;
        match self {
            I8 | U8 | Bool | Byte => 1,
            I16 | U16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 | CF32 => 8,
            I128 | CF64 | LongDouble => 16,
            CLongDouble => 32,
            Pair(p) => match p {
                PairKind::FloatInt | PairKind::TwoInt | PairKind::TwoFloat => 8,
                PairKind::DoubleInt | PairKind::LongInt => 12,
                PairKind::ShortInt => 6,
                PairKind::TwoDouble => 16,
                PairKind::LongDoubleInt => 20,
            },
            Opaque(n) => n,
        }
    }
}

impl Dtype {
    fn leaf(name: &str, size: usize, basic: Basic) -> Dtype {
        // A complex number is one basic element (MPI_Get_elements counts it once).
        Dtype {
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            segs: Layout::leaf(size, size),
            marked: false,
            basic: Some(basic),
            align: size.clamp(1, 16),
            predefined: true,
            committed: AtomicBool::new(true),
            name: Mutex::new(name.to_string()),
            combiner: MPI_COMBINER_NAMED,
            ints: Vec::new(),
            aints: Vec::new(),
            types: Vec::new(),
            type_objs: Vec::new(),
            large: Vec::new(),
            attrs: Mutex::default(),
        }
    }

    /// A pair type: `a` bytes at 0, `b` bytes at `boff`, extent `ext`. Its type map is a
    /// struct of its two basic types, so it holds two basic elements (MPI-4.1 6.9.4;
    /// MPICH counts them so too).
    fn pair(name: &str, a: usize, boff: usize, b: usize, ext: usize, kind: PairKind) -> Dtype {
        let mut l = Builder::default();
        l.run(0, a, a, 1, 0);
        l.run(boff as isize, b, b, 1, 0);
        Dtype {
            size: a + b,
            lb: 0,
            ub: ext as isize,
            true_lb: 0,
            true_ub: (boff + b) as isize,
            segs: l.finish().unwrap_or_default(),
            basic: Some(Basic::Pair(kind)),
            align: a.max(b).min(16),
            ..Dtype::leaf(name, 0, Basic::Byte)
        }
    }
}

#[inline]
fn predefined_table() -> &'static Vec<Option<Arc<Dtype>>> {
    static T: OnceLock<Vec<Option<Arc<Dtype>>>> = OnceLock::new();
    T.get_or_init(|| {
        use Basic::*;
        let mut t: Vec<Option<Arc<Dtype>>> = vec![None; 0x100];
        let mut put = |h: Handle, d: Dtype| t[h - 0x200] = Some(Arc::new(d));
        let leaves: &[(Handle, &str, usize, Basic)] = &[
            (MPI_AINT, "MPI_AINT", 8, I64),
            (MPI_COUNT, "MPI_COUNT", 8, I64),
            (MPI_OFFSET, "MPI_OFFSET", 8, I64),
            (MPI_PACKED, "MPI_PACKED", 1, Byte),
            (MPI_SHORT, "MPI_SHORT", 2, I16),
            (MPI_INT, "MPI_INT", 4, I32),
            (MPI_LONG, "MPI_LONG", 8, I64),
            (MPI_LONG_LONG, "MPI_LONG_LONG", 8, I64),
            (MPI_UNSIGNED_SHORT, "MPI_UNSIGNED_SHORT", 2, U16),
            (MPI_UNSIGNED, "MPI_UNSIGNED", 4, U32),
            (MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", 8, U64),
            (MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", 8, U64),
            (MPI_FLOAT, "MPI_FLOAT", 4, F32),
            (MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", 8, CF32),
            (MPI_CXX_FLOAT_COMPLEX, "MPI_CXX_FLOAT_COMPLEX", 8, CF32),
            (MPI_DOUBLE, "MPI_DOUBLE", 8, F64),
            (MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", 16, CF64),
            (MPI_CXX_DOUBLE_COMPLEX, "MPI_CXX_DOUBLE_COMPLEX", 16, CF64),
            (MPI_LOGICAL, "MPI_LOGICAL", 4, I32),
            (MPI_INTEGER, "MPI_INTEGER", 4, I32),
            (MPI_REAL, "MPI_REAL", 4, F32),
            (MPI_COMPLEX, "MPI_COMPLEX", 8, CF32),
            (MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", 8, F64),
            (MPI_DOUBLE_COMPLEX, "MPI_DOUBLE_COMPLEX", 16, CF64),
            (MPI_CHARACTER, "MPI_CHARACTER", 1, I8),
            (MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE", 16, LongDouble),
            (MPI_C_LONG_DOUBLE_COMPLEX, "MPI_C_LONG_DOUBLE_COMPLEX", 32, CLongDouble),
            (MPI_CXX_LONG_DOUBLE_COMPLEX, "MPI_CXX_LONG_DOUBLE_COMPLEX", 32, CLongDouble),
            (MPI_C_BOOL, "MPI_C_BOOL", 1, Bool),
            (MPI_CXX_BOOL, "MPI_CXX_BOOL", 1, Bool),
            (MPI_WCHAR, "MPI_WCHAR", 4, Opaque(4)),
            (MPI_INT8_T, "MPI_INT8_T", 1, I8),
            (MPI_UINT8_T, "MPI_UINT8_T", 1, U8),
            (MPI_CHAR, "MPI_CHAR", 1, I8),
            (MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", 1, I8),
            (MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", 1, U8),
            (MPI_BYTE, "MPI_BYTE", 1, Byte),
            (MPI_INT16_T, "MPI_INT16_T", 2, I16),
            (MPI_UINT16_T, "MPI_UINT16_T", 2, U16),
            (MPI_INT32_T, "MPI_INT32_T", 4, I32),
            (MPI_UINT32_T, "MPI_UINT32_T", 4, U32),
            (MPI_INT64_T, "MPI_INT64_T", 8, I64),
            (MPI_UINT64_T, "MPI_UINT64_T", 8, U64),
            (MPI_LOGICAL1, "MPI_LOGICAL1", 1, I8),
            (MPI_INTEGER1, "MPI_INTEGER1", 1, I8),
            (MPI_LOGICAL2, "MPI_LOGICAL2", 2, I16),
            (MPI_INTEGER2, "MPI_INTEGER2", 2, I16),
            (MPI_REAL2, "MPI_REAL2", 2, Opaque(2)),
            (MPI_LOGICAL4, "MPI_LOGICAL4", 4, I32),
            (MPI_INTEGER4, "MPI_INTEGER4", 4, I32),
            (MPI_REAL4, "MPI_REAL4", 4, F32),
            (MPI_COMPLEX4, "MPI_COMPLEX4", 4, Opaque(4)),
            (MPI_LOGICAL8, "MPI_LOGICAL8", 8, I64),
            (MPI_INTEGER8, "MPI_INTEGER8", 8, I64),
            (MPI_REAL8, "MPI_REAL8", 8, F64),
            (MPI_COMPLEX8, "MPI_COMPLEX8", 8, CF32),
            (MPI_LOGICAL16, "MPI_LOGICAL16", 16, Opaque(16)),
            (MPI_INTEGER16, "MPI_INTEGER16", 16, I128),
            (MPI_REAL16, "MPI_REAL16", 16, Opaque(16)),
            (MPI_COMPLEX16, "MPI_COMPLEX16", 16, CF64),
            (MPI_COMPLEX32, "MPI_COMPLEX32", 32, Opaque(32)),
        ];
        for &(h, n, s, b) in leaves {
            let mut d = Dtype::leaf(n, s, b);
            if matches!(b, CF32 | CF64 | CLongDouble) {
                d.align = s / 2;
            }
            put(h, d);
        }
        put(MPI_FLOAT_INT, Dtype::pair("MPI_FLOAT_INT", 4, 4, 4, 8, PairKind::FloatInt));
        put(MPI_DOUBLE_INT, Dtype::pair("MPI_DOUBLE_INT", 8, 8, 4, 16, PairKind::DoubleInt));
        put(MPI_LONG_INT, Dtype::pair("MPI_LONG_INT", 8, 8, 4, 16, PairKind::LongInt));
        put(MPI_2INT, Dtype::pair("MPI_2INT", 4, 4, 4, 8, PairKind::TwoInt));
        put(MPI_SHORT_INT, Dtype::pair("MPI_SHORT_INT", 2, 4, 4, 8, PairKind::ShortInt));
        put(MPI_LONG_DOUBLE_INT, Dtype::pair("MPI_LONG_DOUBLE_INT", 16, 16, 4, 32, PairKind::LongDoubleInt));
        put(MPI_2REAL, Dtype::pair("MPI_2REAL", 4, 4, 4, 8, PairKind::TwoFloat));
        put(MPI_2DOUBLE_PRECISION, Dtype::pair("MPI_2DOUBLE_PRECISION", 8, 8, 8, 16, PairKind::TwoDouble));
        put(MPI_2INTEGER, Dtype::pair("MPI_2INTEGER", 4, 4, 4, 8, PairKind::TwoInt));
        for (i, d) in t.iter().enumerate() {
            if let Some(d) = d.as_ref().filter(|d| d.contiguous()) {
                CONTIG_SIZE[i].store(d.size as u32 + 1, Ordering::Relaxed);
            }
        }
        t
    })
}

/// Per predefined handle (`h - 0x200`): the type's size plus one when it is contiguous,
/// 0 otherwise or before the table is built: one load for the hot paths.
static CONTIG_SIZE: [AtomicU32; 0x100] = [const { AtomicU32::new(0) }; 0x100];

/// The size of predefined contiguous datatype `h`; `None` for any other handle (or
/// before [`init_predefined`]), which the general path then resolves.
#[inline(always)]
pub(crate) fn contiguous_predefined_size(h: Handle) -> Option<usize> {
    let i = h.wrapping_sub(0x200);
    if i >= 0x100 {
        return None;
    }
    match CONTIG_SIZE[i].load(Ordering::Relaxed) {
        0 => None,
        n => Some(n as usize - 1),
    }
}

/// Builds the table of predefined datatypes (MPI_Init calls it, so the hot paths find
/// [`contiguous_predefined_size`] filled).
pub(crate) fn init_predefined() {
    predefined_table();
}

/// The predefined datatype of handle `h` (`0x200..0x300`).
#[inline]
pub(crate) fn predefined(h: Handle) -> Option<&'static Arc<Dtype>> {
    predefined_table().get(h.wrapping_sub(0x200))?.as_ref()
}
