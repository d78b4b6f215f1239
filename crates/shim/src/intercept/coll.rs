//! Collective handlers, one per collective for its blocking form (a null request) and its
//! nonblocking one. On intra-communicators the shim runs them itself (`crate::coll`) under
//! `MATCHSHIM_COLL=shim`, and under `auto` where its algorithm pays; otherwise MPI runs the
//! call as the program made it. Before a blocking one the receives waiting in the shim go to
//! MPI ([`Runtime::step_aside`]): a peer may need one of them before it can join. Under `shim`
//! the shim runs its own collectives' schedules alongside, so the blocking collectives MPI
//! runs there (inter-communicators) go as their nonblocking forms waited for with the shim's
//! progress, on every rank alike, since MPI never matches a blocking collective with a
//! nonblocking one.
//!
//! Safety of the handlers: their arguments are those of the MPI call, valid as the standard
//! requires until the call (or its request) completes.
#![allow(clippy::missing_safety_doc)]

use super::{nonblocking_then_wait, Native};
use crate::coll::schedule::{Builder, Ints, Types};
use crate::coll::{algorithms, Kind, COLLECTIVES};
use crate::config::CollMode;
use crate::mpi::{self, abi, Code, MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request};
use crate::runtime::comm::Comm;
use crate::runtime::{Error, Runtime, View};
use algorithms::{Invalid, Plan, Prefix};
use matchshim_core::protocol::coll::{block_class, shim_may_pay, shim_pays, Form};
use std::os::raw::{c_int, c_void};

type Result = std::result::Result<Code, Error>;
type Buf = *const c_void;
type BufMut = *mut c_void;
type Counts = *const c_int;
type Type = MPI_Datatype;

/// Runs a collective: the shim's schedule (behind a generalized request when `request` is not
/// null), or MPI's nonblocking form (`native`), waited for when the call is blocking.
/// Either way the report counts the call under the collective's name.
///
/// # Safety
/// The buffers `build` names stay valid until the call (or its request) completes; `request`
/// is null or the caller's.
unsafe fn collective(
    rt: &'static Runtime,
    comm: MPI_Comm,
    kind: Kind,
    request: *mut MPI_Request,
    native: impl Native,
    build: impl FnOnce(&mut Builder) -> std::result::Result<(), Invalid>,
) -> Result {
    let form = if request.is_null() {
        Form::Blocking
    } else {
        Form::Nonblocking
    };
    if let Some(state) = COLLECTIVES.comm(rt, comm, kind, form)? {
        // SAFETY: as the caller promises.
        if let Some(code) = unsafe { COLLECTIVES.run(rt, state, kind, request, build) }? {
            return Ok(code);
        }
    }
    COLLECTIVES.passed_to_mpi(kind);
    if !request.is_null() {
        return Ok(native(comm, request));
    }
    let apart = COLLECTIVES.apart(rt.comm(comm)?);
    if rt.config.coll != CollMode::Shim && apart.is_none() {
        rt.step_aside();
        return Err(Error::ToMpi);
    }
    let target = apart.unwrap_or(comm);
    let mut started = true;
    let code = nonblocking_then_wait(rt, |r| {
        let code = native(target, r);
        started = code == abi().success;
        code
    })?;
    if !started {
        // MPI refused the arguments before anything moved: its blocking call on the user's
        // communicator reports them, in its own words and through that communicator's handler.
        return Err(Error::Invalid);
    }
    if code != abi().success && apart.is_some() {
        return Err(rt.raise(comm, code));
    }
    Ok(code)
}

/// A blocking collective's plain path: true (and counted as a call MPI ran) when MPI runs it
/// as the program made it with nothing for the shim to do first: `MATCHSHIM_COLL=native`, or
/// `auto` where the shim's algorithm never pays at this size, on a communicator that makes no
/// MPI-4 matching assertion, with no receive waiting in the shim. The entry point's inline
/// test knows only the communicators looked up last ([`View::plain_comm`]): it then calls
/// nothing before MPI, and its out-of-line part asks the table.
#[inline]
pub fn plainly_mpi(view: impl View, comm: MPI_Comm, kind: Kind) -> bool {
    let rt = view.rt();
    let mpi_runs = match view.plain_comm(comm) {
        Some(c) => mpi_runs_on(rt, c, kind),
        None => view.looks_up() && mpi_runs_unregistered(rt, comm, kind),
    };
    if mpi_runs && !view.needs_progress() {
        COLLECTIVES.passed_to_mpi(kind);
        return true;
    }
    false
}

/// [`plainly_mpi`] for `MPI_Gather`, whose blocks' size class decides as well: taken as the
/// shim's gather takes it, from the root's receive arguments at the root and from the rank's
/// own send arguments elsewhere, which MPI requires to hold as many bytes, so every rank
/// decides alike. A class the shim's gather pays at leaves the call to the full path.
#[inline]
pub fn plainly_mpi_gather(
    view: impl View,
    comm: MPI_Comm,
    root: c_int,
    send: (c_int, MPI_Datatype),
    recv: (c_int, MPI_Datatype),
) -> bool {
    let rt = view.rt();
    let mpi_runs = match view.plain_comm(comm) {
        Some(c) => mpi_runs_on(rt, c, Kind::Gather) || mpi_runs_gather(rt, c, root, send, recv),
        None => view.looks_up() && mpi_runs_unregistered(rt, comm, Kind::Gather),
    };
    if mpi_runs && !view.needs_progress() {
        COLLECTIVES.passed_to_mpi(Kind::Gather);
        return true;
    }
    false
}

/// Whether MPI runs a gather on `c`, whose ranks alone do not rule the shim's gather out, at
/// the size class of its blocks.
#[inline(never)]
fn mpi_runs_gather(
    rt: &Runtime,
    c: &Comm,
    root: c_int,
    (send_count, send_type): (c_int, MPI_Datatype),
    (recv_count, recv_type): (c_int, MPI_Datatype),
) -> bool {
    // An inter-communicator's gathers are MPI's under `auto` before this is asked.
    if c.asserts() || rt.config.coll != CollMode::Auto {
        return false;
    }
    let (count, dtype) = if c.rank == root {
        (recv_count, recv_type)
    } else {
        (send_count, send_type)
    };
    // The full path reports a bad datatype in MPI's words.
    if dtype == abi().datatype_null {
        return false;
    }
    let Ok(size) = mpi::type_size(dtype) else {
        return false;
    };
    block_class(count, size)
        .is_some_and(|class| !shim_pays(Kind::Gather, Form::Blocking, c.size, class))
}

/// Whether MPI runs a blocking call of `kind` on `c` as the program made it.
#[inline]
fn mpi_runs_on(rt: &Runtime, c: &Comm, kind: Kind) -> bool {
    !c.asserts() && mpi_runs_at(rt, kind, c.inter, c.size)
}

/// Whether MPI runs a blocking call of `kind` on a communicator of `size` that asserts
/// nothing.
#[inline]
fn mpi_runs_at(rt: &Runtime, kind: Kind, inter: bool, size: c_int) -> bool {
    match rt.config.coll {
        CollMode::Shim => false,
        CollMode::Native => true,
        CollMode::Auto => inter || !shim_may_pay(kind, Form::Blocking, size),
    }
}

/// [`mpi_runs_on`] for a communicator the shim has not registered.
#[cold]
fn mpi_runs_unregistered(rt: &Runtime, comm: MPI_Comm, kind: Kind) -> bool {
    // A deferred one asserts nothing; a call MPI runs at any size leaves it unregistered.
    (mpi_runs_at(rt, kind, false, c_int::MAX) && rt.comms.deferred(comm))
        || rt.comm(comm).is_ok_and(|c| mpi_runs_on(rt, c, kind))
}

/// A count per rank, from the caller's array (empty if there is none).
///
/// # Safety
/// `counts` is null or holds `n` ints.
unsafe fn per_rank(counts: Counts, n: c_int) -> Vec<c_int> {
    if counts.is_null() {
        return Vec::new();
    }
    // SAFETY: as the caller promises.
    unsafe { std::slice::from_raw_parts(counts, n.max(0) as usize) }.to_vec()
}

pub unsafe fn barrier(
    rt: &'static Runtime,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    // SAFETY: the caller's request.
    unsafe {
        collective(
            rt,
            comm,
            Kind::Barrier,
            request,
            native,
            algorithms::barrier,
        )
    }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn bcast(
    rt: &'static Runtime,
    buffer: BufMut,
    count: c_int,
    datatype: Type,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| algorithms::bcast(b, buffer, count, datatype, root);
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Bcast, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn reduce(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    count: c_int,
    datatype: Type,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::reduce(b, sendbuf.cast_mut(), recvbuf, count, datatype, op, root)
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Reduce, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn allreduce(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    count: c_int,
    datatype: Type,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::allreduce(b, sendbuf.cast_mut(), recvbuf, count, datatype, op)
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Allreduce, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn gather(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcount: c_int,
    recvtype: Type,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::gather(
            b,
            sendbuf.cast_mut(),
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Gather, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn gatherv(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcounts: Counts,
    displs: Counts,
    recvtype: Type,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::gatherv(
                b,
                sendbuf.cast_mut(),
                sendcount,
                sendtype,
                recvbuf,
                Ints::of(recvcounts),
                Ints::of(displs),
                recvtype,
                root,
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Gatherv, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn scatter(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcount: c_int,
    recvtype: Type,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::scatter(
            b,
            sendbuf.cast_mut(),
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Scatter, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn scatterv(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcounts: Counts,
    displs: Counts,
    sendtype: Type,
    recvbuf: BufMut,
    recvcount: c_int,
    recvtype: Type,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::scatterv(
                b,
                sendbuf.cast_mut(),
                Ints::of(sendcounts),
                Ints::of(displs),
                sendtype,
                recvbuf,
                recvcount,
                recvtype,
                root,
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Scatterv, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn allgather(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcount: c_int,
    recvtype: Type,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::allgather(
            b,
            sendbuf.cast_mut(),
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Allgather, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn allgatherv(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcounts: Counts,
    displs: Counts,
    recvtype: Type,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::allgatherv(
                b,
                sendbuf.cast_mut(),
                sendcount,
                sendtype,
                recvbuf,
                Ints::of(recvcounts),
                Ints::of(displs),
                recvtype,
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Allgatherv, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn alltoall(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcount: c_int,
    sendtype: Type,
    recvbuf: BufMut,
    recvcount: c_int,
    recvtype: Type,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::alltoall(
            b,
            sendbuf.cast_mut(),
            sendcount,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Alltoall, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn alltoallv(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcounts: Counts,
    sdispls: Counts,
    sendtype: Type,
    recvbuf: BufMut,
    recvcounts: Counts,
    rdispls: Counts,
    recvtype: Type,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::alltoallv(
                b,
                sendbuf.cast_mut(),
                Ints::of(sendcounts),
                Ints::of(sdispls),
                sendtype,
                recvbuf,
                Ints::of(recvcounts),
                Ints::of(rdispls),
                recvtype,
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Alltoallv, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn alltoallw(
    rt: &'static Runtime,
    sendbuf: Buf,
    sendcounts: Counts,
    sdispls: Counts,
    sendtypes: *const Type,
    recvbuf: BufMut,
    recvcounts: Counts,
    rdispls: Counts,
    recvtypes: *const Type,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::alltoallw(
                b,
                sendbuf.cast_mut(),
                Ints::of(sendcounts),
                Ints::of(sdispls),
                Types::of(sendtypes),
                recvbuf,
                Ints::of(recvcounts),
                Ints::of(rdispls),
                Types::of(recvtypes),
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Alltoallw, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn reduce_scatter(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    recvcounts: Counts,
    datatype: Type,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        // SAFETY: the caller's arrays, one entry per rank, valid while the call runs.
        unsafe {
            algorithms::reduce_scatter(
                b,
                sendbuf.cast_mut(),
                recvbuf,
                &per_rank(recvcounts, b.size()),
                datatype,
                op,
            )
        }
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::ReduceScatter, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn reduce_scatter_block(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    recvcount: c_int,
    datatype: Type,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        let counts = vec![recvcount; b.size().max(0) as usize];
        algorithms::reduce_scatter(b, sendbuf.cast_mut(), recvbuf, &counts, datatype, op)
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::ReduceScatterBlock, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn scan(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    count: c_int,
    datatype: Type,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::scan(
            b,
            sendbuf.cast_mut(),
            recvbuf,
            count,
            datatype,
            op,
            Prefix::Inclusive,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Scan, request, native, build) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn exscan(
    rt: &'static Runtime,
    sendbuf: Buf,
    recvbuf: BufMut,
    count: c_int,
    datatype: Type,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    native: impl Native,
) -> Result {
    let build = |b: &mut Builder| {
        algorithms::scan(
            b,
            sendbuf.cast_mut(),
            recvbuf,
            count,
            datatype,
            op,
            Prefix::Exclusive,
        )
    };
    // SAFETY: the caller's buffers and request.
    unsafe { collective(rt, comm, Kind::Exscan, request, native, build) }
}
