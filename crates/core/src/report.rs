//! The per-rank report: one JSON line that the shim writes at `MPI_Finalize` and the
//! `matchshim` command reads back. One schema for both sides.

use crate::config::Verbosity;
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
    /// While MPI matched beside unexpected messages the shim kept from a takeover (its
    /// matches of those count among `takeover_matches`).
    #[serde(default)]
    pub held_time_ns: u64,
    /// Takeovers timed calls asked for that a warm probe of MPI's queue found shallow, so not
    /// made.
    #[serde(default)]
    pub unconfirmed_takeovers: u64,
    /// The MPI-4 assertions its info makes (`mpi_assert_*` keys set to true).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub assertions: Vec<String>,
}

/// Messages the shim drained out of MPI and handed to its engines together, one burst per
/// drain that found any.
#[derive(Clone, Copy, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Bursts {
    pub count: u64,
    pub messages: u64,
    /// Messages per burst.
    pub mean: f64,
    pub largest: u64,
}

impl Bursts {
    pub fn record(&mut self, messages: usize) {
        self.count += 1;
        self.messages += messages as u64;
        self.largest = self.largest.max(messages as u64);
        self.mean = self.messages as f64 / self.count as f64;
    }

    pub fn add(&mut self, other: &Bursts) {
        self.count += other.count;
        self.messages += other.messages;
        self.largest = self.largest.max(other.largest);
        self.mean = if self.count == 0 {
            0.0
        } else {
            self.messages as f64 / self.count as f64
        };
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
    /// Bursts the kernels matched (on the device, or in their host build where there is none).
    #[serde(default)]
    pub kernel_bursts: u64,
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
    /// Communicators the shim registered: a receive, probe or collective of the shim's needed
    /// them, or they assert something (one the shim never needed is not counted).
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
    /// Arrivals drained out of MPI and matched as bursts while the shim matched.
    #[serde(default)]
    pub bursts: Bursts,
}

impl RankReport {
    /// The report as one line of JSON, newline included.
    pub fn to_line(&self) -> String {
        let mut line = serde_json::to_string(self).expect("a report always serializes");
        line.push('\n');
        line
    }
}

/// A duration with a unit that keeps three significant figures readable.
pub fn duration(ns: u64) -> String {
    let ns = ns as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} us", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// `part` of `whole` as a percentage that reads true at its edges: 100 % only when nothing is
/// missing, 0 % only for nothing.
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 || part == 0 {
        return "0 %".into();
    }
    if part == whole {
        return "100 %".into();
    }
    let p = part as f64 * 100.0 / whole as f64;
    // Rounded down past 99 and up below 1, so 99.97 % does not read as 100 % nor 0.02 % as 0.
    if p >= 99.0 {
        let tenths = (p * 10.0).floor() / 10.0;
        if tenths >= 100.0 {
            "99.9 %".into()
        } else {
            format!("{tenths:.1} %")
        }
    } else if p < 1.0 {
        format!("{:.1} %", ((p * 10.0).ceil() / 10.0).min(0.9))
    } else {
        format!("{p:.0} %")
    }
}

/// Takeovers of one communicator on one rank: switches to the shim (every second switch goes
/// back to MPI), or one for a communicator the shim held from the start (`always`).
pub fn takeovers(c: &CommReport) -> u64 {
    if c.switches == 0 {
        u64::from(c.takeover_time_ns > 0)
    } else {
        c.switches.div_ceil(2)
    }
}

/// Who matched a run's receives, over its ranks: MPI, while a communicator was delegated, or
/// the shim's engine, while the shim had taken it over. The numbers behind the sentence a
/// report leads with and behind rank 0's line at `MPI_Finalize`; the same sums whether made from
/// report lines or by a reduction over the ranks ([`Tally::words`], [`Tally::from_words`]).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq)]
pub struct Tally {
    pub ranks: u64,
    /// Receives the ranks posted to MPI while delegated: MPI matched them.
    pub mpi_matched: u64,
    /// Messages the engine matched while the shim had taken over (both traffic types).
    pub shim_matched: u64,
    pub takeovers: u64,
    /// The longest one communicator stayed taken over on one rank.
    pub longest_takeover_ns: u64,
    /// The longest rank's time from `MPI_Init` to `MPI_Finalize`.
    pub wall_time_ns: u64,
    /// The engine's counters, both traffic types (for `MATCHSHIM_VERBOSE=1`).
    pub unexpected: u64,
    pub prq_searches: u64,
    pub prq_depth_total: u64,
    pub prq_depth_max: u64,
    pub umq_searches: u64,
    pub umq_depth_total: u64,
    pub umq_depth_max: u64,
    pub match_time_ns: u64,
    pub queues_max: u64,
    pub unexpected_left: u64,
}

/// Counters summed over ranks, then those maxed, in the order of [`Tally::words`].
const SUMMED: usize = 11;
const MAXED: usize = 5;

impl Tally {
    /// One rank's share.
    pub fn of(r: &RankReport) -> Tally {
        let (p, c) = (&r.point_to_point, &r.collective);
        let depth_total = |s: &Search| (s.mean_depth * s.searches as f64).round() as u64;
        Tally {
            ranks: 1,
            mpi_matched: r.comms.iter().map(|c| c.delegated_receives).sum(),
            shim_matched: r.comms.iter().map(|c| c.takeover_matches).sum(),
            takeovers: r.comms.iter().map(takeovers).sum(),
            longest_takeover_ns: r
                .comms
                .iter()
                .map(|c| c.takeover_time_ns)
                .max()
                .unwrap_or(0),
            wall_time_ns: r.wall_time_ns,
            unexpected: p.unexpected + c.unexpected,
            prq_searches: p.prq.searches + c.prq.searches,
            prq_depth_total: depth_total(&p.prq) + depth_total(&c.prq),
            prq_depth_max: p.prq.max_depth.max(c.prq.max_depth),
            umq_searches: p.umq.searches + c.umq.searches,
            umq_depth_total: depth_total(&p.umq) + depth_total(&c.umq),
            umq_depth_max: p.umq.max_depth.max(c.umq.max_depth),
            match_time_ns: r.match_time_ns,
            queues_max: r.queues_max,
            unexpected_left: r.unexpected_left,
        }
    }

    /// Every rank's share, summed (or maxed).
    pub fn over(reports: &[RankReport]) -> Tally {
        let mut sums = [0u64; SUMMED];
        let mut maxes = [0u64; MAXED];
        for r in reports {
            let (s, m) = Tally::of(r).words();
            sums.iter_mut().zip(s).for_each(|(a, b)| *a += b);
            maxes.iter_mut().zip(m).for_each(|(a, b)| *a = (*a).max(b));
        }
        Tally::from_words(&sums, &maxes)
    }

    /// The counters to sum over ranks and those to take the maximum of, for a reduction.
    pub fn words(&self) -> ([u64; SUMMED], [u64; MAXED]) {
        (
            [
                self.ranks,
                self.mpi_matched,
                self.shim_matched,
                self.takeovers,
                self.unexpected,
                self.prq_searches,
                self.prq_depth_total,
                self.umq_searches,
                self.umq_depth_total,
                self.match_time_ns,
                self.unexpected_left,
            ],
            [
                self.longest_takeover_ns,
                self.wall_time_ns,
                self.prq_depth_max,
                self.umq_depth_max,
                self.queues_max,
            ],
        )
    }

    /// The tally of reduced [`Tally::words`]; missing words read as 0.
    pub fn from_words(sums: &[u64], maxes: &[u64]) -> Tally {
        let s = |i: usize| sums.get(i).copied().unwrap_or(0);
        let m = |i: usize| maxes.get(i).copied().unwrap_or(0);
        Tally {
            ranks: s(0),
            mpi_matched: s(1),
            shim_matched: s(2),
            takeovers: s(3),
            unexpected: s(4),
            prq_searches: s(5),
            prq_depth_total: s(6),
            umq_searches: s(7),
            umq_depth_total: s(8),
            match_time_ns: s(9),
            unexpected_left: s(10),
            longest_takeover_ns: m(0),
            wall_time_ns: m(1),
            prq_depth_max: m(2),
            umq_depth_max: m(3),
            queues_max: m(4),
        }
    }

    /// The shim took matching over somewhere.
    pub fn took_over(&self) -> bool {
        self.takeovers > 0
    }

    /// What happened, in one sentence with its numbers.
    pub fn sentence(&self) -> String {
        let received = self.mpi_matched + self.shim_matched;
        if !self.took_over() {
            if received == 0 {
                return "no receive was posted: the shim had nothing to do here".into();
            }
            return format!(
                "MPI matched all {received} receives; queues never grew: the shim had nothing \
                 to do here"
            );
        }
        let times = if self.takeovers == 1 { "once" } else { "times" };
        let count = if self.takeovers == 1 {
            String::new()
        } else {
            format!("{} ", self.takeovers)
        };
        let matched = match self.shim_matched {
            0 => "matched nothing".to_string(),
            1 => "matched 1 message".to_string(),
            n => format!("matched {n} messages"),
        };
        let share = if self.wall_time_ns == 0 {
            String::new()
        } else {
            format!(
                " ({} of the run)",
                percent(
                    self.longest_takeover_ns.min(self.wall_time_ns),
                    self.wall_time_ns
                )
            )
        };
        format!(
            "MPI matched {} of {received} receives; the shim took over {count}{times} and {matched}, \
             holding a communicator for at most {}{share}",
            percent(self.mpi_matched, received),
            duration(self.longest_takeover_ns),
        )
    }

    /// Rank 0's line at `MPI_Finalize` (`None`: nothing to say at this verbosity).
    pub fn finalize_line(
        &self,
        engine: &str,
        takeover: &str,
        verbose: Verbosity,
    ) -> Option<String> {
        match verbose {
            Verbosity::Quiet => return None,
            Verbosity::Takeovers if !self.took_over() => return None,
            _ => {}
        }
        let ranks = if self.ranks == 1 { "rank" } else { "ranks" };
        let mut line = format!(
            "matchshim ({engine}, takeover {takeover}, {} {ranks}): {}",
            self.ranks,
            self.sentence()
        );
        if verbose == Verbosity::Always {
            let mean = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
            line.push_str(&format!(
                "; engine: unexpected={} prq_depth_mean={:.2} prq_depth_max={} \
                 umq_depth_mean={:.2} umq_depth_max={} match_time={} queues_max={} \
                 unexpected_left={}",
                self.unexpected,
                mean(self.prq_depth_total, self.prq_searches),
                self.prq_depth_max,
                mean(self.umq_depth_total, self.umq_searches),
                self.umq_depth_max,
                duration(self.match_time_ns),
                self.queues_max,
                self.unexpected_left
            ));
        }
        Some(line)
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
                held_time_ns: 0,
                unconfirmed_takeovers: 1,
                assertions: vec!["mpi_assert_no_any_source".to_string()],
            }],
            gpu: None,
            bursts: Bursts {
                count: 2,
                messages: 5,
                mean: 2.5,
                largest: 4,
            },
        }
    }

    fn comm(delegated: u64, switches: u64, takeover_ns: u64, matches: u64) -> CommReport {
        CommReport {
            id: 0,
            size: 2,
            switches,
            delegated_time_ns: 1000,
            delegated_receives: delegated,
            takeover_time_ns: takeover_ns,
            takeover_matches: matches,
            held_time_ns: 0,
            unconfirmed_takeovers: 0,
            assertions: Vec::new(),
        }
    }

    #[test]
    fn a_run_mpi_matched_alone_says_so_and_rank_0_stays_quiet() {
        let mut a = sample();
        a.comms = vec![comm(999, 0, 0, 0)];
        let mut b = sample();
        b.rank = 0;
        b.comms = vec![comm(1, 0, 0, 0)];
        let t = Tally::over(&[a, b]);
        assert_eq!((t.ranks, t.mpi_matched, t.takeovers), (2, 1000, 0));
        assert_eq!(
            t.sentence(),
            "MPI matched all 1000 receives; queues never grew: the shim had nothing to do here"
        );
        assert_eq!(
            t.finalize_line("col+pnp", "auto", Verbosity::Takeovers),
            None
        );
        let line = t
            .finalize_line("col+pnp", "auto", Verbosity::Always)
            .unwrap();
        assert!(
            line.starts_with(
                "matchshim (col+pnp, takeover auto, 2 ranks): MPI matched all 1000 receives;"
            ) && line.contains("nothing to do here; engine: unexpected=0 "),
            "{line}"
        );
        assert_eq!(t.finalize_line("col+pnp", "auto", Verbosity::Quiet), None);
    }

    #[test]
    fn takeovers_are_counted_and_told_with_their_share_of_the_run() {
        let mut a = sample();
        // Taken over, back, taken over again (and held to the end): two takeovers.
        a.comms = vec![comm(9997, 3, 250_000_000, 3), comm(0, 0, 0, 0)];
        a.wall_time_ns = 1_000_000_000;
        let t = Tally::over(&[a.clone()]);
        assert_eq!((t.takeovers, t.shim_matched), (2, 3));
        assert_eq!(
            t.sentence(),
            "MPI matched 99.9 % of 10000 receives; the shim took over 2 times and matched 3 \
             messages, holding a communicator for at most 250.00 ms (25 % of the run)"
        );
        assert!(t
            .finalize_line("bins", "auto", Verbosity::Takeovers)
            .unwrap()
            .starts_with("matchshim (bins, takeover auto, 1 rank): MPI matched 99.9 %"));
        // `always`: held from the start, no switch.
        a.comms = vec![comm(0, 0, 5, 1)];
        let t = Tally::over(&[a]);
        assert_eq!(t.takeovers, 1);
        assert!(t.sentence().starts_with(
            "MPI matched 0 % of 1 receives; the shim took over once and matched 1 message"
        ));
    }

    #[test]
    fn a_reduction_of_the_words_gives_the_sums() {
        let mut a = sample();
        a.comms = vec![comm(10, 2, 70, 4)];
        let mut b = sample();
        b.rank = 0;
        b.comms = vec![comm(5, 1, 90, 1)];
        b.queues_max = 40;
        let (sa, ma) = Tally::of(&a).words();
        let (sb, mb) = Tally::of(&b).words();
        let sums: Vec<u64> = sa.iter().zip(sb).map(|(x, y)| x + y).collect();
        let maxes: Vec<u64> = ma.iter().zip(mb).map(|(x, y)| (*x).max(y)).collect();
        assert_eq!(Tally::from_words(&sums, &maxes), Tally::over(&[a, b]));
    }

    #[test]
    fn percentages_read_true_at_their_edges() {
        assert_eq!(percent(0, 0), "0 %");
        assert_eq!(percent(5, 5), "100 %");
        assert_eq!(percent(99_999, 100_000), "99.9 %");
        assert_eq!(percent(1, 100_000), "0.1 %");
        assert_eq!(percent(1, 3), "33 %");
        assert_eq!(duration(12_534_917), "12.53 ms");
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
        object.remove("bursts");
        assert!(
            object.get("gpu").is_none(),
            "absent unless the engine is gpu"
        );
        object.insert("added_later".into(), serde_json::json!({"x": 1}));
        let back = parse_lines(&value.to_string(), Path::new("r")).unwrap();
        assert!(back[0].collectives.is_empty() && back[0].gpu.is_none());
        assert_eq!(back[0].bursts, Bursts::default());
        assert_eq!(back[0].engine, "col+pnp");
    }

    #[test]
    fn gpu_path_reads_back() {
        let report = RankReport {
            gpu: Some(Offload {
                path: "cpu".to_string(),
                detail: "no CUDA driver".to_string(),
                kernel_launches: 0,
                kernel_bursts: 3,
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
