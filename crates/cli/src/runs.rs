//! Launching a program with MPI, natively or under the shim, and keeping what it left in a run
//! directory: `meta.json`, `report.jsonl` (one line per rank) and each rank's exit status and
//! stderr (`rank-N.exit`, `rank-N.stderr`, written by the `_rank` wrapper around every rank).

use crate::reports::{self, RankReport, VERSION};
use serde::{Deserialize, Serialize};
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
const REPORT: &str = "report.jsonl";
const META: &str = "meta.json";
/// Launcher output when a run's output is kept rather than shown.
const OUTPUT: &str = "output.log";
const TAIL_LINES: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
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

    fn launcher(self) -> &'static str {
        match self {
            Mpi::Mpich => "mpiexec.mpich",
            Mpi::Openmpi => "mpiexec.openmpi",
        }
    }

    /// The default build of the shim for this MPI, inside the repository at `root`.
    fn default_lib(self, root: &Path) -> PathBuf {
        match self {
            Mpi::Mpich => root.join("target/release/libmatchshim.so"),
            Mpi::Openmpi => root.join("target/openmpi/release/libmatchshim.so"),
        }
    }

    fn build_hint(self) -> &'static str {
        match self {
            Mpi::Mpich => "cargo build --release",
            Mpi::Openmpi => {
                "MPICC=mpicc.openmpi CARGO_TARGET_DIR=target/openmpi cargo build --release"
            }
        }
    }

    /// `--mpi` if given, else the first MPI whose launcher is on PATH.
    pub fn choose(name: Option<&str>) -> Result<Mpi, String> {
        match name {
            Some("mpich") => Mpi::Mpich.check(),
            Some("openmpi") => Mpi::Openmpi.check(),
            Some(other) => Err(format!("unknown MPI {other:?} (mpich, openmpi)")),
            None => [Mpi::Mpich, Mpi::Openmpi]
                .into_iter()
                .find(|m| on_path(m.launcher()).is_some())
                .ok_or_else(|| {
                    "no MPI launcher found: neither mpiexec.mpich nor mpiexec.openmpi is on PATH"
                        .into()
                }),
        }
    }

    fn check(self) -> Result<Mpi, String> {
        match on_path(self.launcher()) {
            Some(_) => Ok(self),
            None => Err(format!(
                "no MPI launcher found: {} is not on PATH",
                self.launcher()
            )),
        }
    }
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn on_path(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

/// The program as the launcher will find it: a path, or a name on PATH.
pub fn check_program(program: &str) -> Result<(), String> {
    let found = if program.contains('/') {
        let path = Path::new(program);
        if path.is_file() && !is_executable(path) {
            return Err(format!("program is not executable: {program}"));
        }
        is_executable(path)
    } else {
        on_path(program).is_some()
    };
    if found {
        Ok(())
    } else {
        Err(format!("program not found: {program}"))
    }
}

/// The repository this executable was built in (it holds the shim's default builds).
fn repo_root() -> PathBuf {
    let is_repo = |d: &Path| d.join("Cargo.toml").is_file() && d.join("ci/engines").is_file();
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().find(|d| is_repo(d)).map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")))
}

/// `--lib`, else `MATCHSHIM_LIB`, else the repository's build for `mpi`.
pub fn find_lib(given: Option<&Path>, mpi: Mpi) -> Result<PathBuf, String> {
    let (lib, from) = match (given, std::env::var_os(LIB_VAR)) {
        (Some(lib), _) => (lib.to_path_buf(), "--lib"),
        (None, Some(lib)) if !lib.is_empty() => (PathBuf::from(lib), LIB_VAR),
        _ => (mpi.default_lib(&repo_root()), ""),
    };
    if lib.is_file() {
        return std::path::absolute(&lib).map_err(|e| format!("{}: {e}", lib.display()));
    }
    Err(if from.is_empty() {
        format!(
            "no shim library for {} at {}: build it with `{}`, or pass --lib",
            mpi.name(),
            lib.display(),
            mpi.build_hint()
        )
    } else {
        format!("shim library not found: {} (from {from})", lib.display())
    })
}

/// What `meta.json` records about a run.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Meta {
    pub matchshim: String,
    pub command: Vec<String>,
    /// `null` for a native run.
    pub engine: Option<String>,
    pub mpi: Mpi,
    pub ranks: usize,
    pub lib: Option<PathBuf>,
    pub started: String,
    pub wall_time_ns: u64,
    pub exit_code: i32,
}

/// One launch of a program.
pub struct Spec<'a> {
    pub mpi: Mpi,
    pub ranks: usize,
    pub program: &'a [String],
    /// Under the shim: its library and the engine (`None`: the shim's default).
    pub shim: Option<(&'a Path, Option<&'a str>)>,
    pub dir: &'a Path,
    /// Keep the program's and launcher's output in the run directory instead of showing it.
    pub quiet: bool,
}

/// A run that went through.
pub struct Outcome {
    pub meta: Meta,
    /// Every rank's report, sorted by rank (empty for a native run).
    pub reports: Vec<RankReport>,
}

/// Runs `spec` and checks that every rank exited cleanly and, under the shim, reported.
pub fn execute(spec: &Spec) -> Result<Outcome, String> {
    let dir = prepare_dir(spec.dir)?;
    let mut cmd = Command::new(spec.mpi.launcher());
    if spec.mpi == Mpi::Openmpi {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            cmd.arg("--allow-run-as-root");
        }
        cmd.arg("--oversubscribe");
    }
    let wrapper =
        std::env::current_exe().map_err(|e| format!("cannot find this executable: {e}"))?;
    cmd.arg("-n")
        .arg(spec.ranks.to_string())
        .arg(wrapper)
        .arg("_rank")
        .arg(&dir)
        .arg("--");
    if let Some((lib, engine)) = spec.shim {
        // `env` inside the command reaches the ranks whatever the launcher forwards, and
        // leaves the wrapper itself without the shim.
        let preload = match std::env::var("LD_PRELOAD") {
            Ok(old) if !old.is_empty() => format!("{}:{old}", lib.display()),
            _ => lib.display().to_string(),
        };
        cmd.arg("env").arg(format!("LD_PRELOAD={preload}"));
        if let Some(engine) = engine {
            cmd.arg(format!("MATCHSHIM_ENGINE={engine}"));
        }
        cmd.arg(format!("MATCHSHIM_REPORT={}", dir.join(REPORT).display()));
    }
    cmd.args(spec.program);
    for name in NOT_FOR_RANKS {
        cmd.env_remove(name);
    }
    if spec.quiet {
        let log = std::fs::File::create(dir.join(OUTPUT))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let log2 = log.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(log).stderr(log2);
    }
    let started = timestamp(true);
    let clock = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot start {}: {e}", spec.mpi.launcher()))?;
    let wall_time_ns = clock.elapsed().as_nanos() as u64;
    let exit_code = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    let meta = Meta {
        matchshim: VERSION.to_string(),
        command: spec.program.to_vec(),
        engine: spec.shim.and_then(|(_, e)| e.map(String::from)),
        mpi: spec.mpi,
        ranks: spec.ranks,
        lib: spec.shim.map(|(lib, _)| lib.to_path_buf()),
        started,
        wall_time_ns,
        exit_code,
    };
    write_json(&dir.join(META), &meta)?;
    if let Some(crash) = crashed_rank(&dir, spec.ranks) {
        return Err(crash);
    }
    if exit_code != 0 {
        let mut message = format!("{} exited with code {exit_code}", spec.mpi.launcher());
        // A launcher may fail a job whose ranks skipped MPI_Finalize, or may not: say why
        // either way.
        if spec.shim.is_some() {
            if let Err(missing) = load_reports(&dir, spec.ranks) {
                message.push_str(&format!("; {missing}"));
            }
        }
        if spec.quiet {
            message.push_str(&format!("; {}", tail(&dir.join(OUTPUT))));
        }
        return Err(message);
    }
    if spec.shim.is_none() {
        return Ok(Outcome {
            meta,
            reports: Vec::new(),
        });
    }
    let reports = load_reports(&dir, spec.ranks)?;
    let mut meta = meta;
    if meta.engine.is_none() {
        // The shim chose (its default, or MATCHSHIM_ENGINE from the environment).
        meta.engine = reports.first().map(|r| r.engine.clone());
        write_json(&dir.join(META), &meta)?;
    }
    Ok(Outcome { meta, reports })
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

/// How one rank ended, as its wrapper recorded it.
#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct RankExit {
    code: Option<i32>,
    signal: Option<i32>,
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

/// The rank that failed first (one not merely killed in the cleanup), described in one line.
fn crashed_rank(dir: &Path, ranks: usize) -> Option<String> {
    let exits: Vec<(usize, RankExit)> = (0..ranks)
        .filter_map(|r| {
            let text = std::fs::read_to_string(dir.join(format!("rank-{r}.exit"))).ok()?;
            Some((r, serde_json::from_str(&text).ok()?))
        })
        .filter(|(_, e): &(usize, RankExit)| e.failed())
        .collect();
    let (rank, exit) = exits
        .iter()
        .find(|(_, e)| !e.collateral())
        .or(exits.first())?;
    Some(format!(
        "rank {rank} {}; {} (all of it: {})",
        exit.describe(),
        tail(&dir.join(format!("rank-{rank}.stderr"))),
        dir.join(format!("rank-{rank}.stderr")).display()
    ))
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
    let rank = ["PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"]
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
    let exit = match cmd.spawn() {
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
                },
                Err(_) => RankExit {
                    code: None,
                    signal: None,
                },
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
                signal: None,
            }
        }
    };
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
            serde_json::to_string(&RankExit { code, signal }).unwrap()
        };
        std::fs::write(dir.join("rank-0.exit"), exit(None, Some(libc::SIGKILL))).unwrap();
        std::fs::write(dir.join("rank-1.exit"), exit(None, Some(libc::SIGSEGV))).unwrap();
        std::fs::write(dir.join("rank-2.exit"), exit(Some(0), None)).unwrap();
        std::fs::write(dir.join("rank-1.stderr"), "a\nb\n\nc\nd\n").unwrap();
        let message = crashed_rank(&dir, 3).unwrap();
        assert!(
            message.starts_with(
                "rank 1 was killed by signal 11 (SIGSEGV); its stderr ended: b | c | d"
            ),
            "{message}"
        );
        std::fs::write(dir.join("rank-1.exit"), exit(Some(0), None)).unwrap();
        assert!(crashed_rank(&dir, 3)
            .unwrap()
            .starts_with("rank 0 was killed by signal 9 (SIGKILL); its stderr is empty"));
        std::fs::write(dir.join("rank-0.exit"), exit(Some(0), None)).unwrap();
        assert_eq!(crashed_rank(&dir, 3), None);
        std::fs::remove_dir_all(&dir).unwrap();
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
        assert!(check_program("sh").is_ok());
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
    fn timestamps_have_fixed_shapes() {
        assert_eq!(timestamp(false).len(), "20250131-120000".len());
        assert_eq!(timestamp(true).len(), "2025-01-31T12:00:00".len());
    }
}
