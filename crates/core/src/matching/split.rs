//! The unified engines (Ghazimirsaeed et al. 2019, Fig. 2): point-to-point and collective elements in engines of
//! their own, which never share an element since the two never match.

use super::{EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use std::cell::OnceCell;

/// Point-to-point traffic to `P`, collective traffic to `C`.
pub struct Split<P, C> {
    p2p: P,
    coll: C,
    /// Both parts' counters, merged when asked for and forgotten by the next operation: copying
    /// them on every operation cost more than the operation's own counting.
    merged: OnceCell<EngineStats>,
}

impl<P: MatchEngine, C: MatchEngine> Split<P, C> {
    pub fn new(p2p: P, coll: C) -> Self {
        Split {
            p2p,
            coll,
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
