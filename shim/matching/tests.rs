//! Every engine against a reference model: one ordered list of receives and one of messages.

use super::*;
use proptest::prelude::*;

/// The MPI matching rule written as plainly as possible.
#[derive(Default)]
struct Model {
    posted: Vec<(Pattern, RecvId)>,
    unexpected: Vec<(Envelope, MsgId)>,
}

impl Model {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        match self.unexpected.iter().position(|(e, _)| want.matches(e)) {
            Some(i) => Some(self.unexpected.remove(i).1),
            None => {
                self.posted.push((want, recv));
                None
            }
        }
    }
    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        match self.posted.iter().position(|(p, _)| p.matches(&env)) {
            Some(i) => Some(self.posted.remove(i).1),
            None => {
                self.unexpected.push((env, msg));
                None
            }
        }
    }
    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        let i = self.unexpected.iter().position(|(e, _)| want.matches(e))?;
        Some(if remove {
            self.unexpected.remove(i).1
        } else {
            self.unexpected[i].1
        })
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
}

#[derive(Clone, Debug)]
pub(crate) enum Op {
    Post(Pattern),
    Arrive(Envelope),
    Probe(Pattern, bool),
    /// Cancel the receive posted this many posts ago.
    Cancel(usize),
}

pub(crate) const SOURCES: i32 = 6;
const TAGS: i32 = 4;

fn class() -> impl Strategy<Value = Class> {
    prop_oneof![
        4 => Just(Class::PointToPoint),
        1 => (0u8..3, 0u8..2).prop_map(|(kind, size_class)| Class::Collective { kind, size_class }),
    ]
}

fn pattern() -> impl Strategy<Value = Pattern> {
    let source = prop_oneof![5 => 0..SOURCES, 1 => Just(ANY_SOURCE)];
    let tag = prop_oneof![5 => 0..TAGS, 1 => Just(ANY_TAG)];
    (source, tag, class()).prop_map(|(source, tag, class)| Pattern { source, tag, class })
}

fn envelope() -> impl Strategy<Value = Envelope> {
    (0..SOURCES, 0..TAGS, class()).prop_map(|(source, tag, class)| Envelope { source, tag, class })
}

pub(crate) fn ops(max: usize) -> impl Strategy<Value = Vec<Op>> {
    let op = prop_oneof![
        4 => pattern().prop_map(Op::Post),
        4 => envelope().prop_map(Op::Arrive),
        1 => (pattern(), any::<bool>()).prop_map(|(p, r)| Op::Probe(p, r)),
        1 => (0usize..8).prop_map(Op::Cancel),
    ];
    prop::collection::vec(op, 0..max)
}

/// Runs `ops` on the engine and the model side by side; panics on the first difference.
pub(crate) fn check_against_model(engine: &mut dyn MatchEngine, ops: &[Op]) {
    let mut model = Model::default();
    let mut posted: Vec<RecvId> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let id = step as u64;
        match *op {
            Op::Post(want) => {
                posted.push(id);
                assert_eq!(engine.post(want, id), model.post(want, id), "step {step}: {op:?}");
            }
            Op::Arrive(env) => {
                assert_eq!(engine.arrive(env, id), model.arrive(env, id), "step {step}: {op:?}");
            }
            Op::Probe(want, remove) => {
                assert_eq!(
                    engine.probe(want, remove),
                    model.probe(want, remove),
                    "step {step}: {op:?}"
                );
            }
            Op::Cancel(back) => {
                if let Some(&recv) = posted.iter().rev().nth(back) {
                    assert_eq!(engine.cancel(recv), model.cancel(recv), "step {step}: {op:?}");
                }
            }
        }
        assert_eq!(
            engine.queued(),
            (model.posted.len(), model.unexpected.len()),
            "step {step}: queue lengths"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_engine_matches_like_one_ordered_list(ops in ops(200)) {
        for &kind in EngineKind::ALL {
            let mut engine = build_engine(kind, &EngineParams { comm_size: SOURCES as usize });
            check_against_model(engine.as_mut(), &ops);
        }
    }
}

fn p2p(source: i32, tag: i32) -> Pattern {
    Pattern { source, tag, class: Class::PointToPoint }
}

fn env(source: i32, tag: i32) -> Envelope {
    Envelope { source, tag, class: Class::PointToPoint }
}

#[test]
fn wildcard_receive_posted_first_wins_over_later_specific_receive() {
    for &kind in EngineKind::ALL {
        let mut engine = build_engine(kind, &EngineParams { comm_size: 4 });
        assert_eq!(engine.post(p2p(ANY_SOURCE, 3), 10), None);
        assert_eq!(engine.post(p2p(2, 3), 11), None);
        assert_eq!(engine.arrive(env(2, 3), 100), Some(10), "{kind:?}");
        assert_eq!(engine.arrive(env(2, 3), 101), Some(11), "{kind:?}");
    }
}

#[test]
fn any_source_receive_takes_the_earliest_message_across_sources() {
    for &kind in EngineKind::ALL {
        let mut engine = build_engine(kind, &EngineParams { comm_size: 4 });
        assert_eq!(engine.arrive(env(3, 1), 100), None);
        assert_eq!(engine.arrive(env(1, 1), 101), None);
        assert_eq!(engine.probe(p2p(ANY_SOURCE, ANY_TAG), false), Some(100));
        assert_eq!(engine.post(p2p(ANY_SOURCE, 1), 10), Some(100), "{kind:?}");
        assert_eq!(engine.post(p2p(ANY_SOURCE, 1), 11), Some(101), "{kind:?}");
        assert_eq!(engine.queued(), (0, 0));
    }
}

#[test]
fn collective_elements_never_match_point_to_point_receives() {
    for &kind in EngineKind::ALL {
        let mut engine = build_engine(kind, &EngineParams { comm_size: 2 });
        let coll = Envelope { source: 1, tag: 0, class: Class::Collective { kind: 0, size_class: 0 } };
        assert_eq!(engine.post(p2p(ANY_SOURCE, ANY_TAG), 10), None);
        assert_eq!(engine.arrive(coll, 100), None, "{kind:?}");
        assert_eq!(engine.stats().collective.unexpected, 1);
        assert_eq!(engine.stats().point_to_point.prq.searches, 0);
    }
}

#[test]
fn search_depth_counts_inspected_elements() {
    let mut engine = ListEngine::new();
    for tag in 0..4 {
        engine.post(p2p(0, tag), tag as u64);
    }
    engine.arrive(env(0, 3), 100);
    let prq = engine.stats().point_to_point.prq;
    assert_eq!((prq.searches, prq.depth_total, prq.depth_max), (1, 4, 4));
}
