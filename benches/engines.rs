//! Matches per second of every engine for queue lengths 1 to 4096 (65536 for the engines that
//! stay fast there) and five arrival orders, then heap bytes per engine at 4096 queued elements
//! and queues allocated at a gather's root. Times are CPU time of the measuring thread.
//!
//! One iteration posts `len` receives and lets their `len` messages arrive, so it is `len`
//! matches and leaves the engine empty; the engine lives on across iterations, as it does in a
//! run. `batch` and `gpu` take the arrivals as one burst, `batch/1` one by one. Without a
//! device `gpu` is `bins`; `gpu/mirror` is its CPU tier as it runs beside a device (keeping
//! the mapped mirror), `gpu/kernels` runs every burst through the kernels' host build. A last
//! table sets these tiers against `bins` from 64 to 65536 queued elements.

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{black_box, BenchmarkId, Criterion, SamplingMode, Throughput};
use matchshim_core::matching::gpu::{GpuEngine, Tiers};
use matchshim_core::matching::{
    build_engine, Assertions, Class, EngineKind, EngineParams, Envelope, MatchEngine, MsgId,
    Pattern, ANY_SOURCE,
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

fn thread_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `now` is a valid timespec to write to.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

impl Measurement for CpuTime {
    type Intermediate = u64;
    type Value = u64;

    fn start(&self) -> u64 {
        thread_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_ns() - start
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
/// Also measured at 65536 elements in the first three orders: the engines that do not search a
/// list as long as the queue there.
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
/// Ranks sending in the first four orders.
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
}

const ORDERS: [(Order, &str); 5] = [
    (Order::Posting, "in-order"),
    (Order::Reverse, "reverse"),
    (Order::Random, "random"),
    (Order::Wildcards, "10%-wildcard"),
    (Order::Gather, "gather"),
];

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
}

fn workload(order: Order, len: usize) -> Workload {
    // Element i: rank i mod 64, tag i, so every receive has exactly one message.
    let keyed: Vec<Pattern> = (0..len)
        .map(|i| p2p((i % RANKS) as i32, i as i32))
        .collect();
    let (comm_size, posts, mut sent) = match order {
        Order::Gather => {
            let ranks = (len as f64).sqrt().ceil() as usize;
            let each = len / ranks;
            let posts: Vec<Pattern> = (0..ranks * each)
                .map(|i| p2p((i / each) as i32, (i % each) as i32))
                .collect();
            let sent = (0..ranks * each)
                .map(|i| p2p((i % ranks) as i32, (i / ranks) as i32))
                .collect();
            (ranks.max(2), posts, sent)
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
        Order::Reverse => sent.reverse(),
        Order::Random | Order::Wildcards => shuffle(&mut sent, 0x9e37_79b9_7f4a_7c15),
        Order::Posting | Order::Gather => {}
    }
    let arrivals = sent
        .iter()
        .enumerate()
        .map(|(i, p)| (envelope(p), (len + i) as MsgId))
        .collect();
    Workload {
        comm_size,
        posts,
        arrivals,
    }
}

/// The engines measured: every kind, `batch` once more with arrivals one by one, and `gpu`
/// once more with every burst through the kernels' host build.
fn engines() -> Vec<(EngineKind, String, bool)> {
    let mut list: Vec<_> = EngineKind::ALL
        .iter()
        .map(|&kind| {
            let burst = matches!(kind, EngineKind::Batch | EngineKind::Gpu);
            (kind, kind.name().to_string(), burst)
        })
        .collect();
    list.push((EngineKind::Batch, "batch/1".to_string(), false));
    for (name, _) in GPU_TIERS {
        list.push((EngineKind::Gpu, name.to_string(), true));
    }
    list
}

/// The `gpu` engine's tiers measured apart from it.
const GPU_TIERS: [(&str, Tiers); 2] = [("gpu/mirror", Tiers::CPU), ("gpu/kernels", Tiers::KERNELS)];

fn build(kind: EngineKind, name: &str, comm_size: usize) -> Box<dyn MatchEngine> {
    match GPU_TIERS.iter().find(|(tier, _)| *tier == name) {
        Some(&(_, tiers)) => Box::new(GpuEngine::host(&params(comm_size), tiers)),
        None => build_engine(kind, &params(comm_size)),
    }
}

fn params(comm_size: usize) -> EngineParams {
    EngineParams {
        comm_size,
        ..EngineParams::default()
    }
}

/// Posts every receive, then lets every message arrive: `len` matches.
fn run(engine: &mut dyn MatchEngine, work: &Workload, burst: bool) {
    thread_local! {
        static MATCHED: std::cell::RefCell<Vec<Option<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    for (id, &want) in work.posts.iter().enumerate() {
        black_box(engine.post(want, id as u64));
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

fn matching_rate(c: &mut Criterion<CpuTime>) {
    for (order, order_name) in ORDERS {
        let mut group = c.benchmark_group(order_name);
        group.sampling_mode(SamplingMode::Flat);
        let long = matches!(order, Order::Posting | Order::Reverse | Order::Random);
        for len in LENGTHS.into_iter().chain(long.then_some(LONG)) {
            let work = workload(order, len);
            group.throughput(Throughput::Elements(len as u64));
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

/// Heap bytes of an engine holding 4096 posted receives, and one holding 4096 unexpected
/// messages (random order, 64 ranks).
fn memory() {
    let work = workload(Order::Random, 4096);
    println!("\n| engine | bytes, 4096 posted | bytes, 4096 unexpected |");
    println!("|---|---:|---:|");
    for &kind in EngineKind::ALL {
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
        println!("| {} | {posted_bytes} | {arrived_bytes} |", kind.name());
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
    println!("\n| n | 16·√n | traffic | rank | pnp | col | col+pnp |");
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

/// The target cases once more, every engine in turn over 25 short rounds, keeping each engine's
/// best round: on a shared machine this compares engines under the same load, which separate
/// criterion runs cannot, and short rounds give every engine a chance at the machine's quiet
/// moments and at a good placement of its memory.
fn interleaved() {
    const ROUNDS: usize = 25;
    let cases = [
        (Order::Posting, 1),
        (Order::Posting, 16),
        (Order::Posting, 4096),
        (Order::Reverse, 256),
        (Order::Reverse, 4096),
        (Order::Random, 4096),
        (Order::Wildcards, 4096),
        (Order::Gather, 4096),
    ];
    let all = engines();
    println!("\nns per match, best of {ROUNDS} interleaved rounds (speedup over list)\n");
    println!(
        "| order | length | {} |",
        all.iter()
            .map(|e| e.1.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|---:|{}", "---:|".repeat(all.len()));
    for (order, len) in cases {
        let work = workload(order, len);
        let build = |kind: EngineKind, name: &str| build(kind, name, work.comm_size);
        // About 5 ms of work per engine and round, from one timed run.
        let iterations: Vec<u64> = all
            .iter()
            .map(|(kind, name, burst)| {
                let (kind, burst) = (*kind, *burst);
                let mut engine = build(kind, name);
                let start = thread_ns();
                run(engine.as_mut(), &work, burst);
                (5_000_000 / (thread_ns() - start).max(1)).max(1)
            })
            .collect();
        let mut best = vec![f64::MAX; all.len()];
        for _ in 0..ROUNDS {
            for (e, (kind, name, burst)) in all.iter().enumerate() {
                let (kind, burst) = (*kind, *burst);
                // A new engine each round, warmed by one untimed run: where the allocator puts
                // its arrays changes its speed, and the best round takes the placement that
                // suits each engine, list included.
                let mut engine = build(kind, name);
                run(engine.as_mut(), &work, burst);
                let start = thread_ns();
                for _ in 0..iterations[e] {
                    run(engine.as_mut(), &work, burst);
                }
                let ns = (thread_ns() - start) as f64 / iterations[e] as f64;
                best[e] = best[e].min(ns);
            }
        }
        let name = ORDERS.iter().find(|o| o.0 == order).unwrap().1;
        let cells: Vec<String> = best
            .iter()
            .map(|&ns| format!("{:.1} ({:.2}×)", ns / len as f64, best[0] / ns))
            .collect();
        println!("| {name} | {len} | {} |", cells.join(" | "));
    }
}

fn main() {
    let mut c = Criterion::default()
        .with_measurement(CpuTime)
        .warm_up_time(Duration::from_millis(100))
        .measurement_time(Duration::from_millis(300))
        .sample_size(10)
        .configure_from_args();
    matching_rate(&mut c);
    c.final_summary();
    // The tables take seconds: a run for a few benchmarks (any argument but flags) makes only
    // the tables it names.
    let named: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let tables: [(&str, fn()); 5] = [
        ("interleaved", interleaved),
        ("memory", memory),
        ("queues", queues),
        ("gpu_tiers", gpu_tiers),
        ("assertions", assertions),
    ];
    for (name, table) in tables {
        if named.is_empty() || named.iter().any(|n| n == name) {
            table();
        }
    }
}

type Make<'a> = Box<dyn Fn() -> Box<dyn MatchEngine> + 'a>;

/// ns per match of each engine on one workload, arrivals as one burst: the best of `rounds`
/// rounds of about 5 ms, the engines taking turns within each round.
fn best_interleaved(makers: &[Make], work: &Workload, rounds: usize) -> Vec<f64> {
    let iterations: Vec<u64> = makers
        .iter()
        .map(|make| {
            let mut engine = make();
            let start = thread_ns();
            run(engine.as_mut(), work, true);
            (5_000_000 / (thread_ns() - start).max(1)).max(1)
        })
        .collect();
    let mut best = vec![f64::MAX; makers.len()];
    for _ in 0..rounds {
        for (e, make) in makers.iter().enumerate() {
            let mut engine = make();
            run(engine.as_mut(), work, true);
            let start = thread_ns();
            for _ in 0..iterations[e] {
                run(engine.as_mut(), work, true);
            }
            best[e] = best[e].min((thread_ns() - start) as f64 / iterations[e] as f64);
        }
    }
    best.iter().map(|ns| ns / work.posts.len() as f64).collect()
}

/// The `gpu` engine's tiers against `bins`, random order, each arrival phase one burst: the CPU
/// tier beside a device (`gpu/mirror`), the lookup kernel in order and claiming unordered (the communicator asserts
/// no wildcards and overtaking), and with 10% `ANY_SOURCE` receives the scan kernel; kernels
/// in their host build. Million matches per second, best of 5 interleaved rounds.
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
        "| length | bins | mirror CPU tier | lookup kernel | lookup, unordered | \
         bins, 10% wildcards | mirror CPU tier, 10% wildcards | scan kernel, 10% wildcards |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for len in [64, 256, 1024, 4096, 16384, 65536] {
        let mut row = format!("| {len} |");
        for order in [Order::Random, Order::Wildcards] {
            let work = workload(order, len);
            let n = work.comm_size;
            let mut makers: Vec<Make> = vec![
                Box::new(|| build_engine(EngineKind::Bins, &params(n))),
                Box::new(|| Box::new(GpuEngine::host(&params(n), Tiers::CPU))),
            ];
            // The scan kernel compares every message with every receive: not the longest.
            if order == Order::Random || len <= 4096 {
                makers.push(Box::new(|| {
                    Box::new(GpuEngine::host(&params(n), Tiers::KERNELS))
                }));
            }
            if order == Order::Random {
                let relaxed = EngineParams {
                    comm_size: n,
                    ..unordered
                };
                makers.push(Box::new(move || {
                    Box::new(GpuEngine::host(&relaxed, Tiers::KERNELS))
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
            let name = ORDERS.iter().find(|o| o.0 == order).unwrap().1;
            println!("| {} | {name} | {} |", kind.name(), cells.join(" | "));
        }
    }
}
