//! Per-communicator matching state: the engine, the messages pulled out of MPI, and the
//! receives waiting for them.

use super::pmpi::{self, improbe_any};
use super::recv::{RecvOp, RecvState};
use super::Runtime;
use crate::coll::CollComm;
use crate::ffi::*;
use crate::matching::{
    build_engine, Class, EngineKind, EngineParams, EngineStats, Envelope, MatchEngine, Pattern,
};
use parking_lot::Mutex;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

/// Vec-backed storage whose keys are stable while an entry lives (the engines' element ids).
pub(crate) struct Slab<T> {
    slots: Vec<Option<T>>,
    free: Vec<usize>,
}

impl<T> Slab<T> {
    pub fn new() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// The key the next `insert` will use.
    pub fn vacant_key(&self) -> usize {
        self.free.last().copied().unwrap_or(self.slots.len())
    }

    pub fn insert(&mut self, value: T) -> usize {
        match self.free.pop() {
            Some(key) => {
                self.slots[key] = Some(value);
                key
            }
            None => {
                self.slots.push(Some(value));
                self.slots.len() - 1
            }
        }
    }

    pub fn remove(&mut self, key: usize) -> Option<T> {
        let value = self.slots.get_mut(key)?.take();
        if value.is_some() {
            self.free.push(key);
        }
        value
    }

    pub fn get(&self, key: usize) -> Option<&T> {
        self.slots.get(key)?.as_ref()
    }

    pub fn get_mut(&mut self, key: usize) -> Option<&mut T> {
        self.slots.get_mut(key)?.as_mut()
    }

    pub fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// A message the shim pulled out of MPI that no receive wanted yet.
pub struct Arrived {
    pub message: MPI_Message,
    pub status: MPI_Status,
}

/// Messages up to this size are in this process once probed (below every eager limit of
/// MPICH and Open MPI), so a blocking matched receive takes them at once and spares a request.
const EAGER_BYTES: i64 = 2048;

/// A receive in the posted-receive queue.
enum Waiter {
    /// `MPI_Recv`: its thread polls for the matched message and receives it itself.
    Blocking { matched: Option<MPI_Message> },
    /// `MPI_Irecv` and persistent receives: progress starts the receive once matched.
    Nonblocking(Arc<RecvOp>),
}

pub struct Queues {
    engine: Box<dyn MatchEngine>,
    arrived: Slab<Arrived>,
    posted: Slab<Waiter>,
    /// Matched receives whose payload MPI is still moving.
    receiving: Vec<Arc<RecvOp>>,
    /// Clock ticks spent inside the engine: point-to-point, collective.
    pub match_ticks: [u64; 2],
    /// The private duplicate that carries the shim's collective traffic (`MPI_COMM_NULL`
    /// until it exists); drained into the same engine.
    pub collective: MPI_Comm,
}

/// What posting a receive found.
pub enum Posted {
    /// An unexpected message matched at once.
    Found(Arrived),
    /// The receive waits in the posted-receive queue under this key.
    Queued(usize),
}

pub struct Comm {
    pub handle: MPI_Comm,
    /// Valid source ranks are `0..size` (the remote group of an inter-communicator).
    pub size: c_int,
    pub rank: c_int,
    pub inter: bool,
    pub coll: CollComm,
    pub queues: Mutex<Queues>,
    /// Receives of this communicator that still need the shim's progress.
    pub pending: AtomicUsize,
    pub listed: AtomicBool,
}

// SAFETY: MPI handles are plain values; MPI calls on them are serialised by `queues` or allowed
// concurrently by the thread level.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}
unsafe impl Send for Queues {}

pub fn point_to_point(source: c_int, tag: c_int) -> Pattern {
    Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    }
}

impl Comm {
    pub fn new(
        handle: MPI_Comm,
        size: c_int,
        rank: c_int,
        inter: bool,
        engine: EngineKind,
        params: &EngineParams,
    ) -> Comm {
        let params = EngineParams {
            comm_size: size.max(0) as usize,
            ..*params
        };
        Comm {
            handle,
            size,
            rank,
            inter,
            coll: CollComm::new(),
            queues: Mutex::new(Queues {
                engine: matchshim_core::trace::recorded(build_engine(engine, &params), &params),
                arrived: Slab::new(),
                posted: Slab::new(),
                receiving: Vec::new(),
                match_ticks: [0; 2],
                collective: abi().comm_null,
            }),
            pending: AtomicUsize::new(0),
            listed: AtomicBool::new(false),
        }
    }

    /// Pulls arrivals out of MPI into the engine and finishes receives whose data landed.
    /// Skips the work when another thread is already doing it.
    pub fn progress(self: &Arc<Self>, rt: &Runtime) {
        if let Some(mut queues) = self.queues.try_lock() {
            queues.drain(self, rt);
            if !queues.receiving.is_empty() {
                queues.finish_received(self, rt);
            }
        }
    }

    /// Engine counters, ticks spent matching, and (posted, unexpected) queued now.
    pub fn stats(&self) -> (EngineStats, [u64; 2], (usize, usize)) {
        let queues = self.queues.lock();
        (
            *queues.engine.stats(),
            queues.match_ticks,
            queues.engine.queued(),
        )
    }
}

impl Queues {
    pub fn drain(&mut self, comm: &Arc<Comm>, rt: &Runtime) {
        self.drain_one(comm, rt, comm.handle, false);
        // Collective traffic waits in MPI until a collective on the communicator runs here.
        if self.collective != abi().comm_null && comm.coll.running() {
            self.drain_one(comm, rt, self.collective, true);
        }
    }

    fn drain_one(&mut self, comm: &Arc<Comm>, rt: &Runtime, handle: MPI_Comm, collective: bool) {
        while let Some((message, status)) = improbe_any(handle) {
            let class = if collective {
                rt.tags.class_of(status.MPI_TAG)
            } else {
                Class::PointToPoint
            };
            let env = Envelope {
                source: status.MPI_SOURCE,
                tag: status.MPI_TAG,
                class,
            };
            let key = self.arrived.vacant_key();
            let start = rt.clock.ticks();
            let matched = self.engine.arrive(env, key as u64);
            self.match_ticks[env.class.is_collective() as usize] += rt.clock.ticks() - start;
            match matched {
                Some(recv) => match self.posted.get_mut(recv as usize) {
                    Some(Waiter::Blocking { matched }) => *matched = Some(message),
                    _ => {
                        let Some(Waiter::Nonblocking(op)) = self.posted.remove(recv as usize)
                        else {
                            unreachable!("the engine returned a receive that is not posted")
                        };
                        self.deliver(comm, rt, op, message, &status);
                    }
                },
                None => {
                    self.arrived.insert(Arrived { message, status });
                }
            }
        }
    }

    /// `post` with the arrivals still inside MPI: a message queued here is older than any of
    /// them, so MPI is asked first only when nothing is queued, else only once the receive is
    /// queued (which spares a probe per receive when messages wait). `on_queued` runs before
    /// that late drain can complete the receive.
    pub fn post_drained(
        &mut self,
        comm: &Arc<Comm>,
        rt: &Runtime,
        want: Pattern,
        op: Option<&Arc<RecvOp>>,
        on_queued: impl FnOnce(),
    ) -> Posted {
        let drain_first = self.arrived.len() == 0;
        if drain_first {
            self.drain(comm, rt);
        }
        let posted = self.post(comm, rt, want, op);
        if let Posted::Queued(_) = posted {
            on_queued();
            if !drain_first {
                self.drain(comm, rt);
            }
        }
        posted
    }

    /// Posts a receive: takes the earliest matching unexpected message, or queues the
    /// receive (`op`, or a blocking receive when `None`).
    pub fn post(
        &mut self,
        comm: &Arc<Comm>,
        rt: &Runtime,
        want: Pattern,
        op: Option<&Arc<RecvOp>>,
    ) -> Posted {
        let key = self.posted.vacant_key();
        let start = rt.clock.ticks();
        let found = self.engine.post(want, key as u64);
        self.match_ticks[want.class.is_collective() as usize] += rt.clock.ticks() - start;
        if let Some(msg) = found {
            return Posted::Found(self.arrived.remove(msg as usize).expect("live message"));
        }
        let waiter = match op {
            Some(op) => {
                op.set_state(RecvState::Posted(key as u64));
                rt.add_pending(comm, 1);
                Waiter::Nonblocking(op.clone())
            }
            None => Waiter::Blocking { matched: None },
        };
        let inserted = self.posted.insert(waiter);
        debug_assert_eq!(inserted, key);
        Posted::Queued(key)
    }

    /// The message matched to the blocking receive posted under `key`, once there is one.
    pub fn take_matched(&mut self, key: usize) -> Option<MPI_Message> {
        match self.posted.get(key) {
            Some(Waiter::Blocking {
                matched: Some(message),
            }) => {
                let message = *message;
                self.posted.remove(key);
                Some(message)
            }
            _ => None,
        }
    }

    /// Probe: the earliest matching unexpected message's status; `remove` takes the message.
    pub fn probe(&mut self, rt: &Runtime, want: Pattern, remove: bool) -> Option<Arrived> {
        let start = rt.clock.ticks();
        let found = self.engine.probe(want, remove);
        self.match_ticks[want.class.is_collective() as usize] += rt.clock.ticks() - start;
        let key = found? as usize;
        if remove {
            self.arrived.remove(key)
        } else {
            self.arrived.get(key).map(|a| Arrived {
                message: a.message,
                status: a.status,
            })
        }
    }

    /// Takes a posted receive out of the queue; false if it already matched.
    pub fn cancel(&mut self, comm: &Arc<Comm>, rt: &Runtime, op: &RecvOp) -> bool {
        let RecvState::Posted(key) = op.state() else {
            return false;
        };
        if !self.engine.cancel(key) {
            return false;
        }
        self.posted.remove(key as usize);
        rt.add_pending(comm, -1);
        true
    }

    /// Receives `message` into a nonblocking op that matched it outside of `drain`.
    pub fn start_receive(
        &mut self,
        comm: &Arc<Comm>,
        rt: &Runtime,
        op: Arc<RecvOp>,
        arrived: Arrived,
    ) {
        rt.add_pending(comm, 1);
        self.deliver(comm, rt, op, arrived.message, &arrived.status);
    }

    fn deliver(
        &mut self,
        comm: &Arc<Comm>,
        rt: &Runtime,
        op: Arc<RecvOp>,
        mut message: MPI_Message,
        status: &MPI_Status,
    ) {
        if pmpi::byte_count(status) <= EAGER_BYTES {
            let mut received = pmpi::zeroed_status();
            // SAFETY: the op holds the user's receive arguments.
            let err =
                unsafe { pmpi::mrecv(op.buf, op.count, op.datatype, &mut message, &mut received) };
            op.finish(received, err);
            rt.add_pending(comm, -1);
            return;
        }
        let mut request = abi().request_null;
        // SAFETY: the op holds the user's receive arguments.
        let err =
            unsafe { pmpi::imrecv(op.buf, op.count, op.datatype, &mut message, &mut request) };
        if err != abi().success {
            op.finish(pmpi::zeroed_status(), err);
            rt.add_pending(comm, -1);
            return;
        }
        match pmpi::test(&mut request) {
            Some((status, err)) => {
                op.finish(status, err);
                rt.add_pending(comm, -1);
            }
            None => {
                op.set_state(RecvState::Receiving(request));
                self.receiving.push(op);
            }
        }
    }

    fn finish_received(&mut self, comm: &Arc<Comm>, rt: &Runtime) {
        let before = self.receiving.len();
        self.receiving.retain(|op| {
            let RecvState::Receiving(mut request) = op.state() else {
                return false;
            };
            match pmpi::test(&mut request) {
                Some((status, err)) => {
                    op.finish(status, err);
                    false
                }
                None => true,
            }
        });
        let finished = before - self.receiving.len();
        if finished > 0 {
            rt.add_pending(comm, -(finished as isize));
        }
    }
}
