//! The per-rank matching report written at `MPI_Finalize`.

use super::comm::Comm;
use super::Runtime;
use crate::config::CollMode;
use crate::ffi::*;
use crate::matching::{EngineKind, EngineStats};
use crate::report::{RankReport, Traffic, VERSION};
use std::io::Write;

/// Counters summed over a rank's communicators.
#[derive(Clone, Default)]
pub struct Totals {
    pub stats: EngineStats,
    pub match_ticks: [u64; 2],
    pub communicators: u64,
    pub posted_left: u64,
    pub unexpected_left: u64,
}

impl Totals {
    pub fn add_comm(&mut self, comm: &Comm) {
        let (stats, match_ticks, (posted, unexpected)) = comm.stats();
        self.stats.merge(&stats);
        self.match_ticks[0] += match_ticks[0];
        self.match_ticks[1] += match_ticks[1];
        self.communicators += 1;
        self.posted_left += posted as u64;
        self.unexpected_left += unexpected as u64;
    }
}

impl Totals {
    /// This rank's report.
    pub fn report(&self, rt: &Runtime) -> RankReport {
        let p2p_ns = rt.clock.nanos(self.match_ticks[0]);
        let coll_ns = rt.clock.nanos(self.match_ticks[1]);
        let mut size = 0;
        // SAFETY: plain query on the world communicator.
        unsafe { PMPI_Comm_size(abi().comm_world, &mut size) };
        RankReport {
            matchshim: VERSION.to_string(),
            mpi: BUILT_FOR.to_string(),
            engine: rt.config.engine.name().to_string(),
            rank: rt.world_rank as usize,
            size: size as usize,
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
            coll: match rt.config.coll {
                CollMode::Shim => "shim",
                CollMode::Native => "native",
            }
            .to_string(),
            collectives: rt.coll_stats.report(),
            gpu: (rt.config.engine == EngineKind::Gpu).then(crate::matching::gpu::offload),
        }
    }
}

/// Appends this rank's report as one JSON line (one `write` call, so ranks do not interleave).
pub fn append(path: &std::path::Path, report: &RankReport) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(report.to_line().as_bytes())
}

/// Sums (and maxes) the key counters over all ranks for rank 0's one-line summary.
pub fn summary_line(rt: &Runtime, totals: &Totals) -> Option<String> {
    let p2p = &totals.stats.point_to_point;
    let sums = [
        p2p.prq.searches,
        p2p.prq.depth_total,
        p2p.umq.searches,
        p2p.umq.depth_total,
        p2p.matches,
        p2p.unexpected,
        rt.clock
            .nanos(totals.match_ticks[0] + totals.match_ticks[1]),
        totals.unexpected_left,
    ];
    let maxes = [
        p2p.prq.depth_max,
        p2p.umq.depth_max,
        totals.stats.queues_max,
    ];
    let mut sum_all = [0u64; 8];
    let mut max_all = [0u64; 3];
    // SAFETY: buffers match the counts and MPI_UINT64_T.
    unsafe {
        PMPI_Reduce(
            sums.as_ptr().cast(),
            sum_all.as_mut_ptr().cast(),
            sums.len() as i32,
            abi().uint64,
            abi().op_sum,
            0,
            abi().comm_world,
        );
        PMPI_Reduce(
            maxes.as_ptr().cast(),
            max_all.as_mut_ptr().cast(),
            maxes.len() as i32,
            abi().uint64,
            abi().op_max,
            0,
            abi().comm_world,
        );
    }
    if rt.world_rank != 0 {
        return None;
    }
    let mean = |total: u64, n: u64| if n == 0 { 0.0 } else { total as f64 / n as f64 };
    Some(format!(
        "matchshim: engine={} matches={} unexpected={} prq_depth_mean={:.2} prq_depth_max={} \
         umq_depth_mean={:.2} umq_depth_max={} match_time_ms={:.3} queues_max={} unexpected_left={}",
        rt.config.engine.name(),
        sum_all[4],
        sum_all[5],
        mean(sum_all[1], sum_all[0]),
        max_all[0],
        mean(sum_all[3], sum_all[2]),
        max_all[1],
        sum_all[6] as f64 / 1e6,
        max_all[2],
        sum_all[7],
    ))
}
