//! What finer locking would gain matching under MPI_THREAD_MULTIPLE. T threads each post a
//! receive and let its message arrive, with a tag of their own (halo_mt's traffic), through:
//!
//! - `one lock`: one engine behind one mutex, as the shim's runtime keeps a communicator's
//!   queues today;
//! - `lock per tag shard`: one engine per thread's tag, each behind its own mutex, which MPI's
//!   ordering allows while no wildcard receive is queued (a wildcard would have to take every
//!   shard).
//!
//! Prints matches (a post plus an arrival) per second, best of interleaved rounds, and the
//! shard/one ratio. `cargo bench --bench locking`; the machine's cores bound the parallelism.

use matchshim_core::matching::{
    build_engine, Class, EngineKind, EngineParams, Envelope, MatchEngine, Pattern,
};
use std::sync::{Barrier, Mutex};
use std::time::Instant;

const MATCHES_PER_THREAD: u64 = 2_000_000;
const ROUNDS: usize = 5;

fn engine() -> Mutex<Box<dyn MatchEngine>> {
    let params = EngineParams {
        comm_size: 2,
        ..EngineParams::default()
    };
    Mutex::new(build_engine(EngineKind::ColPnp, &params))
}

/// Matches per second of `threads` threads, thread t using `engines[t % engines.len()]`.
fn run(threads: usize, engines: &[Mutex<Box<dyn MatchEngine>>]) -> f64 {
    let start = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let (start, engine) = (&start, &engines[t % engines.len()]);
            s.spawn(move || {
                let tag = t as i32;
                let want = Pattern {
                    source: 1,
                    tag,
                    class: Class::PointToPoint,
                };
                let env = Envelope {
                    source: 1,
                    tag,
                    class: Class::PointToPoint,
                };
                start.wait();
                for i in 0..MATCHES_PER_THREAD {
                    let id = (t as u64) << 40 | i;
                    let found = engine.lock().unwrap().post(want, id);
                    assert_eq!(found, None);
                    let matched = engine.lock().unwrap().arrive(env, id);
                    assert_eq!(matched, Some(id));
                }
            });
        }
        start.wait();
        Instant::now()
    })
    .elapsed();
    (threads as u64 * MATCHES_PER_THREAD) as f64 / elapsed.as_secs_f64()
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("col+pnp, {MATCHES_PER_THREAD} matches per thread, best of {ROUNDS} interleaved rounds, {cores} cores");
    println!(
        "| threads | one lock (M matches/s) | lock per tag shard (M matches/s) | shard / one |"
    );
    println!("|---:|---:|---:|---:|");
    for threads in [1, 2, 4, 8] {
        let (mut one, mut sharded) = (0f64, 0f64);
        for _ in 0..ROUNDS {
            one = one.max(run(threads, &[engine()]));
            let shards: Vec<_> = (0..threads).map(|_| engine()).collect();
            sharded = sharded.max(run(threads, &shards));
        }
        println!(
            "| {threads} | {:.1} | {:.1} | {:.2}× |",
            one / 1e6,
            sharded / 1e6,
            sharded / one
        );
    }
}
