//! Per-process state: configuration, communicators, the requests the shim completes, and the
//! progress engine that feeds arrivals to the matching engines.

pub mod clock;
pub mod comm;
pub mod complete;

pub mod p2p;
pub mod pmpi;
pub mod recv;
pub mod report;

use crate::config::Config;
use crate::ffi::*;
use comm::{Comm, Posted};
use parking_lot::{Mutex, RwLock};
use recv::RecvOp;
use std::cell::RefCell;
use std::collections::HashMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A persistent receive: the user's handle is an inactive `PMPI_Recv_init` request; each start
/// posts a fresh receive.
pub struct PersistentRecv {
    pub buf: *mut std::os::raw::c_void,
    pub count: Count,
    pub datatype: MPI_Datatype,
    pub source: c_int,
    pub tag: c_int,
    pub comm: Arc<Comm>,
    pub current: Mutex<Option<Arc<RecvOp>>>,
}

// SAFETY: as for RecvOp.
unsafe impl Send for PersistentRecv {}
unsafe impl Sync for PersistentRecv {}

/// A user-visible request handle whose completion the shim drives.
#[derive(Clone)]
pub enum ShimRequest {
    Recv(Arc<RecvOp>),
    Persistent(Arc<PersistentRecv>),
    Collective(Arc<crate::coll::CollOp>),
}

pub struct Runtime {
    pub config: Config,
    pub world_rank: c_int,
    pub tag_ub: c_int,
    pub thread_level: c_int,
    /// The engine's name as a C string, for `matchshim_engine()`.
    pub engine_name: std::ffi::CString,
    comms: RwLock<HashMap<usize, Arc<Comm>, HandleHash>>,
    /// Communicators that have had receives waiting for progress.
    listed: Mutex<Vec<Arc<Comm>>>,
    /// Receives anywhere in the process that need the shim's progress to complete.
    pending: AtomicUsize,
    requests: Mutex<HashMap<usize, ShimRequest, HandleHash>>,
    request_count: AtomicUsize,
    /// Counters of communicators already freed.
    retired: Mutex<report::Totals>,
    pub clock: clock::Clock,
    finalized: AtomicBool,
    /// How collective tags carry the call number, kind and size class.
    pub tags: crate::coll::TagLayout,
    pub coll_stats: crate::coll::CollStats,
    /// Nonblocking collectives under way.
    pub running: crate::coll::Running,
    /// Attribute key whose delete callback tells the runtime a communicator is gone.
    keyval: c_int,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// Handles are already well spread (MPICH packs kind and index, Open MPI has addresses), so
/// one multiply mixes them enough for the maps.
#[derive(Default, Clone, Copy)]
pub struct HandleHasher(u64);

impl std::hash::Hasher for HandleHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type HandleHash = std::hash::BuildHasherDefault<HandleHasher>;

thread_local! {
    static IN_SHIM: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static SCRATCH: RefCell<Vec<Arc<Comm>>> = const { RefCell::new(Vec::new()) };
}

/// The runtime, when an intercepted call should go through it: after `MPI_Init`, before
/// `MPI_Finalize`, and not from inside the shim itself (an MPI callback re-entering).
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    if rt.finalized.load(Ordering::Relaxed) || IN_SHIM.with(|f| f.get()) {
        return None;
    }
    Some(rt)
}

/// Runs `body` marked as inside the shim, so MPI callbacks that call `MPI_*` pass through.
#[inline]
pub fn inside<R>(body: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            IN_SHIM.with(|f| f.set(false));
        }
    }
    IN_SHIM.with(|f| f.set(true));
    let _reset = Reset;
    body()
}

/// Installs the runtime after `PMPI_Init`.
pub fn install(config: Config, thread_level: c_int) {
    let mut flag = 0;
    let mut tag_ub: *mut c_int = std::ptr::null_mut();
    // SAFETY: MPI_TAG_UB's value is a pointer to an int owned by MPI.
    let tag_ub = unsafe {
        PMPI_Comm_get_attr(
            abi().comm_world,
            abi().tag_ub_key,
            &mut tag_ub as *mut *mut c_int as *mut std::os::raw::c_void,
            &mut flag,
        );
        if flag != 0 && !tag_ub.is_null() {
            *tag_ub
        } else {
            32767
        }
    };
    let _ = RUNTIME.set(Runtime {
        world_rank: pmpi::comm_rank(abi().comm_world),
        tag_ub,
        thread_level,
        engine_name: std::ffi::CString::new(config.engine.name())
            .expect("engine names have no NUL"),
        comms: RwLock::new(HashMap::default()),
        listed: Mutex::new(Vec::new()),
        pending: AtomicUsize::new(0),
        requests: Mutex::new(HashMap::default()),
        request_count: AtomicUsize::new(0),
        retired: Mutex::new(report::Totals::default()),
        clock: clock::Clock::new(),
        finalized: AtomicBool::new(false),
        tags: crate::coll::TagLayout::new(tag_ub),
        coll_stats: Default::default(),
        running: Default::default(),
        keyval: free_keyval(),
        config,
    });
    let rt = RUNTIME.get().expect("just installed");
    // No traffic yet: the duplicates of the predefined communicators are made at once.
    for handle in [abi().comm_world, abi().comm_self] {
        if let Ok(comm) = rt.comm(handle) {
            comm.coll.create_now(&comm);
        }
    }
}

/// A communicator can be freed where the shim does not see it (from a callback the shim runs,
/// such as a user op whose language runtime collects garbage), and MPI reuses handles; an
/// attribute on every communicator the shim knows tells it when one goes.
fn free_keyval() -> c_int {
    let mut keyval = 0;
    // SAFETY: valid callbacks and out-pointer.
    unsafe {
        PMPI_Comm_create_keyval(
            abi().comm_null_copy_fn,
            Some(comm_freed),
            &mut keyval,
            std::ptr::null_mut(),
        )
    };
    keyval
}

unsafe extern "C" fn comm_freed(
    comm: MPI_Comm,
    _keyval: c_int,
    _value: *mut std::os::raw::c_void,
    _extra: *mut std::os::raw::c_void,
) -> c_int {
    if let Some(rt) = RUNTIME.get() {
        if !rt.finalized.load(Ordering::Acquire) {
            rt.forget_comm(comm);
        }
    }
    abi().success
}

/// The runtime at `MPI_Finalize`, once: later calls pass through.
pub fn take_for_finalize() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    (!rt.finalized.swap(true, Ordering::AcqRel)).then_some(rt)
}

impl Runtime {
    /// The state of `handle`, created on first use. An invalid handle gives MPI's own error.
    pub fn comm(&self, handle: MPI_Comm) -> Result<Arc<Comm>, c_int> {
        if let Some(comm) = self.comms.read().get(&handle.key()) {
            return Ok(comm.clone());
        }
        let (mut size, mut inter, mut rank) = (0, 0, 0);
        // SAFETY: plain queries; an invalid handle makes MPI raise and return an error.
        unsafe {
            let err = PMPI_Comm_test_inter(handle, &mut inter);
            if err != abi().success {
                return Err(err);
            }
            let err = if inter != 0 {
                PMPI_Comm_remote_size(handle, &mut size)
            } else {
                PMPI_Comm_size(handle, &mut size)
            };
            if err != abi().success {
                return Err(err);
            }
            PMPI_Comm_rank(handle, &mut rank);
        }
        let params = crate::matching::EngineParams {
            assertions: pmpi::assertions(handle),
            ..self.config.params
        };
        let comm = Arc::new(Comm::new(
            handle,
            size,
            rank,
            inter != 0,
            self.config.engine,
            &params,
        ));
        let (comm, new) = match self.comms.write().entry(handle.key()) {
            std::collections::hash_map::Entry::Occupied(e) => (e.get().clone(), false),
            std::collections::hash_map::Entry::Vacant(e) => (e.insert(comm).clone(), true),
        };
        if new {
            // SAFETY: plain call on a valid communicator.
            unsafe { PMPI_Comm_set_attr(handle, self.keyval, std::ptr::null_mut()) };
        }
        Ok(comm)
    }

    /// Forgets a communicator that the user frees, keeping its counters.
    pub fn forget_comm(&self, handle: MPI_Comm) {
        let removed = self.comms.write().remove(&handle.key());
        if let Some(comm) = removed {
            // MPI may reuse the handle at once, so receives still waiting on it are dropped.
            self.listed.lock().retain(|c| !Arc::ptr_eq(c, &comm));
            let stranded = comm.pending.swap(0, Ordering::AcqRel);
            self.pending.fetch_sub(stranded, Ordering::AcqRel);
            self.retired.lock().add_comm(&comm);
            comm.coll.retire(&comm);
        }
    }

    pub fn add_pending(&self, comm: &Arc<Comm>, delta: isize) {
        if delta > 0 {
            self.pending.fetch_add(delta as usize, Ordering::AcqRel);
            comm.pending.fetch_add(delta as usize, Ordering::AcqRel);
            if !comm.listed.swap(true, Ordering::AcqRel) {
                self.listed.lock().push(comm.clone());
            }
        } else {
            self.pending.fetch_sub((-delta) as usize, Ordering::AcqRel);
            comm.pending.fetch_sub((-delta) as usize, Ordering::AcqRel);
        }
    }

    /// True when some receive or nonblocking collective in the process needs the shim's
    /// progress; blocking calls must then poll instead of blocking inside MPI.
    #[inline]
    pub fn needs_progress(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0 || self.running.any()
    }

    /// One round of progress: `focus` first, then the running nonblocking collectives, then
    /// every communicator with waiting receives (a peer's synchronous send may be waiting for
    /// one of them to match).
    pub fn progress(&self, focus: Option<&Arc<Comm>>) {
        if let Some(comm) = focus {
            comm.progress(self);
        }
        if self.running.any() {
            self.progress_collectives();
        }
        let pending = self.pending.load(Ordering::Acquire);
        let focus_pending = focus.map_or(0, |f| f.pending.load(Ordering::Acquire));
        if pending == focus_pending {
            return;
        }
        SCRATCH.with(|scratch| {
            let Ok(mut list) = scratch.try_borrow_mut() else {
                return;
            };
            list.clear();
            list.extend(
                self.listed
                    .lock()
                    .iter()
                    .filter(|c| c.pending.load(Ordering::Acquire) > 0)
                    .filter(|c| focus.is_none_or(|f| !Arc::ptr_eq(c, f)))
                    .cloned(),
            );
            for comm in list.iter() {
                comm.progress(self);
            }
            list.clear();
        });
    }

    pub fn register(&self, handle: MPI_Request, request: ShimRequest) {
        self.requests.lock().insert(handle.key(), request);
        self.request_count.fetch_add(1, Ordering::AcqRel);
    }

    #[inline]
    pub fn lookup(&self, handle: MPI_Request) -> Option<ShimRequest> {
        if self.request_count.load(Ordering::Acquire) == 0 || handle == abi().request_null {
            return None;
        }
        self.requests.lock().get(&handle.key()).cloned()
    }

    /// `lookup` for each handle, under one lock; `None` when the shim holds no requests.
    pub fn lookup_all(&self, handles: &[MPI_Request]) -> Option<Vec<Option<ShimRequest>>> {
        if self.request_count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let requests = self.requests.lock();
        Some(
            handles
                .iter()
                .map(|h| requests.get(&h.key()).cloned())
                .collect(),
        )
    }

    pub fn unregister(&self, handle: MPI_Request) {
        if self.requests.lock().remove(&handle.key()).is_some() {
            self.request_count.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Posts a blocking receive on `comm`, so a message that already arrived matches at once.
    pub fn post(&self, comm: &Arc<Comm>, want: crate::matching::Pattern) -> Posted {
        comm.queues
            .lock()
            .post_drained(comm, self, want, None, || ())
    }

    /// Cancels a receive that has not matched yet; its request then completes as cancelled.
    pub fn cancel(&self, op: &RecvOp) {
        let comm = op.comm.clone();
        let cancelled = comm.queues.lock().cancel(&comm, self, op);
        if cancelled {
            op.finish_cancelled();
        }
    }

    /// Spins on `done`, making progress. After spinning for a while (tens of microseconds)
    /// it yields the core each round, so ranks that share cores keep moving.
    pub fn wait_until(&self, focus: Option<&Arc<Comm>>, mut done: impl FnMut() -> bool) {
        const SPINS_BEFORE_YIELD: u32 = 1024;
        let mut spins = 0u32;
        loop {
            self.progress(focus);
            if done() {
                return;
            }
            if spins < SPINS_BEFORE_YIELD {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    pub fn totals(&self) -> report::Totals {
        let mut totals = self.retired.lock().clone();
        for comm in self.comms.read().values() {
            totals.add_comm(comm);
        }
        totals
    }
}
