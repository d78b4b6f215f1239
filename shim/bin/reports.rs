//! Reading the per-rank JSON lines the shim writes at `MPI_Finalize`, and summing them over ranks.

use serde::{Deserialize, Deserializer, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Search {
    pub searches: u64,
    pub mean_depth: f64,
    pub max_depth: u64,
}

#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Traffic {
    pub prq: Search,
    pub umq: Search,
    pub matches: u64,
    pub unexpected: u64,
    pub match_time_ns: u64,
}

/// One rank's report; fields this version does not know are ignored.
#[derive(Clone, Debug, Deserialize)]
pub struct RankReport {
    pub engine: String,
    pub mpi: String,
    pub rank: usize,
    pub size: usize,
    pub point_to_point: Traffic,
    pub collective: Traffic,
    /// Per collective kind, where the shim reports it.
    #[serde(default, deserialize_with = "lenient_collectives")]
    pub collectives: BTreeMap<String, Traffic>,
    pub match_time_ns: u64,
    pub queues_max: u64,
    pub posted_left: u64,
    pub unexpected_left: u64,
}

/// Keeps the entries shaped like a traffic object; a future richer layout must not break reading.
fn lenient_collectives<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, Traffic>, D::Error> {
    let value = serde_json::Value::deserialize(d)?;
    let serde_json::Value::Object(map) = value else {
        return Ok(BTreeMap::new());
    };
    Ok(map
        .into_iter()
        .filter_map(|(name, v)| serde_json::from_value(v).ok().map(|t| (name, t)))
        .collect())
}

/// Which traffic a figure is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    PointToPoint,
    Collective,
    All,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::PointToPoint, Kind::Collective, Kind::All];

    pub fn label(self) -> &'static str {
        match self {
            Kind::PointToPoint => "point-to-point",
            Kind::Collective => "collective",
            Kind::All => "all",
        }
    }
}

impl RankReport {
    pub fn match_time(&self, kind: Kind) -> u64 {
        match kind {
            Kind::PointToPoint => self.point_to_point.match_time_ns,
            Kind::Collective => self.collective.match_time_ns,
            Kind::All => self.match_time_ns,
        }
    }
}

/// Parses a JSON Lines report; every line must come from this version of the shim.
pub fn parse_lines(text: &str, origin: &Path) -> Result<Vec<RankReport>, String> {
    let mut reports: Vec<RankReport> = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let at = || format!("{} line {}", origin.display(), n + 1);
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("{}: not JSON ({e})", at()))?;
        match value.get("matchshim").and_then(|v| v.as_str()) {
            Some(VERSION) => {}
            Some(other) => {
                return Err(format!(
                    "{}: report from matchshim {other}, but this is matchshim {VERSION}; \
                     run the program again with the shim built alongside this command",
                    at()
                ))
            }
            None => return Err(format!("{}: not a matchshim report", at())),
        }
        let report: RankReport =
            serde_json::from_value(value).map_err(|e| format!("{}: bad report ({e})", at()))?;
        if reports.iter().any(|r| r.rank == report.rank) {
            return Err(format!(
                "{}: a second report from rank {}",
                at(),
                report.rank
            ));
        }
        reports.push(report);
    }
    reports.sort_by_key(|r| r.rank);
    Ok(reports)
}

/// Every rank of a `ranks`-process run must have reported.
pub fn check_complete(reports: &[RankReport], ranks: usize, origin: &Path) -> Result<(), String> {
    let missing: Vec<String> = (0..ranks)
        .filter(|r| !reports.iter().any(|x| x.rank == *r))
        .map(|r| r.to_string())
        .collect();
    if missing.len() == ranks {
        return Err(format!(
            "no rank wrote a report to {}: did the program call MPI_Finalize, and does it load \
             MPI dynamically (LD_PRELOAD cannot reach a static build)?",
            origin.display()
        ));
    }
    if !missing.is_empty() {
        return Err(format!(
            "rank {} wrote no report to {}: did the program call MPI_Finalize there?",
            missing.join(", "),
            origin.display()
        ));
    }
    if let Some(r) = reports.iter().find(|r| r.size != ranks || r.rank >= ranks) {
        return Err(format!(
            "{}: rank {} reports {} ranks, but the run had {ranks}",
            origin.display(),
            r.rank,
            r.size
        ));
    }
    Ok(())
}

pub fn load(path: &Path) -> Result<Vec<RankReport>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse_lines(&text, path)
}

/// Searches of one queue over ranks: the mean is weighted by each rank's searches.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SearchSum {
    pub searches: u64,
    pub mean_depth: f64,
    pub max_depth: u64,
}

impl SearchSum {
    fn add(&mut self, s: &Search) {
        let total = self.mean_depth * self.searches as f64 + s.mean_depth * s.searches as f64;
        self.searches += s.searches;
        self.mean_depth = if self.searches == 0 {
            0.0
        } else {
            total / self.searches as f64
        };
        self.max_depth = self.max_depth.max(s.max_depth);
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TrafficSum {
    pub prq: SearchSum,
    pub umq: SearchSum,
    pub matches: u64,
    pub unexpected: u64,
    /// Engine time summed over ranks.
    pub match_time_ns: u64,
    /// Engine time of the busiest rank.
    pub busiest_match_time_ns: u64,
}

impl TrafficSum {
    fn add(&mut self, t: &Traffic) {
        self.prq.add(&t.prq);
        self.umq.add(&t.umq);
        self.matches += t.matches;
        self.unexpected += t.unexpected;
        self.match_time_ns += t.match_time_ns;
    }

    fn over<'a>(
        reports: impl Iterator<Item = &'a Traffic>,
        busiest: Option<&'a Traffic>,
    ) -> TrafficSum {
        let mut sum = TrafficSum::default();
        reports.for_each(|t| sum.add(t));
        sum.busiest_match_time_ns = busiest.map_or(0, |t| t.match_time_ns);
        sum
    }
}

#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Queues {
    /// Queues allocated at most, averaged over ranks.
    pub mean: f64,
    pub max: u64,
    pub max_rank: usize,
    /// Queues of the busiest rank.
    pub busiest: u64,
}

/// A run's reports summed over ranks.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub engine: String,
    pub mpi: String,
    pub ranks: usize,
    /// The rank that spent the most time matching.
    pub busiest_rank: usize,
    pub point_to_point: TrafficSum,
    pub collective: TrafficSum,
    pub collectives: BTreeMap<String, TrafficSum>,
    pub all: TrafficSum,
    pub queues: Queues,
    pub posted_left: u64,
    pub unexpected_left: u64,
}

/// The rank with the most engine time for `kind` (lowest rank on ties).
pub fn busiest_rank(reports: &[RankReport], kind: Kind) -> usize {
    reports
        .iter()
        .max_by(|a, b| {
            a.match_time(kind)
                .cmp(&b.match_time(kind))
                .then(b.rank.cmp(&a.rank))
        })
        .map_or(0, |r| r.rank)
}

impl Summary {
    /// Sums non-empty `reports` (sorted by rank, as `parse_lines` gives them).
    pub fn new(reports: &[RankReport]) -> Summary {
        let busiest_rank = busiest_rank(reports, Kind::All);
        let busiest = reports.iter().find(|r| r.rank == busiest_rank);
        let mut all = TrafficSum::over(
            reports
                .iter()
                .flat_map(|r| [&r.point_to_point, &r.collective]),
            None,
        );
        // Engine time of all traffic is reported on its own (it is not rounded per type).
        all.match_time_ns = reports.iter().map(|r| r.match_time_ns).sum();
        all.busiest_match_time_ns = busiest.map_or(0, |r| r.match_time_ns);
        let names: std::collections::BTreeSet<&String> =
            reports.iter().flat_map(|r| r.collectives.keys()).collect();
        let collectives = names
            .into_iter()
            .map(|name| {
                let sum = TrafficSum::over(
                    reports.iter().filter_map(|r| r.collectives.get(name)),
                    busiest.and_then(|r| r.collectives.get(name)),
                );
                (name.clone(), sum)
            })
            .collect();
        let (max_rank, max) = reports
            .iter()
            .map(|r| (r.rank, r.queues_max))
            .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)))
            .unwrap_or((0, 0));
        let first = reports.first();
        Summary {
            engine: first.map_or_else(String::new, |r| r.engine.clone()),
            mpi: first.map_or_else(String::new, |r| r.mpi.clone()),
            ranks: reports.len(),
            busiest_rank,
            point_to_point: TrafficSum::over(
                reports.iter().map(|r| &r.point_to_point),
                busiest.map(|r| &r.point_to_point),
            ),
            collective: TrafficSum::over(
                reports.iter().map(|r| &r.collective),
                busiest.map(|r| &r.collective),
            ),
            collectives,
            all,
            queues: Queues {
                mean: mean(reports.iter().map(|r| r.queues_max as f64)),
                max,
                max_rank,
                busiest: busiest.map_or(0, |r| r.queues_max),
            },
            posted_left: reports.iter().map(|r| r.posted_left).sum(),
            unexpected_left: reports.iter().map(|r| r.unexpected_left).sum(),
        }
    }

    /// Table rows in display order: point-to-point, collective (then each collective), all.
    pub fn rows(&self) -> Vec<(String, &TrafficSum)> {
        let mut rows = vec![
            (Kind::PointToPoint.label().to_string(), &self.point_to_point),
            (Kind::Collective.label().to_string(), &self.collective),
        ];
        rows.extend(
            self.collectives
                .iter()
                .map(|(name, t)| (format!("  {name}"), t)),
        );
        rows.push((Kind::All.label().to_string(), &self.all));
        rows
    }
}

pub fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

#[cfg(test)]
pub mod tests {
    use super::*;

    /// A report line as the shim writes it, with the given engine, rank and counters.
    pub fn line(
        engine: &str,
        rank: usize,
        size: usize,
        p2p_ns: u64,
        coll_ns: u64,
        queues: u64,
    ) -> String {
        format!(
            r#"{{"matchshim":"{VERSION}","mpi":"mpich","engine":"{engine}","rank":{rank},"size":{size},"thread_level":0,"communicators":1,"point_to_point":{{"prq":{{"searches":10,"mean_depth":{pm}.0,"max_depth":{px}}},"umq":{{"searches":30,"mean_depth":2.0,"max_depth":5}},"matches":20,"unexpected":4,"match_time_ns":{p2p_ns}}},"collective":{{"prq":{{"searches":0,"mean_depth":0.0,"max_depth":0}},"umq":{{"searches":0,"mean_depth":0.0,"max_depth":0}},"matches":0,"unexpected":0,"match_time_ns":{coll_ns}}},"match_time_ns":{all},"wall_time_ns":5000000,"queues":{queues},"queues_max":{queues},"posted_left":0,"unexpected_left":{rank}}}"#,
            pm = rank + 1,
            px = 10 * (rank + 1),
            all = p2p_ns + coll_ns,
        )
    }

    pub fn reports(lines: &[String]) -> Vec<RankReport> {
        parse_lines(&lines.join("\n"), Path::new("fixture")).unwrap()
    }

    #[test]
    fn parses_the_shims_line_and_ignores_unknown_fields() {
        let text =
            line("rank", 0, 1, 100, 0, 3).replace(r#""thread_level":0"#, r#""future":{"x":1}"#);
        let r = &reports(&[text])[0];
        assert_eq!(
            (r.engine.as_str(), r.rank, r.size, r.queues_max),
            ("rank", 0, 1, 3)
        );
        assert_eq!(
            r.point_to_point.prq,
            Search {
                searches: 10,
                mean_depth: 1.0,
                max_depth: 10
            }
        );
        assert!(r.collectives.is_empty());
    }

    #[test]
    fn reads_per_collective_counters_when_present_and_skips_odd_shapes() {
        let coll = r#"{"prq":{"searches":2,"mean_depth":3.0,"max_depth":4},"umq":{"searches":1,"mean_depth":1.0,"max_depth":1},"matches":2,"unexpected":1,"match_time_ns":70}"#;
        let text = line("rank", 0, 1, 100, 70, 3).replace(
            r#""match_time_ns":170"#,
            &format!(r#""match_time_ns":170,"collectives":{{"allreduce":{coll},"odd":[1,2]}}"#),
        );
        let r = &reports(&[text])[0];
        assert_eq!(r.collectives.keys().collect::<Vec<_>>(), ["allreduce"]);
        let summary = Summary::new(std::slice::from_ref(r));
        let rows: Vec<String> = summary.rows().into_iter().map(|(name, _)| name).collect();
        assert_eq!(rows, ["point-to-point", "collective", "  allreduce", "all"]);
        assert_eq!(summary.collectives["allreduce"].match_time_ns, 70);
    }

    #[test]
    fn another_version_is_refused_with_both_versions_named() {
        let text = line("rank", 0, 1, 1, 0, 1).replace(VERSION, "9.9.9");
        let err = parse_lines(&text, Path::new("r.jsonl")).unwrap_err();
        assert!(
            err.contains("9.9.9") && err.contains(VERSION) && err.contains("r.jsonl line 1"),
            "{err}"
        );
    }

    #[test]
    fn garbage_and_duplicates_are_refused() {
        assert!(parse_lines("{oops", Path::new("f"))
            .unwrap_err()
            .contains("not JSON"));
        assert!(parse_lines(r#"{"a":1}"#, Path::new("f"))
            .unwrap_err()
            .contains("not a matchshim"));
        let twice = [line("rank", 0, 2, 1, 0, 1), line("rank", 0, 2, 1, 0, 1)].join("\n");
        assert!(parse_lines(&twice, Path::new("f"))
            .unwrap_err()
            .contains("second report"));
    }

    #[test]
    fn missing_ranks_are_named() {
        let got = reports(&[line("rank", 0, 3, 1, 0, 1), line("rank", 2, 3, 1, 0, 1)]);
        let err = check_complete(&got, 3, Path::new("r")).unwrap_err();
        assert!(
            err.contains("rank 1 wrote no report") && err.contains("MPI_Finalize"),
            "{err}"
        );
        assert!(check_complete(&[], 2, Path::new("r"))
            .unwrap_err()
            .contains("no rank"));
        assert!(check_complete(&got[..1], 1, Path::new("r"))
            .unwrap_err()
            .contains("3 ranks"));
    }

    #[test]
    fn sums_over_ranks_with_weighted_means_and_the_busiest_rank() {
        let got = reports(&[
            line("list", 1, 3, 500, 0, 2),
            line("list", 0, 3, 100, 0, 2),
            line("list", 2, 3, 300, 10, 7),
        ]);
        assert_eq!(got.iter().map(|r| r.rank).collect::<Vec<_>>(), [0, 1, 2]);
        let s = Summary::new(&got);
        assert_eq!((s.ranks, s.busiest_rank), (3, 1));
        assert_eq!(s.point_to_point.prq.searches, 30);
        assert!((s.point_to_point.prq.mean_depth - 2.0).abs() < 1e-12); // (1+2+3)/3
        assert_eq!(s.point_to_point.prq.max_depth, 30);
        assert_eq!(
            (
                s.point_to_point.match_time_ns,
                s.point_to_point.busiest_match_time_ns
            ),
            (900, 500)
        );
        assert_eq!(
            (
                s.collective.match_time_ns,
                s.all.match_time_ns,
                s.all.busiest_match_time_ns
            ),
            (10, 910, 500)
        );
        assert_eq!(s.all.umq.searches, 90);
        assert_eq!(s.all.matches, 60);
        assert_eq!(
            s.queues,
            Queues {
                mean: 11.0 / 3.0,
                max: 7,
                max_rank: 2,
                busiest: 2
            }
        );
        assert_eq!(s.unexpected_left, 3);
    }
}
