//! The receive path of [`RecvMode::Multishot`](super::RecvMode): one
//! multishot `RECV` per connection, selecting buffers from the datapath's
//! provided-buffer ring ([`BufRing`](super::bufring::BufRing)) of pool
//! buffers.
//!
//! Each completion hands back one filled buffer (a *chunk*). Frames that
//! lie whole in a chunk are delivered as slices of it, without a copy. A
//! frame that continues past the chunk is assembled in a pool buffer of its
//! size: its bytes are copied there from this and the following chunks.
//! The consumed buffer is replaced in the ring by a fresh pool buffer in
//! `pump`; not while [`TcpConfig::max_ready`](super::TcpConfig::max_ready)
//! messages wait for the application, so that the ring empties and the
//! kernel answers `ENOBUFS`: back-pressure on every connection, which is
//! not an error, and the receive is posted again once buffers are back.
//! When the pool has no buffer for a frame being assembled, the rest of
//! the chunk (and later ones) waits on the connection (`stash`) and no
//! receive is posted for it until it has been taken in.

use std::os::fd::AsRawFd;

use cornflakes::{AllocError, RcBuf};
use io_uring::{cqueue, opcode, types};

use super::bufring::BGID;
use super::completion::{user_data, KIND_RECV_MULTI};
use super::conn::State;
use super::recv::scan;
use super::{read_frame_header, sys, Framing, TcpDatapath};
use crate::{Received, PACKET_HEADER_LEN};

impl TcpDatapath {
    /// Replaces the ring buffers the kernel has consumed with new pool
    /// buffers, unless enough messages wait for the application.
    pub(super) fn refill_ring(&mut self) {
        let Some(ring) = self.bufring.as_mut() else { return };
        let mut added = false;
        while self.ready.len() < self.config.max_ready {
            let Some(&bid) = ring.empty.last() else { break };
            let Ok(buf) = self.pool.alloc(self.config.recv_buffer) else { break };
            ring.empty.pop();
            ring.provide(bid, buf);
            added = true;
        }
        if added {
            ring.publish();
        }
    }

    /// Takes in what waits on connection `i` and posts its multishot
    /// receive. False when it must wait (no pool buffer, an empty ring, a
    /// full submission queue).
    pub(super) fn service_recv_multi(&mut self, i: usize) -> bool {
        loop {
            let Some(c) = self.conns.get_mut(i) else { return true };
            if c.state != State::Open {
                return true;
            }
            let Some(chunk) = c.stash.pop_front() else { break };
            if let Some(rest) = self.consume(i, chunk) {
                if let Some(c) = self.conns.get_mut(i) {
                    c.stash.push_front(rest);
                }
                self.tcp.recv_held_back += 1;
                return false;
            }
        }
        let Some(c) = self.conns.get_mut(i) else { return true };
        if c.state != State::Open || c.recv_posted {
            return true;
        }
        if self.bufring.as_ref().is_some_and(|r| r.provided() == 0) {
            self.tcp.recv_held_back += 1;
            return false;
        }
        if self.ring.submission().is_full() {
            let _ = self.submit();
        }
        let c = self.conns.get_mut(i).expect("checked above");
        let entry = opcode::RecvMulti::new(types::Fd(c.stream.as_raw_fd()), BGID)
            .build()
            .user_data(user_data(KIND_RECV_MULTI, i));
        // SAFETY: the entry names no memory of ours but the buffer group,
        // whose ring and buffers live until the io_uring is closed (see
        // `BufRing`); the connection's slot is freed only after the
        // receive's last completion (one without `F_MORE`).
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            return false;
        }
        c.recv_posted = true;
        c.ops += 1;
        self.kernel_ops += 1;
        true
    }

    /// A completion of connection `i`'s multishot receive.
    pub(super) fn on_recv_multi(&mut self, i: usize, res: i32, flags: u32) {
        let more = cqueue::more(flags);
        let buf = match (cqueue::buffer_select(flags), self.bufring.as_mut()) {
            (Some(bid), Some(ring)) => ring.take(bid),
            _ => None,
        };
        if !more {
            self.kernel_ops -= 1;
        }
        let Some(c) = self.conns.get_mut(i) else { return };
        if !more {
            c.ops -= 1;
            c.recv_posted = false;
        }
        if c.state != State::Open || self.closing {
            self.maybe_free(i);
            return;
        }
        if res > 0 {
            let Some(mut buf) = buf else {
                // Data without a buffer: the kernel broke its contract.
                self.tcp.errors += 1;
                self.begin_close(i, true);
                return;
            };
            buf.truncate(res as usize);
            let chunk = buf.freeze();
            if !c.stash.is_empty() {
                c.stash.push_back(chunk);
            } else if let Some(rest) = self.consume(i, chunk) {
                if let Some(c) = self.conns.get_mut(i) {
                    c.stash.push_back(rest);
                }
                self.mark_recv(i);
            }
            if !more {
                self.mark_recv(i);
            }
            return;
        }
        let partial = c.rbuf.is_some() || !c.stash.is_empty();
        if res == 0 {
            if partial {
                self.tcp.truncated_frames += 1;
                self.stats.dropped_malformed += 1;
            }
            self.tcp.peer_closed += 1;
            self.begin_close(i, true);
            return;
        }
        if -res == libc::ENOBUFS {
            // The ring ran dry: back-pressure; posted again once refilled.
            self.tcp.recv_ring_empty += 1;
            self.mark_recv(i);
            return;
        }
        if matches!(-res, libc::EAGAIN | libc::EINTR) {
            self.mark_recv(i);
            return;
        }
        if partial {
            self.tcp.truncated_frames += 1;
            self.stats.dropped_malformed += 1;
        }
        self.tcp.errors += 1;
        self.begin_close(i, true);
    }

    /// Delivers the frames of `chunk`, received on connection `i`, and
    /// copies a frame that continues past it into the connection's
    /// assembly buffer. Returns the part not taken in when the pool has no
    /// buffer for that (back-pressure).
    pub(super) fn consume(&mut self, i: usize, chunk: RcBuf) -> Option<RcBuf> {
        let id = self.conns.id(i);
        if self.config.framing == Framing::Raw {
            self.ready.push_back(Received { conn: id, msg_id: 0, payload: chunk });
            self.stats.received += 1;
            return None;
        }
        const HDR: usize = PACKET_HEADER_LEN;
        let max = self.config.max_message;
        let mut at = 0;
        loop {
            let c = self.conns.get_mut(i).expect("consuming for a live connection");
            if let Some(part) = c.rbuf.as_mut() {
                // Continue the frame being assembled.
                let want = part.len();
                let take = (want - c.rfilled).min(chunk.len() - at);
                part[c.rfilled..c.rfilled + take].copy_from_slice(&chunk[at..at + take]);
                at += take;
                c.rfilled += take;
                if c.rfilled < want {
                    return None;
                }
                let (msg_id, len) = read_frame_header(part).expect("the buffer holds a header");
                if want == HDR && len > 0 {
                    // The header is complete: now the buffer for the frame.
                    if len > max {
                        return self.bad_frame(i);
                    }
                    match self.pool.alloc(HDR + len) {
                        Ok(mut frame) => {
                            frame[..HDR].copy_from_slice(&part[..HDR]);
                            c.rbuf = Some(frame);
                            if HDR + len > self.config.recv_buffer {
                                self.tcp.reassembled += 1;
                            }
                            continue;
                        }
                        Err(AllocError::TooLarge { .. }) => return self.bad_frame(i),
                        Err(_) => return Some(chunk.slice(at..)),
                    }
                }
                let frame = c.rbuf.take().expect("assembling").freeze();
                c.rfilled = 0;
                self.ready.push_back(Received { conn: id, msg_id, payload: frame.slice(HDR..HDR + len) });
                self.stats.received += 1;
                continue;
            }
            if at == chunk.len() {
                return None;
            }
            // Frames whole in the chunk: delivered in place.
            let mut frames = std::mem::take(&mut self.frames);
            frames.clear();
            let s = scan(&chunk[at..], max, &mut frames);
            for &(msg_id, off, len) in &frames {
                let payload = chunk.slice(at + off..at + off + len);
                self.ready.push_back(Received { conn: id, msg_id, payload });
            }
            self.stats.received += frames.len() as u64;
            self.frames = frames;
            at += s.consumed;
            if s.bad {
                return self.bad_frame(i);
            }
            if at == chunk.len() {
                return None;
            }
            // A frame continues past the chunk: assemble it (its header
            // first when even that is cut).
            let size = if chunk.len() - at >= HDR { s.next_frame } else { HDR };
            match self.pool.alloc(size) {
                Ok(part) => {
                    if size > self.config.recv_buffer {
                        self.tcp.reassembled += 1;
                    }
                    let c = self.conns.get_mut(i).expect("live");
                    c.rbuf = Some(part);
                    c.rfilled = 0;
                }
                Err(AllocError::TooLarge { .. }) => return self.bad_frame(i),
                Err(_) => return Some(chunk.slice(at..)),
            }
        }
    }

    /// A frame over the limit (or over what the pool can ever hold) on
    /// connection `i`: counted, and the connection closed.
    fn bad_frame(&mut self, i: usize) -> Option<RcBuf> {
        self.tcp.bad_frames += 1;
        self.stats.dropped_malformed += 1;
        self.begin_close(i, true);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::{write_frame_header, RecvMode, TcpConfig};
    use super::*;

    /// A byte stream of frames cut into chunks at pseudo-random places
    /// (headers included) comes out as the same frames, whole and in order,
    /// for chunk sizes from 1 byte to larger than most frames.
    #[test]
    fn frames_cut_anywhere_are_delivered_whole_and_in_order() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let config = TcpConfig { recv_mode: RecvMode::Multishot, recv_buffer: 4096, ..TcpConfig::loopback() };
        let mut dp = TcpDatapath::new(config).unwrap();
        let conn = dp.connect(listener.local_addr().unwrap()).unwrap();
        let i = dp.conns.index(conn).unwrap();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for max_chunk in [1, 7, 9, 100, 5000, 70_000] {
            let mut stream = Vec::new();
            let mut expected = Vec::new();
            for id in 0..200u32 {
                let len = match next(4) {
                    0 => 0,
                    1 => next(16) as usize,
                    2 => next(5000) as usize,
                    _ => next(20_000) as usize,
                };
                let body: Vec<u8> = (0..len).map(|_| next(256) as u8).collect();
                let mut h = [0u8; PACKET_HEADER_LEN];
                write_frame_header(&mut h, id, len);
                stream.extend_from_slice(&h);
                stream.extend_from_slice(&body);
                expected.push((id, body));
            }
            let mut at = 0;
            while at < stream.len() {
                let n = (1 + next(max_chunk) as usize).min(stream.len() - at);
                let chunk = dp.pool.alloc_copy(&stream[at..at + n]).unwrap();
                assert!(dp.consume(i, chunk).is_none(), "the pool has room");
                at += n;
            }
            let got: Vec<Received> = dp.ready.drain(..).collect();
            assert_eq!(got.len(), expected.len(), "chunks up to {max_chunk} B");
            for (r, (id, body)) in got.iter().zip(&expected) {
                assert_eq!((r.conn, r.msg_id), (conn, *id));
                assert!(r.payload[..] == body[..], "frame {id}, chunks up to {max_chunk} B");
            }
            let c = dp.conns.get_mut(i).unwrap();
            assert!(c.rbuf.is_none() && c.stash.is_empty());
        }
        assert_eq!(dp.tcp.bad_frames, 0);
    }
}
