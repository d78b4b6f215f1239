//! `fuzzy`: one list per side, in blocks of 32 elements whose hashed 16-bit keys are compared 32
//! at a time, each candidate then verified (Dosanjh et al., CCGrid 2019; the `custommatch`
//! engines of Open MPI's ob1). A search costs two bytes per element passed, a removal leaves a
//! hole in its block, and a block is unlinked once empty (the last one is reused in place).

use super::store::fingerprint;
use super::{
    EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId, Simd, ANY_SOURCE, ANY_TAG,
};
use slab::Slab;

const BLOCK: usize = 32;
/// The key of an empty slot: never a fingerprint (1..=0xfffe) nor a wildcard (0).
const HOLE: u16 = u16::MAX;

/// The 32 keys fill one cache line.
#[repr(align(64))]
struct Keys([u16; BLOCK]);

struct Block<T> {
    keys: Keys,
    entries: [(T, u64); BLOCK],
    /// Bit i: slot i holds an element.
    live: u32,
    /// Slots used so far; a block only fills at its end.
    used: usize,
    next: Option<usize>,
}

/// Blocks linked oldest first; a slab keeps emptied blocks' memory for the next ones.
struct Side<T> {
    blocks: Slab<Block<T>>,
    head: Option<usize>,
    tail: Option<usize>,
    len: usize,
}

/// Where an element is: its block, the block before it, and its slot.
#[derive(Clone, Copy)]
struct Loc {
    block: usize,
    prev: Option<usize>,
    slot: usize,
}

impl<T: Copy> Side<T> {
    fn new() -> Self {
        Side {
            blocks: Slab::new(),
            head: None,
            tail: None,
            len: 0,
        }
    }

    fn push(&mut self, key: u16, item: T, id: u64) {
        let tail = match self.tail {
            Some(tail) if self.blocks[tail].used < BLOCK => tail,
            last => {
                let block = self.blocks.insert(Block {
                    keys: Keys([HOLE; BLOCK]),
                    entries: [(item, id); BLOCK],
                    live: 0,
                    used: 0,
                    next: None,
                });
                match last {
                    Some(last) => self.blocks[last].next = Some(block),
                    None => self.head = Some(block),
                }
                self.tail = Some(block);
                block
            }
        };
        let block = &mut self.blocks[tail];
        let slot = block.used;
        block.keys.0[slot] = key;
        block.entries[slot] = (item, id);
        block.live |= 1 << slot;
        block.used += 1;
        self.len += 1;
    }

    /// The oldest element that `hit` accepts among the slots whose key is `a` or `b` (all live
    /// slots if `a` is `HOLE`), and how many elements were passed.
    #[inline]
    fn find(&self, simd: Simd, a: u16, b: u16, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        let (mut at, mut prev) = (self.head, None);
        let mut depth = 0;
        while let Some(index) = at {
            let block = &self.blocks[index];
            let mut candidates = if a == HOLE {
                block.live
            } else {
                simd.mask32(&block.keys.0, a, b)
            };
            while candidates != 0 {
                let slot = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if hit(&block.entries[slot].0) {
                    let passed = block.live & (u32::MAX >> (31 - slot));
                    let found = Loc {
                        block: index,
                        prev,
                        slot,
                    };
                    return (Some(found), depth + passed.count_ones() as usize);
                }
            }
            depth += block.live.count_ones() as usize;
            (prev, at) = (at, block.next);
        }
        (None, depth)
    }

    fn id(&self, at: Loc) -> u64 {
        self.blocks[at.block].entries[at.slot].1
    }

    fn remove(&mut self, at: Loc) -> u64 {
        let block = &mut self.blocks[at.block];
        block.keys.0[at.slot] = HOLE;
        block.live &= !(1 << at.slot);
        self.len -= 1;
        let id = block.entries[at.slot].1;
        if block.live != 0 {
            return id;
        }
        if block.next.is_none() {
            // The last block is emptied in place and takes the next elements.
            block.keys.0[..block.used].fill(HOLE);
            block.used = 0;
        } else {
            // Any other empty block leaves the list; the slab keeps its memory.
            let next = block.next;
            match at.prev {
                Some(prev) => self.blocks[prev].next = next,
                None => self.head = next,
            }
            self.blocks.remove(at.block);
        }
        id
    }

    fn find_id(&self, id: u64) -> Option<Loc> {
        let (mut at, mut prev) = (self.head, None);
        while let Some(index) = at {
            let block = &self.blocks[index];
            let mut live = block.live;
            while live != 0 {
                let slot = live.trailing_zeros() as usize;
                live &= live - 1;
                if block.entries[slot].1 == id {
                    let found = Loc {
                        block: index,
                        prev,
                        slot,
                    };
                    return Some(found);
                }
            }
            (prev, at) = (at, block.next);
        }
        None
    }
}

pub struct Fuzzy {
    prq: Side<Pattern>,
    umq: Side<Envelope>,
    simd: Simd,
    stats: EngineStats,
    burst: Burst,
}

/// Bursts shorter than this arrive one by one: a search per message costs less than a walk of
/// the posted receives when few messages wait.
const BURST_WALK: usize = 8;

/// A burst's waiting messages by fingerprint, oldest first: an open-addressing table from a
/// fingerprint to the first message holding it, and a chain through the rest (kept between
/// bursts so that a burst allocates nothing).
#[derive(Default)]
struct Burst {
    table: Vec<(u16, u32)>,
    next: Vec<u32>,
    keys: Vec<u16>,
    /// The receive each message took, or `NONE`.
    taken: Vec<u64>,
}

const NONE: u32 = u32::MAX;
const NOT_TAKEN: u64 = u64::MAX;

impl Burst {
    /// Indexes `msgs` by fingerprint.
    fn index(&mut self, msgs: &[(Envelope, MsgId)]) {
        let size = (2 * msgs.len()).next_power_of_two();
        self.table.clear();
        self.table.resize(size, (HOLE, NONE));
        self.next.clear();
        self.next.resize(msgs.len(), NONE);
        self.keys.clear();
        self.keys
            .extend(msgs.iter().map(|(env, _)| fingerprint(env.source, env.tag)));
        self.taken.clear();
        self.taken.resize(msgs.len(), NOT_TAKEN);
        // Pushed newest first, so each chain runs oldest first.
        for i in (0..msgs.len()).rev() {
            let at = self.place(self.keys[i]);
            let (key, head) = &mut self.table[at];
            *key = self.keys[i];
            self.next[i] = *head;
            *head = i as u32;
        }
    }

    fn place(&self, key: u16) -> usize {
        let mask = self.table.len() - 1;
        let mut at = (key as usize).wrapping_mul(0x9e37) & mask;
        while self.table[at].0 != key && self.table[at].0 != HOLE {
            at = (at + 1) & mask;
        }
        at
    }

    /// The oldest waiting message with fingerprint `key` that `fits`; taken messages at the
    /// front of the chain are dropped from it on the way.
    fn take_keyed(&mut self, key: u16, fits: impl Fn(usize) -> bool) -> Option<usize> {
        let at = self.place(key);
        if self.table[at].0 != key {
            return None;
        }
        while self.table[at].1 != NONE && self.taken[self.table[at].1 as usize] != NOT_TAKEN {
            self.table[at].1 = self.next[self.table[at].1 as usize];
        }
        let mut i = self.table[at].1;
        while i != NONE {
            if self.taken[i as usize] == NOT_TAKEN && fits(i as usize) {
                return Some(i as usize);
            }
            i = self.next[i as usize];
        }
        None
    }
}

impl Fuzzy {
    /// Compares keys at the width of `simd` (or the widest this CPU has, if it lacks that one).
    pub fn new(simd: Simd) -> Self {
        let mut stats = EngineStats::default();
        stats.set_queues(2);
        Fuzzy {
            prq: Side::new(),
            umq: Side::new(),
            simd: simd.usable(),
            stats,
            burst: Burst::default(),
        }
    }

    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        // Messages have exact keys; a wildcard receive looks at every message.
        let key = if want.source == ANY_SOURCE || want.tag == ANY_TAG {
            HOLE
        } else {
            fingerprint(want.source, want.tag)
        };
        let (found, depth) = self.umq.find(self.simd, key, key, |env| want.matches(env));
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let at = found?;
        Some(if taken {
            self.umq.remove(at)
        } else {
            self.umq.id(at)
        })
    }
}

impl MatchEngine for Fuzzy {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        let found = self.take_unexpected(&want, true);
        if found.is_none() {
            let key = fingerprint(want.source, want.tag);
            self.prq.push(key, want, recv);
        }
        found
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        // Wildcard receives have key 0 and are candidates for every message.
        let key = fingerprint(env.source, env.tag);
        let (found, depth) = self.prq.find(self.simd, key, 0, |want| want.matches(&env));
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        match found {
            Some(at) => Some(self.prq.remove(at)),
            None => {
                self.umq.push(key, env, msg);
                None
            }
        }
    }

    /// The matrix of Klenk et al. 2017 read by columns: the posted receives, oldest first, each take
    /// the oldest waiting message of the burst they fit, found by fingerprint (a wildcard
    /// receive looks at every waiting message). With earliest-first on both sides the matching
    /// is the one arrivals one by one give, and one walk of the receives replaces a search per
    /// message. Depth counts the receives the walk passed.
    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        if msgs.len() < BURST_WALK || self.prq.len == 0 {
            matched.extend(msgs.iter().map(|&(env, msg)| self.arrive(env, msg)));
            return;
        }
        self.burst.index(msgs);
        let (mut waiting, mut oldest_waiting) = (msgs.len(), 0);
        let (mut at, mut prev) = (self.prq.head, None);
        let mut passed = 0;
        while let (Some(index), true) = (at, waiting > 0) {
            let next = self.prq.blocks[index].next;
            let mut live = self.prq.blocks[index].live;
            let mut emptied = false;
            while live != 0 && waiting > 0 {
                let slot = live.trailing_zeros() as usize;
                live &= live - 1;
                passed += 1;
                let block = &self.prq.blocks[index];
                let (want, recv) = block.entries[slot];
                let key = block.keys.0[slot];
                let fits = |i: usize| want.matches(&msgs[i].0);
                let found = if key == 0 {
                    (oldest_waiting..msgs.len())
                        .find(|&i| self.burst.taken[i] == NOT_TAKEN && fits(i))
                } else {
                    self.burst.take_keyed(key, fits)
                };
                let Some(m) = found else { continue };
                self.burst.taken[m] = recv;
                waiting -= 1;
                while oldest_waiting < msgs.len() && self.burst.taken[oldest_waiting] != NOT_TAKEN {
                    oldest_waiting += 1;
                }
                self.stats.traffic(msgs[m].0.class).arrival(passed, true);
                let place = Loc {
                    block: index,
                    prev,
                    slot,
                };
                emptied = self.prq.blocks[index].live & !(1 << slot) == 0 && next.is_some();
                self.prq.remove(place);
                if emptied {
                    break;
                }
            }
            // An emptied block left the list: the one before it stays the previous one.
            if !emptied {
                prev = at;
            }
            at = next;
        }
        for (m, &(env, msg)) in msgs.iter().enumerate() {
            let recv = self.burst.taken[m];
            if recv == NOT_TAKEN {
                self.stats.traffic(env.class).arrival(passed, false);
                self.umq.push(fingerprint(env.source, env.tag), env, msg);
                matched.push(None);
            } else {
                matched.push(Some(recv));
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        let found = self.prq.find_id(recv);
        found.map(|at| self.prq.remove(at)).is_some()
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.len, self.umq.len)
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::Class;

    fn msg(source: i32, tag: i32) -> Envelope {
        Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    fn recv(tag: i32) -> Pattern {
        Pattern {
            source: 1,
            tag,
            class: Class::PointToPoint,
        }
    }

    /// Across blocks, at every width: the earliest match, depth counting only live elements
    /// passed, emptied blocks unlinked and the last one reused.
    #[test]
    fn blocks_match_in_order_and_count_live_elements() {
        for simd in Simd::available_all() {
            let mut fuzzy = Fuzzy::new(simd);
            for tag in 0..100 {
                assert_eq!(fuzzy.post(recv(tag % 50), tag as u64), None);
            }
            assert_eq!(fuzzy.prq.blocks.len(), 4);
            // Tag 49 twice: the first in block 1 behind 49 live elements, then the second.
            assert_eq!(fuzzy.arrive(msg(1, 49), 0), Some(49));
            assert_eq!(fuzzy.stats().point_to_point.prq.depth_max, 50);
            assert_eq!(fuzzy.arrive(msg(1, 49), 0), Some(99));
            assert_eq!(fuzzy.stats().point_to_point.prq.depth_total, 50 + 99);
            // Emptying the first block unlinks it.
            for tag in 0..32 {
                assert_eq!(fuzzy.arrive(msg(1, tag), 0), Some(tag as u64));
            }
            assert_eq!(fuzzy.prq.blocks.len(), 3);
            for tag in (32..49).chain(0..49) {
                assert!(
                    fuzzy.arrive(msg(1, tag % 50), 0).is_some(),
                    "{simd:?} {tag}"
                );
            }
            assert_eq!((fuzzy.queued(), fuzzy.prq.blocks.len()), ((0, 0), 1));
            assert_eq!(fuzzy.post(recv(7), 5), None);
            assert_eq!(
                fuzzy.prq.blocks.len(),
                1,
                "the emptied last block is reused"
            );
        }
    }
}
