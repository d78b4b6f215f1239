//! Launching a program with MPI, natively or under the shim, and keeping what it left in a run
//! directory: `meta.json`, `report.jsonl` (one line per rank) and each rank's exit status and
//! stderr (`rank-N.exit`, `rank-N.stderr`, written by the `_rank` wrapper around every rank).

use crate::bypass;
use crate::elf::Elf;
use crate::launch::Launch;
use crate::reports::{self, RankReport, VERSION};
use matchshim_core::config::Config;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

/// The command's own variable.
const LIB_VAR: &str = "MATCHSHIM_LIB";
/// Kept from the ranks, whose shim refuses `MATCHSHIM_*` names it does not know.
const NOT_FOR_RANKS: [&str; 1] = [LIB_VAR];
/// Set by the command for every run.
const REPORT_VAR: &str = "MATCHSHIM_REPORT";
const VERBOSE_VAR: &str = "MATCHSHIM_VERBOSE";
const REPORT: &str = "report.jsonl";
const META: &str = "meta.json";
/// Launcher output when a run's output is kept rather than shown.
const OUTPUT: &str = "output.log";
const TAIL_LINES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Mpi {
    Mpich,
    Openmpi,
}

impl Mpi {
    pub fn name(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpich",
            Mpi::Openmpi => "openmpi",
        }
    }

    pub fn launcher(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpiexec.mpich",
            Mpi::Openmpi => "mpiexec.openmpi",
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Mpi::Mpich => "MPICH",
            Mpi::Openmpi => "Open MPI",
        }
    }

    /// Builds the shim for this MPI in its own target directory, keeping the other's.
    fn build_hint(self) -> &'static str {
        match self {
            Mpi::Mpich => "MPICC=mpicc.mpich cargo build --release",
            Mpi::Openmpi => {
                "MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release"
            }
        }
    }

    /// The MPI of the `mpiexec` first on PATH, by what its `--version` says; else the first
    /// MPI whose own launcher (`mpiexec.mpich`, `mpiexec.openmpi`) is on PATH.
    pub fn of_path() -> Result<(Mpi, String), String> {
        if on_path("mpiexec").is_some() {
            if let Some(mpi) = crate::launch::Launcher::detect("mpiexec").mpi() {
                return Ok((mpi, "mpiexec on PATH is the launcher of".to_string()));
            }
        }
        [Mpi::Mpich, Mpi::Openmpi]
            .into_iter()
            .find(|m| on_path(m.launcher()).is_some())
            .map(|m| (m, format!("{} is on PATH, the launcher of", m.launcher())))
            .ok_or_else(|| {
                "no MPI launcher found: none of mpiexec, mpiexec.mpich, mpiexec.openmpi is on PATH"
                    .into()
            })
    }
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// The program as the launcher will find it: a path, or a name on PATH.
pub fn find_program(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        Some(PathBuf::from(program)).filter(|p| is_executable(p))
    } else {
        on_path(program)
    }
}

pub fn check_program(program: &str) -> Result<PathBuf, String> {
    let path = Path::new(program);
    if program.contains('/') && path.is_file() && !is_executable(path) {
        return Err(format!("program is not executable: {program}"));
    }
    find_program(program).ok_or_else(|| format!("program not found: {program}"))
}

/// The MPI a program or a shim library links, if its ELF file says.
pub fn mpi_of(path: &Path) -> Option<Mpi> {
    Elf::read(path).ok().flatten()?.mpi()
}

/// Where the shim for `mpi` may be, in order: installed beside this command
/// (`PREFIX/bin/matchshim`, `PREFIX/lib/matchshim/MPI/`), in the build directory that holds it,
/// and in the build tree around it (`target/`, `target/openmpi/`, `target/mpich/`).
fn lib_candidates(exe: &Path, mpi: Mpi) -> Vec<PathBuf> {
    const LIB: &str = "libmatchshim.so";
    let Some(dir) = exe.parent() else {
        return Vec::new();
    };
    let mut candidates = vec![
        dir.join("../lib/matchshim").join(mpi.name()).join(LIB),
        dir.join(LIB),
    ];
    let is_repo = |d: &Path| d.join("Cargo.toml").is_file() && d.join("ci/engines").is_file();
    if let Some(root) = exe.ancestors().find(|d| is_repo(d)) {
        for target in ["target", "target/openmpi", "target/mpich"] {
            candidates.push(root.join(target).join("release").join(LIB));
        }
    }
    candidates
}

/// `--lib`, else `MATCHSHIM_LIB`, else the first build for `mpi` among `lib_candidates`. A
/// library built for the other MPI is refused before anything runs.
pub fn find_lib(given: Option<&Path>, mpi: Mpi) -> Result<PathBuf, String> {
    let named = match (given, std::env::var_os(LIB_VAR)) {
        (Some(lib), _) => Some((lib.to_path_buf(), "--lib")),
        (None, Some(lib)) if !lib.is_empty() => Some((PathBuf::from(lib), LIB_VAR)),
        _ => None,
    };
    if let Some((lib, from)) = named {
        if !lib.is_file() {
            return Err(format!(
                "shim library not found: {} (from {from})",
                lib.display()
            ));
        }
        if let Some(built) = mpi_of(&lib).filter(|m| *m != mpi) {
            return Err(format!(
                "{} (from {from}) was built for {}, but the program uses {}",
                lib.display(),
                built.describe(),
                mpi.describe()
            ));
        }
        return std::path::absolute(&lib).map_err(|e| format!("{}: {e}", lib.display()));
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let candidates = lib_candidates(&exe, mpi);
    match candidates
        .iter()
        .find(|lib| lib.is_file() && mpi_of(lib) == Some(mpi))
    {
        Some(lib) => std::fs::canonicalize(lib).map_err(|e| format!("{}: {e}", lib.display())),
        None => Err(format!(
            "no shim library for {} (looked for {}): install both MPIs' with              `ci/install.sh --prefix DIR` and run DIR/bin/matchshim, or build this one with `{}`,              or pass --lib",
            mpi.describe(),
            candidates
                .iter()
                .map(|c| c.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            mpi.build_hint()
        )),
    }
}

/// Variables for the ranks, by name and value.
pub type Vars = Vec<(String, String)>;

/// The variables the ranks get besides `MATCHSHIM_REPORT`: `MATCHSHIM_VERBOSE=0`, then the
/// caller's `MATCHSHIM_*` ones, overridden by `given`.
pub fn rank_vars(given: &[(String, String)]) -> Vars {
    // The command reports itself: rank 0's line at MPI_Finalize would say it twice.
    let mut vars: BTreeMap<String, String> = [(VERBOSE_VAR.to_string(), "0".to_string())].into();
    vars.extend(std::env::vars().filter(|(name, _)| {
        name.starts_with("MATCHSHIM_")
            && !NOT_FOR_RANKS.contains(&name.as_str())
            && name != REPORT_VAR
    }));
    vars.extend(given.iter().cloned());
    vars.into_iter().collect()
}

/// Checks `vars` as the shim will at `MPI_Init`, with its own parser, and returns the engine
/// it will use.
pub fn check_vars(vars: &[(String, String)]) -> Result<String, String> {
    let report = (REPORT_VAR.to_string(), REPORT.to_string());
    Config::from_vars(vars.iter().cloned().chain([report])).map(|c| c.engine.name().to_string())
}

/// What `meta.json` records about a run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub matchshim: String,
    /// The program and its arguments.
    pub command: Vec<String>,
    /// The launcher and its options.
    #[serde(default)]
    pub launcher: Vec<String>,
    /// `null` for a native run.
    pub engine: Option<String>,
    /// The `MATCHSHIM_*` variables the ranks got (besides the report's path).
    #[serde(default)]
    pub vars: BTreeMap<String, String>,
    pub mpi: Mpi,
    pub ranks: usize,
    pub lib: Option<PathBuf>,
    pub started: String,
    pub wall_time_ns: u64,
    pub exit_code: i32,
}

/// The shim as one run uses it.
pub struct Shim<'a> {
    pub lib: &'a Path,
    /// What the ranks get (`rank_vars`), checked with `check_vars`.
    pub vars: &'a [(String, String)],
    /// The engine those variables choose.
    pub engine: &'a str,
}

/// One launch of a program.
pub struct Spec<'a> {
    pub launch: &'a Launch,
    pub mpi: Mpi,
    /// `None`: a native run.
    pub shim: Option<Shim<'a>>,
    pub dir: &'a Path,
    /// Keep the program's and launcher's output in the run directory instead of showing it.
    pub quiet: bool,
}

/// Ranks and cores of one host, as the rank wrappers saw them.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize)]
pub struct Host {
    pub name: String,
    pub ranks: usize,
    pub cores: usize,
}

/// A run that went through.
pub struct Outcome {
    pub meta: Meta,
    /// Every rank's report, sorted by rank (empty for a native run).
    pub reports: Vec<RankReport>,
    pub hosts: Vec<Host>,
}

/// Runs `spec` and checks that every rank exited cleanly and, under the shim, reported.
pub fn execute(spec: &Spec) -> Result<Outcome, String> {
    let dir = prepare_dir(spec.dir)?;
    let launch = spec.launch;
    let wrapper =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    let mut cmd = Command::new(&launch.words[0]);
    cmd.args(&launch.launcher_words()[1..])
        .arg(wrapper)
        .arg("_rank")
        .arg(&dir)
        .arg("--");
    if let Some(shim) = &spec.shim {
        // `env` in front of the program reaches the ranks whatever the launcher forwards, and
        // leaves the wrapper itself without the shim.
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", shim.lib.display()),
            _ => shim.lib.display().to_string(),
        };
        cmd.arg("env").arg(format!("LD_PRELOAD={preload}"));
        for (name, value) in shim.vars {
            cmd.arg(format!("{name}={value}"));
        }
        cmd.arg(format!("{REPORT_VAR}={}", dir.join(REPORT).display()));
    }
    cmd.args(launch.program());
    for name in NOT_FOR_RANKS {
        cmd.env_remove(name);
    }
    if spec.quiet {
        let log = std::fs::File::create(dir.join(OUTPUT))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
    } else {
        // Shown as it comes, and its start kept: the launcher's own error, should it fail.
        cmd.stderr(Stdio::piped());
    }
    let started = timestamp(true);
    let clock = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", launch.words[0]))?;
    let stderr_head = child
        .stderr
        .take()
        .map(|err| std::thread::spawn(move || tee_head(err)));
    let status = child
        .wait()
        .map_err(|e| format!("{}: {e}", launch.words[0]))?;
    let wall_time_ns = clock.elapsed().as_nanos() as u64;
    let launcher_output = match stderr_head {
        Some(thread) => thread.join().unwrap_or_default(),
        None => std::fs::read(dir.join(OUTPUT)).unwrap_or_default(),
    };
    let exit_code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let exits = rank_exits(&dir);
    let reports = match &spec.shim {
        Some(_) if dir.join(REPORT).exists() => reports::load(&dir.join(REPORT))?,
        _ => Vec::new(),
    };
    let ranks = launch
        .ranks
        .or(reports.first().map(|r| r.size))
        .unwrap_or(exits.len());
    let mut meta = Meta {
        matchshim: VERSION.to_string(),
        command: launch.program().to_vec(),
        launcher: launch.launcher_words().to_vec(),
        engine: spec.shim.as_ref().map(|s| s.engine.to_string()),
        vars: spec
            .shim
            .as_ref()
            .map(|s| s.vars.iter().cloned().collect())
            .unwrap_or_default(),
        mpi: spec.mpi,
        ranks,
        lib: spec.shim.as_ref().map(|s| s.lib.to_path_buf()),
        started,
        wall_time_ns,
        exit_code,
    };
    write_json(&dir.join(META), &meta)?;
    if exit_code != 0 && exits.is_empty() {
        return Err(format!(
            "{} failed before starting any rank (exit code {exit_code}): {}",
            launch.words[0],
            first_error(&launcher_output)
        ));
    }
    if let Some(crash) = crashed_rank(&dir, &exits) {
        return Err(crash);
    }
    let missing = spec
        .shim
        .as_ref()
        .and_then(|shim| check_reports(&dir, &reports, ranks, launch, shim.lib).err());
    if exit_code != 0 {
        let mut message = format!("{} exited with code {exit_code}", launch.words[0]);
        // A launcher may fail a job whose ranks skipped MPI_Finalize, or may not: say why
        // either way.
        if let Some(missing) = missing {
            message.push_str(&format!("; {missing}"));
        }
        if spec.quiet {
            message.push_str(&format!("; {}", tail(&dir.join(OUTPUT))));
        }
        return Err(message);
    }
    if let Some(missing) = missing {
        return Err(missing);
    }
    if let Some(first) = reports.first() {
        // The shim's own word on the engine (the same as `check_vars` said).
        meta.engine = Some(first.engine.clone());
        write_json(&dir.join(META), &meta)?;
    }
    Ok(Outcome {
        meta,
        reports,
        hosts: hosts(&exits),
    })
}

/// Every rank reported, or why not.
fn check_reports(
    dir: &Path,
    reports: &[RankReport],
    ranks: usize,
    launch: &Launch,
    lib: &Path,
) -> Result<(), String> {
    if reports.is_empty() {
        let program = &launch.program()[0];
        return Err(bypass::explain(
            &dir.join(REPORT),
            program,
            find_program(program).as_deref(),
            lib,
        ));
    }
    reports::check_complete(reports, ranks, &dir.join(REPORT))
}

/// Creates the run directory and clears what an earlier run there left.
fn prepare_dir(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let dir = std::path::absolute(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = [REPORT, META, OUTPUT].contains(&name.as_str())
            || (name.starts_with("rank-")
                && (name.ends_with(".exit") || name.ends_with(".stderr")));
        if ours {
            std::fs::remove_file(entry.path())
                .map_err(|e| format!("{}: {e}", entry.path().display()))?;
        }
    }
    Ok(dir)
}

pub fn read_meta(dir: &Path) -> Result<Option<Meta>, String> {
    let path = dir.join(META);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| format!("{}: {e}", path.display())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

/// The reports of a run directory, every rank present.
pub fn load_reports(dir: &Path, ranks: usize) -> Result<Vec<RankReport>, String> {
    let path = dir.join(REPORT);
    let reports = if path.exists() {
        reports::load(&path)?
    } else {
        Vec::new()
    };
    reports::check_complete(&reports, ranks, &path)?;
    Ok(reports)
}

fn write_json(path: &Path, value: &impl Serialize) -> Result<(), String> {
    let mut text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// How one rank ended, and where it ran, as its wrapper recorded it.
#[derive(Debug, Default, Serialize, Deserialize, PartialEq)]
struct RankExit {
    code: Option<i32>,
    signal: Option<i32>,
    #[serde(default)]
    host: Option<String>,
    /// Cores online on that host.
    #[serde(default)]
    cores: Option<usize>,
}

impl RankExit {
    fn failed(&self) -> bool {
        self.code != Some(0)
    }

    /// Killed by the launcher because another rank failed.
    fn collateral(&self) -> bool {
        matches!(
            self.signal,
            Some(libc::SIGKILL | libc::SIGTERM | libc::SIGINT)
        )
    }

    fn describe(&self) -> String {
        match (self.code, self.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(sig)) => format!("was killed by signal {sig} ({})", signal_name(sig)),
            (None, None) => "ended without a status".into(),
        }
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGILL => "SIGILL",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        _ => "signal",
    }
}

/// The `rank-N.exit` files of a run directory, by rank.
fn rank_exits(dir: &Path) -> Vec<(usize, RankExit)> {
    let mut exits: Vec<(usize, RankExit)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let rank = name
                .strip_prefix("rank-")?
                .strip_suffix(".exit")?
                .parse()
                .ok()?;
            let text = std::fs::read_to_string(entry.path()).ok()?;
            Some((rank, serde_json::from_str(&text).ok()?))
        })
        .collect();
    exits.sort_by_key(|(rank, _)| *rank);
    exits
}

/// Ranks per host, hosts in the order of their first rank.
fn hosts(exits: &[(usize, RankExit)]) -> Vec<Host> {
    let mut hosts: Vec<Host> = Vec::new();
    for (_, exit) in exits {
        let (Some(name), Some(cores)) = (&exit.host, exit.cores) else {
            continue;
        };
        match hosts.iter_mut().find(|h| &h.name == name) {
            Some(host) => host.ranks += 1,
            None => hosts.push(Host {
                name: name.clone(),
                ranks: 1,
                cores,
            }),
        }
    }
    hosts
}

/// The rank that failed first (one not merely killed in the cleanup), described in one line.
fn crashed_rank(dir: &Path, exits: &[(usize, RankExit)]) -> Option<String> {
    let failed: Vec<&(usize, RankExit)> = exits.iter().filter(|(_, e)| e.failed()).collect();
    let (rank, exit) = failed
        .iter()
        .find(|(_, e)| !e.collateral())
        .or(failed.first())?;
    Some(format!(
        "rank {rank} {}; {} (all of it: {})",
        exit.describe(),
        tail(&dir.join(format!("rank-{rank}.stderr"))),
        dir.join(format!("rank-{rank}.stderr")).display()
    ))
}

/// The first bytes of a launcher's stderr kept (enough for its own error message).
const HEAD_BYTES: usize = 64 * 1024;

/// Copies `from` to this process's stderr and returns its first `HEAD_BYTES`.
fn tee_head(mut from: impl Read) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        let _ = std::io::stderr().write_all(&buf[..n]);
        let room = HEAD_BYTES.saturating_sub(head.len()).min(n);
        head.extend_from_slice(&buf[..room]);
    }
    head
}

/// The first line of a launcher's output that says something (not a rule of dashes).
fn first_error(output: &[u8]) -> String {
    String::from_utf8_lossy(output)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.chars().all(|c| matches!(c, '-' | '=' | '*')))
        .map_or_else(|| "it printed nothing".to_string(), String::from)
}

/// The last lines of a log, on one line.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if lines.is_empty() {
        return "its stderr is empty".into();
    }
    let last: Vec<String> = lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| {
            if l.chars().count() > 200 {
                l.chars().take(200).collect::<String>() + "…"
            } else {
                l.to_string()
            }
        })
        .collect();
    format!("its stderr ended: {}", last.join(" | "))
}

/// `_rank DIR -- PROGRAM…`: runs one rank's process, copies its stderr to `rank-N.stderr` while
/// passing it on, and records how it ended in `rank-N.exit`; then ends the same way.
pub fn rank_wrapper(dir: &Path, program: &[String]) -> ExitCode {
    let rank = [
        "PMI_RANK",
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
        "PALS_RANKID",
    ]
    .iter()
    .find_map(|v| std::env::var(v).ok())
    .unwrap_or_else(|| "unknown".into());
    let mut log = std::fs::File::create(dir.join(format!("rank-{rank}.stderr"))).ok();
    let mut cmd = Command::new(&program[0]);
    cmd.args(&program[1..]).stderr(Stdio::piped());
    // SAFETY: prctl is async-signal-safe; the rank dies with its wrapper when the launcher
    // kills the wrapper during a cleanup, instead of running on unowned.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    let mut exit = match cmd.spawn() {
        Ok(mut child) => {
            if let Some(mut err) = child.stderr.take() {
                let mut buf = [0u8; 8192];
                while let Ok(n @ 1..) = err.read(&mut buf) {
                    let _ = std::io::stderr().write_all(&buf[..n]);
                    if let Some(log) = log.as_mut() {
                        let _ = log.write_all(&buf[..n]);
                    }
                }
            }
            match child.wait() {
                Ok(status) => RankExit {
                    code: status.code(),
                    signal: status.signal(),
                    ..RankExit::default()
                },
                Err(_) => RankExit::default(),
            }
        }
        Err(e) => {
            let message = format!("matchshim: cannot start {}: {e}\n", program[0]);
            let _ = std::io::stderr().write_all(message.as_bytes());
            if let Some(log) = log.as_mut() {
                let _ = log.write_all(message.as_bytes());
            }
            RankExit {
                code: Some(127),
                ..RankExit::default()
            }
        }
    };
    (exit.host, exit.cores) = (hostname(), online_cores());
    let _ = write_json(&dir.join(format!("rank-{rank}.exit")), &exit);
    if let Some(sig) = exit.signal {
        // End by the same signal so the launcher reports what really happened.
        // SAFETY: restoring the default action and raising a signal on ourselves.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        }
    }
    ExitCode::from(exit.code.map_or(1, |c| c.clamp(0, 255) as u8))
}

fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return None;
    }
    let len = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    Some(String::from_utf8_lossy(&buf[..len]).into_owned())
}

/// Cores online on this host (not the few a launcher may have bound the rank to).
pub fn online_cores() -> Option<usize> {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).ok().filter(|&n| n > 0)
}

/// Local time as `2025-01-31T12:00:00` (`iso`) or `20250131-120000` (for directory names).
pub fn timestamp(iso: bool) -> String {
    // SAFETY: time and localtime_r write only into the values we pass.
    let tm = unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&now, &mut tm);
        tm
    };
    let (y, mo, d) = (tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday);
    let (h, mi, s) = (tm.tm_hour, tm.tm_min, tm.tm_sec);
    if iso {
        format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}")
    } else {
        format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
    }
}

/// `matchshim-runs/<time>-<label>`, made unique if a run started in the same second.
pub fn default_dir(label: &str) -> PathBuf {
    let base = PathBuf::from("matchshim-runs").join(format!("{}-{label}", timestamp(false)));
    let mut dir = base.clone();
    let mut n = 2;
    while dir.exists() {
        dir = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    dir
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("matchshim-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_crash_names_the_first_real_failure_and_its_stderr() {
        let dir = scratch("crash");
        let exit = |code: Option<i32>, signal: Option<i32>| {
            serde_json::to_string(&RankExit {
                code,
                signal,
                ..RankExit::default()
            })
            .unwrap()
        };
        std::fs::write(dir.join("rank-0.exit"), exit(None, Some(libc::SIGKILL))).unwrap();
        std::fs::write(dir.join("rank-1.exit"), exit(None, Some(libc::SIGSEGV))).unwrap();
        std::fs::write(dir.join("rank-2.exit"), exit(Some(0), None)).unwrap();
        std::fs::write(dir.join("rank-1.stderr"), "a\nb\n\nc\nd\n").unwrap();
        let message = crashed_rank(&dir, &rank_exits(&dir)).unwrap();
        assert!(
            message.starts_with(
                "rank 1 was killed by signal 11 (SIGSEGV); its stderr ended: b | c | d"
            ),
            "{message}"
        );
        std::fs::write(dir.join("rank-1.exit"), exit(Some(0), None)).unwrap();
        assert!(crashed_rank(&dir, &rank_exits(&dir))
            .unwrap()
            .starts_with("rank 0 was killed by signal 9 (SIGKILL); its stderr is empty"));
        std::fs::write(dir.join("rank-0.exit"), exit(Some(0), None)).unwrap();
        assert_eq!(crashed_rank(&dir, &rank_exits(&dir)), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_launchers_error_is_its_first_line_that_says_something() {
        let open_mpi = b"-----------------\nmpiexec.openmpi has detected an attempt to run as \
                         root.\n\nRunning as root is *strongly* discouraged\n";
        assert_eq!(
            first_error(open_mpi),
            "mpiexec.openmpi has detected an attempt to run as root."
        );
        assert_eq!(first_error(b"\n  \n====\n"), "it printed nothing");
    }

    #[test]
    fn ranks_are_counted_per_host() {
        let on = |host: &str| RankExit {
            code: Some(0),
            host: Some(host.to_string()),
            cores: Some(2),
            ..RankExit::default()
        };
        let exits = vec![
            (0, on("a")),
            (1, on("b")),
            (2, on("a")),
            (3, RankExit::default()),
        ];
        let host = |name: &str, ranks| Host {
            name: name.to_string(),
            ranks,
            cores: 2,
        };
        assert_eq!(hosts(&exits), [host("a", 2), host("b", 1)]);
    }

    #[test]
    fn an_earlier_runs_files_are_cleared_and_others_kept() {
        let dir = scratch("prepare");
        for name in [
            "report.jsonl",
            "meta.json",
            "rank-3.exit",
            "rank-3.stderr",
            "notes.txt",
        ] {
            std::fs::write(dir.join(name), "x").unwrap();
        }
        prepare_dir(&dir).unwrap();
        let left: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(left, ["notes.txt"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn programs_are_found_as_the_launcher_would() {
        assert!(check_program("sh").unwrap().ends_with("sh"));
        assert_eq!(
            check_program("./no-such-app").unwrap_err(),
            "program not found: ./no-such-app"
        );
        assert!(check_program("no-such-app-on-path").is_err());
        let dir = scratch("program");
        std::fs::write(dir.join("data"), "x").unwrap();
        let err = check_program(dir.join("data").to_str().unwrap()).unwrap_err();
        assert!(err.starts_with("program is not executable"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_library_says_how_to_build_it() {
        let err = find_lib(Some(Path::new("/nonexistent/lib.so")), Mpi::Mpich).unwrap_err();
        assert_eq!(
            err,
            "shim library not found: /nonexistent/lib.so (from --lib)"
        );
    }

    #[test]
    fn an_installed_command_looks_in_its_prefix_first() {
        let candidates = lib_candidates(Path::new("/opt/ms/bin/matchshim"), Mpi::Openmpi);
        assert_eq!(
            candidates,
            [
                Path::new("/opt/ms/bin/../lib/matchshim/openmpi/libmatchshim.so"),
                Path::new("/opt/ms/bin/libmatchshim.so")
            ]
        );
    }

    #[test]
    fn timestamps_have_fixed_shapes() {
        assert_eq!(timestamp(false).len(), "20250131-120000".len());
        assert_eq!(timestamp(true).len(), "2025-01-31T12:00:00".len());
    }
}
