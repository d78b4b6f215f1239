//! A collective as a schedule (the libNBC model): rounds of sends, receives, local reductions
//! and copies. A round starts once the one before it has completed; its actions start in the
//! order they were added, so a reduction placed before a send in the same round has run before
//! the send reads its result. One executor drives schedules from the runtime's progress.

use super::CollComm;
use crate::ffi::{MPI_Comm, MPI_Datatype, MPI_Op, MPI_Request};
use crate::matching::{Class, Pattern};
use crate::mpi::{self, abi, Code, HeldType};
use crate::runtime::comm::{Channel, Comm, Matched, Posted, Waiter};
use crate::runtime::recv::{Delivery, Receive, Taken};
use crate::runtime::takeover::Mode;
use crate::runtime::Runtime;
use std::alloc::{alloc, dealloc, Layout};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// `count` elements of `dtype` at `ptr`.
#[derive(Clone, Copy, PartialEq)]
pub struct Data {
    pub ptr: *mut c_void,
    pub count: c_int,
    pub dtype: MPI_Datatype,
}

impl Data {
    pub fn new(ptr: *const c_void, count: c_int, dtype: MPI_Datatype) -> Data {
        Data {
            ptr: ptr as *mut c_void,
            count,
            dtype,
        }
    }

    /// Packed bytes: data in MPI's native pack format, which on one machine is the plain bytes.
    pub fn bytes(ptr: *const c_void, len: i64) -> Data {
        Data::new(ptr, len as c_int, abi().packed)
    }
}

/// `ptr` moved by `bytes`; plain address arithmetic (`MPI_BOTTOM` may be null).
pub fn at(ptr: *const c_void, bytes: i64) -> *mut c_void {
    (ptr as *mut u8).wrapping_offset(bytes as isize) as *mut c_void
}

/// What the schedule needs to know of a datatype.
#[derive(Clone, Copy)]
pub struct TypeInfo {
    /// Bytes of data in one element.
    pub size: i64,
    pub extent: i64,
    pub true_lb: i64,
    pub true_extent: i64,
}

impl TypeInfo {
    pub fn of(dtype: MPI_Datatype) -> Result<TypeInfo, c_int> {
        let size = mpi::type_size(dtype)?;
        let ((_, extent), (true_lb, true_extent)) = mpi::type_extents(dtype)?;
        Ok(TypeInfo {
            size,
            extent,
            true_lb,
            true_extent,
        })
    }

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

fn is_contiguous(dtype: MPI_Datatype) -> bool {
    dtype == abi().packed || TypeInfo::of(dtype).is_ok_and(|t| t.contiguous())
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
    Send(Data, c_int),
    Recv(Data, c_int),
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
        src: Data,
        dst: Data,
        bytes: Option<i64>,
    },
}

/// Builds a schedule; the algorithms add actions to the current round.
pub struct Builder {
    pub rank: c_int,
    pub size: c_int,
    /// Message size class of the call (see `super::size_class`).
    pub size_class: u8,
    rounds: Vec<Vec<Action>>,
    current: Vec<Action>,
    temps: Vec<Temp>,
    pub sent: (u64, u64),
    pub received: (u64, u64),
}

fn type_bytes(data: &Data) -> u64 {
    let size = mpi::type_size(data.dtype).unwrap_or(0);
    data.count.max(0) as u64 * size.max(0) as u64
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

    /// Ends the current round: what is added next waits until it has completed.
    pub fn next_round(&mut self) {
        if !self.current.is_empty() {
            self.rounds.push(std::mem::take(&mut self.current));
        }
    }

    pub fn send(&mut self, data: Data, peer: c_int) {
        self.sent.0 += 1;
        self.sent.1 += type_bytes(&data);
        self.current.push(Action::Send(data, peer));
    }

    pub fn recv(&mut self, data: Data, peer: c_int) {
        self.received.0 += 1;
        self.received.1 += type_bytes(&data);
        self.current.push(Action::Recv(data, peer));
    }

    /// `inout = input op inout` over `count` elements.
    pub fn reduce(
        &mut self,
        input: *const c_void,
        inout: *mut c_void,
        count: c_int,
        dtype: MPI_Datatype,
        op: MPI_Op,
    ) {
        if count > 0 {
            self.current.push(Action::Reduce {
                input,
                inout,
                count,
                dtype,
                op,
            });
        }
    }

    pub fn copy(&mut self, src: Data, dst: Data) {
        if src.count <= 0 || dst.count <= 0 || src == dst {
            return;
        }
        let bytes =
            (is_contiguous(src.dtype) && is_contiguous(dst.dtype)).then(|| type_bytes(&src) as i64);
        self.current.push(Action::Copy { src, dst, bytes });
    }

    /// `bytes` of scratch memory, freed with the schedule.
    pub fn temp(&mut self, bytes: i64) -> *mut c_void {
        let layout = Layout::from_size_align(bytes.max(1) as usize, 64).expect("scratch size");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        self.temps.push(Temp { ptr, layout });
        ptr.cast()
    }

    /// Scratch room for `count` elements of a type, laid out as in a user buffer.
    pub fn typed_temp(&mut self, count: c_int, t: &TypeInfo) -> *mut c_void {
        at(self.temp(t.span(count as i64)), -t.true_lb)
    }

    /// The schedule to run. A nonblocking one holds duplicates of the derived datatypes it
    /// uses, since the user may free theirs as soon as the call returns.
    pub fn finish(
        mut self,
        coll: Arc<CollComm>,
        comm: &'static Comm,
        tag: c_int,
        class: Class,
        nonblocking: bool,
    ) -> Result<Schedule, Code> {
        self.next_round();
        let types = if nonblocking {
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
    /// Receives of the current round still waiting in the shim's queues: (key, where to).
    waiting: Vec<(usize, Receive)>,
    pub err: c_int,
}

// SAFETY: the buffers belong to the collective until it completes, as MPI requires; handles
// are plain values; one thread at a time steps a schedule.
unsafe impl Send for Schedule {}

impl Schedule {
    /// Moves the schedule on as far as it can without blocking; true once it is complete
    /// (`err` says how it ended).
    pub fn step(&mut self, rt: &Runtime) -> bool {
        let Some(dup) = self.coll.ready(self.comm) else {
            return false;
        };
        loop {
            if !self.waiting.is_empty() {
                let comm = self.comm;
                let mut queues = comm.queues.lock();
                queues.drain(comm, rt);
                let mut i = 0;
                while i < self.waiting.len() {
                    let ok = match queues.take_matched(self.waiting[i].0) {
                        Matched::Waiting => {
                            i += 1;
                            continue;
                        }
                        Matched::Message(message, status) => {
                            let (_, receive) = self.waiting.swap_remove(i);
                            let taken = receive.take(message, &status, dup, Delivery::Soon);
                            self.taken(taken)
                        }
                        Matched::Request(request) => {
                            self.waiting.swap_remove(i);
                            self.requests.push(request);
                            true
                        }
                        Matched::Failed(err) => {
                            self.waiting.swap_remove(i);
                            self.fail(err)
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
            if !self.start(rt, dup, round) {
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

    fn taken(&mut self, taken: Taken) -> bool {
        match taken {
            Taken::Done(_, err) => self.fail(err),
            Taken::Moving(request) => {
                self.requests.push(request);
                true
            }
        }
    }

    /// Receives one message of the round: through MPI while the communicator is delegated,
    /// else through the shim's queues. False on an error.
    fn receive(
        &mut self,
        rt: &Runtime,
        dup: MPI_Comm,
        data: Data,
        peer: c_int,
        drained: &mut bool,
    ) -> bool {
        let receive = Receive::new(
            data.ptr,
            data.count as mpi::Count,
            HeldType::borrow(data.dtype),
        );
        let takeover = &self.comm.takeover;
        if takeover.enter_mpi(rt.multiple) {
            let posted = receive.post_to_mpi(peer, self.tag, dup);
            takeover.leave_mpi(rt.multiple);
            return match posted {
                Ok(request) => {
                    self.requests.push(request);
                    true
                }
                Err(err) => self.fail(err),
            };
        }
        let want = Pattern {
            source: peer,
            tag: self.tag,
            class: self.class,
        };
        let comm = self.comm;
        let mut queues = comm.queues.lock();
        if comm.takeover.mode() == Mode::Delegated {
            // Given back to MPI meanwhile.
            drop(queues);
            return self.receive(rt, dup, data, peer, drained);
        }
        // Once per round: what arrived before the round matches at once.
        if !*drained {
            queues.drain(comm, rt);
            *drained = true;
        }
        let waiter = {
            let receive = receive.clone();
            let tag = self.tag;
            move || Waiter::blocking(receive, peer, tag, Channel::Side)
        };
        match queues.post(comm, rt, want, waiter) {
            Posted::Found(arrived) => {
                drop(queues);
                self.taken(receive.take(arrived.message, &arrived.status, dup, Delivery::Soon))
            }
            Posted::Queued(key) => {
                self.waiting.push((key, receive));
                true
            }
        }
    }

    /// Starts the actions of one round; false on an error.
    fn start(&mut self, rt: &Runtime, dup: MPI_Comm, round: Vec<Action>) -> bool {
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
                Action::Recv(data, peer) => self.receive(rt, dup, data, peer, &mut drained),
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
unsafe fn copy(src: Data, dst: Data, bytes: Option<i64>) -> Result<(), Code> {
    if let Some(bytes) = bytes {
        std::ptr::copy_nonoverlapping(src.ptr as *const u8, dst.ptr as *mut u8, bytes as usize);
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
        return mpi::pack(
            src.ptr,
            src.count,
            src.dtype,
            dst.ptr,
            room,
            &mut position,
            comm,
        );
    }
    if src.dtype == abi().packed || is_contiguous(src.dtype) {
        let len = if src.dtype == abi().packed {
            src.count
        } else {
            type_bytes(&src) as c_int
        };
        return mpi::unpack(
            src.ptr,
            len,
            &mut position,
            dst.ptr,
            dst.count,
            dst.dtype,
            comm,
        );
    }
    let len = type_bytes(&src) as usize;
    let mut packed = vec![0u8; len.max(1)];
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
