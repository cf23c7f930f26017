//! Files (MPI-4.1 chapter 14) through the facade's `runthrough::File`: open, close,
//! delete, views, sizes, hints, error handlers, the run-through calls of seeds/000
//! §17.12 (`MPIX_File_validate`, `MPIX_Ifile_validate`, `MPIX_File_collectives_enabled`,
//! `MPIX_File_get_failed`). The data-access calls are `file/access.rs`'s.
//!
//! A file's errors go to its error handler (`MPI_ERRORS_RETURN` by default, MPI-4.1
//! §14.7); errors of `MPI_File_open` and `MPI_File_delete` to `MPI_FILE_NULL`'s.

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use runthrough::file::{FileError, Hints, IoClass, IoError, Whence};

use crate::commobj::CommObj;
use crate::consts::*;
use crate::dtype::{lookup as dtype_lookup, Dtype};
use crate::group::new_group;
use crate::handles::{Kind, Table};
use crate::raise::{raise_on, raise_with};
use crate::req::Active;
use crate::types::{FnPtr, Handle, MPI_Aint, MPI_Offset, MPI_Status, SendPtr};

mod access;
pub(crate) use access::*;

/// An open file.
pub(crate) struct FileObj {
    /// The facade's file; `close` takes it exclusively.
    pub(crate) file: RwLock<runthrough::File>,
    /// The communicator it was opened on (MPI_ERRORS_ABORT's scope).
    parent: Arc<CommObj>,
    pub(crate) errhandler: Mutex<Handle>,
    /// The etype and filetype of the view (kept alive), and their handles as given.
    view_types: Mutex<ViewTypes>,
    /// The hints given (open and set_info), reported back by get_info.
    info: Mutex<Vec<(String, String)>>,
    /// A split collective begun and not ended: its outcome.
    pub(crate) split: Mutex<Option<(c_int, MPI_Status)>>,
}

impl std::fmt::Debug for FileObj {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileObj").field("path", &self.file.read().path()).finish()
    }
}

#[derive(Debug, Default)]
struct ViewTypes {
    etype: Option<(Handle, Arc<Dtype>)>,
    filetype: Option<(Handle, Arc<Dtype>)>,
}

pub(crate) static FILES: Table<FileObj> = Table::new(Kind::File);

/// The default error handler of files (MPI_FILE_NULL's), MPI_ERRORS_RETURN at start.
static FILE_DEFAULT_EH: Mutex<Handle> = Mutex::new(MPI_ERRORS_RETURN);

/// The MPI error code of a file call's error.
pub(crate) fn code_of(e: &FileError) -> c_int {
    match e {
        FileError::Comm(e) => crate::err::code_of(e),
        FileError::Io(e) => match e.class {
            IoClass::Amode => MPI_ERR_AMODE,
            IoClass::NoSuchFile => MPI_ERR_NO_SUCH_FILE,
            IoClass::FileExists => MPI_ERR_FILE_EXISTS,
            IoClass::Access => MPI_ERR_ACCESS,
            IoClass::ReadOnly => MPI_ERR_READ_ONLY,
            IoClass::NoSpace => MPI_ERR_NO_SPACE,
            IoClass::Quota => MPI_ERR_QUOTA,
            IoClass::FileInUse => MPI_ERR_FILE_IN_USE,
            IoClass::BadFile => MPI_ERR_BAD_FILE,
            IoClass::Io => MPI_ERR_IO,
            IoClass::Arg => MPI_ERR_ARG,
            IoClass::UnsupportedDatarep => MPI_ERR_UNSUPPORTED_DATAREP,
            IoClass::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        },
    }
}

/// Raises `code` on file `fh` (its handler; MPI_FILE_NULL's for a bad handle).
pub(crate) fn raise_file(fh: Handle, code: c_int) -> c_int {
    match FILES.get(fh) {
        Some(f) => {
            let eh = *f.errhandler.lock();
            raise_with(eh, fh, code, Some(f.parent.clone()))
        }
        None => raise_with(*FILE_DEFAULT_EH.lock(), MPI_FILE_NULL, code, None),
    }
}

/// Raises file error `e` on `fh`.
pub(crate) fn raise_file_error(fh: Handle, e: &FileError) -> c_int {
    crate::err::set_detail(e.to_string());
    raise_file(fh, code_of(e))
}

/// `let f = file!(fh);`: the file object, or MPI_ERR_FILE on MPI_FILE_NULL's handler.
macro_rules! file {
    ($h:expr) => {
        match FILES.get($h) {
            Some(f) => f,
            None => return raise_file(MPI_FILE_NULL, MPI_ERR_FILE),
        }
    };
}
pub(crate) use file;

/// `Ok` or the error raised on the file.
fn done(fh: Handle, r: Result<(), FileError>) -> c_int {
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_file_error(fh, &e),
    }
}

/// The hints of info object `info` over `base`.
fn hints_of(info: Handle, mut base: Hints) -> Hints {
    let num = |k: &str| crate::info::value(info, k).and_then(|v| v.trim().parse::<usize>().ok());
    if let Some(n) = num("cb_nodes").filter(|&n| n > 0) {
        base.cb_nodes = Some(n);
    }
    if let Some(n) = num("cb_buffer_size").filter(|&n| n > 0) {
        base.cb_buffer_size = n;
    }
    if let Some(v) = crate::info::value(info, "romio_cb_write").or_else(|| crate::info::value(info, "romio_cb_read")) {
        base.cb = match v.trim() {
            "enable" => Some(true),
            "disable" => Some(false),
            _ => None,
        };
    }
    base
}

/// A C string argument, or MPI_ERR_ARG.
///
/// # Safety
/// `s` is null or a C string.
unsafe fn c_str(s: *const c_char) -> Option<String> {
    // SAFETY: non-null C string (function contract).
    (!s.is_null()).then(|| unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
}

pub(crate) unsafe fn MPI_File_open(
    comm: Handle,
    filename: *const c_char,
    amode: c_int,
    info: Handle,
    fh: *mut Handle,
) -> c_int {
    let c = crate::comm::comm!(comm);
    if c.inter.is_some() {
        return raise_on(comm, MPI_ERR_COMM);
    }
    // SAFETY: the program's C string.
    let Some(path) = (unsafe { c_str(filename) }) else { return raise_file(MPI_FILE_NULL, MPI_ERR_BAD_FILE) };
    // A "prefix:" of ROMIO's file-system names ("ufs:", "nfs:") names the same file.
    let path = match path.split_once(':') {
        Some((p, rest)) if p.len() > 1 && p.chars().all(|ch| ch.is_ascii_alphanumeric()) => rest.to_string(),
        _ => path,
    };
    let hints = hints_of(info, Hints::default());
    match runthrough::File::open(&c.comm, &path, amode as u32, hints) {
        Ok(f) => {
            let obj = FileObj {
                file: RwLock::new(f),
                parent: c.clone(),
                errhandler: Mutex::new(*FILE_DEFAULT_EH.lock()),
                view_types: Mutex::default(),
                info: Mutex::new(crate::info::entries(info)),
                split: Mutex::new(None),
            };
            // SAFETY: output argument.
            unsafe { *fh = FILES.insert(Arc::new(obj)) };
            MPI_SUCCESS
        }
        Err(e) => {
            crate::err::set_detail(e.to_string());
            raise_with(*FILE_DEFAULT_EH.lock(), MPI_FILE_NULL, code_of(&e), Some(c))
        }
    }
}

pub(crate) unsafe fn MPI_File_close(fh: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let h = unsafe { *fh };
    let f = file!(h);
    let r = f.file.write().close();
    if let Err(e) = r {
        return raise_file_error(h, &e);
    }
    FILES.remove(h);
    // SAFETY: in/out argument.
    unsafe { *fh = MPI_FILE_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_delete(filename: *const c_char, _info: Handle) -> c_int {
    // SAFETY: the program's C string.
    let Some(path) = (unsafe { c_str(filename) }) else { return raise_file(MPI_FILE_NULL, MPI_ERR_BAD_FILE) };
    match runthrough::File::delete(&path) {
        Ok(()) => MPI_SUCCESS,
        Err(e) => raise_file_error(MPI_FILE_NULL, &e),
    }
}

pub(crate) unsafe fn MPI_File_get_amode(fh: Handle, amode: *mut c_int) -> c_int {
    let f = file!(fh);
    // SAFETY: output argument.
    unsafe { *amode = f.file.read().amode() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_get_group(fh: Handle, group: *mut Handle) -> c_int {
    let f = file!(fh);
    let g = f.file.read().group();
    // SAFETY: output argument.
    unsafe { *group = new_group(g.world_ranks().into_iter().map(|r| r as u32).collect()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_get_size(fh: Handle, size: *mut MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().size();
    // SAFETY: output argument.
    done(fh, r.map(|n| unsafe { *size = n as MPI_Offset }))
}

pub(crate) unsafe fn MPI_File_set_size(fh: Handle, size: MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().set_size(size);
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_preallocate(fh: Handle, size: MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().preallocate(size);
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_sync(fh: Handle) -> c_int {
    let f = file!(fh);
    let r = f.file.read().sync();
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_set_atomicity(fh: Handle, flag: c_int) -> c_int {
    let f = file!(fh);
    let r = f.file.read().set_atomicity(flag != 0);
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_get_atomicity(fh: Handle, flag: *mut c_int) -> c_int {
    let f = file!(fh);
    // SAFETY: output argument.
    unsafe { *flag = f.file.read().atomicity() as c_int };
    MPI_SUCCESS
}

fn whence_of(w: c_int) -> Option<Whence> {
    match w {
        MPI_SEEK_SET => Some(Whence::Set),
        MPI_SEEK_CUR => Some(Whence::Cur),
        MPI_SEEK_END => Some(Whence::End),
        _ => None,
    }
}

pub(crate) unsafe fn MPI_File_seek(fh: Handle, offset: MPI_Offset, whence: c_int) -> c_int {
    let f = file!(fh);
    let Some(w) = whence_of(whence) else { return raise_file(fh, MPI_ERR_ARG) };
    let r = f.file.read().seek(offset, w);
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_seek_shared(fh: Handle, offset: MPI_Offset, whence: c_int) -> c_int {
    let f = file!(fh);
    let Some(w) = whence_of(whence) else { return raise_file(fh, MPI_ERR_ARG) };
    let r = f.file.read().seek_shared(offset, w);
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_get_position(fh: Handle, offset: *mut MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().position();
    // SAFETY: output argument.
    done(fh, r.map(|p| unsafe { *offset = p as MPI_Offset }))
}

pub(crate) unsafe fn MPI_File_get_position_shared(fh: Handle, offset: *mut MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().position_shared();
    // SAFETY: output argument.
    done(fh, r.map(|p| unsafe { *offset = p as MPI_Offset }))
}

pub(crate) unsafe fn MPI_File_get_byte_offset(fh: Handle, offset: MPI_Offset, disp: *mut MPI_Offset) -> c_int {
    let f = file!(fh);
    let r = f.file.read().byte_offset(offset);
    // SAFETY: output argument.
    done(fh, r.map(|b| unsafe { *disp = b as MPI_Offset }))
}

pub(crate) unsafe fn MPI_File_get_type_extent(fh: Handle, datatype: Handle, extent: *mut MPI_Aint) -> c_int {
    let _f = file!(fh);
    let Some(t) = dtype_lookup(datatype) else { return raise_file(fh, MPI_ERR_TYPE) };
    // SAFETY: output argument (native and external32 sizes are the same here: the file
    // extent is the memory extent).
    unsafe { *extent = t.extent() as MPI_Aint };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_set_view(
    fh: Handle,
    disp: MPI_Offset,
    etype: Handle,
    filetype: Handle,
    datarep: *const c_char,
    info: Handle,
) -> c_int {
    let f = file!(fh);
    let (Some(et), Some(ft)) = (dtype_lookup(etype), dtype_lookup(filetype)) else {
        return raise_file(fh, MPI_ERR_TYPE);
    };
    // SAFETY: the program's C string.
    let rep = unsafe { c_str(datarep) }.unwrap_or_default();
    let (et, ft) = (et.into_arc(), ft.into_arc());
    // MPI_DISPLACEMENT_CURRENT (-1 in the standard ABI), for sequential files: the
    // shared pointer's byte, which set_view resets to the view's start anyway.
    let disp = if disp == -1 { 0 } else { disp };
    let mut runs = Vec::new();
    ft.segs.walk(0, &mut |off, len| {
        runs.push((off as i64, len as u64));
        true
    });
    let r = if disp < 0 {
        Err(FileError::Io(IoError::new(IoClass::Arg, "negative displacement")))
    } else {
        // The tiles start at the filetype's lower bound.
        let runs: Vec<(i64, u64)> = runs.iter().map(|&(o, l)| (o - ft.lb as i64, l)).collect();
        f.file.read().set_view(disp as u64, et.size as u64, &runs, ft.extent() as i64, &datarep_for(&rep))
    };
    if r.is_ok() {
        let mut v = f.view_types.lock();
        v.etype = Some((etype, et));
        v.filetype = Some((filetype, ft));
        let mut i = f.info.lock();
        merge_info(&mut i, info);
    }
    done(fh, r)
}

/// Adds `info`'s keys to `kv` (replacing the same keys).
fn merge_info(kv: &mut Vec<(String, String)>, info: Handle) {
    for (k, v) in crate::info::entries(info) {
        match kv.iter_mut().find(|e| e.0 == k) {
            Some(e) => e.1 = v,
            None => kv.push((k, v)),
        }
    }
}

/// A handle for view type `t` given as `h`: the same one for a predefined type, else a
/// new handle to the same type (the program frees it, MPI-4.1 §14.3).
fn view_type_handle(t: &Option<(Handle, Arc<Dtype>)>) -> Handle {
    match t {
        None => MPI_BYTE,
        Some((h, t)) if t.predefined => *h,
        Some((_, t)) => crate::dtype::TYPES.insert(t.clone()),
    }
}

pub(crate) unsafe fn MPI_File_get_view(
    fh: Handle,
    disp: *mut MPI_Offset,
    etype: *mut Handle,
    filetype: *mut Handle,
    datarep: *mut c_char,
) -> c_int {
    let f = file!(fh);
    let (d, rep) = {
        let file = f.file.read();
        (file.view().disp(), file.datarep())
    };
    let v = f.view_types.lock();
    // SAFETY: output arguments; datarep holds MPI_MAX_DATAREP_STRING characters.
    unsafe {
        *disp = d as MPI_Offset;
        *etype = view_type_handle(&v.etype);
        *filetype = view_type_handle(&v.filetype);
        crate::err::put_string(rep, datarep, MPI_MAX_DATAREP_STRING as usize, std::ptr::null_mut());
    }
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_set_info(fh: Handle, info: Handle) -> c_int {
    let f = file!(fh);
    let file = f.file.read();
    let r = file.set_hints(hints_of(info, file.hints()));
    if r.is_ok() {
        merge_info(&mut f.info.lock(), info);
    }
    done(fh, r)
}

pub(crate) unsafe fn MPI_File_get_info(fh: Handle, info_used: *mut Handle) -> c_int {
    let f = file!(fh);
    let h = f.file.read().hints();
    let mut kv = f.info.lock().clone();
    let mut set = |k: &str, v: String| match kv.iter_mut().find(|e| e.0 == k) {
        Some(e) => e.1 = v,
        None => kv.push((k.to_string(), v)),
    };
    set("cb_buffer_size", h.cb_buffer_size.to_string());
    let cb = match h.cb {
        Some(true) => "enable",
        Some(false) => "disable",
        None => "automatic",
    };
    set("romio_cb_write", cb.to_string());
    set("romio_cb_read", cb.to_string());
    if let Some(n) = h.cb_nodes {
        set("cb_nodes", n.to_string());
    }
    // SAFETY: output argument.
    unsafe { *info_used = crate::info::new_info(kv) };
    MPI_SUCCESS
}

/// The data representations registered by the program: name, and whether it converts
/// (a representation without conversion functions stores bytes as "native" does).
static DATAREPS: Mutex<Vec<(String, bool)>> = Mutex::new(Vec::new());

/// The representation the facade gets for `rep`: "native" for "native", "internal"
/// (this implementation's internal representation is its native one) and registered
/// representations without conversions; anything else as named (the facade refuses it
/// with MPI_ERR_UNSUPPORTED_DATAREP unless it is "external32").
fn datarep_for(rep: &str) -> String {
    let registered = DATAREPS.lock().iter().find(|d| d.0 == rep).map(|d| d.1);
    match (rep, registered) {
        ("native" | "internal", _) | (_, Some(false)) => "native".into(),
        _ => rep.into(),
    }
}

pub(crate) unsafe fn MPI_Register_datarep(
    datarep: *const c_char,
    read_conversion_fn: FnPtr,
    write_conversion_fn: FnPtr,
    _dtype_file_extent_fn: FnPtr,
    _extra_state: *mut std::ffi::c_void,
) -> c_int {
    // SAFETY: the program's C string.
    let Some(name) = (unsafe { c_str(datarep) }) else { return raise_file(MPI_FILE_NULL, MPI_ERR_ARG) };
    let mut reps = DATAREPS.lock();
    if ["native", "internal", "external32"].contains(&name.as_str()) || reps.iter().any(|d| d.0 == name) {
        drop(reps);
        crate::err::set_detail(format!("data representation {name:?} is already defined"));
        return raise_file(MPI_FILE_NULL, MPI_ERR_DUP_DATAREP);
    }
    // A representation with conversion functions is registered (so its name is taken),
    // and refused by MPI_File_set_view: runthrough does not call conversions.
    reps.push((name, !read_conversion_fn.is_null() || !write_conversion_fn.is_null()));
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_Register_datarep_c(
    datarep: *const c_char,
    read_conversion_fn: FnPtr,
    write_conversion_fn: FnPtr,
    dtype_file_extent_fn: FnPtr,
    extra_state: *mut std::ffi::c_void,
) -> c_int {
    // SAFETY: forwarded.
    unsafe { MPI_Register_datarep(datarep, read_conversion_fn, write_conversion_fn, dtype_file_extent_fn, extra_state) }
}

pub(crate) unsafe fn MPIX_File_validate(fh: Handle, failed: *mut Handle) -> c_int {
    let f = file!(fh);
    let r = f.file.read().validate();
    // SAFETY: output argument.
    done(fh, r.map(|g| unsafe { *failed = new_group(g.world_ranks().into_iter().map(|r| r as u32).collect()) }))
}

pub(crate) unsafe fn MPIX_Ifile_validate(fh: Handle, failed: *mut Handle, request: *mut Handle) -> c_int {
    let f = file!(fh);
    let out = SendPtr(failed.cast());
    let ticket = f.file.read().comm().ivalidate_ticket();
    let mut ticket = match ticket {
        Ok(t) => t,
        Err(e) => return raise_file_error(fh, &FileError::Comm(e)),
    };
    let poll = move || {
        let out = out;
        let decided = f.file.read().comm().poll_ticket(&mut ticket)?;
        let err = match decided {
            runthrough::Decided::Validate(g) => {
                // SAFETY: the program keeps `failed` valid until the request completes.
                unsafe { *out.0.cast::<Handle>() = new_group(g.world_ranks().into_iter().map(|r| r as u32).collect()) };
                MPI_SUCCESS
            }
            runthrough::Decided::Agree { .. } => MPI_ERR_INTERN,
        };
        Some((MPI_Status::empty(), err))
    };
    // SAFETY: output argument.
    unsafe { *request = crate::req::new_active(MPI_COMM_SELF, Active::Polled(Box::new(poll))) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_File_collectives_enabled(fh: Handle, active: *mut c_int) -> c_int {
    let f = file!(fh);
    // SAFETY: output argument.
    unsafe { *active = f.file.read().collectives_enabled() as c_int };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPIX_File_get_failed(fh: Handle, failed: *mut Handle) -> c_int {
    let f = file!(fh);
    let g = f.file.read().group_failed();
    // SAFETY: output argument.
    unsafe { *failed = new_group(g.world_ranks().into_iter().map(|r| r as u32).collect()) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_create_errhandler(file_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::raise::MPI_Comm_create_errhandler(file_errhandler_fn, errhandler) }
}

pub(crate) unsafe fn MPI_File_set_errhandler(file: Handle, errhandler: Handle) -> c_int {
    if !crate::err::valid_errhandler(errhandler) {
        return raise_file(file, MPI_ERR_ARG);
    }
    if file == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock() = errhandler;
        return MPI_SUCCESS;
    }
    let f = file!(file);
    *f.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_get_errhandler(file: Handle, errhandler: *mut Handle) -> c_int {
    let eh = if file == MPI_FILE_NULL { *FILE_DEFAULT_EH.lock() } else { *file!(file).errhandler.lock() };
    crate::err::errhandler_ref(eh);
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_call_errhandler(fh: Handle, errorcode: c_int) -> c_int {
    if fh != MPI_FILE_NULL && FILES.get(fh).is_none() {
        return raise_file(MPI_FILE_NULL, MPI_ERR_FILE);
    }
    let rc = raise_file(fh, errorcode);
    if crate::raise::fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}
