//! The wait/test family over a mix of MPI's requests and the shim's.
//!
//! Requests MPI completes (its own, delegated receives, persistent receives MPI started) are
//! checked with non-blocking PMPI calls on a copy of the array in which the shim's operations
//! are `MPI_REQUEST_NULL`, so MPI keeps its own rules for null and inactive handles. Nothing
//! blocks inside MPI while anything needs the shim's progress. Single-completion calls leave
//! `MPI_ERROR` alone; the multiple-completion ones set it in every status only when they
//! return `MPI_ERR_IN_STATUS`, as MPI does.
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]
#![allow(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

use super::request::{Operation, Request};
use super::{Error, Runtime};
use crate::mpi::{
    self, abi, empty_status, store_status, store_status_with_error, Code, MPI_Request, MPI_Status,
};
use std::os::raw::c_int;
use std::sync::Arc;

/// Whether a completion call waits or tests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum How {
    Wait,
    Test,
}

/// Runs a multiple-completion call of MPI's on `statuses[..n]` and puts back the `MPI_ERROR`
/// fields it wrote unless it returned `MPI_ERR_IN_STATUS` (MPICH and Open MPI write them on
/// success too).
unsafe fn keeping_errors(statuses: *mut MPI_Status, n: usize, call: impl FnOnce() -> Code) -> Code {
    if statuses == abi().statuses_ignore || statuses.is_null() {
        return call();
    }
    let errors: Vec<c_int> = (0..n).map(|i| (*statuses.add(i)).MPI_ERROR).collect();
    let code = call();
    if code != abi().err_in_status {
        for (i, &error) in errors.iter().enumerate() {
            (*statuses.add(i)).MPI_ERROR = error;
        }
    }
    code
}

/// `statuses[i]`, or `MPI_STATUS_IGNORE` when the user ignores statuses.
unsafe fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if statuses == abi().statuses_ignore || statuses.is_null() {
        abi().status_ignore
    } else {
        statuses.add(i)
    }
}

/// One entry of a request array, as the calls below see it.
enum Entry {
    /// MPI completes it (perhaps a request the shim counts).
    Mpi(Option<Request>),
    /// The shim completes it.
    Shim(Request, Arc<dyn Operation>),
}

/// A request array as a completion call over several requests sees it.
enum Split {
    /// No operation of the shim's is among them and nothing needs the shim's progress: MPI's
    /// call serves, and the requests the shim counts (delegated receives, with their positions)
    /// are accounted for after it.
    Mpi(Vec<(usize, Request)>),
    /// Each request's entry, and the array MPI is asked about (the shim's operations null).
    Mixed(Vec<Entry>, Vec<MPI_Request>),
}

impl Entry {
    fn of(request: Option<Request>) -> Entry {
        match request {
            Some(r) => match r.shim_op() {
                Some(op) => Entry::Shim(r, op),
                None => Entry::Mpi(Some(r)),
            },
            None => Entry::Mpi(None),
        }
    }

    fn shim(&self) -> Option<&Arc<dyn Operation>> {
        match self {
            Entry::Shim(_, op) => Some(op),
            Entry::Mpi(_) => None,
        }
    }
}

/// Bookkeeping once MPI completed a request the shim knows (it is gone from MPI now).
fn completed_by_mpi(rt: &Runtime, handle: MPI_Request, known: &Option<Request>) {
    if let Some(request) = known {
        if matches!(request, Request::Delegated(_)) {
            rt.requests.remove(handle);
        }
        request.completed_in_mpi();
    }
}

/// Releases a done operation of the shim's: a generalized request is freed, a persistent
/// receive becomes inactive. The outcome's status goes to `status` (without `MPI_ERROR`);
/// returns its code.
unsafe fn release(
    rt: &Runtime,
    handle: &mut MPI_Request,
    entry: &Request,
    op: &Arc<dyn Operation>,
) -> (MPI_Status, Code) {
    let outcome = op.completion().outcome();
    match entry {
        Request::Persistent(p) => {
            p.current.lock().take();
        }
        _ => {
            rt.requests.remove(*handle);
            // The generalized request is complete; MPI frees it.
            mpi::wait(handle);
            *handle = abi().request_null;
        }
    }
    outcome.map_or_else(
        || (empty_status(abi().any_source), abi().success),
        |o| (o.status, o.err),
    )
}

/// Raises a failed operation's code through its communicator.
fn failed(rt: &Runtime, op: &Arc<dyn Operation>, code: Code) -> Result<Code, Error> {
    if code == abi().success {
        Ok(code)
    } else {
        Err(rt.raise(op.focus().handle, code))
    }
}

/// Sorts a request array for a completion call over several requests.
fn split(rt: &Runtime, requests: &[MPI_Request]) -> Split {
    let known = rt.requests.known_in(requests);
    if !rt.needs_progress()
        && known
            .iter()
            .all(|(_, r)| matches!(r, Request::Delegated(_)))
    {
        return Split::Mpi(known);
    }
    let mut entries: Vec<Entry> = requests.iter().map(|_| Entry::Mpi(None)).collect();
    for (i, request) in known {
        entries[i] = Entry::of(Some(request));
    }
    let view = requests
        .iter()
        .zip(&entries)
        .map(|(&r, e)| {
            if e.shim().is_some() {
                abi().request_null
            } else {
                r
            }
        })
        .collect();
    Split::Mixed(entries, view)
}

/// Runs MPI's own completion call on the user's array, then accounts for the delegated
/// receives among `known` that it completed (MPI sets a completed request's handle to
/// `MPI_REQUEST_NULL`).
unsafe fn through_mpi(
    rt: &Runtime,
    requests: *mut MPI_Request,
    known: Vec<(usize, Request)>,
    call: impl FnOnce() -> Code,
) -> Code {
    let before: Vec<MPI_Request> = known.iter().map(|&(i, _)| *requests.add(i)).collect();
    let code = call();
    for ((i, request), handle) in known.into_iter().zip(before) {
        if *requests.add(i) != handle {
            completed_by_mpi(rt, handle, &Some(request));
        }
    }
    code
}

pub unsafe fn wait(
    rt: &Runtime,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    match Entry::of(rt.requests.get(*request)) {
        Entry::Mpi(known) => {
            let handle = *request;
            let code = if !rt.needs_progress() {
                mpi::user::wait(request, status)
            } else {
                let mut code = abi().success;
                rt.wait_until(known.as_ref().map(Request::focus), || {
                    let mut flag = 0;
                    code = mpi::user::test(request, &mut flag, status);
                    flag != 0 || code != abi().success
                });
                code
            };
            completed_by_mpi(rt, handle, &known);
            Ok(code)
        }
        Entry::Shim(entry, op) => {
            rt.wait_until(Some(op.focus()), || op.poll());
            let (result, code) = release(rt, &mut *request, &entry, &op);
            store_status(status, &result);
            failed(rt, &op, code)
        }
    }
}

pub unsafe fn test(
    rt: &Runtime,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    match Entry::of(rt.requests.get(*request)) {
        Entry::Mpi(known) => {
            rt.progress(known.as_ref().map(Request::focus));
            let handle = *request;
            let code = mpi::user::test(request, flag, status);
            if *flag != 0 {
                completed_by_mpi(rt, handle, &known);
            }
            Ok(code)
        }
        Entry::Shim(entry, op) => {
            rt.progress(Some(op.focus()));
            *flag = op.poll() as c_int;
            if *flag == 0 {
                return Ok(abi().success);
            }
            let (result, code) = release(rt, &mut *request, &entry, &op);
            store_status(status, &result);
            failed(rt, &op, code)
        }
    }
}

pub unsafe fn request_get_status(
    rt: &Runtime,
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    match Entry::of(rt.requests.get(request)) {
        Entry::Mpi(known) => {
            rt.progress(known.as_ref().map(Request::focus));
            Ok(mpi::user::request_get_status(request, flag, status))
        }
        Entry::Shim(_, op) => {
            rt.progress(Some(op.focus()));
            *flag = op.poll() as c_int;
            if *flag != 0 {
                let outcome = op.completion().outcome();
                if let Some(o) = outcome {
                    store_status(status, &o.status);
                }
            }
            Ok(abi().success)
        }
    }
}

/// `Waitall` and `Testall`.
pub unsafe fn all(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    let blocking = how == How::Wait;
    let n = count.max(0) as usize;
    let reqs = std::slice::from_raw_parts_mut(requests, n);
    let (entries, mut view) = match split(rt, reqs) {
        Split::Mixed(entries, view) => (entries, view),
        Split::Mpi(known) => {
            return Ok(through_mpi(rt, requests, known, || {
                keeping_errors(statuses, n, || {
                    if blocking {
                        mpi::user::waitall(count, requests, statuses)
                    } else {
                        mpi::user::testall(count, requests, flag, statuses)
                    }
                })
            }))
        }
    };
    let mut done = 0;
    let mut mpi_code = abi().success;
    // Operations stay done once done: each round resumes at the first one that was not.
    let mut unfinished = 0;
    let mut check = || {
        rt.progress(None);
        match entries[unfinished..]
            .iter()
            .position(|e| e.shim().is_some_and(|op| !op.poll()))
        {
            Some(i) => {
                unfinished += i;
                return false;
            }
            None => unfinished = entries.len(),
        }
        mpi_code = keeping_errors(statuses, n, || {
            mpi::user::testall(count, view.as_mut_ptr(), &mut done, statuses)
        });
        done != 0 || (mpi_code != abi().success && mpi_code != abi().err_in_status)
    };
    if blocking {
        rt.wait_until(None, check);
    } else if !check() {
        *flag = 0;
        return Ok(abi().success);
    }
    if done == 0 {
        return Ok(mpi_code);
    }
    let mut results = Vec::with_capacity(n);
    let mut any_failed = mpi_code == abi().err_in_status;
    let mut failed_comm = abi().comm_world;
    for (i, entry) in entries.iter().enumerate() {
        match entry {
            Entry::Mpi(known) => {
                completed_by_mpi(rt, reqs[i], known);
                reqs[i] = view[i];
                results.push(None);
            }
            Entry::Shim(entry, op) => {
                let (status, code) = release(rt, &mut reqs[i], entry, op);
                if code != abi().success {
                    any_failed = true;
                    failed_comm = op.focus().handle;
                }
                results.push(Some((status, code)));
            }
        }
    }
    for (i, result) in results.into_iter().enumerate() {
        let Some((status, code)) = result else {
            continue;
        };
        let out = status_at(statuses, i);
        if any_failed {
            store_status_with_error(out, &status, code);
        } else {
            store_status(out, &status);
        }
    }
    if !blocking {
        *flag = 1;
    }
    if any_failed {
        if mpi_code != abi().err_in_status {
            // MPI's own entries succeeded: their statuses carry MPI_SUCCESS, as MPI would.
            for (i, entry) in entries.iter().enumerate() {
                let out = status_at(statuses, i);
                if matches!(entry, Entry::Mpi(_)) && !mpi::ignored(out) {
                    (*out).MPI_ERROR = abi().success;
                }
            }
        }
        return Err(rt.raise(failed_comm, abi().err_in_status));
    }
    Ok(abi().success)
}

/// `Waitany` and `Testany`.
pub unsafe fn any(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    let blocking = how == How::Wait;
    let n = count.max(0) as usize;
    let reqs = std::slice::from_raw_parts_mut(requests, n);
    let (entries, mut view) = match split(rt, reqs) {
        Split::Mixed(entries, view) => (entries, view),
        Split::Mpi(known) => {
            return Ok(through_mpi(rt, requests, known, || {
                if blocking {
                    mpi::user::waitany(count, requests, index, status)
                } else {
                    mpi::user::testany(count, requests, index, flag, status)
                }
            }))
        }
    };
    let mut outcome: Option<(c_int, Result<Code, Error>)> = None;
    let mut check = || {
        rt.progress(None);
        if let Some(i) = entries
            .iter()
            .position(|e| e.shim().is_some_and(|op| op.poll()))
        {
            let Entry::Shim(entry, op) = &entries[i] else {
                unreachable!()
            };
            let (result, code) = release(rt, &mut reqs[i], entry, op);
            store_status(status, &result);
            outcome = Some((i as c_int, failed(rt, op, code)));
            return true;
        }
        let (mut idx, mut mpi_flag) = (abi().undefined, 0);
        let code = mpi::user::testany(count, view.as_mut_ptr(), &mut idx, &mut mpi_flag, status);
        if code != abi().success || (mpi_flag != 0 && idx != abi().undefined) {
            if idx != abi().undefined {
                let i = idx as usize;
                if let Entry::Mpi(known) = &entries[i] {
                    completed_by_mpi(rt, reqs[i], known);
                }
                reqs[i] = view[i];
            }
            outcome = Some((idx, Ok(code)));
            return true;
        }
        // Nothing active left anywhere: MPI says so for its part, and the shim has none.
        if mpi_flag != 0 && entries.iter().all(|e| e.shim().is_none()) {
            store_status(status, &empty_status(abi().any_source));
            outcome = Some((abi().undefined, Ok(abi().success)));
            return true;
        }
        false
    };
    if blocking {
        rt.wait_until(None, check);
    } else if !check() {
        *flag = 0;
        *index = abi().undefined;
        return Ok(abi().success);
    }
    let (idx, result) = outcome.expect("completed");
    *index = idx;
    if !blocking {
        *flag = 1;
    }
    result
}

/// `Waitsome` and `Testsome`.
pub unsafe fn some(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    let blocking = how == How::Wait;
    let n = count.max(0) as usize;
    let reqs = std::slice::from_raw_parts_mut(requests, n);
    let (entries, mut view) = match split(rt, reqs) {
        Split::Mixed(entries, view) => (entries, view),
        Split::Mpi(known) => {
            return Ok(through_mpi(rt, requests, known, || {
                keeping_errors(statuses, n, || {
                    if blocking {
                        mpi::user::waitsome(count, requests, outcount, indices, statuses)
                    } else {
                        mpi::user::testsome(count, requests, outcount, indices, statuses)
                    }
                })
            }))
        }
    };
    let mut mpi_indices = vec![0 as c_int; n];
    let mut mpi_statuses = vec![mpi::zeroed_status(); n];
    let ignore = statuses == abi().statuses_ignore || statuses.is_null();
    let mut result = Ok(abi().success);
    let mut total: c_int = 0;
    let mut check = || {
        rt.progress(None);
        let mut mpi_out = 0;
        let mpi_status_ptr = if ignore {
            abi().statuses_ignore
        } else {
            mpi_statuses.as_mut_ptr()
        };
        let code = mpi::user::testsome(
            count,
            view.as_mut_ptr(),
            &mut mpi_out,
            mpi_indices.as_mut_ptr(),
            mpi_status_ptr,
        );
        if code != abi().success && code != abi().err_in_status {
            result = Ok(code);
            return true;
        }
        let shim_active = entries.iter().any(|e| e.shim().is_some());
        if mpi_out == abi().undefined && !shim_active {
            total = abi().undefined;
            return true;
        }
        // (index, status, code) of every request that completed this round.
        let mut completed: Vec<(usize, MPI_Status, Code)> = Vec::new();
        for j in 0..mpi_out.max(0) as usize {
            let i = mpi_indices[j] as usize;
            if let Entry::Mpi(known) = &entries[i] {
                completed_by_mpi(rt, reqs[i], known);
            }
            reqs[i] = view[i];
            let status = mpi_statuses[j];
            completed.push((i, status, status.MPI_ERROR));
        }
        let mut in_status = code == abi().err_in_status;
        let mut failed_comm = abi().comm_world;
        for (i, entry) in entries.iter().enumerate() {
            let Entry::Shim(entry, op) = entry else {
                continue;
            };
            if reqs[i] == abi().request_null || !op.poll() {
                continue;
            }
            let (status, code) = release(rt, &mut reqs[i], entry, op);
            if code != abi().success {
                in_status = true;
                failed_comm = op.focus().handle;
            }
            completed.push((i, status, code));
        }
        for (k, &(i, status, code)) in completed.iter().enumerate() {
            *indices.add(k) = i as c_int;
            if !ignore {
                let out = statuses.add(k);
                if in_status {
                    store_status_with_error(out, &status, code);
                } else {
                    store_status(out, &status);
                }
            }
        }
        total = completed.len() as c_int;
        if in_status {
            result = Err(rt.raise(failed_comm, abi().err_in_status));
        }
        total > 0
    };
    if blocking {
        rt.wait_until(None, check);
    } else {
        check();
    }
    *outcount = total;
    result
}

pub unsafe fn request_free(rt: &Runtime, request: *mut MPI_Request) -> Result<Code, Error> {
    if let Some(known) = rt.requests.get(*request) {
        // A receive goes on in the background; MPI frees the handle once it completes.
        rt.requests.remove(*request);
        if let Request::Persistent(p) = &known {
            p.current.lock().take();
        }
        known.completed_in_mpi();
    }
    Ok(mpi::request_free(&mut *request))
}

pub unsafe fn cancel_request(rt: &Runtime, request: *mut MPI_Request) -> Result<Code, Error> {
    match Entry::of(rt.requests.get(*request)) {
        Entry::Mpi(_) => Ok(mpi::cancel(&mut *request)),
        Entry::Shim(_, op) => {
            op.cancel();
            Ok(abi().success)
        }
    }
}
