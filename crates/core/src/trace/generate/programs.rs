//! The benchmark programs of `ci/bench/` as simulated threads: the same MPI calls in the same
//! order (receives, sends, waits, collectives, and the repetitions of `bench.h`), with the
//! computation between them as simulated time. Each program makes its operations one block at
//! a time, and large loops of receives or sends stay compact until the simulation reaches
//! them, so thousands of ranks fit in memory.

use super::sim::{Script, Step};
use super::Rng;
use crate::protocol::coll::{algorithms as a, Element, Kind, Peers, Shape};

/// A collective a program calls (blocking), before it is laid out for one rank.
#[derive(Clone, Copy, Debug)]
pub enum Collective {
    Barrier,
    Bcast { bytes: i64, root: i32 },
    Reduce { bytes: i64, root: i32 },
    Allreduce { count: i64, elem: i64 },
    Gather { block: i64, root: i32 },
    Gatherv { root: i32 },
    Alltoall { block: i64 },
    Alltoallv,
}

impl Collective {
    /// The call on rank `r` of `n`, laid out by the shim's own algorithms: byte buffers,
    /// commutative reductions, equal blocks (the `v` forms one element per rank).
    fn call(self, r: i32, n: i32) -> Shape {
        const BYTE: Element = Element(1);
        let shape = match self {
            Collective::Barrier => Shape::of(Kind::Barrier, r, n, a::barrier),
            Collective::Bcast { bytes, root } => Shape::of(Kind::Bcast, r, n, |p| {
                a::bcast(p, (), bytes as i32, BYTE, root)
            }),
            Collective::Reduce { bytes, root } => Shape::of(Kind::Reduce, r, n, |p| {
                a::reduce(p, (), (), bytes as i32, BYTE, (), root)
            }),
            Collective::Allreduce { count, elem } => Shape::of(Kind::Allreduce, r, n, |p| {
                a::allreduce(p, (), (), count as i32, Element(elem), ())
            }),
            Collective::Gather { block, root } => Shape::of(Kind::Gather, r, n, |p| {
                a::gather(p, (), block as i32, BYTE, (), block as i32, BYTE, root)
            }),
            Collective::Gatherv { root } => Shape::of(Kind::Gatherv, r, n, |p| {
                a::gatherv(p, (), 1, BYTE, (), 1, 0, BYTE, root)
            }),
            Collective::Alltoall { block } => Shape::of(Kind::Alltoall, r, n, |p| {
                a::alltoall(p, (), block as i32, BYTE, (), block as i32, BYTE)
            }),
            Collective::Alltoallv => Shape::of(Kind::Alltoallv, r, n, |p| {
                a::alltoallv(p, (), 1, 0, BYTE, (), 1, 0, BYTE)
            }),
        };
        shape.expect("the programs call collectives with valid arguments")
    }
}

/// Tags `first`, `first + step`, … (`count` of them).
#[derive(Clone, Copy, Debug)]
pub struct Tags {
    pub first: i32,
    pub step: i32,
    pub count: i32,
}

impl Tags {
    pub fn one(tag: i32) -> Tags {
        Tags {
            first: tag,
            step: 1,
            count: 1,
        }
    }
}

/// One operation of a block; `Recvs` and `Sends` go through every peer, and for each peer
/// through every tag.
#[derive(Clone, Debug)]
pub enum Op {
    Recvs(Peers, Tags),
    Sends(Peers, Tags, u32),
    WaitAll,
    Compute(f64),
    Collective(Collective),
    /// Every thread of the rank meets here (a pthread barrier).
    ThreadBarrier,
}

/// A thread's program: blocks of operations, made by `block(i)` until it gives none.
pub struct Program<F> {
    rank: i32,
    size: i32,
    block: F,
    next_block: usize,
    ops: std::collections::VecDeque<Op>,
    /// Position inside the front `Recvs`/`Sends`: peer, tag.
    at: (usize, i32),
    /// Collective calls so far on the communicator (numbers the tags).
    seq: u32,
}

impl<F: FnMut(usize) -> Option<Vec<Op>>> Program<F> {
    pub fn new(rank: i32, size: i32, block: F) -> Program<F> {
        Program {
            rank,
            size,
            block,
            next_block: 0,
            ops: Default::default(),
            at: (0, 0),
            seq: 0,
        }
    }
}

impl<F: FnMut(usize) -> Option<Vec<Op>>> Script for Program<F> {
    fn next(&mut self) -> Option<Step> {
        loop {
            let Some(op) = self.ops.front() else {
                let ops = (self.block)(self.next_block)?;
                self.next_block += 1;
                self.ops.extend(ops);
                continue;
            };
            let step = match op {
                Op::Recvs(peers, tags) | Op::Sends(peers, tags, _) => {
                    let (p, t) = self.at;
                    if p == peers.len() || tags.count == 0 {
                        self.at = (0, 0);
                        self.ops.pop_front();
                        continue;
                    }
                    let (peer, tag) = (peers.get(p), tags.first + tags.step * t);
                    self.at = if t + 1 == tags.count {
                        (p + 1, 0)
                    } else {
                        (p, t + 1)
                    };
                    match op {
                        Op::Sends(_, _, bytes) => Step::Send {
                            dst: peer,
                            tag,
                            bytes: *bytes,
                        },
                        _ => Step::Post { src: peer, tag },
                    }
                }
                Op::WaitAll => Step::WaitAll,
                Op::Compute(ns) => Step::Compute { ns: *ns },
                Op::ThreadBarrier => Step::ThreadBarrier,
                Op::Collective(c) => {
                    let call = c.call(self.rank, self.size);
                    self.seq += 1;
                    Step::Collective {
                        call,
                        seq: self.seq - 1,
                    }
                }
            };
            if !matches!(op, Op::Recvs(..) | Op::Sends(..)) {
                self.ops.pop_front();
            }
            return Some(step);
        }
    }
}

/// Ranks `from`, `from - 1`, … down to `to` (inclusive); none if `from < to`.
fn down(from: i32, to: i32, n: i32) -> Peers {
    Peers::Ring {
        first: from,
        step: -1,
        count: (from - to + 1).max(0),
        n,
    }
}

/// Every other rank, starting above `r` and going round.
fn others_up(r: i32, n: i32) -> Peers {
    Peers::Ring {
        first: r + 1,
        step: 1,
        count: n - 1,
        n,
    }
}

fn pairs(list: &[(i32, i32)]) -> Vec<Op> {
    list.iter()
        .map(|&(peer, tag)| (peer, Tags::one(tag)))
        .map(|(peer, tags)| (Peers::List(vec![peer]), tags))
        .map(|(peers, tags)| Op::Recvs(peers, tags))
        .collect()
}

fn send_pairs(list: &[(i32, i32)], bytes: u32) -> Vec<Op> {
    list.iter()
        .map(|&(peer, tag)| Op::Sends(Peers::List(vec![peer]), Tags::one(tag), bytes))
        .collect()
}

/// `bench.h`'s repetitions: a warm-up and `reps` runs, each followed by a reduce of its time
/// to rank 0; `run(i)` gives block `i` of one run.
fn repeated(
    reps: usize,
    blocks_per_run: usize,
    mut run: impl FnMut(usize) -> Vec<Op>,
) -> impl FnMut(usize) -> Option<Vec<Op>> {
    move |i| {
        let (rep, b) = (i / (blocks_per_run + 1), i % (blocks_per_run + 1));
        if rep > reps {
            return None;
        }
        Some(if b < blocks_per_run {
            run(b)
        } else {
            vec![Op::Collective(Collective::Reduce { bytes: 8, root: 0 })]
        })
    }
}

/// `coll.c hotspot ITERS`: every rank sends 16 messages to rank 0, which posts their receives
/// in the opposite order, while all ranks gather (MPI_Gather and MPI_Gatherv of 4 doubles) to
/// it; two warm-up iterations, a barrier before the timed ones, and a reduce of the time to
/// rank 0 after them.
pub fn hotspot(r: i32, n: i32, iters: usize) -> impl FnMut(usize) -> Option<Vec<Op>> {
    const MSGS: i32 = 16;
    move |i| {
        if i == iters + 2 {
            return Some(vec![Op::Collective(Collective::Reduce {
                bytes: 8,
                root: 0,
            })]);
        }
        if i > iters + 2 {
            return None;
        }
        let mut ops = Vec::new();
        if i == 2 {
            ops.push(Op::Collective(Collective::Barrier));
        }
        let down_tags = Tags {
            first: MSGS - 1,
            step: -1,
            count: MSGS,
        };
        if r == 0 {
            ops.push(Op::Recvs(down(n - 1, 1, n), down_tags));
        } else {
            let tags = Tags {
                first: 0,
                step: 1,
                count: MSGS,
            };
            ops.push(Op::Sends(Peers::List(vec![0]), tags, 4));
        }
        ops.push(Op::Collective(Collective::Gather { block: 32, root: 0 }));
        ops.push(Op::Collective(Collective::Gatherv { root: 0 }));
        ops.push(Op::WaitAll);
        Some(ops)
    }
}

/// What a simulated computation costs per unit of work.
#[derive(Clone, Copy, Debug)]
pub struct Costs {
    /// One pair interaction of the N-body force loop.
    pub interaction_ns: f64,
    /// One key through a radix sort pass (bucketing, counting sort, copy, sum).
    pub key_ns: f64,
    /// One cell or message word touched by the AMR update.
    pub cell_ns: f64,
}

/// `app_radix -n KEYS -i ITERS -r REPS`: per pass an MPI_Alltoall of counts, an
/// MPI_Alltoallv of keys, a ring MPI_Sendrecv and an MPI_Allreduce check.
pub fn radix(
    r: i32,
    n: i32,
    keys: usize,
    iters: usize,
    reps: usize,
    costs: Costs,
) -> impl FnMut(usize) -> Option<Vec<Op>> {
    let pass_ns = keys as f64 * costs.key_ns;
    repeated(reps, iters + 2, move |b| match b {
        0 => vec![
            Op::Compute(keys as f64 * costs.key_ns / 4.0),
            Op::Collective(Collective::Allreduce { count: 1, elem: 8 }),
            Op::Collective(Collective::Barrier),
        ],
        b if b <= iters => {
            let pass = b as i32 - 1;
            let mut ops = vec![
                Op::Compute(pass_ns / 2.0),
                Op::Collective(Collective::Alltoall { block: 4 }),
                Op::Collective(Collective::Alltoallv),
                Op::Compute(pass_ns / 2.0),
            ];
            ops.extend(pairs(&[((r - 1 + n) % n, pass)]));
            ops.extend(send_pairs(&[((r + 1) % n, pass)], 4));
            ops.push(Op::WaitAll);
            ops.push(Op::Collective(Collective::Allreduce { count: 2, elem: 8 }));
            ops
        }
        _ => vec![
            Op::Compute(keys as f64 * costs.key_ns / 4.0),
            Op::Collective(Collective::Allreduce { count: 1, elem: 8 }),
        ],
    })
}

/// `app_nbody -b BODIES -c CHUNKS -i STEPS -e EVERY -r REPS`: per step a receive for every
/// chunk of every other rank's block (last source first, last chunk first), the chunks sent
/// to every other rank, the forces, and every EVERY steps an energy MPI_Allreduce.
pub fn nbody(
    r: i32,
    n: i32,
    (bodies, chunks): (usize, i32),
    (steps, every, reps): (usize, usize, usize),
    costs: Costs,
) -> impl FnMut(usize) -> Option<Vec<Op>> {
    const TAG_STEPS: usize = 8;
    let interactions = (bodies * bodies * n as usize) as f64;
    let chunk_bytes = (bodies as u32 / chunks as u32).max(1) * 5 * 8;
    repeated(reps, steps + 2, move |b| match b {
        0 => vec![Op::Collective(Collective::Barrier)],
        b if b <= steps => {
            let step = b - 1;
            let tags_down = Tags {
                first: ((step % TAG_STEPS) as i32 + 1) * chunks - 1,
                step: -1,
                count: chunks,
            };
            let tags_up = Tags {
                first: (step % TAG_STEPS) as i32 * chunks,
                step: 1,
                count: chunks,
            };
            let mut ops = vec![
                Op::Recvs(down(n - 1, r + 1, n), tags_down),
                Op::Recvs(down(r - 1, 0, n), tags_down),
                Op::Sends(others_up(r, n), tags_up, chunk_bytes),
                Op::WaitAll,
            ];
            if every > 0 && step.is_multiple_of(every) {
                ops.push(Op::Compute(interactions * costs.interaction_ns));
                ops.push(Op::Collective(Collective::Allreduce { count: 1, elem: 8 }));
            }
            ops.push(Op::Compute(interactions * costs.interaction_ns));
            ops
        }
        _ => vec![Op::Collective(Collective::Allreduce { count: 1, elem: 8 })],
    })
}

/// The non-periodic 3-D grid of `app_miniamr` (MPI_Dims_create's factors, largest first).
fn dims3(n: i32) -> [i32; 3] {
    let mut dims = [1; 3];
    let mut m = n;
    let mut factors = Vec::new();
    let mut f = 2;
    while m > 1 {
        while m % f == 0 {
            factors.push(f);
            m /= f;
        }
        f += 1;
    }
    for &f in factors.iter().rev() {
        let smallest = (0..3).min_by_key(|&i| dims[i]).expect("three dims");
        dims[smallest] *= f;
    }
    dims.sort_unstable_by(|a, b| b.cmp(a));
    dims
}

/// The six neighbours of `r` (−x, +x, −y, +y, −z, +z), −1 at the grid's faces.
fn grid_neighbours(r: i32, dims: [i32; 3]) -> [i32; 6] {
    let c = [r % dims[0], r / dims[0] % dims[1], r / (dims[0] * dims[1])];
    let mut nbr = [-1; 6];
    let mut stride = 1;
    for a in 0..3 {
        if c[a] > 0 {
            nbr[2 * a] = r - stride;
        }
        if c[a] + 1 < dims[a] {
            nbr[2 * a + 1] = r + stride;
        }
        stride *= dims[a];
    }
    nbr
}

/// `app_miniamr -i STEPS -R EVERY -r REPS`: a halo exchange per step over a 3-D grid, 1 to 4
/// messages per face as the two ranks' block counts say, and every EVERY steps a refinement
/// (MPI_Allreduce of every rank's indicator, MPI_Bcast of the new block counts from rank 0,
/// MPI_Alltoallv of moved blocks). The program computes each rank's indicator from its
/// cells; here it is drawn at random, the same on every rank, so the block counts, and with
/// them the number of halo messages, follow the program's rule but not its values.
pub fn miniamr(
    r: i32,
    n: i32,
    steps: usize,
    every: usize,
    reps: usize,
    costs: Costs,
    seed: u64,
) -> impl FnMut(usize) -> Option<Vec<Op>> {
    const BLOCK: usize = 256;
    let nbr = grid_neighbours(r, dims3(n));
    let mut blocks: Vec<i32> = Vec::new();
    let mut rng = Rng::new(seed);
    let restart = move |blocks: &mut Vec<i32>, rng: &mut Rng| {
        *blocks = (0..n).map(|i| 1 + i % 3).collect();
        *rng = Rng::new(seed);
    };
    repeated(reps, steps + 2, move |b| {
        if b == 0 {
            restart(&mut blocks, &mut rng);
            return vec![Op::Collective(Collective::Barrier)];
        }
        if b > steps {
            return vec![Op::Collective(Collective::Allreduce { count: 1, elem: 8 })];
        }
        let step = b as i32 - 1;
        let messages = |a: i32, b: i32| 1 + (blocks[a as usize] + blocks[b as usize]) % 4;
        let tag = |d: usize, k: i32| (step % 4) * 128 + d as i32 * 16 + k;
        let words = |k: i32| (4 + 64 * (1 + k % 2)) as u32;
        let mut recvs = Vec::new();
        for d in (0..6).rev() {
            if nbr[d] >= 0 {
                for k in 0..messages(r, nbr[d]) {
                    recvs.push((nbr[d], tag(d ^ 1, k)));
                }
            }
        }
        let mut ops = pairs(&recvs);
        for (d, &peer) in nbr.iter().enumerate() {
            if peer >= 0 {
                for k in 0..messages(r, peer) {
                    ops.push(Op::Sends(
                        Peers::List(vec![peer]),
                        Tags::one(tag(d, k)),
                        words(k) * 8,
                    ));
                }
            }
        }
        ops.push(Op::WaitAll);
        ops.push(Op::Compute(
            (blocks[r as usize] as usize * BLOCK + recvs.len() * 100) as f64 * costs.cell_ns,
        ));
        if every > 0 && ((step + 1) as usize).is_multiple_of(every) {
            ops.push(Op::Collective(Collective::Allreduce {
                count: n as i64,
                elem: 4,
            }));
            ops.push(Op::Collective(Collective::Bcast {
                bytes: 4 * n as i64,
                root: 0,
            }));
            ops.push(Op::Collective(Collective::Alltoallv));
            ops.push(Op::Compute(
                (n as usize * 4 + blocks[r as usize] as usize * BLOCK) as f64 * costs.cell_ns,
            ));
            for v in blocks.iter_mut() {
                *v = 1 + (rng.below(8) as i32 + *v) % 4;
            }
        }
        ops
    })
}

/// The periodic torus of `halo_mt` (MPI_Dims_create in 2-D, a ring in 1-D): the neighbour
/// in each direction (−x, +x, −y, +y).
fn torus_neighbours(r: i32, n: i32, dim: usize) -> Vec<i32> {
    let dims = if dim == 1 {
        [n, 1]
    } else {
        // MPI_Dims_create(n, 2): the two most balanced factors, largest first.
        let mut best = [n, 1];
        let mut a = 1;
        while a * a <= n {
            if n % a == 0 {
                best = [n / a, a];
            }
            a += 1;
        }
        best
    };
    let (x, y) = (r % dims[0], r / dims[0]);
    let all = [
        y * dims[0] + (x + dims[0] - 1) % dims[0],
        y * dims[0] + (x + 1) % dims[0],
        ((y + dims[1] - 1) % dims[1]) * dims[0] + x,
        ((y + 1) % dims[1]) * dims[0] + x,
    ];
    all[..2 * dim].to_vec()
}

/// One thread of `halo_mt -t THREADS -i ITERS -r REPS -d DIM`: every iteration a receive from
/// each neighbour with the thread's own tag per direction, a send to each, and a wait; thread
/// 0 joins the barrier before and the reduce after each repetition (a warm-up and REPS).
pub fn halo(
    r: i32,
    n: i32,
    thread: i32,
    iters: usize,
    reps: usize,
    dim: usize,
) -> impl FnMut(usize) -> Option<Vec<Op>> {
    const MAXDIRS: i32 = 4;
    let nbr = torus_neighbours(r, n, dim);
    let tag = move |d: usize| thread * MAXDIRS + d as i32;
    let per_rep = iters + 2;
    move |i| {
        let (rep, b) = (i / per_rep, i % per_rep);
        if rep > reps {
            return None;
        }
        Some(match b {
            0 => {
                let mut ops = vec![Op::ThreadBarrier];
                if thread == 0 {
                    ops.push(Op::Collective(Collective::Barrier));
                }
                ops.push(Op::ThreadBarrier);
                ops
            }
            b if b <= iters => {
                let recvs: Vec<(i32, i32)> = (0..nbr.len()).map(|d| (nbr[d], tag(d ^ 1))).collect();
                let sends: Vec<(i32, i32)> = (0..nbr.len()).map(|d| (nbr[d], tag(d))).collect();
                let mut ops = pairs(&recvs);
                ops.extend(send_pairs(&sends, 8));
                ops.push(Op::WaitAll);
                ops
            }
            _ => {
                let mut ops = vec![Op::ThreadBarrier];
                if thread == 0 && rep > 0 {
                    ops.push(Op::Collective(Collective::Reduce { bytes: 8, root: 0 }));
                }
                ops
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_as_mpi_dims_create_makes_them() {
        assert_eq!(dims3(16), [4, 2, 2]);
        assert_eq!(dims3(32), [4, 4, 2]);
        assert_eq!(dims3(64), [4, 4, 4]);
        assert_eq!(dims3(12), [3, 2, 2]);
        assert_eq!(torus_neighbours(0, 16, 2), vec![3, 1, 12, 4]);
        assert_eq!(torus_neighbours(5, 8, 1), vec![4, 6]);
        assert_eq!(grid_neighbours(0, [4, 2, 2]), [-1, 1, -1, 4, -1, 8]);
    }

    #[test]
    fn loops_expand_peer_by_peer_then_tag_by_tag() {
        let mut p = Program::new(2, 4, |i| {
            (i == 0).then(|| {
                vec![
                    Op::Recvs(
                        down(3, 1, 4),
                        Tags {
                            first: 1,
                            step: -1,
                            count: 2,
                        },
                    ),
                    Op::WaitAll,
                ]
            })
        });
        let steps: Vec<Step> = std::iter::from_fn(|| p.next()).collect();
        let posts: Vec<(i32, i32)> = steps
            .iter()
            .filter_map(|s| match s {
                Step::Post { src, tag } => Some((*src, *tag)),
                _ => None,
            })
            .collect();
        assert_eq!(posts, [(3, 1), (3, 0), (2, 1), (2, 0), (1, 1), (1, 0)]);
        assert_eq!(steps.last(), Some(&Step::WaitAll));
    }
}
