//! One communicator's matching while the shim has taken it over: the engine, the posted
//! receives and unexpected messages it holds, their order, and the depths that tell the policy
//! whether the takeover pays. Messages come in through an [`Inbox`] the executor keeps (MPI's
//! matched probes in the shim, a simulated network in the generator); a receive is the
//! executor's value `W` and a message its value `M`; what matched goes back as actions:
//! [`Posted::Found`], [`Inbox::matched`], the receives [`Queues::give_back`] returns in
//! posting order.

use super::depth::{Depths, Model, Signals};
use crate::clock::Clock;
use crate::matching::{
    Assertions, EngineKind, EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern,
    RecvId, ANY_SOURCE, ANY_TAG,
};
use crate::report::Bursts;
use slab::Slab;

/// A posted receive's key in its communicator's queues (and its id in the engine).
pub type Key = usize;

/// Where the drain gets messages from and where matches on arrival go.
pub trait Inbox<M, W> {
    /// The next message MPI holds for the communicator (per source in send order), if any.
    fn next(&mut self) -> Option<(Envelope, M)>;
    /// `waiter` matched `message` as it arrived: its bytes are the executor's to receive.
    fn matched(&mut self, waiter: W, message: M);
}

/// What posting a receive found.
#[derive(Debug, PartialEq, Eq)]
pub enum Posted<M> {
    /// The earliest unexpected message that fits: its bytes are the executor's to receive.
    Found(M),
    /// The receive waits under this key.
    Queued(Key),
}

/// What a probe does with the message it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `MPI_Probe`, `MPI_Iprobe`: the message stays queued.
    Peek,
    /// `MPI_Mprobe`, `MPI_Improbe`: the message leaves the queue with the probe.
    Remove,
}

struct Unexpected<M> {
    message: M,
    /// Its source, and its place in arrival order there (see [`Depths`]).
    source: i32,
    seq: u64,
}

struct Waiting<W> {
    waiter: W,
    want: Pattern,
    /// Its place in posting order.
    posted_at: u64,
    /// Its place among the receives MPI would search with it (see [`Depths`]).
    seq: u64,
}

/// The waiting receives handed to MPI ([`Queues::hand_over`]), in posting order: the order
/// they go to MPI, so that MPI searches them as it would have without the shim.
pub struct Loan<W> {
    pub receives: Vec<W>,
    /// No message fits two of them: MPI matches them alike in any order, so they may come
    /// back oldest first (else youngest first, see `protocol`, point 6).
    pub any_order: bool,
}

impl<W> Default for Loan<W> {
    fn default() -> Loan<W> {
        Loan {
            receives: Vec::new(),
            any_order: false,
        }
    }
}

/// Builds the engine of a kind for a communicator with some parameters (the shim's records it
/// under `MATCHSHIM_TRACE`).
pub type Build = fn(EngineKind, &EngineParams) -> Box<dyn MatchEngine>;

pub struct Queues<M, W> {
    /// Built at its first use: most communicators never need one.
    engine: Option<Box<dyn MatchEngine>>,
    kind: EngineKind,
    build: Build,
    /// What the engine was built for; `rebuild`: the communicator's assertions changed since,
    /// and the engine is rebuilt when it next holds nothing.
    params: EngineParams,
    rebuild: bool,
    /// Counters of the engines replaced so far.
    replaced: EngineStats,
    unexpected: Slab<Unexpected<M>>,
    posted: Slab<Waiting<W>>,
    /// Receives posted so far: the next one's place in posting order.
    postings: u64,
    posted_order: Depths,
    unexpected_order: Depths,
    signals: Signals,
    /// Clock ticks spent inside the engine: point-to-point, collective.
    match_ticks: [u64; 2],
    /// Times the engine (none: not timed).
    clock: Option<&'static Clock>,
    /// The messages of the drain under way, each already unexpected under its id, and what
    /// the engine matched them to (kept between drains so that a drain allocates nothing).
    burst: Vec<(Envelope, MsgId)>,
    burst_matched: Vec<Option<RecvId>>,
    bursts: Bursts,
    /// Messages a drain pulls out of the inbox while no receive waits here; `None`: all.
    drain_ahead: Option<usize>,
    /// The last drain found the inbox empty: postings stop looking at it until a drain finds
    /// something.
    inbox_was_empty: bool,
}

/// A drain hands its messages to the engine at least this often: the messages it holds out
/// of MPI stay bounded while a sender keeps the queue full.
pub const MAX_BURST: usize = 1 << 16;

impl<M, W> Queues<M, W> {
    /// Queues with the engine `build` makes of `kind` (when first needed), timed with
    /// `clock` if given.
    pub fn new(
        kind: EngineKind,
        params: EngineParams,
        build: Build,
        clock: Option<&'static Clock>,
    ) -> Self {
        Self::with(None, kind, params, build, clock)
    }

    /// Queues around `engine`, made of `kind` for `params` (rebuilt with `build`).
    pub fn with_engine(
        engine: Box<dyn MatchEngine>,
        kind: EngineKind,
        params: EngineParams,
        build: Build,
        clock: Option<&'static Clock>,
    ) -> Self {
        Self::with(Some(engine), kind, params, build, clock)
    }

    fn with(
        engine: Option<Box<dyn MatchEngine>>,
        kind: EngineKind,
        params: EngineParams,
        build: Build,
        clock: Option<&'static Clock>,
    ) -> Self {
        Queues {
            engine,
            kind,
            build,
            params,
            rebuild: false,
            replaced: EngineStats::default(),
            unexpected: Slab::new(),
            posted: Slab::new(),
            postings: 0,
            posted_order: Depths::default(),
            unexpected_order: Depths::default(),
            signals: Signals::default(),
            match_ticks: [0; 2],
            clock,
            burst: Vec::new(),
            burst_matched: Vec::new(),
            bursts: Bursts::default(),
            drain_ahead: None,
            inbox_was_empty: false,
        }
    }

    /// Drains pull at most `limit` messages while no receive waits here: a takeover that does
    /// not pay then moves only that many out of a long queue MPI would have matched in order,
    /// and gives the rest back with matching ([`GiveBack`](super::GiveBack)). Receives that
    /// wait still have every message drained, so a deep queue reaches the engine whole.
    pub fn limit_drain_ahead(&mut self, limit: usize) {
        self.drain_ahead = Some(limit);
    }

    /// The depths of the shim's matches are counted as `model` says MPI searches.
    pub fn model_depths(&mut self, model: Model) {
        self.posted_order = Depths::new(model);
        self.unexpected_order = Depths::new(model);
    }

    /// The engine, built now if this is its first use.
    #[inline]
    fn engine(&mut self) -> &mut dyn MatchEngine {
        let (build, kind, params) = (self.build, self.kind, &self.params);
        &mut **self.engine.get_or_insert_with(|| build(kind, params))
    }

    #[inline]
    fn ticks(&self) -> u64 {
        self.clock.map_or(0, Clock::ticks)
    }

    /// Runs an engine call, its time counted for traffic of `collective`.
    #[inline]
    fn timed<T>(&mut self, collective: bool, call: impl FnOnce(&mut dyn MatchEngine) -> T) -> T {
        let start = self.ticks();
        let result = call(self.engine());
        self.match_ticks[collective as usize] += self.ticks() - start;
        result
    }

    /// A message arrived: the receive it matched, or it waits as unexpected.
    pub fn arrive(&mut self, env: Envelope, message: M) -> Option<(W, M)> {
        let key = self.unexpected.vacant_key();
        let Some(recv) = self.timed(env.class.is_collective(), |e| e.arrive(env, key as u64))
        else {
            let seq = self.unexpected_order.push(env.source);
            self.unexpected.insert(Unexpected {
                message,
                source: env.source,
                seq,
            });
            return None;
        };
        let waiting = self.posted.remove(recv as usize);
        let depth = self.posted_order.remove(waiting.want.source, waiting.seq);
        self.signals.observe(depth);
        Some((waiting.waiter, message))
    }

    /// Pulls every message `inbox` holds into the engine (or, with no receive waiting, as many
    /// as [`limit_drain_ahead`](Self::limit_drain_ahead) allows), then to the engine as one
    /// burst in the order the inbox gave them (at most [`MAX_BURST`] at a time). Each matched
    /// message goes to its receive, the rest stay unexpected in arrival order. True if it
    /// stopped at that limit (the inbox may hold more).
    pub fn drain(&mut self, inbox: &mut impl Inbox<M, W>) -> bool {
        let ahead = match self.drain_ahead {
            Some(limit) if self.posted.is_empty() => limit,
            _ => usize::MAX,
        };
        self.drain_at_most(inbox, ahead)
    }

    /// [`drain`](Self::drain) with no limit, for a probe: it looks for any message MPI holds,
    /// as a waiting receive would.
    pub fn drain_all(&mut self, inbox: &mut impl Inbox<M, W>) {
        self.drain_at_most(inbox, usize::MAX);
    }

    fn drain_at_most(&mut self, inbox: &mut impl Inbox<M, W>, ahead: usize) -> bool {
        let mut pulled = 0;
        while pulled < ahead {
            let Some((env, message)) = inbox.next() else {
                break;
            };
            pulled += 1;
            // Its place in arrival order is given once it stays unexpected.
            let key = self.unexpected.insert(Unexpected {
                message,
                source: env.source,
                seq: 0,
            });
            self.burst.push((env, key as MsgId));
            if self.burst.len() == MAX_BURST {
                self.match_burst(inbox);
            }
        }
        self.match_burst(inbox);
        if ahead > 0 {
            self.inbox_was_empty = pulled == 0;
        }
        pulled == ahead
    }

    fn match_burst(&mut self, inbox: &mut impl Inbox<M, W>) {
        if self.burst.is_empty() {
            return;
        }
        let burst = std::mem::take(&mut self.burst);
        let mut matched = std::mem::take(&mut self.burst_matched);
        matched.clear();
        let start = self.ticks();
        self.engine().arrive_burst(&burst, &mut matched);
        let ticks = self.ticks() - start;
        // A mixed burst's time is shared by its messages of each traffic type.
        let collective = burst
            .iter()
            .filter(|(env, _)| env.class.is_collective())
            .count();
        let collective_ticks = ticks * collective as u64 / burst.len() as u64;
        self.match_ticks[1] += collective_ticks;
        self.match_ticks[0] += ticks - collective_ticks;
        self.bursts.record(burst.len());
        for (&(_, key), &found) in burst.iter().zip(&matched) {
            let Some(recv) = found else {
                let unexpected = &mut self.unexpected[key as usize];
                unexpected.seq = self.unexpected_order.push(unexpected.source);
                continue;
            };
            let message = self.unexpected.remove(key as usize).message;
            let waiting = self.posted.remove(recv as usize);
            let depth = self.posted_order.remove(waiting.want.source, waiting.seq);
            self.signals.observe(depth);
            inbox.matched(waiting.waiter, message);
        }
        self.burst = burst;
        self.burst.clear();
        self.burst_matched = matched;
    }

    /// Posts a receive: finds the earliest unexpected message that fits, or queues the receive
    /// `make` makes of its key.
    pub fn post(&mut self, want: Pattern, make: impl FnOnce(Key) -> W) -> Posted<M> {
        let key = self.posted.vacant_key();
        if let Some(found) = self.timed(want.class.is_collective(), |e| e.post(want, key as u64)) {
            return Posted::Found(self.remove_unexpected(found as usize));
        }
        let seq = self.posted_order.push(want.source);
        self.postings += 1;
        let inserted = self.posted.insert(Waiting {
            waiter: make(key),
            want,
            posted_at: self.postings,
            seq,
        });
        debug_assert_eq!(inserted, key);
        Posted::Queued(key)
    }

    /// [`post`](Self::post) with the messages still in `inbox`: one queued here is older than
    /// any of them, so the inbox is drained first only when nothing is queued here, else only
    /// once the receive is queued (which spares a look at the inbox per receive while messages
    /// wait here); and again once it is queued if the first drain stopped at its limit.
    /// While the last drain found the inbox empty it is not looked at: a queued receive is
    /// matched by the next drain as well, since every message in the inbox is younger than
    /// those queued here, and a long queue posted before its messages are sent then costs one
    /// empty look instead of one per receive (an empty matched probe, which makes Open MPI
    /// yield its core under `mpi_yield_when_idle`).
    pub fn post_drained(
        &mut self,
        inbox: &mut impl Inbox<M, W>,
        want: Pattern,
        make: impl FnOnce(Key) -> W,
    ) -> Posted<M> {
        if self.inbox_was_empty {
            return self.post(want, make);
        }
        let drain_first = self.unexpected.is_empty();
        let cut = drain_first && self.drain(inbox);
        let posted = self.post(want, make);
        if matches!(posted, Posted::Queued(_)) && (cut || !drain_first) {
            self.drain(inbox);
        }
        posted
    }

    fn remove_unexpected(&mut self, key: usize) -> M {
        let unexpected = self.unexpected.remove(key);
        let depth = self
            .unexpected_order
            .remove(unexpected.source, unexpected.seq);
        self.signals.observe(depth);
        unexpected.message
    }

    /// The earliest unexpected message that fits `want`; [`Probe::Remove`] removes it.
    pub fn probe(&mut self, want: Pattern, probe: Probe) -> Option<M>
    where
        M: Clone,
    {
        let remove = probe == Probe::Remove;
        let found = self.timed(want.class.is_collective(), |e| e.probe(want, remove))? as usize;
        if remove {
            Some(self.remove_unexpected(found))
        } else {
            Some(self.unexpected[found].message.clone())
        }
    }

    /// Whether an unexpected message held here fits `want` ([`Mode::Held`](super::Mode::Held):
    /// such a receive or probe takes it here, any other goes to MPI).
    pub fn holds(&mut self, want: Pattern) -> bool {
        !self.unexpected.is_empty()
            && self
                .timed(want.class.is_collective(), |e| e.probe(want, false))
                .is_some()
    }

    /// Removes the receive waiting under `key` from the queues; `None` if it is not waiting
    /// (it matched).
    pub fn cancel(&mut self, key: Key) -> Option<W> {
        if !self.posted.contains(key) || !self.engine().cancel(key as u64) {
            return None;
        }
        let waiting = self.posted.remove(key);
        self.posted_order.remove(waiting.want.source, waiting.seq);
        Some(waiting.waiter)
    }

    /// Every waiting receive, in posting order, removed from the queues: matching goes back to
    /// MPI, and the executor hands them to it in this order before any receive posted later.
    pub fn give_back(&mut self) -> Vec<W> {
        let mut keys: Vec<Key> = self.posted.iter().map(|(key, _)| key).collect();
        keys.sort_by_key(|&key| self.posted[key].posted_at);
        let waiters = keys
            .into_iter()
            .map(|key| {
                let canceled = self.engine().cancel(key as u64);
                debug_assert!(canceled, "a waiting receive is in the engine");
                let waiting = self.posted.remove(key);
                self.posted_order.remove(waiting.want.source, waiting.seq);
                waiting.waiter
            })
            .collect();
        self.rebuild_if_empty();
        self.signals.reset();
        waiters
    }

    /// Every waiting receive, removed as by [`Queues::give_back`], lent to MPI for a blocking
    /// call it runs, to be cancelled after it (`protocol`, point 6). Where no message can fit
    /// two of them (none has a wildcard, no two want the same source, tag and class) they may
    /// be cancelled oldest first, each then found at the front of those lent (MPICH's cancel
    /// walks its posted queue from the oldest); else youngest first.
    pub fn lend(&mut self) -> Loan<W> {
        let any_order = self.none_fits_two();
        Loan {
            receives: self.give_back(),
            any_order,
        }
    }

    /// Every waiting receive, removed, in posting order: as [`Queues::lend`] when `lending`
    /// them for a blocking call MPI runs, else as [`Queues::give_back`].
    pub fn hand_over(&mut self, lending: bool) -> Loan<W> {
        if lending {
            return self.lend();
        }
        Loan {
            receives: self.give_back(),
            any_order: false,
        }
    }

    /// No message can fit two of the waiting receives.
    fn none_fits_two(&self) -> bool {
        let mut wanted = rustc_hash::FxHashSet::default();
        self.posted.iter().all(|(_, waiting)| {
            let want = waiting.want;
            want.source != ANY_SOURCE
                && want.tag != ANY_TAG
                && wanted.insert((want.source, want.tag, want.class.is_collective()))
        })
    }

    /// The waiting receives, in no particular order.
    pub fn waiting(&self) -> impl Iterator<Item = &W> {
        self.posted.iter().map(|(_, waiting)| &waiting.waiter)
    }

    /// Matching is taken over from MPI: a new episode starts.
    pub fn take_over(&mut self) {
        self.rebuild_if_empty();
        self.signals.reset();
    }

    /// The assertions the engine follows, or follows once rebuilt.
    pub fn assertions(&self) -> Assertions {
        self.params.assertions
    }

    /// The communicator's info makes `assertions` now: the engine is built for them as soon
    /// as it holds nothing.
    pub fn assert(&mut self, assertions: Assertions) {
        if assertions != self.params.assertions {
            self.params.assertions = assertions;
            self.rebuild = true;
            self.rebuild_if_empty();
        }
    }

    /// A rebuild drops the engine: the next use builds it for the new assertions.
    fn rebuild_if_empty(&mut self) {
        if !self.rebuild || self.queued_in_engine() != (0, 0) {
            return;
        }
        self.drop_engine();
        self.rebuild = false;
    }

    fn drop_engine(&mut self) {
        if let Some(engine) = self.engine.take() {
            self.replaced.follow(engine.stats());
        }
    }

    fn queued_in_engine(&self) -> (usize, usize) {
        self.engine
            .as_ref()
            .map_or((0, 0), |engine| engine.queued())
    }

    /// Every waiting receive, removed from the queues in no particular order: the
    /// communicator went away and they can no longer complete.
    pub fn abandon(&mut self) -> Vec<W> {
        let keys: Vec<Key> = self.posted.iter().map(|(key, _)| key).collect();
        keys.into_iter()
            .filter_map(|key| self.cancel(key))
            .collect()
    }

    /// Gives back what the engine and the unexpected queue hold (the communicator is gone);
    /// messages no receive wanted stay unreceived, as they would in MPI. The counters stay.
    pub fn clear(&mut self) {
        self.drop_engine();
        self.kind = EngineKind::List;
        self.unexpected = Slab::new();
        self.unexpected_order.clear();
        self.posted_order.clear();
    }

    /// Receives waiting, unexpected messages held.
    pub fn queued(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }

    /// The bursts drained into the engine so far.
    pub fn bursts(&self) -> Bursts {
        self.bursts
    }

    /// The depths of the matches since the episode began.
    pub fn signals(&self) -> &Signals {
        &self.signals
    }

    /// Engine counters (of the engines replaced too), ticks spent matching, (posted,
    /// unexpected) in the engine now, and the assertions it follows.
    pub fn stats(&self) -> (EngineStats, [u64; 2], (usize, usize), Assertions) {
        let mut stats = self
            .engine
            .as_ref()
            .map_or_else(EngineStats::default, |engine| *engine.stats());
        stats.follow(&self.replaced);
        (
            stats,
            self.match_ticks,
            self.queued_in_engine(),
            self.params.assertions,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{build_engine, Class, ANY_SOURCE, ANY_TAG};
    use proptest::prelude::*;
    use std::collections::VecDeque;

    /// Messages in MPI (id, envelope) and the matches made on arrival.
    #[derive(Default)]
    struct Mpi {
        held: VecDeque<(Envelope, u64)>,
        asked: usize,
        matched: Vec<(u64, u64)>,
    }

    impl Inbox<u64, u64> for Mpi {
        fn next(&mut self) -> Option<(Envelope, u64)> {
            self.asked += 1;
            self.held.pop_front()
        }
        fn matched(&mut self, recv: u64, msg: u64) {
            self.matched.push((recv, msg));
        }
    }

    fn env(source: i32, tag: i32) -> Envelope {
        Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    fn want(source: i32, tag: i32) -> Pattern {
        Pattern {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    fn queues(kind: EngineKind) -> Queues<u64, u64> {
        let params = EngineParams {
            comm_size: 4,
            theta: 3,
            bins: 2,
            adaptive_depth: 2,
            adaptive_window: 4,
            ..EngineParams::default()
        };
        Queues::new(kind, params, build_engine, None)
    }

    #[test]
    fn a_receive_finds_the_earliest_unexpected_message_that_fits() {
        let mut q = queues(EngineKind::List);
        assert!(q.arrive(env(1, 5), 10).is_none());
        assert!(q.arrive(env(0, 5), 11).is_none());
        assert!(q.arrive(env(1, 5), 12).is_none());
        assert_eq!(q.post(want(1, ANY_TAG), |_| 0), Posted::Found(10));
        assert_eq!(q.post(want(ANY_SOURCE, 5), |_| 0), Posted::Found(11));
        assert_eq!(q.queued(), (0, 1));
        let Posted::Queued(key) = q.post(want(2, 5), |key| 100 + key as u64) else {
            panic!("nothing from rank 2 yet")
        };
        assert_eq!(q.arrive(env(2, 5), 13), Some((100 + key as u64, 13)));
        assert_eq!(q.queued(), (0, 1));
    }

    #[test]
    fn a_loan_comes_back_in_any_order_only_where_no_message_fits_two_receives() {
        let lend = |wants: &[Pattern]| {
            let mut q = queues(EngineKind::List);
            for (i, &w) in wants.iter().enumerate() {
                assert_eq!(q.post(w, |_| i as u64), Posted::Queued(i));
            }
            let loan = q.lend();
            assert_eq!(q.queued(), (0, 0), "lent, none waits");
            (loan.receives, loan.any_order)
        };
        let distinct = [want(0, 1), want(0, 2), want(1, 1)];
        assert_eq!(lend(&distinct), (vec![0, 1, 2], true));
        let same_twice = [want(0, 1), want(1, 1), want(0, 1)];
        assert_eq!(lend(&same_twice), (vec![0, 1, 2], false));
        for wildcard in [want(ANY_SOURCE, 3), want(2, ANY_TAG)] {
            assert_eq!(lend(&[want(0, 1), wildcard]), (vec![0, 1], false));
        }
        let collective = Pattern {
            class: Class::Collective {
                kind: 0,
                size_class: 0,
            },
            ..want(0, 1)
        };
        assert_eq!(lend(&[want(0, 1), collective]), (vec![0, 1], true));
    }

    #[test]
    fn a_drain_is_one_burst_its_matches_to_their_receives_the_rest_unexpected_in_order() {
        for kind in EngineKind::ALL {
            let mut q = queues(*kind);
            let Posted::Queued(key) = q.post(want(2, 7), |key| 100 + key as u64) else {
                panic!("nothing arrived yet")
            };
            let mut mpi = Mpi::default();
            mpi.held.extend([
                (env(1, 7), 1),
                (env(2, 7), 2),
                (env(1, 7), 3),
                (env(2, 7), 4),
            ]);
            q.drain(&mut mpi);
            assert_eq!(mpi.matched, vec![(100 + key as u64, 2)], "{kind:?}");
            let bursts = q.bursts();
            assert_eq!((bursts.count, bursts.messages, bursts.largest), (1, 4, 4));
            assert_eq!(q.queued(), (0, 3));
            assert_eq!(q.post(want(ANY_SOURCE, 7), |_| 0), Posted::Found(1));
            assert_eq!(q.post(want(ANY_SOURCE, 7), |_| 0), Posted::Found(3));
            assert_eq!(q.post(want(ANY_SOURCE, 7), |_| 0), Posted::Found(4));
            q.drain(&mut mpi);
            assert_eq!(q.bursts().count, 1, "{kind:?}: an empty drain is no burst");
        }
    }

    #[test]
    fn posting_drains_first_only_when_nothing_waits_here() {
        let mut q = queues(EngineKind::List);
        let mut mpi = Mpi::default();
        mpi.held.push_back((env(0, 1), 1));
        assert_eq!(
            q.post_drained(&mut mpi, want(0, 1), |_| 0),
            Posted::Found(1)
        );
        assert_eq!(mpi.asked, 2, "drained before posting");
        mpi.held.extend([(env(0, 2), 2), (env(0, 3), 3)]);
        q.drain(&mut mpi);
        mpi.asked = 0;
        // A message queued here is older than any in MPI: no need to look there.
        assert_eq!(
            q.post_drained(&mut mpi, want(0, 2), |_| 0),
            Posted::Found(2)
        );
        assert_eq!(mpi.asked, 0);
        // Queued: MPI is drained after, and its message matches the receive.
        mpi.held.push_back((env(0, 4), 4));
        assert!(matches!(
            q.post_drained(&mut mpi, want(0, 4), |_| 40),
            Posted::Queued(_)
        ));
        assert_eq!(mpi.matched, [(40, 4)]);
    }

    #[test]
    fn probes_peek_or_remove() {
        let mut q = queues(EngineKind::Rank);
        q.arrive(env(3, 7), 70);
        assert_eq!(q.probe(want(ANY_SOURCE, ANY_TAG), Probe::Peek), Some(70));
        assert_eq!(q.queued(), (0, 1));
        assert_eq!(q.probe(want(3, 8), Probe::Remove), None);
        assert_eq!(q.probe(want(3, 7), Probe::Remove), Some(70));
        assert_eq!(q.queued(), (0, 0));
    }

    #[test]
    fn a_canceled_receive_leaves_and_matches_nothing() {
        let mut q = queues(EngineKind::Bins);
        let Posted::Queued(key) = q.post(want(1, 1), |_| 7) else {
            panic!()
        };
        assert_eq!(q.cancel(key), Some(7));
        assert_eq!(q.cancel(key), None);
        assert!(q.arrive(env(1, 1), 1).is_none(), "no receive left to match");
    }

    #[test]
    fn receives_go_back_in_posting_order_and_the_engine_is_rebuilt_when_asked() {
        for model in [Model::List, Model::PerSource] {
            receives_go_back_in_posting_order(model);
        }
    }

    fn receives_go_back_in_posting_order(model: Model) {
        let mut q = queues(EngineKind::ColPnp);
        q.model_depths(model);
        for id in 0..5u64 {
            q.post(want(id as i32 % 2, ANY_TAG), |_| id);
        }
        // Out-of-order removals reuse slab keys: posting order still rules.
        let Posted::Queued(third) = q.post(want(3, 3), |_| 99) else {
            panic!()
        };
        assert_eq!(q.cancel(third), Some(99));
        q.post(want(2, 2), |_| 5);
        q.assert(Assertions::from_info(|key| {
            key.contains("no_any").then(|| "true".to_string())
        }));
        assert_eq!(q.give_back(), [0, 1, 2, 3, 4, 5]);
        assert_eq!(q.queued(), (0, 0));
        let (_, _, engine_holds, assertions) = q.stats();
        assert_eq!(engine_holds, (0, 0));
        assert!(
            assertions.no_wildcards(),
            "rebuilt for the assertions once empty"
        );
    }

    #[test]
    fn depths_tell_a_reverse_order_from_an_in_order_one() {
        let mut q = queues(EngineKind::List);
        for tag in 0..100 {
            q.arrive(env(0, tag), tag as u64);
        }
        for tag in 0..100 {
            q.post(want(0, tag), |_| 0);
        }
        assert!(
            q.signals().shallow(64),
            "in order: every match at the front"
        );
        q.take_over();
        for tag in 0..200 {
            q.arrive(env(0, tag), tag as u64);
        }
        for tag in (0..200).rev() {
            q.post(want(0, tag), |_| 0);
        }
        assert!(q.signals().paid(64), "reverse: deep");
    }

    #[test]
    fn per_source_depths_see_several_short_queues_where_one_list_is_long() {
        let mut paid = Vec::new();
        for model in [Model::List, Model::PerSource] {
            let mut q = queues(EngineKind::List);
            q.model_depths(model);
            for source in 0..3 {
                for tag in (0..100).rev() {
                    q.post(want(source, tag), |_| 0);
                }
            }
            for tag in 0..100 {
                for source in 0..3 {
                    assert!(q.arrive(env(source, tag), 0).is_some());
                }
            }
            paid.push(q.signals().paid(64));
        }
        assert_eq!(
            paid,
            [true, false],
            "100 receives a source, newest first: deep in one list, 50 on average per source"
        );
    }

    #[derive(Clone, Debug)]
    enum Op {
        Post(Pattern),
        Arrive(Envelope),
        Drain,
        Probe(Pattern, Probe),
        Cancel(usize),
    }

    fn pattern() -> impl Strategy<Value = Pattern> {
        (
            prop_oneof![3 => 0..3i32, 1 => Just(ANY_SOURCE)],
            prop_oneof![3 => 0..3i32, 1 => Just(ANY_TAG)],
        )
            .prop_map(|(s, t)| want(s, t))
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => pattern().prop_map(Op::Post),
            4 => (0..3i32, 0..3i32).prop_map(|(s, t)| Op::Arrive(env(s, t))),
            2 => Just(Op::Drain),
            1 => (pattern(), prop_oneof![Just(Probe::Peek), Just(Probe::Remove)])
                .prop_map(|(p, probe)| Op::Probe(p, probe)),
            1 => (0..8usize).prop_map(Op::Cancel),
        ]
    }

    /// One ordered list of posted receives and one of unexpected messages.
    #[derive(Default)]
    struct List {
        posted: Vec<(u64, Pattern)>,
        unexpected: VecDeque<(u64, Envelope)>,
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Receives posted with `post_drained`, messages drained from MPI at random moments
        /// (all of them, or a few while no receive waits), probes and cancels: every engine
        /// gives the matches one ordered list gives.
        #[test]
        fn the_queues_match_as_one_ordered_list(
            ops in prop::collection::vec(op(), 0..80),
            ahead in prop::option::of(1..4usize),
        ) {
            for &kind in EngineKind::ALL {
                let mut q = queues(kind);
                if let Some(limit) = ahead {
                    q.limit_drain_ahead(limit);
                }
                let mut mpi = Mpi::default();
                let mut list = List::default();
                let (mut expected, mut got) = (Vec::new(), Vec::new());
                let mut waiting: Vec<(u64, Key)> = Vec::new();
                for (id, op) in ops.iter().enumerate() {
                    let id = id as u64;
                    match op {
                        Op::Post(p) => {
                            match list.unexpected.iter().position(|(_, e)| p.matches(e)) {
                                Some(i) => expected.push((id, list.unexpected.remove(i).unwrap().0)),
                                None => list.posted.push((id, *p)),
                            }
                            match q.post_drained(&mut mpi, *p, |_| id) {
                                Posted::Found(msg) => got.push((id, msg)),
                                Posted::Queued(key) => waiting.push((id, key)),
                            }
                        }
                        Op::Arrive(e) => {
                            match list.posted.iter().position(|(_, p)| p.matches(e)) {
                                Some(i) => expected.push((list.posted.remove(i).0, id)),
                                None => list.unexpected.push_back((id, *e)),
                            }
                            mpi.held.push_back((*e, id));
                        }
                        Op::Drain => {
                            q.drain(&mut mpi);
                        }
                        Op::Probe(p, probe) => {
                            // A probe sees what has been drained; the list sees it all, so
                            // drain first for a like comparison.
                            q.drain_all(&mut mpi);
                            let at = list.unexpected.iter().position(|(_, e)| p.matches(e));
                            let want_msg = at.map(|i| list.unexpected[i].0);
                            if *probe == Probe::Remove {
                                if let Some(i) = at {
                                    list.unexpected.remove(i);
                                }
                            }
                            prop_assert_eq!(q.probe(*p, *probe), want_msg, "engine {}", kind.name());
                        }
                        Op::Cancel(i) => {
                            q.drain(&mut mpi);
                            got.append(&mut mpi.matched);
                            let done: Vec<u64> = got.iter().map(|&(r, _)| r).collect();
                            waiting.retain(|(r, _)| !done.contains(r));
                            if let Some(&(recv, key)) = waiting.get(*i) {
                                prop_assert_eq!(q.cancel(key), Some(recv));
                                waiting.remove(*i);
                                list.posted.retain(|(r, _)| *r != recv);
                            }
                        }
                    }
                }
                q.drain(&mut mpi);
                got.append(&mut mpi.matched);
                expected.sort_unstable();
                got.sort_unstable();
                prop_assert_eq!(&expected, &got, "engine {}", kind.name());
            }
        }
    }
}
