//! Receives, probes and persistent receives: each call goes to MPI while its communicator is
//! delegated and through the shim's queues while it is taken over ([`Comm::route`]).
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use super::comm::{Caller, Channel, Comm, Drain, Permit, ReceivedBy, Recv, Route};
use super::complete::Done;
use super::completion::Completion;
use super::receive::{Buffer, Delivery, Landed, Stage};
use super::request::{self, Operation, Persistent, Request};
use super::thread::Local;
use super::{Error, Runtime, View};
use crate::matching::{Class, Pattern, ANY_SOURCE, ANY_TAG};
use crate::mpi::{
    self, abi, empty_status, store_status, Code, Count, HeldType, MPI_Comm, MPI_Datatype,
    MPI_Message, MPI_Request, MPI_Status,
};
use matchshim_core::protocol::policy::FOLLOW_EVERY;
use matchshim_core::protocol::{PlainCall, Policy, Posted, Probe};
use smallvec::SmallVec;
use std::os::raw::c_int;
use std::sync::Arc;

/// What a user's receive with MPI's `source` and `tag` values matches.
pub fn user_pattern(source: c_int, tag: c_int) -> Pattern {
    Pattern {
        source: if source == abi().any_source {
            ANY_SOURCE
        } else {
            source
        },
        tag: if tag == abi().any_tag { ANY_TAG } else { tag },
        class: Class::PointToPoint,
    }
}

/// A receive's or probe's envelope arguments, checked against the communicator.
pub struct Target {
    pub comm: &'static Comm,
    pub source: c_int,
    pub tag: c_int,
}

impl Target {
    fn pattern(&self) -> Pattern {
        user_pattern(self.source, self.tag)
    }

    fn is_proc_null(&self) -> bool {
        self.source == abi().proc_null
    }
}

/// Checks a receive's or probe's arguments; `Err(Invalid)` lets MPI report a bad one.
#[inline]
pub fn target(
    rt: &Runtime,
    comm: MPI_Comm,
    source: c_int,
    tag: c_int,
    count: Option<(Count, MPI_Datatype)>,
) -> Result<Target, Error> {
    let state = rt.comm(comm)?;
    let a = abi();
    let source_ok =
        source == a.any_source || source == a.proc_null || (0..state.size).contains(&source);
    let tag_ok = tag == a.any_tag || (0..=rt.tag_ub).contains(&tag);
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

/// Whether a receive-side call goes to MPI as the user made it, with nothing for the shim to
/// do but count it: the way most calls go while queues are short. MPI checks the arguments
/// itself. False: the call takes the full path. Below `MPI_THREAD_MULTIPLE`
/// ([`plainly_delegated_threaded`] at it).
#[inline(always)]
pub fn plainly_delegated(rt: impl View, comm: MPI_Comm, source: c_int, call: PlainCall) -> bool {
    if rt.multiple() {
        return false;
    }
    let Some(comm) = rt.plain_comm(comm) else {
        return false;
    };
    // A receive from MPI_PROC_NULL gets its status from the shim (MPICH's is wrong).
    source != abi().proc_null
        && !(call.blocks() && rt.needs_progress())
        && comm.takeover.plain_delegation_serial(call)
}

/// [`plainly_delegated`] at `MPI_THREAD_MULTIPLE`, with the calling thread's `local` state:
/// the permit to hold while MPI has the call (a switch to takeover waits for it), or `None`
/// for the full path. A blocking receive's or probe's permit is a blocking mark, which makes a
/// switch to takeover give up instead (the message it waits for may need the switching
/// thread), and it goes only while nothing needs the shim's progress, as
/// [`plainly_delegated`]'s.
#[inline(always)]
pub fn plainly_delegated_threaded(
    rt: &Runtime,
    local: &Local,
    comm: MPI_Comm,
    source: c_int,
    call: PlainCall,
) -> Option<Permit<'static>> {
    if call.blocks() && rt.needs_progress() {
        return None;
    }
    let comm = local
        .last(comm)
        .or_else(|| rt.comms.registered_by(local, comm))?;
    if source == abi().proc_null {
        return None;
    }
    comm.plain_permit(call, local.slot())
}

/// A nonblocking receive MPI now holds for a delegated communicator; followed to its
/// completion now and then while the takeover policy watches MPI's queue.
#[inline]
fn delegated(rt: &Runtime, comm: &'static Comm, request: MPI_Request) {
    let weight = if rt.process.policy == Policy::Auto {
        comm.takeover.follow_nonblocking()
    } else {
        0
    };
    comm.takeover.posted_to_mpi(weight);
    if weight > 0 {
        debug_assert_eq!(weight, FOLLOW_EVERY);
        rt.requests.insert(request, Request::Delegated(comm));
    }
}

/// A delegated receive into `buf`, posted to MPI (timed when `timed`).
#[inline]
unsafe fn post_delegated(
    target: &Target,
    buf: &Buffer,
    route: (bool, super::comm::Permit),
) -> Result<MPI_Request, Code> {
    let (timed, permit) = route;
    permit.run(
        timed,
        (target.source, target.tag),
        || buf.post_to_mpi(target.source, target.tag, target.comm.handle),
        |&request| mpi::request_done(request),
    )
}

/// A receive of the user's the shim runs, at `stage`.
fn user_recv(target: &Target, buffer: Buffer, received_by: ReceivedBy, stage: Stage) -> Arc<Recv> {
    Recv::new(
        target.comm,
        buffer,
        (target.source, target.tag),
        Channel::Main,
        received_by,
        stage,
    )
}

pub unsafe fn recv(
    rt: &Runtime,
    buf: Buffer,
    target: Target,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    if target.is_proc_null() {
        // SAFETY: the caller's status.
        unsafe { store_status(status, &empty_status(abi().proc_null)) };
        return Ok(abi().success);
    }
    let comm = target.comm;
    let (result, code) = match comm.route(Caller::User, target.pattern()) {
        Route::Mpi { timed, permit } => {
            comm.takeover.posted_to_mpi(0);
            if !timed && !rt.process.multiple && !rt.needs_progress() {
                // Native speed: MPI receives, fills the status and reports errors itself.
                drop(permit);
                // SAFETY: the caller's arguments.
                return Ok(unsafe {
                    mpi::user::recv(
                        buf.ptr,
                        buf.count,
                        buf.datatype.handle(),
                        target.source,
                        target.tag,
                        comm.handle,
                        status,
                    )
                });
            }
            // SAFETY: the caller's buffer, waited for below.
            match unsafe { post_delegated(&target, &buf, (timed, permit)) } {
                Ok(mut request) => wait_receive(rt, &mut request, comm),
                Err(err) => return Ok(err),
            }
        }
        Route::Shim(mut shim) => {
            let mut made = None;
            let posted = shim.post(target.pattern(), Drain::Around, |key| {
                let recv = user_recv(&target, buf.clone(), ReceivedBy::Caller, Stage::Queued(key));
                made = Some(recv.clone());
                recv
            });
            drop(shim);
            match posted {
                Posted::Found(message) => buf.land(message, comm.handle, Delivery::Now).wait(),
                Posted::Queued(_) => await_match(rt, &made.expect("made when queued")),
            }
        }
    };
    // SAFETY: the caller's status.
    unsafe { store_status(status, &result) };
    if code != abi().success {
        // The shim's own calls returned it quietly; MPI_Recv raises through its communicator.
        return Err(rt.raise(comm.handle, code));
    }
    Ok(code)
}

/// Waits for a real request of a blocking receive on `comm` with its error returned, not
/// raised (MPICH's `Wait` and `Test` would raise it through `MPI_COMM_WORLD`, Open MPI's
/// through `comm`): the caller raises it as `MPI_Recv` does.
fn wait_receive(rt: &Runtime, request: &mut MPI_Request, comm: &Comm) -> (MPI_Status, Code) {
    let raising = if cfg!(mpich) {
        abi().comm_world
    } else {
        comm.handle
    };
    let _quiet = mpi::Quiet::new(&[raising]);
    rt.wait_real(request)
}

/// Waits for a receive its caller lands (`ReceivedBy::Caller`) to leave its queue, then
/// receives its message, or its request MPI completes; an error comes back unraised.
pub fn await_match(rt: &Runtime, recv: &Recv) -> (MPI_Status, Code) {
    let comm = recv.comm;
    rt.wait_until(Some(comm), || !matches!(recv.stage(), Stage::Queued(_)));
    match recv.stage() {
        Stage::Matched(message) => recv.buffer.land(message, comm.handle, Delivery::Now).wait(),
        Stage::InMpi(mut request) => wait_receive(rt, &mut request, comm),
        Stage::Done => recv
            .done
            .outcome()
            .map_or((mpi::zeroed_status(), abi().err_intern), |o| {
                (o.status, o.err)
            }),
        Stage::Queued(_) => unreachable!("waited for a match"),
    }
}

#[inline]
pub unsafe fn irecv(
    rt: &Runtime,
    buf: Buffer,
    target: Target,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    let comm = target.comm;
    if target.is_proc_null() {
        // SAFETY: the caller's request.
        return unsafe { irecv_proc_null(rt, buf, target, request) };
    }
    match comm.route(Caller::User, target.pattern()) {
        Route::Mpi { timed, permit } => {
            // SAFETY: the caller's buffer, until MPI completes the request.
            match unsafe { post_delegated(&target, &buf, (timed, permit)) } {
                Ok(real) => {
                    // SAFETY: the caller's request.
                    unsafe { *request = real };
                    delegated(rt, comm, real);
                    Ok(abi().success)
                }
                Err(err) => Ok(err),
            }
        }
        Route::Shim(shim) => {
            // SAFETY: the caller's arguments.
            unsafe { irecv_in_shim(rt, shim, buf, target, request) }
        }
    }
}

/// MPI's own status for a receive from `MPI_PROC_NULL`, which MPICH 4.0.2 gets wrong.
#[cold]
unsafe fn irecv_proc_null(
    rt: &Runtime,
    buf: Buffer,
    target: Target,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    let recv = user_recv(&target, buf, ReceivedBy::Progress, Stage::Done);
    recv.finish(empty_status(abi().proc_null), abi().success);
    // SAFETY: the caller's request.
    unsafe { register_op(rt, recv, target.comm, request) }
}

#[inline(never)]
unsafe fn irecv_in_shim(
    rt: &Runtime,
    mut shim: super::comm::Shim,
    buf: Buffer,
    target: Target,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    let comm = target.comm;
    let mut held = Ok(());
    let mut made = None;
    let posted = shim.post(target.pattern(), Drain::Around, |key| {
        // The user may free a derived datatype while the receive waits.
        let datatype = HeldType::hold(buf.datatype.handle()).unwrap_or_else(|err| {
            held = Err(err);
            buf.datatype.clone()
        });
        let buffer = Buffer {
            datatype,
            ..buf.clone()
        };
        let recv = user_recv(&target, buffer, ReceivedBy::Progress, Stage::Queued(key));
        made = Some(recv.clone());
        recv
    });
    drop(shim);
    match posted {
        Posted::Found(message) => match buf.land(message, comm.handle, Delivery::Request) {
            Landed::Moving(real) => {
                // SAFETY: the caller's request.
                unsafe { *request = real };
                Ok(abi().success)
            }
            Landed::Done(_, err) => Ok(err),
        },
        Posted::Queued(_) => {
            let recv = made.expect("made when queued");
            if let Err(err) = held {
                comm.cancel(&recv);
                return Err(rt.raise(comm.handle, err));
            }
            // SAFETY: the caller's request.
            unsafe { register_op(rt, recv, comm, request) }
        }
    }
}

/// Gives `op` a generalized request as the user's handle.
pub unsafe fn register_op<T: Operation + 'static>(
    rt: &Runtime,
    op: Arc<T>,
    comm: &Comm,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    match request::start_grequest(&op) {
        Ok(greq) => {
            rt.requests.insert(greq, Request::Op(op));
            // SAFETY: the caller's request.
            unsafe { *request = greq };
            Ok(abi().success)
        }
        Err(err) => {
            op.cancel();
            Err(rt.raise(comm.handle, err))
        }
    }
}

/// A receive the shim queued, as the user's request sees it.
impl Operation for Recv {
    fn completion(&self) -> &Completion {
        &self.done
    }

    fn focus(&self) -> &'static Comm {
        self.comm
    }

    fn cancel(&self) {
        self.comm.cancel(self);
    }

    fn pending_status(&self) -> MPI_Status {
        mpi::empty_status(self.source)
    }
}

pub unsafe fn recv_init(
    rt: &Runtime,
    buf: Buffer,
    target: Target,
    request: *mut MPI_Request,
) -> Result<Code, Error> {
    let datatype = buf.datatype.handle();
    // SAFETY: the caller's arguments; MPI uses the buffer whenever the request is active.
    let handle = match unsafe {
        mpi::recv_init(
            buf.ptr,
            buf.count,
            datatype,
            target.source,
            target.tag,
            target.comm.handle,
        )
    } {
        Ok(handle) => handle,
        Err(err) => return Ok(err),
    };
    let datatype = match HeldType::hold(datatype) {
        Ok(held) => held,
        Err(err) => return Err(rt.raise(target.comm.handle, err)),
    };
    // SAFETY: the caller's request.
    unsafe { *request = handle };
    let persistent = Persistent::new(
        Buffer { datatype, ..buf },
        target.source,
        target.tag,
        target.comm,
    );
    rt.requests
        .insert(handle, Request::Persistent(Arc::new(persistent)));
    Ok(abi().success)
}

/// Starts a persistent receive (or passes a real request to MPI).
pub unsafe fn start(rt: &Runtime, request: *mut MPI_Request) -> Result<Code, Error> {
    // SAFETY: the caller's request.
    let handle = unsafe { *request };
    let Some(Request::Persistent(p)) = rt.requests.get(handle) else {
        // SAFETY: as above.
        return Ok(mpi::start(unsafe { &mut *request }));
    };
    if p.is_active() {
        return Err(rt.raise(p.comm.handle, abi().err_request));
    }
    let target = Target {
        comm: p.comm,
        source: p.source,
        tag: p.tag,
    };
    // Completed at once with the status MPI defines, which MPICH 4.0.2 gets wrong.
    if target.is_proc_null() {
        let recv = user_recv(&target, p.buffer.clone(), ReceivedBy::Progress, Stage::Done);
        recv.finish(empty_status(abi().proc_null), abi().success);
        p.run_in_shim(recv);
        return Ok(abi().success);
    }
    let comm = p.comm;
    match comm.route(Caller::User, target.pattern()) {
        Route::Mpi { timed, permit } => {
            let started = permit.run(
                timed,
                (target.source, target.tag),
                // SAFETY: the caller's inactive persistent request.
                || mpi::check(mpi::start(unsafe { &mut *request })),
                // SAFETY: as above, now started.
                |_| mpi::request_done(unsafe { *request }),
            );
            let code = started.err().unwrap_or(abi().success);
            if code == abi().success {
                // Persistent receives are registered anyway: each is followed.
                p.started_in_mpi();
            }
            Ok(code)
        }
        Route::Shim(mut shim) => {
            let mut made = None;
            let posted = shim.post(target.pattern(), Drain::Around, |key| {
                let recv = user_recv(
                    &target,
                    p.buffer.clone(),
                    ReceivedBy::Progress,
                    Stage::Queued(key),
                );
                made = Some(recv.clone());
                recv
            });
            let recv = match posted {
                Posted::Queued(_) => made.expect("made when queued"),
                Posted::Found(message) => {
                    // Landed at once, under the communicator's lock: never seen queued.
                    let stage = Stage::Matched(message);
                    let recv = user_recv(&target, p.buffer.clone(), ReceivedBy::Progress, stage);
                    shim.land_now(recv.clone(), message);
                    recv
                }
            };
            drop(shim);
            p.run_in_shim(recv);
            Ok(abi().success)
        }
    }
}

/// What [`plain_starts_before`] holds while MPI's call starts the persistent receives: at
/// `MPI_THREAD_MULTIPLE`, each receive with the permit of its communicator (a switch to
/// takeover waits until MPI holds it); below, nothing (`None`, which costs nothing to drop).
pub type PlainStarts<'a> = Option<Threaded<'a>>;

/// [`PlainStarts`] at `MPI_THREAD_MULTIPLE`.
pub type Threaded<'a> = SmallVec<[(&'a Persistent, Permit<'static>); 2]>;

/// `MPI_Start` and `MPI_Startall` where the plain test found handles the shim may know: where
/// each one it knows is an inactive persistent receive (not from `MPI_PROC_NULL`) whose
/// communicator's plain path is open ([`PlainCall::Start`]), MPI's own call starts them all,
/// as the full path's route would have; each is counted in as a receive MPI holds first.
/// The receives are found in the registry's index without the table's lock
/// ([`request::Registry::persistent_indexed`]); at `MPI_THREAD_MULTIPLE` one it does not hold
/// comes from the table. `None` sends the call to the full path (erroneous starts included,
/// which it reports).
///
/// # Safety
/// `requests` holds `count` handles, as the MPI call requires.
#[inline(always)]
pub unsafe fn plain_starts_before<'a>(
    rt: &'a Runtime,
    count: c_int,
    requests: *const MPI_Request,
) -> Option<PlainStarts<'a>> {
    if count <= 0 || requests.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    let handles = unsafe { std::slice::from_raw_parts(requests, count as usize) };
    if rt.multiple {
        // SAFETY: the user's call on these handles.
        return unsafe { plain_starts_threaded(rt, handles) };
    }
    // SAFETY: below MPI_THREAD_MULTIPLE, inside the user's call.
    for p in unsafe { rt.requests.indexed_among(handles) } {
        let p = p?;
        if !(startable(p) && p.comm.takeover.plain_delegation_serial(PlainCall::Start)) {
            return None;
        }
    }
    // SAFETY: as above.
    for p in unsafe { rt.requests.indexed_among(handles) }.flatten() {
        p.started_in_mpi();
    }
    Some(None)
}

/// A persistent receive whose start MPI can run as it is: inactive, not from `MPI_PROC_NULL`
/// (whose status the shim writes).
#[inline(always)]
fn startable(p: &Persistent) -> bool {
    p.source != abi().proc_null && !p.is_active()
}

/// [`plain_starts_before`] at `MPI_THREAD_MULTIPLE`: the receives from the registry's index
/// (else its table), each with its communicator's permit held until MPI's call returned.
///
/// # Safety
/// Inside the user's MPI call on `handles`.
#[inline(never)]
unsafe fn plain_starts_threaded<'a>(
    rt: &'a Runtime,
    handles: &[MPI_Request],
) -> Option<PlainStarts<'a>> {
    let slot = super::thread::with_local(|local| local.slot());
    let mut starts = Threaded::new();
    for &handle in handles {
        if rt.requests.surely_unknown(handle) {
            continue;
        }
        // SAFETY: as the caller promises.
        let p = unsafe { rt.requests.persistent(handle) }?;
        if !startable(p) {
            return None;
        }
        let permit = p.comm.plain_permit(PlainCall::Start, slot)?;
        starts.push((p, permit));
    }
    for (p, _) in &starts {
        p.started_in_mpi();
    }
    Some(Some(starts))
}

/// After MPI's call that [`plain_starts_before`] allowed: a failed call counts its persistent
/// receives out again (its error is MPI's, as the program made the call). The permits go
/// with `starts`, which the caller drops after this.
///
/// # Safety
/// As for [`plain_starts_before`].
#[inline(always)]
pub unsafe fn plain_starts_after(
    rt: &Runtime,
    count: c_int,
    requests: *const MPI_Request,
    code: Code,
    starts: &PlainStarts<'_>,
    _done: Done,
) {
    if code == abi().success {
        return;
    }
    if let Some(starts) = starts {
        starts.iter().for_each(|(p, _)| p.done_in_mpi());
        return;
    }
    // SAFETY: as the caller promises.
    let handles = unsafe { std::slice::from_raw_parts(requests, count as usize) };
    // SAFETY: below MPI_THREAD_MULTIPLE, inside the user's call.
    for p in unsafe { rt.requests.indexed_among(handles) }.flatten() {
        p.done_in_mpi();
    }
}

/// How long a probe looks.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Poll {
    /// `MPI_Iprobe`, `MPI_Improbe`.
    Once,
    /// `MPI_Probe`, `MPI_Mprobe`: with progress, until a message is there.
    UntilFound,
}

/// `Probe`/`Iprobe` ([`Probe::Peek`]) and `Mprobe`/`Improbe` ([`Probe::Remove`]).
pub unsafe fn probe(
    rt: &Runtime,
    target: Target,
    poll: Poll,
    probe: Probe,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    let remove = probe == Probe::Remove;
    if target.is_proc_null() {
        // SAFETY: the caller's flag, message and status.
        unsafe {
            if !flag.is_null() {
                *flag = 1;
            }
            if remove {
                *message = abi().message_no_proc;
            }
            store_status(status, &empty_status(abi().proc_null));
        }
        return Ok(abi().success);
    }
    let comm = target.comm;
    let found = loop {
        let found = match comm.route(Caller::User, target.pattern()) {
            Route::Mpi { timed, permit } => {
                let probe = || {
                    if remove {
                        mpi::improbe(target.source, target.tag, comm.handle)
                    } else {
                        mpi::iprobe(target.source, target.tag, comm.handle)
                            .map(|s| s.map(|s| (abi().message_null, s)))
                    }
                };
                match permit.run(timed, (target.source, target.tag), probe, Option::is_some) {
                    Err(err) => return Ok(err),
                    Ok(found) => found,
                }
            }
            Route::Shim(mut shim) => shim
                .probe(target.pattern(), probe)
                .map(|m| (m.handle, m.status)),
        };
        if found.is_some() {
            break found;
        }
        // A program polling Iprobe on one communicator still makes MPI progress on the
        // others: a peer's send may wait for a receive the shim holds there.
        rt.progress_besides(Some(comm));
        if poll == Poll::Once {
            break None;
        }
        std::thread::yield_now();
    };
    // SAFETY: the caller's flag, message and status.
    unsafe {
        if !flag.is_null() {
            *flag = found.is_some() as c_int;
        }
        if let Some((msg, st)) = found {
            if remove {
                *message = msg;
            }
            store_status(status, &st);
        }
    }
    Ok(abi().success)
}

/// `Sendrecv` and `Sendrecv_replace`: `send` starts the send half (a real request).
pub unsafe fn sendrecv(
    rt: &Runtime,
    send: impl FnOnce() -> Result<MPI_Request, Code>,
    buf: Buffer,
    target: Target,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    let mut send = match send() {
        Ok(request) => request,
        Err(err) => return Ok(err),
    };
    // SAFETY: the caller's arguments.
    let recv = unsafe { recv(rt, buf, target, status) };
    let (_, sent) = rt.wait_real(&mut send);
    match recv {
        Ok(code) if code == abi().success => Ok(sent),
        recv => recv,
    }
}
