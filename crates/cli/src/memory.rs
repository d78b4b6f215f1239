//! Heap bytes in use and their peak, so that a replay can weigh each engine.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call goes to the system allocator unchanged; only counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        System.alloc(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

/// The most heap bytes in use at once while `body` ran, beyond those in use when it started
/// (on this process's one thread).
pub fn peak_during<R>(body: impl FnOnce() -> R) -> (R, usize) {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let result = body();
    (result, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

#[cfg(test)]
mod tests {
    /// Other test threads allocate too: a large vector stands out of their noise.
    #[test]
    fn a_vector_weighs_its_capacity() {
        let (len, peak) = super::peak_during(|| vec![1u8; 64 << 20].len());
        assert_eq!(len, 64 << 20);
        assert!(peak >= 60 << 20, "{peak}");
    }
}
