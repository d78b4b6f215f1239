//! Collectives as the shim runs them on its own point-to-point: which collective a call is,
//! how the tags of its messages say so, and its algorithms ([`algorithms`]) as schedules of
//! rounds of sends, receives, local reductions and copies, built through a [`Plan`]. The shim
//! builds them with real buffers; [`Shape`] keeps only who sends to whom, for tests and the
//! trace generator.
//!
//! The tag of every message of a call is `call << 9 | kind << 4 | size_class`: `call` numbers
//! the calls on the communicator (wrapping within the MPI's tag range), so concurrent
//! nonblocking collectives never cross, and `kind` and `size_class` let the drain classify an
//! arrival before any receive wants it. Blocking and nonblocking calls are numbered apart (the
//! lowest bit of `call` tells which), as MPICH and Open MPI match them apart: programs that
//! start a nonblocking collective on one rank and a blocking one first on another still work.

pub mod algorithms;
mod shape;

pub use algorithms::{Data, Invalid, Plan, TypeInfo};
pub use shape::{Element, Part, Peers, Shape};

use crate::matching::Class;

/// Which collective a call is (blocking and nonblocking forms share a kind: same traffic).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Gather,
    Gatherv,
    Scatter,
    Scatterv,
    Allgather,
    Allgatherv,
    Alltoall,
    Alltoallv,
    Alltoallw,
    ReduceScatter,
    ReduceScatterBlock,
    Scan,
    Exscan,
}

pub const KINDS: usize = 17;

impl Kind {
    pub const ALL: [Kind; KINDS] = [
        Kind::Barrier,
        Kind::Bcast,
        Kind::Reduce,
        Kind::Allreduce,
        Kind::Gather,
        Kind::Gatherv,
        Kind::Scatter,
        Kind::Scatterv,
        Kind::Allgather,
        Kind::Allgatherv,
        Kind::Alltoall,
        Kind::Alltoallv,
        Kind::Alltoallw,
        Kind::ReduceScatter,
        Kind::ReduceScatterBlock,
        Kind::Scan,
        Kind::Exscan,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::Barrier => "barrier",
            Kind::Bcast => "bcast",
            Kind::Reduce => "reduce",
            Kind::Allreduce => "allreduce",
            Kind::Gather => "gather",
            Kind::Gatherv => "gatherv",
            Kind::Scatter => "scatter",
            Kind::Scatterv => "scatterv",
            Kind::Allgather => "allgather",
            Kind::Allgatherv => "allgatherv",
            Kind::Alltoall => "alltoall",
            Kind::Alltoallv => "alltoallv",
            Kind::Alltoallw => "alltoallw",
            Kind::ReduceScatter => "reduce_scatter",
            Kind::ReduceScatterBlock => "reduce_scatter_block",
            Kind::Scan => "scan",
            Kind::Exscan => "exscan",
        }
    }

    /// The class of this collective's traffic in messages of `size_class`.
    #[inline]
    pub fn class(self, size_class: u8) -> Class {
        Class::Collective {
            kind: self as u8,
            size_class,
        }
    }
}

/// The size class of calls whose blocks differ by rank (`v` and `w` forms).
pub const VARYING: u8 = 15;

/// Message size class: ≤ 8 B is 0, then one class per factor of 4 (≤ 32 B, ≤ 128 B, …), at
/// most 14.
pub fn size_class(bytes: i64) -> u8 {
    if bytes <= 8 {
        return 0;
    }
    let bits = 64 - ((bytes - 1) as u64).leading_zeros();
    ((bits - 2) / 2).min(14) as u8
}

/// Where a collective's messages arrive many at once, so that they pile up in a matching
/// queue: the shim's algorithms pay only there (its engine keeps collective elements apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pile {
    /// The root receives a block from every rank (gathers).
    Root,
    /// Every rank receives a block from every rank (all-to-alls).
    Everyone,
    /// A few messages per rank and round: trees, rings, recursive doubling, and scatters,
    /// whose receivers get one block each.
    Nowhere,
}

impl Kind {
    fn pile(self) -> Pile {
        match self {
            Kind::Gather | Kind::Gatherv => Pile::Root,
            Kind::Alltoall | Kind::Alltoallv | Kind::Alltoallw => Pile::Everyone,
            _ => Pile::Nowhere,
        }
    }
}

/// `MATCHSHIM_COLL=auto`: the fewest ranks at which the shim's gather of small blocks (size
/// classes up to [`AUTO_MAX_SIZE_CLASS`]) runs: where the root gets as many blocks at once as
/// every rank of an all-to-all does at [`AUTO_ALLTOALL_RANKS`]. At 8 ranks it lost on a quiet
/// 16-core node: 1.4–2.4× MPI's time at 8 B on both MPIs, and the FDS-like hot spot's gathers
/// in three of four runs (docs/performance.md); fewer than 32 are not measured beyond that.
pub const AUTO_GATHER_RANKS: i32 = 32;
/// The fewest ranks at which the shim's gather of blocks of [`AUTO_LARGE_GATHER_CLASS`] runs:
/// its root receives every block straight from its rank, where MPI's binomial tree moves
/// blocks through other ranks first. On that node, 64 KiB blocks: 0.48–0.71× MPI's time at 4
/// and 8 ranks, both MPIs, both runs; 0.89–1.22× at 2 ranks.
pub const AUTO_LARGE_GATHER_RANKS: i32 = 4;
/// The size class of those blocks: 32 KiB to 128 KiB (measured at 64 KiB).
pub const AUTO_LARGE_GATHER_CLASS: u8 = 7;
/// The fewest ranks for the shim's all-to-all: 1.9× MPI's time at 8 ranks, so only where
/// every rank gets at least as many blocks at once as the gather's root gets at 32.
pub const AUTO_ALLTOALL_RANKS: i32 = 32;
/// The largest size class of small blocks the shim runs under `auto` (up to 2 KiB): larger
/// blocks cost their transfer, not their matching. `v` and `w` forms (class [`VARYING`])
/// decide by ranks.
pub const AUTO_MAX_SIZE_CLASS: u8 = 4;

/// Whether the shim may run `kind` in `form` on `ranks` ranks under `auto`, before the call's
/// size class is known: `false` sends the call to MPI at once. Nonblocking collectives always
/// go to MPI: a schedule of the shim's needs the shim's progress until it ends, and blocking
/// collectives that MPI runs give it none.
pub fn shim_may_pay(kind: Kind, form: Form, ranks: i32) -> bool {
    form == Form::Blocking
        && match kind.pile() {
            Pile::Root if kind == Kind::Gather => ranks >= AUTO_LARGE_GATHER_RANKS,
            Pile::Root => ranks >= AUTO_GATHER_RANKS,
            Pile::Everyone => ranks >= AUTO_ALLTOALL_RANKS,
            Pile::Nowhere => false,
        }
}

/// Whether the shim runs a call of `kind` in `form` on `ranks` ranks whose blocks are of
/// `size_class` under `auto`. Every rank decides alike without communicating: the kind, the
/// form, the communicator's size and the size class are the same on every rank (the tags
/// carry the class, taken from the arguments MPI requires to match; [`VARYING`] for `v` and
/// `w` forms, whose counts a non-root rank does not know).
pub fn shim_pays(kind: Kind, form: Form, ranks: i32, size_class: u8) -> bool {
    let small = size_class == VARYING || size_class <= AUTO_MAX_SIZE_CLASS;
    form == Form::Blocking
        && match kind.pile() {
            Pile::Root => {
                (small && ranks >= AUTO_GATHER_RANKS)
                    || (size_class == AUTO_LARGE_GATHER_CLASS && ranks >= AUTO_LARGE_GATHER_RANKS)
            }
            Pile::Everyone => small && ranks >= AUTO_ALLTOALL_RANKS,
            Pile::Nowhere => false,
        }
}

/// The size class of `count` elements of `type_size` bytes; `None` for a negative count.
pub fn block_class(count: i32, type_size: i64) -> Option<u8> {
    (count >= 0).then(|| size_class(count as i64 * type_size))
}

/// Blocking and nonblocking collectives are numbered apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Blocking,
    Nonblocking,
}

/// How tags on the private duplicates carry the call number, kind and size class.
#[derive(Clone, Copy, Debug)]
pub struct TagLayout {
    call_mask: u32,
}

const KIND_SHIFT: u32 = 4;
const CALL_SHIFT: u32 = 9;

impl TagLayout {
    /// The layout for tags up to `tag_ub` (`MPI_TAG_UB`, at least 32767 by the standard).
    pub fn new(tag_ub: i32) -> TagLayout {
        let bits = 32 - (tag_ub.max(32767) as u32).leading_zeros();
        TagLayout {
            call_mask: (1u32 << (bits - CALL_SHIFT)) - 1,
        }
    }

    /// The tag of call number `call` among the calls of its `form` on the communicator.
    pub fn tag(&self, call: u32, form: Form, kind: Kind, size_class: u8) -> i32 {
        let call = call << 1 | (form == Form::Nonblocking) as u32;
        ((call & self.call_mask) << CALL_SHIFT | (kind as u32) << KIND_SHIFT | size_class as u32)
            as i32
    }

    /// The class of a message with `tag` on a private duplicate.
    #[inline]
    pub fn class_of(&self, tag: i32) -> Class {
        Class::Collective {
            kind: (tag as u32 >> KIND_SHIFT & 31) as u8,
            size_class: (tag & 15) as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_runs_only_blocking_gathers_and_all_to_alls_of_small_blocks_at_scale() {
        for kind in Kind::ALL {
            for ranks in [1, 2, 4, 7, 8, 16, 31, 32, 1024] {
                let pays = shim_pays(kind, Form::Blocking, ranks, 0);
                let expected = match kind {
                    Kind::Gather | Kind::Gatherv => ranks >= 32,
                    Kind::Alltoall | Kind::Alltoallv | Kind::Alltoallw => ranks >= 32,
                    _ => false,
                };
                assert_eq!(pays, expected, "{} at {ranks} ranks", kind.name());
                let may = expected || (kind == Kind::Gather && ranks >= 4);
                assert_eq!(shim_may_pay(kind, Form::Blocking, ranks), may);
                assert!(!shim_pays(kind, Form::Nonblocking, ranks, 0));
            }
        }
    }

    #[test]
    fn auto_runs_gathers_of_large_blocks_from_four_ranks_and_decides_varying_ones_by_ranks() {
        let pays = |kind, ranks, class| shim_pays(kind, Form::Blocking, ranks, class);
        assert!(pays(Kind::Gather, 32, size_class(2048)));
        assert!(!pays(Kind::Gather, 32, size_class(2049)));
        for bytes in [(32 << 10) + 1, 64 << 10, 128 << 10] {
            assert!(pays(Kind::Gather, 4, size_class(bytes)), "{bytes} B");
            assert!(!pays(Kind::Gather, 2, size_class(bytes)), "{bytes} B");
            assert!(!pays(Kind::Scatter, 8, size_class(bytes)), "{bytes} B");
        }
        assert!(!pays(Kind::Gather, 8, size_class(32 << 10)));
        assert!(!pays(Kind::Gather, 8, size_class((128 << 10) + 1)));
        assert!(!pays(Kind::Alltoall, 64, size_class(64 << 10)));
        assert!(pays(Kind::Gatherv, 32, VARYING));
        assert!(pays(Kind::Alltoallw, 32, VARYING));
        assert!(!pays(Kind::Gatherv, 8, VARYING));
    }

    #[test]
    fn a_blocks_class_is_its_bytes_and_none_for_a_negative_count() {
        assert_eq!(block_class(8192, 8), Some(7));
        assert_eq!(block_class(0, 8), Some(0));
        assert_eq!(block_class(-1, 8), None);
    }

    #[test]
    fn size_classes_grow_by_factors_of_four() {
        let cases = [
            (0, 0),
            (8, 0),
            (9, 1),
            (32, 1),
            (33, 2),
            (128, 2),
            (1024, 4),
            (65536, 7),
        ];
        for (bytes, class) in cases {
            assert_eq!(size_class(bytes), class, "{bytes} bytes");
        }
        assert_eq!(size_class(1 << 40), 14);
    }

    #[test]
    fn tags_stay_in_range_and_carry_kind_and_class() {
        for tag_ub in [32767, (1 << 28) - 1, i32::MAX] {
            let layout = TagLayout::new(tag_ub);
            for call in [0, 1, 77, u32::MAX >> 1] {
                for form in [Form::Blocking, Form::Nonblocking] {
                    for kind in Kind::ALL {
                        let tag = layout.tag(call, form, kind, 13);
                        assert!((0..=tag_ub).contains(&tag), "tag {tag} above {tag_ub}");
                        assert_eq!(layout.class_of(tag), kind.class(13));
                    }
                }
            }
            // Consecutive calls, and the two forms of one call number, get different tags.
            let tag = |call, form| layout.tag(call, form, Kind::Bcast, 0);
            assert_ne!(tag(5, Form::Blocking), tag(6, Form::Blocking));
            assert_ne!(tag(5, Form::Blocking), tag(5, Form::Nonblocking));
        }
    }
}
