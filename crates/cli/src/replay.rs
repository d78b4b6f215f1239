//! `replay`: traces through every engine with no MPI, summed up per rank in the shim's report
//! schema, so that they compare as `compare` compares runs (Ghazimirsaeed et al.'s (2019) measures: search depth
//! and time per traffic type, queues allocated), with each engine's peak heap bytes besides.

use crate::compare::{with_references, Comparison, Progress, Run, Variant, BASELINE, PER_SOURCE};
use crate::memory::peak_during;
use crate::reports::{mean, RankReport, Summary, Traffic, VERSION};
use crate::table::{duration, render, speedup_cells};
use matchshim_core::clock::Clock;
use matchshim_core::matching::{EngineKind, EngineParams, EngineStats};
use matchshim_core::trace::replay::replay;
use matchshim_core::trace::Trace;
use serde::Serialize;
use std::collections::BTreeMap;

/// Peak heap bytes of an engine, per rank (its communicators' engines together).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Memory {
    pub engine: String,
    pub mean_bytes: f64,
    pub max_bytes: usize,
    pub max_rank: usize,
}

/// What the traces are.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Source {
    pub label: String,
    pub traces: usize,
    /// Ranks with a trace, of `world_size`.
    pub ranks: usize,
    pub world_size: usize,
    pub events: usize,
    pub origins: Vec<String>,
    /// Rounds each trace was replayed in; its fastest counts.
    pub rounds: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct Outcome {
    pub source: Source,
    pub comparison: Comparison,
    /// Per engine, the reports summed over ranks.
    pub summaries: Vec<Summary>,
    pub memory: Vec<Memory>,
    /// Per engine, a report per rank.
    #[serde(skip)]
    pub per_rank: Vec<Vec<RankReport>>,
}

/// The engines named, `list` and `rank` first (the references of the comparison).
pub fn engines(names: Option<Vec<String>>) -> Result<Vec<EngineKind>, String> {
    let names = names.unwrap_or_else(crate::compare::all_engines);
    with_references(&[BASELINE, PER_SOURCE], names)
        .iter()
        .map(|name| {
            EngineKind::parse(name).ok_or_else(|| {
                format!(
                    "unknown engine {name:?}; engines: {}",
                    EngineKind::accepted()
                )
            })
        })
        .collect()
}

/// One rank's report from the replays of its communicators' traces.
fn rank_report(kind: EngineKind, rank: usize, world: usize, replays: &[Replay]) -> RankReport {
    let mut stats = EngineStats::default();
    let (mut time, mut posted, mut unexpected) = ([0u64; 2], 0, 0);
    for r in replays {
        stats.merge(&r.stats);
        time[0] += r.time_ns[0];
        time[1] += r.time_ns[1];
        posted += r.queued.0 as u64;
        unexpected += r.queued.1 as u64;
    }
    RankReport {
        matchshim: VERSION.to_string(),
        mpi: "replay".to_string(),
        engine: kind.name().to_string(),
        rank,
        size: world,
        thread_level: 0,
        communicators: replays.len() as u64,
        point_to_point: Traffic::new(&stats.point_to_point, time[0]),
        collective: Traffic::new(&stats.collective, time[1]),
        match_time_ns: time[0] + time[1],
        wall_time_ns: 0,
        queues: stats.queues,
        queues_max: stats.queues_max,
        posted_left: posted,
        unexpected_left: unexpected,
        coll: String::new(),
        collectives: BTreeMap::new(),
        takeover: "always".to_string(),
        comms: Vec::new(),
        gpu: None,
        bursts: Default::default(),
    }
}

type Replay = matchshim_core::trace::replay::Replayed;

/// Replays every trace through every engine, `repeat` rounds (engines in turn within a round,
/// so a slow spell of the machine hits all alike); each trace keeps its fastest round.
pub fn run(
    label: &str,
    traces: &[Trace],
    kinds: &[EngineKind],
    repeat: usize,
    params: &EngineParams,
) -> Result<Outcome, String> {
    let world = traces
        .iter()
        .map(|t| t.header.world_size.max(t.header.rank + 1))
        .max()
        .unwrap_or(0);
    let mut by_rank: BTreeMap<usize, Vec<&Trace>> = BTreeMap::new();
    for trace in traces {
        by_rank.entry(trace.header.rank).or_default().push(trace);
    }
    let clock = Clock::new();
    let mut progress = Progress::new(repeat * kinds.len());
    // [engine][rank][communicator], and each rank's peak heap bytes per engine.
    let mut best: Vec<Vec<Vec<Replay>>> = Vec::new();
    let mut heap: Vec<Vec<(usize, usize)>> = Vec::new();
    for round in 1..=repeat {
        for (e, &kind) in kinds.iter().enumerate() {
            progress.step(&format!("{} (round {round} of {repeat})", kind.name()));
            let mut ranks = Vec::new();
            let mut bytes = Vec::new();
            for (&rank, rank_traces) in &by_rank {
                let mut replays = Vec::new();
                let mut rank_bytes = 0;
                for trace in rank_traces {
                    let (replayed, peak) = peak_during(|| replay(trace, kind, params, &clock));
                    replays.push(replayed?);
                    rank_bytes += peak;
                }
                ranks.push(replays);
                bytes.push((rank, rank_bytes));
            }
            if round == 1 {
                best.push(ranks);
                heap.push(bytes);
                continue;
            }
            for (kept, new) in best[e].iter_mut().flatten().zip(ranks.iter().flatten()) {
                kept.time_ns[0] = kept.time_ns[0].min(new.time_ns[0]);
                kept.time_ns[1] = kept.time_ns[1].min(new.time_ns[1]);
            }
        }
    }
    progress.finish();
    let runs: Vec<(Variant, Vec<Run>)> = kinds
        .iter()
        .zip(&best)
        .map(|(&kind, ranks)| {
            let reports = by_rank
                .keys()
                .zip(ranks)
                .map(|(&rank, replays)| rank_report(kind, rank, world, replays))
                .collect();
            let run = Run {
                reports,
                wall_ns: 0,
            };
            let variant = Variant {
                engine: kind.name().to_string(),
                settings: Vec::new(),
            };
            (variant, vec![run])
        })
        .collect();
    let memory = kinds
        .iter()
        .zip(&heap)
        .map(|(kind, bytes)| {
            let (max_rank, max_bytes) = bytes
                .iter()
                .copied()
                .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
                .unwrap_or((0, 0));
            Memory {
                engine: kind.name().to_string(),
                mean_bytes: mean(bytes.iter().map(|b| b.1 as f64)),
                max_bytes,
                max_rank,
            }
        })
        .collect();
    let mut comparison = Comparison::new(
        vec![label.to_string()],
        "no MPI",
        world,
        vec![0],
        &runs,
        &[],
        EngineKind::ColPnp.name(),
    );
    comparison.measure = format!(
        "each trace's fastest of {repeat} round{}",
        if repeat == 1 { "" } else { "s" }
    );
    let mut origins: Vec<String> = traces.iter().map(|t| t.header.origin.clone()).collect();
    origins.sort();
    origins.dedup();
    Ok(Outcome {
        source: Source {
            label: label.to_string(),
            traces: traces.len(),
            ranks: by_rank.len(),
            world_size: world,
            events: traces.iter().map(|t| t.events.len()).sum(),
            origins,
            rounds: repeat,
        },
        summaries: runs
            .iter()
            .map(|(_, r)| Summary::new(&r[0].reports))
            .collect(),
        per_rank: runs
            .into_iter()
            .map(|(_, mut r)| r.swap_remove(0).reports)
            .collect(),
        comparison,
        memory,
    })
}

fn bytes(b: f64) -> String {
    if b >= 1e6 {
        format!("{:.1} MB", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1} kB", b / 1e3)
    } else {
        format!("{b:.0} B")
    }
}

/// Mean search depth and the deepest search, or `-` without searches.
fn depth(s: &crate::reports::SearchSum) -> String {
    if s.searches == 0 {
        "-".to_string()
    } else {
        format!("{:.2} ({})", s.mean_depth, s.max_depth)
    }
}

/// The tables: search depths per traffic type; engine time and its speedup over `list` (over
/// all ranks and on the busiest rank under `list`); queues and heap bytes per rank.
pub fn table(o: &Outcome) -> String {
    let s = &o.source;
    let c = &o.comparison;
    let mut out = format!(
        "{}: {} traces of {} ranks (of {}), {} events; {}; each trace's best of {} round{}\n",
        s.label,
        s.traces,
        s.ranks,
        s.world_size,
        s.events,
        s.origins.join("; "),
        s.rounds,
        if s.rounds == 1 { "" } else { "s" }
    );
    let rows: Vec<Vec<String>> = o
        .summaries
        .iter()
        .map(|m| {
            vec![
                m.engine.clone(),
                depth(&m.point_to_point.prq),
                depth(&m.point_to_point.umq),
                depth(&m.collective.prq),
                depth(&m.collective.umq),
                m.all.matches.to_string(),
                m.all.unexpected.to_string(),
            ]
        })
        .collect();
    out.push_str(&render(
        &[
            "engine",
            "p2p PRQ depth",
            "p2p UMQ depth",
            "coll PRQ depth",
            "coll UMQ depth",
            "matches",
            "unexpected",
        ],
        &rows,
    ));
    let at = |k: &str| format!("{k} r{}", c.busiest_rank);
    let (p, q, a, t) = (at("p2p"), at("coll"), at("all"), at("time"));
    let rows: Vec<Vec<String>> = c
        .engines
        .iter()
        .zip(&o.memory)
        .map(|(e, m)| {
            let mut row = speedup_cells(e);
            row.extend([
                duration(e.busiest_match_time_ns[2]),
                bytes(m.mean_bytes),
                bytes(m.max_bytes as f64),
            ]);
            row
        })
        .collect();
    out.push_str(&render(
        &[
            "engine",
            "match time",
            "p2p",
            "coll",
            "all",
            p.as_str(),
            q.as_str(),
            a.as_str(),
            "queues mean",
            "max",
            "vs rank",
            t.as_str(),
            "heap mean",
            "max",
        ],
        &rows,
    ));
    out.push_str(&format!(
        "depth: mean elements inspected per search (deepest); p2p/coll/all: queue search time \
         speedup over list (engine time summed over ranks; r{0}: rank {0}, the busiest under \
         list)\nqueues: allocated per rank (mean, max over ranks), vs rank: their mean over \
         rank's; heap: peak bytes of a rank's engines (mean, max over ranks)\n",
        c.busiest_rank
    ));
    out
}
