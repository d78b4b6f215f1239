//! A cheap clock for timing every engine call: the time-stamp counter where there is one (a
//! few nanoseconds a read), converted to nanoseconds against the system clock.

use std::time::Instant;

pub struct Clock {
    start: Instant,
    start_ticks: u64,
}

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
    pub fn new() -> Clock {
        let start = Instant::now();
        Clock {
            start,
            start_ticks: read().unwrap_or(0),
        }
    }

    #[inline(always)]
    pub fn ticks(&self) -> u64 {
        read().unwrap_or_else(|| self.start.elapsed().as_nanos() as u64)
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Nanoseconds in `ticks`, from the rate seen since the clock started.
    pub fn nanos(&self, ticks: u64) -> u64 {
        let elapsed_ns = self.start.elapsed().as_nanos() as f64;
        let elapsed_ticks = self.ticks().saturating_sub(self.start_ticks) as f64;
        if read().is_none() || elapsed_ticks == 0.0 {
            return ticks;
        }
        (ticks as f64 * elapsed_ns / elapsed_ticks) as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
