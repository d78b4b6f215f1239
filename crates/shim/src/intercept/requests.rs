//! Completion and request calls. One that touches none of the shim's requests, while nothing
//! waits for the shim's progress, goes to MPI as it is (`Testany` only with its status
//! ignored: the shim writes the empty status MPI defines where MPICH's `Testany` does not).

use super::intercept;
use crate::ffi::*;
use crate::mpi::abi;
use std::os::raw::c_int;

intercept!(fn MPI_Wait(request: *mut MPI_Request, status: *mut MPI_Status) via PMPI_Wait,
    plain |rt| rt.plainly_completed(*request), |rt| rt.wait(request, status));

intercept!(fn MPI_Test(request: *mut MPI_Request, flag: *mut c_int, status: *mut MPI_Status)
    via PMPI_Test, plain |rt| rt.plainly_completed(*request), |rt| rt.test(request, flag, status));

intercept!(fn MPI_Waitall(count: c_int, requests: *mut MPI_Request, statuses: *mut MPI_Status)
    via PMPI_Waitall, plain |rt| rt.plainly_completed_all(count, requests),
    |rt| rt.all(count, requests, std::ptr::null_mut(), statuses, true));

intercept!(fn MPI_Testall(count: c_int, requests: *mut MPI_Request, flag: *mut c_int,
        statuses: *mut MPI_Status)
    via PMPI_Testall, plain |rt| rt.plainly_completed_all(count, requests),
    |rt| rt.all(count, requests, flag, statuses, false));

intercept!(fn MPI_Waitany(count: c_int, requests: *mut MPI_Request, index: *mut c_int,
        status: *mut MPI_Status)
    via PMPI_Waitany, plain |rt| rt.plainly_completed_all(count, requests),
    |rt| rt.any(count, requests, index, std::ptr::null_mut(), status, true));

intercept!(fn MPI_Testany(count: c_int, requests: *mut MPI_Request, index: *mut c_int,
        flag: *mut c_int, status: *mut MPI_Status)
    via PMPI_Testany, plain |rt| status == abi().status_ignore && rt.plainly_completed_all(count, requests),
    |rt| rt.any(count, requests, index, flag, status, false));

intercept!(fn MPI_Waitsome(incount: c_int, requests: *mut MPI_Request, outcount: *mut c_int,
        indices: *mut c_int, statuses: *mut MPI_Status)
    via PMPI_Waitsome, plain |rt| rt.plainly_completed_all(incount, requests),
    |rt| rt.some(incount, requests, outcount, indices, statuses, true));

intercept!(fn MPI_Testsome(incount: c_int, requests: *mut MPI_Request, outcount: *mut c_int,
        indices: *mut c_int, statuses: *mut MPI_Status)
    via PMPI_Testsome, plain |rt| rt.plainly_completed_all(incount, requests),
    |rt| rt.some(incount, requests, outcount, indices, statuses, false));

intercept!(fn MPI_Request_get_status(request: MPI_Request, flag: *mut c_int,
        status: *mut MPI_Status)
    via PMPI_Request_get_status, |rt| rt.request_get_status(request, flag, status));

intercept!(fn MPI_Request_free(request: *mut MPI_Request) via PMPI_Request_free,
    |rt| rt.request_free(request));

intercept!(fn MPI_Cancel(request: *mut MPI_Request) via PMPI_Cancel,
    |rt| rt.cancel_request(request));

intercept!(fn MPI_Start(request: *mut MPI_Request) via PMPI_Start, |rt| rt.start(request));

intercept!(fn MPI_Startall(count: c_int, requests: *mut MPI_Request) via PMPI_Startall, |rt| {
    let mut first = Ok(abi().success);
    for i in 0..count.max(0) as usize {
        let started = rt.start(requests.add(i));
        if first == Ok(abi().success) {
            first = started;
        }
    }
    first
});
