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
                assert_eq!(
                    engine.post(want, id),
                    model.post(want, id),
                    "step {step}: {op:?}"
                );
            }
            Op::Arrive(env) => {
                assert_eq!(
                    engine.arrive(env, id),
                    model.arrive(env, id),
                    "step {step}: {op:?}"
                );
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
                    assert_eq!(
                        engine.cancel(recv),
                        model.cancel(recv),
                        "step {step}: {op:?}"
                    );
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

/// As [`check_against_model`], with each run of arrivals handed to the engine as one burst:
/// every engine's burst gives the matches of its arrivals one by one.
pub(crate) fn check_bursts_against_model(engine: &mut dyn MatchEngine, ops: &[Op]) {
    let mut model = Model::default();
    let mut step = 0;
    let mut matched = Vec::new();
    while step < ops.len() {
        let run = ops[step..]
            .iter()
            .take_while(|op| matches!(op, Op::Arrive(_)))
            .count();
        if run == 0 {
            check_step(engine, &mut model, ops, step);
            step += 1;
            continue;
        }
        let msgs: Vec<(Envelope, MsgId)> = ops[step..step + run]
            .iter()
            .enumerate()
            .map(|(i, op)| match op {
                Op::Arrive(env) => (*env, (step + i) as MsgId),
                _ => unreachable!("a run of arrivals"),
            })
            .collect();
        matched.clear();
        matched.push(Some(u64::MAX));
        engine.arrive_burst(&msgs, &mut matched);
        assert_eq!(matched[0], Some(u64::MAX), "step {step}: results appended");
        for (i, &(env, msg)) in msgs.iter().enumerate() {
            assert_eq!(
                matched[1 + i],
                model.arrive(env, msg),
                "step {}: burst of {run}, {env:?}",
                step + i
            );
        }
        step += run;
        assert_eq!(
            engine.queued(),
            (model.posted.len(), model.unexpected.len()),
            "step {step}: queue lengths after a burst"
        );
    }
}

/// One operation other than an arrival on the engine and the model; ids are step numbers.
fn check_step(engine: &mut dyn MatchEngine, model: &mut Model, ops: &[Op], step: usize) {
    let id = step as u64;
    match ops[step] {
        Op::Post(want) => assert_eq!(engine.post(want, id), model.post(want, id), "step {step}"),
        Op::Probe(want, remove) => assert_eq!(
            engine.probe(want, remove),
            model.probe(want, remove),
            "step {step}"
        ),
        Op::Cancel(back) => {
            let posted = ops[..step]
                .iter()
                .enumerate()
                .filter(|(_, op)| matches!(op, Op::Post(_)))
                .map(|(i, _)| i as u64);
            if let Some(recv) = posted.rev().nth(back) {
                assert_eq!(engine.cancel(recv), model.cancel(recv), "step {step}");
            }
        }
        Op::Arrive(env) => assert_eq!(engine.arrive(env, id), model.arrive(env, id)),
    }
    assert_eq!(
        engine.queued(),
        (model.posted.len(), model.unexpected.len()),
        "step {step}: queue lengths"
    );
}

/// Every engine, once per vector width this CPU has for those that scan with vectors (the
/// portable fallback included), built with `params`.
fn every_engine(
    params: &EngineParams,
) -> impl Iterator<Item = (EngineKind, Box<dyn MatchEngine>)> + '_ {
    let vectors = [
        EngineKind::Col,
        EngineKind::ColPnp,
        EngineKind::ColList,
        EngineKind::Batch,
        EngineKind::Fuzzy,
    ];
    EngineKind::ALL.iter().flat_map(move |&kind| {
        let widths: Vec<Simd> = if vectors.contains(&kind) {
            Simd::available_all().collect()
        } else {
            vec![params.simd]
        };
        widths.into_iter().map(move |simd| {
            let params = EngineParams { simd, ..*params };
            (kind, build_engine(kind, &params))
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn every_engine_matches_like_one_ordered_list(ops in ops(200)) {
        for (_, mut engine) in every_engine(&params(SOURCES as usize)) {
            check_against_model(engine.as_mut(), &ops);
        }
        for (_, mut engine) in every_engine(&params(SOURCES as usize)) {
            check_bursts_against_model(engine.as_mut(), &ops);
        }
    }
}

fn params(comm_size: usize) -> EngineParams {
    EngineParams {
        comm_size,
        ..EngineParams::default()
    }
}

fn p2p(source: i32, tag: i32) -> Pattern {
    Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    }
}

fn env(source: i32, tag: i32) -> Envelope {
    Envelope {
        source,
        tag,
        class: Class::PointToPoint,
    }
}

#[test]
fn wildcard_receive_posted_first_wins_over_later_specific_receive() {
    for &kind in EngineKind::ALL {
        let mut engine = build_engine(kind, &params(4));
        assert_eq!(engine.post(p2p(ANY_SOURCE, 3), 10), None);
        assert_eq!(engine.post(p2p(2, 3), 11), None);
        assert_eq!(engine.arrive(env(2, 3), 100), Some(10), "{kind:?}");
        assert_eq!(engine.arrive(env(2, 3), 101), Some(11), "{kind:?}");
    }
}

#[test]
fn any_source_receive_takes_the_earliest_message_across_sources() {
    for &kind in EngineKind::ALL {
        let mut engine = build_engine(kind, &params(4));
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
        let mut engine = build_engine(kind, &params(2));
        let coll = Envelope {
            source: 1,
            tag: 0,
            class: Class::Collective {
                kind: 0,
                size_class: 0,
            },
        };
        assert_eq!(engine.post(p2p(ANY_SOURCE, ANY_TAG), 10), None);
        assert_eq!(engine.arrive(coll, 100), None, "{kind:?}");
        assert_eq!(engine.stats().collective.unexpected, 1);
        assert_eq!(engine.stats().point_to_point.prq.searches, 0);
    }
}

#[test]
fn split_engines_count_each_traffic_type_in_its_part() {
    let params = params(8);
    let mut split = build_engine(EngineKind::ColPnp, &params);
    let (mut p2p, mut coll) = (
        build_engine(EngineKind::Pnp, &params),
        build_engine(EngineKind::Col, &params),
    );
    let collective = Class::Collective {
        kind: 1,
        size_class: 0,
    };
    for i in 0..300 {
        let (source, tag) = ((i % 7) as i32, (i % 5) as i32);
        let class = if i % 3 == 0 {
            collective
        } else {
            Class::PointToPoint
        };
        let part = if class.is_collective() {
            &mut coll
        } else {
            &mut p2p
        };
        let want = Pattern { source, tag, class };
        let env = Envelope {
            source: (i % 6) as i32,
            tag,
            class,
        };
        if i % 4 == 1 {
            assert_eq!(split.arrive(env, i), part.arrive(env, i));
        } else {
            assert_eq!(split.post(want, i), part.post(want, i));
        }
        // Read between operations: the counters follow every one of them.
        let stats = *split.stats();
        assert_eq!(stats.point_to_point, p2p.stats().point_to_point);
        assert_eq!(stats.collective, coll.stats().collective);
        assert_eq!(stats.queues, p2p.stats().queues + coll.stats().queues);
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

/// Operations over `sources` ranks and `tags` tags; `collective` in 8 elements are collective.
/// Runs of one kind of operation make queues long enough to cross every threshold.
fn phased_ops(sources: i32, tags: i32, collective: u32) -> impl Strategy<Value = Vec<Op>> {
    let class = prop_oneof![
        8 - collective => Just(Class::PointToPoint),
        collective => (0u8..3, 0u8..3).prop_map(|(kind, size_class)| Class::Collective { kind, size_class }),
    ];
    let source = prop_oneof![9 => 0..sources, 1 => Just(ANY_SOURCE)];
    let tag = prop_oneof![9 => 0..tags, 1 => Just(ANY_TAG)];
    let pattern = (source, tag, class.clone()).prop_map(|(source, tag, class)| Pattern {
        source,
        tag,
        class,
    });
    let envelope = (0..sources, 0..tags, class).prop_map(|(source, tag, class)| Envelope {
        source,
        tag,
        class,
    });
    let phase = prop_oneof![
        4 => prop::collection::vec(pattern.clone().prop_map(Op::Post), 1..40),
        4 => prop::collection::vec(envelope.prop_map(Op::Arrive), 1..40),
        1 => prop::collection::vec((pattern, any::<bool>()).prop_map(|(p, r)| Op::Probe(p, r)), 1..6),
        1 => prop::collection::vec((0usize..30).prop_map(Op::Cancel), 1..6),
    ];
    prop::collection::vec(phase, 1..16).prop_map(|phases| phases.concat())
}

/// Parameters small enough that short sequences cross every threshold.
fn small_params() -> impl Strategy<Value = EngineParams> {
    (
        2usize..40,
        1usize..5,
        2usize..7,
        1usize..4,
        1usize..4,
        1usize..5,
        1usize..6,
    )
        .prop_map(
            |(comm_size, bins, theta, k_c, k_p, adaptive_depth, adaptive_window)| EngineParams {
                comm_size,
                bins,
                theta,
                k_c,
                k_p,
                adaptive_depth,
                adaptive_window,
                simd: Simd::detect(),
                assertions: Assertions::default(),
                ..EngineParams::default()
            },
        )
}

/// Small parameters and operations over `comm_size` ranks, up to 4 tags, some collective.
fn small_case() -> impl Strategy<Value = (EngineParams, Vec<Op>)> {
    (small_params(), 1i32..5, 0u32..9).prop_flat_map(|(params, tags, collective)| {
        (
            Just(params),
            phased_ops(params.comm_size as i32, tags, collective),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_engine_matches_like_one_ordered_list_past_its_thresholds((params, ops) in small_case()) {
        for (_, mut engine) in every_engine(&params) {
            check_against_model(engine.as_mut(), &ops);
        }
        for (_, mut engine) in every_engine(&params) {
            check_bursts_against_model(engine.as_mut(), &ops);
        }
    }

    #[test]
    fn batch_burst_matches_like_arrivals_one_by_one(
        posts in prop::collection::vec(pattern(), 0..300),
        burst in prop::collection::vec(envelope(), 0..300),
        after in ops(60),
        width in 0usize..4,
    ) {
        let simd = Simd::ALL[width].usable();
        let mut batch = BatchEngine::new(simd);
        let mut list = ListEngine::new();
        for (id, &want) in posts.iter().enumerate() {
            prop_assert_eq!(batch.post(want, id as u64), list.post(want, id as u64));
        }
        let msgs: Vec<(Envelope, MsgId)> =
            burst.iter().enumerate().map(|(i, &env)| (env, 1000 + i as u64)).collect();
        let one_by_one: Vec<Option<RecvId>> = msgs.iter().map(|&(e, m)| list.arrive(e, m)).collect();
        let mut matched = Vec::new();
        batch.arrive_burst(&msgs, &mut matched);
        prop_assert_eq!(matched, one_by_one);
        prop_assert_eq!(batch.queued(), list.queued());
        prop_assert_eq!(batch.stats().point_to_point.matches, list.stats().point_to_point.matches);
        // Both hold the same queues in the same order.
        for want in [p2p(ANY_SOURCE, ANY_TAG), Pattern { class: Class::Collective { kind: 0, size_class: 0 }, ..p2p(ANY_SOURCE, ANY_TAG) }] {
            while let Some(msg) = list.probe(want, true) {
                prop_assert_eq!(batch.probe(want, true), Some(msg));
            }
            prop_assert_eq!(batch.probe(want, false), None);
        }
        for (id, _) in posts.iter().enumerate() {
            prop_assert_eq!(batch.cancel(id as u64), list.cancel(id as u64));
        }
        check_against_model(&mut batch, &after);
    }
}

#[test]
fn every_name_parses_back() {
    let names =
        "list, rank, bins, adaptive, pnp, col, col+pnp, col+list, list+pnp, batch, fuzzy, gpu";
    assert_eq!(EngineKind::accepted(), names);
    for &kind in EngineKind::ALL {
        assert_eq!(EngineKind::parse(kind.name()), Some(kind));
    }
}

/// Rank 0 of a gather: every other rank sends `per_source` messages, whose receives were posted
/// source by source; the messages come round-robin. Returns the engine's queues at most.
fn gather(
    kind: EngineKind,
    params: &EngineParams,
    class: Class,
    per_source: i32,
    rounds: usize,
) -> u64 {
    let mut engine = build_engine(kind, params);
    let n = params.comm_size as i32;
    let mut id = 0;
    for _ in 0..rounds {
        for source in 1..n {
            for tag in 0..per_source {
                assert_eq!(engine.post(Pattern { source, tag, class }, id), None);
                id += 1;
            }
        }
        for tag in 0..per_source {
            for source in 1..n {
                assert!(engine.arrive(Envelope { source, tag, class }, id).is_some());
                id += 1;
            }
        }
        assert_eq!(engine.queued(), (0, 0));
    }
    engine.stats().queues_max
}

#[test]
fn unified_engines_stay_within_k_sqrt_n_queues_while_rank_grows_with_n() {
    let coll = Class::Collective {
        kind: 4,
        size_class: 1,
    };
    for n in [64usize, 256, 1024] {
        let params = EngineParams {
            comm_size: n,
            k_c: 2,
            k_p: 2,
            ..EngineParams::default()
        };
        // Per side (posted, unexpected).
        let cap = 2 * (queue_budget(params.k_c, n) + queue_budget(params.k_p, n));
        for class in [Class::PointToPoint, coll] {
            let queues = gather(EngineKind::ColPnp, &params, class, 4, 3);
            // Two base queues, a wildcard list and two profiling queues are not dedicated.
            assert!(
                queues as usize <= 5 + cap,
                "n={n} {class:?}: {queues} queues, cap {cap}"
            );
            assert!(queues > 5, "n={n} {class:?}: no dedicated queue was made");
        }
        assert_eq!(
            gather(EngineKind::Rank, &params, Class::PointToPoint, 1, 1),
            2 * n as u64 + 1
        );
    }
}

#[test]
fn adaptive_turns_to_bins_on_long_searches_and_back_when_queues_stay_short() {
    let params = EngineParams {
        comm_size: 8,
        bins: 16,
        adaptive_depth: 4,
        adaptive_window: 8,
        ..EngineParams::default()
    };
    let mut engine = build_engine(EngineKind::Adaptive, &params);
    for tag in 0..40 {
        engine.post(p2p(1, tag), tag as u64);
    }
    assert_eq!(engine.stats().queues, 2);
    // The last receive first: one search of depth 40 passes 4 per search over 8 searches. The
    // bins, at least 16 per side, grow to cover the 40 queued receives: 64 + 16.
    assert_eq!(engine.arrive(env(1, 39), 100), Some(39));
    assert_eq!(engine.stats().queues, 80);
    for tag in (0..39).rev() {
        assert_eq!(engine.arrive(env(1, tag), 101), Some(tag as u64));
    }
    assert_eq!(engine.stats().queues, 80);
    for _ in 0..16 {
        assert_eq!(engine.probe(p2p(1, 0), false), None);
    }
    assert_eq!(engine.stats().queues, 2);
}

#[test]
fn small_cases_cross_the_thresholds() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    // Engine and the queues it has before any threshold is crossed.
    let engines = [
        (EngineKind::Pnp, 3),
        (EngineKind::Col, 2),
        (EngineKind::Adaptive, 2),
    ];
    let mut crossed = [0; 3];
    for _ in 0..200 {
        let (params, ops) = small_case().new_tree(&mut runner).unwrap().current();
        for (count, &(kind, base)) in crossed.iter_mut().zip(&engines) {
            let mut engine = build_engine(kind, &params);
            check_against_model(engine.as_mut(), &ops);
            if engine.stats().queues_max > base {
                *count += 1;
            }
        }
    }
    assert!(
        crossed.iter().all(|&count| count >= 50),
        "cases past a threshold: {crossed:?}"
    );
}

/// No wildcards asserted: receives and messages meet by exact key, in order within a key.
fn asserting(params: EngineParams) -> EngineParams {
    EngineParams {
        assertions: Assertions {
            no_any_source: true,
            no_any_tag: true,
            allow_overtaking: false,
        },
        ..params
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Wildcards a program posts anyway are matched in order too.
    #[test]
    fn engines_of_asserting_communicators_match_like_one_ordered_list((params, ops) in small_case()) {
        for &kind in EngineKind::ALL {
            let mut engine = build_engine(kind, &asserting(params));
            check_against_model(engine.as_mut(), &ops);
            let mut engine = build_engine(kind, &asserting(params));
            check_bursts_against_model(engine.as_mut(), &ops);
        }
    }
}

#[test]
fn asserted_no_wildcards_searches_about_one_element_whatever_the_order() {
    let n = 256;
    // The gpu engine hashes its queues itself.
    for &kind in EngineKind::ALL.iter().filter(|&&k| k != EngineKind::Gpu) {
        let mut engine = build_engine(kind, &asserting(params(8)));
        let reverse = |engine: &mut Box<dyn MatchEngine>, base: u64| {
            for tag in 0..n {
                assert_eq!(engine.post(p2p(1, tag), base + tag as u64), None);
            }
            for tag in (0..n).rev() {
                assert_eq!(engine.arrive(env(1, tag), 0), Some(base + tag as u64));
            }
        };
        reverse(&mut engine, 0);
        // A wildcard the program posts anyway still matches in order.
        assert_eq!(engine.post(p2p(ANY_SOURCE, 0), 10_000), None);
        assert_eq!(engine.arrive(env(3, 0), 7), Some(10_000));
        reverse(&mut engine, 20_000);
        let prq = engine.stats().point_to_point.prq;
        assert!(prq.mean() < 1.5 && prq.depth_max <= 4, "{kind:?}: {prq:?}");
        assert_eq!(engine.queued(), (0, 0));
    }
}
