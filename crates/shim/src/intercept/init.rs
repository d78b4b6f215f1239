//! `MPI_Init*` and `MPI_Finalize`.

use crate::coll::COLLECTIVES;
use crate::config::Config;
use crate::mpi::{self, abi, next, BUILT_FOR};
use crate::runtime::{for_finalize, install, installed, report, runtime, Client};
use matchshim_core::trace;
use std::os::raw::{c_char, c_int};
use std::sync::atomic::{AtomicBool, Ordering};

/// What joins the runtime's progress besides point-to-point receives.
static CLIENTS: [&dyn Client; 1] = [&COLLECTIVES];

/// A build for one MPI loaded under a program of the other would crash in its first call.
fn check_mpi_matches() -> Result<(), String> {
    let foreign = if cfg!(mpich) {
        "ompi_mpi_comm_world"
    } else {
        "MPIR_Err_create_code"
    };
    let symbol = std::ffi::CString::new(foreign).expect("no NUL");
    if mpi::symbol(&symbol).is_some() {
        let other = if cfg!(mpich) {
            "Open MPI beside this build: \
             `MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release`"
        } else {
            "MPICH beside this build: \
             `MPICC=mpicc.mpich CARGO_TARGET_DIR=target/mpich cargo build --release`"
        };
        return Err(format!(
            "this libmatchshim.so was built for {BUILT_FOR} but the program uses another MPI; \
             build the shim for {other}, or install both with `ci/install.sh --prefix DIR` \
             and run under DIR/bin/matchshim, which picks the program's"
        ));
    }
    Ok(())
}

/// Stops every rank with one line, printed by the first rank only.
fn stop_before_init(message: &str) -> ! {
    if mpi::launcher_rank().unwrap_or(0) == 0 {
        crate::say(&format!("matchshim: {message}"));
    } else {
        // Rank 0's line gets out before the launcher ends the job for the first rank to exit.
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    std::process::exit(1);
}

/// Set while `init_shim` runs: a tool loaded after the shim that wraps `MPI_Init` comes back
/// into the shim's `PMPI_Init`, which then only starts MPI.
static INITIALISING: AtomicBool = AtomicBool::new(false);

/// Runs the MPI's own initialisation (`start`) with the shim around it: the configuration is
/// read first and the runtime installed after.
pub fn init_shim(start: impl FnOnce() -> c_int) -> c_int {
    if INITIALISING.swap(true, Ordering::SeqCst) {
        return start();
    }
    struct Done;
    impl Drop for Done {
        fn drop(&mut self) {
            INITIALISING.store(false, Ordering::SeqCst);
        }
    }
    let _done = Done;
    if let Err(message) = check_mpi_matches() {
        stop_before_init(&message);
    }
    let config = Config::from_vars(std::env::vars());
    let code = start();
    if code == abi().success {
        started(config);
    }
    code
}

/// After MPI's initialisation: a bad configuration stops every rank with one line from the
/// first rank that found it; else the runtime is installed.
pub fn started(config: Result<Config, String>) {
    let config = config.and_then(|c| {
        if let Some(dir) = &c.trace {
            trace::start_recording(dir, c.engine.name())?;
        }
        Ok(c)
    });
    let first = mpi::first_rank_where(config.is_err());
    let config = match config {
        Ok(config) if first == mpi::comm_size(abi().comm_world) => config,
        Ok(_) | Err(_) => {
            if let Err(message) = &config {
                if mpi::comm_rank(abi().comm_world) == first {
                    crate::say(&format!("matchshim: {message}"));
                }
            }
            mpi::barrier_world();
            mpi::finalize();
            std::process::exit(1);
        }
    };
    // An empty report says the shim started here, should the program never finalize.
    if let Some(path) = &config.report {
        if let Err(e) = report::touch(path) {
            crate::say(&format!(
                "matchshim: cannot write the report to {}: {e}",
                path.display()
            ));
        }
    }
    if let Some(line) =
        crate::matching::gpu::init_message(config.engine, mpi::comm_rank(abi().comm_world))
    {
        crate::say(&line);
    }
    if mpi::comm_rank(abi().comm_world) == 0 {
        if let Some(line) = mpi::stacking_problem() {
            crate::say(&line);
        }
    }
    install(config, mpi::query_thread(), &CLIENTS);
    let rt = installed().expect("just installed");
    COLLECTIVES.init(rt.tag_ub);
    // No traffic yet: under `MATCHSHIM_COLL=shim` the duplicates of the predefined
    // communicators are made at once.
    for handle in [abi().comm_world, abi().comm_self] {
        if let Ok(comm) = rt.comm(handle) {
            let _ = COLLECTIVES.adopt(rt, comm);
        }
    }
}

/// `MPI_Init`.
///
/// # Safety
/// The caller's arguments, as MPI requires them.
pub unsafe fn init(argc: *mut c_int, argv: *mut *mut *mut c_char) -> c_int {
    // SAFETY: as the caller promises.
    init_shim(|| unsafe { next::MPI_Init(argc, argv) })
}

/// `MPI_Init_thread`.
///
/// # Safety
/// The caller's arguments, as MPI requires them.
pub unsafe fn init_thread(
    argc: *mut c_int,
    argv: *mut *mut *mut c_char,
    required: c_int,
    provided: *mut c_int,
) -> c_int {
    // SAFETY: as the caller promises.
    init_shim(|| unsafe { next::MPI_Init_thread(argc, argv, required, provided) })
}

/// `MPI_Finalize`: the report and the traces, then MPI's own.
///
/// # Safety
/// Called as `MPI_Finalize` is.
pub unsafe fn finalize() -> c_int {
    if let Some(rt) = for_finalize() {
        let report = rt.totals().report(rt);
        if let Some(path) = &rt.config.report {
            if let Err(e) = report::append(path, &report) {
                crate::say(&format!(
                    "matchshim: cannot write the report to {}: {e}",
                    path.display()
                ));
            }
        }
        if rt.config.trace.is_some() {
            let size = mpi::comm_size(abi().comm_world);
            if let Err(e) = trace::finish_recording(rt.world_rank as usize, size as usize) {
                crate::say(&format!("matchshim: {e}"));
            }
        }
        if let Some(line) = report::summary_line(rt, &report) {
            crate::say(&line);
        }
        let mut empty = rt.process.empty;
        if empty != abi().comm_null {
            mpi::comm_free(&mut empty);
        }
    }
    // SAFETY: as the caller promises.
    unsafe { next::MPI_Finalize() }
}

/// The engine in use, for programs linked with `-lmatchshim` (see include/matchshim.h).
#[no_mangle]
pub extern "C" fn matchshim_engine() -> *const c_char {
    match runtime() {
        Some(rt) => rt.engine_name.as_ptr(),
        None => c"".as_ptr(),
    }
}
