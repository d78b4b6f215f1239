//! The per-rank matching report written at `MPI_Finalize`.

use super::table::Totals;
use super::Runtime;
use crate::matching::EngineKind;
use crate::mpi::{self, abi, BUILT_FOR};
use crate::report::{CommReport, RankReport, Traffic, VERSION};
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

/// Sums (and maxes) the key counters over all ranks for rank 0's one-line summary.
pub fn summary_line(rt: &Runtime, totals: &Totals) -> Option<String> {
    let p2p = &totals.stats.point_to_point;
    let mut all = CommReport::default();
    totals.comms.iter().for_each(|c| all.add(c));
    let sums = mpi::reduce_to_root(
        &[
            p2p.prq.searches,
            p2p.prq.depth_total,
            p2p.umq.searches,
            p2p.umq.depth_total,
            p2p.matches,
            p2p.unexpected,
            rt.clock
                .nanos(totals.match_ticks[0] + totals.match_ticks[1]),
            totals.unexpected_left,
            all.switches,
            all.delegated_receives,
        ],
        false,
    );
    let maxes = mpi::reduce_to_root(
        &[
            p2p.prq.depth_max,
            p2p.umq.depth_max,
            totals.stats.queues_max,
        ],
        true,
    );
    if rt.world_rank != 0 {
        return None;
    }
    let mean = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
    Some(format!(
        "matchshim: engine={} takeover={} matches={} unexpected={} prq_depth_mean={:.2} \
         prq_depth_max={} umq_depth_mean={:.2} umq_depth_max={} match_time_ms={:.3} \
         queues_max={} unexpected_left={} delegated_receives={} switches={}",
        rt.config.engine.name(),
        rt.config.takeover,
        sums[4],
        sums[5],
        mean(sums[1], sums[0]),
        maxes[0],
        mean(sums[3], sums[2]),
        maxes[1],
        sums[6] as f64 / 1e6,
        maxes[2],
        sums[7],
        sums[9],
        sums[8],
    ))
}
