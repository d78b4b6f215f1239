//! Blocking and nonblocking collectives. On intra-communicators the shim runs them itself
//! (`crate::coll`); with `MATCHSHIM_COLL=native` and on inter-communicators they go to MPI,
//! blocking ones always as their nonblocking forms waited for with the shim's progress (see
//! `nonblocking_then_wait`): a receive waiting for the shim may be what a peer needs before it
//! can join, and MPI never matches a blocking collective with a nonblocking one, so the choice
//! cannot depend on this rank's state. Those run on the communicator's private duplicate where
//! it has one, so that, as in MPI, they never meet the program's nonblocking collectives.

use super::{intercept, nonblocking_then_wait};
use crate::coll::{self, Kind, COLLECTIVES};
use crate::ffi::*;
use crate::mpi::HandleKey;
use std::os::raw::{c_int, c_void};

/// Defines the blocking and the nonblocking entry point of one collective; `$build` adds the
/// algorithm to the schedule builder `$b`.
macro_rules! collective {
    ($name:ident, $pmpi:ident, $iname:ident, $ipmpi:ident, $kind:ident,
     ($($arg:ident : $ty:ty),* $(,)?), $comm:ident, |$b:ident| $build:expr) => {
        intercept!(fn $name($($arg: $ty),*) via $pmpi, |rt| {
            match COLLECTIVES.comm(rt, $comm)? {
                Some(state) => {
                    COLLECTIVES.run(rt, &state, Kind::$kind, std::ptr::null_mut(), |$b| $build)
                }
                None => {
                    let user_comm = $comm;
                    let $comm = COLLECTIVES.blocking_native_comm(rt, $comm);
                    let code = nonblocking_then_wait(rt, |r| $ipmpi($($arg),*, r))?;
                    if code != abi().success && $comm.key() != user_comm.key() {
                        Err(rt.raise(user_comm, code))
                    } else {
                        Ok(code)
                    }
                }
            }
        });

        intercept!(fn $iname($($arg: $ty),*, request: *mut MPI_Request) via $ipmpi, |rt| {
            match COLLECTIVES.comm(rt, $comm)? {
                Some(state) => COLLECTIVES.run(rt, &state, Kind::$kind, request, |$b| $build),
                None => Ok($ipmpi($($arg),*, request)),
            }
        });
    };
}

type Buf = *const c_void;
type BufMut = *mut c_void;
type Counts = *const c_int;
type Type = MPI_Datatype;

/// `Reduce_scatter_block`'s counts, all equal.
fn equal_counts(n: c_int, count: c_int) -> Vec<c_int> {
    vec![count; n.max(0) as usize]
}

collective!(MPI_Barrier, PMPI_Barrier, MPI_Ibarrier, PMPI_Ibarrier, Barrier,
    (comm: MPI_Comm), comm, |b| coll::barrier(b));
collective!(MPI_Bcast, PMPI_Bcast, MPI_Ibcast, PMPI_Ibcast, Bcast,
    (buffer: BufMut, count: c_int, datatype: Type, root: c_int, comm: MPI_Comm), comm,
    |b| coll::bcast(b, buffer, count, datatype, root));
collective!(MPI_Reduce, PMPI_Reduce, MPI_Ireduce, PMPI_Ireduce, Reduce,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, root: c_int,
     comm: MPI_Comm), comm,
    |b| coll::reduce(b, sendbuf, recvbuf, count, datatype, op, root));
collective!(MPI_Allreduce, PMPI_Allreduce, MPI_Iallreduce, PMPI_Iallreduce, Allreduce,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm), comm,
    |b| coll::allreduce(b, sendbuf, recvbuf, count, datatype, op));
collective!(MPI_Gather, PMPI_Gather, MPI_Igather, PMPI_Igather, Gather,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, root: c_int, comm: MPI_Comm), comm,
    |b| coll::gather(b, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root));
collective!(MPI_Gatherv, PMPI_Gatherv, MPI_Igatherv, PMPI_Igatherv, Gatherv,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcounts: Counts,
     displs: Counts, recvtype: Type, root: c_int, comm: MPI_Comm), comm,
    |b| coll::gatherv(b, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root));
collective!(MPI_Scatter, PMPI_Scatter, MPI_Iscatter, PMPI_Iscatter, Scatter,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, root: c_int, comm: MPI_Comm), comm,
    |b| coll::scatter(b, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root));
collective!(MPI_Scatterv, PMPI_Scatterv, MPI_Iscatterv, PMPI_Iscatterv, Scatterv,
    (sendbuf: Buf, sendcounts: Counts, displs: Counts, sendtype: Type, recvbuf: BufMut,
     recvcount: c_int, recvtype: Type, root: c_int, comm: MPI_Comm), comm,
    |b| coll::scatterv(b, sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root));
collective!(MPI_Allgather, PMPI_Allgather, MPI_Iallgather, PMPI_Iallgather, Allgather,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, comm: MPI_Comm), comm,
    |b| coll::allgather(b, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype));
collective!(MPI_Allgatherv, PMPI_Allgatherv, MPI_Iallgatherv, PMPI_Iallgatherv, Allgatherv,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcounts: Counts,
     displs: Counts, recvtype: Type, comm: MPI_Comm), comm,
    |b| coll::allgatherv(b, sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype));
collective!(MPI_Alltoall, PMPI_Alltoall, MPI_Ialltoall, PMPI_Ialltoall, Alltoall,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, comm: MPI_Comm), comm,
    |b| coll::alltoall(b, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype));
collective!(MPI_Alltoallv, PMPI_Alltoallv, MPI_Ialltoallv, PMPI_Ialltoallv, Alltoallv,
    (sendbuf: Buf, sendcounts: Counts, sdispls: Counts, sendtype: Type, recvbuf: BufMut,
     recvcounts: Counts, rdispls: Counts, recvtype: Type, comm: MPI_Comm), comm,
    |b| coll::alltoallv(b, sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype));
collective!(MPI_Alltoallw, PMPI_Alltoallw, MPI_Ialltoallw, PMPI_Ialltoallw, Alltoallw,
    (sendbuf: Buf, sendcounts: Counts, sdispls: Counts, sendtypes: *const Type,
     recvbuf: BufMut, recvcounts: Counts, rdispls: Counts, recvtypes: *const Type,
     comm: MPI_Comm), comm,
    |b| coll::alltoallw(b, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes));
collective!(MPI_Reduce_scatter, PMPI_Reduce_scatter, MPI_Ireduce_scatter, PMPI_Ireduce_scatter,
ReduceScatter,
(sendbuf: Buf, recvbuf: BufMut, recvcounts: Counts, datatype: Type, op: MPI_Op,
 comm: MPI_Comm), comm,
|b| {
    let n = b.size;
    let counts = if recvcounts.is_null() { Vec::new() } else { std::slice::from_raw_parts(recvcounts, n as usize).to_vec() };
    coll::reduce_scatter(b, sendbuf, recvbuf, &counts, datatype, op)
});
collective!(MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block, MPI_Ireduce_scatter_block,
    PMPI_Ireduce_scatter_block, ReduceScatterBlock,
    (sendbuf: Buf, recvbuf: BufMut, recvcount: c_int, datatype: Type, op: MPI_Op,
     comm: MPI_Comm), comm,
    |b| { let counts = equal_counts(b.size, recvcount); coll::reduce_scatter(b, sendbuf, recvbuf, &counts, datatype, op) });
collective!(MPI_Scan, PMPI_Scan, MPI_Iscan, PMPI_Iscan, Scan,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm), comm,
    |b| coll::scan(b, sendbuf, recvbuf, count, datatype, op, false));
collective!(MPI_Exscan, PMPI_Exscan, MPI_Iexscan, PMPI_Iexscan, Exscan,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm), comm,
    |b| coll::scan(b, sendbuf, recvbuf, count, datatype, op, true));
