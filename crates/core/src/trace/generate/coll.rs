//! The shim's collective algorithms (`crates/shim/src/coll/algorithms.rs`) as rounds of
//! receives and sends, without data: which peers a rank receives from and sends to in each
//! round, for the collectives the generated programs call. Kinds and size classes are numbered
//! as the shim numbers them, so generated traces classify their elements as recorded ones do.

use crate::matching::Class;

/// The collectives the generated programs call, numbered as in the shim's `coll::Kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Barrier = 0,
    Bcast = 1,
    Reduce = 2,
    Allreduce = 3,
    Gather = 4,
    Gatherv = 5,
    Alltoall = 10,
    Alltoallv = 11,
}

/// The size class of calls whose blocks differ by rank (`v` forms).
const VARYING: u8 = 15;

/// Message size class: ≤ 8 B is 0, then one class per factor of 4, at most 14.
fn size_class(bytes: i64) -> u8 {
    if bytes <= 8 {
        return 0;
    }
    let bits = 64 - ((bytes - 1) as u64).leading_zeros();
    ((bits - 2) / 2).min(14) as u8
}

/// Peers of one part of a round, in the order the shim posts or sends to them.
#[derive(Clone, Debug, PartialEq)]
pub enum Peers {
    List(Vec<i32>),
    /// `count` ranks `first`, `first + step`, … modulo `n`.
    Ring {
        first: i32,
        step: i32,
        count: i32,
        n: i32,
    },
}

impl Peers {
    pub fn len(&self) -> usize {
        match self {
            Peers::List(v) => v.len(),
            Peers::Ring { count, .. } => *count as usize,
        }
    }

    pub fn get(&self, i: usize) -> i32 {
        match self {
            Peers::List(v) => v[i],
            Peers::Ring { first, step, n, .. } => (first + step * i as i32).rem_euclid(*n),
        }
    }
}

/// Receives or sends, to the peers in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Recv(Peers),
    Send(Peers),
}

/// One collective call on one rank: its class and its rounds (a round starts once every
/// receive of the one before has its message).
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub kind: Kind,
    pub size_class: u8,
    rounds: Vec<Vec<Part>>,
    /// Rounds of a ring allgather after `rounds`, made when asked for: there are n - 1 of them
    /// on every rank, too many to hold for thousands of ranks at once.
    ring: Option<Ring>,
}

/// The ring allgather of a large broadcast, seen from relative rank `v`.
#[derive(Clone, Debug, PartialEq)]
struct Ring {
    v: i32,
    n: i32,
    left: i32,
    right: i32,
    chunk: i64,
    bytes: i64,
}

impl Ring {
    fn piece(&self, j: i32) -> bool {
        (j as i64 * self.chunk).min(self.bytes) < ((j + 1) as i64 * self.chunk).min(self.bytes)
    }

    fn round(&self, i: i32) -> Vec<Part> {
        let (v, n) = (self.v, self.n);
        let (sj, rj) = ((v - i + n) % n, (v - i - 1 + 2 * n) % n);
        let mut parts = Vec::new();
        if self.piece(rj) {
            parts.push(Part::Recv(Peers::List(vec![self.left])));
        }
        if self.piece(sj) {
            parts.push(Part::Send(Peers::List(vec![self.right])));
        }
        parts
    }
}

impl Call {
    pub fn class(&self) -> Class {
        Class::Collective {
            kind: self.kind as u8,
            size_class: self.size_class,
        }
    }

    pub fn round_count(&self) -> usize {
        self.rounds.len() + self.ring.as_ref().map_or(0, |r| r.n as usize - 1)
    }

    /// Round `i` (empty rounds of the ring count too: they complete at once).
    pub fn round(&self, i: usize) -> std::borrow::Cow<'_, [Part]> {
        match self.rounds.get(i) {
            Some(parts) => std::borrow::Cow::Borrowed(parts),
            None => {
                let ring = self.ring.as_ref().expect("a round within round_count");
                std::borrow::Cow::Owned(ring.round((i - self.rounds.len()) as i32))
            }
        }
    }
}

/// Adds parts the way the shim's schedule builder does: consecutive parts of one direction
/// merge, and an empty round is never kept.
struct Rounds {
    done: Vec<Vec<Part>>,
    current: Vec<Part>,
}

impl Rounds {
    fn new() -> Rounds {
        Rounds {
            done: Vec::new(),
            current: Vec::new(),
        }
    }

    fn add(&mut self, recv: bool, peer: i32) {
        match (self.current.last_mut(), recv) {
            (Some(Part::Recv(Peers::List(v))), true)
            | (Some(Part::Send(Peers::List(v))), false) => v.push(peer),
            _ => self.current.push(if recv {
                Part::Recv(Peers::List(vec![peer]))
            } else {
                Part::Send(Peers::List(vec![peer]))
            }),
        }
    }

    fn recv(&mut self, peer: i32) {
        self.add(true, peer);
    }

    fn send(&mut self, peer: i32) {
        self.add(false, peer);
    }

    fn part(&mut self, part: Part) {
        self.current.push(part);
    }

    fn next_round(&mut self) {
        if !self.current.is_empty() {
            self.done.push(std::mem::take(&mut self.current));
        }
    }

    fn call(mut self, kind: Kind, size_class: u8) -> Call {
        self.next_round();
        Call {
            kind,
            size_class,
            rounds: self.done,
            ring: None,
        }
    }
}

fn pof2_below(n: i32) -> i32 {
    1 << (31 - (n as u32).leading_zeros())
}

fn lowbit(v: i32) -> i32 {
    v & v.wrapping_neg()
}

/// A binomial tree rooted at `root`, seen from rank `r` (relative rank `v`).
struct Tree {
    n: i32,
    root: i32,
    v: i32,
}

impl Tree {
    fn new(r: i32, n: i32, root: i32) -> Tree {
        Tree {
            n,
            root,
            v: (r - root + n) % n,
        }
    }

    fn real(&self, v: i32) -> i32 {
        (v + self.root) % self.n
    }

    fn parent(&self) -> Option<i32> {
        (self.v != 0).then(|| self.real(self.v - lowbit(self.v)))
    }

    /// Children as relative ranks, nearest first.
    fn children(&self) -> Vec<i32> {
        let limit = if self.v == 0 { self.n } else { lowbit(self.v) };
        let mut out = Vec::new();
        let mut mask = 1;
        while mask < limit && self.v + mask < self.n {
            out.push(self.v + mask);
            mask <<= 1;
        }
        out
    }

    fn subtree(&self, v: i32) -> i32 {
        if v == 0 {
            self.n
        } else {
            lowbit(v).min(self.n - v)
        }
    }
}

pub fn barrier(r: i32, n: i32) -> Call {
    let mut b = Rounds::new();
    let mut k = 1;
    while k < n {
        b.recv((r - k + n) % n);
        b.send((r + k) % n);
        b.next_round();
        k <<= 1;
    }
    b.call(Kind::Barrier, 0)
}

pub fn bcast(r: i32, n: i32, bytes: i64, root: i32) -> Call {
    let mut b = Rounds::new();
    let sc = size_class(bytes);
    if n == 1 || bytes == 0 {
        return b.call(Kind::Bcast, sc);
    }
    let tree = Tree::new(r, n, root);
    if bytes < 12288 || n < 8 {
        if let Some(parent) = tree.parent() {
            b.recv(parent);
        }
        b.next_round();
        for child in tree.children().into_iter().rev() {
            b.send(tree.real(child));
        }
        return b.call(Kind::Bcast, sc);
    }
    // Binomial scatter of n chunks, then a ring allgather; empty chunks travel nowhere.
    let chunk = (bytes + n as i64 - 1) / n as i64;
    let piece = |lo: i32, hi: i32| (lo as i64 * chunk).min(bytes) < (hi as i64 * chunk).min(bytes);
    let v = tree.v;
    if let Some(parent) = tree.parent() {
        if piece(v, v + tree.subtree(v)) {
            b.recv(parent);
        }
    }
    b.next_round();
    for child in tree.children() {
        if piece(child, child + tree.subtree(child)) {
            b.send(tree.real(child));
        }
    }
    let mut call = b.call(Kind::Bcast, sc);
    call.ring = Some(Ring {
        v,
        n,
        left: tree.real((v + n - 1) % n),
        right: tree.real((v + 1) % n),
        chunk,
        bytes,
    });
    call
}

/// Reduce of a commutative op over few bytes (a binomial tree to the root), as the programs
/// call it.
pub fn reduce(r: i32, n: i32, bytes: i64, root: i32) -> Call {
    let mut b = Rounds::new();
    if n > 1 {
        up_the_tree(&mut b, r, n, root);
    }
    b.call(Kind::Reduce, size_class(bytes))
}

/// Receives from the children of a binomial tree, then (a round later) a send to the parent.
fn up_the_tree(b: &mut Rounds, r: i32, n: i32, root: i32) {
    let tree = Tree::new(r, n, root);
    for child in tree.children() {
        b.recv(tree.real(child));
    }
    b.next_round();
    if let Some(parent) = tree.parent() {
        b.send(parent);
    }
}

/// Allreduce of `count` elements of `elem` bytes with a commutative op: recursive doubling, or
/// Rabenseifner's reduce-scatter and allgather above 2 KiB.
pub fn allreduce(r: i32, n: i32, count: i64, elem: i64) -> Call {
    let bytes = count * elem;
    let mut b = Rounds::new();
    if n == 1 || count == 0 {
        return b.call(Kind::Allreduce, size_class(bytes));
    }
    let pof2 = pof2_below(n);
    let rem = n - pof2;
    let newrank = if r < 2 * rem {
        if r % 2 == 0 {
            b.send(r + 1);
            -1
        } else {
            b.recv(r - 1);
            b.next_round();
            r / 2
        }
    } else {
        r - rem
    };
    let real = |nr: i32| if nr < rem { nr * 2 + 1 } else { nr + rem };
    if newrank >= 0 {
        let exchange = |b: &mut Rounds, mask: i32| {
            let dst = real(newrank ^ mask);
            b.recv(dst);
            b.send(dst);
            b.next_round();
        };
        let mut mask = 1;
        while mask < pof2 {
            exchange(&mut b, mask);
            mask <<= 1;
        }
        if bytes > 2048 && count >= pof2 as i64 {
            // The allgather half of Rabenseifner's: the same partners backwards.
            mask >>= 1;
            while mask > 0 {
                exchange(&mut b, mask);
                mask >>= 1;
            }
        }
    }
    if r < 2 * rem {
        if r % 2 == 1 {
            b.send(r - 1);
        } else {
            b.next_round();
            b.recv(r + 1);
        }
    }
    b.call(Kind::Allreduce, size_class(bytes))
}

/// Gather of `block` bytes per rank: a binomial tree for many small blocks, else linear.
pub fn gather(r: i32, n: i32, block: i64, root: i32) -> Call {
    let mut b = Rounds::new();
    let sc = size_class(block);
    if block == 0 || n == 1 {
        return b.call(Kind::Gather, sc);
    }
    if !(n > 10 && block < 1024) {
        return linear_to_root(b, r, n, root).call(Kind::Gather, sc);
    }
    up_the_tree(&mut b, r, n, root);
    b.call(Kind::Gather, sc)
}

fn linear_to_root(mut b: Rounds, r: i32, n: i32, root: i32) -> Rounds {
    if r == root {
        for i in (0..n).filter(|&i| i != root) {
            b.recv(i);
        }
    } else {
        b.send(root);
    }
    b
}

pub fn gatherv(r: i32, n: i32, root: i32) -> Call {
    linear_to_root(Rounds::new(), r, n, root).call(Kind::Gatherv, VARYING)
}

/// Every receive (from the next ranks up) before every send (to the next ranks down).
fn all_pairs(b: &mut Rounds, r: i32, n: i32) {
    if n > 1 {
        let ring = |first: i32, step: i32| Peers::Ring {
            first,
            step,
            count: n - 1,
            n,
        };
        b.part(Part::Recv(ring(r + 1, 1)));
        b.part(Part::Send(ring(r - 1, -1)));
    }
}

pub fn alltoall(r: i32, n: i32, block: i64) -> Call {
    let mut b = Rounds::new();
    let sc = size_class(block);
    if block == 0 {
        return b.call(Kind::Alltoall, sc);
    }
    if block <= 256 && n >= 8 {
        let mut bit = 1;
        while bit < n {
            b.recv((r - bit + n) % n);
            b.send((r + bit) % n);
            b.next_round();
            bit <<= 1;
        }
    } else if block <= 32768 {
        all_pairs(&mut b, r, n);
    } else {
        for i in 1..n {
            let (src, dst) = if n.count_ones() == 1 {
                (r ^ i, r ^ i)
            } else {
                ((r - i + n) % n, (r + i) % n)
            };
            b.recv(src);
            b.send(dst);
            b.next_round();
        }
    }
    b.call(Kind::Alltoall, sc)
}

pub fn alltoallv(r: i32, n: i32) -> Call {
    let mut b = Rounds::new();
    all_pairs(&mut b, r, n);
    b.call(Kind::Alltoallv, VARYING)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every message some rank sends in a round is received by its destination, and nothing
    /// else is received: per (sender, receiver) pair, as many sends as receives.
    fn balanced(n: i32, call: impl Fn(i32) -> Call) {
        let mut pairs: HashMap<(i32, i32), i64> = HashMap::new();
        let mut kind = None;
        for r in 0..n {
            let c = call(r);
            assert!(kind.is_none_or(|k| k == (c.kind, c.size_class)), "n={n}");
            kind = Some((c.kind, c.size_class));
            for i in 0..c.round_count() {
                for part in c.round(i).iter() {
                    let (peers, sign, from_peer) = match part {
                        Part::Recv(p) => (p, -1, true),
                        Part::Send(p) => (p, 1, false),
                    };
                    for i in 0..peers.len() {
                        let peer = peers.get(i);
                        assert!(
                            (0..n).contains(&peer) && peer != r,
                            "n={n} r={r} peer {peer}"
                        );
                        let key = if from_peer { (peer, r) } else { (r, peer) };
                        *pairs.entry(key).or_default() += sign;
                    }
                }
            }
        }
        assert!(pairs.values().all(|&v| v == 0), "n={n}: {pairs:?}");
    }

    #[test]
    fn every_send_has_its_receive() {
        for n in [1, 2, 3, 5, 8, 11, 16, 24, 33] {
            balanced(n, |r| barrier(r, n));
            for bytes in [8, 4 * n as i64, 16384] {
                balanced(n, |r| bcast(r, n, bytes, 0));
                balanced(n, |r| bcast(r, n, bytes, n - 1));
            }
            balanced(n, |r| reduce(r, n, 8, 0));
            balanced(n, |r| reduce(r, n, 8, n / 2));
            for (count, elem) in [(1, 8), (2, 8), (n as i64 * 200, 4)] {
                balanced(n, |r| allreduce(r, n, count, elem));
            }
            for block in [32, 4096] {
                balanced(n, |r| gather(r, n, block, 0));
            }
            balanced(n, |r| gatherv(r, n, 0));
            for block in [4, 1024, 65536] {
                balanced(n, |r| alltoall(r, n, block));
            }
            balanced(n, |r| alltoallv(r, n));
        }
    }

    #[test]
    fn algorithms_change_where_the_shim_changes_them() {
        // Gather: linear to the root up to 10 ranks, a tree beyond.
        assert_eq!(gather(0, 10, 32, 0).rounds[0].len(), 1);
        assert_eq!(
            gather(0, 11, 32, 0).rounds[0],
            vec![Part::Recv(Peers::List(vec![1, 2, 4, 8]))]
        );
        // Alltoall: Bruck's log2 n rounds for small blocks from 8 ranks on.
        assert_eq!(alltoall(0, 16, 4).rounds.len(), 4);
        assert_eq!(alltoall(0, 7, 4).rounds.len(), 1);
        // Allreduce: Rabenseifner's doubles the steps above 2 KiB.
        assert_eq!(allreduce(0, 16, 1, 8).rounds.len(), 4);
        assert_eq!(allreduce(0, 1024, 1024, 4).rounds.len(), 20);
        assert_eq!(size_class(8), 0);
        assert_eq!(size_class(32), 1);
        assert_eq!(size_class(33), 2);
        assert_eq!(gatherv(0, 4, 0).size_class, VARYING);
    }
}
