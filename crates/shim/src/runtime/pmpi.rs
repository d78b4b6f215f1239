//! Small wrappers over the `PMPI_*` calls the runtime makes, hiding large-count differences.

use crate::ffi::*;
use std::mem::MaybeUninit;
use std::os::raw::{c_int, c_void};

pub fn zeroed_status() -> MPI_Status {
    // SAFETY: MPI_Status is plain integers.
    unsafe { MaybeUninit::zeroed().assume_init() }
}

/// The status MPI defines for a receive from `MPI_PROC_NULL` and for inactive requests:
/// the given source, `MPI_ANY_TAG`, count 0, not cancelled.
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

pub fn cancelled_status(source: c_int, tag: c_int) -> MPI_Status {
    let mut status = empty_status(source);
    status.MPI_TAG = tag;
    // SAFETY: status is a valid MPI_Status.
    unsafe { PMPI_Status_set_cancelled(&mut status, 1) };
    status
}

/// Copies `status` to the user's `out` unless it is `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `out` is `MPI_STATUS_IGNORE` or points to a writable `MPI_Status`.
pub unsafe fn store_status(out: *mut MPI_Status, status: &MPI_Status) {
    if out != abi().status_ignore && !out.is_null() {
        *out = *status;
    }
}

/// Pulls the next message of `comm` out of MPI's queue, if one has arrived.
pub fn improbe_any(comm: MPI_Comm) -> Option<(MPI_Message, MPI_Status)> {
    let mut flag = 0;
    let mut message = abi().message_null;
    let mut status = zeroed_status();
    // SAFETY: all out-pointers are valid locals.
    unsafe {
        PMPI_Improbe(
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
/// The arguments are those of a user receive (`buf` big enough for `count` of `datatype`).
pub unsafe fn mrecv(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: &mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    #[cfg(large_count)]
    return PMPI_Mrecv_c(buf, count, datatype, message, status);
    #[cfg(not(large_count))]
    return PMPI_Mrecv(buf, count as c_int, datatype, message, status);
}

/// # Safety
/// As for [`mrecv`].
pub unsafe fn imrecv(
    buf: *mut c_void,
    count: Count,
    datatype: MPI_Datatype,
    message: &mut MPI_Message,
    request: &mut MPI_Request,
) -> c_int {
    #[cfg(large_count)]
    return PMPI_Imrecv_c(buf, count, datatype, message, request);
    #[cfg(not(large_count))]
    return PMPI_Imrecv(buf, count as c_int, datatype, message, request);
}

/// Tests a real request; `Some((status, error))` once it completed (and was freed).
pub fn test(request: &mut MPI_Request) -> Option<(MPI_Status, c_int)> {
    let mut flag = 0;
    let mut status = zeroed_status();
    // SAFETY: request is a live request handle owned by the runtime.
    let err = unsafe { PMPI_Test(request, &mut flag, &mut status) };
    (flag != 0 || err != abi().success).then_some((status, err))
}

/// Raises `code` through `comm`'s error handler (the default aborts) and returns it.
pub fn raise(comm: MPI_Comm, code: c_int) -> c_int {
    // SAFETY: plain call; an invalid comm makes MPI raise on its own.
    unsafe { PMPI_Comm_call_errhandler(comm, code) };
    code
}

pub fn comm_rank(comm: MPI_Comm) -> c_int {
    let mut rank = 0;
    // SAFETY: out-pointer is a valid local.
    unsafe { PMPI_Comm_rank(comm, &mut rank) };
    rank
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

/// The MPI-4 assertions `comm`'s info makes (none when MPI gives no info).
pub fn assertions(comm: MPI_Comm) -> crate::matching::Assertions {
    let mut info = MaybeUninit::<MPI_Info>::uninit();
    // SAFETY: `info` is written by a successful call and freed below.
    if unsafe { PMPI_Comm_get_info(comm, info.as_mut_ptr()) } != abi().success {
        return Default::default();
    }
    // SAFETY: written by the successful call.
    let mut info = unsafe { info.assume_init() };
    let assertions = crate::matching::Assertions::from_info(|key| {
        let key = std::ffi::CString::new(key).ok()?;
        let mut value = [0 as std::os::raw::c_char; 16];
        let mut flag = 0;
        // SAFETY: `value` holds `len` characters and the terminating NUL.
        unsafe { PMPI_Info_get(info, key.as_ptr(), 15, value.as_mut_ptr(), &mut flag) };
        // SAFETY: MPI wrote a NUL-terminated string when it set `flag`.
        (flag != 0).then(|| {
            unsafe { std::ffi::CStr::from_ptr(value.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        })
    });
    // SAFETY: the info object MPI_Comm_get_info made for us.
    unsafe { PMPI_Info_free(&mut info) };
    assertions
}
