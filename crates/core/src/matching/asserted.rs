//! The engine of a communicator whose info asserts `mpi_assert_no_any_source` and
//! `mpi_assert_no_any_tag` (MPI-4.0 §7.4.4).
//!
//! Every point-to-point receive then names its source and tag, so a receive and a message can
//! only meet in the hash bin of that pair: point-to-point traffic goes to `bins`, whose search
//! is then one bin of about one element whatever the queues' length or order, and skips the
//! partner profiling, search orders and wildcard bookkeeping of the engine `MATCHSHIM_ENGINE`
//! names. Bins still match a wildcard a program posts despite its assertion (erroneous, yet
//! accepted by MPI natively), at a list's cost. Allowing overtaking on top changes nothing
//! here: keeping each pair's order costs nothing. The collective elements of the shim's own
//! schedules go to the named engine.

use super::bins::Bins;
use super::{EngineStats, Envelope, MatchEngine, MsgId, Pattern, Queues, RecvId};
use std::cell::OnceCell;

pub struct Asserted {
    p2p: Bins,
    p2p_stats: EngineStats,
    coll: Box<dyn MatchEngine>,
    /// Both parts' counters, merged when asked.
    merged: OnceCell<EngineStats>,
}

impl Asserted {
    /// `bins` bins at first; collective traffic to `coll`.
    pub fn new(bins: usize, coll: Box<dyn MatchEngine>) -> Asserted {
        let p2p = Bins::new(bins);
        let mut p2p_stats = EngineStats::default();
        p2p_stats.set_queues(p2p.queues() as u64);
        Asserted {
            p2p,
            p2p_stats,
            coll,
            merged: OnceCell::new(),
        }
    }

    fn count_queues(&mut self) {
        self.p2p_stats.set_queues(self.p2p.queues() as u64);
    }
}

impl MatchEngine for Asserted {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        self.merged.take();
        if want.class.is_collective() {
            return self.coll.post(want, recv);
        }
        let found = self
            .p2p
            .post(want, recv, &mut self.p2p_stats.point_to_point);
        self.count_queues();
        found
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        self.merged.take();
        if env.class.is_collective() {
            return self.coll.arrive(env, msg);
        }
        let found = self
            .p2p
            .arrive(env, msg, &mut self.p2p_stats.point_to_point);
        self.count_queues();
        found
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.merged.take();
        if want.class.is_collective() {
            return self.coll.probe(want, remove);
        }
        self.p2p
            .probe(want, remove, &mut self.p2p_stats.point_to_point)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        self.merged.take();
        self.p2p.cancel(recv) || self.coll.cancel(recv)
    }

    fn queued(&self) -> (usize, usize) {
        let (posted, arrived) = self.p2p.queued();
        let (coll_posted, coll_arrived) = self.coll.queued();
        (posted + coll_posted, arrived + coll_arrived)
    }

    /// Point-to-point counters from the bins, collective ones from the named engine; queues of
    /// both.
    fn stats(&self) -> &EngineStats {
        self.merged.get_or_init(|| {
            let coll = self.coll.stats();
            EngineStats {
                point_to_point: self.p2p_stats.point_to_point,
                collective: coll.collective,
                queues: self.p2p_stats.queues + coll.queues,
                queues_max: self.p2p_stats.queues_max + coll.queues_max,
            }
        })
    }
}
