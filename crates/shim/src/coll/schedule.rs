//! A collective as a schedule (the libNBC model): rounds of sends, receives, local reductions
//! and copies, laid out by the algorithms of `matchshim_core::protocol::coll` through
//! [`Builder`], the shim's [`Plan`] with real buffers. A round starts once the one before it
//! has completed; its actions start in the order they were added, so a reduction placed
//! before a send in the same round has run before the send reads its result. One executor
//! drives schedules from the runtime's progress.

use super::CollComm;
use crate::matching::{Class, Pattern};
use crate::mpi::{self, abi, Code, HeldType, MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request};
use crate::runtime::comm::{Caller, Channel, Comm, Drain, ReceivedBy, Recv, Route};
use crate::runtime::receive::{Buffer, Delivery, Landed, Stage};
use matchshim_core::protocol::coll::{Data, Form, Invalid, Plan, TypeInfo};
use matchshim_core::protocol::Posted;
use std::alloc::{alloc, dealloc, Layout};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// Data of a schedule with real buffers.
pub type Place = Data<Builder>;

fn type_info(dtype: MPI_Datatype) -> Result<TypeInfo, Code> {
    let size = mpi::type_size(dtype)?;
    let ((_, extent), (true_lb, true_extent)) = mpi::type_extents(dtype)?;
    Ok(TypeInfo {
        size,
        extent,
        true_lb,
        true_extent,
    })
}

fn is_contiguous(dtype: MPI_Datatype) -> bool {
    dtype == abi().packed || type_info(dtype).is_ok_and(|t| t.contiguous())
}

fn type_bytes(data: &Place) -> u64 {
    let size = mpi::type_size(data.dtype).unwrap_or(0);
    data.count.max(0) as u64 * size.max(0) as u64
}

/// Scratch memory owned by a schedule.
struct Temp {
    ptr: *mut u8,
    layout: Layout,
}

impl Drop for Temp {
    fn drop(&mut self) {
        // SAFETY: allocated in `Builder::temp` with this layout.
        unsafe { dealloc(self.ptr, self.layout) };
    }
}

pub enum Action {
    Send(Place, c_int),
    Recv(Place, c_int),
    /// `inout = input op inout`, MPI's operand order (as `MPI_Reduce_local`).
    Reduce {
        input: *const c_void,
        inout: *mut c_void,
        count: c_int,
        dtype: MPI_Datatype,
        op: MPI_Op,
    },
    /// Copies between any layouts with the same type signature; `bytes` when both are
    /// contiguous and a `memcpy` does.
    Copy {
        src: Place,
        dst: Place,
        bytes: Option<i64>,
    },
}

/// An int array of the caller's (counts, displacements): as long as the communicator is
/// large, as the standard requires, or null where the call has none.
#[derive(Clone, Copy)]
pub struct Ints(*const c_int);

impl Ints {
    /// # Safety
    /// `p` is null or holds as many ints as the communicator has ranks, until the call
    /// returns.
    pub unsafe fn of(p: *const c_int) -> Ints {
        Ints(p)
    }
}

/// A datatype array of the caller's (`MPI_Alltoallw`), as [`Ints`].
#[derive(Clone, Copy)]
pub struct Types(*const MPI_Datatype);

impl Types {
    /// # Safety
    /// As for [`Ints::of`].
    pub unsafe fn of(p: *const MPI_Datatype) -> Types {
        Types(p)
    }
}

/// Builds a schedule: the algorithms add actions to the current round.
pub struct Builder {
    rank: c_int,
    size: c_int,
    /// Message size class of the call.
    pub size_class: u8,
    rounds: Vec<Vec<Action>>,
    current: Vec<Action>,
    temps: Vec<Temp>,
    pub sent: (u64, u64),
    pub received: (u64, u64),
}

impl Plan for Builder {
    type Addr = *mut c_void;
    type Type = MPI_Datatype;
    type Op = MPI_Op;
    type Ints = Ints;
    type Types = Types;

    fn rank(&self) -> i32 {
        self.rank
    }

    fn size(&self) -> i32 {
        self.size
    }

    fn set_size_class(&mut self, class: u8) {
        self.size_class = class;
    }

    fn send(&mut self, data: Place, peer: i32) {
        self.sent.0 += 1;
        self.sent.1 += type_bytes(&data);
        self.current.push(Action::Send(data, peer));
    }

    fn recv(&mut self, data: Place, peer: i32) {
        self.received.0 += 1;
        self.received.1 += type_bytes(&data);
        self.current.push(Action::Recv(data, peer));
    }

    fn reduce(
        &mut self,
        input: *mut c_void,
        inout: *mut c_void,
        count: c_int,
        dtype: MPI_Datatype,
        op: MPI_Op,
    ) {
        if count > 0 {
            self.current.push(Action::Reduce {
                input: input.cast_const(),
                inout,
                count,
                dtype,
                op,
            });
        }
    }

    fn copy(&mut self, src: Place, dst: Place) {
        let same = src.ptr == dst.ptr && src.count == dst.count && src.dtype == dst.dtype;
        if src.count <= 0 || dst.count <= 0 || same {
            return;
        }
        let bytes =
            (is_contiguous(src.dtype) && is_contiguous(dst.dtype)).then(|| type_bytes(&src) as i64);
        self.current.push(Action::Copy { src, dst, bytes });
    }

    fn next_round(&mut self) {
        if !self.current.is_empty() {
            self.rounds.push(std::mem::take(&mut self.current));
        }
    }

    fn temp(&mut self, bytes: i64) -> *mut c_void {
        let layout = Layout::from_size_align(bytes.max(1) as usize, 64).expect("scratch size");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        self.temps.push(Temp { ptr, layout });
        ptr.cast()
    }

    /// Plain address arithmetic (`MPI_BOTTOM` may be null).
    fn at(addr: *mut c_void, bytes: i64) -> *mut c_void {
        (addr as *mut u8).wrapping_offset(bytes as isize) as *mut c_void
    }

    fn null() -> *mut c_void {
        std::ptr::null_mut()
    }

    fn in_place(addr: *mut c_void) -> bool {
        std::ptr::eq(addr, abi().in_place)
    }

    fn packed() -> MPI_Datatype {
        abi().packed
    }

    fn type_info(dtype: MPI_Datatype) -> Result<TypeInfo, Invalid> {
        type_info(dtype).map_err(|_| Invalid)
    }

    fn commutative(op: MPI_Op) -> Result<bool, Invalid> {
        mpi::op_commutative(op).map_err(|_| Invalid)
    }

    fn ints(ints: Ints, n: i32) -> Option<Vec<i32>> {
        if ints.0.is_null() {
            return None;
        }
        // SAFETY: an array of the caller's with an entry per rank (see `Ints::of`).
        Some(unsafe { std::slice::from_raw_parts(ints.0, n.max(0) as usize) }.to_vec())
    }

    fn types(types: Types, n: i32) -> Option<Vec<MPI_Datatype>> {
        if types.0.is_null() {
            return None;
        }
        // SAFETY: as for `ints`.
        Some(unsafe { std::slice::from_raw_parts(types.0, n.max(0) as usize) }.to_vec())
    }
}

impl Builder {
    pub fn new(rank: c_int, size: c_int) -> Builder {
        Builder {
            rank,
            size,
            size_class: 0,
            rounds: Vec::new(),
            current: Vec::new(),
            temps: Vec::new(),
            sent: (0, 0),
            received: (0, 0),
        }
    }

    /// The schedule to run. A nonblocking one holds duplicates of the derived datatypes it
    /// uses, since the user may free theirs as soon as the call returns.
    pub fn finish(
        mut self,
        coll: Arc<CollComm>,
        comm: &'static Comm,
        tag: c_int,
        class: Class,
        form: Form,
    ) -> Result<Schedule, Code> {
        self.next_round();
        let types = if form == Form::Nonblocking {
            self.own_types()?
        } else {
            Vec::new()
        };
        Ok(Schedule {
            coll,
            comm,
            tag,
            class,
            rounds: self.rounds,
            _temps: self.temps,
            _types: types,
            next: 0,
            requests: Vec::new(),
            waiting: Vec::new(),
            err: abi().success,
        })
    }

    /// Replaces every derived datatype in the actions by one the schedule holds.
    fn own_types(&mut self) -> Result<Vec<HeldType>, Code> {
        let mut held: Vec<(MPI_Datatype, HeldType)> = Vec::new();
        let mut own = |dtype: &mut MPI_Datatype| -> Result<(), Code> {
            if let Some((_, h)) = held.iter().find(|(user, _)| user == dtype) {
                *dtype = h.handle();
                return Ok(());
            }
            let h = HeldType::hold(*dtype)?;
            let user = std::mem::replace(dtype, h.handle());
            held.push((user, h));
            Ok(())
        };
        for action in self.rounds.iter_mut().flatten() {
            match action {
                Action::Send(data, _) | Action::Recv(data, _) => own(&mut data.dtype)?,
                Action::Reduce { dtype, .. } => own(dtype)?,
                Action::Copy { src, dst, .. } => {
                    own(&mut src.dtype)?;
                    own(&mut dst.dtype)?;
                }
            }
        }
        Ok(held.into_iter().map(|(_, h)| h).collect())
    }
}

/// A schedule being run.
pub struct Schedule {
    coll: Arc<CollComm>,
    pub comm: &'static Comm,
    tag: c_int,
    class: Class,
    rounds: Vec<Vec<Action>>,
    _temps: Vec<Temp>,
    /// Datatypes this schedule holds, freed with it.
    _types: Vec<HeldType>,
    /// The round to start next.
    next: usize,
    /// Sends and receives of the current round that MPI is moving.
    requests: Vec<MPI_Request>,
    /// Receives of the current round still waiting in the shim's queues.
    waiting: Vec<Arc<Recv>>,
    pub err: c_int,
}

// SAFETY: the buffers belong to the collective until it completes, as MPI requires; handles
// are plain values; one thread at a time steps a schedule.
unsafe impl Send for Schedule {}

impl Schedule {
    /// The collective state of the communicator it runs on.
    pub fn state(&self) -> &CollComm {
        &self.coll
    }

    /// Moves the schedule on as far as it can without blocking; true once it is complete
    /// (`err` says how it ended).
    pub fn step(&mut self) -> bool {
        let Some(dup) = self.coll.ready(self.comm) else {
            return false;
        };
        loop {
            if !self.waiting.is_empty() {
                self.comm.progress();
                let mut i = 0;
                while i < self.waiting.len() {
                    let ok = match self.waiting[i].stage() {
                        Stage::Queued(_) => {
                            i += 1;
                            continue;
                        }
                        Stage::Matched(message) => {
                            let recv = self.waiting.swap_remove(i);
                            let landed = recv.buffer.land(message, dup, Delivery::Soon);
                            self.landed(landed)
                        }
                        Stage::InMpi(request) => {
                            self.waiting.swap_remove(i);
                            self.requests.push(request);
                            true
                        }
                        Stage::Done => {
                            let recv = self.waiting.swap_remove(i);
                            self.fail(recv.done.outcome().map_or(abi().err_intern, |o| o.err))
                        }
                    };
                    if !ok {
                        return true;
                    }
                }
                if !self.waiting.is_empty() {
                    return false;
                }
            }
            if !self.requests.is_empty() {
                match mpi::testall(&mut self.requests) {
                    Err(err) => {
                        self.err = err;
                        return true;
                    }
                    Ok(false) => return false,
                    Ok(true) => self.requests.clear(),
                }
            }
            if self.next == self.rounds.len() {
                return true;
            }
            let round = std::mem::take(&mut self.rounds[self.next]);
            self.next += 1;
            if !self.start(dup, round) {
                return true;
            }
        }
    }

    fn fail(&mut self, err: c_int) -> bool {
        if err != abi().success {
            self.err = err;
        }
        err == abi().success
    }

    fn landed(&mut self, landed: Landed) -> bool {
        match landed {
            Landed::Done(_, err) => self.fail(err),
            Landed::Moving(request) => {
                self.requests.push(request);
                true
            }
        }
    }

    /// Receives one message of the round: through MPI while the communicator is delegated,
    /// else through the shim's queues. False on an error.
    fn receive(&mut self, dup: MPI_Comm, data: Place, peer: c_int, drained: &mut bool) -> bool {
        let buffer = Buffer::borrowed(data.ptr, data.count as mpi::Count, data.dtype);
        let want = Pattern {
            source: peer,
            tag: self.tag,
            class: self.class,
        };
        match self.comm.route(Caller::Schedule, want) {
            Route::Mpi { permit, .. } => {
                let posted = buffer.post_to_mpi(peer, self.tag, dup);
                drop(permit);
                match posted {
                    Ok(request) => {
                        self.requests.push(request);
                        true
                    }
                    Err(err) => self.fail(err),
                }
            }
            Route::Shim(mut shim) => {
                // Once per round: what arrived before the round matches at once.
                if !*drained {
                    shim.drain();
                    *drained = true;
                }
                let (comm, tag) = (self.comm, self.tag);
                let mut made = None;
                let posted = shim.post(want, Drain::Done, |key| {
                    let recv = Recv::new(
                        comm,
                        buffer.clone(),
                        (peer, tag),
                        Channel::Side,
                        ReceivedBy::Caller,
                        Stage::Queued(key),
                    );
                    made = Some(recv.clone());
                    recv
                });
                drop(shim);
                match posted {
                    Posted::Found(message) => {
                        let landed = buffer.land(message, dup, Delivery::Soon);
                        self.landed(landed)
                    }
                    Posted::Queued(_) => {
                        self.waiting.push(made.expect("made when queued"));
                        true
                    }
                }
            }
        }
    }

    /// Starts the actions of one round; false on an error.
    fn start(&mut self, dup: MPI_Comm, round: Vec<Action>) -> bool {
        let mut drained = false;
        for action in round {
            let ok = match action {
                Action::Send(data, peer) => {
                    // SAFETY: the buffer holds the data the algorithm describes.
                    let sent = unsafe {
                        mpi::isend(
                            data.ptr,
                            data.count as mpi::Count,
                            data.dtype,
                            peer,
                            self.tag,
                            dup,
                        )
                    };
                    match sent {
                        Ok(request) => {
                            self.requests.push(request);
                            true
                        }
                        Err(err) => self.fail(err),
                    }
                }
                Action::Recv(data, peer) => self.receive(dup, data, peer, &mut drained),
                Action::Reduce {
                    input,
                    inout,
                    count,
                    dtype,
                    op,
                } => {
                    // SAFETY: both buffers hold `count` elements of `dtype`.
                    let reduced = unsafe { mpi::reduce_local(input, inout, count, dtype, op) };
                    self.fail(reduced.err().unwrap_or(abi().success))
                }
                Action::Copy { src, dst, bytes } => {
                    // SAFETY: as described by the algorithm; a schedule never copies a buffer
                    // onto an overlapping one.
                    let copied = unsafe { copy(src, dst, bytes) };
                    self.fail(copied.err().unwrap_or(abi().success))
                }
            };
            if !ok {
                return false;
            }
        }
        true
    }
}

/// Copies `src` into `dst` (same type signature): a `memcpy` when both are contiguous, else
/// through MPI's pack format.
///
/// # Safety
/// Both describe valid, non-overlapping buffers.
unsafe fn copy(src: Place, dst: Place, bytes: Option<i64>) -> Result<(), Code> {
    if let Some(bytes) = bytes {
        // SAFETY: as the caller promises.
        unsafe {
            std::ptr::copy_nonoverlapping(src.ptr as *const u8, dst.ptr as *mut u8, bytes as usize)
        };
        return Ok(());
    }
    let comm = abi().comm_self;
    let mut position = 0;
    if dst.dtype == abi().packed || is_contiguous(dst.dtype) {
        let room = if dst.dtype == abi().packed {
            dst.count
        } else {
            type_bytes(&dst) as c_int
        };
        // SAFETY: as the caller promises.
        return unsafe {
            mpi::pack(
                src.ptr,
                src.count,
                src.dtype,
                dst.ptr,
                room,
                &mut position,
                comm,
            )
        };
    }
    if src.dtype == abi().packed || is_contiguous(src.dtype) {
        let len = if src.dtype == abi().packed {
            src.count
        } else {
            type_bytes(&src) as c_int
        };
        // SAFETY: as the caller promises.
        return unsafe {
            mpi::unpack(
                src.ptr,
                len,
                &mut position,
                dst.ptr,
                dst.count,
                dst.dtype,
                comm,
            )
        };
    }
    let len = type_bytes(&src) as usize;
    let mut packed = vec![0u8; len.max(1)];
    // SAFETY: as the caller promises; `packed` holds the packed data.
    unsafe {
        mpi::pack(
            src.ptr,
            src.count,
            src.dtype,
            packed.as_mut_ptr().cast(),
            len as c_int,
            &mut position,
            comm,
        )?;
        position = 0;
        mpi::unpack(
            packed.as_ptr().cast(),
            len as c_int,
            &mut position,
            dst.ptr,
            dst.count,
            dst.dtype,
            comm,
        )
    }
}
