//! The shim's per-communicator counters as MPI_T performance variables, listed after the MPI's
//! own: index `n` of the shim's is `MPI's count + n`. They are bound to a communicator,
//! read-only and continuous. Their handles are the shim's own allocations, kept in a table, so
//! they never equal a handle MPI gave out; every other handle and index goes to MPI as it is.

use crate::intercept::guarded;
use crate::mpi::{abi, next, Code, HandleKey, MPI_Comm, MPI_Datatype, MPI_T_enum};
use crate::mpi::{MPI_T_pvar_handle, MPI_T_pvar_session};
use crate::runtime::comm::Comm;
use crate::runtime::{runtime, Runtime};
use matchshim_core::protocol::Mode;
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::LazyLock;

enum Class {
    Level,
    State,
    Counter,
    Timer,
}

struct Var {
    name: &'static CStr,
    class: Class,
    desc: &'static CStr,
    /// The value, for the handle's communicator.
    value: fn(&Runtime, &Comm) -> u64,
}

static VARS: [Var; 10] = [
    Var {
        name: c"matchshim_posted_length",
        class: Class::Level,
        desc: c"Receives waiting in the shim's posted queue of the communicator (0 while MPI matches for it)",
        value: |_, comm| comm.stats().2 .0 as u64,
    },
    Var {
        name: c"matchshim_unexpected_length",
        class: Class::Level,
        desc: c"Messages waiting in the shim's unexpected queue of the communicator (0 while MPI matches for it)",
        value: |_, comm| comm.stats().2 .1 as u64,
    },
    Var {
        name: c"matchshim_mode",
        class: Class::State,
        desc: c"Who matches the communicator's messages: 0 MPI (delegated), 1 the shim (takeover)",
        value: |_, comm| (comm.takeover.mode() == Mode::Takeover) as u64,
    },
    Var {
        name: c"matchshim_takeovers",
        class: Class::Counter,
        desc: c"Times the shim took over the communicator's matching (starting in takeover counts one)",
        value: |_, comm| comm.takeover.takeovers(),
    },
    Var {
        name: c"matchshim_switches",
        class: Class::Counter,
        desc: c"Switches of the communicator between the two modes, either way",
        value: |_, comm| comm.takeover.switches(),
    },
    Var {
        name: c"matchshim_matches",
        class: Class::Counter,
        desc: c"Messages the shim matched on the communicator (point-to-point and collective)",
        value: |_, comm| {
            let stats = comm.stats().0;
            stats.point_to_point.matches + stats.collective.matches
        },
    },
    Var {
        name: c"matchshim_delegated_receives",
        class: Class::Counter,
        desc: c"Receives on the communicator that went to MPI while MPI matched for it",
        value: |_, comm| comm.takeover.delegated_receives(),
    },
    Var {
        name: c"matchshim_receives_in_mpi",
        class: Class::Level,
        desc: c"Receives MPI holds for the communicator as the shim counts them: one posted in 64 is followed to its completion and stands for 64",
        value: |_, comm| comm.takeover.receives_in_mpi(),
    },
    Var {
        name: c"matchshim_unconfirmed_takeovers",
        class: Class::Counter,
        desc: c"Takeovers of the communicator that timed calls asked for and a warm probe of MPI's queue found shallow, so not made",
        value: |_, comm| comm.takeover.unconfirmed(),
    },
    Var {
        name: c"matchshim_match_time_ns",
        class: Class::Timer,
        desc: c"Time the shim's engine spent matching for the communicator, in nanoseconds",
        value: |rt, comm| {
            let ticks = comm.stats().1;
            rt.clock.nanos(ticks[0]) + rt.clock.nanos(ticks[1])
        },
    },
];

const MODE: usize = 2;

impl Var {
    fn class(&self) -> c_int {
        match self.class {
            Class::Level => abi().t_class_level,
            Class::State => abi().t_class_state,
            Class::Counter => abi().t_class_counter,
            Class::Timer => abi().t_class_timer,
        }
    }
}

/// One of the shim's handles: a variable of one communicator, in one session.
struct Handle {
    session: usize,
    var: &'static Var,
    comm: &'static Comm,
    rt: &'static Runtime,
}

/// The shim's handles, by address (the value the tool holds).
static HANDLES: LazyLock<Mutex<FxHashMap<usize, Box<Handle>>>> =
    LazyLock::new(|| Mutex::new(FxHashMap::default()));

/// Runs `body`; a panic becomes `MPI_T_ERR_INVALID` instead of crossing into C.
fn shielded(body: impl FnOnce() -> Code) -> Code {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(abi().t_err_invalid)
}

/// MPI's own count of performance variables: where the shim's start.
fn mpi_count() -> Result<c_int, Code> {
    let mut count = 0;
    // SAFETY: an int to write.
    let code = unsafe { next::MPI_T_pvar_get_num(&mut count) };
    if code == abi().success {
        Ok(count)
    } else {
        Err(code)
    }
}

/// The shim's variable at `index`, `Ok(None)` for one of MPI's (or an index MPI rejects).
fn ours(index: c_int) -> Result<Option<&'static Var>, Code> {
    let first = mpi_count()?;
    if index < first {
        return Ok(None);
    }
    match VARS.get((index - first) as usize) {
        Some(var) => Ok(Some(var)),
        None => Err(abi().t_err_invalid_index),
    }
}

/// The shim's handle `handle` of `session`: `Ok(None)` for any other handle (MPI's), `Err` for
/// one of the shim's used with another session.
fn with_handle<T>(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    body: impl FnOnce(&Handle) -> T,
) -> Result<Option<T>, Code> {
    let handles = HANDLES.lock();
    match handles.get(&handle.key()) {
        None => Ok(None),
        Some(ours) if ours.session == session.key() => Ok(Some(body(ours))),
        Some(_) => Err(abi().t_err_invalid_handle),
    }
}

/// Copies `text` into the caller's buffer of `*len` characters as MPI_T does: truncated to the
/// buffer, with its terminator; `*len` becomes the characters written, or the length needed
/// when no buffer is given.
///
/// # Safety
/// `buf` holds `*len` characters or is null; `len` is null or valid.
unsafe fn put_string(text: &CStr, buf: *mut c_char, len: *mut c_int) {
    if len.is_null() {
        return;
    }
    let bytes = text.to_bytes_with_nul();
    // SAFETY: the caller's int.
    let room = unsafe { *len };
    if buf.is_null() || room <= 0 {
        // SAFETY: as above.
        unsafe { *len = bytes.len() as c_int };
        return;
    }
    let copied = bytes.len().min(room as usize);
    // SAFETY: `buf` holds `room` >= `copied` characters.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, copied);
        *buf.add(copied - 1) = 0;
        *len = copied as c_int;
    }
}

/// Writes `value` through `out` when the caller asked for it.
///
/// # Safety
/// `out` is null or valid.
unsafe fn put<T>(out: *mut T, value: T) {
    if !out.is_null() {
        // SAFETY: as the caller promises.
        unsafe { *out = value };
    }
}

pub unsafe fn get_num(num_pvar: *mut c_int) -> c_int {
    // SAFETY: the caller's int.
    let code = unsafe { next::MPI_T_pvar_get_num(num_pvar) };
    if code == abi().success && !num_pvar.is_null() {
        // SAFETY: as above.
        unsafe { *num_pvar += VARS.len() as c_int };
    }
    code
}

#[allow(clippy::too_many_arguments)] // MPI's own
pub unsafe fn get_info(
    pvar_index: c_int,
    name: *mut c_char,
    name_len: *mut c_int,
    verbosity: *mut c_int,
    var_class: *mut c_int,
    datatype: *mut MPI_Datatype,
    enumtype: *mut MPI_T_enum,
    desc: *mut c_char,
    desc_len: *mut c_int,
    bind: *mut c_int,
    readonly: *mut c_int,
    continuous: *mut c_int,
    atomic: *mut c_int,
) -> c_int {
    shielded(|| match ours(pvar_index) {
        Err(code) => code,
        // SAFETY: the caller's arguments, as MPI requires them.
        Ok(None) => unsafe {
            next::MPI_T_pvar_get_info(
                pvar_index, name, name_len, verbosity, var_class, datatype, enumtype, desc,
                desc_len, bind, readonly, continuous, atomic,
            )
        },
        Ok(Some(var)) => {
            let is_mode = std::ptr::eq(var, &VARS[MODE]);
            // SAFETY: each pointer is null or valid, as MPI_T requires.
            unsafe {
                put_string(var.name, name, name_len);
                put(verbosity, abi().t_verbosity_user_basic);
                put(var_class, var.class());
                put(
                    datatype,
                    if is_mode {
                        abi().int_
                    } else {
                        abi().unsigned_long_long
                    },
                );
                put(enumtype, abi().t_enum_null);
                put_string(var.desc, desc, desc_len);
                put(bind, abi().t_bind_mpi_comm);
                put(readonly, 1);
                put(continuous, 1);
                put(atomic, 0);
            }
            abi().success
        }
    })
}

pub unsafe fn get_index(name: *const c_char, var_class: c_int, pvar_index: *mut c_int) -> c_int {
    // SAFETY: the caller's arguments, as MPI requires them.
    let code = unsafe { next::MPI_T_pvar_get_index(name, var_class, pvar_index) };
    if code != abi().t_err_invalid_name || name.is_null() {
        return code;
    }
    shielded(|| {
        // SAFETY: a C string, as MPI requires.
        let name = unsafe { CStr::from_ptr(name) };
        let Some(n) = VARS.iter().position(|var| var.name == name) else {
            return code;
        };
        if VARS[n].class() != var_class {
            return code;
        }
        match mpi_count() {
            Ok(first) => {
                // SAFETY: the caller's int.
                unsafe { put(pvar_index, first + n as c_int) };
                abi().success
            }
            Err(code) => code,
        }
    })
}

pub unsafe fn session_free(session: *mut MPI_T_pvar_session) -> c_int {
    let key = (!session.is_null()).then(|| {
        // SAFETY: the caller's session.
        unsafe { *session }.key()
    });
    // SAFETY: the caller's arguments, as MPI requires them.
    let code = unsafe { next::MPI_T_pvar_session_free(session) };
    if code == abi().success {
        if let Some(key) = key {
            HANDLES.lock().retain(|_, handle| handle.session != key);
        }
    }
    code
}

pub unsafe fn handle_alloc(
    session: MPI_T_pvar_session,
    pvar_index: c_int,
    obj_handle: *mut c_void,
    handle: *mut MPI_T_pvar_handle,
    count: *mut c_int,
) -> c_int {
    shielded(|| {
        let var = match ours(pvar_index) {
            Err(code) => return code,
            // SAFETY: the caller's arguments, as MPI requires them.
            Ok(None) => unsafe {
                return next::MPI_T_pvar_handle_alloc(
                    session, pvar_index, obj_handle, handle, count,
                );
            },
            Ok(Some(var)) => var,
        };
        if obj_handle.is_null() || handle.is_null() {
            return abi().t_err_invalid_handle;
        }
        // Before MPI_Init, after MPI_Finalize, or with the shim off there are no counters.
        let Some(rt) = runtime() else {
            return abi().t_err_invalid;
        };
        // SAFETY: a communicator handle, as MPI_T_BIND_MPI_COMM requires.
        let comm_handle = unsafe { *obj_handle.cast::<MPI_Comm>() };
        if comm_handle == abi().comm_null {
            return abi().t_err_invalid_handle;
        }
        let mut found = None;
        let looked = guarded("MPI_T_pvar_handle_alloc", rt, |rt| {
            found = rt.comms.get(comm_handle).ok();
            Ok(abi().success)
        });
        let (Ok(_), Some(comm)) = (looked, found) else {
            return abi().t_err_invalid_handle;
        };
        let ours = Box::new(Handle {
            session: session.key(),
            var,
            comm,
            rt,
        });
        let key = &*ours as *const Handle as usize;
        HANDLES.lock().insert(key, ours);
        // SAFETY: the caller's handle and int.
        unsafe {
            *handle = key as MPI_T_pvar_handle;
            put(count, 1);
        }
        abi().success
    })
}

pub unsafe fn handle_free(session: MPI_T_pvar_session, handle: *mut MPI_T_pvar_handle) -> c_int {
    if handle.is_null() {
        // SAFETY: the caller's arguments, as MPI requires them.
        return unsafe { next::MPI_T_pvar_handle_free(session, handle) };
    }
    // SAFETY: the caller's handle.
    let key = unsafe { *handle }.key();
    let freed = {
        let mut handles = HANDLES.lock();
        match handles.get(&key) {
            None => None,
            Some(ours) if ours.session != session.key() => Some(false),
            Some(_) => Some(handles.remove(&key).is_some()),
        }
    };
    match freed {
        // SAFETY: the caller's arguments, as MPI requires them.
        None => unsafe { next::MPI_T_pvar_handle_free(session, handle) },
        Some(false) => abi().t_err_invalid_handle,
        Some(true) => {
            // SAFETY: the caller's handle.
            unsafe { *handle = abi().t_pvar_handle_null };
            abi().success
        }
    }
}

/// What a call that changes a variable answers for the shim's handles; `None` for MPI's.
fn refused(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle, code: Code) -> Option<Code> {
    match with_handle(session, handle, |_| code) {
        Ok(found) => found,
        Err(code) => Some(code),
    }
}

pub unsafe fn start(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    refused(session, handle, abi().t_err_pvar_no_startstop).unwrap_or_else(|| {
        // SAFETY: the caller's arguments, as MPI requires them.
        unsafe { next::MPI_T_pvar_start(session, handle) }
    })
}

pub unsafe fn stop(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    refused(session, handle, abi().t_err_pvar_no_startstop).unwrap_or_else(|| {
        // SAFETY: the caller's arguments, as MPI requires them.
        unsafe { next::MPI_T_pvar_stop(session, handle) }
    })
}

pub unsafe fn write(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *const c_void,
) -> c_int {
    refused(session, handle, abi().t_err_pvar_no_write).unwrap_or_else(|| {
        // SAFETY: the caller's arguments, as MPI requires them.
        unsafe { next::MPI_T_pvar_write(session, handle, buf) }
    })
}

pub unsafe fn reset(session: MPI_T_pvar_session, handle: MPI_T_pvar_handle) -> c_int {
    refused(session, handle, abi().t_err_pvar_no_write).unwrap_or_else(|| {
        // SAFETY: the caller's arguments, as MPI requires them.
        unsafe { next::MPI_T_pvar_reset(session, handle) }
    })
}

pub unsafe fn readreset(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    refused(session, handle, abi().t_err_pvar_no_write).unwrap_or_else(|| {
        // SAFETY: the caller's arguments, as MPI requires them.
        unsafe { next::MPI_T_pvar_readreset(session, handle, buf) }
    })
}

pub unsafe fn read(
    session: MPI_T_pvar_session,
    handle: MPI_T_pvar_handle,
    buf: *mut c_void,
) -> c_int {
    shielded(|| {
        let value = match with_handle(session, handle, |ours| {
            (
                std::ptr::eq(ours.var, &VARS[MODE]),
                (ours.var.value)(ours.rt, ours.comm),
            )
        }) {
            Err(code) => return code,
            // SAFETY: the caller's arguments, as MPI requires them.
            Ok(None) => return unsafe { next::MPI_T_pvar_read(session, handle, buf) },
            Ok(Some(value)) => value,
        };
        if buf.is_null() {
            return abi().t_err_invalid;
        }
        // SAFETY: a buffer of the variable's datatype, as MPI_T requires.
        unsafe {
            match value {
                (true, mode) => *buf.cast::<c_int>() = mode as c_int,
                (false, value) => *buf.cast::<u64>() = value,
            }
        }
        abi().success
    })
}
