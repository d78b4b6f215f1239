//! The requests the shim completes for the user, behind one generalized-request bridge.
//!
//! An [`Operation`] (a receive waiting in the shim's queues, a send-receive pair, a collective)
//! stands behind a generalized request (`MPI_Grequest_start`): a real MPI handle, safe in any MPI
//! call, whose status the one `query` callback reads from the operation's [`Completion`]. A
//! persistent receive keeps a real persistent request that MPI knows, started by MPI while the
//! communicator is delegated and standing for the shim's receive while it is taken over.
//!
//! The registry maps user handles to what stands behind them: shim operations, persistent
//! receives, and the receives MPI matches for a delegated communicator (only counted, so the
//! takeover policy knows how many MPI holds).

use super::comm::{Comm, Recv};
use super::completion::Completion;
use super::receive::Buffer;
use crate::mpi::{self, abi, Code, HandleKey, MPI_Request, MPI_Status};
use matchshim_core::protocol::{policy::FOLLOW_EVERY, Policy};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Arc;

/// Something the shim completes for the user.
pub trait Operation: Send + Sync {
    fn completion(&self) -> &Completion;
    /// The communicator whose progress completes it: waits look there first.
    fn focus(&self) -> &'static Comm;
    /// Moves on what progress does not (a send half to test); true once complete.
    fn poll(&self) -> bool {
        self.completion().is_done()
    }
    /// `MPI_Cancel`; collectives and sends cannot be cancelled, receives that have not matched
    /// can.
    fn cancel(&self) {}
    /// The status a query gets before the operation completed (MPI asks only after).
    fn pending_status(&self) -> MPI_Status {
        mpi::empty_status(abi().any_source)
    }
}

/// Starts the generalized request that represents `op` to the user. The callbacks are made
/// for `T`, so MPI's one word of state is the `Arc` itself (no box around a wide pointer).
pub fn start_grequest<T: Operation + 'static>(op: &Arc<T>) -> Result<MPI_Request, Code> {
    let state = Arc::into_raw(op.clone()) as *mut c_void;
    // SAFETY: the callbacks below interpret `state` as the `Arc<T>` leaked here; `free_fn`
    // reclaims it.
    match unsafe { mpi::grequest_start(query_fn::<T>, free_fn::<T>, cancel_fn::<T>, state) } {
        Ok(request) => {
            // Finished before the request existed (a receive from MPI_PROC_NULL): completed now.
            op.completion().attach(request);
            Ok(request)
        }
        Err(err) => {
            // SAFETY: MPI did not take the state.
            unsafe { drop(Arc::from_raw(state as *const T)) };
            Err(err)
        }
    }
}

/// The operation behind a generalized request's state.
///
/// # Safety
/// `state` is the `Arc<T>` that [`start_grequest`] gave MPI, not yet freed.
unsafe fn op_of<'a, T>(state: *mut c_void) -> &'a T {
    // SAFETY: as the caller promises.
    unsafe { &*(state as *const T) }
}

unsafe extern "C" fn query_fn<T: Operation>(state: *mut c_void, status: *mut MPI_Status) -> c_int {
    // SAFETY: MPI passes the state it was given, alive until `free_fn`.
    let op = unsafe { op_of::<T>(state) };
    let filled = match op.completion().outcome() {
        Some(outcome) => {
            let mut status = outcome.status;
            status.MPI_ERROR = outcome.err;
            status
        }
        None => op.pending_status(),
    };
    // SAFETY: MPI passes a status to fill.
    unsafe { *status = filled };
    abi().success
}

unsafe extern "C" fn free_fn<T>(state: *mut c_void) -> c_int {
    // SAFETY: MPI frees the request once: the `Arc` leaked in `start_grequest` goes.
    drop(unsafe { Arc::from_raw(state as *const T) });
    abi().success
}

/// MPI calls this only when a program cancels through `PMPI_Cancel` directly; `MPI_Cancel` is
/// intercepted and cancels through the runtime.
unsafe extern "C" fn cancel_fn<T: Operation>(state: *mut c_void, complete: c_int) -> c_int {
    if complete == 0 && !super::thread::in_shim() {
        // SAFETY: as for `query_fn`.
        unsafe { op_of::<T>(state) }.cancel();
    }
    abi().success
}

/// A persistent receive. The user's handle is a real persistent request with the user's
/// arguments: MPI starts it while the communicator is delegated, and it keeps the
/// communicator and datatype alive in MPI; while the shim matches for the communicator, each
/// start is a receive of the shim's instead.
pub struct Persistent {
    pub buffer: Buffer,
    pub source: c_int,
    pub tag: c_int,
    pub comm: &'static Comm,
    /// The shim's receive of the current start, while the shim runs it.
    current: Mutex<Option<Arc<Recv>>>,
    /// Whether `current` holds a receive: read without its lock by the plain paths.
    shim_runs: AtomicBool,
    /// MPI runs the current start (the communicator was delegated).
    pub in_mpi: AtomicBool,
}

impl Persistent {
    pub fn new(buffer: Buffer, source: c_int, tag: c_int, comm: &'static Comm) -> Persistent {
        Persistent {
            buffer,
            source,
            tag,
            comm,
            current: Mutex::new(None),
            shim_runs: AtomicBool::new(false),
            in_mpi: AtomicBool::new(false),
        }
    }

    /// The shim's receive of the current start, if the shim runs it.
    pub fn shim_op(&self) -> Option<Arc<Recv>> {
        self.current.lock().clone()
    }

    /// The shim runs the current start as `recv`.
    pub fn run_in_shim(&self, recv: Arc<Recv>) {
        let mut current = self.current.lock();
        *current = Some(recv);
        self.shim_runs.store(true, Release);
    }

    /// The start the shim ran is over (completed, or the request freed).
    pub fn end_shim_run(&self) {
        let mut current = self.current.lock();
        *current = None;
        self.shim_runs.store(false, Release);
    }

    #[inline]
    pub fn shim_runs(&self) -> bool {
        self.shim_runs.load(Acquire)
    }

    /// Started and not yet completed, by MPI or by the shim.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.in_mpi.load(Acquire) || self.shim_runs()
    }

    /// MPI finished (or the user freed) the start it ran: the policy counts it out.
    #[inline]
    pub fn done_in_mpi(&self) {
        let process = self.comm.process;
        if self.in_mpi.swap(false, AcqRel) && process.policy == Policy::Auto {
            self.comm.takeover.completed_in_mpi(1);
        }
    }

    /// MPI runs the start just made: counted as a receive MPI holds (once, should an
    /// erroneous call start it twice).
    #[inline]
    pub fn started_in_mpi(&self) {
        if !self.in_mpi.swap(true, AcqRel) {
            let weight = (self.comm.process.policy == Policy::Auto) as usize;
            self.comm.takeover.posted_to_mpi(weight);
        }
    }
}

/// What stands behind a user's request handle the shim knows.
#[derive(Clone)]
pub enum Request {
    /// A generalized request the shim completes.
    Op(Arc<dyn Operation>),
    /// The user's persistent receive.
    Persistent(Arc<Persistent>),
    /// A receive MPI matches for a delegated communicator: MPI completes it; the shim counts it.
    Delegated(&'static Comm),
}

impl Request {
    /// The communicator to look at first when waiting for it.
    pub fn focus(&self) -> &'static Comm {
        match self {
            Request::Op(op) => op.focus(),
            Request::Persistent(p) => p.comm,
            Request::Delegated(comm) => comm,
        }
    }

    /// The shim's own operation behind the handle, if the shim completes it now; `None` where
    /// MPI does (a delegated receive, a persistent receive MPI started, an inactive one).
    pub fn shim_op(&self) -> Option<Arc<dyn Operation>> {
        match self {
            Request::Op(op) => Some(op.clone()),
            Request::Persistent(p) => p.shim_op().map(|op| op as Arc<dyn Operation>),
            Request::Delegated(_) => None,
        }
    }

    /// MPI's own completion call completes it as MPI would without the shim: a followed
    /// receive, or a persistent receive whose start MPI runs or that is inactive (MPI's
    /// request is then inactive too, and MPI gives the empty status).
    pub fn completes_in_mpi(&self) -> bool {
        match self {
            Request::Delegated(_) => true,
            Request::Persistent(p) => !p.shim_runs(),
            Request::Op(_) => false,
        }
    }

    /// Whether `other` is this registration, not a later one under a handle MPI reused.
    /// Delegated receives of one communicator are alike: telling them apart only moves
    /// takeover counts.
    fn is(&self, other: &Request) -> bool {
        match (self, other) {
            (Request::Op(a), Request::Op(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
            (Request::Persistent(a), Request::Persistent(b)) => Arc::ptr_eq(a, b),
            (Request::Delegated(a), Request::Delegated(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }

    /// MPI completed (or the user freed) the request: what the shim counted for it goes.
    pub fn completed_in_mpi(&self) {
        match self {
            Request::Delegated(comm) => comm.takeover.completed_in_mpi(FOLLOW_EVERY),
            Request::Persistent(p) => p.done_in_mpi(),
            Request::Op(_) => {}
        }
    }
}

/// Known requests among a completion call's handles, with their positions: a followed
/// receive or two, mostly, kept without an allocation.
pub type Known = SmallVec<[(usize, Request); 4]>;

/// The user handles the shim knows, with what stands behind each.
///
/// Completion calls ask about every handle they get, most of them MPI's own; a one-word filter
/// of the registered handles' hashes answers most of those questions without the table's lock.
/// A bit stays set after its handle goes until the table runs empty or the filter is rebuilt
/// (after as many removals as entries, at least a few), so the filter may say "maybe" for an unknown handle but never "no"
/// for a known one.
pub struct Registry {
    table: Mutex<Table>,
    filter: AtomicU64,
    /// The one handle registered while exactly one is (a followed receive, mostly), else
    /// [`NO_SOLE`]: an array is then searched for it by comparison alone.
    sole: AtomicUsize,
    /// `sole` while it is a followed receive ([`Request::Delegated`]), else [`NO_SOLE`]: a
    /// completion call whose only known handle it is goes to MPI without the table.
    sole_followed: AtomicUsize,
    /// The first persistent receives registered, for the plain paths that start and complete
    /// them without the table's lock.
    persistent: [PersistentSlot; PERSISTENT_SLOTS],
}

const NO_SOLE: usize = usize::MAX;

/// Persistent receives found without the table: a halo's few neighbours.
const PERSISTENT_SLOTS: usize = 8;

/// A persistent receive's key ([`NO_SOLE`] when free) and the receive, which the table's
/// entry keeps alive until the slot is cleared.
struct PersistentSlot {
    key: AtomicUsize,
    receive: AtomicPtr<Persistent>,
}

#[derive(Default)]
struct Table {
    requests: FxHashMap<usize, Request>,
    removals: u32,
}

impl Table {
    /// The known handles among `handles` (which start at position `offset` of the caller's
    /// array) that pass `maybe`, with their positions.
    fn known(
        &self,
        handles: &[MPI_Request],
        offset: usize,
        maybe: impl Fn(usize) -> bool,
    ) -> Known {
        let mut known = Known::new();
        for (i, handle) in handles.iter().enumerate() {
            let key = handle.key();
            if maybe(key) {
                if let Some(request) = self.requests.get(&key) {
                    known.push((offset + i, request.clone()));
                    if known.len() == self.requests.len() {
                        break;
                    }
                }
            }
        }
        known
    }

    /// The keys of the requests among `handles` (those `maybe` lets pass looked up), if each
    /// completes in MPI's own call ([`Request::completes_in_mpi`]).
    fn completing_in_mpi(
        &self,
        handles: &[MPI_Request],
        maybe: impl Fn(usize) -> bool,
    ) -> Option<SmallVec<[usize; 4]>> {
        let mut known = SmallVec::new();
        for handle in handles {
            let key = handle.key();
            if maybe(key) {
                match self.requests.get(&key) {
                    Some(request) if !request.completes_in_mpi() => return None,
                    Some(_) => known.push(key),
                    None => {}
                }
            }
        }
        Some(known)
    }
}

/// A filter of 4096 bits over some keys: a few dozen keys set a few dozen of them.
struct WideFilter([u64; 64]);

impl WideFilter {
    /// The filter of `table`'s keys for a pass over `handles` handles, where the table holds
    /// more than one key and no more than the handles: the one-word filter says "maybe" for
    /// most handles once it holds some dozens of keys (one followed receive in 64 of a long
    /// array), and each "maybe" costs a hash lookup. Callers write a pass for each filter: one
    /// pass that asked which filter for every handle took 5 more instructions a handle.
    fn for_table(table: &Table, handles: usize) -> Option<WideFilter> {
        let keys = table.requests.len();
        (keys > 1 && keys <= handles).then(|| WideFilter::of(table.requests.keys()))
    }

    fn of<'a>(keys: impl Iterator<Item = &'a usize>) -> WideFilter {
        let mut bits = [0u64; 64];
        for &key in keys {
            let bit = Self::bit(key);
            bits[bit / 64] |= 1 << (bit % 64);
        }
        WideFilter(bits)
    }

    #[inline]
    fn bit(key: usize) -> usize {
        ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52) as usize
    }

    #[inline]
    fn maybe(&self, key: usize) -> bool {
        let bit = Self::bit(key);
        self.0[bit / 64] & (1 << (bit % 64)) != 0
    }
}

/// Removals between rebuilds of the filter, at least.
const REBUILD_EVERY: u32 = 16;

fn filter_bit(key: usize) -> u64 {
    1 << ((key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58)
}

/// Where the handle of `key` is among `handles`: blocks are compared whole, which the
/// compiler vectorises, before the one that holds it is searched.
#[inline]
fn position_of(handles: &[MPI_Request], key: usize) -> Option<usize> {
    const BLOCK: usize = 16;
    // A poll's few handles are compared one by one, without the blocks' set-up.
    if handles.len() <= 8 {
        return handles.iter().position(|h| h.key() == key);
    }
    handles.chunks(BLOCK).enumerate().find_map(|(b, block)| {
        let here = block.iter().fold(false, |hit, h| hit | (h.key() == key));
        here.then(|| block.iter().position(|h| h.key() == key))
            .flatten()
            .map(|i| b * BLOCK + i)
    })
}

impl Default for Registry {
    fn default() -> Registry {
        Registry {
            table: Mutex::new(Table::default()),
            filter: AtomicU64::new(0),
            sole: AtomicUsize::new(NO_SOLE),
            sole_followed: AtomicUsize::new(NO_SOLE),
            persistent: std::array::from_fn(|_| PersistentSlot {
                key: AtomicUsize::new(NO_SOLE),
                receive: AtomicPtr::new(std::ptr::null_mut()),
            }),
        }
    }
}

impl Registry {
    /// The persistent receive of `handle`, if it is one of those indexed, found without the
    /// table's lock.
    ///
    /// # Safety
    /// Within the user's MPI call on `handle`, which nothing frees while the reference is used:
    /// below `MPI_THREAD_MULTIPLE` no other thread calls MPI, and at it MPI forbids using a
    /// request in two calls at once (only `MPI_Request_free` of the handle clears its slot).
    #[inline(always)]
    pub unsafe fn persistent_indexed(&self, handle: MPI_Request) -> Option<&Persistent> {
        let slot = self.slot_of(handle.key())?;
        // SAFETY: the slot's key was set after its pointer and is cleared before the table
        // lets the receive go; as the caller promises, that does not happen meanwhile.
        unsafe { slot.receive.load(Acquire).as_ref() }
    }

    /// [`Registry::persistent_indexed`] behind the filter, for a handle that may be MPI's own:
    /// an unknown one would be looked for in every slot.
    ///
    /// # Safety
    /// As for [`Registry::persistent_indexed`].
    #[inline(always)]
    pub unsafe fn persistent_if_known(&self, handle: MPI_Request) -> Option<&Persistent> {
        if self.surely_unknown(handle) {
            return None;
        }
        // SAFETY: as the caller promises.
        unsafe { self.persistent_indexed(handle) }
    }

    /// For each handle among `handles` that the filter lets pass, in order, its persistent
    /// receive from the index (`None`: not there, where the table may know it), read without
    /// the table's lock.
    ///
    /// # Safety
    /// As for [`Registry::persistent_indexed`], for every handle.
    #[inline(always)]
    pub unsafe fn indexed_among<'a>(
        &'a self,
        handles: &'a [MPI_Request],
    ) -> impl Iterator<Item = Option<&'a Persistent>> + 'a {
        let filter = self.filter.load(Acquire);
        handles
            .iter()
            .filter(move |handle| filter & filter_bit(handle.key()) != 0)
            // SAFETY: as the caller promises.
            .map(|&handle| unsafe { self.persistent_indexed(handle) })
    }

    /// The persistent receive of `handle`, from the index, else from the table.
    ///
    /// # Safety
    /// As for [`Registry::persistent_indexed`].
    #[inline]
    pub unsafe fn persistent(&self, handle: MPI_Request) -> Option<&Persistent> {
        // SAFETY: as the caller promises.
        if let Some(p) = unsafe { self.persistent_indexed(handle) } {
            return Some(p);
        }
        let key = handle.key();
        if !self.maybe_known(key) {
            return None;
        }
        let receive = match self.table.lock().requests.get(&key) {
            Some(Request::Persistent(p)) => Arc::as_ptr(p),
            _ => return None,
        };
        // SAFETY: the table's entry keeps the receive until its request is freed, which, as
        // the caller promises, does not happen meanwhile.
        Some(unsafe { &*receive })
    }

    /// Sets `sole` and `sole_followed` from the table, under its lock.
    fn refresh_sole(&self, table: &Table) {
        let (sole, followed) = match table.requests.iter().next() {
            Some((&key, request)) if table.requests.len() == 1 => {
                let followed = matches!(request, Request::Delegated(_));
                (key, if followed { key } else { NO_SOLE })
            }
            _ => (NO_SOLE, NO_SOLE),
        };
        self.sole.store(sole, Release);
        self.sole_followed.store(followed, Release);
    }

    /// Whether `handle` is the only handle the shim knows and a receive MPI holds that it
    /// follows.
    #[inline]
    pub fn is_sole_followed(&self, handle: MPI_Request) -> bool {
        self.sole_followed.load(Acquire) == handle.key()
    }

    /// Where the only handle the shim knows is among `handles`, if that one is a receive MPI
    /// holds that the shim follows: every other handle there is MPI's own, so MPI's call
    /// completes them all, and [`Registry::settle_followed`] counts it out once completed.
    #[inline]
    pub fn sole_followed_in(&self, handles: &[MPI_Request]) -> Option<usize> {
        let key = self.sole_followed.load(Acquire);
        if key == NO_SOLE {
            return None;
        }
        position_of(handles, key)
    }

    /// MPI completed `handle`, a receive the shim followed: it is counted out.
    pub fn settle_followed(&self, handle: MPI_Request) {
        let key = handle.key();
        let mut table = self.table.lock();
        if matches!(table.requests.get(&key), Some(Request::Delegated(_))) {
            if let Some(request) = self.remove_locked(&mut table, key) {
                drop(table);
                request.completed_in_mpi();
            }
        }
    }

    pub fn insert(&self, handle: MPI_Request, request: Request) {
        let key = handle.key();
        let mut table = self.table.lock();
        // A handle MPI reused replaces its old entry, and the old entry's slot goes with it.
        self.unindex(key);
        if let Request::Persistent(p) = &request {
            if let Some(slot) = self.slot_of(NO_SOLE) {
                slot.receive.store(Arc::as_ptr(p).cast_mut(), Release);
                slot.key.store(key, Release);
            }
        }
        let replaced = table.requests.insert(key, request);
        self.refresh_sole(&table);
        self.filter.fetch_or(filter_bit(key), Release);
        drop(table);
        // MPI gives out only a freed handle, so the old request is over: what the shim counted
        // for it goes (at MPI_THREAD_MULTIPLE another thread's completion may not have
        // removed it yet, or may remove this one instead; the counts then stay whole).
        if let Some(old) = replaced {
            old.completed_in_mpi();
        }
    }

    #[inline]
    fn maybe_known(&self, key: usize) -> bool {
        self.filter.load(Acquire) & filter_bit(key) != 0
    }

    /// True when `handle` is surely not one the shim knows.
    #[inline]
    pub fn surely_unknown(&self, handle: MPI_Request) -> bool {
        !self.maybe_known(handle.key())
    }

    /// True when no handle among the `count` at `requests` is one the shim knows (or `count`
    /// is not positive), against one reading of the filter (a handle is registered before its
    /// caller can pass it on); while the shim knows none, the array is not read.
    ///
    /// # Safety
    /// `requests` holds `count` handles, or `count` is not positive.
    #[inline]
    pub unsafe fn surely_none_at(&self, count: c_int, requests: *const MPI_Request) -> bool {
        let filter = self.filter.load(Acquire);
        if filter == 0 || count <= 0 || requests.is_null() {
            return true;
        }
        // SAFETY: as the caller promises.
        unsafe { std::slice::from_raw_parts(requests, count as usize) }
            .iter()
            .all(|h| filter & filter_bit(h.key()) == 0)
    }

    #[inline]
    pub fn get(&self, handle: MPI_Request) -> Option<Request> {
        let key = handle.key();
        if !self.maybe_known(key) || handle == abi().request_null {
            return None;
        }
        self.table.lock().requests.get(&key).cloned()
    }

    /// The position of the first handle among `handles` that the shim may know: completion
    /// arrays are mostly MPI's own handles, and one pass without the lock or a hash lookup
    /// finds it, if any.
    #[inline]
    pub fn first_maybe_known(&self, handles: &[MPI_Request]) -> Option<usize> {
        let filter = self.filter.load(Acquire);
        if filter == 0 {
            return None;
        }
        let sole = self.sole.load(Acquire);
        if sole == NO_SOLE {
            handles
                .iter()
                .position(|handle| filter & filter_bit(handle.key()) != 0)
        } else {
            position_of(handles, sole)
        }
    }

    /// The known handles among `handles`, with their positions.
    pub fn known_in(&self, handles: &[MPI_Request]) -> Known {
        match self.first_maybe_known(handles) {
            Some(first) => self.known_from(handles, first),
            None => Known::new(),
        }
    }

    /// The known handles among `handles` from position `first` on, with their positions.
    pub fn known_from(&self, handles: &[MPI_Request], first: usize) -> Known {
        let table = self.table.lock();
        let handles = &handles[first.min(handles.len())..];
        match WideFilter::for_table(&table, handles.len()) {
            Some(wide) => table.known(handles, first, |key| wide.maybe(key)),
            None => {
                // Under the lock the filter holds every key in the table.
                let filter = self.filter.load(Acquire);
                table.known(handles, first, |key| filter & filter_bit(key) != 0)
            }
        }
    }

    /// For a call of MPI's that completes every handle (`MPI_Waitall`): whether each one the
    /// shim knows among `handles` from position `first` on completes in MPI's own call
    /// ([`Request::completes_in_mpi`]); if so they are counted out now, without copies: from
    /// the index where it holds them all, else under the table's lock (the followed receives
    /// leave the table, MPI frees their handles).
    ///
    /// # Safety
    /// Inside the user's MPI call on `handles` (see [`Registry::persistent_indexed`]).
    #[inline(never)]
    pub unsafe fn count_out_completing(&self, handles: &[MPI_Request], first: usize) -> bool {
        // SAFETY: as the caller promises.
        if let Some(done) = unsafe { self.count_out_indexed(handles, first) } {
            return done;
        }
        self.count_out_in_table(handles, first)
    }

    /// [`Registry::count_out_completing`] from the table, under its lock: apart, so that the
    /// index's path saves no registers for it.
    #[inline(never)]
    fn count_out_in_table(&self, handles: &[MPI_Request], first: usize) -> bool {
        let mut table = self.table.lock();
        let handles = &handles[first.min(handles.len())..];
        let known = match WideFilter::for_table(&table, handles.len()) {
            Some(wide) => table.completing_in_mpi(handles, |key| wide.maybe(key)),
            None => {
                // Under the lock the filter holds every key in the table.
                let filter = self.filter.load(Acquire);
                table.completing_in_mpi(handles, |key| filter & filter_bit(key) != 0)
            }
        };
        let Some(known) = known else {
            return false;
        };
        for key in known {
            match table.requests.get(&key) {
                Some(Request::Delegated(_)) => {
                    if let Some(request) = self.remove_locked(&mut table, key) {
                        request.completed_in_mpi();
                    }
                }
                Some(request) => request.completed_in_mpi(),
                None => {}
            }
        }
        true
    }

    /// The persistent receives' slot holding `key` ([`NO_SOLE`]: a free one).
    #[inline(always)]
    fn slot_of(&self, key: usize) -> Option<&PersistentSlot> {
        self.persistent.iter().find(|s| s.key.load(Acquire) == key)
    }

    /// Clears the persistent receive's slot of `key`, if any (under the table's lock).
    fn unindex(&self, key: usize) {
        if let Some(slot) = self.slot_of(key) {
            slot.key.store(NO_SOLE, Release);
            slot.receive.store(std::ptr::null_mut(), Release);
        }
    }

    /// [`Registry::count_out_completing`] where every handle among `handles` from `first` on
    /// that the filter lets pass is an indexed persistent receive: read without the table's
    /// lock. `None` where one is not (the table answers then).
    ///
    /// # Safety
    /// As for [`Registry::persistent_indexed`].
    unsafe fn count_out_indexed(&self, handles: &[MPI_Request], first: usize) -> Option<bool> {
        let mut found: [Option<&Persistent>; PERSISTENT_SLOTS] = [None; PERSISTENT_SLOTS];
        let mut n = 0;
        // SAFETY: as the caller promises.
        for p in unsafe { self.indexed_among(&handles[first.min(handles.len())..]) } {
            let p = p?;
            if p.shim_runs() {
                return Some(false);
            }
            // More than the index holds: a handle given twice, which the table sorts out.
            *found.get_mut(n)? = Some(p);
            n += 1;
        }
        found[..n].iter().flatten().for_each(|p| p.done_in_mpi());
        Some(true)
    }

    /// Whether every handle among `handles` from `first` on that the filter lets pass is an
    /// indexed persistent receive whose start MPI runs (or an inactive one): MPI's own
    /// completion call then completes them as it would without the shim. `None` where one is
    /// not in the index (the table may know it), read without the table's lock.
    ///
    /// # Safety
    /// As for [`Registry::persistent_indexed`].
    #[inline]
    pub unsafe fn persistent_in_mpi_indexed(
        &self,
        handles: &[MPI_Request],
        first: usize,
    ) -> Option<bool> {
        let mut in_mpi = true;
        // SAFETY: as the caller promises.
        for p in unsafe { self.indexed_among(&handles[first.min(handles.len())..]) } {
            in_mpi &= !p?.shim_runs();
        }
        Some(in_mpi)
    }

    pub fn remove(&self, handle: MPI_Request) {
        let mut table = self.table.lock();
        self.remove_locked(&mut table, handle.key());
    }

    /// Removes `handle`'s entry if it is still `known`, after an MPI call that completed and
    /// freed the handle: at `MPI_THREAD_MULTIPLE` another thread may have been given the
    /// same handle by MPI, and registered it, since ([`Registry::insert`] then counted
    /// `known` out). Whether it removed it.
    pub fn remove_if_still(&self, handle: MPI_Request, known: &Request) -> bool {
        let key = handle.key();
        let mut table = self.table.lock();
        let still = table.requests.get(&key).is_some_and(|r| r.is(known));
        if still {
            self.remove_locked(&mut table, key);
        }
        still
    }

    fn remove_locked(&self, table: &mut Table, key: usize) -> Option<Request> {
        let request = table.requests.remove(&key)?;
        self.unindex(key);
        table.removals += 1;
        self.refresh_sole(table);
        // A rebuild reads the whole table: as many removals as entries pay for it.
        let due = REBUILD_EVERY.max(table.requests.len().min(u32::MAX as usize) as u32);
        if table.requests.is_empty() || table.removals >= due {
            table.removals = 0;
            let filter = table.requests.keys().fold(0, |f, &k| f | filter_bit(k));
            self.filter.store(filter, Release);
        }
        Some(request)
    }
}
