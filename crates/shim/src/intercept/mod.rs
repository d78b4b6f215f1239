//! The exported `MPI_*` entry points: decode arguments and hand over to the runtime. Before
//! `MPI_Init`, after `MPI_Finalize` and when re-entered from an MPI callback they pass straight
//! to `PMPI_*`. Calls that need no matching (nonblocking and persistent sends, `Mrecv`,
//! `Imrecv`, `Bsend`, `Test_cancelled`) are not intercepted: MPI serves them directly.

mod coll;
mod comms;
mod init;
mod p2p;
mod requests;

use crate::ffi::*;
use crate::runtime::{inside, Runtime};
use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Runs the shim's side of a call; a panic becomes an MPI abort instead of crossing into C.
#[inline]
pub(crate) fn guarded(rt: &'static Runtime, body: impl FnOnce(&'static Runtime) -> c_int) -> c_int {
    match catch_unwind(AssertUnwindSafe(|| inside(|| body(rt)))) {
        Ok(code) => code,
        Err(_) => {
            eprintln!("matchshim: internal error, aborting the job");
            // SAFETY: plain call.
            unsafe { PMPI_Abort(abi().comm_world, abi().err_intern) };
            abi().err_intern
        }
    }
}

/// A blocking call must not block inside MPI while receives wait for the shim: a peer's
/// synchronous (or rendezvous) send may need one of them to match before it can go on. Such a
/// call runs as its nonblocking form, waited for with the shim's progress.
pub(crate) unsafe fn nonblocking_then_wait(
    rt: &Runtime,
    start: impl FnOnce(*mut MPI_Request) -> c_int,
) -> c_int {
    let mut request = abi().request_null;
    let err = start(&mut request);
    if err != abi().success {
        return err;
    }
    rt.wait(&mut request, abi().status_ignore)
}

/// Defines an exported `MPI_*` function that passes to `$pmpi` unless the runtime is active.
macro_rules! intercept {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) via $pmpi:ident, |$rt:ident| $body:expr) => {
        $(#[$meta])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> std::os::raw::c_int {
            match $crate::runtime::runtime() {
                None => $crate::ffi::$pmpi($($arg),*),
                Some(rt) => $crate::intercept::guarded(rt, |$rt| $body),
            }
        }
    };
}
pub(crate) use intercept;
