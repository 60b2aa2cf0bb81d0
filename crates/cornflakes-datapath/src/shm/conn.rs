//! The connection table: one [`Conn`] per peer (a ring each way, the
//! set-up socket, the mapping of the peer's shared pool, the sends in
//! flight), kept in generation-numbered slots so that a stale [`ConnId`]
//! of a reclaimed connection never reaches its successor.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;

use cornflakes::RcBuf;

use super::lease::{Ledger, ParkedReturn};
use super::proto::Desc;
use super::receive::PeerPool;
use super::ring::{RingConsumer, RingProducer};
use crate::ConnId;

/// One connection: a ring each way, the socket, the peer's shared pool.
pub(super) struct Conn {
    pub(super) tx: RingProducer,
    pub(super) rx: RingConsumer,
    /// Sends holding pool descriptors, oldest first: (send number, buffer).
    pub(super) inflight: VecDeque<(u64, RcBuf)>,
    /// Pool-descriptor sends so far (numbered from 1).
    pub(super) zc_sent: u64,
    /// Highest send number the peer acknowledged.
    pub(super) zc_acked: u64,
    /// Records needing acknowledgement consumed from `rx`.
    pub(super) zc_received: u64,
    /// Last value published in `rx`'s acknowledgement word.
    pub(super) zc_reported: u64,
    /// Records of `rx` received in place and not yet acknowledged.
    pub(super) ledger: Ledger,
    /// Scratch for the descriptors of the record being received.
    pub(super) descs: Vec<Desc>,
    pub(super) peer_max_message: usize,
    pub(super) full_streak: u32,
    /// Published to since the last wake-up check (listed in the
    /// datapath's `to_wake`).
    pub(super) wake_pending: bool,
    /// The peer is gone: drain `rx`, then reclaim.
    pub(super) dead: bool,
    /// `rx` is corrupt: reclaim without draining.
    pub(super) corrupt: bool,
    pub(super) peer: PeerPool,
    pub(super) sock: UnixStream,
    /// Records built while `tx` was full, oldest first: published before
    /// anything newer, by the next send, flush or completion poll.
    pub(super) parked: VecDeque<ParkedRecord>,
    /// Body bytes in `parked`.
    pub(super) parked_bytes: usize,
    /// The peer accepts [`DESC_RETURN`](super::proto::DESC_RETURN)
    /// descriptors (its hello said so).
    pub(super) peer_accepts_returns: bool,
    /// We accept them: an acknowledgement is applied only once `rx` has
    /// been consumed past what the peer had published when we read it.
    pub(super) defer_acks: bool,
    /// An acknowledgement read but not applied yet: (count, position of
    /// `rx` the consumer must reach first).
    pub(super) pending_ack: Option<(u64, u64)>,
}

/// A record that did not fit in the ring when it was sent: its body as it
/// will be published, and its header's info word. Any pool buffers it names
/// are already in [`Conn::inflight`] under its send number; the leases of
/// the peer's bytes it returns by reference are kept in `returns` until it
/// is published.
pub(super) struct ParkedRecord {
    pub(super) body: Vec<u8>,
    pub(super) info: u32,
    pub(super) returns: Vec<ParkedReturn>,
}

impl Conn {
    /// Releases the buffers of every pool-descriptor send the peer has
    /// acknowledged; returns how many sends completed.
    ///
    /// When we accept returned values, a record the peer published before
    /// its acknowledgement may name one of these buffers: the count is
    /// applied only once `rx` has been consumed past every record published
    /// when it was read (the peer publishes such a record before it
    /// acknowledges the one that brought the value).
    pub(super) fn release_acked(&mut self) -> usize {
        if self.inflight.is_empty() {
            return 0;
        }
        if !self.defer_acks {
            return self.apply_ack(self.tx.acked());
        }
        let head = self.rx.head();
        let mut done = 0;
        if let Some((acked, at)) = self.pending_ack {
            if head < at {
                return 0;
            }
            self.pending_ack = None;
            done = self.apply_ack(acked);
        }
        let acked = self.tx.acked();
        if acked <= self.zc_acked {
            return done;
        }
        // Read after the acknowledgement (acquire): every record the peer
        // published before it is below this position. The scan runs from
        // `head`, and the next one only once `head` has passed this `end`,
        // so no record is scanned twice: however often a peer acknowledges,
        // the scans cost at most one step per record we receive.
        let (end, _) = self.rx.published_end();
        if head >= end {
            done + self.apply_ack(acked)
        } else {
            self.pending_ack = Some((acked, end));
            done
        }
    }

    /// Releases the sends up to `acked`, a count the peer published.
    fn apply_ack(&mut self, acked: u64) -> usize {
        // A peer can only acknowledge what was sent, never go back.
        if acked <= self.zc_acked || acked > self.zc_sent {
            return 0;
        }
        let done = (acked - self.zc_acked) as usize;
        self.zc_acked = acked;
        while self.inflight.front().is_some_and(|(seq, _)| *seq <= acked) {
            self.inflight.pop_front();
        }
        done
    }

    /// From now on nothing more is received: acknowledgements apply at once.
    pub(super) fn stop_deferring_acks(&mut self) {
        if let Some((acked, _)) = self.pending_ack.take() {
            self.apply_ack(acked);
        }
        self.defer_acks = false;
    }
}

/// A slot of the connection table.
pub(super) struct Slot {
    pub(super) generation: u16,
    pub(super) conn: Option<Conn>,
}

/// The id of the connection in slot `index` at `generation`.
#[inline(always)]
pub(super) fn conn_id(index: usize, generation: u16) -> ConnId {
    ConnId(((generation as u32) << 16) | index as u32)
}

/// The slot index an id names (its generation is checked by the caller).
#[inline(always)]
pub(super) fn slot_of(id: ConnId) -> usize {
    (id.0 & 0xFFFF) as usize
}

/// The generation an id names.
#[inline(always)]
pub(super) fn generation_of(id: ConnId) -> u16 {
    (id.0 >> 16) as u16
}
