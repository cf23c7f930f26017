//! The engine's lock, biased toward the thread that made it, because a plain lock was
//! most of the cost of small messages (below).
//!
//! Every call into the engine takes its lock: the application's thread for each send,
//! receive and wait; the runtime's progress thread once a tick (heartbeats, the failure
//! detector, exit notices). The application's thread takes it hundreds of millions of
//! times more often, and never contended in the common case, yet a plain mutex charges
//! it two atomic read-modify-writes a call. `perf annotate` of an 8 B `osu_mbw_mr`
//! (bench/history/NOTEBOOK.md §0.14) put 80–90 % of `start_recv_in`'s and `wait_id`'s samples on those two
//! instructions, most of the receiver's time.
//!
//! [`BiasedMutex`] is an asymmetric Dekker lock (the scheme of liburcu and folly's
//! `asymmetricHeavyBarrier`, built on Linux's `membarrier(2)`):
//! - the **owner** (the thread that created the lock) enters by storing `fast = true`
//!   and reading `wants`: no atomic read-modify-write and no hardware fence, only a
//!   compiler fence between the two;
//! - **any other thread** takes the inner mutex, stores `wants = true`, then calls
//!   `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs a full memory barrier on
//!   every CPU running a thread of this process, and then waits for `fast == false`.
//!
//! After that barrier either the owner's `fast = true` is visible to the other thread
//! (which waits for the owner to leave) or the owner's later read of `wants` sees `true`
//! (and the owner backs off to the inner mutex). So at most one thread is inside.
//! The owner that finds `wants` set waits on the inner mutex like everyone else, so the
//! progress thread is never starved.
//!
//! Where `membarrier` is missing (an old kernel, a seccomp filter that refuses it) the
//! lock is not biased: every thread, the owner too, takes the inner mutex.
//!
//! Soundness does not rest on `Drop` running: a leaked guard leaves the lock held (the
//! other threads wait, as with any mutex), never two threads inside. A thread that takes
//! the lock it already holds panics instead of aliasing the data (the fast path checks).
#![allow(unsafe_code)]

use std::cell::UnsafeCell;
use std::fmt;
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{compiler_fence, AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (linux/membarrier.h).
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
/// `MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED` (linux/membarrier.h).
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

/// Whether this process registered for private expedited membarriers (once, at the
/// first lock made). `false` makes every [`BiasedMutex`] unbiased.
fn membarrier_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        if std::env::var_os("RT_ENGINE_LOCK_BIAS").is_some_and(|v| v == "0") {
            return false;
        }
        // SAFETY: membarrier(2) takes two ints and a cpu id, touches no user memory, and
        // fails cleanly (ENOSYS, EINVAL, EPERM) where it is not available.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) };
        r == 0
    })
}

/// The heavy side of the barrier pair: a full memory barrier on every CPU running a
/// thread of this process, and on the caller's.
fn heavy_barrier() {
    // SAFETY: as in `membarrier_ready`; called only once the registration succeeded, so
    // it does not fail with EPERM. A kernel that accepted the registration and then
    // refused the command leaves no barrier strong enough to order the owner's CPU:
    // abort rather than admit two threads.
    let r = unsafe { libc::syscall(libc::SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) };
    if r != 0 {
        // Not a panic: this runs under FFI entry points, and continuing would be unsound.
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            b"runthrough: membarrier(PRIVATE_EXPEDITED) failed after registration\n",
        );
        std::process::abort();
    }
}

thread_local! {
    /// Its address names the thread (unique among live threads).
    static TOKEN: u8 = const { 0 };
}

fn this_thread() -> usize {
    TOKEN.with(|t| t as *const u8 as usize)
}

/// A mutex whose creating thread enters without atomic read-modify-writes (module docs).
pub struct BiasedMutex<T: ?Sized> {
    /// The owner's thread token; 0 when the lock is not biased.
    owner: usize,
    /// The owner is inside by the fast path (written only by the owner).
    fast: AtomicBool,
    /// Another thread holds or is taking the lock (written only under `slow`).
    wants: AtomicBool,
    /// Exclusion among the threads on the slow path (the owner included, when it backs
    /// off).
    slow: parking_lot::Mutex<()>,
    data: UnsafeCell<T>,
}

// SAFETY: the lock hands `&mut T` to one thread at a time (module docs), so sharing the
// lock shares `T` only as a mutex would: `T: Send` is enough, as for `std::sync::Mutex`.
unsafe impl<T: ?Sized + Send> Sync for BiasedMutex<T> {}
// SAFETY: moving the lock moves `T`.
unsafe impl<T: ?Sized + Send> Send for BiasedMutex<T> {}

impl<T> BiasedMutex<T> {
    /// A lock biased toward the calling thread (unbiased where `membarrier` is missing,
    /// or with `RT_ENGINE_LOCK_BIAS=0`).
    pub fn new(data: T) -> Self {
        let owner = if membarrier_ready() { this_thread() } else { 0 };
        Self::with_owner(data, owner)
    }

    /// A lock with no owner: every thread takes the inner mutex.
    pub fn unbiased(data: T) -> Self {
        Self::with_owner(data, 0)
    }

    fn with_owner(data: T, owner: usize) -> Self {
        BiasedMutex {
            owner,
            fast: AtomicBool::new(false),
            wants: AtomicBool::new(false),
            slow: parking_lot::Mutex::new(()),
            data: UnsafeCell::new(data),
        }
    }
}

impl<T: ?Sized> BiasedMutex<T> {
    /// Whether the calling thread enters by the fast path.
    #[inline]
    pub fn is_owner(&self) -> bool {
        self.owner != 0 && self.owner == this_thread()
    }

    /// The owner's attempt: `Some` when inside, `None` when another thread holds or is
    /// taking the lock (then `fast` is false again).
    #[inline]
    fn try_fast(&self) -> Option<BiasedGuard<'_, T>> {
        // Only the owner stores `true`, so `true` here means it holds the lock already.
        assert!(!self.fast.load(Ordering::Relaxed), "the engine lock was taken twice by one thread");
        self.fast.store(true, Ordering::Relaxed);
        // The light side of the barrier pair: the compiler keeps the store before the
        // load; `heavy_barrier` in the other thread orders them on the CPU.
        compiler_fence(Ordering::SeqCst);
        if !self.wants.load(Ordering::Acquire) {
            return Some(BiasedGuard { lock: self, how: How::Fast, _not_send: PhantomData });
        }
        self.fast.store(false, Ordering::Release);
        None
    }

    /// A non-owner that holds `slow`: announces itself to the owner (sets `wants` and
    /// orders that against the owner's `fast` with the heavy barrier). Returns whether the
    /// owner may be inside by the fast path (`false` at once on an unbiased lock, which has
    /// no fast path and registered no barrier).
    fn announce(&self) -> bool {
        if self.owner == 0 {
            return false;
        }
        self.wants.store(true, Ordering::Relaxed);
        heavy_barrier();
        self.fast.load(Ordering::Acquire)
    }

    /// Waits until the owner is out of the fast path (it will not come back while
    /// `wants` is set). The owner holds the lock only for a short section, but it may
    /// be descheduled inside it (ranks outnumbering cores): spin, then yield, then sleep.
    fn wait_owner_out(&self) {
        let mut polls = 0u32;
        while self.fast.load(Ordering::Acquire) {
            polls = polls.saturating_add(1);
            if polls < 64 {
                std::hint::spin_loop();
            } else if polls < 64 + 256 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    /// The owner holds `slow`: it marks itself inside with `fast` too, so that taking
    /// the lock again from this thread panics (no other thread looks at `fast` before it
    /// holds `slow`).
    fn owner_slow<'a>(&'a self, g: parking_lot::MutexGuard<'a, ()>) -> BiasedGuard<'a, T> {
        self.fast.store(true, Ordering::Relaxed);
        BiasedGuard { lock: self, how: How::OwnerSlow(g), _not_send: PhantomData }
    }

    /// Takes the lock, waiting as long as it takes.
    #[inline]
    pub fn lock(&self) -> BiasedGuard<'_, T> {
        if self.is_owner() {
            if let Some(g) = self.try_fast() {
                return g;
            }
            return self.owner_slow(self.slow.lock());
        }
        self.lock_other()
    }

    #[cold]
    fn lock_other(&self) -> BiasedGuard<'_, T> {
        let g = self.slow.lock();
        if self.announce() {
            self.wait_owner_out();
        }
        BiasedGuard { lock: self, how: How::Slow(g), _not_send: PhantomData }
    }

    /// Takes the lock if nobody holds it now.
    #[inline]
    pub fn try_lock(&self) -> Option<BiasedGuard<'_, T>> {
        if self.is_owner() {
            if let Some(g) = self.try_fast() {
                return Some(g);
            }
            return Some(self.owner_slow(self.slow.try_lock()?));
        }
        let g = self.slow.try_lock()?;
        if self.announce() {
            self.wants.store(false, Ordering::Release);
            return None;
        }
        Some(BiasedGuard { lock: self, how: How::Slow(g), _not_send: PhantomData })
    }

    /// Takes the lock if it becomes free within `timeout`.
    pub fn try_lock_for(&self, timeout: Duration) -> Option<BiasedGuard<'_, T>> {
        let end = Instant::now() + timeout;
        loop {
            if let Some(g) = self.try_lock() {
                return Some(g);
            }
            if Instant::now() >= end {
                return None;
            }
            std::thread::yield_now();
        }
    }

    /// The data, through `&mut self` (no other reference can exist).
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T: fmt::Debug> fmt::Debug for BiasedMutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BiasedMutex").field("biased", &(self.owner != 0)).finish_non_exhaustive()
    }
}

enum How<'a> {
    /// The owner, by the fast path.
    Fast,
    /// The owner, having found another thread there: holds `slow` (and marks `fast`).
    OwnerSlow(parking_lot::MutexGuard<'a, ()>),
    /// Another thread: holds `slow` and has set `wants`.
    Slow(parking_lot::MutexGuard<'a, ()>),
}

/// Access to the data of a [`BiasedMutex`]; released when dropped. Not `Send`: the
/// fast path's flag belongs to the owner's thread.
pub struct BiasedGuard<'a, T: ?Sized> {
    lock: &'a BiasedMutex<T>,
    how: How<'a>,
    _not_send: PhantomData<*const ()>,
}

impl<T: ?Sized> BiasedGuard<'_, T> {
    /// Lets a thread waiting for the lock take it, then takes it again (as
    /// `parking_lot::MutexGuard::bump`): the progress thread calls it between rounds of
    /// work so the application is not kept out.
    pub fn bump(g: &mut Self) {
        let lock = g.lock;
        match &mut g.how {
            How::Fast => {
                // A thread that wants the lock has set `wants` and waits for `fast`.
                if lock.wants.load(Ordering::Acquire) {
                    lock.fast.store(false, Ordering::Release);
                    let inner = lock.slow.lock();
                    lock.fast.store(true, Ordering::Relaxed);
                    g.how = How::OwnerSlow(inner);
                }
            }
            How::OwnerSlow(inner) => {
                // A thread that gets `slow` meanwhile waits for `fast` to clear.
                lock.fast.store(false, Ordering::Release);
                parking_lot::MutexGuard::bump(inner);
                lock.fast.store(true, Ordering::Relaxed);
            }
            How::Slow(inner) => {
                lock.wants.store(false, Ordering::Release);
                parking_lot::MutexGuard::bump(inner);
                if lock.announce() {
                    lock.wait_owner_out();
                }
            }
        }
    }
}

impl<T: ?Sized> Deref for BiasedGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (module docs: at most one thread inside, and
        // the fast path refuses a second entry by its own thread).
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for BiasedGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`; `&mut self` makes this borrow unique within the guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for BiasedGuard<'_, T> {
    fn drop(&mut self) {
        match self.how {
            How::Fast | How::OwnerSlow(_) => self.lock.fast.store(false, Ordering::Release),
            // `wants` goes false before `slow` is released: the next thread on the slow
            // path sets it again only once it holds `slow`.
            How::Slow(_) => self.lock.wants.store(false, Ordering::Release),
        }
        // The inner guard (if any) is released when `how` drops, after this.
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for BiasedGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A read-then-write of a counter that takes a while (so two threads inside at once
    /// would lose updates), done by the owner and two other threads.
    fn bump_slowly(v: &mut u64) {
        let old = *v;
        for _ in 0..50 {
            std::hint::black_box(&mut *v);
        }
        *v = old + 1;
    }

    #[test]
    fn owner_and_others_exclude_each_other() {
        let m = Arc::new(BiasedMutex::new(0u64));
        assert!(m.is_owner() || !membarrier_ready());
        const N: u64 = 100_000;
        const M: u64 = 20_000;
        let others: Vec<_> = (0..2)
            .map(|_| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    assert!(!m.is_owner());
                    for i in 0..M {
                        let mut g = m.lock();
                        bump_slowly(&mut g);
                        if i % 7 == 0 {
                            BiasedGuard::bump(&mut g);
                            bump_slowly(&mut g);
                        }
                    }
                })
            })
            .collect();
        for i in 0..N {
            let mut g = if i % 3 == 0 {
                loop {
                    if let Some(g) = m.try_lock() {
                        break g;
                    }
                }
            } else {
                m.lock()
            };
            bump_slowly(&mut g);
        }
        for t in others {
            t.join().unwrap();
        }
        let extra = M.div_ceil(7);
        assert_eq!(*m.lock(), N + 2 * (M + extra));
    }

    #[test]
    fn a_second_entry_by_the_owner_panics_rather_than_alias() {
        if !membarrier_ready() {
            return;
        }
        let m = BiasedMutex::new(1u32);
        let _g = m.lock();
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _h = m.try_lock();
        }));
        assert!(again.is_err());
    }

    #[test]
    fn a_non_owner_try_lock_fails_while_the_owner_holds_it() {
        let m = Arc::new(BiasedMutex::new(()));
        let g = m.lock();
        let m2 = Arc::clone(&m);
        assert!(std::thread::spawn(move || m2.try_lock().is_none()).join().unwrap());
        drop(g);
        let m2 = Arc::clone(&m);
        assert!(std::thread::spawn(move || m2.try_lock().is_some()).join().unwrap());
    }

    #[test]
    fn unbiased_lock_has_no_fast_path() {
        let m = BiasedMutex::unbiased(5u8);
        assert!(!m.is_owner());
        let mut g = m.lock();
        // The progress thread bumps its guard between rounds; on an unbiased lock that
        // must not reach the barrier (which may never have been registered).
        BiasedGuard::bump(&mut g);
        assert_eq!(*g, 5);
        drop(g);
        assert!(m.try_lock().is_some());
    }
}
