//! The NVIDIA side, through the CUDA driver API loaded at run time (cudarc's raw bindings, no
//! safe layer: a launch passes one argument block and tracks nothing per argument). Nothing of
//! CUDA is needed to build; without the driver, a device or NVRTC the engine stays on the CPU.
//! cudarc panics when a library or a symbol is missing, so presence is checked first and every
//! call into it runs under `catch_unwind`: no panic leaves this module.

use super::nvrtc::{self, arch_list, Nvrtc};
use cudarc::driver::sys;
use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The kernels' CUDA source: the per-thread bodies, then the `__global__` wrappers.
pub fn source() -> String {
    format!(
        "{}\n{}",
        include_str!("kernels.h"),
        include_str!("kernels.cu")
    )
}

/// Every kernel in `source()`; each also comes as `<name>_p`, reading its arguments from device
/// memory (for captured graphs).
pub const KERNELS: [&str; 8] = [
    "ms_sync",
    "ms_table_init",
    "ms_rank",
    "ms_wscan",
    "ms_round_claim",
    "ms_round_break",
    "ms_round_commit",
    "ms_scan1",
];

/// A kernel, by its place in [`KERNELS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    Sync = 0,
    TableInit = 1,
    Rank = 2,
    WScan = 3,
    RoundClaim = 4,
    RoundBreak = 5,
    RoundCommit = 6,
    Scan1 = 7,
}

impl Kernel {
    /// Threads per block: the rank kernel's blocks are its chunks of messages.
    pub fn block(self) -> u32 {
        match self {
            Kernel::Rank => 1024,
            _ => 256,
        }
    }
}

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

/// A driver call's result, named.
fn check(call: &str, result: sys::CUresult) -> Result<(), String> {
    if result == sys::CUresult::CUDA_SUCCESS {
        return Ok(());
    }
    let mut text: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: the driver returns a static string, or leaves the pointer null.
    unsafe { sys::cuGetErrorString(result, &mut text) };
    let text = if text.is_null() {
        format!("{result:?}")
    } else {
        // SAFETY: a static, NUL-terminated string from the driver.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    };
    Err(format!("{call}: {text}"))
}

fn driver_present() -> bool {
    // SAFETY: dlopen of a library name; nothing is called.
    unsafe { sys::is_culib_present() }
}

const NO_DRIVER: &str = "no CUDA driver: libcuda.so not found";

/// The CUDA version the driver supports, as (12, 4).
fn driver_cuda() -> Result<(i32, i32), String> {
    if !driver_present() {
        return Err(NO_DRIVER.to_string());
    }
    guarded("cuDriverGetVersion", || {
        let mut version = 0;
        // SAFETY: writes one int.
        check("cuDriverGetVersion", unsafe {
            sys::cuDriverGetVersion(&mut version)
        })?;
        Ok((version / 1000, version % 1000 / 10))
    })
}

/// The CUDA driver's version, as "12.4".
pub fn driver_version() -> Result<String, String> {
    driver_cuda().map(|(major, minor)| format!("{major}.{minor}"))
}

/// A device the driver sees.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    pub name: String,
    /// Compute capability (major, minor).
    pub capability: (i32, i32),
    pub multiprocessors: i32,
}

impl DeviceInfo {
    /// As NVRTC names it: 90 for 9.0.
    pub fn arch(&self) -> i32 {
        self.capability.0 * 10 + self.capability.1
    }
}

/// The devices the driver sees.
pub fn devices() -> Result<Vec<DeviceInfo>, String> {
    driver_cuda()?;
    guarded("device query", || {
        // SAFETY: plain queries with valid out-pointers.
        check("cuInit", unsafe { sys::cuInit(0) })?;
        let mut count = 0;
        check("cuDeviceGetCount", unsafe {
            sys::cuDeviceGetCount(&mut count)
        })?;
        (0..count).map(device_info).collect()
    })
}

fn device_info(ordinal: i32) -> Result<DeviceInfo, String> {
    let mut device = 0;
    // SAFETY: plain queries of a device the driver counted.
    check("cuDeviceGet", unsafe {
        sys::cuDeviceGet(&mut device, ordinal)
    })?;
    let mut name = [0 as std::ffi::c_char; 256];
    check("cuDeviceGetName", unsafe {
        sys::cuDeviceGetName(name.as_mut_ptr(), name.len() as i32, device)
    })?;
    // SAFETY: the driver wrote a NUL-terminated name.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let attribute = |a| {
        let mut value = 0;
        // SAFETY: as above.
        check("cuDeviceGetAttribute", unsafe {
            sys::cuDeviceGetAttribute(&mut value, a, device)
        })
        .map(|()| value)
    };
    use sys::CUdevice_attribute as A;
    Ok(DeviceInfo {
        name,
        capability: (
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attribute(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        multiprocessors: attribute(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
    })
}

/// The NVRTC this process uses (chosen for the driver, if there is one).
fn nvrtc() -> Result<&'static Nvrtc, String> {
    guarded("loading NVRTC", || nvrtc::load(driver_cuda().ok()))
}

/// NVRTC's version, as "12.9 (libnvrtc.so.12)".
pub fn nvrtc_version() -> Result<String, String> {
    let nvrtc = nvrtc()?;
    Ok(format!(
        "{}.{} ({})",
        nvrtc.version.0, nvrtc.version.1, nvrtc.library
    ))
}

/// The compute capabilities the loaded NVRTC compiles for (75 for 7.5).
pub fn nvrtc_archs() -> Result<Vec<i32>, String> {
    Ok(nvrtc()?.archs.clone())
}

/// The kernels as PTX for compute capability `arch` (80 for 8.0), compiled by NVRTC.
pub fn compile_ptx(arch: i32) -> Result<String, String> {
    let nvrtc = nvrtc()?;
    guarded("NVRTC", || {
        nvrtc.compile(&source(), "matchshim_kernels.cu", arch)
    })
}

/// Which memory a pooled block is.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Kind {
    /// Host memory, page-locked and mapped into the device.
    Pinned,
    Device,
}

/// Free pooled blocks by kind and size: (host address, device address).
type Pool = HashMap<(Kind, usize), Vec<(usize, u64)>>;

/// A pooled block: back to its pool when dropped.
pub struct Block {
    pub host_ptr: *mut u8,
    pub device_ptr: u64,
    bytes: usize,
    kind: Kind,
    device: Arc<Device>,
}

impl Drop for Block {
    fn drop(&mut self) {
        let mut pool = self.device.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.entry((self.kind, self.bytes))
            .or_default()
            .push((self.host_ptr as usize, self.device_ptr));
    }
}

/// A device with the kernels loaded, and its memory pools.
pub struct Device {
    context: sys::CUcontext,
    functions: [sys::CUfunction; KERNELS.len()],
    from_memory: [sys::CUfunction; KERNELS.len()],
    pub info: DeviceInfo,
    /// The architecture the kernels were compiled for, and by which NVRTC.
    pub compiled: String,
    pool: Mutex<Pool>,
}

// SAFETY: the context and functions are driver handles, usable from any thread once the
// context is made current there (`bind`).
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

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
    let nvrtc = nvrtc()?;
    let arch = nvrtc.arch_for(info.arch()).ok_or_else(|| {
        format!(
            "{} (NVRTC {}.{}) compiles for {}, none of them for {} (sm_{})",
            nvrtc.library,
            nvrtc.version.0,
            nvrtc.version.1,
            arch_list(&nvrtc.archs),
            info.name,
            info.arch()
        )
    })?;
    let ptx = compile_ptx(arch)?;
    let mut device = 0;
    let mut context = std::ptr::null_mut();
    // SAFETY: device 0 exists (counted above); its primary context is retained for the
    // process's life.
    check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut device, 0) })?;
    check("cuDevicePrimaryCtxRetain", unsafe {
        sys::cuDevicePrimaryCtxRetain(&mut context, device)
    })?;
    check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(context) })?;
    let ptx = CString::new(ptx).map_err(|_| "NUL in PTX")?;
    let mut module = std::ptr::null_mut();
    // SAFETY: NUL-terminated PTX text.
    let loaded = unsafe { sys::cuModuleLoadData(&mut module, ptx.as_ptr().cast()) };
    let driver = driver_version().unwrap_or_default();
    check("cuModuleLoadData", loaded).map_err(|e| {
        format!(
            "CUDA driver {driver} rejected the PTX of {} (NVRTC {}.{}): {e}; an NVRTC no newer \
             than the driver is needed",
            nvrtc.library, nvrtc.version.0, nvrtc.version.1
        )
    })?;
    let function = |name: &str| {
        let c = CString::new(name).expect("no NUL");
        let mut function = std::ptr::null_mut();
        // SAFETY: a loaded module and a NUL-terminated name.
        check(&format!("kernel {name}"), unsafe {
            sys::cuModuleGetFunction(&mut function, module, c.as_ptr())
        })
        .map(|()| function)
    };
    let mut functions = [std::ptr::null_mut(); KERNELS.len()];
    let mut from_memory = [std::ptr::null_mut(); KERNELS.len()];
    for (k, name) in KERNELS.iter().enumerate() {
        functions[k] = function(name)?;
        from_memory[k] = function(&format!("{name}_p"))?;
    }
    Ok(Device {
        context,
        functions,
        from_memory,
        compiled: format!(
            "compute_{arch} by NVRTC {}.{} ({})",
            nvrtc.version.0, nvrtc.version.1, nvrtc.library
        ),
        info,
        pool: Mutex::new(HashMap::new()),
    })
}

impl Device {
    /// Makes the context current on the calling thread (the engine may be called from any).
    fn bind(&self) -> Result<(), String> {
        // SAFETY: a retained context.
        check("cuCtxSetCurrent", unsafe {
            sys::cuCtxSetCurrent(self.context)
        })
    }

    /// A block of at least `bytes` of `kind`, from the pool or the driver.
    pub fn block(self: &Arc<Self>, kind: Kind, bytes: usize) -> Result<Block, String> {
        let bytes = bytes.max(4096).next_power_of_two();
        let pooled = {
            let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
            pool.get_mut(&(kind, bytes)).and_then(Vec::pop)
        };
        let (host, device_ptr) = match pooled {
            Some(found) => found,
            None => guarded("allocation", || {
                self.bind()?;
                match kind {
                    Kind::Pinned => self.alloc_pinned(bytes),
                    Kind::Device => {
                        let mut ptr = 0;
                        // SAFETY: a plain allocation.
                        check(&format!("cuMemAlloc of {bytes} bytes"), unsafe {
                            sys::cuMemAlloc_v2(&mut ptr, bytes)
                        })?;
                        Ok((0, ptr))
                    }
                }
            })?,
        };
        Ok(Block {
            host_ptr: host as *mut u8,
            device_ptr,
            bytes,
            kind,
            device: self.clone(),
        })
    }

    fn alloc_pinned(&self, bytes: usize) -> Result<(usize, u64), String> {
        let flags = sys::CU_MEMHOSTALLOC_DEVICEMAP | sys::CU_MEMHOSTALLOC_PORTABLE;
        let mut ptr = std::ptr::null_mut();
        // SAFETY: a fresh allocation; its contents are set by the caller.
        check(&format!("cuMemHostAlloc of {bytes} bytes"), unsafe {
            sys::cuMemHostAlloc(&mut ptr, bytes, flags)
        })?;
        let mut device_ptr = 0;
        // SAFETY: `ptr` was allocated with DEVICEMAP just now.
        let mapped = unsafe { sys::cuMemHostGetDevicePointer_v2(&mut device_ptr, ptr, 0) };
        if let Err(e) = check("cuMemHostGetDevicePointer", mapped) {
            // SAFETY: allocated above, not handed out.
            unsafe { sys::cuMemFreeHost(ptr) };
            return Err(e);
        }
        Ok((ptr as usize, device_ptr))
    }

    /// A stream of its own for one engine, launching `launch`'s way.
    pub fn launcher(self: &Arc<Self>, launch: Launch) -> Result<Launcher, String> {
        guarded("launcher", || {
            self.bind()?;
            let mut stream = std::ptr::null_mut();
            // SAFETY: a plain stream creation.
            check("cuStreamCreate", unsafe {
                sys::cuStreamCreate(
                    &mut stream,
                    sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32,
                )
            })?;
            let args_bytes = std::mem::size_of::<super::mirror::MsArgs>();
            Ok(Launcher {
                device: self.clone(),
                stream,
                launch,
                args_host: self.block(Kind::Pinned, args_bytes)?,
                args_device: self.block(Kind::Device, args_bytes)?,
                graphs: HashMap::new(),
            })
        })
    }
}

/// How bursts reach the device: launch by launch on a stream, or as a captured graph replayed
/// (one call for the whole sequence; the arguments are copied to device memory by the graph's
/// first node). Which is faster is for a device to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Launch {
    Stream,
    Graph,
}

impl Launch {
    pub fn name(self) -> &'static str {
        match self {
            Launch::Stream => "stream",
            Launch::Graph => "graph",
        }
    }
}

/// One engine's launches.
pub struct Launcher {
    device: Arc<Device>,
    stream: sys::CUstream,
    launch: Launch,
    args_host: Block,
    args_device: Block,
    graphs: HashMap<Vec<Kernel>, sys::CUgraphExec>,
}

// SAFETY: the stream and graphs are driver handles used by the engine that owns them.
unsafe impl Send for Launcher {}

impl Launcher {
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }

    /// Grid size of `kernel` for `items` work items: enough blocks for them in a plain launch,
    /// a fixed grid that fills the device in a graph (the kernels loop over their work).
    fn grid(&self, kernel: Kernel, items: u32) -> u32 {
        let sms = self.device.info.multiprocessors.max(1) as u32;
        let most = if kernel == Kernel::Rank {
            2 * sms
        } else {
            8 * sms
        };
        match self.launch {
            Launch::Graph => most,
            Launch::Stream => items.div_ceil(kernel.block()).clamp(1, most),
        }
    }

    /// Fills `count` 32-bit words at device address `ptr` with `value`, in stream order.
    pub fn fill(&mut self, ptr: u64, value: u32, count: usize) -> Result<(), String> {
        guarded("cuMemsetD32Async", || {
            self.device.bind()?;
            // SAFETY: the caller owns `count` words at `ptr`.
            check("cuMemsetD32Async", unsafe {
                sys::cuMemsetD32Async(ptr, value, count, self.stream)
            })
        })
    }

    /// Launches `kernels` in order with `args`; `items(kernel)` is each one's work.
    pub fn run(
        &mut self,
        kernels: &[Kernel],
        args: &super::mirror::MsArgs,
        items: impl Fn(Kernel) -> u32,
    ) -> Result<(), String> {
        guarded("launch", || {
            self.device.bind()?;
            match self.launch {
                Launch::Stream => {
                    for &kernel in kernels {
                        let grid = self.grid(kernel, items(kernel));
                        let mut param = args as *const _ as *mut c_void;
                        // SAFETY: the kernel takes one `ms_args` by value; `args` outlives the
                        // call (the driver copies parameters when the launch is queued).
                        check(KERNELS[kernel as usize], unsafe {
                            sys::cuLaunchKernel(
                                self.device.functions[kernel as usize],
                                grid,
                                1,
                                1,
                                kernel.block(),
                                1,
                                1,
                                0,
                                self.stream,
                                &mut param,
                                std::ptr::null_mut(),
                            )
                        })?;
                        LAUNCHES.fetch_add(1, Ordering::Relaxed);
                    }
                }
                Launch::Graph => {
                    // SAFETY: the pinned block holds an `ms_args`, read by the graph's copy.
                    unsafe { std::ptr::write(self.args_host.host_ptr.cast(), *args) };
                    let graph = match self.graphs.get(kernels) {
                        Some(&graph) => graph,
                        None => {
                            let graph = self.capture(kernels)?;
                            self.graphs.insert(kernels.to_vec(), graph);
                            graph
                        }
                    };
                    // SAFETY: an instantiated graph of this stream's kernels.
                    check("cuGraphLaunch", unsafe {
                        sys::cuGraphLaunch(graph, self.stream)
                    })?;
                    LAUNCHES.fetch_add(kernels.len() as u64, Ordering::Relaxed);
                }
            }
            Ok(())
        })
    }

    /// Captures the copy of the arguments and `kernels` (reading them from device memory) as
    /// one graph.
    fn capture(&mut self, kernels: &[Kernel]) -> Result<sys::CUgraphExec, String> {
        let mode = sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
        // SAFETY: capture of this engine's own stream; every call below only queues work.
        check("cuStreamBeginCapture", unsafe {
            sys::cuStreamBeginCapture_v2(self.stream, mode)
        })?;
        let queued = (|| -> Result<(), String> {
            let bytes = std::mem::size_of::<super::mirror::MsArgs>();
            // SAFETY: both blocks hold at least `bytes`.
            check("cuMemcpyHtoDAsync", unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    self.args_device.device_ptr,
                    self.args_host.host_ptr.cast(),
                    bytes,
                    self.stream,
                )
            })?;
            for &kernel in kernels {
                let mut pointer = self.args_device.device_ptr;
                let mut param = &mut pointer as *mut u64 as *mut c_void;
                // SAFETY: the `_p` kernel takes one pointer to `ms_args` in device memory.
                check(KERNELS[kernel as usize], unsafe {
                    sys::cuLaunchKernel(
                        self.device.from_memory[kernel as usize],
                        self.grid(kernel, 0),
                        1,
                        1,
                        kernel.block(),
                        1,
                        1,
                        0,
                        self.stream,
                        &mut param,
                        std::ptr::null_mut(),
                    )
                })?;
            }
            Ok(())
        })();
        let mut graph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above, whatever happened in between.
        let ended = check("cuStreamEndCapture", unsafe {
            sys::cuStreamEndCapture(self.stream, &mut graph)
        });
        queued?;
        ended?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: a captured graph, destroyed once instantiated.
        let made = check("cuGraphInstantiate", unsafe {
            sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0)
        });
        unsafe { sys::cuGraphDestroy(graph) };
        made.map(|()| exec)
    }

    /// Waits for everything queued.
    pub fn wait(&mut self) -> Result<(), String> {
        guarded("cuStreamSynchronize", || {
            self.device.bind()?;
            // SAFETY: this engine's stream.
            check("cuStreamSynchronize", unsafe {
                sys::cuStreamSynchronize(self.stream)
            })
        })
    }
}

impl Drop for Launcher {
    fn drop(&mut self) {
        let _ = guarded("releasing a stream", || {
            self.device.bind()?;
            for (_, graph) in self.graphs.drain() {
                // SAFETY: instantiated by this launcher, destroyed once.
                unsafe { sys::cuGraphExecDestroy(graph) };
            }
            // SAFETY: the stream is idle (every run is waited for) and destroyed once.
            unsafe { sys::cuStreamDestroy_v2(self.stream) };
            Ok(())
        });
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
