//! Bindings to the underlying MPI's `PMPI_*` functions and types, and its constants.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
#![allow(clippy::all)]

include!(concat!(env!("OUT_DIR"), "/mpi_bindings.rs"));

/// The underlying MPI's constants (see shim/abi.h).
#[inline(always)]
pub fn abi() -> &'static ms_abi {
    // SAFETY: a constant object initialised at load time and never written.
    unsafe { &ms_abi }
}

/// A handle (MPICH: an int, Open MPI: a pointer) as a map key.
pub trait HandleKey: Copy {
    fn key(self) -> usize;
}

// MPICH handles are ints.
impl HandleKey for std::os::raw::c_int {
    #[inline(always)]
    fn key(self) -> usize {
        self as u32 as usize
    }
}

// Open MPI handles are pointers to its objects.
impl<T> HandleKey for *mut T {
    #[inline(always)]
    fn key(self) -> usize {
        self as usize
    }
}

/// Fortran's `INTEGER`, as the MPI's Fortran bindings pass it.
pub type Fint = ms_fint;

/// The `MPI_Count` type the large-count (`_c`) functions take.
pub type Count = MPI_Count;

/// The MPI library name and version the shim was built against, for the mismatch check.
pub const BUILT_FOR: &str = env!("BUILT_FOR_MPI");
