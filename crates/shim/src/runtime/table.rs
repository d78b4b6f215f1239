//! The communicators the shim knows, by MPI handle, and the counters of those already freed.

use super::comm::{Comm, Process, Tally};
use super::thread::{self, Recent, Serial};
use crate::matching::{Assertions, EngineStats};
use crate::mpi::{self, abi, HandleKey, MPI_Comm};
use crate::report::{Bursts, CommReport};
use parking_lot::{Mutex, RwLock};
use rustc_hash::{FxHashMap, FxHashSet};
use std::os::raw::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters summed over communicators.
#[derive(Clone, Default)]
pub struct Totals {
    pub stats: EngineStats,
    pub match_ticks: [u64; 2],
    pub communicators: u64,
    pub posted_left: u64,
    pub unexpected_left: u64,
    pub comms: Vec<CommReport>,
    pub bursts: Bursts,
}

impl Totals {
    fn add(&mut self, comm: &Comm, tally: &Tally, now_ns: u64) {
        let Tally {
            stats,
            match_ticks,
            left: (posted, unexpected),
            assertions,
            bursts,
        } = tally;
        self.stats.merge(stats);
        self.match_ticks[0] += match_ticks[0];
        self.match_ticks[1] += match_ticks[1];
        self.communicators += 1;
        self.bursts.add(bursts);
        self.posted_left += *posted as u64;
        self.unexpected_left += *unexpected as u64;
        let [delegated_time_ns, takeover_time_ns, held_time_ns] = comm.takeover.time_in(now_ns);
        let report = CommReport {
            id: comm.id,
            size: comm.size.max(0) as usize,
            switches: comm.takeover.switches(),
            delegated_time_ns,
            delegated_receives: comm.takeover.delegated_receives(),
            takeover_time_ns,
            held_time_ns,
            unconfirmed_takeovers: comm.takeover.unconfirmed(),
            takeover_matches: stats.point_to_point.matches + stats.collective.matches,
            assertions: assertions.keys(),
        };
        if report.delegated_receives + report.takeover_matches > 0 {
            self.comms.push(report);
        }
    }
}

/// Why a handle has no communicator: MPI rejects it.
pub struct Rejected;

pub struct CommTable {
    comms: RwLock<FxHashMap<usize, &'static Comm>>,
    /// The communicators looked up last (below `MPI_THREAD_MULTIPLE`).
    recent: Serial<Recent>,
    /// Communicators constructors made that assert nothing, not registered yet.
    deferred: Mutex<FxHashSet<usize>>,
    next_id: AtomicU64,
    /// Counters of communicators already freed.
    retired: Mutex<Totals>,
    /// Communicators freed while their lock was held ([`Comm::try_retire`]), with when: their
    /// counters are read for the report.
    retiring: Mutex<Vec<(&'static Comm, u64)>>,
    /// Attribute key whose delete callback says a communicator is gone.
    keyval: c_int,
    /// `process.multiple`, read on every lookup.
    multiple: bool,
    process: &'static Process,
}

impl CommTable {
    /// `on_free` is called with a communicator's handle when MPI frees it.
    pub fn new(
        process: &'static Process,
        on_free: unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int,
    ) -> CommTable {
        CommTable {
            comms: RwLock::new(FxHashMap::default()),
            recent: Serial::new(Recent::new()),
            deferred: Mutex::new(FxHashSet::default()),
            next_id: AtomicU64::new(0),
            retired: Mutex::new(Totals::default()),
            retiring: Mutex::new(Vec::new()),
            keyval: mpi::comm_keyval(on_free),
            multiple: process.multiple,
            process,
        }
    }

    /// The communicator of `handle`, if looked up lately (by this thread at
    /// `MPI_THREAD_MULTIPLE`).
    #[inline]
    pub fn last(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        if self.multiple {
            return thread::with_local(|local| local.last(handle));
        }
        self.last_serial(handle)
    }

    /// [`CommTable::last`] below `MPI_THREAD_MULTIPLE`, which the caller knows.
    #[inline(always)]
    pub fn last_serial(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        debug_assert!(!self.multiple);
        // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
        unsafe { self.recent.get_ref() }.find(handle)
    }

    /// The communicator of `handle`, created on first use.
    #[inline]
    pub fn get(&self, handle: MPI_Comm) -> Result<&'static Comm, Rejected> {
        match self.last(handle) {
            Some(comm) => Ok(comm),
            None => self.get_from_map(handle),
        }
    }

    #[inline(never)]
    fn get_from_map(&self, handle: MPI_Comm) -> Result<&'static Comm, Rejected> {
        let comm = match self.known(handle) {
            Some(comm) => comm,
            None => self.add(handle)?,
        };
        self.remember(handle, comm);
        Ok(comm)
    }

    /// `comm`, of `handle`, is the communicator looked up last.
    fn remember(&self, handle: MPI_Comm, comm: &'static Comm) {
        if self.multiple {
            thread::with_local(|local| local.set_last(handle, comm));
        } else {
            // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
            unsafe { self.recent.get_ref() }.insert(handle, comm);
        }
    }

    /// A constructor made `handle`, which asserts nothing: it is registered when the shim first
    /// needs it, which for most communicators is never (a registered one costs MPI calls, and
    /// memory kept for the run).
    pub fn defer(&self, handle: MPI_Comm) {
        self.deferred.lock().insert(handle.key());
    }

    /// Whether `handle` is a communicator a constructor made and the shim has not needed yet.
    pub fn deferred(&self, handle: MPI_Comm) -> bool {
        self.deferred.lock().contains(&handle.key())
    }

    /// The user frees `handle`, or changes its info: if it was deferred, it is forgotten.
    pub fn forget_deferred(&self, handle: MPI_Comm) {
        self.deferred.lock().remove(&handle.key());
    }

    /// The communicator of `handle` if the shim registered it, without registering it.
    #[inline]
    pub fn registered(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        match self.last(handle) {
            Some(comm) => Some(comm),
            None => self.registered_in_map(handle),
        }
    }

    /// [`CommTable::registered`] at `MPI_THREAD_MULTIPLE` from the map, remembered by
    /// `local`'s thread.
    #[inline(never)]
    pub fn registered_by(&self, local: &thread::Local, handle: MPI_Comm) -> Option<&'static Comm> {
        let comm = self.known(handle)?;
        local.set_last(handle, comm);
        Some(comm)
    }

    #[inline(never)]
    fn registered_in_map(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        let comm = self.known(handle)?;
        self.remember(handle, comm);
        Some(comm)
    }

    #[cold]
    fn add(&self, handle: MPI_Comm) -> Result<&'static Comm, Rejected> {
        if handle.key() == abi().comm_null.key() {
            return Err(Rejected);
        }
        let shape = mpi::comm_shape(handle).map_err(|_| Rejected)?;
        let assertions = if self.deferred.lock().remove(&handle.key()) {
            Assertions::default()
        } else {
            mpi::comm_assertions(handle)
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut comms = self.comms.write();
        if let Some(&comm) = comms.get(&handle.key()) {
            return Ok(comm);
        }
        let now = self.process.clock.elapsed_ns();
        // Kept for the run: a reference to it never dangles, so none is counted.
        let comm: &'static Comm = Box::leak(Box::new(Comm::new(
            id,
            handle,
            shape,
            assertions,
            self.process,
            now,
        )));
        comms.insert(handle.key(), comm);
        drop(comms);
        mpi::comm_set_attr(handle, self.keyval);
        Ok(comm)
    }

    /// The communicator of `handle` if the shim knows it, without creating one.
    pub fn known(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        self.comms.read().get(&handle.key()).copied()
    }

    /// MPI freed `handle`: the communicator leaves the table (its counters stay), and its
    /// engine and queues are given back unless its lock is held ([`Comm::try_retire`]).
    pub fn remove(&self, handle: MPI_Comm) -> Option<&'static Comm> {
        let comm = self.comms.write().remove(&handle.key())?;
        if !self.multiple {
            // SAFETY: below MPI_THREAD_MULTIPLE one thread at a time is in here.
            unsafe { self.recent.get_ref() }.clear();
        }
        comm.forget();
        let now = self.process.clock.elapsed_ns();
        match comm.try_retire() {
            Some(tally) => self.retired.lock().add(comm, &tally, now),
            None => self.retiring.lock().push((comm, now)),
        }
        Some(comm)
    }

    /// The counters of every communicator, freed ones too.
    pub fn totals(&self) -> Totals {
        let now = self.process.clock.elapsed_ns();
        let mut totals = self.retired.lock().clone();
        // Not under the table's locks: a communicator's lock comes before them (`remove`).
        let retiring = self.retiring.lock().clone();
        for (comm, freed) in retiring {
            totals.add(comm, &comm.tally(), freed);
        }
        let known: Vec<&'static Comm> = self.comms.read().values().copied().collect();
        for comm in known {
            totals.add(comm, &comm.tally(), now);
        }
        totals
    }
}
