//! The executor of the matching protocol: per-process state and progress. The protocol itself
//! (the takeover policy, the queues, the collective schedules) is `matchshim_core::protocol`;
//! this module runs it on MPI.
//!
//! From the bottom up: [`thread`] (which call the shim is in), [`completion`] and [`receive`]
//! (a receive's buffer, where its bytes move, its one life cycle), [`comm`] (one communicator:
//! its route, its queues on MPI), [`table`] (communicators by handle), [`request`] (the
//! request registry and the generalized-request bridge), then the calls: [`p2p`] (receives,
//! probes, persistent receives), [`complete`] (the wait/test family), [`pair`] (MPI-4's
//! `Isendrecv`), [`report`]. [`Runtime`] ties them together: the communicator table, the
//! registry and the progress loop, which other traffic (the collectives) joins as a
//! [`Client`].

pub use matchshim_core::clock;
pub mod comm;
pub mod complete;
pub mod completion;
pub mod p2p;
#[cfg(mpi4)]
pub mod pair;
pub mod receive;
pub mod report;
pub mod request;
pub mod table;
pub mod thread;

use crate::config::{CollMode, Config};
use crate::mpi::{self, abi, Code, MPI_Comm, MPI_Info, MPI_Request, MPI_Status};
use crate::report::RankReport;
use comm::{Comm, Process};
use parking_lot::Mutex;
use request::Registry;
use std::cell::RefCell;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::OnceLock;
use table::{CommTable, Totals};

/// Why a call did not complete in the shim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// An argument is invalid: the call goes to MPI as it is, and MPI reports it (naming the
    /// call and the value, through the communicator's error handler) as it would natively.
    Invalid,
    /// MPI returned this code; it was raised through the communicator's error handler.
    Raised(Code),
    /// The shim steps aside: MPI runs the call as the program made it.
    ToMpi,
}

/// Something besides point-to-point receives that needs the progress engine (the collectives
/// the shim runs). A client with work under way says so with [`Runtime::client_busy`]:
/// blocking calls must then poll instead of blocking inside MPI.
pub trait Client: Sync {
    /// Moves its work on; called in every round of progress while some client is busy.
    fn progress(&self, rt: &Runtime);
    /// MPI freed `comm`.
    fn forget(&self, rt: &Runtime, comm: &'static Comm);
    /// Adds its part to this rank's report.
    fn report(&self, report: &mut RankReport);
}

pub struct Runtime {
    pub config: Config,
    pub world_rank: c_int,
    pub tag_ub: c_int,
    pub thread_level: c_int,
    /// `MPI_THREAD_MULTIPLE`: MPI calls may run concurrently (also `process.multiple`, kept
    /// here for the plain path's first check).
    pub multiple: bool,
    /// The engine's name as a C string, for `matchshim_engine()`.
    pub engine_name: std::ffi::CString,
    /// What every communicator shares: settings, clock, receives waiting for progress.
    pub process: &'static Process,
    /// The process's clock (`process.clock`).
    pub clock: &'static clock::Clock,
    pub comms: CommTable,
    /// The user's requests the shim knows.
    pub requests: Registry,
    /// Clients with work under way.
    busy_clients: AtomicUsize,
    /// Communicators whose receives are lent to MPI for the blocking call it runs now.
    lent: Mutex<Vec<&'static Comm>>,
    clients: &'static [&'static dyn Client],
    finalized: AtomicBool,
}

static RUNTIME: OnceLock<Runtime> = OnceLock::new();

/// [`RUNTIME`]'s value once installed, for the serial plain path: a plain load.
static SERIAL_RUNTIME: AtomicPtr<Runtime> = AtomicPtr::new(std::ptr::null_mut());

thread_local! {
    static SCRATCH: RefCell<Vec<&'static Comm>> = const { RefCell::new(Vec::new()) };
}

/// The runtime, when an intercepted call should go through it: after `MPI_Init`, before
/// `MPI_Finalize`, and not from inside the shim itself (an MPI callback re-entering).
#[inline]
pub fn runtime() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    if rt.finalized.load(Ordering::Relaxed) || thread::in_call(rt.multiple).is_some() {
        return None;
    }
    Some(rt)
}

/// The runtime between `MPI_Init` and `MPI_Finalize`, whether or not the shim is inside a
/// call on this thread (the caller asks that itself).
#[inline]
pub fn started_runtime() -> Option<&'static Runtime> {
    RUNTIME
        .get()
        .filter(|rt| !rt.finalized.load(Ordering::Relaxed))
}

/// [`runtime`] for the plain path below `MPI_THREAD_MULTIPLE`: `None` at that level, while
/// a tool is probed or while anything waits for the shim's progress. One load for the gate,
/// one for the runtime.
#[inline(always)]
pub fn serial_runtime() -> Option<Serial> {
    if !thread::serial_gate_open() {
        return None;
    }
    let rt = SERIAL_RUNTIME.load(Ordering::Relaxed);
    // SAFETY: the gate opens only after the runtime was installed (which the compiler is
    // told, so that it does not test the pointer again).
    unsafe {
        std::hint::assert_unchecked(!rt.is_null());
        Some(Serial(&*rt))
    }
}

/// The runtime as a plain path's test sees it: `&Runtime` asks it everything; [`Serial`]
/// knows from the gate it passed that the level is below `MPI_THREAD_MULTIPLE` and that
/// nothing waits for the shim's progress, so those tests cost nothing there.
pub trait View: Copy {
    fn rt(self) -> &'static Runtime;
    fn multiple(self) -> bool;
    fn needs_progress(self) -> bool;

    /// The registered communicator of `handle` for a serial plain path's test, or `None` for
    /// the full path (which registers it).
    fn plain_comm(self, handle: MPI_Comm) -> Option<&'static Comm>;

    /// Whether [`View::plain_comm`] looked in the table, so that `None` says the shim has not
    /// registered the communicator (not only that it was not looked up last).
    fn looks_up(self) -> bool;

    /// A single-completion call on `handle` can go to MPI as it is: the handle is MPI's own
    /// (not even followed) and nothing waits for the shim's progress.
    #[inline(always)]
    fn plainly_completed(self, handle: MPI_Request) -> bool {
        self.rt().requests.surely_unknown(handle) && !self.needs_progress()
    }

    /// A start of `handle` can go to MPI as it is: it is MPI's own persistent request (the
    /// shim keeps every persistent receive, and starts them itself).
    #[inline(always)]
    fn plainly_started(self, handle: MPI_Request) -> bool {
        self.rt().requests.surely_unknown(handle)
    }

    /// [`View::plainly_started`] for the `count` handles at `requests`.
    ///
    /// # Safety
    /// `requests` holds `count` handles, or `count` is not positive.
    #[inline]
    unsafe fn plainly_started_all(self, count: c_int, requests: *const MPI_Request) -> bool {
        // SAFETY: as the caller promises.
        unsafe { self.rt().requests.surely_none_at(count, requests) }
    }

    /// A look at `handle` that leaves it (`MPI_Request_get_status`) can go to MPI as it is:
    /// the handle is MPI's own, or the receive MPI holds that the shim follows (counted out
    /// only when completed), and nothing waits for the shim's progress.
    #[inline(always)]
    fn plainly_inspected(self, handle: MPI_Request) -> bool {
        let requests = &self.rt().requests;
        (requests.surely_unknown(handle) || requests.is_sole_followed(handle))
            && !self.needs_progress()
    }

    /// A completion call over `count` handles at `requests` can go to MPI as it is: none of
    /// them is the shim's (nor followed) and nothing waits for the shim's progress.
    ///
    /// # Safety
    /// `requests` holds `count` handles, or `count` is not positive.
    #[inline]
    unsafe fn plainly_completed_all(self, count: c_int, requests: *const MPI_Request) -> bool {
        // SAFETY: as the caller promises.
        !self.needs_progress() && unsafe { self.rt().requests.surely_none_at(count, requests) }
    }

    /// `MPI_Waitall`'s plain test: [`View::plainly_completed_all`], where the requests the
    /// shim knows may also be receives MPI holds that the shim follows (`Request::Delegated`):
    /// MPI's own call completes them all, so they are counted out now.
    ///
    /// # Safety
    /// `requests` holds `count` handles, as `MPI_Waitall` requires.
    #[inline]
    unsafe fn plainly_waited_all(self, count: c_int, requests: *const MPI_Request) -> bool {
        if self.needs_progress() {
            return false;
        }
        if count <= 0 || requests.is_null() {
            return true;
        }
        // SAFETY: as the caller promises.
        let handles = unsafe { std::slice::from_raw_parts(requests, count as usize) };
        // SAFETY: the user's `MPI_Waitall` on them.
        unsafe { self.rt().delegated_only_in(handles) }
    }
}

impl View for &'static Runtime {
    #[inline(always)]
    fn rt(self) -> &'static Runtime {
        self
    }
    #[inline(always)]
    fn multiple(self) -> bool {
        self.multiple
    }
    #[inline(always)]
    fn needs_progress(self) -> bool {
        Runtime::needs_progress(self)
    }
    /// Out of the entry point's inline path, so a program turning over more communicators
    /// than [`thread::Recent`] holds pays a table lookup, not the full path.
    #[inline(always)]
    fn plain_comm(self, handle: MPI_Comm) -> Option<&'static Comm> {
        self.comms.registered(handle)
    }
    #[inline(always)]
    fn looks_up(self) -> bool {
        true
    }
}

/// The runtime on the serial plain path ([`serial_runtime`]).
#[derive(Clone, Copy)]
pub struct Serial(&'static Runtime);

impl View for Serial {
    #[inline(always)]
    fn rt(self) -> &'static Runtime {
        self.0
    }
    #[inline(always)]
    fn multiple(self) -> bool {
        false
    }
    #[inline(always)]
    fn needs_progress(self) -> bool {
        false
    }
    /// Only the communicators looked up last: this test is inlined into the entry points,
    /// which then call nothing before MPI.
    #[inline(always)]
    fn plain_comm(self, handle: MPI_Comm) -> Option<&'static Comm> {
        self.0.comms.last_serial(handle)
    }
    #[inline(always)]
    fn looks_up(self) -> bool {
        false
    }
}

/// Runs `body` as the shim's handling of MPI call `name`, so MPI callbacks that call `MPI_*`
/// pass through.
#[inline]
pub fn inside<R>(rt: &Runtime, name: &'static str, body: impl FnOnce() -> R) -> R {
    thread::inside(rt.multiple, name, body)
}

/// The MPI call the shim is handling on this thread.
pub fn current_call() -> &'static str {
    RUNTIME
        .get()
        .and_then(|rt| thread::in_call(rt.process.multiple))
        .unwrap_or("MPI")
}

/// Self-sends timed at `MPI_Init` for [`found_floor`]; the quickest counts.
const FLOOR_ROUNDS: usize = 16;

/// Probes at most, per round of [`found_floor`], for its message to reach MPI's queue.
const FLOOR_POLLS: usize = 10_000;

/// MPI's cost in clock ticks of a receive call that finds its message at once with nothing
/// else queued: a message sent to itself on `comm`, a private communicator of this rank alone,
/// received. A floor learned only from the program's calls never sees depth when every call
/// searches deep (a queue received in reverse). `u64::MAX` if MPI refuses.
fn found_floor(clock: &clock::Clock, comm: MPI_Comm) -> u64 {
    if comm == abi().comm_null {
        return u64::MAX;
    }
    let mut floor = u64::MAX;
    for round in 0..FLOOR_ROUNDS as i32 {
        let (sent, mut received) = (round, -1);
        // SAFETY: both buffers outlive the requests, which complete below.
        unsafe {
            let Ok(mut send) = mpi::isend(
                &sent as *const i32 as *const c_void,
                1,
                abi().int_,
                0,
                0,
                comm,
            ) else {
                break;
            };
            // The message waits in MPI before the receive is timed: one still on its way
            // would be matched later, and this round would tell nothing.
            for _ in 0..FLOOR_POLLS {
                if !matches!(mpi::iprobe(0, 0, comm), Ok(None)) {
                    break;
                }
            }
            let start = clock.ticks();
            let recv = mpi::irecv(
                &mut received as *mut i32 as *mut c_void,
                1,
                abi().int_,
                0,
                0,
                comm,
            );
            let ticks = clock.ticks() - start;
            if let Ok(mut recv) = recv {
                if mpi::request_done(recv) {
                    floor = floor.min(ticks);
                }
                mpi::wait(&mut recv);
            }
            mpi::wait(&mut send);
        }
    }
    floor
}

/// Installs the runtime after MPI's own initialisation.
pub fn install(config: Config, thread_level: c_int, clients: &'static [&'static dyn Client]) {
    let clock = clock::Clock::new();
    let empty = mpi::comm_duplicate_quietly(abi().comm_self).unwrap_or(abi().comm_null);
    let found_floor = found_floor(&clock, empty);
    let multiple = thread_level == abi().thread_multiple;
    thread::set_multiple(multiple);
    let process: &'static Process = Box::leak(Box::new(Process::new(
        &config,
        multiple,
        clock,
        (found_floor, empty),
    )));
    let _ = RUNTIME.set(Runtime {
        world_rank: mpi::comm_rank(abi().comm_world),
        tag_ub: mpi::tag_ub(),
        thread_level,
        multiple,
        engine_name: std::ffi::CString::new(config.engine.name())
            .expect("engine names have no NUL"),
        process,
        clock: &process.clock,
        comms: CommTable::new(process, comm_freed),
        requests: Registry::default(),
        busy_clients: AtomicUsize::new(0),
        lent: Mutex::new(Vec::new()),
        clients,
        finalized: AtomicBool::new(false),
        config,
    });
    if let Some(rt) = RUNTIME.get() {
        SERIAL_RUNTIME.store(rt as *const Runtime as *mut Runtime, Ordering::Relaxed);
        thread::set_serial(!rt.multiple);
    }
}

/// The installed runtime, for the calls that set it up and the entry points that looked at
/// it already.
#[inline]
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
            if let Some(comm) = rt.comms.remove(comm) {
                for client in rt.clients {
                    client.forget(rt, comm);
                }
            }
        }
    }
    abi().success
}

/// The runtime at `MPI_Finalize`, once: later calls pass through.
pub fn for_finalize() -> Option<&'static Runtime> {
    let rt = RUNTIME.get()?;
    thread::set_serial(false);
    (!rt.finalized.swap(true, Ordering::AcqRel)).then_some(rt)
}

impl Runtime {
    /// The communicator of `handle`, created on first use. `Err(Invalid)` for a handle MPI
    /// rejects.
    #[inline]
    pub fn comm(&self, handle: MPI_Comm) -> Result<&'static Comm, Error> {
        self.comms.get(handle).map_err(|_| Error::Invalid)
    }

    /// The communicator a constructor made from `parent`, given `info` (`MPI_INFO_NULL` where
    /// the constructor takes none), where the shim needs it now: under `MATCHSHIM_COLL=shim`
    /// (its private duplicate), or where its parent or that info asserts something (MPI is
    /// then asked for its info). Otherwise it asserts nothing and is registered when the shim
    /// first needs it (`None`). MPICH's `MPI_Comm_get_info` builds an object of every hint it
    /// knows, several times the cost of a whole `MPI_Comm_dup`.
    pub fn comm_made(
        &self,
        handle: MPI_Comm,
        parent: MPI_Comm,
        info: MPI_Info,
    ) -> Result<Option<&'static Comm>, Error> {
        let parent_asserts =
            !self.comms.deferred(parent) && self.comm(parent).is_ok_and(|parent| parent.asserts());
        if !parent_asserts && mpi::info_assertions(info) == Default::default() {
            self.comms.defer(handle);
            if self.config.coll != CollMode::Shim {
                return Ok(None);
            }
        }
        self.comm(handle).map(Some)
    }

    /// The user frees `handle`: receives waiting in the shim go to MPI first, which completes
    /// them after the handle is gone (see `Comm::release`). MPI refuses to free the predefined
    /// communicators, so they stay as they are.
    pub fn release_comm(&self, handle: MPI_Comm) {
        if handle == abi().comm_world || handle == abi().comm_self {
            return;
        }
        self.comms.forget_deferred(handle);
        if let Some(comm) = self.comms.known(handle) {
            comm.release();
        }
    }

    /// The user set `handle`'s info to `info`: its engine follows the assertions the
    /// communicator makes now, those `info` names as it gives them (Open MPI 4.1.4's
    /// `MPI_Comm_get_info` leaves out an `mpi_assert_no_any_tag` set so) and the others as
    /// they were.
    pub fn info_changed(&self, handle: MPI_Comm, info: MPI_Info) {
        if let Ok(comm) = self.comm(handle) {
            comm.assert(mpi::assertions_after(comm.assertions(), info));
        }
    }

    /// True when some receive or client in the process needs the shim's progress; blocking
    /// calls must then poll instead of blocking inside MPI.
    #[inline]
    pub fn needs_progress(&self) -> bool {
        self.process.pending() > 0 || self.busy_clients.load(Ordering::Acquire) > 0
    }

    /// A client's work got under way (`true`) or all of it finished (`false`).
    pub fn client_busy(&self, busy: bool) {
        if busy {
            self.busy_clients.fetch_add(1, Ordering::AcqRel);
        } else {
            self.busy_clients.fetch_sub(1, Ordering::AcqRel);
        }
        if !self.multiple {
            let busy = self.busy_clients.load(Ordering::Relaxed) > 0;
            // SAFETY: below MPI_THREAD_MULTIPLE.
            unsafe { thread::close_serial(thread::gate::BUSY, busy) };
        }
    }

    /// Before a blocking call that MPI runs as the program made it on every rank: the receives
    /// waiting in the shim go to MPI, since a peer's synchronous (or rendezvous) send may need
    /// one of them before the peer can join the call. Below `MPI_THREAD_MULTIPLE` they are
    /// lent: [`Runtime::step_back`] takes them back after the call, so that a takeover of a
    /// long posted queue outlives a barrier between posting and sending. (At that level
    /// another thread's receive may reach MPI meanwhile, younger than the lent ones.)
    /// Callers make sure no client is busy (no collective of the shim's is under way).
    pub fn step_aside(&self) {
        if self.process.pending() == 0 {
            return;
        }
        let mut list = Vec::new();
        self.process.with_pending(None, &mut list);
        let lend = !self.multiple;
        list.retain(|comm| comm.hand_back(lend));
        if !list.is_empty() {
            *self.lent.lock() = list;
        }
    }

    /// After the blocking call [`Runtime::step_aside`] went before: the receives lent to MPI
    /// that it did not match come back to the shim's queues.
    pub fn step_back(&self) {
        if self.multiple {
            return;
        }
        let lent = std::mem::take(&mut *self.lent.lock());
        for comm in lent {
            comm.take_back();
        }
    }

    /// One round of progress: `focus` first, then the clients, then every communicator with
    /// receives waiting for progress (a peer's synchronous send may be waiting for one of
    /// them to match).
    pub fn progress(&self, focus: Option<&'static Comm>) {
        if let Some(comm) = focus {
            comm.progress();
        }
        self.progress_besides(focus);
    }

    /// The clients and every communicator but `done` with receives waiting for progress.
    pub fn progress_besides(&self, done: Option<&'static Comm>) {
        if self.busy_clients.load(Ordering::Acquire) > 0 {
            for client in self.clients {
                client.progress(self);
            }
        }
        let pending = self.process.pending();
        if pending == done.map_or(0, |f| f.pending()) {
            return;
        }
        SCRATCH.with(|scratch| {
            let Ok(mut list) = scratch.try_borrow_mut() else {
                return;
            };
            list.clear();
            self.process.with_pending(done, &mut list);
            for comm in list.iter() {
                comm.progress();
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
    pub fn wait_real(&self, request: &mut MPI_Request) -> (MPI_Status, Code) {
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

    /// Whether the handles the shim knows among `handles` are all receives MPI holds (followed
    /// ones, and persistent ones MPI started or that are inactive); if so, MPI's own call
    /// completes them, and they are counted out now.
    ///
    /// # Safety
    /// Inside the user's MPI call on `handles`.
    #[inline]
    unsafe fn delegated_only_in(&self, handles: &[MPI_Request]) -> bool {
        match self.requests.first_maybe_known(handles) {
            None => true,
            // SAFETY: as the caller promises.
            Some(first) => unsafe { self.requests.count_out_completing(handles, first) },
        }
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

    /// The counters of every communicator, freed ones too.
    pub fn totals(&self) -> Totals {
        self.comms.totals()
    }

    pub fn clients(&self) -> &'static [&'static dyn Client] {
        self.clients
    }
}
