//! The per-rank report: one JSON line that the shim writes at `MPI_Finalize` and the
//! `matchshim` command reads back. One schema for both sides.

use crate::matching::{SearchStats, TrafficStats};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The version every report carries; a report from another version is refused when read.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Searches of one queue.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Search {
    pub searches: u64,
    pub mean_depth: f64,
    pub max_depth: u64,
}

impl From<&SearchStats> for Search {
    fn from(s: &SearchStats) -> Self {
        Search {
            searches: s.searches,
            mean_depth: s.mean(),
            max_depth: s.depth_max,
        }
    }
}

/// One traffic type's matching on one rank.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Traffic {
    pub prq: Search,
    pub umq: Search,
    pub matches: u64,
    pub unexpected: u64,
    /// Time spent in the engine for this traffic.
    pub match_time_ns: u64,
}

impl Traffic {
    pub fn new(t: &TrafficStats, match_time_ns: u64) -> Self {
        Traffic {
            prq: (&t.prq).into(),
            umq: (&t.umq).into(),
            matches: t.matches,
            unexpected: t.unexpected,
            match_time_ns,
        }
    }
}

/// One collective on one rank: the calls the shim ran (`calls` and the counters after it) and
/// those it passed to MPI (`mpi_calls`).
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Collective {
    pub calls: u64,
    /// Calls MPI ran (`MATCHSHIM_COLL=auto` where the shim would not pay, `native`,
    /// inter-communicators).
    #[serde(default)]
    pub mpi_calls: u64,
    pub nonblocking_calls: u64,
    /// Messages this rank received in these calls: collective elements matched.
    pub matched: u64,
    pub bytes_received: u64,
    pub messages_sent: u64,
    pub bytes_sent: u64,
}

impl Collective {
    pub fn add(&mut self, other: &Collective) {
        self.calls += other.calls;
        self.mpi_calls += other.mpi_calls;
        self.nonblocking_calls += other.nonblocking_calls;
        self.matched += other.matched;
        self.bytes_received += other.bytes_received;
        self.messages_sent += other.messages_sent;
        self.bytes_sent += other.bytes_sent;
    }
}

/// Who matched one communicator's messages on one rank, and for how long.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct CommReport {
    /// The communicator's number on this rank, in the order the shim first saw them.
    pub id: u64,
    pub size: usize,
    /// Switches between MPI's matching and the shim's.
    pub switches: u64,
    /// While MPI matched: the time, and the receives posted to MPI.
    pub delegated_time_ns: u64,
    pub delegated_receives: u64,
    /// While the shim matched: the time, and the matches its engine made.
    pub takeover_time_ns: u64,
    pub takeover_matches: u64,
    /// The MPI-4 assertions its info makes (`mpi_assert_*` keys set to true).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<String>,
}

impl CommReport {
    /// Adds another communicator's counters (for totals).
    pub fn add(&mut self, other: &CommReport) {
        self.switches += other.switches;
        self.delegated_time_ns += other.delegated_time_ns;
        self.delegated_receives += other.delegated_receives;
        self.takeover_time_ns += other.takeover_time_ns;
        self.takeover_matches += other.takeover_matches;
    }
}

/// Where the `gpu` engine matched on one rank.
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Offload {
    /// `device` (kernels on an NVIDIA GPU for big bursts and long scans) or `cpu`.
    pub path: String,
    /// The device, or why there is none.
    pub detail: String,
    pub kernel_launches: u64,
}

/// One rank's report. Fields a reader does not know are ignored, so later versions may add some.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
pub struct RankReport {
    pub matchshim: String,
    pub mpi: String,
    pub engine: String,
    pub rank: usize,
    pub size: usize,
    pub thread_level: i32,
    pub communicators: u64,
    pub point_to_point: Traffic,
    pub collective: Traffic,
    /// Time spent in the engine, all traffic.
    pub match_time_ns: u64,
    /// Time from `MPI_Init` to `MPI_Finalize`.
    pub wall_time_ns: u64,
    pub queues: u64,
    pub queues_max: u64,
    pub posted_left: u64,
    pub unexpected_left: u64,
    /// Who ran the collectives: `shim` or `native`.
    pub coll: String,
    /// Per collective the shim ran, by name.
    #[serde(default)]
    pub collectives: BTreeMap<String, Collective>,
    /// `MATCHSHIM_TAKEOVER` of the run: `auto`, `always` or `flip:N`.
    #[serde(default)]
    pub takeover: String,
    /// Every communicator that had traffic, with who matched it.
    #[serde(default)]
    pub comms: Vec<CommReport>,
    /// The `gpu` engine's path; absent for the other engines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<Offload>,
}

impl RankReport {
    /// The report as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a report always serializes");
        line.push('\n');
        line
    }
}

/// Parses a JSON Lines report; every line must come from this version of the shim. The
/// reports come back sorted by rank.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> RankReport {
        let mut stats = TrafficStats::default();
        stats.prq.record(3);
        stats.umq.record(1);
        stats.matches = 2;
        let mut collectives = BTreeMap::new();
        collectives.insert(
            "allreduce".to_string(),
            Collective {
                calls: 4,
                mpi_calls: 2,
                nonblocking_calls: 1,
                matched: 8,
                bytes_received: 64,
                messages_sent: 8,
                bytes_sent: 64,
            },
        );
        RankReport {
            matchshim: VERSION.to_string(),
            mpi: "mpich".to_string(),
            engine: "col+pnp".to_string(),
            rank: 1,
            size: 2,
            thread_level: 3,
            communicators: 2,
            point_to_point: Traffic::new(&stats, 120),
            collective: Traffic::new(&TrafficStats::default(), 30),
            match_time_ns: 150,
            wall_time_ns: 1_000_000,
            queues: 5,
            queues_max: 7,
            posted_left: 0,
            unexpected_left: 1,
            coll: "shim".to_string(),
            collectives,
            takeover: "auto".to_string(),
            comms: vec![CommReport {
                id: 0,
                size: 2,
                switches: 3,
                delegated_time_ns: 400,
                delegated_receives: 9,
                takeover_time_ns: 600,
                takeover_matches: 2,
                assertions: vec!["mpi_assert_no_any_source".to_string()],
            }],
            gpu: None,
        }
    }

    #[test]
    fn a_written_report_reads_back_equal() {
        let report = sample();
        let line = report.to_line();
        assert!(line.ends_with('\n') && line.matches('\n').count() == 1);
        let back = parse_lines(&line, Path::new("r.jsonl")).unwrap();
        assert_eq!(back, vec![report]);
    }

    #[test]
    fn unknown_fields_are_ignored_and_collectives_may_be_absent() {
        let mut value: serde_json::Value = serde_json::from_str(&sample().to_line()).unwrap();
        let object = value.as_object_mut().unwrap();
        object.remove("collectives");
        assert!(
            object.get("gpu").is_none(),
            "absent unless the engine is gpu"
        );
        object.insert("added_later".into(), serde_json::json!({"x": 1}));
        let back = parse_lines(&value.to_string(), Path::new("r")).unwrap();
        assert!(back[0].collectives.is_empty() && back[0].gpu.is_none());
        assert_eq!(back[0].engine, "col+pnp");
    }

    #[test]
    fn gpu_path_reads_back() {
        let report = RankReport {
            gpu: Some(Offload {
                path: "cpu".to_string(),
                detail: "no CUDA driver".to_string(),
                kernel_launches: 0,
            }),
            ..sample()
        };
        let back = parse_lines(&report.to_line(), Path::new("r")).unwrap();
        assert_eq!(back, vec![report]);
    }

    #[test]
    fn another_version_is_refused_with_both_versions_named() {
        let line = sample().to_line().replace(VERSION, "9.9.9");
        let err = parse_lines(&line, Path::new("r.jsonl")).unwrap_err();
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
        let twice = sample().to_line().repeat(2);
        assert!(parse_lines(&twice, Path::new("f"))
            .unwrap_err()
            .contains("second report"));
    }
}
