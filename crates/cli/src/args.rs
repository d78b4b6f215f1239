//! The command line, defined once: every sub-command's `--help` comes from here, with the
//! engines, modes and defaults the shim itself knows.

use crate::runs::Mpi;
use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use matchshim_core::config::{CollMode, Config, KNOWN};
use matchshim_core::matching::EngineKind;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "matchshim",
    version,
    about = "Runs MPI programs under the matchshim library, which takes MPI message matching into \
             its own queues, and reports and compares what its matching engines did."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Runs an MPI program under the shim and prints what matching did
    #[command(after_help = run_examples())]
    Run(RunArgs),
    /// Prints the summary of earlier runs
    Report(ReportArgs),
    /// Runs a program natively and under the shim's engines, and says whether to use the shim
    /// and with which engine
    #[command(after_help = compare_examples())]
    Compare(CompareArgs),
    /// Runs recorded or generated traces through each engine with no MPI: search depths, search
    /// time speedups over list, queues and heap bytes per rank
    Replay(ReplayArgs),
    /// Writes the traces a program would leave on N ranks, from a simulation of it on the
    /// shim: one of the traffic patterns the generator models, at any scale
    #[command(after_long_help = generate_programs())]
    Generate(GenerateArgs),
    /// The figures of Ghazimirsaeed et al. (2019, Figs. 7-10: search time speedups and queues
    /// against n) and Dosanjh et al. (2018: search depth against threads) from generated traces:
    /// SVG figures and tables.md
    Figures(FiguresArgs),
    /// Wraps one rank's process (the launcher starts it): records its exit status and stderr
    #[command(name = "_rank", hide = true)]
    Rank {
        dir: PathBuf,
        #[arg(last = true, required = true)]
        program: Vec<String>,
    },
    /// Prints a completion script for SHELL (ci/install.sh installs them)
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Writes a man page for the command and for each sub-command into DIR
    #[command(name = "_man", hide = true)]
    Man { dir: PathBuf },
    /// Prints the CUDA driver, devices and NVRTC the gpu engine finds
    Gpu {
        /// Writes the kernels compiled to PTX into DIR (needs NVRTC): for the first
        /// architecture of each generation from sm_70 that NVRTC supports, or for --arch
        #[arg(long, value_name = "DIR")]
        ptx: Option<PathBuf>,
        /// An architecture to compile for with --ptx, as 90 for sm_90 (repeatable)
        #[arg(long, value_name = "N", requires = "ptx")]
        arch: Vec<i32>,
    },
}

/// Where and how to launch the program.
#[derive(Args, Debug)]
pub struct LaunchArgs {
    /// Starts N ranks with the MPI's own mpiexec (mpiexec.mpich, mpiexec.openmpi); COMMAND is
    /// then the program and its arguments. Without -n, COMMAND starts with a launcher
    #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub ranks: Option<u32>,
    /// The MPI the program uses [default: the one it loads (its ELF file's libraries, or for a
    /// Python program those of mpi4py's module), else the launcher's, else the mpiexec first on
    /// PATH, by its --version]
    #[arg(long, value_enum)]
    pub mpi: Option<Mpi>,
    /// The shim library [default: MATCHSHIM_LIB, else PREFIX/lib/matchshim/MPI/ beside this
    /// command, else the build tree this command is in]
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
    /// Directory for the runs' files [default: matchshim-runs/TIME-LABEL]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// With -n: PROGRAM [ARGS]. Without: LAUNCHER [OPTIONS] PROGRAM [ARGS], any launcher
    /// (srun, mpirun, mpiexec.mpich, mpiexec.openmpi, ...)
    #[arg(
        value_name = "COMMAND",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub command: Vec<String>,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
    #[arg(long, value_parser = engine_names(), help = engine_help())]
    pub engine: Option<String>,
    #[arg(long, value_name = "MODE", value_parser = coll_names(), help = coll_help())]
    pub coll: Option<String>,
    #[arg(long, value_name = "MODE", value_parser = takeover_mode, help = takeover_help())]
    pub takeover: Option<String>,
    #[arg(long = "set", value_name = "NAME=VALUE", value_parser = setting, help = set_help(false))]
    pub set: Vec<(String, String)>,
    /// Also prints a row per rank
    #[arg(long = "ranks")]
    pub per_rank: bool,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    #[command(flatten)]
    pub launch: LaunchArgs,
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = engine_names_or_all(),
          help = compare_engines_help())]
    pub engines: Vec<String>,
    #[arg(long, value_name = "MODES", value_delimiter = ',', value_parser = coll_names(), help = coll_help())]
    pub coll: Vec<String>,
    #[arg(long, value_name = "MODES", value_delimiter = ',', value_parser = takeover_mode, help = takeover_help())]
    pub takeover: Vec<String>,
    #[arg(long = "set", value_name = "NAME=V1,V2", value_parser = setting, help = set_help(true))]
    pub set: Vec<(String, String)>,
    /// Runs of each variant, in rounds (medians and spreads are over them)
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Draws the speedups and queue counts as an SVG figure
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Prints the comparison and the recommendation as JSON (kept as compare.json either way)
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// Traces recorded with MATCHSHIM_TRACE=TRACE_DIR, or written by `matchshim generate`
    #[arg(value_name = "TRACE_DIR")]
    pub dir: PathBuf,
    /// Engines to replay, comma-separated [default: all]; list and rank always run (the
    /// baseline of speedups and the reference for queue counts)
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = engine_names())]
    pub engines: Vec<String>,
    /// Rounds; each trace's fastest round counts
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Also prints a row per rank
    #[arg(long = "ranks")]
    pub per_rank: bool,
    /// Prints JSON
    #[arg(long)]
    pub json: bool,
    /// Draws the speedups and queue counts as an SVG figure
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
}

/// The machine a generated run is simulated on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Machine {
    /// This kind of machine: 2 shared cores
    Local,
    /// A core per thread
    Cluster,
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Ranks (needed unless PROGRAM --help)
    #[arg(short = 'n', value_name = "N", value_parser = clap::value_parser!(u32).range(2..))]
    pub ranks: Option<u32>,
    /// Directory for the traces (needed unless PROGRAM --help)
    #[arg(long, value_name = "TRACE_DIR")]
    pub out: Option<PathBuf>,
    /// Replaces the traces TRACE_DIR already holds (without it, such a directory is refused)
    #[arg(long)]
    pub force: bool,
    #[arg(long, value_enum, default_value_t = Machine::Cluster)]
    pub machine: Machine,
    /// all, or K: rank 0, the last and evenly spaced ranks, K in all
    #[arg(long, value_name = "all|K", default_value = "all", value_parser = keep)]
    pub keep: Keep,
    /// Seed of the simulation's random choices
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The program and its options: coll hotspot, app_radix, app_nbody, app_miniamr or halo_mt
    /// (`-- PROGRAM --help` says what it does and the options it takes)
    #[arg(
        value_name = "PROGRAM",
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub program: Vec<String>,
}

/// Which ranks' traces a generated run keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    All,
    Sample(usize),
}

fn keep(text: &str) -> Result<Keep, String> {
    match text {
        "all" => Ok(Keep::All),
        _ => match text.parse::<usize>() {
            Ok(k) if k > 0 => Ok(Keep::Sample(k)),
            _ => Err(format!("all or a positive number, not {text:?}")),
        },
    }
}

#[derive(Args, Debug)]
pub struct FiguresArgs {
    /// Directory for the SVGs and tables.md
    #[arg(long, value_name = "DIR", default_value = "matchshim-figures")]
    pub out: PathBuf,
    /// Replaces figures DIR already holds (without it, such a directory is refused)
    #[arg(long)]
    pub force: bool,
    /// Communicator sizes of the figures after Ghazimirsaeed et al. (2019), comma-separated
    #[arg(long, value_name = "N1,N2,...", value_delimiter = ',', default_value = "64,256,1024,4096",
          value_parser = clap::value_parser!(u32).range(2..))]
    pub ranks: Vec<u32>,
    /// Threads per rank of the figure after Dosanjh et al. (2018), comma-separated
    #[arg(long, value_name = "T1,T2,...", value_delimiter = ',', default_value = "1,2,4,8,16",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Vec<u32>,
    /// Ranks whose traces are kept and replayed (rank 0, the last and evenly spaced ones)
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..))]
    pub keep: u32,
    /// Replay rounds; each trace's fastest counts
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Seed of the simulations' random choices
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run directories, compare directories, or report files the shim wrote to MATCHSHIM_REPORT
    #[arg(required = true, value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Prints JSON
    #[arg(long)]
    pub json: bool,
    /// Also prints a row per rank
    #[arg(long = "ranks")]
    pub per_rank: bool,
}

/// The shim's defaults: its configuration without variables.
pub fn defaults() -> Config {
    Config::from_vars(Vec::<(String, String)>::new())
        .expect("no variables is a valid configuration")
}

fn engine_names() -> PossibleValuesParser {
    PossibleValuesParser::new(EngineKind::ALL.iter().map(|k| k.name()))
}

fn engine_names_or_all() -> PossibleValuesParser {
    PossibleValuesParser::new(
        EngineKind::ALL
            .iter()
            .map(|k| k.name())
            .chain(std::iter::once("all")),
    )
}

fn compare_engines_help() -> String {
    format!(
        "Engines to compare, comma-separated, or all [default: list,{},bins]; list always runs \
         (the baseline of the speedups)",
        defaults().engine.name()
    )
}

fn coll_names() -> PossibleValuesParser {
    PossibleValuesParser::new(CollMode::ALL.map(CollMode::name))
}

fn engine_help() -> String {
    format!(
        "Matching engine (MATCHSHIM_ENGINE) [default: MATCHSHIM_ENGINE if set, else {}]",
        defaults().engine.name()
    )
}

fn coll_help() -> String {
    format!(
        "Who runs collectives (MATCHSHIM_COLL): MPI unless the shim's own algorithm pays \
         (auto), the shim on its own point-to-point (shim), or MPI (native) \
         [default: MATCHSHIM_COLL if set, else {}]",
        defaults().coll.name()
    )
}

/// Variables that have their own option, or that the command sets.
const NOT_SET: [&str; 4] = [
    "MATCHSHIM_ENGINE",
    "MATCHSHIM_COLL",
    "MATCHSHIM_TAKEOVER",
    "MATCHSHIM_REPORT",
];

/// The variables `--set` gives.
fn settable() -> String {
    KNOWN
        .iter()
        .filter(|name| !NOT_SET.contains(name))
        .copied()
        .collect::<Vec<_>>()
        .join(", ")
}

fn takeover_help() -> String {
    format!(
        "When the shim matches instead of MPI (MATCHSHIM_TAKEOVER): auto (MPI while queues are \
         short, the shim once they grow), always, flip:N (switching every N receives) \
         [default: MATCHSHIM_TAKEOVER if set, else {}]",
        defaults().takeover
    )
}

/// A takeover mode as the shim's own parser reads it.
fn takeover_mode(text: &str) -> Result<String, String> {
    Config::from_vars([("MATCHSHIM_TAKEOVER".to_string(), text.to_string())])
        .map(|_| text.to_string())
}

fn set_help(values: bool) -> String {
    let what = if values {
        "Runs every variant with each of the values (repeatable)"
    } else {
        "Gives the ranks another variable (repeatable)"
    };
    format!(
        "{what}. Checked, as every MATCHSHIM_* variable of the environment, by the shim's own \
         parser before anything runs. Variables: {}",
        settable()
    )
}

/// `NAME=VALUE` of a variable the ranks get; the engine, the mode and the report have their
/// own options.
fn setting(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    match name {
        "MATCHSHIM_ENGINE" => Err("give the engine with --engine (compare: --engines)".into()),
        "MATCHSHIM_COLL" => Err("give the collective mode with --coll".into()),
        "MATCHSHIM_TAKEOVER" => Err("give the takeover mode with --takeover".into()),
        "MATCHSHIM_REPORT" => {
            Err("the command sets MATCHSHIM_REPORT (in the run directory)".into())
        }
        _ if !KNOWN.contains(&name) => {
            Err(format!("unknown variable {name}; known: {}", settable()))
        }
        _ => Ok((name.to_string(), value.to_string())),
    }
}

/// Every program `generate` models, with its options.
fn generate_programs() -> String {
    let mut text =
        "Programs (their sources are ci/bench/*.c in matchshim's source tree):\n".to_string();
    for (_, usage) in matchshim_core::trace::generate::USAGE {
        text.push_str(&format!("\n{usage}\n"));
    }
    text.push_str(
        "\nExample:\n  matchshim generate -n 4096 --keep 16 --out nbody -- app_nbody -b 16 -c 2 -i 2\n  \
         matchshim replay nbody",
    );
    text
}

fn run_examples() -> String {
    format!(
        "\
Examples:
  matchshim run -n 4 -- ./app ARGS          with mpiexec of the MPI ./app links
  matchshim run --engine rank -- mpiexec.openmpi --oversubscribe --hostfile hosts -n 8 ./app
  matchshim run -- srun -N 2 --ntasks-per-node 16 ./app
  matchshim run --takeover always --set MATCHSHIM_K=4 -- mpirun -np 64 ./app

The ranks get LD_PRELOAD and the MATCHSHIM_* variables from an `env` put right before the program,
so they arrive whatever the launcher forwards; this command, the shim and the run directory must
be at the same paths on every node. Engines: {}.",
        EngineKind::accepted()
    )
}

fn compare_examples() -> String {
    "\
Examples:
  matchshim compare -n 4 -- ./app
  matchshim compare --engines all --repeat 5 --plot cmp.svg -n 4 -- ./app
  matchshim compare --engines col+pnp,bins --takeover auto,always -n 4 -- ./app
  matchshim compare --engines col+pnp --coll shim,native -n 4 -- ./app
  matchshim compare --set MATCHSHIM_K=4,16 -- srun -n 64 ./app

Runs the program natively and under every variant (engine x modes x --set values), in rounds,
after saying how many runs and about how long; measures the machine's load before and during
them; and ends with a recommendation: not needed where matching is under 1 % of the busiest
rank's time (or MPI matched every receive), else the variant to use, the gain to expect, the
whole run against native, and the queues it costs. `matchshim report DIR` prints it again."
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("matchshim").chain(line.split_whitespace()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_takes_options_then_the_command() {
        let Command::Run(run) = parse("run --engine=list --mpi openmpi -n 4 -- ./app -n 7 --x")
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(run.engine.as_deref(), Some("list"));
        assert_eq!(run.launch.mpi, Some(Mpi::Openmpi));
        assert_eq!(run.launch.ranks, Some(4));
        assert_eq!(run.launch.command, ["./app", "-n", "7", "--x"]);
        let Command::Run(run) = parse("run -n 2 ./app --flag").unwrap().command else {
            panic!()
        };
        assert_eq!(run.launch.command, ["./app", "--flag"]);
        let Command::Run(run) = parse("run -- srun -n 2 ./app").unwrap().command else {
            panic!()
        };
        assert_eq!((run.launch.ranks, run.launch.command.len()), (None, 4));
    }

    #[test]
    fn compare_splits_lists() {
        let line = "compare --engines list,rank --coll shim,native --takeover auto,flip:3 \
                    --set MATCHSHIM_K=4,8 --repeat 5 --plot p.svg --json -n 2 -- ./a";
        let Command::Compare(c) = parse(line).unwrap().command else {
            panic!()
        };
        assert_eq!(c.engines, ["list", "rank"]);
        assert_eq!(c.coll, ["shim", "native"]);
        assert_eq!(c.takeover, ["auto", "flip:3"]);
        assert_eq!(c.set, [("MATCHSHIM_K".to_string(), "4,8".to_string())]);
        assert_eq!((c.repeat, c.json), (5, true));
        assert_eq!(c.launch.command, ["./a"]);
    }

    #[test]
    fn bad_values_are_refused_before_anything_runs() {
        let error = |line: &str| parse(line).unwrap_err().to_string();
        assert!(error("run --engine fast -n 2 ./a").contains("col+pnp"));
        assert!(error("compare --engines list,foo -n 2 ./a").contains("'foo'"));
        assert!(error("run --coll mpi -n 2 ./a").contains("native"));
        // The shim's parser, word for word.
        assert!(error("run --takeover flip:0 -n 2 ./a")
            .contains("MATCHSHIM_TAKEOVER=\"flip:0\" is not valid; accepted values: auto, always"));
        assert!(error("run -n 0 ./a").contains("0"));
        assert!(error("compare --repeat 0 -n 2 ./a").contains("0"));
        assert!(error("run --set MATCHSHIM_FOO=1 -n 2 ./a").contains("MATCHSHIM_THETA"));
        assert!(error("run --set MATCHSHIM_ENGINE=list -n 2 ./a").contains("--engine"));
        assert!(error("run --set K -n 2 ./a").contains("NAME=VALUE"));
        assert!(error("run -n 2").contains("COMMAND"));
        assert!(error("report").contains("PATH"));
        assert!(error("frobnicate").contains("frobnicate"));
    }

    #[test]
    fn help_lists_engines_modes_and_defaults() {
        let mut cli = Cli::command();
        let run = cli.find_subcommand_mut("run").unwrap().render_long_help();
        let text = run.to_string();
        for engine in EngineKind::ALL {
            assert!(text.contains(engine.name()), "{text}");
        }
        assert!(
            text.contains("else col+pnp") && text.contains("else auto"),
            "{text}"
        );
        assert!(
            text.contains("srun") && text.contains("MATCHSHIM_THETA"),
            "{text}"
        );
    }

    #[test]
    fn trace_commands_take_their_options() {
        let Command::Replay(r) = parse("replay --engines list,bins --repeat 2 --ranks t")
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!((r.engines.len(), r.repeat, r.per_rank), (2, 2, true));
        assert!(parse("replay --engines nonesuch t").is_err());
        let Command::Generate(g) = parse("generate -n 64 --out t --keep 8 app_nbody -s 3")
            .unwrap()
            .command
        else {
            panic!()
        };
        assert_eq!(
            (g.keep, g.ranks, g.force),
            (Keep::Sample(8), Some(64), false)
        );
        assert_eq!(g.machine, Machine::Cluster);
        assert_eq!(g.program, ["app_nbody", "-s", "3"]);
        assert!(parse("generate -n 1 --out t app_nbody").is_err());
        let Command::Generate(g) = parse("generate -- app_nbody --help").unwrap().command else {
            panic!()
        };
        assert_eq!((g.ranks, g.program.len()), (None, 2));
        assert!(parse("generate -n 4 --out t --keep 0 app_nbody").is_err());
        let Command::Figures(f) = parse("figures --ranks 64,256").unwrap().command else {
            panic!()
        };
        assert_eq!((f.ranks, f.keep), (vec![64, 256], 16));
        assert!(parse("figures --ranks 1").is_err());
    }

    #[test]
    fn the_rank_wrapper_needs_a_program() {
        let Command::Rank { dir, program } = parse("_rank /d -- env A=1 ./a").unwrap().command
        else {
            panic!()
        };
        assert_eq!((dir, program.len()), (PathBuf::from("/d"), 3));
        assert!(parse("_rank /d --").is_err());
    }
}
