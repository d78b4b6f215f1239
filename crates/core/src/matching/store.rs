//! The elements of one side (posted receives or unexpected messages) of an engine.
//!
//! Each queue is contiguous in insertion order, and a search scans a parallel array of 16-bit
//! fingerprints, 8 to 32 per vector compare (`Simd`), so a long queue costs two bytes per
//! element passed.
//! Sequence numbers order elements across queues. An ordered store also
//! keeps every element in one arrival-ordered deque, which answers searches that no queue can
//! narrow down (wildcard receives against unexpected messages) at the cost of a list.
//!
//! An emptied queue keeps its buffer, so steady traffic allocates nothing; memory follows the
//! peak queue lengths.

use super::{source_tag, spread, Element, Simd, ANY_SOURCE, ANY_TAG};
use std::collections::VecDeque;

const HOLE: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub(super) struct Entry<T> {
    pub item: T,
    /// Insertion order over the whole store: lower is older.
    pub seq: u64,
    pub id: u64,
}

/// Where an element is: its queue and its index among the queue's elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loc {
    pub queue: u32,
    index: usize,
}

/// A 16-bit hash of an exact (source, tag), never 0; 0 stands for any wildcard. Searches
/// compare these, two bytes per element, and look at an element itself only where they agree.
#[inline]
pub(super) fn fingerprint(source: i32, tag: i32) -> u16 {
    if source == ANY_SOURCE || tag == ANY_TAG {
        return 0;
    }
    print_of(source_tag(source, tag))
}

/// The top 16 bits of a hash of `key`, never 0.
#[inline]
fn print_of(key: u64) -> u16 {
    ((spread(key) >> 48) as u16).max(1)
}

/// One queue, oldest first, as two arrays from `head` on: fingerprints, scanned, and entries.
/// Taking the front only moves `head`; the dead front is dropped once it outgrows the rest.
struct Queue<T> {
    prints: Vec<u16>,
    entries: Vec<Entry<T>>,
    head: usize,
}

impl<T: Copy> Queue<T> {
    fn new() -> Self {
        Queue {
            prints: Vec::new(),
            entries: Vec::new(),
            head: 0,
        }
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.entries.len() - self.head
    }

    #[inline(always)]
    fn entries(&self) -> &[Entry<T>] {
        &self.entries[self.head..]
    }

    #[inline(always)]
    fn entries_mut(&mut self) -> &mut [Entry<T>] {
        &mut self.entries[self.head..]
    }

    #[inline(always)]
    fn prints(&self) -> &[u16] {
        &self.prints[self.head..]
    }

    #[inline(always)]
    fn push(&mut self, print: u16, entry: Entry<T>) {
        self.prints.push(print);
        self.entries.push(entry);
    }

    /// Removes element `index`, moving the shorter side of the queue.
    #[inline(always)]
    fn remove(&mut self, index: usize) -> Entry<T> {
        let at = self.head + index;
        let entry = self.entries[at];
        if index == 0 {
            self.head += 1;
        } else if index + 1 == self.len() {
            self.prints.pop();
            self.entries.pop();
        } else if index < self.len() / 2 {
            self.prints.copy_within(self.head..at, self.head + 1);
            self.entries.copy_within(self.head..at, self.head + 1);
            self.head += 1;
        } else {
            self.prints.remove(at);
            self.entries.remove(at);
        }
        if self.head == self.entries.len() {
            self.prints.clear();
            self.entries.clear();
            self.head = 0;
        } else if self.head > 32 && 2 * self.head > self.entries.len() {
            self.prints.drain(..self.head);
            self.entries.drain(..self.head);
            self.head = 0;
        }
        entry
    }
}

/// Every element in arrival order: element `first + i` is at `i`. Removed elements leave holes,
/// popped at the front; when holes are the majority they are squeezed out and sequence numbers
/// renumbered, which keeps the deque within twice the elements.
struct Order<T> {
    slots: VecDeque<Slot<T>>,
    first: u64,
    holes: usize,
}

#[derive(Clone, Copy)]
struct Slot<T> {
    item: T,
    /// The element's queue, or `HOLE` once it is gone.
    queue: u32,
}

pub(super) struct Store<T> {
    simd: Simd,
    queues: Vec<Queue<T>>,
    len: usize,
    next_seq: u64,
    order: Option<Order<T>>,
}

impl<T: Element> Store<T> {
    /// `queues` empty queues scanned at the width of `simd` (a `usable` one); `ordered` keeps
    /// the arrival order for `find_oldest`.
    pub fn new(queues: usize, ordered: bool, simd: Simd) -> Self {
        Store {
            simd: simd.usable(),
            queues: (0..queues).map(|_| Queue::new()).collect(),
            len: 0,
            next_seq: 0,
            order: ordered.then(|| Order {
                slots: VecDeque::new(),
                first: 0,
                holes: 0,
            }),
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    #[cfg(test)]
    pub fn queue_len(&self, queue: u32) -> usize {
        self.queues[queue as usize].len()
    }

    /// Adds `count` empty queues and returns the index of the first.
    pub fn add_queues(&mut self, count: usize) -> u32 {
        let first = self.queues.len() as u32;
        self.queues
            .resize_with(self.queues.len() + count, Queue::new);
        first
    }

    #[inline(always)]
    pub fn entry(&self, at: Loc) -> &Entry<T> {
        &self.queues[at.queue as usize].entries()[at.index]
    }

    /// Appends to `queue`; the element is the newest of the store.
    #[inline(always)]
    pub fn push(&mut self, queue: u32, item: T, id: u64) {
        let print = fingerprint(item.source(), item.tag());
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queues[queue as usize].push(print, Entry { item, seq, id });
        self.len += 1;
        if let Some(order) = &mut self.order {
            order.slots.push_back(Slot { item, queue });
        }
    }

    #[inline(always)]
    pub fn remove(&mut self, at: Loc) -> Entry<T> {
        let entry = self.queues[at.queue as usize].remove(at.index);
        self.len -= 1;
        if self.order.is_some() {
            self.forget(entry.seq);
        }
        entry
    }

    /// Takes element `seq` out of the arrival order.
    fn forget(&mut self, seq: u64) {
        let Some(order) = &mut self.order else {
            return;
        };
        order.slots[(seq - order.first) as usize].queue = HOLE;
        order.holes += 1;
        while order.slots.front().is_some_and(|slot| slot.queue == HOLE) {
            order.slots.pop_front();
            order.first += 1;
            order.holes -= 1;
        }
        if order.holes > 32 && 2 * order.holes > order.slots.len() {
            self.next_seq = order.squeeze(&mut self.queues);
        }
    }

    /// The oldest element of `queue` older than `bound` that `hit` accepts, and how many
    /// elements were inspected. `key` is the fingerprint of what is searched for: elements with
    /// another one are skipped unseen (0 looks at every element).
    #[inline(always)]
    pub fn find(
        &self,
        queue: u32,
        bound: u64,
        key: u16,
        hit: impl Fn(&T) -> bool,
    ) -> (Option<Loc>, usize) {
        let q = &self.queues[queue as usize];
        let entries = q.entries();
        let end = if bound == u64::MAX {
            entries.len()
        } else {
            entries.partition_point(|e| e.seq < bound)
        };
        let found = if key == 0 {
            entries[..end].iter().position(|e| hit(&e.item))
        } else {
            let prints = &q.prints()[..end];
            let mut from = 0;
            loop {
                match self.simd.first_either(&prints[from..], key, 0) {
                    Some(i) if hit(&entries[from + i].item) => break Some(from + i),
                    Some(i) => from += i + 1,
                    None => break None,
                }
            }
        };
        match found {
            Some(index) => (Some(Loc { queue, index }), index + 1),
            None => (None, end),
        }
    }

    /// The oldest element of the whole store that `hit` accepts, and the search depth. Only an
    /// ordered store answers.
    pub fn find_oldest(&self, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        let Some(order) = &self.order else {
            unreachable!("find_oldest on a store without arrival order")
        };
        let mut depth = 0;
        for (i, slot) in order.slots.iter().enumerate() {
            if slot.queue == HOLE {
                continue;
            }
            depth += 1;
            if hit(&slot.item) {
                let seq = order.first + i as u64;
                let index = self.queues[slot.queue as usize]
                    .entries()
                    .binary_search_by_key(&seq, |e| e.seq)
                    .expect("ordered element in its queue");
                let at = Loc {
                    queue: slot.queue,
                    index,
                };
                return (Some(at), depth);
            }
        }
        (None, depth)
    }

    pub fn find_id(&self, id: u64) -> Option<Loc> {
        self.queues.iter().enumerate().find_map(|(queue, q)| {
            let index = q.entries().iter().position(|e| e.id == id)?;
            Some(Loc {
                queue: queue as u32,
                index,
            })
        })
    }
}

impl<T: Copy> Order<T> {
    /// Drops the holes and renumbers the elements from `first`, in the queues too (each queue
    /// meets its elements in the same order as the deque). Returns the next free number.
    fn squeeze(&mut self, queues: &mut [Queue<T>]) -> u64 {
        self.slots.retain(|slot| slot.queue != HOLE);
        self.holes = 0;
        let mut next = vec![0; queues.len()];
        let mut seq = self.first;
        for slot in &self.slots {
            let queue = slot.queue as usize;
            queues[queue].entries_mut()[next[queue]].seq = seq;
            next[queue] += 1;
            seq += 1;
        }
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matching::{Class, Envelope, Pattern};

    fn msg(tag: u32) -> Envelope {
        Envelope {
            source: 0,
            tag: tag as i32,
            class: Class::PointToPoint,
        }
    }

    #[test]
    fn holes_behind_an_old_element_are_squeezed_out_and_order_kept() {
        let mut store: Store<Envelope> = Store::new(3, true, Simd::detect());
        for i in 0..300u32 {
            store.push(i % 3, msg(i), i as u64);
        }
        // Element 0 stays; most of the others go, from every queue.
        for i in (1..300u32).filter(|i| i % 5 != 0) {
            let key = fingerprint(0, i as i32);
            let (at, _) = store.find(i % 3, u64::MAX, key, |&item| item == msg(i));
            assert_eq!(store.remove(at.unwrap()).id, i as u64);
        }
        let order = store.order.as_ref().unwrap();
        assert!(
            order.slots.len() < 2 * store.len(),
            "holes were not squeezed out"
        );
        assert_eq!(store.len(), 60);
        // Arrival order and the sequence numbers of every queue still agree.
        for want in (0..300u32).filter(|i| i % 5 == 0) {
            let (at, depth) = store.find_oldest(|_| true);
            let at = at.unwrap();
            assert_eq!((store.entry(at).item, depth), (msg(want), 1));
            store.remove(at);
            for queue in 0..3 {
                let seqs: Vec<u64> = store.queues[queue]
                    .entries()
                    .iter()
                    .map(|e| e.seq)
                    .collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]));
            }
        }
        store.push(1, msg(7), 7);
        assert_eq!(
            store
                .find_oldest(|&item| item == msg(7))
                .0
                .map(|at| store.entry(at).id),
            Some(7)
        );
    }

    #[test]
    fn fingerprint_scan_finds_wildcards_and_counts_inspected_elements() {
        for simd in Simd::available_all() {
            fingerprint_scan_at(simd);
        }
    }

    fn fingerprint_scan_at(simd: Simd) {
        let want = |source, tag| Pattern {
            source,
            tag,
            class: Class::PointToPoint,
        };
        let mut store: Store<Pattern> = Store::new(1, false, simd);
        for tag in 0..40 {
            store.push(0, want(1, tag), tag as u64);
        }
        store.push(0, want(1, ANY_TAG), 40);
        store.push(0, want(1, 5), 41);
        let find = |store: &Store<Pattern>, tag, bound| {
            let env = Envelope {
                source: 1,
                ..msg(tag)
            };
            let key = fingerprint(1, tag as i32);
            let (at, depth) = store.find(0, bound, key, |p| p.matches(&env));
            (at.map(|at| store.entry(at).id), depth)
        };
        assert_eq!(find(&store, 37, u64::MAX), (Some(37), 38));
        assert_eq!(find(&store, 77, u64::MAX), (Some(40), 41));
        assert_eq!(find(&store, 77, 40), (None, 40));
        // Taken from the front, the middle and the back, the rest keeps its order.
        for id in [0, 1, 20, 41, 2] {
            let at = store.find_id(id).unwrap();
            assert_eq!(store.remove(at).id, id);
        }
        assert_eq!(find(&store, 5, u64::MAX), (Some(5), 3));
        assert_eq!(find(&store, 21, u64::MAX), (Some(21), 18));
        assert_eq!(store.len(), 37);
    }
}
