//! Recording inside the shim: each communicator's engine is wrapped in a [`Recording`] while
//! `MATCHSHIM_TRACE` names a directory, and every trace is written there at `MPI_Finalize`.

use super::{Event, Header, Op, Trace};
use crate::matching::{EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// An engine that forwards every call to the real one and logs the call and its answer.
pub struct Recording {
    engine: Box<dyn MatchEngine>,
    trace: Arc<Mutex<Trace>>,
}

/// A poisoned lock only means a panic elsewhere; the log itself is still whole.
fn lock(trace: &Mutex<Trace>) -> MutexGuard<'_, Trace> {
    trace
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Recording {
    /// Wraps `engine`; the returned handle reads the trace while the engine runs on.
    pub fn new(engine: Box<dyn MatchEngine>, header: Header) -> (Recording, Arc<Mutex<Trace>>) {
        let trace = Arc::new(Mutex::new(Trace {
            header,
            events: Vec::new(),
        }));
        (
            Recording {
                engine,
                trace: trace.clone(),
            },
            trace,
        )
    }

    fn log(&self, op: Op, result: Option<u64>) {
        lock(&self.trace).events.push(Event { op, result });
    }
}

impl MatchEngine for Recording {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        let found = self.engine.post(want, recv);
        self.log(Op::Post { want, recv }, found);
        found
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let found = self.engine.arrive(env, msg);
        self.log(Op::Arrive { env, msg }, found);
        found
    }

    /// Logged as the arrivals one by one: what the burst gives (in unordered matching, one
    /// legal choice among several, which a replay need not repeat).
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        let start = matched.len();
        self.engine.arrive_burst(msgs, matched);
        let mut trace = lock(&self.trace);
        for (&(env, msg), &found) in msgs.iter().zip(&matched[start..]) {
            trace.events.push(Event {
                op: Op::Arrive { env, msg },
                result: found,
            });
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        let found = self.engine.probe(want, remove);
        self.log(Op::Probe { want, remove }, found);
        found
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let removed = self.engine.cancel(recv);
        self.log(Op::Cancel { recv }, removed.then_some(recv));
        removed
    }

    fn queued(&self) -> (usize, usize) {
        self.engine.queued()
    }

    fn stats(&self) -> &EngineStats {
        self.engine.stats()
    }
}

/// What this process records: where to, and every communicator's trace so far.
struct Recorder {
    dir: PathBuf,
    origin: String,
    traces: Mutex<Vec<Arc<Mutex<Trace>>>>,
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// Starts recording every engine this process builds afterwards into `dir`, which is created
/// now so that a directory that cannot be made stops the program at once. `engine` names the
/// engine in the traces' origin.
pub fn start_recording(dir: &Path, engine: &str) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "MATCHSHIM_TRACE={}: cannot create the directory ({e})",
            dir.display()
        )
    })?;
    let recorder = Recorder {
        dir: dir.to_path_buf(),
        origin: format!("matchshim {}, engine {engine}", crate::report::VERSION),
        traces: Mutex::new(Vec::new()),
    };
    RECORDER
        .set(recorder)
        .map_err(|_| "recording already started".to_string())
}

/// `engine`, wrapped in a [`Recording`] when this process records; communicators are numbered
/// in the order their engines are built.
pub fn recorded(engine: Box<dyn MatchEngine>, params: &EngineParams) -> Box<dyn MatchEngine> {
    let Some(recorder) = RECORDER.get() else {
        return engine;
    };
    let mut traces = recorder
        .traces
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let header = Header {
        comm: traces.len(),
        comm_size: params.comm_size,
        origin: recorder.origin.clone(),
        ..Header::default()
    };
    let (recording, trace) = Recording::new(engine, header);
    traces.push(trace);
    Box::new(recording)
}

/// Writes every communicator's trace as `DIR/rank<R>-comm<C>.trace`, those that saw no event
/// too (their engines' queues count in the rank's memory as they do in its report). Nothing to
/// do when this process does not record.
pub fn finish_recording(rank: usize, world_size: usize) -> Result<(), String> {
    let Some(recorder) = RECORDER.get() else {
        return Ok(());
    };
    let traces = recorder
        .traces
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    for trace in traces.iter() {
        let mut trace = lock(trace);
        trace.header.rank = rank;
        trace.header.world_size = world_size;
        trace.write(&recorder.dir.join(trace.file_name()))?;
        trace.events = Vec::new();
    }
    Ok(())
}
