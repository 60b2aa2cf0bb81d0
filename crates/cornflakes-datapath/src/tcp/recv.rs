//! The receive path: one `RECV` per connection into its pool buffer,
//! frames cut out of what arrived, messages that outgrow the buffer
//! reassembled into one of their size, and bad input closing only its
//! connection.
//!
//! While a receive is posted the kernel writes into `Conn::rbuf`: nothing
//! here touches its bytes until the completion has been reaped.

use std::os::fd::AsRawFd;

use cornflakes::AllocError;
use io_uring::{opcode, types};

use super::completion::{user_data, KIND_RECV};
use super::conn::State;
use super::{read_frame_header, sys, Framing, TcpDatapath};
use crate::{Received, PACKET_HEADER_LEN};

/// What the bytes received so far hold.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Scan {
    /// Complete frames: (message id, offset of the message, its length).
    pub(super) frames: usize,
    /// Bytes consumed by the complete frames.
    pub(super) consumed: usize,
    /// Bytes the buffer must hold for the next frame (at least its
    /// header).
    pub(super) next_frame: usize,
    /// A frame announced more than the limit.
    pub(super) bad: bool,
}

/// Finds the complete frames in `bytes`, appending them to `out`. Never
/// panics, whatever `bytes` holds.
pub(super) fn scan(bytes: &[u8], max_message: usize, out: &mut Vec<(u32, usize, usize)>) -> Scan {
    let mut pos = 0;
    let start = out.len();
    loop {
        let Some((id, len)) = read_frame_header(&bytes[pos..]) else {
            return Scan { frames: out.len() - start, consumed: pos, next_frame: PACKET_HEADER_LEN, bad: false };
        };
        if len > max_message {
            return Scan { frames: out.len() - start, consumed: pos, next_frame: 0, bad: true };
        }
        let end = pos + PACKET_HEADER_LEN + len;
        if end > bytes.len() {
            return Scan { frames: out.len() - start, consumed: pos, next_frame: PACKET_HEADER_LEN + len, bad: false };
        }
        out.push((id, pos + PACKET_HEADER_LEN, len));
        pos = end;
    }
}

impl TcpDatapath {
    /// Delivers what connection `i` has received and posts its next
    /// receive. Leaves it marked when it must wait (messages not taken,
    /// no buffer, submission queue full): false then.
    pub(super) fn service_recv(&mut self, i: usize) -> bool {
        if self.bufring.is_some() {
            return self.service_recv_multi(i);
        }
        let Some(c) = self.conns.slots[i].conn.as_mut() else { return true };
        if c.state != State::Open || c.recv_posted {
            return true;
        }
        if self.ready.len() >= self.config.max_ready {
            self.tcp.recv_held_back += 1;
            return false;
        }
        let Some(buf) = c.rbuf.take() else {
            match self.pool.alloc(self.config.recv_buffer) {
                Ok(b) => c.rbuf = Some(b),
                Err(_) => {
                    self.tcp.recv_held_back += 1;
                    self.stats.dropped_no_buffer += 1;
                    return false;
                }
            }
            return self.post_recv(i);
        };
        let filled = c.rfilled;
        if self.config.framing == Framing::Raw {
            return self.deliver_raw(i, buf, filled);
        }
        let mut frames = std::mem::take(&mut self.frames);
        frames.clear();
        let s = scan(&buf.as_slice()[..filled], self.config.max_message, &mut frames);
        if s.frames == 0 && !s.bad {
            if s.next_frame <= buf.len() {
                c.rbuf = Some(buf);
            } else {
                // A message larger than the buffer: move what arrived into
                // one of its size (bounded by max_message).
                let mut big = match self.pool.alloc(s.next_frame) {
                    Ok(big) => big,
                    Err(e) => {
                        c.rbuf = Some(buf);
                        self.frames = frames;
                        return self.no_buffer(i, &e);
                    }
                };
                big[..filled].copy_from_slice(&buf[..filled]);
                c.rbuf = Some(big);
                self.tcp.reassembled += 1;
            }
            self.frames = frames;
            return self.post_recv(i);
        }
        // The rest goes into a new buffer, sized for the next frame.
        let tail = filled - s.consumed;
        let next = if s.bad { None } else { Some(self.pool.alloc(s.next_frame.max(self.config.recv_buffer))) };
        let next = match next {
            Some(Err(e)) => {
                c.rbuf = Some(buf);
                self.frames = frames;
                return self.no_buffer(i, &e);
            }
            Some(Ok(mut b)) => {
                b[..tail].copy_from_slice(&buf[s.consumed..filled]);
                if s.next_frame > self.config.recv_buffer {
                    self.tcp.reassembled += 1;
                }
                Some(b)
            }
            None => None,
        };
        c.rfilled = tail;
        c.rbuf = next;
        let id = self.conns.id(i);
        let frozen = buf.freeze();
        for &(msg_id, at, len) in &frames {
            self.ready.push_back(Received { conn: id, msg_id, payload: frozen.slice(at..at + len) });
        }
        self.stats.received += frames.len() as u64;
        self.frames = frames;
        if s.bad {
            self.tcp.bad_frames += 1;
            self.stats.dropped_malformed += 1;
            self.begin_close(i, true);
            return true;
        }
        self.post_recv(i)
    }

    /// The pool had no buffer for connection `i`'s next frame: wait for
    /// one (back-pressure, false), unless the pool could never hold it,
    /// which closes the connection as a bad frame.
    fn no_buffer(&mut self, i: usize, e: &AllocError) -> bool {
        if let AllocError::TooLarge { .. } = e {
            self.tcp.bad_frames += 1;
            self.stats.dropped_malformed += 1;
            self.begin_close(i, true);
            return true;
        }
        self.tcp.recv_held_back += 1;
        self.stats.dropped_no_buffer += 1;
        false
    }

    /// [`Framing::Raw`]: whatever arrived is delivered as it is (one
    /// message, id 0, no copy) and the next receive goes into a new buffer;
    /// the application finds its own message boundaries.
    fn deliver_raw(&mut self, i: usize, buf: cornflakes::RcBufMut, filled: usize) -> bool {
        if filled == 0 {
            self.conns.slots[i].conn.as_mut().expect("live").rbuf = Some(buf);
            return self.post_recv(i);
        }
        let Ok(next) = self.pool.alloc(self.config.recv_buffer) else {
            self.conns.slots[i].conn.as_mut().expect("live").rbuf = Some(buf);
            self.tcp.recv_held_back += 1;
            self.stats.dropped_no_buffer += 1;
            return false;
        };
        let c = self.conns.slots[i].conn.as_mut().expect("live");
        c.rbuf = Some(next);
        c.rfilled = 0;
        let conn = self.conns.id(i);
        self.ready.push_back(Received { conn, msg_id: 0, payload: buf.freeze().slice(..filled) });
        self.stats.received += 1;
        self.post_recv(i)
    }

    /// Posts a receive into the rest of connection `i`'s buffer. False
    /// when the submission queue is full.
    fn post_recv(&mut self, i: usize) -> bool {
        if self.ring.submission().is_full() {
            let _ = self.submit();
        }
        let c = self.conns.slots[i].conn.as_mut().expect("servicing a live connection");
        let buf = c.rbuf.as_mut().expect("a receive buffer");
        debug_assert!(c.rfilled < buf.len());
        let room = buf.len() - c.rfilled;
        // SAFETY: `rfilled < len`, so the pointer stays inside the buffer.
        let at = unsafe { buf.as_mut_ptr().add(c.rfilled) };
        let entry = opcode::Recv::new(types::Fd(c.stream.as_raw_fd()), at, room.min(u32::MAX as usize) as u32)
            .build()
            .user_data(user_data(KIND_RECV, i));
        // SAFETY: `at..at + room` lies in `c.rbuf`, a pool buffer that this
        // connection keeps (and does not read or write) until the
        // completion is reaped; the connection's slot is freed only when no
        // request names it, and `Drop` waits for or leaks outstanding ones.
        if !unsafe { sys::push(&mut self.ring, &entry) } {
            return false;
        }
        c.recv_posted = true;
        c.ops += 1;
        self.kernel_ops += 1;
        true
    }

    /// A receive on connection `i` completed with `res`.
    pub(super) fn on_recv(&mut self, i: usize, res: i32) {
        let Some(c) = self.conns.get_mut(i) else { return };
        c.ops -= 1;
        c.recv_posted = false;
        if c.state != State::Open || self.closing {
            self.maybe_free(i);
            return;
        }
        if res > 0 {
            c.rfilled += res as usize;
            self.mark_recv(i);
            return;
        }
        if res == 0 {
            if c.rfilled > 0 {
                self.tcp.truncated_frames += 1;
                self.stats.dropped_malformed += 1;
            }
            self.tcp.peer_closed += 1;
            self.begin_close(i, true);
            return;
        }
        if matches!(-res, libc::EAGAIN | libc::EINTR | libc::ENOBUFS) {
            self.mark_recv(i);
            return;
        }
        if c.rfilled > 0 {
            self.tcp.truncated_frames += 1;
            self.stats.dropped_malformed += 1;
        }
        self.tcp.errors += 1;
        self.begin_close(i, true);
    }

    /// Moves up to `max` delivered messages to `out`.
    pub(super) fn take_ready(&mut self, out: &mut Vec<crate::Received>, max: usize) -> usize {
        let n = max.min(self.ready.len());
        out.extend(self.ready.drain(..n));
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::write_frame_header;

    fn frame(id: u32, body: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 8];
        write_frame_header(&mut f, id, body.len());
        f.extend_from_slice(body);
        f
    }

    #[test]
    fn scans_whole_partial_and_bad_frames() {
        let mut bytes = frame(1, b"abc");
        bytes.extend(frame(2, b""));
        bytes.extend(&frame(3, &[9; 100])[..50]);
        let mut out = Vec::new();
        let s = scan(&bytes, 1000, &mut out);
        assert_eq!(out, vec![(1, 8, 3), (2, 19, 0)]);
        assert_eq!(s, Scan { frames: 2, consumed: 19, next_frame: 108, bad: false });
        out.clear();
        let s = scan(&bytes[..5], 1000, &mut out);
        assert_eq!(s, Scan { frames: 0, consumed: 0, next_frame: 8, bad: false });
        let s = scan(&bytes, 50, &mut out);
        assert!(s.bad && s.frames == 2 && s.consumed == 19, "{s:?}");
    }

    #[test]
    fn scan_never_panics_on_noise() {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut out = Vec::new();
        for _ in 0..2000 {
            let n = (x % 300) as usize;
            let bytes: Vec<u8> = (0..n)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 7) as u8
                })
                .collect();
            out.clear();
            let s = scan(&bytes, 64, &mut out);
            assert!(s.consumed <= bytes.len());
            assert!(out.iter().all(|&(_, at, len)| at + len <= bytes.len()));
        }
    }
}
