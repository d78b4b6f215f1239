//! The I/O layer: every call the shim makes into MPI, typed. Handles stay MPI's own, results
//! come back as `Result`s, statuses as values. Only this module calls `PMPI_*`; [`next`] holds
//! each exported call as MPI makes it (generated from `calls.list`), for the entry points that
//! pass a call through.
//!
//! Error codes are MPI's: `Err(code)` is a code an MPI call returned.

use crate::ffi::*;
use std::ffi::CStr;
use std::mem::MaybeUninit;
use std::os::raw::{c_char, c_int, c_void};

#[cfg(large_count)]
pub use crate::ffi::MPI_Count;
pub use crate::ffi::{
    abi, Count, Fint, HandleKey, MPI_Comm, MPI_Datatype, MPI_Group, MPI_Info, MPI_Message, MPI_Op,
    MPI_Request, MPI_Status, MPI_T_enum, MPI_T_pvar_handle, MPI_T_pvar_session, BUILT_FOR,
};

/// Each exported call as MPI makes it.
#[allow(non_snake_case)]
pub mod next {
    use super::Own;
    use crate::ffi::*;
    use std::os::raw::{c_char, c_int, c_void};
    include!(concat!(env!("OUT_DIR"), "/next.rs"));
}

pub type Code = c_int;

#[inline]
pub fn check(code: Code) -> Result<(), Code> {
    if code == abi().success {
        Ok(())
    } else {
        Err(code)
    }
}

// ---- statuses ----------------------------------------------------------------------------

pub fn zeroed_status() -> MPI_Status {
    // SAFETY: MPI_Status is plain integers.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

/// The status MPI defines for a receive from `MPI_PROC_NULL` and for inactive requests: the
/// given source, `MPI_ANY_TAG`, count 0, not cancelled.
pub fn empty_status(source: c_int) -> MPI_Status {
    let mut status = zeroed_status();
    status.MPI_SOURCE = source;
    status.MPI_TAG = abi().any_tag;
    status.MPI_ERROR = abi().success;
    // SAFETY: status is a valid MPI_Status.
    unsafe {
        PMPI_Status_set_elements_x(&mut status, abi().byte, 0);
        PMPI_Status_set_cancelled(&mut status, 0);
    }
    status
}

/// A cancelled receive's status: only its cancelled flag has a meaning; the rest is the empty
/// status, as Open MPI gives it.
pub fn cancelled_status() -> MPI_Status {
    let mut status = empty_status(abi().any_source);
    // SAFETY: status is a valid MPI_Status.
    unsafe { PMPI_Status_set_cancelled(&mut status, 1) };
    status
}

/// Copies `status` to the user's `out` unless it is `MPI_STATUS_IGNORE`, leaving `MPI_ERROR` as
/// the user set it: single-completion calls never write it.
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE`, null, or points to a writable `MPI_Status`.
pub unsafe fn store_status(out: *mut MPI_Status, status: &MPI_Status) {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        if !ignored(out) {
            let error = (*out).MPI_ERROR;
            *out = *status;
            (*out).MPI_ERROR = error;
        }
    }
}

pub fn ignored(status: *const MPI_Status) -> bool {
    status.is_null() || status == abi().status_ignore
}

/// The size in bytes of the message a status describes (`i64::MAX` if MPI cannot say).
pub fn byte_count(status: &MPI_Status) -> i64 {
    let mut count = 0;
    // SAFETY: plain call on a status MPI filled in.
    let err = unsafe { PMPI_Get_count(status, abi().byte, &mut count) };
    if err != abi().success || count == abi().undefined {
        return i64::MAX;
    }
    count as i64
}

// ---- communicators -----------------------------------------------------------------------

/// Size (of the remote group, for an inter-communicator), rank and whether it is an
/// inter-communicator; an invalid handle gives MPI's error.
pub fn comm_shape(comm: MPI_Comm) -> Result<(c_int, c_int, bool), Code> {
    let (mut size, mut rank, mut inter) = (0, 0, 0);
    // SAFETY: plain queries; an invalid handle makes MPI raise and return an error.
    unsafe {
        check(PMPI_Comm_test_inter(comm, &mut inter))?;
        if inter != 0 {
            check(PMPI_Comm_remote_size(comm, &mut size))?;
        } else {
            check(PMPI_Comm_size(comm, &mut size))?;
        }
        check(PMPI_Comm_rank(comm, &mut rank))?;
    }
    Ok((size, rank, inter != 0))
}

pub fn comm_rank(comm: MPI_Comm) -> c_int {
    let mut rank = 0;
    // SAFETY: out-pointer is a valid local.
    unsafe { PMPI_Comm_rank(comm, &mut rank) };
    rank
}

pub fn comm_size(comm: MPI_Comm) -> c_int {
    let mut size = 0;
    // SAFETY: out-pointer is a valid local.
    unsafe { PMPI_Comm_size(comm, &mut size) };
    size
}

/// `MPI_TAG_UB` of `MPI_COMM_WORLD`.
pub fn tag_ub() -> c_int {
    let mut flag = 0;
    let mut value: *mut c_int = std::ptr::null_mut();
    // SAFETY: MPI_TAG_UB's value is a pointer to an int owned by MPI.
    unsafe {
        PMPI_Comm_get_attr(
            abi().comm_world,
            abi().tag_ub_key,
            &mut value as *mut *mut c_int as *mut c_void,
            &mut flag,
        );
        if flag != 0 && !value.is_null() {
            *value
        } else {
            32767
        }
    }
}

/// A duplicate of `comm` made with `MPI_Comm_create` over its whole group, which, unlike
/// `Comm_dup`, runs none of the user's attribute copy callbacks. Collective over `comm`.
pub fn comm_duplicate_quietly(comm: MPI_Comm) -> Result<MPI_Comm, Code> {
    let mut dup = abi().comm_null;
    // SAFETY: plain calls with valid out-pointers; MPI writes the group before it is read.
    unsafe {
        let mut group: MPI_Group = std::mem::zeroed();
        check(PMPI_Comm_group(comm, &mut group))?;
        let err = crate::mpi::next::MPI_Comm_create(comm, group, &mut dup);
        PMPI_Group_free(&mut group);
        check(err)?;
    }
    Ok(dup)
}

/// Starts `MPI_Comm_idup`; MPI writes the new handle to `out` once the request completes.
///
/// # Safety
/// `out` stays at one address until the request completes.
pub unsafe fn comm_idup(comm: MPI_Comm, out: *mut MPI_Comm) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        check(PMPI_Comm_idup(comm, out, &mut request))?;
        Ok(request)
    }
}

pub fn comm_free(comm: &mut MPI_Comm) {
    // SAFETY: a communicator the shim owns.
    unsafe { crate::mpi::next::MPI_Comm_free(comm) };
}

/// Errors on a communicator the shim owns come back as codes, to be raised on the user's.
pub fn comm_return_errors(comm: MPI_Comm) {
    // SAFETY: plain call on a valid communicator.
    unsafe { PMPI_Comm_set_errhandler(comm, abi().errors_return) };
}

/// Raises `code` through `comm`'s error handler (the default aborts) and returns it.
pub fn raise(comm: MPI_Comm, code: Code) -> Code {
    // SAFETY: plain call; an invalid comm makes MPI raise on its own.
    unsafe { PMPI_Comm_call_errhandler(comm, code) };
    code
}

/// While it lives, errors on its communicators come back as codes and raise nothing: for the
/// shim's own calls whose error is the user's call to raise, where MPI would have. Their
/// handlers are put back when it goes. Threads may quiet the same communicator at once
/// (`MPI_THREAD_MULTIPLE`): the first saves its handler and the last puts it back, so that
/// none puts back another's quiet handler for good.
pub struct Quiet {
    comms: smallvec::SmallVec<[MPI_Comm; 2]>,
}

/// A communicator made quiet: its own handler, and how many [`Quiet`]s hold it.
struct Quieted {
    comm: MPI_Comm,
    handler: MPI_Errhandler,
    holders: usize,
}

// SAFETY: handles are plain values (ints or pointers to MPI's objects) that any thread may
// pass to MPI.
unsafe impl Send for Quieted {}

/// The communicators quiet now.
static QUIETED: parking_lot::Mutex<Vec<Quieted>> = parking_lot::Mutex::new(Vec::new());

impl Quiet {
    pub fn new(comms: &[MPI_Comm]) -> Quiet {
        let mut quieted = QUIETED.lock();
        for &comm in comms {
            if let Some(q) = quieted.iter_mut().find(|q| q.comm == comm) {
                q.holders += 1;
                continue;
            }
            // SAFETY: a handle is a plain value, zero until MPI writes it.
            let mut handler: MPI_Errhandler = unsafe { std::mem::zeroed() };
            // SAFETY: plain calls on a valid communicator; the handle MPI made is freed
            // once put back.
            unsafe {
                PMPI_Comm_get_errhandler(comm, &mut handler);
                PMPI_Comm_set_errhandler(comm, abi().errors_return);
            }
            quieted.push(Quieted {
                comm,
                handler,
                holders: 1,
            });
        }
        Quiet {
            comms: comms.iter().copied().collect(),
        }
    }
}

impl Drop for Quiet {
    fn drop(&mut self) {
        let mut quieted = QUIETED.lock();
        for comm in self.comms.iter().rev() {
            let Some(at) = quieted.iter().position(|q| q.comm == *comm) else {
                continue;
            };
            quieted[at].holders -= 1;
            if quieted[at].holders == 0 {
                let mut q = quieted.swap_remove(at);
                // SAFETY: as in `new`.
                unsafe {
                    PMPI_Comm_set_errhandler(q.comm, q.handler);
                    PMPI_Errhandler_free(&mut q.handler);
                }
            }
        }
    }
}

/// True when an error raised on `comm` ends the program (the default handlers).
pub fn errors_are_fatal(comm: MPI_Comm) -> bool {
    // SAFETY: a handle is a plain value (an int or a pointer), zero until MPI writes it.
    let mut handler: MPI_Errhandler = unsafe { std::mem::zeroed() };
    // SAFETY: out-pointer is a valid local; the handle MPI returns is freed below.
    unsafe {
        if PMPI_Comm_get_errhandler(comm, &mut handler) != abi().success {
            return true;
        }
        let fatal = handler == abi().errors_are_fatal || handler == abi().errors_abort;
        PMPI_Errhandler_free(&mut handler);
        fatal
    }
}

/// MPI's text for an error code.
pub fn error_string(code: Code) -> String {
    let mut buf = vec![0 as c_char; abi().max_error_string.max(1) as usize];
    let mut len = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters.
    if unsafe { PMPI_Error_string(code, buf.as_mut_ptr(), &mut len) } != abi().success {
        return format!("error code {code}");
    }
    let bytes: Vec<u8> = buf[..len.max(0) as usize]
        .iter()
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).trim().to_string()
}

/// An attribute key whose delete callback MPI calls when a communicator carrying it is freed.
pub fn comm_keyval(
    on_delete: unsafe extern "C" fn(MPI_Comm, c_int, *mut c_void, *mut c_void) -> c_int,
) -> c_int {
    let mut keyval = 0;
    // SAFETY: valid callbacks and out-pointer.
    unsafe {
        PMPI_Comm_create_keyval(
            abi().comm_null_copy_fn,
            Some(on_delete),
            &mut keyval,
            std::ptr::null_mut(),
        )
    };
    keyval
}

pub fn comm_set_attr(comm: MPI_Comm, keyval: c_int) {
    // SAFETY: plain call on a valid communicator.
    unsafe { PMPI_Comm_set_attr(comm, keyval, std::ptr::null_mut()) };
}

// ---- point to point ----------------------------------------------------------------------

/// Pulls the next message of `comm` out of MPI's queue, if one has arrived.
pub fn improbe_any(comm: MPI_Comm) -> Option<(MPI_Message, MPI_Status)> {
    let mut flag = 0;
    let mut message = abi().message_null;
    let mut status = zeroed_status();
    // SAFETY: all out-pointers are valid locals.
    unsafe {
        crate::mpi::next::MPI_Improbe(
            abi().any_source,
            abi().any_tag,
            comm,
            &mut flag,
            &mut message,
            &mut status,
        )
    };
    (flag != 0).then_some((message, status))
}

/// # Safety
/// `buf` holds `count` elements of `datatype`, until the request completes.
#[inline]
pub unsafe fn irecv(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        #[cfg(large_count)]
        check(crate::mpi::next::MPI_Irecv_c(
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            &mut request,
        ))?;
        #[cfg(not(large_count))]
        check(crate::mpi::next::MPI_Irecv(
            buf,
            count as c_int,
            datatype,
            source,
            tag,
            comm,
            &mut request,
        ))?;
        Ok(request)
    }
}

/// # Safety
/// `buf` holds `count` elements of `datatype`, until the request completes.
pub unsafe fn isend(
    buf: *const c_void,
    count: Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        #[cfg(large_count)]
        check(PMPI_Isend_c(
            buf,
            count,
            datatype,
            dest,
            tag,
            comm,
            &mut request,
        ))?;
        #[cfg(not(large_count))]
        check(PMPI_Isend(
            buf,
            count as c_int,
            datatype,
            dest,
            tag,
            comm,
            &mut request,
        ))?;
        Ok(request)
    }
}

/// Receives a matched message at once; the status and MPI's code.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
pub unsafe fn mrecv(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: &mut MPI_Message,
) -> (MPI_Status, Code) {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut status = zeroed_status();
        #[cfg(large_count)]
        let err = PMPI_Mrecv_c(buf, count, datatype, message, &mut status);
        #[cfg(not(large_count))]
        let err = PMPI_Mrecv(buf, count as c_int, datatype, message, &mut status);
        (status, err)
    }
}

/// # Safety
/// `buf` holds `count` elements of `datatype`, until the request completes.
pub unsafe fn imrecv(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: &mut MPI_Message,
) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        #[cfg(large_count)]
        check(PMPI_Imrecv_c(buf, count, datatype, message, &mut request))?;
        #[cfg(not(large_count))]
        check(PMPI_Imrecv(
            buf,
            count as c_int,
            datatype,
            message,
            &mut request,
        ))?;
        Ok(request)
    }
}

/// `MPI_Iprobe`: the status of the earliest matching message MPI holds, if any.
pub fn iprobe(source: c_int, tag: c_int, comm: MPI_Comm) -> Result<Option<MPI_Status>, Code> {
    let (mut flag, mut status) = (0, zeroed_status());
    // SAFETY: out-pointers are valid locals.
    check(unsafe { crate::mpi::next::MPI_Iprobe(source, tag, comm, &mut flag, &mut status) })?;
    Ok((flag != 0).then_some(status))
}

/// `MPI_Improbe`: the earliest matching message MPI holds, removed from its queue, if any.
pub fn improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<Option<(MPI_Message, MPI_Status)>, Code> {
    let (mut flag, mut message, mut status) = (0, abi().message_null, zeroed_status());
    // SAFETY: out-pointers are valid locals.
    check(unsafe {
        crate::mpi::next::MPI_Improbe(source, tag, comm, &mut flag, &mut message, &mut status)
    })?;
    Ok((flag != 0).then_some((message, status)))
}

/// Tests a real request; `Some((status, code))` once it completed (and MPI freed or
/// deactivated it).
pub fn test(request: &mut MPI_Request) -> Option<(MPI_Status, Code)> {
    let mut flag = 0;
    let mut status = zeroed_status();
    // SAFETY: request is a live request handle.
    let err = unsafe { crate::mpi::next::MPI_Test(request, &mut flag, &mut status) };
    (flag != 0 || err != abi().success).then_some((status, err))
}

/// Whether a real request has completed, leaving it as it is. Its error, if it failed, is
/// not raised (MPICH raises it here through `MPI_COMM_WORLD`): the call that completes it
/// raises it.
pub fn request_done(request: MPI_Request) -> bool {
    let _quiet = cfg!(mpich).then(|| Quiet::new(&[abi().comm_world]));
    let mut flag = 0;
    // SAFETY: a live request handle; the status is ignored.
    unsafe { crate::mpi::next::MPI_Request_get_status(request, &mut flag, abi().status_ignore) };
    flag != 0
}

/// Tests real requests together; `Ok(true)` once all completed.
pub fn testall(requests: &mut [MPI_Request]) -> Result<bool, Code> {
    let mut flag = 0;
    // SAFETY: the requests are live request handles.
    check(unsafe {
        crate::mpi::next::MPI_Testall(
            requests.len() as c_int,
            requests.as_mut_ptr(),
            &mut flag,
            abi().statuses_ignore,
        )
    })?;
    Ok(flag != 0)
}

/// Waits inside MPI; only for requests that need no progress of the shim.
pub fn wait(request: &mut MPI_Request) -> (MPI_Status, Code) {
    let mut status = zeroed_status();
    // SAFETY: request is a live request handle.
    let err = unsafe { crate::mpi::next::MPI_Wait(request, &mut status) };
    (status, err)
}

/// Whether a completed request's status says it was cancelled.
pub fn cancelled(status: &MPI_Status) -> bool {
    let mut flag = 0;
    // SAFETY: a status MPI wrote.
    unsafe { PMPI_Test_cancelled(status, &mut flag) };
    flag != 0
}

pub fn cancel(request: &mut MPI_Request) -> Code {
    // SAFETY: request is a live request handle.
    unsafe { crate::mpi::next::MPI_Cancel(request) }
}

pub fn start(request: &mut MPI_Request) -> Code {
    // SAFETY: an inactive persistent request.
    unsafe { crate::mpi::next::MPI_Start(request) }
}

pub fn request_free(request: &mut MPI_Request) -> Code {
    // SAFETY: a live request handle.
    unsafe { crate::mpi::next::MPI_Request_free(request) }
}

/// A persistent receive MPI knows, with the user's arguments.
///
/// # Safety
/// `buf` holds `count` elements of `datatype` whenever the request is active.
pub unsafe fn recv_init(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        #[cfg(large_count)]
        check(crate::mpi::next::MPI_Recv_init_c(
            buf,
            count,
            datatype,
            source,
            tag,
            comm,
            &mut request,
        ))?;
        #[cfg(not(large_count))]
        check(crate::mpi::next::MPI_Recv_init(
            buf,
            count as c_int,
            datatype,
            source,
            tag,
            comm,
            &mut request,
        ))?;
        Ok(request)
    }
}

// ---- generalized requests ----------------------------------------------------------------

pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MPI_Status) -> c_int;
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// # Safety
/// The callbacks interpret `state` as the caller arranged, until `free` runs.
pub unsafe fn grequest_start(
    query: QueryFn,
    free: FreeFn,
    cancel: CancelFn,
    state: *mut c_void,
) -> Result<MPI_Request, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        let mut request = abi().request_null;
        check(PMPI_Grequest_start(
            Some(query),
            Some(free),
            Some(cancel),
            state,
            &mut request,
        ))?;
        Ok(request)
    }
}

pub fn grequest_complete(request: MPI_Request) {
    // SAFETY: a live generalized request of the shim's.
    unsafe { PMPI_Grequest_complete(request) };
}

// ---- datatypes ---------------------------------------------------------------------------

/// A datatype handle that stays valid while the shim holds it: a derived type is duplicated,
/// since the user may free theirs while an operation using it is pending; clones share the
/// duplicate, freed with the last. Predefined types are used as they are.
#[derive(Clone)]
pub struct HeldType {
    handle: MPI_Datatype,
    _dup: Option<std::sync::Arc<Duplicate>>,
}

struct Duplicate(MPI_Datatype);

impl Drop for Duplicate {
    fn drop(&mut self) {
        // SAFETY: the shim's own duplicate; every operation using it has completed.
        unsafe { PMPI_Type_free(&mut self.0) };
    }
}

// SAFETY: handles are plain values; MPI allows a datatype's use from any thread.
unsafe impl Send for HeldType {}
// SAFETY: as above.
unsafe impl Sync for HeldType {}
// SAFETY: as above.
unsafe impl Send for Duplicate {}
// SAFETY: as above.
unsafe impl Sync for Duplicate {}

impl HeldType {
    pub fn hold(datatype: MPI_Datatype) -> Result<HeldType, Code> {
        if is_named(datatype) {
            return Ok(HeldType::borrow(datatype));
        }
        let mut dup = datatype;
        // SAFETY: plain call on a datatype the user passed.
        check(unsafe { PMPI_Type_dup(datatype, &mut dup) })?;
        Ok(HeldType {
            handle: dup,
            _dup: Some(std::sync::Arc::new(Duplicate(dup))),
        })
    }

    /// Uses the user's handle without holding it: for the length of one blocking call.
    pub fn borrow(datatype: MPI_Datatype) -> HeldType {
        HeldType {
            handle: datatype,
            _dup: None,
        }
    }

    #[inline]
    pub fn handle(&self) -> MPI_Datatype {
        self.handle
    }
}

/// Predefined datatypes seen lately: they stay what they are for the whole run, so finding
/// one here spares asking MPI.
static NAMED: [std::sync::atomic::AtomicUsize; 8] =
    [const { std::sync::atomic::AtomicUsize::new(usize::MAX) }; 8];

/// Predefined datatypes (and `MPI_DATATYPE_NULL`) need no holding.
pub fn is_named(datatype: MPI_Datatype) -> bool {
    use std::sync::atomic::Ordering::Relaxed;
    let key = datatype.key();
    if datatype == abi().datatype_null || NAMED.iter().any(|k| k.load(Relaxed) == key) {
        return true;
    }
    let (mut ints, mut addrs, mut types, mut combiner) = (0, 0, 0, 0);
    // SAFETY: plain query on a datatype handle.
    let err = unsafe {
        PMPI_Type_get_envelope(datatype, &mut ints, &mut addrs, &mut types, &mut combiner)
    };
    let named = err != abi().success || combiner == abi().combiner_named;
    if named {
        NAMED[key % NAMED.len()].store(key, Relaxed);
    }
    named
}

pub fn type_size(datatype: MPI_Datatype) -> Result<i64, Code> {
    let mut size = 0;
    // SAFETY: out-pointer is a valid local.
    check(unsafe { PMPI_Type_size(datatype, &mut size) })?;
    Ok(size as i64)
}

/// A datatype's lower bound and extent, ordinary or true.
pub type Extent = (i64, i64);

/// (lower bound, extent) and (true lower bound, true extent).
pub fn type_extents(datatype: MPI_Datatype) -> Result<(Extent, Extent), Code> {
    let (mut lb, mut extent, mut true_lb, mut true_extent) = (0, 0, 0, 0);
    // SAFETY: out-pointers are valid locals.
    unsafe {
        check(PMPI_Type_get_extent(datatype, &mut lb, &mut extent))?;
        check(PMPI_Type_get_true_extent(
            datatype,
            &mut true_lb,
            &mut true_extent,
        ))?;
    }
    Ok(((aint(lb), aint(extent)), (aint(true_lb), aint(true_extent))))
}

/// `MPI_Aint` is `long` in MPICH and `ptrdiff_t` in Open MPI.
#[allow(clippy::unnecessary_cast)]
fn aint(x: MPI_Aint) -> i64 {
    x as i64
}

/// Packs `count` elements of `datatype` at `buf` into `out` from `*position` on.
///
/// # Safety
/// The buffers are valid for what they describe.
pub unsafe fn pack(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    out: *mut c_void,
    room: c_int,
    position: &mut c_int,
    comm: MPI_Comm,
) -> Result<(), Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe { check(PMPI_Pack(buf, count, datatype, out, room, position, comm)) }
}

/// # Safety
/// The buffers are valid for what they describe.
pub unsafe fn unpack(
    packed: *const c_void,
    len: c_int,
    position: &mut c_int,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> Result<(), Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        check(PMPI_Unpack(
            packed, len, position, buf, count, datatype, comm,
        ))
    }
}

/// `count` elements of `datatype` at `buf`, packed: what a replaced buffer sends.
///
/// # Safety
/// `buf` holds `count` elements of `datatype`.
pub unsafe fn packed_copy(
    buf: *const c_void,
    count: Count,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> Result<Vec<u8>, Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe {
        #[cfg(large_count)]
        {
            let mut size: Count = 0;
            check(PMPI_Pack_size_c(count, datatype, comm, &mut size))?;
            let mut packed = vec![0u8; size.max(0) as usize];
            let mut position: Count = 0;
            check(PMPI_Pack_c(
                buf,
                count,
                datatype,
                packed.as_mut_ptr().cast(),
                size,
                &mut position,
                comm,
            ))?;
            packed.truncate(position as usize);
            Ok(packed)
        }
        #[cfg(not(large_count))]
        {
            let mut size = 0;
            check(PMPI_Pack_size(count as c_int, datatype, comm, &mut size))?;
            let mut packed = vec![0u8; size.max(0) as usize];
            let mut position = 0;
            pack(
                buf,
                count as c_int,
                datatype,
                packed.as_mut_ptr().cast(),
                size,
                &mut position,
                comm,
            )?;
            packed.truncate(position as usize);
            Ok(packed)
        }
    }
}

// ---- reductions --------------------------------------------------------------------------

/// `inout = input op inout`, MPI's operand order.
///
/// # Safety
/// Both buffers hold `count` elements of `datatype`.
pub unsafe fn reduce_local(
    input: *const c_void,
    inout: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> Result<(), Code> {
    // SAFETY: as the caller promises (see `# Safety`).
    unsafe { check(PMPI_Reduce_local(input, inout, count, datatype, op)) }
}

pub fn op_commutative(op: MPI_Op) -> Result<bool, Code> {
    let mut commute = 0;
    // SAFETY: out-pointer is a valid local.
    check(unsafe { PMPI_Op_commutative(op, &mut commute) })?;
    Ok(commute != 0)
}

/// Sums (`max` false) or maxes `values` over `MPI_COMM_WORLD` onto rank 0.
pub fn reduce_to_root(values: &[u64], max: bool) -> Vec<u64> {
    let mut out = vec![0u64; values.len()];
    let op = if max { abi().op_max } else { abi().op_sum };
    // SAFETY: buffers match the count and MPI_UINT64_T.
    unsafe {
        crate::mpi::next::MPI_Reduce(
            values.as_ptr().cast(),
            out.as_mut_ptr().cast(),
            values.len() as c_int,
            abi().uint64,
            op,
            0,
            abi().comm_world,
        )
    };
    out
}

/// The lowest rank of `MPI_COMM_WORLD` for which `mine` is true (the world size if none).
pub fn first_rank_where(mine: bool) -> c_int {
    let rank = comm_rank(abi().comm_world);
    let size = comm_size(abi().comm_world);
    let value: c_int = if mine { rank } else { size };
    let mut first = size;
    // SAFETY: one int each way.
    unsafe {
        crate::mpi::next::MPI_Allreduce(
            &value as *const c_int as *const c_void,
            &mut first as *mut c_int as *mut c_void,
            1,
            abi().int_,
            abi().op_min,
            abi().comm_world,
        )
    };
    first
}

/// `MPI_Finalize`, when nothing of the shim's is pending (a run stopped at `MPI_Init`).
pub fn finalize() {
    // SAFETY: plain call.
    unsafe { crate::mpi::next::MPI_Finalize() };
}

pub fn barrier_world() {
    // SAFETY: plain call.
    unsafe { crate::mpi::next::MPI_Barrier(abi().comm_world) };
}

pub fn query_thread() -> c_int {
    let mut provided = 0;
    // SAFETY: out-pointer is a valid local.
    unsafe { PMPI_Query_thread(&mut provided) };
    provided
}

pub fn abort(code: Code) {
    // SAFETY: plain call.
    unsafe { PMPI_Abort(abi().comm_world, code) };
}

/// The MPI-4 assertions `comm`'s info makes (none when MPI gives no info).
pub fn comm_assertions(comm: MPI_Comm) -> crate::matching::Assertions {
    let mut info = MaybeUninit::<MPI_Info>::uninit();
    // SAFETY: `info` is written by a successful call and freed below.
    if unsafe { PMPI_Comm_get_info(comm, info.as_mut_ptr()) } != abi().success {
        return Default::default();
    }
    // SAFETY: written by the successful call.
    let mut info = unsafe { info.assume_init() };
    let assertions = info_assertions(info);
    // SAFETY: the info object MPI_Comm_get_info made for us.
    unsafe { PMPI_Info_free(&mut info) };
    assertions
}

/// The MPI-4 assertions the info object `info` makes (none for `MPI_INFO_NULL`).
pub fn info_assertions(info: MPI_Info) -> crate::matching::Assertions {
    assertions_after(Default::default(), info)
}

/// `before`, with the assertion keys `info` sets taking the values it gives them.
pub fn assertions_after(
    before: crate::matching::Assertions,
    info: MPI_Info,
) -> crate::matching::Assertions {
    if info.key() == abi().info_null.key() {
        return before;
    }
    before.updated(|key| {
        let key = std::ffi::CString::new(key).ok()?;
        let mut value = [0 as c_char; 16];
        let mut flag = 0;
        // SAFETY: `value` holds 15 characters and the terminating NUL.
        unsafe { PMPI_Info_get(info, key.as_ptr(), 15, value.as_mut_ptr(), &mut flag) };
        (flag != 0).then(|| {
            // SAFETY: MPI wrote a NUL-terminated string when it set `flag`.
            unsafe { std::ffi::CStr::from_ptr(value.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
    })
}

/// Calls made with the user's own arguments, for requests the shim has no part in: MPI fills
/// the user's statuses and reports errors itself, and its code is returned as is.
pub mod user {
    use crate::ffi::*;
    use std::os::raw::{c_int, c_void};

    /// # Safety
    /// The arguments are the user's, as passed to `MPI_Recv` (or `MPI_Recv_c`).
    #[inline]
    pub unsafe fn recv(
        buf: *mut c_void,
        count: Count,
        datatype: MPI_Datatype,
        source: c_int,
        tag: c_int,
        comm: MPI_Comm,
        status: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe {
            #[cfg(large_count)]
            return crate::mpi::next::MPI_Recv_c(buf, count, datatype, source, tag, comm, status);
            #[cfg(not(large_count))]
            return crate::mpi::next::MPI_Recv(
                buf,
                count as c_int,
                datatype,
                source,
                tag,
                comm,
                status,
            );
        }
    }

    /// # Safety
    /// As for `MPI_Wait`.
    #[inline]
    pub unsafe fn wait(request: *mut MPI_Request, status: *mut MPI_Status) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Wait(request, status) }
    }

    /// # Safety
    /// As for `MPI_Test`.
    #[inline]
    pub unsafe fn test(
        request: *mut MPI_Request,
        flag: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Test(request, flag, status) }
    }

    /// # Safety
    /// As for `MPI_Request_get_status`.
    pub unsafe fn request_get_status(
        request: MPI_Request,
        flag: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Request_get_status(request, flag, status) }
    }

    /// # Safety
    /// As for `MPI_Waitall`.
    pub unsafe fn waitall(
        count: c_int,
        requests: *mut MPI_Request,
        statuses: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Waitall(count, requests, statuses) }
    }

    /// # Safety
    /// As for `MPI_Testall`.
    pub unsafe fn testall(
        count: c_int,
        requests: *mut MPI_Request,
        flag: *mut c_int,
        statuses: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Testall(count, requests, flag, statuses) }
    }

    /// # Safety
    /// As for `MPI_Waitany`.
    pub unsafe fn waitany(
        count: c_int,
        requests: *mut MPI_Request,
        index: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Waitany(count, requests, index, status) }
    }

    /// # Safety
    /// As for `MPI_Testany`.
    pub unsafe fn testany(
        count: c_int,
        requests: *mut MPI_Request,
        index: *mut c_int,
        flag: *mut c_int,
        status: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Testany(count, requests, index, flag, status) }
    }

    /// # Safety
    /// As for `MPI_Waitsome`.
    pub unsafe fn waitsome(
        count: c_int,
        requests: *mut MPI_Request,
        outcount: *mut c_int,
        indices: *mut c_int,
        statuses: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Waitsome(count, requests, outcount, indices, statuses) }
    }

    /// # Safety
    /// As for `MPI_Testsome`.
    pub unsafe fn testsome(
        count: c_int,
        requests: *mut MPI_Request,
        outcount: *mut c_int,
        indices: *mut c_int,
        statuses: *mut MPI_Status,
    ) -> c_int {
        // SAFETY: as the caller promises (see `# Safety`).
        unsafe { crate::mpi::next::MPI_Testsome(count, requests, outcount, indices, statuses) }
    }
}

// ---- Fortran -----------------------------------------------------------------------------

/// Handles and statuses between MPI's Fortran and C bindings.
pub mod fortran {
    use crate::ffi::*;

    macro_rules! convert {
        ($(#[$meta:meta])* $name:ident($from:ty) -> $to:ty = $ms:ident) => {
            $(#[$meta])*
            #[inline]
            pub fn $name(handle: $from) -> $to {
                // SAFETY: MPI's conversion, defined for any value.
                unsafe { $ms(handle) }
            }
        };
    }
    convert!(comm_f2c(Fint) -> MPI_Comm = ms_comm_f2c);
    convert!(comm_c2f(MPI_Comm) -> Fint = ms_comm_c2f);
    convert!(group_f2c(Fint) -> MPI_Group = ms_group_f2c);
    convert!(info_f2c(Fint) -> MPI_Info = ms_info_f2c);
    convert!(request_f2c(Fint) -> MPI_Request = ms_request_f2c);
    convert!(request_c2f(MPI_Request) -> Fint = ms_request_c2f);
    convert!(message_c2f(MPI_Message) -> Fint = ms_message_c2f);
    convert!(#[cfg(openmpi)] type_f2c(Fint) -> MPI_Datatype = ms_type_f2c);
    convert!(#[cfg(openmpi)] op_f2c(Fint) -> MPI_Op = ms_op_f2c);

    /// # Safety
    /// `f` is a Fortran status (`MPI_STATUS_SIZE` integers).
    #[cfg(openmpi)]
    pub unsafe fn status_f2c(f: *const Fint, c: &mut MPI_Status) {
        // SAFETY: as the caller promises.
        unsafe { PMPI_Status_f2c(f, c) };
    }

    /// # Safety
    /// As for [`status_f2c`].
    #[cfg(openmpi)]
    pub unsafe fn status_c2f(c: &MPI_Status, f: *mut Fint) {
        // SAFETY: as the caller promises.
        unsafe { PMPI_Status_c2f(c, f) };
    }
}

/// Where symbol `name` is in this process, if anywhere.
pub fn symbol(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with a NUL-terminated name.
    let at = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
    (!at.is_null()).then_some(at)
}

/// C's `MPI_UNWEIGHTED`.
#[cfg(openmpi)]
pub fn unweighted() -> *const c_int {
    // SAFETY: returns MPI's constant.
    unsafe { ms_unweighted() }
}

/// C's `MPI_WEIGHTS_EMPTY`.
#[cfg(openmpi)]
pub fn weights_empty() -> *const c_int {
    // SAFETY: returns MPI's constant.
    unsafe { ms_weights_empty() }
}

/// The MPI library's own Fortran entry point `name`, the one the shim's stands before.
fn fortran_own(name: &CStr) -> *mut c_void {
    // SAFETY: dlsym with a NUL-terminated name.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// MPI's own Fortran `MPI_INIT` named `name` (which also sets up MPI's Fortran side), or its
/// C form where there is none.
///
/// # Safety
/// Called as `MPI_INIT` is.
pub unsafe fn fortran_init(name: &CStr) -> c_int {
    let own = fortran_own(name);
    let mut code = abi().success;
    if own.is_null() {
        // SAFETY: MPI_Init without arguments, as the standard allows.
        code = unsafe { crate::mpi::next::MPI_Init(std::ptr::null_mut(), std::ptr::null_mut()) };
    } else {
        // SAFETY: MPI's Fortran MPI_INIT takes the error code's address.
        unsafe {
            let own: unsafe extern "C" fn(*mut Fint) = std::mem::transmute(own);
            own(&mut code);
        }
    }
    code
}

/// MPI's own Fortran `MPI_INIT_THREAD` named `name`, or its C form where there is none.
///
/// # Safety
/// `required` and `provided` are the Fortran caller's.
pub unsafe fn fortran_init_thread(
    name: &CStr,
    required: *const Fint,
    provided: *mut Fint,
) -> c_int {
    let own = fortran_own(name);
    let mut code = abi().success;
    if own.is_null() {
        // SAFETY: the caller's `required` and `provided`.
        code = unsafe {
            crate::mpi::next::MPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                *required,
                provided,
            )
        };
    } else {
        // SAFETY: MPI's Fortran MPI_INIT_THREAD takes REQUIRED, PROVIDED and the error code.
        unsafe {
            let own: unsafe extern "C" fn(*const Fint, *mut Fint, *mut Fint) =
                std::mem::transmute(own);
            own(required, provided, &mut code);
        }
    }
    code
}

// ---- beside other tools --------------------------------------------------------------------
//
// The shim does its work under each exported call's profiling name (`PMPI_*`), so that a tool
// loaded before it reaches the shim when it passes a call on. Under the plain name it passes
// the call to a tool loaded after it (whose own `PMPI_*` call comes back to the shim), and does
// the work itself when the next definition is MPI's. Its own calls into MPI go to the MPI
// library's `PMPI_*`, never through a tool or back into the shim.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Not looked up yet; looked up and absent.
const UNKNOWN: usize = 0;
const ABSENT: usize = 1;

/// The library that holds `a`, by its load address.
fn object_of(a: *mut c_void) -> Option<usize> {
    let mut info: libc::Dl_info = unsafe_zeroed_dl_info();
    // SAFETY: dladdr fills `info` for any address; a zero return says it found no object.
    let found = unsafe { libc::dladdr(a, &mut info) };
    (found != 0).then_some(info.dli_fbase as usize)
}

fn unsafe_zeroed_dl_info() -> libc::Dl_info {
    // SAFETY: Dl_info is pointers, for which zero is a valid (null) value.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

/// The next definition of an exported name after the shim's, when it is a tool's: a definition
/// in a library that does not also define the profiling name (`P`/`p` before it, or MPICH's
/// `pmpir_` for its `mpi_f08` names) is a tool's.
pub struct Below {
    name: &'static CStr,
    at: AtomicUsize,
    checked: std::sync::atomic::AtomicBool,
}

impl Below {
    pub const fn new(name: &'static CStr) -> Self {
        Below {
            name,
            at: AtomicUsize::new(UNKNOWN),
            checked: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// No tool defines the name after the shim (known once [`Below::tool`] looked).
    #[inline(always)]
    pub fn absent(&self) -> bool {
        self.at.load(Ordering::Relaxed) == ABSENT
    }

    /// The tool's definition, if one comes after the shim's.
    #[inline(always)]
    pub fn tool(&self) -> Option<*mut c_void> {
        match self.at.load(Ordering::Relaxed) {
            ABSENT => None,
            UNKNOWN => self.look_up(),
            at => Some(at as *mut c_void),
        }
    }

    /// Passes a call to the tool at `tool`; the first time, checks that the tool passed it on
    /// to the shim, and says once when it did not: a tool that reaches MPI by other means
    /// hides the calls it wraps from the shim.
    #[inline(always)]
    pub fn pass<R>(&self, tool: *mut c_void, call: impl FnOnce() -> R) -> R {
        if self.checked.load(Ordering::Relaxed) {
            return call();
        }
        self.pass_checked(tool, call)
    }

    #[cold]
    fn pass_checked<R>(&self, tool: *mut c_void, call: impl FnOnce() -> R) -> R {
        crate::runtime::thread::probing(true);
        let before = REACHED.with(|r| r.replace(false));
        let result = call();
        let reached = REACHED.with(|r| r.replace(before));
        crate::runtime::thread::probing(false);
        if !self.checked.swap(true, Ordering::Relaxed)
            && !reached
            && launcher_rank().unwrap_or(0) == 0
        {
            let name = self.name.to_string_lossy();
            crate::say(&format!(
                "matchshim: {} defines {name} and does not pass it on to {}: the shim does not \
                 see the calls it wraps there",
                library_of(tool),
                profiling_name(self.name).to_string_lossy()
            ));
        }
        result
    }

    #[cold]
    fn look_up(&self) -> Option<*mut c_void> {
        let tool = tool_after_shim(self.name);
        let at = tool.map_or(ABSENT, |t| t as usize);
        self.at.store(at, Ordering::Relaxed);
        tool
    }
}

thread_local! {
    static REACHED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The shim's profiling level was entered on this thread.
#[inline(always)]
pub fn reached() {
    if probing() {
        REACHED.with(|r| r.set(true));
    }
}

/// A first call passed to a tool is under way (see [`reached`]); each checks that the tool
/// passes it on to the shim's profiling name.
#[inline(always)]
pub fn probing() -> bool {
    crate::runtime::thread::tool_probed()
}

/// The path of the library that holds `a`.
fn library_of(a: *mut c_void) -> String {
    let mut info = unsafe_zeroed_dl_info();
    // SAFETY: dladdr on an address; dli_fname, when set, is a C string.
    unsafe {
        if libc::dladdr(a, &mut info) != 0 && !info.dli_fname.is_null() {
            return CStr::from_ptr(info.dli_fname)
                .to_string_lossy()
                .into_owned();
        }
    }
    "a library".into()
}

/// This process's rank as the launcher tells it, before MPI can.
pub fn launcher_rank() -> Option<u32> {
    [
        "PMI_RANK",
        "OMPI_COMM_WORLD_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok()?.parse().ok())
}

fn profiling_name(name: &CStr) -> std::ffi::CString {
    let bytes = name.to_bytes();
    let p: &[u8] = if bytes.first().is_some_and(u8::is_ascii_uppercase) {
        b"P"
    } else {
        b"p"
    };
    std::ffi::CString::new([p, bytes].concat()).expect("no NUL")
}

fn tool_after_shim(name: &CStr) -> Option<*mut c_void> {
    // SAFETY: dlsym with a NUL-terminated name.
    let next = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) };
    if next.is_null() {
        return None;
    }
    // MPICH's `use mpi_f08` names have `pmpir_` twins (`mpi_wait_f08_`, `pmpir_wait_f08_`).
    let mpich_f08 = name
        .to_str()
        .ok()
        .and_then(|n| n.strip_prefix("mpi_"))
        .and_then(|rest| std::ffi::CString::new(format!("pmpir_{rest}")).ok());
    let own = std::iter::once(profiling_name(name))
        .chain(mpich_f08)
        .any(|twin| {
            // SAFETY: as above.
            let twin = unsafe { libc::dlsym(libc::RTLD_NEXT, twin.as_ptr()) };
            !twin.is_null() && object_of(twin) == object_of(next)
        });
    (!own).then_some(next)
}

/// The MPI library itself: the object that defines `PMPI_Comm_rank`, which the shim links and
/// does not export.
fn mpi_library() -> *mut c_void {
    static HANDLE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *HANDLE.get_or_init(|| {
        let mut info = unsafe_zeroed_dl_info();
        let own = PMPI_Comm_rank as *mut c_void;
        // SAFETY: dladdr on a function's address; dlopen of a loaded library by its path.
        let handle = unsafe {
            if libc::dladdr(own, &mut info) == 0 || info.dli_fname.is_null() {
                std::ptr::null_mut()
            } else {
                libc::dlopen(info.dli_fname, libc::RTLD_LAZY | libc::RTLD_NOLOAD)
            }
        };
        handle as usize
    }) as *mut c_void
}

/// An MPI call as the MPI library makes it: its `PMPI_*` looked up in that library.
pub struct Own {
    name: &'static CStr,
    at: AtomicUsize,
}

impl Own {
    pub const fn new(name: &'static CStr) -> Self {
        Own {
            name,
            at: AtomicUsize::new(UNKNOWN),
        }
    }

    /// The call's address once looked up.
    #[inline(always)]
    pub fn known(&self) -> Option<*mut c_void> {
        match self.at.load(Ordering::Relaxed) {
            UNKNOWN => None,
            at => Some(at as *mut c_void),
        }
    }

    #[cold]
    pub fn look_up(&self) -> *mut c_void {
        let library = mpi_library();
        let at = if library.is_null() {
            // Linked statically: the next definition after the shim.
            // SAFETY: dlsym with a NUL-terminated name.
            unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr()) }
        } else {
            // SAFETY: dlsym on a loaded library's handle with a NUL-terminated name.
            unsafe { libc::dlsym(library, self.name.as_ptr()) }
        };
        if at.is_null() {
            crate::say(&format!(
                "matchshim: the MPI library has no {}; aborting",
                self.name.to_string_lossy()
            ));
            std::process::abort();
        }
        self.at.store(at as usize, Ordering::Relaxed);
        at
    }
}

/// Where the shim cannot stand beside what else is loaded, one line saying so: a library
/// loaded before the shim that defines the profiling names itself takes the calls that tools
/// pass on, and the shim never sees them.
pub fn stacking_problem() -> Option<String> {
    let shim = object_of(stacking_problem as *mut c_void)?;
    let mut names = Vec::new();
    let mut library = String::new();
    for name in next::PROFILED {
        // SAFETY: dlsym with a NUL-terminated name.
        let at = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) };
        if at.is_null() || object_of(at) == Some(shim) {
            continue;
        }
        if library.is_empty() {
            library = library_of(at);
        }
        names.push(name.to_string_lossy().into_owned());
    }
    let first = names.first()?;
    let more = match names.len() - 1 {
        0 => String::new(),
        n => format!(" and {n} more of the shim's profiling names"),
    };
    Some(format!(
        "matchshim: {library} defines {first}{more} and is loaded before the shim: calls that \
         tools pass on reach it, not the shim; preload libmatchshim.so before it"
    ))
}
