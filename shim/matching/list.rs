//! One posted-receive list and one unexpected-message list, searched front to back (MPICH-like).

use super::{Envelope, EngineStats, MatchEngine, MsgId, Pattern, RecvId};
use std::collections::VecDeque;

#[derive(Default)]
pub struct ListEngine {
    posted: VecDeque<(Pattern, RecvId)>,
    unexpected: VecDeque<(Envelope, MsgId)>,
    stats: EngineStats,
}

impl ListEngine {
    pub fn new() -> Self {
        let mut engine = Self::default();
        engine.stats.set_queues(2);
        engine
    }

    fn find_unexpected(&mut self, want: &Pattern) -> Option<usize> {
        let found = self.unexpected.iter().position(|(env, _)| want.matches(env));
        let depth = found.map_or(self.unexpected.len(), |i| i + 1);
        self.stats.traffic(want.class).umq.record(depth);
        found
    }
}

impl MatchEngine for ListEngine {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        match self.find_unexpected(&want) {
            Some(i) => {
                self.stats.traffic(want.class).matches += 1;
                self.unexpected.remove(i).map(|(_, msg)| msg)
            }
            None => {
                self.posted.push_back((want, recv));
                None
            }
        }
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let found = self.posted.iter().position(|(want, _)| want.matches(&env));
        let traffic = self.stats.traffic(env.class);
        traffic.prq.record(found.map_or(self.posted.len(), |i| i + 1));
        match found {
            Some(i) => {
                traffic.matches += 1;
                self.posted.remove(i).map(|(_, recv)| recv)
            }
            None => {
                traffic.unexpected += 1;
                self.unexpected.push_back((env, msg));
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        let i = self.find_unexpected(&want)?;
        if remove {
            self.stats.traffic(want.class).matches += 1;
            self.unexpected.remove(i).map(|(_, msg)| msg)
        } else {
            Some(self.unexpected[i].1)
        }
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        match self.posted.iter().position(|&(_, id)| id == recv) {
            Some(i) => {
                self.posted.remove(i);
                true
            }
            None => false,
        }
    }

    fn queued(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
