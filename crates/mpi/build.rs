//! Finds the MPI named by `MPICC` (default: MPICH's `mpicc.mpich` when present), binds its
//! `PMPI_*` functions and types with bindgen, and compiles `src/abi.c`, which exports the MPI
//! constants that are macros in `mpi.h` (their values and even their kinds differ by ABI).

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

struct Mpi {
    compiler: String,
    flavor: &'static str,
    include_dirs: Vec<String>,
    link_dirs: Vec<String>,
    libs: Vec<String>,
}

fn on_path(program: &str) -> bool {
    env::var_os("PATH")
        .is_some_and(|paths| env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

fn run(compiler: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(compiler).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

fn find_mpi() -> Mpi {
    let compiler = env::var("MPICC").unwrap_or_else(|_| {
        if on_path("mpicc.mpich") {
            "mpicc.mpich"
        } else {
            "mpicc"
        }
        .to_string()
    });
    // Open MPI's wrapper answers -showme; MPICH's answers -show.
    let (flavor, line) = match run(&compiler, &["-showme"]) {
        Some(line) => ("openmpi", line),
        None => match run(&compiler, &["-show"]) {
            Some(line) => ("mpich", line),
            None => panic!(
                "matchshim: cannot run the MPI compiler wrapper `{compiler}`; install MPICH \
                 (mpich libmpich-dev) or Open MPI (openmpi-bin libopenmpi-dev), or set MPICC"
            ),
        },
    };
    let mut mpi = Mpi {
        compiler,
        flavor,
        include_dirs: vec![],
        link_dirs: vec![],
        libs: vec![],
    };
    for word in line.split_whitespace() {
        if let Some(dir) = word.strip_prefix("-I") {
            mpi.include_dirs.push(dir.to_string());
        } else if let Some(dir) = word.strip_prefix("-L") {
            mpi.link_dirs.push(dir.to_string());
        } else if let Some(lib) = word.strip_prefix("-l") {
            mpi.libs.push(lib.to_string());
        }
    }
    if mpi.libs.is_empty() {
        panic!(
            "matchshim: `{} -show` names no MPI library: {line}",
            mpi.compiler
        );
    }
    mpi
}

fn main() {
    println!("cargo:rerun-if-env-changed=MPICC");
    println!("cargo:rerun-if-changed=src/abi.c");
    println!("cargo:rerun-if-changed=src/abi.h");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo::rustc-check-cfg=cfg(mpich)");
    println!("cargo::rustc-check-cfg=cfg(openmpi)");
    println!("cargo::rustc-check-cfg=cfg(large_count)");
    println!("cargo::rustc-check-cfg=cfg(mpi4)");

    let mpi = find_mpi();
    println!("cargo:rustc-cfg={}", mpi.flavor);
    println!("cargo:flavor={}", mpi.flavor);
    // Not named MATCHSHIM_*: cargo also exports these to programs it runs, and the shim rejects
    // unknown MATCHSHIM_* variables.
    println!("cargo:rustc-env=BUILT_FOR_MPI={}", mpi.flavor);

    let header_dirs: Vec<PathBuf> = if mpi.include_dirs.is_empty() {
        vec![PathBuf::from("/usr/include")]
    } else {
        mpi.include_dirs.iter().map(PathBuf::from).collect()
    };
    let declares = |function: &str| {
        header_dirs.iter().any(|dir| {
            ["mpi.h", "mpi_proto.h"].iter().any(|h| {
                std::fs::read_to_string(Path::new(dir).join(h))
                    .is_ok_and(|text| text.contains(function))
            })
        })
    };
    // The large-count (`_c`) functions, and MPI-4's other additions (`Isendrecv`, ...).
    for (cfg, function) in [
        ("large_count", "PMPI_Mrecv_c("),
        ("mpi4", "PMPI_Isendrecv("),
    ] {
        let present = declares(function);
        if present {
            println!("cargo:rustc-cfg={cfg}");
        }
        println!("cargo:{cfg}={}", present as u8);
    }

    let bindings = bindgen::Builder::default()
        .header("src/abi.h")
        .clang_args(mpi.include_dirs.iter().map(|d| format!("-I{d}")))
        .allowlist_function("PMPI_.*")
        .allowlist_type("MPI_.*")
        .allowlist_var("ms_abi")
        .allowlist_function("ms_.*")
        .allowlist_type("ms_.*")
        .derive_default(true)
        .layout_tests(false)
        .generate()
        .expect("matchshim: bindgen could not read mpi.h (is libclang installed?)");
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    bindings
        .write_to_file(out.join("mpi_bindings.rs"))
        .expect("write bindings");

    cc::Build::new()
        .compiler(&mpi.compiler)
        .file("src/abi.c")
        .warnings(true)
        .compile("matchshim_abi");

    for dir in &mpi.link_dirs {
        println!("cargo:rustc-link-search=native={dir}");
    }
    println!("cargo:link_dirs={}", mpi.link_dirs.join(":"));
    for lib in &mpi.libs {
        println!("cargo:rustc-link-lib=dylib={lib}");
    }
}
