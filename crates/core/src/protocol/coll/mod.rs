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
