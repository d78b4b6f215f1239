//! `MPI_Init*` and `MPI_Finalize`.

use crate::config::Config;
use crate::ffi::*;
use crate::runtime::{install, report, runtime, take_for_finalize};
use matchshim_core::trace;
use std::os::raw::{c_char, c_int};

/// A build for one MPI loaded under a program of the other would crash in its first call.
fn check_mpi_matches() -> Result<(), String> {
    let foreign = if cfg!(mpich) {
        "ompi_mpi_comm_world"
    } else {
        "MPIR_Err_create_code"
    };
    let symbol = std::ffi::CString::new(foreign).unwrap();
    // SAFETY: dlsym with a valid C string.
    let present = unsafe { !libc::dlsym(libc::RTLD_DEFAULT, symbol.as_ptr()).is_null() };
    if present {
        let other = if cfg!(mpich) {
            "Open MPI (MPICC=mpicc.openmpi)"
        } else {
            "MPICH (MPICC=mpicc.mpich)"
        };
        return Err(format!(
            "this libmatchshim.so was built for {BUILT_FOR} but the program uses another MPI; \
             rebuild it for {other}"
        ));
    }
    Ok(())
}

fn stop(message: &str) -> ! {
    eprintln!("matchshim: {message}");
    std::process::exit(1);
}

unsafe fn init(start: impl FnOnce() -> c_int) -> c_int {
    if let Err(message) = check_mpi_matches() {
        stop(&message);
    }
    let config = Config::from_vars(std::env::vars()).unwrap_or_else(|message| stop(&message));
    if let Some(dir) = &config.trace {
        trace::start_recording(dir, config.engine.name()).unwrap_or_else(|message| stop(&message));
    }
    let err = start();
    if err == abi().success {
        let mut provided = 0;
        PMPI_Query_thread(&mut provided);
        install(config, provided);
    }
    err
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    init(|| PMPI_Init(argc, argv))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    init(|| PMPI_Init_thread(argc, argv, required, provided))
}

#[no_mangle]
pub unsafe extern "C" fn MPI_Finalize() -> c_int {
    if let Some(rt) = take_for_finalize() {
        let totals = rt.totals();
        if let Some(path) = &rt.config.report {
            if let Err(e) = report::append(path, &totals.report(rt)) {
                eprintln!(
                    "matchshim: cannot write the report to {}: {e}",
                    path.display()
                );
            }
        }
        if rt.config.trace.is_some() {
            let mut size = 0;
            PMPI_Comm_size(abi().comm_world, &mut size);
            if let Err(e) = trace::finish_recording(rt.world_rank as usize, size as usize) {
                eprintln!("matchshim: {e}");
            }
        }
        if rt.config.verbose {
            if let Some(line) = report::summary_line(rt, &totals) {
                eprintln!("{line}");
            }
        }
    }
    PMPI_Finalize()
}

/// The engine in use, for programs linked with `-lmatchshim` (see include/matchshim.h).
#[no_mangle]
pub extern "C" fn matchshim_engine() -> *const c_char {
    match runtime() {
        Some(rt) => rt.engine_name.as_ptr(),
        None => c"".as_ptr(),
    }
}
