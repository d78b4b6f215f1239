//! Reading the per-rank JSON lines the shim writes at `MPI_Finalize`, and summing them over ranks.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

pub use matchshim_core::report::{
    parse_lines, takeovers, Collective, RankReport, Search, Tally, Traffic, VERSION,
};

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

impl Kind {
    /// The engine time a rank spent on this traffic.
    pub fn match_time(self, r: &RankReport) -> u64 {
        match self {
            Kind::PointToPoint => r.point_to_point.match_time_ns,
            Kind::Collective => r.collective.match_time_ns,
            Kind::All => r.match_time_ns,
        }
    }
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

/// Who matched one communicator, over the ranks that reported it (by the number each rank gave
/// it: the order the shim first saw them there; 0 is `MPI_COMM_WORLD` everywhere).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct CommSum {
    pub id: u64,
    pub size: usize,
    pub ranks: usize,
    /// Receives posted to MPI while delegated.
    pub mpi_matched: u64,
    pub takeovers: u64,
    /// Messages the engine matched while taken over.
    pub shim_matched: u64,
    /// Takeovers the timed calls asked for that a warm probe of MPI's queue declined.
    pub declined: u64,
    /// The longest time in each mode on one rank.
    pub delegated_time_ns: u64,
    pub takeover_time_ns: u64,
}

impl CommSum {
    /// Every communicator of `reports`, by number.
    pub fn over(reports: &[RankReport]) -> Vec<CommSum> {
        let mut by_id: BTreeMap<u64, CommSum> = BTreeMap::new();
        for c in reports.iter().flat_map(|r| &r.comms) {
            let sum = by_id.entry(c.id).or_insert_with(|| CommSum {
                id: c.id,
                ..CommSum::default()
            });
            sum.size = sum.size.max(c.size);
            sum.ranks += 1;
            sum.mpi_matched += c.delegated_receives;
            sum.takeovers += takeovers(c);
            sum.shim_matched += c.takeover_matches;
            sum.declined += c.unconfirmed_takeovers;
            sum.delegated_time_ns = sum.delegated_time_ns.max(c.delegated_time_ns);
            sum.takeover_time_ns = sum.takeover_time_ns.max(c.takeover_time_ns);
        }
        by_id.into_values().collect()
    }
}

/// A run's reports summed over ranks.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Summary {
    pub engine: String,
    pub mpi: String,
    pub ranks: usize,
    /// `MATCHSHIM_TAKEOVER` of the run.
    pub takeover: String,
    /// Who matched the receives: MPI or the shim, over all ranks.
    pub tally: Tally,
    /// The same per communicator.
    pub comms: Vec<CommSum>,
    /// The rank that spent the most time matching.
    pub busiest_rank: usize,
    pub point_to_point: TrafficSum,
    pub collective: TrafficSum,
    /// Per collective the shim ran, summed over ranks.
    pub collectives: BTreeMap<String, Collective>,
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
            kind.match_time(a)
                .cmp(&kind.match_time(b))
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
        let mut collectives: BTreeMap<String, Collective> = BTreeMap::new();
        for (name, c) in reports.iter().flat_map(|r| &r.collectives) {
            collectives.entry(name.clone()).or_default().add(c);
        }
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
            takeover: first.map_or_else(String::new, |r| r.takeover.clone()),
            tally: Tally::over(reports),
            comms: CommSum::over(reports),
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

    /// Table rows in display order: point-to-point, collective, all.
    pub fn rows(&self) -> [(&'static str, &TrafficSum); 3] {
        [
            (Kind::PointToPoint.label(), &self.point_to_point),
            (Kind::Collective.label(), &self.collective),
            (Kind::All.label(), &self.all),
        ]
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
        let search = |searches, mean_depth, max_depth| Search {
            searches,
            mean_depth,
            max_depth,
        };
        RankReport {
            matchshim: VERSION.to_string(),
            mpi: "mpich".to_string(),
            engine: engine.to_string(),
            rank,
            size,
            thread_level: 0,
            communicators: 1,
            point_to_point: Traffic {
                prq: search(10, (rank + 1) as f64, 10 * (rank as u64 + 1)),
                umq: search(30, 2.0, 5),
                matches: 20,
                unexpected: 4,
                match_time_ns: p2p_ns,
            },
            collective: Traffic {
                match_time_ns: coll_ns,
                ..Traffic::default()
            },
            match_time_ns: p2p_ns + coll_ns,
            wall_time_ns: 5_000_000,
            queues,
            queues_max: queues,
            posted_left: 0,
            unexpected_left: rank as u64,
            coll: "shim".to_string(),
            collectives: BTreeMap::new(),
            takeover: "auto".to_string(),
            comms: Vec::new(),
            gpu: None,
            bursts: Default::default(),
        }
        .to_line()
    }

    pub fn reports(lines: &[String]) -> Vec<RankReport> {
        parse_lines(&lines.join("\n"), Path::new("fixture")).unwrap()
    }

    #[test]
    fn per_collective_counters_are_summed_over_ranks() {
        let with = |rank, calls| {
            let mut r = reports(&[line("rank", rank, 2, 100, 70, 3)]).remove(0);
            let c = Collective {
                calls,
                mpi_calls: calls + 1,
                matched: 2 * calls,
                bytes_sent: 8 * calls,
                ..Collective::default()
            };
            r.collectives.insert("allreduce".to_string(), c);
            r.to_line()
        };
        let s = Summary::new(&reports(&[with(0, 3), with(1, 4)]));
        let sum = &s.collectives["allreduce"];
        assert_eq!((sum.calls, sum.matched, sum.bytes_sent), (7, 14, 56));
        assert_eq!(sum.mpi_calls, 9);
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
