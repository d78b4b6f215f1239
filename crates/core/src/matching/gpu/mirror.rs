//! The device's copy of a communicator's queues and a burst's scratch, and the launch sequences
//! that bring the copy up to date and match bursts in it. The kernels run on a device or, in
//! their host build, on the CPU: the same arguments, the same sequences.

use super::buf::{Buf, Dev};
use super::device::{Block, Kernel, Kind, Launcher};
use super::host;
use super::side::{Side, NONE};

/// kernels.h's `ms_side`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct MsSide {
    pub keys: u64,
    pub live: u64,
    pub entry_of: u64,
    pub wpos: u64,
    pub table: u64,
    pub tickets: u64,
    pub wslot: u64,
    pub wkeys: u64,
    pub wlive: u64,
    pub h_keys: u64,
    pub h_live: u64,
    pub h_entry_of: u64,
    pub h_ticket: u64,
    pub h_wpos: u64,
    pub h_wslot: u64,
    pub h_wkeys: u64,
    pub h_wlive: u64,
    pub h_table: u64,
    pub dirty: u64,
    pub fronts: u64,
    pub entries: u64,
    pub wdirty: u64,
    pub n_dirty: u32,
    pub n_fronts: u32,
    pub n_entries: u32,
    pub n_wdirty: u32,
    pub from: u32,
    pub to: u32,
    pub wfrom: u32,
    pub wto: u32,
    pub words: u32,
    pub wwords: u32,
    pub table_bits: u32,
    pub ticket_bits: u32,
    pub chains: u32,
    pub pad: u32,
}

/// kernels.h's `ms_burst`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct MsBurst {
    pub h_items: u64,
    pub out: u64,
    pub res: u64,
    pub items: u64,
    pub e_of: u64,
    pub rank: u64,
    pub cand: u64,
    pub wfirst: u64,
    pub cnt: u64,
    pub claimer: u64,
    pub flags: u64,
    pub ctl: u64,
    pub pattern: u64,
    pub count: u32,
    pub mode: u32,
    pub epoch: u32,
    pub groups: u32,
}

/// kernels.h's `ms_args`: everything a kernel reads, by value.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct MsArgs {
    pub prq: MsSide,
    pub umq: MsSide,
    pub b: MsBurst,
}

/// kernels.h's burst modes.
pub const ORDERED: u32 = 0;
pub const UNORDERED: u32 = 1;
pub const ROUND: u32 = 2;
/// kernels.h's MS_PENDING.
pub const PENDING: u32 = 0xffff_fffe;

/// kernels.h's `ms_entry`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DevEntry {
    key: u64,
    posted: u32,
    consumed: u32,
}

/// kernels.h's `ms_ticket`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Ticket {
    tag: u64,
    slot: u32,
    pad: u32,
}

/// Who runs the kernels.
pub(super) enum Backend {
    Host,
    Device(Launcher),
}

impl Backend {
    /// `len` elements of the mirror, every 32-bit word of them `word`.
    fn alloc<T: Copy>(&mut self, len: usize, word: u32) -> Result<Dev<T>, String> {
        let bytes = len * std::mem::size_of::<T>();
        match self {
            Backend::Host => {
                assert!(
                    std::mem::size_of::<T>().is_multiple_of(4),
                    "mirror arrays hold 32-bit words"
                );
                let mut v: Vec<T> = Vec::with_capacity(len);
                // SAFETY: the kernels' types are plain 32- and 64-bit words (and structs of
                // them), so every bit pattern is a value; all `len` elements are written.
                unsafe {
                    std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u32>(), bytes / 4)
                        .fill(word);
                    v.set_len(len);
                }
                Ok(Dev::Host(v))
            }
            Backend::Device(launcher) => {
                let block: Block = launcher.device().block(Kind::Device, bytes)?;
                launcher.fill(block.device_ptr, word, bytes.div_ceil(4))?;
                Ok(Dev::Device { block, len })
            }
        }
    }

    /// Sets every 32-bit word of `dev` to `word`.
    fn fill<T: Copy>(&mut self, dev: &mut Dev<T>, word: u32) -> Result<(), String> {
        let bytes = dev.len() * std::mem::size_of::<T>();
        match (self, dev) {
            (Backend::Host, Dev::Host(v)) => {
                // SAFETY: plain-word types, `bytes` long.
                let words = unsafe {
                    std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u32>(), bytes / 4)
                };
                words.fill(word);
                Ok(())
            }
            (Backend::Device(launcher), Dev::Device { block, .. }) => {
                launcher.fill(block.device_ptr, word, bytes / 4)
            }
            _ => Err("a mirror array on the wrong side".to_string()),
        }
    }

    /// Runs `kernels` in order and waits.
    fn run(&mut self, kernels: &[Kernel], args: &MsArgs) -> Result<(), String> {
        match self {
            Backend::Host => {
                for &kernel in kernels {
                    host::run(kernel, args);
                }
                Ok(())
            }
            Backend::Device(launcher) => {
                launcher.run(kernels, args, |kernel| host::items(kernel, args))?;
                launcher.wait()
            }
        }
    }
}

/// Grows `dev` to at least `len` (a power of two), every word `word`; true if it was replaced.
fn ensure<T: Copy>(
    backend: &mut Backend,
    dev: &mut Option<Dev<T>>,
    len: usize,
    word: u32,
) -> Result<bool, String> {
    if dev.as_ref().is_some_and(|d| d.len() >= len) {
        return Ok(false);
    }
    *dev = Some(backend.alloc(len.next_power_of_two().max(64), word)?);
    Ok(true)
}

fn addr<T: Copy>(dev: &Option<Dev<T>>) -> u64 {
    dev.as_ref().map_or(0, Dev::addr)
}

/// One side's copy.
#[derive(Default)]
struct SideMirror {
    keys: Option<Dev<u64>>,
    live: Option<Dev<u32>>,
    entry_of: Option<Dev<u32>>,
    wpos: Option<Dev<u32>>,
    table: Option<Dev<DevEntry>>,
    tickets: Option<Dev<Ticket>>,
    wslot: Option<Dev<u32>>,
    wkeys: Option<Dev<u64>>,
    wlive: Option<Dev<u32>>,
    /// The host's table size the copy was built for.
    table_bits: u32,
    ticket_bits: u32,
    /// The copy holds nothing valid yet.
    stale: bool,
}

/// A burst's scratch on the device and its mapped inputs and outputs.
#[derive(Default)]
struct Scratch {
    items: Option<Dev<u64>>,
    res: Option<Dev<u32>>,
    e_of: Option<Dev<u32>>,
    rank: Option<Dev<u32>>,
    cand: Option<Dev<u32>>,
    wfirst: Option<Dev<u32>>,
    cnt: Option<Dev<u32>>,
    claimer: Option<Dev<u32>>,
    flags: Option<Dev<u32>>,
    ctl: Option<Dev<u32>>,
    /// Mapped host memory: the message keys in, the results out.
    h_items: Option<Buf<u64>>,
    out: Option<Buf<u32>>,
}

/// One launch sequence's burst: its messages, mode, word groups of the wildcard scan, and a
/// single scan's pattern.
struct Job {
    count: usize,
    mode: u32,
    groups: u32,
    pattern: u64,
}

/// The mirror of both sides of one engine, and how its kernels run.
pub(super) struct Mirror {
    pub backend: Backend,
    prq: SideMirror,
    umq: SideMirror,
    scratch: Scratch,
    epoch: u32,
    /// Bursts (and single scans) the kernels ran.
    pub runs: u64,
}

impl Mirror {
    pub fn new(backend: Backend) -> Mirror {
        Mirror {
            backend,
            prq: SideMirror {
                stale: true,
                ..SideMirror::default()
            },
            umq: SideMirror {
                stale: true,
                ..SideMirror::default()
            },
            scratch: Scratch::default(),
            epoch: 0,
            runs: 0,
        }
    }

    /// Makes room in `m` for `side`; true if the whole side must come over (else only what
    /// changed).
    fn prepare(backend: &mut Backend, m: &mut SideMirror, side: &mut Side) -> Result<bool, String> {
        side.chain();
        let cap = side.capacity();
        let mut full = m.stale || side.changes.full;
        full |= ensure(backend, &mut m.keys, cap, 0)?;
        full |= ensure(backend, &mut m.live, cap / 32, 0)?;
        if side.chains() {
            full |= ensure(backend, &mut m.entry_of, cap, NONE)?;
            full |= ensure(backend, &mut m.wpos, cap, NONE)?;
            let wcap = side.wcapacity();
            full |= ensure(backend, &mut m.wslot, wcap, NONE)?;
            full |= ensure(backend, &mut m.wkeys, wcap, 0)?;
            full |= ensure(backend, &mut m.wlive, wcap / 32, 0)?;
            full |= m.table_bits != side.bits;
            // Tickets given out between full syncs never pass the slots posted since, so a
            // table of twice the slots stays at most half full.
            let ticket_bits = (2 * cap).next_power_of_two().trailing_zeros();
            full |= m.ticket_bits < ticket_bits;
            if full {
                side.renumber();
                let table_len = 1usize << side.bits;
                if m.table.as_ref().is_none_or(|t| t.len() != table_len) {
                    m.table = Some(backend.alloc(table_len, 0)?);
                }
                m.table_bits = side.bits;
                if m.ticket_bits < ticket_bits {
                    m.tickets = None;
                    m.ticket_bits = ticket_bits;
                }
                ensure(backend, &mut m.tickets, 1 << m.ticket_bits, NONE)?;
                backend.fill(m.tickets.as_mut().expect("made above"), NONE)?;
            }
        }
        Ok(full)
    }

    /// The arguments that bring `side` over into `m`.
    fn side_args(m: &SideMirror, side: &Side, full: bool) -> MsSide {
        let c = &side.changes;
        let (from, wfrom) = if full { (0, 0) } else { (c.from, c.wfrom) };
        let lists = !full;
        let count = |n: usize| if lists { n as u32 } else { 0 };
        MsSide {
            keys: addr(&m.keys),
            live: addr(&m.live),
            entry_of: addr(&m.entry_of),
            wpos: addr(&m.wpos),
            table: addr(&m.table),
            tickets: addr(&m.tickets),
            wslot: addr(&m.wslot),
            wkeys: addr(&m.wkeys),
            wlive: addr(&m.wlive),
            h_keys: side.keys.addr(),
            h_live: side.live.addr(),
            h_entry_of: side.entry_of.addr(),
            h_ticket: side.ticket.addr(),
            h_wpos: side.wpos.addr(),
            h_wslot: side.wslot.addr(),
            h_wkeys: side.wkeys.addr(),
            h_wlive: side.wlive.addr(),
            h_table: side.table.addr(),
            dirty: c.dirty.addr(),
            fronts: c.fronts.addr(),
            entries: c.entries.addr(),
            wdirty: c.wdirty.addr(),
            n_dirty: count(c.dirty.len()),
            n_fronts: count(c.fronts.len()),
            // A rebuilt copy's table starts empty: every entry the host has is in the list.
            n_entries: c.entries.len() as u32,
            n_wdirty: count(c.wdirty.len()),
            from: from as u32,
            to: side.end as u32,
            wfrom: wfrom as u32,
            wto: side.wend as u32,
            words: side.words() as u32,
            wwords: side.wend.div_ceil(32) as u32,
            table_bits: side.bits,
            ticket_bits: m.ticket_bits,
            chains: side.chains() as u32,
            pad: 0,
        }
    }

    /// Room in the mapped inputs and outputs for `count` messages.
    fn mapped(&mut self, count: usize, memory: &super::buf::Memory) -> Result<(), String> {
        let s = &mut self.scratch;
        let len = count.max(1).next_power_of_two();
        if s.h_items.as_ref().is_none_or(|h| h.len() < count.max(1)) {
            s.h_items = Some(Buf::new(memory, len, 0)?);
            s.out = Some(Buf::new(memory, len, NONE)?);
        }
        Ok(())
    }

    /// Room in the device scratch for `count` messages against `prq` (as last prepared).
    fn scratch(&mut self, prq: &Side, count: usize) -> Result<(), String> {
        let b = &mut self.backend;
        let s = &mut self.scratch;
        ensure(b, &mut s.items, count, 0)?;
        ensure(b, &mut s.res, count, NONE)?;
        ensure(b, &mut s.e_of, count, NONE)?;
        ensure(b, &mut s.rank, count, 0)?;
        ensure(b, &mut s.cand, count, NONE)?;
        ensure(b, &mut s.wfirst, count, NONE)?;
        ensure(b, &mut s.cnt, 1 << prq.bits, 0)?;
        ensure(b, &mut s.claimer, prq.capacity(), NONE)?;
        if ensure(b, &mut s.flags, count.div_ceil(1024).max(1), 0)? {
            // New flags read zero: the epochs start again above it.
            self.epoch = 0;
        }
        ensure(b, &mut s.ctl, 4, 0)?;
        Ok(())
    }

    fn burst_args(&self, job: &Job) -> MsBurst {
        let s = &self.scratch;
        MsBurst {
            h_items: s.h_items.as_ref().map_or(0, Buf::addr),
            out: s.out.as_ref().map_or(0, Buf::addr),
            res: addr(&s.res),
            items: addr(&s.items),
            e_of: addr(&s.e_of),
            rank: addr(&s.rank),
            cand: addr(&s.cand),
            wfirst: addr(&s.wfirst),
            cnt: addr(&s.cnt),
            claimer: addr(&s.claimer),
            flags: addr(&s.flags),
            ctl: addr(&s.ctl),
            pattern: job.pattern,
            count: job.count as u32,
            mode: job.mode,
            epoch: self.epoch,
            groups: job.groups,
        }
    }

    /// The keys of a burst's messages, written where the sync kernel reads them.
    pub fn items(
        &mut self,
        count: usize,
        memory: &super::buf::Memory,
    ) -> Result<&mut [u64], String> {
        self.mapped(count, memory)?;
        Ok(&mut self.scratch.h_items.as_mut().expect("made above")[..count])
    }

    /// What each message of the last burst took: a slot, `NONE`, or `PENDING`.
    pub fn out(&self, count: usize) -> &[u32] {
        &self.scratch.out.as_ref().expect("a burst ran")[..count]
    }

    /// Syncs both sides and runs `first` after the sync (a burst's first kernels, or a
    /// single scan) in one sequence; the sides' changes are taken as synced once it ran.
    /// Returns the arguments, for more rounds.
    fn sync_and(
        &mut self,
        prq: &mut Side,
        umq: &mut Side,
        job: Job,
        first: &[Kernel],
    ) -> Result<MsArgs, String> {
        let prq_full = Self::prepare(&mut self.backend, &mut self.prq, prq)?;
        let umq_full = Self::prepare(&mut self.backend, &mut self.umq, umq)?;
        self.scratch(prq, job.count)?;
        if first.contains(&Kernel::Rank) {
            self.epoch = self.epoch.wrapping_add(1).max(1);
        }
        let args = MsArgs {
            prq: Self::side_args(&self.prq, prq, prq_full),
            umq: Self::side_args(&self.umq, umq, umq_full),
            b: self.burst_args(&job),
        };
        let mut kernels = Vec::with_capacity(first.len() + 2);
        if prq_full && prq.chains() {
            kernels.push(Kernel::TableInit);
        }
        kernels.push(Kernel::Sync);
        kernels.extend_from_slice(first);
        self.backend.run(&kernels, &args)?;
        self.runs += 1;
        self.prq.stale = false;
        self.umq.stale = false;
        prq.changes.synced(prq.end, prq.wend);
        umq.changes.synced(umq.end, umq.wend);
        Ok(args)
    }

    /// A burst of the `count` message keys written by [`Mirror::items`] without wildcard
    /// receives queued: each message takes its key's next ticket (`UNORDERED`: any of them).
    pub fn lookup(
        &mut self,
        prq: &mut Side,
        umq: &mut Side,
        count: usize,
        mode: u32,
    ) -> Result<(), String> {
        let job = Job {
            count,
            mode,
            groups: 1,
            pattern: 0,
        };
        self.sync_and(prq, umq, job, &[Kernel::Rank]).map(drop)
    }

    /// A burst while wildcard receives are queued: rounds until every message settled or
    /// `rounds` ran; returns the rounds run.
    pub fn rounds(
        &mut self,
        prq: &mut Side,
        umq: &mut Side,
        count: usize,
        rounds: usize,
    ) -> Result<usize, String> {
        // Enough (message, word group) pairs to fill a large device, no group below a word.
        let wwords = prq.wend.div_ceil(32).max(1);
        let groups = (1usize << 17).div_ceil(count.max(1)).clamp(1, wwords) as u32;
        let round = [
            Kernel::Rank,
            Kernel::WScan,
            Kernel::RoundClaim,
            Kernel::RoundBreak,
            Kernel::RoundCommit,
        ];
        let job = Job {
            count,
            mode: ROUND,
            groups,
            pattern: 0,
        };
        let mut args = self.sync_and(prq, umq, job, &round)?;
        let mut ran = 1;
        while ran < rounds && self.out(count).contains(&PENDING) {
            self.epoch = self.epoch.wrapping_add(1).max(1);
            args.b.epoch = self.epoch;
            self.backend.run(&round, &args)?;
            ran += 1;
        }
        Ok(ran)
    }

    /// The earliest unexpected message that wildcard `pattern` fits, scanned on the device.
    pub fn scan(
        &mut self,
        prq: &mut Side,
        umq: &mut Side,
        pattern: u64,
        memory: &super::buf::Memory,
    ) -> Result<Option<u32>, String> {
        self.mapped(1, memory)?;
        let job = Job {
            count: 0,
            mode: ORDERED,
            groups: 1,
            pattern,
        };
        self.sync_and(prq, umq, job, &[Kernel::Scan1])?;
        let first = self.scratch.out.as_ref().expect("made above")[0];
        Ok((first != NONE).then_some(first))
    }

    /// The mirror's copy of `prq`'s live bits (tests compare it with the host's).
    #[cfg(test)]
    pub fn prq_live(&self) -> Option<&[u32]> {
        self.prq.live.as_ref().and_then(Dev::host)
    }

    /// The device table's (posted, consumed) of entry `e` (tests).
    #[cfg(test)]
    pub fn prq_counts(&self, e: usize) -> Option<(u32, u32)> {
        let t = self.prq.table.as_ref()?.host()?;
        Some((t[e].posted, t[e].consumed))
    }
}
