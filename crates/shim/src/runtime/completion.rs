//! How an operation the shim completes ended, and the generalized request that tells the user.

use crate::mpi::{self, abi, Code, MPI_Request, MPI_Status};
use parking_lot::Mutex;

/// How an operation ended.
#[derive(Clone, Copy)]
pub struct Outcome {
    pub status: MPI_Status,
    pub err: Code,
}

/// The end of an operation, and the generalized request that tells the user about it (if
/// any).
pub struct Completion {
    inner: Mutex<(Option<Outcome>, MPI_Request)>,
}

impl Default for Completion {
    fn default() -> Self {
        Completion {
            inner: Mutex::new((None, abi().request_null)),
        }
    }
}

// SAFETY: MPI handles are plain values, and the outcome is behind the lock.
unsafe impl Send for Completion {}
// SAFETY: as above.
unsafe impl Sync for Completion {}

impl Completion {
    /// Records the outcome and completes the generalized request, if any. Once only.
    pub fn finish(&self, status: MPI_Status, err: Code) {
        let greq = {
            let mut inner = self.inner.lock();
            if inner.0.is_some() {
                return;
            }
            inner.0 = Some(Outcome { status, err });
            inner.1
        };
        if greq != abi().request_null {
            mpi::grequest_complete(greq);
        }
    }

    pub fn outcome(&self) -> Option<Outcome> {
        self.inner.lock().0
    }

    pub fn is_done(&self) -> bool {
        self.inner.lock().0.is_some()
    }

    /// Parts with the generalized request that stands for the operation in one completion
    /// call, which MPI did not complete there: it is completed (if the operation is not done,
    /// it no longer will be through this request) and freed.
    pub fn drop_stand_in(&self, mut stand_in: MPI_Request) {
        let done = {
            let mut inner = self.inner.lock();
            if inner.1 == stand_in {
                inner.1 = abi().request_null;
            }
            inner.0.is_some()
        };
        if !done {
            mpi::grequest_complete(stand_in);
        }
        mpi::request_free(&mut stand_in);
    }

    /// The generalized request `greq` stands for the operation now; true if it had already
    /// finished (then the request is completed at once).
    pub fn attach(&self, greq: MPI_Request) {
        let finished = {
            let mut inner = self.inner.lock();
            inner.1 = greq;
            inner.0.is_some()
        };
        if finished {
            mpi::grequest_complete(greq);
        }
    }
}
