//! The wait/test family over a mix of real MPI requests and requests the shim completes.
//!
//! Real requests are checked with non-blocking PMPI calls on a copy of the array in which the
//! shim's requests are `MPI_REQUEST_NULL`, so MPI keeps its own rules for null and inactive
//! handles. Nothing blocks inside MPI while receives wait for the shim's progress.
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use super::pmpi::{self, empty_status, store_status, zeroed_status};
use super::{Runtime, ShimRequest};
use crate::ffi::*;
use std::os::raw::c_int;
use std::sync::Arc;

impl ShimRequest {
    fn focus(&self) -> &Arc<super::comm::Comm> {
        match self {
            ShimRequest::Recv(op) => &op.comm,
            ShimRequest::Persistent(p) => &p.comm,
            ShimRequest::Collective(op) => &op.comm,
        }
    }

    /// Inactive persistent requests count as absent for `Waitany`/`Waitsome`.
    fn is_active(&self) -> bool {
        match self {
            ShimRequest::Recv(_) | ShimRequest::Collective(_) => true,
            ShimRequest::Persistent(p) => p.current.lock().is_some(),
        }
    }

    fn is_done(&self) -> bool {
        match self {
            ShimRequest::Recv(op) => op.is_done(),
            ShimRequest::Persistent(p) => p.current.lock().as_ref().is_none_or(|op| op.is_done()),
            ShimRequest::Collective(op) => op.is_done(),
        }
    }

    /// The outcome of a done request, without releasing it.
    fn outcome(&self) -> (MPI_Status, c_int) {
        let op = match self {
            ShimRequest::Recv(op) => Some(op.clone()),
            ShimRequest::Persistent(p) => p.current.lock().clone(),
            ShimRequest::Collective(op) => {
                let err = op.result().unwrap_or(abi().success);
                let mut status = empty_status(abi().any_source);
                status.MPI_ERROR = err;
                return (status, err);
            }
        };
        op.and_then(|op| op.result())
            .unwrap_or_else(|| (empty_status(abi().any_source), abi().success))
    }
}

/// `statuses[i]`, or `MPI_STATUS_IGNORE` when the user ignores statuses.
unsafe fn status_at(statuses: *mut MPI_Status, i: usize) -> *mut MPI_Status {
    if statuses == abi().statuses_ignore || statuses.is_null() {
        abi().status_ignore
    } else {
        statuses.add(i)
    }
}

impl Runtime {
    /// Releases a done shim request: a generalized request is freed, a persistent one becomes
    /// inactive. Returns the receive's error code.
    unsafe fn release(
        &self,
        handle: &mut MPI_Request,
        shim: &ShimRequest,
        status: *mut MPI_Status,
    ) -> c_int {
        let (result, err) = shim.outcome();
        match shim {
            ShimRequest::Recv(_) | ShimRequest::Collective(_) => {
                self.unregister(*handle);
                PMPI_Wait(handle, abi().status_ignore);
                *handle = abi().request_null;
            }
            ShimRequest::Persistent(p) => {
                p.current.lock().take();
            }
        }
        store_status(status, &result);
        err
    }

    /// The shim's entries of an array of requests, and a copy of the array with them nulled
    /// for MPI's own wait and test calls; `None` when MPI can take the whole array itself.
    fn split(
        &self,
        requests: &[MPI_Request],
    ) -> Option<(Vec<Option<ShimRequest>>, Vec<MPI_Request>)> {
        let shim = self
            .lookup_all(requests)
            .filter(|shim| shim.iter().any(Option::is_some));
        if shim.is_none() && !self.needs_progress() {
            return None;
        }
        let shim = shim.unwrap_or_else(|| vec![None; requests.len()]);
        let view = requests
            .iter()
            .zip(&shim)
            .map(|(&r, s)| if s.is_some() { abi().request_null } else { r })
            .collect();
        Some((shim, view))
    }

    pub unsafe fn wait(&self, request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
        let Some(shim) = self.lookup(*request) else {
            if !self.needs_progress() {
                return PMPI_Wait(request, status);
            }
            let mut result = abi().success;
            self.wait_until(None, || {
                let mut flag = 0;
                result = PMPI_Test(request, &mut flag, status);
                flag != 0 || result != abi().success
            });
            return result;
        };
        self.wait_until(Some(shim.focus()), || shim.is_done());
        let err = self.release(&mut *request, &shim, status);
        if err != abi().success {
            return pmpi::raise(shim.focus().handle, err);
        }
        err
    }

    pub unsafe fn test(
        &self,
        request: *mut MPI_Request,
        flag: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        let Some(shim) = self.lookup(*request) else {
            self.progress(None);
            return PMPI_Test(request, flag, status);
        };
        self.progress(Some(shim.focus()));
        *flag = shim.is_done() as c_int;
        if *flag == 0 {
            return abi().success;
        }
        let err = self.release(&mut *request, &shim, status);
        if err != abi().success {
            return pmpi::raise(shim.focus().handle, err);
        }
        err
    }

    pub unsafe fn request_get_status(
        &self,
        request: MPI_Request,
        flag: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        let Some(shim) = self.lookup(request) else {
            self.progress(None);
            return PMPI_Request_get_status(request, flag, status);
        };
        self.progress(Some(shim.focus()));
        *flag = shim.is_done() as c_int;
        if *flag != 0 {
            store_status(status, &shim.outcome().0);
        }
        abi().success
    }

    /// `Waitall` (`blocking`) and `Testall`.
    pub unsafe fn all(
        &self,
        count: c_int,
        requests: *mut MPI_Request,
        flag: *mut c_int,
        statuses: *mut MPI_Status,
        blocking: bool,
    ) -> c_int {
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let Some((shim, mut view)) = self.split(reqs) else {
            return if blocking {
                PMPI_Waitall(count, requests, statuses)
            } else {
                PMPI_Testall(count, requests, flag, statuses)
            };
        };
        let mut done = 0;
        let mut real_err = abi().success;
        // Requests stay done once done: each round resumes at the first one that was not.
        let mut unfinished = 0;
        let mut check = || {
            self.progress(None);
            match shim[unfinished..]
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| !s.is_done()))
            {
                Some(i) => {
                    unfinished += i;
                    return false;
                }
                None => unfinished = shim.len(),
            }
            real_err = PMPI_Testall(count, view.as_mut_ptr(), &mut done, statuses);
            done != 0 || (real_err != abi().success && real_err != abi().err_in_status)
        };
        if blocking {
            self.wait_until(None, check);
        } else if !check() {
            *flag = 0;
            return abi().success;
        }
        if done == 0 {
            return real_err;
        }
        let mut any_err = real_err == abi().err_in_status;
        let mut err_comm = abi().comm_world;
        for (i, s) in shim.iter().enumerate() {
            match s {
                None => reqs[i] = view[i],
                Some(s) => {
                    let out = status_at(statuses, i);
                    let err = self.release(&mut reqs[i], s, out);
                    if out != abi().status_ignore {
                        (*out).MPI_ERROR = err;
                    }
                    if err != abi().success {
                        any_err = true;
                        err_comm = s.focus().handle;
                    }
                }
            }
        }
        if !blocking {
            *flag = 1;
        }
        if any_err {
            return pmpi::raise(err_comm, abi().err_in_status);
        }
        abi().success
    }

    /// `Waitany` (`blocking`) and `Testany`.
    pub unsafe fn any(
        &self,
        count: c_int,
        requests: *mut MPI_Request,
        index: *mut c_int,
        flag: *mut c_int,
        status: *mut MPI_Status,
        blocking: bool,
    ) -> c_int {
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let Some((shim, mut view)) = self.split(reqs) else {
            return if blocking {
                PMPI_Waitany(count, requests, index, status)
            } else {
                PMPI_Testany(count, requests, index, flag, status)
            };
        };
        let mut outcome: Option<(c_int, c_int)> = None;
        let mut check = || {
            self.progress(None);
            if let Some(i) = shim
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| s.is_active() && s.is_done()))
            {
                let s = shim[i].as_ref().unwrap();
                let err = self.release(&mut reqs[i], s, status);
                let err = if err != abi().success {
                    pmpi::raise(s.focus().handle, err)
                } else {
                    err
                };
                outcome = Some((i as c_int, err));
                return true;
            }
            let (mut idx, mut real_flag) = (abi().undefined, 0);
            let err = PMPI_Testany(count, view.as_mut_ptr(), &mut idx, &mut real_flag, status);
            if err != abi().success {
                if idx != abi().undefined {
                    reqs[idx as usize] = view[idx as usize];
                }
                outcome = Some((idx, err));
                return true;
            }
            if real_flag != 0 && idx != abi().undefined {
                reqs[idx as usize] = view[idx as usize];
                outcome = Some((idx, err));
                return true;
            }
            if real_flag != 0 && !shim.iter().flatten().any(ShimRequest::is_active) {
                store_status(status, &empty_status(abi().any_source));
                outcome = Some((abi().undefined, abi().success));
                return true;
            }
            false
        };
        if blocking {
            self.wait_until(None, check);
        } else if !check() {
            *flag = 0;
            *index = abi().undefined;
            return abi().success;
        }
        let (idx, err) = outcome.expect("completed");
        *index = idx;
        if !blocking {
            *flag = 1;
        }
        err
    }

    /// `Waitsome` (`blocking`) and `Testsome`.
    pub unsafe fn some(
        &self,
        count: c_int,
        requests: *mut MPI_Request,
        outcount: *mut c_int,
        indices: *mut c_int,
        statuses: *mut MPI_Status,
        blocking: bool,
    ) -> c_int {
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let Some((shim, mut view)) = self.split(reqs) else {
            return if blocking {
                PMPI_Waitsome(count, requests, outcount, indices, statuses)
            } else {
                PMPI_Testsome(count, requests, outcount, indices, statuses)
            };
        };
        let mut real_indices = vec![0 as c_int; n];
        let mut real_statuses = vec![zeroed_status(); n];
        let ignore = statuses == abi().statuses_ignore || statuses.is_null();
        let mut result = abi().success;
        let mut total: c_int = 0;
        let mut check = || {
            self.progress(None);
            let mut real_out = 0;
            let real_status_ptr = if ignore {
                abi().statuses_ignore
            } else {
                real_statuses.as_mut_ptr()
            };
            let err = PMPI_Testsome(
                count,
                view.as_mut_ptr(),
                &mut real_out,
                real_indices.as_mut_ptr(),
                real_status_ptr,
            );
            if err != abi().success && err != abi().err_in_status {
                result = err;
                return true;
            }
            let shim_active = shim.iter().flatten().any(ShimRequest::is_active);
            if real_out == abi().undefined && !shim_active {
                total = abi().undefined;
                return true;
            }
            let mut k = 0usize;
            let mut in_status = err == abi().err_in_status;
            for j in 0..real_out.max(0) as usize {
                let i = real_indices[j] as usize;
                reqs[i] = view[i];
                *indices.add(k) = i as c_int;
                if !ignore {
                    *statuses.add(k) = real_statuses[j];
                }
                k += 1;
            }
            for (i, s) in shim.iter().enumerate() {
                let Some(s) = s else { continue };
                if !(s.is_active() && s.is_done()) {
                    continue;
                }
                let out = status_at(statuses, k);
                let err = self.release(&mut reqs[i], s, out);
                if out != abi().status_ignore {
                    (*out).MPI_ERROR = err;
                }
                in_status |= err != abi().success;
                *indices.add(k) = i as c_int;
                k += 1;
            }
            total = k as c_int;
            if in_status {
                result = abi().err_in_status;
            }
            k > 0
        };
        if blocking {
            self.wait_until(None, check);
        } else {
            check();
        }
        *outcount = total;
        if result == abi().err_in_status {
            return pmpi::raise(abi().comm_world, result);
        }
        result
    }
}
