//! One process's open file: `open(2)` from an access mode, reads and writes through a
//! [`View`], and the calls that change the file as a whole.
//!
//! Reads are sieved (ROMIO's data sieving): pieces closer together than [`SIEVE`] bytes
//! are fetched with one read and scattered, so a strided view is not one system call an
//! element. Writes go piece by piece (adjacent pieces merged by the view): a
//! read-modify-write of the holes would overwrite other processes' bytes unless the whole
//! span were locked; collective writes get large requests from collective buffering
//! instead ([`crate::domain`]).

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::{Amode, Class, Error, Result, View};

/// The largest span a sieved read fetches at once.
pub const SIEVE: u64 = 4 << 20;

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
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], off + done as u64) {
                Ok(0) => break,
                Ok(k) => done += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.os(e, "read")),
            }
        }
        Ok(done)
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

    /// Writes `buf` as the view's stream bytes `at..at + buf.len()`.
    pub fn write_view(&self, view: &View, at: u64, buf: &[u8]) -> Result<()> {
        let mut r = Ok(());
        view.pieces(at, buf.len() as u64, |fo, l, so| {
            if r.is_ok() {
                r = self.write_at(fo, &buf[so as usize..(so + l) as usize]);
            }
        });
        r
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
        f.write_view(&v, 0, &data).unwrap();
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
