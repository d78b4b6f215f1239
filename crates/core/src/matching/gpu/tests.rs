//! The engine with the kernels' host build against the reference model (through `list`, which
//! the model checks): bursts without and with wildcard receives, in order and unordered, long
//! queues past compaction, table rebuilds and cancels, wildcard scans of the unexpected side,
//! the copy's agreement with the host after every burst; the argument structs against
//! kernels.h; the path without a device; the kernels through NVRTC; and, where a device is
//! found, bursts through it checked against `bins`.

use super::*;
use crate::matching::tests::{check_against_model, check_bursts_against_model, ops, Op, SOURCES};
use crate::matching::{build_engine, Assertions, EngineKind, ListEngine};
use proptest::prelude::*;

fn params(assertions: Assertions) -> EngineParams {
    EngineParams {
        comm_size: SOURCES as usize,
        assertions,
        ..EngineParams::default()
    }
}

fn kernels_engine(assertions: Assertions) -> GpuEngine {
    GpuEngine::host(&params(assertions), GpuParams::KERNELS)
}

const RELAXED: Assertions = Assertions {
    no_any_source: true,
    no_any_tag: true,
    allow_overtaking: true,
};

/// Runs `ops` on `engine` and on `list`, each run of arrivals as one burst on `engine`; checks
/// every result, the queue lengths after each step and the copy after each burst. `same`
/// compares two matches (equal, or in unordered matching only of the same key).
fn check_bursts(engine: &mut GpuEngine, ops: &[Op], same: impl Fn(u64, u64) -> bool) {
    let mut list = ListEngine::new();
    let mut posted: Vec<RecvId> = Vec::new();
    let mut open: std::collections::HashSet<u64> = std::collections::HashSet::new();
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
                engine.check_mirror();
                for (i, &(env, msg)) in run.iter().enumerate() {
                    let want = list.arrive(env, msg);
                    assert_eq!(
                        got[i].is_some(),
                        want.is_some(),
                        "step {}: {env:?}",
                        step + i
                    );
                    if let (Some(g), Some(w)) = (got[i], want) {
                        assert!(same(g, w), "step {}: {g} for {w}", step + i);
                        assert!(open.remove(&g), "receive {g} matched twice");
                    }
                }
                step += run.len();
            }
            Op::Post(want) => {
                posted.push(id);
                match (engine.post(want, id), list.post(want, id)) {
                    (Some(got), Some(expected)) => {
                        assert!(same(got, expected), "step {step}: {want:?}");
                    }
                    (got, expected) => {
                        assert_eq!(got, expected, "step {step}: {want:?}");
                        open.insert(id);
                    }
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
                        open.remove(&recv);
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

fn exact(got: u64, want: u64) -> bool {
    got == want
}

/// Runs of one kind of operation over few ranks and tags, so queues grow long, chains share
/// keys, and compaction, table rebuilds and rounds happen.
fn long_ops(wildcards: u32) -> impl Strategy<Value = Vec<Op>> {
    let source = prop_oneof![10 - wildcards => 0..SOURCES, wildcards => Just(ANY_SOURCE)];
    let tag = prop_oneof![10 - wildcards => 0..8, wildcards => Just(ANY_TAG)];
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

/// A key's identity for unordered matching: two receives without wildcards fit the same
/// messages exactly when their keys agree.
fn key_of(ops: &[Op], id: u64) -> u64 {
    match ops[id as usize] {
        Op::Post(want) => pattern_key(&want),
        Op::Arrive(env) => envelope_key(&env),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn cpu_tier_matches_like_one_ordered_list(ops in long_ops(1)) {
        let mut engine = GpuEngine::host(&params(Assertions::default()), GpuParams::CPU);
        check_against_model(&mut engine, &ops);
        let mut engine = GpuEngine::host(&params(Assertions::default()), GpuParams::CPU);
        check_bursts_against_model(&mut engine, &ops);
    }

    #[test]
    fn host_kernels_match_like_one_ordered_list(ops in ops(200)) {
        check_against_model(&mut kernels_engine(Assertions::default()), &ops);
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn host_kernels_keep_order_through_long_queues(ops in long_ops(1)) {
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn host_kernels_keep_order_with_many_wildcards(ops in long_ops(4)) {
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn host_kernels_keep_order_without_wildcards(ops in long_ops(0)) {
        check_bursts(&mut kernels_engine(Assertions::default()), &ops, exact);
    }

    #[test]
    fn unordered_claims_match_only_their_own_key(ops in long_ops(0)) {
        let mut engine = kernels_engine(RELAXED);
        prop_assert!(engine.unordered);
        check_bursts(&mut engine, &ops, |got, want| key_of(&ops, got) == key_of(&ops, want));
    }

    /// Bursts of every size against a log of many wildcard receives, so the scan splits the
    /// wildcard log into several word groups.
    #[test]
    fn wildcard_scan_over_word_groups_finds_the_earliest(
        receives in prop::collection::vec((0..4i32, 0..3i32, 0..5u8), 40..400),
        burst in prop::collection::vec((0..4i32, 0..3i32), 1..300),
    ) {
        let mut engine = kernels_engine(Assertions::default());
        let mut list = ListEngine::new();
        for (id, &(source, tag, wild)) in receives.iter().enumerate() {
            let want = Pattern {
                source: if wild == 0 { ANY_SOURCE } else { source },
                tag: if wild == 1 { ANY_TAG } else { tag },
                class: Class::PointToPoint,
            };
            prop_assert_eq!(engine.post(want, id as u64), list.post(want, id as u64));
        }
        let msgs: Vec<(Envelope, MsgId)> = burst
            .iter()
            .enumerate()
            .map(|(i, &(source, tag))| (Envelope { source, tag, class: Class::PointToPoint }, 1000 + i as u64))
            .collect();
        let mut got = Vec::new();
        engine.arrive_burst(&msgs, &mut got);
        engine.check_mirror();
        let want: Vec<_> = msgs.iter().map(|&(e, m)| list.arrive(e, m)).collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(engine.queued(), list.queued());
    }
}

#[test]
fn argument_structs_match_kernels_h() {
    use mirror::{DevEntry, MsArgs, MsBurst, MsSide, Ticket};
    use std::mem::{offset_of, size_of};
    let c = host::layout();
    let rust = [
        size_of::<MsArgs>(),
        size_of::<MsSide>(),
        size_of::<MsBurst>(),
        offset_of!(MsArgs, b),
        offset_of!(MsSide, n_dirty),
        offset_of!(MsBurst, count),
        size_of::<side::Entry>(),
        size_of::<DevEntry>(),
        size_of::<Ticket>(),
        offset_of!(MsSide, chains),
    ];
    assert_eq!(c, rust, "kernels.h and mirror.rs disagree");
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
fn a_burst_resolves_conflicts_in_arrival_order() {
    let mut engine = kernels_engine(Assertions::default());
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

/// Every receive a wildcard: each round settles one message, so after the last round the CPU
/// tier finishes the burst, in order.
#[test]
fn a_burst_past_the_last_round_is_finished_in_order() {
    let mut engine = kernels_engine(Assertions::default());
    let mut list = ListEngine::new();
    for id in 0..40 {
        assert_eq!(engine.post(p2p(ANY_SOURCE, ANY_TAG), id), None);
        list.post(p2p(ANY_SOURCE, ANY_TAG), id);
    }
    let msgs: Vec<_> = (0..50)
        .map(|i| (env(i % 3, i % 4), 100 + i as u64))
        .collect();
    let mut matched = Vec::new();
    let runs = engine.kernel_runs();
    engine.arrive_burst(&msgs, &mut matched);
    assert_eq!(engine.kernel_runs(), runs + 1, "one burst on the kernels");
    let want: Vec<_> = msgs.iter().map(|&(e, m)| list.arrive(e, m)).collect();
    assert_eq!(matched, want);
    assert_eq!(engine.queued(), (0, 10));
    check_against_model(&mut engine, &[]);
}

/// A long unexpected side searched by wildcard receives and probes through the single scan.
#[test]
fn wildcard_searches_of_the_unexpected_side_run_the_scan() {
    let mut engine = kernels_engine(Assertions::default());
    let mut list = ListEngine::new();
    for i in 0..300 {
        let e = env(i % 5, i % 7);
        assert_eq!(engine.arrive(e, i as u64), list.arrive(e, i as u64));
    }
    let runs = engine.kernel_runs();
    for (id, want) in [
        p2p(3, ANY_TAG),
        p2p(ANY_SOURCE, 6),
        p2p(ANY_SOURCE, ANY_TAG),
    ]
    .into_iter()
    .enumerate()
    {
        assert_eq!(engine.probe(want, false), list.probe(want, false));
        assert_eq!(
            engine.post(want, 1000 + id as u64),
            list.post(want, 1000 + id as u64)
        );
    }
    assert_eq!(
        engine.kernel_runs(),
        runs + 6,
        "every wildcard search on the kernels"
    );
    assert_eq!(engine.queued(), list.queued());
}

/// A drained posted side keeps its table: posting the same keys again rebuilds nothing.
#[test]
fn tables_stay_grown_across_drains() {
    let mut engine = kernels_engine(Assertions::default());
    let mut grown = None;
    for round in 0..4u64 {
        for tag in 0..3000 {
            engine.post(p2p(1, tag), round * 10_000 + tag as u64);
        }
        let msgs: Vec<_> = (0..3000).map(|tag| (env(1, tag), tag as u64)).collect();
        let mut matched = Vec::new();
        engine.arrive_burst(&msgs, &mut matched);
        assert!(matched.iter().all(Option::is_some));
        assert_eq!(engine.queued(), (0, 0));
        let bits = *grown.get_or_insert(engine.prq.bits);
        assert_eq!(
            engine.prq.bits, bits,
            "round {round}: the table kept its size"
        );
    }
}

#[test]
fn without_a_device_the_engine_says_why_once_and_runs_the_host_build() {
    if driver_version().is_ok() {
        return; // A machine with a driver takes the device path, tested below.
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
    // Thresholds set send bursts to the kernels' host build; left alone, the CPU tier takes them.
    let mut unset = GpuEngine::for_this_machine(&EngineParams::default());
    let msgs: Vec<_> = (0..5000).map(|i| (env(0, i), i as u64)).collect();
    unset.post(p2p(0, 7), 1);
    unset.arrive_burst(&msgs, &mut Vec::new());
    assert!(unset.mirror.is_none() && unset.kernel_runs() == 0);
    let gpu = GpuParams {
        burst: 10,
        chosen: true,
        ..GpuParams::default()
    };
    let mut engine = GpuEngine::for_this_machine(&EngineParams {
        gpu,
        ..EngineParams::default()
    });
    for tag in 0..1000 {
        engine.post(p2p(0, tag), tag as u64);
    }
    let mut matched = Vec::new();
    let msgs: Vec<_> = (0..1000)
        .map(|i| (env(0, 999 - i), 5000 + i as u64))
        .collect();
    engine.arrive_burst(&msgs, &mut matched);
    let want: Vec<_> = (0..1000).map(|i| Some(999 - i as u64)).collect();
    assert_eq!(matched, want);
    assert_eq!(engine.kernel_runs(), 1, "the host build took the burst");
    assert_eq!(launches(), 0);
}

/// The kernels compile for every architecture the loaded NVRTC offers (of those a device of
/// this project's reach has), or NVRTC is named missing.
#[test]
fn kernels_compile_to_ptx_or_nvrtc_is_named_missing() {
    let archs = match nvrtc_archs() {
        Ok(archs) => archs,
        Err(why) => {
            assert!(
                why.contains("NVRTC") && why.contains("libnvrtc.so.12"),
                "{why}"
            );
            return;
        }
    };
    for arch in archs.into_iter().filter(|&a| a >= 70) {
        let ptx = compile_ptx(arch).unwrap_or_else(|e| panic!("compute_{arch}: {e}"));
        assert!(ptx.contains(&format!(".target sm_{arch}")), "sm_{arch}");
        for kernel in KERNELS {
            for name in [kernel.to_string(), format!("{kernel}_p")] {
                assert!(
                    ptx.contains(&format!(".entry {name}(")),
                    "{name} in sm_{arch}"
                );
            }
        }
    }
    assert!(compile_ptx(1)
        .unwrap_err()
        .contains("does not compile for compute_1"));
}

/// On a machine with a CUDA device: bursts through the device, exact (without and with
/// wildcard receives) and unordered, every match checked against `bins` (or, unordered, for a
/// receive of the message's own key); skipped without one.
#[test]
fn device_bursts_match_like_bins() {
    let tiers = GpuParams {
        burst: 1,
        scan: 0,
        ..GpuParams::default()
    };
    let mut engine = match GpuEngine::device(&params(Assertions::default()), tiers) {
        Ok(engine) => engine,
        Err(why) => {
            eprintln!("device_bursts_match_like_bins: skipped, no device ({why})");
            return;
        }
    };
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(64));
    for wildcards in [0, 1, 4] {
        runner
            .run(&long_ops(wildcards), |ops| {
                let mut engine = GpuEngine::device(&params(Assertions::default()), tiers).unwrap();
                check_bursts(&mut engine, &ops, exact);
                Ok(())
            })
            .unwrap();
    }
    runner
        .run(&long_ops(0), |ops| {
            let mut engine = GpuEngine::device(&params(RELAXED), tiers).unwrap();
            check_bursts(&mut engine, &ops, |g, w| key_of(&ops, g) == key_of(&ops, w));
            Ok(())
        })
        .unwrap();
    // One long burst: 65536 receives in random order, against bins.
    let mut bins = build_engine(EngineKind::Bins, &params(Assertions::default()));
    let n = 65536u64;
    for id in 0..n {
        let want = p2p((id % 64) as i32, id as i32);
        assert_eq!(engine.post(want, id), bins.post(want, id));
    }
    let mut order: Vec<u64> = (0..n).collect();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    for i in (1..order.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        order.swap(i, (seed % (i as u64 + 1)) as usize);
    }
    let msgs: Vec<_> = order
        .iter()
        .map(|&i| (env((i % 64) as i32, i as i32), n + i))
        .collect();
    let (mut got, mut want) = (Vec::new(), Vec::new());
    engine.arrive_burst(&msgs, &mut got);
    bins.arrive_burst(&msgs, &mut want);
    assert_eq!(got, want);
    assert!(launches() > 0);
}
