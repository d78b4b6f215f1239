//! Per-communicator matching state: the engine, the messages pulled out of MPI, and the
//! receives waiting for them.

use super::recv::{Delivery, Receive, RecvOp, RecvState, Taken};
use super::takeover::{Mode, Order, Signals, Takeover};
use super::Runtime;
use crate::config::{Config, Takeover as Policy};
use crate::ffi::{MPI_Comm, MPI_Message, MPI_Request, MPI_Status};
use crate::matching::{
    build_engine, Assertions, Class, EngineKind, EngineParams, EngineStats, Envelope, ListEngine,
    MatchEngine, Pattern,
};
use crate::mpi::{self, abi};
use parking_lot::Mutex;
use slab::Slab;
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// A second MPI communicator whose messages are drained into the same engine, each classified
/// by its tag (the private duplicate that carries collective traffic). Drained only while it
/// has users, since its messages wait in MPI until a user wants them.
pub struct Side {
    pub handle: MPI_Comm,
    classify: Box<dyn Fn(c_int) -> Class + Send + Sync>,
    users: AtomicUsize,
}

impl Side {
    pub fn new(
        handle: MPI_Comm,
        classify: impl Fn(c_int) -> Class + Send + Sync + 'static,
    ) -> Side {
        Side {
            handle,
            classify: Box::new(classify),
            users: AtomicUsize::new(0),
        }
    }

    pub fn enter(&self) {
        self.users.fetch_add(1, Ordering::AcqRel);
    }

    pub fn leave(&self) {
        self.users.fetch_sub(1, Ordering::AcqRel);
    }

    pub fn in_use(&self) -> bool {
        self.users.load(Ordering::Acquire) > 0
    }
}

// SAFETY: MPI handles are plain values.
unsafe impl Send for Side {}
unsafe impl Sync for Side {}

/// Which MPI communicator an element travels on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The user's.
    Main,
    Side,
}

/// A message the shim pulled out of MPI that no receive wanted yet.
pub struct Arrived {
    pub message: MPI_Message,
    pub status: MPI_Status,
    seq: u64,
}

/// How far a blocking waiter got.
pub enum Matched {
    Waiting,
    /// The shim matched this message to it; the waiter receives it.
    Message(MPI_Message, MPI_Status),
    /// It was handed to MPI, which matches it and completes this request.
    Request(MPI_Request),
    /// It can no longer complete: MPI refused it, or its communicator went away unseen.
    Failed(c_int),
}

enum Waits {
    /// A caller that polls for its match: `MPI_Recv`, or a collective's receive.
    Blocking(Matched),
    /// `MPI_Irecv` and starts of persistent receives: progress completes the op.
    Op(Arc<RecvOp>),
}

/// A receive in the posted-receive queue, with what it takes to hand it to MPI.
pub struct Waiter {
    seq: u64,
    receive: Receive,
    source: c_int,
    tag: c_int,
    channel: Channel,
    waits: Waits,
}

impl Waiter {
    fn is_waiting(&self) -> bool {
        matches!(self.waits, Waits::Op(_) | Waits::Blocking(Matched::Waiting))
    }

    /// A blocking receive of `receive` from `source` with `tag` (MPI values) on `channel`.
    pub fn blocking(receive: Receive, source: c_int, tag: c_int, channel: Channel) -> Waiter {
        Waiter {
            seq: 0,
            receive,
            source,
            tag,
            channel,
            waits: Waits::Blocking(Matched::Waiting),
        }
    }
}

/// What posting a receive found.
pub enum Posted {
    /// An unexpected message matched at once.
    Found(Arrived),
    /// The receive waits in the posted-receive queue under this key.
    Queued(usize),
}

pub struct Queues {
    engine: Box<dyn MatchEngine>,
    /// What the engine was built for; `rebuild`: the communicator's assertions changed since,
    /// and the engine is rebuilt when it next holds nothing.
    params: EngineParams,
    rebuild: bool,
    /// Counters of the engines replaced so far.
    replaced: EngineStats,
    arrived: Slab<Arrived>,
    posted: Slab<Waiter>,
    /// Receives whose request MPI completes (see `RecvState::Receiving`): messages the shim
    /// matched, and (`handed`) receives handed to MPI to match.
    receiving: Vec<Arc<RecvOp>>,
    handed: Vec<Arc<RecvOp>>,
    /// Clock ticks spent inside the engine: point-to-point, collective.
    pub match_ticks: [u64; 2],
    posted_order: Order,
    arrived_order: Order,
    signals: Signals,
}

// SAFETY: handles are plain values; the queues are used under their communicator's lock.
unsafe impl Send for Queues {}

pub struct Comm {
    /// Never reused, unlike MPI's handles.
    pub id: u64,
    pub handle: MPI_Comm,
    /// Valid source ranks are `0..size` (the remote group of an inter-communicator).
    pub size: c_int,
    pub rank: c_int,
    pub inter: bool,
    pub queues: Mutex<Queues>,
    /// Receives of this communicator that need the shim's progress to complete.
    pub pending: AtomicUsize,
    pub listed: AtomicBool,
    pub side: OnceLock<Side>,
    pub takeover: Takeover,
    /// The user is freeing it: its waiting receives went to MPI, which matches for it.
    released: AtomicBool,
    /// MPI freed it: its handle is gone.
    freed: AtomicBool,
}

// SAFETY: MPI handles are plain values; MPI calls on them are serialised by `queues` or allowed
// concurrently by the thread level.
unsafe impl Send for Comm {}
unsafe impl Sync for Comm {}

pub fn point_to_point(source: c_int, tag: c_int) -> Pattern {
    Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    }
}

/// The engine of `kind` for a communicator with `params`, recording its calls under
/// `MATCHSHIM_TRACE`.
fn engine_for(kind: EngineKind, params: &EngineParams) -> Box<dyn MatchEngine> {
    matchshim_core::trace::recorded(build_engine(kind, params), params)
}

impl Comm {
    pub fn new(
        id: u64,
        handle: MPI_Comm,
        (size, rank, inter): (c_int, c_int, bool),
        config: &Config,
        now_ns: u64,
        found_floor: u64,
    ) -> Comm {
        let params = EngineParams {
            comm_size: size.max(0) as usize,
            assertions: mpi::comm_assertions(handle),
            ..config.params
        };
        Comm {
            id,
            handle,
            size,
            rank,
            inter,
            queues: Mutex::new(Queues {
                engine: engine_for(config.engine, &params),
                params,
                rebuild: false,
                replaced: EngineStats::default(),
                arrived: Slab::new(),
                posted: Slab::new(),
                receiving: Vec::new(),
                handed: Vec::new(),
                match_ticks: [0; 2],
                posted_order: Order::default(),
                arrived_order: Order::default(),
                signals: Signals::default(),
            }),
            pending: AtomicUsize::new(0),
            listed: AtomicBool::new(false),
            side: OnceLock::new(),
            takeover: Takeover::new(config.takeover, config.takeover_depth, now_ns, found_floor),
            released: AtomicBool::new(false),
            freed: AtomicBool::new(false),
        }
    }

    fn channel(&self, channel: Channel) -> MPI_Comm {
        match channel {
            Channel::Main => self.handle,
            Channel::Side => self.side.get().map_or(abi().comm_null, |s| s.handle),
        }
    }

    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }

    /// Pulls arrivals out of MPI into the engine and finishes receives whose data landed.
    /// Skips the work when another thread is already doing it.
    pub fn progress(&'static self, rt: &Runtime) {
        if let Some(mut queues) = self.queues.try_lock() {
            queues.drain(self, rt);
            if !queues.receiving.is_empty() || !queues.handed.is_empty() {
                queues.finish_received(self, rt);
            }
        }
    }

    /// Engine counters, ticks spent matching, (posted, unexpected) queued now, and the
    /// assertions the engine follows.
    pub fn stats(&self) -> (EngineStats, [u64; 2], (usize, usize), Assertions) {
        let queues = self.queues.lock();
        let mut stats = *queues.engine.stats();
        stats.follow(&queues.replaced);
        let assertions = queues.params.assertions;
        (
            stats,
            queues.match_ticks,
            queues.engine.queued(),
            assertions,
        )
    }

    /// The user frees the communicator (before MPI does): its waiting receives go to MPI,
    /// which completes them even after the handle is gone, and MPI matches for it from now on.
    /// Messages the shim holds that no receive wants stay unreceived, as they would in MPI.
    pub fn release(&'static self, rt: &Runtime) {
        let mut queues = self.queues.lock();
        queues.drain(self, rt);
        queues.hand_over(self, rt);
        queues.signals.reset();
        self.takeover.set(Mode::Delegated, rt.clock.elapsed_ns());
        self.released.store(true, Ordering::Release);
    }

    /// MPI freed the communicator.
    pub fn forget(&'static self, rt: &Runtime) {
        if !self.released.load(Ordering::Acquire) {
            self.abandon(rt);
        }
        self.freed.store(true, Ordering::Release);
    }

    /// Gives back what a freed communicator's engine and queues hold (the communicator itself
    /// stays for the run, for the receives MPI still completes for it). Messages no receive
    /// wanted stay unreceived, as they would in MPI.
    pub fn empty(&self) {
        let mut queues = self.queues.lock();
        queues.engine = Box::new(ListEngine::new());
        queues.arrived = Slab::new();
        queues.posted_order = Order::default();
        queues.arrived_order = Order::default();
    }
}

impl Comm {
    /// MPI frees the communicator without the shim having released it first (from inside a
    /// callback the shim runs): its waiting receives can no longer be handed to MPI, so they
    /// fail instead of waiting forever.
    fn abandon(&'static self, rt: &Runtime) {
        let mut queues = self.queues.lock();
        let keys: Vec<usize> = queues.posted.iter().map(|(key, _)| key).collect();
        for key in keys {
            if !queues.posted[key].is_waiting() {
                continue;
            }
            queues.engine.cancel(key as u64);
            let waiter = &mut queues.posted[key];
            if let Waits::Blocking(matched) = &mut waiter.waits {
                *matched = Matched::Failed(abi().err_comm);
                continue;
            }
            if let Waits::Op(op) = queues.posted.remove(key).waits {
                op.finish(mpi::zeroed_status(), abi().err_comm);
                rt.add_pending(self, -1);
            }
        }
    }
}

impl Queues {
    /// Pulls every message MPI holds for the communicator into the engine, while the shim
    /// matches for it.
    pub fn drain(&mut self, comm: &'static Comm, rt: &Runtime) {
        if comm.takeover.mode() != Mode::Takeover {
            return;
        }
        if !comm.is_freed() {
            self.drain_channel(comm, rt, Channel::Main);
        }
        if comm.side.get().is_some_and(Side::in_use) {
            self.drain_channel(comm, rt, Channel::Side);
        }
    }

    fn drain_channel(&mut self, comm: &'static Comm, rt: &Runtime, channel: Channel) {
        while let Some((message, status)) = mpi::improbe_any(comm.channel(channel)) {
            let class = match channel {
                Channel::Main => Class::PointToPoint,
                Channel::Side => (comm.side.get().expect("side channel").classify)(status.MPI_TAG),
            };
            let env = Envelope {
                source: status.MPI_SOURCE,
                tag: status.MPI_TAG,
                class,
            };
            let key = self.arrived.vacant_key();
            let start = rt.clock.ticks();
            let matched = self.engine.arrive(env, key as u64);
            self.match_ticks[class.is_collective() as usize] += rt.clock.ticks() - start;
            let Some(recv) = matched else {
                let seq = self.arrived_order.push();
                self.arrived.insert(Arrived {
                    message,
                    status,
                    seq,
                });
                continue;
            };
            let waiter = &mut self.posted[recv as usize];
            let depth = self.posted_order.remove(waiter.seq);
            self.signals.observe(depth);
            if let Waits::Blocking(matched) = &mut waiter.waits {
                *matched = Matched::Message(message, status);
                continue;
            }
            let Waits::Op(op) = self.posted.remove(recv as usize).waits else {
                unreachable!("a blocking waiter stays until its caller takes its match")
            };
            self.deliver(comm, rt, op, message, &status);
        }
    }

    /// `post` with the arrivals still inside MPI: a message queued here is older than any of
    /// them, so MPI is asked first only when nothing is queued, else only once the receive is
    /// queued (which spares a probe per receive when messages wait).
    pub fn post_drained(
        &mut self,
        comm: &'static Comm,
        rt: &Runtime,
        want: Pattern,
        waiter: impl FnOnce() -> Waiter,
    ) -> Posted {
        let drain_first = self.arrived.is_empty();
        if drain_first {
            self.drain(comm, rt);
        }
        let posted = self.post(comm, rt, want, waiter);
        if matches!(posted, Posted::Queued(_)) && !drain_first {
            self.drain(comm, rt);
        }
        posted
    }

    /// Posts a receive: takes the earliest matching unexpected message, or queues the waiter
    /// `waiter` makes.
    pub fn post(
        &mut self,
        comm: &'static Comm,
        rt: &Runtime,
        want: Pattern,
        waiter: impl FnOnce() -> Waiter,
    ) -> Posted {
        let key = self.posted.vacant_key();
        let start = rt.clock.ticks();
        let found = self.engine.post(want, key as u64);
        self.match_ticks[want.class.is_collective() as usize] += rt.clock.ticks() - start;
        if let Some(msg) = found {
            let arrived = self.arrived.remove(msg as usize);
            let depth = self.arrived_order.remove(arrived.seq);
            self.signals.observe(depth);
            return Posted::Found(arrived);
        }
        let mut waiter = waiter();
        waiter.seq = self.posted_order.push();
        if let Waits::Op(op) = &waiter.waits {
            op.set_state(RecvState::Posted(key as u64));
            rt.add_pending(comm, 1);
        }
        let inserted = self.posted.insert(waiter);
        debug_assert_eq!(inserted, key);
        Posted::Queued(key)
    }

    /// Posts a nonblocking receive of the shim's; `make` builds it once it must wait.
    pub fn post_op(
        &mut self,
        comm: &'static Comm,
        rt: &Runtime,
        want: Pattern,
        make: impl FnOnce() -> Arc<RecvOp>,
    ) -> (Posted, Option<Arc<RecvOp>>) {
        let mut made = None;
        let posted = self.post_drained(comm, rt, want, || {
            let op = make();
            made = Some(op.clone());
            Waiter {
                seq: 0,
                receive: op.receive.clone(),
                source: op.source,
                tag: op.tag,
                channel: Channel::Main,
                waits: Waits::Op(op),
            }
        });
        (posted, made)
    }

    /// How far the blocking receive posted under `key` got; it leaves the queue once matched.
    pub fn take_matched(&mut self, key: usize) -> Matched {
        if self.posted.get(key).is_none_or(Waiter::is_waiting) {
            return Matched::Waiting;
        }
        match self.posted.remove(key).waits {
            Waits::Blocking(matched) => matched,
            Waits::Op(_) => unreachable!("checked above"),
        }
    }

    /// Probe: the earliest matching unexpected message; `remove` takes it.
    pub fn probe(
        &mut self,
        rt: &Runtime,
        want: Pattern,
        remove: bool,
    ) -> Option<(MPI_Message, MPI_Status)> {
        let start = rt.clock.ticks();
        let found = self.engine.probe(want, remove);
        self.match_ticks[want.class.is_collective() as usize] += rt.clock.ticks() - start;
        let key = found? as usize;
        if !remove {
            let a = &self.arrived[key];
            return Some((a.message, a.status));
        }
        let arrived = self.arrived.remove(key);
        let depth = self.arrived_order.remove(arrived.seq);
        self.signals.observe(depth);
        Some((arrived.message, arrived.status))
    }

    /// Takes a posted receive out of the queue; false if it already matched.
    pub fn cancel(&mut self, comm: &'static Comm, rt: &Runtime, op: &RecvOp) -> bool {
        let RecvState::Posted(key) = op.state() else {
            return false;
        };
        if !self.engine.cancel(key) {
            return false;
        }
        let waiter = self.posted.remove(key as usize);
        self.posted_order.remove(waiter.seq);
        rt.add_pending(comm, -1);
        true
    }

    /// Receives `arrived` into a nonblocking op that matched it at posting.
    pub fn start_receive(
        &mut self,
        comm: &'static Comm,
        rt: &Runtime,
        op: Arc<RecvOp>,
        arrived: Arrived,
    ) {
        rt.add_pending(comm, 1);
        self.deliver(comm, rt, op, arrived.message, &arrived.status);
    }

    fn deliver(
        &mut self,
        comm: &'static Comm,
        rt: &Runtime,
        op: Arc<RecvOp>,
        message: MPI_Message,
        status: &MPI_Status,
    ) {
        match op
            .receive
            .take(message, status, comm.handle, Delivery::Soon)
        {
            Taken::Done(status, err) => {
                op.finish(status, err);
                rt.add_pending(comm, -1);
            }
            Taken::Moving(request) => {
                op.set_state(RecvState::Receiving(request));
                self.receiving.push(op);
            }
        }
    }

    fn finish_received(&mut self, comm: &'static Comm, rt: &Runtime) {
        let mut finished = finish_tested(&mut self.receiving);
        if !self.handed.is_empty() {
            // A receive MPI matched may fail (truncated); MPI would raise that through the
            // communicator or world now, but it is the error of the user's call that completes
            // the receive, raised there.
            let _quiet = if comm.is_freed() {
                mpi::Quiet::new(&[abi().comm_world])
            } else {
                mpi::Quiet::new(&[comm.handle, abi().comm_world])
            };
            finished += finish_tested(&mut self.handed);
        }
        if finished > 0 {
            rt.add_pending(comm, -(finished as isize));
        }
    }

    /// Hands every waiting receive to MPI, in posting order (see `takeover`, point 2).
    fn hand_over(&mut self, comm: &'static Comm, rt: &Runtime) {
        let mut keys: Vec<usize> = self.posted.iter().map(|(key, _)| key).collect();
        keys.sort_by_key(|&key| self.posted[key].seq);
        for key in keys {
            if !self.posted[key].is_waiting() {
                continue;
            }
            let canceled = self.engine.cancel(key as u64);
            debug_assert!(canceled, "a waiting receive is in the engine");
            let waiter = &mut self.posted[key];
            self.posted_order.remove(waiter.seq);
            let posted =
                waiter
                    .receive
                    .post_to_mpi(waiter.source, waiter.tag, comm.channel(waiter.channel));
            match &mut waiter.waits {
                Waits::Blocking(matched) => {
                    *matched = match posted {
                        Ok(request) => Matched::Request(request),
                        Err(err) => Matched::Failed(err),
                    };
                }
                Waits::Op(_) => {
                    let Waits::Op(op) = self.posted.remove(key).waits else {
                        unreachable!()
                    };
                    match posted {
                        Ok(request) => {
                            op.set_state(RecvState::Receiving(request));
                            self.handed.push(op);
                        }
                        Err(err) => {
                            op.finish(mpi::zeroed_status(), err);
                            rt.add_pending(comm, -1);
                        }
                    }
                }
            }
        }
    }

    /// Under `policy`, before a receive call on a taken-over communicator: gives matching back
    /// to MPI when the rules allow (see `takeover`). True if the communicator is delegated now.
    pub fn maybe_delegate(&mut self, comm: &'static Comm, rt: &Runtime) -> bool {
        let depth = rt.config.takeover_depth;
        let go = match rt.config.takeover {
            Policy::Always => false,
            Policy::Auto => {
                let idle = self.posted.is_empty() && self.arrived.is_empty();
                if idle && self.signals.shallow(depth) {
                    comm.takeover.episode_ended(self.signals.paid(depth));
                    true
                } else {
                    false
                }
            }
            Policy::Flip(n) => comm.takeover.flip_due(n) && self.arrived.is_empty(),
        };
        if !go {
            return false;
        }
        self.hand_over(comm, rt);
        self.rebuild_if_empty(rt.config.engine);
        self.signals.reset();
        comm.takeover.flip_done();
        comm.takeover.set(Mode::Delegated, rt.clock.elapsed_ns());
        true
    }

    /// The communicator's info makes `assertions` now: the engine is built for them as soon
    /// as it holds nothing (at once while MPI matches).
    pub fn assert(&mut self, assertions: Assertions, kind: EngineKind) {
        if assertions != self.params.assertions {
            self.params.assertions = assertions;
            self.rebuild = true;
            self.rebuild_if_empty(kind);
        }
    }

    fn rebuild_if_empty(&mut self, kind: EngineKind) {
        if !self.rebuild || self.engine.queued() != (0, 0) {
            return;
        }
        self.replaced.follow(self.engine.stats());
        self.engine = engine_for(kind, &self.params);
        self.rebuild = false;
    }

    /// Takes matching over from MPI for the communicator.
    pub fn take_over(&mut self, comm: &Comm, rt: &Runtime) {
        self.rebuild_if_empty(rt.config.engine);
        self.signals.reset();
        comm.takeover.set(Mode::Takeover, rt.clock.elapsed_ns());
    }
}

/// Finishes the receives among `ops` whose request MPI completed; how many.
fn finish_tested(ops: &mut Vec<Arc<RecvOp>>) -> usize {
    let before = ops.len();
    ops.retain(|op| {
        let RecvState::Receiving(mut request) = op.state() else {
            return false;
        };
        match mpi::test(&mut request) {
            Some((status, err)) => {
                op.finish(status, err);
                false
            }
            None => true,
        }
    });
    before - ops.len()
}
