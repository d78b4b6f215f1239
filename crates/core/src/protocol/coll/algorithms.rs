//! The collective algorithms, as schedule builders (n: communicator size, b: bytes per block
//! or per call):
//!
//! | collective | algorithm |
//! |---|---|
//! | Barrier | dissemination |
//! | Bcast | binomial tree if b < 12 KiB or n < 8; else binomial scatter + ring allgather |
//! | Reduce | Rabenseifner (recursive-halving reduce-scatter + binomial gather) if the op commutes, b > 2 KiB and count ≥ 2^⌊log2 n⌋; else binomial tree (rooted at 0 and sent to the root for non-commutative ops) |
//! | Allreduce | recursive doubling; Rabenseifner (recursive-halving reduce-scatter + recursive-doubling allgather) if the op commutes, b > 2 KiB and count ≥ 2^⌊log2 n⌋ |
//! | Gather, Scatter | binomial tree on packed blocks if n > 10 and b < 1 KiB; else linear |
//! | Gatherv, Scatterv | linear |
//! | Allgather | recursive doubling if n is a power of two and n·b < 80 KiB; Bruck if n·b < 512 KiB; else ring |
//! | Allgatherv | ring |
//! | Alltoall | Bruck if b ≤ 256 B and n ≥ 8; all pairs at once if b ≤ 32 KiB; else pairwise exchange |
//! | Alltoallv, Alltoallw | all pairs at once |
//! | Reduce_scatter(_block) | pairwise exchange if the op commutes; else binomial reduce + linear scatter |
//! | Scan, Exscan | recursive doubling |
//!
//! These follow MPICH's and Open MPI's defaults for the same sizes. Every rank picks its
//! algorithm from values all ranks agree on (communicator size, block size, the op's
//! commutativity), so all ranks run the same one. Data that passes through intermediate ranks
//! travels as packed bytes; data that goes straight to its place travels in the caller's
//! datatype. Reductions are `inout = input op inout`, MPI's operand order (as
//! `MPI_Reduce_local`), so any predefined or user-defined op works.

use super::{size_class, VARYING};

/// An argument is invalid: the executor lets MPI report it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Invalid;

/// What a schedule is built with: the executor's buffers, datatypes and ops, and the rounds
/// the algorithm adds (a round starts once the one before has completed; its actions start in
/// the order they were added).
pub trait Plan {
    /// A place in memory.
    type Addr: Copy;
    /// A datatype.
    type Type: Copy;
    /// A reduction.
    type Op: Copy;
    /// An array of ints the caller passed (counts, displacements).
    type Ints: Copy;
    /// An array of datatypes the caller passed.
    type Types: Copy;

    fn rank(&self) -> i32;
    fn size(&self) -> i32;
    /// The message size class of the call (see [`size_class`]).
    fn set_size_class(&mut self, class: u8);
    fn send(&mut self, data: Data<Self>, peer: i32);
    fn recv(&mut self, data: Data<Self>, peer: i32);
    /// `inout = input op inout` over `count` elements.
    fn reduce(
        &mut self,
        input: Self::Addr,
        inout: Self::Addr,
        count: i32,
        dtype: Self::Type,
        op: Self::Op,
    );
    /// Copies between any layouts with the same type signature.
    fn copy(&mut self, src: Data<Self>, dst: Data<Self>);
    /// Ends the current round: what is added next waits until it has completed.
    fn next_round(&mut self);
    /// `bytes` of scratch memory, freed with the schedule.
    fn temp(&mut self, bytes: i64) -> Self::Addr;

    /// `addr` moved by `bytes` (plain address arithmetic).
    fn at(addr: Self::Addr, bytes: i64) -> Self::Addr;
    /// The address no buffer has (`MPI_BOTTOM`), for a buffer that is not used.
    fn null() -> Self::Addr;
    /// `MPI_IN_PLACE`.
    fn in_place(addr: Self::Addr) -> bool;
    /// Packed bytes (`MPI_PACKED`): on one machine, the plain bytes.
    fn packed() -> Self::Type;
    fn type_info(dtype: Self::Type) -> Result<TypeInfo, Invalid>;
    fn commutative(op: Self::Op) -> Result<bool, Invalid>;
    /// `n` ints of a caller's array; `None` where there is no array.
    fn ints(ints: Self::Ints, n: i32) -> Option<Vec<i32>>;
    /// `n` datatypes of a caller's array; `None` where there is no array.
    fn types(types: Self::Types, n: i32) -> Option<Vec<Self::Type>>;

    /// Scratch room for `count` elements of a type, laid out as in a caller's buffer.
    fn typed_temp(&mut self, count: i32, t: &TypeInfo) -> Self::Addr {
        Self::at(self.temp(t.span(count as i64)), -t.true_lb)
    }
}

/// `count` elements of `dtype` at `ptr`.
pub struct Data<P: Plan + ?Sized> {
    pub ptr: P::Addr,
    pub count: i32,
    pub dtype: P::Type,
}

impl<P: Plan + ?Sized> Clone for Data<P> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<P: Plan + ?Sized> Copy for Data<P> {}

impl<P: Plan + ?Sized> Data<P> {
    pub fn new(ptr: P::Addr, count: i32, dtype: P::Type) -> Data<P> {
        Data { ptr, count, dtype }
    }

    /// `len` packed bytes at `ptr`.
    pub fn bytes(ptr: P::Addr, len: i64) -> Data<P> {
        Data::new(ptr, len as i32, P::packed())
    }
}

/// What an algorithm needs to know of a datatype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TypeInfo {
    /// Bytes of data in one element.
    pub size: i64,
    pub extent: i64,
    pub true_lb: i64,
    pub true_extent: i64,
}

impl TypeInfo {
    /// Elements follow each other without gaps, so `count` of them are plain bytes at the
    /// buffer's address.
    pub fn contiguous(&self) -> bool {
        self.size == self.extent && self.true_extent == self.size && self.true_lb == 0
    }

    /// Bytes spanned by `count` elements, from the first byte of data to the last.
    pub fn span(&self, count: i64) -> i64 {
        if count <= 0 {
            0
        } else {
            self.true_extent + (count - 1) * self.extent
        }
    }
}

fn check_root<P: Plan>(b: &P, root: i32) -> Result<(), Invalid> {
    if (0..b.size()).contains(&root) {
        Ok(())
    } else {
        Err(Invalid)
    }
}

fn check_count(count: i32) -> Result<(), Invalid> {
    if count < 0 {
        Err(Invalid)
    } else {
        Ok(())
    }
}

/// The largest power of two not above `n`.
fn pof2_below(n: i32) -> i32 {
    1 << (31 - (n as u32).leading_zeros())
}

fn lowbit(v: i32) -> i32 {
    v & v.wrapping_neg()
}

/// `n` counts of a caller's array, none negative.
fn counts<P: Plan>(p: P::Ints, n: i32) -> Result<Vec<i32>, Invalid> {
    let v = P::ints(p, n).ok_or(Invalid)?;
    if v.iter().any(|&c| c < 0) {
        return Err(Invalid);
    }
    Ok(v)
}

/// `n` displacements of a caller's array.
fn displacements<P: Plan>(p: P::Ints, n: i32) -> Result<Vec<i32>, Invalid> {
    P::ints(p, n).ok_or(Invalid)
}

/// A binomial tree over ranks relative to `root`: the parent and the children (relative
/// rank offsets `mask`, smallest first) of relative rank `v`.
struct Tree {
    n: i32,
    root: i32,
    v: i32,
}

impl Tree {
    fn new<P: Plan>(b: &P, root: i32) -> Tree {
        Tree {
            n: b.size(),
            root,
            v: (b.rank() - root + b.size()) % b.size(),
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

    /// Relative ranks in the subtree of relative rank `v`.
    fn subtree(&self, v: i32) -> i32 {
        if v == 0 {
            self.n
        } else {
            lowbit(v).min(self.n - v)
        }
    }
}

pub fn barrier<P: Plan>(b: &mut P) -> Result<(), Invalid> {
    let (r, n) = (b.rank(), b.size());
    let none = Data::bytes(P::null(), 0);
    let mut k = 1;
    while k < n {
        b.recv(none, (r - k + n) % n);
        b.send(none, (r + k) % n);
        b.next_round();
        k <<= 1;
    }
    Ok(())
}

pub fn bcast<P: Plan>(
    b: &mut P,
    buf: P::Addr,
    count: i32,
    dtype: P::Type,
    root: i32,
) -> Result<(), Invalid> {
    check_root(b, root)?;
    check_count(count)?;
    let t = P::type_info(dtype)?;
    let bytes = count as i64 * t.size;
    b.set_size_class(size_class(bytes));
    let n = b.size();
    if n == 1 || bytes == 0 {
        return Ok(());
    }
    let tree = Tree::new(b, root);
    let data = Data::new(buf, count, dtype);
    if bytes < 12288 || n < 8 {
        if let Some(parent) = tree.parent() {
            b.recv(data, parent);
        }
        b.next_round();
        for child in tree.children().into_iter().rev() {
            b.send(data, tree.real(child));
        }
        return Ok(());
    }
    // Scatter the bytes down the tree in n chunks, then pass chunks round a ring.
    let v = tree.v;
    let ws = if t.contiguous() { buf } else { b.temp(bytes) };
    if !t.contiguous() && v == 0 {
        b.copy(data, Data::bytes(ws, bytes));
    }
    let chunk = (bytes + n as i64 - 1) / n as i64;
    let piece = |lo: i32, hi: i32| {
        let (lo, hi) = (
            (lo as i64 * chunk).min(bytes),
            (hi as i64 * chunk).min(bytes),
        );
        (hi > lo).then(|| Data::bytes(P::at(ws, lo), hi - lo))
    };
    if let (Some(parent), Some(p)) = (tree.parent(), piece(v, v + tree.subtree(v))) {
        b.recv(p, parent);
    }
    b.next_round();
    for child in tree.children() {
        if let Some(p) = piece(child, child + tree.subtree(child)) {
            b.send(p, tree.real(child));
        }
    }
    b.next_round();
    let (left, right) = (tree.real((v + n - 1) % n), tree.real((v + 1) % n));
    for i in 0..n - 1 {
        let (sj, rj) = ((v - i + n) % n, (v - i - 1 + 2 * n) % n);
        if let Some(p) = piece(rj, rj + 1) {
            b.recv(p, left);
        }
        if let Some(p) = piece(sj, sj + 1) {
            b.send(p, right);
        }
        b.next_round();
    }
    if !t.contiguous() && v != 0 {
        b.copy(Data::bytes(ws, bytes), data);
    }
    Ok(())
}

/// Binomial reduction of `count` elements from `input` into `output` at `root`. A
/// non-commutative op is reduced in rank order on a tree rooted at 0, which then sends the
/// result to `root`.
#[allow(clippy::too_many_arguments)]
fn reduce_tree<P: Plan>(
    b: &mut P,
    input: P::Addr,
    output: P::Addr,
    count: i32,
    dtype: P::Type,
    t: &TypeInfo,
    op: P::Op,
    commutes: bool,
    root: i32,
) {
    if b.size() == 1 {
        b.copy(
            Data::new(input, count, dtype),
            Data::new(output, count, dtype),
        );
        return;
    }
    let tree_root = if commutes { root } else { 0 };
    let tree = Tree::new(b, tree_root);
    let partials: Vec<P::Addr> = tree
        .children()
        .into_iter()
        .map(|child| {
            let tmp = b.typed_temp(count, t);
            b.recv(Data::new(tmp, count, dtype), tree.real(child));
            tmp
        })
        .collect();
    b.next_round();
    // The accumulator always holds the lower ranks: acc op child, MPI's operand order.
    let mut acc = input;
    for tmp in partials {
        b.reduce(acc, tmp, count, dtype, op);
        acc = tmp;
    }
    let acc = Data::new(acc, count, dtype);
    match tree.parent() {
        Some(parent) => b.send(acc, parent),
        None if tree_root == root => b.copy(acc, Data::new(output, count, dtype)),
        None => b.send(acc, root),
    }
    if b.rank() == root && tree_root != root {
        b.next_round();
        b.recv(Data::new(output, count, dtype), tree_root);
    }
}

#[allow(clippy::too_many_arguments)]
pub fn reduce<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    recvbuf: P::Addr,
    count: i32,
    dtype: P::Type,
    op: P::Op,
    root: i32,
) -> Result<(), Invalid> {
    check_root(b, root)?;
    check_count(count)?;
    let t = P::type_info(dtype)?;
    b.set_size_class(size_class(count as i64 * t.size));
    if count == 0 {
        return Ok(());
    }
    let input = if b.rank() == root && P::in_place(sendbuf) {
        recvbuf
    } else {
        sendbuf
    };
    let commutes = P::commutative(op)?;
    if commutes && b.size() > 1 && count as i64 * t.size > 2048 && count >= pof2_below(b.size()) {
        reduce_rabenseifner(b, input, recvbuf, count, dtype, &t, op, root);
    } else {
        reduce_tree(b, input, recvbuf, count, dtype, &t, op, commutes, root);
    }
    Ok(())
}

/// Rabenseifner's reduce: the ranks beyond a power of two fold into their neighbours, the
/// rest reduce-scatter and gather the pieces to the root (or to the neighbour of a folded-out
/// root, which passes the result on).
#[allow(clippy::too_many_arguments)]
fn reduce_rabenseifner<P: Plan>(
    b: &mut P,
    input: P::Addr,
    recvbuf: P::Addr,
    count: i32,
    dtype: P::Type,
    t: &TypeInfo,
    op: P::Op,
    root: i32,
) {
    let (r, n) = (b.rank(), b.size());
    let whole = |p: P::Addr| Data::new(p, count, dtype);
    let work = if r == root {
        recvbuf
    } else {
        b.typed_temp(count, t)
    };
    b.copy(Data::new(input, count, dtype), whole(work));
    let tmp = b.typed_temp(count, t);
    let pof2 = pof2_below(n);
    let rem = n - pof2;
    let newrank_of = |x: i32| if x < 2 * rem { x / 2 } else { x - rem };
    let newrank = if r < 2 * rem {
        if r % 2 == 0 {
            b.send(whole(work), r + 1);
            -1
        } else {
            b.recv(whole(tmp), r - 1);
            b.next_round();
            b.reduce(tmp, work, count, dtype, op);
            r / 2
        }
    } else {
        r - rem
    };
    let real = |nr: i32| if nr < rem { nr * 2 + 1 } else { nr + rem };
    if newrank >= 0 {
        rabenseifner(
            b,
            work,
            tmp,
            count,
            dtype,
            t,
            op,
            newrank,
            pof2,
            real,
            Some(newrank_of(root)),
        );
    }
    if root < 2 * rem && root % 2 == 0 {
        if r == root + 1 {
            b.send(whole(work), root);
        } else if r == root {
            b.next_round();
            b.recv(whole(recvbuf), root + 1);
        }
    }
}

pub fn allreduce<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    recvbuf: P::Addr,
    count: i32,
    dtype: P::Type,
    op: P::Op,
) -> Result<(), Invalid> {
    check_count(count)?;
    let t = P::type_info(dtype)?;
    let bytes = count as i64 * t.size;
    b.set_size_class(size_class(bytes));
    if count == 0 {
        return Ok(());
    }
    let whole = |p: P::Addr| Data::new(p, count, dtype);
    if !P::in_place(sendbuf) {
        b.copy(Data::new(sendbuf, count, dtype), whole(recvbuf));
    }
    let (r, n) = (b.rank(), b.size());
    if n == 1 {
        return Ok(());
    }
    let commutes = P::commutative(op)?;
    let pof2 = pof2_below(n);
    let rem = n - pof2;
    let tmp = b.typed_temp(count, &t);
    // The first 2·rem ranks fold pairwise so a power of two of them remains.
    let newrank = if r < 2 * rem {
        if r % 2 == 0 {
            b.send(whole(recvbuf), r + 1);
            -1
        } else {
            b.recv(whole(tmp), r - 1);
            b.next_round();
            b.reduce(tmp, recvbuf, count, dtype, op);
            r / 2
        }
    } else {
        r - rem
    };
    let real = |nr: i32| if nr < rem { nr * 2 + 1 } else { nr + rem };
    if newrank >= 0 {
        if commutes && bytes > 2048 && count >= pof2 {
            rabenseifner(
                b, recvbuf, tmp, count, dtype, &t, op, newrank, pof2, real, None,
            );
        } else {
            let (mut acc, mut other) = (recvbuf, tmp);
            let mut mask = 1;
            while mask < pof2 {
                let dst = real(newrank ^ mask);
                b.recv(whole(other), dst);
                b.send(whole(acc), dst);
                b.next_round();
                if commutes || dst < r {
                    b.reduce(other, acc, count, dtype, op);
                } else {
                    b.reduce(acc, other, count, dtype, op);
                    std::mem::swap(&mut acc, &mut other);
                }
                mask <<= 1;
            }
            b.copy(whole(acc), whole(recvbuf));
        }
    }
    if r < 2 * rem {
        if r % 2 == 1 {
            b.send(whole(recvbuf), r - 1);
        } else {
            b.next_round();
            b.recv(whole(recvbuf), r + 1);
        }
    }
    Ok(())
}

/// Rabenseifner's algorithm among `pof2` ranks (commutative ops only): reduce-scatter by
/// recursive halving, then the same steps backwards as an allgather by recursive doubling, or,
/// with `gather_to` (a new rank), as a binomial gather of the pieces to it.
#[allow(clippy::too_many_arguments)]
fn rabenseifner<P: Plan>(
    b: &mut P,
    recvbuf: P::Addr,
    tmp: P::Addr,
    count: i32,
    dtype: P::Type,
    t: &TypeInfo,
    op: P::Op,
    newrank: i32,
    pof2: i32,
    real: impl Fn(i32) -> i32,
    gather_to: Option<i32>,
) {
    let mut disps = vec![0i64; pof2 as usize + 1];
    for i in 0..pof2 as usize {
        disps[i + 1] = disps[i] + (count / pof2 + ((i as i32) < count % pof2) as i32) as i64;
    }
    let cnt = |lo: i32, hi: i32| (disps[hi as usize] - disps[lo as usize]) as i32;
    let part = |base: P::Addr, idx: i32| P::at(base, disps[idx as usize] * t.extent);
    let (mut send_idx, mut recv_idx, mut last_idx) = (0, 0, pof2);
    let mut mask = 1;
    while mask < pof2 {
        let newdst = newrank ^ mask;
        let half = pof2 / (mask * 2);
        let (send_cnt, recv_cnt) = if newrank < newdst {
            send_idx = recv_idx + half;
            (cnt(send_idx, last_idx), cnt(recv_idx, send_idx))
        } else {
            recv_idx = send_idx + half;
            (cnt(send_idx, recv_idx), cnt(recv_idx, last_idx))
        };
        let dst = real(newdst);
        b.recv(Data::new(part(tmp, recv_idx), recv_cnt, dtype), dst);
        b.send(Data::new(part(recvbuf, send_idx), send_cnt, dtype), dst);
        b.next_round();
        b.reduce(
            part(tmp, recv_idx),
            part(recvbuf, recv_idx),
            recv_cnt,
            dtype,
            op,
        );
        send_idx = recv_idx;
        mask <<= 1;
        if mask < pof2 {
            last_idx = recv_idx + pof2 / mask;
        }
    }
    mask >>= 1;
    while mask > 0 {
        let newdst = newrank ^ mask;
        let half = pof2 / (mask * 2);
        let (send_cnt, recv_cnt) = if newrank < newdst {
            if mask != pof2 / 2 {
                last_idx += half;
            }
            recv_idx = send_idx + half;
            (cnt(send_idx, recv_idx), cnt(recv_idx, last_idx))
        } else {
            recv_idx = send_idx - half;
            (cnt(send_idx, last_idx), cnt(recv_idx, send_idx))
        };
        let dst = real(newdst);
        match gather_to {
            Some(root) if (newrank ^ root) & mask != 0 => {
                b.send(Data::new(part(recvbuf, send_idx), send_cnt, dtype), dst);
                b.next_round();
                return;
            }
            Some(_) => b.recv(Data::new(part(recvbuf, recv_idx), recv_cnt, dtype), dst),
            None => {
                b.recv(Data::new(part(recvbuf, recv_idx), recv_cnt, dtype), dst);
                b.send(Data::new(part(recvbuf, send_idx), send_cnt, dtype), dst);
            }
        }
        b.next_round();
        if newrank > newdst {
            send_idx = recv_idx;
        }
        mask >>= 1;
    }
}

/// The root's array of one block per rank in gather and scatter, and the block size in bytes
/// (from the root's arguments at the root, from the rank's own elsewhere).
struct RootBlocks<P: Plan> {
    buf: P::Addr,
    count: i32,
    dtype: P::Type,
    extent: i64,
    bytes: i64,
}

impl<P: Plan> RootBlocks<P> {
    fn new(
        b: &mut P,
        root: i32,
        (buf, count, dtype): (P::Addr, i32, P::Type),
        (own_count, own_type): (i32, P::Type),
    ) -> Result<RootBlocks<P>, Invalid> {
        check_root(b, root)?;
        let (bytes, extent) = if b.rank() == root {
            check_count(count)?;
            let t = P::type_info(dtype)?;
            (count as i64 * t.size, t.extent)
        } else {
            check_count(own_count)?;
            (own_count as i64 * P::type_info(own_type)?.size, 0)
        };
        b.set_size_class(size_class(bytes));
        Ok(RootBlocks {
            buf,
            count,
            dtype,
            extent,
            bytes,
        })
    }

    fn slot(&self, i: i32) -> Data<P> {
        Data::new(
            P::at(self.buf, i as i64 * self.count as i64 * self.extent),
            self.count,
            self.dtype,
        )
    }
}

/// Gather and scatter move blocks of one size; binomial trees pay off for many small blocks.
fn rooted_tree(n: i32, block: i64) -> bool {
    n > 10 && block < 1024
}

#[allow(clippy::too_many_arguments)]
pub fn gather<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcount: i32,
    recvtype: P::Type,
    root: i32,
) -> Result<(), Invalid> {
    let blocks = RootBlocks::new(
        b,
        root,
        (recvbuf, recvcount, recvtype),
        (sendcount, sendtype),
    )?;
    let (r, n, block) = (b.rank(), b.size(), blocks.bytes);
    let is_root = r == root;
    let inplace = is_root && P::in_place(sendbuf);
    if block == 0 {
        return Ok(());
    }
    let slot = |i: i32| blocks.slot(i);
    let own = Data::new(sendbuf, sendcount, sendtype);
    if is_root && !inplace {
        b.copy(own, slot(r));
    }
    if !rooted_tree(n, block) {
        if is_root {
            for i in (0..n).filter(|&i| i != r) {
                b.recv(slot(i), i);
            }
        } else {
            b.send(own, root);
        }
        return Ok(());
    }
    let tree = Tree::new(b, root);
    let children = tree.children();
    if children.is_empty() {
        b.send(own, tree.parent().expect("a leaf has a parent"));
        return Ok(());
    }
    // Blocks of the subtree in relative rank order; the own block first.
    let v = tree.v;
    let ws = b.temp(tree.subtree(v) as i64 * block);
    let ws_block =
        |j: i32, len: i32| Data::bytes(P::at(ws, (j - v) as i64 * block), len as i64 * block);
    if !is_root {
        b.copy(own, ws_block(v, 1));
    }
    for &child in &children {
        b.recv(ws_block(child, tree.subtree(child)), tree.real(child));
    }
    b.next_round();
    match tree.parent() {
        Some(parent) => b.send(ws_block(v, tree.subtree(v)), parent),
        None => {
            for j in 1..n {
                b.copy(ws_block(j, 1), slot(tree.real(j)));
            }
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn gatherv<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcounts: P::Ints,
    displs: P::Ints,
    recvtype: P::Type,
    root: i32,
) -> Result<(), Invalid> {
    check_root(b, root)?;
    b.set_size_class(VARYING);
    let (r, n) = (b.rank(), b.size());
    let own = Data::new(sendbuf, sendcount, sendtype);
    if r != root {
        check_count(sendcount)?;
        b.send(own, root);
        return Ok(());
    }
    let counts = counts::<P>(recvcounts, n)?;
    let displs = displacements::<P>(displs, n)?;
    let rext = P::type_info(recvtype)?.extent;
    let slot = |i: i32| {
        Data::new(
            P::at(recvbuf, displs[i as usize] as i64 * rext),
            counts[i as usize],
            recvtype,
        )
    };
    for i in 0..n {
        if i != r {
            b.recv(slot(i), i);
        } else if !P::in_place(sendbuf) {
            b.copy(own, slot(i));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn scatter<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcount: i32,
    recvtype: P::Type,
    root: i32,
) -> Result<(), Invalid> {
    let blocks = RootBlocks::new(
        b,
        root,
        (sendbuf, sendcount, sendtype),
        (recvcount, recvtype),
    )?;
    let (r, n, block) = (b.rank(), b.size(), blocks.bytes);
    let is_root = r == root;
    let inplace = is_root && P::in_place(recvbuf);
    if block == 0 {
        return Ok(());
    }
    let slot = |i: i32| blocks.slot(i);
    let own = Data::new(recvbuf, recvcount, recvtype);
    if is_root && !inplace {
        b.copy(slot(r), own);
    }
    if !rooted_tree(n, block) {
        if is_root {
            for i in (0..n).filter(|&i| i != r) {
                b.send(slot(i), i);
            }
        } else {
            b.recv(own, root);
        }
        return Ok(());
    }
    let tree = Tree::new(b, root);
    let children = tree.children();
    if children.is_empty() {
        b.recv(own, tree.parent().expect("a leaf has a parent"));
        return Ok(());
    }
    let v = tree.v;
    let ws = b.temp(tree.subtree(v) as i64 * block);
    let ws_block =
        |j: i32, len: i32| Data::bytes(P::at(ws, (j - v) as i64 * block), len as i64 * block);
    match tree.parent() {
        Some(parent) => {
            b.recv(ws_block(v, tree.subtree(v)), parent);
            b.next_round();
            b.copy(ws_block(v, 1), own);
        }
        None => {
            for j in 1..n {
                b.copy(slot(tree.real(j)), ws_block(j, 1));
            }
        }
    }
    for &child in children.iter().rev() {
        b.send(ws_block(child, tree.subtree(child)), tree.real(child));
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn scatterv<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcounts: P::Ints,
    displs: P::Ints,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcount: i32,
    recvtype: P::Type,
    root: i32,
) -> Result<(), Invalid> {
    check_root(b, root)?;
    b.set_size_class(VARYING);
    let (r, n) = (b.rank(), b.size());
    let own = Data::new(recvbuf, recvcount, recvtype);
    if r != root {
        check_count(recvcount)?;
        b.recv(own, root);
        return Ok(());
    }
    let counts = counts::<P>(sendcounts, n)?;
    let displs = displacements::<P>(displs, n)?;
    let sext = P::type_info(sendtype)?.extent;
    let slot = |i: i32| {
        Data::new(
            P::at(sendbuf, displs[i as usize] as i64 * sext),
            counts[i as usize],
            sendtype,
        )
    };
    for i in 0..n {
        if i != r {
            b.send(slot(i), i);
        } else if !P::in_place(recvbuf) {
            b.copy(slot(i), own);
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn allgather<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcount: i32,
    recvtype: P::Type,
) -> Result<(), Invalid> {
    check_count(recvcount)?;
    let (r, n) = (b.rank(), b.size());
    let rt = P::type_info(recvtype)?;
    let block = recvcount as i64 * rt.size;
    let total = block * n as i64;
    b.set_size_class(size_class(block));
    if block == 0 {
        return Ok(());
    }
    let inplace = P::in_place(sendbuf);
    let slot = |i: i32| {
        Data::new(
            P::at(recvbuf, i as i64 * recvcount as i64 * rt.extent),
            recvcount,
            recvtype,
        )
    };
    let own = if inplace {
        slot(r)
    } else {
        Data::new(sendbuf, sendcount, sendtype)
    };
    let bytes = |ws: P::Addr, j: i32, len: i32| {
        Data::bytes(P::at(ws, j as i64 * block), len as i64 * block)
    };
    if n.count_ones() == 1 && total < 81920 {
        // Recursive doubling on the blocks in rank order: recvbuf itself when contiguous.
        let ws = if rt.contiguous() {
            recvbuf
        } else {
            b.temp(total)
        };
        b.copy(own, bytes(ws, r, 1));
        let mut mask = 1;
        while mask < n {
            let partner = r ^ mask;
            b.recv(bytes(ws, partner & !(mask - 1), mask), partner);
            b.send(bytes(ws, r & !(mask - 1), mask), partner);
            b.next_round();
            mask <<= 1;
        }
        if !rt.contiguous() {
            for i in (0..n).filter(|&i| i != r || !inplace) {
                b.copy(bytes(ws, i, 1), slot(i));
            }
        }
    } else if total < 524288 {
        // Bruck: block j of the workspace is the block of rank r + j.
        let ws = b.temp(total);
        b.copy(own, bytes(ws, 0, 1));
        let mut k = 1;
        while k < n {
            let len = k.min(n - k);
            b.recv(bytes(ws, k, len), (r + k) % n);
            b.send(bytes(ws, 0, len), (r - k + n) % n);
            b.next_round();
            k <<= 1;
        }
        for j in 0..n {
            let i = (r + j) % n;
            if i != r || !inplace {
                b.copy(bytes(ws, j, 1), slot(i));
            }
        }
    } else {
        b.copy(own, slot(r));
        ring(b, slot);
    }
    Ok(())
}

/// Ring allgather of blocks already in place at each rank: step i passes on block r − i.
fn ring<P: Plan>(b: &mut P, slot: impl Fn(i32) -> Data<P>) {
    let (r, n) = (b.rank(), b.size());
    let (left, right) = ((r + n - 1) % n, (r + 1) % n);
    for i in 0..n - 1 {
        b.recv(slot((r - i - 1 + 2 * n) % n), left);
        b.send(slot((r - i + n) % n), right);
        b.next_round();
    }
}

#[allow(clippy::too_many_arguments)]
pub fn allgatherv<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcounts: P::Ints,
    displs: P::Ints,
    recvtype: P::Type,
) -> Result<(), Invalid> {
    let (r, n) = (b.rank(), b.size());
    let counts = counts::<P>(recvcounts, n)?;
    let displs = displacements::<P>(displs, n)?;
    let rt = P::type_info(recvtype)?;
    let total: i64 = counts.iter().map(|&c| c as i64 * rt.size).sum();
    b.set_size_class(size_class(total / n as i64));
    if total == 0 {
        return Ok(());
    }
    let slot = |i: i32| {
        Data::new(
            P::at(recvbuf, displs[i as usize] as i64 * rt.extent),
            counts[i as usize],
            recvtype,
        )
    };
    if !P::in_place(sendbuf) {
        b.copy(Data::new(sendbuf, sendcount, sendtype), slot(r));
    }
    ring(b, slot);
    Ok(())
}

/// Posts all receives, then all sends, spread so that ranks do not all start with rank 0.
fn all_pairs<P: Plan>(b: &mut P, recv: impl Fn(i32) -> Data<P>, send: impl Fn(i32) -> Data<P>) {
    let (r, n) = (b.rank(), b.size());
    for i in 1..n {
        let src = (r + i) % n;
        b.recv(recv(src), src);
    }
    for i in 1..n {
        let dst = (r - i + n) % n;
        b.send(send(dst), dst);
    }
}

/// `MPI_IN_PLACE` all-to-all: the outgoing blocks are packed first, then received over.
fn in_place_all_pairs<P: Plan>(b: &mut P, recv: impl Fn(i32) -> Data<P>, lens: &[i64]) {
    let (r, n) = (b.rank(), b.size());
    let mut offsets = vec![0i64; n as usize + 1];
    for i in 0..n as usize {
        offsets[i + 1] = offsets[i] + if i as i32 == r { 0 } else { lens[i] };
    }
    let ws = b.temp(offsets[n as usize]);
    let packed = |j: i32| Data::bytes(P::at(ws, offsets[j as usize]), lens[j as usize]);
    for j in (0..n).filter(|&j| j != r) {
        b.copy(recv(j), packed(j));
    }
    all_pairs(b, recv, packed);
}

#[allow(clippy::too_many_arguments)]
pub fn alltoall<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcount: i32,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcount: i32,
    recvtype: P::Type,
) -> Result<(), Invalid> {
    check_count(recvcount)?;
    let (r, n) = (b.rank(), b.size());
    let rt = P::type_info(recvtype)?;
    let block = recvcount as i64 * rt.size;
    b.set_size_class(size_class(block));
    if block == 0 {
        return Ok(());
    }
    let rslot = |i: i32| {
        Data::new(
            P::at(recvbuf, i as i64 * recvcount as i64 * rt.extent),
            recvcount,
            recvtype,
        )
    };
    if P::in_place(sendbuf) {
        in_place_all_pairs(b, rslot, &vec![block; n as usize]);
        return Ok(());
    }
    let sext = P::type_info(sendtype)?.extent;
    let sslot = |i: i32| {
        Data::new(
            P::at(sendbuf, i as i64 * sendcount as i64 * sext),
            sendcount,
            sendtype,
        )
    };
    if block <= 256 && n >= 8 {
        bruck_alltoall(b, block, sslot, rslot);
        return Ok(());
    }
    b.copy(sslot(r), rslot(r));
    if block <= 32768 {
        all_pairs(b, rslot, sslot);
    } else {
        for i in 1..n {
            let (src, dst) = if n.count_ones() == 1 {
                (r ^ i, r ^ i)
            } else {
                ((r - i + n) % n, (r + i) % n)
            };
            b.recv(rslot(src), src);
            b.send(sslot(dst), dst);
            b.next_round();
        }
    }
    Ok(())
}

/// Bruck's all-to-all in ⌈log2 n⌉ steps: block j of the workspace travels j ranks, one bit
/// of j per step.
fn bruck_alltoall<P: Plan>(
    b: &mut P,
    block: i64,
    sslot: impl Fn(i32) -> Data<P>,
    rslot: impl Fn(i32) -> Data<P>,
) {
    let (r, n) = (b.rank(), b.size());
    let ws = b.temp(n as i64 * block);
    let out = b.temp(n as i64 * block);
    let inc = b.temp(n as i64 * block);
    let bytes = |base: P::Addr, j: i32| Data::bytes(P::at(base, j as i64 * block), block);
    for j in 0..n {
        b.copy(sslot((r + j) % n), bytes(ws, j));
    }
    let mut bit = 1;
    while bit < n {
        let moving: Vec<i32> = (0..n).filter(|j| j & bit != 0).collect();
        for (k, &j) in moving.iter().enumerate() {
            b.copy(bytes(ws, j), bytes(out, k as i32));
        }
        let len = moving.len() as i64 * block;
        b.recv(Data::bytes(inc, len), (r - bit + n) % n);
        b.send(Data::bytes(out, len), (r + bit) % n);
        b.next_round();
        for (k, &j) in moving.iter().enumerate() {
            b.copy(bytes(inc, k as i32), bytes(ws, j));
        }
        bit <<= 1;
    }
    for i in 0..n {
        b.copy(bytes(ws, (r - i + n) % n), rslot(i));
    }
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallv<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcounts: P::Ints,
    sdispls: P::Ints,
    sendtype: P::Type,
    recvbuf: P::Addr,
    recvcounts: P::Ints,
    rdispls: P::Ints,
    recvtype: P::Type,
) -> Result<(), Invalid> {
    b.set_size_class(VARYING);
    let (r, n) = (b.rank(), b.size());
    let rcounts = counts::<P>(recvcounts, n)?;
    let rdispls = displacements::<P>(rdispls, n)?;
    let rt = P::type_info(recvtype)?;
    let rslot = |i: i32| {
        Data::new(
            P::at(recvbuf, rdispls[i as usize] as i64 * rt.extent),
            rcounts[i as usize],
            recvtype,
        )
    };
    if P::in_place(sendbuf) {
        let lens: Vec<i64> = rcounts.iter().map(|&c| c as i64 * rt.size).collect();
        in_place_all_pairs(b, rslot, &lens);
        return Ok(());
    }
    let scounts = counts::<P>(sendcounts, n)?;
    let sdispls = displacements::<P>(sdispls, n)?;
    let sext = P::type_info(sendtype)?.extent;
    let sslot = |i: i32| {
        Data::new(
            P::at(sendbuf, sdispls[i as usize] as i64 * sext),
            scounts[i as usize],
            sendtype,
        )
    };
    b.copy(sslot(r), rslot(r));
    all_pairs(b, rslot, sslot);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub fn alltoallw<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    sendcounts: P::Ints,
    sdispls: P::Ints,
    sendtypes: P::Types,
    recvbuf: P::Addr,
    recvcounts: P::Ints,
    rdispls: P::Ints,
    recvtypes: P::Types,
) -> Result<(), Invalid> {
    b.set_size_class(VARYING);
    let (r, n) = (b.rank(), b.size());
    let rcounts = counts::<P>(recvcounts, n)?;
    let rdispls = displacements::<P>(rdispls, n)?;
    let rtypes = P::types(recvtypes, n).ok_or(Invalid)?;
    let rslot = |i: i32| {
        let i = i as usize;
        Data::new(P::at(recvbuf, rdispls[i] as i64), rcounts[i], rtypes[i])
    };
    if P::in_place(sendbuf) {
        let mut lens = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            lens.push(rcounts[i] as i64 * P::type_info(rtypes[i])?.size);
        }
        in_place_all_pairs(b, rslot, &lens);
        return Ok(());
    }
    let scounts = counts::<P>(sendcounts, n)?;
    let sdispls = displacements::<P>(sdispls, n)?;
    let stypes = P::types(sendtypes, n).ok_or(Invalid)?;
    let sslot = |i: i32| {
        let i = i as usize;
        Data::new(P::at(sendbuf, sdispls[i] as i64), scounts[i], stypes[i])
    };
    b.copy(sslot(r), rslot(r));
    all_pairs(b, rslot, sslot);
    Ok(())
}

/// `Reduce_scatter`: block i of the reduced vector (`counts[i]` elements) ends at rank i.
pub fn reduce_scatter<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    recvbuf: P::Addr,
    counts: &[i32],
    dtype: P::Type,
    op: P::Op,
) -> Result<(), Invalid> {
    let (r, n) = (b.rank(), b.size());
    if counts.len() != n as usize {
        return Err(Invalid);
    }
    if counts.iter().any(|&c| c < 0) {
        return Err(Invalid);
    }
    let t = P::type_info(dtype)?;
    let mut disps = vec![0i64; n as usize + 1];
    for i in 0..n as usize {
        disps[i + 1] = disps[i] + counts[i] as i64;
    }
    let total = disps[n as usize];
    b.set_size_class(size_class(total * t.size / n as i64));
    if total == 0 {
        return Ok(());
    }
    let input = if P::in_place(sendbuf) {
        recvbuf
    } else {
        sendbuf
    };
    let block = |base: P::Addr, i: i32| {
        Data::new(
            P::at(base, disps[i as usize] * t.extent),
            counts[i as usize],
            dtype,
        )
    };
    let mine = counts[r as usize];
    if P::commutative(op)? {
        // Pairwise exchange: every rank sends each other rank its block and reduces its own.
        let partials: Vec<P::Addr> = (1..n)
            .filter(|_| mine > 0)
            .map(|i| {
                let tmp = b.typed_temp(mine, &t);
                b.recv(Data::new(tmp, mine, dtype), (r - i + n) % n);
                tmp
            })
            .collect();
        for i in 1..n {
            let dst = (r + i) % n;
            if counts[dst as usize] > 0 {
                b.send(block(input, dst), dst);
            }
        }
        b.next_round();
        let mut acc = block(input, r).ptr;
        for tmp in partials {
            b.reduce(acc, tmp, mine, dtype, op);
            acc = tmp;
        }
        b.copy(Data::new(acc, mine, dtype), Data::new(recvbuf, mine, dtype));
        return Ok(());
    }
    // Non-commutative: reduce the whole vector in rank order at 0, then scatter it.
    let whole = if r == 0 {
        b.typed_temp(total as i32, &t)
    } else {
        P::null()
    };
    reduce_tree(b, input, whole, total as i32, dtype, &t, op, false, 0);
    b.next_round();
    if r == 0 {
        for i in (1..n).filter(|&i| counts[i as usize] > 0) {
            b.send(block(whole, i), i);
        }
        b.copy(block(whole, 0), Data::new(recvbuf, mine, dtype));
    } else if mine > 0 {
        b.recv(Data::new(recvbuf, mine, dtype), 0);
    }
    Ok(())
}

/// Whether a rank's own contribution is in its prefix reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefix {
    /// `MPI_Scan`.
    Inclusive,
    /// `MPI_Exscan`.
    Exclusive,
}

/// `Scan` and `Exscan` by recursive doubling: `partial` holds the
/// reduction over the ranks this rank has heard from, the result only those below it.
#[allow(clippy::too_many_arguments)]
pub fn scan<P: Plan>(
    b: &mut P,
    sendbuf: P::Addr,
    recvbuf: P::Addr,
    count: i32,
    dtype: P::Type,
    op: P::Op,
    prefix: Prefix,
) -> Result<(), Invalid> {
    let exclusive = prefix == Prefix::Exclusive;
    check_count(count)?;
    let t = P::type_info(dtype)?;
    b.set_size_class(size_class(count as i64 * t.size));
    let (r, n) = (b.rank(), b.size());
    if count == 0 {
        return Ok(());
    }
    let whole = |p: P::Addr| Data::new(p, count, dtype);
    let input = if P::in_place(sendbuf) {
        recvbuf
    } else {
        sendbuf
    };
    if !exclusive {
        b.copy(whole(input), whole(recvbuf));
    }
    if n == 1 {
        return Ok(());
    }
    let commutes = P::commutative(op)?;
    let mut partial = b.typed_temp(count, &t);
    let mut tmp = b.typed_temp(count, &t);
    b.copy(whole(input), whole(partial));
    // Exscan: the result is written by the first reduction from below.
    let mut result_set = !exclusive;
    let mut mask = 1;
    while mask < n {
        let dst = r ^ mask;
        if dst < n {
            b.recv(whole(tmp), dst);
            b.send(whole(partial), dst);
            b.next_round();
            if r > dst {
                if result_set {
                    b.reduce(tmp, recvbuf, count, dtype, op);
                } else {
                    b.copy(whole(tmp), whole(recvbuf));
                    result_set = true;
                }
                b.reduce(tmp, partial, count, dtype, op);
            } else if commutes {
                b.reduce(tmp, partial, count, dtype, op);
            } else {
                b.reduce(partial, tmp, count, dtype, op);
                std::mem::swap(&mut partial, &mut tmp);
            }
        }
        mask <<= 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(n: i32, root: i32, rank: i32) -> Tree {
        Tree {
            n,
            root,
            v: (rank - root + n) % n,
        }
    }

    #[test]
    fn binomial_tree_covers_every_rank_once() {
        for n in 1..40 {
            for root in [0, n / 2, n - 1] {
                let mut seen = vec![0; n as usize];
                seen[root as usize] += 1;
                for rank in 0..n {
                    let t = tree(n, root, rank);
                    for child in t.children() {
                        let c = t.real(child);
                        seen[c as usize] += 1;
                        assert_eq!(tree(n, root, c).parent(), Some(rank), "n {n} root {root}");
                    }
                    // A subtree is the node and its children's subtrees.
                    let below: i32 = t.children().iter().map(|&c| t.subtree(c)).sum();
                    assert_eq!(t.subtree(t.v), 1 + below, "n {n} root {root} rank {rank}");
                }
                assert!(seen.iter().all(|&k| k == 1), "n {n} root {root}: {seen:?}");
            }
        }
    }

    #[test]
    fn powers_of_two_below() {
        let cases = [(1, 1), (2, 2), (3, 2), (7, 4), (8, 8), (11, 8), (1000, 512)];
        for (n, p) in cases {
            assert_eq!(pof2_below(n), p);
        }
    }
}
