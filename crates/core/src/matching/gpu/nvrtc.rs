//! NVRTC, loaded by this module itself: which library is tried is ours to say (CUDA 13's
//! `libnvrtc.so.13` beside CUDA 12's `libnvrtc.so.12`), so errors name it, and the
//! architectures offered are those the loaded NVRTC says it supports.

use libloading::Library;
use std::ffi::{c_char, c_int, CStr, CString};
use std::sync::OnceLock;

/// The variable that names an NVRTC library file to use instead of looking for one.
pub const NVRTC_VARIABLE: &str = "MATCHSHIM_NVRTC";

/// Names tried, newest CUDA first, then the unversioned name of a CUDA toolkit.
const NAMES: [&str; 3] = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"];

type Program = *mut std::ffi::c_void;
type Status = c_int;

/// The entry points used, resolved once.
struct Api {
    version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> Status,
    arch_count: unsafe extern "C" fn(*mut c_int) -> Status,
    archs: unsafe extern "C" fn(*mut c_int) -> Status,
    create: unsafe extern "C" fn(
        *mut Program,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> Status,
    compile: unsafe extern "C" fn(Program, c_int, *const *const c_char) -> Status,
    log_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    log: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    ptx_size: unsafe extern "C" fn(Program, *mut usize) -> Status,
    ptx: unsafe extern "C" fn(Program, *mut c_char) -> Status,
    destroy: unsafe extern "C" fn(*mut Program) -> Status,
    error: unsafe extern "C" fn(Status) -> *const c_char,
}

/// A loaded NVRTC.
pub struct Nvrtc {
    /// The file as it was asked for (a name on the library path, or `MATCHSHIM_NVRTC`'s).
    pub library: String,
    pub version: (i32, i32),
    /// Compute capabilities it compiles for, as 75, 80, 90, ...
    pub archs: Vec<i32>,
    api: Api,
    _lib: Library,
}

// SAFETY: NVRTC's entry points may be called from any thread; a program is used by one.
unsafe impl Send for Nvrtc {}
unsafe impl Sync for Nvrtc {}

fn symbol<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    // SAFETY: the types above are NVRTC's documented signatures.
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("{name} missing ({e})"))
}

impl Nvrtc {
    fn open(library: &str) -> Result<Nvrtc, String> {
        // SAFETY: loading NVRTC runs no initialisers beyond the C runtime's.
        let lib = unsafe { Library::new(library) }.map_err(|e| {
            // The loader's own words (dlerror) say why: not found, or a wrong file.
            std::error::Error::source(&e).map_or(e.to_string(), |why| why.to_string())
        })?;
        let api = Api {
            version: symbol(&lib, "nvrtcVersion")?,
            arch_count: symbol(&lib, "nvrtcGetNumSupportedArchs")?,
            archs: symbol(&lib, "nvrtcGetSupportedArchs")?,
            create: symbol(&lib, "nvrtcCreateProgram")?,
            compile: symbol(&lib, "nvrtcCompileProgram")?,
            log_size: symbol(&lib, "nvrtcGetProgramLogSize")?,
            log: symbol(&lib, "nvrtcGetProgramLog")?,
            ptx_size: symbol(&lib, "nvrtcGetPTXSize")?,
            ptx: symbol(&lib, "nvrtcGetPTX")?,
            destroy: symbol(&lib, "nvrtcDestroyProgram")?,
            error: symbol(&lib, "nvrtcGetErrorString")?,
        };
        let mut nvrtc = Nvrtc {
            library: library.to_string(),
            version: (0, 0),
            archs: Vec::new(),
            api,
            _lib: lib,
        };
        let (mut major, mut minor) = (0, 0);
        // SAFETY: writes two ints.
        nvrtc.check("nvrtcVersion", unsafe {
            (nvrtc.api.version)(&mut major, &mut minor)
        })?;
        nvrtc.version = (major, minor);
        let mut count = 0;
        // SAFETY: writes one int, then that many.
        nvrtc.check("nvrtcGetNumSupportedArchs", unsafe {
            (nvrtc.api.arch_count)(&mut count)
        })?;
        let mut archs = vec![0; count.max(0) as usize];
        nvrtc.check("nvrtcGetSupportedArchs", unsafe {
            (nvrtc.api.archs)(archs.as_mut_ptr())
        })?;
        nvrtc.archs = archs;
        Ok(nvrtc)
    }

    fn check(&self, call: &str, status: Status) -> Result<(), String> {
        if status == 0 {
            return Ok(());
        }
        // SAFETY: NVRTC returns a static string for every status.
        let what = unsafe { CStr::from_ptr((self.api.error)(status)) };
        Err(format!(
            "{call} of {} failed: {}",
            self.library,
            what.to_string_lossy()
        ))
    }

    /// `source` as PTX for compute capability `arch` (75 for 7.5).
    pub fn compile(&self, source: &str, name: &str, arch: i32) -> Result<String, String> {
        if !self.archs.contains(&arch) {
            return Err(format!(
                "{} (NVRTC {}.{}) does not compile for compute_{arch}; it supports {}",
                self.library,
                self.version.0,
                self.version.1,
                arch_list(&self.archs)
            ));
        }
        let source = CString::new(source).map_err(|_| "NUL in the kernels' source")?;
        let name = CString::new(name).map_err(|_| "NUL in the program name")?;
        let options = [CString::new(format!("--gpu-architecture=compute_{arch}")).expect("no NUL")];
        let options: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut program: Program = std::ptr::null_mut();
        // SAFETY: valid C strings; no headers.
        self.check("nvrtcCreateProgram", unsafe {
            (self.api.create)(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        })?;
        let compiled = self.compile_program(program, &options);
        // SAFETY: created above, destroyed once.
        unsafe { (self.api.destroy)(&mut program) };
        compiled
    }

    fn compile_program(
        &self,
        program: Program,
        options: &[*const c_char],
    ) -> Result<String, String> {
        // SAFETY: `program` is live; `options` point to live C strings.
        let status =
            unsafe { (self.api.compile)(program, options.len() as c_int, options.as_ptr()) };
        if status != 0 {
            let mut size = 0;
            // SAFETY: the log's size, then the log into a buffer of that size.
            unsafe { (self.api.log_size)(program, &mut size) };
            let mut log = vec![0u8; size.max(1)];
            unsafe { (self.api.log)(program, log.as_mut_ptr().cast()) };
            let log = String::from_utf8_lossy(&log);
            return Err(format!(
                "{} (NVRTC {}.{}) rejected the kernels: {}",
                self.library,
                self.version.0,
                self.version.1,
                log.trim_end_matches('\0').trim()
            ));
        }
        let mut size = 0;
        // SAFETY: as for the log.
        self.check("nvrtcGetPTXSize", unsafe {
            (self.api.ptx_size)(program, &mut size)
        })?;
        let mut ptx = vec![0u8; size.max(1)];
        self.check("nvrtcGetPTX", unsafe {
            (self.api.ptx)(program, ptx.as_mut_ptr().cast())
        })?;
        let end = ptx.iter().position(|&b| b == 0).unwrap_or(ptx.len());
        ptx.truncate(end);
        String::from_utf8(ptx).map_err(|_| "NVRTC wrote PTX that is not UTF-8".to_string())
    }

    /// The architecture to compile for a device of compute capability `arch`: its own when
    /// supported, else the newest supported one below it (the driver compiles that PTX on).
    pub fn arch_for(&self, arch: i32) -> Option<i32> {
        self.archs.iter().copied().filter(|&a| a <= arch).max()
    }
}

/// "75, 80, 90".
pub fn arch_list(archs: &[i32]) -> String {
    archs
        .iter()
        .map(|a| a.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Where NVRTC is looked for, in order.
fn candidates() -> Vec<String> {
    match std::env::var(NVRTC_VARIABLE) {
        Ok(path) if !path.is_empty() => vec![path],
        _ => NAMES.iter().map(|n| n.to_string()).collect(),
    }
}

/// The NVRTC for a driver of CUDA version `driver` (major, minor), if one: the newest found
/// that is no newer than the driver (newer PTX than the driver knows fails to load), else the
/// oldest found; without a driver, the newest. Loaded once per process.
pub fn load(driver: Option<(i32, i32)>) -> Result<&'static Nvrtc, String> {
    static LOADED: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let mut found = Vec::new();
            let mut failures = Vec::new();
            for name in candidates() {
                match Nvrtc::open(&name) {
                    Ok(nvrtc) => found.push(nvrtc),
                    Err(why) => failures.push(format!("{name} ({why})")),
                }
            }
            if found.is_empty() {
                return Err(format!(
                    "no NVRTC: tried {}; pip's nvidia-cuda-nvrtc-cu12 (CUDA 12) or \
                     nvidia-cuda-nvrtc (CUDA 13) ships it: put its lib directory on \
                     LD_LIBRARY_PATH, or name the file in {NVRTC_VARIABLE}",
                    failures.join(", ")
                ));
            }
            found.sort_by_key(|n| n.version);
            let fits = |n: &Nvrtc| driver.is_none_or(|d| n.version <= d);
            let pick = found.iter().rposition(fits).unwrap_or(0);
            Ok(found.swap_remove(pick))
        })
        .as_ref()
        .map_err(Clone::clone)
}
