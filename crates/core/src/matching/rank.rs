//! One queue per source rank plus an ordered list of wildcard-source receives (Open MPI-like).
//! Sequence numbers order receives across the per-source queues and the wildcard list.

use super::{take, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId, ANY_SOURCE};
use std::collections::VecDeque;

struct Posted {
    seq: u64,
    want: Pattern,
    recv: RecvId,
}

struct Arrived {
    seq: u64,
    env: Envelope,
    msg: MsgId,
}

pub struct RankEngine {
    posted_by_source: Vec<VecDeque<Posted>>,
    posted_any_source: VecDeque<Posted>,
    unexpected_by_source: Vec<VecDeque<Arrived>>,
    next_seq: u64,
    stats: EngineStats,
}

impl RankEngine {
    pub fn new(comm_size: usize) -> Self {
        let mut engine = RankEngine {
            posted_by_source: (0..comm_size).map(|_| VecDeque::new()).collect(),
            posted_any_source: VecDeque::new(),
            unexpected_by_source: (0..comm_size).map(|_| VecDeque::new()).collect(),
            next_seq: 0,
            stats: EngineStats::default(),
        };
        engine.stats.set_queues(2 * comm_size as u64 + 1);
        engine
    }

    fn seq(&mut self) -> u64 {
        self.next_seq += 1;
        self.next_seq
    }

    /// The earliest matching unexpected message: (source queue, index), with the search depth.
    fn find_unexpected(&self, want: &Pattern) -> (Option<(usize, usize)>, usize) {
        let sources = if want.source == ANY_SOURCE {
            0..self.unexpected_by_source.len()
        } else {
            let s = want.source as usize;
            s..s + 1
        };
        let mut best: Option<(u64, usize, usize)> = None;
        let mut depth = 0;
        for source in sources {
            let queue = &self.unexpected_by_source[source];
            let hit = queue.iter().position(|a| want.matches(&a.env));
            depth += hit.map_or(queue.len(), |i| i + 1);
            if let Some(i) = hit {
                let seq = queue[i].seq;
                if best.is_none_or(|(s, _, _)| seq < s) {
                    best = Some((seq, source, i));
                }
            }
        }
        (best.map(|(_, s, i)| (s, i)), depth)
    }

    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let (hit, depth) = self.find_unexpected(want);
        let taken = remove && hit.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let (source, i) = hit?;
        if taken {
            take(&mut self.unexpected_by_source[source], i).map(|a| a.msg)
        } else {
            Some(self.unexpected_by_source[source][i].msg)
        }
    }
}

impl MatchEngine for RankEngine {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        let posted = Posted {
            seq: self.seq(),
            want,
            recv,
        };
        if want.source == ANY_SOURCE {
            self.posted_any_source.push_back(posted);
        } else {
            self.posted_by_source[want.source as usize].push_back(posted);
        }
        None
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let source = env.source as usize;
        let specific = &self.posted_by_source[source];
        let hit_specific = specific.iter().position(|p| p.want.matches(&env));
        let mut depth = hit_specific.map_or(specific.len(), |i| i + 1);
        // ANY_SOURCE receives are rare: most arrivals skip their list.
        let hit_any = if self.posted_any_source.is_empty() {
            None
        } else {
            let any = &self.posted_any_source;
            let hit = any.iter().position(|p| p.want.matches(&env));
            depth += hit.map_or(any.len(), |i| i + 1);
            hit
        };
        let take_specific = match (hit_specific, hit_any) {
            (Some(i), Some(j)) => specific[i].seq < self.posted_any_source[j].seq,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => {
                let seq = self.seq();
                self.stats.traffic(env.class).arrival(depth, false);
                self.unexpected_by_source[source].push_back(Arrived { seq, env, msg });
                return None;
            }
        };
        self.stats.traffic(env.class).arrival(depth, true);
        let (queue, index) = if take_specific {
            (&mut self.posted_by_source[source], hit_specific.unwrap())
        } else {
            (&mut self.posted_any_source, hit_any.unwrap())
        };
        take(queue, index).map(|p| p.recv)
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let queues = self
            .posted_by_source
            .iter_mut()
            .chain(std::iter::once(&mut self.posted_any_source));
        for queue in queues {
            if let Some(i) = queue.iter().position(|p| p.recv == recv) {
                queue.remove(i);
                return true;
            }
        }
        false
    }

    fn queued(&self) -> (usize, usize) {
        let posted = self.posted_any_source.len()
            + self
                .posted_by_source
                .iter()
                .map(VecDeque::len)
                .sum::<usize>();
        let unexpected = self.unexpected_by_source.iter().map(VecDeque::len).sum();
        (posted, unexpected)
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
