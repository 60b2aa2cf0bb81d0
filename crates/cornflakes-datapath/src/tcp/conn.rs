//! The connection table: slots numbered by index, each with a generation
//! so that a [`ConnId`] of a closed connection never names its successor.
//!
//! A slot is freed only when its connection has no request left in the
//! kernel (`ops == 0`): until then the kernel may still write its receive
//! buffer or read its queued messages.

use std::collections::VecDeque;
use std::net::TcpStream;

use cornflakes::{RcBuf, RcBufMut};
use smallvec::SmallVec;

use crate::ConnId;

/// Bits of a [`ConnId`] that hold the slot index; the rest hold the
/// generation.
pub(super) const INDEX_BITS: u32 = 20;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;

/// The id of slot `index` in generation `generation`.
#[inline(always)]
pub(super) fn conn_id(index: usize, generation: u32) -> ConnId {
    ConnId((generation << INDEX_BITS) | index as u32)
}

/// One message waiting for the socket, in wire order: its frame header is
/// at the start of `bufs[0]`.
pub(super) struct OutMsg {
    /// The segments, each with whether it is the application's buffer
    /// (eligible for `SENDMSG_ZC`) or one we copied. Inline up to four, so
    /// a typical message costs no allocation besides its first segment.
    pub(super) bufs: SmallVec<[(RcBuf, bool); 4]>,
    /// Bytes of all segments.
    pub(super) len: usize,
}

/// Where a connection is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum State {
    /// Sending and receiving.
    Open,
    /// Shut down (by the peer, an error, bad input or [`close`](super::TcpDatapath::close));
    /// waiting for its requests in the kernel to finish.
    Closing,
}

/// One connection.
pub(super) struct Conn {
    pub(super) stream: TcpStream,
    pub(super) state: State,
    /// The receive buffer being filled. While a receive is posted the
    /// kernel writes into it: Rust forms no reference to its bytes then.
    /// Multishot: the buffer a frame spanning chunks is assembled in (the
    /// kernel never writes it).
    pub(super) rbuf: Option<RcBufMut>,
    /// Bytes of `rbuf` received so far.
    pub(super) rfilled: usize,
    /// Multishot: received chunks not yet taken in (the pool had no buffer
    /// for the frame they continue), in order.
    pub(super) stash: VecDeque<RcBuf>,
    pub(super) recv_posted: bool,
    /// Queued for [`TcpDatapath::pump`](super::TcpDatapath) to post a receive.
    pub(super) want_recv: bool,
    /// Messages not yet wholly accepted by the socket.
    pub(super) queue: VecDeque<OutMsg>,
    pub(super) queued_bytes: usize,
    /// Bytes of `queue.front()` the socket has accepted.
    pub(super) head_sent: usize,
    pub(super) send_posted: bool,
    /// Queued for a send to be posted.
    pub(super) want_send: bool,
    /// Requests in the kernel that name this connection (receive, sends
    /// until their last completion or notification).
    pub(super) ops: u32,
}

impl Conn {
    pub(super) fn new(stream: TcpStream) -> Self {
        Self {
            stream,
            state: State::Open,
            rbuf: None,
            rfilled: 0,
            stash: VecDeque::new(),
            recv_posted: false,
            want_recv: false,
            queue: VecDeque::new(),
            queued_bytes: 0,
            head_sent: 0,
            send_posted: false,
            want_send: false,
            ops: 0,
        }
    }
}

/// A slot of the table.
pub(super) struct Slot {
    pub(super) generation: u32,
    pub(super) conn: Option<Conn>,
}

/// Connections by index.
#[derive(Default)]
pub(super) struct ConnTable {
    pub(super) slots: Vec<Slot>,
    free: Vec<u32>,
    pub(super) live: usize,
}

impl ConnTable {
    /// Stores `conn`; `None` when `max` connections are live.
    pub(super) fn insert(&mut self, conn: Conn, max: usize) -> Option<(usize, ConnId)> {
        if self.live >= max {
            return None;
        }
        let index = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.slots.push(Slot { generation: 0, conn: None });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[index];
        slot.conn = Some(conn);
        self.live += 1;
        Some((index, conn_id(index, slot.generation)))
    }

    /// The slot index of `id` when it names a live (open or closing)
    /// connection of the current generation.
    #[inline]
    pub(super) fn index(&self, id: ConnId) -> Option<usize> {
        let index = (id.0 & INDEX_MASK) as usize;
        let slot = self.slots.get(index)?;
        (slot.conn.is_some() && slot.generation == id.0 >> INDEX_BITS).then_some(index)
    }

    #[inline]
    pub(super) fn get_mut(&mut self, index: usize) -> Option<&mut Conn> {
        self.slots.get_mut(index)?.conn.as_mut()
    }

    #[inline]
    pub(super) fn id(&self, index: usize) -> ConnId {
        conn_id(index, self.slots[index].generation)
    }

    /// Frees slot `index` (its connection has no request in the kernel);
    /// the next connection there gets a new generation.
    pub(super) fn remove(&mut self, index: usize) -> Option<Conn> {
        let slot = &mut self.slots[index];
        let conn = slot.conn.take()?;
        slot.generation = (slot.generation + 1) & ((1 << (32 - INDEX_BITS)) - 1);
        self.free.push(index as u32);
        self.live -= 1;
        Some(conn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_freed_slots_do_not_name_their_successors() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut t = ConnTable::default();
        let (i, a) = t.insert(Conn::new(TcpStream::connect(addr).unwrap()), 2).unwrap();
        assert_eq!(t.index(a), Some(i));
        t.remove(i);
        assert_eq!(t.index(a), None);
        let (j, b) = t.insert(Conn::new(TcpStream::connect(addr).unwrap()), 2).unwrap();
        assert_eq!(i, j);
        assert_ne!(a, b);
        assert_eq!(t.index(a), None);
        assert_eq!(t.index(b), Some(j));
        t.insert(Conn::new(TcpStream::connect(addr).unwrap()), 2).unwrap();
        assert!(t.insert(Conn::new(TcpStream::connect(addr).unwrap()), 2).is_none(), "bounded");
    }
}
