//! `matchshim gpu`: what the `gpu` engine finds on this machine, and its kernels as PTX.

use matchshim_core::matching::gpu;
use std::path::Path;

/// The compute capabilities `--ptx` compiles for: Volta, Ampere, Hopper.
const ARCHITECTURES: [(i32, i32); 3] = [(7, 0), (8, 0), (9, 0)];

/// "NAME VERSION (its file)", or why it is missing.
fn found(name: &str, version: Result<String, String>, library: &str) -> String {
    match version {
        Ok(version) => format!(
            "{name} {version} ({})",
            gpu::loaded_library(library).unwrap_or_else(|| "file unknown".to_string())
        ),
        Err(why) => why,
    }
}

/// Prints the driver, the devices and NVRTC found, and the path the engine takes; with `ptx`,
/// writes every kernel compiled for each architecture into that directory.
pub fn run(ptx: Option<&Path>) -> Result<(), String> {
    let driver = gpu::driver_version();
    let have_driver = driver.is_ok();
    println!("{}", found("CUDA driver", driver, "libcuda"));
    if have_driver {
        match gpu::devices() {
            Ok(devices) if devices.is_empty() => println!("no CUDA device"),
            Ok(devices) => {
                for (ordinal, device) in devices.iter().enumerate() {
                    let (major, minor) = device.capability;
                    println!("device {ordinal}: {} (sm_{major}{minor})", device.name);
                }
            }
            Err(why) => println!("{why}"),
        }
    }
    println!("{}", found("NVRTC", gpu::nvrtc_version(), "libnvrtc"));
    let offload = gpu::offload();
    println!("gpu engine: {} path ({})", offload.path, offload.detail);
    let Some(dir) = ptx else {
        return Ok(());
    };
    gpu::nvrtc_version().map_err(|why| format!("cannot compile the kernels: {why}"))?;
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (major, minor) in ARCHITECTURES {
        let text = gpu::compile_ptx(major, minor)?;
        let path = dir.join(format!("matchshim_kernels.sm_{major}{minor}.ptx"));
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {} ({})", path.display(), gpu::KERNELS.join(", "));
    }
    Ok(())
}
