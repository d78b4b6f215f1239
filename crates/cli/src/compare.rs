//! `compare`: the program natively and under each engine, R times each, summed up as paper 004
//! (Ghazimirsaeed et al. 2019, §5) shows it: queue search time speedups over the linked list,
//! queues allocated against a queue per source, and run time.

use crate::reports::{mean, Kind, RankReport};
use matchshim_core::matching::EngineKind;
use serde::Serialize;
use std::io::{IsTerminal, Write};

/// The baseline of the speedups (MPICH-like).
pub const BASELINE: &str = "list";
/// The reference for queue counts (Open MPI-like).
pub const PER_SOURCE: &str = "rank";

/// Every engine the shim knows, in its own order.
pub fn all_engines() -> Vec<String> {
    EngineKind::ALL
        .iter()
        .map(|kind| kind.name().to_string())
        .collect()
}

/// The engines to run: the references first where missing, each once.
pub fn with_references(engines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in [BASELINE.to_string(), PER_SOURCE.to_string()]
        .into_iter()
        .chain(engines)
    {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// One run under an engine: its reports and the whole run's wall time.
pub struct Run {
    pub reports: Vec<RankReport>,
    pub wall_ns: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EngineResult {
    pub engine: String,
    /// Engine time summed over ranks: point-to-point, collective, all (median over runs).
    pub match_time_ns: [u64; 3],
    /// Engine time of the busiest rank (under the baseline), same order.
    pub busiest_match_time_ns: [u64; 3],
    /// Baseline time over this engine's time; `None` where either is zero.
    pub speedup: [Option<f64>; 3],
    pub speedup_busiest: [Option<f64>; 3],
    /// Queues allocated per rank: mean and max over ranks (median over runs).
    pub queues_mean: f64,
    pub queues_max: u64,
    pub queues_vs_rank: Option<f64>,
    pub wall_ns: u64,
    /// Native wall time over this engine's.
    pub wall_speedup: Option<f64>,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Comparison {
    pub program: Vec<String>,
    pub mpi: String,
    pub ranks: usize,
    pub repeat: usize,
    pub native_wall_ns: u64,
    pub busiest_rank: usize,
    pub engines: Vec<EngineResult>,
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    match v.len() {
        0 => 0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2,
    }
}

fn median_f64(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn over(base: f64, this: f64) -> Option<f64> {
    (base > 0.0 && this > 0.0).then(|| base / this)
}

impl Comparison {
    /// Sums up the runs of each engine (`runs` must hold the baseline, each with ≥ 1 run).
    pub fn new(
        program: Vec<String>,
        mpi: &str,
        ranks: usize,
        native_walls: Vec<u64>,
        runs: &[(String, Vec<Run>)],
    ) -> Comparison {
        let repeat = native_walls.len();
        let native_wall_ns = median_u64(native_walls);
        let base_runs = &runs
            .iter()
            .find(|(e, _)| e == BASELINE)
            .expect("baseline runs")
            .1;
        // The busiest rank under the baseline: the most matching time at the median (lowest
        // rank on ties), so every engine is measured on the same rank.
        let busiest_rank = base_runs[0]
            .reports
            .iter()
            .map(|r| {
                let times = base_runs
                    .iter()
                    .filter_map(|run| run.reports.iter().find(|x| x.rank == r.rank))
                    .map(|x| x.match_time_ns);
                (r.rank, median_u64(times.collect()))
            })
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .map_or(0, |(rank, _)| rank);
        let times = |runs: &[Run], busiest: bool| -> [u64; 3] {
            Kind::ALL.map(|kind| {
                median_u64(
                    runs.iter()
                        .map(|run| {
                            run.reports
                                .iter()
                                .filter(|r| !busiest || r.rank == busiest_rank)
                                .map(|r| kind.match_time(r))
                                .sum()
                        })
                        .collect(),
                )
            })
        };
        let queues = |runs: &[Run]| {
            let means = runs
                .iter()
                .map(|run| mean(run.reports.iter().map(|r| r.queues_max as f64)))
                .collect();
            let maxes = runs
                .iter()
                .map(|run| run.reports.iter().map(|r| r.queues_max).max().unwrap_or(0))
                .collect();
            (median_f64(means), median_u64(maxes))
        };
        let base = (times(base_runs, false), times(base_runs, true));
        let per_source = runs
            .iter()
            .find(|(e, _)| e == PER_SOURCE)
            .map(|(_, r)| queues(r).0);
        let engines = runs
            .iter()
            .map(|(engine, runs)| {
                let (all, busiest) = (times(runs, false), times(runs, true));
                let (queues_mean, queues_max) = queues(runs);
                let wall_ns = median_u64(runs.iter().map(|r| r.wall_ns).collect());
                EngineResult {
                    engine: engine.clone(),
                    match_time_ns: all,
                    busiest_match_time_ns: busiest,
                    speedup: [0, 1, 2].map(|i| over(base.0[i] as f64, all[i] as f64)),
                    speedup_busiest: [0, 1, 2].map(|i| over(base.1[i] as f64, busiest[i] as f64)),
                    queues_mean,
                    queues_max,
                    queues_vs_rank: per_source.and_then(|q| over(queues_mean, q)),
                    wall_ns,
                    wall_speedup: over(native_wall_ns as f64, wall_ns as f64),
                }
            })
            .collect();
        Comparison {
            program,
            mpi: mpi.to_string(),
            ranks,
            repeat,
            native_wall_ns,
            busiest_rank,
            engines,
        }
    }
}

/// A one-line text bar on stderr, redrawn in place on a terminal, a line per step otherwise.
pub struct Progress {
    total: usize,
    done: usize,
    terminal: bool,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        Progress {
            total,
            done: 0,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Shows that the next step, `what`, is starting.
    pub fn step(&mut self, what: &str) {
        const WIDTH: usize = 30;
        let filled = WIDTH * self.done / self.total.max(1);
        let bar = format!(
            "[{}{}] {}/{} {what}",
            "#".repeat(filled),
            ".".repeat(WIDTH - filled),
            self.done,
            self.total
        );
        let mut err = std::io::stderr();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{bar}");
        } else {
            let _ = writeln!(err, "{bar}");
        }
        let _ = err.flush();
        self.done += 1;
    }

    pub fn finish(&self) {
        if self.terminal {
            eprint!("\r\x1b[2K");
        }
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;
    use crate::reports::tests::{line, reports};

    /// Two ranks; rank 0 does most of the matching.
    pub fn run(
        engine: &str,
        rank0_ns: u64,
        rank1_ns: u64,
        coll_ns: u64,
        queues: u64,
        wall_ns: u64,
    ) -> Run {
        Run {
            reports: reports(&[
                line(engine, 0, 2, rank0_ns, coll_ns, queues),
                line(engine, 1, 2, rank1_ns, 0, 2),
            ]),
            wall_ns,
        }
    }

    pub fn fixture() -> Comparison {
        let runs = vec![
            (
                "list".to_string(),
                vec![
                    run("list", 8000, 1000, 400, 2, 110),
                    run("list", 9000, 1000, 300, 2, 100),
                    run("list", 7000, 1000, 200, 2, 120),
                ],
            ),
            (
                "rank".to_string(),
                vec![
                    run("rank", 2000, 1000, 100, 6, 90),
                    run("rank", 3000, 2000, 100, 6, 95),
                    run("rank", 1000, 1000, 100, 6, 100),
                ],
            ),
        ];
        Comparison::new(vec!["./demo".into()], "mpich", 2, vec![100, 80, 90], &runs)
    }

    #[test]
    fn engines_default_to_every_engine_and_references_come_first() {
        assert!(all_engines().starts_with(&["list".to_string(), "rank".to_string()]));
        assert_eq!(
            with_references(vec!["bins".into(), "list".into()]),
            ["list", "rank", "bins"]
        );
    }

    #[test]
    fn medians_even_and_odd() {
        assert_eq!(median_u64(vec![5, 1, 3]), 3);
        assert_eq!(median_u64(vec![4, 1, 3, 2]), 2);
        assert_eq!(median_f64(vec![2.0, 1.0]), 1.5);
    }

    #[test]
    fn speedups_are_baseline_medians_over_engine_medians() {
        let c = fixture();
        assert_eq!((c.repeat, c.native_wall_ns, c.busiest_rank), (3, 90, 0));
        let list = &c.engines[0];
        assert_eq!(list.match_time_ns, [9000, 300, 9400]); // all: median of per-run sums
        assert_eq!(list.speedup, [Some(1.0), Some(1.0), Some(1.0)]);
        assert_eq!(list.queues_vs_rank, Some(2.0 / 4.0));
        let rank = &c.engines[1];
        // p2p summed over ranks: medians of 3000, 5000, 2000 -> 3000; busiest rank 0: 2000.
        assert_eq!(rank.match_time_ns, [3000, 100, 3100]);
        assert_eq!(rank.busiest_match_time_ns, [2000, 100, 2100]);
        assert_eq!(rank.speedup[0], Some(3.0));
        assert_eq!(rank.speedup[1], Some(3.0));
        assert_eq!(rank.speedup_busiest[0], Some(8000.0 / 2000.0));
        assert_eq!(
            (rank.queues_mean, rank.queues_max, rank.queues_vs_rank),
            (4.0, 6, Some(1.0))
        );
        assert_eq!(rank.wall_ns, 95);
        assert_eq!(rank.wall_speedup, Some(90.0 / 95.0));
    }

    #[test]
    fn no_collective_traffic_gives_no_collective_speedup() {
        let runs = vec![("list".to_string(), vec![run("list", 10, 10, 0, 2, 5)])];
        let c = Comparison::new(vec!["a".into()], "mpich", 2, vec![5], &runs);
        assert_eq!(c.engines[0].speedup, [Some(1.0), None, Some(1.0)]);
        assert_eq!(c.engines[0].queues_vs_rank, None);
    }

    #[test]
    fn the_table_has_a_row_per_engine_in_order() {
        let text = crate::table::comparison(&fixture());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "./demo: 2 ranks, mpich, median of 3 runs; native wall time 90 ns"
        );
        assert!(
            lines[1].starts_with("engine") && lines[1].contains("p2p r0"),
            "{}",
            lines[1]
        );
        let rank: Vec<&str> = lines[3].split_whitespace().collect();
        assert_eq!(rank[0], "rank");
        assert_eq!(rank[3..6], ["3.00x", "3.00x", "3.03x"]);
        assert_eq!(rank[6..9], ["4.00x", "3.00x", "4.00x"]);
        assert_eq!(rank[9..12], ["4.0", "6", "1.00x"]);
        assert_eq!(rank[12..], ["95", "ns", "0.95x"]);
    }
}
