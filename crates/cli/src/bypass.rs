//! Why no rank wrote a report under the shim, told from what the run left and from the ELF files
//! of the program and of the shim: MPI linked in statically, MPI started through a binding that
//! calls `PMPI_*` itself, or a program that never calls `MPI_Init` or `MPI_Finalize`.

use crate::elf::Elf;
use crate::runs::Mpi;
use std::path::Path;

const C_INIT: [&str; 2] = ["MPI_Init", "MPI_Init_thread"];
const C_FINALIZE: &str = "MPI_Finalize";

/// Fortran names of `MPI_INIT` (`mpi_init_` from gfortran, `MPI_INIT` from some compilers).
fn is_fortran_init(symbol: &str) -> bool {
    let lower = symbol.to_ascii_lowercase();
    !C_INIT.contains(&symbol) && (lower.starts_with("mpi_init_") || lower == "mpi_init")
}

/// One sentence after "no rank wrote a report to REPORT: ".
fn reason(report_exists: bool, program: &str, elf: Option<&Elf>, shim: Option<&Elf>) -> String {
    let finalize_missing = elf.is_some_and(|e| {
        e.imports.iter().any(|s| C_INIT.contains(&s.as_str())) && !e.imports.contains(C_FINALIZE)
    });
    if report_exists {
        let mut text = "the shim started in MPI_Init (it creates the report there) but no rank \
                        reached MPI_Finalize, where each rank writes its line"
            .to_string();
        if finalize_missing {
            text.push_str(&format!("; {program} never calls MPI_Finalize"));
        }
        return text;
    }
    let Some(elf) = elf else {
        return format!(
            "{program} is not an ELF executable (a script?), so matchshim cannot see how it \
             reaches MPI; the shim writes each rank's report in MPI_Finalize: did the ranks call \
             MPI_Init and MPI_Finalize?"
        );
    };
    if !elf.dynamic {
        return format!(
            "{program} is linked statically, so LD_PRELOAD cannot reach its MPI calls; link it \
             with the shared MPI library (mpicc without -static)"
        );
    }
    if let Some(symbol) = ["PMPI_Init", "MPI_Init"]
        .into_iter()
        .find(|s| elf.defines.contains(*s))
    {
        return format!(
            "{program} contains MPI itself (it defines {symbol}: MPI is linked in statically), \
             so its MPI calls never reach the shim; link it with the shared MPI library"
        );
    }
    let c_init = elf.imports.iter().any(|s| C_INIT.contains(&s.as_str()));
    let fortran_init = elf.imports.iter().find(|s| is_fortran_init(s));
    if !c_init {
        if let Some(symbol) = fortran_init {
            let taken_over = shim.is_some_and(|s| s.defines.contains(symbol));
            if !taken_over && elf.mpi() == Some(Mpi::Openmpi) {
                return format!(
                    "{program} starts MPI through Open MPI's Fortran binding ({symbol}), which \
                     calls PMPI_* directly, and this libmatchshim.so does not take over {symbol}: \
                     its MPI calls never reach the shim"
                );
            }
        } else if (elf.imports.contains("PMPI_Init") || elf.imports.contains("PMPI_Init_thread"))
            // A shim that works under the profiling names takes these calls too.
            && !shim.is_some_and(|s| s.defines.contains("PMPI_Init"))
        {
            return format!(
                "{program} calls PMPI_Init directly, the name the shim itself calls, so MPI \
                 starts without the shim; call MPI_Init"
            );
        } else if !elf.links_mpi() {
            return format!(
                "{program} neither links an MPI library nor imports MPI_Init, so no rank called \
                 MPI_Init through the shim (a program that loads MPI itself, with dlopen or an \
                 interpreter, did not reach MPI_Finalize)"
            );
        }
    }
    if finalize_missing {
        return format!(
            "{program} never calls MPI_Finalize (it imports MPI_Init but not MPI_Finalize), and \
             the shim writes each rank's report there"
        );
    }
    format!(
        "{program} takes MPI_Init and MPI_Finalize from the shared MPI library, where the shim \
         takes them over, so no rank reached MPI_Finalize: did the ranks end before it?"
    )
}

/// The whole message for a run under `lib` whose ranks left no line in `report`.
pub fn explain(report: &Path, program: &str, program_path: Option<&Path>, lib: &Path) -> String {
    let read = |path: &Path| Elf::read(path).ok().flatten();
    let elf = program_path.and_then(read);
    let shim = read(lib);
    format!(
        "no rank wrote a report to {}: {}",
        report.display(),
        reason(report.exists(), program, elf.as_ref(), shim.as_ref())
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn elf(needed: &[&str], imports: &[&str], defines: &[&str]) -> Elf {
        let set = |names: &[&str]| names.iter().map(|s| s.to_string()).collect();
        Elf {
            dynamic: true,
            needed: needed.iter().map(|s| s.to_string()).collect(),
            imports: set(imports),
            defines: set(defines),
        }
    }

    fn why(exists: bool, program: Option<&Elf>, shim: Option<&Elf>) -> String {
        reason(exists, "./app", program, shim)
    }

    #[test]
    fn an_empty_report_means_mpi_init_ran_but_not_mpi_finalize() {
        let app = elf(&["libmpich.so.12"], &["MPI_Init"], &[]);
        let text = why(true, Some(&app), None);
        assert!(text.starts_with("the shim started in MPI_Init"), "{text}");
        assert!(text.ends_with("./app never calls MPI_Finalize"), "{text}");
    }

    #[test]
    fn static_mpi_is_named() {
        let mut app = elf(&[], &[], &["main"]);
        app.dynamic = false;
        assert!(why(false, Some(&app), None).contains("is linked statically"));
        let app = elf(
            &["libc.so.6"],
            &["malloc"],
            &["main", "PMPI_Init", "MPI_Init"],
        );
        let text = why(false, Some(&app), None);
        assert!(text.contains("defines PMPI_Init"), "{text}");
    }

    #[test]
    fn open_mpis_fortran_binding_is_a_bypass_only_where_the_shim_lacks_it() {
        let app = elf(
            &["libmpi_mpifh.so.40", "libmpi.so.40"],
            &["mpi_init_", "mpi_finalize_"],
            &[],
        );
        let text = why(false, Some(&app), Some(&elf(&[], &[], &["MPI_Init"])));
        assert!(
            text.contains("Open MPI's Fortran binding (mpi_init_)"),
            "{text}"
        );
        let shim = elf(&[], &[], &["MPI_Init", "mpi_init_"]);
        let text = why(false, Some(&app), Some(&shim));
        assert!(text.contains("no rank reached MPI_Finalize"), "{text}");
        // MPICH's Fortran binding calls MPI_Init, which the shim takes over.
        let app = elf(
            &["libmpichfort.so.12", "libmpich.so.12"],
            &["mpi_init_"],
            &[],
        );
        assert!(why(false, Some(&app), None).contains("no rank reached MPI_Finalize"));
    }

    #[test]
    fn programs_without_mpi_and_direct_pmpi_calls_are_named() {
        let app = elf(&["libc.so.6"], &["puts"], &["main"]);
        let text = why(false, Some(&app), None);
        assert!(text.contains("neither links an MPI library"), "{text}");
        let app = elf(&["libmpich.so.12"], &["PMPI_Init", "MPI_Finalize"], &[]);
        assert!(why(false, Some(&app), None).contains("calls PMPI_Init directly"));
    }

    #[test]
    fn a_program_without_mpi_finalize_is_named() {
        let app = elf(&["libmpich.so.12"], &["MPI_Init", "MPI_Comm_rank"], &[]);
        let text = why(false, Some(&app), None);
        assert!(text.starts_with("./app never calls MPI_Finalize"), "{text}");
        let app = elf(&["libmpich.so.12"], &["MPI_Init", "MPI_Finalize"], &[]);
        assert!(why(false, Some(&app), None).contains("did the ranks end before it?"));
        assert!(why(false, None, None).contains("not an ELF executable"));
    }
}
