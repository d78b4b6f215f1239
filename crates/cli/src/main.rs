//! `matchshim`: runs MPI programs under the shim, and reports and compares what its engines did.

mod args;
mod compare;
mod figures;
mod memory;
mod replay;
mod reports;
mod runs;
mod svg;
mod table;

#[global_allocator]
static HEAP: memory::Counting = memory::Counting;

use args::{Command, Launch};
use compare::{Comparison, Progress, Run};
use matchshim_core::matching::EngineParams;
use reports::Summary;
use runs::{Mpi, Spec};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match args::parse(std::env::args().skip(1).collect()) {
        Ok(command) => command,
        Err(message) => {
            eprintln!("matchshim: {message} (see matchshim --help)");
            return ExitCode::from(2);
        }
    };
    let result = match command {
        Command::Run {
            launch,
            engine,
            per_rank,
        } => run(launch, engine, per_rank),
        Command::Report {
            dirs,
            json,
            per_rank,
        } => report(&dirs, json, per_rank),
        Command::Compare {
            launch,
            engines,
            repeat,
            plot,
        } => compare(launch, engines, repeat, plot),
        Command::Replay {
            dir,
            engines,
            repeat,
            per_rank,
            json,
            plot,
        } => replay_traces(&dir, engines, repeat, per_rank, json, plot),
        Command::Generate {
            ranks,
            out,
            machine,
            keep,
            seed,
            program,
        } => generate(ranks, &out, machine, keep, seed, &program),
        Command::Figures {
            out,
            ranks,
            threads,
            keep,
            repeat,
            seed,
        } => figures::make(
            &out,
            &figures::Options {
                ranks,
                threads,
                keep,
                repeat,
                seed,
            },
        ),
        Command::Rank { dir, program } => return runs::rank_wrapper(&dir, &program),
        Command::Help => {
            println!("{}", args::USAGE);
            Ok(())
        }
        Command::Version => {
            println!("matchshim {}", reports::VERSION);
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("matchshim: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run(launch: Launch, engine: Option<String>, per_rank: bool) -> Result<(), String> {
    let mpi = Mpi::choose(launch.mpi.as_deref())?;
    runs::check_program(&launch.program[0])?;
    let lib = runs::find_lib(launch.lib.as_deref(), mpi)?;
    let label = engine
        .clone()
        .or_else(|| std::env::var("MATCHSHIM_ENGINE").ok());
    let dir = launch
        .out
        .unwrap_or_else(|| runs::default_dir(label.as_deref().unwrap_or("default")));
    let spec = Spec {
        mpi,
        ranks: launch.ranks,
        program: &launch.program,
        shim: Some((&lib, engine.as_deref())),
        dir: &dir,
        quiet: false,
    };
    let outcome = runs::execute(&spec)?;
    print!(
        "{}",
        table::summary(
            &Summary::new(&outcome.reports),
            Some(&outcome.meta),
            &dir.display().to_string()
        )
    );
    if per_rank {
        print!("{}", table::per_rank(&outcome.reports));
    }
    Ok(())
}

/// The runs under `path`: a run directory, a bare report file, or a `compare` directory.
fn runs_in(path: &Path) -> Result<Vec<PathBuf>, String> {
    if path.is_file() || path.join("report.jsonl").exists() || path.join("meta.json").exists() {
        return Ok(vec![path.to_path_buf()]);
    }
    let entries =
        std::fs::read_dir(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("report.jsonl").exists())
        .collect();
    found.sort();
    if found.is_empty() {
        return Err(format!(
            "{} holds no matchshim run (no report.jsonl)",
            path.display()
        ));
    }
    Ok(found)
}

fn report(paths: &[PathBuf], json: bool, per_rank: bool) -> Result<(), String> {
    let mut out = Vec::new();
    for path in paths {
        for dir in runs_in(path)? {
            let (meta, reports) = if dir.is_file() {
                let reports = reports::load(&dir)?;
                let size = reports.first().map_or(0, |r| r.size);
                reports::check_complete(&reports, size, &dir)?;
                (None, reports)
            } else {
                let meta = runs::read_meta(&dir)?;
                if let Some(m) = meta.as_ref().filter(|m| m.exit_code != 0) {
                    return Err(format!(
                        "{}: the run failed (exit code {})",
                        dir.display(),
                        m.exit_code
                    ));
                }
                if let Some(m) = meta.as_ref().filter(|m| m.lib.is_none()) {
                    return Err(format!(
                        "{}: a native run of {} has no matching report",
                        dir.display(),
                        m.command[0]
                    ));
                }
                let ranks = match &meta {
                    Some(m) => m.ranks,
                    None => reports::load(&dir.join("report.jsonl"))?
                        .first()
                        .map_or(0, |r| r.size),
                };
                (meta, runs::load_reports(&dir, ranks)?)
            };
            out.push((dir, meta, reports));
        }
    }
    if json {
        let values: Vec<serde_json::Value> = out
            .iter()
            .map(|(dir, meta, reports)| {
                serde_json::json!({ "run": dir, "meta": meta, "summary": Summary::new(reports) })
            })
            .collect();
        let value = if values.len() == 1 {
            values[0].clone()
        } else {
            serde_json::Value::Array(values)
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&value).map_err(|e| e.to_string())?
        );
        return Ok(());
    }
    for (i, (dir, meta, reports)) in out.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!(
            "{}",
            table::summary(
                &Summary::new(reports),
                meta.as_ref(),
                &dir.display().to_string()
            )
        );
        if per_rank {
            print!("{}", table::per_rank(reports));
        }
    }
    Ok(())
}

fn compare(
    launch: Launch,
    engines: Option<Vec<String>>,
    repeat: usize,
    plot: Option<PathBuf>,
) -> Result<(), String> {
    let mpi = Mpi::choose(launch.mpi.as_deref())?;
    runs::check_program(&launch.program[0])?;
    let lib = runs::find_lib(launch.lib.as_deref(), mpi)?;
    let engines = compare::with_references(engines.unwrap_or_else(compare::all_engines));
    let dir = launch.out.unwrap_or_else(|| runs::default_dir("compare"));
    let mut progress = Progress::new(repeat * (engines.len() + 1));
    let mut native_walls = Vec::new();
    let mut results: Vec<(String, Vec<Run>)> =
        engines.iter().map(|e| (e.clone(), Vec::new())).collect();
    let mut launch_one = |name: &str, shim: Option<(&Path, Option<&str>)>, r: usize| {
        progress.step(&format!("{name} (run {r} of {repeat})"));
        let spec = Spec {
            mpi,
            ranks: launch.ranks,
            program: &launch.program,
            shim,
            dir: &dir.join(format!("{name}-{r}")),
            quiet: true,
        };
        runs::execute(&spec).map_err(|e| format!("{name}, run {r}: {e}"))
    };
    // Rounds rather than engine after engine, so a slow spell of the machine hits all alike.
    let outcome = (1..=repeat).try_for_each(|r| {
        native_walls.push(launch_one("native", None, r)?.meta.wall_time_ns);
        for (engine, runs) in results.iter_mut() {
            let outcome = launch_one(engine, Some((&lib, Some(engine))), r)?;
            runs.push(Run {
                reports: outcome.reports,
                wall_ns: outcome.meta.wall_time_ns,
            });
        }
        Ok::<(), String>(())
    });
    progress.finish();
    outcome?;
    let comparison = Comparison::new(
        launch.program.clone(),
        mpi.name(),
        launch.ranks,
        native_walls,
        &results,
    );
    let summary = serde_json::to_string_pretty(&comparison).map_err(|e| e.to_string())?;
    std::fs::write(dir.join("compare.json"), summary + "\n")
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    print!("{}", table::comparison(&comparison));
    println!("runs kept in {}", dir.display());
    if let Some(plot) = plot {
        std::fs::write(&plot, svg::plot(&comparison))
            .map_err(|e| format!("cannot write {}: {e}", plot.display()))?;
        println!("plot: {}", plot.display());
    }
    Ok(())
}

fn replay_traces(
    dir: &Path,
    engines: Option<Vec<String>>,
    repeat: usize,
    per_rank: bool,
    json: bool,
    plot: Option<PathBuf>,
) -> Result<(), String> {
    let kinds = replay::engines(engines)?;
    let traces = matchshim_core::trace::read_dir(dir)?;
    let label = dir.display().to_string();
    let outcome = replay::run(&label, &traces, &kinds, repeat, &EngineParams::default())?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", replay::table(&outcome));
        if per_rank {
            for reports in &outcome.per_rank {
                println!("\n{}:", reports[0].engine);
                print!("{}", table::per_rank(reports));
            }
        }
    }
    if let Some(plot) = plot {
        std::fs::write(&plot, svg::plot(&outcome.comparison))
            .map_err(|e| format!("cannot write {}: {e}", plot.display()))?;
        eprintln!("plot: {}", plot.display());
    }
    Ok(())
}

fn generate(
    ranks: usize,
    out: &Path,
    machine: String,
    keep: Option<usize>,
    seed: u64,
    program: &[String],
) -> Result<(), String> {
    use matchshim_core::trace::generate::{generate, Keep, Shape, Spec};
    let spec = Spec {
        shape: Shape::parse(program)?,
        ranks,
        machine,
        keep: keep.map_or(Keep::All, Keep::Sample),
        seed,
    };
    let started = std::time::Instant::now();
    let (traces, simulated_ns) = generate(&spec)?;
    // Traces of an earlier run in the directory would be read as ranks of this one.
    if let Ok(entries) = std::fs::read_dir(out) {
        for path in entries.flatten().map(|e| e.path()) {
            if path.extension().is_some_and(|x| x == "trace") {
                std::fs::remove_file(&path)
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            }
        }
    }
    matchshim_core::trace::write_dir(out, &traces)?;
    println!(
        "{}: {} traces ({} events) of {} on {ranks} ranks, {} simulated, in {}",
        out.display(),
        traces.len(),
        traces.iter().map(|t| t.events.len()).sum::<usize>(),
        spec.shape.command(),
        table::duration(simulated_ns as u64),
        table::duration(started.elapsed().as_nanos() as u64)
    );
    Ok(())
}
