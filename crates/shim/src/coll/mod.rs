//! Collectives run by the shim on its own point-to-point: the executor of the schedules that
//! `matchshim_core::protocol::coll` lays out (its algorithms, kinds and tag layout).
//!
//! The shim's collectives run on a private duplicate of the communicator. Under
//! `MATCHSHIM_COLL=shim` every intra-communicator gets it at once (at `MPI_Init` for
//! `MPI_COMM_WORLD` and `MPI_COMM_SELF`, inside the call that creates any other); under `auto`
//! it is made with `PMPI_Comm_idup` in the first collective the shim runs there (every rank
//! makes its collective calls in the same order and decides alike who runs each,
//! `protocol::coll::shim_pays`, and the nonblocking form lets the shim keep matching while the
//! duplicate is made), so a communicator whose collectives MPI runs costs what it costs in
//! MPI. All traffic there is collective. It is drained into the same engine as the user
//! communicator's point-to-point traffic, as `Class::Collective { kind, size_class }` read
//! from each message's tag, so one engine sees both (the unified engine of the COL+PNP
//! design); user receives never see it, since a point-to-point pattern never matches a
//! collective element.
//!
//! Every call builds a [`schedule::Schedule`]; a blocking call runs it to completion with the
//! runtime's progress, a nonblocking one returns a generalized request that progress completes
//! when its schedule ends. Reductions go through `PMPI_Reduce_local` in MPI's operand order, so
//! any predefined or user-defined op works.

pub mod schedule;

pub use matchshim_core::protocol::coll::algorithms;
pub use matchshim_core::protocol::coll::Kind;

use crate::config::CollMode;
use crate::mpi::{self, abi, Code, MPI_Comm, MPI_Request};
use crate::report::{Collective, RankReport};
use crate::runtime::comm::{Comm, Side};
use crate::runtime::completion::Completion;
use crate::runtime::request::{self, Operation, Request};
use crate::runtime::{Client, Error, Runtime};
use matchshim_core::protocol::coll::Invalid;
use matchshim_core::protocol::coll::{shim_may_pay, shim_pays, Form, TagLayout, KINDS};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use schedule::{Builder, Schedule};
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A communicator's collective state: its private duplicate and call counters.
pub struct CollComm {
    dup: OnceLock<MPI_Comm>,
    /// The `PMPI_Comm_idup` under way, with the place MPI writes the new handle.
    creating: Mutex<Option<(MPI_Request, Box<MPI_Comm>)>>,
    /// Calls so far: blocking, nonblocking.
    calls: [AtomicU32; 2],
    /// Schedules running on this communicator; the duplicate is freed once none is left
    /// after the user freed the communicator.
    running: AtomicUsize,
    retired: AtomicBool,
    freed: AtomicBool,
}

// SAFETY: MPI handles are plain values; the state that changes is atomic or locked.
unsafe impl Send for CollComm {}
// SAFETY: as above.
unsafe impl Sync for CollComm {}

impl CollComm {
    fn new() -> CollComm {
        CollComm {
            dup: OnceLock::new(),
            creating: Mutex::new(None),
            calls: [AtomicU32::new(0), AtomicU32::new(0)],
            running: AtomicUsize::new(0),
            retired: AtomicBool::new(false),
            freed: AtomicBool::new(false),
        }
    }

    /// Makes the duplicate now, blocking (at `MPI_Init`, or while every member is in the call
    /// that creates the communicator).
    fn create_now(&self, comm: &Comm, tags: TagLayout) -> Result<(), Code> {
        if self.dup.get().is_some() {
            return Ok(());
        }
        let dup = mpi::comm_duplicate_quietly(comm.handle)?;
        self.install(comm, dup, tags);
        Ok(())
    }

    fn install(&self, comm: &Comm, dup: MPI_Comm, tags: TagLayout) {
        // Errors surface on the user's communicator, through its handler.
        mpi::comm_return_errors(dup);
        let _ = self.dup.set(dup);
        let _ = comm.side.set(Side::new(dup, tags));
    }

    /// Starts making the duplicate unless it exists or is under way.
    fn start(&self, comm: &Comm) -> Result<(), Code> {
        if self.dup.get().is_some() {
            return Ok(());
        }
        let mut creating = self.creating.lock();
        // Under the lock again: another thread's `ready` may have installed the duplicate
        // since, and a second idup here would be this rank's alone, never completing.
        if creating.is_some() || self.dup.get().is_some() {
            return Ok(());
        }
        let mut out = Box::new(abi().comm_null);
        // SAFETY: `out` stays at one address until the request completes.
        let request = unsafe { mpi::comm_idup(comm.handle, &mut *out)? };
        *creating = Some((request, out));
        Ok(())
    }

    /// The duplicate, once it exists.
    pub fn ready(&self, comm: &Comm) -> Option<MPI_Comm> {
        if let Some(dup) = self.dup.get() {
            return Some(*dup);
        }
        let mut creating = self.creating.lock();
        let (request, out) = creating.as_mut()?;
        mpi::test(request)?;
        let dup = **out;
        *creating = None;
        self.install(comm, dup, COLLECTIVES.tags());
        Some(dup)
    }

    /// The number of the next call of `form` on the communicator.
    fn next_call(&self, form: Form) -> u32 {
        self.calls[(form == Form::Nonblocking) as usize].fetch_add(1, Ordering::Relaxed)
    }

    fn began(&self, comm: &Comm) {
        self.running.fetch_add(1, Ordering::AcqRel);
        comm.enter_side();
    }

    fn finished(&self, comm: &Comm) {
        comm.leave_side();
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 && self.retired.load(Ordering::Acquire)
        {
            self.free(comm);
        }
    }

    /// The user freed the communicator: free the duplicate once no schedule needs it.
    fn retire(&self, comm: &Comm) {
        self.retired.store(true, Ordering::Release);
        if self.running.load(Ordering::Acquire) == 0 {
            self.free(comm);
        }
    }

    fn free(&self, comm: &Comm) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some((mut request, out)) = self.creating.lock().take() {
            // The idup every rank started in the same call.
            let _ = mpi::wait(&mut request);
            self.install(comm, *out, COLLECTIVES.tags());
        }
        if let Some(&dup) = self.dup.get() {
            let mut dup = dup;
            mpi::comm_free(&mut dup);
        }
    }
}

/// A nonblocking collective as the user's request sees it.
struct CollOp {
    comm: &'static Comm,
    done: Completion,
}

impl Operation for CollOp {
    fn completion(&self) -> &Completion {
        &self.done
    }

    fn focus(&self) -> &'static Comm {
        self.comm
    }
}

impl CollOp {
    fn finish(&self, err: Code) {
        let mut status = mpi::empty_status(abi().any_source);
        status.MPI_ERROR = err;
        self.done.finish(status, err);
    }
}

/// Per-collective counters of one rank: the shim's calls, its nonblocking ones, messages and
/// bytes received, messages and bytes sent, and the calls MPI ran.
struct CollStats {
    counters: [[AtomicU64; 7]; KINDS],
}

const MPI_CALLS: usize = 6;

impl CollStats {
    fn record(&self, kind: Kind, form: Form, b: &Builder) {
        let c = &self.counters[kind as usize];
        for (i, v) in [
            1,
            (form == Form::Nonblocking) as u64,
            b.received.0,
            b.received.1,
            b.sent.0,
            b.sent.1,
        ]
        .into_iter()
        .enumerate()
        {
            c[i].fetch_add(v, Ordering::Relaxed);
        }
    }

    fn record_mpi(&self, kind: Kind) {
        self.counters[kind as usize][MPI_CALLS].fetch_add(1, Ordering::Relaxed);
    }

    /// The collectives that were called, by name.
    fn report(&self) -> BTreeMap<String, Collective> {
        Kind::ALL
            .iter()
            .filter_map(|&kind| {
                let v = self.counters[kind as usize]
                    .each_ref()
                    .map(|a| a.load(Ordering::Relaxed));
                (v[0] > 0 || v[MPI_CALLS] > 0).then(|| {
                    let r = Collective {
                        calls: v[0],
                        mpi_calls: v[MPI_CALLS],
                        nonblocking_calls: v[1],
                        matched: v[2],
                        bytes_received: v[3],
                        messages_sent: v[4],
                        bytes_sent: v[5],
                    };
                    (kind.name().to_string(), r)
                })
            })
            .collect()
    }
}

/// The collectives the shim runs: a client of the runtime's progress engine.
pub struct Collectives {
    comms: Mutex<Option<FxHashMap<u64, Arc<CollComm>>>>,
    tags: OnceLock<TagLayout>,
    stats: CollStats,
    /// Nonblocking collectives under way in the process.
    running: Mutex<Vec<(Arc<CollOp>, Schedule)>>,
}

pub static COLLECTIVES: Collectives = Collectives {
    comms: parking_lot::const_mutex(None),
    tags: OnceLock::new(),
    stats: CollStats {
        counters: [const { [const { AtomicU64::new(0) }; 7] }; KINDS],
    },
    running: parking_lot::const_mutex(Vec::new()),
};

impl Client for Collectives {
    /// Moves every running nonblocking collective on; skipped when another thread does it.
    fn progress(&self, rt: &Runtime) {
        let Some(mut list) = self.running.try_lock() else {
            return;
        };
        let running = list.len();
        list.retain_mut(|(op, schedule)| {
            if !schedule.step() {
                return true;
            }
            op.finish(schedule.err);
            // The schedule's own state: the user may have freed the communicator, taking it
            // out of the map, once `finish` let its request complete.
            schedule.state().finished(op.comm);
            false
        });
        if running > 0 && list.is_empty() {
            rt.client_busy(false);
        }
    }

    fn forget(&self, _rt: &Runtime, comm: &'static Comm) {
        let state = self.comms.lock().as_mut().and_then(|m| m.remove(&comm.id));
        if let Some(state) = state {
            state.retire(comm);
        }
    }

    fn report(&self, report: &mut RankReport) {
        report.collectives = self.stats.report();
    }
}

impl Collectives {
    /// Ready for a run whose tags go up to `tag_ub`.
    pub fn init(&self, tag_ub: c_int) {
        let _ = self.tags.set(TagLayout::new(tag_ub));
    }

    fn tags(&self) -> TagLayout {
        *self.tags.get().expect("set at MPI_Init")
    }

    fn state(&self, comm: &Comm) -> Arc<CollComm> {
        self.comms
            .lock()
            .get_or_insert_with(FxHashMap::default)
            .entry(comm.id)
            .or_insert_with(|| Arc::new(CollComm::new()))
            .clone()
    }

    /// The communicator when the shim may run a collective of `kind` in `form` on it; `None`:
    /// pass to MPI (`MATCHSHIM_COLL=native`, `auto` where the shim's algorithm does not pay,
    /// inter-communicators).
    pub fn comm(
        &self,
        rt: &Runtime,
        handle: MPI_Comm,
        kind: Kind,
        form: Form,
    ) -> Result<Option<&'static Comm>, Error> {
        if rt.config.coll == CollMode::Native {
            return Ok(None);
        }
        let comm = rt.comm(handle)?;
        let mine = !comm.inter
            && (rt.config.coll == CollMode::Shim || shim_may_pay(kind, form, comm.size));
        Ok(mine.then_some(comm))
    }

    /// Counts a call of `kind` that MPI runs.
    pub fn passed_to_mpi(&self, kind: Kind) {
        self.stats.record_mpi(kind);
    }

    /// Gives a communicator its private duplicate now, while every member is in the call that
    /// creates it (or sets its info): under `MATCHSHIM_COLL=shim`, and where its info makes an
    /// MPI-4 matching assertion (see [`Collectives::apart`]).
    pub fn adopt(&self, rt: &Runtime, comm: &'static Comm) -> Result<(), Error> {
        if comm.inter || !(rt.config.coll == CollMode::Shim || comm.asserts()) {
            return Ok(());
        }
        self.state(comm)
            .create_now(comm, self.tags())
            .map_err(|err| rt.raise(comm.handle, err))
    }

    /// Where a blocking collective that MPI runs on `comm` goes instead of the user's
    /// communicator: the private duplicate of one whose info makes an MPI-4 matching
    /// assertion, which every rank makes alike. Open MPI 4.1.4 loses a barrier's messages on a
    /// communicator asserting `mpi_assert_no_any_source` (4 oversubscribed ranks); the
    /// duplicate asserts nothing.
    pub fn apart(&self, comm: &Comm) -> Option<MPI_Comm> {
        if !comm.asserts() {
            return None;
        }
        comm.side.get().map(|side| side.handle)
    }

    /// Runs one collective call: `build` adds the algorithm's actions (an error there is a bad
    /// argument, which MPI reports). A null `request` makes the call blocking. `None`: under
    /// `MATCHSHIM_COLL=auto` the call's blocks are too large for the shim to pay; MPI runs it.
    ///
    /// # Safety
    /// The buffers `build` names stay valid until the call (or its request) completes.
    pub unsafe fn run(
        &self,
        rt: &Runtime,
        comm: &'static Comm,
        kind: Kind,
        request: *mut MPI_Request,
        build: impl FnOnce(&mut Builder) -> Result<(), Invalid>,
    ) -> Result<Option<Code>, Error> {
        let form = if !request.is_null() {
            Form::Nonblocking
        } else {
            Form::Blocking
        };
        let mut b = Builder::new(comm.rank, comm.size);
        build(&mut b).map_err(|_| Error::Invalid)?;
        if rt.config.coll == CollMode::Auto && !shim_pays(kind, form, comm.size, b.size_class) {
            return Ok(None);
        }
        let state = self.state(comm);
        state
            .start(comm)
            .map_err(|err| rt.raise(comm.handle, err))?;
        let call = state.next_call(form);
        self.stats.record(kind, form, &b);
        let class = kind.class(b.size_class);
        let tag = self.tags().tag(call, form, kind, b.size_class);
        let mut schedule = b
            .finish(state.clone(), comm, tag, class, form)
            .map_err(|err| rt.raise(comm.handle, err))?;
        state.began(comm);
        if form == Form::Blocking {
            rt.wait_until(Some(comm), || schedule.step());
            state.finished(comm);
            if schedule.err != abi().success {
                return Err(rt.raise(comm.handle, schedule.err));
            }
            return Ok(Some(abi().success));
        }
        let op = Arc::new(CollOp {
            comm,
            done: Completion::default(),
        });
        let greq = match request::start_grequest(&op) {
            Ok(greq) => greq,
            Err(err) => {
                state.finished(comm);
                return Err(rt.raise(comm.handle, err));
            }
        };
        rt.requests.insert(greq, Request::Op(op.clone()));
        // SAFETY: the caller's request.
        unsafe { *request = greq };
        // The first round goes out now, so the collective overlaps what the caller does next.
        if schedule.step() {
            op.finish(schedule.err);
            state.finished(comm);
        } else {
            let mut list = self.running.lock();
            if list.is_empty() {
                rt.client_busy(true);
            }
            list.push((op, schedule));
        }
        Ok(Some(abi().success))
    }
}
