//! One process's open file: `open(2)` from an access mode, reads and writes through a
//! [`View`], and the calls that change the file as a whole.
//!
//! Reads are sieved (ROMIO's data sieving): pieces closer together than [`SIEVE`] bytes
//! are fetched with one read and scattered, so a strided view is not one system call an
//! element. Writes are sieved too ([`PosixFile::write_view`]): nearby pieces become one
//! read-modify-write under the file's exclusive lock, while every plain write holds the
//! shared lock, so the holes never get stale bytes back. Collective writes get large
//! requests from collective buffering ([`crate::domain`]).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{Amode, Class, Error, Result, View};

/// The largest span a sieved read fetches at once.
pub const SIEVE: u64 = 4 << 20;

/// The largest span a sieved write reads, modifies and writes back at once.
pub const SIEVE_WRITE: u64 = 1 << 20;

/// Pieces of a write sieved only when they average fewer bytes than this.
pub const SIEVE_PIECE: u64 = 8 << 10;

/// An open file of one process.
#[derive(Debug)]
pub struct PosixFile {
    file: File,
    path: PathBuf,
    amode: Amode,
}

impl PosixFile {
    /// Opens `path` for `amode`, creating it when `create` (and only if absent when
    /// `excl`): the caller decides which process creates (MPI's CREATE and EXCL are
    /// collective).
    pub fn open(path: &Path, amode: Amode, create: bool, excl: bool) -> Result<PosixFile> {
        let amode = amode.check()?;
        let mut o = OpenOptions::new();
        o.read(amode.readable()).write(amode.writable()).custom_flags(libc::O_CLOEXEC);
        if create {
            if excl {
                o.create_new(true);
            } else {
                o.create(true);
            }
        }
        let file = o.open(path).map_err(|e| Error::os(&e, "open", path))?;
        if file.metadata().map(|m| m.is_dir()).unwrap_or(false) {
            return Err(Error::new(Class::BadFile, format!("{} is a directory", path.display())));
        }
        Ok(PosixFile { file, path: path.to_path_buf(), amode })
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The access mode.
    pub fn amode(&self) -> Amode {
        self.amode
    }

    fn os(&self, e: std::io::Error, doing: &str) -> Error {
        Error::os(&e, doing, &self.path)
    }

    /// Reads file bytes `off..` into `buf`; returns how many (fewer at the end of file).
    pub fn read_at(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        if !self.amode.readable() {
            return Err(Error::new(Class::Access, "read of a file opened MPI_MODE_WRONLY"));
        }
        read_full(&self.file, off, buf).map_err(|e| self.os(e, "read"))
    }

    /// Reads file bytes `off..` into `buf` whatever the access mode (a sieving write of
    /// a file opened MPI_MODE_WRONLY reads its holes through a second descriptor).
    fn read_raw(&self, off: u64, buf: &mut [u8]) -> Result<usize> {
        let f = File::open(&self.path).map_err(|e| self.os(e, "open for reading"))?;
        read_full(&f, off, buf).map_err(|e| self.os(e, "read"))
    }

    /// Writes `buf` at file byte `off`.
    pub fn write_at(&self, off: u64, buf: &[u8]) -> Result<()> {
        if !self.amode.writable() {
            return Err(Error::new(Class::Access, "write to a file opened MPI_MODE_RDONLY"));
        }
        self.file.write_all_at(buf, off).map_err(|e| self.os(e, "write"))
    }

    /// Reads the view's stream bytes `at..at + buf.len()` into `buf`; returns how many
    /// were read before the end of file (a read stops there, MPI-4.1 §14.4.4).
    pub fn read_view(&self, view: &View, at: u64, buf: &mut [u8]) -> Result<usize> {
        if view.is_contiguous() {
            return self.read_at(view.byte_offset(0) + at, buf);
        }
        let mut pieces = Vec::new();
        view.pieces(at, buf.len() as u64, |fo, l, so| pieces.push((fo, l, so)));
        let mut sieve = Vec::new();
        let mut i = 0;
        while i < pieces.len() {
            // The pieces this read covers: while the span stays under SIEVE.
            let start = pieces[i].0;
            let mut j = i + 1;
            while j < pieces.len() && pieces[j].0 + pieces[j].1 - start <= SIEVE {
                j += 1;
            }
            let (fo, l, so) = pieces[i];
            if j == i + 1 {
                let got = self.read_at(fo, &mut buf[so as usize..(so + l) as usize])?;
                if got < l as usize {
                    return Ok(so as usize + got);
                }
            } else {
                let (lo, last) = (start, pieces[j - 1]);
                sieve.resize((last.0 + last.1 - lo) as usize, 0);
                let got = self.read_at(lo, &mut sieve)? as u64;
                for &(fo, l, so) in &pieces[i..j] {
                    let have = (lo + got).saturating_sub(fo).min(l);
                    let from = (fo - lo) as usize;
                    buf[so as usize..(so + have) as usize].copy_from_slice(&sieve[from..from + have as usize]);
                    if have < l {
                        return Ok((so + have) as usize);
                    }
                }
            }
            i = j;
        }
        Ok(buf.len())
    }

    /// Writes `buf` as the view's stream bytes `at..at + buf.len()`; `atomic` holds the
    /// file's exclusive lock for the whole call (MPI's atomic mode).
    ///
    /// Write sieving: small pieces (averaging under [`SIEVE_PIECE`] bytes) closer
    /// together than [`SIEVE_WRITE`] bytes are written as one read-modify-write of their
    /// span, under the file's exclusive lock. Every other
    /// write of this layer holds the shared lock ([`PosixFile::write_pieces`]), so a
    /// read-modify-write never puts back stale bytes over another process's write into
    /// its holes (ROMIO's data sieving, with the whole file as the lock's range).
    pub fn write_view(&self, view: &View, at: u64, buf: &[u8], atomic: bool) -> Result<()> {
        let mut pieces = Vec::new();
        view.pieces(at, buf.len() as u64, |fo, l, so| pieces.push((fo, l, so)));
        if atomic {
            return self.locked(true, || self.sieved(&pieces, buf, 0..pieces.len(), true));
        }
        // Groups of pieces a sieve covers; single pieces go straight, under one shared lock.
        let mut groups = Vec::new();
        let mut i = 0;
        while i < pieces.len() {
            let start = pieces[i].0;
            let mut j = i + 1;
            while j < pieces.len() && pieces[j].0 + pieces[j].1 - start <= SIEVE_WRITE {
                j += 1;
            }
            groups.push(i..j);
            i = j;
        }
        let single: Vec<(u64, u64, u64)> = groups.iter().filter(|g| g.len() == 1).map(|g| pieces[g.start]).collect();
        if !single.is_empty() {
            self.write_pieces(&single, buf)?;
        }
        // Groups of small pieces are sieved; large ones go straight (a system call a
        // piece costs little beside its bytes, and takes no exclusive lock).
        let (sieve, direct): (Vec<_>, Vec<_>) = groups
            .into_iter()
            .filter(|g| g.len() > 1)
            .partition(|g| pieces[g.clone()].iter().map(|p| p.1).sum::<u64>() < SIEVE_PIECE * g.len() as u64);
        let direct: Vec<(u64, u64, u64)> = direct.into_iter().flat_map(|g| pieces[g].to_vec()).collect();
        if !direct.is_empty() {
            self.write_pieces(&direct, buf)?;
        }
        for g in sieve {
            self.locked(true, || self.sieved(&pieces, buf, g, true))?;
        }
        Ok(())
    }

    /// Writes `pieces` (`file_offset, len, offset in buf`) of `buf` one by one under the
    /// file's shared lock (excluding another process's sieving read-modify-write).
    pub fn write_pieces(&self, pieces: &[(u64, u64, u64)], buf: &[u8]) -> Result<()> {
        self.locked(false, || {
            pieces.iter().try_for_each(|&(fo, l, so)| self.write_at(fo, &buf[so as usize..(so + l) as usize]))
        })
    }

    /// Writes the pieces `range` of `pieces`; `sieve` merges each group within
    /// [`SIEVE_WRITE`] into one read-modify-write (the caller holds the exclusive lock).
    fn sieved(&self, pieces: &[(u64, u64, u64)], buf: &[u8], range: std::ops::Range<usize>, sieve: bool) -> Result<()> {
        let mut span = Vec::new();
        let mut i = range.start;
        while i < range.end {
            let start = pieces[i].0;
            let mut j = i + 1;
            while sieve && j < range.end && pieces[j].0 + pieces[j].1 - start <= SIEVE_WRITE {
                j += 1;
            }
            if j == i + 1 {
                let (fo, l, so) = pieces[i];
                self.write_at(fo, &buf[so as usize..(so + l) as usize])?;
            } else {
                let last = pieces[j - 1];
                span.clear();
                span.resize((last.0 + last.1 - start) as usize, 0);
                // Holes keep what the file holds (zeros past its end). A write-only file
                // that cannot be read here is written piece by piece instead.
                let read = if self.amode.readable() {
                    self.read_at(start, &mut span)
                } else {
                    self.read_raw(start, &mut span)
                };
                if read.is_err() {
                    for &(fo, l, so) in &pieces[i..j] {
                        self.write_at(fo, &buf[so as usize..(so + l) as usize])?;
                    }
                    i = j;
                    continue;
                }
                for &(fo, l, so) in &pieces[i..j] {
                    let from = (fo - start) as usize;
                    span[from..from + l as usize].copy_from_slice(&buf[so as usize..(so + l) as usize]);
                }
                self.write_at(start, &span)?;
            }
            i = j;
        }
        Ok(())
    }

    /// The file's size in bytes.
    pub fn size(&self) -> Result<u64> {
        self.file.metadata().map(|m| m.len()).map_err(|e| self.os(e, "stat"))
    }

    /// Truncates or extends the file to `n` bytes.
    pub fn set_size(&self, n: u64) -> Result<()> {
        if !self.amode.writable() {
            return Err(Error::new(Class::Access, "resizing a file opened MPI_MODE_RDONLY"));
        }
        self.file.set_len(n).map_err(|e| self.os(e, "truncate"))
    }

    /// Allocates storage for the first `n` bytes (the size grows to `n` if smaller).
    pub fn preallocate(&self, n: u64) -> Result<()> {
        if !self.amode.writable() {
            return Err(Error::new(Class::Access, "preallocating a file opened MPI_MODE_RDONLY"));
        }
        if n > self.size()? {
            // Storage for the new tail: the file system allocates blocks as it grows
            // (sparse where it supports it; MPI allows either as long as the bytes read
            // as zero).
            self.set_size(n)?;
        }
        Ok(())
    }

    /// Flushes written data to the storage device.
    pub fn sync(&self) -> Result<()> {
        self.file.sync_data().map_err(|e| self.os(e, "fsync"))
    }

    /// Holds the file's lock (exclusive for writers, shared for readers) while `f` runs:
    /// MPI's atomic mode between processes.
    pub fn locked<T>(&self, exclusive: bool, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let r = if exclusive { self.file.lock() } else { self.file.lock_shared() };
        r.map_err(|e| self.os(e, "lock"))?;
        let out = f();
        let _ = self.file.unlock();
        out
    }
}

/// Reads `file`'s bytes `off..` into `buf` until it is full or the file ends; how many.
pub(crate) fn read_full(file: &File, off: u64, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(k) => done += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// Deletes `path` (MPI_File_delete).
pub fn delete(path: &Path) -> Result<()> {
    std::fs::remove_file(path).map_err(|e| Error::os(&e, "delete", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("rt-io-{}-{name}", std::process::id()));
        let _ = std::fs::remove_file(&d);
        d
    }

    #[test]
    fn strided_writes_and_sieved_reads_round_trip_and_stop_at_the_end() {
        let p = tmp("strided");
        let f = PosixFile::open(&p, Amode(Amode::RDWR | Amode::CREATE), true, false).unwrap();
        // 3 bytes of every 8, from byte 2.
        let v = View::new(2, 1, [(1, 3)], 8).unwrap();
        let data: Vec<u8> = (1..=30).collect();
        f.write_view(&v, 0, &data, false).unwrap();
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 2 + 9 * 8 + 4); // the tenth tile's run ends at 2+72+4
        for (k, b) in data.iter().enumerate() {
            let at = 2 + (k / 3) * 8 + 1 + k % 3;
            assert_eq!(raw[at], *b, "byte {k}");
        }
        let mut back = vec![0u8; 30];
        assert_eq!(f.read_view(&v, 0, &mut back).unwrap(), 30);
        assert_eq!(back, data);
        // A read past the end stops there.
        let mut more = vec![0u8; 12];
        assert_eq!(f.read_view(&v, 27, &mut more).unwrap(), 3);
        assert_eq!(&more[..3], &data[27..]);
        let _ = delete(&p);
    }

    #[test]
    fn concurrent_sieved_writes_into_each_other_s_holes_lose_nothing() {
        // Four writers, each owning every fourth 8-byte piece, two write-only: each
        // write's read-modify-write spans the others' pieces, so without the locks one
        // writer would put back stale bytes over another's.
        let p = tmp("sieve");
        drop(PosixFile::open(&p, Amode(Amode::RDWR | Amode::CREATE), true, false).unwrap());
        let threads: Vec<_> = (0..4u8)
            .map(|w| {
                let p = p.clone();
                std::thread::spawn(move || {
                    let mode = if w % 2 == 0 { Amode::RDWR } else { Amode::WRONLY };
                    let f = PosixFile::open(&p, Amode(mode), false, false).unwrap();
                    let v = View::new(8 * w as u64, 1, [(0, 8)], 32).unwrap();
                    for round in 0..50u64 {
                        let data = vec![w + 1; 8 * 256];
                        f.write_view(&v, round * 8 * 256, &data, false).unwrap();
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let raw = std::fs::read(&p).unwrap();
        assert_eq!(raw.len(), 50 * 256 * 32);
        for (k, b) in raw.iter().enumerate() {
            assert_eq!(*b as usize, (k / 8) % 4 + 1, "byte {k}");
        }
        let _ = delete(&p);
    }

    #[test]
    fn modes_are_enforced_and_errors_have_classes() {
        let p = tmp("modes");
        assert_eq!(PosixFile::open(&p, Amode(Amode::RDONLY), false, false).unwrap_err().class, Class::NoSuchFile);
        let w = PosixFile::open(&p, Amode(Amode::WRONLY | Amode::CREATE), true, false).unwrap();
        assert_eq!(w.read_at(0, &mut [0u8; 4]).unwrap_err().class, Class::Access);
        assert_eq!(
            PosixFile::open(&p, Amode(Amode::WRONLY | Amode::CREATE | Amode::EXCL), true, true).unwrap_err().class,
            Class::FileExists
        );
        let r = PosixFile::open(&p, Amode(Amode::RDONLY), false, false).unwrap();
        assert_eq!(r.write_at(0, b"x").unwrap_err().class, Class::Access);
        w.preallocate(100).unwrap();
        assert_eq!(r.size().unwrap(), 100);
        w.set_size(10).unwrap();
        assert_eq!(r.size().unwrap(), 10);
        delete(&p).unwrap();
        assert_eq!(delete(&p).unwrap_err().class, Class::NoSuchFile);
    }
}
