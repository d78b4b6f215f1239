//! A cheap clock for timing the engines on every match: the time-stamp counter where there is
//! one (a few nanoseconds a read), converted to nanoseconds against the system clock.

use std::time::{Duration, Instant};

pub struct Clock {
    start: Instant,
    /// Ticks per nanosecond.
    rate: f64,
}

/// How long the clock's rate is measured against the system clock when it starts: the
/// takeover policy judges receive calls from a program's first calls on.
const CALIBRATION: Duration = Duration::from_millis(1);

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read() -> Option<u64> {
    // SAFETY: rdtsc has no preconditions on x86_64.
    Some(unsafe { core::arch::x86_64::_rdtsc() })
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
fn read() -> Option<u64> {
    None
}

impl Clock {
    /// A clock whose rate is known: spins for [`CALIBRATION`] where there is a time-stamp
    /// counter.
    pub fn new() -> Clock {
        let start = Instant::now();
        let rate = match read() {
            Some(start_ticks) => {
                while start.elapsed() < CALIBRATION {
                    std::hint::spin_loop();
                }
                let ticks = read().unwrap_or(start_ticks).saturating_sub(start_ticks);
                (ticks as f64 / start.elapsed().as_nanos() as f64).max(f64::MIN_POSITIVE)
            }
            None => 1.0,
        };
        Clock { start, rate }
    }

    #[inline(always)]
    pub fn ticks(&self) -> u64 {
        read().unwrap_or_else(|| self.start.elapsed().as_nanos() as u64)
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub fn ticks_per_ns(&self) -> f64 {
        self.rate
    }

    /// Nanoseconds in `ticks`.
    pub fn nanos(&self, ticks: u64) -> u64 {
        (ticks as f64 / self.rate) as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}

/// The calling thread's CPU time in nanoseconds: it does not advance while the thread waits
/// for a core, so a preempted or yielding thread's measurements keep their worth.
pub fn thread_cpu_ns() -> u64 {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; this clock exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}
