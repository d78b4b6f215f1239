//! Traces of the benchmark programs at any scale, from a simulation of the programs running on
//! the shim ([`sim`]): the FDS-like hot spot (`coll hotspot`), the Radix-like, Nbody-like and
//! MiniAMR-like application mixes (`app_radix`, `app_nbody`, `app_miniamr`) of Ghazimirsaeed et al. 2019, §5, and
//! Dosanjh et al.'s (2018) multithreaded halo (`halo_mt`). Every rank is simulated; the traces of the ranks
//! asked for are kept, in the format the shim records.
//!
//! Two machines: `local` is this kind of machine (every rank shares 2 cores, as the recorded
//! runs here do), which the simulation is checked against; `cluster` gives every thread its own
//! core and the network's latency, for the scales no single machine runs.

mod programs;
pub mod sim;

use crate::trace::{Header, Trace};
use programs::Costs;
use sim::{Machine, Script, Sim};

/// splitmix64: enough randomness for costs and orders, the same for a seed everywhere.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i as u64 + 1) as usize);
        }
    }
}

/// A program whose traffic can be generated, with its parameters (named as the program's
/// options).
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// `coll hotspot ITERS`.
    Hotspot { iters: usize },
    /// `app_radix -n KEYS -i ITERS -r REPS`.
    Radix {
        keys: usize,
        iters: usize,
        reps: usize,
    },
    /// `app_nbody -b BODIES -c CHUNKS -i STEPS -e EVERY -r REPS`.
    Nbody {
        bodies: usize,
        chunks: i32,
        steps: usize,
        every: usize,
        reps: usize,
    },
    /// `app_miniamr -i STEPS -R EVERY -r REPS`.
    Miniamr {
        steps: usize,
        every: usize,
        reps: usize,
    },
    /// `halo_mt -t THREADS -i ITERS -r REPS -d DIM`.
    Halo {
        threads: usize,
        iters: usize,
        reps: usize,
        dim: usize,
    },
}

/// Each program the generator models: its name, its command line and what it does, with its
/// options and their defaults (the same as the program's own, in matchshim's `ci/bench/`).
pub const USAGE: &[(&str, &str)] = &[
    (
        "coll",
        "coll hotspot [ITERS]
  The FDS-like hot spot: every rank sends point-to-point messages to rank 0 while all ranks
  gather to it (MPI_Gather, MPI_Gatherv); rank 0 posts its receives in the order opposite to
  their arrival.
  ITERS        iterations (200)",
    ),
    (
        "app_radix",
        "app_radix [-n KEYS] [-i ITERS] [-r REPS]
  A parallel radix sort, collective-heavy: every pass an MPI_Alltoall of bucket counts, an
  MPI_Alltoallv of the keys, one message to the ring neighbour and an MPI_Allreduce.
  -n KEYS      keys per rank (4096)
  -i ITERS     passes (16)
  -r REPS      repetitions (5)",
    ),
    (
        "app_nbody",
        "app_nbody [-b BODIES] [-c CHUNKS] [-i STEPS] [-e EVERY] [-r REPS]
  An all-pairs N-body code, point-to-point heavy: every step each rank has (n-1)*CHUNKS
  receives outstanding, each with its own source and tag, posted last source first; an
  MPI_Allreduce every EVERY steps.
  -b BODIES    bodies per rank (64)
  -c CHUNKS    messages a rank's bodies travel in, to each peer (8; at most BODIES)
  -i STEPS     steps (20)
  -e EVERY     steps between energy sums (5)
  -r REPS      repetitions (3)",
    ),
    (
        "app_miniamr",
        "app_miniamr [-i STEPS] [-R EVERY] [-r REPS]
  Adaptive mesh refinement, mixed: a 3-D halo exchange with irregular message counts and
  tags every step; every EVERY steps a refinement (MPI_Allreduce, MPI_Bcast) and load
  balancing (MPI_Alltoallv).
  -i STEPS     steps (24)
  -R EVERY     steps between refinements (4)
  -r REPS      repetitions (3)",
    ),
    (
        "halo_mt",
        "halo_mt [-t THREADS] [-i ITERS] [-r REPS] [-d 1|2]
  A multithreaded halo exchange (MPI_THREAD_MULTIPLE): THREADS threads per rank each post a
  receive from every neighbour with a tag of their own, on a 1-D ring or a 2-D torus.
  -t THREADS   threads per rank (1)
  -i ITERS     iterations (200)
  -r REPS      repetitions (5)
  -d 1|2       dimensions (2)",
    ),
];

impl Shape {
    pub const PROGRAMS: &'static [&'static str] = &[
        "coll hotspot",
        "app_radix",
        "app_nbody",
        "app_miniamr",
        "halo_mt",
    ];

    /// What `program` (a name or a path to one) does and the options it takes.
    pub fn usage(program: &str) -> Option<&'static str> {
        let name = program.rsplit('/').next().unwrap_or(program);
        USAGE.iter().find(|(n, _)| *n == name).map(|(_, u)| *u)
    }

    /// The shape of a benchmark command line (`ci/bench/`), with the program's own defaults for
    /// what it does not give: `coll hotspot [ITERS]`, `app_radix [-n KEYS] [-i ITERS] [-r
    /// REPS]`, `app_nbody [-b BODIES] [-c CHUNKS] [-i STEPS] [-e EVERY] [-r REPS]`, `app_miniamr
    /// [-i STEPS] [-R EVERY] [-r REPS]`, `halo_mt [-t THREADS] [-i ITERS] [-r REPS] [-d 1|2]`.
    pub fn parse(command: &[String]) -> Result<Shape, String> {
        let program = command.first().ok_or("no program given")?;
        let name = program.rsplit('/').next().unwrap_or(program);
        let mut options = Options::new(name, &command[1..]);
        let shape = match name {
            "coll" => {
                match options.words.next().map(String::as_str) {
                    Some("hotspot") => {}
                    _ => return Err("coll generates only `coll hotspot [ITERS]`".into()),
                }
                let iters = match options.words.next() {
                    Some(w) => options.number("ITERS", w)?,
                    None => 200,
                };
                Shape::Hotspot { iters }
            }
            "app_radix" => Shape::Radix {
                keys: options.get('n', 4096)?,
                iters: options.get('i', 16)?,
                reps: options.get('r', 5)?,
            },
            "app_nbody" => Shape::Nbody {
                bodies: options.get('b', 64)?,
                chunks: options.get('c', 8)? as i32,
                steps: options.get('i', 20)?,
                every: options.get('e', 5)?,
                reps: options.get('r', 3)?,
            },
            "app_miniamr" => Shape::Miniamr {
                steps: options.get('i', 24)?,
                every: options.get('R', 4)?,
                reps: options.get('r', 3)?,
            },
            "halo_mt" => Shape::Halo {
                threads: options.get('t', 1)?,
                iters: options.get('i', 200)?,
                reps: options.get('r', 5)?,
                dim: options.get('d', 2)?,
            },
            other => {
                return Err(format!(
                    "no generator for {other:?}; programs: {}",
                    Shape::PROGRAMS.join(", ")
                ))
            }
        };
        options.done()?;
        match shape {
            Shape::Nbody { bodies, chunks, .. } if chunks < 1 || chunks as usize > bodies => {
                Err("app_nbody: 1 <= chunks <= bodies".into())
            }
            Shape::Halo { threads: 0, .. } => Err("halo_mt: at least 1 thread".into()),
            Shape::Halo { dim, .. } if dim != 1 && dim != 2 => Err("halo_mt: -d 1 or 2".into()),
            shape => Ok(shape),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Shape::Hotspot { .. } => "hotspot",
            Shape::Radix { .. } => "radix",
            Shape::Nbody { .. } => "nbody",
            Shape::Miniamr { .. } => "miniamr",
            Shape::Halo { .. } => "halo",
        }
    }

    /// The program's command line, as the traces' origin names it.
    pub fn command(&self) -> String {
        match *self {
            Shape::Hotspot { iters } => format!("coll hotspot {iters}"),
            Shape::Radix { keys, iters, reps } => {
                format!("app_radix -n {keys} -i {iters} -r {reps}")
            }
            Shape::Nbody {
                bodies,
                chunks,
                steps,
                every,
                reps,
            } => format!("app_nbody -b {bodies} -c {chunks} -i {steps} -e {every} -r {reps}"),
            Shape::Miniamr { steps, every, reps } => {
                format!("app_miniamr -i {steps} -R {every} -r {reps}")
            }
            Shape::Halo {
                threads,
                iters,
                reps,
                dim,
            } => format!("halo_mt -t {threads} -i {iters} -r {reps} -d {dim}"),
        }
    }

    fn threads(&self) -> usize {
        match self {
            Shape::Halo { threads, .. } => *threads,
            _ => 1,
        }
    }
}

/// A program's `-x VALUE` options, each at most once, and its other words.
struct Options<'a> {
    program: &'a str,
    given: Vec<(char, &'a String)>,
    words: std::vec::IntoIter<&'a String>,
    bad: Option<String>,
}

impl<'a> Options<'a> {
    fn new(program: &'a str, args: &'a [String]) -> Options<'a> {
        let (mut given, mut words, mut bad) = (Vec::new(), Vec::new(), None);
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            match arg.strip_prefix('-').map(|o| o.chars().collect::<Vec<_>>()) {
                Some(o) if o.len() == 1 => match it.next() {
                    Some(value) => given.push((o[0], value)),
                    None => bad = Some(format!("{program}: -{} needs a value", o[0])),
                },
                _ => words.push(arg),
            }
        }
        Options {
            program,
            given,
            words: words.into_iter(),
            bad,
        }
    }

    fn number(&self, what: &str, text: &str) -> Result<usize, String> {
        text.parse::<usize>()
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                format!(
                    "{}: {what} must be a positive number, not {text:?}",
                    self.program
                )
            })
    }

    fn get(&mut self, option: char, default: usize) -> Result<usize, String> {
        match self.given.iter().position(|(o, _)| *o == option) {
            Some(i) => {
                let (_, value) = self.given.remove(i);
                self.number(&format!("-{option}"), value)
            }
            None => Ok(default),
        }
    }

    /// Every option was one the program takes, and no word was left over.
    fn done(mut self) -> Result<(), String> {
        if let Some(bad) = self.bad.take() {
            return Err(bad);
        }
        if let Some((o, _)) = self.given.first() {
            return Err(format!("{}: no option -{o} here", self.program));
        }
        match self.words.next() {
            Some(w) => Err(format!("{}: unexpected argument {w:?}", self.program)),
            None => Ok(()),
        }
    }
}

/// A machine: `local` or `cluster`, then any of its costs changed as `,name=value`
/// (`local,quantum_ns=5e5`): cores, quantum_ns, spin_ns, post_ns, send_ns, drain_ns,
/// latency_ns, ns_per_byte, jitter.
pub fn machine(text: &str) -> Result<Machine, String> {
    let mut parts = text.split(',');
    // Costs of the shim's calls as measured here (ci/bench-p2p.sh: a posted receive, a send
    // and a drained message are each a fraction of a microsecond); the local machine's
    // quantum and polling time are those that gave recorded depths best (ci/bench programs
    // at 16 and 32 ranks, recorded and simulated, within 1.5x of each other).
    let base = Machine {
        cores: 0,
        quantum_ns: 1e6,
        spin_ns: 10e3,
        post_ns: 500.0,
        send_ns: 500.0,
        drain_ns: 300.0,
        latency_ns: 1000.0,
        ns_per_byte: 0.1,
        jitter: 0.3,
    };
    let mut m = match parts.next().unwrap_or_default() {
        "local" => Machine { cores: 2, ..base },
        "cluster" => Machine {
            latency_ns: 2000.0,
            ..base
        },
        other => {
            return Err(format!(
                "unknown machine {other:?}; machines: local, cluster"
            ))
        }
    };
    for part in parts {
        let bad = || {
            format!(
                "machine setting {part:?} is not name=value with a number of cores, \
                 quantum_ns, spin_ns, post_ns, send_ns, drain_ns, latency_ns, ns_per_byte or \
                 jitter"
            )
        };
        let (name, value) = part.split_once('=').ok_or_else(bad)?;
        let v: f64 = value
            .parse()
            .ok()
            .filter(|v: &f64| *v >= 0.0)
            .ok_or_else(bad)?;
        match name {
            "cores" => m.cores = v as usize,
            "quantum_ns" => m.quantum_ns = v,
            "spin_ns" => m.spin_ns = v,
            "post_ns" => m.post_ns = v,
            "send_ns" => m.send_ns = v,
            "drain_ns" => m.drain_ns = v,
            "latency_ns" => m.latency_ns = v,
            "ns_per_byte" => m.ns_per_byte = v,
            "jitter" if v < 1.0 => m.jitter = v,
            _ => return Err(bad()),
        }
    }
    Ok(m)
}

const COSTS: Costs = Costs {
    interaction_ns: 5.0,
    key_ns: 10.0,
    cell_ns: 2.0,
};

/// Which ranks keep their trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Keep {
    All,
    /// Rank 0, the last rank and evenly spaced ones between: this many at most.
    Sample(usize),
}

impl Keep {
    fn mask(self, n: usize) -> Vec<bool> {
        match self {
            Keep::Sample(k) if k < n => {
                let mut mask = vec![false; n];
                let k = k.max(2);
                for i in 0..k {
                    mask[i * (n - 1) / (k - 1)] = true;
                }
                mask
            }
            _ => vec![true; n],
        }
    }
}

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub shape: Shape,
    pub ranks: usize,
    pub machine: String,
    pub keep: Keep,
    pub seed: u64,
}

/// The traces of the kept ranks, and the simulated run time.
pub fn generate(spec: &Spec) -> Result<(Vec<Trace>, f64), String> {
    let n = spec.ranks;
    if !(2..=1 << 20).contains(&n) {
        return Err(format!("ranks must be 2 to 2^20, not {n}"));
    }
    let machine = machine(&spec.machine)?;
    let (ni, shape) = (n as i32, &spec.shape);
    let scripts: Vec<Vec<Box<dyn Script>>> = (0..ni)
        .map(|r| {
            (0..shape.threads() as i32)
                .map(|t| program(shape, r, ni, t, spec.seed))
                .collect()
        })
        .collect();
    let origin = format!(
        "generated: {} on {n} ranks, machine {}, seed {}",
        shape.command(),
        spec.machine,
        spec.seed
    );
    let outcome = Sim::new(machine, spec.seed, scripts, &spec.keep.mask(n)).run()?;
    let traces = outcome
        .traces
        .into_iter()
        .map(|(rank, events)| Trace {
            header: Header {
                rank,
                comm: 0,
                comm_size: n,
                world_size: n,
                origin: origin.clone(),
            },
            events,
        })
        .collect();
    Ok((traces, outcome.end_ns))
}

fn program(shape: &Shape, r: i32, n: i32, thread: i32, seed: u64) -> Box<dyn Script> {
    use programs::*;
    match *shape {
        Shape::Hotspot { iters } => Box::new(Program::new(r, n, hotspot(r, n, iters))),
        Shape::Radix { keys, iters, reps } => {
            Box::new(Program::new(r, n, radix(r, n, keys, iters, reps, COSTS)))
        }
        Shape::Nbody {
            bodies,
            chunks,
            steps,
            every,
            reps,
        } => Box::new(Program::new(
            r,
            n,
            nbody(r, n, (bodies, chunks), (steps, every, reps), COSTS),
        )),
        Shape::Miniamr { steps, every, reps } => Box::new(Program::new(
            r,
            n,
            miniamr(r, n, steps, every, reps, COSTS, seed),
        )),
        Shape::Halo {
            iters, reps, dim, ..
        } => Box::new(Program::new(r, n, halo(r, n, thread, iters, reps, dim))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::Clock;
    use crate::matching::{EngineKind, EngineParams};
    use crate::trace::replay::replay;

    #[test]
    fn every_program_says_its_options_with_the_defaults_it_uses() {
        for program in Shape::PROGRAMS {
            let words: Vec<String> = program.split_whitespace().map(String::from).collect();
            let usage = Shape::usage(&words[0]).unwrap();
            let command = Shape::parse(&words).unwrap().command();
            let mut parts = command.split_whitespace().skip(words.len()).peekable();
            while let Some(word) = parts.next() {
                let (option, value) = match word.strip_prefix('-') {
                    Some(_) => (format!("\n  {word} "), parts.next().unwrap()),
                    // `coll hotspot`'s one positional value.
                    None => ("\n  ITERS ".to_string(), word),
                };
                let line = usage
                    .split_inclusive('\n')
                    .map(|l| format!("\n{}", l.trim_end()))
                    .find(|l| l.starts_with(&option))
                    .unwrap_or_else(|| panic!("{program}: no line for {option:?} in {usage}"));
                assert!(
                    line.contains(&format!("({value}")),
                    "{program}: {line} vs {value}"
                );
            }
        }
        assert_eq!(
            Shape::usage("/opt/bench/app_radix"),
            Shape::usage("app_radix")
        );
        assert_eq!(Shape::usage("a.out"), None);
    }

    fn shape(command: &str) -> Shape {
        let words: Vec<String> = command.split_whitespace().map(String::from).collect();
        Shape::parse(&words).unwrap()
    }

    /// Every program runs to its end on both machines, and every engine replays its traces to
    /// the answers the simulation recorded (the matches of one ordered list).
    #[test]
    fn small_runs_finish_and_replay_on_every_engine() {
        let clock = Clock::new();
        for command in [
            "coll hotspot 3",
            "app_radix -n 64 -i 2 -r 1",
            "app_nbody -b 8 -c 2 -i 3 -r 1",
            "app_miniamr -i 4 -r 1",
            "halo_mt -t 3 -i 4 -r 1 -d 1",
        ] {
            for (ranks, machine, seed) in [(3, "local", 1), (8, "cluster", 2), (12, "local", 3)] {
                let spec = Spec {
                    shape: shape(command),
                    ranks,
                    machine: machine.into(),
                    keep: Keep::Sample(4),
                    seed,
                };
                let (traces, end) = generate(&spec).unwrap_or_else(|e| panic!("{command}: {e}"));
                assert!(
                    end > 0.0 && traces.len() == 4.min(ranks),
                    "{command} n={ranks}"
                );
                assert_eq!(traces[0].header.rank, 0);
                assert_eq!(traces.last().unwrap().header.rank, ranks - 1);
                assert!(traces.iter().all(|t| !t.events.is_empty()), "{command}");
                for trace in &traces {
                    for &kind in EngineKind::ALL {
                        replay(trace, kind, &EngineParams::default(), &clock)
                            .unwrap_or_else(|e| panic!("{command} n={ranks}: {e}"));
                    }
                }
            }
        }
    }

    #[test]
    fn command_lines_read_as_the_programs_read_them() {
        assert_eq!(shape("coll hotspot"), Shape::Hotspot { iters: 200 });
        assert_eq!(
            shape("/x/app_nbody -c 2 -b 16"),
            Shape::Nbody {
                bodies: 16,
                chunks: 2,
                steps: 20,
                every: 5,
                reps: 3
            }
        );
        let err = |c: &str| {
            let words: Vec<String> = c.split_whitespace().map(String::from).collect();
            Shape::parse(&words).unwrap_err()
        };
        assert!(err("app_radix -q 3").contains("-q"));
        assert!(err("app_radix -n").contains("needs a value"));
        assert!(err("app_radix -n 0").contains("positive"));
        assert!(err("coll latency").contains("hotspot"));
        assert!(err("app_nbody -b 4 -c 8").contains("chunks"));
        assert!(err("lulesh").contains("app_radix"));
        assert!(machine("local,quantum_ns=5e5").unwrap().quantum_ns == 5e5);
        assert!(machine("cluster,warp=9").unwrap_err().contains("warp"));
        assert!(machine("mainframe").unwrap_err().contains("local, cluster"));
    }

    #[test]
    fn samples_keep_the_first_and_last_rank() {
        assert_eq!(Keep::Sample(3).mask(5), [true, false, true, false, true]);
        assert_eq!(Keep::Sample(9).mask(4), [true; 4]);
        assert_eq!(Keep::All.mask(2), [true; 2]);
    }
}
