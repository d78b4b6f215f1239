//! The NVIDIA side through cudarc, loaded at run time: nothing of CUDA is needed to build, and
//! without the driver, a device or NVRTC the engine stays on the CPU. cudarc panics when a
//! library or a symbol is missing, so presence is checked first and every call into it runs
//! under `catch_unwind`: no panic leaves this module.

use cudarc::driver::PushKernelArg;
use cudarc::driver::{
    result, sys, CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchArgs, LaunchConfig,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// The kernels' CUDA source: the per-thread bodies, then the `__global__` wrappers.
pub fn source() -> String {
    format!(
        "{}\n{}",
        include_str!("kernels.h"),
        include_str!("kernels.cu")
    )
}

/// Every kernel in `source()`.
pub const KERNELS: [&str; 2] = ["ms_scan", "ms_lookup"];
const THREADS: u32 = 256;

static LAUNCHES: AtomicU64 = AtomicU64::new(0);

/// Kernel launches on the device so far, in this process.
pub fn launches() -> u64 {
    LAUNCHES.load(Ordering::Relaxed)
}

/// Runs `f`, turning a panic inside cudarc into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("unknown cause");
        Err(format!("{what} failed: {why}"))
    })
}

fn driver_present() -> bool {
    // SAFETY: dlopen of a library name; nothing is called.
    unsafe { sys::is_culib_present() }
}

fn nvrtc_present() -> bool {
    // SAFETY: as above.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

const NO_DRIVER: &str = "no CUDA driver: libcuda.so not found";
const NO_NVRTC: &str = "no NVRTC: libnvrtc.so.12 not found (pip's nvidia-cuda-nvrtc-cu12 ships \
     it; put its lib directory on LD_LIBRARY_PATH)";

/// The CUDA driver's version, as "12.4".
pub fn driver_version() -> Result<String, String> {
    if !driver_present() {
        return Err(NO_DRIVER.to_string());
    }
    guarded("cuDriverGetVersion", || {
        let mut version = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut version) }
            .result()
            .map_err(|e| format!("{e:?}"))?;
        Ok(format!("{}.{}", version / 1000, version % 1000 / 10))
    })
}

/// A device the driver sees.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
}

/// The devices the driver sees.
pub fn devices() -> Result<Vec<DeviceInfo>, String> {
    driver_version()?;
    guarded("device query", || {
        let count = CudaContext::device_count().map_err(|e| format!("no CUDA device: {e:?}"))?;
        (0..count)
            .map(|ordinal| {
                let device = result::device::get(ordinal).map_err(|e| format!("{e:?}"))?;
                let name = result::device::get_name(device).map_err(|e| format!("{e:?}"))?;
                let attribute = |a| {
                    // SAFETY: a plain attribute query of a valid device.
                    unsafe { result::device::get_attribute(device, a) }
                        .map_err(|e| format!("{e:?}"))
                };
                let major = attribute(
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                )?;
                let minor = attribute(
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                )?;
                Ok(DeviceInfo {
                    name,
                    capability: (major, minor),
                })
            })
            .collect()
    })
}

/// NVRTC's version, as "12.9".
pub fn nvrtc_version() -> Result<String, String> {
    if !nvrtc_present() {
        return Err(NO_NVRTC.to_string());
    }
    guarded("nvrtcVersion", || {
        let (mut major, mut minor) = (0, 0);
        // SAFETY: writes two ints.
        unsafe { cudarc::nvrtc::sys::nvrtcVersion(&mut major, &mut minor) }
            .result()
            .map_err(|e| format!("{e:?}"))?;
        Ok(format!("{major}.{minor}"))
    })
}

/// The kernels as PTX for compute capability `major.minor` (sm_XY), compiled by NVRTC.
pub fn compile_ptx(major: i32, minor: i32) -> Result<String, String> {
    nvrtc_version()?;
    guarded("NVRTC", || {
        let options = CompileOptions {
            options: vec![format!("--gpu-architecture=compute_{major}{minor}")],
            name: Some("matchshim_kernels.cu".to_string()),
            ..CompileOptions::default()
        };
        let ptx = compile_ptx_with_opts(source(), options).map_err(|e| match e {
            cudarc::nvrtc::CompileError::CompileError { log, .. } => {
                format!("NVRTC rejected the kernels: {}", log.to_string_lossy())
            }
            other => format!("NVRTC failed: {other:?}"),
        })?;
        Ok(ptx.to_src())
    })
}

/// A device with the kernels loaded.
pub struct Device {
    ctx: Arc<CudaContext>,
    scan: CudaFunction,
    lookup: CudaFunction,
    pub info: DeviceInfo,
}

/// What the probe at start-up found.
pub enum Probe {
    Ready(Arc<Device>),
    /// Why the engine matches on the CPU.
    Missing(String),
}

static PROBE: OnceLock<Probe> = OnceLock::new();

/// Device 0 with the kernels compiled for it, looked for once per process.
pub fn probe() -> &'static Probe {
    PROBE.get_or_init(|| match guarded("CUDA start-up", open) {
        Ok(device) => Probe::Ready(Arc::new(device)),
        Err(why) => Probe::Missing(why),
    })
}

fn open() -> Result<Device, String> {
    let info = devices()?
        .into_iter()
        .next()
        .ok_or("no CUDA device: the driver sees none")?;
    let ptx = compile_ptx(info.capability.0, info.capability.1)?;
    let ctx = CudaContext::new(0).map_err(|e| format!("no CUDA context ({e:?})"))?;
    let module = ctx.load_module(ptx.into()).map_err(|e| {
        let (driver, nvrtc) = (driver_version().unwrap_or_default(), nvrtc_version());
        format!(
            "CUDA driver {driver} rejected the PTX of NVRTC {} ({e:?}); an NVRTC no newer \
                 than the driver is needed",
            nvrtc.unwrap_or_default()
        )
    })?;
    let function = |name| {
        module
            .load_function(name)
            .map_err(|e| format!("kernel {name} missing ({e:?})"))
    };
    Ok(Device {
        scan: function(KERNELS[0])?,
        lookup: function(KERNELS[1])?,
        ctx,
        info,
    })
}

fn blocks(threads: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (threads.div_ceil(THREADS as usize).max(1) as u32, 1, 1),
        block_dim: (THREADS, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl Device {
    /// Pinned host memory the device reaches in place: the pointer and its device address.
    pub fn alloc_mapped(&self, bytes: usize) -> Result<(*mut u8, u64), String> {
        guarded("cuMemHostAlloc", || {
            self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
            let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
            // SAFETY: a fresh allocation; its contents are set by the caller.
            let ptr = unsafe { result::malloc_host(bytes.max(64), flags) }
                .map_err(|e| format!("cuMemHostAlloc of {bytes} bytes: {e:?}"))?;
            let mut device_ptr = 0;
            // SAFETY: `ptr` was allocated with DEVICEMAP just now.
            let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, ptr, 0) };
            if let Err(e) = mapped.result() {
                // SAFETY: allocated above, not handed out.
                let _ = unsafe { result::free_host(ptr) };
                return Err(format!("cuMemHostGetDevicePointer: {e:?}"));
            }
            Ok((ptr.cast(), device_ptr))
        })
    }

    pub fn free_mapped(&self, ptr: *mut u8) {
        let _ = guarded("cuMemFreeHost", || {
            self.ctx.bind_to_thread().map_err(|e| format!("{e:?}"))?;
            // SAFETY: `ptr` came from `alloc_mapped` and is freed once, by its buffer.
            unsafe { result::free_host(ptr.cast()) }.map_err(|e| format!("{e:?}"))
        });
    }

    /// A stream and device memory of its own for one engine.
    pub fn launcher(self: &Arc<Self>) -> Result<Launcher, String> {
        guarded("launcher", || {
            let stream = self.ctx.new_stream().map_err(|e| format!("{e:?}"))?;
            let zeros = |len| stream.alloc_zeros::<u32>(len).map_err(|e| format!("{e:?}"));
            Ok(Launcher {
                device: self.clone(),
                first: zeros(1)?,
                slot: zeros(1)?,
                claims: zeros(1)?,
                stream: stream.clone(),
            })
        })
    }
}

/// One engine's launches. The queues are read in mapped host memory; the targets of the
/// kernels' atomics and their outputs stay in device memory (atomics on mapped host memory are
/// not dependable across PCIe), and the outputs come back by copy.
pub struct Launcher {
    device: Arc<Device>,
    stream: Arc<CudaStream>,
    first: CudaSlice<u32>,
    slot: CudaSlice<u32>,
    claims: CudaSlice<u32>,
}

fn driver<T>(result: Result<T, result::DriverError>) -> Result<T, String> {
    result.map_err(|e| format!("{e:?}"))
}

impl Launcher {
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// `slice` with room for `len` elements.
    fn room(
        stream: &Arc<CudaStream>,
        slice: &mut CudaSlice<u32>,
        len: usize,
    ) -> Result<(), String> {
        if slice.len() < len {
            *slice = driver(stream.alloc_zeros(len.next_power_of_two()))?;
        }
        Ok(())
    }

    /// Launches `function` on `threads` threads with the arguments `args` pushes, and waits.
    fn launch<'a>(
        stream: &'a CudaStream,
        function: &'a CudaFunction,
        threads: usize,
        args: impl FnOnce(&mut LaunchArgs<'a>),
    ) -> Result<(), String> {
        let mut launch = stream.launch_builder(function);
        args(&mut launch);
        // SAFETY: the callers push the kernel's parameters in order; the mapped arrays and the
        // device buffers outlive the launch, which is waited for.
        driver(unsafe { launch.launch(blocks(threads)) })?;
        LAUNCHES.fetch_add(1, Ordering::Relaxed);
        driver(stream.synchronize())
    }

    /// The scan kernel over words `begin..end` of a mapped log (`keys`, `live`: device
    /// addresses) for the mapped `items`; `first` (all NONE) gets the result per item.
    pub fn scan(
        &mut self,
        (begin, end): (u32, u32),
        (keys, live): (u64, u64),
        items: u64,
        patterns: bool,
        first: &mut [u32],
    ) -> Result<(), String> {
        guarded("ms_scan", || {
            let (stream, count) = (&self.stream, first.len() as u32);
            Self::room(stream, &mut self.first, first.len())?;
            driver(stream.memcpy_htod(&*first, &mut self.first))?;
            let (device, out, patterns) = (&self.device, &self.first, patterns as i32);
            Self::launch(stream, &device.scan, (end - begin) as usize, |launch| {
                launch
                    .arg(&begin)
                    .arg(&end)
                    .arg(&keys)
                    .arg(&live)
                    .arg(&items);
                launch.arg(&count).arg(&patterns).arg(out);
            })?;
            driver(stream.memcpy_dtoh(&self.first.slice(..first.len()), first))?;
            driver(stream.synchronize())
        })
    }

    /// The lookup kernel for the mapped `items` against a mapped table and chains (`table`,
    /// `next`: device addresses); `entry` gets each item's entry and, with `claim`, `slot`
    /// the element it takes.
    pub fn lookup(
        &mut self,
        items: u64,
        (table, bits, next): (u64, u32, u64),
        claim: bool,
        entry: &mut [u32],
        slot: &mut [u32],
    ) -> Result<(), String> {
        guarded("ms_lookup", || {
            let (stream, count) = (&self.stream, entry.len());
            Self::room(stream, &mut self.first, count)?;
            Self::room(stream, &mut self.slot, count)?;
            Self::room(stream, &mut self.claims, 1 << bits)?;
            if claim {
                driver(stream.memset_zeros(&mut self.claims))?;
            }
            let (device, claim, n) = (&self.device, claim as i32, count as u32);
            let (claims, out_entry, out_slot) = (&self.claims, &self.first, &self.slot);
            Self::launch(stream, &device.lookup, count, |launch| {
                launch.arg(&n).arg(&items).arg(&table).arg(&bits).arg(&next);
                launch.arg(claims).arg(&claim).arg(out_entry).arg(out_slot);
            })?;
            driver(stream.memcpy_dtoh(&self.first.slice(..count), entry))?;
            if claim != 0 {
                driver(stream.memcpy_dtoh(&self.slot.slice(..count), slot))?;
            }
            driver(stream.synchronize())
        })
    }
}

static FAILURE: OnceLock<String> = OnceLock::new();

/// Keeps the first device error of this process (engines stop launching after theirs).
pub fn record_failure(error: String) {
    let _ = FAILURE.set(error);
}

/// The first device error, if any.
pub fn failure() -> Option<&'static str> {
    FAILURE.get().map(String::as_str)
}

/// The file of a loaded library whose name contains `name`, from this process's mappings.
pub fn loaded_library(name: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .find(|path| {
            path.rsplit('/')
                .next()
                .is_some_and(|file| file.starts_with(name))
        })
        .map(String::from)
}
