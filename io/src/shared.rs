//! The shared file pointer (MPI-4.1 §14.4.4): one counter for every process of a file,
//! kept in a small side file beside it (`.NAME.shfp`), read and advanced under the side
//! file's exclusive lock. A process that dies holding the lock loses it (the kernel
//! releases a dead process's locks), so the pointer survives any process's failure.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::{Error, Result};

/// A process's handle on a file's shared pointer.
#[derive(Debug)]
pub struct SharedPointer {
    file: File,
    path: PathBuf,
}

impl SharedPointer {
    /// The side file of `data`.
    pub fn side_path(data: &Path) -> PathBuf {
        let name = data.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        data.with_file_name(format!(".{name}.shfp"))
    }

    /// Opens the side file of `data`; `reset` (one process, before the others open) makes
    /// it hold 0.
    pub fn open(data: &Path, reset: bool) -> Result<SharedPointer> {
        let path = Self::side_path(data);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(reset)
            .truncate(reset)
            .open(&path)
            .map_err(|e| Error::os(&e, "open the shared pointer of", data))?;
        let p = SharedPointer { file, path };
        if reset {
            p.store(0)?;
        }
        Ok(p)
    }

    fn load_unlocked(&self) -> Result<u64> {
        let mut b = [0u8; 8];
        crate::posix::read_full(&self.file, 0, &mut b).map_err(|e| Error::os(&e, "read", &self.path))?;
        Ok(u64::from_le_bytes(b))
    }

    fn store_unlocked(&self, v: u64) -> Result<()> {
        self.file.write_all_at(&v.to_le_bytes(), 0).map_err(|e| Error::os(&e, "write", &self.path))
    }

    fn locked<T>(&self, f: impl FnOnce() -> Result<T>) -> Result<T> {
        self.file.lock().map_err(|e| Error::os(&e, "lock", &self.path))?;
        let r = f();
        let _ = self.file.unlock();
        r
    }

    /// The pointer now.
    pub fn load(&self) -> Result<u64> {
        self.locked(|| self.load_unlocked())
    }

    /// Sets the pointer.
    pub fn store(&self, v: u64) -> Result<()> {
        self.locked(|| self.store_unlocked(v))
    }

    /// Advances the pointer by `n` and returns where it was (atomic between processes).
    pub fn fetch_add(&self, n: u64) -> Result<u64> {
        self.locked(|| {
            let v = self.load_unlocked()?;
            self.store_unlocked(v + n)?;
            Ok(v)
        })
    }

    /// Removes the side file (the last process, at close).
    pub fn remove(self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::SharedPointer;

    #[test]
    fn fetch_add_is_atomic_between_handles() {
        let data = std::env::temp_dir().join(format!("rt-io-shfp-{}", std::process::id()));
        let a = SharedPointer::open(&data, true).unwrap();
        let b = SharedPointer::open(&data, false).unwrap();
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let d = data.clone();
                std::thread::spawn(move || {
                    let h = SharedPointer::open(&d, false).unwrap();
                    (0..200).map(|_| h.fetch_add(3).unwrap()).collect::<Vec<_>>()
                })
            })
            .collect();
        let mut seen: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..800).map(|k| 3 * k).collect::<Vec<_>>(), "every slot once");
        assert_eq!(b.load().unwrap(), 2400);
        a.store(7).unwrap();
        assert_eq!(b.fetch_add(1).unwrap(), 7);
        a.remove();
        assert!(!SharedPointer::side_path(&data).exists());
    }
}
