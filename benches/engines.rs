//! Matches per second of every engine for queue lengths 1 to 4096 (65536 for the engines that do
//! not search a list as long as the queue) in eight orders; then, from the same run, an
//! interleaved table of ns per match, the search depth of every engine on every workload, heap
//! bytes per queued element, and the queues allocated at a gather's root. Times are CPU time of
//! the measuring thread.
//!
//! One iteration posts `len` receives and lets their `len` messages arrive (or the other way
//! round), so it is `len` matches and leaves the engine empty; the engine lives on across
//! iterations, as it does in a run. Arrivals come as one burst, as the shim's drain hands them
//! over; `batch/1` takes them one by one. `gpu` runs its kernels (their host build without a
//! device) on bursts of `MATCHSHIM_GPU_BURST` (4096) or more; `gpu/mirror` is its CPU tier alone
//! as it runs beside a device (noting changes for the device's copy), `gpu/kernels` runs every
//! burst through the kernels' host build. The `burst` group sets bursts against arrivals one by
//! one for the engines whose bursts differ, the `posts` group times posting alone (the gpu
//! engine's host-side bookkeeping against `bins`). Two more tables set the gpu tiers against
//! `bins` from 64 to 65536 queued elements, and show what a communicator's MPI-4 assertions
//! save; `gpu_device` measures the engine on an NVIDIA device (skipped without one).
//!
//! Environment: `BENCH_PART` = `all` (default), `rates` (criterion only) or `tables`;
//! `BENCH_ENGINES` = engine names, comma-separated, for the tables (default: all);
//! `BENCH_ROUNDS` = rounds of the interleaved tables (default 25). Arguments naming tables
//! (`interleaved`, `depth`, `memory`, `queues`, `gpu_tiers`, `assertions`, `gpu_device`) make
//! only those.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{black_box, BenchmarkId, Criterion, SamplingMode, Throughput};
use matchshim_core::clock::thread_cpu_ns;
use matchshim_core::matching::gpu::{GpuEngine, GpuParams, Launch};
use matchshim_core::matching::{
    build_engine, Assertions, Class, EngineKind, EngineParams, Envelope, MatchEngine, MsgId,
    Pattern, SearchStats, ANY_SOURCE,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Counts the heap bytes in use, to weigh the engines.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// CPU time of the measuring thread: on a shared machine, time spent descheduled does not count.
struct CpuTime;

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns() - start
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, value: &u64) -> f64 {
        *value as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &Nanoseconds
    }
}

struct Nanoseconds;

impl ValueFormatter for Nanoseconds {
    fn scale_values(&self, typical: f64, values: &mut [f64]) -> &'static str {
        let (factor, unit) = match typical {
            t if t < 1e3 => (1.0, "ns"),
            t if t < 1e6 => (1e-3, "µs"),
            t if t < 1e9 => (1e-6, "ms"),
            _ => (1e-9, "s"),
        };
        values.iter_mut().for_each(|v| *v *= factor);
        unit
    }

    fn scale_throughputs(
        &self,
        typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per_iteration = match *throughput {
            Throughput::Elements(n) | Throughput::Bytes(n) | Throughput::BytesDecimal(n) => {
                n as f64
            }
        };
        let (factor, unit) = match per_iteration * 1e9 / typical {
            r if r < 1e3 => (1.0, "elem/s"),
            r if r < 1e6 => (1e-3, "Kelem/s"),
            r if r < 1e9 => (1e-6, "Melem/s"),
            _ => (1e-9, "Gelem/s"),
        };
        values
            .iter_mut()
            .for_each(|v| *v = per_iteration * 1e9 / *v * factor);
        unit
    }

    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

const LENGTHS: [usize; 4] = [1, 16, 256, 4096];
/// Also measured at 65536 elements: the engines that do not search a list as long as the queue
/// (the others would take seconds per iteration).
const LONG: usize = 65536;
const LONG_ENGINES: [&str; 9] = [
    "rank",
    "bins",
    "adaptive",
    "pnp",
    "col+pnp",
    "list+pnp",
    "gpu",
    "gpu/mirror",
    "gpu/kernels",
];
/// Ranks sending in the keyed orders.
const RANKS: usize = 64;

#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Messages arrive in posting order.
    Posting,
    Reverse,
    Random,
    /// Random order, and every tenth receive is ANY_SOURCE.
    Wildcards,
    /// √len ranks send √len messages each to the root, which posted its receives rank by rank;
    /// the messages come round-robin over the ranks.
    Gather,
    /// One rank sends every message, tags in reverse order: one neighbour, many outstanding
    /// receives.
    OneSource,
    /// FDS's hot spot (`ci/bench/coll.c hotspot`): √len ranks send √len − 1 point-to-point
    /// messages each to a root that posted their receives in the opposite order, then one
    /// gather message each.
    Hotspot,
    /// Random order, messages first: every receive searches the unexpected messages.
    Unexpected,
}

const ORDERS: [(Order, &str); 8] = [
    (Order::Posting, "in-order"),
    (Order::Reverse, "reverse"),
    (Order::Random, "random"),
    (Order::Wildcards, "10%-wildcard"),
    (Order::Gather, "gather"),
    (Order::OneSource, "one-source"),
    (Order::Hotspot, "hotspot"),
    (Order::Unexpected, "unexpected"),
];

fn order_name(order: Order) -> &'static str {
    ORDERS.iter().find(|o| o.0 == order).unwrap().1
}

fn p2p(source: i32, tag: i32) -> Pattern {
    Pattern {
        source,
        tag,
        class: Class::PointToPoint,
    }
}

fn envelope(want: &Pattern) -> Envelope {
    Envelope {
        source: want.source,
        tag: want.tag,
        class: want.class,
    }
}

/// A fixed shuffle (xorshift), the same for every engine.
fn shuffle<T>(items: &mut [T], mut seed: u64) {
    for i in (1..items.len()).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        items.swap(i, (seed % (i as u64 + 1)) as usize);
    }
}

struct Workload {
    comm_size: usize,
    posts: Vec<Pattern>,
    arrivals: Vec<(Envelope, MsgId)>,
    /// Messages arrive before their receives are posted.
    unexpected: bool,
}

/// A root's receives from √len ranks, √len per rank, posted rank by rank, and the same
/// elements sent round-robin over the ranks: (communicator size, posts, sent).
fn gather(len: usize) -> (usize, Vec<Pattern>, Vec<Pattern>) {
    let ranks = (len as f64).sqrt().ceil() as usize;
    let each = len / ranks;
    let posts = (0..ranks * each)
        .map(|i| p2p((i / each) as i32, (i % each) as i32))
        .collect();
    let sent = (0..ranks * each)
        .map(|i| p2p((i % ranks) as i32, (i / ranks) as i32))
        .collect();
    (ranks.max(2), posts, sent)
}

/// FDS's hot spot at a root, for √len ranks: point-to-point receives posted from the last rank
/// and tag down, a gather's receives rank by rank; each rank's messages come tag up, then its
/// gather message.
fn hotspot(len: usize) -> (usize, Vec<Pattern>, Vec<Pattern>) {
    let ranks = (len as f64).sqrt().ceil() as usize;
    let tags = (len / ranks).max(1) - 1;
    let gather = Class::Collective {
        kind: 3,
        size_class: 0,
    };
    let mut posts = Vec::new();
    for source in (0..ranks).rev() {
        posts.extend((0..tags).rev().map(|tag| p2p(source as i32, tag as i32)));
    }
    let collective = |source: usize| Pattern {
        class: gather,
        ..p2p(source as i32, 0)
    };
    posts.extend((0..ranks).map(collective));
    let mut sent = Vec::new();
    for source in 0..ranks {
        sent.extend((0..tags).map(|tag| p2p(source as i32, tag as i32)));
        sent.push(collective(source));
    }
    (ranks.max(2), posts, sent)
}

fn workload(order: Order, len: usize) -> Workload {
    // Element i: rank i mod 64, tag i, so every receive has exactly one message.
    let keyed: Vec<Pattern> = (0..len)
        .map(|i| p2p((i % RANKS) as i32, i as i32))
        .collect();
    let (comm_size, posts, mut sent) = match order {
        Order::Gather => gather(len),
        Order::Hotspot => hotspot(len),
        Order::OneSource => {
            let posts: Vec<Pattern> = (0..len).map(|tag| p2p(1, tag as i32)).collect();
            (RANKS, posts.clone(), posts)
        }
        Order::Wildcards => {
            let posts = keyed
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    if i % 10 == 9 {
                        p2p(ANY_SOURCE, p.tag)
                    } else {
                        p
                    }
                })
                .collect();
            (RANKS, posts, keyed.clone())
        }
        _ => (RANKS, keyed.clone(), keyed),
    };
    match order {
        Order::Reverse | Order::OneSource => sent.reverse(),
        Order::Random | Order::Wildcards | Order::Unexpected => {
            shuffle(&mut sent, 0x9e37_79b9_7f4a_7c15)
        }
        Order::Posting | Order::Gather | Order::Hotspot => {}
    }
    let arrivals = sent
        .iter()
        .enumerate()
        .map(|(i, p)| (envelope(p), (posts.len() + i) as MsgId))
        .collect();
    Workload {
        comm_size,
        posts,
        arrivals,
        unexpected: order == Order::Unexpected,
    }
}

/// The engines measured: every kind with bursts, `batch` once more with arrivals one by one,
/// and `gpu`'s tiers apart.
fn engines() -> Vec<(EngineKind, String, bool)> {
    let mut list: Vec<_> = EngineKind::ALL
        .iter()
        .map(|&kind| (kind, kind.name().to_string(), true))
        .collect();
    list.push((EngineKind::Batch, "batch/1".to_string(), false));
    for (name, _) in GPU_TIERS {
        list.push((EngineKind::Gpu, name.to_string(), true));
    }
    list
}

/// The `gpu` engine's tiers measured apart from it.
const GPU_TIERS: [(&str, GpuParams); 2] = [
    ("gpu/mirror", GpuParams::CPU),
    ("gpu/kernels", GpuParams::KERNELS),
];

fn build(kind: EngineKind, name: &str, comm_size: usize) -> Box<dyn MatchEngine> {
    match GPU_TIERS.iter().find(|(tier, _)| *tier == name) {
        Some(&(_, tiers)) => Box::new(GpuEngine::host(&params(comm_size), tiers)),
        None => build_engine(kind, &params(comm_size)),
    }
}

/// The engines of the tables: `BENCH_ENGINES` if set.
fn chosen_engines() -> Vec<(EngineKind, String, bool)> {
    let wanted = std::env::var("BENCH_ENGINES").unwrap_or_default();
    let wanted: Vec<&str> = wanted.split(',').filter(|s| !s.is_empty()).collect();
    engines()
        .into_iter()
        .filter(|e| wanted.is_empty() || wanted.contains(&e.1.as_str()))
        .collect()
}

fn params(comm_size: usize) -> EngineParams {
    EngineParams {
        comm_size,
        ..EngineParams::default()
    }
}

/// Lets every message arrive: as one burst or one by one.
fn arrive_all(engine: &mut dyn MatchEngine, work: &Workload, burst: bool) {
    thread_local! {
        static MATCHED: std::cell::RefCell<Vec<Option<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    if burst {
        MATCHED.with_borrow_mut(|matched| {
            matched.clear();
            engine.arrive_burst(&work.arrivals, matched);
            black_box(&matched);
        });
    } else {
        for &(env, msg) in &work.arrivals {
            black_box(engine.arrive(env, msg));
        }
    }
}

/// Posts every receive and lets every message arrive, in the workload's order: `len` matches.
fn run(engine: &mut dyn MatchEngine, work: &Workload, burst: bool) {
    if work.unexpected {
        arrive_all(engine, work, burst);
    }
    for (id, &want) in work.posts.iter().enumerate() {
        black_box(engine.post(want, id as u64));
    }
    if !work.unexpected {
        arrive_all(engine, work, burst);
    }
}

fn matching_rate(c: &mut Criterion<CpuTime>) {
    for (order, order_name) in ORDERS {
        let mut group = c.benchmark_group(order_name);
        group.sampling_mode(SamplingMode::Flat);
        for len in LENGTHS.into_iter().chain([LONG]) {
            let work = workload(order, len);
            group.throughput(Throughput::Elements(work.posts.len() as u64));
            let measured = engines()
                .into_iter()
                .filter(|(_, name, _)| len < LONG || LONG_ENGINES.contains(&name.as_str()));
            for (kind, name, burst) in measured {
                group.bench_function(BenchmarkId::new(&name, len), |b| {
                    let mut engine = build(kind, &name, work.comm_size);
                    run(engine.as_mut(), &work, burst);
                    assert_eq!(engine.queued(), (0, 0), "{name}: not every message matched");
                    b.iter(|| run(engine.as_mut(), &work, burst))
                });
            }
        }
        group.finish();
    }
}

/// An engine for a communicator of this many ranks.
type MakeFor = fn(usize) -> Box<dyn MatchEngine>;

/// Bursts against arrivals one by one, random order, for the engines whose bursts take another
/// path (`bins` has none: its two rows measure the same path, a check of the method).
fn burst_rate(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("burst");
    group.sampling_mode(SamplingMode::Flat);
    let engines: [(&str, MakeFor); 5] = [
        ("batch", |n| build_engine(EngineKind::Batch, &params(n))),
        ("fuzzy", |n| build_engine(EngineKind::Fuzzy, &params(n))),
        ("bins", |n| build_engine(EngineKind::Bins, &params(n))),
        ("gpu/mirror", |n| {
            Box::new(GpuEngine::host(&params(n), GpuParams::CPU))
        }),
        ("gpu/kernels", |n| {
            Box::new(GpuEngine::host(&params(n), GpuParams::KERNELS))
        }),
    ];
    for len in [256, 4096, LONG] {
        let work = workload(Order::Random, len);
        group.throughput(Throughput::Elements(len as u64));
        for (name, make) in engines {
            // Lists searched per message or per 64 messages take seconds at 65536.
            if len == LONG && (name == "fuzzy" || name == "batch") {
                continue;
            }
            for (burst, how) in [(true, "burst"), (false, "one-by-one")] {
                group.bench_function(BenchmarkId::new(format!("{name}/{how}"), len), |b| {
                    let mut engine = make(work.comm_size);
                    run(engine.as_mut(), &work, burst);
                    b.iter(|| run(engine.as_mut(), &work, burst))
                });
            }
        }
    }
    group.finish();
}

/// ns per post, timing the posts alone (the arrivals that empty the queue again are not
/// counted): what the gpu engine's notes for the device's copy add to its CPU tier.
fn post_rate(c: &mut Criterion<CpuTime>) {
    let mut group = c.benchmark_group("posts");
    group.sampling_mode(SamplingMode::Flat);
    let engines: [(&str, MakeFor); 4] = [
        ("bins", |n| build_engine(EngineKind::Bins, &params(n))),
        ("gpu", |n| build_engine(EngineKind::Gpu, &params(n))),
        ("gpu/mirror", |n| {
            Box::new(GpuEngine::host(&params(n), GpuParams::CPU))
        }),
        ("gpu/kernels", |n| {
            Box::new(GpuEngine::host(&params(n), GpuParams::KERNELS))
        }),
    ];
    for len in [256, 4096, LONG] {
        let work = workload(Order::Random, len);
        group.throughput(Throughput::Elements(len as u64));
        for (name, make) in engines {
            group.bench_function(BenchmarkId::new(name, len), |b| {
                let mut engine = make(work.comm_size);
                run(engine.as_mut(), &work, true);
                b.iter_custom(|iterations| {
                    let mut spent = 0;
                    for _ in 0..iterations {
                        let start = thread_cpu_ns();
                        for (id, &want) in work.posts.iter().enumerate() {
                            black_box(engine.post(want, id as u64));
                        }
                        spent += thread_cpu_ns() - start;
                        arrive_all(engine.as_mut(), &work, true);
                    }
                    spent
                })
            });
        }
    }
    group.finish();
}

/// Heap bytes per queued element of each engine holding `len` posted receives, and `len`
/// unexpected messages (random order, 64 ranks).
fn memory() {
    println!("\n## Memory: heap bytes per queued element (random order, 64 ranks)\n");
    println!("| engine | 4096 posted | 4096 unexpected | 65536 posted | 65536 unexpected |");
    println!("|---|---:|---:|---:|---:|");
    let works = [workload(Order::Random, 4096), workload(Order::Random, LONG)];
    for &kind in EngineKind::ALL {
        let mut row = format!("| {} |", kind.name());
        for work in &works {
            let before = LIVE.load(Ordering::Relaxed);
            let mut posted = build_engine(kind, &params(work.comm_size));
            for (id, &want) in work.posts.iter().enumerate() {
                posted.post(want, id as u64);
            }
            let posted_bytes = LIVE.load(Ordering::Relaxed) - before;
            drop(posted);
            let before = LIVE.load(Ordering::Relaxed);
            let mut arrived = build_engine(kind, &params(work.comm_size));
            for &(env, msg) in &work.arrivals {
                arrived.arrive(env, msg);
            }
            let arrived_bytes = LIVE.load(Ordering::Relaxed) - before;
            let len = work.posts.len() as f64;
            row += &format!(
                " {:.1} | {:.1} |",
                posted_bytes as f64 / len,
                arrived_bytes as f64 / len
            );
        }
        println!("{row}");
    }
}

/// The searches of the queue a workload searches, both traffic types.
fn searched(engine: &dyn MatchEngine, unexpected: bool) -> SearchStats {
    let mut traffic = engine.stats().point_to_point;
    traffic.merge(&engine.stats().collective);
    if unexpected {
        traffic.umq
    } else {
        traffic.prq
    }
}

/// Mean elements inspected per search of the queue each workload searches (posted receives,
/// or unexpected messages for `unexpected`), at 4096 and 65536 elements, in a second run of
/// the workload, and how far the default engine is from `bins`.
fn depth() {
    let kinds: Vec<EngineKind> = chosen_engines()
        .into_iter()
        .filter(|e| !e.2)
        .map(|e| e.0)
        .collect();
    let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
    println!("\n## Search depth: mean elements inspected per search\n");
    println!(
        "| workload | length | {} | col+pnp / bins |",
        names.join(" | ")
    );
    println!("|---|---:|{}---:|", "---:|".repeat(kinds.len()));
    for len in [4096, LONG] {
        for (order, name) in ORDERS {
            let work = workload(order, len);
            let mut means = Vec::new();
            let mut cells = Vec::new();
            for &kind in &kinds {
                if len == LONG && !LONG_ENGINES.contains(&kind.name()) {
                    means.push(f64::NAN);
                    cells.push("–".to_string());
                    continue;
                }
                // The second run: engines that profile or grow are past their first one.
                let mut engine = build_engine(kind, &params(work.comm_size));
                run(engine.as_mut(), &work, false);
                let first = searched(engine.as_ref(), work.unexpected);
                run(engine.as_mut(), &work, false);
                let all = searched(engine.as_ref(), work.unexpected);
                let mean = (all.depth_total - first.depth_total) as f64
                    / (all.searches - first.searches).max(1) as f64;
                means.push(mean);
                cells.push(format!("{mean:.2}"));
            }
            let of = |kind: EngineKind| kinds.iter().position(|&k| k == kind).map(|i| means[i]);
            let ratio = match (of(EngineKind::ColPnp), of(EngineKind::Bins)) {
                (Some(default), Some(bins)) => format!("{:.2}×", default / bins),
                _ => "–".to_string(),
            };
            println!("| {name} | {len} | {} | {ratio} |", cells.join(" | "));
        }
    }
}

/// Queues allocated at the root of two gathers of 4 messages per rank, point-to-point and
/// collective, all posted first: the unified engines stay within k·√n on the posted side
/// (k = k_c + k_p = 16), `rank` has 2n + 1.
fn queues() {
    let kinds = [
        EngineKind::Rank,
        EngineKind::Pnp,
        EngineKind::Col,
        EngineKind::ColPnp,
    ];
    println!("\n## Queues allocated at a gather's root\n");
    println!("| n | 16·√n | traffic | rank | pnp | col | col+pnp |");
    println!("|---:|---:|---|---:|---:|---:|---:|");
    for n in [64usize, 256, 1024, 4096] {
        for (class, traffic) in [
            (Class::PointToPoint, "point-to-point"),
            (
                Class::Collective {
                    kind: 3,
                    size_class: 0,
                },
                "collective",
            ),
        ] {
            let mut row = format!(
                "| {n} | {} | {traffic} |",
                (16.0 * (n as f64).sqrt()) as usize
            );
            for kind in kinds {
                let mut engine = build_engine(kind, &params(n));
                for _ in 0..2 {
                    let mut id = 0;
                    for source in 1..n as i32 {
                        for tag in 0..4 {
                            engine.post(Pattern { source, tag, class }, id);
                            id += 1;
                        }
                    }
                    for tag in 0..4 {
                        for source in 1..n as i32 {
                            engine.arrive(Envelope { source, tag, class }, id);
                            id += 1;
                        }
                    }
                }
                row += &format!(" {} |", engine.stats().queues_max);
            }
            println!("{row}");
        }
    }
}

/// ns per match of `engines` on each case, every engine in turn over short rounds, keeping each
/// engine's best round: on a shared machine this compares engines under the same load, which
/// separate criterion runs cannot, and short rounds give every engine a chance at the machine's
/// quiet moments and at a good placement of its memory. Cells give the speedup over the
/// engine named `baseline`.
fn interleaved(
    title: &str,
    cases: &[(Order, usize)],
    engines: &[(EngineKind, String, bool)],
    baseline: &str,
) {
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(25);
    let base = engines.iter().position(|e| e.1 == baseline);
    println!("\n## {title}: ns per match, best of {rounds} interleaved rounds (speedup over {baseline})\n");
    println!(
        "| order | length | {} |",
        engines
            .iter()
            .map(|e| e.1.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---:|{}", "---:|".repeat(engines.len()));
    for &(order, len) in cases {
        let work = workload(order, len);
        // About 5 ms of work per engine and round, from one timed run.
        let iterations: Vec<u64> = engines
            .iter()
            .map(|(kind, name, burst)| {
                let mut engine = build(*kind, name, work.comm_size);
                let start = thread_cpu_ns();
                run(engine.as_mut(), &work, *burst);
                (5_000_000 / (thread_cpu_ns() - start).max(1)).max(1)
            })
            .collect();
        let mut best = vec![f64::MAX; engines.len()];
        for _ in 0..rounds {
            for (e, (kind, name, burst)) in engines.iter().enumerate() {
                let (kind, burst) = (*kind, *burst);
                // A new engine each round, warmed by one untimed run: where the allocator puts
                // its arrays changes its speed, and the best round takes the placement that
                // suits each engine, the baseline included.
                let mut engine = build(kind, name, work.comm_size);
                run(engine.as_mut(), &work, burst);
                let start = thread_cpu_ns();
                for _ in 0..iterations[e] {
                    run(engine.as_mut(), &work, burst);
                }
                let ns = (thread_cpu_ns() - start) as f64 / iterations[e] as f64;
                best[e] = best[e].min(ns);
            }
        }
        let matches = work.posts.len() as f64;
        let cells: Vec<String> = best
            .iter()
            .map(|&ns| match base {
                Some(b) => format!("{:.1} ({:.2}×)", ns / matches, best[b] / ns),
                None => format!("{:.1}", ns / matches),
            })
            .collect();
        println!("| {} | {len} | {} |", order_name(order), cells.join(" | "));
    }
}

fn main() {
    // Arguments but flags name tables, or criterion benchmarks (then no table is made).
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let tables: [(&str, fn()); 7] = [
        ("interleaved", interleaved_tables),
        ("depth", depth),
        ("memory", memory),
        ("queues", queues),
        ("gpu_tiers", gpu_tiers),
        ("assertions", assertions),
        ("gpu_device", gpu_device),
    ];
    let only_tables = !named.is_empty() && named.iter().all(|n| tables.iter().any(|t| t.0 == n));
    let part = std::env::var("BENCH_PART").unwrap_or_else(|_| "all".to_string());
    if part != "tables" && !only_tables {
        let mut c = Criterion::default()
            .with_measurement(CpuTime)
            .warm_up_time(Duration::from_millis(100))
            .measurement_time(Duration::from_millis(300))
            .sample_size(10)
            .configure_from_args();
        matching_rate(&mut c);
        burst_rate(&mut c);
        post_rate(&mut c);
        c.final_summary();
    }
    if part == "rates" || (!named.is_empty() && !only_tables) {
        return;
    }
    for (name, table) in tables {
        if named.is_empty() || named.iter().any(|n| n == name) {
            table();
        }
    }
}

fn interleaved_tables() {
    let all = chosen_engines();
    let short = [
        (Order::Posting, 1),
        (Order::Posting, 16),
        (Order::Posting, 4096),
        (Order::Reverse, 256),
        (Order::Reverse, 4096),
        (Order::Random, 4096),
        (Order::Wildcards, 4096),
        (Order::Gather, 4096),
        (Order::OneSource, 2000),
        (Order::Hotspot, 4096),
        (Order::Unexpected, 4096),
    ];
    interleaved("Interleaved, up to 4096 elements", &short, &all, "list");
    let long: Vec<_> = all
        .iter()
        .filter(|e| LONG_ENGINES.contains(&e.1.as_str()))
        .cloned()
        .collect();
    let long_cases: Vec<(Order, usize)> = ORDERS.iter().map(|&(order, _)| (order, LONG)).collect();
    interleaved("Interleaved, 65536 elements", &long_cases, &long, "bins");
}

type Make<'a> = Box<dyn Fn() -> Box<dyn MatchEngine> + 'a>;

/// ns per match of each engine on one workload, arrivals as one burst: the best of `rounds`
/// rounds of about 5 ms, the engines taking turns within each round.
fn best_interleaved(makers: &[Make], work: &Workload, rounds: usize) -> Vec<f64> {
    let iterations: Vec<u64> = makers
        .iter()
        .map(|make| {
            let mut engine = make();
            let start = thread_cpu_ns();
            run(engine.as_mut(), work, true);
            (5_000_000 / (thread_cpu_ns() - start).max(1)).max(1)
        })
        .collect();
    let mut best = vec![f64::MAX; makers.len()];
    for _ in 0..rounds {
        for (e, make) in makers.iter().enumerate() {
            let mut engine = make();
            run(engine.as_mut(), work, true);
            let start = thread_cpu_ns();
            for _ in 0..iterations[e] {
                run(engine.as_mut(), work, true);
            }
            best[e] = best[e].min((thread_cpu_ns() - start) as f64 / iterations[e] as f64);
        }
    }
    best.iter().map(|ns| ns / work.posts.len() as f64).collect()
}

/// The `gpu` engine's tiers against `bins`, random order, each arrival phase one burst: the CPU
/// tier beside a device (`gpu/mirror`), the ranking kernel in order and claiming unordered (the
/// communicator asserts no wildcards and overtaking), and with 10% `ANY_SOURCE` receives the
/// rounds; kernels in their host build, one thread after another, so this measures what the
/// host pays around them, not what a device does. Million matches per second, best of 5
/// interleaved rounds.
fn gpu_tiers() {
    const ROUNDS: usize = 5;
    let unordered = EngineParams {
        assertions: Assertions {
            no_any_source: true,
            no_any_tag: true,
            allow_overtaking: true,
        },
        ..EngineParams::default()
    };
    println!("\nM matches/s, random order, best of {ROUNDS} rounds (kernels: host build)\n");
    println!(
        "| length | bins | mirror CPU tier | ranks | ranks, unordered | \
         bins, 10% wildcards | mirror CPU tier, 10% wildcards | rounds, 10% wildcards |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for len in [64, 256, 1024, 4096, 16384, 65536] {
        let mut row = format!("| {len} |");
        for order in [Order::Random, Order::Wildcards] {
            let work = workload(order, len);
            let n = work.comm_size;
            let mut makers: Vec<Make> = vec![
                Box::new(|| build_engine(EngineKind::Bins, &params(n))),
                Box::new(|| Box::new(GpuEngine::host(&params(n), GpuParams::CPU))),
            ];
            // The host build scans the wildcard log for each message in turn: not the longest.
            if order == Order::Random || len <= 4096 {
                makers.push(Box::new(|| {
                    Box::new(GpuEngine::host(&params(n), GpuParams::KERNELS))
                }));
            }
            if order == Order::Random {
                let relaxed = EngineParams {
                    comm_size: n,
                    ..unordered
                };
                makers.push(Box::new(move || {
                    Box::new(GpuEngine::host(&relaxed, GpuParams::KERNELS))
                }));
            }
            for ns in best_interleaved(&makers, &work, ROUNDS) {
                row += &format!(" {:.1} |", 1e3 / ns);
            }
            if makers.len() == 2 {
                row += " – |";
            }
        }
        println!("{row}");
    }
}

/// On an NVIDIA device (skipped without one): M matches/s and µs per burst of `bins` and of the
/// gpu engine with every burst on the device, launched stream by stream and as a captured graph;
/// exact, unordered (all three assertions) and exact with 10% `ANY_SOURCE` receives, random
/// order; then ns per post. Wall-clock time (the device's work is not the thread's CPU time),
/// best of `BENCH_ROUNDS` (default 5) rounds, the engines taking turns within a round. Every
/// burst's matches are checked against `bins`' (unordered: each message got a receive of its
/// own key, and as many matched). The smallest length from which `gpu` is faster is the burst
/// threshold to set (`MATCHSHIM_GPU_BURST`).
fn gpu_device() {
    use std::time::Instant;
    let rounds: usize = std::env::var("BENCH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(5);
    let on_device = |params: &EngineParams, launch| {
        let tiers = GpuParams {
            burst: 1,
            scan: usize::MAX,
            launch,
            chosen: true,
        };
        GpuEngine::device(params, tiers).map(|e| Box::new(e) as Box<dyn MatchEngine>)
    };
    if let Err(why) = on_device(&params(RANKS), Launch::Stream) {
        println!("\n## gpu_device: skipped, no CUDA device ({why})");
        return;
    }
    let relaxed = Assertions {
        no_any_source: true,
        no_any_tag: true,
        allow_overtaking: true,
    };
    let lengths = [256, 1024, 4096, 16384, 65536, 262144, 1 << 20];
    let cases = [
        ("exact", Order::Random, Assertions::default()),
        ("unordered", Order::Random, relaxed),
        (
            "exact, 10% ANY_SOURCE",
            Order::Wildcards,
            Assertions::default(),
        ),
    ];
    let mut posts = Vec::new();
    for (case, order, assertions) in cases {
        println!("\n## gpu_device, {case}: M matches/s (µs per burst), best of {rounds} rounds\n");
        println!("| length | bins | gpu, stream | gpu, graph | gpu / bins |");
        println!("|---:|---:|---:|---:|---:|");
        for len in lengths {
            let work = workload(order, len);
            let p = EngineParams {
                assertions,
                ..params(work.comm_size)
            };
            let mut engines: Vec<Box<dyn MatchEngine>> = vec![build_engine(EngineKind::Bins, &p)];
            for launch in [Launch::Stream, Launch::Graph] {
                engines.push(on_device(&p, launch).expect("the device was found above"));
            }
            // What bins gives, the reference for every burst.
            let mut reference = build_engine(EngineKind::Bins, &p);
            for (id, &want) in work.posts.iter().enumerate() {
                reference.post(want, id as u64);
            }
            let mut expected = Vec::new();
            reference.arrive_burst(&work.arrivals, &mut expected);
            let key = |id: u64| {
                let want = work.posts[id as usize];
                (want.source, want.tag)
            };
            let (mut burst_s, mut post_s) = (vec![f64::MAX; 3], vec![f64::MAX; 3]);
            let mut matched = Vec::new();
            for _ in 0..rounds + 1 {
                for (e, engine) in engines.iter_mut().enumerate() {
                    let start = Instant::now();
                    for (id, &want) in work.posts.iter().enumerate() {
                        black_box(engine.post(want, id as u64));
                    }
                    post_s[e] = post_s[e].min(start.elapsed().as_secs_f64());
                    matched.clear();
                    let start = Instant::now();
                    engine.arrive_burst(&work.arrivals, &mut matched);
                    burst_s[e] = burst_s[e].min(start.elapsed().as_secs_f64());
                    if assertions.allow_overtaking {
                        for (got, (want, &(env, _))) in
                            matched.iter().zip(expected.iter().zip(&work.arrivals))
                        {
                            assert_eq!(got.is_some(), want.is_some(), "{case} {len}");
                            if let Some(got) = got {
                                assert_eq!(key(*got), (env.source, env.tag), "{case} {len}");
                            }
                        }
                    } else {
                        assert_eq!(matched, expected, "{case} {len}: engine {e}");
                    }
                    assert_eq!(engine.queued(), (0, 0), "{case} {len}: engine {e}");
                }
            }
            let cell = |s: f64| format!("{:.1} ({:.1})", len as f64 / s / 1e6, s * 1e6);
            let best_gpu = burst_s[1].min(burst_s[2]);
            println!(
                "| {len} | {} | {} | {} | {:.2}× |",
                cell(burst_s[0]),
                cell(burst_s[1]),
                cell(burst_s[2]),
                burst_s[0] / best_gpu
            );
            if case == "exact" {
                posts.push((len, post_s[0], post_s[1].min(post_s[2])));
            }
        }
    }
    println!("\n## gpu_device: ns per post, random order, best of {rounds} rounds\n");
    println!("| length | bins | gpu | gpu / bins |");
    println!("|---:|---:|---:|---:|");
    for (len, bins, gpu) in posts {
        let ns = |s: f64| s * 1e9 / len as f64;
        println!(
            "| {len} | {:.1} | {:.1} | {:.2}× |",
            ns(bins),
            ns(gpu),
            gpu / bins
        );
    }
    println!(
        "\nkernel launches in this process: {}",
        matchshim_core::matching::gpu::launches()
    );
}

/// What a communicator's MPI-4 assertions save: ns per match of 4096 receives naming source
/// and tag, without and with each assertion, best of 5 interleaved rounds.
fn assertions() {
    const ROUNDS: usize = 5;
    let asserting = |no_any_source, no_any_tag, allow_overtaking| Assertions {
        no_any_source,
        no_any_tag,
        allow_overtaking,
    };
    let sets = [
        asserting(false, false, false),
        asserting(true, false, false),
        asserting(false, true, false),
        asserting(true, true, false),
        asserting(true, true, true),
    ];
    println!("\nns per match, 4096 receives, by the communicator's assertions (best of {ROUNDS} rounds)\n");
    println!(
        "| engine | order | none | no_any_source | no_any_tag | both | both, allow_overtaking |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    let kinds = [
        EngineKind::List,
        EngineKind::Rank,
        EngineKind::Bins,
        EngineKind::Pnp,
        EngineKind::ColPnp,
    ];
    for kind in kinds {
        for order in [Order::Posting, Order::Reverse, Order::Random] {
            let work = workload(order, 4096);
            let makers: Vec<Make> = sets
                .iter()
                .map(|&assertions| {
                    let params = EngineParams {
                        assertions,
                        ..params(work.comm_size)
                    };
                    Box::new(move || build_engine(kind, &params)) as Make
                })
                .collect();
            let cells: Vec<String> = best_interleaved(&makers, &work, ROUNDS)
                .iter()
                .map(|ns| format!("{ns:.1}"))
                .collect();
            let name = order_name(order);
            println!("| {} | {name} | {} |", kind.name(), cells.join(" | "));
        }
    }
}
