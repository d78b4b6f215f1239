//! The exported `MPI_*` entry points, generated from `calls.list`, and the handlers they call:
//! arguments in, typed calls on the runtime out. Before `MPI_Init`, after `MPI_Finalize` and
//! when re-entered from an MPI callback an entry point passes the call straight to MPI
//! (`mpi::next`). A call with an invalid argument also goes to MPI as it is: MPI reports it,
//! naming the call and the value, through the communicator's error handler, as it would
//! without the shim. Calls not in the list (nonblocking and persistent sends, `Mrecv`,
//! `Imrecv`, `Bsend`, `Test_cancelled`, ...) are not exported: MPI serves them directly.

mod coll;
mod comms;
mod fortran;
mod init;
mod mpit;
mod p2p;
mod requests;

use crate::mpi::{self, abi, Code, MPI_Request};
use crate::runtime::{inside, Error, Runtime};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// The entry points (`entry_points.rs`, written by build.rs from `calls.list`).
#[allow(unused_unsafe, non_snake_case)]
mod entry {
    use super::{coll, comms, fortran, init, mpit, p2p, requests};
    use crate::coll::Kind;
    use crate::intercept::guarded;
    use crate::mpi::{
        next, Below, Count, Fint, MPI_Comm, MPI_Datatype, MPI_Group, MPI_Info, MPI_Message, MPI_Op,
        MPI_Request, MPI_Status, MPI_T_enum, MPI_T_pvar_handle, MPI_T_pvar_session,
    };
    use crate::runtime::p2p::{plainly_delegated, plainly_delegated_threaded};
    use crate::runtime::{
        installed, runtime, serial_runtime, started_runtime, thread, Error, Runtime, View,
    };
    use matchshim_core::protocol::PlainCall;
    #[allow(unused_imports)]
    use std::os::raw::{c_char, c_int, c_void};

    #[cfg(large_count)]
    use crate::mpi::MPI_Count;

    include!(concat!(env!("OUT_DIR"), "/entry_points.rs"));
}

/// Runs the shim's side of call `name`; a panic becomes an MPI abort instead of crossing into C.
#[inline]
pub(crate) fn guarded(
    name: &'static str,
    rt: &'static Runtime,
    body: impl FnOnce(&'static Runtime) -> Result<Code, Error>,
) -> Result<Code, Error> {
    match catch_unwind(AssertUnwindSafe(|| inside(rt, name, || body(rt)))) {
        Ok(result) => result,
        Err(_) => {
            crate::say(&format!(
                "matchshim: internal error in {name}, aborting the job"
            ));
            mpi::abort(abi().err_intern);
            Err(Error::Raised(abi().err_intern))
        }
    }
}

/// A blocking call must not block inside MPI while anything waits for the shim's progress: a
/// peer's synchronous (or rendezvous) send may need a receive the shim holds before it can go
/// on. Such a call runs as its nonblocking form, waited for with the shim's progress.
pub(crate) fn nonblocking_then_wait(
    rt: &Runtime,
    start: impl FnOnce(&mut MPI_Request) -> Code,
) -> Result<Code, Error> {
    let mut request = abi().request_null;
    let code = start(&mut request);
    if code != abi().success {
        return Ok(code);
    }
    Ok(rt.wait_real(&mut request).1)
}

/// A call's nonblocking form through MPI, on the communicator it is given.
pub(crate) trait Native: FnOnce(mpi::MPI_Comm, *mut MPI_Request) -> Code {}
impl<F: FnOnce(mpi::MPI_Comm, *mut MPI_Request) -> Code> Native for F {}
