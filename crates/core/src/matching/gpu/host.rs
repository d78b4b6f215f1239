//! The host build of the kernels (host.c, compiled by build.rs).

use super::side::Entry;

extern "C" {
    fn ms_scan_host(
        word_begin: u32,
        word_end: u32,
        keys: *const u64,
        live: *const u32,
        items: *const u64,
        count: u32,
        queued_patterns: i32,
        first: *mut u32,
    );
    fn ms_lookup_host(
        count: u32,
        items: *const u64,
        table: *const Entry,
        bits: u32,
        next: *const u32,
        claims: *mut u32,
        claim: i32,
        entry: *mut u32,
        slot: *mut u32,
    );
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

/// The scan kernel's threads `begin..end` in order: `first[i]` falls to the earliest live slot
/// that fits `items[i]`.
pub(super) fn scan(
    keys: &[u64],
    live: &[u32],
    begin: usize,
    end: usize,
    items: &[u64],
    patterns: bool,
    first: &mut [u32],
) {
    assert!(end <= live.len() && end * 32 <= keys.len() && first.len() >= items.len());
    // SAFETY: the bounds were checked above.
    unsafe {
        ms_scan_host(
            begin as u32,
            end as u32,
            keys.as_ptr(),
            live.as_ptr(),
            items.as_ptr(),
            items.len() as u32,
            patterns as i32,
            first.as_mut_ptr(),
        )
    }
}

/// The lookup kernel's threads in order: `entry[i]` is the table entry of `items[i]`; with
/// `claim`, `slot[i]` the element it takes.
#[allow(clippy::too_many_arguments)]
pub(super) fn lookup(
    items: &[u64],
    table: &[Entry],
    bits: u32,
    next: &[u32],
    claims: &mut [u32],
    claim: bool,
    entry: &mut [u32],
    slot: &mut [u32],
) {
    let n = items.len();
    assert!(table.len() == 1 << bits && (!claim || claims.len() >= table.len()));
    assert!(entry.len() >= n && slot.len() >= n);
    // SAFETY: the bounds were checked above; chains hold slots below next.len().
    unsafe {
        ms_lookup_host(
            n as u32,
            items.as_ptr(),
            table.as_ptr(),
            bits,
            next.as_ptr(),
            claims.as_mut_ptr(),
            claim as i32,
            entry.as_mut_ptr(),
            slot.as_mut_ptr(),
        )
    }
}
