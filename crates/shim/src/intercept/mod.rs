//! The exported `MPI_*` entry points: decode arguments and hand over to the runtime. Before
//! `MPI_Init`, after `MPI_Finalize` and when re-entered from an MPI callback they pass straight
//! to `PMPI_*`. A call with an invalid argument also goes to `PMPI_*` as it is: MPI reports it,
//! naming the call and the value, through the communicator's error handler, as it would
//! without the shim. Calls that need no matching (nonblocking and persistent sends, `Mrecv`,
//! `Imrecv`, `Bsend`, `Test_cancelled`) are not intercepted: MPI serves them directly.

mod coll;
mod comms;
mod fortran;
mod init;
mod p2p;
mod requests;
use crate::ffi::MPI_Request;
use crate::mpi::{self, abi, Code};
use crate::runtime::{inside, Error, Runtime};
use std::panic::{catch_unwind, AssertUnwindSafe};

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

/// Defines an exported `MPI_*` function that passes to `$pmpi` unless the runtime is active.
/// The body gives a `Result<c_int, Error>`; `Error::Invalid` passes the call to `$pmpi`. A
/// `plain` condition, when true, also sends the call to `$pmpi` as it is, without the shim's
/// bookkeeping for a call in progress (it holds no lock and runs no callback).
macro_rules! intercept {
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) via $pmpi:ident, |$rt:ident| $body:expr) => {
        intercept!($(#[$meta])* fn $name($($arg: $ty),*) via $pmpi, plain |_rt| false, |$rt| $body);
    };
    ($(#[$meta:meta])* fn $name:ident($($arg:ident : $ty:ty),* $(,)?) via $pmpi:ident,
     plain |$prt:ident| $plain:expr, |$rt:ident| $body:expr) => {
        $(#[$meta])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> std::os::raw::c_int {
            // Out of line, so the plain path saves no registers for it. MPI's argument lists
            // are MPI's.
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            unsafe fn shim_side(
                $($arg: $ty,)*
                rt: &'static $crate::runtime::Runtime,
            ) -> std::os::raw::c_int {
                match $crate::intercept::guarded(stringify!($name), rt, |$rt| $body) {
                    Ok(code) | Err($crate::runtime::Error::Raised(code)) => code,
                    Err($crate::runtime::Error::Invalid) => $crate::ffi::$pmpi($($arg),*),
                }
            }
            #[inline(never)]
            #[allow(clippy::too_many_arguments)]
            unsafe fn checked($($arg: $ty),*) -> std::os::raw::c_int {
                let Some(rt) = $crate::runtime::runtime() else {
                    return $crate::ffi::$pmpi($($arg),*);
                };
                let $prt = rt;
                if $plain {
                    return $crate::ffi::$pmpi($($arg),*);
                }
                shim_side($($arg,)* rt)
            }
            // The plain path below MPI_THREAD_MULTIPLE needs no call before MPI's own.
            match $crate::runtime::serial_runtime() {
                Some($prt) if $plain => $crate::ffi::$pmpi($($arg),*),
                _ => checked($($arg),*),
            }
        }
    };
}
pub(crate) use intercept;
