//! The unified engines (Ghazimirsaeed et al. 2019, Fig. 2): point-to-point and collective elements in engines of
//! their own, which never share an element since the two never match.

use super::{EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use std::cell::OnceCell;

/// Point-to-point traffic to `P`, collective traffic to `C`.
pub struct Split<P, C> {
    p2p: P,
    coll: C,
    /// A mixed burst's messages of one part, and where each part's results go (kept between
    /// bursts so that a burst allocates nothing).
    part: Vec<(Envelope, MsgId)>,
    part_matched: Vec<Option<RecvId>>,
    /// Both parts' counters, merged when asked for and forgotten by the next operation: copying
    /// them on every operation cost more than the operation's own counting.
    merged: OnceCell<EngineStats>,
}

impl<P: MatchEngine, C: MatchEngine> Split<P, C> {
    pub fn new(p2p: P, coll: C) -> Self {
        Split {
            p2p,
            coll,
            part: Vec::new(),
            part_matched: Vec::new(),
            merged: OnceCell::new(),
        }
    }

    /// Runs `p2p` or `coll` on its part.
    #[inline(always)]
    fn route<R>(
        &mut self,
        collective: bool,
        p2p: impl FnOnce(&mut P) -> R,
        coll: impl FnOnce(&mut C) -> R,
    ) -> R {
        self.merged.take();
        if collective {
            coll(&mut self.coll)
        } else {
            p2p(&mut self.p2p)
        }
    }
}

impl<P: MatchEngine, C: MatchEngine> MatchEngine for Split<P, C> {
    #[inline]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        let collective = want.class.is_collective();
        self.route(collective, |p| p.post(want, recv), |c| c.post(want, recv))
    }

    #[inline]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let collective = env.class.is_collective();
        self.route(collective, |p| p.arrive(env, msg), |c| c.arrive(env, msg))
    }

    /// Each part gets its messages as one burst, in their order: the parts share no element,
    /// so neither's matches depend on the other's.
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        self.merged.take();
        let collectives = msgs.iter().filter(|m| m.0.class.is_collective()).count();
        if collectives == 0 {
            return self.p2p.arrive_burst(msgs, matched);
        }
        if collectives == msgs.len() {
            return self.coll.arrive_burst(msgs, matched);
        }
        let start = matched.len();
        matched.resize(start + msgs.len(), None);
        for collective in [false, true] {
            self.part.clear();
            self.part.extend(
                msgs.iter()
                    .filter(|m| m.0.class.is_collective() == collective),
            );
            self.part_matched.clear();
            if collective {
                self.coll.arrive_burst(&self.part, &mut self.part_matched);
            } else {
                self.p2p.arrive_burst(&self.part, &mut self.part_matched);
            }
            let mut results = self.part_matched.iter();
            for (slot, msg) in matched[start..].iter_mut().zip(msgs) {
                if msg.0.class.is_collective() == collective {
                    *slot = *results.next().expect("one result per message");
                }
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        let collective = want.class.is_collective();
        self.route(
            collective,
            |p| p.probe(want, remove),
            |c| c.probe(want, remove),
        )
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        self.merged.take();
        self.p2p.cancel(recv) || self.coll.cancel(recv)
    }

    fn queued(&self) -> (usize, usize) {
        let (p, u) = self.p2p.queued();
        let (cp, cu) = self.coll.queued();
        (p + cp, u + cu)
    }

    /// Each part's counters of its traffic type. The parts never release queues, so the sum of
    /// their maxima is the most both held at once.
    fn stats(&self) -> &EngineStats {
        self.merged.get_or_init(|| {
            let (p2p, coll) = (self.p2p.stats(), self.coll.stats());
            EngineStats {
                point_to_point: p2p.point_to_point,
                collective: coll.collective,
                queues: p2p.queues + coll.queues,
                queues_max: p2p.queues_max + coll.queues_max,
            }
        })
    }
}
