//! A discrete-event simulation of MPI programs running on the shim, every rank with the shim's
//! own protocol (`crate::protocol`) taken over: threads of ranks post receives, send, wait,
//! compute and call collectives (as the shim's schedules lay them out); messages reach the
//! receiving rank's MPI after a latency and enter its queues when the rank drains MPI (the
//! protocol's `Inbox`; point-to-point traffic whenever the rank is in MPI, collective traffic
//! only while one of its collectives runs). Threads share a machine's cores: on fewer cores
//! than threads a thread runs for a quantum or until it waits, polls a while, and then gives its
//! core away, as the shim's ranks do on an oversubscribed node.
//!
//! The engine under the protocol has one queue per (source, tag, traffic type): the generated
//! programs use no wildcards, so the earliest posted receive or arrived message with the same
//! key is exactly the match of one ordered list, and the traces carry the answers every engine
//! must give.

use super::Rng;
use crate::matching::{
    Class, EngineKind, EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId,
};
use crate::protocol::coll::{Form, Part, Shape, TagLayout};
use crate::protocol::{Inbox, Posted as Queued, Queues};
use crate::trace::{Event, Header, Recording, Trace};
use rustc_hash::FxHashMap as IntMap;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex};

/// What the simulated machine costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Cores the threads share; 0: one per thread.
    pub cores: usize,
    /// Time a thread runs before a ready one takes its core.
    pub quantum_ns: f64,
    /// Time a waiting thread polls before it gives its core away.
    pub spin_ns: f64,
    /// Cost of posting a receive, of starting a send, and of pulling one message out of MPI
    /// into the engine.
    pub post_ns: f64,
    pub send_ns: f64,
    pub drain_ns: f64,
    /// From a send to the message being in the receiver's MPI: latency plus bytes over
    /// bandwidth.
    pub latency_ns: f64,
    pub ns_per_byte: f64,
    /// Every cost is drawn uniformly within ± this fraction of its value.
    pub jitter: f64,
}

/// One thing a thread of a program does.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// A point-to-point receive (nonblocking).
    Post {
        src: i32,
        tag: i32,
    },
    /// A point-to-point send (nonblocking; sends never wait for their receiver).
    Send {
        dst: i32,
        tag: i32,
        bytes: u32,
    },
    /// Waits until every receive this thread posted has its message.
    WaitAll,
    Compute {
        ns: f64,
    },
    /// A blocking collective; `seq` numbers the blocking calls on the communicator.
    Collective {
        call: Shape,
        seq: u32,
    },
    /// Every thread of the rank meets here (a pthread barrier: waiting threads sleep).
    ThreadBarrier,
}

/// The steps of one thread, made as the simulation asks for them.
pub trait Script {
    fn next(&mut self) -> Option<Step>;
}

#[derive(Clone, Copy, Debug)]
struct Msg {
    avail: f64,
    order: u64,
    src: i32,
    tag: i32,
    class: Class,
}

impl PartialEq for Msg {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Msg {}
impl PartialOrd for Msg {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
/// Reversed, so that a `BinaryHeap` gives the earliest message first.
impl Ord for Msg {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .avail
            .total_cmp(&self.avail)
            .then(other.order.cmp(&self.order))
    }
}

/// Source, tag and traffic type in one word.
type Key = u64;

/// A queue of one key: almost always a single element, which needs no allocation.
enum Queue<T> {
    One(T),
    Many(VecDeque<T>),
}

/// Appends `item` to the queue of `k`.
fn push<T>(map: &mut IntMap<Key, Queue<T>>, k: Key, item: T) {
    match map.get_mut(&k) {
        None => {
            map.insert(k, Queue::One(item));
        }
        Some(Queue::Many(q)) => q.push_back(item),
        Some(one) => {
            let Queue::One(first) = std::mem::replace(one, Queue::Many(VecDeque::new())) else {
                unreachable!("matched above")
            };
            *one = Queue::Many(VecDeque::from([first, item]));
        }
    }
}

/// Takes the front of the queue of `k`, if any.
fn pop<T>(map: &mut IntMap<Key, Queue<T>>, k: Key) -> Option<T> {
    match map.get_mut(&k)? {
        Queue::Many(q) if q.len() > 1 => q.pop_front(),
        _ => match map.remove(&k)? {
            Queue::One(item) => Some(item),
            Queue::Many(mut q) => q.pop_front(),
        },
    }
}

/// A posted receive: the thread that waits for it, and whether a collective round (rather
/// than the program) waits.
#[derive(Clone, Copy)]
struct Posted {
    thread: u32,
    round: bool,
}

/// Exact-key matching under the protocol: the programs post no wildcards.
#[derive(Default)]
struct Keyed {
    posted: IntMap<Key, Queue<RecvId>>,
    unexpected: IntMap<Key, Queue<MsgId>>,
    queued: (usize, usize),
    stats: EngineStats,
}

/// Source, tag and traffic type packed, then mixed (splitmix64's bijective finalizer): the
/// maps' multiplicative hash spreads only low bits, and the keys of one collective call differ
/// only in their high (source) bits.
fn key(src: i32, tag: i32, class: Class) -> Key {
    let mut z =
        (class.is_collective() as u64) << 63 | (src as u32 as u64) << 32 | tag as u32 as u64;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl MatchEngine for Keyed {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        let k = key(want.source, want.tag, want.class);
        let found = pop(&mut self.unexpected, k);
        match found {
            Some(_) => self.queued.1 -= 1,
            None => {
                push(&mut self.posted, k, recv);
                self.queued.0 += 1;
            }
        }
        found
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let k = key(env.source, env.tag, env.class);
        let found = pop(&mut self.posted, k);
        match found {
            Some(_) => self.queued.0 -= 1,
            None => {
                push(&mut self.unexpected, k, msg);
                self.queued.1 += 1;
            }
        }
        found
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        let k = key(want.source, want.tag, want.class);
        if remove {
            let found = pop(&mut self.unexpected, k);
            self.queued.1 -= found.is_some() as usize;
            return found;
        }
        match self.unexpected.get(&k)? {
            Queue::One(msg) => Some(*msg),
            Queue::Many(q) => q.front().copied(),
        }
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.posted.iter_mut().find_map(|(&k, q)| match q {
            Queue::One(r) if *r == recv => Some((k, true)),
            Queue::Many(v) => v.iter().position(|&r| r == recv).map(|i| {
                v.remove(i);
                (k, v.is_empty())
            }),
            Queue::One(_) => None,
        });
        let Some((k, emptied)) = found else {
            return false;
        };
        if emptied {
            self.posted.remove(&k);
        }
        self.queued.0 -= 1;
        true
    }

    fn queued(&self) -> (usize, usize) {
        self.queued
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

fn keyed(_kind: EngineKind, _params: &EngineParams) -> Box<dyn MatchEngine> {
    Box::new(Keyed::default())
}

/// A rank's MPI: the messages in it, not yet drained (point-to-point, collective).
#[derive(Default)]
struct InMpi {
    p2p: BinaryHeap<Msg>,
    coll: BinaryHeap<Msg>,
    /// Threads of this rank inside a collective (its traffic is drained only then).
    colls_running: u32,
}

impl InMpi {
    /// The earliest drainable message, if it is in MPI by `t`: collective or not.
    fn next_ready(&self, t: f64) -> Option<bool> {
        let p = self.p2p.peek().filter(|m| m.avail <= t);
        let c = self
            .coll
            .peek()
            .filter(|m| self.colls_running > 0 && m.avail <= t);
        match (p, c) {
            (Some(p), Some(c)) => Some(c > p),
            (Some(_), None) => Some(false),
            (None, Some(_)) => Some(true),
            (None, None) => None,
        }
    }

    /// When the next drainable message is in MPI.
    fn next_avail(&self) -> Option<f64> {
        let p = self.p2p.peek().map(|m| m.avail);
        let c = self
            .coll
            .peek()
            .filter(|_| self.colls_running > 0)
            .map(|m| m.avail);
        match (p, c) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// A thread's drain of its rank's MPI: every message in MPI by the thread's time, each at its
/// cost; the receives matched on arrival, with when.
struct Drain<'a> {
    mpi: &'a mut InMpi,
    time: &'a mut f64,
    cost: &'a mut dyn FnMut() -> f64,
    matched: &'a mut Vec<(Posted, f64)>,
    now: f64,
}

impl Inbox<(), Posted> for Drain<'_> {
    fn next(&mut self) -> Option<(Envelope, ())> {
        self.now = *self.time;
        let coll = self.mpi.next_ready(self.now)?;
        let msg = if coll {
            self.mpi.coll.pop()
        } else {
            self.mpi.p2p.pop()
        }
        .expect("peeked");
        *self.time += (self.cost)();
        let env = Envelope {
            source: msg.src,
            tag: msg.tag,
            class: msg.class,
        };
        Some((env, ()))
    }

    fn matched(&mut self, posted: Posted, _: ()) {
        self.matched.push((posted, self.now));
    }
}

struct Rank {
    mpi: InMpi,
    queues: Queues<(), Posted>,
    /// The engine's events, when this rank's trace is kept.
    trace: Option<Arc<Mutex<Trace>>>,
    threads: Vec<u32>,
    /// Threads at the thread barrier, and the latest time one got there.
    at_barrier: (usize, f64),
}

impl Rank {
    fn new(keep: bool) -> Rank {
        let (kind, params) = (EngineKind::List, EngineParams::default());
        let (engine, trace): (Box<dyn MatchEngine>, _) = if keep {
            let (recording, trace) = Recording::new(keyed(kind, &params), Header::default());
            (Box::new(recording), Some(trace))
        } else {
            (keyed(kind, &params), None)
        };
        Rank {
            mpi: InMpi::default(),
            queues: Queues::with_engine(engine, kind, params, keyed, None),
            trace,
            threads: Vec::new(),
            at_barrier: (0, 0.0),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Running,
    Ready,
    /// Waiting since `since` and polling, with its core (if cores are shared) until `until`.
    Spinning {
        since: f64,
        until: f64,
    },
    Blocked,
    Done,
}

/// A collective under way on a thread.
struct Exec {
    call: Shape,
    tag: i32,
    round: usize,
    part: usize,
    item: usize,
    drained: bool,
}

struct Thread {
    rank: u32,
    time: f64,
    slice_start: f64,
    /// Heap entries of an older epoch are stale.
    epoch: u64,
    state: State,
    script: Box<dyn Script>,
    exec: Option<Exec>,
    /// Receives without their message: the program's, the current round's.
    pending: [u32; 2],
    /// What the thread waits for: the program's receives (false) or the round's (true).
    waiting: Option<bool>,
    /// Asleep at the thread barrier.
    at_barrier: bool,
}

#[derive(PartialEq)]
struct Entry {
    time: f64,
    epoch: u64,
    thread: u32,
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .time
            .total_cmp(&self.time)
            .then(other.thread.cmp(&self.thread))
    }
}

pub struct Sim {
    machine: Machine,
    /// How collective calls tag their messages (an MPI whose tags go up to 2^31 − 1).
    tags: TagLayout,
    /// Receives matched during a drain, until they are told (kept to spare an allocation).
    matched: Vec<(Posted, f64)>,
    rng: Rng,
    ranks: Vec<Rank>,
    threads: Vec<Thread>,
    heap: BinaryHeap<Entry>,
    ready: VecDeque<u32>,
    free_cores: usize,
    next_order: u64,
}

/// What a simulation ended with.
pub struct Outcome {
    /// The engine events of each rank asked to be kept, by rank.
    pub traces: Vec<(usize, Vec<Event>)>,
    /// Simulated time at the end.
    pub end_ns: f64,
}

impl Sim {
    /// `scripts[r]` are the threads of rank r; `keep[r]` says whether its trace is kept.
    pub fn new(
        machine: Machine,
        seed: u64,
        scripts: Vec<Vec<Box<dyn Script>>>,
        keep: &[bool],
    ) -> Sim {
        let mut ranks: Vec<Rank> = Vec::with_capacity(scripts.len());
        let mut threads = Vec::new();
        for (r, rank_scripts) in scripts.into_iter().enumerate() {
            let mut rank = Rank::new(keep[r]);
            for script in rank_scripts {
                rank.threads.push(threads.len() as u32);
                threads.push(Thread {
                    rank: r as u32,
                    time: 0.0,
                    slice_start: 0.0,
                    epoch: 0,
                    state: State::Ready,
                    script,
                    exec: None,
                    pending: [0, 0],
                    waiting: None,
                    at_barrier: false,
                });
            }
            ranks.push(rank);
        }
        let mut sim = Sim {
            free_cores: machine.cores,
            machine,
            tags: TagLayout::new(i32::MAX),
            matched: Vec::new(),
            rng: Rng::new(seed),
            ranks,
            threads,
            heap: BinaryHeap::new(),
            ready: VecDeque::new(),
            next_order: 0,
        };
        // Processes start in no particular order.
        let mut order: Vec<u32> = (0..sim.threads.len() as u32).collect();
        sim.rng.shuffle(&mut order);
        for t in order {
            sim.make_ready(t, 0.0);
        }
        sim
    }

    fn cost(&mut self, ns: f64) -> f64 {
        let j = self.machine.jitter;
        ns * (1.0 + j * (2.0 * self.rng.unit() - 1.0))
    }

    fn schedule(&mut self, t: u32) {
        let th = &mut self.threads[t as usize];
        th.epoch += 1;
        self.heap.push(Entry {
            time: th.time,
            epoch: th.epoch,
            thread: t,
        });
    }

    /// A thread that can run: on a free core at once, else when one is given up.
    fn make_ready(&mut self, t: u32, at: f64) {
        let th = &mut self.threads[t as usize];
        th.time = th.time.max(at);
        let shared = self.machine.cores != 0;
        if !shared || self.free_cores > 0 {
            if shared {
                self.free_cores -= 1;
            }
            th.state = State::Running;
            th.slice_start = th.time;
            self.schedule(t);
        } else {
            th.state = State::Ready;
            th.epoch += 1;
            self.ready.push_back(t);
        }
    }

    /// Thread `t` gives its core up (it waits, ends or is preempted) to a ready thread, picked
    /// at random: the order in which an oversubscribed node runs its waiting processes follows
    /// no pattern the programs could count on (taking them in turn, the simulated queues were
    /// more orderly than the recorded ones).
    fn release_core(&mut self, t: u32) {
        if self.machine.cores == 0 {
            return;
        }
        let at = self.threads[t as usize].time;
        let pick = self.rng.below(self.ready.len() as u64) as usize;
        match self.ready.swap_remove_back(pick) {
            Some(next) => {
                let th = &mut self.threads[next as usize];
                th.time = th.time.max(at);
                th.slice_start = th.time;
                th.state = State::Running;
                self.schedule(next);
            }
            None => self.free_cores += 1,
        }
    }

    /// Runs the program to its end.
    pub fn run(mut self) -> Result<Outcome, String> {
        let mut end: f64 = 0.0;
        while let Some(entry) = self.heap.pop() {
            let t = entry.thread;
            if self.threads[t as usize].epoch != entry.epoch {
                continue;
            }
            match self.threads[t as usize].state {
                State::Blocked => {
                    self.make_ready(t, entry.time);
                    continue;
                }
                State::Ready | State::Done => continue,
                State::Running | State::Spinning { .. } => {}
            }
            self.step(t);
            let th = &self.threads[t as usize];
            end = end.max(th.time);
            match th.state {
                State::Running | State::Spinning { .. } => self.schedule(t),
                State::Ready | State::Blocked | State::Done => {}
            }
        }
        if let Some((i, th)) = self
            .threads
            .iter()
            .enumerate()
            .find(|(_, th)| th.state != State::Done)
        {
            return Err(format!(
                "the simulated program stopped with thread {i} of rank {} still {:?} (waiting for \
                 {} receives{})",
                th.rank,
                th.state,
                th.pending[0] + th.pending[1],
                if th.at_barrier {
                    ", at the thread barrier"
                } else {
                    ""
                }
            ));
        }
        let traces = self
            .ranks
            .iter_mut()
            .enumerate()
            .filter_map(|(r, rank)| {
                let trace = rank.trace.take()?;
                let events = std::mem::take(&mut trace.lock().expect("one thread").events);
                Some((r, events))
            })
            .collect();
        Ok(Outcome {
            traces,
            end_ns: end,
        })
    }

    /// Runs `op` on thread `t`'s rank's queues with a drain of its MPI at hand; then the
    /// receives matched as messages arrived get them (`before` runs first, on the result).
    fn with_drain<R>(
        &mut self,
        t: u32,
        op: impl FnOnce(&mut Queues<(), Posted>, &mut Drain) -> R,
        before: impl FnOnce(&mut Sim, &R),
    ) -> R {
        let r = self.threads[t as usize].rank as usize;
        let mut matched = std::mem::take(&mut self.matched);
        let (drain_ns, jitter) = (self.machine.drain_ns, self.machine.jitter);
        let rng = &mut self.rng;
        let mut cost = || drain_ns * (1.0 + jitter * (2.0 * rng.unit() - 1.0));
        let rank = &mut self.ranks[r];
        let mut inbox = Drain {
            mpi: &mut rank.mpi,
            time: &mut self.threads[t as usize].time,
            cost: &mut cost,
            matched: &mut matched,
            now: 0.0,
        };
        let result = op(&mut rank.queues, &mut inbox);
        before(self, &result);
        for (p, at) in matched.drain(..) {
            self.received(p, at);
        }
        self.matched = matched;
        result
    }

    /// Pulls every drainable message that is in MPI by the thread's time into the queues,
    /// each at its cost.
    fn drain(&mut self, t: u32) {
        self.with_drain(t, |queues, inbox| queues.drain(inbox), |_, _| {});
    }

    /// A receive of thread `p.thread` got its message at `at`.
    fn received(&mut self, p: Posted, at: f64) {
        let th = &mut self.threads[p.thread as usize];
        th.pending[p.round as usize] -= 1;
        if th.state == State::Blocked && th.waiting.is_some_and(|w| th.pending[w as usize] == 0) {
            self.make_ready(p.thread, at);
        }
    }

    fn send(&mut self, t: u32, dst: i32, tag: i32, class: Class, bytes: u32) {
        let cost = self.cost(self.machine.send_ns);
        let latency = self.cost(self.machine.latency_ns);
        let th = &mut self.threads[t as usize];
        th.time += cost;
        let src = th.rank as i32;
        let avail = th.time + latency + bytes as f64 * self.machine.ns_per_byte;
        let msg = Msg {
            avail,
            order: self.next_order,
            src,
            tag,
            class,
        };
        self.next_order += 1;
        let mpi = &mut self.ranks[dst as usize].mpi;
        if class.is_collective() {
            mpi.coll.push(msg);
        } else {
            mpi.p2p.push(msg);
        }
        if class.is_collective() && mpi.colls_running == 0 {
            return;
        }
        // Waiting threads of the receiver look again once the message is there.
        for i in 0..self.ranks[dst as usize].threads.len() {
            let w = self.ranks[dst as usize].threads[i];
            match self.threads[w as usize].state {
                State::Blocked if !self.threads[w as usize].at_barrier => self.make_ready(w, avail),
                State::Spinning { since, until } if avail < self.threads[w as usize].time => {
                    self.threads[w as usize].time = avail.min(until).max(since);
                    self.schedule(w);
                }
                _ => {}
            }
        }
    }

    /// A receive posted by the program, drained around as the protocol's `post_drained` does.
    fn post_user(&mut self, t: u32, src: i32, tag: i32) {
        let want = Pattern {
            source: src,
            tag,
            class: Class::PointToPoint,
        };
        let waiter = Posted {
            thread: t,
            round: false,
        };
        self.with_drain(
            t,
            |queues, inbox| queues.post_drained(inbox, want, |_| waiter),
            |sim, posted| {
                if matches!(posted, Queued::Queued(_)) {
                    sim.threads[t as usize].pending[0] += 1;
                }
            },
        );
        let cost = self.cost(self.machine.post_ns);
        self.threads[t as usize].time += cost;
    }

    /// Moves thread `t` on by one step (or one wait check).
    fn step(&mut self, t: u32) {
        let ti = t as usize;
        if let Some(round) = self.threads[ti].waiting {
            self.drain(t);
            let th = &mut self.threads[ti];
            if th.pending[round as usize] == 0 {
                th.waiting = None;
                th.state = State::Running;
            } else {
                self.wait(t);
                return;
            }
        } else if self.threads[ti].exec.is_some() {
            self.collective_step(t);
        } else {
            match self.threads[ti].script.next() {
                Some(Step::Post { src, tag }) => self.post_user(t, src, tag),
                Some(Step::Send { dst, tag, bytes }) => {
                    self.send(t, dst, tag, Class::PointToPoint, bytes)
                }
                Some(Step::WaitAll) => self.threads[ti].waiting = Some(false),
                Some(Step::Compute { ns }) => {
                    let cost = self.cost(ns);
                    self.threads[ti].time += cost;
                }
                Some(Step::ThreadBarrier) => {
                    if !self.thread_barrier(t) {
                        return;
                    }
                }
                Some(Step::Collective { call, seq }) => {
                    let r = self.threads[ti].rank as usize;
                    self.ranks[r].mpi.colls_running += 1;
                    let tag = self
                        .tags
                        .tag(seq, Form::Blocking, call.kind, call.size_class);
                    self.threads[ti].exec = Some(Exec {
                        call,
                        tag,
                        round: 0,
                        part: 0,
                        item: 0,
                        drained: false,
                    });
                }
                None => {
                    self.threads[ti].state = State::Done;
                    self.release_core(t);
                    return;
                }
            }
        }
        self.maybe_preempt(t);
    }

    /// Thread `t` reaches its rank's thread barrier: the last one wakes the others (all go on
    /// at its time); the others sleep. False if `t` sleeps.
    fn thread_barrier(&mut self, t: u32) -> bool {
        let ti = t as usize;
        let r = self.threads[ti].rank as usize;
        let now = self.threads[ti].time;
        let rank = &mut self.ranks[r];
        rank.at_barrier = (rank.at_barrier.0 + 1, rank.at_barrier.1.max(now));
        if rank.at_barrier.0 < rank.threads.len() {
            let th = &mut self.threads[ti];
            th.at_barrier = true;
            th.state = State::Blocked;
            th.epoch += 1;
            self.release_core(t);
            return false;
        }
        let at = rank.at_barrier.1;
        rank.at_barrier = (0, 0.0);
        self.threads[ti].time = at;
        for i in 0..self.ranks[r].threads.len() {
            let w = self.ranks[r].threads[i];
            if self.threads[w as usize].at_barrier {
                self.threads[w as usize].at_barrier = false;
                self.make_ready(w, at);
            }
        }
        true
    }

    /// A waiting thread whose receives lack messages: it polls until the next message is in
    /// MPI or, sharing cores, until its polling time is up, and then gives its core away; a
    /// message sent to it later wakes it.
    fn wait(&mut self, t: u32) {
        let ti = t as usize;
        let r = self.threads[ti].rank as usize;
        let next = self.ranks[r].mpi.next_avail();
        let shared = self.machine.cores != 0;
        let th = &mut self.threads[ti];
        let (since, until) = match th.state {
            State::Spinning { since, until } => (since, until),
            _ if shared => (th.time, th.time + self.machine.spin_ns),
            _ => (th.time, f64::INFINITY),
        };
        match next {
            Some(at) if at <= until => {
                th.time = th.time.max(at);
                th.state = State::Spinning { since, until };
            }
            _ if th.time < until && until.is_finite() => {
                th.time = until;
                th.state = State::Spinning { since, until };
            }
            _ => {
                th.state = State::Blocked;
                th.epoch += 1;
                self.release_core(t);
                // A message already on its way wakes it when it is there.
                if let Some(later) = next {
                    self.threads[ti].time = later;
                    self.schedule(t);
                }
            }
        }
    }

    fn maybe_preempt(&mut self, t: u32) {
        let th = &self.threads[t as usize];
        if self.machine.cores == 0
            || th.state != State::Running
            || th.time - th.slice_start < self.machine.quantum_ns
            || self.ready.is_empty()
        {
            return;
        }
        self.threads[t as usize].state = State::Ready;
        self.release_core(t);
        self.ready.push_back(t);
    }

    fn collective_step(&mut self, t: u32) {
        enum Next {
            Finish,
            EndRound,
            PartDone,
            Recv(i32),
            Send(i32),
        }
        let ti = t as usize;
        let r = self.threads[ti].rank as usize;
        let exec = self.threads[ti].exec.as_mut().expect("a collective runs");
        let next = if exec.round == exec.call.round_count() {
            Next::Finish
        } else {
            match exec.call.round(exec.round).get(exec.part) {
                None => Next::EndRound,
                Some(Part::Recv(p)) if exec.item < p.len() => Next::Recv(p.get(exec.item)),
                Some(Part::Send(p)) if exec.item < p.len() => Next::Send(p.get(exec.item)),
                Some(_) => Next::PartDone,
            }
        };
        let (tag, class) = (exec.tag, exec.call.class());
        match next {
            Next::Finish => {
                self.threads[ti].exec = None;
                self.ranks[r].mpi.colls_running -= 1;
            }
            Next::EndRound => {
                // Every action of the round started: wait for its receives, then go on.
                exec.round += 1;
                exec.part = 0;
                exec.item = 0;
                exec.drained = false;
                self.threads[ti].waiting = Some(true);
            }
            Next::PartDone => {
                exec.part += 1;
                exec.item = 0;
            }
            Next::Send(peer) => {
                exec.item += 1;
                self.send(t, peer, tag, class, 0);
            }
            Next::Recv(peer) => {
                exec.item += 1;
                // Once per round, before its first receive: what arrived matches at once.
                let drain = !std::mem::replace(&mut exec.drained, true);
                if drain {
                    self.drain(t);
                }
                let cost = self.cost(self.machine.post_ns);
                self.threads[ti].time += cost;
                let want = Pattern {
                    source: peer,
                    tag,
                    class,
                };
                let waiter = Posted {
                    thread: t,
                    round: true,
                };
                if let Queued::Queued(_) = self.ranks[r].queues.post(want, |_| waiter) {
                    self.threads[ti].pending[1] += 1;
                }
            }
        }
    }
}
