//! Settings read once from the environment at `MPI_Init`.

use crate::matching::gpu::Launch;
use crate::matching::{EngineKind, EngineParams, Simd};
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct Config {
    pub engine: EngineKind,
    pub params: EngineParams,
    /// JSON Lines file that gets one report per rank at `MPI_Finalize`.
    pub report: Option<PathBuf>,
    /// When rank 0 prints its one-line summary at `MPI_Finalize`.
    pub verbose: Verbosity,
    /// Who runs collectives.
    pub coll: CollMode,
    /// When the shim matches instead of MPI.
    pub takeover: Takeover,
    /// The search depth (elements a list search passes) from which the shim's matching beats
    /// MPI's own: `auto` takes over when MPI's queues look this deep and gives matching back
    /// when the shim's searches stay below half of it.
    pub takeover_depth: u32,
    /// Directory that gets every communicator's trace at `MPI_Finalize`.
    pub trace: Option<PathBuf>,
}

/// `MATCHSHIM_TAKEOVER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Takeover {
    /// MPI matches while queues are short; the shim takes over when they grow.
    Auto,
    /// The shim matches every message.
    Always,
    /// Switches every N receives on every communicator (a test of the switch itself).
    Flip(u32),
}

impl std::fmt::Display for Takeover {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self {
            Takeover::Auto => write!(f, "auto"),
            Takeover::Always => write!(f, "always"),
            Takeover::Flip(n) => write!(f, "flip:{n}"),
        }
    }
}

/// Measured on MPICH and Open MPI: their searches cost 2 to 3 ns per queued element, the shim's
/// takeover of a message 0.1 to 0.4 µs more than MPI's own receive.
pub const DEFAULT_TAKEOVER_DEPTH: u32 = 64;

/// `MATCHSHIM_COLL`: the shim runs a collective on its own point-to-point only where that
/// pays (`auto`, see `protocol::coll::shim_pays`), always (`shim`), or never (`native`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollMode {
    Auto,
    Shim,
    Native,
}

impl CollMode {
    pub const ALL: [CollMode; 3] = [CollMode::Auto, CollMode::Shim, CollMode::Native];

    pub fn name(self) -> &'static str {
        match self {
            CollMode::Auto => "auto",
            CollMode::Shim => "shim",
            CollMode::Native => "native",
        }
    }
}

/// `MATCHSHIM_VERBOSE`: when rank 0 says, at `MPI_Finalize`, who matched the run's receives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verbosity {
    /// `0`: never.
    Quiet,
    /// Unset: when the shim took matching over somewhere.
    Takeovers,
    /// `1`: always, with the engine's counters.
    Always,
}

/// Every variable the shim reads.
pub const KNOWN: &[&str] = &[
    "MATCHSHIM_ENGINE",
    "MATCHSHIM_BINS",
    "MATCHSHIM_THETA",
    "MATCHSHIM_K",
    "MATCHSHIM_KC",
    "MATCHSHIM_KP",
    "MATCHSHIM_SIMD",
    "MATCHSHIM_COLL",
    "MATCHSHIM_REPORT",
    "MATCHSHIM_VERBOSE",
    "MATCHSHIM_TAKEOVER",
    "MATCHSHIM_TAKEOVER_DEPTH",
    "MATCHSHIM_TRACE",
    "MATCHSHIM_GPU_BURST",
    "MATCHSHIM_GPU_SCAN",
    "MATCHSHIM_GPU_LAUNCH",
    "MATCHSHIM_NVRTC",
];

fn bad_value(name: &str, value: &str, accepted: &str) -> String {
    format!("{name}={value:?} is not valid; accepted values: {accepted}")
}

fn positive(name: &str, value: &str) -> Result<usize, String> {
    value
        .parse::<usize>()
        .ok()
        .filter(|&n| n > 0)
        .ok_or_else(|| bad_value(name, value, "a positive integer"))
}

/// `auto` (the widest this CPU has) or a width this CPU has.
fn simd(name: &str, value: &str) -> Result<Simd, String> {
    if value == "auto" {
        return Ok(Simd::detect());
    }
    let names: Vec<&str> = Simd::available_all().map(Simd::name).collect();
    let accepted = format!("auto, {} (the widths this CPU has)", names.join(", "));
    Simd::parse(value)
        .filter(|simd| simd.available())
        .ok_or_else(|| bad_value(name, value, &accepted))
}

fn path(name: &str, value: String, accepted: &str) -> Result<PathBuf, String> {
    if value.is_empty() {
        return Err(bad_value(name, &value, accepted));
    }
    Ok(PathBuf::from(value))
}

impl Config {
    /// Reads `MATCHSHIM_*` from `vars`; an error names the variable and what it accepts.
    pub fn from_vars<I>(vars: I) -> Result<Config, String>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut config = Config {
            engine: EngineKind::ColPnp,
            params: EngineParams::default(),
            report: None,
            verbose: Verbosity::Takeovers,
            coll: CollMode::Auto,
            takeover: Takeover::Auto,
            takeover_depth: DEFAULT_TAKEOVER_DEPTH,
            trace: None,
        };
        // MATCHSHIM_K splits evenly; MATCHSHIM_KC / MATCHSHIM_KP then override their half.
        let (mut k, mut k_c, mut k_p) = (None, None, None);
        for (name, value) in vars {
            if !name.starts_with("MATCHSHIM_") {
                continue;
            }
            match name.as_str() {
                "MATCHSHIM_BINS" => config.params.bins = positive(&name, &value)?,
                "MATCHSHIM_THETA" => config.params.theta = positive(&name, &value)?,
                "MATCHSHIM_K" => k = Some(positive(&name, &value)?),
                "MATCHSHIM_KC" => k_c = Some(positive(&name, &value)?),
                "MATCHSHIM_KP" => k_p = Some(positive(&name, &value)?),
                "MATCHSHIM_SIMD" => config.params.simd = simd(&name, &value)?,
                "MATCHSHIM_ENGINE" => {
                    config.engine = EngineKind::parse(&value)
                        .ok_or_else(|| bad_value(&name, &value, &EngineKind::accepted()))?;
                }
                "MATCHSHIM_REPORT" => config.report = Some(path(&name, value, "a file path")?),
                "MATCHSHIM_TRACE" => config.trace = Some(path(&name, value, "a directory")?),
                "MATCHSHIM_VERBOSE" => {
                    config.verbose = match value.as_str() {
                        "0" => Verbosity::Quiet,
                        "" => Verbosity::Takeovers,
                        "1" => Verbosity::Always,
                        _ => return Err(bad_value(&name, &value, "0, 1")),
                    };
                }
                "MATCHSHIM_TAKEOVER" => {
                    config.takeover = match value.as_str() {
                        "auto" => Takeover::Auto,
                        "always" => Takeover::Always,
                        _ => value
                            .strip_prefix("flip:")
                            .and_then(|n| positive(&name, n).ok())
                            .map(|n| Takeover::Flip(n.min(u32::MAX as usize) as u32))
                            .ok_or_else(|| {
                                bad_value(
                                    &name,
                                    &value,
                                    "auto, always, flip:N (N a positive integer)",
                                )
                            })?,
                    };
                }
                "MATCHSHIM_TAKEOVER_DEPTH" => {
                    config.takeover_depth = positive(&name, &value)?.min(1 << 20) as u32;
                }
                "MATCHSHIM_GPU_BURST" => {
                    config.params.gpu.burst = positive(&name, &value)?;
                    config.params.gpu.chosen = true;
                }
                "MATCHSHIM_GPU_SCAN" => {
                    config.params.gpu.scan = positive(&name, &value)?;
                    config.params.gpu.chosen = true;
                }
                "MATCHSHIM_GPU_LAUNCH" => {
                    config.params.gpu.launch = [Launch::Stream, Launch::Graph]
                        .into_iter()
                        .find(|launch| launch.name() == value)
                        .ok_or_else(|| bad_value(&name, &value, "stream, graph"))?;
                }
                // Read where NVRTC is loaded; a file name that is not there is reported then.
                "MATCHSHIM_NVRTC" => {
                    path(&name, value, "the path of a libnvrtc.so")?;
                }
                "MATCHSHIM_COLL" => {
                    config.coll = CollMode::ALL
                        .into_iter()
                        .find(|mode| mode.name() == value)
                        .ok_or_else(|| bad_value(&name, &value, "auto, shim, native"))?;
                }
                _ => {
                    return Err(format!(
                        "unknown variable {name}; known: {}",
                        KNOWN.join(", ")
                    ))
                }
            }
        }
        if let Some(k) = k {
            config.params.k_c = k.div_ceil(2);
            config.params.k_p = k / 2;
        }
        config.params.k_c = k_c.unwrap_or(config.params.k_c);
        config.params.k_p = k_p.unwrap_or(config.params.k_p);
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_without_variables() {
        let config = Config::from_vars(vars(&[("PATH", "/bin")])).unwrap();
        assert_eq!(config.engine, EngineKind::ColPnp);
        assert_eq!(config.params, EngineParams::default());
        assert!(config.report.is_none() && config.trace.is_none());
        assert_eq!(config.verbose, Verbosity::Takeovers);
        assert_eq!(config.coll, CollMode::Auto);
    }

    #[test]
    fn collectives_can_be_left_to_mpi() {
        let config = Config::from_vars(vars(&[("MATCHSHIM_COLL", "native")])).unwrap();
        assert_eq!(config.coll, CollMode::Native);
        let config = Config::from_vars(vars(&[("MATCHSHIM_COLL", "shim")])).unwrap();
        assert_eq!(config.coll, CollMode::Shim);
        let err = Config::from_vars(vars(&[("MATCHSHIM_COLL", "mpi")])).unwrap_err();
        assert!(err.contains("MATCHSHIM_COLL") && err.contains("auto") && err.contains("native"));
    }

    #[test]
    fn takeover_modes_are_read_and_checked() {
        let config = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(
            (config.takeover, config.takeover_depth),
            (Takeover::Auto, DEFAULT_TAKEOVER_DEPTH)
        );
        for (value, mode) in [
            ("always", Takeover::Always),
            ("auto", Takeover::Auto),
            ("flip:3", Takeover::Flip(3)),
        ] {
            let config = Config::from_vars(vars(&[("MATCHSHIM_TAKEOVER", value)])).unwrap();
            assert_eq!(config.takeover, mode);
        }
        for value in ["flip:0", "flip:", "flip:x", "sometimes", ""] {
            let err = Config::from_vars(vars(&[("MATCHSHIM_TAKEOVER", value)])).unwrap_err();
            assert!(
                err.contains("MATCHSHIM_TAKEOVER") && err.contains("flip:N"),
                "{err}"
            );
        }
        let config = Config::from_vars(vars(&[("MATCHSHIM_TAKEOVER_DEPTH", "200")])).unwrap();
        assert_eq!(config.takeover_depth, 200);
        let err = Config::from_vars(vars(&[("MATCHSHIM_TAKEOVER_DEPTH", "0")])).unwrap_err();
        assert!(err.contains("MATCHSHIM_TAKEOVER_DEPTH"), "{err}");
    }

    #[test]
    fn engine_is_chosen_by_name() {
        let config = Config::from_vars(vars(&[("MATCHSHIM_ENGINE", "list")])).unwrap();
        assert_eq!(config.engine, EngineKind::List);
    }

    #[test]
    fn bad_engine_names_the_variable_and_accepted_values() {
        let err = Config::from_vars(vars(&[("MATCHSHIM_ENGINE", "fast")])).unwrap_err();
        assert!(err.contains("MATCHSHIM_ENGINE") && err.contains("list") && err.contains("rank"));
    }

    #[test]
    fn unknown_variable_is_an_error() {
        let err = Config::from_vars(vars(&[("MATCHSHIM_ENGIN", "list")])).unwrap_err();
        assert!(err.contains("MATCHSHIM_ENGIN") && err.contains("MATCHSHIM_ENGINE"));
    }

    #[test]
    fn queue_parameters_are_read() {
        let config = Config::from_vars(vars(&[
            ("MATCHSHIM_BINS", "64"),
            ("MATCHSHIM_THETA", "20"),
            ("MATCHSHIM_K", "5"),
            ("MATCHSHIM_KP", "4"),
        ]))
        .unwrap();
        let p = config.params;
        assert_eq!((p.bins, p.theta, p.k_c, p.k_p), (64, 20, 3, 4));
    }

    #[test]
    fn queue_parameters_must_be_positive_integers() {
        for (name, value) in [
            ("MATCHSHIM_BINS", "0"),
            ("MATCHSHIM_THETA", "-3"),
            ("MATCHSHIM_KC", "x"),
        ] {
            let err = Config::from_vars(vars(&[(name, value)])).unwrap_err();
            assert!(
                err.contains(name) && err.contains("positive integer"),
                "{err}"
            );
        }
    }

    #[test]
    fn vector_width_is_chosen_among_those_of_this_cpu() {
        let read = |value: &str| Config::from_vars(vars(&[("MATCHSHIM_SIMD", value)]));
        assert_eq!(read("auto").unwrap().params.simd, Simd::detect());
        assert_eq!(read("portable").unwrap().params.simd, Simd::Portable);
        for simd in Simd::ALL {
            match read(simd.name()) {
                Ok(config) => assert!(simd.available() && config.params.simd == simd),
                Err(err) => assert!(!simd.available() && err.contains("MATCHSHIM_SIMD")),
            }
        }
        let err = read("avx1024").unwrap_err();
        assert!(err.contains("MATCHSHIM_SIMD") && err.contains("auto") && err.contains("portable"));
    }

    #[test]
    fn gpu_thresholds_and_launches_are_read_and_checked() {
        let config = Config::from_vars(vars(&[
            ("MATCHSHIM_GPU_BURST", "512"),
            ("MATCHSHIM_GPU_SCAN", "100000"),
            ("MATCHSHIM_GPU_LAUNCH", "graph"),
            ("MATCHSHIM_NVRTC", "/opt/libnvrtc.so.13"),
        ]))
        .unwrap();
        let gpu = config.params.gpu;
        assert_eq!(
            (gpu.burst, gpu.scan, gpu.launch),
            (512, 100000, Launch::Graph)
        );
        for (name, value, accepted) in [
            ("MATCHSHIM_GPU_BURST", "0", "positive integer"),
            ("MATCHSHIM_GPU_SCAN", "x", "positive integer"),
            ("MATCHSHIM_GPU_LAUNCH", "persistent", "stream, graph"),
            ("MATCHSHIM_NVRTC", "", "libnvrtc"),
        ] {
            let err = Config::from_vars(vars(&[(name, value)])).unwrap_err();
            assert!(err.contains(name) && err.contains(accepted), "{err}");
        }
    }

    #[test]
    fn trace_names_a_directory() {
        let config = Config::from_vars(vars(&[("MATCHSHIM_TRACE", "/tmp/t")])).unwrap();
        assert_eq!(config.trace, Some(PathBuf::from("/tmp/t")));
        let err = Config::from_vars(vars(&[("MATCHSHIM_TRACE", "")])).unwrap_err();
        assert!(
            err.contains("MATCHSHIM_TRACE") && err.contains("directory"),
            "{err}"
        );
    }

    #[test]
    fn verbose_values_and_a_bad_one() {
        let err = Config::from_vars(vars(&[("MATCHSHIM_VERBOSE", "yes")])).unwrap_err();
        assert!(err.contains("MATCHSHIM_VERBOSE"));
        let level = |v: &str| {
            Config::from_vars(vars(&[("MATCHSHIM_VERBOSE", v)]))
                .unwrap()
                .verbose
        };
        assert_eq!(level("0"), Verbosity::Quiet);
        assert_eq!(level(""), Verbosity::Takeovers);
        assert_eq!(level("1"), Verbosity::Always);
    }

    #[test]
    fn ci_engine_list_names_every_engine() {
        let listed: Vec<&str> =
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ci/engines"))
                .lines()
                .filter(|l| !l.starts_with('#') && !l.is_empty())
                .collect();
        let all: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(
            listed, all,
            "ci/engines must list every engine the shim accepts"
        );
    }
}
