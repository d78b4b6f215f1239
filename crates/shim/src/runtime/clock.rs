//! A cheap clock for timing the engines on every match: the time-stamp counter where there is
//! one (a few nanoseconds a read), converted to nanoseconds against the system clock.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Instant;

pub struct Clock {
    start: Instant,
    start_ticks: u64,
    /// Ticks per nanosecond (an `f64`'s bits; 0 until measured over long enough).
    rate: AtomicU64,
}

/// How long the clock runs before its rate is taken as measured.
const CALIBRATION_NS: u128 = 10_000_000;

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
            rate: AtomicU64::new(0),
        }
    }

    #[inline(always)]
    pub fn ticks(&self) -> u64 {
        read().unwrap_or_else(|| self.start.elapsed().as_nanos() as u64)
    }

    pub fn elapsed_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Ticks per nanosecond, measured once the clock has run for a while (`None` before).
    pub fn ticks_per_ns(&self) -> Option<f64> {
        let known = self.rate.load(Relaxed);
        if known != 0 {
            return Some(f64::from_bits(known));
        }
        let elapsed_ns = self.start.elapsed().as_nanos();
        if elapsed_ns < CALIBRATION_NS {
            return None;
        }
        let rate = if read().is_some() {
            self.ticks().saturating_sub(self.start_ticks) as f64 / elapsed_ns as f64
        } else {
            1.0
        };
        self.rate.store(rate.to_bits(), Relaxed);
        Some(rate)
    }

    /// Nanoseconds in `ticks`.
    pub fn nanos(&self, ticks: u64) -> u64 {
        let rate = self.ticks_per_ns().unwrap_or_else(|| {
            let elapsed_ns = self.start.elapsed().as_nanos().max(1) as f64;
            self.ticks().saturating_sub(self.start_ticks).max(1) as f64 / elapsed_ns
        });
        (ticks as f64 / rate) as u64
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
