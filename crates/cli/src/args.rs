//! Command-line parsing (a handful of options: no parser crate needed).

use std::path::PathBuf;

pub const USAGE: &str = "\
usage:
  matchshim run [--engine E] [--mpi mpich|openmpi] [--lib PATH] [--out RUN_DIR] [--ranks]
                -n N -- PROGRAM [ARGS...]
  matchshim report [--json] [--ranks] RUN_DIR...
  matchshim compare [--engines E1,E2,...] [--repeat R] [--mpi mpich|openmpi] [--lib PATH]
                    [--out DIR] [--plot FILE.svg] -n N -- PROGRAM [ARGS...]
  matchshim replay [--engines E1,E2,...] [--repeat R] [--ranks] [--json] [--plot FILE.svg]
                   TRACE_DIR
  matchshim generate [--machine local|cluster] [--keep all|K] [--seed S] --out TRACE_DIR
                     -n N -- PROGRAM [ARGS...]
  matchshim figures [--out DIR] [--ranks N1,N2,...] [--threads T1,T2,...] [--keep K]
                    [--repeat R] [--seed S]

run      runs PROGRAM on N ranks under the shim, keeps each rank's report in RUN_DIR
         (default matchshim-runs/<time>-<engine>) and prints the summary
report   prints the summary of runs (--json: machine-readable; --ranks: a row per rank)
compare  runs PROGRAM natively and under each engine (default: all), R times each (median),
         and prints queue search time speedups over `list`, queues allocated and wall times
replay   runs the traces in TRACE_DIR (recorded with MATCHSHIM_TRACE=TRACE_DIR, or generated)
         through each engine (default: all) with no MPI, R rounds (each trace's fastest
         counts), and prints search depths, search time speedups over `list`, queues and
         heap bytes per rank
generate writes the traces of a ci/bench program (coll hotspot, app_radix, app_nbody,
         app_miniamr, halo_mt, with their options) on N ranks from a simulation of it on
         the shim: on this kind of machine (local: 2 shared cores) or a cluster (the
         default: a core per thread); --keep K keeps rank 0, the last and evenly spaced
         ranks, K in all;
         traces already in TRACE_DIR are removed first
figures  paper 004's Figs. 7-10 and paper 001's depth growth with threads from generated
         traces (default: --out benches/paper, --ranks 64,256,1024,4096,
         --threads 1,2,4,8,16, --keep 16, --repeat 3): SVGs and tables.md

The shim library defaults to target/release/libmatchshim.so (MPICH) or
target/openmpi/release/libmatchshim.so (Open MPI) in this repository; --lib or the
MATCHSHIM_LIB variable (never passed to the ranks) name another.";

/// Where and how to launch a program.
#[derive(Debug, PartialEq)]
pub struct Launch {
    pub mpi: Option<String>,
    pub lib: Option<PathBuf>,
    pub out: Option<PathBuf>,
    pub ranks: usize,
    pub program: Vec<String>,
}

#[derive(Debug, PartialEq)]
pub enum Command {
    Run {
        launch: Launch,
        engine: Option<String>,
        per_rank: bool,
    },
    Report {
        dirs: Vec<PathBuf>,
        json: bool,
        per_rank: bool,
    },
    Compare {
        launch: Launch,
        engines: Option<Vec<String>>,
        repeat: usize,
        plot: Option<PathBuf>,
    },
    Replay {
        dir: PathBuf,
        engines: Option<Vec<String>>,
        repeat: usize,
        per_rank: bool,
        json: bool,
        plot: Option<PathBuf>,
    },
    Generate {
        ranks: usize,
        out: PathBuf,
        machine: String,
        keep: Option<usize>,
        seed: u64,
        program: Vec<String>,
    },
    Figures {
        out: PathBuf,
        ranks: Vec<usize>,
        threads: Vec<usize>,
        keep: usize,
        repeat: usize,
        seed: u64,
    },
    /// Internal: wraps one rank's process to record its exit status and stderr.
    Rank {
        dir: PathBuf,
        program: Vec<String>,
    },
    Help,
    Version,
}

fn positive(option: &str, text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{option} wants a positive number, not {text:?}")),
    }
}

/// Splits `--name=value` and walks the arguments.
struct Cursor {
    args: std::vec::IntoIter<String>,
    pending: Option<String>,
}

impl Cursor {
    fn new(args: Vec<String>) -> Cursor {
        Cursor {
            args: args.into_iter(),
            pending: None,
        }
    }

    fn next(&mut self) -> Option<String> {
        let arg = self.args.next()?;
        match arg.split_once('=') {
            Some((name, value)) if name.starts_with("--") => {
                self.pending = Some(value.to_string());
                Some(name.to_string())
            }
            _ => Some(arg),
        }
    }

    fn value(&mut self, option: &str) -> Result<String, String> {
        self.pending
            .take()
            .or_else(|| self.args.next())
            .ok_or_else(|| format!("{option} needs a value"))
    }

    fn number(&mut self, option: &str) -> Result<usize, String> {
        let text = self.value(option)?;
        positive(option, &text)
    }

    /// A comma-separated list of at least one name.
    fn list(&mut self, option: &str) -> Result<Vec<String>, String> {
        let list: Vec<String> = self
            .value(option)?
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect();
        if list.is_empty() {
            return Err(format!("{option} needs at least one name"));
        }
        Ok(list)
    }

    fn rest(&mut self) -> Vec<String> {
        self.args.by_ref().collect()
    }

    /// A `--flag=value` given to an option that takes no value.
    fn check_no_value(&mut self, option: &str) -> Result<(), String> {
        match self.pending.take() {
            Some(_) => Err(format!("{option} takes no value")),
            None => Ok(()),
        }
    }
}

/// Parses the arguments after the program name; an error is a one-line usage message.
pub fn parse(args: Vec<String>) -> Result<Command, String> {
    let mut cursor = Cursor::new(args);
    let Some(sub) = cursor.next() else {
        return Ok(Command::Help);
    };
    match sub.as_str() {
        "run" | "compare" => parse_launch(&sub, &mut cursor),
        "report" => parse_report(&mut cursor),
        "replay" => parse_replay(&mut cursor),
        "generate" => parse_generate(&mut cursor),
        "figures" => parse_figures(&mut cursor),
        "_rank" => {
            let dir = cursor.next().ok_or("_rank needs a directory")?;
            match cursor.next().as_deref() {
                Some("--") => {}
                _ => return Err("_rank needs -- before the program".into()),
            }
            let program = cursor.rest();
            if program.is_empty() {
                return Err("_rank needs a program".into());
            }
            Ok(Command::Rank {
                dir: dir.into(),
                program,
            })
        }
        "help" | "-h" | "--help" => Ok(Command::Help),
        "-V" | "--version" => Ok(Command::Version),
        other => Err(format!(
            "unknown command {other:?} (run, report, compare, replay, generate, figures)"
        )),
    }
}

fn parse_launch(sub: &str, cursor: &mut Cursor) -> Result<Command, String> {
    let compare = sub == "compare";
    let (mut mpi, mut lib, mut out, mut ranks) = (None, None, None, None);
    let (mut engine, mut engines, mut repeat, mut plot, mut per_rank) =
        (None, None, 1, None, false);
    let mut program = Vec::new();
    while let Some(arg) = cursor.next() {
        match arg.as_str() {
            "--mpi" => {
                let name = cursor.value(&arg)?;
                if name != "mpich" && name != "openmpi" {
                    return Err(format!("--mpi is mpich or openmpi, not {name:?}"));
                }
                mpi = Some(name);
            }
            "--lib" => lib = Some(PathBuf::from(cursor.value(&arg)?)),
            "--out" => out = Some(PathBuf::from(cursor.value(&arg)?)),
            "-n" | "-np" => ranks = Some(cursor.number(&arg)?),
            "--engine" if !compare => engine = Some(cursor.value(&arg)?),
            "--ranks" if !compare => {
                cursor.check_no_value(&arg)?;
                per_rank = true;
            }
            "--engines" if compare => engines = Some(cursor.list(&arg)?),
            "--repeat" if compare => repeat = cursor.number(&arg)?,
            "--plot" if compare => plot = Some(PathBuf::from(cursor.value(&arg)?)),
            "--" => {
                program = cursor.rest();
                break;
            }
            option if option.starts_with('-') => {
                return Err(format!("{sub} does not take {option}"));
            }
            _ => {
                program.push(arg);
                program.extend(cursor.rest());
                break;
            }
        }
    }
    let ranks = ranks.ok_or_else(|| format!("{sub} needs -n RANKS"))?;
    if program.is_empty() {
        return Err(format!("{sub} needs a program after --"));
    }
    let launch = Launch {
        mpi,
        lib,
        out,
        ranks,
        program,
    };
    Ok(if compare {
        Command::Compare {
            launch,
            engines,
            repeat,
            plot,
        }
    } else {
        Command::Run {
            launch,
            engine,
            per_rank,
        }
    })
}

fn parse_report(cursor: &mut Cursor) -> Result<Command, String> {
    let (mut dirs, mut json, mut per_rank) = (Vec::new(), false, false);
    while let Some(arg) = cursor.next() {
        match arg.as_str() {
            "--json" => {
                cursor.check_no_value(&arg)?;
                json = true;
            }
            "--ranks" => {
                cursor.check_no_value(&arg)?;
                per_rank = true;
            }
            option if option.starts_with('-') => {
                return Err(format!("report does not take {option}"));
            }
            _ => dirs.push(PathBuf::from(arg)),
        }
    }
    if dirs.is_empty() {
        return Err("report needs a RUN_DIR".into());
    }
    Ok(Command::Report {
        dirs,
        json,
        per_rank,
    })
}

fn parse_replay(cursor: &mut Cursor) -> Result<Command, String> {
    let (mut dir, mut engines, mut repeat, mut plot) = (None, None, 3, None);
    let (mut per_rank, mut json) = (false, false);
    while let Some(arg) = cursor.next() {
        match arg.as_str() {
            "--engines" => engines = Some(cursor.list(&arg)?),
            "--repeat" => repeat = cursor.number(&arg)?,
            "--plot" => plot = Some(PathBuf::from(cursor.value(&arg)?)),
            "--ranks" => {
                cursor.check_no_value(&arg)?;
                per_rank = true;
            }
            "--json" => {
                cursor.check_no_value(&arg)?;
                json = true;
            }
            option if option.starts_with('-') => {
                return Err(format!("replay does not take {option}"));
            }
            _ if dir.is_some() => return Err("replay takes one TRACE_DIR".into()),
            _ => dir = Some(PathBuf::from(arg)),
        }
    }
    Ok(Command::Replay {
        dir: dir.ok_or("replay needs a TRACE_DIR")?,
        engines,
        repeat,
        per_rank,
        json,
        plot,
    })
}

fn parse_generate(cursor: &mut Cursor) -> Result<Command, String> {
    let (mut ranks, mut out, mut machine, mut keep, mut seed) =
        (None, None, "cluster".to_string(), None, 1);
    let mut program = Vec::new();
    while let Some(arg) = cursor.next() {
        match arg.as_str() {
            "-n" | "-np" => ranks = Some(cursor.number(&arg)?),
            "--out" => out = Some(PathBuf::from(cursor.value(&arg)?)),
            "--machine" => machine = cursor.value(&arg)?,
            "--keep" => {
                keep = match cursor.value(&arg)?.as_str() {
                    "all" => None,
                    text => Some(positive(&arg, text)?),
                }
            }
            "--seed" => seed = cursor.number(&arg)? as u64,
            "--" => {
                program = cursor.rest();
                break;
            }
            option if option.starts_with('-') => {
                return Err(format!("generate does not take {option}"));
            }
            _ => {
                program.push(arg);
                program.extend(cursor.rest());
                break;
            }
        }
    }
    if program.is_empty() {
        return Err("generate needs a program after --".into());
    }
    Ok(Command::Generate {
        ranks: ranks.ok_or("generate needs -n RANKS")?,
        out: out.ok_or("generate needs --out TRACE_DIR")?,
        machine,
        keep,
        seed,
        program,
    })
}

fn parse_figures(cursor: &mut Cursor) -> Result<Command, String> {
    let numbers = |cursor: &mut Cursor, option: &str| -> Result<Vec<usize>, String> {
        cursor
            .list(option)?
            .iter()
            .map(|t| positive(option, t))
            .collect()
    };
    let (mut out, mut ranks, mut threads) = (
        PathBuf::from("benches/paper"),
        vec![64, 256, 1024, 4096],
        vec![1, 2, 4, 8, 16],
    );
    let (mut keep, mut repeat, mut seed) = (16, 3, 1);
    while let Some(arg) = cursor.next() {
        match arg.as_str() {
            "--out" => out = PathBuf::from(cursor.value(&arg)?),
            "--ranks" => ranks = numbers(cursor, &arg)?,
            "--threads" => threads = numbers(cursor, &arg)?,
            "--keep" => keep = cursor.number(&arg)?,
            "--repeat" => repeat = cursor.number(&arg)?,
            "--seed" => seed = cursor.number(&arg)? as u64,
            other => return Err(format!("figures does not take {other}")),
        }
    }
    if let Some(n) = ranks.iter().find(|&&n| n < 2) {
        return Err(format!("--ranks: {n} is fewer than 2 ranks"));
    }
    Ok(Command::Figures {
        out,
        ranks,
        threads,
        keep,
        repeat,
        seed,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(line: &str) -> Result<Command, String> {
        parse(line.split_whitespace().map(String::from).collect())
    }

    #[test]
    fn run_takes_options_then_the_program() {
        let cmd = parse_str("run --engine=list --mpi openmpi -n 4 -- ./app -n 7 --x").unwrap();
        let Command::Run {
            launch,
            engine,
            per_rank,
        } = cmd
        else {
            panic!("{cmd:?}")
        };
        assert_eq!(engine.as_deref(), Some("list"));
        assert_eq!(launch.mpi.as_deref(), Some("openmpi"));
        assert_eq!(launch.ranks, 4);
        assert_eq!(launch.program, ["./app", "-n", "7", "--x"]);
        assert!(!per_rank);
    }

    #[test]
    fn the_program_may_follow_without_separator() {
        let Command::Run { launch, .. } = parse_str("run -n 2 ./app --flag").unwrap() else {
            panic!()
        };
        assert_eq!(launch.program, ["./app", "--flag"]);
    }

    #[test]
    fn compare_splits_engines_and_reads_repeat_and_plot() {
        let cmd =
            parse_str("compare --engines list,rank --repeat 3 --plot p.svg -n 2 -- ./a").unwrap();
        let Command::Compare {
            engines,
            repeat,
            plot,
            launch,
        } = cmd
        else {
            panic!()
        };
        assert_eq!(engines.unwrap(), ["list", "rank"]);
        assert_eq!((repeat, plot.unwrap()), (3, PathBuf::from("p.svg")));
        assert_eq!(launch.program, ["./a"]);
    }

    #[test]
    fn report_takes_dirs_and_flags() {
        let cmd = parse_str("report --json a b --ranks").unwrap();
        assert_eq!(
            cmd,
            Command::Report {
                dirs: vec!["a".into(), "b".into()],
                json: true,
                per_rank: true
            }
        );
    }

    #[test]
    fn usage_errors_say_what_is_wrong() {
        assert!(parse_str("run -- ./a").unwrap_err().contains("-n"));
        assert!(parse_str("run -n 2").unwrap_err().contains("program"));
        assert!(parse_str("run -n zero ./a")
            .unwrap_err()
            .contains("positive"));
        assert!(parse_str("run --mpi lam -n 2 ./a")
            .unwrap_err()
            .contains("mpich or openmpi"));
        assert!(parse_str("run --engines list -n 2 ./a")
            .unwrap_err()
            .contains("--engines"));
        assert!(parse_str("compare --repeat 0 -n 2 ./a")
            .unwrap_err()
            .contains("positive"));
        assert!(parse_str("report").unwrap_err().contains("RUN_DIR"));
        assert!(parse_str("report --json=1 d")
            .unwrap_err()
            .contains("no value"));
        assert!(parse_str("frobnicate")
            .unwrap_err()
            .contains("unknown command"));
    }

    #[test]
    fn replay_takes_a_directory_and_options() {
        let cmd =
            parse_str("replay --engines list,bins --repeat 5 --ranks t --plot p.svg").unwrap();
        assert_eq!(
            cmd,
            Command::Replay {
                dir: "t".into(),
                engines: Some(vec!["list".into(), "bins".into()]),
                repeat: 5,
                per_rank: true,
                json: false,
                plot: Some("p.svg".into()),
            }
        );
        let Command::Replay { repeat, .. } = parse_str("replay --json t").unwrap() else {
            panic!()
        };
        assert_eq!(repeat, 3);
        assert!(parse_str("replay").unwrap_err().contains("TRACE_DIR"));
        assert!(parse_str("replay a b")
            .unwrap_err()
            .contains("one TRACE_DIR"));
        assert!(parse_str("replay --engines , t")
            .unwrap_err()
            .contains("at least one"));
        assert!(parse_str("replay -n 2 t").unwrap_err().contains("-n"));
    }

    #[test]
    fn generate_takes_ranks_a_directory_and_the_program() {
        let cmd = parse_str("generate -n 64 --keep 8 --out t -- app_nbody -b 16").unwrap();
        assert_eq!(
            cmd,
            Command::Generate {
                ranks: 64,
                out: "t".into(),
                machine: "cluster".into(),
                keep: Some(8),
                seed: 1,
                program: vec!["app_nbody".into(), "-b".into(), "16".into()],
            }
        );
        let Command::Generate { keep, machine, .. } =
            parse_str("generate --machine local --keep all -n 2 --out t coll hotspot").unwrap()
        else {
            panic!()
        };
        assert_eq!((keep, machine.as_str()), (None, "local"));
        assert!(parse_str("generate -n 2 --out t")
            .unwrap_err()
            .contains("program"));
        assert!(parse_str("generate --out t halo_mt")
            .unwrap_err()
            .contains("-n"));
        assert!(parse_str("generate -n 2 halo_mt")
            .unwrap_err()
            .contains("--out"));
        assert!(parse_str("generate --keep x -n 2 --out t halo_mt")
            .unwrap_err()
            .contains("positive"));
    }

    #[test]
    fn figures_default_to_paper_scale() {
        let Command::Figures {
            out, ranks, keep, ..
        } = parse_str("figures").unwrap()
        else {
            panic!()
        };
        assert_eq!(
            (out, ranks, keep),
            ("benches/paper".into(), vec![64, 256, 1024, 4096], 16)
        );
        let Command::Figures { ranks, threads, .. } =
            parse_str("figures --ranks 16,32 --threads 1,3").unwrap()
        else {
            panic!()
        };
        assert_eq!((ranks, threads), (vec![16, 32], vec![1, 3]));
        assert!(parse_str("figures --ranks 1")
            .unwrap_err()
            .contains("fewer than 2"));
        assert!(parse_str("figures x")
            .unwrap_err()
            .contains("does not take x"));
    }

    #[test]
    fn rank_wrapper_needs_separator_and_program() {
        let cmd = parse_str("_rank /d -- env A=1 ./a").unwrap();
        assert_eq!(
            cmd,
            Command::Rank {
                dir: "/d".into(),
                program: vec!["env".into(), "A=1".into(), "./a".into()]
            }
        );
        assert!(parse_str("_rank /d --").is_err());
    }
}
