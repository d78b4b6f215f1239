//! Where a receive's bytes go, and the one place where they move for a message the shim
//! matched ([`Buffer::land`]) or for a receive it hands to MPI ([`Buffer::post_to_mpi`]).
//! Also the one state type of a receive's life ([`Stage`]).

use crate::mpi::{
    self, abi, Code, Count, HeldType, MPI_Comm, MPI_Message, MPI_Request, MPI_Status,
};
use matchshim_core::protocol::Key;
use std::os::raw::{c_int, c_void};

/// Messages up to this size are in this process once probed (below every eager limit of
/// MPICH and Open MPI), so a matched receive lands them at once and spares a request.
const EAGER_BYTES: i64 = 2048;

/// The user's buffer, count and datatype. The datatype is held (duplicated if derived) for
/// receives that outlive their call, since the user may free it.
#[derive(Clone)]
pub struct Buffer {
    pub ptr: *mut c_void,
    pub count: Count,
    pub datatype: HeldType,
}

// SAFETY: the buffer belongs to the receive until it completes, as MPI requires.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

/// A message the shim pulled out of MPI (a matched probe), with the probe's status.
#[derive(Clone, Copy)]
pub struct Message {
    pub handle: MPI_Message,
    pub status: MPI_Status,
}

// SAFETY: MPI handles are plain values; a matched message may be received from any thread.
unsafe impl Send for Message {}

/// How a matched message's bytes are received.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// Now, into the buffer (`MPI_Mrecv`): the caller waits anyway.
    Now,
    /// Now if it is small, else as a request MPI completes (`MPI_Imrecv`).
    Soon,
    /// As a request MPI completes, given to the user (`MPI_Imrecv`).
    Request,
}

/// What receiving a matched message gave.
pub enum Landed {
    Done(MPI_Status, Code),
    /// MPI moves the payload; the request completes the receive.
    Moving(MPI_Request),
}

/// Where a receive the shim queued is in its life; one state at a time.
#[derive(Clone, Copy)]
pub enum Stage {
    /// Waiting in its communicator's queues under this key.
    Queued(Key),
    /// Matched to this message, whose bytes are still in MPI: the receive's caller lands them.
    Matched(Message),
    /// MPI holds it: a matched message's bytes on their way, or the receive itself, handed to
    /// MPI (its communicator went back to MPI's matching, or was freed).
    InMpi(MPI_Request),
    /// Ended; how is in its completion.
    Done,
}

// SAFETY: MPI handles are plain values; a request or matched message may be completed from
// any thread.
unsafe impl Send for Stage {}

impl Buffer {
    /// The user's buffer for the length of one call.
    pub fn borrowed(ptr: *mut c_void, count: Count, datatype: crate::mpi::MPI_Datatype) -> Buffer {
        Buffer {
            ptr,
            count,
            datatype: HeldType::borrow(datatype),
        }
    }

    /// Receives `message`, which came on `comm`, into this buffer, as `how` says: the one
    /// place where a matched message's bytes move. Received by the shim, a message longer
    /// than the buffer is received at once with errors returned: MPI would raise the
    /// truncation there, and it is the error of the user's call that completes the receive,
    /// raised where MPI raises it. (Given to the user as a request, MPI reports it itself.)
    pub fn land(&self, mut message: Message, comm: MPI_Comm, how: Delivery) -> Landed {
        let (now, overflows) = match how {
            Delivery::Request => (false, false),
            Delivery::Now | Delivery::Soon => {
                let bytes = mpi::byte_count(&message.status);
                let overflows = mpi::type_size(self.datatype.handle())
                    .map_or(true, |size| bytes > self.count.saturating_mul(size));
                let now = how == Delivery::Now || overflows || bytes <= EAGER_BYTES;
                (now, overflows)
            }
        };
        let _quiet = overflows.then(|| mpi::Quiet::new(&[comm, abi().comm_world]));
        let datatype = self.datatype.handle();
        // SAFETY: the buffer holds `count` elements of the datatype until the receive
        // completes, as the user promised.
        unsafe {
            if now {
                let (status, err) = mpi::mrecv(self.ptr, self.count, datatype, &mut message.handle);
                return Landed::Done(status, err);
            }
            match mpi::imrecv(self.ptr, self.count, datatype, &mut message.handle) {
                Err(err) => Landed::Done(mpi::zeroed_status(), err),
                Ok(request) if how == Delivery::Request => Landed::Moving(request),
                Ok(mut request) => match mpi::test(&mut request) {
                    Some((status, err)) => Landed::Done(status, err),
                    None => Landed::Moving(request),
                },
            }
        }
    }

    /// Posts a receive into this buffer to MPI (a receive handed over, or a collective's
    /// receive while MPI matches).
    pub fn post_to_mpi(
        &self,
        source: c_int,
        tag: c_int,
        comm: MPI_Comm,
    ) -> Result<MPI_Request, Code> {
        // SAFETY: as for `land`.
        unsafe {
            mpi::irecv(
                self.ptr,
                self.count,
                self.datatype.handle(),
                source,
                tag,
                comm,
            )
        }
    }
}

impl Landed {
    /// The status and code once the bytes are there (waiting inside MPI for a moving one).
    pub fn wait(self) -> (MPI_Status, Code) {
        match self {
            Landed::Done(status, err) => (status, err),
            Landed::Moving(mut request) => mpi::wait(&mut request),
        }
    }
}
