//! matchshim: MPI message matching in Rust queues, under unmodified MPI programs.
//!
//! `runtime` holds the per-process state and progress; `coll` the collective algorithms on the
//! runtime's point-to-point; `intercept` the exported `MPI_*` symbols. The engines, the
//! configuration and the report schema come from `matchshim-core`, the MPI bindings from
//! `matchshim-mpi`.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

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

#[cfg(test)]
mod tests {
    use std::path::Path;

    fn sources(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("source folder") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                sources(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source file");
                out.push((path.display().to_string(), text));
            }
        }
    }

    /// Only the I/O layer reaches MPI: no other file names a `PMPI_` function or the
    /// bindings, and the generated entry points pass calls on through `mpi::next`.
    #[test]
    fn only_mpi_rs_reaches_pmpi() {
        let mut files = Vec::new();
        sources(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let generated = Path::new(env!("OUT_DIR")).join("entry_points.rs");
        let text = std::fs::read_to_string(&generated).expect("generated entry points");
        files.push((generated.display().to_string(), text));
        assert!(files.len() > 10);
        // Built here, so that this test's own text does not name them.
        let (pmpi, ffi, bindings) = (
            ["P", "MPI_"].concat(),
            ["crate::", "ffi"].concat(),
            ["matchshim", "_mpi"].concat(),
        );
        for (path, text) in files {
            if path.ends_with("src/mpi.rs") {
                continue;
            }
            // lib.rs names the bindings once, as `ffi`, for mpi.rs.
            let lib = path.ends_with("src/lib.rs");
            for (i, line) in text.lines().enumerate() {
                // Exporting a profiling name is not reaching MPI.
                if line.starts_with("#[export_name = ") {
                    continue;
                }
                let code = line.split("//").next().unwrap_or_default();
                let reaches = code.contains(&pmpi)
                    || code.contains(&ffi)
                    || (!lib && code.contains(&bindings));
                assert!(
                    !reaches,
                    "{path}:{}: reaches MPI outside mpi.rs: {line}",
                    i + 1
                );
            }
        }
    }

    /// The shim exports the profiling name of every call it lists: a direct call of one of those
    /// from mpi.rs would come back into the shim, so they go through `next` (the MPI library's).
    #[test]
    fn mpi_rs_calls_listed_calls_through_next() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let list = std::fs::read_to_string(root.join("calls.list")).expect("calls.list");
        let mpi = std::fs::read_to_string(root.join("src/mpi.rs")).expect("mpi.rs");
        let listed: Vec<&str> = list
            .lines()
            .filter(|l| l.starts_with("MPI_"))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert!(listed.len() > 50);
        for (i, line) in mpi.lines().enumerate() {
            for name in &listed {
                for form in [format!("P{name}("), format!("P{name}_c(")] {
                    let direct = line.match_indices(&form).any(|(at, _)| {
                        !line[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_')
                    });
                    assert!(!direct, "src/mpi.rs:{}: calls {form} directly", i + 1);
                }
            }
        }
    }
}
