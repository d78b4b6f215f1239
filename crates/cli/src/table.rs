//! Plain-text tables for the terminal.

use crate::compare::{with_range, Comparison, EngineResult, Verdict};
use crate::reports::{CommSum, Kind, RankReport, Search, Summary, Tally};
use crate::runs::Meta;

/// Aligns `rows` under `header`: the first column to the left, the others to the right.
pub fn render(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let mut out = String::new();
        for (i, (cell, w)) in cells.zip(&widths).enumerate() {
            if i == 0 {
                out.push_str(&format!("{cell:<w$}"));
            } else {
                out.push_str(&format!("  {cell:>w$}"));
            }
        }
        out.trim_end().to_string() + "\n"
    };
    let mut out = line(&mut header.iter().copied());
    for row in rows {
        out.push_str(&line(&mut row.iter().map(String::as_str)));
    }
    out
}

pub use matchshim_core::report::duration;

pub fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{v:.2}x"))
}

fn depth(searches: u64, mean: f64) -> String {
    if searches == 0 {
        "-".to_string()
    } else {
        format!("{mean:.2}")
    }
}

fn depth_max(searches: u64, max: u64) -> String {
    if searches == 0 {
        "-".to_string()
    } else {
        max.to_string()
    }
}

/// Communicators shown one by one; the others, which MPI matched alone, share one line.
const COMM_ROWS: usize = 6;

/// The report of one run: what happened in one sentence, who matched each communicator, then
/// what the shim's engine did while it matched, the collectives it ran, and its queues.
pub fn summary(s: &Summary, meta: Option<&Meta>, origin: &str) -> String {
    let mut out = format!("{origin}:");
    if let Some(meta) = meta {
        out.push_str(&format!(" {},", meta.command.join(" ")));
    }
    out.push_str(&format!(
        " engine {}, takeover {}, {}, {} ranks",
        s.engine, s.takeover, s.mpi, s.ranks
    ));
    if let Some(meta) = meta {
        out.push_str(&format!(", wall {}", duration(meta.wall_time_ns)));
    }
    out.push('\n');
    out.push_str(&s.tally.sentence());
    out.push_str(".\n");
    out.push_str(&who_matched(s));
    let t = &s.tally;
    if s.all.matches == 0 && s.all.prq.searches + s.all.umq.searches == 0 {
        out.push_str(&format!(
            "\nthe shim's engine ({}) matched nothing\n",
            s.engine
        ));
    } else {
        out.push_str(&format!(
            "\nthe shim's engine ({}) while the shim matched, summed over ranks:\n",
            s.engine
        ));
        out.push_str(&engine_table(s));
        let q = &s.queues;
        out.push_str(&format!(
            "queues allocated per rank: mean {:.1}, max {} (rank {}); left at MPI_Finalize: {} \
             posted receives, {} unexpected messages\n",
            q.mean, q.max, q.max_rank, s.posted_left, s.unexpected_left
        ));
    }
    if !s.collectives.is_empty() {
        out.push_str("\ncollectives the shim ran on its own point-to-point, summed over ranks:\n");
        out.push_str(&collectives(s));
    }
    if t.took_over() && t.shim_matched < 2 * t.takeovers {
        out.push_str(
            "\nnote: the takeovers matched about one message each: a few receive calls looked \
             deep (a busy machine can make them look so) and the shim gave matching back once \
             it found its queues short\n",
        );
    }
    let declined: u64 = s.comms.iter().map(|c| c.declined).sum();
    if declined > 0 {
        out.push_str(&format!(
            "\nnote: {declined} takeover{} that slow receive calls asked for did not happen: a \
             warm probe found MPI's queues short (a busy machine, or a program computing \
             between its calls, slows MPI's calls)\n",
            if declined == 1 { "" } else { "s" }
        ));
    }
    out
}

/// A row per communicator: receives MPI matched, takeovers, what the shim matched, time in
/// each mode.
fn who_matched(s: &Summary) -> String {
    if s.comms.is_empty() {
        return String::new();
    }
    let header = [
        "communicator",
        "size",
        "MPI matched",
        "takeovers",
        "shim matched",
        "time with MPI",
        "with the shim",
    ];
    let shown = |c: &&CommSum| c.id == 0 || c.takeovers > 0;
    let mut listed: Vec<&CommSum> = s.comms.iter().filter(shown).collect();
    let mut rest: Vec<&CommSum> = s.comms.iter().filter(|c| !shown(c)).collect();
    if listed.len() + rest.len() <= COMM_ROWS {
        listed.append(&mut rest);
        listed.sort_by_key(|c| c.id);
    }
    let rows: Vec<Vec<String>> = listed
        .iter()
        .map(|c| {
            vec![
                if c.id == 0 {
                    "0 (world)".to_string()
                } else {
                    c.id.to_string()
                },
                c.size.to_string(),
                c.mpi_matched.to_string(),
                c.takeovers.to_string(),
                c.shim_matched.to_string(),
                duration(c.delegated_time_ns),
                duration(c.takeover_time_ns),
            ]
        })
        .collect();
    let mut out = "\nwho matched, per communicator (summed over ranks):\n".to_string();
    out.push_str(&render(&header, &rows));
    if !rest.is_empty() {
        let receives: u64 = rest.iter().map(|c| c.mpi_matched).sum();
        out.push_str(&format!(
            "and {} more communicators, where MPI matched all {receives} receives\n",
            rest.len()
        ));
    }
    out.push_str(
        "communicators are numbered on each rank in the order the shim first saw them; times: \
         the longest on one rank\n",
    );
    out
}

/// The engine's searches, a row per traffic type.
fn engine_table(s: &Summary) -> String {
    let busiest = format!("rank {}", s.busiest_rank);
    let header = [
        "traffic",
        "PRQ searches",
        "mean",
        "max",
        "UMQ searches",
        "mean",
        "max",
        "matches",
        "unexpected",
        "match time",
        busiest.as_str(),
    ];
    let rows: Vec<Vec<String>> = s
        .rows()
        .into_iter()
        .map(|(name, t)| {
            vec![
                name.to_string(),
                t.prq.searches.to_string(),
                depth(t.prq.searches, t.prq.mean_depth),
                depth_max(t.prq.searches, t.prq.max_depth),
                t.umq.searches.to_string(),
                depth(t.umq.searches, t.umq.mean_depth),
                depth_max(t.umq.searches, t.umq.max_depth),
                t.matches.to_string(),
                t.unexpected.to_string(),
                duration(t.match_time_ns),
                duration(t.busiest_match_time_ns),
            ]
        })
        .collect();
    let mut out = render(&header, &rows);
    out.push_str(&format!(
        "PRQ, UMQ: posted-receive and unexpected-message queue searches, elements inspected per \
         search; match time: summed over ranks, and of rank {} (the most time matching)\n",
        s.busiest_rank
    ));
    out
}

/// Who ran each collective and what the shim's calls did, a row per collective, summed over
/// ranks.
fn collectives(s: &Summary) -> String {
    let header = [
        "collective",
        "shim calls",
        "MPI calls",
        "nonblocking",
        "messages received",
        "bytes received",
        "messages sent",
        "bytes sent",
    ];
    let rows: Vec<Vec<String>> = s
        .collectives
        .iter()
        .map(|(name, c)| {
            let mut row = vec![name.clone()];
            row.extend(
                [
                    c.calls,
                    c.mpi_calls,
                    c.nonblocking_calls,
                    c.matched,
                    c.bytes_received,
                    c.messages_sent,
                    c.bytes_sent,
                ]
                .map(|v| v.to_string()),
            );
            row
        })
        .collect();
    render(&header, &rows)
}

/// Mean and max depth of one queue over both traffic types.
fn merged(a: &Search, b: &Search) -> (String, String) {
    let n = a.searches + b.searches;
    let total = a.mean_depth * a.searches as f64 + b.mean_depth * b.searches as f64;
    let mean = if n == 0 { 0.0 } else { total / n as f64 };
    (depth(n, mean), depth_max(n, a.max_depth.max(b.max_depth)))
}

/// A row of counters per rank (both traffic types).
pub fn per_rank(reports: &[RankReport]) -> String {
    // Who matched, where the reports come from a run (replayed traces have no communicators).
    let who = reports.iter().any(|r| !r.comms.is_empty());
    let mut header = vec!["rank"];
    if who {
        header.extend(["MPI matched", "takeovers", "shim matched", "with the shim"]);
    }
    header.extend([
        "matches",
        "unexpected",
        "PRQ mean",
        "PRQ max",
        "UMQ mean",
        "UMQ max",
        "queues",
        "match time",
    ]);
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let (p, c) = (&r.point_to_point, &r.collective);
            let (prq_mean, prq_max) = merged(&p.prq, &c.prq);
            let (umq_mean, umq_max) = merged(&p.umq, &c.umq);
            let mut row = vec![r.rank.to_string()];
            if who {
                let t = Tally::of(r);
                row.extend([
                    t.mpi_matched.to_string(),
                    t.takeovers.to_string(),
                    t.shim_matched.to_string(),
                    duration(r.comms.iter().map(|c| c.takeover_time_ns).sum()),
                ]);
            }
            row.extend([
                (p.matches + c.matches).to_string(),
                (p.unexpected + c.unexpected).to_string(),
                prq_mean,
                prq_max,
                umq_mean,
                umq_max,
                r.queues_max.to_string(),
                duration(Kind::All.match_time(r)),
            ]);
            row
        })
        .collect();
    render(&header, &rows)
}

/// An engine's row of a comparison up to its queues: engine, match time, speedups over all
/// ranks and on the busiest rank (point-to-point, collective, all), queues mean, max and
/// against `rank`.
pub fn speedup_cells(e: &EngineResult) -> Vec<String> {
    vec![
        e.engine.clone(),
        duration(e.match_time_ns[2]),
        ratio(e.speedup[0]),
        ratio(e.speedup[1]),
        ratio(e.speedup[2]),
        ratio(e.speedup_busiest[0]),
        ratio(e.speedup_busiest[1]),
        ratio(e.speedup_busiest[2]),
        format!("{:.1}", e.queues_mean),
        e.queues_max.to_string(),
        ratio(e.queues_vs_rank),
    ]
}

/// The comparison: per variant who matched, the busiest rank's matching (median and range over
/// runs), its speedup over `list` and share of that rank's time, the whole run's wall time
/// against native, queues; then the machine's load, warnings and the recommendation.
pub fn comparison(c: &Comparison) -> String {
    let runs = if c.repeat == 1 { "run" } else { "runs" };
    let mut out = format!(
        "{}: {} ranks, {}, {} {runs} of each: median (min–max)\n",
        c.program.join(" "),
        c.ranks,
        c.mpi,
        c.repeat,
    );
    let matching = format!("matching r{}", c.busiest_rank);
    let header = [
        "variant",
        "shim matched",
        matching.as_str(),
        "vs list",
        "share",
        "wall",
        "vs native",
        "queues",
    ];
    let mut rows = vec![vec![
        "native".to_string(),
        "-".into(),
        "-".into(),
        "-".into(),
        "-".into(),
        with_range(&c.native_wall),
        "1.00x".into(),
        "-".into(),
    ]];
    rows.extend(c.engines.iter().map(|e| {
        vec![
            e.engine.clone(),
            matchshim_core::report::percent(e.shim_matched, e.shim_matched + e.mpi_matched),
            with_range(&e.busiest),
            ratio(e.speedup_busiest[2]),
            crate::compare::percent(e.matching_share),
            with_range(&e.wall),
            ratio(e.wall_speedup),
            e.queues_max.to_string(),
        ]
    }));
    out.push_str(&render(&header, &rows));
    out.push_str(&format!(
        "shim matched: of the receives, the rest MPI matched; matching r{0}: engine time of rank \
         {0}, the busiest under list; share: of that rank's time from MPI_Init to MPI_Finalize; \
         vs list, vs native: times faster (median); wall: the whole run; queues: the most one \
         rank allocated\n",
        c.busiest_rank
    ));
    if let Some(load) = &c.load {
        out.push_str(&format!(
            "load: average {:.2} before the runs; other work kept {:.2} of {} cores busy during \
             them (median over runs, max {:.2})\n",
            load.before, load.others_median, load.cores, load.others_max
        ));
        if load.busy() {
            out.push_str(
                "warning: the machine was busy with other work: times vary with it from run to \
                 run, read the ranges before the medians\n",
            );
        }
    }
    for host in &c.oversubscribed {
        out.push_str(&format!(
            "warning: {} ran {} ranks on {} cores: a waiting rank of native MPI spins where the \
             shim yields, so wall times against native favour the shim\n",
            host.name, host.ranks, host.cores
        ));
    }
    let r = &c.recommendation;
    let verdict = match (r.verdict, &r.variant) {
        (Verdict::NotNeeded, _) => "not needed: run without the shim".to_string(),
        (Verdict::SlowerThanNative, _) => format!(
            "run without the shim (under {}, its best here, every run was slower than native)",
            r.considered
        ),
        (Verdict::Use, Some(variant)) => {
            let vars: Vec<String> = r.vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
            format!("{variant} ({})", vars.join(" "))
        }
        (Verdict::Use, None) => r.considered.clone(),
    };
    out.push_str(&format!("\nrecommendation: {verdict}\n"));
    for line in &r.lines {
        out.push_str(&format!("  - {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::tests::{line, reports};
    use crate::reports::Traffic;
    use matchshim_core::report::CommReport;

    #[test]
    fn columns_align_and_lines_have_no_trailing_space() {
        let out = render(
            &["name", "n"],
            &[
                vec!["a".into(), "1000".into()],
                vec!["bb".into(), "7".into()],
            ],
        );
        assert_eq!(out, "name     n\na     1000\nbb       7\n");
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(14_641), "14.6 us");
        assert_eq!(duration(12_534_917), "12.53 ms");
        assert_eq!(duration(3_210_000_000), "3.21 s");
        assert_eq!(ratio(None), "-");
        assert_eq!(ratio(Some(2.345)), "2.35x");
    }

    fn with_comms(line: String, comms: Vec<CommReport>) -> RankReport {
        let mut r = reports(&[line]).remove(0);
        r.comms = comms;
        r
    }

    fn comm(id: u64, delegated: u64, switches: u64, matches: u64) -> CommReport {
        CommReport {
            id,
            size: 2,
            switches,
            delegated_time_ns: 4_000_000,
            delegated_receives: delegated,
            takeover_time_ns: if switches > 0 { 1_500_000 } else { 0 },
            takeover_matches: matches,
            held_time_ns: 0,
            unconfirmed_takeovers: 0,
            assertions: Vec::new(),
        }
    }

    #[test]
    fn the_summary_leads_with_who_matched_then_the_engine() {
        let got = [
            with_comms(line("rank", 0, 2, 14_641, 0, 5), vec![comm(0, 30, 2, 20)]),
            with_comms(
                line("rank", 1, 2, 2_000, 0, 2),
                vec![comm(0, 50, 0, 20), comm(3, 7, 0, 0)],
            ),
        ];
        let s = Summary::new(&got);
        let text = summary(&s, None, "runs/x");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "runs/x: engine rank, takeover auto, mpich, 2 ranks"
        );
        assert_eq!(
            lines[1],
            "MPI matched 69 % of 127 receives; the shim took over once and matched 40 messages, \
             holding a communicator for at most 1.50 ms (30 % of the run)."
        );
        let row = |first: &str| -> Vec<String> {
            let at = lines.iter().position(|l| l.starts_with(first)).unwrap();
            lines[at].split_whitespace().map(String::from).collect()
        };
        // communicator, size, MPI matched, takeovers, shim matched, time with MPI, with the shim
        assert_eq!(
            row("0 (world)")[2..],
            ["2", "80", "1", "40", "4.00", "ms", "1.50", "ms"]
        );
        assert_eq!(row("3 ")[..5], ["3", "2", "7", "0", "0"]);
        let p2p = row("point-to-point");
        // PRQ 20 searches mean 1.5 max 20, UMQ 60 mean 2.00 max 5, matches 40
        assert_eq!(
            p2p[..8],
            [
                "point-to-point",
                "20",
                "1.50",
                "20",
                "60",
                "2.00",
                "5",
                "40"
            ]
        );
        assert!(
            lines.iter().any(|l| l.ends_with("16.6 us  14.6 us")),
            "{text}"
        );
        assert!(text.contains("queues allocated per rank: mean 3.5, max 5 (rank 0)"));
        assert!(text.contains("0 posted receives, 1 unexpected messages"));
        assert!(!text.contains("did not happen"), "{text}");
    }

    #[test]
    fn takeovers_a_warm_probe_declined_are_counted_over_ranks_and_communicators() {
        let declined = |id, n| CommReport {
            unconfirmed_takeovers: n,
            ..comm(id, 100, 0, 0)
        };
        let got = [
            with_comms(
                line("rank", 0, 2, 0, 0, 0),
                vec![declined(0, 2), declined(4, 1)],
            ),
            with_comms(line("rank", 1, 2, 0, 0, 0), vec![declined(0, 1)]),
        ];
        let text = summary(&Summary::new(&got), None, "r");
        assert!(
            text.contains("\nnote: 4 takeovers that slow receive calls asked for did not happen"),
            "{text}"
        );
    }

    #[test]
    fn a_run_mpi_matched_alone_says_so_and_shows_no_engine_table() {
        let quiet = |rank| {
            let mut l = line("col+pnp", rank, 2, 0, 0, 0);
            l = l.replace(r#""matches":20"#, r#""matches":0"#);
            let mut r = with_comms(l, vec![comm(0, 500, 0, 0)]);
            r.point_to_point = Traffic::default();
            r
        };
        let s = Summary::new(&[quiet(0), quiet(1)]);
        let text = summary(&s, None, "r");
        assert!(
            text.contains(
                "\nMPI matched all 1000 receives; queues never grew: the shim had nothing to do here.\n"
            ),
            "{text}"
        );
        assert!(text.contains("the shim's engine (col+pnp) matched nothing"));
        assert!(!text.contains("PRQ searches"), "{text}");
    }

    #[test]
    fn comparison_has_native_a_row_per_variant_and_the_recommendation() {
        let mut c = crate::compare::tests::fixture();
        c.oversubscribed = vec![crate::runs::Host {
            name: "n1".into(),
            ranks: 4,
            cores: 2,
        }];
        let text = comparison(&c);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[0],
            "./demo: 2 ranks, mpich, 3 runs of each: median (min–max)"
        );
        assert!(lines[1].starts_with("variant") && lines[1].contains("matching r0"));
        let cells = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
        assert_eq!(
            cells(2),
            [
                "native",
                "-",
                "-",
                "-",
                "-",
                "90",
                "ns",
                "(80–100)",
                "1.00x",
                "-"
            ]
        );
        // variant, shim matched (no communicators in the fixture), matching, vs list, share,
        // wall, vs native, queues
        assert_eq!(
            cells(4),
            [
                "rank",
                "0",
                "%",
                "2.1",
                "us",
                "(1.1–3.1)",
                "4.00x",
                "0.4",
                "%",
                "95",
                "ns",
                "(90–100)",
                "0.95x",
                "6"
            ]
        );
        c.load = Some(crate::compare::Load {
            cores: 2,
            before: 3.5,
            others_median: 1.2,
            others_max: 1.9,
        });
        let text = comparison(&c);
        assert!(text.contains(
            "load: average 3.50 before the runs; other work kept 1.20 of 2 cores busy during \
             them (median over runs, max 1.90)\nwarning: the machine was busy"
        ));
        assert!(text.contains("warning: n1 ran 4 ranks on 2 cores"));
        assert!(text.contains("\nrecommendation: rank (MATCHSHIM_ENGINE=rank)\n  - matching is "));
    }

    #[test]
    fn per_rank_table_has_a_row_per_rank() {
        let got = reports(&[line("list", 0, 2, 100, 0, 2), line("list", 1, 2, 50, 0, 2)]);
        let text = per_rank(&got);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[2].split_whitespace().collect::<Vec<_>>(),
            ["1", "20", "4", "2.00", "20", "2.00", "5", "2", "50", "ns"]
        );
    }
}
