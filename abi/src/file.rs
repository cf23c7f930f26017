//! Files: opened and closed with their error handlers (no reads or writes yet).

use std::ffi::{c_char, c_int, CStr};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::consts::*;
use crate::handles::{Kind, Table};
use crate::raise::raise_on;
use crate::types::{FnPtr, Handle};

/// An open file.
#[derive(Debug)]
pub(crate) struct FileObj {
    path: std::path::PathBuf,
    fd: c_int,
    delete_on_close: bool,
    errhandler: Mutex<Handle>,
}

pub(crate) static FILES: Table<FileObj> = Table::new(Kind::File);

/// The default error handler of files (MPI_FILE_NULL's), MPI_ERRORS_RETURN at start.
static FILE_DEFAULT_EH: Mutex<Handle> = Mutex::new(MPI_ERRORS_RETURN);

pub(crate) unsafe fn MPI_File_open(
    comm: Handle,
    filename: *const c_char,
    amode: c_int,
    info: Handle,
    fh: *mut Handle,
) -> c_int {
    let _c = crate::comm::comm!(comm);
    // SAFETY: C string.
    let path = std::path::PathBuf::from(unsafe { CStr::from_ptr(filename) }.to_string_lossy().into_owned());
    let mut flags = if amode & MPI_MODE_RDWR != 0 {
        libc::O_RDWR
    } else if amode & MPI_MODE_WRONLY != 0 {
        libc::O_WRONLY
    } else {
        libc::O_RDONLY
    };
    if amode & MPI_MODE_CREATE != 0 {
        flags |= libc::O_CREAT;
    }
    if amode & MPI_MODE_EXCL != 0 {
        flags |= libc::O_EXCL;
    }
    let cpath = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
    // SAFETY: a C string path; plain open(2).
    let fd = unsafe { libc::open(cpath.as_ptr(), flags | libc::O_CLOEXEC, 0o644) };
    if fd < 0 {
        let eh = *FILE_DEFAULT_EH.lock();
        return crate::raise::invoke(eh, MPI_FILE_NULL, MPI_ERR_NO_SUCH_FILE);
    }
    let f = FileObj {
        path,
        fd,
        delete_on_close: amode & MPI_MODE_DELETE_ON_CLOSE != 0,
        errhandler: Mutex::new(*FILE_DEFAULT_EH.lock()),
    };
    // SAFETY: output argument.
    unsafe { *fh = FILES.insert(Arc::new(f)) };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_close(fh: *mut Handle) -> c_int {
    // SAFETY: in/out argument.
    let Some(f) = FILES.remove(unsafe { *fh }) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE) };
    // SAFETY: the descriptor this file owns.
    unsafe { libc::close(f.fd) };
    if f.delete_on_close {
        let _ = std::fs::remove_file(&f.path);
    }
    // SAFETY: in/out argument.
    unsafe { *fh = MPI_FILE_NULL };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_create_errhandler(file_errhandler_fn: FnPtr, errhandler: *mut Handle) -> c_int {
    // SAFETY: forwarded.
    unsafe { crate::raise::MPI_Comm_create_errhandler(file_errhandler_fn, errhandler) }
}

pub(crate) unsafe fn MPI_File_set_errhandler(file: Handle, errhandler: Handle) -> c_int {
    if file == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock() = errhandler;
        return MPI_SUCCESS;
    }
    let Some(f) = FILES.get(file) else { return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE) };
    *f.errhandler.lock() = errhandler;
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_get_errhandler(file: Handle, errhandler: *mut Handle) -> c_int {
    let eh = if file == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock()
    } else {
        match FILES.get(file) {
            Some(f) => *f.errhandler.lock(),
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE),
        }
    };
    // SAFETY: output argument.
    unsafe { *errhandler = eh };
    MPI_SUCCESS
}

pub(crate) unsafe fn MPI_File_call_errhandler(fh: Handle, errorcode: c_int) -> c_int {
    let eh = if fh == MPI_FILE_NULL {
        *FILE_DEFAULT_EH.lock()
    } else {
        match FILES.get(fh) {
            Some(f) => *f.errhandler.lock(),
            None => return raise_on(MPI_COMM_WORLD, MPI_ERR_FILE),
        }
    };
    let rc = crate::raise::invoke(eh, fh, errorcode);
    if crate::raise::fatal_pending() {
        return rc;
    }
    MPI_SUCCESS
}
