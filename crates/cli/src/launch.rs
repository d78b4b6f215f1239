//! The launch command: the short form (`-n N PROGRAM`, with the MPI's own mpiexec) or a whole
//! launcher command line (`srun …`, `mpirun …`, `mpiexec.openmpi …`). Runs put the rank wrapper
//! and an `env` that sets the shim's variables right before the program, so the variables reach
//! every rank whatever the launcher forwards; for that the launcher's options are read far
//! enough to find where the program starts.

use crate::runs::{on_path, Mpi};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Launcher {
    /// MPICH's (and Intel MPI's, MVAPICH's) mpiexec.
    Hydra,
    /// Open MPI's mpirun (orterun).
    OpenMpi,
    /// Slurm's srun.
    Slurm,
    /// Another launcher: the program is the first word that names an executable.
    Other,
}

/// How long `mpirun --version` may take to say whose it is.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

impl Launcher {
    pub fn describe(self) -> &'static str {
        match self {
            Launcher::Hydra => "MPICH's launcher (hydra)",
            Launcher::OpenMpi => "Open MPI's launcher",
            Launcher::Slurm => "Slurm's srun",
            Launcher::Other => "a launcher matchshim does not know",
        }
    }

    /// The MPI whose programs this launcher starts (srun starts any).
    pub fn mpi(self) -> Option<Mpi> {
        match self {
            Launcher::Hydra => Some(Mpi::Mpich),
            Launcher::OpenMpi => Some(Mpi::Openmpi),
            Launcher::Slurm | Launcher::Other => None,
        }
    }

    /// Which launcher `word` runs: by its name (or the name it links to), else, for a plain
    /// `mpirun`/`mpiexec`, by what `--version` says.
    pub fn detect(word: &str) -> Launcher {
        let path = if word.contains('/') {
            Some(PathBuf::from(word))
        } else {
            on_path(word)
        };
        let resolved = path.as_deref().and_then(|p| std::fs::canonicalize(p).ok());
        let names = [Some(Path::new(word)), path.as_deref(), resolved.as_deref()];
        let mut generic = false;
        for name in names.into_iter().flatten().filter_map(|p| p.file_name()) {
            match name.to_string_lossy().as_ref() {
                "mpiexec.hydra" | "mpiexec.mpich" | "mpirun.mpich" => return Launcher::Hydra,
                "mpiexec.openmpi" | "mpirun.openmpi" | "orterun" | "prterun" => {
                    return Launcher::OpenMpi
                }
                "srun" => return Launcher::Slurm,
                "mpirun" | "mpiexec" => generic = true,
                _ => {}
            }
        }
        match path {
            Some(path) if generic => probe(&path),
            _ => Launcher::Other,
        }
    }

    /// Words that `option` (as written, with its dashes) takes after itself.
    fn values(self, option: &str) -> usize {
        if option.contains('=') {
            return 0;
        }
        let name = option.trim_start_matches('-');
        match self {
            Launcher::Hydra => match name {
                "genv" | "env" => 2,
                "genvlist" | "envlist" | "f" | "hostfile" | "machinefile" | "hosts" | "host"
                | "wdir" | "configfile" | "n" | "np" | "launcher" | "launcher-exec"
                | "bootstrap" | "bootstrap-exec" | "rmk" | "topolib" | "bind-to" | "binding"
                | "map-by" | "membind" | "demux" | "iface" | "ppn" | "prepend-pattern"
                | "outfile-pattern" | "errfile-pattern" | "nameserver" | "localhost" | "usize"
                | "gpus-per-proc" | "order-nodes" => 1,
                _ => 0,
            },
            Launcher::OpenMpi => match name {
                "mca" | "gmca" => 2,
                "am" | "app" | "bind-to" | "c" | "n" | "np" | "cf" | "cartofile" | "cpu-list"
                | "cpu-set" | "cpus-per-proc" | "cpus-per-rank" | "debugger"
                | "default-hostfile" | "H" | "host" | "hnp" | "hostfile" | "launch-agent"
                | "machinefile" | "map-by" | "max-restarts" | "max-vm-size" | "N" | "npernode"
                | "npersocket" | "ompi-server" | "output-filename" | "path" | "personality"
                | "ppr" | "prefix" | "preload-files" | "rank-by" | "report-events"
                | "report-pid" | "report-uri" | "rf" | "rankfile" | "stdin" | "timeout"
                | "tune" | "wd" | "wdir" | "x" | "xml-file" | "xterm" => 1,
                _ => 0,
            },
            Launcher::Slurm => slurm_values(option),
            Launcher::Other => 0,
        }
    }

    /// The number of ranks `option` gives, `next` being the word after it; `None` if it gives
    /// none (or not as a number).
    fn ranks(self, option: &str, next: Option<&str>) -> Option<usize> {
        let (name, attached) = match option.split_once('=') {
            Some((name, value)) => (name, Some(value)),
            None => (option, None),
        };
        let value = match (self, name.trim_start_matches('-')) {
            (Launcher::Hydra, "n" | "np") | (Launcher::OpenMpi, "n" | "np" | "c") => {
                attached.or(next)
            }
            (Launcher::Slurm, "ntasks") if name.starts_with("--") => attached.or(next),
            (Launcher::Slurm, letters) if !name.starts_with("--") => {
                // `-n 4`, `-n4`, `-ln4`: the first letter that takes a value takes the rest.
                let i = letters.find(|c| SLURM_SHORT_WITH_VALUE.contains(c))?;
                match (&letters[i..i + 1], &letters[i + 1..]) {
                    ("n", "") => next,
                    ("n", rest) => Some(rest),
                    _ => None,
                }
            }
            _ => None,
        };
        value?.parse().ok()
    }
}

/// Slurm's short options that take a value.
const SLURM_SHORT_WITH_VALUE: &str = "AbBcCdDeGiJLmMnNopqrStTwWx";

/// Slurm reads short options as getopt does (`-n4`, `-ln 4`) and long ones as getopt_long.
fn slurm_values(option: &str) -> usize {
    const LONG_FLAGS: &[&str] = &[
        "contiguous",
        "disable-status",
        "exact",
        "exclusive",
        "help",
        "hold",
        "immediate",
        "kill-on-bad-exit",
        "label",
        "multi-prog",
        "no-allocate",
        "no-kill",
        "overcommit",
        "overlap",
        "oversubscribe",
        "preserve-env",
        "pty",
        "quiet",
        "reboot",
        "spread-job",
        "test-only",
        "unbuffered",
        "usage",
        "use-min-nodes",
        "verbose",
        "version",
        "whole",
        "x11",
    ];
    if let Some(long) = option.strip_prefix("--") {
        return usize::from(!LONG_FLAGS.contains(&long));
    }
    // A cluster of short options: the first that takes a value takes the rest of the word, or
    // the next word if it is last.
    let letters: Vec<char> = option.chars().skip(1).collect();
    match letters
        .iter()
        .position(|c| SLURM_SHORT_WITH_VALUE.contains(*c))
    {
        Some(i) if i + 1 == letters.len() => 1,
        _ => 0,
    }
}

/// What `command` prints on stdout, waiting at most `timeout` for it to end (killed then);
/// `None` if it cannot start or its output cannot be read.
pub(crate) fn stdout_within(command: &mut Command, timeout: Duration) -> Option<String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let deadline = Instant::now() + timeout;
    while matches!(child.try_wait(), Ok(None)) {
        if Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.wait();
    let mut text = String::new();
    child.stdout.take()?.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Asks a `mpirun`/`mpiexec` whose it is.
fn probe(path: &Path) -> Launcher {
    let Some(text) = stdout_within(Command::new(path).arg("--version"), PROBE_TIMEOUT) else {
        return Launcher::Other;
    };
    if text.contains("HYDRA") || text.contains("Intel(R) MPI") {
        Launcher::Hydra
    } else if text.contains("Open MPI") || text.contains("OpenRTE") {
        Launcher::OpenMpi
    } else {
        Launcher::Other
    }
}

/// A launch command and where its program starts.
#[derive(Clone, Debug, PartialEq)]
pub struct Launch {
    pub launcher: Launcher,
    /// The whole command: launcher, its options, the program and its arguments.
    pub words: Vec<String>,
    /// Index of the program in `words`.
    pub program_at: usize,
    /// The number of ranks, where the command says it.
    pub ranks: Option<usize>,
}

impl Launch {
    /// `-n N PROGRAM…`: the MPI's own mpiexec, oversubscribed for Open MPI (whose default is
    /// one rank per core), as root where that is who runs it.
    pub fn short(mpi: Mpi, ranks: usize, program: &[String]) -> Launch {
        let mut words = vec![mpi.launcher().to_string()];
        if mpi == Mpi::Openmpi {
            // SAFETY: geteuid has no preconditions.
            if unsafe { libc::geteuid() } == 0 {
                words.push("--allow-run-as-root".into());
            }
            words.push("--oversubscribe".into());
        }
        words.extend(["-n".to_string(), ranks.to_string()]);
        let program_at = words.len();
        words.extend_from_slice(program);
        Launch {
            launcher: if mpi == Mpi::Mpich {
                Launcher::Hydra
            } else {
                Launcher::OpenMpi
            },
            words,
            program_at,
            ranks: Some(ranks),
        }
    }

    /// Reads a whole launch command (`words[0]` is the launcher); `is_program` says whether a
    /// word names an executable (a path, or a name on PATH).
    pub fn parse(words: Vec<String>, is_program: impl Fn(&str) -> bool) -> Result<Launch, String> {
        let launcher = Launcher::detect(&words[0]);
        let mut ranks = None;
        let mut at = 1;
        let program_at = loop {
            let Some(word) = words.get(at) else {
                return Err(format!(
                    "no program in `{}`: it ends before a word that names an executable",
                    words.join(" ")
                ));
            };
            if !word.starts_with('-') {
                if launcher != Launcher::Other || is_program(word) {
                    break at;
                }
                at += 1;
                continue;
            }
            let values = launcher.values(word);
            let next = words.get(at + 1).map(String::as_str);
            ranks = launcher.ranks(word, next.filter(|_| values > 0)).or(ranks);
            at += 1 + values;
        };
        let program = &words[program_at];
        if !is_program(program) {
            return Err(format!(
                "`{program}` in `{}` is not a program (no such executable): matchshim read the \
                 options of {} and found it where the program should start; write an option's \
                 value in the same word (--option=VALUE) or put the options matchshim cannot \
                 read after the ones it can",
                words.join(" "),
                launcher.describe()
            ));
        }
        if matches!(launcher, Launcher::Hydra | Launcher::OpenMpi)
            && words[program_at..].iter().any(|w| w == ":")
        {
            return Err(format!(
                "`{}` starts several programs (MPMD, with `:`); matchshim runs one program per launch",
                words.join(" ")
            ));
        }
        Ok(Launch {
            launcher,
            words,
            program_at,
            ranks,
        })
    }

    pub fn program(&self) -> &[String] {
        &self.words[self.program_at..]
    }

    /// The launcher and its options.
    pub fn launcher_words(&self) -> &[String] {
        &self.words[..self.program_at]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    fn parse_as(launcher: Launcher, line: &str) -> Result<Launch, String> {
        // The launcher word is replaced by one `detect` reads by name.
        let name = match launcher {
            Launcher::Hydra => "mpiexec.hydra",
            Launcher::OpenMpi => "mpiexec.openmpi",
            Launcher::Slurm => "srun",
            Launcher::Other => "no-such-launcher",
        };
        let mut w = words(line);
        w.insert(0, name.to_string());
        Launch::parse(w, |word| word.starts_with("./") || word == "hostname")
    }

    fn program_and_ranks(launcher: Launcher, line: &str) -> (String, Option<usize>) {
        let launch = parse_as(launcher, line).unwrap();
        assert_eq!(launch.launcher, launcher);
        (launch.program().join(" "), launch.ranks)
    }

    #[test]
    fn launchers_are_known_by_name() {
        assert_eq!(Launcher::detect("mpiexec.mpich"), Launcher::Hydra);
        assert_eq!(
            Launcher::detect("/opt/x/bin/mpiexec.hydra"),
            Launcher::Hydra
        );
        assert_eq!(Launcher::detect("mpiexec.openmpi"), Launcher::OpenMpi);
        assert_eq!(Launcher::detect("/nowhere/srun"), Launcher::Slurm);
        assert_eq!(Launcher::detect("/nowhere/mpirun"), Launcher::Other);
        assert_eq!(Launcher::detect("aprun"), Launcher::Other);
    }

    #[test]
    fn hydra_options_and_their_values_are_skipped() {
        assert_eq!(
            program_and_ranks(
                Launcher::Hydra,
                "-f hosts -genv A 1 -ppn 2 -np 4 -prepend-rank ./app -n 7"
            ),
            ("./app -n 7".to_string(), Some(4))
        );
    }

    #[test]
    fn open_mpi_options_and_their_values_are_skipped() {
        assert_eq!(
            program_and_ranks(
                Launcher::OpenMpi,
                "--allow-run-as-root --oversubscribe --mca btl self,vader -x A=1 --hostfile h \
                 -np 3 --map-by=core ./app"
            ),
            ("./app".to_string(), Some(3))
        );
    }

    #[test]
    fn slurm_options_are_read_like_getopt() {
        assert_eq!(
            program_and_ranks(
                Launcher::Slurm,
                "-N 2 --ntasks=8 -l --exclusive -p debug ./app"
            ),
            ("./app".to_string(), Some(8))
        );
        assert_eq!(
            program_and_ranks(Launcher::Slurm, "-ln4 --cpu-bind cores hostname"),
            ("hostname".to_string(), Some(4))
        );
        assert_eq!(
            program_and_ranks(Launcher::Slurm, "-n 2 --mpi=pmix ./app"),
            ("./app".to_string(), Some(2))
        );
    }

    #[test]
    fn other_launchers_start_at_the_first_executable_word() {
        assert_eq!(
            program_and_ranks(Launcher::Other, "-n 4 --depth 2 ./app x"),
            ("./app x".to_string(), None)
        );
    }

    #[test]
    fn a_misread_launch_says_how_to_write_it() {
        let err = parse_as(Launcher::OpenMpi, "--new-option 5 ./app").unwrap_err();
        assert!(
            err.starts_with("`5` in `mpiexec.openmpi --new-option 5 ./app` is not a program")
                && err.contains("--option=VALUE"),
            "{err}"
        );
        let err = parse_as(Launcher::Hydra, "-n 2").unwrap_err();
        assert!(
            err.starts_with("no program in `mpiexec.hydra -n 2`"),
            "{err}"
        );
        let err = parse_as(Launcher::Hydra, "-n 1 ./a : -n 1 ./b").unwrap_err();
        assert!(err.contains("MPMD"), "{err}");
    }

    #[test]
    fn the_short_form_uses_the_mpis_own_mpiexec() {
        let launch = Launch::short(Mpi::Mpich, 3, &words("./app a"));
        assert_eq!(launch.words, words("mpiexec.mpich -n 3 ./app a"));
        assert_eq!((launch.program_at, launch.ranks), (3, Some(3)));
        let launch = Launch::short(Mpi::Openmpi, 2, &words("./app"));
        assert!(launch.words.contains(&"--oversubscribe".to_string()));
        assert_eq!(launch.program(), ["./app"]);
        assert_eq!(launch.launcher_words()[0], "mpiexec.openmpi");
    }
}
