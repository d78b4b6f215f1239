//! Communicator creation and release. A new intra-communicator gets the shim's private
//! duplicate for collectives inside the call that creates it, while every member is still in
//! that call: made later, inside the first collective, it could meet a nonblocking collective
//! that MPI runs by itself on the communicator (`MPIX_Comm_iagree`) in different orders on
//! different ranks. Before the user frees a communicator its receives waiting in the shim go to
//! MPI, which completes them after the handle is gone; the shim forgets the communicator when
//! MPI really frees it (an attribute delete callback tells).

use super::{intercept, nonblocking_then_wait};
use crate::coll::COLLECTIVES;
use crate::ffi::*;
use crate::runtime::{Error, Runtime};
use std::os::raw::c_int;

/// After a constructor: the new communicator's private duplicate.
fn adopt(rt: &Runtime, code: c_int, new: MPI_Comm) -> Result<c_int, Error> {
    if code != abi().success {
        return Ok(code);
    }
    COLLECTIVES.adopt(rt, new)?;
    Ok(code)
}

/// Defines a constructor that calls `$pmpi` and then adopts the communicator written to `$out`.
macro_rules! constructor {
    ($name:ident, $pmpi:ident, ($($arg:ident : $ty:ty),* $(,)?), $out:ident) => {
        intercept!(fn $name($($arg: $ty),*) via $pmpi, |rt| adopt(rt, $pmpi($($arg),*), *$out));
    };
}

intercept!(fn MPI_Comm_free(comm: *mut MPI_Comm) via PMPI_Comm_free, |rt| {
    rt.release_comm(*comm);
    Ok(PMPI_Comm_free(comm))
});

intercept!(fn MPI_Comm_disconnect(comm: *mut MPI_Comm) via PMPI_Comm_disconnect, |rt| {
    rt.release_comm(*comm);
    Ok(PMPI_Comm_disconnect(comm))
});

// Assertions in the new info (MPI-4 `mpi_assert_*`) change how the shim's engine matches.
intercept!(fn MPI_Comm_set_info(comm: MPI_Comm, info: MPI_Info) via PMPI_Comm_set_info, |rt| {
    let code = PMPI_Comm_set_info(comm, info);
    if code == abi().success {
        rt.info_changed(comm);
    }
    Ok(code)
});

type Ints = *const c_int;

// A blocking dup waits inside MPI for every member, which a receive waiting for the shim can
// keep from coming (a member may be in a synchronous send to this rank first); the nonblocking
// form keeps the shim matching. Inter-communicators keep the blocking form on every rank.
intercept!(fn MPI_Comm_dup(comm: MPI_Comm, newcomm: *mut MPI_Comm) via PMPI_Comm_dup, |rt| {
    let code = if rt.comm(comm)?.inter {
        PMPI_Comm_dup(comm, newcomm)
    } else {
        nonblocking_then_wait(rt, |r| PMPI_Comm_idup(comm, newcomm, r))?
    };
    adopt(rt, code, *newcomm)
});

constructor!(MPI_Comm_dup_with_info, PMPI_Comm_dup_with_info,
    (comm: MPI_Comm, info: MPI_Info, newcomm: *mut MPI_Comm), newcomm);
constructor!(MPI_Comm_split, PMPI_Comm_split,
    (comm: MPI_Comm, color: c_int, key: c_int, newcomm: *mut MPI_Comm), newcomm);
constructor!(MPI_Comm_split_type, PMPI_Comm_split_type,
    (comm: MPI_Comm, split_type: c_int, key: c_int, info: MPI_Info, newcomm: *mut MPI_Comm),
    newcomm);
constructor!(MPI_Comm_create, PMPI_Comm_create,
    (comm: MPI_Comm, group: MPI_Group, newcomm: *mut MPI_Comm), newcomm);
constructor!(MPI_Comm_create_group, PMPI_Comm_create_group,
    (comm: MPI_Comm, group: MPI_Group, tag: c_int, newcomm: *mut MPI_Comm), newcomm);
constructor!(MPI_Intercomm_merge, PMPI_Intercomm_merge,
    (intercomm: MPI_Comm, high: c_int, newintracomm: *mut MPI_Comm), newintracomm);
constructor!(MPI_Cart_create, PMPI_Cart_create,
    (comm_old: MPI_Comm, ndims: c_int, dims: Ints, periods: Ints, reorder: c_int,
     comm_cart: *mut MPI_Comm), comm_cart);
constructor!(MPI_Cart_sub, PMPI_Cart_sub,
    (comm: MPI_Comm, remain_dims: Ints, newcomm: *mut MPI_Comm), newcomm);
constructor!(MPI_Graph_create, PMPI_Graph_create,
    (comm_old: MPI_Comm, nnodes: c_int, index: Ints, edges: Ints, reorder: c_int,
     comm_graph: *mut MPI_Comm), comm_graph);
constructor!(MPI_Dist_graph_create, PMPI_Dist_graph_create,
    (comm_old: MPI_Comm, n: c_int, sources: Ints, degrees: Ints, destinations: Ints,
     weights: Ints, info: MPI_Info, reorder: c_int, comm_dist_graph: *mut MPI_Comm),
    comm_dist_graph);
constructor!(MPI_Dist_graph_create_adjacent, PMPI_Dist_graph_create_adjacent,
    (comm_old: MPI_Comm, indegree: c_int, sources: Ints, sourceweights: Ints, outdegree: c_int,
     destinations: Ints, destweights: Ints, info: MPI_Info, reorder: c_int,
     comm_dist_graph: *mut MPI_Comm), comm_dist_graph);
