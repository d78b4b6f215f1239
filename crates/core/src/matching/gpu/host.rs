//! The host build of the kernels (host.c, compiled by build.rs): the same bodies the device
//! runs, driven thread by thread.

use super::device::Kernel;
use super::mirror::MsArgs;

extern "C" {
    fn ms_sync_host(a: *const MsArgs);
    fn ms_table_init_host(a: *const MsArgs);
    fn ms_rank_host(a: *const MsArgs);
    fn ms_wscan_host(a: *const MsArgs);
    fn ms_round_claim_host(a: *const MsArgs);
    fn ms_round_break_host(a: *const MsArgs);
    fn ms_round_commit_host(a: *const MsArgs);
    fn ms_scan1_host(a: *const MsArgs);
    fn ms_items_host(a: *const MsArgs, kernel: i32) -> u32;
    #[cfg(test)]
    fn ms_layout_host(what: i32) -> std::ffi::c_ulong;
    fn ms_first_host(
        word_begin: u32,
        word_end: u32,
        keys: *const u64,
        live: *const u32,
        item: u64,
        queued_patterns: i32,
        depth: *mut u32,
    ) -> u32;
}

/// Runs `kernel`'s host build on `args`, whose addresses are host memory (the mirror of the
/// host build, and the host's side).
pub(super) fn run(kernel: Kernel, args: &MsArgs) {
    // SAFETY: every address in `args` is a live host array of the size the mirror gave it.
    unsafe {
        match kernel {
            Kernel::Sync => ms_sync_host(args),
            Kernel::TableInit => ms_table_init_host(args),
            Kernel::Rank => ms_rank_host(args),
            Kernel::WScan => ms_wscan_host(args),
            Kernel::RoundClaim => ms_round_claim_host(args),
            Kernel::RoundBreak => ms_round_break_host(args),
            Kernel::RoundCommit => ms_round_commit_host(args),
            Kernel::Scan1 => ms_scan1_host(args),
        }
    }
}

/// The work items of `kernel` on `args` (the device's formula), to size a launch.
pub(super) fn items(kernel: Kernel, args: &MsArgs) -> u32 {
    // SAFETY: reads counts from `args` only.
    unsafe { ms_items_host(args, kernel as i32) }
}

/// kernels.h's sizes and offsets: (args, side, burst, args.b, side.n_dirty, burst.count,
/// host entry, device entry, ticket, side.chains).
#[cfg(test)]
pub(super) fn layout() -> [usize; 10] {
    // SAFETY: returns constants.
    std::array::from_fn(|what| unsafe { ms_layout_host(what as i32) } as usize)
}

/// The earliest live slot in words `begin..end` that fits `item`, and the live slots passed.
pub(super) fn first(
    keys: &[u64],
    live: &[u32],
    begin: usize,
    end: usize,
    item: u64,
    patterns: bool,
) -> (Option<u32>, usize) {
    assert!(end <= live.len() && end * 32 <= keys.len());
    let mut depth = 0;
    // SAFETY: the bounds were checked above.
    let slot = unsafe {
        ms_first_host(
            begin as u32,
            end as u32,
            keys.as_ptr(),
            live.as_ptr(),
            item,
            patterns as i32,
            &mut depth,
        )
    };
    ((slot != u32::MAX).then_some(slot), depth as usize)
}
