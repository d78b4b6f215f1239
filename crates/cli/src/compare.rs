//! `compare`: the program natively and under each variant (an engine and the values of the
//! other variables), R times each, summed up as Ghazimirsaeed et al. (2019, §5) show it (queue
//! search time speedups over the linked list, queues against a queue per source), with who
//! matched (MPI or the shim), the whole run against native, the spread over the runs, the load
//! of the machine, and a recommendation backed by those numbers.

use crate::reports::{mean, Kind, RankReport, Tally};
use crate::runs::Host;
use crate::table::duration;
use matchshim_core::matching::EngineKind;
use serde::{Deserialize, Serialize};
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

/// The engines `compare` runs unless told: the baseline, the shim's default and hash bins.
pub fn default_engines(default: &str) -> Vec<String> {
    with_references(&[BASELINE], vec![default.to_string(), "bins".to_string()])
}

/// The engines to run: `references` first where missing, each once.
pub fn with_references(references: &[&str], engines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for e in references.iter().map(|r| r.to_string()).chain(engines) {
        if !out.contains(&e) {
            out.push(e);
        }
    }
    out
}

/// One configuration of the shim: an engine and other `MATCHSHIM_*` values.
#[derive(Clone, Debug, PartialEq)]
pub struct Variant {
    pub engine: String,
    pub settings: Vec<(String, String)>,
}

impl Variant {
    /// `col+pnp`, or `col+pnp coll=native k=4` with settings.
    pub fn label(&self) -> String {
        let mut label = self.engine.clone();
        for (name, value) in &self.settings {
            let short = name.trim_start_matches("MATCHSHIM_").to_lowercase();
            label.push_str(&format!(" {short}={value}"));
        }
        label
    }

    /// What the ranks get for this variant.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut vars = vec![("MATCHSHIM_ENGINE".to_string(), self.engine.clone())];
        vars.extend(self.settings.iter().cloned());
        vars
    }
}

/// Every engine with every combination of the settings' values, engine by engine.
pub fn variants(engines: &[String], settings: &[(String, Vec<String>)]) -> Vec<Variant> {
    let mut combinations: Vec<Vec<(String, String)>> = vec![Vec::new()];
    for (name, values) in settings {
        combinations = combinations
            .iter()
            .flat_map(|done| {
                values.iter().map(move |value| {
                    let mut next = done.clone();
                    next.push((name.clone(), value.clone()));
                    next
                })
            })
            .collect();
    }
    engines
        .iter()
        .flat_map(|engine| {
            combinations.iter().map(move |settings| Variant {
                engine: engine.clone(),
                settings: settings.clone(),
            })
        })
        .collect()
}

/// One run under a variant: its reports and the whole run's wall time.
#[derive(Clone)]
pub struct Run {
    pub reports: Vec<RankReport>,
    pub wall_ns: u64,
}

/// A value over the runs.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Spread {
    pub median: u64,
    pub min: u64,
    pub max: u64,
}

impl Spread {
    pub fn of(values: Vec<u64>) -> Spread {
        Spread {
            min: values.iter().copied().min().unwrap_or(0),
            max: values.iter().copied().max().unwrap_or(0),
            median: median_u64(values),
        }
    }

    /// Every run of `self` below every run of `other`.
    pub fn below(&self, other: &Spread) -> bool {
        self.max < other.min
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct EngineResult {
    /// The variant's label.
    pub engine: String,
    /// Engine time summed over ranks: point-to-point, collective, all (median over runs).
    pub match_time_ns: [u64; 3],
    /// Engine time of the busiest rank (under the baseline), same order.
    pub busiest_match_time_ns: [u64; 3],
    /// Baseline time over this engine's time; `None` where either is zero.
    pub speedup: [Option<f64>; 3],
    pub speedup_busiest: [Option<f64>; 3],
    /// The busiest rank's engine time for all traffic, over the runs.
    pub busiest: Spread,
    /// The busiest rank's time from `MPI_Init` to `MPI_Finalize` (median).
    pub busiest_wall_ns: u64,
    /// `busiest` over `busiest_wall_ns` (medians).
    pub matching_share: f64,
    /// Queues allocated per rank: mean and max over ranks (median over runs).
    pub queues_mean: f64,
    pub queues_max: u64,
    pub queues_vs_rank: Option<f64>,
    /// The whole run, launcher included.
    pub wall: Spread,
    /// Native wall time over this one (medians).
    pub wall_speedup: Option<f64>,
    /// Who matched, over ranks (medians over runs): receives MPI matched, takeovers, messages
    /// the shim matched.
    #[serde(default)]
    pub mpi_matched: u64,
    #[serde(default)]
    pub takeovers: u64,
    #[serde(default)]
    pub shim_matched: u64,
    /// The most takeovers of any one run.
    #[serde(default)]
    pub takeovers_max: u64,
}

/// Matching below this share of the busiest rank's time is not worth a shim: no engine can
/// save more than it.
pub const NEGLIGIBLE_SHARE: f64 = 0.01;

/// What the recommendation comes to.
#[derive(Clone, Copy, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Matching is a negligible share of the time (or MPI matched everything): no shim.
    NotNeeded,
    /// Every run under the best variant was slower than every native run: no shim.
    SlowerThanNative,
    /// The variant named.
    Use,
}

/// What to use, and why, from the comparison's own numbers.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Recommendation {
    pub verdict: Verdict,
    /// The variant to use; `None` where the shim is not needed or slower than native.
    pub variant: Option<String>,
    /// The variant the sentences are about (the one to use if the shim is used at all).
    pub considered: String,
    /// Its variables.
    pub vars: Vec<(String, String)>,
    /// The busiest rank's matching time under the baseline over that rank's time.
    pub matching_share: f64,
    /// Matching time `considered` saves the busiest rank against the baseline, and that as a
    /// share of the rank's time under the baseline.
    pub saved_ns: i64,
    pub saved_share: f64,
    pub wall_vs_native: Option<f64>,
    pub queues_max: u64,
    /// The recommendation in sentences, each with its numbers.
    pub lines: Vec<String>,
}

/// How busy the machine was, besides the runs.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Load {
    pub cores: usize,
    /// The 1-minute load average before the first run.
    pub before: f64,
    /// Cores other work kept busy during each run (CPU time of the machine less the runs' own,
    /// over the run's wall time): median and max over runs.
    pub others_median: f64,
    pub others_max: f64,
}

impl Load {
    /// Other work used enough of the machine to move the timings.
    pub fn busy(&self) -> bool {
        self.before >= 1.0 || self.others_median >= 0.5
    }
}

#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct Comparison {
    pub program: Vec<String>,
    pub mpi: String,
    pub ranks: usize,
    pub repeat: usize,
    /// How each value was taken from the runs (`median of 3 runs`).
    #[serde(default)]
    pub measure: String,
    #[serde(default)]
    pub load: Option<Load>,
    pub native_wall: Spread,
    pub busiest_rank: usize,
    pub engines: Vec<EngineResult>,
    /// Hosts that ran more ranks than they have cores.
    pub oversubscribed: Vec<Host>,
    pub recommendation: Recommendation,
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

/// `part` of `whole`; 0 where nothing was measured.
fn share(part: i64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// A share as a percentage with the digits it needs: `12 %`, `0.4 %`, `0.03 %`, `< 0.01 %`.
pub fn percent(share: f64) -> String {
    let p = share * 100.0;
    if p == 0.0 {
        "0 %".to_string()
    } else if p < 0.01 {
        "< 0.01 %".to_string()
    } else if p < 0.1 {
        format!("{p:.2} %")
    } else if p < 1.0 {
        format!("{p:.1} %")
    } else {
        format!("{p:.0} %")
    }
}

impl Comparison {
    /// Sums up the runs of each variant. `runs` must hold the baseline (the first variant of
    /// engine `list`), each with ≥ 1 run; `default` is the shim's default engine.
    pub fn new(
        program: Vec<String>,
        mpi: &str,
        ranks: usize,
        native_walls: Vec<u64>,
        runs: &[(Variant, Vec<Run>)],
        hosts: &[Host],
        default: &str,
    ) -> Comparison {
        let repeat = native_walls.len();
        let native_wall = Spread::of(native_walls);
        let base_at = runs
            .iter()
            .position(|(v, _)| v.engine == BASELINE)
            .expect("baseline runs");
        let base_runs = &runs[base_at].1;
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
        let busiest_of = |run: &Run, value: fn(&RankReport) -> u64| {
            run.reports
                .iter()
                .find(|r| r.rank == busiest_rank)
                .map_or(0, value)
        };
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
            .find(|(v, _)| v.engine == PER_SOURCE)
            .map(|(_, r)| queues(r).0);
        let engines: Vec<EngineResult> = runs
            .iter()
            .map(|(variant, runs)| {
                let (all, busiest) = (times(runs, false), times(runs, true));
                let (queues_mean, queues_max) = queues(runs);
                let wall = Spread::of(runs.iter().map(|r| r.wall_ns).collect());
                let busiest_spread = Spread::of(
                    runs.iter()
                        .map(|r| busiest_of(r, |x| x.match_time_ns))
                        .collect(),
                );
                let busiest_wall_ns = median_u64(
                    runs.iter()
                        .map(|r| busiest_of(r, |x| x.wall_time_ns))
                        .collect(),
                );
                let tallies: Vec<Tally> = runs.iter().map(|r| Tally::over(&r.reports)).collect();
                let who = |f: fn(&Tally) -> u64| median_u64(tallies.iter().map(f).collect());
                EngineResult {
                    mpi_matched: who(|t| t.mpi_matched),
                    takeovers: who(|t| t.takeovers),
                    takeovers_max: tallies.iter().map(|t| t.takeovers).max().unwrap_or(0),
                    shim_matched: who(|t| t.shim_matched),
                    engine: variant.label(),
                    match_time_ns: all,
                    busiest_match_time_ns: busiest,
                    speedup: [0, 1, 2].map(|i| over(base.0[i] as f64, all[i] as f64)),
                    speedup_busiest: [0, 1, 2].map(|i| over(base.1[i] as f64, busiest[i] as f64)),
                    busiest: busiest_spread,
                    busiest_wall_ns,
                    matching_share: share(busiest_spread.median as i64, busiest_wall_ns),
                    queues_mean,
                    queues_max,
                    queues_vs_rank: per_source.and_then(|q| over(queues_mean, q)),
                    wall,
                    wall_speedup: over(native_wall.median as f64, wall.median as f64),
                }
            })
            .collect();
        let oversubscribed: Vec<Host> = hosts
            .iter()
            .filter(|h| h.ranks > h.cores)
            .cloned()
            .collect();
        let default_at = runs.iter().position(|(v, _)| v.engine == default);
        let variants: Vec<&Variant> = runs.iter().map(|(v, _)| v).collect();
        let recommendation = recommend(
            &engines,
            &variants,
            base_at,
            default_at,
            busiest_rank,
            &native_wall,
            mpi,
        );
        Comparison {
            program,
            mpi: mpi.to_string(),
            ranks,
            repeat,
            measure: format!(
                "median of {repeat} run{}",
                if repeat == 1 { "" } else { "s" }
            ),
            load: None,
            native_wall,
            busiest_rank,
            engines,
            oversubscribed,
            recommendation,
        }
    }
}

/// A median with its range, all in the median's unit: `12.1 ms (11.8–13.0)`; without a range
/// where every run gave the same (one run).
pub fn with_range(s: &Spread) -> String {
    let median = duration(s.median);
    if s.min == s.max {
        return median;
    }
    // A zero median takes the unit of the largest run.
    let unit = duration(if s.median == 0 { s.max } else { s.median });
    let unit = unit.rsplit(' ').next().unwrap_or("ns");
    let scale = match unit {
        "s" => 1e9,
        "ms" => 1e6,
        "us" => 1e3,
        _ => 1.0,
    };
    let digits = if scale == 1.0 { 0 } else { 1 };
    let number = |v: u64| format!("{:.digits$}", v as f64 / scale);
    let median = if s.median == 0 {
        format!("{} {unit}", number(0))
    } else {
        median
    };
    format!("{median} ({}–{})", number(s.min), number(s.max))
}

/// The shim is not needed where matching is a negligible share of the busiest rank's time
/// under every variant (MPI matched every receive, or the shim's engines matched little).
/// Otherwise: among the variants that matched at all (a variant whose runs never took over has
/// nothing to show), the one with the least matching time on the busiest rank, unless the shim's
/// default is within its spread (then the default, which needs no setting); and the whole run
/// under it against native, where native wins if every run under the shim was slower.
fn recommend(
    engines: &[EngineResult],
    variants: &[&Variant],
    base_at: usize,
    default_at: Option<usize>,
    busiest_rank: usize,
    native: &Spread,
    mpi: &str,
) -> Recommendation {
    let base = &engines[base_at];
    let most_at = (0..engines.len())
        .max_by(|&a, &b| {
            engines[a]
                .matching_share
                .total_cmp(&engines[b].matching_share)
        })
        .unwrap_or(base_at);
    let most = &engines[most_at];
    let matched: Vec<usize> = (0..engines.len())
        .filter(|&i| engines[i].busiest.median > 0)
        .collect();
    let best_at = matched
        .iter()
        .copied()
        .min_by_key(|&i| (engines[i].busiest.median, i));
    let pick_at = match (best_at, default_at) {
        (Some(best), Some(d))
            if matched.contains(&d) && !engines[best].busiest.below(&engines[d].busiest) =>
        {
            d
        }
        (Some(best), _) => best,
        (None, _) => default_at.unwrap_or(base_at),
    };
    let negligible = most.matching_share < NEGLIGIBLE_SHARE;
    // Where no shim is needed, the whole run is told under the default: what one would run.
    let pick_at = match default_at {
        Some(d) if negligible => d,
        _ => pick_at,
    };
    let pick = &engines[pick_at];
    let saved_ns = base.busiest.median as i64 - pick.busiest.median as i64;
    let saved_share = share(saved_ns, base.busiest_wall_ns);
    let native_wins = native.max > 0 && native.below(&pick.wall);
    let verdict = if negligible {
        Verdict::NotNeeded
    } else if native_wins {
        Verdict::SlowerThanNative
    } else {
        Verdict::Use
    };
    let mut lines = Vec::new();
    let took_over = engines
        .iter()
        .any(|e| e.takeovers_max > 0 || e.busiest.max > 0);
    if !took_over {
        let receives = engines.iter().map(|e| e.mpi_matched).max().unwrap_or(0);
        lines.push(format!(
            "MPI matched every receive ({receives} in a run) in every run: queues never grew \
             long enough for the shim to take over"
        ));
    }
    if most.busiest.median == 0 {
        let busiest_shim = engines
            .iter()
            .max_by_key(|e| e.shim_matched)
            .filter(|e| e.shim_matched > 0);
        let now_and_then = engines
            .iter()
            .find(|e| e.takeovers_max > 0 || e.busiest.max > 0);
        lines.push(match (busiest_shim, now_and_then) {
            (None, None) => "the shim's engine matched nothing under any variant".to_string(),
            (None, Some(e)) => format!(
                "the shim took over in a few runs only ({} among them) and matched nothing in \
                 the median run of any variant",
                e.engine
            ),
            (Some(e), _) => format!(
                "the shim matched at most {} of the receives (under {}), in no time measured on \
                 rank {busiest_rank}",
                matchshim_core::report::percent(e.shim_matched, e.shim_matched + e.mpi_matched),
                e.engine
            ),
        });
    } else {
        lines.push(format!(
            "matching is {} of rank {busiest_rank}'s time at most, under {} ({} of {}){}",
            percent(most.matching_share),
            most.engine,
            duration(most.busiest.median),
            duration(most.busiest_wall_ns),
            if negligible {
                format!(
                    ": below {}, where no engine can save more than that",
                    percent(NEGLIGIBLE_SHARE)
                )
            } else {
                String::new()
            }
        ));
    }
    if !negligible {
        if pick_at == base_at {
            lines.push(format!(
                "no engine matches measurably faster than {} on this program",
                base.engine
            ));
        } else {
            lines.push(format!(
                "{} matches {} faster than {} there: {} instead of {}, saving about {} of that \
                 rank's time",
                pick.engine,
                crate::table::ratio(over(base.busiest.median as f64, pick.busiest.median as f64)),
                base.engine,
                with_range(&pick.busiest),
                with_range(&base.busiest),
                percent(saved_share)
            ));
        }
        if let Some(best) = best_at.filter(|&b| b != pick_at).map(|b| &engines[b]) {
            lines.push(format!(
                "{} matched fastest ({}), within the spread of the default {} ({}): keep the \
                 default",
                best.engine,
                with_range(&best.busiest),
                pick.engine,
                with_range(&pick.busiest)
            ));
        }
        let idle: Vec<&str> = (0..engines.len())
            .filter(|i| !matched.contains(i))
            .map(|i| engines[i].engine.as_str())
            .collect();
        if !idle.is_empty() {
            lines.push(format!(
                "not considered: {} (never took over in most runs, so it matched nothing to compare)",
                idle.join(", ")
            ));
        }
    }
    if native.max > 0 {
        let against = if native_wins {
            "slower than native in every run"
        } else if pick.wall.below(native) {
            "faster than native in every run"
        } else {
            "within the spread of native"
        };
        lines.push(format!(
            "whole run under {}: {} against native {}'s {}, {against}",
            pick.engine,
            with_range(&pick.wall),
            mpi,
            with_range(native),
        ));
    }
    if verdict == Verdict::Use {
        let reference = |name: &str| {
            engines
                .iter()
                .find(|e| e.engine == name)
                .map(|e| format!("{name} {}", e.queues_max))
        };
        let references: Vec<String> = [BASELINE, PER_SOURCE]
            .into_iter()
            .filter(|name| *name != pick.engine)
            .filter_map(reference)
            .collect();
        let references = if references.is_empty() {
            String::new()
        } else {
            format!(" ({})", references.join(", "))
        };
        lines.push(format!(
            "memory: {} allocates up to {} queues per rank{references}",
            pick.engine, pick.queues_max,
        ));
    }
    Recommendation {
        verdict,
        variant: (verdict == Verdict::Use).then(|| pick.engine.clone()),
        considered: pick.engine.clone(),
        vars: variants[pick_at].vars(),
        matching_share: base.matching_share,
        saved_ns,
        saved_share,
        wall_vs_native: pick.wall_speedup,
        queues_max: pick.queues_max,
        lines,
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

    fn variant(engine: &str) -> Variant {
        Variant {
            engine: engine.to_string(),
            settings: Vec::new(),
        }
    }

    /// Two ranks; rank 0 does most of the matching.
    pub fn run(
        engine: &str,
        rank0_ns: u64,
        rank1_ns: u64,
        coll_ns: u64,
        queues: u64,
        wall_ns: u64,
    ) -> Run {
        let mut reports = reports(&[
            line(engine, 0, 2, rank0_ns, coll_ns, queues),
            line(engine, 1, 2, rank1_ns, 0, 2),
        ]);
        // Half a millisecond between MPI_Init and MPI_Finalize: matching is a share worth
        // a shim.
        reports.iter_mut().for_each(|r| r.wall_time_ns = 500_000);
        Run { reports, wall_ns }
    }

    fn compare(runs: Vec<(Variant, Vec<Run>)>, native: Vec<u64>, hosts: &[Host]) -> Comparison {
        Comparison::new(
            vec!["./demo".into()],
            "mpich",
            2,
            native,
            &runs,
            hosts,
            "col+pnp",
        )
    }

    pub fn fixture() -> Comparison {
        let runs = vec![
            (
                variant("list"),
                vec![
                    run("list", 8000, 1000, 400, 2, 110),
                    run("list", 9000, 1000, 300, 2, 100),
                    run("list", 7000, 1000, 200, 2, 120),
                ],
            ),
            (
                variant("rank"),
                vec![
                    run("rank", 2000, 1000, 100, 6, 90),
                    run("rank", 3000, 2000, 100, 6, 95),
                    run("rank", 1000, 1000, 100, 6, 100),
                ],
            ),
        ];
        compare(runs, vec![100, 80, 90], &[])
    }

    #[test]
    fn default_engines_and_references_come_first() {
        assert!(all_engines().starts_with(&["list".to_string(), "rank".to_string()]));
        assert_eq!(
            with_references(&[BASELINE, PER_SOURCE], vec!["bins".into(), "list".into()]),
            ["list", "rank", "bins"]
        );
        assert_eq!(default_engines("col+pnp"), ["list", "col+pnp", "bins"]);
        assert_eq!(default_engines("bins"), ["list", "bins"]);
    }

    #[test]
    fn variants_cross_engines_with_every_value() {
        let settings = vec![
            (
                "MATCHSHIM_COLL".to_string(),
                vec!["shim".into(), "native".into()],
            ),
            ("MATCHSHIM_K".to_string(), vec!["4".into()]),
        ];
        let all = variants(&["list".into(), "col".into()], &settings);
        let labels: Vec<String> = all.iter().map(Variant::label).collect();
        assert_eq!(
            labels,
            [
                "list coll=shim k=4",
                "list coll=native k=4",
                "col coll=shim k=4",
                "col coll=native k=4"
            ]
        );
        assert_eq!(all[3].vars()[0], ("MATCHSHIM_ENGINE".into(), "col".into()));
        assert_eq!(variants(&["list".into()], &[]), [variant("list")]);
    }

    #[test]
    fn medians_even_and_odd_and_spreads() {
        assert_eq!(median_u64(vec![5, 1, 3]), 3);
        assert_eq!(median_u64(vec![4, 1, 3, 2]), 2);
        assert_eq!(median_f64(vec![2.0, 1.0]), 1.5);
        let s = Spread::of(vec![30, 10, 20]);
        assert_eq!((s.median, s.min, s.max), (20, 10, 30));
        assert!(Spread::of(vec![1, 2]).below(&s) && !s.below(&Spread::of(vec![25])));
        assert_eq!(
            with_range(&Spread::of(vec![12_100_000, 11_800_000, 13_040_000])),
            "12.10 ms (11.8–13.0)"
        );
        assert_eq!(with_range(&Spread::of(vec![1500])), "1.5 us");
        assert_eq!(
            with_range(&Spread::of(vec![0, 0, 10_497])),
            "0.0 us (0.0–10.5)"
        );
    }

    #[test]
    fn speedups_are_baseline_medians_over_engine_medians() {
        let c = fixture();
        assert_eq!((c.repeat, c.native_wall.median, c.busiest_rank), (3, 90, 0));
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
        assert_eq!(
            (rank.wall.median, rank.wall.min, rank.wall.max),
            (95, 90, 100)
        );
        assert_eq!(rank.wall_speedup, Some(90.0 / 95.0));
        // Rank 0 under rank: 2100, 3100, 1100 ns of 0.5 ms.
        assert_eq!((rank.busiest.median, rank.busiest.min), (2100, 1100));
        assert_eq!(rank.busiest_wall_ns, 500_000);
        assert!((rank.matching_share - 2100.0 / 5e5).abs() < 1e-12);
    }

    #[test]
    fn no_collective_traffic_gives_no_collective_speedup() {
        let runs = vec![(variant("list"), vec![run("list", 10_000, 10, 0, 2, 5)])];
        let c = compare(runs, vec![5], &[]);
        assert_eq!(c.engines[0].speedup, [Some(1.0), None, Some(1.0)]);
        assert_eq!(c.engines[0].queues_vs_rank, None);
        assert_eq!(c.recommendation.verdict, Verdict::Use);
        assert!(
            c.recommendation.lines[1].starts_with("no engine matches measurably faster"),
            "{:?}",
            c.recommendation.lines
        );
    }

    #[test]
    fn the_recommendation_names_the_fastest_variant_with_its_numbers() {
        let c = fixture();
        let r = &c.recommendation;
        assert_eq!(r.variant.as_deref(), Some("rank"));
        assert_eq!(r.verdict, Verdict::Use);
        // list: rank 0 matched 8.4 us (median of 8.4, 9.3, 7.2) of 0.5 ms.
        assert!((r.matching_share - 8400.0 / 5e5).abs() < 1e-12);
        assert_eq!(r.saved_ns, 8400 - 2100);
        assert_eq!(r.queues_max, 6);
        assert_eq!(
            r.lines[0],
            "matching is 2 % of rank 0's time at most, under list (8.4 us of 500.0 us)"
        );
        assert!(r.lines[1].starts_with(
            "rank matches 4.00x faster than list there: 2.1 us (1.1–3.1) instead of 8.4 us \
             (7.2–9.3)"
        ));
        assert!(r.lines[2].starts_with("whole run under rank: 95 ns (90–100)"));
        assert!(
            r.lines[2].ends_with("within the spread of native"),
            "{}",
            r.lines[2]
        );
        assert_eq!(
            r.lines[3],
            "memory: rank allocates up to 6 queues per rank (list 2)"
        );
    }

    #[test]
    fn the_default_stays_unless_another_is_faster_in_every_run() {
        let runs = |col_pnp: [u64; 2]| {
            vec![
                (variant("list"), vec![run("list", 9000, 0, 0, 2, 100)]),
                (
                    variant("bins"),
                    vec![
                        run("bins", 1000, 0, 0, 9, 100),
                        run("bins", 1200, 0, 0, 9, 100),
                    ],
                ),
                (
                    variant("col+pnp"),
                    col_pnp.map(|t| run("col+pnp", t, 0, 0, 5, 100)).into(),
                ),
            ]
        };
        let c = compare(runs([1100, 1500]), vec![100], &[]);
        assert_eq!(c.recommendation.variant.as_deref(), Some("col+pnp"));
        assert!(c
            .recommendation
            .lines
            .iter()
            .any(|l| l.ends_with("keep the default")));
        let c = compare(runs([2000, 2500]), vec![100], &[]);
        assert_eq!(c.recommendation.variant.as_deref(), Some("bins"));
    }

    #[test]
    fn native_wins_where_every_shim_run_is_slower() {
        let hosts = [Host {
            name: "n1".into(),
            ranks: 4,
            cores: 2,
        }];
        let runs = vec![(
            variant("list"),
            vec![
                run("list", 10_000, 10, 0, 2, 500),
                run("list", 10_000, 10, 0, 2, 400),
            ],
        )];
        let c = compare(runs, vec![100, 120], &hosts);
        assert_eq!(c.recommendation.verdict, Verdict::SlowerThanNative);
        assert_eq!(c.recommendation.variant, None);
        assert!(c.recommendation.lines[2].ends_with("slower than native in every run"));
        assert_eq!(c.oversubscribed, hosts);
    }

    #[test]
    fn no_shim_where_mpi_matched_everything() {
        let mut runs = vec![
            (variant("list"), vec![run("list", 0, 0, 0, 2, 100)]),
            (variant("col+pnp"), vec![run("col+pnp", 0, 0, 0, 5, 90)]),
        ];
        // Each rank posted 20 receives to MPI.
        for report in runs.iter_mut().flat_map(|(_, r)| r[0].reports.iter_mut()) {
            report.comms = vec![matchshim_core::report::CommReport {
                delegated_receives: 20,
                ..Default::default()
            }];
        }
        let c = compare(runs, vec![100], &[]);
        let r = &c.recommendation;
        assert_eq!(
            (r.verdict, r.variant.as_deref()),
            (Verdict::NotNeeded, None)
        );
        assert_eq!(
            r.lines[0],
            "MPI matched every receive (40 in a run) in every run: queues never grew long \
             enough for the shim to take over"
        );
        assert_eq!(
            r.lines[1],
            "the shim's engine matched nothing under any variant"
        );
        assert!(
            r.lines[2].starts_with("whole run under col+pnp: 90 ns against native mpich's 100 ns")
        );
    }

    #[test]
    fn a_few_takeovers_in_no_measured_time_are_told_as_such() {
        let mut runs = vec![
            (variant("list"), vec![run("list", 0, 0, 0, 2, 100)]),
            (variant("bins"), vec![run("bins", 0, 0, 0, 9, 100)]),
        ];
        // bins took over once on rank 1 and matched 3 of 1000 receives.
        runs[1].1[0].reports[1].comms = vec![matchshim_core::report::CommReport {
            switches: 1,
            delegated_receives: 997,
            takeover_time_ns: 10,
            takeover_matches: 3,
            ..Default::default()
        }];
        let c = compare(runs, vec![100], &[]);
        let r = &c.recommendation;
        assert_eq!(r.verdict, Verdict::NotNeeded);
        assert_eq!(
            r.lines[0],
            "the shim matched at most 0.3 % of the receives (under bins), in no time measured on \
             rank 0"
        );
    }

    #[test]
    fn no_shim_where_matching_is_a_negligible_share() {
        // 4 us of matching in 0.5 ms is 0.8 %: even a shim that matched in no time would save
        // less than 1 %.
        let runs = vec![
            (variant("list"), vec![run("list", 4000, 0, 0, 2, 100)]),
            (variant("bins"), vec![run("bins", 100, 0, 0, 9, 100)]),
        ];
        let c = compare(runs, vec![100], &[]);
        let r = &c.recommendation;
        assert_eq!(r.verdict, Verdict::NotNeeded);
        assert_eq!(
            r.lines[0],
            "matching is 0.8 % of rank 0's time at most, under list (4.0 us of 500.0 us): \
             below 1 %, where no engine can save more than that"
        );
    }

    #[test]
    fn a_variant_that_matched_nothing_is_never_recommended() {
        // bins never took over (0 ns): it is not faster, it did nothing.
        let runs = vec![
            (variant("list"), vec![run("list", 90_000, 0, 0, 2, 100)]),
            (variant("bins"), vec![run("bins", 0, 0, 0, 9, 100)]),
            (
                variant("col+pnp"),
                vec![run("col+pnp", 30_000, 0, 0, 5, 100)],
            ),
        ];
        let c = compare(runs, vec![100], &[]);
        let r = &c.recommendation;
        assert_eq!(r.variant.as_deref(), Some("col+pnp"));
        assert!(
            r.lines
                .iter()
                .any(|l| l.starts_with("not considered: bins")),
            "{:?}",
            r.lines
        );
    }
}
