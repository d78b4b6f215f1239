//! The switch between MPI's matching and the shim's, on a model: MPI's own posted and
//! unexpected queues, an engine, and the shim's protocol (the shim's runtime states the argument
//! in `takeover.rs`):
//! - every message arrives at MPI, which matches it against its own posted receives first;
//! - while taken over, new receives go to the engine, and a drain moves MPI's unexpected
//!   messages into the engine, oldest first;
//! - matching goes back to MPI only when the engine holds no unexpected message: its waiting
//!   receives are posted to MPI first, in posting order.
//!
//! Random operations with random switches must give exactly the matches of one ordered list.

use matchshim_core::matching::{
    build_engine, Class, EngineKind, EngineParams, Envelope, MatchEngine, Pattern, ANY_SOURCE,
    ANY_TAG,
};
use proptest::prelude::*;
use std::collections::{BTreeSet, HashMap, VecDeque};

#[derive(Clone, Debug)]
enum Op {
    Post(Pattern),
    Arrive(Envelope),
    /// A receive call's drain while taken over.
    Drain,
    TakeOver,
    GiveBack,
}

type Pair = (u64, u64);

fn fits(want: &Pattern, env: &Envelope) -> bool {
    want.matches(env)
}

/// One ordered posted-receive list and one unexpected-message list: MPI's matching rule.
#[derive(Default)]
struct Lists {
    posted: Vec<(u64, Pattern)>,
    unexpected: VecDeque<(u64, Envelope)>,
}

impl Lists {
    fn post(&mut self, id: u64, want: Pattern) -> Option<u64> {
        match self.unexpected.iter().position(|(_, env)| fits(&want, env)) {
            Some(i) => self.unexpected.remove(i).map(|(msg, _)| msg),
            None => {
                self.posted.push((id, want));
                None
            }
        }
    }

    fn arrive(&mut self, id: u64, env: Envelope) -> Option<u64> {
        match self.posted.iter().position(|(_, want)| fits(want, &env)) {
            Some(i) => Some(self.posted.remove(i).0),
            None => {
                self.unexpected.push_back((id, env));
                None
            }
        }
    }
}

/// MPI's queues, the shim's engine and the mode.
struct Shim {
    mpi: Lists,
    engine: Box<dyn MatchEngine>,
    taken_over: bool,
    /// The engine's waiting receives, in posting order, with their patterns.
    waiting: Vec<(u64, Pattern)>,
    /// What the engine holds as unexpected.
    held: HashMap<u64, Envelope>,
    pairs: BTreeSet<Pair>,
}

impl Shim {
    fn new(kind: EngineKind) -> Shim {
        let params = EngineParams {
            comm_size: 4,
            theta: 3,
            bins: 2,
            adaptive_depth: 2,
            adaptive_window: 4,
            ..EngineParams::default()
        };
        Shim {
            mpi: Lists::default(),
            engine: build_engine(kind, &params),
            taken_over: false,
            waiting: Vec::new(),
            held: HashMap::new(),
            pairs: BTreeSet::new(),
        }
    }

    fn post(&mut self, id: u64, want: Pattern) {
        if !self.taken_over {
            if let Some(msg) = self.mpi.post(id, want) {
                self.pairs.insert((id, msg));
            }
            return;
        }
        self.drain();
        match self.engine.post(want, id) {
            Some(msg) => {
                self.held.remove(&msg);
                self.pairs.insert((id, msg));
            }
            None => self.waiting.push((id, want)),
        }
    }

    fn arrive(&mut self, id: u64, env: Envelope) {
        if let Some(recv) = self.mpi.arrive(id, env) {
            self.pairs.insert((recv, id));
        }
    }

    fn drain(&mut self) {
        if !self.taken_over {
            return;
        }
        while let Some((msg, env)) = self.mpi.unexpected.pop_front() {
            match self.engine.arrive(env, msg) {
                Some(recv) => {
                    self.waiting.retain(|(id, _)| *id != recv);
                    self.pairs.insert((recv, msg));
                }
                None => {
                    self.held.insert(msg, env);
                }
            }
        }
    }

    fn give_back(&mut self) {
        if !self.taken_over || !self.held.is_empty() {
            return;
        }
        for (id, want) in std::mem::take(&mut self.waiting) {
            assert!(self.engine.cancel(id), "a waiting receive is in the engine");
            if let Some(msg) = self.mpi.post(id, want) {
                self.pairs.insert((id, msg));
            }
        }
        self.taken_over = false;
    }
}

fn pattern() -> impl Strategy<Value = Pattern> {
    (
        prop_oneof![3 => 0..3i32, 1 => Just(ANY_SOURCE)],
        prop_oneof![3 => 0..3i32, 1 => Just(ANY_TAG)],
    )
        .prop_map(|(source, tag)| Pattern {
            source,
            tag,
            class: Class::PointToPoint,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => pattern().prop_map(Op::Post),
        4 => (0..3i32, 0..3i32).prop_map(|(source, tag)| Op::Arrive(Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        })),
        2 => Just(Op::Drain),
        1 => Just(Op::TakeOver),
        1 => Just(Op::GiveBack),
    ]
}

/// Runs `ops` through one list and through the model; the matches they made.
fn run(kind: EngineKind, ops: &[Op]) -> (BTreeSet<Pair>, BTreeSet<Pair>) {
    let mut list = Lists::default();
    let mut reference = BTreeSet::new();
    let mut shim = Shim::new(kind);
    for (id, op) in ops.iter().enumerate() {
        let id = id as u64;
        match op {
            Op::Post(want) => {
                if let Some(msg) = list.post(id, *want) {
                    reference.insert((id, msg));
                }
                shim.post(id, *want);
            }
            Op::Arrive(env) => {
                if let Some(recv) = list.arrive(id, *env) {
                    reference.insert((recv, id));
                }
                shim.arrive(id, *env);
            }
            Op::Drain => shim.drain(),
            Op::TakeOver => shim.taken_over = true,
            Op::GiveBack => shim.give_back(),
        }
    }
    // Messages still inside MPI meet the receives the shim holds once drained.
    shim.drain();
    (reference, shim.pairs)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn mpi_queues_engine_and_switches_match_as_one_list(ops in prop::collection::vec(op(), 0..80)) {
        for &kind in EngineKind::ALL {
            let (reference, model) = run(kind, &ops);
            prop_assert_eq!(&reference, &model, "engine {}", kind.name());
        }
    }
}

#[test]
fn a_receive_given_back_takes_the_earliest_message_mpi_holds() {
    let any = |source, tag| Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    };
    let env = |source, tag| {
        Op::Arrive(Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        })
    };
    // Two receives wait in the engine; two messages reach MPI before matching goes back.
    let ops = [
        Op::TakeOver,
        Op::Post(any(0, ANY_TAG)),
        Op::Post(any(ANY_SOURCE, ANY_TAG)),
        env(1, 5),
        env(0, 5),
        Op::GiveBack,
    ];
    let (reference, model) = run(EngineKind::List, &ops);
    assert_eq!(reference, BTreeSet::from([(1, 4), (2, 3)]));
    assert_eq!(model, reference);
}
