//! Completion and request handlers. A call that touches none of the shim's requests, while
//! nothing waits for the shim's progress, goes to MPI as it is (its `plain` test in
//! `calls.list`; `Testany` then writes the empty status MPI defines where MPICH's does not).
//! One whose only such request is a receive MPI holds that the shim follows goes to MPI too
//! (`followed`), which counts the receive out once MPI completed it.

use crate::mpi::{abi, Code, MPI_Request, MPI_Status};
use crate::runtime::complete::{self, How};
use crate::runtime::p2p;
use crate::runtime::{Error, Runtime};
use std::os::raw::c_int;

type Result = std::result::Result<Code, Error>;

pub unsafe fn wait(
    rt: &'static Runtime,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { complete::wait(rt, request, status) }
}

pub unsafe fn test(
    rt: &'static Runtime,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { complete::test(rt, request, flag, status) }
}

pub unsafe fn waitall(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe {
        complete::all(
            rt,
            count,
            requests,
            std::ptr::null_mut(),
            statuses,
            How::Wait,
        )
    }
}

pub unsafe fn testall(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { complete::all(rt, count, requests, flag, statuses, How::Test) }
}

pub unsafe fn waitany(
    rt: &'static Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe {
        complete::any(
            rt,
            count,
            requests,
            index,
            std::ptr::null_mut(),
            status,
            How::Wait,
        )
    }
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
    unsafe { complete::any(rt, count, requests, index, flag, status, How::Test) }
}

/// `MPI_Testany` on MPI's own requests: MPI's call, then, where no request was active, the
/// empty status MPI defines (MPICH's own leaves it unwritten; Open MPI's writes it, and its
/// call is then MPI's alone, reached with a jump).
///
/// # Safety
/// The arguments are the caller's, as `MPI_Testany` requires them.
#[inline]
pub unsafe fn testany_mpi(
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Code {
    // SAFETY: as the caller promises.
    unsafe {
        let code = crate::mpi::user::testany(count, requests, index, flag, status);
        if cfg!(mpich) {
            complete::none_active(*flag, *index, status);
        }
        code
    }
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
    unsafe { complete::some(rt, count, requests, outcount, indices, statuses, How::Wait) }
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
    unsafe { complete::some(rt, count, requests, outcount, indices, statuses, How::Test) }
}

pub unsafe fn request_get_status(
    rt: &'static Runtime,
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result {
    // SAFETY: the caller's arguments.
    unsafe { complete::request_get_status(rt, request, flag, status) }
}

pub unsafe fn request_free(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { complete::request_free(rt, request) }
}

pub unsafe fn cancel(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { complete::cancel_request(rt, request) }
}

pub unsafe fn start(rt: &'static Runtime, request: *mut MPI_Request) -> Result {
    // SAFETY: the caller's request.
    unsafe { p2p::start(rt, request) }
}

pub unsafe fn startall(rt: &'static Runtime, count: c_int, requests: *mut MPI_Request) -> Result {
    let mut first = Ok(abi().success);
    for i in 0..count.max(0) as usize {
        // SAFETY: the caller's `count` requests.
        let started = unsafe { p2p::start(rt, requests.add(i)) };
        if first == Ok(abi().success) {
            first = started;
        }
    }
    first
}
