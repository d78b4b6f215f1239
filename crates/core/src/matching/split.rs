//! The unified engines (paper 004, Fig. 2): point-to-point and collective elements in engines of
//! their own, which never share an element since the two never match.

use super::{EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};

/// Point-to-point traffic to `P`, collective traffic to `C`.
pub struct Split<P, C> {
    p2p: P,
    coll: C,
    /// Each part's counters of its own traffic type, and the queues of both.
    stats: EngineStats,
}

impl<P: MatchEngine, C: MatchEngine> Split<P, C> {
    pub fn new(p2p: P, coll: C) -> Self {
        let mut split = Split {
            p2p,
            coll,
            stats: EngineStats::default(),
        };
        split.count_queues();
        split
    }

    /// Runs `p2p` or `coll` on its part, then copies that part's counters.
    #[inline(always)]
    fn route<R>(
        &mut self,
        collective: bool,
        p2p: impl FnOnce(&mut P) -> R,
        coll: impl FnOnce(&mut C) -> R,
    ) -> R {
        let found = if collective {
            let found = coll(&mut self.coll);
            self.stats.collective = self.coll.stats().collective;
            found
        } else {
            let found = p2p(&mut self.p2p);
            self.stats.point_to_point = self.p2p.stats().point_to_point;
            found
        };
        self.count_queues();
        found
    }

    #[inline(always)]
    fn count_queues(&mut self) {
        let queues = self.p2p.stats().queues + self.coll.stats().queues;
        if queues != self.stats.queues {
            self.stats.set_queues(queues);
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
        self.p2p.cancel(recv) || self.coll.cancel(recv)
    }

    fn queued(&self) -> (usize, usize) {
        let (p, u) = self.p2p.queued();
        let (cp, cu) = self.coll.queued();
        (p + cp, u + cu)
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
