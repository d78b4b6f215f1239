//! matchshim: MPI message matching in Rust queues, under unmodified MPI programs.
//!
//! `matching` holds the pure engines; `runtime` the per-process state and progress;
//! `intercept` the exported `MPI_*` symbols.

pub mod ffi;
mod intercept;
pub mod matching;
pub mod runtime;
