//! The Fortran entry points, for the bindings that would otherwise reach `PMPI_*` without the
//! shim: all of Open MPI's (`mpif.h`, `use mpi`, `use mpi_f08`: `mpi_recv_`, `mpi_recv__`,
//! `mpi_recv`, `MPI_RECV`, `mpi_recv_f08_`) and MPICH's `use mpi_f08` calls without a buffer
//! (`mpi_wait_f08_`, ...). MPICH's other Fortran bindings call the C `MPI_*` functions, which
//! the shim already is. Each entry point converts its arguments (handles, statuses, `LOGICAL`s,
//! Fortran's `MPI_IN_PLACE` and `MPI_STATUS_IGNORE`) and calls the shim's C entry point.
//!
//! Statuses: Open MPI's Fortran status (also `TYPE(MPI_Status)`) is converted with
//! `MPI_Status_f2c`/`c2f`, its `MPI_ERROR` kept as the C call keeps it; MPICH's
//! `TYPE(MPI_Status)` is the C status itself. `ierror` is optional in `mpi_f08`: absent, it
//! arrives as a null pointer.

use super::{coll::*, comms::*, init::*, p2p::*, requests::*};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};
use std::sync::OnceLock;

/// One kind of Fortran argument: what arrives, what is held during the call, what the C
/// entry point takes, and what goes back afterwards.
pub trait Arg {
    type F: Copy;
    type Held;
    type C;
    /// # Safety
    /// `f` is the argument as the Fortran caller passed it.
    unsafe fn enter(f: Self::F) -> Self::Held;
    fn c(held: &mut Self::Held) -> Self::C;
    /// # Safety
    /// As for `enter`.
    unsafe fn leave(_held: Self::Held) {}
}

/// Fortran's `LOGICAL` `.TRUE.` as gfortran, MPICH and Open MPI store it.
const TRUE: Fint = 1;

/// `INTEGER`, in.
pub struct Int;
impl Arg for Int {
    type F = *const Fint;
    type Held = c_int;
    type C = c_int;
    unsafe fn enter(f: Self::F) -> c_int {
        *f
    }
    fn c(held: &mut c_int) -> c_int {
        *held
    }
}

/// An `INTEGER` array, in (counts, displacements, ranks): the same ints in C.
pub struct Ints;
impl Arg for Ints {
    type F = *const Fint;
    type Held = *const c_int;
    type C = *const c_int;
    unsafe fn enter(f: Self::F) -> *const c_int {
        f
    }
    fn c(held: &mut *const c_int) -> *const c_int {
        *held
    }
}

/// `LOGICAL`, in.
pub struct Logical;
impl Arg for Logical {
    type F = *const Fint;
    type Held = c_int;
    type C = c_int;
    unsafe fn enter(f: Self::F) -> c_int {
        (*f != 0) as c_int
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
    unsafe fn enter(f: Self::F) -> Self::Held {
        (0, f)
    }
    fn c(held: &mut Self::Held) -> *mut c_int {
        &mut held.0
    }
    unsafe fn leave((value, f): Self::Held) {
        *f = if value != 0 { TRUE } else { 0 };
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
        let find = |names: &[&str]| -> Vec<usize> {
            names
                .iter()
                .filter_map(|name| {
                    let name = std::ffi::CString::new(*name).expect("no NUL");
                    // SAFETY: dlsym with a valid C string.
                    let at = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
                    (!at.is_null()).then_some(at as usize)
                })
                .collect()
        };
        Sentinels {
            #[cfg(openmpi)]
            in_place: find(&["mpi_fortran_in_place_"]),
            #[cfg(openmpi)]
            bottom: find(&["mpi_fortran_bottom_"]),
            #[cfg(openmpi)]
            unweighted: find(&["mpi_fortran_unweighted_"]),
            #[cfg(openmpi)]
            weights_empty: find(&["mpi_fortran_weights_empty_"]),
            status_ignore: find(&[
                "mpi_fortran_status_ignore_",
                "MPIR_F08_MPI_STATUS_IGNORE_OBJ",
            ]),
            statuses_ignore: find(&[
                "mpi_fortran_statuses_ignore_",
                "MPIR_F08_MPI_STATUSES_IGNORE_OBJ",
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
    unsafe fn enter(f: Self::F) -> *mut c_void {
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

/// Graph edge weights: Fortran's `MPI_UNWEIGHTED` and `MPI_WEIGHTS_EMPTY` become C's.
#[cfg(openmpi)]
pub struct Weights;
#[cfg(openmpi)]
impl Arg for Weights {
    type F = *const Fint;
    type Held = *const c_int;
    type C = *const c_int;
    unsafe fn enter(f: Self::F) -> *const c_int {
        let s = sentinels();
        if s.unweighted.contains(&(f as usize)) {
            ms_unweighted()
        } else if s.weights_empty.contains(&(f as usize)) {
            ms_weights_empty()
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
    ($in:ident, $ty:ty, $f2c:ident) => {
        pub struct $in;
        impl Arg for $in {
            type F = *const Fint;
            type Held = $ty;
            type C = $ty;
            unsafe fn enter(f: Self::F) -> $ty {
                $f2c(*f)
            }
            fn c(held: &mut $ty) -> $ty {
                *held
            }
        }
    };
}

/// Defines a handle kind, out (`$fill`: converted from the caller's value first, for in-out).
macro_rules! handle_out {
    ($out:ident, $ty:ty, $c2f:ident, |$f:ident| $fill:expr) => {
        pub struct $out;
        impl Arg for $out {
            type F = *mut Fint;
            type Held = ($ty, *mut Fint);
            type C = *mut $ty;
            unsafe fn enter($f: Self::F) -> Self::Held {
                ($fill, $f)
            }
            fn c(held: &mut Self::Held) -> *mut $ty {
                &mut held.0
            }
            unsafe fn leave((handle, f): Self::Held) {
                *f = $c2f(handle);
            }
        }
    };
}

handle_in!(Comm, MPI_Comm, ms_comm_f2c);
handle_in!(Group, MPI_Group, ms_group_f2c);
handle_in!(Info, MPI_Info, ms_info_f2c);
handle_in!(Request, MPI_Request, ms_request_f2c);
handle_out!(CommOut, MPI_Comm, ms_comm_c2f, |f| abi().comm_null);
handle_out!(CommInOut, MPI_Comm, ms_comm_c2f, |f| ms_comm_f2c(*f));
handle_out!(RequestOut, MPI_Request, ms_request_c2f, |f| abi()
    .request_null);
handle_out!(RequestInOut, MPI_Request, ms_request_c2f, |f| {
    ms_request_f2c(*f)
});
handle_out!(MessageOut, MPI_Message, ms_message_c2f, |f| abi()
    .message_null);
#[cfg(openmpi)]
handle_in!(Type, MPI_Datatype, ms_type_f2c);
#[cfg(openmpi)]
handle_in!(Op, MPI_Op, ms_op_f2c);

/// A Fortran status (Open MPI's `INTEGER(MPI_STATUS_SIZE)` and `TYPE(MPI_Status)` alike), out:
/// the C call sees the user's status, so a field it leaves stays as the user set it.
#[cfg(openmpi)]
pub struct Status;
#[cfg(openmpi)]
impl Arg for Status {
    type F = *mut Fint;
    type Held = (MPI_Status, *mut Fint);
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F) -> Self::Held {
        let mut status = crate::mpi::zeroed_status();
        if !ignored(f, &sentinels().status_ignore) {
            PMPI_Status_f2c(f, &mut status);
        }
        (status, f)
    }
    fn c(held: &mut Self::Held) -> *mut MPI_Status {
        // SAFETY: reading the address of a sentinel, as `enter` checked it.
        if unsafe { ignored(held.1, &sentinels().status_ignore) } {
            abi().status_ignore
        } else {
            &mut held.0
        }
    }
    unsafe fn leave((status, f): Self::Held) {
        if !ignored(f, &sentinels().status_ignore) {
            PMPI_Status_c2f(&status, f);
        }
    }
}

/// MPICH's `TYPE(MPI_Status)`: the C status itself.
#[cfg(mpich)]
pub struct CStatus;
#[cfg(mpich)]
impl Arg for CStatus {
    type F = *mut MPI_Status;
    type Held = *mut MPI_Status;
    type C = *mut MPI_Status;
    unsafe fn enter(f: Self::F) -> *mut MPI_Status {
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

unsafe fn ignored(f: *const Fint, sentinels: &[usize]) -> bool {
    f.is_null() || sentinels.contains(&(f as usize))
}

unsafe fn set_ierr(ierr: *mut Fint, code: c_int) {
    if !ierr.is_null() {
        *ierr = code;
    }
}

/// Defines Fortran entry points named `$names` for the C entry point `$c`.
macro_rules! fortran {
    ($c:ident => [$($name:ident),+ $(,)?] $args:tt) => {
        $(fortran_one!($c, $name, $args);)+
    };
}

macro_rules! fortran_one {
    ($c:ident, $name:ident, ($($arg:ident : $kind:ty),* $(,)?)) => {
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: <$kind as Arg>::F,)* ierr: *mut Fint) {
            $(let mut $arg = <$kind as Arg>::enter($arg);)*
            let code = $c($(<$kind as Arg>::c(&mut $arg)),*);
            $(<$kind as Arg>::leave($arg);)*
            set_ierr(ierr, code);
        }
    };
}

/// Entry points for every name a Fortran binding of Open MPI may use for `$lower`.
#[cfg(openmpi)]
macro_rules! all_names {
    ($c:ident, $lower:ident, $upper:ident ($($arg:ident : $kind:ty),* $(,)?)) => {
        paste::paste! {
            fortran!($c => [[<$lower _>], [<$lower __>], $lower, $upper, [<$lower _f08_>]]
                ($($arg: $kind),*));
        }
    };
}

// ---- shared by both MPIs -------------------------------------------------------------------

/// How a binding lays out an array of statuses.
pub trait StatusArray {
    type F: Copy;
    type Held;
    /// # Safety
    /// `f` holds `n` statuses, or is the binding's `MPI_STATUSES_IGNORE`.
    unsafe fn enter(f: Self::F, n: usize) -> Self::Held;
    fn c(held: &mut Self::Held) -> *mut MPI_Status;
    /// # Safety
    /// As for `enter`.
    unsafe fn leave(held: Self::Held);
}

/// Open MPI's `INTEGER(MPI_STATUS_SIZE, *)` and `TYPE(MPI_Status)` arrays: converted one by one.
#[cfg(openmpi)]
pub struct FortranStatuses;
#[cfg(openmpi)]
impl StatusArray for FortranStatuses {
    type F = *mut Fint;
    type Held = Option<(Vec<MPI_Status>, *mut Fint)>;
    unsafe fn enter(f: Self::F, n: usize) -> Self::Held {
        if ignored(f, &sentinels().statuses_ignore) {
            return None;
        }
        let statuses = (0..n)
            .map(|i| {
                let mut status = crate::mpi::zeroed_status();
                PMPI_Status_f2c(f.add(i * STATUS_SIZE), &mut status);
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
    unsafe fn leave(held: Self::Held) {
        if let Some((statuses, f)) = held {
            for (i, status) in statuses.iter().enumerate() {
                PMPI_Status_c2f(status, f.add(i * STATUS_SIZE));
            }
        }
    }
}

/// The `INTEGER`s of one Fortran status (Open MPI's `MPI_STATUS_SIZE`): a C status's bytes.
#[cfg(openmpi)]
const STATUS_SIZE: usize = std::mem::size_of::<MPI_Status>() / std::mem::size_of::<Fint>();

/// MPICH's `TYPE(MPI_Status)` arrays: C statuses.
#[cfg(mpich)]
pub struct CStatuses;
#[cfg(mpich)]
impl StatusArray for CStatuses {
    type F = *mut MPI_Status;
    type Held = *mut MPI_Status;
    unsafe fn enter(f: Self::F, _n: usize) -> *mut MPI_Status {
        if ignored(f.cast(), &sentinels().statuses_ignore) {
            abi().statuses_ignore
        } else {
            f
        }
    }
    fn c(held: &mut *mut MPI_Status) -> *mut MPI_Status {
        *held
    }
    unsafe fn leave(_held: *mut MPI_Status) {}
}

/// `MPI_WAITALL`, `MPI_TESTALL`, `MPI_WAITANY`, `MPI_TESTANY`, `MPI_WAITSOME`, `MPI_TESTSOME`
/// and `MPI_STARTALL` for a binding whose statuses are `$many` and `$one`.
macro_rules! request_arrays {
    ($many:ty, $one:ty, [$($waitall:ident),+], [$($testall:ident),+], [$($waitany:ident),+],
     [$($testany:ident),+], [$($waitsome:ident),+], [$($testsome:ident),+],
     [$($startall:ident),+]) => {
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $waitall(count: *const Fint, requests: *mut Fint,
                    statuses: <$many as StatusArray>::F, ierr: *mut Fint) {
                let mut held = <$many>::enter(statuses, (*count).max(0) as usize);
                let code = with_requests(*count, requests,
                    |r| MPI_Waitall(*count, r, <$many>::c(&mut held)));
                <$many>::leave(held);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $testall(count: *const Fint, requests: *mut Fint,
                    flag: *mut Fint, statuses: <$many as StatusArray>::F,
                    ierr: *mut Fint) {
                let mut held = <$many>::enter(statuses, (*count).max(0) as usize);
                let mut done = Flag::enter(flag);
                let code = with_requests(*count, requests,
                    |r| MPI_Testall(*count, r, Flag::c(&mut done), <$many>::c(&mut held)));
                Flag::leave(done);
                <$many>::leave(held);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $waitany(count: *const Fint, requests: *mut Fint,
                    index: *mut Fint, status: <$one as Arg>::F, ierr: *mut Fint) {
                let mut held = <$one>::enter(status);
                let mut i = 0;
                let code = with_requests(*count, requests,
                    |r| MPI_Waitany(*count, r, &mut i, <$one>::c(&mut held)));
                <$one>::leave(held);
                *index = fortran_index(i);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $testany(count: *const Fint, requests: *mut Fint,
                    index: *mut Fint, flag: *mut Fint, status: <$one as Arg>::F,
                    ierr: *mut Fint) {
                let mut held = <$one>::enter(status);
                let mut done = Flag::enter(flag);
                let mut i = 0;
                let code = with_requests(*count, requests, |r| {
                    MPI_Testany(*count, r, &mut i, Flag::c(&mut done), <$one>::c(&mut held))
                });
                Flag::leave(done);
                <$one>::leave(held);
                *index = fortran_index(i);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $waitsome(count: *const Fint, requests: *mut Fint,
                    outcount: *mut Fint, indices: *mut Fint,
                    statuses: <$many as StatusArray>::F, ierr: *mut Fint) {
                let mut held = <$many>::enter(statuses, (*count).max(0) as usize);
                let code = with_requests(*count, requests,
                    |r| MPI_Waitsome(*count, r, outcount, indices, <$many>::c(&mut held)));
                <$many>::leave(held);
                fortran_indices(*outcount, indices);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $testsome(count: *const Fint, requests: *mut Fint,
                    outcount: *mut Fint, indices: *mut Fint,
                    statuses: <$many as StatusArray>::F, ierr: *mut Fint) {
                let mut held = <$many>::enter(statuses, (*count).max(0) as usize);
                let code = with_requests(*count, requests,
                    |r| MPI_Testsome(*count, r, outcount, indices, <$many>::c(&mut held)));
                <$many>::leave(held);
                fortran_indices(*outcount, indices);
                set_ierr(ierr, code);
            }
        )+
        $(
            #[no_mangle]
            pub unsafe extern "C" fn $startall(count: *const Fint, requests: *mut Fint,
                    ierr: *mut Fint) {
                let code = with_requests(*count, requests, |r| MPI_Startall(*count, r));
                set_ierr(ierr, code);
            }
        )+
    };
}

/// Runs `call` on the C handles of a Fortran request array, then writes them back.
unsafe fn with_requests(
    count: Fint,
    requests: *mut Fint,
    call: impl FnOnce(*mut MPI_Request) -> c_int,
) -> c_int {
    let n = count.max(0) as usize;
    let mut c: Vec<MPI_Request> = (0..n).map(|i| ms_request_f2c(*requests.add(i))).collect();
    let code = call(c.as_mut_ptr());
    for (i, &r) in c.iter().enumerate() {
        *requests.add(i) = ms_request_c2f(r);
    }
    code
}

/// Fortran counts from 1; `MPI_UNDEFINED` stays.
fn fortran_index(i: c_int) -> Fint {
    if i == abi().undefined {
        i
    } else {
        i + 1
    }
}

unsafe fn fortran_indices(outcount: Fint, indices: *mut Fint) {
    for k in 0..outcount.max(0) as usize {
        *indices.add(k) += 1;
    }
}

/// The MPI library's own Fortran entry point `name`, the one this library stands before.
unsafe fn next(name: &std::ffi::CStr) -> *mut c_void {
    libc::dlsym(libc::RTLD_NEXT, name.as_ptr())
}

/// `MPI_INIT` through the MPI's own Fortran entry point, which also sets up its Fortran side,
/// with the shim around it.
unsafe fn init_through_next(name: &std::ffi::CStr, ierr: *mut Fint) {
    let own = next(name);
    let code = init_shim(|| {
        let mut code = abi().success;
        if own.is_null() {
            code = PMPI_Init(std::ptr::null_mut(), std::ptr::null_mut());
        } else {
            let own: unsafe extern "C" fn(*mut Fint) = std::mem::transmute(own);
            own(&mut code);
        }
        code
    });
    set_ierr(ierr, code);
}

unsafe fn init_thread_through_next(
    name: &std::ffi::CStr,
    required: *const Fint,
    provided: *mut Fint,
    ierr: *mut Fint,
) {
    let own = next(name);
    let code = init_shim(|| {
        let mut code = abi().success;
        if own.is_null() {
            code = PMPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                *required,
                provided,
            );
        } else {
            let own: unsafe extern "C" fn(*const Fint, *mut Fint, *mut Fint) =
                std::mem::transmute(own);
            own(required, provided, &mut code);
        }
        code
    });
    set_ierr(ierr, code);
}

// ---- MPICH: the mpi_f08 calls that skip the C entry points -------------------------------

/// MPICH's `use mpi_f08` entry points that call `PMPI_*` directly.
#[cfg(mpich)]
mod mpich_f08 {
    use super::*;

    fortran!(MPI_Probe => [mpi_probe_f08_] (source: Int, tag: Int, comm: Comm, status: CStatus));
    fortran!(MPI_Iprobe => [mpi_iprobe_f08_]
        (source: Int, tag: Int, comm: Comm, flag: Flag, status: CStatus));
    fortran!(MPI_Mprobe => [mpi_mprobe_f08_]
        (source: Int, tag: Int, comm: Comm, message: MessageOut, status: CStatus));
    fortran!(MPI_Improbe => [mpi_improbe_f08_]
        (source: Int, tag: Int, comm: Comm, flag: Flag, message: MessageOut, status: CStatus));
    fortran!(MPI_Wait => [mpi_wait_f08_] (request: RequestInOut, status: CStatus));
    fortran!(MPI_Test => [mpi_test_f08_] (request: RequestInOut, flag: Flag, status: CStatus));
    fortran!(MPI_Request_get_status => [mpi_request_get_status_f08_]
        (request: Request, flag: Flag, status: CStatus));
    fortran!(MPI_Request_free => [mpi_request_free_f08_] (request: RequestInOut));
    fortran!(MPI_Cancel => [mpi_cancel_f08_] (request: RequestInOut));
    fortran!(MPI_Start => [mpi_start_f08_] (request: RequestInOut));
    fortran!(MPI_Barrier => [mpi_barrier_f08_] (comm: Comm));
    fortran!(MPI_Ibarrier => [mpi_ibarrier_f08_] (comm: Comm, request: RequestOut));
    fortran!(MPI_Comm_free => [mpi_comm_free_f08_] (comm: CommInOut));
    fortran!(MPI_Comm_disconnect => [mpi_comm_disconnect_f08_] (comm: CommInOut));
    fortran!(MPI_Finalize => [mpi_finalize_f08_] ());

    request_arrays!(
        CStatuses,
        CStatus,
        [mpi_waitall_f08_],
        [mpi_testall_f08_],
        [mpi_waitany_f08_],
        [mpi_testany_f08_],
        [mpi_waitsome_f08_],
        [mpi_testsome_f08_],
        [mpi_startall_f08_]
    );

    fortran!(MPI_Comm_dup => [mpi_comm_dup_f08_] (comm: Comm, newcomm: CommOut));
    fortran!(MPI_Comm_dup_with_info => [mpi_comm_dup_with_info_f08_]
        (comm: Comm, info: Info, newcomm: CommOut));
    fortran!(MPI_Comm_split => [mpi_comm_split_f08_]
        (comm: Comm, color: Int, key: Int, newcomm: CommOut));
    fortran!(MPI_Comm_split_type => [mpi_comm_split_type_f08_]
        (comm: Comm, split_type: Int, key: Int, info: Info, newcomm: CommOut));
    fortran!(MPI_Comm_create => [mpi_comm_create_f08_]
        (comm: Comm, group: Group, newcomm: CommOut));
    fortran!(MPI_Comm_create_group => [mpi_comm_create_group_f08_]
        (comm: Comm, group: Group, tag: Int, newcomm: CommOut));
    fortran!(MPI_Intercomm_merge => [mpi_intercomm_merge_f08_]
        (intercomm: Comm, high: Logical, newcomm: CommOut));
    fortran!(MPI_Cart_create => [mpi_cart_create_f08_]
        (comm: Comm, ndims: Int, dims: Ints, periods: Ints, reorder: Logical,
         newcomm: CommOut));
    fortran!(MPI_Cart_sub => [mpi_cart_sub_f08_] (comm: Comm, remain_dims: Ints, newcomm: CommOut));
    fortran!(MPI_Graph_create => [mpi_graph_create_f08_]
        (comm: Comm, nnodes: Int, index: Ints, edges: Ints, reorder: Logical,
         newcomm: CommOut));

    #[no_mangle]
    pub unsafe extern "C" fn mpi_init_f08_(ierr: *mut Fint) {
        init_through_next(c"mpi_init_f08_", ierr);
    }

    #[no_mangle]
    pub unsafe extern "C" fn mpi_init_thread_f08_(
        required: *const Fint,
        provided: *mut Fint,
        ierr: *mut Fint,
    ) {
        init_thread_through_next(c"mpi_init_thread_f08_", required, provided, ierr);
    }
}

// ---- Open MPI: every Fortran binding calls PMPI_* -----------------------------------------

#[cfg(openmpi)]
mod openmpi {
    use super::*;

    all_names!(MPI_Send, mpi_send, MPI_SEND
        (buf: Buf, count: Int, datatype: Type, dest: Int, tag: Int, comm: Comm));
    all_names!(MPI_Ssend, mpi_ssend, MPI_SSEND
        (buf: Buf, count: Int, datatype: Type, dest: Int, tag: Int, comm: Comm));
    all_names!(MPI_Rsend, mpi_rsend, MPI_RSEND
        (buf: Buf, count: Int, datatype: Type, dest: Int, tag: Int, comm: Comm));
    all_names!(MPI_Recv, mpi_recv, MPI_RECV
        (buf: Buf, count: Int, datatype: Type, source: Int, tag: Int, comm: Comm, status: Status));
    all_names!(MPI_Irecv, mpi_irecv, MPI_IRECV
        (buf: Buf, count: Int, datatype: Type, source: Int, tag: Int, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Recv_init, mpi_recv_init, MPI_RECV_INIT
        (buf: Buf, count: Int, datatype: Type, source: Int, tag: Int, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Sendrecv, mpi_sendrecv, MPI_SENDRECV
        (sendbuf: Buf, sendcount: Int, sendtype: Type, dest: Int, sendtag: Int,
         recvbuf: Buf, recvcount: Int, recvtype: Type, source: Int, recvtag: Int, comm: Comm,
         status: Status));
    all_names!(MPI_Sendrecv_replace, mpi_sendrecv_replace, MPI_SENDRECV_REPLACE
        (buf: Buf, count: Int, datatype: Type, dest: Int, sendtag: Int, source: Int,
         recvtag: Int, comm: Comm, status: Status));
    all_names!(MPI_Probe, mpi_probe, MPI_PROBE
        (source: Int, tag: Int, comm: Comm, status: Status));
    all_names!(MPI_Iprobe, mpi_iprobe, MPI_IPROBE
        (source: Int, tag: Int, comm: Comm, flag: Flag, status: Status));
    all_names!(MPI_Mprobe, mpi_mprobe, MPI_MPROBE
        (source: Int, tag: Int, comm: Comm, message: MessageOut, status: Status));
    all_names!(MPI_Improbe, mpi_improbe, MPI_IMPROBE
        (source: Int, tag: Int, comm: Comm, flag: Flag, message: MessageOut, status: Status));

    all_names!(MPI_Wait, mpi_wait, MPI_WAIT (request: RequestInOut, status: Status));
    all_names!(MPI_Test, mpi_test, MPI_TEST (request: RequestInOut, flag: Flag, status: Status));
    all_names!(MPI_Request_get_status, mpi_request_get_status, MPI_REQUEST_GET_STATUS
        (request: Request, flag: Flag, status: Status));
    all_names!(MPI_Request_free, mpi_request_free, MPI_REQUEST_FREE (request: RequestInOut));
    all_names!(MPI_Cancel, mpi_cancel, MPI_CANCEL (request: RequestInOut));
    all_names!(MPI_Start, mpi_start, MPI_START (request: RequestInOut));

    all_names!(MPI_Barrier, mpi_barrier, MPI_BARRIER (comm: Comm));
    all_names!(MPI_Ibarrier, mpi_ibarrier, MPI_IBARRIER (comm: Comm, request: RequestOut));
    all_names!(MPI_Bcast, mpi_bcast, MPI_BCAST
        (buffer: Buf, count: Int, datatype: Type, root: Int, comm: Comm));
    all_names!(MPI_Ibcast, mpi_ibcast, MPI_IBCAST
        (buffer: Buf, count: Int, datatype: Type, root: Int, comm: Comm, request: RequestOut));
    all_names!(MPI_Reduce, mpi_reduce, MPI_REDUCE
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, root: Int, comm: Comm));
    all_names!(MPI_Ireduce, mpi_ireduce, MPI_IREDUCE
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, root: Int, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Allreduce, mpi_allreduce, MPI_ALLREDUCE
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm));
    all_names!(MPI_Iallreduce, mpi_iallreduce, MPI_IALLREDUCE
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Gather, mpi_gather, MPI_GATHER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, root: Int, comm: Comm));
    all_names!(MPI_Igather, mpi_igather, MPI_IGATHER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, root: Int, comm: Comm, request: RequestOut));
    all_names!(MPI_Gatherv, mpi_gatherv, MPI_GATHERV
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcounts: Ints,
         displs: Ints, recvtype: Type, root: Int, comm: Comm));
    all_names!(MPI_Igatherv, mpi_igatherv, MPI_IGATHERV
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcounts: Ints,
         displs: Ints, recvtype: Type, root: Int, comm: Comm, request: RequestOut));
    all_names!(MPI_Scatter, mpi_scatter, MPI_SCATTER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, root: Int, comm: Comm));
    all_names!(MPI_Iscatter, mpi_iscatter, MPI_ISCATTER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, root: Int, comm: Comm, request: RequestOut));
    all_names!(MPI_Scatterv, mpi_scatterv, MPI_SCATTERV
        (sendbuf: Buf, sendcounts: Ints, displs: Ints, sendtype: Type, recvbuf: Buf,
         recvcount: Int, recvtype: Type, root: Int, comm: Comm));
    all_names!(MPI_Iscatterv, mpi_iscatterv, MPI_ISCATTERV
        (sendbuf: Buf, sendcounts: Ints, displs: Ints, sendtype: Type, recvbuf: Buf,
         recvcount: Int, recvtype: Type, root: Int, comm: Comm, request: RequestOut));
    all_names!(MPI_Allgather, mpi_allgather, MPI_ALLGATHER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, comm: Comm));
    all_names!(MPI_Iallgather, mpi_iallgather, MPI_IALLGATHER
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, comm: Comm, request: RequestOut));
    all_names!(MPI_Allgatherv, mpi_allgatherv, MPI_ALLGATHERV
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcounts: Ints,
         displs: Ints, recvtype: Type, comm: Comm));
    all_names!(MPI_Iallgatherv, mpi_iallgatherv, MPI_IALLGATHERV
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcounts: Ints,
         displs: Ints, recvtype: Type, comm: Comm, request: RequestOut));
    all_names!(MPI_Alltoall, mpi_alltoall, MPI_ALLTOALL
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, comm: Comm));
    all_names!(MPI_Ialltoall, mpi_ialltoall, MPI_IALLTOALL
        (sendbuf: Buf, sendcount: Int, sendtype: Type, recvbuf: Buf, recvcount: Int,
         recvtype: Type, comm: Comm, request: RequestOut));
    all_names!(MPI_Alltoallv, mpi_alltoallv, MPI_ALLTOALLV
        (sendbuf: Buf, sendcounts: Ints, sdispls: Ints, sendtype: Type, recvbuf: Buf,
         recvcounts: Ints, rdispls: Ints, recvtype: Type, comm: Comm));
    all_names!(MPI_Ialltoallv, mpi_ialltoallv, MPI_IALLTOALLV
        (sendbuf: Buf, sendcounts: Ints, sdispls: Ints, sendtype: Type, recvbuf: Buf,
         recvcounts: Ints, rdispls: Ints, recvtype: Type, comm: Comm, request: RequestOut));
    all_names!(MPI_Reduce_scatter, mpi_reduce_scatter, MPI_REDUCE_SCATTER
        (sendbuf: Buf, recvbuf: Buf, recvcounts: Ints, datatype: Type, op: Op, comm: Comm));
    all_names!(MPI_Ireduce_scatter, mpi_ireduce_scatter, MPI_IREDUCE_SCATTER
        (sendbuf: Buf, recvbuf: Buf, recvcounts: Ints, datatype: Type, op: Op, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Reduce_scatter_block, mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK
        (sendbuf: Buf, recvbuf: Buf, recvcount: Int, datatype: Type, op: Op, comm: Comm));
    all_names!(MPI_Ireduce_scatter_block, mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK
        (sendbuf: Buf, recvbuf: Buf, recvcount: Int, datatype: Type, op: Op, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Scan, mpi_scan, MPI_SCAN
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm));
    all_names!(MPI_Iscan, mpi_iscan, MPI_ISCAN
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm,
         request: RequestOut));
    all_names!(MPI_Exscan, mpi_exscan, MPI_EXSCAN
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm));
    all_names!(MPI_Iexscan, mpi_iexscan, MPI_IEXSCAN
        (sendbuf: Buf, recvbuf: Buf, count: Int, datatype: Type, op: Op, comm: Comm,
         request: RequestOut));

    all_names!(MPI_Comm_dup, mpi_comm_dup, MPI_COMM_DUP (comm: Comm, newcomm: CommOut));
    all_names!(MPI_Comm_dup_with_info, mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO
        (comm: Comm, info: Info, newcomm: CommOut));
    all_names!(MPI_Comm_split, mpi_comm_split, MPI_COMM_SPLIT
        (comm: Comm, color: Int, key: Int, newcomm: CommOut));
    all_names!(MPI_Comm_split_type, mpi_comm_split_type, MPI_COMM_SPLIT_TYPE
        (comm: Comm, split_type: Int, key: Int, info: Info, newcomm: CommOut));
    all_names!(MPI_Comm_create, mpi_comm_create, MPI_COMM_CREATE
        (comm: Comm, group: Group, newcomm: CommOut));
    all_names!(MPI_Comm_create_group, mpi_comm_create_group, MPI_COMM_CREATE_GROUP
        (comm: Comm, group: Group, tag: Int, newcomm: CommOut));
    all_names!(MPI_Intercomm_merge, mpi_intercomm_merge, MPI_INTERCOMM_MERGE
        (intercomm: Comm, high: Logical, newcomm: CommOut));
    all_names!(MPI_Graph_create, mpi_graph_create, MPI_GRAPH_CREATE
        (comm: Comm, nnodes: Int, index: Ints, edges: Ints, reorder: Logical,
         newcomm: CommOut));
    all_names!(MPI_Dist_graph_create_adjacent, mpi_dist_graph_create_adjacent,
        MPI_DIST_GRAPH_CREATE_ADJACENT
        (comm: Comm, indegree: Int, sources: Ints, sourceweights: Weights, outdegree: Int,
         destinations: Ints, destweights: Weights, info: Info, reorder: Logical,
         newcomm: CommOut));
    all_names!(MPI_Dist_graph_create, mpi_dist_graph_create, MPI_DIST_GRAPH_CREATE
        (comm: Comm, n: Int, sources: Ints, degrees: Ints, destinations: Ints,
         weights: Weights, info: Info, reorder: Logical, newcomm: CommOut));
    all_names!(MPI_Comm_free, mpi_comm_free, MPI_COMM_FREE (comm: CommInOut));
    all_names!(MPI_Comm_disconnect, mpi_comm_disconnect, MPI_COMM_DISCONNECT (comm: CommInOut));
    all_names!(MPI_Finalize, mpi_finalize, MPI_FINALIZE());

    request_arrays!(
        FortranStatuses,
        Status,
        [
            mpi_waitall_,
            mpi_waitall__,
            mpi_waitall,
            MPI_WAITALL,
            mpi_waitall_f08_
        ],
        [
            mpi_testall_,
            mpi_testall__,
            mpi_testall,
            MPI_TESTALL,
            mpi_testall_f08_
        ],
        [
            mpi_waitany_,
            mpi_waitany__,
            mpi_waitany,
            MPI_WAITANY,
            mpi_waitany_f08_
        ],
        [
            mpi_testany_,
            mpi_testany__,
            mpi_testany,
            MPI_TESTANY,
            mpi_testany_f08_
        ],
        [
            mpi_waitsome_,
            mpi_waitsome__,
            mpi_waitsome,
            MPI_WAITSOME,
            mpi_waitsome_f08_
        ],
        [
            mpi_testsome_,
            mpi_testsome__,
            mpi_testsome,
            MPI_TESTSOME,
            mpi_testsome_f08_
        ],
        [
            mpi_startall_,
            mpi_startall__,
            mpi_startall,
            MPI_STARTALL,
            mpi_startall_f08_
        ]
    );

    all_names!(MPI_Cart_create, mpi_cart_create, MPI_CART_CREATE
        (comm: Comm, ndims: Int, dims: Ints, periods: Ints, reorder: Logical,
         newcomm: CommOut));
    all_names!(MPI_Cart_sub, mpi_cart_sub, MPI_CART_SUB
        (comm: Comm, remain_dims: Ints, newcomm: CommOut));

    /// `MPI_ALLTOALLW` and `MPI_IALLTOALLW`: the datatype arrays hold one handle per rank.
    #[allow(clippy::too_many_arguments)] // MPI's own argument list
    unsafe fn alltoallw(
        sendbuf: *mut c_void,
        sendcounts: *const Fint,
        sdispls: *const Fint,
        sendtypes: *const Fint,
        recvbuf: *mut c_void,
        recvcounts: *const Fint,
        rdispls: *const Fint,
        recvtypes: *const Fint,
        comm: *const Fint,
        request: Option<*mut Fint>,
    ) -> c_int {
        let c = ms_comm_f2c(*comm);
        let (mut n, mut inter) = (0, 0);
        PMPI_Comm_test_inter(c, &mut inter);
        if inter != 0 {
            PMPI_Comm_remote_size(c, &mut n);
        } else {
            PMPI_Comm_size(c, &mut n);
        }
        let types = |f: *const Fint| -> Vec<MPI_Datatype> {
            (0..n.max(0) as usize)
                .map(|i| ms_type_f2c(*f.add(i)))
                .collect()
        };
        let (stypes, rtypes) = (types(sendtypes), types(recvtypes));
        let (sendbuf, recvbuf) = (Buf::enter(sendbuf), Buf::enter(recvbuf));
        match request {
            None => MPI_Alltoallw(
                sendbuf,
                sendcounts,
                sdispls,
                stypes.as_ptr(),
                recvbuf,
                recvcounts,
                rdispls,
                rtypes.as_ptr(),
                c,
            ),
            Some(f) => {
                let mut r = RequestOut::enter(f);
                let code = MPI_Ialltoallw(
                    sendbuf,
                    sendcounts,
                    sdispls,
                    stypes.as_ptr(),
                    recvbuf,
                    recvcounts,
                    rdispls,
                    rtypes.as_ptr(),
                    c,
                    RequestOut::c(&mut r),
                );
                RequestOut::leave(r);
                code
            }
        }
    }

    macro_rules! alltoallw_names {
        ($($name:ident),+) => { $(
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name(sendbuf: *mut c_void, sendcounts: *const Fint,
                    sdispls: *const Fint, sendtypes: *const Fint, recvbuf: *mut c_void,
                    recvcounts: *const Fint, rdispls: *const Fint,
                    recvtypes: *const Fint, comm: *const Fint, ierr: *mut Fint) {
                let code = alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                    recvcounts, rdispls, recvtypes, comm, None);
                set_ierr(ierr, code);
            }
        )+ };
    }
    alltoallw_names!(
        mpi_alltoallw_,
        mpi_alltoallw__,
        mpi_alltoallw,
        MPI_ALLTOALLW,
        mpi_alltoallw_f08_
    );

    macro_rules! ialltoallw_names {
        ($($name:ident),+) => { $(
            #[no_mangle]
            #[allow(clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name(sendbuf: *mut c_void, sendcounts: *const Fint,
                    sdispls: *const Fint, sendtypes: *const Fint, recvbuf: *mut c_void,
                    recvcounts: *const Fint, rdispls: *const Fint,
                    recvtypes: *const Fint, comm: *const Fint, request: *mut Fint,
                    ierr: *mut Fint) {
                let code = alltoallw(sendbuf, sendcounts, sdispls, sendtypes, recvbuf,
                    recvcounts, rdispls, recvtypes, comm, Some(request));
                set_ierr(ierr, code);
            }
        )+ };
    }
    ialltoallw_names!(
        mpi_ialltoallw_,
        mpi_ialltoallw__,
        mpi_ialltoallw,
        MPI_IALLTOALLW,
        mpi_ialltoallw_f08_
    );

    macro_rules! init_names {
        ($($name:ident),+) => { $(
            #[no_mangle]
            pub unsafe extern "C" fn $name(ierr: *mut Fint) {
                init_through_next(
                    std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes())
                        .expect("a symbol name"),
                    ierr,
                );
            }
        )+ };
    }
    init_names!(mpi_init_, mpi_init__, mpi_init, MPI_INIT, mpi_init_f08_);

    macro_rules! init_thread_names {
        ($($name:ident),+) => { $(
            #[no_mangle]
            pub unsafe extern "C" fn $name(required: *const Fint, provided: *mut Fint,
                    ierr: *mut Fint) {
                init_thread_through_next(
                    std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes())
                        .expect("a symbol name"),
                    required,
                    provided,
                    ierr,
                );
            }
        )+ };
    }
    init_thread_names!(
        mpi_init_thread_,
        mpi_init_thread__,
        mpi_init_thread,
        MPI_INIT_THREAD,
        mpi_init_thread_f08_
    );
}
