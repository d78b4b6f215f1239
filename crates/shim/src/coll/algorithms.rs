//! The collective algorithms, as schedule builders (the table is in the module above).
//!
//! Every rank picks its algorithm from values all ranks agree on (communicator size, block
//! size, the op's commutativity), so all ranks run the same one. Data that passes through
//! intermediate ranks travels as packed bytes (`MPI_PACKED`, the plain bytes on one machine);
//! data that goes straight to its place travels in the user's datatype.
//!
//! Safety, for every `unsafe fn` here: the pointers are the arguments of the MPI call, valid
//! as the standard requires of them until the collective completes.
#![allow(clippy::missing_safety_doc)]

use super::schedule::{at, Builder, Data, TypeInfo};
use super::{size_class, VARYING};
use crate::ffi::*;
use std::os::raw::{c_int, c_void};

type In = *const c_void;
type Out = *mut c_void;

fn in_place(buf: In) -> bool {
    std::ptr::eq(buf, abi().in_place)
}

fn check_root(b: &Builder, root: c_int) -> Result<(), c_int> {
    if (0..b.size).contains(&root) {
        Ok(())
    } else {
        Err(abi().err_root)
    }
}

fn check_count(count: c_int) -> Result<(), c_int> {
    if count < 0 {
        Err(abi().err_count)
    } else {
        Ok(())
    }
}

fn commutative(op: MPI_Op) -> Result<bool, c_int> {
    crate::mpi::op_commutative(op)
}

/// The largest power of two not above `n`.
fn pof2_below(n: c_int) -> c_int {
    1 << (31 - (n as u32).leading_zeros())
}

fn lowbit(v: c_int) -> c_int {
    v & v.wrapping_neg()
}

/// `n` entries of a user array.
unsafe fn ints(p: *const c_int, n: c_int) -> Result<Vec<c_int>, c_int> {
    if p.is_null() {
        return Err(abi().err_arg);
    }
    let v = std::slice::from_raw_parts(p, n as usize).to_vec();
    if v.iter().any(|&c| c < 0) {
        return Err(abi().err_count);
    }
    Ok(v)
}

/// A binomial tree over ranks relative to `root`: the parent and the children (relative
/// rank offsets `mask`, smallest first) of relative rank `v`.
struct Tree {
    n: c_int,
    root: c_int,
    v: c_int,
}

impl Tree {
    fn new(b: &Builder, root: c_int) -> Tree {
        Tree {
            n: b.size,
            root,
            v: (b.rank - root + b.size) % b.size,
        }
    }

    fn real(&self, v: c_int) -> c_int {
        (v + self.root) % self.n
    }

    fn parent(&self) -> Option<c_int> {
        (self.v != 0).then(|| self.real(self.v - lowbit(self.v)))
    }

    /// Children as relative ranks, nearest first.
    fn children(&self) -> Vec<c_int> {
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
    fn subtree(&self, v: c_int) -> c_int {
        if v == 0 {
            self.n
        } else {
            lowbit(v).min(self.n - v)
        }
    }
}

pub fn barrier(b: &mut Builder) -> Result<(), c_int> {
    let (r, n) = (b.rank, b.size);
    let none = Data::bytes(std::ptr::null(), 0);
    let mut k = 1;
    while k < n {
        b.recv(none, (r - k + n) % n);
        b.send(none, (r + k) % n);
        b.next_round();
        k <<= 1;
    }
    Ok(())
}

pub unsafe fn bcast(
    b: &mut Builder,
    buf: Out,
    count: c_int,
    dtype: MPI_Datatype,
    root: c_int,
) -> Result<(), c_int> {
    check_root(b, root)?;
    check_count(count)?;
    let t = TypeInfo::of(dtype)?;
    let bytes = count as i64 * t.size;
    b.size_class = size_class(bytes);
    let n = b.size;
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
    let piece = |lo: c_int, hi: c_int| {
        let (lo, hi) = (
            (lo as i64 * chunk).min(bytes),
            (hi as i64 * chunk).min(bytes),
        );
        (hi > lo).then(|| Data::bytes(at(ws, lo), hi - lo))
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
fn reduce_tree(
    b: &mut Builder,
    input: In,
    output: Out,
    count: c_int,
    dtype: MPI_Datatype,
    t: &TypeInfo,
    op: MPI_Op,
    commutes: bool,
    root: c_int,
) {
    if b.size == 1 {
        b.copy(
            Data::new(input, count, dtype),
            Data::new(output, count, dtype),
        );
        return;
    }
    let tree_root = if commutes { root } else { 0 };
    let tree = Tree::new(b, tree_root);
    let partials: Vec<Out> = tree
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
    if b.rank == root && tree_root != root {
        b.next_round();
        b.recv(Data::new(output, count, dtype), tree_root);
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn reduce(
    b: &mut Builder,
    sendbuf: In,
    recvbuf: Out,
    count: c_int,
    dtype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
) -> Result<(), c_int> {
    check_root(b, root)?;
    check_count(count)?;
    let t = TypeInfo::of(dtype)?;
    b.size_class = size_class(count as i64 * t.size);
    if count == 0 {
        return Ok(());
    }
    let input = if b.rank == root && in_place(sendbuf) {
        recvbuf as In
    } else {
        sendbuf
    };
    let commutes = commutative(op)?;
    if commutes && b.size > 1 && count as i64 * t.size > 2048 && count >= pof2_below(b.size) {
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
fn reduce_rabenseifner(
    b: &mut Builder,
    input: In,
    recvbuf: Out,
    count: c_int,
    dtype: MPI_Datatype,
    t: &TypeInfo,
    op: MPI_Op,
    root: c_int,
) {
    let (r, n) = (b.rank, b.size);
    let whole = |p: Out| Data::new(p, count, dtype);
    let work = if r == root {
        recvbuf
    } else {
        b.typed_temp(count, t)
    };
    b.copy(Data::new(input, count, dtype), whole(work));
    let tmp = b.typed_temp(count, t);
    let pof2 = pof2_below(n);
    let rem = n - pof2;
    let newrank_of = |x: c_int| if x < 2 * rem { x / 2 } else { x - rem };
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
    let real = |nr: c_int| if nr < rem { nr * 2 + 1 } else { nr + rem };
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

pub unsafe fn allreduce(
    b: &mut Builder,
    sendbuf: In,
    recvbuf: Out,
    count: c_int,
    dtype: MPI_Datatype,
    op: MPI_Op,
) -> Result<(), c_int> {
    check_count(count)?;
    let t = TypeInfo::of(dtype)?;
    let bytes = count as i64 * t.size;
    b.size_class = size_class(bytes);
    if count == 0 {
        return Ok(());
    }
    let whole = |p: Out| Data::new(p, count, dtype);
    if !in_place(sendbuf) {
        b.copy(Data::new(sendbuf, count, dtype), whole(recvbuf));
    }
    let (r, n) = (b.rank, b.size);
    if n == 1 {
        return Ok(());
    }
    let commutes = commutative(op)?;
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
    let real = |nr: c_int| if nr < rem { nr * 2 + 1 } else { nr + rem };
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
fn rabenseifner(
    b: &mut Builder,
    recvbuf: Out,
    tmp: Out,
    count: c_int,
    dtype: MPI_Datatype,
    t: &TypeInfo,
    op: MPI_Op,
    newrank: c_int,
    pof2: c_int,
    real: impl Fn(c_int) -> c_int,
    gather_to: Option<c_int>,
) {
    let mut disps = vec![0i64; pof2 as usize + 1];
    for i in 0..pof2 as usize {
        disps[i + 1] = disps[i] + (count / pof2 + ((i as c_int) < count % pof2) as c_int) as i64;
    }
    let cnt = |lo: c_int, hi: c_int| (disps[hi as usize] - disps[lo as usize]) as c_int;
    let part = |base: Out, idx: c_int| at(base, disps[idx as usize] * t.extent);
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
struct RootBlocks {
    buf: In,
    count: c_int,
    dtype: MPI_Datatype,
    extent: i64,
    bytes: i64,
}

impl RootBlocks {
    unsafe fn new(
        b: &mut Builder,
        root: c_int,
        (buf, count, dtype): (In, c_int, MPI_Datatype),
        (own_count, own_type): (c_int, MPI_Datatype),
    ) -> Result<RootBlocks, c_int> {
        check_root(b, root)?;
        let (bytes, extent) = if b.rank == root {
            check_count(count)?;
            let t = TypeInfo::of(dtype)?;
            (count as i64 * t.size, t.extent)
        } else {
            check_count(own_count)?;
            (own_count as i64 * TypeInfo::of(own_type)?.size, 0)
        };
        b.size_class = size_class(bytes);
        Ok(RootBlocks {
            buf,
            count,
            dtype,
            extent,
            bytes,
        })
    }

    fn slot(&self, i: c_int) -> Data {
        Data::new(
            at(self.buf, i as i64 * self.count as i64 * self.extent),
            self.count,
            self.dtype,
        )
    }
}

/// Gather and scatter move blocks of one size; binomial trees pay off for many small blocks.
fn rooted_tree(n: c_int, block: i64) -> bool {
    n > 10 && block < 1024
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn gather(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
) -> Result<(), c_int> {
    let blocks = RootBlocks::new(
        b,
        root,
        (recvbuf, recvcount, recvtype),
        (sendcount, sendtype),
    )?;
    let (r, n, block) = (b.rank, b.size, blocks.bytes);
    let is_root = r == root;
    let inplace = is_root && in_place(sendbuf);
    if block == 0 {
        return Ok(());
    }
    let slot = |i: c_int| blocks.slot(i);
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
        |j: c_int, len: c_int| Data::bytes(at(ws, (j - v) as i64 * block), len as i64 * block);
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
pub unsafe fn gatherv(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
) -> Result<(), c_int> {
    check_root(b, root)?;
    b.size_class = VARYING;
    let (r, n) = (b.rank, b.size);
    let own = Data::new(sendbuf, sendcount, sendtype);
    if r != root {
        check_count(sendcount)?;
        b.send(own, root);
        return Ok(());
    }
    let counts = ints(recvcounts, n)?;
    let displs = std::slice::from_raw_parts(displs, n as usize);
    let rext = TypeInfo::of(recvtype)?.extent;
    let slot = |i: c_int| {
        Data::new(
            at(recvbuf, displs[i as usize] as i64 * rext),
            counts[i as usize],
            recvtype,
        )
    };
    for i in 0..n {
        if i != r {
            b.recv(slot(i), i);
        } else if !in_place(sendbuf) {
            b.copy(own, slot(i));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn scatter(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
) -> Result<(), c_int> {
    let blocks = RootBlocks::new(
        b,
        root,
        (sendbuf, sendcount, sendtype),
        (recvcount, recvtype),
    )?;
    let (r, n, block) = (b.rank, b.size, blocks.bytes);
    let is_root = r == root;
    let inplace = is_root && in_place(recvbuf);
    if block == 0 {
        return Ok(());
    }
    let slot = |i: c_int| blocks.slot(i);
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
        |j: c_int, len: c_int| Data::bytes(at(ws, (j - v) as i64 * block), len as i64 * block);
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
pub unsafe fn scatterv(
    b: &mut Builder,
    sendbuf: In,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
) -> Result<(), c_int> {
    check_root(b, root)?;
    b.size_class = VARYING;
    let (r, n) = (b.rank, b.size);
    let own = Data::new(recvbuf, recvcount, recvtype);
    if r != root {
        check_count(recvcount)?;
        b.recv(own, root);
        return Ok(());
    }
    let counts = ints(sendcounts, n)?;
    let displs = std::slice::from_raw_parts(displs, n as usize);
    let sext = TypeInfo::of(sendtype)?.extent;
    let slot = |i: c_int| {
        Data::new(
            at(sendbuf, displs[i as usize] as i64 * sext),
            counts[i as usize],
            sendtype,
        )
    };
    for i in 0..n {
        if i != r {
            b.send(slot(i), i);
        } else if !in_place(recvbuf) {
            b.copy(slot(i), own);
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn allgather(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcount: c_int,
    recvtype: MPI_Datatype,
) -> Result<(), c_int> {
    check_count(recvcount)?;
    let (r, n) = (b.rank, b.size);
    let rt = TypeInfo::of(recvtype)?;
    let block = recvcount as i64 * rt.size;
    let total = block * n as i64;
    b.size_class = size_class(block);
    if block == 0 {
        return Ok(());
    }
    let inplace = in_place(sendbuf);
    let slot = |i: c_int| {
        Data::new(
            at(recvbuf, i as i64 * recvcount as i64 * rt.extent),
            recvcount,
            recvtype,
        )
    };
    let own = if inplace {
        slot(r)
    } else {
        Data::new(sendbuf, sendcount, sendtype)
    };
    let bytes =
        |ws: Out, j: c_int, len: c_int| Data::bytes(at(ws, j as i64 * block), len as i64 * block);
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
fn ring(b: &mut Builder, slot: impl Fn(c_int) -> Data) {
    let (r, n) = (b.rank, b.size);
    let (left, right) = ((r + n - 1) % n, (r + 1) % n);
    for i in 0..n - 1 {
        b.recv(slot((r - i - 1 + 2 * n) % n), left);
        b.send(slot((r - i + n) % n), right);
        b.next_round();
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn allgatherv(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
) -> Result<(), c_int> {
    let (r, n) = (b.rank, b.size);
    let counts = ints(recvcounts, n)?;
    let displs = std::slice::from_raw_parts(displs, n as usize).to_vec();
    let rt = TypeInfo::of(recvtype)?;
    let total: i64 = counts.iter().map(|&c| c as i64 * rt.size).sum();
    b.size_class = size_class(total / n as i64);
    if total == 0 {
        return Ok(());
    }
    let slot = |i: c_int| {
        Data::new(
            at(recvbuf, displs[i as usize] as i64 * rt.extent),
            counts[i as usize],
            recvtype,
        )
    };
    if !in_place(sendbuf) {
        b.copy(Data::new(sendbuf, sendcount, sendtype), slot(r));
    }
    ring(b, slot);
    Ok(())
}

/// Posts all receives, then all sends, spread so that ranks do not all start with rank 0.
fn all_pairs(b: &mut Builder, recv: impl Fn(c_int) -> Data, send: impl Fn(c_int) -> Data) {
    let (r, n) = (b.rank, b.size);
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
fn in_place_all_pairs(b: &mut Builder, recv: impl Fn(c_int) -> Data, lens: &[i64]) {
    let (r, n) = (b.rank, b.size);
    let mut offsets = vec![0i64; n as usize + 1];
    for i in 0..n as usize {
        offsets[i + 1] = offsets[i] + if i as c_int == r { 0 } else { lens[i] };
    }
    let ws = b.temp(offsets[n as usize]);
    let packed = |j: c_int| Data::bytes(at(ws, offsets[j as usize]), lens[j as usize]);
    for j in (0..n).filter(|&j| j != r) {
        b.copy(recv(j), packed(j));
    }
    all_pairs(b, recv, packed);
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoall(
    b: &mut Builder,
    sendbuf: In,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcount: c_int,
    recvtype: MPI_Datatype,
) -> Result<(), c_int> {
    check_count(recvcount)?;
    let (r, n) = (b.rank, b.size);
    let rt = TypeInfo::of(recvtype)?;
    let block = recvcount as i64 * rt.size;
    b.size_class = size_class(block);
    if block == 0 {
        return Ok(());
    }
    let rslot = |i: c_int| {
        Data::new(
            at(recvbuf, i as i64 * recvcount as i64 * rt.extent),
            recvcount,
            recvtype,
        )
    };
    if in_place(sendbuf) {
        in_place_all_pairs(b, rslot, &vec![block; n as usize]);
        return Ok(());
    }
    let sext = TypeInfo::of(sendtype)?.extent;
    let sslot = |i: c_int| {
        Data::new(
            at(sendbuf, i as i64 * sendcount as i64 * sext),
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
fn bruck_alltoall(
    b: &mut Builder,
    block: i64,
    sslot: impl Fn(c_int) -> Data,
    rslot: impl Fn(c_int) -> Data,
) {
    let (r, n) = (b.rank, b.size);
    let ws = b.temp(n as i64 * block);
    let out = b.temp(n as i64 * block);
    let inc = b.temp(n as i64 * block);
    let bytes = |base: Out, j: c_int| Data::bytes(at(base, j as i64 * block), block);
    for j in 0..n {
        b.copy(sslot((r + j) % n), bytes(ws, j));
    }
    let mut bit = 1;
    while bit < n {
        let moving: Vec<c_int> = (0..n).filter(|j| j & bit != 0).collect();
        for (k, &j) in moving.iter().enumerate() {
            b.copy(bytes(ws, j), bytes(out, k as c_int));
        }
        let len = moving.len() as i64 * block;
        b.recv(Data::bytes(inc, len), (r - bit + n) % n);
        b.send(Data::bytes(out, len), (r + bit) % n);
        b.next_round();
        for (k, &j) in moving.iter().enumerate() {
            b.copy(bytes(inc, k as c_int), bytes(ws, j));
        }
        bit <<= 1;
    }
    for i in 0..n {
        b.copy(bytes(ws, (r - i + n) % n), rslot(i));
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallv(
    b: &mut Builder,
    sendbuf: In,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: Out,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
) -> Result<(), c_int> {
    b.size_class = VARYING;
    let (r, n) = (b.rank, b.size);
    let rcounts = ints(recvcounts, n)?;
    let rdispls = std::slice::from_raw_parts(rdispls, n as usize).to_vec();
    let rt = TypeInfo::of(recvtype)?;
    let rslot = |i: c_int| {
        Data::new(
            at(recvbuf, rdispls[i as usize] as i64 * rt.extent),
            rcounts[i as usize],
            recvtype,
        )
    };
    if in_place(sendbuf) {
        let lens: Vec<i64> = rcounts.iter().map(|&c| c as i64 * rt.size).collect();
        in_place_all_pairs(b, rslot, &lens);
        return Ok(());
    }
    let scounts = ints(sendcounts, n)?;
    let sdispls = std::slice::from_raw_parts(sdispls, n as usize).to_vec();
    let sext = TypeInfo::of(sendtype)?.extent;
    let sslot = |i: c_int| {
        Data::new(
            at(sendbuf, sdispls[i as usize] as i64 * sext),
            scounts[i as usize],
            sendtype,
        )
    };
    b.copy(sslot(r), rslot(r));
    all_pairs(b, rslot, sslot);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallw(
    b: &mut Builder,
    sendbuf: In,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: Out,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
) -> Result<(), c_int> {
    b.size_class = VARYING;
    let (r, n) = (b.rank, b.size);
    let rcounts = ints(recvcounts, n)?;
    let rdispls = std::slice::from_raw_parts(rdispls, n as usize).to_vec();
    let rtypes = std::slice::from_raw_parts(recvtypes, n as usize).to_vec();
    let rslot = |i: c_int| {
        let i = i as usize;
        Data::new(at(recvbuf, rdispls[i] as i64), rcounts[i], rtypes[i])
    };
    if in_place(sendbuf) {
        let mut lens = Vec::with_capacity(n as usize);
        for i in 0..n as usize {
            lens.push(rcounts[i] as i64 * TypeInfo::of(rtypes[i])?.size);
        }
        in_place_all_pairs(b, rslot, &lens);
        return Ok(());
    }
    let scounts = ints(sendcounts, n)?;
    let sdispls = std::slice::from_raw_parts(sdispls, n as usize).to_vec();
    let stypes = std::slice::from_raw_parts(sendtypes, n as usize).to_vec();
    let sslot = |i: c_int| {
        let i = i as usize;
        Data::new(at(sendbuf, sdispls[i] as i64), scounts[i], stypes[i])
    };
    b.copy(sslot(r), rslot(r));
    all_pairs(b, rslot, sslot);
    Ok(())
}

/// `Reduce_scatter`: block i of the reduced vector (`counts[i]` elements) ends at rank i.
pub unsafe fn reduce_scatter(
    b: &mut Builder,
    sendbuf: In,
    recvbuf: Out,
    counts: &[c_int],
    dtype: MPI_Datatype,
    op: MPI_Op,
) -> Result<(), c_int> {
    let (r, n) = (b.rank, b.size);
    if counts.len() != n as usize {
        return Err(abi().err_arg);
    }
    if counts.iter().any(|&c| c < 0) {
        return Err(abi().err_count);
    }
    let t = TypeInfo::of(dtype)?;
    let mut disps = vec![0i64; n as usize + 1];
    for i in 0..n as usize {
        disps[i + 1] = disps[i] + counts[i] as i64;
    }
    let total = disps[n as usize];
    b.size_class = size_class(total * t.size / n as i64);
    if total == 0 {
        return Ok(());
    }
    let input = if in_place(sendbuf) {
        recvbuf as In
    } else {
        sendbuf
    };
    let block = |base: In, i: c_int| {
        Data::new(
            at(base, disps[i as usize] * t.extent),
            counts[i as usize],
            dtype,
        )
    };
    let mine = counts[r as usize];
    if commutative(op)? {
        // Pairwise exchange: every rank sends each other rank its block and reduces its own.
        let partials: Vec<Out> = (1..n)
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
        let mut acc = block(input, r).ptr as In;
        for tmp in partials {
            b.reduce(acc, tmp, mine, dtype, op);
            acc = tmp;
        }
        b.copy(Data::new(acc, mine, dtype), Data::new(recvbuf, mine, dtype));
        return Ok(());
    }
    // Non-commutative: reduce the whole vector in rank order at 0, then scatter it.
    let whole = if r == 0 {
        b.typed_temp(total as c_int, &t)
    } else {
        std::ptr::null_mut()
    };
    reduce_tree(b, input, whole, total as c_int, dtype, &t, op, false, 0);
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

/// `Scan` (`exclusive` false) and `Exscan` by recursive doubling: `partial` holds the
/// reduction over the ranks this rank has heard from, the result only those below it.
#[allow(clippy::too_many_arguments)]
pub unsafe fn scan(
    b: &mut Builder,
    sendbuf: In,
    recvbuf: Out,
    count: c_int,
    dtype: MPI_Datatype,
    op: MPI_Op,
    exclusive: bool,
) -> Result<(), c_int> {
    check_count(count)?;
    let t = TypeInfo::of(dtype)?;
    b.size_class = size_class(count as i64 * t.size);
    let (r, n) = (b.rank, b.size);
    if count == 0 {
        return Ok(());
    }
    let whole = |p: In| Data::new(p, count, dtype);
    let input = if in_place(sendbuf) {
        recvbuf as In
    } else {
        sendbuf
    };
    if !exclusive {
        b.copy(whole(input), whole(recvbuf));
    }
    if n == 1 {
        return Ok(());
    }
    let commutes = commutative(op)?;
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

    fn tree(n: c_int, root: c_int, rank: c_int) -> Tree {
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
                    let below: c_int = t.children().iter().map(|&c| t.subtree(c)).sum();
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
