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

use crate::ffi::*;
use crate::matching::Class;
use crate::report::Collective;
use crate::runtime::comm::Comm;
use crate::runtime::{pmpi, Runtime, ShimRequest};
use parking_lot::Mutex;
use schedule::{Builder, Schedule};
use std::collections::BTreeMap;
use std::os::raw::{c_int, c_void};
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

/// A communicator's collective state: its private duplicate and call counter.
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
    pub fn new() -> CollComm {
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
    /// that creates the communicator). `Comm_create` over the whole group, unlike `Comm_dup`,
    /// runs none of the user's attribute copy callbacks.
    pub fn create_now(&self, comm: &Comm) -> c_int {
        if self.dup.get().is_some() {
            return abi().success;
        }
        let mut dup = abi().comm_null;
        // SAFETY: plain calls with valid out-pointers; MPI writes the group before it is read.
        let err = unsafe {
            let mut group: MPI_Group = std::mem::zeroed();
            let err = PMPI_Comm_group(comm.handle, &mut group);
            if err != abi().success {
                return err;
            }
            let err = PMPI_Comm_create(comm.handle, group, &mut dup);
            PMPI_Group_free(&mut group);
            err
        };
        if err == abi().success {
            self.install(comm, dup);
        }
        err
    }

    fn install(&self, comm: &Comm, dup: MPI_Comm) {
        // Errors surface on the user's communicator, through its handler.
        // SAFETY: plain call on the new duplicate.
        unsafe { PMPI_Comm_set_errhandler(dup, abi().errors_return) };
        let _ = self.dup.set(dup);
        comm.queues.lock().collective = dup;
    }

    /// Starts making the duplicate unless it exists or is under way.
    fn start(&self, comm: &Comm) -> c_int {
        if self.dup.get().is_some() {
            return abi().success;
        }
        let mut creating = self.creating.lock();
        if creating.is_some() {
            return abi().success;
        }
        let mut out = Box::new(abi().comm_null);
        let mut request = abi().request_null;
        // SAFETY: `out` stays at one address until the request completes.
        let err = unsafe { PMPI_Comm_idup(comm.handle, &mut *out, &mut request) };
        if err == abi().success {
            *creating = Some((request, out));
        }
        err
    }

    /// The duplicate, once it exists.
    pub fn ready(&self, comm: &Comm) -> Option<MPI_Comm> {
        if let Some(dup) = self.dup.get() {
            return Some(*dup);
        }
        let mut creating = self.creating.lock();
        let (request, out) = creating.as_mut()?;
        pmpi::test(request)?;
        let dup = **out;
        *creating = None;
        self.install(comm, dup);
        Some(dup)
    }

    /// True while a schedule runs on the communicator.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Acquire) > 0
    }

    fn next_seq(&self, nonblocking: bool) -> u32 {
        self.seq[nonblocking as usize].fetch_add(1, Ordering::Relaxed) << 1 | nonblocking as u32
    }

    /// The user freed the communicator: free the duplicate once no schedule needs it.
    pub fn retire(&self, comm: &Comm) {
        self.retired.store(true, Ordering::Release);
        if self.running.load(Ordering::Acquire) == 0 {
            self.free(comm);
        }
    }

    fn finished(&self, comm: &Comm) {
        if self.running.fetch_sub(1, Ordering::AcqRel) == 1 && self.retired.load(Ordering::Acquire)
        {
            self.free(comm);
        }
    }

    fn free(&self, comm: &Comm) {
        if self.freed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some((mut request, out)) = self.creating.lock().take() {
            // SAFETY: the idup request is live; every rank started it in the same call.
            unsafe { PMPI_Wait(&mut request, abi().status_ignore) };
            self.install(comm, *out);
        }
        if let Some(&dup) = self.dup.get() {
            let mut dup = dup;
            // SAFETY: the duplicate belongs to the shim and no schedule uses it any more.
            unsafe { PMPI_Comm_free(&mut dup) };
        }
    }
}

impl Default for CollComm {
    fn default() -> Self {
        Self::new()
    }
}

/// A nonblocking collective as the user's request sees it.
pub struct CollOp {
    pub comm: Arc<Comm>,
    inner: Mutex<(Option<c_int>, MPI_Request)>,
}

// SAFETY: handles are plain values.
unsafe impl Send for CollOp {}
unsafe impl Sync for CollOp {}

impl CollOp {
    fn new(comm: Arc<Comm>) -> Arc<CollOp> {
        Arc::new(CollOp {
            comm,
            inner: Mutex::new((None, abi().request_null)),
        })
    }

    /// The error code, once the collective completed.
    pub fn result(&self) -> Option<c_int> {
        self.inner.lock().0
    }

    pub fn is_done(&self) -> bool {
        self.result().is_some()
    }

    fn finish(&self, err: c_int) {
        let greq = {
            let mut inner = self.inner.lock();
            inner.0 = Some(err);
            inner.1
        };
        // SAFETY: greq is this op's live generalized request.
        unsafe { PMPI_Grequest_complete(greq) };
    }

    fn start_grequest(self: &Arc<Self>) -> Result<MPI_Request, c_int> {
        let mut request = abi().request_null;
        let state = Arc::into_raw(self.clone()) as *mut c_void;
        // SAFETY: the callbacks interpret `state` as the Arc leaked here; free_fn reclaims it.
        let err = unsafe {
            PMPI_Grequest_start(
                Some(query_fn),
                Some(free_fn),
                Some(cancel_fn),
                state,
                &mut request,
            )
        };
        if err != abi().success {
            // SAFETY: MPI did not take the state.
            unsafe { drop(Arc::from_raw(state as *const CollOp)) };
            return Err(err);
        }
        self.inner.lock().1 = request;
        Ok(request)
    }
}

unsafe extern "C" fn query_fn(state: *mut c_void, status: *mut MPI_Status) -> c_int {
    let op = &*(state as *const CollOp);
    let mut result = pmpi::empty_status(abi().any_source);
    result.MPI_ERROR = op.result().unwrap_or(abi().success);
    *status = result;
    abi().success
}

unsafe extern "C" fn free_fn(state: *mut c_void) -> c_int {
    drop(Arc::from_raw(state as *const CollOp));
    abi().success
}

/// Collectives cannot be cancelled (MPI calls that erroneous); nothing to do.
unsafe extern "C" fn cancel_fn(_state: *mut c_void, _complete: c_int) -> c_int {
    abi().success
}

/// Per-collective counters of one rank.
#[derive(Default)]
pub struct CollStats {
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
    pub fn report(&self) -> BTreeMap<String, Collective> {
        Kind::ALL
            .iter()
            .filter_map(|&kind| {
                let c = &self.counters[kind as usize];
                let v: Vec<u64> = c.iter().map(|a| a.load(Ordering::Relaxed)).collect();
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

/// Nonblocking collectives under way in the process.
#[derive(Default)]
pub struct Running {
    list: Mutex<Vec<(Arc<CollOp>, Schedule)>>,
    count: AtomicUsize,
}

impl Running {
    #[inline]
    pub fn any(&self) -> bool {
        self.count.load(Ordering::Acquire) > 0
    }
}

impl Runtime {
    /// The communicator's state when the shim runs its collectives; `None`: pass to MPI
    /// (`MATCHSHIM_COLL=native`, inter-communicators).
    pub fn coll_comm(&self, handle: MPI_Comm) -> Result<Option<Arc<Comm>>, c_int> {
        if self.config.coll == crate::config::CollMode::Native {
            return Ok(None);
        }
        let comm = self.comm(handle)?;
        Ok((!comm.inter).then_some(comm))
    }

    /// Gives a communicator just created its private duplicate now, while every member is
    /// in the call that creates it.
    pub fn adopt_comm(&self, handle: MPI_Comm) -> c_int {
        if handle.key() == abi().comm_null.key() {
            return abi().success;
        }
        let comm = match self.comm(handle) {
            Ok(comm) => comm,
            Err(err) => return err,
        };
        if comm.inter {
            return abi().success;
        }
        match comm.coll.create_now(&comm) {
            err if err == abi().success => err,
            err => pmpi::raise(handle, err),
        }
    }

    /// Where a blocking collective that MPI runs goes, as its nonblocking form: the private
    /// duplicate when there is one, so it never meets the program's nonblocking collectives,
    /// which MPI matches apart from blocking ones.
    pub fn blocking_native_comm(&self, handle: MPI_Comm) -> MPI_Comm {
        match self.comm(handle) {
            Ok(comm) => comm.coll.dup.get().copied().unwrap_or(handle),
            Err(_) => handle,
        }
    }

    /// Runs one collective call: `build` adds the algorithm's actions. A null `request` makes
    /// the call blocking.
    ///
    /// # Safety
    /// The buffers `build` names stay valid until the call (or its request) completes.
    pub unsafe fn collective(
        &self,
        comm: &Arc<Comm>,
        kind: Kind,
        request: *mut MPI_Request,
        build: impl FnOnce(&mut Builder) -> Result<(), c_int>,
    ) -> c_int {
        let err = comm.coll.start(comm);
        if err != abi().success {
            return pmpi::raise(comm.handle, err);
        }
        let seq = comm.coll.next_seq(!request.is_null());
        let mut b = Builder::new(comm.rank, comm.size);
        if let Err(err) = build(&mut b) {
            return pmpi::raise(comm.handle, err);
        }
        self.coll_stats.record(kind, !request.is_null(), &b);
        let class = Class::Collective {
            kind: kind as u8,
            size_class: b.size_class,
        };
        let tag = self.tags.tag(seq, kind, b.size_class);
        let mut schedule = b.finish(comm.clone(), tag, class, !request.is_null());
        comm.coll.running.fetch_add(1, Ordering::AcqRel);
        if request.is_null() {
            self.wait_until(Some(comm), || schedule.step(self));
            comm.coll.finished(comm);
            if schedule.err != abi().success {
                return pmpi::raise(comm.handle, schedule.err);
            }
            return abi().success;
        }
        let op = CollOp::new(comm.clone());
        let greq = match op.start_grequest() {
            Ok(greq) => greq,
            Err(err) => {
                comm.coll.finished(comm);
                return err;
            }
        };
        self.register(greq, ShimRequest::Collective(op.clone()));
        *request = greq;
        // The first round goes out now, so the collective overlaps what the caller does next.
        if schedule.step(self) {
            op.finish(schedule.err);
            comm.coll.finished(comm);
        } else {
            let mut list = self.running.list.lock();
            list.push((op, schedule));
            self.running.count.store(list.len(), Ordering::Release);
        }
        abi().success
    }

    /// Moves every running nonblocking collective on; skipped when another thread does it.
    pub fn progress_collectives(&self) {
        let Some(mut list) = self.running.list.try_lock() else {
            return;
        };
        list.retain_mut(|(op, schedule)| {
            if !schedule.step(self) {
                return true;
            }
            op.finish(schedule.err);
            op.comm.coll.finished(&op.comm);
            false
        });
        self.running.count.store(list.len(), Ordering::Release);
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
