//! matchshim: MPI message matching in Rust queues, under unmodified MPI programs.
//!
//! `runtime` holds the per-process state and progress; `coll` the collective algorithms on the
//! runtime's point-to-point; `intercept` the exported `MPI_*` symbols. The engines, the
//! configuration and the report schema come from `matchshim-core`, the MPI bindings from
//! `matchshim-mpi`.

mod coll;
mod intercept;
mod mpi;
mod runtime;

use matchshim_core::{config, matching, report};
use matchshim_mpi as ffi;
