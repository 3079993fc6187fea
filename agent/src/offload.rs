//! Work that must not hold a loop that cuts a slice every second.
//!
//! Reading a large program's symbols (mongod 6.0's C++ `.symtab`: a million
//! entries, seconds in a debug build, hundreds of milliseconds in a release
//! one) on the record loop's thread made that loop miss its slice
//! boundaries: the slices around it lasted two seconds and mongod's
//! serverStatus replies landed in the wrong ones. Such work runs on a thread
//! of its own ([`Offloaded::start`]) and the loop takes the result once it is
//! there ([`Offloaded::poll`]), never waiting for it.

use std::sync::mpsc::{self, Receiver, TryRecvError};

/// A result being computed on another thread.
pub struct Offloaded<T> {
    rx: Receiver<T>,
}

/// What [`Offloaded::poll`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Polled<T> {
    Ready(T),
    Pending,
    /// The thread ended without a result (it panicked).
    Lost,
}

impl<T: Send + 'static> Offloaded<T> {
    /// Runs `work` on a new thread named `name`.
    pub fn start(name: &str, work: impl FnOnce() -> T + Send + 'static) -> std::io::Result<Self> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                // The receiver may be gone (the loop ended): nothing to tell.
                let _ = tx.send(work());
            })?;
        Ok(Self { rx })
    }

    /// The result, waiting at most `limit` for it (for the end of a
    /// recording, where nothing else runs any more).
    pub fn wait(&self, limit: std::time::Duration) -> Polled<T> {
        match self.rx.recv_timeout(limit) {
            Ok(v) => Polled::Ready(v),
            Err(mpsc::RecvTimeoutError::Timeout) => Polled::Pending,
            Err(mpsc::RecvTimeoutError::Disconnected) => Polled::Lost,
        }
    }

    /// The result if it is there; never blocks.
    pub fn poll(&self) -> Polled<T> {
        match self.rx.try_recv() {
            Ok(v) => Polled::Ready(v),
            Err(TryRecvError::Empty) => Polled::Pending,
            Err(TryRecvError::Disconnected) => Polled::Lost,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_arrives_without_blocking_the_caller() {
        let gate = std::sync::Arc::new(std::sync::Barrier::new(2));
        let inner = std::sync::Arc::clone(&gate);
        let job = Offloaded::start("test-offload", move || {
            inner.wait();
            42
        })
        .unwrap();
        // The work cannot have finished: it waits for this thread.
        assert_eq!(job.poll(), Polled::Pending);
        gate.wait();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            match job.poll() {
                Polled::Ready(v) => break assert_eq!(v, 42),
                Polled::Pending if std::time::Instant::now() < deadline => std::thread::yield_now(),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn a_panic_is_lost_not_pending_forever() {
        let job = Offloaded::<u32>::start("test-offload", || panic!("planted")).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while job.poll() == Polled::Pending && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        assert_eq!(job.poll(), Polled::Lost);
    }
}
