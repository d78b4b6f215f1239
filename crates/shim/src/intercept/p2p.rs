//! Point-to-point calls. The `_c` (MPI_Count) forms and MPI-4's `Isendrecv` family exist where
//! the MPI has them.

use super::{intercept, nonblocking_then_wait};
use crate::ffi::*;
use crate::mpi::{self, abi};
use crate::runtime::p2p::{Buffer, PlainCall};
use std::os::raw::{c_int, c_void};

macro_rules! blocking_send {
    ($name:ident, $pmpi:ident, $nonblocking:ident, $count:ty) => {
        intercept!(fn $name(buf: *const c_void, count: $count, datatype: MPI_Datatype, dest: c_int,
                tag: c_int, comm: MPI_Comm) via $pmpi, plain |rt| !rt.needs_progress(), |rt| {
            nonblocking_then_wait(rt, |r| $nonblocking(buf, count, datatype, dest, tag, comm, r))
        });
    };
}

macro_rules! receives {
    ($count:ty, $recv:ident, $precv:ident, $irecv:ident, $pirecv:ident, $init:ident, $pinit:ident,
     $sendrecv:ident, $psendrecv:ident, $replace:ident, $preplace:ident) => {
        intercept!(fn $recv(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) via $precv,
                plain |rt| rt.plainly_delegated(comm, source, PlainCall::Recv), |rt| {
            let target = rt.target(comm, source, tag, Some((count as Count, datatype)))?;
            rt.recv(Buffer { ptr: buf, count: count as Count, datatype }, target, status)
        });

        intercept!(fn $irecv(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) via $pirecv,
                plain |rt| rt.plainly_delegated(comm, source, PlainCall::Irecv), |rt| {
            let target = rt.target(comm, source, tag, Some((count as Count, datatype)))?;
            rt.irecv(Buffer { ptr: buf, count: count as Count, datatype }, target, request)
        });

        intercept!(fn $init(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) via $pinit, |rt| {
            let target = rt.target(comm, source, tag, Some((count as Count, datatype)))?;
            rt.recv_init(Buffer { ptr: buf, count: count as Count, datatype }, target, request)
        });

        intercept!(fn $sendrecv(sendbuf: *const c_void, sendcount: $count, sendtype: MPI_Datatype,
                dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: $count,
                recvtype: MPI_Datatype, source: c_int, recvtag: c_int, comm: MPI_Comm,
                status: *mut MPI_Status) via $psendrecv, |rt| {
            let target = rt.target(comm, source, recvtag, Some((recvcount as Count, recvtype)))?;
            let send = || mpi::isend(sendbuf, sendcount as Count, sendtype, dest, sendtag, comm);
            let buf = Buffer { ptr: recvbuf, count: recvcount as Count, datatype: recvtype };
            rt.sendrecv(send, buf, target, status)
        });

        // The outgoing data is packed first so the receive can land in the same buffer.
        intercept!(fn $replace(buf: *mut c_void, count: $count, datatype: MPI_Datatype,
                dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: MPI_Comm,
                status: *mut MPI_Status) via $preplace, |rt| {
            let target = rt.target(comm, source, recvtag, Some((count as Count, datatype)))?;
            let packed = match mpi::packed_copy(buf, count as Count, datatype, comm) {
                Ok(packed) => packed,
                Err(code) => return Ok(code),
            };
            let send = || {
                mpi::isend(packed.as_ptr().cast(), packed.len() as Count, abi().packed, dest,
                    sendtag, comm)
            };
            rt.sendrecv(send, Buffer { ptr: buf, count: count as Count, datatype }, target, status)
        });
    };
}

blocking_send!(MPI_Send, PMPI_Send, PMPI_Isend, c_int);
blocking_send!(MPI_Ssend, PMPI_Ssend, PMPI_Issend, c_int);
blocking_send!(MPI_Rsend, PMPI_Rsend, PMPI_Irsend, c_int);
receives!(
    c_int,
    MPI_Recv,
    PMPI_Recv,
    MPI_Irecv,
    PMPI_Irecv,
    MPI_Recv_init,
    PMPI_Recv_init,
    MPI_Sendrecv,
    PMPI_Sendrecv,
    MPI_Sendrecv_replace,
    PMPI_Sendrecv_replace
);

#[cfg(large_count)]
mod large_count {
    use super::*;
    blocking_send!(MPI_Send_c, PMPI_Send_c, PMPI_Isend_c, Count);
    blocking_send!(MPI_Ssend_c, PMPI_Ssend_c, PMPI_Issend_c, Count);
    blocking_send!(MPI_Rsend_c, PMPI_Rsend_c, PMPI_Irsend_c, Count);
    receives!(
        Count,
        MPI_Recv_c,
        PMPI_Recv_c,
        MPI_Irecv_c,
        PMPI_Irecv_c,
        MPI_Recv_init_c,
        PMPI_Recv_init_c,
        MPI_Sendrecv_c,
        PMPI_Sendrecv_c,
        MPI_Sendrecv_replace_c,
        PMPI_Sendrecv_replace_c
    );
}

/// MPI-4's nonblocking send-receive: the receive half goes through the shim like any receive.
#[cfg(mpi4)]
mod isendrecv {
    use super::*;

    macro_rules! isendrecv {
        ($count:ty, $isendrecv:ident, $pisendrecv:ident, $replace:ident, $preplace:ident) => {
            intercept!(fn $isendrecv(sendbuf: *const c_void, sendcount: $count,
                    sendtype: MPI_Datatype, dest: c_int, sendtag: c_int, recvbuf: *mut c_void,
                    recvcount: $count, recvtype: MPI_Datatype, source: c_int, recvtag: c_int,
                    comm: MPI_Comm, request: *mut MPI_Request) via $pisendrecv, |rt| {
                let target =
                    rt.target(comm, source, recvtag, Some((recvcount as Count, recvtype)))?;
                let send =
                    || mpi::isend(sendbuf, sendcount as Count, sendtype, dest, sendtag, comm);
                let buf = Buffer { ptr: recvbuf, count: recvcount as Count, datatype: recvtype };
                rt.isendrecv(send, buf, target, Vec::new(), request)
            });

            intercept!(fn $replace(buf: *mut c_void, count: $count, datatype: MPI_Datatype,
                    dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: MPI_Comm,
                    request: *mut MPI_Request) via $preplace, |rt| {
                let target = rt.target(comm, source, recvtag, Some((count as Count, datatype)))?;
                let packed = match mpi::packed_copy(buf, count as Count, datatype, comm) {
                    Ok(packed) => packed,
                    Err(code) => return Ok(code),
                };
                let (data, len) = (packed.as_ptr(), packed.len());
                let send = || mpi::isend(data.cast(), len as Count, abi().packed, dest, sendtag, comm);
                let buf = Buffer { ptr: buf, count: count as Count, datatype };
                rt.isendrecv(send, buf, target, packed, request)
            });
        };
    }

    isendrecv!(
        c_int,
        MPI_Isendrecv,
        PMPI_Isendrecv,
        MPI_Isendrecv_replace,
        PMPI_Isendrecv_replace
    );
    isendrecv!(
        Count,
        MPI_Isendrecv_c,
        PMPI_Isendrecv_c,
        MPI_Isendrecv_replace_c,
        PMPI_Isendrecv_replace_c
    );
}

intercept!(fn MPI_Probe(source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status)
via PMPI_Probe, |rt| {
    let target = rt.target(comm, source, tag, None)?;
    rt.probe(target, true, false, std::ptr::null_mut(), std::ptr::null_mut(), status)
});

intercept!(fn MPI_Iprobe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int,
    status: *mut MPI_Status)
via PMPI_Iprobe,
plain |rt| rt.plainly_delegated(comm, source, PlainCall::Iprobe), |rt| {
    let target = rt.target(comm, source, tag, None)?;
    rt.probe(target, false, false, flag, std::ptr::null_mut(), status)
});

intercept!(fn MPI_Mprobe(source: c_int, tag: c_int, comm: MPI_Comm, message: *mut MPI_Message,
    status: *mut MPI_Status)
via PMPI_Mprobe, |rt| {
    let target = rt.target(comm, source, tag, None)?;
    rt.probe(target, true, true, std::ptr::null_mut(), message, status)
});

intercept!(fn MPI_Improbe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int,
    message: *mut MPI_Message, status: *mut MPI_Status)
via PMPI_Improbe,
plain |rt| rt.plainly_delegated(comm, source, PlainCall::Iprobe), |rt| {
    let target = rt.target(comm, source, tag, None)?;
    rt.probe(target, false, true, flag, message, status)
});
