//! matchshim: MPI message matching in Rust queues, under unmodified MPI programs.
//!
//! `matching` holds the pure engines; `runtime` the per-process state and progress; `coll`
//! the collective algorithms on the runtime's point-to-point; `intercept` the exported `MPI_*`
//! symbols.

pub mod coll;
pub mod ffi;
mod intercept;
pub mod matching;
pub mod runtime;
