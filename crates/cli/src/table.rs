//! Plain-text tables for the terminal.

use crate::compare::{with_range, Comparison, EngineResult};
use crate::reports::{Kind, RankReport, Search, Summary};
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

/// The report of one run: a row per traffic type, then queues and what was left queued.
pub fn summary(s: &Summary, meta: Option<&Meta>, origin: &str) -> String {
    let mut out = format!(
        "{origin}: engine {}, {}, {} ranks",
        s.engine, s.mpi, s.ranks
    );
    if let Some(meta) = meta {
        out.push_str(&format!(", wall {}", duration(meta.wall_time_ns)));
    }
    out.push('\n');
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
    out.push_str(&render(&header, &rows));
    out.push_str(&format!(
        "match time: summed over ranks, and of rank {} (the most time matching)\n",
        s.busiest_rank
    ));
    if !s.collectives.is_empty() {
        out.push_str(&collectives(s));
    }
    let q = &s.queues;
    out.push_str(&format!(
        "queues allocated per rank: mean {:.1}, max {} (rank {}), rank {} {}\n",
        q.mean, q.max, q.max_rank, s.busiest_rank, q.busiest
    ));
    out.push_str(&format!(
        "left at MPI_Finalize: {} posted receives, {} unexpected messages\n",
        s.posted_left, s.unexpected_left
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
    let header = [
        "rank",
        "matches",
        "unexpected",
        "PRQ mean",
        "PRQ max",
        "UMQ mean",
        "UMQ max",
        "queues",
        "match time",
    ];
    let rows: Vec<Vec<String>> = reports
        .iter()
        .map(|r| {
            let (p, c) = (&r.point_to_point, &r.collective);
            let (prq_mean, prq_max) = merged(&p.prq, &c.prq);
            let (umq_mean, umq_max) = merged(&p.umq, &c.umq);
            vec![
                r.rank.to_string(),
                (p.matches + c.matches).to_string(),
                (p.unexpected + c.unexpected).to_string(),
                prq_mean,
                prq_max,
                umq_mean,
                umq_max,
                r.queues_max.to_string(),
                duration(Kind::All.match_time(r)),
            ]
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

/// The comparison: per variant the busiest rank's matching (median and range over runs),
/// speedup over `list`, share of that rank's time, whole-run wall time against native, queues;
/// then warnings and the recommendation.
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
        with_range(&c.native_wall),
        "1.00x".into(),
        "-".into(),
    ]];
    rows.extend(c.engines.iter().map(|e| {
        vec![
            e.engine.clone(),
            with_range(&e.busiest),
            ratio(e.speedup_busiest[2]),
            format!("{:.1} %", e.matching_share * 100.0),
            with_range(&e.wall),
            ratio(e.wall_speedup),
            e.queues_max.to_string(),
        ]
    }));
    out.push_str(&render(&header, &rows));
    out.push_str(&format!(
        "matching r{0}: engine time of rank {0}, the busiest under list; share: of that rank's \
         time in MPI; vs list, vs native: times faster (median); wall: the whole run; queues: \
         the most one rank allocated\n",
        c.busiest_rank
    ));
    for host in &c.oversubscribed {
        out.push_str(&format!(
            "warning: {} ran {} ranks on {} cores: a waiting rank of native MPI spins where the \
             shim yields, so wall times against native favour the shim\n",
            host.name, host.ranks, host.cores
        ));
    }
    let r = &c.recommendation;
    match &r.variant {
        Some(variant) => {
            let vars: Vec<String> = r.vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
            out.push_str(&format!(
                "\nrecommendation: {variant} ({})\n",
                vars.join(" ")
            ));
        }
        None => out.push_str(&format!(
            "\nrecommendation: run without the shim (under {}, its best here, every run was \
             slower than native)\n",
            r.considered
        )),
    }
    for line in &r.lines {
        out.push_str(&format!("  - {line}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reports::tests::{line, reports};

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

    #[test]
    fn summary_table_shows_each_traffic_type_and_queues() {
        let got = reports(&[
            line("rank", 0, 2, 14_641, 0, 5),
            line("rank", 1, 2, 2_000, 0, 2),
        ]);
        let s = Summary::new(&got);
        let text = summary(&s, None, "runs/x");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "runs/x: engine rank, mpich, 2 ranks");
        assert!(
            lines[1].starts_with("traffic") && lines[1].ends_with("rank 0"),
            "{}",
            lines[1]
        );
        let p2p: Vec<&str> = lines[2].split_whitespace().collect();
        // point-to-point, PRQ 20 searches mean 1.5 max 20, UMQ 60 mean 2.00 max 5, ...
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
        assert!(lines[2].ends_with("16.6 us  14.6 us"), "{}", lines[2]);
        assert!(
            lines[3].starts_with("collective") && lines[3].contains(" - "),
            "{}",
            lines[3]
        );
        assert!(lines[4].starts_with("all "));
        assert!(text.contains("queues allocated per rank: mean 3.5, max 5 (rank 0), rank 0 5"));
        assert!(text.contains("0 posted receives, 1 unexpected messages"));
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
                "90",
                "ns",
                "(80–100)",
                "1.00x",
                "-"
            ]
        );
        assert_eq!(
            cells(4),
            [
                "rank",
                "2.1",
                "us",
                "(1.1–3.1)",
                "4.00x",
                "0.0",
                "%",
                "95",
                "ns",
                "(90–100)",
                "0.95x",
                "6"
            ]
        );
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
