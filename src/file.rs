//! Parallel I/O (MPI-4.1 chapter 14) with the run-through rules of R41: a [`File`] is a
//! file opened by every member of a communicator, read and written through a view, with
//! explicit offsets, an individual file pointer per process and one shared file pointer.
//! The byte work is `runthrough_io`'s (POSIX files, views, sieved reads, the shared
//! pointer's side file, collective buffering's domains); this module adds the
//! communicator: uniform open and close, the collective calls, and failures.
//!
//! **Collective data access** (`*_all`, `*_ordered`): when the members' byte ranges
//! interleave in small pieces, collective buffering (ROMIO's two-phase I/O,
//! `file/coll.rs`): one aggregator per node receives the members' pieces of its file
//! domain and writes them as contiguous requests (or reads its domain once and sends each
//! member its bytes). Otherwise each member writes or reads its own bytes (sieved).
//!
//! **Failures** (seeds/000 §17.12, R41):
//! - open is collective over a collectively active communicator and uniform: it ends
//!   with an agreement, so every member gets the file or every member gets the same
//!   error class; a member that fails during the open makes it fail everywhere
//!   (`RankFailStop`), and what opened is closed again. Recognized failed members of
//!   the communicator stay recognized failures of the file's group;
//! - close errs with `RankFailStop`, and leaves the file open, until every failed member
//!   is recognized by [`File::validate`]; the outcome is uniform (an agreement decides);
//! - collective calls (`set_view`, `set_size`, `preallocate`, `set_atomicity`, `sync`,
//!   the `_all` and `_ordered` data access, `seek_shared`) err with `RankFailStop` when
//!   the file is not collectively active; one during which a member fails may err at some
//!   members and succeed at others (the seed allows it);
//! - independent reads and writes never communicate and never see failures;
//! - the shared file pointer lives in a locked side file, so a member's death never
//!   loses it.
//!
//! What a survivor finds after a collective write erred: every byte a live member wrote
//! directly is in the file; bytes that went through an aggregator are there if that
//! aggregator wrote its domain before failing, and otherwise the old bytes are (each
//! aggregator's runs are single writes, so a run is old or new, except where a dead
//! aggregator's write was cut by its death). The dead member's own data is in the file
//! entirely, partly or not at all. An application checks a checkpoint by writing its
//! data collectively, then, once that call succeeded everywhere (an agreement), a small
//! commit record naming it (`examples/checkpoint.rs` writes a header last).

use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use runthrough_io::{PosixFile, SharedPointer, View};

use crate::comm::Comm;
use crate::group::Group;
use crate::Error;

mod coll;

pub use runthrough_io::{Amode, Class as IoClass, Error as IoError};

/// An error of a file call: a communication one (a failed member, a revoked
/// communicator) or an I/O one with its MPI class.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FileError {
    /// From communication (`RankFailStop` when the file is not collectively active).
    #[error(transparent)]
    Comm(#[from] Error),
    /// From the file system or a bad argument, with its MPI I/O class.
    #[error(transparent)]
    Io(#[from] runthrough_io::Error),
}

impl FileError {
    fn io(class: IoClass, what: impl Into<String>) -> FileError {
        FileError::Io(runthrough_io::Error::new(class, what))
    }
}

/// The result of a file call.
pub type FileResult<T> = Result<T, FileError>;

/// Hints of `MPI_File_open`/`set_info` that runthrough uses (MPI-4.1 §14.2.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hints {
    /// `cb_nodes`: how many aggregators collective buffering uses (default: one per node).
    pub cb_nodes: Option<usize>,
    /// `romio_cb_write`/`romio_cb_read`: `Some(true)` always buffers, `Some(false)`
    /// never, `None` when the members' ranges interleave.
    pub cb: Option<bool>,
    /// `cb_buffer_size`: the largest piece of a domain an aggregator writes at once.
    pub cb_buffer_size: usize,
}

impl Default for Hints {
    fn default() -> Hints {
        Hints { cb_nodes: None, cb: None, cb_buffer_size: 16 << 20 }
    }
}

/// `MPI_SEEK_SET`, `MPI_SEEK_CUR`, `MPI_SEEK_END`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Whence {
    /// From the start of the view.
    Set,
    /// From the pointer.
    Cur,
    /// From the end of the file (in the view).
    End,
}

#[derive(Debug)]
struct State {
    view: View,
    /// The individual file pointer (etypes in the view).
    pos: u64,
    atomic: bool,
    closed: bool,
    hints: Hints,
    /// Whether the view's data representation is "external32".
    external32: bool,
}

/// A file opened by the members of a communicator (MPI_File). Dropping it closes this
/// process's descriptor without the collective close.
#[derive(Debug)]
pub struct File {
    comm: Comm,
    posix: PosixFile,
    shared: Option<SharedPointer>,
    /// The node of each member (hostname hash), for the aggregators.
    nodes: Vec<u64>,
    delete_on_close: bool,
    state: Mutex<State>,
}

/// Bits of the open/close agreements: bit 0 is "every step went well here", bit k+1
/// cleared means a member met I/O class `CLASSES[k]`.
const CLASSES: [IoClass; 13] = [
    IoClass::Amode,
    IoClass::NoSuchFile,
    IoClass::FileExists,
    IoClass::Access,
    IoClass::ReadOnly,
    IoClass::NoSpace,
    IoClass::Quota,
    IoClass::FileInUse,
    IoClass::BadFile,
    IoClass::Io,
    IoClass::Arg,
    IoClass::UnsupportedDatarep,
    IoClass::Unsupported,
];
/// Cleared when a member's communication step failed.
const COMM_BIT: u32 = 1 << 20;

fn flag_of<T>(r: &FileResult<T>) -> u32 {
    match r {
        Ok(_) => u32::MAX,
        Err(FileError::Io(e)) => {
            let k = CLASSES.iter().position(|c| *c == e.class).unwrap_or(9);
            !(1 | 1 << (k + 1))
        }
        Err(FileError::Comm(_)) => !(1 | COMM_BIT),
    }
}

/// The error of an agreed flag that is not all ones (`None` when every bit 0 is set).
fn error_of(flag: u32, doing: &str) -> Option<FileError> {
    if flag & 1 == 1 {
        return None;
    }
    if let Some(k) = (0..CLASSES.len()).find(|k| flag & (1 << (k + 1)) == 0) {
        return Some(FileError::io(CLASSES[k], format!("{doing} failed at a member")));
    }
    Some(FileError::Comm(Error::RankFailStop { rank: 0 }))
}

/// This node's name, hashed (FNV-1a).
fn node_id() -> u64 {
    let name = std::fs::read("/proc/sys/kernel/hostname").unwrap_or_default();
    name.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ b as u64).wrapping_mul(0x100_0000_01b3))
}

impl File {
    /// Opens `path` on every member of `comm` (MPI_File_open; collective, uniform, R41).
    /// `amode` is a combination of [`Amode`]'s bits. The file gets its own communicator
    /// (a duplicate), in `ErrorsReturn` mode.
    pub fn open(comm: &Comm, path: impl AsRef<Path>, amode: u32, hints: Hints) -> FileResult<File> {
        let path = path.as_ref().to_path_buf();
        let active = comm.collectives_enabled();
        let before = comm.recognized_world();
        let leader = comm.leader();
        let checked = Amode(amode).check().map(drop).map_err(FileError::from);
        let checked = if active { checked } else { Err(FileError::Comm(Error::RankFailStop { rank: 0 })) };
        // Step 1: the leader opens (and creates: MPI's CREATE/EXCL are the job's, not
        // each process's), and resets the shared pointer.
        let mine = checked.and_then(|()| {
            if comm.rank() == leader {
                let c = amode & Amode::CREATE != 0;
                PosixFile::open(&path, Amode(amode), c, c && amode & Amode::EXCL != 0).map(Some).map_err(Into::into)
            } else {
                Ok(None)
            }
        });
        let shared = match &mine {
            Ok(Some(_)) => SharedPointer::open(&path, true).ok(),
            _ => None,
        };
        // Step 2: the file's communicator (a duplicate) with every member's node and
        // step-1 outcome, from one creation exchange; then the others open what exists.
        let node = (node_id() & 0x7fff_ffff) as i32;
        let opened = comm.dup_tagged(node, flag_of(&mine) as i32).map_err(FileError::from).and_then(|(fc, entries)| {
            let flag = entries.iter().flatten().fold(u32::MAX, |f, e| f & e.1 as u32);
            if let Some(e) = error_of(flag, "open") {
                return Err(e);
            }
            let posix = match mine {
                Ok(Some(p)) => p,
                _ => PosixFile::open(&path, Amode(amode), false, false)?,
            };
            Ok((fc, entries, posix))
        });
        let shared = shared.or_else(|| SharedPointer::open(&path, false).ok());
        // Step 3: one agreement on `comm` — which every member has, whatever happened to
        // its duplicate — decides for all.
        let (flag, failed) = comm.agree_failed(flag_of(&opened) as i32)?;
        comm.learn_failed(&failed);
        if let Some(e) = error_of(flag as u32, "open") {
            // This member's own error class when it has one (the same at every member
            // for a step-1 error: the exchange carried it).
            return Err(opened.err().unwrap_or(e));
        }
        if let Some(&w) = failed.iter().find(|w| !before.contains(&(**w as u32))) {
            let rank = comm.members().iter().position(|r| r.0 as usize == w).unwrap_or(0) as u32;
            return Err(FileError::Comm(Error::RankFailStop { rank }));
        }
        let (fc, entries, posix) = opened.expect("every member opened (agreed)");
        fc.set_error_mode(crate::ErrorMode::ErrorsReturn);
        let nodes: Vec<u64> = entries.iter().map(|t| t.map_or(u64::MAX, |t| t.0 as u64)).collect();
        let mut state =
            State { view: View::contiguous(0, 1), pos: 0, atomic: false, closed: false, hints, external32: false };
        if amode & Amode::APPEND != 0 {
            state.pos = posix.size()?;
            if fc.rank() == leader {
                if let Some(s) = &shared {
                    s.store(state.pos)?;
                }
            }
        }
        Ok(File {
            comm: fc,
            posix,
            shared,
            nodes,
            delete_on_close: amode & Amode::DELETE_ON_CLOSE != 0,
            state: Mutex::new(state),
        })
    }

    /// Deletes the file at `path` (MPI_File_delete; not collective).
    pub fn delete(path: impl AsRef<Path>) -> FileResult<()> {
        runthrough_io::posix::delete(path.as_ref()).map_err(Into::into)
    }

    /// Closes the file (MPI_File_close; collective). Errs with `RankFailStop`, and leaves
    /// the file open, while a member's failure is not recognized by [`File::validate`]
    /// (R41); the outcome is the same at every member (an agreement decides).
    pub fn close(&mut self) -> FileResult<()> {
        self.open_state().map(drop)?;
        let recognized = self.comm.recognized_world();
        let (_, failed) = self.comm.agree_failed(1)?;
        self.comm.learn_failed(&failed);
        if let Some(&w) = failed.iter().find(|w| !recognized.contains(&(**w as u32))) {
            let rank = self.comm.members().iter().position(|r| r.0 as usize == w).unwrap_or(0) as u32;
            return Err(FileError::Comm(Error::RankFailStop { rank }));
        }
        self.state.lock().closed = true;
        if self.comm.rank() == self.comm.leader() {
            if let Some(s) = self.shared.take() {
                s.remove();
            }
            if self.delete_on_close {
                let _ = runthrough_io::posix::delete(self.posix.path());
            }
        }
        Ok(())
    }

    fn open_state(&self) -> FileResult<parking_lot::MutexGuard<'_, State>> {
        let s = self.state.lock();
        if s.closed {
            return Err(FileError::io(IoClass::BadFile, "the file is closed"));
        }
        Ok(s)
    }

    /// `Err(RankFailStop)` unless the file is collectively active (the collective calls'
    /// precondition, R41).
    fn active(&self) -> FileResult<()> {
        self.open_state().map(drop)?;
        if self.comm.collectives_enabled() {
            return Ok(());
        }
        let first = self.comm.group_failed().world_ranks().first().copied().unwrap_or(0);
        let rank = self.comm.members().iter().position(|r| r.0 as usize == first).unwrap_or(0) as u32;
        Err(FileError::Comm(Error::RankFailStop { rank }))
    }

    /// The file's communicator (its members; validate, agree and the collectives).
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// The path it was opened by.
    pub fn path(&self) -> PathBuf {
        self.posix.path().to_path_buf()
    }

    /// The access mode it was opened with.
    pub fn amode(&self) -> u32 {
        self.posix.amode().0
    }

    /// The group of the file (MPI_File_get_group; failed members included).
    pub fn group(&self) -> Group {
        self.comm.group()
    }

    /// Validates the file handle (MPI_File_validate, seeds §17.12.1): recognizes every
    /// failed member uniformly and re-enables the collectives; returns the failed group.
    pub fn validate(&self) -> FileResult<Group> {
        self.open_state().map(drop)?;
        Ok(self.comm.validate()?)
    }

    /// Whether the file is collectively active (MPIX_File_collectives_enabled).
    pub fn collectives_enabled(&self) -> bool {
        self.comm.collectives_enabled()
    }

    /// The failed members known here (MPI_File_get_group_failed, seeds §17.4.3).
    pub fn group_failed(&self) -> Group {
        self.comm.group_failed()
    }

    /// The hints in force.
    pub fn hints(&self) -> Hints {
        self.state.lock().hints.clone()
    }

    /// Sets hints (MPI_File_set_info; collective, needs an active file).
    pub fn set_hints(&self, hints: Hints) -> FileResult<()> {
        self.active()?;
        self.state.lock().hints = hints;
        Ok(())
    }

    /// Sets the view (MPI_File_set_view; collective; may err at some members and succeed
    /// at others when a member fails during it, as the seed allows): `disp` bytes, then tiles of the
    /// filetype's `runs` (offset, length) every `extent` bytes, in etypes of `etype`
    /// bytes. Resets the individual and shared pointers to 0. `datarep` must be
    /// `"native"` or `"external32"` (`UnsupportedDatarep` otherwise). The file layer
    /// moves the view's data stream as bytes either way: for `"external32"` the caller
    /// gives and takes the stream in that representation (big-endian; sizes as native,
    /// as `MPI_Pack_external` of the C interface makes them).
    pub fn set_view(&self, disp: u64, etype: u64, runs: &[(i64, u64)], extent: i64, datarep: &str) -> FileResult<()> {
        self.active()?;
        let rep = datarep.to_ascii_lowercase();
        let v = if rep != "native" && rep != "external32" {
            Err(FileError::io(IoClass::UnsupportedDatarep, format!("data representation {datarep:?}")))
        } else {
            View::new(disp, etype, runs.iter().copied(), extent).map_err(FileError::from)
        };
        // Every member learns whether the view is good everywhere before any takes it (a
        // member with a bad view must not leave the others with new pointers): a bitwise
        // AND, which also tells that every member arrived (no one still uses the old
        // shared pointer when the leader resets it).
        let mut flag = [0u32];
        self.comm.allreduce(&[flag_of(&v)], &mut flag, crate::Op::BitAnd)?;
        let flag = flag[0];
        let v = v?;
        if let Some(e) = error_of(flag, "set_view") {
            return Err(e);
        }
        {
            let mut s = self.state.lock();
            s.view = v;
            s.pos = 0;
            s.external32 = rep == "external32";
        }
        if self.comm.rank() == self.comm.leader() {
            if let Some(sh) = &self.shared {
                sh.store(0)?;
            }
        }
        self.comm.barrier()?;
        Ok(())
    }

    /// The view's data representation: `"native"` or `"external32"`.
    pub fn datarep(&self) -> &'static str {
        if self.state.lock().external32 {
            "external32"
        } else {
            "native"
        }
    }

    /// The view: displacement, etype size.
    pub fn view(&self) -> View {
        self.state.lock().view.clone()
    }

    fn check_offset(off: i64) -> FileResult<u64> {
        u64::try_from(off).map_err(|_| FileError::io(IoClass::Arg, format!("negative offset {off}")))
    }

    fn explicit_ok(&self) -> FileResult<()> {
        if self.posix.amode().has(Amode::SEQUENTIAL) {
            return Err(FileError::io(
                IoClass::Unsupported,
                "explicit offsets and individual pointers on a file opened MPI_MODE_SEQUENTIAL",
            ));
        }
        Ok(())
    }

    fn whole_etypes(view: &View, n: usize) -> FileResult<()> {
        if !(n as u64).is_multiple_of(view.etype()) {
            return Err(FileError::io(
                IoClass::Arg,
                format!("{n} bytes is not a whole number of etypes ({})", view.etype()),
            ));
        }
        Ok(())
    }

    /// Reads at `off` (etypes in the view) into `buf`; returns the bytes read (fewer at
    /// the end of file) (MPI_File_read_at).
    pub fn read_at(&self, off: i64, buf: &mut [u8]) -> FileResult<usize> {
        let off = Self::check_offset(off)?;
        self.explicit_ok()?;
        let (view, atomic) = self.view_atomic()?;
        self.read_view(&view, atomic, off, buf)
    }

    /// Writes `buf` at `off` (etypes in the view) (MPI_File_write_at).
    pub fn write_at(&self, off: i64, buf: &[u8]) -> FileResult<usize> {
        let off = Self::check_offset(off)?;
        self.explicit_ok()?;
        let (view, atomic) = self.view_atomic()?;
        self.write_view(&view, atomic, off, buf)
    }

    fn view_atomic(&self) -> FileResult<(View, bool)> {
        let s = self.open_state()?;
        Ok((s.view.clone(), s.atomic))
    }

    fn read_view(&self, view: &View, atomic: bool, pos: u64, buf: &mut [u8]) -> FileResult<usize> {
        let at = pos * view.etype();
        let r = if atomic {
            self.posix.locked(false, || self.posix.read_view(view, at, buf))
        } else {
            self.posix.read_view(view, at, buf)
        };
        Ok(r?)
    }

    fn write_view(&self, view: &View, atomic: bool, pos: u64, buf: &[u8]) -> FileResult<usize> {
        Self::whole_etypes(view, buf.len()).or_else(|e| if buf.is_empty() { Ok(()) } else { Err(e) })?;
        self.posix.write_view(view, pos * view.etype(), buf, atomic)?;
        Ok(buf.len())
    }

    /// Reads at the individual pointer and advances it (MPI_File_read).
    pub fn read(&self, buf: &mut [u8]) -> FileResult<usize> {
        self.explicit_ok()?;
        let (view, atomic, pos) = {
            let s = self.open_state()?;
            (s.view.clone(), s.atomic, s.pos)
        };
        let n = self.read_view(&view, atomic, pos, buf)?;
        self.state.lock().pos = pos + (n as u64).div_ceil(view.etype());
        Ok(n)
    }

    /// Writes at the individual pointer and advances it (MPI_File_write).
    pub fn write(&self, buf: &[u8]) -> FileResult<usize> {
        self.explicit_ok()?;
        let (view, atomic, pos) = {
            let s = self.open_state()?;
            (s.view.clone(), s.atomic, s.pos)
        };
        let n = self.write_view(&view, atomic, pos, buf)?;
        self.state.lock().pos = pos + n as u64 / view.etype();
        Ok(n)
    }

    fn shared(&self) -> FileResult<&SharedPointer> {
        self.shared
            .as_ref()
            .ok_or_else(|| FileError::io(IoClass::Io, "no shared file pointer (its side file could not be created)"))
    }

    /// Reads at the shared pointer and advances it (MPI_File_read_shared).
    pub fn read_shared(&self, buf: &mut [u8]) -> FileResult<usize> {
        let (view, atomic) = self.view_atomic()?;
        let n = (buf.len() as u64).div_ceil(view.etype());
        let pos = self.shared()?.fetch_add(n)?;
        self.read_view(&view, atomic, pos, buf)
    }

    /// Writes at the shared pointer and advances it (MPI_File_write_shared).
    pub fn write_shared(&self, buf: &[u8]) -> FileResult<usize> {
        let (view, atomic) = self.view_atomic()?;
        Self::whole_etypes(&view, buf.len())?;
        let pos = self.shared()?.fetch_add(buf.len() as u64 / view.etype())?;
        self.write_view(&view, atomic, pos, buf)
    }

    /// Moves the individual pointer (MPI_File_seek); errs on a negative result.
    pub fn seek(&self, off: i64, whence: Whence) -> FileResult<()> {
        self.explicit_ok()?;
        let end = if whence == Whence::End { self.end_position()? } else { 0 };
        let mut s = self.open_state()?;
        let base = match whence {
            Whence::Set => 0,
            Whence::Cur => s.pos,
            Whence::End => end,
        };
        s.pos = Self::check_offset(base as i64 + off)?;
        Ok(())
    }

    fn end_position(&self) -> FileResult<u64> {
        let size = self.posix.size()?;
        Ok(self.state.lock().view.position_at(size))
    }

    /// The individual pointer (etypes; MPI_File_get_position).
    pub fn position(&self) -> FileResult<u64> {
        self.explicit_ok()?;
        Ok(self.open_state()?.pos)
    }

    /// The shared pointer (etypes; MPI_File_get_position_shared).
    pub fn position_shared(&self) -> FileResult<u64> {
        self.open_state().map(drop)?;
        Ok(self.shared()?.load()?)
    }

    /// Moves the shared pointer (MPI_File_seek_shared; collective, the same arguments at
    /// every member).
    pub fn seek_shared(&self, off: i64, whence: Whence) -> FileResult<()> {
        self.active()?;
        let r = (|| {
            let base = match whence {
                Whence::Set => 0,
                Whence::Cur => self.shared()?.load()?,
                Whence::End => self.end_position()?,
            };
            Self::check_offset(base as i64 + off)
        })();
        let flag = self.comm.agree(flag_of(&r) as i32)? as u32;
        let to = r?;
        if let Some(e) = error_of(flag, "seek_shared") {
            return Err(e);
        }
        if self.comm.rank() == self.comm.leader() {
            self.shared()?.store(to)?;
        }
        self.comm.barrier()?;
        Ok(())
    }

    /// The absolute byte of view position `off` (MPI_File_get_byte_offset).
    pub fn byte_offset(&self, off: i64) -> FileResult<u64> {
        let off = Self::check_offset(off)?;
        Ok(self.open_state()?.view.byte_offset(off))
    }

    /// The file's size in bytes (MPI_File_get_size).
    pub fn size(&self) -> FileResult<u64> {
        self.open_state().map(drop)?;
        Ok(self.posix.size()?)
    }

    /// One member does `f` once every member arrived (a barrier: no member still looks
    /// at the file as it was before), and every member learns its outcome (an agreement:
    /// errs at every member if it erred, and no member returns before it is done).
    fn leader_does(&self, f: impl FnOnce() -> FileResult<()>) -> FileResult<()> {
        self.active()?;
        self.comm.barrier()?;
        let r = if self.comm.rank() == self.comm.leader() { f() } else { Ok(()) };
        let flag = self.comm.agree(flag_of(&r) as i32)? as u32;
        r?;
        error_of(flag, "the call").map_or(Ok(()), Err)
    }

    /// Truncates or extends the file (MPI_File_set_size; collective, needs an active file).
    pub fn set_size(&self, n: i64) -> FileResult<()> {
        let n = Self::check_offset(n)?;
        self.leader_does(|| Ok(self.posix.set_size(n)?))
    }

    /// Allocates storage for the first `n` bytes (MPI_File_preallocate; collective).
    pub fn preallocate(&self, n: i64) -> FileResult<()> {
        let n = Self::check_offset(n)?;
        self.leader_does(|| Ok(self.posix.preallocate(n)?))
    }

    /// Flushes every member's writes to storage (MPI_File_sync; collective).
    pub fn sync(&self) -> FileResult<()> {
        self.active()?;
        let r = if self.posix.amode().writable() { self.posix.sync() } else { Ok(()) };
        self.comm.barrier()?;
        Ok(r?)
    }

    /// Sets atomic mode (MPI_File_set_atomicity; collective).
    pub fn set_atomicity(&self, on: bool) -> FileResult<()> {
        self.active()?;
        self.comm.barrier()?;
        self.state.lock().atomic = on;
        Ok(())
    }

    /// Whether atomic mode is on.
    pub fn atomicity(&self) -> bool {
        self.state.lock().atomic
    }
}
