//! One communicator as the shim runs it: the protocol's policy and queues
//! (`matchshim_core::protocol`) executed on MPI. This is where a receive-side call learns
//! where it goes ([`Comm::route`]), where messages come out of MPI into the engine (the
//! [`Inbox`] over `MPI_Improbe`), where a match on arrival is received, and where waiting
//! receives go back to MPI.

use super::completion::Completion;
use super::receive::{Buffer, Delivery, Landed, Message, Stage};
use crate::matching::{
    build_engine, Assertions, EngineKind, EngineParams, EngineStats, Envelope, MatchEngine, Pattern,
};
use crate::mpi::{self, abi, Code, MPI_Comm, MPI_Status};
use crate::report::Bursts;
use matchshim_core::clock::{thread_cpu_ns, Clock};
use matchshim_core::protocol::coll::TagLayout;
use matchshim_core::protocol::{
    Call, Entry, GiveBack, Inbox, Key, Loan, Mode, Model, PlainCall, Policy, Posted, Probe, Queues,
    Takeover,
};
use parking_lot::{Mutex, MutexGuard};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

/// What every communicator of the process shares: the settings, the clock, and the count of
/// receives anywhere that need the shim's progress to complete.
pub struct Process {
    pub policy: Policy,
    pub depth: u32,
    pub engine: EngineKind,
    pub params: EngineParams,
    /// `MPI_THREAD_MULTIPLE`: MPI calls may run concurrently.
    pub multiple: bool,
    pub clock: Clock,
    /// MPI's cost of a receive that finds its message at once (see `Takeover::new`).
    pub found_floor: u64,
    /// A private communicator of this rank alone, where no message ever waits: its probes
    /// cost MPI's progress and no search (null if MPI refused it).
    pub empty: MPI_Comm,
    /// Receives anywhere that need the shim's progress to complete.
    pending: AtomicUsize,
    /// Communicators that have had such receives.
    listed: Mutex<Vec<&'static Comm>>,
}

// SAFETY: `empty` is an MPI handle, a plain value; MPI calls on it are allowed concurrently
// by the thread level.
unsafe impl Send for Process {}
// SAFETY: as above.
unsafe impl Sync for Process {}

impl Process {
    pub fn new(
        config: &crate::config::Config,
        multiple: bool,
        clock: Clock,
        (found_floor, empty): (u64, MPI_Comm),
    ) -> Process {
        Process {
            policy: config.takeover,
            depth: config.takeover_depth,
            engine: config.engine,
            params: config.params,
            multiple,
            clock,
            found_floor,
            empty,
            pending: AtomicUsize::new(0),
            listed: Mutex::new(Vec::new()),
        }
    }

    /// A communicator's queues, their depths counted as the MPI underneath searches (Open
    /// MPI's ob1 keeps a list per source). Under `auto` a drain with no receive waiting pulls
    /// at most `2·D` messages: a takeover that does not pay leaves the rest of a long queue
    /// to MPI.
    fn queues(&'static self, params: EngineParams) -> Queues<Message, Arc<Recv>> {
        let mut queues = Queues::new(self.engine, params, engine_for, Some(&self.clock));
        if cfg!(openmpi) {
            queues.model_depths(Model::PerSource);
        }
        if self.policy == Policy::Auto {
            queues.limit_drain_ahead(2 * self.depth as usize);
        }
        queues
    }

    /// How many receives in the process need the shim's progress.
    #[inline]
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// The communicators with receives waiting for progress, but `skip`; a freed one drops out
    /// of the list once MPI finished its receives.
    pub fn with_pending(&self, skip: Option<&'static Comm>, out: &mut Vec<&'static Comm>) {
        let mut listed = self.listed.lock();
        listed.retain(|c| {
            let keep = !c.is_freed() || c.pending.load(Ordering::Acquire) > 0;
            if !keep {
                c.listed.store(false, Ordering::Release);
            }
            keep
        });
        out.extend(
            listed
                .iter()
                .filter(|c| c.pending.load(Ordering::Acquire) > 0)
                .filter(|c| skip.is_none_or(|f| !std::ptr::eq(**c, f)))
                .copied(),
        );
    }
}

/// A second MPI communicator whose messages are drained into the same engine, classified by
/// their tags (the private duplicate that carries collective traffic). Drained only while the
/// shim's collectives run on the communicator ([`Comm::enter_side`]), since its messages wait in
/// MPI until one of them wants them.
pub struct Side {
    pub handle: MPI_Comm,
    tags: TagLayout,
}

impl Side {
    pub fn new(handle: MPI_Comm, tags: TagLayout) -> Side {
        Side { handle, tags }
    }
}

// SAFETY: MPI handles are plain values.
unsafe impl Send for Side {}
// SAFETY: as above.
unsafe impl Sync for Side {}

/// Which MPI communicator a receive travels on.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The user's.
    Main,
    Side,
}

/// Who receives the bytes of a message matched to a waiting receive.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum ReceivedBy {
    /// The receive's caller, which polls for its match (`MPI_Recv`, a collective's receive).
    Caller,
    /// Progress, at once (`MPI_Irecv`, a start of a persistent receive): counted among the
    /// receives that need progress until it completes.
    Progress,
}

/// A receive the shim queued, for its whole life.
pub struct Recv {
    pub comm: &'static Comm,
    pub buffer: Buffer,
    /// The user's source and tag, as MPI values.
    pub source: c_int,
    pub tag: c_int,
    pub channel: Channel,
    pub received_by: ReceivedBy,
    stage: Mutex<Stage>,
    pub done: Completion,
}

impl Recv {
    pub fn new(
        comm: &'static Comm,
        buffer: Buffer,
        (source, tag): (c_int, c_int),
        channel: Channel,
        received_by: ReceivedBy,
        stage: Stage,
    ) -> Arc<Recv> {
        Arc::new(Recv {
            comm,
            buffer,
            source,
            tag,
            channel,
            received_by,
            stage: Mutex::new(stage),
            done: Completion::default(),
        })
    }

    pub fn stage(&self) -> Stage {
        *self.stage.lock()
    }

    pub fn set_stage(&self, stage: Stage) {
        *self.stage.lock() = stage;
    }

    /// Records the outcome; the receive is done.
    pub fn finish(&self, status: MPI_Status, err: Code) {
        self.set_stage(Stage::Done);
        self.done.finish(status, err);
    }
}

/// What the communicator's lock guards: the protocol's queues and the receives progress
/// completes whose request MPI holds (stage `InMpi`): messages the shim matched
/// (`receiving`), and receives handed to MPI to match (`handed`).
pub struct Locked {
    queues: Queues<Message, Arc<Recv>>,
    receiving: Vec<Arc<Recv>>,
    handed: Vec<Arc<Recv>>,
    /// Receives handed to MPI for a blocking call it runs: they come back after the call
    /// unless MPI matched them ([`Comm::take_back`]).
    lent: Loan<Arc<Recv>>,
}

pub struct Comm {
    /// Never reused, unlike MPI's handles.
    pub id: u64,
    pub handle: MPI_Comm,
    /// Valid source ranks are `0..size` (the remote group of an inter-communicator).
    pub size: c_int,
    pub rank: c_int,
    pub inter: bool,
    pub takeover: Takeover,
    locked: Mutex<Locked>,
    /// Receives of this communicator that need the shim's progress to complete.
    pending: AtomicUsize,
    listed: AtomicBool,
    pub side: OnceLock<Side>,
    /// The shim's collectives running on it: they use the side, which is drained meanwhile.
    /// Counted on the communicator, since one may begin before its side exists (made with a
    /// nonblocking duplicate) and use it once made.
    side_users: AtomicUsize,
    /// Its info makes an MPI-4 matching assertion (`mpi_assert_*`), the same on every rank.
    asserts: AtomicBool,
    /// The user is freeing it: its waiting receives went to MPI, which matches for it.
    released: AtomicBool,
    /// MPI freed it: its handle is gone.
    freed: AtomicBool,
    pub process: &'static Process,
}

// SAFETY: MPI handles are plain values; MPI calls on them are serialised by `locked` or
// allowed concurrently by the thread level.
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

/// The engine of `kind` for a communicator with `params`, recording its calls under
/// `MATCHSHIM_TRACE`.
fn engine_for(kind: EngineKind, params: &EngineParams) -> Box<dyn MatchEngine> {
    matchshim_core::trace::recorded(build_engine(kind, params), params)
}

/// Probes of each kind, after one each to fill the caches, that confirm a takeover the timed
/// calls asked for ([`Comm::searches_deep`]).
const CONFIRMING_PROBES: usize = 3;

/// Who routes a receive: the user's calls move the takeover policy, a collective schedule's
/// receives follow the mode as it is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Caller {
    User,
    Schedule,
}

/// Where a receive-side call goes.
pub enum Route<'a> {
    /// To MPI; `timed`: its time inside MPI is a sample for the takeover policy. While the
    /// permit is held the communicator cannot be taken over (at `MPI_THREAD_MULTIPLE`).
    Mpi { timed: bool, permit: Permit<'a> },
    /// Through the shim's queues, held locked.
    Shim(Shim<'a>),
}

/// A receive on its way into MPI (see [`Takeover::enter_mpi`]).
pub struct Permit<'a> {
    comm: &'a Comm,
    /// Held while the call is on its way into MPI.
    _entry: Entry<'a>,
}

impl Permit<'_> {
    /// Runs `call` (a receive or probe of `(source, tag)` going to MPI under this permit),
    /// timed when `timed`: a sample for the takeover policy, which takes over when the samples
    /// say MPI searched deep and a warm search confirms it. `found` tells from the result
    /// whether MPI found the message at once.
    #[inline]
    pub fn run<T>(
        self,
        timed: bool,
        (source, tag): (c_int, c_int),
        call: impl FnOnce() -> Result<T, Code>,
        found: impl FnOnce(&T) -> bool,
    ) -> Result<T, Code> {
        if timed {
            self.timed((source, tag), call, found)
        } else {
            call()
        }
    }

    #[inline(never)]
    fn timed<T>(
        self,
        (source, tag): (c_int, c_int),
        call: impl FnOnce() -> Result<T, Code>,
        found: impl FnOnce(&T) -> bool,
    ) -> Result<T, Code> {
        let comm = self.comm;
        let clock = &comm.process.clock;
        let start = clock.ticks();
        let result = call();
        let ticks = clock.ticks() - start;
        // The call is in MPI now; the switch to takeover waits for every permit, this one too.
        drop(self);
        if let Ok(value) = &result {
            if comm
                .takeover
                .timed(ticks, clock.ticks_per_ns(), || found(value))
                && comm.searches_deep(source, tag)
            {
                comm.take_over(&mut comm.locked.lock());
            }
        }
        result
    }
}

/// When a posting asks MPI for the messages it holds.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Around the posting, as `Queues::post_drained` does (a user's receive).
    Around,
    /// Not: the caller drained already (a schedule, once per round).
    Done,
}

/// The communicator's queues, held locked: the calls that go through the shim.
pub struct Shim<'a> {
    comm: &'static Comm,
    locked: MutexGuard<'a, Locked>,
}

/// The messages MPI holds for a communicator, out through wildcard matched probes: the user's
/// communicator (unless MPI freed it), then the private duplicate while it has users.
struct MpiInbox<'a> {
    comm: &'static Comm,
    receiving: &'a mut Vec<Arc<Recv>>,
    channel: Channel,
}

impl Inbox<Message, Arc<Recv>> for MpiInbox<'_> {
    fn next(&mut self) -> Option<(Envelope, Message)> {
        loop {
            let handle = match self.channel {
                Channel::Main if self.comm.is_freed() => None,
                Channel::Main => Some(self.comm.handle),
                Channel::Side => self
                    .comm
                    .side
                    .get()
                    .filter(|_| self.comm.side_users.load(Ordering::Acquire) > 0)
                    .map(|s| s.handle),
            };
            if let Some((handle, status)) = handle.and_then(mpi::improbe_any) {
                let class = match self.channel {
                    Channel::Main => crate::matching::Class::PointToPoint,
                    Channel::Side => self
                        .comm
                        .side
                        .get()
                        .expect("drained")
                        .tags
                        .class_of(status.MPI_TAG),
                };
                let env = Envelope {
                    source: status.MPI_SOURCE,
                    tag: status.MPI_TAG,
                    class,
                };
                return Some((env, Message { handle, status }));
            }
            match self.channel {
                Channel::Main => self.channel = Channel::Side,
                Channel::Side => return None,
            }
        }
    }

    fn matched(&mut self, recv: Arc<Recv>, message: Message) {
        match recv.received_by {
            ReceivedBy::Caller => recv.set_stage(Stage::Matched(message)),
            ReceivedBy::Progress => self.comm.land_now(recv, message, self.receiving),
        }
    }
}

impl Locked {
    fn inbox(&mut self, comm: &'static Comm) -> (&mut Queues<Message, Arc<Recv>>, MpiInbox<'_>) {
        let Locked {
            queues, receiving, ..
        } = self;
        let inbox = MpiInbox {
            comm,
            receiving,
            channel: Channel::Main,
        };
        (queues, inbox)
    }

    /// Pulls every message MPI holds for `comm` into the engine, while taken over.
    fn drain(&mut self, comm: &'static Comm) {
        if comm.takeover.mode() != Mode::Takeover {
            return;
        }
        let (queues, mut inbox) = self.inbox(comm);
        queues.drain(&mut inbox);
    }
}

impl Shim<'_> {
    /// Pulls every message MPI holds for the communicator into the engine.
    pub fn drain(&mut self) {
        self.locked.drain(self.comm);
    }

    /// Posts a receive that `make` builds of its key if it must wait, MPI asked for what it
    /// holds as `drain` says.
    pub fn post(
        &mut self,
        want: Pattern,
        drain: Drain,
        make: impl FnOnce(Key) -> Arc<Recv>,
    ) -> Posted<Message> {
        let comm = self.comm;
        let mut progress = false;
        let make = |key| {
            let recv = make(key);
            progress = recv.received_by == ReceivedBy::Progress;
            recv
        };
        let (queues, mut inbox) = self.locked.inbox(comm);
        let posted = match drain {
            Drain::Around => queues.post_drained(&mut inbox, want, make),
            Drain::Done => queues.post(want, make),
        };
        if progress {
            comm.add_pending(1);
        }
        posted
    }

    /// The earliest matching unexpected message, after a drain of everything MPI holds (while
    /// taken over); [`Probe::Remove`] removes it.
    pub fn probe(&mut self, want: Pattern, probe: Probe) -> Option<Message> {
        if self.comm.takeover.mode() == Mode::Takeover {
            let (queues, mut inbox) = self.locked.inbox(self.comm);
            queues.drain_all(&mut inbox);
        }
        self.locked.queues.probe(want, probe)
    }

    /// Receives `message`, found for `recv` (a start of a persistent receive) as it was
    /// posted.
    pub fn land_now(&mut self, recv: Arc<Recv>, message: Message) {
        self.comm.add_pending(1);
        self.comm
            .land_now(recv, message, &mut self.locked.receiving);
    }
}

impl Comm {
    pub fn new(
        id: u64,
        handle: MPI_Comm,
        (size, rank, inter): (c_int, c_int, bool),
        assertions: Assertions,
        process: &'static Process,
        now_ns: u64,
    ) -> Comm {
        let params = EngineParams {
            comm_size: size.max(0) as usize,
            assertions,
            ..process.params
        };
        Comm {
            id,
            handle,
            size,
            rank,
            inter,
            takeover: Takeover::new(
                process.policy,
                process.depth,
                (now_ns, process.found_floor),
                process.multiple,
            ),
            locked: Mutex::new(Locked {
                queues: process.queues(params),
                receiving: Vec::new(),
                handed: Vec::new(),
                lent: Loan::default(),
            }),
            pending: AtomicUsize::new(0),
            listed: AtomicBool::new(false),
            side: OnceLock::new(),
            side_users: AtomicUsize::new(0),
            asserts: AtomicBool::new(assertions != Assertions::default()),
            released: AtomicBool::new(false),
            freed: AtomicBool::new(false),
            process,
        }
    }

    fn now_ns(&self) -> u64 {
        self.process.clock.elapsed_ns()
    }

    pub fn is_freed(&self) -> bool {
        self.freed.load(Ordering::Acquire)
    }

    fn channel(&self, channel: Channel) -> MPI_Comm {
        match channel {
            Channel::Main => self.handle,
            Channel::Side => self.side.get().map_or(abi().comm_null, |s| s.handle),
        }
    }

    fn add_pending(&'static self, delta: isize) {
        let process = self.process;
        if delta > 0 {
            process.pending.fetch_add(delta as usize, Ordering::AcqRel);
            self.pending.fetch_add(delta as usize, Ordering::AcqRel);
            if !self.listed.swap(true, Ordering::AcqRel) {
                process.listed.lock().push(self);
            }
        } else {
            process
                .pending
                .fetch_sub((-delta) as usize, Ordering::AcqRel);
            self.pending.fetch_sub((-delta) as usize, Ordering::AcqRel);
        }
        if !process.multiple {
            let pending = process.pending.load(Ordering::Relaxed) > 0;
            // SAFETY: below MPI_THREAD_MULTIPLE.
            unsafe { super::thread::close_serial(super::thread::gate::PENDING, pending) };
        }
    }

    /// Receives of this communicator waiting for progress.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Decides where a receive-side call goes, switching modes as the policy says when the
    /// `User` calls.
    #[inline]
    pub fn route(&'static self, caller: Caller, want: Pattern) -> Route<'static> {
        loop {
            if self.takeover.mode() == Mode::Delegated {
                let call = self.delegated_call(caller);
                if call == Call::TakeOver {
                    let mut locked = self.locked.lock();
                    if self.take_over(&mut locked) {
                        return Route::Shim(Shim { comm: self, locked });
                    }
                }
                let Some(entry) = self.takeover.enter_mpi() else {
                    continue;
                };
                return Route::Mpi {
                    timed: call == Call::DelegateTimed,
                    permit: Permit {
                        comm: self,
                        _entry: entry,
                    },
                };
            }
            let mut locked = self.locked.lock();
            match self.takeover.mode() {
                // Given back to MPI meanwhile.
                Mode::Delegated => continue,
                Mode::Held => {
                    if let Some(route) = self.held_route(locked, caller, want) {
                        return route;
                    }
                }
                Mode::Takeover => {
                    if caller == Caller::Schedule || !self.give_back_if_due(&mut locked) {
                        return Route::Shim(Shim { comm: self, locked });
                    }
                }
            }
        }
    }

    /// Where a call that MPI would match goes: the user's calls move the takeover policy, a
    /// schedule's go to MPI.
    #[inline]
    fn delegated_call(&self, caller: Caller) -> Call {
        match caller {
            Caller::User => self.takeover.delegated_call(self.process.policy),
            Caller::Schedule => Call::Delegate,
        }
    }

    /// Where a call goes on a held communicator (see `matchshim_core::protocol`, point 4):
    /// through the shim when a held message fits it, else to MPI as if delegated (a takeover
    /// included); `None` once nothing is held and MPI matches alone.
    fn held_route(
        &'static self,
        mut locked: MutexGuard<'static, Locked>,
        caller: Caller,
        want: Pattern,
    ) -> Option<Route<'static>> {
        if locked.queues.queued().1 == 0 {
            self.takeover.switch(Mode::Delegated, self.now_ns());
            return None;
        }
        if locked.queues.holds(want) {
            return Some(Route::Shim(Shim { comm: self, locked }));
        }
        let call = self.delegated_call(caller);
        if call == Call::TakeOver && self.take_over(&mut locked) {
            return Some(Route::Shim(Shim { comm: self, locked }));
        }
        Some(Route::Mpi {
            timed: call == Call::DelegateTimed,
            permit: Permit {
                comm: self,
                _entry: self.takeover.enter_mpi_held(),
            },
        })
    }

    /// A call on a delegated communicator that goes to MPI as the user made it, at
    /// `MPI_THREAD_MULTIPLE` on the thread of `slot`: the permit it holds in MPI (see
    /// [`Takeover::plain_delegation`]).
    #[inline]
    pub fn plain_permit(&'static self, call: PlainCall, slot: usize) -> Option<Permit<'static>> {
        debug_assert!(self.process.multiple);
        let entry = self.takeover.plain_delegation(call, slot)?;
        Some(Permit {
            comm: self,
            _entry: entry,
        })
    }

    /// A collective of the shim's begins on this communicator: its side is drained until
    /// [`Comm::leave_side`].
    pub fn enter_side(&self) {
        self.side_users.fetch_add(1, Ordering::AcqRel);
    }

    pub fn leave_side(&self) {
        self.side_users.fetch_sub(1, Ordering::AcqRel);
    }

    /// Whether MPI's search for `(source, tag)` on this communicator is deep now, as timed
    /// calls said ([`Takeover::confirmed`]): after a probe of each to fill the caches, probes
    /// of that pattern alternate with probes of the empty communicator, and the quickest of
    /// the first must outlast the middle one of the second. A probe that finds nothing runs
    /// MPI's progress, which may yield the core (Open MPI on an oversubscribed node), lose it
    /// to a busy process, or take in messages arriving (over TCP): the probes are timed in
    /// the thread's CPU time, which stops while another runs, and one empty probe quicker or
    /// slower than the others does not decide.
    fn searches_deep(&self, source: c_int, tag: c_int) -> bool {
        let empty = self.process.empty;
        if empty == abi().comm_null {
            return true;
        }
        let any = (abi().any_source, abi().any_tag);
        let probe = |(source, tag): (c_int, c_int), comm: MPI_Comm| {
            let start = thread_cpu_ns();
            // A probe moves nothing; one that fails leaves the time it took.
            let _ = mpi::iprobe(source, tag, comm);
            thread_cpu_ns().saturating_sub(start)
        };
        probe(any, empty);
        probe((source, tag), self.handle);
        let mut floors = [0; CONFIRMING_PROBES];
        let mut searched = u64::MAX;
        for floor in &mut floors {
            *floor = probe(any, empty);
            searched = searched.min(probe((source, tag), self.handle));
        }
        floors.sort_unstable();
        // Nanoseconds: one tick a nanosecond.
        self.takeover
            .confirmed(floors[CONFIRMING_PROBES / 2], searched, 1.0)
    }

    /// Takes matching over from MPI; false where a blocking receive of the user's is inside
    /// MPI on this communicator ([`Takeover::switch`]): MPI matches on.
    fn take_over(&self, locked: &mut Locked) -> bool {
        if !self.takeover.switch(Mode::Takeover, self.now_ns()) {
            return false;
        }
        locked.queues.take_over();
        true
    }

    /// Before a user's receive call on a taken-over communicator: gives matching back to MPI,
    /// whole or held, when the policy says so. True if the mode changed.
    fn give_back_if_due(&'static self, locked: &mut Locked) -> bool {
        let due = self.takeover.give_back_due(
            self.process.policy,
            locked.queues.queued(),
            locked.queues.signals(),
        );
        if due != GiveBack::Stay {
            self.give_back(locked, false);
        }
        due != GiveBack::Stay
    }

    /// Hands every waiting receive to MPI, in posting order (`lending` them for a blocking
    /// call, as [`Queues::lend`]), then lets MPI match: alone when the shim holds no
    /// unexpected message (see `matchshim_core::protocol`, point 2), else beside the messages
    /// it holds (point 4). The receives MPI took, in posting order.
    fn give_back(&'static self, locked: &mut Locked, lending: bool) -> Loan<Arc<Recv>> {
        let handed = self.hand_receives_to_mpi(locked, lending);
        let mode = if locked.queues.queued().1 == 0 {
            Mode::Delegated
        } else {
            Mode::Held
        };
        self.takeover.switch(mode, self.now_ns());
        handed
    }

    /// Before a blocking call that MPI runs: gives matching back (see
    /// `matchshim_core::protocol`, point 3). With `lend`, the receives handed over are lent,
    /// to come back with [`Comm::take_back`] after the call, if all are the user's nonblocking
    /// receives on the communicator itself; true if they are.
    pub fn hand_back(&'static self, lend: bool) -> bool {
        let mut locked = self.locked.lock();
        if self.takeover.mode() != Mode::Takeover {
            return false;
        }
        let lendable =
            |r: &Arc<Recv>| r.received_by == ReceivedBy::Progress && r.channel == Channel::Main;
        let lending = lend && locked.queues.waiting().all(lendable);
        if !lending {
            let waiting = locked.queues.queued().0;
            self.takeover.handed_over(locked.queues.signals(), waiting);
        }
        let handed = self.give_back(&mut locked, lending);
        if lending && !handed.receives.is_empty() {
            locked.lent = handed;
            return true;
        }
        false
    }

    /// After the blocking call MPI ran: the receives lent to it come back to the shim's queues
    /// in posting order and the shim matches again (see `matchshim_core::protocol`, point 6).
    /// They are cancelled in MPI youngest first, so those MPI still holds are always the
    /// oldest and a message it matches meanwhile goes where one ordered list sends it, or
    /// oldest first where no message fits two of them ([`Loan::any_order`]); one MPI matched
    /// completes as MPI received it. Where cancelling costs MPI a search of its queue
    /// ([`Takeover::taking_back_pays`]) the rest stay with MPI, handed to it. Where MPI
    /// matched most of the loan ([`Takeover::takes_over_after_loan`]) those taken back go
    /// back to MPI, which matches from then on.
    pub fn take_back(&'static self) {
        let mut locked = self.locked.lock();
        let Loan {
            receives: mut lent,
            any_order,
        } = std::mem::take(&mut locked.lent);
        if lent.is_empty() || self.is_freed() {
            return;
        }
        if !any_order {
            lent.reverse();
        }
        // A receive MPI matched may fail (truncated): its error is the user's completion's.
        let _quiet = mpi::Quiet::new(&[self.handle, abi().comm_world]);
        let clock = &self.process.clock;
        let mut back = Vec::with_capacity(lent.len());
        let mut left_mpi = rustc_hash::FxHashSet::default();
        let mut matched_by_mpi = 0;
        for recv in &lent {
            let Stage::InMpi(mut request) = recv.stage() else {
                continue;
            };
            let start = clock.ticks();
            mpi::cancel(&mut request);
            let (status, err) = mpi::wait(&mut request);
            left_mpi.insert(Arc::as_ptr(recv));
            if mpi::cancelled(&status) {
                back.push(recv.clone());
            } else {
                recv.finish(status, err);
                self.add_pending(-1);
                matched_by_mpi += 1;
            }
            let ticks = clock.ticks().saturating_sub(start);
            if !self.takeover.taking_back_pays(ticks, clock.ticks_per_ns()) {
                break;
            }
        }
        // The lent receives that left MPI, matched or taken back; the others stay handed.
        locked
            .handed
            .retain(|recv| !left_mpi.contains(&Arc::as_ptr(recv)));
        let taken_back = back.len();
        if !any_order {
            back.reverse();
        }
        for recv in back {
            let want = super::p2p::user_pattern(recv.source, recv.tag);
            let queued = recv.clone();
            let posted = locked.queues.post(want, |key| {
                queued.set_stage(Stage::Queued(key));
                queued
            });
            if let Posted::Found(message) = posted {
                let Locked { receiving, .. } = &mut *locked;
                self.land_now(recv, message, receiving);
            }
        }
        let again = self
            .takeover
            .takes_over_after_loan(matched_by_mpi, taken_back);
        if !(again && self.takeover.switch(Mode::Takeover, self.now_ns())) {
            // Those taken back go to MPI for good, after any it still holds (point 2, or 4
            // where messages are held).
            self.give_back(&mut locked, false);
        }
    }

    fn hand_receives_to_mpi(&'static self, locked: &mut Locked, lending: bool) -> Loan<Arc<Recv>> {
        let loan = locked.queues.hand_over(lending);
        if !lending {
            // Lent receives that come back are the shim's again; these are MPI's for good.
            self.takeover.handed_to_mpi(loan.receives.len());
        }
        let mut handed = Vec::new();
        for recv in loan.receives {
            let posted = recv
                .buffer
                .post_to_mpi(recv.source, recv.tag, self.channel(recv.channel));
            match (posted, recv.received_by) {
                (Ok(request), ReceivedBy::Caller) => {
                    recv.set_stage(Stage::InMpi(request));
                    handed.push(recv);
                }
                (Ok(request), ReceivedBy::Progress) => {
                    recv.set_stage(Stage::InMpi(request));
                    locked.handed.push(recv.clone());
                    handed.push(recv);
                }
                (Err(err), received_by) => {
                    recv.finish(mpi::zeroed_status(), err);
                    if received_by == ReceivedBy::Progress {
                        self.add_pending(-1);
                    }
                }
            }
        }
        Loan {
            receives: handed,
            any_order: loan.any_order,
        }
    }

    /// Receives a message matched to a receive that progress completes.
    fn land_now(&'static self, recv: Arc<Recv>, message: Message, receiving: &mut Vec<Arc<Recv>>) {
        match recv.buffer.land(message, self.handle, Delivery::Soon) {
            Landed::Done(status, err) => {
                recv.finish(status, err);
                self.add_pending(-1);
            }
            Landed::Moving(request) => {
                recv.set_stage(Stage::InMpi(request));
                receiving.push(recv);
            }
        }
    }

    /// Pulls arrivals out of MPI into the engine (while taken over) and finishes receives
    /// whose data landed. Skips the work when another thread is already doing it.
    pub fn progress(&'static self) {
        let Some(mut locked) = self.locked.try_lock() else {
            return;
        };
        locked.drain(self);
        let mut finished = finish_tested(&mut locked.receiving);
        if !locked.handed.is_empty() {
            // A receive MPI matched may fail (truncated); MPI would raise that through the
            // communicator or world now, but it is the error of the user's call that completes
            // the receive, raised there.
            let _quiet = if self.is_freed() {
                mpi::Quiet::new(&[abi().comm_world])
            } else {
                mpi::Quiet::new(&[self.handle, abi().comm_world])
            };
            finished += finish_tested(&mut locked.handed);
        }
        if finished > 0 {
            self.add_pending(-(finished as isize));
        }
    }

    /// Cancels a receive of the shim's that has not matched yet (it completes as cancelled);
    /// one MPI holds is cancelled by MPI.
    pub fn cancel(&'static self, recv: &Recv) {
        let mut locked = self.locked.lock();
        let queued = matches!(recv.stage(), Stage::Queued(_));
        if queued {
            // Messages that reached MPI before the cancel match first, as they would have on
            // arrival had MPI held the receive (then it is not cancelled).
            locked.drain(self);
        }
        match recv.stage() {
            Stage::Queued(key) => {
                if locked.queues.cancel(key).is_some() {
                    if recv.received_by == ReceivedBy::Progress {
                        self.add_pending(-1);
                    }
                    drop(locked);
                    recv.finish(mpi::cancelled_status(), abi().success);
                }
            }
            Stage::InMpi(mut request) if !queued => {
                mpi::cancel(&mut request);
            }
            Stage::InMpi(_) | Stage::Matched(_) | Stage::Done => {}
        }
    }

    /// The user frees the communicator (before MPI does): its waiting receives go to MPI,
    /// which completes them even after the handle is gone, and MPI matches for it from now on.
    /// Messages the shim holds that no receive wants stay unreceived, as they would in MPI.
    pub fn release(&'static self) {
        let mut locked = self.locked.lock();
        locked.drain(self);
        self.hand_receives_to_mpi(&mut locked, false);
        self.takeover.switch(Mode::Delegated, self.now_ns());
        self.released.store(true, Ordering::Release);
    }

    /// MPI freed the communicator. Unless the user released it first, it went from inside a
    /// callback the shim runs: its waiting receives can no longer be handed to MPI, so they
    /// fail instead of waiting forever.
    pub fn forget(&'static self) {
        if !self.released.load(Ordering::Acquire) {
            let mut locked = self.locked.lock();
            for recv in locked.queues.abandon() {
                recv.finish(mpi::zeroed_status(), abi().err_comm);
                if recv.received_by == ReceivedBy::Progress {
                    self.add_pending(-1);
                }
            }
        }
        self.freed.store(true, Ordering::Release);
    }

    /// MPI freed the communicator: what the report keeps of it, and what its engine and
    /// queues hold given back (the communicator itself stays for the run, for the receives MPI
    /// still completes for it). `None`, with nothing given back, while its lock is held: MPI
    /// frees a communicator inside the call that completes its last request, which the shim's
    /// progress may make under that lock, on this thread.
    pub fn try_retire(&self) -> Option<Tally> {
        let mut locked = self.locked.try_lock()?;
        let tally = locked.tally();
        locked.queues.clear();
        Some(tally)
    }

    /// The communicator's info makes `assertions` now: its engine follows them.
    pub fn assert(&self, assertions: Assertions) {
        self.asserts
            .store(assertions != Assertions::default(), Ordering::Release);
        self.locked.lock().queues.assert(assertions);
    }

    /// The MPI-4 assertions its engine follows.
    pub fn assertions(&self) -> Assertions {
        self.locked.lock().queues.assertions()
    }

    /// Its info makes an MPI-4 matching assertion.
    pub fn asserts(&self) -> bool {
        self.asserts.load(Ordering::Acquire)
    }

    /// Engine counters, ticks spent matching, (posted, unexpected) queued now, and the
    /// assertions the engine follows.
    pub fn stats(&self) -> (EngineStats, [u64; 2], (usize, usize), Assertions) {
        self.locked.lock().queues.stats()
    }

    /// What the report keeps of it.
    pub fn tally(&self) -> Tally {
        self.locked.lock().tally()
    }
}

/// What the report keeps of a communicator's engine.
pub struct Tally {
    pub stats: EngineStats,
    pub match_ticks: [u64; 2],
    /// (posted, unexpected) queued in the engine.
    pub left: (usize, usize),
    pub assertions: Assertions,
    pub bursts: Bursts,
}

impl Locked {
    fn tally(&self) -> Tally {
        let (stats, match_ticks, left, assertions) = self.queues.stats();
        Tally {
            stats,
            match_ticks,
            left,
            assertions,
            bursts: self.queues.bursts(),
        }
    }
}

/// Finishes the receives among `recvs` whose request MPI completed; how many.
fn finish_tested(recvs: &mut Vec<Arc<Recv>>) -> usize {
    let before = recvs.len();
    recvs.retain(|recv| {
        let Stage::InMpi(mut request) = recv.stage() else {
            return false;
        };
        match mpi::test(&mut request) {
            Some((status, err)) => {
                recv.finish(status, err);
                false
            }
            None => true,
        }
    });
    before - recvs.len()
}
