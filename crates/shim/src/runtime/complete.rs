//! The wait/test family over a mix of MPI's requests and the shim's.
//!
//! Statuses are what MPI writes, field for field, and codes are MPI's: the calls over several
//! requests end in MPI's own call on the user's array, in which each operation of the shim's is
//! a generalized request (its own handle, or for a persistent receive the shim runs, a stand-in
//! started for the call) whose status is the operation's. MPI then orders, completes, frees
//! and reports every request by its own rules (which `MPI_ERROR` fields it writes, which
//! requests it leaves pending after an error). Nothing blocks inside MPI while anything needs
//! the shim's progress: `Waitall` waits for every request first, `Waitany` and `Waitsome` poll
//! MPI's test forms, whose statuses and codes are theirs. Single-completion calls leave
//! `MPI_ERROR` alone and raise a failed operation's error where MPI would (`error_comm`).
//!
//! Safety of the `unsafe fn`s here: their pointer arguments are those of the MPI call that
//! reached them, valid as the MPI standard requires of the caller.
#![allow(clippy::missing_safety_doc)]

use super::request::{self, Known, Operation, Persistent, Request};
use super::{Error, Runtime};
use crate::mpi::{self, abi, empty_status, store_status, Code, MPI_Comm, MPI_Request, MPI_Status};
use smallvec::SmallVec;
use std::cell::Cell;
use std::os::raw::c_int;
use std::sync::Arc;

/// Whether a completion call waits or tests.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum How {
    Wait,
    Test,
}

fn statuses_ignored(statuses: *const MPI_Status) -> bool {
    statuses.is_null() || statuses == abi().statuses_ignore
}

/// The communicator through which MPI raises the error of a request that failed in a
/// completion call: MPICH raises it through `MPI_COMM_WORLD` (the calls name no communicator),
/// Open MPI through the request's communicator (and a generalized request's through
/// `MPI_COMM_WORLD`).
fn error_comm(op: &Arc<dyn Operation>) -> MPI_Comm {
    if cfg!(openmpi) {
        op.focus().handle
    } else {
        abi().comm_world
    }
}

/// One entry of a request array, as the calls below see it.
enum Entry {
    /// MPI completes it (perhaps a request the shim counts).
    Mpi(Option<Request>),
    /// The shim completes it.
    Shim(Request, Arc<dyn Operation>),
}

/// A request array as a completion call over several requests sees it.
enum Split {
    /// No operation of the shim's is among them and nothing needs the shim's progress: MPI's
    /// call serves, and the requests the shim counts (delegated receives, with their positions)
    /// are accounted for after it.
    Mpi(Known),
    /// Each request's entry.
    Mixed(Vec<Entry>),
}

impl Entry {
    fn of(request: Option<Request>) -> Entry {
        match request {
            Some(r) => match r.shim_op() {
                Some(op) => Entry::Shim(r, op),
                None => Entry::Mpi(Some(r)),
            },
            None => Entry::Mpi(None),
        }
    }

    fn shim(&self) -> Option<&Arc<dyn Operation>> {
        match self {
            Entry::Shim(_, op) => Some(op),
            Entry::Mpi(_) => None,
        }
    }

    /// A failed operation of the shim's, with its code.
    fn failed(&self) -> Option<Code> {
        let outcome = self.shim()?.completion().outcome()?;
        (outcome.err != abi().success).then_some(outcome.err)
    }
}

/// Open MPI raises a generalized request's error through `MPI_COMM_WORLD`, natively a
/// receive's through its communicator: while a failed operation of the shim's is among the
/// requests of MPI's call, world returns errors (the error is raised afterwards where Open MPI
/// would have, see `hand_to_mpi`).
struct QuietWorld<'a> {
    entries: &'a [Entry],
    used: Cell<bool>,
}

impl QuietWorld<'_> {
    fn run(&self, call: impl FnOnce() -> Code) -> Code {
        if !cfg!(openmpi) || !self.entries.iter().any(|e| e.failed().is_some()) {
            return call();
        }
        self.used.set(true);
        let _quiet = mpi::Quiet::new(&[abi().comm_world]);
        call()
    }
}

/// The array MPI's call gets: the user's handles, with a stand-in generalized request in place
/// of each persistent receive the shim runs (MPI knows that handle as inactive).
struct Handed {
    requests: Vec<MPI_Request>,
    stand_ins: Vec<usize>,
}

impl Handed {
    fn new(entries: &[Entry], user: &[MPI_Request]) -> Result<Handed, Code> {
        let mut handed = Handed {
            requests: user.to_vec(),
            stand_ins: Vec::new(),
        };
        for (i, entry) in entries.iter().enumerate() {
            if let Entry::Shim(Request::Persistent(p), _) = entry {
                let op = p.shim_op().expect("a shim entry runs in the shim");
                match request::start_grequest(&op) {
                    Ok(stand_in) => {
                        handed.requests[i] = stand_in;
                        handed.stand_ins.push(i);
                    }
                    Err(err) => {
                        handed.release(entries);
                        return Err(err);
                    }
                }
            }
        }
        Ok(handed)
    }

    /// Frees the stand-ins MPI left active (the others MPI freed).
    fn release(&self, entries: &[Entry]) {
        for &i in &self.stand_ins {
            if self.requests[i] != abi().request_null {
                let op = entries[i].shim().expect("stand-ins stand for operations");
                op.completion().drop_stand_in(self.requests[i]);
            }
        }
    }
}

/// Bookkeeping once MPI completed a request the shim knows (it is gone from MPI now).
fn completed_by_mpi(rt: &Runtime, handle: MPI_Request, known: &Option<Request>) {
    if let Some(request) = known {
        // A followed receive is counted out with its entry, once: here, or where MPI gave
        // its handle to another thread's new request first (`Registry::insert`).
        if !matches!(request, Request::Delegated(_)) || rt.requests.remove_if_still(handle, request)
        {
            request.completed_in_mpi();
        }
    }
}

/// Releases a done operation of the shim's: a generalized request is freed, a persistent
/// receive becomes inactive. The outcome's status goes to `status` (without `MPI_ERROR`);
/// returns its code.
fn release(
    rt: &Runtime,
    handle: &mut MPI_Request,
    entry: &Request,
    op: &Arc<dyn Operation>,
) -> (MPI_Status, Code) {
    let outcome = op.completion().outcome();
    match entry {
        Request::Persistent(p) => {
            p.end_shim_run();
        }
        _ => {
            rt.requests.remove(*handle);
            // Complete, so freed at once; not waited for, since MPI would raise a failed
            // operation's error through MPI_COMM_WORLD (the error is the caller's to raise).
            mpi::request_free(handle);
        }
    }
    outcome.map_or_else(
        || (empty_status(abi().any_source), abi().success),
        |o| (o.status, o.err),
    )
}

/// Raises a failed operation's code where MPI would (`error_comm`).
fn failed(rt: &Runtime, op: &Arc<dyn Operation>, code: Code) -> Result<Code, Error> {
    if code == abi().success {
        Ok(code)
    } else {
        Err(rt.raise(error_comm(op), code))
    }
}

/// Sorts a request array for a completion call over several requests.
fn split(rt: &Runtime, requests: &[MPI_Request]) -> Split {
    let known = rt.requests.known_in(requests);
    if !rt.needs_progress()
        && known
            .iter()
            .all(|(_, r)| matches!(r, Request::Delegated(_)))
    {
        return Split::Mpi(known);
    }
    let mut entries: Vec<Entry> = requests.iter().map(|_| Entry::Mpi(None)).collect();
    for (i, request) in known {
        entries[i] = Entry::of(Some(request));
    }
    Split::Mixed(entries)
}

/// What MPI's call reports it completed, given to an `around` call's `_after` (`calls.list`):
/// pointers to the call's outputs, read once MPI wrote them.
#[derive(Clone, Copy)]
pub enum Done {
    /// Every request it was given (`MPI_Wait`, `MPI_Waitall`), or nothing to report (a start).
    All,
    /// Every request, where the flag is set (`MPI_Test`, `MPI_Testall`).
    Flag(*const c_int),
    /// The one at the index, unless it is `MPI_UNDEFINED` (`MPI_Waitany`, `MPI_Testany`).
    Index(*const c_int),
    /// Those at the first `outcount` indices (`MPI_Waitsome`, `MPI_Testsome`).
    Some(*const c_int, *const c_int),
}

impl Done {
    /// Calls `f` with the position of each request among `count` that MPI's call completed.
    ///
    /// # Safety
    /// The pointers are the call's outputs, which MPI wrote.
    #[inline(always)]
    unsafe fn each(self, count: usize, mut f: impl FnMut(usize)) {
        let at = |p: *const c_int| -> Option<usize> {
            // SAFETY: as the caller promises.
            let value = unsafe { p.as_ref() }.copied()?;
            usize::try_from(value).ok()
        };
        match self {
            Done::All => (0..count).for_each(f),
            Done::Flag(flag) if at(flag).is_some_and(|set| set != 0) => (0..count).for_each(f),
            Done::Flag(_) => {}
            Done::Index(index) => at(index).filter(|&i| i < count).into_iter().for_each(f),
            Done::Some(outcount, indices) => {
                let Some(n) = at(outcount).filter(|&n| n <= count && !indices.is_null()) else {
                    return;
                };
                for k in 0..n {
                    // SAFETY: MPI wrote `n` indices.
                    let index = unsafe { *indices.add(k) };
                    if let Some(i) = usize::try_from(index).ok().filter(|&i| i < count) {
                        f(i);
                    }
                }
            }
        }
    }
}

/// What a polling completion call left for [`polled_after`].
pub enum Polled {
    /// The receive MPI holds that the shim follows, at this position with this handle.
    Followed(usize, MPI_Request),
    /// Persistent receives whose starts MPI runs, all in the registry's index: found there
    /// again after MPI's call.
    PersistentIndexed,
    /// The same where the index does not hold them all, at `MPI_THREAD_MULTIPLE` (below it the
    /// full path takes them), with their positions, as the table had them.
    Persistent(SmallVec<[(usize, Arc<Persistent>); 2]>),
}

/// A completion call over the `count` handles at `requests`, while nothing waits for the
/// shim's progress, is MPI's own call where the only handle the shim knows is a receive MPI
/// holds that it follows, or where every handle it knows is a persistent receive whose start
/// MPI runs (or an inactive one): below `MPI_THREAD_MULTIPLE` found without the table's lock,
/// at it under the lock, once; `None` otherwise. [`polled_after`] counts out what MPI
/// completed. A polling loop on such receives (the followed one is one in
/// [`FOLLOW_EVERY`](matchshim_core::protocol::policy::FOLLOW_EVERY)) then pays no progress of
/// the shim's per call.
///
/// # Safety
/// `requests` holds `count` handles, as the MPI call requires.
#[inline(always)]
pub unsafe fn polled_before(
    rt: &Runtime,
    count: c_int,
    requests: *const MPI_Request,
) -> Option<Polled> {
    if rt.needs_progress() || count <= 0 || requests.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    let handles = unsafe { std::slice::from_raw_parts(requests, count as usize) };
    if let Some(at) = rt.requests.sole_followed_in(handles) {
        return Some(Polled::Followed(at, handles[at]));
    }
    // SAFETY: inside the user's call on these handles.
    match unsafe { rt.requests.persistent_in_mpi_indexed(handles, 0) } {
        Some(in_mpi) => in_mpi.then_some(Polled::PersistentIndexed),
        None if rt.multiple => {
            let mut started = SmallVec::new();
            for (at, request) in rt.requests.known_in(handles) {
                match request {
                    Request::Persistent(p) if !p.shim_runs() => started.push((at, p)),
                    _ => return None,
                }
            }
            Some(Polled::Persistent(started))
        }
        None => None,
    }
}

/// After MPI's call that [`polled_before`] allowed: the followed receive is counted out if MPI
/// completed it (MPI sets a completed request's handle to `MPI_REQUEST_NULL`); each persistent
/// receive MPI's call reports complete (`done`) is counted out (MPI keeps its handle).
///
/// # Safety
/// `requests` is the call's array of `count` handles, and `done` its outputs.
#[inline(always)]
pub unsafe fn polled_after(
    rt: &Runtime,
    count: c_int,
    requests: *const MPI_Request,
    _code: Code,
    polled: &Polled,
    done: Done,
) {
    match polled {
        &Polled::Followed(at, handle) => {
            // SAFETY: as the caller promises.
            if unsafe { *requests.add(at) } != handle {
                rt.requests.settle_followed(handle);
            }
        }
        Polled::PersistentIndexed => {
            // SAFETY: as the caller promises.
            let handles = unsafe { std::slice::from_raw_parts(requests, count as usize) };
            // SAFETY: as above; inside the user's call on these handles.
            unsafe {
                done.each(handles.len(), |at| {
                    if let Some(p) = rt.requests.persistent_if_known(handles[at]) {
                        p.done_in_mpi();
                    }
                })
            };
        }
        Polled::Persistent(started) => {
            // SAFETY: as the caller promises.
            unsafe {
                done.each(count as usize, |at| {
                    if let Some((_, p)) = started.iter().find(|(i, _)| *i == at) {
                        p.done_in_mpi();
                    }
                })
            };
        }
    }
}

/// `MPI_Wait` on a persistent receive whose start MPI runs (or that is inactive), while
/// nothing waits for the shim's progress: MPI's own call completes it, as the full path would;
/// [`persistent_waited_after`] counts it out. The state is the receive, from the registry's
/// index (else its table).
///
/// # Safety
/// `requests` holds `count` handles, as the MPI call requires.
#[inline(always)]
pub unsafe fn persistent_waited_before(
    rt: &Runtime,
    count: c_int,
    requests: *const MPI_Request,
) -> Option<&Persistent> {
    if count != 1 || requests.is_null() || rt.needs_progress() {
        return None;
    }
    // SAFETY: as the caller promises; inside the user's call on the handle.
    let p = unsafe { rt.requests.persistent(*requests) }?;
    (!p.shim_runs()).then_some(p)
}

/// After MPI's `MPI_Wait` that [`persistent_waited_before`] allowed: MPI completed the start
/// (with an error or without), so it is counted out; MPI keeps the handle.
///
/// # Safety
/// As for [`persistent_waited_before`].
#[inline(always)]
pub unsafe fn persistent_waited_after(
    _rt: &Runtime,
    _count: c_int,
    _requests: *const MPI_Request,
    _code: Code,
    waited: &&Persistent,
    _done: Done,
) {
    waited.done_in_mpi();
}

/// Runs MPI's own completion call on the user's array, then accounts for the delegated
/// receives among `known` that it completed (MPI sets a completed request's handle to
/// `MPI_REQUEST_NULL`).
unsafe fn through_mpi(
    rt: &Runtime,
    requests: *mut MPI_Request,
    known: Known,
    call: impl FnOnce() -> Code,
) -> Code {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        let before: Vec<MPI_Request> = known.iter().map(|&(i, _)| *requests.add(i)).collect();
        let code = call();
        for ((i, request), handle) in known.into_iter().zip(before) {
            if *requests.add(i) != handle {
                completed_by_mpi(rt, handle, &Some(request));
            }
        }
        code
    }
}

/// Runs MPI's completion `call` on the user's array as MPI gets it ([`Handed`]), with
/// `statuses`, which MPI writes, and settles what it completed into the user's array
/// `user`: `completed(i, code, handed, statuses)` tells whether position `i` completed in
/// the call that returned `code`. `call` runs MPI's calls under the [`QuietWorld`] it
/// gets; when that kept world quiet and the first failed request (`first_failed`) is the
/// shim's, its error is raised through its communicator, as Open MPI would have.
fn hand_to_mpi(
    rt: &Runtime,
    entries: &[Entry],
    user: &mut [MPI_Request],
    statuses: *mut MPI_Status,
    call: impl FnOnce(&mut [MPI_Request], *mut MPI_Status, &QuietWorld) -> Code,
    completed: impl Fn(usize, Code, &[MPI_Request], *const MPI_Status) -> bool,
    first_failed: impl Fn(&[Entry], *const MPI_Status) -> Option<usize>,
) -> Result<Code, Error> {
    let mut handed = match Handed::new(entries, user) {
        Ok(handed) => handed,
        Err(err) => return Err(rt.raise(abi().comm_world, err)),
    };
    let quiet = QuietWorld {
        entries,
        used: Cell::new(false),
    };
    let mut scratch = Vec::new();
    let statuses = if cfg!(openmpi)
        && statuses_ignored(statuses)
        && entries.iter().any(|e| e.shim().is_some())
    {
        // The statuses tell which request failed first.
        scratch = vec![mpi::zeroed_status(); entries.len()];
        scratch.as_mut_ptr()
    } else {
        statuses
    };
    let code = call(&mut handed.requests, statuses, &quiet);
    for (i, entry) in entries.iter().enumerate() {
        if !completed(i, code, &handed.requests, statuses) {
            continue;
        }
        match entry {
            Entry::Mpi(known) => completed_by_mpi(rt, user[i], known),
            Entry::Shim(Request::Persistent(p), _) => {
                p.end_shim_run();
            }
            Entry::Shim(entry, _) => {
                rt.requests.remove_if_still(user[i], entry);
            }
        }
    }
    for (i, slot) in user.iter_mut().enumerate() {
        if !handed.stand_ins.contains(&i) {
            *slot = handed.requests[i];
        }
    }
    handed.release(entries);
    if quiet.used.get() && code != abi().success {
        if let Some(i) = first_failed(entries, statuses) {
            if let Some(err) = entries[i].failed() {
                let op = entries[i].shim().expect("failed entries are the shim's");
                rt.raise(op.focus().handle, err);
            }
        }
    }
    drop(scratch);
    Ok(code)
}

pub unsafe fn wait(
    rt: &Runtime,
    request: *mut MPI_Request,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        match Entry::of(rt.requests.get(*request)) {
            Entry::Mpi(known) => {
                let handle = *request;
                let code = if !rt.needs_progress() {
                    mpi::user::wait(request, status)
                } else {
                    let mut code = abi().success;
                    rt.wait_until(known.as_ref().map(Request::focus), || {
                        let mut flag = 0;
                        code = mpi::user::test(request, &mut flag, status);
                        flag != 0 || code != abi().success
                    });
                    code
                };
                completed_by_mpi(rt, handle, &known);
                Ok(code)
            }
            Entry::Shim(entry, op) => {
                rt.wait_until(Some(op.focus()), || op.poll());
                let (result, code) = release(rt, &mut *request, &entry, &op);
                store_status(status, &result);
                failed(rt, &op, code)
            }
        }
    }
}

pub unsafe fn test(
    rt: &Runtime,
    request: *mut MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        match Entry::of(rt.requests.get(*request)) {
            Entry::Mpi(known) => {
                rt.progress(known.as_ref().map(Request::focus));
                let handle = *request;
                let code = mpi::user::test(request, flag, status);
                if *flag != 0 {
                    completed_by_mpi(rt, handle, &known);
                }
                Ok(code)
            }
            Entry::Shim(entry, op) => {
                rt.progress(Some(op.focus()));
                *flag = op.poll() as c_int;
                if *flag == 0 {
                    return Ok(abi().success);
                }
                let (result, code) = release(rt, &mut *request, &entry, &op);
                store_status(status, &result);
                failed(rt, &op, code)
            }
        }
    }
}

/// MPICH returns (and raises) a completed request's error here, Open MPI succeeds.
pub unsafe fn request_get_status(
    rt: &Runtime,
    request: MPI_Request,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        match Entry::of(rt.requests.get(request)) {
            Entry::Mpi(known) => {
                rt.progress(known.as_ref().map(Request::focus));
                Ok(mpi::user::request_get_status(request, flag, status))
            }
            Entry::Shim(_, op) => {
                rt.progress(Some(op.focus()));
                *flag = op.poll() as c_int;
                let Some(outcome) = op.completion().outcome().filter(|_| *flag != 0) else {
                    return Ok(abi().success);
                };
                store_status(status, &outcome.status);
                if cfg!(openmpi) {
                    Ok(abi().success)
                } else {
                    failed(rt, &op, outcome.err)
                }
            }
        }
    }
}

/// `Waitall` and `Testall`.
pub unsafe fn all(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        let blocking = how == How::Wait;
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let entries = match split(rt, reqs) {
            Split::Mixed(entries) => entries,
            Split::Mpi(known) => {
                return Ok(through_mpi(rt, requests, known, || {
                    if blocking {
                        mpi::user::waitall(count, requests, statuses)
                    } else {
                        mpi::user::testall(count, requests, flag, statuses)
                    }
                }))
            }
        };
        if blocking {
            // Every request completes first, so that MPI's call below does not block.
            // Requests stay complete once complete: each round resumes at the first that was
            // not.
            let mut unfinished = 0;
            rt.wait_until(None, || {
                while unfinished < n {
                    let done = match &entries[unfinished] {
                        Entry::Shim(_, op) => op.poll(),
                        Entry::Mpi(_) => {
                            let handle = reqs[unfinished];
                            handle == abi().request_null || mpi::request_done(handle)
                        }
                    };
                    if !done {
                        return false;
                    }
                    unfinished += 1;
                }
                true
            });
        } else {
            rt.progress(None);
        }
        if cfg!(mpich) {
            if let Some(first) = entries.iter().position(|e| e.failed().is_some()) {
                return all_failed_mpich(rt, &entries, reqs, first, flag, statuses, how);
            }
        }
        let all_done = Cell::new(0);
        let code = hand_to_mpi(
            rt,
            &entries,
            reqs,
            statuses,
            |requests, statuses, quiet| {
                if blocking {
                    all_done.set(1);
                    quiet.run(|| mpi::user::waitall(count, requests.as_mut_ptr(), statuses))
                } else {
                    let mut done = 0;
                    let code = quiet.run(|| {
                        mpi::user::testall(count, requests.as_mut_ptr(), &mut done, statuses)
                    });
                    all_done.set(done);
                    code
                }
            },
            |i, code, after, statuses| {
                completed_in_all(&entries[i], i, code, all_done.get() != 0, after, statuses)
            },
            |entries, statuses| {
                (0..n).find(|&i| {
                    let error = (*statuses.add(i)).MPI_ERROR;
                    entries[i].failed().is_some()
                        || (error != abi().success && error != abi().err_pending)
                })
            },
        )?;
        if !blocking {
            *flag = all_done.get();
        }
        // An operation of the shim's that another thread's progress failed after the test
        // above.
        if cfg!(mpich) && code == abi().success && all_done.get() != 0 {
            return late_failures(rt, n, |i| &entries[i], statuses, code);
        }
        Ok(code)
    }
}

/// `Waitall` and `Testall` on MPICH when an operation of the shim's failed, `first` the
/// first. MPICH counts a generalized request's error as its query's (and calls it
/// `MPI_ERR_OTHER`), so the shim follows MPICH's rules itself here: `Waitall` completes the
/// requests before the first failed one (MPI's call does), gives that one its error and
/// leaves the later ones pending (`MPI_ERR_PENDING`, empty statuses for null ones with
/// `MPI_SUCCESS`); `Testall` completes every complete request, each status with its code,
/// and marks the others pending. Both return `MPI_ERR_IN_STATUS`, raised once through
/// `MPI_COMM_WORLD` as MPICH does (world returns errors meanwhile).
unsafe fn all_failed_mpich(
    rt: &Runtime,
    entries: &[Entry],
    reqs: &mut [MPI_Request],
    first: usize,
    flag: *mut c_int,
    statuses: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        let blocking = how == How::Wait;
        let ignored = statuses_ignored(statuses);
        let out = |i: usize| (!ignored).then(|| statuses.add(i));
        let set_error = |i: usize, err: Code| {
            if let Some(status) = out(i) {
                (*status).MPI_ERROR = err;
            }
        };
        let quiet = mpi::Quiet::new(&[abi().comm_world]);
        let mut all_complete = true;
        let mut pending_from = reqs.len();
        if blocking {
            let prefix = hand_to_mpi(
                rt,
                &entries[..first],
                &mut reqs[..first],
                statuses,
                |requests, statuses, _| {
                    mpi::user::waitall(first as c_int, requests.as_mut_ptr(), statuses)
                },
                |i, code, after, statuses| {
                    completed_in_all(&entries[i], i, code, true, after, statuses)
                },
                |_, _| None,
            );
            let code = prefix?;
            pending_from = first;
            if code == abi().success {
                let Entry::Shim(entry, op) = &entries[first] else {
                    unreachable!("the first failed entry is the shim's")
                };
                let (status, err) = release(rt, &mut reqs[first], entry, op);
                if let Some(out) = out(first) {
                    *out = status;
                    (*out).MPI_ERROR = err;
                }
                pending_from = first + 1;
            }
        } else {
            for (i, entry) in entries.iter().enumerate() {
                let status = out(i).unwrap_or(abi().status_ignore);
                match entry {
                    Entry::Shim(entry, op) if op.poll() => {
                        let (result, err) = release(rt, &mut reqs[i], entry, op);
                        if !ignored {
                            *status = result;
                            (*status).MPI_ERROR = err;
                        }
                    }
                    Entry::Shim(_, _) => {
                        all_complete = false;
                        set_error(i, abi().err_pending);
                    }
                    Entry::Mpi(known) => {
                        let (handle, mut done) = (reqs[i], 0);
                        let code = mpi::user::test(&mut reqs[i], &mut done, status);
                        if done != 0 {
                            set_error(i, code);
                            if handle != abi().request_null {
                                completed_by_mpi(rt, handle, known);
                            }
                        } else {
                            all_complete = false;
                            set_error(i, abi().err_pending);
                        }
                    }
                }
            }
            *flag = all_complete as c_int;
        }
        for (i, &handle) in reqs.iter().enumerate().skip(pending_from) {
            if handle == abi().request_null {
                if let Some(out) = out(i) {
                    store_status(out, &empty_status(abi().any_source));
                }
                set_error(i, abi().success);
            } else {
                set_error(i, abi().err_pending);
            }
        }
        drop(quiet);
        Err(rt.raise(abi().comm_world, abi().err_in_status))
    }
}

/// After a `Waitany` or `Testany` that returned (`done`) with `index` `MPI_UNDEFINED`, no
/// request was active: the empty status MPI defines (MPICH's own leaves it unwritten).
///
/// # Safety
/// `status` is the caller's, as those calls require it.
#[inline]
pub unsafe fn none_active(done: c_int, index: c_int, status: *mut MPI_Status) {
    if done != 0 && index == abi().undefined {
        // SAFETY: as the caller promises.
        unsafe { store_status(status, &empty_status(abi().any_source)) };
    }
}

/// `Waitany` and `Testany`. With no active request, both give an empty
/// status, as MPI defines (MPICH's `Testany` leaves it unwritten when an inactive
/// persistent request is among them).
pub unsafe fn any(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        let blocking = how == How::Wait;
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let mut any_done = 0;
        let code = match split(rt, reqs) {
            Split::Mpi(known) => through_mpi(rt, requests, known, || {
                if blocking {
                    any_done = 1;
                    mpi::user::waitany(count, requests, index, status)
                } else {
                    mpi::user::testany(count, requests, index, &mut any_done, status)
                }
            }),
            Split::Mixed(entries) => {
                let test = |requests: &mut [MPI_Request], done: &mut c_int, quiet: &QuietWorld| {
                    quiet.run(|| {
                        mpi::user::testany(count, requests.as_mut_ptr(), index, done, status)
                    })
                };
                let code = hand_to_mpi(
                    rt,
                    &entries,
                    reqs,
                    status,
                    |requests, _, quiet| {
                        if !blocking {
                            rt.progress(None);
                            return test(requests, &mut any_done, quiet);
                        }
                        let mut code = abi().success;
                        rt.wait_until(None, || {
                            code = test(requests, &mut any_done, quiet);
                            any_done != 0 || code != abi().success
                        });
                        code
                    },
                    |i, _, _, _| *index == i as c_int,
                    |_, _| (*index >= 0).then_some(*index as usize),
                )?;
                // MPICH takes a generalized request's error from its query's return value
                // (see `all_failed_mpich`): a failed operation completed as a success there.
                let failed = (*index >= 0).then(|| entries[*index as usize].failed());
                match failed.flatten() {
                    Some(err) if cfg!(mpich) => {
                        if !blocking {
                            *flag = any_done;
                        }
                        return Err(rt.raise(abi().comm_world, err));
                    }
                    _ => code,
                }
            }
        };
        none_active(any_done, *index, status);
        if !blocking {
            *flag = any_done;
        }
        Ok(code)
    }
}

/// `Waitsome` and `Testsome`.
pub unsafe fn some(
    rt: &Runtime,
    count: c_int,
    requests: *mut MPI_Request,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MPI_Status,
    how: How,
) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        let blocking = how == How::Wait;
        let n = count.max(0) as usize;
        let reqs = std::slice::from_raw_parts_mut(requests, n);
        let entries = match split(rt, reqs) {
            Split::Mixed(entries) => entries,
            Split::Mpi(known) => {
                return Ok(through_mpi(rt, requests, known, || {
                    if blocking {
                        mpi::user::waitsome(count, requests, outcount, indices, statuses)
                    } else {
                        mpi::user::testsome(count, requests, outcount, indices, statuses)
                    }
                }))
            }
        };
        let test = |requests: &mut [MPI_Request], statuses: *mut MPI_Status, quiet: &QuietWorld| {
            quiet.run(|| {
                mpi::user::testsome(count, requests.as_mut_ptr(), outcount, indices, statuses)
            })
        };
        let code = hand_to_mpi(
            rt,
            &entries,
            reqs,
            statuses,
            |requests, statuses, quiet| {
                if !blocking {
                    rt.progress(None);
                    return test(requests, statuses, quiet);
                }
                let mut code = abi().success;
                rt.wait_until(None, || {
                    code = test(requests, statuses, quiet);
                    *outcount != 0 || code != abi().success
                });
                code
            },
            |i, _, _, _| {
                let out = (*outcount).max(0) as usize;
                (0..out).any(|k| *indices.add(k) == i as c_int)
            },
            |entries, statuses| {
                let out = (*outcount).max(0) as usize;
                (0..out)
                    .filter(|&k| {
                        let i = *indices.add(k) as usize;
                        entries[i].failed().is_some()
                            || (*statuses.add(k)).MPI_ERROR != abi().success
                    })
                    .map(|k| *indices.add(k) as usize)
                    .min()
            },
        )?;
        if !cfg!(mpich) {
            return Ok(code);
        }
        let out = (*outcount).max(0) as usize;
        late_failures(
            rt,
            out,
            |k| &entries[*indices.add(k) as usize],
            statuses,
            code,
        )
    }
}

/// After MPICH's multiple-completion call that returned `code` with `completed` statuses,
/// status `k` that of `entry(k)`: MPICH saw a failed operation of the shim's complete as a
/// success (see `all_failed_mpich`; another thread's progress may fail one after the call's
/// test), so its status gets its error and, as MPICH writes when one of the requests failed,
/// every other status its own code, with `MPI_ERR_IN_STATUS` raised once through
/// `MPI_COMM_WORLD` (a call that already returned it keeps the other codes MPI wrote).
///
/// # Safety
/// `statuses` is the caller's, `MPI_STATUSES_IGNORE` or holding `completed` statuses.
unsafe fn late_failures<'a>(
    rt: &Runtime,
    completed: usize,
    entry: impl Fn(usize) -> &'a Entry,
    statuses: *mut MPI_Status,
    code: Code,
) -> Result<Code, Error> {
    let ignored = statuses_ignored(statuses);
    let mut any_failed = false;
    for k in 0..completed {
        if let Some(err) = entry(k).failed() {
            any_failed = true;
            if !ignored {
                // SAFETY: as the caller promises.
                unsafe { (*statuses.add(k)).MPI_ERROR = err };
            }
        }
    }
    if !any_failed || code == abi().err_in_status {
        return Ok(code);
    }
    if !ignored {
        for k in (0..completed).filter(|&k| entry(k).failed().is_none()) {
            // SAFETY: as above.
            unsafe { (*statuses.add(k)).MPI_ERROR = abi().success };
        }
    }
    Err(rt.raise(abi().comm_world, abi().err_in_status))
}

pub unsafe fn request_free(rt: &Runtime, request: *mut MPI_Request) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        if let Some(known) = rt.requests.get(*request) {
            // A receive goes on in the background; MPI frees the handle once it completes.
            rt.requests.remove(*request);
            if let Request::Persistent(p) = &known {
                p.end_shim_run();
            }
            known.completed_in_mpi();
        }
        Ok(mpi::request_free(&mut *request))
    }
}

pub unsafe fn cancel_request(rt: &Runtime, request: *mut MPI_Request) -> Result<Code, Error> {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        match Entry::of(rt.requests.get(*request)) {
            Entry::Mpi(_) => Ok(mpi::cancel(&mut *request)),
            Entry::Shim(_, op) => {
                op.cancel();
                Ok(abi().success)
            }
        }
    }
}

/// Whether `Waitall` or `Testall` (which returned `code`, `all_done` its flag) completed the
/// request at position `i`: one MPI frees is null after the call; a persistent one, which MPI
/// keeps, completed unless the call failed and its status says it is pending (with statuses
/// ignored, it is taken as completed).
unsafe fn completed_in_all(
    entry: &Entry,
    i: usize,
    code: Code,
    all_done: bool,
    after: &[MPI_Request],
    statuses: *const MPI_Status,
) -> bool {
    // SAFETY: the pointers are the caller's, valid as the MPI call that reached here
    // requires (see the module).
    unsafe {
        match entry {
            Entry::Mpi(None) => false,
            Entry::Mpi(Some(Request::Persistent(_))) => {
                if code == abi().success {
                    all_done
                } else {
                    statuses_ignored(statuses) || (*statuses.add(i)).MPI_ERROR != abi().err_pending
                }
            }
            _ => after[i] == abi().request_null,
        }
    }
}
