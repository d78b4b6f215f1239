//! One side of a communicator's queues (posted receives or unexpected messages): a log of
//! packed keys in arrival order with one live bit per slot, which the kernels scan, and a hash
//! table from each key to the chain of its live slots, oldest first, which the CPU and the
//! lookup kernel follow. Wildcard patterns are keys of their own (all-ones fields), so an
//! arrival finds the earliest receive it fits among at most four chain heads.

use super::buf::{Buf, Memory};
use super::host;

pub(super) const NONE: u32 = u32::MAX;
const SOURCE: u64 = 0x7fff_ffff;
const TAG: u64 = 0xffff_ffff << 32;
/// An unused table entry (tag -2, which no receive or message carries); kernels.h's MS_EMPTY.
const EMPTY: u64 = 0xffff_fffe_7fff_ffff;
const FIRST_SLOTS: usize = 64;
const MIN_TABLE_BITS: u32 = 7;

/// kernels.h's `ms_entry`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct Entry {
    pub key: u64,
    pub head: u32,
    pub tail: u32,
}

const UNUSED: Entry = Entry {
    key: EMPTY,
    head: NONE,
    tail: NONE,
};

/// Which wildcards a key holds: ANY_SOURCE only, ANY_TAG only, both.
pub(super) fn shape(key: u64) -> Option<usize> {
    match (key & SOURCE == SOURCE, key & TAG == TAG) {
        (false, false) => None,
        (true, false) => Some(0),
        (false, true) => Some(1),
        (true, true) => Some(2),
    }
}

/// The keys of patterns of each shape that fit a message key.
pub(super) fn wildcard_keys(message: u64) -> [u64; 3] {
    [message | SOURCE, message | TAG, message | SOURCE | TAG]
}

pub(super) struct Side {
    pub keys: Buf<u64>,
    pub live: Buf<u32>,
    pub next: Buf<u32>,
    pub table: Buf<Entry>,
    pub bits: u32,
    ids: Vec<u64>,
    prev: Vec<u32>,
    entry_of: Vec<u32>,
    /// Table entries in use, those whose chain ran empty included.
    entries: usize,
    /// First word of `live` that may have a bit set.
    pub head_word: usize,
    /// Slots in use, live or not.
    pub end: usize,
    pub len: usize,
    /// Live patterns of each wildcard shape.
    pub wild: [usize; 3],
    memory: Memory,
}

impl Side {
    pub fn new(memory: Memory) -> Side {
        let mut side = Side {
            keys: Buf::Host(Vec::new()),
            live: Buf::Host(Vec::new()),
            next: Buf::Host(Vec::new()),
            table: Buf::Host(Vec::new()),
            bits: MIN_TABLE_BITS,
            ids: Vec::new(),
            prev: Vec::new(),
            entry_of: Vec::new(),
            entries: 0,
            head_word: 0,
            end: 0,
            len: 0,
            wild: [0; 3],
            memory,
        };
        side.resize(FIRST_SLOTS);
        side.rebuild_table();
        side
    }

    pub fn words(&self) -> usize {
        self.end.div_ceil(32)
    }

    pub fn is_live(&self, slot: u32) -> bool {
        self.live[slot as usize / 32] & (1 << (slot % 32)) != 0
    }

    pub fn id(&self, slot: u32) -> u64 {
        self.ids[slot as usize]
    }

    fn resize(&mut self, slots: usize) {
        let memory = &mut self.memory;
        self.keys = realloc(memory, &self.keys, slots, 0);
        self.live = realloc(memory, &self.live, slots / 32, 0);
        self.next = realloc(memory, &self.next, slots, NONE);
        self.ids.resize(slots, 0);
        self.prev.resize(slots, NONE);
        self.entry_of.resize(slots, NONE);
    }

    /// The table rebuilt from the live slots in order, at least four entries per live element
    /// (so at most half full until the next rebuild).
    fn rebuild_table(&mut self) {
        self.bits = MIN_TABLE_BITS.max((4 * (self.len + 1)).next_power_of_two().trailing_zeros());
        self.table = realloc(
            &mut self.memory,
            &Buf::Host(Vec::new()),
            1 << self.bits,
            UNUSED,
        );
        self.entries = 0;
        for word in self.head_word..self.words() {
            let mut bits = self.live[word];
            while bits != 0 {
                let slot = (word * 32) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                self.link(slot);
            }
        }
    }

    /// The entry of `key`, made if absent.
    fn entry(&mut self, key: u64) -> u32 {
        let e = place(&self.table, self.bits, key);
        let entry = &mut self.table[e as usize];
        if entry.key == EMPTY {
            *entry = Entry { key, ..UNUSED };
            self.entries += 1;
        }
        e
    }

    /// Appends `slot` to the chain of its key.
    fn link(&mut self, slot: u32) {
        let e = self.entry(self.keys[slot as usize]);
        let tail = self.table[e as usize].tail;
        self.prev[slot as usize] = tail;
        self.next[slot as usize] = NONE;
        if tail == NONE {
            self.table[e as usize].head = slot;
        } else {
            self.next[tail as usize] = slot;
        }
        self.table[e as usize].tail = slot;
        self.entry_of[slot as usize] = e;
    }

    fn unlink(&mut self, slot: u32) {
        let e = self.entry_of[slot as usize] as usize;
        let (prev, next) = (self.prev[slot as usize], self.next[slot as usize]);
        if prev == NONE {
            self.table[e].head = next;
        } else {
            self.next[prev as usize] = next;
        }
        if next == NONE {
            self.table[e].tail = prev;
        } else {
            self.prev[next as usize] = prev;
        }
    }

    /// Queues `key` as the newest element.
    pub fn push(&mut self, key: u64, id: u64) {
        if self.end == self.keys.len() {
            if 2 * self.len <= self.end {
                self.compact();
            } else {
                self.resize(2 * self.keys.len());
            }
        }
        if 2 * (self.entries + 1) > self.table.len() {
            self.rebuild_table();
        }
        let slot = self.end as u32;
        self.keys[self.end] = key;
        self.ids[self.end] = id;
        self.live[self.end / 32] |= 1 << (self.end % 32);
        self.end += 1;
        self.len += 1;
        self.link(slot);
        if let Some(shape) = shape(key) {
            self.wild[shape] += 1;
        }
    }

    /// Takes a live slot out; returns its id.
    pub fn remove(&mut self, slot: u32) -> u64 {
        debug_assert!(self.is_live(slot));
        self.unlink(slot);
        self.live[slot as usize / 32] &= !(1 << (slot % 32));
        self.len -= 1;
        if let Some(shape) = shape(self.keys[slot as usize]) {
            self.wild[shape] -= 1;
        }
        if self.len == 0 {
            self.head_word = 0;
            self.end = 0;
        } else {
            while self.live[self.head_word] == 0 {
                self.head_word += 1;
            }
        }
        self.ids[slot as usize]
    }

    /// The oldest live element with exactly this key.
    pub fn oldest(&self, key: u64) -> Option<u32> {
        let e = &self.table[place(&self.table, self.bits, key) as usize];
        (e.key == key && e.head != NONE).then_some(e.head)
    }

    /// The earliest live element from word `word` on that fits `item` (a message when this side
    /// holds patterns), and the live elements passed.
    pub fn first_fit(&self, word: usize, item: u64, patterns: bool) -> (Option<u32>, usize) {
        host::first(&self.keys, &self.live, word, self.words(), item, patterns)
    }

    pub fn find_id(&self, id: u64) -> Option<u32> {
        (self.head_word * 32..self.end)
            .map(|slot| slot as u32)
            .find(|&slot| self.ids[slot as usize] == id && self.is_live(slot))
    }

    /// Moves the live elements to the front, in order, and rebuilds the chains.
    fn compact(&mut self) {
        let mut to = 0;
        for word in self.head_word..self.words() {
            let mut bits = std::mem::take(&mut self.live[word]);
            while bits != 0 {
                let from = word * 32 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.keys[to] = self.keys[from];
                self.ids[to] = self.ids[from];
                to += 1;
            }
        }
        for slot in 0..to {
            self.live[slot / 32] |= 1 << (slot % 32);
        }
        self.head_word = 0;
        self.end = to;
        self.rebuild_table();
    }
}

/// `old`'s elements in a buffer of `len` in `memory`; when mapped memory runs out, the side
/// moves on to host memory (and so to the CPU tier).
fn realloc<T: Copy>(memory: &mut Memory, old: &Buf<T>, len: usize, fill: T) -> Buf<T> {
    old.resized(memory, len, fill).unwrap_or_else(|_| {
        *memory = Memory::Host;
        old.resized_on_host(len, fill)
    })
}

/// kernels.h's `ms_place`, inlined for the CPU tier (a call into the host build costs a sixth
/// of its speed); the lookup kernel's tests fail if the two ever differ.
#[inline]
fn place(table: &[Entry], bits: u32, key: u64) -> u32 {
    let mask = (1u32 << bits) - 1;
    let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as u32;
    while table[i as usize].key != key && table[i as usize].key != EMPTY {
        i = (i + 1) & mask;
    }
    i
}
