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

/// Prints one line to stderr in one write: a launcher that merges the ranks' output may put
/// another rank's text between the separate writes of `eprintln!`.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = std::io::stderr().write_all(format!("{line}\n").as_bytes());
}
