//! Datatypes: the predefined ones, the derived constructors, sizes and extents, pack and
//! unpack.
//!
//! A datatype is its type map flattened into byte segments of one element (offset from
//! the element's start, length, leaf element size), merged where contiguous. Sends of a
//! contiguous type go straight from the program's buffer; any other layout is packed into
//! a temporary buffer first and unpacked on arrival.

use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::consts::*;
use crate::err::{put_string, raise_on};
use crate::handles::{Kind, Table};
use crate::types::{Handle, MPI_Count, MPI_Status};

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

/// A run of data bytes in one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seg {
    pub(crate) off: isize,
    pub(crate) len: usize,
    /// Size of the leaf elements in it (for MPI_Get_elements).
    pub(crate) esize: usize,
}

/// A datatype.
#[derive(Debug)]
pub(crate) struct Dtype {
    pub(crate) size: usize,
    pub(crate) lb: isize,
    pub(crate) ub: isize,
    pub(crate) true_lb: isize,
    pub(crate) true_ub: isize,
    pub(crate) segs: Vec<Seg>,
    /// The element every reduction works on, when the whole type is made of one.
    pub(crate) basic: Option<Basic>,
    /// Largest leaf alignment (struct extents are padded to it).
    pub(crate) align: usize,
    pub(crate) predefined: bool,
    pub(crate) committed: AtomicBool,
    pub(crate) name: Mutex<String>,
    pub(crate) combiner: c_int,
    pub(crate) ints: Vec<c_int>,
    pub(crate) aints: Vec<isize>,
    pub(crate) types: Vec<Handle>,
    /// The constituent types themselves (kept alive: a derived type outlives the handles
    /// it was built from, MPI 5, 5.1.10).
    pub(crate) type_objs: Vec<Arc<Dtype>>,
    /// Large counts of the constructor (the `_c` forms past `int`).
    pub(crate) large: Vec<MPI_Count>,
}

impl Dtype {
    pub(crate) fn extent(&self) -> isize {
        self.ub - self.lb
    }

    /// Whether `count` elements are `count * size` bytes from the buffer start.
    #[inline]
    pub(crate) fn contiguous(&self) -> bool {
        self.size == 0
            || (self.segs.len() == 1
                && self.segs[0].off == 0
                && self.segs[0].len == self.size
                && self.extent() == self.size as isize)
    }

    fn leaf(name: &str, size: usize, basic: Basic) -> Dtype {
        Dtype {
            size,
            lb: 0,
            ub: size as isize,
            true_lb: 0,
            true_ub: size as isize,
            segs: if size > 0 { vec![Seg { off: 0, len: size, esize: size }] } else { Vec::new() },
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
        }
    }

    /// A pair type: `a` bytes at 0, `b` bytes at `boff`, extent `ext`.
    fn pair(name: &str, a: usize, boff: usize, b: usize, ext: usize, kind: PairKind) -> Dtype {
        let segs = if boff == a {
            vec![Seg { off: 0, len: a + b, esize: a.min(b) }]
        } else {
            vec![Seg { off: 0, len: a, esize: a }, Seg { off: boff as isize, len: b, esize: b }]
        };
        Dtype {
            size: a + b,
            lb: 0,
            ub: ext as isize,
            true_lb: 0,
            true_ub: (boff + b) as isize,
            segs,
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
                d.segs[0].esize = s;
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

pub(crate) static TYPES: Table<Dtype> = Table::new(Kind::Datatype);

/// The datatype of handle `h`.
pub(crate) fn lookup(h: Handle) -> Option<Arc<Dtype>> {
    if (0x200..0x300).contains(&h) {
        return predefined_table()[h - 0x200].clone();
    }
    TYPES.get(h)
}

macro_rules! dtype {
    ($h:expr) => {
        match crate::dtype::lookup($h) {
            Some(d) => d,
            None => return crate::err::raise_on(crate::consts::MPI_COMM_WORLD, crate::consts::MPI_ERR_TYPE),
        }
    };
}
pub(crate) use dtype;

/// Appends `s` to `segs`, merging it with the last one when they touch.
fn push_seg(segs: &mut Vec<Seg>, s: Seg) {
    if s.len == 0 {
        return;
    }
    if let Some(last) = segs.last_mut() {
        if last.off + last.len as isize == s.off && last.esize == s.esize {
            last.len += s.len;
            return;
        }
    }
    segs.push(s);
}

/// The general constructor: blocks of `count[i]` elements of `types[i]` at byte
/// displacement `displs[i]` (struct; every other constructor is a special case).
fn build(blocks: &[(usize, isize, Arc<Dtype>)], is_struct: bool) -> Dtype {
    let mut segs = Vec::new();
    let mut size = 0usize;
    let (mut lb, mut ub) = (isize::MAX, isize::MIN);
    let (mut tlb, mut tub) = (isize::MAX, isize::MIN);
    let mut basic: Option<Option<Basic>> = None;
    let mut align = 1;
    for (n, d, t) in blocks {
        if *n == 0 {
            continue;
        }
        let ext = t.extent();
        if t.contiguous() && t.size > 0 {
            // n contiguous elements are one run of bytes.
            let s0 = t.segs[0];
            push_seg(&mut segs, Seg { off: *d, len: n * t.size, esize: s0.esize });
        } else {
            for j in 0..*n as isize {
                let base = d + j * ext;
                for s in &t.segs {
                    push_seg(&mut segs, Seg { off: base + s.off, len: s.len, esize: s.esize });
                }
            }
        }
        size += n * t.size;
        lb = lb.min(d + t.lb);
        ub = ub.max(d + t.lb + *n as isize * ext);
        if t.size > 0 {
            tlb = tlb.min(d + t.true_lb);
            tub = tub.max(d + (*n as isize - 1) * ext + t.true_ub);
        }
        basic = Some(match basic {
            None => t.basic,
            Some(b) if b == t.basic => b,
            Some(_) => None,
        });
        align = align.max(t.align);
    }
    if lb == isize::MAX {
        (lb, ub) = (0, 0);
    }
    if tlb == isize::MAX {
        (tlb, tub) = (0, 0);
    }
    if is_struct {
        // Pad the extent to the largest alignment, as C pads a struct.
        let ext = ub - lb;
        let a = align as isize;
        if ext % a != 0 {
            ub += a - ext % a;
        }
    }
    Dtype {
        size,
        lb,
        ub,
        true_lb: tlb,
        true_ub: tub,
        segs,
        basic: basic.flatten(),
        align,
        predefined: false,
        committed: AtomicBool::new(false),
        name: Mutex::new(String::new()),
        combiner: 0,
        ints: Vec::new(),
        aints: Vec::new(),
        types: Vec::new(),
        type_objs: Vec::new(),
        large: Vec::new(),
    }
}

unsafe fn new_type(
    mut d: Dtype,
    combiner: c_int,
    ints: Vec<c_int>,
    aints: Vec<isize>,
    types: Vec<Handle>,
    out: *mut Handle,
) -> c_int {
    d.combiner = combiner;
    d.ints = ints;
    d.aints = aints;
    d.type_objs = types.iter().filter_map(|&h| lookup(h)).collect();
    d.types = types;
    // SAFETY: output argument.
    unsafe { *out = TYPES.insert(Arc::new(d)) };
    MPI_SUCCESS
}

/// Reads `n` values of a C array (empty for a null pointer).
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: c_int) -> &'a [T] {
    if p.is_null() || n <= 0 {
        &[]
    } else {
        // SAFETY: an array of n values (MPI contract).
        unsafe { std::slice::from_raw_parts(p, n as usize) }
    }
}

pub(crate) unsafe fn MPI_Type_contiguous(count: c_int, oldtype: Handle, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    if count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let d = build(&[(count as usize, 0, t)], false);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_CONTIGUOUS, vec![count], vec![], vec![oldtype], newtype) }
}

/// MPI_Type_contiguous_c with a count beyond `int` (its count is kept as the large count
/// of the envelope is not modelled: the integer list holds nothing).
pub(crate) unsafe fn contiguous_large(count: MPI_Count, oldtype: Handle, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    if count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let mut d = build(&[(count as usize, 0, t)], false);
    d.large = vec![count];
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_CONTIGUOUS, vec![], vec![], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_vector(
    count: c_int,
    blocklength: c_int,
    stride: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    if count < 0 || blocklength < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let ext = t.extent();
    let blocks: Vec<_> =
        (0..count as isize).map(|i| (blocklength as usize, i * stride as isize * ext, t.clone())).collect();
    let d = build(&blocks, false);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_VECTOR, vec![count, blocklength, stride], vec![], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_create_hvector(
    count: c_int,
    blocklength: c_int,
    stride: isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    if count < 0 || blocklength < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let blocks: Vec<_> = (0..count as isize).map(|i| (blocklength as usize, i * stride, t.clone())).collect();
    let d = build(&blocks, false);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_HVECTOR, vec![count, blocklength], vec![stride], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_indexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of count entries (MPI contract).
    let (bl, dp) = unsafe { (slice(array_of_blocklengths, count), slice(array_of_displacements, count)) };
    if bl.iter().any(|&b| b < 0) || count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let ext = t.extent();
    let blocks: Vec<_> = bl.iter().zip(dp).map(|(&b, &d)| (b as usize, d as isize * ext, t.clone())).collect();
    let d = build(&blocks, false);
    let mut ints = vec![count];
    ints.extend_from_slice(bl);
    ints.extend_from_slice(dp);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_INDEXED, ints, vec![], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_create_hindexed(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of count entries.
    let (bl, dp) = unsafe { (slice(array_of_blocklengths, count), slice(array_of_displacements, count)) };
    if bl.iter().any(|&b| b < 0) || count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let blocks: Vec<_> = bl.iter().zip(dp).map(|(&b, &d)| (b as usize, d, t.clone())).collect();
    let d = build(&blocks, false);
    let mut ints = vec![count];
    ints.extend_from_slice(bl);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_HINDEXED, ints, dp.to_vec(), vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_create_indexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: array of count entries.
    let dp = unsafe { slice(array_of_displacements, count) };
    if blocklength < 0 || count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let ext = t.extent();
    let blocks: Vec<_> = dp.iter().map(|&d| (blocklength as usize, d as isize * ext, t.clone())).collect();
    let d = build(&blocks, false);
    let mut ints = vec![count, blocklength];
    ints.extend_from_slice(dp);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_INDEXED_BLOCK, ints, vec![], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_create_hindexed_block(
    count: c_int,
    blocklength: c_int,
    array_of_displacements: *const isize,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: array of count entries.
    let dp = unsafe { slice(array_of_displacements, count) };
    if blocklength < 0 || count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let blocks: Vec<_> = dp.iter().map(|&d| (blocklength as usize, d, t.clone())).collect();
    let d = build(&blocks, false);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_HINDEXED_BLOCK, vec![count, blocklength], dp.to_vec(), vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_create_struct(
    count: c_int,
    array_of_blocklengths: *const c_int,
    array_of_displacements: *const isize,
    array_of_types: *const Handle,
    newtype: *mut Handle,
) -> c_int {
    // SAFETY: arrays of count entries.
    let (bl, dp, ty) = unsafe {
        (slice(array_of_blocklengths, count), slice(array_of_displacements, count), slice(array_of_types, count))
    };
    if bl.iter().any(|&b| b < 0) || count < 0 {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_COUNT);
    }
    let mut blocks = Vec::with_capacity(ty.len());
    for ((&b, &d), &t) in bl.iter().zip(dp).zip(ty) {
        blocks.push((b as usize, d, dtype!(t)));
    }
    let d = build(&blocks, true);
    let mut ints = vec![count];
    ints.extend_from_slice(bl);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_STRUCT, ints, dp.to_vec(), ty.to_vec(), newtype) }
}

pub(crate) unsafe fn MPI_Type_create_resized(oldtype: Handle, lb: isize, extent: isize, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    let mut d = build(&[(1, 0, t)], false);
    d.lb = lb;
    d.ub = lb + extent;
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_RESIZED, vec![], vec![lb, extent], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_dup(oldtype: Handle, newtype: *mut Handle) -> c_int {
    let t = dtype!(oldtype);
    let mut d = build(&[(1, 0, t.clone())], false);
    (d.lb, d.ub, d.true_lb, d.true_ub) = (t.lb, t.ub, t.true_lb, t.true_ub);
    d.committed.store(t.committed.load(Ordering::Relaxed), Ordering::Relaxed);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_DUP, vec![], vec![], vec![oldtype], newtype) }
}

pub(crate) unsafe fn MPI_Type_commit(datatype: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let t = dtype!(unsafe { *datatype });
    t.committed.store(true, Ordering::Relaxed);
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_free(datatype: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *datatype };
    if lookup(h).is_some_and(|t| t.predefined) || TYPES.remove(h).is_none() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE);
    }
    // SAFETY: in/out argument.
    unsafe { *datatype = MPI_DATATYPE_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_size(datatype: Handle, size: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = if t.size > c_int::MAX as usize { MPI_UNDEFINED } else { t.size as c_int } };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_size_c(datatype: Handle, size: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = t.size as MPI_Count };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_size_x(datatype: Handle, size: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_size_c(datatype, size) }
}

pub(crate) unsafe fn MPI_Type_get_extent(datatype: Handle, lb: *mut isize, extent: *mut isize) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *lb = t.lb;
        *extent = t.extent();
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_extent_c(datatype: Handle, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *lb = t.lb as MPI_Count;
        *extent = t.extent() as MPI_Count;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_extent_x(datatype: Handle, lb: *mut MPI_Count, extent: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_get_extent_c(datatype, lb, extent) }
}

pub(crate) unsafe fn MPI_Type_get_true_extent(datatype: Handle, true_lb: *mut isize, true_extent: *mut isize) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *true_lb = t.true_lb;
        *true_extent = t.true_ub - t.true_lb;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_true_extent_c(
    datatype: Handle,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output arguments.
    unsafe {
        *true_lb = t.true_lb as MPI_Count;
        *true_extent = (t.true_ub - t.true_lb) as MPI_Count;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_true_extent_x(
    datatype: Handle,
    true_lb: *mut MPI_Count,
    true_extent: *mut MPI_Count,
) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Type_get_true_extent_c(datatype, true_lb, true_extent) }
}

pub(crate) unsafe fn MPI_Type_set_name(datatype: Handle, type_name: *const c_char) -> c_int {
    let t = dtype!(datatype);
    if type_name.is_null() {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: C string.
    *t.name.lock() = unsafe { std::ffi::CStr::from_ptr(type_name) }.to_string_lossy().into_owned();
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_name(datatype: Handle, type_name: *mut c_char, resultlen: *mut c_int) -> c_int {
    let n = if datatype == MPI_DATATYPE_NULL {
        "MPI_DATATYPE_NULL".to_string()
    } else {
        let t = dtype!(datatype);
        let n = t.name.lock().clone();
        n
    };
    // SAFETY: MPI_MAX_OBJECT_NAME bytes.
    unsafe { put_string(&n, type_name, MPI_MAX_OBJECT_NAME as usize, resultlen) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_envelope(
    datatype: Handle,
    num_integers: *mut c_int,
    num_addresses: *mut c_int,
    num_datatypes: *mut c_int,
    combiner: *mut c_int,
) -> c_int {
    let t = dtype!(datatype);
    if !t.large.is_empty() {
        // Only MPI_Type_get_envelope_c can describe it.
        return raise_on(MPI_COMM_WORLD, MPI_ERR_VALUE_TOO_LARGE);
    }
    // SAFETY: output arguments.
    unsafe {
        *num_integers = t.ints.len() as c_int;
        *num_addresses = t.aints.len() as c_int;
        *num_datatypes = t.types.len() as c_int;
        *combiner = t.combiner;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_contents(
    datatype: Handle,
    max_integers: c_int,
    max_addresses: c_int,
    max_datatypes: c_int,
    array_of_integers: *mut c_int,
    array_of_addresses: *mut isize,
    array_of_datatypes: *mut Handle,
) -> c_int {
    let t = dtype!(datatype);
    if t.combiner == MPI_COMBINER_NAMED {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE);
    }
    if (max_integers as usize) < t.ints.len()
        || (max_addresses as usize) < t.aints.len()
        || (max_datatypes as usize) < t.types.len()
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // SAFETY: arrays of the given sizes (MPI contract), checked above.
    unsafe {
        std::ptr::copy_nonoverlapping(t.ints.as_ptr(), array_of_integers, t.ints.len());
        std::ptr::copy_nonoverlapping(t.aints.as_ptr(), array_of_addresses, t.aints.len());
        for (i, &h) in t.types.iter().enumerate() {
            // Derived types come back as new handles to the same type (MPI 5, 5.1.13).
            let out = if (0x200..0x300).contains(&h) {
                h
            } else {
                match t.type_objs.get(i) {
                    Some(d) => TYPES.insert(d.clone()),
                    None => h,
                }
            };
            *array_of_datatypes.add(i) = out;
        }
    }
    MPI_SUCCESS
}

// ---------------------------------------------------------------------------------------
// Pack and unpack

/// Copies `count` elements of `t` at `buf` into `out` (appended), packed.
///
/// # Safety
/// `buf` holds `count` elements of `t` (the program's buffer).
pub(crate) unsafe fn pack_into(buf: *const u8, count: usize, t: &Dtype, out: &mut Vec<u8>) {
    out.reserve(count * t.size);
    let ext = t.extent();
    for i in 0..count as isize {
        for s in &t.segs {
            // SAFETY: inside the program's buffer (function contract).
            let src = unsafe { std::slice::from_raw_parts(buf.offset(i * ext + s.off), s.len) };
            out.extend_from_slice(src);
        }
    }
}

/// Copies packed bytes `src` into `count` elements of `t` at `buf`, stopping when `src`
/// runs out.
///
/// # Safety
/// `buf` holds `count` elements of `t`.
pub(crate) unsafe fn unpack_from(src: &[u8], buf: *mut u8, count: usize, t: &Dtype) {
    let ext = t.extent();
    let mut pos = 0;
    for i in 0..count as isize {
        for s in &t.segs {
            if pos >= src.len() {
                return;
            }
            let n = s.len.min(src.len() - pos);
            // SAFETY: inside the program's buffer (function contract); `n` bytes of src.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(pos), buf.offset(i * ext + s.off), n) };
            pos += n;
        }
    }
}

/// The number of leaf elements in `bytes` packed bytes of `t`.
pub(crate) fn elements(t: &Dtype, bytes: i64) -> i64 {
    if t.size == 0 {
        return 0;
    }
    let per: i64 = t.segs.iter().map(|s| (s.len / s.esize.max(1)) as i64).sum();
    let whole = bytes / t.size as i64;
    let mut rest = bytes % t.size as i64;
    let mut n = whole * per;
    for s in &t.segs {
        if rest <= 0 {
            break;
        }
        let take = rest.min(s.len as i64);
        n += take / s.esize.max(1) as i64;
        rest -= take;
    }
    n
}

pub(crate) unsafe fn MPI_Pack(
    inbuf: *const std::ffi::c_void,
    incount: c_int,
    datatype: Handle,
    outbuf: *mut std::ffi::c_void,
    outsize: c_int,
    position: *mut c_int,
    comm: Handle,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: in/out argument.
    let pos = unsafe { *position } as usize;
    let need = incount.max(0) as usize * t.size;
    if pos + need > outsize.max(0) as usize {
        return raise_on(comm, MPI_ERR_TRUNCATE);
    }
    let mut tmp = Vec::new();
    // SAFETY: the program's buffers (MPI contract); room checked above.
    unsafe {
        pack_into(inbuf.cast(), incount.max(0) as usize, &t, &mut tmp);
        std::ptr::copy_nonoverlapping(tmp.as_ptr(), outbuf.cast::<u8>().add(pos), tmp.len());
        *position = (pos + tmp.len()) as c_int;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Unpack(
    inbuf: *const std::ffi::c_void,
    insize: c_int,
    position: *mut c_int,
    outbuf: *mut std::ffi::c_void,
    outcount: c_int,
    datatype: Handle,
    comm: Handle,
) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: in/out argument.
    let pos = unsafe { *position } as usize;
    let need = outcount.max(0) as usize * t.size;
    if pos + need > insize.max(0) as usize {
        return raise_on(comm, MPI_ERR_TRUNCATE);
    }
    // SAFETY: the program's buffers (MPI contract); size checked above.
    unsafe {
        let src = std::slice::from_raw_parts(inbuf.cast::<u8>().add(pos), need);
        unpack_from(src, outbuf.cast(), outcount.max(0) as usize, &t);
        *position = (pos + need) as c_int;
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Pack_size(incount: c_int, datatype: Handle, comm: Handle, size: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: output argument.
    unsafe { *size = (incount.max(0) as usize * t.size) as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_count(status: *const MPI_Status, datatype: Handle, count: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    let c = if t.size == 0 {
        0
    } else if bytes % t.size as i64 != 0 {
        MPI_UNDEFINED
    } else {
        (bytes / t.size as i64) as c_int
    };
    // SAFETY: output argument.
    unsafe { *count = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_count_c(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    let c = if t.size == 0 {
        0
    } else if bytes % t.size as i64 != 0 {
        MPI_UNDEFINED as MPI_Count
    } else {
        bytes / t.size as i64
    };
    // SAFETY: output argument.
    unsafe { *count = c };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements(status: *const MPI_Status, datatype: Handle, count: *mut c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    // SAFETY: output argument.
    unsafe { *count = elements(&t, bytes) as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements_c(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    let bytes = unsafe { (*status).bytes() };
    // SAFETY: output argument.
    unsafe { *count = elements(&t, bytes) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Get_elements_x(status: *const MPI_Status, datatype: Handle, count: *mut MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Get_elements_c(status, datatype, count) }
}

pub(crate) unsafe fn MPI_Status_set_elements(status: *mut MPI_Status, datatype: Handle, count: c_int) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    unsafe { (*status).set_bytes(count as i64 * t.size as i64) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_elements_c(status: *mut MPI_Status, datatype: Handle, count: MPI_Count) -> c_int {
    let t = dtype!(datatype);
    // SAFETY: the program's status.
    unsafe { (*status).set_bytes(count * t.size as i64) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_cancelled(status: *mut MPI_Status, flag: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).set_cancelled(flag != 0) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Test_cancelled(status: *const MPI_Status, flag: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *flag = (*status).cancelled() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_elements_x(status: *mut MPI_Status, datatype: Handle, count: MPI_Count) -> c_int {
    // SAFETY: forwarded arguments.
    unsafe { MPI_Status_set_elements_c(status, datatype, count) }
}

pub(crate) unsafe fn MPI_Status_set_source(status: *mut MPI_Status, source: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_SOURCE = source };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_tag(status: *mut MPI_Status, tag: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_TAG = tag };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_set_error(status: *mut MPI_Status, error: c_int) -> c_int {
    // SAFETY: the program's status.
    unsafe { (*status).MPI_ERROR = error };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_source(status: *const MPI_Status, source: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *source = (*status).MPI_SOURCE };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_tag(status: *const MPI_Status, tag: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *tag = (*status).MPI_TAG };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Status_get_error(status: *const MPI_Status, error: *mut c_int) -> c_int {
    // SAFETY: the program's status; output argument.
    unsafe { *error = (*status).MPI_ERROR };
    MPI_SUCCESS
}

/// The predefined pair type of `(value, index)` (MPI 4.1 `MPI_Type_get_value_index`).
pub(crate) unsafe fn MPI_Type_get_value_index(value_type: Handle, index_type: Handle, pair_type: *mut Handle) -> c_int {
    let t = match (value_type, index_type) {
        (MPI_FLOAT, MPI_INT) => MPI_FLOAT_INT,
        (MPI_DOUBLE, MPI_INT) => MPI_DOUBLE_INT,
        (MPI_LONG, MPI_INT) => MPI_LONG_INT,
        (MPI_INT, MPI_INT) => MPI_2INT,
        (MPI_SHORT, MPI_INT) => MPI_SHORT_INT,
        (MPI_LONG_DOUBLE, MPI_INT) => MPI_LONG_DOUBLE_INT,
        (MPI_REAL, MPI_REAL) => MPI_2REAL,
        (MPI_DOUBLE_PRECISION, MPI_DOUBLE_PRECISION) => MPI_2DOUBLE_PRECISION,
        (MPI_INTEGER, MPI_INTEGER) => MPI_2INTEGER,
        _ if lookup(value_type).is_none() || lookup(index_type).is_none() => {
            return raise_on(MPI_COMM_WORLD, MPI_ERR_TYPE)
        }
        // A valid combination with no predefined pair type.
        _ => MPI_DATATYPE_NULL,
    };
    // SAFETY: output argument.
    unsafe { *pair_type = t };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_create_subarray(
    ndims: c_int,
    array_of_sizes: *const c_int,
    array_of_subsizes: *const c_int,
    array_of_starts: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of ndims entries (MPI contract).
    let (sz, sub, st) =
        unsafe { (slice(array_of_sizes, ndims), slice(array_of_subsizes, ndims), slice(array_of_starts, ndims)) };
    let n = sz.len();
    if ndims <= 0
        || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
        || (0..n).any(|i| sz[i] <= 0 || sub[i] <= 0 || st[i] < 0 || sub[i] + st[i] > sz[i])
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // Dimensions from the slowest to the fastest varying.
    let dims: Vec<usize> = if order == MPI_ORDER_C { (0..n).collect() } else { (0..n).rev().collect() };
    let ext = t.extent();
    // Stride (in elements) of each dimension in the full array.
    let mut stride = vec![1isize; n];
    for k in (0..n - 1).rev() {
        stride[k] = stride[k + 1] * sz[dims[k + 1]] as isize;
    }
    let last = n - 1;
    let run = sub[dims[last]] as usize;
    let mut blocks = Vec::new();
    let mut idx = vec![0isize; last];
    loop {
        let mut off = st[dims[last]] as isize * stride[last];
        for k in 0..last {
            off += (st[dims[k]] as isize + idx[k]) * stride[k];
        }
        blocks.push((run, off * ext, t.clone()));
        // Next index tuple over the slower dimensions.
        let mut k = last;
        loop {
            if k == 0 {
                let total: isize = sz.iter().map(|&x| x as isize).product();
                let mut d = build(&blocks, false);
                d.lb = 0;
                d.ub = total * ext;
                let mut ints = vec![ndims];
                ints.extend_from_slice(sz);
                ints.extend_from_slice(sub);
                ints.extend_from_slice(st);
                ints.push(order);
                // SAFETY: output argument.
                return unsafe { new_type(d, MPI_COMBINER_SUBARRAY, ints, vec![], vec![oldtype], newtype) };
            }
            k -= 1;
            idx[k] += 1;
            if idx[k] < sub[dims[k]] as isize {
                break;
            }
            idx[k] = 0;
        }
    }
}

/// The predefined type of a Fortran `SELECTED_*_KIND(p, r)` (MPI_UNDEFINED: any).
fn f90_kind(p: c_int, r: c_int, choices: &[(c_int, c_int, Handle)]) -> Option<Handle> {
    choices.iter().find(|&&(pp, rr, _)| (p == MPI_UNDEFINED || p <= pp) && (r == MPI_UNDEFINED || r <= rr)).map(|c| c.2)
}

/// The type `MPI_Type_create_f90_*` returns for `(combiner, p, r)`: the predefined type
/// `base` under the F90 combiner, one handle per argument set.
unsafe fn f90(combiner: c_int, p: c_int, r: c_int, base: Option<Handle>, newtype: *mut Handle) -> c_int {
    static MADE: parking_lot::Mutex<Vec<(c_int, c_int, c_int, Handle)>> = parking_lot::Mutex::new(Vec::new());
    let Some(base) = base.and_then(lookup) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG) };
    let mut g = MADE.lock();
    let h = match g.iter().find(|e| (e.0, e.1, e.2) == (combiner, p, r)) {
        Some(e) => e.3,
        None => {
            let mut d = build(&[(1, 0, base.clone())], false);
            d.basic = base.basic;
            d.predefined = true;
            d.committed.store(true, Ordering::Relaxed);
            d.combiner = combiner;
            d.ints = if combiner == MPI_COMBINER_F90_INTEGER { vec![r] } else { vec![p, r] };
            let h = TYPES.insert(Arc::new(d));
            g.push((combiner, p, r, h));
            h
        }
    };
    // SAFETY: output argument.
    unsafe { *newtype = h };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(p, r, &[(6, 37, MPI_REAL4), (15, 307, MPI_REAL8)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_REAL, p, r, b, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(p, r, &[(6, 37, MPI_COMPLEX8), (15, 307, MPI_COMPLEX16)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_COMPLEX, p, r, b, newtype) }
}

pub(crate) unsafe fn MPI_Type_create_f90_integer(r: c_int, newtype: *mut Handle) -> c_int {
    let b = f90_kind(0, r, &[(0, 2, MPI_INTEGER1), (0, 4, MPI_INTEGER2), (0, 9, MPI_INTEGER4), (0, 18, MPI_INTEGER8)]);
    // SAFETY: output argument.
    unsafe { f90(MPI_COMBINER_F90_INTEGER, MPI_UNDEFINED, r, b, newtype) }
}

/// Datatype attributes, by (type handle, keyval).
static TYPE_ATTRS: parking_lot::Mutex<Vec<(Handle, c_int, usize)>> = parking_lot::Mutex::new(Vec::new());

pub(crate) unsafe fn MPI_Type_set_attr(
    datatype: Handle,
    type_keyval: c_int,
    attribute_val: *mut std::ffi::c_void,
) -> c_int {
    let _t = dtype!(datatype);
    if !crate::comm::keyval_exists(type_keyval) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
    let mut g = TYPE_ATTRS.lock();
    g.retain(|&(h, k, _)| !(h == datatype && k == type_keyval));
    g.push((datatype, type_keyval, attribute_val as usize));
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_get_attr(
    datatype: Handle,
    type_keyval: c_int,
    attribute_val: *mut std::ffi::c_void,
    flag: *mut c_int,
) -> c_int {
    let _t = dtype!(datatype);
    if !crate::comm::keyval_exists(type_keyval) {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
    let v = TYPE_ATTRS.lock().iter().find(|&&(h, k, _)| h == datatype && k == type_keyval).map(|e| e.2);
    // SAFETY: output arguments.
    unsafe {
        match v {
            Some(v) => {
                *attribute_val.cast::<usize>() = v;
                *flag = 1;
            }
            None => *flag = 0,
        }
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Type_delete_attr(datatype: Handle, type_keyval: c_int) -> c_int {
    let _t = dtype!(datatype);
    let mut g = TYPE_ATTRS.lock();
    let n = g.len();
    g.retain(|&(h, k, _)| !(h == datatype && k == type_keyval));
    if g.len() == n {
        drop(g);
        return raise_on(MPI_COMM_WORLD, MPI_ERR_KEYVAL);
    }
    MPI_SUCCESS
}

/// The global indices of one dimension owned by grid coordinate `c` of `p` processes.
fn darray_indices(g: usize, distrib: c_int, darg: c_int, p: usize, c: usize) -> Result<Vec<usize>, c_int> {
    match distrib {
        MPI_DISTRIBUTE_NONE => {
            if p != 1 {
                return Err(MPI_ERR_ARG);
            }
            Ok((0..g).collect())
        }
        MPI_DISTRIBUTE_BLOCK => {
            let b = if darg == MPI_DISTRIBUTE_DFLT_DARG { g.div_ceil(p.max(1)) } else { darg.max(0) as usize };
            if b * p < g || b == 0 && g > 0 {
                return Err(MPI_ERR_ARG);
            }
            Ok((c * b..((c + 1) * b).min(g)).collect())
        }
        MPI_DISTRIBUTE_CYCLIC => {
            let k = if darg == MPI_DISTRIBUTE_DFLT_DARG { 1 } else { darg.max(1) as usize };
            Ok((0..g).filter(|i| (i / k) % p == c).collect())
        }
        _ => Err(MPI_ERR_ARG),
    }
}

pub(crate) unsafe fn MPI_Type_create_darray(
    size: c_int,
    rank: c_int,
    ndims: c_int,
    array_of_gsizes: *const c_int,
    array_of_distribs: *const c_int,
    array_of_dargs: *const c_int,
    array_of_psizes: *const c_int,
    order: c_int,
    oldtype: Handle,
    newtype: *mut Handle,
) -> c_int {
    let t = dtype!(oldtype);
    // SAFETY: arrays of ndims entries (MPI contract).
    let (gs, ds, da, ps) = unsafe {
        (
            slice(array_of_gsizes, ndims),
            slice(array_of_distribs, ndims),
            slice(array_of_dargs, ndims),
            slice(array_of_psizes, ndims),
        )
    };
    let n = gs.len();
    if ndims <= 0
        || rank < 0
        || rank >= size
        || (order != MPI_ORDER_C && order != MPI_ORDER_FORTRAN)
        || ps.iter().map(|&p| p as i64).product::<i64>() != size as i64
        || gs.iter().any(|&g| g <= 0)
        || ps.iter().any(|&p| p <= 0)
    {
        return raise_on(MPI_COMM_WORLD, MPI_ERR_ARG);
    }
    // The process grid is row-major whatever the array order.
    let mut coords = vec![0usize; n];
    let mut r = rank as usize;
    for k in (0..n).rev() {
        coords[k] = r % ps[k] as usize;
        r /= ps[k] as usize;
    }
    let mut idx = Vec::with_capacity(n);
    for k in 0..n {
        match darray_indices(gs[k] as usize, ds[k], da[k], ps[k] as usize, coords[k]) {
            Ok(v) => idx.push(v),
            Err(e) => return raise_on(MPI_COMM_WORLD, e),
        }
    }
    // Dimensions from the slowest varying to the fastest, and their strides.
    let dims: Vec<usize> = if order == MPI_ORDER_C { (0..n).collect() } else { (0..n).rev().collect() };
    let mut stride = vec![1isize; n];
    for k in (0..n - 1).rev() {
        stride[k] = stride[k + 1] * gs[dims[k + 1]] as isize;
    }
    let ext = t.extent();
    let mut blocks = Vec::new();
    let mut pos = vec![0usize; n];
    if idx.iter().all(|v| !v.is_empty()) {
        'outer: loop {
            let off: isize = (0..n).map(|k| idx[dims[k]][pos[k]] as isize * stride[k]).sum();
            blocks.push((1usize, off * ext, t.clone()));
            let mut k = n;
            loop {
                if k == 0 {
                    break 'outer;
                }
                k -= 1;
                pos[k] += 1;
                if pos[k] < idx[dims[k]].len() {
                    break;
                }
                pos[k] = 0;
            }
        }
    }
    let mut d = build(&blocks, false);
    let total: isize = gs.iter().map(|&g| g as isize).product();
    d.lb = 0;
    d.ub = total * ext;
    let mut ints = vec![size, rank, ndims];
    for a in [gs, ds, da, ps] {
        ints.extend_from_slice(a);
    }
    ints.push(order);
    // SAFETY: output argument.
    unsafe { new_type(d, MPI_COMBINER_DARRAY, ints, vec![], vec![oldtype], newtype) }
}
