//! Which MPI call the shim is handling, per thread: an MPI callback that calls `MPI_*` from
//! inside the shim passes straight to MPI. Below `MPI_THREAD_MULTIPLE` the program makes one
//! MPI call at a time, so that state (and the other per-call state the shim keeps) needs no
//! synchronisation there, nor a thread-local lookup, which costs a call in a shared library.

use super::comm::Comm;
use crate::mpi::{HandleKey, MPI_Comm};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// A value only one thread uses at a time: below `MPI_THREAD_MULTIPLE`.
pub struct Serial<T>(UnsafeCell<T>);

// SAFETY: read and written only below MPI_THREAD_MULTIPLE, where one thread at a time is
// inside the shim (every user says so at the use).
unsafe impl<T> Sync for Serial<T> {}

impl<T: Copy> Serial<T> {
    /// # Safety
    /// Below `MPI_THREAD_MULTIPLE`: no other thread is inside the shim.
    #[inline(always)]
    pub unsafe fn get(&self) -> T {
        // SAFETY: as the caller promises, nothing writes it meanwhile.
        unsafe { *self.0.get() }
    }

    /// # Safety
    /// As for [`get`](Self::get).
    #[inline(always)]
    pub unsafe fn set(&self, value: T) {
        // SAFETY: as the caller promises, nothing else reads or writes it meanwhile.
        unsafe { *self.0.get() = value };
    }
}

impl<T> Serial<T> {
    pub const fn new(value: T) -> Serial<T> {
        Serial(UnsafeCell::new(value))
    }

    /// # Safety
    /// As for [`get`](Self::get), while the reference lives.
    #[inline(always)]
    pub unsafe fn get_ref(&self) -> &T {
        // SAFETY: as the caller promises, nothing writes it meanwhile.
        unsafe { &*self.0.get() }
    }
}

/// How many communicators [`Recent`] holds.
const RECENT: usize = 8;

/// The communicators looked up last, newest first, for the plain paths: a program that turns
/// between a few (its own and a library's duplicate, rows and columns of a grid) finds each of
/// them here, where one entry would send every call to the full path. A hit moves nothing (the
/// search is inline and calls nothing), so a handle's first entry is its newest: one freed and
/// reused is found as its new communicator.
pub struct Recent([Cell<(usize, Option<&'static Comm>)>; RECENT]);

impl Recent {
    pub const fn new() -> Recent {
        Recent([const { Cell::new((usize::MAX, None)) }; RECENT])
    }

    /// The communicator of the first entry of `handle`.
    #[inline(always)]
    pub fn find(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        let key = handle.key();
        self.0
            .iter()
            .map(Cell::get)
            .find(|&(k, _)| k == key)
            .and_then(|(_, comm)| comm)
    }

    /// `comm`, of `handle`, becomes the newest entry; the oldest leaves.
    pub fn insert(&self, handle: MPI_Comm, comm: &'static Comm) {
        for i in (1..RECENT).rev() {
            self.0[i].set(self.0[i - 1].get());
        }
        self.0[0].set((handle.key(), Some(comm)));
    }

    pub fn clear(&self) {
        for entry in &self.0 {
            entry.set((usize::MAX, None));
        }
    }
}

/// The MPI call the shim is handling, below `MPI_THREAD_MULTIPLE`.
static IN_CALL_SERIAL: Serial<Option<&'static str>> = Serial::new(None);

/// Why the plain path below `MPI_THREAD_MULTIPLE` is closed, all in one word so that the
/// path tests it with one load: 0 when open. Its count of tools probed holds at every
/// thread level (only atomic adds change it at `MPI_THREAD_MULTIPLE`).
static SERIAL_GATE: AtomicU32 = AtomicU32::new(gate::NOT_SERIAL);

/// The reasons in [`SERIAL_GATE`].
pub mod gate {
    /// The runtime is not installed below `MPI_THREAD_MULTIPLE`, or MPI was finalized.
    pub const NOT_SERIAL: u32 = 1;
    /// The shim handles a call.
    pub const IN_CALL: u32 = 2;
    /// Receives wait in the shim for progress.
    pub const PENDING: u32 = 4;
    /// A client (a collective of the shim's) has work under way.
    pub const BUSY: u32 = 8;
    /// A first call passed to a tool is under way, counted in these units.
    pub const PROBE: u32 = 16;
}

/// Sets (`closed`) or clears `reason` in the serial gate.
///
/// # Safety
/// Below `MPI_THREAD_MULTIPLE`: only the calling thread writes the gate meanwhile.
#[inline]
pub unsafe fn close_serial(reason: u32, closed: bool) {
    let others = SERIAL_GATE.load(Ordering::Relaxed) & !reason;
    let mine = if closed { reason } else { 0 };
    SERIAL_GATE.store(others | mine, Ordering::Relaxed);
}

/// The serial plain path is open: the runtime is installed below `MPI_THREAD_MULTIPLE`, not
/// finalized, not handling a call, with nothing waiting for its progress, and no tool is
/// probed.
#[inline(always)]
pub fn serial_gate_open() -> bool {
    SERIAL_GATE.load(Ordering::Relaxed) == 0
}

/// Opens (`true`) or closes the serial plain path at `MPI_Init` and `MPI_Finalize`.
pub fn set_serial(serial: bool) {
    if serial {
        SERIAL_GATE.fetch_and(!gate::NOT_SERIAL, Ordering::Relaxed);
    } else {
        SERIAL_GATE.fetch_or(gate::NOT_SERIAL, Ordering::Relaxed);
    }
}

/// A first call passed to a tool starts (`true`) or ends: the plain path stays closed
/// meanwhile, so that the shim sees whether the tool reached it.
pub fn probing(started: bool) {
    if started {
        SERIAL_GATE.fetch_add(gate::PROBE, Ordering::SeqCst);
    } else {
        SERIAL_GATE.fetch_sub(gate::PROBE, Ordering::SeqCst);
    }
}

/// A first call passed to a tool is under way, on any thread.
#[inline(always)]
pub fn tool_probed() -> bool {
    // The probe count is above every other reason's bit.
    SERIAL_GATE.load(Ordering::Relaxed) >= gate::PROBE
}

/// What a thread keeps at `MPI_THREAD_MULTIPLE`, in one thread-local: each access to one
/// costs a call in a shared library.
pub struct Local {
    /// The MPI call this thread is in, while the shim handles it.
    in_call: Cell<Option<&'static str>>,
    /// The communicators this thread looked up last: a thread cannot clear the others' when
    /// MPI frees one, so each stands only while not freed (communicators are never
    /// deallocated, and MPI may reuse a handle only after freeing its communicator).
    recent: Recent,
    /// This thread's shard of the communicators' counters (`usize::MAX` until asked).
    slot: Cell<usize>,
}

impl Local {
    #[inline]
    pub fn in_call(&self) -> Option<&'static str> {
        self.in_call.get()
    }

    /// The communicator of `handle`, if this thread looked it up lately.
    #[inline]
    pub fn last(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        // The first entry of a handle is its newest (see `Recent`).
        self.recent.find(handle).filter(|c| !c.is_freed())
    }

    pub fn set_last(&self, handle: MPI_Comm, comm: &'static Comm) {
        self.recent.insert(handle, comm);
    }

    /// This thread's [`thread_slot`](matchshim_core::protocol::policy::thread_slot).
    #[inline]
    pub fn slot(&self) -> usize {
        match self.slot.get() {
            usize::MAX => {
                let slot = matchshim_core::protocol::policy::thread_slot();
                self.slot.set(slot);
                slot
            }
            slot => slot,
        }
    }
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            in_call: Cell::new(None),
            recent: Recent::new(),
            slot: Cell::new(usize::MAX),
        }
    };
}

/// Runs `body` with this thread's [`Local`] (at `MPI_THREAD_MULTIPLE`), out of line so that
/// callers on every path pay nothing for the thread-local.
#[inline(never)]
pub fn with_local<R>(body: impl FnOnce(&Local) -> R) -> R {
    LOCAL.with(body)
}

/// [`with_local`] inlined, for a function that runs at `MPI_THREAD_MULTIPLE` only: the
/// thread-local's call and `body` then need no frame between them.
#[inline(always)]
pub fn with_local_inlined<R>(body: impl FnOnce(&Local) -> R) -> R {
    let local: *const Local = LOCAL.with(std::ptr::from_ref);
    // SAFETY: `Local` needs no destructor, so it lives as long as this thread, which runs
    // `body`.
    body(unsafe { &*local })
}

/// The MPI call the shim is handling on this thread, if any.
#[inline]
pub fn in_call(multiple: bool) -> Option<&'static str> {
    if multiple {
        in_call_threaded()
    } else {
        // SAFETY: below MPI_THREAD_MULTIPLE, one thread at a time.
        unsafe { IN_CALL_SERIAL.get() }
    }
}

/// [`in_call`] below `MPI_THREAD_MULTIPLE`: a plain load.
///
/// # Safety
/// Below `MPI_THREAD_MULTIPLE` only.
#[inline(always)]
pub unsafe fn in_call_serial() -> Option<&'static str> {
    // SAFETY: as the caller promises.
    unsafe { IN_CALL_SERIAL.get() }
}

// Thread-local access out of line: in a shared library it costs a call (`__tls_get_addr`),
// which the compiler would otherwise make on the serial path too.
#[inline(never)]
fn in_call_threaded() -> Option<&'static str> {
    LOCAL.with(|l| l.in_call.get())
}

#[inline(never)]
fn set_in_call_threaded(call: Option<&'static str>) {
    LOCAL.with(|l| l.in_call.set(call));
}

#[inline]
fn set_in_call(multiple: bool, call: Option<&'static str>) {
    if multiple {
        set_in_call_threaded(call);
    } else {
        // SAFETY: below MPI_THREAD_MULTIPLE, one thread at a time.
        unsafe {
            IN_CALL_SERIAL.set(call);
            close_serial(gate::IN_CALL, call.is_some());
        }
    }
}

/// The thread level is `MPI_THREAD_MULTIPLE` (set once, at `MPI_Init`).
static MULTIPLE: AtomicBool = AtomicBool::new(false);

pub fn set_multiple(multiple: bool) {
    MULTIPLE.store(multiple, Ordering::Relaxed);
}

/// This thread is inside the shim's handling of some MPI call (an MPI callback re-entered).
pub fn in_shim() -> bool {
    in_call(MULTIPLE.load(Ordering::Relaxed)).is_some()
}

/// Runs `body` as the shim's handling of MPI call `name`.
#[inline]
pub fn inside<R>(multiple: bool, name: &'static str, body: impl FnOnce() -> R) -> R {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            set_in_call(self.0, None);
        }
    }
    set_in_call(multiple, Some(name));
    let _reset = Reset(multiple);
    body()
}
