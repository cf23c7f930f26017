//! The ordered runner of a communicator's nonblocking collectives: one thread, started
//! at the first collective, running them in the order they were started.

use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::req::Job;

type Task = Box<dyn FnOnce() + Send>;

/// The ordered runner of a communicator's nonblocking collectives.
#[derive(Default)]
pub(crate) struct Worker {
    tx: Mutex<Option<mpsc::Sender<Task>>>,
    pending: Arc<AtomicUsize>,
}

impl Worker {
    /// Queues `f`; the returned job completes with its result.
    pub(crate) fn submit(&self, f: impl FnOnce() -> c_int + Send + 'static) -> Arc<Job> {
        let job = Arc::new(Job::default());
        let j = job.clone();
        let pending = self.pending.clone();
        pending.fetch_add(1, Ordering::AcqRel);
        let task: Task = Box::new(move || {
            let rc = f();
            j.rc.store(rc, Ordering::Release);
            j.done.store(true, Ordering::Release);
            pending.fetch_sub(1, Ordering::AcqRel);
        });
        let mut g = self.tx.lock();
        if g.is_none() {
            let (tx, rx) = mpsc::channel::<Task>();
            std::thread::Builder::new()
                .name("mpi-coll".into())
                .spawn(move || {
                    while let Ok(t) = rx.recv() {
                        t();
                    }
                })
                .expect("spawning the collective worker");
            *g = Some(tx);
        }
        if let Some(tx) = g.as_ref() {
            let _ = tx.send(task);
        }
        job
    }

    /// Whether nonblocking collectives are queued or running.
    pub(crate) fn busy(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0
    }

    /// Waits until every queued collective has run.
    pub(crate) fn drain(&self) {
        while self.busy() {
            std::thread::yield_now();
        }
    }
}
