//! Collectives run by the shim on its own point-to-point.
//!
//! Each intra-communicator gets a private duplicate (at `MPI_Init` for `MPI_COMM_WORLD` and
//! `MPI_COMM_SELF`, inside the call that creates any other, and with `PMPI_Comm_idup` in the
//! first collective on one the shim did not see created: every rank makes its collective calls
//! in the same order, and the nonblocking form lets the shim keep matching while the duplicate
//! is made). All traffic there is collective. With `MATCHSHIM_COLL=native` it carries the
//! blocking collectives MPI runs.
//! It is drained into the same engine as the user communicator's point-to-point traffic, as
//! `Class::Collective { kind, size_class }`, so one engine sees both (the unified engine of the
//! COL+PNP design); user receives never see it, since a point-to-point pattern never matches a
//! collective element.
//!
//! The tag of every message of a call is `seq << 9 | kind << 4 | size_class`: `seq` numbers
//! the calls on the communicator (wrapping within the MPI's tag range), so concurrent
//! nonblocking collectives never cross, and `kind` and `size_class` let the drain classify an
//! arrival before any receive wants it. Blocking and nonblocking calls are numbered apart (the
//! lowest bit of `seq` tells which), as MPICH and Open MPI match them apart: programs that start
//! a nonblocking collective on one rank and a blocking one first on another still work.
//!
//! Every call builds a [`schedule::Schedule`]; a blocking call runs it to completion with the
//! runtime's progress, a nonblocking one returns a generalized request that progress completes
//! when its schedule ends. Algorithms (n: communicator size, b: bytes per block or per call):
//!
//! | collective | algorithm |
//! |---|---|
//! | Barrier | dissemination |
//! | Bcast | binomial tree if b < 12 KiB or n < 8; else binomial scatter + ring allgather |
//! | Reduce | Rabenseifner (recursive-halving reduce-scatter + binomial gather) if the op commutes, b > 2 KiB and count ≥ 2^⌊log2 n⌋; else binomial tree (rooted at 0 and sent to the root for non-commutative ops) |
//! | Allreduce | recursive doubling; Rabenseifner (recursive-halving reduce-scatter + recursive-doubling allgather) if the op commutes, b > 2 KiB and count ≥ 2^⌊log2 n⌋ |
//! | Gather, Scatter | binomial tree on packed blocks if n > 10 and b < 1 KiB; else linear |
//! | Gatherv, Scatterv | linear |
//! | Allgather | recursive doubling if n is a power of two and n·b < 80 KiB; Bruck if n·b < 512 KiB; else ring |
//! | Allgatherv | ring |
//! | Alltoall | Bruck if b ≤ 256 B and n ≥ 8; all pairs at once if b ≤ 32 KiB; else pairwise exchange |
//! | Alltoallv, Alltoallw | all pairs at once |
//! | Reduce_scatter(_block) | pairwise exchange if the op commutes; else binomial reduce + linear scatter |
//! | Scan, Exscan | recursive doubling |
//!
//! These follow MPICH's and Open MPI's defaults for the same sizes. Reductions go through
//! `PMPI_Reduce_local` in MPI's operand order, so any predefined or user-defined op works.

mod algorithms;
pub mod schedule;

pub use algorithms::*;

use crate::config::CollMode;
use crate::ffi::{MPI_Comm, MPI_Request};
use crate::matching::Class;
use crate::mpi::{self, abi, Code, HandleKey};
use crate::report::{Collective, RankReport};
use crate::runtime::comm::{Comm, Side};
use crate::runtime::request::{self, Completion, Operation, Request};
use crate::runtime::{Client, Error, Runtime};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use schedule::{Builder, Schedule};
use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// Which collective a call is (blocking and nonblocking forms share a kind: same traffic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Alltoallw,
    ReduceScatter,
    ReduceScatterBlock,
    Scan,
    Exscan,
}

pub const KINDS: usize = 17;

impl Kind {
    pub const ALL: [Kind; KINDS] = [
        Kind::Barrier,
        Kind::Bcast,
        Kind::Reduce,
        Kind::Allreduce,
        Kind::Gather,
        Kind::Gatherv,
        Kind::Scatter,
        Kind::Scatterv,
        Kind::Allgather,
        Kind::Allgatherv,
        Kind::Alltoall,
        Kind::Alltoallv,
        Kind::Alltoallw,
        Kind::ReduceScatter,
        Kind::ReduceScatterBlock,
        Kind::Scan,
        Kind::Exscan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "bcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Gather => "gather",
            Kind::Gatherv => "gatherv",
            Kind::Scatter => "scatter",
            Kind::Scatterv => "scatterv",
            Kind::Allgather => "allgather",
            Kind::Allgatherv => "allgatherv",
            Kind::Alltoall => "alltoall",
            Kind::Alltoallv => "alltoallv",
            Kind::Alltoallw => "alltoallw",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::ReduceScatterBlock => "reduce_scatter_block",
            Kind::Scan => "scan",
            Kind::Exscan => "exscan",
        }
    }
}

/// The size class of calls whose blocks differ by rank (`v` and `w` forms).
pub const VARYING: u8 = 15;

/// Message size class: ≤ 8 B is 0, then one class per factor of 4 (≤ 32 B, ≤ 128 B, …), at
/// most 14.
pub fn size_class(bytes: i64) -> u8 {
    if bytes <= 8 {
        return 0;
    }
    let bits = 64 - ((bytes - 1) as u64).leading_zeros();
    ((bits - 2) / 2).min(14) as u8
}

/// How tags on the private duplicates carry the call number, kind and size class.
#[derive(Clone, Copy, Debug)]
pub struct TagLayout {
    seq_mask: u32,
}

const KIND_SHIFT: u32 = 4;
const SEQ_SHIFT: u32 = 9;

impl TagLayout {
    pub fn new(tag_ub: c_int) -> TagLayout {
        let bits = 32 - (tag_ub.max(32767) as u32).leading_zeros();
        TagLayout {
            seq_mask: (1u32 << (bits - SEQ_SHIFT)) - 1,
        }
    }

    pub fn tag(&self, seq: u32, kind: Kind, size_class: u8) -> c_int {
        ((seq & self.seq_mask) << SEQ_SHIFT | (kind as u32) << KIND_SHIFT | size_class as u32)
            as c_int
    }

    pub fn class_of(&self, tag: c_int) -> Class {
        Class::Collective {
            kind: (tag as u32 >> KIND_SHIFT & 31) as u8,
            size_class: (tag & 15) as u8,
        }
    }
}

/// A communicator's collective state: its private duplicate and call counters.
pub struct CollComm {
    dup: OnceLock<MPI_Comm>,
    /// The `PMPI_Comm_idup` under way, with the place MPI writes the new handle.
    creating: Mutex<Option<(MPI_Request, Box<MPI_Comm>)>>,
    /// Calls so far: blocking, nonblocking.
    seq: [AtomicU32; 2],
    /// Schedules running on this communicator; the duplicate is freed once none is left
    /// after the user freed the communicator.
    running: AtomicUsize,
    retired: AtomicBool,
    freed: AtomicBool,
}

// SAFETY: MPI handles are plain values.
unsafe impl Send for CollComm {}
unsafe impl Sync for CollComm {}

impl CollComm {
    fn new() -> CollComm {
        CollComm {
            dup: OnceLock::new(),
            creating: Mutex::new(None),
            seq: [AtomicU32::new(0), AtomicU32::new(0)],
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
        let _ = comm.side.set(Side::new(dup, move |tag| tags.class_of(tag)));
    }

    /// Starts making the duplicate unless it exists or is under way.
    fn start(&self, comm: &Comm) -> Result<(), Code> {
        if self.dup.get().is_some() {
            return Ok(());
        }
        let mut creating = self.creating.lock();
        if creating.is_some() {
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

    fn next_seq(&self, nonblocking: bool) -> u32 {
        self.seq[nonblocking as usize].fetch_add(1, Ordering::Relaxed) << 1 | nonblocking as u32
    }

    fn began(&self, comm: &Comm) {
        self.running.fetch_add(1, Ordering::AcqRel);
        if let Some(side) = comm.side.get() {
            side.enter();
        }
    }

    fn finished(&self, comm: &Comm) {
        if let Some(side) = comm.side.get() {
            side.leave();
        }
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

/// Per-collective counters of one rank.
struct CollStats {
    counters: [[AtomicU64; 6]; KINDS],
}

impl CollStats {
    fn record(&self, kind: Kind, nonblocking: bool, b: &Builder) {
        let c = &self.counters[kind as usize];
        for (i, v) in [
            1,
            nonblocking as u64,
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

    /// The collectives that were called, by name.
    fn report(&self) -> BTreeMap<String, Collective> {
        Kind::ALL
            .iter()
            .filter_map(|&kind| {
                let v = self.counters[kind as usize]
                    .each_ref()
                    .map(|a| a.load(Ordering::Relaxed));
                (v[0] > 0).then(|| {
                    let r = Collective {
                        calls: v[0],
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
        counters: [const { [const { AtomicU64::new(0) }; 6] }; KINDS],
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
            if !schedule.step(rt) {
                return true;
            }
            op.finish(schedule.err);
            self.state(op.comm).finished(op.comm);
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

    /// The communicator when the shim runs its collectives; `None`: pass to MPI
    /// (`MATCHSHIM_COLL=native`, inter-communicators).
    pub fn comm(&self, rt: &Runtime, handle: MPI_Comm) -> Result<Option<&'static Comm>, Error> {
        if rt.config.coll == CollMode::Native {
            return Ok(None);
        }
        let comm = rt.comm(handle)?;
        Ok((!comm.inter).then_some(comm))
    }

    /// Gives a communicator just created its private duplicate now, while every member is
    /// in the call that creates it.
    pub fn adopt(&self, rt: &Runtime, handle: MPI_Comm) -> Result<(), Error> {
        if handle.key() == abi().comm_null.key() {
            return Ok(());
        }
        let comm = rt.comm(handle)?;
        if comm.inter {
            return Ok(());
        }
        self.state(comm)
            .create_now(comm, self.tags())
            .map_err(|err| rt.raise(handle, err))
    }

    /// Where a blocking collective that MPI runs goes, as its nonblocking form: the private
    /// duplicate when there is one, so it never meets the program's nonblocking collectives,
    /// which MPI matches apart from blocking ones.
    pub fn blocking_native_comm(&self, rt: &Runtime, handle: MPI_Comm) -> MPI_Comm {
        match rt.comm(handle) {
            Ok(comm) => self.state(comm).dup.get().copied().unwrap_or(handle),
            Err(_) => handle,
        }
    }

    /// Runs one collective call: `build` adds the algorithm's actions (an error there is a bad
    /// argument, which MPI reports). A null `request` makes the call blocking.
    ///
    /// # Safety
    /// The buffers `build` names stay valid until the call (or its request) completes.
    pub unsafe fn run(
        &self,
        rt: &Runtime,
        comm: &'static Comm,
        kind: Kind,
        request: *mut MPI_Request,
        build: impl FnOnce(&mut Builder) -> Result<(), Code>,
    ) -> Result<Code, Error> {
        let nonblocking = !request.is_null();
        let mut b = Builder::new(comm.rank, comm.size);
        build(&mut b).map_err(|_| Error::Invalid)?;
        let state = self.state(comm);
        state
            .start(comm)
            .map_err(|err| rt.raise(comm.handle, err))?;
        let seq = state.next_seq(nonblocking);
        self.stats.record(kind, nonblocking, &b);
        let class = Class::Collective {
            kind: kind as u8,
            size_class: b.size_class,
        };
        let tag = self.tags().tag(seq, kind, b.size_class);
        let mut schedule = b
            .finish(state.clone(), comm, tag, class, nonblocking)
            .map_err(|err| rt.raise(comm.handle, err))?;
        state.began(comm);
        if !nonblocking {
            rt.wait_until(Some(comm), || schedule.step(rt));
            state.finished(comm);
            if schedule.err != abi().success {
                return Err(rt.raise(comm.handle, schedule.err));
            }
            return Ok(abi().success);
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
        rt.register(greq, Request::Op(op.clone()));
        *request = greq;
        // The first round goes out now, so the collective overlaps what the caller does next.
        if schedule.step(rt) {
            op.finish(schedule.err);
            state.finished(comm);
        } else {
            let mut list = self.running.lock();
            if list.is_empty() {
                rt.client_busy(true);
            }
            list.push((op, schedule));
        }
        Ok(abi().success)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_grow_by_factors_of_four() {
        let cases = [
            (0, 0),
            (8, 0),
            (9, 1),
            (32, 1),
            (33, 2),
            (128, 2),
            (1024, 4),
            (65536, 7),
        ];
        for (bytes, class) in cases {
            assert_eq!(size_class(bytes), class, "{bytes} bytes");
        }
        assert_eq!(size_class(1 << 40), 14);
    }

    #[test]
    fn tags_stay_in_range_and_carry_kind_and_class() {
        for tag_ub in [32767, (1 << 28) - 1, i32::MAX] {
            let layout = TagLayout::new(tag_ub);
            for seq in [0, 1, 77, u32::MAX] {
                for kind in Kind::ALL {
                    let tag = layout.tag(seq, kind, 13);
                    assert!((0..=tag_ub).contains(&tag), "tag {tag} above {tag_ub}");
                    assert_eq!(
                        layout.class_of(tag),
                        Class::Collective {
                            kind: kind as u8,
                            size_class: 13
                        }
                    );
                }
            }
            // Consecutive calls get different tags.
            assert_ne!(layout.tag(5, Kind::Bcast, 0), layout.tag(6, Kind::Bcast, 0));
        }
    }
}
