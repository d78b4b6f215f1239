//! Partner/non-partner queues (paper 004 §4.2, Fig. 4).

use super::store::{fingerprint, tag_print, Loc, Store};
use super::{
    queue_budget, Element, EngineParams, Envelope, IntMap, MsgId, Pattern, Queues, RecvId,
    TrafficStats, ANY_SOURCE,
};

/// The queue every element goes to until the first partners are chosen.
const BASE: u32 = 0;
/// Posted ANY_SOURCE receives, which belong to no source's path (posted side only); their
/// fingerprints are of the tag alone.
const WILD: u32 = 1;

#[derive(Clone, Copy)]
struct Partner {
    queue: u32,
    /// The level at which the source became a partner.
    level: u32,
}

/// Partner sources and their queues: open addressing in a power-of-two table at most half
/// full, probed on every element, so one multiply and usually one slot. Partners are never
/// removed, so a probe ends at the first empty slot.
#[derive(Default)]
struct Partners {
    /// (source, partner); ANY_SOURCE, never a partner, marks an empty slot.
    slots: Vec<(i32, Partner)>,
    len: usize,
}

impl Partners {
    #[inline(always)]
    fn slot(&self, source: i32) -> usize {
        let bits = self.slots.len().trailing_zeros();
        ((source as u32 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
    }

    #[inline(always)]
    fn get(&self, source: i32) -> Option<Partner> {
        if self.len == 0 {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(source);
        loop {
            let (s, partner) = self.slots[i];
            if s == source {
                return Some(partner);
            }
            if s == ANY_SOURCE {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, source: i32, partner: Partner) {
        if 2 * (self.len + 1) > self.slots.len() {
            let empty = (ANY_SOURCE, Partner { queue: 0, level: 0 });
            let old = std::mem::replace(
                &mut self.slots,
                vec![empty; (4 * (self.len + 1)).next_power_of_two()],
            );
            self.len = 0;
            for (s, p) in old.into_iter().filter(|&(s, _)| s != ANY_SOURCE) {
                self.insert(s, p);
            }
        }
        let mask = self.slots.len() - 1;
        let mut i = self.slot(source);
        while self.slots[i].0 != ANY_SOURCE {
            i = (i + 1) & mask;
        }
        self.slots[i] = (source, partner);
        self.len += 1;
    }
}

/// One side (posted receives or unexpected messages) of the structure.
struct Side<T> {
    store: Store<T>,
    /// The non-partner queue of each level.
    levels: Vec<u32>,
    partners: Partners,
    /// Where elements of non-partners go: the base queue, later the last level's non-partner queue.
    tail: u32,
    /// Length of `tail` at which partners are looked for next.
    next_check: usize,
    /// Per queue: a shared queue that no longer takes elements (the base queue or a level's
    /// non-partner queue once a newer level exists).
    closed: Vec<bool>,
    /// Elements left in closed queues: while there are none, every source's elements are in
    /// one queue, its own or `tail`, and a search looks there alone.
    in_closed: usize,
}

impl<T: Element> Side<T> {
    fn new(queues: usize, ordered: bool, theta: usize) -> Self {
        Side {
            store: Store::new(queues, ordered),
            levels: Vec::new(),
            partners: Partners::default(),
            tail: BASE,
            next_check: theta,
            closed: vec![false; queues],
            in_closed: 0,
        }
    }

    #[inline]
    fn partner(&self, source: i32) -> Option<Partner> {
        self.partners.get(source)
    }

    /// The queues that may hold elements from `source`, oldest first, after the base queue: the
    /// non-partner queues of the levels before `source` became a partner (of all levels for a
    /// non-partner), then its own queue. The non-partner queue made together with a partner's
    /// queue never holds that partner's elements, so the search skips it.
    #[inline]
    fn path(&self, source: i32) -> (&[u32], Option<u32>) {
        let partner = self.partner(source);
        let levels = partner.map_or(self.levels.len(), |p| p.level as usize);
        (&self.levels[..levels], partner.map(|p| p.queue))
    }

    /// The oldest element from `source` that `hit` accepts, and the depth; `key` as in
    /// `Store::find`.
    #[inline]
    fn find_from(&self, source: i32, key: u16, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        if self.in_closed == 0 {
            // The queues before the last of the path are empty.
            let queue = self.partner(source).map_or(self.tail, |p| p.queue);
            return self.store.find(queue, u64::MAX, key, &hit);
        }
        self.find_on_path(source, key, hit)
    }

    /// `find_from` while closed queues hold elements: the whole path, in the paper's order.
    #[inline(never)]
    fn find_on_path(
        &self,
        source: i32,
        key: u16,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        let (found, mut depth) = self.store.find(BASE, u64::MAX, key, &hit);
        if found.is_some() {
            return (found, depth);
        }
        let (levels, own) = self.path(source);
        for &queue in levels.iter().chain(own.as_ref()) {
            let (found, d) = self.store.find(queue, u64::MAX, key, &hit);
            depth += d;
            if found.is_some() {
                return (found, depth);
            }
        }
        (None, depth)
    }

    #[inline]
    fn remove(&mut self, at: Loc) -> u64 {
        if self.in_closed > 0 && self.closed[at.queue as usize] {
            self.in_closed -= 1;
        }
        self.store.remove(at).id
    }

    #[inline]
    fn insert(&mut self, item: T, id: u64, shape: &Shape, budget: &mut usize) {
        let source = item.source();
        if source == ANY_SOURCE {
            self.store
                .push_printed(WILD, item, id, tag_print(item.tag()));
        } else if let Some(partner) = self.partner(source) {
            self.store.push(partner.queue, item, id);
        } else {
            self.store.push(self.tail, item, id);
            if self.store.queue_len(self.tail) >= self.next_check {
                self.extract(shape, budget);
            }
        }
    }

    /// `tail` reached θ: the sources with more elements in it than the average over all n
    /// processes become partners with a queue each (the busiest first while the budget lasts),
    /// and the others move on to a new level's non-partner queue. Elements stay where they are,
    /// which is why searches walk the levels.
    #[cold]
    #[inline(never)]
    fn extract(&mut self, shape: &Shape, budget: &mut usize) {
        let len = self.store.queue_len(self.tail);
        // A level needs a partner queue and a non-partner queue.
        if *budget < 2 {
            self.next_check = usize::MAX;
            return;
        }
        let mut counts: IntMap<i32, usize> = IntMap::default();
        for item in self.store.items(self.tail) {
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
            self.next_check = len + shape.theta;
            return;
        }
        let level = self.levels.len() as u32;
        let first = self.store.add_queues(chosen.len() + 1);
        self.closed[self.tail as usize] = true;
        self.closed.resize(self.store.queue_count(), false);
        self.in_closed += len;
        for (i, &(_, source)) in chosen.iter().enumerate() {
            let queue = first + i as u32;
            self.partners.insert(source, Partner { queue, level });
        }
        self.tail = first + chosen.len() as u32;
        self.levels.push(self.tail);
        self.next_check = shape.theta;
        *budget -= chosen.len() + 1;
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
}

impl Pnp {
    pub fn new(params: &EngineParams) -> Self {
        let theta = params.theta.max(1);
        Pnp {
            prq: Side::new(2, false, theta),
            umq: Side::new(1, true, theta),
            shape: Shape {
                theta,
                comm_size: params.comm_size.max(1),
            },
            prq_budget: queue_budget(params.k_p, params.comm_size),
            umq_budget: queue_budget(params.k_p, params.comm_size),
        }
    }

    #[inline]
    fn take_unexpected(
        &mut self,
        want: &Pattern,
        remove: bool,
        traffic: &mut TrafficStats,
    ) -> Option<MsgId> {
        let hit = |e: &Envelope| want.matches(e);
        let (found, depth) = if self.umq.store.len() == 0 {
            (None, 0)
        } else if want.source == ANY_SOURCE {
            self.umq.store.find_oldest(hit)
        } else {
            let key = fingerprint(want.source, want.tag);
            self.umq.find_from(want.source, key, hit)
        };
        traffic.umq.record(depth);
        let at = found?;
        if !remove {
            return Some(self.umq.store.entry(at).id);
        }
        traffic.matches += 1;
        Some(self.umq.remove(at))
    }
}

impl Queues for Pnp {
    #[inline]
    fn post(&mut self, want: Pattern, recv: RecvId, traffic: &mut TrafficStats) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true, traffic) {
            return Some(msg);
        }
        self.prq
            .insert(want, recv, &self.shape, &mut self.prq_budget);
        None
    }

    #[inline]
    fn arrive(&mut self, env: Envelope, msg: MsgId, traffic: &mut TrafficStats) -> Option<RecvId> {
        let hit = |p: &Pattern| p.matches(&env);
        // The source's path first: ANY_SOURCE receives only matter if they are older.
        let key = fingerprint(env.source, env.tag);
        let (mut best, mut depth) = self.prq.find_from(env.source, key, hit);
        if self.prq.store.queue_len(WILD) > 0 {
            let bound = best.map_or(u64::MAX, |at| self.prq.store.entry(at).seq);
            let (found, d) = self.prq.store.find(WILD, bound, tag_print(env.tag), hit);
            depth += d;
            if found.is_some() {
                best = found;
            }
        }
        traffic.prq.record(depth);
        match best {
            Some(at) => {
                traffic.matches += 1;
                Some(self.prq.remove(at))
            }
            None => {
                traffic.unexpected += 1;
                self.umq.insert(env, msg, &self.shape, &mut self.umq_budget);
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool, traffic: &mut TrafficStats) -> Option<MsgId> {
        self.take_unexpected(&want, remove, traffic)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        match self.prq.store.find_id(recv) {
            Some(at) => {
                self.prq.remove(at);
                true
            }
            None => false,
        }
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.store.len(), self.umq.store.len())
    }

    fn queues(&self) -> usize {
        self.prq.store.queue_count() + self.umq.store.queue_count()
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

    /// Paper 004 Fig. 4 with θ = 4 and n = 4 ranks.
    #[test]
    fn search_order_of_fig_4() {
        let params = EngineParams {
            comm_size: 4,
            theta: 4,
            ..EngineParams::default()
        };
        let mut pnp = Pnp::new(&params);
        let mut traffic = TrafficStats::default();
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
            assert_eq!(pnp.post(recv(source, tag), id as u64, &mut traffic), None);
        }
        let side = &pnp.prq;
        let (rank0, rank2) = (side.partner(0).unwrap(), side.partner(2).unwrap());
        assert_eq!((rank0.level, rank2.level, side.partners.len), (0, 1, 2));
        let (np0, np1) = (side.levels[0], side.levels[1]);
        let path = |source| {
            let (levels, own) = side.path(source);
            let mut path = vec![BASE];
            path.extend(levels.iter().chain(own.as_ref()));
            path
        };
        // Red arrow: a partner searches the base queue, the non-partner queues of the levels
        // before its own, then its queue.
        assert_eq!(path(0), [BASE, rank0.queue]);
        assert_eq!(path(2), [BASE, np0, rank2.queue]);
        // Green arrows: a non-partner searches the base queue and every non-partner queue.
        assert_eq!(path(1), [BASE, np0, np1]);
        assert_eq!(path(3), [BASE, np0, np1]);
        assert_eq!(
            [BASE, np0, np1, rank0.queue, rank2.queue].map(|q| side.store.queue_len(q)),
            [4, 4, 1, 1, 1]
        );

        // Rank 0's newest receive: the whole base queue, then the first of its own queue.
        assert_eq!(pnp.arrive(msg(0, 3), 100, &mut traffic), Some(8));
        assert_eq!(traffic.prq.depth_max, 5);
        // Rank 2's receives match in posting order across base, level 0 and its own queue.
        for id in [3, 4, 5, 7, 9] {
            assert_eq!(pnp.arrive(msg(2, 7), 100, &mut traffic), Some(id));
        }
        assert_eq!(pnp.queued(), (5, 0));

        // Once the base queue and level 0's non-partner queue are drained, a search looks in
        // one queue: the newest non-partner queue for rank 3.
        assert_eq!(pnp.prq.in_closed, 4);
        for (source, tag, id) in [(0, 0, 0), (0, 2, 2), (0, 1, 1), (1, 0, 6)] {
            assert_eq!(pnp.arrive(msg(source, tag), 100, &mut traffic), Some(id));
        }
        assert_eq!(pnp.prq.in_closed, 0);
        let mut last = TrafficStats::default();
        assert_eq!(pnp.arrive(msg(3, 0), 100, &mut last), Some(10));
        assert_eq!(last.prq.depth_total, 1);
    }

    #[test]
    fn any_source_receives_match_by_tag_in_posting_order() {
        let mut pnp = Pnp::new(&EngineParams::default());
        let mut traffic = TrafficStats::default();
        for tag in 0..50 {
            pnp.post(recv(ANY_SOURCE, tag), tag as u64, &mut traffic);
            if tag == 20 {
                pnp.post(recv(ANY_SOURCE, ANY_TAG), 100, &mut traffic);
            }
        }
        pnp.post(recv(3, 45), 101, &mut traffic);
        // Tags before the ANY_TAG receive match their own receive.
        assert_eq!(pnp.arrive(msg(3, 7), 0, &mut traffic), Some(7));
        // Later tags meet the ANY_TAG receive first, then their own, then the source's.
        assert_eq!(pnp.arrive(msg(3, 45), 0, &mut traffic), Some(100));
        assert_eq!(pnp.arrive(msg(3, 45), 0, &mut traffic), Some(45));
        assert_eq!(pnp.arrive(msg(3, 45), 0, &mut traffic), Some(101));
        assert_eq!(pnp.arrive(msg(3, 45), 0, &mut traffic), None);
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
        let mut traffic = TrafficStats::default();
        for id in 0..400u64 {
            let source = (id % 16) as i32;
            pnp.arrive(msg(source, 0), id, &mut traffic);
        }
        assert_eq!(pnp.umq.partners.len, 3);
        assert_eq!(pnp.queues(), 3 + 4);
        assert_eq!(pnp.umq_budget, 0);
    }
}
