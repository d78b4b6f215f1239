//! `matchshim run`, `report`, `compare` and `replay` for real: the demo program on 2 ranks under
//! the shim this crate builds. Skipped (with a note) only where the MPI's launcher is missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

const EXE: &str = env!("CARGO_BIN_EXE_matchshim");

/// The MPI of the shim built beside the command: `ci/` builds Open MPI's into
/// `target/openmpi`, MPICH's into `target`.
fn mpi() -> &'static str {
    if EXE.contains("/target/openmpi/") {
        "openmpi"
    } else {
        "mpich"
    }
}

struct Setup {
    lib: PathBuf,
    tmp: PathBuf,
    demo: PathBuf,
}

fn tools() -> (&'static str, &'static str) {
    if mpi() == "mpich" {
        ("mpiexec.mpich", "mpicc.mpich")
    } else {
        ("mpiexec.openmpi", "mpicc.openmpi")
    }
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

fn compile(source: &str, name: &str, tmp: &Path) -> PathBuf {
    let out = tmp.join(name);
    let status = Command::new(tools().1)
        .args([
            "-O2",
            "-Wno-stringop-overflow",
            "-pthread",
            source,
            "-lm",
            "-o",
        ])
        .arg(&out)
        .status()
        .expect("MPI compiler");
    assert!(status.success(), "cannot compile {source}");
    out
}

/// Builds the demo once; `None` (after a note) where the launcher is missing. The guard keeps
/// MPI jobs one at a time on small machines.
fn setup() -> Option<(&'static Setup, MutexGuard<'static, ()>)> {
    static SETUP: OnceLock<Option<Setup>> = OnceLock::new();
    static ONE_JOB: Mutex<()> = Mutex::new(());
    let setup = SETUP.get_or_init(|| {
        if !on_path(tools().0) {
            return None;
        }
        let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli");
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let demo = compile(
            concat!(env!("CARGO_MANIFEST_DIR"), "/../../ld-preload-tests/demo.c"),
            "demo",
            &tmp,
        );
        // `cargo build` of the workspace puts the shim beside the command.
        let lib = Path::new(EXE).with_file_name("libmatchshim.so");
        assert!(
            lib.is_file(),
            "the shim is not built next to the command (run `cargo build --release` first): {}",
            lib.display()
        );
        Some(Setup { lib, tmp, demo })
    });
    match setup {
        Some(s) => Some((s, ONE_JOB.lock().unwrap_or_else(|e| e.into_inner()))),
        None => {
            eprintln!(
                "note: {} is not on PATH; skipping the command's MPI tests",
                tools().0
            );
            None
        }
    }
}

fn matchshim(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .output()
        .expect("run matchshim")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `run … -n 2 -- program` under the shim, with `engine`, into a fresh `out`.
fn run_under_shim(s: &Setup, engine: &str, out: &str, program: &Path) -> Output {
    run_under_shim_with(s, engine, out, &[program.to_str().unwrap()], "2", &[])
}

/// `run_under_shim` of a command line on `ranks` ranks, with `MATCHSHIM_*` variables for them.
fn run_under_shim_with(
    s: &Setup,
    engine: &str,
    out: &str,
    command_line: &[&str],
    ranks: &str,
    vars: &[(&str, &Path)],
) -> Output {
    let out = s.tmp.join(format!("run-{out}"));
    let _ = std::fs::remove_dir_all(&out);
    let mut command = Command::new(EXE);
    command.envs(vars.iter().copied());
    command.args([
        "run",
        "--engine",
        engine,
        "--mpi",
        mpi(),
        "--lib",
        s.lib.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-n",
        ranks,
        "--",
    ]);
    command.args(command_line);
    command.output().expect("run matchshim")
}

/// The one-line error a failed command ends with.
fn error_line(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let stderr = text(&out.stderr);
    let last = stderr.lines().last().unwrap_or_default().to_string();
    assert!(last.starts_with("matchshim: "), "{stderr}");
    last
}

#[test]
fn run_keeps_the_reports_and_report_sums_them() {
    let Some((s, _job)) = setup() else { return };
    let out = run_under_shim(s, "list", "demo", &s.demo);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert!(
        stdout.contains("demo: 2 ranks, checksum"),
        "the program's output is shown: {stdout}"
    );
    assert!(
        stdout.contains(&format!("engine list, {}, 2 ranks, wall ", mpi())),
        "{stdout}"
    );
    let p2p: Vec<&str> = stdout
        .lines()
        .find(|l| l.starts_with("point-to-point"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert!(p2p[1].parse::<u64>().unwrap() > 0, "PRQ searches: {p2p:?}");

    let dir = s.tmp.join("run-demo");
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap();
    assert_eq!(meta["engine"], "list");
    assert_eq!(meta["mpi"], mpi());
    assert_eq!(
        (meta["ranks"].as_u64(), meta["exit_code"].as_i64()),
        (Some(2), Some(0))
    );
    assert_eq!(meta["command"][0], s.demo.to_str().unwrap());
    assert!(meta["wall_time_ns"].as_u64().unwrap() > 0);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("report.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);

    let out = matchshim(&["report", "--json", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let summary = &json["summary"];
    let matches: u64 = lines
        .iter()
        .map(|l| l["point_to_point"]["matches"].as_u64().unwrap())
        .sum();
    assert_eq!(summary["point_to_point"]["matches"].as_u64(), Some(matches));
    assert_eq!(summary["ranks"].as_u64(), Some(2));
    assert_eq!(summary["engine"], "list");
    assert_eq!(json["meta"]["exit_code"].as_i64(), Some(0));

    let out = matchshim(&["report", "--ranks", dir.to_str().unwrap()]);
    let table = text(&out.stdout);
    assert!(
        table.lines().any(|l| l.starts_with("1 ")),
        "a row per rank: {table}"
    );

    // A report from another version of the shim is refused.
    let report = dir.join("report.jsonl");
    let old = std::fs::read_to_string(&report).unwrap();
    std::fs::write(
        &report,
        old.replace(r#""matchshim":""#, r#""matchshim":"0.0.0-"#),
    )
    .unwrap();
    let err = error_line(&matchshim(&["report", dir.to_str().unwrap()]));
    assert!(err.contains("report from matchshim 0.0.0-"), "{err}");
}

#[test]
fn compare_prints_speedups_over_list_and_plots_them() {
    let Some((s, _job)) = setup() else { return };
    let dir = s.tmp.join("compare");
    let plot = s.tmp.join("compare.svg");
    let out = matchshim(&[
        "compare",
        "--engines",
        "rank",
        "--mpi",
        mpi(),
        "--lib",
        s.lib.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--plot",
        plot.to_str().unwrap(),
        "-n",
        "2",
        "--",
        s.demo.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("native (run 1 of 1)") && stderr.contains("2/3 rank (run 1 of 1)"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("checksum"),
        "the program's output is kept in the run directories"
    );
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    let list = rows
        .iter()
        .find(|r| r.first() == Some(&"list"))
        .expect("a list row");
    let rank = rows
        .iter()
        .find(|r| r.first() == Some(&"rank"))
        .expect("a rank row");
    // engine, match time (2 words), p2p, coll, all: list is the baseline, rank is measured.
    // The demo's MPI_Reduce runs through the shim, so collective elements are matched too.
    assert_eq!(
        (list[3], list[4], list[5]),
        ("1.00x", "1.00x", "1.00x"),
        "{stdout}"
    );
    assert!(rank[3].ends_with('x') && rank[4].ends_with('x'), "{stdout}");

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    let engines: Vec<&str> = summary["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["list", "rank"]);
    assert!(summary["native_wall_ns"].as_u64().unwrap() > 0);
    for run in ["native-1", "list-1", "rank-1"] {
        assert!(dir.join(run).join("meta.json").is_file(), "{run}");
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains(">rank<") && svg.contains("Queues allocated"));

    // report over a compare directory: a table per run under the shim.
    let out = matchshim(&["report", dir.to_str().unwrap()]);
    assert_eq!(text(&out.stdout).matches("engine ").count(), 2);
}

/// The traces of a run, replayed with the engine that recorded them, give its report's counters
/// exactly; every other engine replays them to the same matches.
#[test]
fn replay_of_a_recorded_run_gives_its_report_again() {
    let Some((s, _job)) = setup() else { return };
    let traces = s.tmp.join("traces");
    let _ = std::fs::remove_dir_all(&traces);
    let out = run_under_shim_with(
        s,
        "col+pnp",
        "traced",
        &[s.demo.to_str().unwrap()],
        "2",
        &[("MATCHSHIM_TRACE", &traces)],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    for rank in 0..2 {
        assert!(traces.join(format!("rank{rank}-comm0.trace")).is_file());
    }
    let out = matchshim(&[
        "report",
        "--json",
        s.tmp.join("run-traced").to_str().unwrap(),
    ]);
    let recorded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let replayed = replay_json(&traces, "col+pnp,bins");
    let summaries = replayed["summaries"].as_array().unwrap();
    let engines: Vec<&str> = summaries
        .iter()
        .map(|s| s["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["list", "rank", "col+pnp", "bins"]);
    let col_pnp = &summaries[2];
    for traffic in ["point_to_point", "collective"] {
        let (a, b) = (&recorded["summary"][traffic], &col_pnp[traffic]);
        for queue in ["prq", "umq"] {
            assert_eq!(
                a[queue]["searches"], b[queue]["searches"],
                "{traffic} {queue}"
            );
            assert_eq!(
                a[queue]["max_depth"], b[queue]["max_depth"],
                "{traffic} {queue}"
            );
        }
        assert!(a["matches"].as_u64().unwrap() > 0, "{traffic}");
        for summary in summaries {
            assert_eq!(summary[traffic]["matches"], a["matches"], "{traffic}");
        }
    }
    assert_eq!(recorded["summary"]["queues"], col_pnp["queues"]);
    let memory = replayed["memory"].as_array().unwrap();
    assert!(memory.iter().all(|m| m["max_bytes"].as_u64().unwrap() > 0));

    // A damaged trace is refused with its name.
    let first = traces.join("rank0-comm0.trace");
    let bytes = std::fs::read(&first).unwrap();
    std::fs::write(&first, &bytes[..bytes.len() - 1]).unwrap();
    let err = error_line(&matchshim(&["replay", traces.to_str().unwrap()]));
    assert!(
        err.contains("rank0-comm0.trace") && err.contains("cut short"),
        "{err}"
    );
}

/// `replay --json` of a trace directory with `engines` (and the references), one round.
fn replay_json(dir: &Path, engines: &str) -> serde_json::Value {
    let out = matchshim(&[
        "replay",
        "--json",
        "--repeat",
        "1",
        "--engines",
        engines,
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The summary of `list` replaying a trace directory.
fn list_summary(dir: &Path) -> serde_json::Value {
    replay_json(dir, "list")["summaries"][0].clone()
}

/// The generators against the programs they model, on 16 ranks of this machine: the same
/// matches per traffic type (the AMR program's block counts depend on its data, which the
/// generator draws at random: within 5 %), and mean search depths under `list` within a factor
/// of 2 of the recorded ones (recorded runs of one program differ by up to a fifth from run to
/// run here; the simulation's worst was 1.5x on the hot spot).
#[test]
fn generated_traces_search_as_deep_as_recorded_ones() {
    let Some((s, _job)) = setup() else { return };
    let programs: [(&str, &[&str]); 5] = [
        ("coll", &["hotspot", "10"]),
        ("app_radix", &["-n", "2048", "-i", "8", "-r", "1"]),
        ("app_nbody", &["-b", "32", "-i", "10", "-r", "1"]),
        ("app_miniamr", &["-i", "12", "-r", "1"]),
        ("halo_mt", &["-t", "2", "-i", "20", "-r", "1"]),
    ];
    let close = |recorded: f64, generated: f64| ((generated + 0.5) / (recorded + 0.5)).ln().abs();
    for (program, args) in programs {
        let source = format!("{}/../../ci/bench/{program}.c", env!("CARGO_MANIFEST_DIR"));
        let binary = compile(&source, program, &s.tmp);
        let recorded = s.tmp.join(format!("recorded-{program}"));
        let generated = s.tmp.join(format!("generated-{program}"));
        let _ = std::fs::remove_dir_all(&recorded);
        let mut command_line = vec![binary.to_str().unwrap()];
        command_line.extend(args);
        let out = run_under_shim_with(
            s,
            "col+pnp",
            &format!("recorded-{program}"),
            &command_line,
            "16",
            &[("MATCHSHIM_TRACE", &recorded)],
        );
        assert!(out.status.success(), "{program}: {}", text(&out.stderr));
        let mut generate = vec!["generate", "--machine", "local", "-n", "16", "--out"];
        generate.push(generated.to_str().unwrap());
        generate.push("--");
        generate.push(program);
        generate.extend(args);
        let out = matchshim(&generate);
        assert!(out.status.success(), "{program}: {}", text(&out.stderr));
        let (r, g) = (list_summary(&recorded), list_summary(&generated));
        for traffic in ["point_to_point", "collective"] {
            let matches = |v: &serde_json::Value| v[traffic]["matches"].as_f64().unwrap();
            let (rm, gm) = (matches(&r), matches(&g));
            let tolerance = if program == "app_miniamr" {
                0.05 * rm
            } else {
                0.0
            };
            assert!(
                (rm - gm).abs() <= tolerance,
                "{program} {traffic}: {gm} matches generated, {rm} recorded"
            );
            for queue in ["prq", "umq"] {
                let depth =
                    |v: &serde_json::Value| v[traffic][queue]["mean_depth"].as_f64().unwrap();
                let (rd, gd) = (depth(&r), depth(&g));
                assert!(
                    close(rd, gd) <= 2f64.ln(),
                    "{program} {traffic} {queue}: mean depth {gd:.2} generated, {rd:.2} recorded"
                );
            }
        }
    }
}

#[test]
fn failures_end_in_one_clear_line() {
    let Some((s, _job)) = setup() else { return };
    let crash = s.tmp.join("crash.c");
    std::fs::write(
        &crash,
        "#include <mpi.h>\n#include <stdio.h>\n#include <stdlib.h>\n\
         int main(int c, char **v) { int r; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);\n\
         if (r == 1) { fprintf(stderr, \"rank one gives up\\n\"); exit(3); }\n\
         MPI_Barrier(MPI_COMM_WORLD); MPI_Finalize(); return 0; }\n",
    )
    .unwrap();
    let crash = compile(crash.to_str().unwrap(), "crash", &s.tmp);
    let err = error_line(&run_under_shim(s, "list", "crash", &crash));
    assert!(
        err.contains("rank 1 exited with code 3; its stderr ended: rank one gives up"),
        "{err}"
    );

    let no_finalize = s.tmp.join("nofinalize.c");
    std::fs::write(
        &no_finalize,
        "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return 0; }\n",
    )
    .unwrap();
    let no_finalize = compile(no_finalize.to_str().unwrap(), "nofinalize", &s.tmp);
    let err = error_line(&run_under_shim(s, "list", "nofinalize", &no_finalize));
    assert!(
        err.contains("no rank wrote a report") && err.contains("call MPI_Finalize"),
        "{err}"
    );

    let err = error_line(&run_under_shim(s, "no-such-engine", "badengine", &s.demo));
    assert!(
        err.contains("MATCHSHIM_ENGINE=\"no-such-engine\" is not valid"),
        "{err}"
    );

    let missing = s.tmp.join("no-such-program");
    let err = error_line(&run_under_shim(s, "list", "missing", &missing));
    assert_eq!(
        err,
        format!("matchshim: program not found: {}", missing.display())
    );

    let out = Command::new(EXE)
        .args(["run", "-n", "2", "--", "true"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(error_line(&out).contains("no MPI launcher found"));
}
