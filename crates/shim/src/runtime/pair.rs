//! MPI-4's `Isendrecv` and `Isendrecv_replace`: a send and a receive that complete as one.

use super::comm::Comm;
use super::complete;
use super::completion::Completion;
use super::p2p::{self, Target};
use super::receive::Buffer;
use super::request::Operation;
use super::{installed, Error, Runtime};
use crate::mpi::{self, abi, Code, MPI_Request};
use parking_lot::Mutex;
use std::sync::Arc;

/// `Isendrecv` and `Isendrecv_replace` (MPI-4): the send half is a real request, the receive
/// one of the shim's; one generalized request stands for both. `keep` lives until both
/// complete (the packed copy of a replaced buffer).
///
/// # Safety
/// The caller's buffers stay valid until the request completes; `request` is the caller's.
pub unsafe fn isendrecv(
    rt: &Runtime,
    send: impl FnOnce() -> Result<MPI_Request, Code>,
    buf: Buffer,
    target: Target,
    keep: Vec<u8>,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    let send = match send() {
        Ok(request) => request,
        Err(err) => return Ok(err),
    };
    let comm = target.comm;
    let mut recv = abi().request_null;
    // SAFETY: the caller's receive buffer, until the pair completes.
    let code = unsafe { p2p::irecv(rt, buf, target, &mut recv) }?;
    if code != abi().success {
        let mut send = send;
        mpi::cancel(&mut send);
        rt.wait_real(&mut send);
        return Ok(code);
    }
    let pair = Arc::new(SendRecv {
        comm,
        halves: Mutex::new((send, recv)),
        done: Completion::default(),
        _keep: keep,
    });
    // SAFETY: the caller's request.
    unsafe { p2p::register_op(rt, pair, comm, request) }
}

/// `MPI_Isendrecv`: a send and a receive that complete as one.
struct SendRecv {
    comm: &'static Comm,
    /// The send's real request, and the receive's (real or the shim's); null once complete.
    halves: Mutex<(MPI_Request, MPI_Request)>,
    done: Completion,
    _keep: Vec<u8>,
}

// SAFETY: MPI handles are plain values; the halves are behind the lock.
unsafe impl Send for SendRecv {}
// SAFETY: as above.
unsafe impl Sync for SendRecv {}

impl Operation for SendRecv {
    fn completion(&self) -> &Completion {
        &self.done
    }

    fn focus(&self) -> &'static Comm {
        self.comm
    }

    /// Tests both halves through the shim (the receive may be the shim's own request).
    fn poll(&self) -> bool {
        if self.done.is_done() {
            return true;
        }
        let Some(rt) = installed() else {
            return false;
        };
        let mut halves = self.halves.lock();
        let (send, recv) = &mut *halves;
        if *send != abi().request_null && mpi::test(send).is_none() {
            return false;
        }
        let mut flag = 0;
        let mut status = mpi::zeroed_status();
        // SAFETY: the receive half is a live request of this pair.
        let err = unsafe { complete::test(rt, recv, &mut flag, &mut status) };
        if flag == 0 && err.is_ok() {
            return false;
        }
        let code = match err {
            Ok(code) => code,
            Err(Error::Raised(code)) => code,
            Err(Error::Invalid | Error::ToMpi) => abi().err_request,
        };
        drop(halves);
        self.done.finish(status, code);
        true
    }

    fn cancel(&self) {
        let Some(rt) = installed() else {
            return;
        };
        let mut halves = self.halves.lock();
        if halves.1 != abi().request_null {
            // SAFETY: the receive half is a live request of this pair.
            let _ = unsafe { complete::cancel_request(rt, &mut halves.1) };
        }
    }
}
