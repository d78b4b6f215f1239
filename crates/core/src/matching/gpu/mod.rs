//! `gpu`: matching offloaded to an NVIDIA GPU where it pays, after Klenk et al. (paper 000).
//!
//! Each side of the queues is a log of packed keys in arrival order (live bits, the layout the
//! kernels scan) plus a hash table from key to the chain of its live slots, so the CPU tier
//! answers a single post or arrival in a few table probes, wildcards included: an arrival
//! looks at the oldest receive of its own key and of the wildcard keys it fits, and takes the
//! earliest. Only a wildcard receive or probe scans the unexpected log.
//!
//! A kernel launch costs microseconds where the CPU tier takes tens of nanoseconds per match,
//! so the device runs only (a) bursts of at least `Tiers::burst` arrivals, through the lookup
//! kernel (one thread per message finds its key's chain) when no wildcard receive is queued,
//! else through the scan kernel (§V: every 32-slot word votes on every message, the earliest
//! vote wins, and the CPU resolves conflicts in message order); (b) wildcard searches of an
//! unexpected log of at least `Tiers::scan` slots, by the scan kernel. Where the communicator
//! asserts no wildcards and allows overtaking (§VI), a burst's messages claim receives of
//! their key in whatever order the device's threads come. The queues live in pinned host
//! memory mapped into the device, so the CPU's queues are the device's mirror; the kernels'
//! atomics and outputs stay in device memory.
//!
//! Keeping that mirror costs the CPU tier about 1.5× the time of `bins` per match, so without a
//! usable device the engine is `bins` itself (`build`); the kernels' host build serves the
//! tests and benchmarks (`GpuEngine::host`).

mod buf;
mod device;
mod host;
mod side;
#[cfg(test)]
mod tests;

pub use device::{
    compile_ptx, devices, driver_version, launches, loaded_library, nvrtc_version, source,
    DeviceInfo, KERNELS,
};

use super::bins::Bins;
use super::{Class, EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use super::{ANY_SOURCE, ANY_TAG};
use crate::report::Offload;
use buf::{Buf, Memory};
use device::{Launcher, Probe};
use side::{Side, NONE};

const SOURCE: u64 = 0x7fff_ffff;
const COLLECTIVE: u64 = 1 << 31;

/// Tag in the high half, traffic type in bit 31, source in the low 31 bits; wildcards are
/// all-ones fields (kernels.h says the same).
fn pack(source: i32, tag: i32, class: Class) -> u64 {
    let collective = if class.is_collective() { COLLECTIVE } else { 0 };
    ((tag as u32 as u64) << 32) | collective | (source as u32 as u64 & SOURCE)
}

fn pattern_key(want: &Pattern) -> u64 {
    let source = if want.source == ANY_SOURCE {
        -1
    } else {
        want.source
    };
    let tag = if want.tag == ANY_TAG { -1 } else { want.tag };
    pack(source, tag, want.class)
}

fn envelope_key(env: &Envelope) -> u64 {
    pack(env.source, env.tag, env.class)
}

/// When the kernels run instead of the CPU tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tiers {
    /// Bursts of at least this many arrivals (against a non-empty posted queue).
    pub burst: usize,
    /// Wildcard searches of an unexpected log of at least this many slots.
    pub scan: usize,
}

impl Tiers {
    /// The CPU tier alone (after a device error, and to test it).
    pub const CPU: Tiers = Tiers {
        burst: usize::MAX,
        scan: usize::MAX,
    };
    /// Every burst and every wildcard search through the kernels (tests and benchmarks).
    pub const KERNELS: Tiers = Tiers { burst: 1, scan: 0 };
    /// On a device: a launch and its wait cost about 5 to 10 µs, the CPU tier 20 to 30 ns per
    /// arrival and 0.57 ns per slot of a wildcard scan (RESULTS.md), so a burst may pay from a
    /// few hundred messages and a scan from tens of thousands of slots. Model values: no
    /// device has measured them.
    pub const DEVICE: Tiers = Tiers {
        burst: 256,
        scan: 32768,
    };
}

/// Who runs the kernels.
enum Kernels {
    Host,
    Device(Launcher),
}

impl Kernels {
    fn memory(&self) -> Memory {
        match self {
            Kernels::Host => Memory::Host,
            Kernels::Device(launcher) => Memory::Mapped(launcher.device().clone()),
        }
    }

    /// `scratch.first[i]`: the earliest live slot of `side` that fits `scratch.items[i]`, for
    /// the first `count` items.
    fn scan(
        &mut self,
        side: &Side,
        scratch: &mut Scratch,
        count: usize,
        patterns: bool,
    ) -> Result<(), String> {
        scratch.first[..count].fill(NONE);
        let (begin, end) = (side.head_word, side.words());
        match self {
            Kernels::Host => {
                let items = &scratch.items[..count];
                host::scan(
                    &side.keys,
                    &side.live,
                    begin,
                    end,
                    items,
                    patterns,
                    &mut scratch.first,
                );
                Ok(())
            }
            Kernels::Device(launcher) => launcher.scan(
                (begin as u32, end as u32),
                (mapped(&side.keys)?, mapped(&side.live)?),
                mapped(&scratch.items)?,
                patterns,
                &mut scratch.first[..count],
            ),
        }
    }

    /// `scratch.first[i]`: the table entry of `scratch.items[i]` in `side`; with `claim`,
    /// `scratch.slot[i]` the element it takes.
    fn lookup(
        &mut self,
        side: &Side,
        scratch: &mut Scratch,
        claims: &mut Buf<u32>,
        count: usize,
        claim: bool,
    ) -> Result<(), String> {
        match self {
            Kernels::Host => {
                let items = &scratch.items[..count];
                let (entry, slot) = (&mut scratch.first, &mut scratch.slot);
                host::lookup(
                    items,
                    &side.table,
                    side.bits,
                    &side.next,
                    claims,
                    claim,
                    entry,
                    slot,
                );
                Ok(())
            }
            Kernels::Device(launcher) => launcher.lookup(
                mapped(&scratch.items)?,
                (mapped(&side.table)?, side.bits, mapped(&side.next)?),
                claim,
                &mut scratch.first[..count],
                &mut scratch.slot[..count],
            ),
        }
    }
}

fn mapped<T: Copy>(buf: &Buf<T>) -> Result<u64, String> {
    buf.device_ptr()
        .ok_or_else(|| "an array is in unmapped host memory".to_string())
}

/// Inputs and outputs of one launch, in the kernels' memory.
struct Scratch {
    items: Buf<u64>,
    first: Buf<u32>,
    slot: Buf<u32>,
}

impl Scratch {
    fn new() -> Self {
        Scratch {
            items: Buf::Host(Vec::new()),
            first: Buf::Host(Vec::new()),
            slot: Buf::Host(Vec::new()),
        }
    }

    /// Room for `count` items.
    fn reserve(&mut self, memory: &Memory, count: usize) -> Result<(), String> {
        if self.items.len() < count {
            let len = count.next_power_of_two();
            self.items = Buf::new(memory, len, 0)?;
            self.first = Buf::new(memory, len, NONE)?;
            self.slot = Buf::new(memory, len, NONE)?;
        }
        Ok(())
    }
}

pub struct GpuEngine {
    prq: Side,
    umq: Side,
    kernels: Kernels,
    tiers: Tiers,
    scratch: Scratch,
    /// The host build's claims per table entry of the posted side (zero between bursts).
    claims: Buf<u32>,
    /// Bursts may match out of order (the communicator asserts no wildcards and overtaking).
    unordered: bool,
    stats: EngineStats,
}

/// Which path `gpu` takes in this process, for the report.
pub fn offload() -> Offload {
    match device::probe() {
        Probe::Ready(device) => {
            let (major, minor) = device.info.capability;
            let mut detail = format!("{} (sm_{major}{minor})", device.info.name);
            if let Some(error) = device::failure() {
                detail += &format!("; kernels stopped after: {error}");
            }
            Offload {
                path: "device".to_string(),
                detail,
                kernel_launches: launches(),
                kernel_bursts: 0,
            }
        }
        Probe::Missing(why) => Offload {
            path: "cpu".to_string(),
            detail: why.clone(),
            kernel_launches: 0,
            kernel_bursts: 0,
        },
    }
}

/// Looks for the device at `MPI_Init` when the engine is `gpu`; the line rank 0 prints when
/// there is none.
pub fn init_message(engine: super::EngineKind, rank: i32) -> Option<String> {
    if engine != super::EngineKind::Gpu {
        return None;
    }
    match device::probe() {
        Probe::Missing(why) if rank == 0 => Some(format!(
            "matchshim: gpu engine: {why}; matching on the CPU (bins)"
        )),
        _ => None,
    }
}

/// The `gpu` engine: on the device when the probe found one, else `bins`.
pub fn build(params: &EngineParams) -> Box<dyn MatchEngine> {
    if let Probe::Ready(device) = device::probe() {
        match device.launcher() {
            Ok(launcher) => {
                let memory = Memory::Mapped(device.clone());
                let kernels = Kernels::Device(launcher);
                return Box::new(GpuEngine::build(params, kernels, memory, Tiers::DEVICE));
            }
            Err(error) => device::record_failure(error),
        }
    }
    Box::new(Bins::new(params.bins))
}

impl GpuEngine {
    /// With the kernels' host build behind `tiers`.
    pub fn host(params: &EngineParams, tiers: Tiers) -> Self {
        Self::build(params, Kernels::Host, Memory::Host, tiers)
    }

    fn build(params: &EngineParams, kernels: Kernels, memory: Memory, tiers: Tiers) -> Self {
        let mut stats = EngineStats::default();
        stats.set_queues(2);
        GpuEngine {
            prq: Side::new(memory.clone()),
            umq: Side::new(memory),
            kernels,
            tiers,
            scratch: Scratch::new(),
            claims: Buf::Host(Vec::new()),
            unordered: params.assertions.unordered(),
            stats,
        }
    }
}

impl GpuEngine {
    /// Stops launching after a device error: the CPU tier from now on.
    fn lose_device(&mut self, error: String) {
        device::record_failure(error);
        self.kernels = Kernels::Host;
        self.tiers = Tiers::CPU;
    }

    /// The earliest posted receive that fits a message key: the oldest of its own key's chain
    /// and of the wildcard chains it fits. Returns the slot and the chains looked at.
    fn find_posted(&self, key: u64) -> (Option<u32>, usize) {
        if self.prq.len == 0 {
            return (None, 0);
        }
        let mut best = self.prq.oldest(key);
        let mut depth = 1;
        for (shape, wild) in side::wildcard_keys(key).into_iter().enumerate() {
            if self.prq.wild[shape] > 0 {
                depth += 1;
                if let Some(slot) = self.prq.oldest(wild) {
                    best = Some(best.map_or(slot, |b| b.min(slot)));
                }
            }
        }
        (best, depth)
    }

    /// A message's match (`found`, a posted slot) taken, or the message queued as unexpected.
    fn settle(&mut self, found: Option<u32>, key: u64, msg: MsgId, class: Class) -> Option<RecvId> {
        let traffic = self.stats.traffic(class);
        match found {
            Some(slot) => {
                traffic.matches += 1;
                Some(self.prq.remove(slot))
            }
            None => {
                traffic.unexpected += 1;
                self.umq.push(key, msg);
                None
            }
        }
    }

    /// The earliest unexpected message a wildcard pattern fits, and the messages compared.
    fn scan_unexpected(&mut self, key: u64) -> (Option<u32>, usize) {
        if self.umq.end >= self.tiers.scan {
            let launched = self
                .scratch
                .reserve(&self.kernels.memory(), 1)
                .and_then(|()| {
                    self.scratch.items[0] = key;
                    self.kernels.scan(&self.umq, &mut self.scratch, 1, false)
                });
            match launched {
                Ok(()) => {
                    let slot = self.scratch.first[0];
                    return ((slot != NONE).then_some(slot), self.umq.len);
                }
                Err(error) => self.lose_device(error),
            }
        }
        self.umq.first_fit(self.umq.head_word, key, false)
    }

    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let key = pattern_key(want);
        let (found, depth) = if self.umq.len == 0 {
            (None, 0)
        } else if side::shape(key).is_none() {
            (self.umq.oldest(key), 1)
        } else {
            self.scan_unexpected(key)
        };
        let traffic = self.stats.traffic(want.class);
        traffic.umq.record(depth);
        let slot = found?;
        if !remove {
            return Some(self.umq.id(slot));
        }
        traffic.matches += 1;
        Some(self.umq.remove(slot))
    }

    /// A burst through the kernels; on an error nothing has changed yet.
    fn burst(
        &mut self,
        msgs: &[(Envelope, MsgId)],
        matched: &mut Vec<Option<RecvId>>,
    ) -> Result<(), String> {
        let count = msgs.len();
        let memory = self.kernels.memory();
        self.scratch.reserve(&memory, count)?;
        for (item, (env, _)) in self.scratch.items.iter_mut().zip(msgs) {
            *item = envelope_key(env);
        }
        if self.prq.wild == [0; 3] {
            // Only a message's own key fits it: one table lookup per message.
            let claim = self.unordered;
            if claim && self.claims.len() < self.prq.table.len() {
                self.claims = Buf::Host(vec![0; self.prq.table.len()]);
            }
            let scratch = &mut self.scratch;
            self.kernels
                .lookup(&self.prq, scratch, &mut self.claims, count, claim)?;
            for (i, &(env, msg)) in msgs.iter().enumerate() {
                let entry = self.scratch.first[i];
                let slot = if claim {
                    if entry != NONE {
                        self.claims[entry as usize] = 0;
                    }
                    self.scratch.slot[i]
                } else if entry == NONE {
                    NONE
                } else {
                    self.prq.table[entry as usize].head
                };
                self.stats.traffic(env.class).prq.record(1);
                let key = self.scratch.items[i];
                matched.push(self.settle((slot != NONE).then_some(slot), key, msg, env.class));
            }
        } else {
            self.kernels
                .scan(&self.prq, &mut self.scratch, count, true)?;
            for (i, &(env, msg)) in msgs.iter().enumerate() {
                let (first, key) = (self.scratch.first[i], self.scratch.items[i]);
                // A slot an earlier message took leaves the next fitting one after it.
                let found = match first {
                    NONE => None,
                    slot if self.prq.is_live(slot) => Some(slot),
                    slot => self.prq.first_fit(slot as usize / 32, key, true).0,
                };
                self.stats.traffic(env.class).prq.record(self.prq.len);
                matched.push(self.settle(found, key, msg, env.class));
            }
        }
        Ok(())
    }
}

impl MatchEngine for GpuEngine {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        self.prq.push(pattern_key(&want), recv);
        None
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let key = envelope_key(&env);
        let (found, depth) = self.find_posted(key);
        self.stats.traffic(env.class).prq.record(depth);
        self.settle(found, key, msg, env.class)
    }

    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        if msgs.len() >= self.tiers.burst && self.prq.len > 0 {
            match self.burst(msgs, matched) {
                Ok(()) => return,
                Err(error) => self.lose_device(error),
            }
        }
        matched.extend(msgs.iter().map(|&(env, msg)| self.arrive(env, msg)));
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let slot = self.prq.find_id(recv);
        slot.map(|slot| self.prq.remove(slot)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.len, self.umq.len)
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
