//! Receives, probes and persistent requests through the shim's matching.
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use super::comm::{point_to_point, Comm, Posted};
use super::pmpi::{self, empty_status, store_status};
use super::recv::RecvOp;
use super::{PersistentRecv, Runtime, ShimRequest};
use crate::ffi::*;
use crate::matching::{Pattern, ANY_SOURCE, ANY_TAG};
use parking_lot::Mutex;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// A receive's envelope arguments, checked against the communicator.
pub struct Target {
    pub comm: Arc<Comm>,
    pub source: c_int,
    pub tag: c_int,
}

impl Target {
    fn pattern(&self) -> Pattern {
        let source = if self.source == abi().any_source {
            ANY_SOURCE
        } else {
            self.source
        };
        let tag = if self.tag == abi().any_tag {
            ANY_TAG
        } else {
            self.tag
        };
        point_to_point(source, tag)
    }

    fn is_proc_null(&self) -> bool {
        self.source == abi().proc_null
    }
}

impl Runtime {
    /// Checks a receive's or probe's arguments; an error goes through the communicator's
    /// error handler (MPI raises it itself for an invalid communicator).
    pub fn target(
        &self,
        comm: MPI_Comm,
        source: c_int,
        tag: c_int,
        count: Option<(Count, MPI_Datatype)>,
    ) -> Result<Target, c_int> {
        let state = self.comm(comm)?;
        let a = abi();
        let source_ok =
            source == a.any_source || source == a.proc_null || (0..state.size).contains(&source);
        let tag_ok = tag == a.any_tag || (0..=self.tag_ub).contains(&tag);
        let code = match count {
            Some((count, _)) if count < 0 => Some(a.err_count),
            Some((_, datatype)) if datatype == a.datatype_null => Some(a.err_type),
            _ if !source_ok => Some(a.err_rank),
            _ if !tag_ok => Some(a.err_tag),
            _ => None,
        };
        match code {
            Some(code) => Err(pmpi::raise(comm, code)),
            None => Ok(Target {
                comm: state,
                source,
                tag,
            }),
        }
    }

    pub unsafe fn recv(
        &self,
        buf: *mut c_void,
        count: Count,
        datatype: MPI_Datatype,
        target: Target,
        status: *mut MPI_Status,
    ) -> c_int {
        if target.is_proc_null() {
            store_status(status, &empty_status(abi().proc_null));
            return abi().success;
        }
        let comm = &target.comm;
        let mut message = match self.post(comm, target.pattern()) {
            Posted::Found(arrived) => arrived.message,
            Posted::Queued(key) => {
                let mut matched = None;
                self.wait_until(None, || {
                    let mut queues = comm.queues.lock();
                    queues.drain(comm, self);
                    matched = queues.take_matched(key);
                    matched.is_some()
                });
                matched.expect("matched")
            }
        };
        pmpi::mrecv(buf, count, datatype, &mut message, status)
    }

    pub unsafe fn irecv(
        &self,
        buf: *mut c_void,
        count: Count,
        datatype: MPI_Datatype,
        target: Target,
        request: *mut MPI_Request,
    ) -> c_int {
        let comm = &target.comm;
        let op = RecvOp::new(
            buf,
            count,
            datatype,
            target.source,
            target.tag,
            comm.clone(),
        );
        if target.is_proc_null() {
            let greq = match op.start_grequest() {
                Ok(greq) => greq,
                Err(err) => return err,
            };
            op.finish(empty_status(abi().proc_null), abi().success);
            self.register(greq, ShimRequest::Recv(op));
            *request = greq;
            return abi().success;
        }
        let mut queues = comm.queues.lock();
        let mut greq = None;
        // Started under the lock: no arrival can complete the op before it exists.
        let posted = queues.post_drained(comm, self, target.pattern(), Some(&op), || {
            greq = Some(op.start_grequest())
        });
        drop(queues);
        match posted {
            Posted::Found(mut arrived) => {
                pmpi::imrecv(buf, count, datatype, &mut arrived.message, &mut *request)
            }
            Posted::Queued(_) => {
                let greq = greq.expect("started when queued");
                match greq {
                    Ok(greq) => {
                        self.register(greq, ShimRequest::Recv(op));
                        *request = greq;
                        abi().success
                    }
                    Err(err) => {
                        self.cancel(&op);
                        err
                    }
                }
            }
        }
    }

    pub unsafe fn recv_init(
        &self,
        buf: *mut c_void,
        count: Count,
        datatype: MPI_Datatype,
        target: Target,
        request: *mut MPI_Request,
    ) -> c_int {
        // An inactive real persistent request gives the user a handle MPI itself knows.
        let err = PMPI_Recv_init(
            buf,
            0,
            abi().byte,
            abi().proc_null,
            0,
            target.comm.handle,
            request,
        );
        if err != abi().success {
            return err;
        }
        let persistent = PersistentRecv {
            buf,
            count,
            datatype,
            source: target.source,
            tag: target.tag,
            comm: target.comm,
            current: Mutex::new(None),
        };
        self.register(*request, ShimRequest::Persistent(Arc::new(persistent)));
        abi().success
    }

    /// Starts a persistent receive (or passes a real request to MPI).
    pub unsafe fn start(&self, request: *mut MPI_Request) -> c_int {
        let Some(ShimRequest::Persistent(p)) = self.lookup(*request) else {
            return PMPI_Start(request);
        };
        let mut current = p.current.lock();
        if current.is_some() {
            return pmpi::raise(p.comm.handle, abi().err_request);
        }
        let op = RecvOp::new(p.buf, p.count, p.datatype, p.source, p.tag, p.comm.clone());
        if p.source == abi().proc_null {
            op.finish(empty_status(abi().proc_null), abi().success);
        } else {
            let target = Target {
                comm: p.comm.clone(),
                source: p.source,
                tag: p.tag,
            };
            let mut queues = p.comm.queues.lock();
            let posted = queues.post_drained(&p.comm, self, target.pattern(), Some(&op), || ());
            if let Posted::Found(arrived) = posted {
                queues.start_receive(&p.comm, self, op.clone(), arrived);
            }
        }
        *current = Some(op);
        abi().success
    }

    pub unsafe fn request_free(&self, request: *mut MPI_Request) -> c_int {
        if let Some(shim) = self.lookup(*request) {
            // The receive goes on in the background; MPI frees the handle once it completes.
            self.unregister(*request);
            if let ShimRequest::Persistent(p) = shim {
                p.current.lock().take();
            }
        }
        PMPI_Request_free(request)
    }

    pub unsafe fn cancel_request(&self, request: *mut MPI_Request) -> c_int {
        match self.lookup(*request) {
            None => PMPI_Cancel(request),
            Some(ShimRequest::Recv(op)) => {
                self.cancel(&op);
                abi().success
            }
            Some(ShimRequest::Persistent(p)) => {
                if let Some(op) = p.current.lock().clone() {
                    self.cancel(&op);
                }
                abi().success
            }
            // Cancelling a collective is erroneous; MPI ignores it too.
            Some(ShimRequest::Collective(_)) => abi().success,
        }
    }

    /// `Probe`/`Iprobe` (`remove` false) and `Mprobe`/`Improbe` (`remove` true).
    pub unsafe fn probe(
        &self,
        target: Target,
        blocking: bool,
        remove: bool,
        flag: *mut c_int,
        message: *mut MPI_Message,
        status: *mut MPI_Status,
    ) -> c_int {
        if target.is_proc_null() {
            if !flag.is_null() {
                *flag = 1;
            }
            if remove {
                *message = abi().message_no_proc;
            }
            store_status(status, &empty_status(abi().proc_null));
            return abi().success;
        }
        let comm = &target.comm;
        let want = target.pattern();
        let mut found = None;
        let mut look = || {
            let mut queues = comm.queues.lock();
            queues.drain(comm, self);
            found = queues.probe(self, want, remove);
            found.is_some()
        };
        if blocking {
            self.wait_until(None, look);
        } else {
            self.progress(None);
            look();
        }
        if !flag.is_null() {
            *flag = found.is_some() as c_int;
        }
        if let Some(arrived) = found {
            if remove {
                *message = arrived.message;
            }
            store_status(status, &arrived.status);
        }
        abi().success
    }
}
