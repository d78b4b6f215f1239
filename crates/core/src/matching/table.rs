//! A hash table of (source, tag) chains for `bins` and `adaptive`.
//!
//! Elements live in one slab and are chained per bucket in insertion order, so a bucket costs
//! eight bytes and adding or removing an element allocates nothing once the slab has grown.
//! Sequence numbers order elements across buckets. A growing table doubles its buckets whenever
//! it holds more elements than buckets, so a chain stays about one element long at any queue
//! length. An ordered table also chains every element in arrival order, which answers searches
//! no bucket can narrow down (wildcard receives against unexpected messages).

use super::Element;

const NIL: u32 = u32::MAX;

/// 32 bytes for a point-to-point pattern or envelope: two to a cache line.
pub(super) struct Node<T> {
    pub item: T,
    /// The next element of the bucket; of the free list for a free node.
    next: u32,
    /// Insertion order over the whole table: lower is older.
    pub seq: u64,
    pub id: u64,
}

/// Where an element is: its node and the node before it in its bucket.
#[derive(Clone, Copy)]
pub(super) struct Loc {
    at: u32,
    prev: u32,
}

/// Arrival-order links of a node (ordered tables only).
#[derive(Clone, Copy)]
struct Links {
    newer: u32,
    older: u32,
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
    nodes: Vec<Node<T>>,
    free: u32,
    buckets: Vec<Bucket>,
    /// log2 of the bucket count.
    bits: u32,
    grow: bool,
    len: usize,
    next_seq: u64,
    /// Parallel to `nodes` in an ordered table, empty otherwise.
    links: Vec<Links>,
    ordered: bool,
    oldest: u32,
    newest: u32,
}

/// The bucket of (source, tag) as written, wildcards included, among `1 << bits` buckets.
#[inline(always)]
fn bucket(bits: u32, source: i32, tag: i32) -> usize {
    if bits == 0 {
        return 0;
    }
    let key = ((source as u32 as u64) << 32) | tag as u32 as u64;
    // The top bits of a multiplicative hash: an element of bucket b lands in 2b or 2b + 1 once
    // the buckets double, so regrouping keeps each chain's order.
    (key.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - bits)) as usize
}

impl<T: Element> Table<T> {
    /// At least `buckets` buckets (rounded up to a power of two); `grow` lets them double with
    /// the elements.
    pub fn new(buckets: usize, grow: bool, ordered: bool) -> Self {
        let bits = buckets.max(1).next_power_of_two().trailing_zeros();
        Table {
            nodes: Vec::new(),
            free: NIL,
            buckets: vec![EMPTY; 1 << bits],
            bits,
            grow,
            len: 0,
            next_seq: 0,
            links: Vec::new(),
            ordered,
            oldest: NIL,
            newest: NIL,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The bin of (source, tag) as written.
    #[inline(always)]
    pub fn bin(&self, source: i32, tag: i32) -> usize {
        bucket(self.bits, source, tag)
    }

    #[inline(always)]
    pub fn node(&self, at: Loc) -> &Node<T> {
        &self.nodes[at.at as usize]
    }

    #[inline(always)]
    fn bucket_of(&self, at: u32) -> usize {
        let item = &self.nodes[at as usize].item;
        bucket(self.bits, item.source(), item.tag())
    }

    /// Appends `item` to its bucket; it is the newest element.
    #[inline(always)]
    pub fn push(&mut self, item: T, id: u64) {
        if self.grow && self.len >= self.buckets.len() {
            self.regroup(self.bits + 1);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let b = bucket(self.bits, item.source(), item.tag());
        let node = Node {
            item,
            next: NIL,
            seq,
            id,
        };
        let at = if self.free != NIL {
            let at = self.free;
            self.free = self.nodes[at as usize].next;
            self.nodes[at as usize] = node;
            at
        } else {
            self.nodes.push(node);
            if self.ordered {
                self.links.push(Links {
                    newer: NIL,
                    older: NIL,
                });
            }
            (self.nodes.len() - 1) as u32
        };
        let tail = self.buckets[b].tail;
        match tail {
            NIL => self.buckets[b].head = at,
            t => self.nodes[t as usize].next = at,
        }
        self.buckets[b].tail = at;
        if self.ordered {
            self.links[at as usize] = Links {
                newer: NIL,
                older: self.newest,
            };
            match self.newest {
                NIL => self.oldest = at,
                n => self.links[n as usize].newer = at,
            }
            self.newest = at;
        }
        self.len += 1;
    }

    /// Unlinks the element at `loc` and returns its id.
    #[inline(always)]
    pub fn remove(&mut self, loc: Loc) -> u64 {
        let Loc { at, prev } = loc;
        let b = self.bucket_of(at);
        let node = &self.nodes[at as usize];
        let (next, id) = (node.next, node.id);
        match prev {
            NIL => self.buckets[b].head = next,
            p => self.nodes[p as usize].next = next,
        }
        if next == NIL {
            self.buckets[b].tail = prev;
        }
        if self.ordered {
            let Links { newer, older } = self.links[at as usize];
            match older {
                NIL => self.oldest = newer,
                o => self.links[o as usize].newer = newer,
            }
            match newer {
                NIL => self.newest = older,
                n => self.links[n as usize].older = older,
            }
        }
        self.nodes[at as usize].next = self.free;
        self.free = at;
        self.len -= 1;
        id
    }

    /// The oldest element of the bucket of (source, tag) older than `bound` that `hit` accepts,
    /// and how many elements were inspected.
    #[inline(always)]
    pub fn find(
        &self,
        source: i32,
        tag: i32,
        bound: u64,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        let (mut at, mut prev) = (self.buckets[bucket(self.bits, source, tag)].head, NIL);
        let mut depth = 0;
        while at != NIL {
            let node = &self.nodes[at as usize];
            if node.seq >= bound {
                break;
            }
            depth += 1;
            if hit(&node.item) {
                return (Some(Loc { at, prev }), depth);
            }
            (prev, at) = (at, node.next);
        }
        (None, depth)
    }

    /// The oldest element of the whole table that `hit` accepts, and the search depth. Only an
    /// ordered table answers.
    pub fn find_oldest(&self, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        assert!(self.ordered, "find_oldest on a table without arrival order");
        let mut at = self.oldest;
        let mut depth = 0;
        while at != NIL {
            depth += 1;
            if hit(&self.nodes[at as usize].item) {
                return (Some(self.locate(at)), depth);
            }
            at = self.links[at as usize].newer;
        }
        (None, depth)
    }

    /// The place of node `at` in its bucket.
    fn locate(&self, at: u32) -> Loc {
        let mut prev = NIL;
        let mut node = self.buckets[self.bucket_of(at)].head;
        while node != at {
            (prev, node) = (node, self.nodes[node as usize].next);
        }
        Loc { at, prev }
    }

    pub fn find_id(&self, id: u64) -> Option<Loc> {
        self.buckets.iter().find_map(|b| {
            let (mut at, mut prev) = (b.head, NIL);
            while at != NIL {
                let node = &self.nodes[at as usize];
                if node.id == id {
                    return Some(Loc { at, prev });
                }
                (prev, at) = (at, node.next);
            }
            None
        })
    }

    /// Regroups the elements into `count` buckets (rounded up to a power of two, and for a
    /// growing table to the elements held), keeping each bucket's order; `grow` as in `new`.
    pub fn resize(&mut self, count: usize, grow: bool) {
        self.grow = grow;
        let count = if grow { count.max(self.len) } else { count };
        let bits = count.max(1).next_power_of_two().trailing_zeros();
        if bits != self.bits {
            self.regroup(bits);
        }
    }

    /// Rebuilds the chains for `1 << bits` buckets. More buckets split each chain in order;
    /// fewer merge chains, so the elements are relinked by sequence number.
    fn regroup(&mut self, bits: u32) {
        let mut order: Vec<u32> = Vec::with_capacity(self.len);
        for b in &self.buckets {
            let mut at = b.head;
            while at != NIL {
                order.push(at);
                at = self.nodes[at as usize].next;
            }
        }
        if bits < self.bits {
            order.sort_unstable_by_key(|&at| self.nodes[at as usize].seq);
        }
        self.bits = bits;
        self.buckets = vec![EMPTY; 1 << bits];
        for at in order {
            let node = &self.nodes[at as usize];
            let b = bucket(bits, node.item.source(), node.item.tag());
            let tail = self.buckets[b].tail;
            match tail {
                NIL => self.buckets[b].head = at,
                t => self.nodes[t as usize].next = at,
            }
            self.nodes[at as usize].next = NIL;
            self.buckets[b].tail = at;
        }
    }
}
