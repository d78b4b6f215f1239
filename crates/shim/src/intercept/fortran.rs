//! What the Fortran entry points (generated from `calls.list`) convert: one [`Arg`] per argument
//! kind. They exist for the bindings that would otherwise reach `PMPI_*` without the shim: all
//! of Open MPI's (`mpif.h`, `use mpi`, `use mpi_f08`) and MPICH's `use mpi_f08` calls without a
//! buffer. MPICH's other Fortran bindings call the C `MPI_*` functions, which the shim already
//! is. Each entry point converts its arguments (handles, statuses, `LOGICAL`s, Fortran's
//! `MPI_IN_PLACE` and `MPI_STATUS_IGNORE`) and calls the shim's C entry point.
//!
//! Statuses: Open MPI's Fortran status (also `TYPE(MPI_Status)`) is converted with
//! `MPI_Status_f2c`/`c2f`, its `MPI_ERROR` kept as the C call keeps it; MPICH's
//! `TYPE(MPI_Status)` is the C status itself. `ierror` is optional in `mpi_f08`: absent, it
//! arrives as a null pointer.

use super::init::init_shim;
use crate::mpi::{self, abi, fortran as fh, Fint, MPI_Comm, MPI_Message, MPI_Request, MPI_Status};
use std::ffi::CStr;
use std::os::raw::c_int;
#[cfg(openmpi)]
use std::os::raw::c_void;
use std::sync::OnceLock;

#[cfg(openmpi)]
use crate::mpi::{MPI_Datatype, MPI_Group, MPI_Info, MPI_Op};
#[cfg(mpich)]
use crate::mpi::{MPI_Group, MPI_Info};

/// One kind of Fortran argument: what arrives, what is held during the call, what the C entry
/// point takes, and what goes back afterwards. `len` is an array's length (0 for the others).
pub trait Arg {
    type F: Copy;
    type Held;
    type C;
    /// # Safety
    /// `f` is the argument as the Fortran caller passed it, `len` elements for an array.
    unsafe fn enter(f: Self::F, len: usize) -> Self::Held;
    fn c(held: &mut Self::Held) -> Self::C;
    /// # Safety
    /// As for `enter`; `len` is read again after the call.
    unsafe fn leave(_held: Self::Held, _len: usize) {}
}

/// Fortran's `LOGICAL` `.TRUE.` as gfortran, MPICH and Open MPI store it.
const TRUE: Fint = 1;

/// `INTEGER`, in.
pub struct Int;
impl Arg for Int {
    type F = *const Fint;
    type Held = c_int;
    type C = c_int;
    unsafe fn enter(f: Self::F, _: usize) -> c_int {
        // SAFETY: the caller's INTEGER.
        unsafe { *f }
    }
    fn c(held: &mut c_int) -> c_int {
        *held
    }
}

/// A count: an `INTEGER`.
#[cfg(openmpi)]
pub type Count = Int;

/// An `INTEGER` array, in (counts, displacements, ranks): the same ints in C.
pub struct Ints;
impl Arg for Ints {
    type F = *const Fint;
    type Held = *const c_int;
    type C = *const c_int;
    unsafe fn enter(f: Self::F, _: usize) -> *const c_int {
        f
    }
    fn c(held: &mut *const c_int) -> *const c_int {
        *held
    }
}

/// An `INTEGER`, out, that C writes in place (`provided`, `outcount`).
pub struct IntOut;
impl Arg for IntOut {
    type F = *mut Fint;
    type Held = *mut c_int;
    type C = *mut c_int;
    unsafe fn enter(f: Self::F, _: usize) -> *mut c_int {
        f
    }
    fn c(held: &mut *mut c_int) -> *mut c_int {
        *held
    }
}

/// An index, out: Fortran counts from 1; `MPI_UNDEFINED` stays.
pub struct Index;
impl Arg for Index {
    type F = *mut Fint;
    type Held = (c_int, *mut Fint);
    type C = *mut c_int;
    unsafe fn enter(f: Self::F, _: usize) -> Self::Held {
        (0, f)
    }
    fn c(held: &mut Self::Held) -> *mut c_int {
        &mut held.0
    }
    unsafe fn leave((i, f): Self::Held, _: usize) {
        // SAFETY: the caller's INTEGER.
        unsafe { *f = if i == abi().undefined { i } else { i + 1 } };
    }
}

/// Indices, out, `len` of them valid after the call: Fortran counts from 1.
pub struct Indices;
impl Arg for Indices {
    type F = *mut Fint;
    type Held = *mut c_int;
    type C = *mut c_int;
    unsafe fn enter(f: Self::F, _: usize) -> *mut c_int {
        f
    }
    fn c(held: &mut *mut c_int) -> *mut c_int {
        *held
    }
    unsafe fn leave(indices: *mut c_int, len: usize) {
        for k in 0..len {
            // SAFETY: the call wrote `len` indices.
            unsafe { *indices.add(k) += 1 };
        }
    }
}

/// `LOGICAL`, in.
pub struct Logical;
impl Arg for Logical {
    type F = *const Fint;
    type Held = c_int;
    type C = c_int;
    unsafe fn enter(f: Self::F, _: usize) -> c_int {
        // SAFETY: the caller's LOGICAL.
        (unsafe { *f } != 0) as c_int
    }
    fn c(held: &mut c_int) -> c_int {
        *held
    }
}

/// `LOGICAL`, out (a flag).
pub struct Flag;
impl Arg for Flag {
    type F = *mut Fint;
    type Held = (c_int, *mut Fint);
    type C = *mut c_int;
    unsafe fn enter(f: Self::F, _: usize) -> Self::Held {
        (0, f)
    }
    fn c(held: &mut Self::Held) -> *mut c_int {
        &mut held.0
    }
    unsafe fn leave((value, f): Self::Held, _: usize) {
        // SAFETY: the caller's LOGICAL.
        unsafe { *f = if value != 0 { TRUE } else { 0 } };
    }
}

/// The addresses Fortran's sentinels have in this process, where a Fortran binding is loaded.
struct Sentinels {
    #[cfg(openmpi)]
    in_place: Vec<usize>,
    #[cfg(openmpi)]
    bottom: Vec<usize>,
    #[cfg(openmpi)]
    unweighted: Vec<usize>,
    #[cfg(openmpi)]
    weights_empty: Vec<usize>,
    status_ignore: Vec<usize>,
    statuses_ignore: Vec<usize>,
}

fn sentinels() -> &'static Sentinels {
    static SENTINELS: OnceLock<Sentinels> = OnceLock::new();
    SENTINELS.get_or_init(|| {
        let find = |names: &[&CStr]| -> Vec<usize> {
            names
                .iter()
                .filter_map(|name| mpi::symbol(name))
                .map(|at| at as usize)
                .collect()
        };
        Sentinels {
            #[cfg(openmpi)]
            in_place: find(&[c"mpi_fortran_in_place_"]),
            #[cfg(openmpi)]
            bottom: find(&[c"mpi_fortran_bottom_"]),
            #[cfg(openmpi)]
            unweighted: find(&[c"mpi_fortran_unweighted_"]),
            #[cfg(openmpi)]
            weights_empty: find(&[c"mpi_fortran_weights_empty_"]),
            status_ignore: find(&[
                c"mpi_fortran_status_ignore_",
                c"MPIR_F08_MPI_STATUS_IGNORE_OBJ",
            ]),
            statuses_ignore: find(&[
                c"mpi_fortran_statuses_ignore_",
                c"MPIR_F08_MPI_STATUSES_IGNORE_OBJ",
            ]),
        }
    })
}

/// A choice buffer: Fortran's `MPI_IN_PLACE` and `MPI_BOTTOM` become C's.
#[cfg(openmpi)]
pub struct Buf;
#[cfg(openmpi)]
impl Arg for Buf {
    type F = *mut c_void;
    type Held = *mut c_void;
    type C = *mut c_void;
    unsafe fn enter(f: Self::F, _: usize) -> *mut c_void {
        let s = sentinels();
        if s.in_place.contains(&(f as usize)) {
            abi().in_place
        } else if s.bottom.contains(&(f as usize)) {
            std::ptr::null_mut()
        } else {
            f
        }
    }
    fn c(held: &mut *mut c_void) -> *mut c_void {
        *held
    }
}

/// A choice buffer the call only reads.
#[cfg(openmpi)]
pub struct CBuf;
#[cfg(openmpi)]
impl Arg for CBuf {
    type F = *mut c_void;
    type Held = *mut c_void;
    type C = *const c_void;
    unsafe fn enter(f: Self::F, len: usize) -> *mut c_void {
        // SAFETY: as for `Buf`.
        unsafe { Buf::enter(f, len) }
    }
    fn c(held: &mut *mut c_void) -> *const c_void {
        *held
    }
}

/// Graph edge weights: Fortran's `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` become C's.
#[cfg(openmpi)]
pub struct Weights;
#[cfg(openmpi)]
impl Arg for Weights {
    type F = *const Fint;
    type Held = *const c_int;
    type C = *const c_int;
    unsafe fn enter(f: Self::F, _: usize) -> *const c_int {
        let s = sentinels();
        if s.unweighted.contains(&(f as usize)) {
            mpi::unweighted()
        } else if s.weights_empty.contains(&(f as usize)) {
            mpi::weights_empty()
        } else {
            f
        }
    }
    fn c(held: &mut *const c_int) -> *const c_int {
        *held
    }
}

/// Defines a handle kind, in, converted with MPI's own `f2c`.
macro_rules! handle_in {
    ($in:ident, $ty:ty, $f2c:path) => {
        pub struct $in;
        impl Arg for $in {
            type F = *const Fint;
            type Held = $ty;
            type C = $ty;
            unsafe fn enter(f: Self::F, _: usize) -> $ty {
                // SAFETY: the caller's handle.
                $f2c(unsafe { *f })
            }
            fn c(held: &mut $ty) -> $ty {
                *held
            }
        }
    };
}

/// Defines a handle kind, out: `$null` until the call writes it.
macro_rules! handle_out {
    ($out:ident, $ty:ty, $c2f:path, $null:expr) => {
        pub struct $out;
        impl Arg for $out {
            type F = *mut Fint;
            type Held = ($ty, *mut Fint);
            type C = *mut $ty;
            unsafe fn enter(f: Self::F, _: usize) -> Self::Held {
                ($null, f)
            }
            fn c(held: &mut Self::Held) -> *mut $ty {
                &mut held.0
            }
            unsafe fn leave((handle, f): Self::Held, _: usize) {
                // SAFETY: the caller's handle.
                unsafe { *f = $c2f(handle) };
            }
        }
    };
}

/// Defines a handle kind, in and out.
macro_rules! handle_in_out {
    ($inout:ident, $ty:ty, $f2c:path, $c2f:path) => {
        pub struct $inout;
        impl Arg for $inout {
            type F = *mut Fint;
            type Held = ($ty, *mut Fint);
            type C = *mut $ty;
            unsafe fn enter(f: Self::F, _: usize) -> Self::Held {
                // SAFETY: the caller's handle.
                ($f2c(unsafe { *f }), f)
            }
            fn c(held: &mut Self::Held) -> *mut $ty {
                &mut held.0
            }
            unsafe fn leave((handle, f): Self::Held, _: usize) {
                // SAFETY: the caller's handle.
                unsafe { *f = $c2f(handle) };
            }
        }
    };
}

handle_in!(Comm, MPI_Comm, fh::comm_f2c);
handle_in!(Group, MPI_Group, fh::group_f2c);
handle_in!(Info, MPI_Info, fh::info_f2c);
handle_in!(Request, MPI_Request, fh::request_f2c);
handle_out!(CommOut, MPI_Comm, fh::comm_c2f, abi().comm_null);
handle_in_out!(CommInOut, MPI_Comm, fh::comm_f2c, fh::comm_c2f);
handle_out!(RequestOut, MPI_Request, fh::request_c2f, abi().request_null);
handle_in_out!(RequestInOut, MPI_Request, fh::request_f2c, fh::request_c2f);
handle_out!(MessageOut, MPI_Message, fh::message_c2f, abi().message_null);
#[cfg(openmpi)]
handle_in!(Datatype, MPI_Datatype, fh::type_f2c);
#[cfg(openmpi)]
handle_in!(Op, MPI_Op, fh::op_f2c);

/// A request array, in and out: C handles during the call, written back after it.
pub struct Requests;
impl Arg for Requests {
    type F = *mut Fint;
    type Held = (Vec<MPI_Request>, *mut Fint);
    type C = *mut MPI_Request;
    unsafe fn enter(f: Self::F, len: usize) -> Self::Held {
        // SAFETY: the caller's `len` handles.
        let c = (0..len).map(|i| fh::request_f2c(unsafe { *f.add(i) }));
        (c.collect(), f)
    }
    fn c(held: &mut Self::Held) -> *mut MPI_Request {
        held.0.as_mut_ptr()
    }
    unsafe fn leave((c, f): Self::Held, _: usize) {
        for (i, &r) in c.iter().enumerate() {
            // SAFETY: the caller's array, as long as when it came in.
            unsafe { *f.add(i) = fh::request_c2f(r) };
        }
    }
}

/// A datatype per rank of the communicator (`MPI_ALLTOALLW`).
#[cfg(openmpi)]
pub struct Datatypes;
#[cfg(openmpi)]
impl Arg for Datatypes {
    type F = *const Fint;
    type Held = Vec<MPI_Datatype>;
    type C = *const MPI_Datatype;
    unsafe fn enter(f: Self::F, len: usize) -> Self::Held {
        // SAFETY: the caller's `len` handles.
        (0..len)
            .map(|i| fh::type_f2c(unsafe { *f.add(i) }))
            .collect()
    }
    fn c(held: &mut Self::Held) -> *const MPI_Datatype {
        held.as_ptr()
    }
}

/// The ranks a Fortran communicator's arrays are indexed by (its remote group's, for an
/// inter-communicator).
///
/// # Safety
/// `comm` is the caller's handle.
#[cfg(openmpi)]
pub unsafe fn ranks_of(comm: *const Fint) -> usize {
    // SAFETY: the caller's handle.
    let comm = fh::comm_f2c(unsafe { *comm });
    mpi::comm_shape(comm).map_or(0, |(size, _, _)| size.max(0) as usize)
}

/// A Fortran status (Open MPI's `INTEGER(MPI_STATUS_SIZE)` and `TYPE(MPI_Status)` alike), out:
/// the C call sees the user's status, so a field it leaves stays as the user set it.
#[cfg(openmpi)]
pub struct Status;
#[cfg(openmpi)]
impl Arg for Status {
    type F = *mut Fint;
    type Held = (MPI_Status, *mut Fint);
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F, _: usize) -> Self::Held {
        let mut status = mpi::zeroed_status();
        if !ignored(f, &sentinels().status_ignore) {
            // SAFETY: a Fortran status the caller passed.
            unsafe { fh::status_f2c(f, &mut status) };
        }
        (status, f)
    }
    fn c(held: &mut Self::Held) -> *mut MPI_Status {
        if ignored(held.1, &sentinels().status_ignore) {
            abi().status_ignore
        } else {
            &mut held.0
        }
    }
    unsafe fn leave((status, f): Self::Held, _: usize) {
        if !ignored(f, &sentinels().status_ignore) {
            // SAFETY: as for `enter`.
            unsafe { fh::status_c2f(&status, f) };
        }
    }
}

/// MPICH's `TYPE(MPI_Status)`: the C status itself.
#[cfg(mpich)]
pub struct Status;
#[cfg(mpich)]
impl Arg for Status {
    type F = *mut MPI_Status;
    type Held = *mut MPI_Status;
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F, _: usize) -> *mut MPI_Status {
        if ignored(f.cast(), &sentinels().status_ignore) {
            abi().status_ignore
        } else {
            f
        }
    }
    fn c(held: &mut *mut MPI_Status) -> *mut MPI_Status {
        *held
    }
}

/// Open MPI's `INTEGER(MPI_STATUS_SIZE, *)` and `TYPE(MPI_Status)` arrays: converted one by one.
#[cfg(openmpi)]
pub struct Statuses;
#[cfg(openmpi)]
impl Arg for Statuses {
    type F = *mut Fint;
    type Held = Option<(Vec<MPI_Status>, *mut Fint)>;
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F, len: usize) -> Self::Held {
        if ignored(f, &sentinels().statuses_ignore) {
            return None;
        }
        let statuses = (0..len)
            .map(|i| {
                let mut status = mpi::zeroed_status();
                // SAFETY: the caller's `len` statuses.
                unsafe { fh::status_f2c(f.add(i * STATUS_SIZE), &mut status) };
                status
            })
            .collect();
        Some((statuses, f))
    }
    fn c(held: &mut Self::Held) -> *mut MPI_Status {
        match held {
            Some((statuses, _)) => statuses.as_mut_ptr(),
            None => abi().statuses_ignore,
        }
    }
    unsafe fn leave(held: Self::Held, _: usize) {
        if let Some((statuses, f)) = held {
            for (i, status) in statuses.iter().enumerate() {
                // SAFETY: the caller's statuses, as many as came in.
                unsafe { fh::status_c2f(status, f.add(i * STATUS_SIZE)) };
            }
        }
    }
}

/// The `INTEGER`s of one Fortran status (Open MPI's `MPI_STATUS_SIZE`): a C status's bytes.
#[cfg(openmpi)]
const STATUS_SIZE: usize = std::mem::size_of::<MPI_Status>() / std::mem::size_of::<Fint>();

/// MPICH's `TYPE(MPI_Status)` arrays: C statuses.
#[cfg(mpich)]
pub struct Statuses;
#[cfg(mpich)]
impl Arg for Statuses {
    type F = *mut MPI_Status;
    type Held = *mut MPI_Status;
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F, _: usize) -> *mut MPI_Status {
        if ignored(f.cast(), &sentinels().statuses_ignore) {
            abi().statuses_ignore
        } else {
            f
        }
    }
    fn c(held: &mut *mut MPI_Status) -> *mut MPI_Status {
        *held
    }
}

/// Null, or one of the binding's sentinels (compared by address only).
fn ignored(f: *const Fint, sentinels: &[usize]) -> bool {
    f.is_null() || sentinels.contains(&(f as usize))
}

/// Stores the code where the caller asked for it (`ierror` is optional in `mpi_f08`).
///
/// # Safety
/// `ierr` is null or the caller's `INTEGER`.
pub unsafe fn set_ierr(ierr: *mut Fint, code: c_int) {
    if !ierr.is_null() {
        // SAFETY: as the caller promises.
        unsafe { *ierr = code };
    }
}

/// `MPI_INIT` through the MPI's own Fortran entry point `name`, which also sets up its Fortran
/// side, with the shim around it.
///
/// # Safety
/// Called as `MPI_INIT` is.
pub unsafe fn init(name: &CStr) -> c_int {
    // SAFETY: MPI's own MPI_INIT under the same name, or its C form.
    init_shim(|| unsafe { mpi::fortran_init(name) })
}

/// `MPI_INIT_THREAD` as [`init`].
///
/// # Safety
/// The caller's `required` and `provided`, valid as MPI requires them.
pub unsafe fn init_thread(name: &CStr, required: *const Fint, provided: *mut Fint) -> c_int {
    // SAFETY: as for `init`.
    init_shim(|| unsafe { mpi::fortran_init_thread(name, required, provided) })
}
