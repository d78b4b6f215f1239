//! How busy the machine is besides the runs `compare` makes: the load average before them, and
//! during each run the cores that other work kept busy (the machine's CPU time, from
//! `/proc/stat`, less the CPU time of the runs themselves, which are this command's waited-for
//! descendants).

use std::time::Instant;

/// The 1-minute load average.
pub fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// Busy CPU time of the whole machine and of this command's finished children, at one moment.
pub struct Sample {
    machine_s: f64,
    children_s: f64,
    at: Instant,
}

/// Seconds of CPU time the machine has spent busy since boot (all cores).
fn machine_busy_s() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = text
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal: all but idle and iowait are busy.
    let busy: u64 = fields
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (ticks > 0).then(|| busy as f64 / ticks as f64)
}

/// CPU seconds of this process's children that ended and were waited for, with their own
/// waited-for descendants (the launcher, its daemons, the ranks).
fn children_s() -> f64 {
    // SAFETY: getrusage writes only into the struct we pass.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage);
        usage
    };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

impl Sample {
    pub fn now() -> Option<Sample> {
        Some(Sample {
            machine_s: machine_busy_s()?,
            children_s: children_s(),
            at: Instant::now(),
        })
    }

    /// Cores that work other than this command's children kept busy since `self`.
    pub fn others_since(&self) -> Option<f64> {
        let now = Sample::now()?;
        let wall = now.at.duration_since(self.at).as_secs_f64();
        let others = (now.machine_s - self.machine_s) - (now.children_s - self.children_s);
        (wall > 0.0).then(|| (others / wall).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds in the `times` builtin's `1m2.500000s` form.
    fn seconds(word: &str) -> f64 {
        let (minutes, rest) = word.split_once('m').unwrap();
        minutes.parse::<f64>().unwrap() * 60.0 + rest.trim_end_matches('s').parse::<f64>().unwrap()
    }

    #[test]
    fn a_childs_cpu_time_is_counted_as_the_runs_own() {
        let Some(before) = Sample::now() else {
            return; // no /proc here
        };
        // The shell spins, then says its own CPU time (user, system) as `times` sees it.
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; times",
            ])
            .output()
            .unwrap();
        assert!(out.status.success());
        let after = Sample::now().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let own: f64 = text
            .lines()
            .next()
            .unwrap()
            .split_whitespace()
            .map(seconds)
            .sum();
        let counted = after.children_s - before.children_s;
        // All of the child's CPU time is the runs' own, however busy the machine is, and is
        // what `others_since` takes away from the machine's.
        assert!(own > 0.05, "{text}");
        assert!(
            counted >= 0.9 * own,
            "counted {counted} s, the child says {own} s"
        );
        let others = before.others_since().unwrap();
        let cores = crate::runs::online_cores().unwrap_or(1) as f64;
        assert!((0.0..=cores).contains(&others), "{others}");
        assert!(load_average().is_some());
    }
}
