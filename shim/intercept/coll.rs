//! Blocking collectives go to MPI as their nonblocking forms, waited for with the shim's progress
//! (see `nonblocking_then_wait`). Always: MPI never matches a blocking collective on one rank
//! with a nonblocking one on another, and only some ranks may have receives waiting.

use super::{intercept, nonblocking_then_wait};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

macro_rules! collective {
    ($name:ident, $pmpi:ident, $nonblocking:ident, ($($arg:ident : $ty:ty),* $(,)?)) => {
        intercept!(fn $name($($arg: $ty),*) via $pmpi, |rt| {
            nonblocking_then_wait(rt, |r| $nonblocking($($arg),*, r))
        });
    };
}

type Buf = *const c_void;
type BufMut = *mut c_void;
type Counts = *const c_int;
type Type = MPI_Datatype;

collective!(MPI_Barrier, PMPI_Barrier, PMPI_Ibarrier, (comm: MPI_Comm));
collective!(MPI_Bcast, PMPI_Bcast, PMPI_Ibcast,
    (buffer: BufMut, count: c_int, datatype: Type, root: c_int, comm: MPI_Comm));
collective!(MPI_Reduce, PMPI_Reduce, PMPI_Ireduce,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, root: c_int,
     comm: MPI_Comm));
collective!(MPI_Allreduce, PMPI_Allreduce, PMPI_Iallreduce,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm));
collective!(MPI_Gather, PMPI_Gather, PMPI_Igather,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, root: c_int, comm: MPI_Comm));
collective!(MPI_Gatherv, PMPI_Gatherv, PMPI_Igatherv,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcounts: Counts,
     displs: Counts, recvtype: Type, root: c_int, comm: MPI_Comm));
collective!(MPI_Scatter, PMPI_Scatter, PMPI_Iscatter,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, root: c_int, comm: MPI_Comm));
collective!(MPI_Scatterv, PMPI_Scatterv, PMPI_Iscatterv,
    (sendbuf: Buf, sendcounts: Counts, displs: Counts, sendtype: Type, recvbuf: BufMut,
     recvcount: c_int, recvtype: Type, root: c_int, comm: MPI_Comm));
collective!(MPI_Allgather, PMPI_Allgather, PMPI_Iallgather,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, comm: MPI_Comm));
collective!(MPI_Allgatherv, PMPI_Allgatherv, PMPI_Iallgatherv,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcounts: Counts,
     displs: Counts, recvtype: Type, comm: MPI_Comm));
collective!(MPI_Alltoall, PMPI_Alltoall, PMPI_Ialltoall,
    (sendbuf: Buf, sendcount: c_int, sendtype: Type, recvbuf: BufMut, recvcount: c_int,
     recvtype: Type, comm: MPI_Comm));
collective!(MPI_Alltoallv, PMPI_Alltoallv, PMPI_Ialltoallv,
    (sendbuf: Buf, sendcounts: Counts, sdispls: Counts, sendtype: Type, recvbuf: BufMut,
     recvcounts: Counts, rdispls: Counts, recvtype: Type, comm: MPI_Comm));
collective!(MPI_Alltoallw, PMPI_Alltoallw, PMPI_Ialltoallw,
    (sendbuf: Buf, sendcounts: Counts, sdispls: Counts, sendtypes: *const Type,
     recvbuf: BufMut, recvcounts: Counts, rdispls: Counts, recvtypes: *const Type,
     comm: MPI_Comm));
collective!(MPI_Reduce_scatter, PMPI_Reduce_scatter, PMPI_Ireduce_scatter,
    (sendbuf: Buf, recvbuf: BufMut, recvcounts: Counts, datatype: Type, op: MPI_Op,
     comm: MPI_Comm));
collective!(MPI_Reduce_scatter_block, PMPI_Reduce_scatter_block, PMPI_Ireduce_scatter_block,
    (sendbuf: Buf, recvbuf: BufMut, recvcount: c_int, datatype: Type, op: MPI_Op,
     comm: MPI_Comm));
collective!(MPI_Scan, PMPI_Scan, PMPI_Iscan,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm));
collective!(MPI_Exscan, PMPI_Exscan, PMPI_Iexscan,
    (sendbuf: Buf, recvbuf: BufMut, count: c_int, datatype: Type, op: MPI_Op, comm: MPI_Comm));
