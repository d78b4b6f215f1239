//! Running a trace again through any engine, with no MPI: the engine's counters, and its
//! time per traffic type measured around every call.

use super::{Op, Trace};
use crate::clock::Clock;
use crate::matching::{build_engine, EngineKind, EngineParams, EngineStats};

/// What one engine did with one trace.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Replayed {
    pub stats: EngineStats,
    /// Time inside the engine: point-to-point, collective.
    pub time_ns: [u64; 2],
    /// Posted receives and unexpected messages still queued at the end.
    pub queued: (usize, usize),
}

/// Replays `trace` through a new `kind` engine (its queue budget from the trace's communicator
/// size). Every answer must be the one in the trace: all engines give the matches of one
/// ordered list, so a difference is an error that names the event.
pub fn replay(
    trace: &Trace,
    kind: EngineKind,
    params: &EngineParams,
    clock: &Clock,
) -> Result<Replayed, String> {
    let params = EngineParams {
        comm_size: trace.header.comm_size.max(1),
        ..*params
    };
    let mut engine = build_engine(kind, &params);
    let mut ticks = [0u64; 2];
    for (i, event) in trace.events.iter().enumerate() {
        let start = clock.ticks();
        let answer = match event.op {
            Op::Post { want, recv } => engine.post(want, recv),
            Op::Arrive { env, msg } => engine.arrive(env, msg),
            Op::Probe { want, remove } => engine.probe(want, remove),
            Op::Cancel { recv } => engine.cancel(recv).then_some(recv),
        };
        ticks[event.class().is_collective() as usize] += clock.ticks() - start;
        if answer != event.result {
            return Err(format!(
                "rank {} comm {}: event {i} ({:?}): {} answered {answer:?}, the trace says {:?}",
                trace.header.rank,
                trace.header.comm,
                event.op,
                kind.name(),
                event.result
            ));
        }
    }
    Ok(Replayed {
        stats: *engine.stats(),
        time_ns: ticks.map(|t| clock.nanos(t)),
        queued: engine.queued(),
    })
}
