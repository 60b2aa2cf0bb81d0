//! Owning a decoded message: generated code pairs every message type `M`
//! with `MOwned`, a [`PacketOwner`] (the received packet and the arena the
//! message was decoded into) together with the message that borrows from
//! them, as one value that can be returned, stored or sent to a later
//! stage. The self-reference is built by the `self_cell` crate, so no
//! `unsafe` is written here or in generated code.
//!
//! ```text
//! MOwned ──> heap: PacketOwner { pkt: RcBuf ──> pool slot, arena: Arena }
//!                  M<'_> ── borrows pkt (zero-copy fields) and arena (lists, nested)
//! ```

use crate::field::Arena;
use crate::mem::RcBuf;

/// What an owned decoded message owns: the packet it was decoded from and
/// the arena its lists and nested messages live in.
#[derive(Debug)]
pub struct PacketOwner {
    pkt: RcBuf,
    arena: Arena,
}

impl PacketOwner {
    /// Bundles a packet and the arena to decode it into.
    ///
    /// # Examples
    ///
    /// ```
    /// use cornflakes::{Arena, PacketOwner, Pool};
    /// let pool = Pool::new().unwrap();
    /// let owner = PacketOwner::new(pool.alloc_copy(b"packet").unwrap(), Arena::new(&pool));
    /// assert_eq!(&owner.packet()[..], b"packet");
    /// ```
    pub fn new(pkt: RcBuf, arena: Arena) -> Self {
        PacketOwner { pkt, arena }
    }

    /// The packet.
    pub fn packet(&self) -> &RcBuf {
        &self.pkt
    }

    /// The arena.
    pub fn arena(&self) -> &Arena {
        &self.arena
    }

    /// The packet and the arena, for reuse.
    pub fn into_parts(self) -> (RcBuf, Arena) {
        (self.pkt, self.arena)
    }
}
