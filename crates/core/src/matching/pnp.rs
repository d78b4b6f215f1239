//! Partner/non-partner queues (paper 004 §4.2, Fig. 4), each queue split into hashed sub-queues.
//!
//! The queues are the paper's: a base queue, then per level a queue for each partner source and
//! one non-partner queue, within `k_p·√n` dedicated queues per side. Inside, a queue is split
//! into sub-queues by a hash of (source, tag) (`Table`), so a partner's queue stays short
//! whatever tags its source uses, and so does the shared non-partner queue however many sources
//! share it. A search of a queue looks in one sub-queue.
//!
//! A closed queue (the base queue, or a level's non-partner queue once a newer level exists)
//! takes no new elements and keeps the ones it has. The paper's search walks every closed queue
//! on a source's path; here each source keeps the list of closed queues that still hold its
//! elements, oldest first, so a search visits those and then the source's current queue: the
//! same order restricted to queues that can hold a match.

use super::table::{Loc, Table};
use super::{
    queue_budget, source_tag, spread, wild_shape, Element, EngineParams, EngineStats, Envelope,
    IntMap, MatchEngine, MsgId, Pattern, RecvId, ANY_SOURCE, ANY_TAG,
};

/// The queue every element goes to until the first partners are chosen.
const BASE: u32 = 0;
/// Posted ANY_SOURCE receives, which belong to no source's path (posted side only).
const WILD: u32 = 1;
/// Buckets per side at first; they double with the elements.
const BUCKETS: usize = 16;

/// One side (posted receives or unexpected messages) of the structure.
struct Side<T> {
    table: Table<T>,
    routes: Routes,
}

/// Which queue takes an element, and which queues a search visits.
struct Routes {
    /// The sources that are partners or have elements in closed queues.
    sources: SourceMap,
    /// Where elements of non-partners go: the base queue, later the last level's non-partner queue.
    tail: u32,
    /// Length of `tail` at which partners are looked for next.
    next_check: usize,
    /// Levels made so far.
    levels: usize,
    /// Per queue: for a closed queue, which keys it holds.
    closed: Vec<Option<Filter>>,
    /// Elements in closed queues: while there are none, a search looks in one queue.
    in_closed: usize,
    /// Posted receives with ANY_SOURCE only, with ANY_TAG only, and with both (`wild_shape`).
    wild: [usize; 3],
}

#[derive(Default)]
struct Route {
    /// The source's queue once it is a partner.
    own: Option<u32>,
    /// Closed queues holding elements from the source: (queue, elements), oldest first.
    left: Vec<(u32, usize)>,
}

/// Sources and their routes: open addressing in a power-of-two table at most half full, so a
/// lookup, made by every post and arrival, is one multiply and usually one slot. With std's
/// HashMap (FxHash) here, `pnp` took 1–2.5 ns (5–10 %) more per match out of order.
#[derive(Default)]
struct SourceMap {
    /// (source, index in `routes`); ANY_SOURCE, never a key, marks an empty slot.
    slots: Vec<(i32, u32)>,
    routes: Vec<(i32, Route)>,
}

impl SourceMap {
    fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }

    #[inline(always)]
    fn home(&self, source: i32) -> usize {
        (spread(source as u32 as u64) >> (64 - self.slots.len().trailing_zeros())) as usize
    }

    /// The slot holding `source`, or the empty slot where it would go.
    #[inline(always)]
    fn slot(&self, source: i32) -> usize {
        let mask = self.slots.len() - 1;
        let mut i = self.home(source);
        while self.slots[i].0 != source && self.slots[i].0 != ANY_SOURCE {
            i = (i + 1) & mask;
        }
        i
    }

    #[inline(always)]
    fn get(&self, source: i32) -> Option<&Route> {
        if self.slots.is_empty() {
            return None;
        }
        let (key, index) = self.slots[self.slot(source)];
        (key == source).then(|| &self.routes[index as usize].1)
    }

    fn get_mut(&mut self, source: i32) -> Option<&mut Route> {
        if self.slots.is_empty() {
            return None;
        }
        let (key, index) = self.slots[self.slot(source)];
        (key == source).then(|| &mut self.routes[index as usize].1)
    }

    fn entry(&mut self, source: i32) -> &mut Route {
        if 2 * (self.routes.len() + 1) > self.slots.len() {
            let size = (4 * (self.routes.len() + 1)).next_power_of_two();
            self.slots = vec![(ANY_SOURCE, 0); size];
            for (index, &(key, _)) in self.routes.iter().enumerate() {
                let slot = self.slot(key);
                self.slots[slot] = (key, index as u32);
            }
        }
        let slot = self.slot(source);
        if self.slots[slot].0 != source {
            self.slots[slot] = (source, self.routes.len() as u32);
            self.routes.push((source, Route::default()));
        }
        &mut self.routes[self.slots[slot].1 as usize].1
    }

    /// Removes `source`: later slots of its run move back into the gap (linear probing's
    /// deletion), and the last route takes its place in `routes`.
    fn remove(&mut self, source: i32) {
        let mask = self.slots.len() - 1;
        let mut hole = self.slot(source);
        let index = self.slots[hole].1 as usize;
        let mut i = hole;
        loop {
            i = (i + 1) & mask;
            let key = self.slots[i].0;
            if key == ANY_SOURCE {
                break;
            }
            // A key may move back to the hole unless its home lies cyclically in (hole, i].
            let home = self.home(key);
            if (i.wrapping_sub(home) & mask) >= (i.wrapping_sub(hole) & mask) {
                self.slots[hole] = self.slots[i];
                hole = i;
            }
        }
        self.slots[hole] = (ANY_SOURCE, 0);
        self.routes.swap_remove(index);
        if let Some(&(moved, _)) = self.routes.get(index) {
            let slot = self.slot(moved);
            self.slots[slot].1 = index as u32;
        }
    }
}

/// One bit per hashed (source, tag) of the elements a closed queue had when it closed: a
/// search skips the queue where its key's bit is clear. A closed queue takes no new elements,
/// so the bits stay right (some stay set after their elements left).
struct Filter {
    words: Vec<u64>,
    /// log2 of the bits.
    bits: u32,
}

impl Filter {
    /// About eight bits per key.
    fn new(keys: &[(i32, i32)]) -> Filter {
        let bits = (8 * keys.len())
            .next_power_of_two()
            .max(64)
            .trailing_zeros();
        let mut filter = Filter {
            words: vec![0; 1 << (bits - 6)],
            bits,
        };
        for &(source, tag) in keys {
            let bit = filter.bit(source, tag);
            filter.words[bit / 64] |= 1 << (bit % 64);
        }
        filter
    }

    #[inline(always)]
    fn bit(&self, source: i32, tag: i32) -> usize {
        (spread(source_tag(source, tag)) >> (64 - self.bits)) as usize
    }

    #[inline(always)]
    fn may_hold(&self, source: i32, tag: i32) -> bool {
        let bit = self.bit(source, tag);
        self.words[bit / 64] & (1 << (bit % 64)) != 0
    }
}

impl Routes {
    /// The queue new elements from `source` go to, and the closed queues that hold elements
    /// from it.
    #[inline(always)]
    fn route(&self, source: i32) -> (u32, &[(u32, usize)]) {
        if self.sources.is_empty() {
            return (self.tail, &[]);
        }
        match self.sources.get(source) {
            Some(route) => (route.own.unwrap_or(self.tail), &route.left),
            None => (self.tail, &[]),
        }
    }

    /// The oldest element from `source` in the sub-queues of (`source`, `tag`) older than
    /// `bound` that `hit` accepts, and the depth: the closed queues holding elements from
    /// `source` first, then its current queue.
    #[inline(always)]
    fn find_from<T: Element>(
        &self,
        table: &Table<T>,
        (source, tag): (i32, i32),
        bound: u64,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        let (current, left) = self.route(source);
        let mut depth = 0;
        for &(queue, _) in left {
            let filter = self.closed[queue as usize].as_ref();
            if !filter.is_some_and(|f| f.may_hold(source, tag)) {
                continue;
            }
            let (found, d) = table.find(queue, source, tag, bound, &hit);
            depth += d;
            if found.is_some() {
                // Older queues hold only older elements.
                return (found, depth);
            }
        }
        let (found, d) = table.find(current, source, tag, bound, hit);
        (found, depth + d)
    }

    /// The earliest posted receive that fits `env`: from the source's path, then, if there
    /// are any, the ANY_TAG receives on that path and the ANY_SOURCE receives, each searched
    /// only for something older than the best so far.
    #[inline(always)]
    fn find_posted(&self, prq: &Table<Pattern>, env: &Envelope) -> (Option<Loc>, usize) {
        let hit = |p: &Pattern| p.matches(env);
        let (mut best, mut depth) = self.find_from(prq, (env.source, env.tag), u64::MAX, hit);
        if self.wild == [0; 3] {
            return (best, depth);
        }
        let searches = [
            (ANY_SOURCE, env.tag),
            (env.source, ANY_TAG),
            (ANY_SOURCE, ANY_TAG),
        ];
        for (wild, (source, tag)) in searches.into_iter().enumerate() {
            if self.wild[wild] == 0 {
                continue;
            }
            let bound = best.map_or(u64::MAX, |at| prq.seq(at));
            let (found, d) = if source == ANY_SOURCE {
                prq.find(WILD, source, tag, bound, hit)
            } else {
                self.find_from(prq, (source, tag), bound, hit)
            };
            depth += d;
            if found.is_some() {
                best = found;
            }
        }
        (best, depth)
    }

    /// An element from `source` leaves closed queue `queue`.
    #[cold]
    fn leave_closed(&mut self, source: i32, queue: u32) {
        self.in_closed -= 1;
        let route = self
            .sources
            .get_mut(source)
            .expect("source in closed queue");
        let i = route
            .left
            .iter()
            .position(|l| l.0 == queue)
            .expect("queue listed");
        route.left[i].1 -= 1;
        if route.left[i].1 == 0 {
            route.left.remove(i);
            if route.left.is_empty() && route.own.is_none() {
                self.sources.remove(source);
            }
        }
    }
}

impl<T: Element> Side<T> {
    fn new(queues: usize, theta: usize) -> Self {
        Side {
            table: Table::new(queues, BUCKETS, true),
            routes: Routes {
                sources: SourceMap::default(),
                tail: BASE,
                next_check: theta,
                levels: 0,
                closed: (0..queues).map(|_| None).collect(),
                in_closed: 0,
                wild: [0; 3],
            },
        }
    }

    /// Queues `item`; true if that made new queues.
    #[inline(always)]
    fn insert(&mut self, item: T, id: u64, shape: &Shape, budget: &mut usize) -> bool {
        let (source, tag) = (item.source(), item.tag());
        if let Some(wild) = wild_shape(source, tag) {
            self.routes.wild[wild] += 1;
        }
        if source == ANY_SOURCE {
            self.table.push(WILD, item, id);
            return false;
        }
        let queue = self.routes.route(source).0;
        self.table.push(queue, item, id);
        queue == self.routes.tail
            && self.table.queue_len(queue) >= self.routes.next_check
            && self.extract(shape, budget)
    }

    #[inline(always)]
    fn remove(&mut self, at: Loc) -> u64 {
        let (&item, queue) = self.table.get(at);
        if let Some(wild) = wild_shape(item.source(), item.tag()) {
            self.routes.wild[wild] -= 1;
        }
        if self.routes.in_closed > 0 && self.routes.closed[queue as usize].is_some() {
            self.routes.leave_closed(item.source(), queue);
        }
        self.table.remove(at).0
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
        let routes = &mut self.routes;
        let len = self.table.queue_len(routes.tail);
        // A level needs a partner queue and a non-partner queue.
        if *budget < 2 {
            routes.next_check = usize::MAX;
            return false;
        }
        let mut counts: IntMap<i32, usize> = IntMap::default();
        for item in self.table.items(routes.tail) {
            *counts.entry(item.source()).or_default() += 1;
        }
        let mut chosen: Vec<(usize, i32)> = counts
            .iter()
            .filter(|&(_, &count)| count * shape.comm_size > len)
            .map(|(&source, &count)| (count, source))
            .collect();
        chosen.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        chosen.truncate(*budget - 1);
        if chosen.is_empty() {
            routes.next_check = len + shape.theta.max(len / 2);
            return false;
        }
        let first = self.table.add_queues(chosen.len() + 1);
        let keys: Vec<(i32, i32)> = self
            .table
            .items(routes.tail)
            .map(|item| (item.source(), item.tag()))
            .collect();
        routes.closed[routes.tail as usize] = Some(Filter::new(&keys));
        routes.closed.resize_with(self.table.queue_count(), || None);
        routes.in_closed += len;
        for (source, count) in counts {
            let route = routes.sources.entry(source);
            route.left.push((routes.tail, count));
        }
        for (i, &(_, source)) in chosen.iter().enumerate() {
            routes.sources.entry(source).own = Some(first + i as u32);
        }
        routes.tail = first + chosen.len() as u32;
        routes.levels += 1;
        routes.next_check = shape.theta;
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
        let hit = |e: &Envelope| want.matches(e);
        let umq = &mut self.umq;
        let (found, depth) = if want.source == ANY_SOURCE || want.tag == ANY_TAG {
            umq.table.find_oldest(hit)
        } else {
            let routes = &umq.routes;
            let key = (want.source, want.tag);
            umq.table
                .search(hit, |table| routes.find_from(table, key, u64::MAX, hit))
        };
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let at = found?;
        if !taken {
            return Some(self.umq.table.id(at));
        }
        Some(self.umq.remove(at))
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
        let hit = |p: &Pattern| p.matches(&env);
        let routes = &self.prq.routes;
        let (found, depth) = self
            .prq
            .table
            .search(hit, |prq| routes.find_posted(prq, &env));
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        if let Some(at) = found {
            return Some(self.prq.remove(at));
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
        found.map(|at| self.prq.remove(at)).is_some()
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
    use crate::matching::Class;

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

    /// The queues a search for `source` visits, in order.
    fn path<T: Element>(side: &Side<T>, source: i32) -> Vec<u32> {
        let (current, left) = side.routes.route(source);
        let mut path: Vec<u32> = left.iter().map(|l| l.0).collect();
        path.push(current);
        path
    }

    fn partners<T: Element>(side: &Side<T>) -> Vec<(i32, u32)> {
        let sources = side.routes.sources.routes.iter();
        let mut own: Vec<(i32, u32)> = sources.filter_map(|(s, r)| Some((*s, r.own?))).collect();
        own.sort();
        own
    }

    proptest::proptest! {
        /// Sources come and go in any order; every lookup agrees with a std map.
        #[test]
        fn source_map_keeps_every_route(ops in proptest::collection::vec((0i32..40, proptest::bool::ANY), 0..400)) {
            let mut map = SourceMap::default();
            let mut std_map = std::collections::HashMap::new();
            for (step, (source, insert)) in ops.into_iter().enumerate() {
                if insert {
                    map.entry(source).left.push((step as u32, 1));
                    std_map.entry(source).or_insert_with(Vec::new).push((step as u32, 1));
                } else if std_map.remove(&source).is_some() {
                    map.remove(source);
                }
                for probe in 0..40 {
                    let left = map.get(probe).map(|r| r.left.clone());
                    proptest::prop_assert_eq!(left, std_map.get(&probe).cloned());
                }
            }
        }
    }

    /// Paper 004 Fig. 4 with θ = 4 and n = 4 ranks.
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
        let routes = &side.routes;
        let [(0, rank0), (2, rank2)] = partners(side)[..] else {
            panic!("partners {:?}", partners(side))
        };
        assert_eq!(routes.levels, 2);
        let np0 = rank0 + 1;
        let np1 = routes.tail;
        assert_eq!((rank2, np1), (np0 + 1, np0 + 2));
        // Red arrow: a partner searches the base queue, the non-partner queues of the levels
        // before its own, then its queue; the green arrows of non-partners go through every
        // non-partner queue. Queues without elements from the source are left out.
        assert_eq!(path(side, 0), [BASE, rank0]);
        assert_eq!(path(side, 2), [BASE, np0, rank2]);
        assert_eq!(path(side, 1), [np0, np1]);
        assert_eq!(path(side, 3), [np1]);
        assert_eq!(
            [BASE, np0, np1, rank0, rank2].map(|q| side.table.queue_len(q)),
            [4, 4, 1, 1, 1]
        );

        // Rank 0's newest receive: its sub-queue in the base queue, then its own queue.
        assert_eq!(pnp.arrive(msg(0, 3), 100), Some(8));
        // Rank 2's receives match in posting order across base, level 0 and its own queue.
        for id in [3, 4, 5, 7, 9] {
            assert_eq!(pnp.arrive(msg(2, 7), 100), Some(id));
        }
        assert_eq!(pnp.queued(), (5, 0));

        // Once the closed queues are drained, a search looks in one queue.
        assert_eq!(pnp.prq.routes.in_closed, 4);
        for (source, tag, id) in [(0, 0, 0), (0, 2, 2), (0, 1, 1), (1, 0, 6)] {
            assert_eq!(pnp.arrive(msg(source, tag), 100), Some(id));
        }
        let routes = &pnp.prq.routes;
        assert_eq!(routes.in_closed, 0);
        assert_eq!(partners(&pnp.prq).len(), routes.sources.routes.len());
        assert_eq!(path(&pnp.prq, 3), [np1]);
        assert_eq!(pnp.arrive(msg(3, 0), 100), Some(10));
    }

    /// One source, many tags in reverse: the partner's sub-queues keep every search short (a
    /// list inspects 1000 elements per search here). While the first θ receives, left in the
    /// closed base queue, are queued, a search also looks in its sub-queue there, which holds
    /// another tag's element about as often as the buckets are full.
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
        assert_eq!(partners(&pnp.prq).len(), 1);
        for tag in (0..2000).rev() {
            assert_eq!(pnp.arrive(msg(3, tag), 0), Some(tag as u64));
        }
        let prq = pnp.stats().point_to_point.prq;
        assert!(prq.mean() < 2.0, "mean depth {}", prq.mean());
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
        assert_eq!(partners(&pnp.umq).len(), 3);
        assert_eq!(pnp.stats().queues, 3 + 4);
        assert_eq!(pnp.umq_budget, 0);
    }
}
