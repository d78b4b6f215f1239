//! The per-rank matching report written at `MPI_Finalize`.

use super::comm::Comm;
use super::config::CollMode;
use super::Runtime;
use crate::coll::KindReport;
use crate::ffi::*;
use crate::matching::{EngineStats, SearchStats, TrafficStats};
use serde::Serialize;
use std::collections::BTreeMap;
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

#[derive(Serialize)]
pub struct SearchReport {
    pub searches: u64,
    pub mean_depth: f64,
    pub max_depth: u64,
}

impl From<&SearchStats> for SearchReport {
    fn from(s: &SearchStats) -> Self {
        SearchReport {
            searches: s.searches,
            mean_depth: s.mean(),
            max_depth: s.depth_max,
        }
    }
}

#[derive(Serialize)]
pub struct TrafficReport {
    pub prq: SearchReport,
    pub umq: SearchReport,
    pub matches: u64,
    pub unexpected: u64,
    /// Time spent in the engine for this traffic.
    pub match_time_ns: u64,
}

impl TrafficReport {
    fn new(t: &TrafficStats, match_time_ns: u64) -> Self {
        TrafficReport {
            prq: (&t.prq).into(),
            umq: (&t.umq).into(),
            matches: t.matches,
            unexpected: t.unexpected,
            match_time_ns,
        }
    }
}

#[derive(Serialize)]
pub struct RankReport {
    pub matchshim: &'static str,
    pub mpi: &'static str,
    pub engine: &'static str,
    pub rank: i32,
    pub size: i32,
    pub thread_level: i32,
    pub communicators: u64,
    pub point_to_point: TrafficReport,
    pub collective: TrafficReport,
    /// Time spent in the engine, all traffic.
    pub match_time_ns: u64,
    /// Time from `MPI_Init` to `MPI_Finalize`.
    pub wall_time_ns: u64,
    pub queues: u64,
    pub queues_max: u64,
    pub posted_left: u64,
    pub unexpected_left: u64,
    /// Who ran the collectives: `shim` or `native`.
    pub coll: &'static str,
    /// Per collective the shim ran: calls, elements matched and bytes.
    pub collectives: BTreeMap<&'static str, KindReport>,
}

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

impl RankReport {
    pub fn new(rt: &Runtime, totals: &Totals) -> RankReport {
        let p2p_ns = rt.clock.nanos(totals.match_ticks[0]);
        let coll_ns = rt.clock.nanos(totals.match_ticks[1]);
        let mut size = 0;
        // SAFETY: plain query on the world communicator.
        unsafe { PMPI_Comm_size(abi().comm_world, &mut size) };
        RankReport {
            matchshim: VERSION,
            mpi: BUILT_FOR,
            engine: rt.config.engine.name(),
            rank: rt.world_rank,
            size,
            thread_level: rt.thread_level,
            communicators: totals.communicators,
            point_to_point: TrafficReport::new(&totals.stats.point_to_point, p2p_ns),
            collective: TrafficReport::new(&totals.stats.collective, coll_ns),
            match_time_ns: p2p_ns + coll_ns,
            wall_time_ns: rt.clock.elapsed_ns(),
            queues: totals.stats.queues,
            queues_max: totals.stats.queues_max,
            posted_left: totals.posted_left,
            unexpected_left: totals.unexpected_left,
            coll: match rt.config.coll {
                CollMode::Shim => "shim",
                CollMode::Native => "native",
            },
            collectives: rt.coll_stats.report(),
        }
    }
}

/// Appends this rank's report as one JSON line (one `write` call, so ranks do not interleave).
pub fn append(path: &std::path::Path, report: &RankReport) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(report).map_err(std::io::Error::other)?;
    line.push(b'\n');
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(&line)
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
