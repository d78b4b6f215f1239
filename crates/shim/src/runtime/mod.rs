//! Per-process state: configuration, communicators, the requests the shim completes, and the
//! progress engine that feeds arrivals to the matching engines. Point-to-point only: other
//! traffic (the collectives) joins as a [`Client`] of the progress engine and as a side channel
//! of a communicator (`comm::Side`).

pub use matchshim_core::clock;
pub mod comm;
pub mod complete;
pub mod p2p;
#[cfg(mpi4)]
mod pair;
pub mod recv;
pub mod report;
pub mod request;
pub mod takeover;

use crate::config::Config;
use crate::ffi::{MPI_Comm, MPI_Request};
use crate::mpi::{self, abi, Code, HandleKey};
use crate::report::RankReport;
use comm::Comm;
use parking_lot::{Mutex, RwLock};
use request::Request;
use rustc_hash::FxHashMap;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Why a call did not complete in the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// An argument is invalid: the call goes to MPI as it is, and MPI reports it (naming the
    /// call and the value, through the communicator's error handler) as it would natively.
    Invalid,
    /// MPI returned this code; it was raised through the communicator's error handler.
    Raised(Code),
}

/// Something besides point-to-point receives that needs the progress engine (the collectives
/// the shim runs).
/// A client with work under way says so with [`Runtime::client_busy`]: blocking calls must then
/// poll instead of blocking inside MPI.
pub trait Client: Sync {
    /// Moves its work on; called in every round of progress while some client is busy.
    fn progress(&self, rt: &Runtime);
    /// The user freed `comm`.
    fn forget(&self, rt: &Runtime, comm: &'static Comm);
    /// Adds its part to this rank's report.
    fn report(&self, report: &mut RankReport);
}

pub struct Runtime {
    pub config: Config,
    pub world_rank: c_int,
    pub tag_ub: c_int,
    pub thread_level: c_int,
    /// `MPI_THREAD_MULTIPLE`: MPI calls may run concurrently.
    pub multiple: bool,
    /// The engine's name as a C string, for `matchshim_engine()`.
    pub engine_name: std::ffi::CString,
    comms: RwLock<FxHashMap<usize, &'static Comm>>,
    /// The communicator looked up last (below `MPI_THREAD_MULTIPLE`).
    last_comm: Serial<(usize, Option<&'static Comm>)>,
    next_comm_id: AtomicU64,
    /// Communicators that have had receives waiting for progress.
    listed: Mutex<Vec<&'static Comm>>,
    /// Receives anywhere in the process that need the shim's progress to complete.
    pending: AtomicUsize,
    /// Clients with work under way.
    busy_clients: AtomicUsize,
    requests: request::Registry,
    /// Counters of communicators already freed.
    retired: Mutex<report::Totals>,
    pub clock: clock::Clock,
    /// MPI's cost of a receive that finds its message at once (`takeover::found_floor`).
    found_floor: u64,
    finalized: AtomicBool,
    /// Attribute key whose delete callback tells the runtime a communicator is gone.
    keyval: c_int,
    clients: &'static [&'static dyn Client],
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// A value only one thread uses at a time: below `MPI_THREAD_MULTIPLE` the program makes one
/// MPI call at a time, so the shim's per-call state needs no synchronisation there (and no
/// thread-local lookup, which costs a call in a shared library).
struct Serial<T>(UnsafeCell<T>);

// SAFETY: used only below MPI_THREAD_MULTIPLE, where one thread at a time is inside the shim.
unsafe impl<T> Sync for Serial<T> {}

/// The MPI call the shim is handling, below `MPI_THREAD_MULTIPLE`.
static IN_CALL_SERIAL: Serial<Option<&'static str>> = Serial(UnsafeCell::new(None));

thread_local! {
    /// The MPI call this thread is in, while the shim handles it (at `MPI_THREAD_MULTIPLE`).
    static IN_CALL: Cell<Option<&'static str>> = const { Cell::new(None) };
    static SCRATCH: RefCell<Vec<&'static Comm>> = const { RefCell::new(Vec::new()) };
}

/// The MPI call the shim is handling on this thread, if any.
#[inline]
fn in_call(rt: &Runtime) -> Option<&'static str> {
    if rt.multiple {
        IN_CALL.with(|c| c.get())
    } else {
        // SAFETY: see `Serial`.
        unsafe { *IN_CALL_SERIAL.0.get() }
    }
}

#[inline]
fn set_in_call(rt: &Runtime, call: Option<&'static str>) {
    if rt.multiple {
        IN_CALL.with(|c| c.set(call));
    } else {
        // SAFETY: see `Serial`.
        unsafe { *IN_CALL_SERIAL.0.get() = call };
    }
}

/// The runtime, when an intercepted call should go through it: after `MPI_Init`, before
/// `MPI_Finalize`, and not from inside the shim itself (an MPI callback re-entering).
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    if rt.finalized.load(Ordering::Relaxed) || in_call(rt).is_some() {
        return None;
    }
    Some(rt)
}

/// [`runtime`] below `MPI_THREAD_MULTIPLE` (`None` at `MPI_THREAD_MULTIPLE`): plain loads only.
#[inline(always)]
pub fn serial_runtime() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    // SAFETY: see `Serial`; read only below MPI_THREAD_MULTIPLE.
    if rt.multiple
        || rt.finalized.load(Ordering::Relaxed)
        || unsafe { (*IN_CALL_SERIAL.0.get()).is_some() }
    {
        return None;
    }
    Some(rt)
}

/// Runs `body` as the shim's handling of MPI call `name`, so MPI callbacks that call `MPI_*`
/// pass through.
#[inline]
pub fn inside<R>(rt: &Runtime, name: &'static str, body: impl FnOnce() -> R) -> R {
    struct Reset<'a>(&'a Runtime);
    impl Drop for Reset<'_> {
        fn drop(&mut self) {
            set_in_call(self.0, None);
        }
    }
    set_in_call(rt, Some(name));
    let _reset = Reset(rt);
    body()
}

/// The MPI call the shim is handling on this thread.
pub fn current_call() -> &'static str {
    RUNTIME.get().and_then(in_call).unwrap_or("MPI")
}

/// Installs the runtime after `PMPI_Init`.
pub fn install(config: Config, thread_level: c_int, clients: &'static [&'static dyn Client]) {
    let clock = clock::Clock::new();
    let found_floor = takeover::found_floor(&clock);
    let _ = RUNTIME.set(Runtime {
        world_rank: mpi::comm_rank(abi().comm_world),
        tag_ub: mpi::tag_ub(),
        thread_level,
        multiple: thread_level == abi().thread_multiple,
        engine_name: std::ffi::CString::new(config.engine.name())
            .expect("engine names have no NUL"),
        comms: RwLock::new(FxHashMap::default()),
        last_comm: Serial(UnsafeCell::new((usize::MAX, None))),
        next_comm_id: AtomicU64::new(0),
        listed: Mutex::new(Vec::new()),
        pending: AtomicUsize::new(0),
        busy_clients: AtomicUsize::new(0),
        requests: request::Registry::new(),
        retired: Mutex::new(report::Totals::default()),
        clock,
        found_floor,
        finalized: AtomicBool::new(false),
        keyval: mpi::comm_keyval(comm_freed),
        clients,
        config,
    });
}

/// The installed runtime, for the calls that set it up.
pub fn installed() -> Option<&'static Runtime> {
    RUNTIME.get()
}

/// A communicator can be freed where the shim does not see it (from a callback the shim runs,
/// such as a user op whose language runtime collects garbage), and MPI reuses handles; an
/// attribute on every communicator the shim knows tells it when one goes.
unsafe extern "C" fn comm_freed(
    comm: MPI_Comm,
    _keyval: c_int,
    _value: *mut c_void,
    _extra: *mut c_void,
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
    /// The state of `handle`, created on first use. `Err(Invalid)` for a handle MPI rejects.
    #[inline]
    pub fn comm(&self, handle: MPI_Comm) -> Result<&'static Comm, Error> {
        match self.last_comm(handle) {
            Some(comm) => Ok(comm),
            None => self.comm_from_table(handle),
        }
    }

    /// The communicator looked up last, if it is `handle` (below `MPI_THREAD_MULTIPLE`).
    #[inline]
    pub fn last_comm(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        if self.multiple {
            return None;
        }
        // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
        match unsafe { *self.last_comm.0.get() } {
            (cached, comm) if cached == handle.key() => comm,
            _ => None,
        }
    }

    #[inline(never)]
    fn comm_from_table(&self, handle: MPI_Comm) -> Result<&'static Comm, Error> {
        let key = handle.key();
        let known = self.comms.read().get(&key).copied();
        let comm = match known {
            Some(comm) => comm,
            None => self.add_comm(handle)?,
        };
        if !self.multiple {
            // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
            unsafe { *self.last_comm.0.get() = (key, Some(comm)) };
        }
        Ok(comm)
    }

    #[cold]
    fn add_comm(&self, handle: MPI_Comm) -> Result<&'static Comm, Error> {
        if handle.key() == abi().comm_null.key() {
            return Err(Error::Invalid);
        }
        let shape = mpi::comm_shape(handle).map_err(|_| Error::Invalid)?;
        let id = self.next_comm_id.fetch_add(1, Ordering::Relaxed);
        let mut comms = self.comms.write();
        if let Some(&comm) = comms.get(&handle.key()) {
            return Ok(comm);
        }
        // Kept for the run: a reference to it never dangles, so none is counted.
        let comm: &'static Comm = Box::leak(Box::new(Comm::new(
            id,
            handle,
            shape,
            &self.config,
            self.clock.elapsed_ns(),
            self.found_floor,
        )));
        comms.insert(handle.key(), comm);
        drop(comms);
        mpi::comm_set_attr(handle, self.keyval);
        Ok(comm)
    }

    /// The user frees `handle`: receives waiting in the shim go to MPI first, which completes
    /// them after the handle is gone (see `Comm::release`). MPI refuses to free the predefined
    /// communicators, so they stay as they are.
    pub fn release_comm(&self, handle: MPI_Comm) {
        if handle == abi().comm_world || handle == abi().comm_self {
            return;
        }
        let known = self.comms.read().get(&handle.key()).cloned();
        if let Some(comm) = known {
            comm.release(self);
        }
    }

    /// The user set `handle`'s info: its engine follows the assertions it makes now.
    pub fn info_changed(&self, handle: MPI_Comm) {
        let known = self.comms.read().get(&handle.key()).cloned();
        if let Some(comm) = known {
            comm.queues
                .lock()
                .assert(mpi::comm_assertions(handle), self.config.engine);
        }
    }

    /// Forgets a communicator MPI frees, keeping its counters.
    fn forget_comm(&self, handle: MPI_Comm) {
        let removed = self.comms.write().remove(&handle.key());
        let Some(comm) = removed else { return };
        if !self.multiple {
            // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
            unsafe { *self.last_comm.0.get() = (usize::MAX, None) };
        }
        comm.forget(self);
        self.retired.lock().add_comm(comm, self);
        comm.empty();
        for client in self.clients {
            client.forget(self, comm);
        }
    }

    pub fn add_pending(&self, comm: &'static Comm, delta: isize) {
        if delta > 0 {
            self.pending.fetch_add(delta as usize, Ordering::AcqRel);
            comm.pending.fetch_add(delta as usize, Ordering::AcqRel);
            if !comm.listed.swap(true, Ordering::AcqRel) {
                self.listed.lock().push(comm);
            }
        } else {
            self.pending.fetch_sub((-delta) as usize, Ordering::AcqRel);
            comm.pending.fetch_sub((-delta) as usize, Ordering::AcqRel);
        }
    }

    /// True when some receive or client in the process needs the shim's progress; blocking
    /// calls must then poll instead of blocking inside MPI.
    #[inline]
    pub fn needs_progress(&self) -> bool {
        self.pending.load(Ordering::Acquire) > 0 || self.busy_clients.load(Ordering::Acquire) > 0
    }

    /// A client's work got under way (`true`) or all of it finished (`false`).
    pub fn client_busy(&self, busy: bool) {
        if busy {
            self.busy_clients.fetch_add(1, Ordering::AcqRel);
        } else {
            self.busy_clients.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// One round of progress: `focus` first, then the clients, then every communicator with
    /// waiting receives (a peer's synchronous send may be waiting for one of them to match).
    pub fn progress(&self, focus: Option<&'static Comm>) {
        if let Some(comm) = focus {
            comm.progress(self);
        }
        if self.busy_clients.load(Ordering::Acquire) > 0 {
            for client in self.clients {
                client.progress(self);
            }
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
            {
                let mut listed = self.listed.lock();
                // A communicator that was freed drops out once MPI finished its receives.
                listed.retain(|c| {
                    let keep = !c.is_freed() || c.pending.load(Ordering::Acquire) > 0;
                    if !keep {
                        c.listed.store(false, Ordering::Release);
                    }
                    keep
                });
                list.extend(
                    listed
                        .iter()
                        .filter(|c| c.pending.load(Ordering::Acquire) > 0)
                        .filter(|c| focus.is_none_or(|f| !std::ptr::eq(**c, f)))
                        .copied(),
                );
            }
            for comm in list.iter() {
                comm.progress(self);
            }
            list.clear();
        });
    }

    /// Spins on `done`, making progress. After spinning for a while (tens of microseconds)
    /// it yields the core each round, so ranks that share cores keep moving.
    pub fn wait_until(&self, focus: Option<&'static Comm>, mut done: impl FnMut() -> bool) {
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

    /// Waits for a real request with the shim's progress (or inside MPI when nothing needs
    /// it); its status and code.
    pub fn wait_real(&self, request: &mut MPI_Request) -> (crate::ffi::MPI_Status, Code) {
        if !self.needs_progress() {
            return mpi::wait(request);
        }
        let mut outcome = None;
        self.wait_until(None, || {
            outcome = mpi::test(request);
            outcome.is_some()
        });
        outcome.expect("completed")
    }

    pub fn register(&self, handle: MPI_Request, request: Request) {
        self.requests.insert(handle, request);
    }

    #[inline]
    pub fn lookup(&self, handle: MPI_Request) -> Option<Request> {
        self.requests.get(handle)
    }

    /// A single-completion call on `handle` can go to MPI as it is: the handle is MPI's own
    /// (not even followed) and nothing waits for the shim's progress.
    #[inline]
    pub fn plainly_completed(&self, handle: MPI_Request) -> bool {
        self.requests.surely_unknown(handle) && !self.needs_progress()
    }

    /// A completion call over `count` handles at `requests` can go to MPI as it is: none of
    /// them is the shim's (nor followed) and nothing waits for the shim's progress.
    ///
    /// # Safety
    /// `requests` holds `count` handles, or `count` is not positive.
    #[inline]
    pub unsafe fn plainly_completed_all(&self, count: c_int, requests: *const MPI_Request) -> bool {
        if self.needs_progress() {
            return false;
        }
        if count <= 0 || requests.is_null() {
            return true;
        }
        std::slice::from_raw_parts(requests, count as usize)
            .iter()
            .all(|&r| self.requests.surely_unknown(r))
    }

    /// The requests among `handles` the shim knows, with their positions.
    pub fn known_in(&self, handles: &[MPI_Request]) -> Vec<(usize, Request)> {
        self.requests.known_in(handles)
    }

    pub fn unregister(&self, handle: MPI_Request) {
        self.requests.remove(handle);
    }

    /// Raises `code` through `comm`'s error handler. When that handler ends the program, the
    /// line before MPI's own names the call the user made, which MPI cannot know.
    pub fn raise(&self, comm: MPI_Comm, code: Code) -> Error {
        if mpi::errors_are_fatal(comm) {
            crate::say(&format!(
                "matchshim: rank {}: {} failed: {}",
                self.world_rank,
                current_call(),
                mpi::error_string(code)
            ));
        }
        Error::Raised(mpi::raise(comm, code))
    }

    pub fn totals(&self) -> report::Totals {
        let mut totals = self.retired.lock().clone();
        for comm in self.comms.read().values() {
            totals.add_comm(comm, self);
        }
        totals
    }

    pub fn clients(&self) -> &'static [&'static dyn Client] {
        self.clients
    }
}
