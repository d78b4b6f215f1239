//! The scan/reduce bit-matrix matcher of Klenk et al. (2017, §V) on the CPU.
//!
//! Queued elements are packed 64-bit keys in arrays, with one live bit each, 64 to a word. A vote
//! compares one key with 64 elements at once and yields one bit per pair; the earliest-first
//! reduce takes the lowest set bit of `vote & live`.

use super::{
    Class, EngineStats, Envelope, MatchEngine, MsgId, Pattern, RecvId, Simd, ANY_SOURCE, ANY_TAG,
};

const SOURCE: u64 = 0x7fff_ffff;
const COLLECTIVE: u64 = 1 << 31;
const TAG: u64 = 0xffff_ffff << 32;

/// Tag in the high half, source in the low 31 bits (ranks are never negative), the traffic type
/// in bit 31.
#[inline]
fn pack(source: i32, tag: i32, class: Class) -> u64 {
    let collective = if class.is_collective() { COLLECTIVE } else { 0 };
    ((tag as u32 as u64) << 32) | (source as u32 as u64 & SOURCE) | collective
}

#[inline]
fn envelope_key(env: &Envelope) -> u64 {
    debug_assert!(env.source >= 0, "envelope with a wildcard source");
    pack(env.source, env.tag, env.class)
}

/// The key and the mask of the fields a pattern cares about: `message & mask == key` is a match.
#[inline]
fn pattern_key(want: &Pattern) -> (u64, u64) {
    let source = if want.source == ANY_SOURCE { 0 } else { SOURCE };
    let tag = if want.tag == ANY_TAG { 0 } else { TAG };
    let mask = source | tag | COLLECTIVE;
    (pack(want.source, want.tag, want.class) & mask, mask)
}

/// Bit i: message `keys[i]` fits the pattern (`key`, `mask`).
#[inline(always)]
fn vote_messages(keys: &[u64; 64], key: u64, mask: u64) -> u64 {
    let mut bits = 0;
    for (i, &k) in keys.iter().enumerate() {
        bits |= (((k & mask) == key) as u64) << i;
    }
    bits
}

/// Bit i: pattern (`keys[i]`, `masks[i]`) fits message `key`.
#[inline(always)]
fn vote_patterns(keys: &[u64; 64], masks: &[u64; 64], key: u64) -> u64 {
    let mut bits = 0;
    for i in 0..64 {
        bits |= (((key & masks[i]) == keys[i]) as u64) << i;
    }
    bits
}

/// The votes compiled for wider vector units; the compiler vectorizes the loops above.
#[cfg(target_arch = "x86_64")]
mod wide {
    #[target_feature(enable = "avx2")]
    pub fn messages_avx2(keys: &[u64; 64], key: u64, mask: u64) -> u64 {
        super::vote_messages(keys, key, mask)
    }

    #[target_feature(enable = "avx2")]
    pub fn patterns_avx2(keys: &[u64; 64], masks: &[u64; 64], key: u64) -> u64 {
        super::vote_patterns(keys, masks, key)
    }

    #[target_feature(enable = "avx512bw")]
    pub fn messages_avx512(keys: &[u64; 64], key: u64, mask: u64) -> u64 {
        super::vote_messages(keys, key, mask)
    }

    #[target_feature(enable = "avx512bw")]
    pub fn patterns_avx512(keys: &[u64; 64], masks: &[u64; 64], key: u64) -> u64 {
        super::vote_patterns(keys, masks, key)
    }
}

/// The votes at the width of `simd`: below AVX2 the loops as the baseline compiles them.
#[inline]
fn messages(simd: Simd, keys: &[u64; 64], key: u64, mask: u64) -> u64 {
    match simd {
        // SAFETY (both): the engine holds a `usable` width, one this CPU has.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { wide::messages_avx2(keys, key, mask) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { wide::messages_avx512(keys, key, mask) },
        _ => vote_messages(keys, key, mask),
    }
}

#[inline]
fn patterns(simd: Simd, keys: &[u64; 64], masks: &[u64; 64], key: u64) -> u64 {
    match simd {
        // SAFETY (both): the engine holds a `usable` width, one this CPU has.
        #[cfg(target_arch = "x86_64")]
        Simd::Avx2 => unsafe { wide::patterns_avx2(keys, masks, key) },
        #[cfg(target_arch = "x86_64")]
        Simd::Avx512 => unsafe { wide::patterns_avx512(keys, masks, key) },
        _ => vote_patterns(keys, masks, key),
    }
}

/// One queue in arrival order. Matched elements only lose their live bit; the arrays are
/// compacted when they are full and at least half dead.
#[derive(Default)]
struct Bits {
    keys: Vec<u64>,
    /// Masks of posted patterns; unused for messages.
    masks: Vec<u64>,
    ids: Vec<u64>,
    live: Vec<u64>,
    /// First word of `live` that may have a bit set.
    head: usize,
    /// Slots in use, live or not.
    end: usize,
    len: usize,
}

impl Bits {
    #[inline]
    fn keys(&self, word: usize) -> &[u64; 64] {
        self.keys[word * 64..word * 64 + 64].try_into().unwrap()
    }

    #[inline]
    fn masks(&self, word: usize) -> &[u64; 64] {
        self.masks[word * 64..word * 64 + 64].try_into().unwrap()
    }

    fn words(&self) -> usize {
        self.end.div_ceil(64)
    }

    fn push(&mut self, key: u64, mask: u64, id: u64) {
        if self.end == self.keys.len() {
            if 2 * self.len <= self.end && self.end > 0 {
                self.compact();
            } else {
                let size = (2 * self.keys.len()).max(64);
                self.keys.resize(size, 0);
                self.masks.resize(size, 0);
                self.ids.resize(size, 0);
                self.live.resize(size / 64, 0);
            }
        }
        let slot = self.end;
        self.keys[slot] = key;
        self.masks[slot] = mask;
        self.ids[slot] = id;
        self.live[slot / 64] |= 1 << (slot % 64);
        self.end += 1;
        self.len += 1;
    }

    fn kill(&mut self, slot: usize) {
        self.live[slot / 64] &= !(1 << (slot % 64));
        self.len -= 1;
        if self.len == 0 {
            self.head = 0;
            self.end = 0;
        } else {
            while self.live[self.head] == 0 {
                self.head += 1;
            }
        }
    }

    /// Moves the live elements to the front, in order.
    fn compact(&mut self) {
        let mut to = 0;
        for word in self.head..self.words() {
            let mut bits = std::mem::take(&mut self.live[word]);
            while bits != 0 {
                let from = word * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.keys[to] = self.keys[from];
                self.masks[to] = self.masks[from];
                self.ids[to] = self.ids[from];
                to += 1;
            }
        }
        for slot in 0..to {
            self.live[slot / 64] |= 1 << (slot % 64);
        }
        self.head = 0;
        self.end = to;
    }

    /// The earliest live slot whose vote bit is set, and how many live elements the visited
    /// words held up to it. `fits` answers for one slot: the oldest element is tried alone
    /// first, which settles in-order traffic without a vote.
    #[inline]
    fn first(
        &self,
        fits: impl Fn(usize) -> bool,
        vote: impl Fn(usize) -> u64,
    ) -> (Option<usize>, usize) {
        if self.len == 0 {
            return (None, 0);
        }
        let oldest = self.head * 64 + self.live[self.head].trailing_zeros() as usize;
        if fits(oldest) {
            return (Some(oldest), 1);
        }
        let mut depth = 0;
        for word in self.head..self.words() {
            let live = self.live[word];
            if live == 0 {
                continue;
            }
            let bits = vote(word) & live;
            if bits != 0 {
                let bit = bits.trailing_zeros();
                depth += (live & (u64::MAX >> (63 - bit))).count_ones() as usize;
                return (Some(word * 64 + bit as usize), depth);
            }
            depth += live.count_ones() as usize;
        }
        (None, depth)
    }

    fn find_id(&self, id: u64) -> Option<usize> {
        (self.head..self.words()).find_map(|word| {
            let mut bits = self.live[word];
            while bits != 0 {
                let slot = word * 64 + bits.trailing_zeros() as usize;
                if self.ids[slot] == id {
                    return Some(slot);
                }
                bits &= bits - 1;
            }
            None
        })
    }
}

/// Posted receives and unexpected messages as bit-vote queues. `arrive` is the matrix row of one
/// message over 64 receives at a time; `arrive_burst` is the paper's orientation: each receive,
/// in posting order, votes over up to 64 waiting messages and takes the earliest one. Both give
/// the matches of arrivals one at a time, since with earliest-first on both sides the matching
/// is unique.
pub struct BatchEngine {
    prq: Bits,
    umq: Bits,
    simd: Simd,
    stats: EngineStats,
}

impl BatchEngine {
    /// Votes at the width of `simd` (or the widest this CPU has, if it lacks that one).
    pub fn new(simd: Simd) -> Self {
        let mut engine = BatchEngine {
            prq: Bits::default(),
            umq: Bits::default(),
            simd: simd.usable(),
            stats: EngineStats::default(),
        };
        engine.stats.set_queues(2);
        engine
    }

    fn take_unexpected(&mut self, want: &Pattern, remove: bool) -> Option<MsgId> {
        let (key, mask) = pattern_key(want);
        let (umq, simd) = (&self.umq, self.simd);
        let (found, depth) = umq.first(
            |slot| umq.keys[slot] & mask == key,
            |word| messages(simd, umq.keys(word), key, mask),
        );
        let taken = remove && found.is_some();
        self.stats.traffic(want.class).lookup(depth, taken);
        let slot = found?;
        if taken {
            self.umq.kill(slot);
        }
        Some(self.umq.ids[slot])
    }

    /// Scan and reduce for up to 64 messages: every live receive in posting order votes over
    /// the messages still waiting and takes the earliest. The earliest waiting message is tried
    /// alone first, which settles in-order traffic without a vote.
    fn reduce(&mut self, msgs: &[(Envelope, MsgId)], out: &mut Vec<Option<RecvId>>) {
        let mut keys = [0; 64];
        for (key, (env, _)) in keys.iter_mut().zip(msgs) {
            *key = envelope_key(env);
        }
        let start = out.len();
        out.resize(start + msgs.len(), None);
        let mut waiting = u64::MAX >> (64 - msgs.len());
        let mut scanned = 0;
        'scan: for word in self.prq.head..self.prq.words() {
            let mut live = self.prq.live[word];
            while live != 0 {
                let slot = word * 64 + live.trailing_zeros() as usize;
                live &= live - 1;
                scanned += 1;
                let (key, mask) = (self.prq.keys[slot], self.prq.masks[slot]);
                let earliest = waiting.trailing_zeros() as usize;
                let m = if keys[earliest] & mask == key {
                    earliest
                } else {
                    let bits = messages(self.simd, &keys, key, mask) & waiting;
                    if bits == 0 {
                        continue;
                    }
                    bits.trailing_zeros() as usize
                };
                waiting &= !(1 << m);
                out[start + m] = Some(self.prq.ids[slot]);
                self.prq.kill(slot);
                self.stats.traffic(msgs[m].0.class).arrival(scanned, true);
                if waiting == 0 {
                    break 'scan;
                }
            }
        }
        for (m, &(env, msg)) in msgs.iter().enumerate() {
            if waiting & (1 << m) != 0 {
                self.stats.traffic(env.class).arrival(scanned, false);
                self.umq.push(keys[m], 0, msg);
            }
        }
    }
}

impl MatchEngine for BatchEngine {
    fn post(&mut self, want: Pattern, recv: RecvId) -> Option<MsgId> {
        if let Some(msg) = self.take_unexpected(&want, true) {
            return Some(msg);
        }
        let (key, mask) = pattern_key(&want);
        self.prq.push(key, mask, recv);
        None
    }

    fn arrive(&mut self, env: Envelope, msg: MsgId) -> Option<RecvId> {
        let key = envelope_key(&env);
        let (prq, simd) = (&self.prq, self.simd);
        let (found, depth) = prq.first(
            |slot| key & prq.masks[slot] == prq.keys[slot],
            |word| patterns(simd, prq.keys(word), prq.masks(word), key),
        );
        self.stats
            .traffic(env.class)
            .arrival(depth, found.is_some());
        match found {
            Some(slot) => {
                let recv = self.prq.ids[slot];
                self.prq.kill(slot);
                Some(recv)
            }
            None => {
                self.umq.push(key, 0, msg);
                None
            }
        }
    }

    fn arrive_burst(&mut self, msgs: &[(Envelope, MsgId)], matched: &mut Vec<Option<RecvId>>) {
        for group in msgs.chunks(64) {
            match *group {
                // One message is one row of the matrix.
                [(env, msg)] => matched.push(self.arrive(env, msg)),
                _ => self.reduce(group, matched),
            }
        }
    }

    fn probe(&mut self, want: Pattern, remove: bool) -> Option<MsgId> {
        self.take_unexpected(&want, remove)
    }

    fn cancel(&mut self, recv: RecvId) -> bool {
        match self.prq.find_id(recv) {
            Some(slot) => {
                self.prq.kill(slot);
                true
            }
            None => false,
        }
    }

    fn queued(&self) -> (usize, usize) {
        (self.prq.len, self.umq.len)
    }

    fn stats(&self) -> &EngineStats {
        &self.stats
    }
}
