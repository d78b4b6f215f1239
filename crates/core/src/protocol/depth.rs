//! List-equivalent search depths: how many older elements one ordered list would pass for a
//! match. They tell whether matching in the shim pays ([`Signals`]).

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

/// The list-equivalent depths of the shim's matches while it has taken over: whether the
/// takeover pays.
#[derive(Default)]
pub struct Signals {
    /// Exponential mean of the depths, 1/16 weight for the newest (the first one whole).
    mean: f64,
    /// The highest mean of this episode.
    peak: f64,
    /// Matches seen this episode.
    seen: u64,
}

impl Signals {
    #[inline]
    pub fn observe(&mut self, depth: u64) {
        let weight = if self.seen == 0 { 1.0 } else { 1.0 / 16.0 };
        self.mean += (depth as f64 - self.mean) * weight;
        self.peak = self.peak.max(self.mean);
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

    /// The episode reached the depth at which the shim pays.
    #[inline]
    pub fn paid(&self, depth: u32) -> bool {
        self.peak >= depth as f64 / 2.0
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
    fn signals_say_whether_an_episode_paid() {
        let mut s = Signals::default();
        assert!(!s.shallow(64), "nothing seen yet");
        for _ in 0..64 {
            s.observe(200);
        }
        assert!(s.paid(64) && !s.shallow(64));
        for _ in 0..200 {
            s.observe(0);
        }
        assert!(s.shallow(64) && s.paid(64));
        s.reset();
        assert!(!s.paid(64));
        for _ in 0..31 {
            s.observe(0);
        }
        assert!(s.shallow(64) && !s.settled(64, 32));
        s.observe(0);
        assert!(s.settled(64, 32));
        s.observe(4096);
        assert!(
            !s.shallow(64),
            "one deep search outweighs many shallow ones"
        );
    }
}
