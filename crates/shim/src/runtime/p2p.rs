//! Receives, probes, persistent receives and send-receive pairs: each call goes to MPI while
//! its communicator is delegated and through the shim's queues while it is taken over.
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use super::comm::{point_to_point, Channel, Comm, Matched, Posted, Queues, Waiter};
use super::recv::{Delivery, Persistent, Receive, RecvOp, RecvState, Taken};
use super::request::{self, Operation, Request};
use super::takeover::{Call, Mode, TRACK_EVERY};
use super::{Error, Runtime};
use crate::config::Takeover as Policy;
use crate::ffi::*;
use crate::matching::{Pattern, ANY_SOURCE, ANY_TAG};
use crate::mpi::{self, abi, empty_status, store_status, Code, Count, HeldType};
use parking_lot::{Mutex, MutexGuard};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The buffer arguments of a receive call: `count` elements of `datatype` at `ptr`.
#[derive(Clone, Copy)]
pub struct Buffer {
    pub ptr: *mut c_void,
    pub count: Count,
    pub datatype: MPI_Datatype,
}

impl Buffer {
    /// A receive into this buffer for the length of the call.
    fn borrowed(self) -> Receive {
        Receive::new(self.ptr, self.count, HeldType::borrow(self.datatype))
    }
}

/// A receive-side call MPI may take as the user made it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum PlainCall {
    /// `Recv`: blocks inside MPI, so only while nothing needs the shim.
    Recv,
    /// `Irecv`: posts a receive MPI holds after the call; one in a few is followed instead.
    Irecv,
    /// `Iprobe`, `Improbe`: return at once. (`Probe` takes the full path: MPICH writes its
    /// status's `MPI_ERROR`.)
    Iprobe,
}

/// A receive's or probe's envelope arguments, checked against the communicator.
pub struct Target {
    pub comm: &'static Comm,
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

/// Where a receive-side call goes.
enum Route<'a> {
    /// To MPI; `timed`: its time inside MPI is a sample for the takeover policy. While it is
    /// held, the communicator cannot be taken over (at `MPI_THREAD_MULTIPLE`).
    Mpi { timed: bool, permit: Permit<'a> },
    /// Through the shim's queues, held locked.
    Shim(MutexGuard<'a, Queues>),
}

struct Permit<'a> {
    comm: &'a Comm,
    multiple: bool,
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.comm.takeover.leave_mpi(self.multiple);
    }
}

impl Runtime {
    /// Checks a receive's or probe's arguments; `Err(Invalid)` lets MPI report a bad one.
    #[inline]
    pub fn target(
        &self,
        comm: MPI_Comm,
        source: c_int,
        tag: c_int,
        count: Option<(Count, MPI_Datatype)>,
    ) -> Result<Target, Error> {
        let state = self.comm(comm)?;
        let a = abi();
        let source_ok =
            source == a.any_source || source == a.proc_null || (0..state.size).contains(&source);
        let tag_ok = tag == a.any_tag || (0..=self.tag_ub).contains(&tag);
        let count_ok = match count {
            Some((count, datatype)) => count >= 0 && datatype != a.datatype_null,
            None => true,
        };
        if !(source_ok && tag_ok && count_ok) {
            return Err(Error::Invalid);
        }
        Ok(Target {
            comm: state,
            source,
            tag,
        })
    }

    /// Decides where a receive-side call on `comm` goes, switching modes as the policy says.
    #[inline]
    fn route(&self, comm: &'static Comm) -> Route<'static> {
        loop {
            if comm.takeover.mode() == Mode::Delegated {
                let call = comm.takeover.delegated_call(self.config.takeover);
                if call != Call::TakeOver {
                    if !comm.takeover.enter_mpi(self.multiple) {
                        continue;
                    }
                    return Route::Mpi {
                        timed: call == Call::DelegateTimed,
                        permit: Permit {
                            comm,
                            multiple: self.multiple,
                        },
                    };
                }
                let mut queues = comm.queues.lock();
                queues.take_over(comm, self);
                return Route::Shim(queues);
            }
            let mut queues = comm.queues.lock();
            if comm.takeover.mode() == Mode::Takeover && !queues.maybe_delegate(comm, self) {
                return Route::Shim(queues);
            }
        }
    }

    /// Runs `call` (a receive or probe going to MPI under `permit`), timed when `timed`: a
    /// sample for the takeover policy, which takes over when the samples say MPI searched
    /// deep. `found` tells from the result whether MPI found the message at once (then the
    /// call also moved it).
    #[inline]
    fn sampled<T>(
        &self,
        permit: Permit,
        timed: bool,
        call: impl FnOnce() -> Result<T, Code>,
        found: impl FnOnce(&T) -> bool,
    ) -> Result<T, Code> {
        if timed {
            self.timed(permit, call, found)
        } else {
            let result = call();
            drop(permit);
            result
        }
    }

    #[inline(never)]
    fn timed<T>(
        &self,
        permit: Permit,
        call: impl FnOnce() -> Result<T, Code>,
        found: impl FnOnce(&T) -> bool,
    ) -> Result<T, Code> {
        let comm = permit.comm;
        let start = self.clock.ticks();
        let result = call();
        let ticks = self.clock.ticks() - start;
        // The call is in MPI now; the switch to takeover waits for every permit, this one too.
        drop(permit);
        if let Ok(value) = &result {
            if comm
                .takeover
                .timed(ticks, self.clock.ticks_per_ns(), || found(value))
            {
                comm.queues.lock().take_over(comm, self);
            }
        }
        result
    }

    /// A delegated receive into `buf`, posted to MPI (timed when `timed`).
    #[inline]
    unsafe fn post_delegated(
        &self,
        target: &Target,
        buf: Buffer,
        timed: bool,
        permit: Permit,
    ) -> Result<MPI_Request, Code> {
        let comm = target.comm;
        self.sampled(
            permit,
            timed,
            || {
                mpi::irecv(
                    buf.ptr,
                    buf.count,
                    buf.datatype,
                    target.source,
                    target.tag,
                    comm.handle,
                )
            },
            |&request| mpi::request_done(request),
        )
    }

    /// A nonblocking receive MPI now holds for a delegated communicator; followed to its
    /// completion now and then while the takeover policy watches MPI's queue.
    #[inline]
    fn delegated(&self, comm: &'static Comm, request: MPI_Request) {
        let weight = if self.config.takeover == Policy::Auto {
            comm.takeover.follow_nonblocking()
        } else {
            0
        };
        comm.takeover.posted_to_mpi(weight, self.multiple);
        if weight > 0 {
            self.register(request, Request::Delegated(comm));
        }
    }

    /// MPI completed (or the user freed) a followed delegated receive.
    pub fn delegated_done(&self, comm: &Comm) {
        comm.takeover.completed_in_mpi(TRACK_EVERY, self.multiple);
    }

    pub unsafe fn recv(
        &self,
        buf: Buffer,
        target: Target,
        status: *mut MPI_Status,
    ) -> Result<Code, Error> {
        if target.is_proc_null() {
            store_status(status, &empty_status(abi().proc_null));
            return Ok(abi().success);
        }
        let comm = target.comm;
        let (result, code) = match self.route(comm) {
            Route::Mpi { timed, permit } => {
                comm.takeover.posted_to_mpi(0, self.multiple);
                if !timed && !self.multiple && !self.needs_progress() {
                    // Native speed: MPI receives, fills the status and reports errors itself.
                    return Ok(mpi::user::recv(
                        buf.ptr,
                        buf.count,
                        buf.datatype,
                        target.source,
                        target.tag,
                        comm.handle,
                        status,
                    ));
                }
                let posted = self.post_delegated(&target, buf, timed, permit);
                match posted {
                    Ok(mut request) => self.wait_receive(&mut request, comm),
                    Err(err) => return Ok(err),
                }
            }
            Route::Shim(mut queues) => {
                let receive = buf.borrowed();
                let waiter = {
                    let receive = receive.clone();
                    move || Waiter::blocking(receive, target.source, target.tag, Channel::Main)
                };
                match queues.post_drained(comm, self, target.pattern(), waiter) {
                    Posted::Found(arrived) => {
                        drop(queues);
                        taken(receive.take(
                            arrived.message,
                            &arrived.status,
                            comm.handle,
                            Delivery::Now,
                        ))
                    }
                    Posted::Queued(key) => {
                        drop(queues);
                        self.await_blocking(comm, key, &receive)
                    }
                }
            }
        };
        store_status(status, &result);
        if code != abi().success {
            // The shim's own calls returned it quietly; MPI_Recv raises through `comm`.
            return Err(self.raise(comm.handle, code));
        }
        Ok(code)
    }

    /// Waits for a real request of a blocking receive on `comm` with its error returned, not
    /// raised (MPICH's `Wait` and `Test` would raise it through `MPI_COMM_WORLD`, Open MPI's
    /// through `comm`): the caller raises it as `MPI_Recv` does.
    fn wait_receive(&self, request: &mut MPI_Request, comm: &Comm) -> (MPI_Status, Code) {
        let raising = if cfg!(mpich) {
            abi().comm_world
        } else {
            comm.handle
        };
        let _quiet = mpi::Quiet::new(&[raising]);
        self.wait_real(request)
    }

    /// Waits for the blocking receive posted under `key` and receives its message; an error
    /// comes back unraised.
    pub fn await_blocking(
        &self,
        comm: &'static Comm,
        key: usize,
        receive: &Receive,
    ) -> (MPI_Status, Code) {
        let mut matched = Matched::Waiting;
        self.wait_until(None, || {
            let mut queues = comm.queues.lock();
            queues.drain(comm, self);
            matched = queues.take_matched(key);
            !matches!(matched, Matched::Waiting)
        });
        match matched {
            Matched::Message(message, status) => {
                taken(receive.take(message, &status, comm.handle, Delivery::Now))
            }
            Matched::Request(mut request) => self.wait_receive(&mut request, comm),
            Matched::Failed(err) => (mpi::zeroed_status(), err),
            Matched::Waiting => unreachable!("waited for a match"),
        }
    }

    /// Whether a receive-side call goes to MPI as the user made it, with nothing for the shim
    /// to do but count it: the way most calls go while queues are short. MPI checks the
    /// arguments itself. False: the call takes the full path.
    #[inline]
    pub fn plainly_delegated(&self, comm: MPI_Comm, source: c_int, call: PlainCall) -> bool {
        let Some(comm) = self.last_comm(comm) else {
            return false;
        };
        // A receive from MPI_PROC_NULL gets its status from the shim (MPICH's is wrong).
        let receives = call != PlainCall::Iprobe;
        source != abi().proc_null
            && !(call == PlainCall::Recv && self.needs_progress())
            && comm.takeover.plain_delegation(
                self.config.takeover,
                call == PlainCall::Irecv,
                receives,
            )
    }

    #[inline]
    pub unsafe fn irecv(
        &self,
        buf: Buffer,
        target: Target,
        request: *mut MPI_Request,
    ) -> Result<Code, Error> {
        let comm = target.comm;
        if target.is_proc_null() {
            return self.irecv_proc_null(buf, target, request);
        }
        match self.route(comm) {
            Route::Mpi { timed, permit } => {
                let posted = self.post_delegated(&target, buf, timed, permit);
                match posted {
                    Ok(real) => {
                        *request = real;
                        self.delegated(comm, real);
                        Ok(abi().success)
                    }
                    Err(err) => Ok(err),
                }
            }
            Route::Shim(queues) => self.irecv_in_shim(queues, buf, target, request),
        }
    }

    /// MPI's own status for a receive from `MPI_PROC_NULL`, which MPICH 4.0.2 gets wrong.
    #[cold]
    unsafe fn irecv_proc_null(
        &self,
        buf: Buffer,
        target: Target,
        request: *mut MPI_Request,
    ) -> Result<Code, Error> {
        let op = RecvOp::new(buf.borrowed(), target.source, target.tag, target.comm);
        op.finish(empty_status(abi().proc_null), abi().success);
        self.grequest_for(op, request)
    }

    #[inline(never)]
    unsafe fn irecv_in_shim(
        &self,
        mut queues: MutexGuard<'static, Queues>,
        buf: Buffer,
        target: Target,
        request: *mut MPI_Request,
    ) -> Result<Code, Error> {
        let comm = target.comm;
        let mut held = Ok(());
        let (posted, op) = queues.post_op(comm, self, target.pattern(), || {
            let datatype = HeldType::hold(buf.datatype).unwrap_or_else(|err| {
                held = Err(err);
                HeldType::borrow(buf.datatype)
            });
            let receive = Receive::new(buf.ptr, buf.count, datatype);
            RecvOp::new(receive, target.source, target.tag, comm)
        });
        drop(queues);
        match posted {
            Posted::Found(mut arrived) => {
                match mpi::imrecv(buf.ptr, buf.count, buf.datatype, &mut arrived.message) {
                    Ok(real) => {
                        *request = real;
                        Ok(abi().success)
                    }
                    Err(err) => Ok(err),
                }
            }
            Posted::Queued(_) => {
                let op = op.expect("made when queued");
                if let Err(err) = held {
                    self.cancel_recv(&op);
                    return Err(self.raise(comm.handle, err));
                }
                self.grequest_for(op, request)
            }
        }
    }

    /// Gives `op` a generalized request as the user's handle.
    pub(super) unsafe fn grequest_for<T: Operation + 'static>(
        &self,
        op: Arc<T>,
        request: *mut MPI_Request,
    ) -> Result<Code, Error> {
        match request::start_grequest(&op) {
            Ok(greq) => {
                self.register(greq, Request::Op(op));
                *request = greq;
                Ok(abi().success)
            }
            Err(err) => {
                op.cancel(self);
                Err(self.raise(op.focus().handle, err))
            }
        }
    }

    pub unsafe fn recv_init(
        &self,
        buf: Buffer,
        target: Target,
        request: *mut MPI_Request,
    ) -> Result<Code, Error> {
        let handle = match mpi::recv_init(
            buf.ptr,
            buf.count,
            buf.datatype,
            target.source,
            target.tag,
            target.comm.handle,
        ) {
            Ok(handle) => handle,
            Err(err) => return Ok(err),
        };
        let datatype = match HeldType::hold(buf.datatype) {
            Ok(held) => held,
            Err(err) => return Err(self.raise(target.comm.handle, err)),
        };
        *request = handle;
        let persistent = Persistent {
            buf: buf.ptr,
            count: buf.count,
            datatype,
            source: target.source,
            tag: target.tag,
            comm: target.comm,
            current: Mutex::new(None),
            in_mpi: false.into(),
        };
        self.register(handle, Request::Persistent(Arc::new(persistent)));
        Ok(abi().success)
    }

    /// Starts a persistent receive (or passes a real request to MPI).
    pub unsafe fn start(&self, request: *mut MPI_Request) -> Result<Code, Error> {
        let Some(Request::Persistent(p)) = self.lookup(*request) else {
            return Ok(mpi::start(&mut *request));
        };
        let active = p.in_mpi.load(Ordering::Acquire) || p.current.lock().is_some();
        if active {
            return Err(self.raise(p.comm.handle, abi().err_request));
        }
        // Completed at once with the status MPI defines, which MPICH 4.0.2 gets wrong.
        if p.source == abi().proc_null {
            let op = RecvOp::new(p.receive(), p.source, p.tag, p.comm);
            op.finish(empty_status(abi().proc_null), abi().success);
            *p.current.lock() = Some(op);
            return Ok(abi().success);
        }
        let comm = p.comm;
        let started = match self.route(comm) {
            Route::Mpi { timed, permit } => {
                let started = self.sampled(
                    permit,
                    timed,
                    || mpi::check(mpi::start(&mut *request)),
                    |_| mpi::request_done(*request),
                );
                let code = started.err().unwrap_or(abi().success);
                if code == abi().success {
                    p.in_mpi.store(true, Ordering::Release);
                    // Persistent receives are registered anyway: each is followed.
                    let weight = (self.config.takeover == Policy::Auto) as usize;
                    comm.takeover.posted_to_mpi(weight, self.multiple);
                }
                Ok(code)
            }
            Route::Shim(mut queues) => {
                let target = Target {
                    comm,
                    source: p.source,
                    tag: p.tag,
                };
                let op = RecvOp::new(p.receive(), p.source, p.tag, comm);
                let (posted, _) = queues.post_op(comm, self, target.pattern(), || op.clone());
                if let Posted::Found(arrived) = posted {
                    queues.start_receive(comm, self, op.clone(), arrived);
                }
                *p.current.lock() = Some(op);
                Ok(abi().success)
            }
        };
        started
    }

    /// MPI finished the start of a persistent receive it ran.
    pub fn persistent_done_in_mpi(&self, p: &Persistent) {
        if p.in_mpi.swap(false, Ordering::AcqRel) && self.config.takeover == Policy::Auto {
            p.comm.takeover.completed_in_mpi(1, self.multiple);
        }
    }

    /// Cancels a receive of the shim's that has not matched yet (it completes as cancelled);
    /// one MPI holds is cancelled by MPI.
    pub fn cancel_recv(&self, op: &RecvOp) {
        let comm = op.comm;
        let mut queues = comm.queues.lock();
        match op.state() {
            RecvState::Posted(_) => {
                if queues.cancel(comm, self, op) {
                    drop(queues);
                    op.finish_cancelled();
                }
            }
            RecvState::Receiving(mut request) => {
                mpi::cancel(&mut request);
            }
            RecvState::New | RecvState::Done => {}
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
    ) -> Result<Code, Error> {
        if target.is_proc_null() {
            if !flag.is_null() {
                *flag = 1;
            }
            if remove {
                *message = abi().message_no_proc;
            }
            store_status(status, &empty_status(abi().proc_null));
            return Ok(abi().success);
        }
        let comm = target.comm;
        let mut found;
        loop {
            match self.route(comm) {
                Route::Mpi { timed, permit } => {
                    let probe = || {
                        if remove {
                            mpi::improbe(target.source, target.tag, comm.handle)
                        } else {
                            mpi::iprobe(target.source, target.tag, comm.handle)
                                .map(|s| s.map(|s| (abi().message_null, s)))
                        }
                    };
                    let probed = self.sampled(permit, timed, probe, Option::is_some);
                    match probed {
                        Err(err) => return Ok(err),
                        Ok(hit) => found = hit,
                    }
                }
                Route::Shim(mut queues) => {
                    queues.drain(comm, self);
                    found = queues.probe(self, target.pattern(), remove);
                }
            }
            if found.is_some() || !blocking {
                break;
            }
            self.progress(None);
            std::thread::yield_now();
        }
        if !flag.is_null() {
            *flag = found.is_some() as c_int;
        }
        if let Some((msg, st)) = found {
            if remove {
                *message = msg;
            }
            store_status(status, &st);
        }
        Ok(abi().success)
    }

    /// `Sendrecv` and `Sendrecv_replace`: `send` starts the send half (a real request).
    pub unsafe fn sendrecv(
        &self,
        send: impl FnOnce() -> Result<MPI_Request, Code>,
        buf: Buffer,
        target: Target,
        status: *mut MPI_Status,
    ) -> Result<Code, Error> {
        let mut send = match send() {
            Ok(request) => request,
            Err(err) => return Ok(err),
        };
        let recv = self.recv(buf, target, status);
        let (_, sent) = self.wait_real(&mut send);
        match recv {
            Ok(code) if code == abi().success => Ok(sent),
            recv => recv,
        }
    }
}

fn taken(taken: Taken) -> (MPI_Status, Code) {
    match taken {
        Taken::Done(status, err) => (status, err),
        Taken::Moving(mut request) => mpi::wait(&mut request),
    }
}
