//! The switch between MPI's matching and the shim's, with the protocol's own code
//! (`matchshim_core::protocol`) on a model of MPI: MPI's posted and unexpected lists, where
//! every message arrives first and is matched against MPI's own posted receives; while taken
//! over, receives go to the protocol's queues (`Queues::post_drained`) and a drain moves MPI's
//! unexpected messages there, oldest first; matching goes back when the policy allows it
//! (`Takeover::give_back_due`), the receives the queues give back posted to MPI in the order
//! they come; before a blocking call MPI runs, every waiting receive is handed to MPI while
//! the queues keep their unexpected messages (`Op::HandBack`). Where they keep some, the
//! communicator is held (`Mode::Held`): a receive one of them fits takes it, any other goes
//! to MPI, nothing is drained, and MPI matches alone once none is left. After such a call the
//! receives MPI did not match come back to the queues (`Op::Blocking`), and go to MPI again
//! where the policy leaves matching with MPI after a loan it matched mostly.
//!
//! Random operations with random switches must give exactly the matches of one ordered list.

use matchshim_core::matching::{
    build_engine, Class, EngineKind, EngineParams, Envelope, Pattern, ANY_SOURCE, ANY_TAG,
};
use matchshim_core::protocol::{GiveBack, Inbox, Mode, Model, Policy, Posted, Queues, Takeover};
use proptest::prelude::*;
use std::collections::{BTreeSet, VecDeque};

#[derive(Clone, Debug)]
enum Op {
    Post(Pattern),
    Arrive(Envelope),
    /// A receive call's drain while taken over.
    Drain,
    TakeOver,
    GiveBack,
    /// Before a blocking call MPI runs: every waiting receive goes to MPI, while the queues
    /// may keep unexpected messages.
    HandBack,
    /// A blocking call MPI runs, below `MPI_THREAD_MULTIPLE`: the waiting receives are lent
    /// to MPI (`Queues::lend`), these messages arrive meanwhile, then the receives MPI did not
    /// match come back to the queues (cancelled youngest first, or oldest first where no
    /// message fits two of them; at most this many: the cancelling may stop, leaving the rest
    /// in MPI) and the shim matches again.
    Blocking(Vec<Envelope>, usize),
}

type Pair = (u64, u64);

/// One ordered posted-receive list and one unexpected-message list: MPI's matching rule.
#[derive(Default)]
struct Lists {
    posted: Vec<(u64, Pattern)>,
    unexpected: VecDeque<(u64, Envelope)>,
}

impl Lists {
    fn post(&mut self, id: u64, want: Pattern) -> Option<u64> {
        match self
            .unexpected
            .iter()
            .position(|(_, env)| want.matches(env))
        {
            Some(i) => self.unexpected.remove(i).map(|(msg, _)| msg),
            None => {
                self.posted.push((id, want));
                None
            }
        }
    }

    fn arrive(&mut self, id: u64, env: Envelope) -> Option<u64> {
        match self.posted.iter().position(|(_, want)| want.matches(&env)) {
            Some(i) => Some(self.posted.remove(i).0),
            None => {
                self.unexpected.push_back((id, env));
                None
            }
        }
    }
}

/// What the protocol's drain sees of MPI: its unexpected messages, oldest first; matches on
/// arrival are recorded.
struct Drain<'a> {
    mpi: &'a mut Lists,
    pairs: &'a mut BTreeSet<Pair>,
}

impl Inbox<u64, (u64, Pattern)> for Drain<'_> {
    fn next(&mut self) -> Option<(Envelope, u64)> {
        self.mpi.unexpected.pop_front().map(|(msg, env)| (env, msg))
    }

    fn matched(&mut self, (recv, _): (u64, Pattern), msg: u64) {
        self.pairs.insert((recv, msg));
    }
}

/// MPI's lists, the protocol's queues and policy.
struct Shim {
    mpi: Lists,
    queues: Queues<u64, (u64, Pattern)>,
    takeover: Takeover,
    pairs: BTreeSet<Pair>,
}

impl Shim {
    fn new(kind: EngineKind, model: Model) -> Shim {
        let params = EngineParams {
            comm_size: 4,
            theta: 3,
            bins: 2,
            adaptive_depth: 2,
            adaptive_window: 4,
            ..EngineParams::default()
        };
        let mut queues = Queues::new(kind, params, build_engine, None);
        // Drains with no receive waiting stop early, as under `auto`.
        queues.limit_drain_ahead(2);
        queues.model_depths(model);
        Shim {
            mpi: Lists::default(),
            queues,
            takeover: Takeover::new(Policy::Auto, 64, (0, u64::MAX), false),
            pairs: BTreeSet::new(),
        }
    }

    fn drain(&mut self) {
        if self.takeover.mode() == Mode::Takeover {
            let mut inbox = Drain {
                mpi: &mut self.mpi,
                pairs: &mut self.pairs,
            };
            self.queues.drain(&mut inbox);
        }
    }

    fn post(&mut self, id: u64, want: Pattern) {
        if self.takeover.mode() == Mode::Held && self.queues.queued().1 == 0 {
            self.takeover.switch(Mode::Delegated, 0);
        }
        let to_mpi = match self.takeover.mode() {
            Mode::Delegated => true,
            Mode::Held => !self.queues.holds(want),
            Mode::Takeover => false,
        };
        if to_mpi {
            if let Some(msg) = self.mpi.post(id, want) {
                self.pairs.insert((id, msg));
            }
            return;
        }
        let held = self.takeover.mode() == Mode::Held;
        let mut inbox = Drain {
            mpi: &mut self.mpi,
            pairs: &mut self.pairs,
        };
        match self.queues.post_drained(&mut inbox, want, |_| (id, want)) {
            Posted::Found(msg) => {
                self.pairs.insert((id, msg));
            }
            Posted::Queued(_) => assert!(!held, "a held message fits"),
        }
    }

    fn arrive(&mut self, id: u64, env: Envelope) {
        if let Some(recv) = self.mpi.arrive(id, env) {
            self.pairs.insert((recv, id));
        }
    }

    fn take_over(&mut self) {
        self.queues.take_over();
        self.takeover.switch(Mode::Takeover, 0);
    }

    /// The policy of `flip:1` asks every time; matching goes back to MPI, whole when the
    /// queues hold no unexpected message, else held.
    fn give_back(&mut self) {
        if self.takeover.mode() != Mode::Takeover {
            return;
        }
        let due = self.takeover.give_back_due(
            Policy::Flip(1),
            self.queues.queued(),
            self.queues.signals(),
        );
        if due != GiveBack::Stay {
            self.hand_back(false);
        }
    }

    /// The receives go to MPI in posting order (`Queues::hand_over`); matching goes back to
    /// MPI, held if the queues keep unexpected messages. The receives MPI did not match at
    /// once, in posting order, and whether they may come back in any order.
    fn hand_back(&mut self, lending: bool) -> (Vec<(u64, Pattern)>, bool) {
        if self.takeover.mode() != Mode::Takeover {
            return (Vec::new(), false);
        }
        self.hand_over(lending)
    }

    /// [`Shim::hand_back`] in any mode.
    fn hand_over(&mut self, lending: bool) -> (Vec<(u64, Pattern)>, bool) {
        let loan = self.queues.hand_over(lending);
        let mut lent = Vec::new();
        for (id, want) in loan.receives {
            match self.mpi.post(id, want) {
                Some(msg) => {
                    self.pairs.insert((id, msg));
                }
                None => lent.push((id, want)),
            }
        }
        let mode = if self.queues.queued().1 == 0 {
            Mode::Delegated
        } else {
            Mode::Held
        };
        self.takeover.switch(mode, 0);
        (lent, loan.any_order)
    }

    /// A blocking call MPI runs with the waiting receives lent to it (`Runtime::step_aside`
    /// and `step_back` in the shim).
    fn blocking(&mut self, first_id: u64, arrivals: &[Envelope], cancels: usize) {
        let (mut lent, any_order) = self.hand_back(true);
        for (k, env) in arrivals.iter().enumerate() {
            self.arrive(first_id + k as u64, *env);
        }
        if lent.is_empty() {
            return;
        }
        if !any_order {
            lent.reverse();
        }
        // Those MPI did not match leave its posted list.
        let (mut back, mut matched) = (Vec::new(), 0);
        for &(id, want) in lent.iter().take(cancels) {
            match self.mpi.posted.iter().position(|&(p, _)| p == id) {
                Some(i) => {
                    self.mpi.posted.remove(i);
                    back.push((id, want));
                }
                None => matched += 1,
            }
        }
        let taken_back = back.len();
        if !any_order {
            back.reverse();
        }
        for (id, want) in back {
            if let Posted::Found(msg) = self.queues.post(want, |_| (id, want)) {
                self.pairs.insert((id, msg));
            }
        }
        if self.takeover.takes_over_after_loan(matched, taken_back) {
            self.takeover.switch(Mode::Takeover, 0);
        } else {
            // MPI matches from now on: those taken back go to it again.
            self.hand_over(false);
        }
    }
}

/// A receive for `tag` from `source` is posted.
fn post(source: i32, tag: i32) -> Op {
    Op::Post(Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    })
}

/// A message with `tag` from `source` reaches MPI.
fn arrive(source: i32, tag: i32) -> Op {
    Op::Arrive(Envelope {
        source,
        tag,
        class: Class::PointToPoint,
    })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (
            prop_oneof![3 => 0..3i32, 1 => Just(ANY_SOURCE)],
            prop_oneof![3 => 0..3i32, 1 => Just(ANY_TAG)],
        )
            .prop_map(|(source, tag)| post(source, tag)),
        4 => (0..3i32, 0..3i32).prop_map(|(source, tag)| arrive(source, tag)),
        2 => Just(Op::Drain),
        1 => Just(Op::TakeOver),
        1 => Just(Op::GiveBack),
        1 => Just(Op::HandBack),
        1 => (
            prop::collection::vec(
                (0..3i32, 0..3i32).prop_map(|(source, tag)| Envelope {
                    source,
                    tag,
                    class: Class::PointToPoint,
                }),
                0..3,
            ),
            prop_oneof![1 => 0..3usize, 2 => Just(usize::MAX)],
        )
            .prop_map(|(arrivals, cancels)| Op::Blocking(arrivals, cancels)),
    ]
}

/// Runs `ops` through one list and through the model; the matches they made.
fn run(kind: EngineKind, model: Model, ops: &[Op]) -> (BTreeSet<Pair>, BTreeSet<Pair>) {
    let mut list = Lists::default();
    let mut reference = BTreeSet::new();
    let mut shim = Shim::new(kind, model);
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
            Op::TakeOver => shim.take_over(),
            Op::GiveBack => shim.give_back(),
            Op::HandBack => {
                shim.hand_back(false);
            }
            Op::Blocking(arrivals, cancels) => {
                // Each arrival is a message with its own id, after this operation's.
                let first = 1_000_000 + id * 10;
                for (k, env) in arrivals.iter().enumerate() {
                    if let Some(recv) = list.arrive(first + k as u64, *env) {
                        reference.insert((recv, first + k as u64));
                    }
                }
                shim.blocking(first, arrivals, *cancels);
            }
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
            for depths in [Model::List, Model::PerSource] {
                let (reference, model) = run(kind, depths, &ops);
                prop_assert_eq!(&reference, &model, "engine {}, {:?}", kind.name(), depths);
            }
        }
    }
}

#[test]
fn a_receive_given_back_takes_the_earliest_message_mpi_holds() {
    // Two receives wait in the engine; two messages reach MPI before matching goes back.
    let ops = [
        Op::TakeOver,
        post(0, ANY_TAG),
        post(ANY_SOURCE, ANY_TAG),
        arrive(1, 5),
        arrive(0, 5),
        Op::GiveBack,
    ];
    let (reference, model) = run(EngineKind::List, Model::PerSource, &ops);
    assert_eq!(reference, BTreeSet::from([(1, 4), (2, 3)]));
    assert_eq!(model, reference);
}

#[test]
fn receives_handed_back_while_messages_stay_take_only_younger_messages() {
    // A message for tag 1 stays in the queues; the wildcard receive waiting for tag 2 goes to
    // MPI and gets the later tag-2 message, the later tag-1 receive the held one.
    let ops = [
        Op::TakeOver,
        arrive(0, 1),
        post(ANY_SOURCE, 2),
        Op::HandBack,
        arrive(0, 2),
        post(0, 1),
    ];
    let (reference, model) = run(EngineKind::List, Model::List, &ops);
    assert_eq!(reference, BTreeSet::from([(2, 4), (5, 1)]));
    assert_eq!(model, reference);
}

#[test]
fn a_held_communicator_serves_its_messages_first_and_sends_the_rest_to_mpi() {
    // Two messages are drained, then matching goes back while the shim holds them. A wildcard
    // receive takes the older held one; a receive neither fits goes to MPI and gets the
    // message that arrived there since; the last held message goes to its receive, and MPI
    // matches alone again.
    let ops = [
        Op::TakeOver,
        arrive(0, 1),
        arrive(1, 1),
        Op::Drain,
        Op::GiveBack,
        arrive(0, 1),
        post(ANY_SOURCE, 1),
        post(0, 1),
        post(1, 1),
        arrive(2, 2),
        post(2, 2),
    ];
    for &kind in EngineKind::ALL {
        for depths in [Model::List, Model::PerSource] {
            let (reference, model) = run(kind, depths, &ops);
            assert_eq!(reference, BTreeSet::from([(6, 1), (7, 5), (8, 2), (10, 9)]));
            assert_eq!(model, reference, "engine {}, {depths:?}", kind.name());
        }
    }
}
