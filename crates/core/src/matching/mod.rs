//! Matching engines: pure Rust posted-receive (PRQ) and unexpected-message (UMQ) queues.
//!
//! Every engine gives exactly the matches of one ordered list: a message matches the earliest
//! posted receive it fits, a receive matches the earliest arrived message it fits, wildcards
//! included. Nothing here calls MPI, so engines are tested and benchmarked alone.
//!
//! Every engine implements [`MatchEngine`]; the unified engines (`col+pnp`, `col+list`,
//! `list+pnp`) are two engines joined by [`Split`].

mod assertions;
mod batch;
mod bins;
mod col;
mod fuzzy;
pub mod gpu;
mod list;
mod pnp;
mod rank;
mod simd;
mod split;
mod store;
mod table;
#[cfg(test)]
pub(crate) mod tests;

pub use assertions::Assertions;
pub use batch::BatchEngine;
pub use list::ListEngine;
pub use rank::RankEngine;
pub use simd::Simd;
pub use split::Split;

use serde::Serialize;

/// A hash map for small integer keys (ranks, handles, collective keys): FxHash, one multiply
/// per key instead of SipHash, since the keys do not come from an adversary.
pub type IntMap<K, V> = std::collections::HashMap<K, V, rustc_hash::FxBuildHasher>;

/// Spreads a 64-bit key over all 64 bits (Fibonacci hashing): take the top bits for a bucket.
/// The top `b + 1` bits of a key extend its top `b` bits, so doubling a table splits each
/// bucket into two without reordering it.
#[inline(always)]
pub(super) fn spread(key: u64) -> u64 {
    key.wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// (source, tag) as one 64-bit key, wildcards included.
#[inline(always)]
pub(super) fn source_tag(source: i32, tag: i32) -> u64 {
    ((source as u32 as u64) << 32) | tag as u32 as u64
}

/// Engine-side wildcard for the source (the runtime maps `MPI_ANY_SOURCE` to it).
pub const ANY_SOURCE: i32 = -1;
/// Engine-side wildcard for the tag (the runtime maps `MPI_ANY_TAG` to it).
pub const ANY_TAG: i32 = -1;

/// Identifies a posted receive inside the runtime.
pub type RecvId = u64;
/// Identifies an arrived (unexpected) message inside the runtime.
pub type MsgId = u64;

/// Which kind of traffic an element belongs to. Collective elements carry which collective and
/// which message size class they belong to, so engines can profile them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    PointToPoint,
    Collective { kind: u8, size_class: u8 },
}

impl Class {
    pub fn is_collective(self) -> bool {
        matches!(self, Class::Collective { .. })
    }
}

/// What an arrived message says about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    pub source: i32,
    pub tag: i32,
    pub class: Class,
}

/// What a receive (or probe) asks for; `source`/`tag` may be wildcards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pattern {
    pub source: i32,
    pub tag: i32,
    pub class: Class,
}

impl Pattern {
    #[inline]
    pub fn matches(&self, env: &Envelope) -> bool {
        (self.source == ANY_SOURCE || self.source == env.source)
            && (self.tag == ANY_TAG || self.tag == env.tag)
            && self.class.is_collective() == env.class.is_collective()
    }
}

/// Which wildcards a receive has: ANY_SOURCE only (0), ANY_TAG only (1), both (2), or none.
#[inline(always)]
pub(super) fn wild_shape(source: i32, tag: i32) -> Option<usize> {
    match (source == ANY_SOURCE, tag == ANY_TAG) {
        (false, false) => None,
        (true, false) => Some(0),
        (false, true) => Some(1),
        (true, true) => Some(2),
    }
}

/// Element `index` of `queue`: matches mostly take the front, which needs no shifting.
#[inline]
fn take<T>(queue: &mut std::collections::VecDeque<T>, index: usize) -> Option<T> {
    if index == 0 {
        queue.pop_front()
    } else {
        queue.remove(index)
    }
}

/// What the engines read from a queued element (a posted pattern or an arrived envelope).
pub(super) trait Element: Copy + Send {
    fn source(&self) -> i32;
    fn tag(&self) -> i32;
    fn class(&self) -> Class;
}

impl Element for Pattern {
    #[inline]
    fn source(&self) -> i32 {
        self.source
    }
    #[inline]
    fn tag(&self) -> i32 {
        self.tag
    }
    #[inline]
    fn class(&self) -> Class {
        self.class
    }
}

impl Element for Envelope {
    #[inline]
    fn source(&self) -> i32 {
        self.source
    }
    #[inline]
    fn tag(&self) -> i32 {
        self.tag
    }
    #[inline]
    fn class(&self) -> Class {
        self.class
    }
}

/// Cost of the searches of one queue: how many elements each search inspected.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct SearchStats {
    pub searches: u64,
    pub depth_total: u64,
    pub depth_max: u64,
}

impl SearchStats {
    #[inline]
    pub fn record(&mut self, depth: usize) {
        let depth = depth as u64;
        self.searches += 1;
        self.depth_total += depth;
        self.depth_max = self.depth_max.max(depth);
    }

    pub fn mean(&self) -> f64 {
        if self.searches == 0 {
            0.0
        } else {
            self.depth_total as f64 / self.searches as f64
        }
    }

    pub fn merge(&mut self, other: &SearchStats) {
        self.searches += other.searches;
        self.depth_total += other.depth_total;
        self.depth_max = self.depth_max.max(other.depth_max);
    }
}

/// Counters of one traffic type.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct TrafficStats {
    /// Searches of the posted-receive queue (made when a message arrives).
    pub prq: SearchStats,
    /// Searches of the unexpected-message queue (made when a receive is posted or probes).
    pub umq: SearchStats,
    pub matches: u64,
    /// Messages that found no posted receive and were queued.
    pub unexpected: u64,
}

impl TrafficStats {
    /// A message searched the posted receives: found one (a match) or is queued as unexpected.
    #[inline(always)]
    pub(crate) fn arrival(&mut self, depth: usize, matched: bool) {
        self.prq.record(depth);
        self.matches += matched as u64;
        self.unexpected += !matched as u64;
    }

    /// A receive or probe searched the unexpected messages; `taken` if a message left the queue.
    #[inline(always)]
    pub(crate) fn lookup(&mut self, depth: usize, taken: bool) {
        self.umq.record(depth);
        self.matches += taken as u64;
    }

    pub fn merge(&mut self, other: &TrafficStats) {
        self.prq.merge(&other.prq);
        self.umq.merge(&other.umq);
        self.matches += other.matches;
        self.unexpected += other.unexpected;
    }
}

/// Counters an engine keeps about itself.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct EngineStats {
    pub point_to_point: TrafficStats,
    pub collective: TrafficStats,
    /// Queues allocated now and at most (one list counts as one queue per kind).
    pub queues: u64,
    pub queues_max: u64,
}

impl EngineStats {
    #[inline]
    pub fn traffic(&mut self, class: Class) -> &mut TrafficStats {
        if class.is_collective() {
            &mut self.collective
        } else {
            &mut self.point_to_point
        }
    }

    pub fn set_queues(&mut self, queues: u64) {
        self.queues = queues;
        self.queues_max = self.queues_max.max(queues);
    }

    pub fn merge(&mut self, other: &EngineStats) {
        self.point_to_point.merge(&other.point_to_point);
        self.collective.merge(&other.collective);
        self.queues += other.queues;
        self.queues_max += other.queues_max;
    }

    /// Adds the searches and matches of `other`, an engine of the same communicator that held
    /// its queues at another time: queues now stay this engine's, the most at once is the
    /// larger of the two (where [`EngineStats::merge`] sums engines that live side by side).
    pub fn follow(&mut self, other: &EngineStats) {
        self.point_to_point.merge(&other.point_to_point);
        self.collective.merge(&other.collective);
        self.queues_max = self.queues_max.max(other.queues_max);
    }
}

/// One matching engine serves one communicator (its point-to-point and collective traffic).
pub trait MatchEngine: Send {
    /// A receive is posted: remove and return the earliest matching unexpected message, or queue
    /// the receive.
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId>;
    /// A message arrived: remove and return the earliest matching posted receive, or queue the
    /// message as unexpected.
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId>;
    /// Messages arrived together, in this order: the same as `arrive` on each in turn (or, on
    /// a communicator that allows overtaking, a legal reordering of it), the results appended
    /// to `matched` (a buffer the caller keeps, so a burst allocates nothing).
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        matched.extend(msgs.iter().map(|&(env, msg)| self.arrive(env, msg)));
    }
    /// Probe: the earliest matching unexpected message; `remove` takes it out (matched probe).
    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId>;
    /// Remove a posted receive that has not matched yet; false if it is not queued.
    fn cancel(&mut self, recv: RecvId) -> bool;
    /// Posted receives and unexpected messages queued now.
    fn queued(&self) -> (usize, usize);
    fn stats(&self) -> &EngineStats;
}

/// The engines `MATCHSHIM_ENGINE` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineKind {
    /// One list per side (MPICH-like).
    List,
    /// One queue per source rank (Open MPI-like).
    Rank,
    /// Hash bins on (source, tag), as many as queued elements.
    Bins,
    /// A list that turns into bins while searches are long.
    Adaptive,
    /// Partner/non-partner queues for all traffic.
    Pnp,
    /// Collective queues; point-to-point elements share the profiling queue.
    Col,
    /// Collective queues for collective traffic, partner queues for point-to-point traffic.
    ColPnp,
    ColList,
    ListPnp,
    /// Bit-vote arrays, 64 elements per vote.
    Batch,
    /// One list per side in blocks of 32 hashed 16-bit keys, compared 32 at a time and then
    /// verified (Open MPI's `custommatch`).
    Fuzzy,
    /// Hash-chained queues on the CPU and their copy on an NVIDIA GPU, whose kernels match
    /// big bursts (their host build where there is no GPU).
    Gpu,
}

impl EngineKind {
    pub const ALL: &'static [EngineKind] = &[
        EngineKind::List,
        EngineKind::Rank,
        EngineKind::Bins,
        EngineKind::Adaptive,
        EngineKind::Pnp,
        EngineKind::Col,
        EngineKind::ColPnp,
        EngineKind::ColList,
        EngineKind::ListPnp,
        EngineKind::Batch,
        EngineKind::Fuzzy,
        EngineKind::Gpu,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::List => "list",
            EngineKind::Rank => "rank",
            EngineKind::Bins => "bins",
            EngineKind::Adaptive => "adaptive",
            EngineKind::Pnp => "pnp",
            EngineKind::Col => "col",
            EngineKind::ColPnp => "col+pnp",
            EngineKind::ColList => "col+list",
            EngineKind::ListPnp => "list+pnp",
            EngineKind::Batch => "batch",
            EngineKind::Fuzzy => "fuzzy",
            EngineKind::Gpu => "gpu",
        }
    }

    pub fn parse(text: &str) -> Option<EngineKind> {
        Self::ALL.iter().copied().find(|kind| kind.name() == text)
    }

    pub fn accepted() -> String {
        Self::ALL
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Tuning knobs shared by the engines (from the environment in the runtime).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineParams {
    /// Processes in the communicator (n).
    pub comm_size: usize,
    /// Hash bins per side of `bins`, and of `adaptive` once it left the list, at first (B);
    /// they double whenever a side holds more elements than bins.
    pub bins: usize,
    /// Queue length at which `pnp` looks for partners (θ).
    pub theta: usize,
    /// The collective part may allocate `k_c·√n` dedicated queues per side.
    pub k_c: usize,
    /// The point-to-point part may allocate `k_p·√n` dedicated queues per side.
    pub k_p: usize,
    /// `adaptive` leaves the list when searches inspect more elements than this on average over
    /// a window, and returns when the queues stay within half of it for a window.
    pub adaptive_depth: usize,
    /// Searches per `adaptive` window.
    pub adaptive_window: usize,
    /// The vector width of fingerprint scans and votes; one this CPU lacks gets the widest it
    /// has.
    pub simd: Simd,
    /// What the communicator's info asserts.
    pub assertions: Assertions,
    /// When `gpu` runs its kernels, and how it launches them.
    pub gpu: gpu::GpuParams,
}

impl Default for EngineParams {
    /// θ = 100 and k_c = k_p = 8 as in Ghazimirsaeed et al. 2019; 256 bins; the widest vectors of this CPU.
    fn default() -> Self {
        EngineParams {
            comm_size: 1,
            bins: 256,
            theta: 100,
            k_c: 8,
            k_p: 8,
            adaptive_depth: 16,
            adaptive_window: 64,
            simd: Simd::detect(),
            assertions: Assertions::default(),
            gpu: gpu::GpuParams::default(),
        }
    }
}

/// ⌊k·√n⌋: how many dedicated queues one part of an engine may allocate on one side (posted
/// receives, unexpected messages), the way Ghazimirsaeed et al. (2019) count PRQs and UMQs. The collective part
/// (`col`) gets `k_c`, the point-to-point part (`pnp`) `k_p`, so each side of an engine stays
/// within `(k_c + k_p)·√n` besides its few fixed queues (base, profiling and wildcard queues).
///
/// Dedicated queues are not released when they run empty: the traffic that made them recurs in
/// iterative codes, rebuilding them would repeat the profiling or partner search, and the cap
/// already bounds their number. An empty queue keeps its buffer (no allocation when traffic
/// returns), so memory follows the peak queue lengths.
pub(super) fn queue_budget(k: usize, comm_size: usize) -> usize {
    (k as f64 * (comm_size as f64).sqrt()) as usize
}

/// An engine chosen at run time is an engine too (a part of [`Split`]).
impl MatchEngine for Box<dyn MatchEngine> {
    #[inline]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        (**self).post(want, recv)
    }
    #[inline]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        (**self).arrive(env, msg)
    }
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        (**self).arrive_burst(msgs, matched)
    }
    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        (**self).probe(want, remove)
    }
    fn cancel(&mut self, recv: RecvId) -> bool {
        (**self).cancel(recv)
    }
    fn queued(&self) -> (usize, usize) {
        (**self).queued()
    }
    fn stats(&self) -> &EngineStats {
        (**self).stats()
    }
}

/// The engine `kind` for a communicator with `params`. Where the communicator asserts that no
/// receive uses a wildcard, its point-to-point traffic goes to hash bins instead (`asserted`):
/// one bin of about one element per search, where a list walks its whole queue.
pub fn build_engine(kind: EngineKind, params: &EngineParams) -> Box<dyn MatchEngine> {
    let engine = engine_of_kind(kind, params);
    // Bins need no help; the gpu engine reads the assertions itself.
    let own_hash = matches!(kind, EngineKind::Bins | EngineKind::Gpu);
    if params.assertions.no_wildcards() && !own_hash {
        Box::new(Split::new(bins::Bins::new(params.bins), engine))
    } else {
        engine
    }
}

fn engine_of_kind(kind: EngineKind, params: &EngineParams) -> Box<dyn MatchEngine> {
    let simd = params.simd.usable();
    let pnp = || pnp::Pnp::new(params);
    let col = || col::Col::new(params, simd);
    match kind {
        EngineKind::List => Box::new(ListEngine::new()),
        EngineKind::Rank => Box::new(RankEngine::new(params.comm_size)),
        EngineKind::Bins => Box::new(bins::Bins::new(params.bins)),
        EngineKind::Adaptive => Box::new(bins::Adaptive::new(params)),
        EngineKind::Pnp => Box::new(pnp()),
        EngineKind::Col => Box::new(col()),
        EngineKind::ColPnp => Box::new(Split::new(pnp(), col())),
        EngineKind::ColList => Box::new(Split::new(ListEngine::new(), col())),
        EngineKind::ListPnp => Box::new(Split::new(pnp(), ListEngine::new())),
        EngineKind::Batch => Box::new(BatchEngine::new(simd)),
        EngineKind::Fuzzy => Box::new(fuzzy::Fuzzy::new(simd)),
        EngineKind::Gpu => gpu::build(params),
    }
}
