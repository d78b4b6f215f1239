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

/// `setup` where the command's own shim is MPICH's (tests whose programs are built for MPICH).
fn mpich_setup() -> Option<(&'static Setup, MutexGuard<'static, ()>)> {
    setup().filter(|_| mpi() == "mpich")
}

/// Runs the command; its ranks match every message in the shim (the demo's queues are short,
/// so under the default `auto` MPI would match them and the engine counters checked here
/// would stay empty).
fn matchshim(args: &[&str]) -> Output {
    Command::new(EXE)
        .args(args)
        .env("MATCHSHIM_TAKEOVER", "always")
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

/// `run_under_shim` of a command line on `ranks` ranks, with `MATCHSHIM_*` variables for them;
/// the shim matches every message and runs every collective, so both traffic types are seen.
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
    command.env("MATCHSHIM_TAKEOVER", "always");
    command.env("MATCHSHIM_COLL", "shim");
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

/// Every rank's report says who ran each collective: the demo's reduce on 2 ranks goes to MPI
/// under the default mode and to the shim under `shim`.
#[test]
fn the_report_says_who_ran_each_collective() {
    let Some((s, _job)) = setup() else { return };
    for coll in ["auto", "shim"] {
        let out = run_under_shim_with(
            s,
            "list",
            &format!("who-{coll}"),
            &[s.demo.to_str().unwrap()],
            "2",
            &[("MATCHSHIM_COLL", Path::new(coll))],
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let reports = std::fs::read_to_string(s.tmp.join(format!("run-who-{coll}/report.jsonl")));
        for line in reports.unwrap().lines() {
            let report: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(report["coll"], coll);
            let reduce = &report["collectives"]["reduce"];
            let (shim, mpi) = (reduce["calls"].as_u64(), reduce["mpi_calls"].as_u64());
            match coll {
                "auto" => assert!(shim == Some(0) && mpi > Some(0), "{reduce}"),
                _ => assert!(shim > Some(0) && mpi == Some(0), "{reduce}"),
            }
        }
    }
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
        stdout.contains(&format!(
            "engine list, takeover always, {}, 2 ranks, wall ",
            mpi()
        )),
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

    // The report file alone, as a hand-made run with MATCHSHIM_REPORT leaves it.
    let out = matchshim(&["report", dir.join("report.jsonl").to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains("report.jsonl: engine list"),
        "{}",
        text(&out.stderr)
    );

    // Rank 0's line at MPI_Finalize (a reduction over the ranks) says what the command read
    // from every rank's report.
    let sentence = stdout
        .lines()
        .nth(
            stdout
                .lines()
                .position(|l| l.starts_with(&format!("{}:", dir.display())))
                .unwrap()
                + 1,
        )
        .unwrap()
        .to_string();
    assert!(sentence.contains("the shim took over"), "{stdout}");
    let verbose = run_under_shim_with(
        s,
        "list",
        "demo-verbose",
        &[s.demo.to_str().unwrap()],
        "2",
        &[("MATCHSHIM_VERBOSE", Path::new("1"))],
    );
    let line = text(&verbose.stderr)
        .lines()
        .find(|l| l.starts_with("matchshim (list, takeover always, 2 ranks): "))
        .unwrap_or_else(|| panic!("no line from rank 0: {}", text(&verbose.stderr)))
        .to_string();
    let again = text(&verbose.stdout);
    let told = again
        .lines()
        .find(|l| l.starts_with("MPI matched "))
        .unwrap()
        .trim_end_matches('.');
    assert!(
        line.contains(&format!("): {told}; engine: ")),
        "{line}\n{again}"
    );

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
fn compare_recommends_from_its_numbers_and_plots_them() {
    let Some((s, _job)) = setup() else { return };
    let dir = s.tmp.join("compare");
    let plot = s.tmp.join("compare.svg");
    let out = matchshim(&[
        "compare",
        "--engines",
        "rank",
        "--repeat",
        "2",
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
        stderr.contains("native (run 1 of 2)") && stderr.contains("5/6 rank (run 2 of 2)"),
        "{stderr}"
    );
    assert!(
        !stdout.contains("checksum"),
        "the program's output is kept in the run directories"
    );
    let row = |name: &str| -> Vec<&str> {
        stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row: {stdout}"))
            .split_whitespace()
            .collect()
    };
    // The shim matched every message (MATCHSHIM_TAKEOVER=always); list is the baseline.
    assert_eq!(row("list")[1..3], ["100", "%"], "{stdout}");
    assert!(row("list").contains(&"1.00x"), "{stdout}");
    assert_eq!(row("rank")[1..3], ["100", "%"], "{stdout}");
    assert_eq!(row("native")[1], "-", "{stdout}");
    assert!(stdout.contains("\nrecommendation: "), "{stdout}");
    assert!(stdout.contains("  - whole run under "), "{stdout}");
    assert!(stdout.contains("\nload: average "), "{stdout}");
    assert!(
        stderr.starts_with("compare: 6 runs: native and 2 variants (list, rank), 2 rounds;")
            && stderr.contains("compare: the first native run took "),
        "{stderr}"
    );

    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    let engines: Vec<&str> = summary["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(engines, ["list", "rank"]);
    assert!(summary["engines"][0]["shim_matched"].as_u64().unwrap() > 0);
    assert_eq!(summary["engines"][0]["mpi_matched"].as_u64(), Some(0));
    let native = &summary["native_wall"];
    assert!(native["min"].as_u64().unwrap() <= native["median"].as_u64().unwrap());
    assert!(native["median"].as_u64().unwrap() <= native["max"].as_u64().unwrap());
    assert!(summary["load"]["cores"].as_u64().unwrap() >= 1);
    let recommendation = &summary["recommendation"];
    assert!(recommendation["matching_share"].as_f64().unwrap() > 0.0);
    assert!(["use", "not-needed", "slower-than-native"]
        .contains(&recommendation["verdict"].as_str().unwrap()));
    for run in ["native-2", "list-1", "rank-2"] {
        assert!(dir.join(run).join("meta.json").is_file(), "{run}");
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.starts_with("<svg")
            && svg.contains(">rank<")
            && svg.contains("Whole run against native")
            && svg.contains("Queues allocated per rank (log scale)")
    );

    // report of a compare directory: the same comparison and recommendation.
    let out = matchshim(&["report", dir.to_str().unwrap()]);
    let plotted = format!("plot: {}\n", plot.display());
    assert_eq!(text(&out.stdout), stdout.replace(&plotted, ""));
}

#[test]
fn compare_json_is_for_scripts() {
    let Some((s, _job)) = setup() else { return };
    let dir = s.tmp.join("compare-json");
    let out = matchshim(&[
        "compare",
        "--engines",
        "list",
        "--coll",
        "shim,native",
        "--takeover",
        "always,auto",
        "--repeat",
        "1",
        "--json",
        "--out",
        dir.to_str().unwrap(),
        "-n",
        "2",
        "--",
        s.demo.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON on stdout");
    let labels: Vec<&str> = json["engines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["engine"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels[..4],
        [
            "list coll=shim takeover=always",
            "list coll=shim takeover=auto",
            "list coll=native takeover=always",
            "list coll=native takeover=auto"
        ]
    );
    assert_eq!(labels.len(), 4, "list alone, the baseline: {labels:?}");
    // Under MATCHSHIM_COLL=native the demo's reduce goes to MPI: no collective elements.
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("list_coll=native_takeover=always-1/meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["vars"]["MATCHSHIM_COLL"], "native");
    assert_eq!(meta["vars"]["MATCHSHIM_TAKEOVER"], "always");
    assert_eq!(json["engines"][2]["match_time_ns"][1].as_u64(), Some(0));
    assert!(json["engines"][0]["match_time_ns"][1].as_u64().unwrap() > 0);
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
/// of 2 of the recorded ones, each counted with 1.5 elements more: recorded runs of one program
/// differ from run to run here (16 ranks on 2 cores: the N-body program's collective unexpected
/// queue measured 0.8 to 2.7 deep, as its ranks happened to be scheduled), most on queues that
/// hold a message or two. A program whose depths are off gets a second recording before they
/// count.
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
    let close = |recorded: f64, generated: f64| ((generated + 1.5) / (recorded + 1.5)).ln().abs();
    for (program, args) in programs {
        let source = format!("{}/../../ci/bench/{program}.c", env!("CARGO_MANIFEST_DIR"));
        let binary = compile(&source, program, &s.tmp);
        let generated = s.tmp.join(format!("generated-{program}"));
        let mut generate = vec!["generate", "--machine", "local", "-n", "16", "--out"];
        generate.push(generated.to_str().unwrap());
        generate.push("--");
        generate.push(program);
        generate.extend(args);
        let out = matchshim(&generate);
        assert!(out.status.success(), "{program}: {}", text(&out.stderr));
        let g = list_summary(&generated);
        let mut off = Vec::new();
        for _recording in 0..2 {
            let recorded = s.tmp.join(format!("recorded-{program}"));
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
            let r = list_summary(&recorded);
            off.clear();
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
                    if close(rd, gd) > 2f64.ln() {
                        off.push(format!(
                            "{program} {traffic} {queue}: mean depth {gd:.2} generated, \
                             {rd:.2} recorded"
                        ));
                    }
                }
            }
            if off.is_empty() {
                break;
            }
        }
        assert!(off.is_empty(), "{}", off.join("; "));
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
        err.contains("no rank wrote a report")
            && err.contains("the shim started in MPI_Init")
            && err.contains("nofinalize never calls MPI_Finalize"),
        "{err}"
    );

    let missing = s.tmp.join("no-such-program");
    let err = error_line(&run_under_shim(s, "list", "missing", &missing));
    assert_eq!(
        err,
        format!("matchshim: program not found: {}", missing.display())
    );

    let out = Command::new(EXE)
        .args(["run", "-n", "2", "--", "/bin/true"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert!(error_line(&out).contains("no MPI launcher found"));
}

#[test]
fn every_sub_command_has_help() {
    for sub in [
        &["--help"][..],
        &["run", "--help"],
        &["report", "--help"],
        &["compare", "--help"],
    ] {
        let out = matchshim(sub);
        let help = text(&out.stdout);
        assert!(out.status.success(), "{sub:?}: {}", text(&out.stderr));
        assert!(help.contains("Usage: matchshim"), "{sub:?}: {help}");
    }
    let run = text(&matchshim(&["run", "--help"]).stdout);
    for want in [
        "col+pnp",
        "bins",
        "[default: MATCHSHIM_ENGINE if set, else col+pnp]",
        "srun",
    ] {
        assert!(run.contains(want), "run --help lacks {want}: {run}");
    }
    let compare = text(&matchshim(&["compare", "--help"]).stdout);
    assert!(
        compare.contains("[default: 3]") && compare.contains("--json"),
        "{compare}"
    );
}

/// A command that must fail before anything runs: no run directory appears.
fn refused_before_running(args: &[&str], env: &[(&str, &str)], want: &str) {
    let out_dir = std::env::temp_dir().join(format!("matchshim-refused-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out_dir);
    let mut all = vec![args[0], "--out", out_dir.to_str().unwrap()];
    all.extend(&args[1..]);
    let out = Command::new(EXE)
        .args(&all)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert!(!out.status.success(), "{all:?} ran");
    assert!(stderr.contains(want), "{all:?}: {stderr}");
    assert!(!out_dir.exists(), "{all:?} started runs");
}

#[test]
fn every_value_is_checked_before_anything_runs() {
    let Some((s, _job)) = setup() else { return };
    let demo = s.demo.to_str().unwrap();
    let mismatch = format!("{demo} links MPICH, but --mpi says Open MPI");
    // Options before `-n 2 demo`, the environment, what the error says.
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 6] = [
        (&["run", "--engine", "bogus"], &[], "col+pnp"),
        (&["compare", "--engines", "list,foo"], &[], "'foo'"),
        // The shim's own parser: the same message the ranks would stop with.
        (
            &["run", "--set", "MATCHSHIM_K=0"],
            &[],
            "MATCHSHIM_K=\"0\" is not valid; accepted values: a positive integer",
        ),
        (
            &["compare", "--set", "MATCHSHIM_THETA=8,x"],
            &[],
            "MATCHSHIM_THETA=\"x\" is not valid",
        ),
        (
            &["run"],
            &[("MATCHSHIM_VERBOSE", "yes")],
            "MATCHSHIM_VERBOSE=\"yes\" is not valid",
        ),
        (&["run", "--mpi", "openmpi"], &[], &mismatch),
    ];
    for (options, env, want) in cases {
        let mut args = options.to_vec();
        args.extend(["-n", "2", demo]);
        refused_before_running(&args, env, want);
    }
}

/// The demo under `launcher…` (a whole launch command) with the shim the command finds itself.
fn run_with_launcher(
    s: &Setup,
    name: &str,
    launcher: &[&str],
    program: &Path,
) -> (Output, PathBuf) {
    let out = s.tmp.join(format!("launch-{name}"));
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec![
        "run",
        "--engine",
        "rank",
        "--out",
        out.to_str().unwrap(),
        "--",
    ];
    args.extend(launcher);
    args.push(program.to_str().unwrap());
    (matchshim(&args), out)
}

fn meta(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).unwrap()).unwrap()
}

#[test]
fn any_launcher_with_its_options() {
    let Some((s, _job)) = mpich_setup() else {
        return;
    };
    let (out, dir) = run_with_launcher(
        s,
        "hydra",
        &[
            "mpiexec.mpich",
            "-genv",
            "DEMO_UNUSED",
            "1",
            "-np",
            "2",
            "-prepend-rank",
        ],
        &s.demo,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("engine rank, takeover always, mpich, 2 ranks"));
    let m = meta(&dir);
    assert_eq!(m["launcher"][2], "DEMO_UNUSED");
    assert_eq!(m["ranks"], 2);

    // Open MPI: the command picks the Open MPI build of the shim from the program it runs.
    let open_lib = Path::new(EXE)
        .parent()
        .unwrap()
        .join("../openmpi/release/libmatchshim.so");
    if !on_path("mpicc.openmpi") || !open_lib.is_file() {
        eprintln!("note: no Open MPI build of the shim; skipping its launcher test");
        return;
    }
    let demo = s.tmp.join("demo-openmpi");
    let status = Command::new("mpicc.openmpi")
        .args(["-O2", "-Wno-stringop-overflow"])
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../ld-preload-tests/demo.c"
        ))
        .arg("-o")
        .arg(&demo)
        .status()
        .unwrap();
    assert!(status.success());
    let launcher = [
        "mpiexec.openmpi",
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "btl",
        "self,vader",
        "-x",
        "DEMO_UNUSED=1",
        "-n",
        "3",
    ];
    let (out, dir) = run_with_launcher(s, "openmpi", &launcher, &demo);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("engine rank, takeover always, openmpi, 3 ranks"));
    let m = meta(&dir);
    assert_eq!(m["mpi"], "openmpi");
    assert!(m["lib"]
        .as_str()
        .unwrap()
        .ends_with("openmpi/release/libmatchshim.so"));

    // Open MPI refuses to run as root without being told: its own words, not a guess.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| text(&o.stdout).trim() == "0");
    if root {
        let out = Command::new(EXE)
            .args([
                "run",
                "--out",
                s.tmp.join("launch-root").to_str().unwrap(),
                "--",
            ])
            .args(["mpiexec.openmpi", "--oversubscribe", "-n", "2"])
            .arg(&demo)
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT")
            .env_remove("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM")
            .output()
            .unwrap();
        let err = error_line(&out);
        assert!(
            err.contains(
                "mpiexec.openmpi failed before starting any rank (exit code 1): \
                 mpiexec.openmpi has detected an attempt to run as root."
            ),
            "{err}"
        );
    }

    // The MPICH launcher cannot start an Open MPI program: said before anything runs.
    let (out, _) = run_with_launcher(s, "mismatch", &["mpiexec.mpich", "-n", "2"], &demo);
    assert!(
        text(&out.stderr).contains("links Open MPI, but mpiexec.mpich is the launcher of MPICH"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn srun_gets_its_options_and_the_wrapped_program() {
    let Some((s, _job)) = mpich_setup() else {
        return;
    };
    // A stand-in for Slurm's srun: it records what it got and runs it with hydra.
    let bin = s.tmp.join("fake-slurm");
    std::fs::create_dir_all(&bin).unwrap();
    let record = s.tmp.join("srun-args");
    let srun = bin.join("srun");
    std::fs::write(
        &srun,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\nshift 6\nexec mpiexec.mpich -n 2 \"$@\"\n",
            record.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&srun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let out_dir = s.tmp.join("launch-srun");
    let out = Command::new(EXE)
        .args([
            "run",
            "--set",
            "MATCHSHIM_K=4",
            "--out",
            out_dir.to_str().unwrap(),
        ])
        .args([
            "--",
            "srun",
            "-N",
            "1",
            "--ntasks",
            "2",
            "-l",
            "--cpu-bind=none",
        ])
        .arg(&s.demo)
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let got: Vec<String> = std::fs::read_to_string(&record)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(
        got[..6],
        ["-N", "1", "--ntasks", "2", "-l", "--cpu-bind=none"]
    );
    // Then the rank wrapper, and `env` with the shim's variables right before the program.
    assert!(
        got[6].ends_with("/matchshim") && got[7] == "_rank" && got[9] == "--",
        "{got:?}"
    );
    let env = got.iter().position(|w| w == "env").unwrap();
    assert!(got[env + 1].starts_with("LD_PRELOAD=") && got[env + 1].ends_with("libmatchshim.so"));
    assert!(got.contains(&"MATCHSHIM_K=4".to_string()), "{got:?}");
    assert_eq!(got.last().unwrap(), s.demo.to_str().unwrap());
    let m = meta(&out_dir);
    assert_eq!(
        (m["ranks"].as_u64(), m["mpi"].as_str()),
        (Some(2), Some("mpich"))
    );
}

#[test]
fn programs_that_bypass_the_shim_are_named() {
    let Some((s, _job)) = mpich_setup() else {
        return;
    };
    // MPICH linked in statically (its own dependencies stay shared).
    let source = s.tmp.join("init.c");
    std::fs::write(
        &source,
        "#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); MPI_Finalize(); return 0; }\n",
    )
    .unwrap();
    let program = s.tmp.join("static-mpi");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "gcc {} -I/usr/include/x86_64-linux-gnu/mpich \
             /usr/lib/x86_64-linux-gnu/libmpich.a -o {} $(pkg-config --libs --static mpich)",
            source.display(),
            program.display()
        ))
        .status()
        .unwrap();
    assert!(status.success(), "cannot link MPICH statically");
    let err = error_line(&run_under_shim(s, "list", "static", &program));
    assert!(
        err.contains("static-mpi contains MPI itself (it defines PMPI_Init"),
        "{err}"
    );

    let err = error_line(&run_under_shim(s, "list", "nompi", Path::new("/bin/true")));
    assert!(
        err.contains("/bin/true neither links an MPI library nor imports MPI_Init"),
        "{err}"
    );
}

#[test]
fn gpu_says_what_it_found_and_ptx_needs_nvrtc() {
    let out = matchshim(&["gpu"]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("CUDA driver"), "{stdout}");
    assert!(stdout.contains("NVRTC"), "{stdout}");
    let path = stdout.lines().last().unwrap_or_default();
    assert!(
        path.starts_with("gpu engine: cpu path (") || path.starts_with("gpu engine: device path ("),
        "{stdout}"
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("ptx");
    let _ = std::fs::remove_dir_all(&dir);
    let out = matchshim(&["gpu", "--ptx", dir.to_str().unwrap()]);
    if stdout.contains("no NVRTC") {
        assert!(error_line(&out).contains("cannot compile the kernels: no NVRTC"));
        assert!(!dir.exists());
    } else {
        // Every generation the loaded NVRTC lists; CUDA 12's from sm_70, CUDA 13's from sm_80.
        assert!(out.status.success(), "{}", text(&out.stderr));
        let nvrtc = stdout.lines().find(|l| l.starts_with("NVRTC ")).unwrap();
        for sm in ["70", "80", "90"] {
            let ptx = std::fs::read_to_string(dir.join(format!("matchshim_kernels.sm_{sm}.ptx")));
            match ptx {
                Ok(ptx) => assert!(ptx.contains(&format!(".target sm_{sm}"))),
                Err(_) => assert!(sm == "70" && !nvrtc.contains(" 70,"), "{nvrtc}"),
            }
        }
        let out = matchshim(&["gpu", "--ptx", dir.to_str().unwrap(), "--arch", "35"]);
        assert!(error_line(&out).contains("--arch 35: the loaded NVRTC compiles for"));
    }
}

#[test]
fn a_run_under_gpu_records_its_path() {
    let Some((s, _job)) = setup() else { return };
    let out = run_under_shim(s, "gpu", "gpu", &s.demo);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = std::fs::read_to_string(s.tmp.join("run-gpu/report.jsonl")).unwrap();
    for line in lines.lines() {
        let report: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(report["engine"], "gpu");
        let path = report["gpu"]["path"].as_str().unwrap();
        assert!(path == "cpu" || path == "device", "{line}");
        assert!(
            !report["gpu"]["detail"].as_str().unwrap().is_empty(),
            "{line}"
        );
    }
}

/// Two ranks pass a few messages around a ring: queues that never grow.
const RING: &str = "#include <mpi.h>\n#include <stdio.h>\n\
int main(int c, char **v) { int r, n, x = 0; MPI_Init(&c, &v);\n\
MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);\n\
for (int i = 0; i < 20; i++) { MPI_Request q; int y;\n\
  MPI_Irecv(&y, 1, MPI_INT, (r + n - 1) % n, i, MPI_COMM_WORLD, &q);\n\
  MPI_Send(&i, 1, MPI_INT, (r + 1) % n, i, MPI_COMM_WORLD); MPI_Wait(&q, MPI_STATUS_IGNORE); x += y; }\n\
if (r == 0) printf(\"ring: %d\\n\", x); MPI_Finalize(); return 0; }\n";

fn ring(s: &Setup) -> PathBuf {
    let source = s.tmp.join("ring.c");
    std::fs::write(&source, RING).unwrap();
    compile(source.to_str().unwrap(), "ring", &s.tmp)
}

/// The MPI's own mpiexec for 2 ranks.
fn mpiexec() -> Vec<&'static str> {
    match mpi() {
        "mpich" => vec!["mpiexec.mpich", "-n", "2"],
        _ => vec![
            "mpiexec.openmpi",
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            "2",
        ],
    }
}

#[test]
fn a_run_where_mpi_matched_everything_says_so() {
    let Some((s, _job)) = setup() else { return };
    let ring = ring(s);
    let dir = s.tmp.join("run-ring");
    let _ = std::fs::remove_dir_all(&dir);
    // A takeover depth no search reaches here: a busy machine cannot make a timed receive look
    // deep enough to start a takeover.
    let out = Command::new(EXE)
        .args(["run", "--mpi", mpi(), "--lib", s.lib.to_str().unwrap()])
        .args(["--out", dir.to_str().unwrap()])
        .args(["--set", "MATCHSHIM_TAKEOVER_DEPTH=1000000", "-n", "2", "--"])
        .arg(&ring)
        .env_remove("MATCHSHIM_TAKEOVER")
        .env("MATCHSHIM_VERBOSE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let said = "MPI matched all 40 receives; queues never grew: the shim had nothing to do here";
    assert!(stdout.contains(&format!("\n{said}.\n")), "{stdout}");
    assert!(
        stdout.contains("the shim's engine (col+pnp) matched nothing"),
        "{stdout}"
    );
    assert!(!stdout.contains("PRQ searches"), "{stdout}");
    assert!(
        stderr.contains(&format!(
            "matchshim (col+pnp, takeover auto, 2 ranks): {said}"
        )),
        "{stderr}"
    );

    // Without the command: rank 0 is silent where the shim did not take over, and says so
    // where it did.
    let bare = |vars: &[&str]| {
        let out = Command::new(mpiexec()[0])
            .args(&mpiexec()[1..])
            .arg("env")
            .arg(format!("LD_PRELOAD={}", s.lib.display()))
            .args(vars)
            .arg(&ring)
            .env_remove("MATCHSHIM_TAKEOVER")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    let quiet = bare(&["MATCHSHIM_TAKEOVER_DEPTH=1000000"]);
    assert!(!quiet.contains("matchshim"), "{quiet}");
    let always = bare(&["MATCHSHIM_TAKEOVER=always"]);
    assert!(
        always.contains(
            "matchshim (col+pnp, takeover always, 2 ranks): MPI matched 0 % of 40 receives; \
             the shim took over 2 times and matched 40 messages"
        ),
        "{always}"
    );
    assert!(bare(&["MATCHSHIM_TAKEOVER=always", "MATCHSHIM_VERBOSE=0"]).is_empty());
}

#[test]
fn compare_of_a_program_without_matching_work_recommends_no_shim() {
    let Some((s, _job)) = setup() else { return };
    let ring = ring(s);
    let dir = s.tmp.join("compare-ring");
    let out = Command::new(EXE)
        .args(["compare", "--repeat", "1", "--mpi", mpi()])
        .args([
            "--lib",
            s.lib.to_str().unwrap(),
            "--out",
            dir.to_str().unwrap(),
        ])
        .args(["-n", "2", "--"])
        .arg(&ring)
        .env_remove("MATCHSHIM_TAKEOVER")
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr
            .starts_with("compare: 4 runs: native and 3 variants (list, col+pnp, bins), 1 round;"),
        "{stderr}"
    );
    assert!(
        stdout.contains("\nrecommendation: not needed: run without the shim\n"),
        "{stdout}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare.json")).unwrap()).unwrap();
    let r = &json["recommendation"];
    assert_eq!(
        (r["verdict"].as_str(), r["variant"].as_str()),
        (Some("not-needed"), None)
    );
    assert!(
        !stdout.contains("faster there: 0 ns"),
        "a variant that matched nothing is no evidence: {stdout}"
    );
}

/// The `python3` of Debian, where its mpi4py (built for Open MPI) is installed.
fn debian_mpi4py() -> Option<&'static str> {
    let python = "/usr/bin/python3";
    let ok = Command::new(python)
        .args(["-c", "import mpi4py"])
        .output()
        .is_ok_and(|o| o.status.success());
    ok.then_some(python)
}

#[test]
fn debian_mpi4py_runs_under_the_shim_without_mpi_given() {
    let Some((s, _job)) = setup() else { return };
    let open_lib = Path::new(EXE)
        .parent()
        .unwrap()
        .join("../openmpi/release/libmatchshim.so");
    let (Some(python), true) = (debian_mpi4py(), mpi() == "openmpi" || open_lib.is_file()) else {
        eprintln!("note: no Debian mpi4py or no Open MPI build of the shim; skipping");
        return;
    };
    let dir = s.tmp.join("run-mpi4py");
    let _ = std::fs::remove_dir_all(&dir);
    let out = Command::new(EXE)
        .args(["run", "--out", dir.to_str().unwrap(), "-n", "2", "--"])
        .args([python, "-m", "mpi4py.bench", "ringtest"])
        .output()
        .unwrap();
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    assert_eq!(meta(&dir)["mpi"], "openmpi");
    assert!(stdout.contains("\nMPI matched "), "{stdout}");
}

#[test]
fn generate_says_what_its_programs_take_and_keeps_traces_without_force() {
    let out = matchshim(&["generate", "--", "app_nbody", "--help"]);
    let usage = text(&out.stdout);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        usage.starts_with("app_nbody [-b BODIES]") && usage.contains("bodies per rank (64)"),
        "{usage}"
    );
    let help = text(&matchshim(&["generate", "--help"]).stdout);
    assert!(
        help.contains("halo_mt [-t THREADS]") && help.contains("-- PROGRAM --help"),
        "{help}"
    );
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generate-force");
    let _ = std::fs::remove_dir_all(&dir);
    let generate = |force: bool| {
        let mut args = vec!["generate", "-n", "4", "--out", dir.to_str().unwrap()];
        if force {
            args.push("--force");
        }
        args.extend(["--", "app_nbody", "-i", "1"]);
        matchshim(&args)
    };
    assert!(generate(false).status.success());
    let err = error_line(&generate(false));
    assert!(
        err.contains("holds 4 traces already: give --force to replace them"),
        "{err}"
    );
    assert!(generate(true).status.success());
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 4);

    let figures = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("figures-force");
    std::fs::create_dir_all(&figures).unwrap();
    std::fs::write(figures.join("tables.md"), "earlier").unwrap();
    let err = error_line(&matchshim(&["figures", "--out", figures.to_str().unwrap()]));
    assert!(err.contains("holds figures already"), "{err}");
    assert_eq!(
        std::fs::read_to_string(figures.join("tables.md")).unwrap(),
        "earlier"
    );
}
