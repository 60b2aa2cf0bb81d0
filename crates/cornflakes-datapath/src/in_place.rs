//! Messages received in place ([`Datapath::recv_batch_in_place`]): the
//! bytes in our memory plus, from a trusted shared-memory peer, zero-copy
//! segments left in the peer's pool as leased [`PeerSlice`]s.
//!
//! [`Datapath::recv_batch_in_place`]: crate::Datapath::recv_batch_in_place

use cornflakes::RcBuf;
use smallvec::SmallVec;

use crate::shm::{LeaseExpired, PeerSlice};
use crate::{ConnId, Received};

/// One message received in place: its bytes in order, each run either in
/// [`local`](Self::local) (our memory) or in a peer's pool.
#[derive(Debug)]
pub struct InPlace {
    /// Who sent it (reply with the same id).
    pub conn: ConnId,
    /// The sender's message id.
    pub msg_id: u32,
    /// The bytes in our memory: the first segment, then each segment the
    /// sender copied, in message order (the whole message when
    /// [`peer_segments`](Self::peer_segments) is 0).
    local: RcBuf,
    /// The message's runs in order; empty when it is all `local`.
    parts: Parts,
    len: usize,
}

/// The runs of a message received in place (inline: a response with a
/// few zero-copy values allocates nothing for them).
pub(crate) type Parts = SmallVec<[Part; 4]>;

/// One run of a message received in place.
#[derive(Clone, Debug)]
pub(crate) enum Part {
    /// `len` bytes of `local` from `at`.
    Local { at: usize, len: usize },
    /// Bytes of the peer's pool.
    Peer(PeerSlice),
    /// A value of ours the peer returned by reference: our own buffer.
    Own(RcBuf),
}

impl Part {
    fn len(&self) -> usize {
        match self {
            Part::Local { len, .. } => *len,
            Part::Peer(s) => s.len(),
            Part::Own(b) => b.len(),
        }
    }
}

/// A range of an [`InPlace`] message: in our memory, or leased in the
/// peer's.
#[derive(Clone, Debug)]
pub enum Span<'a> {
    /// Bytes in our memory.
    Local(&'a [u8]),
    /// Bytes left in the peer's pool (read by copying out).
    Peer(PeerSlice),
}

impl Span<'_> {
    /// Its length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Span::Local(b) => b.len(),
            Span::Peer(s) => s.len(),
        }
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A copy of the bytes.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] when the bytes were leased and the lease expired.
    pub fn to_vec(&self) -> Result<Vec<u8>, LeaseExpired> {
        match self {
            Span::Local(b) => Ok(b.to_vec()),
            Span::Peer(s) => s.to_vec(),
        }
    }
}

impl From<Received> for InPlace {
    /// A message wholly in our memory.
    fn from(r: Received) -> Self {
        let len = r.payload.len();
        InPlace { conn: r.conn, msg_id: r.msg_id, local: r.payload, parts: Parts::new(), len }
    }
}

impl InPlace {
    /// A message of `local`'s bytes laid out as `parts` say (the local
    /// parts name consecutive ranges of `local`, the first from 0).
    pub(crate) fn with_parts(conn: ConnId, msg_id: u32, local: RcBuf, parts: Parts) -> Self {
        let len = parts.iter().map(Part::len).sum();
        InPlace { conn, msg_id, local, parts, len }
    }

    /// The message's length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many of its runs are left in the peer's pool.
    pub fn peer_segments(&self) -> usize {
        self.parts.iter().filter(|p| matches!(p, Part::Peer(_))).count()
    }

    /// How many of its runs are values of ours the peer returned by
    /// reference ([`ShmConfig::accept_returns`](crate::shm::ShmConfig::accept_returns)).
    pub fn returned_segments(&self) -> usize {
        self.parts.iter().filter(|p| matches!(p, Part::Own(_))).count()
    }

    /// The message as one buffer of our memory, when no part of it is left
    /// in the peer's pool.
    pub fn as_local(&self) -> Option<&RcBuf> {
        self.parts.is_empty().then_some(&self.local)
    }

    /// The message's first bytes that lie in one run of our memory, up to
    /// the first run left in the peer's pool or returned to us (a
    /// Cornflakes message's header and copied fields are there).
    pub fn local_prefix(&self) -> &[u8] {
        if self.parts.is_empty() {
            return &self.local;
        }
        let mut end = 0;
        for p in &self.parts {
            match p {
                Part::Local { len, .. } => end += len,
                Part::Peer(_) | Part::Own(_) => break,
            }
        }
        &self.local[..end]
    }

    /// The message's runs in order, each where it lies: what to hand
    /// [`Datapath::push_spans`](crate::Datapath::push_spans) to send the
    /// message on as it is (the bytes of ours copied, a peer's runs back
    /// to that peer by reference).
    pub fn spans(&self) -> impl Iterator<Item = Span<'_>> + '_ {
        let whole = self.parts.is_empty().then(|| Span::Local(&self.local[..]));
        whole.into_iter().chain(self.parts.iter().map(|p| match p {
            Part::Local { at, len } => Span::Local(&self.local[*at..at + len]),
            Part::Peer(s) => Span::Peer(s.clone()),
            Part::Own(b) => Span::Local(b),
        }))
    }

    /// Bytes `offset..offset + len` of the message, when they lie within
    /// one run (a zero-copy field is one run); `None` when they are out of
    /// bounds or span runs.
    pub fn span(&self, offset: usize, len: usize) -> Option<Span<'_>> {
        let end = offset.checked_add(len)?;
        if end > self.len {
            return None;
        }
        if self.parts.is_empty() {
            return Some(Span::Local(&self.local[offset..end]));
        }
        let mut start = 0;
        for p in &self.parts {
            let n = p.len();
            if offset >= start && end <= start + n {
                let rel = offset - start;
                return match p {
                    Part::Local { at, .. } => Some(Span::Local(&self.local[at + rel..at + rel + len])),
                    Part::Peer(s) => s.slice(rel, len).map(Span::Peer),
                    Part::Own(b) => Some(Span::Local(&b[rel..rel + len])),
                };
            }
            // An empty range at a run's end belongs to that run.
            start += n;
            if offset < start {
                return None;
            }
        }
        None
    }

    /// Copies the whole message into `dst`, which must be exactly as long
    /// (a message left in the peer's pool, moved into a buffer of ours in
    /// one copy).
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] when a leased run expired (`dst` is then partly
    /// written).
    ///
    /// # Panics
    ///
    /// When `dst.len() != self.len()`, as `<[u8]>::copy_from_slice` does.
    pub fn copy_to_slice(&self, dst: &mut [u8]) -> Result<(), LeaseExpired> {
        self.copy_with(dst, <[u8]>::copy_from_slice, PeerSlice::copy_to_slice)
    }

    /// [`copy_to_slice`](Self::copy_to_slice) as
    /// [`copy_for_peer`](crate::shm::copy_for_peer) makes it (streaming
    /// stores for large runs): for a copy that another process reads next,
    /// such as a reply sent by descriptor.
    ///
    /// # Errors
    ///
    /// As [`copy_to_slice`](Self::copy_to_slice).
    ///
    /// # Panics
    ///
    /// When `dst.len() != self.len()`.
    pub fn copy_for_peer(&self, dst: &mut [u8]) -> Result<(), LeaseExpired> {
        self.copy_with(dst, crate::shm::copy_for_peer, PeerSlice::copy_for_peer)
    }

    fn copy_with(
        &self,
        dst: &mut [u8],
        local: fn(&mut [u8], &[u8]),
        peer: fn(&PeerSlice, &mut [u8]) -> Result<(), LeaseExpired>,
    ) -> Result<(), LeaseExpired> {
        assert_eq!(dst.len(), self.len, "InPlace: copy destination length differs");
        if self.parts.is_empty() {
            local(dst, &self.local);
            return Ok(());
        }
        let mut at = 0;
        for p in &self.parts {
            let n = p.len();
            match p {
                Part::Local { at: from, len } => local(&mut dst[at..at + n], &self.local[*from..from + len]),
                Part::Peer(s) => peer(s, &mut dst[at..at + n])?,
                Part::Own(b) => local(&mut dst[at..at + n], b),
            }
            at += n;
        }
        Ok(())
    }

    /// Whether the message's bytes equal `other` (leased runs compared
    /// where they lie, as [`PeerSlice::eq_bytes`] does).
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] when a leased run expired.
    pub fn eq_bytes(&self, other: &[u8]) -> Result<bool, LeaseExpired> {
        if other.len() != self.len {
            return Ok(false);
        }
        if self.parts.is_empty() {
            return Ok(self.local[..] == *other);
        }
        let mut at = 0;
        for p in &self.parts {
            let n = p.len();
            let same = match p {
                Part::Local { at: from, len } => self.local[*from..from + len] == other[at..at + n],
                Part::Peer(s) => s.eq_bytes(&other[at..at + n])?,
                Part::Own(b) => b[..] == other[at..at + n],
            };
            if !same {
                return Ok(false);
            }
            at += n;
        }
        Ok(true)
    }

    /// A copy of the whole message in one vector.
    ///
    /// # Errors
    ///
    /// [`LeaseExpired`] when a leased run expired.
    pub fn to_vec(&self) -> Result<Vec<u8>, LeaseExpired> {
        if self.parts.is_empty() {
            return Ok(self.local.to_vec());
        }
        let mut v = Vec::with_capacity(self.len);
        for p in &self.parts {
            match p {
                Part::Local { at, len } => v.extend_from_slice(&self.local[*at..at + len]),
                Part::Peer(s) => v.extend_from_slice(&s.to_vec()?),
                Part::Own(b) => v.extend_from_slice(b),
            }
        }
        Ok(v)
    }
}
