//! `matchshim gpu`: what the `gpu` engine finds on this machine, and its kernels as PTX.

use matchshim_core::matching::gpu;
use std::path::Path;

/// The architectures `--ptx` compiles for unless told: the first of each generation (Volta to
/// Blackwell), whose PTX the driver compiles on for the later ones of that generation.
const GENERATIONS: [i32; 6] = [70, 80, 90, 100, 110, 120];

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
/// writes the kernels compiled for `archs` (or every generation the loaded NVRTC supports)
/// into that directory.
pub fn run(ptx: Option<&Path>, archs: &[i32]) -> Result<(), String> {
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
    let supported = gpu::nvrtc_archs();
    match (gpu::nvrtc_version(), &supported) {
        (Ok(version), Ok(supported)) => println!(
            "NVRTC {version}: compute_{}",
            supported
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (Err(why), _) => println!("{why}"),
        (_, Err(why)) => println!("{why}"),
    }
    let offload = gpu::offload();
    println!("gpu engine: {} path ({})", offload.path, offload.detail);
    let Some(dir) = ptx else {
        return Ok(());
    };
    let supported = supported.map_err(|why| format!("cannot compile the kernels: {why}"))?;
    let wanted: Vec<i32> = if archs.is_empty() {
        GENERATIONS
            .into_iter()
            .filter(|a| supported.contains(a))
            .collect()
    } else {
        archs.to_vec()
    };
    if let Some(missing) = wanted.iter().find(|a| !supported.contains(a)) {
        return Err(format!(
            "--arch {missing}: the loaded NVRTC compiles for {}",
            supported
                .iter()
                .map(|a| a.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for arch in wanted {
        let text = gpu::compile_ptx(arch)?;
        let path = dir.join(format!("matchshim_kernels.sm_{arch}.ptx"));
        std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {} ({})", path.display(), gpu::KERNELS.join(", "));
    }
    Ok(())
}
