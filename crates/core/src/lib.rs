//! matchshim's core, with no MPI in it: the matching engines, the configuration the shim reads
//! from its environment, and the report schema shared by the shim and the `matchshim` command.

pub mod config;
pub mod matching;
pub mod report;
