//! Passes on what the bindings crate found out about the MPI: its flavour and whether it has the
//! large-count (`_c`) functions and MPI-4's others, as cfgs; and an rpath to its library, so that a program that
//! links `-lmatchshim` before libmpi finds the same libmpi at run time.

use std::env;

fn main() {
    println!("cargo::rustc-check-cfg=cfg(mpich)");
    println!("cargo::rustc-check-cfg=cfg(openmpi)");
    println!("cargo::rustc-check-cfg=cfg(large_count)");
    println!("cargo::rustc-check-cfg=cfg(mpi4)");
    let flavor = env::var("DEP_MPI_FLAVOR").expect("matchshim-mpi says which MPI it bound");
    println!("cargo:rustc-cfg={flavor}");
    for cfg in ["large_count", "mpi4"] {
        if env::var(format!("DEP_MPI_{}", cfg.to_uppercase())).as_deref() == Ok("1") {
            println!("cargo:rustc-cfg={cfg}");
        }
    }
    for dir in env::var("DEP_MPI_LINK_DIRS").unwrap_or_default().split(':') {
        if !dir.is_empty() {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-rpath,{dir}");
        }
    }
}
