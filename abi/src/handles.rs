//! Tables of the library's own objects behind integer handles.
//!
//! A handle is `USER_BASE + 16 * index + kind`: never one of the header's predefined values
//! (all below 0x400), never mistaken for another kind's handle, and it fits an `int`
//! (`MPI_*_toint`). Objects are reference-counted so a call keeps its object alive after
//! the table's lock is released.

use std::sync::Arc;

use parking_lot::RwLock;

use crate::types::Handle;

/// First user handle.
pub(crate) const USER_BASE: usize = 0x10000;

/// The kinds of handle (low four bits of a user handle).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Kind {
    Comm = 1,
    Group = 2,
    Datatype = 3,
    Op = 4,
    Request = 5,
    Errhandler = 6,
    Info = 7,
    Message = 8,
    Session = 9,
    File = 10,
    Win = 11,
}

/// The live objects by index, and the free indices.
type Slots<T> = (Vec<Option<Arc<T>>>, Vec<usize>);

/// One kind's objects.
#[derive(Debug)]
pub(crate) struct Table<T> {
    kind: Kind,
    slots: RwLock<Slots<T>>,
}

impl<T> Table<T> {
    pub(crate) const fn new(kind: Kind) -> Self {
        Table { kind, slots: RwLock::new((Vec::new(), Vec::new())) }
    }

    fn index(&self, h: Handle) -> Option<usize> {
        if h < USER_BASE || (h - USER_BASE) % 16 != self.kind as usize {
            return None;
        }
        Some((h - USER_BASE) / 16)
    }

    /// Stores `v` and returns its new handle.
    pub(crate) fn insert(&self, v: Arc<T>) -> Handle {
        let mut g = self.slots.write();
        let i = match g.1.pop() {
            Some(i) => {
                g.0[i] = Some(v);
                i
            }
            None => {
                g.0.push(Some(v));
                g.0.len() - 1
            }
        };
        USER_BASE + 16 * i + self.kind as usize
    }

    /// The object of handle `h`, if it is one of this table's live handles.
    pub(crate) fn get(&self, h: Handle) -> Option<Arc<T>> {
        let i = self.index(h)?;
        self.slots.read().0.get(i).and_then(|s| s.clone())
    }

    /// Runs `f` on the object of handle `h` under the table's read lock, without taking
    /// a reference of its own (the hot path of a call on a window: one atomic pair
    /// fewer). `f` must not create or remove handles of this table.
    pub(crate) fn with<R>(&self, h: Handle, f: impl FnOnce(&T) -> R) -> Option<R> {
        let i = self.index(h)?;
        let g = self.slots.read();
        let v = g.0.get(i)?.as_deref()?;
        Some(f(v))
    }

    /// Removes handle `h`; its object if it was live.
    pub(crate) fn remove(&self, h: Handle) -> Option<Arc<T>> {
        let i = self.index(h)?;
        let mut g = self.slots.write();
        let v = g.0.get_mut(i)?.take()?;
        g.1.push(i);
        Some(v)
    }

    /// Every live handle with its object.
    pub(crate) fn all(&self) -> Vec<(Handle, Arc<T>)> {
        let g = self.slots.read();
        g.0.iter()
            .enumerate()
            .filter_map(|(i, s)| s.clone().map(|v| (USER_BASE + 16 * i + self.kind as usize, v)))
            .collect()
    }
}
