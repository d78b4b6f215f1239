//! `gpu`: matching offloaded to an NVIDIA GPU where it pays, after Klenk et al. 2017.
//!
//! The host keeps each side of the queues (`side.rs`): a log of packed keys in arrival order
//! with live bits, and a hash table from key to the chain of its slots, so the CPU tier answers
//! a single post or arrival in a few table probes, wildcards included (an arrival looks at the
//! oldest receive of its own key and of the wildcard keys it fits, and takes the earliest). Only
//! a wildcard receive or probe scans the unexpected log.
//!
//! The device keeps a copy of both sides in its own memory (`mirror.rs`), brought up to date
//! at the start of every launch sequence from what the host changed. A burst of at least
//! `GpuParams::burst` arrivals is matched there whole: without wildcard receives queued, each
//! message's rank among the burst's messages of its key, in arrival order, is the ticket it
//! claims in that key's chain (one pass, no matter how long the queue); with wildcard receives,
//! rounds give each message a candidate (its key's ticket, or the earliest wildcard receive it
//! fits, found by a scan parallel over messages and words of the wildcard log) and settle the
//! messages before the first possible conflict, which is exactly the ordered result. The device
//! removes what it claimed from its copy and writes one slot per message into mapped host
//! memory; the host clears those live bits and is done: no per-message search or removal on
//! the CPU. Where the communicator asserts no wildcards and allows overtaking (§VI), messages
//! take their key's tickets in whatever order the device's threads come.
//!
//! Without a device the engine is its CPU tier; where `MATCHSHIM_GPU_BURST` or
//! `MATCHSHIM_GPU_SCAN` is set, the kernels' host build (the same code, driven thread by
//! thread) takes what a device would, so MPI runs can take the device's path on any machine.

mod buf;
mod device;
mod host;
mod mirror;
mod nvrtc;
mod side;
#[cfg(test)]
mod tests;

pub use device::{
    compile_ptx, devices, driver_version, launches, loaded_library, nvrtc_archs, nvrtc_version,
    source, DeviceInfo, Launch, KERNELS,
};
pub use nvrtc::NVRTC_VARIABLE;

use super::{Class, EngineParams, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId};
use super::{ANY_SOURCE, ANY_TAG};
use crate::report::Offload;
use buf::Memory;
use device::Probe;
use mirror::{Backend, Mirror, ORDERED, PENDING, UNORDERED};
use side::{Side, NONE};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// When the kernels run instead of the CPU tier, and how bursts reach the device
/// (`MATCHSHIM_GPU_BURST`, `MATCHSHIM_GPU_SCAN`, `MATCHSHIM_GPU_LAUNCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuParams {
    /// Bursts of at least this many arrivals (against a non-empty posted queue).
    pub burst: usize,
    /// Wildcard searches of an unexpected log of at least this many slots.
    pub scan: usize,
    pub launch: Launch,
    /// The thresholds were set (`MATCHSHIM_GPU_BURST` or `MATCHSHIM_GPU_SCAN`): without a
    /// device they send work to the kernels' host build too, which runs a device's threads
    /// one after another (to test the device's path); otherwise the CPU tier does it all.
    pub chosen: bool,
}

/// Rounds a burst with wildcard receives gets on the device before the CPU tier finishes it
/// (each round settles at least its first waiting message, and all of them unless two
/// messages compete for one receive).
const ROUNDS: usize = 8;

impl GpuParams {
    /// The CPU tier alone (after a device error, and to test it).
    pub const CPU: GpuParams = GpuParams {
        burst: usize::MAX,
        scan: usize::MAX,
        launch: Launch::Stream,
        chosen: true,
    };
    /// Every burst and every wildcard search through the kernels (tests and benchmarks).
    pub const KERNELS: GpuParams = GpuParams {
        burst: 1,
        scan: 0,
        launch: Launch::Stream,
        chosen: true,
    };
}

impl Default for GpuParams {
    /// No device has measured these; they are set where the engine as it was before this
    /// design already drew level with `bins` on an H100 (driver 580, CUDA 13: bursts of 4096 messages,
    /// 26 M matches/s either way, when the CPU still removed every matched receive itself and
    /// a burst took two launches, two copies and two waits), which only leaves out work. A
    /// wildcard search: the CPU tier scans 0.57 ns per slot and stops at the first fit, a
    /// launch and its wait cost 6 to 10 µs on that H100, so the device is asked only from 65536
    /// slots (37 µs on the CPU). `ci/bench-gpu-device.sh` measures what to set instead.
    fn default() -> Self {
        GpuParams {
            burst: 4096,
            scan: 65536,
            launch: Launch::Stream,
            chosen: false,
        }
    }
}

static KERNEL_BURSTS: AtomicU64 = AtomicU64::new(0);

pub struct GpuEngine {
    prq: Side,
    umq: Side,
    /// The device's copy and who runs the kernels; none after a device error.
    mirror: Option<Mirror>,
    memory: Memory,
    tiers: GpuParams,
    /// Bursts may match out of order (the communicator asserts no wildcards and overtaking).
    unordered: bool,
    stats: EngineStats,
}

/// Which path `gpu` takes in this process, for the report.
pub fn offload() -> Offload {
    let kernel_bursts = KERNEL_BURSTS.load(Ordering::Relaxed);
    match device::probe() {
        Probe::Ready(device) => {
            let mut detail = format!("{}, kernels for {}", device.info.name, device.compiled);
            if let Some(error) = device::failure() {
                detail += &format!("; kernels stopped after: {error}");
            }
            Offload {
                path: "device".to_string(),
                detail,
                kernel_launches: launches(),
                kernel_bursts,
            }
        }
        Probe::Missing(why) => Offload {
            path: "cpu".to_string(),
            detail: why.clone(),
            kernel_launches: 0,
            kernel_bursts,
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
        Probe::Missing(why) if rank == 0 => {
            Some(format!("matchshim: gpu engine: {why}; matching on the CPU"))
        }
        _ => None,
    }
}

/// The `gpu` engine: on the device when the probe found one; else its CPU tier, with the
/// kernels' host build behind thresholds that were set.
pub fn build(params: &EngineParams) -> Box<dyn MatchEngine> {
    Box::new(GpuEngine::for_this_machine(params))
}

impl GpuEngine {
    fn for_this_machine(params: &EngineParams) -> GpuEngine {
        if let Probe::Ready(device) = device::probe() {
            match device.launcher(params.gpu.launch) {
                Ok(launcher) => {
                    let memory = Memory::Pinned(device.clone());
                    let backend = Backend::Device(launcher);
                    return GpuEngine::build(params, backend, memory, params.gpu);
                }
                Err(error) => device::record_failure(error),
            }
        }
        if params.gpu.chosen {
            return GpuEngine::host(params, params.gpu);
        }
        let mut engine = GpuEngine::host(params, GpuParams::CPU);
        engine.lose_device(String::new());
        engine
    }
}

impl GpuEngine {
    /// With the kernels' host build behind `tiers`.
    pub fn host(params: &EngineParams, tiers: GpuParams) -> Self {
        Self::build(params, Backend::Host, Memory::Host, tiers)
    }

    /// On the device the probe found, behind `tiers`; `None` without one (device tests and
    /// benchmarks).
    pub fn device(params: &EngineParams, tiers: GpuParams) -> Result<Self, String> {
        match device::probe() {
            Probe::Ready(device) => {
                let launcher = device.launcher(tiers.launch)?;
                let memory = Memory::Pinned(device.clone());
                Ok(Self::build(
                    params,
                    Backend::Device(launcher),
                    memory,
                    tiers,
                ))
            }
            Probe::Missing(why) => Err(why.clone()),
        }
    }

    fn build(params: &EngineParams, backend: Backend, memory: Memory, tiers: GpuParams) -> Self {
        let mut stats = EngineStats::default();
        stats.set_queues(2);
        GpuEngine {
            prq: Side::new(memory.clone(), true, true),
            umq: Side::new(memory.clone(), false, true),
            mirror: Some(Mirror::new(backend)),
            memory,
            tiers,
            unordered: params.assertions.unordered(),
            stats,
        }
    }

    /// Stops launching after a device error (or, without a device, before anything): the CPU
    /// tier from now on, noting nothing for a copy.
    fn lose_device(&mut self, error: String) {
        if matches!(
            self.mirror.as_ref().map(|m| &m.backend),
            Some(Backend::Device(_))
        ) {
            device::record_failure(error);
        }
        self.mirror = None;
        self.prq.changes.untrack();
        self.umq.changes.untrack();
        self.tiers = GpuParams::CPU;
    }

    /// The earliest posted receive that fits a message key: the oldest of its own key's chain
    /// and of the wildcard chains it fits. Returns the slot and the chains looked at.
    fn find_posted(&mut self, key: u64) -> (Option<u32>, usize) {
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

    /// The earliest unexpected message a wildcard pattern fits, and the messages compared.
    fn scan_unexpected(&mut self, key: u64) -> (Option<u32>, usize) {
        let long = self.umq.end - self.umq.head_word * 32 >= self.tiers.scan;
        if long && self.mirror.is_some() {
            let scanned = self.readable().and_then(|()| {
                let mirror = self.mirror.as_mut().expect("checked");
                mirror.scan(&mut self.prq, &mut self.umq, key, &self.memory)
            });
            match scanned {
                Ok(found) => return (found, self.umq.len),
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
        traffic.lookup(depth, remove && found.is_some());
        let slot = found?;
        if !remove {
            return Some(self.umq.id(slot));
        }
        Some(self.umq.remove(slot))
    }

    /// A device reads the host's arrays in place: they must all be in pinned memory.
    fn readable(&self) -> Result<(), String> {
        let on_device = matches!(
            self.mirror.as_ref().map(|m| &m.backend),
            Some(Backend::Device(_))
        );
        if on_device && !(self.prq.pinned() && self.umq.pinned()) {
            return Err("pinned host memory ran out".to_string());
        }
        Ok(())
    }

    /// A burst through the kernels; on an error nothing has changed yet.
    fn burst(
        &mut self,
        msgs: &[(Envelope, MsgId)],
        matched: &mut Vec<Option<RecvId>>,
    ) -> Result<(), String> {
        self.readable()?;
        let count = msgs.len();
        let mirror = self.mirror.as_mut().expect("bursts run only with a mirror");
        let items = mirror.items(count, &self.memory)?;
        for (item, (env, _)) in items.iter_mut().zip(msgs) {
            *item = envelope_key(env);
        }
        if self.prq.wild == [0; 3] {
            let mode = if self.unordered { UNORDERED } else { ORDERED };
            mirror.lookup(&mut self.prq, &mut self.umq, count, mode)?;
        } else {
            mirror.rounds(&mut self.prq, &mut self.umq, count, ROUNDS)?;
        }
        KERNEL_BURSTS.fetch_add(1, Ordering::Relaxed);
        // What the host learns: the slot each message took.
        let start = matched.len();
        matched.extend(mirror.out(count).iter().map(|&slot| match slot {
            NONE => None,
            PENDING => Some(UNSETTLED),
            slot => Some(slot as u64),
        }));
        for (i, &(env, msg)) in msgs.iter().enumerate() {
            matched[start + i] = match matched[start + i] {
                // Past the last round: the CPU tier finishes, in arrival order.
                Some(UNSETTLED) => self.arrive(env, msg),
                Some(slot) => {
                    self.stats.traffic(env.class).arrival(1, true);
                    Some(self.prq.claimed(slot as u32))
                }
                None => {
                    self.stats.traffic(env.class).arrival(1, false);
                    self.umq.push(envelope_key(&env), msg);
                    None
                }
            };
        }
        self.prq.advance_head();
        Ok(())
    }
}

#[cfg(test)]
impl GpuEngine {
    /// Kernel runs so far (bursts and scans).
    fn kernel_runs(&self) -> u64 {
        self.mirror.as_ref().map_or(0, |m| m.runs)
    }

    /// Where the host build's copy of the posted side is up to date (nothing changed since its
    /// last sync), it agrees with the host: the same live bits, and for every key as many
    /// tickets between consumed and posted as live receives.
    fn check_mirror(&self) {
        let Some(mirror) = &self.mirror else { return };
        let c = &self.prq.changes;
        let untouched = c.dirty.len() + c.fronts.len() + c.entries.len() + c.wdirty.len();
        if c.full || c.from != self.prq.end || c.wfrom != self.prq.wend || untouched > 0 {
            return;
        }
        let Some(live) = mirror.prq_live() else {
            return;
        };
        let words = self.prq.words();
        assert_eq!(
            &live[..words],
            &self.prq.live[..words],
            "live bits of the copy"
        );
        for e in self.prq.used_entries() {
            let (posted, consumed) = mirror.prq_counts(e).expect("host build");
            assert_eq!(
                (posted - consumed) as usize,
                self.prq.live_in(e),
                "entry {e}: posted {posted}, consumed {consumed}"
            );
        }
    }
}

/// A message the device left for the CPU tier, among the slots it took.
const UNSETTLED: u64 = u64::MAX;

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
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        match found {
            Some(slot) => Some(self.prq.remove(slot)),
            None => {
                self.umq.push(key, msg);
                None
            }
        }
    }

    /// Beside a device (or with the kernels' host build), a burst of at least
    /// `GpuParams::burst` messages is matched by the kernels; where the communicator allows
    /// overtaking, messages of one key may take that key's receives in another order.
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        if msgs.len() >= self.tiers.burst && self.prq.len > 0 && self.mirror.is_some() {
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
