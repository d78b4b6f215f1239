//! Partner/non-partner queues (Ghazimirsaeed et al. 2019, §4.2, Fig. 4), each queue split into hashed sub-queues.
//!
//! The queues are the paper's: a base queue, then per level a queue for each partner source and
//! one non-partner queue, within `k_p·√n` dedicated queues per side. A closed queue (the base
//! queue, or a level's non-partner queue once a newer level exists) takes no new elements and
//! keeps the ones it has.
//!
//! Inside, elements are chained by (source, tag) (`Table`): a partner's queue splits into one
//! sub-queue per tag, the shared non-partner queue into one per (source, tag), so neither grows
//! long whatever tags the sources use or however many share it. While a source still has
//! elements in closed queues, its sub-queue runs on from them into its current queue in posting
//! order, so one search covers what the paper's walk along the source's path (base queue, the
//! levels' non-partner queues, its own queue) would inspect, oldest first.

use super::table::Table;
use super::{
    queue_budget, spread, Element, EngineParams, EngineStats, Envelope, IntMap, MatchEngine, MsgId,
    Pattern, RecvId, ANY_SOURCE,
};

/// The queue every element goes to until the first partners are chosen.
const BASE: u32 = 0;
/// Posted ANY_SOURCE receives, which belong to no source's path (posted side only).
const WILD: u32 = 1;
/// Buckets per side at first; they double with the elements.
const BUCKETS: usize = 16;

/// Partner sources and their queues: open addressing in a power-of-two table at most half
/// full, so the lookup every post makes is one multiply and usually one slot. Partners are never
/// removed, so a probe ends at the first empty slot.
#[derive(Default)]
struct Partners {
    /// (source, queue); ANY_SOURCE, never a partner, marks an empty slot.
    slots: Vec<(i32, u32)>,
    len: usize,
}

impl Partners {
    #[inline(always)]
    fn slot(&self, source: i32) -> usize {
        let bits = self.slots.len().trailing_zeros();
        (spread(source as u32 as u64) >> (64 - bits)) as usize
    }

    #[inline(always)]
    fn get(&self, source: i32) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(source);
        loop {
            match self.slots[i] {
                (s, queue) if s == source => return Some(queue),
                (ANY_SOURCE, _) => return None,
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn insert(&mut self, source: i32, queue: u32) {
        if 2 * (self.len + 1) > self.slots.len() {
            let size = (4 * (self.len + 1)).next_power_of_two();
            let old = std::mem::replace(&mut self.slots, vec![(ANY_SOURCE, 0); size]);
            self.len = 0;
            for (s, q) in old.into_iter().filter(|&(s, _)| s != ANY_SOURCE) {
                self.insert(s, q);
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(source);
        while self.slots[i].0 != ANY_SOURCE {
            i = (i + 1) & mask;
        }
        self.slots[i] = (source, queue);
        self.len += 1;
    }
}

/// One side (posted receives or unexpected messages) of the structure.
struct Side<T> {
    table: Table<T>,
    partners: Partners,
    /// Where elements of non-partners go: the base queue, later the last level's non-partner queue.
    tail: u32,
    /// Length of `tail` at which partners are looked for next.
    next_check: usize,
    /// Levels made so far.
    levels: usize,
}

impl<T: Element> Side<T> {
    fn new(queues: usize, theta: usize) -> Self {
        Side {
            table: Table::new(queues, BUCKETS, true),
            partners: Partners::default(),
            tail: BASE,
            next_check: theta,
            levels: 0,
        }
    }

    /// The queue new elements from `source` go to.
    #[inline(always)]
    fn queue_of(&self, source: i32) -> u32 {
        if source == ANY_SOURCE {
            return WILD;
        }
        self.partners.get(source).unwrap_or(self.tail)
    }

    /// Queues `item`; true if that made new queues.
    #[inline(always)]
    fn insert(&mut self, item: T, id: u64, shape: &Shape, budget: &mut usize) -> bool {
        let queue = self.queue_of(item.source());
        self.table.push(queue, item, id);
        queue == self.tail
            && self.table.queue_len(queue) >= self.next_check
            && self.extract(shape, budget)
    }

    /// `tail` reached its check: the sources with more elements in it than the average over all
    /// n processes become partners with a queue each (the busiest first while the budget lasts),
    /// and the others move on to a new level's non-partner queue; true if it made queues.
    /// Elements stay where they are. A look that finds no partner waits until `tail` grew by θ
    /// or by half, whichever is more, so looking costs O(1) per element however long the
    /// queue gets.
    #[cold]
    #[inline(never)]
    fn extract(&mut self, shape: &Shape, budget: &mut usize) -> bool {
        let len = self.table.queue_len(self.tail);
        // A level needs a partner queue and a non-partner queue.
        if *budget < 2 {
            self.next_check = usize::MAX;
            return false;
        }
        let mut counts: IntMap<i32, usize> = IntMap::default();
        for item in self.table.items(self.tail) {
            *counts.entry(item.source()).or_default() += 1;
        }
        let mut chosen: Vec<(usize, i32)> = counts
            .into_iter()
            .filter(|&(_, count)| count * shape.comm_size > len)
            .map(|(source, count)| (count, source))
            .collect();
        chosen.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        chosen.truncate(*budget - 1);
        if chosen.is_empty() {
            self.next_check = len + shape.theta.max(len / 2);
            return false;
        }
        let first = self.table.add_queues(chosen.len() + 1);
        for (i, &(_, source)) in chosen.iter().enumerate() {
            self.partners.insert(source, first + i as u32);
        }
        self.tail = first + chosen.len() as u32;
        self.levels += 1;
        self.next_check = shape.theta;
        *budget -= chosen.len() + 1;
        true
    }
}

struct Shape {
    theta: usize,
    comm_size: usize,
}

/// Posted receives and unexpected messages each in partner/non-partner queues. Dedicated queues
/// (partner and non-partner queues of the levels) stay within `k_p·√n` on each side, as paper
/// 004 counts them (its Fig. 9 and 10 give PRQs and UMQs apart).
pub struct Pnp {
    prq: Side<Pattern>,
    umq: Side<Envelope>,
    shape: Shape,
    prq_budget: usize,
    umq_budget: usize,
    stats: EngineStats,
}

impl Pnp {
    pub fn new(params: &EngineParams) -> Self {
        let theta = params.theta.max(1);
        let mut pnp = Pnp {
            prq: Side::new(2, theta),
            umq: Side::new(1, theta),
            shape: Shape {
                theta,
                comm_size: params.comm_size.max(1),
            },
            prq_budget: queue_budget(params.k_p, params.comm_size),
            umq_budget: queue_budget(params.k_p, params.comm_size),
            stats: EngineStats::default(),
        };
        pnp.count_queues();
        pnp
    }

    fn count_queues(&mut self) {
        let queues = self.prq.table.queue_count() + self.umq.table.queue_count();
        self.stats.set_queues(queues as u64);
    }

    #[inline(always)]
    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let (found, depth) = self.umq.table.find_unexpected(want);
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let at = found?;
        if !taken {
            return Some(self.umq.table.id(at));
        }
        Some(self.umq.table.remove(at).0)
    }
}

impl MatchEngine for Pnp {
    #[inline(always)]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        if self
            .prq
            .insert(want, recv, &self.shape, &mut self.prq_budget)
        {
            self.count_queues();
        }
        None
    }

    #[inline(always)]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let (found, depth) = self.prq.table.find_posted(&env);
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        if let Some(at) = found {
            return Some(self.prq.table.remove(at).0);
        }
        if self.umq.insert(env, msg, &self.shape, &mut self.umq_budget) {
            self.count_queues();
        }
        None
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.prq.table.find_id(recv);
        found.map(|at| self.prq.table.remove(at)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.table.len(), self.umq.table.len())
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{Class, ANY_TAG};

    fn recv(source: i32, tag: i32) -> Pattern {
        Pattern {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    fn msg(source: i32, tag: i32) -> Envelope {
        Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    /// Ghazimirsaeed et al. 2019, Fig. 4 with θ = 4 and n = 4 ranks.
    #[test]
    fn queues_and_search_order_of_fig_4() {
        let params = EngineParams {
            comm_size: 4,
            theta: 4,
            ..EngineParams::default()
        };
        let mut pnp = Pnp::new(&params);
        let posts = [
            // The base queue reaches θ: rank 0 has 3 > 4/4 receives in it and becomes a partner
            // at level 0; rank 2 (one receive) does not.
            (0, 0),
            (0, 1),
            (0, 2),
            (2, ANY_TAG),
            // Level 0's non-partner queue reaches θ: rank 2 becomes a partner at level 1.
            (2, ANY_TAG),
            (2, ANY_TAG),
            (1, 0),
            (2, ANY_TAG),
            // Into the partners' queues and level 1's non-partner queue.
            (0, 3),
            (2, ANY_TAG),
            (3, 0),
        ];
        for (id, &(source, tag)) in posts.iter().enumerate() {
            assert_eq!(pnp.post(recv(source, tag), id as u64), None);
        }
        let side = &pnp.prq;
        let (rank0, rank2) = (side.partners.get(0).unwrap(), side.partners.get(2).unwrap());
        let (np0, np1) = (rank0 + 1, side.tail);
        assert_eq!((side.levels, side.partners.len), (2, 2));
        assert_eq!((rank2, np1), (np0 + 1, np0 + 2));
        assert_eq!([1, 3].map(|s| side.queue_of(s)), [np1, np1]);
        assert_eq!(
            [BASE, np0, np1, rank0, rank2].map(|q| side.table.queue_len(q)),
            [4, 4, 1, 1, 1]
        );

        // Rank 0's receives match in posting order across the base queue and its own queue;
        // rank 2's across the base queue, level 0's non-partner queue and its own queue.
        for (source, tag, id) in [(0, 3, 8), (0, 1, 1), (0, 0, 0), (0, 2, 2)] {
            assert_eq!(pnp.arrive(msg(source, tag), 100), Some(id));
        }
        for id in [3, 4, 5, 7, 9] {
            assert_eq!(pnp.arrive(msg(2, 7), 100), Some(id));
        }
        for (source, tag, id) in [(3, 0, 10), (1, 0, 6)] {
            assert_eq!(pnp.arrive(msg(source, tag), 100), Some(id));
        }
        assert_eq!(pnp.queued(), (0, 0));
    }

    /// One source, many tags in reverse: the partner's sub-queues keep every search short (a
    /// list inspects 1000 elements per search here).
    #[test]
    fn one_source_with_many_tags_searches_one_sub_queue() {
        let params = EngineParams {
            comm_size: 16,
            ..EngineParams::default()
        };
        let mut pnp = Pnp::new(&params);
        for tag in 0..2000 {
            pnp.post(recv(3, tag), tag as u64);
        }
        assert_eq!(pnp.prq.partners.len, 1);
        for tag in (0..2000).rev() {
            assert_eq!(pnp.arrive(msg(3, tag), 0), Some(tag as u64));
        }
        let prq = pnp.stats().point_to_point.prq;
        assert!(prq.mean() < 1.5, "mean depth {}", prq.mean());
    }

    #[test]
    fn any_source_receives_match_by_tag_in_posting_order() {
        let mut pnp = Pnp::new(&EngineParams::default());
        for tag in 0..50 {
            pnp.post(recv(ANY_SOURCE, tag), tag as u64);
            if tag == 20 {
                pnp.post(recv(ANY_SOURCE, ANY_TAG), 100);
            }
        }
        pnp.post(recv(3, 45), 101);
        // Tags before the ANY_TAG receive match their own receive.
        assert_eq!(pnp.arrive(msg(3, 7), 0), Some(7));
        // Later tags meet the ANY_TAG receive first, then their own, then the source's.
        assert_eq!(pnp.arrive(msg(3, 45), 0), Some(100));
        assert_eq!(pnp.arrive(msg(3, 45), 0), Some(45));
        assert_eq!(pnp.arrive(msg(3, 45), 0), Some(101));
        assert_eq!(pnp.arrive(msg(3, 45), 0), None);
        assert_eq!(pnp.queued(), (48, 1));
    }

    #[test]
    fn partners_and_levels_stop_at_the_budget() {
        // ⌊1·√16⌋ = 4 dedicated queues: one level of 3 partners and its non-partner queue.
        let params = EngineParams {
            comm_size: 16,
            theta: 8,
            k_p: 1,
            ..EngineParams::default()
        };
        let mut pnp = Pnp::new(&params);
        for id in 0..400u64 {
            let source = (id % 16) as i32;
            pnp.arrive(msg(source, 0), id);
        }
        assert_eq!(pnp.umq.partners.len, 3);
        assert_eq!(pnp.stats().queues, 3 + 4);
        assert_eq!(pnp.umq_budget, 0);
    }
}
