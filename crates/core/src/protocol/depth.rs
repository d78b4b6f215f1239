//! Search depths as MPI would have made them: how many older elements its queue would pass
//! for a match, in one ordered list (MPICH) or in one list per source (Open MPI). They tell
//! whether matching in the shim pays ([`Signals`]).

use rustc_hash::FxHashMap;
use std::collections::VecDeque;

/// Elements in arrival (or posting) order, for list-equivalent depths: an element's depth is
/// how many elements older than it were still queued, counting those removed out of order
/// until everything older than them is gone too (an estimate from above, cheap and exact for
/// in-order and reverse-order traffic).
#[derive(Default)]
pub struct Order {
    front: u64,
    live: VecDeque<bool>,
}

impl Order {
    /// Adds an element; its sequence number.
    #[inline]
    pub fn push(&mut self) -> u64 {
        self.live.push_back(true);
        self.front + self.live.len() as u64 - 1
    }

    /// Removes element `seq`; the number of elements ahead of it.
    #[inline]
    pub fn remove(&mut self, seq: u64) -> u64 {
        let depth = seq - self.front;
        if let Some(slot) = self.live.get_mut(depth as usize) {
            *slot = false;
        }
        while self.live.front() == Some(&false) {
            self.live.pop_front();
            self.front += 1;
        }
        depth
    }
}

/// How the MPI underneath queues what it matches, for the depths its searches would have had.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Model {
    /// One posted and one unexpected list per communicator (MPICH).
    #[default]
    List,
    /// A posted and an unexpected list per source, wildcard-source receives in a list of
    /// their own (Open MPI's ob1): a search passes only elements of its own source.
    PerSource,
}

/// The elements of one queue (posted receives or unexpected messages) in the order MPI would
/// search them under a [`Model`]. An element's lane is its source (a receive's may be the
/// wildcard); in one list every lane is the same.
pub enum Depths {
    List(Order),
    PerSource(FxHashMap<i32, Order>),
}

impl Default for Depths {
    fn default() -> Depths {
        Depths::new(Model::default())
    }
}

impl Depths {
    pub fn new(model: Model) -> Depths {
        match model {
            Model::List => Depths::List(Order::default()),
            Model::PerSource => Depths::PerSource(FxHashMap::default()),
        }
    }

    #[inline]
    fn order(&mut self, lane: i32) -> &mut Order {
        match self {
            Depths::List(order) => order,
            Depths::PerSource(orders) => orders.entry(lane).or_default(),
        }
    }

    /// Adds an element of `lane`; its sequence number there.
    #[inline]
    pub fn push(&mut self, lane: i32) -> u64 {
        self.order(lane).push()
    }

    /// Removes element `seq` of `lane`; the number of elements MPI would have passed first.
    #[inline]
    pub fn remove(&mut self, lane: i32, seq: u64) -> u64 {
        self.order(lane).remove(seq)
    }

    /// Nothing queued: forgets every element.
    pub fn clear(&mut self) {
        match self {
            Depths::List(order) => *order = Order::default(),
            Depths::PerSource(orders) => orders.clear(),
        }
    }
}

/// The depths of the shim's matches while it has taken over, as MPI would have searched:
/// whether the takeover pays.
#[derive(Default)]
pub struct Signals {
    /// Exponential mean of the depths, 1/16 weight for the newest (the first one whole).
    mean: f64,
    /// The sum of this episode's depths.
    total: f64,
    /// Matches seen this episode.
    seen: u64,
}

impl Signals {
    #[inline]
    pub fn observe(&mut self, depth: u64) {
        let weight = if self.seen == 0 { 1.0 } else { 1.0 / 16.0 };
        self.mean += (depth as f64 - self.mean) * weight;
        self.total += depth as f64;
        self.seen += 1;
    }

    /// Searches, once there were any, stay below half the depth at which the shim pays
    /// (right after a takeover the shim's queues are empty only because nothing was drained
    /// yet).
    #[inline]
    pub fn shallow(&self, depth: u32) -> bool {
        self.seen > 0 && self.mean < depth as f64 / 2.0
    }

    /// [`shallow`](Self::shallow) after at least `matches` matches.
    #[inline]
    pub fn settled(&self, depth: u32, matches: u64) -> bool {
        self.seen >= matches && self.shallow(depth)
    }

    /// The episode's searches were, on average, at least the depth at which the shim pays:
    /// MPI would have spent more on them than the shim's cost per match.
    #[inline]
    pub fn paid(&self, depth: u32) -> bool {
        self.seen > 0 && self.total >= depth as f64 * self.seen as f64
    }

    /// How many receives the shim would have had to take over for this episode's searches to
    /// reach, on average, the depth at which the shim pays, if their depths grow with the
    /// queue's length (as in a queue matched in reverse); `None` when no length would (every
    /// match at the front, or none).
    pub fn needed(&self, depth: u32) -> Option<usize> {
        (self.total > 0.0).then(|| {
            (self.seen as f64 * self.seen as f64 * depth as f64 / self.total).ceil() as usize
        })
    }

    /// Matches seen this episode.
    pub fn matches(&self) -> u64 {
        self.seen
    }

    pub fn reset(&mut self) {
        *self = Signals::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_gives_list_depths_for_in_order_and_reverse_removal() {
        let mut order = Order::default();
        let seqs: Vec<u64> = (0..5).map(|_| order.push()).collect();
        assert_eq!(seqs, [0, 1, 2, 3, 4]);
        let reverse: Vec<u64> = seqs.iter().rev().map(|&s| order.remove(s)).collect();
        assert_eq!(reverse, [4, 3, 2, 1, 0]);
        let seqs: Vec<u64> = (0..3).map(|_| order.push()).collect();
        let in_order: Vec<u64> = seqs.iter().map(|&s| order.remove(s)).collect();
        assert_eq!(in_order, [0, 0, 0]);
    }

    #[test]
    fn order_counts_out_of_order_removals_until_the_front_goes() {
        let mut order = Order::default();
        let s: Vec<u64> = (0..4).map(|_| order.push()).collect();
        assert_eq!(order.remove(s[1]), 1);
        // s[1] is gone but s[0] still holds the front: an estimate from above.
        assert_eq!(order.remove(s[2]), 2);
        assert_eq!(order.remove(s[0]), 0);
        assert_eq!(order.remove(s[3]), 0);
    }

    #[test]
    fn per_source_depths_pass_only_their_own_sources_elements() {
        let mut list = Depths::new(Model::List);
        let mut per_source = Depths::new(Model::PerSource);
        // Two sources' receives, each source's posted newest tag first.
        let posted: Vec<(i32, u64, u64)> = [0, 0, 0, 1, 1, 1]
            .into_iter()
            .map(|source| (source, list.push(source), per_source.push(source)))
            .collect();
        let removed: Vec<(u64, u64)> = [2, 5, 1, 4, 0, 3]
            .into_iter()
            .map(|i| {
                let (source, in_list, in_source) = posted[i];
                (
                    list.remove(source, in_list),
                    per_source.remove(source, in_source),
                )
            })
            .collect();
        assert_eq!(
            removed,
            [(2, 2), (5, 2), (1, 1), (4, 1), (0, 0), (0, 0)],
            "one list passes the other source's elements too"
        );
        per_source.clear();
        assert_eq!(per_source.push(7), 0);
    }

    #[test]
    fn signals_say_whether_an_episode_paid() {
        let mut s = Signals::default();
        assert!(!s.shallow(64), "nothing seen yet");
        for _ in 0..64 {
            s.observe(200);
        }
        assert!(s.paid(64) && !s.shallow(64));
        for _ in 0..64 {
            s.observe(0);
        }
        assert!(s.shallow(64) && s.paid(64), "a deep phase, then shallow");
        for _ in 0..200 {
            s.observe(0);
        }
        assert!(!s.paid(64), "on average shallower than the depth that pays");
        assert_eq!(s.needed(64), Some(538), "328 matches 39 deep on average");
        s.reset();
        assert!(!s.paid(64));
        assert_eq!(s.needed(64), None, "nothing seen");
        for _ in 0..31 {
            s.observe(0);
        }
        assert!(s.shallow(64) && !s.settled(64, 32));
        assert_eq!(s.needed(64), None, "every match at the front");
        s.observe(0);
        assert!(s.settled(64, 32));
        s.observe(4096);
        assert!(
            !s.shallow(64),
            "one deep search outweighs many shallow ones"
        );
    }
}
