#!/usr/bin/env python3
"""Differential fuzzing of the shim against native MPI (see ci/fuzz.sh for the interface).

Seeds run in batches: one mpiexec per (configuration, rank count) runs all of its seeds in
sequence (ci/fuzz/fuzz.c, one fresh duplicate of MPI_COMM_WORLD per seed). Seed S runs with
2 + S % 3 ranks, natively and under one or more shim configurations (ENGINE/TAKEOVER/COLL),
spread over the seeds. A seed passes under a configuration when it passes its own checks there
and its digest equals the native run's. A failing seed is confirmed (run again, both sides),
minimised over its units, and printed with the command that replays it."""

import argparse
import dataclasses
import functools
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# auto:D is auto with MATCHSHIM_TAKEOVER_DEPTH=D: at D=1 it takes over wherever MPI holds more
# than two receives, so the plain path's switches to and from takeover run often.
TAKEOVERS = ["auto", "always", "flip:1", "flip:2", "flip:3", "flip:7", "auto:1"]
COLLS = ["auto", "shim", "native"]


@dataclasses.dataclass(frozen=True)
class Program:
    """How fuzz.c runs its seeds: T threads a rank (0: MPI_Init, one thread), and whether the
    seed's communicators make MPI-4 matching assertions."""
    threads: int = 0
    asserts: bool = False

    def args(self):
        return (["--threads", str(self.threads)] if self.threads else []) + \
            (["--asserts"] if self.asserts else [])

    def options(self):
        """As ci/fuzz.sh's options, for a replay command."""
        return "".join(" " + a for a in self.args())

    def describe(self):
        said = ([f"{self.threads} threads a rank"] if self.threads else []) + \
            (["asserting communicators"] if self.asserts else [])
        return f" ({', '.join(said)})" if said else ""

    @staticmethod
    def from_tokens(tokens):
        """From a regression line's trailing `threads=T` and `asserts` tokens (removed)."""
        threads, asserts = 0, False
        while tokens and (tokens[-1].startswith("threads=") or tokens[-1] == "asserts"):
            token = tokens.pop()
            if token == "asserts":
                asserts = True
            else:
                threads = int(token[len("threads="):])
        return Program(threads, asserts)


def engines():
    with open(os.path.join(ROOT, "ci", "engines")) as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def ranks_of(seed):
    return 2 + seed % 3


def shim_lib(mpi):
    """The shim built for `mpi` (FUZZ_SHIM_LIB_MPICH / _OPENMPI: another build, such as one
    with a bug put in on purpose to see the fuzzer find it)."""
    override = os.environ.get("FUZZ_SHIM_LIB_" + mpi.upper())
    if override:
        return override
    sub = "target/release" if mpi == "mpich" else "target/openmpi/release"
    return os.path.join(ROOT, sub, "libmatchshim.so")


@functools.cache
def launcher(mpi, n):
    """ci/common.sh's launcher: n ranks over shared memory, unbound, idle ranks yielding."""
    out = subprocess.run(
        ["bash", "-c", 'source ci/common.sh && launcher "$@"', "launcher", mpi, str(n), "shm",
         "unbound", "yield"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return out.splitlines()


def binary(mpi):
    return os.path.join(ROOT, "target", "fuzz", mpi, "fuzz")


def build(mpi):
    out = binary(mpi)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    src = os.path.join(ROOT, "ci", "fuzz", "fuzz.c")
    if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
        return
    cc = {"mpich": "mpicc.mpich", "openmpi": "mpicc.openmpi"}[mpi]
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-o", out, src], check=True)


def parse_config(text):
    """native, or ENGINE/TAKEOVER/COLL."""
    if text == "native":
        return None
    parts = text.split("/")
    if len(parts) != 3 or parts[0] not in engines() or parts[2] not in COLLS:
        raise SystemExit(f"fuzz: bad configuration {text!r}: native or ENGINE/TAKEOVER/COLL "
                         f"(engines: {' '.join(engines())}; coll: shim native)")
    return tuple(parts)


def config_name(config):
    return "native" if config is None else "/".join(config)


def spread_configs():
    """Each engine once, the takeover modes and collective modes turning with them so that
    col+pnp gets the defaults (auto/auto)."""
    es = engines()
    return [(e, TAKEOVERS[(i + 1) % len(TAKEOVERS)], COLLS[(i // 2) % len(COLLS)])
            for i, e in enumerate(es)]


def all_configs():
    return list(itertools.product(engines(), TAKEOVERS, COLLS))


class Run:
    """Runs seeds of one MPI; results are "ok DIGEST", "FAIL why", "hang" or "crash"."""

    def __init__(self, mpi, timeout_per_seed, verbose, program=Program()):
        self.mpi = mpi
        self.program = program
        self.timeout_per_seed = timeout_per_seed
        self.verbose = verbose
        self.launches = 0
        self.launch_seconds = 0.0

    def command(self, config, n, args, report=None):
        cmd = list(launcher(self.mpi, n))
        if config is not None:
            engine, takeover, coll = config
            depth = []
            if takeover.startswith("auto:"):
                takeover, d = takeover.split(":")
                depth = [f"MATCHSHIM_TAKEOVER_DEPTH={d}"]
            cmd += ["env", f"LD_PRELOAD={shim_lib(self.mpi)}", f"MATCHSHIM_ENGINE={engine}",
                    f"MATCHSHIM_TAKEOVER={takeover}", f"MATCHSHIM_COLL={coll}"] + depth
            if report:
                cmd.append(f"MATCHSHIM_REPORT={report}")
        return cmd + [binary(self.mpi)] + self.program.args() + args

    def launch(self, config, n, args, timeout, report=None):
        """(stdout, timed out, exit status)."""
        cmd = self.command(config, n, args, report)
        t0 = time.time()
        self.launches += 1
        with tempfile.TemporaryFile("w+", errors="replace") as log:
            p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
            LIVE_SESSIONS.add(p.pid)
            try:
                p.wait(timeout=timeout)
                hung = False
            except subprocess.TimeoutExpired:
                hung = True
                kill_session(p.pid)
                p.wait()
            finally:
                LIVE_SESSIONS.discard(p.pid)
            log.seek(0)
            out = log.read()
        self.launch_seconds += time.time() - t0
        return out, hung, p.returncode

    def seeds(self, config, seeds, units=None):
        """Results of `seeds` (all with the same rank count) under `config`."""
        results = {}
        todo = list(seeds)
        n = ranks_of(todo[0])
        while todo:
            with tempfile.NamedTemporaryFile("w", suffix=".seeds", delete=False) as f:
                f.write("\n".join(map(str, todo)) + "\n")
                seed_file = f.name
            report = seed_file + ".report"
            args = ["--seed-file", seed_file, "--progress"]
            if units is not None:
                args += ["--units", ",".join(map(str, units))]
            out, hung, status = self.launch(config, n, args,
                                            20 + self.timeout_per_seed * len(todo),
                                            report if config else None)
            started = None
            for line in out.splitlines():
                w = line.split()
                if len(w) >= 2 and w[0] == "start":
                    started = int(w[1])
                elif len(w) >= 3 and w[0] == "seed" and w[1].isdigit():
                    s = int(w[1])
                    results[s] = " ".join(w[2:])
                    started = None if s == started else started
            # a run that ended normally shows the shim on every rank
            if config is not None and status == 0 and not self.shim_loaded(report, n, config[0]):
                raise SystemExit(f"fuzz: the shim did not run on every rank under "
                                 f"{config_name(config)}:\n{out[-2000:]}")
            for path in (seed_file, report):
                if os.path.exists(path):
                    os.unlink(path)
            if started is not None and started not in results:
                results[started] = "hang" if hung else "crash: " + tail(out)
            elif hung or any(s not in results for s in todo):
                # hung or died between seeds: blame the first without a result
                first = next((s for s in todo if s not in results), None)
                if first is not None:
                    results[first] = "hang" if hung else "crash: " + tail(out)
            todo = [s for s in todo if s not in results]
        return results

    def shim_loaded(self, report, n, engine):
        try:
            reps = [json.loads(l) for l in open(report) if l.strip()]
        except (OSError, ValueError):
            return False
        ranks = {r.get("rank") for r in reps if r.get("size") == n}
        return ranks == set(range(n)) and all(r.get("engine") == engine for r in reps)


# Launches run in their own sessions so that a hang can be killed whole; the same must happen
# when the driver itself is stopped, or their ranks keep spinning.
LIVE_SESSIONS = set()


def stop(signum, _frame):
    for sid in list(LIVE_SESSIONS):
        kill_session(sid)
    sys.exit(128 + signum)


def kill_session(sid):
    """Kills the launcher started in session `sid`, every process of that session and their
    descendants (MPICH's proxy makes a session of its own)."""
    ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid=,sid="], stdout=subprocess.PIPE, text=True)
    procs = [tuple(map(int, line.split())) for line in ps.stdout.splitlines()]
    doomed = {pid for pid, _, psid in procs if psid == sid}
    grown = True
    while grown:
        more = {pid for pid, ppid, _ in procs if ppid in doomed} - doomed
        doomed |= more
        grown = bool(more)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def tail(out):
    lines = [l for l in out.splitlines() if l.strip()]
    return " | ".join(lines[-3:])[-300:]


def verdict(native, shim):
    """None if the shim's result agrees with native's, else why not."""
    if native is None or not native.startswith("ok"):
        return None  # judged separately: native runs must pass
    if shim == native:
        return None
    if shim.startswith("ok"):
        return f"digest {shim.split()[1]} differs from native {native.split()[1]}"
    return shim


def replay_command(mpi, seed, config, units=None, program=Program()):
    cmd = f"ci/fuzz.sh --mpi {mpi} --replay {seed} --config {config_name(config)}"
    cmd += program.options()
    if units is not None:
        cmd += " --units " + ",".join(map(str, units))
    return cmd


def plan_units(run, seed):
    out, _, _ = run.launch(None, ranks_of(seed), ["--seed", str(seed), "--plan", "--units", ""], 60)
    for line in out.splitlines():
        if line.startswith(f"plan {seed}:"):
            return int(line.split()[2])
    return 0


def still_fails(run, seed, config, units, kind):
    native = run.seeds(None, [seed], units)[seed]
    shim = run.seeds(config, [seed], units)[seed]
    why = verdict(native, shim)
    if not native.startswith("ok"):
        return False
    return why is not None and failure_kind(why) == kind


def failure_kind(why):
    return why.split()[0]


def minimise(run, seed, config, why):
    """The smallest list of units (delta debugging) with which the seed still fails alike."""
    units = list(range(plan_units(run, seed)))
    kind = failure_kind(why)
    n = 2
    while len(units) >= 2:
        chunk = max(1, len(units) // n)
        subsets = [units[i:i + chunk] for i in range(0, len(units), chunk)]
        reduced = False
        for sub in subsets:
            rest = [u for u in units if u not in sub]
            if rest and still_fails(run, seed, config, rest, kind):
                units, n, reduced = rest, max(n - 1, 2), True
                break
        if not reduced:
            if n >= len(units):
                break
            n = min(len(units), 2 * n)
    return units


def fuzz(args):
    program = Program(args.threads, args.asserts)
    configs = [parse_config(c) for c in args.configs] if args.configs else None
    mpis = ["mpich", "openmpi"] if args.mpi == "all" else [args.mpi]
    failed = 0
    for mpi in mpis:
        build(mpi)
        run = Run(mpi, args.timeout_per_seed, args.verbose, program)
        cfgs = configs or (all_configs() if args.all_configs else spread_configs())
        seeds = list(range(args.first, args.first + args.seeds))
        t0 = time.time()
        # which configurations each seed runs under
        plan = {}
        for s in seeds:
            for j in range(args.per_seed):
                # seeds 3k..3k+2 (every rank count) share a configuration
                plan.setdefault(cfgs[((s // 3) * args.per_seed + j) % len(cfgs)], []).append(s)
        native = {}
        for n in (2, 3, 4):
            batch = [s for s in seeds if ranks_of(s) == n]
            if batch:
                native.update(run.seeds(None, batch))
        bad_native = {s: r for s, r in native.items() if not r.startswith("ok")}
        # A native failure counts if it fails again alone (a loaded node has crashed a launch
        # of Open MPI's runtime); one that passes then is said, and judged against that run.
        for s in sorted(bad_native):
            again = run.seeds(None, [s])[s]
            if again.startswith("ok"):
                print(f"{mpi}: seed {s} failed natively once, then passed: {bad_native.pop(s)}")
                native[s] = again
        for s, r in sorted(bad_native.items()):
            print(f"{mpi}: seed {s} fails natively: {r}")
            print(f"  replay: {replay_command(mpi, s, None, program=program)}")
        failed += len(bad_native)
        counts, failures = {}, []
        for config, cseeds in plan.items():
            for n in (2, 3, 4):
                batch = [s for s in cseeds if ranks_of(s) == n]
                if not batch:
                    continue
                results = run.seeds(config, batch)
                counts[config_name(config)] = counts.get(config_name(config), 0) + len(batch)
                for s in batch:
                    why = verdict(native.get(s), results[s])
                    if why is not None:
                        failures.append((s, config, why))
                        if args.verbose:
                            print(f"{mpi}: seed {s} under {config_name(config)}: {why}",
                                  flush=True)
        for s, config, why in failures:
            # confirmed if it fails again, native passing again
            if not still_fails(run, s, config, None, failure_kind(why)):
                print(f"{mpi}: seed {s} under {config_name(config)}: {why} "
                      f"(did not fail again: reported, not minimised)")
                print(f"  replay: {replay_command(mpi, s, config, program=program)}")
                failed += 1
                continue
            units = minimise(run, s, config, why) if args.minimise else None
            print(f"{mpi}: seed {s} under {config_name(config)}: {why}")
            print(f"  replay: {replay_command(mpi, s, config, units, program)}")
            failed += 1
        total = sum(counts.values())
        print(f"{mpi}{program.describe()}: {len(seeds)} seeds, {total} shim runs in "
              f"{len(counts)} configurations, {len(failures)} divergences, {len(bad_native)} native failures, "
              f"{time.time() - t0:.0f}s ({run.launches} launches)")
        if args.counts:
            for name in sorted(counts):
                print(f"  {name}: {counts[name]}")
    return 1 if failed else 0


def replay(args):
    config = parse_config(args.config) if args.config else None
    mpi = args.mpi if args.mpi != "all" else "mpich"
    build(mpi)
    run = Run(mpi, args.timeout_per_seed, True, Program(args.threads, args.asserts))
    seed = args.replay
    units = [int(u) for u in args.units.split(",")] if args.units else None
    extra = ["--units", args.units] if args.units else []
    n = ranks_of(seed)
    print(f"# {mpi}, seed {seed}, {n} ranks")
    out, _, _ = run.launch(None, n, ["--seed", str(seed), "--plan", "--units", args.units or "x"],
                           60)
    print("\n".join(l for l in out.splitlines() if not l.startswith("seed ")))
    logs = {}
    for cfg in [None] + ([config] if config else []):
        out, hung, _ = run.launch(cfg, n, ["--seed", str(seed), "--log"] + extra,
                                  20 + args.timeout_per_seed)
        result = [l for l in out.splitlines() if l.startswith(f"seed {seed} ")]
        print(f"# {config_name(cfg)}: " + (result[0] if result else ("hang" if hung else "crash")))
        logs[cfg] = sorted(l for l in out.splitlines() if l[:1] == "r" and " u" in l)
    if config:
        import difflib
        diff = list(difflib.unified_diff(logs[None], logs[config], "native",
                                         config_name(config), lineterm="", n=0))
        print("# log differences (racy outcomes differ legitimately):" if diff else
              "# logs equal")
        print("\n".join(diff))
    native = run.seeds(None, [seed], units)[seed]
    shim = run.seeds(config, [seed], units)[seed] if config else native
    why = verdict(native, shim)
    bad = not native.startswith("ok") or why is not None
    print(f"# verdict: {'FAIL' if bad else 'PASS'}" + (f" ({why})" if why else ""))
    return 1 if bad else 0


def regressions(args):
    """Replays every line of ci/fuzz/regressions: MPI SEED CONFIG [UNITS] [threads=T] [asserts]."""
    path = os.path.join(ROOT, "ci", "fuzz", "regressions")
    mpis = ["mpich", "openmpi"] if args.mpi == "all" else [args.mpi]
    failed = total = 0
    runs = {}
    for line in open(path):
        line = line.split("#")[0].split()
        if not line:
            continue
        program = Program.from_tokens(line)
        mpi, seed, config = line[0], int(line[1]), parse_config(line[2])
        units = [int(u) for u in line[3].split(",")] if len(line) > 3 else None
        if mpi not in mpis:
            continue
        if (mpi, program) not in runs:
            build(mpi)
            runs[mpi, program] = Run(mpi, args.timeout_per_seed, False, program)
        run = runs[mpi, program]
        native = run.seeds(None, [seed], units)[seed]
        shim = run.seeds(config, [seed], units)[seed]
        why = verdict(native, shim) or (None if native.startswith("ok") else "native: " + native)
        total += 1
        if why:
            failed += 1
            print(f"FAIL regression {mpi} seed {seed} {config_name(config)}: {why}")
            print(f"  replay: {replay_command(mpi, seed, config, units, program)}")
    print(f"regressions: {total - failed} of {total} pass")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(prog="ci/fuzz.sh", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mpi", default="all", choices=["mpich", "openmpi", "all"])
    ap.add_argument("--seeds", type=int, default=0, help="how many seeds to run")
    ap.add_argument("--from", dest="first", type=int, default=1, help="first seed")
    ap.add_argument("--configs", nargs="+", metavar="CONFIG",
                    help="ENGINE/TAKEOVER/COLL configurations to spread the seeds over "
                         "(default: each engine once, modes turning)")
    ap.add_argument("--all-configs", action="store_true",
                    help="spread over every engine x takeover x coll configuration")
    ap.add_argument("--per-seed", type=int, default=1,
                    help="configurations each seed runs under (default 1)")
    ap.add_argument("--no-minimise", dest="minimise", action="store_false")
    ap.add_argument("--counts", action="store_true", help="print seeds per configuration")
    ap.add_argument("--timeout-per-seed", type=float, default=5.0)
    ap.add_argument("--threads", type=int, default=0, choices=range(0, 5), metavar="T",
                    help="MPI_THREAD_MULTIPLE, T threads a rank running plans at once "
                         "(1-4; default 0: MPI_Init, one thread)")
    ap.add_argument("--asserts", action="store_true",
                    help="the seeds' communicators make MPI-4 matching assertions, which their "
                         "traffic keeps")
    ap.add_argument("--replay", type=int, metavar="SEED", help="run one seed with logs")
    ap.add_argument("--config", help="with --replay: the configuration (default: native only)")
    ap.add_argument("--units", help="with --replay: only these units (comma-separated)")
    ap.add_argument("--regressions", action="store_true",
                    help="replay the seeds in ci/fuzz/regressions")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, stop)
    if args.replay is not None:
        return replay(args)
    status = 0
    if args.regressions:
        status |= regressions(args)
    if args.seeds > 0:
        status |= fuzz(args)
    elif not args.regressions:
        ap.error("nothing to do: --seeds N, --replay SEED or --regressions")
    return status


if __name__ == "__main__":
    sys.exit(main())
