//! MPI-4's `Isendrecv` and `Isendrecv_replace`: a send and a receive that complete as one.

use super::comm::Comm;
use super::p2p::{Buffer, Target};
use super::request::{Completion, Operation};
use super::{Error, Runtime};
use crate::ffi::MPI_Request;
use crate::mpi::{self, abi, Code};
use parking_lot::Mutex;
use std::sync::Arc;

impl Runtime {
    /// `Isendrecv` and `Isendrecv_replace` (MPI-4): the send half is a real request, the receive one of
    /// the shim's; one generalized request stands for both. `keep` lives until both complete
    /// (the packed copy of a replaced buffer).
    pub unsafe fn isendrecv(
        &self,
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
        let code = self.irecv(buf, target, &mut recv)?;
        if code != abi().success {
            let mut send = send;
            mpi::cancel(&mut send);
            self.wait_real(&mut send);
            return Ok(code);
        }
        let pair = Arc::new(SendRecv {
            comm,
            halves: Mutex::new((send, recv)),
            done: Completion::default(),
            _keep: keep,
        });
        self.grequest_for(pair, request)
    }
}

/// `MPI_Isendrecv`: a send and a receive that complete as one.
struct SendRecv {
    comm: &'static Comm,
    /// The send's real request, and the receive's (real or the shim's); null once complete.
    halves: Mutex<(MPI_Request, MPI_Request)>,
    done: Completion,
    _keep: Vec<u8>,
}

// SAFETY: handles are plain values.
unsafe impl Send for SendRecv {}
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
        let Some(rt) = super::installed() else {
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
        let err = unsafe { rt.test(recv, &mut flag, &mut status) };
        if flag == 0 && err.is_ok() {
            return false;
        }
        let code = match err {
            Ok(code) => code,
            Err(Error::Raised(code)) => code,
            Err(Error::Invalid) => abi().err_request,
        };
        drop(halves);
        self.done.finish(status, code);
        true
    }

    fn cancel(&self, rt: &Runtime) {
        let mut halves = self.halves.lock();
        if halves.1 != abi().request_null {
            // SAFETY: the receive half is a live request of this pair.
            let _ = unsafe { rt.cancel_request(&mut halves.1) };
        }
    }
}
