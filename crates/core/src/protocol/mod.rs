//! The matching protocol the shim runs for MPI programs, with no MPI in it: per communicator
//! the takeover policy ([`policy`]), the engine with the posted and unexpected queues it holds
//! while the shim matches ([`queues`]), and the collectives' tags and schedules ([`coll`]). It
//! is driven by events (a receive posted, a message drained, a timed call, a clock value) and
//! answers with actions (a match found, a receive queued, the receives to hand to MPI in
//! posting order, a switch of mode). The shim executes it on MPI; the takeover model test and
//! the trace generator execute it on models of MPI.
//!
//! A communicator is in one of three modes. **Delegated**: receives and probes go to MPI with
//! the user's arguments and MPI matches them; the shim holds no queued element of the
//! communicator and only watches. **Takeover**: the shim drains every message that no receive
//! posted in MPI took (a wildcard matched probe) into its engine and matches it there.
//! **Held**: matching went back to MPI while the shim still holds unexpected messages it
//! drained (point 4).
//!
//! Why MPI's order holds across a switch:
//! 1. Delegated to takeover. Every receive MPI still holds was posted before any receive the
//!    shim will queue. MPI matches an arriving message against its own posted receives before
//!    the message can be probed, so a message that fits one of them goes to the earliest such,
//!    which is older than every receive in the shim: what one ordered list does. A message
//!    that fits none becomes unexpected in MPI; the drain moves MPI's unexpected messages
//!    oldest first (per source, send order), so the engine sees them in a legal order.
//! 2. Takeover to delegated, only when the shim holds no unexpected message of the
//!    communicator, after its waiting receives were handed to MPI in posting order
//!    ([`Queues::give_back`]): messages still inside MPI are younger than every message the
//!    shim had, and MPI matches the receives handed over and those posted later in posting
//!    order.
//! 3. Before a blocking call that MPI runs (a collective, a communicator constructor), every
//!    waiting receive is handed to MPI in posting order, since a peer may need one of them
//!    before it can join the call. If the shim holds unexpected messages it keeps them and the
//!    communicator is held (point 4): none of them fits a waiting receive (it would have
//!    matched), and every message still inside MPI is younger than all of them, so MPI
//!    matches the handed receives as one ordered list would.
//! 4. Held ([`Mode::Held`]), entered as in point 3, or from takeover when its searches stayed
//!    shallow while messages were held ([`GiveBack::KeepHeld`]). Nothing is drained, so the
//!    held messages can only leave. A receive or probe is first compared with them under the
//!    communicator's lock: one that a held message fits takes the earliest such, which is
//!    older than anything in MPI; any other goes to MPI, where every message is younger than
//!    the held ones, none of which fits it (they only leave). So each receive gets what one
//!    ordered list gives it. With none left held, the communicator is delegated (point 2's
//!    state). A takeover from held is point 1: the held messages stay first in arrival order.
//! 5. The drain runs only in takeover, and a receive decides where it goes under the
//!    communicator's lock; at `MPI_THREAD_MULTIPLE` a receive on its way into MPI holds a
//!    permit that the switch to takeover waits out ([`Takeover::enter_mpi`]; from held,
//!    [`Takeover::enter_mpi_held`]), so no receive reaches MPI after a message it should get
//!    was drained. A blocking receive or probe that goes to MPI as the user made it
//!    ([`PlainCall::blocks`]) cannot hold a permit while it waits there, since its message may
//!    need the thread that switches; it holds a blocking mark, taken and fenced as a permit
//!    is, and a switch to takeover that sees one stores the old mode back and gives up while
//!    it holds the lock, before anything was drained: the receive is in MPI before any drain
//!    can start, or saw the takeover and took the full path. Receives of different threads
//!    racing each other have no order in MPI.
//! 6. After the blocking call of point 3 (below `MPI_THREAD_MULTIPLE`, where no other
//!    receive can reach MPI meanwhile), the receives handed over (in posting order, so that
//!    MPI searches them as it would have without the shim) come back: cancelled in MPI
//!    youngest first, so the ones MPI still holds are always the oldest and a message it
//!    matches meanwhile goes to the oldest receive that fits, as in one ordered list. Where
//!    no message fits two of them, a message fits one receive of the loan wherever it waits,
//!    so they are cancelled oldest first, each cancel finding its receive at the front of
//!    those lent ([`Queues::lend`]). Those cancelled return to the queues in posting order,
//!    older than any receive posted later, and the shim takes over again (point 1, the held
//!    messages first). So a takeover of a long posted queue outlives a barrier between
//!    posting and sending. The cancelling may stop after any receive (where a cancel costs
//!    MPI a search of its queue, [`Takeover::taking_back_pays`]): those left in MPI are the
//!    oldest, the state of point 1, or, oldest first, receives that no message fitting one in
//!    the queues fits.
//!    Where MPI matched most of the loan ([`Takeover::takes_over_after_loan`]), those
//!    cancelled go back to MPI in posting order, younger than every receive it still holds,
//!    and MPI matches on: the state of point 2, or of point 4 where messages are held.
//!
//! `crates/core/tests/takeover_model.rs` checks this argument on a model: MPI's own queues,
//! these queues with every engine and random switches give exactly the matches of one
//! ordered list.

pub mod coll;
mod depth;
mod fence;
pub mod policy;
mod queues;

pub use depth::{Depths, Model, Order, Signals};
pub use policy::{Call, Entry, GiveBack, Mode, PlainCall, Policy, Takeover};
pub use queues::{Build, Inbox, Key, Loan, Posted, Probe, Queues};
