//! The takeover policy: who matches a communicator's messages, MPI ("delegated") while its
//! queues are short or the shim's engine ("takeover") while they are long. A state machine fed
//! by counts (receives posted to MPI and seen complete, calls made) and clock values (a timed
//! call's ticks, the time now); it makes no call of its own. Its fields are atomics, read
//! without a lock on the plain path of every receive.
//!
//! With [`Policy::Auto`] the shim takes over when MPI's queues look deep: more than `2·D`
//! receives outstanding in MPI (D: the depth from which the shim pays), or [`DEEP_IN_A_ROW`]
//! timed calls in a row that searched deeper than D (more after takeovers they asked for that
//! did not pay: then the timing was fooled), confirmed by a warm probe of MPI's queue
//! ([`Takeover::confirmed`]). It gives matching back when its searches
//! since the takeover stayed below D/2 ([`Signals`]): at once when its queues are empty, else
//! after [`SETTLE_MATCHES`] shallow matches (a takeover that a busy node's timing or a long
//! queue matched in order asked for, and that does not pay). Unexpected messages it still
//! holds then stay with it while MPI matches the rest ([`Mode::Held`]). The episode paid if
//! its searches, as the MPI underneath would have made them ([`Model`](super::Model)),
//! averaged D or more; one that did not makes the next takeover wait for more receives
//! outstanding.
//! `Always` never delegates; `Flip(n)` switches every n receive calls.

use super::depth::Signals;
use super::fence;
pub use crate::config::Takeover as Policy;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Delegated = 0,
    Takeover = 1,
    /// Partly given back: the shim keeps the unexpected messages it drained (older than any
    /// MPI holds) and drains no more; a receive or probe that one of them fits takes it,
    /// every other goes to MPI as if delegated. Delegated once none is left.
    Held = 2,
}

/// How matching goes back to MPI from takeover ([`Takeover::give_back_due`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GiveBack {
    /// The shim keeps matching.
    Stay,
    /// Waiting receives go to MPI in posting order, then MPI matches everything.
    Whole,
    /// Waiting receives go to MPI in posting order; the shim keeps its unexpected messages
    /// ([`Mode::Held`]).
    KeepHeld,
}

/// MPI's search cost per queued element, both MPIs here (1.7 to 2.7 ns measured): converts a
/// receive's extra time in MPI into the depth of the search that took it.
pub const MPI_NS_PER_ELEMENT: u64 = 2;

/// Every this many receive calls on a delegated communicator one is timed.
pub const SAMPLE_EVERY: u32 = 64;

/// One nonblocking delegated receive in this many is followed to its completion and stands
/// for all of them in the count of receives MPI holds: following each one would cost a
/// registry entry per receive, more than MPI's own work for a small message.
pub const FOLLOW_EVERY: usize = 64;

/// Timed calls in a row that must have searched deep: a long queue makes every search slow, a
/// preempted process only some calls.
pub const DEEP_IN_A_ROW: u32 = 4;

/// An episode the timed calls asked for that did not pay multiplies the timed calls in a row
/// needed by this, up to [`DEEP_IN_A_ROW_MAX`]: they looked deep where the shim's searches were
/// not (a busy node, or MPI's progress inside the call), so the timing is trusted less.
pub const UNPAID_ROW_FACTOR: u32 = 4;
pub const DEEP_IN_A_ROW_MAX: u32 = 64;

/// An episode whose matches were all at the front (a long posted queue matched in order,
/// where MPI is quick) multiplies the outstanding-receive limit by this, or raises it past the
/// queue it saw if that is more: a queue as long does not ask again, and a program whose
/// queues grow wastes at most a couple of episodes. One whose searches would have paid in a
/// longer queue raises the limit by at most this, only past that queue, or to `2·D` plus the
/// share the shim would have needed ([`Signals::needed`]) if that is more: MPI keeps the
/// receives posted before the limit, so a higher limit leaves the shim a shorter share of a
/// longer queue.
pub const UNPAID_LIMIT_FACTOR: usize = 16;

/// How a takeover episode ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// Its searches were deep enough for the shim to beat MPI.
    Paid,
    /// They were not.
    Unpaid {
        /// The receives the shim would have needed to take over for them to pay (none: no
        /// number would).
        share: Option<usize>,
        /// The receives it took past those MPI held when it began: the shim's matches, and
        /// any it handed to MPI unmatched.
        matched: usize,
    },
}

impl Ended {
    /// How an episode whose matches had `signals` ended, against the depth at which the shim
    /// pays, with `unmatched` waiting receives it handed to MPI.
    fn judged(signals: &Signals, depth: u32, unmatched: usize) -> Ended {
        if signals.paid(depth) {
            Ended::Paid
        } else {
            Ended::Unpaid {
                share: signals.needed(depth),
                matched: signals.matches() as usize + unmatched,
            }
        }
    }
}

/// The part of an empty probe's time by which MPI's progress varies from probe to probe
/// (1 in this many): Open MPI's yields its core on an oversubscribed node, and a yield that
/// switches costs the scheduler's work, 2.1-3.2 us of CPU time against 2.1 (hpcc, 4 ranks on
/// 2 cores).
pub const PROGRESS_SPREAD: u64 = 4;

/// Matches a takeover must have made before its shallow searches give matching back while
/// its queues still hold something: a queue received in order shows itself within a few, and
/// a single shallow match of a deep phase does not end it.
pub const SETTLE_MATCHES: u64 = 32;

/// A communicator's mode, the signals that move it, and what the report says of it. The
/// fields the plain path of every receive reads and writes come first, in one cache line.
#[repr(C, align(64))]
pub struct Takeover {
    mode: AtomicU8,
    /// Threads may call at once (`MPI_THREAD_MULTIPLE`): the counters are in `shards`.
    multiple: bool,
    /// The policy is [`Policy::Auto`], the only one with a plain path.
    auto: bool,
    /// Below `MPI_THREAD_MULTIPLE`: auto, delegated, no dense calls left and outstanding
    /// receives within the limit, kept in one byte so that the plain path reads one
    /// ([`Takeover::refresh_plain`] after every change of those).
    plain_open: AtomicBool,
    /// Calls left that are all timed, after a switch to delegated.
    dense: AtomicU32,
    /// Receives MPI holds for this communicator (posted delegated, not yet seen complete), as
    /// the followed ones tell: each counts for the receives it stands for.
    outstanding: AtomicUsize,
    /// Outstanding receives above which MPI's posted queue counts as deep.
    limit: AtomicUsize,
    /// Outstanding receives when the episode under way began.
    outstanding_at_takeover: AtomicUsize,
    /// What each call writes, below `MPI_THREAD_MULTIPLE`.
    serial: Counters,
    /// What each call writes at `MPI_THREAD_MULTIPLE`, one shard per thread (none below it):
    /// threads calling at once write lines of their own, not one they would pass around.
    shards: Box<[Shard]>,
    /// The depth from which the shim pays (`MATCHSHIM_TAKEOVER_DEPTH`).
    depth: u32,
    /// The quickest timed receive calls, in clock ticks: MPI's cost with nothing to search, for
    /// calls that posted a receive and for calls that found their message at once (which
    /// moved it too).
    fastest: [AtomicU64; 2],
    /// Timed calls in a row whose extra time says the search was deep.
    deep_in_row: AtomicU32,
    /// How many in a row ask for a takeover.
    deep_needed: AtomicU32,
    /// The timed calls asked for the takeover under way (not the outstanding receives).
    timing_asked: AtomicBool,
    // What the report shows.
    switches: AtomicU64,
    /// Takeovers the timed calls asked for that a warm search found shallow.
    unconfirmed: AtomicU64,
    /// Times the shim took over, starting in takeover included.
    takeovers: AtomicU64,
    mode_since_ns: AtomicU64,
    time_ns: [AtomicU64; 3],
}

/// Shards of a communicator's per-call counters at `MPI_THREAD_MULTIPLE`.
const SHARDS: usize = 16;

/// The counters every receive call writes, for the calls of one thread (or of the threads
/// that share its shard).
#[derive(Default)]
struct Counters {
    /// Receives on their way into MPI (at `MPI_THREAD_MULTIPLE`).
    permits: AtomicUsize,
    /// Receive calls so far: the sampling and flipping clock.
    calls: AtomicU32,
    /// Nonblocking receives posted delegated: the clock that picks those followed.
    nonblocking: AtomicUsize,
    /// Receives that went to MPI while it matched.
    delegated_receives: AtomicUsize,
}

/// A thread's [`Counters`], two cache lines apart from the next (adjacent lines are fetched
/// in pairs), and its blocking receives and probes inside MPI as the user made them.
#[repr(align(128))]
#[derive(Default)]
struct Shard {
    counters: Counters,
    blocking: AtomicUsize,
}

/// This thread's shard index, counted from 0 in the order threads first ask. A caller that
/// keeps it may pass it to [`Takeover::plain_delegation`] (a thread-local costs a call in a
/// shared library).
#[inline]
pub fn thread_slot() -> usize {
    use std::cell::Cell;
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SLOT: Cell<usize> = const { Cell::new(usize::MAX) };
    }
    SLOT.with(|slot| {
        let mut n = slot.get();
        if n == usize::MAX {
            n = NEXT.fetch_add(1, Relaxed);
            slot.set(n);
        }
        n
    })
}

/// A receive on its way into MPI, from [`Takeover::enter_mpi`] and the like; at
/// `MPI_THREAD_MULTIPLE` it holds a permit of the thread's shard, which a switch to takeover
/// waits out, until it is dropped (once MPI has the receive). A blocking call's holds a
/// blocking mark instead, which makes a switch to takeover give up.
#[must_use]
pub struct Entry<'a>(Option<Permits<'a>>);

/// The permits of a thread's shard, and whether the thread owns the shard (the first
/// [`SHARDS`] threads do): then only it writes them, with plain stores.
struct Permits<'a> {
    count: &'a AtomicUsize,
    owned: bool,
}

impl Permits<'_> {
    #[inline(always)]
    fn add(&self, delta: isize) {
        if self.owned {
            let count = self.count.load(Relaxed).wrapping_add_signed(delta);
            // Release: what the thread did in MPI comes before the switch sees it left.
            self.count.store(count, Release);
        } else if delta > 0 {
            self.count.fetch_add(delta as usize, Release);
        } else {
            self.count.fetch_sub(delta.unsigned_abs(), Release);
        }
    }
}

impl Drop for Entry<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(permits) = &self.0 {
            permits.add(-1);
        }
    }
}

/// A receive-side call that may go to MPI as the user made it (see
/// [`Takeover::plain_delegation`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PlainCall {
    /// `MPI_Recv`, `MPI_Sendrecv`: block inside MPI, so only while nothing needs the shim's
    /// progress; at `MPI_THREAD_MULTIPLE` the entry holds a blocking mark, not a permit.
    Recv,
    /// `MPI_Irecv`: posts a receive MPI holds after the call; one in [`FOLLOW_EVERY`] is
    /// followed instead.
    Irecv,
    /// `MPI_Iprobe`, `MPI_Improbe`: return at once, receive nothing.
    Iprobe,
    /// `MPI_Probe`, `MPI_Mprobe`: block inside MPI as [`PlainCall::Recv`] does, receive
    /// nothing.
    Probe,
    /// `MPI_Start` of a persistent receive: posts a receive MPI holds after the call, each
    /// one counted ([`Takeover::posted_to_mpi`] by the caller).
    Start,
}

impl PlainCall {
    /// Blocks inside MPI until a message comes.
    #[inline(always)]
    pub fn blocks(self) -> bool {
        matches!(self, PlainCall::Recv | PlainCall::Probe)
    }
}

/// What a receive call on a delegated communicator should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    /// Go to MPI.
    Delegate,
    /// Go to MPI, timed: report the time with [`Takeover::timed`].
    DelegateTimed,
    /// Switch to takeover first.
    TakeOver,
}

impl Takeover {
    /// `found_floor`: MPI's cost of a receive call that finds its message with nothing else
    /// queued (see [`found_floor`]), so that a program whose first calls already search deep
    /// is seen to. `multiple`: at `MPI_THREAD_MULTIPLE`, threads may call at once.
    pub fn new(
        policy: Policy,
        depth: u32,
        (now_ns, found_floor): (u64, u64),
        multiple: bool,
    ) -> Takeover {
        let mode = if policy == Policy::Always {
            Mode::Takeover
        } else {
            Mode::Delegated
        };
        let shards = if multiple {
            fence::prepare();
            SHARDS
        } else {
            0
        };
        Takeover {
            mode: AtomicU8::new(mode as u8),
            multiple,
            auto: policy == Policy::Auto,
            plain_open: AtomicBool::new(false),
            dense: AtomicU32::new(4),
            outstanding: AtomicUsize::new(0),
            limit: AtomicUsize::new(2 * depth as usize),
            outstanding_at_takeover: AtomicUsize::new(0),
            serial: Counters::default(),
            shards: (0..shards).map(|_| Shard::default()).collect(),
            depth,
            fastest: [AtomicU64::new(u64::MAX), AtomicU64::new(found_floor)],
            deep_in_row: AtomicU32::new(0),
            deep_needed: AtomicU32::new(DEEP_IN_A_ROW),
            timing_asked: AtomicBool::new(false),
            unconfirmed: AtomicU64::new(0),
            switches: AtomicU64::new(0),
            takeovers: AtomicU64::new((mode == Mode::Takeover) as u64),
            mode_since_ns: AtomicU64::new(now_ns),
            time_ns: [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// Threads may call at once (`MPI_THREAD_MULTIPLE`).
    #[inline]
    fn multiple(&self) -> bool {
        self.multiple
    }

    /// The calling thread's shard.
    #[inline(always)]
    fn shard(&self) -> &Counters {
        if self.multiple() {
            self.shard_at(thread_slot())
        } else {
            &self.serial
        }
    }

    /// The shard of thread `slot` (at `MPI_THREAD_MULTIPLE`).
    #[inline(always)]
    fn shard_at(&self, slot: usize) -> &Counters {
        &self.shards[slot % SHARDS].counters
    }

    /// Every thread's counters.
    fn counters(&self) -> impl Iterator<Item = &Counters> {
        std::iter::once(&self.serial).chain(self.shards.iter().map(|s| &s.counters))
    }

    /// Matching went back to MPI with `receives` waiting in the shim, which MPI now holds:
    /// the report counts them among the receives posted to MPI.
    pub fn handed_to_mpi(&self, receives: usize) {
        add(
            &self.shard().delegated_receives,
            receives as isize,
            self.multiple(),
        );
    }

    /// A receive went to MPI; MPI holds it until its completion is seen, which `weight`
    /// receives' worth of the count waits for (0: the receive is not followed).
    #[inline]
    pub fn posted_to_mpi(&self, weight: usize) {
        let multiple = self.multiple();
        add(&self.shard().delegated_receives, 1, multiple);
        if weight > 0 {
            add(&self.outstanding, weight as isize, multiple);
            // More receives held can only close the plain path: the rest of it stands.
            if !multiple && self.plain_open.load(Relaxed) {
                self.plain_open.store(self.within_limit(), Relaxed);
            }
        }
    }

    /// A nonblocking receive goes to MPI: the weight to follow it with, [`FOLLOW_EVERY`] for
    /// one in that many and 0 for the others (of the calling thread's).
    #[inline]
    pub fn follow_nonblocking(&self) -> usize {
        let shard = self.shard();
        let n = shard.nonblocking.load(Relaxed).wrapping_add(1);
        shard.nonblocking.store(n, Relaxed);
        if n.is_multiple_of(FOLLOW_EVERY) {
            FOLLOW_EVERY
        } else {
            0
        }
    }

    /// MPI completed (or the user freed) a followed receive of `weight`.
    #[inline]
    pub fn completed_in_mpi(&self, weight: usize) {
        add(&self.outstanding, -(weight as isize), self.multiple());
        // Fewer receives held can only open the plain path: an open one stays so.
        if !self.plain_open.load(Relaxed) {
            self.refresh_plain();
        }
    }

    /// Sets `plain_open` from the fields it stands for (below `MPI_THREAD_MULTIPLE`, where
    /// only the calling thread changes them).
    #[inline]
    fn refresh_plain(&self) {
        if !self.multiple() {
            self.plain_open.store(self.plain_allowed(), Relaxed);
        }
    }

    /// Auto, delegated, no dense calls left and outstanding receives within the limit: the
    /// plain path may go on (at `MPI_THREAD_MULTIPLE` tested each call, below it kept in
    /// `plain_open`).
    #[inline(always)]
    fn plain_allowed(&self) -> bool {
        self.auto
            && self.mode() == Mode::Delegated
            && self.dense.load(Relaxed) == 0
            && self.within_limit()
    }

    /// The receives MPI holds are within the limit above which its queue counts as deep.
    #[inline(always)]
    fn within_limit(&self) -> bool {
        self.outstanding.load(Relaxed) <= self.limit.load(Relaxed)
    }

    #[inline]
    pub fn mode(&self) -> Mode {
        match self.mode.load(Acquire) {
            0 => Mode::Delegated,
            1 => Mode::Takeover,
            _ => Mode::Held,
        }
    }

    /// Enters MPI for a delegated receive: `None` if the communicator was taken over.
    /// At `MPI_THREAD_MULTIPLE` the entry holds a permit until dropped: the increment and the
    /// switch's store of the mode are sequentially consistent, so either this call sees the
    /// takeover or the switch sees the permit and waits.
    #[inline]
    pub fn enter_mpi(&self) -> Option<Entry<'_>> {
        if !self.multiple() {
            return (self.mode() == Mode::Delegated).then_some(Entry(None));
        }
        self.enter_permitted(self.permits(thread_slot()))
    }

    /// The permits of the shard of thread `slot`.
    #[inline(always)]
    fn permits(&self, slot: usize) -> Permits<'_> {
        Permits {
            count: &self.shard_at(slot).permits,
            owned: slot < SHARDS,
        }
    }

    /// Taken as permits are, but a switch to takeover that finds one gives up instead of
    /// waiting: the message a blocking receive or probe waits for may need the switching
    /// thread.
    fn blocking_marks(&self, slot: usize) -> Permits<'_> {
        Permits {
            count: &self.shards[slot % SHARDS].blocking,
            owned: slot < SHARDS,
        }
    }

    /// Whether a thread's blocking receive or probe is inside MPI as the user made it.
    fn blocked_in_mpi(&self) -> bool {
        self.shards.iter().any(|s| s.blocking.load(Acquire) > 0)
    }

    /// Takes a permit, then checks the mode: the permit's store and the switch's store of the
    /// mode are each fenced from the load that follows ([`fence`]), so either this call sees
    /// the takeover or the switch sees the permit and waits.
    #[inline(always)]
    fn enter_permitted<'a>(&'a self, permits: Permits<'a>) -> Option<Entry<'a>> {
        permits.add(1);
        fence::light();
        if self.mode.load(Relaxed) == Mode::Delegated as u8 {
            return Some(Entry(Some(permits)));
        }
        permits.add(-1);
        None
    }

    /// Enters MPI for a receive no held message fits ([`Mode::Held`]); the caller holds the
    /// communicator's queues lock, under which the mode changes, so no check is needed.
    #[inline]
    pub fn enter_mpi_held(&self) -> Entry<'_> {
        if !self.multiple() {
            return Entry(None);
        }
        let permits = self.permits(thread_slot());
        permits.add(1);
        Entry(Some(permits))
    }

    /// Switches mode; the caller holds the communicator's queues lock. To takeover, waits for
    /// receives on their way into MPI (from [`Mode::Held`] too), or gives up while a blocking
    /// receive or probe is inside MPI ([`PlainCall::blocks`]): false then, the mode unchanged.
    pub fn switch(&self, mode: Mode, now_ns: u64) -> bool {
        let old = self.mode();
        if old == mode {
            return true;
        }
        if mode == Mode::Takeover && self.blocked_in_mpi() {
            return false;
        }
        self.mode.store(mode as u8, SeqCst);
        if mode == Mode::Takeover {
            fence::heavy();
            if self.blocked_in_mpi() {
                // Nothing was drained meanwhile (the caller holds the lock): calls that saw
                // takeover find the old mode under the lock.
                self.mode.store(old as u8, SeqCst);
                return false;
            }
            for counters in self.counters() {
                while counters.permits.load(Acquire) > 0 {
                    std::hint::spin_loop();
                }
            }
        } else if old == Mode::Takeover {
            self.dense.store(4, Relaxed);
            self.deep_in_row.store(0, Relaxed);
        }
        self.refresh_plain();
        let since = self.mode_since_ns.swap(now_ns, Relaxed);
        self.time_ns[old as usize].fetch_add(now_ns.saturating_sub(since), Relaxed);
        self.switches.fetch_add(1, Relaxed);
        if mode == Mode::Takeover {
            self.takeovers.fetch_add(1, Relaxed);
            self.outstanding_at_takeover
                .store(self.outstanding.load(Relaxed), Relaxed);
        }
        true
    }

    /// Mode switches so far.
    pub fn switches(&self) -> u64 {
        self.switches.load(Relaxed)
    }

    /// Times the shim took over the matching, starting in takeover included.
    pub fn takeovers(&self) -> u64 {
        self.takeovers.load(Relaxed)
    }

    /// Receives MPI holds as counted: the followed ones, each standing for [`FOLLOW_EVERY`].
    pub fn receives_in_mpi(&self) -> u64 {
        self.outstanding.load(Relaxed) as u64
    }

    /// Receives that went to MPI while it matched.
    pub fn delegated_receives(&self) -> u64 {
        let sum = self.counters();
        sum.map(|c| c.delegated_receives.load(Relaxed) as u64).sum()
    }

    /// Time spent in each mode so far, ns (delegated, takeover, held).
    pub fn time_in(&self, now_ns: u64) -> [u64; 3] {
        let mut time = self.time_ns.each_ref().map(|t| t.load(Relaxed));
        time[self.mode() as usize] += now_ns.saturating_sub(self.mode_since_ns.load(Relaxed));
        time
    }

    /// A receive call on a delegated communicator: where it goes under `policy`.
    #[inline]
    pub fn delegated_call(&self, policy: Policy) -> Call {
        // Counters need no atomic increment: a lost count only shifts the sampling.
        let shard = self.shard();
        let calls = shard.calls.load(Relaxed).wrapping_add(1);
        shard.calls.store(calls, Relaxed);
        match policy {
            Policy::Always => Call::TakeOver,
            Policy::Flip(n) => {
                if calls.is_multiple_of(n) {
                    Call::TakeOver
                } else {
                    Call::Delegate
                }
            }
            Policy::Auto => {
                if !self.within_limit() {
                    self.timing_asked.store(false, Relaxed);
                    return Call::TakeOver;
                }
                let dense = self.dense.load(Relaxed);
                if dense > 0 {
                    self.dense.store(dense - 1, Relaxed);
                    self.refresh_plain();
                    return Call::DelegateTimed;
                }
                if calls.is_multiple_of(SAMPLE_EVERY) {
                    Call::DelegateTimed
                } else {
                    Call::Delegate
                }
            }
        }
    }

    /// A receive-side call on this communicator that goes to MPI with nothing to watch:
    /// delegated under `auto`, neither timed nor (posting a receive) followed, and no takeover
    /// due. Counts it as [`Takeover::delegated_call`] and [`Takeover::posted_to_mpi`] would;
    /// `None` leaves everything as it was, for the full path to decide. At
    /// `MPI_THREAD_MULTIPLE` the entry holds a permit as [`Takeover::enter_mpi`]'s does, in the
    /// shard of `slot` (the thread's [`thread_slot`]): the caller calls MPI, then drops it.
    #[inline(always)]
    pub fn plain_delegation(&self, call: PlainCall, slot: usize) -> Option<Entry<'_>> {
        if !self.multiple() {
            return self.plain_delegation_serial(call).then_some(Entry(None));
        }
        self.plainly_counted(call, slot, true)
    }

    /// [`Takeover::plain_delegation`] below `MPI_THREAD_MULTIPLE`, which the caller knows: the
    /// path then calls nothing.
    #[inline(always)]
    pub fn plain_delegation_serial(&self, call: PlainCall) -> bool {
        debug_assert!(!self.multiple());
        self.plainly_counted(call, 0, false).is_some()
    }

    /// The test and counting of [`Takeover::plain_delegation`] on `shard`.
    #[inline(always)]
    fn plainly_counted(&self, call: PlainCall, slot: usize, multiple: bool) -> Option<Entry<'_>> {
        let open = if multiple {
            self.plain_allowed()
        } else {
            self.plain_open.load(Relaxed)
        };
        if !open {
            return None;
        }
        let shard = if multiple {
            self.shard_at(slot)
        } else {
            &self.serial
        };
        let posting = call == PlainCall::Irecv;
        let calls = shard.calls.load(Relaxed).wrapping_add(1);
        let followed = shard
            .nonblocking
            .load(Relaxed)
            .wrapping_add(posting as usize);
        if calls.is_multiple_of(SAMPLE_EVERY) || (posting && followed.is_multiple_of(FOLLOW_EVERY))
        {
            return None;
        }
        let entry = if multiple && call.blocks() {
            self.enter_permitted(self.blocking_marks(slot))?
        } else if multiple {
            self.enter_permitted(self.permits(slot))?
        } else {
            Entry(None)
        };
        shard.calls.store(calls, Relaxed);
        if posting {
            shard.nonblocking.store(followed, Relaxed);
        }
        if matches!(call, PlainCall::Recv | PlainCall::Irecv) {
            // Only the thread that owns a shard writes it.
            add(&shard.delegated_receives, 1, multiple && slot >= SHARDS);
        }
        Some(entry)
    }

    /// Taking back receives lent to MPI (see `protocol`, point 6): whether to go on after a
    /// cancel that took `ticks` at `ticks_per_ns`. A cancel as slow as MPI's search of the
    /// depth at which the shim pays walked MPI's queue to find its receive (MPICH does), so
    /// each further one would walk nearly as far. That is paid only while the shim's matching
    /// here has paid or not been tried (no takeover ended without paying); else the rest stay
    /// in MPI, which matches them as it would have without the shim.
    #[inline]
    pub fn taking_back_pays(&self, ticks: u64, ticks_per_ns: f64) -> bool {
        let unpaid = self.limit.load(Relaxed) > 2 * self.depth as usize;
        !unpaid || ticks < self.deep_ticks(ticks_per_ns)
    }

    /// After a loan (`protocol`, point 6): whether the shim takes over again, given how many
    /// of the receives lent MPI matched during its call and how many came back. Under `auto`
    /// a loan MPI matched mostly says the messages come while MPI holds the receives, as in a
    /// program that posts its receives, then joins a collective its peers join after sending:
    /// lending them for each blocking call (a post and a cancel in MPI apiece) costs more
    /// than the takeover saves. The episode then ends unpaid and matching stays with MPI.
    pub fn takes_over_after_loan(&self, matched_by_mpi: usize, taken_back: usize) -> bool {
        if !self.auto || matched_by_mpi <= taken_back {
            return true;
        }
        self.episode_ended(Ended::Unpaid {
            share: None,
            matched: 0,
        });
        false
    }

    /// Before a blocking call MPI runs, the takeover under way handed its `waiting` receives
    /// to MPI for good (`protocol`, point 3: at `MPI_THREAD_MULTIPLE`, or where they cannot be
    /// lent). Under `auto` that ends the episode, judged by the matches it made: a takeover of
    /// a queue that a collective always separates from its messages (a barrier between
    /// posting and sending in a program at `MPI_THREAD_MULTIPLE`) matches nothing, so its
    /// queue, the waiting receives included, must not ask again.
    pub fn handed_over(&self, signals: &Signals, waiting: usize) {
        if self.auto {
            self.episode_ended(Ended::judged(signals, self.depth, waiting));
        }
    }

    /// MPI's time to search the depth at which the shim pays, in ticks at `ticks_per_ns`.
    #[inline]
    fn deep_ticks(&self, ticks_per_ns: f64) -> u64 {
        ((self.depth as u64 * MPI_NS_PER_ELEMENT) as f64 * ticks_per_ns) as u64
    }

    /// A timed receive call took `ticks` inside MPI, at `ticks_per_ns` (`found`: it found its
    /// message at once); true when enough in a row ([`DEEP_IN_A_ROW`], more after takeovers that
    /// did not pay) searched deeper than the depth at which the shim pays, against the quickest
    /// calls of the same kind.
    #[inline]
    pub fn timed(&self, ticks: u64, ticks_per_ns: f64, found: impl FnOnce() -> bool) -> bool {
        let deep_ticks = self.deep_ticks(ticks_per_ns);
        // Shallow against the cheaper kind's floor: then the kind needs no asking (which
        // may cost MPI a round of progress).
        let posted_floor = self.fastest[0].load(Relaxed);
        if posted_floor != u64::MAX && ticks < posted_floor.saturating_add(deep_ticks) {
            self.deep_in_row.store(0, Relaxed);
            return false;
        }
        let found = found();
        let fastest = self.fastest[found as usize].load(Relaxed).min(ticks);
        self.fastest[found as usize].store(fastest, Relaxed);
        let deep = ticks - fastest >= deep_ticks;
        let in_row = if deep {
            self.deep_in_row.load(Relaxed) + 1
        } else {
            0
        };
        self.deep_in_row.store(in_row, Relaxed);
        let asks = in_row >= self.deep_needed.load(Relaxed);
        if asks {
            self.timing_asked.store(true, Relaxed);
        }
        asks
    }

    /// Whether MPI's queue is deep, as the timed calls that asked for a takeover said
    /// ([`Takeover::timed`]), by a warm search right after them: `searched` for the quickest
    /// probe of the last timed call's pattern, `floor` for the middle one of the probes of an
    /// empty communicator (MPI's progress, no queue) among them, in units of `ticks_per_ns`.
    /// The search must outlast the floor by the depth's time and by [`PROGRESS_SPREAD`] of
    /// the floor. A call slowed by something else than its search (caches a program's
    /// computing emptied, a preempted process) is not slow again: the timed calls in a row
    /// count from none.
    #[inline]
    pub fn confirmed(&self, floor: u64, searched: u64, ticks_per_ns: f64) -> bool {
        let margin = self.deep_ticks(ticks_per_ns).max(floor / PROGRESS_SPREAD);
        let deep = searched.saturating_sub(floor) >= margin;
        if !deep {
            self.deep_in_row.store(0, Relaxed);
            self.timing_asked.store(false, Relaxed);
            self.unconfirmed.fetch_add(1, Relaxed);
        }
        deep
    }

    /// Takeovers timed calls asked for that a warm search did not confirm.
    pub fn unconfirmed(&self) -> u64 {
        self.unconfirmed.load(Relaxed)
    }

    /// A receive call on a taken-over communicator: whether matching goes back to MPI now,
    /// given what the shim's queues hold (`queued`: posted receives, unexpected messages) and
    /// the depths its matches had. Under `auto`, when the searches since the takeover stayed
    /// shallow: as soon as the queues are empty, or after [`SETTLE_MATCHES`] matches while they
    /// still hold something (keeping unexpected messages, if any); that ends the episode, its
    /// waiting receives counted as taken. Under `flip:N` every N-th call, keeping unexpected
    /// messages if any.
    #[inline]
    pub fn give_back_due(
        &self,
        policy: Policy,
        queued: (usize, usize),
        signals: &Signals,
    ) -> GiveBack {
        let due = match policy {
            Policy::Always => false,
            Policy::Auto => {
                let due = if queued == (0, 0) {
                    signals.shallow(self.depth)
                } else {
                    signals.settled(self.depth, SETTLE_MATCHES)
                };
                if due {
                    // Its waiting receives go to MPI unmatched.
                    self.episode_ended(Ended::judged(signals, self.depth, queued.0));
                }
                due
            }
            Policy::Flip(n) => {
                let shard = self.shard();
                let calls = shard.calls.load(Relaxed).wrapping_add(1);
                shard.calls.store(calls, Relaxed);
                calls.is_multiple_of(n)
            }
        };
        match (due, queued.1) {
            (false, _) => GiveBack::Stay,
            (true, 0) => GiveBack::Whole,
            (true, _) => GiveBack::KeepHeld,
        }
    }

    /// A takeover episode ended. One that did not pay makes the next one start later (MPI
    /// must hold more receives, see [`UNPAID_LIMIT_FACTOR`]; where the timed calls asked for
    /// it, four times as many of them in a row deep), one that paid brings the start back to
    /// `2·depth` receives outstanding or [`DEEP_IN_A_ROW`] deep calls.
    fn episode_ended(&self, ended: Ended) {
        let base = 2 * self.depth as usize;
        let needed = self.deep_needed.load(Relaxed);
        let (limit, needed) = if let Ended::Unpaid { share, matched } = ended {
            let old = self.limit.load(Relaxed);
            let grown = old * UNPAID_LIMIT_FACTOR;
            let queue = self.outstanding_at_takeover.load(Relaxed) + matched;
            // The count of receives MPI holds moves in steps of FOLLOW_EVERY: the margin keeps
            // a queue as long as this one from asking again.
            let limit = match share {
                None => grown.max(queue + FOLLOW_EVERY),
                Some(share) => grown.min((base + share).max(queue) + FOLLOW_EVERY).max(old),
            }
            .min(base << 16);
            if self.timing_asked.load(Relaxed) {
                (limit, (needed * UNPAID_ROW_FACTOR).min(DEEP_IN_A_ROW_MAX))
            } else {
                (limit, needed)
            }
        } else {
            (base, DEEP_IN_A_ROW)
        };
        self.limit.store(limit, Relaxed);
        self.refresh_plain();
        self.deep_needed.store(needed, Relaxed);
    }
}

/// Adds to a counter: atomically only where threads may race (`MPI_THREAD_MULTIPLE`), since an
/// atomic add costs some twenty cycles on the path of every receive.
#[inline]
fn add(counter: &AtomicUsize, delta: isize, multiple: bool) {
    if multiple {
        if delta >= 0 {
            counter.fetch_add(delta as usize, Relaxed);
        } else {
            counter.fetch_sub(delta.unsigned_abs(), Relaxed);
        }
    } else {
        counter.store(counter.load(Relaxed).wrapping_add_signed(delta), Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An episode where every match was at the front.
    const UNPAID: Ended = Ended::Unpaid {
        share: None,
        matched: 0,
    };

    #[test]
    fn deep_timed_calls_in_a_row_ask_for_takeover() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        let deep = 100 + 64 * MPI_NS_PER_ELEMENT;
        assert!(!t.timed(100, 1.0, || false));
        for _ in 1..DEEP_IN_A_ROW {
            assert!(!t.timed(deep, 1.0, || false));
        }
        assert!(
            !t.timed(150, 1.0, || false),
            "a shallow call breaks the row"
        );
        for _ in 1..DEEP_IN_A_ROW {
            assert!(!t.timed(deep, 1.0, || false));
        }
        assert!(t.timed(deep, 1.0, || false));
        assert!(
            !t.timed(deep / 2, 2.0, || false),
            "the same time at twice the rate is shallow"
        );
        t.episode_ended(UNPAID);
        let needed = DEEP_IN_A_ROW * UNPAID_ROW_FACTOR;
        for _ in 1..needed {
            assert!(
                !t.timed(deep, 1.0, || false),
                "after a takeover that did not pay, more deep calls in a row are needed"
            );
        }
        assert!(t.timed(deep, 1.0, || false));
        for _ in 0..8 {
            t.episode_ended(UNPAID);
        }
        assert!(!t.timed(150, 1.0, || false));
        for _ in 1..DEEP_IN_A_ROW_MAX {
            assert!(!t.timed(deep, 1.0, || false));
        }
        assert!(t.timed(deep, 1.0, || false), "the count needed is bounded");
        t.episode_ended(Ended::Paid);
        assert!(!t.timed(150, 1.0, || false));
        for _ in 1..DEEP_IN_A_ROW {
            assert!(!t.timed(deep, 1.0, || false));
        }
        assert!(t.timed(deep, 1.0, || false), "one that paid brings it back");
    }

    #[test]
    fn a_takeover_the_timing_asked_for_waits_for_a_warm_search_to_confirm_it() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        let deep_search = 64 * MPI_NS_PER_ELEMENT;
        let ask = |t: &Takeover| {
            assert!(!t.timed(100, 1.0, || false));
            for _ in 1..DEEP_IN_A_ROW {
                assert!(!t.timed(100 + deep_search, 1.0, || false));
            }
            assert!(t.timed(100 + deep_search, 1.0, || false));
        };
        ask(&t);
        assert!(
            !t.confirmed(300, 300 + deep_search - 1, 1.0),
            "a probe as quick as the empty communicator's plus less than the depth: shallow"
        );
        assert_eq!(t.unconfirmed(), 1);
        for _ in 1..DEEP_IN_A_ROW {
            assert!(
                !t.timed(100 + deep_search, 1.0, || false),
                "the row counts again from none"
            );
        }
        assert!(t.timed(100 + deep_search, 1.0, || false));
        assert!(
            !t.confirmed(300, 100, 1.0),
            "a probe that found its message at once is quicker than the floor's progress"
        );
        t.episode_ended(UNPAID);
        assert_eq!(
            t.deep_needed.load(Relaxed),
            DEEP_IN_A_ROW,
            "an unconfirmed ask is not the timing's takeover: nothing to distrust"
        );
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        ask(&t);
        assert!(
            !t.confirmed(300, 300 + deep_search, 2.0),
            "the same time at twice the rate is half the depth"
        );
        ask(&t);
        assert!(
            !t.confirmed(8000, 8000 + 8000 / PROGRESS_SPREAD - 1, 1.0),
            "a yielding progress of 8 us: less than its spread is no search"
        );
        ask(&t);
        assert!(t.confirmed(8000, 8000 + 8000 / PROGRESS_SPREAD, 1.0));
        ask(&t);
        assert!(t.confirmed(300, 300 + deep_search, 1.0));
        assert_eq!(t.unconfirmed(), 2);
        t.episode_ended(UNPAID);
        assert_eq!(
            t.deep_needed.load(Relaxed),
            DEEP_IN_A_ROW * UNPAID_ROW_FACTOR,
            "a confirmed takeover that did not pay makes the timing ask for more"
        );
    }

    #[test]
    fn an_unpaid_takeover_the_outstanding_receives_asked_for_leaves_the_timing_alone() {
        let t = Takeover::new(Policy::Auto, 8, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.outstanding.store(17, Relaxed);
        assert!(t.delegated_call(Policy::Auto) == Call::TakeOver);
        t.episode_ended(UNPAID);
        let deep = 100 + 8 * MPI_NS_PER_ELEMENT;
        assert!(!t.timed(100, 1.0, || false));
        for _ in 1..DEEP_IN_A_ROW {
            assert!(!t.timed(deep, 1.0, || false));
        }
        assert!(t.timed(deep, 1.0, || false));
    }

    #[test]
    fn a_queue_received_in_reverse_from_the_first_call_is_deep_against_the_found_floor() {
        let t = Takeover::new(Policy::Auto, 64, (0, 100), false);
        // Each call finds its message, each searching a little less deep than the one before.
        let depths = [4096, 4080, 4064, 4048];
        for (i, depth) in depths.iter().enumerate() {
            let asked = t.timed(100 + depth * MPI_NS_PER_ELEMENT, 1.0, || true);
            assert_eq!(asked, i + 1 == depths.len());
        }
    }

    #[test]
    fn calls_that_found_their_message_are_compared_among_themselves() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        assert!(!t.timed(100, 1.0, || false));
        // Moving the message costs more than posting a receive: not a deeper search.
        for _ in 0..2 * DEEP_IN_A_ROW {
            assert!(!t.timed(100 + 200 * MPI_NS_PER_ELEMENT, 1.0, || true));
        }
        // Shallow against the posted floor: the kind is not asked for.
        assert!(!t.timed(110, 1.0, || unreachable!("asked")));
    }

    #[test]
    fn many_outstanding_receives_ask_for_takeover_and_episodes_move_the_limit() {
        let t = Takeover::new(Policy::Auto, 8, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.outstanding.store(16, Relaxed);
        assert!(t.delegated_call(Policy::Auto) != Call::TakeOver);
        t.outstanding.store(17, Relaxed);
        assert!(t.delegated_call(Policy::Auto) == Call::TakeOver);
        t.episode_ended(UNPAID);
        t.outstanding.store(16 * UNPAID_LIMIT_FACTOR, Relaxed);
        assert!(
            t.delegated_call(Policy::Auto) != Call::TakeOver,
            "limit now 16 times higher"
        );
        t.outstanding.store(16 * UNPAID_LIMIT_FACTOR + 1, Relaxed);
        assert!(t.delegated_call(Policy::Auto) == Call::TakeOver);
        t.outstanding.store(17, Relaxed);
        t.episode_ended(Ended::Paid);
        assert!(t.delegated_call(Policy::Auto) == Call::TakeOver);
    }

    #[test]
    fn plain_delegations_leave_the_sampled_and_followed_calls_to_the_full_path() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        assert!(
            !t.plain_delegation_serial(PlainCall::Recv),
            "timed after creation"
        );
        t.dense.store(0, Relaxed);
        t.refresh_plain();
        let total = SAMPLE_EVERY as usize * FOLLOW_EVERY;
        let (mut full, mut timed, mut followed) = (0, 0, 0);
        for _ in 0..total {
            if t.plain_delegation_serial(PlainCall::Irecv) {
                continue;
            }
            // What the full path then does with the same call.
            full += 1;
            if t.delegated_call(Policy::Auto) == Call::DelegateTimed {
                timed += 1;
            }
            if t.follow_nonblocking() > 0 {
                followed += 1;
            }
        }
        assert_eq!(timed, total / SAMPLE_EVERY as usize);
        assert_eq!(followed, total / FOLLOW_EVERY);
        assert_eq!(full, total / SAMPLE_EVERY as usize, "the rest went plainly");
        assert_eq!(t.delegated_receives() as usize, total - full);
        for policy in [Policy::Always, Policy::Flip(3)] {
            let t = Takeover::new(policy, 64, (0, u64::MAX), false);
            t.dense.store(0, Relaxed);
            t.mode.store(Mode::Delegated as u8, Relaxed);
            t.refresh_plain();
            assert!(!t.plain_delegation_serial(PlainCall::Recv));
        }
        t.outstanding.store(1 << 20, Relaxed);
        t.refresh_plain();
        assert!(!t.plain_delegation_serial(PlainCall::Iprobe));
    }

    #[test]
    fn plain_starts_leave_only_the_sampled_calls_to_the_full_path() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.refresh_plain();
        let total = SAMPLE_EVERY as usize * FOLLOW_EVERY;
        let mut full = 0;
        for _ in 0..total {
            if t.plain_delegation_serial(PlainCall::Start) {
                // What the caller counts for a start MPI runs, and its completion.
                t.posted_to_mpi(1);
                assert_eq!(t.receives_in_mpi(), 1);
                t.completed_in_mpi(1);
            } else {
                full += 1;
                t.delegated_call(Policy::Auto);
            }
        }
        assert_eq!(
            full,
            total / SAMPLE_EVERY as usize,
            "each start is counted, none followed"
        );
        assert_eq!(
            t.delegated_receives() as usize,
            total - full,
            "counted once, by the caller"
        );
        assert_eq!(t.receives_in_mpi(), 0);
    }

    #[test]
    fn the_serial_plain_path_opens_and_closes_with_what_it_stands_for() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        let plain = |t: &Takeover| t.plain_open.load(Relaxed);
        for _ in 0..4 {
            assert!(!plain(&t), "closed while calls are all timed");
            assert_eq!(t.delegated_call(Policy::Auto), Call::DelegateTimed);
        }
        assert!(plain(&t), "open once the dense calls are done");
        t.posted_to_mpi(FOLLOW_EVERY);
        t.posted_to_mpi(FOLLOW_EVERY);
        assert!(plain(&t), "128 outstanding: at the limit");
        t.posted_to_mpi(FOLLOW_EVERY);
        assert!(!plain(&t), "above the limit");
        t.completed_in_mpi(FOLLOW_EVERY);
        assert!(plain(&t), "back within it");
        t.switch(Mode::Takeover, 10);
        assert!(!plain(&t), "taken over");
        t.switch(Mode::Delegated, 20);
        assert!(!plain(&t), "dense calls again after a takeover");
        for _ in 0..4 {
            t.delegated_call(Policy::Auto);
        }
        assert!(plain(&t));
        t.posted_to_mpi(2 * FOLLOW_EVERY);
        assert!(!plain(&t));
        t.episode_ended(UNPAID);
        assert!(plain(&t), "a takeover that did not pay raised the limit");
        let threaded = Takeover::new(Policy::Auto, 64, (0, u64::MAX), true);
        for _ in 0..4 {
            threaded.delegated_call(Policy::Auto);
        }
        assert!(
            !plain(&threaded),
            "at MPI_THREAD_MULTIPLE the tests are made each call"
        );
    }

    proptest::proptest! {
        /// Posting and completing change `plain_open` only where they can (a post can only
        /// close it, a completion only open it): after any mix of the changes below
        /// `MPI_THREAD_MULTIPLE` it still says what it stands for.
        #[test]
        fn the_kept_plain_test_stays_what_it_stands_for(
            steps in proptest::collection::vec((0u8..6, 0usize..3), 0..200),
        ) {
            let t = Takeover::new(Policy::Auto, 16, (0, u64::MAX), false);
            let mut held = Vec::new();
            for (now, (step, size)) in (1u64..).zip(steps) {
                let weight = [0, 1, FOLLOW_EVERY][size];
                match step {
                    0 | 1 => {
                        t.posted_to_mpi(weight);
                        held.push(weight);
                    }
                    2 => {
                        if let Some(weight) = held.pop() {
                            t.completed_in_mpi(weight);
                        }
                    }
                    3 => {
                        t.delegated_call(Policy::Auto);
                    }
                    4 => {
                        let mode = [Mode::Delegated, Mode::Takeover, Mode::Held][size];
                        t.switch(mode, now);
                    }
                    _ => t.episode_ended(if size == 0 { Ended::Paid } else { UNPAID }),
                }
                proptest::prop_assert_eq!(t.plain_open.load(Relaxed), t.plain_allowed());
            }
        }
    }

    #[test]
    fn a_threaded_plain_delegation_holds_its_shards_permit_until_dropped() {
        // An owned shard, and one a thread beyond the first SHARDS shares.
        for slot in [1, SHARDS + 1] {
            let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), true);
            t.dense.store(0, Relaxed);
            let permits = |t: &Takeover| t.shards[slot % SHARDS].counters.permits.load(SeqCst);
            let entry = t.plain_delegation(PlainCall::Iprobe, slot).expect("plain");
            assert_eq!(permits(&t), 1);
            drop(entry);
            assert_eq!(permits(&t), 0);
            t.switch(Mode::Takeover, 10);
            assert!(t.plain_delegation(PlainCall::Iprobe, slot).is_none());
            assert_eq!(permits(&t), 0, "a refused entry leaves no permit");
        }
    }

    #[test]
    fn a_blocking_call_inside_mpi_makes_a_switch_to_takeover_give_up() {
        for (call, receives) in [(PlainCall::Recv, 1), (PlainCall::Probe, 0)] {
            for slot in [1, SHARDS + 1] {
                let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), true);
                t.dense.store(0, Relaxed);
                let shard = |t: &Takeover| {
                    let s = &t.shards[slot % SHARDS];
                    (s.blocking.load(SeqCst), s.counters.permits.load(SeqCst))
                };
                let entry = t.plain_delegation(call, slot).expect("plain");
                assert_eq!(shard(&t), (1, 0), "{call:?}: a blocking mark, no permit");
                assert_eq!(t.delegated_receives(), receives, "{call:?}");
                assert!(!t.switch(Mode::Takeover, 10));
                assert_eq!(t.mode(), Mode::Delegated);
                assert_eq!((t.switches(), t.takeovers()), (0, 0));
                drop(entry);
                assert_eq!(shard(&t), (0, 0));
                assert!(t.switch(Mode::Takeover, 20));
                assert!(t.plain_delegation(call, slot).is_none());
                assert_eq!(
                    shard(&t),
                    (0, 0),
                    "{call:?}: a refused entry leaves no mark"
                );
            }
        }
    }

    #[test]
    fn the_plain_path_reads_one_cache_line() {
        assert!(std::mem::offset_of!(Takeover, shards) <= 64);
        assert_eq!(std::mem::align_of::<Takeover>(), 64);
    }

    #[test]
    fn switches_are_counted_with_time_per_mode() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        t.switch(Mode::Takeover, 100);
        t.switch(Mode::Takeover, 150);
        t.switch(Mode::Delegated, 400);
        assert_eq!(t.switches(), 2);
        assert_eq!(t.takeovers(), 1);
        assert_eq!(t.time_in(1000), [100 + 600, 300, 0]);
        let always = Takeover::new(Policy::Always, 64, (0, u64::MAX), false);
        assert_eq!(always.takeovers(), 1, "starting in takeover is one");
        always.switch(Mode::Delegated, 10);
        always.switch(Mode::Takeover, 20);
        assert_eq!((always.switches(), always.takeovers()), (2, 2));
    }

    #[test]
    fn shallow_takeovers_give_matching_back_keeping_held_messages() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        let shallow = |matches| {
            let mut s = Signals::default();
            (0..matches).for_each(|_| s.observe(0));
            s
        };
        let few = shallow(1);
        assert_eq!(
            t.give_back_due(Policy::Always, (0, 0), &few),
            GiveBack::Stay
        );
        assert_eq!(t.give_back_due(Policy::Auto, (0, 0), &few), GiveBack::Whole);
        assert_eq!(
            t.give_back_due(Policy::Auto, (1, 0), &few),
            GiveBack::Stay,
            "a receive waits and one match says little"
        );
        let settled = shallow(SETTLE_MATCHES);
        assert_eq!(
            t.give_back_due(Policy::Auto, (5, 0), &settled),
            GiveBack::Whole
        );
        assert_eq!(
            t.give_back_due(Policy::Auto, (5, 4000), &settled),
            GiveBack::KeepHeld
        );
        let deep = {
            let mut s = Signals::default();
            (0..64).for_each(|_| s.observe(200));
            s
        };
        assert_eq!(
            t.give_back_due(Policy::Auto, (0, 0), &deep),
            GiveBack::Stay,
            "still paying"
        );
        // flip:3: every third call gives back, keeping held messages.
        let flip: Vec<GiveBack> = [0, 1, 1, 0, 0, 0]
            .iter()
            .map(|&u| t.give_back_due(Policy::Flip(3), (0, u), &few))
            .collect();
        use GiveBack::*;
        assert_eq!(flip, [Stay, Stay, KeepHeld, Stay, Stay, Whole]);
    }

    #[test]
    fn held_mode_counts_its_own_time_and_gives_permits_only_under_the_lock() {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), true);
        t.switch(Mode::Takeover, 10);
        t.switch(Mode::Held, 30);
        assert_eq!(t.mode(), Mode::Held);
        let held = t.enter_mpi_held();
        assert!(
            t.enter_mpi().is_none(),
            "only the lock holder routes in held mode"
        );
        drop(held);
        t.switch(Mode::Takeover, 60);
        t.switch(Mode::Delegated, 100);
        assert_eq!(t.time_in(100), [10, 60, 30]);
        assert_eq!((t.switches(), t.takeovers()), (4, 2));
    }

    #[test]
    fn an_episode_that_did_not_pay_makes_the_next_takeover_wait() {
        let t = Takeover::new(Policy::Auto, 8, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.outstanding.store(17, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        let mut shallow = Signals::default();
        shallow.observe(0);
        assert_eq!(
            t.give_back_due(Policy::Auto, (0, 0), &shallow),
            GiveBack::Whole
        );
        assert_ne!(
            t.delegated_call(Policy::Auto),
            Call::TakeOver,
            "limit raised"
        );
    }

    #[test]
    fn a_takeover_that_nearly_paid_waits_for_the_share_that_would_pay() {
        let t = Takeover::new(Policy::Auto, 8, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.outstanding.store(17, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        // 20 matches 14 deep, then 20 at the front: 7 deep on average, shallow by now. Twice
        // the matches, 14 deep on average, would have paid.
        let mut nearly = Signals::default();
        for depth in [14, 0] {
            for _ in 0..20 {
                nearly.observe(depth);
            }
        }
        assert_eq!(
            t.give_back_due(Policy::Auto, (0, 0), &nearly),
            GiveBack::Whole
        );
        let limit = 16 + 46 + FOLLOW_EVERY;
        t.outstanding.store(limit, Relaxed);
        assert_ne!(t.delegated_call(Policy::Auto), Call::TakeOver);
        t.outstanding.store(limit + 1, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        // One that needed fewer receives leaves the limit, where growing it as for a queue
        // matched in order would shorten the shim's share of a longer queue.
        t.episode_ended(Ended::Unpaid {
            share: Some(10),
            matched: 10,
        });
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        // Shallow searches in a queue longer than that (a list per source, each short): the
        // limit goes past the queue, so that one as long does not ask again.
        t.outstanding.store(300, Relaxed);
        t.switch(Mode::Takeover, 0);
        t.episode_ended(Ended::Unpaid {
            share: Some(10),
            matched: 100,
        });
        t.switch(Mode::Delegated, 1);
        t.dense.store(0, Relaxed);
        t.outstanding.store(400 + FOLLOW_EVERY, Relaxed);
        assert_ne!(t.delegated_call(Policy::Auto), Call::TakeOver);
        t.outstanding.store(400 + FOLLOW_EVERY + 1, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        t.episode_ended(UNPAID);
        t.outstanding
            .store((400 + FOLLOW_EVERY) * UNPAID_LIMIT_FACTOR, Relaxed);
        assert_ne!(t.delegated_call(Policy::Auto), Call::TakeOver);
    }

    /// An `auto` takeover of 4096 receives posted, of which MPI holds the first 192.
    fn in_order_takeover() -> Takeover {
        let t = Takeover::new(Policy::Auto, 64, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        t.outstanding.store(192, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        t.switch(Mode::Takeover, 0);
        t
    }

    /// Whether `outstanding` receives in MPI ask for a takeover of the delegated `t`.
    fn asks_at(t: &Takeover, outstanding: usize) -> bool {
        t.dense.store(0, Relaxed);
        t.outstanding.store(outstanding, Relaxed);
        t.delegated_call(Policy::Auto) == Call::TakeOver
    }

    #[test]
    fn a_queue_matched_in_order_does_not_ask_again_when_as_long() {
        // The shim matches the rest in order.
        let t = in_order_takeover();
        t.episode_ended(Ended::Unpaid {
            share: None,
            matched: 4096 - 192,
        });
        t.switch(Mode::Delegated, 1);
        assert!(
            !asks_at(&t, 4096 + FOLLOW_EVERY),
            "past the queue, more than 16 times 128"
        );
        assert!(asks_at(&t, 4096 + FOLLOW_EVERY + 1));
    }

    #[test]
    fn a_takeover_handed_over_before_matching_does_not_ask_again_for_a_queue_as_long() {
        let t = in_order_takeover();
        t.handed_over(&Signals::default(), 4096 - 192);
        t.switch(Mode::Delegated, 1);
        assert!(!asks_at(&t, 4096 + FOLLOW_EVERY));
        // One whose matches before the call paid keeps the takeover's start where it was.
        let mut deep = Signals::default();
        for depth in 0..200 {
            deep.observe(depth);
        }
        assert!(asks_at(&t, 4096 + FOLLOW_EVERY + 1));
        t.switch(Mode::Takeover, 2);
        t.handed_over(&deep, 1000);
        t.switch(Mode::Delegated, 3);
        assert!(asks_at(&t, 129));
        let always = Takeover::new(Policy::Always, 64, (0, u64::MAX), false);
        always.handed_over(&Signals::default(), 4096);
        assert_eq!(always.limit.load(Relaxed), 128, "only auto judges episodes");
    }

    #[test]
    fn a_shallow_give_back_counts_its_waiting_receives_in_the_queue_it_saw() {
        // The shim matches 32 at the front of the rest, then gives back those still waiting.
        let t = in_order_takeover();
        let mut front = Signals::default();
        for _ in 0..SETTLE_MATCHES {
            front.observe(0);
        }
        let waiting = 4096 - 192 - SETTLE_MATCHES as usize;
        assert_eq!(
            t.give_back_due(Policy::Auto, (waiting, 0), &front),
            GiveBack::Whole
        );
        t.switch(Mode::Delegated, 1);
        assert!(
            !asks_at(&t, 4096 + FOLLOW_EVERY),
            "a queue as long does not ask again"
        );
    }

    #[test]
    fn a_loan_mpi_matched_mostly_ends_the_takeover() {
        let t = Takeover::new(Policy::Auto, 8, (0, u64::MAX), false);
        t.dense.store(0, Relaxed);
        assert!(
            t.takes_over_after_loan(0, 4096),
            "a barrier between posting and sending: nothing matched"
        );
        assert!(t.takes_over_after_loan(3, 3), "half: not mostly");
        t.outstanding.store(17, Relaxed);
        assert_eq!(t.delegated_call(Policy::Auto), Call::TakeOver);
        assert!(!t.takes_over_after_loan(200, 40));
        assert_ne!(
            t.delegated_call(Policy::Auto),
            Call::TakeOver,
            "the episode ended unpaid: limit raised"
        );
        let always = Takeover::new(Policy::Always, 8, (0, u64::MAX), false);
        assert!(always.takes_over_after_loan(200, 40));
    }
}
