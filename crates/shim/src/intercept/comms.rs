//! Communicator handlers. A constructor is a blocking collective that MPI runs: the receives
//! waiting in the shim go to MPI first ([`Runtime::step_aside`]). Under
//! `MATCHSHIM_COLL=shim` a new intra-communicator gets the shim's private duplicate for
//! collectives inside the call that creates it, while every member is still in that call.
//! Before the user frees a communicator its receives waiting in the shim go to MPI, which
//! completes them after the handle is gone; the shim forgets the communicator when MPI really
//! frees it (an attribute delete callback tells).

use super::nonblocking_then_wait;
use crate::coll::COLLECTIVES;
use crate::config::CollMode;
use crate::mpi::{self, abi, next, Code, HandleKey, MPI_Comm, MPI_Group, MPI_Info};
use crate::runtime::{Error, Runtime};
use std::os::raw::c_int;

type Result = std::result::Result<Code, Error>;
type Ints = *const c_int;

/// After a constructor that made `new` from `parent`, given `info` (`MPI_INFO_NULL` where it
/// takes none): the new communicator's private duplicate where it gets one.
fn adopt(rt: &Runtime, code: Code, new: MPI_Comm, parent: MPI_Comm, info: MPI_Info) -> Result {
    if code != abi().success || new.key() == abi().comm_null.key() {
        return Ok(code);
    }
    if let Some(comm) = rt.comm_made(new, parent, info)? {
        COLLECTIVES.adopt(rt, comm)?;
    }
    Ok(code)
}

pub unsafe fn free(rt: &'static Runtime, comm: *mut MPI_Comm) -> Result {
    // SAFETY: the caller's handle.
    rt.release_comm(unsafe { *comm });
    // SAFETY: as above.
    Ok(unsafe { next::MPI_Comm_free(comm) })
}

pub unsafe fn disconnect(rt: &'static Runtime, comm: *mut MPI_Comm) -> Result {
    // SAFETY: the caller's handle.
    rt.release_comm(unsafe { *comm });
    // SAFETY: as above.
    Ok(unsafe { next::MPI_Comm_disconnect(comm) })
}

/// Assertions in the new info (MPI-4 `mpi_assert_*`) change how the shim's engine matches,
/// and give the communicator its private duplicate (`MPI_Comm_set_info` is collective).
pub unsafe fn set_info(rt: &'static Runtime, comm: MPI_Comm, info: MPI_Info) -> Result {
    // Registered below with the assertions MPI then gives.
    rt.comms.forget_deferred(comm);
    rt.step_aside();
    // SAFETY: the caller's arguments.
    let code = unsafe { next::MPI_Comm_set_info(comm, info) };
    if code == abi().success {
        rt.info_changed(comm, info);
    }
    // Receives taken back wait in the engine built before the assertions until it is empty.
    rt.step_back();
    if code == abi().success {
        COLLECTIVES.adopt(rt, rt.comm(comm)?)?;
    }
    Ok(code)
}

/// Under `MATCHSHIM_COLL=shim` a collective of the shim's may be under way, which a blocking
/// dup inside MPI would keep from progressing: the nonblocking form keeps the shim working,
/// on every rank alike. Inter-communicators keep the blocking form on every rank.
pub unsafe fn dup(rt: &'static Runtime, comm: MPI_Comm, newcomm: *mut MPI_Comm) -> Result {
    let code = if rt.config.coll != CollMode::Shim || rt.comm(comm)?.inter {
        rt.step_aside();
        // SAFETY: the caller's arguments.
        let code = unsafe { next::MPI_Comm_dup(comm, newcomm) };
        rt.step_back();
        code
    } else {
        nonblocking_then_wait(rt, |r| {
            // SAFETY: the caller's `newcomm`, written once the request completes in this call.
            match unsafe { mpi::comm_idup(comm, newcomm) } {
                Ok(request) => {
                    *r = request;
                    abi().success
                }
                Err(code) => code,
            }
        })?
    };
    // SAFETY: MPI wrote the new handle.
    adopt(rt, code, unsafe { *newcomm }, comm, abi().info_null)
}

/// Defines a constructor: MPI's own call, then the new communicator, made from `$parent` given
/// `$info`.
macro_rules! constructor {
    ($name:ident, $mpi:ident, ($($arg:ident : $ty:ty),* $(,)?), $parent:ident, $info:expr,
     $out:ident) => {
        #[allow(clippy::too_many_arguments)] // MPI's own
        pub unsafe fn $name(rt: &'static Runtime, $($arg: $ty),*) -> Result {
            rt.step_aside();
            // SAFETY: the caller's arguments.
            let code = unsafe { next::$mpi($($arg),*) };
            rt.step_back();
            // SAFETY: MPI wrote the new handle when it succeeded (else it is not read).
            let new = if code == abi().success { unsafe { *$out } } else { abi().comm_null };
            adopt(rt, code, new, $parent, $info)
        }
    };
}

constructor!(dup_with_info, MPI_Comm_dup_with_info,
    (comm: MPI_Comm, info: MPI_Info, newcomm: *mut MPI_Comm),
    comm, info, newcomm);
constructor!(split, MPI_Comm_split,
    (comm: MPI_Comm, color: c_int, key: c_int, newcomm: *mut MPI_Comm),
    comm, abi().info_null, newcomm);
constructor!(split_type, MPI_Comm_split_type,
    (comm: MPI_Comm, split_type: c_int, key: c_int, info: MPI_Info, newcomm: *mut MPI_Comm),
    comm, info, newcomm);
constructor!(create, MPI_Comm_create,
    (comm: MPI_Comm, group: MPI_Group, newcomm: *mut MPI_Comm),
    comm, abi().info_null, newcomm);
constructor!(create_group, MPI_Comm_create_group,
    (comm: MPI_Comm, group: MPI_Group, tag: c_int, newcomm: *mut MPI_Comm),
    comm, abi().info_null, newcomm);
constructor!(intercomm_merge, MPI_Intercomm_merge,
    (intercomm: MPI_Comm, high: c_int, newintracomm: *mut MPI_Comm),
    intercomm, abi().info_null, newintracomm);
constructor!(cart_create, MPI_Cart_create,
    (comm_old: MPI_Comm, ndims: c_int, dims: Ints, periods: Ints, reorder: c_int,
     comm_cart: *mut MPI_Comm),
    comm_old, abi().info_null, comm_cart);
constructor!(cart_sub, MPI_Cart_sub,
    (comm: MPI_Comm, remain_dims: Ints, newcomm: *mut MPI_Comm),
    comm, abi().info_null, newcomm);
constructor!(graph_create, MPI_Graph_create,
    (comm_old: MPI_Comm, nnodes: c_int, index: Ints, edges: Ints, reorder: c_int,
     comm_graph: *mut MPI_Comm),
    comm_old, abi().info_null, comm_graph);
constructor!(dist_graph_create, MPI_Dist_graph_create,
    (comm_old: MPI_Comm, n: c_int, sources: Ints, degrees: Ints, destinations: Ints,
     weights: Ints, info: MPI_Info, reorder: c_int, comm_dist_graph: *mut MPI_Comm),
    comm_old, info, comm_dist_graph);
constructor!(dist_graph_create_adjacent, MPI_Dist_graph_create_adjacent,
    (comm_old: MPI_Comm, indegree: c_int, sources: Ints, sourceweights: Ints, outdegree: c_int,
     destinations: Ints, destweights: Ints, info: MPI_Info, reorder: c_int,
     comm_dist_graph: *mut MPI_Comm),
    comm_old, info, comm_dist_graph);
