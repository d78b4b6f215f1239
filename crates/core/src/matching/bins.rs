//! Hash bins keyed on (source, tag) (Flajslik et al.), and `adaptive`: the same structure kept at
//! one bin (a list) while searches are short.

use super::table::{Loc, Table};
use super::{
    EngineParams, Envelope, MsgId, Pattern, Queues, RecvId, TrafficStats, ANY_SOURCE, ANY_TAG,
};

/// Posted receives sit in the bin of their (source, tag) as written, wildcards included, so an
/// arrival looks in at most four bins, (s,t), (ANY,t), (s,ANY) and (ANY,ANY), the last three only
/// while receives of that shape are queued; sequence numbers pick the earliest, and each bin is
/// searched only up to the best candidate so far. Unexpected messages sit in the bin of their
/// (source, tag); a wildcard receive or probe walks the arrival-ordered chain of all of them,
/// which costs what a list costs instead of a visit to every bin. The bins double whenever a
/// side holds more elements than it has bins, so a bin holds about one element.
pub struct Bins {
    prq: Table<Pattern>,
    umq: Table<Envelope>,
    /// Posted receives with ANY_SOURCE only, with ANY_TAG only, and with both.
    wild: [usize; 3],
}

fn shape(source: i32, tag: i32) -> Option<usize> {
    match (source == ANY_SOURCE, tag == ANY_TAG) {
        (false, false) => None,
        (true, false) => Some(0),
        (false, true) => Some(1),
        (true, true) => Some(2),
    }
}

impl Bins {
    /// At least `bins` bins per side; one bin is a list and stays one.
    pub fn new(bins: usize) -> Self {
        let grow = bins > 1;
        Bins {
            prq: Table::new(bins, grow, false),
            umq: Table::new(bins, grow, true),
            wild: [0; 3],
        }
    }

    /// Regroups both sides into `bins` bins (growing unless one); every bin keeps arrival order.
    fn rebin(&mut self, bins: usize) {
        self.prq.resize(bins, bins > 1);
        self.umq.resize(bins, bins > 1);
    }

    fn bins(&self) -> usize {
        self.prq.buckets()
    }

    #[inline(always)]
    fn take_unexpected(
        &mut self,
        want: &Pattern,
        remove: bool,
        traffic: &mut TrafficStats,
    ) -> Option<MsgId> {
        let hit = |e: &Envelope| want.matches(e);
        let (found, depth) = if self.umq.len() == 0 {
            (None, 0)
        } else if want.source == ANY_SOURCE || want.tag == ANY_TAG {
            self.umq.find_oldest(hit)
        } else {
            self.umq.find(want.source, want.tag, u64::MAX, hit)
        };
        traffic.umq.record(depth);
        let at = found?;
        if !remove {
            return Some(self.umq.node(at).id);
        }
        traffic.matches += 1;
        Some(self.umq.remove(at))
    }

    /// The earliest posted receive that fits `env`, from the bins it may be in.
    #[inline(always)]
    fn find_posted(&self, env: &Envelope) -> (Option<Loc>, usize) {
        let hit = |p: &Pattern| p.matches(env);
        let (mut best, mut depth) = self.prq.find(env.source, env.tag, u64::MAX, hit);
        if self.wild == [0; 3] {
            return (best, depth);
        }
        let mut bound = best.map_or(u64::MAX, |at| self.prq.node(at).seq);
        let wild = [
            (ANY_SOURCE, env.tag),
            (env.source, ANY_TAG),
            (ANY_SOURCE, ANY_TAG),
        ];
        let mut searched = [self.prq.bin(env.source, env.tag), usize::MAX, usize::MAX];
        for (i, &(source, tag)) in wild.iter().enumerate() {
            if self.wild[i] == 0 {
                continue;
            }
            // A bin searched already for another shape holds nothing older that fits.
            let bin = self.prq.bin(source, tag);
            if searched.contains(&bin) {
                continue;
            }
            if i < 2 {
                searched[i + 1] = bin;
            }
            let (found, d) = self.prq.find(source, tag, bound, hit);
            depth += d;
            if let Some(at) = found {
                bound = self.prq.node(at).seq;
                best = found;
            }
        }
        (best, depth)
    }

    #[inline(always)]
    fn remove_posted(&mut self, at: Loc) -> RecvId {
        let want = self.prq.node(at).item;
        if let Some(shape) = shape(want.source, want.tag) {
            self.wild[shape] -= 1;
        }
        self.prq.remove(at)
    }
}

impl Queues for Bins {
    #[inline(always)]
    fn post(&mut self, want: Pattern, recv: RecvId, traffic: &mut TrafficStats) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true, traffic) {
            return Some(msg);
        }
        if let Some(shape) = shape(want.source, want.tag) {
            self.wild[shape] += 1;
        }
        self.prq.push(want, recv);
        None
    }

    #[inline(always)]
    fn arrive(&mut self, env: Envelope, msg: MsgId, traffic: &mut TrafficStats) -> Option<RecvId> {
        let (found, depth) = self.find_posted(&env);
        traffic.prq.record(depth);
        match found {
            Some(at) => {
                traffic.matches += 1;
                Some(self.remove_posted(at))
            }
            None => {
                traffic.unexpected += 1;
                self.umq.push(env, msg);
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool, traffic: &mut TrafficStats) -> Option<MsgId> {
        self.take_unexpected(&want, remove, traffic)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        match self.prq.find_id(recv) {
            Some(at) => {
                self.remove_posted(at);
                true
            }
            None => false,
        }
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.len(), self.umq.len())
    }

    fn queues(&self) -> usize {
        self.prq.buckets() + self.umq.buckets()
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

fn searched(traffic: &TrafficStats) -> u64 {
    traffic.prq.depth_total + traffic.umq.depth_total
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

impl Queues for Adaptive {
    fn post(&mut self, want: Pattern, recv: RecvId, traffic: &mut TrafficStats) -> Option<MsgId> {
        let before = searched(traffic);
        let found = self.bins.post(want, recv, traffic);
        self.observe(searched(traffic) - before);
        found
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId, traffic: &mut TrafficStats) -> Option<RecvId> {
        let before = searched(traffic);
        let found = self.bins.arrive(env, msg, traffic);
        self.observe(searched(traffic) - before);
        found
    }

    fn probe(&mut self, want: Pattern, remove: bool, traffic: &mut TrafficStats) -> Option<MsgId> {
        let before = searched(traffic);
        let found = self.bins.probe(want, remove, traffic);
        self.observe(searched(traffic) - before);
        found
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        self.bins.cancel(recv)
    }

    fn queued(&self) -> (usize, usize) {
        self.bins.queued()
    }

    fn queues(&self) -> usize {
        self.bins.queues()
    }
}
