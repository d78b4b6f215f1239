//! One posted-receive list and one unexpected-message list, searched front to back (MPICH-like).

use super::{take, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use std::collections::VecDeque;

pub struct ListEngine {
    posted: VecDeque<(Pattern, RecvId)>,
    unexpected: VecDeque<(Envelope, MsgId)>,
    stats: EngineStats,
}

impl Default for ListEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl ListEngine {
    pub fn new() -> Self {
        let mut stats = EngineStats::default();
        stats.set_queues(2);
        ListEngine {
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            stats,
        }
    }

    /// The earliest matching unexpected message, counted as a search that takes it if `remove`.
    #[inline]
    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let found = self
            .unexpected
            .iter()
            .position(|(env, _)| want.matches(env));
        let depth = found.map_or(self.unexpected.len(), |i| i + 1);
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let i = found?;
        if taken {
            take(&mut self.unexpected, i).map(|(_, msg)| msg)
        } else {
            Some(self.unexpected[i].1)
        }
    }
}

impl MatchEngine for ListEngine {
    #[inline]
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        let found = self.take_unexpected(&want, true);
        if found.is_none() {
            self.posted.push_back((want, recv));
        }
        found
    }

    #[inline]
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let found = self.posted.iter().position(|(want, _)| want.matches(&env));
        let depth = found.map_or(self.posted.len(), |i| i + 1);
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        match found {
            Some(i) => take(&mut self.posted, i).map(|(_, recv)| recv),
            None => {
                self.unexpected.push_back((env, msg));
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.posted.iter().position(|&(_, id)| id == recv);
        found.map(|i| self.posted.remove(i)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.posted.len(), self.unexpected.len())
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
