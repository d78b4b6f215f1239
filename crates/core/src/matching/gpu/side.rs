//! One side of a communicator's queues (posted receives or unexpected messages), as the host
//! keeps it: a log of packed keys in arrival order with one live bit per slot, and a hash table
//! from each key to the chain of its slots, oldest first, which the CPU tier follows. Wildcard
//! patterns are keys of their own (all-ones fields), so an arrival finds the earliest receive
//! it fits among at most four chain heads.
//!
//! The posted side also gives each receive a ticket (its place in its key's chain) and keeps
//! its wildcard receives in a log of their own, for the device's copy (kernels.h). The device
//! removes only chain fronts and writes which slots it took; the host clears their live bits
//! and leaves them in their chains, which drop dead fronts when next followed. Whatever the
//! host changes is noted in `changes` for the next sync of the copy.

use super::buf::{Buf, List, Memory};
use super::host;

pub(super) const NONE: u32 = u32::MAX;
const SOURCE: u64 = 0x7fff_ffff;
const TAG: u64 = 0xffff_ffff << 32;
/// An unused table entry (tag -2, which no receive or message carries); kernels.h's MS_EMPTY.
const EMPTY: u64 = 0xffff_fffe_7fff_ffff;
const FIRST_SLOTS: usize = 64;
const MIN_TABLE_BITS: u32 = 7;

/// kernels.h's `ms_host_entry`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub(super) struct Entry {
    pub key: u64,
    pub head: u32,
    pub tail: u32,
    /// Tickets given out since the last renumbering.
    pub posted: u32,
    /// The table's epoch the entry was made in: entries of older epochs are empty, so a
    /// rebuild of the same size clears the table by counting on.
    epoch: u32,
}

const UNUSED: Entry = Entry {
    key: EMPTY,
    head: NONE,
    tail: NONE,
    posted: 0,
    epoch: 0,
};

/// A slot's neighbours in its key's chain.
#[derive(Clone, Copy)]
struct Links {
    prev: u32,
    next: u32,
}

const UNLINKED: Links = Links {
    prev: NONE,
    next: NONE,
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

/// What the host changed since the device's copy was last synced.
pub(super) struct Changes {
    /// Slots from here on, and wildcard log positions from `wfrom` on, are new to the copy.
    pub from: usize,
    pub wfrom: usize,
    /// Live words below `from` that the host rewrote.
    pub dirty: List<u32>,
    /// Table entries whose front receive the host removed, once per removal.
    pub fronts: List<u32>,
    /// Table entries the host made (since its last sync, or all of them since the table was
    /// last rebuilt: a rebuilt copy starts from an empty table).
    pub entries: List<u32>,
    /// Wildcard live words below `wfrom` that the host rewrote.
    pub wdirty: List<u32>,
    /// The copy must be rebuilt whole (slots moved, the table changed, a receive left from the
    /// middle of its chain, or the lists grew past the queue).
    pub full: bool,
    /// Whether there is a copy to keep up to date at all.
    tracked: bool,
}

impl Changes {
    fn new(tracked: bool) -> Self {
        Changes {
            from: 0,
            wfrom: 0,
            dirty: List::new(),
            fronts: List::new(),
            entries: List::new(),
            wdirty: List::new(),
            full: true,
            tracked,
        }
    }

    /// The copy holds everything up to `end` and `wend`.
    pub fn synced(&mut self, end: usize, wend: usize) {
        self.from = end;
        self.wfrom = wend;
        self.clear_lists();
        self.full = false;
    }

    fn clear_lists(&mut self) {
        self.dirty.clear();
        self.fronts.clear();
        self.entries.clear();
        self.wdirty.clear();
    }

    fn rebuild(&mut self) {
        self.full = true;
        self.clear_lists();
    }

    /// No copy is kept from now on.
    pub fn untrack(&mut self) {
        self.tracked = false;
        self.clear_lists();
    }

    /// Notes list entries only while they help: once the copy must be rebuilt they are moot.
    fn noting(&self) -> bool {
        self.tracked && !self.full
    }
}

pub(super) struct Side {
    pub keys: Buf<u64>,
    pub live: Buf<u32>,
    /// Per slot, each in an array of its own (a search touches a field or two of a random
    /// slot, which stays in cache for longer queues this way): its table entry, its ticket
    /// (its place in its key's chain, posted side), its place in the wildcard log (a wildcard
    /// receive), which the device reads; its id and its neighbours in its chain.
    pub entry_of: Buf<u32>,
    pub ticket: Buf<u32>,
    pub wpos: Buf<u32>,
    ids: Vec<u64>,
    links: Vec<Links>,
    pub table: Buf<Entry>,
    pub bits: u32,
    /// Table entries in use, those whose chain ran empty included.
    entries: usize,
    /// Entries of this epoch are the table's; others are empty.
    epoch: u32,
    /// Slots below this are chained.
    chained: usize,
    /// The wildcard log: slots of wildcard receives in posting order, their keys, live bits.
    pub wslot: Buf<u32>,
    pub wkeys: Buf<u64>,
    pub wlive: Buf<u32>,
    pub wend: usize,
    wlen: usize,
    /// First word of `live` that may have a bit set.
    pub head_word: usize,
    /// Slots in use, live or not.
    pub end: usize,
    pub len: usize,
    /// Live patterns of each wildcard shape.
    pub wild: [usize; 3],
    pub changes: Changes,
    /// The device keeps this side's chains (tickets and the wildcard log): the posted side.
    chains: bool,
    memory: Memory,
}

impl Side {
    /// A side in `memory`; `chains` for the posted side; `tracked` when a copy is kept.
    pub fn new(memory: Memory, chains: bool, tracked: bool) -> Side {
        let mut side = Side {
            keys: Buf::empty(),
            live: Buf::empty(),
            entry_of: Buf::empty(),
            ticket: Buf::empty(),
            wpos: Buf::empty(),
            ids: Vec::new(),
            links: Vec::new(),
            table: Buf::empty(),
            bits: MIN_TABLE_BITS,
            entries: 0,
            epoch: 1,
            chained: 0,
            wslot: Buf::empty(),
            wkeys: Buf::empty(),
            wlive: Buf::empty(),
            wend: 0,
            wlen: 0,
            head_word: 0,
            end: 0,
            len: 0,
            wild: [0; 3],
            changes: Changes::new(tracked),
            chains,
            memory,
        };
        side.resize(FIRST_SLOTS);
        side.wresize(if chains { FIRST_SLOTS } else { 0 });
        side.rebuild_table();
        side
    }

    pub fn chains(&self) -> bool {
        self.chains
    }

    /// Slots the arrays hold.
    pub fn capacity(&self) -> usize {
        self.keys.len()
    }

    pub fn wcapacity(&self) -> usize {
        self.wslot.len()
    }

    /// Every array the device reads is in pinned memory (it may have run out).
    pub fn pinned(&self) -> bool {
        matches!(self.memory, Memory::Pinned(_))
    }

    pub fn words(&self) -> usize {
        self.end.div_ceil(32)
    }

    #[inline]
    pub fn is_live(&self, slot: u32) -> bool {
        self.live[slot as usize / 32] & (1 << (slot % 32)) != 0
    }

    pub fn id(&self, slot: u32) -> u64 {
        self.ids[slot as usize]
    }

    /// The live slots of entry `e`'s key (tests; the side is chained).
    #[cfg(test)]
    pub fn live_in(&self, e: usize) -> usize {
        (0..self.end as u32)
            .filter(|&s| self.is_live(s) && self.entry_of[s as usize] as usize == e)
            .count()
    }

    /// Table entries holding a key (tests).
    #[cfg(test)]
    pub fn used_entries(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.table.len()).filter(|&e| self.table[e].epoch == self.epoch)
    }

    fn resize(&mut self, slots: usize) {
        let memory = &mut self.memory;
        self.keys = self.keys.resized(memory, slots, 0);
        self.live = self.live.resized(memory, slots / 32, 0);
        self.entry_of = self.entry_of.resized(memory, slots, NONE);
        if self.chains {
            self.ticket = self.ticket.resized(memory, slots, NONE);
            self.wpos = self.wpos.resized(memory, slots, NONE);
        }
        self.ids.resize(slots, 0);
        self.links.resize(slots, UNLINKED);
        self.changes.rebuild();
    }

    fn wresize(&mut self, len: usize) {
        let memory = &mut self.memory;
        self.wslot = self.wslot.resized(memory, len, NONE);
        self.wkeys = self.wkeys.resized(memory, len, 0);
        self.wlive = self.wlive.resized(memory, len / 32, 0);
        self.changes.rebuild();
    }

    /// The table rebuilt from the live slots in order, never smaller than it was and at least
    /// two entries per live element (so at most half full, and rebuilt again at three quarters);
    /// chains lose their dead slots and tickets start again from 0 in each chain.
    fn rebuild_table(&mut self) {
        let needed = (2 * self.len).next_power_of_two().trailing_zeros();
        self.bits = self.bits.max(needed).max(MIN_TABLE_BITS);
        self.relink();
    }

    /// Before the device's copy is rebuilt whole: chains and tickets as if every live receive
    /// had just been posted in order, the table keeping its size.
    pub fn renumber(&mut self) {
        self.relink();
    }

    /// The table (of `bits`) rebuilt from the live slots.
    fn relink(&mut self) {
        self.changes.rebuild();
        if self.table.len() == 1 << self.bits {
            if self.epoch == u32::MAX {
                self.table.fill(UNUSED);
                self.epoch = 0;
            }
            self.epoch += 1;
        } else {
            self.table = Buf::new(&self.memory, 1 << self.bits, UNUSED).unwrap_or_else(|_| {
                self.memory = Memory::Host;
                Buf::new(&Memory::Host, 1 << self.bits, UNUSED).expect("host memory")
            });
        }
        self.entries = 0;
        if self.chains {
            self.ticket[..self.end].fill(NONE);
        }
        for word in self.head_word..self.words() {
            let mut bits = self.live[word];
            while bits != 0 {
                let slot = (word * 32) as u32 + bits.trailing_zeros();
                bits &= bits - 1;
                self.link(slot);
            }
        }
        self.chained = self.end;
    }

    /// Chains the slots posted since the last search (a post only appends: the chains, their
    /// tickets and new table entries are made when first needed, or before a sync).
    #[inline]
    pub fn chain(&mut self) {
        if self.chained < self.end {
            self.chain_posted();
        }
    }

    fn chain_posted(&mut self) {
        while self.chained < self.end {
            if 4 * (self.entries + 1) > 3 * self.table.len() {
                // The rebuild chains every live slot, those posted since included.
                self.rebuild_table();
                return;
            }
            let slot = self.chained as u32;
            self.chained += 1;
            if self.is_live(slot) {
                self.link(slot);
            }
        }
    }

    /// The entry of `key`, made if absent.
    fn entry(&mut self, key: u64) -> u32 {
        let e = place(&self.table, self.bits, key, self.epoch);
        if self.table[e as usize].epoch != self.epoch {
            self.table[e as usize] = Entry {
                key,
                epoch: self.epoch,
                ..UNUSED
            };
            self.entries += 1;
            if self.chains && self.changes.tracked {
                self.changes.entries.push(&mut self.memory, e);
            }
        }
        e
    }

    /// Appends `slot` to the chain of its key, with the chain's next ticket.
    fn link(&mut self, slot: u32) {
        let e = self.entry(self.keys[slot as usize]) as usize;
        let entry = &mut self.table[e];
        let tail = entry.tail;
        if tail == NONE {
            entry.head = slot;
        }
        entry.tail = slot;
        let ticket = entry.posted;
        entry.posted += 1;
        self.links[slot as usize] = Links {
            prev: tail,
            next: NONE,
        };
        self.entry_of[slot as usize] = e as u32;
        if self.chains {
            self.ticket[slot as usize] = ticket;
        }
        if tail != NONE {
            self.links[tail as usize].next = slot;
        }
    }

    /// Drops the dead slots at the front of entry `e`'s chain (the device took them).
    #[inline]
    fn skip_dead_front(&mut self, e: usize) {
        let head = self.table[e].head;
        if head != NONE && !self.is_live(head) {
            self.drop_dead_front(e, head);
        }
    }

    #[cold]
    fn drop_dead_front(&mut self, e: usize, mut head: u32) {
        while head != NONE && !self.is_live(head) {
            head = self.links[head as usize].next;
        }
        self.table[e].head = head;
        if head == NONE {
            self.table[e].tail = NONE;
        } else {
            self.links[head as usize].prev = NONE;
        }
    }

    fn unlink(&mut self, slot: u32) {
        let e = self.entry_of[slot as usize] as usize;
        let Links { prev, next } = self.links[slot as usize];
        if prev == NONE {
            self.table[e].head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NONE {
            self.table[e].tail = prev;
        } else {
            self.links[next as usize].prev = prev;
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
        let slot = self.end as u32;
        self.keys[self.end] = key;
        self.ids[self.end] = id;
        self.live[self.end / 32] |= 1 << (self.end % 32);
        self.end += 1;
        self.len += 1;
        let Some(shape) = shape(key) else {
            return;
        };
        self.wild[shape] += 1;
        if self.chains {
            self.wlog_push(slot, key);
        }
    }

    fn wlog_push(&mut self, slot: u32, key: u64) {
        if self.wend == self.wslot.len() {
            if 2 * self.wlen <= self.wend {
                self.wcompact();
            } else {
                self.wresize(2 * self.wslot.len());
            }
        }
        let at = self.wend;
        self.wslot[at] = slot;
        self.wkeys[at] = key;
        self.wlive[at / 32] |= 1 << (at % 32);
        self.wpos[slot as usize] = at as u32;
        self.wend += 1;
        self.wlen += 1;
    }

    /// The wildcard log with its live positions moved to the front, in order.
    fn wcompact(&mut self) {
        let mut to = 0;
        for from in 0..self.wend {
            if self.wlive[from / 32] & (1 << (from % 32)) == 0 {
                continue;
            }
            self.wlive[from / 32] &= !(1 << (from % 32));
            let slot = self.wslot[from];
            self.wslot[to] = slot;
            self.wkeys[to] = self.wkeys[from];
            self.wlive[to / 32] |= 1 << (to % 32);
            self.wpos[slot as usize] = to as u32;
            to += 1;
        }
        self.wend = to;
        self.changes.rebuild();
    }

    /// The host takes a live slot out; returns its id.
    pub fn remove(&mut self, slot: u32) -> u64 {
        debug_assert!(self.is_live(slot));
        self.chain();
        let e = self.entry_of[slot as usize] as usize;
        // Whether the device's count of receives taken from the front can say it.
        let front = self.chains && self.changes.noting() && {
            self.skip_dead_front(e);
            self.table[e].head == slot
        };
        self.unlink(slot);
        self.clear_live(slot, true);
        self.advance_head();
        if self.changes.noting() {
            if (slot as usize) < self.changes.from {
                self.changes.dirty.push(&mut self.memory, slot / 32);
            }
            if self.chains {
                if front {
                    self.changes.fronts.push(&mut self.memory, e as u32);
                } else {
                    self.changes.rebuild();
                }
            }
            let noted = self.changes.dirty.len() + self.changes.fronts.len();
            if noted > self.keys.len() {
                self.changes.rebuild();
            }
        }
        self.ids[slot as usize]
    }

    /// The device took `slot` (and cleared its bits in the copy): the same here, its chain
    /// left to drop it when next followed. Returns its id.
    pub fn claimed(&mut self, slot: u32) -> u64 {
        self.clear_live(slot, false);
        self.ids[slot as usize]
    }

    /// Clears a live slot's bits and counts; `note`: the copy does not know yet.
    fn clear_live(&mut self, slot: u32, note: bool) {
        self.live[slot as usize / 32] &= !(1 << (slot % 32));
        self.len -= 1;
        if self.len == 0 {
            self.drained();
            return;
        }
        if let Some(shape) = shape(self.keys[slot as usize]) {
            self.wild[shape] -= 1;
            if self.chains {
                let at = self.wpos[slot as usize] as usize;
                self.wlive[at / 32] &= !(1 << (at % 32));
                self.wlen -= 1;
                if note && self.changes.noting() && at < self.changes.wfrom {
                    self.changes.wdirty.push(&mut self.memory, at as u32 / 32);
                }
            }
        }
    }

    /// The last live slot left: the log starts again from slot 0, the table keeps its size and
    /// drops its keys by moving to a new epoch, and the device's copy is rebuilt (from nothing)
    /// at its next sync.
    fn drained(&mut self) {
        let (words, wwords) = (self.words(), self.wend.div_ceil(32));
        self.live[..words].fill(0);
        self.wild = [0; 3];
        if self.chains {
            self.wlive[..wwords].fill(0);
        }
        (self.end, self.chained, self.head_word, self.wend, self.wlen) = (0, 0, 0, 0, 0);
        self.relink();
    }

    /// Moves `head_word` past whole words without live slots (after removals); the word new
    /// slots go to stays in reach.
    pub fn advance_head(&mut self) {
        while self.head_word < self.end / 32 && self.live[self.head_word] == 0 {
            self.head_word += 1;
        }
    }

    /// The oldest live element with exactly this key.
    pub fn oldest(&mut self, key: u64) -> Option<u32> {
        self.chain();
        let e = place(&self.table, self.bits, key, self.epoch) as usize;
        if self.table[e].epoch != self.epoch {
            return None;
        }
        self.skip_dead_front(e);
        let head = self.table[e].head;
        (head != NONE).then_some(head)
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

    /// Moves the live elements to the front, in order, and rebuilds the chains and the
    /// wildcard log.
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
        for word in 0..self.head_word {
            self.live[word] = 0;
        }
        for slot in 0..to {
            self.live[slot / 32] |= 1 << (slot % 32);
        }
        self.head_word = 0;
        self.end = to;
        if self.chains {
            self.wlive.fill(0);
            (self.wend, self.wlen) = (0, 0);
            for slot in 0..to {
                let key = self.keys[slot];
                if shape(key).is_some() {
                    self.wlog_push(slot as u32, key);
                }
            }
        }
        self.rebuild_table();
    }
}

/// kernels.h's `ms_find` on the host's table, where entries of another epoch are empty (the
/// device's copy holds only this epoch's): the entry of `key`, or the empty entry where it
/// goes. The kernels' tests fail if the two ever differ.
#[inline]
fn place(table: &[Entry], bits: u32, key: u64, epoch: u32) -> u32 {
    let mask = (1u32 << bits) - 1;
    let mut i = (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as u32;
    while table[i as usize].epoch == epoch && table[i as usize].key != key {
        i = (i + 1) & mask;
    }
    i
}
