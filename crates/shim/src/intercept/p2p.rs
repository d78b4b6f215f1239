//! Point-to-point handlers. The `_c` (MPI_Count) forms share them; MPI-4's `Isendrecv` family
//! exists where the MPI has it.

use super::{nonblocking_then_wait, Native};
use crate::mpi::{
    self, abi, Code, Count, MPI_Comm, MPI_Datatype, MPI_Message, MPI_Request, MPI_Status,
};
use crate::runtime::p2p::{self as run, target, Poll};
use crate::runtime::receive::Buffer;
use crate::runtime::{Error, Runtime};
use matchshim_core::protocol::Probe;
use std::os::raw::{c_int, c_void};

type Result = std::result::Result<Code, Error>;

/// `Send`, `Ssend`, `Rsend`: their nonblocking form, waited for with the shim's progress.
#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn send(
    rt: &'static Runtime,
    _buf: *const c_void,
    _count: Count,
    _datatype: MPI_Datatype,
    _dest: c_int,
    _tag: c_int,
    comm: MPI_Comm,
    native: impl Native,
) -> Result {
    nonblocking_then_wait(rt, |r| native(comm, r))
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn recv(
    rt: &'static Runtime,
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, tag, Some((count, datatype)))?;
    // SAFETY: the caller's arguments.
    unsafe { run::recv(rt, Buffer::borrowed(buf, count, datatype), target, status) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn irecv(
    rt: &'static Runtime,
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Result {
    let target = target(rt, comm, source, tag, Some((count, datatype)))?;
    // SAFETY: the caller's arguments.
    unsafe { run::irecv(rt, Buffer::borrowed(buf, count, datatype), target, request) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn recv_init(
    rt: &'static Runtime,
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Result {
    let target = target(rt, comm, source, tag, Some((count, datatype)))?;
    // SAFETY: the caller's arguments.
    unsafe { run::recv_init(rt, Buffer::borrowed(buf, count, datatype), target, request) }
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn sendrecv(
    rt: &'static Runtime,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, recvtag, Some((recvcount, recvtype)))?;
    // SAFETY: the caller's send buffer, valid until the send completes inside this call.
    let send = || unsafe { mpi::isend(sendbuf, sendcount, sendtype, dest, sendtag, comm) };
    let buf = Buffer::borrowed(recvbuf, recvcount, recvtype);
    // SAFETY: the caller's arguments.
    unsafe { run::sendrecv(rt, send, buf, target, status) }
}

/// The outgoing data is packed first so the receive can land in the same buffer.
#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn sendrecv_replace(
    rt: &'static Runtime,
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, recvtag, Some((count, datatype)))?;
    // SAFETY: the caller's buffer.
    let packed = match unsafe { mpi::packed_copy(buf, count, datatype, comm) } {
        Ok(packed) => packed,
        Err(code) => return Ok(code),
    };
    let send = || {
        let len = packed.len() as Count;
        // SAFETY: `packed` outlives the send, which completes inside this call.
        unsafe {
            mpi::isend(
                packed.as_ptr().cast(),
                len,
                abi().packed,
                dest,
                sendtag,
                comm,
            )
        }
    };
    // SAFETY: the caller's arguments.
    unsafe {
        run::sendrecv(
            rt,
            send,
            Buffer::borrowed(buf, count, datatype),
            target,
            status,
        )
    }
}

/// MPI-4's nonblocking send-receive: the receive half goes through the shim like any receive.
#[cfg(mpi4)]
#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn isendrecv(
    rt: &'static Runtime,
    sendbuf: *const c_void,
    sendcount: Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Result {
    let target = target(rt, comm, source, recvtag, Some((recvcount, recvtype)))?;
    // SAFETY: the caller's send buffer, valid until the request completes.
    let send = || unsafe { mpi::isend(sendbuf, sendcount, sendtype, dest, sendtag, comm) };
    let buf = Buffer::borrowed(recvbuf, recvcount, recvtype);
    // SAFETY: the caller's arguments.
    unsafe { crate::runtime::pair::isendrecv(rt, send, buf, target, Vec::new(), request) }
}

#[cfg(mpi4)]
#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn isendrecv_replace(
    rt: &'static Runtime,
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> Result {
    let target = target(rt, comm, source, recvtag, Some((count, datatype)))?;
    // SAFETY: the caller's buffer.
    let packed = match unsafe { mpi::packed_copy(buf, count, datatype, comm) } {
        Ok(packed) => packed,
        Err(code) => return Ok(code),
    };
    let (data, len) = (packed.as_ptr(), packed.len() as Count);
    // SAFETY: `packed` is kept with the pair until both halves complete.
    let send = || unsafe { mpi::isend(data.cast(), len, abi().packed, dest, sendtag, comm) };
    let buf = Buffer::borrowed(buf, count, datatype);
    // SAFETY: the caller's arguments.
    unsafe { crate::runtime::pair::isendrecv(rt, send, buf, target, packed, request) }
}

/// `MPI_Probe` on the plain path: MPI's call, leaving the status's `MPI_ERROR` as the user set
/// it (MPICH's own probes write it; single-completion calls do not).
///
/// # Safety
/// The arguments are the caller's, as `MPI_Probe` requires them.
#[inline]
pub unsafe fn probe_mpi(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Code {
    // SAFETY: as the caller promises.
    unsafe { keeping_error(status, || mpi::next::MPI_Probe(source, tag, comm, status)) }
}

/// `MPI_Iprobe` on the plain path, as [`probe_mpi`].
///
/// # Safety
/// The arguments are the caller's, as `MPI_Iprobe` requires them.
#[inline]
pub unsafe fn iprobe_mpi(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Code {
    // SAFETY: as the caller promises.
    unsafe {
        keeping_error(status, || {
            mpi::next::MPI_Iprobe(source, tag, comm, flag, status)
        })
    }
}

/// `MPI_Improbe` on the plain path, as [`probe_mpi`].
///
/// # Safety
/// The arguments are the caller's, as `MPI_Improbe` requires them.
#[inline]
pub unsafe fn improbe_mpi(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> Code {
    // SAFETY: as the caller promises.
    unsafe {
        keeping_error(status, || {
            mpi::next::MPI_Improbe(source, tag, comm, flag, message, status)
        })
    }
}

/// `MPI_Mprobe` on the plain path, as [`probe_mpi`].
///
/// # Safety
/// The arguments are the caller's, as `MPI_Mprobe` requires them.
#[inline]
pub unsafe fn mprobe_mpi(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> Code {
    // SAFETY: as the caller promises.
    unsafe {
        keeping_error(status, || {
            mpi::next::MPI_Mprobe(source, tag, comm, message, status)
        })
    }
}

/// Runs `call`, which writes `status`, keeping the `MPI_ERROR` the user set there (Open MPI's
/// probes keep it themselves).
///
/// # Safety
/// `status` is `MPI_STATUS_IGNORE`, null, or points to a writable `MPI_Status`.
#[inline(always)]
unsafe fn keeping_error(status: *mut MPI_Status, call: impl FnOnce() -> Code) -> Code {
    if !cfg!(mpich) || mpi::ignored(status) {
        return call();
    }
    // SAFETY: a status of the caller's (see `# Safety`).
    unsafe {
        let error = (*status).MPI_ERROR;
        let code = call();
        (*status).MPI_ERROR = error;
        code
    }
}

pub unsafe fn probe(
    rt: &'static Runtime,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, tag, None)?;
    let (flag, message) = (std::ptr::null_mut(), std::ptr::null_mut());
    // SAFETY: the caller's status.
    unsafe {
        run::probe(
            rt,
            target,
            Poll::UntilFound,
            Probe::Peek,
            flag,
            message,
            status,
        )
    }
}

pub unsafe fn iprobe(
    rt: &'static Runtime,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, tag, None)?;
    // SAFETY: the caller's flag and status.
    unsafe {
        run::probe(
            rt,
            target,
            Poll::Once,
            Probe::Peek,
            flag,
            std::ptr::null_mut(),
            status,
        )
    }
}

pub unsafe fn mprobe(
    rt: &'static Runtime,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, tag, None)?;
    // SAFETY: the caller's message and status.
    unsafe {
        run::probe(
            rt,
            target,
            Poll::UntilFound,
            Probe::Remove,
            std::ptr::null_mut(),
            message,
            status,
        )
    }
}

pub unsafe fn improbe(
    rt: &'static Runtime,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> Result {
    let target = target(rt, comm, source, tag, None)?;
    // SAFETY: the caller's flag, message and status.
    unsafe { run::probe(rt, target, Poll::Once, Probe::Remove, flag, message, status) }
}
