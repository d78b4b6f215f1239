//! The elements of one side (posted receives or unexpected messages) of an engine.
//!
//! Each queue is a contiguous deque in insertion order, so searching it is a linear scan that
//! the prefetcher follows. Sequence numbers order elements across queues. An ordered store also
//! keeps every element in one arrival-ordered deque, which answers searches that no queue can
//! narrow down (wildcard receives against unexpected messages) at the cost of a list.
//!
//! An emptied queue keeps its buffer, so steady traffic allocates nothing; memory follows the
//! peak queue lengths.

use std::collections::VecDeque;

const HOLE: u32 = u32::MAX;

#[derive(Clone, Copy)]
pub(super) struct Entry<T> {
    pub item: T,
    /// Insertion order over the whole store: lower is older.
    pub seq: u64,
    pub id: u64,
}

/// Where an element is: its queue and its index there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Loc {
    pub queue: u32,
    index: usize,
}

#[derive(Clone, Copy)]
struct Slot<T> {
    item: T,
    /// The element's queue, or `HOLE` once it is gone.
    queue: u32,
}

/// Every element in arrival order: element `first + i` is at `i`. Removed elements leave holes,
/// popped at the front; when holes are the majority they are squeezed out and sequence numbers
/// renumbered, which keeps the deque within twice the elements.
struct Order<T> {
    slots: VecDeque<Slot<T>>,
    first: u64,
    holes: usize,
}

pub(super) struct Store<T> {
    queues: Vec<VecDeque<Entry<T>>>,
    len: usize,
    next_seq: u64,
    order: Option<Order<T>>,
}

impl<T: Copy> Store<T> {
    pub fn new(queues: usize, ordered: bool) -> Self {
        Store {
            queues: (0..queues).map(|_| VecDeque::new()).collect(),
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

    pub fn queue_len(&self, queue: u32) -> usize {
        self.queues[queue as usize].len()
    }

    /// Adds `count` empty queues and returns the index of the first.
    pub fn add_queues(&mut self, count: usize) -> u32 {
        let first = self.queues.len() as u32;
        self.queues
            .resize_with(self.queues.len() + count, VecDeque::new);
        first
    }

    #[inline]
    pub fn entry(&self, at: Loc) -> &Entry<T> {
        &self.queues[at.queue as usize][at.index]
    }

    /// Appends to `queue`; the element is the newest of the store.
    #[inline]
    pub fn push(&mut self, queue: u32, item: T, id: u64) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queues[queue as usize].push_back(Entry { item, seq, id });
        self.len += 1;
        if let Some(order) = &mut self.order {
            order.slots.push_back(Slot { item, queue });
        }
    }

    #[inline]
    pub fn remove(&mut self, at: Loc) -> Entry<T> {
        let queue = &mut self.queues[at.queue as usize];
        let entry = if at.index == 0 {
            queue.pop_front()
        } else if at.index + 1 == queue.len() {
            queue.pop_back()
        } else {
            queue.remove(at.index)
        }
        .expect("element located in its queue");
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
    /// elements were inspected.
    #[inline]
    pub fn find(&self, queue: u32, bound: u64, hit: impl Fn(&T) -> bool) -> (Option<Loc>, usize) {
        let entries = &self.queues[queue as usize];
        if bound == u64::MAX {
            return match entries.iter().position(|e| hit(&e.item)) {
                Some(index) => (Some(Loc { queue, index }), index + 1),
                None => (None, entries.len()),
            };
        }
        for (index, entry) in entries.iter().enumerate() {
            if entry.seq >= bound {
                return (None, index);
            }
            if hit(&entry.item) {
                return (Some(Loc { queue, index }), index + 1);
            }
        }
        (None, entries.len())
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
                let queue = &self.queues[slot.queue as usize];
                let index = queue
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
        self.queues.iter().enumerate().find_map(|(queue, entries)| {
            let index = entries.iter().position(|e| e.id == id)?;
            Some(Loc {
                queue: queue as u32,
                index,
            })
        })
    }

    /// The elements of `queue`, oldest first.
    pub fn items(&self, queue: u32) -> impl Iterator<Item = &T> + '_ {
        self.queues[queue as usize].iter().map(|e| &e.item)
    }
}

impl<T: Copy> Order<T> {
    /// Drops the holes and renumbers the elements from `first`, in the queues too (each queue
    /// meets its elements in the same order as the deque). Returns the next free number.
    fn squeeze(&mut self, queues: &mut [VecDeque<Entry<T>>]) -> u64 {
        self.slots.retain(|slot| slot.queue != HOLE);
        self.holes = 0;
        let mut next = vec![0; queues.len()];
        let mut seq = self.first;
        for slot in &self.slots {
            let queue = slot.queue as usize;
            queues[queue][next[queue]].seq = seq;
            next[queue] += 1;
            seq += 1;
        }
        seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holes_behind_an_old_element_are_squeezed_out_and_order_kept() {
        let mut store: Store<u32> = Store::new(3, true);
        for i in 0..300u32 {
            store.push(i % 3, i, i as u64);
        }
        // Element 0 stays; most of the others go, from every queue.
        for i in (1..300u32).filter(|i| i % 5 != 0) {
            let (at, _) = store.find(i % 3, u64::MAX, |&item| item == i);
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
            assert_eq!((store.entry(at).item, depth), (want, 1));
            store.remove(at);
            for queue in 0..3 {
                let seqs: Vec<u64> = store.queues[queue].iter().map(|e| e.seq).collect();
                assert!(seqs.windows(2).all(|w| w[0] < w[1]));
            }
        }
        store.push(1, 7, 7);
        assert_eq!(
            store
                .find_oldest(|&item| item == 7)
                .0
                .map(|at| store.entry(at).id),
            Some(7)
        );
    }
}
