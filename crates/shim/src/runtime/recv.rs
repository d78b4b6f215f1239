//! A nonblocking receive the shim completes itself, and the generalized request that stands
//! for it.

use super::comm::Comm;
use super::pmpi;
use crate::ffi::*;
use parking_lot::Mutex;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

#[derive(Clone, Copy)]
pub enum RecvState {
    /// Not yet in a queue.
    New,
    /// In the posted-receive queue under this id.
    Posted(u64),
    /// MPI is moving the payload.
    Receiving(MPI_Request),
    Done {
        status: MPI_Status,
        err: c_int,
    },
}

struct OpInner {
    state: RecvState,
    /// The generalized request the user holds (`MPI_REQUEST_NULL` when none).
    greq: MPI_Request,
}

pub struct RecvOp {
    pub buf: *mut c_void,
    pub count: Count,
    pub datatype: MPI_Datatype,
    pub source: c_int,
    pub tag: c_int,
    pub comm: Arc<Comm>,
    inner: Mutex<OpInner>,
}

// SAFETY: the buffer belongs to the user until the receive completes, as MPI requires; handles
// are plain values.
unsafe impl Send for RecvOp {}
unsafe impl Sync for RecvOp {}

impl RecvOp {
    pub fn new(
        buf: *mut c_void,
        count: Count,
        datatype: MPI_Datatype,
        source: c_int,
        tag: c_int,
        comm: Arc<Comm>,
    ) -> Arc<RecvOp> {
        Arc::new(RecvOp {
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            inner: Mutex::new(OpInner {
                state: RecvState::New,
                greq: abi().request_null,
            }),
        })
    }

    pub fn state(&self) -> RecvState {
        self.inner.lock().state
    }

    pub fn set_state(&self, state: RecvState) {
        self.inner.lock().state = state;
    }

    pub fn result(&self) -> Option<(MPI_Status, c_int)> {
        match self.inner.lock().state {
            RecvState::Done { status, err } => Some((status, err)),
            _ => None,
        }
    }

    pub fn is_done(&self) -> bool {
        matches!(self.inner.lock().state, RecvState::Done { .. })
    }

    /// Records the outcome and completes the generalized request, if any.
    pub fn finish(&self, status: MPI_Status, err: c_int) {
        let greq = {
            let mut inner = self.inner.lock();
            inner.state = RecvState::Done { status, err };
            inner.greq
        };
        if greq != abi().request_null {
            // SAFETY: greq is the live generalized request of this op.
            unsafe { PMPI_Grequest_complete(greq) };
        }
    }

    pub fn finish_cancelled(&self) {
        self.finish(pmpi::cancelled_status(self.source, self.tag), abi().success);
    }

    /// Starts the generalized request that represents this op to the user.
    pub fn start_grequest(self: &Arc<Self>) -> Result<MPI_Request, c_int> {
        let mut request = abi().request_null;
        let state = Arc::into_raw(self.clone()) as *mut c_void;
        // SAFETY: the callbacks below interpret `state` as the Arc leaked here; free_fn
        // reclaims it.
        let err = unsafe {
            PMPI_Grequest_start(
                Some(query_fn),
                Some(free_fn),
                Some(cancel_fn),
                state,
                &mut request,
            )
        };
        if err != abi().success {
            // SAFETY: MPI did not take the state.
            unsafe { drop(Arc::from_raw(state as *const RecvOp)) };
            return Err(err);
        }
        self.inner.lock().greq = request;
        Ok(request)
    }
}

unsafe extern "C" fn query_fn(state: *mut c_void, status: *mut MPI_Status) -> c_int {
    let op = &*(state as *const RecvOp);
    let (result, _) = op
        .result()
        .unwrap_or((pmpi::empty_status(op.source), abi().success));
    *status = result;
    abi().success
}

unsafe extern "C" fn free_fn(state: *mut c_void) -> c_int {
    drop(Arc::from_raw(state as *const RecvOp));
    abi().success
}

/// MPI calls this only when a program cancels through `PMPI_Cancel` directly; `MPI_Cancel`
/// is intercepted and cancels through the runtime.
unsafe extern "C" fn cancel_fn(state: *mut c_void, complete: c_int) -> c_int {
    if complete == 0 {
        let op = &*(state as *const RecvOp);
        if let Some(rt) = super::runtime() {
            rt.cancel(op);
        }
    }
    abi().success
}
