//! Matching engines: pure Rust posted-receive (PRQ) and unexpected-message (UMQ) queues.
//!
//! Every engine gives exactly the matches of one ordered list: a message matches the earliest
//! posted receive it fits, a receive matches the earliest arrived message it fits, wildcards
//! included. Nothing here calls MPI, so engines are tested and benchmarked alone.

mod list;
mod rank;
#[cfg(test)]
mod tests;

pub use list::ListEngine;
pub use rank::RankEngine;

use serde::Serialize;

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
}

/// One matching engine serves one communicator (its point-to-point and collective traffic).
pub trait MatchEngine: Send {
    /// A receive is posted: remove and return the earliest matching unexpected message, or queue
    /// the receive.
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId>;
    /// A message arrived: remove and return the earliest matching posted receive, or queue the
    /// message as unexpected.
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId>;
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
    List,
    Rank,
}

impl EngineKind {
    pub const ALL: &'static [EngineKind] = &[EngineKind::List, EngineKind::Rank];

    pub fn name(self) -> &'static str {
        match self {
            EngineKind::List => "list",
            EngineKind::Rank => "rank",
        }
    }

    pub fn parse(text: &str) -> Option<EngineKind> {
        Self::ALL.iter().copied().find(|kind| kind.name() == text)
    }

    pub fn accepted() -> String {
        Self::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    }
}

/// Tuning knobs shared by the engines (from the environment in the runtime).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EngineParams {
    pub comm_size: usize,
}

pub fn build_engine(kind: EngineKind, params: &EngineParams) -> Box<dyn MatchEngine> {
    match kind {
        EngineKind::List => Box::new(ListEngine::new()),
        EngineKind::Rank => Box::new(RankEngine::new(params.comm_size)),
    }
}
