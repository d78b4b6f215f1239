//! Hash bins keyed on (source, tag) (Flajslik et al.), and `adaptive`: the same structure kept at
//! one bin (a list) while searches are short.

use super::table::Table;
use super::{EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};

/// Posted receives sit in the bin of their (source, tag) as written, wildcards included, so an
/// arrival looks in at most four bins, (s,t), (ANY,t), (s,ANY) and (ANY,ANY), the last three only
/// while receives of that shape are queued; sequence numbers pick the earliest, and each bin is
/// searched only up to the best candidate so far. Unexpected messages sit in the bin of their
/// (source, tag); a wildcard receive or probe walks the arrival order of all of them, which
/// costs what a list costs instead of a visit to every bin. The bins double whenever a side
/// holds more elements than it has bins, so a bin holds about one element (`Table`).
pub struct Bins {
    prq: Table<Pattern>,
    umq: Table<Envelope>,
    stats: EngineStats,
}

impl Bins {
    /// At least `bins` bins per side; one bin is a list and stays one.
    pub fn new(bins: usize) -> Self {
        let grow = bins > 1;
        let mut engine = Bins {
            prq: Table::new(1, bins, grow),
            umq: Table::new(1, bins, grow),
            stats: EngineStats::default(),
        };
        engine.count_queues();
        engine
    }

    fn count_queues(&mut self) {
        let queues = (self.prq.buckets() + self.umq.buckets()) as u64;
        if queues != self.stats.queues {
            self.stats.set_queues(queues);
        }
    }

    /// Regroups both sides into `bins` bins (growing unless one); every bin keeps arrival order.
    fn rebin(&mut self, bins: usize) {
        self.prq.resize(bins, bins > 1);
        self.umq.resize(bins, bins > 1);
        self.count_queues();
    }

    fn bins(&self) -> usize {
        self.prq.buckets()
    }

    #[inline(always)]
    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let (found, depth) = self.umq.find_unexpected(want);
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        self.count_queues();
        let at = found?;
        if !taken {
            return Some(self.umq.id(at));
        }
        Some(self.umq.remove(at).0)
    }
}

impl MatchEngine for Bins {
    #[inline(always)]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        self.prq.push(0, want, recv);
        None
    }

    #[inline(always)]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let (found, depth) = self.prq.find_posted(&env);
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        self.count_queues();
        match found {
            Some(at) => Some(self.prq.remove(at).0),
            None => {
                self.umq.push(0, env, msg);
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.prq.find_id(recv);
        found.map(|at| self.prq.remove(at)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.len(), self.umq.len())
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

/// A list (bins with one bin) until the searches of a window inspect more than
/// `adaptive_depth` elements on average, then `bins` bins until both queues stay within half of
/// that for a whole window. Regrouping walks the queues in arrival order, so order is kept.
pub struct Adaptive {
    bins: Bins,
    wide: usize,
    /// Depth summed over a window past which the list turns to bins.
    widen_at: u64,
    /// Queue length within which the bins turn back to a list.
    narrow_at: usize,
    window: usize,
    searches: usize,
    depth: u64,
    longest: usize,
}

/// Elements inspected by every search so far.
fn searched(stats: &EngineStats) -> u64 {
    let traffic = [&stats.point_to_point, &stats.collective];
    traffic
        .iter()
        .map(|t| t.prq.depth_total + t.umq.depth_total)
        .sum()
}

impl Adaptive {
    pub fn new(params: &EngineParams) -> Self {
        let window = params.adaptive_window.max(1);
        let wide = params.bins.max(1);
        Adaptive {
            bins: Bins::new(1),
            wide,
            widen_at: if wide > 1 {
                (params.adaptive_depth * window) as u64
            } else {
                u64::MAX
            },
            narrow_at: params.adaptive_depth / 2,
            window,
            searches: 0,
            depth: 0,
            longest: 0,
        }
    }

    /// Runs one operation on the bins and watches its search depth.
    #[inline(always)]
    fn observed<R>(&mut self, op: impl FnOnce(&mut Bins) -> R) -> R {
        let before = searched(&self.bins.stats);
        let found = op(&mut self.bins);
        self.observe(searched(&self.bins.stats) - before);
        found
    }

    #[inline(always)]
    fn observe(&mut self, depth: u64) {
        self.searches += 1;
        if self.bins.bins() == 1 {
            // The window's mean is past the limit as soon as its sum is: switch at once.
            self.depth += depth;
            if self.depth > self.widen_at {
                self.bins.rebin(self.wide);
                self.restart();
                return;
            }
        } else {
            let (posted, unexpected) = self.bins.queued();
            self.longest = self.longest.max(posted.max(unexpected));
        }
        if self.searches >= self.window {
            if self.bins.bins() > 1 && self.longest <= self.narrow_at {
                self.bins.rebin(1);
            }
            self.restart();
        }
    }

    fn restart(&mut self) {
        self.searches = 0;
        self.depth = 0;
        self.longest = 0;
    }
}

impl MatchEngine for Adaptive {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        self.observed(|bins| bins.post(want, recv))
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        self.observed(|bins| bins.arrive(env, msg))
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.observed(|bins| bins.probe(want, remove))
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        self.bins.cancel(recv)
    }

    fn queued(&self) -> (usize, usize) {
        self.bins.queued()
    }

    fn stats(&self) -> &EngineStats {
        &self.bins.stats
    }
}
