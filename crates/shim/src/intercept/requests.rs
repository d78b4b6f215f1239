//! Completion and request handlers. A call that touches none of the shim's requests, while
//! nothing waits for the shim's progress, goes to MPI as it is (its `plain` test in
//! `calls.list`); with statuses only where MPI fills them as the standard says
//! (single-completion calls), since MPICH writes `MPI_ERROR` in the statuses of the others.

use crate::mpi::{abi, Code, MPI_Request, MPI_Status};
use crate::runtime::{Error, Runtime};
use std::os::raw::c_int;

type Result = std::result::Result<Code, Error>;

pub unsafe fn wait(
    rt: &'static Runtime,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.wait(request, status) }
}

pub unsafe fn test(
    rt: &'static Runtime,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.test(request, flag, status) }
}

pub unsafe fn waitall(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.all(count, requests, std::ptr::null_mut(), statuses, true) }
}

pub unsafe fn testall(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.all(count, requests, flag, statuses, false) }
}

pub unsafe fn waitany(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.any(count, requests, index, std::ptr::null_mut(), status, true) }
}

pub unsafe fn testany(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.any(count, requests, index, flag, status, false) }
}

pub unsafe fn waitsome(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.some(count, requests, outcount, indices, statuses, true) }
}

pub unsafe fn testsome(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.some(count, requests, outcount, indices, statuses, false) }
}

pub unsafe fn request_get_status(
    rt: &'static Runtime,
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { rt.request_get_status(request, flag, status) }
}

pub unsafe fn request_free(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { rt.request_free(request) }
}

pub unsafe fn cancel(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { rt.cancel_request(request) }
}

pub unsafe fn start(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { rt.start(request) }
}

pub unsafe fn startall(rt: &'static Runtime, count: c_int, requests: *mut MPI_Request) -> Result {
    let mut first = Ok(abi().success);
    for i in 0..count.max(0) as usize {
        // SAFETY: the caller's `count` requests.
        let started = unsafe { rt.start(requests.add(i)) };
        if first == Ok(abi().success) {
            first = started;
        }
    }
    first
}
