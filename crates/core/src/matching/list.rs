//! One posted-receive list and one unexpected-message list, searched front to back (MPICH-like).

use super::{take, Envelope, MsgId, Pattern, Queues, RecvId, Single, TrafficStats};
use std::collections::VecDeque;

#[derive(Default)]
pub struct List {
    posted: VecDeque<(Pattern, RecvId)>,
    unexpected: VecDeque<(Envelope, MsgId)>,
}

pub type ListEngine = Single<List>;

impl ListEngine {
    pub fn new() -> Self {
        Single::wrap(List::default())
    }
}

impl Default for ListEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl List {
    fn find_unexpected(&self, want: &Pattern, traffic: &mut TrafficStats) -> Option<usize> {
        let found = self
            .unexpected
            .iter()
            .position(|(env, _)| want.matches(env));
        traffic
            .umq
            .record(found.map_or(self.unexpected.len(), |i| i + 1));
        found
    }
}

impl Queues for List {
    fn post(&mut self, want: Pattern, recv: RecvId, traffic: &mut TrafficStats) -> Option<MsgId> {
        match self.find_unexpected(&want, traffic) {
            Some(i) => {
                traffic.matches += 1;
                take(&mut self.unexpected, i).map(|(_, msg)| msg)
            }
            None => {
                self.posted.push_back((want, recv));
                None
            }
        }
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId, traffic: &mut TrafficStats) -> Option<RecvId> {
        let found = self.posted.iter().position(|(want, _)| want.matches(&env));
        traffic
            .prq
            .record(found.map_or(self.posted.len(), |i| i + 1));
        match found {
            Some(i) => {
                traffic.matches += 1;
                take(&mut self.posted, i).map(|(_, recv)| recv)
            }
            None => {
                traffic.unexpected += 1;
                self.unexpected.push_back((env, msg));
                None
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool, traffic: &mut TrafficStats) -> Option<MsgId> {
        let i = self.find_unexpected(&want, traffic)?;
        if remove {
            traffic.matches += 1;
            take(&mut self.unexpected, i).map(|(_, msg)| msg)
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

    fn queues(&self) -> usize {
        2
    }
}
