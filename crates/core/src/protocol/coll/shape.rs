//! A collective's schedule without its data: who a rank receives from and sends to in each
//! round. Built by the algorithms themselves through [`Plan`], so tests and the trace
//! generator see exactly the traffic the shim's schedules make.

use super::algorithms::{Data, Invalid, Plan, TypeInfo};
use super::Kind;
use crate::matching::Class;

/// The datatype of a shape: elements of this many contiguous bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Element(pub i64);

/// Peers of one part of a round, in the order the schedule posts or sends to them.
#[derive(Clone, Debug, PartialEq, Eq)]
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

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn get(&self, i: usize) -> i32 {
        match self {
            Peers::List(v) => v[i],
            Peers::Ring { first, step, n, .. } => {
                (*first as i64 + *step as i64 * i as i64).rem_euclid(*n as i64) as i32
            }
        }
    }

    /// Adds `peer` at the end; a run of peers a fixed step apart stays one [`Peers::Ring`]
    /// (all pairs at once lists every other rank).
    fn push(&mut self, peer: i32, n: i32) {
        let next_in_ring = matches!(self, Peers::Ring { .. }) && self.get(self.len()) == peer;
        match self {
            Peers::Ring { count, .. } if next_in_ring => *count += 1,
            Peers::Ring { .. } => {
                let mut list: Vec<i32> = (0..self.len()).map(|i| self.get(i)).collect();
                list.push(peer);
                *self = Peers::List(list);
            }
            Peers::List(v)
                if v.len() == 2 && (v[1] - v[0]).rem_euclid(n) == (peer - v[1]).rem_euclid(n) =>
            {
                *self = Peers::Ring {
                    first: v[0],
                    step: (v[1] - v[0]).rem_euclid(n),
                    count: 3,
                    n,
                };
            }
            Peers::List(v) => v.push(peer),
        }
    }
}

/// Receives or sends, to the peers in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Part {
    Recv(Peers),
    Send(Peers),
}

/// One collective call on one rank: its class and its rounds (a round starts once every
/// receive of the one before has its message).
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    pub kind: Kind,
    pub size_class: u8,
    rank: i32,
    size: i32,
    /// Each distinct round with the number of times it follows itself (a ring's n − 1
    /// rounds are one).
    rounds: Vec<(Vec<Part>, usize)>,
    /// Where each entry of `rounds` ends, counting rounds.
    ends: Vec<usize>,
    current: Vec<Part>,
}

impl Shape {
    /// The shape of collective `kind` on rank `rank` of `size`, as `build` (an algorithm) lays
    /// it out.
    pub fn of(
        kind: Kind,
        rank: i32,
        size: i32,
        build: impl FnOnce(&mut Shape) -> Result<(), Invalid>,
    ) -> Result<Shape, Invalid> {
        let mut shape = Shape {
            kind,
            size_class: 0,
            rank,
            size,
            rounds: Vec::new(),
            ends: Vec::new(),
            current: Vec::new(),
        };
        build(&mut shape)?;
        shape.next_round();
        let mut end = 0;
        shape.ends = shape
            .rounds
            .iter()
            .map(|(_, times)| {
                end += times;
                end
            })
            .collect();
        Ok(shape)
    }

    pub fn class(&self) -> Class {
        self.kind.class(self.size_class)
    }

    pub fn round_count(&self) -> usize {
        self.ends.last().copied().unwrap_or(0)
    }

    /// Round `i`, below [`round_count`](Self::round_count).
    pub fn round(&self, i: usize) -> &[Part] {
        let at = self.ends.partition_point(|&end| end <= i);
        &self.rounds[at].0
    }

    fn add(&mut self, recv: bool, peer: i32) {
        let n = self.size;
        match (self.current.last_mut(), recv) {
            (Some(Part::Recv(peers)), true) | (Some(Part::Send(peers)), false) => {
                peers.push(peer, n)
            }
            _ => self.current.push(if recv {
                Part::Recv(Peers::List(vec![peer]))
            } else {
                Part::Send(Peers::List(vec![peer]))
            }),
        }
    }
}

impl Plan for Shape {
    type Addr = ();
    type Type = Element;
    type Op = ();
    /// Every entry of an array is this value.
    type Ints = i32;
    type Types = Element;

    fn rank(&self) -> i32 {
        self.rank
    }

    fn size(&self) -> i32 {
        self.size
    }

    fn set_size_class(&mut self, class: u8) {
        self.size_class = class;
    }

    fn send(&mut self, _data: Data<Self>, peer: i32) {
        self.add(false, peer);
    }

    fn recv(&mut self, _data: Data<Self>, peer: i32) {
        self.add(true, peer);
    }

    fn reduce(&mut self, _input: (), _inout: (), _count: i32, _dtype: Element, _op: ()) {}

    fn copy(&mut self, _src: Data<Self>, _dst: Data<Self>) {}

    fn next_round(&mut self) {
        if self.current.is_empty() {
            return;
        }
        let round = std::mem::take(&mut self.current);
        match self.rounds.last_mut() {
            Some((last, times)) if *last == round => *times += 1,
            _ => self.rounds.push((round, 1)),
        }
    }

    fn temp(&mut self, _bytes: i64) {}

    fn at(_addr: (), _bytes: i64) {}

    fn null() {}

    fn in_place(_addr: ()) -> bool {
        false
    }

    fn packed() -> Element {
        Element(1)
    }

    fn type_info(dtype: Element) -> Result<TypeInfo, Invalid> {
        Ok(TypeInfo {
            size: dtype.0,
            extent: dtype.0,
            true_lb: 0,
            true_extent: dtype.0,
        })
    }

    /// The programs shapes are made for reduce with commutative ops.
    fn commutative(_op: ()) -> Result<bool, Invalid> {
        Ok(true)
    }

    fn ints(value: i32, n: i32) -> Option<Vec<i32>> {
        Some(vec![value; n.max(0) as usize])
    }

    fn types(dtype: Element, n: i32) -> Option<Vec<Element>> {
        Some(vec![dtype; n.max(0) as usize])
    }
}

#[cfg(test)]
mod tests {
    use super::super::algorithms as a;
    use super::*;
    use std::collections::HashMap;

    const BYTE: Element = Element(1);

    /// Every collective on rank `r` of `n` with blocks (or counts) of `count` elements of
    /// `elem`, rooted at `root`.
    fn every(r: i32, n: i32, count: i32, elem: Element, root: i32) -> Vec<Shape> {
        type Build = Box<dyn FnOnce(&mut Shape) -> Result<(), Invalid>>;
        let (e, c) = (elem, count);
        let builds: Vec<(Kind, Build)> = vec![
            (Kind::Barrier, Box::new(a::barrier)),
            (Kind::Bcast, Box::new(move |p| a::bcast(p, (), c, e, root))),
            (
                Kind::Reduce,
                Box::new(move |p| a::reduce(p, (), (), c, e, (), root)),
            ),
            (
                Kind::Allreduce,
                Box::new(move |p| a::allreduce(p, (), (), c, e, ())),
            ),
            (
                Kind::Gather,
                Box::new(move |p| a::gather(p, (), c, e, (), c, e, root)),
            ),
            (
                Kind::Gatherv,
                Box::new(move |p| a::gatherv(p, (), c, e, (), c, 0, e, root)),
            ),
            (
                Kind::Scatter,
                Box::new(move |p| a::scatter(p, (), c, e, (), c, e, root)),
            ),
            (
                Kind::Scatterv,
                Box::new(move |p| a::scatterv(p, (), c, 0, e, (), c, e, root)),
            ),
            (
                Kind::Allgather,
                Box::new(move |p| a::allgather(p, (), c, e, (), c, e)),
            ),
            (
                Kind::Allgatherv,
                Box::new(move |p| a::allgatherv(p, (), c, e, (), c, 0, e)),
            ),
            (
                Kind::Alltoall,
                Box::new(move |p| a::alltoall(p, (), c, e, (), c, e)),
            ),
            (
                Kind::Alltoallv,
                Box::new(move |p| a::alltoallv(p, (), c, 0, e, (), c, 0, e)),
            ),
            (
                Kind::Alltoallw,
                Box::new(move |p| a::alltoallw(p, (), c, 0, e, (), c, 0, e)),
            ),
            (
                Kind::ReduceScatter,
                Box::new(move |p| {
                    let counts = vec![c; p.size() as usize];
                    a::reduce_scatter(p, (), (), &counts, e, ())
                }),
            ),
            (
                Kind::Scan,
                Box::new(move |p| a::scan(p, (), (), c, e, (), a::Prefix::Inclusive)),
            ),
            (
                Kind::Exscan,
                Box::new(move |p| a::scan(p, (), (), c, e, (), a::Prefix::Exclusive)),
            ),
        ];
        builds
            .into_iter()
            .map(|(kind, build)| Shape::of(kind, r, n, build).expect("valid arguments"))
            .collect()
    }

    /// Every message some rank sends is received by its destination, and nothing else is
    /// received: per (sender, receiver) pair, as many sends as receives; every rank agrees on
    /// the size class.
    #[test]
    fn every_send_has_its_receive() {
        for n in [1, 2, 3, 5, 8, 11, 16, 24, 33] {
            for (count, elem) in [(1, BYTE), (8, Element(4)), (4 * n, BYTE), (16384, BYTE)] {
                for root in [0, n - 1, n / 2] {
                    let shapes: Vec<Vec<Shape>> =
                        (0..n).map(|r| every(r, n, count, elem, root)).collect();
                    for k in 0..shapes[0].len() {
                        let mut pairs: HashMap<(i32, i32), i64> = HashMap::new();
                        let kind = shapes[0][k].kind;
                        for (r, shape) in shapes.iter().map(|s| &s[k]).enumerate() {
                            let r = r as i32;
                            let what = format!("{kind:?} n={n} count={count} root={root}");
                            assert_eq!(shape.class(), shapes[0][k].class(), "{what}");
                            for i in 0..shape.round_count() {
                                for part in shape.round(i) {
                                    let (peers, sign, from_peer) = match part {
                                        Part::Recv(p) => (p, -1, true),
                                        Part::Send(p) => (p, 1, false),
                                    };
                                    for j in 0..peers.len() {
                                        let peer = peers.get(j);
                                        assert!((0..n).contains(&peer) && peer != r, "{what}");
                                        let key = if from_peer { (peer, r) } else { (r, peer) };
                                        *pairs.entry(key).or_default() += sign;
                                    }
                                }
                            }
                        }
                        assert!(pairs.values().all(|&v| v == 0), "{kind:?} n={n}: {pairs:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn algorithms_change_where_the_table_says() {
        let shape = |kind, r, n, build: &dyn Fn(&mut Shape) -> Result<(), Invalid>| {
            Shape::of(kind, r, n, build).unwrap()
        };
        // Gather: linear to the root up to 10 ranks, a tree beyond.
        let gather = |n| {
            shape(Kind::Gather, 0, n, &|p| {
                a::gather(p, (), 32, BYTE, (), 32, BYTE, 0)
            })
        };
        assert_eq!(
            gather(10).round(0),
            [Part::Recv(Peers::Ring {
                first: 1,
                step: 1,
                count: 9,
                n: 10
            })]
        );
        assert_eq!(
            gather(11).round(0),
            [Part::Recv(Peers::List(vec![1, 2, 4, 8]))]
        );
        // Alltoall: Bruck's log2 n rounds for small blocks from 8 ranks on.
        let alltoall = |n| {
            shape(Kind::Alltoall, 0, n, &|p| {
                a::alltoall(p, (), 4, BYTE, (), 4, BYTE)
            })
        };
        assert_eq!(alltoall(16).round_count(), 4);
        assert_eq!(alltoall(7).round_count(), 1);
        // Allreduce: Rabenseifner's doubles the steps above 2 KiB.
        let allreduce = |n, count| {
            shape(Kind::Allreduce, 0, n, &|p| {
                a::allreduce(p, (), (), count, Element(4), ())
            })
        };
        assert_eq!(allreduce(16, 2).round_count(), 4);
        assert_eq!(allreduce(1024, 1024).round_count(), 20);
        // Bcast: a ring of n − 1 rounds after the scatter for large messages on 8 ranks (a
        // leaf of the scatter's tree receives its piece and sends none).
        let bcast = shape(Kind::Bcast, 3, 8, &|p| a::bcast(p, (), 16384, BYTE, 0));
        assert_eq!(bcast.round_count(), 1 + 7);
        assert_eq!(bcast.size_class, super::super::size_class(16384));
        let gatherv = shape(Kind::Gatherv, 0, 4, &|p| {
            a::gatherv(p, (), 1, BYTE, (), 1, 0, BYTE, 0)
        });
        assert_eq!(gatherv.size_class, super::super::VARYING);
    }

    #[test]
    fn every_other_rank_is_one_ring_of_peers() {
        let mut peers = Peers::List(vec![5]);
        for p in [6, 7, 0, 1] {
            peers.push(p, 8);
        }
        assert_eq!(
            peers,
            Peers::Ring {
                first: 5,
                step: 1,
                count: 5,
                n: 8
            }
        );
        peers.push(4, 8);
        assert_eq!(
            (0..peers.len()).map(|i| peers.get(i)).collect::<Vec<_>>(),
            [5, 6, 7, 0, 1, 4]
        );
    }
}
