//! A receive: the user's buffer, the one function where a matched message's bytes move, and
//! the receive the shim completes itself.

use super::comm::Comm;
use super::request::{Completion, Operation};
use super::Runtime;
use crate::ffi::{MPI_Comm, MPI_Message, MPI_Request, MPI_Status};
use crate::mpi::{self, abi, Code, Count, HeldType};
use parking_lot::Mutex;
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// Messages up to this size are in this process once probed (below every eager limit of
/// MPICH and Open MPI), so a matched receive takes them at once and spares a request.
const EAGER_BYTES: i64 = 2048;

/// Where a receive's bytes go: the user's buffer, count and datatype. The datatype is held
/// (duplicated if derived) for receives that outlive their call, since the user may free it.
#[derive(Clone)]
pub struct Receive {
    pub buf: *mut c_void,
    pub count: Count,
    pub datatype: HeldType,
}

// SAFETY: the buffer belongs to the receive until it completes, as MPI requires.
unsafe impl Send for Receive {}
unsafe impl Sync for Receive {}

/// How a matched message is received.
pub enum Delivery {
    /// Now, into the buffer: the caller waits anyway.
    Now,
    /// Now if it is small, else as a request MPI completes.
    Soon,
}

/// What receiving a matched message gave.
pub enum Taken {
    Done(MPI_Status, Code),
    /// MPI moves the payload; the request completes the receive.
    Moving(MPI_Request),
}

impl Receive {
    pub fn new(buf: *mut c_void, count: Count, datatype: HeldType) -> Receive {
        Receive {
            buf,
            count,
            datatype,
        }
    }

    /// Receives a message the shim matched to this receive: the one place where a matched
    /// message's bytes move (`MPI_Mrecv`, or `MPI_Imrecv` for large messages that need not
    /// arrive at once). `status` is the matched probe's, `comm` the communicator it came on.
    /// A message longer than the buffer is received at once with errors returned: MPI would
    /// raise the truncation there, and it is the error of the user's call that completes the
    /// receive, raised where MPI raises it.
    pub fn take(
        &self,
        mut message: MPI_Message,
        status: &MPI_Status,
        comm: MPI_Comm,
        how: Delivery,
    ) -> Taken {
        let bytes = mpi::byte_count(status);
        let overflows = mpi::type_size(self.datatype.handle()).map_or(true, |size| {
            bytes > (self.count as i64).saturating_mul(size)
        });
        let _quiet = overflows.then(|| mpi::Quiet::new(&[comm, abi().comm_world]));
        let now = match how {
            Delivery::Now => true,
            Delivery::Soon => overflows || bytes <= EAGER_BYTES,
        };
        // SAFETY: the buffer holds `count` elements of the datatype, as the user promised.
        unsafe {
            if now {
                let (status, err) =
                    mpi::mrecv(self.buf, self.count, self.datatype.handle(), &mut message);
                return Taken::Done(status, err);
            }
            match mpi::imrecv(self.buf, self.count, self.datatype.handle(), &mut message) {
                Err(err) => Taken::Done(mpi::zeroed_status(), err),
                Ok(mut request) => match mpi::test(&mut request) {
                    Some((status, err)) => Taken::Done(status, err),
                    None => Taken::Moving(request),
                },
            }
        }
    }

    /// Posts this receive to MPI itself (a delegated communicator, or a receive handed over).
    pub fn post_to_mpi(
        &self,
        source: c_int,
        tag: c_int,
        comm: crate::ffi::MPI_Comm,
    ) -> Result<MPI_Request, Code> {
        // SAFETY: as for `take`.
        unsafe {
            mpi::irecv(
                self.buf,
                self.count,
                self.datatype.handle(),
                source,
                tag,
                comm,
            )
        }
    }
}

/// Where a receive the shim completes is. It is in exactly one state at a time:
/// - `New`: being posted;
/// - `Posted(key)`: waiting in its communicator's engine as posted receive `key`, and in the
///   communicator's posted slab under `key`; counted in the communicator's `pending`;
/// - `Receiving(request)`: MPI holds it — a matched message being moved, or the receive itself,
///   handed to MPI (a communicator going back to MPI's matching, or being freed); listed in the
///   communicator's `receiving` and counted in `pending`;
/// - `Done`: its outcome is in its completion; no longer counted anywhere.
#[derive(Clone, Copy)]
pub enum RecvState {
    New,
    Posted(u64),
    Receiving(MPI_Request),
    Done,
}

/// A nonblocking receive (`MPI_Irecv`, a start of a persistent receive) the shim completes.
pub struct RecvOp {
    pub receive: Receive,
    /// The user's source and tag, as MPI values.
    pub source: c_int,
    pub tag: c_int,
    pub comm: &'static Comm,
    state: Mutex<RecvState>,
    done: Completion,
}

// SAFETY: handles are plain values; the buffer as for `Receive`.
unsafe impl Send for RecvOp {}
unsafe impl Sync for RecvOp {}

impl RecvOp {
    pub fn new(receive: Receive, source: c_int, tag: c_int, comm: &'static Comm) -> Arc<RecvOp> {
        Arc::new(RecvOp {
            receive,
            source,
            tag,
            comm,
            state: Mutex::new(RecvState::New),
            done: Completion::default(),
        })
    }

    pub fn state(&self) -> RecvState {
        *self.state.lock()
    }

    pub fn set_state(&self, state: RecvState) {
        *self.state.lock() = state;
    }

    /// Records the outcome; the receive leaves every queue and count.
    pub fn finish(&self, status: MPI_Status, err: Code) {
        self.set_state(RecvState::Done);
        self.done.finish(status, err);
    }

    pub fn finish_cancelled(&self) {
        self.finish(mpi::cancelled_status(), abi().success);
    }
}

impl Operation for RecvOp {
    fn completion(&self) -> &Completion {
        &self.done
    }

    fn focus(&self) -> &'static Comm {
        self.comm
    }

    fn cancel(&self, rt: &Runtime) {
        rt.cancel_recv(self);
    }

    fn pending_status(&self) -> MPI_Status {
        mpi::empty_status(self.source)
    }
}

/// A persistent receive. The user's handle is a real persistent request with the user's
/// arguments: MPI starts it while the communicator is delegated, and it keeps the
/// communicator and datatype alive in MPI; while the shim matches for the communicator, each
/// start is a receive of the shim's instead.
pub struct Persistent {
    pub buf: *mut c_void,
    pub count: Count,
    pub datatype: HeldType,
    pub source: c_int,
    pub tag: c_int,
    pub comm: &'static Comm,
    /// The shim's receive of the current start, while the shim runs it.
    pub current: Mutex<Option<Arc<RecvOp>>>,
    /// MPI runs the current start (the communicator was delegated).
    pub in_mpi: std::sync::atomic::AtomicBool,
}

// SAFETY: as for RecvOp.
unsafe impl Send for Persistent {}
unsafe impl Sync for Persistent {}

impl Persistent {
    pub fn receive(&self) -> Receive {
        Receive::new(self.buf, self.count, self.datatype.clone())
    }
}
