//! Queues for collective elements (Ghazimirsaeed et al. 2019, §4.1, Algorithms 1 and 2, Fig. 3).

use super::store::{fingerprint, Loc, Store};
use super::{
    queue_budget, Class, Element, EngineParams, EngineStats, Envelope, IntMap, MatchEngine, MsgId,
    Pattern, RecvId, SearchStats, Simd, ANY_SOURCE,
};

/// The profiling queue. It also holds whatever has no dedicated queue: point-to-point elements
/// (when this structure serves all traffic), ANY_SOURCE receives, and collectives the budget left
/// without queues.
const PQ: u32 = 0;

/// Profiling state of one (collective, message size class); the communicator size is fixed per
/// engine, so it completes the key of the paper.
enum Profile {
    /// The first call: its elements go to the profiling queue. The engine sees elements, not
    /// calls, so the call is taken to last while any of its elements is queued.
    Running {
        queued: usize,
        depth: SearchStats,
    },
    /// Profiled, queues not yet decided: the next element decides them (Algorithm 1, l. 7–16).
    Profiled {
        mean: f64,
    },
    Decided,
}

struct Level {
    first: u32,
    queues: u32,
}

/// The levels of one collective operation; an element goes to the last level, to queue
/// `source mod queues`.
struct Kind {
    kind: u8,
    levels: Vec<Level>,
    queued: usize,
}

fn key(class: Class) -> Option<(u8, u16)> {
    match class {
        Class::Collective { kind, size_class } => {
            Some((kind, (kind as u16) << 8 | size_class as u16))
        }
        Class::PointToPoint => None,
    }
}

/// One side (posted receives or unexpected messages).
struct Side<T> {
    store: Store<T>,
    profiles: IntMap<u16, Profile>,
    kinds: Vec<Kind>,
}

impl<T: Element> Side<T> {
    fn new(ordered: bool, simd: Simd) -> Self {
        Side {
            store: Store::new(1, ordered, simd),
            profiles: IntMap::default(),
            kinds: Vec::new(),
        }
    }

    /// Algorithm 1 for one element.
    #[inline]
    fn insert(&mut self, item: T, id: u64, budget: &mut usize) {
        let Some((kind, key)) = key(item.class()) else {
            self.store.push(PQ, item, id);
            return;
        };
        let profile = self.profiles.entry(key).or_insert(Profile::Running {
            queued: 0,
            depth: SearchStats::default(),
        });
        match profile {
            Profile::Running { queued, .. } => {
                *queued += 1;
                self.store.push(PQ, item, id);
                return;
            }
            Profile::Profiled { mean } => {
                // Queues enough for one inspection per search on average.
                let wanted = (mean.round() as usize).max(1);
                *profile = Profile::Decided;
                self.allocate(kind, wanted, budget);
            }
            Profile::Decided => {}
        }
        let source = item.source();
        if source != ANY_SOURCE {
            if let Some(k) = self.kinds.iter_mut().find(|k| k.kind == kind) {
                if let Some(level) = k.levels.last() {
                    k.queued += 1;
                    let queue = level.first + source as u32 % level.queues;
                    self.store.push(queue, item, id);
                    return;
                }
            }
        }
        self.store.push(PQ, item, id);
    }

    /// A new level of `wanted` queues for `kind` if that is more than its last level has
    /// (Algorithm 1, l. 9–15). Where the budget cannot pay for all of them, the level gets what
    /// is left, as the paper's hot-spot ranks do (§5.2: as many queues as the cap allows).
    fn allocate(&mut self, kind: u8, wanted: usize, budget: &mut usize) {
        let wanted = wanted.min(*budget);
        let index = match self.kinds.iter().position(|k| k.kind == kind) {
            Some(index) => index,
            None => {
                self.kinds.push(Kind {
                    kind,
                    levels: Vec::new(),
                    queued: 0,
                });
                self.kinds.len() - 1
            }
        };
        let levels = &mut self.kinds[index].levels;
        let last = levels.last().map_or(0, |l| l.queues as usize);
        if wanted > last {
            let first = self.store.add_queues(wanted);
            levels.push(Level {
                first,
                queues: wanted as u32,
            });
            *budget -= wanted;
        }
    }

    /// Algorithm 2: the profiling queue, then the levels of the collective from the first to the
    /// last, in the queue `source mod queues` of each. Pattern matching does not compare the
    /// collective operation, so the levels of every operation with queued elements are searched;
    /// sequence numbers pick the earliest. Point-to-point elements only live in the profiling
    /// queue. `key` as in `Store::find`.
    #[inline]
    fn find_for(
        &self,
        source: i32,
        class: Class,
        key: u16,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        let (mut best, mut depth) = self.store.find(PQ, u64::MAX, key, &hit);
        if !class.is_collective() {
            return (best, depth);
        }
        let mut bound = best.map_or(u64::MAX, |at| self.store.entry(at).seq);
        for kind in self.kinds.iter().filter(|k| k.queued > 0) {
            for level in &kind.levels {
                let queue = level.first + source as u32 % level.queues;
                let (found, d) = self.store.find(queue, bound, key, &hit);
                depth += d;
                if let Some(at) = found {
                    // Later levels only hold newer elements.
                    bound = self.store.entry(at).seq;
                    best = found;
                    break;
                }
            }
        }
        (best, depth)
    }

    /// Counts a search made for an element of `class` toward its profile.
    #[inline]
    fn profile(&mut self, class: Class, depth: usize) {
        if let Some((_, key)) = key(class) {
            if let Some(Profile::Running { depth: stats, .. }) = self.profiles.get_mut(&key) {
                stats.record(depth);
            }
        }
    }

    #[inline]
    fn remove(&mut self, at: Loc) -> u64 {
        let entry = self.store.remove(at);
        if let Some((kind, key)) = key(entry.item.class()) {
            if at.queue == PQ {
                if let Some(Profile::Running { queued, depth }) = self.profiles.get_mut(&key) {
                    *queued -= 1;
                    if *queued == 0 {
                        let mean = depth.mean();
                        self.profiles.insert(key, Profile::Profiled { mean });
                    }
                }
            } else if let Some(k) = self.kinds.iter_mut().find(|k| k.kind == kind) {
                k.queued -= 1;
            }
        }
        entry.id
    }
}

/// Posted receives and unexpected messages each in collective queues. Dedicated queues stay
/// within `k_c·√n` on each side, as Ghazimirsaeed et al. (2019) count them (its Fig. 9 and 10).
pub struct Col {
    prq: Side<Pattern>,
    umq: Side<Envelope>,
    prq_budget: usize,
    umq_budget: usize,
    stats: EngineStats,
}

impl Col {
    pub fn new(params: &EngineParams, simd: Simd) -> Self {
        let mut col = Col {
            prq: Side::new(false, simd),
            umq: Side::new(true, simd),
            prq_budget: queue_budget(params.k_c, params.comm_size),
            umq_budget: queue_budget(params.k_c, params.comm_size),
            stats: EngineStats::default(),
        };
        col.count_queues();
        col
    }

    fn count_queues(&mut self) {
        let queues = self.prq.store.queue_count() + self.umq.store.queue_count();
        if queues as u64 != self.stats.queues {
            self.stats.set_queues(queues as u64);
        }
    }

    #[inline]
    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let hit = |e: &Envelope| want.matches(e);
        let (found, depth) = if self.umq.store.len() == 0 {
            (None, 0)
        } else if want.source == ANY_SOURCE && want.class.is_collective() {
            self.umq.store.find_oldest(hit)
        } else {
            let key = fingerprint(want.source, want.tag);
            self.umq.find_for(want.source, want.class, key, hit)
        };
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        self.umq.profile(want.class, depth);
        let at = found?;
        if !taken {
            return Some(self.umq.store.entry(at).id);
        }
        Some(self.umq.remove(at))
    }
}

impl MatchEngine for Col {
    #[inline]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        self.prq.insert(want, recv, &mut self.prq_budget);
        self.count_queues();
        None
    }

    #[inline]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let key = fingerprint(env.source, env.tag);
        let (found, depth) = self
            .prq
            .find_for(env.source, env.class, key, |p| p.matches(&env));
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        self.prq.profile(env.class, depth);
        match found {
            Some(at) => Some(self.prq.remove(at)),
            None => {
                self.umq.insert(env, msg, &mut self.umq_budget);
                self.count_queues();
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.prq.store.find_id(recv);
        found.map(|at| self.prq.remove(at)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.store.len(), self.umq.store.len())
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn coll(kind: u8, size_class: u8) -> Class {
        Class::Collective { kind, size_class }
    }

    /// Posts receives from `sources`, then lets their messages arrive in reverse order.
    fn call(col: &mut Col, class: Class, sources: std::ops::RangeInclusive<i32>) {
        for source in sources.clone() {
            let want = Pattern {
                source,
                tag: 0,
                class,
            };
            assert_eq!(col.post(want, source as u64), None);
        }
        for source in sources.rev() {
            let env = Envelope {
                source,
                tag: 0,
                class,
            };
            assert_eq!(col.arrive(env, 0), Some(source as u64));
        }
    }

    /// Ghazimirsaeed et al. 2019, Fig. 3: the first call of each (collective, size) is profiled in the profiling
    /// queue; later calls get levels of their own, and searches go from the profiling queue
    /// through the levels in order.
    #[test]
    fn profiling_levels_and_search_order_of_fig_3() {
        let params = EngineParams {
            comm_size: 16,
            k_c: 8,
            ..EngineParams::default()
        };
        let mut col = Col::new(&params, Simd::detect());
        let (allreduce, small, large, other) = (1, 0, 1, 2);

        // First call: searches of depth 7, 6, ..., 1 in the profiling queue, so 4 queues.
        call(&mut col, coll(allreduce, small), 1..=7);
        assert!(matches!(col.prq.profiles[&(1 << 8)], Profile::Profiled { mean } if mean == 4.0));
        assert_eq!(col.stats().queues, 2);

        // Second call: level 1 with 4 queues; rank 5 goes to queue 5 mod 4.
        let oldest = Pattern {
            source: 5,
            tag: 9,
            class: coll(allreduce, small),
        };
        col.post(oldest, 100);
        let level1 = &col.prq.kinds[0].levels[0];
        assert_eq!((level1.first, level1.queues), (1, 4));
        assert_eq!(col.prq.store.queue_len(level1.first + 1), 1);

        // The same collective with a larger message size is profiled again, in the profiling
        // queue: mean depth (120 + 4) / 15 rounds to 8 queues, more than level 1 has.
        call(&mut col, coll(allreduce, large), 1..=15);
        let middle = Pattern {
            source: 5,
            tag: 9,
            class: coll(allreduce, large),
        };
        col.post(middle, 101);
        let level2 = &col.prq.kinds[0].levels[1];
        assert_eq!((level2.first, level2.queues), (5, 8));
        assert_eq!(col.prq.store.queue_len(level2.first + 5), 1);
        assert_eq!(col.stats().queues, 2 + 4 + 8);
        assert_eq!(col.prq_budget, 32 - 12);

        // A new key is profiled in the profiling queue again.
        let newest = Pattern {
            source: 5,
            tag: 9,
            class: coll(other, small),
        };
        col.post(newest, 102);
        assert_eq!(col.prq.store.queue_len(PQ), 1);

        // All three fit one message: the profiling queue is searched first, then level 1, and
        // the oldest wins.
        let env = Envelope {
            source: 5,
            tag: 9,
            class: coll(allreduce, small),
        };
        let before = col.stats().collective.prq.depth_total;
        assert_eq!(col.arrive(env, 0), Some(100));
        assert_eq!(col.stats().collective.prq.depth_total - before, 2);
        assert_eq!(col.arrive(env, 0), Some(101));
        assert_eq!(col.arrive(env, 0), Some(102));
        assert_eq!(col.queued(), (0, 0));
    }

    #[test]
    fn point_to_point_elements_stay_in_the_profiling_queue() {
        let params = EngineParams {
            comm_size: 16,
            ..EngineParams::default()
        };
        let mut col = Col::new(&params, Simd::detect());
        for source in 0..8 {
            let want = Pattern {
                source,
                tag: 0,
                class: Class::PointToPoint,
            };
            col.post(want, source as u64);
        }
        assert_eq!((col.prq.store.queue_len(PQ), col.stats().queues), (8, 2));
    }
}
