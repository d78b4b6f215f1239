//! matchshim: MPI message matching in Rust queues, under unmodified MPI programs.

pub mod matching;
