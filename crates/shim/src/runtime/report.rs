//! The per-rank matching report written at `MPI_Finalize`.

use super::table::Totals;
use super::Runtime;
use crate::config::Verbosity;
use crate::matching::EngineKind;
use crate::mpi::{self, abi, BUILT_FOR};
use crate::report::{RankReport, Tally, Traffic, VERSION};
use std::io::Write;

impl Totals {
    /// This rank's report.
    pub fn report(&self, rt: &Runtime) -> RankReport {
        let p2p_ns = rt.clock.nanos(self.match_ticks[0]);
        let coll_ns = rt.clock.nanos(self.match_ticks[1]);
        let mut comms = self.comms.clone();
        comms.sort_by_key(|c| c.id);
        let mut report = RankReport {
            matchshim: VERSION.to_string(),
            mpi: BUILT_FOR.to_string(),
            engine: rt.config.engine.name().to_string(),
            rank: rt.world_rank as usize,
            size: mpi::comm_size(abi().comm_world) as usize,
            thread_level: rt.thread_level,
            communicators: self.communicators,
            point_to_point: Traffic::new(&self.stats.point_to_point, p2p_ns),
            collective: Traffic::new(&self.stats.collective, coll_ns),
            match_time_ns: p2p_ns + coll_ns,
            wall_time_ns: rt.clock.elapsed_ns(),
            queues: self.stats.queues,
            queues_max: self.stats.queues_max,
            posted_left: self.posted_left,
            unexpected_left: self.unexpected_left,
            coll: rt.config.coll.name().to_string(),
            collectives: Default::default(),
            takeover: rt.config.takeover.to_string(),
            comms,
            gpu: (rt.config.engine == EngineKind::Gpu).then(crate::matching::gpu::offload),
            bursts: self.bursts,
        };
        for client in rt.clients() {
            client.report(&mut report);
        }
        report
    }
}

fn open(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
}

/// Makes the report file exist (empty until a rank finalizes).
pub fn touch(path: &std::path::Path) -> std::io::Result<()> {
    open(path).map(drop)
}

/// Appends this rank's report as one JSON line (one `write` call, so ranks do not interleave).
pub fn append(path: &std::path::Path, report: &RankReport) -> std::io::Result<()> {
    open(path)?.write_all(report.to_line().as_bytes())
}

/// Rank 0's line at `MPI_Finalize`: this rank's report tallied with every other rank's (a
/// reduction over `MPI_COMM_WORLD`, which every rank makes unless `MATCHSHIM_VERBOSE=0`).
pub fn summary_line(rt: &Runtime, report: &RankReport) -> Option<String> {
    if rt.config.verbose == Verbosity::Quiet {
        return None;
    }
    let (sums, maxes) = Tally::of(report).words();
    let sums = mpi::reduce_to_root(&sums, false);
    let maxes = mpi::reduce_to_root(&maxes, true);
    let engine = rt.config.engine.name();
    let takeover = rt.config.takeover.to_string();
    (rt.world_rank == 0)
        .then(|| {
            Tally::from_words(&sums, &maxes).finalize_line(engine, &takeover, rt.config.verbose)
        })
        .flatten()
}
