//! Point-to-point calls. The `_c` (MPI_Count) forms exist where the MPI has them.

use super::{intercept, nonblocking_then_wait};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

macro_rules! blocking_send {
    ($name:ident, $pmpi:ident, $nonblocking:ident, $count:ty) => {
        intercept!(fn $name(buf: *const c_void, count: $count, datatype: MPI_Datatype, dest: c_int,
                tag: c_int, comm: MPI_Comm) via $pmpi, |rt| {
            if rt.needs_progress() {
                nonblocking_then_wait(rt, |r| $nonblocking(buf, count, datatype, dest, tag, comm, r))
            } else {
                $pmpi(buf, count, datatype, dest, tag, comm)
            }
        });
    };
}

macro_rules! receives {
    ($count:ty, $recv:ident, $precv:ident, $irecv:ident, $pirecv:ident, $init:ident, $pinit:ident,
     $sendrecv:ident, $psendrecv:ident, $pisend:ident) => {
        intercept!(fn $recv(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, status: *mut MPI_Status) via $precv, |rt| {
            match rt.target(comm, source, tag, Some((count as Count, datatype))) {
                Ok(target) => rt.recv(buf, count as Count, datatype, target, status),
                Err(err) => err,
            }
        });

        intercept!(fn $irecv(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) via $pirecv, |rt| {
            match rt.target(comm, source, tag, Some((count as Count, datatype))) {
                Ok(target) => rt.irecv(buf, count as Count, datatype, target, request),
                Err(err) => err,
            }
        });

        intercept!(fn $init(buf: *mut c_void, count: $count, datatype: MPI_Datatype, source: c_int,
                tag: c_int, comm: MPI_Comm, request: *mut MPI_Request) via $pinit, |rt| {
            match rt.target(comm, source, tag, Some((count as Count, datatype))) {
                Ok(target) => rt.recv_init(buf, count as Count, datatype, target, request),
                Err(err) => err,
            }
        });

        intercept!(fn $sendrecv(sendbuf: *const c_void, sendcount: $count, sendtype: MPI_Datatype,
                dest: c_int, sendtag: c_int, recvbuf: *mut c_void, recvcount: $count,
                recvtype: MPI_Datatype, source: c_int, recvtag: c_int, comm: MPI_Comm,
                status: *mut MPI_Status) via $psendrecv, |rt| {
            let target = match rt.target(comm, source, recvtag, Some((recvcount as Count, recvtype))) {
                Ok(target) => target,
                Err(err) => return err,
            };
            let mut send = abi().request_null;
            let err = $pisend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &mut send);
            if err != abi().success {
                return err;
            }
            let recv_err = rt.recv(recvbuf, recvcount as Count, recvtype, target, status);
            let send_err = rt.wait(&mut send, abi().status_ignore);
            if recv_err != abi().success { recv_err } else { send_err }
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
    PMPI_Isend
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
        PMPI_Isend_c
    );
}

intercept!(fn MPI_Sendrecv_replace(buf: *mut c_void, count: c_int, datatype: MPI_Datatype,
        dest: c_int, sendtag: c_int, source: c_int, recvtag: c_int, comm: MPI_Comm,
        status: *mut MPI_Status) via PMPI_Sendrecv_replace, |rt| {
    let target = match rt.target(comm, source, recvtag, Some((count as Count, datatype))) {
        Ok(target) => target,
        Err(err) => return err,
    };
    // The outgoing data is packed first so the receive can land in the same buffer.
    let mut size = 0;
    let err = PMPI_Pack_size(count, datatype, comm, &mut size);
    if err != abi().success {
        return err;
    }
    let mut packed = vec![0u8; size.max(0) as usize];
    let mut position = 0;
    let err = PMPI_Pack(buf, count, datatype, packed.as_mut_ptr().cast(), size, &mut position, comm);
    if err != abi().success {
        return err;
    }
    let mut send = abi().request_null;
    let err = PMPI_Isend(packed.as_ptr().cast(), position, abi().packed, dest, sendtag, comm, &mut send);
    if err != abi().success {
        return err;
    }
    let recv_err = rt.recv(buf, count as Count, datatype, target, status);
    let send_err = rt.wait(&mut send, abi().status_ignore);
    if recv_err != abi().success { recv_err } else { send_err }
});

intercept!(fn MPI_Probe(source: c_int, tag: c_int, comm: MPI_Comm, status: *mut MPI_Status)
via PMPI_Probe, |rt| match rt.target(comm, source, tag, None) {
    Ok(target) => rt.probe(target, true, false, std::ptr::null_mut(), std::ptr::null_mut(), status),
    Err(err) => err,
});

intercept!(fn MPI_Iprobe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int,
    status: *mut MPI_Status)
via PMPI_Iprobe, |rt| match rt.target(comm, source, tag, None) {
    Ok(target) => rt.probe(target, false, false, flag, std::ptr::null_mut(), status),
    Err(err) => err,
});

intercept!(fn MPI_Mprobe(source: c_int, tag: c_int, comm: MPI_Comm, message: *mut MPI_Message,
    status: *mut MPI_Status)
via PMPI_Mprobe, |rt| match rt.target(comm, source, tag, None) {
    Ok(target) => rt.probe(target, true, true, std::ptr::null_mut(), message, status),
    Err(err) => err,
});

intercept!(fn MPI_Improbe(source: c_int, tag: c_int, comm: MPI_Comm, flag: *mut c_int,
    message: *mut MPI_Message, status: *mut MPI_Status)
via PMPI_Improbe, |rt| match rt.target(comm, source, tag, None) {
    Ok(target) => rt.probe(target, false, true, flag, message, status),
    Err(err) => err,
});
