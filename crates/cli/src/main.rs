//! `matchshim`: runs MPI programs under the shim, and reports and compares what its engines did.

mod args;
mod bypass;
mod compare;
mod detect;
mod elf;
mod figures;
mod gpu;
mod launch;
mod load;
mod memory;
mod replay;
mod reports;
mod runs;
mod svg;
mod table;

#[global_allocator]
static HEAP: memory::Counting = memory::Counting;

use args::{
    Cli, Command, CompareArgs, GenerateArgs, Keep, LaunchArgs, Machine, ReplayArgs, ReportArgs,
    RunArgs,
};
use clap::Parser;
use compare::{Comparison, Progress, Run, Variant};
use launch::{Launch, Launcher};
use matchshim_core::matching::EngineParams;
use reports::Summary;
use runs::{Mpi, Shim, Spec};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Run(args) => run(args),
        Command::Report(args) => report(args),
        Command::Compare(args) => compare(args),
        Command::Replay(args) => replay_traces(args),
        Command::Generate(args) => generate(args),
        Command::Figures(args) => figures::make(
            &args.out,
            args.force,
            &figures::Options {
                ranks: args.ranks.iter().map(|&n| n as usize).collect(),
                threads: args.threads.iter().map(|&t| t as usize).collect(),
                keep: args.keep as usize,
                repeat: args.repeat as usize,
                seed: args.seed,
            },
        ),
        Command::Rank { dir, program } => return runs::rank_wrapper(&dir, &program),
        Command::Gpu { ptx, arch } => gpu::run(ptx.as_deref(), &arch),
        Command::Completions { shell } => {
            let mut cli = <Cli as clap::CommandFactory>::command();
            clap_complete::generate(shell, &mut cli, "matchshim", &mut std::io::stdout());
            Ok(())
        }
        Command::Man { dir } => man_pages(&dir),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("matchshim: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `matchshim.1` and `matchshim-SUB.1` for every sub-command a user runs, from the clap
/// definition.
fn man_pages(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let cli = <Cli as clap::CommandFactory>::command();
    let mut pages = vec![("matchshim".to_string(), cli.clone())];
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("matchshim-{}", sub.get_name());
        pages.push((name.clone(), sub.clone().name(name)));
    }
    for (name, command) in pages {
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(command)
            .render(&mut page)
            .map_err(|e| format!("{name}: {e}"))?;
        std::fs::write(&path, page).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// What `compare` keeps in its directory: the comparison and the recommendation.
const COMPARE_JSON: &str = "compare.json";

/// Picks the one MPI that every source names, or says which two disagree.
fn agree(sources: &[(Option<Mpi>, String)]) -> Result<Option<Mpi>, String> {
    let named: Vec<&(Option<Mpi>, String)> = sources.iter().filter(|(m, _)| m.is_some()).collect();
    match named.iter().find(|(m, _)| *m != named[0].0) {
        Some((other, why)) => Err(format!(
            "{} {}, but {why} {}",
            named[0].1,
            named[0].0.map_or("", Mpi::describe),
            other.map_or("", Mpi::describe)
        )),
        None => Ok(named.first().and_then(|(m, _)| *m)),
    }
}

/// The program's MPI as `agree` weighs it, with how it was found.
fn program_mpi(command: &[String]) -> (Option<Mpi>, String) {
    match detect::program_mpi(command) {
        Some((mpi, how)) => (Some(mpi), how),
        None => (None, String::new()),
    }
}

/// The launch command and the program's MPI, checked before anything runs.
fn resolve(args: &LaunchArgs) -> Result<(Launch, Mpi), String> {
    let command = &args.command;
    let given = (args.mpi, "--mpi says".to_string());
    if let Some(ranks) = args.ranks {
        if Launcher::detect(&command[0]) != Launcher::Other {
            return Err(format!(
                "with -n, COMMAND is the program, but {} is a launcher: leave out -n to give a \
                 launcher's command line",
                command[0]
            ));
        }
        runs::check_program(&command[0])?;
        let mpi = match agree(&[program_mpi(command), given])? {
            Some(mpi) => mpi,
            None => Mpi::of_path()?.0,
        };
        if runs::on_path(mpi.launcher()).is_none() {
            return Err(format!(
                "no MPI launcher found: {} is not on PATH",
                mpi.launcher()
            ));
        }
        return Ok((Launch::short(mpi, ranks as usize, command), mpi));
    }
    if runs::find_program(&command[0])
        .and_then(|p| elf::Elf::read(&p).ok().flatten())
        .is_some_and(|e| e.links_mpi())
    {
        return Err(format!(
            "{} is an MPI program, not a launcher: give -n N to start it with mpiexec, or a \
             launcher before it (matchshim run -- mpiexec -n 4 {})",
            command[0], command[0]
        ));
    }
    runs::check_program(&command[0]).map_err(|_| format!("launcher not found: {}", command[0]))?;
    let launch = Launch::parse(command.clone(), |word| runs::find_program(word).is_some())?;
    let program = &launch.program()[0];
    runs::check_program(program)?;
    let links = program_mpi(launch.program());
    let launcher = (
        launch.launcher.mpi(),
        format!("{} is the launcher of", launch.words[0]),
    );
    let mpi = agree(&[links, given, launcher])?.ok_or_else(|| {
        format!(
            "cannot tell which MPI {program} uses (it links none matchshim knows, and {} is {}): \
             pass --mpi",
            launch.words[0],
            launch.launcher.describe()
        )
    })?;
    Ok((launch, mpi))
}

fn run(args: RunArgs) -> Result<(), String> {
    let (launch, mpi) = resolve(&args.launch)?;
    let lib = runs::find_lib(args.launch.lib.as_deref(), mpi)?;
    let mut given = args.set;
    if let Some(engine) = args.engine {
        given.push(("MATCHSHIM_ENGINE".into(), engine));
    }
    if let Some(coll) = args.coll {
        given.push(("MATCHSHIM_COLL".into(), coll));
    }
    if let Some(takeover) = args.takeover {
        given.push(("MATCHSHIM_TAKEOVER".into(), takeover));
    }
    let vars = runs::rank_vars(&given);
    let engine = runs::check_vars(&vars)?;
    let dir = args
        .launch
        .out
        .unwrap_or_else(|| runs::default_dir(&engine));
    let spec = Spec {
        launch: &launch,
        mpi,
        shim: Some(Shim {
            lib: &lib,
            vars: &vars,
            engine: &engine,
        }),
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
    if args.per_rank {
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

/// The comparison `compare` kept in `dir`, if it is a compare directory.
fn comparison_in(dir: &Path) -> Result<Option<Comparison>, String> {
    let path = dir.join(COMPARE_JSON);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{}: not a comparison of this matchshim ({e})",
            path.display()
        )
    })
}

fn report(args: ReportArgs) -> Result<(), String> {
    let mut out = Vec::new();
    let mut comparisons = Vec::new();
    for path in &args.paths {
        if let Some(c) = comparison_in(path)? {
            comparisons.push((path.clone(), c));
            continue;
        }
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
    if args.json {
        let values: Vec<serde_json::Value> = comparisons
            .iter()
            .map(|(dir, c)| serde_json::json!({ "compare": dir, "comparison": c }))
            .chain(out.iter().map(|(dir, meta, reports)| {
                serde_json::json!({ "run": dir, "meta": meta, "summary": Summary::new(reports) })
            }))
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
    for (i, (dir, c)) in comparisons.iter().enumerate() {
        if i > 0 {
            println!();
        }
        print!("{}", table::comparison(c));
        println!("runs kept in {}", dir.display());
    }
    for (i, (dir, meta, reports)) in out.iter().enumerate() {
        if i > 0 || !comparisons.is_empty() {
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
        if args.per_rank {
            print!("{}", table::per_rank(reports));
        }
    }
    Ok(())
}

/// Every variant `compare` runs, each checked as the shim will check it.
fn compare_variants(args: &CompareArgs) -> Result<Vec<(Variant, runs::Vars)>, String> {
    let engines = if args.engines.is_empty() {
        compare::default_engines(args::defaults().engine.name())
    } else if args.engines.iter().any(|e| e == "all") {
        compare::with_references(&[compare::BASELINE], compare::all_engines())
    } else {
        compare::with_references(&[compare::BASELINE], args.engines.clone())
    };
    let mut settings: Vec<(String, Vec<String>)> = Vec::new();
    for (name, modes) in [
        ("MATCHSHIM_COLL", &args.coll),
        ("MATCHSHIM_TAKEOVER", &args.takeover),
    ] {
        if !modes.is_empty() {
            settings.push((name.into(), modes.clone()));
        }
    }
    for (name, values) in &args.set {
        settings.push((name.clone(), values.split(',').map(String::from).collect()));
    }
    compare::variants(&engines, &settings)
        .into_iter()
        .map(|variant| {
            let vars = runs::rank_vars(&variant.vars());
            runs::check_vars(&vars)?;
            Ok((variant, vars))
        })
        .collect()
}

fn compare(args: CompareArgs) -> Result<(), String> {
    let (launch, mpi) = resolve(&args.launch)?;
    let lib = runs::find_lib(args.launch.lib.as_deref(), mpi)?;
    let variants = compare_variants(&args)?;
    let repeat = args.repeat as usize;
    let dir = args
        .launch
        .out
        .clone()
        .unwrap_or_else(|| runs::default_dir("compare"));
    let total = repeat * (variants.len() + 1);
    let cores = runs::online_cores().unwrap_or(1);
    let before = load::load_average();
    let labels: Vec<String> = variants.iter().map(|(v, _)| v.label()).collect();
    eprintln!(
        "compare: {total} runs: native and {} variant{} ({}), {repeat} round{}; load average \
         {} on {cores} cores before them",
        variants.len(),
        if variants.len() == 1 { "" } else { "s" },
        labels.join(", "),
        if repeat == 1 { "" } else { "s" },
        before.map_or_else(|| "unknown".to_string(), |l| format!("{l:.2}")),
    );
    let mut progress = Progress::new(total);
    let mut native_walls = Vec::new();
    let mut others = Vec::new();
    let mut hosts = Vec::new();
    let mut results: Vec<(Variant, Vec<Run>)> = variants
        .iter()
        .map(|(v, _)| (v.clone(), Vec::new()))
        .collect();
    let mut launch_one = |name: &str, shim: Option<Shim>, r: usize| {
        progress.step(&format!("{name} (run {r} of {repeat})"));
        let spec = Spec {
            launch: &launch,
            mpi,
            shim,
            dir: &dir.join(format!("{}-{r}", name.replace(' ', "_"))),
            quiet: true,
        };
        let sample = load::Sample::now();
        let outcome = runs::execute(&spec).map_err(|e| format!("{name}, run {r}: {e}"))?;
        if let Some(busy) = sample.and_then(|s| s.others_since()) {
            others.push(busy);
        }
        Ok::<_, String>(outcome)
    };
    // Rounds rather than variant after variant, so a slow spell of the machine hits all alike.
    let outcome = (1..=repeat).try_for_each(|r| {
        let native = launch_one("native", None, r)?;
        if r == 1 {
            let each = native.meta.wall_time_ns;
            eprintln!(
                "compare: the first native run took {}: about {} for all {total} runs, more \
                 where the shim is slower",
                table::duration(each),
                table::duration(each.saturating_mul(total as u64))
            );
        }
        native_walls.push(native.meta.wall_time_ns);
        hosts = native.hosts;
        for ((variant, vars), (_, runs)) in variants.iter().zip(results.iter_mut()) {
            let shim = Shim {
                lib: &lib,
                vars,
                engine: &variant.engine,
            };
            let outcome = launch_one(&variant.label(), Some(shim), r)?;
            runs.push(Run {
                reports: outcome.reports,
                wall_ns: outcome.meta.wall_time_ns,
            });
        }
        Ok::<(), String>(())
    });
    progress.finish();
    outcome?;
    let ranks = results[0].1[0].reports.len();
    let mut comparison = Comparison::new(
        launch.program().to_vec(),
        mpi.name(),
        ranks,
        native_walls,
        &results,
        &hosts,
        args::defaults().engine.name(),
    );
    others.sort_by(f64::total_cmp);
    comparison.load = Some(compare::Load {
        cores,
        before: before.unwrap_or(0.0),
        others_median: others.get(others.len() / 2).copied().unwrap_or(0.0),
        others_max: others.last().copied().unwrap_or(0.0),
    });
    let json = serde_json::to_string_pretty(&comparison).map_err(|e| e.to_string())? + "\n";
    std::fs::write(dir.join(COMPARE_JSON), &json)
        .map_err(|e| format!("cannot write in {}: {e}", dir.display()))?;
    if args.json {
        print!("{json}");
    } else {
        print!("{}", table::comparison(&comparison));
        println!("runs kept in {}", dir.display());
    }
    if let Some(plot) = args.plot {
        std::fs::write(&plot, svg::plot(&comparison))
            .map_err(|e| format!("cannot write {}: {e}", plot.display()))?;
        if !args.json {
            println!("plot: {}", plot.display());
        }
    }
    Ok(())
}

fn replay_traces(args: ReplayArgs) -> Result<(), String> {
    let engines = (!args.engines.is_empty()).then_some(args.engines);
    let kinds = replay::engines(engines)?;
    let traces = matchshim_core::trace::read_dir(&args.dir)?;
    let label = args.dir.display().to_string();
    let outcome = replay::run(
        &label,
        &traces,
        &kinds,
        args.repeat as usize,
        &EngineParams::default(),
    )?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&outcome).map_err(|e| e.to_string())?
        );
    } else {
        print!("{}", replay::table(&outcome));
        if args.per_rank {
            for reports in &outcome.per_rank {
                println!("\n{}:", reports[0].engine);
                print!("{}", table::per_rank(reports));
            }
        }
    }
    if let Some(plot) = args.plot {
        std::fs::write(&plot, svg::plot(&outcome.comparison))
            .map_err(|e| format!("cannot write {}: {e}", plot.display()))?;
        eprintln!("plot: {}", plot.display());
    }
    Ok(())
}

fn generate(args: GenerateArgs) -> Result<(), String> {
    use matchshim_core::trace::generate::{generate, Keep as Kept, Shape, Spec};
    if args.program[1..].iter().any(|w| w == "--help" || w == "-h") {
        let usage = Shape::usage(&args.program[0]).ok_or_else(|| {
            format!(
                "no generator for {:?}; programs: {}",
                args.program[0],
                Shape::PROGRAMS.join(", ")
            )
        })?;
        println!("{usage}");
        return Ok(());
    }
    let (Some(ranks), Some(out)) = (args.ranks, args.out.as_deref()) else {
        return Err("generate needs -n N (ranks) and --out TRACE_DIR".into());
    };
    let ranks = ranks as usize;
    let spec = Spec {
        shape: Shape::parse(&args.program)?,
        ranks,
        machine: match args.machine {
            Machine::Local => "local",
            Machine::Cluster => "cluster",
        }
        .to_string(),
        keep: match args.keep {
            Keep::All => Kept::All,
            Keep::Sample(k) => Kept::Sample(k),
        },
        seed: args.seed,
    };
    // Traces of an earlier run in the directory would be read as ranks of this one.
    let earlier: Vec<PathBuf> = std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "trace"))
        .collect();
    if !earlier.is_empty() && !args.force {
        return Err(format!(
            "{} holds {} traces already: give --force to replace them, or another --out",
            out.display(),
            earlier.len()
        ));
    }
    let started = std::time::Instant::now();
    let (traces, simulated_ns) = generate(&spec)?;
    for path in earlier {
        std::fs::remove_file(&path)
            .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
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
