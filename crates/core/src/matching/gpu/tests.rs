//! The kernels' host build against the reference model (through `list`, which the model
//! checks): bursts through the lookup and scan kernels, wildcard scans, long queues past
//! compaction and table rebuilds, unordered claims, and the path without a device.

use super::*;
use crate::matching::tests::{check_against_model, ops, Op, SOURCES};
use crate::matching::{build_engine, Assertions, EngineKind, ListEngine};
use proptest::prelude::*;

fn kernels_engine(assertions: Assertions) -> GpuEngine {
    let params = EngineParams {
        comm_size: SOURCES as usize,
        assertions,
        ..EngineParams::default()
    };
    GpuEngine::host(&params, Tiers::KERNELS)
}

/// Runs `ops` on `engine` and on `list`, each run of arrivals as one burst on `engine`; checks
/// every result and the queue lengths after each step. `same` compares two matches (equal, or
/// in unordered matching only of the same key).
fn check_bursts(engine: &mut GpuEngine, ops: &[Op], same: impl Fn(&Op, u64, u64) -> bool) {
    let mut list = ListEngine::new();
    let mut posted: Vec<RecvId> = Vec::new();
    let mut keys: std::collections::HashMap<u64, Op> = std::collections::HashMap::new();
    let mut step = 0;
    while step < ops.len() {
        let id = step as u64;
        match ops[step] {
            Op::Arrive(_) => {
                let run: Vec<(Envelope, MsgId)> = ops[step..]
                    .iter()
                    .take_while(|op| matches!(op, Op::Arrive(_)))
                    .enumerate()
                    .map(|(i, op)| match op {
                        Op::Arrive(env) => (*env, id + i as u64),
                        _ => unreachable!(),
                    })
                    .collect();
                let mut got = Vec::new();
                engine.arrive_burst(&run, &mut got);
                for (i, &(env, msg)) in run.iter().enumerate() {
                    let want = list.arrive(env, msg);
                    assert_eq!(
                        got[i].is_some(),
                        want.is_some(),
                        "step {}: {env:?}",
                        step + i
                    );
                    if let (Some(g), Some(w)) = (got[i], want) {
                        assert!(same(&ops[step + i], g, w), "step {}: {g} for {w}", step + i);
                        assert!(keys.remove(&g).is_some(), "receive {g} matched twice");
                    }
                }
                step += run.len();
            }
            Op::Post(want) => {
                posted.push(id);
                keys.insert(id, ops[step].clone());
                match (engine.post(want, id), list.post(want, id)) {
                    (Some(got), Some(expected)) => {
                        keys.remove(&id);
                        assert!(same(&ops[step], got, expected), "step {step}: {want:?}");
                    }
                    (got, expected) => assert_eq!(got, expected, "step {step}: {want:?}"),
                }
                step += 1;
            }
            Op::Probe(want, remove) => {
                let got = engine.probe(want, remove);
                let expected = list.probe(want, remove);
                assert_eq!(got.is_some(), expected.is_some(), "step {step}: {want:?}");
                step += 1;
            }
            Op::Cancel(back) => {
                if let Some(&recv) = posted.iter().rev().nth(back) {
                    let cancelled = engine.cancel(recv);
                    if cancelled {
                        keys.remove(&recv);
                    }
                    // Unordered matching may have taken another receive of the same key.
                    if !engine.unordered {
                        assert_eq!(cancelled, list.cancel(recv), "step {step}");
                    } else if cancelled != list.cancel(recv) {
                        return;
                    }
                }
                step += 1;
            }
        }
        assert_eq!(engine.queued(), list.queued(), "step {step}: queue lengths");
    }
}

fn exact(_: &Op, got: u64, want: u64) -> bool {
    got == want
}

/// Runs of one kind of operation over few ranks and tags, so queues grow long, chains share
/// keys, and compaction and table rebuilds happen.
fn long_ops(wildcards: bool) -> impl Strategy<Value = Vec<Op>> {
    let wild = if wildcards { 1 } else { 0 };
    let source = prop_oneof![9 => 0..SOURCES, wild => Just(ANY_SOURCE)];
    let tag = prop_oneof![9 => 0..8, wild => Just(ANY_TAG)];
    let class = prop_oneof![
        7 => Just(Class::PointToPoint),
        1 => Just(Class::Collective { kind: 1, size_class: 0 }),
    ];
    let pattern = (source, tag, class.clone()).prop_map(|(source, tag, class)| Pattern {
        source,
        tag,
        class,
    });
    let envelope =
        (0..SOURCES, 0..8, class).prop_map(|(source, tag, class)| Envelope { source, tag, class });
    let phase = prop_oneof![
        4 => prop::collection::vec(pattern.clone().prop_map(Op::Post), 1..120),
        4 => prop::collection::vec(envelope.prop_map(Op::Arrive), 1..120),
        1 => prop::collection::vec((pattern, any::<bool>()).prop_map(|(p, r)| Op::Probe(p, r)), 1..6),
        1 => prop::collection::vec((0usize..60).prop_map(Op::Cancel), 1..6),
    ];
    prop::collection::vec(phase, 1..24).prop_map(|phases| phases.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cpu_tier_matches_like_one_ordered_list(ops in long_ops(true)) {
        let mut engine = GpuEngine::host(&EngineParams::default(), Tiers::CPU);
        check_against_model(&mut engine, &ops);
    }

    #[test]
    fn host_kernels_match_like_one_ordered_list(ops in ops(200)) {
        check_against_model(&mut kernels_engine(Assertions::default()), &ops);
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn host_kernels_keep_order_through_long_queues(ops in long_ops(true)) {
        check_against_model(&mut kernels_engine(Assertions::default()), &ops);
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn unordered_claims_match_only_their_own_key(ops in long_ops(false)) {
        let relaxed = Assertions { no_any_source: true, no_any_tag: true, allow_overtaking: true };
        let mut engine = kernels_engine(relaxed);
        assert!(engine.unordered);
        // Without wildcards two receives fit the same messages exactly when their keys agree.
        let key_of = |id: u64| match ops[id as usize] {
            Op::Post(want) => pattern_key(&want),
            Op::Arrive(env) => envelope_key(&env),
            _ => unreachable!(),
        };
        check_bursts(&mut engine, &ops, |_, got, want| key_of(got) == key_of(want));
    }
}

#[test]
fn a_burst_resolves_conflicts_in_arrival_order() {
    let mut engine = kernels_engine(Assertions::default());
    let p2p = |source, tag| Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    };
    let env = |source, tag| Envelope {
        source,
        tag,
        class: Class::PointToPoint,
    };
    engine.post(p2p(ANY_SOURCE, 5), 0);
    engine.post(p2p(1, 5), 1);
    engine.post(p2p(1, ANY_TAG), 2);
    // All three fit the first message; each later one takes the earliest left.
    let mut matched = Vec::new();
    let msgs = [
        (env(1, 5), 10),
        (env(1, 5), 11),
        (env(1, 5), 12),
        (env(1, 5), 13),
    ];
    engine.arrive_burst(&msgs, &mut matched);
    assert_eq!(matched, vec![Some(0), Some(1), Some(2), None]);
    assert_eq!(engine.queued(), (0, 1));
    assert_eq!(engine.probe(p2p(ANY_SOURCE, ANY_TAG), true), Some(13));
}

#[test]
fn without_a_device_the_engine_says_why_once_and_reports_the_cpu_path() {
    if driver_version().is_ok() {
        return; // A machine with a driver takes the device path, tested by ci/gpu-ptx.sh.
    }
    let line = init_message(EngineKind::Gpu, 0).expect("rank 0 says why");
    assert!(
        line.contains("gpu engine") && line.contains("no CUDA driver"),
        "{line}"
    );
    assert_eq!(init_message(EngineKind::Gpu, 1), None);
    assert_eq!(init_message(EngineKind::List, 0), None);
    let offload = offload();
    assert_eq!(offload.path, "cpu");
    assert!(offload.detail.contains("libcuda"), "{}", offload.detail);
    let mut engine = build_engine(EngineKind::Gpu, &EngineParams::default());
    let mut matched = Vec::new();
    let msgs: Vec<_> = (0..1000)
        .map(|i| {
            (
                Envelope {
                    source: 0,
                    tag: i,
                    class: Class::PointToPoint,
                },
                i as u64,
            )
        })
        .collect();
    engine.arrive_burst(&msgs, &mut matched);
    assert_eq!(engine.queued(), (0, 1000));
    assert_eq!(launches(), 0);
}

#[test]
fn kernels_compile_to_ptx_or_nvrtc_is_named_missing() {
    for (major, minor) in [(7, 0), (8, 0), (9, 0)] {
        match compile_ptx(major, minor) {
            Ok(ptx) => {
                assert!(
                    ptx.contains(&format!(".target sm_{major}{minor}")),
                    "sm_{major}{minor}"
                );
                for kernel in KERNELS {
                    assert!(
                        ptx.contains(&format!(".entry {kernel}")),
                        "{kernel} in sm_{major}{minor}"
                    );
                }
            }
            Err(why) => assert!(why.contains("NVRTC") && nvrtc_version().is_err(), "{why}"),
        }
    }
}
