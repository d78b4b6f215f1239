//! An asymmetric fence for the permits of [`super::policy`]: a receive on its way into MPI
//! stores its permit and then reads the mode, a switch to takeover stores the mode and then
//! reads the permits, and each side needs a full fence between its store and its load. The
//! receive side runs on every call and the switch rarely, so on Linux the receive side is
//! only a compiler fence and the switch runs `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`,
//! which puts a full fence in every running thread of the process. Where that call is refused
//! (an old kernel, a sandbox), both sides are full fences.

use std::sync::atomic::{compiler_fence, fence, AtomicU8, Ordering::*};

const UNKNOWN: u8 = 0;
const EXPEDITED: u8 = 1;
const FULL: u8 = 2;

static KIND: AtomicU8 = AtomicU8::new(UNKNOWN);

/// Registers the process for expedited barriers; called before any thread takes a permit
/// (a light side that finds none registered yet is a full fence, so an early call is safe).
pub fn prepare() {
    if KIND.load(Acquire) == UNKNOWN {
        let kind = if register() { EXPEDITED } else { FULL };
        KIND.store(kind, Release);
    }
}

/// The side of every call, between its store and its load.
#[inline(always)]
pub fn light() {
    if KIND.load(Relaxed) == EXPEDITED {
        compiler_fence(SeqCst);
    } else {
        fence(SeqCst);
    }
}

/// The rare side, between its store and its load.
pub fn heavy() {
    if KIND.load(Acquire) == EXPEDITED && barrier() {
        return;
    }
    fence(SeqCst);
}

#[cfg(target_os = "linux")]
fn membarrier(cmd: libc::c_int) -> bool {
    // SAFETY: membarrier takes a command and two zero arguments and touches no memory.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) == 0 }
}

#[cfg(target_os = "linux")]
fn register() -> bool {
    const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;
    membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
}

#[cfg(target_os = "linux")]
fn barrier() -> bool {
    const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    // Registered in `prepare`, so it cannot fail for want of that; were it to fail anyway
    // the light sides already ran only compiler fences, so there is no safe fallback.
    if !membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) {
        eprintln!("matchshim: membarrier failed after registration; aborting");
        std::process::abort();
    }
    true
}

#[cfg(not(target_os = "linux"))]
fn register() -> bool {
    false
}

#[cfg(not(target_os = "linux"))]
fn barrier() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;

    /// Dekker's test: with the fences, two threads that each store then load never both miss
    /// the other's store.
    #[test]
    fn store_then_load_on_both_sides_never_both_miss() {
        prepare();
        let flags = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        let seen = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
        for round in 1..=2000 {
            let go = Arc::new(std::sync::Barrier::new(2));
            let (f, s, g) = (flags.clone(), seen.clone(), go.clone());
            let light_side = std::thread::spawn(move || {
                g.wait();
                f[0].store(round, Relaxed);
                light();
                s[0].store(f[1].load(Relaxed), Relaxed);
            });
            go.wait();
            flags[1].store(round, Relaxed);
            heavy();
            seen[1].store(flags[0].load(Relaxed), Relaxed);
            light_side.join().unwrap();
            let (a, b) = (seen[0].load(Relaxed), seen[1].load(Relaxed));
            assert!(a == round || b == round, "round {round}: both missed");
        }
    }
}
