//! `figures`: the shapes of Ghazimirsaeed et al.'s (2019) Figs. 7–10 (queue search time speedup by traffic type
//! of the unified engines over the linked list; queues allocated against a queue per source as
//! n grows) and of Dosanjh et al.'s (2018) search depth growing with threads, from generated traces of the
//! `ci/bench` programs on a simulated cluster, replayed through the engines.

use crate::replay::{self, Outcome};
use crate::svg::{self, Series};
use crate::table::duration;
use matchshim_core::matching::{EngineKind, EngineParams};
use matchshim_core::trace::generate::{generate, Keep, Shape, Spec};
use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

/// Ghazimirsaeed et al.'s (2019) applications as the `ci/bench` programs that mimic them, with the options the
/// figures use at every scale (fewer iterations than `ci/bench.sh`: every rank of an all-to-all
/// program at 4096 ranks is simulated).
const APPS: [(&str, &str, &str); 4] = [
    ("fds", "FDS-like hot spot", "coll hotspot 4"),
    ("radix", "Radix-like", "app_radix -n 256 -i 2 -r 1"),
    ("nbody", "Nbody-like", "app_nbody -b 16 -c 2 -i 2 -e 2 -r 1"),
    ("miniamr", "MiniAMR-like", "app_miniamr -i 8 -R 4 -r 1"),
];

/// The engines of Ghazimirsaeed et al.'s (2019) figures: the linked list (MPICH-like baseline), a queue per
/// source (Open MPI-like) and the three unified designs.
const ENGINES: [&str; 5] = ["list", "rank", "col+pnp", "col+list", "list+pnp"];

/// The halo of Dosanjh et al. (2018) on this machine (where the generator was checked against recorded
/// runs) and on a cluster.
const HALO: &str = "halo_mt -i 20 -r 1";
const HALO_MACHINES: [(&str, usize); 2] = [("local", 16), ("cluster", 1024)];

/// Written last, so its presence says the directory holds a whole set of figures.
const TABLES: &str = "tables.md";

pub struct Options {
    pub ranks: Vec<usize>,
    pub threads: Vec<usize>,
    pub keep: usize,
    pub repeat: usize,
    pub seed: u64,
}

fn words(command: &str) -> Vec<String> {
    command.split_whitespace().map(String::from).collect()
}

/// Generates `command` on `ranks` ranks of `machine` and replays it through `kinds`.
fn case(
    command: &str,
    ranks: usize,
    machine: &str,
    kinds: &[EngineKind],
    o: &Options,
) -> Result<(Outcome, String), String> {
    let spec = Spec {
        shape: Shape::parse(&words(command))?,
        ranks,
        machine: machine.to_string(),
        keep: Keep::Sample(o.keep),
        seed: o.seed,
    };
    let started = Instant::now();
    let (traces, simulated) = generate(&spec)?;
    let generated = started.elapsed();
    let label = format!("{command} on {ranks} ranks ({machine})");
    let rounds = format!("{label}, each trace's best of {} rounds", o.repeat);
    let outcome = replay::run(&rounds, &traces, kinds, o.repeat, &EngineParams::default())?;
    let note = format!(
        "{label}: {} of simulated time, generated in {}, replayed in {}",
        duration(simulated as u64),
        duration(generated.as_nanos() as u64),
        duration((started.elapsed() - generated).as_nanos() as u64)
    );
    eprintln!("{note}");
    Ok((outcome, note))
}

fn engine<'a>(o: &'a Outcome, name: &str) -> &'a crate::compare::EngineResult {
    o.comparison
        .engines
        .iter()
        .find(|e| e.engine == name)
        .expect("every figure engine is replayed")
}

/// Mean search depth of one queue, or `-`.
fn depth(s: &crate::reports::SearchSum) -> String {
    if s.searches == 0 {
        "-".into()
    } else {
        format!("{:.1}", s.mean_depth)
    }
}

fn x(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}×"))
}

/// A markdown table of one application: a row per scale and engine.
fn app_table(title: &str, command: &str, runs: &[(usize, Outcome)]) -> String {
    let mut out = format!(
        "### {title} (`{command}`)\n\n| n | engine | p2p PRQ / UMQ depth | coll PRQ / UMQ depth | \
         speedup p2p | coll | all | busiest rank all | queues mean | max | heap max |\n\
         |---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
    );
    for (n, o) in runs {
        for (summary, memory) in o.summaries.iter().zip(&o.memory) {
            let e = engine(o, &summary.engine);
            let _ = writeln!(
                out,
                "| {n} | {} | {} / {} | {} / {} | {} | {} | {} | {} | {:.1} | {} | {:.1} kB |",
                summary.engine,
                depth(&summary.point_to_point.prq),
                depth(&summary.point_to_point.umq),
                depth(&summary.collective.prq),
                depth(&summary.collective.umq),
                x(e.speedup[0]),
                x(e.speedup[1]),
                x(e.speedup[2]),
                x(e.speedup_busiest[2]),
                e.queues_mean,
                e.queues_max,
                memory.max_bytes as f64 / 1e3
            );
        }
    }
    out.push('\n');
    out
}

/// Queues per rank against n: `rank` grows with n, `col+pnp` stays under its budget.
fn queue_figure(title: &str, runs: &[(usize, Outcome)]) -> String {
    let xs: Vec<String> = runs.iter().map(|(n, _)| n.to_string()).collect();
    let values = |name: &str, max: bool| -> Vec<Option<f64>> {
        runs.iter()
            .map(|(_, o)| {
                let e = engine(o, name);
                Some(if max {
                    e.queues_max as f64
                } else {
                    e.queues_mean
                })
            })
            .collect()
    };
    let series = [
        Series {
            name: "rank, mean over ranks".into(),
            color: "#4e79a7",
            values: values("rank", false),
            dashed: false,
        },
        Series {
            name: "col+pnp, mean over ranks".into(),
            color: "#f28e2b",
            values: values("col+pnp", false),
            dashed: false,
        },
        Series {
            name: "col+pnp, busiest rank".into(),
            color: "#e15759",
            values: values("col+pnp", true),
            dashed: false,
        },
        Series {
            name: "col+pnp budget 5 + 2·16·√n".into(),
            color: "#888888",
            values: runs
                .iter()
                .map(|(n, _)| Some(5.0 + 2.0 * 16.0 * (*n as f64).sqrt()))
                .collect(),
            dashed: true,
        },
    ];
    svg::lines(
        &format!("{title}: queues allocated per rank"),
        "generated traces on a simulated cluster, replayed; both sides (PRQ and UMQ), k = 16",
        ("ranks (n)", "queues"),
        &xs,
        &series,
        true,
    )
}

/// Mean search depths under `list` against threads per rank, on each machine.
fn halo_figure(threads: &[usize], runs: &[(&str, usize, Vec<Outcome>)]) -> String {
    let xs: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
    let colors = [["#4e79a7", "#a0cbe8"], ["#f28e2b", "#ffbe7d"]];
    let mut series = Vec::new();
    for ((machine, n, outcomes), colors) in runs.iter().zip(colors) {
        for (queue, color) in ["PRQ", "UMQ"].into_iter().zip(colors) {
            series.push(Series {
                name: format!("{queue}, {machine}, {n} ranks"),
                color,
                values: outcomes
                    .iter()
                    .map(|o| {
                        let p2p = &o.summaries[0].point_to_point;
                        Some(if queue == "PRQ" {
                            p2p.prq.mean_depth
                        } else {
                            p2p.umq.mean_depth
                        })
                    })
                    .collect(),
                dashed: queue == "UMQ",
            });
        }
    }
    svg::lines(
        "Multithreaded halo: search depth under list grows with threads",
        &format!("{HALO} -t T, a tag per thread and direction; generated traces, replayed"),
        ("threads per rank (T)", "mean elements inspected per search"),
        &xs,
        &series,
        false,
    )
}

fn write(dir: &Path, name: &str, text: &str) -> Result<(), String> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

pub fn make(dir: &Path, force: bool, o: &Options) -> Result<(), String> {
    if dir.join(TABLES).exists() && !force {
        return Err(format!(
            "{} holds figures already ({TABLES}): give --force to replace them, or another --out",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let kinds: Vec<EngineKind> = ENGINES
        .iter()
        .map(|e| EngineKind::parse(e).expect("a known engine"))
        .collect();
    let started = Instant::now();
    let mut tables = String::new();
    let mut notes = Vec::new();
    let largest = *o.ranks.iter().max().ok_or("no rank counts")?;
    for (name, title, command) in APPS {
        let mut runs = Vec::new();
        for &n in &o.ranks {
            let (outcome, note) = case(command, n, "cluster", &kinds, o)?;
            notes.push(note);
            if n == largest {
                write(
                    dir,
                    &format!("speedup-{name}.svg"),
                    &svg::plot(&outcome.comparison),
                )?;
            }
            runs.push((n, outcome));
        }
        write(
            dir,
            &format!("queues-{name}.svg"),
            &queue_figure(title, &runs),
        )?;
        tables.push_str(&app_table(title, command, &runs));
    }
    let list = [EngineKind::List];
    let mut halo = Vec::new();
    for (machine, n) in HALO_MACHINES {
        let mut outcomes = Vec::new();
        for &t in &o.threads {
            let (outcome, note) = case(&format!("{HALO} -t {t}"), n, machine, &list, o)?;
            notes.push(note);
            outcomes.push(outcome);
        }
        halo.push((machine, n, outcomes));
    }
    write(dir, "halo-threads.svg", &halo_figure(&o.threads, &halo))?;
    let _ = writeln!(
        tables,
        "### Multithreaded halo (`{HALO} -t T`), mean search depth under list\n\n| machine | \
         ranks | {} |\n|---|---:|{}",
        o.threads
            .iter()
            .map(|t| format!("T={t} PRQ / UMQ"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---:|".repeat(o.threads.len())
    );
    for (machine, n, outcomes) in &halo {
        let cells: Vec<String> = outcomes
            .iter()
            .map(|o| {
                let p2p = &o.summaries[0].point_to_point;
                format!("{} / {}", depth(&p2p.prq), depth(&p2p.umq))
            })
            .collect();
        let _ = writeln!(tables, "| {machine} | {n} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        tables,
        "\nGenerated and replayed in {} (each trace's best of {} rounds; {} ranks' traces kept \
         per run, rank 0 and the last among them):\n",
        duration(started.elapsed().as_nanos() as u64),
        o.repeat,
        o.keep
    );
    for note in notes {
        let _ = writeln!(tables, "- {note}");
    }
    write(dir, TABLES, &tables)
}
