use super::replay::replay;
use super::*;
use crate::clock::Clock;
use crate::matching::tests::{check_against_model, check_bursts_against_model, ops, SOURCES};
use crate::matching::{build_engine, EngineKind, EngineParams, ANY_SOURCE, ANY_TAG};
use proptest::prelude::*;

fn header() -> Header {
    Header {
        rank: 3,
        comm: 1,
        comm_size: 6,
        world_size: 8,
        origin: "test".into(),
    }
}

fn params() -> EngineParams {
    EngineParams {
        comm_size: SOURCES as usize,
        ..EngineParams::default()
    }
}

/// `ops` through a recorded `list`, checked against the reference model on the way.
fn record(ops: &[crate::matching::tests::Op]) -> Trace {
    let (mut recording, trace) = Recording::new(
        build_engine(EngineKind::List, &params()),
        Header {
            comm_size: SOURCES as usize,
            ..header()
        },
    );
    check_against_model(&mut recording, ops);
    let trace = trace.lock().unwrap().clone();
    trace
}

#[test]
fn every_op_reads_back_equal() {
    let coll = Class::Collective {
        kind: 16,
        size_class: 15,
    };
    let trace = Trace {
        header: header(),
        events: vec![
            Event {
                op: Op::Post {
                    want: Pattern {
                        source: ANY_SOURCE,
                        tag: ANY_TAG,
                        class: Class::PointToPoint,
                    },
                    recv: u64::MAX,
                },
                result: None,
            },
            Event {
                op: Op::Arrive {
                    env: Envelope {
                        source: 5,
                        tag: i32::MAX,
                        class: coll,
                    },
                    msg: 300,
                },
                result: Some(7),
            },
            Event {
                op: Op::Probe {
                    want: Pattern {
                        source: 2,
                        tag: -1,
                        class: coll,
                    },
                    remove: true,
                },
                result: Some(1 << 40),
            },
            Event {
                op: Op::Probe {
                    want: Pattern {
                        source: 0,
                        tag: 0,
                        class: Class::PointToPoint,
                    },
                    remove: false,
                },
                result: None,
            },
            Event {
                op: Op::Cancel { recv: 9 },
                result: Some(9),
            },
        ],
    };
    let bytes = trace.encode();
    assert_eq!(Trace::decode(&bytes, Path::new("t")).unwrap(), trace);
    assert_eq!(trace.file_name(), "rank3-comm1.trace");
}

#[test]
fn other_versions_and_damage_are_refused_by_name() {
    let trace = Trace {
        header: header(),
        events: vec![Event {
            op: Op::Cancel { recv: 1 },
            result: None,
        }],
    };
    let mut bytes = trace.encode();
    bytes[8] = 9;
    let err = Trace::decode(&bytes, Path::new("dir/r.trace")).unwrap_err();
    assert!(
        err.contains("dir/r.trace") && err.contains("version 9"),
        "{err}"
    );
    let err = Trace::decode(b"not a trace at all", Path::new("x")).unwrap_err();
    assert!(err.contains("not a matchshim trace"), "{err}");
    let bytes = trace.encode();
    let err = Trace::decode(&bytes[..bytes.len() - 1], Path::new("x")).unwrap_err();
    assert!(
        err.contains("event 0") && err.contains("cut short"),
        "{err}"
    );
}

#[test]
fn a_directory_reads_back_sorted_by_rank() {
    let dir = std::env::temp_dir().join(format!("matchshim-trace-test-{}", std::process::id()));
    let traces: Vec<Trace> = [(10, 0), (2, 1), (2, 0)]
        .iter()
        .map(|&(rank, comm)| Trace {
            header: Header {
                rank,
                comm,
                ..header()
            },
            events: vec![],
        })
        .collect();
    write_dir(&dir, &traces).unwrap();
    let back = read_dir(&dir).unwrap();
    let order: Vec<(usize, usize)> = back
        .iter()
        .map(|t| (t.header.rank, t.header.comm))
        .collect();
    assert_eq!(order, [(2, 0), (2, 1), (10, 0)]);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(read_dir(&dir).unwrap_err().contains("cannot read"));
}

#[test]
fn replay_names_the_event_where_an_engine_answers_otherwise() {
    let post = |recv| Event {
        op: Op::Post {
            want: Pattern {
                source: 1,
                tag: 0,
                class: Class::PointToPoint,
            },
            recv,
        },
        result: None,
    };
    let mut trace = Trace {
        header: header(),
        events: vec![post(1), post(2)],
    };
    trace.events[1].result = Some(5);
    let err = replay(&trace, EngineKind::Rank, &params(), &Clock::new()).unwrap_err();
    assert!(
        err.contains("rank 3 comm 1: event 1") && err.contains("rank answered None"),
        "{err}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// A recorded engine answers as it would alone, its trace reads back equal, and every engine
    /// replays it to the same answers; `list` again to the same counters.
    #[test]
    fn recorded_traces_replay_on_every_engine(ops in ops(200)) {
        let trace = record(&ops);
        let back = Trace::decode(&trace.encode(), Path::new("t")).unwrap();
        prop_assert_eq!(&back, &trace);
        let clock = Clock::new();
        for &kind in EngineKind::ALL {
            let replayed = replay(&back, kind, &params(), &clock);
            prop_assert!(replayed.is_ok(), "{:?}: {:?}", kind, replayed);
        }
        let mut list = build_engine(EngineKind::List, &params());
        check_against_model(list.as_mut(), &ops);
        let replayed = replay(&back, EngineKind::List, &params(), &clock).unwrap();
        prop_assert_eq!(replayed.stats, *list.stats());
        // Bursts are logged as their arrivals one by one.
        let (mut bursts, burst_trace) = Recording::new(build_engine(EngineKind::Batch, &params()), header());
        check_bursts_against_model(&mut bursts, &ops);
        prop_assert_eq!(&burst_trace.lock().unwrap().events, &trace.events);
    }
}
