//! Hash-chained queues: one side (posted receives or unexpected messages) of `bins`, `adaptive`
//! and `pnp`.
//!
//! Elements sit in one array in insertion order, so a post writes at the end of it and the array
//! itself is the arrival order that wildcard searches walk; an element's sequence number is its
//! place in the array. Each element also belongs to a queue (the engine's) and is chained into
//! the bucket of its (source, tag) as written, wildcards included: the sub-queues. The buckets
//! double whenever the table holds more elements than buckets, so a sub-queue holds about one
//! element at any length. Chains are in sequence order, so the first element of a chain that
//! fits is the earliest, whichever queues the chain runs through.
//!
//! Elements are chained lazily: a post only appends, and the first search that needs the
//! buckets chains what was posted since. While searches keep finding the oldest element, it is
//! tried first, which settles in-order traffic without hashing at all (it is the earliest match
//! if it fits), so a table serving in-order traffic costs about what a list costs.
//!
//! A removed element leaves a hole. The front of the array is dropped once it is mostly holes;
//! an array that is full and at least half holes is squeezed before it grows. Steady traffic
//! allocates nothing, and memory follows the peak queue lengths.

use super::{source_tag, spread, wild_shape, Element, Envelope, Pattern, ANY_SOURCE, ANY_TAG};

const NIL: u32 = u32::MAX;
/// The queue of a removed element.
const HOLE: u32 = u32::MAX;

/// 32 bytes for a point-to-point pattern or envelope: two to a cache line.
struct Node<T> {
    item: T,
    /// Sequence number of the next element of the chain.
    next: u32,
    queue: u32,
    id: u64,
}

/// Where an element is: its sequence number, the one before it in its chain, and the chain
/// (`NIL` for an element not chained yet).
#[derive(Clone, Copy)]
pub(super) struct Loc {
    seq: u32,
    prev: u32,
    bucket: u32,
}

#[derive(Clone, Copy)]
struct Bucket {
    head: u32,
    tail: u32,
}

const EMPTY: Bucket = Bucket {
    head: NIL,
    tail: NIL,
};

pub(super) struct Table<T> {
    /// Element `seq` is `nodes[seq - base]`.
    nodes: Vec<Node<T>>,
    base: u32,
    /// Index of the oldest element in `nodes`; everything before it is a hole.
    front: usize,
    /// Elements from this index on are not chained yet.
    chained: usize,
    /// The last search found the oldest element: the next one tries it first.
    in_order: bool,
    live: usize,
    /// Elements per queue.
    lens: Vec<usize>,
    /// Elements with ANY_SOURCE only, with ANY_TAG only, and with both (`wild_shape`).
    wild: [usize; 3],
    buckets: Vec<Bucket>,
    /// log2 of the bucket count.
    bits: u32,
    grow: bool,
}

/// The bucket of (source, tag) among `1 << bits`.
#[inline(always)]
fn bucket(bits: u32, source: i32, tag: i32) -> usize {
    // Two shifts: one bucket (bits = 0) takes none of the bits.
    ((spread(source_tag(source, tag)) >> 1) >> (63 - bits)) as usize
}

impl<T: Element> Table<T> {
    /// `queues` queues and at least `buckets` buckets (a power of two); `grow` lets the buckets
    /// double with the elements.
    pub fn new(queues: usize, buckets: usize, grow: bool) -> Self {
        let bits = buckets.max(1).next_power_of_two().trailing_zeros();
        Table {
            nodes: Vec::new(),
            base: 0,
            front: 0,
            chained: 0,
            in_order: true,
            live: 0,
            lens: vec![0; queues],
            wild: [0; 3],
            buckets: vec![EMPTY; 1 << bits],
            bits,
            grow,
        }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn queue_len(&self, queue: u32) -> usize {
        self.lens[queue as usize]
    }

    pub fn queue_count(&self) -> usize {
        self.lens.len()
    }

    /// Adds `count` empty queues and returns the number of the first.
    pub fn add_queues(&mut self, count: usize) -> u32 {
        let first = self.lens.len() as u32;
        self.lens.resize(self.lens.len() + count, 0);
        first
    }

    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    #[inline(always)]
    fn node(&self, seq: u32) -> &Node<T> {
        &self.nodes[seq.wrapping_sub(self.base) as usize]
    }

    #[inline(always)]
    fn node_mut(&mut self, seq: u32) -> &mut Node<T> {
        &mut self.nodes[seq.wrapping_sub(self.base) as usize]
    }

    /// Sequence number of the element at `at`: lower is older.
    #[inline(always)]
    pub fn seq(&self, at: Loc) -> u64 {
        at.seq as u64
    }

    #[inline(always)]
    pub fn id(&self, at: Loc) -> u64 {
        self.node(at.seq).id
    }

    /// Appends `item` to `queue`; it is the newest element.
    #[inline(always)]
    pub fn push(&mut self, queue: u32, item: T, id: u64) {
        if self.nodes.len() == self.nodes.capacity() {
            self.make_room();
        }
        if let Some(wild) = wild_shape(item.source(), item.tag()) {
            self.wild[wild] += 1;
        }
        self.nodes.push(Node {
            item,
            next: NIL,
            queue,
            id,
        });
        self.lens[queue as usize] += 1;
        self.live += 1;
    }

    /// The oldest element, if `hit` accepts it: then it is the earliest match there is.
    #[inline(always)]
    fn front(&self, hit: impl Fn(&T) -> bool) -> Option<Loc> {
        let node = self.nodes.get(self.front)?;
        if !hit(&node.item) {
            return None;
        }
        // The oldest element heads its chain.
        let bucket = if self.front < self.chained {
            bucket(self.bits, node.item.source(), node.item.tag()) as u32
        } else {
            NIL
        };
        Some(Loc {
            seq: self.base.wrapping_add(self.front as u32),
            prev: NIL,
            bucket,
        })
    }

    /// The earliest element that `hit` accepts, and the depth: the oldest element if it fits,
    /// else what `find` (a search of the chains) finds. The oldest element is tried while
    /// searches keep finding it; once it does not fit, searches go to the chains until one of
    /// them finds the oldest element again.
    #[inline(always)]
    pub fn search(
        &mut self,
        hit: impl Fn(&T) -> bool,
        find: impl FnOnce(&Self) -> (Option<Loc>, usize),
    ) -> (Option<Loc>, usize) {
        if self.live == 0 {
            return (None, 0);
        }
        let mut tried = 0;
        if self.in_order {
            if let Some(at) = self.front(&hit) {
                return (Some(at), 1);
            }
            tried = 1;
        }
        self.chain();
        let (found, depth) = find(self);
        let oldest = self.base.wrapping_add(self.front as u32);
        self.in_order = found.is_some_and(|at| at.seq == oldest);
        (found, depth + tried)
    }

    /// Chains the elements pushed since the last call; `find` needs them chained.
    #[inline(always)]
    pub fn chain(&mut self) {
        if self.chained < self.nodes.len() {
            self.chain_new();
        }
    }

    #[inline(never)]
    fn chain_new(&mut self) {
        if self.grow && self.live > self.buckets.len() {
            // One bucket or more per element.
            let bits = self.live.next_power_of_two().trailing_zeros();
            return self.relink(bits);
        }
        for index in self.chained.max(self.front)..self.nodes.len() {
            self.link(index);
        }
        self.chained = self.nodes.len();
    }

    /// Appends `nodes[index]`, if it is live, to the end of its chain.
    #[inline(always)]
    fn link(&mut self, index: usize) {
        let node = &mut self.nodes[index];
        if node.queue == HOLE {
            return;
        }
        node.next = NIL;
        let b = bucket(self.bits, node.item.source(), node.item.tag());
        let seq = self.base.wrapping_add(index as u32);
        match self.buckets[b].tail {
            NIL => self.buckets[b].head = seq,
            tail => self.node_mut(tail).next = seq,
        }
        self.buckets[b].tail = seq;
    }

    /// Unlinks the element at `at`; returns its id and queue.
    #[inline(always)]
    pub fn remove(&mut self, at: Loc) -> (u64, u32) {
        let Loc { seq, prev, bucket } = at;
        let node = self.node_mut(seq);
        let (next, id, queue) = (node.next, node.id, node.queue);
        let shape = wild_shape(node.item.source(), node.item.tag());
        node.queue = HOLE;
        if let Some(wild) = shape {
            self.wild[wild] -= 1;
        }
        if bucket != NIL {
            match prev {
                NIL => self.buckets[bucket as usize].head = next,
                prev => self.node_mut(prev).next = next,
            }
            if next == NIL {
                self.buckets[bucket as usize].tail = prev;
            }
        }
        self.lens[queue as usize] -= 1;
        self.live -= 1;
        if self.live == 0 {
            // Sequence numbers start over: nothing holds one.
            self.nodes.clear();
            self.base = 0;
            self.front = 0;
            self.chained = 0;
        } else {
            while self.nodes[self.front].queue == HOLE {
                self.front += 1;
            }
        }
        (id, queue)
    }

    /// The earliest element in the bucket of (`source`, `tag`) older than `bound` that `hit`
    /// accepts, and how many elements were inspected. Needs `chain` first.
    #[inline(always)]
    pub fn find(
        &self,
        source: i32,
        tag: i32,
        bound: u64,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        debug_assert_eq!(self.chained, self.nodes.len(), "find before chain");
        let b = bucket(self.bits, source, tag);
        let (mut seq, mut prev) = (self.buckets[b].head, NIL);
        let mut depth = 0;
        while seq != NIL && (seq as u64) < bound {
            let node = self.node(seq);
            depth += 1;
            if hit(&node.item) {
                let at = Loc {
                    seq,
                    prev,
                    bucket: b as u32,
                };
                return (Some(at), depth);
            }
            (prev, seq) = (seq, node.next);
        }
        (None, depth)
    }

    /// The oldest element of the whole table that `hit` accepts, and the search depth.
    pub fn find_oldest(&self, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        let mut depth = 0;
        for (i, node) in self.nodes.iter().enumerate().skip(self.front) {
            if node.queue == HOLE {
                continue;
            }
            depth += 1;
            if hit(&node.item) {
                return (Some(self.locate(i)), depth);
            }
        }
        (None, depth)
    }

    pub fn find_id(&self, id: u64) -> Option<Loc> {
        let at = self.nodes[self.front..]
            .iter()
            .position(|node| node.queue != HOLE && node.id == id)?;
        Some(self.locate(self.front + at))
    }

    /// The place of `nodes[index]` in its chain.
    fn locate(&self, index: usize) -> Loc {
        let node = &self.nodes[index];
        let seq = self.base.wrapping_add(index as u32);
        if index >= self.chained {
            let bucket = NIL;
            return Loc {
                seq,
                prev: NIL,
                bucket,
            };
        }
        let b = bucket(self.bits, node.item.source(), node.item.tag());
        let mut prev = NIL;
        let mut at = self.buckets[b].head;
        while at != seq {
            (prev, at) = (at, self.node(at).next);
        }
        Loc {
            seq,
            prev,
            bucket: b as u32,
        }
    }

    /// The elements of `queue`, oldest first.
    pub fn items(&self, queue: u32) -> impl Iterator<Item = &T> + '_ {
        let nodes = &self.nodes[self.front..];
        nodes
            .iter()
            .filter(move |n| n.queue == queue)
            .map(|n| &n.item)
    }

    /// Regroups the elements into `count` buckets (rounded up to a power of two, and for a
    /// growing table to the elements held); `grow` as in `new`.
    pub fn resize(&mut self, count: usize, grow: bool) {
        self.grow = grow;
        let count = if grow { count.max(self.live) } else { count };
        let bits = count.max(1).next_power_of_two().trailing_zeros();
        if bits != self.bits {
            self.relink(bits);
        }
    }

    /// The array is full: drop a front of holes, or squeeze out holes if they are half of it,
    /// rather than grow. Either costs at most one move per element removed since the last.
    #[cold]
    fn make_room(&mut self) {
        let len = self.nodes.len();
        if 2 * (len - self.live) < len {
            return;
        }
        // Sequence numbers must stay below NIL, also after the array doubles.
        let base = self.base as u64 + self.front as u64;
        if 2 * self.front >= len && base + 2 * len as u64 <= NIL as u64 {
            // Chains hold sequence numbers, which do not change.
            self.nodes.drain(..self.front);
            self.base = base as u32;
            self.chained = self.chained.saturating_sub(self.front);
        } else {
            self.nodes.retain(|node| node.queue != HOLE);
            self.base = 0;
            self.front = 0;
            self.relink(self.bits);
        }
        self.front = 0;
    }

    /// Rebuilds the chains for `1 << bits` buckets from the elements in sequence order.
    #[cold]
    fn relink(&mut self, bits: u32) {
        self.bits = bits;
        self.buckets.clear();
        self.buckets.resize(1 << bits, EMPTY);
        for index in self.front..self.nodes.len() {
            self.link(index);
        }
        self.chained = self.nodes.len();
    }
}

impl Table<Pattern> {
    /// The earliest posted receive that fits `env`, and the search depth.
    #[inline(always)]
    pub fn find_posted(&mut self, env: &Envelope) -> (Option<Loc>, usize) {
        self.search(|p| p.matches(env), |prq| prq.find_posted_chains(env))
    }

    /// `find_posted` in the chains: the sub-queue of (source, tag), then those of the wildcard
    /// shapes with receives queued, each searched only for something older than the best so
    /// far; a bucket searched already for another shape holds nothing older that fits.
    #[inline(always)]
    fn find_posted_chains(&self, env: &Envelope) -> (Option<Loc>, usize) {
        let hit = |p: &Pattern| p.matches(env);
        let (mut best, mut depth) = self.find(env.source, env.tag, u64::MAX, hit);
        if self.wild == [0; 3] {
            return (best, depth);
        }
        let shapes = [
            (ANY_SOURCE, env.tag),
            (env.source, ANY_TAG),
            (ANY_SOURCE, ANY_TAG),
        ];
        let mut searched = [
            bucket(self.bits, env.source, env.tag),
            usize::MAX,
            usize::MAX,
        ];
        for (i, &(source, tag)) in shapes.iter().enumerate() {
            let b = bucket(self.bits, source, tag);
            if self.wild[i] == 0 || searched.contains(&b) {
                continue;
            }
            searched[(i + 1).min(2)] = b;
            let bound = best.map_or(u64::MAX, |at| self.seq(at));
            let (found, d) = self.find(source, tag, bound, hit);
            depth += d;
            if found.is_some() {
                best = found;
            }
        }
        (best, depth)
    }
}

impl Table<Envelope> {
    /// The earliest unexpected message that fits `want`, and the search depth: by its
    /// sub-queue, or for a wildcard receive along the arrival order.
    #[inline(always)]
    pub fn find_unexpected(&mut self, want: &Pattern) -> (Option<Loc>, usize) {
        let hit = |e: &Envelope| want.matches(e);
        if want.source == ANY_SOURCE || want.tag == ANY_TAG {
            return self.find_oldest(hit);
        }
        let (source, tag) = (want.source, want.tag);
        self.search(hit, |umq| umq.find(source, tag, u64::MAX, hit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{Class, Envelope};

    fn msg(source: i32, tag: i32) -> Envelope {
        Envelope {
            source,
            tag,
            class: Class::PointToPoint,
        }
    }

    /// Removes the earliest `want`, in whichever queue: (id, queue).
    fn take(table: &mut Table<Envelope>, want: Envelope) -> (u64, u32) {
        table.chain();
        let (at, _) = table.find(want.source, want.tag, u64::MAX, |&e| e == want);
        table.remove(at.expect("queued"))
    }

    /// Removals in every order leave holes; dropped fronts and squeezes keep every chain and
    /// the arrival order right, and the array within twice the elements once it is full.
    #[test]
    fn holes_are_dropped_or_squeezed_and_order_kept() {
        let mut table: Table<Envelope> = Table::new(2, 4, true);
        let mut id = 0;
        let mut queued: Vec<(u32, Envelope, u64)> = Vec::new();
        for round in 0..40 {
            for i in 0..50 {
                let (queue, env) = ((i % 2) as u32, msg(i % 3, (i / 3) % 4));
                table.push(queue, env, id);
                queued.push((queue, env, id));
                id += 1;
            }
            // Every other round takes from the back, or every third from the front.
            let picks: Vec<usize> = if round % 2 == 0 {
                (0..queued.len()).rev().step_by(2).collect()
            } else {
                (0..queued.len()).step_by(3).rev().collect()
            };
            for i in picks {
                let env = queued[i].1;
                // The earliest with the same envelope goes, from its queue.
                let first = queued.iter().position(|&(_, e, _)| e == env).unwrap();
                let (queue, _, id) = queued.remove(first);
                assert_eq!(take(&mut table, env), (id, queue));
            }
            assert_eq!(table.len(), queued.len());
            let oldest = table.find_oldest(|_| true).0.map(|at| table.id(at));
            assert_eq!(oldest, queued.first().map(|q| q.2));
        }
        for queue in 0..2 {
            let len = queued.iter().filter(|q| q.0 == queue).count();
            assert_eq!(table.queue_len(queue), len);
        }
        assert!(
            table.nodes.len() < 2 * table.len() + 64,
            "holes were not squeezed out"
        );
        // Drained, the table starts its sequence numbers over.
        for (queue, env, id) in std::mem::take(&mut queued) {
            assert_eq!(take(&mut table, env), (id, queue));
        }
        assert_eq!((table.len(), table.nodes.len(), table.base), (0, 0, 0));
    }

    #[test]
    fn chains_keep_order_across_doubling_and_shrinking() {
        let mut table: Table<Envelope> = Table::new(1, 1, true);
        for id in 0..100 {
            table.push(0, msg(1, (id % 7) as i32), id);
        }
        table.chain();
        assert_eq!(table.buckets(), 128);
        table.resize(1, false);
        assert_eq!(table.buckets(), 1);
        for tag in 0..7 {
            let ids: Vec<u64> = (0..100).filter(|id| id % 7 == tag as u64).collect();
            for id in ids {
                assert_eq!(take(&mut table, msg(1, tag)), (id, 0));
            }
        }
    }
}
